// SPDX-License-Identifier: GPL-2.0
/*
 * What a session records: every record type with the right contents, the
 * labels samples carry (kernel-stored, slot-switched, inherited), the 3:1
 * accuracy of the label split against the threads' own CPU time, both call
 * chain modes, many short-lived threads and processes, and when a
 * process's mappings are walked again.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <asm/prctl.h>

#include "session_util.h"
#include "kselftest/kselftest_harness.h"

#define NEED_ROOT() do {						\
	if (!su_have_dev())						\
		SKIP(return, SU_DEV " absent: module not loaded");	\
	if (geteuid())							\
		SKIP(return, "needs root for CAP_PERFMON");		\
} while (0)

#define CANARY 0x706c6162656c2121ull	/* "plabel!!" */

static int start_session(int fd, uint32_t target, uint32_t callchain,
			 uint32_t record, uint32_t hz, uint32_t stack_size)
{
	struct plabel_session_start_args a;
	int32_t pid = getpid();

	su_args_init(&a);
	a.target = target;
	if (target != PLABEL_TARGET_ALL) {
		a.pids = (uintptr_t)&pid;
		a.npids = 1;
	}
	a.callchain = callchain;
	a.record = record;
	a.sample_hz = hz;
	a.stack_size = stack_size;
	return su_start(fd, &a);
}

static int chain_has(struct plabel_rec_sample *s, uint64_t ip)
{
	uint64_t *ips = su_ips(s);
	int i;

	for (i = s->nr_kernel; i < s->nr_kernel + s->nr_user; i++)
		if (ips[i] == ip)
			return 1;
	return 0;
}

/*
 * A session recording the thread creations of this process's tree (fd),
 * and its reader. Skips without the module or root.
 */
#define START_THREADS_SESSION(fd, rdr) do {				\
		NEED_ROOT();						\
		(fd) = open(SU_DEV, O_RDONLY | O_CLOEXEC);		\
		ASSERT_LE(0, (fd));					\
		ASSERT_EQ(0, start_session((fd), PLABEL_TARGET_TREE,	\
					   PLABEL_CALLCHAIN_FP,		\
					   PLABEL_RECORD_THREADS, 0, 0)); \
		ASSERT_EQ(0, su_reader_start((rdr), (fd)));		\
	} while (0)

/* --- every record type ------------------------------------------------- */

static uint64_t clone_ret;	/* return address into spawn_outer */
static uint64_t pthread_ret;	/* return address into thread_outer */

static __attribute__((noinline)) pid_t spawn_inner(void)
{
	pid_t pid;

	clone_ret = (uintptr_t)__builtin_return_address(0);
	/*
	 * A fork through syscall(), which leaves rbp alone, so the frame
	 * pointer chain from the clone syscall runs through this function.
	 */
	pid = syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static __attribute__((noinline)) pid_t spawn_outer(void)
{
	pid_t pid = spawn_inner();

	asm volatile("" ::: "memory");	/* keep the call a call */
	return pid;
}

static pid_t thread_child_tid;

static void *record_tid(void *arg)
{
	thread_child_tid = su_gettid();
	return NULL;
}

static __attribute__((noinline)) int thread_inner(pthread_t *t)
{
	pthread_ret = (uintptr_t)__builtin_return_address(0);
	return pthread_create(t, NULL, record_tid, NULL);
}

static __attribute__((noinline)) int thread_outer(pthread_t *t)
{
	int ret = thread_inner(t);

	asm volatile("" ::: "memory");
	return ret;
}

/* Spend time in the kernel: reading /dev/zero clears user memory there. */
static void kernel_work(uint64_t ns)
{
	static char buf[1 << 20];
	uint64_t end = su_now_ns() + ns;
	int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	while (su_now_ns() < end)
		if (read(fd, buf, sizeof(buf)) < 0)
			break;
	close(fd);
}

/*
 * Whether a SAMPLE or THREAD record of m's process has m's time: the
 * record whose sample queued the walk that wrote m.
 */
static int stamped_by_a_sample(struct su_stream *st,
			       const struct plabel_rec_mmap *m)
{
	struct plabel_rec_header *h;
	size_t off;

	FOR_EACH_REC(st, h, off) {
		const struct plabel_rec_sample *s = (const void *)h;

		if ((h->type == PLABEL_REC_SAMPLE ||
		     h->type == PLABEL_REC_THREAD) &&
		    s->pid == m->pid && s->time_ns == m->time_ns)
			return 1;
	}
	return 0;
}

TEST(every_record_type)
{
	struct su_stream st = { 0 };
	struct su_reader rd;
	struct plabel_rec_header *h;
	struct plabel_rec_stream *sr;
	struct plabel_rec_labelset *ls;
	char exe[PATH_MAX];
	int samples = 0, main_ok = 0, main_bad = 0, kchain = 0, kbad = 0;
	int thr = 0, proc = 0, execs = 0, maps = 0, nolabels = 0;
	int nmaps = 0, maps_unstamped = 0;
	pid_t cpid, me = su_gettid();
	uint64_t id;
	pthread_t t;
	ssize_t n;
	size_t off;
	int fd, status;

	NEED_ROOT();
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ASSERT_LT(0, n);
	exe[n] = 0;
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	id = su_set_new(fd, "phase", "records");
	ASSERT_NE(0U, id);
	ASSERT_EQ(0, su_labels_set(fd, id));
	ASSERT_EQ(0, start_session(fd, PLABEL_TARGET_TREE,
				   PLABEL_CALLCHAIN_FP,
				   PLABEL_RECORD_CPU | PLABEL_RECORD_THREADS |
				   PLABEL_RECORD_KERNEL, 999, 0));
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	su_burn_cpu(150000000);
	kernel_work(150000000);
	cpid = spawn_outer();
	ASSERT_LT(0, cpid);
	ASSERT_EQ(cpid, waitpid(cpid, &status, 0));
	ASSERT_EQ(0, thread_outer(&t));
	pthread_join(t, NULL);
	ASSERT_EQ(0, su_stop(fd));
	READ_STREAM(&rd, &st);

	sr = (struct plabel_rec_stream *)st.buf;
	ASSERT_EQ((uint32_t)PLABEL_REC_STREAM, sr->hdr.type);
	EXPECT_EQ((uint32_t)PLABEL_REC_VERSION, sr->version);
	EXPECT_EQ((uint32_t)PLABEL_CALLCHAIN_FP, sr->callchain);
	EXPECT_EQ((uint32_t)(PLABEL_RECORD_CPU | PLABEL_RECORD_THREADS |
			     PLABEL_RECORD_KERNEL), sr->record);
	EXPECT_EQ(1000000000ull / 999, sr->period_ns);
	EXPECT_LE(1U, sr->ncpus);
	EXPECT_EQ(0U, su_count(&st, PLABEL_REC_LOST));

	ls = su_labelset(&st, id);
	ASSERT_NE(NULL, ls);
	EXPECT_TRUE(su_labelset_is(ls, "phase", "records"));

	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *s = (void *)h;

		switch (h->type) {
		case PLABEL_REC_SAMPLE:
			samples++;
			if (s->set_id && !su_labelset(&st, s->set_id))
				nolabels++;
			if (s->tid == (uint32_t)me) {
				if (s->set_id == id &&
				    s->pid == (uint32_t)getpid())
					main_ok++;
				else
					main_bad++;
			}
			if (!(s->flags & PLABEL_SAMPLE_USER) &&
			    s->nr_kernel > 1) {
				uint64_t *ips = su_ips(s);
				int i;

				kchain++;
				for (i = 0; i < s->nr_kernel; i++)
					if (ips[i] < 0xffff800000000000ull)
						kbad++;
			}
			break;
		case PLABEL_REC_THREAD:
			if (s->child_tid == (uint32_t)thread_child_tid &&
			    s->child_tid) {
				thr++;
				EXPECT_EQ((uint32_t)getpid(), s->pid);
				EXPECT_EQ((uint32_t)me, s->tid);
				EXPECT_EQ((uint32_t)getpid(), s->child_pid);
				EXPECT_EQ(0U, s->flags & PLABEL_THREAD_PROCESS);
				EXPECT_EQ(id, s->set_id);
				EXPECT_LE(1, s->nr_user);
			}
			if (s->child_pid == (uint32_t)cpid) {
				proc++;
				EXPECT_EQ((uint32_t)me, s->tid);
				EXPECT_EQ((uint32_t)cpid, s->child_tid);
				EXPECT_NE(0U, s->flags & PLABEL_THREAD_PROCESS);
				EXPECT_EQ(id, s->set_id);
				EXPECT_TRUE(chain_has(s, clone_ret))
					TH_LOG("no return into spawn_outer");
			}
			break;
		case PLABEL_REC_EXEC: {
			struct plabel_rec_exec *e = (void *)h;

			if (e->pid == (uint32_t)cpid) {
				execs++;
				EXPECT_STREQ("true", e->comm);
			}
			break;
		}
		case PLABEL_REC_MMAP: {
			struct plabel_rec_mmap *m = (void *)h;
			uintptr_t fn = (uintptr_t)spawn_outer;

			nmaps++;
			maps_unstamped += !stamped_by_a_sample(&st, m);

			if (m->pid == (uint32_t)getpid() && m->start <= fn &&
			    fn < m->end) {
				maps++;
				EXPECT_EQ(strlen(exe), m->path_len);
				EXPECT_EQ(0, memcmp(exe, m + 1, m->path_len));
			}
			break;
		}
		}
	}
	EXPECT_LT(50, samples);
	EXPECT_EQ(0, nolabels);
	EXPECT_LT(50, main_ok);
	EXPECT_EQ(0, main_bad);
	EXPECT_LT(0, kchain) TH_LOG("no kernel call chains");
	EXPECT_EQ(0, kbad);
	EXPECT_EQ(1, thr);
	EXPECT_EQ(1, proc);
	EXPECT_EQ(1, execs);
	EXPECT_LE(1, maps);
	/* each process image's mappings carry a time that image ran at */
	EXPECT_EQ(0, maps_unstamped) TH_LOG("%d of %d MMAP records", maps_unstamped, nmaps);
	su_stream_free(&st);
	close(fd);
}

