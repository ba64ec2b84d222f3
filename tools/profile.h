/* SPDX-License-Identifier: GPL-2.0 */
/*
 * In-memory pprof profile: built by `plabel record`, written as gzipped
 * profile.proto, read back (and validated) by `plabel report`.
 *
 * Ids returned by plabel_prof_mapping() and plabel_prof_location() are the
 * ids written to the file (1, 2, ...); 0 means "none" (or failure, for the
 * functions returning an id). Strings passed in are copied; strings handed
 * out point into the profile and live until plabel_prof_free().
 * The builder calls (mapping, location, sample) work on profiles made by
 * plabel_prof_new(); on a profile read from a file they fail.
 *
 * A profile's sample value types and period come from its kind's row in
 * plabel_kinds[] (kind.c): cpu has samples/count and cpu/nanoseconds,
 * period type cpu/nanoseconds, period period_ns; threadcreate has
 * threadcreate/count alone (nanos ignored), period 1; heap has Go's
 * alloc_objects, alloc_space, inuse_objects and inuse_space, period type
 * space/bytes, period the sampling interval (plabel_prof_set_period()).
 */
#ifndef PLABEL_TOOLS_PROFILE_H
#define PLABEL_TOOLS_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "kind.h"

struct plabel_prof;

/* One source line of a location; lines[0] is the innermost inlined frame,
 * the last line the function the address belongs to (pprof's order). */
struct plabel_prof_line {
	const char *function;	/* NULL: unknown, written as "" */
	const char *file;	/* NULL: unknown */
	int64_t line;		/* 0: unknown */
};

/*
 * A string label, written as Label{key, str}. pprof cannot store an empty
 * value (string index 0 means "no string"): such a label is written but
 * every reader, this one included, drops it.
 */
struct plabel_prof_label {
	const char *key;
	const char *value;
};

/* A numeric label, Label{key, num, num_unit}; unit NULL or "" for none. */
struct plabel_prof_numlabel {
	const char *key;
	int64_t num;
	const char *unit;
};

/*
 * Strings from outside plabel (label keys and values, function and file
 * names, mapping paths) are stored escaped: each byte below 0x20 and 0x7f
 * as \xNN (two lower-case hex digits) and a backslash as \\, so a profile
 * holds only printable text and no label can forge a line of a report. A
 * profile read from a file has its strings that hold such bytes escaped
 * the same way (others are kept as they are, so plabel's own files read
 * back unchanged).
 *
 * plabel_prof_escape() writes s escaped into out (at most cap bytes, NUL
 * included; truncated if short) and returns the escaped length.
 */
size_t plabel_prof_escape(char *out, size_t cap, const char *s);

/* NULL on ENOMEM. */
struct plabel_prof *plabel_prof_new(enum plabel_prof_kind kind,
				    uint64_t period_ns);
void plabel_prof_free(struct plabel_prof *p);

/* Profile-wide fields (all optional). The period: the kind's by default. */
void plabel_prof_set_period(struct plabel_prof *p, int64_t period);
/* The sample type viewers show first, one of the profile's. 0 or -errno. */
int plabel_prof_set_default_type(struct plabel_prof *p, const char *type);
void plabel_prof_set_time(struct plabel_prof *p, int64_t time_nanos,
			  int64_t duration_nanos);
int plabel_prof_add_comment(struct plabel_prof *p, const char *comment);
/*
 * pprof's drop_frames/keep_frames regexes (NULL or "" for none). Viewers
 * hide a frame whose function name fully matches drop (and not keep) and
 * every frame it calls; `plabel report` does the same.
 */
int plabel_prof_set_drop_frames(struct plabel_prof *p, const char *drop,
				const char *keep);

/*
 * A mapped file; identical (start, limit, offset, file, build_id) tuples
 * return the same id. build_id is hex text or NULL. Returns id >= 1, 0 on
 * ENOMEM.
 */
uint64_t plabel_prof_mapping(struct plabel_prof *p, uint64_t start,
			     uint64_t limit, uint64_t offset, const char *file,
			     const char *build_id);
/*
 * The mapping of the main binary, written first (pprof viewers print its
 * file as the profile's "File:"); by default the first one added.
 * -ENOENT if there is no such mapping.
 */
int plabel_prof_set_main_mapping(struct plabel_prof *p, uint64_t mapping_id);

/*
 * A location: mapping_id (0 if none) and address, with nlines source lines
 * (innermost first; nlines 0 when unsymbolized). Deduplicated on
 * (mapping_id, address): the first call's lines win. Functions are
 * deduplicated on (name, file). Returns id >= 1, 0 on ENOMEM or a
 * mapping_id that does not exist.
 */
uint64_t plabel_prof_location(struct plabel_prof *p, uint64_t mapping_id,
			      uint64_t address,
			      const struct plabel_prof_line *lines,
			      size_t nlines);

/*
 * A sample: loc_ids leaf first; string labels (keys unique); pid and tid
 * become numeric labels "pid"/"tid" when >= 0 (pass -1 to leave them out).
 * Samples with the same stack and labels are merged (values added).
 * Returns 0, -EINVAL (unknown location id, NULL key/value) or -ENOMEM.
 */
int plabel_prof_sample(struct plabel_prof *p, const uint64_t *loc_ids,
		       size_t nlocs, const struct plabel_prof_label *labels,
		       size_t nlabels, int64_t pid, int64_t tid, int64_t count,
		       int64_t nanos);

/*
 * The same with every value of the kind (PLABEL_KIND_MAX_VALUES at most,
 * those past the kind's count ignored): the heap's four.
 */
