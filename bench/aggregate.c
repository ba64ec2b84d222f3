// SPDX-License-Identifier: GPL-2.0
/*
 * aggregate: the collector's memory and ingest speed on long recordings,
 * fed synthetic record streams in the kernel's format.
 *
 *   aggregate [--samples N[,N..]] [--stacks K] [--cpus C] [--hz HZ]
 *             [--idle-cpus I [--no-sync]] [--lag-ms MS]
 *             [--finish [--out PREFIX]]
 *             [--map FILE] [--write FILE]
 *
 * For each N (default 1000000,100000000) a child process of its own
 * builds a stream of N fp samples over the same K distinct stacks
 * (default 10000, 8 to 24 frames deep), each stack always with the same
 * thread and label set, so that the distinct (stack, labels, thread) keys
 * are K whatever N: the STREAM record, 8 label sets, the mappings of one
 * process (this program's executable), then the samples of C CPUs
 * (default 64) sampled at HZ (default 10000) each, as read() gives them:
 * runs of 32 records of one CPU, then of the next. A stack, and the
 * thread it runs in (4 a CPU), runs on one CPU, as a thread runs on one
 * CPU at a time; each CPU's samples take each of its stacks once, then
 * draw them with a skew (a few hot, many cold). Each sample carries its
 * thread's CPU time. The stream is made 256 KiB of whole records at a
 * time and fed to the collector (tools/collect.c, with plabel record's
 * flags), each buffer followed, as in plabel record, by the time before
 * which every record is in: the newest sample's time less MS (default
 * 2000, record's margin; 0 before that, as record's first read() starts
 * the merging). The collector merges before its own watermark too, the
 * time every CPU's records have passed (see collect.h). With --idle-cpus
 * the STREAM record counts I more CPUs that send no samples, as idle ones
 * do; each buffer ends with a SYNC record for each of them, as the kernel
 * writes when a read() finds their rings empty, 60 ms behind the newest
 * sample (its tick and a grace period); with --no-sync they send nothing,
 * as with a module older than SYNC records, which holds the watermark
 * back: record's margin does the merging.
 *
 * Printed for each, as "LABEL.key value" lines (LABEL: 1M, 100M, ...):
 * samples, merged (distinct merged samples) and held (samples not merged
 * yet) at the end, rss_kb and peak_rss_kb (VmRSS and VmHWM of the child
 * after the last buffer), ingest_cpu_seconds (the collector's thread CPU
 * time: decoding, collecting, merging; making the stream is not counted)
 * and ingest_samples_per_cpu_sec; with --finish also finish_cpu_seconds
 * (building both profiles), final_peak_rss_kb and cpu_profile_samples,
 * and with --out the CPU profile written to PREFIX-LABEL.pb.gz. Then, for
 * the first and last N, rss_ratio (peak RSS, last / first) and, against
 * the goals (RSS within 10 %, ingest at least 13 M samples per
 * CPU-second), rss_goal_met and ingest_vs_goal (the slower run's rate /
 * 13 M).
 *
 * With --map the process's mapping is FILE at a fixed place (0x10000000,
 * 1 MiB from file offset 4096), not this program's text: two builds of
 * the collector then get the same stream, and their profiles can be
 * compared byte for byte.
 *
 * With --write (one N, no --finish) the stream is written to FILE
 * instead of fed, buffer after buffer, for bench/ingest to feed to other
 * builds of the collector; printed: written N.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"
#include "profile.h"
#include "stream.h"
#include "symbolize.h"

#define AGG_CHUNK		(256 * 1024)
#define AGG_RUN			32	/* records of one CPU in a row */
#define AGG_SETS		8
#define AGG_THREADS_PER_CPU	4
#define AGG_PID			4242
#define AGG_MAX_DEPTH		24
#define AGG_GOAL_RATE		13e6
#define AGG_GOAL_RSS		0.10

struct agg_cfg {
	uint64_t samples;
	unsigned int stacks, cpus, hz, idle, no_sync;
	uint64_t lag_ns;
	int finish;
	const char *out;	/* prefix of the profiles written, or NULL */
	const char *map;	/* the mapping's file, or NULL: ours */
	const char *write;	/* where to write the stream, or NULL */
};

