// SPDX-License-Identifier: GPL-2.0
/*
 * Interned call chains (see chain.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"

/* Chains are packed into large blocks, newest first. */
struct plabel_cblock {
	struct plabel_cblock *next;
	size_t used, size;	/* bytes of data */
	uint64_t data[];
};

#define PLABEL_CBLOCK_BYTES	(256U << 10)
/* Entries of plabel_chains.hint, a power of two */
#define PLABEL_CHAIN_HINTS	16384
/* Of the first block, touched ahead by plabel_chains_prefault(). */
#define PLABEL_PREFAULT_CHAINS	(32U << 10)

void plabel_chains_release(struct plabel_chains *cs)
{
	free(cs->by_idx);
	plabel_itab_free(&cs->tab);
	while (cs->blocks) {
		struct plabel_cblock *b = cs->blocks;

		cs->blocks = b->next;
		free(b);
	}
	free(cs->joinbuf);
	free(cs->hint);
	memset(cs, 0, sizeof(*cs));
}

/*
 * Two words at a time, in two lanes that do not wait for each other:
 * cheap next to the memory it saves. ips is n u64s, as bytes: a record's
 * chain is hashed where it lies in the read buffer.
 */
static uint64_t chain_hash(const void *ips, size_t n, uint32_t nk)
{
	uint64_t a = 0x9e3779b97f4a7c15ULL * (nk + 1) ^ n;
	uint64_t b = 0x632be59bd9b4e019ULL ^ n, ip, iq;
	const uint8_t *p = ips;
	size_t i;

	for (i = 0; i + 1 < n; i += 2) {
		memcpy(&ip, p + i * sizeof(ip), sizeof(ip));
		memcpy(&iq, p + (i + 1) * sizeof(iq), sizeof(iq));
		a = (a ^ ip) * 0x9e3779b97f4a7c15ULL;
		b = (b ^ iq) * 0xbf58476d1ce4e5b9ULL;
		a ^= a >> 32;
		b ^= b >> 29;
	}
	if (i < n) {
		memcpy(&ip, p + i * sizeof(ip), sizeof(ip));
		a = (a ^ ip) * 0x9e3779b97f4a7c15ULL;
		a ^= a >> 32;
	}
	return plabel_hash2(a, b);
}

/* Room for a chain of n addresses. */
static struct plabel_chain *chain_alloc(struct plabel_chains *cs, size_t n)
{
	size_t sz = sizeof(struct plabel_chain) + n * sizeof(uint64_t);
	struct plabel_cblock *b = cs->blocks;
	struct plabel_chain *ch;

	if (!b || b->size - b->used < sz) {
		size_t bsz = sz > PLABEL_CBLOCK_BYTES ? sz :
			     PLABEL_CBLOCK_BYTES;

		b = malloc(sizeof(*b) + bsz);
		if (!b)
			return NULL;
		b->used = 0;
		b->size = bsz;
		b->next = cs->blocks;
		cs->blocks = b;
	}
	ch = (struct plabel_chain *)((char *)b->data + b->used);
	b->used += sz;
	return ch;
}

/*
 * The hint hash of a chain, of its first two addresses and counts: the
 * slot in its low bits, the tag kept there in its high 32.
 */
static uint64_t hint_hash(const void *ips, size_t n, uint32_t nk)
{
	uint64_t a = 0, b = 0;

	if (n)
		memcpy(&a, ips, sizeof(a));
	if (n > 1)
		memcpy(&b, (const uint8_t *)ips + sizeof(b), sizeof(b));
	return plabel_hash2(a ^ ((uint64_t)n << 48) ^ nk, b);
}

static int chain_is(const struct plabel_chain *ch, const void *ips,
		    uint32_t nk, uint32_t nu)
{
	size_t n = (size_t)nk + nu;

	return ch->nk == nk && ch->nu == nu &&
	       (!n || !memcmp(ch->ips, ips, n * sizeof(uint64_t)));
}

