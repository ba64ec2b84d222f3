// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The heap sampler's table and intervals; see heap_core.h.
 */
#include <math.h>

#include "heap_core.h"

static uint32_t tab_hash(uintptr_t addr)
{
	/* blocks are 16-byte aligned: their low bits say nothing */
	return (uint32_t)(((uint64_t)(addr >> 4) * 0x9E3779B97F4A7C15ULL) >>
			  (64 - PLABEL_HEAP_TAB_BITS));
}

__attribute__((visibility("hidden")))
int plabel_heap_tab_insert(struct plabel_heap_tab *t, uintptr_t addr)
{
	uint32_t i = tab_hash(addr), n;

	for (n = 0; n < PLABEL_HEAP_TAB_PROBE; n++) {
		uintptr_t *s = &t->slot[(i + n) & (PLABEL_HEAP_TAB_SLOTS - 1)];
		uintptr_t v = __atomic_load_n(s, __ATOMIC_RELAXED);

		while (v == 0 || v == PLABEL_HEAP_TAB_GONE) {
			if (__atomic_compare_exchange_n(s, &v, addr, 0,
							__ATOMIC_RELEASE,
							__ATOMIC_RELAXED))
				return 0;
		}
	}
	return -1;
}

__attribute__((visibility("hidden")))
int plabel_heap_tab_remove(struct plabel_heap_tab *t, uintptr_t addr)
{
	uint32_t i = tab_hash(addr), n;

	for (n = 0; n < PLABEL_HEAP_TAB_PROBE; n++) {
		uintptr_t *s = &t->slot[(i + n) & (PLABEL_HEAP_TAB_SLOTS - 1)];
		uintptr_t v = __atomic_load_n(s, __ATOMIC_ACQUIRE);

		if (!v)
			return 0;
		if (v == addr)
			return __atomic_compare_exchange_n(
				s, &v, PLABEL_HEAP_TAB_GONE, 0,
				__ATOMIC_RELAXED, __ATOMIC_RELAXED);
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
