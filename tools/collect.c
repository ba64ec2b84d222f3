// SPDX-License-Identifier: GPL-2.0
/*
 * Records -> profiles. See collect.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "collect.h"
#include "chain.h"
#include "join.h"
#include "lset.h"
#include "names.h"
#include "proc.h"
#include "resolve.h"
#include "spool.h"
#include "table.h"
#include "unwind.h"
#include "weigh.h"

/*
 * Frames of the heap profile viewers hide, with all they call: the
 * allocator's entry points (libplabel-heap.so's and the C library's) and
 * the system call that reports the sample.
 */
#define PLABEL_HEAP_DROP	\
	"(malloc|calloc|realloc|reallocarray|free|memalign|aligned_alloc|" \
	"posix_memalign|valloc|pvalloc|plabel_heap_.*|__libc_.*|ioctl|" \
	"__ioctl|__GI___ioctl)"

/* Settled samples are merged in batches of at least this many. */
#define PLABEL_FOLD_BATCH	16384

/*
 * Merging works out the key of the held sample this many ahead and asks
 * for its table slot, and for the merged sample of the one half as many
 * ahead, whose slot is in the cache by then: the lookup that comes to
 * them finds both there.
 */
#define PLABEL_FOLD_AHEAD	16
#define PLABEL_FOLD_RING	32	/* keys worked out and not used yet */

/* Held samples, by block of this many, have their oldest time noted. */
#define PLABEL_HELD_BLOCK	4096

/* CPUs whose records are followed for the watermark (see cpu_seen()) */
#define PLABEL_WM_MAX_CPUS	65536

/* Spool bytes touched ahead (prefault()): some thread creations' worth */
#define PLABEL_PREFAULT_SPOOL	(64U << 10)

/*
 * The samples merged once their time is settled (see
 * plabel_collect_settled()) are what resolution takes of them (struct
 * plabel_agg): a long recording then costs memory per distinct sample,
 * not per sample.
 */
struct plabel_collect {
	struct plabel_syms *syms;
	unsigned int flags;
	uint64_t period_ns;
	struct plabel_collect_stats st;
	struct plabel_dec_rec *rec;	/* the record being collected */
	struct plabel_dec_rec *joined;	/* an OFFCPU record from join */
	struct plabel_join join;	/* OFFCPU records and their ENDs */

	struct plabel_lsets lsets;

	struct plabel_procs procs;
	/*
	 * Processes sampled in the buffer being fed with no mappings known
	 * for the image the sample ran in: the kernel's mapping records
	 * usually follow in the same buffer, so /proc/PID/maps is read only
	 * for those still without any once it is fed.
	 */
	struct plabel_maps_want {
		uint32_t proc, gen;	/* index into procs; generation */
		uint64_t time_ns;	/* of the first such sample */
	} *want;
	size_t nwant, want_cap;

	/*
	 * The samples not merged yet, in arrival order: samples[head] to
	 * samples[nsamples - 1]. The merged ones before head leave their
	 * pages to the kernel (up to released) until the array is
	 * compacted. bmin[b] is at most the time of each sample held in
	 * block b (samples[b * PLABEL_HELD_BLOCK] on), so that merging
	 * reads only the blocks that can hold settled samples: records
	 * come nearly in time order, so the settled ones are few blocks at
	 * the front.
	 */
	struct plabel_csample *samples;
	size_t head, nsamples, samples_cap;
	size_t released;	/* slots whose whole pages were given back */
	uint64_t *bmin;
	size_t nbmin, bmin_cap;
	uint64_t settled;	/* every record stamped before it is in */
	size_t fold_at;		/* merge when this many are held */
	uint64_t seq;		/* samples held so far */
	/*
	 * The watermark (see plabel_collect_settled()): by CPU, 1 + the
	 * newest stamp of its SAMPLE and THREAD records (0: none yet), and
	 * how many CPUs have one; ncpus from the STREAM record.
	 */
	uint64_t *cpu_last;
	size_t cpu_cap;
	uint32_t cpus_seen, ncpus;
	uint8_t merging;	/* plabel_collect_settled() was called */
	uint8_t wm_off;		/* a CPU at or over PLABEL_WM_MAX_CPUS */
	/* the (pid, label set) pairs of held samples, named by index */
	struct plabel_src {
		uint32_t pid, reserved;
		uint64_t set_id;
	} *srcs;
	size_t nsrcs, srcs_cap;
	struct plabel_itab src_tab;
	size_t src_last;	/* 1 + index of the last one looked up, or 0 */

	struct plabel_agg *aggs;
	size_t naggs, aggs_cap;
	struct plabel_itab agg_tab;
	/* by chain: 1 + the index of the last merged sample's, or 0 */
	uint32_t *agg_hint;
	size_t hint_cap;

	struct plabel_weigher weigher;

	struct plabel_chains chains;

	struct plabel_names names;	/* of processes and threads */

	struct plabel_unwinder *unwinder;
	struct plabel_spool spool;
	uint64_t ipbuf[PLABEL_MAX_FRAMES];
	uint32_t skip_pid;	/* 0: none */
	struct plabel_timeline *tl;	/* NULL: no timeline */
	uint64_t start_ns;	/* of the STREAM record */

	/*
	 * Heap: every ALLOC (its sample as held samples are, and the
	 * block) and every FREE, kept until the end, when the frees are
	 * matched to the allocations by process, address and time.
	 */
	struct plabel_heap_ev {
		struct plabel_csample s;
		uint64_t addr, bytes, weight;
		uint64_t n;	/* allocations it stands for */
		uint32_t pid;
		uint32_t live;	/* set when matching */
		uint32_t freed;	/* all n freed already (no address) */
	} *heap;
	size_t nheap, heap_cap;
	struct plabel_free_ev {
		uint64_t addr, time_ns;
		uint32_t pid, reserved;
	} *frees;
	size_t nfrees, frees_cap;
	uint64_t heap_rate;
	uint64_t heap_unmatched;	/* plabel_collect_heap_counts()' */
	uint64_t heap_implied;

	/*
	 * Thread contexts other programs publish: a record carrying one
	 * stands for its kernel set plus the context's labels, a set of its
	 * own (struct plabel_cset, with an id of PLABEL_CSET_BIT on), made
	 * a label set at the end, when the kernel's sets are all in. Key
	 * maps come from tctx, by process.
	 */
	struct plabel_tctx *tctx;	/* NULL: OTel attributes unnamed */
	struct plabel_cset {
		uint64_t base;		/* the kernel's set */
		char *kv;		/* key, NUL, value, NUL, ... sorted */
		size_t len;
		uint32_t n;
	} *csets;
	size_t ncsets, csets_cap;
	struct plabel_itab cset_tab;
	struct plabel_tctx_label *tbuf;	/* PLABEL_CTX_LABELS of them */
	struct plabel_ckm {
		uint32_t pid;	/* first: plabel_itab_u32() */
		uint32_t since;	/* contexts decoded since the map was read */
		int have;
		struct plabel_otel_keymap km;
	} *ckms;
	size_t nckms, ckms_cap;
	struct plabel_itab ckm_tab;
	struct plabel_tctx_stats tst;
};

/* Ids of the sets with a context's labels: never the kernel's */
#define PLABEL_CSET_BIT		(1ULL << 63)
#define PLABEL_CTX_LABELS	(PLABEL_OTEL_MAX_KEYS + 2)
/* Contexts of a process between two readings of its key map, at least */
#define PLABEL_CKM_AGAIN	1024
/* ... and between two asks while tctx has none */
#define PLABEL_CKM_RETRY	64

void plabel_collect_free(struct plabel_collect *c)
{
	size_t i;

	if (!c)
		return;
	plabel_lsets_release(&c->lsets);
	plabel_procs_release(&c->procs);
	free(c->want);
	free(c->samples);
	free(c->bmin);
	free(c->cpu_last);
	free(c->srcs);
	plabel_itab_free(&c->src_tab);
	free(c->aggs);
	plabel_itab_free(&c->agg_tab);
	free(c->agg_hint);
	plabel_weigher_release(&c->weigher);
	free(c->heap);
	free(c->frees);
	plabel_chains_release(&c->chains);
	plabel_names_release(&c->names);
	plabel_unwinder_free(c->unwinder);
	plabel_spool_release(&c->spool);
	plabel_join_release(&c->join);
	free(c->joined);
	free(c->rec);
	for (i = 0; i < c->ncsets; i++)
		free(c->csets[i].kv);
	free(c->csets);
	plabel_itab_free(&c->cset_tab);
	free(c->tbuf);
	for (i = 0; i < c->nckms; i++)
		plabel_otel_keymap_release(&c->ckms[i].km);
	free(c->ckms);
	plabel_itab_free(&c->ckm_tab);
	free(c);
}

void plabel_collect_set_tctx(struct plabel_collect *c, struct plabel_tctx *t)
{
	c->tctx = t;
}

void plabel_collect_set_period(struct plabel_collect *c, uint64_t period_ns)
{
	if (period_ns)
		c->period_ns = period_ns;
}

void plabel_collect_set_heap_rate(struct plabel_collect *c, uint64_t bytes)
{
	c->heap_rate = bytes;
}

void plabel_collect_heap_counts(struct plabel_collect *c, uint64_t frees,
				uint64_t unmatched, uint64_t implied,
				uint64_t lost, uint64_t dropped)
{
	c->st.frees += frees;
	c->heap_unmatched += unmatched;
	c->heap_implied += implied;
	c->st.lost_frees += lost;
	c->st.allocs_dropped += dropped;
}

void plabel_collect_skip_before_exec(struct plabel_collect *c, uint32_t pid)
{
	c->skip_pid = pid;
}

void plabel_collect_set_timeline(struct plabel_collect *c,
				 struct plabel_timeline *tl)
{
	c->tl = tl;
}

/* Whether the names of processes and threads are followed. */
static int names_kept(const struct plabel_collect *c)
{
	return (c->flags & PLABEL_COLLECT_NAME_LABELS) || c->tl;
}

void plabel_collect_stats(const struct plabel_collect *c,
			  struct plabel_collect_stats *st)
{
	*st = c->st;
	st->labelsets = plabel_lsets_count(&c->lsets);
	st->held = c->nsamples - c->head;
	st->merged = c->naggs;
}

