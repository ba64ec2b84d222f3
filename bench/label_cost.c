// SPDX-License-Identifier: GPL-2.0
/*
 * label_cost: what libplabel's label calls cost, beside Go's pprof labels
 * measured in the same run.
 *
 *   label_cost [--go DIR] [--base PROG] [--ms N]
 *   label_cost --switch-only [--ms N]
 *
 * Prints ns per plabel_switch, per cached plabel_set and plabel_do, per new
 * set (plabel_labels_new + plabel_labels_free of labels never seen before),
 * and allocations per call (counted by the malloc family defined below,
 * which the statically linked library calls). With --go DIR it runs
 * `go test -run NONE -bench . -benchmem` in DIR (bench/label_cost_go) and
 * prints Go's pprof.SetGoroutineLabels and pprof.Do figures and the ratios.
 * With --base PROG it runs PROG --switch-only (this program linked with a
 * libplabel built without the OpenTelemetry record store, label_cost_base)
 * twice between its own switch runs and prints the switch cost of both
 * builds, their difference and ratio; --switch-only prints only the ns
 * per plabel_switch. "plabel_switch, span attached" is the switch with
 * plabel_set_trace() in force (the record is copied).
 * Each figure is the best of three timed runs of at least N ms (default
 * 200). Not a test: it prints figures only.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <plabel.h>

/* Allocation counting: every call from the library lands here. */
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void __libc_free(void *p);

static unsigned long bench_allocs;

void *malloc(size_t size)
{
	__atomic_add_fetch(&bench_allocs, 1, __ATOMIC_RELAXED);
	return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	__atomic_add_fetch(&bench_allocs, 1, __ATOMIC_RELAXED);
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	__atomic_add_fetch(&bench_allocs, 1, __ATOMIC_RELAXED);
	return __libc_realloc(p, size);
}

void free(void *p)
{
	__libc_free(p);
}

struct result {
	const char *name;
	double ns;
	double allocs;
	int have;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static unsigned int min_ms = 200;

/* Runs op(iters) until it takes min_ms; best ns per call of 3 runs. */
static void measure(struct result *r, void (*op)(uint64_t iters))
{
	uint64_t iters = 1000, t0, t;
	unsigned long a0;
	double best = 0, allocs = 0;
	int run;

	op(iters);		/* warm: first calls fill the caches */
	for (;;) {
		t0 = now_ns();
		op(iters);
		t = now_ns() - t0;
		if (t >= min_ms * 1000000ULL / 4)
			break;
		iters *= 4;
	}
	for (run = 0; run < 3; run++) {
		a0 = bench_allocs;
		t0 = now_ns();
		op(iters);
		t = now_ns() - t0;
		if (!run || (double)t / iters < best)
			best = (double)t / iters;
		allocs = (double)(bench_allocs - a0) / iters;
	}
	r->ns = best;
	r->allocs = allocs;
	r->have = 1;
}

static struct plabel_labels *set_a, *set_b;
static const struct plabel_kv base_kv[] = { { "service", "api" } };
static const struct plabel_kv req_kv[] = {
	{ "endpoint", "/api/users" }, { "tenant", "acme" },
};
static int bench_err;

static void op_switch(uint64_t iters)
{
	uint64_t i;

	for (i = 0; i < iters; i += 2) {
		bench_err |= plabel_switch(set_a);
		bench_err |= plabel_switch(set_b);
	}
}

/* Baseline: "NS ALLOCS" from PROG --switch-only; ns < 0: it failed. */
static double run_base(const char *prog, double *allocs)
{
	char cmd[4096], line[256];
	double ns = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "'%s' --switch-only --ms %u", prog,
		 min_ms);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	if (fgets(line, sizeof(line), p) &&
	    sscanf(line, "%lf %lf", &ns, allocs) != 2)
		ns = -1;
	if (pclose(p))
		ns = -1;
	return ns;
}

static void op_set(uint64_t iters)
{
	uint64_t i;

	for (i = 0; i < iters; i++)
		bench_err |= plabel_set(req_kv, 2);
}

static __attribute__((noinline)) void work(void *arg)
{
	__asm__ volatile("" : : "r"(arg) : "memory");
}

static void op_do(uint64_t iters)
{
	uint64_t i;

	bench_err |= plabel_set(base_kv, 1);
	for (i = 0; i < iters; i++)
		bench_err |= plabel_do(req_kv, 2, work, NULL);
}

static uint64_t new_seq;

static void op_new(uint64_t iters)
{
	struct plabel_kv kv[2] = { { "request", NULL }, { "tenant", "acme" } };
	char val[32];
	uint64_t i;

	kv[0].value = val;
	for (i = 0; i < iters; i++) {
		struct plabel_labels *l;

		snprintf(val, sizeof(val), "%llu",
			 (unsigned long long)new_seq++);
		l = plabel_labels_new(kv, 2);
		if (!l) {
			bench_err |= -errno;
			continue;
		}
		plabel_labels_free(l);
	}
}

