// SPDX-License-Identifier: GPL-2.0
/*
 * Off-CPU records (PLABEL_RECORD_OFFCPU): none without the flag, the wait
 * kinds of a thread in nanosleep(), futex() and read() on a pipe, with its
 * labels and the wait's length; the minimum duration; the checks of the
 * session arguments; records lost to a full ring counted as LOST; the
 * fp-mode snapshot's registers and length.
 */
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "session_util.h"
#include "kselftest/kselftest_harness.h"

#define NEED_ROOT() do {						\
	if (!su_have_dev())						\
		SKIP(return, SU_DEV " absent: module not loaded");	\
	if (geteuid())							\
		SKIP(return, "needs root for CAP_PERFMON");		\
} while (0)

#define WAIT_MS		30	/* each wait of the kinds test */
#define NWAITS		5

static int start(int fd, uint32_t record, uint32_t callchain,
		 uint32_t min_us)
{
	struct plabel_session_start_args a;
	int32_t pid = getpid();

	su_args_init(&a);
	a.target = PLABEL_TARGET_PIDS;
	a.pids = (uintptr_t)&pid;
	a.npids = 1;
	a.callchain = callchain;
	a.record = record;
	a.offcpu_min_us = min_us;
	return su_start(fd, &a);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { ns / 1000000000ull, ns % 1000000000ull };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* The END record of tid's wait that began at out_ns, or NULL. */
static struct plabel_rec_offcpu_end *find_end(struct su_stream *st,
					      uint32_t tid, uint64_t out_ns)
{
	struct plabel_rec_header *h;
	size_t off;

	FOR_EACH_REC(st, h, off) {
		struct plabel_rec_offcpu_end *e = (void *)h;

		if (h->type == PLABEL_REC_OFFCPU_END && e->tid == tid &&
		    e->out_ns == out_ns)
			return e;
	}
	return NULL;
}

/* What one thread's waits look like in a stream. */
struct waits {
	unsigned int records;	/* OFFCPU records */
	unsigned int ended;	/* of them with an END */
	unsigned int long_ones;	/* ended, at least WAIT_MS * 0.9 */
	unsigned int of_kind;	/* long ones of the kind expected */
	unsigned int labeled;	/* long ones with the set expected */
	unsigned int min_bad;	/* ENDs shorter than the minimum */
	uint64_t long_ns;	/* total of the long ones */
};

static void tally(struct su_stream *st, uint32_t tid, uint32_t kind,
		  uint64_t set_id, uint64_t min_ns, uint64_t from_ns,
		  struct waits *w)
{
	struct plabel_rec_header *h;
	size_t off;

	memset(w, 0, sizeof(*w));
	FOR_EACH_REC(st, h, off) {
		struct plabel_rec_sample *s = (void *)h;
		struct plabel_rec_offcpu_end *e;
		uint64_t d;

		if (h->type != PLABEL_REC_OFFCPU || s->tid != tid ||
		    s->wait_kind == PLABEL_WAIT_PREEMPTED ||
		    s->time_ns < from_ns)
			continue;
		w->records++;
		e = find_end(st, tid, s->time_ns);
		if (!e)
			continue;
		w->ended++;
		d = e->time_ns - e->out_ns;
		if (d < min_ns)
			w->min_bad++;
		if (d < WAIT_MS * 900000ull)
			continue;
		w->long_ones++;
		w->long_ns += d;
		if (s->wait_kind == kind)
			w->of_kind++;
		if (s->set_id == set_id)
			w->labeled++;
	}
}

TEST(flag_off_gives_no_records)
{
	struct su_reader rdr;
	struct su_stream st;
	int fd, i;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start(fd, PLABEL_RECORD_CPU | PLABEL_RECORD_THREADS,
			   PLABEL_CALLCHAIN_FP, 0));
	ASSERT_EQ(0, su_reader_start(&rdr, fd));
	for (i = 0; i < 10; i++)
		sleep_ns(5000000);
	ASSERT_EQ(0, su_stop(fd));
	READ_STREAM(&rdr, &st);
	EXPECT_EQ(0, st.bad) TH_LOG("%s", st.why);
	EXPECT_EQ(0ull, su_count(&st, PLABEL_REC_OFFCPU));
	EXPECT_EQ(0ull, su_count(&st, PLABEL_REC_OFFCPU_END));
	su_stream_free(&st);
	close(fd);
}

