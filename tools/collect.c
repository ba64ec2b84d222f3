// SPDX-License-Identifier: GPL-2.0
/*
 * Records -> profiles. See collect.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect.h"
#include "chain.h"
#include "lset.h"
#include "proc.h"
#include "spool.h"
#include "weigh.h"
#include "table.h"
#include "unwind.h"

#define PLABEL_MAX_FRAMES	1024
#define PLABEL_KERNEL_START	0xffff800000000000ULL

/*
 * Samples merged once their time is settled (see plabel_collect_settled()):
 * what building needs of a sample is its type, process, thread (only for
 * the pid/tid labels), image generation, chain and label set, and how many
 * there were. A long recording then costs memory per distinct sample, not
 * per sample.
 */
struct plabel_agg {
	uint32_t pid, tid;
	uint32_t chain, gen;
	uint64_t set_id;
	uint32_t type;
	uint32_t pname, tname;	/* process and thread name ids, 0: none */
	uint32_t reserved;
	uint64_t count;
	uint64_t nanos;		/* CPU nanoseconds, SAMPLE only */
};

/* Settled samples are merged in batches of at least this many. */
#define PLABEL_FOLD_BATCH	65536

/* Spool bytes touched ahead (plabel_collect_prefault): some thread
 * creations' worth */
#define PLABEL_PREFAULT_SPOOL	(64U << 10)


/*
 * A thread's names (PLABEL_COLLECT_NAME_LABELS): first, what it was called
 * when first seen (from /proc, or its creator's name), then each rename,
 * in arrival order.
 */
struct plabel_tev {
	uint64_t time_ns;
	uint32_t name;
	uint32_t reserved;
};

struct plabel_tnames {
	uint32_t tid;		/* first: plabel_itab_u32()'s key */
	uint32_t first;		/* name id, 0: unknown */
	uint8_t tried;		/* /proc was read for first */
	struct plabel_tev *ev;
	size_t nev, cap;
};

struct plabel_collect {
	struct plabel_syms *syms;
	unsigned int flags;
	uint64_t period_ns;
	struct plabel_collect_stats st;
	struct plabel_dec_rec *rec;	/* the record being collected */

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

	struct plabel_csample *samples;	/* not merged yet, arrival order */
	size_t nsamples, samples_cap;
	uint64_t settled;	/* every record stamped before it is in */
	size_t fold_at;		/* merge when nsamples reaches it */

	struct plabel_agg *aggs;
	size_t naggs, aggs_cap;
	struct plabel_itab agg_tab;

	struct plabel_weigher weigher;

	struct plabel_chains chains;

	/* names of processes and threads, id = index + 1 */
	char **names;
	size_t nnames, names_cap;
	struct plabel_tnames *tns;
	size_t ntns, tns_cap;
	struct plabel_itab tn_tab;	/* by tid */

	struct plabel_unwinder *unwinder;
	struct plabel_spool spool;
	uint64_t ipbuf[PLABEL_MAX_FRAMES];
	uint32_t skip_pid;	/* 0: none */
};

void plabel_collect_free(struct plabel_collect *c)
{
	size_t i;

	if (!c)
		return;
	plabel_lsets_release(&c->lsets);
	plabel_procs_release(&c->procs);
	free(c->want);
	free(c->samples);
	free(c->aggs);
	plabel_itab_free(&c->agg_tab);
	plabel_weigher_release(&c->weigher);
	plabel_chains_release(&c->chains);
	for (i = 0; i < c->nnames; i++)
		free(c->names[i]);
	free(c->names);
	for (i = 0; i < c->ntns; i++)
		free(c->tns[i].ev);
	free(c->tns);
	plabel_itab_free(&c->tn_tab);
	plabel_unwinder_free(c->unwinder);
	plabel_spool_release(&c->spool);
	free(c->rec);
	free(c);
}

void plabel_collect_set_period(struct plabel_collect *c, uint64_t period_ns)
{
	if (period_ns)
		c->period_ns = period_ns;
}

void plabel_collect_skip_before_exec(struct plabel_collect *c, uint32_t pid)
{
	c->skip_pid = pid;
}

void plabel_collect_stats(const struct plabel_collect *c,
			  struct plabel_collect_stats *st)
{
	*st = c->st;
	st->labelsets = plabel_lsets_count(&c->lsets);
	st->held = c->nsamples;
	st->merged = c->naggs;
}

/*
 * PLABEL_COLLECT_PROC_MAPS: p's mappings at t from /proc, counted in the
 * stats when the process was still there. 0 or -ENOMEM.
 */
static int collect_read_maps(struct plabel_collect *c, struct plabel_proc *p,
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
static int plabel_collect_prefault(struct plabel_collect *c)
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
	plabel_spool_init(&c->spool);
	c->fold_at = PLABEL_FOLD_BATCH;
	if ((flags & PLABEL_COLLECT_PREFAULT) && plabel_collect_prefault(c)) {
		plabel_collect_free(c);
		return NULL;
	}
	return c;
}

/*
 * The chain of sample r of p, stored; in dwarf mode with the snapshot
 * unwound now if unwind is set. 0 or -ENOMEM.
 */