/* --- labels on samples ------------------------------------------------- */

struct label_thread {
	int fd;
	uint64_t id, id2;
	pid_t tid, child_tid;
	uint64_t t_from;	/* samples after this carry id */
	uint64_t t_before, t_after;	/* slot switch window */
	uint64_t t_end;		/* and before this */
	uint64_t t_child_end;
	int err;
};

static void *inherit_child(void *arg)
{
	struct label_thread *lt = arg;

	lt->child_tid = su_gettid();
	su_burn_cpu(150000000);
	lt->t_child_end = su_now_ns();
	return NULL;
}

static void *kernel_set_thread(void *arg)
{
	struct label_thread *lt = arg;
	pthread_t t;

	lt->tid = su_gettid();
	lt->err = su_labels_set(lt->fd, lt->id);
	lt->t_from = su_now_ns();
	su_burn_cpu(150000000);
	lt->t_end = su_now_ns();
	if (pthread_create(&t, NULL, inherit_child, lt))
		lt->err = -1;
	else
		pthread_join(t, NULL);
	return NULL;
}

static __thread volatile uint64_t label_slot;

static void *slot_thread(void *arg)
{
	struct label_thread *lt = arg;

	lt->tid = su_gettid();
	label_slot = lt->id;
	lt->err = su_slot_set(lt->fd, &label_slot);
	lt->t_from = su_now_ns();
	su_burn_cpu(150000000);
	lt->t_before = su_now_ns();
	label_slot = lt->id2;
	lt->t_after = su_now_ns();
	su_burn_cpu(150000000);
	lt->t_end = su_now_ns();
	su_slot_set(lt->fd, NULL);
	return NULL;
}

TEST(labels_follow_threads)
{
	struct label_thread k = { 0 }, s = { 0 };
	int kn = 0, kb = 0, cn = 0, cb = 0, s1 = 0, s2 = 0, sb = 0;
	struct su_stream st = { 0 };
	struct su_reader rd;
	struct plabel_rec_header *h;
	pthread_t tk, ts;
	size_t off;
	int fd;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	k.fd = s.fd = fd;
	k.id = su_set_new(fd, "who", "kernel-set");
	s.id = su_set_new(fd, "who", "slot-1");
	s.id2 = su_set_new(fd, "who", "slot-2");
	ASSERT_NE(0U, k.id);
	ASSERT_NE(0U, s.id);
	ASSERT_NE(0U, s.id2);
	ASSERT_EQ(0, start_session(fd, PLABEL_TARGET_PIDS,
				   PLABEL_CALLCHAIN_FP, 0, 999, 0));
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	ASSERT_EQ(0, pthread_create(&tk, NULL, kernel_set_thread, &k));
	ASSERT_EQ(0, pthread_create(&ts, NULL, slot_thread, &s));
	pthread_join(tk, NULL);
	pthread_join(ts, NULL);
	ASSERT_EQ(0, su_stop(fd));
	ASSERT_EQ(0, k.err);
	ASSERT_EQ(0, s.err);
	READ_STREAM(&rd, &st);

	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *r = (void *)h;

		if (h->type != PLABEL_REC_SAMPLE)
			continue;
		/* exiting threads lose their labels: count up to the end */
		if (r->tid == (uint32_t)k.tid && r->time_ns > k.t_from &&
		    r->time_ns < k.t_end) {
			if (r->set_id == k.id)
				kn++;
			else
				kb++;
		} else if (r->tid == (uint32_t)k.child_tid &&
			   r->time_ns < k.t_child_end) {
			if (r->set_id == k.id)
				cn++;
			else
				cb++;
		} else if (r->tid == (uint32_t)s.tid &&
			   r->time_ns > s.t_from && r->time_ns < s.t_end) {
			if (r->time_ns < s.t_before && r->set_id == s.id)
				s1++;
			else if (r->time_ns > s.t_after && r->set_id == s.id2)
				s2++;
			else if (r->time_ns < s.t_before ||
				 r->time_ns > s.t_after)
				sb++;
		}
	}
	TH_LOG("samples: kernel-set %d, inherited %d, slot %d then %d",
	       kn, cn, s1, s2);
	EXPECT_LT(2, kn);
	EXPECT_EQ(0, kb);
	EXPECT_LT(2, cn) TH_LOG("inherited labels");
	EXPECT_EQ(0, cb);
	EXPECT_LT(2, s1);
	EXPECT_LT(2, s2);
	EXPECT_EQ(0, sb);
	EXPECT_TRUE(su_labelset_is(su_labelset(&st, k.id), "who",
				   "kernel-set"));
	EXPECT_TRUE(su_labelset_is(su_labelset(&st, s.id), "who", "slot-1"));
	EXPECT_TRUE(su_labelset_is(su_labelset(&st, s.id2), "who", "slot-2"));
	su_stream_free(&st);
	close(fd);
}

