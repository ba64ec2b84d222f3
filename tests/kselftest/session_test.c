// SPDX-License-Identifier: GPL-2.0
/*
 * Profiling sessions: who may start one, one per file and as many at once
 * as kernel.plabel.max_sessions allows, argument checks,
 * read()/poll() semantics, teardown on close, and lost-record accounting
 * when the reader does not keep up (or never reads).
 */
#include <dlfcn.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <linux/capability.h>

#include "session_util.h"
#include "kselftest/kselftest_harness.h"

#define NEED_ROOT() do {						\
	if (!su_have_dev())						\
		SKIP(return, SU_DEV " absent: module not loaded");	\
	if (geteuid())							\
		SKIP(return, "needs root for CAP_PERFMON");		\
} while (0)

static int start_self(int fd, uint32_t callchain, uint32_t hz)
{
	struct plabel_session_start_args a;
	int32_t pid = getpid();

	su_args_init(&a);
	a.target = PLABEL_TARGET_PIDS;
	a.pids = (uintptr_t)&pid;
	a.npids = 1;
	a.callchain = callchain;
	a.sample_hz = hz;
	return su_start(fd, &a);
}

/* In a child: drop the two capabilities a session needs, try to start one. */
static int child_start_errno(int how)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -1000;
	if (!pid) {
		struct __user_cap_header_struct hdr = {
			.version = _LINUX_CAPABILITY_VERSION_3,
		};
		struct __user_cap_data_struct d[2];
		int fd, err;

		if (how == 0) {
			/* stay root, lose CAP_SYS_ADMIN and CAP_PERFMON */
			if (syscall(SYS_capget, &hdr, d))
				_exit(100);
			d[CAP_SYS_ADMIN / 32].effective &=
				~(1U << (CAP_SYS_ADMIN % 32));
			d[CAP_PERFMON / 32].effective &=
				~(1U << (CAP_PERFMON % 32));
			if (syscall(SYS_capset, &hdr, d))
				_exit(101);
		} else if (setresgid(65534, 65534, 65534) ||
			   setresuid(65534, 65534, 65534)) {
			_exit(102);
		}
		fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			_exit(103);
		err = start_self(fd, PLABEL_CALLCHAIN_FP, 99);
		_exit(err < 0 ? -err : 0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1001;
	return WEXITSTATUS(status);
}

TEST(start_needs_perfmon_or_sys_admin)
{
	NEED_ROOT();
	ASSERT_EQ(EPERM, child_start_errno(0));
	ASSERT_EQ(EPERM, child_start_errno(1));
}

/*
 * A file runs one session in its life. With kernel.plabel.max_sessions at
 * 1, a session on another file waits until the first one's file is closed
 * (stopped, it still holds its rings); at 2 it runs beside it (more in
 * multi_session_test).
 */
TEST(one_session_per_file)
{
	long long max0;
	int fd1, fd2, fd3, fd4;

	NEED_ROOT();
	max0 = su_read_num(SU_SYSCTL "max_sessions");
	ASSERT_LE(1, max0) TH_LOG("no kernel.plabel.max_sessions");
	ASSERT_EQ(0, su_write_num(SU_SYSCTL "max_sessions", 1));
	fd1 = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	fd2 = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	fd3 = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd1);
	ASSERT_LE(0, fd2);
	ASSERT_LE(0, fd3);
	ASSERT_EQ(0, start_self(fd1, PLABEL_CALLCHAIN_FP, 99));
	EXPECT_EQ(-EBUSY, start_self(fd2, PLABEL_CALLCHAIN_FP, 99));
	EXPECT_EQ(-EBUSY, start_self(fd1, PLABEL_CALLCHAIN_FP, 99));
	ASSERT_EQ(0, su_stop(fd1));
	/* stopping twice is harmless; a file runs one session only */
	EXPECT_EQ(0, su_stop(fd1));
	EXPECT_EQ(-EBUSY, start_self(fd1, PLABEL_CALLCHAIN_FP, 99));
	EXPECT_EQ(-EBUSY, start_self(fd2, PLABEL_CALLCHAIN_FP, 99));
	close(fd1);
	EXPECT_EQ(0, start_self(fd2, PLABEL_CALLCHAIN_FP, 99));
	EXPECT_EQ(-EBUSY, start_self(fd3, PLABEL_CALLCHAIN_FP, 99));
	close(fd2);	/* close without stop tears the session down */
	EXPECT_EQ(0, start_self(fd3, PLABEL_CALLCHAIN_DWARF, 99));
	/* a second one beside it once the limit allows */
	fd4 = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd4);
	EXPECT_EQ(-EBUSY, start_self(fd4, PLABEL_CALLCHAIN_FP, 99));
	ASSERT_EQ(0, su_write_num(SU_SYSCTL "max_sessions", 2));
	EXPECT_EQ(0, start_self(fd4, PLABEL_CALLCHAIN_FP, 99));
	EXPECT_EQ(-EBUSY, start_self(fd3, PLABEL_CALLCHAIN_FP, 99));
	close(fd4);
	close(fd3);
	EXPECT_EQ(0, su_write_num(SU_SYSCTL "max_sessions", max0));
}

