// SPDX-License-Identifier: GPL-2.0
/*
 * shares: threads with known CPU shares under distinct labels, for the
 * accuracy benchmark.
 *
 *   shares [--threads N] [--unit-ms MS] [--switch-us US [--cycle 1]]
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
 *
 * With --switch-us every thread serves "requests" instead, switching its
 * labels for each (plabel_switch()): each request takes one of share=t0 ..
 * t<N-1> at random and burns 1/2 to 3/2 (at random) of (j + 1) * US us of
 * the thread's CPU time for t<j>, until the thread has used (N + 1) / 2 *
 * MS ms (the same total as without). The shares are again about 1 : 2 :
 * ... : N, but every thread changes label many times a sampling period,
 * in no fixed rhythm (a fixed cycle would beat with the sampling period).
 * With --cycle 1 the requests go t0, t1, .. t<N-1> in turn instead, each
 * exactly (j + 1) * US us: a fixed round, the case a fixed sampling period
 * would beat with. What each label got, from the thread's CPU clock
 * around each request, is printed as
 *
 *   label t<j> cpu_ns <ns>
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
static uint64_t plabel_shares_switch_ns;	/* 0: one label a thread */
static int plabel_shares_cycle;			/* --cycle */
static int plabel_shares_n;
static struct plabel_labels *plabel_shares_sets[PLABEL_SHARES_MAX];
static volatile uint64_t plabel_shares_sink;

struct plabel_shares_arg {
	int idx;
	uint64_t cpu_ns;
	uint64_t label_ns[PLABEL_SHARES_MAX];	/* --switch-us */
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

/* a few us: requests end within that of their length */
static __attribute__((noinline)) uint64_t plabel_shares_burn_short(uint64_t x)
{
	int i;

	for (i = 0; i < 500; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

/* --switch-us: requests under random labels, timed on the thread's clock */
static void *plabel_shares_switching(struct plabel_shares_arg *a)
{
	uint64_t goal = (uint64_t)(plabel_shares_n + 1) * plabel_shares_unit_ns / 2;
	uint64_t x = (uint64_t)a->idx, rnd = 0x9e3779b97f4a7c15ULL * (a->idx + 1);
	uint64_t t0, t, len;
	int j = -1;

	pthread_barrier_wait(&plabel_shares_start);
	t = plabel_shares_thread_cpu();
	while (t < goal) {
		int err;

		/* xorshift64: the label and a length of 1/2 to 3/2 of its mean */
		rnd ^= rnd << 13;
		rnd ^= rnd >> 7;
		rnd ^= rnd << 17;
		if (plabel_shares_cycle) {
			/* t0, t1, .. in turn, each its exact length */
			j = (j + 1) % plabel_shares_n;
			len = (uint64_t)(j + 1) * plabel_shares_switch_ns;
		} else {
			j = (int)((rnd >> 32) % (uint64_t)plabel_shares_n);
			len = (uint64_t)(j + 1) * plabel_shares_switch_ns;
			len = len / 2 + (rnd & 0xffff) * len / 0x10000;
		}
		err = plabel_switch(plabel_shares_sets[j]);
		if (err && !a->err)
			a->err = err;
		t0 = plabel_shares_thread_cpu();
		do {
			x = plabel_shares_burn_short(x);
			t = plabel_shares_thread_cpu();
		} while (t - t0 < len);
		a->label_ns[j] += t - t0;
	}
	plabel_shares_sink += x;
	return NULL;
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

	if (plabel_shares_switch_ns)
		return plabel_shares_switching(a);
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
	int n = 4, unit_ms = 250, switch_us = 0, i, j;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--threads"))
			n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--unit-ms"))
			unit_ms = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--switch-us"))
			switch_us = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--cycle"))
			plabel_shares_cycle = atoi(argv[i + 1]);
		else
			break;
	}
	if (i < argc || n < 2 || n > PLABEL_SHARES_MAX || unit_ms < 1 ||
	    switch_us < 0) {
		fprintf(stderr, "usage: shares [--threads 2..8] [--unit-ms MS] [--switch-us US [--cycle 1]]\n");
		return 2;
	}
	plabel_shares_n = n;
	plabel_shares_unit_ns = (uint64_t)unit_ms * 1000000ULL;
	plabel_shares_switch_ns = (uint64_t)switch_us * 1000ULL;
	for (j = 0; switch_us && j < n; j++) {
		char val[16];
		struct plabel_kv kv = { "share", val };

		snprintf(val, sizeof(val), "t%d", j);
		plabel_shares_sets[j] = plabel_labels_new(&kv, 1);
		if (!plabel_shares_sets[j]) {
			perror("shares: plabel_labels_new");
			return 1;
		}
	}
	pthread_barrier_init(&plabel_shares_start, NULL, n);
	memset(args, 0, sizeof(args));
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
			fprintf(stderr, "shares: %s: %s\n",
				switch_us ? "plabel_switch" : "plabel_set",
				strerror(-args[i].err));
			return 1;
		}
		if (!switch_us)
			printf("thread t%d cpu_ns %llu\n", i,
			       (unsigned long long)args[i].cpu_ns);
	}
	for (j = 0; switch_us && j < n; j++) {
		uint64_t ns = 0;

		for (i = 0; i < n; i++)
			ns += args[i].label_ns[j];
		printf("label t%d cpu_ns %llu\n", j, (unsigned long long)ns);
		plabel_labels_free(plabel_shares_sets[j]);
	}
	return 0;
}
