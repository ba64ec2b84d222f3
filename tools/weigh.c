// SPDX-License-Identifier: GPL-2.0
/*
 * Weighing samples by their thread's CPU time (see weigh.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "weigh.h"

/*
 * A thread's CPU time as of its latest weighed sample, and that sample's
 * time; for a thread created while recording and not sampled yet, 0 and
 * its creation time.
 */
struct plabel_thr {
	uint32_t tid;		/* first: plabel_itab_u32()'s key */
	uint8_t weighed;	/* a sample or its creation was weighed */
	uint8_t reserved[3];
	uint64_t cpu_ns;
	uint64_t time_ns;
	/* the time of its latest sample in batch batch (see in_order()) */
	uint64_t batch_time;
	uint64_t batch;
};

/*
 * How far one thread's CPU time may read lower than at its previous
 * sample and still be the same thread (the kernel's reading can be up to
 * a tick low, see Documentation/record-format.rst), and how much a
 * sample's CPU time may exceed the time since its thread's previous
 * sample.
 */
#define PLABEL_CPU_SLACK_NS	20000000ULL

void plabel_weigher_release(struct plabel_weigher *w)
{
	free(w->thrs);
	plabel_itab_free(&w->thr_tab);
	free(w->keys);
	free(w->tmp);
	memset(w, 0, sizeof(*w));
}

/*
 * Thread tid's entry, added if new. NULL on ENOMEM. A few hundred threads
 * are looked up once or twice a sample: the recent ones by tid first.
 */
static struct plabel_thr *thr_get(struct plabel_weigher *wg, uint32_t tid)
{
	uint32_t *r = &wg->recent[tid % PLABEL_THR_CACHE];
	size_t i;

	if (*r < wg->nthrs && wg->thrs[*r].tid == tid)
		return &wg->thrs[*r];
	i = plabel_itab_u32(&wg->thr_tab, &wg->thrs, &wg->nthrs,
			    &wg->thrs_cap, sizeof(*wg->thrs), tid, NULL);
	if (i == SIZE_MAX)
		return NULL;
	*r = (uint32_t)i;
	return &wg->thrs[i];
}

/*
 * Weigh sample s, the next of its thread in time. A sample stands for the
 * CPU time its thread used since its previous sample, so that each
 * thread's total is what the kernel accounted to it whatever the sampling
 * luck; a sample lost in between leaves its time to the next. A thread's
 * first sample stands for at most one period (the thread ran before the
 * recording), or for all its time when its creation was recorded.
 * known, when not NULL, is s's thread (for a sample, not a creation).
 * 0 or -ENOMEM (s left as it was).
 */
static int weigh_one(struct plabel_weigher *wg, struct plabel_csample *s,
		     uint64_t period_ns, struct plabel_thr *known)
{
	uint64_t cpu = s->value, w;
	struct plabel_thr *t;

	switch (s->weight) {
	case PLABEL_W_PERIOD:
		s->value = period_ns * plabel_csample_periods(s);
		break;
	case PLABEL_W_CHILD:
		/* the tid is new: whatever had it before is gone */
		t = thr_get(wg, (uint32_t)s->value);
		if (!t)
			return -ENOMEM;
		t->weighed = 1;
		t->cpu_ns = 0;
		t->time_ns = s->time_ns;
		s->value = 0;
		break;
	case PLABEL_W_CPU:
		t = known ? known : thr_get(wg, s->tid);
		if (!t)
			return -ENOMEM;
		if (!t->weighed || cpu + PLABEL_CPU_SLACK_NS < t->cpu_ns) {
			/* first seen, or the tid went to a thread not seen made */
			w = cpu < period_ns ? cpu : period_ns;
			t->cpu_ns = cpu;
			t->weighed = 1;
		} else if (cpu > t->cpu_ns) {
			/*
			 * All of it, even more than the wall time since: the
			 * scheduler's clock can run ahead of CLOCK_MONOTONIC
			 * (seen by 15 % on emulated CPUs of a busy host), and
			 * its accounting is the truth sought. A reading torn
			 * high is made good by those after it counting from
			 * it, so a thread's total stays its last reading less
			 * its first.
			 */
			w = cpu - t->cpu_ns;
			t->cpu_ns = cpu;
		} else {
			w = 0;
		}
		t->time_ns = s->time_ns;
		s->value = w;
		break;
	}
	s->weight = PLABEL_W_DONE;
	return 0;
}

/*
 * Sort the n sample indexes in wg->keys by the samples' times, keeping
 * arrival order among equal times: a radix sort, least significant byte
 * first, each pass stable. Records come in runs of one CPU's, which a
 * comparison sort gains little from; this takes a pass per byte of the
 * batch's time span (4 for up to 4 s). 0 or -ENOMEM.
 */
