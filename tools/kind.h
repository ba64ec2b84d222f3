/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The profiles plabel makes, one row each: which records build it, the
 * file `plabel record` writes, its sample value types, its period.
 * profile.c makes a profile of a kind from its row, collect.c builds one
 * profile per row from the records of its type, record.c asks the kernel
 * for every row's records and writes every row's file. Adding a kind:
 * Documentation/reader.rst.
 */
#ifndef PLABEL_TOOLS_KIND_H
#define PLABEL_TOOLS_KIND_H

#include <stddef.h>
#include <stdint.h>

enum plabel_prof_kind {
	PLABEL_PROF_CPU,
	PLABEL_PROF_THREADCREATE,
	PLABEL_PROF_OFFCPU,
	PLABEL_PROF_WALL,
	PLABEL_PROF_HEAP,
	PLABEL_PROF_THREADS,
	PLABEL_PROF_NKINDS
};

#define PLABEL_KIND_MAX_VALUES	4

struct plabel_kind_value {
	const char *type;
	const char *unit;
};

struct plabel_kind {
	const char *name;
	const char *file;		/* in record's output directory */
	uint32_t rec_type;		/* PLABEL_REC_* it is built from */
	uint32_t rec_type2;		/* and another one, 0: none */
	uint32_t record_flag;		/* PLABEL_RECORD_* that asks for it */
	/*
	 * Made only when asked for (plabel record --off-cpu, --heap): its
	 * records cost more than the others'
	 */
	int optional;
	/* off-CPU samples of runnable threads (preempted) left out */
	int waits_only;
	size_t nvalues;
	/*
	 * Sample value types, in the order of the values plabel_prof_sample()
	 * takes (count, nanos; the heap's four through
	 * plabel_prof_sample_values()): those past nvalues are dropped; with
	 * nanos_only, the one value is the nanoseconds.
	 */
	int nanos_only;
	struct plabel_kind_value values[PLABEL_KIND_MAX_VALUES];
	size_t period_value;		/* values[] index of the period type */
	struct plabel_kind_value period_type;	/* else this, when type set */
	/* period: the sampling period when set, else 1 per sample */
	int period_is_sampling;
	/*
	 * Default sample type viewers show, or NULL to write none (pprof's
	 * rule then picks the last value).
	 */
	const char *default_type;
};

extern const struct plabel_kind plabel_kinds[PLABEL_PROF_NKINDS];

/*
 * The name of enum plabel_wait_kind kind, as the "wait" label's value and
 * the timeline's off-CPU slices say it; "other" for an unknown one.
 */
const char *plabel_wait_name(uint32_t kind);

#endif /* PLABEL_TOOLS_KIND_H */
