// SPDX-License-Identifier: GPL-2.0
/*
 * The heap profile the collector builds (tools/collect.c) from synthetic
 * ALLOC and FREE records: frees matched to allocations by process,
 * address and time whatever order the CPUs' records come in, a FREE of a
 * block never sampled and an address sampled twice without a FREE in
 * between, Go's four sample types in Go's order and Go's scaling, the
 * comments that say what in-use figures rest on (and when they cannot be
 * trusted), the labels of thread contexts the records carry, and the
 * decoder refusing malformed ALLOC records.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kselftest/kselftest_harness.h"

#include "../../tools/collect.h"
#include "../../tools/profile.h"
#include "../../tools/stream.h"
#include "tools/stream_build.h"

static const char *const kv_alpha[] = { "endpoint", "alpha" };
static const char *const kv_beta[] = { "endpoint", "beta" };

__attribute__((noinline)) int plabel_heap_test_site(int x);
__attribute__((noinline)) int plabel_heap_test_site(int x)
{
	return x * 3 + 1;
}

static const char *label_of(const struct plabel_prof_sample_info *si,
			    const char *key)
{
	size_t i;

	for (i = 0; i < si->nlabels; i++)
		if (!strcmp(si->labels[i].key, key))
			return si->labels[i].value;
	return NULL;
}

static int has_comment(const struct plabel_prof *p, const char *s)
{
	size_t i;

	for (i = 0; i < plabel_prof_num_comments(p); i++)
		if (strstr(plabel_prof_comment(p, i), s))
			return 1;
	return 0;
}

static double go_scale(double avg, double rate)
{
	return 1 / (1 - exp(-avg / rate));
}

/* The heap profile of buf, through the wire format and back. */
static struct plabel_prof *heap_of(struct __test_metadata *_metadata,
				   const struct sbuf *b,
				   struct plabel_collect_stats *st)
{
	struct plabel_prof *profs[PLABEL_PROF_NKINDS], *back = NULL;
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_collect *c;
	const char *err = NULL;
	uint8_t *enc;
	size_t len, k;

	if (!syms)
		return NULL;
	c = plabel_collect_new(syms, 0);
	if (!c)
		return NULL;
	plabel_collect_set_heap_rate(c, 4096);
	EXPECT_EQ(0, plabel_collect_buffer(c, b->data, b->len));
	if (!plabel_collect_finish(c, 1, 2, profs)) {
		if (!plabel_prof_encode(profs[PLABEL_PROF_HEAP], &enc, &len)) {
			EXPECT_EQ(0, plabel_prof_decode(enc, len, &back, &err));
			free(enc);
		}
		for (k = 0; k < PLABEL_PROF_NKINDS; k++)
			plabel_prof_free(profs[k]);
	}
	plabel_collect_stats(c, st);
	plabel_collect_free(c);
	plabel_syms_free(syms);
	return back;
}

