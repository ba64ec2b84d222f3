// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A small request-serving program labeled with libplabel: the API tutorial.
 *
 * A dispatcher thread hands requests to a pool of worker threads. Each
 * request names an endpoint and a tenant; a worker runs it under the labels
 * endpoint=... and tenant=... with plabel_do(), so every CPU sample taken
 * while it runs carries them. The endpoints cost different, known amounts
 * of CPU (/api/users 1 unit, /api/search 3, /api/report 6), which is what
 * a profile split by endpoint shows.
 *
 * The pool is started under component=pool, and each worker inherits that
 * label: the thread-create profile shows who created the workers and
 * under which labels. The dispatcher uses the handle API (interned once,
 * switched with plabel_switch(), no system call) for its own bookkeeping.
 *
 * Each handler also reads its thread's CPU clock around the work, and the
 * server prints the split it measured that way at the end: what the
 * profile's split by label should agree with, whatever the machine (on a
 * busy virtual machine, stalls of the virtual CPU count as CPU time of the
 * request they hit, so the split drifts from the nominal 1:3:6).
 *
 *   server [-t THREADS] [-n REQUESTS] [-u UNIT_ITERATIONS]
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <plabel.h>

struct endpoint {
	const char *path;
	unsigned int cost;	/* units of CPU work per request */
	uint64_t (*handler)(uint64_t seed, unsigned long iters);
};

struct request {
	const struct endpoint *ep;
	unsigned int tenant;
	uint64_t seed;
};

/* The work itself: three different functions so the profile tells them apart. */
__attribute__((noinline)) static uint64_t users_lookup(uint64_t x,
							unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

__attribute__((noinline)) static uint64_t search_index(uint64_t x,
							unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++)
		x ^= (x << 13) ^ (x >> 7) ^ (x << 17);
	return x;
}

__attribute__((noinline)) static uint64_t render_report(uint64_t x,
							 unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++)
		x = (x >> 1) ^ (-(x & 1) & 0xd800000000000000ULL) ^ i;
	return x;
}

static const struct endpoint endpoints[] = {
	{ "/api/users", 1, users_lookup },
	{ "/api/search", 3, search_index },
	{ "/api/report", 6, render_report },
};
#define NR_ENDPOINTS (sizeof(endpoints) / sizeof(endpoints[0]))

static const char *const tenants[] = { "acme", "globex" };
#define NR_TENANTS (sizeof(tenants) / sizeof(tenants[0]))

/* CPU time the handlers measured, by endpoint and by tenant (ns). */
static uint64_t endpoint_ns[NR_ENDPOINTS], tenant_ns[NR_TENANTS];

/* A bounded queue of requests shared by the dispatcher and the workers. */
#define QUEUE_LEN 64
static struct request queue[QUEUE_LEN];
static unsigned int q_head, q_tail;
static int q_closed;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_nonempty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t q_nonfull = PTHREAD_COND_INITIALIZER;

static unsigned long unit_iters = 200000;
static volatile uint64_t sink;

static void queue_push(const struct request *r)
{
	pthread_mutex_lock(&q_lock);
	while (q_tail - q_head == QUEUE_LEN)
		pthread_cond_wait(&q_nonfull, &q_lock);
	queue[q_tail++ % QUEUE_LEN] = *r;
	pthread_cond_signal(&q_nonempty);
	pthread_mutex_unlock(&q_lock);
}

