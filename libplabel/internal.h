/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libplabel internals shared by labels.c (the process-wide set table, the
 * device, validation, fork handling) and thread.c (per-thread state, the
 * per-thread cache and the public label calls).
 *
 * Locking: plabel_lock (a mutex) protects the set table and every 1 -> 0
 * transition of a set's reference count. Nothing on the cached paths
 * (cache hits in plabel_set()/plabel_do(), plabel_switch(), plabel_get())
 * takes it: those touch only the calling thread's own state and sets the
 * thread holds references to.
 */
#ifndef PLABEL_LIB_INTERNAL_H
#define PLABEL_LIB_INTERNAL_H

#include <errno.h>
#include <stdint.h>
#include <stddef.h>

#include "plabel.h"

#define PLABEL_HIDDEN	__attribute__((visibility("hidden")))
#define plabel_likely(x)	__builtin_expect(!!(x), 1)
#define plabel_unlikely(x)	__builtin_expect(!!(x), 0)

/*
 * An interned label set. Immutable after creation except refs, next and,
 * in a fork child, id (rewritten once while the child is single-threaded).
 */
struct plabel_labels {
	uint64_t id;		/* kernel set id; 0 without the module */
	uint64_t seq;		/* unique in the process; 0: empty */
	uint64_t hash;		/* plabel_hash_kvs() of the content */
	long refs;		/* atomic; 1 -> 0 only under plabel_lock */
	struct plabel_labels *next;	/* table chain */
	uint32_t count;
	uint32_t pad;
	struct plabel_kv kv[];	/* sorted by key; the strings follow */
};

/* Limits in force: the kernel's sysctls when readable, else the ceilings. */
struct plabel_limits {
	unsigned int max_labels;
	unsigned int max_key_len;
	unsigned int max_value_len;
};

extern struct plabel_labels plabel_empty_set PLABEL_HIDDEN;
extern struct plabel_limits plabel_limits PLABEL_HIDDEN;
extern int plabel_fd PLABEL_HIDDEN;	/* -1: in-process mode */

/* Process-wide state, once. 0 or a negative errno. */
int plabel_global_init(void) PLABEL_HIDDEN;
/* pthread key whose destructor is plabel_thread_exit(). */
int plabel_thread_key_set(void *t) PLABEL_HIDDEN;
void plabel_thread_exit(void *t) PLABEL_HIDDEN;
/* Called by the fork child handler in the (only) thread of the child. */
void plabel_thread_after_fork(void) PLABEL_HIDDEN;

/* Order-independent content hash; NULL key or value gives -EINVAL. */
static inline uint64_t plabel_mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

uint64_t plabel_hash_str(const char *s, uint64_t h) PLABEL_HIDDEN;

static inline uint64_t plabel_hash_kv(const char *key, const char *value)
{
	return plabel_mix(plabel_hash_str(value,
			  plabel_hash_str(key, 0x9e3779b97f4a7c15ULL)));
}

/* Sum of the pairs' hashes, so order does not matter. */
static inline int plabel_hash_kvs(const struct plabel_kv *kvs, size_t n,
				  uint64_t *hash)
{
	uint64_t h = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (plabel_unlikely(!kvs[i].key || !kvs[i].value))
			return -EINVAL;
		h += plabel_hash_kv(kvs[i].key, kvs[i].value);
	}
	*hash = h;
	return 0;
}

/*
 * Validate kvs against the limits and copy them to out[] sorted by key.
 * -EINVAL: NULL kvs with n > 0, NULL or empty key, NULL value, repeated
 * key; -E2BIG: too many labels, over-long key or value.
 */
int plabel_sort_kvs(const struct plabel_kv *kvs, size_t n,
		    struct plabel_kv *out) PLABEL_HIDDEN;

/*
 * The set with exactly these (valid, sorted) labels, with a new reference;
 * interned in the kernel the first time. n > 0.
 */
int plabel_intern(const struct plabel_kv *sorted, size_t n,
		  struct plabel_labels **out) PLABEL_HIDDEN;
void plabel_put(struct plabel_labels *l) PLABEL_HIDDEN;

/* Device calls: 0 or a negative errno. */
int plabel_dev_ioctl(unsigned long cmd, void *arg) PLABEL_HIDDEN;

#endif /* PLABEL_LIB_INTERNAL_H */
