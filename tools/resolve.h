/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Resolution: merged samples into a profile. A sample's call chain becomes
 * locations through its process's mappings of its exec generation
 * (symbolized once per address and profile), its label set the profile's
 * (with the process and thread names as labels when it has them), and the
 * mapping with the most frames the main one.
 */
#ifndef PLABEL_TOOLS_RESOLVE_H
#define PLABEL_TOOLS_RESOLVE_H

#include <stdint.h>

#include "chain.h"
#include "collect.h"
#include "lset.h"
#include "names.h"
#include "proc.h"
#include "profile.h"
#include "symbolize.h"

/* Addresses from here up are the kernel's. */
#define PLABEL_KERNEL_START	0xffff800000000000ULL

/*
 * What resolution takes of a sample, and what the collector merges
 * samples by: its type, process, thread (only for the pid/tid labels),
 * image generation, chain, label set and names, and how many there were.
 */
struct plabel_agg {
	uint32_t pid, tid;
	uint32_t chain, gen;
	uint64_t set_id;
	uint32_t type;
	uint32_t pname, tname;	/* process and thread name ids, 0: none */
	uint32_t wait;		/* OFFCPU: 1 + enum plabel_wait_kind; else 0 */
	uint32_t state;		/* THREADSTATE: 1 + enum plabel_thread_state */
	uint64_t count;		/* ALLOC: alloc_objects, scaled */
	/* CPU nanoseconds (SAMPLE), off-CPU (OFFCPU); ALLOC: alloc_space */
	uint64_t nanos;
	uint64_t first;		/* arrival number of the first (collector's) */
	uint64_t inuse_count;	/* ALLOC only: inuse_objects */
	uint64_t inuse_bytes;	/* ALLOC only: inuse_space */
};

/* What samples are resolved against; the lsets sorted. */
struct plabel_resolve_src {
	struct plabel_syms *syms;
	struct plabel_procs *procs;	/* views are made on it */
	const struct plabel_chains *chains;
	const struct plabel_lsets *lsets;
	const struct plabel_names *names;
	int pid_labels;		/* pid and tid numeric labels */
};

struct plabel_resolver;

/* A resolver into prof; src must outlive it. NULL on ENOMEM. */
struct plabel_resolver *
plabel_resolver_new(const struct plabel_resolve_src *src,
		    struct plabel_prof *prof);

/*
 * Add the a->count samples a to the profile. A sample whose label set
 * never came is kept with the label plabel_unresolved_set=ID and counted
 * (plabel_resolver_unresolved()). 0 or -ENOMEM.
 */
int plabel_resolver_add(struct plabel_resolver *r, const struct plabel_agg *a);

/* The samples added whose label set never came. */
uint64_t plabel_resolver_unresolved(const struct plabel_resolver *r);

/*
 * Once every sample is added: the main mapping, the user mapping with
 * the most frames that is not a shared library (else the one with the
 * most frames).
 */
void plabel_resolver_set_main(struct plabel_resolver *r);

void plabel_resolver_free(struct plabel_resolver *r);

/* The counts of st (what was lost, ...) as the profile's comments. */
int plabel_resolve_comments(struct plabel_prof *prof,
			    const struct plabel_collect_stats *st);

#endif /* PLABEL_TOOLS_RESOLVE_H */
