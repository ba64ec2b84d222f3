// SPDX-License-Identifier: GPL-2.0
/*
 * PLABEL_IOC_THREADS_GET: the checks of its arguments; a thread blocked
 * in read() on a pipe and one in nanosleep() reported with their state,
 * wait kind, labels and a user stack that starts in the C library's
 * system call; a buffer too small; an unprivileged caller denied another
 * user's process and allowed its own; processes that exit during calls.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "session_util.h"
#include "kselftest/kselftest_harness.h"

#define BUF_LEN		(1 << 20)
#define NOBODY		65534

static int threads_get(int fd, pid_t pid, uint32_t flags, uint32_t cc,
		       void *buf, uint32_t len,
		       struct plabel_threads_get_args *out)
{
	struct plabel_threads_get_args a = {
		.size = sizeof(a),
		.flags = flags,
		.pid = pid,
		.callchain = cc,
		.buf = (uintptr_t)buf,
		.buf_len = len,
	};
	int ret = ioctl(fd, PLABEL_IOC_THREADS_GET, &a) ? -errno : 0;

	if (out)
		*out = a;
	return ret;
}

/* The THREADSTATE record of tid in what the call wrote, or NULL. */
static struct plabel_rec_sample *find_thread(struct su_stream *st,
					     uint32_t tid)
{
	struct plabel_rec_header *h;
	size_t off;

	FOR_EACH_REC(st, h, off)
		if (h->type == PLABEL_REC_THREADSTATE &&
		    ((struct plabel_rec_sample *)h)->tid == tid)
			return (void *)h;
	return NULL;
}

struct blocker {
	int fd;			/* /dev/plabel, for the labels */
	int pipe[2];
	const char *value;
	volatile pid_t tid;
	volatile int ready;
	uint64_t set;
	int sleep;		/* nanosleep, else read() on the pipe */
};

static void *blocker_fn(void *arg)
{
	struct blocker *b = arg;
	char c;

	b->set = su_set_new(b->fd, "job", b->value);
	su_labels_set(b->fd, b->set);
	b->tid = su_gettid();
	__atomic_store_n(&b->ready, 1, __ATOMIC_RELEASE);
	if (b->sleep) {
		struct timespec ts = { 30, 0 };

		nanosleep(&ts, NULL);
	} else {
		while (read(b->pipe[0], &c, 1) < 0 && errno == EINTR)
			;
	}
	return NULL;
}

/* Wait until tid sleeps (state S in /proc). */
static int wait_sleeping(pid_t tid)
{
	char path[64], buf[256], *p;
	int i, fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	for (i = 0; i < 500; i++) {
		fd = open(path, O_RDONLY);
		if (fd < 0)
			return -1;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = 0;
			p = strrchr(buf, ')');
			if (p && p[1] == ' ' && p[2] == 'S')
				return 0;
		}
		usleep(10000);
	}
	return -1;
}

/* Whether libc's text holds addr: a mapping of a file named libc*. */
static int in_libc(uint64_t addr)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && addr >= lo &&
		    addr < hi && strstr(line, "/libc"))
			found = 1;
	}
	fclose(f);
	return found;
}

FIXTURE(threads) {
	int fd;
	char *buf;
};

FIXTURE_SETUP(threads)
{
	self->fd = -1;
	self->buf = NULL;
	if (!su_have_dev())
		SKIP(return, SU_DEV " absent: module not loaded");
	self->fd = open(SU_DEV, O_RDWR);
	ASSERT_LE(0, self->fd);
	self->buf = malloc(BUF_LEN);
	ASSERT_NE(NULL, self->buf);
}

FIXTURE_TEARDOWN(threads)
{
	if (self->fd >= 0)
		close(self->fd);
	free(self->buf);
}

