/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The label sets of a recording, by the kernel's set id: what LABELSET
 * records say, kept until the profiles are built.
 */
#ifndef PLABEL_TOOLS_LSET_H
#define PLABEL_TOOLS_LSET_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"
#include "stream.h"

struct plabel_lset {
	uint64_t id;
	uint32_t count;
	struct plabel_prof_label *labels;	/* strings malloc()ed */
};

/* A zeroed one holds none. */
struct plabel_lsets {
	struct plabel_lset *sets;
	size_t n, cap;
	int sorted;		/* by id: found by bisection */
};

void plabel_lsets_release(struct plabel_lsets *ls);

/*
 * Set id with count labels (copied); a set seen before, or id 0, is left
 * as it is (repeats are expected). 0 or -ENOMEM.
 */
int plabel_lsets_add(struct plabel_lsets *ls, uint64_t id,
		     const struct plabel_dec_label *labels, uint32_t count);

/* Set id, or NULL when it never came. */
const struct plabel_lset *plabel_lsets_find(const struct plabel_lsets *ls,
					    uint64_t id);

/* Sort by id, for the many lookups of building; indices change. */
void plabel_lsets_sort(struct plabel_lsets *ls);

static inline size_t plabel_lsets_count(const struct plabel_lsets *ls)
{
	return ls->n;
}

/* The index of set (from plabel_lsets_find()), below the count. */
static inline size_t plabel_lsets_index(const struct plabel_lsets *ls,
					const struct plabel_lset *set)
{
	return (size_t)(set - ls->sets);
}

#endif /* PLABEL_TOOLS_LSET_H */
