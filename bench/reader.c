// SPDX-License-Identifier: GPL-2.0
/*
 * reader: throughput of plabel's reader, from a record stream to a written
 * pprof file, on a synthetic but realistic stream.
 *
 *   reader [--mode fp|dwarf] [--samples N] [--stacks K] [--out DIR]
 *          [--settle-lag-ms MS]
 *
 * The stream is made from this program's own call chains: a recursive
 * family of functions is walked along K different paths (default 300),
 * and at the bottom of each the real state is captured: the frame-pointer
 * chain (fp mode) or the user registers and an 8 KiB copy of the stack
 * (dwarf mode, what the kernel's snapshot holds). The stream has the
 * STREAM record, MMAP records of this process's executable mappings, 8
 * label sets, and N samples (default 2000000 fp, 200000 dwarf) drawn from
 * the K chains on 64 simulated CPUs, by 16 threads, each sample with its
 * thread's CPU time, in the order read() gives them: runs of one CPU's
 * records. It is written to DIR/stream.bin.
 *
 * A child process then does what `plabel record` does after read(): feeds
 * the stream in 256 KiB buffers of whole records to the collector
 * (tools/collect.c, unwinding in dwarf mode), finishes the CPU and
 * thread-create profiles (symbolized with libdw) and writes
 * DIR/cpu.pb.gz. Printed, as "key value" lines: samples, seconds (wall),
 * samples_per_sec, stream_bytes, pprof_bytes, maxrss_kb (the child's peak
 * resident memory), cpu_seconds and samples_per_cpu_sec (the child's user
 * and system time: the figure that a busy machine disturbs least), and
 * that CPU time split into ingest (decoding and collecting, what runs while
 * recording) and finish (building, symbolizing and writing the profiles,
 * once at the end): ingest_cpu_seconds, ingest_samples_per_cpu_sec,
 * finish_cpu_seconds. With --settle-lag-ms, each buffer is followed, as
 * in `plabel record`, by the time before which every record is in: here
 * the newest sample's time less MS (record's margin is 2000; 0 before
 * that), so samples are merged as they settle, and as the collector's
 * watermark passes them (see collect.h); held_max is then the most
 * samples held one by one, and merged the distinct merged samples at the
 * end.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"
#include "profile.h"
#include "stream.h"
#include "symbolize.h"

#define PLABEL_RB_MAX_DEPTH	64
#define PLABEL_RB_SNAP		8192
#define PLABEL_RB_CHUNK		(256 * 1024)
#define PLABEL_RB_CPUS		64
#define PLABEL_RB_SETS		8

struct plabel_rb_chain {
	uint64_t ips[PLABEL_RB_MAX_DEPTH];
	uint16_t n;
	uint64_t regs[PLABEL_REGS_NR];
	uint32_t stack_size;
	uint8_t stack[PLABEL_RB_SNAP];
};

static struct plabel_rb_chain *plabel_rb_chains;
static int plabel_rb_nchains;
static int plabel_rb_dwarf;
static uintptr_t plabel_rb_stack_end;

/* The bottom of a path: capture this frame's state. */
static __attribute__((noinline)) void plabel_rb_capture(void)
{
	struct plabel_rb_chain *c = &plabel_rb_chains[plabel_rb_nchains++];
	uint64_t rip, rsp, rbp, rbx, r12, r13, r14, r15, *fp;
	size_t avail;

	__asm__ volatile("lea 0(%%rip), %0\n\t"
			 "mov %%rsp, %1\n\t"
			 "mov %%rbp, %2\n\t"
			 "mov %%rbx, %3\n\t"
			 "mov %%r12, %4\n\t"
			 "mov %%r13, %5\n\t"
			 "mov %%r14, %6\n\t"
			 "mov %%r15, %7\n\t"
			 : "=r"(rip), "=r"(rsp), "=r"(rbp), "=r"(rbx),
			   "=r"(r12), "=r"(r13), "=r"(r14), "=r"(r15));
	memset(c->regs, 0, sizeof(c->regs));
	c->regs[PLABEL_REG_RIP] = rip;
	c->regs[PLABEL_REG_RSP] = rsp;
	c->regs[PLABEL_REG_RBP] = rbp;
	c->regs[PLABEL_REG_RBX] = rbx;
	c->regs[PLABEL_REG_R12] = r12;
	c->regs[PLABEL_REG_R13] = r13;
	c->regs[PLABEL_REG_R14] = r14;
	c->regs[PLABEL_REG_R15] = r15;
	avail = plabel_rb_stack_end - rsp;
	c->stack_size = avail < PLABEL_RB_SNAP ? avail : PLABEL_RB_SNAP;
	memcpy(c->stack, (void *)rsp, c->stack_size);

	/* the frame-pointer chain, as the kernel walks it */
	c->ips[0] = rip;
	c->n = 1;
	fp = (uint64_t *)rbp;
	while (fp && c->n < PLABEL_RB_MAX_DEPTH &&
	       (uintptr_t)fp > rsp && (uintptr_t)fp < plabel_rb_stack_end) {
		if (!fp[1])
			break;
		c->ips[c->n++] = fp[1];
		fp = (uint64_t *)fp[0];
	}
}

