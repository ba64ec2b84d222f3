// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libplabel-heap.so: sampled heap profiling for programs started with
 * `plabel record --heap` or `plabel run --heap`, which preload it. It
 * defines the C library's malloc family and forwards each call to glibc's
 * own allocator (its __libc_ entry points, so no symbol lookup can recurse
 * into malloc); see Documentation/heap.rst.
 *
 * Cost: with no heap session running, one load of the interval from the
 * heap page /dev/plabel maps (0: off) per allocation, and per free one
 * test of the block's address. While a session runs, each thread counts
 * the bytes it allocates down from an interval drawn at random
 * (heap_core.c); the allocation that would cross zero is sampled: it is
 * made at a multiple of 4096 bytes and of at least 1040 (so that, freed,
 * it does not come back as a small block at once from glibc's per-thread
 * cache), its address goes into the table and the kernel gets one
 * HEAP_ALLOC ioctl, which stamps it with the time, the thread's labels
 * and its stack. A free passes on to the table only a block at such an
 * address (or 16 bytes past one, where glibc puts the large blocks it
 * maps, which calloc samples as they come); freeing or reallocating a
 * block found there is one HEAP_FREE ioctl, made before the block goes
 * back to the allocator (so no later allocation at that address can be
 * stamped before it).
 *
 * Nothing here takes a lock or allocates: the table is one anonymous
 * mapping made at the first sample, the per-thread state is initial-exec
 * TLS. A fork child drops the inherited table (the child's blocks from
 * before the fork were sampled as its parent's), in an atfork handler
 * that only unmaps. Allocations before the constructor ran (the dynamic
 * loader's, other constructors') and while the device is missing are not
 * sampled.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "plabel_uapi.h"
#include "heap_core.h"

#define PLABEL_EXPORT	__attribute__((visibility("default")))
#define plabel_unlikely(x)	__builtin_expect(!!(x), 0)

/* glibc's allocator itself. */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);
extern void *__libc_valloc(size_t n);
extern void *__libc_pvalloc(size_t n);

/* Until the heap page is mapped: a page that says off. */
static const struct plabel_heap_page plabel_heap_off;
static const volatile struct plabel_heap_page *plabel_heap_pg = &plabel_heap_off;
static int plabel_heap_fd = -1;
static size_t (*plabel_heap_usable_fn)(void *);
static struct plabel_heap_tab *plabel_heap_table;
/* samples left out: the table had no room for them */
static unsigned long plabel_heap_table_full;

struct plabel_heap_thread {
	uint64_t left;		/* bytes until the next sample */
	uint64_t rnd;		/* 0 until the thread's first interval */
	int busy;		/* inside the sampling path */
};

static __thread struct plabel_heap_thread plabel_heap_self
	__attribute__((tls_model("initial-exec")));

