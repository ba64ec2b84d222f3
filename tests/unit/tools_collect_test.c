// SPDX-License-Identifier: GPL-2.0
/*
 * The collector (tools/collect.c): synthetic record streams into CPU and
 * thread-create profiles, read back through the profile encoder/decoder:
 * label sets, processes and exec generations, /proc fallbacks, weighing
 * by thread CPU time, merging of settled samples, name labels.
 *
 * golden_*: the exact bytes (profile.proto, before gzip) of the profiles
 * built from a few streams, frame-pointer and dwarf style, against the
 * files in tests/unit/tools/golden/. Every address lies in a file that
 * does not exist, so nothing depends on this machine's binaries. After a
 * change meant to alter the output, run the test with
 * PLABEL_GOLDEN_UPDATE=1 (from the top of the tree) to rewrite the files,
 * and say why in the commit.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "kselftest/kselftest_harness.h"

#include "../../tools/collect.h"
#include "../../tools/profile.h"
#include "../../tools/stream.h"
#include "tools/finish.h"
#include "tools/stream_build.h"

#define GOLDEN_DIR	"tests/unit/tools/golden/"
#define GOLDEN_MAX	(1U << 20)

#define G_APP		"/nonexistent/golden/app"
#define G_LIB		"/nonexistent/golden/libc.so.6"
#define G_APP_BASE	0x400000ULL
#define G_LIB_BASE	0x7f0000000000ULL

static const char *const g_kv1[] = { "endpoint", "/api/users",
				     "tenant", "acme" };
static const char *const g_kv2[] = { "job", "nightly" };
static const char *const g_kv4[] = { "thread", "mine" };

/* The bytes profile.proto of p, gunzipped, into buf (GOLDEN_MAX). */
static int golden_raw(const struct plabel_prof *p, uint8_t *buf,
		      size_t *len)
{
	uint8_t *gz;
	size_t gzlen;
	z_stream z;
	int ret;

	ret = plabel_prof_encode(p, &gz, &gzlen);
	if (ret)
		return ret;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		free(gz);
		return -ENOMEM;
	}
	z.next_in = gz;
	z.avail_in = gzlen;
	z.next_out = buf;
	z.avail_out = GOLDEN_MAX;
	ret = inflate(&z, Z_FINISH) == Z_STREAM_END ? 0 : -EBADMSG;
	*len = GOLDEN_MAX - z.avail_out;
	inflateEnd(&z);
	free(gz);
	return ret;
}

/*
 * Compare p's bytes with GOLDEN_DIR/name.pb; with PLABEL_GOLDEN_UPDATE set,
 * write them there instead. 0 when they agree (or were written).
 */
static int golden_check(const struct plabel_prof *p, const char *name)
{
	static uint8_t seen[GOLDEN_MAX], want[GOLDEN_MAX];
	const char *update = getenv("PLABEL_GOLDEN_UPDATE");
	size_t len, wlen;
	char path[256];
	FILE *f;
	int ret;

	ret = golden_raw(p, seen, &len);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), GOLDEN_DIR "%s.pb", name);
	if (update && *update) {
		f = fopen(path, "wb");
		if (!f)
			return -errno;
		ret = fwrite(seen, 1, len, f) == len ? 0 : -EIO;
		if (fclose(f))
			ret = -EIO;
		return ret;
	}
	f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "# %s: %s\n", path, strerror(errno));
		return -ENOENT;
	}
	wlen = fread(want, 1, sizeof(want), f);
	fclose(f);
	if (wlen != len || memcmp(want, seen, len)) {
		fprintf(stderr, "# %s: %zu bytes expected, %zu built%s\n",
			path, wlen, len, wlen == len ? ", different" : "");
		return -EILSEQ;
	}
	return 0;
}

/* A user sample of pid/tid at t_us with CPU time cpu_us and ips. */
static struct plabel_rec_sample *g_sample(struct sbuf *b, uint32_t type,
					  uint64_t set, uint32_t pid,
					  uint32_t tid, uint64_t t_us,
					  uint64_t cpu_us,
					  const uint64_t *ips, uint16_t n)
{
	struct plabel_rec_sample *s;

	s = sb_sample(b, type, set, pid, ips, 0, n);
	s->tid = tid;
	s->time_ns = t_us * 1000;
	if (cpu_us) {
		s->flags |= PLABEL_SAMPLE_CPUTIME;
		s->cpu_ns = cpu_us * 1000;
	}
	return s;
}

static void g_lost(struct sbuf *b, uint32_t kind, uint64_t n)
{
	struct plabel_rec_lost *l = sb_rec(b, PLABEL_REC_LOST, sizeof(*l));

	l->kind = kind;
	l->lost = n;
}

/*
 * Frame-pointer style: two processes (one execs into a new image), label
 * sets before and after their samples and one never sent, thread
 * renames, late samples standing for several periods, thread creations,
 * every kind of loss, merged in two settled batches.
 */
static int feed_fp(struct plabel_collect *c)
{
	static struct sbuf b;
	const uint32_t p1 = 999901, p2 = 999902;
	const uint64_t a = G_APP_BASE, l = G_LIB_BASE;
	uint64_t ips[4][4] = {
		{ a + 0x1010, a + 0x2020, a + 0x3030, l + 0x5000 },
		{ l + 0x1234, a + 0x2024, a + 0x3030, l + 0x5000 },
		{ a + 0x1010, a + 0x2020, a + 0x3034, l + 0x5000 },
		{ a + 0x9000, l + 0x1100 },
	};
	struct plabel_rec_sample *s;
	struct plabel_rec_exec *ex;
	int i, ret;

	b.len = 0;
	sb_stream(&b, 1000000);
	sb_labelset(&b, 1, g_kv1, 2);
	sb_mmap(&b, p1, a, a + 0x80000, 0, G_APP);
	sb_mmap(&b, p1, l, l + 0x100000, 0x1000, G_LIB);
	sb_mmap(&b, p2, a, a + 0x80000, 0, G_APP);
	sb_comm(&b, p1, p1 + 1, 100000, "worker-1");
	for (i = 0; i < 24; i++) {
		s = g_sample(&b, PLABEL_REC_SAMPLE, 1 + i % 3, p1,
			     p1 + 1 + i % 2, 200000 + 1000 * i,
			     1000 + 900 * i, ips[i % 4], i % 4 == 3 ? 2 : 4);
		if (i % 7 == 5)
			s->flags |= 2U << PLABEL_SAMPLE_PERIODS_SHIFT;
		if (i == 9)
			s->flags |= PLABEL_SAMPLE_TRUNC;
	}
	g_sample(&b, PLABEL_REC_THREAD, 2, p1, p1 + 1, 210000, 0, ips[1], 4)
		->child_tid = p1 + 2;
	ret = plabel_collect_buffer(c, b.data, b.len);
	if (!ret)
		ret = plabel_collect_settled(c, 215000000);
	if (ret)
		return ret;

	b.len = 0;
	sb_labelset(&b, 2, g_kv2, 1);
	sb_labelset(&b, 4, g_kv4, 1);
	ex = sb_exec(&b, p2, 300000000);
	ex->tid = p2;
	strcpy(ex->comm, "server");
	sb_mmap(&b, p2, a, a + 0x40000, 0x2000, G_APP ".new")->time_ns =
		300000001;
	sb_comm(&b, p2, p2 + 3, 300000500, "acceptor");
	for (i = 0; i < 16; i++) {
		g_sample(&b, PLABEL_REC_SAMPLE, i % 2 ? 4 : 0, p2,
			 i % 3 ? p2 : p2 + 3, 290000 + 1000 * i,
			 500 + 700 * i, ips[(i + 1) % 4], i % 4 == 2 ? 2 : 4);
	}
	s = g_sample(&b, PLABEL_REC_THREAD, 4, p2, p2, 301000, 0, ips[3], 2);
	s->flags |= PLABEL_THREAD_PROCESS;
	s->child_pid = p2 + 10;
	s->child_tid = p2 + 10;
	g_lost(&b, PLABEL_LOST_RECORDS, 3);
	g_lost(&b, PLABEL_LOST_PERIODS, 5);
	g_lost(&b, PLABEL_LOST_MAPPINGS, 1);
	g_lost(&b, PLABEL_LOST_PROCESSES, 2);
	ret = plabel_collect_buffer(c, b.data, b.len);
	if (!ret)
		ret = plabel_collect_settled(c, 400000000);
	return ret;
}

/*
 * Dwarf style: register and stack snapshots (unwound from the spool at
 * the end; the files do not exist, so each stack is its interrupted ip)
 * and the same thread creations.
 */
