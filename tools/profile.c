// SPDX-License-Identifier: GPL-2.0
/*
 * In-memory pprof profile: the model, its builder and read access. The
 * wire format (profile.proto, gzipped) is pprof_codec.c's.
 *
 * Strings are interned: every distinct string is stored once, in a block
 * that also records its index in the string table, so the profile hands
 * out plain `const char *` and still finds the index in O(1) when writing.
 * Lookups (strings, mappings, locations, functions, samples, ids) go
 * through one small open-addressing hash table.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"
#include "profile_model.h"

/* ---- hashing ---- */

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= c[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/*
 * A word at a time: a sample's key is some 20 words, hashed for every
 * sample, where FNV's byte loop was eight dependent multiplies per word.
 */
static uint64_t hash_u64(uint64_t h, uint64_t v)
{
	h = (h ^ v) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 32);
}

#define PLABEL_HASH_INIT	0xcbf29ce484222325ull

/* ---- the profile ---- */

/* Interned copy of s[0..len); NULL on ENOMEM. */
static const char *str_get_n(struct plabel_prof *p, const char *s,
			     size_t len)
{
	uint64_t hash = hash_bytes(PLABEL_HASH_INIT, s, len);
	size_t pos = SIZE_MAX, i;
	struct plabel_pstr *ps;

	while ((i = plabel_itab_next(&p->str_h, hash, &pos)) != SIZE_MAX) {
		if (!strncmp(p->strs[i]->s, s, len) && !p->strs[i]->s[len])
			return p->strs[i]->s;
	}
	if (plabel_grow(&p->strs, &p->capstrs, p->nstrs, sizeof(*p->strs)) ||
	    plabel_itab_reserve(&p->str_h, 1))
		return NULL;
	ps = malloc(sizeof(*ps) + len + 1);
	if (!ps)
		return NULL;
	ps->idx = p->nstrs;
	memcpy(ps->s, s, len);
	ps->s[len] = '\0';
	plabel_itab_put(&p->str_h, hash, p->nstrs);
	p->strs[p->nstrs++] = ps;
	return ps->s;
}

static const char *str_get(struct plabel_prof *p, const char *s)
{
	return str_get_n(p, s ? s : "", s ? strlen(s) : 0);
}