TEST(bad_arguments)
{
	struct plabel_session_start_args a;
	int32_t pids[2] = { getpid(), -1 };
	char big[sizeof(a) + 8];
	char rbuf[64];
	int fd;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	EXPECT_EQ(-EINVAL, su_stop(fd));
	EXPECT_EQ(-1, read(fd, rbuf, sizeof(rbuf)));
	EXPECT_EQ(EINVAL, errno);

#define BAD(expect, stmt) do {						\
		su_args_init(&a);					\
		stmt;							\
		EXPECT_EQ(expect, su_start(fd, &a)) TH_LOG(#stmt);	\
	} while (0)
	BAD(-EINVAL, a.flags = 1U << 2);
	BAD(-EINVAL, a.pad = 1);
	BAD(-EINVAL, a.target = 3);
	BAD(-EINVAL, a.callchain = 3);
	BAD(-EINVAL, a.record = 1U << 7);
	BAD(-EINVAL, a.sample_hz = 20001);
	BAD(-EINVAL, a.max_stack = 1025);
	BAD(-EINVAL, a.stack_size = 12);
	BAD(-EINVAL, a.stack_size = 65536);
	BAD(-EINVAL, a.npids = 1);
	BAD(-EINVAL, a.pids = (uintptr_t)pids);
	BAD(-EINVAL, a.target = PLABEL_TARGET_PIDS);
	BAD(-EINVAL, (a.target = PLABEL_TARGET_PIDS, a.pids = (uintptr_t)pids,
		      a.npids = PLABEL_MAX_PIDS + 1));
	BAD(-EINVAL, (a.target = PLABEL_TARGET_TREE, a.pids = (uintptr_t)pids,
		      a.npids = 2));
	BAD(-EFAULT, (a.target = PLABEL_TARGET_PIDS, a.pids = 8, a.npids = 1));
	BAD(-EINVAL, a.size = 8);
#undef BAD
	/* a larger struct from a newer caller: zero tail fine, else E2BIG */
	memset(big, 0, sizeof(big));
	su_args_init(&a);
	a.size = sizeof(big);
	a.sample_hz = 99;
	memcpy(big, &a, sizeof(a));
	big[sizeof(a) + 3] = 1;
	EXPECT_EQ(-1, ioctl(fd, PLABEL_IOC_SESSION_START, big));
	EXPECT_EQ(E2BIG, errno);
	big[sizeof(a) + 3] = 0;
	EXPECT_EQ(0, ioctl(fd, PLABEL_IOC_SESSION_START, big));
	/* a buffer smaller than the next record */
	EXPECT_EQ(-1, read(fd, rbuf, 16));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, su_stop(fd));
	close(fd);
}