static int feed_dwarf(struct plabel_collect *c)
{
	static struct sbuf b;
	const uint32_t pid = 999903;
	const uint64_t a = G_APP_BASE;
	struct plabel_rec_stream *st;
	struct plabel_rec_sample *s;
	uint64_t *p, ip;
	int i, ret;

	b.len = 0;
	st = sb_rec(&b, PLABEL_REC_STREAM, sizeof(*st));
	st->version = PLABEL_REC_VERSION;
	st->callchain = PLABEL_CALLCHAIN_DWARF;
	st->period_ns = 4000000;
	st->ncpus = 2;
	sb_labelset(&b, 1, g_kv1, 2);
	sb_mmap(&b, pid, a, a + 0x80000, 0, G_APP);
	for (i = 0; i < 12; i++) {
		ip = a + 0x1000 + 0x10 * (i % 5);
		s = sb_rec(&b, PLABEL_REC_SAMPLE,
			   sizeof(*s) + 8 + 8 * PLABEL_REGS_NR + 64);
		s->time_ns = 1000000 + 1000 * i;
		s->set_id = i % 3 ? 1 : 0;
		s->pid = pid;
		s->tid = pid + i % 2;
		s->flags = PLABEL_SAMPLE_USER | PLABEL_SAMPLE_REGS |
			   PLABEL_SAMPLE_CPUTIME;
		s->cpu_ns = 3000000ULL * (i + 1);
		s->nr_user = 1;
		s->stack_size = 64;
		p = (uint64_t *)(s + 1);
		p[0] = ip;
		p[1 + PLABEL_REG_RIP] = ip;
		p[1 + PLABEL_REG_RSP] = 0x7ffd00000000ULL + 0x100 * i;
		p[1 + PLABEL_REG_RBP] = 0x7ffd00000040ULL + 0x100 * i;
		memset(p + 1 + PLABEL_REGS_NR, 0x40 + i, 64);
	}
	ret = plabel_collect_buffer(c, b.data, b.len);
	if (!ret)
		ret = plabel_collect_settled(c, 1005000);
	return ret;
}

static void golden_run(struct __test_metadata *_metadata,
		       int (*feed)(struct plabel_collect *), const char *name)
{
	struct plabel_prof *cpu = NULL, *tc = NULL;
	struct plabel_syms *syms;
	struct plabel_collect *c;
	char what[64];

	syms = plabel_syms_new();
	ASSERT_NE(NULL, syms);
	c = plabel_collect_new(syms, PLABEL_COLLECT_PID_LABELS |
				     PLABEL_COLLECT_NAME_LABELS);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, feed(c));
	ASSERT_EQ(0, finish_cpu_tc(c, 1700000000000000000LL,
				   2000000000, &cpu, &tc));
	snprintf(what, sizeof(what), "%s_cpu", name);
	EXPECT_EQ(0, golden_check(cpu, what));
	snprintf(what, sizeof(what), "%s_threadcreate", name);
	EXPECT_EQ(0, golden_check(tc, what));
	plabel_prof_free(cpu);
	plabel_prof_free(tc);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

TEST(golden_fp)
{
	golden_run(_metadata, feed_fp, "fp");
}

TEST(golden_dwarf)
{
	golden_run(_metadata, feed_dwarf, "dwarf");
}

static const char *const kv_a[] = { "worker", "alpha", "tenant", "acme" };
static const char *const kv_b[] = { "worker", "beta" };

/* A function of this binary to find in the profile. */
__attribute__((noinline)) int plabel_test_target(int x);
__attribute__((noinline)) int plabel_test_target(int x)
{
	return x * 3 + 1;
}

static const struct plabel_prof_label *find_label(
	const struct plabel_prof_sample_info *si, const char *key)
{
	size_t i;

	for (i = 0; i < si->nlabels; i++)
		if (!strcmp(si->labels[i].key, key))
			return &si->labels[i];
	return NULL;
}