TEST(bad_arguments_rejected)
{
	struct plabel_session_start_args a;
	int32_t pid = getpid();
	long long v;
	int fd;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
#define BAD(what) do {							\
		su_args_init(&a);					\
		a.target = PLABEL_TARGET_PIDS;				\
		a.pids = (uintptr_t)&pid;				\
		a.npids = 1;						\
		a.record = PLABEL_RECORD_OFFCPU;			\
		what;							\
		EXPECT_EQ(-EINVAL, su_start(fd, &a)) TH_LOG(#what);	\
	} while (0)
	/* a minimum without off-CPU records, one over the ceiling */
	BAD(a.record = PLABEL_RECORD_CPU; a.offcpu_min_us = 1);
	BAD(a.offcpu_min_us = PLABEL_MAX_OFFCPU_MIN_US + 1);
	BAD(a.pad2 = 1);
	/* the bits around the flag are unknown */
	BAD(a.record |= PLABEL_RECORD_HEAP << 1);
	BAD(a.record |= PLABEL_RECORD_OFFCPU >> 1);
#undef BAD
	/* the first version's size still starts a session */
	su_args_init(&a);
	a.size = offsetof(struct plabel_session_start_args, offcpu_min_us);
	EXPECT_EQ(0, su_start(fd, &a));
	close(fd);
	/* the sysctl's bounds */
	EXPECT_GE(su_read_num(SU_SYSCTL "offcpu_min_us"), 0);
	EXPECT_NE(0, su_write_num(SU_SYSCTL "offcpu_min_us",
				  PLABEL_MAX_OFFCPU_MIN_US + 1));
	/* how long the probe stays: up to an hour, 0 for until unload */
	v = su_read_num(SU_SYSCTL "offcpu_linger_ms");
	EXPECT_LE(0, v);
	EXPECT_GE(3600000, v);
	EXPECT_NE(0, su_write_num(SU_SYSCTL "offcpu_linger_ms", 3600001));
	EXPECT_EQ(0, su_write_num(SU_SYSCTL "offcpu_linger_ms", 3600000));
	EXPECT_EQ(0, su_write_num(SU_SYSCTL "offcpu_linger_ms", v));
}

/* The three waiting threads of the kinds test. */
struct waiter {
	int fd;
	unsigned long long set;
	pid_t tid;
	int kind;		/* PLABEL_WAIT_* it waits with */
	int pipe_rd;
	volatile int ready;
	int err;
	uint64_t from_ns;	/* its first wait's start (CLOCK_MONOTONIC) */
	uint64_t waited_ns;	/* from its first wait's start to its last's end */
};

static void *waiter_fn(void *arg)
{
	struct waiter *w = arg;
	uint32_t futex_word = 0;
	struct timespec ts = { 0, WAIT_MS * 1000000L };
	char c;
	int i;

	w->tid = su_gettid();
	/*
	 * A long wait of another kind before the thread labeled itself (a
	 * loaded debug kernel gave one): not one of the waits counted
	 */
	sleep_ns(WAIT_MS * 2000000ull);
	w->err = su_labels_set(w->fd, w->set);
	__atomic_store_n(&w->ready, 1, __ATOMIC_RELEASE);
	w->from_ns = su_now_ns();
	w->waited_ns = w->from_ns;
	for (i = 0; i < NWAITS && !w->err; i++) {
		switch (w->kind) {
		case PLABEL_WAIT_SLEEP:
			sleep_ns(WAIT_MS * 1000000ull);
			break;
		case PLABEL_WAIT_FUTEX:
			/* nobody wakes it: the timeout ends the wait */
			syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0,
				&ts, NULL, 0);
			break;
		case PLABEL_WAIT_IO:
			if (read(w->pipe_rd, &c, 1) != 1)
				w->err = -EIO;
			break;
		}
	}
	w->waited_ns = su_now_ns() - w->waited_ns;
	return NULL;
}