/* The stream being made: one buffer of whole records at a time. */
struct agg_gen {
	const struct agg_cfg *cfg;
	uint8_t *buf;
	size_t len;
	uint64_t made;		/* samples made */
	uint64_t newest;	/* newest sample time in buf */
	uint64_t synced;	/* time of the idle CPUs' last SYNC */
	uint64_t tick;		/* first tick of the current run */
	unsigned int cpu;	/* CPU of the current run */
	unsigned int in_run;	/* samples of the run made */
	uint64_t x;		/* xorshift state */
	uint64_t text_start, text_end, text_off;
	unsigned int *first;	/* by CPU: its stacks made once so far */
	char exe[PATH_MAX];
};

static void *agg_rec(struct agg_gen *g, uint32_t type, size_t size)
{
	struct plabel_rec_header *h = (void *)(g->buf + g->len);
	size_t padded = (size + 7) & ~7UL;

	memset(h, 0, padded);
	h->type = type;
	h->size = padded;
	g->len += padded;
	return h;
}

/* This program's executable mapping, for MMAP records. 0 or -1. */
static int agg_find_text(struct agg_gen *g)
{
	char line[PATH_MAX + 128], perms[8], path[PATH_MAX];
	unsigned long start, end, off;
	FILE *f = fopen("/proc/self/maps", "r");
	ssize_t n = readlink("/proc/self/exe", g->exe, sizeof(g->exe) - 1);

	if (!f || n <= 0)
		return -1;
	g->exe[n] = '\0';
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4095s", &start, &end,
			   perms, &off, path) == 5 &&
		    perms[2] == 'x' && !strcmp(path, g->exe)) {
			g->text_start = start;
			g->text_end = end;
			g->text_off = off;
			fclose(f);
			return 0;
		}
	}
	fclose(f);
	return -1;
}

static void agg_preamble(struct agg_gen *g)
{
	static const char *const vals[AGG_SETS] = {
		"/api/users", "/api/orders", "/api/cart", "/api/login",
		"/api/search", "/api/items", "/api/pay", "/health",
	};
	struct plabel_rec_stream *st;
	struct plabel_rec_mmap *m;
	size_t pl = strlen(g->exe), i;

	st = agg_rec(g, PLABEL_REC_STREAM, sizeof(*st));
	st->version = PLABEL_REC_VERSION;
	st->callchain = PLABEL_CALLCHAIN_FP;
	st->period_ns = 1000000000ULL / g->cfg->hz;
	st->ncpus = g->cfg->cpus + g->cfg->idle;
	for (i = 0; i < AGG_SETS; i++) {
		const char *k = "endpoint", *v = vals[i];
		size_t kl = strlen(k), vl = strlen(v);
		struct plabel_rec_labelset *ls;
		struct plabel_rec_label *l;

		ls = agg_rec(g, PLABEL_REC_LABELSET,
			     sizeof(*ls) + sizeof(*l) + kl + vl);
		ls->id = 1000 + i;
		ls->count = 1;
		l = (void *)(ls + 1);
		l->key_len = kl;
		l->value_len = vl;
		memcpy(l + 1, k, kl);
		memcpy((char *)(l + 1) + kl, v, vl);
	}
	m = agg_rec(g, PLABEL_REC_MMAP, sizeof(*m) + pl);
	m->pid = AGG_PID;
	m->path_len = pl;
	m->start = g->text_start;
	m->end = g->text_end;
	m->offset = g->text_off;
	memcpy(m + 1, g->exe, pl);
}

/*
 * The chain of stack k: its depth and frames are k's alone, and the two
 * leaf frames tell every k below 16384 apart; the others come from a pool
 * of 256 addresses, as callers are shared.
 */
static unsigned int agg_chain(const struct agg_gen *g, unsigned int k,
			      uint64_t *ips)
{
	uint64_t size = g->text_end - g->text_start;
	unsigned int n = 8 + k % (AGG_MAX_DEPTH - 7), j;

	ips[0] = g->text_start + ((k % 512) * 64) % size;
	ips[1] = g->text_start + ((512 + (k / 512) % 32) * 64 + 1) % size;
	for (j = 2; j < n; j++)
		ips[j] = g->text_start +
			 ((1024 + (k * 7 + j * 13) % 256) * 64 + 5) % size;
	return n;
}

static uint64_t agg_rand(struct agg_gen *g)
{
	g->x ^= g->x << 13;
	g->x ^= g->x >> 7;
	g->x ^= g->x << 17;
	return g->x;
}

/*
 * The stack of the next sample, on g->cpu: each once, then a few hot,
 * many cold. A stack runs on one CPU (k % cpus), so that each thread's
 * samples come from one ring, in time order, as a thread runs on one CPU
 * at a time.
 */