TEST(aggregate_profiles)
{
	static struct sbuf b;
	struct plabel_prof *cpu, *tc, *back;
	struct plabel_collect_stats st;
	struct plabel_prof_sample_info si;
	struct plabel_prof_location_info li;
	struct plabel_map *maps;
	const struct plabel_map *m;
	struct plabel_syms *syms;
	struct plabel_collect *c;
	uint64_t fn = (uintptr_t)plabel_test_target;
	uint64_t ips[2] = { fn + 1, 0 };
	int64_t alpha = 0, beta = 0, nanos = 0;
	const char *err = NULL;
	uint8_t *enc;
	size_t n, i, enclen;
	int found = 0;

	syms = plabel_syms_new();
	ASSERT_NE(NULL, syms);
	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	m = plabel_maps_find(maps, n, fn);
	ASSERT_NE(NULL, m);

	b.len = 0;
	sb_stream(&b, 2000000);
	/* samples before their label sets: another CPU's ring was later */
	for (i = 0; i < 3; i++)
		sb_sample(&b, PLABEL_REC_SAMPLE, 7, 4242, ips, 0, 1);
	sb_sample(&b, PLABEL_REC_SAMPLE, 9, 4242, ips, 0, 1);
	sb_sample(&b, PLABEL_REC_THREAD, 9, 4242, ips, 0, 1);
	sb_mmap(&b, 4242, m->start, m->end, m->offset, m->path);
	sb_labelset(&b, 7, kv_a, 2);
	sb_labelset(&b, 9, kv_b, 1);
	sb_labelset(&b, 9, kv_b, 1);	/* repeats are fine */
	sb_lost(&b, 2);
	sb_lost(&b, 3);
	sb_rec(&b, 77, 24);		/* unknown */
	plabel_maps_free(maps, n);

	c = plabel_collect_new(syms, 0);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	plabel_collect_stats(c, &st);
	EXPECT_EQ(4, st.samples);
	EXPECT_EQ(1, st.threads);
	EXPECT_EQ(2, st.labelsets);
	EXPECT_EQ(5, st.lost);
	EXPECT_EQ(PLABEL_REC_VERSION, st.version);
	ASSERT_EQ(0, finish_cpu_tc(c, 1, 2, &cpu, &tc));

	/* through the wire format and back */
	ASSERT_EQ(0, plabel_prof_encode(cpu, &enc, &enclen));
	ASSERT_EQ(0, plabel_prof_decode(enc, enclen, &back, &err));
	free(enc);
	EXPECT_EQ(2000000, plabel_prof_period(back));
	for (i = 0; i < plabel_prof_num_samples(back); i++) {
		const struct plabel_prof_label *w;

		plabel_prof_get_sample(back, i, &si);
		w = find_label(&si, "worker");
		ASSERT_NE(NULL, w);
		if (!strcmp(w->value, "alpha")) {
			alpha += si.values[0];
			ASSERT_NE(NULL, find_label(&si, "tenant"));
			EXPECT_STREQ("acme", find_label(&si, "tenant")->value);
		} else {
			EXPECT_STREQ("beta", w->value);
			EXPECT_EQ(NULL, find_label(&si, "tenant"));
			beta += si.values[0];
		}
		nanos += si.values[1];
		ASSERT_EQ(1, si.nlocs);
		ASSERT_EQ(0, plabel_prof_find_location(back, si.loc_ids[0],
						       &li));
		EXPECT_EQ(fn + 1, li.address);
		ASSERT_LE(1, li.nlines);
		EXPECT_STREQ("plabel_test_target",
			     li.lines[li.nlines - 1].function);
	}
	EXPECT_EQ(3, alpha);
	EXPECT_EQ(1, beta);
	EXPECT_EQ(4 * 2000000, nanos);
	for (i = 0; i < plabel_prof_num_comments(back); i++)
		if (!strcmp(plabel_prof_comment(back, i), "lost records: 5"))
			found = 1;
	EXPECT_EQ(1, found);
	plabel_prof_free(back);

	ASSERT_EQ(1, plabel_prof_num_samples(tc));
	plabel_prof_get_sample(tc, 0, &si);
	EXPECT_EQ(1, si.values[0]);
	ASSERT_NE(NULL, find_label(&si, "worker"));
	EXPECT_STREQ("beta", find_label(&si, "worker")->value);

	plabel_prof_free(cpu);
	plabel_prof_free(tc);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

/* A sample of thread tid with set, time t ms, CPU time cpu_us (0: none). */
static void wt_sample(struct sbuf *b, uint64_t set, uint32_t tid,
		      uint64_t t_ms, uint64_t cpu_us, const uint64_t *ips)
{
	struct plabel_rec_sample *s;

	s = sb_sample(b, PLABEL_REC_SAMPLE, set, 10, ips, 0, 1);
	s->tid = tid;
	s->time_ns = t_ms * 1000000;
	if (cpu_us) {
		s->flags |= PLABEL_SAMPLE_CPUTIME;
		s->cpu_ns = cpu_us * 1000;
	}
}

/*
 * A sample stands for the CPU time its thread used since its previous
 * sample, whatever order the CPUs' records come in.
 */
TEST(weigh_by_thread_cpu_time)
{
	static const char *const kv[5][2] = {
		{ "w", "a" }, { "w", "b" }, { "w", "c" }, { "w", "d" },
		{ "w", "e" },
	};
	/* samples and nanoseconds per set 1..5 */
	static const int64_t want_n[5] = { 4, 4, 5, 2, 1 };
	static const int64_t want_ns[5] = {
		33000000, 40000000, 130000000, 12000000, 10000000,
	};
	uint64_t ips[1] = { (uintptr_t)plabel_test_target + 1 };
	int64_t got_n[5] = { 0 }, got_ns[5] = { 0 };
	struct plabel_prof_sample_info si;
	struct plabel_rec_sample *th;
	struct plabel_prof *cpu, *tc;
	struct plabel_syms *syms;
	struct plabel_collect *c;
	static struct sbuf b;
	size_t i;

	syms = plabel_syms_new();
	ASSERT_NE(NULL, syms);
	b.len = 0;
	sb_stream(&b, 10000000);
	for (i = 0; i < 5; i++)
		sb_labelset(&b, 1 + i, kv[i], 1);
	/*
	 * Thread 11 ran before the recording: its first sample stands for
	 * one period (10 ms), then 3, 10 and 10 ms. One CPU's records come
	 * first, then the other's.
	 */
	wt_sample(&b, 1, 11, 110, 503000, ips);
	wt_sample(&b, 1, 11, 130, 523000, ips);
	/*
	 * Thread 12, created at 105 ms: its first sample stands for all its
	 * CPU time (17 ms, more than a period), then 5 + 0 + 18 ms.
	 */
	wt_sample(&b, 2, 12, 135, 22000, ips);
	/* read while the scheduler updated it: lower, not a new thread */
	wt_sample(&b, 2, 12, 136, 21500, ips);
	wt_sample(&b, 2, 12, 150, 40000, ips);
	wt_sample(&b, 1, 11, 100, 500000, ips);
	wt_sample(&b, 1, 11, 120, 513000, ips);
	th = sb_sample(&b, PLABEL_REC_THREAD, 1, 10, ips, 0, 1);
	th->tid = 11;
	th->time_ns = 105000000;
	th->child_pid = 10;
	th->child_tid = 12;
	wt_sample(&b, 2, 12, 125, 17000, ips);
	/*
	 * Thread 13: a period; a reading torn 3 ms high (13 ms), a lower one
	 * (nothing), 7 ms more from the high one; then 100 ms of CPU time in
	 * 10 ms of wall time, as when the scheduler's clock runs ahead of
	 * CLOCK_MONOTONIC: all 100 ms. 10 + 13 + 7 + 100.
	 */
	wt_sample(&b, 3, 13, 200, 1000000, ips);
	wt_sample(&b, 3, 13, 210, 1013000, ips);
	wt_sample(&b, 3, 13, 211, 1011000, ips);
	wt_sample(&b, 3, 13, 220, 1020000, ips);
	wt_sample(&b, 3, 13, 230, 1120000, ips);
	/* tid 14 went to another thread, created unseen: 10 ms, then 2 ms */
	wt_sample(&b, 4, 14, 300, 900000, ips);
	wt_sample(&b, 4, 14, 310, 2000, ips);
	/* a record without the CPU time: one period */
	wt_sample(&b, 5, 15, 400, 0, ips);

	c = plabel_collect_new(syms, 0);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	ASSERT_EQ(0, finish_cpu_tc(c, 0, 0, &cpu, &tc));
	for (i = 0; i < plabel_prof_num_samples(cpu); i++) {
		const struct plabel_prof_label *w;

		plabel_prof_get_sample(cpu, i, &si);
		w = find_label(&si, "w");
		ASSERT_NE(NULL, w);
		ASSERT_LE('a', w->value[0]);
		ASSERT_GE('e', w->value[0]);
		got_n[w->value[0] - 'a'] += si.values[0];
		got_ns[w->value[0] - 'a'] += si.values[1];
	}
	for (i = 0; i < 5; i++) {
		EXPECT_EQ(want_n[i], got_n[i]);
		EXPECT_EQ(want_ns[i], got_ns[i]);
		if (want_ns[i] != got_ns[i])
			TH_LOG("set %zu: %lld ns", i + 1,
			       (long long)got_ns[i]);
	}
	/* a thread creation has no CPU time */
	ASSERT_EQ(1, plabel_prof_num_samples(tc));
	plabel_prof_get_sample(tc, 0, &si);
	EXPECT_EQ(1, si.values[0]);
	plabel_prof_free(cpu);
	plabel_prof_free(tc);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

/* An OFFCPU record of tid (pid 10) leaving at t_ms, kind kind. */
static void oc_out(struct sbuf *b, uint64_t set, uint32_t tid, uint64_t t_ms,
		   uint32_t kind, const uint64_t *ips)
{
	struct plabel_rec_sample *s;

	s = sb_sample(b, PLABEL_REC_OFFCPU, set, 10, ips, 0, 1);
	s->flags = 0;
	s->tid = tid;
	s->time_ns = t_ms * 1000000;
	s->wait_kind = kind;
}

/* A THREADSTATE record of thread tid of pid 10, in state, with set. */
static void ts_rec(struct sbuf *b, uint64_t set, uint32_t tid,
		   uint32_t state, uint32_t kind, const uint64_t *ips)
{
	struct plabel_rec_sample *s;

	s = sb_sample(b, PLABEL_REC_THREADSTATE, set, 10, ips, 0, 1);
	s->flags = 0;
	s->tid = tid;
	s->wait_state = state;
	s->wait_kind = kind;
}

/*
 * THREADSTATE records make the threads profile: one count per thread,
 * with its labels, "state" and, for a waiting thread, "wait"; nothing in
 * the other kinds; an unknown state reads as running.
 */
TEST(threadstate_profile)
{
	static const char *const kva[] = { "job", "reader" };
	uint64_t ips[1] = { (uintptr_t)plabel_test_target + 1 };
	struct plabel_prof *profs[PLABEL_PROF_NKINDS];
	struct plabel_prof_sample_info si;
	struct plabel_collect_stats st;
	struct plabel_syms *syms;
	struct plabel_collect *c;
	static struct sbuf b;
	int io = 0, sleeping = 0, running = 0, total = 0;
	size_t i, k;

	syms = plabel_syms_new();
	ASSERT_NE(NULL, syms);
	b.len = 0;
	sb_labelset(&b, 1, kva, 1);
	ts_rec(&b, 1, 11, PLABEL_THREAD_SLEEPING, PLABEL_WAIT_IO, ips);
	ts_rec(&b, 1, 12, PLABEL_THREAD_SLEEPING, PLABEL_WAIT_IO, ips);
	ts_rec(&b, 0, 13, PLABEL_THREAD_DISK, PLABEL_WAIT_IO, ips);
	/* runnable: no wait label, whatever the kind says */
	ts_rec(&b, 0, 14, PLABEL_THREAD_RUNNING, PLABEL_WAIT_PREEMPTED, ips);
	ts_rec(&b, 0, 15, 77, PLABEL_WAIT_SLEEP, ips);
	c = plabel_collect_new(syms, PLABEL_COLLECT_PID_LABELS);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	plabel_collect_stats(c, &st);
	EXPECT_EQ(5, st.states);
	EXPECT_EQ(0, st.samples);
	ASSERT_EQ(0, plabel_collect_finish(c, 0, 0, profs));
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		if (k != PLABEL_PROF_THREADS)
			EXPECT_EQ(0, plabel_prof_num_samples(profs[k]));
	ASSERT_EQ(1, plabel_prof_num_values(profs[PLABEL_PROF_THREADS]));
	EXPECT_STREQ("threads",
		     plabel_prof_sample_type(profs[PLABEL_PROF_THREADS], 0).type);
	EXPECT_STREQ("count",
		     plabel_prof_sample_type(profs[PLABEL_PROF_THREADS], 0).unit);
	/* one sample a thread: the tids keep them apart */
	EXPECT_EQ(5, plabel_prof_num_samples(profs[PLABEL_PROF_THREADS]));
	for (i = 0; i < plabel_prof_num_samples(profs[PLABEL_PROF_THREADS]);
	     i++) {
		const struct plabel_prof_label *state, *wait, *job;

		plabel_prof_get_sample(profs[PLABEL_PROF_THREADS], i, &si);
		EXPECT_EQ(1, si.values[0]);
		total += si.values[0];
		state = find_label(&si, "state");
		wait = find_label(&si, "wait");
		job = find_label(&si, "job");
		ASSERT_NE(NULL, state);
		if (!strcmp(state->value, "running")) {
			EXPECT_EQ(NULL, wait);
			running++;
			continue;
		}
		ASSERT_NE(NULL, wait);
		EXPECT_STREQ("io", wait->value);
		io++;
		if (!strcmp(state->value, "sleeping")) {
			ASSERT_NE(NULL, job);
			EXPECT_STREQ("reader", job->value);
			sleeping++;
		} else {
			EXPECT_STREQ("disk", state->value);
			EXPECT_EQ(NULL, job);
		}
	}
	EXPECT_EQ(5, total);
	EXPECT_EQ(3, io);
	EXPECT_EQ(2, sleeping);
	EXPECT_EQ(2, running);
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		plabel_prof_free(profs[k]);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

/*
 * OFFCPU records meet their ENDs in either order; one without an END (a
 * short wait) or an END without its OFFCPU record (it was lost) count for
 * nothing; waits go to offcpu.pb.gz by wait kind and to wall.pb.gz with
 * the CPU samples weighed by their CPU time; time preempted to wall.pb.gz
 * only.
 */
TEST(offcpu_joined_and_weighed)
{
	static const char *const kva[] = { "w", "a" };
	static const char *const kvb[] = { "w", "b" };
	uint64_t ips[1] = { (uintptr_t)plabel_test_target + 1 };
	struct plabel_prof *profs[PLABEL_PROF_NKINDS];
	int64_t off_n[2] = { 0 }, off_ns[2] = { 0 }, wall_ns[2] = { 0 };
	int64_t sleep_ns = 0, io_ns = 0, futex_ns = 0;
	struct plabel_prof_sample_info si;
	struct plabel_collect_stats st;
	struct plabel_syms *syms;
	struct plabel_collect *c;
	static struct sbuf b;
	size_t i, k;

	syms = plabel_syms_new();
	ASSERT_NE(NULL, syms);
	b.len = 0;
	sb_stream(&b, 10000000);
	sb_labelset(&b, 1, kva, 1);
	sb_labelset(&b, 2, kvb, 1);
	/* tid 11 (w=a): a period of CPU, then 3 ms more */
	wt_sample(&b, 1, 11, 90, 500000, ips);
	wt_sample(&b, 1, 11, 99, 503000, ips);
	/* 30 ms asleep, OFFCPU first */
	oc_out(&b, 1, 11, 100, PLABEL_WAIT_SLEEP, ips);
	sb_offcpu_end(&b, 10, 11, 100000000, 130000000);
	/* a short wait: no END */
	oc_out(&b, 1, 11, 140, PLABEL_WAIT_IO, ips);
	/* 5 ms in read(): END and OFFCPU in separate buffers, END first */
	sb_offcpu_end(&b, 10, 11, 150000000, 155000000);
	/* tid 12 (w=b): 10 ms on a futex, END first */
	sb_offcpu_end(&b, 10, 12, 200000000, 210000000);
	/* 5 ms preempted: in wall, not in offcpu */
	oc_out(&b, 2, 12, 220, PLABEL_WAIT_PREEMPTED, ips);
	sb_offcpu_end(&b, 10, 12, 220000000, 225000000);
	/* an END whose OFFCPU record was lost */
	sb_offcpu_end(&b, 10, 13, 50000000, 70000000);

	c = plabel_collect_new(syms, 0);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	b.len = 0;
	oc_out(&b, 2, 12, 200, PLABEL_WAIT_FUTEX, ips);
	oc_out(&b, 1, 11, 150, PLABEL_WAIT_IO, ips);
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	plabel_collect_stats(c, &st);
	EXPECT_EQ(4, st.waits);
	ASSERT_EQ(0, plabel_collect_finish(c, 0, 0, profs));

	ASSERT_EQ(2, plabel_prof_num_values(profs[PLABEL_PROF_OFFCPU]));
	i = plabel_prof_default_index(profs[PLABEL_PROF_OFFCPU]);
	EXPECT_STREQ("off-cpu",
		     plabel_prof_sample_type(profs[PLABEL_PROF_OFFCPU], i).type);
	for (i = 0; i < plabel_prof_num_samples(profs[PLABEL_PROF_OFFCPU]);
	     i++) {
		const struct plabel_prof_label *w, *wait;

		plabel_prof_get_sample(profs[PLABEL_PROF_OFFCPU], i, &si);
		w = find_label(&si, "w");
		wait = find_label(&si, "wait");
		ASSERT_NE(NULL, w);
		ASSERT_NE(NULL, wait);
		k = w->value[0] - 'a';
		ASSERT_GT(2u, k);
		off_n[k] += si.values[0];
		off_ns[k] += si.values[1];
		if (!strcmp(wait->value, "sleep"))
			sleep_ns += si.values[1];
		else if (!strcmp(wait->value, "io"))
			io_ns += si.values[1];
		else if (!strcmp(wait->value, "futex"))
			futex_ns += si.values[1];
	}
	EXPECT_EQ(2, off_n[0]);
	EXPECT_EQ(35000000, off_ns[0]);
	EXPECT_EQ(1, off_n[1]);
	EXPECT_EQ(10000000, off_ns[1]);
	EXPECT_EQ(30000000, sleep_ns);
	EXPECT_EQ(5000000, io_ns);
	EXPECT_EQ(10000000, futex_ns);

	/* wall: 10 + 3 ms on the CPU and 35 ms off it; 10 + 5 ms for b */
	ASSERT_EQ(1, plabel_prof_num_values(profs[PLABEL_PROF_WALL]));
	EXPECT_STREQ("wall", plabel_prof_sample_type(profs[PLABEL_PROF_WALL],
						     0).type);
	for (i = 0; i < plabel_prof_num_samples(profs[PLABEL_PROF_WALL]); i++) {
		const struct plabel_prof_label *w;

		plabel_prof_get_sample(profs[PLABEL_PROF_WALL], i, &si);
		w = find_label(&si, "w");
		ASSERT_NE(NULL, w);
		k = w->value[0] - 'a';
		ASSERT_GT(2u, k);
		wall_ns[k] += si.values[0];
	}
	EXPECT_EQ(48000000, wall_ns[0]);
	EXPECT_EQ(15000000, wall_ns[1]);
	/* the CPU profile is as it was: both samples, 13 ms */
	ASSERT_EQ(1, plabel_prof_num_samples(profs[PLABEL_PROF_CPU]));
	plabel_prof_get_sample(profs[PLABEL_PROF_CPU], 0, &si);
	EXPECT_EQ(2, si.values[0]);
	EXPECT_EQ(13000000, si.values[1]);
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		plabel_prof_free(profs[k]);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

/*
 * A thread that left its CPU many times between two reads: one CPU's ring
 * brings all its OFFCPU records before the other's brings their ENDs (a
 * read copies one ring after the other). Every wait is joined, however
 * many of one thread wait for their other halves.
 */
TEST(offcpu_many_waits_of_one_thread_between_reads)
{
	static const char *const kva[] = { "w", "a" };
	uint64_t ips[1] = { (uintptr_t)plabel_test_target + 1 };
	struct plabel_prof *profs[PLABEL_PROF_NKINDS];
	struct plabel_prof_sample_info si;
	struct plabel_collect_stats st;
	struct plabel_syms *syms;
	struct plabel_collect *c;
	static struct sbuf b;
	int64_t off_ns = 0;
	size_t i, k;
	int n;

	syms = plabel_syms_new();
	ASSERT_NE(NULL, syms);
	c = plabel_collect_new(syms, 0);
	ASSERT_NE(NULL, c);
	for (int order = 0; order < 2; order++) {
		uint64_t base = 1000 + 1000 * (uint64_t)order;

		/* 40 waits of 2 ms, 5 ms apart: OFFCPUs first, then ENDs */
		for (int half = 0; half < 2; half++) {
			b.len = 0;
			if (!order)
				sb_stream(&b, 10000000);
			if (!order && !half)
				sb_labelset(&b, 1, kva, 1);
			for (n = 0; n < 40; n++) {
				uint64_t t = base + 5 * (uint64_t)n;

				if (half == order)
					oc_out(&b, 1, 11, t, PLABEL_WAIT_SLEEP,
					       ips);
				else
					sb_offcpu_end(&b, 10, 11, t * 1000000,
						      t * 1000000 + 2000000);
			}
			ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
		}
	}
	plabel_collect_stats(c, &st);
	EXPECT_EQ(80, st.waits);
	ASSERT_EQ(0, plabel_collect_finish(c, 0, 0, profs));
	for (i = 0; i < plabel_prof_num_samples(profs[PLABEL_PROF_OFFCPU]);
	     i++) {
		plabel_prof_get_sample(profs[PLABEL_PROF_OFFCPU], i, &si);
		off_ns += si.values[1];
	}
	EXPECT_EQ(80 * 2000000, off_ns);
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		plabel_prof_free(profs[k]);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

/* Mappings belong to an exec generation: an EXEC ends the earlier ones. */
TEST(aggregate_exec_generations)
{
	static struct sbuf b;
	struct plabel_prof_sample_info si;
	struct plabel_prof_location_info li;
	struct plabel_prof_mapping_info mi;
	struct plabel_prof *cpu, *tc;
	struct plabel_rec_sample *smp;
	struct plabel_collect *c;
	struct plabel_map *maps;
	const struct plabel_map *m;
	struct plabel_syms *syms = plabel_syms_new();
	uint64_t fn = (uintptr_t)plabel_test_target, ips[1] = { fn + 1 };
	size_t n, i, j;
	int before = 0, after = 0;

	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	m = plabel_maps_find(maps, n, fn);
	ASSERT_NE(NULL, m);
	b.len = 0;
	sb_mmap(&b, 5, m->start, m->end, m->offset, m->path)->time_ns = 100;
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, 5, ips, 0, 1);
	smp->time_ns = 150;
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, 5, ips, 0, 1);
	smp->time_ns = 400;
	sb_exec(&b, 5, 200);
	sb_mmap(&b, 5, m->start, m->end, m->offset, "/nonexistent/after")->time_ns = 300;
	plabel_maps_free(maps, n);

	c = plabel_collect_new(syms, 0);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	ASSERT_EQ(0, finish_cpu_tc(c, 0, 0, &cpu, &tc));
	ASSERT_EQ(2, plabel_prof_num_samples(cpu));
	for (i = 0; i < 2; i++) {
		plabel_prof_get_sample(cpu, i, &si);
		ASSERT_EQ(1, si.nlocs);
		ASSERT_EQ(0, plabel_prof_find_location(cpu, si.loc_ids[0], &li));
		for (j = 0; j < plabel_prof_num_mappings(cpu); j++) {
			plabel_prof_get_mapping(cpu, j, &mi);
			if (mi.id != li.mapping_id)
				continue;
			if (!strcmp(mi.file, "/nonexistent/after")) {
				after++;
				EXPECT_EQ(0, li.nlines);
			} else {
				before++;
				ASSERT_LE(1, li.nlines);
				EXPECT_STREQ("plabel_test_target",
					     li.lines[li.nlines - 1].function);
			}
		}
	}
	EXPECT_EQ(1, before);
	EXPECT_EQ(1, after);
	plabel_prof_free(cpu);
	plabel_prof_free(tc);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

/*
 * Samples of prof (counted) whose one frame is named plabel_test_target,
 * and in *other those that are not; -1 if a sample is not one frame.
 */
static int64_t count_named(struct plabel_prof *prof, int64_t *other)
{
	struct plabel_prof_sample_info si;
	struct plabel_prof_location_info li;
	int64_t named = 0;
	size_t i;

	*other = 0;
	for (i = 0; i < plabel_prof_num_samples(prof); i++) {
		plabel_prof_get_sample(prof, i, &si);
		if (si.nlocs != 1 ||
		    plabel_prof_find_location(prof, si.loc_ids[0], &li))
			return -1;
		if (li.nlines && !strcmp(li.lines[li.nlines - 1].function,
					 "plabel_test_target"))
			named += si.values[0];
		else
			*other += si.values[0];
	}
	return named;
}

/* Feed b to a new collector and count_named() the CPU profile; -1 if any fails. */
static int64_t feed_count_named(struct plabel_syms *syms, const struct sbuf *b,
				int64_t *other)
{
	struct plabel_collect *c = plabel_collect_new(syms, 0);
	struct plabel_prof *cpu = NULL, *tc = NULL;
	int64_t named = -1;

	if (c && !plabel_collect_buffer(c, b->data, b->len) &&
	    !finish_cpu_tc(c, 0, 0, &cpu, &tc))
		named = count_named(cpu, other);
	plabel_prof_free(cpu);
	plabel_prof_free(tc);
	plabel_collect_free(c);
	return named;
}

/*
 * /proc/PID/maps stands in for the kernel's mapping records only when a
 * process image still has none once its buffer is fed, and only for the
 * newest image, the one /proc shows.
 */
TEST(proc_maps_only_when_the_kernel_gave_none)
{
	static struct sbuf b;
	struct plabel_collect_stats st;
	struct plabel_prof *cpu, *tc;
	struct plabel_rec_sample *smp;
	struct plabel_collect *c;
	struct plabel_map *maps;
	const struct plabel_map *m;
	struct plabel_syms *syms = plabel_syms_new();
	uint64_t fn = (uintptr_t)plabel_test_target, ips[1] = { fn + 1 };
	uint32_t pid = getpid();
	size_t n, i;
	int comment = 0;
	int64_t other;

	ASSERT_EQ(0, plabel_maps_read_proc(syms, pid, &maps, &n));
	m = plabel_maps_find(maps, n, fn);
	ASSERT_NE(NULL, m);
	c = plabel_collect_new(syms, PLABEL_COLLECT_PROC_MAPS);
	ASSERT_NE(NULL, c);

	/* the sample before its image's mapping record, in one buffer */
	b.len = 0;
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, pid, ips, 0, 1);
	smp->time_ns = 100;
	sb_mmap(&b, pid, m->start, m->end, m->offset, m->path);
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	plabel_collect_stats(c, &st);
	EXPECT_EQ(0, st.proc_maps);

	/* an image that is no longer the process's by the buffer's end */
	b.len = 0;
	sb_exec(&b, pid, 200);
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, pid, ips, 0, 1);
	smp->time_ns = 300;
	sb_exec(&b, pid, 400);
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	plabel_collect_stats(c, &st);
	EXPECT_EQ(0, st.proc_maps);

	/* the newest image, and no record for it: from /proc, once */
	b.len = 0;
	for (i = 0; i < 2; i++) {
		smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, pid, ips, 0, 1);
		smp->time_ns = 500 + i;
	}
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	plabel_collect_stats(c, &st);
	EXPECT_EQ(1, st.proc_maps);

	/* record -- CMD's child before its exec: /proc would show CMD */
	plabel_collect_skip_before_exec(c, getppid());
	b.len = 0;
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, getppid(), ips, 0, 1);
	smp->time_ns = 600;
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	plabel_collect_stats(c, &st);
	EXPECT_EQ(1, st.proc_maps);
	plabel_maps_free(maps, n);

	ASSERT_EQ(0, finish_cpu_tc(c, 0, 0, &cpu, &tc));
	/* first image (its record) and newest (/proc) resolve; the middle not */
	EXPECT_EQ(5, count_named(cpu, &other));
	EXPECT_EQ(2, other);
	for (i = 0; i < plabel_prof_num_comments(cpu); i++)
		if (!strcmp(plabel_prof_comment(cpu, i),
			    "process images mapped from /proc, not the kernel's records: 1"))
			comment = 1;
	EXPECT_EQ(1, comment);
	plabel_prof_free(cpu);
	plabel_prof_free(tc);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

/* Thousands of processes (record -a on a busy machine), each its own. */
TEST(many_processes)
{
	static struct sbuf b;
	struct plabel_prof_sample_info si;
	struct plabel_prof_location_info li;
	struct plabel_collect_stats st;
	struct plabel_prof *cpu, *tc;
	struct plabel_collect *c;
	struct plabel_map *maps;
	const struct plabel_map *m;
	struct plabel_syms *syms = plabel_syms_new();
	uint64_t fn = (uintptr_t)plabel_test_target, ips[1] = { fn + 1 };
	static uint8_t seen[3000];
	size_t n, i, j, total = 0;
	uint32_t pid;

	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	m = plabel_maps_find(maps, n, fn);
	ASSERT_NE(NULL, m);
	c = plabel_collect_new(syms, PLABEL_COLLECT_PID_LABELS);
	ASSERT_NE(NULL, c);
	for (pid = 100000; pid < 103000; pid++) {
		if (b.len > sizeof(b.data) - 512) {
			ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
			b.len = 0;
		}
		sb_mmap(&b, pid, m->start, m->end, m->offset, m->path);
		sb_sample(&b, PLABEL_REC_SAMPLE, 0, pid, ips, 0, 1);
		/* the first process's samples among the others' */
		if (pid % 1000 == 0)
			sb_sample(&b, PLABEL_REC_SAMPLE, 0, 100000, ips, 0, 1);
	}
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	plabel_maps_free(maps, n);
	plabel_collect_stats(c, &st);
	EXPECT_EQ(3003, st.samples);

	ASSERT_EQ(0, finish_cpu_tc(c, 0, 0, &cpu, &tc));
	ASSERT_EQ(3000, plabel_prof_num_samples(cpu));
	for (i = 0; i < plabel_prof_num_samples(cpu); i++) {
		plabel_prof_get_sample(cpu, i, &si);
		for (j = 0; j < si.nnumlabels; j++) {
			if (strcmp(si.numlabels[j].key, "pid"))
				continue;
			pid = si.numlabels[j].num;
			ASSERT_LE(100000, pid);
			ASSERT_GT(103000, pid);
			EXPECT_EQ(0, seen[pid - 100000]);
			seen[pid - 100000] = 1;
			EXPECT_EQ(pid == 100000 ? 4 : 1, si.values[0]);
		}
		total += si.values[0];
		ASSERT_EQ(1, si.nlocs);
		ASSERT_EQ(0, plabel_prof_find_location(cpu, si.loc_ids[0], &li));
		ASSERT_LE(1, li.nlines);
		EXPECT_STREQ("plabel_test_target", li.lines[li.nlines - 1].function);
	}
	EXPECT_EQ(3003, total);
	for (i = 0; i < 3000; i++)
		EXPECT_EQ(1, seen[i]);
	plabel_prof_free(cpu);
	plabel_prof_free(tc);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

/* An EXEC read after mapping records stamped later (another CPU's ring). */
TEST(exec_read_after_its_mappings)
{
	static struct sbuf b;
	struct plabel_rec_sample *smp;
	struct plabel_map *maps;
	const struct plabel_map *m;
	struct plabel_syms *syms = plabel_syms_new();
	uint64_t fn = (uintptr_t)plabel_test_target, ips[1] = { fn + 1 };
	int64_t other;
	size_t n;

	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	m = plabel_maps_find(maps, n, fn);
	ASSERT_NE(NULL, m);
	b.len = 0;
	/* CPU 0's ring: the old image's mapping (elsewhere), the new one's */
	sb_mmap(&b, 7, m->start - 0x10000, m->start, 0, "/nonexistent/before")->time_ns = 100;
	sb_mmap(&b, 7, m->start, m->end, m->offset, m->path)->time_ns = 300;
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, 7, ips, 0, 1);
	smp->time_ns = 150;
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, 7, ips, 0, 1);
	smp->time_ns = 400;
	/* CPU 1's ring: the exec between them */
	sb_exec(&b, 7, 200);
	plabel_maps_free(maps, n);

	/* the sample after the exec is named from the new image's mapping */
	EXPECT_EQ(1, feed_count_named(syms, &b, &other));
	EXPECT_EQ(1, other);
	plabel_syms_free(syms);
}

