// SPDX-License-Identifier: GPL-2.0
/*
 * Reliability of plabel.ko under hostile and heavy use, inside the VM:
 *
 *   fuzz_ioctls         processes and threads issuing random and mutated
 *                       ioctls (random commands, sizes, flags, pads and
 *                       pointers: NULL, kernel, unmapped, misaligned, at a
 *                       guard page, valid), writing random slot values,
 *                       forking, exec'ing and exiting, being killed, while
 *                       sessions start with random arguments, are read
 *                       slowly or not at all, and stop; the module is
 *                       unloaded and loaded again between rounds. After
 *                       each round the live set and task counts in debugfs
 *                       are back where they started.
 *   thread_storm        threads created and labeled as fast as the machine
 *                       allows while a system-wide session samples at
 *                       10 kHz, for 8 s (PLABEL_STORM_SECONDS); prints
 *                       the rate reached.
 *   quota_two_users     one user exhausts its label-set quota and keeps
 *                       trying while another user keeps interning.
 *   stalled_reader      a reader that stalls on the smallest ring: records
 *                       produced (debugfs "records" + "lost") equal records
 *                       delivered plus the losses LOST records report.
 *   task_table_resize_while_sampling
 *                       bursts of labeled threads grow and shrink the task
 *                       table under 20 kHz sampling (a lookup from the
 *                       timer interrupt once spun forever on a resize).
 *   failslab            a fifth of the slab allocations of a process fail
 *                       (debug kernel with failslab; skipped elsewhere):
 *                       every call works or fails with -ENOMEM, nothing
 *                       leaks.
 *
 * Each test is bounded to seconds under TCG (PLABEL_FUZZ_SECONDS scales
 * the fuzzer's total time, default 15). Run as root in the VM
 * (scripts/plabel-vm); without /dev/plabel every test is skipped. The
 * binary doubles as its own exec target:
 *   stress_fuzz_test --fuzz-exec SEED DEADLINE_NS STATS_FD
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "plabel_uapi.h"
#include "kselftest/kselftest_harness.h"
#include "kmod_util.h"
#include "session_util.h"

#define FZ_SYSCTL	"/proc/sys/kernel/plabel/"
#define FZ_PAGE		4096UL

#define FZ_NEED_DEVICE() do {						\
	if (access(PLABEL_DEVICE, F_OK))				\
		SKIP(return, PLABEL_DEVICE " absent: module not loaded"); \
} while (0)

#define FZ_NEED_ROOT() do {						\
	if (geteuid())							\
		SKIP(return, "needs root");				\
} while (0)

/* --- small helpers ---------------------------------------------------- */

static uint64_t fz_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* xorshift64* */
static uint64_t fz_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static uint64_t fz_seed(uint64_t salt)
{
	uint64_t s = fz_now_ns() ^ (salt * 0x9E3779B97F4A7C15ULL) ^
		     ((uint64_t)getpid() << 32) ^ syscall(SYS_gettid);

	return s ? s : 1;
}

/* --- shared statistics ------------------------------------------------ */

/* Lives in a memfd mapped shared, so exec'd children report here too. */
struct fz_stats {
	long ops;		/* fuzz operations */
	long ioctls;
	long ioctl_ok;
	long unexpected;	/* results the rules below forbid */
	long forks;
	long execs;
	long threads;
	long sessions;		/* SESSION_START calls */
	long sessions_ok;
	long reads;
	long read_bytes;
	long slot_writes;
	long kills;
	char why[256];		/* the first unexpected result */
};

static struct fz_stats *fz_st;
static int fz_stats_fd = -1;

static void fz_add(long *field, long n)
{
	__atomic_add_fetch(field, n, __ATOMIC_RELAXED);
}

static void fz_unexpected(const char *fmt, unsigned long cmd, int err)
{
	if (__atomic_add_fetch(&fz_st->unexpected, 1, __ATOMIC_RELAXED) == 1)
		snprintf(fz_st->why, sizeof(fz_st->why), fmt, cmd,
			 strerror(err));
}

static int fz_stats_map(int fd)
{
	fz_st = mmap(NULL, sizeof(*fz_st), PROT_READ | PROT_WRITE,
		     MAP_SHARED, fd, 0);
	if (fz_st == MAP_FAILED) {
		fz_st = NULL;
		return -errno;
	}
	fz_stats_fd = fd;
	return 0;
}

static int fz_stats_create(void)
{
	int fd = memfd_create("plabel-fuzz-stats", 0);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, sizeof(struct fz_stats))) {
		close(fd);
		return -errno;
	}
	return fz_stats_map(fd);
}

/* --- the fuzzer ------------------------------------------------------- */

/*
 * Every pointer a fuzz thread hands the kernel as "valid" points into its
 * arena: FZ_ARENA_PAGES of scratch followed by a PROT_NONE guard page, so
 * whatever the kernel writes (lengths too large, wrong sizes) lands in
 * scratch or faults, and never in this program's own data.
 */
#define FZ_ARENA_PAGES	4

struct fz_thread {
	uint64_t rng;
	uint64_t deadline;
	int fd;
	int nids;
	uint64_t ids[32];
	char *arena;		/* FZ_ARENA_PAGES pages, then a guard page */
	uint64_t *slot;		/* inside the arena */
	int can_exec;
	int sessions;		/* may start sessions */
	int own_fd;		/* no other thread uses fd */
	int started;		/* sessions this thread started */
};

static char *fz_reserved;	/* PROT_NONE pages: mapped but unreadable */

static const unsigned int fz_known_cmds[] = {
	PLABEL_IOC_SET_NEW, PLABEL_IOC_SET_PUT, PLABEL_IOC_LABELS_SET,
	PLABEL_IOC_LABELS_GET, PLABEL_IOC_SLOT_SET, PLABEL_IOC_SESSION_START,
	PLABEL_IOC_SESSION_STOP, PLABEL_IOC_THREADS_GET, PLABEL_IOC_HEAP_ALLOC,
	PLABEL_IOC_HEAP_FREE, PLABEL_IOC_TLSCTX_SET,
};
#define FZ_NCMDS (sizeof(fz_known_cmds) / sizeof(fz_known_cmds[0]))

/* A command without its size bits: what plabel dispatches on. */
#define FZ_SIZE_BITS	((unsigned long)_IOC_SIZEMASK << _IOC_SIZESHIFT)
#define FZ_BASE(cmd)	((unsigned long)(cmd) & ~FZ_SIZE_BITS)

/* Types no VFS-level ioctl uses: plabel must answer -ENOTTY to all. */
static const unsigned char fz_other_types[] = {
	PLABEL_IOC_MAGIC - 1, PLABEL_IOC_MAGIC + 1, 0xAA, 0xFF, 0x42,
};

static unsigned int fz_r(struct fz_thread *t, unsigned int n)
{
	return fz_rand(&t->rng) % n;
}

/* Pointer for a read or write of need bytes, of a random kind. */
static uint64_t fz_ptr(struct fz_thread *t, size_t need)
{
	size_t room = FZ_ARENA_PAGES * FZ_PAGE;

	if (need > room)
		need = room;
	switch (fz_r(t, 12)) {
	case 0:
		return 0;
	case 1:
		return 0xffffffff81000000ULL + fz_r(t, 1 << 24);
	case 2:
		return 0xffff888000000000ULL + fz_r(t, 1 << 20) * 8;
	case 3:
		return (uintptr_t)fz_reserved + fz_r(t, 2 * FZ_PAGE);
	case 4:		/* straddles the guard page */
		return (uintptr_t)t->arena + room - need / 2 - 1;
	case 5:		/* misaligned */
		return (uintptr_t)t->arena + 1 + fz_r(t, 7);
	case 6:
		return fz_rand(&t->rng);
	case 7:		/* non-canonical */
		return 0x8000000000000000ULL + fz_r(t, 4096);
	default:
		return (uintptr_t)t->arena + 8 * fz_r(t, (room - need) / 8 + 1);
	}
}

static int fz_ptr_is_kernel(uint64_t p)
{
	return p >= 0x8000000000000000ULL;
}

static uint32_t fz_len(struct fz_thread *t, uint32_t limit)
{
	switch (fz_r(t, 8)) {
	case 0:
		return 0;
	case 1:
		return limit;
	case 2:
		return limit + 1;
	case 3:
		return fz_rand(&t->rng);
	case 4:
		return 1u << fz_r(t, 32);
	default:
		return 1 + fz_r(t, 16);
	}
}

static uint64_t fz_id(struct fz_thread *t)
{
	switch (fz_r(t, 6)) {
	case 0:
		return 0;
	case 1:
		return fz_rand(&t->rng);
	case 2:
		return 1 + fz_r(t, 64);
	default:
		return t->nids ? t->ids[fz_r(t, t->nids)] : 0;
	}
}

static void fz_remember(struct fz_thread *t, uint64_t id)
{
	if (!id)
		return;
	if (t->nids < (int)(sizeof(t->ids) / sizeof(t->ids[0])))
		t->ids[t->nids++] = id;
	else
		t->ids[fz_r(t, t->nids)] = id;
}

