// SPDX-License-Identifier: GPL-2.0
/*
 * Remote unwinding of a stack snapshot with libunwind.
 *
 * libunwind asks us, through its accessors, for registers (the recorded
 * ones), memory (the stack copy, or the mapped ELF files' loaded images read
 * from disk), and the unwind info of an ip: we find the file mapped there,
 * its .eh_frame_hdr binary search table, and hand that to libunwind as a
 * remote table (UNW_INFO_FORMAT_REMOTE_TABLE) it reads through access_mem.
 */
#include <errno.h>
#include <libunwind.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "unwind.h"

/* Exported by libunwind but not declared in its headers. */
#define plabel_dwarf_search_unwind_table UNW_OBJ(dwarf_search_unwind_table)
extern int plabel_dwarf_search_unwind_table(unw_addr_space_t as,
					    unw_word_t ip,
					    unw_dyn_info_t *di,
					    unw_proc_info_t *pi,
					    int need_unwind_info, void *arg);

/* DWARF exception header pointer encodings we accept in .eh_frame_hdr. */
#define PLABEL_PE_OMIT		0xff
#define PLABEL_PE_UDATA4	0x03
#define PLABEL_PE_SDATA4	0x0b
#define PLABEL_PE_UDATA8	0x04
#define PLABEL_PE_SDATA8	0x0c
#define PLABEL_PE_DATAREL	0x30

/*
 * Reads libunwind may make for one sample, from the stack copy and the
 * files: a few hundred a frame for real unwind info (it reads CIEs and
 * FDEs a byte at a time). The budget bounds what a crafted file costs
 * per sample: unwind info that ran libunwind through a segment's
 * exabytes of zero fill (DW_CFA_nop) made 17 to 34 million reads, half
 * a second, for each sample of the process that mapped it.
 */
#define PLABEL_UW_MAX_READS	(1UL << 18)

/*
 * Unwindings remembered (see plabel_unwind): PLABEL_UW_MEMO entries, each
 * of an unwinding that read at most PLABEL_UW_MEMO_READS registers and
 * stack words and gave at most PLABEL_UW_MEMO_IPS frames. libunwind's
 * answer depends on nothing else, with one exception the memo keeps as it
 * was first met: its cache of register rules is keyed by ip alone, though
 * a caller's rule is looked up at the return address less one and a
 * leaf's at the ip itself; the two differ only after a call that ends its
 * function (a noreturn call), met both as a leaf and as a return address.
 */
#define PLABEL_UW_MEMO		1024
#define PLABEL_UW_MEMO_READS	32
#define PLABEL_UW_MEMO_IPS	32
#define PLABEL_UW_REG_READ	(1ULL << 63)	/* a read's addr: register */

/*
 * A read, for the memo: of the stack copy, at an offset into it (below
 * PLABEL_SNAP_MAX, whatever the stack pointer: a hostile one may have bit
 * 63 set), or of a register.
 */
struct plabel_uw_read {
	uint64_t addr;	/* offset into the copy, or PLABEL_UW_REG_READ | reg */
	uint64_t val;
};

struct plabel_uw_memo {
	uint64_t gen;	/* the maps' generation; 0: empty */
	uint64_t ip, sp, stack_size;
	uint32_t nreads, nips;
	struct plabel_uw_read reads[PLABEL_UW_MEMO_READS];
	uint64_t ips[PLABEL_UW_MEMO_IPS];
};

/* Maps remembered with their generations (see struct plabel_unwinder). */
#define PLABEL_UW_MSETS		4

/* What uw_add_objs compares a sample's maps by. */
struct plabel_uw_mkey {
	uint64_t start, end, offset;
	const struct plabel_elf *elf;
};

/* A loaded object of the process being unwound. */
struct plabel_uw_obj {
	struct plabel_elf *elf;
	uint64_t bias;
	uint64_t lo, hi;	/* runtime extent of its PT_LOADs */
};

