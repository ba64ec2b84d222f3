// SPDX-License-Identifier: GPL-2.0
/*
 * PLABEL_IOC_THREADS_GET: what each thread of a process is doing now, its
 * labels, state and stacks, as records of the stream format written to
 * the caller's buffer (include/uapi/plabel_uapi.h, "Thread states").
 *
 * Everything here runs in the caller's process context and may sleep. The
 * threads are other tasks, which run, exit or exec while they are looked
 * at: each is held by a task reference (its task_struct, not its memory
 * or its kernel stack); its saved user registers are copied with
 * plabel_task_user_regs() (compat.h), which copes with a stack that goes;
 * its user memory is read with access_process_vm(), which takes the
 * thread's mm for each read and reads nothing once the thread has none;
 * its kernel stack with stack_trace_save_tsk(), which holds the stack while
 * it walks it and does not walk a task running on another CPU. What is
 * read of a thread that runs meanwhile is only data (addresses that may be
 * stale): the record then goes without stacks (PLABEL_THREADSTATE_MOVED).
 *
 * Bounds: at most PLABEL_THREADS_MAX threads a call, kernel memory of one
 * record (at most about 74 KiB, charged to the caller's memory cgroup) and
 * the thread list, and a fatal signal ends the call between two threads.
 * No lock is held across a thread's reads but RCU's, briefly.
 */
#include <linux/capability.h>
#include <linux/mm.h>
#include <linux/pid.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>

#include "compat.h"
#include "session.h"

/* The sysctls' ceilings (main.c): max_stack and stack_size. */
#define PLABEL_THREADS_MAX_STACK	1024
#define PLABEL_THREADS_MAX_SNAP		65528

/* Stack bytes an fp-mode record carries, as a THREAD record's. */
#define PLABEL_THREADS_FP_SNAP		2048

/* Label sets already written in this call (more are written again). */
#define PLABEL_THREADS_SETS	256

struct plabel_threads_ctx {
	struct plabel_threads_get_args *args;
	char __user *ubuf;
	u32 pos;		/* bytes of whole records written to ubuf */
	u32 max_stack;
	u32 stack_size;
	bool kernel;
	u8 *rec;		/* one record, built here, then copied out */
	u32 rec_cap;
	u32 nsets;
	u64 sets[PLABEL_THREADS_SETS];
};

/* Append len bytes at pos of the record being built. */
static void plabel_rec_put(struct plabel_threads_ctx *x, u32 *pos,
			   const void *p, u32 len)
{
	memcpy(x->rec + *pos, p, len);
	*pos += len;
}

/* Copy a whole record of len bytes (padded to 8) out. 0, -ENOSPC, -EFAULT. */
static int plabel_threads_out(struct plabel_threads_ctx *x, u32 len)
{
	u32 size = ALIGN(len, 8);

	if (size > x->args->buf_len - x->pos)
		return -ENOSPC;
	memset(x->rec + len, 0, size - len);
	((struct plabel_rec_header *)x->rec)->size = size;
	if (copy_to_user(x->ubuf + x->pos, x->rec, size))
		return -EFAULT;
	x->pos += size;
	return 0;
}

/*
 * set's LABELSET record, unless this call wrote it already. It is copied
 * out in pieces: its strings straight from the set (held by the caller).
 */
static int plabel_threads_labelset(struct plabel_threads_ctx *x,
				   const struct plabel_set *set)
{
	struct plabel_rec_labelset rec = {
		.hdr.type = PLABEL_REC_LABELSET,
		.id = set->id,
		.count = set->count,
		.uid = from_kuid_munged(&init_user_ns, set->owner),
	};
	u32 size = sizeof(rec), i, pos;
	char __user *p;
	static const u8 zero[8];

	for (i = 0; i < x->nsets; i++)
		if (x->sets[i] == set->id)
			return 0;
	for (i = 0; i < set->count; i++)
		size += sizeof(struct plabel_rec_label) +
			set->labels[i].key_len + set->labels[i].value_len;
	rec.hdr.size = ALIGN(size, 8);
	if (rec.hdr.size > x->args->buf_len - x->pos)
		return -ENOSPC;
	p = x->ubuf + x->pos;
	/* fixed part and lengths through the record buffer */
	pos = 0;
	plabel_rec_put(x, &pos, &rec, sizeof(rec));
	for (i = 0; i < set->count; i++) {
		struct plabel_rec_label l = {
			.key_len = set->labels[i].key_len,
			.value_len = set->labels[i].value_len,
		};

		plabel_rec_put(x, &pos, &l, sizeof(l));
	}
	if (copy_to_user(p, x->rec, pos))
		return -EFAULT;
	p += pos;
	for (i = 0; i < set->count; i++) {
		const struct plabel_label_k *l = &set->labels[i];

		if (copy_to_user(p, l->key, l->key_len) ||
		    copy_to_user(p + l->key_len, l->value, l->value_len))
			return -EFAULT;
		p += l->key_len + l->value_len;
	}
	if (copy_to_user(p, zero, rec.hdr.size - size))
		return -EFAULT;
	x->pos += rec.hdr.size;
	if (x->nsets < PLABEL_THREADS_SETS)
		x->sets[x->nsets++] = set->id;
	return 0;
}

