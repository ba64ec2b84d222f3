// SPDX-License-Identifier: GPL-2.0
/*
 * Merged samples into a profile (see resolve.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resolve.h"

struct plabel_resolver {
	struct plabel_resolve_src src;
	struct plabel_prof *prof;
	uint64_t unresolved;
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

struct plabel_resolver *
plabel_resolver_new(const struct plabel_resolve_src *src,
		    struct plabel_prof *prof)
{
	struct plabel_resolver *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->src = *src;
	r->prof = prof;
	r->lset_ids = calloc(plabel_lsets_count(src->lsets) + 1,
			     sizeof(*r->lset_ids));
	if (!r->lset_ids) {
		free(r);
		return NULL;
	}
	return r;
}

void plabel_resolver_free(struct plabel_resolver *r)
{
	size_t i;

	if (!r)
		return;
	plabel_pair_map_free(&r->lc);
	plabel_pair_map_free(&r->rc);
	plabel_pair_map_free(&r->ns);
	free(r->lset_ids);
	for (i = 0; i < r->nmap_ids; i++)
		free(r->map_ids[i]);
	free(r->map_ids);
	free(r->res);
	free(r->uses);
	free(r);
}

uint64_t plabel_resolver_unresolved(const struct plabel_resolver *r)
{
	return r->unresolved;
}

/* Count k frames in user mapping mid, for plabel_resolver_set_main(). */
static void count_use(struct plabel_resolver *r, uint64_t mid, uint64_t k)
{
	if (mid >= r->nuses) {
		size_t n = r->nuses ? r->nuses : 16;
		uint64_t *u;

		while (n <= mid)
			n *= 2;
		u = realloc(r->uses, n * sizeof(*u));
		if (!u)
			return;	/* only a hint for which file is main */
		memset(u + r->nuses, 0, (n - r->nuses) * sizeof(*u));
		r->uses = u;
		r->nuses = n;
	}
	r->uses[mid] += k;
}

void plabel_resolver_set_main(struct plabel_resolver *r)
{
	uint64_t best = 0, best_exe = 0;
	size_t i, n = plabel_prof_num_mappings(r->prof);

	for (i = 0; i < n; i++) {
		struct plabel_prof_mapping_info mi;
		const char *base;

		plabel_prof_get_mapping(r->prof, i, &mi);
		if (mi.id >= r->nuses || !r->uses[mi.id])
			continue;
		if (!best || r->uses[mi.id] > r->uses[best])
			best = mi.id;
		base = strrchr(mi.file, '/');
		base = base ? base + 1 : mi.file;
		if (strstr(base, ".so") || base[0] == '[')
			continue;
		if (!best_exe || r->uses[mi.id] > r->uses[best_exe])
			best_exe = mi.id;
	}
	if (best_exe || best)
		plabel_prof_set_main_mapping(r->prof,
					     best_exe ? best_exe : best);
}

static uint64_t kernel_loc(struct plabel_resolver *r, uint64_t ip)
{
	struct plabel_prof_line line = { 0 };
	uint64_t *slot;

	if (!r->kmap) {
		r->kmap = plabel_prof_mapping(r->prof, PLABEL_KERNEL_START,
					      UINT64_MAX, 0,
					      "[kernel.kallsyms]", NULL);
		if (!r->kmap)
			return 0;
	}
	slot = plabel_pair_slot(&r->lc, r->kmap, ip);
	if (!slot)
		return 0;
	if (*slot)
		return *slot;
	line.function = plabel_syms_kernel(r->src.syms, ip);
	*slot = plabel_prof_location(r->prof, r->kmap, ip, &line,
				     line.function ? 1 : 0);
	return *slot;
}

/*
 * The profile's id of mapping view[k] of p. Looked up once per mapping
 * and profile: interning and hashing its path for every frame was the
 * largest cost of building.
 */
