// SPDX-License-Identifier: GPL-2.0
/*
 * Processes, their mappings and generations (see proc.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"

static void proc_free(struct plabel_proc *p)
{
	plabel_maps_free(p->maps, p->nmaps);
	free(p->map_gen);
	free(p->map_last);
	free(p->map_fallback);
	free(p->exec_times);
	free(p->exec_names);
	free(p->view);
	free(p->view_idx);
}

void plabel_procs_release(struct plabel_procs *ps)
{
	size_t i;

	for (i = 0; i < ps->n; i++)
		proc_free(&ps->by_idx[i]);
	free(ps->by_idx);
	plabel_itab_free(&ps->tab);
	memset(ps, 0, sizeof(*ps));
}

int plabel_procs_prefault(struct plabel_procs *ps)
{
	if (plabel_grow_to(&ps->by_idx, &ps->cap, 64, sizeof(*ps->by_idx)) ||
	    plabel_itab_reserve(&ps->tab, 512))
		return -ENOMEM;
	plabel_touch(ps->by_idx, ps->cap * sizeof(*ps->by_idx));
	plabel_touch(ps->tab.slot, plabel_itab_bytes(&ps->tab));
	return 0;
}

uint32_t plabel_proc_gen(const struct plabel_proc *p, uint64_t t)
{
	uint32_t g = 0;
	size_t i;

	for (i = 0; i < p->nexec; i++)
		if (p->exec_times[i] <= t)
			g++;
	return g;
}

int plabel_proc_add_map(struct plabel_syms *syms, struct plabel_proc *p,
			uint64_t start, uint64_t end, uint64_t off, uint64_t t,
			const char *path, size_t path_len, int fallback)
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
			/* an exec read later may yet put t in a later image */
			if (t > p->map_last[i])
				p->map_last[i] = t;
			if (!fallback && p->map_fallback[i]) {
				/* real now: its place in the view moves */
				p->map_fallback[i] = 0;
				p->view_ok = 0;
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
	if (plabel_grow(&p->map_last, &cap, p->nmaps, sizeof(*p->map_last)))
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
	m->elf = plabel_syms_elf(syms, ps);
	if (!m->elf && ps[0] == '/') {
		/*
		 * The kernel names files as its own context sees them; under
		 * a chroot or container the prefix differs from ours. Try the
		 * path with leading directories dropped.
		 */
		const char *q = ps;

		while (!m->elf && (q = strchr(q + 1, '/')))
			m->elf = plabel_syms_elf(syms, q);
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
	p->map_last[p->nmaps] = t;
	p->map_fallback[p->nmaps] = fallback;
	p->nmaps++;
	p->view_ok = 0;
	return 0;
}

int plabel_proc_read_maps(struct plabel_syms *syms, struct plabel_proc *p,
			  uint64_t t)
{
	struct plabel_map *m;
	size_t n, i;
	int ret = 0;

	if (plabel_maps_read_proc(syms, p->pid, &m, &n))
		return 0;	/* gone already: nothing to fall back on */
	for (i = 0; i < n && !ret; i++)
		ret = plabel_proc_add_map(syms, p, m[i].start, m[i].end,
					  m[i].offset, t, m[i].path,
					  strlen(m[i].path), 1);
	plabel_maps_free(m, n);
	return ret ? ret : 1;
}

int plabel_proc_view(struct plabel_proc *p, uint32_t gen)
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

int plabel_proc_exec(struct plabel_syms *syms, struct plabel_proc *p,
		     uint64_t t, uint32_t name)
{
	size_t cap = p->exec_cap, i, n;

	if (plabel_grow(&p->exec_times, &cap, p->nexec,
			sizeof(*p->exec_times)))
		return -ENOMEM;
	cap = p->exec_cap;
	if (plabel_grow(&p->exec_names, &cap, p->nexec,
			sizeof(*p->exec_names)))
		return -ENOMEM;
	p->exec_cap = cap;
	p->exec_names[p->nexec] = name;
	p->exec_times[p->nexec++] = t;
	p->view_ok = 0;	/* generations after it move up */
	/*
	 * The kernel's mappings stamped after the exec belong to the image
	 * it started, also when they came first (from another CPU's ring);
	 * those from /proc keep the generation they were read for. A
	 * mapping reported both before and after it (the same file at the
	 * same place) is one of each image.
	 */
	n = p->nmaps;
	for (i = 0; i < n; i++)
		if (!p->map_fallback[i])
			p->map_gen[i] = plabel_proc_gen(p, p->maps[i].time_ns);
	for (i = 0; i < n; i++) {
		struct plabel_map m = p->maps[i];
		uint64_t last = p->map_last[i];
		int ret;

		if (p->map_fallback[i] ||
		    plabel_proc_gen(p, last) == p->map_gen[i])
			continue;
		ret = plabel_proc_add_map(syms, p, m.start, m.end, m.offset,
					  last, m.path, strlen(m.path), 0);
		if (ret)
			return ret;
	}
	return 0;
}

uint32_t plabel_proc_name_at(const struct plabel_proc *p, uint64_t t)
{
	uint64_t best_t = 0;
	uint32_t name = p->name0;
	size_t i;

	for (i = 0; i < p->nexec; i++)
		if (p->exec_times[i] <= t && p->exec_times[i] >= best_t) {
			best_t = p->exec_times[i];
			name = p->exec_names[i];
		}
	return name;
}

struct plabel_proc *plabel_procs_get(struct plabel_procs *ps, uint32_t pid)
{
	size_t i;

	/* runs of records from one process are the rule */
	if (ps->last && ps->by_idx[ps->last - 1].pid == pid)
		return &ps->by_idx[ps->last - 1];
	i = plabel_itab_u32(&ps->tab, &ps->by_idx, &ps->n, &ps->cap,
			    sizeof(*ps->by_idx), pid, NULL);
	if (i == SIZE_MAX)
		return NULL;
	ps->last = i + 1;
	return &ps->by_idx[i];
}
