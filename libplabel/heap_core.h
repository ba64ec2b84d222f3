/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * The parts of the heap sampler (heap.c) that do not interpose anything,
 * kept apart so the host tests can drive them: the table of sampled
 * blocks and the sampling intervals.
 *
 * The table: open addressing over a fixed array of block addresses
 * (0 empty, 1 a removed entry), lock-free: an insert takes an empty or
 * removed slot with a compare-and-swap, a removal swaps the address for
 * 1. Blocks are 16-byte aligned, so the low bits hold flags: PASSED (2)
 * says an insert went on past the slot while it held another block, and
 * stays (a removal keeps it; only a fork child drops the table whole).
 * An address is then never beyond a slot that neither holds it nor has
 * PASSED, so a lookup stops there: the free of a block not sampled is
 * one load (plabel_heap_tab_maybe()), even at an address that was
 * sampled before, as the allocator's caches hand the same blocks out
 * over and over. Probes are bounded: a table too full for an address
 * leaves that allocation unsampled (and counted).
 *
 * The intervals: exponentially distributed with the mean the heap page
 * says (Go's and tcmalloc's rule: sampling by bytes at geometric
 * intervals samples each byte with the same chance, whatever the sizes).
 */
#ifndef PLABEL_LIB_HEAP_CORE_H
#define PLABEL_LIB_HEAP_CORE_H

#include <stddef.h>
#include <stdint.h>

#define PLABEL_HEAP_TAB_BITS	16
#define PLABEL_HEAP_TAB_SLOTS	(1U << PLABEL_HEAP_TAB_BITS)
#define PLABEL_HEAP_TAB_PROBE	32
#define PLABEL_HEAP_TAB_GONE	((uintptr_t)1)
#define PLABEL_HEAP_TAB_PASSED	((uintptr_t)2)
#define PLABEL_HEAP_TAB_FLAGS	((uintptr_t)3)

struct plabel_heap_tab {
	uintptr_t slot[PLABEL_HEAP_TAB_SLOTS];
};

/* addr's first slot; blocks are 16-byte aligned: low bits say nothing */
static inline uint32_t plabel_heap_tab_hash(uintptr_t addr)
{
	return (uint32_t)(((uint64_t)(addr >> 4) * 0x9E3779B97F4A7C15ULL) >>
			  (64 - PLABEL_HEAP_TAB_BITS));
}

/*
 * Whether addr may be in t: its first slot holds it, or an insert went
 * past that slot. When not, it is not there: a free's one load.
 */
static inline int plabel_heap_tab_maybe(const struct plabel_heap_tab *t,
					uintptr_t addr)
{
	uintptr_t v = __atomic_load_n(&t->slot[plabel_heap_tab_hash(addr)],
				      __ATOMIC_RELAXED);

	return (v & ~PLABEL_HEAP_TAB_FLAGS) == addr ||
	       (v & PLABEL_HEAP_TAB_PASSED);
}

/* 0, or -1 when the probed slots are all taken. */
int plabel_heap_tab_insert(struct plabel_heap_tab *t, uintptr_t addr);
/* 1 when addr was there (and is no more), else 0. */
int plabel_heap_tab_remove(struct plabel_heap_tab *t, uintptr_t addr);

/* xorshift64* state; never 0. */
uint64_t plabel_heap_seed(uint64_t x);
/* The next interval, >= 1 byte, mean bytes on average. */
uint64_t plabel_heap_interval(uint64_t *rnd, uint64_t mean);

#endif /* PLABEL_LIB_HEAP_CORE_H */
