/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Weighing: the CPU time of each thread, as the records carry it, into
 * the nanoseconds each of its samples stands for.
 */
#ifndef PLABEL_TOOLS_WEIGH_H
#define PLABEL_TOOLS_WEIGH_H

#include <stddef.h>
#include <stdint.h>

#include "table.h"

/*
 * A sample the collector holds, not merged yet: 40 bytes. Weighing reads
 * its thread, time, periods and value, and sets value to its nanoseconds.
 */
struct plabel_csample {
	uint64_t time_ns;
	uint64_t value;
	uint64_t seq;		/* its number in arrival order */
	uint32_t tid;
	uint32_t chain;		/* index into chains */
	uint32_t src;		/* the collector's index of its pid and set */
	uint16_t periods_m1;	/* sampling periods it stands for, less one */
	uint8_t weight;		/* PLABEL_W_*: what value holds */
	uint8_t flags;		/* PLABEL_CS_* */
};

_Static_assert(sizeof(struct plabel_csample) == 40, "a held sample grew");

/*
 * flags: a THREAD record (else a SAMPLE); its snapshot waits in the spool;
 * an OFFCPU record (value: the wait's nanoseconds, weighed), its wait kind
 * (enum plabel_wait_kind) in the bits of PLABEL_CS_WAIT_MASK
 */
#define PLABEL_CS_THREAD	(1U << 0)
#define PLABEL_CS_PENDING	(1U << 1)
#define PLABEL_CS_OFFCPU	(1U << 2)
/* a THREADSTATE record: value holds its enum plabel_thread_state */
#define PLABEL_CS_STATE		(1U << 3)
#define PLABEL_CS_WAIT_SHIFT	4
#define PLABEL_CS_WAIT_MASK	(0xfU << PLABEL_CS_WAIT_SHIFT)

static inline uint32_t plabel_csample_periods(const struct plabel_csample *s)
{
	return (uint32_t)s->periods_m1 + 1;
}

/*
 * A sample's CPU nanoseconds (see plabel_weigh()): value holds, by weight,
 * nothing yet (the record has no CPU time: a sampling period), the
 * thread's CPU time from the record, the tid a THREAD record created, or
 * (PLABEL_W_DONE) the nanoseconds themselves, 0 for a THREAD record.
 */
enum {
	PLABEL_W_PERIOD,
	PLABEL_W_CPU,
	PLABEL_W_CHILD,
	PLABEL_W_DONE,
};

struct plabel_thr;

#define PLABEL_THR_CACHE	256

/* The threads' CPU times so far; a zeroed one knows none. */
struct plabel_weigher {
	struct plabel_thr *thrs;	/* threads sampled */
	size_t nthrs, thrs_cap;
	struct plabel_itab thr_tab;	/* by tid */
	uint32_t *keys, *tmp;	/* samples to weigh by index, keys_cap each */
	size_t keys_cap;
	uint64_t batch;		/* plabel_weigh() calls that ordered keys */
	/* thrs index of a recent thread, by tid % PLABEL_THR_CACHE */
	uint32_t recent[PLABEL_THR_CACHE];
};

void plabel_weigher_release(struct plabel_weigher *w);

/*
 * Weigh the samples[0..n) stamped before time_ns (UINT64_MAX: all) not
 * weighed yet: all of them have come (see plabel_collect_settled()),
 * though not in time order, as each CPU's records come in turn; those
 * whose weight depends on their thread's previous sample are weighed in
 * time order. A sample without CPU time stands for its periods of
 * period_ns. 0 or -ENOMEM.
 */
int plabel_weigh(struct plabel_weigher *w, struct plabel_csample *samples,
		 size_t n, uint64_t period_ns, uint64_t time_ns);

#endif /* PLABEL_TOOLS_WEIGH_H */