struct plabel_unwinder {
	unw_addr_space_t as;
	struct plabel_uw_obj *objs;
	size_t nobjs, cap;
	/* the sample being unwound */
	const struct plabel_map *maps;
	size_t nmaps;
	const uint64_t *regs;
	uint64_t leaf_regs[PLABEL_REGS_NR];
	uint64_t stack_base;	/* address of stack[0] */
	const uint8_t *stack;
	size_t stack_size;
	unsigned long reads_left;	/* of PLABEL_UW_MAX_READS */
	/*
	 * The last PLABEL_UW_MSETS maps met (processes whose records
	 * alternate), each with its generation, which memo entries name;
	 * objs and libunwind's cache are for mset[cur], whose generation is
	 * gen (0: none yet).
	 */
	struct plabel_uw_mset {
		struct plabel_uw_mkey *keys;
		size_t n, cap;
		uint64_t gen;	/* 0: unused */
	} mset[PLABEL_UW_MSETS];
	size_t cur, next_victim;
	uint64_t gen, gens;
	/* the reads of the unwinding running, nlog > MEMO_READS: too many */
	struct plabel_uw_read log[PLABEL_UW_MEMO_READS];
	size_t nlog;
	struct plabel_uw_memo *memo;	/* PLABEL_UW_MEMO of them, or NULL */
	uint64_t memo_hits;
};

static void uw_log(struct plabel_unwinder *u, uint64_t addr, uint64_t val)
{
	if (u->nlog < PLABEL_UW_MEMO_READS)
		u->log[u->nlog] = (struct plabel_uw_read){ addr, val };
	if (u->nlog <= PLABEL_UW_MEMO_READS)
		u->nlog++;
}

static const struct plabel_uw_obj *uw_obj_at(struct plabel_unwinder *u,
					     uint64_t addr)
{
	size_t i;

	for (i = 0; i < u->nobjs; i++)
		if (addr >= u->objs[i].lo && addr < u->objs[i].hi)
			return &u->objs[i];
	return NULL;
}

static int uw_access_mem(unw_addr_space_t as, unw_word_t addr,
			 unw_word_t *valp, int write, void *arg)
{
	struct plabel_unwinder *u = arg;
	uint64_t sp = u->stack_base;
	const struct plabel_uw_obj *o;

	if (write)
		return -UNW_EREADONLYREG;
	if (!u->reads_left) {
		*valp = 0;
		return -UNW_EINVAL;
	}
	u->reads_left--;
	if (addr >= sp && addr - sp <= u->stack_size &&
	    u->stack_size - (addr - sp) >= sizeof(*valp)) {
		memcpy(valp, u->stack + (addr - sp), sizeof(*valp));
		uw_log(u, addr - sp, *valp);
		return 0;
	}
	o = uw_obj_at(u, addr);
	if (o && plabel_elf_read(o->elf, addr - o->bias, valp,
				 sizeof(*valp)) == 0)
		return 0;
	*valp = 0;
	return -UNW_EINVAL;
}

static int uw_access_reg(unw_addr_space_t as, unw_regnum_t reg,
			 unw_word_t *valp, int write, void *arg)
{
	struct plabel_unwinder *u = arg;

	if (write)
		return -UNW_EREADONLYREG;
	if (reg < 0 || reg >= PLABEL_REGS_NR)
		return -UNW_EBADREG;
	*valp = u->regs[reg];
	/*
	 * The ip and stack pointer are the memo's key (the leaf retry's are
	 * made of them and a logged read); any other register is the
	 * sample's own, in the retry too.
	 */
	if (reg != PLABEL_REG_RIP && reg != PLABEL_REG_RSP)
		uw_log(u, PLABEL_UW_REG_READ | (uint64_t)reg, *valp);
	return 0;
}

static int uw_access_fpreg(unw_addr_space_t as, unw_regnum_t reg,
			   unw_fpreg_t *val, int write, void *arg)
{
	return -UNW_EINVAL;
}

static int uw_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	return -UNW_EINVAL;
}

static int uw_get_proc_name(unw_addr_space_t as, unw_word_t addr,
			    char *buf, size_t len, unw_word_t *off,
			    void *arg)
{
	return -UNW_EINVAL;
}

static int uw_get_dyn_info_list_addr(unw_addr_space_t as,
				     unw_word_t *dil, void *arg)
{
	return -UNW_ENOINFO;
}

static void uw_put_unwind_info(unw_addr_space_t as,
			       unw_proc_info_t *pi, void *arg)
{
}

/* Read an encoded .eh_frame_hdr value at *p (in the file's image). */
static int uw_read_enc(struct plabel_elf *e, uint64_t *p,
		       uint8_t enc, uint64_t *val)
{
	uint32_t u4;
	uint64_t u8;

	switch (enc & 0x0f) {
	case PLABEL_PE_UDATA4:
	case PLABEL_PE_SDATA4:
		if (plabel_elf_read(e, *p, &u4, 4))
			return -EFAULT;
		*val = (enc & 0x0f) == PLABEL_PE_SDATA4 ?
			(uint64_t)(int64_t)(int32_t)u4 : u4;
		*p += 4;
		return 0;
	case PLABEL_PE_UDATA8:
	case PLABEL_PE_SDATA8:
		if (plabel_elf_read(e, *p, &u8, 8))
			return -EFAULT;
		*val = u8;
		*p += 8;
		return 0;
	}
	return -EINVAL;
}

