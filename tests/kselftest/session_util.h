/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the session tests: starting sessions, reading the
 * record stream to its end and checking every record's framing, label sets,
 * sysctls and debugfs counters.
 */
#ifndef PLABEL_SESSION_UTIL_H
#define PLABEL_SESSION_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "plabel_uapi.h"

#define SU_DEV		"/dev/plabel"
#define SU_DEBUGFS	"/sys/kernel/debug/plabel/"
#define SU_SYSCTL	"/proc/sys/kernel/plabel/"

static inline int su_have_dev(void)
{
	return access(SU_DEV, F_OK) == 0;
}

static inline pid_t su_gettid(void)
{
	return syscall(SYS_gettid);
}

static inline uint64_t su_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static inline uint64_t su_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Intern one label key=value; returns the id, 0 on failure. */
static inline uint64_t su_set_new(int fd, const char *key, const char *value)
{
	struct plabel_label l = {
		.key = (uintptr_t)key,
		.value = (uintptr_t)value,
		.key_len = strlen(key),
		.value_len = strlen(value),
	};
	struct plabel_set_new_args a = {
		.size = sizeof(a),
		.labels = (uintptr_t)&l,
		.count = 1,
	};

	if (ioctl(fd, PLABEL_IOC_SET_NEW, &a))
		return 0;
	return a.id;
}

static inline int su_labels_set(int fd, uint64_t id)
{
	struct plabel_labels_set_args a = { .size = sizeof(a), .id = id };

	return ioctl(fd, PLABEL_IOC_LABELS_SET, &a) ? -errno : 0;
}

static inline int su_slot_set(int fd, volatile uint64_t *slot)
{
	struct plabel_slot_args a = {
		.size = sizeof(a),
		.addr = (uintptr_t)slot,
	};

	return ioctl(fd, PLABEL_IOC_SLOT_SET, &a) ? -errno : 0;
}

static inline void su_args_init(struct plabel_session_start_args *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
}

static inline int su_start(int fd, struct plabel_session_start_args *a)
{
	return ioctl(fd, PLABEL_IOC_SESSION_START, a) ? -errno : 0;
}

static inline int su_stop(int fd)
{
	return ioctl(fd, PLABEL_IOC_SESSION_STOP) ? -errno : 0;
}

/* Numbers from a sysctl or debugfs file; -1 when unreadable. */
static inline long long su_read_num(const char *path)
{
	long long v = -1;
	FILE *f = fopen(path, "re");

	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* A debugfs counter of the module (live_sets, live_tasks, ...); -1 absent. */
static inline long su_counter(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), SU_DEBUGFS "%s", name);
	return su_read_num(path);
}

/*
 * Waits up to 5 s for a counter to read want (frees happen after an RCU
 * grace period or in a work item); returns the last value read.
 */
static inline long su_counter_wait(const char *name, long want)
{
	long v = -1;
	int i;

	for (i = 0; i < 100; i++) {
		v = su_counter(name);
		if (v == want)
			break;
		usleep(50000);
	}
	return v;
}

static inline int su_write_num(const char *path, long long v)
{
	FILE *f = fopen(path, "we");
	int ret;

	if (!f)
		return -errno;
	ret = fprintf(f, "%lld\n", v) < 0 ? -EIO : 0;
	if (fclose(f))
		ret = -errno;
	return ret;
}

/* The handler's cost between two snapshots of the debugfs counters. */
struct su_cost {
	long long calls, ns, samples;
	uint64_t t;
};

static inline void su_cost_snap(struct su_cost *c)
{
	c->calls = su_read_num(SU_DEBUGFS "handler_calls");
	c->ns = su_read_num(SU_DEBUGFS "handler_ns_total");
	c->samples = su_read_num(SU_DEBUGFS "samples");
	c->t = su_now_ns();
}

