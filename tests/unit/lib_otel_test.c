// SPDX-License-Identifier: GPL-2.0
/*
 * libplabel's OpenTelemetry thread context (OTEP 4947) and process context
 * (OTEP 4719), without the module: records byte for byte against the
 * OTEP's layout table, the process context read and decoded by the
 * independent reader of otel_decode.h, spans, the limits and their
 * counters, threads, fork and exec.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <plabel.h>

#include "kselftest/kselftest_harness.h"
#include "otel_decode.h"

extern __thread void *otel_thread_ctx_v1;

static struct od_ctx ctx;

/* Key index of name in the published key map; -1 when absent. */
static int key_index(const char *name)
{
	unsigned int i;

	if (od_read(getpid(), &ctx))
		return -1;
	for (i = 0; i < ctx.nkeys; i++)
		if (!strcmp(ctx.keys[i], name))
			return (int)i;
	return -1;
}

/* Expected record bytes from the OTEP's table; returns its length. */
static size_t expect_rec(unsigned char *buf, const unsigned char *tid,
			 const unsigned char *sid, unsigned char flags,
			 const int *keys, const char *const *vals, int n)
{
	size_t off = 28;
	uint16_t size;
	int i;

	memset(buf, 0, 28);
	if (tid)
		memcpy(buf, tid, 16);
	if (sid)
		memcpy(buf + 16, sid, 8);
	buf[24] = 1;
	buf[25] = flags;
	for (i = 0; i < n; i++) {
		size_t l = strlen(vals[i]);

		buf[off++] = (unsigned char)keys[i];
		buf[off++] = (unsigned char)l;
		memcpy(buf + off, vals[i], l);
		off += l;
	}
	size = (uint16_t)(off - 28);
	/* Native byte order: low byte first on little-endian hosts. */
	memcpy(buf + 26, &size, 2);
	return off;
}

TEST(record_bytes)
{
	struct plabel_kv kv[] = { { "tenant", "acme" },
				  { "endpoint", "/api/users" } };
	unsigned char want[640];
	const unsigned char *rec;
	const char *vals[2];
	int keys[2];
	size_t len;

	ASSERT_EQ(NULL, otel_thread_ctx_v1);
	ASSERT_EQ(0, plabel_set(kv, 2));
	rec = otel_thread_ctx_v1;
	ASSERT_NE(NULL, rec);
	EXPECT_EQ(0U, (uintptr_t)rec % 2);
	/* Sorted by key: endpoint, then tenant. */
	keys[0] = key_index("endpoint");
	keys[1] = key_index("tenant");
	ASSERT_LE(0, keys[0]);
	ASSERT_LE(0, keys[1]);
	vals[0] = "/api/users";
	vals[1] = "acme";
	len = expect_rec(want, NULL, NULL, 0, keys, vals, 2);
	ASSERT_EQ(28U + 2 + 10 + 2 + 4, len);
	EXPECT_EQ(0, memcmp(want, rec, len));
	/* attrs-data-size at offset 26, u16 native order. */
	EXPECT_EQ(18, *(const uint16_t *)(rec + 26));
	EXPECT_EQ(1, rec[24]);

	/* A switch is a pointer store: the same record again. */
	ASSERT_EQ(0, plabel_clear());
	EXPECT_EQ(NULL, otel_thread_ctx_v1);
	ASSERT_EQ(0, plabel_set(kv, 2));
	EXPECT_EQ(rec, otel_thread_ctx_v1);
}

TEST(process_context)
{
	struct plabel_kv a = { "alpha", "1" }, b = { "beta", "2" };
	char smaps[64], line[512];
	uint64_t ns1, ns2;
	int dontfork = 0, inmap = 0;
	FILE *f;

	ASSERT_EQ(0, plabel_set(&a, 1));
	ASSERT_EQ(0, od_read(getpid(), &ctx));
	EXPECT_EQ(2U, ctx.version);
	EXPECT_NE(0U, ctx.published_at_ns);
	EXPECT_EQ(1, ctx.have_schema);
	EXPECT_STREQ("tls_v1", ctx.schema);
	EXPECT_EQ(1, ctx.have_map);
	ASSERT_EQ(1U, ctx.nkeys);
	EXPECT_STREQ("alpha", ctx.keys[0]);
	EXPECT_TRUE(!strncmp(ctx.map_name, "/memfd:OTEL_CTX", 15) ||
		    !strncmp(ctx.map_name, "[anon_shmem:OTEL_CTX]", 21));
	/* The payload follows the header, inside the mapping. */
	EXPECT_EQ(ctx.map_start + 32, ctx.payload);
	ns1 = ctx.published_at_ns;

	/* A set of known keys leaves the context as it is. */
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "alpha", "9" } }, 1));
	ASSERT_EQ(0, od_read(getpid(), &ctx));
	EXPECT_EQ(ns1, ctx.published_at_ns);

	/* A new key is appended and republished, earlier indexes kept. */
	ASSERT_EQ(0, plabel_set(&b, 1));
	ASSERT_EQ(0, od_read(getpid(), &ctx));
	ns2 = ctx.published_at_ns;
	EXPECT_LT(ns1, ns2);
	ASSERT_EQ(2U, ctx.nkeys);
	EXPECT_STREQ("alpha", ctx.keys[0]);
	EXPECT_STREQ("beta", ctx.keys[1]);

	/* MADV_DONTFORK: smaps shows "dc" for the mapping. */
	snprintf(smaps, sizeof(smaps), "/proc/%d/smaps", (int)getpid());
	f = fopen(smaps, "r");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s;

		if (sscanf(line, "%llx-", &s) == 1 && strchr(line, ' ') &&
		    line[strspn(line, "0123456789abcdef")] == '-')
			inmap = s == ctx.map_start;
		if (inmap && !strncmp(line, "VmFlags:", 8) &&
		    strstr(line, " dc"))
			dontfork = 1;
	}
	fclose(f);
	EXPECT_EQ(1, dontfork);
}

