/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * plabel: labeled profiling for native programs.
 *
 * The user/kernel interface of /dev/plabel: ioctls that intern label sets
 * and attach them to the calling thread, the per-thread fast-switch slot,
 * profiling sessions, and the record stream read() returns during a session.
 *
 * Conventions: every ioctl argument starts with a __u32 size (the caller's
 * sizeof, handled with copy_struct_from_user(), so structs grow at the end)
 * and a __u32 flags; unknown flags or nonzero padding give -EINVAL, a size
 * over a page -E2BIG, unknown commands -ENOTTY, bad pointers -EFAULT.
 * Pointers travel as __u64.
 * Documentation/uapi.rst describes each call and its errors.
 */
#ifndef _UAPI_PLABEL_H
#define _UAPI_PLABEL_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define PLABEL_DEVICE		"/dev/plabel"
#define PLABEL_IOC_MAGIC	0xB8

/*
 * Hard ceilings. The limits in force are sysctls under kernel.plabel.
 * (max_labels, max_key_len, max_value_len, ...) whose upper bounds are these.
 */
#define PLABEL_MAX_LABELS	64	/* labels in one set */
#define PLABEL_MAX_KEY_LEN	255	/* bytes, no NUL */
#define PLABEL_MAX_VALUE_LEN	4096	/* bytes, no NUL */

/* One label, as passed in and as returned by PLABEL_IOC_LABELS_GET. */
struct plabel_label {
	__u64 key;		/* user pointer to key bytes, no NUL needed */
	__u64 value;		/* user pointer to value bytes */
	__u32 key_len;		/* 1..max_key_len, no NUL bytes inside */
	__u32 value_len;	/* 0..max_value_len, no NUL bytes inside */
};

/*
 * PLABEL_IOC_SET_NEW: intern a label set and return its id.
 *
 * The same labels (in any order) from the same process return the same id.
 * The open file takes one reference to the set (once per file, however often
 * it interns the same set); PLABEL_IOC_SET_PUT or close() drops it. Ids are
 * never 0 and never reused, so a stale id names no set. count == 0 returns
 * id 0 (no labels) and takes nothing.
 *
 * Keys and values hold no control bytes (below 0x20, or 0x7f). The errors
 * of every call are listed in Documentation/uapi.rst.
 */
struct plabel_set_new_args {
	__u32 size;
	__u32 flags;		/* must be 0 */
	__u64 labels;		/* pointer to struct plabel_label[count] */
	__u32 count;
	__u32 pad;		/* must be 0 */
	__u64 id;		/* out */
};

/*
 * PLABEL_IOC_SET_PUT: drop this file's reference to set id.
 * Fails with -ENOENT when this file holds no reference to id.
 */
struct plabel_set_put_args {
	__u32 size;
	__u32 flags;		/* must be 0 */
	__u64 id;
};

/*
 * PLABEL_IOC_LABELS_SET: set the calling thread's kernel-stored labels.
 * id 0 clears them. The thread's entry holds a reference to the set, so the
 * labels live as long as the thread (and are inherited by what it creates).
 * An id names a set for the caller when it may read the process that
 * interned it, as ptrace's read access (see Documentation/uapi.rst, which
 * lists every call's errors).
 */
struct plabel_labels_set_args {
	__u32 size;
	__u32 flags;		/* must be 0 */
	__u64 id;
};

/*
 * PLABEL_IOC_LABELS_GET: read the calling thread's current labels back.
 *
 * Current means what a sample taken now would carry: the id in the thread's
 * registered slot when that names a live set interned with the thread's
 * effective uid, else the kernel-stored set. -EACCES when the thread may
 * not read those labels (inherited from a process it could not ptrace).
 * The kernel writes struct plabel_label[count], sorted by
 * key, at buf, followed by the key and value bytes (each NUL-terminated, not
 * counted in *_len) that the label pointers point to. buf_len is set to the
 * bytes needed. When buf_len is too small (buf may be 0), nothing is written
 * to buf and the call fails with -ERANGE after filling id, count and buf_len.
 */
struct plabel_labels_get_args {
	__u32 size;
	__u32 flags;		/* must be 0 */
	__u64 id;		/* out: 0 when the thread has no labels */
	__u64 buf;		/* in: user buffer */
	__u32 buf_len;		/* in: its size; out: bytes needed */
	__u32 count;		/* out: number of labels */
};

/*
 * PLABEL_IOC_SLOT_SET: register (addr != 0) or unregister (addr == 0) the
 * calling thread's fast-switch slot: an 8-byte aligned __u64 in the thread's
 * own memory holding a set id or 0. While registered, a nonzero slot value
 * naming a live set interned with the thread's effective uid is the
 * thread's labels; 0 or an id
 * naming nothing falls back to the kernel-stored set. The kernel only reads
 * the slot, with non-faulting reads where it must not sleep. Registration
 * is per thread, copied to a child made by fork() (same address, copied
 * memory), not to new threads, and dropped by exec.
 * The address must be 8-byte aligned and readable at registration.
 */