/* "N calls, N ns/call, N samples, N% of one CPU", or "" */
static inline const char *su_cost_str(const struct su_cost *a,
				      const struct su_cost *b, char *buf,
				      size_t len)
{
	long long calls = b->calls - a->calls, ns = b->ns - a->ns;

	if (a->calls < 0 || b->calls < 0 || calls <= 0)
		return "";
	snprintf(buf, len,
		 "handler: %lld calls, %lld ns/call, %lld samples, %.2f%% of one CPU",
		 calls, ns / calls, b->samples - a->samples,
		 100.0 * ns / (double)(b->t - a->t));
	return buf;
}

/* The whole stream of a session, read until EOF. */
struct su_stream {
	char *buf;
	size_t len;
	size_t cap;
	int bad;		/* framing errors found */
	char why[128];
};

/*
 * Append everything read() returns until it returns 0 (the session must
 * have been stopped) or fails. Returns 0 or -errno.
 */
static inline int su_drain(int fd, struct su_stream *st)
{
	for (;;) {
		ssize_t n;

		if (st->cap - st->len < (1 << 20)) {
			size_t cap = st->cap ? st->cap * 2 : 4 << 20;
			char *p = realloc(st->buf, cap);

			if (!p)
				return -ENOMEM;
			st->buf = p;
			st->cap = cap;
		}
		n = read(fd, st->buf + st->len, st->cap - st->len);
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		st->len += n;
	}
}

/* A thread draining the stream while the test runs, so no record drops. */
struct su_reader {
	int fd;
	int err;
	struct su_stream st;
	pthread_t thread;
};

static inline void *su_reader_fn(void *arg)
{
	struct su_reader *r = arg;

	r->err = su_drain(r->fd, &r->st);
	return NULL;
}

static inline int su_reader_start(struct su_reader *r, int fd)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	return -pthread_create(&r->thread, NULL, su_reader_fn, r);
}

/* After the session stopped: wait for EOF; returns the reader's error. */
static inline int su_reader_join(struct su_reader *r)
{
	pthread_join(r->thread, NULL);
	return r->err;
}

static inline void su_stream_free(struct su_stream *st)
{
	free(st->buf);
	memset(st, 0, sizeof(*st));
}

/* Iterate records; returns NULL at the end or at a framing error. */
static inline struct plabel_rec_header *su_next(struct su_stream *st,
						size_t *off)
{
	struct plabel_rec_header *h;

	if (*off + sizeof(*h) > st->len)
		return NULL;
	h = (struct plabel_rec_header *)(st->buf + *off);
	if (h->size < sizeof(*h) || h->size % 8 || h->size > st->len - *off) {
		st->bad++;
		snprintf(st->why, sizeof(st->why), "bad size %u at %zu",
			 h->size, *off);
		return NULL;
	}
	*off += h->size;
	return h;
}

/* Bytes of a snapshot's registers (PLABEL_SAMPLE_REGS set). */
static inline size_t su_regs_bytes(const struct plabel_rec_sample *s)
{
	return 8 * (s->flags & PLABEL_SAMPLE_FP_REGS ? PLABEL_FP_REGS_NR :
						       PLABEL_REGS_NR);
}

/* Check each record's size against its type; counts errors in st->bad. */
/*
 * Every record's size against its type; and the promise of SYNC records:
 * no SAMPLE, THREAD, OFFCPU or ALLOC record of a CPU stamped before the
 * time of that CPU's last SYNC, and SYNC times growing.
 */
#define SU_SYNC_CPUS	1024