static int uw_find_proc_info(unw_addr_space_t as, unw_word_t ip,
			     unw_proc_info_t *pi, int need_unwind_info,
			     void *arg)
{
	struct plabel_unwinder *u = arg;
	const struct plabel_map *m;
	const struct plabel_uw_obj *o;
	uint64_t hdr, hsize, p, tmp, nfde;
	uint8_t h[4];
	unw_dyn_info_t di;

	m = plabel_maps_find(u->maps, u->nmaps, ip);
	if (!m || !m->elf)
		return -UNW_ENOINFO;
	o = uw_obj_at(u, ip);
	if (!o || o->elf != m->elf ||
	    plabel_elf_eh_frame_hdr(m->elf, &hdr, &hsize) || hsize < 12)
		return -UNW_ENOINFO;
	if (plabel_elf_read(m->elf, hdr, h, sizeof(h)) || h[0] != 1)
		return -UNW_ENOINFO;
	/* table entries must be datarel sdata4 pairs for the search */
	if (h[3] != (PLABEL_PE_DATAREL | PLABEL_PE_SDATA4) ||
	    h[2] == PLABEL_PE_OMIT)
		return -UNW_ENOINFO;
	p = hdr + 4;
	if (h[1] != PLABEL_PE_OMIT &&
	    uw_read_enc(m->elf, &p, h[1], &tmp))
		return -UNW_ENOINFO;
	if (uw_read_enc(m->elf, &p, h[2], &nfde) || !nfde ||
	    nfde > hsize / 8)
		return -UNW_ENOINFO;

	memset(&di, 0, sizeof(di));
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.start_ip = m->start;
	di.end_ip = m->end;
	di.u.rti.segbase = hdr + o->bias;
	di.u.rti.table_data = p + o->bias;
	/* in unw_word_t units; each entry is two 4-byte values */
	di.u.rti.table_len = nfde * 8 / sizeof(unw_word_t);
	return plabel_dwarf_search_unwind_table(as, ip, &di, pi,
						need_unwind_info, arg);
}

static unw_accessors_t plabel_uw_accessors = {
	.find_proc_info = uw_find_proc_info,
	.put_unwind_info = uw_put_unwind_info,
	.get_dyn_info_list_addr = uw_get_dyn_info_list_addr,
	.access_mem = uw_access_mem,
	.access_reg = uw_access_reg,
	.access_fpreg = uw_access_fpreg,
	.resume = uw_resume,
	.get_proc_name = uw_get_proc_name,
};

struct plabel_unwinder *plabel_unwinder_new(void)
{
	struct plabel_unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->as = unw_create_addr_space(&plabel_uw_accessors, 0);
	if (!u->as) {
		free(u);
		return NULL;
	}
	/*
	 * libunwind caches what it learnt per ip; valid while the samples
	 * come from the same address space (flushed when the maps change).
	 */
	unw_set_caching_policy(u->as, UNW_CACHE_GLOBAL);
	return u;
}

void plabel_unwinder_free(struct plabel_unwinder *u)
{
	size_t i;

	if (!u)
		return;
	unw_destroy_addr_space(u->as);
	free(u->objs);
	for (i = 0; i < PLABEL_UW_MSETS; i++)
		free(u->mset[i].keys);
	free(u->memo);
	free(u);
}

static bool uw_mset_is(const struct plabel_uw_mset *ms,
		       const struct plabel_map *maps, size_t nmaps)
{
	size_t i;

	if (!ms->gen || ms->n != nmaps)
		return false;
	for (i = 0; i < nmaps; i++)
		if (maps[i].start != ms->keys[i].start ||
		    maps[i].end != ms->keys[i].end ||
		    maps[i].offset != ms->keys[i].offset ||
		    maps[i].elf != ms->keys[i].elf)
			return false;
	return true;
}

/*
 * The sample's maps: when they differ from the last sample's, the objects
 * found anew and libunwind's cache flushed; their generation, which names
 * the memo's entries for them, is the one they had when last met (of the
 * last PLABEL_UW_MSETS), else a new one.
 */