static void plabel_rb_path_a(unsigned int path, int depth);
static void plabel_rb_path_b(unsigned int path, int depth);
static void plabel_rb_path_c(unsigned int path, int depth);

/* Three functions choosing among each other by the digits of path. */
#define PLABEL_RB_STEP(name, padsz)					\
static __attribute__((noinline)) void name(unsigned int path, int depth) \
{									\
	volatile char pad[padsz];					\
									\
	pad[0] = (char)depth;						\
	if (depth == 0) {						\
		plabel_rb_capture();					\
		return;							\
	}								\
	switch (path % 3) {						\
	case 0:								\
		plabel_rb_path_a(path / 3, depth - 1);			\
		break;							\
	case 1:								\
		plabel_rb_path_b(path / 3, depth - 1);			\
		break;							\
	default:							\
		plabel_rb_path_c(path / 3, depth - 1);			\
		break;							\
	}								\
	pad[1] = pad[0];						\
}

/* distinct frame sizes keep the compiler from folding them into one */
PLABEL_RB_STEP(plabel_rb_path_a, 16)
PLABEL_RB_STEP(plabel_rb_path_b, 48)
PLABEL_RB_STEP(plabel_rb_path_c, 80)

static void *plabel_rb_make_chains(void *arg)
{
	int k = *(int *)arg, i;
	pthread_attr_t attr;
	void *addr;
	size_t size;

	pthread_getattr_np(pthread_self(), &attr);
	pthread_attr_getstack(&attr, &addr, &size);
	pthread_attr_destroy(&attr);
	plabel_rb_stack_end = (uintptr_t)addr + size;
	/* depths 6 to 15, paths distinct: 3^6 > 300 */
	for (i = 0; i < k; i++)
		plabel_rb_path_a((unsigned int)i * 7919u, 6 + i % 10);
	return NULL;
}

/* --- stream writing ----------------------------------------------------- */

static FILE *plabel_rb_f;
static uint64_t plabel_rb_time = 1000000000ULL;

static void plabel_rb_put(const void *rec, size_t len)
{
	static const uint8_t zeros[8];
	size_t pad = (8 - len % 8) % 8;

	fwrite(rec, 1, len, plabel_rb_f);
	fwrite(zeros, 1, pad, plabel_rb_f);
}