/*
 * The rules every ioctl result must follow: a command of another type or
 * an unknown plabel number gives -ENOTTY; a known one whose argument
 * pointer is a kernel address fails with -EFAULT; any other failure is one
 * of the documented errnos.
 */
static void fz_check(unsigned long cmd, uint64_t arg, int ret, int err)
{
	unsigned int i, known = 0;

	fz_add(&fz_st->ioctls, 1);
	/* HEAP_ALLOC returns how many sessions took the sample */
	if (ret > 0 && FZ_BASE(cmd) == FZ_BASE(PLABEL_IOC_HEAP_ALLOC))
		ret = 0;
	if (!ret)
		fz_add(&fz_st->ioctl_ok, 1);
	for (i = 0; i < FZ_NCMDS; i++)
		if (FZ_BASE(cmd) == FZ_BASE(fz_known_cmds[i]))
			known = 1;
	if (!known) {
		if (ret != -1 || err != ENOTTY)
			fz_unexpected("cmd %#lx: not -ENOTTY but %s", cmd,
				      ret ? err : 0);
		return;
	}
	if (ret == 0) {
		if (fz_ptr_is_kernel(arg) &&
		    FZ_BASE(cmd) != FZ_BASE(PLABEL_IOC_SESSION_STOP))
			fz_unexpected("cmd %#lx: kernel pointer accepted%s",
				      cmd, 0);
		return;
	}
	if (fz_ptr_is_kernel(arg) &&
	    FZ_BASE(cmd) != FZ_BASE(PLABEL_IOC_SESSION_STOP) &&
	    err != EFAULT && err != ENOTTY)
		fz_unexpected("cmd %#lx: kernel argument pointer gave %s",
			      cmd, err);
	switch (err) {
	case EINVAL: case EFAULT: case ENOTTY: case ENOENT: case E2BIG:
	case EDQUOT: case ENOMEM: case ERANGE: case EPERM: case EBUSY:
	case EINTR:
		return;
	case EACCES:
		/* labels inherited from a process the caller may not read */
		if (FZ_BASE(cmd) == FZ_BASE(PLABEL_IOC_LABELS_GET))
			return;
		break;
	case ESRCH: case ENOSPC:
		/* no such process; a session's table of them full */
		if (FZ_BASE(cmd) == FZ_BASE(PLABEL_IOC_TLSCTX_SET))
			return;
		break;
	}
	fz_unexpected("cmd %#lx: unexpected %s", cmd, err);
}

static int fz_ioctl(struct fz_thread *t, unsigned long cmd, uint64_t arg)
{
	int ret = ioctl(t->fd, cmd, (void *)(uintptr_t)arg);
	int err = errno;

	fz_check(cmd, arg, ret, err);
	errno = err;
	return ret;
}

/* A header-like prefix: size, flags, then the rest of the struct. */
static void fz_fill_args(struct fz_thread *t, void *p, size_t ksize,
			 size_t room)
{
	uint32_t *w = p;
	size_t i, n;

	if (fz_r(t, 4)) {
		memset(p, 0, room);
	} else {
		for (i = 0; i < room / 4; i++)
			w[i] = fz_rand(&t->rng);
	}
	switch (fz_r(t, 10)) {
	case 0:
		n = 0;
		break;
	case 1:
		n = fz_r(t, ksize);
		break;
	case 2:		/* larger, zero tail */
		n = ksize + 8 * fz_r(t, 8);
		memset((char *)p + ksize, 0, n - ksize);
		break;
	case 3:		/* larger, nonzero tail */
		n = ksize + 8;
		((char *)p)[ksize + fz_r(t, 8)] = 1 + fz_r(t, 255);
		break;
	case 4:
		n = fz_rand(&t->rng);
		break;
	case 5:
		n = room + fz_r(t, 2 * FZ_PAGE);	/* into the guard */
		break;
	default:
		n = ksize;
	}
	w[0] = n;
	/* flags mostly 0, now and then one random bit */
	w[1] = fz_r(t, 8) ? 0 : 1u << fz_r(t, 32);
}

static const char *const fz_words[] = {
	"k", "endpoint", "tenant", "job", "x", "/api/users", "acme", "", "a=b",
	"nightly", "\xff\xfe", "long-long-long-long-long-long-long-value",
};
#define FZ_NWORDS (sizeof(fz_words) / sizeof(fz_words[0]))

/* Label array and strings at arena page 1 and 2; valid ones mostly. */
static uint64_t fz_labels(struct fz_thread *t, uint32_t *count)
{
	struct plabel_label *l = (void *)(t->arena + FZ_PAGE);
	char *str = t->arena + 2 * FZ_PAGE;
	unsigned int n = fz_r(t, 4) ? 1 + fz_r(t, 4) : fz_r(t, 70);
	unsigned int i, off = 0;
	int wild = !fz_r(t, 3);

	if (n > FZ_PAGE / sizeof(*l))
		n = FZ_PAGE / sizeof(*l);
	for (i = 0; i < n; i++) {
		const char *k = fz_words[fz_r(t, FZ_NWORDS)];
		const char *v = fz_words[fz_r(t, FZ_NWORDS)];
		int kl = snprintf(str + off, 64, "%s%u", k, i);
		int vl;

		l[i].key = (uintptr_t)(str + off);
		l[i].key_len = kl;
		off += kl + 1;
		vl = snprintf(str + off, 64, "%s%u", v, fz_r(t, 100));
		l[i].value = (uintptr_t)(str + off);
		l[i].value_len = vl;
		off += vl + 1;
		if (wild && !fz_r(t, 3)) {
			switch (fz_r(t, 6)) {
			case 0:
				l[i].key = fz_ptr(t, 64);
				break;
			case 1:
				l[i].value = fz_ptr(t, 64);
				break;
			case 2:
				l[i].key_len = fz_len(t, 64);
				break;
			case 3:
				l[i].value_len = fz_len(t, 256);
				break;
			case 4:		/* NUL inside */
				str[off - 2] = '\0';
				break;
			default:	/* repeated key */
				if (i) {
					l[i].key = l[i - 1].key;
					l[i].key_len = l[i - 1].key_len;
				}
			}
		}
		if (off > FZ_PAGE - 140) {
			i++;
			break;
		}
	}
	*count = i;
	if (wild && !fz_r(t, 4))
		*count = fz_rand(&t->rng);
	if (wild && !fz_r(t, 4))
		return fz_ptr(t, *count * sizeof(*l));
	return (uintptr_t)l;
}

static void fz_op_set_new(struct fz_thread *t)
{
	struct plabel_set_new_args *a = (void *)t->arena;
	uint64_t p = (uintptr_t)a;
	uint32_t count;

	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->labels = fz_labels(t, &count);
	a->count = count;
	if (!fz_r(t, 8)) {
		fz_fill_args(t, a, sizeof(*a), 256);
		a->labels = fz_labels(t, &count);
		a->count = count;
		if (!fz_r(t, 4))
			a->pad = fz_rand(&t->rng);
		if (!fz_r(t, 3))
			p = fz_ptr(t, sizeof(*a));
	}
	if (!fz_ioctl(t, PLABEL_IOC_SET_NEW, p) && p == (uintptr_t)a)
		fz_remember(t, a->id);
}

static void fz_op_simple(struct fz_thread *t, unsigned long cmd)
{
	struct plabel_set_put_args *a = (void *)t->arena;
	uint64_t p = (uintptr_t)a;

	memset(a, 0, 64);
	a->size = sizeof(*a);
	a->id = fz_id(t);
	if (!fz_r(t, 8)) {
		fz_fill_args(t, a, sizeof(*a), 64);
		if (!fz_r(t, 2))
			a->id = fz_id(t);
		if (!fz_r(t, 3))
			p = fz_ptr(t, sizeof(*a));
	}
	fz_ioctl(t, cmd, p);
}

static void fz_op_labels_get(struct fz_thread *t)
{
	struct plabel_labels_get_args *a = (void *)t->arena;
	uint64_t p = (uintptr_t)a;
	size_t room = FZ_ARENA_PAGES * FZ_PAGE - 3 * FZ_PAGE;

	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	/* output lands in page 3 and beyond it in the guard page */
	a->buf = (uintptr_t)t->arena + 3 * FZ_PAGE + 8 * fz_r(t, 4);
	a->buf_len = fz_r(t, 2) ? fz_r(t, room) : fz_len(t, room);
	if (!fz_r(t, 4))
		a->buf = fz_ptr(t, a->buf_len);
	if (fz_ptr_is_kernel(a->buf) || a->buf < (uintptr_t)t->arena ||
	    a->buf >= (uintptr_t)t->arena + FZ_ARENA_PAGES * FZ_PAGE) {
		/* not in the arena: only where it cannot hurt us */
		if (!fz_ptr_is_kernel(a->buf) &&
		    a->buf != (uintptr_t)fz_reserved && a->buf)
			a->buf = (uintptr_t)fz_reserved;
	} else if (a->buf < (uintptr_t)t->arena + 3 * FZ_PAGE) {
		a->buf = (uintptr_t)t->arena + 3 * FZ_PAGE;
	}
	if (!fz_r(t, 8)) {
		uint64_t buf = a->buf;

		fz_fill_args(t, a, sizeof(*a), 128);
		a->buf = buf;
		if (!fz_r(t, 3))
			p = fz_ptr(t, sizeof(*a));
	}
	fz_ioctl(t, PLABEL_IOC_LABELS_GET, p);
}