static bool is_ctl(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

size_t plabel_prof_escape(char *out, size_t cap, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t len = 0;

	for (; *s; s++) {
		unsigned char c = *s;
		char e[4];
		size_t n = 1, k;

		e[0] = c;
		if (is_ctl(c)) {
			e[0] = '\\';
			e[1] = 'x';
			e[2] = hex[c >> 4];
			e[3] = hex[c & 15];
			n = 4;
		} else if (c == '\\') {
			e[1] = '\\';
			n = 2;
		}
		for (k = 0; k < n; k++, len++)
			if (len + 1 < cap)
				out[len] = e[k];
	}
	if (cap)
		out[len < cap ? len : cap - 1] = '\0';
	return len;
}

/*
 * A string from outside plabel (a label, a symbol or file name from a
 * profiled program's ELF, a mapping's path), interned escaped: what the
 * file holds is printable and what every viewer shows is the same.
 * always: escape a backslash even when nothing else needs it (what the
 * builder does, so escaped text cannot be mistaken for the original);
 * otherwise only strings with a control byte are escaped (the reader, for
 * files written elsewhere: plabel's own are left as they are).
 */
const char *plabel_prof_str_esc(struct plabel_prof *p, const char *s,
				bool always)
{
	const char *c;
	bool need = false;
	const char *ret;
	size_t len;
	char *e;

	if (!s)
		return str_get(p, s);
	for (c = s; *c && !need; c++)
		need = is_ctl(*c) || (always && *c == '\\');
	if (!need)
		return str_get(p, s);
	len = plabel_prof_escape(NULL, 0, s);
	e = malloc(len + 1);
	if (!e)
		return NULL;
	plabel_prof_escape(e, len + 1, s);
	ret = str_get_n(p, e, len);
	free(e);
	return ret;
}

struct plabel_prof *plabel_prof_alloc(void)
{
	struct plabel_prof *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	/* string_table[0] is always "" */
	if (!str_get(p, "")) {
		free(p);
		return NULL;
	}
	p->ptype.type = p->ptype.unit = p->strs[0]->s;
	p->default_type = p->drop_frames = p->keep_frames = p->strs[0]->s;
	return p;
}

struct plabel_prof *plabel_prof_new(enum plabel_prof_kind kind,
				    uint64_t period_ns)
{
	struct plabel_prof *p = plabel_prof_alloc();
	const struct plabel_kind *k;
	size_t i;

	if (!p)
		return NULL;
	p->built = true;
	if ((unsigned int)kind >= PLABEL_PROF_NKINDS)
		goto err_free;
	k = &plabel_kinds[kind];
	p->nstypes = k->nvalues;
	p->stypes = calloc(p->nstypes, sizeof(*p->stypes));
	if (!p->stypes)
		goto err_free;
	for (i = 0; i < k->nvalues; i++) {
		p->stypes[i].type = str_get(p, k->values[i].type);
		p->stypes[i].unit = str_get(p, k->values[i].unit);
		if (!p->stypes[i].type || !p->stypes[i].unit)
			goto err_free;
	}
	p->ptype = p->stypes[k->period_value];
	if (k->period_type.type) {
		p->ptype.type = str_get(p, k->period_type.type);
		p->ptype.unit = str_get(p, k->period_type.unit);
		if (!p->ptype.type || !p->ptype.unit)
			goto err_free;
	}
	p->nanos_only = k->nanos_only;
	p->period = k->period_is_sampling ? (int64_t)period_ns : 1;
	if (k->default_type) {
		p->default_type = str_get(p, k->default_type);
		if (!p->default_type)
			goto err_free;
	}
	return p;

err_free:
	plabel_prof_free(p);
	return NULL;
}

void plabel_prof_free(struct plabel_prof *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->nsamples; i++) {
		free(p->samples[i].locs);
		free(p->samples[i].values);
		free(p->samples[i].labels);
		free(p->samples[i].num);
	}
	free(p->samples);
	for (i = 0; i < p->nlsets; i++)
		free(p->lsets[i].labels);
	free(p->lsets);
	for (i = 0; i < p->nlocs; i++) {
		free(p->locs[i].lines);
		free(p->locs[i].func_idx);
	}
	free(p->locs);
	free(p->funcs);
	free(p->maps);
	free(p->comments);
	free(p->stypes);
	for (i = 0; i < p->nstrs; i++)
		free(p->strs[i]);
	free(p->strs);
	plabel_itab_free(&p->str_h);
	plabel_itab_free(&p->map_key_h);
	plabel_itab_free(&p->map_id_h);
	plabel_itab_free(&p->func_key_h);
	plabel_itab_free(&p->func_id_h);
	plabel_itab_free(&p->loc_key_h);
	plabel_itab_free(&p->loc_id_h);
	plabel_itab_free(&p->sample_h);
	free(p);
}

int plabel_prof_set_main_mapping(struct plabel_prof *p, uint64_t mapping_id)
{
	size_t i;

	for (i = 0; i < p->nmaps; i++) {
		if (p->maps[i].id == mapping_id) {
			p->main_map = i;
			return 0;
		}
	}
	return -ENOENT;
}

void plabel_prof_set_period(struct plabel_prof *p, int64_t period)
{
	p->period = period;
}

int plabel_prof_set_default_type(struct plabel_prof *p, const char *type)
{
	size_t i;

	for (i = 0; i < p->nstypes; i++)
		if (!strcmp(p->stypes[i].type, type)) {
			p->default_type = p->stypes[i].type;
			return 0;
		}
	return -EINVAL;
}

void plabel_prof_set_time(struct plabel_prof *p, int64_t time_nanos,
			  int64_t duration_nanos)
{
	p->time_nanos = time_nanos;
	p->duration_nanos = duration_nanos;
}

int plabel_add_comment_str(struct plabel_prof *p, const char *s)
{
	if (plabel_grow(&p->comments, &p->capcomments, p->ncomments,
			sizeof(*p->comments)))
		return -ENOMEM;
	p->comments[p->ncomments++] = s;
	return 0;
}

int plabel_prof_add_comment(struct plabel_prof *p, const char *comment)
{
	const char *s;

	if (!comment)
		return -EINVAL;
	s = str_get(p, comment);
	if (!s)
		return -ENOMEM;
	return plabel_add_comment_str(p, s);
}

int plabel_prof_set_drop_frames(struct plabel_prof *p, const char *drop,
				const char *keep)
{
	const char *d = str_get(p, drop), *k = str_get(p, keep);

	if (!d || !k)
		return -ENOMEM;
	p->drop_frames = d;
	p->keep_frames = k;
	return 0;
}

/* ---- id lookups ---- */

uint64_t plabel_id_hash(uint64_t id)
{
	return hash_u64(PLABEL_HASH_INIT, id);
}

