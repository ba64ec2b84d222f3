// SPDX-License-Identifier: GPL-2.0
/*
 * The timeline writer (tools/timeline.c) and the collector feeding it:
 * JSON string escaping (quotes, backslashes, control bytes, bytes that are
 * not UTF-8), on-CPU slices split where the label set changes, off-CPU
 * slices, instant events with their stacks, thread creations as flows,
 * --timeline-label's filter and the bound on observations.
 *
 * Each file written is read back by tests/unit/tools/tl_summary.py
 * (python3's strict json), which also checks that it parses and that
 * every stack frame it names is there, into one line per event; the
 * tests compare those lines.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kselftest/kselftest_harness.h"

#include "../../tools/collect.h"
#include "../../tools/timeline.h"
#include "tools/stream_build.h"

#define SUMMARY		"python3 tests/unit/tools/tl_summary.py "
/* the tests' time unit: a microsecond, as the file counts */
#define US		1000ULL

/* ---- a source of labels and names for the writer alone ---- */

static const struct plabel_prof_label set1[] = {
	{ "endpoint", "/api/users" }, { "tenant", "acme" },
};
static const struct plabel_prof_label set2[] = {
	{ "endpoint", "/api/search" }, { "tenant", "acme" },
};
static const struct plabel_prof_label set3[] = { { "job", "nightly" } };
/* what programs may still put into a value: quotes, \, a newline, 0xff */
static const struct plabel_prof_label set4[] = {
	{ "q\"k", "a\\b\nc\xff\xc3\xa9" },
};

static const struct plabel_prof_label *t_labels(void *ctx, uint64_t id,
						uint32_t *n)
{
	switch (id) {
	case 1:
		*n = 2;
		return set1;
	case 2:
		*n = 2;
		return set2;
	case 3:
		*n = 1;
		return set3;
	case 4:
		*n = 1;
		return set4;
	}
	return NULL;
}

static const char *t_thread(void *ctx, uint32_t tid, uint64_t t)
{
	static char buf[32];

	snprintf(buf, sizeof(buf), "worker-%u", tid);
	return tid == 99 ? NULL : buf;
}

static const char *t_process(void *ctx, uint32_t pid, uint64_t t)
{
	return "server";
}

static const struct plabel_tl_source t_src = {
	.labels = t_labels,
	.thread_name = t_thread,
	.process_name = t_process,
};

static uint64_t t_seq;

static void obs(struct plabel_timeline *tl, uint32_t kind, uint32_t tid,
		uint64_t t_ms, uint64_t end_ms, uint64_t set, uint32_t arg)
{
	struct plabel_tl_obs o = {
		.time_ns = tl->start_ns + t_ms * US,
		.end_ns = tl->start_ns + end_ms * US,
		.set_id = set,
		.seq = t_seq++,
		.pid = 10,
		.tid = tid,
		.kind = kind,
	};

	if (kind == PLABEL_TL_OFFCPU)
		o.wait = arg;
	if (kind == PLABEL_TL_THREAD) {
		o.child_pid = 10;
		o.child_tid = arg;
	}
	if (kind == PLABEL_TL_SAMPLE)
		o.stack = arg;
	plabel_tl_add(tl, &o);
}

/*
 * Write tl (to a gzipped file when gz, else through memory to a plain
 * one) and read its summary into out. 0, or -1 when python3 fails.
 */
static int summarize(struct plabel_timeline *tl, int gz, char *out,
		     size_t cap)
{
	char path[] = "/tmp/plabel-tl-test-XXXXXX", cmd[128];
	size_t len = 0, n;
	char *mem = NULL;
	FILE *f;
	int fd, ret;

	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	if (gz) {
		close(fd);
		ret = plabel_tl_write(tl, &t_src, path, NULL, NULL);
	} else {
		ret = plabel_tl_write(tl, &t_src, NULL, &mem, &len);
		if (!ret && write(fd, mem, len) != (ssize_t)len)
			ret = -EIO;
		close(fd);
		free(mem);
	}
	if (ret) {
		unlink(path);
		return ret;
	}
	snprintf(cmd, sizeof(cmd), SUMMARY "%s", path);
	f = popen(cmd, "r");
	n = f ? fread(out, 1, cap - 1, f) : 0;
	out[n] = 0;
	ret = f && pclose(f) == 0 ? 0 : -1;
	unlink(path);
	return ret;
}

