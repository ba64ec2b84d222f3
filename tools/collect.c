// SPDX-License-Identifier: GPL-2.0
/*
 * Records -> profiles. See collect.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect.h"
#include "unwind.h"

#define PLABEL_MAX_FRAMES	1024
#define PLABEL_KERNEL_START	0xffff800000000000ULL
/* Mappings of one process generation that addresses are looked up in. */
#define PLABEL_VIEW_MAX		256

struct plabel_lset {
	uint64_t id;
	uint32_t count;
	struct plabel_prof_label *labels;	/* strings malloc()ed */
	uint32_t prof_set;	/* its set in the profile being built, 0: none */
};

struct plabel_proc {
	uint32_t pid;
	uint32_t tried_gen;	/* 1 + generation /proc/PID/maps was read for */
	struct plabel_map *maps;
	size_t nmaps, cap;
	uint32_t *map_gen;	/* generation of maps[i] */
	uint8_t *map_fallback;	/* maps[i] came from /proc */
	uint64_t *map_mid;	/* maps[i]'s id in the profile being built */
	uint64_t *exec_times;	/* EXEC record times */
	size_t nexec, exec_cap;

	/*
	 * The mappings of generation view_gen as one array, what the
	 * unwinder and the address lookups take: real ones first, /proc
	 * fallbacks after. Samples of a process nearly always share it, so
	 * it is kept until a mapping or an exec is added.
	 */
	struct plabel_map *view;
	uint32_t *view_idx;	/* view[k] is a copy of maps[view_idx[k]] */
	size_t nview, view_cap;
	uint32_t view_gen;
	int view_ok;
};

struct plabel_csample {
	uint32_t type;		/* PLABEL_REC_SAMPLE or _THREAD */
	uint32_t pid, tid;
	uint32_t nk, nu;	/* kernel and user frames in ips */
	uint64_t time_ns;
	uint64_t set_id;
	uint64_t ips[];
};

/* (mapping id or kernel marker, address) -> location id */
struct plabel_loc_ent {
	uint64_t key_a, key_b;
	uint64_t loc;
};

struct plabel_collect {
	struct plabel_syms *syms;
	unsigned int flags;
	uint64_t period_ns;
	struct plabel_collect_stats st;

	struct plabel_lset *lsets;
	size_t nlsets, lsets_cap;
	int lsets_sorted;

	struct plabel_proc *procs;
	size_t nprocs, procs_cap;

	struct plabel_csample **samples;
	size_t nsamples, samples_cap;

	struct plabel_unwinder *unwinder;
	uint64_t ipbuf[PLABEL_MAX_FRAMES];
	uint32_t skip_pid;	/* 0: none */
};

struct plabel_collect *plabel_collect_new(struct plabel_syms *syms,
					  unsigned int flags)
{
	struct plabel_collect *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->syms = syms;
	c->flags = flags;
	c->period_ns = 10000000;
	return c;
}

static void plabel_proc_free(struct plabel_proc *p)
{
	plabel_maps_free(p->maps, p->nmaps);
	free(p->map_gen);
	free(p->map_fallback);
	free(p->map_mid);
	free(p->exec_times);
	free(p->view);
	free(p->view_idx);
}

void plabel_collect_free(struct plabel_collect *c)
{
	size_t i, j;

	if (!c)
		return;
	for (i = 0; i < c->nlsets; i++) {
		for (j = 0; j < c->lsets[i].count; j++) {
			free((char *)c->lsets[i].labels[j].key);
			free((char *)c->lsets[i].labels[j].value);
		}
		free(c->lsets[i].labels);
	}
	free(c->lsets);
	for (i = 0; i < c->nprocs; i++)
		plabel_proc_free(&c->procs[i]);
	free(c->procs);
	for (i = 0; i < c->nsamples; i++)
		free(c->samples[i]);
	free(c->samples);
	plabel_unwinder_free(c->unwinder);
	free(c);
}

void plabel_collect_set_period(struct plabel_collect *c, uint64_t period_ns)
{
	if (period_ns)
		c->period_ns = period_ns;
}

void plabel_collect_skip_before_exec(struct plabel_collect *c, uint32_t pid)
{
	c->skip_pid = pid;
}

