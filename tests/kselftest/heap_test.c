// SPDX-License-Identifier: GPL-2.0
/*
 * The module's side of heap profiling: the heap page (who may map it and
 * how, what it says with and without heap sessions), HEAP_ALLOC and
 * HEAP_FREE with hostile arguments, the calls as cheap no-ops without a
 * session, the ALLOC and FREE records a session gets (labels, stack,
 * fields), and that a FREE is never lost silently when the ring fills.
 */
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "session_util.h"

#include "kselftest/kselftest_harness.h"

#define NEED_DEV() do {							\
	if (!su_have_dev())						\
		SKIP(return, SU_DEV " absent: module not loaded");	\
} while (0)

#define NEED_ROOT() do {						\
	NEED_DEV();							\
	if (geteuid())							\
		SKIP(return, "needs root for CAP_PERFMON");		\
} while (0)

static int heap_call(int fd, unsigned long cmd, uint64_t addr, uint64_t req,
		     uint64_t usable, uint64_t weight, uint32_t flags)
{
	struct plabel_heap_args a = {
		.size = sizeof(a),
		.flags = flags,
		.addr = addr,
		.requested = req,
		.usable = usable,
		.weight = weight,
	};
	int ret = ioctl(fd, cmd, &a);

	return ret < 0 ? -errno : ret;
}

static int heap_start(int fd, uint32_t target, uint32_t callchain,
		      uint64_t bytes)
{
	struct plabel_session_start_args a;
	int32_t pid = getpid();

	su_args_init(&a);
	a.target = target;
	a.callchain = callchain;
	a.record = PLABEL_RECORD_HEAP;
	a.heap_bytes = bytes;
	if (target != PLABEL_TARGET_ALL) {
		a.pids = (uintptr_t)&pid;
		a.npids = 1;
	}
	return su_start(fd, &a);
}

static volatile const struct plabel_heap_page *heap_map(int fd)
{
	void *p = mmap(NULL, getpagesize(), PROT_READ, MAP_SHARED, fd,
		       PLABEL_HEAP_PAGE_OFFSET);

	return p == MAP_FAILED ? NULL : p;
}