TEST(span)
{
	static const unsigned char tid[16] = {
		0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
		0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36 };
	static const unsigned char sid[8] = {
		0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7 };
	static const unsigned char zero[16];
	struct plabel_kv kv = { "route", "/r" };
	unsigned char want[640];
	const unsigned char *shared, *rec;
	const char *val = "/r";
	int key;
	size_t len;

	/* A span without labels: a record with no attributes. */
	ASSERT_EQ(0, plabel_set_trace(tid, sid, 0x01));
	rec = otel_thread_ctx_v1;
	ASSERT_NE(NULL, rec);
	len = expect_rec(want, tid, sid, 0x01, NULL, NULL, 0);
	EXPECT_EQ(0, memcmp(want, rec, len));

	ASSERT_EQ(0, plabel_set(&kv, 1));
	key = key_index("route");
	ASSERT_LE(0, key);
	rec = otel_thread_ctx_v1;
	len = expect_rec(want, tid, sid, 0x01, &key, &val, 1);
	EXPECT_EQ(0, memcmp(want, rec, len));

	/* Detach: back to the set's shared record, no span. */
	ASSERT_EQ(0, plabel_set_trace(NULL, NULL, 0));
	shared = otel_thread_ctx_v1;
	ASSERT_NE(NULL, shared);
	EXPECT_NE(rec, shared);
	len = expect_rec(want, NULL, NULL, 0, &key, &val, 1);
	EXPECT_EQ(0, memcmp(want, shared, len));
	ASSERT_EQ(0, plabel_set_trace(zero, zero, 0));
	EXPECT_EQ(shared, otel_thread_ctx_v1);

	/* Bad arguments change nothing. */
	EXPECT_EQ(-EINVAL, plabel_set_trace(tid, NULL, 1));
	EXPECT_EQ(-EINVAL, plabel_set_trace(zero, sid, 1));
	EXPECT_EQ(-EINVAL, plabel_set_trace(tid, sid, 0x100));
	EXPECT_EQ(-EINVAL, plabel_set_trace(NULL, NULL, 1));
	EXPECT_EQ(shared, otel_thread_ctx_v1);
}

TEST(limits)
{
	struct plabel_otel_stats st, st0;
	struct plabel_kv kv[64];
	char big[300], vals[64][260], keys[64][16];
	const unsigned char *rec;
	int i, set, n;

	memset(big, 'v', sizeof(big));
	big[256] = '\0';		/* 256 bytes: one too many */
	ASSERT_EQ(0, plabel_otel_stats(&st0, sizeof(st0)));
	kv[0] = (struct plabel_kv){ "big", big };
	kv[1] = (struct plabel_kv){ "small", "s" };
	ASSERT_EQ(0, plabel_set(kv, 2));
	ASSERT_EQ(0, plabel_otel_stats(&st, sizeof(st)));
	EXPECT_EQ(st0.values_dropped + 1, st.values_dropped);
	rec = otel_thread_ctx_v1;
	ASSERT_NE(NULL, rec);
	/* Only "small" is in: never a truncated "big". */
	EXPECT_EQ(3, *(const uint16_t *)(rec + 26));
	EXPECT_EQ(key_index("small"), rec[28]);
	EXPECT_EQ(-1, key_index("big"));

	/* Values of 255 bytes fill 640 bytes after two: the rest left out. */
	for (i = 0; i < 5; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		memset(vals[i], 'a' + i, 255);
		vals[i][255] = '\0';
		kv[i] = (struct plabel_kv){ keys[i], vals[i] };
	}
	ASSERT_EQ(0, plabel_set(kv, 5));
	ASSERT_EQ(0, plabel_otel_stats(&st0, sizeof(st0)));
	EXPECT_EQ(st.space_dropped + 3, st0.space_dropped);
	rec = otel_thread_ctx_v1;
	EXPECT_EQ(2 * 257, *(const uint16_t *)(rec + 26));
	EXPECT_GE(640, 28 + *(const uint16_t *)(rec + 26));

	/*
	 * 256 keys at most; later new keys are left out and counted. Sets of
	 * 16 labels (the module's default limit): 3 keys so far, 16 sets of
	 * new keys, the last of which gets 13 indexes.
	 */
	n = 0;
	for (set = 0; set < 16; set++) {
		for (i = 0; i < 16; i++) {
			snprintf(keys[i], sizeof(keys[i]), "m%02d_%02d", set, i);
			kv[i] = (struct plabel_kv){ keys[i], "x" };
		}
		ASSERT_EQ(0, plabel_set(kv, 16));
		n += 16;
	}
	ASSERT_EQ(0, plabel_otel_stats(&st, sizeof(st)));
	EXPECT_EQ(256U, st.keys_used);
	/* Keys before: small, k0, k1 ("big", k2..k4 never got one). */
	EXPECT_EQ((unsigned long long)n + 3 - 256,
		  st.keys_dropped - st0.keys_dropped);
	ASSERT_EQ(0, od_read(getpid(), &ctx));
	EXPECT_EQ(256U, ctx.nkeys);
	EXPECT_STREQ("small", ctx.keys[0]);
	EXPECT_STREQ("m15_12", ctx.keys[255]);
	/* The last set's record has only the keys that got an index. */
	rec = otel_thread_ctx_v1;
	ASSERT_NE(NULL, rec);
	EXPECT_EQ(13 * 3, *(const uint16_t *)(rec + 26));
	EXPECT_EQ(243, rec[28]);
	EXPECT_EQ(255, rec[28 + 12 * 3]);
	/* A short struct gets its prefix; a NULL one is refused. */
	memset(&st0, 0xff, sizeof(st0));
	ASSERT_EQ(0, plabel_otel_stats(&st0, 8));
	EXPECT_EQ(st.keys_dropped, st0.keys_dropped);
	EXPECT_EQ(-1, (int)st0.keys_used);
	EXPECT_EQ(-EINVAL, plabel_otel_stats(NULL, sizeof(st)));
}

