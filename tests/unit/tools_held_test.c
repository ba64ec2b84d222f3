// SPDX-License-Identifier: GPL-2.0
/*
 * The collector's held samples (tools/collect.c): merging reads only the
 * blocks of held samples that can hold settled ones, yet a late sample,
 * stamped long before the samples around it, is merged with the others
 * wherever it lies; what stays held is exactly what is not settled; and
 * no sample is lost or counted twice as the held ones move about; the
 * collector's own watermark merges what every CPU's records have passed,
 * giving the profile of the samples held to the end.
 */
#include <stdint.h>
#include <stdlib.h>

#include "kselftest/kselftest_harness.h"

#include "../../tools/collect.h"
#include "../../tools/profile.h"
#include "tools/finish.h"
#include "tools/stream_build.h"

#define H_PID		100
#define H_T0		1000000000ULL
#define H_STEP		1000ULL
/* more than a merging batch (65536) and some blocks (4096) after it */
#define H_N		(65536 + 3 * 4096 + 123)

static const uint64_t h_ip = 0x400100;

/* Sample i of the stream, stamped t. */
static void h_sample(struct sbuf *b, uint64_t t)
{
	struct plabel_rec_sample *s = sb_sample(b, PLABEL_REC_SAMPLE, 0, H_PID,
						&h_ip, 0, 1);

	s->time_ns = t;
}

/* Feed b and empty it. 0 or the collector's error. */
static int h_feed(struct plabel_collect *c, struct sbuf *b)
{
	int ret = plabel_collect_buffer(c, b->data, b->len);

	b->len = 0;
	return ret;
}

/*
 * Finish c: the CPU profile's number of samples and their counts summed.
 * 0 or the collector's error.
 */
static int h_finish(struct plabel_collect *c, size_t *nsamples,
		    int64_t *total)
{
	struct plabel_prof_sample_info si;
	struct plabel_prof *cpu, *tc;
	size_t i;
	int ret = finish_cpu_tc(c, 0, 0, &cpu, &tc);

	if (ret)
		return ret;
	*nsamples = plabel_prof_num_samples(cpu);
	*total = 0;
	for (i = 0; i < *nsamples; i++) {
		plabel_prof_get_sample(cpu, i, &si);
		*total += si.values[0];
	}
	plabel_prof_free(cpu);
	plabel_prof_free(tc);
	return 0;
}

FIXTURE(held) {
	struct plabel_syms *syms;
	struct plabel_collect *c;
	struct sbuf *b;
};

FIXTURE_SETUP(held)
{
	self->syms = plabel_syms_new();
	ASSERT_NE(NULL, self->syms);
	self->c = plabel_collect_new(self->syms, 0);
	ASSERT_NE(NULL, self->c);
	self->b = calloc(1, sizeof(*self->b));
	ASSERT_NE(NULL, self->b);
	sb_stream(self->b, 1000000);
}

FIXTURE_TEARDOWN(held)
{
	plabel_collect_free(self->c);
	plabel_syms_free(self->syms);
	free(self->b);
}

/*
 * H_N samples in time order, and among the last ones a few stamped
 * before nearly all of them: settling at sample 1000's time merges the
 * first 1000 and the late ones, however far behind the front they lie.
 */
TEST_F(held, late_samples_far_back_are_merged)
{
	const size_t late[] = { H_N - 5000, H_N - 100, H_N - 1 };
	struct plabel_collect *c = self->c;
	struct sbuf *b = self->b;
	struct plabel_collect_stats st;
	size_t i, k = 0, nsamples;
	int64_t total;

	for (i = 0; i < H_N; i++) {
		if (k < 3 && i == late[k]) {
			/* from another CPU's ring, long after its time */
			h_sample(b, H_T0 + 7 + k);
			k++;
		}
		h_sample(b, H_T0 + i * H_STEP);
		if (b->len > sizeof(b->data) - 512)
			ASSERT_EQ(0, h_feed(c, b));
	}
	ASSERT_EQ(0, h_feed(c, b));
	plabel_collect_stats(c, &st);
	ASSERT_EQ(H_N + 3, st.held);
	ASSERT_EQ(0, st.merged);

	ASSERT_EQ(0, plabel_collect_settled(c, H_T0 + 1000 * H_STEP));
	plabel_collect_stats(c, &st);
	/* one key: every sample has the same chain, thread and labels */
	EXPECT_EQ(1, st.merged);
	EXPECT_EQ(H_N - 1000, st.held);

	/* later ones settle in turn, the late ones long gone */
	for (i = 0; i < 4; i++) {
		h_sample(b, H_T0 + (H_N + i) * H_STEP);
		ASSERT_EQ(0, h_feed(c, b));
	}
	plabel_collect_stats(c, &st);
	EXPECT_EQ(H_N - 1000 + 4, st.held);

	ASSERT_EQ(0, h_finish(c, &nsamples, &total));
	EXPECT_EQ(1, nsamples);
	EXPECT_EQ(H_N + 3 + 4, total);
}

/*
 * Settling again and again as samples come, far more than the array of
 * held samples first takes: it is reused and grown as they move on, and
 * every sample is counted once.
 */
