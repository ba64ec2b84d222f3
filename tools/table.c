// SPDX-License-Identifier: GPL-2.0
/*
 * Growing arrays and the open-addressing index table (see table.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

int plabel_grow_to(void *arr, size_t *cap, size_t n, size_t elsz)
{
	void **a = arr;
	size_t ncap = *cap ? *cap : 16;
	void *na;

	if (n <= *cap)
		return 0;
	while (ncap < n) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	if (ncap > SIZE_MAX / elsz)
		return -ENOMEM;
	na = realloc(*a, ncap * elsz);
	if (!na)
		return -ENOMEM;
	*a = na;
	*cap = ncap;
	return 0;
}

int plabel_itab_reserve(struct plabel_itab *t, size_t n)
{
	size_t ncap = t->cap ? t->cap : 64, i, j;
	struct plabel_islot *ns;

	if (n > SIZE_MAX / 4 - t->n)
		return -ENOMEM;
	if ((t->n + n) * 2 <= t->cap)
		return 0;
	while ((t->n + n) * 2 > ncap)
		ncap *= 2;
	if (ncap > SIZE_MAX / sizeof(*ns))
		return -ENOMEM;
	ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	for (j = 0; j < t->cap; j++) {
		if (!t->slot[j].idx1)
			continue;
		i = (size_t)t->slot[j].hash & (ncap - 1);
		while (ns[i].idx1)
			i = (i + 1) & (ncap - 1);
		ns[i] = t->slot[j];
	}
	free(t->slot);
	t->slot = ns;
	t->cap = ncap;
	return 0;
}

void plabel_itab_put(struct plabel_itab *t, uint64_t hash, size_t idx)
{
	size_t i = (size_t)hash & (t->cap - 1);

	while (t->slot[i].idx1)
		i = (i + 1) & (t->cap - 1);
	t->slot[i].hash = hash;
	t->slot[i].idx1 = idx + 1;
	t->n++;
}

size_t plabel_itab_u32(struct plabel_itab *t, void *arr, size_t *n,
		       size_t *cap, size_t elsz, uint32_t key, int *fresh)
{
	uint64_t h = plabel_hash2(key, 0);
	size_t i, pos = SIZE_MAX;
	char **a = arr;
	uint32_t k;

	while ((i = plabel_itab_next(t, h, &pos)) != SIZE_MAX) {
		memcpy(&k, *a + i * elsz, sizeof(k));
		if (k == key) {
			if (fresh)
				*fresh = 0;
			return i;
		}
	}
	if (plabel_itab_reserve(t, 1) || plabel_grow(arr, cap, *n, elsz))
		return SIZE_MAX;
	memset(*a + *n * elsz, 0, elsz);
	memcpy(*a + *n * elsz, &key, sizeof(key));
	plabel_itab_put(t, h, *n);
	if (fresh)
		*fresh = 1;
	return (*n)++;
}

void plabel_itab_clear(struct plabel_itab *t)
{
	if (t->slot)
		memset(t->slot, 0, t->cap * sizeof(*t->slot));
	t->n = 0;
}

void plabel_itab_free(struct plabel_itab *t)
{
	free(t->slot);
	t->slot = NULL;
	t->cap = t->n = 0;
}

uint64_t *plabel_pair_slot(struct plabel_pair_map *pm, uint64_t a,
			   uint64_t b)
{
	uint64_t h = plabel_hash2(a, b);
	struct plabel_pair_ent *e;
	size_t i, pos = SIZE_MAX;

	while ((i = plabel_itab_next(&pm->tab, h, &pos)) != SIZE_MAX) {
		e = &pm->ents[i];
		if (e->key_a == a && e->key_b == b)
			return &e->val;
	}
	if (plabel_itab_reserve(&pm->tab, 1) ||
	    plabel_grow(&pm->ents, &pm->cap, pm->n, sizeof(*pm->ents)))
		return NULL;
	e = &pm->ents[pm->n];
	e->key_a = a;
	e->key_b = b;
	e->val = 0;
	plabel_itab_put(&pm->tab, h, pm->n++);
	return &e->val;
}

void plabel_pair_map_free(struct plabel_pair_map *pm)
{
	free(pm->ents);
	pm->ents = NULL;
	pm->n = pm->cap = 0;
	plabel_itab_free(&pm->tab);
}

/*
 * Touch n bytes at p, one write a page: fresh memory is a page fault and
 * the kernel clearing the page on first touch.
 */
void plabel_touch(void *p, size_t n)
{
	volatile uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i += 4096)
		b[i] = 0;
	if (n)
		b[n - 1] = 0;
}