static int have_python3(void)
{
	return system("python3 -c 'import json, gzip' 2>/dev/null") == 0;
}

#define NEED_PYTHON3() do { \
	if (!have_python3()) \
		SKIP(return, "python3 not installed"); \
} while (0)

static char sum[1 << 16];

/* ---- JSON strings ---- */

static void json_of(const char *s, char *out, size_t cap)
{
	char *buf = NULL;
	size_t len = 0, bcap = 0;

	if (plabel_tl_json_str(&buf, &len, &bcap, s) || len >= cap) {
		snprintf(out, cap, "(failed)");
	} else {
		memcpy(out, buf ? buf : "", len);
		out[len] = 0;
	}
	free(buf);
}

TEST(json_string_escaping)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "plain /api/users", "plain /api/users" },
		{ "say \"hi\"", "say \\\"hi\\\"" },
		/* the profiles' \\ for a backslash, each one quoted */
		{ "a\\b", "a\\\\\\\\b" },
		/* control bytes and DEL as the profiles' \xNN text */
		{ "l1\nl2\t\x01\x1f\x7f", "l1\\\\x0al2\\\\x09\\\\x01\\\\x1f\\\\x7f" },
		/* UTF-8 kept as it is */
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
		  "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
		/*
		 * not UTF-8: a stray byte, cut sequences, overlong forms,
		 * a surrogate, past U+10FFFF
		 */
		{ "x\xffy", "x\\\\xffy" },
		{ "\xc3", "\\\\xc3" },
		{ "\xe2\x82", "\\\\xe2\\\\x82" },
		{ "\xc0\xaf", "\\\\xc0\\\\xaf" },
		{ "\xe0\x80\xaf", "\\\\xe0\\\\x80\\\\xaf" },
		{ "\xed\xa0\x80", "\\\\xed\\\\xa0\\\\x80" },
		{ "\xf4\x90\x80\x80", "\\\\xf4\\\\x90\\\\x80\\\\x80" },
		{ "", "" },
	};
	char out[256];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_of(cases[i].in, out, sizeof(out));
		EXPECT_STREQ(cases[i].out, out);
	}
}

/* A whole file with such labels and names parses as strict JSON. */
TEST(hostile_labels_in_a_file)
{
	struct plabel_timeline tl;
	uint32_t f;

	NEED_PYTHON3();
	plabel_tl_init(&tl, 0);
	f = plabel_tl_frame(&tl, 0, "main");
	f = plabel_tl_frame(&tl, f, "odd\"name\\\x01\xfe");
	ASSERT_NE(0, f);
	obs(&tl, PLABEL_TL_SAMPLE, 11, 1, 0, 4, f);
	ASSERT_EQ(0, summarize(&tl, 0, sum, sizeof(sum)));
	EXPECT_NE(NULL, strstr(sum,
		"X 10 11 1.000 0.000 on-CPU "
		"{\"q\\\"k\": \"a\\\\\\\\b\\\\x0ac\\\\xff\\u00e9\"}"))
		TH_LOG("%s", sum);
	EXPECT_NE(NULL, strstr(sum, "i 10 11 1.000 main;odd\"name\\\\\\x01\\xfe"))
		TH_LOG("%s", sum);
	plabel_tl_release(&tl);
}

/* ---- slices ---- */

