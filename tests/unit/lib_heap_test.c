// SPDX-License-Identifier: GPL-2.0
/*
 * The heap sampler's parts that run without the kernel (heap_core.c):
 * the table of sampled blocks (insert, remove, a failed lookup, bounded
 * probing, concurrent use) and the sampling intervals (their mean and
 * distribution, and that sampling by bytes with them estimates each size
 * class's bytes without bias after the scaling `plabel record` applies).
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../libplabel/heap_core.h"

#include "kselftest/kselftest_harness.h"

static struct plabel_heap_tab *tab_new(void)
{
	return calloc(1, sizeof(struct plabel_heap_tab));
}

/* Live entries: slots holding an address. */
static size_t tab_live(const struct plabel_heap_tab *t)
{
	size_t i, n = 0;

	for (i = 0; i < PLABEL_HEAP_TAB_SLOTS; i++)
		n += (t->slot[i] & ~PLABEL_HEAP_TAB_FLAGS) != 0;
	return n;
}

TEST(table_insert_remove)
{
	struct plabel_heap_tab *t = tab_new();

	ASSERT_NE(NULL, t);
	EXPECT_EQ(0, plabel_heap_tab_remove(t, 0x1000));
	ASSERT_EQ(0, plabel_heap_tab_insert(t, 0x1000));
	ASSERT_EQ(0, plabel_heap_tab_insert(t, 0x2010));
	EXPECT_EQ(0, plabel_heap_tab_remove(t, 0x3000));
	EXPECT_EQ(1, plabel_heap_tab_remove(t, 0x1000));
	EXPECT_EQ(0, plabel_heap_tab_remove(t, 0x1000));
	EXPECT_EQ(1, plabel_heap_tab_remove(t, 0x2010));
	EXPECT_EQ(0, tab_live(t));
	/* a removed slot is taken again */
	ASSERT_EQ(0, plabel_heap_tab_insert(t, 0x1000));
	EXPECT_EQ(1, tab_live(t));
	free(t);
}

/* Half the table full of neighbouring blocks: all in, all found, others not. */
TEST(table_half_full)
{
	struct plabel_heap_tab *t = tab_new();
	size_t i, n = PLABEL_HEAP_TAB_SLOTS / 2, fails = 0, found = 0;

	ASSERT_NE(NULL, t);
	for (i = 1; i <= n; i++)
		fails += plabel_heap_tab_insert(t, 0x10000 + 16 * i) != 0;
	EXPECT_EQ(0, fails);
	EXPECT_EQ(n, tab_live(t));
	for (i = n + 1; i <= 2 * n; i++)
		found += plabel_heap_tab_remove(t, 0x10000 + 16 * i);
	EXPECT_EQ(0, found);
	for (i = 1; i <= n; i++)
		found += plabel_heap_tab_remove(t, 0x10000 + 16 * i);
	EXPECT_EQ(n, found);
	EXPECT_EQ(0, tab_live(t));
	free(t);
}

/*
 * free's filter: "not there" for a block sampled before and freed since
 * (allocators hand the same blocks out again), never "not there" for a
 * block that is (one whose first slot another block took, which went on
 * to a later one, included), and "not there" for most of the others.
 */
TEST(table_filter_never_misses)
{
	struct plabel_heap_tab *t = tab_new();
	uintptr_t base = 0x7f0000000000ULL, a, b = 0;
	size_t i, n = 4096, missed = 0, passed = 0;

	ASSERT_NE(NULL, t);
	EXPECT_EQ(0, plabel_heap_tab_maybe(t, base));
	/* a block sampled, freed and handed out again: one load */
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, plabel_heap_tab_insert(t, base));
		EXPECT_EQ(1, plabel_heap_tab_maybe(t, base));
		EXPECT_EQ(1, plabel_heap_tab_remove(t, base));
		EXPECT_EQ(0, plabel_heap_tab_maybe(t, base));
	}
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, plabel_heap_tab_insert(t, base + 16 * 977 * i));
	/* two blocks of one first slot: the second sits further on */
	a = base + 16;
	for (i = 2; !b && i < (1U << 24); i++)
		if (plabel_heap_tab_hash(base + 16 * i) ==
		    plabel_heap_tab_hash(a))
			b = base + 16 * i;
	ASSERT_NE(0, b);
	ASSERT_EQ(0, plabel_heap_tab_insert(t, a));
	ASSERT_EQ(0, plabel_heap_tab_insert(t, b));
	EXPECT_EQ(1, plabel_heap_tab_remove(t, a));
	EXPECT_EQ(1, plabel_heap_tab_maybe(t, b));
	for (i = 0; i < n; i++)
		missed += !plabel_heap_tab_maybe(t, base + 16 * 977 * i);
	EXPECT_EQ(0, missed);
	/* of blocks never put in, those passed on to the table's lookup */
	for (i = 0; i < 100000; i++)
		passed += plabel_heap_tab_maybe(t, base + 0x100000000ULL +
					       16 * i);
	TH_LOG("%zu of 100000 others passed with %zu slots taken", passed, n);
	EXPECT_GT(20000, passed);
	free(t);
}