void plabel_collect_stats(const struct plabel_collect *c,
			  struct plabel_collect_stats *st)
{
	*st = c->st;
	st->labelsets = c->nlsets;
}

/* Grow *arr (of *cap elements of size sz) to hold n + 1. */
static int plabel_grow(void *arr, size_t *cap, size_t n, size_t sz)
{
	void **pa = arr;
	size_t ncap;
	void *na;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 64;
	na = realloc(*pa, ncap * sz);
	if (!na)
		return -ENOMEM;
	*pa = na;
	*cap = ncap;
	return 0;
}

static struct plabel_lset *plabel_lset_find(struct plabel_collect *c,
					    uint64_t id)
{
	size_t i;

	if (c->lsets_sorted) {
		size_t lo = 0, hi = c->nlsets;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (c->lsets[mid].id == id)
				return &c->lsets[mid];
			if (c->lsets[mid].id < id)
				lo = mid + 1;
			else
				hi = mid;
		}
		return NULL;
	}
	for (i = 0; i < c->nlsets; i++)
		if (c->lsets[i].id == id)
			return &c->lsets[i];
	return NULL;
}

static int plabel_add_labelset(struct plabel_collect *c,
			       const struct plabel_dec_rec *r)
{
	struct plabel_lset *ls;
	uint32_t i;

	if (!r->u.labelset.id || plabel_lset_find(c, r->u.labelset.id))
		return 0;	/* repeats are expected */
	if (plabel_grow(&c->lsets, &c->lsets_cap, c->nlsets, sizeof(*ls)))
		return -ENOMEM;
	ls = &c->lsets[c->nlsets];
	ls->id = r->u.labelset.id;
	ls->count = 0;
	ls->labels = calloc(r->u.labelset.count ? r->u.labelset.count : 1,
			    sizeof(*ls->labels));
	if (!ls->labels)
		return -ENOMEM;
	c->nlsets++;
	c->lsets_sorted = 0;
	for (i = 0; i < r->u.labelset.count; i++) {
		const struct plabel_dec_label *l = &r->u.labelset.labels[i];
		char *k = strndup(l->key.ptr, l->key.len);
		char *v = strndup(l->value.ptr, l->value.len);

		if (!k || !v) {
			free(k);
			free(v);
			return -ENOMEM;
		}
		ls->labels[i].key = k;
		ls->labels[i].value = v;
		ls->count++;
	}
	return 0;
}

