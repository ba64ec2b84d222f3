// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libplabel-heap.so: sampled heap profiling for programs started with
 * `plabel record --heap` or `plabel run --heap`, which preload it. It
 * defines the C library's malloc family and forwards each call to glibc's
 * own allocator (its __libc_ entry points, so no symbol lookup can recurse
 * into malloc); see Documentation/heap.rst.
 *
 * Cost: with no heap session running, one load of the interval from the
 * heap page /dev/plabel maps (0: off) per allocation, and per free a test
 * that no block was ever sampled, else a failed table lookup. While a
 * session runs, each thread counts the bytes it allocates down from an
 * interval drawn at random (heap_core.c); the allocation that crosses
 * zero is sampled: its address goes into the table and the kernel gets
 * one HEAP_ALLOC ioctl, which stamps it with the time, the thread's labels
 * and its stack. Freeing or reallocating a block found in the table is
 * one HEAP_FREE ioctl, made before the block goes back to the allocator
 * (so no later allocation at that address can be stamped before it).
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
	int64_t left;		/* bytes until the next sample */
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

/* The allocation p of n bytes crossed the thread's interval. */
static __attribute__((noinline)) void
plabel_heap_sample(struct plabel_heap_thread *self, void *p, size_t n)
{
	uint64_t mean = plabel_heap_pg->interval;

	if (self->busy || !mean)
		return;
	self->busy = 1;
	if (!self->rnd) {
		/* the thread's first interval, not a sample */
		self->rnd = plabel_heap_seed(plabel_heap_now() ^
					     ((uint64_t)syscall(SYS_gettid) << 32));
		self->left = (int64_t)plabel_heap_interval(&self->rnd, mean);
		self->busy = 0;
		return;
	}
	self->left = (int64_t)plabel_heap_interval(&self->rnd, mean);
	plabel_heap_report(p, n, mean);
	self->busy = 0;
}

/* Sampling is on: the heap page says an interval. */
static inline int plabel_heap_on(void)
{
	return __builtin_expect(plabel_heap_pg->interval != 0, 0);
}

/* While sampling: count n bytes of p down, sample p when they run out. */
static inline void plabel_heap_alloced(void *p, size_t n)
{
	struct plabel_heap_thread *self;

	if (!p)
		return;
	self = &plabel_heap_self;
	/* sizes above INT64_MAX never come back non-NULL */
	self->left -= (int64_t)n;
	if (self->left < 0)
		plabel_heap_sample(self, p, n);
}

/* p is going back to the allocator: its FREE first, if it was sampled. */
static __attribute__((noinline)) int plabel_heap_freeing(void *p)
{
	struct plabel_heap_tab *t;
	struct plabel_heap_args a = { .size = sizeof(a) };
	int saved;

	t = __atomic_load_n(&plabel_heap_table, __ATOMIC_ACQUIRE);
	if (!t || !p || !plabel_heap_tab_remove(t, (uintptr_t)p))
		return 0;
	saved = errno;
	a.addr = (uintptr_t)p;
	ioctl(plabel_heap_fd, PLABEL_IOC_HEAP_FREE, &a);
	errno = saved;
	return 1;
}

/* No block was ever sampled (or a fork child dropped them). */
static inline int plabel_heap_none(void)
{
	return __builtin_expect(!__atomic_load_n(&plabel_heap_table,
						 __ATOMIC_RELAXED), 1);
}

/*
 * Count an allocation of n bytes down before it is made, when that does
 * not end the thread's interval (as plabel_heap_alloced() counts: n at
 * most the bytes left; a thread with none yet has 0). 1 then, else 0 and
 * nothing counted. As with tcmalloc's sampler, an allocation that then
 * fails has counted too: the next sample comes that much sooner.
 */
static inline int plabel_heap_count(size_t n)
{
	int64_t left = plabel_heap_self.left;

	if (__builtin_expect(left < 0 || (uint64_t)left < n, 0))
		return 0;
	plabel_heap_self.left = left - (int64_t)n;
	return 1;
}

