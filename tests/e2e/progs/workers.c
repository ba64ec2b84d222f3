// SPDX-License-Identifier: GPL-2.0
/*
 * Two labeled workers: alpha burns three times the CPU time beta burns,
 * each in its own function, each under its own label set. The threads are
 * created by spawn_workers() under phase=spawn, which the thread-create
 * profile must show. Usage: workers [MS_OF_BETA] (default 400).
 */
#include <plabel.h>
#include <pthread.h>

#include "burn.h"

static volatile uint64_t plabel_sink;

struct worker {
	const char *name;
	int64_t ns;
};

__attribute__((noinline)) static void burn_alpha(int64_t ns)
{
	int64_t end = plabel_e2e_cpu_ns() + ns;
	uint64_t x = 1;

	while (plabel_e2e_cpu_ns() < end) {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		plabel_sink = x;
	}
}

__attribute__((noinline)) static void burn_beta(int64_t ns)
{
	int64_t end = plabel_e2e_cpu_ns() + ns;
	uint64_t x = 7;

	while (plabel_e2e_cpu_ns() < end) {
		for (int i = 0; i < 100000; i++)
			x = x * 2862933555777941757ULL + 3037000493ULL;
		plabel_sink = x;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct plabel_kv kv[] = { { "worker", w->name } };

	/* replaces the inherited phase=spawn */
	plabel_e2e_check(plabel_set(kv, 1), "plabel_set");
	if (w->name[0] == 'a')
		burn_alpha(w->ns);
	else
		burn_beta(w->ns);
	return NULL;
}

__attribute__((noinline)) static void spawn_workers(struct worker *w,
						    pthread_t *t)
{
	struct plabel_kv kv[] = { { "phase", "spawn" } };

	plabel_e2e_check(plabel_set(kv, 1), "plabel_set");
	for (int i = 0; i < 2; i++)
		plabel_e2e_check(pthread_create(&t[i], NULL, worker_main,
						&w[i]), "pthread_create");
	plabel_e2e_check(plabel_clear(), "plabel_clear");
}

int main(int argc, char **argv)
{
	int64_t ms = argc > 1 ? atoi(argv[1]) : 400;
	struct worker w[2] = {
		{ "alpha", 3 * ms * 1000000 },
		{ "beta", ms * 1000000 },
	};
	pthread_t t[2];

	spawn_workers(w, t);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return 0;
}