TEST(read_poll_and_eof)
{
	struct su_stream st = { 0 };
	struct pollfd p;
	char buf[4096];
	ssize_t n;
	int fd;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	ASSERT_LE(0, fd);
	p.fd = fd;
	p.events = POLLIN;
	ASSERT_EQ(0, start_self(fd, PLABEL_CALLCHAIN_FP, 999));
	/* the stream record is there at once */
	EXPECT_EQ(1, poll(&p, 1, 0));
	n = read(fd, buf, sizeof(buf));
	ASSERT_LE((ssize_t)sizeof(struct plabel_rec_stream), n);
	EXPECT_EQ((uint32_t)PLABEL_REC_STREAM, ((struct plabel_rec_header *)buf)->type);
	EXPECT_EQ((uint32_t)PLABEL_REC_VERSION,
		  ((struct plabel_rec_stream *)buf)->version);
	EXPECT_EQ(1000000000ull / 999,
		  ((struct plabel_rec_stream *)buf)->period_ns);
	/* nothing more while this thread sleeps */
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	EXPECT_EQ(EAGAIN, errno);
	/* samples wake a poller (the tick wakes within a second) */
	su_burn_cpu(100000000);
	EXPECT_EQ(1, poll(&p, 1, 2000));
	EXPECT_TRUE(p.revents & POLLIN);
	ASSERT_EQ(0, su_stop(fd));
	EXPECT_EQ(1, poll(&p, 1, 0));
	EXPECT_TRUE(p.revents & POLLHUP);
	ASSERT_EQ(0, su_drain(fd, &st));
	EXPECT_LT(0U, st.len);
	su_check(&st);
	EXPECT_EQ(0, st.bad) TH_LOG("%s", st.why);
	EXPECT_LT(0U, su_count(&st, PLABEL_REC_SAMPLE));
	/* after the drain: EOF, again and again */
	EXPECT_EQ(0, read(fd, buf, sizeof(buf)));
	EXPECT_EQ(0, read(fd, buf, sizeof(buf)));
	su_stream_free(&st);
	close(fd);
}

/*
 * Read what there is (non-blocking); whether an EXEC record was in it,
 * or with lib an MMAP record of a path containing lib.
 */
static int read_all_news(int fd, char *buf, size_t cap, const char *lib)
{
	int exec = 0;
	ssize_t n;

	while ((n = read(fd, buf, cap)) > 0) {
		size_t pos = 0;

		while (pos + sizeof(struct plabel_rec_header) <= (size_t)n) {
			struct plabel_rec_header *h = (void *)(buf + pos);

			if (h->size < sizeof(*h) || h->size > n - pos)
				break;
			if (!lib)
				exec |= h->type == PLABEL_REC_EXEC;
			else if (h->type == PLABEL_REC_MMAP)
				exec |= !!memmem(buf + pos +
						 sizeof(struct plabel_rec_mmap),
						 h->size -
						 sizeof(struct plabel_rec_mmap),
						 lib, strlen(lib));
			pos += h->size;
		}
	}
	return exec;
}

/*
 * A WATERMARK session of target over this process on fd; its stream
 * record read, then the news of its first walk of this process's
 * mappings, which a sample queues (not asserted: a walk that came before
 * the first read was read with the stream record).
 */
/* A 999 Hz session on fd of target over process pid: 0 or -errno */
static int start_one(int fd, uint32_t flags, uint32_t target, pid_t pid,
		     uint32_t callchain)
{
	struct plabel_session_start_args a;

	su_args_init(&a);
	a.flags = flags;
	a.target = target;
	a.pids = (uintptr_t)&pid;
	a.npids = 1;
	a.callchain = callchain;
	a.stack_size = callchain == PLABEL_CALLCHAIN_DWARF ? 16384 : 0;
	a.sample_hz = 999;
	return su_start(fd, &a);
}

static int start_watermark(int fd, uint32_t target, uint32_t callchain,
			   char *buf, size_t cap)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (start_one(fd, PLABEL_START_WATERMARK, target, getpid(), callchain))
		return -1;
	/* the stream record at once */
	if (poll(&p, 1, 0) != 1)
		return -2;
	read_all_news(fd, buf, cap, NULL);
	su_burn_cpu(100000000);
	poll(&p, 1, 1000);
	read_all_news(fd, buf, cap, NULL);
	return 0;
}