struct plabel_slot_args {
	__u32 size;
	__u32 flags;		/* must be 0 */
	__u64 addr;
};

/* Sessions: who is sampled. */
enum plabel_target {
	PLABEL_TARGET_ALL = 0,		/* every task on every CPU */
	PLABEL_TARGET_PIDS = 1,		/* the listed processes (tgids) */
	PLABEL_TARGET_TREE = 2,		/* the listed processes and all they create */
};

/* Sessions: call chains. */
enum plabel_callchain {
	PLABEL_CALLCHAIN_NONE = 0,	/* the interrupted ip only */
	PLABEL_CALLCHAIN_FP = 1,	/* user frame-pointer walk */
	PLABEL_CALLCHAIN_DWARF = 2,	/* user registers + stack snapshot */
};

/* Sessions: what is recorded (bit mask; 0 means all). */
#define PLABEL_RECORD_CPU	(1U << 0)	/* CPU samples */
#define PLABEL_RECORD_THREADS	(1U << 1)	/* thread/process creation */
#define PLABEL_RECORD_KERNEL	(1U << 2)	/* kernel call chains too */
/* PLABEL_RECORD_OFFCPU: see "Off-CPU records" below */

#define PLABEL_MAX_PIDS		1024

/* The highest sample_hz a session may ask for (kernel.plabel.sample_hz too). */
#define PLABEL_MAX_SAMPLE_HZ	20000

/* The most sessions that may run at once (kernel.plabel.max_sessions). */
#define PLABEL_MAX_SESSIONS	16

/*
 * PLABEL_IOC_SESSION_START: start a profiling session on this open file;
 * read() and poll() then deliver records. Needs CAP_PERFMON or
 * CAP_SYS_ADMIN (-EPERM). -EBUSY when kernel.plabel.max_sessions sessions
 * are held already (running, or stopped with their file still open), or
 * this file ran one before. Zero fields take the sysctl
 * defaults.
 */
/*
 * Session start flags. PLABEL_START_WATERMARK: poll() reports records,
 * and a blocking read() that finds none waits for them, only when a
 * CPU's ring is half full, records were lost, a followed process exec'ed
 * or was created (EXEC, or THREAD with PLABEL_THREAD_PROCESS) or had its
 * executable mappings reported first or after they changed (MMAP), or
 * the session stopped; otherwise as soon as there is any record. A
 * reader that keeps what it reads until the end reads rarely so, as
 * perf's wakeup watermark does; read() returns what there is at any time.
 */
#define PLABEL_START_WATERMARK	(1U << 0)
/*
 * PLABEL_START_AT_EXEC, with PLABEL_TARGET_TREE only: each listed process
 * joins the tree at its next exec, and nothing of it is recorded before
 * (not its samples, not the processes it creates): for a launcher that
 * starts the session between its fork and the exec, as perf's
 * enable_on_exec.
 */
#define PLABEL_START_AT_EXEC	(1U << 1)

struct plabel_session_start_args {
	__u32 size;
	__u32 flags;		/* PLABEL_START_* */
	__u32 target;		/* enum plabel_target */
	__u32 callchain;	/* enum plabel_callchain */
	__u32 sample_hz;	/* 0: kernel.plabel.sample_hz */
	__u32 record;		/* PLABEL_RECORD_* mask, 0: CPU | THREADS */
	__u64 pids;		/* pointer to __s32[npids] */
	__u32 npids;		/* 1..PLABEL_MAX_PIDS for PIDS and TREE */
	__u32 max_stack;	/* 0: kernel.plabel.max_stack */
	__u32 stack_size;	/* dwarf snapshot bytes, 0: kernel.plabel.stack_size */
	__u32 pad;		/* must be 0 */
	/*
	 * With PLABEL_RECORD_OFFCPU: the shortest wait that gets an
	 * OFFCPU_END record, microseconds; 0: kernel.plabel.offcpu_min_us.
	 * Must be 0 without PLABEL_RECORD_OFFCPU.
	 */
	__u32 offcpu_min_us;
	__u32 pad2;		/* must be 0 */
	/* with PLABEL_RECORD_HEAP: mean bytes between heap samples */
	__u64 heap_bytes;	/* 0: PLABEL_HEAP_BYTES_DEFAULT */
};

