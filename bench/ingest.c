// SPDX-License-Identifier: GPL-2.0
/*
 * ingest: the collector's ingest speed on a stream file, the same bytes
 * for every build of the collector it is linked with.
 *
 *   ingest STREAM [--settle-lag-ms MS] [--reps R]
 *
 * The stream (bench/reader and bench/aggregate --write make them) is
 * read into memory first, then
 * fed R times (default 3), each time to a collector of its own, much as
 * `plabel record` feeds what read() gives: 256 KiB of whole records at a
 * time, each buffer followed by the time before which every record is in,
 * the newest sample's time less MS (default 2000, record's margin; 0
 * before that, as record's first read() starts the merging). Only that
 * loop's CPU time counts (the process's, which is one thread): decoding,
 * collecting, merging. Printed, as "key value" lines: samples, then for
 * each rep ingest_samples_per_cpu_sec.N, then the best rep's as
 * ingest_samples_per_cpu_sec (the run the host disturbed least) and held
 * (samples not merged at the end).
 *
 * The file uses only what every collector since the one the reader had
 * when the ingest goal was set (commit f983dca) offers, so that make bench
 * builds it against that collector too, from the project's history, and
 * runs both on one stream in one run (bench/run.sh).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"
#include "stream.h"
#include "symbolize.h"

#define ING_CHUNK	(256 * 1024)

static double ing_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The length of the whole records of buf[0, len) that fit in cap bytes. */
static size_t ing_whole(const uint8_t *buf, size_t len, size_t cap,
			uint64_t *newest)
{
	size_t used = 0;

	while (used + sizeof(struct plabel_rec_header) <= len) {
		struct plabel_rec_sample h;

		memcpy(&h.hdr, buf + used, sizeof(h.hdr));
		if (h.hdr.size < sizeof(h.hdr) || h.hdr.size > len - used ||
		    used + h.hdr.size > cap)
			break;
		if (h.hdr.type == PLABEL_REC_SAMPLE &&
		    h.hdr.size >= sizeof(h)) {
			memcpy(&h, buf + used, sizeof(h));
			if (h.time_ns > *newest)
				*newest = h.time_ns;
		}
		used += h.hdr.size;
	}
	return used;
}

/*
 * Whether s[0, len) is whole records of at most ING_CHUNK bytes; if not,
 * *bad is the offset of the first that is not.
 */
static int ing_check(const uint8_t *s, size_t len, size_t *bad)
{
	uint64_t newest = 0;
	size_t off = 0, used;

	while (off < len) {
		used = ing_whole(s + off, len - off, ING_CHUNK, &newest);
		if (!used) {
			*bad = off;
			return 0;
		}
		off += used;
	}
	return 1;
}

/* One rep: samples per CPU-second, or a negative errno. */
static double ing_rep(const uint8_t *s, size_t len, uint64_t lag_ns,
		      struct plabel_collect_stats *st)
{
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_collect *col = NULL;
	uint64_t newest = 0;
	size_t off = 0, used;
	double c0, c1;
	int ret = 0;

	/* the threads as labels, as record has them */
	if (syms)
		col = plabel_collect_new(syms, PLABEL_COLLECT_PID_LABELS);
	if (!col) {
		plabel_syms_free(syms);
		return -ENOMEM;
	}
	c0 = ing_cpu();
	while (off < len && !ret) {
		used = ing_whole(s + off, len - off, ING_CHUNK, &newest);
		ret = plabel_collect_buffer(col, s + off, used);
		if (!ret)
			ret = plabel_collect_settled(col, newest > lag_ns ?
						     newest - lag_ns : 0);
		off += used;
	}
	c1 = ing_cpu();
	plabel_collect_stats(col, st);
	plabel_collect_free(col);
	plabel_syms_free(syms);
	if (ret)
		return ret;
	return c1 > c0 ? st->samples / (c1 - c0) : 0;
}

int main(int argc, char **argv)
{
	struct plabel_collect_stats st;
	uint64_t lag_ns = 2000000000ULL;
	unsigned long reps = 3, i;
	double best = 0, r;
	const char *path = NULL;
	unsigned long long ms;
	uint8_t *s;
	struct stat sb;
	ssize_t n;
	size_t got = 0, bad;
	int fd, a;
	char *end;

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--settle-lag-ms") && a + 1 < argc) {
			a++;
			errno = 0;
			ms = strtoull(argv[a], &end, 10);
			if (argv[a][0] < '0' || argv[a][0] > '9' || *end ||
			    errno || ms > 3600000)
				goto usage;
			lag_ns = ms * 1000000ULL;
		} else if (!strcmp(argv[a], "--reps") && a + 1 < argc) {
			reps = strtoul(argv[++a], &end, 10);
			if (*end || !reps || reps > 100)
				goto usage;
		} else if (argv[a][0] != '-' && !path) {
			path = argv[a];
		} else {
			goto usage;
		}
	}
	if (!path)
		goto usage;
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &sb)) {
		fprintf(stderr, "ingest: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (!S_ISREG(sb.st_mode) || !sb.st_size) {
		fprintf(stderr, "ingest: %s: not a stream file, or empty\n",
			path);
		close(fd);
		return 1;
	}
	s = malloc(sb.st_size);
	if (!s) {
		fprintf(stderr, "ingest: %s: out of memory\n", path);
		close(fd);
		return 1;
	}
	while (got < (size_t)sb.st_size &&
	       (n = read(fd, s + got, sb.st_size - got)) > 0)
		got += n;
	close(fd);
	if (got != (size_t)sb.st_size) {
		fprintf(stderr, "ingest: %s: short read\n", path);
		free(s);
		return 1;
	}
	if (!ing_check(s, got, &bad)) {
		fprintf(stderr, "ingest: %s: at byte %zu: a truncated, bad or "
			"over %u-byte record\n", path, bad, ING_CHUNK);
		free(s);
		return 1;
	}
	for (i = 0; i < reps; i++) {
		r = ing_rep(s, got, lag_ns, &st);
		if (r < 0) {
			fprintf(stderr, "ingest: %s: %s\n", path,
				strerror((int)-r));
			free(s);
			return 1;
		}
		if (!i)
			printf("samples %llu\n",
			       (unsigned long long)st.samples);
		printf("ingest_samples_per_cpu_sec.%lu %.0f\n", i + 1, r);
		if (r > best)
			best = r;
	}
	printf("ingest_samples_per_cpu_sec %.0f\n", best);
	printf("held %llu\n", (unsigned long long)st.held);
	free(s);
	return 0;
usage:
	fprintf(stderr, "usage: ingest STREAM [--settle-lag-ms MS] "
		"[--reps R]\n");
	return 2;
}