/*
 * Walk t's user frame pointers from its saved registers, as
 * plabel_user_fp_chain() does for current, each frame read from t's
 * memory. Returns the frames written at *pos (the first is regs->ip).
 */
static u16 plabel_threads_fp(struct plabel_threads_ctx *x, u32 *pos,
			     struct task_struct *t, struct pt_regs *regs,
			     u32 *flags)
{
	unsigned long fp = regs->bp;
	u64 ip = regs->ip, frame[2];
	u16 n = 1;

	plabel_rec_put(x, pos, &ip, sizeof(ip));
	for (;;) {
		if (n >= x->max_stack) {
			*flags |= PLABEL_SAMPLE_TRUNC;
			break;
		}
		if (!fp || (fp & 7) || fp < regs->sp ||
		    fp >= TASK_SIZE_MAX - 16 ||
		    access_process_vm(t, fp, frame, sizeof(frame), 0) !=
		    sizeof(frame) || !frame[1])
			break;
		plabel_rec_put(x, pos, &frame[1], sizeof(u64));
		n++;
		if (frame[0] <= fp)
			break;
		fp = frame[0];
	}
	return n;
}

/*
 * How much of t's stack at sp a record copies: up to the nearest
 * end above sp that is known (see plabel_snap_len() in sample.c): where
 * the thread's stack began (top), its FS base (the C library's thread
 * block, at the top of a thread's stack mapping) and the stack pointer
 * exec left the main thread.
 */
static u32 plabel_threads_snap_len(struct task_struct *t,
				   struct mm_struct *mm, unsigned long sp,
				   u32 size, unsigned long top)
{
	unsigned long end[3] = { top, READ_ONCE(t->thread.fsbase),
				 mm ? READ_ONCE(mm->start_stack) : 0 };
	u32 len = size;
	int i;

	for (i = 0; i < ARRAY_SIZE(end); i++)
		if (end[i] >= sp && end[i] - sp < len)
			len = end[i] - sp;
	return len;
}

static unsigned long plabel_task_switches(struct task_struct *t)
{
	return READ_ONCE(t->nvcsw) + READ_ONCE(t->nivcsw);
}

/*
 * The record of thread t: 0, 1 when the caller may not read it, -ENOSPC,
 * -EFAULT. The switch count is taken before the access check: a thread
 * that ran after it (an exec into a setuid program, say) has what was
 * read of it dropped as MOVED, so nothing is read of an image the check
 * did not see.
 */
static int plabel_threads_one(struct plabel_threads_ctx *x,
			      struct task_struct *t)
{
	struct plabel_rec_sample rec = {
		.hdr.type = PLABEL_REC_THREADSTATE,
		.pid = task_tgid_vnr(t),
		.tid = task_pid_vnr(t),
		.cpu = task_cpu(t),
	};
	u32 pos = sizeof(rec), state;
	unsigned long top, switches = plabel_task_switches(t);
	struct mm_struct *mm;
	struct plabel_set *set;
	struct pt_regs regs;
	bool user = false;
	int err;

	smp_rmb();
	if (!plabel_may_read_task(t))
		return 1;
	mm = get_task_mm(t);
	set = plabel_task_labels_get(t, mm, &top);
	if (set && !plabel_set_may_access(set)) {
		plabel_set_put(set);
		set = NULL;
		rec.flags |= PLABEL_THREADSTATE_NOLABELS;
	}
	if (set) {
		err = plabel_threads_labelset(x, set);
		rec.set_id = set->id;
		plabel_set_put(set);
		if (err)
			goto out_mm;
	}

