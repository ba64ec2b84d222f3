// SPDX-License-Identifier: GPL-2.0
/*
 * `plabel report`: a text view of a pprof profile whose numbers are the
 * ones `go tool pprof -top` (and `-tags`) prints for the same file.
 *
 * It follows pprof's pipeline for its default "functions" granularity:
 * prune frames matching the profile's drop_frames, aggregate every frame to
 * its function name (frames without a name to their binary), build the
 * call graph once to find nodes whose cumulative value is below 0.5% of the
 * total, drop them and rebuild, sort by flat value, optionally keep the top
 * N and rebuild again, then print with pprof's unit scaling, percentages
 * and header lines. Documentation/report.rst describes each step.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile.h"
#include "table.h"

/* pprof's defaults for text reports. */
#define PLABEL_NODE_FRACTION	0.005
#define PLABEL_EDGE_FRACTION	0.001

/* ---- pprof's measurement units ---- */

struct plabel_unit {
	const char *name;		/* canonical */
	const char *aliases[4];
	double factor;
};

struct plabel_unit_type {
	const struct plabel_unit *def;
	const struct plabel_unit *units;
	size_t n;
};

static const struct plabel_unit plabel_mem_units[] = {
	{ "B", { "b", "byte" }, 1 },
	{ "kB", { "kb", "kbyte", "kilobyte" }, 1024.0 },
	{ "MB", { "mb", "mbyte", "megabyte" }, 1048576.0 },
	{ "GB", { "gb", "gbyte", "gigabyte" }, 1073741824.0 },
	{ "TB", { "tb", "tbyte", "terabyte" }, 1099511627776.0 },
	{ "PB", { "pb", "pbyte", "petabyte" }, 1125899906842624.0 },
};

static const struct plabel_unit plabel_time_units[] = {
	{ "ns", { "ns", "nanosecond" }, 1 },
	{ "us", { "\xce\xbcs", "us", "microsecond" }, 1e3 },
	{ "ms", { "ms", "millisecond" }, 1e6 },
	{ "s", { "s", "sec", "second" }, 1e9 },
	{ "hrs", { "hour", "hr" }, 3600e9 },
};

static const struct plabel_unit plabel_gcu_units[] = {
	{ "n*GCU", { "nanogcu" }, 1e-9 },
	{ "u*GCU", { "microgcu" }, 1e-6 },
	{ "m*GCU", { "milligcu" }, 1e-3 },
	{ "GCU", { "gcu" }, 1 },
	{ "k*GCU", { "kilogcu" }, 1e3 },
	{ "M*GCU", { "megagcu" }, 1e6 },
	{ "G*GCU", { "gigagcu" }, 1e9 },
	{ "T*GCU", { "teragcu" }, 1e12 },
	{ "P*GCU", { "petagcu" }, 1e15 },
};

static const struct plabel_unit plabel_time_default = { "s", { NULL }, 1e9 };
static const struct plabel_unit plabel_gcu_default = { "GCU", { NULL }, 1 };

#define PLABEL_N(a)	(sizeof(a) / sizeof((a)[0]))

static const struct plabel_unit_type plabel_unit_types[] = {
	{ &plabel_mem_units[0], plabel_mem_units, PLABEL_N(plabel_mem_units) },
	{ &plabel_time_default, plabel_time_units,
	  PLABEL_N(plabel_time_units) },
	{ &plabel_gcu_default, plabel_gcu_units, PLABEL_N(plabel_gcu_units) },
};

/* Lower-case, drop a plural "s" (when longer than 2), find the alias. */
static const struct plabel_unit *
plabel_sniff_unit(const struct plabel_unit_type *ut, const char *unit)
{
	char buf[64];
	size_t len = strlen(unit), i, j;

	if (len >= sizeof(buf))
		return NULL;
	for (i = 0; i < len; i++) {
		unsigned char c = unit[i];

		buf[i] = c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
	}
	buf[len] = '\0';
	if (len > 2 && buf[len - 1] == 's')
		buf[len - 1] = '\0';
	for (i = 0; i < ut->n; i++)
		for (j = 0; j < PLABEL_N(ut->units[i].aliases) &&
			    ut->units[i].aliases[j]; j++)
			if (!strcmp(buf, ut->units[i].aliases[j]))
				return &ut->units[i];
	return NULL;
}

/* pprof's measurement.Scale: *unit gets the target unit name ("" when not
 * worth printing). */
static double plabel_scale(int64_t value, const char *from, const char *to,
			   const char **unit)
{
	size_t t, i;

	if (value < 0 && value != INT64_MIN)
		return -plabel_scale(-value, from, to, unit);
	for (t = 0; t < PLABEL_N(plabel_unit_types); t++) {
		const struct plabel_unit_type *ut = &plabel_unit_types[t];
		const struct plabel_unit *fu = plabel_sniff_unit(ut, from), *tu;
		double v, f = 0;

		if (!fu)
			continue;
		v = (double)value * fu->factor;
		if (!strcmp(to, "minimum") || !strcmp(to, "auto")) {
			const char *best = NULL;

			for (i = 0; i < ut->n; i++) {
				if (ut->units[i].factor >= f &&
				    v / ut->units[i].factor >= 1.0) {
					f = ut->units[i].factor;
					best = ut->units[i].name;
				}
			}
			if (best) {
				*unit = best;
				return v / f;
			}
			*unit = ut->def->name;
			return v / ut->def->factor;
		}
		tu = plabel_sniff_unit(ut, to);
		if (!tu)
			tu = ut->def;
		*unit = tu->name;
		return v / tu->factor;
	}
	if (!strcmp(to, "count") || !strcmp(to, "sample") ||
	    !strcmp(to, "unit") || !strcmp(to, "minimum") ||
	    !strcmp(to, "auto"))
		*unit = "";
	else
		*unit = to;
	return (double)value;
}

/* pprof's measurement.ScaledLabel. */
static void plabel_scaled_label(char *buf, size_t size, int64_t value,
				const char *from, const char *to)
{
	const char *unit;
	double v = plabel_scale(value, from, to, &unit);
	size_t len;

	snprintf(buf, size, "%.2f", v);
	len = strlen(buf);
	if (len > 3 && !strcmp(buf + len - 3, ".00"))
		buf[len - 3] = '\0';
	if (!strcmp(buf, "0") || !strcmp(buf, "-0")) {
		snprintf(buf, size, "0");
		return;
	}
	len = strlen(buf);
	snprintf(buf + len, size - len, "%s", unit);
}

/* pprof's measurement.Percentage. */
static void plabel_percentage(char *buf, size_t size, int64_t value,
			      int64_t total)
{
	double ratio = 0;

	if (total)
		ratio = (double)value / (double)total * 100;
	if (ratio < 0)
		ratio = -ratio;
	if (ratio >= 99.95 && ratio <= 100.05)
		snprintf(buf, size, "  100%%");
	else if (ratio >= 1.0)
		snprintf(buf, size, "%5.2f%%", ratio);
	else
		snprintf(buf, size, "%5.2g%%", ratio);
}

