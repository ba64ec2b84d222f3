// SPDX-License-Identifier: GPL-2.0
/*
 * Labels read from the sampling interrupt while they change: threads
 * intern sets, switch to them through their slot (and sometimes the
 * ioctl), drop them while the slot still names them, and start and end
 * short threads, all under a system-wide session sampling fast. The
 * samples must carry labels, including labels that only ever lived in a
 * slot; every labeled sample's set must arrive as a well-formed LABELSET
 * record with this test's strings; and the live set and task counts must
 * come back to where they started. Kernel warnings fail the VM run.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "plabel_uapi.h"
#include "kselftest/kselftest_harness.h"
#include "session_util.h"

#define LS_WORKERS	6
#define LS_SECONDS	2
#define LS_MAX_IDS	65536

static double ls_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int ls_new(int fd, const char *key, const char *value, uint64_t *id)
{
	struct plabel_label l = {
		.key = (uintptr_t)key, .key_len = strlen(key),
		.value = (uintptr_t)value, .value_len = strlen(value),
	};
	struct plabel_set_new_args a = {
		.size = sizeof(a), .labels = (uintptr_t)&l, .count = 1,
	};

	if (ioctl(fd, PLABEL_IOC_SET_NEW, &a))
		return -errno;
	*id = a.id;
	return 0;
}

static int ls_put(int fd, uint64_t id)
{
	struct plabel_set_put_args a = { .size = sizeof(a), .id = id };

	return ioctl(fd, PLABEL_IOC_SET_PUT, &a) ? -errno : 0;
}

static int ls_use(int fd, uint64_t id)
{
	struct plabel_labels_set_args a = { .size = sizeof(a), .id = id };

	return ioctl(fd, PLABEL_IOC_LABELS_SET, &a) ? -errno : 0;
}

static int ls_slot(int fd, uint64_t addr)
{
	struct plabel_slot_args a = { .size = sizeof(a), .addr = addr };

	return ioctl(fd, PLABEL_IOC_SLOT_SET, &a) ? -errno : 0;
}

static __thread uint64_t ls_tls_slot;

struct ls_state {
	int fd;
	double end;
	int errors;
	const char *first;	/* the first call that failed, and how */
	int first_err;
	pthread_mutex_t lock;
};

static void ls_error(struct ls_state *s, const char *what, int err)
{
	pthread_mutex_lock(&s->lock);
	if (!s->errors++) {
		s->first = what;
		s->first_err = err < 0 ? -err : err;
	}
	pthread_mutex_unlock(&s->lock);
}

static volatile uint64_t ls_sink;

static void ls_spin(double seconds)
{
	double end = ls_now() + seconds;
	uint64_t x = 0;

	while (ls_now() < end)
		for (int i = 0; i < 1000; i++)
			x += i * x + 1;
	ls_sink = x;
}

static void *ls_short_thread(void *p)
{
	ls_spin(0.002);
	return NULL;
}

static void *ls_worker(void *p)
{
	struct ls_state *s = p;
	unsigned int n = 0;
	char value[64];
	pthread_t th;
	uint64_t id = 0;
	int err;

	ls_tls_slot = 0;
	err = ls_slot(s->fd, (uintptr_t)&ls_tls_slot);
	if (err)
		ls_error(s, "SLOT_SET", err);
	while (ls_now() < s->end) {
		/*
		 * Unique per thread and round: workers share the file, which
		 * holds one reference per set, so two workers interning the
		 * same labels would share one reference and one of their
		 * SET_PUTs would rightly fail.
		 */
		snprintf(value, sizeof(value), "%ld-%u", (long)gettid(), n);
		/* Even rounds: slot only. Odd rounds: kernel-stored too. */
		err = ls_new(s->fd, n & 1 ? "kern" : "slot", value, &id);
		if (err) {
			ls_error(s, "SET_NEW", err);
			break;
		}
		ls_tls_slot = id;
		err = n & 1 ? ls_use(s->fd, id) : 0;
		if (err)
			ls_error(s, "LABELS_SET", err);
		ls_spin(0.003);
		/* Dropped while the slot (and maybe the task) names it. */
		err = ls_put(s->fd, id);
		if (err)
			ls_error(s, "SET_PUT", err);
		ls_spin(0.001);
		if (n % 16 == 0) {
			err = pthread_create(&th, NULL, ls_short_thread, NULL);
			if (err || (err = pthread_join(th, NULL)))
				ls_error(s, "pthread_create", err);
		}
		n++;
	}
	ls_tls_slot = 0;
	err = ls_slot(s->fd, 0);
	if (err || (err = ls_use(s->fd, 0)))
		ls_error(s, "unregistering", err);
	return NULL;
}

struct ls_reader {
	int fd;
	int bad;		/* malformed records */
	long samples;
	long labeled;
	int nids;		/* distinct labeled ids seen in samples */
	uint64_t ids[LS_MAX_IDS];
	int nsets;		/* LABELSET records of ours */
	int slot_sets;		/* of which with key "slot" */
	uint64_t set_ids[LS_MAX_IDS];
	int slot_labeled;	/* labeled samples with a "slot" set */
};

static int ls_has(const uint64_t *v, int n, uint64_t id)
{
	for (int i = 0; i < n; i++)
		if (v[i] == id)
			return 1;
	return 0;
}