	rec.time_ns = ktime_get_ns();
	state = task_state_index(t);
	if (state >= PLABEL_THREAD_NSTATES)
		state = PLABEL_THREAD_RUNNING;
	rec.wait_state = state;
	if (plabel_task_on_cpu(t)) {
		rec.flags |= PLABEL_THREADSTATE_ONCPU;
		rec.wait_state = PLABEL_THREAD_RUNNING;
		rec.wait_kind = PLABEL_WAIT_OTHER;
		goto write;
	}
	if (state == PLABEL_THREAD_RUNNING)
		rec.wait_kind = PLABEL_WAIT_PREEMPTED;
	else if (state == PLABEL_THREAD_SLEEPING || state == PLABEL_THREAD_DISK)
		rec.wait_kind = plabel_task_wait_kind(t);
	if (READ_ONCE(t->flags) & (PF_EXITING | PLABEL_PF_NO_USER))
		goto write;

	if (x->kernel) {
		rec.nr_kernel = plabel_task_kstack(t,
				(unsigned long *)(x->rec + pos),
				PLABEL_THREADS_KSTACK_MAX);
		pos += rec.nr_kernel * sizeof(u64);
	}
	if (mm && plabel_task_user_regs(t, &regs) && user_mode(&regs) &&
	    user_64bit_mode(&regs)) {
		user = true;
		if (x->args->callchain == PLABEL_CALLCHAIN_FP) {
			rec.nr_user = plabel_threads_fp(x, &pos, t, &regs,
							&rec.flags);
		} else {
			u64 ip = regs.ip;

			plabel_rec_put(x, &pos, &ip, sizeof(ip));
			rec.nr_user = 1;
		}
	}
	if (user && x->stack_size) {
		u64 r[PLABEL_REGS_NR];
		u32 len = plabel_threads_snap_len(t, mm, regs.sp,
						  x->stack_size, top);
		int got;

		r[PLABEL_REG_RAX] = regs.ax;
		r[PLABEL_REG_RDX] = regs.dx;
		r[PLABEL_REG_RCX] = regs.cx;
		r[PLABEL_REG_RBX] = regs.bx;
		r[PLABEL_REG_RSI] = regs.si;
		r[PLABEL_REG_RDI] = regs.di;
		r[PLABEL_REG_RBP] = regs.bp;
		r[PLABEL_REG_RSP] = regs.sp;
		r[PLABEL_REG_R8] = regs.r8;
		r[PLABEL_REG_R9] = regs.r9;
		r[PLABEL_REG_R10] = regs.r10;
		r[PLABEL_REG_R11] = regs.r11;
		r[PLABEL_REG_R12] = regs.r12;
		r[PLABEL_REG_R13] = regs.r13;
		r[PLABEL_REG_R14] = regs.r14;
		r[PLABEL_REG_R15] = regs.r15;
		r[PLABEL_REG_RIP] = regs.ip;
		plabel_rec_put(x, &pos, r, sizeof(r));
		got = len ? access_process_vm(t, regs.sp, x->rec + pos, len,
					      0) : 0;
		/* a copy that stopped early (an unmapped page) is shorter */
		rec.stack_size = got > 0 ? round_down(got, 8) : 0;
		pos += rec.stack_size;
		rec.flags |= PLABEL_SAMPLE_REGS;
	}
	/* it ran meanwhile: what was read may mix two moments */
	smp_rmb();
	if (plabel_task_on_cpu(t) || plabel_task_switches(t) != switches ||
	    READ_ONCE(t->mm) != mm) {
		rec.flags |= PLABEL_THREADSTATE_MOVED;
		rec.flags &= ~(PLABEL_SAMPLE_REGS | PLABEL_SAMPLE_TRUNC);
		rec.nr_kernel = 0;
		rec.nr_user = 0;
		rec.stack_size = 0;
		pos = sizeof(rec);
	}
write:
	memcpy(x->rec, &rec, sizeof(rec));
	err = plabel_threads_out(x, pos);
out_mm:
	if (mm)
		mmput(mm);
	return err;
}