/*
 * A mapping reported before and after an exec read later (a sample taken
 * while exec set up the new image, stamped before the EXEC record): it is
 * the new image's too.
 */
TEST(mapping_reported_across_an_exec)
{
	static struct sbuf b;
	struct plabel_rec_sample *smp;
	struct plabel_map *maps;
	const struct plabel_map *m;
	struct plabel_syms *syms = plabel_syms_new();
	uint64_t fn = (uintptr_t)plabel_test_target, ips[1] = { fn + 1 };
	int64_t other;
	size_t n, i;

	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	m = plabel_maps_find(maps, n, fn);
	ASSERT_NE(NULL, m);
	b.len = 0;
	sb_mmap(&b, 8, m->start, m->end, m->offset, m->path)->time_ns = 150;
	sb_mmap(&b, 8, m->start, m->end, m->offset, m->path)->time_ns = 300;
	for (i = 0; i < 2; i++) {
		smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, 8, ips, 0, 1);
		smp->time_ns = i ? 400 : 120;
	}
	sb_exec(&b, 8, 200);
	plabel_maps_free(maps, n);

	/* before the exec (its record at 150) and after it (at 300) */
	EXPECT_EQ(2, feed_count_named(syms, &b, &other));
	EXPECT_EQ(0, other);
	plabel_syms_free(syms);
}