/* --- accuracy ---------------------------------------------------------- */

/*
 * On each CPU (two, or one when that is all there is) three threads labeled
 * "three" and one labeled "one" burn CPU for the same wall time, pinned, so
 * the scheduler gives "three" about 3/4 of the CPU. The label split of the
 * samples must match the split of the threads' own CPU time (the kernel's
 * accounting, read with CLOCK_THREAD_CPUTIME_ID) within 5 percentage
 * points. Every thread is scheduled alike, so timer interrupts that arrive
 * late or not at all (emulated CPUs on a busy host) skew neither label.
 */
#define NBURNERS 8
#define ACCURACY_ROUNDS 3

static pthread_barrier_t burn_start;
static uint64_t burn_until;	/* set before burn_start opens */

struct burner {
	int fd;
	uint64_t id;
	int cpu;
	uint64_t cpu_ns;	/* out: CPU time spent labeled */
	int err;
};

static void *burn_thread(void *arg)
{
	struct burner *b = arg;
	cpu_set_t set;
	uint64_t t0;

	CPU_ZERO(&set);
	CPU_SET(b->cpu, &set);
	b->err = sched_setaffinity(0, sizeof(set), &set);
	b->err |= su_labels_set(b->fd, b->id);
	pthread_barrier_wait(&burn_start);
	t0 = su_thread_cpu_ns();
	su_burn_until(burn_until);
	b->cpu_ns = su_thread_cpu_ns() - t0;
	b->err |= su_labels_set(b->fd, 0);
	return NULL;
}

TEST(accuracy_three_to_one)
{
	struct burner b[NBURNERS];
	pthread_t t[NBURNERS];
	struct su_stream st = { 0 };
	struct su_reader rd;
	struct plabel_rec_header *h;
	long long calls0, ns0, calls1, ns1;
	uint64_t hi, lo, nhi, nlo, cpu_hi, cpu_lo;
	double want, got, cover;
	size_t off;
	int fd, i, ncpu, round;

	NEED_ROOT();
	ncpu = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 2 : 1;
	for (round = 0; round < ACCURACY_ROUNDS; round++) {
		fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
		ASSERT_LE(0, fd);
		hi = su_set_new(fd, "share", "three");
		lo = su_set_new(fd, "share", "one");
		ASSERT_NE(0U, hi);
		ASSERT_NE(0U, lo);
		calls0 = su_read_num(SU_DEBUGFS "handler_calls");
		ns0 = su_read_num(SU_DEBUGFS "handler_ns_total");
		ASSERT_EQ(0, start_session(fd, PLABEL_TARGET_PIDS,
					   PLABEL_CALLCHAIN_FP, 0, 999, 0));
		ASSERT_EQ(0, su_reader_start(&rd, fd));
		ASSERT_EQ(0, pthread_barrier_init(&burn_start, NULL,
						  NBURNERS + 1));
		for (i = 0; i < NBURNERS; i++) {
			b[i] = (struct burner){ .fd = fd, .cpu = i % ncpu,
						.id = i < 2 ? lo : hi };
			ASSERT_EQ(0, pthread_create(&t[i], NULL, burn_thread,
						    &b[i]));
		}
		/* all start together: none burns longer for starting first */
		burn_until = su_now_ns() + 2000000000ull;
		pthread_barrier_wait(&burn_start);
		cpu_hi = cpu_lo = 0;
		for (i = 0; i < NBURNERS; i++) {
			pthread_join(t[i], NULL);
			ASSERT_EQ(0, b[i].err);
			if (b[i].id == hi)
				cpu_hi += b[i].cpu_ns;
			else
				cpu_lo += b[i].cpu_ns;
		}
		pthread_barrier_destroy(&burn_start);
		ASSERT_EQ(0, su_stop(fd));
		calls1 = su_read_num(SU_DEBUGFS "handler_calls");
		ns1 = su_read_num(SU_DEBUGFS "handler_ns_total");
		READ_STREAM(&rd, &st);
		EXPECT_EQ(0U, su_count(&st, PLABEL_REC_LOST));
		nhi = nlo = 0;
		FOR_EACH_REC(&st, h, off) {
			struct plabel_rec_sample *r = (void *)h;

			if (h->type != PLABEL_REC_SAMPLE)
				continue;
			nhi += r->set_id == hi;
			nlo += r->set_id == lo;
		}
		su_stream_free(&st);
		close(fd);
		ASSERT_LT(200U, nhi + nlo);
		want = 100.0 * cpu_hi / (cpu_hi + cpu_lo);
		got = 100.0 * nhi / (nhi + nlo);
		cover = 100.0 * (nhi + nlo) * (1e9 / 999) / (cpu_hi + cpu_lo);
		TH_LOG("cpu time %.1f%% / %.1f%% (%.3f s / %.3f s), samples %.1f%% / %.1f%% (%llu / %llu), covering %.0f%% of the CPU time",
		       want, 100 - want, cpu_hi / 1e9, cpu_lo / 1e9, got,
		       100 - got, (unsigned long long)nhi,
		       (unsigned long long)nlo, cover);
		if (calls0 >= 0 && calls1 > calls0)
			TH_LOG("handler: %lld calls, %lld ns per call",
			       calls1 - calls0,
			       (ns1 - ns0) / (calls1 - calls0));
		/*
		 * A guest whose host's CPUs are oversubscribed gets its timer
		 * interrupts late and in bursts (see the coverage above), and
		 * now and then one round is skewed by that alone: a sampler
		 * that attributes wrongly fails every round.
		 */
		if ((got > want ? got - want : want - got) < 5.0)
			return;
		TH_LOG("round %d: %.1f points off", round + 1,
		       got > want ? got - want : want - got);
	}
	EXPECT_GT(5.0, got > want ? got - want : want - got)
		TH_LOG("%d rounds, all more than 5 points off",
		       ACCURACY_ROUNDS);
}

/*
 * Samples carry their thread's CPU time: with two threads sharing one CPU
 * it grows about half as fast as the clock, it never runs ahead of what
 * the thread reads itself (with a reschedule pending it is the sum alone:
 * the scheduler may charge the time since the waking to the next task),
 * and back only rarely and by less than a tick (see
 * plabel_task_cpu_ns()), and between two overflows a
 * thread running alone has moved on, though the scheduler accounts at
 * ticks (4 ms at HZ=250), not every 1 ms sample.
 */