static uint64_t plabel_heap_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static struct plabel_heap_tab *plabel_heap_tab_get(void)
{
	struct plabel_heap_tab *t, *none = NULL;

	t = __atomic_load_n(&plabel_heap_table, __ATOMIC_ACQUIRE);
	if (t)
		return t;
	t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (t == MAP_FAILED)
		return NULL;
	if (!__atomic_compare_exchange_n(&plabel_heap_table, &none, t, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		munmap(t, sizeof(*t));
		return none;
	}
	return t;
}

static void plabel_heap_report(void *p, size_t requested, uint64_t weight)
{
	struct plabel_heap_args a = {
		.size = sizeof(a),
		.addr = (uintptr_t)p,
		.requested = requested,
		.usable = plabel_heap_usable_fn ? plabel_heap_usable_fn(p) :
						   requested,
		.weight = weight,
	};
	int saved = errno;
	struct plabel_heap_tab *t = plabel_heap_tab_get();

	if (a.usable < a.requested)
		a.usable = a.requested;
	if (!a.usable)
		a.usable = 1;
	if (!t || plabel_heap_tab_insert(t, (uintptr_t)p)) {
		__atomic_fetch_add(&plabel_heap_table_full, 1,
				   __ATOMIC_RELAXED);
		errno = saved;
		return;
	}
	/* no session took it: no FREE will be wanted */
	if (ioctl(plabel_heap_fd, PLABEL_IOC_HEAP_ALLOC, &a) <= 0)
		plabel_heap_tab_remove(t, (uintptr_t)p);
	errno = saved;
}

/*
 * Whether p may be a sampled block: sampled blocks start at a multiple of
 * PLABEL_HEAP_SAMPLED_ALIGN (or 16 bytes past one: the large blocks glibc
 * maps one by one, which calloc samples where they are), so every other
 * free is one test of the address. NULL passes too. A sampled block takes
 * at least PLABEL_HEAP_SAMPLED_MIN bytes, more than glibc's per-thread
 * cache keeps: freed, it is not the next small block of its size, whose
 * every free would pass the test (the cost that stays: heap.rst).
 */
#define PLABEL_HEAP_SAMPLED_ALIGN	4096
#define PLABEL_HEAP_SAMPLED_MIN		1040
#define PLABEL_HEAP_SAMPLED_MASK	((uintptr_t)(PLABEL_HEAP_SAMPLED_ALIGN - 1) & ~(uintptr_t)16)

static inline int plabel_heap_maybe_sampled(const void *p)
{
	return !((uintptr_t)p & PLABEL_HEAP_SAMPLED_MASK);
}

/* Sampling is on: the heap page says an interval. */
static inline int plabel_heap_on(void)
{
	return __builtin_expect(plabel_heap_pg->interval != 0, 0);
}

/*
 * Count an allocation of n bytes down before it is made: 1 when that does
 * not end the thread's interval (n at most the bytes left; a thread with
 * none drawn yet has 0), else 0, the count gone below zero, which due()
 * puts right. One subtraction from the thread's count in memory and a
 * branch on its borrow. As with tcmalloc's sampler, an allocation that
 * then fails has counted too: the next sample comes that much sooner.
 */
static inline int plabel_heap_count(size_t n)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	_Bool borrow;

	__asm__("subq %2, %0" : "+m"(plabel_heap_self.left), "=@ccc"(borrow)
		: "r"((uint64_t)n));
	return !borrow;
#else
	return !__builtin_sub_overflow(plabel_heap_self.left, (uint64_t)n,
				       &plabel_heap_self.left);
#endif
}

/*
 * The allocation of n bytes ended the thread's interval (count() said 0):
 * the interval to report it with when it is to be sampled, a new count
 * drawn; else 0 (sampling just stopped, the thread's first count, or a
 * call from inside the sampling path), and but for the first count the
 * n bytes given back, as though never counted.
 */
static __attribute__((noinline)) uint64_t plabel_heap_due(size_t n)
{
	struct plabel_heap_thread *self = &plabel_heap_self;
	uint64_t mean = plabel_heap_pg->interval;

	if (self->busy || !mean) {
		self->left += n;
		return 0;
	}
	if (!self->rnd) {
		/* the thread's first interval, not a sample */
		self->rnd = plabel_heap_seed(plabel_heap_now() ^
					     ((uint64_t)syscall(SYS_gettid) << 32));
		self->left = plabel_heap_interval(&self->rnd, mean);
		return 0;
	}
	self->left = plabel_heap_interval(&self->rnd, mean);
	return mean;
}

/* Whether an allocation of n bytes is to be sampled: its interval, or 0. */
static inline uint64_t plabel_heap_sampling(size_t n)
{
	if (!plabel_heap_on() || plabel_heap_count(n))
		return 0;
	return plabel_heap_due(n);
}

/*
 * A sampled block of n bytes at a multiple of align (a power of two) and
 * of PLABEL_HEAP_SAMPLED_ALIGN, reported; NULL when glibc has none, and
 * errno as it was (the caller falls back to the allocation asked for).
 */
static void *plabel_heap_take(size_t align, size_t n, uint64_t weight)
{
	int saved = errno;
	void *p;

	if (align < PLABEL_HEAP_SAMPLED_ALIGN)
		align = PLABEL_HEAP_SAMPLED_ALIGN;
	p = __libc_memalign(align, n < PLABEL_HEAP_SAMPLED_MIN ?
				   PLABEL_HEAP_SAMPLED_MIN : n);
	errno = saved;
	if (p) {
		plabel_heap_self.busy = 1;
		plabel_heap_report(p, n, weight);
		plabel_heap_self.busy = 0;
	}
	return p;
}

/*
 * The entry points: with sampling off, one load and a jump to glibc's
 * function (a tail call, no frame of their own); with it on, malloc
 * counts its bytes down inline, and free of a block not sampled is one
 * test of its address. The rest is out of line.
 */