size_t plabel_find_map(const struct plabel_prof *p, uint64_t id)
{
	size_t pos = SIZE_MAX, i;

	while ((i = plabel_itab_next(&p->map_id_h, plabel_id_hash(id), &pos)) !=
	       SIZE_MAX)
		if (p->maps[i].id == id)
			return i;
	return SIZE_MAX;
}

size_t plabel_find_func(const struct plabel_prof *p, uint64_t id)
{
	size_t pos = SIZE_MAX, i;

	while ((i = plabel_itab_next(&p->func_id_h, plabel_id_hash(id),
				     &pos)) != SIZE_MAX)
		if (p->funcs[i].id == id)
			return i;
	return SIZE_MAX;
}

size_t plabel_find_loc(const struct plabel_prof *p, uint64_t id)
{
	size_t pos = SIZE_MAX, i;

	while ((i = plabel_itab_next(&p->loc_id_h, plabel_id_hash(id), &pos)) !=
	       SIZE_MAX)
		if (p->locs[i].id == id)
			return i;
	return SIZE_MAX;
}

/* ---- builder ---- */

static uint64_t map_hash(const struct plabel_pmap *m)
{
	uint64_t h = PLABEL_HASH_INIT;

	h = hash_u64(h, m->start);
	h = hash_u64(h, m->limit);
	h = hash_u64(h, m->offset);
	h = hash_u64(h, (uintptr_t)m->file);
	return hash_u64(h, (uintptr_t)m->build_id);
}

/* Append a mapping (id already set); returns its index or SIZE_MAX. */
size_t plabel_add_map(struct plabel_prof *p, const struct plabel_pmap *m,
		      bool keyed)
{
	size_t i = p->nmaps;

	if (plabel_grow(&p->maps, &p->capmaps, p->nmaps, sizeof(*p->maps)) ||
	    plabel_itab_reserve(&p->map_id_h, 1) ||
	    (keyed && plabel_itab_reserve(&p->map_key_h, 1)))
		return SIZE_MAX;
	plabel_itab_put(&p->map_id_h, plabel_id_hash(m->id), i);
	if (keyed)
		plabel_itab_put(&p->map_key_h, map_hash(m), i);
	p->maps[p->nmaps++] = *m;
	return i;
}

/*
 * A string for the builder: from outside plabel (esc: escaped as
 * plabel_prof_str_esc() says), or one a profile of this builder stored
 * (already escaped: as it is).
 */
static const char *str_in(struct plabel_prof *p, const char *s, bool esc)
{
	return esc ? plabel_prof_str_esc(p, s, true) : str_get(p, s);
}

static uint64_t mapping_get(struct plabel_prof *p, uint64_t start,
			    uint64_t limit, uint64_t offset, const char *file,
			    const char *build_id, bool esc)
{
	struct plabel_pmap m = {
		.start = start, .limit = limit, .offset = offset,
	};
	size_t pos = SIZE_MAX, i;
	uint64_t h;

	if (!p->built)
		return 0;
	m.file = str_in(p, file, esc);
	m.build_id = str_get(p, build_id);
	if (!m.file || !m.build_id)
		return 0;
	h = map_hash(&m);
	while ((i = plabel_itab_next(&p->map_key_h, h, &pos)) != SIZE_MAX) {
		const struct plabel_pmap *o = &p->maps[i];

		if (o->start == start && o->limit == limit &&
		    o->offset == offset && o->file == m.file &&
		    o->build_id == m.build_id)
			return o->id;
	}
	/*
	 * Symbols are resolved when recording; mark the mapping as
	 * symbolized so viewers do not re-symbolize it against whatever
	 * binary happens to be at that path on the viewing machine, which
	 * would make them disagree with `plabel report`.
	 */
	m.has_functions = true;
	m.id = p->nmaps + 1;
	if (plabel_add_map(p, &m, true) == SIZE_MAX)
		return 0;
	return m.id;
}

uint64_t plabel_prof_mapping(struct plabel_prof *p, uint64_t start,
			     uint64_t limit, uint64_t offset, const char *file,
			     const char *build_id)
{
	return mapping_get(p, start, limit, offset, file, build_id, true);
}

static uint64_t func_hash(const char *name, const char *file)
{
	uint64_t h = hash_u64(PLABEL_HASH_INIT, (uintptr_t)name);

	return hash_u64(h, (uintptr_t)file);
}