static void plabel_rb_emit_mmaps(uint32_t pid)
{
	char line[4096], perm[8], path[PATH_MAX];
	unsigned long start, end, off;
	FILE *m = fopen("/proc/self/maps", "r");

	if (!m)
		return;
	while (fgets(line, sizeof(line), m)) {
		struct {
			struct plabel_rec_mmap h;
			char path[PATH_MAX];
		} r;
		size_t pl;

		path[0] = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4095s", &start,
			   &end, perm, &off, path) < 4)
			continue;
		if (perm[2] != 'x' || path[0] != '/')
			continue;
		pl = strlen(path);
		memset(&r, 0, sizeof(r));
		r.h.hdr.type = PLABEL_REC_MMAP;
		r.h.hdr.size = (sizeof(r.h) + pl + 7) & ~7UL;
		r.h.time_ns = plabel_rb_time;
		r.h.pid = pid;
		r.h.path_len = pl;
		r.h.start = start;
		r.h.end = end;
		r.h.offset = off;
		memcpy(r.path, path, pl);
		plabel_rb_put(&r, sizeof(r.h) + pl);
	}
	fclose(m);
}

static void plabel_rb_emit_labelset(uint64_t id)
{
	struct {
		struct plabel_rec_labelset h;
		struct plabel_rec_label l[2];
		char bytes[128];
	} r;
	char b[128];
	int n;

	n = snprintf(b, sizeof(b), "endpoint/api/v1/item%llutenantacme",
		     (unsigned long long)id);
	memset(&r, 0, sizeof(r));
	r.h.hdr.type = PLABEL_REC_LABELSET;
	r.h.id = id;
	r.h.count = 2;
	r.l[0].key_len = 8;
	r.l[0].value_len = n - 8 - 10;
	r.l[1].key_len = 6;
	r.l[1].value_len = 4;
	memcpy(r.bytes, b, n);
	r.h.hdr.size = (sizeof(r.h) + sizeof(r.l) + n + 7) & ~7UL;
	plabel_rb_put(&r, sizeof(r.h) + sizeof(r.l) + n);
}

static void plabel_rb_emit_sample(const struct plabel_rb_chain *c,
				  uint32_t pid, uint64_t i, uint64_t set)
{
	static uint8_t buf[sizeof(struct plabel_rec_sample) +
			   PLABEL_RB_MAX_DEPTH * 8 + PLABEL_REGS_NR * 8 +
			   PLABEL_RB_SNAP];
	struct plabel_rec_sample *s = (void *)buf;
	size_t len = sizeof(*s);

	memset(s, 0, sizeof(*s));
	s->hdr.type = PLABEL_REC_SAMPLE;
	s->time_ns = plabel_rb_time + i * 1563;	/* 10 kHz on 64 CPUs */
	s->set_id = set;
	s->pid = pid;
	s->tid = pid + (uint32_t)(i % 16);
	s->cpu = (uint32_t)(i % PLABEL_RB_CPUS);
	s->flags = PLABEL_SAMPLE_USER | PLABEL_SAMPLE_CPUTIME;
	/* 16 threads, each with a period of CPU time between its samples */
	s->cpu_ns = (i / 16 + 1) * 100000;
	if (plabel_rb_dwarf) {
		s->flags |= PLABEL_SAMPLE_REGS;
		s->stack_size = c->stack_size;
		memcpy(buf + len, c->regs, sizeof(c->regs));
		len += sizeof(c->regs);
		memcpy(buf + len, c->stack, c->stack_size);
		len += c->stack_size;
	} else {
		s->nr_user = c->n;
		memcpy(buf + len, c->ips, c->n * 8);
		len += c->n * 8;
	}
	s->hdr.size = (len + 7) & ~7UL;
	plabel_rb_put(buf, len);
}

/*
 * The i-th record written holds sample plabel_rb_order(i) (numbered in
 * time order): a read() goes round the CPUs' rings in turn, taking what
 * each holds, so records come as runs of one CPU's, each run in time order.
 * Here every run is PLABEL_RB_RUN samples; the last round, if short, is in
 * time order.
 */
#define PLABEL_RB_RUN		32

static uint64_t plabel_rb_order(uint64_t i, uint64_t n)
{
	uint64_t round = PLABEL_RB_RUN * PLABEL_RB_CPUS;
	uint64_t r = i % round, base = i - r;

	if (base + round > n)
		return i;
	return base + r % PLABEL_RB_RUN * PLABEL_RB_CPUS + r / PLABEL_RB_RUN;
}