#define CPUTIME_THREADS	3
#define CPUTIME_SLACK_NS	20000000ull	/* as plabel record allows */

static pthread_barrier_t ct_start, ct_done, ct_stopped;
static uint64_t ct_until;

struct ct_thread {
	int cpu;
	pid_t tid;
	uint64_t t0, t1, end;	/* own CPU time: start, done, after stop */
	int err;
};

static void *ct_thread_fn(void *arg)
{
	struct ct_thread *c = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(c->cpu, &set);
	c->err = sched_setaffinity(0, sizeof(set), &set);
	c->tid = su_gettid();
	pthread_barrier_wait(&ct_start);
	c->t0 = su_thread_cpu_ns();
	su_burn_until(ct_until);
	c->t1 = su_thread_cpu_ns();
	pthread_barrier_wait(&ct_done);
	pthread_barrier_wait(&ct_stopped);
	c->end = su_thread_cpu_ns();
	return NULL;
}

static int ct_time_cmp(const void *a, const void *b)
{
	const struct plabel_rec_sample *x = *(void *const *)a;
	const struct plabel_rec_sample *y = *(void *const *)b;

	return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
}

TEST(samples_carry_thread_cpu_time)
{
	struct ct_thread c[CPUTIME_THREADS];
	pthread_t t[CPUTIME_THREADS];
	struct plabel_rec_sample **v;
	struct su_stream st = { 0 };
	struct plabel_rec_header *h;
	struct su_reader rd;
	size_t off, n, k;
	int fd, i, shared, nthr;

	NEED_ROOT();
	/* c[0] and c[1] share the last CPU; c[2] has CPU 0 to itself */
	shared = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0;
	nthr = shared ? 3 : 2;
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start_session(fd, PLABEL_TARGET_PIDS,
				   PLABEL_CALLCHAIN_FP, 0, 999, 0));
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	ASSERT_EQ(0, pthread_barrier_init(&ct_start, NULL, nthr + 1));
	ASSERT_EQ(0, pthread_barrier_init(&ct_done, NULL, nthr + 1));
	ASSERT_EQ(0, pthread_barrier_init(&ct_stopped, NULL, nthr + 1));
	for (i = 0; i < nthr; i++) {
		c[i] = (struct ct_thread){ .cpu = i < 2 ? shared : 0 };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, ct_thread_fn, &c[i]));
	}
	ct_until = su_now_ns() + 600000000ull;
	pthread_barrier_wait(&ct_start);
	pthread_barrier_wait(&ct_done);
	ASSERT_EQ(0, su_stop(fd));
	pthread_barrier_wait(&ct_stopped);
	for (i = 0; i < nthr; i++) {
		pthread_join(t[i], NULL);
		ASSERT_EQ(0, c[i].err);
	}
	pthread_barrier_destroy(&ct_start);
	pthread_barrier_destroy(&ct_done);
	pthread_barrier_destroy(&ct_stopped);
	READ_STREAM(&rd, &st);
	v = calloc(su_count(&st, PLABEL_REC_SAMPLE) + 1, sizeof(*v));
	ASSERT_NE(NULL, v);
	for (i = 0; i < nthr; i++) {
		uint64_t first = 0, last = 0, tfirst = 0, tlast = 0;
		size_t moved = 0, steps = 0, back = 0;

		n = 0;
		FOR_EACH_REC(&st, h, off) {
			struct plabel_rec_sample *r = (void *)h;

			if (h->type == PLABEL_REC_SAMPLE &&
			    r->tid == (uint32_t)c[i].tid)
				v[n++] = r;
		}
		ASSERT_LT(50U, n) TH_LOG("thread %d: %zu samples", i, n);
		qsort(v, n, sizeof(*v), ct_time_cmp);
		for (k = 0; k < n; k++) {
			ASSERT_NE(0U, v[k]->flags & PLABEL_SAMPLE_CPUTIME);
			ASSERT_GE(c[i].end, v[k]->cpu_ns)
				TH_LOG("thread %d: sample %zu ahead", i, k);
			/*
			 * a reading racing an update, or with a start from
			 * another CPU's clock, may be a little low
			 */
			if (k && v[k]->cpu_ns < v[k - 1]->cpu_ns) {
				back++;
				ASSERT_GT(CPUTIME_SLACK_NS,
					  v[k - 1]->cpu_ns - v[k]->cpu_ns);
			}
			/* late overflows repeat a record: same time */
			if (k && v[k]->time_ns != v[k - 1]->time_ns) {
				steps++;
				moved += v[k]->cpu_ns != v[k - 1]->cpu_ns;
			}
			if (v[k]->cpu_ns < c[i].t0 || v[k]->cpu_ns > c[i].t1)
				continue;
			if (!first) {
				first = v[k]->cpu_ns;
				tfirst = v[k]->time_ns;
			}
			last = v[k]->cpu_ns;
			tlast = v[k]->time_ns;
		}
		TH_LOG("thread %d on CPU %d: %zu samples, %.0f%% of its CPU time between them, %.3f CPU s a second; %zu of %zu steps moved, %zu back",
		       i, c[i].cpu, n,
		       100.0 * (last - first) / (c[i].t1 - c[i].t0),
		       (double)(last - first) / (tlast - tfirst), moved,
		       steps, back);
		EXPECT_GE(steps / 50, back);
		/* the burn is covered, end to end */
		EXPECT_LT(0.7 * (c[i].t1 - c[i].t0), (double)(last - first));
		if (i < 2)
			EXPECT_GT(0.8, (double)(last - first) / (tlast - tfirst));
		if (i == 2)
			EXPECT_LT(0.75 * steps, (double)moved);
	}
	free(v);
	su_stream_free(&st);
	close(fd);
}

/*
 * The sampling interval varies at random around the period, so that work
 * repeating in step with a fixed period is not sampled at the same point
 * of every round: a thread alone on CPU 0 sees its samples (one per
 * overflow; a late one's copies share its time) come between 1/2 and 3/2
 * of a period apart, a quarter of them under 3/4 and a quarter over 5/4,
 * and one period apart on average. A fixed period puts nearly all of them
 * at one period.
 *
 * Interrupts come late when the machine is busy (a virtual CPU the host
 * does not run for a while): such a gap is longer than 3/2 of a period,
 * and the timer's catching up with its grid may make the next one shorter
 * than 1/2. Only the gaps between 2/5 and 8/5 of a period are weighed;
 * there must be no more catch-ups than late ones.
 */
static void *iv_thread_fn(void *arg)
{
	struct ct_thread *c = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	c->err = sched_setaffinity(0, sizeof(set), &set);
	c->tid = su_gettid();
	pthread_barrier_wait(&ct_start);
	su_burn_until(ct_until);
	return NULL;
}