static void fz_op_slot(struct fz_thread *t)
{
	struct plabel_slot_args *a = (void *)t->arena + 2048;
	uint64_t p = (uintptr_t)a;

	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	switch (fz_r(t, 8)) {
	case 0:
		a->addr = 0;
		break;
	case 1:
		a->addr = fz_ptr(t, 8);
		break;
	case 2:
		a->addr = (uintptr_t)t->slot + 1 + fz_r(t, 7);
		break;
	default:
		a->addr = (uintptr_t)t->slot;
	}
	if (!fz_r(t, 8)) {
		fz_fill_args(t, a, sizeof(*a), 64);
		a->addr = (uintptr_t)t->slot;
		if (!fz_r(t, 3))
			p = fz_ptr(t, sizeof(*a));
	}
	fz_ioctl(t, PLABEL_IOC_SLOT_SET, p);
}

/* A slot in a page that goes away while registered. */
static void fz_op_doomed_slot(struct fz_thread *t)
{
	struct plabel_slot_args *a = (void *)t->arena + 2048;
	uint64_t *page = mmap(NULL, FZ_PAGE, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (page == MAP_FAILED)
		return;
	page[0] = fz_id(t);
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->addr = (uintptr_t)page;
	fz_ioctl(t, PLABEL_IOC_SLOT_SET, (uintptr_t)a);
	for (int i = 0; i < 50; i++)
		page[0] = fz_id(t);
	munmap(page, FZ_PAGE);
}

static void fz_op_reopen(struct fz_thread *t);

static void fz_op_session(struct fz_thread *t)
{
	struct plabel_session_start_args *a = (void *)t->arena + 1024;
	int32_t *pids = (void *)(t->arena + 3 * FZ_PAGE);
	static const uint32_t hz[] = { 0, 1, 99, 1000, 4000, 10000, 20001 };
	uint64_t p = (uintptr_t)a;
	unsigned int i;
	int stopped;
	char *buf = t->arena + 3 * FZ_PAGE;

	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->target = fz_r(t, 2) ? PLABEL_TARGET_ALL :
		    fz_r(t, 5) ? fz_r(t, 3) : fz_r(t, 8);
	a->callchain = fz_r(t, 5) ? fz_r(t, 3) : fz_r(t, 8);
	a->sample_hz = hz[fz_r(t, sizeof(hz) / sizeof(hz[0]))];
	a->record = fz_r(t, 5) ? fz_r(t, 8) : fz_rand(&t->rng);
	if (a->target != PLABEL_TARGET_ALL || !fz_r(t, 16)) {
		a->npids = fz_r(t, 4) ? 1 + fz_r(t, 4) :
			   fz_len(t, PLABEL_MAX_PIDS);
		for (i = 0; i < 4; i++)
			pids[i] = i ? (int32_t)fz_rand(&t->rng) % 5000 :
				  getpid();
		a->pids = fz_r(t, 4) ? (uintptr_t)pids :
			  fz_ptr(t, a->npids * 4);
		if (a->npids > 4 && a->pids == (uintptr_t)pids)
			a->npids = 4;
	}
	a->max_stack = fz_r(t, 2) ? 0 : fz_len(t, 1024);
	a->stack_size = fz_r(t, 2) ? 0 : fz_r(t, 4) ? 8 * fz_r(t, 8192) :
			fz_len(t, 65528);
	if (!fz_r(t, 16)) {
		fz_fill_args(t, a, sizeof(*a), 256);
		if (!fz_r(t, 3))
			p = fz_ptr(t, sizeof(*a));
	}
	if (!t->started) {
		/* the first one valid, so every worker runs a session */
		memset(a, 0, sizeof(*a));
		a->size = sizeof(*a);
		a->callchain = fz_r(t, 3);
		a->sample_hz = 1000;
		p = (uintptr_t)a;
	}
	fz_add(&fz_st->sessions, 1);
	if (fz_ioctl(t, PLABEL_IOC_SESSION_START, p)) {
		/* a file that ran a session once stays busy: start afresh */
		if (errno == EBUSY && fz_r(t, 2))
			fz_op_reopen(t);
		return;
	}
	fz_add(&fz_st->sessions_ok, 1);
	t->started++;
	/* read not at all, slowly, or fast; then stop or just go on */
	switch (fz_r(t, 3)) {
	case 0:
		usleep(100000 + fz_r(t, 200000));
		break;
	case 1:
		for (i = 0; i < 10; i++) {
			struct pollfd pfd = { .fd = t->fd, .events = POLLIN };
			ssize_t n = 0;

			if (poll(&pfd, 1, 10) == 1)
				n = read(t->fd, buf, 40 + fz_r(t, 512));

			if (n > 0)
				fz_add(&fz_st->read_bytes, n);
			fz_add(&fz_st->reads, 1);
			usleep(20000);
		}
		break;
	default:
		for (i = 0; i < 50; i++) {
			struct pollfd pfd = { .fd = t->fd, .events = POLLIN };
			ssize_t n;

			if (poll(&pfd, 1, 10) != 1)
				continue;
			n = read(t->fd, buf, FZ_PAGE);
			if (n > 0)
				fz_add(&fz_st->read_bytes, n);
			fz_add(&fz_st->reads, 1);
		}
	}
	stopped = fz_r(t, 4) && !fz_ioctl(t, PLABEL_IOC_SESSION_STOP, 0);
	if (stopped && fz_r(t, 2)) {
		/* drain after the stop: ends with 0 */
		for (i = 0; i < 1000; i++) {
			ssize_t n = read(t->fd, buf, FZ_PAGE);

			fz_add(&fz_st->reads, 1);
			if (n <= 0)
				break;
			fz_add(&fz_st->read_bytes, n);
		}
	}
	/* a file runs one session in its life: a new file for the next */
	fz_op_reopen(t);
}

/* A command of any shape, with a mutated argument. */
static void fz_op_raw(struct fz_thread *t)
{
	unsigned int c = fz_known_cmds[fz_r(t, FZ_NCMDS)];
	unsigned long cmd;
	uint64_t p;

	switch (fz_r(t, 6)) {
	case 0:
		cmd = c;
		break;
	case 1:		/* random size bits */
		cmd = FZ_BASE(c) |
		      (fz_r(t, _IOC_SIZEMASK + 1) << _IOC_SIZESHIFT);
		break;
	case 2:		/* random direction */
		cmd = _IOC(fz_r(t, 4), PLABEL_IOC_MAGIC, _IOC_NR(c),
			   _IOC_SIZE(c));
		break;
	case 3:		/* random number */
		cmd = _IOC(fz_r(t, 4), PLABEL_IOC_MAGIC, fz_r(t, 256),
			   fz_r(t, _IOC_SIZEMASK + 1));
		break;
	case 4:		/* another type */
		cmd = _IOC(fz_r(t, 4), fz_other_types[fz_r(t,
			   sizeof(fz_other_types))], fz_r(t, 256),
			   fz_r(t, _IOC_SIZEMASK + 1));
		break;
	default:	/* random bits under our type */
		cmd = (fz_rand(&t->rng) & ~(0xffUL << _IOC_TYPESHIFT) &
		       0xffffffffUL) |
		      (PLABEL_IOC_MAGIC << _IOC_TYPESHIFT);
	}
	/* a session start stays with the session op (it needs a reader) */
	if (FZ_BASE(cmd) == FZ_BASE(PLABEL_IOC_SESSION_START) && !t->sessions)
		cmd = PLABEL_IOC_SESSION_STOP;
	fz_fill_args(t, t->arena, 64, 512);
	p = fz_r(t, 2) ? (uintptr_t)t->arena : fz_ptr(t, 512);
	/* the LABELS_GET buffer must not point at our own memory */
	if (p == (uintptr_t)t->arena)
		((struct plabel_labels_get_args *)t->arena)->buf =
			(uintptr_t)fz_reserved;
	fz_ioctl(t, cmd, p);
	if (t->sessions && cmd != PLABEL_IOC_SESSION_STOP)
		ioctl(t->fd, PLABEL_IOC_SESSION_STOP);
}

static void fz_thread_init(struct fz_thread *t, int fd, uint64_t deadline,
			   uint64_t salt)
{
	memset(t, 0, sizeof(*t));
	t->rng = fz_seed(salt);
	t->fd = fd;
	t->deadline = deadline;
	t->arena = mmap(NULL, (FZ_ARENA_PAGES + 1) * FZ_PAGE,
			PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	if (t->arena == MAP_FAILED) {
		t->arena = NULL;
		return;
	}
	mprotect(t->arena + FZ_ARENA_PAGES * FZ_PAGE, FZ_PAGE, PROT_NONE);
	t->slot = (uint64_t *)(t->arena + 2 * FZ_PAGE + FZ_PAGE - 64);
}

static void fz_thread_fini(struct fz_thread *t)
{
	if (t->arena)
		munmap(t->arena, (FZ_ARENA_PAGES + 1) * FZ_PAGE);
	t->arena = NULL;
}

static void fz_run(struct fz_thread *t, long max_ops);

static void *fz_short_thread(void *p)
{
	struct fz_thread *parent = p, t;
	int fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return NULL;
	fz_thread_init(&t, fd, parent->deadline, (uintptr_t)&t);
	t.own_fd = 1;
	if (t.arena)
		fz_run(&t, 20);
	fz_thread_fini(&t);
	close(t.fd);
	return NULL;
}

static void fz_exec_self(struct fz_thread *t)
{
	char seed[32], deadline[32], sfd[16];

	snprintf(seed, sizeof(seed), "%llu",
		 (unsigned long long)fz_rand(&t->rng));
	snprintf(deadline, sizeof(deadline), "%llu",
		 (unsigned long long)t->deadline);
	snprintf(sfd, sizeof(sfd), "%d", fz_stats_fd);
	fz_add(&fz_st->execs, 1);
	execl("/proc/self/exe", "stress_fuzz_test", "--fuzz-exec", seed,
	      deadline, sfd, (char *)NULL);
}

static void fz_op_fork(struct fz_thread *t)
{
	pid_t pid = fork();

	if (pid < 0)
		return;
	if (pid) {
		fz_add(&fz_st->forks, 1);
		/* reaped by the round's leader (subreaper) or here */
		if (fz_r(t, 2))
			waitpid(pid, NULL, 0);
		return;
	}
	t->can_exec = 1;
	t->sessions = 0;
	t->own_fd = 1;
	if (!fz_r(t, 3)) {
		uid_t uid = 61000 + fz_r(t, 4);

		if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
			_exit(0);
	}
	if (fz_r(t, 2))
		fz_exec_self(t);
	/* labels and slot came along; use them and go */
	fz_run(t, 30);
	_exit(0);
}

static void fz_op_reopen(struct fz_thread *t)
{
	int fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC |
		      (fz_r(t, 2) ? O_NONBLOCK : 0));

	if (fd < 0)
		return;
	/* the old file goes, with its references */
	if (t->own_fd) {
		close(t->fd);
		t->fd = fd;
		t->nids = 0;
	} else {
		close(fd);
	}
}

static void fz_run(struct fz_thread *t, long max_ops)
{
	long n;

	for (n = 0; n < max_ops && fz_now_ns() < t->deadline; n++) {
		unsigned int r = fz_r(t, 100);

		fz_add(&fz_st->ops, 1);
		if (r < 20) {
			fz_op_set_new(t);
		} else if (r < 26) {
			fz_op_simple(t, PLABEL_IOC_SET_PUT);
		} else if (r < 36) {
			fz_op_simple(t, PLABEL_IOC_LABELS_SET);
		} else if (r < 44) {
			fz_op_labels_get(t);
		} else if (r < 52) {
			fz_op_slot(t);
		} else if (r < 64) {
			*(volatile uint64_t *)t->slot = fz_id(t);
			fz_add(&fz_st->slot_writes, 1);
		} else if (r < 80) {
			fz_op_raw(t);
		} else if (r < 82) {
			fz_op_doomed_slot(t);
		} else if (r < 85) {
			pthread_t th;

			if (!pthread_create(&th, NULL, fz_short_thread, t)) {
				fz_add(&fz_st->threads, 1);
				if (fz_r(t, 4))
					pthread_join(th, NULL);
				else
					pthread_detach(th);
			}
		} else if (r < 87) {
			fz_op_fork(t);
		} else if (r < 88) {
			fz_op_reopen(t);
		} else if (r < 89 && t->can_exec && !fz_r(t, 4)) {
			fz_exec_self(t);
		} else if (r < 95 && t->sessions) {
			fz_op_session(t);
		} else {
			uint64_t v = fz_rand(&t->rng);

			/* a read, a poll on a file with or without session */
			if (fz_r(t, 2)) {
				struct pollfd pfd = { .fd = t->fd,
						      .events = POLLIN };

				poll(&pfd, 1, 0);
			} else if (fcntl(t->fd, F_GETFL) & O_NONBLOCK) {
				ssize_t got = read(t->fd, t->arena + 3 *
						   FZ_PAGE, v % FZ_PAGE);

				if (got > 0)
					fz_add(&fz_st->read_bytes, got);
				fz_add(&fz_st->reads, 1);
			}
		}
	}
}

/* One fuzz process: a few threads sharing one file, until the deadline. */
static void *fz_worker_thread(void *p)
{
	struct fz_thread *t = p;

	fz_run(t, 1L << 40);
	return NULL;
}

#define FZ_THREADS	3

static void fz_worker(uint64_t deadline, int sessions, uint64_t salt)
{
	struct fz_thread t[FZ_THREADS];
	pthread_t th[FZ_THREADS];
	int i, fd;

	fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC |
		  (sessions ? 0 : O_NONBLOCK));
	if (fd < 0)
		_exit(0);	/* the module may be going: nothing to fuzz */
	for (i = 0; i < FZ_THREADS; i++) {
		fz_thread_init(&t[i], fd, deadline, salt * 16 + i);
		if (!t[i].arena)
			_exit(1);
		/* one thread of the session process runs sessions */
		t[i].sessions = sessions && i == 0;
		if (t[i].sessions) {
			t[i].fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
			t[i].own_fd = 1;
			if (t[i].fd < 0)
				_exit(0);
		}
	}
	for (i = 1; i < FZ_THREADS; i++)
		if (pthread_create(&th[i], NULL, fz_worker_thread, &t[i]))
			_exit(1);
	fz_worker_thread(&t[0]);
	for (i = 1; i < FZ_THREADS; i++)
		pthread_join(th[i], NULL);
	_exit(0);
}

