// SPDX-License-Identifier: GPL-2.0
/*
 * Several sessions at once: each with its own rate, call chain mode and
 * target gets its own samples at its own rate; kernel.plabel.max_sessions
 * bounds how many run; a session whose reader stalls loses only its own
 * records, counted exactly, while another reads everything; thread, exec,
 * comm and label records reach every session that follows a process, and
 * each session carries its own LABELSET records; CPU hotplug under two
 * sessions; sessions starting and stopping while others run and processes
 * come and go; and the module's unload once the sessions' files are
 * closed.
 */
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "session_util.h"
#include "kmod_util.h"
#include "kselftest/kselftest_harness.h"

#define NEED_ROOT() do {						\
	if (!su_have_dev())						\
		SKIP(return, SU_DEV " absent: module not loaded");	\
	if (geteuid())							\
		SKIP(return, "needs root for CAP_PERFMON");		\
} while (0)

#define MAX_SESSIONS	SU_SYSCTL "max_sessions"

static int ms_start(int fd, uint32_t target, const int32_t *pids,
		    uint32_t npids, uint32_t callchain, uint32_t hz)
{
	struct plabel_session_start_args a;

	su_args_init(&a);
	a.target = target;
	if (target != PLABEL_TARGET_ALL) {
		a.pids = (uintptr_t)pids;
		a.npids = npids;
	}
	a.callchain = callchain;
	a.sample_hz = hz;
	/* small dwarf snapshots: the rings keep up under emulation */
	a.stack_size = callchain == PLABEL_CALLCHAIN_DWARF ? 1024 : 0;
	return su_start(fd, &a);
}

static int ms_start_self(int fd, uint32_t callchain, uint32_t hz)
{
	int32_t pid = getpid();

	return ms_start(fd, PLABEL_TARGET_PIDS, &pid, 1, callchain, hz);
}

static int ms_open(void)
{
	return open(SU_DEV, O_RDONLY | O_CLOEXEC);
}

/*
 * A child that waits for a byte on go, then burns ns of CPU time; with
 * fork_ns, it first starts a grandchild that burns fork_ns and waits for
 * it. Returns its pid.
 */
static pid_t ms_burner(int go, uint64_t ns, uint64_t fork_ns)
{
	pid_t pid = fork();
	char c;

	if (pid)
		return pid;
	if (read(go, &c, 1) != 1)
		_exit(100);
	if (fork_ns) {
		pid_t g = fork();
		int status;

		if (g < 0)
			_exit(101);
		if (!g) {
			su_burn_cpu(fork_ns);
			_exit(0);
		}
		su_burn_cpu(ns);
		if (waitpid(g, &status, 0) != g || !WIFEXITED(status))
			_exit(102);
		_exit(0);
	}
	su_burn_cpu(ns);
	_exit(0);
}

/* Waits for pid; its CPU time and that of the children it waited for. */
static int64_t ms_wait_cpu_ns(pid_t pid)
{
	struct rusage ru;
	int status;

	if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return -1;
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ll +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ll;
}

/* Periods of the samples of process pid (all processes: 0). */
static uint64_t ms_periods(struct su_stream *st, uint32_t pid,
			   uint64_t *samples)
{
	struct plabel_rec_header *h;
	uint64_t n = 0, k = 0;
	size_t off;

	FOR_EACH_REC(st, h, off) {
		struct plabel_rec_sample *s = (void *)h;

		if (h->type != PLABEL_REC_SAMPLE || (pid && s->pid != pid))
			continue;
		n += PLABEL_SAMPLE_PERIODS(s->flags);
		k++;
	}
	if (samples)
		*samples = k;
	return n;
}

/* Records of LOST kind in the stream, summed. */
static uint64_t ms_lost(struct su_stream *st, uint32_t kind)
{
	struct plabel_rec_header *h;
	uint64_t n = 0;
	size_t off;

	FOR_EACH_REC(st, h, off)
		if (h->type == PLABEL_REC_LOST &&
		    ((struct plabel_rec_lost *)h)->kind == kind)
			n += ((struct plabel_rec_lost *)h)->lost;
	return n;
}

/* Records that went through the rings: all but STREAM and LOST. */
/* --- rates and targets ------------------------------------------------- */

/*
 * Session A samples one process at 200 Hz with frame pointers; session B
 * another process and its child (TREE) at 1000 Hz with stack snapshots.
 * Each stream has its own options and only its own processes, and each
 * counts about its processes' CPU time at its own rate.
 */