/* Go's figures: "BenchmarkNAME-P  N  X ns/op  B B/op  A allocs/op". */
static int run_go(const char *dir, struct result *set, struct result *gdo)
{
	char cmd[4096], line[1024];
	FILE *p;
	int found = 0;

	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local "
		 "go test -run NONE -bench . -benchmem 2>&1", dir);
	p = popen(cmd, "r");
	if (!p)
		return -errno;
	while (fgets(line, sizeof(line), p)) {
		struct result *r = NULL;
		char name[256];
		double ns, bytes, allocs;
		unsigned long long n;

		if (sscanf(line, "%255s %llu %lf ns/op %lf B/op %lf allocs/op",
			   name, &n, &ns, &bytes, &allocs) != 5) {
			if (strstr(line, "FAIL") || strstr(line, "cannot"))
				fprintf(stderr, "go: %s", line);
			continue;
		}
		if (!strncmp(name, "BenchmarkSetGoroutineLabels",
			     strlen("BenchmarkSetGoroutineLabels")))
			r = set;
		else if (!strncmp(name, "BenchmarkDo-", strlen("BenchmarkDo-")))
			r = gdo;
		if (!r)
			continue;
		r->ns = ns;
		r->allocs = allocs;
		r->have = 1;
		found++;
	}
	pclose(p);
	return found == 2 ? 0 : -ENOENT;
}

static void print_row(const struct result *r)
{
	if (r->have)
		printf("  %-44s %10.1f %10.2f\n", r->name, r->ns, r->allocs);
	else
		printf("  %-44s %10s %10s\n", r->name, "-", "-");
}

int main(int argc, char **argv)
{
	struct result sw = { .name = "plabel_switch" };
	struct result set = { .name = "plabel_set (cached, 2 labels)" };
	struct result pdo = { .name = "plabel_do (cached, 2 labels on 1)" };
	struct result nw = { .name = "plabel_labels_new + free (new set)" };
	struct result gset = { .name = "Go pprof.SetGoroutineLabels" };
	struct result gdo = { .name = "Go pprof.Do (2 labels on 1)" };
	struct result span = { .name = "plabel_switch, span attached" };
	struct result base = { .name = "base: plabel_switch without OTel" };
	static const unsigned char tid[16] = { 1, 2, 3, 4, 5, 6, 7, 8,
					       9, 10, 11, 12, 13, 14, 15, 16 };
	static const unsigned char sid[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	const char *godir = NULL, *baseprog = NULL;
	int i, err, switch_only = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--go") && i + 1 < argc) {
			godir = argv[++i];
		} else if (!strcmp(argv[i], "--base") && i + 1 < argc) {
			baseprog = argv[++i];
		} else if (!strcmp(argv[i], "--switch-only")) {
			switch_only = 1;
		} else if (!strcmp(argv[i], "--ms") && i + 1 < argc) {
			min_ms = atoi(argv[++i]);
			if (!min_ms)
				min_ms = 1;
		} else {
			fprintf(stderr, "usage: %s [--go DIR] [--base PROG] "
				"[--ms N] | --switch-only [--ms N]\n",
				argv[0]);
			return 2;
		}
	}

	set_a = plabel_labels_new(base_kv, 1);
	set_b = plabel_labels_new((struct plabel_kv[]){ { "service",
							  "batch" } }, 1);
	if (!set_a || !set_b) {
		fprintf(stderr, "label_cost: plabel_labels_new: %s\n",
			strerror(errno));
		return 1;
	}
	measure(&sw, op_switch);
	if (switch_only) {
		if (bench_err)
			return 1;
		printf("%.3f %.2f\n", sw.ns, sw.allocs);
		return 0;
	}
	if (baseprog) {
		struct result sw2 = sw;
		double b1, b2, a1 = 0, a2 = 0;

		b1 = run_base(baseprog, &a1);
		measure(&sw2, op_switch);
		b2 = run_base(baseprog, &a2);
		if (sw2.ns < sw.ns)
			sw = sw2;
		if (b1 >= 0 || b2 >= 0) {
			int first = b1 >= 0 && (b2 < 0 || b1 < b2);

			base.ns = first ? b1 : b2;
			base.allocs = first ? a1 : a2;
			base.have = 1;
		} else {
			fprintf(stderr, "label_cost: no figure from %s\n",
				baseprog);
		}
	}
	bench_err |= plabel_set_trace(tid, sid, 1);
	measure(&span, op_switch);
	bench_err |= plabel_set_trace(NULL, NULL, 0);
	measure(&set, op_set);
	measure(&pdo, op_do);
	plabel_clear();
	measure(&nw, op_new);
	if (bench_err) {
		fprintf(stderr, "label_cost: a label call failed: %s\n",
			strerror(-bench_err));
		return 1;
	}
	if (godir) {
		err = run_go(godir, &gset, &gdo);
		if (err)
			fprintf(stderr, "label_cost: no Go figures from %s\n",
				godir);
	}

	printf("libplabel %s mode\n", plabel_available() ?
	       "kernel (/dev/plabel)" : "in-process (no /dev/plabel)");
	printf("  %-44s %10s %10s\n", "operation", "ns/op", "allocs/op");
	print_row(&sw);
	if (baseprog)
		print_row(&base);
	print_row(&span);
	print_row(&set);
	print_row(&pdo);
	print_row(&nw);
	print_row(&gset);
	print_row(&gdo);
	if (base.have) {
		printf("OpenTelemetry record store, same run\n");
		printf("  %-44s %10.3f\n", "plabel_switch / base switch",
		       sw.ns / base.ns);
		printf("  %-44s %10.3f\n", "plabel_switch - base (ns, goal <= 2)",
		       sw.ns - base.ns);
	}
	if (gset.have && gdo.have) {
		printf("ratios\n");
		printf("  %-44s %10.3f\n", "plabel_switch / SetGoroutineLabels",
		       sw.ns / gset.ns);
		printf("  %-44s %10.3f\n", "plabel_do / pprof.Do",
		       pdo.ns / gdo.ns);
	}
	plabel_labels_free(set_a);
	plabel_labels_free(set_b);
	return 0;
}