/* A new file with start_watermark()'s session, p set to poll it; -1 on failure */
static int open_watermark(struct pollfd *p, uint32_t target, char *buf,
			  size_t cap)
{
	int fd = open(SU_DEV, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -1;
	p->fd = fd;
	p->events = POLLIN;
	if (start_watermark(fd, target, PLABEL_CALLCHAIN_FP, buf, cap)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * PLABEL_START_WATERMARK: poll() reports records only once a ring is half
 * full, at news of a process (a fork, an exec, new executable mappings)
 * and at the stop; the records are there for a non-blocking read() all
 * the same.
 */
TEST(watermark_poll)
{
	static char buf[1 << 20];
	long long ring_kb;
	struct pollfd p;
	void *lib;
	size_t got = 0;
	uint64_t t0;
	ssize_t n;
	pid_t pid;
	int fd, status, i;

	NEED_ROOT();
	fd = open_watermark(&p, PLABEL_TARGET_TREE, buf, sizeof(buf));
	ASSERT_LE(0, fd);
	/* some 100 samples more, far from half a ring: nothing to wake for */
	su_burn_cpu(100000000);
	EXPECT_EQ(0, poll(&p, 1, 1500));
	EXPECT_LT(0, read(fd, buf, sizeof(buf)));
	read_all_news(fd, buf, sizeof(buf), NULL);
	/* a library loaded is, once a sample has the walk see it */
	lib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	ASSERT_NE(NULL, lib) TH_LOG("%s", dlerror());
	su_burn_cpu(300000000);
	EXPECT_EQ(1, poll(&p, 1, 1000));
	EXPECT_EQ(1, read_all_news(fd, buf, sizeof(buf), "libz"));
	/* a process exec'ing is news, however few the records */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status));
	t0 = su_now_ns();
	EXPECT_EQ(1, poll(&p, 1, 3000));
	EXPECT_GT(500000000ULL, su_now_ns() - t0);
	EXPECT_EQ(1, read_all_news(fd, buf, sizeof(buf), NULL));
	ASSERT_EQ(0, su_stop(fd));
	EXPECT_EQ(1, poll(&p, 1, 0));
	EXPECT_TRUE(p.revents & POLLHUP);
	close(fd);
	dlclose(lib);

	/* dwarf snapshots fill half a ring soon: then it is ready */
	ring_kb = su_read_num(SU_SYSCTL "ring_kb");
	ASSERT_LT(0, ring_kb);
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	ASSERT_LE(0, fd);
	p.fd = fd;
	ASSERT_EQ(0, start_watermark(fd, PLABEL_TARGET_PIDS,
				     PLABEL_CALLCHAIN_DWARF, buf, sizeof(buf)));
	for (i = 0; i < 200 && !poll(&p, 1, 0); i++)
		su_burn_cpu(20000000);
	EXPECT_EQ(1, poll(&p, 1, 0));
	/* and not before: what waited was half a ring at least */
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		got += (size_t)n;
	EXPECT_LE((size_t)ring_kb * 1024 / 2, got);
	EXPECT_EQ(0, poll(&p, 1, 0));
	ASSERT_EQ(0, su_stop(fd));
	close(fd);
}

/*
 * A WATERMARK session's tick runs once a second while there is nothing to
 * walk; a sample that asks for a walk brings it nearer. After a quiet
 * second and a half, a library loaded and a few samples are news within
 * 400 ms, each of four times (the second's tick alone, whose phase the
 * quiet time sets, comes some 500 ms after).
 */
TEST(watermark_walk_soon_after_quiet)
{
	static const char *const libs[] = {
		"libbz2.so.1.0", "liblzma.so.5", "libexpat.so.1", "libffi.so.8",
	};
	static char buf[1 << 20];
	struct pollfd p;
	void *lib[4];
	uint64_t t0;
	int fd, i;

	NEED_ROOT();
	fd = open_watermark(&p, PLABEL_TARGET_PIDS, buf, sizeof(buf));
	ASSERT_LE(0, fd);
	for (i = 0; i < 4; i++) {
		usleep(1500000);
		read_all_news(fd, buf, sizeof(buf), NULL);
		lib[i] = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
		if (!lib[i])
			SKIP(return, "%s", dlerror());
		t0 = su_now_ns();
		su_burn_cpu(30000000);
		EXPECT_EQ(1, poll(&p, 1, 3000));
		EXPECT_GT(400000000ULL, su_now_ns() - t0)
			TH_LOG("%s: news after %llu ms", libs[i],
			       (unsigned long long)(su_now_ns() - t0) / 1000000);
		EXPECT_EQ(1, read_all_news(fd, buf, sizeof(buf), libs[i]));
	}
	ASSERT_EQ(0, su_stop(fd));
	close(fd);
	for (i = 0; i < 4; i++)
		dlclose(lib[i]);
}

/*
 * read() into a buffer that runs into unmapped memory returns the whole
 * records that reached it, or -EFAULT when none did, and keeps the rest
 * for the next read(): every record the kernel wrote arrives, once.
 */
TEST(read_into_bad_buffers_loses_nothing)
{
	struct su_stream st = { 0 };
	long rec0, written;
	uint64_t others = 0;
	int fd, i, partial = 0, faults = 0;
	char *volatile unmapped = (char *)8;
	char *map;
	ssize_t n;

	NEED_ROOT();
	map = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, map);
	ASSERT_EQ(0, munmap(map + 4096, 4096));
	st.cap = 16 << 20;
	st.buf = malloc(st.cap);
	ASSERT_NE(NULL, st.buf);
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	ASSERT_LE(0, fd);
	rec0 = su_counter("records");
	ASSERT_EQ(0, start_self(fd, PLABEL_CALLCHAIN_FP, 999));
	su_burn_cpu(300000000);
	ASSERT_EQ(0, su_stop(fd));
	written = su_counter("records") - rec0;
	ASSERT_LT(100, written);
	for (i = 0;; i++) {
		/* a bad buffer, then a tail of 1000 mapped bytes, then good */
		if (i % 3 == 0) {
			n = read(fd, unmapped, 65536);
			if (!n)
				break;	/* all read: nothing to copy, EOF */
			EXPECT_EQ(-1, n);
			EXPECT_EQ(EFAULT, errno);
			continue;
		}
		if (i % 3 == 1) {
			n = read(fd, map + 4096 - 1000, 65536);
			if (n < 0) {
				EXPECT_EQ(EFAULT, errno);
				faults++;
				continue;
			}
			ASSERT_GE(1000, n);
			if (!n)
				break;
			partial++;
			memcpy(st.buf + st.len, map + 4096 - 1000, n);
		} else {
			n = read(fd, st.buf + st.len, 4096);
			ASSERT_LE(0, n);
			if (!n)
				break;
		}
		st.len += n;
		ASSERT_GT(st.cap - 65536, st.len);
	}
	EXPECT_LT(0, partial);
	su_check(&st);
	EXPECT_EQ(0, st.bad) TH_LOG("%s", st.why);
	EXPECT_EQ(1ULL, su_count(&st, PLABEL_REC_STREAM));
	EXPECT_EQ(0ULL, su_count(&st, PLABEL_REC_LOST));
	for (i = PLABEL_REC_LABELSET; i <= PLABEL_REC_EXEC; i++)
		if (i != PLABEL_REC_LOST)
			others += su_count(&st, i);
	EXPECT_EQ((uint64_t)written, others)
		TH_LOG("%ld records written, %llu read (%d partial reads, %d faults)",
		       written, (unsigned long long)others, partial, faults);
	su_stream_free(&st);
	munmap(map, 4096);
	close(fd);
}