/*
 * PLABEL_COLLECT_PROC_MAPS: p's mappings at t from /proc, counted in the
 * stats when the process was still there. 0 or -ENOMEM.
 */
static int read_maps(struct plabel_collect *c, struct plabel_proc *p,
		     uint64_t t)
{
	int ret;

	p->tried_gen = plabel_proc_gen(p, t) + 1;
	if (!(c->flags & PLABEL_COLLECT_PROC_MAPS))
		return 0;
	ret = plabel_proc_read_maps(c->syms, p, t);
	if (ret > 0)
		c->st.proc_maps++;
	return ret < 0 ? ret : 0;
}

/*
 * PLABEL_COLLECT_PREFAULT: the tables the first records fill, allocated
 * and their first pages touched when the collector is made. plabel
 * record makes it before the profiled program starts, which would
 * otherwise pay for those page faults while the reader takes turns with
 * it (0.9 ms of a 1.5 s run under instruction counting). They grow as
 * they did. 0 or -ENOMEM.
 */
static int prefault(struct plabel_collect *c)
{
	if (plabel_procs_prefault(&c->procs) ||
	    plabel_grow_to(&c->samples, &c->samples_cap, 64,
			   sizeof(*c->samples)) ||
	    plabel_spool_reserve(&c->spool, PLABEL_PREFAULT_SPOOL) ||
	    plabel_chains_prefault(&c->chains))
		return -ENOMEM;
	plabel_touch(c->samples, c->samples_cap * sizeof(*c->samples));
	plabel_touch(c->spool.wbuf, PLABEL_PREFAULT_SPOOL);
	return 0;
}

struct plabel_collect *plabel_collect_new(struct plabel_syms *syms,
					  unsigned int flags)
{
	struct plabel_collect *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	/* once, not for every buffer collected */
	c->rec = malloc(sizeof(*c->rec));
	if (!c->rec) {
		free(c);
		return NULL;
	}
	c->syms = syms;
	c->flags = flags;
	c->period_ns = 10000000;
	c->heap_rate = PLABEL_HEAP_BYTES_DEFAULT;
	plabel_spool_init(&c->spool);
	c->fold_at = PLABEL_FOLD_BATCH;
	if ((flags & PLABEL_COLLECT_PREFAULT) && prefault(c)) {
		plabel_collect_free(c);
		return NULL;
	}
	return c;
}

/* sample_chain's unwind: now, unless the mappings may not be all known */
#define PLABEL_UNWIND_OR_DEFER	2

/*
 * The unwinding of a snapshot, ips[0..n) (of at most max), made whole with
 * the frame-pointer chain the record carries, fp[0..nfp): the kernel
 * copies an fp-mode OFFCPU record's stack only up to the first frame
 * record's return address, so the unwinding brings the frames between the
 * stack pointer and that frame (the C library's system call wrappers keep
 * no frame pointers) and stops just past it. It meets the chain at fp[1],
 * that frame's return address: spliced, the unwinding up to it, then the
 * chain after it. The new length, or n when they do not meet.
 */
static size_t splice_fp_chain(uint64_t *ips, size_t n, size_t max,
			      const void *fp, size_t nfp)
{
	uint64_t f[2];
	size_t k, more;

	if (nfp < 3 || !n)
		return n;
	memcpy(f, fp, sizeof(f));
	if (ips[0] != f[0])
		return n;
	for (k = 1; k < n && ips[k] != f[1]; k++)
		;
	if (k >= n || k + 1 >= max)
		return n;
	more = nfp - 2;
	if (more > max - (k + 1))
		more = max - (k + 1);
	memcpy(ips + k + 1, (const uint8_t *)fp + 2 * sizeof(*ips),
	       more * sizeof(*ips));
	return k + 1 + more;
}

/*
 * The chain of sample r of p, stored; in dwarf mode with the snapshot
 * unwound now if unwind is set. 0 or -ENOMEM; with unwind
 * PLABEL_UNWIND_OR_DEFER, 1 and nothing stored when the unwinding ends
 * at an address outside p's mappings (known so far).
 */
static int sample_chain(struct plabel_collect *c, struct plabel_proc *p,
			const struct plabel_dec_rec *r, int unwind,
			uint32_t *chain)
{
	const struct plabel_rec_sample *h = &r->u.sample.hdr;
	size_t nk = h->nr_kernel, nu = h->nr_user;
	const uint64_t *user = NULL;
	int nunw;

	/* user regs: where it was interrupted, or entered the kernel */
	if (r->u.sample.has_regs && unwind) {
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
		if (unwind == PLABEL_UNWIND_OR_DEFER && nunw > 0 &&
		    !plabel_maps_find(p->view, p->nview, c->ipbuf[nunw - 1]))
			return 1;
		if (nunw > 0 && (size_t)nunw < nu)
			nunw = splice_fp_chain(c->ipbuf, nunw,
					       PLABEL_MAX_FRAMES,
					       r->u.sample.ips + 8 * nk, nu);
		/* the snapshot's unwinding, unless the kernel's chain is longer */
		if (nunw > 0 && (size_t)nunw >= nu) {
			user = c->ipbuf;
			nu = nunw;
		}
	}
	/* the kernel's chain as it is in the record */
	if (!user)
		return plabel_chain_get(&c->chains, r->u.sample.ips, nk, nu,
					chain);
	return plabel_chain_join(&c->chains, r->u.sample.ips, nk, user, nu,
				 chain);
}

/*
 * Names for a sample's process and thread, read from /proc when first
 * seen; a THREAD record names the new thread (and process) after its
 * creator. 0 or -ENOMEM.
 */
static int note_names(struct plabel_collect *c, struct plabel_proc *p,
		      const struct plabel_dec_rec *r)
{
	const struct plabel_rec_sample *h = &r->u.sample.hdr;
	struct plabel_proc *cp;
	uint32_t pname;
	int ret;

	if (!names_kept(c))
		return 0;
	if (!p->name0_tried && !p->nexec && h->pid != c->skip_pid) {
		p->name0_tried = 1;
		p->name0 = plabel_names_proc_now(&c->names, h->pid);
	}
	ret = plabel_names_thread_seen(&c->names, h->pid, h->tid);
	if (ret || r->type != PLABEL_REC_THREAD || !h->child_tid)
		return ret;
	ret = plabel_names_thread_new(&c->names, h->tid, h->time_ns,
				      h->child_tid);
	if (ret || !(h->flags & PLABEL_THREAD_PROCESS) || !h->child_pid ||
	    h->child_pid == h->pid)
		return ret;
	pname = plabel_proc_name_at(p, h->time_ns);
	cp = plabel_procs_get(&c->procs, h->child_pid);
	if (!cp)
		return -ENOMEM;
	if (!cp->name0_tried) {
		cp->name0 = pname;
		cp->name0_tried = 1;
	}
	return 0;
}

/* ---- the held samples ---- */

/* The first held sample (NULL before any). */
static struct plabel_csample *held(const struct plabel_collect *c)
{
	return c->samples ? c->samples + c->head : NULL;
}