static void check_kinds(struct __test_metadata *_metadata, uint32_t chain)
{
	static const char *const names[] = { "other", "sleep", "io", "futex" };
	struct waiter w[3] = {
		{ .kind = PLABEL_WAIT_SLEEP },
		{ .kind = PLABEL_WAIT_FUTEX },
		{ .kind = PLABEL_WAIT_IO },
	};
	pthread_t t[3];
	struct su_reader rdr;
	struct su_stream st;
	int fd, pfd[2], i, k;

	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pipe(pfd));
	for (k = 0; k < 3; k++) {
		w[k].fd = fd;
		w[k].pipe_rd = pfd[0];
		w[k].set = su_set_new(fd, "wait", names[w[k].kind]);
		ASSERT_NE(0ull, w[k].set);
	}
	ASSERT_EQ(0, start(fd, PLABEL_RECORD_OFFCPU | PLABEL_RECORD_THREADS,
			   chain, 1000));
	ASSERT_EQ(0, su_reader_start(&rdr, fd));
	for (k = 0; k < 3; k++)
		ASSERT_EQ(0, pthread_create(&t[k], NULL, waiter_fn, &w[k]));
	for (k = 0; k < 3; k++)
		while (!__atomic_load_n(&w[k].ready, __ATOMIC_ACQUIRE))
			sleep_ns(1000000);
	/* the pipe reader gets a byte every WAIT_MS */
	for (i = 0; i < NWAITS; i++) {
		sleep_ns(WAIT_MS * 1000000ull);
		ASSERT_EQ(1, write(pfd[1], "x", 1));
	}
	for (k = 0; k < 3; k++) {
		pthread_join(t[k], NULL);
		EXPECT_EQ(0, w[k].err);
	}
	ASSERT_EQ(0, su_stop(fd));
	READ_STREAM(&rdr, &st);
	EXPECT_EQ(0, st.bad) TH_LOG("%s", st.why);
	EXPECT_EQ(0ull, su_count(&st, PLABEL_REC_LOST));
	for (k = 0; k < 3; k++) {
		struct waits ws;

		tally(&st, w[k].tid, w[k].kind, w[k].set, 1000000,
		      w[k].from_ns, &ws);
		TH_LOG("%s: %u records, %u ended, %u long (%.1f ms), %u of the kind, %u labeled",
		       names[w[k].kind], ws.records, ws.ended, ws.long_ones,
		       ws.long_ns / 1e6, ws.of_kind, ws.labeled);
		/* each wait, but the first pipe read may start late */
		EXPECT_LE(NWAITS - 1u, ws.long_ones);
		EXPECT_EQ(ws.long_ones, ws.of_kind);
		EXPECT_EQ(ws.long_ones, ws.labeled);
		EXPECT_EQ(0u, ws.min_bad);
		/* no wait is counted twice: within the time it waited */
		EXPECT_GE(w[k].waited_ns, ws.long_ns);
		ASSERT_NE(NULL, su_labelset(&st, w[k].set));
	}
	su_stream_free(&st);
	close(pfd[0]);
	close(pfd[1]);
	close(fd);
}

TEST(wait_kinds_fp)
{
	NEED_ROOT();
	check_kinds(_metadata, PLABEL_CALLCHAIN_FP);
}

TEST(wait_kinds_dwarf)
{
	NEED_ROOT();
	check_kinds(_metadata, PLABEL_CALLCHAIN_DWARF);
}

/* A thread's short sleeps get an OFFCPU record each but no END. */
struct sleeper {
	pid_t tid;
	int nshort, nlong;
	uint64_t short_ns, long_ns;
	long short_switches;	/* the times the short sleeps left the CPU */
};

static void *sleeper_fn(void *arg)
{
	struct sleeper *s = arg;
	struct rusage r0, r1;
	int i;

	s->tid = su_gettid();
	getrusage(RUSAGE_THREAD, &r0);
	for (i = 0; i < s->nshort; i++)
		sleep_ns(s->short_ns);
	getrusage(RUSAGE_THREAD, &r1);
	s->short_switches = r1.ru_nvcsw - r0.ru_nvcsw;
	for (i = 0; i < s->nlong; i++)
		sleep_ns(s->long_ns);
	return NULL;
}

