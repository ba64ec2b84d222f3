// SPDX-License-Identifier: GPL-2.0
/*
 * OFFCPU records with their ENDs. See join.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "join.h"

struct plabel_join_open {
	uint64_t out_ns;
	uint8_t *raw;		/* the OFFCPU record's copy */
	uint32_t size;
};

struct plabel_join_end {
	uint64_t out_ns, end_ns;
};

struct plabel_join_thr {
	uint32_t tid;		/* first: plabel_itab_u32()'s key */
	uint32_t nopen, nend;
	struct plabel_join_open *open;
	struct plabel_join_end *end;
	size_t open_cap, end_cap;
};

void plabel_join_release(struct plabel_join *j)
{
	size_t i;
	uint32_t k;

	for (i = 0; i < j->n; i++)
	{
		for (k = 0; k < j->thrs[i].nopen; k++)
			free(j->thrs[i].open[k].raw);
		free(j->thrs[i].open);
		free(j->thrs[i].end);
	}
	free(j->thrs);
	plabel_itab_free(&j->tab);
	memset(j, 0, sizeof(*j));
}

static struct plabel_join_thr *thr_get(struct plabel_join *j, uint32_t tid)
{
	size_t i = plabel_itab_u32(&j->tab, &j->thrs, &j->n, &j->cap,
				   sizeof(*j->thrs), tid, NULL);

	return i == SIZE_MAX ? NULL : &j->thrs[i];
}

static void open_drop(struct plabel_join_thr *t, uint32_t k)
{
	free(t->open[k].raw);
	t->open[k] = t->open[--t->nopen];
}

static void end_drop(struct plabel_join_thr *t, uint32_t k)
{
	t->end[k] = t->end[--t->nend];
}

/*
 * Drop what cannot be joined any more: an OFFCPU record with a later one
 * of the thread stamped before settled (its END, stamped before that, would
 * be in); an END whose OFFCPU record, stamped before settled, is not.
 */
static void prune(struct plabel_join *j, struct plabel_join_thr *t,
		  uint64_t settled)
{
	uint64_t newest = 0;
	uint32_t k;

	for (k = 0; k < t->nopen; k++)
		if (t->open[k].out_ns < settled && t->open[k].out_ns > newest)
			newest = t->open[k].out_ns;
	for (k = 0; k < t->nopen;) {
		if (t->open[k].out_ns < newest)
			open_drop(t, k);
		else
			k++;
	}
	for (k = 0; k < t->nend;) {
		if (t->end[k].out_ns < settled) {
			j->dropped++;
			end_drop(t, k);
		} else {
			k++;
		}
	}
}

/* The index of the oldest OFFCPU record, and END, waiting. */
static uint32_t oldest_open(const struct plabel_join_thr *t)
{
	uint32_t k, o = 0;

	for (k = 1; k < t->nopen; k++)
		if (t->open[k].out_ns < t->open[o].out_ns)
			o = k;
	return o;
}

static uint32_t oldest_end(const struct plabel_join_thr *t)
{
	uint32_t k, o = 0;

	for (k = 1; k < t->nend; k++)
		if (t->end[k].out_ns < t->end[o].out_ns)
			o = k;
	return o;
}

int plabel_join_begin(struct plabel_join *j, uint32_t tid, uint64_t out_ns,
		      const void *raw, uint32_t size, uint64_t settled,
		      uint64_t *end_ns)
{
	struct plabel_join_thr *t = thr_get(j, tid);
	struct plabel_join_open *o;
	uint8_t *copy;
	uint32_t k;

	if (!t)
		return -ENOMEM;
	for (k = 0; k < t->nend; k++) {
		if (t->end[k].out_ns == out_ns) {
			*end_ns = t->end[k].end_ns;
			end_drop(t, k);
			return 1;
		}
	}
	prune(j, t, settled);
	copy = malloc(size ? size : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, raw, size);
	if (t->nopen == PLABEL_JOIN_MAX)
		open_drop(t, oldest_open(t));
	else if (plabel_grow(&t->open, &t->open_cap, t->nopen,
			     sizeof(*t->open))) {
		free(copy);
		return -ENOMEM;
	}
	o = &t->open[t->nopen++];
	o->out_ns = out_ns;
	o->raw = copy;
	o->size = size;
	return 0;
}

int plabel_join_end(struct plabel_join *j, uint32_t tid, uint64_t out_ns,
		    uint64_t end_ns, uint64_t settled, uint8_t **raw,
		    uint32_t *size)
{
	struct plabel_join_thr *t = thr_get(j, tid);
	uint32_t k;

	if (!t)
		return -ENOMEM;
	for (k = 0; k < t->nopen; k++) {
		if (t->open[k].out_ns == out_ns) {
			*raw = t->open[k].raw;
			*size = t->open[k].size;
			t->open[k] = t->open[--t->nopen];
			return 1;
		}
	}
	prune(j, t, settled);
	if (t->nend == PLABEL_JOIN_MAX) {
		j->dropped++;
		end_drop(t, oldest_end(t));
	} else if (plabel_grow(&t->end, &t->end_cap, t->nend,
			       sizeof(*t->end))) {
		return -ENOMEM;
	}
	t->end[t->nend].out_ns = out_ns;
	t->end[t->nend++].end_ns = end_ns;
	return 0;
}