static __attribute__((noinline)) void *plabel_heap_malloc(size_t n)
{
	uint64_t w = plabel_heap_due(n);
	void *p;

	if (w && (p = plabel_heap_take(1, n, w)))
		return p;
	return __libc_malloc(n);
}

PLABEL_EXPORT void *malloc(size_t n)
{
	if (!plabel_heap_on() || plabel_heap_count(n))
		return __libc_malloc(n);
	return plabel_heap_malloc(n);
}

/* p is going back to the allocator: its FREE first, if it was sampled. */
static __attribute__((noinline)) int plabel_heap_freeing(void *p)
{
	struct plabel_heap_tab *t;
	struct plabel_heap_args a = { .size = sizeof(a) };
	int saved;

	if (!p || !plabel_heap_maybe_sampled(p))
		return 0;
	t = __atomic_load_n(&plabel_heap_table, __ATOMIC_ACQUIRE);
	if (!t || !plabel_heap_tab_maybe(t, (uintptr_t)p) ||
	    !plabel_heap_tab_remove(t, (uintptr_t)p))
		return 0;
	saved = errno;
	a.addr = (uintptr_t)p;
	ioctl(plabel_heap_fd, PLABEL_IOC_HEAP_FREE, &a);
	errno = saved;
	return 1;
}

static __attribute__((noinline)) void plabel_heap_free(void *p)
{
	plabel_heap_freeing(p);
	__libc_free(p);
}

PLABEL_EXPORT void free(void *p)
{
	struct plabel_heap_tab *t;

	if (__builtin_expect(!plabel_heap_maybe_sampled(p), 1))
		return __libc_free(p);
	t = __atomic_load_n(&plabel_heap_table, __ATOMIC_ACQUIRE);
	if (!t || !plabel_heap_tab_maybe(t, (uintptr_t)p))
		return __libc_free(p);
	plabel_heap_free(p);
}

/*
 * Small sampled blocks are aligned ones, cleared here; glibc maps large
 * ones (cleared, untouched) at an address free's test lets through, and
 * a large one it carved from its heap instead is moved to an aligned one.
 */
#define PLABEL_HEAP_CALLOC_MAPPED	(128 * 1024)

static __attribute__((noinline)) void *plabel_heap_calloc(size_t n,
							  size_t size,
							  size_t bytes)
{
	uint64_t w = plabel_heap_due(bytes);
	void *p, *q;

	if (!w)
		return __libc_calloc(n, size);
	if (bytes < PLABEL_HEAP_CALLOC_MAPPED) {
		p = plabel_heap_take(1, bytes, w);
		if (p)
			return memset(p, 0, bytes);
		return __libc_calloc(n, size);
	}
	p = __libc_calloc(n, size);
	if (!p)
		return NULL;
	if (!plabel_heap_maybe_sampled(p)) {
		q = plabel_heap_take(1, bytes, w);
		if (!q)
			return p;	/* not sampled */
		memset(q, 0, bytes);
		__libc_free(p);
		return q;
	}
	plabel_heap_self.busy = 1;
	plabel_heap_report(p, bytes, w);
	plabel_heap_self.busy = 0;
	return p;
}

PLABEL_EXPORT void *calloc(size_t n, size_t size)
{
	size_t bytes;

	/* an overflow: glibc's calloc refuses it */
	if (!plabel_heap_on() || __builtin_mul_overflow(n, size, &bytes) ||
	    plabel_heap_count(bytes))
		return __libc_calloc(n, size);
	return plabel_heap_calloc(n, size, bytes);
}

/*
 * A reallocation to be sampled goes to a new aligned block; the old one
 * (its FREE first, if sampled) is copied and freed only once that block
 * exists, so a failure leaves everything as it was. Otherwise glibc
 * reallocates, after the FREE of a sampled old block; should that fail,
 * the old block is still there and is reported again (as a new sample
 * from here), so its free is not lost.
 */
static __attribute__((noinline)) void *plabel_heap_realloc(void *old,
							   size_t n, int due)
{
	uint64_t w = due ? plabel_heap_due(n) : 0;
	int was;
	void *p;

	if (w && (p = plabel_heap_take(1, n, w))) {
		if (old) {
			size_t kept = plabel_heap_usable_fn ?
				      plabel_heap_usable_fn(old) : n;

			memcpy(p, old, kept < n ? kept : n);
			plabel_heap_free(old);
		}
		return p;
	}
	if (!old)
		return __libc_malloc(n);
	was = plabel_heap_freeing(old);
	p = __libc_realloc(old, n);
	if (!p && was && n && plabel_heap_pg->interval) {
		int saved = errno;
		size_t kept = plabel_heap_usable_fn ?
			      plabel_heap_usable_fn(old) : n;

		plabel_heap_self.busy = 1;
		plabel_heap_report(old, kept, plabel_heap_pg->interval);
		plabel_heap_self.busy = 0;
		errno = saved;
	}
	return p;
}