/* record -- CMD: the held child's samples before its exec are plabel's */
TEST(aggregate_skip_before_exec)
{
	static struct sbuf b;
	struct plabel_prof *cpu, *tc;
	struct plabel_rec_sample *smp;
	struct plabel_collect *c;
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_prof_sample_info si;
	uint64_t ips[1] = { 0x1000 };

	b.len = 0;
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, 8, ips, 0, 1);
	smp->time_ns = 10;
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, 8, ips, 0, 1);
	smp->time_ns = 30;
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, 9, ips, 0, 1);
	smp->time_ns = 10;
	sb_exec(&b, 8, 20);
	c = plabel_collect_new(syms, PLABEL_COLLECT_PID_LABELS);
	ASSERT_NE(NULL, c);
	plabel_collect_skip_before_exec(c, 8);
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	ASSERT_EQ(0, finish_cpu_tc(c, 0, 0, &cpu, &tc));
	/* pid 8 after its exec, and pid 9 */
	EXPECT_EQ(2, plabel_prof_num_samples(cpu));
	plabel_prof_get_sample(cpu, 0, &si);
	EXPECT_EQ(1, si.values[0]);
	plabel_prof_get_sample(cpu, 1, &si);
	EXPECT_EQ(1, si.values[0]);
	plabel_prof_free(cpu);
	plabel_prof_free(tc);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