static uint64_t view_mid(struct plabel_resolver *r, struct plabel_proc *p,
			 size_t k)
{
	size_t pi = plabel_procs_index(r->src.procs, p);
	const struct plabel_map *m = &p->view[k];
	uint64_t *mid;

	if (pi >= r->nmap_ids) {
		size_t n = r->nmap_ids;

		if (plabel_grow_to(&r->map_ids, &n, r->src.procs->n,
				   sizeof(*r->map_ids)))
			return 0;
		memset(r->map_ids + r->nmap_ids, 0,
		       (n - r->nmap_ids) * sizeof(*r->map_ids));
		r->nmap_ids = n;
	}
	if (!r->map_ids[pi]) {
		r->map_ids[pi] = calloc(p->nmaps, sizeof(**r->map_ids));
		if (!r->map_ids[pi])
			return 0;
	}
	mid = &r->map_ids[pi][p->view_idx[k]];
	if (!*mid)
		*mid = plabel_prof_mapping(r->prof, m->start, m->end,
					   m->offset, m->path, m->elf ?
					   plabel_elf_build_id(m->elf) : NULL);
	return *mid;
}

/*
 * The location of user address ip of p (leaf: not a return address), and
 * in *mid its mapping's id (0: none).
 */
static uint64_t user_loc(struct plabel_resolver *r, struct plabel_proc *p,
			 uint64_t ip, int leaf, uint64_t *mid)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	struct plabel_prof_line lines[PLABEL_SYM_MAX_FRAMES];
	const struct plabel_map *m = plabel_maps_find(p->view, p->nview, ip);
	uint64_t bias, *slot;
	int n = 0, i;

	*mid = 0;
	if (m) {
		*mid = view_mid(r, p, m - p->view);
		if (!*mid)
			return 0;
	}
	slot = plabel_pair_slot(&r->lc, *mid, ip);
	if (!slot)
		return 0;
	if (*slot)
		return *slot;
	/* a return address points after the call: look up the call */
	if (m && m->elf &&
	    !plabel_elf_bias(m->elf, m->start, m->offset, &bias)) {
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
	*slot = plabel_prof_location(r->prof, *mid, ip, lines, n);
	return *slot;
}

/* The "state" label's values, by enum plabel_thread_state. */
static const char *const state_names[] = {
	[PLABEL_THREAD_RUNNING] = "running",
	[PLABEL_THREAD_SLEEPING] = "sleeping",
	[PLABEL_THREAD_DISK] = "disk",
	[PLABEL_THREAD_STOPPED] = "stopped",
	[PLABEL_THREAD_TRACED] = "traced",
	[PLABEL_THREAD_DEAD] = "dead",
	[PLABEL_THREAD_ZOMBIE] = "zombie",
	[PLABEL_THREAD_PARKED] = "parked",
	[PLABEL_THREAD_IDLE] = "idle",
};

static const char *state_name(uint32_t state)
{
	return state && state - 1 < sizeof(state_names) /
				    sizeof(state_names[0]) ?
	       state_names[state - 1] : "running";
}

/* wait: 1 + enum plabel_wait_kind, 0: none */
static const char *wait_name(uint32_t wait)
{
	return plabel_wait_name(wait ? wait - 1 : PLABEL_WAIT_OTHER);
}

/*
 * add_sample() for a sample with process or thread names, a wait kind or
 * a thread state: the label set with "process", "thread", "wait" and
 * "state" added (unless the
 * program set those keys itself: its own win), interned once per
 * combination.
 */