/* Index of the function (name, file), added if new; SIZE_MAX on ENOMEM. */
static size_t func_get(struct plabel_prof *p, const char *name,
		       const char *file)
{
	uint64_t h = func_hash(name, file);
	size_t pos = SIZE_MAX, i;
	struct plabel_pfunc *f;

	while ((i = plabel_itab_next(&p->func_key_h, h, &pos)) != SIZE_MAX)
		if (p->funcs[i].name == name && p->funcs[i].file == file)
			return i;
	if (plabel_grow(&p->funcs, &p->capfuncs, p->nfuncs, sizeof(*p->funcs)) ||
	    plabel_itab_reserve(&p->func_key_h, 1) ||
	    plabel_itab_reserve(&p->func_id_h, 1))
		return SIZE_MAX;
	i = p->nfuncs;
	plabel_itab_put(&p->func_key_h, h, i);
	plabel_itab_put(&p->func_id_h, plabel_id_hash(i + 1), i);
	f = &p->funcs[i];
	f->id = i + 1;
	f->name = name;
	/* Left empty so viewers keep the name as given (no re-demangling). */
	f->system_name = p->strs[0]->s;
	f->file = file;
	f->start_line = 0;
	p->nfuncs++;
	return i;
}

static uint64_t loc_hash(uint64_t mapping_id, uint64_t address)
{
	return hash_u64(hash_u64(PLABEL_HASH_INIT, mapping_id),
			address);
}

static uint64_t location_get(struct plabel_prof *p, uint64_t mapping_id,
			     uint64_t address,
			     const struct plabel_prof_line *lines,
			     size_t nlines, bool esc)
{
	uint64_t h = loc_hash(mapping_id, address);
	struct plabel_ploc l = { .mapping_id = mapping_id, .address = address };
	struct plabel_pmap *m = NULL;
	size_t pos = SIZE_MAX, i;

	if (!p->built)
		return 0;
	while ((i = plabel_itab_next(&p->loc_key_h, h, &pos)) != SIZE_MAX)
		if (p->locs[i].mapping_id == mapping_id &&
		    p->locs[i].address == address)
			return p->locs[i].id;
	if (mapping_id) {
		i = plabel_find_map(p, mapping_id);
		if (i == SIZE_MAX)
			return 0;
		m = &p->maps[i];
	}
	if (nlines && !lines)
		return 0;
	if (nlines) {
		l.lines = calloc(nlines, sizeof(*l.lines));
		l.func_idx = calloc(nlines, sizeof(*l.func_idx));
		if (!l.lines || !l.func_idx)
			goto err_free;
	}
	for (i = 0; i < nlines; i++) {
		const char *name = str_in(p, lines[i].function, esc);
		const char *file = str_in(p, lines[i].file, esc);

		if (!name || !file)
			goto err_free;
		l.func_idx[i] = func_get(p, name, file);
		if (l.func_idx[i] == SIZE_MAX)
			goto err_free;
		l.lines[i].function = name;
		l.lines[i].file = file;
		l.lines[i].line = lines[i].line;
		if (m && *file)
			m->has_filenames = true;
		if (m && lines[i].line)
			m->has_line_numbers = true;
	}
	if (m && nlines > 1)
		m->has_inline_frames = true;
	l.nlines = nlines;
	if (plabel_grow(&p->locs, &p->caplocs, p->nlocs, sizeof(*p->locs)) ||
	    plabel_itab_reserve(&p->loc_key_h, 1) ||
	    plabel_itab_reserve(&p->loc_id_h, 1))
		goto err_free;
	i = p->nlocs;
	l.id = i + 1;
	plabel_itab_put(&p->loc_key_h, h, i);
	plabel_itab_put(&p->loc_id_h, plabel_id_hash(l.id), i);
	p->locs[p->nlocs++] = l;
	return l.id;

err_free:
	free(l.lines);
	free(l.func_idx);
	return 0;
}

uint64_t plabel_prof_location(struct plabel_prof *p, uint64_t mapping_id,
			      uint64_t address,
			      const struct plabel_prof_line *lines,
			      size_t nlines)
{
	return location_get(p, mapping_id, address, lines, nlines, true);
}

static int label_cmp(const void *a, const void *b)
{
	const struct plabel_prof_label *x = a, *y = b;

	return strcmp(x->key, y->key);
}

/*
 * What identifies a sample (label strings interned: pointers compare). A
 * candidate points at the caller's and scratch arrays and is copied only
 * when no sample like it exists yet.
 */
struct plabel_skey {
	const uint64_t *locs;
	size_t nlocs;
	const struct plabel_prof_label *labels;	/* sorted by key */
	size_t nlabels;
	const struct plabel_prof_numlabel *num;
	size_t nnum;
};

