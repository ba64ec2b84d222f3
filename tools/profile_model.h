/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Inside the in-memory profile: what profile.c (the model and builder)
 * and pprof_codec.c (profile.proto in and out) share. Nothing else
 * includes this; the rest of the tools use profile.h.
 */
#ifndef PLABEL_TOOLS_PROFILE_MODEL_H
#define PLABEL_TOOLS_PROFILE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile.h"
#include "table.h"

/* Refuse profiles larger than this, compressed or not. */
#define PLABEL_PROF_MAX_BYTES	(512u << 20)

struct plabel_pstr {
	size_t idx;
	char s[];
};

struct plabel_pfunc {
	uint64_t id;
	const char *name, *system_name, *file;
	int64_t start_line;
};

struct plabel_pmap {
	uint64_t id, start, limit, offset;
	const char *file, *build_id;
	bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

struct plabel_ploc {
	uint64_t id, mapping_id, address;
	struct plabel_prof_line *lines;
	size_t *func_idx;	/* per line: index into p->funcs */
	size_t nlines;
	bool is_folded;
};

struct plabel_psample {
	uint64_t *locs;
	size_t nlocs;
	int64_t *values;
	struct plabel_prof_label *labels;
	size_t nlabels;
	struct plabel_prof_numlabel *num;
	size_t nnum;
	uint64_t hash;
};

/* A label set interned once for many samples: sorted by key. */
struct plabel_plset {
	struct plabel_prof_label *labels;
	size_t n;
};

struct plabel_prof {
	bool built;		/* made by the builder, not read from a file */

	struct plabel_pstr **strs;
	size_t nstrs, capstrs;
	struct plabel_itab str_h;

	struct plabel_prof_value_type *stypes;
	size_t nstypes;
	struct plabel_prof_value_type ptype;
	int64_t period;
	bool nanos_only;	/* the kind's one value is the nanoseconds */
	const char *default_type;
	int64_t time_nanos, duration_nanos;
	const char *drop_frames, *keep_frames;
	const char **comments;
	size_t ncomments, capcomments;

	struct plabel_pmap *maps;
	size_t nmaps, capmaps;
	size_t main_map;	/* index of the mapping written first */
	struct plabel_itab map_key_h, map_id_h;

	struct plabel_pfunc *funcs;
	size_t nfuncs, capfuncs;
	struct plabel_itab func_key_h, func_id_h;

	struct plabel_ploc *locs;
	size_t nlocs, caplocs;
	struct plabel_itab loc_key_h, loc_id_h;

	struct plabel_psample *samples;
	size_t nsamples, capsamples;
	struct plabel_itab sample_h;

	/* label sets of plabel_prof_labelset(), by id - 1 */
	struct plabel_plset *lsets;
	size_t nlsets, caplsets;
	/* "pid" and "tid", interned when a sample first needs them */
	const char *pid_key, *tid_key;
};

/* The index in the string table of s, a string the profile interned. */
static inline size_t plabel_str_idx(const char *s)
{
	return ((const struct plabel_pstr *)(s -
		offsetof(struct plabel_pstr, s)))->idx;
}

/* An empty profile: string_table[0] is "". NULL on ENOMEM. */
struct plabel_prof *plabel_prof_alloc(void);
/*
 * Interned s, escaped when it holds control bytes (and backslashes when
 * always). NULL on ENOMEM.
 */
const char *plabel_prof_str_esc(struct plabel_prof *p, const char *s,
				bool always);
/* Append comment s, already interned. 0 or -ENOMEM. */
int plabel_add_comment_str(struct plabel_prof *p, const char *s);
/* Append mapping m (its id set), by key too when keyed; index or SIZE_MAX. */
size_t plabel_add_map(struct plabel_prof *p, const struct plabel_pmap *m,
		      bool keyed);

/* The hash the *_id_h tables file ids under. */
uint64_t plabel_id_hash(uint64_t id);
/* Index of the mapping, function or location with that id, or SIZE_MAX. */
size_t plabel_find_map(const struct plabel_prof *p, uint64_t id);
size_t plabel_find_func(const struct plabel_prof *p, uint64_t id);
size_t plabel_find_loc(const struct plabel_prof *p, uint64_t id);

#endif /* PLABEL_TOOLS_PROFILE_MODEL_H */