/* Anyone may map the page read-only; nothing else maps. */
TEST(page_mapping_rules)
{
	long pg = getpagesize();
	unsigned char *p;
	int fd, i, nonzero = 0;

	NEED_DEV();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	p = mmap(NULL, pg, PROT_READ, MAP_PRIVATE, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	/* only the interval word may be set */
	for (i = sizeof(struct plabel_heap_page); i < pg; i++)
		nonzero += p[i] != 0;
	EXPECT_EQ(0, nonzero);
	EXPECT_EQ(-1, mprotect(p, pg, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	EXPECT_EQ(-1, mprotect(p, pg, PROT_READ | PROT_EXEC));
	EXPECT_EQ(EACCES, errno);
	munmap(p, pg);
	EXPECT_EQ(MAP_FAILED, mmap(NULL, pg, PROT_READ | PROT_WRITE,
				   MAP_SHARED, fd, 0));
	EXPECT_EQ(MAP_FAILED, mmap(NULL, pg, PROT_READ | PROT_EXEC,
				   MAP_PRIVATE, fd, 0));
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 2 * pg, PROT_READ, MAP_SHARED, fd, 0));
	EXPECT_EQ(MAP_FAILED, mmap(NULL, pg, PROT_READ, MAP_SHARED, fd, pg));
	EXPECT_EQ(MAP_FAILED, mmap(NULL, pg, PROT_READ, MAP_SHARED, fd,
				   1L << 40));
	/* a mapping does not grow */
	p = mmap(NULL, pg, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(MAP_FAILED, mremap(p, pg, 2 * pg, MREMAP_MAYMOVE));
	munmap(p, pg);
	close(fd);
}

/* Hostile arguments are refused; without a session the calls do nothing. */
TEST(ioctl_arguments)
{
	int fd;

	NEED_DEV();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, heap_call(fd, PLABEL_IOC_HEAP_ALLOC, 0x10000, 64, 64,
			       4096, 0));
	EXPECT_EQ(0, heap_call(fd, PLABEL_IOC_HEAP_FREE, 0x10000, 0, 0, 0, 0));
	EXPECT_EQ(-EINVAL, heap_call(fd, PLABEL_IOC_HEAP_ALLOC, 0x10000, 64,
				     64, 4096, 1));
	EXPECT_EQ(-EINVAL, heap_call(fd, PLABEL_IOC_HEAP_ALLOC, 0, 64, 64,
				     4096, 0));
	EXPECT_EQ(-EINVAL, heap_call(fd, PLABEL_IOC_HEAP_ALLOC,
				     0xffff888000000000ULL, 64, 64, 4096, 0));
	EXPECT_EQ(-EINVAL, heap_call(fd, PLABEL_IOC_HEAP_ALLOC, ~0ULL, 64, 64,
				     4096, 0));
	EXPECT_EQ(-EINVAL, heap_call(fd, PLABEL_IOC_HEAP_ALLOC, 0x10000, 65,
				     64, 4096, 0));
	EXPECT_EQ(-EINVAL, heap_call(fd, PLABEL_IOC_HEAP_ALLOC, 0x10000, 0, 0,
				     4096, 0));
	EXPECT_EQ(-EINVAL, heap_call(fd, PLABEL_IOC_HEAP_ALLOC, 0x10000, 64,
				     64, 0, 0));
	EXPECT_EQ(-EINVAL, heap_call(fd, PLABEL_IOC_HEAP_ALLOC, 0x10000, 64,
				     64, PLABEL_HEAP_BYTES_MAX + 1, 0));
	EXPECT_EQ(-EINVAL, heap_call(fd, PLABEL_IOC_HEAP_FREE, 0x10000, 1, 0,
				     0, 0));
	EXPECT_EQ(-EINVAL, heap_call(fd, PLABEL_IOC_HEAP_FREE, 0x10000, 0, 0,
				     1, 0));
	EXPECT_EQ(-EINVAL, heap_call(fd, PLABEL_IOC_HEAP_FREE, 0, 0, 0, 0, 0));
	EXPECT_EQ(-EINVAL, heap_call(fd, PLABEL_IOC_HEAP_FREE, 0x10000, 0, 0,
				     0, 2));
	/* sizes: too short, too long, nonzero tail */
	{
		struct { struct plabel_heap_args a; uint64_t tail; } big = {
			.a = { .size = sizeof(big), .addr = 0x10000,
			       .requested = 1, .usable = 1, .weight = 1 },
			.tail = 1,
		};
		struct plabel_heap_args small = { .size = 8, .addr = 0x10000 };

		EXPECT_EQ(-1, ioctl(fd, PLABEL_IOC_HEAP_ALLOC, &big));
		EXPECT_EQ(E2BIG, errno);
		big.tail = 0;
		EXPECT_EQ(0, ioctl(fd, PLABEL_IOC_HEAP_ALLOC, &big));
		EXPECT_EQ(-1, ioctl(fd, PLABEL_IOC_HEAP_ALLOC, &small));
		EXPECT_EQ(EINVAL, errno);
		EXPECT_EQ(-1, ioctl(fd, PLABEL_IOC_HEAP_ALLOC, (void *)8));
		EXPECT_EQ(EFAULT, errno);
	}
	close(fd);
}

/* Without a heap session, an ALLOC costs about a system call. */
TEST(no_session_cheap)
{
	uint64_t t0, t1;
	int fd, i, n = 100000;

	NEED_DEV();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	t0 = su_now_ns();
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, heap_call(fd, PLABEL_IOC_HEAP_ALLOC, 0x10000 + i,
				       64, 64, 4096, 0));
	t1 = su_now_ns();
	TH_LOG("%.0f ns per HEAP_ALLOC without a heap session",
	       (double)(t1 - t0) / n);
	/* generous for an emulated CPU: no stack walk, no record */
	EXPECT_LT((t1 - t0) / n, 50000ULL);
	close(fd);
}

/*
 * The page says the smallest interval of the running heap sessions, and
 * 0 when none runs; session settings are checked.
 */