/* Give the kernel the whole pages of slots [from, to) of sm. */
static void held_release(struct plabel_csample *sm, size_t from, size_t to)
{
	uintptr_t a = (uintptr_t)(sm + from);
	uintptr_t b = (uintptr_t)(sm + to);
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);

	a = (a + pg - 1) & ~(pg - 1);
	b &= ~(pg - 1);
	if (b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

/*
 * bmin of the blocks of slots [from, to) anew, from the samples held
 * there; to is a block's start or the end of the held ones.
 */
static void held_note_blocks(struct plabel_collect *c, size_t from,
			     size_t to)
{
	size_t b, i;

	for (b = from / PLABEL_HELD_BLOCK;
	     b < c->nbmin && b * PLABEL_HELD_BLOCK < to; b++)
		c->bmin[b] = UINT64_MAX;
	for (i = from > c->head ? from : c->head; i < to; i++) {
		b = i / PLABEL_HELD_BLOCK;
		if (c->samples[i].time_ns < c->bmin[b])
			c->bmin[b] = c->samples[i].time_ns;
	}
}

/*
 * Room for one more held sample and its block: when the merged slots at
 * the front are half the array, the held ones are copied to the front of
 * a new one (block by block, each page of the old one given back once
 * copied, so that memory does not hold both), else the array grows: its
 * pages are only touched as samples come. 0 or -ENOMEM.
 */
static int held_room(struct plabel_collect *c)
{
	size_t n = c->nsamples - c->head, b, i, k;
	struct plabel_csample *sm;

	if (c->nsamples == c->samples_cap && c->head &&
	    c->head >= c->samples_cap / 2) {
		sm = malloc(c->samples_cap * sizeof(*sm));
		if (!sm)
			return -ENOMEM;
		for (i = 0; i < n; i += k) {
			k = n - i < PLABEL_HELD_BLOCK ? n - i :
			    PLABEL_HELD_BLOCK;
			memcpy(sm + i, c->samples + c->head + i,
			       k * sizeof(*sm));
			held_release(c->samples, c->head + i,
				     c->head + i + k);
		}
		free(c->samples);
		c->samples = sm;
		c->head = 0;
		c->released = 0;
		c->nsamples = n;
		c->nbmin = (n + PLABEL_HELD_BLOCK - 1) / PLABEL_HELD_BLOCK;
		held_note_blocks(c, 0, n);
	}
	if (plabel_grow(&c->samples, &c->samples_cap, c->nsamples,
			sizeof(*c->samples)))
		return -ENOMEM;
	b = c->nsamples / PLABEL_HELD_BLOCK;
	if (b < c->nbmin)
		return 0;
	if (plabel_grow(&c->bmin, &c->bmin_cap, c->nbmin, sizeof(*c->bmin)))
		return -ENOMEM;
	c->bmin[c->nbmin++] = UINT64_MAX;
	return 0;
}

/*
 * The end of the held samples that merging reads: every one after it is
 * stamped at or after c->settled (the blocks after it say so).
 */
static size_t held_settled_end(const struct plabel_collect *c)
{
	size_t b = c->nbmin, end = c->nsamples;

	while (b > c->head / PLABEL_HELD_BLOCK && c->bmin[b - 1] >= c->settled)
		end = --b * PLABEL_HELD_BLOCK;
	if (end > c->nsamples)
		end = c->nsamples;
	return end > c->head ? end : c->head;
}

/* The index of the pair (pid, set_id), added if new. 0 or -ENOMEM. */
static int src_get(struct plabel_collect *c, uint32_t pid, uint64_t set_id,
		   uint32_t *idx)
{
	const struct plabel_src *l = c->src_last ?
				     &c->srcs[c->src_last - 1] : NULL;
	uint64_t h;
	size_t i, pos = SIZE_MAX;

	if (l && l->pid == pid && l->set_id == set_id) {
		*idx = c->src_last - 1;
		return 0;
	}
	h = plabel_hash2(pid, set_id);
	while ((i = plabel_itab_next(&c->src_tab, h, &pos)) != SIZE_MAX)
		if (c->srcs[i].pid == pid && c->srcs[i].set_id == set_id)
			goto found;
	if (c->nsrcs >= UINT32_MAX - 1 ||
	    plabel_itab_reserve(&c->src_tab, 1) ||
	    plabel_grow(&c->srcs, &c->srcs_cap, c->nsrcs, sizeof(*c->srcs)))
		return -ENOMEM;
	i = c->nsrcs++;
	c->srcs[i].pid = pid;
	c->srcs[i].reserved = 0;
	c->srcs[i].set_id = set_id;
	plabel_itab_put(&c->src_tab, h, i);
found:
	c->src_last = i + 1;
	*idx = (uint32_t)i;
	return 0;
}

/*
 * A record of cpu stamped time_ns, or a SYNC record saying that all of
 * cpu's records stamped before time_ns are in. The records of one CPU
 * come in the order of their stamps (Documentation/record-format.rst:
 * each is stamped with interrupts off where it is written to its CPU's
 * ring; MMAP records aside, which merging does not read), so once every
 * CPU's records have passed a time, every record stamped before it is in.
 * 0 or -ENOMEM.
 */
static int cpu_seen(struct plabel_collect *c, uint32_t cpu, uint64_t time_ns)
{
	size_t old = c->cpu_cap;
	uint64_t t = time_ns == UINT64_MAX ? time_ns : time_ns + 1;

	if (cpu >= PLABEL_WM_MAX_CPUS) {
		c->wm_off = 1;
		return 0;
	}
	if (cpu >= c->cpu_cap) {
		if (plabel_grow_to(&c->cpu_last, &c->cpu_cap, (size_t)cpu + 1,
				   sizeof(*c->cpu_last)))
			return -ENOMEM;
		memset(c->cpu_last + old, 0,
		       (c->cpu_cap - old) * sizeof(*c->cpu_last));
	}
	if (!c->cpu_last[cpu])
		c->cpus_seen++;
	if (t > c->cpu_last[cpu])
		c->cpu_last[cpu] = t;
	return 0;
}

/*
 * The time before which every CPU's records are in, 0 when not known: not
 * every CPU the STREAM record counts has sent one yet. A CPU that sends
 * no records (idle, or not running what is recorded) still sends SYNC
 * records, which the kernel writes for CPUs whose rings a read emptied; a
 * stream without them (an older module) leaves such a CPU holding the
 * watermark back, and the caller's settled time does the merging.
 */
static uint64_t watermark(const struct plabel_collect *c)
{
	uint64_t w = UINT64_MAX;
	size_t i;

	if (!c->ncpus || c->cpus_seen < c->ncpus || c->wm_off)
		return 0;
	for (i = 0; i < c->cpu_cap; i++)
		if (c->cpu_last[i] && c->cpu_last[i] - 1 < w)
			w = c->cpu_last[i] - 1;
	return w == UINT64_MAX ? 0 : w;
}

/* ---- thread contexts (tlsctx.h) ---- */

/* pid's key map as tctx has it, read again after unknown keys. */
static const struct plabel_otel_keymap *ctx_keymap(struct plabel_collect *c,
						   uint32_t pid)
{
	struct plabel_ckm *k;
	size_t i;

	if (!c->tctx)
		return NULL;
	i = plabel_itab_u32(&c->ckm_tab, &c->ckms, &c->nckms, &c->ckms_cap,
			    sizeof(*c->ckms), pid, NULL);
	if (i == SIZE_MAX)
		return NULL;
	k = &c->ckms[i];
	/* none yet (not read by then): asked again now and then */
	if (!k->since || (!k->have && k->since % PLABEL_CKM_RETRY == 0))
		k->have = !plabel_tctx_keymap(c->tctx, pid, &k->km);
	k->since++;
	return k->have ? &k->km : NULL;
}

/* pid exec'ed: its key map is another program's from now on. */
static void ctx_keymap_forget(struct plabel_collect *c, uint32_t pid)
{
	size_t pos = SIZE_MAX, i;

	while ((i = plabel_itab_next(&c->ckm_tab, plabel_hash2(pid, 0),
				     &pos)) != SIZE_MAX) {
		if (c->ckms[i].pid != pid)
			continue;
		plabel_otel_keymap_release(&c->ckms[i].km);
		c->ckms[i].have = 0;
		c->ckms[i].since = 0;
		return;
	}
}

static int ctx_label_cmp(const void *pa, const void *pb)
{
	const struct plabel_tctx_label *a = pa, *b = pb;

	return strcmp(a->key, b->key);
}

/*
 * The set record r stands for: its kernel set, or with a thread context
 * the set of that and the context's labels. 0 or -ENOMEM.
 */
static int ctx_set(struct plabel_collect *c, const struct plabel_dec_rec *r,
		   uint64_t *id)
{
	const struct plabel_rec_sample *h = &r->u.sample.hdr;
	const struct plabel_rec_tlsctx *t = &r->u.sample.tlsctx;
	uint64_t unknown = c->tst.unknown_keys, hash;
	const struct plabel_otel_keymap *km;
	size_t n, i, len = 0, pos = SIZE_MAX;
	struct plabel_cset *cs;
	char *kv, *p;

	*id = h->set_id;
	if (!r->u.sample.tlsctx_data)
		return 0;
	if (!c->tbuf) {
		c->tbuf = malloc(PLABEL_CTX_LABELS * sizeof(*c->tbuf));
		if (!c->tbuf)
			return -ENOMEM;
	}
	km = t->format == PLABEL_TLSCTX_OTEL_V1 ? ctx_keymap(c, h->pid) : NULL;
	n = plabel_tctx_labels(t->format, t->flags, r->u.sample.tlsctx_data,
			       t->len, km, c->tbuf, PLABEL_CTX_LABELS, &c->tst);
	c->st.contexts = c->tst.contexts;
	c->st.ctx_unknown = c->tst.unknown_keys;
	c->st.ctx_bad = c->tst.bad_labels;
	c->st.ctx_partial = c->tst.partial;
	if (km && c->tst.unknown_keys != unknown) {
		/* the map may have grown since: read it again, now and then */
		struct plabel_ckm *k = &c->ckms[plabel_itab_u32(&c->ckm_tab,
				&c->ckms, &c->nckms, &c->ckms_cap,
				sizeof(*c->ckms), h->pid, NULL)];

		if (k->since >= PLABEL_CKM_AGAIN)
			k->since = 0;
	}
	if (!n)
		return 0;
	qsort(c->tbuf, n, sizeof(*c->tbuf), ctx_label_cmp);
	for (i = 0; i < n; i++)
		len += strlen(c->tbuf[i].key) + strlen(c->tbuf[i].value) + 2;
	kv = malloc(len);
	if (!kv)
		return -ENOMEM;
	for (p = kv, i = 0; i < n; i++) {
		p = stpcpy(p, c->tbuf[i].key) + 1;
		p = stpcpy(p, c->tbuf[i].value) + 1;
	}
	hash = PLABEL_FNV_INIT ^ h->set_id;
	for (i = 0; i < len; i++)
		hash = (hash ^ (unsigned char)kv[i]) * PLABEL_FNV_PRIME;
	while ((i = plabel_itab_next(&c->cset_tab, hash, &pos)) != SIZE_MAX) {
		cs = &c->csets[i];
		if (cs->base == h->set_id && cs->len == len &&
		    !memcmp(cs->kv, kv, len)) {
			free(kv);
			*id = PLABEL_CSET_BIT | i;
			return 0;
		}
	}
	if (plabel_itab_reserve(&c->cset_tab, 1) ||
	    plabel_grow(&c->csets, &c->csets_cap, c->ncsets,
			sizeof(*c->csets))) {
		free(kv);
		return -ENOMEM;
	}
	i = c->ncsets++;
	c->csets[i] = (struct plabel_cset) {
		.base = h->set_id, .kv = kv, .len = len, .n = (uint32_t)n,
	};
	plabel_itab_put(&c->cset_tab, hash, i);
	*id = PLABEL_CSET_BIT | i;
	return 0;
}

/*
 * The context sets made label sets: the kernel set's labels, then those
 * of the context whose keys it lacks. 0 or -ENOMEM.
 */
static int ctx_sets_add(struct plabel_collect *c)
{
	struct plabel_dec_label *l = NULL;
	size_t i, cap = 0;
	int ret = 0;

	if (!c->ncsets)
		return 0;
	plabel_lsets_sort(&c->lsets);
	for (i = 0; i < c->ncsets && !ret; i++) {
		const struct plabel_cset *cs = &c->csets[i];
		const struct plabel_lset *base = NULL;
		uint32_t n = 0, nb = 0, j, k;
		const char *p = cs->kv;

		if (plabel_lsets_find(&c->lsets, PLABEL_CSET_BIT | i))
			continue;	/* made before (a second finish) */
		if (cs->base)
			base = plabel_lsets_find(&c->lsets, cs->base);
		if (base)
			nb = base->count;
		if (plabel_grow_to(&l, &cap, nb + cs->n, sizeof(*l))) {
			ret = -ENOMEM;
			break;
		}
		for (j = 0; j < nb; j++) {
			l[n].key.ptr = base->labels[j].key;
			l[n].key.len = (uint32_t)strlen(base->labels[j].key);
			l[n].value.ptr = base->labels[j].value;
			l[n++].value.len =
				(uint32_t)strlen(base->labels[j].value);
		}
		for (j = 0; j < cs->n; j++) {
			const char *key = p, *val = p + strlen(p) + 1;

			p = val + strlen(val) + 1;
			for (k = 0; k < nb; k++)
				if (!strcmp(base->labels[k].key, key))
					break;
			if (k < nb)
				continue;	/* the program's own set wins */
			l[n].key.ptr = key;
			l[n].key.len = (uint32_t)strlen(key);
			l[n].value.ptr = val;
			l[n++].value.len = (uint32_t)strlen(val);
		}
		/* (adding may move the sets: base is not read after) */
		ret = plabel_lsets_add(&c->lsets, PLABEL_CSET_BIT | i, l, n);
	}
	free(l);
	return ret;
}

/* Held sample s, of record r, in the timeline too. 0 or -ENOMEM. */
static int timeline_note(struct plabel_collect *c,
			 const struct plabel_dec_rec *r,
			 const struct plabel_csample *s, uint64_t nanos,
			 uint64_t set_id)
{
	const struct plabel_rec_sample *h = &r->u.sample.hdr;
	struct plabel_tl_obs o = {
		.time_ns = h->time_ns,
		.set_id = set_id,
		.seq = s->seq,
		.pid = h->pid,
		.tid = h->tid,
		.chain = s->chain,
	};

	switch (r->type) {
	case PLABEL_REC_OFFCPU:
		o.kind = PLABEL_TL_OFFCPU;
		o.end_ns = h->time_ns + nanos;
		o.wait = h->wait_kind;
		break;
	case PLABEL_REC_THREAD:
		o.kind = PLABEL_TL_THREAD;
		o.child_pid = h->child_pid;
		o.child_tid = h->child_tid;
		break;
	case PLABEL_REC_SAMPLE:
		o.kind = PLABEL_TL_SAMPLE;
		break;
	default:	/* a thread's state now (plabel threads): no event */
		return 0;
	}
	return plabel_tl_add(c->tl, &o);
}

/* A SAMPLE, THREAD or OFFCPU record (with its wait's nanos) held. */
static int add_sample(struct plabel_collect *c,
		      const struct plabel_dec_rec *r, uint64_t nanos)
{
	const struct plabel_rec_sample *h = &r->u.sample.hdr;
	struct plabel_csample *s;
	struct plabel_proc *p;
	uint32_t gen, chain, src;
	uint64_t set_id;
	int defer = 0, ret;

	ret = cpu_seen(c, h->cpu, h->time_ns);
	if (ret)
		return ret;
	/* as the profile counts them: a late sample for each period */
	if (r->type == PLABEL_REC_SAMPLE)
		c->st.samples += PLABEL_SAMPLE_PERIODS(h->flags);
	else if (r->type == PLABEL_REC_OFFCPU)
		c->st.waits++;
	else if (r->type == PLABEL_REC_THREADSTATE)
		c->st.states++;
	else
		c->st.threads++;
	p = plabel_procs_get(&c->procs, h->pid);
	if (!p)
		return -ENOMEM;
	ret = note_names(c, p, r);
	if (ret)
		return ret;
	/* a THREAD record's child may have been added: p moved */
	if (r->type == PLABEL_REC_THREAD) {
		p = plabel_procs_get(&c->procs, h->pid);
		if (!p)
			return -ENOMEM;
	}
	gen = plabel_proc_gen(p, h->time_ns);
	if (plabel_proc_view(p, gen))
		return -ENOMEM;
	/*
	 * A snapshot is spooled, to be unwound at the end against every
	 * mapping recorded by then, but an OFFCPU record's when its
	 * process's mappings are known: a thread waits where it waited
	 * before, and the unwinder's memo answers that at once (see
	 * plabel_unwind), with nothing spooled or held for the end. An
	 * unwinding that ends outside those mappings (a library mapped
	 * since, whose record may come later) is spooled after all.
	 */
	if (r->u.sample.has_regs && !plabel_spool_broken(&c->spool))
		defer = r->type == PLABEL_REC_OFFCPU && p->nview ?
			PLABEL_UNWIND_OR_DEFER : 1;
	/*
	 * No mappings known for the image this sample ran in (yet): read
	 * them from /proc while the process is there, once per exec
	 * generation; after this buffer (see struct plabel_maps_want) unless
	 * the snapshot is unwound now.
	 */
	/* (not for skip_pid before its exec: /proc soon shows what it runs) */
	if (!p->nview && p->tried_gen != gen + 1 &&
	    (gen || h->pid != c->skip_pid)) {
		if (r->u.sample.has_regs && !defer) {
			if (read_maps(c, p, h->time_ns) ||
			    plabel_proc_view(p, gen))
				return -ENOMEM;
		} else {
			if (plabel_grow(&c->want, &c->want_cap, c->nwant,
					sizeof(*c->want)))
				return -ENOMEM;
			c->want[c->nwant].proc =
				plabel_procs_index(&c->procs, p);
			c->want[c->nwant].gen = gen;
			c->want[c->nwant++].time_ns = h->time_ns;
			p->tried_gen = gen + 1;
		}
	}
	if (defer == PLABEL_UNWIND_OR_DEFER) {
		ret = sample_chain(c, p, r, PLABEL_UNWIND_OR_DEFER, &chain);
		defer = ret == 1;
		if (defer)
			ret = sample_chain(c, p, r, 0, &chain);
	} else {
		ret = sample_chain(c, p, r, !defer, &chain);
	}
	if (ret)
		return ret;
	ret = ctx_set(c, r, &set_id);
	if (ret)
		return ret;
	if (src_get(c, h->pid, set_id, &src) || held_room(c))
		return -ENOMEM;
	/* last, as the sample is then certainly kept: spool and samples agree */
	if (defer && plabel_spool_add(&c->spool, r->u.sample.regs,
				      r->u.sample.stack,
				      r->u.sample.hdr.stack_size)) {
		defer = 0;
		ret = sample_chain(c, p, r, 1, &chain);
		if (ret)
			return ret;
	}
	if (h->time_ns < c->bmin[c->nsamples / PLABEL_HELD_BLOCK])
		c->bmin[c->nsamples / PLABEL_HELD_BLOCK] = h->time_ns;
	s = &c->samples[c->nsamples++];
	s->flags = (r->type == PLABEL_REC_THREAD ? PLABEL_CS_THREAD : 0) |
		   (defer ? PLABEL_CS_PENDING : 0);
	s->tid = h->tid;
	s->chain = chain;
	s->src = src;
	s->time_ns = h->time_ns;
	s->seq = c->seq++;
	s->periods_m1 = r->type == PLABEL_REC_SAMPLE ?
			PLABEL_SAMPLE_PERIODS(h->flags) - 1 : 0;
	if (r->type == PLABEL_REC_OFFCPU) {
		s->flags |= PLABEL_CS_OFFCPU |
			    (h->wait_kind << PLABEL_CS_WAIT_SHIFT &
			     PLABEL_CS_WAIT_MASK);
		s->weight = PLABEL_W_DONE;
		s->value = nanos;
	} else if (r->type == PLABEL_REC_THREADSTATE) {
		/* a wait kind only for a thread that waits */
		s->flags |= PLABEL_CS_STATE;
		if (h->wait_state == PLABEL_THREAD_SLEEPING ||
		    h->wait_state == PLABEL_THREAD_DISK)
			s->flags |= PLABEL_CS_OFFCPU |
				    (h->wait_kind << PLABEL_CS_WAIT_SHIFT &
				     PLABEL_CS_WAIT_MASK);
		s->weight = PLABEL_W_DONE;
		s->value = h->wait_state < PLABEL_THREAD_NSTATES ?
			   h->wait_state : PLABEL_THREAD_RUNNING;
	} else if (r->type == PLABEL_REC_THREAD) {
		s->weight = PLABEL_W_CHILD;
		s->value = h->child_tid;
	} else if (h->flags & PLABEL_SAMPLE_CPUTIME) {
		s->weight = PLABEL_W_CPU;
		s->value = h->cpu_ns;
	} else {
		s->weight = PLABEL_W_PERIOD;
		s->value = 0;
	}
	return c->tl ? timeline_note(c, r, s, nanos, set_id) : 0;
}

/*
 * An ALLOC: its chain now (a dwarf snapshot unwound at once, not
 * spooled: allocations are sampled rarely), kept to the end.
 */
static int add_alloc(struct plabel_collect *c, const struct plabel_dec_rec *r)
{
	const struct plabel_rec_sample *h = &r->u.sample.hdr;
	struct plabel_heap_ev *e;
	struct plabel_proc *p;
	uint32_t gen, chain, src;
	uint64_t set_id;
	int ret;

	c->st.allocs++;
	p = plabel_procs_get(&c->procs, h->pid);
	if (!p)
		return -ENOMEM;
	ret = note_names(c, p, r);
	if (ret)
		return ret;
	p = plabel_procs_get(&c->procs, h->pid);
	if (!p)
		return -ENOMEM;
	gen = plabel_proc_gen(p, h->time_ns);
	if (plabel_proc_view(p, gen))
		return -ENOMEM;
	if (!p->nview && p->tried_gen != gen + 1 &&
	    (gen || h->pid != c->skip_pid)) {
		if (r->u.sample.has_regs) {
			if (read_maps(c, p, h->time_ns) ||
			    plabel_proc_view(p, gen))
				return -ENOMEM;
		} else {
			if (plabel_grow(&c->want, &c->want_cap, c->nwant,
					sizeof(*c->want)))
				return -ENOMEM;
			c->want[c->nwant].proc =
				plabel_procs_index(&c->procs, p);
			c->want[c->nwant].gen = gen;
			c->want[c->nwant++].time_ns = h->time_ns;
			p->tried_gen = gen + 1;
		}
	}
	ret = sample_chain(c, p, r, 1, &chain);
	if (ret)
		return ret;
	ret = ctx_set(c, r, &set_id);
	if (ret)
		return ret;
	if (src_get(c, h->pid, set_id, &src) ||
	    plabel_grow(&c->heap, &c->heap_cap, c->nheap, sizeof(*c->heap)))
		return -ENOMEM;
	e = &c->heap[c->nheap++];
	memset(e, 0, sizeof(*e));
	e->s.time_ns = h->time_ns;
	e->s.tid = h->tid;
	e->s.chain = chain;
	e->s.src = src;
	e->addr = r->u.sample.alloc.addr;
	e->bytes = r->u.sample.alloc.requested;
	e->weight = r->u.sample.alloc.weight;
	e->n = 1;
	e->pid = h->pid;
	return 0;
}

int plabel_collect_heap_freed(struct plabel_collect *c, const void *rec,
			      size_t len, uint64_t n)
{
	struct plabel_heap_ev *e;
	struct plabel_dec d;
	int ret;

	if (!n)
		return 0;
	plabel_dec_init(&d, rec, len);
	if (plabel_dec_next(&d, c->rec) <= 0 ||
	    c->rec->type != PLABEL_REC_ALLOC || c->rec->size != len)
		return -EINVAL;
	ret = add_alloc(c, c->rec);
	if (ret)
		return ret;
	e = &c->heap[c->nheap - 1];
	e->n = n;
	e->freed = 1;
	e->addr = 0;
	c->st.allocs += n - 1;
	return 0;
}

static int add_free(struct plabel_collect *c, const struct plabel_rec_free *f)
{
	struct plabel_free_ev *e;

	c->st.frees++;
	if (plabel_grow(&c->frees, &c->frees_cap, c->nfrees,
			sizeof(*c->frees)))
		return -ENOMEM;
	e = &c->frees[c->nfrees++];
	e->addr = f->addr;
	e->time_ns = f->time_ns;
	e->pid = f->pid;
	e->reserved = 0;
	return 0;
}

/*
 * Unwind the snapshot of pending sample s, the next in the spool, against
 * the mappings of its process at its time (some may have been recorded
 * after it), and give it the unwound chain unless its own is longer.
 */
static int unwind_pending(struct plabel_collect *c,
			  struct plabel_csample *s)
{
	const struct plabel_chain *ch = plabel_chain_at(&c->chains, s->chain);
	const struct plabel_snapshot *snap;
	struct plabel_proc *p;
	int nunw, ret;

	s->flags &= ~PLABEL_CS_PENDING;	/* its spool entry is consumed */
	ret = plabel_spool_next(&c->spool, &snap);
	if (ret)
		return ret;
	p = plabel_procs_get(&c->procs, c->srcs[s->src].pid);
	if (!p || plabel_proc_view(p, plabel_proc_gen(p, s->time_ns)))
		return -ENOMEM;
	if (!c->unwinder)
		c->unwinder = plabel_unwinder_new();
	if (!c->unwinder)
		return -ENOMEM;
	nunw = plabel_unwind(c->unwinder, p->view, p->nview, snap->regs,
			     snap->stack, snap->stack_size, c->ipbuf,
			     PLABEL_MAX_FRAMES);
	if (nunw == -ENOMEM)
		return nunw;
	if (nunw > 0 && (size_t)nunw < ch->nu)
		nunw = splice_fp_chain(c->ipbuf, nunw, PLABEL_MAX_FRAMES,
				       ch->ips + ch->nk, ch->nu);
	if (nunw <= 0 || (size_t)nunw < ch->nu)
		return 0;
	return plabel_chain_join(&c->chains, ch->ips, ch->nk, c->ipbuf, nunw,
				 &s->chain);
}

/* Unwind every pending sample, in arrival order: the spool's order. */
static int unwind_all_pending(struct plabel_collect *c)
{
	size_t i;
	int ret;

	for (i = c->head; i < c->nsamples; i++) {
		if (!(c->samples[i].flags & PLABEL_CS_PENDING))
			continue;
		ret = unwind_pending(c, &c->samples[i]);
		if (ret)
			return ret;
	}
	plabel_spool_rewind(&c->spool);
	return 0;
}

/* ---- merging settled samples ---- */

static uint64_t agg_hash(const struct plabel_agg *a)
{
	return plabel_hash2((uint64_t)a->pid << 32 | a->tid,
			    plabel_hash2((uint64_t)a->chain << 32 | a->gen,
					 a->set_id + a->type + a->wait +
					 ((uint64_t)a->state << 20) +
					 ((uint64_t)a->pname << 40 ^
					  (uint64_t)a->tname << 8)));
}

static int agg_same(const struct plabel_agg *a, const struct plabel_agg *k)
{
	return a->pid == k->pid && a->tid == k->tid && a->chain == k->chain &&
	       a->gen == k->gen && a->set_id == k->set_id &&
	       a->type == k->type && a->pname == k->pname &&
	       a->tname == k->tname && a->wait == k->wait &&
	       a->state == k->state;
}

/* Merge count samples like k (its count aside) into a. */
static void agg_merge(struct plabel_agg *a, const struct plabel_agg *k,
		      uint64_t count)
{
	a->count += count;
	a->nanos += k->nanos;
	if (k->first < a->first)
		a->first = k->first;
}

/*
 * Remember agg i for k's chain: a chain's samples mostly have one
 * thread, label set and image, so the next sample of the chain is looked
 * up there first, without hashing.
 */
static void agg_hint_set(struct plabel_collect *c, const struct plabel_agg *k,
			 size_t i)
{
	size_t old = c->hint_cap;

	if (k->chain >= c->hint_cap) {
		if (plabel_grow_to(&c->agg_hint, &c->hint_cap,
				   (size_t)k->chain + 1, sizeof(*c->agg_hint)))
			return;	/* no hint then */
		memset(c->agg_hint + old, 0,
		       (c->hint_cap - old) * sizeof(*c->agg_hint));
	}
	c->agg_hint[k->chain] = (uint32_t)i + 1;
}

/*
 * Add count samples like k (its count aside), k->nanos with them; h is
 * agg_hash(k).
 */
static int agg_add_hashed(struct plabel_collect *c, const struct plabel_agg *k,
			  uint64_t h, uint64_t count)
{
	struct plabel_agg *a;
	size_t i, pos = SIZE_MAX;

	if (k->chain < c->hint_cap && c->agg_hint[k->chain]) {
		a = &c->aggs[c->agg_hint[k->chain] - 1];
		if (agg_same(a, k)) {
			agg_merge(a, k, count);
			return 0;
		}
	}
	while ((i = plabel_itab_next(&c->agg_tab, h, &pos)) != SIZE_MAX) {
		a = &c->aggs[i];
		if (agg_same(a, k)) {
			agg_merge(a, k, count);
			agg_hint_set(c, k, i);
			return 0;
		}
	}
	if (c->naggs >= UINT32_MAX - 1 ||
	    plabel_itab_reserve(&c->agg_tab, 1) ||
	    plabel_grow(&c->aggs, &c->aggs_cap, c->naggs, sizeof(*c->aggs)))
		return -ENOMEM;
	a = &c->aggs[c->naggs];
	*a = *k;
	a->count = count;
	agg_hint_set(c, k, c->naggs);
	plabel_itab_put(&c->agg_tab, h, c->naggs++);
	return 0;
}

/* Add count samples like k (its count aside), k->nanos with them. */
static int agg_add(struct plabel_collect *c, const struct plabel_agg *k,
		   uint64_t count)
{
	return agg_add_hashed(c, k, agg_hash(k), count);
}

/*
 * Ask for what agg_add_hashed(c, k, h, ...) reads: the merged sample k's
 * chain had last, and the table slot of h (first); the merged sample
 * that slot names, once the slot is in the cache (second). Inlined:
 * GCC drops the calls of a function whose only effect is a prefetch.
 */
static inline __attribute__((always_inline)) void
agg_prefetch(const struct plabel_collect *c, const struct plabel_agg *k,
	     uint64_t h, int second)
{
	const struct plabel_islot *sl;
	size_t i, n;

	if (!c->agg_tab.cap)
		return;
	i = h & (c->agg_tab.cap - 1);
	if (!second) {
		if (k->chain < c->hint_cap && c->agg_hint[k->chain])
			__builtin_prefetch(c->aggs + c->agg_hint[k->chain] - 1);
		__builtin_prefetch(&c->agg_tab.slot[i]);
		return;
	}
	/* the first of the slots probed that has h, a few at most */
	for (n = 0; n < 4; n++, i = (i + 1) & (c->agg_tab.cap - 1)) {
		sl = &c->agg_tab.slot[i];
		if (!sl->idx1)
			return;
		if (sl->hash == h) {
			__builtin_prefetch(c->aggs + sl->idx1 - 1);
			return;
		}
	}
}

/* The record type of held sample s. */
static uint32_t csample_type(const struct plabel_csample *s)
{
	if (s->flags & PLABEL_CS_STATE)
		return PLABEL_REC_THREADSTATE;
	if (s->flags & PLABEL_CS_OFFCPU)
		return PLABEL_REC_OFFCPU;
	return s->flags & PLABEL_CS_THREAD ? PLABEL_REC_THREAD :
	       PLABEL_REC_SAMPLE;
}

/*
 * What building takes of sample s, in *a. 0 when s is left out (what
 * skip_pid ran before its exec); -1 when that is not known yet (no exec of
 * skip_pid seen), *a then being the sample as it is if none comes.
 */
static int sample_key(struct plabel_collect *c,
		      const struct plabel_csample *s,
		      struct plabel_agg *a)
{
	const struct plabel_src *src = &c->srcs[s->src];
	struct plabel_proc *p = plabel_procs_get(&c->procs, src->pid);
	int ret = 1;

	memset(a, 0, sizeof(*a));
	a->gen = p ? plabel_proc_gen(p, s->time_ns) : 0;
	if (src->pid && src->pid == c->skip_pid && p && !a->gen) {
		if (p->nexec)
			return 0;
		ret = -1;
	}
	a->pid = src->pid;
	a->tid = c->flags & PLABEL_COLLECT_PID_LABELS ? s->tid : 0;
	a->chain = s->chain;
	a->set_id = src->set_id;
	a->type = csample_type(s);
	a->count = plabel_csample_periods(s);
	a->nanos = a->type == PLABEL_REC_THREAD ? 0 : s->value;
	a->first = s->seq;
	if (a->type == PLABEL_REC_THREADSTATE) {
		a->nanos = 0;
		a->state = 1 + (uint32_t)s->value;
	}
	if (s->flags & PLABEL_CS_OFFCPU)
		a->wait = 1 + ((s->flags & PLABEL_CS_WAIT_MASK) >>
			       PLABEL_CS_WAIT_SHIFT);
	if ((c->flags & PLABEL_COLLECT_NAME_LABELS) && p) {
		a->pname = plabel_proc_name_at(p, s->time_ns);
		a->tname = plabel_names_thread_at(&c->names, s->tid,
						  s->time_ns);
	}
	return ret;
}

/* A held sample's key worked out ahead, in fold(). */
struct plabel_fold_key {
	struct plabel_agg a;
	uint64_t hash;
	int kind;	/* sample_key()'s, or 2: kept as it is */
};

_Static_assert(PLABEL_FOLD_RING > PLABEL_FOLD_AHEAD,
	       "the ring holds every key worked out and not used yet");

/*
 * The key of held sample i in *fk, its memory asked for; ret is fold()'s
 * so far: after a failure, every sample is kept as it is.
 */
static void fold_key(struct plabel_collect *c, size_t i, int ret,
		     struct plabel_fold_key *fk)
{
	const struct plabel_csample *s = &c->samples[i];

	fk->kind = 2;
	if (ret || (s->flags & PLABEL_CS_PENDING) || s->time_ns >= c->settled)
		return;
	fk->kind = sample_key(c, s, &fk->a);
	if (fk->kind <= 0)
		return;
	fk->hash = agg_hash(&fk->a);
	agg_prefetch(c, &fk->a, fk->hash, 0);
}

/*
 * Merge the samples stamped before c->settled, whose generation can no
 * longer change; keep the others (later ones, snapshots still to unwind)
 * in arrival order. Only the blocks that can hold such samples are read:
 * those kept there move up to the first block not read. A failure leaves
 * the samples not merged yet as they were. 0 or -ENOMEM.
 */
static int fold(struct plabel_collect *c)
{
	size_t end = held_settled_end(c), i, k = c->head, head;
	struct plabel_fold_key ring[PLABEL_FOLD_RING], *fk;
	int ret = plabel_weigh(&c->weigher, held(c), end - c->head,
			       c->period_ns, c->settled);

	for (i = c->head; i < end && i < c->head + PLABEL_FOLD_AHEAD; i++)
		fold_key(c, i, ret, &ring[i % PLABEL_FOLD_RING]);
	for (i = c->head; i < end; i++) {
		if (i + PLABEL_FOLD_AHEAD < end)
			fold_key(c, i + PLABEL_FOLD_AHEAD, ret,
				 &ring[(i + PLABEL_FOLD_AHEAD) %
				       PLABEL_FOLD_RING]);
		if (i + PLABEL_FOLD_AHEAD / 2 < end) {
			fk = &ring[(i + PLABEL_FOLD_AHEAD / 2) %
				   PLABEL_FOLD_RING];
			if (fk->kind == 1)
				agg_prefetch(c, &fk->a, fk->hash, 1);
		}
		fk = &ring[i % PLABEL_FOLD_RING];
		if (!fk->kind && !ret)
			continue;
		/* (a failure keeps this one and every later one) */
		if (fk->kind == 1 && !ret) {
			ret = agg_add_hashed(c, &fk->a, fk->hash, 1);
			if (!ret)
				continue;
		}
		c->samples[k++] = c->samples[i];
	}
	/* the kept ones, k - head of them, end where the others start */
	head = end - (k - c->head);
	memmove(c->samples + head, c->samples + c->head,
		(k - c->head) * sizeof(*c->samples));
	c->head = head;
	k = c->nsamples - head;
	if (k <= head / 4) {
		/*
		 * Few are held (merging keeps up with the records): they move
		 * to the front, and the next ones reuse the pages there
		 * instead of faulting fresh ones in behind. (Many held, they
		 * stay, and held_room() moves them as it gives pages back.)
		 */
		memcpy(c->samples, c->samples + head, k * sizeof(*c->samples));
		c->head = 0;
		c->nsamples = k;
		c->released = 0;
		c->nbmin = (k + PLABEL_HELD_BLOCK - 1) / PLABEL_HELD_BLOCK;
		held_note_blocks(c, 0, k);
	} else {
		held_note_blocks(c, head, end);
		if (head > c->released) {
			held_release(c->samples, c->released, head);
			c->released = head;
		}
	}
	c->fold_at = c->nsamples - c->head + PLABEL_FOLD_BATCH;
	return ret;
}

int plabel_collect_settled(struct plabel_collect *c, uint64_t time_ns)
{
	uint64_t w = watermark(c);

	c->merging = 1;
	if (w > time_ns)
		time_ns = w;
	if (time_ns > c->settled)
		c->settled = time_ns;
	return c->nsamples - c->head >= c->fold_at ? fold(c) : 0;
}

/*
 * An OFFCPU record, joined with its END (join.h): held as a sample of the
 * wait's length once both halves are in.
 */
static int add_offcpu(struct plabel_collect *c,
		      const struct plabel_dec_rec *r)
{
	const struct plabel_rec_sample *h = &r->u.sample.hdr;
	uint64_t end;
	int ret = plabel_join_begin(&c->join, h->tid, h->time_ns, r->raw,
				    r->size, c->settled, &end);

	return ret > 0 ? add_sample(c, r, end - h->time_ns) : ret;
}

static int add_offcpu_end(struct plabel_collect *c,
			  const struct plabel_rec_offcpu_end *e)
{
	struct plabel_dec d;
	uint8_t *raw;
	uint32_t size;
	int ret = plabel_join_end(&c->join, e->tid, e->out_ns, e->time_ns,
				  c->settled, &raw, &size);

	if (ret <= 0)
		return ret;
	if (!c->joined)
		c->joined = malloc(sizeof(*c->joined));
	ret = -ENOMEM;
	if (c->joined) {
		plabel_dec_init(&d, raw, size);
		/* (decoded once already: it decodes again) */
		ret = plabel_dec_next(&d, c->joined) == 1 ?
		      add_sample(c, c->joined, e->time_ns - e->out_ns) : 0;
		/* the copy goes: what the spool holds of it, first */
		plabel_spool_sync(&c->spool);
	}
	free(raw);
	return ret;
}

/* Feed one decoded record. 0 or -ENOMEM. */
static int collect_record(struct plabel_collect *c,
			  const struct plabel_dec_rec *r)
{
	struct plabel_proc *p;
	uint32_t name;
	int ret;

	switch (r->type) {
	case PLABEL_REC_STREAM:
		c->st.version = r->u.stream.version;
		c->ncpus = r->u.stream.ncpus;
		c->start_ns = r->u.stream.start_ns;
		plabel_collect_set_period(c, r->u.stream.period_ns);
		return 0;
	case PLABEL_REC_LABELSET:
		return plabel_lsets_add(&c->lsets, r->u.labelset.id,
					r->u.labelset.labels,
					r->u.labelset.count);
	case PLABEL_REC_SAMPLE:
	case PLABEL_REC_THREAD:
	case PLABEL_REC_THREADSTATE:
		return add_sample(c, r, 0);
	case PLABEL_REC_ALLOC:
		return add_alloc(c, r);
	case PLABEL_REC_FREE:
		return add_free(c, &r->u.free);
	case PLABEL_REC_OFFCPU:
		return add_offcpu(c, r);
	case PLABEL_REC_OFFCPU_END:
		return add_offcpu_end(c, &r->u.offcpu_end);
	case PLABEL_REC_LOST:
		switch (r->u.lost.kind) {
		case PLABEL_LOST_FREES:
			c->st.lost_frees += r->u.lost.lost;
			break;
		case PLABEL_LOST_MAPPINGS:
			c->st.lost_maps += r->u.lost.lost;
			break;
		case PLABEL_LOST_PROCESSES:
			c->st.lost_procs += r->u.lost.lost;
			break;
		case PLABEL_LOST_PERIODS:
			c->st.lost_periods += r->u.lost.lost;
			break;
		default:
			c->st.lost += r->u.lost.lost;
			break;
		}
		return 0;
	case PLABEL_REC_MMAP:
		p = plabel_procs_get(&c->procs, r->u.mmap.hdr.pid);
		if (!p)
			return -ENOMEM;
		return plabel_proc_add_map(c->syms, p, r->u.mmap.hdr.start,
					   r->u.mmap.hdr.end,
					   r->u.mmap.hdr.offset,
					   r->u.mmap.hdr.time_ns,
					   r->u.mmap.path.ptr,
					   r->u.mmap.path.len, 0);
	case PLABEL_REC_EXEC:
		if (c->tctx)
			ctx_keymap_forget(c, r->u.exec.pid);
		p = plabel_procs_get(&c->procs, r->u.exec.pid);
		if (!p)
			return -ENOMEM;
		name = plabel_names_id(&c->names, r->u.exec.comm,
				       sizeof(r->u.exec.comm));
		ret = plabel_proc_exec(c->syms, p, r->u.exec.time_ns, name);
		if (!ret && names_kept(c))
			ret = plabel_names_thread_rename(
				&c->names, r->u.exec.tid, r->u.exec.time_ns,
				r->u.exec.comm, sizeof(r->u.exec.comm));
		/* merged samples may then sit in the wrong generation */
		if (!ret && r->u.exec.time_ns < c->settled)
			c->st.late++;
		return ret;
	case PLABEL_REC_SYNC:
		/* the CPU's records stamped before it are in */
		return cpu_seen(c, r->u.sync.cpu, r->u.sync.time_ns);
	case PLABEL_REC_COMM:
		if (!names_kept(c))
			return 0;
		return plabel_names_thread_rename(&c->names, r->u.comm.tid,
						  r->u.comm.time_ns,
						  r->u.comm.comm,
						  sizeof(r->u.comm.comm));
	default:
		return 0;	/* unknown types are skipped */
	}
}

/* /proc/PID/maps of the processes still without mappings. 0 or -ENOMEM. */
static int maps_wanted(struct plabel_collect *c)
{
	int ret = 0;
	size_t i;

	for (i = 0; i < c->nwant && !ret; i++) {
		struct plabel_proc *p = &c->procs.by_idx[c->want[i].proc];
		uint32_t gen = c->want[i].gen;

		/* /proc shows the newest image only */
		if (gen != p->nexec)
			continue;
		ret = plabel_proc_view(p, gen);
		if (!ret && !p->nview)
			ret = read_maps(c, p, c->want[i].time_ns);
	}
	c->nwant = 0;
	return ret;
}

int plabel_collect_buffer(struct plabel_collect *c, const void *buf,
			  size_t len)
{
	struct plabel_dec d;
	int ret;

	plabel_dec_init(&d, buf, len);
	while ((ret = plabel_dec_next(&d, c->rec)) > 0) {
		ret = collect_record(c, c->rec);
		if (ret)
			break;
	}
	plabel_spool_sync(&c->spool);	/* buf is the caller's */
	if (maps_wanted(c) == -ENOMEM)
		ret = -ENOMEM;
	/* merging as the watermark passes, once the caller merges */
	if (!ret && c->merging)
		ret = plabel_collect_settled(c, 0);
	if (ret == -EBADMSG)
		c->st.bad++;
	return ret;
}

/* ---- the timeline ---- */

static int obs_seq_cmp(const void *pa, const void *pb)
{
	const struct plabel_tl_obs *a = pa, *b = pb;

	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/*
 * The chains the held samples have now (dwarf snapshots unwound at the
 * end) in their observations, found by arrival number: the timeline
 * holds them in arrival order until it is written.
 */
static void timeline_chains(struct plabel_collect *c)
{
	struct plabel_tl_obs key, *o;
	size_t i;

	for (i = c->head; i < c->nsamples; i++) {
		key.seq = c->samples[i].seq;
		o = bsearch(&key, c->tl->obs, c->tl->n, sizeof(key),
			    obs_seq_cmp);
		if (o)
			o->chain = c->samples[i].chain;
	}
}

/* Fallback name of an address: FILE+0xOFFSET, or the address. */
static void tl_addr_name(char *buf, size_t cap, const struct plabel_map *m,
			 uint64_t ip)
{
	const char *base;

	if (!m) {
		snprintf(buf, cap, "0x%" PRIx64, ip);
		return;
	}
	base = strrchr(m->path, '/');
	snprintf(buf, cap, "%s+0x%" PRIx64, base ? base + 1 : m->path,
		 ip - m->start + m->offset);
}

/*
 * The frames of user address ip of p (a return address unless leaf),
 * outermost (inlined callers) first, under *parent. 0 or -ENOMEM.
 */
static int tl_user_frames(struct plabel_collect *c, struct plabel_proc *p,
			  uint64_t ip, int leaf, uint32_t *parent)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	const struct plabel_map *m = plabel_maps_find(p->view, p->nview, ip);
	char name[512];
	uint64_t bias;
	int n = 0, i;

	if (m && m->elf &&
	    !plabel_elf_bias(m->elf, m->start, m->offset, &bias)) {
		uint64_t va = ip - bias - (leaf ? 0 : 1);

		fr[0].function = plabel_elf_plt(m->elf, va);
		n = fr[0].function ? 1 :
		    plabel_elf_symbolize(m->elf, va, fr,
					 PLABEL_SYM_MAX_FRAMES);
	}
	if (n <= 0) {
		fr[0].function = NULL;
		n = 1;
	}
	for (i = n; i-- > 0;) {
		const char *fn = fr[i].function;

		if (!fn) {
			tl_addr_name(name, sizeof(name), m, ip);
			fn = name;
		}
		*parent = plabel_tl_frame(c->tl, *parent, fn);
		if (!*parent)
			return -ENOMEM;
	}
	return 0;
}

/* The leaf frame of chain ch of p (view made), 0 for none. 0 or -ENOMEM. */
static int tl_chain_frames(struct plabel_collect *c, struct plabel_proc *p,
			   const struct plabel_chain *ch, uint32_t *leaf)
{
	size_t n = (size_t)ch->nk + ch->nu, i;
	uint32_t parent = 0;
	char name[64];
	int ret;

	if (n > PLABEL_MAX_FRAMES)
		n = PLABEL_MAX_FRAMES;
	for (i = n; i-- > 0;) {
		uint64_t ip = ch->ips[i];
		const char *fn;

		if (!ip)
			continue;
		if (i < ch->nk || ip >= PLABEL_KERNEL_START) {
			fn = plabel_syms_kernel(c->syms, ip);
			if (!fn) {
				snprintf(name, sizeof(name),
					 "[kernel] 0x%" PRIx64, ip);
				fn = name;
			}
			parent = plabel_tl_frame(c->tl, parent, fn);
			if (!parent)
				return -ENOMEM;
			continue;
		}
		ret = tl_user_frames(c, p, ip, i == 0, &parent);
		if (ret)
			return ret;
	}
	*leaf = parent;
	return 0;
}

/*
 * Observation o resolved: left out as the profiles leave it out (what
 * skip_pid ran before its exec), its stack's frames for a CPU sample
 * (cache: by generation, chain and process). 0 or -ENOMEM.
 */
static int tl_resolve(struct plabel_collect *c, struct plabel_pair_map *cache,
		      struct plabel_tl_obs *o)
{
	struct plabel_proc *p = plabel_procs_get(&c->procs, o->pid);
	uint32_t gen, leaf = 0;
	uint64_t *slot;
	int ret;

	if (!p)
		return -ENOMEM;
	gen = plabel_proc_gen(p, o->time_ns);
	if (o->pid && o->pid == c->skip_pid && !gen && p->nexec) {
		o->skip = 1;
		return 0;
	}
	if (o->kind != PLABEL_TL_SAMPLE)
		return 0;
	slot = plabel_pair_slot(cache, (uint64_t)gen << 32 | o->chain,
				o->pid);
	if (!slot)
		return -ENOMEM;
	if (!*slot) {
		ret = plabel_proc_view(p, gen);
		if (!ret)
			ret = tl_chain_frames(c, p,
					      plabel_chain_at(&c->chains,
							      o->chain),
					      &leaf);
		if (ret)
			return ret;
		*slot = (uint64_t)leaf + 1;
	}
	o->stack = (uint32_t)(*slot - 1);
	return 0;
}

static const struct plabel_prof_label *tl_labels(void *ctx, uint64_t id,
						 uint32_t *n)
{
	struct plabel_collect *c = ctx;
	const struct plabel_lset *ls = plabel_lsets_find(&c->lsets, id);

	if (!ls)
		return NULL;
	*n = ls->count;
	return ls->labels;
}

static const char *tl_thread_name(void *ctx, uint32_t tid, uint64_t t)
{
	struct plabel_collect *c = ctx;
	uint32_t id = plabel_names_thread_at(&c->names, tid, t);

	return id ? plabel_names_str(&c->names, id) : NULL;
}

static const char *tl_process_name(void *ctx, uint32_t pid, uint64_t t)
{
	struct plabel_collect *c = ctx;
	struct plabel_proc *p = plabel_procs_get(&c->procs, pid);
	uint32_t id = p ? plabel_proc_name_at(p, t) : 0;

	return id ? plabel_names_str(&c->names, id) : NULL;
}

int plabel_collect_write_timeline(struct plabel_collect *c, const char *path)
{
	const struct plabel_tl_source src = {
		.ctx = c,
		.labels = tl_labels,
		.thread_name = tl_thread_name,
		.process_name = tl_process_name,
	};
	struct plabel_pair_map cache = { 0 };
	size_t i;
	int ret = 0;

	if (!c->tl)
		return -EINVAL;
	ret = ctx_sets_add(c);
	if (ret)
		return ret;
	c->tl->start_ns = c->start_ns;
	for (i = 0; i < c->tl->n && !ret; i++)
		ret = tl_resolve(c, &cache, &c->tl->obs[i]);
	plabel_pair_map_free(&cache);
	return ret ? ret : plabel_tl_write(c->tl, &src, path, NULL, NULL);
}

/* ---- building the profiles ---- */

/* Whether kind k takes merged sample a. */
static int kind_takes(const struct plabel_kind *k, const struct plabel_agg *a)
{
	if (k->waits_only && a->wait == 1 + PLABEL_WAIT_PREEMPTED)
		return 0;
	return a->type == k->rec_type || (k->rec_type2 && a->type == k->rec_type2);
}

/*
 * Every held sample merged (all are weighed, their snapshots unwound):
 * those whose exec of skip_pid never came as they are. 0 or -ENOMEM.
 */
static int fold_all(struct plabel_collect *c)
{
	struct plabel_agg a;
	size_t i;
	int ret;

	for (i = c->head; i < c->nsamples; i++) {
		if (!sample_key(c, &c->samples[i], &a))
			continue;
		ret = agg_add(c, &a, a.count);
		if (ret)
			return ret;
		c->head = i + 1;
	}
	c->head = c->nsamples;
	return 0;
}

static int agg_first_cmp(const void *pa, const void *pb, void *arg)
{
	const struct plabel_agg *aggs = arg;
	uint64_t a = aggs[*(const uint32_t *)pa].first;
	uint64_t b = aggs[*(const uint32_t *)pb].first;

	return a < b ? -1 : a > b;
}

/*
 * The profile of kind k's samples, the merged ones in the order
 * their first samples came (order[]): the same file whenever and however
 * often they were merged, and as if each sample were added as it came.
 * 0 or -ENOMEM.
 */
static int build_one(struct plabel_collect *c, const struct plabel_kind *k,
		     const uint32_t *order, struct plabel_prof *prof)
{
	const struct plabel_resolve_src src = {
		.syms = c->syms,
		.procs = &c->procs,
		.chains = &c->chains,
		.lsets = &c->lsets,
		.names = &c->names,
		.pid_labels = !!(c->flags & PLABEL_COLLECT_PID_LABELS),
	};
	struct plabel_resolver *r = plabel_resolver_new(&src, prof);
	size_t i;
	int ret = 0;

	if (!r)
		return -ENOMEM;
	for (i = 0; i < c->naggs && !ret; i++)
		if (kind_takes(k, &c->aggs[order[i]]))
			ret = plabel_resolver_add(r, &c->aggs[order[i]]);
	if (!ret)
		plabel_resolver_set_main(r);
	c->st.unresolved += plabel_resolver_unresolved(r);
	plabel_resolver_free(r);
	return ret ? ret : plabel_resolve_comments(prof, &c->st);
}

/* ---- the heap profile ---- */

/* Events of one block address, in time order: ALLOCs first at a tie. */
static int heap_ev_cmp(const void *a, const void *b)
{
	const struct plabel_heap_ev *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->s.time_ns != y->s.time_ns)
		return x->s.time_ns < y->s.time_ns ? -1 : 1;
	return 0;
}