static uint64_t sample_hash(const struct plabel_skey *k)
{
	uint64_t h = PLABEL_HASH_INIT;
	size_t i;

	h = hash_u64(h, k->nlocs);
	for (i = 0; i < k->nlocs; i++)
		h = hash_u64(h, k->locs[i]);
	h = hash_u64(h, k->nlabels);
	for (i = 0; i < k->nlabels; i++) {
		h = hash_u64(h, (uintptr_t)k->labels[i].key);
		h = hash_u64(h, (uintptr_t)k->labels[i].value);
	}
	h = hash_u64(h, k->nnum);
	for (i = 0; i < k->nnum; i++) {
		h = hash_u64(h, (uintptr_t)k->num[i].key);
		h = hash_u64(h, (uint64_t)k->num[i].num);
		h = hash_u64(h, (uintptr_t)k->num[i].unit);
	}
	return h;
}

static bool sample_eq(const struct plabel_psample *a,
		      const struct plabel_skey *b)
{
	size_t i;

	if (a->nlocs != b->nlocs || a->nlabels != b->nlabels ||
	    a->nnum != b->nnum)
		return false;
	if (a->nlocs && memcmp(a->locs, b->locs, a->nlocs * sizeof(*a->locs)))
		return false;
	for (i = 0; i < a->nlabels; i++)
		if (a->labels[i].key != b->labels[i].key ||
		    a->labels[i].value != b->labels[i].value)
			return false;
	for (i = 0; i < a->nnum; i++)
		if (a->num[i].key != b->num[i].key ||
		    a->num[i].num != b->num[i].num ||
		    a->num[i].unit != b->num[i].unit)
			return false;
	return true;
}

static void sample_release(struct plabel_psample *s)
{
	free(s->locs);
	free(s->values);
	free(s->labels);
	free(s->num);
}

/* Every id names a location; on a built profile they are 1..nlocs. */
static bool locs_valid(const struct plabel_prof *p,
		       const uint64_t *loc_ids, size_t nlocs)
{
	size_t i;

	for (i = 0; i < nlocs; i++)
		if (loc_ids[i] - 1 >= p->nlocs)
			return false;
	return true;
}

/*
 * Intern labels into out, in the order given (the string table keeps the
 * order strings first appear in), then sort them by key. -EINVAL for a
 * NULL key or value or a repeated key.
 */
static int labels_get(struct plabel_prof *p,
		      const struct plabel_prof_label *labels,
		      size_t n, struct plabel_prof_label *out, bool esc)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!labels[i].key || !labels[i].value)
			return -EINVAL;
	for (i = 0; i < n; i++) {
		out[i].key = str_in(p, labels[i].key, esc);
		out[i].value = str_in(p, labels[i].value, esc);
		if (!out[i].key || !out[i].value)
			return -ENOMEM;
	}
	qsort(out, n, sizeof(*out), label_cmp);
	for (i = 1; i < n; i++)
		if (out[i].key == out[i - 1].key)
			return -EINVAL;
	return 0;
}

/* "pid" or "tid" as a numeric label, the key interned on first use. */
static int num_label(struct plabel_prof *p, const char **key,
		     const char *name, int64_t num,
		     struct plabel_prof_numlabel *out)
{
	if (!*key)
		*key = str_get(p, name);
	if (!*key)
		return -ENOMEM;
	out->key = *key;
	out->num = num;
	out->unit = p->strs[0]->s;
	return 0;
}

/* A copy of the candidate k as a new sample with the values given. */
static int sample_insert(struct plabel_prof *p,
			 const struct plabel_skey *k, uint64_t hash,
			 const int64_t *vals)
{
	struct plabel_psample s = {
		.nlocs = k->nlocs, .nlabels = k->nlabels, .nnum = k->nnum,
		.hash = hash,
	};
	size_t i;

	s.locs = malloc((k->nlocs ? k->nlocs : 1) * sizeof(*s.locs));
	s.values = calloc(p->nstypes, sizeof(*s.values));
	s.labels = calloc(k->nlabels ? k->nlabels : 1, sizeof(*s.labels));
	s.num = calloc(2, sizeof(*s.num));
	if (!s.locs || !s.values || !s.labels || !s.num)
		goto err_free;
	if (k->nlocs)
		memcpy(s.locs, k->locs, k->nlocs * sizeof(*s.locs));
	if (k->nlabels)
		memcpy(s.labels, k->labels, k->nlabels * sizeof(*s.labels));
	if (k->nnum)
		memcpy(s.num, k->num, k->nnum * sizeof(*s.num));
	for (i = 0; i < p->nstypes && i < PLABEL_KIND_MAX_VALUES; i++)
		s.values[i] = vals[i];
	if (plabel_grow(&p->samples, &p->capsamples, p->nsamples,
			sizeof(*p->samples)) ||
	    plabel_itab_reserve(&p->sample_h, 1))
		goto err_free;
	plabel_itab_put(&p->sample_h, hash, p->nsamples);
	p->samples[p->nsamples++] = s;
	return 0;

err_free:
	sample_release(&s);
	return -ENOMEM;
}