static int plabel_sample_chain(struct plabel_collect *c, struct plabel_proc *p,
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

/* ---- process and thread names ---- */

/*
 * The id of name s (at most len bytes, up to a NUL), added if new; 0 on
 * ENOMEM or an empty name. Few distinct names: a linear search, done once
 * per thread seen or renamed, never per sample.
 */
static uint32_t plabel_name_id(struct plabel_collect *c, const char *s,
			       size_t len)
{
	size_t i, n = strnlen(s, len);
	char *d;

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		n--;
	if (!n)
		return 0;
	for (i = 0; i < c->nnames; i++)
		if (!strncmp(c->names[i], s, n) && !c->names[i][n])
			return i + 1;
	if (c->nnames >= UINT32_MAX - 1 ||
	    plabel_grow(&c->names, &c->names_cap, c->nnames,
			sizeof(*c->names)))
		return 0;
	d = strndup(s, n);
	if (!d)
		return 0;
	c->names[c->nnames++] = d;
	return c->nnames;
}

/* First line of a small /proc file into buf; bytes read, 0 on failure. */
static size_t plabel_read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return strlen(buf);
}

/*
 * The name of running process pid as exec gives it: the base name of its
 * executable, cut to the kernel's 15 bytes of comm (what EXEC records
 * carry, so a name reads the same however it was learnt); a kernel thread
 * has no executable: its comm.
 */
static uint32_t plabel_proc_name_now(struct plabel_collect *c, uint32_t pid)
{
	char path[64], buf[PATH_MAX];
	const char *base;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%u/exe", pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		if (n > 10 && !strcmp(buf + n - 10, " (deleted)"))
			buf[n - 10] = '\0';
		base = strrchr(buf, '/');
		base = base ? base + 1 : buf;
		return plabel_name_id(c, base, 15);
	}
	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	if (!plabel_read_small(path, buf, sizeof(buf)))
		return 0;
	return plabel_name_id(c, buf, 15);
}

/* Thread tid's names, added if new. NULL on ENOMEM. */
static struct plabel_tnames *plabel_tn_get(struct plabel_collect *c,
					   uint32_t tid)
{
	size_t i = plabel_itab_u32(&c->tn_tab, &c->tns, &c->ntns,
				   &c->tns_cap, sizeof(*c->tns), tid, NULL);

	return i == SIZE_MAX ? NULL : &c->tns[i];
}

static int plabel_tn_rename(struct plabel_collect *c, uint32_t tid,
			    uint64_t t, const char *comm, size_t len)
{
	struct plabel_tnames *tn = plabel_tn_get(c, tid);
	uint32_t name = plabel_name_id(c, comm, len);

	if (!tn)
		return -ENOMEM;
	if (!name)
		return 0;
	if (plabel_grow(&tn->ev, &tn->cap, tn->nev, sizeof(*tn->ev)))
		return -ENOMEM;
	tn->ev[tn->nev].time_ns = t;
	tn->ev[tn->nev].reserved = 0;
	tn->ev[tn->nev++].name = name;
	tn->tried = 1;
	return 0;
}

/* Thread tid's name at time t; 0: not known. */
static uint32_t plabel_tn_at(struct plabel_collect *c, uint32_t tid,
			     uint64_t t)
{
	struct plabel_tnames *tn = plabel_tn_get(c, tid);
	uint64_t best_t = 0;
	uint32_t name;
	size_t i;

	if (!tn)
		return 0;
	name = tn->first;
	for (i = 0; i < tn->nev; i++)
		if (tn->ev[i].time_ns <= t && tn->ev[i].time_ns >= best_t) {
			best_t = tn->ev[i].time_ns;
			name = tn->ev[i].name;
		}
	/* renamed before its first sample was read: the oldest name known */
	if (!name && tn->nev)
		name = tn->ev[0].name;
	return name;
}

/* Process p's name at time t (after the latest exec before t). */
static uint32_t plabel_proc_name_at(const struct plabel_proc *p, uint64_t t)
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

/*
 * Names for a sample's process and thread, read from /proc when first
 * seen; a THREAD record names the new thread (and process) after its
 * creator. 0 or -ENOMEM.
 */