TEST(two_sessions_own_rates_and_targets)
{
	struct su_stream sa = { 0 }, sb = { 0 };
	struct plabel_rec_stream *ra, *rb;
	struct plabel_rec_header *h;
	struct su_reader rda, rdb;
	uint64_t pa, pb, na, nb, pb1, pb2, regs_a = 0, regs_b = 0;
	uint64_t others_a = 0, others_b = 0, children_b = 0;
	int64_t cpu1, cpu2;
	int32_t pid1, pid2;
	double ea, eb;
	int go[2], fda, fdb;
	size_t off;

	NEED_ROOT();
	ASSERT_EQ(0, pipe(go));
	pid1 = ms_burner(go[0], 400000000, 0);
	ASSERT_LT(0, pid1);
	pid2 = ms_burner(go[0], 400000000, 200000000);
	ASSERT_LT(0, pid2);
	fda = ms_open();
	fdb = ms_open();
	ASSERT_LE(0, fda);
	ASSERT_LE(0, fdb);
	ASSERT_EQ(0, ms_start(fda, PLABEL_TARGET_PIDS, &pid1, 1,
			      PLABEL_CALLCHAIN_FP, 200));
	ASSERT_EQ(0, ms_start(fdb, PLABEL_TARGET_TREE, &pid2, 1,
			      PLABEL_CALLCHAIN_DWARF, 1000));
	ASSERT_EQ(0, su_reader_start(&rda, fda));
	ASSERT_EQ(0, su_reader_start(&rdb, fdb));
	ASSERT_EQ(2, write(go[1], "gg", 2));
	cpu1 = ms_wait_cpu_ns(pid1);
	cpu2 = ms_wait_cpu_ns(pid2);
	ASSERT_LT(0, cpu1);
	ASSERT_LT(0, cpu2);
	ASSERT_EQ(0, su_stop(fda));
	ASSERT_EQ(0, su_stop(fdb));
	READ_STREAM(&rda, &sa);
	READ_STREAM(&rdb, &sb);

	ra = (struct plabel_rec_stream *)sa.buf;
	rb = (struct plabel_rec_stream *)sb.buf;
	ASSERT_EQ((uint32_t)PLABEL_REC_STREAM, ra->hdr.type);
	ASSERT_EQ((uint32_t)PLABEL_REC_STREAM, rb->hdr.type);
	EXPECT_EQ(1000000000ull / 200, ra->period_ns);
	EXPECT_EQ(1000000000ull / 1000, rb->period_ns);
	EXPECT_EQ((uint32_t)PLABEL_CALLCHAIN_FP, ra->callchain);
	EXPECT_EQ((uint32_t)PLABEL_CALLCHAIN_DWARF, rb->callchain);
	EXPECT_EQ(0U, su_count(&sa, PLABEL_REC_LOST));
	EXPECT_EQ(0U, su_count(&sb, PLABEL_REC_LOST));

	FOR_EACH_REC(&sa, h, off) {
		struct plabel_rec_sample *s = (void *)h;

		if (h->type != PLABEL_REC_SAMPLE)
			continue;
		others_a += s->pid != (uint32_t)pid1;
		regs_a += !!(s->flags & PLABEL_SAMPLE_REGS);
	}
	FOR_EACH_REC(&sb, h, off) {
		struct plabel_rec_sample *s = (void *)h;

		if (h->type != PLABEL_REC_SAMPLE)
			continue;
		if (s->pid != (uint32_t)pid2)
			children_b++;
		if (s->pid == (uint32_t)pid1 || s->pid == (uint32_t)getpid())
			others_b++;
		regs_b += !!(s->flags & PLABEL_SAMPLE_REGS);
	}
	pa = ms_periods(&sa, 0, &na);
	pb = ms_periods(&sb, 0, &nb);
	pb1 = ms_periods(&sb, pid2, NULL);
	pb2 = pb - pb1;
	/* only their own processes; the TREE session its child too */
	EXPECT_EQ(0U, others_a);
	EXPECT_EQ(0U, others_b);
	EXPECT_LT(0U, children_b) TH_LOG("no samples of the TREE child");
	/*
	 * their own call chain modes (a sample of an exiting task carries
	 * no user state from 6.16 on: nearly all, not all, have a snapshot)
	 */
	EXPECT_EQ(0U, regs_a);
	EXPECT_LE(nb - nb / 10, regs_b);
	/* their own rates: periods against the processes' CPU time */
	ea = cpu1 / 5e6;
	eb = cpu2 / 1e6;
	TH_LOG("A: %llu samples, %llu periods for %.0f expected; B: %llu samples, %llu periods (%llu of the child) for %.0f expected",
	       (unsigned long long)na, (unsigned long long)pa, ea,
	       (unsigned long long)nb, (unsigned long long)pb,
	       (unsigned long long)pb2, eb);
	EXPECT_LT(ea * 0.65, (double)pa);
	EXPECT_GT(ea * 1.35, (double)pa);
	EXPECT_LT(eb * 0.65, (double)pb);
	EXPECT_GT(eb * 1.35, (double)pb);
	su_stream_free(&sa);
	su_stream_free(&sb);
	close(go[0]);
	close(go[1]);
	close(fda);
	close(fdb);
}

/* --- the limit --------------------------------------------------------- */

/*
 * max_sessions: 4 by default, 1..16. At the limit one more session gets
 * -EBUSY, and may start once the limit is raised; lowering it below the
 * number running stops none of them (they go on sampling) but refuses new
 * ones until enough have ended; a stopped session counts until its file
 * is closed (its rings are freed then). 16 run at once at most.
 */