TEST(page_follows_sessions)
{
	volatile const struct plabel_heap_page *pg;
	struct plabel_session_start_args a;
	int fd0, fd1, fd2;

	NEED_ROOT();
	fd0 = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	fd1 = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	fd2 = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	pg = heap_map(fd0);
	ASSERT_NE(NULL, pg);
	ASSERT_EQ(0ULL, pg->interval) TH_LOG("another heap session runs");

	/* heap_bytes without the flag, or over the limit */
	su_args_init(&a);
	a.record = PLABEL_RECORD_CPU;
	a.heap_bytes = 4096;
	EXPECT_EQ(-EINVAL, su_start(fd1, &a));
	su_args_init(&a);
	a.record = PLABEL_RECORD_HEAP;
	a.heap_bytes = PLABEL_HEAP_BYTES_MAX + 1;
	EXPECT_EQ(-EINVAL, su_start(fd1, &a));

	ASSERT_EQ(0, heap_start(fd1, PLABEL_TARGET_ALL, PLABEL_CALLCHAIN_FP,
				0));
	EXPECT_EQ((uint64_t)PLABEL_HEAP_BYTES_DEFAULT, pg->interval);
	ASSERT_EQ(0, heap_start(fd2, PLABEL_TARGET_ALL, PLABEL_CALLCHAIN_FP,
				4096));
	EXPECT_EQ(4096ULL, pg->interval);
	ASSERT_EQ(0, su_stop(fd2));
	EXPECT_EQ((uint64_t)PLABEL_HEAP_BYTES_DEFAULT, pg->interval);
	ASSERT_EQ(0, su_stop(fd1));
	EXPECT_EQ(0ULL, pg->interval);
	close(fd1);
	close(fd2);
	/* the page outlives the file it was mapped through */
	close(fd0);
	EXPECT_EQ(0ULL, pg->interval);
}

__attribute__((noinline)) static int heap_alloc_here(int fd, uint64_t addr)
{
	int ret = heap_call(fd, PLABEL_IOC_HEAP_ALLOC, addr, 100, 112, 4096,
			    0);

	__asm__ volatile("" ::: "memory");
	return ret;
}

/*
 * ALLOC and FREE records: fields, labels, a stack with the caller, in fp
 * and dwarf mode; a process the session does not follow writes nothing.
 */