/*
 * Add the values to the sample (locs, labels, pid, tid), made if new. locs
 * are checked, labels interned and sorted. Most samples repeat one already
 * there: those allocate nothing.
 */
static int sample_add(struct plabel_prof *p, const uint64_t *locs,
		      size_t nlocs,
		      const struct plabel_prof_label *labels,
		      size_t nlabels, int64_t pid, int64_t tid,
		      const int64_t *vals)
{
	struct plabel_prof_numlabel num[2];
	struct plabel_skey k = {
		.locs = locs, .nlocs = nlocs,
		.labels = labels, .nlabels = nlabels, .num = num,
	};
	int64_t one[PLABEL_KIND_MAX_VALUES];
	size_t pos = SIZE_MAX, i, v;
	uint64_t hash;

	if (p->nanos_only) {
		/* the one value is the nanoseconds (vals[1]) */
		memset(one, 0, sizeof(one));
		one[0] = vals[1];
		vals = one;
	}
	if (pid >= 0 &&
	    num_label(p, &p->pid_key, "pid", pid, &num[k.nnum++]))
		return -ENOMEM;
	if (tid >= 0 &&
	    num_label(p, &p->tid_key, "tid", tid, &num[k.nnum++]))
		return -ENOMEM;
	hash = sample_hash(&k);
	while ((i = plabel_itab_next(&p->sample_h, hash, &pos)) != SIZE_MAX) {
		struct plabel_psample *o = &p->samples[i];

		if (!sample_eq(o, &k))
			continue;
		for (v = 0; v < p->nstypes && v < PLABEL_KIND_MAX_VALUES; v++)
			o->values[v] = (int64_t)((uint64_t)o->values[v] +
						 (uint64_t)vals[v]);
		return 0;
	}
	return sample_insert(p, &k, hash, vals);
}

/* Labels up to this many are sorted on the stack. */
#define PLABEL_PROF_STACK_LABELS	16

int plabel_prof_sample(struct plabel_prof *p, const uint64_t *loc_ids,
		       size_t nlocs, const struct plabel_prof_label *labels,
		       size_t nlabels, int64_t pid, int64_t tid, int64_t count,
		       int64_t nanos)
{
	const int64_t vals[PLABEL_KIND_MAX_VALUES] = { count, nanos };

	return plabel_prof_sample_values(p, loc_ids, nlocs, labels, nlabels,
					 pid, tid, vals);
}

int plabel_prof_sample_values(struct plabel_prof *p, const uint64_t *loc_ids,
			      size_t nlocs,
			      const struct plabel_prof_label *labels,
			      size_t nlabels, int64_t pid, int64_t tid,
			      const int64_t *vals)
{
	struct plabel_prof_label stack[PLABEL_PROF_STACK_LABELS];
	struct plabel_prof_label *sorted = stack;
	int ret;

	if (!p->built || (nlocs && !loc_ids) || (nlabels && !labels) ||
	    !locs_valid(p, loc_ids, nlocs))
		return -EINVAL;
	if (nlabels > PLABEL_PROF_STACK_LABELS) {
		sorted = malloc(nlabels * sizeof(*sorted));
		if (!sorted)
			return -ENOMEM;
	}
	ret = labels_get(p, labels, nlabels, sorted, true);
	if (!ret)
		ret = sample_add(p, loc_ids, nlocs, sorted, nlabels,
				 pid, tid, vals);
	if (sorted != stack)
		free(sorted);
	return ret;
}