TEST(max_sessions_bounds_concurrent_sessions)
{
	int fds[PLABEL_MAX_SESSIONS + 1], extra, i, err;
	long long max0, running0;

	NEED_ROOT();
	max0 = su_read_num(MAX_SESSIONS);
	ASSERT_LE(1, max0) TH_LOG("no kernel.plabel.max_sessions");
	running0 = su_counter("sessions");
	ASSERT_EQ(0, running0) TH_LOG("sessions left running");
	EXPECT_EQ(-EINVAL, su_write_num(MAX_SESSIONS, 0));
	EXPECT_EQ(-EINVAL, su_write_num(MAX_SESSIONS, PLABEL_MAX_SESSIONS + 1));
	ASSERT_EQ(0, su_write_num(MAX_SESSIONS, 4));

	for (i = 0; i <= PLABEL_MAX_SESSIONS; i++) {
		fds[i] = ms_open();
		ASSERT_LE(0, fds[i]);
	}
	/* four run; the fifth waits for a higher limit */
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, ms_start_self(fds[i], PLABEL_CALLCHAIN_FP, 99));
	EXPECT_EQ(4, su_counter("sessions"));
	EXPECT_EQ(-EBUSY, ms_start_self(fds[4], PLABEL_CALLCHAIN_FP, 99));
	/* the refused start left the file unused: it starts later */
	ASSERT_EQ(0, su_write_num(MAX_SESSIONS, 5));
	EXPECT_EQ(0, ms_start_self(fds[4], PLABEL_CALLCHAIN_FP, 99));
	EXPECT_EQ(5, su_counter("sessions"));

	/* lowered below the number running: none stops, none starts */
	ASSERT_EQ(0, su_write_num(MAX_SESSIONS, 2));
	EXPECT_EQ(-EBUSY, ms_start_self(fds[5], PLABEL_CALLCHAIN_FP, 99));
	su_burn_cpu(100000000);
	for (i = 0; i < 3; i++) {
		struct su_stream st = { 0 };

		ASSERT_EQ(0, su_stop(fds[i]));
		ASSERT_EQ(0, su_drain(fds[i], &st));
		su_check(&st);
		EXPECT_EQ(0, st.bad) TH_LOG("%s", st.why);
		EXPECT_LT(0U, su_count(&st, PLABEL_REC_SAMPLE))
			TH_LOG("session %d stopped sampling", i);
		su_stream_free(&st);
		/* 4, 3 then 2 still run: at the limit of 2 */
		EXPECT_EQ(-EBUSY,
			  ms_start_self(fds[5], PLABEL_CALLCHAIN_FP, 99));
	}
	/*
	 * Stopped but open, they still hold their rings, so they count:
	 * closed, 2 run, at the limit.
	 */
	for (i = 0; i < 3; i++) {
		close(fds[i]);
		fds[i] = -1;
	}
	EXPECT_EQ(-EBUSY, ms_start_self(fds[5], PLABEL_CALLCHAIN_FP, 99));
	/* one closed (not stopped): 1 runs, one more may */
	close(fds[3]);
	fds[3] = -1;
	EXPECT_EQ(1, su_counter("sessions"));
	EXPECT_EQ(0, ms_start_self(fds[5], PLABEL_CALLCHAIN_DWARF, 99));
	EXPECT_EQ(-EBUSY, ms_start_self(fds[6], PLABEL_CALLCHAIN_FP, 99));
	for (i = 0; i <= PLABEL_MAX_SESSIONS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	EXPECT_EQ(0, su_counter("sessions"));

	/* sixteen at most, every slot in use */
	ASSERT_EQ(0, su_write_num(MAX_SESSIONS, PLABEL_MAX_SESSIONS));
	for (i = 0; i <= PLABEL_MAX_SESSIONS; i++) {
		fds[i] = ms_open();
		ASSERT_LE(0, fds[i]);
	}
	for (i = 0; i < PLABEL_MAX_SESSIONS; i++) {
		err = ms_start_self(fds[i], i % 2 ? PLABEL_CALLCHAIN_DWARF :
				    PLABEL_CALLCHAIN_FP, 99 + 100 * i);
		ASSERT_EQ(0, err) TH_LOG("session %d", i);
	}
	EXPECT_EQ(-EBUSY, ms_start_self(fds[PLABEL_MAX_SESSIONS],
					PLABEL_CALLCHAIN_FP, 99));
	EXPECT_EQ(PLABEL_MAX_SESSIONS, su_counter("sessions"));
	su_burn_cpu(50000000);
	for (i = 0; i <= PLABEL_MAX_SESSIONS; i++)
		close(fds[i]);
	EXPECT_EQ(0, su_counter("sessions"));
	extra = ms_open();
	ASSERT_LE(0, extra);
	EXPECT_EQ(0, ms_start_self(extra, PLABEL_CALLCHAIN_FP, 99));
	close(extra);

	/*
	 * A stopped session keeps its rings until its file is closed, so it
	 * counts against the limit until then: files stopped and kept open
	 * cannot pile up rings without bound.
	 */
	ASSERT_EQ(0, su_write_num(MAX_SESSIONS, 1));
	fds[0] = ms_open();
	fds[1] = ms_open();
	ASSERT_LE(0, fds[0]);
	ASSERT_LE(0, fds[1]);
	ASSERT_EQ(0, ms_start_self(fds[0], PLABEL_CALLCHAIN_FP, 99));
	ASSERT_EQ(0, su_stop(fds[0]));
	EXPECT_EQ(0, su_counter("sessions"));
	EXPECT_EQ(-EBUSY, ms_start_self(fds[1], PLABEL_CALLCHAIN_FP, 99));
	close(fds[0]);
	EXPECT_EQ(0, ms_start_self(fds[1], PLABEL_CALLCHAIN_FP, 99));
	close(fds[1]);
	EXPECT_EQ(0, su_write_num(MAX_SESSIONS, max0));
}

/* --- a stalled reader -------------------------------------------------- */

/*
 * Session A has a 16 KiB ring and a reader that never reads while it
 * runs; session B, with the default ring, is read all along. Both sample
 * this process. A loses records, each of them in its LOST records (the
 * module's count of drops is A's alone); B loses nothing, and every record
 * the rings took reached one of the two readers.
 */