static unsigned int agg_pick(struct agg_gen *g)
{
	unsigned int cpus = g->cfg->cpus, on_cpu, k;
	double r;

	on_cpu = (g->cfg->stacks - g->cpu + cpus - 1) / cpus;
	if (!on_cpu)
		return g->cpu % g->cfg->stacks;
	if (g->first[g->cpu] < on_cpu)
		return g->cpu + cpus * g->first[g->cpu]++;
	r = (double)(agg_rand(g) >> 11) / (double)(1ULL << 53);
	k = (unsigned int)(r * r * on_cpu);
	return g->cpu + cpus * (k < on_cpu ? k : on_cpu - 1);
}

/* The idle CPUs' SYNC records at the end of a read(). */
static void agg_sync(struct agg_gen *g)
{
	const uint64_t behind = 60000000;
	struct plabel_rec_sync *y;
	unsigned int i;

	if (g->cfg->no_sync || g->newest <= behind + g->synced)
		return;
	g->synced = g->newest - behind;
	for (i = 0; i < g->cfg->idle; i++) {
		y = agg_rec(g, PLABEL_REC_SYNC, sizeof(*y));
		y->cpu = g->cfg->cpus + i;
		y->time_ns = g->synced;
	}
}

/* Fill g->buf with whole records up to AGG_CHUNK. */
static void agg_fill(struct agg_gen *g)
{
	const struct agg_cfg *cfg = g->cfg;
	uint64_t period = 1000000000ULL / cfg->hz;
	uint64_t ips[AGG_MAX_DEPTH];

	while (g->made < cfg->samples) {
		size_t size = sizeof(struct plabel_rec_sample) +
			      AGG_MAX_DEPTH * sizeof(uint64_t);
		struct plabel_rec_sample *s;
		unsigned int k, n, tid;
		uint64_t t;

		if (g->len + size + cfg->idle * sizeof(struct plabel_rec_sync) >
		    AGG_CHUNK)
			break;
		k = agg_pick(g);
		n = agg_chain(g, k, ips);
		tid = AGG_PID + 1 + k % cfg->cpus +
		      cfg->cpus * (k / cfg->cpus % AGG_THREADS_PER_CPU);
		/* CPUs tick a little apart, each in its own run */
		t = 1000000000ULL + (g->tick + g->in_run) * period +
		    g->cpu * (period / cfg->cpus);
		s = agg_rec(g, PLABEL_REC_SAMPLE,
			    sizeof(*s) + n * sizeof(uint64_t));
		s->time_ns = t;
		s->set_id = 1000 + k % AGG_SETS;
		s->pid = AGG_PID;
		s->tid = tid;
		s->cpu = g->cpu;
		s->flags = PLABEL_SAMPLE_USER | PLABEL_SAMPLE_CPUTIME;
		/* a thread's CPU time grows with time: a third of it */
		s->cpu_ns = t / 3 + tid;
		s->nr_user = n;
		memcpy(s + 1, ips, n * sizeof(uint64_t));
		if (t > g->newest)
			g->newest = t;
		g->made++;
		if (++g->in_run == AGG_RUN) {
			g->in_run = 0;
			if (++g->cpu == cfg->cpus) {
				g->cpu = 0;
				g->tick += AGG_RUN;
			}
		}
	}
	agg_sync(g);
}

static double agg_thread_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* VmRSS and VmHWM of this process, KiB. */
static void agg_rss(long *rss, long *hwm)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	*rss = *hwm = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "VmRSS: %ld", rss);
		sscanf(line, "VmHWM: %ld", hwm);
	}
	fclose(f);
}

static void agg_label(char *out, size_t size, uint64_t n)
{
	if (n >= 1000000 && n % 1000000 == 0)
		snprintf(out, size, "%lluM", (unsigned long long)(n / 1000000));
	else if (n >= 1000 && n % 1000 == 0)
		snprintf(out, size, "%lluk", (unsigned long long)(n / 1000));
	else
		snprintf(out, size, "%llu", (unsigned long long)n);
}