int plabel_prof_sample_values(struct plabel_prof *p, const uint64_t *loc_ids,
			      size_t nlocs,
			      const struct plabel_prof_label *labels,
			      size_t nlabels, int64_t pid, int64_t tid,
			      const int64_t *vals);

/*
 * For many samples with the same labels: check, intern and sort them once
 * (the rules of plabel_prof_sample()). Each call makes a new set; *id (>= 1)
 * is for plabel_prof_sample_labelset() on this profile. 0, -EINVAL or
 * -ENOMEM.
 */
int plabel_prof_labelset(struct plabel_prof *p,
			 const struct plabel_prof_label *labels,
			 size_t nlabels, uint32_t *id);
/*
 * plabel_prof_sample() with the labels of set labelset (0: none). -EINVAL
 * for an unknown location id or set, -ENOMEM.
 */
int plabel_prof_sample_labelset(struct plabel_prof *p,
				const uint64_t *loc_ids, size_t nlocs,
				uint32_t labelset, int64_t pid, int64_t tid,
				int64_t count, int64_t nanos);

/* plabel_prof_sample_labelset() with every value, as above. */
int plabel_prof_sample_labelset_values(struct plabel_prof *p,
				       const uint64_t *loc_ids, size_t nlocs,
				       uint32_t labelset, int64_t pid,
				       int64_t tid, const int64_t *vals);

/*
 * p minus base, both made by plabel_prof_new() with the same kind (Go's
 * delta profiles: a later profile less an earlier one): every sample of
 * base is added to p with its values negated, and the samples whose
 * values are all 0 then go. Base's mappings, locations and labels are
 * matched as they were stored (not escaped again). 0, -EINVAL (not two
 * built profiles of one kind) or -ENOMEM (p then half done: drop it).
 */
int plabel_prof_subtract(struct plabel_prof *p, const struct plabel_prof *base);

/* Gzipped profile.proto to path ("-" for stdout). 0 or a negative errno. */
int plabel_prof_write(const struct plabel_prof *p, const char *path);
/* The same into a malloc()ed buffer. */
int plabel_prof_encode(const struct plabel_prof *p, uint8_t **buf,
		       size_t *len);

/*
 * Read a profile (gzipped or plain profile.proto) and check every index
 * and id in it. 0, or -ENOENT/-EACCES.. from open, -EBADMSG for data that
 * is not a profile (bad gzip, bad protobuf), -EINVAL for a decoded profile
 * that refers to things that do not exist. On error, if err is not NULL,
 * it gets a static-lifetime or profile-independent one-line reason
 * (valid until the next call in this thread).
 */
int plabel_prof_read(const char *path, struct plabel_prof **out,
		     const char **err);
int plabel_prof_decode(const uint8_t *buf, size_t len,
		       struct plabel_prof **out, const char **err);

/* ---- Read access (for report and tests) ---- */

struct plabel_prof_value_type {
	const char *type;
	const char *unit;
};

struct plabel_prof_sample_info {
	const uint64_t *loc_ids;	/* leaf first */
	size_t nlocs;
	const int64_t *values;		/* plabel_prof_num_values() of them */
	const struct plabel_prof_label *labels;
	size_t nlabels;
	const struct plabel_prof_numlabel *numlabels;
	size_t nnumlabels;
};

struct plabel_prof_mapping_info {
	uint64_t id, start, limit, offset;
	const char *file;
	const char *build_id;
};

struct plabel_prof_location_info {
	uint64_t id, mapping_id, address;
	const struct plabel_prof_line *lines;
	size_t nlines;
};

size_t plabel_prof_num_values(const struct plabel_prof *p);
struct plabel_prof_value_type
plabel_prof_sample_type(const struct plabel_prof *p, size_t i);
struct plabel_prof_value_type
plabel_prof_period_type(const struct plabel_prof *p);
int64_t plabel_prof_period(const struct plabel_prof *p);
/* Index of the default sample type (pprof's rule: default_sample_type if
 * set and present, else the last one). */
size_t plabel_prof_default_index(const struct plabel_prof *p);
int64_t plabel_prof_time_nanos(const struct plabel_prof *p);
int64_t plabel_prof_duration_nanos(const struct plabel_prof *p);
/* drop_frames/keep_frames regexes ("" when unset). */
const char *plabel_prof_drop_frames(const struct plabel_prof *p);
const char *plabel_prof_keep_frames(const struct plabel_prof *p);
size_t plabel_prof_num_comments(const struct plabel_prof *p);
const char *plabel_prof_comment(const struct plabel_prof *p, size_t i);

size_t plabel_prof_num_samples(const struct plabel_prof *p);
void plabel_prof_get_sample(const struct plabel_prof *p, size_t i,
			    struct plabel_prof_sample_info *out);
size_t plabel_prof_num_mappings(const struct plabel_prof *p);
void plabel_prof_get_mapping(const struct plabel_prof *p, size_t i,
			     struct plabel_prof_mapping_info *out);
size_t plabel_prof_num_locations(const struct plabel_prof *p);
void plabel_prof_get_location(const struct plabel_prof *p, size_t i,
			      struct plabel_prof_location_info *out);
/* By id; -ENOENT if there is none. */
int plabel_prof_find_location(const struct plabel_prof *p, uint64_t id,
			      struct plabel_prof_location_info *out);

/* `plabel report ARGS`: argv[0] is "report". Returns the exit status. */
int plabel_cmd_report(int argc, char **argv);

#endif /* PLABEL_TOOLS_PROFILE_H */
