// SPDX-License-Identifier: GPL-2.0
/*
 * plabel threads -p PID [-o FILE] [-g fp|dwarf]: what each thread of a
 * process is doing now. See threads.h.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"
#include "plabel.h"
#include "plabel_uapi.h"
#include "session.h"
#include "table.h"
#include "threads.h"

/* The record buffer: first size, and the most it grows to. */
#define PLABEL_THREADS_BUF	(1U << 20)
#define PLABEL_THREADS_BUF_MAX	(256U << 20)

void plabel_threads_usage(FILE *f)
{
	fputs("usage: plabel threads -p PID [-o FILE] [-g fp|dwarf]\n"
	      "\n"
	      "Show what each thread of process PID is doing now: its labels,\n"
	      "its state (running, sleeping, disk, stopped, ...), what it waits\n"
	      "for (wait: sleep, io, futex, other) and its stack, where it\n"
	      "blocked (with the kernel's part when plabel may read kernel\n"
	      "stacks: CAP_PERFMON, on kernels that allow it). Threads with the\n"
	      "same stack and labels are counted together, like Go's goroutine\n"
	      "profile. Needs ptrace read access to PID.\n"
	      "\n"
	      "  -p PID         the process\n"
	      "  -o FILE        write the threads profile (pprof, gzipped;\n"
	      "                 sample type threads/count) to FILE instead of\n"
	      "                 the text view\n"
	      "  -g fp|dwarf    user call chains from frame pointers (default)\n"
	      "                 or from a stack copy unwound with DWARF CFI\n"
	      "  -h, --help     show this help\n", f);
}

/*
 * PLABEL_IOC_THREADS_GET for pid into a buffer that grows until the
 * records fit: kernel stacks when allowed. 0 or -errno; *buf malloc()ed,
 * *hidden the threads the kernel left out (not readable).
 */
static int plabel_threads_read(int fd, int32_t pid, uint32_t callchain,
			       uint8_t **buf, uint32_t *len, uint32_t *hidden)
{
	struct plabel_threads_get_args a;
	uint32_t cap = PLABEL_THREADS_BUF, flags = PLABEL_THREADS_KERNEL;
	uint8_t *b = NULL, *nb;

	for (;;) {
		nb = realloc(b, cap);
		if (!nb) {
			free(b);
			return -ENOMEM;
		}
		b = nb;
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.flags = flags;
		a.pid = pid;
		a.callchain = callchain;
		a.buf = (uintptr_t)b;
		a.buf_len = cap;
		if (!ioctl(fd, PLABEL_IOC_THREADS_GET, &a))
			break;
		if ((errno == EPERM || errno == EOPNOTSUPP) && flags) {
			flags = 0;	/* no kernel stacks then */
			continue;
		}
		if (errno != ENOSPC || cap >= PLABEL_THREADS_BUF_MAX) {
			int err = -errno;

			free(b);
			return err;
		}
		cap *= 2;
	}
	*buf = b;
	*len = a.buf_used;
	*hidden = a.nhidden;
	return 0;
}