static __attribute__((noinline)) void
alloc_records(struct __test_metadata *_metadata, uint32_t mode)
{
	struct su_stream st = { 0 };
	struct su_reader rd;
	struct plabel_rec_header *h;
	int fd, allocs = 0, frees = 0, good = 0, caller = 0, status;
	uint64_t id, me = getpid();
	size_t off;
	pid_t pid;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	id = su_set_new(fd, "endpoint", "heap");
	ASSERT_NE(0U, id);
	ASSERT_EQ(0, su_labels_set(fd, id));
	ASSERT_EQ(0, heap_start(fd, PLABEL_TARGET_PIDS, mode, 8192));
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	EXPECT_EQ(1, heap_alloc_here(fd, 0x123450));
	EXPECT_EQ(0, heap_call(fd, PLABEL_IOC_HEAP_FREE, 0x123450, 0, 0, 0,
			       0));
	/* a child is another process: not followed by a PIDS session */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(heap_alloc_here(fd, 0x555550) == 0 ? 0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(0, su_stop(fd));
	READ_STREAM(&rd, &st);
	FOR_EACH_REC(&st, h, off) {
		if (h->type == PLABEL_REC_ALLOC) {
			struct plabel_rec_sample *s = (void *)h;
			struct plabel_rec_alloc *a = (void *)(s + 1);
			uint64_t *ips = (uint64_t *)(a + 1);
			uint32_t i;

			allocs++;
			good += s->pid == me && s->set_id == id &&
				a->addr == 0x123450 && a->requested == 100 &&
				a->usable == 112 && a->weight == 4096 &&
				s->nr_user >= 1;
			for (i = 0; i < s->nr_user; i++)
				caller += ips[i] >= (uintptr_t)alloc_records &&
					  ips[i] < (uintptr_t)alloc_records + 4096;
			if (mode == PLABEL_CALLCHAIN_DWARF)
				caller += (s->flags & PLABEL_SAMPLE_REGS) &&
					  s->stack_size > 0;
		} else if (h->type == PLABEL_REC_FREE) {
			struct plabel_rec_free *f = (void *)h;

			frees++;
			EXPECT_EQ(0x123450ULL, f->addr);
			EXPECT_EQ(me, f->pid);
		}
	}
	EXPECT_EQ(1, allocs);
	EXPECT_EQ(1, good);
	EXPECT_EQ(1, frees);
	EXPECT_LE(1, caller);
	EXPECT_NE(NULL, su_labelset(&st, id));
	su_stream_free(&st);
	close(fd);
}

TEST(alloc_free_records_fp)
{
	alloc_records(_metadata, PLABEL_CALLCHAIN_FP);
}

TEST(alloc_free_records_dwarf)
{
	alloc_records(_metadata, PLABEL_CALLCHAIN_DWARF);
}

/*
 * With nobody reading, ALLOCs stop when the ring is down to its FREE
 * room, FREEs go on into that room, and those that do not fit are
 * counted exactly in LOST records of kind FREES: every FREE made is
 * either a record or counted.
 */
TEST(frees_never_lost_silently)
{
	struct su_stream st = { 0 };
	struct plabel_rec_header *h;
	long long ring_kb = su_read_num(SU_SYSCTL "ring_kb");
	uint64_t frees = 0, lost_frees = 0, allocs_ok = 0, allocs_rec = 0;
	uint64_t lost_records = 0;
	int fd, i, n = 20000;
	cpu_set_t one;
	size_t off;

	NEED_ROOT();
	ASSERT_LT(0, ring_kb);
	/* one CPU, so one ring fills */
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(one), &one));
	fd = open(SU_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, heap_start(fd, PLABEL_TARGET_PIDS, PLABEL_CALLCHAIN_FP,
				4096));
	for (i = 0; i < n; i++) {
		int r = heap_call(fd, PLABEL_IOC_HEAP_ALLOC, 0x100000 + 16 * i,
				  64, 64, 4096, 0);

		ASSERT_LE(0, r);
		allocs_ok += r;
	}
	/* more FREEs than the room kept for them holds */
	for (i = 0; i < 4 * n; i++)
		ASSERT_EQ(0, heap_call(fd, PLABEL_IOC_HEAP_FREE,
				       0x100000 + 16 * (i % n), 0, 0, 0, 0));
	ASSERT_EQ(0, su_stop(fd));
	ASSERT_EQ(0, su_drain(fd, &st));
	su_check(&st);
	ASSERT_EQ(0, st.bad) TH_LOG("%s", st.why);
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_lost *l = (void *)h;

		if (h->type == PLABEL_REC_FREE)
			frees++;
		else if (h->type == PLABEL_REC_ALLOC)
			allocs_rec++;
		else if (h->type == PLABEL_REC_LOST &&
			 l->kind == PLABEL_LOST_FREES)
			lost_frees += l->lost;
		else if (h->type == PLABEL_REC_LOST &&
			 l->kind == PLABEL_LOST_RECORDS)
			lost_records += l->lost;
	}
	TH_LOG("ring %lld KiB: %llu ALLOCs written (%llu said so), %llu lost; %llu FREEs written, %llu counted lost",
	       ring_kb, (unsigned long long)allocs_rec,
	       (unsigned long long)allocs_ok,
	       (unsigned long long)lost_records, (unsigned long long)frees,
	       (unsigned long long)lost_frees);
	/* an ALLOC the call counted is there; one it did not, counted lost */
	EXPECT_EQ(allocs_ok, allocs_rec);
	EXPECT_LE((uint64_t)n - allocs_ok, lost_records);
	EXPECT_LT(0ULL, lost_records) TH_LOG("the ring never filled");
	/* the FREE room: an eighth of the ring took FREEs after ALLOCs stopped */
	EXPECT_LT((uint64_t)(ring_kb * 1024 / 8 / sizeof(struct plabel_rec_free)) / 2,
		  frees);
	EXPECT_EQ((uint64_t)(4 * n), frees + lost_frees);
	EXPECT_LT(0ULL, lost_frees);
	su_stream_free(&st);
	close(fd);
}

TEST_HARNESS_MAIN