int plabel_prof_labelset(struct plabel_prof *p,
			 const struct plabel_prof_label *labels,
			 size_t nlabels, uint32_t *id)
{
	struct plabel_plset ls = { .n = nlabels };
	int ret;

	if (!p->built || (nlabels && !labels))
		return -EINVAL;
	if (p->nlsets >= UINT32_MAX)
		return -ENOMEM;
	ls.labels = malloc((nlabels ? nlabels : 1) * sizeof(*ls.labels));
	if (!ls.labels)
		return -ENOMEM;
	ret = labels_get(p, labels, nlabels, ls.labels, true);
	if (!ret && plabel_grow(&p->lsets, &p->caplsets, p->nlsets,
				sizeof(*p->lsets)))
		ret = -ENOMEM;
	if (ret) {
		free(ls.labels);
		return ret;
	}
	p->lsets[p->nlsets++] = ls;
	*id = p->nlsets;
	return 0;
}

int plabel_prof_sample_labelset(struct plabel_prof *p,
				const uint64_t *loc_ids, size_t nlocs,
				uint32_t labelset, int64_t pid, int64_t tid,
				int64_t count, int64_t nanos)
{
	const int64_t vals[PLABEL_KIND_MAX_VALUES] = { count, nanos };

	return plabel_prof_sample_labelset_values(p, loc_ids, nlocs, labelset,
						  pid, tid, vals);
}

int plabel_prof_sample_labelset_values(struct plabel_prof *p,
				       const uint64_t *loc_ids, size_t nlocs,
				       uint32_t labelset, int64_t pid,
				       int64_t tid, const int64_t *vals)
{
	const struct plabel_plset *ls;

	if (!p->built || (nlocs && !loc_ids) || labelset > p->nlsets ||
	    !locs_valid(p, loc_ids, nlocs))
		return -EINVAL;
	if (!labelset)
		return sample_add(p, loc_ids, nlocs, NULL, 0, pid, tid, vals);
	ls = &p->lsets[labelset - 1];
	return sample_add(p, loc_ids, nlocs, ls->labels, ls->n, pid,
			  tid, vals);
}

/* Base's sample s into p with its values negated. 0 or -ENOMEM. */
static int sample_sub(struct plabel_prof *p, const struct plabel_prof *base,
		      const struct plabel_psample *s, const uint64_t *loc_of,
		      uint64_t *locs, struct plabel_prof_label *labels)
{
	int64_t neg[PLABEL_KIND_MAX_VALUES] = { 0 };
	int64_t pid = -1, tid = -1;
	size_t i;
	int ret;

	for (i = 0; i < s->nlocs; i++)
		locs[i] = loc_of[plabel_find_loc(base, s->locs[i])];
	for (i = 0; i < s->nnum; i++) {
		if (s->num[i].key == base->pid_key)
			pid = s->num[i].num;
		else if (s->num[i].key == base->tid_key)
			tid = s->num[i].num;
	}
	/* a nanoseconds-only kind keeps its one value as vals[1] */
	for (i = 0; i < base->nstypes && i < PLABEL_KIND_MAX_VALUES; i++)
		neg[p->nanos_only ? 1 : i] =
			(int64_t)(0 - (uint64_t)s->values[i]);
	ret = labels_get(p, s->labels, s->nlabels, labels, false);
	return ret ? ret : sample_add(p, locs, s->nlocs, labels, s->nlabels,
				      pid, tid, neg);
}

int plabel_prof_subtract(struct plabel_prof *p, const struct plabel_prof *base)
{
	struct plabel_prof_label *labels = NULL;
	uint64_t *map_of = NULL, *loc_of = NULL, *locs = NULL;
	size_t i, v, n, maxlocs = 1, maxlabels = 1;
	int ret = -ENOMEM;

	if (!p->built || !base->built || p->nstypes != base->nstypes ||
	    p->nanos_only != base->nanos_only)
		return -EINVAL;
	for (i = 0; i < p->nstypes; i++)
		if (strcmp(p->stypes[i].type, base->stypes[i].type))
			return -EINVAL;
	for (i = 0; i < base->nsamples; i++) {
		if (base->samples[i].nlocs > maxlocs)
			maxlocs = base->samples[i].nlocs;
		if (base->samples[i].nlabels > maxlabels)
			maxlabels = base->samples[i].nlabels;
	}
	map_of = calloc(base->nmaps + 1, sizeof(*map_of));
	loc_of = calloc(base->nlocs + 1, sizeof(*loc_of));
	locs = calloc(maxlocs, sizeof(*locs));
	labels = calloc(maxlabels, sizeof(*labels));
	if (!map_of || !loc_of || !locs || !labels)
		goto out;
	/* the same mapping, location or string is found, not made again */
	for (i = 0; i < base->nmaps; i++) {
		const struct plabel_pmap *m = &base->maps[i];

		map_of[i] = mapping_get(p, m->start, m->limit, m->offset,
					m->file, m->build_id, false);
		if (!map_of[i])
			goto out;
	}
	for (i = 0; i < base->nlocs; i++) {
		const struct plabel_ploc *l = &base->locs[i];
		uint64_t mid = l->mapping_id ?
			       map_of[plabel_find_map(base, l->mapping_id)] : 0;

		loc_of[i] = location_get(p, mid, l->address, l->lines,
					 l->nlines, false);
		if (!loc_of[i])
			goto out;
	}
	for (i = 0; i < base->nsamples; i++) {
		ret = sample_sub(p, base, &base->samples[i], loc_of, locs,
				 labels);
		if (ret)
			goto out;
	}
	/* what is the same in both is gone */
	for (i = n = 0; i < p->nsamples; i++) {
		for (v = 0; v < p->nstypes && !p->samples[i].values[v]; v++)
			;
		if (v == p->nstypes)
			sample_release(&p->samples[i]);
		else
			p->samples[n++] = p->samples[i];
	}
	p->nsamples = n;
	plabel_itab_clear(&p->sample_h);
	for (i = 0; i < n; i++)
		plabel_itab_put(&p->sample_h, p->samples[i].hash, i);
	ret = 0;
out:
	free(map_of);
	free(loc_of);
	free(locs);
	free(labels);
	return ret;
}

