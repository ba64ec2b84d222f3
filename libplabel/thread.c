// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libplabel: per-thread state and the label calls.
 *
 * Each thread has a slot (registered once with PLABEL_IOC_SLOT_SET) holding
 * the kernel id of its current set, the current set itself, the chain of
 * active plabel_do() frames, and a small set-associative cache:
 *
 *   (base set seq, hash of the kvs given) -> the resulting set
 *
 * plabel_set() looks up with base 0 (the empty set), plabel_do() with the
 * current set as base, so a repeated call with the same labels on top of
 * the same labels costs a hash, a lookup and a verification of the kvs
 * against the cached set: no lock, no allocation, no system call. Each
 * entry keeps a mask of which labels of the set came from the kvs; the
 * verification checks that the kvs are exactly those labels, which also
 * rejects repeated keys without sorting.
 *
 * Every cache entry holds a reference to its set. A set in use by the
 * thread (current, or the previous or merged set of an active plabel_do()
 * frame) is pinned: never evicted. When all ways of a bucket are pinned the
 * set goes to an overflow list instead, swept on the next slow path.
 * plabel_switch() takes no reference: the caller keeps its set alive.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plabel_uapi.h"
#include "internal.h"

#define PLABEL_TC_BUCKETS	16	/* power of two */
#define PLABEL_TC_WAYS		4

struct plabel_tc_ent {
	uint64_t base_seq;
	uint64_t hash;
	uint64_t mask;		/* labels of set that came from the kvs */
	struct plabel_labels *set;	/* holds a reference; NULL: unused */
	size_t nkv;		/* number of kvs: bits in mask */
};

struct plabel_frame {
	struct plabel_frame *up;
	const struct plabel_labels *prev;
	const struct plabel_labels *merged;
};

struct plabel_overflow {
	struct plabel_overflow *next;
	struct plabel_labels *set;	/* holds a reference */
};

struct plabel_thread {
	uint64_t slot;			/* read by the kernel */
	const struct plabel_labels *cur;	/* NULL: no labels */
	struct plabel_frame *frames;
	struct plabel_tc_ent *cache;	/* [BUCKETS][WAYS] */
	struct plabel_overflow *overflow;
	unsigned char *otel_rec;	/* own record while a span is attached */
	unsigned char span[25];		/* trace-id, span-id, trace-flags */
	unsigned char traced;		/* a span is attached */
	unsigned char inited;
	unsigned char kstored;		/* may have kernel-stored labels */
	unsigned char victim;
};

static __thread struct plabel_thread plabel_tls
	__attribute__((tls_model("initial-exec"), aligned(8)));

static int plabel_pinned(const struct plabel_thread *t,
			 const struct plabel_labels *l)
{
	const struct plabel_frame *f;

	if (l == t->cur)
		return 1;
	for (f = t->frames; f; f = f->up)
		if (f->prev == l || f->merged == l)
			return 1;
	return 0;
}

static struct plabel_tc_ent *plabel_tc_bucket(struct plabel_thread *t,
					      uint64_t base_seq, uint64_t hash)
{
	uint64_t h = (hash ^ (base_seq * 0x9e3779b97f4a7c15ULL)) >> 32;

	return &t->cache[(h & (PLABEL_TC_BUCKETS - 1)) * PLABEL_TC_WAYS];
}