/* A full table refuses, within its probe bound, and loses nothing. */
TEST(table_full)
{
	struct plabel_heap_tab *t = tab_new();
	size_t i, in = 0, out = 0;

	ASSERT_NE(NULL, t);
	for (i = 1; i <= 2 * PLABEL_HEAP_TAB_SLOTS; i++) {
		if (plabel_heap_tab_insert(t, 16 * i) == 0)
			in++;
		else
			out++;
	}
	EXPECT_LE(in, PLABEL_HEAP_TAB_SLOTS);
	EXPECT_GE(out, PLABEL_HEAP_TAB_SLOTS);
	EXPECT_EQ(in, tab_live(t));
	for (i = 1; i <= 2 * PLABEL_HEAP_TAB_SLOTS; i++)
		out -= plabel_heap_tab_remove(t, 16 * i) ? 0 : 1;
	EXPECT_EQ(0, out);
	EXPECT_EQ(0, tab_live(t));
	free(t);
}

struct worker {
	struct plabel_heap_tab *t;
	uintptr_t base;
	size_t bad;
};

static void *churn(void *arg)
{
	struct worker *w = arg;
	size_t round, i;

	for (round = 0; round < 200; round++) {
		for (i = 0; i < 256; i++)
			w->bad += plabel_heap_tab_insert(w->t,
							 w->base + 16 * i) != 0;
		for (i = 0; i < 256; i++)
			w->bad += plabel_heap_tab_remove(w->t,
							 w->base + 16 * i) != 1;
	}
	return NULL;
}

/* Threads inserting and removing their own blocks never see others'. */
TEST(table_threads)
{
	struct plabel_heap_tab *t = tab_new();
	struct worker w[4];
	pthread_t th[4];
	int i;

	ASSERT_NE(NULL, t);
	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){ .t = t,
					.base = 0x7f0000000000ULL +
						((uintptr_t)i << 24) };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, churn, &w[i]));
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		EXPECT_EQ(0, w[i].bad);
	}
	EXPECT_EQ(0, tab_live(t));
	free(t);
}

/* An address inserted twice is one entry: one remove takes it out. */
TEST(table_insert_twice_is_once)
{
	struct plabel_heap_tab *t = tab_new();

	ASSERT_NE(NULL, t);
	ASSERT_EQ(0, plabel_heap_tab_insert(t, 0x5000));
	ASSERT_EQ(0, plabel_heap_tab_insert(t, 0x5000));
	EXPECT_EQ(1, tab_live(t));
	EXPECT_EQ(1, plabel_heap_tab_remove(t, 0x5000));
	EXPECT_EQ(0, plabel_heap_tab_maybe(t, 0x5000) &&
		     plabel_heap_tab_remove(t, 0x5000));
	EXPECT_EQ(0, tab_live(t));
	free(t);
}

#define COLLIDE_THREADS	4
#define COLLIDE_EACH	8

struct collider {
	struct plabel_heap_tab *t;
	uintptr_t addr[COLLIDE_EACH];
	size_t bad;
};

/*
 * Each round: all of the thread's blocks in, each found by the filter
 * and removed once. Every block of every thread starts at one of two
 * slots, so inserts race for the same slots and go past each other's.
 */