static inline void su_check_sync(struct su_stream *st, uint64_t *synced,
				 struct plabel_rec_header *h)
{
	if (h->type == PLABEL_REC_SYNC) {
		struct plabel_rec_sync *y = (void *)h;

		if (y->cpu >= SU_SYNC_CPUS || y->reserved ||
		    y->time_ns <= synced[y->cpu]) {
			st->bad++;
			snprintf(st->why, sizeof(st->why),
				 "SYNC cpu %u at %llu after %llu", y->cpu,
				 (unsigned long long)y->time_ns,
				 y->cpu < SU_SYNC_CPUS ? (unsigned long long)
				 synced[y->cpu] : 0ULL);
			return;
		}
		synced[y->cpu] = y->time_ns;
	} else if (h->type == PLABEL_REC_SAMPLE ||
		   h->type == PLABEL_REC_THREAD ||
		   h->type == PLABEL_REC_OFFCPU ||
		   h->type == PLABEL_REC_ALLOC) {
		struct plabel_rec_sample *s = (void *)h;

		if (s->cpu < SU_SYNC_CPUS && s->time_ns < synced[s->cpu]) {
			st->bad++;
			snprintf(st->why, sizeof(st->why),
				 "type %u on cpu %u at %llu, before its SYNC "
				 "at %llu", h->type, s->cpu,
				 (unsigned long long)s->time_ns,
				 (unsigned long long)synced[s->cpu]);
		}
	}
}

static inline void su_check(struct su_stream *st)
{
	/* each call its own: threads check their streams at once */
	uint64_t *synced = calloc(SU_SYNC_CPUS, sizeof(*synced));
	struct plabel_rec_header *h;
	size_t off = 0;

	if (!synced) {
		st->bad++;
		snprintf(st->why, sizeof(st->why), "out of memory");
		return;
	}
	while ((h = su_next(st, &off))) {
		size_t need = 0;

		if (h->size >= sizeof(struct plabel_rec_sample) ||
		    (h->type == PLABEL_REC_SYNC &&
		     h->size >= sizeof(struct plabel_rec_sync)))
			su_check_sync(st, synced, h);
		switch (h->type) {
		case PLABEL_REC_STREAM:
			need = sizeof(struct plabel_rec_stream);
			break;
		case PLABEL_REC_LABELSET: {
			struct plabel_rec_labelset *l = (void *)h;
			struct plabel_rec_label *e = (void *)(l + 1);
			uint32_t i;

			need = sizeof(*l);
			if (h->size >= need)
				need += l->count * sizeof(*e);
			if (h->size >= need)
				for (i = 0; i < l->count; i++)
					need += e[i].key_len + e[i].value_len;
			break;
		}
		case PLABEL_REC_SAMPLE:
		case PLABEL_REC_THREAD:
		case PLABEL_REC_OFFCPU:
		case PLABEL_REC_THREADSTATE: {
			struct plabel_rec_sample *s = (void *)h;

			need = sizeof(*s);
			if (h->size >= need)
				need += 8 * (s->nr_kernel + s->nr_user);
			if (h->size >= need && (s->flags & PLABEL_SAMPLE_REGS))
				need += su_regs_bytes(s) + s->stack_size;
			break;
		}
		case PLABEL_REC_ALLOC: {
			struct plabel_rec_sample *s = (void *)h;

			need = sizeof(*s) + sizeof(struct plabel_rec_alloc);
			if (h->size >= need)
				need += 8 * (s->nr_kernel + s->nr_user);
			if (h->size >= need && (s->flags & PLABEL_SAMPLE_REGS))
				need += su_regs_bytes(s) + s->stack_size;
			break;
		}
		case PLABEL_REC_FREE:
			need = sizeof(struct plabel_rec_free);
			break;
		case PLABEL_REC_LOST:
			need = sizeof(struct plabel_rec_lost);
			break;
		case PLABEL_REC_MMAP: {
			struct plabel_rec_mmap *m = (void *)h;

			need = sizeof(*m);
			if (h->size >= need)
				need += m->path_len;
			break;
		}
		case PLABEL_REC_EXEC:
			need = sizeof(struct plabel_rec_exec);
			break;
		case PLABEL_REC_COMM:
			need = sizeof(struct plabel_rec_comm);
			break;
		case PLABEL_REC_OFFCPU_END:
			need = sizeof(struct plabel_rec_offcpu_end);
			break;
		case PLABEL_REC_SYNC:
			need = sizeof(struct plabel_rec_sync);
			break;
		default:
			st->bad++;
			snprintf(st->why, sizeof(st->why), "unknown type %u",
				 h->type);
			continue;
		}
		if (h->size < need || h->size >= need + 8) {
			st->bad++;
			snprintf(st->why, sizeof(st->why),
				 "type %u size %u, contents need %zu",
				 h->type, h->size, need);
		}
	}
	free(synced);
}

