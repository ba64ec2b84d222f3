/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Call chains, interned: each distinct one stored once, named by an index.
 */
#ifndef PLABEL_TOOLS_CHAIN_H
#define PLABEL_TOOLS_CHAIN_H

#include <stddef.h>
#include <stdint.h>

#include "table.h"

/* The most frames unwound for a sample, and resolved of a chain. */
#define PLABEL_MAX_FRAMES	1024

/*
 * A distinct call chain. Millions of samples repeat some thousands of
 * chains, so each is stored once and a sample names it: a sample is then
 * 40 bytes, not an allocation of its own copy, and building resolves a
 * chain's addresses once per process image, not once per sample.
 */
struct plabel_chain {
	uint64_t hash;
	uint32_t nk, nu;	/* kernel and user frames in ips */
	uint64_t ips[];
};

struct plabel_cblock;

/* The chains interned so far; a zeroed one holds none. */
struct plabel_chains {
	struct plabel_chain **by_idx;
	size_t n, cap;
	struct plabel_itab tab;
	struct plabel_cblock *blocks;	/* where they are stored */
	uint64_t *joinbuf;	/* plabel_chain_join()'s chain, looked up */
	size_t joinbuf_cap;
	/*
	 * By a hash of the first two addresses (PLABEL_CHAIN_HINTS of
	 * them): 1 + the index of the chain last found there in the low 32
	 * bits (0: none), the rest of that hash in the high 32. Looked at
	 * before the table: small enough to stay in the cache, and a chain
	 * found there costs no hashing.
	 */
	uint64_t *hint;
};

void plabel_chains_release(struct plabel_chains *cs);

/*
 * The index of the chain of nk kernel and nu user addresses ips (u64s,
 * any alignment), stored if new. 0 or -ENOMEM.
 */
int plabel_chain_get(struct plabel_chains *cs, const void *ips, uint32_t nk,
		     uint32_t nu, uint32_t *idx);
/*
 * The index of the chain of the nk kernel addresses kips (u64s, any
 * alignment) followed by the nu user addresses user, stored if new. 0 or
 * -ENOMEM.
 */
int plabel_chain_join(struct plabel_chains *cs, const void *kips, size_t nk,
		      const uint64_t *user, size_t nu, uint32_t *idx);

static inline const struct plabel_chain *
plabel_chain_at(const struct plabel_chains *cs, uint32_t idx)
{
	return cs->by_idx[idx];
}

/* The first tables and block allocated and touched. 0 or -ENOMEM. */
int plabel_chains_prefault(struct plabel_chains *cs);

#endif /* PLABEL_TOOLS_CHAIN_H */