/* --- the timed reader ----------------------------------------------------- */

static double plabel_rb_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* this process's CPU time, seconds */
static double plabel_rb_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int plabel_rb_read(const char *stream, const char *outpath,
			  uint64_t lag_ns)
{
	struct plabel_prof *profs[PLABEL_PROF_NKINDS] = { NULL };
	struct plabel_collect_stats st;
	struct plabel_collect *col;
	struct plabel_syms *syms;
	uint8_t *buf = malloc(PLABEL_RB_CHUNK + 65536);
	size_t have = 0, used, i;
	uint64_t newest = 0, held_max = 0;
	double t0, t1, c0, c1, c2;
	ssize_t n;
	int fd, ret;

	fd = open(stream, O_RDONLY);
	if (fd < 0 || !buf)
		return 1;
	t0 = plabel_rb_now();
	c0 = plabel_rb_cpu();
	syms = plabel_syms_new();
	col = syms ? plabel_collect_new(syms, 0) : NULL;
	if (!col)
		return 1;
	for (;;) {
		n = read(fd, buf + have, PLABEL_RB_CHUNK + 65536 - have);
		if (n < 0)
			return 1;
		have += n;
		if (!have)
			break;
		/* whole records only, as read() on /dev/plabel gives */
		used = 0;
		while (used + 8 <= have) {
			struct plabel_rec_sample h;

			memcpy(&h.hdr, buf + used, sizeof(h.hdr));
			if (h.hdr.size < 8 || used + h.hdr.size > have)
				break;
			if (h.hdr.type == PLABEL_REC_SAMPLE &&
			    h.hdr.size >= sizeof(h)) {
				memcpy(&h, buf + used, sizeof(h));
				if (h.time_ns > newest)
					newest = h.time_ns;
			}
			used += h.hdr.size;
		}
		if (!used)
			return 1;
		ret = plabel_collect_buffer(col, buf, used);
		/* (0 at first: record's first read() starts the merging) */
		if (!ret && lag_ns)
			ret = plabel_collect_settled(col, newest > lag_ns ?
						     newest - lag_ns : 0);
		plabel_collect_stats(col, &st);
		if (st.held > held_max)
			held_max = st.held;
		if (ret) {
			fprintf(stderr, "reader: collect: %s\n",
				strerror(-ret));
			return 1;
		}
		memmove(buf, buf + used, have - used);
		have -= used;
		if (!n && !have)
			break;
	}
	close(fd);
	c1 = plabel_rb_cpu();
	ret = plabel_collect_finish(col, 0, 1000000000, profs);
	if (!ret)
		ret = plabel_prof_write(profs[PLABEL_PROF_CPU], outpath);
	t1 = plabel_rb_now();
	if (ret) {
		fprintf(stderr, "reader: finish: %s\n", strerror(-ret));
		return 1;
	}
	c2 = plabel_rb_cpu();
	plabel_collect_stats(col, &st);
	printf("samples %llu\n", (unsigned long long)st.samples);
	if (lag_ns) {
		printf("held_max %llu\n", (unsigned long long)held_max);
		printf("merged %llu\n", (unsigned long long)st.merged);
	}
	printf("ingest_cpu_seconds %.3f\n", c1 - c0);
	printf("finish_cpu_seconds %.3f\n", c2 - c1);
	if (c1 > c0)
		printf("ingest_samples_per_cpu_sec %.0f\n",
		       st.samples / (c1 - c0));
	printf("seconds %.3f\n", t1 - t0);
	printf("samples_per_sec %.0f\n", st.samples / (t1 - t0));
	for (i = 0; i < PLABEL_PROF_NKINDS; i++)
		plabel_prof_free(profs[i]);
	plabel_collect_free(col);
	plabel_syms_free(syms);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = "/tmp";
	char stream[PATH_MAX], outpath[PATH_MAX];
	uint64_t nsamples = 0, i, x = 88172645463325252ULL, lag_ms = 0;
	int k = 300, i2, status;
	struct rusage ru;
	struct stat sb;
	double cpu_s;
	pthread_t t;
	pid_t child;
	uint32_t pid = (uint32_t)getpid();

	for (i2 = 1; i2 + 1 < argc; i2 += 2) {
		if (!strcmp(argv[i2], "--mode"))
			plabel_rb_dwarf = !strcmp(argv[i2 + 1], "dwarf");
		else if (!strcmp(argv[i2], "--samples"))
			nsamples = strtoull(argv[i2 + 1], NULL, 0);
		else if (!strcmp(argv[i2], "--stacks"))
			k = atoi(argv[i2 + 1]);
		else if (!strcmp(argv[i2], "--out"))
			dir = argv[i2 + 1];
		else if (!strcmp(argv[i2], "--settle-lag-ms"))
			lag_ms = strtoull(argv[i2 + 1], NULL, 0);
		else
			return 2;
	}
	if (!nsamples)
		nsamples = plabel_rb_dwarf ? 200000 : 2000000;
	if (k < 1 || k > 100000)
		return 2;
	plabel_rb_chains = calloc(k, sizeof(*plabel_rb_chains));
	if (!plabel_rb_chains)
		return 1;
	pthread_create(&t, NULL, plabel_rb_make_chains, &k);
	pthread_join(t, NULL);

	snprintf(stream, sizeof(stream), "%s/stream.bin", dir);
	snprintf(outpath, sizeof(outpath), "%s/cpu.pb.gz", dir);
	plabel_rb_f = fopen(stream, "w");
	if (!plabel_rb_f) {
		fprintf(stderr, "reader: %s: %s\n", stream, strerror(errno));
		return 1;
	}
	{
		struct plabel_rec_stream s;

		memset(&s, 0, sizeof(s));
		s.hdr.type = PLABEL_REC_STREAM;
		s.hdr.size = sizeof(s);
		s.version = PLABEL_REC_VERSION;
		s.callchain = plabel_rb_dwarf ? PLABEL_CALLCHAIN_DWARF :
						PLABEL_CALLCHAIN_FP;
		s.period_ns = 100000;
		s.start_ns = plabel_rb_time;
		s.ncpus = PLABEL_RB_CPUS;
		plabel_rb_put(&s, sizeof(s));
	}
	plabel_rb_emit_mmaps(pid);
	for (i = 1; i <= PLABEL_RB_SETS; i++)
		plabel_rb_emit_labelset(i);
	for (i = 0; i < nsamples; i++) {
		/* xorshift: a skewed draw, a few stacks hot, many cold */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		plabel_rb_emit_sample(&plabel_rb_chains[(x % k) * (x % k) / k],
				      pid, plabel_rb_order(i, nsamples),
				      1 + (x >> 32) % PLABEL_RB_SETS);
	}
	if (fclose(plabel_rb_f)) {
		fprintf(stderr, "reader: %s: write failed\n", stream);
		return 1;
	}
	stat(stream, &sb);
	free(plabel_rb_chains);
	fflush(stdout);

	child = fork();
	if (child == 0) {
		i2 = plabel_rb_read(stream, outpath, lag_ms * 1000000);
		fflush(stdout);
		_exit(i2);
	}
	if (child < 0 || wait4(child, &status, 0, &ru) != child ||
	    !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	printf("stream_bytes %lld\n", (long long)sb.st_size);
	if (!stat(outpath, &sb))
		printf("pprof_bytes %lld\n", (long long)sb.st_size);
	printf("maxrss_kb %ld\n", ru.ru_maxrss);
	cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	printf("cpu_seconds %.3f\n", cpu_s);
	if (cpu_s > 0)
		printf("samples_per_cpu_sec %.0f\n", nsamples / cpu_s);
	return 0;
}