TEST_F(threads, bad_args)
{
	struct plabel_threads_get_args a;
	pid_t me = getpid();
	uint64_t big[4096 / 8 + 2] = { 0 };

	/* size: too short, too long, nonzero tail */
	memset(&a, 0, sizeof(a));
	a.size = 8;
	a.pid = me;
	a.buf = (uintptr_t)self->buf;
	a.buf_len = BUF_LEN;
	EXPECT_EQ(-1, ioctl(self->fd, PLABEL_IOC_THREADS_GET, &a));
	EXPECT_EQ(EINVAL, errno);
	a.size = sizeof(big);
	memcpy(big, &a, sizeof(a));
	EXPECT_EQ(-1, ioctl(self->fd, PLABEL_IOC_THREADS_GET, big));
	EXPECT_EQ(E2BIG, errno);
	a.size = sizeof(a) + 8;
	memcpy(big, &a, sizeof(a));
	big[sizeof(a) / 8] = 1;
	EXPECT_EQ(-1, ioctl(self->fd, PLABEL_IOC_THREADS_GET, big));
	EXPECT_EQ(E2BIG, errno);

	/* flags, callchain, stack sizes */
	EXPECT_EQ(-EINVAL, threads_get(self->fd, me, 1U << 7,
				       PLABEL_CALLCHAIN_FP, self->buf,
				       BUF_LEN, NULL));
	EXPECT_EQ(-EINVAL, threads_get(self->fd, me, 0, 3, self->buf,
				       BUF_LEN, NULL));
	/* pid 0, negative, not a process */
	EXPECT_EQ(-EINVAL, threads_get(self->fd, 0, 0, PLABEL_CALLCHAIN_FP,
				       self->buf, BUF_LEN, NULL));
	EXPECT_EQ(-EINVAL, threads_get(self->fd, -1, 0, PLABEL_CALLCHAIN_FP,
				       self->buf, BUF_LEN, NULL));
	EXPECT_EQ(-ESRCH, threads_get(self->fd, 0x3ffffff0, 0,
				      PLABEL_CALLCHAIN_FP, self->buf,
				      BUF_LEN, NULL));
	/* buffers: none, empty, unmapped, too small */
	EXPECT_EQ(-EINVAL, threads_get(self->fd, me, 0, PLABEL_CALLCHAIN_FP,
				       NULL, BUF_LEN, NULL));
	EXPECT_EQ(-EINVAL, threads_get(self->fd, me, 0, PLABEL_CALLCHAIN_FP,
				       self->buf, 0, NULL));
	EXPECT_EQ(-EFAULT, threads_get(self->fd, me, 0, PLABEL_CALLCHAIN_FP,
				       (void *)(uintptr_t)0xffff888000000000ULL,
				       BUF_LEN, NULL));
	EXPECT_EQ(-EFAULT, threads_get(self->fd, me, 0, PLABEL_CALLCHAIN_FP,
				       (void *)(uintptr_t)4096, 4096, NULL));
	EXPECT_EQ(-ENOSPC, threads_get(self->fd, me, 0, PLABEL_CALLCHAIN_FP,
				       self->buf, 16, &a));
	EXPECT_EQ(0U, a.buf_used);
	EXPECT_LE(1U, a.nthreads);

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.pid = me;
	a.callchain = PLABEL_CALLCHAIN_DWARF;
	a.buf = (uintptr_t)self->buf;
	a.buf_len = BUF_LEN;
	a.stack_size = 12;
	EXPECT_EQ(-1, ioctl(self->fd, PLABEL_IOC_THREADS_GET, &a));
	EXPECT_EQ(EINVAL, errno);
	a.stack_size = 1 << 20;
	EXPECT_EQ(-1, ioctl(self->fd, PLABEL_IOC_THREADS_GET, &a));
	EXPECT_EQ(EINVAL, errno);
	a.stack_size = 0;
	a.max_stack = 100000;
	EXPECT_EQ(-1, ioctl(self->fd, PLABEL_IOC_THREADS_GET, &a));
	EXPECT_EQ(EINVAL, errno);
}