TEST(stalled_session_loses_only_its_records)
{
	struct su_stream sa = { 0 }, sb = { 0 };
	long long ring_kb, rec0, lost0, rec1, lost1;
	uint64_t lost_a, got_a, got_b, pb, nb;
	struct su_reader rdb;
	int fda, fdb, i;
	uint64_t cpu0, cpu;
	double eb;

	NEED_ROOT();
	ring_kb = su_read_num(SU_SYSCTL "ring_kb");
	rec0 = su_counter("records");
	lost0 = su_counter("lost");
	if (ring_kb < 0 || rec0 < 0 || lost0 < 0)
		SKIP(return, "no ring_kb sysctl or debugfs counters");
	fda = ms_open();
	fdb = ms_open();
	ASSERT_LE(0, fda);
	ASSERT_LE(0, fdb);
	ASSERT_EQ(0, su_write_num(SU_SYSCTL "ring_kb", 16));
	/* stack snapshots: about 1 KiB a sample, so 16 KiB fill at once */
	ASSERT_EQ(0, ms_start_self(fda, PLABEL_CALLCHAIN_DWARF, 2000));
	ASSERT_EQ(0, su_write_num(SU_SYSCTL "ring_kb", ring_kb));
	ASSERT_EQ(0, ms_start_self(fdb, PLABEL_CALLCHAIN_FP, 999));
	ASSERT_EQ(0, su_reader_start(&rdb, fdb));
	cpu0 = su_thread_cpu_ns();
	su_burn_cpu(300000000);
	for (i = 0; i < 50; i++) {
		if (su_counter("lost") - lost0 >= 100)
			break;
		su_burn_cpu(50000000);
	}
	cpu = su_thread_cpu_ns() - cpu0;
	ASSERT_EQ(0, su_stop(fda));
	ASSERT_EQ(0, su_stop(fdb));
	rec1 = su_counter("records");
	lost1 = su_counter("lost");
	READ_STREAM(&rdb, &sb);
	ASSERT_EQ(0, su_drain(fda, &sa));
	su_check(&sa);
	ASSERT_EQ(0, sa.bad) TH_LOG("%s", sa.why);

	lost_a = su_count(&sa, PLABEL_REC_LOST);
	got_a = su_ring_records(&sa);
	got_b = su_ring_records(&sb);
	pb = ms_periods(&sb, getpid(), &nb);
	eb = cpu / (1e9 / 999);
	TH_LOG("A: %llu records read, %llu lost; B: %llu read, %llu samples, %llu periods for %.0f expected",
	       (unsigned long long)got_a, (unsigned long long)lost_a,
	       (unsigned long long)got_b, (unsigned long long)nb,
	       (unsigned long long)pb, eb);
	EXPECT_LT(0U, lost_a);
	EXPECT_LT(0U, su_count(&sa, PLABEL_REC_SAMPLE));
	EXPECT_LT(0U, ms_lost(&sa, PLABEL_LOST_PERIODS));
	/* every drop was A's and A's LOST records say each */
	EXPECT_EQ((uint64_t)(lost1 - lost0), lost_a);
	/* B lost nothing of any kind and has all its samples */
	EXPECT_EQ(0U, ms_lost(&sb, PLABEL_LOST_RECORDS));
	EXPECT_EQ(0U, ms_lost(&sb, PLABEL_LOST_PERIODS));
	EXPECT_LT(eb * 0.65, (double)pb);
	/* what the rings took is what the two readers got */
	EXPECT_EQ((uint64_t)(rec1 - rec0), got_a + got_b);
	su_stream_free(&sa);
	su_stream_free(&sb);
	close(fda);
	close(fdb);
}

/* --- records about a process reach every session following it --------- */

static pid_t ms_thread_tid;

static void *ms_thread_fn(void *arg)
{
	ms_thread_tid = su_gettid();
	return NULL;
}

/* Offset of the first record of type with pid (THREAD: child_pid). */
static size_t ms_first(struct su_stream *st, uint32_t type, uint32_t pid,
		       int *count)
{
	struct plabel_rec_header *h;
	size_t off, first = (size_t)-1;

	*count = 0;
	FOR_EACH_REC(st, h, off) {
		uint32_t p;

		if (h->type != type)
			continue;
		switch (type) {
		case PLABEL_REC_THREAD:
			p = ((struct plabel_rec_sample *)h)->child_tid;
			break;
		case PLABEL_REC_EXEC:
			p = ((struct plabel_rec_exec *)h)->pid;
			break;
		case PLABEL_REC_COMM:
			p = ((struct plabel_rec_comm *)h)->tid;
			break;
		case PLABEL_REC_MMAP:
			p = ((struct plabel_rec_mmap *)h)->pid;
			break;
		default:
			p = 0;
		}
		if (p != pid)
			continue;
		if (!*count)
			first = off - h->size;
		++*count;
	}
	return first;
}

/*
 * Samples of process pid that carry set id; in *unknown those carrying a
 * set the stream has no LABELSET record of.
 */
static int ms_labeled(struct su_stream *st, int32_t pid, uint64_t id,
		      int *unknown)
{
	struct plabel_rec_header *h;
	int labeled = 0;
	size_t off;

	*unknown = 0;
	FOR_EACH_REC(st, h, off) {
		struct plabel_rec_sample *s = (void *)h;

		if (h->type != PLABEL_REC_SAMPLE || s->pid != (uint32_t)pid)
			continue;
		labeled += s->set_id == id;
		*unknown += s->set_id && !su_labelset(st, s->set_id);
	}
	return labeled;
}

/* Offset of the LABELSET record of id, or -1. */
static size_t ms_labelset_off(struct su_stream *st, uint64_t id)
{
	struct plabel_rec_labelset *l = su_labelset(st, id);

	return l ? (size_t)((char *)l - st->buf) : (size_t)-1;
}

