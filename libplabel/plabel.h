/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libplabel: key/value labels for the calling thread, seen by the plabel
 * kernel module in every CPU sample and thread-creation record it takes.
 *
 * Every function returns 0 (or a count) on success and a negative errno on
 * failure, except plabel_labels_new() (NULL and errno) and
 * plabel_labels_free(). The library never prints.
 *
 * When /dev/plabel cannot be opened the library keeps labels in the
 * process only: plabel_available() returns 0 and everything else behaves
 * the same, but nothing is sampled.
 *
 * Async-signal safety: plabel_switch(), plabel_get() and plabel_available()
 * may be called from a signal handler once the calling thread has made a
 * label call (any function below but plabel_labels_new/free) outside the
 * handler. plabel_clear() and plabel_switch(NULL) are async-signal-safe on
 * the same condition. plabel_set(), plabel_do(), plabel_labels_new() and
 * plabel_labels_free() are not (they may allocate and take a mutex).
 * Every function is thread-safe.
 *
 * Documentation/library.rst has the full reference and the ABI policy.
 */
#ifndef PLABEL_H
#define PLABEL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PLABEL_API
#define PLABEL_API __attribute__((visibility("default")))
#endif

/**
 * struct plabel_kv - one label
 * @key: NUL-terminated key, 1 to max_key_len bytes (sysctl
 *	 kernel.plabel.max_key_len, at most 255)
 * @value: NUL-terminated value, 0 to max_value_len bytes (sysctl
 *	   kernel.plabel.max_value_len, at most 4096)
 */
struct plabel_kv {
	const char *key;
	const char *value;
};

/**
 * struct plabel_labels - an interned label set (opaque)
 *
 * Made by plabel_labels_new(), attached to a thread with plabel_switch(),
 * released with plabel_labels_free(). Equal contents give the same set.
 */
struct plabel_labels;

/**
 * plabel_set() - replace the calling thread's labels
 * @kvs: the labels, in any order
 * @n: number of labels; 0 clears (@kvs may then be NULL)
 *
 * A set never used before costs one system call; later calls with the same
 * labels find the set in a per-thread cache without locking or allocating.
 *
 * Return: 0; -EINVAL for NULL @kvs with @n > 0, a NULL key or value, an
 * empty key, a key given twice, or a control byte (below 0x20, or 0x7f) in
 * a key or value; -E2BIG for more labels or a longer key or
 * value than the limits allow; -EDQUOT when the kernel's per-user quota is
 * used up; -ENOMEM. On error the thread's labels are unchanged.
 *
 * Not async-signal-safe.
 */
PLABEL_API int plabel_set(const struct plabel_kv *kvs, size_t n);

/**
 * plabel_clear() - remove all labels of the calling thread
 *
 * Also clears labels the thread inherited from its creator.
 *
 * Return: 0, or a negative errno from the kernel.
 *
 * Async-signal-safe once the thread has made a label call.
 */
PLABEL_API int plabel_clear(void);

/**
 * plabel_get() - read the calling thread's labels
 * @out: array receiving up to @cap labels, sorted by key (may be NULL
 *	 when @cap is 0)
 * @cap: its capacity
 *
 * The strings belong to the library and stay valid until the calling
 * thread's labels change (when they come from a set made by
 * plabel_labels_new(), until that set is freed too). A thread's first call
 * includes the labels it inherited from its creator.
 *
 * Return: the number of labels the thread has (may exceed @cap); -EINVAL
 * for NULL @out with @cap > 0; -ENOMEM when the thread's first label call
 * cannot allocate its state.
 *
 * Async-signal-safe once the thread has made a label call.
 */
PLABEL_API int plabel_get(struct plabel_kv *out, size_t cap);

/**
 * plabel_do() - run a function with labels added, like Go's pprof.Do
 * @kvs: labels to merge into the thread's current ones (a key given
 *	 replaces the current value of that key)
 * @n: number of labels (0: run @fn with the current labels)
 * @fn: the function to run
 * @arg: its argument
 *
 * Runs @fn(@arg) exactly once when @fn is not NULL, with the merged labels
 * when they are valid and with the current labels otherwise, then restores
 * the labels the thread had before the call. Calls nest. A repeated call
 * with the same @kvs on top of the same labels allocates nothing and makes
 * no system call. @fn must return normally (no longjmp() out of it, no
 * thread cancellation inside it).
 *
 * Return: 0 when @fn ran with the merged labels; -EINVAL for a NULL @fn (not
 * run) or invalid @kvs, -E2BIG, -EDQUOT, -ENOMEM as for plabel_set() (@fn
 * ran with the labels unchanged).
 *
 * Not async-signal-safe.
 */
