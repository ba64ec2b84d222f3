// SPDX-License-Identifier: GPL-2.0
/*
 * The writer of the thread-context test programs: a minimal third-party
 * publisher, written from the specifications alone (no libplabel).
 *
 * Without CTXLIB_CUSTOM_LABELS: the OpenTelemetry thread context. The
 * exported thread-local pointer otel_thread_ctx_v1 points to the thread's
 * OTEP 4947 record: trace-id u8[16], span-id u8[8], valid u8 (1),
 * trace-flags u8, attrs-data-size u16, then attrs-data, entries of
 * {u8 key index, u8 length, value bytes} packed. The key indices mean
 * what the OTEP 4719 process context says: a mapping named OTEL_CTX (a
 * memfd of that name, or with CTXLIB_ANON_NAME an anonymous mapping named
 * with PR_SET_VMA_ANON_NAME where the kernel can) holding the 32-byte
 * header and a protobuf ProcessContext whose extra_attributes carry
 * threadlocal.schema_version = "tls_v1" and threadlocal.attribute_key_map
 * = ["endpoint", "tenant"].
 *
 * With CTXLIB_CUSTOM_LABELS: the custom-labels v1 ABI, the exported
 * custom_labels_abi_version (1) and thread-local custom_labels_current_set.
 *
 * Each thread keeps its record (or label set) in a thread-local buffer of
 * CTXLIB_STORAGE bytes, 1024 by default: more than glibc's optional
 * static TLS (512 bytes unless tuned), so that a copy loaded with dlopen()
 * gets dynamic TLS, found through the DTV. Built with a small buffer
 * (-DCTXLIB_STORAGE=64), a copy loaded with dlopen() fits in that surplus
 * and its TLSDESC resolves to a static offset.
 *
 * How the variable is reached (readelf -rW of what tests/e2e/tlsctx/
 * build.mk makes; the Debian 12 toolchain):
 *   - in the executable (tlsctx_otel_exe, tlsctx_cl_exe): local-exec,
 *     the offset fixed by the linker; no dynamic TLS relocation at all,
 *     the symbol exported with --export-dynamic-symbol;
 *   - libotelctx_desc.so, libotelctx_small.so, libcustomlabels_t.so
 *     (-mtls-dialect=gnu2): R_X86_64_TLSDESC against the symbol (and one
 *     against no symbol, addend 8, for the thread's buffer);
 *   - libotelctx_gd.so (-mtls-dialect=gnu): R_X86_64_DTPMOD64 and
 *     R_X86_64_DTPOFF64 against the symbol, read by __tls_get_addr() (and
 *     a DTPMOD64 against no symbol for the buffer, local dynamic).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"

#ifndef CTXLIB_STORAGE
#define CTXLIB_STORAGE	1024
#endif

static __thread uint64_t ctxlib_storage[CTXLIB_STORAGE / 8];

#ifndef CTXLIB_CUSTOM_LABELS

#ifndef PR_SET_VMA
#define PR_SET_VMA		0x53564d41
#define PR_SET_VMA_ANON_NAME	0
#endif

__thread void *otel_thread_ctx_v1;

/* A record's head: ids, valid, trace-flags, attrs-data-size */
#define CTXLIB_OTEL_HEAD	28
#define CTXLIB_MAP_LEN		4096
#define CTXLIB_HDR		32

/* A protobuf field of wire type 2 (len bytes at body) at p; its size. */
static size_t ctxlib_pb(unsigned char *p, unsigned int field,
			const void *body, size_t len)
{
	size_t n = 0, v = len;

	p[n++] = (unsigned char)(field << 3 | 2);
	while (v >= 0x80) {
		p[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char)v;
	memcpy(p + n, body, len);
	return n + len;
}

static size_t ctxlib_pb_str(unsigned char *p, unsigned int field,
			    const char *s)
{
	return ctxlib_pb(p, field, s, strlen(s));
}

/* ProcessContext { extra_attributes = 2: KeyValue... } into out. */
static size_t ctxlib_payload(unsigned char *out)
{
	static const char *const keys[] = CTXLIB_KEYS;
	unsigned char any[64], arr[256], val[256], kv[512];
	size_t n, a = 0, i, len = 0;

	/* KeyValue { key = 1, value = 2: AnyValue { string_value = 1 } } */
	n = ctxlib_pb_str(any, 1, "tls_v1");
	i = ctxlib_pb_str(kv, 1, "threadlocal.schema_version");
	i += ctxlib_pb(kv + i, 2, any, n);
	len += ctxlib_pb(out + len, 2, kv, i);

	/* ... AnyValue { array_value = 5: ArrayValue { values = 1 } } */
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		n = ctxlib_pb_str(any, 1, keys[i]);
		a += ctxlib_pb(arr + a, 1, any, n);
	}
	n = ctxlib_pb(val, 5, arr, a);
	i = ctxlib_pb_str(kv, 1, "threadlocal.attribute_key_map");
	i += ctxlib_pb(kv + i, 2, val, n);
	len += ctxlib_pb(out + len, 2, kv, i);
	return len;
}

static unsigned char *ctxlib_map(void)
{
	unsigned char *m;
	int fd;

#ifdef CTXLIB_ANON_NAME
	m = mmap(NULL, CTXLIB_MAP_LEN, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	if (!prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)m,
		   CTXLIB_MAP_LEN, (unsigned long)"OTEL_CTX"))
		return m;
	/* before Linux 5.17 or without CONFIG_ANON_VMA_NAME: a memfd */
	munmap(m, CTXLIB_MAP_LEN);