static int fz_exec_main(int argc, char **argv)
{
	struct fz_thread t;
	int fd;

	if (argc < 5 || fz_stats_map(atoi(argv[4])))
		return 1;
	fz_reserved = mmap(NULL, 4 * FZ_PAGE, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fz_reserved == MAP_FAILED)
		return 1;
	fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0;
	fz_thread_init(&t, fd, strtoull(argv[3], NULL, 10),
		       strtoull(argv[2], NULL, 10));
	if (!t.arena)
		return 1;
	t.own_fd = 1;
	/* labels survive exec: read them, then go on fuzzing briefly */
	fz_op_labels_get(&t);
	fz_run(&t, 40);
	return 0;
}

static pid_t fz_spawn_worker(uint64_t deadline, int sessions, uint64_t salt)
{
	pid_t pid = fork();

	if (pid) {
		if (pid > 0)
			setpgid(pid, pid);
		return pid;
	}
	/* own process group: the round ends by killing the group */
	setpgid(0, 0);
	fz_worker(deadline, sessions, salt);
	_exit(0);
}

/* --- module reload ------------------------------------------------------ */

/* Unload (retrying while the last files close) and load again: 0 or -errno. */
static int fz_reload(int kfd)
{
	int i, err = 0;

	for (i = 0; i < 100; i++) {
		if (!syscall(__NR_delete_module, "plabel", O_NONBLOCK))
			break;
		err = errno;
		usleep(50000);
	}
	if (i == 100)
		return -err;
	if (syscall(__NR_finit_module, kfd, "", 0))
		return -errno;
	for (i = 0; i < 50 && access(PLABEL_DEVICE, F_OK); i++)
		usleep(20000);
	return access(PLABEL_DEVICE, F_OK) ? -ENODEV : 0;
}

/* --- tests -------------------------------------------------------------- */

/*
 * A session's owner dies with mapping scans pending: its file is released
 * in exit, after the process lost its root directory, and stopping the
 * session there must not resolve paths. A burner changing its mappings
 * keeps scans queued at 10 kHz.
 */
static void *fz_map_churn(void *p)
{
	for (;;) {
		void *m = mmap(NULL, FZ_PAGE, PROT_READ | PROT_EXEC,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m != MAP_FAILED)
			munmap(m, FZ_PAGE);
	}
	return NULL;
}

static int fz_owner_dies(void)
{
	struct plabel_session_start_args sa = {
		.size = sizeof(sa),
		.target = PLABEL_TARGET_ALL,
		.sample_hz = 10000,
	};
	pthread_t th;
	int fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd < 0 || ioctl(fd, PLABEL_IOC_SESSION_START, &sa))
		return 2;
	if (pthread_create(&th, NULL, fz_map_churn, NULL))
		return 3;
	usleep(30000 + (fz_now_ns() / 1000) % 70000);
	/* exit with the file open: released after exit_fs() */
	_exit(0);
}