TEST(slices_split_where_labels_change)
{
	static const char expect[] =
		"M 10 10 process_name server\n"
		"M 10 11 thread_name worker-11\n"
		"X 10 11 1.000 2.000 on-CPU {\"endpoint\": \"/api/users\", \"tenant\": \"acme\"}\n"
		"i 10 11 1.000 main;handle {\"endpoint\": \"/api/users\", \"tenant\": \"acme\"}\n"
		"i 10 11 2.000 main;handle {\"endpoint\": \"/api/users\", \"tenant\": \"acme\"}\n"
		"X 10 11 3.000 2.000 on-CPU {\"endpoint\": \"/api/search\", \"tenant\": \"acme\"}\n"
		"i 10 11 3.000 main {\"endpoint\": \"/api/search\", \"tenant\": \"acme\"}\n"
		"i 10 11 4.000 - {\"endpoint\": \"/api/search\", \"tenant\": \"acme\"}\n"
		"X 10 11 5.000 3.000 off-CPU (sleep) {\"endpoint\": \"/api/search\", \"tenant\": \"acme\"}\n"
		"X 10 11 8.000 1.000 on-CPU {\"endpoint\": \"/api/search\", \"tenant\": \"acme\"}\n"
		"X 10 11 9.000 3.000 on-CPU {}\n"
		"i 10 11 9.000 - {}\n"
		"i 10 11 10.000 - {}\n"
		"X 10 11 12.000 1.000 off-CPU (futex) {}\n"
		"otherData dropped_observations 0\n"
		"otherData max_observations 1000000\n"
		"otherData observations 9\n";
	struct plabel_timeline tl;
	uint32_t fmain, fh;

	NEED_PYTHON3();
	plabel_tl_init(&tl, 0);
	tl.start_ns = 5000 * US;	/* times are relative to it */
	fmain = plabel_tl_frame(&tl, 0, "main");
	fh = plabel_tl_frame(&tl, fmain, "handle");
	ASSERT_EQ(fh, plabel_tl_frame(&tl, fmain, "handle"));
	/* out of order, as CPUs deliver them */
	obs(&tl, PLABEL_TL_SAMPLE, 11, 2, 0, 1, fh);
	obs(&tl, PLABEL_TL_SAMPLE, 11, 1, 0, 1, fh);
	/* the label change: a new slice from here */
	obs(&tl, PLABEL_TL_SAMPLE, 11, 3, 0, 2, fmain);
	obs(&tl, PLABEL_TL_SAMPLE, 11, 4, 0, 2, 0);
	obs(&tl, PLABEL_TL_OFFCPU, 11, 5, 8, 2, PLABEL_WAIT_SLEEP);
	/* after the wait it runs on with its labels, until one shows none */
	obs(&tl, PLABEL_TL_SAMPLE, 11, 9, 0, 0, 0);
	/* 9.5 us: whole microseconds in the file */
	tl.obs[tl.n - 1].time_ns += US / 2;
	obs(&tl, PLABEL_TL_SAMPLE, 11, 10, 0, 0, 0);
	/* a wait right at the end: no on-CPU slice of nothing after it */
	obs(&tl, PLABEL_TL_OFFCPU, 11, 12, 13, 0, PLABEL_WAIT_FUTEX);
	/* left out as the profiles leave it out */
	obs(&tl, PLABEL_TL_SAMPLE, 11, 11, 0, 1, 0);
	tl.obs[tl.n - 1].skip = 1;
	ASSERT_EQ(0, summarize(&tl, 1, sum, sizeof(sum)));
	EXPECT_STREQ(expect, sum);
	plabel_tl_release(&tl);
}

/* Overlapping records (clocks of two CPUs) still give a flat track. */
TEST(slices_never_overlap)
{
	struct plabel_timeline tl;
	char *line;
	double last_end = 0, ts, dur;

	NEED_PYTHON3();
	plabel_tl_init(&tl, 0);
	obs(&tl, PLABEL_TL_SAMPLE, 11, 1, 0, 1, 0);
	obs(&tl, PLABEL_TL_OFFCPU, 11, 2, 6, 1, PLABEL_WAIT_IO);
	/* stamped on another CPU inside the wait */
	obs(&tl, PLABEL_TL_SAMPLE, 11, 4, 0, 2, 0);
	obs(&tl, PLABEL_TL_OFFCPU, 11, 5, 9, 2, PLABEL_WAIT_IO);
	obs(&tl, PLABEL_TL_SAMPLE, 11, 10, 0, 2, 0);
	ASSERT_EQ(0, summarize(&tl, 0, sum, sizeof(sum)));
	for (line = strtok(sum, "\n"); line; line = strtok(NULL, "\n")) {
		if (sscanf(line, "X 10 11 %lf %lf", &ts, &dur) != 2)
			continue;
		EXPECT_LE(last_end, ts) TH_LOG("%s", line);
		last_end = ts + dur;
	}
	EXPECT_EQ(10.0, last_end);
	plabel_tl_release(&tl);
}