TEST(aggregate_unresolved_set_is_visible)
{
	static struct sbuf b;
	struct plabel_prof_sample_info si;
	struct plabel_prof *cpu, *tc;
	struct plabel_collect *c;
	struct plabel_syms *syms = plabel_syms_new();
	uint64_t ips[1] = { 0x1000 };

	b.len = 0;
	sb_sample(&b, PLABEL_REC_SAMPLE, 12345, 1, ips, 0, 1);
	c = plabel_collect_new(syms, 0);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	ASSERT_EQ(0, finish_cpu_tc(c, 0, 0, &cpu, &tc));
	ASSERT_EQ(1, plabel_prof_num_samples(cpu));
	plabel_prof_get_sample(cpu, 0, &si);
	ASSERT_EQ(1, si.nlabels);
	EXPECT_STREQ("plabel_unresolved_set", si.labels[0].key);
	EXPECT_STREQ("12345", si.labels[0].value);
	EXPECT_EQ(0, plabel_prof_num_samples(tc));
	plabel_prof_free(cpu);
	plabel_prof_free(tc);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

TEST(collect_stops_at_corrupt_buffer)
{
	static struct sbuf b;
	struct plabel_collect_stats st;
	struct plabel_collect *c;
	struct plabel_rec_header *h;
	struct plabel_syms *syms = plabel_syms_new();
	uint64_t ips[1] = { 0x1000 };

	b.len = 0;
	sb_sample(&b, PLABEL_REC_SAMPLE, 0, 1, ips, 0, 1);
	h = sb_rec(&b, PLABEL_REC_SAMPLE, 64);
	h->size = 1 << 20;
	sb_sample(&b, PLABEL_REC_SAMPLE, 0, 1, ips, 0, 1);
	c = plabel_collect_new(syms, 0);
	ASSERT_NE(NULL, c);
	EXPECT_EQ(-EBADMSG, plabel_collect_buffer(c, b.data, b.len));
	plabel_collect_stats(c, &st);
	EXPECT_EQ(1, st.samples);
	EXPECT_EQ(1, st.bad);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

/*
 * A long stream fed as `plabel record` feeds it: in read()-sized chunks,
 * each followed by the time before which every record is in. Samples
 * interleave three processes, two threads each, three label sets and
 * seven addresses, slightly out of time order; pid 100 (the command
 * record runs) execs early; pid 200 execs just before the first batch is
 * merged and its EXEC arrives after 3000 later samples, after that merge
 * but before the settled time passes its own.
 */
#define MS_N		150000
#define MS_T(i)		(10000 + 10 * (uint64_t)(i) + ((i) % 3 == 1 ? 25 : 0))
#define MS_PID(i)	(100 + 100 * ((i) % 3))
#define MS_EXEC100	3000
#define MS_EXEC200	64000
#define MS_LATE		3000
#define MS_LAG		4000

/*
 * What merged and unmerged profiles must both hold. Each sample carries
 * its thread's CPU time, here equal to its own time (a thread alone on its
 * CPU): it weighs the time since its thread's previous sample.
 */
struct ms_sums {
	int64_t by[3][2][3];	/* pid, after pid 200's exec, label set */
	int64_t nanos[3][2][3];
	int64_t addr[7];
	int64_t total;
};

#define MS_TID(i)	(MS_PID(i) + ((i) / 3) % 2)

static void ms_expect(struct ms_sums *e)
{
	uint64_t last[3][2] = { { 0 } };
	size_t i;

	memset(e, 0, sizeof(*e));
	for (i = 0; i < MS_N; i++) {
		uint32_t pid = MS_PID(i);
		int after = pid == 200 && MS_T(i) >= MS_T(MS_EXEC200);
		uint64_t *l = &last[pid / 100 - 1][MS_TID(i) - pid];
		/* first: at most a period (10 ms, there is no STREAM) */
		int64_t w = MS_T(i) - *l;

		*l = MS_T(i);
		if (pid == 100 && MS_T(i) < MS_T(MS_EXEC100))
			continue;
		e->by[pid / 100 - 1][after][i % 5 % 3]++;
		e->nanos[pid / 100 - 1][after][i % 5 % 3] += w;
		e->addr[i % 7]++;
		e->total++;
	}
}

static void ms_sums(struct plabel_prof *p, uint64_t fn, struct ms_sums *g)
{
	struct plabel_prof_sample_info si;
	struct plabel_prof_location_info li;
	struct plabel_prof_mapping_info mi;
	size_t i, j;

	memset(g, 0, sizeof(*g));
	for (i = 0; i < plabel_prof_num_samples(p); i++) {
		const struct plabel_prof_label *w;
		int64_t pid = 0, after = 0;

		plabel_prof_get_sample(p, i, &si);
		for (j = 0; j < si.nnumlabels; j++)
			if (!strcmp(si.numlabels[j].key, "pid"))
				pid = si.numlabels[j].num;
		w = find_label(&si, "worker");
		if (pid < 100 || pid > 300 || !w || si.nlocs != 1 ||
		    plabel_prof_find_location(p, si.loc_ids[0], &li) ||
		    li.address < fn + 1 || li.address > fn + 7)
			continue;	/* counted in total only: a mismatch */
		for (j = 0; j < plabel_prof_num_mappings(p); j++) {
			plabel_prof_get_mapping(p, j, &mi);
			if (mi.id == li.mapping_id &&
			    !strcmp(mi.file, "/nonexistent/after"))
				after = 1;
		}
		g->by[pid / 100 - 1][after][w->value[0] - 'a'] += si.values[0];
		g->nanos[pid / 100 - 1][after][w->value[0] - 'a'] +=
			si.values[1];
		g->addr[li.address - fn - 1] += si.values[0];
	}
	for (i = 0; i < plabel_prof_num_samples(p); i++) {
		plabel_prof_get_sample(p, i, &si);
		g->total += si.values[0];
	}
}

static struct plabel_collect *ms_feed(struct plabel_syms *syms,
				      const struct plabel_map *m, int settle,
				      uint64_t *max_held)
{
	static const char *const sets[3][2] = {
		{ "worker", "a" }, { "worker", "b" }, { "worker", "c" },
	};
	static struct sbuf b;
	struct plabel_collect_stats st;
	struct plabel_collect *c;
	struct plabel_rec_sample *smp;
	struct plabel_rec_exec *ex;
	uint64_t fn = (uintptr_t)plabel_test_target, ip;
	size_t i;
	uint32_t pid;

	c = plabel_collect_new(syms, PLABEL_COLLECT_PID_LABELS);
	if (!c)
		return NULL;
	plabel_collect_skip_before_exec(c, 100);
	*max_held = 0;
	b.len = 0;
	for (pid = 100; pid <= 300; pid += 100)
		sb_mmap(&b, pid, m->start, m->end, m->offset, m->path);
	for (i = 0; i < MS_N; i++) {
		pid = MS_PID(i);
		ip = fn + 1 + i % 7;
		smp = sb_sample(&b, PLABEL_REC_SAMPLE, 1 + i % 5 % 3, pid,
				&ip, 0, 1);
		smp->time_ns = MS_T(i);
		smp->tid = MS_TID(i);
		smp->flags |= PLABEL_SAMPLE_CPUTIME;
		smp->cpu_ns = MS_T(i);
		if (i == MS_EXEC100 || i == MS_EXEC200 + MS_LATE) {
			pid = i == MS_EXEC100 ? 100 : 200;
			ex = sb_exec(&b, pid,
				     MS_T(i == MS_EXEC100 ? i : MS_EXEC200));
			sb_mmap(&b, pid, m->start, m->end, m->offset,
				pid == 100 ? m->path : "/nonexistent/after")
				->time_ns = ex->time_ns + 1;
		}
		if (b.len > sizeof(b.data) - 512 || i == MS_N - 1) {
			if (plabel_collect_buffer(c, b.data, b.len))
				goto fail;
			b.len = 0;
			/* a read() went round every ring MS_LAG samples ago */
			if (settle && i > MS_LAG &&
			    plabel_collect_settled(c, MS_T(i - MS_LAG)))
				goto fail;
			plabel_collect_stats(c, &st);
			if (st.held > *max_held)
				*max_held = st.held;
		}
	}
	for (i = 0; i < 3; i++)
		sb_labelset(&b, 1 + i, sets[i], 1);
	if (plabel_collect_buffer(c, b.data, b.len))
		goto fail;
	return c;
fail:
	plabel_collect_free(c);
	return NULL;
}

TEST(merge_settled_samples)
{
	uint64_t fn = (uintptr_t)plabel_test_target, held[2];
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_collect_stats st[2];
	struct plabel_prof *cpu[2], *tc[2];
	struct ms_sums want, got;
	struct plabel_collect *c;
	struct plabel_map *maps;
	const struct plabel_map *m;
	size_t n, i;
	int k;

	ASSERT_NE(NULL, syms);
	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	m = plabel_maps_find(maps, n, fn);
	ASSERT_NE(NULL, m);
	ms_expect(&want);
	ASSERT_LT(0, want.by[1][1][0]);	/* the test covers both images */
	ASSERT_LT(0, want.by[1][0][2]);
	for (k = 0; k < 2; k++) {
		c = ms_feed(syms, m, k, &held[k]);
		ASSERT_NE(NULL, c);
		plabel_collect_stats(c, &st[k]);
		ASSERT_EQ(0, finish_cpu_tc(c, 0, 0, &cpu[k], &tc[k]));
		plabel_collect_free(c);
		ms_sums(cpu[k], fn, &got);
		EXPECT_EQ(0, memcmp(&want, &got, sizeof(want)));
		if (memcmp(&want, &got, sizeof(want)))
			TH_LOG("%s: total %lld, want %lld",
			       k ? "merged" : "unmerged",
			       (long long)got.total, (long long)want.total);
		EXPECT_EQ(0, st[k].late);
	}
	EXPECT_EQ(MS_N, st[0].samples);
	EXPECT_EQ(MS_N, st[1].samples);
	/* unmerged: every sample held; merged: a batch and the last MS_LAG */
	EXPECT_EQ(MS_N, held[0]);
	EXPECT_EQ(0, st[0].merged);
	EXPECT_GT(65536 + MS_LAG + 1100, held[1]);
	/* 3 pids x 2 tids x 3 sets x 7 addresses x 2 images at most */
	EXPECT_LT(0, st[1].merged);
	EXPECT_GE(3 * 2 * 3 * 7 * 2, st[1].merged);
	/* the same profile, to the number of samples in it */
	EXPECT_EQ(plabel_prof_num_samples(cpu[0]),
		  plabel_prof_num_samples(cpu[1]));
	for (i = 0; i < 2; i++) {
		plabel_prof_free(cpu[i]);
		plabel_prof_free(tc[i]);
	}
	plabel_maps_free(maps, n);
	plabel_syms_free(syms);
}

/* An EXEC older than the settled time is not lost: it is counted, said. */
TEST(merge_late_exec_is_visible)
{
	static struct sbuf b;
	struct plabel_collect_stats st;
	struct plabel_prof *cpu, *tc;
	struct plabel_collect *c;
	struct plabel_syms *syms = plabel_syms_new();
	uint64_t ips[1] = { 0x1000 };
	size_t i;
	int found = 0;

	c = plabel_collect_new(syms, 0);
	ASSERT_NE(NULL, c);
	for (i = 0; i < 70000; i++) {
		if (b.len > sizeof(b.data) - 512) {
			ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
			b.len = 0;
		}
		sb_sample(&b, PLABEL_REC_SAMPLE, 0, 1, ips, 0, 1)->time_ns =
			100 + i;
	}
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	ASSERT_EQ(0, plabel_collect_settled(c, 1000000));
	plabel_collect_stats(c, &st);
	EXPECT_EQ(0, st.held);
	EXPECT_EQ(1, st.merged);
	b.len = 0;
	sb_exec(&b, 1, 500);
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	plabel_collect_stats(c, &st);
	EXPECT_EQ(1, st.late);
	ASSERT_EQ(0, finish_cpu_tc(c, 0, 0, &cpu, &tc));
	ASSERT_EQ(1, plabel_prof_num_samples(cpu));
	for (i = 0; i < plabel_prof_num_comments(cpu); i++)
		if (!strcmp(plabel_prof_comment(cpu, i),
			    "exec records after their time was settled: 1"))
			found = 1;
	EXPECT_EQ(1, found);
	plabel_prof_free(cpu);
	plabel_prof_free(tc);
	plabel_collect_free(c);
	plabel_syms_free(syms);
}

/* Value of string label key in sample si, or "" when it has none. */
static const char *label_of(const struct plabel_prof_sample_info *si,
			    const char *key)
{
	size_t i;

	for (i = 0; i < si->nlabels; i++)
		if (!strcmp(si->labels[i].key, key))
			return si->labels[i].value;
	return "";
}

/*
 * process and thread labels from EXEC and COMM records: the exec names
 * the process and its thread, a rename the thread from its time on, a
 * program's own "thread" label wins; off without the flag. The pid does
 * not exist, so /proc has nothing to add.
 */
TEST(name_labels_from_exec_and_comm)
{
	static const char *const kv_t[] = { "thread", "mine" };
	static struct sbuf b;
	const uint32_t pid = 999990, tid = pid + 1;
	struct plabel_prof *cpu, *tc;
	struct plabel_rec_sample *smp;
	struct plabel_prof_sample_info si;
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_rec_exec *ex;
	struct plabel_collect *c;
	uint64_t ips[1] = { 0x1000 };
	int seen = 0, flags, dec;
	size_t i;

	b.len = 0;
	ex = sb_exec(&b, pid, 5);
	memcpy(ex->comm, "app", 4);
	ex->tid = tid;
	sb_comm(&b, pid, tid, 20, "worker-a");
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, pid, ips, 0, 1);
	smp->time_ns = 10;
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 0, pid, ips, 0, 1);
	smp->time_ns = 30;
	sb_labelset(&b, 5, kv_t, 1);
	smp = sb_sample(&b, PLABEL_REC_SAMPLE, 5, pid, ips, 0, 1);
	smp->time_ns = 40;
	ASSERT_EQ(0, decode_all(b.data, b.len, &dec));
	EXPECT_EQ(6, dec);
	for (flags = PLABEL_COLLECT_NAME_LABELS; flags >= 0;
	     flags -= PLABEL_COLLECT_NAME_LABELS) {
		c = plabel_collect_new(syms, flags);
		ASSERT_NE(NULL, c);
		ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
		ASSERT_EQ(0, finish_cpu_tc(c, 0, 0, &cpu, &tc));
		/* without names, the two unlabeled samples are one */
		ASSERT_EQ(flags ? 3 : 2, plabel_prof_num_samples(cpu));
		for (i = 0; i < plabel_prof_num_samples(cpu); i++) {
			const char *t;

			plabel_prof_get_sample(cpu, i, &si);
			t = label_of(&si, "thread");
			EXPECT_STREQ(flags ? "app" : "",
				     label_of(&si, "process"));
			if (!strcmp("mine", t))
				seen |= 4;	/* the program's own wins */
			else if (!strcmp("app", t))
				seen |= 1;	/* at 10: named by the exec */
			else if (!strcmp("worker-a", t))
				seen |= 2;	/* at 30: renamed at 20 */
			else
				EXPECT_STREQ("", t);
		}
		EXPECT_EQ(flags ? 7 : 4, seen);
		seen = 0;
		plabel_prof_free(cpu);
		plabel_prof_free(tc);
		plabel_collect_free(c);
	}
	/* a COMM record of the wrong size is malformed */
	b.len = 0;
	sb_rec(&b, PLABEL_REC_COMM, sizeof(struct plabel_rec_comm) - 8);
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &dec));
	plabel_syms_free(syms);
}