/* --write: the stream to cfg->write, buffer after buffer. 0 or 1. */
static int agg_write(const struct agg_cfg *cfg, struct agg_gen *g)
{
	FILE *f = fopen(cfg->write, "w");

	if (!f) {
		fprintf(stderr, "aggregate: %s: %s\n", cfg->write,
			strerror(errno));
		return 1;
	}
	do {
		agg_fill(g);
		if (fwrite(g->buf, 1, g->len, f) != g->len)
			break;
		g->len = 0;
	} while (g->made < cfg->samples);
	if (fclose(f) || g->len) {
		fprintf(stderr, "aggregate: %s: write failed\n", cfg->write);
		return 1;
	}
	printf("written %llu\n", (unsigned long long)g->made);
	fflush(stdout);
	return 0;
}

/* The child: one stream of cfg->samples samples through the collector. */
static int agg_run(const struct agg_cfg *cfg)
{
	struct plabel_prof *profs[PLABEL_PROF_NKINDS] = { NULL };
	unsigned int flags = PLABEL_COLLECT_PROC_MAPS |
			     PLABEL_COLLECT_PID_LABELS |
			     PLABEL_COLLECT_PREFAULT;
	struct plabel_collect_stats st;
	struct agg_gen g = { .cfg = cfg, .x = 88172645463325252ULL };
	struct plabel_collect *col;
	struct plabel_syms *syms;
	double cpu = 0, c0, c1;
	char label[32];
	long rss, hwm;
	size_t i;
	int ret = 0;

	g.buf = malloc(AGG_CHUNK);
	g.first = calloc(cfg->cpus, sizeof(*g.first));
	if (cfg->map && strlen(cfg->map) < sizeof(g.exe)) {
		strcpy(g.exe, cfg->map);
		g.text_start = 0x10000000;
		g.text_end = g.text_start + (1 << 20);
		g.text_off = 4096;
	}
	if (!g.buf || !g.first || (!cfg->map && agg_find_text(&g))) {
		fprintf(stderr, "aggregate: no memory or no executable mapping\n");
		return 1;
	}
	syms = plabel_syms_new();
	col = syms ? plabel_collect_new(syms, flags) : NULL;
	if (!col) {
		fprintf(stderr, "aggregate: no memory\n");
		return 1;
	}
	agg_preamble(&g);
	if (cfg->write)
		return agg_write(cfg, &g);
	do {
		agg_fill(&g);
		c0 = agg_thread_cpu();
		ret = plabel_collect_buffer(col, g.buf, g.len);
		if (!ret)
			ret = plabel_collect_settled(col,
				g.newest > cfg->lag_ns ?
				g.newest - cfg->lag_ns : 0);
		cpu += agg_thread_cpu() - c0;
		g.len = 0;
	} while (!ret && g.made < cfg->samples);
	if (ret) {
		fprintf(stderr, "aggregate: collect: %s\n", strerror(-ret));
		return 1;
	}
	agg_rss(&rss, &hwm);
	plabel_collect_stats(col, &st);
	agg_label(label, sizeof(label), cfg->samples);
	printf("%s.samples %llu\n", label, (unsigned long long)st.samples);
	printf("%s.merged %llu\n", label, (unsigned long long)st.merged);
	printf("%s.held %llu\n", label, (unsigned long long)st.held);
	printf("%s.rss_kb %ld\n", label, rss);
	printf("%s.peak_rss_kb %ld\n", label, hwm);
	printf("%s.ingest_cpu_seconds %.3f\n", label, cpu);
	printf("%s.ingest_samples_per_cpu_sec %.0f\n", label,
	       cpu > 0 ? st.samples / cpu : 0);
	if (cfg->finish) {
		c0 = agg_thread_cpu();
		ret = plabel_collect_finish(col, 0, 1000000000, profs);
		c1 = agg_thread_cpu();
		if (ret) {
			fprintf(stderr, "aggregate: finish: %s\n",
				strerror(-ret));
			return 1;
		}
		agg_rss(&rss, &hwm);
		printf("%s.finish_cpu_seconds %.3f\n", label, c1 - c0);
		printf("%s.final_peak_rss_kb %ld\n", label, hwm);
		printf("%s.cpu_profile_samples %zu\n", label,
		       plabel_prof_num_samples(profs[PLABEL_PROF_CPU]));
		if (cfg->out) {
			char path[PATH_MAX];

			snprintf(path, sizeof(path), "%s-%s.pb.gz", cfg->out,
				 label);
			ret = plabel_prof_write(profs[PLABEL_PROF_CPU], path);
			if (ret) {
				fprintf(stderr, "aggregate: %s: %s\n", path,
					strerror(-ret));
				return 1;
			}
		}
	}
	fflush(stdout);
	for (i = 0; i < PLABEL_PROF_NKINDS; i++)
		plabel_prof_free(profs[i]);
	plabel_collect_free(col);
	plabel_syms_free(syms);
	free(g.buf);
	free(g.first);
	return 0;
}