PLABEL_API int plabel_do(const struct plabel_kv *kvs, size_t n,
			 void (*fn)(void *), void *arg);

/**
 * plabel_labels_new() - intern a label set for plabel_switch()
 * @kvs: the labels, in any order
 * @n: number of labels (0 gives the empty set)
 *
 * Return: the set, holding one reference that plabel_labels_free()
 * releases; NULL with errno set (EINVAL, E2BIG, EDQUOT, ENOMEM) on error.
 *
 * Not async-signal-safe.
 */
PLABEL_API struct plabel_labels *plabel_labels_new(const struct plabel_kv *kvs,
						   size_t n);

/**
 * plabel_switch() - make a set the calling thread's labels
 * @l: the set, or NULL to clear
 *
 * A store into the thread's registered slot: no system call, no lock, no
 * allocation (except the thread's first label call, and a clear of labels
 * inherited from the creator, which costs one system call once). @l must
 * stay alive (not passed to plabel_labels_free()) while any thread is
 * switched to it.
 *
 * Return: 0, or a negative errno when the thread's first label call fails
 * (-ENOMEM, or the kernel's error registering the slot) or the one-time
 * clear of inherited labels fails; the labels are then unchanged.
 *
 * Async-signal-safe once the thread has made a label call.
 */
PLABEL_API int plabel_switch(const struct plabel_labels *l);

/**
 * plabel_labels_free() - release a set made by plabel_labels_new()
 * @l: the set (NULL is ignored)
 *
 * Not async-signal-safe.
 */
PLABEL_API void plabel_labels_free(struct plabel_labels *l);

/**
 * plabel_available() - whether labels reach the kernel module
 *
 * Return: 1 when /dev/plabel is in use, 0 when the library keeps labels in
 * the process only. Decided once per process, at the first call of any
 * function.
 *
 * Async-signal-safe once any label call has returned in the process.
 */
PLABEL_API int plabel_available(void);

/**
 * plabel_set_trace() - attach the active span to the calling thread
 * @trace_id: 16-byte W3C trace id, or NULL (or all zero) to detach
 * @span_id: 8-byte W3C span id, or NULL (or all zero) to detach
 * @flags: the W3C trace-flags byte (0 to 0xff; 0 when detaching)
 *
 * Outside profilers that read the OpenTelemetry thread context (OTEP 4947,
 * the TLS pointer otel_thread_ctx_v1) see the span beside the thread's
 * labels until it is detached; Documentation/otel.rst has the layout. The
 * kernel module's samples do not carry it. While a span is attached each
 * label change copies the set's attributes into the thread's record
 * (at most 612 bytes); without one a switch stores a pointer.
 *
 * Return: 0; -EINVAL when only one of @trace_id and @span_id is given
 * (nonzero), @flags is above 0xff, or @flags is nonzero when detaching;
 * -ENOMEM when the thread's first span cannot allocate its record. On
 * error the thread's span is unchanged.
 *
 * Async-signal-safe once the thread has attached a span outside a signal
 * handler.
 */
PLABEL_API int plabel_set_trace(const unsigned char *trace_id,
				const unsigned char *span_id,
				unsigned int flags);

/**
 * struct plabel_otel_stats - what the OpenTelemetry contexts carry
 * @keys_dropped: labels left out of sets' records because the key map
 *	(256 keys, a u8 index) was full when the set was made
 * @values_dropped: labels left out because the value is over 255 bytes
 * @space_dropped: labels left out because the record would pass 640 bytes
 * @keys_used: entries in threadlocal.attribute_key_map
 * @context_published: 1 when the OTEL_CTX process context is published
 * @context_memfd: 1 when its mapping is a memfd (else anonymous)
 * @pad: zero
 *
 * The drop counters count labels, once per set made (not per switch),
 * since the process started; a label is either in a record whole or not
 * at all.
 */
struct plabel_otel_stats {
	unsigned long long keys_dropped;
	unsigned long long values_dropped;
	unsigned long long space_dropped;
	unsigned int keys_used;
	unsigned int context_published;
	unsigned int context_memfd;
	unsigned int pad;
};

/**
 * plabel_otel_stats() - read the OpenTelemetry publication counters
 * @st: receives the counters
 * @size: sizeof(*@st) as the caller knows it (a shorter, older struct
 *	  gets its fields; a longer one gets zeros past the library's)
 *
 * Return: 0; -EINVAL for a NULL @st.
 *
 * Not async-signal-safe.
 */
PLABEL_API int plabel_otel_stats(struct plabel_otel_stats *st, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* PLABEL_H */