TEST(sampling_interval_varies)
{
	const uint64_t period = 1000000000ull / 999;
	struct plabel_rec_sample **v;
	struct su_stream st = { 0 };
	struct plabel_rec_header *h;
	struct ct_thread c = { 0 };
	struct su_reader rd;
	size_t off, n = 0, k, gaps = 0, on = 0, shorter = 0, longer = 0;
	size_t odd = 0, late = 0;
	uint64_t sum = 0, g;
	pthread_t t;
	int fd;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start_session(fd, PLABEL_TARGET_PIDS,
				   PLABEL_CALLCHAIN_FP, 0, 999, 0));
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	ASSERT_EQ(0, pthread_barrier_init(&ct_start, NULL, 2));
	ASSERT_EQ(0, pthread_create(&t, NULL, iv_thread_fn, &c));
	ct_until = su_now_ns() + 1000000000ull;
	pthread_barrier_wait(&ct_start);
	pthread_join(t, NULL);
	ASSERT_EQ(0, su_stop(fd));
	ASSERT_EQ(0, c.err);
	pthread_barrier_destroy(&ct_start);
	READ_STREAM(&rd, &st);
	v = calloc(su_count(&st, PLABEL_REC_SAMPLE) + 1, sizeof(*v));
	ASSERT_NE(NULL, v);
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *r = (void *)h;

		if (h->type == PLABEL_REC_SAMPLE && r->tid == (uint32_t)c.tid &&
		    r->cpu == 0)
			v[n++] = r;
	}
	qsort(v, n, sizeof(*v), ct_time_cmp);
	for (k = 1; k < n; k++) {
		if (v[k]->time_ns == v[k - 1]->time_ns)
			continue;	/* a late overflow's copy */
		g = v[k]->time_ns - v[k - 1]->time_ns;
		gaps++;
		if (g < period * 2 / 5) {
			odd++;
			continue;
		}
		if (g >= period * 8 / 5) {
			late++;
			continue;
		}
		on++;
		sum += g;
		shorter += g < period * 3 / 4;
		longer += g > period * 5 / 4 && g < period * 3 / 2;
	}
	TH_LOG("%zu intervals: %zu late, %zu catching up; of the %zu others, mean %.3f periods, %.0f%% under 3/4, %.0f%% between 5/4 and 3/2",
	       gaps, late, odd, on, on ? (double)sum / on / period : 0,
	       on ? 100.0 * shorter / on : 0, on ? 100.0 * longer / on : 0);
	ASSERT_LT(200U, on);
	EXPECT_LT(0.12 * on, (double)shorter);
	EXPECT_GT(0.45 * on, (double)shorter);
	EXPECT_LT(0.12 * on, (double)longer);
	EXPECT_LT(0.85 * period * on, (double)sum);
	EXPECT_GT(1.15 * period * on, (double)sum);
	EXPECT_GE(late + gaps / 20, odd);
	free(v);
	su_stream_free(&st);
	close(fd);
}

/* --- call chains ------------------------------------------------------- */

static uint64_t burn_ret;	/* return address into burn_outer */
static uint64_t *canary_addr;
static uint64_t canary_t0, canary_t1;	/* when the canary was in place */

static __attribute__((noinline)) void burn_inner(uint64_t ns)
{
	volatile uint64_t canary[4] = { CANARY, CANARY, CANARY, CANARY };
	uint64_t end = su_thread_cpu_ns() + ns;
	volatile uint64_t x = 0;
	int i;

	burn_ret = (uintptr_t)__builtin_return_address(0);
	canary_addr = (uint64_t *)&canary[0];
	canary_t0 = su_now_ns();
	while (su_thread_cpu_ns() < end)
		for (i = 0; i < 500000; i++)
			x += i + canary[i & 3];
	canary_t1 = su_now_ns();
}

static __attribute__((noinline)) void burn_outer(uint64_t ns)
{
	burn_inner(ns);
	asm volatile("" ::: "memory");
}

TEST(fp_chain_has_callers)
{
	struct su_stream st = { 0 };
	struct su_reader rd;
	struct plabel_rec_header *h;
	int user = 0, found = 0;
	pid_t me = su_gettid();
	size_t off;
	struct su_cost c0, c1;
	char cbuf[160];
	int fd;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start_session(fd, PLABEL_TARGET_PIDS,
				   PLABEL_CALLCHAIN_FP, 0, 999, 0));
	su_cost_snap(&c0);
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	burn_outer(250000000);
	ASSERT_EQ(0, su_stop(fd));
	su_cost_snap(&c1);
	TH_LOG("%s", su_cost_str(&c0, &c1, cbuf, sizeof(cbuf)));
	READ_STREAM(&rd, &st);
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *r = (void *)h;

		if (h->type != PLABEL_REC_SAMPLE || r->tid != (uint32_t)me ||
		    !(r->flags & PLABEL_SAMPLE_USER))
			continue;
		user++;
		EXPECT_EQ(0U, r->flags & PLABEL_SAMPLE_REGS);
		EXPECT_EQ(0U, r->nr_kernel);
		found += chain_has(r, burn_ret);
	}
	ASSERT_LT(20, user);
	EXPECT_LE(user * 8 / 10, found) TH_LOG("%d of %d", found, user);
	su_stream_free(&st);
	close(fd);
}

TEST(dwarf_regs_and_stack)
{
	struct su_stream st = { 0 };
	struct su_reader rd;
	struct plabel_rec_header *h;
	int withregs = 0, covered = 0, canary = 0, ripok = 0, thr = 0;
	pid_t me = su_gettid();
	pthread_t t;
	size_t off;
	struct su_cost c0, c1;
	char cbuf[160];
	int fd;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start_session(fd, PLABEL_TARGET_PIDS,
				   PLABEL_CALLCHAIN_DWARF, 0, 999, 4096));
	su_cost_snap(&c0);
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	burn_outer(250000000);
	ASSERT_EQ(0, thread_outer(&t));
	pthread_join(t, NULL);
	ASSERT_EQ(0, su_stop(fd));
	su_cost_snap(&c1);
	TH_LOG("%s", su_cost_str(&c0, &c1, cbuf, sizeof(cbuf)));
	READ_STREAM(&rd, &st);
	EXPECT_EQ((uint32_t)PLABEL_CALLCHAIN_DWARF,
		  ((struct plabel_rec_stream *)st.buf)->callchain);
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *r = (void *)h;
		uint64_t *regs, rsp, ca = (uintptr_t)canary_addr;
		unsigned char *stack;
		uint64_t v;

		if ((h->type != PLABEL_REC_SAMPLE &&
		     h->type != PLABEL_REC_THREAD) || r->tid != (uint32_t)me)
			continue;
		if (!(r->flags & PLABEL_SAMPLE_REGS))
			continue;
		regs = su_ips(r) + r->nr_kernel + r->nr_user;
		stack = (unsigned char *)(regs + PLABEL_REGS_NR);
		rsp = regs[PLABEL_REG_RSP];
		EXPECT_GE(4096U, r->stack_size);
		EXPECT_EQ(1, r->nr_user);
		if (h->type == PLABEL_REC_THREAD) {
			uint32_t i;

			if (r->child_tid != (uint32_t)thread_child_tid)
				continue;
			/* the creator's return address is on its stack */
			thr++;
			ripok += su_ips(r)[r->nr_kernel] ==
				 regs[PLABEL_REG_RIP];
			for (i = 0; i + 8 <= r->stack_size; i += 8) {
				memcpy(&v, stack + i, 8);
				if (v == pthread_ret)
					break;
			}
			EXPECT_GT(r->stack_size, i) TH_LOG("no return address");
			continue;
		}
		if (r->time_ns < canary_t0 || r->time_ns > canary_t1)
			continue;
		withregs++;
		ripok += su_ips(r)[r->nr_kernel] == regs[PLABEL_REG_RIP];
		if (ca >= rsp && ca + 32 <= rsp + r->stack_size) {
			covered++;
			memcpy(&v, stack + (ca - rsp), 8);
			canary += v == CANARY;
		}
	}
	ASSERT_LT(20, withregs);
	EXPECT_EQ(withregs + thr, ripok);
	EXPECT_LE(withregs * 9 / 10, covered);
	EXPECT_EQ(covered, canary);
	EXPECT_EQ(1, thr);
	su_stream_free(&st);
	close(fd);
}