static int add_named(struct plabel_resolver *r, const struct plabel_agg *a,
		     const struct plabel_lset *ls, const uint64_t *locs,
		     size_t nlocs)
{
	int pids = r->src.pid_labels;
	struct plabel_prof_label labels[PLABEL_MAX_LABELS + 4];
	uint32_t n = 0, i, set;
	uint64_t *slot;
	int ret, hasp = 0, hast = 0, hasw = 0, hass = 0;
	const int64_t vals[PLABEL_KIND_MAX_VALUES] = {
		(int64_t)a->count, (int64_t)a->nanos,
		(int64_t)a->inuse_count, (int64_t)a->inuse_bytes,
	};

	/* (set ids are far below 2^56; waits below 16, states too) */
	slot = plabel_pair_slot(&r->ns,
				(ls ? ls->id : 0) ^ (uint64_t)a->wait << 56 ^
				(uint64_t)a->state << 60,
				(uint64_t)a->pname << 32 | a->tname);
	if (!slot)
		return -ENOMEM;
	if (!*slot) {
		for (i = 0; ls && i < ls->count && n < PLABEL_MAX_LABELS; i++) {
			labels[n++] = ls->labels[i];
			hasp |= !strcmp(ls->labels[i].key, "process");
			hast |= !strcmp(ls->labels[i].key, "thread");
			hasw |= !strcmp(ls->labels[i].key, "wait");
			hass |= !strcmp(ls->labels[i].key, "state");
		}
		if (a->pname && !hasp) {
			labels[n].key = "process";
			labels[n++].value = plabel_names_str(r->src.names,
							     a->pname);
		}
		if (a->tname && !hast) {
			labels[n].key = "thread";
			labels[n++].value = plabel_names_str(r->src.names,
							     a->tname);
		}
		if (a->wait && !hasw) {
			labels[n].key = "wait";
			labels[n++].value = wait_name(a->wait);
		}
		if (a->state && !hass) {
			labels[n].key = "state";
			labels[n++].value = state_name(a->state);
		}
		ret = plabel_prof_labelset(r->prof, labels, n, &set);
		if (ret)
			return ret;
		*slot = set;
	}
	return plabel_prof_sample_labelset_values(r->prof, locs, nlocs,
						  (uint32_t)*slot,
						  pids ? (int64_t)a->pid : -1,
						  pids ? (int64_t)a->tid : -1,
						  vals);
}

/*
 * Add the a->count samples a, at locations locs, to the profile: with
 * their label set, whose labels the profile checks and interns once, not
 * for every sample.
 */
static int add_sample(struct plabel_resolver *r, const struct plabel_agg *a,
		      const uint64_t *locs, size_t nlocs)
{
	int pids = r->src.pid_labels;
	int64_t pid = pids ? (int64_t)a->pid : -1;
	int64_t tid = pids ? (int64_t)a->tid : -1;
	const int64_t vals[PLABEL_KIND_MAX_VALUES] = {
		(int64_t)a->count, (int64_t)a->nanos,
		(int64_t)a->inuse_count, (int64_t)a->inuse_bytes,
	};
	struct plabel_prof_label unres;
	const struct plabel_lset *ls = NULL;
	uint32_t *set = NULL;
	char idbuf[32];
	int ret;

	if (a->set_id) {
		ls = plabel_lsets_find(r->src.lsets, a->set_id);
		if (!ls) {
			/* never drop it silently: name the missing set */
			snprintf(idbuf, sizeof(idbuf), "%" PRIu64, a->set_id);
			unres.key = "plabel_unresolved_set";
			unres.value = idbuf;
			r->unresolved += a->count;
			return plabel_prof_sample_values(r->prof, locs, nlocs,
							 &unres, 1, pid, tid,
							 vals);
		}
	}
	if (a->pname || a->tname || a->wait || a->state)
		return add_named(r, a, ls, locs, nlocs);
	if (ls) {
		set = &r->lset_ids[plabel_lsets_index(r->src.lsets, ls)];
		if (!*set) {
			ret = plabel_prof_labelset(r->prof, ls->labels,
						   ls->count, set);
			if (ret)
				return ret;
		}
	}
	return plabel_prof_sample_labelset_values(r->prof, locs, nlocs,
						  set ? *set : 0, pid, tid,
						  vals);
}

/*
 * Resolve the chain of a in p's generation a->gen: append to r->res the
 * location ids, then the mapping ids of the user frames that have one,
 * and set *slot to 1 + the entry's offset. What each address resolves to
 * does not depend on the sample, so samples of one chain share this.
 */