static int free_ev_cmp(const void *a, const void *b)
{
	const struct plabel_free_ev *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	return 0;
}

/*
 * Which sampled blocks are still in use: each FREE ends the allocation
 * of its process and address made last before it; a FREE with none was
 * of a block sampled before recording (or by the process's parent before
 * its fork), and a block whose address is sampled again before any FREE
 * came counts as freed (its FREE was not seen). A process that exec'ed
 * after an allocation no longer has it.
 */
static void heap_match(struct plabel_collect *c)
{
	size_t i = 0, j = 0;

	if (c->nheap)
		qsort(c->heap, c->nheap, sizeof(*c->heap), heap_ev_cmp);
	if (c->nfrees)
		qsort(c->frees, c->nfrees, sizeof(*c->frees), free_ev_cmp);
	c->st.frees_unmatched = c->heap_unmatched;
	c->st.frees_implied = c->heap_implied;
	for (i = 0; i < c->nheap; i++)
		c->heap[i].live = !c->heap[i].freed;
	i = 0;
	while (i < c->nheap || j < c->nfrees) {
		struct plabel_heap_ev *a = i < c->nheap ? &c->heap[i] : NULL;
		struct plabel_free_ev *f = j < c->nfrees ? &c->frees[j] : NULL;
		int take_alloc;

		if (!f)
			take_alloc = 1;
		else if (!a)
			take_alloc = 0;
		else if (a->pid != f->pid)
			take_alloc = a->pid < f->pid;
		else if (a->addr != f->addr)
			take_alloc = a->addr < f->addr;
		else
			take_alloc = a->s.time_ns <= f->time_ns;
		if (take_alloc) {
			/* the previous one at this address was freed */
			if (i && c->heap[i - 1].pid == a->pid &&
			    c->heap[i - 1].addr == a->addr &&
			    c->heap[i - 1].live) {
				c->heap[i - 1].live = 0;
				c->st.frees_implied++;
			}
			i++;
			continue;
		}
		if (i && c->heap[i - 1].pid == f->pid &&
		    c->heap[i - 1].addr == f->addr && c->heap[i - 1].live)
			c->heap[i - 1].live = 0;
		else
			c->st.frees_unmatched++;
		j++;
	}
	for (i = 0; i < c->nheap; i++) {
		struct plabel_heap_ev *a = &c->heap[i];
		struct plabel_proc *p = plabel_procs_get(&c->procs, a->pid);

		if (a->live && p && plabel_proc_gen(p, a->s.time_ns) != p->nexec)
			a->live = 0;
	}
}

