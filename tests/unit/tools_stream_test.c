// SPDX-License-Identifier: GPL-2.0
/*
 * The record stream decoder (tools/stream.c) on valid, truncated, oversize
 * and otherwise malformed input. What the collector makes of streams is
 * tools_collect_test.c's.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kselftest/kselftest_harness.h"

#include "../../tools/stream.h"
#include "tools/stream_build.h"

static const char *const kv_a[] = { "worker", "alpha", "tenant", "acme" };

TEST(decode_valid)
{
	static struct sbuf b;
	struct plabel_dec_rec *r = malloc(sizeof(*r));
	uint64_t ips[3] = { 0xffffffff81000010ULL, 0x401000, 0x401100 };
	struct plabel_dec d;

	b.len = 0;
	sb_stream(&b, 1000000);
	sb_labelset(&b, 7, kv_a, 2);
	sb_sample(&b, PLABEL_REC_SAMPLE, 7, 42, ips, 1, 2);
	sb_lost(&b, 5);
	sb_mmap(&b, 42, 0x400000, 0x402000, 0, "/bin/true");

	plabel_dec_init(&d, b.data, b.len);
	ASSERT_EQ(1, plabel_dec_next(&d, r));
	EXPECT_EQ(PLABEL_REC_STREAM, r->type);
	EXPECT_EQ(1000000, r->u.stream.period_ns);

	ASSERT_EQ(1, plabel_dec_next(&d, r));
	ASSERT_EQ(PLABEL_REC_LABELSET, r->type);
	EXPECT_EQ(7, r->u.labelset.id);
	ASSERT_EQ(2, r->u.labelset.count);
	EXPECT_EQ(6, r->u.labelset.labels[0].key.len);
	EXPECT_EQ(0, memcmp("worker", r->u.labelset.labels[0].key.ptr, 6));
	EXPECT_EQ(0, memcmp("alpha", r->u.labelset.labels[0].value.ptr, 5));
	EXPECT_EQ(0, memcmp("acme", r->u.labelset.labels[1].value.ptr, 4));

	ASSERT_EQ(1, plabel_dec_next(&d, r));
	ASSERT_EQ(PLABEL_REC_SAMPLE, r->type);
	EXPECT_EQ(42, r->u.sample.hdr.pid);
	EXPECT_EQ(1, r->u.sample.hdr.nr_kernel);
	EXPECT_EQ(2, r->u.sample.hdr.nr_user);
	EXPECT_EQ(ips[0], plabel_dec_ip(r, 0));
	EXPECT_EQ(ips[2], plabel_dec_ip(r, 2));
	EXPECT_EQ(0, r->u.sample.has_regs);

	ASSERT_EQ(1, plabel_dec_next(&d, r));
	ASSERT_EQ(PLABEL_REC_LOST, r->type);
	EXPECT_EQ(5, r->u.lost.lost);

	ASSERT_EQ(1, plabel_dec_next(&d, r));
	ASSERT_EQ(PLABEL_REC_MMAP, r->type);
	EXPECT_EQ(9, r->u.mmap.path.len);
	EXPECT_EQ(0, memcmp("/bin/true", r->u.mmap.path.ptr, 9));

	EXPECT_EQ(0, plabel_dec_next(&d, r));
	free(r);
}

TEST(decode_regs_and_stack)
{
	static struct sbuf b;
	struct plabel_dec_rec *r = malloc(sizeof(*r));
	struct plabel_rec_sample *s;
	uint64_t regs[PLABEL_REGS_NR], *p;
	struct plabel_dec d;
	int i;

	b.len = 0;
	for (i = 0; i < PLABEL_REGS_NR; i++)
		regs[i] = 100 + i;
	s = sb_rec(&b, PLABEL_REC_SAMPLE, sizeof(*s) + 8 + sizeof(regs) + 64);
	s->flags = PLABEL_SAMPLE_USER | PLABEL_SAMPLE_REGS;
	s->nr_user = 1;
	s->stack_size = 64;
	p = (uint64_t *)(s + 1);
	p[0] = 0x1234;
	memcpy(p + 1, regs, sizeof(regs));
	memset(p + 1 + PLABEL_REGS_NR, 0xab, 64);

	plabel_dec_init(&d, b.data, b.len);
	ASSERT_EQ(1, plabel_dec_next(&d, r));
	EXPECT_EQ(1, r->u.sample.has_regs);
	EXPECT_EQ(0x1234, plabel_dec_ip(r, 0));
	EXPECT_EQ(100 + PLABEL_REG_RIP, r->u.sample.regs[PLABEL_REG_RIP]);
	EXPECT_EQ(0xab, r->u.sample.stack[63]);

	/* a stack larger than the record */
	s->stack_size = 72;
	plabel_dec_init(&d, b.data, b.len);
	EXPECT_EQ(-EBADMSG, plabel_dec_next(&d, r));
	free(r);
}

