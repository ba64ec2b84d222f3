// SPDX-License-Identifier: GPL-2.0
/*
 * kmem: kernel memory the module uses per label set and per labeled task,
 * measured as the growth of the kernel's slab (/proc/meminfo Slab) while a
 * known number of them exist.
 *
 *   kmem sets N      intern N distinct one-label sets; print
 *                    "slab_bytes_per_set <bytes>"
 *   kmem tasks N     start N threads, then have each set its first label;
 *                    print "slab_bytes_per_labeled_task <bytes>", the slab
 *                    growth from the labeling alone, per thread
 *   kmem ring KB     start a session (CPU samples of this process) with
 *                    the kernel.plabel.ring_kb sysctl set to KB, and print
 *                    "bytes_per_ring <bytes>": the fall of MemFree while
 *                    it runs, per online CPU (rings, wherever the kernel
 *                    took them from, and the session's tables); needs
 *                    CAP_PERFMON and root for the sysctl
 *   kmem start N     time 20 session starts and stops (CPU samples of
 *                    this process) with N distinct sets alive, then with
 *                    none: "session_start_us_sets <us>",
 *                    "session_start_us_nosets <us>" (medians) and their
 *                    ratio "session_start_ratio <r>"; needs CAP_PERFMON,
 *                    and kernel.plabel.max_sets_per_user and
 *                    max_refs_per_file of at least N
 *
 * Slab is counted in KiB and includes everything else the kernel allocates
 * meanwhile, so N should be in the thousands; the figure is an estimate.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <time.h>

#include <plabel.h>
#include "plabel_uapi.h"

/* A /proc/meminfo field ("Slab:", "MemFree:"), KiB; -1 without it. */
static long plabel_kmem_meminfo_kb(const char *field)
{
	char line[256];
	long kb = -1;
	size_t n = strlen(field);
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) &&
		    sscanf(line + n, "%ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static long plabel_kmem_slab_kb(void)
{
	return plabel_kmem_meminfo_kb("Slab:");
}

static int plabel_kmem_sysctl(const char *path, long *old, long v)
{
	FILE *f = fopen(path, "r");
	int ok;

	if (!f || fscanf(f, "%ld", old) != 1) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	f = fopen(path, "w");
	if (!f)
		return -1;
	ok = fprintf(f, "%ld\n", v) > 0;
	return fclose(f) || !ok ? -1 : 0;
}

/* Session arguments: CPU samples of the process *pid, the defaults else. */
static void plabel_kmem_self_args(struct plabel_session_start_args *a,
				  int32_t *pid)
{
	*pid = getpid();
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->target = PLABEL_TARGET_PIDS;
	a->pids = (uintptr_t)pid;
	a->npids = 1;
}

/* MemFree's fall per online CPU while a session with KB rings runs. */
static int plabel_kmem_ring(long kb)
{
	const char *rk = "/proc/sys/kernel/plabel/ring_kb";
	struct plabel_session_start_args a;
	long old, before, after, ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int32_t pid;
	int fd;

	if (plabel_kmem_sysctl(rk, &old, kb)) {
		fprintf(stderr, "kmem: %s: %s\n", rk, strerror(errno));
		return 1;
	}
	fd = open("/dev/plabel", O_RDONLY | O_CLOEXEC);
	plabel_kmem_self_args(&a, &pid);
	sleep(1);
	before = plabel_kmem_meminfo_kb("MemFree:");
	if (fd < 0 || ioctl(fd, PLABEL_IOC_SESSION_START, &a)) {
		fprintf(stderr, "kmem: session: %s\n", strerror(errno));
		plabel_kmem_sysctl(rk, &kb, old);
		return 1;
	}
	sleep(1);
	after = plabel_kmem_meminfo_kb("MemFree:");
	ioctl(fd, PLABEL_IOC_SESSION_STOP);
	close(fd);
	plabel_kmem_sysctl(rk, &kb, old);
	printf("bytes_per_ring %ld\n", (before - after) * 1024 / ncpu);
	return 0;
}

static int plabel_kmem_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of 20 session starts (start, stop, close), in µs; -1 on error. */
static double plabel_kmem_start_us(void)
{
	struct plabel_session_start_args a;
	struct timespec t0, t1;
	double us[20];
	int32_t pid;
	int i, fd;

	plabel_kmem_self_args(&a, &pid);
	for (i = 0; i < 20; i++) {
		fd = open("/dev/plabel", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (ioctl(fd, PLABEL_IOC_SESSION_START, &a)) {
			fprintf(stderr, "kmem: session: %s\n", strerror(errno));
			close(fd);
			return -1;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ioctl(fd, PLABEL_IOC_SESSION_STOP);
		close(fd);
		us[i] = (t1.tv_sec - t0.tv_sec) * 1e6 +
			(t1.tv_nsec - t0.tv_nsec) / 1e3;
	}
	qsort(us, 20, sizeof(us[0]), plabel_kmem_cmp);
	return (us[9] + us[10]) / 2;
}

/* Session starts with n sets alive against none (see the top). */
static int plabel_kmem_start(int n)
{
	struct plabel_set_new_args sa;
	struct plabel_label kv;
	double with, without;
	char val[32];
	int fd, i;

	fd = open("/dev/plabel", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "kmem: /dev/plabel: %s\n", strerror(errno));
		return 1;
	}
	for (i = 0; i < n; i++) {
		snprintf(val, sizeof(val), "v%08d", i);
		memset(&kv, 0, sizeof(kv));
		kv.key = (uintptr_t)"set";
		kv.key_len = 3;
		kv.value = (uintptr_t)val;
		kv.value_len = strlen(val);
		memset(&sa, 0, sizeof(sa));
		sa.size = sizeof(sa);
		sa.labels = (uintptr_t)&kv;
		sa.count = 1;
		if (ioctl(fd, PLABEL_IOC_SET_NEW, &sa)) {
			fprintf(stderr, "kmem: set %d: %s\n", i,
				strerror(errno));
			close(fd);
			return 1;
		}
	}
	with = plabel_kmem_start_us();
	close(fd);	/* the sets go with their last reference */
	sleep(1);
	without = plabel_kmem_start_us();
	if (with < 0 || without < 0)
		return 1;
	printf("session_start_us_sets %.1f\n", with);
	printf("session_start_us_nosets %.1f\n", without);
	printf("session_start_ratio %.2f\n", with / without);
	return 0;
}

static pthread_barrier_t plabel_kmem_bar;

static void *plabel_kmem_thread(void *p)
{
	char val[32];
	struct plabel_kv kv = { "task", val };

	snprintf(val, sizeof(val), "t%ld", (long)(size_t)p % 16);
	pthread_barrier_wait(&plabel_kmem_bar);	/* all started */
	pthread_barrier_wait(&plabel_kmem_bar);	/* label now */
	plabel_set(&kv, 1);
	pthread_barrier_wait(&plabel_kmem_bar);	/* labeled */
	pthread_barrier_wait(&plabel_kmem_bar);	/* done */
	return NULL;
}

/*
 * Slab growth, in KiB, when n live threads (already counted in the
 * baseline) each set a label for the first time.
 */
static long plabel_kmem_threads(int n)
{
	pthread_t *t = calloc(n, sizeof(*t));
	pthread_attr_t attr;
	long before, after;
	int i;

	if (!t)
		return -1;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	pthread_barrier_init(&plabel_kmem_bar, NULL, n + 1);
	for (i = 0; i < n; i++)
		if (pthread_create(&t[i], &attr, plabel_kmem_thread,
				   (void *)(size_t)i))
			exit(1);
	pthread_barrier_wait(&plabel_kmem_bar);
	sleep(1);
	before = plabel_kmem_slab_kb();
	pthread_barrier_wait(&plabel_kmem_bar);
	pthread_barrier_wait(&plabel_kmem_bar);
	sleep(1);
	after = plabel_kmem_slab_kb();
	pthread_barrier_wait(&plabel_kmem_bar);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&plabel_kmem_bar);
	free(t);
	return after - before;
}

int main(int argc, char **argv)
{
	int n;

	if (argc != 3 || (n = atoi(argv[2])) < 1) {
		fprintf(stderr, "usage: kmem sets|tasks|start N | ring KB\n");
		return 2;
	}
	if (!plabel_available())
		fprintf(stderr, "kmem: no plabel module: figures are 0\n");
	if (!strcmp(argv[1], "sets")) {
		struct plabel_labels **l = calloc(n, sizeof(*l));
		char val[32];
		struct plabel_kv kv = { "set", val };
		long before, after;
		int i;

		if (!l)
			return 1;
		before = plabel_kmem_slab_kb();
		for (i = 0; i < n; i++) {
			snprintf(val, sizeof(val), "v%08d", i);
			l[i] = plabel_labels_new(&kv, 1);
			if (!l[i]) {
				fprintf(stderr, "kmem: set %d: %s\n", i,
					strerror(errno));
				return 1;
			}
		}
		sleep(1);
		after = plabel_kmem_slab_kb();
		printf("slab_bytes_per_set %ld\n", (after - before) * 1024 / n);
		for (i = 0; i < n; i++)
			plabel_labels_free(l[i]);
		free(l);
		return 0;
	}
	if (!strcmp(argv[1], "ring"))
		return plabel_kmem_ring(n);
	if (!strcmp(argv[1], "start"))
		return plabel_kmem_start(n);
	if (!strcmp(argv[1], "tasks")) {
		printf("slab_bytes_per_labeled_task %ld\n",
		       plabel_kmem_threads(n) * 1024 / n);
		return 0;
	}
	fprintf(stderr, "usage: kmem sets|tasks|start N | ring KB\n");
	return 2;
}
