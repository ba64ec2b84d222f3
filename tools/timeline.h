/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The timeline of a recording (plabel record --timeline): each thread's
 * observations in time (CPU samples, off-CPU intervals, thread creations)
 * written as a Trace Event Format file (JSON, gzipped) that Perfetto UI,
 * chrome://tracing and speedscope open.
 *
 * One track per thread, named after the thread and its process. On the
 * track, slices: on-CPU from where the thread was first seen, or ran again
 * after a wait, to its next switch-out or last observation; off-CPU for
 * each wait (named by its kind). The module reports no label change by
 * itself, so a slice is split where consecutive observations of the
 * thread carry different label sets; a slice's arguments are its labels.
 * Each CPU sample is an instant event with its stack (stackFrames, "sf");
 * each thread creation a flow from the creator's track to the child's.
 *
 * At most max observations are kept (the file stays bounded): later ones
 * are counted, and the count is in the file's metadata.
 */
#ifndef PLABEL_TOOLS_TIMELINE_H
#define PLABEL_TOOLS_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"
#include "table.h"

/* What plabel record writes it to, in its directory. */
#define PLABEL_TIMELINE_FILE	"timeline.json.gz"

/* Observations kept by default: some 500 s of 2 busy CPUs at 999 Hz. */
#define PLABEL_TL_MAX_OBS	1000000

enum plabel_tl_kind {
	PLABEL_TL_SAMPLE,
	PLABEL_TL_OFFCPU,	/* with end_ns, when it ran again */
	PLABEL_TL_THREAD,	/* created child_pid/child_tid */
};

struct plabel_tl_obs {
	uint64_t time_ns;
	uint64_t end_ns;	/* OFFCPU */
	uint64_t set_id;	/* 0: no labels */
	uint64_t seq;		/* the collector's arrival number */
	uint32_t pid, tid;
	uint32_t kind;		/* enum plabel_tl_kind */
	uint32_t wait;		/* OFFCPU: enum plabel_wait_kind */
	uint32_t child_pid, child_tid;	/* THREAD */
	uint32_t chain;		/* the collector's, until resolved */
	uint32_t stack;		/* frame id of the leaf (1 up), 0: none */
	uint32_t skip;		/* left out (the collector says) */
	uint32_t reserved;
};

/* A node of the stack-frame tree: id = index + 1. */
struct plabel_tl_frame {
	uint32_t parent;	/* 0: a root */
	char *name;
};

struct plabel_timeline {
	struct plabel_tl_obs *obs;
	size_t n, cap, max;
	uint64_t dropped;	/* observations past max */
	uint64_t start_ns;	/* of the stream: time 0 */
	struct plabel_tl_frame *frames;
	size_t nframes, frames_cap;
	struct plabel_itab frame_tab;
	/* --timeline-label: only threads that carried it (key NULL: all) */
	char *focus_key, *focus_value;
};

/* What the writer asks of the recording; ctx is the caller's. */
struct plabel_tl_source {
	void *ctx;
	/* the labels of set id (count in *n), NULL when it never came */
	const struct plabel_prof_label *(*labels)(void *ctx, uint64_t id,
						  uint32_t *n);
	/* names at time t, NULL when not known */
	const char *(*thread_name)(void *ctx, uint32_t tid, uint64_t t);
	const char *(*process_name)(void *ctx, uint32_t pid, uint64_t t);
};

/* An empty timeline keeping at most max observations (0: the default). */
void plabel_tl_init(struct plabel_timeline *tl, size_t max);
void plabel_tl_release(struct plabel_timeline *tl);

/*
 * --timeline-label KEY=VALUE: kept for the writer. -EINVAL for a missing
 * '=', an empty key, or a control byte; -ENOMEM.
 */
int plabel_tl_set_focus(struct plabel_timeline *tl, const char *kv);

/*
 * One more observation (copied), or counted as dropped: past the bound
 * or when memory runs out, so that the profiles lose nothing. 0.
 */
int plabel_tl_add(struct plabel_timeline *tl, const struct plabel_tl_obs *o);

/*
 * The id of the frame name (copied) under parent (0: a root), added if
 * new; 0 on ENOMEM.
 */
uint32_t plabel_tl_frame(struct plabel_timeline *tl, uint32_t parent,
			 const char *name);

/*
 * Write the timeline (observations sorted by thread and time here) as
 * JSON: into *out (malloc()ed, *len bytes, NUL-terminated) when path is
 * NULL, else gzipped to path. 0 or a negative errno.
 */
int plabel_tl_write(struct plabel_timeline *tl,
		    const struct plabel_tl_source *src, const char *path,
		    char **out, size_t *len);

/*
 * s as JSON string text (no quotes) appended to *buf (*len used, *cap
 * allocated): as profiles store strings (bytes below 0x20, 0x7f and
 * bytes that are not UTF-8 as \xNN, a backslash doubled), then quoted for
 * JSON. 0 or -ENOMEM.
 */
int plabel_tl_json_str(char **buf, size_t *len, size_t *cap, const char *s);

#endif /* PLABEL_TOOLS_TIMELINE_H */