TEST(decode_fp_regs)
{
	static struct sbuf b;
	struct plabel_dec_rec *r = malloc(sizeof(*r));
	struct plabel_rec_sample *s;
	uint64_t *p;
	struct plabel_dec d;
	int i;

	b.len = 0;
	s = sb_rec(&b, PLABEL_REC_OFFCPU,
		   sizeof(*s) + 8 + 8 * PLABEL_FP_REGS_NR + 32);
	s->flags = PLABEL_SAMPLE_USER | PLABEL_SAMPLE_REGS |
		   PLABEL_SAMPLE_FP_REGS;
	s->nr_user = 1;
	s->stack_size = 32;
	p = (uint64_t *)(s + 1);
	p[0] = 0x1234;
	p[1] = 0x1234;		/* rip */
	p[2] = 0x7ff000;	/* rsp */
	p[3] = 0x7ff040;	/* rbp */
	memset(p + 4, 0xcd, 32);

	plabel_dec_init(&d, b.data, b.len);
	ASSERT_EQ(1, plabel_dec_next(&d, r));
	EXPECT_EQ(1, r->u.sample.has_regs);
	EXPECT_EQ(0x1234, r->u.sample.regs[PLABEL_REG_RIP]);
	EXPECT_EQ(0x7ff000, r->u.sample.regs[PLABEL_REG_RSP]);
	EXPECT_EQ(0x7ff040, r->u.sample.regs[PLABEL_REG_RBP]);
	for (i = 0; i < PLABEL_REGS_NR; i++)
		if (i != PLABEL_REG_RIP && i != PLABEL_REG_RSP &&
		    i != PLABEL_REG_RBP)
			EXPECT_EQ(0, r->u.sample.regs[i]);
	/* the stack right after the three words */
	EXPECT_EQ((const uint8_t *)(p + 4), r->u.sample.stack);
	EXPECT_EQ(0xcd, r->u.sample.stack[31]);

	/* a stack larger than the record */
	s->stack_size = 40;
	plabel_dec_init(&d, b.data, b.len);
	EXPECT_EQ(-EBADMSG, plabel_dec_next(&d, r));
	free(r);
}

TEST(decode_unknown_type_skipped)
{
	static struct sbuf b;
	struct plabel_dec_rec *r = malloc(sizeof(*r));
	struct plabel_dec d;

	b.len = 0;
	sb_rec(&b, 999, 40);
	sb_lost(&b, 3);
	plabel_dec_init(&d, b.data, b.len);
	ASSERT_EQ(1, plabel_dec_next(&d, r));
	EXPECT_EQ(999, r->type);
	EXPECT_EQ(40, r->size);
	ASSERT_EQ(1, plabel_dec_next(&d, r));
	EXPECT_EQ(PLABEL_REC_LOST, r->type);
	EXPECT_EQ(3, r->u.lost.lost);
	EXPECT_EQ(0, plabel_dec_next(&d, r));
	free(r);
}

TEST(decode_truncated_everywhere)
{
	static struct sbuf b;
	uint64_t ips[2] = { 0x401000, 0x401100 };
	size_t cut, bounds[8], nb = 0, i;
	int count, ret;

	b.len = 0;
	sb_stream(&b, 1000000);
	bounds[nb++] = b.len;
	sb_labelset(&b, 7, kv_a, 2);
	bounds[nb++] = b.len;
	sb_sample(&b, PLABEL_REC_SAMPLE, 7, 42, ips, 0, 2);
	bounds[nb++] = b.len;
	sb_mmap(&b, 42, 0x400000, 0x402000, 0, "/usr/bin/something");
	bounds[nb++] = b.len;

	/* every cut: whole records decode, a partial one is an error */
	for (cut = 0; cut <= b.len; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1);
		int on_bound = cut == 0;

		memcpy(copy, b.data, cut);
		ret = decode_all(copy, cut, &count);
		for (i = 0; i < nb; i++)
			if (bounds[i] == cut)
				on_bound = 1;
		if (on_bound) {
			EXPECT_EQ(0, ret);
		} else {
			EXPECT_EQ(-EBADMSG, ret);
		}
		free(copy);
	}
}