struct plabel_heap_key {
	struct plabel_agg a;	/* count, nanos: 0 */
	uint64_t weight;
	uint64_t bytes;
	uint64_t n;
	uint32_t live;
};

static int heap_key_cmp(const void *x, const void *y)
{
	const struct plabel_heap_key *k = x, *l = y;
	const struct plabel_agg *a = &k->a, *b = &l->a;

#define PLABEL_CMP(f)	do { if (a->f != b->f) return a->f < b->f ? -1 : 1; } while (0)
	PLABEL_CMP(pid);
	PLABEL_CMP(tid);
	PLABEL_CMP(gen);
	PLABEL_CMP(chain);
	PLABEL_CMP(set_id);
	PLABEL_CMP(pname);
	PLABEL_CMP(tname);
#undef PLABEL_CMP
	if (k->weight != l->weight)
		return k->weight < l->weight ? -1 : 1;
	return 0;
}

/*
 * Go's scaleHeapSample(): the count and bytes of samples taken at a mean
 * interval of rate bytes, of average size avg, stand for 1 / (1 -
 * exp(-avg / rate)) times as many.
 */
static void heap_scale(double count, double bytes, double rate,
		       uint64_t *ocount, uint64_t *obytes)
{
	double scale;

	if (count <= 0 || bytes <= 0) {
		*ocount = *obytes = 0;
		return;
	}
	scale = rate > 1 ? 1 / (1 - exp(-bytes / count / rate)) : 1;
	*ocount = (uint64_t)llround(count * scale);
	*obytes = (uint64_t)llround(bytes * scale);
}