#define PLABEL_IOC_SET_NEW	_IOWR(PLABEL_IOC_MAGIC, 0x01, struct plabel_set_new_args)
#define PLABEL_IOC_SET_PUT	_IOW(PLABEL_IOC_MAGIC, 0x02, struct plabel_set_put_args)
#define PLABEL_IOC_LABELS_SET	_IOW(PLABEL_IOC_MAGIC, 0x03, struct plabel_labels_set_args)
#define PLABEL_IOC_LABELS_GET	_IOWR(PLABEL_IOC_MAGIC, 0x04, struct plabel_labels_get_args)
#define PLABEL_IOC_SLOT_SET	_IOW(PLABEL_IOC_MAGIC, 0x05, struct plabel_slot_args)
#define PLABEL_IOC_SESSION_START _IOW(PLABEL_IOC_MAGIC, 0x10, struct plabel_session_start_args)
#define PLABEL_IOC_SESSION_STOP	_IO(PLABEL_IOC_MAGIC, 0x11)

/*
 * The record stream. read() on a file with a session returns whole records
 * only, each starting with struct plabel_rec_header, 8-byte aligned, size
 * covering the whole record. A reader skips types it does not know. The
 * first record of a session is PLABEL_REC_STREAM with the format version.
 * read() blocks (unless O_NONBLOCK) until a record is there or the session
 * stopped; after a stop it drains what is left, then returns 0.
 */
#define PLABEL_REC_VERSION	2

enum plabel_rec_type {
	PLABEL_REC_STREAM = 1,		/* struct plabel_rec_stream */
	PLABEL_REC_LABELSET = 2,	/* struct plabel_rec_labelset */
	PLABEL_REC_SAMPLE = 3,		/* struct plabel_rec_sample */
	PLABEL_REC_THREAD = 4,		/* struct plabel_rec_sample, creation */
	PLABEL_REC_LOST = 5,		/* struct plabel_rec_lost */
	PLABEL_REC_MMAP = 6,		/* struct plabel_rec_mmap */
	PLABEL_REC_EXEC = 7,		/* struct plabel_rec_exec */
	PLABEL_REC_COMM = 8,		/* struct plabel_rec_comm */
	PLABEL_REC_SYNC = 9,		/* struct plabel_rec_sync */
	/* 16, 17: off-CPU records, see below */
};

struct plabel_rec_header {
	__u32 type;
	__u32 size;		/* bytes, header included, multiple of 8 */
};

struct plabel_rec_stream {
	struct plabel_rec_header hdr;
	__u32 version;		/* PLABEL_REC_VERSION */
	__u32 callchain;	/* enum plabel_callchain in force */
	__u64 period_ns;	/* sampling period */
	__u64 start_ns;		/* CLOCK_MONOTONIC at start */
	__u32 ncpus;
	__u32 record;		/* PLABEL_RECORD_* in force */
};

/*
 * A label set's strings. Precedes (on some CPU's ring) the first sample of
 * the session that carries id; may repeat. Followed by count entries of
 * struct plabel_rec_label, then the bytes of key 0, value 0, key 1, ...
 * (no NULs), then zero padding to 8 bytes.
 */
struct plabel_rec_labelset {
	struct plabel_rec_header hdr;
	__u64 id;
	__u32 count;
	__u32 uid;		/* effective uid that interned it (initial ns) */
};

struct plabel_rec_label {
	__u32 key_len;
	__u32 value_len;
};

/* struct plabel_rec_sample.flags */
#define PLABEL_SAMPLE_USER	(1U << 0)	/* interrupted in user mode */
#define PLABEL_SAMPLE_REGS	(1U << 1)	/* regs[] and stack follow */
#define PLABEL_SAMPLE_TRUNC	(1U << 2)	/* call chain hit max_stack */
#define PLABEL_SAMPLE_CPUTIME	(1U << 3)	/* SAMPLE: cpu_ns is set */
/*
 * With PLABEL_SAMPLE_REGS: regs[] is PLABEL_FP_REGS_NR words, the user
 * rip, rsp and rbp in that order, not PLABEL_REGS_NR (fp-mode OFFCPU).
 */
#define PLABEL_SAMPLE_FP_REGS	(1U << 4)
#define PLABEL_FP_REGS_NR	3
#define PLABEL_THREAD_PROCESS	(1U << 8)	/* THREAD: a new process */
/*
 * SAMPLE: bits 16..31 of flags hold the number of sampling periods the
 * sample stands for, less one: a timer interrupt that came late (an
 * emulated CPU, a long stretch with interrupts off) stands for every
 * period that passed meanwhile while current ran.
 */
#define PLABEL_SAMPLE_PERIODS_SHIFT	16
#define PLABEL_SAMPLE_PERIODS_MAX	65536U
#define PLABEL_SAMPLE_PERIODS(flags)	(((flags) >> PLABEL_SAMPLE_PERIODS_SHIFT) + 1)