/* --- where a dwarf snapshot ends ---------------------------------------- */

#define SNAP 16384

/* The main thread's stack pointer at exec: field 28 of /proc/self/stat. */
static uint64_t start_stack(void)
{
	char buf[1024], *p;
	unsigned long long v = 0;
	ssize_t n;
	int fd, i;

	fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');	/* the command name may hold spaces */
	for (i = 2; p && i < 28; i++)
		p = strchr(p + 1, ' ');
	if (p)
		sscanf(p + 1, "%llu", &v);
	return v;
}

/*
 * A copy cut short of want where the next page (or the first) could not
 * be read without faulting: a stack page not touched yet, being faulted in
 * as the sample came, or given back by the C library as the thread ends.
 */
static int stopped_at_page(const struct plabel_rec_sample *r, uint64_t rsp,
			   uint64_t want)
{
	return r->stack_size < want &&
	       (!r->stack_size || ((rsp + r->stack_size) & 4095) == 0);
}

/* The stack pointer of a record carrying registers. */
static uint64_t snap_rsp(struct plabel_rec_sample *r)
{
	return (su_ips(r) + r->nr_kernel + r->nr_user)[PLABEL_REG_RSP];
}

struct snap_burner {
	pid_t tid;
	uint64_t fsbase;	/* the thread's FS base */
	uint64_t local;		/* a local of its first function */
	int depth;		/* frames of 1 KiB to burn under */
	volatile int *stop;	/* burn until set, else 200 ms */
	uint64_t end;		/* where its snapshots end, from the first */
	uint64_t last;		/* time of its last sample */
	int n, ok, full;	/* overflows, good ones, full snapshots */
};

static __attribute__((noinline)) void burn_deep(struct snap_burner *b,
						int depth)
{
	volatile char pad[1024];

	pad[0] = depth;
	if (depth > 0)
		burn_deep(b, depth - 1);
	else if (b->stop)
		while (!*b->stop)
			su_burn_cpu(1000000);
	else
		su_burn_cpu(200000000);
	asm volatile("" ::: "memory");
	(void)pad[0];
}

static void *snap_thread(void *arg)
{
	struct snap_burner *b = arg;
	volatile int here = 0;
	unsigned long fs = 0;

	b->local = (uintptr_t)&here;
	b->tid = su_gettid();
	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
	b->fsbase = fs;
	burn_deep(b, b->depth);
	return NULL;
}

/*
 * A snapshot stops at the top of its thread's stack: a thread created while
 * the session ran at the stack pointer it started with, one created before
 * at its FS base (the C library's thread control block), the main thread
 * at mm->start_stack. A stack deeper than the snapshot is copied whole.
 */
TEST(dwarf_snapshot_ends_at_stack_top)
{
	static volatile int stop;
	struct snap_burner b[3] = {
		{ .depth = 0 }, { .depth = 24 }, { .depth = 0, .stop = &stop },
	};
	struct su_stream st = { 0 };
	struct su_reader rd;
	struct plabel_rec_header *h;
	int main_n = 0, main_ok = 0, thr_n = 0, thr_ok = 0;
	uint64_t top = start_stack();
	pid_t me = su_gettid();
	pthread_t t[3];
	size_t off;
	int fd, i;

	NEED_ROOT();
	ASSERT_NE(0ULL, (unsigned long long)top);
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	/* b[2] runs before the session starts */
	ASSERT_EQ(0, pthread_create(&t[2], NULL, snap_thread, &b[2]));
	while (!__atomic_load_n(&b[2].fsbase, __ATOMIC_ACQUIRE))
		sched_yield();
	ASSERT_EQ(0, start_session(fd, PLABEL_TARGET_PIDS,
				   PLABEL_CALLCHAIN_DWARF, 0, 999, SNAP));
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, snap_thread, &b[i]));
	su_burn_cpu(200000000);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	ASSERT_EQ(0, su_stop(fd));
	stop = 1;
	pthread_join(t[2], NULL);
	READ_STREAM(&rd, &st);
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *r = (void *)h;
		uint64_t rsp, want;

		if ((h->type != PLABEL_REC_SAMPLE &&
		     h->type != PLABEL_REC_THREAD) ||
		    !(r->flags & PLABEL_SAMPLE_REGS))
			continue;
		rsp = snap_rsp(r);
		if (r->tid == (uint32_t)me) {
			/* the harness's frames take far less than SNAP */
			int thr = h->type == PLABEL_REC_THREAD;
			int good = rsp <= top &&
				   (r->stack_size == top - rsp ||
				    stopped_at_page(r, rsp, top - rsp));

			thr_n += thr;
			main_n += !thr;
			thr_ok += thr && good;
			main_ok += !thr && good;
			if (!good)
				TH_LOG("main: rsp %#llx top %#llx size %u",
				       (unsigned long long)rsp,
				       (unsigned long long)top, r->stack_size);
			continue;
		}
		for (i = 0; i < 3; i++) {
			struct snap_burner *x = &b[i];

			if (r->tid != (uint32_t)x->tid ||
			    h->type != PLABEL_REC_SAMPLE)
				continue;
			/* a late overflow's copies: the same sample again */
			if (r->time_ns == x->last)
				continue;
			x->last = r->time_ns;
			x->n++;
			x->full += r->stack_size == SNAP;
			if (i == 2)
				want = x->fsbase - rsp;
			else if (r->stack_size == SNAP)
				want = SNAP;
			else if (!x->end && !stopped_at_page(r, rsp, SNAP)) {
				x->end = rsp + r->stack_size;
				want = r->stack_size;
			} else
				want = x->end - rsp;
			if (r->stack_size == want ||
			    stopped_at_page(r, rsp, want))
				x->ok++;
			else
				TH_LOG("thread %d: rsp %#llx end %#llx size %u",
				       i, (unsigned long long)rsp,
				       (unsigned long long)x->end,
				       r->stack_size);
		}
	}
	ASSERT_LT(20, main_n);
	EXPECT_EQ(main_n, main_ok);
	EXPECT_LE(2, thr_n);	/* and the reader's */
	EXPECT_EQ(thr_n, thr_ok);
	for (i = 0; i < 3; i++) {
		ASSERT_LT(20, b[i].n) TH_LOG("thread %d", i);
		EXPECT_EQ(b[i].n, b[i].ok) TH_LOG("thread %d", i);
	}
	/*
	 * New threads' snapshots end above their frames and below their
	 * static TLS (the deep one's, if it was sampled while shallow); the
	 * shallow ones never fill a snapshot, the deep one mostly does.
	 */
	for (i = 0; i < 2; i++) {
		if (i && !b[i].end)
			continue;
		EXPECT_LT(b[i].local, b[i].end) TH_LOG("thread %d", i);
		EXPECT_GT(b[i].fsbase, b[i].end) TH_LOG("thread %d", i);
	}
	EXPECT_EQ(0, b[0].full);
	EXPECT_EQ(0, b[2].full);
	EXPECT_LE(b[1].n * 9 / 10, b[1].full);
	su_stream_free(&st);
	close(fd);
}