/*
 * Two CPUs, samples on CPU 0 only: without SYNC records for CPU 1 the
 * watermark never passes and every sample stays held until the caller's
 * settled time says; with them, samples are merged as CPU 1's SYNC times
 * pass, and the profile is the same.
 */
#define SY_N	100000

static struct plabel_collect *sy_feed(struct plabel_syms *syms, int syncs,
				      uint64_t *max_held)
{
	static struct sbuf b;
	struct plabel_collect_stats st;
	struct plabel_rec_stream *sr;
	struct plabel_rec_sample *smp;
	struct plabel_rec_sync *y;
	struct plabel_collect *c;
	uint64_t ip;
	size_t i;

	c = plabel_collect_new(syms, 0);
	if (!c)
		return NULL;
	*max_held = 0;
	b.len = 0;
	sr = sb_rec(&b, PLABEL_REC_STREAM, sizeof(*sr));
	sr->version = PLABEL_REC_VERSION;
	sr->period_ns = 1000000;
	sr->ncpus = 2;
	sb_labelset(&b, 1, (const char *const[]){ "k", "v" }, 1);
	for (i = 0; i < SY_N; i++) {
		ip = 0x400000 + 16 * (i % 50);
		smp = sb_sample(&b, PLABEL_REC_SAMPLE, 1, 100, &ip, 0, 1);
		smp->time_ns = 1000 + 10 * i;
		smp->cpu = 0;
		if (syncs && i % 1000 == 999) {
			/* a read() found CPU 1's ring empty */
			y = sb_rec(&b, PLABEL_REC_SYNC, sizeof(*y));
			y->cpu = 1;
			y->time_ns = smp->time_ns - 500;
		}
		if (b.len > sizeof(b.data) - 512 || i == SY_N - 1) {
			if (plabel_collect_buffer(c, b.data, b.len) ||
			    plabel_collect_settled(c, 0))
				goto fail;
			b.len = 0;
			plabel_collect_stats(c, &st);
			if (st.held > *max_held)
				*max_held = st.held;
		}
	}
	return c;
fail:
	plabel_collect_free(c);
	return NULL;
}