/* User registers in dwarf mode, in libunwind's x86-64 numbering. */
enum plabel_reg {
	PLABEL_REG_RAX, PLABEL_REG_RDX, PLABEL_REG_RCX, PLABEL_REG_RBX,
	PLABEL_REG_RSI, PLABEL_REG_RDI, PLABEL_REG_RBP, PLABEL_REG_RSP,
	PLABEL_REG_R8, PLABEL_REG_R9, PLABEL_REG_R10, PLABEL_REG_R11,
	PLABEL_REG_R12, PLABEL_REG_R13, PLABEL_REG_R14, PLABEL_REG_R15,
	PLABEL_REG_RIP,
	PLABEL_REGS_NR
};

/*
 * A CPU sample (PLABEL_REC_SAMPLE) or a thread creation (PLABEL_REC_THREAD,
 * taken in the creator's context, child_* set). After the fixed part:
 * __u64 ips[nr_kernel + nr_user] (kernel frames first, each part leaf
 * first); then, when flags has PLABEL_SAMPLE_REGS, __u64 regs[PLABEL_REGS_NR]
 * (regs[PLABEL_FP_REGS_NR] with PLABEL_SAMPLE_FP_REGS) and stack_size bytes
 * copied from the user stack at the user rsp; then zero padding to 8
 * bytes.
 */
struct plabel_rec_sample {
	struct plabel_rec_header hdr;
	__u64 time_ns;		/* CLOCK_MONOTONIC */
	__u64 set_id;		/* labels, 0 for none */
	__u32 pid;		/* tgid */
	__u32 tid;
	__u32 cpu;
	__u32 flags;		/* PLABEL_SAMPLE_*, PLABEL_THREAD_* */
	union {
		struct {	/* THREAD */
			__u32 child_pid;
			__u32 child_tid;
		};
		/*
		 * SAMPLE with PLABEL_SAMPLE_CPUTIME: the CPU time tid has
		 * used since it was created, as the scheduler accounts it
		 * (sum_exec_runtime, to within a scheduler tick where the
		 * kernel charges interrupt or steal time separately).
		 * Differences between one thread's samples weigh them.
		 */
		__u64 cpu_ns;
		struct {	/* OFFCPU */
			__u32 wait_kind;	/* enum plabel_wait_kind */
			__u32 wait_state;	/* the task state it left in */
		};
	};
	__u16 nr_kernel;
	__u16 nr_user;
	__u32 stack_size;
};

/* struct plabel_rec_lost.kind: what was lost */
enum plabel_lost_kind {
	PLABEL_LOST_RECORDS = 0,	/* records dropped on cpu (ring full) */
	PLABEL_LOST_MAPPINGS = 1,	/* executable mappings not reported */
	PLABEL_LOST_PROCESSES = 2,	/* processes a TREE session missed */
	PLABEL_LOST_PERIODS = 3,	/* periods of samples dropped on cpu */
};

/*
 * Things lost since the previous LOST record of the same kind (and cpu,
 * for PLABEL_LOST_RECORDS and PLABEL_LOST_PERIODS; cpu is 0 for the
 * others).
 */
struct plabel_rec_lost {
	struct plabel_rec_header hdr;
	__u32 cpu;
	__u32 kind;		/* enum plabel_lost_kind */
	__u64 lost;
};

/*
 * An executable file mapping of process pid, as of time_ns. path_len bytes
 * of path (no NUL) follow, then zero padding to 8 bytes.
 */
struct plabel_rec_mmap {
	struct plabel_rec_header hdr;
	__u64 time_ns;
	__u32 pid;
	__u32 path_len;
	__u64 start;
	__u64 end;
	__u64 offset;		/* file offset of start, bytes */
};

/* Process pid (thread tid) exec'ed: earlier mappings of pid are gone. */
struct plabel_rec_exec {
	struct plabel_rec_header hdr;
	__u64 time_ns;
	__u32 pid;
	__u32 tid;
	char comm[16];
};

/*
 * Thread tid of process pid was renamed to comm (NUL-padded), by itself
 * (prctl PR_SET_NAME, pthread_setname_np) or through /proc; also at exec.
 */
struct plabel_rec_comm {
	struct plabel_rec_header hdr;
	__u64 time_ns;
	__u32 pid;
	__u32 tid;
	char comm[16];
};

/*
 * CPU cpu's records stamped before time_ns (SAMPLE, THREAD, OFFCPU,
 * OFFCPU_END, ALLOC, FREE, EXEC, COMM; MMAP aside, whose stamp is that of
 * the record that asked for it) are all in the stream before this record:
 * none stamped earlier follows. Sent
 * for CPUs whose ring a read() found empty, so that a reader can settle
 * times that an idle CPU's silence would hold back. time_ns grows from one
 * SYNC of a CPU to the next.
 */