static void ls_labelset(struct ls_reader *r, const char *rec, uint32_t size)
{
	const struct plabel_rec_labelset *ls = (const void *)rec;
	const struct plabel_rec_label *l = (const void *)(ls + 1);
	const char *p;
	size_t need = sizeof(*ls);
	uint32_t i;

	if (size < sizeof(*ls) || ls->count > PLABEL_MAX_LABELS) {
		r->bad++;
		return;
	}
	need += ls->count * sizeof(*l);
	if (need > size) {
		r->bad++;
		return;
	}
	p = (const char *)(l + ls->count);
	for (i = 0; i < ls->count; i++)
		need += l[i].key_len + l[i].value_len;
	if (need > size || !ls->id) {
		r->bad++;
		return;
	}
	/* Ours: one label, key "slot" or "kern". */
	if (ls->count != 1 || l[0].key_len != 4 ||
	    (memcmp(p, "slot", 4) && memcmp(p, "kern", 4)))
		return;
	if (l[0].value_len < 3 || !memchr(p + 4, '-', l[0].value_len)) {
		r->bad++;
		return;
	}
	if (ls_has(r->set_ids, r->nsets, ls->id) || r->nsets >= LS_MAX_IDS)
		return;
	r->set_ids[r->nsets++] = ls->id;
	if (!memcmp(p, "slot", 4))
		r->slot_sets++;
}

static void *ls_read(void *p)
{
	struct ls_reader *r = p;
	size_t cap = 1 << 20;
	char *buf = malloc(cap);
	ssize_t n;

	if (!buf) {
		r->bad++;
		return NULL;
	}
	while ((n = read(r->fd, buf, cap)) > 0) {
		size_t off = 0;

		while (off + sizeof(struct plabel_rec_header) <= (size_t)n) {
			const struct plabel_rec_header *h = (void *)(buf + off);

			if (h->size < sizeof(*h) || h->size % 8 ||
			    h->size > n - off) {
				r->bad++;
				break;
			}
			if (h->type == PLABEL_REC_SAMPLE) {
				const struct plabel_rec_sample *s = (void *)h;

				r->samples++;
				if (h->size >= sizeof(*s) && s->set_id) {
					r->labeled++;
					if (!ls_has(r->ids, r->nids, s->set_id) &&
					    r->nids < LS_MAX_IDS)
						r->ids[r->nids++] = s->set_id;
				}
			} else if (h->type == PLABEL_REC_LABELSET) {
				ls_labelset(r, (const char *)h, h->size);
			}
			off += h->size;
		}
	}
	if (n < 0)
		r->bad++;
	free(buf);
	return NULL;
}

TEST(labels_change_under_sampling)
{
	struct plabel_session_start_args a = { .size = sizeof(a) };
	pthread_t workers[LS_WORKERS], reader;
	struct ls_state s = { 0 };
	struct ls_reader *r;
	long tasks0, sets0;
	int i, ours = 0;

	if (access(PLABEL_DEVICE, F_OK))
		SKIP(return, PLABEL_DEVICE " absent: module not loaded");
	if (geteuid())
		SKIP(return, "needs root for a session");
	tasks0 = su_counter("live_tasks");
	sets0 = su_counter("live_sets");
	r = calloc(1, sizeof(*r));
	ASSERT_NE(NULL, r);
	r->fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, r->fd);
	s.fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, s.fd);
	pthread_mutex_init(&s.lock, NULL);

	a.target = PLABEL_TARGET_ALL;
	a.callchain = PLABEL_CALLCHAIN_NONE;
	a.sample_hz = 1000;
	a.record = PLABEL_RECORD_CPU | PLABEL_RECORD_THREADS;
	ASSERT_EQ(0, ioctl(r->fd, PLABEL_IOC_SESSION_START, &a))
		TH_LOG("session start: %s", strerror(errno));
	ASSERT_EQ(0, pthread_create(&reader, NULL, ls_read, r));

	s.end = ls_now() + LS_SECONDS;
	for (i = 0; i < LS_WORKERS; i++)
		ASSERT_EQ(0, pthread_create(&workers[i], NULL, ls_worker, &s));
	for (i = 0; i < LS_WORKERS; i++)
		ASSERT_EQ(0, pthread_join(workers[i], NULL));
	ASSERT_EQ(0, ioctl(r->fd, PLABEL_IOC_SESSION_STOP));
	ASSERT_EQ(0, pthread_join(reader, NULL));

	EXPECT_EQ(0, s.errors)
		TH_LOG("first failure: %s: %s", s.first, strerror(s.first_err));
	EXPECT_EQ(0, r->bad);
	TH_LOG("%ld samples, %ld labeled, %d ids, %d of our sets (%d slot)",
	       r->samples, r->labeled, r->nids, r->nsets, r->slot_sets);
	EXPECT_LT(0, r->samples);
	EXPECT_LT(0, r->labeled);
	/* Labels that only a slot ever named reached samples. */
	EXPECT_LT(0, r->slot_sets);
	/* Each labeled sample's set came with its strings. */
	for (i = 0; i < r->nids; i++) {
		if (ls_has(r->set_ids, r->nsets, r->ids[i]))
			ours++;
		else
			TH_LOG("no LABELSET for sampled id %#llx",
			       (unsigned long long)r->ids[i]);
	}
	EXPECT_EQ(r->nids, ours);

	close(s.fd);
	close(r->fd);
	free(r);
	if (tasks0 >= 0) {
		EXPECT_EQ(tasks0, su_counter_wait("live_tasks", tasks0));
		EXPECT_EQ(sets0, su_counter_wait("live_sets", sets0));
	}
}

TEST_HARNESS_MAIN
