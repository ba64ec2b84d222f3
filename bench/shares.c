// SPDX-License-Identifier: GPL-2.0
/*
 * shares: threads with known CPU shares under distinct labels, for the
 * accuracy benchmark.
 *
 *   shares [--threads N] [--unit-ms MS]
 *
 * Thread i (0 <= i < N, N from 2 to 8, default 4) labels itself
 * share=t<i> and burns CPU until its own CPU time reaches (i + 1) * MS ms
 * (default 250), so the threads' shares are 1 : 2 : ... : N. All threads
 * start together. At the end each prints the kernel's accounting of its
 * CPU time (sum_exec_runtime, the first field of /proc/thread-self/schedstat):
 *
 *   thread t<i> cpu_ns <ns>
 *
 * which the benchmark compares with the label shares of the profile.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <plabel.h>

#define PLABEL_SHARES_MAX	8

static pthread_barrier_t plabel_shares_start;
static uint64_t plabel_shares_unit_ns;
static volatile uint64_t plabel_shares_sink;

struct plabel_shares_arg {
	int idx;
	uint64_t cpu_ns;
	int err;
};

static uint64_t plabel_shares_thread_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static __attribute__((noinline)) uint64_t plabel_shares_burn(uint64_t x)
{
	int i;

	for (i = 0; i < 20000; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

static void *plabel_shares_thread(void *p)
{
	struct plabel_shares_arg *a = p;
	uint64_t goal = (uint64_t)(a->idx + 1) * plabel_shares_unit_ns;
	uint64_t x = (uint64_t)a->idx;
	char val[16];
	struct plabel_kv kv = { "share", val };
	unsigned long long ns = 0;
	FILE *f;

	snprintf(val, sizeof(val), "t%d", a->idx);
	a->err = plabel_set(&kv, 1);
	pthread_barrier_wait(&plabel_shares_start);
	while (plabel_shares_thread_cpu() < goal)
		x = plabel_shares_burn(x);
	plabel_shares_sink += x;
	f = fopen("/proc/thread-self/schedstat", "r");
	if (f) {
		if (fscanf(f, "%llu", &ns) != 1)
			ns = 0;
		fclose(f);
	}
	a->cpu_ns = ns;
	return NULL;
}

int main(int argc, char **argv)
{
	struct plabel_shares_arg args[PLABEL_SHARES_MAX];
	pthread_t tids[PLABEL_SHARES_MAX];
	int n = 4, unit_ms = 250, i;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--threads"))
			n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--unit-ms"))
			unit_ms = atoi(argv[i + 1]);
	}
	if (n < 2 || n > PLABEL_SHARES_MAX || unit_ms < 1) {
		fprintf(stderr, "usage: shares [--threads 2..8] [--unit-ms MS]\n");
		return 2;
	}
	plabel_shares_unit_ns = (uint64_t)unit_ms * 1000000ULL;
	pthread_barrier_init(&plabel_shares_start, NULL, n);
	for (i = 0; i < n; i++) {
		args[i].idx = i;
		if (pthread_create(&tids[i], NULL, plabel_shares_thread,
				   &args[i])) {
			fprintf(stderr, "shares: pthread_create failed\n");
			return 1;
		}
	}
	for (i = 0; i < n; i++)
		pthread_join(tids[i], NULL);
	for (i = 0; i < n; i++) {
		if (args[i].err) {
			fprintf(stderr, "shares: plabel_set: %s\n",
				strerror(-args[i].err));
			return 1;
		}
		printf("thread t%d cpu_ns %llu\n", i,
		       (unsigned long long)args[i].cpu_ns);
	}
	return 0;
}