static int resolve_chain(struct plabel_resolver *r, struct plabel_proc *p,
			 const struct plabel_agg *a, uint64_t *slot)
{
	const struct plabel_chain *ch = plabel_chain_at(r->src.chains,
							 a->chain);
	size_t n = (size_t)ch->nk + ch->nu, nlocs = 0, nmids = 0, max, i;
	/* where it was: interrupted, or entered the kernel to wait */
	int cpu = a->type == PLABEL_REC_SAMPLE || a->type == PLABEL_REC_OFFCPU ||
		  a->type == PLABEL_REC_THREADSTATE;
	uint64_t *e, *mids;

	max = n < PLABEL_MAX_FRAMES ? n : PLABEL_MAX_FRAMES;
	if (plabel_proc_view(p, a->gen) ||
	    plabel_grow_to(&r->res, &r->res_cap, r->nres + 2 + 2 * max,
			   sizeof(*r->res)))
		return -ENOMEM;
	e = r->res + r->nres;
	mids = e + 2 + max;	/* moved down behind the locations at the end */
	for (i = 0; i < n && nlocs < PLABEL_MAX_FRAMES; i++) {
		uint64_t ip = ch->ips[i], id, mid = 0;

		if (!ip)
			continue;
		if (i < ch->nk || ip >= PLABEL_KERNEL_START)
			id = kernel_loc(r, ip);
		else
			id = user_loc(r, p, ip, i == 0 ||
				      (i == ch->nk && cpu && !ch->nk), &mid);
		if (!id)
			return -ENOMEM;
		e[2 + nlocs++] = id;
		if (mid)
			mids[nmids++] = mid;
	}
	e[0] = nlocs;
	e[1] = nmids;
	memmove(e + 2 + nlocs, mids, nmids * sizeof(*mids));
	*slot = r->nres + 1;
	r->nres += 2 + nlocs + nmids;
	return 0;
}

int plabel_resolver_add(struct plabel_resolver *r, const struct plabel_agg *a)
{
	struct plabel_proc *p = plabel_procs_get(r->src.procs, a->pid);
	const uint64_t *e;
	uint64_t *slot;
	size_t i;
	int ret;

	if (!p)
		return -ENOMEM;
	slot = plabel_pair_slot(&r->rc, (uint64_t)a->gen << 32 | a->chain,
				a->pid);
	if (!slot)
		return -ENOMEM;
	if (!*slot) {
		ret = resolve_chain(r, p, a, slot);
		if (ret)
			return ret;
	}
	e = r->res + *slot - 1;
	for (i = 0; i < e[1]; i++)
		count_use(r, e[2 + e[0] + i], a->count);
	return add_sample(r, a, e + 2, e[0]);
}

/* A profile comment "what: n" when n or always. 0 or -ENOMEM. */
static int count_comment(struct plabel_prof *prof, const char *what,
			 uint64_t n, int always)
{
	char comment[96];

	if (!n && !always)
		return 0;
	snprintf(comment, sizeof(comment), "%s: %" PRIu64, what, n);
	return plabel_prof_add_comment(prof, comment) ? -ENOMEM : 0;
}

int plabel_resolve_comments(struct plabel_prof *prof,
			    const struct plabel_collect_stats *st)
{
	const struct {
		uint64_t n;
		const char *what;
	} counts[] = {
		{ st->lost_periods, "sampling periods of the lost samples" },
		{ st->lost_maps,
		  "executable mappings the kernel did not report" },
		{ st->lost_procs, "processes the kernel could not follow" },
		{ st->unresolved, "samples with an unresolved label set" },
		{ st->late, "exec records after their time was settled" },
		{ st->proc_maps,
		  "process images mapped from /proc, not the kernel's records" },
		{ st->contexts, "records with a thread context (OTel, custom-labels)" },
		{ st->ctx_unknown,
		  "thread-context attributes whose key was not in the key map" },
		{ st->ctx_bad, "thread-context labels not fit for a label" },
		{ st->ctx_partial,
		  "thread contexts the kernel could not copy whole" },
		{ st->ctx_failed,
		  "processes whose thread context could not be registered" },
	};
	size_t i;
	int ret = count_comment(prof, "lost records", st->lost, 1);

	for (i = 0; i < sizeof(counts) / sizeof(counts[0]) && !ret; i++)
		ret = count_comment(prof, counts[i].what, counts[i].n, 0);
	return ret;
}
