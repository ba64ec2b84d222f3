/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Growing arrays and one open-addressing table, for the reader's models
 * (collect.c, profile.c, report.c).
 *
 * struct plabel_itab maps 64-bit hashes to item indices: the items live in
 * the owner's array, and the owner compares them, so one table serves
 * every key (a pid, a call chain, a string). Linear probing, kept at most
 * half full, the hash stored with each index so that growing needs
 * nothing from the owner. A zeroed struct plabel_itab is an empty table.
 */
#ifndef PLABEL_TOOLS_TABLE_H
#define PLABEL_TOOLS_TABLE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Room in *arr (*cap elements of size elsz allocated) for n elements:
 * doubles, from 16. 0 or -ENOMEM (*arr left as it was).
 */
int plabel_grow_to(void *arr, size_t *cap, size_t n, size_t elsz);

/* Room for one more than the n elements used. */
static inline int plabel_grow(void *arr, size_t *cap, size_t n, size_t elsz)
{
	return n < *cap ? 0 : plabel_grow_to(arr, cap, n + 1, elsz);
}

struct plabel_islot {
	uint64_t hash;
	size_t idx1;		/* item index + 1; 0: an empty slot */
};

struct plabel_itab {
	struct plabel_islot *slot;
	size_t cap;		/* a power of two, or 0 */
	size_t n;		/* items put */
};

/*
 * Items whose hash is hash: start with *pos = SIZE_MAX; each call returns
 * the next candidate's index, SIZE_MAX after the last.
 */
static inline size_t plabel_itab_next(const struct plabel_itab *t,
				      uint64_t hash, size_t *pos)
{
	size_t i;

	if (!t->cap)
		return SIZE_MAX;
	i = *pos == SIZE_MAX ? (size_t)hash & (t->cap - 1) :
			       (*pos + 1) & (t->cap - 1);
	for (; t->slot[i].idx1; i = (i + 1) & (t->cap - 1)) {
		if (t->slot[i].hash == hash) {
			*pos = i;
			return t->slot[i].idx1 - 1;
		}
	}
	return SIZE_MAX;
}

/* Room for n more items, so that as many plabel_itab_put() cannot fail. */
int plabel_itab_reserve(struct plabel_itab *t, size_t n);
/* Only after a plabel_itab_reserve() that made room for it. */
void plabel_itab_put(struct plabel_itab *t, uint64_t hash, size_t idx);
/* Empty, keeping the memory. */
void plabel_itab_clear(struct plabel_itab *t);
void plabel_itab_free(struct plabel_itab *t);

/*
 * Touch n bytes at p, one write a page, so that their page faults are
 * taken now, not while the profiled program runs.
 */
void plabel_touch(void *p, size_t n);

/* Bytes of the slots, for touching them ahead of use. */
static inline size_t plabel_itab_bytes(const struct plabel_itab *t)
{
	return t->cap * sizeof(*t->slot);
}

/*
 * A map of pairs of words to a word, on struct plabel_itab. A zeroed one
 * is empty.
 */
struct plabel_pair_ent {
	uint64_t key_a, key_b;
	uint64_t val;
};

struct plabel_pair_map {
	struct plabel_pair_ent *ents;
	size_t n, cap;
	struct plabel_itab tab;
};

/*
 * The value of (a, b), added as 0 if new: the caller fills it in (a value
 * left 0 reads as new the next time). NULL on ENOMEM.
 */
uint64_t *plabel_pair_slot(struct plabel_pair_map *pm, uint64_t a,
			   uint64_t b);
void plabel_pair_map_free(struct plabel_pair_map *pm);

/*
 * The index of the element of the array *arr (*n of elsz bytes, *cap
 * allocated) whose first member, a uint32_t, is key: t indexes them by
 * key. An element not there is appended, zeroed but for its key, and
 * *fresh (when not NULL) set. SIZE_MAX on ENOMEM.
 */
size_t plabel_itab_u32(struct plabel_itab *t, void *arr, size_t *n,
		       size_t *cap, size_t elsz, uint32_t key, int *fresh);

#define PLABEL_FNV_INIT		0xcbf29ce484222325ULL
#define PLABEL_FNV_PRIME	0x100000001b3ULL

/* FNV-1a of the string s, going on from h (PLABEL_FNV_INIT to start). */
static inline uint64_t plabel_str_hash(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * PLABEL_FNV_PRIME;
	return h;
}

/* Mixes two words into a hash (a splitmix64 finish). */
static inline uint64_t plabel_hash2(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL);

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 29;
	return h;
}

#endif /* PLABEL_TOOLS_TABLE_H */