/* ---- flows ---- */

TEST(thread_creation_is_a_flow)
{
	struct plabel_timeline tl;

	NEED_PYTHON3();
	plabel_tl_init(&tl, 0);
	obs(&tl, PLABEL_TL_SAMPLE, 11, 1, 0, 1, 0);
	t_seq = 100;
	obs(&tl, PLABEL_TL_THREAD, 11, 2, 0, 1, 12);	/* id 101 */
	obs(&tl, PLABEL_TL_SAMPLE, 12, 3, 0, 1, 0);
	/* a child never seen: no flow to a track that is not there */
	obs(&tl, PLABEL_TL_THREAD, 11, 4, 0, 1, 77);
	/* a child seen before its creation record's stamp */
	obs(&tl, PLABEL_TL_THREAD, 12, 6, 0, 1, 13);	/* id 104 */
	obs(&tl, PLABEL_TL_SAMPLE, 13, 5, 0, 3, 0);
	ASSERT_EQ(0, summarize(&tl, 0, sum, sizeof(sum)));
	EXPECT_NE(NULL, strstr(sum, "s 10 11 2.000 101\n")) TH_LOG("%s", sum);
	EXPECT_NE(NULL, strstr(sum, "f 10 12 3.000 101 bp=e\n"));
	EXPECT_NE(NULL, strstr(sum, "s 10 12 6.000 104\n"));
	EXPECT_NE(NULL, strstr(sum, "f 10 13 6.000 104 bp=e\n"));
	/* the never-seen child's creation (seq 102, flow id 103): no flow */
	EXPECT_EQ(NULL, strstr(sum, " 103\n"));
	EXPECT_EQ(NULL, strstr(sum, " 103 bp=e\n"));
	/* the creation is an observation of the creator: in its slice */
	EXPECT_NE(NULL, strstr(sum, "X 10 11 1.000 3.000 on-CPU {\"endpoint\""));
	EXPECT_NE(NULL, strstr(sum, "M 10 13 thread_name worker-13\n"));
	plabel_tl_release(&tl);
}

/* ---- --timeline-label ---- */