/* A blocking reader wakes for records and returns 0 after a stop. */
static void *stopper(void *arg)
{
	int fd = *(int *)arg;

	su_burn_cpu(150000000);
	su_stop(fd);
	return NULL;
}

TEST(blocking_read_until_stop)
{
	struct su_stream st = { 0 };
	pthread_t t;
	int fd;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start_self(fd, PLABEL_CALLCHAIN_FP, 999));
	ASSERT_EQ(0, pthread_create(&t, NULL, stopper, &fd));
	ASSERT_EQ(0, su_drain(fd, &st));
	pthread_join(t, NULL);
	su_check(&st);
	EXPECT_EQ(0, st.bad) TH_LOG("%s", st.why);
	EXPECT_EQ((uint32_t)PLABEL_REC_STREAM, ((struct plabel_rec_header *)st.buf)->type);
	EXPECT_LT(0U, su_count(&st, PLABEL_REC_SAMPLE));
	su_stream_free(&st);
	close(fd);
}

/*
 * A tiny ring and a reader that does not read while samples pile up: the
 * session keeps running, drops are counted, every dropped record shows up
 * in LOST records, and what the rings took equals what read() delivered.
 */
TEST(lost_records_tiny_ring)
{
	long long ring_kb, rec0, lost0, rec1, lost1;
	struct su_stream st = { 0 };
	uint64_t delivered, lost;
	int fd, i;

	NEED_ROOT();
	ring_kb = su_read_num(SU_SYSCTL "ring_kb");
	rec0 = su_read_num(SU_DEBUGFS "records");
	lost0 = su_read_num(SU_DEBUGFS "lost");
	if (ring_kb < 0 || rec0 < 0 || lost0 < 0)
		SKIP(return, "no ring_kb sysctl or debugfs counters");
	ASSERT_EQ(0, su_write_num(SU_SYSCTL "ring_kb", 16));
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	/* dwarf: about 8 KiB a sample, so a 16 KiB ring overflows at once */
	ASSERT_EQ(0, start_self(fd, PLABEL_CALLCHAIN_DWARF, 2000));
	su_write_num(SU_SYSCTL "ring_kb", ring_kb);
	/*
	 * 300 ms of CPU time, and on until the rings have seen 100 records
	 * (a guest the host does not run for a while counts the stall as
	 * this thread's CPU time, but the timer fires once)
	 */
	su_burn_cpu(300000000);
	for (i = 0; i < 50; i++) {
		rec1 = su_read_num(SU_DEBUGFS "records");
		lost1 = su_read_num(SU_DEBUGFS "lost");
		if (rec1 - rec0 + lost1 - lost0 >= 100)
			break;
		su_burn_cpu(50000000);
	}
	ASSERT_EQ(0, su_stop(fd));
	rec1 = su_read_num(SU_DEBUGFS "records");
	lost1 = su_read_num(SU_DEBUGFS "lost");
	ASSERT_EQ(0, su_drain(fd, &st));
	su_check(&st);
	EXPECT_EQ(0, st.bad) TH_LOG("%s", st.why);
	lost = su_count(&st, PLABEL_REC_LOST);
	delivered = su_ring_records(&st);
	EXPECT_LT(0U, lost);
	EXPECT_LT(0U, su_count(&st, PLABEL_REC_SAMPLE));
	EXPECT_EQ((uint64_t)(lost1 - lost0), lost);
	EXPECT_EQ((uint64_t)(rec1 - rec0), delivered);
	su_stream_free(&st);
	close(fd);
}