static int uw_add_objs(struct plabel_unwinder *u)
{
	struct plabel_uw_mset *ms;
	size_t i, j;

	if (u->gen && uw_mset_is(&u->mset[u->cur], u->maps, u->nmaps))
		return 0;
	u->gen = 0;	/* until the objects are all found */
	for (i = 0; i < PLABEL_UW_MSETS; i++)
		if (uw_mset_is(&u->mset[i], u->maps, u->nmaps))
			break;
	if (i == PLABEL_UW_MSETS) {
		i = u->next_victim;
		u->next_victim = (i + 1) % PLABEL_UW_MSETS;
		ms = &u->mset[i];
		ms->gen = 0;
		if (u->nmaps > ms->cap) {
			struct plabel_uw_mkey *nk = realloc(ms->keys,
							    u->nmaps *
							    sizeof(*nk));

			if (!nk)
				return -ENOMEM;
			ms->keys = nk;
			ms->cap = u->nmaps;
		}
		for (j = 0; j < u->nmaps; j++)
			ms->keys[j] = (struct plabel_uw_mkey){
				u->maps[j].start, u->maps[j].end,
				u->maps[j].offset, u->maps[j].elf };
		ms->n = u->nmaps;
		ms->gen = ++u->gens;
	}
	u->cur = i;
	unw_flush_cache(u->as, 0, 0);
	u->nobjs = 0;
	for (i = 0; i < u->nmaps; i++) {
		const struct plabel_map *m = &u->maps[i];
		struct plabel_uw_obj *o;
		uint64_t bias, lo, hi;

		if (!m->elf || plabel_elf_bias(m->elf, m->start, m->offset,
					       &bias))
			continue;
		for (j = 0; j < u->nobjs; j++)
			if (u->objs[j].elf == m->elf && u->objs[j].bias == bias)
				break;
		if (j < u->nobjs)
			continue;
		if (u->nobjs == u->cap) {
			size_t ncap = u->cap ? u->cap * 2 : 16;

			o = realloc(u->objs, ncap * sizeof(*o));
			if (!o) {
				u->nobjs = 0;
				return -ENOMEM;
			}
			u->objs = o;
			u->cap = ncap;
		}
		plabel_elf_extent(m->elf, &lo, &hi);
		o = &u->objs[u->nobjs++];
		o->elf = m->elf;
		o->bias = bias;
		o->lo = lo + bias;
		o->hi = hi + bias;
	}
	u->gen = u->mset[u->cur].gen;
	return 0;
}

/*
 * Restart the unwind one frame up from a leaf, taking the return address
 * from the top of the stack. 0 when the cursor now stands there.
 */
static int uw_leaf_retry(struct plabel_unwinder *u, unw_cursor_t *c)
{
	const uint64_t *orig = u->regs;
	unw_word_t ra;

	if (uw_access_mem(u->as, orig[PLABEL_REG_RSP], &ra, 0, u) ||
	    !plabel_maps_find(u->maps, u->nmaps, ra))
		return -ENOENT;
	memcpy(u->leaf_regs, orig, sizeof(u->leaf_regs));
	u->leaf_regs[PLABEL_REG_RIP] = ra;
	u->leaf_regs[PLABEL_REG_RSP] += 8;
	u->regs = u->leaf_regs;
	if (unw_init_remote(c, u->as, u)) {
		u->regs = orig;
		return -EINVAL;
	}
	/* the stack copy still starts at the original stack pointer */
	u->stack_base = orig[PLABEL_REG_RSP];
	return 0;
}

static struct plabel_uw_memo *uw_memo_slot(struct plabel_unwinder *u,
					    const uint64_t *regs,
					    size_t stack_size)
{
	uint64_t h = regs[PLABEL_REG_RIP] * 0x9e3779b97f4a7c15ULL;

	h ^= (regs[PLABEL_REG_RSP] + stack_size) * 0xc2b2ae3d27d4eb4fULL;
	h ^= u->gen * 0x165667b19e3779f9ULL;
	return &u->memo[(h >> 32) & (PLABEL_UW_MEMO - 1)];
}

/*
 * The remembered unwinding of this sample: one of the same maps, ip, stack
 * pointer and copy size whose every read of a register or a stack word
 * gives the same here. (Reads of the files depend on the maps only.)
 */
