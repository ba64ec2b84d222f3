// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The heap sampler's table and intervals; see heap_core.h.
 */
#include <math.h>

#include "heap_core.h"

/*
 * Take the first empty or removed slot of addr's probes; mark each slot
 * that holds another block PASSED on the way, before addr is in a later
 * one (release: a lookup that sees addr's block sees the marks). An addr
 * met on the way is there already: one entry, which one free removes.
 */
__attribute__((visibility("hidden")))
int plabel_heap_tab_insert(struct plabel_heap_tab *t, uintptr_t addr)
{
	uint32_t i = plabel_heap_tab_hash(addr), n;

	for (n = 0; n < PLABEL_HEAP_TAB_PROBE; n++) {
		uintptr_t *s = &t->slot[(i + n) & (PLABEL_HEAP_TAB_SLOTS - 1)];
		uintptr_t v = __atomic_load_n(s, __ATOMIC_RELAXED);

		for (;;) {
			/* there already (freed where no free() saw it): once */
			if ((v & ~PLABEL_HEAP_TAB_FLAGS) == addr)
				return 0;
			if (!(v & ~PLABEL_HEAP_TAB_FLAGS)) {
				/* empty or removed: keep its PASSED */
				if (__atomic_compare_exchange_n(s, &v,
						addr | (v & PLABEL_HEAP_TAB_PASSED),
						0, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
					return 0;
				continue;
			}
			if ((v & PLABEL_HEAP_TAB_PASSED) ||
			    __atomic_compare_exchange_n(s, &v,
						v | PLABEL_HEAP_TAB_PASSED, 0,
						__ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
				break;
		}
	}
	return -1;
}

__attribute__((visibility("hidden")))
int plabel_heap_tab_remove(struct plabel_heap_tab *t, uintptr_t addr)
{
	uint32_t i = plabel_heap_tab_hash(addr), n;

	for (n = 0; n < PLABEL_HEAP_TAB_PROBE; n++) {
		uintptr_t *s = &t->slot[(i + n) & (PLABEL_HEAP_TAB_SLOTS - 1)];
		uintptr_t v = __atomic_load_n(s, __ATOMIC_ACQUIRE);

		while ((v & ~PLABEL_HEAP_TAB_FLAGS) == addr) {
			/* removed, its PASSED kept (one may come meanwhile) */
			if (__atomic_compare_exchange_n(s, &v,
					PLABEL_HEAP_TAB_GONE |
					(v & PLABEL_HEAP_TAB_PASSED), 0,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED))
				return 1;
		}
		/* no insert went past: addr is not further on */
		if (!(v & PLABEL_HEAP_TAB_PASSED))
			return 0;
	}
	return 0;
}

/* splitmix64 of x: a well-mixed nonzero start for xorshift64*. */
__attribute__((visibility("hidden")))
uint64_t plabel_heap_seed(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ULL;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	x ^= x >> 31;
	return x ? x : 1;
}

__attribute__((visibility("hidden")))
uint64_t plabel_heap_interval(uint64_t *rnd, uint64_t mean)
{
	uint64_t x = *rnd;
	double u, v;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*rnd = x;
	/* uniform in (0, 1], 53 bits */
	u = (double)(((x * 0x2545F4914F6CDD1DULL) >> 11) + 1) * 0x1.0p-53;
	v = -log(u) * (double)mean;
	if (v >= 0x1.0p62)
		return 1ULL << 62;
	return (uint64_t)v + 1;
}