TEST(minimum_duration)
{
	struct sleeper sl = {
		.nshort = 50, .short_ns = 100000,
		.nlong = 3, .long_ns = 60000000,
	};
	struct plabel_rec_header *h;
	struct su_reader rdr;
	struct su_stream st;
	unsigned int ends = 0, short_ends = 0, outs = 0;
	pthread_t t;
	size_t off;
	int fd;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	/* 50 ms: the long sleeps only */
	ASSERT_EQ(0, start(fd, PLABEL_RECORD_OFFCPU, PLABEL_CALLCHAIN_FP,
			   50000));
	ASSERT_EQ(0, su_reader_start(&rdr, fd));
	ASSERT_EQ(0, pthread_create(&t, NULL, sleeper_fn, &sl));
	pthread_join(t, NULL);
	ASSERT_EQ(0, su_stop(fd));
	READ_STREAM(&rdr, &st);
	EXPECT_EQ(0, st.bad) TH_LOG("%s", st.why);
	EXPECT_EQ(0ull, su_count(&st, PLABEL_REC_LOST));
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *s = (void *)h;
		struct plabel_rec_offcpu_end *e;

		/* (a sleep, not time preempted) */
		if (h->type != PLABEL_REC_OFFCPU ||
		    s->tid != (uint32_t)sl.tid ||
		    s->wait_kind == PLABEL_WAIT_PREEMPTED)
			continue;
		outs++;
		e = find_end(&st, s->tid, s->time_ns);
		if (!e)
			continue;
		ends++;
		if (e->time_ns - e->out_ns < 50000000ull)
			short_ends++;
	}
	/*
	 * nearly every sleep left the CPU (one whose timer fired before it
	 * got to schedule() did not); only the long ones ended on record
	 */
	EXPECT_LE((unsigned int)(sl.nlong + sl.nshort / 2), outs);
	EXPECT_EQ((unsigned int)sl.nlong, ends);
	EXPECT_EQ(0u, short_ends);
	su_stream_free(&st);
	close(fd);
}

/* Two threads spinning on one CPU: each is preempted for the other. */
static void *spin_fn(void *arg)
{
	pid_t *tid = arg;
	cpu_set_t one;

	*tid = su_gettid();
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		*tid = -1;
	su_burn_until(su_now_ns() + 300000000ull);
	return NULL;
}

TEST(preempted_time_recorded)
{
	struct plabel_rec_header *h;
	struct su_reader rdr;
	struct su_stream st;
	unsigned int preempted = 0, ended = 0, waits = 0;
	pid_t tids[2];
	pthread_t t[2];
	size_t off;
	int fd, k;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start(fd, PLABEL_RECORD_OFFCPU, PLABEL_CALLCHAIN_FP, 0));
	ASSERT_EQ(0, su_reader_start(&rdr, fd));
	for (k = 0; k < 2; k++)
		ASSERT_EQ(0, pthread_create(&t[k], NULL, spin_fn, &tids[k]));
	for (k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	ASSERT_EQ(0, su_stop(fd));
	READ_STREAM(&rdr, &st);
	for (k = 0; k < 2; k++)
		ASSERT_LT(0, tids[k]);
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *s = (void *)h;

		if (h->type != PLABEL_REC_OFFCPU ||
		    (s->tid != (uint32_t)tids[0] && s->tid != (uint32_t)tids[1]))
			continue;
		if (s->wait_kind != PLABEL_WAIT_PREEMPTED) {
			waits++;
			continue;
		}
		preempted++;
		EXPECT_EQ(0u, s->wait_state);
		EXPECT_LT(0, s->nr_user);
		if (find_end(&st, s->tid, s->time_ns))
			ended++;
	}
	TH_LOG("%u preempted switch-outs, %u ended; %u waits", preempted,
	       ended, waits);
	/* sharing a CPU for 300 ms each, with the scheduler's slices */
	EXPECT_LE(2u, preempted);
	EXPECT_LE(preempted - 2, ended);
	su_stream_free(&st);
	close(fd);
}

/*
 * An fp-mode OFFCPU record's snapshot: only rip, rsp and rbp, and the
 * stack only up to the end of the frame record at rbp (the return address
 * that is the fp chain's second entry), not the whole 2 KiB.
 */
/*
 * Record a thread running fn(tid) in an fp-mode session of this process
 * with record's records, until it ends; its tid in *tid, the stream in
 * *st, the session's fd (stopped) in fd.
 */
#define RECORD_THREAD(fd, record, fn, tid, st) do {			\
		struct su_reader rdr_;					\
		pthread_t t_;						\
									\
		fd = open(SU_DEV, O_RDWR | O_CLOEXEC);			\
		ASSERT_LE(0, fd);					\
		ASSERT_EQ(0, start(fd, record, PLABEL_CALLCHAIN_FP, 0));	\
		ASSERT_EQ(0, su_reader_start(&rdr_, fd));		\
		ASSERT_EQ(0, pthread_create(&t_, NULL, fn, tid));	\
		pthread_join(t_, NULL);					\
		ASSERT_EQ(0, su_stop(fd));				\
		READ_STREAM(&rdr_, st);					\
		ASSERT_LT(0, *(tid));					\
	} while (0)

static __attribute__((noinline)) void lean_wait(void)
{
	sleep_ns(WAIT_MS * 100000ull);
	__asm__ volatile("" ::: "memory");	/* no tail call */
}

