// SPDX-License-Identifier: GPL-2.0
/*
 * One thread that takes turns: worker=alpha for 30 ms of its CPU time in
 * burn_alpha(), then worker=beta for 10 ms in burn_beta(), over and over,
 * so any stretch of its run splits 3:1 between the two labels. The sets
 * are made (and so first sampled) at the start: a profile window opened
 * later gets their strings from what the server kept. Prints "ready" once
 * both have run. Usage: alternate [MS] (CPU time in all, default 20000).
 */
#include <plabel.h>
#include <stdio.h>

#include "burn.h"

static volatile uint64_t plabel_sink;

__attribute__((noinline)) static void burn_alpha(int64_t ns)
{
	int64_t end = plabel_e2e_cpu_ns() + ns;
	uint64_t x = 1;

	while (plabel_e2e_cpu_ns() < end)
		for (int i = 0; i < 20000; i++)
			plabel_sink = x = x * 6364136223846793005ULL + 1;
}

__attribute__((noinline)) static void burn_beta(int64_t ns)
{
	int64_t end = plabel_e2e_cpu_ns() + ns;
	uint64_t x = 7;

	while (plabel_e2e_cpu_ns() < end)
		for (int i = 0; i < 20000; i++)
			plabel_sink = x = x * 2862933555777941757ULL + 3;
}

int main(int argc, char **argv)
{
	int64_t total = (argc > 1 ? atoi(argv[1]) : 20000) * 1000000LL;
	struct plabel_kv a[] = { { "worker", "alpha" } };
	struct plabel_kv b[] = { { "worker", "beta" } };
	struct plabel_labels *la = plabel_labels_new(a, 1);
	struct plabel_labels *lb = plabel_labels_new(b, 1);
	int64_t start = plabel_e2e_cpu_ns();
	int said = 0;

	if (!la || !lb) {
		fprintf(stderr, "plabel_labels_new failed\n");
		return 1;
	}
	while (plabel_e2e_cpu_ns() - start < total) {
		plabel_e2e_check(plabel_switch(la), "plabel_switch");
		burn_alpha(30000000);
		plabel_e2e_check(plabel_switch(lb), "plabel_switch");
		burn_beta(10000000);
		if (!said++) {
			printf("ready\n");
			fflush(stdout);
		}
	}
	plabel_switch(NULL);
	plabel_labels_free(la);
	plabel_labels_free(lb);
	return 0;
}