int plabel_chain_get(struct plabel_chains *cs, const void *ips, uint32_t nk,
		     uint32_t nu, uint32_t *idx)
{
	size_t n = (size_t)nk + nu, i, pos = SIZE_MAX, k;
	uint64_t hh = hint_hash(ips, n, nk), tag = hh & ~0xffffffffULL, h;
	uint64_t *hint = NULL;
	struct plabel_chain *ch;

	if (!cs->hint)
		cs->hint = calloc(PLABEL_CHAIN_HINTS, sizeof(*cs->hint));
	/*
	 * (without the hints when they could not be had) Two ways, the one
	 * found last first; a chain found moves the other one second.
	 */
	if (cs->hint) {
		hint = &cs->hint[hh & (PLABEL_CHAIN_HINTS - 2)];
		for (k = 0; k < 2; k++) {
			i = (uint32_t)hint[k];
			if (i && (hint[k] & ~0xffffffffULL) == tag &&
			    chain_is(cs->by_idx[i - 1], ips, nk, nu)) {
				hint[1] = hint[k ^ 1];
				hint[0] = tag | i;
				*idx = i - 1;
				return 0;
			}
		}
	}
	h = chain_hash(ips, n, nk);
	while ((i = plabel_itab_next(&cs->tab, h, &pos)) != SIZE_MAX) {
		if (chain_is(cs->by_idx[i], ips, nk, nu)) {
			if (hint) {
				hint[1] = hint[0];
				hint[0] = tag | (i + 1);
			}
			*idx = i;
			return 0;
		}
	}
	if (cs->n >= UINT32_MAX - 1 ||
	    plabel_itab_reserve(&cs->tab, 1) ||
	    plabel_grow(&cs->by_idx, &cs->cap, cs->n, sizeof(*cs->by_idx)))
		return -ENOMEM;
	ch = chain_alloc(cs, n);
	if (!ch)
		return -ENOMEM;
	ch->hash = h;
	ch->nk = nk;
	ch->nu = nu;
	if (n)		/* ips may be NULL then */
		memcpy(ch->ips, ips, n * sizeof(uint64_t));
	*idx = cs->n;
	if (hint) {
		hint[1] = hint[0];
		hint[0] = tag | (cs->n + 1);
	}
	plabel_itab_put(&cs->tab, h, cs->n);
	cs->by_idx[cs->n++] = ch;
	return 0;
}

int plabel_chain_join(struct plabel_chains *cs, const void *kips, size_t nk,
		      const uint64_t *user, size_t nu, uint32_t *idx)
{
	if (plabel_grow_to(&cs->joinbuf, &cs->joinbuf_cap, nk + nu,
			   sizeof(*cs->joinbuf)))
		return -ENOMEM;
	memcpy(cs->joinbuf, kips, nk * sizeof(*cs->joinbuf));
	memcpy(cs->joinbuf + nk, user, nu * sizeof(*user));
	return plabel_chain_get(cs, cs->joinbuf, nk, nu, idx);
}

int plabel_chains_prefault(struct plabel_chains *cs)
{
	if (!cs->hint)
		cs->hint = calloc(PLABEL_CHAIN_HINTS, sizeof(*cs->hint));
	if (!cs->hint ||
	    plabel_grow_to(&cs->by_idx, &cs->cap, 64, sizeof(*cs->by_idx)) ||
	    plabel_itab_reserve(&cs->tab, 512) || !chain_alloc(cs, 0))
		return -ENOMEM;
	plabel_touch(cs->hint, PLABEL_CHAIN_HINTS * sizeof(*cs->hint));
	cs->blocks->used = 0;	/* it was only for the block */
	plabel_touch(cs->by_idx, cs->cap * sizeof(*cs->by_idx));
	plabel_touch(cs->tab.slot, plabel_itab_bytes(&cs->tab));
	plabel_touch(cs->blocks->data, PLABEL_PREFAULT_CHAINS);
	return 0;
}