static struct plabel_proc *plabel_proc_get(struct plabel_collect *c,
					   uint32_t pid)
{
	struct plabel_proc *p;
	size_t i;

	for (i = c->nprocs; i-- > 0;)
		if (c->procs[i].pid == pid)
			return &c->procs[i];
	if (plabel_grow(&c->procs, &c->procs_cap, c->nprocs, sizeof(*p)))
		return NULL;
	p = &c->procs[c->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

static uint32_t plabel_proc_gen(const struct plabel_proc *p, uint64_t t)
{
	uint32_t g = 0;
	size_t i;

	for (i = 0; i < p->nexec; i++)
		if (p->exec_times[i] <= t)
			g++;
	return g;
}

static int plabel_proc_add_map(struct plabel_collect *c, struct plabel_proc *p,
			       uint64_t start, uint64_t end, uint64_t off,
			       uint64_t t, const char *path, size_t path_len,
			       int fallback)
{
	size_t cap = p->cap, i;
	struct plabel_map *m;
	char *ps;

	/* the kernel may repeat a mapping: keep one */
	for (i = 0; i < p->nmaps; i++) {
		m = &p->maps[i];
		if (m->start == start && m->end == end && m->offset == off &&
		    strlen(m->path) == path_len &&
		    !memcmp(m->path, path, path_len) &&
		    p->map_gen[i] == plabel_proc_gen(p, t)) {
			if (!fallback && p->map_fallback[i]) {
				p->map_fallback[i] = 0;
				p->view_ok = 0;	/* its place in the view moves */
			}
			return 0;
		}
	}
	if (plabel_grow(&p->maps, &cap, p->nmaps, sizeof(*p->maps)))
		return -ENOMEM;
	cap = p->cap;
	if (plabel_grow(&p->map_gen, &cap, p->nmaps, sizeof(*p->map_gen)))
		return -ENOMEM;
	cap = p->cap;
	if (plabel_grow(&p->map_fallback, &cap, p->nmaps, 1))
		return -ENOMEM;
	p->cap = cap;
	ps = strndup(path, path_len);
	if (!ps)
		return -ENOMEM;
	m = &p->maps[p->nmaps];
	m->start = start;
	m->end = end;
	m->offset = off;
	m->time_ns = t;
	m->elf = plabel_syms_elf(c->syms, ps);
	if (!m->elf && ps[0] == '/') {
		/*
		 * The kernel names files as its own context sees them; under
		 * a chroot or container the prefix differs from ours. Try the
		 * path with leading directories dropped.
		 */
		const char *q = ps;

		while (!m->elf && (q = strchr(q + 1, '/')))
			m->elf = plabel_syms_elf(c->syms, q);
		if (m->elf && q) {
			char *np = strdup(q);

			if (!np) {
				free(ps);
				return -ENOMEM;
			}
			free(ps);
			ps = np;
		}
	}
	m->path = ps;
	p->map_gen[p->nmaps] = plabel_proc_gen(p, t);
	p->map_fallback[p->nmaps] = fallback;
	p->nmaps++;
	p->view_ok = 0;
	return 0;
}

static int plabel_proc_read_maps(struct plabel_collect *c,
				 struct plabel_proc *p, uint64_t t)
{
	struct plabel_map *m;
	size_t n, i;
	int ret = 0;

	p->tried_gen = plabel_proc_gen(p, t) + 1;
	if (!(c->flags & PLABEL_COLLECT_PROC_MAPS))
		return 0;
	if (plabel_maps_read_proc(c->syms, p->pid, &m, &n))
		return 0;	/* gone already: nothing to fall back on */
	for (i = 0; i < n && !ret; i++)
		ret = plabel_proc_add_map(c, p, m[i].start, m[i].end,
					  m[i].offset, t, m[i].path,
					  strlen(m[i].path), 1);
	plabel_maps_free(m, n);
	return ret;
}

/*
 * Make p's view the mappings of generation gen (at most PLABEL_VIEW_MAX).
 * 0 or -ENOMEM.
 */
static int plabel_proc_view(struct plabel_proc *p, uint32_t gen)
{
	size_t n = 0, i, pass, max;

	if (p->view_ok && p->view_gen == gen)
		return 0;
	max = p->nmaps < PLABEL_VIEW_MAX ? p->nmaps : PLABEL_VIEW_MAX;
	if (max > p->view_cap) {
		struct plabel_map *v = realloc(p->view, max * sizeof(*v));
		uint32_t *vi;

		if (!v)
			return -ENOMEM;
		p->view = v;
		vi = realloc(p->view_idx, max * sizeof(*vi));
		if (!vi)
			return -ENOMEM;
		p->view_idx = vi;
		p->view_cap = max;
	}
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < p->nmaps && n < max; i++) {
			if (p->map_gen[i] != gen || p->map_fallback[i] != pass)
				continue;
			p->view[n] = p->maps[i];
			p->view_idx[n++] = i;
		}
	}
	p->nview = n;
	p->view_gen = gen;
	p->view_ok = 1;
	return 0;
}