struct plabel_rec_sync {
	struct plabel_rec_header hdr;
	__u32 cpu;
	__u32 reserved;		/* 0 */
	__u64 time_ns;
};

/*
 * ---- Off-CPU records ----
 *
 * All numbers of this part in one place: the record mask bit, the record
 * types, and the wait kinds.
 *
 * A session with PLABEL_RECORD_OFFCPU in its record mask writes, for each
 * thread it follows that leaves a CPU (it sleeps, waits for I/O, a
 * futex, ..., or it is preempted: PLABEL_WAIT_PREEMPTED):
 *
 *   PLABEL_REC_OFFCPU at the switch-out, in the thread's own context:
 *     struct plabel_rec_sample, laid out and followed like a SAMPLE's
 *     (labels, user call chain, registers and stack snapshot as for a
 *     THREAD record: in fp mode too, at most 2 KiB of it, and there with
 *     PLABEL_SAMPLE_FP_REGS; kernel chain with PLABEL_RECORD_KERNEL).
 *     time_ns is the switch-out time, wait_kind and wait_state say how it
 *     left.
 *   PLABEL_REC_OFFCPU_END when that thread next runs (in the scheduler of
 *     the CPU it runs on): struct plabel_rec_offcpu_end, out_ns the
 *     time_ns of its OFFCPU record, only when the wait took at least the
 *     session's offcpu_min_us.
 *
 * A reader joins the two on (tid, out_ns); they may come from different
 * CPUs' rings in either order. An OFFCPU record with no END is a wait
 * shorter than the minimum, or one still going on at the session's stop.
 * A wait whose OFFCPU record was dropped (counted as a lost record) gets
 * no END either.
 */
#define PLABEL_RECORD_OFFCPU	(1U << 8)	/* off-CPU intervals */

#define PLABEL_REC_OFFCPU	16	/* struct plabel_rec_sample */
#define PLABEL_REC_OFFCPU_END	17	/* plabel_rec_offcpu_end */

/* Why a thread left its CPU (struct plabel_rec_sample.wait_kind). */
enum plabel_wait_kind {
	PLABEL_WAIT_OTHER = 0,	/* none of the below */
	PLABEL_WAIT_SLEEP = 1,	/* nanosleep(), clock_nanosleep(),
				 * pause() */
	PLABEL_WAIT_IO = 2,	/* block I/O (iowait), or a file descriptor
				 * call: read(), write(), recv(), poll(), ... */
	PLABEL_WAIT_FUTEX = 3,	/* futex(): a mutex, condition variable,
				 * join */
	PLABEL_WAIT_PREEMPTED = 4,	/* runnable: preempted, or yielded */
};

/* The longest offcpu_min_us (kernel.plabel.offcpu_min_us too): 10 s. */
#define PLABEL_MAX_OFFCPU_MIN_US	10000000

struct plabel_rec_offcpu_end {
	struct plabel_rec_header hdr;
	__u64 time_ns;		/* CLOCK_MONOTONIC when tid ran again */
	__u64 out_ns;		/* time_ns of its OFFCPU record */
	__u32 pid;		/* tgid */
	__u32 tid;
	__u32 cpu;		/* where it ran again */
	__u32 pad;
};

/*
 * ---- Heap profiling (ALLOC and FREE records) ----
 *
 * Every number the heap profile adds to this interface is in this block:
 * a session flag, two ioctls, two record types, a lost kind and the mmap
 * offset of the heap page. Documentation/heap.rst describes the whole.
 *
 * A session asks for heap records with PLABEL_RECORD_HEAP in record and
 * the mean sampling interval in heap_bytes. The heap page says the
 * interval in force, for a preloaded allocator to read without a system
 * call: struct plabel_heap_page at offset PLABEL_HEAP_PAGE_OFFSET of
 * /dev/plabel, mapped read-only by anyone (no write, no exec). interval is
 * the smallest heap_bytes of the running heap sessions, 0 when there is
 * none; the rest of the page is zero.
 */
#define PLABEL_RECORD_HEAP	(1U << 9)	/* ALLOC and FREE records */

#define PLABEL_HEAP_BYTES_DEFAULT	(512U << 10)
#define PLABEL_HEAP_BYTES_MAX		(1ULL << 40)

/* mmap offset (bytes) of the heap page; one page, PROT_READ only */
#define PLABEL_HEAP_PAGE_OFFSET	0

struct plabel_heap_page {
	__u64 interval;		/* mean bytes between samples, 0: off */
};

