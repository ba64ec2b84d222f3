// SPDX-License-Identifier: GPL-2.0
/*
 * Two labeled workers: alpha does three times the work beta does, each in
 * its own function, each under its own label set. Under an emulator a vCPU
 * the host does not run still sees its clock advance, so the CPU-time split
 * can stray from 3:1; each worker's CPU time, as the kernel accounted it,
 * is printed at exit ("cpu_ns alpha=N beta=N") for the test to compare the
 * samples' label split with. The
 * threads are created by spawn_workers() under phase=spawn, which the
 * thread-create profile must show. Usage: workers [MS_OF_BETA] (default
 * 400, calibrated at start).
 */
#include <plabel.h>
#include <pthread.h>

#include "burn.h"

static volatile uint64_t plabel_sink;

struct worker {
	const char *name;
	uint64_t rounds;
	int64_t cpu_ns;		/* the thread's CPU time, as the kernel counts it */
};

static uint64_t plabel_step(uint64_t x, uint64_t a, uint64_t c)
{
	for (int i = 0; i < 10000; i++)
		x = x * a + c;
	return x;
}

__attribute__((noinline)) static void burn_alpha(uint64_t rounds)
{
	uint64_t x = 1;

	for (uint64_t r = 0; r < rounds; r++)
		x = plabel_step(x, 6364136223846793005ULL,
				1442695040888963407ULL);
	plabel_sink = x;
}

__attribute__((noinline)) static void burn_beta(uint64_t rounds)
{
	uint64_t x = 7;

	for (uint64_t r = 0; r < rounds; r++)
		x = plabel_step(x, 2862933555777941757ULL, 3037000493ULL);
	plabel_sink = x;
}

/* Rounds of plabel_step() per millisecond of this thread's CPU time. */
static uint64_t plabel_calibrate(void)
{
	int64_t t0 = plabel_e2e_cpu_ns(), t;
	uint64_t x = 3, rounds = 0;

	do {
		for (int i = 0; i < 16; i++)
			x = plabel_step(x, 6364136223846793005ULL, 1);
		rounds += 16;
		t = plabel_e2e_cpu_ns() - t0;
	} while (t < 50000000);
	plabel_sink = x;
	return rounds * 1000000 / t + 1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct plabel_kv kv[] = { { "worker", w->name } };

	/* replaces the inherited phase=spawn */
	plabel_e2e_check(plabel_set(kv, 1), "plabel_set");
	if (w->name[0] == 'a')
		burn_alpha(w->rounds);
	else
		burn_beta(w->rounds);
	w->cpu_ns = plabel_e2e_cpu_ns();
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
	uint64_t ms = argc > 1 ? atoi(argv[1]) : 400;
	uint64_t per_ms = plabel_calibrate();
	struct worker w[2] = {
		{ "alpha", 3 * ms * per_ms, 0 },
		{ "beta", ms * per_ms, 0 },
	};
	pthread_t t[2];

	spawn_workers(w, t);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("cpu_ns alpha=%lld beta=%lld\n", (long long)w[0].cpu_ns,
	       (long long)w[1].cpu_ns);
	return 0;
}