/*
 * Sessions A (TREE of this process, frame pointers) and B (the whole
 * system, no call chains) both follow this process; C follows an
 * unrelated sleeping process. A fork that execs, a new thread and a
 * rename each reach A and B once, with this process's labels in a
 * LABELSET record before the record that uses them; C sees none.
 */
TEST(process_records_reach_every_session)
{
	struct su_stream st[3] = { 0 };
	struct su_reader rd[3];
	int fd[3], i, n, status;
	int32_t me = getpid(), sleeper;
	char name[16] = "ms-renamed";
	pid_t cpid;
	pthread_t t;
	uint64_t id;

	NEED_ROOT();
	sleeper = fork();
	ASSERT_LE(0, sleeper);
	if (!sleeper) {
		pause();
		_exit(0);
	}
	for (i = 0; i < 3; i++) {
		fd[i] = ms_open();
		ASSERT_LE(0, fd[i]);
	}
	id = su_set_new(fd[0], "session", "many");
	ASSERT_NE(0U, id);
	ASSERT_EQ(0, su_labels_set(fd[0], id));
	ASSERT_EQ(0, ms_start(fd[0], PLABEL_TARGET_TREE, &me, 1,
			      PLABEL_CALLCHAIN_FP, 499));
	ASSERT_EQ(0, ms_start(fd[1], PLABEL_TARGET_ALL, NULL, 0,
			      PLABEL_CALLCHAIN_NONE, 99));
	ASSERT_EQ(0, ms_start(fd[2], PLABEL_TARGET_PIDS, &sleeper, 1,
			      PLABEL_CALLCHAIN_FP, 99));
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, su_reader_start(&rd[i], fd[i]));

	su_burn_cpu(50000000);
	cpid = fork();
	ASSERT_LE(0, cpid);
	if (!cpid) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	ASSERT_EQ(cpid, waitpid(cpid, &status, 0));
	ASSERT_EQ(0, status);
	ASSERT_EQ(0, pthread_create(&t, NULL, ms_thread_fn, NULL));
	pthread_join(t, NULL);
	ASSERT_EQ(0, prctl(PR_SET_NAME, name));
	su_burn_cpu(50000000);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, su_stop(fd[i]));
	for (i = 0; i < 3; i++)
		READ_STREAM(&rd[i], &st[i]);
	kill(sleeper, SIGKILL);
	waitpid(sleeper, &status, 0);

	/*
	 * read() gives each CPU's records in turn, so a LABELSET record
	 * comes before the records that use it on its own CPU only: its
	 * presence is checked, not its place.
	 */
	for (i = 0; i < 2; i++) {
		size_t thr, proc, ex, cm;

		EXPECT_NE((size_t)-1, ms_labelset_off(&st[i], id))
			TH_LOG("session %d: no LABELSET", i);
		proc = ms_first(&st[i], PLABEL_REC_THREAD, cpid, &n);
		EXPECT_EQ(1, n) TH_LOG("session %d: fork records", i);
		if (proc != (size_t)-1) {
			struct plabel_rec_sample *r = (void *)(st[i].buf + proc);

			EXPECT_EQ(id, r->set_id);
			EXPECT_EQ((uint32_t)me, r->pid);
			EXPECT_NE(0U, r->flags & PLABEL_THREAD_PROCESS);
		}
		thr = ms_first(&st[i], PLABEL_REC_THREAD, ms_thread_tid, &n);
		EXPECT_EQ(1, n) TH_LOG("session %d: thread records", i);
		if (thr != (size_t)-1)
			EXPECT_EQ(id, ((struct plabel_rec_sample *)
				       (st[i].buf + thr))->set_id);
		ex = ms_first(&st[i], PLABEL_REC_EXEC, cpid, &n);
		EXPECT_EQ(1, n) TH_LOG("session %d: exec records", i);
		if (ex != (size_t)-1)
			EXPECT_STREQ("true",
				     ((struct plabel_rec_exec *)
				      (st[i].buf + ex))->comm);
		cm = ms_first(&st[i], PLABEL_REC_COMM, me, &n);
		EXPECT_EQ(1, n) TH_LOG("session %d: comm records", i);
		if (cm != (size_t)-1)
			EXPECT_STREQ(name, ((struct plabel_rec_comm *)
					    (st[i].buf + cm))->comm);
		ms_first(&st[i], PLABEL_REC_MMAP, me, &n);
		EXPECT_LE(1, n) TH_LOG("session %d: no mappings", i);
		EXPECT_EQ(0U, su_count(&st[i], PLABEL_REC_LOST));
		/* the samples of this process carry its labels */
		EXPECT_LT(0, ms_labeled(&st[i], me, id, &n))
			TH_LOG("session %d", i);
		EXPECT_EQ(0, n) TH_LOG("session %d: sets without LABELSET", i);
	}
	/* C follows another process: nothing of this one */
	ms_first(&st[2], PLABEL_REC_THREAD, cpid, &n);
	EXPECT_EQ(0, n);
	ms_first(&st[2], PLABEL_REC_EXEC, cpid, &n);
	EXPECT_EQ(0, n);
	ms_first(&st[2], PLABEL_REC_COMM, me, &n);
	EXPECT_EQ(0, n);
	ms_first(&st[2], PLABEL_REC_MMAP, me, &n);
	EXPECT_EQ(0, n);
	EXPECT_EQ((size_t)-1, ms_labelset_off(&st[2], id));
	EXPECT_EQ(0U, ms_periods(&st[2], me, NULL));
	for (i = 0; i < 3; i++) {
		su_stream_free(&st[i]);
		close(fd[i]);
	}
}