/* ---- read access ---- */

size_t plabel_prof_num_values(const struct plabel_prof *p)
{
	return p->nstypes;
}

struct plabel_prof_value_type
plabel_prof_sample_type(const struct plabel_prof *p, size_t i)
{
	return p->stypes[i];
}

struct plabel_prof_value_type
plabel_prof_period_type(const struct plabel_prof *p)
{
	return p->ptype;
}

int64_t plabel_prof_period(const struct plabel_prof *p)
{
	return p->period;
}

size_t plabel_prof_default_index(const struct plabel_prof *p)
{
	size_t i;

	if (!p->nstypes)
		return 0;
	if (*p->default_type)
		for (i = 0; i < p->nstypes; i++)
			if (p->stypes[i].type == p->default_type)
				return i;
	return p->nstypes - 1;
}

int64_t plabel_prof_time_nanos(const struct plabel_prof *p)
{
	return p->time_nanos;
}

int64_t plabel_prof_duration_nanos(const struct plabel_prof *p)
{
	return p->duration_nanos;
}

const char *plabel_prof_drop_frames(const struct plabel_prof *p)
{
	return p->drop_frames;
}

const char *plabel_prof_keep_frames(const struct plabel_prof *p)
{
	return p->keep_frames;
}

size_t plabel_prof_num_comments(const struct plabel_prof *p)
{
	return p->ncomments;
}

const char *plabel_prof_comment(const struct plabel_prof *p, size_t i)
{
	return p->comments[i];
}

size_t plabel_prof_num_samples(const struct plabel_prof *p)
{
	return p->nsamples;
}

void plabel_prof_get_sample(const struct plabel_prof *p, size_t i,
			    struct plabel_prof_sample_info *out)
{
	const struct plabel_psample *s = &p->samples[i];

	out->loc_ids = s->locs;
	out->nlocs = s->nlocs;
	out->values = s->values;
	out->labels = s->labels;
	out->nlabels = s->nlabels;
	out->numlabels = s->num;
	out->nnumlabels = s->nnum;
}

size_t plabel_prof_num_mappings(const struct plabel_prof *p)
{
	return p->nmaps;
}

void plabel_prof_get_mapping(const struct plabel_prof *p, size_t i,
			     struct plabel_prof_mapping_info *out)
{
	const struct plabel_pmap *m = &p->maps[i];

	out->id = m->id;
	out->start = m->start;
	out->limit = m->limit;
	out->offset = m->offset;
	out->file = m->file;
	out->build_id = m->build_id;
}

size_t plabel_prof_num_locations(const struct plabel_prof *p)
{
	return p->nlocs;
}

void plabel_prof_get_location(const struct plabel_prof *p, size_t i,
			      struct plabel_prof_location_info *out)
{
	const struct plabel_ploc *l = &p->locs[i];

	out->id = l->id;
	out->mapping_id = l->mapping_id;
	out->address = l->address;
	out->lines = l->lines;
	out->nlines = l->nlines;
}

int plabel_prof_find_location(const struct plabel_prof *p, uint64_t id,
			      struct plabel_prof_location_info *out)
{
	size_t i = plabel_find_loc(p, id);

	if (i == SIZE_MAX)
		return -ENOENT;
	plabel_prof_get_location(p, i, out);
	return 0;
}