/*
 * Go's int64 arithmetic wraps on overflow; so does this (in unsigned
 * arithmetic, where C defines it), whatever values a file holds.
 */
static int64_t plabel_abs64(int64_t v)
{
	return v < 0 ? (int64_t)(0 - (uint64_t)v) : v;
}

static int64_t plabel_add64(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* ---- the report's view of the profile ---- */

struct plabel_node {
	const char *name;	/* function name, or NULL: binary-only node */
	const char *objfile;	/* for binary-only nodes ("" if none) */
	int64_t start_line;	/* likewise */
	char *printable;
	char *info;		/* Go's fmt.Sprint of pprof's NodeInfo */
	int64_t flat, cum;
	bool in_inline, in_noinline;
	size_t order;		/* position after sorting */
};

struct plabel_edge {
	size_t src, dst;
	int64_t weight;
	bool inline_;
	uint64_t seen;
};

struct plabel_rloc {
	uint64_t id;
	uint64_t mapping_id;	/* 0: none */
	size_t first;		/* first line kept after pruning */
	size_t *nodes;		/* node per line */
	size_t nlines;		/* >= 1: a location without lines has one */
	bool prune, prune_beneath;
};

struct plabel_rsample {
	size_t *locs;		/* indices into rep->locs, leaf first */
	size_t nlocs;
	int64_t value;
	const struct plabel_prof_sample_info *info;
};

struct plabel_numunit {
	const char *key, *unit;
};

struct plabel_report {
	struct plabel_prof *p;
	/* pprof's NumLabelUnits: per numeric label key, the first unit
	 * given in the whole profile, else one inferred from the key */
	struct plabel_numunit *units;
	size_t nunits, capunits;
	size_t si;
	const char *stype, *sunit;	/* sunit lower-cased */
	char sunit_buf[64];
	char out_unit[16];
	int64_t total;

	struct plabel_rloc *locs;
	size_t nlocs;
	struct plabel_prof_sample_info *sinfo;
	struct plabel_rsample *samples;
	size_t nsamples;
	bool filtered;		/* --tagfocus/--tagignore left samples out */

	struct plabel_node *nodes;
	size_t nnodes, capnodes;

	/* one graph build */
	bool *kept;		/* NULL: all */
	struct plabel_edge *edges;
	size_t nedges, capedges;
	struct plabel_itab edge_tab;
	uint64_t *node_seen;
	uint64_t gen;
};

static const char *plabel_basename(const char *path)
{
	const char *s;
	size_t len = strlen(path);

	/* Go's filepath.Base: trailing slashes removed first. */
	while (len > 1 && path[len - 1] == '/')
		len--;
	for (s = path + len; s > path && s[-1] != '/'; s--)
		;
	return s;
}

static uint64_t plabel_node_hash(const char *name, const char *objfile,
				 int64_t start_line)
{
	uint64_t h = PLABEL_FNV_INIT;

	if (name)
		return plabel_str_hash(h, name) * PLABEL_FNV_PRIME;
	h = plabel_str_hash(h ^ 1, objfile) * PLABEL_FNV_PRIME;
	return (h ^ (uint64_t)start_line) * PLABEL_FNV_PRIME;
}

static bool plabel_node_is(const struct plabel_node *n, const char *name,
			   const char *objfile, int64_t start_line)
{
	if (name || n->name)
		return name && n->name && !strcmp(name, n->name);
	return n->start_line == start_line && !strcmp(n->objfile, objfile);
}

static int plabel_make_printable(struct plabel_node *n)
{
	const char *obj;
	int len;

	/* pprof's NodeInfo.PrintableName / NameComponents; addresses, files
	 * and lines are aggregated away at "functions" granularity. */
	if (n->name)
		n->printable = strdup(n->name);
	else if (!*n->objfile)
		n->printable = strdup("<unknown>");
	else if (asprintf(&n->printable, "[%s]",
			  plabel_basename(n->objfile)) < 0)
		n->printable = NULL;
	if (!n->printable)
		return -ENOMEM;
	/* Go's fmt.Sprint of NodeInfo{Name, OrigName, Address, File,
	 * StartLine, Lineno, Objfile}: the last tie-breaker when sorting. */
	obj = n->name ? "" : n->objfile;
	len = asprintf(&n->info, "{%s  0  %" PRId64 " 0 %s}",
		       n->name ? n->name : "",
		       n->name ? (int64_t)0 : n->start_line, obj);
	if (len < 0) {
		n->info = NULL;
		return -ENOMEM;
	}
	return 0;
}

static size_t plabel_node_get(struct plabel_report *r,
			      struct plabel_itab *m, const char *name,
			      const char *objfile, int64_t start_line)
{
	uint64_t h = plabel_node_hash(name, objfile, start_line);
	struct plabel_node *n;
	size_t i, pos = SIZE_MAX;

	while ((i = plabel_itab_next(m, h, &pos)) != SIZE_MAX)
		if (plabel_node_is(&r->nodes[i], name, objfile, start_line))
			return i;
	if (plabel_itab_reserve(m, 1) ||
	    plabel_grow(&r->nodes, &r->capnodes, r->nnodes,
			sizeof(*r->nodes)))
		return SIZE_MAX;
	n = &r->nodes[r->nnodes];
	memset(n, 0, sizeof(*n));
	n->name = name;
	n->objfile = objfile;
	n->start_line = start_line;
	if (plabel_make_printable(n)) {
		free(n->printable);
		return SIZE_MAX;
	}
	plabel_itab_put(m, h, r->nnodes);
	return r->nnodes++;
}

/* ---- drop_frames (pprof's Profile.Prune) ---- */

/* pprof's simplifyFunc: cut the argument list off a function name. */
static char *plabel_simplify_func(const char *f)
{
	static const char *const reserved[] = {
		"(anonymous namespace)", "operator()",
	};
	const char *s = f[0] == '.' ? f + 1 : f;
	size_t i, k, len = strlen(s);

	for (i = 0; i < len; i++) {
		bool res = false;

		for (k = 0; k < PLABEL_N(reserved); k++) {
			size_t rl = strlen(reserved[k]);

			if (!strncmp(s + i, reserved[k], rl)) {
				i += rl - 1;
				res = true;
				break;
			}
		}
		if (res)
			continue;
		if (s[i] == '(')
			return strndup(s, i);
	}
	return strdup(s);
}

static int plabel_compile_anchored(regex_t *rx, const char *re)
{
	char *full;
	int ret;

	if (asprintf(&full, "^(%s)$", re) < 0)
		return -ENOMEM;
	ret = regcomp(rx, full, REG_EXTENDED | REG_NOSUB);
	free(full);
	return ret ? -EINVAL : 0;
}

static void plabel_prune_locations(struct plabel_report *r)
{
	const char *drop = plabel_prof_drop_frames(r->p);
	const char *keep = plabel_prof_keep_frames(r->p);
	regex_t drx, krx;
	bool have_keep = false;
	size_t i;

	if (!*drop)
		return;
	/* pprof ignores a drop_frames it cannot compile; so does this. */
	if (plabel_compile_anchored(&drx, drop))
		return;
	if (*keep) {
		if (plabel_compile_anchored(&krx, keep)) {
			regfree(&drx);
			return;
		}
		have_keep = true;
	}
	for (i = 0; i < r->nlocs; i++) {
		struct plabel_prof_location_info li;
		struct plabel_rloc *l = &r->locs[i];
		ssize_t j;

		plabel_prof_get_location(r->p, i, &li);
		for (j = (ssize_t)li.nlines - 1; j >= 0; j--) {
			const char *fn = li.lines[j].function;
			char *simple;
			bool match;

			if (!fn || !*fn)
				continue;
			simple = plabel_simplify_func(fn);
			if (!simple)
				continue;
			match = !regexec(&drx, simple, 0, NULL, 0) &&
				(!have_keep ||
				 regexec(&krx, simple, 0, NULL, 0));
			free(simple);
			if (match)
				break;
		}
		if (j < 0)
			continue;
		l->prune_beneath = true;
		if ((size_t)j == li.nlines - 1)
			l->prune = true;
		else
			l->first = j + 1;
	}
	regfree(&drx);
	if (have_keep)
		regfree(&krx);

	for (i = 0; i < r->nsamples; i++) {
		struct plabel_rsample *s = &r->samples[i];
		bool found_user = false;
		ssize_t k;

		for (k = (ssize_t)s->nlocs - 1; k >= 0; k--) {
			struct plabel_rloc *l = &r->locs[s->locs[k]];

			if (!l->prune && !l->prune_beneath) {
				found_user = true;
				continue;
			}
			if (!found_user)
				continue;
			if (l->prune) {
				/* keep locations k+1 .. end */
				memmove(s->locs, s->locs + k + 1,
					(s->nlocs - k - 1) * sizeof(*s->locs));
				s->nlocs -= k + 1;
			} else {
				memmove(s->locs, s->locs + k,
					(s->nlocs - k) * sizeof(*s->locs));
				s->nlocs -= k;
			}
			break;
		}
	}
}

/* ---- tag filters (pprof's -tagfocus / -tagignore on string labels) ---- */

enum plabel_range_op {
	PLABEL_RANGE_NONE,	/* a regex filter on string labels */
	PLABEL_RANGE_EQ,
	PLABEL_RANGE_GE,
	PLABEL_RANGE_LE,
	PLABEL_RANGE_IN,
};

struct plabel_tagfilter {
	const char *spec;	/* as given, for the header */
	char *key;
	regex_t *rx;
	size_t nrx;
	/* numeric labels, pprof's "32kb", "4mb:", ":64kb", "12kb:64mb" */
	enum plabel_range_op op;
	double lo, hi;
	const char *unit;
};

/* One match of pprof's ([+-]?[[:digit:]]+)([[:alpha:]]+)? from s. */
static bool plabel_range_token(const char *s, const char **start,
			       const char **end, long long *num,
			       char *unit, size_t unit_size)
{
	const char *p, *d, *u;
	char *e;

	for (p = s; *p; p++) {
		d = p;
		if ((*d == '+' || *d == '-') && d[1] >= '0' && d[1] <= '9')
			d++;
		if (*d < '0' || *d > '9')
			continue;
		while (*d >= '0' && *d <= '9')
			d++;
		for (u = d; (*u >= 'a' && *u <= 'z') || (*u >= 'A' && *u <= 'Z');
		     u++)
			;
		errno = 0;
		*num = strtoll(p, &e, 10);
		if (errno || (size_t)(u - d) >= unit_size)
			return false;
		memcpy(unit, d, u - d);
		unit[u - d] = '\0';
		*start = p;
		*end = u;
		return true;
	}
	return false;
}

/* pprof's parseTagFilterRange: is v a numeric range? */
static bool plabel_parse_range(struct plabel_tagfilter *f, const char *v)
{
	static char unit_buf[2][32];
	const char *s1, *e1, *s2, *e2, *u1, *u2;
	long long n1, n2;
	size_t l1;

	if (!plabel_range_token(v, &s1, &e1, &n1, unit_buf[0],
				sizeof(unit_buf[0])))
		return false;
	f->lo = plabel_scale(n1, unit_buf[0], unit_buf[0], &u1);
	f->unit = u1;
	l1 = e1 - s1;
	if (!plabel_range_token(e1, &s2, &e2, &n2, unit_buf[1],
				sizeof(unit_buf[1]))) {
		if (s1 == v && !*e1)
			f->op = PLABEL_RANGE_EQ;
		else if (s1 == v && e1[0] == ':' && !e1[1])
			f->op = PLABEL_RANGE_GE;
		else if (s1 == v + 1 && v[0] == ':' && !*e1)
			f->op = PLABEL_RANGE_LE;
		return f->op != PLABEL_RANGE_NONE;
	}
	/* two numbers: exactly "A:B", in compatible units */
	if (s1 != v || e1[0] != ':' || s2 != e1 + 1 || *e2 || !l1)
		return false;
	f->hi = plabel_scale(n2, unit_buf[1], u1, &u2);
	if (strcmp(u1, u2))
		return false;
	f->op = PLABEL_RANGE_IN;
	return true;
}

static int plabel_tagfilter_parse(struct plabel_tagfilter *f, const char *spec)
{
	const char *eq = strchr(spec, '=');
	char *vals, *tok, *save = NULL;
	int ret = 0;

	memset(f, 0, sizeof(*f));
	f->spec = spec;
	if (!eq || eq == spec || !eq[1])
		return -EINVAL;
	f->key = strndup(spec, eq - spec);
	if (!f->key)
		return -ENOMEM;
	if (plabel_parse_range(f, eq + 1))
		return 0;
	vals = strdup(eq + 1);
	if (!vals)
		return -ENOMEM;
	for (tok = strtok_r(vals, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		regex_t *nrx = realloc(f->rx, (f->nrx + 1) * sizeof(*f->rx));

		if (!nrx) {
			ret = -ENOMEM;
			break;
		}
		f->rx = nrx;
		if (regcomp(&f->rx[f->nrx], tok, REG_EXTENDED | REG_NOSUB)) {
			ret = -EINVAL;
			break;
		}
		f->nrx++;
	}
	free(vals);
	if (!ret && !f->nrx)
		ret = -EINVAL;
	return ret;
}

static void plabel_tagfilter_free(struct plabel_tagfilter *f)
{
	size_t i;

	for (i = 0; i < f->nrx; i++)
		regfree(&f->rx[i]);
	free(f->rx);
	free(f->key);
}

static const char *plabel_num_unit(const struct plabel_report *r,
				   const char *key);

static bool plabel_tagfilter_match(const struct plabel_report *r,
				   const struct plabel_tagfilter *f,
				   const struct plabel_prof_sample_info *s)
{
	size_t i, k;

	if (f->op != PLABEL_RANGE_NONE) {
		for (i = 0; i < s->nnumlabels; i++) {
			const char *u;
			double v;

			if (strcmp(s->numlabels[i].key, f->key))
				continue;
			v = plabel_scale(s->numlabels[i].num,
					 plabel_num_unit(r, f->key), f->unit,
					 &u);
			if (strcmp(u, f->unit))
				continue;
			if ((f->op == PLABEL_RANGE_EQ && v == f->lo) ||
			    (f->op == PLABEL_RANGE_GE && v >= f->lo) ||
			    (f->op == PLABEL_RANGE_LE && v <= f->lo) ||
			    (f->op == PLABEL_RANGE_IN && v >= f->lo &&
			     v <= f->hi))
				return true;
		}
		return false;
	}

	for (i = 0; i < s->nlabels; i++) {
		if (strcmp(s->labels[i].key, f->key))
			continue;
		for (k = 0; k < f->nrx; k++)
			if (!regexec(&f->rx[k], s->labels[i].value, 0, NULL,
				     0))
				return true;
	}
	return false;
}

/* ---- graph ---- */

static int plabel_edge_add(struct plabel_report *r, size_t src, size_t dst,
			   int64_t w, bool inl)
{
	uint64_t h = ((uint64_t)src * 0x9e3779b97f4a7c15ull) ^ (dst + 1) *
		     0xc2b2ae3d27d4eb4full;
	struct plabel_edge *e;
	size_t i, pos = SIZE_MAX;

	while ((i = plabel_itab_next(&r->edge_tab, h, &pos)) != SIZE_MAX) {
		e = &r->edges[i];
		if (e->src != src || e->dst != dst)
			continue;
		/* once per sample, like pprof's seenEdge */
		if (e->seen == r->gen)
			return 0;
		e->seen = r->gen;
		e->weight = plabel_add64(e->weight, w);
		if (!inl)
			e->inline_ = false;
		return 0;
	}
	if (plabel_itab_reserve(&r->edge_tab, 1) ||
	    plabel_grow(&r->edges, &r->capedges, r->nedges,
			sizeof(*r->edges)))
		return -ENOMEM;
	e = &r->edges[r->nedges];
	e->src = src;
	e->dst = dst;
	e->weight = w;
	e->inline_ = inl;
	e->seen = r->gen;
	plabel_itab_put(&r->edge_tab, h, r->nedges++);
	return 0;
}

/* pprof's newGraph over the kept nodes (all when r->kept is NULL). */
static int plabel_graph_build(struct plabel_report *r)
{
	size_t i;

	for (i = 0; i < r->nnodes; i++) {
		r->nodes[i].flat = r->nodes[i].cum = 0;
		r->nodes[i].in_inline = r->nodes[i].in_noinline = false;
	}
	r->nedges = 0;
	plabel_itab_clear(&r->edge_tab);

	for (i = 0; i < r->nsamples; i++) {
		struct plabel_rsample *s = &r->samples[i];
		size_t parent = SIZE_MAX;
		bool residual = false;
		ssize_t li;

		if (!s->value)
			continue;
		r->gen++;
		for (li = (ssize_t)s->nlocs - 1; li >= 0; li--) {
			struct plabel_rloc *l = &r->locs[s->locs[li]];
			ssize_t ni;

			for (ni = (ssize_t)l->nlines - 1;
			     ni >= (ssize_t)l->first; ni--) {
				size_t n = l->nodes[ni];

				if (r->kept && !r->kept[n]) {
					residual = true;
					continue;
				}
				if (r->node_seen[n] != r->gen) {
					r->node_seen[n] = r->gen;
					r->nodes[n].cum = plabel_add64(r->nodes[n].cum,
								   s->value);
				}
				if (parent != SIZE_MAX && n != parent &&
				    plabel_edge_add(r, parent, n, s->value,
						    (size_t)ni != l->nlines - 1))
					return -ENOMEM;
				parent = n;
				residual = false;
			}
		}
		if (parent != SIZE_MAX && !residual)
			r->nodes[parent].flat =
				plabel_add64(r->nodes[parent].flat, s->value);
	}

	return 0;
}

/* After the final TrimLowFrequencyEdges, a node whose remaining in-edges
 * are all inline calls is "(inline)", some inline "(partial-inline)". */
static void plabel_mark_inline(struct plabel_report *r, int64_t edge_cutoff)
{
	size_t e;

	for (e = 0; e < r->nedges; e++) {
		struct plabel_edge *ed = &r->edges[e];

		if (plabel_abs64(ed->weight) < edge_cutoff)
			continue;
		if (ed->inline_)
			r->nodes[ed->dst].in_inline = true;
		else
			r->nodes[ed->dst].in_noinline = true;
	}
}

static bool plabel_in_graph(const struct plabel_report *r, size_t n)
{
	if (r->kept && !r->kept[n])
		return false;
	return r->nodes[n].cum || r->nodes[n].flat;
}

/* pprof's FlatNameOrder. */
static int plabel_node_cmp(const void *a, const void *b, void *arg)
{
	const struct plabel_report *r = arg;
	const struct plabel_node *x = &r->nodes[*(const size_t *)a];
	const struct plabel_node *y = &r->nodes[*(const size_t *)b];
	int64_t ax = plabel_abs64(x->flat), ay = plabel_abs64(y->flat);
	int c;

	if (ax != ay)
		return ax > ay ? -1 : 1;
	c = strcmp(x->printable, y->printable);
	if (c)
		return c;
	ax = plabel_abs64(x->cum);
	ay = plabel_abs64(y->cum);
	if (ax != ay)
		return ax > ay ? -1 : 1;
	return strcmp(x->info, y->info);
}

/* The graph's nodes, sorted; returns how many. */
static size_t plabel_graph_nodes(struct plabel_report *r, size_t *out)
{
	size_t i, n = 0;

	for (i = 0; i < r->nnodes; i++)
		if (plabel_in_graph(r, i))
			out[n++] = i;
	qsort_r(out, n, sizeof(*out), plabel_node_cmp, r);
	return n;
}

static int plabel_id_cmp(const void *a, const void *b, void *arg)
{
	const uint64_t *ids = arg;
	uint64_t x = ids[*(const size_t *)a], y = ids[*(const size_t *)b];

	return x < y ? -1 : x > y;
}

static int plabel_note_unit(struct plabel_report *r,
			    const struct plabel_prof_numlabel *l)
{
	size_t i;

	for (i = 0; i < r->nunits; i++) {
		if (!strcmp(r->units[i].key, l->key)) {
			if (!*r->units[i].unit)
				r->units[i].unit = l->unit;
			return 0;
		}
	}
	if (plabel_grow(&r->units, &r->capunits, r->nunits,
			sizeof(*r->units)))
		return -ENOMEM;
	r->units[r->nunits].key = l->key;
	r->units[r->nunits++].unit = l->unit;
	return 0;
}

static const char *plabel_num_unit(const struct plabel_report *r,
				   const char *key)
{
	size_t i;

	for (i = 0; i < r->nunits; i++)
		if (!strcmp(r->units[i].key, key))
			return r->units[i].unit;
	return key;
}

static int plabel_report_setup(struct plabel_report *r,
			       const struct plabel_tagfilter *focus,
			       const struct plabel_tagfilter *ignore)
{
	struct plabel_itab map = { 0 };
	size_t i, j, n = plabel_prof_num_samples(r->p);
	uint64_t *ids;
	size_t *idx;
	int ret = -ENOMEM;

	r->nlocs = plabel_prof_num_locations(r->p);
	r->locs = calloc(r->nlocs ? r->nlocs : 1, sizeof(*r->locs));
	r->sinfo = calloc(n ? n : 1, sizeof(*r->sinfo));
	r->samples = calloc(n ? n : 1, sizeof(*r->samples));
	ids = calloc(r->nlocs ? r->nlocs : 1, sizeof(*ids));
	idx = calloc(r->nlocs ? r->nlocs : 1, sizeof(*idx));
	if (!r->locs || !r->sinfo || !r->samples || !ids || !idx)
		goto out;

	for (i = 0; i < r->nlocs; i++) {
		struct plabel_prof_location_info li;
		struct plabel_rloc *l = &r->locs[i];
		const char *obj = "";

		plabel_prof_get_location(r->p, i, &li);
		l->id = li.id;
		l->mapping_id = li.mapping_id;
		if (li.mapping_id) {
			size_t m, nm = plabel_prof_num_mappings(r->p);

			for (m = 0; m < nm; m++) {
				struct plabel_prof_mapping_info mi;

				plabel_prof_get_mapping(r->p, m, &mi);
				if (mi.id == li.mapping_id) {
					obj = mi.file;
					break;
				}
			}
		}
		l->nlines = li.nlines ? li.nlines : 1;
		l->nodes = calloc(l->nlines, sizeof(*l->nodes));
		if (!l->nodes)
			goto out;
		for (j = 0; j < l->nlines; j++) {
			const char *fn = li.nlines ? li.lines[j].function : "";

			/* A nameless frame counts as its binary. */
			l->nodes[j] = plabel_node_get(r, &map, *fn ? fn : NULL,
						      obj, 0);
			if (l->nodes[j] == SIZE_MAX)
				goto out;
		}
	}

	/* location id -> index, for the samples */
	for (i = 0; i < r->nlocs; i++)
		ids[i] = r->locs[i].id;
	for (i = 0; i < r->nlocs; i++)
		idx[i] = i;
	qsort_r(idx, r->nlocs, sizeof(*idx), plabel_id_cmp, ids);

	for (i = 0; i < n; i++) {
		struct plabel_prof_sample_info *si = &r->sinfo[i];

		plabel_prof_get_sample(r->p, i, si);
		/*
		 * pprof's computeTotal: the sum of absolute values, taken
		 * before tag filters, so percentages stay shares of the
		 * whole profile (pprof's default, relative_percentages off).
		 */
		r->total = plabel_add64(r->total,
					 plabel_abs64(si->values[r->si]));
		for (j = 0; j < si->nnumlabels; j++)
			if (plabel_note_unit(r, &si->numlabels[j]))
				goto out;
	}
	for (i = 0; i < r->nunits; i++) {
		struct plabel_numunit *u = &r->units[i];

		if (*u->unit)
			continue;
		if (!strcmp(u->key, "alignment") || !strcmp(u->key, "request"))
			u->unit = "bytes";
		else
			u->unit = u->key;
	}

	r->nsamples = 0;
	for (i = 0; i < n; i++) {
		struct plabel_prof_sample_info *si = &r->sinfo[i];
		struct plabel_rsample *s = &r->samples[r->nsamples];

		if ((focus && !plabel_tagfilter_match(r, focus, si)) ||
		    (ignore && plabel_tagfilter_match(r, ignore, si))) {
			r->filtered = true;
			continue;
		}
		s->info = si;
		s->value = si->values[r->si];
		s->nlocs = si->nlocs;
		s->locs = calloc(si->nlocs ? si->nlocs : 1, sizeof(*s->locs));
		if (!s->locs)
			goto out;
		r->nsamples++;
		for (j = 0; j < si->nlocs; j++) {
			size_t lo = 0, hi = r->nlocs;

			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;

				if (ids[idx[mid]] < si->loc_ids[j])
					lo = mid + 1;
				else
					hi = mid;
			}
			/* the reader checked every id */
			s->locs[j] = idx[lo];
		}
	}
	plabel_prune_locations(r);
	r->node_seen = calloc(r->nnodes ? r->nnodes : 1,
			      sizeof(*r->node_seen));
	if (!r->node_seen)
		goto out;
	ret = 0;
out:
	plabel_itab_free(&map);
	free(ids);
	free(idx);
	return ret;
}

static void plabel_report_free(struct plabel_report *r)
{
	size_t i;

	for (i = 0; i < r->nlocs; i++)
		free(r->locs[i].nodes);
	free(r->locs);
	for (i = 0; i < r->nsamples; i++)
		free(r->samples[i].locs);
	free(r->samples);
	free(r->sinfo);
	for (i = 0; i < r->nnodes; i++) {
		free(r->nodes[i].printable);
		free(r->nodes[i].info);
	}
	free(r->nodes);
	free(r->kept);
	free(r->edges);
	plabel_itab_free(&r->edge_tab);
	free(r->node_seen);
	free(r->units);
}

static void plabel_fmt_value(const struct plabel_report *r, char *buf,
			     size_t size, int64_t v)
{
	plabel_scaled_label(buf, size, v, r->sunit, r->out_unit);
}

/* pprof's selectOutputUnit for a "minimum" unit request. */
static void plabel_select_unit(struct plabel_report *r, const size_t *g,
			       size_t ng)
{
	int64_t min = 0, max = r->total;
	const char *minu, *maxu, *unit;
	size_t i;

	if (!ng)
		return;
	for (i = 0; i < ng; i++) {
		int64_t m = plabel_abs64(r->nodes[g[i]].flat);

		if (!m)
			m = plabel_abs64(r->nodes[g[i]].cum);
		if (m > 0 && (!min || m < min))
			min = m;
	}
	if (!min)
		min = max;
	plabel_scale(min, r->sunit, "minimum", &minu);
	plabel_scale(max, r->sunit, "minimum", &maxu);
	unit = minu;
	if (strcmp(minu, maxu) && (int64_t)((uint64_t)min * 100) < max)
		plabel_scale((int64_t)((uint64_t)min * 100), r->sunit,
			     "minimum", &unit);
	snprintf(r->out_unit, sizeof(r->out_unit), "%s",
		 *unit ? unit : r->sunit);
}

static uint64_t mapping_id_at(const struct plabel_report *r, size_t m)
{
	struct plabel_prof_mapping_info mi;

	plabel_prof_get_mapping(r->p, m, &mi);
	return mi.id;
}

/*
 * The mapping File: names: the profile's first (its main binary, as pprof
 * shows it); when tag filters left samples out, the main binary of those
 * kept, by the reader's rule (the mapped file with the most frames that
 * is not a shared library, else the one with the most frames), so that
 * --tagfocus pid=N names process N's executable. pprof keeps the first.
 */
static size_t header_mapping(const struct plabel_report *r)
{
	size_t i, j, m, nm = plabel_prof_num_mappings(r->p);
	size_t best = SIZE_MAX, best_exe = SIZE_MAX;
	uint64_t *frames;

	if (!r->filtered || !nm)
		return 0;
	frames = calloc(nm, sizeof(*frames));
	if (!frames)
		return 0;
	for (i = 0; i < r->nsamples; i++) {
		const struct plabel_rsample *s = &r->samples[i];

		for (j = 0; j < s->nlocs; j++) {
			uint64_t id = r->locs[s->locs[j]].mapping_id;

			/* ids are 1..n in the reader's profiles; else search */
			if (id && id <= nm && mapping_id_at(r, id - 1) == id) {
				frames[id - 1]++;
				continue;
			}
			for (m = 0; id && m < nm; m++)
				if (mapping_id_at(r, m) == id) {
					frames[m]++;
					break;
				}
		}
	}
	for (m = 0; m < nm; m++) {
		struct plabel_prof_mapping_info mi;
		const char *base;

		if (!frames[m])
			continue;
		if (best == SIZE_MAX || frames[m] > frames[best])
			best = m;
		plabel_prof_get_mapping(r->p, m, &mi);
		base = plabel_basename(mi.file);
		if (strstr(base, ".so") || base[0] == '[')
			continue;
		if (best_exe == SIZE_MAX || frames[m] > frames[best_exe])
			best_exe = m;
	}
	free(frames);
	if (best_exe != SIZE_MAX)
		return best_exe;
	return best != SIZE_MAX ? best : 0;
}

/* pprof's ProfileLabels. */
static void plabel_profile_labels(const struct plabel_report *r, FILE *out)
{
	int64_t tn = plabel_prof_time_nanos(r->p);
	int64_t dn = plabel_prof_duration_nanos(r->p);
	size_t i;

	if (plabel_prof_num_mappings(r->p)) {
		struct plabel_prof_mapping_info mi;

		plabel_prof_get_mapping(r->p, header_mapping(r), &mi);
		if (*mi.file)
			fprintf(out, "File: %s\n", plabel_basename(mi.file));
		if (*mi.build_id)
			fprintf(out, "Build ID: %s\n", mi.build_id);
	}
	for (i = 0; i < plabel_prof_num_comments(r->p); i++) {
		const char *c = plabel_prof_comment(r->p, i);

		if (c[0] != '#')
			fprintf(out, "%s\n", c);
	}
	if (*r->stype)
		fprintf(out, "Type: %s\n", r->stype);
	if (tn) {
		static const char *const mon[] = {
			"Jan", "Feb", "Mar", "Apr", "May", "Jun",
			"Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
		};
		time_t t = (time_t)(tn / 1000000000);
		struct tm tm;

		/* Go rounds toward the earlier second for negative times */
		if (tn < 0 && tn % 1000000000)
			t--;
		if (localtime_r(&t, &tm)) {
			int h = tm.tm_hour % 12;

			fprintf(out, "Time: %s %d, %d at %d:%02d%s (%s)\n",
				mon[tm.tm_mon], tm.tm_mday, tm.tm_year + 1900,
				h ? h : 12, tm.tm_min,
				tm.tm_hour < 12 ? "am" : "pm", tm.tm_zone);
		}
	}
	if (dn) {
		char dur[64], tot[64], ratio[32] = "";
		const char *u;
		double tns = plabel_scale(r->total, r->sunit, "nanoseconds",
					  &u);

		plabel_scaled_label(dur, sizeof(dur), dn, "nanoseconds",
				    "auto");
		plabel_fmt_value(r, tot, sizeof(tot), r->total);
		if (!strcmp(u, "ns") && (int64_t)tns) {
			char pct[16];

			plabel_percentage(pct, sizeof(pct), (int64_t)tns, dn);
			snprintf(ratio, sizeof(ratio), "(%s)", pct);
		}
		fprintf(out, "Duration: %s, Total samples = %s %s\n", dur, tot,
			ratio);
	}
}

static const char *plabel_trim(const char *s)
{
	while (*s == ' ')
		s++;
	return s;
}

struct plabel_report_opts {
	int top;
	bool tags, all_tags;
	const char *sample_index;
	const char *focus_spec, *ignore_spec;
};

static int plabel_report_top(struct plabel_report *r,
			     const struct plabel_report_opts *o, FILE *out)
{
	int64_t total_value = 0, node_cutoff, edge_cutoff, flat_sum = 0;
	size_t *g, ng, i, dropped = 0, orig;
	char a[64], b[64], c[64], d[16], e[16], f[16];
	bool *kept;
	int ret;

	g = calloc(r->nnodes ? r->nnodes : 1, sizeof(*g));
	r->kept = calloc(r->nnodes ? r->nnodes : 1, sizeof(*r->kept));
	if (!g || !r->kept) {
		free(g);
		return -ENOMEM;
	}
	kept = r->kept;
	r->kept = NULL;
	ret = plabel_graph_build(r);
	if (ret)
		goto out;
	ng = plabel_graph_nodes(r, g);
	for (i = 0; i < ng; i++)
		total_value = plabel_add64(total_value, r->nodes[g[i]].flat);
	node_cutoff = plabel_abs64((int64_t)((double)total_value *
					     PLABEL_NODE_FRACTION));
	edge_cutoff = plabel_abs64((int64_t)((double)total_value *
					     PLABEL_EDGE_FRACTION));
	r->kept = kept;
	for (i = 0; i < ng; i++)
		kept[g[i]] = true;
	if (node_cutoff > 0) {
		size_t nk = 0;

		for (i = 0; i < ng; i++) {
			kept[g[i]] = plabel_abs64(r->nodes[g[i]].cum) >=
				     node_cutoff;
			nk += kept[g[i]];
		}
		if (nk != ng) {
			dropped = ng - nk;
			ret = plabel_graph_build(r);
			if (ret)
				goto out;
			ng = plabel_graph_nodes(r, g);
		}
	}
	orig = ng;
	if (o->top > 0 && (size_t)o->top < ng) {
		for (i = 0; i < ng; i++)
			kept[g[i]] = i < (size_t)o->top;
		ret = plabel_graph_build(r);
		if (ret)
			goto out;
		ng = plabel_graph_nodes(r, g);
	}
	plabel_mark_inline(r, edge_cutoff);
	plabel_select_unit(r, g, ng);

	for (i = 0; i < ng; i++)
		flat_sum = plabel_add64(flat_sum, r->nodes[g[i]].flat);
	plabel_profile_labels(r, out);
	if (o->focus_spec || o->ignore_spec) {
		fprintf(out, "Active filters:\n");
		if (o->focus_spec)
			fprintf(out, "   tagfocus=%.80s%s\n", o->focus_spec,
				strlen(o->focus_spec) > 80 ? "\xe2\x80\xa6" : "");
		if (o->ignore_spec)
			fprintf(out, "   tagignore=%.80s%s\n", o->ignore_spec,
				strlen(o->ignore_spec) > 80 ? "\xe2\x80\xa6" : "");
	}
	plabel_fmt_value(r, a, sizeof(a), flat_sum);
	plabel_percentage(d, sizeof(d), flat_sum, r->total);
	plabel_fmt_value(r, b, sizeof(b), r->total);
	fprintf(out, "Showing nodes accounting for %s, %s of %s total\n", a,
		plabel_trim(d), b);
	if (r->total) {
		if (dropped) {
			plabel_fmt_value(r, a, sizeof(a),
					 plabel_abs64((int64_t)((double)r->total *
							PLABEL_NODE_FRACTION)));
			fprintf(out, "Dropped %zu node%s (cum <= %s)\n", dropped,
				dropped > 1 ? "s" : "", a);
		}
		if (ng > 0 && ng < orig)
			fprintf(out, "Showing top %zu nodes out of %zu\n", ng,
				orig);
	}
	fprintf(out, "%10s %5s%% %5s%% %10s %5s%%\n", "flat", "flat", "sum",
		"cum", "cum");
	flat_sum = 0;
	for (i = 0; i < ng; i++) {
		const struct plabel_node *n = &r->nodes[g[i]];
		const char *inl = "";

		if (n->in_inline)
			inl = n->in_noinline ? " (partial-inline)" :
					       " (inline)";
		flat_sum = plabel_add64(flat_sum, n->flat);
		plabel_fmt_value(r, a, sizeof(a), n->flat);
		plabel_fmt_value(r, c, sizeof(c), n->cum);
		plabel_percentage(d, sizeof(d), n->flat, r->total);
		plabel_percentage(e, sizeof(e), flat_sum, r->total);
		plabel_percentage(f, sizeof(f), n->cum, r->total);
		fprintf(out, "%10s %s %s %10s %s  %s%s\n", a, d, e, c, f,
			n->printable, inl);
	}
out:
	free(g);
	return ret;
}

/* ---- tags (pprof's -tags) ---- */

struct plabel_tagval {
	char *name;
	int64_t flat;
};

struct plabel_tagkey {
	const char *key;
	bool num;	/* a numeric label (pid, tid) */
	struct plabel_tagval *vals;
	size_t nvals, capvals;
};

static int plabel_tagval_cmp(const void *a, const void *b)
{
	const struct plabel_tagval *x = a, *y = b;
	int64_t ax = plabel_abs64(x->flat), ay = plabel_abs64(y->flat);

	if (x->flat != y->flat && ax != ay)
		return ax > ay ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int plabel_tagkey_cmp(const void *a, const void *b)
{
	const struct plabel_tagkey *x = a, *y = b;

	return strcmp(x->key, y->key);
}

static size_t plabel_runes(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

static struct plabel_tagkey *plabel_tagkey_get(struct plabel_tagkey **keys,
					       size_t *n, size_t *cap,
					       const char *key)
{
	size_t i;

	for (i = 0; i < *n; i++)
		if (!strcmp((*keys)[i].key, key))
			return &(*keys)[i];
	if (plabel_grow(keys, cap, *n, sizeof(**keys)))
		return NULL;
	memset(&(*keys)[*n], 0, sizeof(**keys));
	(*keys)[*n].key = key;
	return &(*keys)[(*n)++];
}

static int plabel_tagkey_add(struct plabel_tagkey *k, const char *val,
			     int64_t w)
{
	size_t i;

	for (i = 0; i < k->nvals; i++) {
		if (!strcmp(k->vals[i].name, val)) {
			k->vals[i].flat = plabel_add64(k->vals[i].flat, w);
			return 0;
		}
	}
	if (plabel_grow(&k->vals, &k->capvals, k->nvals,
			sizeof(*k->vals)))
		return -ENOMEM;
	k->vals[k->nvals].name = strdup(val);
	if (!k->vals[k->nvals].name)
		return -ENOMEM;
	k->vals[k->nvals++].flat = w;
	return 0;
}

/*
 * pprof's -tags with all: every key, alphabetically. Without: the string
 * labels alone (what a program set, the process and thread names), and a
 * line naming the numeric ones left out (pid, tid: one row per thread of
 * the system, under -a, would bury the rest).
 */
static int plabel_report_tags(struct plabel_report *r, FILE *out, bool all)
{
	struct plabel_tagkey *keys = NULL;
	size_t nkeys = 0, capkeys = 0, i, j, nhidden = 0;
	int ret = -ENOMEM;

	for (i = 0; i < r->nsamples; i++) {
		const struct plabel_prof_sample_info *s = r->samples[i].info;
		int64_t w = r->samples[i].value;

		for (j = 0; j < s->nlabels; j++) {
			struct plabel_tagkey *k;

			k = plabel_tagkey_get(&keys, &nkeys, &capkeys,
					      s->labels[j].key);
			if (!k || plabel_tagkey_add(k, s->labels[j].value, w))
				goto out;
		}
		for (j = 0; j < s->nnumlabels; j++) {
			struct plabel_tagkey *k;
			char v[64];

			k = plabel_tagkey_get(&keys, &nkeys, &capkeys,
					      s->numlabels[j].key);
			if (!k)
				goto out;
			k->num = true;
			plabel_scaled_label(v, sizeof(v), s->numlabels[j].num,
					    plabel_num_unit(r, k->key),
					    "minimum");
			if (plabel_tagkey_add(k, v, w))
				goto out;
		}
	}
	if (nkeys > 1)
		qsort(keys, nkeys, sizeof(*keys), plabel_tagkey_cmp);
	for (i = 0; i < nkeys; i++) {
		struct plabel_tagkey *k = &keys[i];
		size_t w0, w1 = 0, kl = plabel_runes(k->key) + 1;
		int64_t total = 0;
		const char *u;
		double fv;
		char cell[128];

		if (k->num && !all) {
			nhidden++;
			continue;
		}
		for (j = 0; j < k->nvals; j++)
			total = plabel_add64(total, k->vals[j].flat);
		qsort(k->vals, k->nvals, sizeof(*k->vals), plabel_tagval_cmp);
		/* text/tabwriter, AlignRight, padding 1: the key column
		 * spans the section; the value column only its value
		 * lines. */
		w0 = (kl > 1 ? kl : 1) + 1;
		for (j = 0; j < k->nvals; j++) {
			char pct[16];
			size_t l;

			fv = plabel_scale(k->vals[j].flat, r->sunit, "minimum",
					  &u);
			plabel_percentage(pct, sizeof(pct), k->vals[j].flat,
					  total);
			if (total > 0)
				snprintf(cell, sizeof(cell), "%.1f%s (%s):", fv,
					 u, pct);
			else
				snprintf(cell, sizeof(cell), "%.1f%s:", fv, u);
			l = plabel_runes(cell) + 1;
			if (l > w1)
				w1 = l;
		}
		fv = plabel_scale(total, r->sunit, "minimum", &u);
		fprintf(out, "%*s%s: Total %.1f%s\n", (int)(w0 - kl), "",
			k->key, fv, u);
		for (j = 0; j < k->nvals; j++) {
			char pct[16];

			fv = plabel_scale(k->vals[j].flat, r->sunit, "minimum",
					  &u);
			plabel_percentage(pct, sizeof(pct), k->vals[j].flat,
					  total);
			if (total > 0)
				snprintf(cell, sizeof(cell), "%.1f%s (%s):", fv,
					 u, pct);
			else
				snprintf(cell, sizeof(cell), "%.1f%s:", fv, u);
			fprintf(out, "%*s%*s %s\n", (int)w0, " ", (int)w1,
				cell, k->vals[j].name);
		}
		fprintf(out, "\n");
	}
	if (nhidden) {
		fprintf(out, "numeric labels not shown (--all-tags shows them):");
		for (i = 0; i < nkeys; i++)
			if (keys[i].num)
				fprintf(out, " %s", keys[i].key);
		fprintf(out, "\n");
	}
	ret = 0;
out:
	for (i = 0; i < nkeys; i++) {
		for (j = 0; j < keys[i].nvals; j++)
			free(keys[i].vals[j].name);
		free(keys[i].vals);
	}
	free(keys);
	return ret;
}

/* ---- the command ---- */

static void plabel_report_usage(FILE *out)
{
	fprintf(out,
		"usage: plabel report [--top N] [--tags | --all-tags] [--sample-index TYPE|N]\n"
		"                     [--tagfocus KEY=RE[,RE..]]\n"
		"                     [--tagignore KEY=RE[,RE..]] FILE\n"
		"\n"
		"Text view of a pprof profile (plabel's or any other); the numbers are\n"
		"those `go tool pprof -top` prints for the same file.\n"
		"\n"
		"  --top N            only the N functions with the most flat value\n"
		"                     (go tool pprof -top -nodecount=N)\n"
		"  --tags             value split by string label (the program's labels,\n"
		"                     process, thread), as go tool pprof -tags shows them\n"
		"  --all-tags         numeric labels (pid, tid) too: go tool pprof -tags\n"
		"  --sample-index X   sample type to show, by name or index\n"
		"                     (default: the profile's default, else the last)\n"
		"  --tagfocus K=RE    only samples whose label K matches RE\n"
		"  --tagignore K=RE   leave out samples whose label K matches RE\n"
		"                     (with either, File: names the kept samples' main\n"
		"                     binary: --tagfocus pid=N shows N's executable)\n"
		"  -h, --help         this text\n");
}

/* pprof's SampleIndexByName, without the mean_ forms. */
static int plabel_pick_index(const struct plabel_prof *p, const char *want,
			     size_t *si)
{
	size_t n = plabel_prof_num_values(p), i;
	char *end;
	long v;

	if (!n)
		return -EINVAL;
	if (!want) {
		*si = plabel_prof_default_index(p);
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (!strcmp(plabel_prof_sample_type(p, i).type, want)) {
			*si = i;
			return 0;
		}
	}
	errno = 0;
	v = strtol(want, &end, 10);
	if (!errno && !*end && end != want && v >= 0 && (size_t)v < n) {
		*si = v;
		return 0;
	}
	return -EINVAL;
}

int plabel_cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "top", required_argument, NULL, 't' },
		{ "tags", no_argument, NULL, 'T' },
		{ "all-tags", no_argument, NULL, 'A' },
		{ "sample-index", required_argument, NULL, 's' },
		{ "tagfocus", required_argument, NULL, 'f' },
		{ "tagignore", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct plabel_report_opts o = { 0 };
	struct plabel_tagfilter focus, ignore;
	struct plabel_report r;
	const char *err = NULL;
	bool have_focus = false, have_ignore = false;
	int c, ret, status = 1;
	size_t i;
	char *end;
	long v;

	optind = 0;	/* full reset: report may run more than once */
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || v < 0 ||
			    v > INT_MAX) {
				fprintf(stderr,
					"plabel report: --top wants a count, not '%s'\n",
					optarg);
				return 2;
			}
			o.top = (int)v;
			break;
		case 'T':
			o.tags = true;
			break;
		case 'A':
			o.tags = o.all_tags = true;
			break;
		case 's':
			o.sample_index = optarg;
			break;
		case 'f':
			o.focus_spec = optarg;
			break;
		case 'i':
			o.ignore_spec = optarg;
			break;
		case 'h':
			plabel_report_usage(stdout);
			return 0;
		default:
			plabel_report_usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "plabel report: %s\n",
			optind >= argc ? "no profile file given" :
					 "one profile file at a time");
		plabel_report_usage(stderr);
		return 2;
	}
	if (o.focus_spec) {
		ret = plabel_tagfilter_parse(&focus, o.focus_spec);
		have_focus = true;
		if (ret) {
			fprintf(stderr,
				"plabel report: --tagfocus wants KEY=REGEX[,REGEX..], not '%s'\n",
				o.focus_spec);
			status = 2;
			goto out_filters;
		}
	}
	if (o.ignore_spec) {
		ret = plabel_tagfilter_parse(&ignore, o.ignore_spec);
		have_ignore = true;
		if (ret) {
			fprintf(stderr,
				"plabel report: --tagignore wants KEY=REGEX[,REGEX..], not '%s'\n",
				o.ignore_spec);
			status = 2;
			goto out_filters;
		}
	}

	memset(&r, 0, sizeof(r));
	ret = plabel_prof_read(argv[optind], &r.p, &err);
	if (ret) {
		fprintf(stderr, "plabel report: %s: %s\n", argv[optind],
			err ? err : strerror(-ret));
		goto out_filters;
	}
	if (plabel_pick_index(r.p, o.sample_index, &r.si)) {
		size_t n = plabel_prof_num_values(r.p);

		fprintf(stderr, "plabel report: %s: %s", argv[optind],
			o.sample_index ? "no sample type " :
					 "the profile has no sample types");
		if (o.sample_index && n) {
			fprintf(stderr, "'%s'; it has:", o.sample_index);
			for (i = 0; i < n; i++)
				fprintf(stderr, " %s (%zu)%s",
					plabel_prof_sample_type(r.p, i).type,
					i, i + 1 < n ? "," : "");
		} else if (o.sample_index) {
			fprintf(stderr, "'%s'", o.sample_index);
		}
		fprintf(stderr, "\n");
		status = o.sample_index ? 2 : 1;
		goto out_prof;
	}
	r.stype = plabel_prof_sample_type(r.p, r.si).type;
	r.sunit = plabel_prof_sample_type(r.p, r.si).unit;
	for (i = 0; r.sunit[i] && i < sizeof(r.sunit_buf) - 1; i++) {
		unsigned char ch = r.sunit[i];

		r.sunit_buf[i] = ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
	}
	r.sunit_buf[i] = '\0';
	r.sunit = r.sunit_buf;
	snprintf(r.out_unit, sizeof(r.out_unit), "minimum");

	ret = plabel_report_setup(&r, have_focus ? &focus : NULL,
				  have_ignore ? &ignore : NULL);
	if (!ret)
		ret = o.tags ? plabel_report_tags(&r, stdout, o.all_tags) :
			       plabel_report_top(&r, &o, stdout);
	if (!ret && fflush(stdout))
		ret = -errno;
	if (ret)
		fprintf(stderr, "plabel report: %s\n", strerror(-ret));
	else
		status = 0;
	plabel_report_free(&r);
out_prof:
	plabel_prof_free(r.p);
out_filters:
	if (have_focus)
		plabel_tagfilter_free(&focus);
	if (have_ignore)
		plabel_tagfilter_free(&ignore);
	return status;
}
