// SPDX-License-Identifier: GPL-2.0
/*
 * heap: the cost of a malloc/free pair of a small block, in the allocator
 * this program runs with (glibc's; glibc's under libplabel-heap.so,
 * sampling off or on; tcmalloc, its heap sampling off or on, all through
 * LD_PRELOAD and the environment, set by whoever runs it).
 *
 *   heap [--threads T] [--pairs N] [--reps R]
 *
 * T threads (default 4) each allocate and free N blocks (default
 * 2000000) of 16 to 496 bytes, one at a time, writing a byte of each so
 * that no allocation is optimized away, R times (default 3). Printed:
 * "ns_per_pair X", the median over the reps of the process's CPU time
 * (all threads) per pair, so that it does not depend on how the threads
 * share the CPUs; and "pairs N*T".
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned long heap_pairs = 2000000;
static pthread_barrier_t heap_go;
static volatile unsigned char heap_sink;

static double heap_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *heap_worker(void *arg)
{
	unsigned long i, x = (uintptr_t)arg * 2654435761UL + 1;
	unsigned char acc = 0;

	pthread_barrier_wait(&heap_go);
	for (i = 0; i < heap_pairs; i++) {
		size_t size = 16 + 16 * (x % 31);
		unsigned char *p = malloc(size);

		x = x * 6364136223846793005UL + 1442695040888963407UL;
		if (!p)
			abort();
		p[size - 1] = (unsigned char)i;
		acc ^= p[size - 1];
		free(p);
	}
	heap_sink = acc;
	return NULL;
}

static int heap_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	unsigned long threads = 4, reps = 3, t, r;
	double ns[16];
	pthread_t tid[64];
	int i;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--threads"))
			threads = strtoul(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--pairs"))
			heap_pairs = strtoul(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--reps"))
			reps = strtoul(argv[i + 1], NULL, 0);
		else
			break;
	}
	if (i != argc || !threads || threads > 64 || !heap_pairs || !reps ||
	    reps > 16) {
		fprintf(stderr, "usage: heap [--threads T (<= 64)] [--pairs N] [--reps R (<= 16)]\n");
		return 2;
	}
	for (r = 0; r < reps; r++) {
		double c0;

		pthread_barrier_init(&heap_go, NULL, threads + 1);
		for (t = 0; t < threads; t++)
			if (pthread_create(&tid[t], NULL, heap_worker,
					   (void *)(uintptr_t)(t + 1))) {
				fprintf(stderr, "heap: pthread_create failed\n");
				return 1;
			}
		c0 = heap_cpu_ns();
		pthread_barrier_wait(&heap_go);
		for (t = 0; t < threads; t++)
			pthread_join(tid[t], NULL);
		ns[r] = (heap_cpu_ns() - c0) / ((double)heap_pairs * threads);
		pthread_barrier_destroy(&heap_go);
	}
	qsort(ns, reps, sizeof(ns[0]), heap_cmp);
	printf("ns_per_pair %.2f\n", ns[reps / 2]);
	printf("pairs %lu\n", heap_pairs * threads);
	return 0;
}