TEST(session_owner_exits_with_scans_pending)
{
	struct plabel_session_start_args sa = {
		.size = sizeof(sa),
		.target = PLABEL_TARGET_ALL,
	};
	int i, fd, status;

	FZ_NEED_DEVICE();
	FZ_NEED_ROOT();
	for (i = 0; i < 20; i++) {
		pid_t pid = fork();

		ASSERT_LE(0, pid);
		if (!pid)
			_exit(fz_owner_dies());
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
			TH_LOG("round %d: status %#x", i, status);
	}
	/* and the next session starts */
	fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, ioctl(fd, PLABEL_IOC_SESSION_START, &sa))
		TH_LOG("SESSION_START: %s", strerror(errno));
	EXPECT_EQ(0, ioctl(fd, PLABEL_IOC_SESSION_STOP));
	close(fd);
}

#define FZ_WORKERS	4	/* plus one that runs sessions */
#define FZ_MAX_PIDS	256

static void fz_reap_all(void)
{
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
}

FIXTURE(fuzz) {};
FIXTURE_SETUP(fuzz) {}
FIXTURE_TEARDOWN(fuzz) {}

/* Longer than the harness's default 30 s: a loaded host slows TCG down. */
TEST_F_TIMEOUT(fuzz, ioctls, 120)
{
	const char *env = getenv("PLABEL_FUZZ_SECONDS");
	int seconds = env ? atoi(env) : 15;
	int rounds = 3, round, kfd = -1, reloads = 0;
	pid_t pids[FZ_MAX_PIDS];
	long sets0, tasks0;
	uint64_t t0 = fz_now_ns();
	char path[256];
	const char *ko;

	FZ_NEED_DEVICE();
	FZ_NEED_ROOT();
	if (seconds < 3)
		seconds = 3;
	sets0 = su_counter("live_sets");
	tasks0 = su_counter("live_tasks");
	if (sets0 < 0 || tasks0 < 0)
		SKIP(return, "debugfs counters absent");
	ASSERT_EQ(0, fz_stats_create());
	fz_reserved = mmap(NULL, 4 * FZ_PAGE, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, fz_reserved);
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0));

	ko = plabel_kmod_path(path, sizeof(path));
	if (ko)
		kfd = open(ko, O_RDONLY | O_CLOEXEC);
	if (kfd >= 0 && plabel_kmod_differs(kfd) != 0) {
		close(kfd);
		kfd = -1;
	}
	if (kfd < 0)
		TH_LOG("module file not found or not the loaded one: no reload between rounds (set PLABEL_KMOD)");

	for (round = 0; round < rounds; round++) {
		uint64_t deadline = fz_now_ns() +
				    seconds * 1000000000ull / rounds;
		uint64_t salt = (uint64_t)round << 8;
		int n = 0, i;

		for (i = 0; i <= FZ_WORKERS; i++) {
			pids[n] = fz_spawn_worker(deadline, i == FZ_WORKERS,
						  salt + i);
			ASSERT_LT(0, pids[n]);
			n++;
		}
		/* now and then kill a worker mid-flight and start another */
		while (fz_now_ns() < deadline) {
			usleep(300000);
			if (n < FZ_MAX_PIDS && fz_now_ns() < deadline) {
				i = (fz_now_ns() / 1000) % (FZ_WORKERS + 1);
				kill(-pids[i], SIGKILL);
				fz_add(&fz_st->kills, 1);
				pids[i] = fz_spawn_worker(deadline,
							  i == FZ_WORKERS,
							  salt + n++);
				ASSERT_LT(0, pids[i]);
			}
		}
		/* exits on its own by the deadline; stragglers are killed */
		usleep(500000);
		for (i = 0; i <= FZ_WORKERS; i++)
			kill(-pids[i], SIGKILL);
		fz_reap_all();

		EXPECT_EQ(sets0, su_counter_wait("live_sets", sets0))
			TH_LOG("round %d: label sets leaked", round);
		EXPECT_EQ(tasks0, su_counter_wait("live_tasks", tasks0))
			TH_LOG("round %d: task entries leaked", round);
		if (kfd >= 0 && round + 1 < rounds) {
			ASSERT_EQ(0, fz_reload(kfd))
				TH_LOG("reloading %s: %s", ko,
				       strerror(errno));
			reloads++;
			/* a fresh module starts with nothing live */
			sets0 = su_counter("live_sets");
			tasks0 = su_counter("live_tasks");
			EXPECT_EQ(0, sets0);
			EXPECT_EQ(0, tasks0);
		}
	}
	if (kfd >= 0)
		close(kfd);
	TH_LOG("%.1f s, %d rounds, %d reloads: %ld ops, %ld ioctls (%ld ok), %ld forks, %ld execs, %ld threads, %ld kills, %ld sessions (%ld started), %ld reads (%ld bytes), %ld slot writes",
	       (fz_now_ns() - t0) / 1e9, rounds, reloads, fz_st->ops,
	       fz_st->ioctls, fz_st->ioctl_ok, fz_st->forks, fz_st->execs,
	       fz_st->threads, fz_st->kills, fz_st->sessions,
	       fz_st->sessions_ok, fz_st->reads, fz_st->read_bytes,
	       fz_st->slot_writes);
	EXPECT_EQ(0, fz_st->unexpected)
		TH_LOG("first: %s", fz_st->why);
	EXPECT_LT(1000, fz_st->ioctls);
	EXPECT_LT(0, fz_st->sessions_ok);
}

/* --- stream accounting -------------------------------------------------- */

struct fz_tally {
	long long recs;		/* records that came out of the rings */
	long long samples;
	long long threads;
	long long lost;		/* sum of LOST records */
	long long bytes;
	int bad;
};

/* Count whole records in buf; returns -1 on a framing error. */
static int fz_tally_buf(struct fz_tally *y, const char *buf, size_t len)
{
	size_t off = 0;

	while (off + sizeof(struct plabel_rec_header) <= len) {
		const struct plabel_rec_header *h = (const void *)(buf + off);

		if (h->size < sizeof(*h) || h->size % 8 ||
		    h->size > len - off) {
			y->bad++;
			return -1;
		}
		switch (h->type) {
		case PLABEL_REC_STREAM:
		case PLABEL_REC_SYNC:	/* made by read(), not in a ring */
			break;
		case PLABEL_REC_LOST:
			if (((const struct plabel_rec_lost *)h)->kind ==
			    PLABEL_LOST_RECORDS)
				y->lost += ((const struct plabel_rec_lost *)h)->lost;
			break;
		case PLABEL_REC_SAMPLE:
			y->samples++;
			y->recs++;
			break;
		case PLABEL_REC_THREAD:
			y->threads++;
			y->recs++;
			break;
		default:
			y->recs++;
		}
		off += h->size;
	}
	if (off != len)
		y->bad++;
	y->bytes += len;
	return 0;
}

/* Read to the end (after a stop): 0 or -errno. */
static int fz_drain(int fd, struct fz_tally *y, size_t bufsz)
{
	char *buf = malloc(bufsz);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf, bufsz);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		if (n == 0)
			break;
		fz_tally_buf(y, buf, n);
	}
	free(buf);
	return ret;
}

struct fz_storm_reader {
	int fd;
	int err;
	struct fz_tally y;
};

static void *fz_storm_reader(void *p)
{
	struct fz_storm_reader *r = p;

	r->err = fz_drain(r->fd, &r->y, 1 << 20);
	return NULL;
}

struct fz_storm {
	int fd;
	uint64_t ids[8];
	uint64_t deadline;
	long created;
	long failed;
};

static void *fz_storm_child(void *p)
{
	struct fz_storm *s = p;
	struct plabel_labels_set_args a = {
		.size = sizeof(a),
		.id = s->ids[syscall(SYS_gettid) % 8],
	};

	if (ioctl(s->fd, PLABEL_IOC_LABELS_SET, &a))
		__atomic_add_fetch(&s->failed, 1, __ATOMIC_RELAXED);
	return NULL;
}

#define FZ_STORM_BATCH	16

static void *fz_storm_creator(void *p)
{
	struct fz_storm *s = p;
	pthread_t th[FZ_STORM_BATCH];
	pthread_attr_t attr;
	int i, n;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	while (fz_now_ns() < s->deadline) {
		for (n = 0; n < FZ_STORM_BATCH; n++)
			if (pthread_create(&th[n], &attr, fz_storm_child, s))
				break;
		for (i = 0; i < n; i++)
			pthread_join(th[i], NULL);
		__atomic_add_fetch(&s->created, n, __ATOMIC_RELAXED);
	}
	pthread_attr_destroy(&attr);
	return NULL;
}

static uint64_t fz_intern(int fd, const char *key, unsigned int i)
{
	char val[32];
	struct plabel_label l = {
		.key = (uintptr_t)key,
		.value = (uintptr_t)val,
		.key_len = strlen(key),
	};
	struct plabel_set_new_args a = {
		.size = sizeof(a),
		.labels = (uintptr_t)&l,
		.count = 1,
	};

	l.value_len = snprintf(val, sizeof(val), "v%u", i);
	if (ioctl(fd, PLABEL_IOC_SET_NEW, &a))
		return 0;
	return a.id;
}

/*
 * Threads created and labeled at the highest rate reachable while a
 * system-wide session samples at 10 kHz and records thread creation;
 * every creation is delivered or counted lost.
 */
/* The storm may be made to last up to an hour (PLABEL_STORM_SECONDS). */
FIXTURE(storm) {};
FIXTURE_SETUP(storm) {}
FIXTURE_TEARDOWN(storm) {}