/* Key's value from the "LABEL.key value" lines in out. */
static double agg_get(const char *out, const char *label, const char *key)
{
	char want[96];
	const char *p = out;
	size_t wl;

	snprintf(want, sizeof(want), "%s.%s ", label, key);
	wl = strlen(want);
	for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, want, wl))
			return atof(p + wl);
	return -1;
}

int main(int argc, char **argv)
{
	struct agg_cfg cfg = {
		.stacks = 10000, .cpus = 64, .hz = 10000,
		.lag_ns = 2000000000ULL,
	};
	const char *counts = "1000000,100000000";
	char first[32] = "", last[32] = "", *list, *tok, *save;
	static char out[1 << 16];
	size_t outlen = 0;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--finish")) {
			cfg.finish = 1;
			continue;
		}
		if (!strcmp(argv[i], "--no-sync")) {
			cfg.no_sync = 1;
			continue;
		}
		if (i + 1 >= argc)
			goto usage;
		if (!strcmp(argv[i], "--samples"))
			counts = argv[++i];
		else if (!strcmp(argv[i], "--stacks"))
			cfg.stacks = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--cpus"))
			cfg.cpus = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--hz"))
			cfg.hz = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--idle-cpus"))
			cfg.idle = atoi(argv[++i]);

		else if (!strcmp(argv[i], "--map"))
			cfg.map = argv[++i];
		else if (!strcmp(argv[i], "--write"))
			cfg.write = argv[++i];
		else if (!strcmp(argv[i], "--out"))
			cfg.out = argv[++i];
		else if (!strcmp(argv[i], "--lag-ms"))
			cfg.lag_ns = strtoull(argv[++i], NULL, 0) * 1000000ULL;
		else
			goto usage;
	}
	if (cfg.write && (strchr(counts, ',') || cfg.finish || cfg.out))
		goto usage;
	if (!cfg.stacks || cfg.stacks > 16384 || !cfg.cpus || !cfg.hz ||
	    cfg.hz > 1000000 || cfg.idle > 4096 || cfg.cpus > 4096)
		goto usage;
	list = strdup(counts);
	if (!list)
		return 1;
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int fds[2], status;
		ssize_t n;
		pid_t pid;

		cfg.samples = strtoull(tok, NULL, 0);
		if (cfg.samples < cfg.stacks)
			goto usage;
		if (pipe(fds))
			return 1;
		fflush(stdout);
		pid = fork();
		if (pid < 0)
			return 1;
		if (!pid) {
			close(fds[0]);
			dup2(fds[1], 1);
			_exit(agg_run(&cfg));
		}
		close(fds[1]);
		while ((n = read(fds[0], out + outlen,
				 sizeof(out) - 1 - outlen)) > 0)
			outlen += n;
		close(fds[0]);
		out[outlen] = '\0';
		if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status)) {
			fputs(out, stdout);
			fprintf(stderr, "aggregate: the run of %s failed\n", tok);
			return 1;
		}
		agg_label(last, sizeof(last), cfg.samples);
		if (!first[0])
			strcpy(first, last);
	}
	free(list);
	fputs(out, stdout);
	if (strcmp(first, last)) {
		double r1 = agg_get(out, first, "peak_rss_kb");
		double r2 = agg_get(out, last, "peak_rss_kb");
		double i1 = agg_get(out, first, "ingest_samples_per_cpu_sec");
		double i2 = agg_get(out, last, "ingest_samples_per_cpu_sec");
		double ratio = r1 > 0 ? r2 / r1 : -1;
		double slow = i1 < i2 ? i1 : i2;

		printf("rss_ratio %.3f\n", ratio);
		printf("rss_goal_met %d\n",
		       ratio > 0 && ratio < 1 + AGG_GOAL_RSS &&
		       ratio > 1 - AGG_GOAL_RSS);
		printf("ingest_vs_goal %.2f\n", slow / AGG_GOAL_RATE);
	}
	return 0;

usage:
	fprintf(stderr, "usage: aggregate [--samples N[,N..]] [--stacks K (<= 16384)] [--cpus C] [--hz HZ] [--idle-cpus I [--no-sync]] [--lag-ms MS] [--finish [--out PREFIX]] [--map FILE] [--write FILE (one N, no --finish)]\n");
	return 2;
}