/*
 * Every session carries the LABELSET record of a set it uses, whatever
 * others carried: one that runs after another in the same slot, one
 * started beside a session that has carried it already, and each of
 * several rounds of them.
 */
TEST(each_session_carries_its_labelsets)
{
	struct su_stream st = { 0 };
	int fd[2], round, i, unknown;
	uint64_t id;
	int ctl;

	NEED_ROOT();
	ctl = ms_open();
	ASSERT_LE(0, ctl);
	id = su_set_new(ctl, "carried", "again");
	ASSERT_NE(0U, id);
	ASSERT_EQ(0, su_labels_set(ctl, id));
	for (round = 0; round < 3; round++) {
		/* one alone (the first free slot), then one beside it */
		fd[0] = ms_open();
		fd[1] = ms_open();
		ASSERT_LE(0, fd[0]);
		ASSERT_LE(0, fd[1]);
		ASSERT_EQ(0, ms_start_self(fd[0], PLABEL_CALLCHAIN_FP, 999));
		su_burn_cpu(50000000);
		ASSERT_EQ(0, ms_start_self(fd[1], PLABEL_CALLCHAIN_NONE, 999));
		su_burn_cpu(50000000);
		for (i = 0; i < 2; i++) {
			ASSERT_EQ(0, su_stop(fd[i]));
			ASSERT_EQ(0, su_drain(fd[i], &st));
			su_check(&st);
			ASSERT_EQ(0, st.bad) TH_LOG("%s", st.why);
			EXPECT_NE((size_t)-1, ms_labelset_off(&st, id))
				TH_LOG("round %d, session %d", round, i);
			EXPECT_LT(0, ms_labeled(&st, getpid(), id, &unknown));
			EXPECT_EQ(0, unknown);
			su_stream_free(&st);
			close(fd[i]);
		}
	}
	close(ctl);
}

/* One session alone on this process: does it carry set id? */
static int ms_alone_carries(uint64_t id)
{
	struct su_stream st = { 0 };
	int fd, carried;

	fd = ms_open();
	if (fd < 0)
		return -1;
	if (ms_start_self(fd, PLABEL_CALLCHAIN_NONE, 999)) {
		close(fd);
		return -1;
	}
	su_burn_cpu(50000000);
	if (su_stop(fd) || su_drain(fd, &st)) {
		su_stream_free(&st);
		close(fd);	/* stops the session, if it runs */
		return -1;
	}
	su_check(&st);
	carried = !st.bad && ms_labelset_off(&st, id) != (size_t)-1;
	su_stream_free(&st);
	close(fd);
	return carried;
}

/*
 * A slot's session generations start over after 65535: a set the first
 * generation 1 carried, then left alone while the count went round, is
 * carried by the next generation 1 too (the wrap clears every set's
 * entry for the slot). slot_gen in debugfs moves the count on.
 */
TEST(slot_generations_start_over)
{
	const char *gen = SU_DEBUGFS "slot_gen";
	uint64_t x, y;
	int ctl, fd;

	NEED_ROOT();
	if (su_read_num(gen) < 0)
		SKIP(return, "no %s", gen);
	ASSERT_EQ(0, su_counter("sessions"));
	ctl = ms_open();
	ASSERT_LE(0, ctl);
	x = su_set_new(ctl, "wrap", "x");
	y = su_set_new(ctl, "wrap", "y");
	ASSERT_NE(0U, x);
	ASSERT_NE(0U, y);
	ASSERT_EQ(-ERANGE, su_write_num(gen, 65536));
	/* a lower count: every set forgets, and the next session is 1 */
	ASSERT_EQ(0, su_write_num(gen, 0));
	ASSERT_EQ(0, su_labels_set(ctl, x));
	EXPECT_EQ(1, ms_alone_carries(x));
	EXPECT_EQ(1, su_read_num(gen));
	/* on to the last generation, which y alone is used under */
	ASSERT_EQ(0, su_write_num(gen, 65534));
	ASSERT_EQ(0, su_labels_set(ctl, y));
	EXPECT_EQ(1, ms_alone_carries(y));
	EXPECT_EQ(65535, su_read_num(gen));
	/* round again to 1: x was carried by a 1 before, not by this one */
	ASSERT_EQ(0, su_labels_set(ctl, x));
	EXPECT_EQ(1, ms_alone_carries(x));
	EXPECT_EQ(1, su_read_num(gen));
	/* and a second session in the slot after it, generation 2 */
	EXPECT_EQ(1, ms_alone_carries(x));
	EXPECT_EQ(2, su_read_num(gen));
	/* no moving the count while a session runs */
	fd = ms_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ms_start_self(fd, PLABEL_CALLCHAIN_NONE, 99));
	EXPECT_EQ(-EBUSY, su_write_num(gen, 0));
	ASSERT_EQ(0, su_stop(fd));
	close(fd);
	EXPECT_EQ(3, su_read_num(gen));
	ASSERT_EQ(0, su_labels_set(ctl, 0));
	close(ctl);
}

/*
 * CPU hotplug under two sessions: a CPU going offline loses both
 * sessions' counters, and coming back gets one for each, at each rate.
 */