static int keys_sort(struct plabel_weigher *wg,
		     const struct plabel_csample *sm, size_t n)
{
	uint32_t *a = wg->keys, *b = wg->tmp, *t;
	uint64_t lo = UINT64_MAX, hi = 0;
	size_t count[256], i, d, sum;
	unsigned int shift;

	if (!b) {
		b = malloc(wg->keys_cap * sizeof(*b));
		if (!b)
			return -ENOMEM;
		wg->tmp = b;
	}
	for (i = 0; i < n; i++) {
		if (sm[a[i]].time_ns < lo)
			lo = sm[a[i]].time_ns;
		if (sm[a[i]].time_ns > hi)
			hi = sm[a[i]].time_ns;
	}
	for (shift = 0; shift < 64 && (hi - lo) >> shift; shift += 8) {
		memset(count, 0, sizeof(count));
		for (i = 0; i < n; i++)
			count[(sm[a[i]].time_ns - lo) >> shift & 255]++;
		if (count[(sm[a[0]].time_ns - lo) >> shift & 255] == n)
			continue;	/* one digit for all */
		for (d = 0, sum = 0; d < 256; d++) {
			size_t k = count[d];

			count[d] = sum;
			sum += k;
		}
		for (i = 0; i < n; i++)
			b[count[(sm[a[i]].time_ns - lo) >> shift & 255]++] =
				a[i];
		t = a;
		a = b;
		b = t;
	}
	wg->keys = a;
	wg->tmp = b;
	return 0;
}

/*
 * Whether weighing the n samples of wg->keys in their order gives what
 * weighing them in time order does: no thread creation among them (it
 * resets another thread) and each thread's samples in time order. Records
 * of one thread come from the ring of the CPU it runs on, so they mostly
 * are, while the CPUs' runs of records are not. When they are, wg->tmp
 * holds the index of each one's thread. 1, 0, or -ENOMEM.
 */
static int in_order(struct plabel_weigher *wg,
		    const struct plabel_csample *sm, size_t n)
{
	struct plabel_thr *t;
	size_t i;

	if (!wg->tmp) {
		wg->tmp = malloc(wg->keys_cap * sizeof(*wg->tmp));
		if (!wg->tmp)
			return -ENOMEM;
	}
	wg->batch++;
	for (i = 0; i < n; i++) {
		const struct plabel_csample *s = &sm[wg->keys[i]];

		if (s->weight == PLABEL_W_CHILD)
			return 0;
		t = thr_get(wg, s->tid);
		if (!t)
			return -ENOMEM;
		if (t->batch == wg->batch && s->time_ns < t->batch_time)
			return 0;
		t->batch = wg->batch;
		t->batch_time = s->time_ns;
		wg->tmp[i] = (uint32_t)(t - wg->thrs);
	}
	return 1;
}

/* Sample s is to be weighed now, time_ns being as for plabel_weigh(). */
static int weigh_due(const struct plabel_csample *s, uint64_t time_ns)
{
	return s->weight != PLABEL_W_DONE &&
	       (s->time_ns < time_ns || time_ns == UINT64_MAX);
}

int plabel_weigh(struct plabel_weigher *wg, struct plabel_csample *samples,
		 size_t nsamples, uint64_t period_ns, uint64_t time_ns)
{
	uint64_t prev = 0;
	size_t i, n = 0;
	int sorted = 1, known = 0, ret;

	if (nsamples > UINT32_MAX)
		return -ENOMEM;
	for (i = 0; i < nsamples; i++) {
		struct plabel_csample *s = &samples[i];

		if (!weigh_due(s, time_ns))
			continue;
		if (s->weight == PLABEL_W_PERIOD) {
			s->value = period_ns * plabel_csample_periods(s);
			s->weight = PLABEL_W_DONE;
			continue;
		}
		if (n == wg->keys_cap) {
			size_t ncap = n ? 2 * n : 4096;
			uint32_t *nk = realloc(wg->keys, ncap * sizeof(*nk));

			if (!nk)
				return -ENOMEM;
			wg->keys = nk;
			wg->keys_cap = ncap;
			free(wg->tmp);
			wg->tmp = NULL;
		}
		wg->keys[n++] = i;
		if (s->time_ns < prev)
			sorted = 0;
		prev = s->time_ns;
	}
	if (n) {
		ret = in_order(wg, samples, n);
		if (ret < 0)
			return ret;
		known = ret;
		if (!known && !sorted) {
			ret = keys_sort(wg, samples, n);
			if (ret)
				return ret;
		}
	}
	/* (no thread is added meanwhile when known: wg->thrs stays put) */
	for (i = 0; i < n; i++) {
		ret = weigh_one(wg, &samples[wg->keys[i]], period_ns,
				known ? &wg->thrs[wg->tmp[i]] : NULL);
		if (ret)
			return ret;
	}
	return 0;
}
