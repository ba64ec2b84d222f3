// SPDX-License-Identifier: GPL-2.0
/*
 * The collector (tools/collect.c): synthetic record streams into CPU and
 * thread-create profiles.
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

TEST_HARNESS_MAIN
