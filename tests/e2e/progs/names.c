// SPDX-License-Identifier: GPL-2.0
/*
 * Named threads for the process and thread labels: the main thread burns
 * as "before", renames itself "after" (prctl, as pthread_setname_np does
 * for the calling thread) and burns again; a second thread, named
 * "worker-one" by its creator (through /proc/self/task/TID/comm, what
 * pthread_setname_np does for another thread), burns too. Usage: names
 * [MS] (default 300, each part).
 */
#include <pthread.h>
#include <sys/prctl.h>

#include "burn.h"

static volatile uint64_t plabel_sink;

__attribute__((noinline)) static void names_burn(int64_t ns)
{
	int64_t end = plabel_e2e_cpu_ns() + ns;
	uint64_t x = 7;

	while (plabel_e2e_cpu_ns() < end)
		for (int i = 0; i < 100000; i++)
			plabel_sink = x = x * 2862933555777941757ULL + 11;
}

static int64_t names_ns;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t names_cond = PTHREAD_COND_INITIALIZER;
static int names_go;

static void *names_worker(void *arg)
{
	pthread_mutex_lock(&names_lock);
	while (!names_go)
		pthread_cond_wait(&names_cond, &names_lock);
	pthread_mutex_unlock(&names_lock);
	names_burn(names_ns);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;

	names_ns = (argc > 1 ? atoll(argv[1]) : 300) * 1000000LL;
	prctl(PR_SET_NAME, "before", 0, 0, 0);
	names_burn(names_ns);
	prctl(PR_SET_NAME, "after", 0, 0, 0);
	names_burn(names_ns);
	plabel_e2e_check(pthread_create(&t, NULL, names_worker, NULL),
			 "pthread_create");
	plabel_e2e_check(pthread_setname_np(t, "worker-one"),
			 "pthread_setname_np");
	pthread_mutex_lock(&names_lock);
	names_go = 1;
	pthread_cond_broadcast(&names_cond);
	pthread_mutex_unlock(&names_lock);
	pthread_join(t, NULL);
	return 0;
}
