// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libplabel: the OpenTelemetry thread context (OTEP 4947) and process
 * context (OTEP 4719), so that any outside profiler that reads those sees
 * the labels too, with or without the kernel module.
 *
 * Every interned set carries its thread-context record, encoded once when
 * the set is made (plabel_otel_build()); switching to the set stores the
 * record's address into the TLS pointer otel_thread_ctx_v1. A thread with
 * a span attached (plabel_set_trace()) publishes its own record instead,
 * rebuilt from the set's attributes on each switch.
 *
 * The key map (record key index -> label key) is process-wide and
 * append-only. It lives in the process context: one mapping named
 * OTEL_CTX holding the 32-byte header and, after it, the protobuf payload
 * (a ProcessContext message whose extra_attributes carry
 * threadlocal.schema_version and threadlocal.attribute_key_map). A key
 * appended to the map is published with the updating protocol before the
 * set that uses it is returned, so a reader never meets a record whose
 * key index the published map lacks.
 *
 * Locking: everything here but the record stores runs under plabel_lock
 * (labels.c), which makes this the single writer of the process context.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "plabel_uapi.h"
#include "internal.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA		0x53564d41
#define PR_SET_VMA_ANON_NAME	0
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC		0x0001U
#endif

/* The thread-local pointer readers find in .dynsym (OTEP 4947). */
PLABEL_API __thread void *otel_thread_ctx_v1
	__attribute__((tls_model("initial-exec")));

/* Largest payload: the schema pair plus 256 keys of 255 bytes. */
#define PLABEL_OTEL_KEY_ENC_MAX	(1 + 3 + 1 + 3 + PLABEL_MAX_KEY_LEN)
#define PLABEL_OTEL_PAYLOAD_MAX	(256 + PLABEL_OTEL_KEYS_MAX * \
				 PLABEL_OTEL_KEY_ENC_MAX)

static const char *plabel_otel_keys[PLABEL_OTEL_KEYS_MAX];
static unsigned int plabel_otel_nkeys;
static unsigned char *plabel_otel_map;	/* header; NULL: not published */
static size_t plabel_otel_map_len;
static uint64_t plabel_otel_last_ns;
static struct plabel_otel_stats plabel_otel_st;

/* Protobuf wire format: varints and length-delimited fields. */
static size_t plabel_pb_varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static unsigned char *plabel_pb_varint(unsigned char *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	*p++ = (unsigned char)v;
	return p;
}

/* Size of field (tag < 16) of wire type 2 with a body of len bytes. */
static size_t plabel_pb_len_field(size_t len)
{
	return 1 + plabel_pb_varint_len(len) + len;
}

static unsigned char *plabel_pb_head(unsigned char *p, unsigned int field,
				     size_t len)
{
	*p++ = (unsigned char)(field << 3 | 2);
	return plabel_pb_varint(p, len);
}

static unsigned char *plabel_pb_bytes(unsigned char *p, unsigned int field,
				      const char *s, size_t len)
{
	p = plabel_pb_head(p, field, len);
	memcpy(p, s, len);
	return p + len;
}

/*
 * ProcessContext { repeated KeyValue extra_attributes = 2; } with
 *   KeyValue { key = 1: "threadlocal.schema_version",
 *              value = 2: AnyValue { string_value = 1: "tls_v1" } }
 *   KeyValue { key = 1: "threadlocal.attribute_key_map",
 *              value = 2: AnyValue { array_value = 5: ArrayValue {
 *                  values = 1: AnyValue { string_value = 1: key }... } } }
 * Returns the payload size; out has PLABEL_OTEL_PAYLOAD_MAX bytes.
 */