TEST(sync_records_settle_an_idle_cpu)
{
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_collect_stats st[2];
	struct plabel_prof *cpu[2], *tc[2];
	struct plabel_collect *c;
	uint64_t held[2];
	int k;

	ASSERT_NE(NULL, syms);
	for (k = 0; k < 2; k++) {
		c = sy_feed(syms, k, &held[k]);
		ASSERT_NE(NULL, c);
		plabel_collect_stats(c, &st[k]);
		ASSERT_EQ(0, finish_cpu_tc(c, 0, 0, &cpu[k], &tc[k]));
		plabel_collect_free(c);
		EXPECT_EQ(SY_N, st[k].samples);
	}
	TH_LOG("most samples held: %llu without SYNC, %llu with",
	       (unsigned long long)held[0], (unsigned long long)held[1]);
	EXPECT_EQ(SY_N, held[0]);
	EXPECT_EQ(0, st[0].merged);
	EXPECT_LT(0, st[1].merged);
	EXPECT_GT(16384 + 2000 + 1100, held[1]);
	EXPECT_EQ(plabel_prof_num_samples(cpu[0]),
		  plabel_prof_num_samples(cpu[1]));
	for (k = 0; k < 2; k++) {
		plabel_prof_free(cpu[k]);
		plabel_prof_free(tc[k]);
	}
	plabel_syms_free(syms);
}

TEST_HARNESS_MAIN