#define NTHREADS 6

static pthread_barrier_t all_done;

struct worker {
	pthread_t th;
	int id;
	int bad;
	const void *rec;
};

static void *worker_fn(void *arg)
{
	struct worker *w = arg;
	char val[32];
	struct plabel_kv kv = { "worker", val };
	int i;

	if (otel_thread_ctx_v1)
		w->bad++;	/* new threads start without a record */
	for (i = 0; i < 2000; i++) {
		const unsigned char *r;

		snprintf(val, sizeof(val), "w%d-%d", w->id, i % 7);
		if (plabel_set(&kv, 1)) {
			w->bad++;
			continue;
		}
		r = otel_thread_ctx_v1;
		if (!r || r[24] != 1 || r[29] != strlen(val) ||
		    memcmp(r + 30, val, strlen(val)))
			w->bad++;
	}
	/* Every thread's last set alive at once: distinct records. */
	w->rec = otel_thread_ctx_v1;
	pthread_barrier_wait(&all_done);
	pthread_barrier_wait(&all_done);
	return NULL;
}

TEST(threads_see_their_own)
{
	struct worker w[NTHREADS];
	int i;

	ASSERT_EQ(0, pthread_barrier_init(&all_done, NULL, NTHREADS + 1));
	for (i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ .id = i };
		ASSERT_EQ(0, pthread_create(&w[i].th, NULL, worker_fn, &w[i]));
	}
	pthread_barrier_wait(&all_done);
	/* Each ended on its own value, so on its own record. */
	for (i = 1; i < NTHREADS; i++)
		EXPECT_NE(w[0].rec, w[i].rec);
	pthread_barrier_wait(&all_done);
	for (i = 0; i < NTHREADS; i++) {
		ASSERT_EQ(0, pthread_join(w[i].th, NULL));
		EXPECT_EQ(0, w[i].bad);
	}
	EXPECT_EQ(NULL, otel_thread_ctx_v1);
}

TEST(fork_and_exec)
{
	struct plabel_kv kv = { "job", "nightly" };
	const void *rec;
	uint64_t parent_map;
	int status;
	pid_t pid;

	ASSERT_EQ(0, plabel_set(&kv, 1));
	rec = otel_thread_ctx_v1;
	ASSERT_EQ(0, od_read(getpid(), &ctx));
	parent_map = ctx.map_start;
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct od_ctx c;
		int n;

		/* Exactly one context: the child's own, not the parent's. */
		if (od_find_map(getpid(), &c, &n) || n != 1)
			_exit(10);
		if (od_read(getpid(), &c) || c.nkeys != 1 ||
		    strcmp(c.keys[0], "job"))
			_exit(11);
		/* The labels and their record are inherited. */
		if (otel_thread_ctx_v1 != rec)
			_exit(12);
		(void)parent_map;
		/* exec: a program without libplabel has no context. */
		execl("/bin/sh", "sh", "-c",
		      "! grep -q OTEL_CTX /proc/$$/maps", (char *)NULL);
		_exit(13);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* The parent's context is untouched. */
	ASSERT_EQ(0, od_read(getpid(), &ctx));
	EXPECT_EQ(parent_map, ctx.map_start);
}

TEST_HARNESS_MAIN
