/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Turns decoded records into profiles, one of each kind (kind.h).
 *
 * Records from different CPUs arrive in no particular order, so samples are
 * kept (with their call chains; in dwarf mode the stack snapshots go to a
 * temporary file and are unwound by plabel_collect_finish(), not while the
 * profiled program runs), merged once no earlier record can come
 * (plabel_collect_settled()), and resolved at the end: labels from the LABELSET
 * records, addresses through the process's mappings of that time (MMAP
 * records; an EXEC starts a new generation), symbolized with symbolize.c.
 */
#ifndef PLABEL_TOOLS_COLLECT_H
#define PLABEL_TOOLS_COLLECT_H

#include <stdint.h>

#include "profile.h"
#include "stream.h"
#include "symbolize.h"
#include "timeline.h"
#include "tlsctx.h"

struct plabel_collect;

struct plabel_collect_stats {
	uint64_t samples;	/* SAMPLE records */
	uint64_t threads;	/* THREAD records */
	uint64_t waits;		/* OFFCPU records joined with an END */
	uint64_t states;	/* THREADSTATE records */
	uint64_t labelsets;	/* distinct label sets seen */
	uint64_t lost;		/* records the kernel dropped */
	uint64_t lost_periods;	/* sampling periods of lost samples */
	uint64_t lost_maps;	/* executable mappings it did not report */
	uint64_t lost_procs;	/* processes a TREE session missed */
	uint64_t unresolved;	/* samples whose label set never arrived */
	uint64_t bad;		/* malformed buffers (decoding stopped) */
	uint64_t late;		/* EXEC records stamped before settled */
	uint64_t held;		/* samples held one by one, not merged yet */
	uint64_t merged;	/* distinct merged samples */
	uint64_t proc_maps;	/* images whose mappings came from /proc */
	uint64_t allocs;	/* ALLOC records */
	uint64_t frees;		/* FREE records */
	uint64_t lost_frees;	/* FREE records the kernel dropped */
	uint64_t frees_unmatched; /* FREEs of blocks not sampled here */
	uint64_t frees_implied;	/* blocks whose address was sampled again */
	uint64_t allocs_dropped; /* left out over a reader's bound */
	uint64_t contexts;	/* records with a thread context */
	uint64_t ctx_unknown;	/* OTel attributes of keys not mapped */
	uint64_t ctx_bad;	/* context labels not fit for a label */
	uint64_t ctx_partial;	/* contexts the kernel could not copy whole */
	uint64_t ctx_failed;	/* processes whose context was not registered */
	uint32_t version;	/* of the STREAM record, 0 before it */
};

#define PLABEL_COLLECT_PROC_MAPS	(1U << 0) /* read /proc/PID/maps */
#define PLABEL_COLLECT_PID_LABELS	(1U << 1) /* pid/tid numeric labels */
#define PLABEL_COLLECT_PREFAULT		(1U << 2) /* first tables set up now */
/* string labels process (executable name) and thread (thread name) */
#define PLABEL_COLLECT_NAME_LABELS	(1U << 3)

struct plabel_collect *plabel_collect_new(struct plabel_syms *syms,
					  unsigned int flags);
void plabel_collect_free(struct plabel_collect *c);

/*
 * The heap profile's period: the mean sampling interval in bytes asked
 * for (the records carry the one each was sampled at).
 */
void plabel_collect_set_heap_rate(struct plabel_collect *c, uint64_t bytes);

/*
 * For a reader that matches frees itself and keeps what it no longer
 * needs one by one (plabel serve): the ALLOC record rec (len bytes, as
 * read()) stands for n sampled allocations of that stack, thread and
 * size, all freed already. Its process's mappings and label set come
 * before it, as for any ALLOC. 0, -EINVAL (not one whole ALLOC record)
 * or -ENOMEM.
 */
int plabel_collect_heap_freed(struct plabel_collect *c, const void *rec,
			      size_t len, uint64_t n);

/*
 * What such a reader knows of the frees it matched: frees (the FREE
 * records it kept from the collector), unmatched (those of blocks it
 * never saw sampled), implied (blocks taken as freed because their
 * address was sampled again), lost (FREE records
 * the kernel dropped) and dropped (sampled allocations it left out over
 * its bound), added to the collector's own for the heap profile's
 * comments.
 */
void plabel_collect_heap_counts(struct plabel_collect *c, uint64_t frees,
				uint64_t unmatched, uint64_t implied,
				uint64_t lost, uint64_t dropped);

/*
 * Name the OTel attributes of thread contexts with the key maps t reads
 * (without it, records' contexts give trace and span ids and
 * custom-labels only).
 */
void plabel_collect_set_tctx(struct plabel_collect *c, struct plabel_tctx *t);

/* Default sampling period when the stream does not say (it does). */
void plabel_collect_set_period(struct plabel_collect *c, uint64_t period_ns);

/*
 * Leave out what pid did before its first exec (record -- CMD: the forked
 * child is plabel's own code until it execs CMD).
 */
void plabel_collect_skip_before_exec(struct plabel_collect *c, uint32_t pid);

/*
 * Decode and feed a buffer of whole records (one read()). 0, -EBADMSG
 * when the buffer is malformed (records before the bad one are kept and
 * stats.bad counts it), -ENOMEM.
 */
int plabel_collect_buffer(struct plabel_collect *c, const void *buf,
			  size_t len);

/*
 * Every record stamped (time_ns) before time_ns has been fed. Samples
 * before it are then merged with the like ones (in batches): memory grows
 * with the distinct samples, not with the recording's length. Without it
 * every sample is kept until plabel_collect_finish(). Once it has been
 * called, the collector also merges by itself, after each buffer, the
 * samples before the watermark: the oldest of the newest stamps of each
 * CPU's SAMPLE and THREAD records, once every CPU the STREAM record
 * counts has sent one (records of one CPU come in the order of their
 * stamps). When all CPUs are busy that is milliseconds behind, where
 * time_ns (plabel record's) is seconds behind. When and how often
 * samples are merged does not change the profiles: they list samples in
 * the order their first records came. 0 or -ENOMEM (the samples are kept
 * as they were).
 */
int plabel_collect_settled(struct plabel_collect *c, uint64_t time_ns);

/*
 * Also note every CPU sample, off-CPU interval and thread creation in tl
 * (the caller's; set before the first buffer), with the names of
 * processes and threads (also with PLABEL_COLLECT_NAME_LABELS unset).
 */
void plabel_collect_set_timeline(struct plabel_collect *c,
				 struct plabel_timeline *tl);

/*
 * After plabel_collect_finish(): the timeline's stacks symbolized, and
 * written to path (plabel_tl_write()). 0 or a negative errno.
 */
int plabel_collect_write_timeline(struct plabel_collect *c, const char *path);

void plabel_collect_stats(const struct plabel_collect *c,
			  struct plabel_collect_stats *st);

/*
 * Build one profile of each kind (plabel_kinds[]) into profs[kind], from
 * the records of its type (time_nanos/duration_nanos are profile-wide).
 * The caller frees them with plabel_prof_free(). 0 or a negative errno
 * (profs untouched).
 */
int plabel_collect_finish(struct plabel_collect *c, int64_t time_nanos,
			  int64_t duration_nanos,
			  struct plabel_prof *profs[PLABEL_PROF_NKINDS]);

#endif /* PLABEL_TOOLS_COLLECT_H */
