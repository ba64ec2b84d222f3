// SPDX-License-Identifier: GPL-2.0
/*
 * libplabel against a reference model: long random sequences of
 * plabel_set, plabel_do (nested), plabel_switch and plabel_clear over a
 * small alphabet, so the per-thread cache hits, misses and evicts all the
 * time; after every step the labels plabel_get returns must equal the
 * model's. Includes invalid calls (repeated keys), which must change
 * nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plabel.h>

#include "kselftest/kselftest_harness.h"

#define NKEYS	6
#define NVALS	5
#define MAXDEPTH 4

static const char *keys[NKEYS] = { "a", "bb", "c", "dd", "endpoint", "f" };
static const char *vals[NVALS] = { "", "0", "/api/users", "x", "yy" };

/* Model: value index per key, -1 when absent. */
struct model {
	int v[NKEYS];
};

static unsigned long long rng = 88172645463325252ULL;
static int steps, mismatches;
static struct plabel_labels *handles[8];
static struct model handle_model[8];

static unsigned int rnd(unsigned int n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned int)(rng % n);
}

static void check(const struct model *m)
{
	struct plabel_kv kv[NKEYS + 1];
	int n, i, j = 0, want = 0;

	for (i = 0; i < NKEYS; i++)
		want += m->v[i] >= 0;
	n = plabel_get(kv, NKEYS + 1);
	if (n != want) {
		mismatches++;
		return;
	}
	/* keys[] is in strcmp order, as plabel_get sorts. */
	for (i = 0; i < NKEYS; i++) {
		if (m->v[i] < 0)
			continue;
		if (strcmp(kv[j].key, keys[i]) ||
		    strcmp(kv[j].value, vals[m->v[i]]))
			mismatches++;
		j++;
	}
}

/* Random kvs: distinct keys (or, with bad, one key twice). */
static size_t random_kvs(struct plabel_kv *kv, int *vi, int bad)
{
	int used[NKEYS] = { 0 };
	size_t n = 1 + rnd(3), i;

	for (i = 0; i < n; i++) {
		int k;

		do
			k = rnd(NKEYS);
		while (used[k]);
		used[k] = 1;
		vi[k] = rnd(NVALS);
		kv[i].key = keys[k];
		kv[i].value = vals[vi[k]];
	}
	if (bad) {
		kv[n] = kv[0];
		n++;
	}
	return n;
}

struct frame {
	struct model m;
	int depth;
};

static void run_steps(struct frame *f, int count);

static void do_fn(void *arg)
{
	struct frame *f = arg;

	check(&f->m);
	run_steps(f, 1 + rnd(4));
}

static void run_steps(struct frame *f, int count)
{
	struct plabel_kv kv[NKEYS + 1];
	int vi[NKEYS];
	size_t n, i;
	int op, bad, h, err;

	while (count-- > 0) {
		steps++;
		op = rnd(10);
		bad = rnd(16) == 0;
		for (i = 0; i < NKEYS; i++)
			vi[i] = -1;
		if (op < 3) {			/* plabel_set */
			n = random_kvs(kv, vi, bad);
			err = plabel_set(kv, n);
			if (bad) {
				if (err != -EINVAL)
					mismatches++;
			} else if (err) {
				mismatches++;
			} else {
				memcpy(f->m.v, vi, sizeof(vi));
			}
		} else if (op < 7 && f->depth < MAXDEPTH) { /* plabel_do */
			struct frame inner = { f->m, f->depth + 1 };

			n = random_kvs(kv, vi, bad);
			for (i = 0; !bad && i < NKEYS; i++)
				if (vi[i] >= 0)
					inner.m.v[i] = vi[i];
			err = plabel_do(kv, n, do_fn, &inner);
			if (err != (bad ? -EINVAL : 0))
				mismatches++;
		} else if (op < 9) {		/* plabel_switch */
			h = rnd(8);
			if (plabel_switch(handles[h]))
				mismatches++;
			f->m = handle_model[h];
		} else {			/* plabel_clear */
			if (plabel_clear())
				mismatches++;
			for (i = 0; i < NKEYS; i++)
				f->m.v[i] = -1;
		}
		check(&f->m);
	}
}

TEST(random_against_model)
{
	struct plabel_kv kv[NKEYS + 1];
	struct frame top;
	int vi[NKEYS], i, h, round;

	for (h = 0; h < 8; h++) {
		size_t n;

		for (i = 0; i < NKEYS; i++)
			vi[i] = -1;
		n = h ? random_kvs(kv, vi, 0) : 0;
		handles[h] = plabel_labels_new(kv, n);
		ASSERT_NE(NULL, handles[h]);
		memcpy(handle_model[h].v, vi, sizeof(vi));
	}
	for (i = 0; i < NKEYS; i++)
		top.m.v[i] = -1;
	top.depth = 0;
	ASSERT_EQ(0, plabel_clear());
	for (round = 0; round < 2000; round++) {
		struct model before;
		struct frame inner;

		run_steps(&top, 5);
		/* A top-level plabel_do must restore exactly. */
		before = top.m;
		inner = top;
		inner.depth = 1;
		for (i = 0; i < NKEYS; i++)
			vi[i] = -1;
		{
			size_t n = random_kvs(kv, vi, 0);

			for (i = 0; i < NKEYS; i++)
				if (vi[i] >= 0)
					inner.m.v[i] = vi[i];
			ASSERT_EQ(0, plabel_do(kv, n, do_fn, &inner));
		}
		check(&before);
	}
	EXPECT_EQ(0, mismatches);
	TH_LOG("%d steps", steps);
	plabel_clear();
	for (h = 0; h < 8; h++)
		plabel_labels_free(handles[h]);
}

TEST_HARNESS_MAIN