static __attribute__((noinline)) void lean_waits(int n)
{
	int i;

	for (i = 0; i < n; i++)
		lean_wait();
	__asm__ volatile("" ::: "memory");
}

static void *lean_fn(void *arg)
{
	*(pid_t *)arg = su_gettid();
	lean_waits(NWAITS * 4);
	__asm__ volatile("" ::: "memory");
	return NULL;
}

TEST(fp_snapshot_is_lean)
{
	struct plabel_rec_header *h;
	struct su_stream st;
	unsigned int waits = 0, lean = 0, trimmed = 0;
	pid_t tid = 0;
	size_t off;
	int fd;

	NEED_ROOT();
	RECORD_THREAD(fd, PLABEL_RECORD_OFFCPU, lean_fn, &tid, &st);
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *s = (void *)h;
		uint64_t *ips = su_ips(s), *regs, rsp, rbp, ret;
		unsigned char *stack;

		if (h->type != PLABEL_REC_OFFCPU || s->tid != (uint32_t)tid ||
		    s->wait_kind != PLABEL_WAIT_SLEEP)
			continue;
		waits++;
		if ((s->flags & (PLABEL_SAMPLE_REGS | PLABEL_SAMPLE_FP_REGS)) !=
		    (PLABEL_SAMPLE_REGS | PLABEL_SAMPLE_FP_REGS) ||
		    s->nr_user < 3)
			continue;
		lean++;
		regs = ips + s->nr_kernel + s->nr_user;
		stack = (unsigned char *)(regs + PLABEL_FP_REGS_NR);
		rsp = regs[1];
		rbp = regs[2];
		EXPECT_EQ(ips[s->nr_kernel], regs[0]);
		EXPECT_EQ(h->size, (uint32_t)((sizeof(*s) + 8 * (s->nr_kernel +
			s->nr_user + PLABEL_FP_REGS_NR) + s->stack_size + 7) & ~7UL));
		if (rbp & 7 || rbp <= rsp || rbp - rsp + 16 != s->stack_size) {
			TH_LOG("rsp %#llx rbp %#llx stack_size %u",
			       (unsigned long long)rsp,
			       (unsigned long long)rbp, s->stack_size);
			continue;
		}
		/* the frame record where the copy and the chain meet */
		memcpy(&ret, stack + (rbp - rsp) + 8, 8);
		EXPECT_EQ(ips[s->nr_kernel + 1], ret);
		trimmed += s->stack_size < 2048 && ret == ips[s->nr_kernel + 1];
	}
	TH_LOG("%u sleeps, %u with ip/sp/bp, %u trimmed at the frame record",
	       waits, lean, trimmed);
	EXPECT_LE(NWAITS * 4u, waits);
	EXPECT_EQ(waits, lean);
	EXPECT_EQ(lean, trimmed);
	su_stream_free(&st);
	close(fd);
}

/* The kernel's text symbols, sorted, from /proc/kallsyms. */
struct ksym {
	uint64_t addr;
	char name[64];
	int mine;		/* plabel's own */
};

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static struct ksym *ksyms_read(size_t *n)
{
	struct ksym *k = NULL, *nk;
	size_t cap = 0;
	char line[512], name[256], mod[64];
	unsigned long long addr;
	char type;
	FILE *f = fopen("/proc/kallsyms", "re");

	*n = 0;
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		int got = sscanf(line, "%llx %c %255s %63s", &addr, &type,
				 name, mod);

		if (got < 3 || !addr || (type != 't' && type != 'T'))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 65536;
			nk = realloc(k, cap * sizeof(*k));
			if (!nk)
				break;
			k = nk;
		}
		k[*n].addr = addr;
		snprintf(k[*n].name, sizeof(k[*n].name), "%.63s", name);
		k[*n].mine = got == 4 && !strcmp(mod, "[plabel]");
		(*n)++;
	}
	fclose(f);
	qsort(k, *n, sizeof(*k), ksym_cmp);
	return k;
}

