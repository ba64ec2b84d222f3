// SPDX-License-Identifier: GPL-2.0
/*
 * Named, labeled threads whose labels change while they run, for
 * plabel record --timeline. The main thread (no labels) creates:
 *   "api-search"  endpoint=/api/search, rounds of phase=parse then
 *                 phase=render (about 20 ms of CPU each), a 10 ms sleep
 *                 after each round;
 *   "api-upload"  endpoint=/api/upload, the same;
 *   "janitor"     no labels, 20 ms of CPU then a 10 ms sleep, each round.
 * Each thread names itself (pthread_setname_np) before it sets labels,
 * and prints "thread NAME tid=TID" when it ends. Usage: phases [ROUNDS]
 * (default 4).
 */
#include <plabel.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "burn.h"

static int rounds = 4;
static volatile uint64_t sink;

__attribute__((noinline)) static void phases_burn(int64_t ns)
{
	int64_t end = plabel_e2e_cpu_ns() + ns;
	uint64_t x = 3;

	while (plabel_e2e_cpu_ns() < end)
		for (int i = 0; i < 10000; i++)
			sink = x = x * 6364136223846793005ULL + 1;
}

static void phases_sleep_ms(int ms)
{
	struct timespec ts = { 0, (long)ms * 1000000 };

	while (nanosleep(&ts, &ts))
		;
}

struct phases_thread {
	const char *name;
	const char *endpoint;	/* NULL: no labels */
	pthread_t t;
	long tid;
};

static void phases_label(const char *endpoint, const char *phase)
{
	struct plabel_kv kv[2] = {
		{ "endpoint", endpoint }, { "phase", phase },
	};

	plabel_e2e_check(plabel_set(kv, 2), "plabel_set");
}

static void *phases_fn(void *arg)
{
	struct phases_thread *p = arg;

	p->tid = syscall(SYS_gettid);
	plabel_e2e_check(pthread_setname_np(pthread_self(), p->name),
			 "pthread_setname_np");
	for (int i = 0; i < rounds; i++) {
		if (p->endpoint) {
			phases_label(p->endpoint, "parse");
			phases_burn(20000000);
			phases_label(p->endpoint, "render");
			phases_burn(20000000);
		} else {
			phases_burn(20000000);
		}
		phases_sleep_ms(10);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct phases_thread th[] = {
		{ .name = "api-search", .endpoint = "/api/search" },
		{ .name = "api-upload", .endpoint = "/api/upload" },
		{ .name = "janitor" },
	};
	size_t n = sizeof(th) / sizeof(th[0]), k;

	if (argc > 1)
		rounds = atoi(argv[1]);
	if (rounds < 1 || rounds > 1000)
		return 2;
	for (k = 0; k < n; k++)
		plabel_e2e_check(pthread_create(&th[k].t, NULL, phases_fn,
						&th[k]), "pthread_create");
	for (k = 0; k < n; k++)
		pthread_join(th[k].t, NULL);
	for (k = 0; k < n; k++)
		printf("thread %s tid=%ld\n", th[k].name, th[k].tid);
	return 0;
}
