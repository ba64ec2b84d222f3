// SPDX-License-Identifier: GPL-2.0
/*
 * Known allocations under known labels, for the heap profile: thread
 * endpoint=alpha allocates ALPHA MiB and keeps a third of its blocks,
 * thread endpoint=beta allocates a third as much and keeps three fifths,
 * each through every function of the malloc family in turn (sizes 64
 * bytes to 96 KiB, drawn at random), in its own function (alloc_alpha(),
 * alloc_beta()). Then a forked child under endpoint=child allocates and
 * keeps a little, frees some of what it inherited, and exits. Each block
 * is checked for what its function promises (alignment, calloc's zeros),
 * sampled or not, and the program exits 1 if one falls short. Along the
 * way: free(NULL), realloc(p, 0), realloc growing a block (its bytes
 * checked), calloc overflowing, a failed huge malloc; and the main
 * thread keeps 4 MiB
 * under the labels it started with. At exit it prints the requested
 * bytes each allocated and still holds ("heap alloc alpha=N beta=N inuse
 * alpha=N beta=N") for the test to compare with the profile. Usage:
 * heapuse [ALPHA_MIB] (default 96). With HEAPUSE_HOLD=FILE in the
 * environment it then waits, holding its blocks, until FILE exists (at
 * most a minute), for a server's scrape.
 */
#include <errno.h>
#include <malloc.h>
#include <plabel.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct heap_worker {
	const char *name;
	uint64_t target;	/* bytes to allocate */
	unsigned int keep_of5;	/* blocks kept, in fifths */
	uint64_t seed;
	uint64_t alloced, inuse;
	void **kept;
	size_t nkept;
};

static uint64_t heap_rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* One block of n bytes through function k of the family. */
static void *heap_one(unsigned int k, size_t n)
{
	void *p = NULL;

	switch (k % 8) {
	case 0:
		return malloc(n);
	case 1:
		return calloc(n / 16, 16);
	case 2:
		return realloc(NULL, n);
	case 3:
		return posix_memalign(&p, 64, n) ? NULL : p;
	case 4:
		return aligned_alloc(64, n);
	case 5:
		return memalign(128, n);
	case 6:
		return valloc(n);
	default:
		return pvalloc(n);
	}
}

/* 0 when the n bytes at p are all 1 (as heap_work writes them). */
static int heap_ones(const unsigned char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != 1)
			return -1;
	return 0;
}

/*
 * What function k promised of p, sampled or not: calloc's block cleared
 * at both ends, the alignment asked for.
 */
static void heap_check(unsigned int k, const unsigned char *p, size_t n)
{
	static const uintptr_t align[8] = { 16, 16, 16, 64, 64, 128, 4096,
					    4096 };
	size_t i;

	if ((uintptr_t)p % align[k % 8]) {
		fprintf(stderr, "heapuse: function %u: %p misaligned\n",
			k % 8, (const void *)p);
		exit(1);
	}
	if (k % 8 != 1)
		return;
	for (i = 0; i < 64; i++)
		if (p[i] || p[n - 1 - i]) {
			fprintf(stderr, "heapuse: calloc's block not clear\n");
			exit(1);
		}
}

__attribute__((noinline)) static void heap_work(struct heap_worker *w)
{
	unsigned int k = 0;

	while (w->alloced < w->target) {
		/* 64 .. 96 KiB, a multiple of 16 (calloc's n / 16 * 16) */
		size_t n = 64 + (heap_rnd(&w->seed) % 6140) * 16;
		void *p = heap_one(k++, n);

		if (!p) {
			perror("heapuse: allocation");
			exit(1);
		}
		heap_check(k - 1, p, n);
		memset(p, 1, 64);
		w->alloced += n;
		if (heap_rnd(&w->seed) % 5 < w->keep_of5) {
			w->kept[w->nkept++] = p;
			w->inuse += n;
		} else if (k % 3 == 0) {
			/* realloc to 0 frees it (glibc) */
			p = realloc(p, 0);
			free(p);
		} else if (k % 3 == 1) {
			/* grown, its bytes kept, then freed */
			p = realloc(p, n + 4096);
			if (!p || heap_ones(p, 64)) {
				fprintf(stderr, "heapuse: realloc lost bytes\n");
				exit(1);
			}
			w->alloced += n + 4096;
			free(p);
		} else {
			free(p);
		}
	}
}