static size_t plabel_otel_encode(unsigned char *out)
{
	static const char sk[] = PLABEL_OTEL_SCHEMA_KEY;
	static const char sv[] = PLABEL_OTEL_SCHEMA;
	static const char mk[] = PLABEL_OTEL_KEYMAP_KEY;
	size_t sval, skv, arr = 0, mval, mkv;
	unsigned char *p = out;
	unsigned int i;

	sval = plabel_pb_len_field(sizeof(sv) - 1);
	skv = plabel_pb_len_field(sizeof(sk) - 1) + plabel_pb_len_field(sval);
	for (i = 0; i < plabel_otel_nkeys; i++)
		arr += plabel_pb_len_field(plabel_pb_len_field(
					strlen(plabel_otel_keys[i])));
	mval = plabel_pb_len_field(arr);
	mkv = plabel_pb_len_field(sizeof(mk) - 1) + plabel_pb_len_field(mval);

	p = plabel_pb_head(p, 2, skv);
	p = plabel_pb_bytes(p, 1, sk, sizeof(sk) - 1);
	p = plabel_pb_head(p, 2, sval);
	p = plabel_pb_bytes(p, 1, sv, sizeof(sv) - 1);

	p = plabel_pb_head(p, 2, mkv);
	p = plabel_pb_bytes(p, 1, mk, sizeof(mk) - 1);
	p = plabel_pb_head(p, 2, mval);
	p = plabel_pb_head(p, 5, arr);
	for (i = 0; i < plabel_otel_nkeys; i++) {
		size_t kl = strlen(plabel_otel_keys[i]);

		p = plabel_pb_head(p, 1, plabel_pb_len_field(kl));
		p = plabel_pb_bytes(p, 1, plabel_otel_keys[i], kl);
	}
	return (size_t)(p - out);
}

/* A nonzero timestamp later than every one published before. */
static uint64_t plabel_otel_stamp(void)
{
	struct timespec ts;
	uint64_t ns = 0;

	if (!clock_gettime(CLOCK_REALTIME, &ts))
		ns = (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	if (ns <= plabel_otel_last_ns)
		ns = plabel_otel_last_ns + 1;
	plabel_otel_last_ns = ns;
	return ns;
}

static void plabel_otel_name(void)
{
	/* Fails before Linux 5.17 or without CONFIG_ANON_VMA_NAME: fine. */
	prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)plabel_otel_map,
	      plabel_otel_map_len, (unsigned long)PLABEL_OTEL_SIGNATURE);
}

/* The OTEP 4719 publication protocol, for the first mapping. */
static int plabel_otel_publish(void)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned char *m, *payload;
	size_t len, size;
	uint64_t ns;
	uint32_t v;
	int fd, named;

	if (page <= 0)
		page = 4096;
	len = (PLABEL_OTEL_HDR_SIZE + PLABEL_OTEL_PAYLOAD_MAX + page - 1) &
	      ~((size_t)page - 1);
	m = MAP_FAILED;
	fd = memfd_create(PLABEL_OTEL_SIGNATURE, MFD_CLOEXEC);
	if (fd >= 0) {
		if (!ftruncate(fd, (off_t)len))
			m = mmap(NULL, len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE, fd, 0);
		close(fd);
	}
	plabel_otel_st.context_memfd = m != MAP_FAILED;
	if (m == MAP_FAILED)
		m = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -errno;
	if (madvise(m, len, MADV_DONTFORK)) {
		int err = -errno;

		munmap(m, len);
		return err;
	}
	payload = m + PLABEL_OTEL_HDR_SIZE;
	size = plabel_otel_encode(payload);
	v = PLABEL_OTEL_CTX_VERSION;
	memcpy(m + 8, &v, 4);
	v = (uint32_t)size;
	memcpy(m + 12, &v, 4);
	ns = plabel_otel_stamp();
	memcpy(m + 16, &ns, 8);
	*(uint64_t *)(m + 24) = (uintptr_t)payload;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	memcpy(m, PLABEL_OTEL_SIGNATURE, 8);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	plabel_otel_map = m;
	plabel_otel_map_len = len;
	named = !prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)m,
		       len, (unsigned long)PLABEL_OTEL_SIGNATURE);
	if (!plabel_otel_st.context_memfd && !named) {
		/* Neither a memfd nor a name: no reader could find it. */
		plabel_otel_map = NULL;
		munmap(m, len);
		return -EOPNOTSUPP;
	}
	plabel_otel_st.context_published = 1;
	return 0;
}