#endif
	fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	m = MAP_FAILED;
	if (!ftruncate(fd, CTXLIB_MAP_LEN))
		m = mmap(NULL, CTXLIB_MAP_LEN, PROT_READ | PROT_WRITE,
			 MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

int ctxlib_publish(void)
{
	unsigned char *m = ctxlib_map();
	struct timespec ts;
	uint64_t ns, payload;
	uint32_t v;

	if (!m)
		return -errno;
	clock_gettime(CLOCK_REALTIME, &ts);
	ns = (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
	payload = (uintptr_t)(m + CTXLIB_HDR);
	v = 2;					/* version */
	memcpy(m + 8, &v, 4);
	v = (uint32_t)ctxlib_payload(m + CTXLIB_HDR);
	memcpy(m + 12, &v, 4);			/* payload_size */
	memcpy(m + 16, &ns, 8);			/* published_at_ns */
	memcpy(m + 24, &payload, 8);		/* payload */
	/* the signature last: a reader that sees it sees the rest */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	memcpy(m, "OTEL_CTX", 8);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
}

static size_t ctxlib_attr(unsigned char *p, unsigned int key, const char *s)
{
	size_t len = strlen(s);

	p[0] = (unsigned char)key;
	p[1] = (unsigned char)len;
	memcpy(p + 2, s, len);
	return 2 + len;
}

void *ctxlib_thread_set(const struct ctxlib_spec *spec)
{
	unsigned char *r = (unsigned char *)ctxlib_storage;
	size_t n = CTXLIB_OTEL_HEAD;
	uint16_t size;

	/* (the caller's values are under 256 bytes each) */
	if (n + 2 + strlen(spec->endpoint) +
	    (spec->shadowed ? 2 + strlen(spec->shadowed) : 0) +
	    (spec->tenant ? 2 + strlen(spec->tenant) : 0) >
	    sizeof(ctxlib_storage))
		return NULL;
	memset(r, 0, CTXLIB_OTEL_HEAD);
	if (spec->trace_id) {
		memcpy(r, spec->trace_id, 16);
		memcpy(r + 16, spec->span_id, 8);
		r[25] = spec->trace_flags;
	}
	if (spec->shadowed)
		n += ctxlib_attr(r + n, CTXLIB_KEY_ENDPOINT, spec->shadowed);
	n += ctxlib_attr(r + n, CTXLIB_KEY_ENDPOINT, spec->endpoint);
	if (spec->tenant)
		n += ctxlib_attr(r + n, CTXLIB_KEY_TENANT, spec->tenant);
	size = (uint16_t)(n - CTXLIB_OTEL_HEAD);
	memcpy(r + 26, &size, 2);
	r[24] = 1;				/* valid */
	/* a profiler's interrupt of this thread sees the record whole */
	__atomic_store_n(&otel_thread_ctx_v1, r, __ATOMIC_RELEASE);
	return &otel_thread_ctx_v1;
}

#else /* CTXLIB_CUSTOM_LABELS */

/* The custom-labels v1 ABI, as its header declares it. */
typedef struct {
	size_t len;
	const unsigned char *buf;
} custom_labels_string_t;

typedef struct {
	custom_labels_string_t key;
	custom_labels_string_t value;
} custom_labels_label_t;

typedef struct {
	custom_labels_label_t *storage;
	size_t count;
	size_t capacity;
} custom_labels_labelset_t;

uint32_t custom_labels_abi_version = 1;
__thread custom_labels_labelset_t *custom_labels_current_set;

struct ctxlib_cl {
	custom_labels_labelset_t set;
	custom_labels_label_t labels[4];
};

_Static_assert(sizeof(struct ctxlib_cl) <= CTXLIB_STORAGE,
	       "the label set fits in the thread's buffer");

int ctxlib_publish(void)
{
	return 0;
}

/*
 * A string's length, measured at run time as a library given its
 * caller's strings measures it: its bytes are then in pages the process
 * has read. A profiler's non-faulting reads cannot bring in a page the
 * process never touched, such as that of a literal whose length the
 * compiler knew (here: this library's keys, alone on their page).
 */
static size_t ctxlib_strlen(const char *s)
{
	__asm__("" : "+r"(s));
	return strlen(s);
}

static void ctxlib_label(custom_labels_label_t *l, const char *key,
			 const char *value)
{
	l->key.len = key ? ctxlib_strlen(key) : 0;
	l->key.buf = (const unsigned char *)key;
	l->value.len = ctxlib_strlen(value);
	l->value.buf = (const unsigned char *)value;
}

void *ctxlib_thread_set(const struct ctxlib_spec *spec)
{
	struct ctxlib_cl *c = (struct ctxlib_cl *)ctxlib_storage;
	size_t n = 0;

	if (spec->keyless)
		ctxlib_label(&c->labels[n++], NULL, "keyless");
	ctxlib_label(&c->labels[n++], "endpoint", spec->endpoint);
	if (spec->shadowed)
		ctxlib_label(&c->labels[n++], "endpoint", spec->shadowed);
	if (spec->tenant)
		ctxlib_label(&c->labels[n++], "tenant", spec->tenant);
	c->set.storage = c->labels;
	c->set.count = n;
	c->set.capacity = sizeof(c->labels) / sizeof(c->labels[0]);
	__atomic_store_n(&custom_labels_current_set, &c->set,
			 __ATOMIC_RELEASE);
	return &custom_labels_current_set;
}

#endif /* CTXLIB_CUSTOM_LABELS */