/* n == 0 never ends an interval: realloc(p, 0) frees p as glibc's does */
PLABEL_EXPORT void *realloc(void *old, size_t n)
{
	if (plabel_heap_on() && !plabel_heap_count(n))
		return plabel_heap_realloc(old, n, 1);
	if (__builtin_expect(!plabel_heap_maybe_sampled(old), 1))
		return __libc_realloc(old, n);
	return plabel_heap_realloc(old, n, 0);
}

PLABEL_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
	size_t bytes;

	if (__builtin_mul_overflow(n, size, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(old, bytes);
}

/* align: a power of two (or glibc's memalign rounds it up to one). */
static void *plabel_heap_aligned(size_t align, size_t n)
{
	uint64_t w = plabel_heap_sampling(n);
	void *p;

	if (w && (p = plabel_heap_take(align, n, w)))
		return p;
	return __libc_memalign(align, n);
}

PLABEL_EXPORT void *memalign(size_t align, size_t n)
{
	if (align & (align - 1)) {
		/* glibc's rule: the next power of two */
		size_t a = 1;

		while (a < align && a < ((size_t)1 << (sizeof(size_t) * 8 - 1)))
			a <<= 1;
		if (a < align)
			return __libc_memalign(align, n);
		align = a;
	}
	return plabel_heap_aligned(align, n);
}

PLABEL_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	/* C11 and glibc 2.38 on: a power of two, else EINVAL */
	if (!align || (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	return plabel_heap_aligned(align, n);
}

PLABEL_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	int saved = errno;
	void *p;

	if (align % sizeof(void *) || !align || (align & (align - 1)))
		return EINVAL;
	p = plabel_heap_aligned(align, n);
	if (!p) {
		errno = saved;
		return ENOMEM;
	}
	*out = p;
	errno = saved;
	return 0;
}

/* valloc's and pvalloc's blocks are page-aligned: sampled as they come. */
static void *plabel_heap_paged(void *p, size_t n, uint64_t w)
{
	if (p && w && plabel_heap_maybe_sampled(p)) {
		plabel_heap_self.busy = 1;
		plabel_heap_report(p, n, w);
		plabel_heap_self.busy = 0;
	}
	return p;
}

PLABEL_EXPORT void *valloc(size_t n)
{
	uint64_t w = plabel_heap_sampling(n);

	return plabel_heap_paged(__libc_valloc(n), n, w);
}

PLABEL_EXPORT void *pvalloc(size_t n)
{
	uint64_t w = plabel_heap_sampling(n);

	return plabel_heap_paged(__libc_pvalloc(n), n, w);
}

PLABEL_EXPORT size_t malloc_usable_size(void *p)
{
	return p && plabel_heap_usable_fn ? plabel_heap_usable_fn(p) : 0;
}

/*
 * In a fork child, single-threaded: the parent's table goes (the child
 * reports only what it samples itself). Unmapping takes no lock.
 */
static void plabel_heap_atfork_child(void)
{
	struct plabel_heap_tab *t = plabel_heap_table;

	plabel_heap_table = NULL;
	if (t)
		munmap(t, sizeof(*t));
}

__attribute__((constructor(101))) static void plabel_heap_init(void)
{
	void *pg;
	int fd;

	/* may allocate (dlerror state): that goes to glibc unsampled */
	plabel_heap_usable_fn = (size_t (*)(void *))dlsym(RTLD_NEXT,
							  "malloc_usable_size");
	pthread_atfork(NULL, NULL, plabel_heap_atfork_child);
	fd = open(PLABEL_DEVICE, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	pg = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED,
		  fd, PLABEL_HEAP_PAGE_OFFSET);
	if (pg == MAP_FAILED) {
		close(fd);
		return;
	}
	plabel_heap_fd = fd;
	__atomic_store_n(&plabel_heap_pg, pg, __ATOMIC_RELEASE);
}