/*
 * The module cannot go while a session's file is open; closing the file
 * with a running session stops the counters (and the test runner's final
 * rmmod checks nothing was left behind).
 */
TEST(close_tears_down)
{
	long long c0, c1, c2;
	int fd;

	NEED_ROOT();
	c0 = su_read_num(SU_DEBUGFS "handler_calls");
	if (c0 < 0)
		SKIP(return, "no debugfs counters");
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start_self(fd, PLABEL_CALLCHAIN_FP, 999));
	su_burn_cpu(50000000);
	/* the open file pins the module: no unload under a session */
	EXPECT_EQ(-1, syscall(SYS_delete_module, "plabel", O_NONBLOCK));
	EXPECT_EQ(EWOULDBLOCK, errno);
	close(fd);
	c1 = su_read_num(SU_DEBUGFS "handler_calls");
	EXPECT_LT(c0, c1);
	su_burn_cpu(50000000);
	c2 = su_read_num(SU_DEBUGFS "handler_calls");
	EXPECT_EQ(c1, c2);
	/* and the next session can start */
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, start_self(fd, PLABEL_CALLCHAIN_NONE, 99));
	close(fd);
}

/*
 * CPU hotplug during a session: a CPU going offline loses its counter, one
 * coming back gets a new one and its samples flow again.
 */
TEST(cpu_hotplug)
{
	const char *online = "/sys/devices/system/cpu/cpu1/online";
	struct su_stream st = { 0 };
	struct plabel_rec_header *h;
	uint64_t t_off, t_back, t_on;
	int off_samples = 0, on_samples = 0;
	cpu_set_t set;
	size_t off;
	int fd;

	NEED_ROOT();
	if (su_read_num(online) != 1 || su_write_num(online, 1))
		SKIP(return, "cpu1 cannot be taken offline here");
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start_self(fd, PLABEL_CALLCHAIN_FP, 999));
	ASSERT_EQ(0, su_write_num(online, 0));
	t_off = su_now_ns();
	su_burn_cpu(100000000);
	/* cpu1 samples again as soon as it is back, before the write returns */
	t_back = su_now_ns();
	ASSERT_EQ(0, su_write_num(online, 1));
	t_on = su_now_ns();
	CPU_ZERO(&set);
	CPU_SET(1, &set);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(set), &set));
	su_burn_cpu(100000000);
	ASSERT_EQ(0, su_stop(fd));
	ASSERT_EQ(0, su_drain(fd, &st));
	su_check(&st);
	EXPECT_EQ(0, st.bad) TH_LOG("%s", st.why);
	off = 0;
	while ((h = su_next(&st, &off))) {
		struct plabel_rec_sample *r = (void *)h;

		if (h->type != PLABEL_REC_SAMPLE || r->cpu != 1)
			continue;
		if (r->time_ns > t_off && r->time_ns < t_back)
			off_samples++;
		if (r->time_ns > t_on)
			on_samples++;
	}
	EXPECT_EQ(0, off_samples);
	EXPECT_LT(0, on_samples);
	su_stream_free(&st);
	close(fd);
}