static const struct plabel_uw_memo *uw_memo_find(struct plabel_unwinder *u,
						 const uint64_t *regs,
						 const uint8_t *stack,
						 size_t stack_size)
{
	const struct plabel_uw_memo *m;
	uint64_t sp = regs[PLABEL_REG_RSP], v;
	uint32_t i;

	if (!u->memo)
		return NULL;
	m = uw_memo_slot(u, regs, stack_size);
	if (m->gen != u->gen || m->ip != regs[PLABEL_REG_RIP] || m->sp != sp ||
	    m->stack_size != stack_size)
		return NULL;
	for (i = 0; i < m->nreads; i++) {
		const struct plabel_uw_read *r = &m->reads[i];

		if (r->addr & PLABEL_UW_REG_READ)
			v = regs[r->addr & ~PLABEL_UW_REG_READ];
		else
			memcpy(&v, stack + r->addr, sizeof(v));
		if (v != r->val)
			return NULL;
	}
	return m;
}

/* Remember the unwinding just made, ips[0..n), when it is small enough. */
static void uw_memo_add(struct plabel_unwinder *u, const uint64_t *regs,
			size_t stack_size, const uint64_t *ips, size_t n)
{
	struct plabel_uw_memo *m;

	if (u->nlog > PLABEL_UW_MEMO_READS || n > PLABEL_UW_MEMO_IPS)
		return;
	if (!u->memo)
		u->memo = calloc(PLABEL_UW_MEMO, sizeof(*u->memo));
	if (!u->memo)
		return;
	m = uw_memo_slot(u, regs, stack_size);
	m->gen = u->gen;
	m->ip = regs[PLABEL_REG_RIP];
	m->sp = regs[PLABEL_REG_RSP];
	m->stack_size = stack_size;
	m->nreads = u->nlog;
	memcpy(m->reads, u->log, u->nlog * sizeof(*u->log));
	m->nips = n;
	memcpy(m->ips, ips, n * sizeof(*ips));
}

uint64_t plabel_unwinder_memo_hits(const struct plabel_unwinder *u)
{
	return u->memo_hits;
}

int plabel_unwind(struct plabel_unwinder *u, const struct plabel_map *maps,
		  size_t nmaps, const uint64_t *regs, const void *stack,
		  size_t stack_size, uint64_t *ips, size_t max)
{
	const struct plabel_uw_memo *memo;
	unw_word_t prev_sp;
	unw_cursor_t c;
	size_t n = 0;
	int ret;

	if (!max)
		return 0;
	u->maps = maps;
	u->nmaps = nmaps;
	u->regs = regs;
	u->stack_base = regs[PLABEL_REG_RSP];
	u->stack = stack;
	u->stack_size = stack_size;
	u->reads_left = PLABEL_UW_MAX_READS;
	ret = uw_add_objs(u);
	if (ret)
		return ret;
	memo = uw_memo_find(u, regs, stack, stack_size);
	if (memo) {
		n = memo->nips < max ? memo->nips : max;
		memcpy(ips, memo->ips, n * sizeof(*ips));
		u->memo_hits++;
		return n;
	}
	u->nlog = 0;
	ips[n++] = regs[PLABEL_REG_RIP];
	if (unw_init_remote(&c, u->as, u))
		goto done;
	prev_sp = regs[PLABEL_REG_RSP];
	while (n < max) {
		unw_word_t ip, sp;

		if (unw_step(&c) <= 0) {
			/*
			 * A leaf without unwind info (glibc's clone3 ends its
			 * CFI before the syscall): if nothing was pushed yet,
			 * the return address is at the stack pointer.
			 */
			if (n != 1 || uw_leaf_retry(u, &c))
				break;
			ips[n++] = u->leaf_regs[PLABEL_REG_RIP];
			prev_sp = u->leaf_regs[PLABEL_REG_RSP];
			continue;
		}
		if (unw_get_reg(&c, UNW_REG_IP, &ip) || !ip ||
		    unw_get_reg(&c, UNW_REG_SP, &sp))
			break;
		/*
		 * The stack grows down: a caller's frame is above. (Equal
		 * return addresses are fine: recursion.)
		 */
		if (sp < prev_sp)
			break;
		prev_sp = sp;
		ips[n++] = ip;
	}
done:
	/*
	 * An unwinding that ended of itself, not at max (what any max gets)
	 * nor at the read budget (libunwind's cache changes how many reads
	 * it takes).
	 */
	if (n < max && u->reads_left)
		uw_memo_add(u, regs, stack_size, ips, n);
	return n;
}