/* The OTEP 4719 updating protocol: the payload changed. */
static void plabel_otel_update(void)
{
	unsigned char *m = plabel_otel_map;
	uint64_t zero = 0, ns;
	uint32_t size;

	if (!m)
		return;
	__atomic_store_n((uint64_t *)(m + 16), zero, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	size = (uint32_t)plabel_otel_encode(m + PLABEL_OTEL_HDR_SIZE);
	__atomic_store_n((uint32_t *)(m + 12), size, __ATOMIC_RELAXED);
	*(uint64_t *)(m + 24) = (uintptr_t)(m + PLABEL_OTEL_HDR_SIZE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ns = plabel_otel_stamp();
	__atomic_store_n((uint64_t *)(m + 16), ns, __ATOMIC_RELEASE);
	plabel_otel_name();
}

void plabel_otel_init(void)
{
	plabel_otel_publish();
}

void plabel_otel_after_fork(void)
{
	/* MADV_DONTFORK: the child has no mapping; it publishes its own. */
	plabel_otel_map = NULL;
	plabel_otel_map_len = 0;
	plabel_otel_st.context_published = 0;
	plabel_otel_publish();
}

/* The key's index, appended (and published) when new; -1: map full. */
static int plabel_otel_key(const char *key, int *appended)
{
	unsigned int i;
	char *copy;

	for (i = 0; i < plabel_otel_nkeys; i++)
		if (!strcmp(plabel_otel_keys[i], key))
			return (int)i;
	if (plabel_otel_nkeys >= PLABEL_OTEL_KEYS_MAX)
		return -1;
	copy = strdup(key);
	if (!copy)
		return -2;
	plabel_otel_keys[plabel_otel_nkeys] = copy;
	*appended = 1;
	return (int)plabel_otel_nkeys++;
}

size_t plabel_otel_size(const struct plabel_kv *sorted, size_t n)
{
	size_t i, bytes = PLABEL_OTEL_REC_HDR;

	for (i = 0; i < n; i++) {
		size_t vl = strlen(sorted[i].value);

		if (vl <= PLABEL_OTEL_VALUE_MAX)
			bytes += 2 + vl;
	}
	if (bytes > PLABEL_OTEL_REC_MAX)
		bytes = PLABEL_OTEL_REC_MAX;
	return bytes;
}

int plabel_otel_build(struct plabel_labels *l, unsigned char *rec)
{
	unsigned char *p = rec + PLABEL_OTEL_REC_HDR;
	unsigned char *end = rec + PLABEL_OTEL_REC_MAX;
	int appended = 0;
	uint16_t size;
	uint32_t i;

	memset(rec, 0, PLABEL_OTEL_REC_HDR);
	l->otel_dropped = 0;
	for (i = 0; i < l->count; i++) {
		size_t vl = strlen(l->kv[i].value);
		int k;

		if (vl > PLABEL_OTEL_VALUE_MAX) {
			plabel_otel_st.values_dropped++;
			l->otel_dropped++;
			continue;
		}
		if ((size_t)(end - p) < 2 + vl) {
			plabel_otel_st.space_dropped++;
			l->otel_dropped++;
			continue;
		}
		k = plabel_otel_key(l->kv[i].key, &appended);
		if (k == -2)
			return -ENOMEM;
		if (k < 0) {
			plabel_otel_st.keys_dropped++;
			l->otel_dropped++;
			continue;
		}
		*p++ = (unsigned char)k;
		*p++ = (unsigned char)vl;
		memcpy(p, l->kv[i].value, vl);
		p += vl;
	}
	size = (uint16_t)(p - rec - PLABEL_OTEL_REC_HDR);
	memcpy(rec + 26, &size, 2);
	rec[24] = 1;		/* valid */
	l->otel = size ? rec : NULL;
	if (appended)
		plabel_otel_update();
	return 0;
}

PLABEL_API int plabel_otel_stats(struct plabel_otel_stats *st, size_t size)
{
	struct plabel_otel_stats snap;
	int err;

	if (!st)
		return -EINVAL;
	err = plabel_global_init();
	if (err)
		return err;
	plabel_lock_take();
	snap = plabel_otel_st;
	snap.keys_used = plabel_otel_nkeys;
	plabel_lock_drop();
	memset(st, 0, size);
	memcpy(st, &snap, size < sizeof(snap) ? size : sizeof(snap));
	return 0;
}
