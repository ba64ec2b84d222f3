// SPDX-License-Identifier: GPL-2.0
/*
 * Spends MS/4 in before_load(), so that its mappings are reported before
 * the library is there; then, with threads already running, loads a
 * library and spends MS in the library's plugin_spin(). Usage: dlopen
 * LIBRARY [MS] (default 400).
 */
#include <dlfcn.h>
#include <pthread.h>

#include "burn.h"

#define THREADS 8

static pthread_barrier_t plabel_hold;
static volatile uint64_t plabel_sink;

__attribute__((noinline)) static void before_load(int64_t ns)
{
	int64_t end = plabel_e2e_cpu_ns() + ns;
	uint64_t x = 7;

	while (plabel_e2e_cpu_ns() < end)
		for (int i = 0; i < 100000; i++)
			plabel_sink = x = x * 2862933555777941757ULL + 3;
}

static void *plabel_held(void *arg)
{
	pthread_barrier_wait(&plabel_hold);
	return NULL;
}

int main(int argc, char **argv)
{
	int64_t ns = (argc > 2 ? atoi(argv[2]) : 400) * 1000000LL;
	pthread_t t[THREADS];
	void (*spin)(int64_t);
	void *lib;
	int i;

	if (argc < 2) {
		fprintf(stderr, "usage: dlopen LIBRARY [MS]\n");
		return 2;
	}
	before_load(ns / 4);
	/* threads first: their stacks are new mappings, the library not yet */
	plabel_e2e_check(pthread_barrier_init(&plabel_hold, NULL, THREADS + 1),
			 "pthread_barrier_init");
	for (i = 0; i < THREADS; i++)
		plabel_e2e_check(pthread_create(&t[i], NULL, plabel_held, NULL),
				 "pthread_create");
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	spin = (void (*)(int64_t))dlsym(lib, "plugin_spin");
	if (!spin) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return 1;
	}
	spin(ns);
	pthread_barrier_wait(&plabel_hold);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	dlclose(lib);
	return 0;
}