static int plabel_names_note(struct plabel_collect *c, struct plabel_proc *p,
			     const struct plabel_dec_rec *r)
{
	const struct plabel_rec_sample *h = &r->u.sample.hdr;
	struct plabel_tnames *tn;
	char path[64], buf[64];

	if (!(c->flags & PLABEL_COLLECT_NAME_LABELS))
		return 0;
	if (!p->name0_tried && !p->nexec && h->pid != c->skip_pid) {
		p->name0_tried = 1;
		p->name0 = plabel_proc_name_now(c, h->pid);
	}
	tn = plabel_tn_get(c, h->tid);
	if (!tn)
		return -ENOMEM;
	if (!tn->tried) {
		tn->tried = 1;
		snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", h->pid,
			 h->tid);
		if (plabel_read_small(path, buf, sizeof(buf)))
			tn->first = plabel_name_id(c, buf, 15);
	}
	if (r->type == PLABEL_REC_THREAD && h->child_tid) {
		uint32_t tname = plabel_tn_at(c, h->tid, h->time_ns);
		struct plabel_tnames *ct = plabel_tn_get(c, h->child_tid);

		size_t i, k = 0;

		if (!ct)
			return -ENOMEM;
		ct->first = tname;
		ct->tried = 1;
		/* a reused tid: the names of the thread it was before go */
		for (i = 0; i < ct->nev; i++)
			if (ct->ev[i].time_ns >= h->time_ns)
				ct->ev[k++] = ct->ev[i];
		ct->nev = k;
		if ((h->flags & PLABEL_THREAD_PROCESS) && h->child_pid &&
		    h->child_pid != h->pid) {
			uint32_t pname = plabel_proc_name_at(p, h->time_ns);
			struct plabel_proc *cp;

			cp = plabel_procs_get(&c->procs, h->child_pid);
			if (!cp)
				return -ENOMEM;
			if (!cp->name0_tried) {
				cp->name0 = pname;
				cp->name0_tried = 1;
			}
		}
	}
	return 0;
}