TEST(label_filter_keeps_threads_that_carried_it)
{
	struct plabel_timeline tl;

	NEED_PYTHON3();
	plabel_tl_init(&tl, 0);
	ASSERT_EQ(-EINVAL, plabel_tl_set_focus(&tl, "novalue"));
	ASSERT_EQ(-EINVAL, plabel_tl_set_focus(&tl, "=x"));
	ASSERT_EQ(-EINVAL, plabel_tl_set_focus(&tl, "a\nb=c"));
	ASSERT_EQ(-EINVAL, plabel_tl_set_focus(&tl, "a=b\x7f"));
	ASSERT_EQ(0, plabel_tl_set_focus(&tl, "endpoint=/api/search"));
	/* 11 had it once, among others: all of 11 is kept */
	obs(&tl, PLABEL_TL_SAMPLE, 11, 1, 0, 1, 0);
	obs(&tl, PLABEL_TL_SAMPLE, 11, 2, 0, 2, 0);
	obs(&tl, PLABEL_TL_SAMPLE, 11, 3, 0, 3, 0);
	/* 12 never: left out, with the flow to it */
	obs(&tl, PLABEL_TL_THREAD, 11, 3, 0, 3, 12);
	obs(&tl, PLABEL_TL_SAMPLE, 12, 4, 0, 1, 0);
	/* 13 only in a wait */
	obs(&tl, PLABEL_TL_OFFCPU, 13, 5, 6, 2, PLABEL_WAIT_IO);
	/* 14: a set that never came, and none */
	obs(&tl, PLABEL_TL_SAMPLE, 14, 5, 0, 9, 0);
	obs(&tl, PLABEL_TL_SAMPLE, 14, 6, 0, 0, 0);
	ASSERT_EQ(0, summarize(&tl, 0, sum, sizeof(sum)));
	EXPECT_NE(NULL, strstr(sum, "M 10 11 thread_name worker-11\n"))
		TH_LOG("%s", sum);
	EXPECT_NE(NULL, strstr(sum, "i 10 11 1.000"));
	EXPECT_NE(NULL, strstr(sum, "i 10 11 3.000 - {\"job\": \"nightly\"}"));
	EXPECT_NE(NULL, strstr(sum, "M 10 13 thread_name worker-13\n"));
	EXPECT_NE(NULL, strstr(sum, "X 10 13 5.000 1.000 off-CPU (io)"));
	EXPECT_EQ(NULL, strstr(sum, " 10 12 "));
	EXPECT_EQ(NULL, strstr(sum, " 10 14 "));
	EXPECT_EQ(NULL, strstr(sum, "\ns 10 "));
	EXPECT_NE(NULL, strstr(sum, "otherData timeline_label endpoint\n"));
	EXPECT_NE(NULL, strstr(sum,
			       "otherData timeline_label_value /api/search\n"));

	/* without the filter 14 is there, its missing set named */
	free(tl.focus_key);
	tl.focus_key = NULL;
	ASSERT_EQ(0, summarize(&tl, 0, sum, sizeof(sum)));
	EXPECT_NE(NULL, strstr(sum,
		"i 10 14 5.000 - {\"plabel_unresolved_set\": \"9\"}"))
		TH_LOG("%s", sum);
	EXPECT_NE(NULL, strstr(sum, "s 10 11 3.000"));
	plabel_tl_release(&tl);
}

/* ---- the bound ---- */

TEST(observations_bounded_and_said_so)
{
	struct plabel_timeline tl;
	int i;

	NEED_PYTHON3();
	plabel_tl_init(&tl, 3);
	for (i = 0; i < 5; i++)
		obs(&tl, PLABEL_TL_SAMPLE, 11, i + 1, 0, 1, 0);
	EXPECT_EQ(3, tl.n);
	EXPECT_EQ(2, tl.dropped);
	ASSERT_EQ(0, summarize(&tl, 0, sum, sizeof(sum)));
	EXPECT_NE(NULL, strstr(sum, "otherData dropped_observations 2\n"));
	EXPECT_NE(NULL, strstr(sum, "otherData note timeline cut short: it keeps at most 3 observations"))
		TH_LOG("%s", sum);
	EXPECT_NE(NULL, strstr(sum, "i 10 11 3.000"));
	EXPECT_EQ(NULL, strstr(sum, "i 10 11 4.000"));
	plabel_tl_release(&tl);
}

/* ---- through the collector ---- */

static void c_sample(struct sbuf *b, uint32_t type, uint64_t set,
		     uint32_t tid, uint64_t t_ms, const uint64_t *ips)
{
	struct plabel_rec_sample *s = sb_sample(b, type, set, 10, ips, 0, 1);

	s->tid = tid;
	s->time_ns = 1000 * US + t_ms * US;
}