/* Records that went through the rings: not STREAM, LOST, SYNC (read()'s). */
static inline uint64_t su_ring_records(struct su_stream *st)
{
	struct plabel_rec_header *h;
	uint64_t n = 0;
	size_t off = 0;

	while ((h = su_next(st, &off)))
		if (h->type != PLABEL_REC_STREAM &&
		    h->type != PLABEL_REC_LOST && h->type != PLABEL_REC_SYNC)
			n++;
	return n;
}

static inline uint64_t *su_ips(struct plabel_rec_sample *s)
{
	return (uint64_t *)(s + 1);
}

/* Count records of a type; the sum of lost counts for LOST. */
static inline uint64_t su_count(struct su_stream *st, uint32_t type)
{
	struct plabel_rec_header *h;
	size_t off = 0;
	uint64_t n = 0;

	while ((h = su_next(st, &off))) {
		if (h->type != type)
			continue;
		/* records lost; other kinds count other things */
		if (type == PLABEL_REC_LOST &&
		    ((struct plabel_rec_lost *)h)->kind == PLABEL_LOST_RECORDS)
			n += ((struct plabel_rec_lost *)h)->lost;
		else if (type == PLABEL_REC_LOST)
			continue;
		else
			n++;
	}
	return n;
}

/* The LABELSET record for id, or NULL. */
static inline struct plabel_rec_labelset *su_labelset(struct su_stream *st,
						      uint64_t id)
{
	struct plabel_rec_header *h;
	size_t off = 0;

	while ((h = su_next(st, &off)))
		if (h->type == PLABEL_REC_LABELSET &&
		    ((struct plabel_rec_labelset *)h)->id == id)
			return (void *)h;
	return NULL;
}

/* 1 when the set record is exactly {key=value}. */
static inline int su_labelset_is(struct plabel_rec_labelset *l,
				 const char *key, const char *value)
{
	struct plabel_rec_label *e = (void *)(l + 1);
	const char *p = (const char *)(e + l->count);

	return l->count == 1 && e->key_len == strlen(key) &&
	       e->value_len == strlen(value) &&
	       !memcmp(p, key, e->key_len) &&
	       !memcmp(p + e->key_len, value, e->value_len);
}

/* Burn CPU until CLOCK_MONOTONIC passes end. */
static inline void su_burn_until(uint64_t end)
{
	volatile uint64_t x = 0;
	int i;

	while (su_now_ns() < end)
		for (i = 0; i < 100000; i++)
			x += i;
}

/* Burn CPU in this thread for about ns of its own CPU time. */
static inline void su_burn_cpu(uint64_t ns)
{
	uint64_t end = su_thread_cpu_ns() + ns;
	volatile uint64_t x = 0;
	int i;

	while (su_thread_cpu_ns() < end)
		for (i = 0; i < 200000; i++)
			x += i;
}

/* Each record h of stream st, at offset off. */
#define FOR_EACH_REC(st, h, off) \
	for (off = 0; (h = su_next(st, &off));)

/*
 * After the session stopped: the reader's whole stream in *out, every
 * record's size checked against its type. Asserts, so only in a test body.
 */
#define READ_STREAM(rdr, out) do {					\
		ASSERT_EQ(0, su_reader_join(rdr));			\
		*(out) = (rdr)->st;					\
		su_check(out);						\
		ASSERT_EQ(0, (out)->bad) TH_LOG("%s", (out)->why);	\
	} while (0)

#endif /* PLABEL_SESSION_UTIL_H */
