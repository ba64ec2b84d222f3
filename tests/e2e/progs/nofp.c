// SPDX-License-Identifier: GPL-2.0
/*
 * Built with -fomit-frame-pointer (tools/build.mk): its CPU time is spent
 * in a qsort() comparator, so a full stack goes through libc (also built
 * without frame pointers) back into sort_work() and main(). Only `-g
 * dwarf` unwinding gets through. Usage: nofp [ROUNDS] (default 30).
 */
#include <plabel.h>

#include "burn.h"

#define NELEM 4096

static volatile uint64_t plabel_sink;

__attribute__((noinline)) static int slow_compare(const void *a,
						  const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	uint64_t h = x;

	/* make the comparator the hot spot */
	for (int i = 0; i < 64; i++)
		h = h * 6364136223846793005ULL + y;
	plabel_sink = h;
	return x < y ? -1 : x > y;
}

__attribute__((noinline)) static void sort_work(uint32_t *v, int rounds)
{
	for (int r = 0; r < rounds; r++) {
		uint32_t s = 12345 + r;

		for (int i = 0; i < NELEM; i++) {
			s = s * 1103515245 + 12345;
			v[i] = s >> 8;
		}
		qsort(v, NELEM, sizeof(*v), slow_compare);
	}
}

int main(int argc, char **argv)
{
	struct plabel_kv kv[] = { { "stage", "sorting" } };
	int rounds = argc > 1 ? atoi(argv[1]) : 30;
	uint32_t *v = malloc(NELEM * sizeof(*v));

	if (!v)
		return 1;
	plabel_e2e_check(plabel_set(kv, 1), "plabel_set");
	sort_work(v, rounds);
	free(v);
	return 0;
}