TEST_F_TIMEOUT(storm, thread_storm, 3700)
{
	struct plabel_session_start_args sa = {
		.size = sizeof(sa),
		.target = PLABEL_TARGET_ALL,
		.callchain = PLABEL_CALLCHAIN_FP,
		.sample_hz = 10000,
		.record = PLABEL_RECORD_CPU | PLABEL_RECORD_THREADS,
	};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct fz_storm_reader r = { 0 };
	struct fz_storm s = { 0 };
	pthread_t creators[8], rth;
	long long tasks0, recs0, lost0, samples0;
	uint64_t t0, t1, storm_secs = 8;
	const char *env;
	int sfd, i, ncr;
	double secs;

	FZ_NEED_DEVICE();
	FZ_NEED_ROOT();
	tasks0 = su_counter("live_tasks");
	recs0 = su_counter("records");
	lost0 = su_counter("lost");
	samples0 = su_counter("samples");
	if (tasks0 < 0 || recs0 < 0 || lost0 < 0)
		SKIP(return, "debugfs counters absent");
	s.fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, s.fd);
	for (i = 0; i < 8; i++) {
		s.ids[i] = fz_intern(s.fd, "storm", i);
		ASSERT_NE((uint64_t)0, s.ids[i]);
	}
	sfd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, sfd);
	ASSERT_EQ(0, ioctl(sfd, PLABEL_IOC_SESSION_START, &sa))
		TH_LOG("SESSION_START: %s", strerror(errno));
	r.fd = sfd;
	ASSERT_EQ(0, pthread_create(&rth, NULL, fz_storm_reader, &r));

	ncr = ncpu < 1 ? 1 : ncpu > 8 ? 8 : ncpu;
	env = getenv("PLABEL_STORM_SECONDS");
	if (env && atoi(env) > 0 && atoi(env) <= 3600)
		storm_secs = atoi(env);
	t0 = fz_now_ns();
	s.deadline = t0 + storm_secs * 1000000000ull;
	for (i = 0; i < ncr; i++)
		ASSERT_EQ(0, pthread_create(&creators[i], NULL,
					    fz_storm_creator, &s));
	for (i = 0; i < ncr; i++)
		pthread_join(creators[i], NULL);
	t1 = fz_now_ns();
	ASSERT_EQ(0, ioctl(sfd, PLABEL_IOC_SESSION_STOP));
	pthread_join(rth, NULL);
	EXPECT_EQ(0, r.err);
	EXPECT_EQ(0, r.y.bad);
	secs = (t1 - t0) / 1e9;
	TH_LOG("%ld threads created and labeled in %.1f s: %.0f/s with %ld creators (target 10000/s); %lld samples at 10 kHz, %lld thread records, %lld records delivered, %lld lost",
	       s.created, secs, s.created / secs, (long)ncr,
	       su_counter("samples") - samples0, r.y.threads, r.y.recs,
	       r.y.lost);
	EXPECT_EQ(0, s.failed);
	EXPECT_LT(0, s.created);
	/* every creation was delivered or counted lost */
	EXPECT_LE(s.created, r.y.threads + r.y.lost);
	/* produced = delivered + reported lost */
	EXPECT_EQ(su_counter("records") - recs0, r.y.recs);
	EXPECT_EQ(su_counter("lost") - lost0, r.y.lost);
	close(sfd);
	close(s.fd);
	EXPECT_EQ(tasks0, su_counter_wait("live_tasks", tasks0));
}

/*
 * The per-task table grows and shrinks while the sampler looks entries up
 * from its timer interrupt on every CPU: bursts of labeled threads alive
 * at once, then all gone, under a 20 kHz system-wide session. A lookup
 * that interrupts the table's own resize on the same CPU must not spin.
 */
#define FZ_BURST	128

struct fz_burst {
	int fd;
	uint64_t id;
	pthread_barrier_t *bar;
	long failed;
};

static void *fz_burst_thread(void *p)
{
	struct fz_burst *b = p;
	struct plabel_labels_set_args a = { .size = sizeof(a), .id = b->id };

	if (ioctl(b->fd, PLABEL_IOC_LABELS_SET, &a))
		__atomic_add_fetch(&b->failed, 1, __ATOMIC_RELAXED);
	/* all alive at once: the table holds FZ_BURST entries */
	pthread_barrier_wait(b->bar);
	return NULL;
}

TEST(task_table_resize_while_sampling)
{
	struct plabel_session_start_args sa = {
		.size = sizeof(sa),
		.target = PLABEL_TARGET_ALL,
		.sample_hz = 20000,
		.record = PLABEL_RECORD_CPU,
	};
	struct fz_storm_reader r = { 0 };
	struct fz_burst b = { 0 };
	pthread_barrier_t bar;
	pthread_t th[FZ_BURST], rth;
	pthread_attr_t attr;
	long long tasks0;
	uint64_t t0 = fz_now_ns();
	int sfd, i, round;

	FZ_NEED_DEVICE();
	FZ_NEED_ROOT();
	tasks0 = su_counter("live_tasks");
	b.fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, b.fd);
	b.id = fz_intern(b.fd, "burst", 1);
	ASSERT_NE((uint64_t)0, b.id);
	b.bar = &bar;
	sfd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, sfd);
	ASSERT_EQ(0, ioctl(sfd, PLABEL_IOC_SESSION_START, &sa))
		TH_LOG("SESSION_START: %s", strerror(errno));
	r.fd = sfd;
	ASSERT_EQ(0, pthread_create(&rth, NULL, fz_storm_reader, &r));
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (round = 0; round < 40 && fz_now_ns() - t0 < 4000000000ull;
	     round++) {
		ASSERT_EQ(0, pthread_barrier_init(&bar, NULL, FZ_BURST + 1));
		for (i = 0; i < FZ_BURST; i++)
			ASSERT_EQ(0, pthread_create(&th[i], &attr,
						    fz_burst_thread, &b));
		pthread_barrier_wait(&bar);
		for (i = 0; i < FZ_BURST; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&bar);
	}
	pthread_attr_destroy(&attr);
	ASSERT_EQ(0, ioctl(sfd, PLABEL_IOC_SESSION_STOP));
	pthread_join(rth, NULL);
	TH_LOG("%d bursts of %d labeled threads in %.1f s under 20 kHz sampling; %lld samples delivered",
	       round, FZ_BURST, (fz_now_ns() - t0) / 1e9, r.y.samples);
	EXPECT_EQ(0, r.err);
	EXPECT_EQ(0, b.failed);
	close(sfd);
	close(b.fd);
	EXPECT_EQ(tasks0, su_counter_wait("live_tasks", tasks0));
}

/* --- quota --------------------------------------------------------------- */

#define FZ_QUOTA	64
#define FZ_UID_HOG	54401
#define FZ_UID_OTHER	54402

struct fz_quota {
	long hog_ok, hog_edquot, hog_other, hog_after_ok;
	long other_ok, other_fail;
	int other_err;
	volatile int hog_full;
};

static void fz_as(uid_t uid)
{
	if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
		_exit(100);
}

static void fz_quota_hog(struct fz_quota *q, uint64_t deadline)
{
	int fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
	unsigned int i = 0;

	if (fd < 0)
		_exit(2);
	for (; !q->hog_full && i < 10 * FZ_QUOTA; i++) {
		if (fz_intern(fd, "hog", i))
			q->hog_ok++;
		else if (errno == EDQUOT)
			q->hog_full = 1;
		else
			q->hog_other++;
	}
	/* full: it keeps trying new sets, every one refused */
	while (fz_now_ns() < deadline) {
		if (fz_intern(fd, "hog", i++))
			q->hog_after_ok++;
		else if (errno == EDQUOT)
			q->hog_edquot++;
		else
			q->hog_other++;
	}
	close(fd);
	_exit(0);
}

static void fz_quota_other(struct fz_quota *q, uint64_t deadline)
{
	int fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
	uint64_t ids[FZ_QUOTA / 2];
	unsigned int i, k = 0;

	if (fd < 0)
		_exit(2);
	while (!q->hog_full && fz_now_ns() < deadline)
		usleep(1000);
	while (fz_now_ns() < deadline) {
		/* half the quota live at a time, always new sets */
		for (i = 0; i < FZ_QUOTA / 2; i++) {
			ids[i] = fz_intern(fd, "other", k++);
			if (ids[i]) {
				q->other_ok++;
			} else {
				q->other_fail++;
				q->other_err = errno;
			}
		}
		for (i = 0; i < FZ_QUOTA / 2; i++) {
			struct plabel_set_put_args a = {
				.size = sizeof(a), .id = ids[i],
			};

			if (ids[i])
				ioctl(fd, PLABEL_IOC_SET_PUT, &a);
		}
	}
	close(fd);
	_exit(0);
}