/*
 * PLABEL_IOC_HEAP_ALLOC: the calling thread sampled an allocation of
 * requested bytes (usable in the block) at addr, which stands for weight
 * bytes of allocation on average (the interval it was sampled at). Each
 * running session that follows the process and asked for heap records
 * gets an ALLOC record stamped with the time, the thread's labels and its
 * user stack (as the session takes stacks). Returns how many sessions got
 * it: 0 when none (nothing to do then, not an error), so the caller need
 * not report the block's free. -EINVAL for flags, addr 0 or outside user
 * space, requested > usable, usable 0, weight 0 or above
 * PLABEL_HEAP_BYTES_MAX.
 *
 * PLABEL_IOC_HEAP_FREE: the block at addr, reported by HEAP_ALLOC, is
 * being freed. A FREE record to each heap session that follows the
 * process. requested, usable and weight must be 0. Returns 0.
 *
 * FREE records are never dropped silently: an ALLOC is written only while
 * its ring keeps room for FREEs (an eighth of the ring) besides it, and a
 * FREE that still finds no room is counted in a LOST record of kind
 * PLABEL_LOST_FREES, so a reader knows its in-use figures are too high.
 */
struct plabel_heap_args {
	__u32 size;
	__u32 flags;		/* must be 0 */
	__u64 addr;
	__u64 requested;	/* bytes asked for */
	__u64 usable;		/* bytes in the block */
	__u64 weight;		/* bytes one sample stands for */
};

#define PLABEL_IOC_HEAP_ALLOC	_IOW(PLABEL_IOC_MAGIC, 0x20, struct plabel_heap_args)
#define PLABEL_IOC_HEAP_FREE	_IOW(PLABEL_IOC_MAGIC, 0x21, struct plabel_heap_args)

#define PLABEL_REC_ALLOC	18	/* plabel_rec_sample + plabel_rec_alloc */
#define PLABEL_REC_FREE		19	/* struct plabel_rec_free */

#define PLABEL_LOST_FREES	16	/* FREE records dropped on cpu */

/*
 * An ALLOC record is struct plabel_rec_sample (hdr.type PLABEL_REC_ALLOC,
 * the union zero) followed by struct plabel_rec_alloc, then, as for a
 * SAMPLE, the ips, the registers and the stack snapshot.
 */
struct plabel_rec_alloc {
	__u64 addr;
	__u64 requested;
	__u64 usable;
	__u64 weight;
};

struct plabel_rec_free {
	struct plabel_rec_header hdr;
	__u64 time_ns;		/* CLOCK_MONOTONIC */
	__u32 pid;
	__u32 tid;
	__u64 addr;
};

/* ---- end of heap profiling ---- */

/*
 * ---- Thread states ----
 *
 * PLABEL_IOC_THREADS_GET: what each thread of process pid (a thread group
 * id in the caller's pid namespace) is doing now, like a goroutine
 * profile. The kernel writes whole records of the stream format to buf:
 * a LABELSET record before the first THREADSTATE record that carries its
 * id, then one PLABEL_REC_THREADSTATE record per thread. The call itself
 * makes no session and needs none.
 *
 * The caller needs ptrace read access to the process (as
 * PTRACE_MODE_READ_FSCREDS, checked for each thread too: a thread it may
 * not read is left out and counted in nhidden); -ESRCH when there is no
 * such process (pid names no thread group leader), -EINVAL for pid <= 0.
 * Kernel stacks (PLABEL_THREADS_KERNEL) need CAP_PERFMON or
 * CAP_SYS_ADMIN (-EPERM), and a kernel that exports
 * stack_trace_save_tsk() to modules (-EOPNOTSUPP on 5.10 and 6.1).
 *
 * At most PLABEL_THREADS_MAX threads are reported, the first in the
 * process's thread list; nthreads says how many it has. When buf fills
 * before the last of them, the call fails with -ENOSPC after writing
 * whole records up to buf_used and setting nthreads: the caller retries
 * with a larger buffer (a thread's record takes at most
 * sizeof(struct plabel_rec_sample) + 8 * (PLABEL_THREADS_KSTACK_MAX +
 * max_stack + PLABEL_REGS_NR) + stack_size bytes, a LABELSET record at
 * most 24 + PLABEL_MAX_LABELS * (8 + PLABEL_MAX_KEY_LEN +
 * PLABEL_MAX_VALUE_LEN) bytes).
 */
#define PLABEL_THREADS_MAX		4096
#define PLABEL_THREADS_KSTACK_MAX	64

/* struct plabel_threads_get_args.flags */
#define PLABEL_THREADS_KERNEL	(1U << 0)	/* kernel stacks too */

struct plabel_threads_get_args {
	__u32 size;
	__u32 flags;		/* PLABEL_THREADS_* */
	__s32 pid;		/* thread group id */
	__u32 callchain;	/* enum plabel_callchain: FP or DWARF */
	__u64 buf;		/* user buffer for the records */
	__u32 buf_len;		/* its size, bytes */
	__u32 buf_used;		/* out: bytes of whole records written */
	__u32 max_stack;	/* user frames (fp), 0: kernel.plabel.max_stack */
	__u32 stack_size;	/* dwarf stack bytes, multiple of 8,
				 * 0: kernel.plabel.stack_size */
	__u32 nthreads;		/* out: threads the process has */
	__u32 nhidden;		/* out: of those, left out (not readable) */
};