/* Process context: the checked arguments' threads into args->buf. */
int plabel_ioctl_threads_get(struct plabel_threads_get_args *args)
{
	struct task_struct *leader, *t;
	struct pid **tids;
	struct plabel_threads_ctx *x;
	u32 n = 0, total = 0, hidden = 0, i;
	int err = 0;

	if (args->flags & ~PLABEL_THREADS_KERNEL)
		return -EINVAL;
	if (args->callchain > PLABEL_CALLCHAIN_DWARF || args->pid <= 0 ||
	    !args->buf || !args->buf_len)
		return -EINVAL;
	if (args->max_stack > PLABEL_THREADS_MAX_STACK ||
	    args->stack_size > PLABEL_THREADS_MAX_SNAP || args->stack_size % 8)
		return -EINVAL;
	if (!access_ok(u64_to_user_ptr(args->buf), args->buf_len))
		return -EFAULT;
	if (args->flags & PLABEL_THREADS_KERNEL) {
		if (!perfmon_capable())
			return -EPERM;
		if (!PLABEL_HAVE_TASK_KSTACK)
			return -EOPNOTSUPP;
	}

	rcu_read_lock();
	leader = pid_task(find_vpid(args->pid), PIDTYPE_TGID);
	if (leader)
		get_task_struct(leader);
	rcu_read_unlock();
	if (!leader)
		return -ESRCH;
	if (!plabel_may_read_task(leader)) {
		err = -EACCES;
		goto out_leader;
	}

	x = kvzalloc(sizeof(*x), GFP_KERNEL_ACCOUNT);
	tids = kvmalloc_array(PLABEL_THREADS_MAX, sizeof(*tids),
			      GFP_KERNEL_ACCOUNT);
	if (!x || !tids) {
		err = -ENOMEM;
		goto out_free;
	}
	x->args = args;
	x->ubuf = u64_to_user_ptr(args->buf);
	x->kernel = args->flags & PLABEL_THREADS_KERNEL;
	x->max_stack = args->max_stack ?: READ_ONCE(plabel_max_stack);
	x->stack_size = args->stack_size ?: READ_ONCE(plabel_stack_size);
	/*
	 * In fp mode a copy of the stack's first PLABEL_THREADS_FP_SNAP
	 * bytes too, as OFFCPU records carry (sample.c): a thread blocks in
	 * the C library's system call wrappers, which keep no frame
	 * pointer, so the walk from the saved rbp misses their caller.
	 */
	if (args->callchain == PLABEL_CALLCHAIN_FP)
		x->stack_size = min_t(u32, x->stack_size,
				      PLABEL_THREADS_FP_SNAP);
	else if (args->callchain != PLABEL_CALLCHAIN_DWARF)
		x->stack_size = 0;
	x->rec_cap = sizeof(struct plabel_rec_sample) +
		     (PLABEL_THREADS_KSTACK_MAX + x->max_stack +
		      PLABEL_REGS_NR) * sizeof(u64) + x->stack_size + 8;
	/* (a labelset's fixed part and lengths go through it too) */
	x->rec_cap = max_t(u32, x->rec_cap,
			   sizeof(struct plabel_rec_labelset) +
			   PLABEL_MAX_LABELS * sizeof(struct plabel_rec_label));
	x->rec = kvmalloc(x->rec_cap, GFP_KERNEL_ACCOUNT);
	if (!x->rec) {
		err = -ENOMEM;
		goto out_free;
	}

	/*
	 * The threads by their pids, not their tasks: a call may block (a
	 * slow read of a thread's memory), and a pid reference does not
	 * keep an exited thread's task_struct and stack.
	 */
	rcu_read_lock();
	for_each_thread(leader, t) {
		total++;
		if (n < PLABEL_THREADS_MAX)
			tids[n++] = get_task_pid(t, PIDTYPE_PID);
	}
	rcu_read_unlock();

	for (i = 0; i < n && !err; i++) {
		if (fatal_signal_pending(current)) {
			err = -EINTR;
			break;
		}
		t = get_pid_task(tids[i], PIDTYPE_PID);
		if (!t)
			continue;	/* gone since */
		err = plabel_threads_one(x, t);
		put_task_struct(t);
		if (err == 1) {
			hidden++;
			err = 0;
		}
		cond_resched();
	}
	for (i = 0; i < n; i++)
		put_pid(tids[i]);
	args->buf_used = x->pos;
	args->nthreads = total;
	args->nhidden = hidden;
out_free:
	if (x)
		kvfree(x->rec);
	kvfree(x);
	kvfree(tids);
out_leader:
	put_task_struct(leader);
	return err;
}