static int plabel_add_sample(struct plabel_collect *c,
			     const struct plabel_dec_rec *r)
{
	const struct plabel_rec_sample *h = &r->u.sample.hdr;
	struct plabel_csample *s;
	struct plabel_proc *p;
	size_t nk = h->nr_kernel, nu = h->nr_user, i;
	const uint64_t *user = NULL;
	int nunw = -1;
	uint32_t gen;

	if (r->type == PLABEL_REC_SAMPLE)
		c->st.samples++;
	else
		c->st.threads++;
	p = plabel_proc_get(c, h->pid);
	if (!p)
		return -ENOMEM;
	/*
	 * No mappings known for the image this sample ran in (yet): read
	 * them while the process is there, once per exec generation.
	 */
	gen = plabel_proc_gen(p, h->time_ns);
	if (plabel_proc_view(p, gen))
		return -ENOMEM;
	if (!p->nview && p->tried_gen != gen + 1 &&
	    (plabel_proc_read_maps(c, p, h->time_ns) ||
	     plabel_proc_view(p, gen)))
		return -ENOMEM;

	/* user regs: where it was interrupted, or entered the kernel */
	if (r->u.sample.has_regs) {
		if (!c->unwinder)
			c->unwinder = plabel_unwinder_new();
		if (!c->unwinder)
			return -ENOMEM;
		nunw = plabel_unwind(c->unwinder, p->view, p->nview,
				     r->u.sample.regs, r->u.sample.stack,
				     h->stack_size, c->ipbuf,
				     PLABEL_MAX_FRAMES);
		if (nunw == -ENOMEM)
			return nunw;
		/* the snapshot's unwinding, unless the kernel's chain is longer */
		if (nunw > 0 && (size_t)nunw >= nu) {
			user = c->ipbuf;
			nu = nunw;
		}
	}
	s = malloc(sizeof(*s) + (nk + nu) * sizeof(uint64_t));
	if (!s)
		return -ENOMEM;
	s->type = r->type;
	s->pid = h->pid;
	s->tid = h->tid;
	s->time_ns = h->time_ns;
	s->set_id = h->set_id;
	s->nk = nk;
	s->nu = nu;
	for (i = 0; i < nk; i++)
		s->ips[i] = plabel_dec_ip(r, i);
	for (i = 0; i < nu; i++)
		s->ips[nk + i] = user ? user[i] : plabel_dec_ip(r, nk + i);
	if (plabel_grow(&c->samples, &c->samples_cap, c->nsamples,
			sizeof(*c->samples))) {
		free(s);
		return -ENOMEM;
	}
	c->samples[c->nsamples++] = s;
	return 0;
}

int plabel_collect_record(struct plabel_collect *c,
			  const struct plabel_dec_rec *r)
{
	struct plabel_proc *p;
	uint64_t *et;

	switch (r->type) {
	case PLABEL_REC_STREAM:
		c->st.version = r->u.stream.version;
		plabel_collect_set_period(c, r->u.stream.period_ns);
		return 0;
	case PLABEL_REC_LABELSET:
		return plabel_add_labelset(c, r);
	case PLABEL_REC_SAMPLE:
	case PLABEL_REC_THREAD:
		return plabel_add_sample(c, r);
	case PLABEL_REC_LOST:
		c->st.lost += r->u.lost.lost;
		return 0;
	case PLABEL_REC_MMAP:
		p = plabel_proc_get(c, r->u.mmap.hdr.pid);
		if (!p)
			return -ENOMEM;
		return plabel_proc_add_map(c, p, r->u.mmap.hdr.start,
					   r->u.mmap.hdr.end,
					   r->u.mmap.hdr.offset,
					   r->u.mmap.hdr.time_ns,
					   r->u.mmap.path.ptr,
					   r->u.mmap.path.len, 0);
	case PLABEL_REC_EXEC:
		p = plabel_proc_get(c, r->u.exec.pid);
		if (!p)
			return -ENOMEM;
		if (p->nexec == p->exec_cap) {
			size_t ncap = p->exec_cap ? p->exec_cap * 2 : 4;

			et = realloc(p->exec_times, ncap * sizeof(*et));
			if (!et)
				return -ENOMEM;
			p->exec_times = et;
			p->exec_cap = ncap;
		}
		p->exec_times[p->nexec++] = r->u.exec.time_ns;
		p->view_ok = 0;	/* generations after it move up */
		/* maps seen before (e.g. from /proc) keep their generation */
		return 0;
	default:
		return 0;	/* unknown types are skipped */
	}
}

int plabel_collect_buffer(struct plabel_collect *c, const void *buf,
			  size_t len)
{
	struct plabel_dec_rec *r;
	struct plabel_dec d;
	int ret;

	r = malloc(sizeof(*r));
	if (!r)
		return -ENOMEM;
	plabel_dec_init(&d, buf, len);
	while ((ret = plabel_dec_next(&d, r)) > 0) {
		ret = plabel_collect_record(c, r);
		if (ret)
			break;
	}
	free(r);
	if (ret == -EBADMSG)
		c->st.bad++;
	return ret;
}

/* ---- building the profiles ---- */