int plabel_threads_profile(int fd, const int32_t *pids, uint32_t n,
			   uint32_t callchain, struct plabel_prof **out,
			   uint32_t *skipped)
{
	struct plabel_prof *profs[PLABEL_PROF_NKINDS] = { NULL };
	struct plabel_collect *col;
	struct plabel_syms *syms;
	struct timespec ts;
	uint32_t i, skip = 0, hidden = 0;
	size_t k;
	int ret = 0;

	syms = plabel_syms_new();
	col = syms ? plabel_collect_new(syms, PLABEL_COLLECT_PROC_MAPS |
					PLABEL_COLLECT_PID_LABELS |
					PLABEL_COLLECT_NAME_LABELS) : NULL;
	if (!col) {
		plabel_syms_free(syms);
		return -ENOMEM;
	}
	for (i = 0; i < n && !ret; i++) {
		uint8_t *buf = NULL;
		uint32_t len = 0, h = 0;

		ret = plabel_threads_read(fd, pids[i], callchain, &buf, &len,
					  &h);
		hidden += h;
		if ((ret == -ESRCH || ret == -EACCES) && n > 1) {
			/* of many: one gone or not readable is left out */
			skip++;
			ret = 0;
			continue;
		}
		if (ret)
			break;
		ret = plabel_collect_buffer(col, buf, len);
		free(buf);
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	if (!ret)
		ret = plabel_collect_finish(col, (int64_t)ts.tv_sec *
					    1000000000LL + ts.tv_nsec, 0,
					    profs);
	plabel_collect_free(col);
	plabel_syms_free(syms);
	if (ret)
		return ret;
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		if (k != PLABEL_PROF_THREADS)
			plabel_prof_free(profs[k]);
	if (hidden) {
		char note[64];

		snprintf(note, sizeof(note),
			 "threads left out (not readable): %u", hidden);
		if (plabel_prof_add_comment(profs[PLABEL_PROF_THREADS], note)) {
			plabel_prof_free(profs[PLABEL_PROF_THREADS]);
			return -ENOMEM;
		}
	}
	*out = profs[PLABEL_PROF_THREADS];
	if (skipped)
		*skipped = skip;
	return 0;
}

/* ---- the text view ---- */

struct plabel_tgroup {
	size_t first;		/* sample index it was first seen at */
	int64_t count;
};

/* Whether label l is left out of the grouping (it names the thread). */
static int plabel_tlabel_skip(const struct plabel_prof_label *l)
{
	return !strcmp(l->key, "thread");
}

static int plabel_tlabel_cmp(const void *a, const void *b)
{
	const struct plabel_prof_label *const *x = a, *const *y = b;

	return strcmp((*x)->key, (*y)->key);
}

/* Samples i and j have the same stack and labels (names aside). */
static int plabel_tsame(const struct plabel_prof *p, size_t i, size_t j)
{
	struct plabel_prof_sample_info a, b;
	size_t k, l;

	plabel_prof_get_sample(p, i, &a);
	plabel_prof_get_sample(p, j, &b);
	if (a.nlocs != b.nlocs ||
	    memcmp(a.loc_ids, b.loc_ids, a.nlocs * sizeof(*a.loc_ids)))
		return 0;
	/* every label of one is in the other: keys are unique */
	for (k = 0; k < a.nlabels; k++) {
		if (plabel_tlabel_skip(&a.labels[k]))
			continue;
		for (l = 0; l < b.nlabels; l++)
			if (!strcmp(a.labels[k].key, b.labels[l].key))
				break;
		if (l == b.nlabels ||
		    strcmp(a.labels[k].value, b.labels[l].value))
			return 0;
	}
	for (l = 0, k = 0; l < b.nlabels; l++)
		k += !plabel_tlabel_skip(&b.labels[l]);
	for (l = 0; l < a.nlabels; l++)
		k -= !plabel_tlabel_skip(&a.labels[l]);
	return k == 0;
}

/*
 * What plabel_tsame() compares, hashed: the stack and the labels but the
 * thread name, in any order (a sum of each label's hash).
 */
static uint64_t plabel_tsample_hash(const struct plabel_prof *p, size_t i)
{
	struct plabel_prof_sample_info si;
	uint64_t h = 0, lh = 0;
	size_t k;

	plabel_prof_get_sample(p, i, &si);
	for (k = 0; k < si.nlocs; k++)
		h = plabel_hash2(h, si.loc_ids[k]);
	for (k = 0; k < si.nlabels; k++)
		if (!plabel_tlabel_skip(&si.labels[k]))
			lh += plabel_hash2(
				plabel_str_hash(PLABEL_FNV_INIT, si.labels[k].key),
				plabel_str_hash(PLABEL_FNV_INIT, si.labels[k].value));
	return plabel_hash2(h, lh);
}

static int plabel_tgroup_cmp(const void *a, const void *b)
{
	const struct plabel_tgroup *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* A label's text, quoted, with " and \ escaped. */
static void plabel_tquote(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

static void plabel_tgroup_print(const struct plabel_prof *p,
				const struct plabel_tgroup *g,
				const struct plabel_prof_label **sorted,
				FILE *out)
{
	struct plabel_prof_sample_info si;
	struct plabel_prof_location_info li;
	size_t i, n = 0, k;

	plabel_prof_get_sample(p, g->first, &si);
	fprintf(out, "%" PRId64 " @", g->count);
	for (i = 0; i < si.nlocs; i++)
		if (!plabel_prof_find_location(p, si.loc_ids[i], &li))
			fprintf(out, " %#" PRIx64, li.address);
	fputc('\n', out);
	for (i = 0; i < si.nlabels; i++)
		if (!plabel_tlabel_skip(&si.labels[i]))
			sorted[n++] = &si.labels[i];
	qsort(sorted, n, sizeof(*sorted), plabel_tlabel_cmp);
	if (n) {
		fputs("# labels: {", out);
		for (i = 0; i < n; i++) {
			if (i)
				fputs(", ", out);
			plabel_tquote(out, sorted[i]->key);
			fputc(':', out);
			plabel_tquote(out, sorted[i]->value);
		}
		fputs("}\n", out);
	}
	for (i = 0; i < si.nlocs; i++) {
		if (plabel_prof_find_location(p, si.loc_ids[i], &li))
			continue;
		if (!li.nlines) {
			fprintf(out, "#\t%#" PRIx64 "\t?\n", li.address);
			continue;
		}
		/* innermost inlined frame first, as pprof lists them */
		for (k = 0; k < li.nlines; k++) {
			const struct plabel_prof_line *ln = &li.lines[k];

			fprintf(out, "#\t%#" PRIx64 "\t%s", li.address,
				ln->function ? ln->function : "?");
			if (ln->file && *ln->file && ln->line)
				fprintf(out, "\t%s:%" PRId64, ln->file,
					ln->line);
			else if (ln->file && *ln->file)
				fprintf(out, "\t%s", ln->file);
			fputc('\n', out);
		}
	}
	fputc('\n', out);
}

int plabel_threads_text(const struct plabel_prof *p, FILE *out)
{
	size_t ns = plabel_prof_num_samples(p), ng = 0, i, j, maxl = 1;
	struct plabel_tgroup *g = calloc(ns ? ns : 1, sizeof(*g));
	const struct plabel_prof_label **sorted;
	struct plabel_itab tab = { 0 };
	int64_t total = 0;

	/* (groups are found by hash: a server may show many threads) */
	if (!g || plabel_itab_reserve(&tab, ns ? ns : 1)) {
		free(g);
		plabel_itab_free(&tab);
		return -ENOMEM;
	}
	for (i = 0; i < ns; i++) {
		struct plabel_prof_sample_info si;
		uint64_t h = plabel_tsample_hash(p, i);
		size_t pos = SIZE_MAX;
		int64_t v;

		plabel_prof_get_sample(p, i, &si);
		v = si.values[0];
		total += v;
		if (si.nlabels > maxl)
			maxl = si.nlabels;
		while ((j = plabel_itab_next(&tab, h, &pos)) != SIZE_MAX)
			if (plabel_tsame(p, g[j].first, i))
				break;
		if (j == SIZE_MAX) {
			j = ng++;
			g[j].first = i;
			plabel_itab_put(&tab, h, j);
		}
		g[j].count += v;
	}
	plabel_itab_free(&tab);
	sorted = calloc(maxl, sizeof(*sorted));
	if (!sorted) {
		free(g);
		return -ENOMEM;
	}
	qsort(g, ng, sizeof(*g), plabel_tgroup_cmp);
	fprintf(out, "threads profile: total %" PRId64 "\n", total);
	for (i = 0; i < ng; i++)
		plabel_tgroup_print(p, &g[i], sorted, out);
	free(sorted);
	free(g);
	return ferror(out) ? -EIO : 0;
}

/* ---- the command ---- */

int plabel_cmd_threads(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint32_t callchain = PLABEL_CALLCHAIN_FP;
	const char *out = NULL;
	struct plabel_prof *prof;
	unsigned long pid = 0;
	int32_t p32;
	int c, fd, ret;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+p:o:g:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (plabel_parse_ulong(optarg, 1, INT32_MAX, &pid)) {
				fprintf(stderr, "plabel threads: bad PID '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'o':
			out = optarg;
			break;
		case 'g':
			if (plabel_parse_callchain(optarg, &callchain)) {
				fprintf(stderr,
					"plabel threads: -g takes fp or dwarf, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			plabel_threads_usage(stdout);
			return 0;
		default:
			plabel_threads_usage(stderr);
			return 2;
		}
	}
	if (!pid || optind != argc) {
		fprintf(stderr, "plabel threads: %s\n",
			pid ? "unexpected arguments" : "-p PID is required");
		plabel_threads_usage(stderr);
		return 2;
	}
	fd = plabel_open_device();
	if (fd < 0)
		return 1;
	p32 = (int32_t)pid;
	ret = plabel_threads_profile(fd, &p32, 1, callchain, &prof, NULL);
	close(fd);
	if (ret) {
		fprintf(stderr, "plabel threads: process %lu: %s\n", pid,
			ret == -ESRCH ? "no such process" :
			ret == -EACCES ? "permission denied (needs ptrace read access)" :
			strerror(-ret));
		return 1;
	}
	if (out) {
		ret = plabel_prof_write(prof, out);
		if (ret)
			fprintf(stderr, "plabel threads: %s: %s\n", out,
				strerror(-ret));
	} else {
		ret = plabel_threads_text(prof, stdout);
		if (ret)
			fprintf(stderr, "plabel threads: %s\n",
				strerror(-ret));
	}
	plabel_prof_free(prof);
	return ret ? 1 : 0;
}