TEST(quota_two_users)
{
	struct fz_quota *q;
	long long old, sets0;
	uint64_t deadline;
	pid_t hog, other;
	int st1, st2;

	FZ_NEED_DEVICE();
	FZ_NEED_ROOT();
	old = su_read_num(FZ_SYSCTL "max_sets_per_user");
	if (old < 0)
		SKIP(return, "kernel.plabel.max_sets_per_user absent");
	sets0 = su_counter("live_sets");
	q = mmap(NULL, sizeof(*q), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, q);
	memset(q, 0, sizeof(*q));
	ASSERT_EQ(0, su_write_num(FZ_SYSCTL "max_sets_per_user", FZ_QUOTA));
	deadline = fz_now_ns() + 3000000000ull;
	hog = fork();
	if (!hog) {
		fz_as(FZ_UID_HOG);
		fz_quota_hog(q, deadline);
	}
	other = fork();
	if (!other) {
		fz_as(FZ_UID_OTHER);
		fz_quota_other(q, deadline);
	}
	EXPECT_EQ(hog, waitpid(hog, &st1, 0));
	EXPECT_EQ(other, waitpid(other, &st2, 0));
	EXPECT_EQ(0, su_write_num(FZ_SYSCTL "max_sets_per_user", old));
	EXPECT_TRUE(WIFEXITED(st1) && !WEXITSTATUS(st1));
	EXPECT_TRUE(WIFEXITED(st2) && !WEXITSTATUS(st2));
	TH_LOG("hog: %ld sets then %ld refused; other user: %ld interned, %ld failed",
	       q->hog_ok, q->hog_edquot, q->other_ok, q->other_fail);
	EXPECT_EQ(FZ_QUOTA, q->hog_ok);
	EXPECT_EQ(1, q->hog_full);
	EXPECT_LT(0, q->hog_edquot);
	EXPECT_EQ(0, q->hog_after_ok);
	EXPECT_EQ(0, q->hog_other);
	EXPECT_LT(FZ_QUOTA, q->other_ok);
	EXPECT_EQ(0, q->other_fail)
		TH_LOG("other user: %s", strerror(q->other_err));
	EXPECT_EQ(sets0, su_counter_wait("live_sets", sets0));
	munmap(q, sizeof(*q));
}

/* --- a stalled reader on the smallest ring ---------------------------- */

struct fz_load {
	volatile int stop;
	long threads;
};

static void *fz_noop(void *p)
{
	return NULL;
}