TEST_F(held, held_samples_move_on_without_loss)
{
	const uint64_t n = 1200000, lag = 150000;
	struct plabel_collect *c = self->c;
	struct sbuf *b = self->b;
	struct plabel_collect_stats st;
	uint64_t i, max_held = 0;
	size_t nsamples;
	int64_t total;

	for (i = 0; i < n; i++) {
		/* every 97th comes 50000 samples late */
		uint64_t t = i % 97 == 0 && i > 50000 ? i - 50000 : i;

		h_sample(b, H_T0 + t * H_STEP);
		if (b->len > sizeof(b->data) - 512 || i == n - 1) {
			ASSERT_EQ(0, h_feed(c, b));
			if (i > lag)
				ASSERT_EQ(0, plabel_collect_settled(c,
					H_T0 + (i - lag) * H_STEP));
			plabel_collect_stats(c, &st);
			if (st.held > max_held)
				max_held = st.held;
		}
	}
	plabel_collect_stats(c, &st);
	EXPECT_EQ(n, st.samples);
	EXPECT_EQ(1, st.merged);
	/* the last lag samples, a batch and a buffer's worth at most */
	EXPECT_GT(lag + 65536 + 2000, max_held);
	ASSERT_EQ(0, h_finish(c, &nsamples, &total));
	EXPECT_EQ(1, nsamples);
	EXPECT_EQ((int64_t)n, total);
}

/*
 * The watermark: W_N samples from two CPUs (as many as the STREAM record
 * counts), each CPU's in time order, the CPUs' runs interleaved and a run
 * apart, over 6 chains and 4 threads with their CPU times.
 * ncpus is what the STREAM record says; settle: plabel_collect_settled()
 * after each buffer at time 0, which settles nothing by itself.
 * 0 or the collector's error; *max_held the most held after a buffer.
 */
#define W_N	200000
#define W_RUN	32

static int w_feed(struct plabel_collect *c, struct sbuf *b, uint32_t ncpus,
		  int settle, uint64_t *max_held)
{
	struct plabel_collect_stats st;
	struct plabel_rec_stream *rs;
	uint64_t i;
	int ret;

	*max_held = 0;
	b->len = 0;
	sb_stream(b, 100000);
	rs = (struct plabel_rec_stream *)b->data;
	rs->ncpus = ncpus;
	for (i = 0; i < W_N; i++) {
		/* runs of W_RUN of one CPU; CPU 1's a run behind CPU 0's */
		uint64_t run = i / W_RUN, cpu = run % 2, k = i % W_RUN;
		uint64_t t = H_T0 + ((run / 2 + cpu) * W_RUN + k) * H_STEP;
		uint64_t ip[2] = { 0x400100 + 16 * (i % 3), 0x400800 + cpu };
		struct plabel_rec_sample *s = sb_sample(b, PLABEL_REC_SAMPLE,
							0, H_PID, ip, 0, 2);

		s->time_ns = t;
		s->cpu = cpu;
		s->tid = H_PID + 1 + cpu * 2 + (i % 5 == 0);
		s->flags |= PLABEL_SAMPLE_CPUTIME;
		s->cpu_ns = t / 2 + s->tid;
		if (b->len > sizeof(b->data) - 512 || i == W_N - 1) {
			ret = h_feed(c, b);
			if (!ret && settle)
				ret = plabel_collect_settled(c, 0);
			if (ret)
				return ret;
			plabel_collect_stats(c, &st);
			if (st.held > *max_held)
				*max_held = st.held;
		}
	}
	return 0;
}

/* The CPU profile of c, encoded. 0 or the collector's error. */
static int w_profile(struct plabel_collect *c, uint8_t **buf, size_t *len)
{
	struct plabel_prof *cpu, *tc;
	int ret = finish_cpu_tc(c, 0, 0, &cpu, &tc);

	if (ret)
		return ret;
	ret = plabel_prof_encode(cpu, buf, len);
	plabel_prof_free(cpu);
	plabel_prof_free(tc);
	return ret;
}

/*
 * Once merging has started, the collector merges what every CPU's
 * records have passed by itself: a run or two of samples stay held, not
 * the whole stream; and the profile is the one of every sample held to
 * the end, to the byte.
 */
TEST_F(held, watermark_merges_what_every_cpu_passed)
{
	struct plabel_collect *u = plabel_collect_new(self->syms, 0);
	struct plabel_collect_stats st;
	uint8_t *pm = NULL, *pu = NULL;
	size_t lm = 0, lu = 0;
	uint64_t held_m, held_u;

	ASSERT_NE(NULL, u);
	ASSERT_EQ(0, w_feed(self->c, self->b, 2, 1, &held_m));
	ASSERT_EQ(0, w_feed(u, self->b, 2, 0, &held_u));
	plabel_collect_stats(self->c, &st);
	EXPECT_EQ(W_N, st.samples);
	EXPECT_EQ(0, st.late);
	/* 3 leaves x 2 CPUs' callers (no pid/tid labels: threads are one) */
	EXPECT_EQ(6, st.merged);
	/* a merging batch and a buffer's worth at most, not W_N */
	EXPECT_GT(16384 + 2000, held_m);
	EXPECT_EQ(W_N, held_u);
	ASSERT_EQ(0, w_profile(self->c, &pm, &lm));
	ASSERT_EQ(0, w_profile(u, &pu, &lu));
	ASSERT_EQ(lu, lm);
	EXPECT_EQ(0, memcmp(pu, pm, lu));
	free(pm);
	free(pu);
	plabel_collect_free(u);
}

/*
 * A CPU the STREAM record counts that sends nothing (idle) holds the
 * watermark back: only the caller's settled time merges, here none.
 */
TEST_F(held, silent_cpu_holds_the_watermark_back)
{
	struct plabel_collect_stats st;
	size_t nsamples;
	int64_t total;
	uint64_t held;

	ASSERT_EQ(0, w_feed(self->c, self->b, 3, 1, &held));
	plabel_collect_stats(self->c, &st);
	EXPECT_EQ(W_N, st.held);
	EXPECT_EQ(0, st.merged);
	ASSERT_EQ(0, h_finish(self->c, &nsamples, &total));
	EXPECT_EQ(6, nsamples);
	EXPECT_EQ(W_N, total);
}

TEST_HARNESS_MAIN