/*
 * A process forked by such a thread goes on on a copy of its stack: its
 * snapshots stop where the thread's did, not at the FS base it inherited.
 */
static void *fork_thread(void *arg)
{
	struct snap_burner *b = arg;
	volatile int here = 0;
	unsigned long fs = 0;
	pid_t pid;

	b->local = (uintptr_t)&here;
	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
	b->fsbase = fs;
	pid = fork();
	if (pid == 0) {
		su_burn_cpu(200000000);
		_exit(0);
	}
	b->tid = pid;
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return NULL;
}

TEST(dwarf_snapshot_end_survives_fork)
{
	struct snap_burner b = { 0 };
	struct su_stream st = { 0 };
	struct su_reader rd;
	struct plabel_rec_header *h;
	pthread_t t;
	size_t off;
	int fd;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start_session(fd, PLABEL_TARGET_TREE,
				   PLABEL_CALLCHAIN_DWARF, 0, 999, SNAP));
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	ASSERT_EQ(0, pthread_create(&t, NULL, fork_thread, &b));
	pthread_join(t, NULL);
	ASSERT_EQ(0, su_stop(fd));
	READ_STREAM(&rd, &st);
	ASSERT_LT(0, b.tid);
	/* where the child's snapshots end: the first copy not cut by a fault */
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *r = (void *)h;

		if (h->type == PLABEL_REC_SAMPLE && r->pid == (uint32_t)b.tid &&
		    (r->flags & PLABEL_SAMPLE_REGS) && !b.end &&
		    !stopped_at_page(r, snap_rsp(r), SNAP))
			b.end = snap_rsp(r) + r->stack_size;
	}
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *r = (void *)h;
		uint64_t rsp;

		if (h->type != PLABEL_REC_SAMPLE || r->pid != (uint32_t)b.tid ||
		    !(r->flags & PLABEL_SAMPLE_REGS))
			continue;
		rsp = snap_rsp(r);
		b.n++;
		if (rsp + r->stack_size == b.end ||
		    stopped_at_page(r, rsp, b.end - rsp))
			b.ok++;
		else
			TH_LOG("child: rsp %#llx end %#llx size %u",
			       (unsigned long long)rsp,
			       (unsigned long long)b.end, r->stack_size);
	}
	ASSERT_LT(20, b.n);
	EXPECT_EQ(b.n, b.ok);
	EXPECT_LT(b.local, b.end);
	EXPECT_GT(b.fsbase, b.end);
	su_stream_free(&st);
	close(fd);
}

/* --- many short-lived threads and processes ---------------------------- */

#define NTHREADS 200
#define NPROCS 20

static void *short_thread(void *arg)
{
	*(pid_t *)arg = su_gettid();
	return NULL;
}

TEST(many_short_lived)
{
	static pid_t tids[NTHREADS], pids[NPROCS], grandkids[NPROCS];
	struct su_stream st = { 0 };
	struct su_reader rd;
	struct plabel_rec_header *h;
	int tfound = 0, pfound = 0, gfound = 0, i, fd;
	size_t off;

	START_THREADS_SESSION(fd, &rd);
	for (i = 0; i < NTHREADS; i++) {
		pthread_t t;

		ASSERT_EQ(0, pthread_create(&t, NULL, short_thread, &tids[i]));
		pthread_join(t, NULL);
	}
	for (i = 0; i < NPROCS; i++) {
		int p[2], status;

		ASSERT_EQ(0, pipe(p));
		pids[i] = fork();
		ASSERT_LE(0, pids[i]);
		if (!pids[i]) {
			/* a grandchild: followed because its parent is */
			pid_t g = fork();

			if (!g)
				_exit(0);
			if (write(p[1], &g, sizeof(g)) != sizeof(g))
				_exit(1);
			waitpid(g, NULL, 0);
			_exit(0);
		}
		close(p[1]);
		ASSERT_EQ((ssize_t)sizeof(pid_t),
			  read(p[0], &grandkids[i], sizeof(pid_t)));
		close(p[0]);
		waitpid(pids[i], &status, 0);
	}
	ASSERT_EQ(0, su_stop(fd));
	READ_STREAM(&rd, &st);
	EXPECT_EQ(0U, su_count(&st, PLABEL_REC_LOST));
	EXPECT_EQ(0U, su_count(&st, PLABEL_REC_SAMPLE));
	for (i = 0; i < NTHREADS; i++) {
		FOR_EACH_REC(&st, h, off) {
			struct plabel_rec_sample *r = (void *)h;

			if (h->type == PLABEL_REC_THREAD &&
			    r->child_tid == (uint32_t)tids[i] &&
			    !(r->flags & PLABEL_THREAD_PROCESS)) {
				tfound++;
				break;
			}
		}
	}
	for (i = 0; i < NPROCS; i++) {
		FOR_EACH_REC(&st, h, off) {
			struct plabel_rec_sample *r = (void *)h;

			if (h->type != PLABEL_REC_THREAD ||
			    !(r->flags & PLABEL_THREAD_PROCESS))
				continue;
			if (r->child_pid == (uint32_t)pids[i])
				pfound++;
			if (r->child_pid == (uint32_t)grandkids[i] &&
			    r->pid == (uint32_t)pids[i])
				gfound++;
		}
	}
	EXPECT_EQ(NTHREADS, tfound);
	EXPECT_EQ(NPROCS, pfound);
	EXPECT_EQ(NPROCS, gfound);
	su_stream_free(&st);
	close(fd);
}

/* --- mapping walks -------------------------------------------------------- */

#define HELD 64

static pthread_barrier_t held_barrier;

static void *held_thread(void *arg)
{
	pthread_barrier_wait(&held_barrier);
	return NULL;
}

/*
 * A CPU walks a process's mappings again when the process's executable
 * pages changed, not for every new thread (whose stack is a new mapping):
 * HELD threads alive at once cost at most one walk a CPU, where a walk
 * each would take 16 a CPU before the pending slots ran out. A library
 * dlopen()ed after them has its MMAP record.
 */