struct plabel_loc_cache {
	struct plabel_loc_ent *ents;
	size_t cap, n;
};

static uint64_t plabel_hash2(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL);

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 29;
	return h;
}

static uint64_t *plabel_loc_slot(struct plabel_loc_cache *lc, uint64_t a,
				 uint64_t b)
{
	size_t i;

	if ((lc->n + 1) * 2 > lc->cap) {
		size_t ncap = lc->cap ? lc->cap * 2 : 1024, j;
		struct plabel_loc_ent *ne = calloc(ncap, sizeof(*ne));

		if (!ne)
			return NULL;
		for (j = 0; j < lc->cap; j++) {
			struct plabel_loc_ent *e = &lc->ents[j];

			if (!e->loc)
				continue;
			i = plabel_hash2(e->key_a, e->key_b) & (ncap - 1);
			while (ne[i].loc)
				i = (i + 1) & (ncap - 1);
			ne[i] = *e;
		}
		free(lc->ents);
		lc->ents = ne;
		lc->cap = ncap;
	}
	i = plabel_hash2(a, b) & (lc->cap - 1);
	while (lc->ents[i].loc) {
		if (lc->ents[i].key_a == a && lc->ents[i].key_b == b)
			return &lc->ents[i].loc;
		i = (i + 1) & (lc->cap - 1);
	}
	lc->ents[i].key_a = a;
	lc->ents[i].key_b = b;
	lc->n++;
	return &lc->ents[i].loc;	/* 0: caller fills it */
}

struct plabel_build {
	struct plabel_collect *c;
	struct plabel_prof *prof;
	struct plabel_loc_cache lc;
	uint64_t kmap;		/* kernel mapping id */
	uint64_t *uses;		/* frames per user mapping id */
	size_t nuses;
};

/* Count a frame in user mapping mid, for plabel_main_mapping(). */
static void plabel_count_use(struct plabel_build *b, uint64_t mid)
{
	if (mid >= b->nuses) {
		size_t n = b->nuses ? b->nuses : 16;
		uint64_t *u;

		while (n <= mid)
			n *= 2;
		u = realloc(b->uses, n * sizeof(*u));
		if (!u)
			return;	/* only a hint for which file is main */
		memset(u + b->nuses, 0, (n - b->nuses) * sizeof(*u));
		b->uses = u;
		b->nuses = n;
	}
	b->uses[mid]++;
}

/*
 * The main binary: the user mapping with the most frames that is not a
 * shared library, else the one with the most frames.
 */
static void plabel_main_mapping(struct plabel_build *b)
{
	uint64_t best = 0, best_exe = 0;
	size_t i, n = plabel_prof_num_mappings(b->prof);

	for (i = 0; i < n; i++) {
		struct plabel_prof_mapping_info mi;
		const char *base;

		plabel_prof_get_mapping(b->prof, i, &mi);
		if (mi.id >= b->nuses || !b->uses[mi.id])
			continue;
		if (!best || b->uses[mi.id] > b->uses[best])
			best = mi.id;
		base = strrchr(mi.file, '/');
		base = base ? base + 1 : mi.file;
		if (strstr(base, ".so") || base[0] == '[')
			continue;
		if (!best_exe || b->uses[mi.id] > b->uses[best_exe])
			best_exe = mi.id;
	}
	if (best_exe || best)
		plabel_prof_set_main_mapping(b->prof, best_exe ? best_exe : best);
}

static uint64_t plabel_kernel_loc(struct plabel_build *b, uint64_t ip)
{
	struct plabel_prof_line line = { 0 };
	uint64_t *slot;

	if (!b->kmap) {
		b->kmap = plabel_prof_mapping(b->prof, PLABEL_KERNEL_START,
					      UINT64_MAX, 0,
					      "[kernel.kallsyms]", NULL);
		if (!b->kmap)
			return 0;
	}
	slot = plabel_loc_slot(&b->lc, b->kmap, ip);
	if (!slot)
		return 0;
	if (*slot)
		return *slot;
	line.function = plabel_syms_kernel(b->c->syms, ip);
	*slot = plabel_prof_location(b->prof, b->kmap, ip, &line,
				     line.function ? 1 : 0);
	if (!*slot)
		b->lc.n--;	/* leave no half-made entry counted */
	return *slot;
}