#define PLABEL_IOC_THREADS_GET	_IOWR(PLABEL_IOC_MAGIC, 0x30, struct plabel_threads_get_args)

/*
 * PLABEL_REC_THREADSTATE: one thread as it is now. struct
 * plabel_rec_sample, laid out and followed like a SAMPLE's: time_ns when
 * it was looked at, set_id its labels (what a sample taken now would
 * carry: its slot's id, else its kernel-stored set), cpu the CPU it last
 * ran on, wait_state an enum plabel_thread_state and wait_kind (for a
 * thread in S or D state) the enum plabel_wait_kind of the system call it
 * waits in (PLABEL_WAIT_PREEMPTED: runnable). The user call chain starts
 * at the address the thread returns to in user mode (where it blocked:
 * the instruction after its system call); in fp mode it is walked from
 * the thread's saved registers, and registers and a stack copy follow
 * (PLABEL_SAMPLE_REGS): in dwarf mode stack_size bytes, in fp mode at
 * most 2 KiB, as for OFFCPU records, for the frames of the C library's
 * system call wrappers, which keep no frame pointer. The kernel chain (PLABEL_THREADS_KERNEL)
 * is where it sleeps inside the kernel.
 *
 * A thread on a CPU at that moment has no stacks: its registers are not
 * saved anywhere, and anything read would be stale
 * (PLABEL_THREADSTATE_ONCPU, state RUNNING). A thread that ran while its
 * stacks were read has them dropped (PLABEL_THREADSTATE_MOVED), and so
 * does one that is exiting. Labels the caller may not read (a set made
 * by another process it cannot ptrace) are left out: set_id 0 and
 * PLABEL_THREADSTATE_NOLABELS.
 */
#define PLABEL_REC_THREADSTATE	20	/* struct plabel_rec_sample */

#define PLABEL_THREADSTATE_ONCPU	(1U << 12)	/* running on a CPU */
#define PLABEL_THREADSTATE_MOVED	(1U << 13)	/* ran meanwhile */
#define PLABEL_THREADSTATE_NOLABELS	(1U << 14)	/* labels not readable */

/* A thread's state (its letter in /proc/PID/task/TID/stat). */
enum plabel_thread_state {
	PLABEL_THREAD_RUNNING = 0,	/* R: running or runnable */
	PLABEL_THREAD_SLEEPING = 1,	/* S: interruptible wait */
	PLABEL_THREAD_DISK = 2,		/* D: uninterruptible (disk, I/O) */
	PLABEL_THREAD_STOPPED = 3,	/* T: stopped by a signal */
	PLABEL_THREAD_TRACED = 4,	/* t: stopped by a tracer */
	PLABEL_THREAD_DEAD = 5,		/* X */
	PLABEL_THREAD_ZOMBIE = 6,	/* Z */
	PLABEL_THREAD_PARKED = 7,	/* P */
	PLABEL_THREAD_IDLE = 8,		/* I: idle kernel wait */
	PLABEL_THREAD_NSTATES
};

/*
 * ---- Thread contexts other programs publish ----
 *
 * Every number this part adds to the interface is in this block: an
 * ioctl, a sample flag, the formats and the bounds.
 * Documentation/record-format.rst describes both formats.
 *
 * A program that does not use libplabel may still publish what its
 * threads do, for outside profilers to read: a thread-local pointer to
 * its current context, in the OpenTelemetry thread context (OTEP 4947:
 * otel_thread_ctx_v1) or in the custom-labels v1 ABI
 * (custom_labels_current_set). A session's reader finds where a process
 * keeps that pointer (its .dynsym, the static TLS offset or the module's
 * slot in the thread's DTV) and registers it with PLABEL_IOC_TLSCTX_SET;
 * from then on every SAMPLE, THREAD, OFFCPU and ALLOC record the session
 * writes for a thread of that process carries a copy of the thread's
 * context of that moment (PLABEL_SAMPLE_TLSCTX), read with non-faulting
 * reads of at most PLABEL_TLSCTX_BYTES bytes. The reader decodes it.
 *
 * PLABEL_IOC_TLSCTX_SET, on the file of a session (-EINVAL without one),
 * by a caller that may read it (CAP_PERFMON or CAP_SYS_ADMIN, -EPERM):
 * process pid (a thread group id in the caller's pid namespace; -ESRCH
 * when there is none, or it has no user memory) keeps its pointer
 *   - without PLABEL_TLSCTX_DTV: at the thread pointer (the FS base) plus
 *     offset (static TLS: the main executable's, or a library's loaded at
 *     start); module must be 0;
 *   - with PLABEL_TLSCTX_DTV: at offset into the TLS block of module
 *     number module (1..PLABEL_TLSCTX_MODULE_MAX), found through the
 *     thread's dynamic thread vector as the GNU C library lays it out (a
 *     pointer at FS base + 8 to 16-byte entries, the entry before the
 *     first holding their count); a thread that has not yet allocated the
 *     block has no context.
 * With PLABEL_TLSCTX_HEAD (OTel only) records carry the record's head
 * alone: the span, for a process whose attributes the module has as its
 * label sets already (libplabel's). format PLABEL_TLSCTX_NONE forgets the
 * process. pid is resolved in the caller's pid namespace, and a process
 * whose leader has exited is found through its other threads. The
 * registration lasts
 * while the process runs the image it had at the call: an exec ends it.
 * A session keeps up to PLABEL_TLSCTX_PROCS processes (those that exited
 * or exec'ed make room); more gets -ENOSPC (and, rarely, a process whose
 * place in the session's table is crowded by 32 others). Unknown flags or format,
 * pid <= 0, a module or offset out of range: -EINVAL.
 */