/*
 * The entry points: with sampling off, one load and a jump to glibc's
 * function (a tail call, no frame of their own); with it on, malloc and
 * free take the common case (no sample due, a block never sampled)
 * inline, the rest out of line.
 */
static __attribute__((noinline)) void *plabel_heap_malloc(size_t n)
{
	void *p = __libc_malloc(n);

	plabel_heap_alloced(p, n);
	return p;
}

PLABEL_EXPORT void *malloc(size_t n)
{
	if (!plabel_heap_on() || plabel_heap_count(n))
		return __libc_malloc(n);
	return plabel_heap_malloc(n);
}

static __attribute__((noinline)) void plabel_heap_free(void *p)
{
	plabel_heap_freeing(p);
	__libc_free(p);
}

PLABEL_EXPORT void free(void *p)
{
	struct plabel_heap_tab *t;

	t = __atomic_load_n(&plabel_heap_table, __ATOMIC_ACQUIRE);
	if (__builtin_expect(!t || !plabel_heap_tab_maybe(t, (uintptr_t)p), 1))
		return __libc_free(p);
	plabel_heap_free(p);
}

static __attribute__((noinline)) void *plabel_heap_calloc(size_t n,
							  size_t size)
{
	void *p = __libc_calloc(n, size);	/* checks n * size itself */
	size_t bytes;

	if (p && !__builtin_mul_overflow(n, size, &bytes))
		plabel_heap_alloced(p, bytes);
	return p;
}

PLABEL_EXPORT void *calloc(size_t n, size_t size)
{
	if (!plabel_heap_on())
		return __libc_calloc(n, size);
	return plabel_heap_calloc(n, size);
}

/*
 * A sampled block's FREE goes first; should the reallocation fail, the
 * old block is still there and is reported again (as a new sample from
 * here), so its free is not lost.
 */
static __attribute__((noinline)) void *plabel_heap_realloc(void *old,
							   size_t n)
{
	int was;
	void *p;

	if (!old)
		return plabel_heap_malloc(n);
	was = plabel_heap_freeing(old);
	p = __libc_realloc(old, n);
	if (p) {
		if (plabel_heap_on())
			plabel_heap_alloced(p, n);
	} else if (was && n && plabel_heap_pg->interval) {
		int saved = errno;
		size_t kept = plabel_heap_usable_fn ?
			      plabel_heap_usable_fn(old) : n;

		plabel_heap_report(old, kept, plabel_heap_pg->interval);
		errno = saved;
	}
	return p;
}

PLABEL_EXPORT void *realloc(void *old, size_t n)
{
	if (!plabel_heap_on() && plabel_heap_none())
		return __libc_realloc(old, n);
	return plabel_heap_realloc(old, n);
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

PLABEL_EXPORT void *memalign(size_t align, size_t n)
{
	void *p = __libc_memalign(align, n);

	if (plabel_heap_on())
		plabel_heap_alloced(p, n);
	return p;
}

PLABEL_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	void *p;

	/* C11 and glibc 2.38 on: a power of two, else EINVAL */
	if (!align || (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	p = __libc_memalign(align, n);
	if (plabel_heap_on())
		plabel_heap_alloced(p, n);
	return p;
}

PLABEL_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	int saved = errno;
	void *p;

	if (align % sizeof(void *) || !align || (align & (align - 1)))
		return EINVAL;
	p = __libc_memalign(align, n);
	if (!p) {
		errno = saved;
		return ENOMEM;
	}
	if (plabel_heap_on())
		plabel_heap_alloced(p, n);
	*out = p;
	errno = saved;
	return 0;
}

PLABEL_EXPORT void *valloc(size_t n)
{
	void *p = __libc_valloc(n);

	if (plabel_heap_on())
		plabel_heap_alloced(p, n);
	return p;
}

PLABEL_EXPORT void *pvalloc(size_t n)
{
	void *p = __libc_pvalloc(n);

	if (plabel_heap_on())
		plabel_heap_alloced(p, n);
	return p;
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