static int plabel_add_sample(struct plabel_collect *c,
			     const struct plabel_dec_rec *r)
{
	const struct plabel_rec_sample *h = &r->u.sample.hdr;
	struct plabel_csample *s;
	struct plabel_proc *p;
	uint32_t gen, chain;
	int defer = 0, ret;

	/* as the profile counts them: a late sample for each period */
	if (r->type == PLABEL_REC_SAMPLE)
		c->st.samples += PLABEL_SAMPLE_PERIODS(h->flags);
	else
		c->st.threads++;
	p = plabel_procs_get(&c->procs, h->pid);
	if (!p)
		return -ENOMEM;
	ret = plabel_names_note(c, p, r);
	if (ret)
		return ret;
	/* the child may have been added: p moved */
	p = plabel_procs_get(&c->procs, h->pid);
	if (!p)
		return -ENOMEM;
	if (r->u.sample.has_regs && !plabel_spool_broken(&c->spool))
		defer = 1;
	/*
	 * No mappings known for the image this sample ran in (yet): read
	 * them from /proc while the process is there, once per exec
	 * generation; after this buffer (see struct plabel_maps_want) unless
	 * the snapshot is unwound now.
	 */
	gen = plabel_proc_gen(p, h->time_ns);
	if (plabel_proc_view(p, gen))
		return -ENOMEM;
	/* (not for skip_pid before its exec: /proc soon shows what it runs) */
	if (!p->nview && p->tried_gen != gen + 1 &&
	    (gen || h->pid != c->skip_pid)) {
		if (r->u.sample.has_regs && !defer) {
			if (collect_read_maps(c, p, h->time_ns) ||
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
	ret = plabel_sample_chain(c, p, r, !defer, &chain);
	if (ret)
		return ret;
	if (plabel_grow(&c->samples, &c->samples_cap, c->nsamples,
			sizeof(*c->samples)))
		return -ENOMEM;
	/* last, as the sample is then certainly kept: spool and samples agree */
	if (defer && plabel_spool_add(&c->spool, r->u.sample.regs,
				      r->u.sample.stack,
				      r->u.sample.hdr.stack_size)) {
		defer = 0;
		ret = plabel_sample_chain(c, p, r, 1, &chain);
		if (ret)
			return ret;
	}
	s = &c->samples[c->nsamples++];
	s->type = r->type;
	s->pending = defer;
	s->pid = h->pid;
	s->tid = h->tid;
	s->chain = chain;
	s->time_ns = h->time_ns;
	s->set_id = h->set_id;
	s->periods = r->type == PLABEL_REC_SAMPLE ?
		     PLABEL_SAMPLE_PERIODS(h->flags) : 1;
	if (r->type == PLABEL_REC_THREAD) {
		s->weight = PLABEL_W_CHILD;
		s->value = h->child_tid;
	} else if (h->flags & PLABEL_SAMPLE_CPUTIME) {
		s->weight = PLABEL_W_CPU;
		s->value = h->cpu_ns;
	} else {
		s->weight = PLABEL_W_PERIOD;
		s->value = 0;
	}
	return 0;
}

/*
 * Unwind the snapshot of pending sample s, the next in the spool, against
 * the mappings of its process at its time (some may have been recorded
 * after it), and give it the unwound chain unless its own is longer.
 */
static int plabel_unwind_pending(struct plabel_collect *c,
				 struct plabel_csample *s)
{
	const struct plabel_chain *ch = plabel_chain_at(&c->chains, s->chain);
	const struct plabel_snapshot *snap;
	struct plabel_proc *p;
	int nunw, ret;

	s->pending = 0;	/* its spool entry is consumed, come what may */
	ret = plabel_spool_next(&c->spool, &snap);
	if (ret)
		return ret;
	p = plabel_procs_get(&c->procs, s->pid);
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
	if (nunw <= 0 || (size_t)nunw < ch->nu)
		return 0;
	return plabel_chain_join(&c->chains, ch->ips, ch->nk, c->ipbuf, nunw,
				 &s->chain);
}

/* Unwind every pending sample, in arrival order: the spool's order. */
static int plabel_unwind_all_pending(struct plabel_collect *c)
{
	size_t i;
	int ret;

	for (i = 0; i < c->nsamples; i++) {
		if (!c->samples[i].pending)
			continue;
		ret = plabel_unwind_pending(c, &c->samples[i]);
		if (ret)
			return ret;
	}
	plabel_spool_rewind(&c->spool);
	return 0;
}

/* ---- merging settled samples ---- */

static uint64_t plabel_agg_hash(const struct plabel_agg *a)
{
	return plabel_hash2((uint64_t)a->pid << 32 | a->tid,
			    plabel_hash2((uint64_t)a->chain << 32 | a->gen,
					 a->set_id + a->type +
					 ((uint64_t)a->pname << 40 ^
					  (uint64_t)a->tname << 8)));
}

/* Add count samples like k (its count aside), k->nanos with them. */
static int plabel_agg_add(struct plabel_collect *c, const struct plabel_agg *k,
			  uint64_t count)
{
	uint64_t h = plabel_agg_hash(k);
	struct plabel_agg *a;
	size_t i, pos = SIZE_MAX;

	while ((i = plabel_itab_next(&c->agg_tab, h, &pos)) != SIZE_MAX) {
		a = &c->aggs[i];
		if (a->pid == k->pid && a->tid == k->tid &&
		    a->chain == k->chain && a->gen == k->gen &&
		    a->set_id == k->set_id && a->type == k->type &&
		    a->pname == k->pname && a->tname == k->tname) {
			a->count += count;
			a->nanos += k->nanos;
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
	plabel_itab_put(&c->agg_tab, h, c->naggs++);
	return 0;
}

/*
 * What building takes of sample s, in *a. 0 when s is left out (what
 * skip_pid ran before its exec); -1 when that is not known yet (no exec of
 * skip_pid seen), *a then being the sample as it is if none comes.
 */
static int plabel_sample_key(struct plabel_collect *c,
			     const struct plabel_csample *s,
			     struct plabel_agg *a)
{
	struct plabel_proc *p = plabel_procs_get(&c->procs, s->pid);
	int ret = 1;

	memset(a, 0, sizeof(*a));
	a->gen = p ? plabel_proc_gen(p, s->time_ns) : 0;
	if (s->pid && s->pid == c->skip_pid && p && !a->gen) {
		if (p->nexec)
			return 0;
		ret = -1;
	}
	a->pid = s->pid;
	a->tid = c->flags & PLABEL_COLLECT_PID_LABELS ? s->tid : 0;
	a->chain = s->chain;
	a->set_id = s->set_id;
	a->type = s->type;
	a->count = s->periods;
	a->nanos = s->type == PLABEL_REC_SAMPLE ? s->value : 0;
	if ((c->flags & PLABEL_COLLECT_NAME_LABELS) && p) {
		a->pname = plabel_proc_name_at(p, s->time_ns);
		a->tname = plabel_tn_at(c, s->tid, s->time_ns);
	}
	return ret;
}

/*
 * Merge the samples stamped before c->settled, whose generation can no
 * longer change; keep the others (later ones, snapshots still to unwind)
 * in arrival order. A failure leaves the samples not merged yet as they
 * were. 0 or -ENOMEM.
 */
static int plabel_fold(struct plabel_collect *c)
{
	struct plabel_agg a;
	size_t i, k = 0;
	int ret = plabel_weigh(&c->weigher, c->samples, c->nsamples,
			       c->period_ns, c->settled);

	for (i = 0; i < c->nsamples; i++) {
		const struct plabel_csample *s = &c->samples[i];

		if (!ret && !s->pending && s->time_ns < c->settled) {
			int kind = plabel_sample_key(c, s, &a);

			if (!kind)
				continue;
			if (kind > 0) {
				ret = plabel_agg_add(c, &a, 1);
				if (!ret)
					continue;
			}
		}
		c->samples[k++] = *s;
	}
	c->nsamples = k;
	c->fold_at = k + PLABEL_FOLD_BATCH;
	return ret;
}

int plabel_collect_settled(struct plabel_collect *c, uint64_t time_ns)
{
	if (time_ns > c->settled)
		c->settled = time_ns;
	return c->nsamples >= c->fold_at ? plabel_fold(c) : 0;
}

/* Feed one decoded record. 0 or -ENOMEM. */
static int plabel_collect_record(struct plabel_collect *c,
				 const struct plabel_dec_rec *r)
{
	struct plabel_proc *p;
	size_t cap, i, n;

	switch (r->type) {
	case PLABEL_REC_STREAM:
		c->st.version = r->u.stream.version;
		plabel_collect_set_period(c, r->u.stream.period_ns);
		return 0;
	case PLABEL_REC_LABELSET:
		return plabel_lsets_add(&c->lsets, r->u.labelset.id,
					r->u.labelset.labels,
					r->u.labelset.count);
	case PLABEL_REC_SAMPLE:
	case PLABEL_REC_THREAD:
		return plabel_add_sample(c, r);
	case PLABEL_REC_LOST:
		switch (r->u.lost.kind) {
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
		p = plabel_procs_get(&c->procs, r->u.exec.pid);
		if (!p)
			return -ENOMEM;
		cap = p->exec_cap;
		if (plabel_grow(&p->exec_times, &cap, p->nexec,
				sizeof(*p->exec_times)))
			return -ENOMEM;
		cap = p->exec_cap;
		if (plabel_grow(&p->exec_names, &cap, p->nexec,
				sizeof(*p->exec_names)))
			return -ENOMEM;
		p->exec_cap = cap;
		p->exec_names[p->nexec] = plabel_name_id(c, r->u.exec.comm,
							 sizeof(r->u.exec.comm));
		p->exec_times[p->nexec++] = r->u.exec.time_ns;
		if ((c->flags & PLABEL_COLLECT_NAME_LABELS) &&
		    plabel_tn_rename(c, r->u.exec.tid, r->u.exec.time_ns,
				     r->u.exec.comm, sizeof(r->u.exec.comm)))
			return -ENOMEM;
		/* merged samples may then sit in the wrong generation */
		if (r->u.exec.time_ns < c->settled)
			c->st.late++;
		p->view_ok = 0;	/* generations after it move up */
		/*
		 * The kernel's mappings stamped after the exec belong to the
		 * image it started, also when they came first (from another
		 * CPU's ring); those from /proc keep the generation they
		 * were read for. A mapping reported both before and after
		 * it (the same file at the same place) is one of each image.
		 */
		n = p->nmaps;
		for (i = 0; i < n; i++)
			if (!p->map_fallback[i])
				p->map_gen[i] = plabel_proc_gen(p,
							p->maps[i].time_ns);
		for (i = 0; i < n; i++) {
			struct plabel_map m = p->maps[i];
			uint64_t last = p->map_last[i];
			int ret;

			if (p->map_fallback[i] ||
			    plabel_proc_gen(p, last) == p->map_gen[i])
				continue;
			ret = plabel_proc_add_map(c->syms, p, m.start, m.end,
						  m.offset, last, m.path,
						  strlen(m.path), 0);
			if (ret)
				return ret;
		}
		return 0;
	case PLABEL_REC_COMM:
		if (!(c->flags & PLABEL_COLLECT_NAME_LABELS))
			return 0;
		return plabel_tn_rename(c, r->u.comm.tid, r->u.comm.time_ns,
					r->u.comm.comm, sizeof(r->u.comm.comm));
	default:
		return 0;	/* unknown types are skipped */
	}
}

/* /proc/PID/maps of the processes still without mappings. 0 or -ENOMEM. */
static int plabel_maps_wanted(struct plabel_collect *c)
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
			ret = collect_read_maps(c, p, c->want[i].time_ns);
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
		ret = plabel_collect_record(c, c->rec);
		if (ret)
			break;
	}
	plabel_spool_sync(&c->spool);	/* buf is the caller's */
	if (plabel_maps_wanted(c) == -ENOMEM)
		ret = -ENOMEM;
	if (ret == -EBADMSG)
		c->st.bad++;
	return ret;
}

/* ---- building the profiles ---- */

struct plabel_build {
	struct plabel_collect *c;
	struct plabel_prof *prof;
	/* (mapping id, or the kernel's, and address) -> location id */
	struct plabel_pair_map lc;
	/* (generation << 32 | chain, pid) -> 1 + offset of its entry in res */
	struct plabel_pair_map rc;
	/* resolved chains: nlocs, nmids, location ids, user mapping ids */
	uint64_t *res;
	size_t nres, res_cap;
	uint64_t kmap;		/* kernel mapping id */
	uint64_t *uses;		/* frames per user mapping id */
	size_t nuses;
	/* (label set id, process name << 32 | thread name) -> profile set */
	struct plabel_pair_map ns;
	/* by label set index: its set in the profile, 0 until it has one */
	uint32_t *lset_ids;
	/*
	 * By process index, then mapping index: its mapping id in the
	 * profile, 0 until it has one (NULL: none yet for that process).
	 */
	uint64_t **map_ids;
	size_t nmap_ids;
};

/* Count k frames in user mapping mid, for plabel_main_mapping(). */
static void plabel_count_use(struct plabel_build *b, uint64_t mid, uint64_t k)
{
	if (mid >= b->nuses) {
		size_t n = b->nuses ? b->nuses : 16;
		uint64_t *u;

		while (n <= mid)
			n *= 2;
		u = realloc(b->uses, n * sizeof(*u));
		if (!u)
			return;	/* only a hint for which file is main */
		memset(u + b->nuses, 0, (n - b->nuses) * sizeof(*u));
		b->uses = u;
		b->nuses = n;
	}
	b->uses[mid] += k;
}

/*
 * The main binary: the user mapping with the most frames that is not a
 * shared library, else the one with the most frames.
 */
static void plabel_main_mapping(struct plabel_build *b)
{
	uint64_t best = 0, best_exe = 0;
	size_t i, n = plabel_prof_num_mappings(b->prof);

	for (i = 0; i < n; i++) {
		struct plabel_prof_mapping_info mi;
		const char *base;

		plabel_prof_get_mapping(b->prof, i, &mi);
		if (mi.id >= b->nuses || !b->uses[mi.id])
			continue;
		if (!best || b->uses[mi.id] > b->uses[best])
			best = mi.id;
		base = strrchr(mi.file, '/');
		base = base ? base + 1 : mi.file;
		if (strstr(base, ".so") || base[0] == '[')
			continue;
		if (!best_exe || b->uses[mi.id] > b->uses[best_exe])
			best_exe = mi.id;
	}
	if (best_exe || best)
		plabel_prof_set_main_mapping(b->prof, best_exe ? best_exe : best);
}

static uint64_t plabel_kernel_loc(struct plabel_build *b, uint64_t ip)
{
	struct plabel_prof_line line = { 0 };
	uint64_t *slot;

	if (!b->kmap) {
		b->kmap = plabel_prof_mapping(b->prof, PLABEL_KERNEL_START,
					      UINT64_MAX, 0,
					      "[kernel.kallsyms]", NULL);
		if (!b->kmap)
			return 0;
	}
	slot = plabel_pair_slot(&b->lc, b->kmap, ip);
	if (!slot)
		return 0;
	if (*slot)
		return *slot;
	line.function = plabel_syms_kernel(b->c->syms, ip);
	*slot = plabel_prof_location(b->prof, b->kmap, ip, &line,
				     line.function ? 1 : 0);
	return *slot;
}

/*
 * The profile's id of mapping view[k] of p. Looked up once per mapping
 * and profile: interning and hashing its path for every frame was the
 * largest cost of building.
 */
static uint64_t plabel_view_mid(struct plabel_build *b, struct plabel_proc *p,
				size_t k)
{
	size_t pi = plabel_procs_index(&b->c->procs, p);
	const struct plabel_map *m = &p->view[k];
	uint64_t *mid;

	if (pi >= b->nmap_ids) {
		size_t n = b->nmap_ids;

		if (plabel_grow_to(&b->map_ids, &n, b->c->procs.n,
				   sizeof(*b->map_ids)))
			return 0;
		memset(b->map_ids + b->nmap_ids, 0,
		       (n - b->nmap_ids) * sizeof(*b->map_ids));
		b->nmap_ids = n;
	}
	if (!b->map_ids[pi]) {
		b->map_ids[pi] = calloc(p->nmaps, sizeof(**b->map_ids));
		if (!b->map_ids[pi])
			return 0;
	}
	mid = &b->map_ids[pi][p->view_idx[k]];
	if (!*mid)
		*mid = plabel_prof_mapping(b->prof, m->start, m->end,
					   m->offset, m->path, m->elf ?
					   plabel_elf_build_id(m->elf) : NULL);
	return *mid;
}

/*
 * The location of user address ip of p (leaf: not a return address), and
 * in *mid its mapping's id (0: none).
 */
static uint64_t plabel_user_loc(struct plabel_build *b, struct plabel_proc *p,
				uint64_t ip, int leaf, uint64_t *mid)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	struct plabel_prof_line lines[PLABEL_SYM_MAX_FRAMES];
	const struct plabel_map *m = plabel_maps_find(p->view, p->nview, ip);
	uint64_t bias, *slot;
	int n = 0, i;

	*mid = 0;
	if (m) {
		*mid = plabel_view_mid(b, p, m - p->view);
		if (!*mid)
			return 0;
	}
	slot = plabel_pair_slot(&b->lc, *mid, ip);
	if (!slot)
		return 0;
	if (*slot)
		return *slot;
	/* a return address points after the call: look up the call */
	if (m && m->elf && !plabel_elf_bias(m->elf, m->start, m->offset, &bias)) {
		uint64_t va = ip - bias - (leaf ? 0 : 1);

		/* stubs have no symbol, or a wrong neighbour's */
		fr[0].function = plabel_elf_plt(m->elf, va);
		fr[0].file = NULL;
		fr[0].line = 0;
		n = fr[0].function ? 1 :
		    plabel_elf_symbolize(m->elf, va, fr,
					 PLABEL_SYM_MAX_FRAMES);
	}
	for (i = 0; i < n; i++) {
		lines[i].function = fr[i].function;
		lines[i].file = fr[i].file;
		lines[i].line = fr[i].line;
	}
	*slot = plabel_prof_location(b->prof, *mid, ip, lines, n);
	return *slot;
}

/*
 * plabel_build_add() for a sample with process or thread names: the label
 * set with "process" and "thread" added (unless the program set those keys
 * itself: its own win), interned once per combination.
 */
static int plabel_build_add_named(struct plabel_build *b,
				  const struct plabel_agg *a,
				  const struct plabel_lset *ls,
				  const uint64_t *locs, size_t nlocs)
{
	struct plabel_collect *c = b->c;
	int pids = c->flags & PLABEL_COLLECT_PID_LABELS;
	struct plabel_prof_label labels[PLABEL_MAX_LABELS + 2];
	uint32_t n = 0, i, set;
	uint64_t *slot;
	int ret, hasp = 0, hast = 0;

	slot = plabel_pair_slot(&b->ns, ls ? ls->id : 0,
				(uint64_t)a->pname << 32 | a->tname);
	if (!slot)
		return -ENOMEM;
	if (!*slot) {
		for (i = 0; ls && i < ls->count && n < PLABEL_MAX_LABELS; i++) {
			labels[n++] = ls->labels[i];
			hasp |= !strcmp(ls->labels[i].key, "process");
			hast |= !strcmp(ls->labels[i].key, "thread");
		}
		if (a->pname && !hasp) {
			labels[n].key = "process";
			labels[n++].value = c->names[a->pname - 1];
		}
		if (a->tname && !hast) {
			labels[n].key = "thread";
			labels[n++].value = c->names[a->tname - 1];
		}
		ret = plabel_prof_labelset(b->prof, labels, n, &set);
		if (ret)
			return ret;
		*slot = set;
	}
	return plabel_prof_sample_labelset(b->prof, locs, nlocs,
					   (uint32_t)*slot,
					   pids ? (int64_t)a->pid : -1,
					   pids ? (int64_t)a->tid : -1,
					   (int64_t)a->count,
					   (int64_t)a->nanos);
}

/*
 * Add the a->count samples a, at locations locs, to the profile: with
 * their label set, whose labels the profile checks and interns once, not
 * for every sample.
 */
static int plabel_build_add(struct plabel_build *b,
			    const struct plabel_agg *a,
			    const uint64_t *locs, size_t nlocs)
{
	struct plabel_collect *c = b->c;
	int pids = c->flags & PLABEL_COLLECT_PID_LABELS;
	int64_t pid = pids ? (int64_t)a->pid : -1;
	int64_t tid = pids ? (int64_t)a->tid : -1;
	int64_t n = (int64_t)a->count;
	int64_t nanos = (int64_t)a->nanos;
	struct plabel_prof_label unres;
	const struct plabel_lset *ls = NULL;
	uint32_t *set = NULL;
	char idbuf[32];
	int ret;

	if (a->set_id) {
		ls = plabel_lsets_find(&c->lsets, a->set_id);
		if (!ls) {
			/* never drop it silently: name the missing set */
			snprintf(idbuf, sizeof(idbuf), "%" PRIu64, a->set_id);
			unres.key = "plabel_unresolved_set";
			unres.value = idbuf;
			c->st.unresolved += a->count;
			return plabel_prof_sample(b->prof, locs, nlocs, &unres,
						  1, pid, tid, n, nanos);
		}
	}
	if (a->pname || a->tname)
		return plabel_build_add_named(b, a, ls, locs, nlocs);
	if (ls) {
		set = &b->lset_ids[plabel_lsets_index(&c->lsets, ls)];
		if (!*set) {
			ret = plabel_prof_labelset(b->prof, ls->labels,
						   ls->count, set);
			if (ret)
				return ret;
		}
	}
	return plabel_prof_sample_labelset(b->prof, locs, nlocs,
					   set ? *set : 0, pid, tid, n, nanos);
}

/* Room for n more words in b->res. 0 or -ENOMEM. */
static int plabel_res_reserve(struct plabel_build *b, size_t n)
{
	return plabel_grow_to(&b->res, &b->res_cap, b->nres + n,
			      sizeof(*b->res));
}

/*
 * Resolve the chain of a in p's generation a->gen: append to b->res the
 * location ids, then the mapping ids of the user frames that have one,
 * and set *slot to 1 + the entry's offset. What each address resolves to
 * does not depend on the sample, so samples of one chain share this.
 */
static int plabel_resolve(struct plabel_build *b, struct plabel_proc *p,
			  const struct plabel_agg *a, uint64_t *slot)
{
	const struct plabel_chain *ch = plabel_chain_at(&b->c->chains,
							 a->chain);
	size_t n = (size_t)ch->nk + ch->nu, nlocs = 0, nmids = 0, max, i;
	int cpu = a->type == PLABEL_REC_SAMPLE;
	uint64_t *e, *mids;

	max = n < PLABEL_MAX_FRAMES ? n : PLABEL_MAX_FRAMES;
	if (plabel_proc_view(p, a->gen) ||
	    plabel_res_reserve(b, 2 + 2 * max))
		return -ENOMEM;
	e = b->res + b->nres;
	mids = e + 2 + max;	/* moved down behind the locations at the end */
	for (i = 0; i < n && nlocs < PLABEL_MAX_FRAMES; i++) {
		uint64_t ip = ch->ips[i], id, mid = 0;

		if (!ip)
			continue;
		if (i < ch->nk || ip >= PLABEL_KERNEL_START)
			id = plabel_kernel_loc(b, ip);
		else
			id = plabel_user_loc(b, p, ip, i == 0 ||
					     (i == ch->nk && cpu && !ch->nk),
					     &mid);
		if (!id)
			return -ENOMEM;
		e[2 + nlocs++] = id;
		if (mid)
			mids[nmids++] = mid;
	}
	e[0] = nlocs;
	e[1] = nmids;
	memmove(e + 2 + nlocs, mids, nmids * sizeof(*mids));
	*slot = b->nres + 1;
	b->nres += 2 + nlocs + nmids;
	return 0;
}

static int plabel_build_sample(struct plabel_build *b,
			       const struct plabel_agg *a)
{
	struct plabel_proc *p = plabel_procs_get(&b->c->procs, a->pid);
	const uint64_t *e;
	uint64_t *slot;
	size_t i;
	int ret;

	if (!p)
		return -ENOMEM;
	slot = plabel_pair_slot(&b->rc, (uint64_t)a->gen << 32 | a->chain,
				a->pid);
	if (!slot)
		return -ENOMEM;
	if (!*slot) {
		ret = plabel_resolve(b, p, a, slot);
		if (ret)
			return ret;
	}
	e = b->res + *slot - 1;
	for (i = 0; i < e[1]; i++)
		plabel_count_use(b, e[2 + e[0] + i], a->count);
	return plabel_build_add(b, a, e + 2, e[0]);
}

/* A profile comment "what: n". 0 or -ENOMEM. */
static int plabel_count_comment(struct plabel_prof *prof, const char *what,
				uint64_t n)
{
	char comment[96];

	snprintf(comment, sizeof(comment), "%s: %" PRIu64, what, n);
	return plabel_prof_add_comment(prof, comment) ? -ENOMEM : 0;
}

static int plabel_build_one(struct plabel_collect *c, uint32_t type,
			    struct plabel_prof *prof)
{
	struct plabel_build b = { .c = c, .prof = prof };
	size_t i;
	int ret = 0;

	b.lset_ids = calloc(plabel_lsets_count(&c->lsets) + 1,
			    sizeof(*b.lset_ids));
	if (!b.lset_ids)
		return -ENOMEM;
	/* the merged samples, then the others (in arrival order) */
	for (i = 0; i < c->naggs && !ret; i++)
		if (c->aggs[i].type == type)
			ret = plabel_build_sample(&b, &c->aggs[i]);
	for (i = 0; i < c->nsamples && !ret; i++) {
		struct plabel_agg a;

		if (c->samples[i].type == type &&
		    plabel_sample_key(c, &c->samples[i], &a))
			ret = plabel_build_sample(&b, &a);
	}
	plabel_pair_map_free(&b.lc);
	plabel_pair_map_free(&b.rc);
	plabel_pair_map_free(&b.ns);
	free(b.lset_ids);
	for (i = 0; i < b.nmap_ids; i++)
		free(b.map_ids[i]);
	free(b.map_ids);
	free(b.res);
	if (!ret)
		plabel_main_mapping(&b);
	free(b.uses);
	if (ret)
		return ret;
	ret = plabel_count_comment(prof, "lost records", c->st.lost);
	if (!ret && c->st.lost_periods)
		ret = plabel_count_comment(prof,
					   "sampling periods of the lost samples",
					   c->st.lost_periods);
	if (!ret && c->st.lost_maps)
		ret = plabel_count_comment(prof,
					   "executable mappings the kernel did not report",
					   c->st.lost_maps);
	if (!ret && c->st.lost_procs)
		ret = plabel_count_comment(prof,
					   "processes the kernel could not follow",
					   c->st.lost_procs);
	if (!ret && c->st.unresolved)
		ret = plabel_count_comment(prof,
					   "samples with an unresolved label set",
					   c->st.unresolved);
	if (!ret && c->st.late)
		ret = plabel_count_comment(prof,
					   "exec records after their time was settled",
					   c->st.late);
	if (!ret && c->st.proc_maps)
		ret = plabel_count_comment(prof,
					   "process images mapped from /proc, not the kernel's records",
					   c->st.proc_maps);
	return ret;
}

int plabel_collect_finish(struct plabel_collect *c, int64_t time_nanos,
			  int64_t duration_nanos,
			  struct plabel_prof *profs[PLABEL_PROF_NKINDS])
{
	struct plabel_prof *built[PLABEL_PROF_NKINDS] = { NULL };
	size_t k;
	int ret;

	ret = plabel_unwind_all_pending(c);
	if (!ret)
		ret = plabel_weigh(&c->weigher, c->samples, c->nsamples,
				   c->period_ns, UINT64_MAX);
	if (ret)
		return ret;
	plabel_lsets_sort(&c->lsets);
	c->st.unresolved = 0;

	for (k = 0; k < PLABEL_PROF_NKINDS; k++) {
		built[k] = plabel_prof_new(k, c->period_ns);
		if (!built[k]) {
			ret = -ENOMEM;
			goto err_free;
		}
		plabel_prof_set_time(built[k], time_nanos, duration_nanos);
		ret = plabel_build_one(c, plabel_kinds[k].rec_type, built[k]);
		if (ret)
			goto err_free;
	}
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		profs[k] = built[k];
	return 0;

err_free:
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		plabel_prof_free(built[k]);
	return ret;
}