/*
 * The profile's id of mapping view[k] of p. Looked up once per mapping
 * and profile: interning and hashing its path for every frame was the
 * largest cost of building.
 */
static uint64_t plabel_view_mid(struct plabel_build *b, struct plabel_proc *p,
				size_t k)
{
	uint64_t *mid = &p->map_mid[p->view_idx[k]];
	const struct plabel_map *m = &p->view[k];

	if (!*mid)
		*mid = plabel_prof_mapping(b->prof, m->start, m->end,
					   m->offset, m->path, m->elf ?
					   plabel_elf_build_id(m->elf) : NULL);
	return *mid;
}

/* The location of user address ip of p (leaf: not a return address). */
static uint64_t plabel_user_loc(struct plabel_build *b, struct plabel_proc *p,
				uint64_t ip, int leaf)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	struct plabel_prof_line lines[PLABEL_SYM_MAX_FRAMES];
	const struct plabel_map *m = plabel_maps_find(p->view, p->nview, ip);
	uint64_t mid = 0, bias, *slot;
	int n = 0, i;

	if (m) {
		mid = plabel_view_mid(b, p, m - p->view);
		if (!mid)
			return 0;
		plabel_count_use(b, mid);
	}
	slot = plabel_loc_slot(&b->lc, mid, ip);
	if (!slot)
		return 0;
	if (*slot)
		return *slot;
	/* a return address points after the call: look up the call */
	if (m && m->elf && !plabel_elf_bias(m->elf, m->start, m->offset, &bias))
		n = plabel_elf_symbolize(m->elf, ip - bias - (leaf ? 0 : 1),
					 fr, PLABEL_SYM_MAX_FRAMES);
	for (i = 0; i < n; i++) {
		lines[i].function = fr[i].function;
		lines[i].file = fr[i].file;
		lines[i].line = fr[i].line;
	}
	*slot = plabel_prof_location(b->prof, mid, ip, lines, n);
	if (!*slot)
		b->lc.n--;
	return *slot;
}

