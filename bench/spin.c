// SPDX-License-Identifier: GPL-2.0
/*
 * spin: a fixed CPU-bound workload for the sampling-overhead benchmark.
 *
 *   spin --calibrate MS [--threads N]   print the iteration count that takes
 *                                       about MS ms of wall time here
 *   spin --iters N [--threads N]        run N iterations on each thread and
 *                                       print "wall_ns <ns>", "cpu_ns <ns>"
 *                                       (the process's user + system time)
 *                                       and "parent_cpu_ns <ns>"
 *     [--where FILE]                    and write to FILE each task's CPU
 *                                       time in that span: "TID COMM NS"
 *     [--labels]                        each thread switches between 4
 *                                       label sets (libplabel) every 256
 *                                       iterations, as a labelled server
 *                                       would between requests
 *
 * Each thread walks a chain of a dozen small functions (so call chains have
 * depth for -g fp and for dwarf snapshots) doing integer arithmetic, no
 * system calls and no memory traffic beyond its stack. The wall time is
 * measured from the moment all threads are released to the moment the last
 * one finishes, so process start-up and the profiler's own start and finish
 * are not in it. parent_cpu_ns is the CPU time the parent process (the
 * profiler, which started this program) used in that same span: what its
 * reader took while the program ran. --where says where the rest of the
 * span went: to this program's threads (the profiler's interrupts in
 * them included), to the profiler's reader, to kernel threads.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "plabel.h"

#define PLABEL_SPIN_MAX_THREADS	64

static pthread_barrier_t plabel_spin_start;
/* --labels: the sets the threads switch between */
#define PLABEL_SPIN_NSETS	4
#define PLABEL_SPIN_SWITCH	256	/* iterations between switches */
static struct plabel_labels *plabel_spin_sets[PLABEL_SPIN_NSETS];
static int plabel_spin_labels;
static volatile uint64_t plabel_spin_sink;

static uint64_t plabel_spin_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * The CPU time of every thread of process pid, from the scheduler's own
 * account (the first field of /proc/PID/task/TID/schedstat, in ns); 0 when
 * it cannot be read.
 */
static uint64_t plabel_spin_proc_cpu(pid_t pid)
{
	char path[64];
	struct dirent *e;
	uint64_t sum = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		unsigned long long ns;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/schedstat",
			 (int)pid, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &ns) == 1)
			sum += ns;
		fclose(f);
	}
	closedir(d);
	return sum;
}

struct plabel_spin_arg {
	uint64_t iters;
	uint64_t out;
	uint64_t cpu_ns;	/* the thread's CPU time from its start */
	pid_t tid;
};

static uint64_t plabel_spin_thread_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Every task's scheduler CPU time, for --where */
struct plabel_spin_task {
	int tid;
	char comm[20];
	unsigned long long ns;
};

#define PLABEL_SPIN_MAX_TASKS	8192

static size_t plabel_spin_tasks(struct plabel_spin_task *t)
{
	char path[96], *nl;
	struct dirent *p, *e;
	DIR *pd, *td;
	size_t n = 0;
	FILE *f;

	pd = opendir("/proc");
	if (!pd)
		return 0;
	while ((p = readdir(pd)) && n < PLABEL_SPIN_MAX_TASKS) {
		if (p->d_name[0] < '0' || p->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%.16s/task", p->d_name);
		td = opendir(path);
		if (!td)
			continue;
		while ((e = readdir(td)) && n < PLABEL_SPIN_MAX_TASKS) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path),
				 "/proc/%.16s/task/%.16s/schedstat",
				 p->d_name, e->d_name);
			f = fopen(path, "r");
			if (!f)
				continue;
			if (fscanf(f, "%llu", &t[n].ns) != 1) {
				fclose(f);
				continue;
			}
			fclose(f);
			snprintf(path, sizeof(path), "/proc/%.16s/task/%.16s/comm",
				 p->d_name, e->d_name);
			f = fopen(path, "r");
			t[n].comm[0] = 0;
			if (f) {
				if (!fgets(t[n].comm, sizeof(t[n].comm), f))
					t[n].comm[0] = 0;
				fclose(f);
			}
			nl = strchr(t[n].comm, '\n');
			if (nl)
				*nl = 0;
			t[n].tid = atoi(e->d_name);
			n++;
		}
		closedir(td);
	}
	closedir(pd);
	return n;
}