TEST(cpu_hotplug_with_two_sessions)
{
	const char *online = "/sys/devices/system/cpu/cpu1/online";
	struct su_stream st[2] = { 0 };
	uint64_t t_off, t_back, t_on;
	int off_samples[2] = { 0 }, on_samples[2] = { 0 };
	struct plabel_rec_header *h;
	cpu_set_t set;
	int fd[2], i;
	size_t off;

	NEED_ROOT();
	if (su_read_num(online) != 1 || su_write_num(online, 1))
		SKIP(return, "cpu1 cannot be taken offline here");
	for (i = 0; i < 2; i++) {
		fd[i] = ms_open();
		ASSERT_LE(0, fd[i]);
		ASSERT_EQ(0, ms_start_self(fd[i], i ? PLABEL_CALLCHAIN_DWARF :
					   PLABEL_CALLCHAIN_FP,
					   i ? 499 : 999));
	}
	ASSERT_EQ(0, su_write_num(online, 0));
	t_off = su_now_ns();
	su_burn_cpu(100000000);
	t_back = su_now_ns();
	ASSERT_EQ(0, su_write_num(online, 1));
	t_on = su_now_ns();
	CPU_ZERO(&set);
	CPU_SET(1, &set);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(set), &set));
	su_burn_cpu(200000000);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, su_stop(fd[i]));
		ASSERT_EQ(0, su_drain(fd[i], &st[i]));
		su_check(&st[i]);
		EXPECT_EQ(0, st[i].bad) TH_LOG("%s", st[i].why);
		FOR_EACH_REC(&st[i], h, off) {
			struct plabel_rec_sample *r = (void *)h;

			if (h->type != PLABEL_REC_SAMPLE || r->cpu != 1)
				continue;
			if (r->time_ns > t_off && r->time_ns < t_back)
				off_samples[i]++;
			if (r->time_ns > t_on)
				on_samples[i]++;
		}
		EXPECT_EQ(0, off_samples[i]) TH_LOG("session %d", i);
		EXPECT_LT(10, on_samples[i]) TH_LOG("session %d", i);
		su_stream_free(&st[i]);
		close(fd[i]);
	}
}

/* --- starts and stops racing ------------------------------------------- */

/* Racers run 4 s and until each started 10 sessions, 30 s at most. */
#define MS_RACE_NS	4000000000ull
#define MS_RACE_MAX_NS	30000000000ull
#define MS_RACE_STARTS	10

struct ms_racer {
	int idx;
	uint64_t until, deadline;
	int starts, busy, bad, errs;
	uint64_t samples;
	char why[128];
};

static volatile int ms_race_stop;

/*
 * Sessions that start, run a little, and stop or are closed, over and
 * over, each with other options; every stream must be well formed.
 */
static void *ms_racer_fn(void *arg)
{
	struct ms_racer *r = arg;
	unsigned int seed = r->idx * 7919 + 1;
	int32_t me = getpid();

	while ((su_now_ns() < r->until || r->starts < MS_RACE_STARTS) &&
	       su_now_ns() < r->deadline) {
		static const uint32_t targets[] = { PLABEL_TARGET_ALL,
			PLABEL_TARGET_PIDS, PLABEL_TARGET_TREE };
		struct su_stream st = { 0 };
		int fd = ms_open(), err;
		uint32_t hz = 99 + rand_r(&seed) % 1900;

		if (fd < 0) {
			r->errs++;
			continue;
		}
		err = ms_start(fd, targets[rand_r(&seed) % 3], &me, 1,
			       rand_r(&seed) % 3, hz);
		if (err == -EBUSY) {
			r->busy++;
			close(fd);
			usleep(rand_r(&seed) % 2000);
			continue;
		}
		if (err) {
			r->errs++;
			snprintf(r->why, sizeof(r->why), "start: %d", err);
			close(fd);
			continue;
		}
		__atomic_add_fetch(&r->starts, 1, __ATOMIC_RELAXED);
		usleep(rand_r(&seed) % 20000);
		if (rand_r(&seed) % 4 == 0) {
			close(fd);	/* a release while running */
			continue;
		}
		err = su_stop(fd) ?: su_drain(fd, &st);
		if (err) {
			r->errs++;
			snprintf(r->why, sizeof(r->why), "stop/read: %d", err);
		}
		su_check(&st);
		if (st.bad) {
			r->bad++;
			memcpy(r->why, st.why, sizeof(r->why));
		}
		r->samples += su_count(&st, PLABEL_REC_SAMPLE);
		su_stream_free(&st);
		close(fd);
	}
	return NULL;
}

/* Threads, processes and renames for the sessions to record. */
static void *ms_churn_fn(void *arg)
{
	char name[16];
	int n = 0;

	while (!ms_race_stop) {
		pthread_t t;
		pid_t pid;
		int status;

		if (!pthread_create(&t, NULL, ms_thread_fn, NULL))
			pthread_join(t, NULL);
		if (n % 8 == 0) {
			pid = fork();
			if (!pid) {
				execl("/bin/true", "true", (char *)NULL);
				_exit(127);
			}
			if (pid > 0)
				waitpid(pid, &status, 0);
		}
		snprintf(name, sizeof(name), "ms-churn-%d", n++ % 100);
		prctl(PR_SET_NAME, name);
		su_burn_cpu(2000000);
	}
	return NULL;
}

