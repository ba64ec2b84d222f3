/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * The parts of the heap sampler (heap.c) that do not interpose anything,
 * kept apart so the host tests can drive them: the table of sampled
 * blocks and the sampling intervals.
 *
 * The table: open addressing over a fixed array of block addresses
 * (0 empty, 1 a removed entry), lock-free: an insert takes an empty or
 * removed slot with a compare-and-swap, a removal swaps the address for
 * 1. Slots never go back to 0 (but when the table is dropped whole in a
 * fork child), so a lookup may stop at the first 0: a free of a block
 * never sampled is one or a few loads. Probes are bounded: a table too
 * full for an address leaves that allocation unsampled (and counted).
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

struct plabel_heap_tab {
	uintptr_t slot[PLABEL_HEAP_TAB_SLOTS];
};

/* 0, or -1 when the probed slots are all taken. */
int plabel_heap_tab_insert(struct plabel_heap_tab *t, uintptr_t addr);
/* 1 when addr was there (and is no more), else 0. */
int plabel_heap_tab_remove(struct plabel_heap_tab *t, uintptr_t addr);

/* xorshift64* state; never 0. */
uint64_t plabel_heap_seed(uint64_t x);
/* The next interval, >= 1 byte, mean bytes on average. */
uint64_t plabel_heap_interval(uint64_t *rnd, uint64_t mean);

#endif /* PLABEL_LIB_HEAP_CORE_H */