static int plabel_lset_cmp(const void *a, const void *b)
{
	const struct plabel_lset *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * Add sample s, at locations locs, to the profile: with its label set,
 * whose labels the profile checks and interns once, not for every sample.
 */
static int plabel_build_add(struct plabel_build *b,
			    const struct plabel_csample *s,
			    const uint64_t *locs, size_t nlocs)
{
	struct plabel_collect *c = b->c;
	int pids = c->flags & PLABEL_COLLECT_PID_LABELS;
	int64_t pid = pids ? (int64_t)s->pid : -1;
	int64_t tid = pids ? (int64_t)s->tid : -1;
	int64_t nanos = s->type == PLABEL_REC_SAMPLE ? (int64_t)c->period_ns :
						       0;
	struct plabel_prof_label unres;
	struct plabel_lset *ls = NULL;
	char idbuf[32];
	int ret;

	if (s->set_id) {
		ls = plabel_lset_find(c, s->set_id);
		if (!ls) {
			/* never drop it silently: name the missing set */
			snprintf(idbuf, sizeof(idbuf), "%" PRIu64, s->set_id);
			unres.key = "plabel_unresolved_set";
			unres.value = idbuf;
			c->st.unresolved++;
			return plabel_prof_sample(b->prof, locs, nlocs, &unres,
						  1, pid, tid, 1, nanos);
		}
		if (!ls->prof_set) {
			ret = plabel_prof_labelset(b->prof, ls->labels,
						   ls->count, &ls->prof_set);
			if (ret)
				return ret;
		}
	}
	return plabel_prof_sample_labelset(b->prof, locs, nlocs,
					   ls ? ls->prof_set : 0, pid, tid, 1,
					   nanos);
}

static int plabel_build_sample(struct plabel_build *b,
			       const struct plabel_csample *s, uint64_t *locs)
{
	struct plabel_proc *p;
	size_t nlocs = 0, i;
	int cpu = s->type == PLABEL_REC_SAMPLE;

	p = plabel_proc_get(b->c, s->pid);
	if (!p || plabel_proc_view(p, plabel_proc_gen(p, s->time_ns)))
		return -ENOMEM;
	for (i = 0; i < s->nk + s->nu && nlocs < PLABEL_MAX_FRAMES; i++) {
		uint64_t ip = s->ips[i], id;

		if (!ip)
			continue;
		if (i < s->nk || ip >= PLABEL_KERNEL_START)
			id = plabel_kernel_loc(b, ip);
		else
			id = plabel_user_loc(b, p, ip, i == 0 ||
					     (i == s->nk && cpu && !s->nk));
		if (!id)
			return -ENOMEM;
		locs[nlocs++] = id;
	}
	return plabel_build_add(b, s, locs, nlocs);
}

/*
 * Forget the ids of the previous profile: mapping ids per process mapping,
 * label sets.
 */
static int plabel_build_reset(struct plabel_collect *c)
{
	size_t i;

	for (i = 0; i < c->nprocs; i++) {
		struct plabel_proc *p = &c->procs[i];
		uint64_t *mid;

		if (!p->nmaps)
			continue;
		mid = realloc(p->map_mid, p->nmaps * sizeof(*mid));
		if (!mid)
			return -ENOMEM;
		memset(mid, 0, p->nmaps * sizeof(*mid));
		p->map_mid = mid;
	}
	for (i = 0; i < c->nlsets; i++)
		c->lsets[i].prof_set = 0;
	return 0;
}

static int plabel_build_one(struct plabel_collect *c, uint32_t type,
			    struct plabel_prof *prof)
{
	struct plabel_build b = { .c = c, .prof = prof };
	uint64_t *locs;
	char comment[96];
	size_t i;
	int ret;

	ret = plabel_build_reset(c);
	if (ret)
		return ret;
	locs = malloc(PLABEL_MAX_FRAMES * sizeof(*locs));
	if (!locs)
		return -ENOMEM;
	for (i = 0; i < c->nsamples && !ret; i++) {
		const struct plabel_csample *cs = c->samples[i];

		if (cs->type != type)
			continue;
		if (cs->pid && cs->pid == c->skip_pid) {
			struct plabel_proc *p = plabel_proc_get(c, cs->pid);

			if (p && p->nexec && !plabel_proc_gen(p, cs->time_ns))
				continue;
		}
		ret = plabel_build_sample(&b, cs, locs);
	}
	free(locs);
	free(b.lc.ents);
	if (!ret)
		plabel_main_mapping(&b);
	free(b.uses);
	if (ret)
		return ret;
	snprintf(comment, sizeof(comment), "lost records: %" PRIu64,
		 c->st.lost);
	if (plabel_prof_add_comment(prof, comment))
		return -ENOMEM;
	if (c->st.unresolved) {
		snprintf(comment, sizeof(comment),
			 "samples with an unresolved label set: %" PRIu64,
			 c->st.unresolved);
		if (plabel_prof_add_comment(prof, comment))
			return -ENOMEM;
	}
	return 0;
}

int plabel_collect_finish(struct plabel_collect *c, int64_t time_nanos,
			  int64_t duration_nanos, struct plabel_prof **cpu,
			  struct plabel_prof **threadcreate)
{
	struct plabel_prof *pc, *pt;
	int ret;

	if (c->nlsets)
		qsort(c->lsets, c->nlsets, sizeof(*c->lsets),
		      plabel_lset_cmp);
	c->lsets_sorted = 1;
	c->st.unresolved = 0;

	pc = plabel_prof_new(PLABEL_PROF_CPU, c->period_ns);
	pt = plabel_prof_new(PLABEL_PROF_THREADCREATE, 1);
	if (!pc || !pt) {
		ret = -ENOMEM;
		goto err_free;
	}
	plabel_prof_set_time(pc, time_nanos, duration_nanos);
	plabel_prof_set_time(pt, time_nanos, duration_nanos);
	ret = plabel_build_one(c, PLABEL_REC_SAMPLE, pc);
	if (ret)
		goto err_free;
	ret = plabel_build_one(c, PLABEL_REC_THREAD, pt);
	if (ret)
		goto err_free;
	*cpu = pc;
	*threadcreate = pt;
	return 0;

err_free:
	plabel_prof_free(pc);
	plabel_prof_free(pt);
	return ret;
}
