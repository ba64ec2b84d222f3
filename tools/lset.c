// SPDX-License-Identifier: GPL-2.0
/*
 * Label sets by id (see lset.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lset.h"
#include "table.h"

void plabel_lsets_release(struct plabel_lsets *ls)
{
	size_t i, j;

	for (i = 0; i < ls->n; i++) {
		for (j = 0; j < ls->sets[i].count; j++) {
			free((char *)ls->sets[i].labels[j].key);
			free((char *)ls->sets[i].labels[j].value);
		}
		free(ls->sets[i].labels);
	}
	free(ls->sets);
	memset(ls, 0, sizeof(*ls));
}

const struct plabel_lset *plabel_lsets_find(const struct plabel_lsets *ls,
					    uint64_t id)
{
	size_t i;

	if (ls->sorted) {
		size_t lo = 0, hi = ls->n;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (ls->sets[mid].id == id)
				return &ls->sets[mid];
			if (ls->sets[mid].id < id)
				lo = mid + 1;
			else
				hi = mid;
		}
		return NULL;
	}
	for (i = 0; i < ls->n; i++)
		if (ls->sets[i].id == id)
			return &ls->sets[i];
	return NULL;
}

int plabel_lsets_add(struct plabel_lsets *ls, uint64_t id,
		     const struct plabel_dec_label *labels, uint32_t count)
{
	struct plabel_lset *set;
	uint32_t i;

	if (!id || plabel_lsets_find(ls, id))
		return 0;	/* repeats are expected */
	if (plabel_grow(&ls->sets, &ls->cap, ls->n, sizeof(*set)))
		return -ENOMEM;
	set = &ls->sets[ls->n];
	set->id = id;
	set->count = 0;
	set->labels = calloc(count ? count : 1, sizeof(*set->labels));
	if (!set->labels)
		return -ENOMEM;
	/* still sorted when it comes after the last (sets added in order) */
	ls->sorted = ls->sorted && (ls->n == 0 || ls->sets[ls->n - 1].id < id);
	ls->n++;
	for (i = 0; i < count; i++) {
		char *k = strndup(labels[i].key.ptr, labels[i].key.len);
		char *v = strndup(labels[i].value.ptr, labels[i].value.len);

		if (!k || !v) {
			free(k);
			free(v);
			return -ENOMEM;
		}
		set->labels[i].key = k;
		set->labels[i].value = v;
		set->count++;
	}
	return 0;
}

static int lset_cmp(const void *a, const void *b)
{
	const struct plabel_lset *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

void plabel_lsets_sort(struct plabel_lsets *ls)
{
	if (ls->n)
		qsort(ls->sets, ls->n, sizeof(*ls->sets), lset_cmp);
	ls->sorted = 1;
}