static int queue_pop(struct request *r)
{
	pthread_mutex_lock(&q_lock);
	while (q_head == q_tail && !q_closed)
		pthread_cond_wait(&q_nonempty, &q_lock);
	if (q_head == q_tail) {
		pthread_mutex_unlock(&q_lock);
		return 0;
	}
	*r = queue[q_head++ % QUEUE_LEN];
	pthread_cond_signal(&q_nonfull);
	pthread_mutex_unlock(&q_lock);
	return 1;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void handle_request(void *arg)
{
	const struct request *r = arg;
	uint64_t t0 = thread_cpu_ns(), ns;

	sink += r->ep->handler(r->seed, r->ep->cost * unit_iters);
	ns = thread_cpu_ns() - t0;
	__atomic_fetch_add(&endpoint_ns[r->ep - endpoints], ns,
			   __ATOMIC_RELAXED);
	__atomic_fetch_add(&tenant_ns[r->tenant], ns, __ATOMIC_RELAXED);
}

static void *worker(void *arg)
{
	struct request r;

	while (queue_pop(&r)) {
		struct plabel_kv kv[] = {
			{ "endpoint", r.ep->path },
			{ "tenant", tenants[r.tenant] },
		};
		int err = plabel_do(kv, 2, handle_request, &r);

		if (err) {
			fprintf(stderr, "server: plabel_do: %s\n",
				strerror(-err));
			exit(1);
		}
	}
	return NULL;
}

/* Workers are created under component=pool and inherit it. */
static int start_pool(pthread_t *tids, int n)
{
	struct plabel_kv kv[] = { { "component", "pool" } };
	int err = plabel_set(kv, 1);

	if (err)
		return err;
	for (int i = 0; i < n; i++) {
		err = pthread_create(&tids[i], NULL, worker, NULL);
		if (err)
			return -err;
	}
	return plabel_clear();
}

/* The split the handlers measured, to hold the profile's against. */
static void print_measured(void)
{
	uint64_t total = 0;

	for (size_t i = 0; i < NR_ENDPOINTS; i++)
		total += endpoint_ns[i];
	if (!total)
		return;
	printf("CPU time the handlers measured (their threads' clocks):\n");
	for (size_t i = 0; i < NR_ENDPOINTS; i++)
		printf("  endpoint=%-12s %5.1f%%\n", endpoints[i].path,
		       100.0 * endpoint_ns[i] / total);
	for (size_t i = 0; i < NR_TENANTS; i++)
		printf("  tenant=%-14s %5.1f%%\n", tenants[i],
		       100.0 * tenant_ns[i] / total);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: server [-t THREADS] [-n REQUESTS] [-u UNIT_ITERATIONS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct plabel_kv dispatch_kv[] = { { "component", "dispatcher" } };
	struct plabel_labels *dispatching;
	int threads = 4, requests = 600, opt, err;
	pthread_t *tids;

	while ((opt = getopt(argc, argv, "t:n:u:")) != -1) {
		switch (opt) {
		case 't':
			threads = atoi(optarg);
			break;
		case 'n':
			requests = atoi(optarg);
			break;
		case 'u':
			unit_iters = strtoul(optarg, NULL, 0);
			break;
		default:
			usage();
		}
	}
	if (threads < 1 || threads > 256 || requests < 1 || !unit_iters)
		usage();

	tids = calloc(threads, sizeof(*tids));
	if (!tids)
		return 1;
	err = start_pool(tids, threads);
	if (err) {
		fprintf(stderr, "server: starting the pool: %s\n",
			strerror(-err));
		return 1;
	}

	/* The handle API: interned once, then a switch is a store. */
	dispatching = plabel_labels_new(dispatch_kv, 1);
	if (!dispatching) {
		fprintf(stderr, "server: plabel_labels_new: %s\n",
			strerror(errno));
		return 1;
	}
	for (int i = 0; i < requests; i++) {
		struct request r = {
			.ep = &endpoints[i % NR_ENDPOINTS],
			.tenant = (i / NR_ENDPOINTS) % NR_TENANTS,
			.seed = (uint64_t)i + 1,
		};

		plabel_switch(dispatching);
		queue_push(&r);
		plabel_switch(NULL);
	}

	pthread_mutex_lock(&q_lock);
	q_closed = 1;
	pthread_cond_broadcast(&q_nonempty);
	pthread_mutex_unlock(&q_lock);
	for (int i = 0; i < threads; i++)
		pthread_join(tids[i], NULL);
	plabel_labels_free(dispatching);
	free(tids);

	printf("served %d requests on %d threads (module %s)\n", requests,
	       threads, plabel_available() ? "in use" : "absent");
	print_measured();
	return 0;
}