#define PLABEL_SAMPLE_TLSCTX	(1U << 5)	/* a thread context follows */

enum plabel_tlsctx_format {
	PLABEL_TLSCTX_NONE = 0,
	PLABEL_TLSCTX_OTEL_V1 = 1,		/* OTEP 4947 record */
	PLABEL_TLSCTX_CUSTOM_LABELS_V1 = 2,	/* custom-labels v1 set */
};

#define PLABEL_TLSCTX_DTV		(1U << 0)	/* args.flags */
/* OTel: copy the record's 28-byte head only (its span, not attributes) */
#define PLABEL_TLSCTX_HEAD		(1U << 1)	/* args.flags */
#define PLABEL_TLSCTX_MODULE_MAX	65535
#define PLABEL_TLSCTX_OFFSET_MAX	(1LL << 30)	/* |offset| below */
#define PLABEL_TLSCTX_PROCS		1024
#define PLABEL_TLSCTX_BYTES		1024	/* a record's context, at most */
#define PLABEL_TLSCTX_LABELS		16	/* custom-labels entries read */

struct plabel_tlsctx_args {
	__u32 size;
	__u32 flags;		/* PLABEL_TLSCTX_DTV */
	__s32 pid;		/* thread group id */
	__u32 format;		/* enum plabel_tlsctx_format */
	__s64 offset;		/* from the thread pointer, or in the block */
	__u64 module;		/* PLABEL_TLSCTX_DTV: the module's number */
};

#define PLABEL_IOC_TLSCTX_SET	_IOW(PLABEL_IOC_MAGIC, 0x12, struct plabel_tlsctx_args)

/*
 * With PLABEL_SAMPLE_TLSCTX a record has, after its stack copy (or its
 * call chain or registers when it has none) and zero padding to 8 bytes,
 * struct plabel_rec_tlsctx and len bytes (len <= PLABEL_TLSCTX_BYTES):
 *   - PLABEL_TLSCTX_OTEL_V1: the thread's OTEP 4947 record as it was, its
 *     28-byte head (valid was 1) and as much of attrs-data as was
 *     readable, at most PLABEL_TLSCTX_BYTES - 28 bytes (less than
 *     attrs-data-size: PLABEL_TLSCTX_PARTIAL);
 *   - PLABEL_TLSCTX_CUSTOM_LABELS_V1 (a set with NULL storage or count 0
 *     has no labels, so no context): the labels of the thread's set, up
 *     to PLABEL_TLSCTX_LABELS of them in their order, each as
 *     __u16 key_len, __u16 value_len and the key's and the value's bytes,
 *     packed; entries with no key are left out, and so are those that do
 *     not fit or cannot be read whole (PLABEL_TLSCTX_PARTIAL).
 * A thread with no context (a NULL pointer, an OTEP record not valid, a
 * pointer that cannot be read, a custom-labels set with no label) gets no
 * PLABEL_SAMPLE_TLSCTX; a set none of whose labels could be copied gets
 * an empty one (len 0, PLABEL_TLSCTX_PARTIAL), for the reader to count.
 */
#define PLABEL_TLSCTX_PARTIAL	(1U << 0)	/* rec_tlsctx.flags */

struct plabel_rec_tlsctx {
	__u16 format;		/* enum plabel_tlsctx_format */
	__u16 flags;		/* PLABEL_TLSCTX_PARTIAL */
	__u32 len;		/* bytes that follow */
};

/* ---- end of thread contexts ---- */

#endif /* _UAPI_PLABEL_H */