/* Index of key in the sorted set; -1 when absent. */
static inline int plabel_find_key(const struct plabel_labels *l,
				  const char *key)
{
	int lo = 0, hi = (int)l->count - 1;

	if (l->count <= 8) {
		for (; lo <= hi; lo++) {
			const char *k = l->kv[lo].key;

			if (k[0] == key[0] && !strcmp(k, key))
				return lo;
		}
		return -1;
	}

	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		int c = strcmp(l->kv[mid].key, key);

		if (!c)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* Are kvs (any order, n == popcount(e->mask)) exactly e's labels? */
static inline int plabel_tc_match(const struct plabel_tc_ent *e,
				  const struct plabel_kv *kvs, size_t n)
{
	const struct plabel_labels *l = e->set;
	uint64_t seen = 0;
	size_t i;

	if (e->nkv != n)
		return 0;
	for (i = 0; i < n; i++) {
		int k = plabel_find_key(l, kvs[i].key);
		uint64_t bit;

		if (k < 0)
			return 0;
		bit = 1ULL << k;
		if (!(e->mask & bit) || (seen & bit))
			return 0;
		seen |= bit;
		if (strcmp(l->kv[k].value, kvs[i].value))
			return 0;
	}
	return 1;
}

static inline const struct plabel_labels *
plabel_tc_lookup(struct plabel_thread *t, uint64_t base_seq, uint64_t hash,
		 const struct plabel_kv *kvs, size_t n)
{
	struct plabel_tc_ent *e = plabel_tc_bucket(t, base_seq, hash);
	int w;

	for (w = 0; w < PLABEL_TC_WAYS; w++, e++) {
		if (e->set && e->hash == hash && e->base_seq == base_seq &&
		    plabel_tc_match(e, kvs, n))
			return e->set;
	}
	return NULL;
}

/* Takes over the reference to set. 0 or -ENOMEM (reference dropped). */
static int plabel_tc_insert(struct plabel_thread *t, uint64_t base_seq,
			    uint64_t hash, uint64_t mask,
			    struct plabel_labels *set)
{
	struct plabel_tc_ent *b = plabel_tc_bucket(t, base_seq, hash), *e;
	struct plabel_overflow *o;
	int w;

	for (w = 0; w < PLABEL_TC_WAYS; w++) {
		if (!b[w].set)
			goto fill;
	}
	for (w = 0; w < PLABEL_TC_WAYS; w++) {
		e = &b[(t->victim + w) % PLABEL_TC_WAYS];
		if (!plabel_pinned(t, e->set)) {
			t->victim = (t->victim + w + 1) % PLABEL_TC_WAYS;
			plabel_put(e->set);
			w = e - b;
			goto fill;
		}
	}
	/* Every way is in use by this thread: hold it on the side. */
	o = malloc(sizeof(*o));
	if (!o) {
		plabel_put(set);
		return -ENOMEM;
	}
	o->set = set;
	o->next = t->overflow;
	t->overflow = o;
	return 0;
fill:
	e = &b[w];
	e->base_seq = base_seq;
	e->hash = hash;
	e->mask = mask;
	e->nkv = __builtin_popcountll(mask);
	e->set = set;
	return 0;
}

static void plabel_overflow_sweep(struct plabel_thread *t)
{
	struct plabel_overflow **pp = &t->overflow, *o;

	while ((o = *pp)) {
		if (plabel_pinned(t, o->set)) {
			pp = &o->next;
			continue;
		}
		*pp = o->next;
		plabel_put(o->set);
		free(o);
	}
}

/* Drop the cached sets this thread does not use now; how many. */
static int plabel_tc_shrink(struct plabel_thread *t)
{
	int i, n = 0;

	for (i = 0; i < PLABEL_TC_BUCKETS * PLABEL_TC_WAYS; i++) {
		struct plabel_tc_ent *e = &t->cache[i];

		if (e->set && !plabel_pinned(t, e->set)) {
			plabel_put(e->set);
			e->set = NULL;
			n++;
		}
	}
	return n;
}

/*
 * Slow path: validate kvs, merge them into base (NULL: empty), intern the
 * result and cache it under (base seq, hash). The set is held by the
 * thread's cache (or overflow list) when this returns 0.
 */
static int plabel_resolve(struct plabel_thread *t,
			  const struct plabel_labels *base,
			  const struct plabel_kv *kvs, size_t n, uint64_t hash,
			  const struct plabel_labels **out)
{
	struct plabel_kv sorted[PLABEL_MAX_LABELS];
	struct plabel_kv merged[PLABEL_MAX_LABELS];
	size_t i = 0, j = 0, m = 0, nb = base ? base->count : 0;
	unsigned int max = plabel_limits.max_labels;
	struct plabel_labels *set;
	uint64_t mask = 0;
	int err;

	plabel_overflow_sweep(t);
	err = plabel_sort_kvs(kvs, n, sorted);
	if (err)
		return err;
	while (i < nb || j < n) {
		int c;

		if (m >= max)
			return -E2BIG;
		if (i == nb)
			c = 1;
		else if (j == n)
			c = -1;
		else
			c = strcmp(base->kv[i].key, sorted[j].key);
		if (c < 0) {
			merged[m++] = base->kv[i++];
			continue;
		}
		if (c == 0)
			i++;
		mask |= 1ULL << m;
		merged[m++] = sorted[j++];
	}
	err = plabel_intern(merged, m, &set);
	if (err == -EDQUOT && plabel_tc_shrink(t)) {
		/* Sets this thread cached but does not use count too. */
		err = plabel_intern(merged, m, &set);
	}
	if (err)
		return err;
	err = plabel_tc_insert(t, base ? base->seq : 0, hash, mask, set);
	if (err)
		return err;
	*out = set;
	return 0;
}

/* Drop the kernel-stored labels the thread inherited, once. */
static int plabel_clear_kstored(struct plabel_thread *t)
{
	struct plabel_labels_set_args args = { .size = sizeof(args) };
	int err;

	err = plabel_dev_ioctl(PLABEL_IOC_LABELS_SET, &args);
	if (err && err != -ENODEV)
		return err;
	t->kstored = 0;
	return 0;
}

/*
 * The thread's own record: the span, then l's attributes. Readers see the
 * thread stopped (OTEP 4947), so compiler fences order the stores: the
 * pointer is NULL while the record is rewritten.
 */
static __attribute__((noinline, unused)) const void *
plabel_otel_traced(struct plabel_thread *t, const struct plabel_labels *l)
{
	unsigned char *rec = t->otel_rec;
	uint16_t size = 0;

	__atomic_store_n(&otel_thread_ctx_v1, NULL, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	memcpy(rec, t->span, 24);
	rec[25] = t->span[24];
	if (l && l->otel) {
		memcpy(&size, l->otel + 26, 2);
		memcpy(rec + PLABEL_OTEL_REC_HDR,
		       l->otel + PLABEL_OTEL_REC_HDR, size);
	}
	memcpy(rec + 26, &size, 2);
	rec[24] = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return rec;
}

/* Point otel_thread_ctx_v1 at the record of l (NULL: no labels). */
static inline void plabel_otel_store(struct plabel_thread *t,
				     const struct plabel_labels *l)
{
#ifndef PLABEL_BENCH_NO_OTEL
	const void *rec = l ? l->otel : NULL;

	if (plabel_unlikely(t->traced))
		rec = plabel_otel_traced(t, l);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&otel_thread_ctx_v1, (void *)rec, __ATOMIC_RELAXED);
#else
	(void)t;
	(void)l;
#endif
}

static inline int plabel_store(struct plabel_thread *t,
			       const struct plabel_labels *l)
{
	if (l && !l->count)
		l = NULL;
	if (!l && plabel_unlikely(t->kstored)) {
		int err = plabel_clear_kstored(t);

		if (err)
			return err;
	}
	t->cur = l;
	__atomic_store_n(&t->slot, l ? l->id : 0, __ATOMIC_RELAXED);
	plabel_otel_store(t, l);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return 0;
}

/*
 * Labels the thread inherited (kernel-stored): read them back with
 * PLABEL_IOC_LABELS_GET and intern them so the cache has the set.
 */
static int plabel_recover(struct plabel_thread *t)
{
	struct plabel_labels_get_args args;
	struct plabel_kv kvs[PLABEL_MAX_LABELS];
	const struct plabel_labels *set;
	struct plabel_label *lab;
	char *buf = NULL, *nbuf;
	uint32_t len = 0, i;
	uint64_t hash;
	int err, tries;

	for (tries = 0; tries < 8; tries++) {
		memset(&args, 0, sizeof(args));
		args.size = sizeof(args);
		args.buf = (uintptr_t)buf;
		args.buf_len = len;
		err = plabel_dev_ioctl(PLABEL_IOC_LABELS_GET, &args);
		if (err != -ERANGE)
			break;
		len = args.buf_len;
		nbuf = realloc(buf, len);
		if (!nbuf) {
			err = -ENOMEM;
			goto out;
		}
		buf = nbuf;
	}
	if (err)
		goto out;
	t->kstored = args.id != 0;
	if (!args.count)
		goto out;
	err = -EPROTO;
	if (args.count > PLABEL_MAX_LABELS || !buf ||
	    args.buf_len > len ||
	    (uint64_t)args.count * sizeof(*lab) > args.buf_len)
		goto out;
	lab = (struct plabel_label *)buf;
	for (i = 0; i < args.count; i++) {
		uint64_t lo = (uintptr_t)buf, hi = lo + args.buf_len;

		if (lab[i].key < lo || lab[i].key + lab[i].key_len >= hi ||
		    lab[i].value < lo ||
		    lab[i].value + lab[i].value_len >= hi)
			goto out;
		kvs[i].key = (const char *)(uintptr_t)lab[i].key;
		kvs[i].value = (const char *)(uintptr_t)lab[i].value;
		if (kvs[i].key[lab[i].key_len] ||
		    kvs[i].value[lab[i].value_len])
			goto out;
	}
	err = plabel_hash_kvs(kvs, args.count, &hash);
	if (err)
		goto out;
	err = plabel_resolve(t, NULL, kvs, args.count, hash, &set);
	if (err)
		goto out;
	t->cur = set;
	t->slot = set->id;
	plabel_otel_store(t, set);
out:
	free(buf);
	return err;
}

static __attribute__((noinline)) int plabel_thread_init(struct plabel_thread *t)
{
	struct plabel_slot_args slot = { .size = sizeof(slot) };
	int err;

	err = plabel_global_init();
	if (err)
		return err;
	if (!t->cache) {
		t->cache = calloc(PLABEL_TC_BUCKETS * PLABEL_TC_WAYS,
				  sizeof(*t->cache));
		if (!t->cache)
			return -ENOMEM;
	}
	err = plabel_thread_key_set(t);
	if (err)
		return err;
	if (plabel_fd >= 0) {
		err = plabel_recover(t);
		/* Unreadable inherited labels: start without; clear works. */
		if (err == -ENOMEM)
			return err;
		if (err)
			t->kstored = 1;
		slot.addr = (uintptr_t)&t->slot;
		err = plabel_dev_ioctl(PLABEL_IOC_SLOT_SET, &slot);
		if (err)
			return err;
	}
	t->inited = 1;
	return 0;
}

static inline struct plabel_thread *plabel_thread_get(int *err)
{
	struct plabel_thread *t = &plabel_tls;

	if (plabel_likely(t->inited))
		return t;
	*err = plabel_thread_init(t);
	return *err ? NULL : t;
}

void plabel_thread_exit(void *p)
{
	struct plabel_thread *t = p;
	int i;

	t->cur = NULL;
	t->frames = NULL;
	__atomic_store_n(&t->slot, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&otel_thread_ctx_v1, NULL, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->traced = 0;
	free(t->otel_rec);
	t->otel_rec = NULL;
	plabel_overflow_sweep(t);
	for (i = 0; t->cache && i < PLABEL_TC_BUCKETS * PLABEL_TC_WAYS; i++)
		plabel_put(t->cache[i].set);
	free(t->cache);
	t->cache = NULL;
	t->inited = 0;
}

void plabel_thread_after_fork(void)
{
	struct plabel_thread *t = &plabel_tls;

	if (!t->inited)
		return;
	/* The set ids may have changed; the child inherited kernel labels. */
	t->slot = t->cur ? t->cur->id : 0;
	if (plabel_fd >= 0)
		t->kstored = 1;
}

PLABEL_API int plabel_switch(const struct plabel_labels *l)
{
	struct plabel_thread *t;
	int err;

	t = plabel_thread_get(&err);
	if (!t)
		return err;
	return plabel_store(t, l);
}

PLABEL_API int plabel_set_trace(const unsigned char *trace_id,
				const unsigned char *span_id,
				unsigned int flags)
{
	static const unsigned char zero[16];
	struct plabel_thread *t;
	int err, has_t, has_s;

	has_t = trace_id && memcmp(trace_id, zero, 16);
	has_s = span_id && memcmp(span_id, zero, 8);
	if (has_t != has_s || flags > 0xff || (!has_t && flags))
		return -EINVAL;
	t = plabel_thread_get(&err);
	if (!t)
		return err;
	if (!has_t) {
		t->traced = 0;
		plabel_otel_store(t, t->cur);
		return 0;
	}
	if (!t->otel_rec) {
		t->otel_rec = malloc(PLABEL_OTEL_REC_MAX);
		if (!t->otel_rec)
			return -ENOMEM;
	}
	/* Detach first: the record is rewritten while it may be visible. */
	__atomic_store_n(&otel_thread_ctx_v1, NULL, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	memcpy(t->span, trace_id, 16);
	memcpy(t->span + 16, span_id, 8);
	t->span[24] = (unsigned char)flags;
	t->traced = 1;
	plabel_otel_store(t, t->cur);
	return 0;
}

PLABEL_API int plabel_clear(void)
{
	return plabel_switch(NULL);
}

PLABEL_API int plabel_set(const struct plabel_kv *kvs, size_t n)
{
	const struct plabel_labels *set;
	struct plabel_thread *t;
	uint64_t hash;
	int err;

	t = plabel_thread_get(&err);
	if (!t)
		return err;
	if (!n)
		return plabel_store(t, NULL);
	if (!kvs)
		return -EINVAL;
	if (n > plabel_limits.max_labels)
		return -E2BIG;
	err = plabel_hash_kvs(kvs, n, &hash);
	if (err)
		return err;
	set = plabel_tc_lookup(t, 0, hash, kvs, n);
	if (!set) {
		err = plabel_resolve(t, NULL, kvs, n, hash, &set);
		if (err)
			return err;
	}
	return plabel_store(t, set);
}

PLABEL_API int plabel_get(struct plabel_kv *out, size_t cap)
{
	const struct plabel_labels *l;
	struct plabel_thread *t;
	size_t i;
	int err;

	if (cap && !out)
		return -EINVAL;
	t = plabel_thread_get(&err);
	if (!t)
		return err;
	l = t->cur;
	if (!l)
		return 0;
	for (i = 0; i < cap && i < l->count; i++)
		out[i] = l->kv[i];
	return l->count;
}

PLABEL_API int plabel_do(const struct plabel_kv *kvs, size_t n,
			 void (*fn)(void *), void *arg)
{
	const struct plabel_labels *prev, *set = NULL;
	struct plabel_frame frame;
	struct plabel_thread *t;
	uint64_t hash;
	int err;

	if (!fn)
		return -EINVAL;
	t = plabel_thread_get(&err);
	if (!t) {
		fn(arg);
		return err;
	}
	prev = t->cur;
	/* On any error fn still runs, with the labels unchanged. */
	if (!n)
		err = 0;
	else if (!kvs)
		err = -EINVAL;
	else if (n > plabel_limits.max_labels)
		err = -E2BIG;
	else
		err = plabel_hash_kvs(kvs, n, &hash);
	if (n && !err) {
		set = plabel_tc_lookup(t, prev ? prev->seq : 0, hash, kvs, n);
		if (!set)
			err = plabel_resolve(t, prev, kvs, n, hash, &set);
	}
	if (!set)
		set = prev;
	frame.up = t->frames;
	frame.prev = prev;
	frame.merged = set;
	t->frames = &frame;
	if (set != prev) {
		int serr = plabel_store(t, set);

		if (!err)
			err = serr;
	}
	fn(arg);
	/*
	 * Restore whatever fn did. A failure here can only be the one-time
	 * clear of inherited labels, which plabel_store() retries at the next
	 * clear.
	 */
	plabel_store(t, prev);
	t->frames = frame.up;
	return err;
}