/* Heap comments: what in-use figures rest on. 0 or -ENOMEM. */
static int heap_comments(struct plabel_prof *prof,
			 const struct plabel_collect_stats *st)
{
	char line[160];

	if (plabel_prof_add_comment(prof, "heap: in-use figures count only allocations sampled while recording"))
		return -ENOMEM;
	if (st->lost_frees) {
		snprintf(line, sizeof(line),
			 "heap: %" PRIu64 " FREE records lost: in-use figures are too high and cannot be trusted",
			 st->lost_frees);
		if (plabel_prof_add_comment(prof, line))
			return -ENOMEM;
	}
	snprintf(line, sizeof(line), "heap: sampled allocations: %" PRIu64
		 ", frees: %" PRIu64 " (of blocks sampled before recording or before a fork: %" PRIu64 ")",
		 st->allocs, st->frees, st->frees_unmatched);
	if (plabel_prof_add_comment(prof, line))
		return -ENOMEM;
	if (st->allocs_dropped) {
		snprintf(line, sizeof(line),
			 "heap: sampled allocations left out over the reader's bound: %" PRIu64 " (every figure is too low)",
			 st->allocs_dropped);
		if (plabel_prof_add_comment(prof, line))
			return -ENOMEM;
	}
	if (st->frees_implied) {
		snprintf(line, sizeof(line),
			 "heap: blocks taken as freed because their address was sampled again: %" PRIu64,
			 st->frees_implied);
		if (plabel_prof_add_comment(prof, line))
			return -ENOMEM;
	}
	return 0;
}

