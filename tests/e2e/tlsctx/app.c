// SPDX-License-Identifier: GPL-2.0
/*
 * A program that publishes its threads' contexts for outside profilers
 * (ctxlib.c: the OpenTelemetry thread context or custom-labels v1), built
 * in several ways by tests/e2e/tlsctx/build.mk: the thread-local variable
 * in the executable, in a library linked at start (TLSDESC or the legacy
 * general-dynamic model), or in a library loaded with dlopen()
 * (CTXLIB_DLOPEN: its file name, found through the executable's
 * $ORIGIN run path).
 *
 * Usage: PROG [--sleep] [SECONDS] (default 3). Publishes the process
 * context, then starts two threads:
 *   A: endpoint=/alpha tenant=acme, a span (trace id 0102..0f10, span id
 *      a1a2..a8, trace flags 1); custom-labels: a label with no key first;
 *   B: endpoint=/beta, no span, and an overridden endpoint=/gamma that no
 *      reader may show (an earlier OTel entry of the key, a later
 *      custom-labels label of it).
 * Each thread, once its context is set, prints "thread TID TP VAR" (its
 * thread pointer and the address of its thread-local pointer, in hex);
 * the main thread prints "ready" when both did. The threads then take
 * turns until SECONDS after the start: A burns 30 ms of its own CPU time,
 * hands over to B and blocks, B burns 10 ms, hands back and blocks. So
 * at any time A did 75% of the burning and B 25% (to a turn), however
 * busy the machine is. Each prints its CPU time at the end ("cpu_ns
 * endpoint=/alpha N"): that adds what each turn's switch costs, and so
 * comes out under 3:1 where switches are dear (an emulator). The process
 * keeps to one CPU, the first it may use, so that one CPU's sampling
 * timer sees every turn, with no wakeup of an idle CPU at the start of
 * the short ones. Off CPU, each waits while the other works: A a quarter
 * of the time, B three quarters. With --sleep each thread then sleeps
 * 1 s in nanosleep() before it ends. Every line is flushed at once.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef CTXLIB_DLOPEN
#include <dlfcn.h>
#endif

#include "ctx.h"

#define APP_TURN_NS	10000000	/* B's turn; A's is three */

struct app_worker {
	struct ctxlib_spec spec;
	int turns;			/* of APP_TURN_NS */
	sem_t go;			/* its turn */
	struct app_worker *next;
	int64_t cpu_ns;
};

static const uint8_t app_trace_id[16] = {
	0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
	0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10,
};
static const uint8_t app_span_id[8] = {
	0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8,
};

static ctxlib_thread_set_fn app_thread_set;
static sem_t app_ready;
static int app_stop, app_sleep;
static volatile uint64_t app_sink;

static void app_die(const char *what, int err)
{
	fprintf(stderr, "%s: %s\n", what, strerror(err));
	exit(1);
}

static int64_t app_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

__attribute__((noinline)) static void app_burn(int64_t ns)
{
	int64_t end = app_cpu_ns() + ns;
	uint64_t x = app_sink;

	while (app_cpu_ns() < end)
		for (int i = 0; i < 2000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	app_sink = x;
}

static void *app_worker_main(void *arg)
{
	struct app_worker *w = arg;
	struct timespec one = { 1, 0 };
	void *var;

	var = app_thread_set(&w->spec);
	if (!var)
		app_die("ctxlib_thread_set", EINVAL);
	printf("thread %ld %#lx %#lx\n", (long)gettid(),
	       (unsigned long)__builtin_thread_pointer(), (unsigned long)var);
	fflush(stdout);
	sem_post(&app_ready);
	for (;;) {
		while (sem_wait(&w->go) && errno == EINTR)
			;
		if (__atomic_load_n(&app_stop, __ATOMIC_SEQ_CST))
			break;
		app_burn((int64_t)w->turns * APP_TURN_NS);
		sem_post(&w->next->go);
	}
	w->cpu_ns = app_cpu_ns();
	if (app_sleep)
		while (nanosleep(&one, &one) && errno == EINTR)
			;
	return NULL;
}

/* This process (and the threads it starts) on its first CPU alone. */
static void app_one_cpu(void)
{
	cpu_set_t set;
	int cpu;

	if (sched_getaffinity(0, sizeof(set), &set))
		app_die("sched_getaffinity", errno);
	for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &set); cpu++)
		;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		app_die("sched_setaffinity", errno);
}

static void app_load(ctxlib_publish_fn *publish)
{
#ifdef CTXLIB_DLOPEN
	void *h = dlopen(CTXLIB_DLOPEN, RTLD_NOW);

	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		exit(1);
	}
	*publish = (ctxlib_publish_fn)dlsym(h, "ctxlib_publish");
	app_thread_set = (ctxlib_thread_set_fn)dlsym(h, "ctxlib_thread_set");
	if (!*publish || !app_thread_set) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		exit(1);
	}
#else
	*publish = ctxlib_publish;
	app_thread_set = ctxlib_thread_set;
#endif
}

int main(int argc, char **argv)
{
	struct app_worker w[2] = {
		{
			.spec = {
				.endpoint = "/alpha",
				.tenant = "acme",
				.trace_id = app_trace_id,
				.span_id = app_span_id,
				.trace_flags = 1,
				.keyless = 1,
			},
			.turns = 3,
		},
		{
			.spec = {
				.endpoint = "/beta",
				.shadowed = "/gamma",
			},
			.turns = 1,
		},
	};
	struct timespec start, end;
	ctxlib_publish_fn publish;
	pthread_t t[2];
	int i, err, seconds = 3;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--sleep"))
			app_sleep = 1;
		else
			seconds = atoi(argv[i]);
	}
	app_one_cpu();
	app_load(&publish);
	err = publish();
	if (err)
		app_die("ctxlib_publish", -err);
	sem_init(&app_ready, 0, 0);
	w[0].next = &w[1];
	w[1].next = &w[0];
	sem_init(&w[0].go, 0, 1);
	sem_init(&w[1].go, 0, 0);
	for (i = 0; i < 2; i++) {
		err = pthread_create(&t[i], NULL, app_worker_main, &w[i]);
		if (err)
			app_die("pthread_create", err);
	}
	for (i = 0; i < 2; i++)
		while (sem_wait(&app_ready) && errno == EINTR)
			;
	printf("ready\n");
	fflush(stdout);

	end = start;
	end.tv_sec += seconds;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL) ==
	       EINTR)
		;
	__atomic_store_n(&app_stop, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < 2; i++)
		sem_post(&w[i].go);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < 2; i++)
		printf("cpu_ns endpoint=%s %lld\n", w[i].spec.endpoint,
		       (long long)w[i].cpu_ns);
	fflush(stdout);
	return 0;
}
