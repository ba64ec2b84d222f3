/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The thread-context test programs (tests/e2e/tlsctx/): a program that
 * does not use libplabel publishes what its threads do for outside
 * profilers, in the OpenTelemetry thread context (OTEP 4947, its key map
 * in the OTEP 4719 process context) or in the custom-labels v1 ABI.
 * ctxlib.c is the writer, standing for a third-party library (its names
 * are its own, ctxlib_*); app.c is the program, which calls it directly
 * or, loaded with dlopen(), through dlsym().
 */
#ifndef PLABEL_E2E_TLSCTX_CTX_H
#define PLABEL_E2E_TLSCTX_CTX_H

#include <stdint.h>

/* The OTel key map the process context publishes: index -> key. */
#define CTXLIB_KEY_ENDPOINT	0
#define CTXLIB_KEY_TENANT	1
#define CTXLIB_KEYS		{ "endpoint", "tenant" }

/* What a thread does. */
struct ctxlib_spec {
	const char *endpoint;
	/*
	 * Set before endpoint and overridden by it: OTel writes it as an
	 * earlier entry of endpoint's key index (the last entry wins),
	 * custom-labels as a later label of the key (the first wins).
	 * NULL: none.
	 */
	const char *shadowed;
	const char *tenant;		/* NULL: none */
	const uint8_t *trace_id;	/* 16 bytes; NULL: no span (OTel) */
	const uint8_t *span_id;		/* 8 bytes */
	uint8_t trace_flags;
	int keyless;		/* custom-labels: a label with no key */
};

/*
 * Publish the process context (OTel: the key map; custom-labels: nothing
 * to publish). 0 or a negative errno.
 */
int ctxlib_publish(void);
typedef int (*ctxlib_publish_fn)(void);

/*
 * Make spec the calling thread's context. Returns the address of the
 * thread-local pointer in this thread, or NULL when spec does not fit.
 */
void *ctxlib_thread_set(const struct ctxlib_spec *spec);
typedef void *(*ctxlib_thread_set_fn)(const struct ctxlib_spec *spec);

#endif /* PLABEL_E2E_TLSCTX_CTX_H */