/* The heap profile from the ALLOC and FREE records. 0 or -ENOMEM. */
static int build_heap(struct plabel_collect *c, struct plabel_prof *prof)
{
	const struct plabel_resolve_src src = {
		.syms = c->syms,
		.procs = &c->procs,
		.chains = &c->chains,
		.lsets = &c->lsets,
		.names = &c->names,
		.pid_labels = !!(c->flags & PLABEL_COLLECT_PID_LABELS),
	};
	struct plabel_resolver *r;
	struct plabel_heap_key *keys;
	size_t i, j, n = 0;
	int ret = 0;

	heap_match(c);
	plabel_prof_set_period(prof, (int64_t)c->heap_rate);
	ret = plabel_prof_set_drop_frames(prof, PLABEL_HEAP_DROP, NULL);
	if (ret)
		return ret;
	keys = calloc(c->nheap ? c->nheap : 1, sizeof(*keys));
	r = plabel_resolver_new(&src, prof);
	if (!keys || !r) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < c->nheap; i++) {
		struct plabel_heap_key *k = &keys[n];

		if (sample_key(c, &c->heap[i].s, &k->a) == 0)
			continue;
		k->a.type = PLABEL_REC_ALLOC;
		k->a.count = 0;
		k->a.nanos = 0;
		k->weight = c->heap[i].weight;
		k->bytes = c->heap[i].bytes;
		k->n = c->heap[i].n;
		k->live = c->heap[i].live;
		n++;
	}
	if (n)
		qsort(keys, n, sizeof(*keys), heap_key_cmp);
	for (i = 0; i < n && !ret; i = j) {
		double ac = 0, ab = 0, ic = 0, ib = 0;
		struct plabel_agg a = keys[i].a;

		for (j = i; j < n && !heap_key_cmp(&keys[i], &keys[j]); j++) {
			ac += (double)keys[j].n;
			ab += (double)keys[j].bytes * (double)keys[j].n;
			if (keys[j].live) {
				ic += 1;
				ib += (double)keys[j].bytes;
			}
		}
		heap_scale(ac, ab, (double)keys[i].weight, &a.count, &a.nanos);
		heap_scale(ic, ib, (double)keys[i].weight, &a.inuse_count,
			   &a.inuse_bytes);
		ret = plabel_resolver_add(r, &a);
	}
	if (!ret)
		plabel_resolver_set_main(r);
	if (r)
		c->st.unresolved += plabel_resolver_unresolved(r);