static const struct ksym *ksym_of(const struct ksym *k, size_t n,
				  uint64_t addr)
{
	size_t lo = 0, hi = n;

	if (!n || addr < k[0].addr)
		return NULL;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (k[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	return &k[lo];
}

static void *napper_fn(void *arg)
{
	int i;

	*(pid_t *)arg = su_gettid();
	for (i = 0; i < NWAITS; i++)
		sleep_ns(WAIT_MS * 1000000ull);
	return NULL;
}

/*
 * An off-CPU record's kernel chain starts where the scheduler called the
 * probe and runs down to the system call: none of the module's own frames,
 * the first one the scheduler's, the sleep on the way.
 */
TEST(kernel_chain_from_the_scheduler)
{
	struct plabel_rec_header *h;
	struct su_stream st;
	unsigned int waits = 0, good = 0;
	struct ksym *ks;
	size_t nks, off;
	pid_t tid = 0;
	int fd;

	NEED_ROOT();
	ks = ksyms_read(&nks);
	if (nks < 1000) {
		free(ks);
		SKIP(return, "no kernel symbols in /proc/kallsyms");
	}
	RECORD_THREAD(fd, PLABEL_RECORD_OFFCPU | PLABEL_RECORD_KERNEL,
		      napper_fn, &tid, &st);
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *s = (void *)h;
		uint64_t *ips = su_ips(s);
		const struct ksym *first;
		int mine = 0, sleep = 0;
		unsigned int i;

		if (h->type != PLABEL_REC_OFFCPU || s->tid != (uint32_t)tid ||
		    s->wait_kind != PLABEL_WAIT_SLEEP)
			continue;
		waits++;
		for (i = 0; i < s->nr_kernel; i++) {
			const struct ksym *k = ksym_of(ks, nks, ips[i]);

			mine += k && k->mine;
			sleep += k && strstr(k->name, "nanosleep");
		}
		first = s->nr_kernel ? ksym_of(ks, nks, ips[0]) : NULL;
		if (!mine && sleep && first &&
		    (!strcmp(first->name, "__schedule") ||
		     !strcmp(first->name, "__traceiter_sched_switch"))) {
			good++;
			continue;
		}
		TH_LOG("a chain of %u: first %s, %d of the module's frames, "
		       "%d in nanosleep", s->nr_kernel,
		       first ? first->name : "?", mine, sleep);
	}
	TH_LOG("%u sleeps, %u with the chain from the scheduler", waits, good);
	EXPECT_LE(NWAITS, (int)waits);
	EXPECT_EQ(waits, good);
	su_stream_free(&st);
	free(ks);
	close(fd);
}

TEST(lost_records_counted)
{
	struct sleeper sl = { .nshort = 2000, .short_ns = 20000 };
	long long ring_kb = su_read_num(SU_SYSCTL "ring_kb");
	long lost0 = su_counter("lost"), lost1;
	struct su_stream st = { 0 };
	uint64_t outs = 0, lost;
	struct plabel_rec_header *h;
	pthread_t t;
	size_t off;
	int fd;

	NEED_ROOT();
	if (ring_kb < 0 || lost0 < 0)
		SKIP(return, "no ring_kb sysctl or lost counter");
	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	/* the smallest ring, dwarf snapshots, no reader while it runs */
	ASSERT_EQ(0, su_write_num(SU_SYSCTL "ring_kb", 16));
	ASSERT_EQ(0, start(fd, PLABEL_RECORD_OFFCPU, PLABEL_CALLCHAIN_DWARF,
			   0));
	ASSERT_EQ(0, su_write_num(SU_SYSCTL "ring_kb", ring_kb));
	ASSERT_EQ(0, pthread_create(&t, NULL, sleeper_fn, &sl));
	pthread_join(t, NULL);
	ASSERT_EQ(0, su_stop(fd));
	lost1 = su_counter("lost");
	ASSERT_EQ(0, su_drain(fd, &st));
	su_check(&st);
	EXPECT_EQ(0, st.bad) TH_LOG("%s", st.why);
	FOR_EACH_REC(&st, h, off)
		if (h->type == PLABEL_REC_OFFCPU &&
		    ((struct plabel_rec_sample *)h)->tid == (uint32_t)sl.tid)
			outs++;
	lost = su_count(&st, PLABEL_REC_LOST);
	TH_LOG("%llu OFFCPU records of the sleeper, %llu lost, %ld switches",
	       (unsigned long long)outs, (unsigned long long)lost,
	       sl.short_switches);
	EXPECT_LT(0ull, lost);
	/*
	 * nearly each sleep that left the CPU left a record or a count (a
	 * sleep whose timer fired before it got to schedule() did not leave
	 * it, which under an emulated CPU is up to one in seven)
	 */
	EXPECT_LE((unsigned long long)sl.short_switches * 9 / 10, outs + lost);
	/* the stream says what the module counted, no more, no less */
	EXPECT_EQ((unsigned long long)(lost1 - lost0), lost);
	su_stream_free(&st);
	close(fd);
}

TEST_HARNESS_MAIN