/* Blocked threads: state, wait kind, labels and stacks; fp and dwarf. */
TEST_F(threads, blocked)
{
	struct blocker rd = { .fd = self->fd, .value = "reader" };
	struct blocker sl = { .fd = self->fd, .value = "sleeper", .sleep = 1 };
	pthread_t trd, tsl;
	struct plabel_threads_get_args a;
	struct plabel_rec_sample *s;
	struct plabel_rec_labelset *l;
	struct su_stream st = { 0 };
	uint32_t cc;

	ASSERT_EQ(0, pipe(rd.pipe));
	ASSERT_EQ(0, pthread_create(&trd, NULL, blocker_fn, &rd));
	ASSERT_EQ(0, pthread_create(&tsl, NULL, blocker_fn, &sl));
	while (!__atomic_load_n(&rd.ready, __ATOMIC_ACQUIRE) ||
	       !__atomic_load_n(&sl.ready, __ATOMIC_ACQUIRE))
		usleep(1000);
	ASSERT_NE(0ULL, rd.set);
	ASSERT_NE(0ULL, sl.set);
	ASSERT_EQ(0, wait_sleeping(rd.tid));
	ASSERT_EQ(0, wait_sleeping(sl.tid));

	for (cc = PLABEL_CALLCHAIN_FP; cc <= PLABEL_CALLCHAIN_DWARF; cc++) {
		ASSERT_EQ(0, threads_get(self->fd, getpid(), 0, cc, self->buf,
					 BUF_LEN, &a));
		EXPECT_EQ(3U, a.nthreads);
		EXPECT_EQ(0U, a.nhidden);
		st.buf = self->buf;
		st.len = a.buf_used;
		st.bad = 0;
		su_check(&st);
		ASSERT_EQ(0, st.bad) TH_LOG("%s", st.why);

		s = find_thread(&st, rd.tid);
		ASSERT_NE(NULL, s);
		EXPECT_EQ((uint32_t)getpid(), s->pid);
		EXPECT_EQ((uint32_t)PLABEL_THREAD_SLEEPING, s->wait_state);
		EXPECT_EQ((uint32_t)PLABEL_WAIT_IO, s->wait_kind);
		EXPECT_EQ(rd.set, s->set_id);
		EXPECT_EQ(0U, s->flags & (PLABEL_THREADSTATE_ONCPU |
					 PLABEL_THREADSTATE_NOLABELS));
		EXPECT_EQ(0, (int)s->nr_kernel);
		ASSERT_LE(1, (int)s->nr_user);
		/* it blocked in the C library's read() */
		EXPECT_TRUE(in_libc(su_ips(s)[0]));
		if (cc == PLABEL_CALLCHAIN_DWARF) {
			EXPECT_TRUE(!!(s->flags & PLABEL_SAMPLE_REGS));
			EXPECT_LT(0U, s->stack_size);
		}
		l = su_labelset(&st, rd.set);
		ASSERT_NE(NULL, l);
		EXPECT_TRUE(su_labelset_is(l, "job", "reader"));

		s = find_thread(&st, sl.tid);
		ASSERT_NE(NULL, s);
		EXPECT_EQ((uint32_t)PLABEL_THREAD_SLEEPING, s->wait_state);
		EXPECT_EQ((uint32_t)PLABEL_WAIT_SLEEP, s->wait_kind);
		EXPECT_EQ(sl.set, s->set_id);
		ASSERT_LE(1, (int)s->nr_user);
		EXPECT_TRUE(in_libc(su_ips(s)[0]));
		l = su_labelset(&st, sl.set);
		ASSERT_NE(NULL, l);
		EXPECT_TRUE(su_labelset_is(l, "job", "sleeper"));

		/* the caller itself is on a CPU: no stacks */
		s = find_thread(&st, (uint32_t)su_gettid());
		ASSERT_NE(NULL, s);
		EXPECT_TRUE(!!(s->flags & PLABEL_THREADSTATE_ONCPU));
		EXPECT_EQ((uint32_t)PLABEL_THREAD_RUNNING, s->wait_state);
		EXPECT_EQ(0, s->nr_user + s->nr_kernel);
	}

	/* a buffer for the first records only: whole ones, then -ENOSPC */
	ASSERT_EQ(-ENOSPC, threads_get(self->fd, getpid(), 0,
				       PLABEL_CALLCHAIN_FP, self->buf, 200,
				       &a));
	EXPECT_EQ(3U, a.nthreads);
	st.len = a.buf_used;
	st.bad = 0;
	su_check(&st);
	EXPECT_EQ(0, st.bad);
	EXPECT_GE(200U, a.buf_used);

	/* kernel stacks: privileged, and not on every kernel */
	if (!geteuid()) {
		int ret = threads_get(self->fd, getpid(), PLABEL_THREADS_KERNEL,
				      PLABEL_CALLCHAIN_FP, self->buf, BUF_LEN,
				      &a);

		if (ret != -EOPNOTSUPP) {
			ASSERT_EQ(0, ret);
			st.len = a.buf_used;
			s = find_thread(&st, rd.tid);
			ASSERT_NE(NULL, s);
			EXPECT_LE(1, (int)s->nr_kernel);
			/* kernel frames first, then user ones */
			EXPECT_LE(0xffff800000000000ULL, su_ips(s)[0]);
			EXPECT_GT(0xffff800000000000ULL,
				  su_ips(s)[s->nr_kernel]);
		}
	}

	ASSERT_EQ(1, write(rd.pipe[1], "x", 1));
	pthread_join(trd, NULL);
	pthread_cancel(tsl);
	pthread_join(tsl, NULL);
	close(rd.pipe[0]);
	close(rd.pipe[1]);
}