static void *collide(void *arg)
{
	struct collider *c = arg;
	size_t round, i;

	for (round = 0; round < 20000; round++) {
		for (i = 0; i < COLLIDE_EACH; i++)
			c->bad += plabel_heap_tab_insert(c->t, c->addr[i]) != 0;
		for (i = 0; i < COLLIDE_EACH; i++)
			c->bad += !plabel_heap_tab_maybe(c->t, c->addr[i]);
		for (i = 0; i < COLLIDE_EACH; i++)
			c->bad += plabel_heap_tab_remove(c->t, c->addr[i]) != 1;
	}
	return NULL;
}

TEST(table_threads_colliding)
{
	struct plabel_heap_tab *t = tab_new();
	struct collider c[COLLIDE_THREADS];
	pthread_t th[COLLIDE_THREADS];
	uintptr_t a = 0x7f0000001000ULL;
	uint32_t h0 = plabel_heap_tab_hash(a), h1 = (h0 + 1) & 0xffff;
	size_t found = 0, i;
	int k;

	ASSERT_NE(NULL, t);
	/* 32 page-aligned addresses whose first slot is h0 or h1 */
	for (; found < COLLIDE_THREADS * COLLIDE_EACH &&
	       a < 0x7f0000001000ULL + (1ULL << 40); a += 4096) {
		uint32_t h = plabel_heap_tab_hash(a);

		if (h == h0 || h == h1) {
			c[found / COLLIDE_EACH].addr[found % COLLIDE_EACH] = a;
			found++;
		}
	}
	ASSERT_EQ(COLLIDE_THREADS * COLLIDE_EACH, found);
	for (k = 0; k < COLLIDE_THREADS; k++) {
		c[k].t = t;
		c[k].bad = 0;
		ASSERT_EQ(0, pthread_create(&th[k], NULL, collide, &c[k]));
	}
	for (k = 0; k < COLLIDE_THREADS; k++) {
		pthread_join(th[k], NULL);
		EXPECT_EQ(0, c[k].bad);
	}
	EXPECT_EQ(0, tab_live(t));
	for (i = 0; i < found; i++)
		EXPECT_EQ(0, plabel_heap_tab_remove(t, c[i / COLLIDE_EACH]
						.addr[i % COLLIDE_EACH]));
	free(t);
}

/* Exponential with the mean: mean within 1 %, P(X > mean) = 1/e. */
TEST(interval_distribution)
{
	uint64_t rnd = plabel_heap_seed(42), mean = 512 * 1024;
	double sum = 0;
	size_t i, n = 1000000, above = 0, zero = 0;

	for (i = 0; i < n; i++) {
		uint64_t v = plabel_heap_interval(&rnd, mean);

		zero += v == 0;
		above += v > mean;
		sum += (double)v;
	}
	EXPECT_EQ(0, zero);
	EXPECT_LT(fabs(sum / n / mean - 1), 0.01);
	EXPECT_LT(fabs((double)above / n - exp(-1)), 0.003);
	EXPECT_NE(0, rnd);
}

/* Go's scaleHeapSample: the factor for samples of average size avg. */
static double scale(double avg, double rate)
{
	return 1 / (1 - exp(-avg / rate));
}

/*
 * Allocations of two sizes by countdown, as heap.c counts: each class's
 * bytes estimated from its samples, scaled as record scales them, within
 * 3 % of the truth; the small class is sampled far less often per
 * allocation, but not per byte.
 */
TEST(sampling_unbiased)
{
	uint64_t rnd = plabel_heap_seed(7), mean = 64 * 1024;
	int64_t left = (int64_t)plabel_heap_interval(&rnd, mean);
	const uint64_t size[2] = { 64, 40000 };
	double truth[2] = { 0 }, got[2] = { 0 };
	size_t i, k;

	for (i = 0; i < 4000000; i++) {
		k = (i % 50) == 0;	/* 1 in 50 is large */
		truth[k] += (double)size[k];
		left -= (int64_t)size[k];
		if (left < 0) {
			left = (int64_t)plabel_heap_interval(&rnd, mean);
			got[k] += (double)size[k];
		}
	}
	for (k = 0; k < 2; k++) {
		double est = got[k] * scale((double)size[k], (double)mean);

		EXPECT_LT(fabs(est / truth[k] - 1), 0.03)
			TH_LOG("class %zu: estimated %.0f of %.0f", k, est,
			       truth[k]);
	}
}

TEST_HARNESS_MAIN