TEST(decode_bad_sizes)
{
	static struct sbuf b;
	struct plabel_rec_header *h;
	int count;

	/* size larger than the buffer */
	b.len = 0;
	h = sb_rec(&b, PLABEL_REC_LOST, sizeof(struct plabel_rec_lost));
	h->size = 4096;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
	/* size not a multiple of 8 */
	h->size = 20;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
	/* size smaller than a header: would loop forever if accepted */
	h->size = 0;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
	/* a known type shorter than its fixed part */
	h->size = 16;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
	EXPECT_EQ(0, count);
}

TEST(decode_bad_counts)
{
	static struct sbuf b;
	struct plabel_rec_labelset *ls;
	struct plabel_rec_label *l;
	struct plabel_rec_sample *s;
	struct plabel_rec_mmap *m;
	uint64_t ips[2] = { 1, 2 };
	int count;

	b.len = 0;
	sb_labelset(&b, 7, kv_a, 2);
	ls = (void *)b.data;
	ls->count = 65;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
	ls->count = 1000000;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
	ls->count = 2;
	l = (void *)(ls + 1);
	l[1].value_len = 1000;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
	l[1].value_len = 4;
	l[0].key_len = 0;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
	l[0].key_len = 6;
	EXPECT_EQ(0, decode_all(b.data, b.len, &count));
	EXPECT_EQ(1, count);

	b.len = 0;
	s = sb_sample(&b, PLABEL_REC_SAMPLE, 0, 1, ips, 0, 2);
	s->nr_user = 3;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
	s->nr_user = 0xffff;
	s->nr_kernel = 0xffff;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
	s->nr_kernel = 0;
	s->nr_user = 2;
	s->stack_size = 8;	/* a stack without PLABEL_SAMPLE_REGS */
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
	s->flags |= PLABEL_SAMPLE_REGS;	/* regs flagged but missing */
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));

	b.len = 0;
	sb_mmap(&b, 1, 0x1000, 0x2000, 0, "/x");
	m = (void *)b.data;
	m->path_len = 100;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
	m->path_len = 2;
	m->end = m->start;
	EXPECT_EQ(-EBADMSG, decode_all(b.data, b.len, &count));
}

/* OFFCPU is laid out as a SAMPLE; an END that ends before it began is bad. */
TEST(decode_offcpu)
{
	static struct sbuf b;
	struct plabel_dec_rec *r = malloc(sizeof(*r));
	uint64_t ips[1] = { 0x4000 };
	struct plabel_rec_sample *s;
	struct plabel_dec d;

	ASSERT_NE(NULL, r);
	b.len = 0;
	s = sb_sample(&b, PLABEL_REC_OFFCPU, 3, 10, ips, 0, 1);
	s->wait_kind = PLABEL_WAIT_FUTEX;
	s->wait_state = 1;
	sb_offcpu_end(&b, 10, 11, 1000, 5000);
	plabel_dec_init(&d, b.data, b.len);
	ASSERT_EQ(1, plabel_dec_next(&d, r));
	EXPECT_EQ(PLABEL_REC_OFFCPU, r->type);
	EXPECT_EQ(PLABEL_WAIT_FUTEX, r->u.sample.hdr.wait_kind);
	EXPECT_EQ(0x4000, plabel_dec_ip(r, 0));
	ASSERT_EQ(1, plabel_dec_next(&d, r));
	EXPECT_EQ(PLABEL_REC_OFFCPU_END, r->type);
	EXPECT_EQ(1000, r->u.offcpu_end.out_ns);
	EXPECT_EQ(5000, r->u.offcpu_end.time_ns);
	EXPECT_EQ(0, plabel_dec_next(&d, r));

	/* ran again before it left */
	b.len = 0;
	sb_offcpu_end(&b, 10, 11, 5000, 1000);
	plabel_dec_init(&d, b.data, b.len);
	EXPECT_EQ(-EBADMSG, plabel_dec_next(&d, r));
	/* too short for its fixed part */
	b.len = 0;
	sb_rec(&b, PLABEL_REC_OFFCPU_END, 16);
	plabel_dec_init(&d, b.data, b.len);
	EXPECT_EQ(-EBADMSG, plabel_dec_next(&d, r));
	free(r);
}

TEST_HARNESS_MAIN