TEST(start_stop_races_between_sessions)
{
	int fds[PLABEL_MAX_SESSIONS];
	struct ms_racer r[4];
	pthread_t rt[4], churn;
	long long max0;
	uint64_t until, deadline;
	int i, starts = 0, busy = 0, fd, done;

	NEED_ROOT();
	max0 = su_read_num(MAX_SESSIONS);
	ASSERT_LE(1, max0);
	ASSERT_GE(PLABEL_MAX_SESSIONS, max0);
	/* fewer slots than racers, so starts also meet the limit */
	ASSERT_EQ(0, su_write_num(MAX_SESSIONS, 3));
	ms_race_stop = 0;
	ASSERT_EQ(0, pthread_create(&churn, NULL, ms_churn_fn, NULL));
	until = su_now_ns() + MS_RACE_NS;
	deadline = until - MS_RACE_NS + MS_RACE_MAX_NS;
	for (i = 0; i < 4; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].idx = i;
		r[i].until = until;
		r[i].deadline = deadline;
		ASSERT_EQ(0, pthread_create(&rt[i], NULL, ms_racer_fn, &r[i]));
	}
	/* and the limit moving under them */
	do {
		usleep(100000);
		su_write_num(MAX_SESSIONS, 1 + rand() % 4);
		for (i = 0, done = 1; i < 4; i++)
			done &= __atomic_load_n(&r[i].starts, __ATOMIC_RELAXED) >=
				MS_RACE_STARTS;
	} while ((su_now_ns() < until || !done) && su_now_ns() < deadline);
	for (i = 0; i < 4; i++) {
		pthread_join(rt[i], NULL);
		EXPECT_EQ(0, r[i].errs) TH_LOG("racer %d: %s", i, r[i].why);
		EXPECT_EQ(0, r[i].bad) TH_LOG("racer %d: %s", i, r[i].why);
		starts += r[i].starts;
		busy += r[i].busy;
	}
	ms_race_stop = 1;
	pthread_join(churn, NULL);
	TH_LOG("%d sessions started, %d refused at the limit", starts, busy);
	EXPECT_LE(4 * MS_RACE_STARTS, starts);
	EXPECT_LT(0, busy);
	EXPECT_EQ(0, su_counter("sessions"));
	/* everything was let go: the full number starts again */
	ASSERT_EQ(0, su_write_num(MAX_SESSIONS, max0));
	for (i = 0; i < max0; i++) {
		fds[i] = ms_open();
		ASSERT_LE(0, fds[i]);
		EXPECT_EQ(0, ms_start_self(fds[i], PLABEL_CALLCHAIN_FP, 99));
	}
	fd = ms_open();
	ASSERT_LE(0, fd);
	EXPECT_EQ(-EBUSY, ms_start_self(fd, PLABEL_CALLCHAIN_FP, 99));
	close(fd);
	for (i = 0; i < max0; i++)
		close(fds[i]);
}

/* --- unload ------------------------------------------------------------ */

/*
 * While sessions' files are open (running, stopped, and one being read)
 * the module stays; once they are closed it unloads, loads again and runs
 * sessions as before.
 */
TEST(unload_after_sessions_close)
{
	struct su_reader rd;
	char path[256];
	const char *ko;
	int fd[3], kfd, i;

	NEED_ROOT();
	ko = plabel_kmod_path(path, sizeof(path));
	if (!ko || access(ko, R_OK))
		SKIP(return, "module file not found (set PLABEL_KMOD)");
	kfd = open(ko, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, kfd);
	if (plabel_kmod_differs(kfd) == 1) {
		close(kfd);
		SKIP(return, "%s is not the loaded module (set PLABEL_KMOD)",
		     ko);
	}
	for (i = 0; i < 3; i++) {
		fd[i] = ms_open();
		ASSERT_LE(0, fd[i]);
		ASSERT_EQ(0, ms_start_self(fd[i], i == 2 ?
					   PLABEL_CALLCHAIN_DWARF :
					   PLABEL_CALLCHAIN_FP, 999));
	}
	ASSERT_EQ(0, su_reader_start(&rd, fd[2]));
	ASSERT_EQ(0, su_stop(fd[1]));
	su_burn_cpu(100000000);
	EXPECT_NE(0, syscall(__NR_delete_module, "plabel", O_NONBLOCK));
	EXPECT_TRUE(errno == EWOULDBLOCK || errno == EBUSY)
		TH_LOG("delete_module: %s", strerror(errno));
	EXPECT_EQ(2, su_counter("sessions"));
	/* closed while running, stopped, and stopped under its reader */
	close(fd[0]);
	close(fd[1]);
	ASSERT_EQ(0, su_stop(fd[2]));
	EXPECT_EQ(0, su_reader_join(&rd));
	EXPECT_LT(0U, su_count(&rd.st, PLABEL_REC_SAMPLE));
	su_stream_free(&rd.st);
	close(fd[2]);

	ASSERT_EQ(0, syscall(__NR_delete_module, "plabel", O_NONBLOCK))
		TH_LOG("delete_module: %s", strerror(errno));
	EXPECT_NE(0, access(SU_DEV, F_OK));
	ASSERT_EQ(0, syscall(__NR_finit_module, kfd, "", 0))
		TH_LOG("finit_module %s: %s", ko, strerror(errno));
	close(kfd);
	for (i = 0; i < 50 && access(SU_DEV, F_OK); i++)
		usleep(20000);
	ASSERT_EQ(0, access(SU_DEV, F_OK));
	EXPECT_EQ(4, su_read_num(MAX_SESSIONS));
	EXPECT_EQ(0, su_counter("sessions"));
	for (i = 0; i < 3; i++) {
		fd[i] = ms_open();
		ASSERT_LE(0, fd[i]);
		ASSERT_EQ(0, ms_start_self(fd[i], PLABEL_CALLCHAIN_FP, 999));
	}
	su_burn_cpu(50000000);
	for (i = 0; i < 3; i++) {
		struct su_stream st = { 0 };

		ASSERT_EQ(0, su_stop(fd[i]));
		ASSERT_EQ(0, su_drain(fd[i], &st));
		EXPECT_LT(0U, su_count(&st, PLABEL_REC_SAMPLE));
		su_stream_free(&st);
		close(fd[i]);
	}
}

TEST_HARNESS_MAIN