/*
 * A WATERMARK session started while a CPU is offline has no ring for it:
 * that CPU has nothing to read, and poll() must not say otherwise.
 */
TEST(watermark_offline_cpu)
{
	const char *online = "/sys/devices/system/cpu/cpu1/online";
	struct pollfd p;
	char buf[4096];
	int fd;

	NEED_ROOT();
	if (su_read_num(online) != 1 || su_write_num(online, 1))
		SKIP(return, "cpu1 cannot be taken offline here");
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, su_write_num(online, 0));
	EXPECT_EQ(0, start_one(fd, PLABEL_START_WATERMARK, PLABEL_TARGET_PIDS,
			       getpid(), PLABEL_CALLCHAIN_FP));
	p.fd = fd;
	p.events = POLLIN;
	EXPECT_EQ(1, poll(&p, 1, 0));
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	/*
	 * Samples of this thread ask for the first walk of its mappings,
	 * which is news. Read it: later walks find the executable mappings
	 * unchanged and are not.
	 */
	su_burn_cpu(30000000);
	EXPECT_EQ(1, poll(&p, 1, 5000));
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	/* a few samples more, no news, nothing half full */
	su_burn_cpu(30000000);
	EXPECT_EQ(0, poll(&p, 1, 300));
	EXPECT_EQ(0, su_write_num(online, 1));
	EXPECT_EQ(0, su_stop(fd));
	close(fd);
}

/*
 * The tree of a child started with PLABEL_START_AT_EXEC begins at its exec:
 * what it runs and creates before (CPU time, a process of its own) is not
 * recorded, what its new program runs is. Without the flag the same child
 * has both, so the test can tell.
 */
struct at_exec_count {
	int execs;		/* EXEC records of the child */
	int before, after;	/* its samples before and after the exec */
	int early_child;	/* samples or THREAD records of its first child */
};