__attribute__((noinline)) static void alloc_alpha(struct heap_worker *w)
{
	heap_work(w);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void alloc_beta(struct heap_worker *w)
{
	heap_work(w);
	__asm__ volatile("" ::: "memory");
}

static void *heap_thread(void *arg)
{
	struct heap_worker *w = arg;
	struct plabel_kv kv = { "endpoint", w->name };

	/* the list of kept blocks: not under the label, not in the counts */
	w->kept = malloc(sizeof(void *) * (w->target / 64 + 1));
	if (!w->kept)
		exit(1);
	if (plabel_set(&kv, 1))
		fprintf(stderr, "heapuse: plabel_set failed\n");
	if (w->name[0] == 'a')
		alloc_alpha(w);
	else
		alloc_beta(w);
	return NULL;
}

/* Sizes the compiler cannot see, for the failing calls. */
static volatile size_t heap_huge = SIZE_MAX / 2, heap_many = SIZE_MAX / 8;

/* The odd cases: none of them may crash or count. */
static void heap_edges(void)
{
	size_t huge = heap_huge;
	void *p;

	free(NULL);
	errno = 0;
	p = calloc(heap_many, 16);
	if (p || errno != ENOMEM)
		fprintf(stderr, "heapuse: calloc overflow not refused\n");
	p = malloc(huge);
	if (p)
		fprintf(stderr, "heapuse: huge malloc succeeded\n");
	p = malloc(100);
	p = realloc(p, 200000);
	p = realloc(p, 50);
	free(p);
	if (posix_memalign(&p, 3, 64) != EINVAL)
		fprintf(stderr, "heapuse: posix_memalign(3) accepted\n");
}

__attribute__((noinline)) static void alloc_child(void **inherited, size_t n)
{
	struct plabel_kv kv = { "endpoint", "child" };
	uint64_t x = 99;
	size_t i;

	plabel_set(&kv, 1);
	for (i = 0; i < 400; i++) {
		void *p = malloc(16384 + heap_rnd(&x) % 16384);

		if (!p)
			_exit(1);
		if (i % 2)
			free(p);
	}
	/* blocks the parent allocated: not the child's to report */
	for (i = 0; i < n; i += 2)
		free(inherited[i]);
}

int main(int argc, char **argv)
{
	uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 96;
	struct heap_worker w[2] = {
		{ .name = "alpha", .target = mib << 20, .keep_of5 = 2,
		  .seed = 88172645463325252ULL },
		{ .name = "beta", .target = (mib << 20) / 3, .keep_of5 = 3,
		  .seed = 1181783497276652981ULL },
	};
	const char *hold;
	pthread_t t[2];
	int i, st;
	pid_t pid;

	heap_edges();
	/* 4 MiB kept under the labels the process started with */
	for (i = 0; i < 64; i++)
		if (!heap_one(i, 65536))
			return 1;
	for (i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, heap_thread, &w[i]))
			return 1;
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pid = fork();
	if (pid == 0) {
		alloc_child(w[0].kept, w[0].nkept);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st))
		fprintf(stderr, "heapuse: the child failed\n");
	printf("heap alloc alpha=%llu beta=%llu inuse alpha=%llu beta=%llu\n",
	       (unsigned long long)w[0].alloced,
	       (unsigned long long)w[1].alloced,
	       (unsigned long long)w[0].inuse,
	       (unsigned long long)w[1].inuse);
	fflush(stdout);
	hold = getenv("HEAPUSE_HOLD");
	for (i = 0; hold && i < 1200 && access(hold, F_OK); i++)
		usleep(50000);
	return 0;
}