out:
	plabel_resolver_free(r);
	free(keys);
	if (!ret)
		ret = plabel_resolve_comments(prof, &c->st);
	return ret ? ret : heap_comments(prof, &c->st);
}

int plabel_collect_finish(struct plabel_collect *c, int64_t time_nanos,
			  int64_t duration_nanos,
			  struct plabel_prof *profs[PLABEL_PROF_NKINDS])
{
	struct plabel_prof *built[PLABEL_PROF_NKINDS] = { NULL };
	uint32_t *order;
	size_t k;
	int ret;

	ret = unwind_all_pending(c);
	if (!ret && c->tl)
		timeline_chains(c);
	if (!ret)
		ret = plabel_weigh(&c->weigher, held(c),
				   c->nsamples - c->head, c->period_ns,
				   UINT64_MAX);
	if (!ret)
		ret = fold_all(c);
	if (ret)
		return ret;
	order = malloc((c->naggs ? c->naggs : 1) * sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (k = 0; k < c->naggs; k++)
		order[k] = (uint32_t)k;
	qsort_r(order, c->naggs, sizeof(*order), agg_first_cmp, c->aggs);
	if (c->tctx) {
		uint32_t registered, failed;

		plabel_tctx_counts(c->tctx, &registered, &failed);
		c->st.ctx_failed = failed;
	}
	ret = ctx_sets_add(c);
	if (ret) {
		free(order);
		return ret;
	}
	plabel_lsets_sort(&c->lsets);
	c->st.unresolved = 0;

	for (k = 0; k < PLABEL_PROF_NKINDS; k++) {
		built[k] = plabel_prof_new(k, c->period_ns);
		if (!built[k]) {
			ret = -ENOMEM;
			goto err_free;
		}
		plabel_prof_set_time(built[k], time_nanos, duration_nanos);
		if (k == PLABEL_PROF_HEAP)
			ret = build_heap(c, built[k]);
		else
			ret = build_one(c, &plabel_kinds[k], order, built[k]);
		if (ret)
			goto err_free;
	}
	free(order);
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		profs[k] = built[k];
	return 0;

err_free:
	free(order);
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		plabel_prof_free(built[k]);
	return ret;
}