TEST(mappings_walked_for_dlopen_not_threads)
{
	static pthread_t t[HELD];
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN), w0, w1;
	struct su_stream st = { 0 };
	struct plabel_rec_header *h;
	struct su_reader rd;
	pthread_attr_t attr;
	pthread_t last;
	int i, fd, found = 0;
	size_t off;
	void *lib;

	START_THREADS_SESSION(fd, &rd);
	usleep(150000);		/* the reader's creation walked, by a tick */
	w0 = su_counter("mm_scans");
	ASSERT_LE(0, w0);
	ASSERT_EQ(0, pthread_barrier_init(&held_barrier, NULL, HELD + 1));
	ASSERT_EQ(0, pthread_attr_init(&attr));
	ASSERT_EQ(0, pthread_attr_setstacksize(&attr, 64 << 10));
	for (i = 0; i < HELD; i++)
		ASSERT_EQ(0, pthread_create(&t[i], &attr, held_thread, NULL));
	usleep(150000);		/* whatever they queued is walked */
	w1 = su_counter("mm_scans");
	EXPECT_GE(ncpus, w1 - w0) TH_LOG("%ld walks for %d threads",
					 w1 - w0, HELD);
	lib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	ASSERT_NE(NULL, lib) TH_LOG("%s", dlerror());
	/* a new thread has the mappings looked at again */
	ASSERT_EQ(0, pthread_create(&last, &attr, record_tid, NULL));
	pthread_join(last, NULL);
	pthread_barrier_wait(&held_barrier);
	for (i = 0; i < HELD; i++)
		pthread_join(t[i], NULL);
	ASSERT_EQ(0, su_stop(fd));
	READ_STREAM(&rd, &st);
	EXPECT_EQ(0U, su_count(&st, PLABEL_REC_LOST));
	FOR_EACH_REC(&st, h, off) {
		const struct plabel_rec_mmap *m = (const void *)h;

		if (h->type == PLABEL_REC_MMAP && m->pid == (uint32_t)getpid() &&
		    memmem(m + 1, m->path_len, "libz.so", 7))
			found++;
	}
	EXPECT_LE(1, found);
	dlclose(lib);
	pthread_attr_destroy(&attr);
	pthread_barrier_destroy(&held_barrier);
	su_stream_free(&st);
	close(fd);
}

/* A thread that waits for its name, then leaves. */
static pthread_mutex_t comm_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t comm_cond = PTHREAD_COND_INITIALIZER;
static int comm_done;
static pid_t comm_tid;

static void *comm_thread(void *arg)
{
	pthread_mutex_lock(&comm_lock);
	comm_tid = su_gettid();
	pthread_cond_broadcast(&comm_cond);
	while (!comm_done)
		pthread_cond_wait(&comm_cond, &comm_lock);
	pthread_mutex_unlock(&comm_lock);
	return NULL;
}

/*
 * A rename is a COMM record with the renamed task's ids and new name:
 * by itself (prctl), and by another thread through /proc, where the
 * writer is not the renamed task.
 */
TEST(comm_records)
{
	struct su_stream st = { 0 };
	struct su_reader rd;
	struct plabel_rec_header *h;
	char path[64], old[16] = "";
	int self = 0, other = 0, fd, pfd;
	pid_t me = su_gettid();
	pthread_t t;
	size_t off;

	NEED_ROOT();
	ASSERT_EQ(0, prctl(PR_GET_NAME, old, 0, 0, 0));
	ASSERT_EQ(0, pthread_create(&t, NULL, comm_thread, NULL));
	pthread_mutex_lock(&comm_lock);
	while (!comm_tid)
		pthread_cond_wait(&comm_cond, &comm_lock);
	pthread_mutex_unlock(&comm_lock);
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start_session(fd, PLABEL_TARGET_PIDS,
				   PLABEL_CALLCHAIN_FP,
				   PLABEL_RECORD_CPU | PLABEL_RECORD_THREADS,
				   99, 0));
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	ASSERT_EQ(0, prctl(PR_SET_NAME, "renamed-self", 0, 0, 0));
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", comm_tid);
	pfd = open(path, O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, pfd);
	ASSERT_EQ(10, write(pfd, "renamed-by", 10));
	close(pfd);
	ASSERT_EQ(0, su_stop(fd));
	READ_STREAM(&rd, &st);
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_comm *c = (void *)h;

		if (h->type != PLABEL_REC_COMM)
			continue;
		EXPECT_EQ((uint32_t)getpid(), c->pid);
		if (c->tid == (uint32_t)me &&
		    !strncmp(c->comm, "renamed-self", sizeof(c->comm)))
			self++;
		if (c->tid == (uint32_t)comm_tid &&
		    !strncmp(c->comm, "renamed-by", sizeof(c->comm)))
			other++;
		EXPECT_EQ('\0', c->comm[15]);
	}
	EXPECT_EQ(1, self);
	EXPECT_EQ(1, other);
	pthread_mutex_lock(&comm_lock);
	comm_done = 1;
	pthread_cond_broadcast(&comm_cond);
	pthread_mutex_unlock(&comm_lock);
	pthread_join(t, NULL);
	prctl(PR_SET_NAME, old, 0, 0, 0);
	su_stream_free(&st);
	close(fd);
}

/*
 * A CPU that runs nothing the session follows still tells the reader how
 * far its records are in: SYNC records for it, later and later, while the
 * followed thread burns another CPU. (su_check() holds every stream to the
 * SYNC promise: no record of a CPU stamped before its last SYNC.)
 */
TEST(idle_cpu_sends_sync)
{
	struct su_stream st = { 0 };
	struct su_reader rd;
	struct plabel_rec_header *h;
	uint64_t t0, last[2] = { 0, 0 };
	int syncs[2] = { 0, 0 }, fd;
	cpu_set_t set, old;
	size_t off;

	NEED_ROOT();
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "needs two CPUs");
	ASSERT_EQ(0, sched_getaffinity(0, sizeof(old), &old));
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(set), &set));
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start_session(fd, PLABEL_TARGET_PIDS,
				   PLABEL_CALLCHAIN_FP, PLABEL_RECORD_CPU,
				   99, 0));
	t0 = su_now_ns();
	/* the reader thread inherits CPU 0 and sleeps there */
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	su_burn_until(t0 + 1500000000ULL);
	ASSERT_EQ(0, su_stop(fd));
	READ_STREAM(&rd, &st);
	sched_setaffinity(0, sizeof(old), &old);
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sync *y = (void *)h;

		if (h->type != PLABEL_REC_SYNC || y->cpu > 1)
			continue;
		syncs[y->cpu]++;
		last[y->cpu] = y->time_ns;
	}
	TH_LOG("SYNC records: cpu 0 %d (last at +%lld ms), cpu 1 %d "
	       "(last at +%lld ms)", syncs[0],
	       (long long)(last[0] - t0) / 1000000, syncs[1],
	       (long long)(last[1] - t0) / 1000000);
	/* the idle CPU's watermark moved through the run, not only once */
	EXPECT_LE(2, syncs[1]);
	EXPECT_LT(t0 + 500000000ULL, last[1]);
	su_stream_free(&st);
	close(fd);
}

TEST_HARNESS_MAIN