/* A child setuid to nobody: another user's process no, its own yes. */
TEST_F(threads, unprivileged)
{
	pid_t child;
	int status;

	if (geteuid())
		SKIP(return, "needs root to become another user");
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		struct plabel_threads_get_args a;
		int r;

		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(10);
		/* pid 1 is root's */
		r = threads_get(self->fd, 1, 0, PLABEL_CALLCHAIN_FP, self->buf,
				BUF_LEN, NULL);
		if (r != -EACCES)
			_exit(11);
		/* the parent is root's too */
		r = threads_get(self->fd, getppid(), 0, PLABEL_CALLCHAIN_FP,
				self->buf, BUF_LEN, NULL);
		if (r != -EACCES)
			_exit(12);
		r = threads_get(self->fd, getpid(), 0, PLABEL_CALLCHAIN_FP,
				self->buf, BUF_LEN, &a);
		if (r || a.nthreads != 1 || !a.buf_used)
			_exit(13);
		/* kernel stacks need CAP_PERFMON */
		r = threads_get(self->fd, getpid(), PLABEL_THREADS_KERNEL,
				PLABEL_CALLCHAIN_FP, self->buf, BUF_LEN, NULL);
		if (r != -EPERM)
			_exit(14);
		_exit(0);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

static void *spin_exit_fn(void *arg)
{
	usleep((uintptr_t)arg);
	return NULL;
}

/*
 * Processes with threads that come and go, and that exit, while calls
 * read them: every call succeeds with whole records or finds the process
 * gone (-ESRCH), nothing else.
 */
TEST_F(threads, exiting)
{
	int round, bad = 0;

	for (round = 0; round < 40; round++) {
		pid_t child = fork();
		struct plabel_threads_get_args a;
		int i, r, status;

		ASSERT_LE(0, child);
		if (child == 0) {
			pthread_t t[8];

			for (i = 0; i < 8; i++)
				pthread_create(&t[i], NULL, spin_exit_fn,
					       (void *)(uintptr_t)(i * 300));
			usleep(round * 100);
			_exit(0);	/* while threads run or sleep */
		}
		for (i = 0; i < 20; i++) {
			r = threads_get(self->fd, child, 0,
					i & 1 ? PLABEL_CALLCHAIN_DWARF :
						PLABEL_CALLCHAIN_FP,
					self->buf, BUF_LEN, &a);
			if (r == 0) {
				struct su_stream st = {
					.buf = self->buf, .len = a.buf_used,
				};

				su_check(&st);
				bad += st.bad;
			} else if (r != -ESRCH) {
				bad++;
				TH_LOG("round %d: %s", round, strerror(-r));
			}
		}
		ASSERT_EQ(child, waitpid(child, &status, 0));
		/* a zombie reaped: gone */
		EXPECT_EQ(-ESRCH, threads_get(self->fd, child, 0,
					      PLABEL_CALLCHAIN_FP, self->buf,
					      BUF_LEN, NULL));
	}
	EXPECT_EQ(0, bad);
}

/* A process whose leader has exited (pthread_exit), its thread going on. */
static void *leader_gone_fn(void *arg)
{
	int *done = arg;
	char c;

	if (read(done[0], &c, 1) < 0)
		_exit(31);
	_exit(0);
}

static int is_zombie_leader(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] == 'Z';
}

/*
 * Its leader gone, a process has no memory to judge by: as ptrace does,
 * the credentials decide, so another process of the same user reads it
 * (its leader, exiting, without stacks) instead of being refused.
 */