static void *fz_burn(void *p)
{
	struct fz_load *l = p;
	volatile unsigned long x = 0;

	while (!l->stop) {
		pthread_t th;

		for (int i = 0; i < 100000; i++)
			x += i;
		if (!pthread_create(&th, NULL, fz_noop, NULL)) {
			pthread_join(th, NULL);
			__atomic_add_fetch(&l->threads, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

TEST(stalled_reader)
{
	struct plabel_session_start_args sa = {
		.size = sizeof(sa),
		.target = PLABEL_TARGET_ALL,
		.callchain = PLABEL_CALLCHAIN_FP,
		.sample_hz = 10000,
		.record = PLABEL_RECORD_CPU | PLABEL_RECORD_THREADS,
	};
	long long old, min_kb = 16, recs0, lost0, produced;
	struct fz_load load = { 0 };
	struct fz_tally y = { 0 };
	pthread_t th[2];
	char small[8192];	/* room for one record of any kind */
	int fd, i;

	FZ_NEED_DEVICE();
	FZ_NEED_ROOT();
	old = su_read_num(FZ_SYSCTL "ring_kb");
	recs0 = su_counter("records");
	lost0 = su_counter("lost");
	if (old < 0 || recs0 < 0 || lost0 < 0)
		SKIP(return, "ring_kb sysctl or debugfs counters absent");
	/* the smallest ring the sysctl takes */
	while (min_kb > 1 && !su_write_num(FZ_SYSCTL "ring_kb", min_kb - 1))
		min_kb--;
	ASSERT_EQ(0, su_write_num(FZ_SYSCTL "ring_kb", min_kb));
	fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	i = ioctl(fd, PLABEL_IOC_SESSION_START, &sa);
	EXPECT_EQ(0, su_write_num(FZ_SYSCTL "ring_kb", old));
	ASSERT_EQ(0, i) TH_LOG("SESSION_START: %s", strerror(errno));
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, fz_burn, &load));
	/* stalled: nothing read for 2 s */
	usleep(2000000);
	/* then slow: a few small reads */
	for (i = 0; i < 20; i++) {
		ssize_t n = read(fd, small, sizeof(small));

		ASSERT_LT(0, n) TH_LOG("read: %s", strerror(errno));
		fz_tally_buf(&y, small, n);
		usleep(50000);
	}
	load.stop = 1;
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ASSERT_EQ(0, ioctl(fd, PLABEL_IOC_SESSION_STOP));
	EXPECT_EQ(0, fz_drain(fd, &y, 1 << 20));
	EXPECT_EQ(0, y.bad);
	produced = su_counter("records") - recs0 + su_counter("lost") - lost0;
	TH_LOG("ring %lld KiB, reader stalled 2 s then slow (20 reads of 8 KiB): %lld records produced = %lld delivered + %lld reported lost (%ld threads created)",
	       min_kb, produced, y.recs, y.lost, load.threads);
	EXPECT_LT(0, y.lost);
	EXPECT_LT(0, y.recs);
	EXPECT_EQ(su_counter("records") - recs0, y.recs);
	EXPECT_EQ(su_counter("lost") - lost0, y.lost);
	EXPECT_EQ(produced, y.recs + y.lost);
	close(fd);
}

/* --- failslab ------------------------------------------------------------ */

#define FZ_FAILSLAB	"/sys/kernel/debug/failslab/"

static int fz_failslab_set(const char *name, const char *val)
{
	char path[128];
	int fd, n;

	snprintf(path, sizeof(path), FZ_FAILSLAB "%s", name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (int)strlen(val) ? 0 : -EIO;
}

static void *fz_fail_thread(void *p)
{
	int fd = *(int *)p;
	uint64_t id = fz_intern(fd, "thread", syscall(SYS_gettid));
	struct plabel_labels_set_args a = { .size = sizeof(a), .id = id };

	ioctl(fd, PLABEL_IOC_LABELS_SET, &a);
	return NULL;
}

/*
 * In a child that fails a fifth of its slab allocations: every call fails
 * cleanly (a documented errno) or works. Exit status 0, or 3 with the
 * odd errno written to the pipe.
 */
static int fz_fail_child(int report)
{
	static __thread uint64_t slot;
	struct plabel_session_start_args sa = {
		.size = sizeof(sa),
		.target = PLABEL_TARGET_ALL,
		.sample_hz = 1000,
	};
	int i, fd, odd = 0;
	long ok = 0, failed = 0;
	char line[64];

	fd = open("/proc/self/make-it-fail", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "1", 1) != 1)
		return 2;
	close(fd);
	for (i = 0; i < 400; i++) {
		struct plabel_labels_set_args ls = { .size = sizeof(ls) };
		struct plabel_slot_args sl = {
			.size = sizeof(sl), .addr = (uintptr_t)&slot,
		};
		pthread_t th;
		int r[4], k;

		fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			if (errno != ENOMEM)
				odd = errno;
			continue;
		}
		ls.id = fz_intern(fd, "fail", i % 50);
		r[0] = ls.id ? 0 : errno;
		r[1] = ioctl(fd, PLABEL_IOC_LABELS_SET, &ls) ? errno : 0;
		r[2] = ioctl(fd, PLABEL_IOC_SLOT_SET, &sl) ? errno : 0;
		slot = ls.id;
		r[3] = 0;
		if (i % 20 == 0) {
			r[3] = ioctl(fd, PLABEL_IOC_SESSION_START, &sa) ?
			       errno : 0;
			if (!r[3])
				ioctl(fd, PLABEL_IOC_SESSION_STOP);
		}
		if (!pthread_create(&th, NULL, fz_fail_thread, &fd))
			pthread_join(th, NULL);
		for (k = 0; k < 4; k++) {
			if (!r[k])
				ok++;
			else if (r[k] == ENOMEM || r[k] == EBUSY ||
				 (k == 1 && r[k] == ENOENT))
				failed++;
			else
				odd = r[k];
		}
		close(fd);
	}
	snprintf(line, sizeof(line), "%ld %ld %d\n", ok, failed, odd);
	if (write(report, line, strlen(line)) < 0)
		return 2;
	return odd ? 3 : 0;
}

TEST(failslab)
{
	long sets0, tasks0;
	long ok = 0, failed = 0;
	int odd = 0, status, p[2];
	char line[64] = "";
	pid_t pid;

	FZ_NEED_DEVICE();
	FZ_NEED_ROOT();
	if (access(FZ_FAILSLAB "probability", F_OK) ||
	    access("/proc/self/make-it-fail", F_OK))
		SKIP(return, "no failslab in this kernel (debug kernel only)");
	sets0 = su_counter("live_sets");
	tasks0 = su_counter("live_tasks");
	ASSERT_EQ(0, pipe(p));
	ASSERT_EQ(0, fz_failslab_set("task-filter", "Y"));
	ASSERT_EQ(0, fz_failslab_set("ignore-gfp-wait", "N"));
	ASSERT_EQ(0, fz_failslab_set("interval", "1"));
	ASSERT_EQ(0, fz_failslab_set("times", "-1"));
	ASSERT_EQ(0, fz_failslab_set("space", "0"));
	ASSERT_EQ(0, fz_failslab_set("verbose", "0"));
	ASSERT_EQ(0, fz_failslab_set("probability", "20"));
	pid = fork();
	if (!pid) {
		close(p[0]);
		_exit(fz_fail_child(p[1]));
	}
	close(p[1]);
	EXPECT_LT(0, read(p[0], line, sizeof(line) - 1));
	close(p[0]);
	EXPECT_EQ(pid, waitpid(pid, &status, 0));
	fz_failslab_set("probability", "0");
	fz_failslab_set("task-filter", "N");
	sscanf(line, "%ld %ld %d", &ok, &failed, &odd);
	TH_LOG("with 20%% of slab allocations failing: %ld calls worked, %ld failed with ENOMEM/EBUSY", ok, failed);
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("unexpected errno %d (%s)", odd, strerror(odd));
	EXPECT_LT(0, ok);
	EXPECT_LT(0, failed);
	EXPECT_EQ(sets0, su_counter_wait("live_sets", sets0));
	EXPECT_EQ(tasks0, su_counter_wait("live_tasks", tasks0));
}

/* --- every allocation failure, one at a time ------------------------------ */

/*
 * Writing N to /proc/thread-self/fail-nth makes this thread's Nth fault
 * injection point fail (a slab allocation, with failslab); reading it back
 * gives 0 once it did. Each step below runs with N = 1, 2, ... until a run
 * in which no failure was injected: by then every allocation the step makes
 * in this thread's context has failed once. Each must give a clean error
 * (or be survived), and the module's live objects must come back to where
 * they were.
 */
enum fn_step {
	FN_OPEN, FN_SET_NEW, FN_LABELS_SET, FN_SLOT_SET, FN_SESSION,
	FN_THREAD, FN_FORK, FN_NSTEPS
};

static const char *const fn_names[FN_NSTEPS] = {
	"open", "SET_NEW", "LABELS_SET", "SLOT_SET", "SESSION_START",
	"pthread_create", "fork",
};

/*
 * The calling thread's label set id, 0 when none or on error. Without a
 * buffer the call fails with ERANGE when there are labels, after filling
 * in the id.
 */
static uint64_t fn_labels_get(int fd)
{
	struct plabel_labels_get_args g = { .size = sizeof(g) };

	if (ioctl(fd, PLABEL_IOC_LABELS_GET, &g) && errno != ERANGE)
		return 0;
	return g.id;
}

struct fn_thread {
	int fd;
	uint64_t id;
};

/* A new thread has its creator's labels, or none if the copy failed. */
static void *fn_thread_main(void *p)
{
	struct fn_thread *t = p;

	t->id = fn_labels_get(t->fd);
	return NULL;
}

/* A child that exits 0 when it has its parent's set id or none. */
static __attribute__((noinline)) pid_t fn_fork(int fd, uint64_t id)
{
	pid_t pid = fork();

	if (!pid)
		_exit(fn_labels_get(fd) == id || !fn_labels_get(fd) ? 0 : 1);
	return pid;
}

/*
 * One run of STEP with the Nth injection point failing (0: none). Returns
 * 0 when the step worked or failed cleanly, else the odd errno (or -1
 * when what it left behind is wrong). *fired: whether a failure was
 * injected.
 */
static int fn_run(int nth_fd, enum fn_step step, unsigned int n, int *fired)
{
	static __thread uint64_t slot;
	struct plabel_session_start_args sa = {
		.size = sizeof(sa),
		.target = PLABEL_TARGET_ALL,
		.callchain = PLABEL_CALLCHAIN_FP,
		.sample_hz = 1000,
	};
	struct plabel_slot_args sl = {
		.size = sizeof(sl), .addr = (uintptr_t)&slot,
	};
	struct plabel_labels_set_args ls = { .size = sizeof(ls) };
	struct fn_thread t = { 0 };
	uint64_t id = 0;
	char buf[16];
	int fd = -1, r = 0, ok_errno = ENOMEM, status;
	pthread_t th;
	pid_t pid = -1;
	ssize_t len;

	if (step != FN_OPEN) {
		fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return errno;
		id = fz_intern(fd, "nth", n);
		if (!id) {
			r = errno;
			goto out;
		}
		if ((step == FN_THREAD || step == FN_FORK) &&
		    ioctl(fd, PLABEL_IOC_LABELS_SET,
			  &(struct plabel_labels_set_args){ .size = sizeof(ls),
							   .id = id })) {
			r = errno;
			goto out;
		}
	}
	ls.id = id;
	t.fd = fd;
	len = snprintf(buf, sizeof(buf), "%u", n);
	if (pwrite(nth_fd, buf, len, 0) != len)
		return -1;
	switch (step) {
	case FN_OPEN:
		fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
		r = fd < 0 ? errno : 0;
		break;
	case FN_SET_NEW:
		r = fz_intern(fd, "nth-new", n) ? 0 : errno;
		break;
	case FN_LABELS_SET:
		r = ioctl(fd, PLABEL_IOC_LABELS_SET, &ls) ? errno : 0;
		break;
	case FN_SLOT_SET:
		r = ioctl(fd, PLABEL_IOC_SLOT_SET, &sl) ? errno : 0;
		break;
	case FN_SESSION:
		r = ioctl(fd, PLABEL_IOC_SESSION_START, &sa) ? errno : 0;
		break;
	case FN_THREAD:
		r = pthread_create(&th, NULL, fn_thread_main, &t);
		ok_errno = EAGAIN;
		break;
	case FN_FORK:
		pid = fn_fork(fd, id);
		r = pid < 0 ? errno : 0;
		ok_errno = EAGAIN;
		break;
	default:
		r = EINVAL;
	}
	len = pread(nth_fd, buf, sizeof(buf) - 1, 0);
	*fired = len > 0 && buf[0] == '0';
	if (pwrite(nth_fd, "0", 1, 0) != 1)
		return -1;

	if (r == ENOMEM || r == ok_errno) {
		r = 0;
		goto out;	/* a clean failure */
	}
	if (r)
		goto out;
	/* it worked: it must have done what it says */
	switch (step) {
	case FN_SET_NEW:
	case FN_OPEN:
		break;
	case FN_LABELS_SET:
		if (fn_labels_get(fd) != id)
			r = -1;
		break;
	case FN_SLOT_SET:
		sl.addr = 0;
		if (ioctl(fd, PLABEL_IOC_SLOT_SET, &sl))
			r = -1;
		break;
	case FN_SESSION:
		if (ioctl(fd, PLABEL_IOC_SESSION_STOP))
			r = -1;
		break;
	case FN_THREAD:
		pthread_join(th, NULL);
		if (t.id && t.id != id)
			r = -1;
		break;
	case FN_FORK:
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			r = -1;
		break;
	default:
		break;
	}
out:
	if (step == FN_THREAD || step == FN_FORK || step == FN_LABELS_SET)
		ioctl(fd, PLABEL_IOC_LABELS_SET,
		      &(struct plabel_labels_set_args){ .size = sizeof(ls) });
	if (fd >= 0)
		close(fd);
	return r;
}

TEST(fail_nth)
{
	long sets0, tasks0;
	int nth_fd, step;

	FZ_NEED_DEVICE();
	FZ_NEED_ROOT();
	nth_fd = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
	if (nth_fd < 0 || access(FZ_FAILSLAB "ignore-gfp-wait", F_OK))
		SKIP(return, "no fail-nth in this kernel (debug kernel only)");
	/* every slab allocation counts, however it may sleep */
	ASSERT_EQ(0, fz_failslab_set("ignore-gfp-wait", "N"));
	ASSERT_EQ(0, fz_failslab_set("verbose", "0"));
	sets0 = su_counter("live_sets");
	tasks0 = su_counter("live_tasks");
	for (step = 0; step < FN_NSTEPS; step++) {
		unsigned int n;
		int injected = 0;
		int fired = 1, r = 0;

		for (n = 1; n <= 3000 && fired; n++) {
			r = fn_run(nth_fd, step, n, &fired);
			if (r)
				break;
			injected += fired;
		}
		EXPECT_EQ(0, r)
			TH_LOG("%s with allocation %u failing: %s", fn_names[step],
			       n, r > 0 ? strerror(r) : "wrong state after");
		EXPECT_FALSE(fired)
			TH_LOG("%s: still allocating after %u runs", fn_names[step],
			       n - 1);
		TH_LOG("%s: %u allocation failures injected, each handled",
		       fn_names[step], injected);
		EXPECT_LT(0, injected);
		EXPECT_EQ(sets0, su_counter_wait("live_sets", sets0))
			TH_LOG("after %s", fn_names[step]);
		EXPECT_EQ(tasks0, su_counter_wait("live_tasks", tasks0))
			TH_LOG("after %s", fn_names[step]);
	}
	close(nth_fd);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "--fuzz-exec"))
		return fz_exec_main(argc, argv);
	return test_harness_run(argc, argv);
}