/*
 * Tasks that exited in the span are missing; this program's threads report
 * their own time (its main thread only waits, and is left out: its reading
 * of the list would count).
 */
/*
 * The CPUs' idle time (ns, all CPUs), from the scheduler tick's own count
 * in /proc/timer_list (root only); 0 when it cannot be read.
 */
static unsigned long long plabel_spin_idle(void)
{
	unsigned long long sum = 0, ns;
	char line[256];
	FILE *f = fopen("/proc/timer_list", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " .idle_sleeptime: %llu nsecs", &ns) == 1)
			sum += ns;
	fclose(f);
	return sum;
}

static void plabel_spin_where(const char *path, struct plabel_spin_task *a,
			      size_t na, struct plabel_spin_task *b, size_t nb,
			      const struct plabel_spin_arg *args, int nthreads,
			      unsigned long long idle)
{
	FILE *f = fopen(path, "w");
	size_t i, j;

	if (!f) {
		perror(path);
		exit(1);
	}
	for (i = 0; i < (size_t)nthreads; i++)
		fprintf(f, "%d spin-thread %llu\n", (int)args[i].tid,
			(unsigned long long)args[i].cpu_ns);
	/* no task's: the CPUs idle */
	fprintf(f, "0 idle %llu\n", idle);
	for (j = 0; j < nb; j++) {
		unsigned long long was = 0;

		for (i = 0; i < na; i++)
			if (a[i].tid == b[j].tid) {
				was = a[i].ns;
				break;
			}
		if (b[j].tid == getpid())
			continue;
		if (b[j].ns > was)
			fprintf(f, "%d %s %llu\n", b[j].tid,
				b[j].comm[0] ? b[j].comm : "?", b[j].ns - was);
	}
	if (fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* --labels: endpoint=/api/0 .. /api/3 */
static int plabel_spin_make_sets(void)
{
	static const char *const eps[PLABEL_SPIN_NSETS] = {
		"/api/users", "/api/orders", "/api/items", "/api/search",
	};
	int i;

	for (i = 0; i < PLABEL_SPIN_NSETS; i++) {
		struct plabel_kv kv = { "endpoint", eps[i] };

		plabel_spin_sets[i] = plabel_labels_new(&kv, 1);
		if (!plabel_spin_sets[i]) {
			fprintf(stderr, "spin: plabel_labels_new: %s\n",
				strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* A chain of distinct frames; depth d ends in the arithmetic. */
static __attribute__((noinline)) uint64_t plabel_spin_leaf(uint64_t x)
{
	int i;

	for (i = 0; i < 64; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

static __attribute__((noinline)) uint64_t plabel_spin_step(uint64_t x, int d)
{
	uint64_t r;

	if (d == 0)
		return plabel_spin_leaf(x);
	r = plabel_spin_step(x ^ (uint64_t)d, d - 1);
	__asm__ volatile("" : "+r"(r));
	return r;
}

static void *plabel_spin_thread(void *p)
{
	struct plabel_spin_arg *a = p;
	uint64_t i, x = (uint64_t)(uintptr_t)a, c0;

	a->tid = gettid();
	pthread_barrier_wait(&plabel_spin_start);
	c0 = plabel_spin_thread_cpu();
	for (i = 0; i < a->iters; i++) {
		if (plabel_spin_labels && !(i % PLABEL_SPIN_SWITCH))
			plabel_switch(plabel_spin_sets[(i / PLABEL_SPIN_SWITCH +
						       a->tid) %
						      PLABEL_SPIN_NSETS]);
		x = plabel_spin_step(x + i, (int)(i % 12));
	}
	a->out = x;
	a->cpu_ns = plabel_spin_thread_cpu() - c0;
	return NULL;
}

/* Runs the threads; *parent_ns gets the parent's CPU time meanwhile. */
static uint64_t plabel_spin_run(int nthreads, uint64_t iters,
				uint64_t *parent_ns, const char *where)
{
	static struct plabel_spin_task before[PLABEL_SPIN_MAX_TASKS],
		after[PLABEL_SPIN_MAX_TASKS];
	size_t nbefore = 0, nafter;
	unsigned long long idle0 = 0, idle1;
	pthread_t tids[PLABEL_SPIN_MAX_THREADS];
	struct plabel_spin_arg args[PLABEL_SPIN_MAX_THREADS];
	pid_t parent = getppid();
	uint64_t t0, p0, ns, ns2;
	int i;

	pthread_barrier_init(&plabel_spin_start, NULL, nthreads + 1);
	for (i = 0; i < nthreads; i++) {
		args[i].iters = iters;
		if (pthread_create(&tids[i], NULL, plabel_spin_thread,
				   &args[i])) {
			fprintf(stderr, "spin: pthread_create failed\n");
			exit(1);
		}
	}
	if (where) {
		nbefore = plabel_spin_tasks(before);
		idle0 = plabel_spin_idle();
	}
	pthread_barrier_wait(&plabel_spin_start);
	t0 = plabel_spin_now();
	p0 = plabel_spin_proc_cpu(parent);
	for (i = 0; i < nthreads; i++) {
		pthread_join(tids[i], NULL);
		plabel_spin_sink += args[i].out;
	}
	ns = plabel_spin_now() - t0;
	ns2 = plabel_spin_proc_cpu(parent);
	*parent_ns = ns2 > p0 ? ns2 - p0 : 0;
	if (where) {
		idle1 = plabel_spin_idle();
		nafter = plabel_spin_tasks(after);
		plabel_spin_where(where, before, nbefore, after, nafter,
				  args, nthreads, idle1 > idle0 ? idle1 - idle0 : 0);
	}
	pthread_barrier_destroy(&plabel_spin_start);
	return ns;
}

int main(int argc, char **argv)
{
	uint64_t iters = 0, cal_ms = 0, parent_ns, wall_ns;
	const char *where = NULL;
	int nthreads = 4, i;
	struct rusage ru;

	for (i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "--labels")) {
			plabel_spin_labels = 1;
			continue;
		}
		if (!v)
			break;
		if (!strcmp(argv[i], "--threads"))
			nthreads = atoi(v);
		else if (!strcmp(argv[i], "--iters"))
			iters = strtoull(v, NULL, 0);
		else if (!strcmp(argv[i], "--calibrate"))
			cal_ms = strtoull(v, NULL, 0);
		else if (!strcmp(argv[i], "--where"))
			where = v;
		else
			break;
		i++;
	}
	if (i < argc) {
		fprintf(stderr, "spin: unknown argument %s\n", argv[i]);
		return 2;
	}
	if (plabel_spin_labels && plabel_spin_make_sets())
		return 1;
	if (nthreads < 1 || nthreads > PLABEL_SPIN_MAX_THREADS ||
	    (!iters && !cal_ms)) {
		fprintf(stderr, "usage: spin --calibrate MS | --iters N [--threads N] [--where FILE] [--labels]\n");
		return 2;
	}
	if (cal_ms) {
		uint64_t n = 1000, ns;

		for (;;) {
			ns = plabel_spin_run(nthreads, n, &parent_ns, NULL);
			if (ns >= 100000000ULL || n > (1ULL << 40))
				break;
			n *= 4;
		}
		printf("%llu\n", (unsigned long long)
		       (n * (cal_ms * 1000000ULL) / (ns ? ns : 1)));
		return 0;
	}
	wall_ns = plabel_spin_run(nthreads, iters, &parent_ns, where);
	getrusage(RUSAGE_SELF, &ru);
	printf("wall_ns %llu\n", (unsigned long long)wall_ns);
	printf("cpu_ns %llu\n", (unsigned long long)
	       ((ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ULL +
		(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ULL));
	printf("parent_cpu_ns %llu\n", (unsigned long long)parent_ns);
	return 0;
}