TEST_F(threads, exited_leader)
{
	int done[2], i, status;
	pid_t a, b;

	if (geteuid())
		SKIP(return, "needs root to become another user");
	ASSERT_EQ(0, pipe(done));
	a = fork();
	ASSERT_LE(0, a);
	if (a == 0) {
		pthread_t t;

		close(done[1]);
		if (setgid(NOBODY) || setuid(NOBODY) ||
		    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0))
			_exit(30);
		if (pthread_create(&t, NULL, leader_gone_fn, done))
			_exit(32);
		pthread_exit(NULL);
	}
	close(done[0]);
	for (i = 0; i < 500 && !is_zombie_leader(a); i++)
		usleep(10000);
	ASSERT_TRUE(is_zombie_leader(a));
	b = fork();
	ASSERT_LE(0, b);
	if (b == 0) {
		struct plabel_threads_get_args r;
		int err;

		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(10);
		err = threads_get(self->fd, a, 0, PLABEL_CALLCHAIN_FP,
				  self->buf, BUF_LEN, &r);
		if (err)
			_exit(11 + (-err & 63));
		_exit(r.nthreads == 2 && !r.nhidden ? 0 : 9);
	}
	ASSERT_EQ(b, waitpid(b, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	/* 11 + EACCES (13) = 24: refused for want of the leader's memory */
	EXPECT_EQ(0, WEXITSTATUS(status));
	close(done[1]);
	ASSERT_EQ(a, waitpid(a, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status));
}

/* Writes s to /proc/pid/name; 0 or -1. */
static int write_proc(pid_t pid, const char *name, const char *s)
{
	char path[64];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	ok = fputs(s, f) >= 0;
	return fclose(f) || !ok ? -1 : 0;
}

/* Root's way out of a chroot: 0 or -1. */
static int leave_chroot(void)
{
	int fd = open("/", O_RDONLY | O_DIRECTORY), i;

	if (fd < 0 || chroot("/tmp") || fchdir(fd))
		return -1;
	close(fd);
	for (i = 0; i < 64; i++)
		if (chdir(".."))
			return -1;
	return chroot(".");
}

/*
 * A process in a user namespace that root made, its root mapped to
 * nobody and holding every capability there, is not readable by nobody
 * outside it: as ptrace, a target in another user namespace needs
 * CAP_SYS_PTRACE in that namespace, which nobody lacks (root owns it).
 */
TEST_F(threads, other_user_namespace)
{
	int go[2], ready[2], done[2], status;
	pid_t a, b;
	char c;

	if (geteuid())
		SKIP(return, "needs root to make the namespace");
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(done));
	a = fork();
	ASSERT_LE(0, a);
	if (a == 0) {
		close(go[1]);
		close(ready[0]);
		close(done[1]);
		/*
		 * Not from a chroot (EPERM), as the VM runs its tests: this
		 * child, root, leaves it for the system's root first (it
		 * only holds the namespace; the test reads it by pid).
		 */
		if (leave_chroot())
			_exit(44);
		if (unshare(CLONE_NEWUSER))
			_exit(40 + (errno & 3));
		if (write(ready[1], "u", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(41);
		/* root inside, nobody outside, every capability inside */
		if (setgid(0) || setuid(0) || prctl(PR_SET_DUMPABLE, 1, 0, 0, 0))
			_exit(48);
		if (write(ready[1], "r", 1) != 1 || read(done[0], &c, 1) < 0)
			_exit(49);
		_exit(0);
	}
	close(go[0]);
	close(ready[1]);
	close(done[0]);
	if (read(ready[0], &c, 1) != 1) {
		waitpid(a, &status, 0);
		SKIP(return, "cannot make a user namespace here (exit %d)",
		     WEXITSTATUS(status));
	}
	ASSERT_EQ(0, write_proc(a, "uid_map", "0 65534 1"));
	ASSERT_EQ(0, write_proc(a, "setgroups", "deny"));
	ASSERT_EQ(0, write_proc(a, "gid_map", "0 65534 1"));
	ASSERT_EQ(1, write(go[1], "g", 1));
	if (read(ready[0], &c, 1) != 1) {
		waitpid(a, &status, 0);
		TH_LOG("the namespace's root: exit %d", WEXITSTATUS(status));
		ASSERT_TRUE(0);
	}
	b = fork();
	ASSERT_LE(0, b);
	if (b == 0) {
		int err;

		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(10);
		err = threads_get(self->fd, a, 0, PLABEL_CALLCHAIN_FP,
				  self->buf, BUF_LEN, NULL);
		_exit(err == -EACCES ? 0 : err ? 11 + (-err & 63) : 9);
	}
	ASSERT_EQ(b, waitpid(b, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	/* 9: read, as before the check knew of namespaces */
	EXPECT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(1, write(done[1], "d", 1));
	ASSERT_EQ(a, waitpid(a, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status));
}

TEST_HARNESS_MAIN