TEST(heap_profile)
{
	static struct sbuf b;
	struct plabel_collect_stats st;
	struct plabel_prof_sample_info si;
	struct plabel_prof *p;
	uint64_t ip = (uintptr_t)plabel_heap_test_site + 1;
	int64_t v[2][4] = { { 0 } };
	double s1 = go_scale(1000, 4096), s3 = go_scale(3000, 4096);
	const char *want[4][2] = {
		{ "alloc_objects", "count" }, { "alloc_space", "bytes" },
		{ "inuse_objects", "count" }, { "inuse_space", "bytes" },
	};
	size_t i, k;

	b.len = 0;
	sb_stream(&b, 1000000);
	/* a FREE before its ALLOC in the buffer (another CPU's ring) */
	sb_free(&b, 50, 3000, 0xa100);
	sb_labelset(&b, 7, kv_alpha, 1);
	sb_labelset(&b, 9, kv_beta, 1);
	for (i = 0; i < 4; i++)
		sb_alloc(&b, 7, 50, 1000 + i, 0xa000 + 0x100 * i, 1000, 4096,
			 ip);
	sb_free(&b, 50, 2000, 0xa000);
	sb_free(&b, 50, 2500, 0xdead0);		/* never sampled */
	sb_free(&b, 51, 2500, 0xa200);		/* another process's */
	sb_alloc(&b, 9, 50, 1100, 0xb000, 3000, 4096, ip);
	sb_alloc(&b, 9, 50, 1200, 0xb100, 3000, 4096, ip);
	/* 0xb000 again, no FREE seen: the first one is taken as freed */
	sb_alloc(&b, 9, 50, 4000, 0xb000, 3000, 4096, ip);
	/* the address freed, then sampled again: the new one in use */
	sb_alloc(&b, 7, 50, 5000, 0xa000, 1000, 4096, ip);

	p = heap_of(_metadata, &b, &st);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(8, st.allocs);
	EXPECT_EQ(4, st.frees);
	EXPECT_EQ(2, st.frees_unmatched);
	EXPECT_EQ(1, st.frees_implied);
	ASSERT_EQ(4, plabel_prof_num_values(p));
	for (k = 0; k < 4; k++) {
		EXPECT_STREQ(want[k][0], plabel_prof_sample_type(p, k).type);
		EXPECT_STREQ(want[k][1], plabel_prof_sample_type(p, k).unit);
	}
	EXPECT_STREQ("space", plabel_prof_period_type(p).type);
	EXPECT_STREQ("bytes", plabel_prof_period_type(p).unit);
	EXPECT_EQ(4096, plabel_prof_period(p));
	EXPECT_NE(NULL, strstr(plabel_prof_drop_frames(p), "malloc"));
	for (i = 0; i < plabel_prof_num_samples(p); i++) {
		const char *e;

		plabel_prof_get_sample(p, i, &si);
		e = label_of(&si, "endpoint");
		ASSERT_NE(NULL, e);
		for (k = 0; k < 4; k++)
			v[!strcmp(e, "beta")][k] += si.values[k];
		EXPECT_EQ(1, si.nlocs);
	}
	/* alpha: 5 of 1000 bytes, 0xa000 and 0xa100 freed */
	EXPECT_EQ(llround(5 * s1), v[0][0]);
	EXPECT_EQ(llround(5000 * s1), v[0][1]);
	EXPECT_EQ(llround(3 * s1), v[0][2]);
	EXPECT_EQ(llround(3000 * s1), v[0][3]);
	/* beta: 3 of 3000 bytes, the first at 0xb000 gone */
	EXPECT_EQ(llround(3 * s3), v[1][0]);
	EXPECT_EQ(llround(9000 * s3), v[1][1]);
	EXPECT_EQ(llround(2 * s3), v[1][2]);
	EXPECT_EQ(llround(6000 * s3), v[1][3]);
	EXPECT_TRUE(has_comment(p, "in-use figures count only allocations sampled while recording"));
	EXPECT_FALSE(has_comment(p, "cannot be trusted"));
	EXPECT_TRUE(has_comment(p, "sampled allocations: 8, frees: 4"));
	EXPECT_TRUE(has_comment(p, "address was sampled again: 1"));
	plabel_prof_free(p);
}

/*
 * Allocations by threads of a program that publishes its threads' contexts
 * (custom-labels, OpenTelemetry): the heap profile's samples carry those
 * labels, the span's ids in hex, beside the thread's own set's, which
 * wins a shared key.
 */