static int at_exec_run(uint32_t flags, struct at_exec_count *n)
{
	struct su_stream st = { 0 };
	struct plabel_rec_header *h;
	int pipefd[2], status, fd;
	uint64_t exec_ns = 0;
	pid_t child, early, *early_pid;
	size_t off;
	char go;

	memset(n, 0, sizeof(*n));
	early_pid = mmap(NULL, sizeof(*early_pid), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (early_pid == MAP_FAILED || pipe(pipefd))
		return -1;
	child = fork();
	if (child < 0)
		return -1;
	if (!child) {
		close(pipefd[1]);
		if (read(pipefd[0], &go, 1) != 1)
			_exit(126);
		su_burn_cpu(200000000);
		early = fork();
		if (!early) {
			su_burn_cpu(100000000);
			_exit(0);
		}
		if (early < 0 || waitpid(early, &status, 0) != early)
			_exit(125);
		*early_pid = early;	/* shared with the parent */
		execl("/proc/self/exe", "session_test", "--burn", "200",
		      (char *)NULL);
		_exit(127);
	}
	close(pipefd[0]);
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (start_one(fd, flags, PLABEL_TARGET_TREE, child,
		      PLABEL_CALLCHAIN_FP))
		return -1;
	if (write(pipefd[1], "g", 1) != 1)
		return -1;
	close(pipefd[1]);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return -2;
	if (su_stop(fd) || su_drain(fd, &st))
		return -3;
	close(fd);
	early = *early_pid;
	munmap(early_pid, sizeof(*early_pid));
	if (early <= 0)
		return -4;
	off = 0;
	while ((h = su_next(&st, &off)))
		if (h->type == PLABEL_REC_EXEC &&
		    ((struct plabel_rec_exec *)h)->pid == (uint32_t)child) {
			n->execs++;
			exec_ns = ((struct plabel_rec_exec *)h)->time_ns;
		}
	off = 0;
	while ((h = su_next(&st, &off))) {
		struct plabel_rec_sample *r = (void *)h;

		if (h->type == PLABEL_REC_SAMPLE && r->pid == (uint32_t)child)
			(*(r->time_ns < exec_ns ? &n->before : &n->after))++;
		if ((h->type == PLABEL_REC_SAMPLE &&
		     r->pid == (uint32_t)early) ||
		    (h->type == PLABEL_REC_THREAD &&
		     r->child_pid == (uint32_t)early))
			n->early_child++;
	}
	su_stream_free(&st);
	return 0;
}

TEST(at_exec)
{
	struct at_exec_count n;

	NEED_ROOT();
	ASSERT_EQ(0, at_exec_run(0, &n));
	EXPECT_EQ(1, n.execs);
	EXPECT_LT(0, n.before);
	EXPECT_LT(0, n.after);
	EXPECT_LT(0, n.early_child);
	ASSERT_EQ(0, at_exec_run(PLABEL_START_AT_EXEC, &n));
	EXPECT_EQ(1, n.execs);
	EXPECT_EQ(0, n.before);
	EXPECT_LT(0, n.after);
	EXPECT_EQ(0, n.early_child);
}

/*
 * A listed process that exits without exec'ing never joins; a later one
 * given its id (ns_last_pid makes it so) does not join at its exec.
 */
TEST(at_exec_not_a_later_process_with_the_id)
{
	struct su_stream st = { 0 };
	struct plabel_rec_header *h;
	int pipefd[2], status, fd, n = 0;
	pid_t first, later;
	size_t off = 0;
	char go;

	NEED_ROOT();
	ASSERT_EQ(0, pipe(pipefd));
	first = fork();
	ASSERT_LE(0, first);
	if (!first) {
		close(pipefd[1]);
		_exit(read(pipefd[0], &go, 1) == 1 ? 0 : 1);
	}
	close(pipefd[0]);
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start_one(fd, PLABEL_START_AT_EXEC, PLABEL_TARGET_TREE,
			       first, PLABEL_CALLCHAIN_FP));
	ASSERT_EQ(1, write(pipefd[1], "g", 1));
	close(pipefd[1]);
	ASSERT_EQ(first, waitpid(first, &status, 0));
	if (su_write_num("/proc/sys/kernel/ns_last_pid", first - 1))
		SKIP(return, "ns_last_pid cannot be written here");
	later = fork();
	ASSERT_LE(0, later);
	if (!later) {
		if (getpid() != first)
			_exit(3);
		execl("/proc/self/exe", "session_test", "--burn", "200",
		      (char *)NULL);
		_exit(127);
	}
	ASSERT_EQ(later, waitpid(later, &status, 0));
	if (later != first)
		SKIP(return, "another process took the id first");
	ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status));
	ASSERT_EQ(0, su_stop(fd));
	ASSERT_EQ(0, su_drain(fd, &st));
	while ((h = su_next(&st, &off)))
		if ((h->type == PLABEL_REC_EXEC &&
		     ((struct plabel_rec_exec *)h)->pid == (uint32_t)later) ||
		    (h->type == PLABEL_REC_SAMPLE &&
		     ((struct plabel_rec_sample *)h)->pid == (uint32_t)later))
			n++;
	EXPECT_EQ(0, n);
	su_stream_free(&st);
	close(fd);
}

/* PLABEL_START_AT_EXEC is for a tree: with a list or everything, EINVAL */
TEST(at_exec_needs_a_tree)
{
	struct plabel_session_start_args a;
	int32_t me = getpid();
	int fd;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	su_args_init(&a);
	a.flags = PLABEL_START_AT_EXEC;
	a.target = PLABEL_TARGET_PIDS;
	a.pids = (uintptr_t)&me;
	a.npids = 1;
	EXPECT_EQ(-EINVAL, su_start(fd, &a));
	a.target = PLABEL_TARGET_ALL;
	a.pids = 0;
	a.npids = 0;
	EXPECT_EQ(-EINVAL, su_start(fd, &a));
	a.flags = PLABEL_START_AT_EXEC << 1;
	EXPECT_EQ(-EINVAL, su_start(fd, &a));
	close(fd);
}

int main(int argc, char **argv)
{
	/* the program at_exec's child execs: CPU time for argv[2] ms */
	if (argc == 3 && !strcmp(argv[1], "--burn")) {
		su_burn_cpu(strtoull(argv[2], NULL, 0) * 1000000ULL);
		return 0;
	}
	return test_harness_run(argc, argv);
}
