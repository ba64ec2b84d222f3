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
	const unsigned char *otel;	/* OTEP 4947 record; NULL: none */
	uint32_t otel_dropped;	/* labels left out of the record */
	uint32_t count;
	struct plabel_kv kv[];	/* sorted by key; the strings, then the
				 * record (8-byte aligned) follow */
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

/*
 * OpenTelemetry thread and process context (otel.c). Record layout
 * (OTEP 4947): trace-id[16] @0, span-id[8] @16, valid @24, trace-flags
 * @25, attrs-data-size (u16, host order) @26, attrs-data @28: entries of
 * key index (u8), length (u8), value bytes.
 */
#define PLABEL_OTEL_REC_HDR	28
#define PLABEL_OTEL_REC_MAX	640	/* the OTEP's recommended ceiling */
#define PLABEL_OTEL_VALUE_MAX	255	/* a u8 length */
#define PLABEL_OTEL_KEYS_MAX	256	/* a u8 key index */
#define PLABEL_OTEL_HDR_SIZE	32	/* OTEP 4719 header */
#define PLABEL_OTEL_CTX_VERSION	2
#define PLABEL_OTEL_SIGNATURE	"OTEL_CTX"
#define PLABEL_OTEL_SCHEMA_KEY	"threadlocal.schema_version"
#define PLABEL_OTEL_SCHEMA	"tls_v1"
#define PLABEL_OTEL_KEYMAP_KEY	"threadlocal.attribute_key_map"

extern __thread void *otel_thread_ctx_v1
	__attribute__((tls_model("initial-exec")));

/* Publish the process context; at init and in a fork child. */
void plabel_otel_init(void) PLABEL_HIDDEN;
void plabel_otel_after_fork(void) PLABEL_HIDDEN;
/* Bytes the record of these (sorted) labels needs, at most REC_MAX. */
size_t plabel_otel_size(const struct plabel_kv *sorted, size_t n)
	PLABEL_HIDDEN;
/* Encode l's record into rec (plabel_otel_size() bytes); under the lock. */
int plabel_otel_build(struct plabel_labels *l, unsigned char *rec)
	PLABEL_HIDDEN;
void plabel_lock_take(void) PLABEL_HIDDEN;
void plabel_lock_drop(void) PLABEL_HIDDEN;

/* Device calls: 0 or a negative errno. */
int plabel_dev_ioctl(unsigned long cmd, void *arg) PLABEL_HIDDEN;

#endif /* PLABEL_LIB_INTERNAL_H */