TEST(alloc_contexts)
{
	static const uint8_t cl_a[] = "\x08\0\x05\0endpoint/cart",
			     cl_b[] = "\x08\0\x04\0endpoint/pay";
	static struct sbuf b;
	struct plabel_collect_stats st;
	struct plabel_prof_sample_info si;
	uint64_t ip = (uintptr_t)plabel_heap_test_site + 1;
	uint8_t otel[28] = { 0 };
	int64_t cart = 0, pay = 0, alpha = 0, traced = 0;
	struct plabel_prof *p;
	size_t at, i;

	for (i = 0; i < 16; i++)
		otel[i] = (uint8_t)(0x10 + i);
	for (i = 0; i < 8; i++)
		otel[16 + i] = (uint8_t)(0xa0 + i);
	otel[24] = 1;
	b.len = 0;
	sb_stream(&b, 1000000);
	sb_labelset(&b, 7, kv_alpha, 1);
	for (i = 0; i < 3; i++) {
		at = b.len;
		sb_alloc(&b, 0, 60, 1000 + i, 0xc000 + 0x100 * i, 1000, 4096,
			 ip);
		sb_ctx(&b, at, PLABEL_TLSCTX_CUSTOM_LABELS_V1,
		       i < 2 ? cl_a : cl_b, i < 2 ? 17 : 16);
	}
	/* the thread's own set has endpoint=alpha: it wins over /cart */
	at = b.len;
	sb_alloc(&b, 7, 60, 1100, 0xd000, 1000, 4096, ip);
	sb_ctx(&b, at, PLABEL_TLSCTX_CUSTOM_LABELS_V1, cl_a, 17);
	at = b.len;
	sb_alloc(&b, 0, 60, 1200, 0xe000, 1000, 4096, ip);
	sb_ctx(&b, at, PLABEL_TLSCTX_OTEL_V1, otel, sizeof(otel));

	p = heap_of(_metadata, &b, &st);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(5, st.allocs);
	EXPECT_EQ(5, st.contexts);
	for (i = 0; i < plabel_prof_num_samples(p); i++) {
		const char *e, *t;

		plabel_prof_get_sample(p, i, &si);
		e = label_of(&si, "endpoint");
		t = label_of(&si, "trace_id");
		if (e && !strcmp(e, "/cart"))
			cart += si.values[0];
		else if (e && !strcmp(e, "/pay"))
			pay += si.values[0];
		else if (e && !strcmp(e, "alpha"))
			alpha += si.values[0];
		if (t) {
			EXPECT_STREQ("101112131415161718191a1b1c1d1e1f", t);
			EXPECT_STREQ("a0a1a2a3a4a5a6a7",
				     label_of(&si, "span_id"));
			traced += si.values[0];
		}
	}
	/* alloc_objects: the sampled allocations, scaled as Go scales */
	EXPECT_EQ(llround(2 * go_scale(1000, 4096)), cart);
	EXPECT_EQ(llround(go_scale(1000, 4096)), pay);
	EXPECT_EQ(pay, alpha);
	EXPECT_EQ(pay, traced);
	EXPECT_TRUE(has_comment(p, "records with a thread context"));
	plabel_prof_free(p);
}

/* Lost FREEs: the profile says its in-use figures cannot be trusted. */
TEST(lost_frees_said)
{
	static struct sbuf b;
	struct plabel_collect_stats st;
	struct plabel_prof *p;

	b.len = 0;
	sb_stream(&b, 1000000);
	sb_alloc(&b, 0, 60, 1000, 0xc000, 64, 4096,
		 (uintptr_t)plabel_heap_test_site + 1);
	sb_lost_frees(&b, 3);
	sb_lost_frees(&b, 2);
	p = heap_of(_metadata, &b, &st);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(5, st.lost_frees);
	EXPECT_TRUE(has_comment(p, "heap: 5 FREE records lost: in-use figures are too high and cannot be trusted"));
	plabel_prof_free(p);
}

/* No heap records: an empty heap profile, with its types. */
TEST(empty_heap)
{
	static struct sbuf b;
	struct plabel_collect_stats st;
	struct plabel_prof *p;

	b.len = 0;
	sb_stream(&b, 1000000);
	p = heap_of(_metadata, &b, &st);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(0, plabel_prof_num_samples(p));
	EXPECT_EQ(4, plabel_prof_num_values(p));
	plabel_prof_free(p);
}

/* ALLOC records the decoder refuses: short, or with impossible fields. */
TEST(alloc_decoding)
{
	static struct sbuf b;
	struct plabel_rec_sample *s;
	struct plabel_rec_alloc *a;
	int n;

	b.len = 0;
	sb_alloc(&b, 0, 1, 1, 0x1000, 10, 4096, 0x400000);
	EXPECT_EQ(0, decode_all(b.data, b.len, &n));
	EXPECT_EQ(1, n);

	b.len = 0;
	s = sb_rec(&b, PLABEL_REC_ALLOC, sizeof(*s));
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &n));

	b.len = 0;
	sb_alloc(&b, 0, 1, 1, 0x1000, 10, 4096, 0x400000);
	s = (void *)b.data;
	a = (void *)(s + 1);
	a->requested = a->usable + 1;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &n));
	a->requested = 1;
	a->weight = 0;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &n));
	a->weight = 1;
	s->nr_user = 2;		/* more ips than the record holds */
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &n));

	b.len = 0;
	sb_rec(&b, PLABEL_REC_FREE, 16);	/* short FREE */
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &n));
}

TEST_HARNESS_MAIN