TEST(collector_feeds_the_timeline)
{
	static const char *const kva[] = { "endpoint", "/a" };
	static const char *const kvb[] = { "endpoint", "/b" };
	uint64_t ips[1] = { 0x401000 };
	struct plabel_prof *profs[PLABEL_PROF_NKINDS];
	struct plabel_rec_sample *th, *oc;
	struct plabel_rec_stream *stream;
	struct plabel_rec_exec *ex;
	struct plabel_syms *syms;
	struct plabel_collect *c;
	struct plabel_timeline tl;
	static struct sbuf b;
	char path[] = "/tmp/plabel-tl-test-XXXXXX", cmd[128];
	FILE *f;
	size_t n, k;
	int fd;

	NEED_PYTHON3();
	syms = plabel_syms_new();
	ASSERT_NE(NULL, syms);
	plabel_tl_init(&tl, 0);
	b.len = 0;
	sb_stream(&b, 10000000);
	stream = (void *)b.data;
	stream->start_ns = 1000 * US;
	sb_labelset(&b, 1, kva, 1);
	sb_labelset(&b, 2, kvb, 1);
	ex = sb_exec(&b, 10, 500 * US);
	memcpy(ex->comm, "app", 4);
	sb_mmap(&b, 10, 0x400000, 0x500000, 0, "/nonexistent/tl/app")->time_ns =
		600 * US;
	sb_comm(&b, 10, 11, 900 * US, "acceptor");
	c_sample(&b, PLABEL_REC_SAMPLE, 1, 11, 1, ips);
	th = sb_sample(&b, PLABEL_REC_THREAD, 1, 10, ips, 0, 1);
	th->tid = 11;
	th->time_ns = 1002 * US;
	th->child_pid = 10;
	th->child_tid = 12;
	sb_comm(&b, 10, 12, 1003 * US, "handler");
	c_sample(&b, PLABEL_REC_SAMPLE, 1, 12, 4, ips);
	c_sample(&b, PLABEL_REC_SAMPLE, 2, 12, 5, ips);
	oc = sb_sample(&b, PLABEL_REC_OFFCPU, 2, 10, ips, 0, 1);
	oc->tid = 12;
	oc->time_ns = 1006 * US;
	oc->wait_kind = PLABEL_WAIT_SLEEP;
	sb_offcpu_end(&b, 10, 12, 1006 * US, 1016 * US);
	c_sample(&b, PLABEL_REC_SAMPLE, 2, 12, 17, ips);

	c = plabel_collect_new(syms, 0);	/* no name labels: names still */
	ASSERT_NE(NULL, c);
	plabel_collect_set_timeline(c, &tl);
	ASSERT_EQ(0, plabel_collect_buffer(c, b.data, b.len));
	ASSERT_EQ(0, plabel_collect_finish(c, 0, 0, profs));
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		plabel_prof_free(profs[k]);
	fd = mkstemp(path);
	ASSERT_LE(0, fd);
	close(fd);
	ASSERT_EQ(0, plabel_collect_write_timeline(c, path));
	snprintf(cmd, sizeof(cmd), SUMMARY "%s", path);
	f = popen(cmd, "r");
	ASSERT_NE(NULL, f);
	n = fread(sum, 1, sizeof(sum) - 1, f);
	sum[n] = 0;
	EXPECT_EQ(0, pclose(f));
	unlink(path);
	EXPECT_NE(NULL, strstr(sum, "M 10 10 process_name app\n"))
		TH_LOG("%s", sum);
	EXPECT_NE(NULL, strstr(sum, "M 10 11 thread_name acceptor\n"));
	EXPECT_NE(NULL, strstr(sum, "M 10 12 thread_name handler\n"));
	/* the file does not exist: FILE+0xOFFSET */
	EXPECT_NE(NULL, strstr(sum, "i 10 11 1.000 app+0x1000 {\"endpoint\": \"/a\"}\n"));
	EXPECT_NE(NULL, strstr(sum, "X 10 12 4.000 1.000 on-CPU {\"endpoint\": \"/a\"}"));
	EXPECT_NE(NULL, strstr(sum, "X 10 12 5.000 1.000 on-CPU {\"endpoint\": \"/b\"}"));
	EXPECT_NE(NULL, strstr(sum, "X 10 12 6.000 10.000 off-CPU (sleep) {\"endpoint\": \"/b\"}"));
	EXPECT_NE(NULL, strstr(sum, "X 10 12 16.000 1.000 on-CPU {\"endpoint\": \"/b\"}"));
	EXPECT_NE(NULL, strstr(sum, "s 10 11 2.000 "));
	EXPECT_NE(NULL, strstr(sum, "f 10 12 4.000 "));
	EXPECT_NE(NULL, strstr(sum, "otherData observations 6\n"));
	plabel_collect_free(c);
	plabel_tl_release(&tl);
	plabel_syms_free(syms);
}

TEST_HARNESS_MAIN
