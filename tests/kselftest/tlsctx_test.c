// SPDX-License-Identifier: GPL-2.0
/*
 * Thread contexts that programs publish (PLABEL_IOC_TLSCTX_SET): the
 * checks of the ioctl's arguments, its size field and its privilege; the
 * OpenTelemetry thread context (OTEP 4947) found at a static TLS offset
 * and through the thread's dynamic thread vector, copied byte for byte,
 * and none before registration, through a NULL pointer or from a record
 * not valid; custom-labels v1 sets, with the entries left out, the
 * PARTIAL flag, the empty context of a set none of whose labels could be
 * read and none for a set with no labels; hostile pointers, records
 * running into an unmapped page and the PLABEL_TLSCTX_BYTES bound;
 * forgetting and replacing a registration, and an exec ending it;
 * contexts on THREAD, OFFCPU and ALLOC records.
 */
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "session_util.h"
#include "kselftest/kselftest_harness.h"

#define NEED_ROOT() do {						\
	if (!su_have_dev())						\
		SKIP(return, SU_DEV " absent: module not loaded");	\
	if (geteuid())							\
		SKIP(return, "needs root for CAP_PERFMON");		\
} while (0)

#define HZ		499
#define PHASE_NS	50000000ull	/* a phase's CPU time: ~25 samples */
#define MAX_PHASES	16
#define ALIGN8(x)	(((x) + 7) & ~(size_t)7)
#define KERNEL_ADDR	0xffffffff81000000ull
#define EXEC_ENV	"TLSCTX_TEST_EXEC_CHILD"

/* The thread-local pointers the tests publish their contexts through. */
static __thread void *volatile otel_ctx;
static __thread void *volatile otel_ctx2;
static __thread void *volatile cl_ctx;

/* Offset of a thread-local variable of this thread from the FS base. */
static int64_t tls_offset(const volatile void *var)
{
	return (const volatile char *)var -
	       (const char *)__builtin_thread_pointer();
}

/* --- OTEP 4947 records ------------------------------------------------- */

#define OTEL_HEAD	28

struct otel_rec {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t valid;
	uint8_t flags;
	uint16_t attrs_size;
	uint8_t attrs[];
};

_Static_assert(sizeof(struct otel_rec) == OTEL_HEAD, "OTEP 4947 head");

/* key 0 = "/alpha", key 1 = "acme" */
static const char otel_attrs[] = "\0\x06/alpha\x01\x04" "acme";
#define OTEL_ATTRS_LEN	(sizeof(otel_attrs) - 1)

/* A valid record at p, ids from seed, attrs-data-size size; its bytes. */
static size_t otel_build(void *p, uint8_t seed, const void *attrs,
			 size_t len, uint16_t size)
{
	struct otel_rec *r = p;
	int i;

	for (i = 0; i < 16; i++)
		r->trace_id[i] = seed + i;
	for (i = 0; i < 8; i++)
		r->span_id[i] = 0x80 + seed + i;
	r->valid = 1;
	r->flags = 1;
	r->attrs_size = size;
	memcpy(r->attrs, attrs, len);
	return OTEL_HEAD + len;
}

/* --- custom-labels v1 sets --------------------------------------------- */

struct cl_string {
	size_t len;
	const void *buf;
};

struct cl_label {
	struct cl_string key;
	struct cl_string value;
};

struct cl_set {
	struct cl_label *storage;
	size_t count;
	size_t capacity;
};

#define CL(k, v)	{ { sizeof(k) - 1, k }, { sizeof(v) - 1, v } }

/* The entries a record carries for labels l[0..n); their bytes. */
static uint32_t cl_pack(unsigned char *out, const struct cl_label *l,
			size_t n)
{
	uint32_t len = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		uint16_t kl = l[i].key.len, vl = l[i].value.len;

		memcpy(out + len, &kl, 2);
		memcpy(out + len + 2, &vl, 2);
		len += 4;
		memcpy(out + len, l[i].key.buf, kl);
		len += kl;
		memcpy(out + len, l[i].value.buf, vl);
		len += vl;
	}
	return len;
}

/* --- the ioctl and sessions -------------------------------------------- */

static int tlsctx_set(int fd, int32_t pid, uint32_t format, uint32_t flags,
		      int64_t offset, uint64_t module)
{
	struct plabel_tlsctx_args a = {
		.size = sizeof(a),
		.flags = flags,
		.pid = pid,
		.format = format,
		.offset = offset,
		.module = module,
	};

	return ioctl(fd, PLABEL_IOC_TLSCTX_SET, &a) ? -errno : 0;
}

static int start(int fd, uint32_t target, uint32_t callchain,
		 uint32_t record)
{
	struct plabel_session_start_args a;
	int32_t pid = getpid();

	su_args_init(&a);
	a.target = target;
	a.pids = (uintptr_t)&pid;
	a.npids = 1;
	a.callchain = callchain;
	a.record = record;
	a.sample_hz = HZ;
	return su_start(fd, &a);
}

static int sample_like(uint32_t type)
{
	return type == PLABEL_REC_SAMPLE || type == PLABEL_REC_THREAD ||
	       type == PLABEL_REC_OFFCPU || type == PLABEL_REC_ALLOC;
}

/* Where a record's call chain, registers and stack copy end. */
static size_t ctx_base(const struct plabel_rec_header *h)
{
	const struct plabel_rec_sample *s = (const void *)h;
	size_t n = sizeof(*s);

	if (h->type == PLABEL_REC_ALLOC)
		n += sizeof(struct plabel_rec_alloc);
	n += 8 * (s->nr_kernel + s->nr_user);
	if (s->flags & PLABEL_SAMPLE_REGS)
		n += su_regs_bytes(s) + s->stack_size;
	return n;
}

static int all_zero(const unsigned char *p, size_t n)
{
	while (n--)
		if (*p++)
			return 0;
	return 1;
}

/*
 * The framing of a record with PLABEL_SAMPLE_TLSCTX: NULL when right, with
 * *size the record's size without the context; else what is wrong.
 */
static const char *ctx_framing(const struct plabel_rec_header *h,
			       size_t *size)
{
	const unsigned char *p = (const void *)h;
	const struct plabel_rec_tlsctx *t;
	size_t base, at, end;

	if (h->size < sizeof(struct plabel_rec_sample) +
	    (h->type == PLABEL_REC_ALLOC ? sizeof(struct plabel_rec_alloc) :
	     0))
		return "too short for its type";
	base = ctx_base(h);
	at = ALIGN8(base);
	if (at + sizeof(*t) > h->size)
		return "no room for the context header";
	if (!all_zero(p + base, at - base))
		return "padding before the context not zero";
	t = (const void *)(p + at);
	if (t->format != PLABEL_TLSCTX_OTEL_V1 &&
	    t->format != PLABEL_TLSCTX_CUSTOM_LABELS_V1)
		return "unknown context format";
	if (t->flags & ~PLABEL_TLSCTX_PARTIAL)
		return "unknown context flags";
	if (t->len > PLABEL_TLSCTX_BYTES)
		return "context length out of bounds";
	/* empty: a set none of whose labels could be copied */
	if (!t->len && (t->format != PLABEL_TLSCTX_CUSTOM_LABELS_V1 ||
			!(t->flags & PLABEL_TLSCTX_PARTIAL)))
		return "empty context not a partial set";
	end = at + sizeof(*t) + t->len;
	if (h->size != ALIGN8(end))
		return "record size is not that of its context";
	if (!all_zero(p + end, h->size - end))
		return "padding after the context not zero";
	*size = at;
	return NULL;
}

/*
 * Check a stream with contexts: each context's framing, then everything
 * else with su_check() on a copy whose records have their contexts cut.
 */
static void ctx_check(struct su_stream *st)
{
	struct su_stream cp = { 0 };
	struct plabel_rec_header *h;
	size_t off;

	cp.buf = malloc(st->len + 8);
	if (!cp.buf) {
		st->bad++;
		snprintf(st->why, sizeof(st->why), "out of memory");
		return;
	}
	cp.cap = st->len + 8;
	FOR_EACH_REC(st, h, off) {
		struct plabel_rec_header *c;
		size_t size = h->size;

		if (sample_like(h->type) &&
		    h->size >= sizeof(struct plabel_rec_sample) &&
		    (((struct plabel_rec_sample *)h)->flags &
		     PLABEL_SAMPLE_TLSCTX)) {
			const char *why = ctx_framing(h, &size);

			if (why) {
				st->bad++;
				snprintf(st->why, sizeof(st->why),
					 "type %u size %u: %s", h->type,
					 h->size, why);
				size = h->size;
			}
		}
		c = (void *)(cp.buf + cp.len);
		memcpy(c, h, size);
		if (size != h->size) {
			c->size = size;
			((struct plabel_rec_sample *)c)->flags &=
				~PLABEL_SAMPLE_TLSCTX;
		}
		cp.len += size;
	}
	su_check(&cp);
	if (cp.bad && !st->bad)
		memcpy(st->why, cp.why, sizeof(st->why));
	st->bad += cp.bad;
	free(cp.buf);
}

/* The context of a record whose framing ctx_check() found right, or NULL. */
static const struct plabel_rec_tlsctx *ctx_of(const struct plabel_rec_header *h)
{
	const struct plabel_rec_sample *s = (const void *)h;

	if (!(s->flags & PLABEL_SAMPLE_TLSCTX))
		return NULL;
	return (const void *)((const char *)h + ALIGN8(ctx_base(h)));
}

/*
 * After the session stopped: the reader's stream in *out, every record's
 * framing checked, contexts included. Asserts, so only in a test body.
 */
#define READ_CTX_STREAM(rdr, out) do {					\
		ASSERT_EQ(0, su_reader_join(rdr));			\
		*(out) = (rdr)->st;					\
		ctx_check(out);						\
		ASSERT_EQ(0, (out)->bad) TH_LOG("%s", (out)->why);	\
	} while (0)

/* --- what records carry ------------------------------------------------ */

/* A context expected: format 0 for none. */
struct want {
	uint16_t format;
	uint16_t flags;
	uint32_t len;
	const void *bytes;
};

static struct want want_otel(const void *rec, size_t len)
{
	return (struct want){ PLABEL_TLSCTX_OTEL_V1, 0, len, rec };
}

/* The records of a type of one thread in a time window. */
struct tally {
	unsigned int records;
	unsigned int with;	/* carrying a context */
	unsigned int match;	/* carrying exactly the one wanted */
	char seen[96];		/* the first that differs */
};

static void tally(struct su_stream *st, uint32_t type, uint32_t tid,
		  uint64_t from, uint64_t to, const struct want *w,
		  struct tally *t)
{
	struct plabel_rec_header *h;
	size_t off;

	memset(t, 0, sizeof(*t));
	FOR_EACH_REC(st, h, off) {
		struct plabel_rec_sample *s = (void *)h;
		const struct plabel_rec_tlsctx *c;
		const unsigned char *data;
		uint32_t i = 0;

		if (h->type != type || s->tid != tid || s->time_ns < from ||
		    s->time_ns > to)
			continue;
		t->records++;
		c = ctx_of(h);
		if (!c) {
			if (w->format && !t->seen[0])
				snprintf(t->seen, sizeof(t->seen),
					 "no context");
			continue;
		}
		t->with++;
		data = (const void *)(c + 1);
		if (w->format && c->format == w->format &&
		    c->flags == w->flags && c->len == w->len &&
		    (!w->len || !memcmp(data, w->bytes, w->len))) {
			t->match++;
			continue;
		}
		if (t->seen[0])
			continue;
		if (w->format)
			while (i < c->len && i < w->len &&
			       data[i] == ((const unsigned char *)w->bytes)[i])
				i++;
		snprintf(t->seen, sizeof(t->seen),
			 "format %u flags %#x len %u, differs from byte %u",
			 c->format, c->flags, c->len, i);
	}
}

/* Phases of a thread's CPU time, each with the context its samples carry. */
struct phase {
	const char *name;
	uint64_t from, to;
	struct want want;
};

struct phases {
	int n;
	struct phase p[MAX_PHASES];
};

static void run_phase(struct phases *ps, const char *name,
		      const struct want *w)
{
	struct phase *p = &ps->p[ps->n++];

	p->name = name;
	p->want = w ? *w : (struct want){ 0 };
	p->from = su_now_ns();
	su_burn_cpu(PHASE_NS);
	p->to = su_now_ns();
}

static void check_phases(struct __test_metadata *_metadata,
			 struct su_stream *st, pid_t tid,
			 const struct phases *ps)
{
	int i;

	for (i = 0; i < ps->n; i++) {
		const struct phase *p = &ps->p[i];
		struct tally t;

		tally(st, PLABEL_REC_SAMPLE, tid, p->from, p->to, &p->want,
		      &t);
		TH_LOG("%s: %u samples, %u with a context, %u as wanted",
		       p->name, t.records, t.with, t.match);
		EXPECT_LT(0u, t.records) TH_LOG("%s: no samples", p->name);
		if (p->want.format) {
			EXPECT_EQ(t.records, t.match)
				TH_LOG("%s: %s", p->name, t.seen);
		} else {
			EXPECT_EQ(0u, t.with)
				TH_LOG("%s: %s", p->name, t.seen);
		}
	}
}

/* --- the ioctl's arguments --------------------------------------------- */

struct idle_thread {
	int pipe[2];
	pid_t tid;
};

static void *idle_fn(void *arg)
{
	struct idle_thread *it = arg;
	char c;

	__atomic_store_n(&it->tid, su_gettid(), __ATOMIC_RELEASE);
	while (read(it->pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static int is_kthreadd(pid_t pid)
{
	char path[64], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = 0;
	fclose(f);
	return !strcmp(comm, "kthreadd\n");
}

TEST(bad_arguments)
{
	struct plabel_tlsctx_args a;
	uint64_t big[sizeof(a) / 8 + 1];
	int64_t off = tls_offset(&otel_ctx);
	const int64_t omax = PLABEL_TLSCTX_OFFSET_MAX;
	const uint32_t otel = PLABEL_TLSCTX_OTEL_V1, dtv = PLABEL_TLSCTX_DTV;
	int32_t me = getpid();
	struct idle_thread it = { .tid = 0 };
	pthread_t t;
	pid_t gone, child;
	int fd, fd2, status;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	fd2 = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	/* a file with no session */
	EXPECT_EQ(-EINVAL, tlsctx_set(fd2, me, otel, 0, off, 0));
	ASSERT_EQ(0, start(fd, PLABEL_TARGET_PIDS, PLABEL_CALLCHAIN_FP,
			   PLABEL_RECORD_CPU));

	/* what is taken: the bounds just inside */
	EXPECT_EQ(0, tlsctx_set(fd, me, otel, 0, off, 0));
	EXPECT_EQ(0, tlsctx_set(fd, me, PLABEL_TLSCTX_CUSTOM_LABELS_V1, 0,
				off, 0));
	EXPECT_EQ(0, tlsctx_set(fd, me, otel, 0, omax - 1, 0));
	EXPECT_EQ(0, tlsctx_set(fd, me, otel, 0, -(omax - 1), 0));
	EXPECT_EQ(0, tlsctx_set(fd, me, otel, dtv, 0, 1));
	EXPECT_EQ(0, tlsctx_set(fd, me, otel, dtv, omax - 1,
				PLABEL_TLSCTX_MODULE_MAX));
	EXPECT_EQ(0, tlsctx_set(fd, me, PLABEL_TLSCTX_NONE, 0, 0, 0));

#define BAD(err, ...)							\
	EXPECT_EQ(err, tlsctx_set(fd, __VA_ARGS__)) TH_LOG(#__VA_ARGS__)
	/* flags, format, pid */
	BAD(-EINVAL, me, otel, 1u << 2, off, 0);
	BAD(-EINVAL, me, otel, 1u << 31, off, 0);
	BAD(-EINVAL, me, otel, dtv | 1u << 2, 0, 1);
	/* the head alone is for OTel records */
	BAD(-EINVAL, me, PLABEL_TLSCTX_CUSTOM_LABELS_V1, PLABEL_TLSCTX_HEAD,
	    off, 0);
	BAD(-EINVAL, me, 3, 0, off, 0);
	BAD(-EINVAL, me, UINT32_MAX, 0, off, 0);
	BAD(-EINVAL, 0, otel, 0, off, 0);
	BAD(-EINVAL, -1, otel, 0, off, 0);
	BAD(-EINVAL, INT32_MIN, otel, 0, off, 0);
	/* the vector: module 1..PLABEL_TLSCTX_MODULE_MAX, offset in a block */
	BAD(-EINVAL, me, otel, dtv, 0, 0);
	BAD(-EINVAL, me, otel, dtv, 0, PLABEL_TLSCTX_MODULE_MAX + 1);
	BAD(-EINVAL, me, otel, dtv, 0, 1ull << 32 | 1);
	BAD(-EINVAL, me, otel, dtv, -8, 1);
	BAD(-EINVAL, me, otel, dtv, omax, 1);
	/* static TLS: no module, an offset not 0 and in range */
	BAD(-EINVAL, me, otel, 0, off, 1);
	BAD(-EINVAL, me, otel, 0, 0, 0);
	BAD(-EINVAL, me, PLABEL_TLSCTX_CUSTOM_LABELS_V1, 0, 0, 0);
	BAD(-EINVAL, me, otel, 0, omax, 0);
	BAD(-EINVAL, me, otel, 0, -omax, 0);
	BAD(-EINVAL, me, otel, 0, INT64_MIN, 0);
	BAD(-EINVAL, me, otel, 0, INT64_MAX, 0);
	/* forgetting takes nothing else */
	BAD(-EINVAL, me, PLABEL_TLSCTX_NONE, 0, off, 0);
	BAD(-EINVAL, me, PLABEL_TLSCTX_NONE, 0, 0, 1);
	BAD(-EINVAL, me, PLABEL_TLSCTX_NONE, dtv, 0, 0);

	/* no such process: one reaped, beyond any pid, a thread not leader */
	gone = fork();
	ASSERT_LE(0, gone);
	if (!gone)
		_exit(0);
	ASSERT_EQ(gone, waitpid(gone, &status, 0));
	BAD(-ESRCH, gone, otel, 0, off, 0);
	BAD(-ESRCH, INT32_MAX, otel, 0, off, 0);
	BAD(-ESRCH, gone, PLABEL_TLSCTX_NONE, 0, 0, 0);
	ASSERT_EQ(0, pipe(it.pipe));
	ASSERT_EQ(0, pthread_create(&t, NULL, idle_fn, &it));
	while (!__atomic_load_n(&it.tid, __ATOMIC_ACQUIRE))
		usleep(1000);
	BAD(-ESRCH, it.tid, otel, 0, off, 0);
	ASSERT_EQ(1, write(it.pipe[1], "x", 1));
	pthread_join(t, NULL);
	close(it.pipe[0]);
	close(it.pipe[1]);
	/* a kernel thread has no user memory */
	if (is_kthreadd(2)) {
		BAD(-ESRCH, 2, otel, 0, off, 0);
	} else {
		TH_LOG("pid 2 is not kthreadd here: not tried");
	}
#undef BAD

	/* the size field, as copy_struct_from_user() reads it */
	memset(&a, 0, sizeof(a));
	a.pid = me;
	a.format = otel;
	a.offset = off;
	a.size = offsetof(struct plabel_tlsctx_args, module);
	EXPECT_EQ(-EINVAL, ioctl(fd, PLABEL_IOC_TLSCTX_SET, &a) ? -errno : 0);
	a.size = 0;
	EXPECT_EQ(-EINVAL, ioctl(fd, PLABEL_IOC_TLSCTX_SET, &a) ? -errno : 0);
	a.size = 2 * sysconf(_SC_PAGESIZE);
	EXPECT_EQ(-E2BIG, ioctl(fd, PLABEL_IOC_TLSCTX_SET, &a) ? -errno : 0);
	memset(big, 0, sizeof(big));
	a.size = sizeof(big);
	memcpy(big, &a, sizeof(a));
	EXPECT_EQ(0, ioctl(fd, PLABEL_IOC_TLSCTX_SET, big) ? -errno : 0);
	((unsigned char *)big)[sizeof(a)] = 1;
	EXPECT_EQ(-E2BIG, ioctl(fd, PLABEL_IOC_TLSCTX_SET, big) ? -errno : 0);
	EXPECT_EQ(-EFAULT, ioctl(fd, PLABEL_IOC_TLSCTX_SET, (void *)16) ?
			   -errno : 0);

	/* a caller that lost its privilege, with the session's file */
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		int r1, r2;

		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(100);
		r1 = tlsctx_set(fd, me, otel, 0, off, 0);
		r2 = tlsctx_set(fd, me, PLABEL_TLSCTX_NONE, 0, 0, 0);
		_exit(r1 != r2 ? 101 : r1 < 0 ? -r1 : 102);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(EPERM, WEXITSTATUS(status));

	/* and the file still takes a registration */
	EXPECT_EQ(0, tlsctx_set(fd, me, otel, 0, off, 0));
	EXPECT_EQ(0, su_stop(fd));
	close(fd2);
	close(fd);
}

/* --- the OpenTelemetry record ------------------------------------------ */

TEST(otel_static)
{
	uint64_t rec[8], exp1[8], exp2[8];
	size_t len = otel_build(rec, 0x10, otel_attrs, OTEL_ATTRS_LEN,
				OTEL_ATTRS_LEN);
	struct want w1 = want_otel(exp1, len), w2 = want_otel(exp2, len);
	struct want w3 = want_otel(exp2, 28);
	struct otel_rec *r = (void *)rec;
	struct su_reader rdr, rdr2;
	struct su_stream st, st2;
	struct phases ps = { 0 };
	struct plabel_rec_header *h;
	unsigned int others = 0, others_ctx = 0;
	pid_t me = su_gettid();
	size_t off;
	int fd, fd2;

	NEED_ROOT();
	memcpy(exp1, rec, sizeof(rec));
	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	fd2 = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, start(fd, PLABEL_TARGET_PIDS, PLABEL_CALLCHAIN_FP,
			   PLABEL_RECORD_CPU));
	ASSERT_EQ(0, start(fd2, PLABEL_TARGET_PIDS, PLABEL_CALLCHAIN_FP,
			   PLABEL_RECORD_CPU));
	ASSERT_EQ(0, su_reader_start(&rdr, fd));
	ASSERT_EQ(0, su_reader_start(&rdr2, fd2));

	otel_ctx = rec;
	run_phase(&ps, "before registration", NULL);
	ASSERT_EQ(0, tlsctx_set(fd, getpid(), PLABEL_TLSCTX_OTEL_V1, 0,
				tls_offset(&otel_ctx), 0));
	run_phase(&ps, "registered", &w1);
	/* what the record holds at each sample, not at registration */
	otel_build(rec, 0x20, otel_attrs, OTEL_ATTRS_LEN, OTEL_ATTRS_LEN);
	memcpy(exp2, rec, sizeof(rec));
	run_phase(&ps, "record changed", &w2);
	otel_ctx = NULL;
	run_phase(&ps, "NULL pointer", NULL);
	r->valid = 0;
	otel_ctx = rec;
	run_phase(&ps, "valid 0", NULL);
	r->valid = 2;
	run_phase(&ps, "valid 2", NULL);
	/* PLABEL_TLSCTX_HEAD: the 28-byte head alone, the span */
	r->valid = 1;
	ASSERT_EQ(0, tlsctx_set(fd, getpid(), PLABEL_TLSCTX_OTEL_V1,
				PLABEL_TLSCTX_HEAD, tls_offset(&otel_ctx), 0));
	run_phase(&ps, "head only", &w3);
	otel_ctx = NULL;

	ASSERT_EQ(0, su_stop(fd));
	ASSERT_EQ(0, su_stop(fd2));
	READ_CTX_STREAM(&rdr, &st);
	READ_CTX_STREAM(&rdr2, &st2);
	check_phases(_metadata, &st, me, &ps);
	/* a session that registered nothing gets no contexts */
	FOR_EACH_REC(&st2, h, off) {
		if (!sample_like(h->type))
			continue;
		others++;
		others_ctx += ctx_of(h) != NULL;
	}
	EXPECT_LT(0u, others);
	EXPECT_EQ(0u, others_ctx);
	su_stream_free(&st);
	su_stream_free(&st2);
	close(fd2);
	close(fd);
}

/* Install v as this thread's tcbhead_t.dtv (at FS base + 8). */
static void dtv_install(uint64_t v)
{
	char *tp = __builtin_thread_pointer();

	__atomic_store_n((uint64_t *)(tp + 8), v, __ATOMIC_SEQ_CST);
}

/*
 * A phase with the vector fake installed, module 3's block at block,
 * registered with offset off; the thread's own vector around it.
 */
static int fake_phase(int fd, struct phases *ps, const char *name,
		      const struct want *w, uint64_t *fake, uint64_t real,
		      uint64_t block, int64_t off)
{
	int ret = tlsctx_set(fd, getpid(), PLABEL_TLSCTX_OTEL_V1,
			     PLABEL_TLSCTX_DTV, off, 3);

	if (ret)
		return ret;
	fake[2 + 2 * 3] = block;
	dtv_install((uintptr_t)&fake[2]);
	run_phase(ps, name, w);
	dtv_install(real);
	return 0;
}

#define LOW_ADDR	0x20000000ull	/* an offset in range */

TEST(otel_dtv)
{
	uint64_t rec[8], exp[8], blk[4] = { 0 }, fake[2 * 8] = { 0 };
	size_t len = otel_build(rec, 0x30, otel_attrs, OTEL_ATTRS_LEN,
				OTEL_ATTRS_LEN);
	struct want w = want_otel(exp, len);
	const char *tp = __builtin_thread_pointer();
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t *dtv, n, block, real;
	struct su_reader rdr;
	struct su_stream st;
	struct phases ps = { 0 };
	int32_t pid = getpid();
	int64_t off;
	void *low;
	int fd;

	NEED_ROOT();
	memcpy(exp, rec, sizeof(rec));
	memcpy(&real, tp + 8, 8);
	dtv = (uint64_t *)(uintptr_t)real;
	if (!dtv)
		SKIP(return, "no dynamic thread vector");
	n = dtv[-2];
	block = dtv[2];
	off = (char *)&otel_ctx - (char *)(uintptr_t)block;
	if (n < 1 || n > 4096 || !block || block == ~0ull || off < 0 ||
	    off >= 4096)
		SKIP(return, "module 1 is not this executable's TLS block");
	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start(fd, PLABEL_TARGET_PIDS, PLABEL_CALLCHAIN_DWARF,
			   PLABEL_RECORD_CPU));
	ASSERT_EQ(0, su_reader_start(&rdr, fd));
	otel_ctx = rec;

	ASSERT_EQ(0, tlsctx_set(fd, pid, PLABEL_TLSCTX_OTEL_V1,
				PLABEL_TLSCTX_DTV, off, 1));
	run_phase(&ps, "module 1", &w);
	ASSERT_EQ(0, tlsctx_set(fd, pid, PLABEL_TLSCTX_OTEL_V1,
				PLABEL_TLSCTX_DTV, off, n + 1));
	run_phase(&ps, "module past the vector's count", NULL);

	/*
	 * A vector of our own, in the layout the kernel reads: the count
	 * before the first entry, module m's block at entry m. Nothing in
	 * the phases looks at the thread's vector but the kernel.
	 */
	blk[1] = (uintptr_t)rec;
	fake[0] = 2;			/* count */
	fake[2] = 1;			/* entry 0: generation */
	ASSERT_EQ(0, fake_phase(fd, &ps, "module 3 of 2", NULL, fake, real,
				(uintptr_t)blk, 8));
	fake[0] = 3;
	ASSERT_EQ(0, fake_phase(fd, &ps, "module 3 of 3", &w, fake, real,
				(uintptr_t)blk, 8));
	/*
	 * Blocks not allocated (0 and ~0) are not followed: offsets that
	 * would take either to a page holding a pointer to the record, as
	 * they take block 1 (allocated, whatever it looks like) there.
	 */
	low = mmap((void *)LOW_ADDR, pg, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (low == (void *)LOW_ADDR) {
		*(uint64_t *)low = (uintptr_t)rec;
		ASSERT_EQ(0, fake_phase(fd, &ps, "module 3 at 1", &w, fake,
					real, 1, LOW_ADDR - 1));
		ASSERT_EQ(0, fake_phase(fd, &ps, "module 3 at ~0", NULL, fake,
					real, ~0ull, LOW_ADDR + 1));
		ASSERT_EQ(0, fake_phase(fd, &ps, "module 3 at 0", NULL, fake,
					real, 0, LOW_ADDR));
		munmap(low, pg);
	} else {
		TH_LOG("no page at %#llx: blocks 0 and ~0 tried alone",
		       LOW_ADDR);
		if (low != MAP_FAILED)
			munmap(low, pg);
		ASSERT_EQ(0, fake_phase(fd, &ps, "module 3 at ~0", NULL, fake,
					real, ~0ull, 8));
		ASSERT_EQ(0, fake_phase(fd, &ps, "module 3 at 0", NULL, fake,
					real, 0, 8));
	}
	dtv_install(8);
	run_phase(&ps, "vector at 8", NULL);
	dtv_install(KERNEL_ADDR);
	run_phase(&ps, "vector in the kernel", NULL);
	dtv_install(real);
	otel_ctx = NULL;

	ASSERT_EQ(0, su_stop(fd));
	READ_CTX_STREAM(&rdr, &st);
	check_phases(_metadata, &st, su_gettid(), &ps);
	su_stream_free(&st);
	close(fd);
}

/* --- custom-labels v1 -------------------------------------------------- */

TEST(custom_labels)
{
	static char bigval[1100], longkey[300];
	static char keys[20][4], vals[20][4];
	struct cl_label three[] = {
		CL("k1", "v1"),
		{ { 3, NULL }, { 1, "x" } },
		CL("service", "checkout"),
	};
	struct cl_label three_want[] = { three[0], three[2] };
	struct cl_label twenty[20];
	struct cl_label unreadable[] = {
		CL("a", "1"),
		{ { 3, (const void *)(uintptr_t)KERNEL_ADDR }, { 1, "2" } },
		CL("c", "3"),
	};
	struct cl_label too_big[] = {
		CL("a", "1"),
		{ { 1, "b" }, { 1020, bigval } },
		{ { 256, longkey }, { 1, "v" } },
		CL("c", "3"),
	};
	struct cl_label a_c[] = { CL("a", "1"), CL("c", "3") };
	struct cl_label lost[] = {
		{ { 3, (const void *)(uintptr_t)KERNEL_ADDR }, { 1, "2" } },
	};
	/* 6 + 4 + 1 + 1013: exactly PLABEL_TLSCTX_BYTES */
	struct cl_label full[] = {
		CL("a", "1"),
		{ { 1, "b" }, { 1013, bigval } },
	};
	static unsigned char e_three[64], e_twenty[256], e_a_c[64];
	static unsigned char e_full[PLABEL_TLSCTX_BYTES];
	struct want w_three, w_twenty, w_a_c, w_full;
	const struct want w_empty = { PLABEL_TLSCTX_CUSTOM_LABELS_V1,
				      PLABEL_TLSCTX_PARTIAL, 0, NULL };
	struct cl_set set = { 0 };
	struct su_reader rdr;
	struct su_stream st;
	struct phases ps = { 0 };
	int fd, i;

	NEED_ROOT();
	memset(bigval, 'v', sizeof(bigval));
	memset(longkey, 'k', sizeof(longkey));
	for (i = 0; i < 20; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%02d", i);
		snprintf(vals[i], sizeof(vals[i]), "v%02d", i);
		twenty[i] = (struct cl_label){ { 3, keys[i] }, { 3, vals[i] } };
	}
	w_three = (struct want){ PLABEL_TLSCTX_CUSTOM_LABELS_V1, 0,
				 cl_pack(e_three, three_want, 2), e_three };
	w_twenty = (struct want){ PLABEL_TLSCTX_CUSTOM_LABELS_V1,
				  PLABEL_TLSCTX_PARTIAL,
				  cl_pack(e_twenty, twenty,
					  PLABEL_TLSCTX_LABELS), e_twenty };
	w_a_c = (struct want){ PLABEL_TLSCTX_CUSTOM_LABELS_V1,
			       PLABEL_TLSCTX_PARTIAL, cl_pack(e_a_c, a_c, 2),
			       e_a_c };
	w_full = (struct want){ PLABEL_TLSCTX_CUSTOM_LABELS_V1, 0,
				cl_pack(e_full, full, 2), e_full };
	ASSERT_EQ((uint32_t)PLABEL_TLSCTX_BYTES, w_full.len);

	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start(fd, PLABEL_TARGET_PIDS, PLABEL_CALLCHAIN_FP,
			   PLABEL_RECORD_CPU));
	ASSERT_EQ(0, su_reader_start(&rdr, fd));
	ASSERT_EQ(0, tlsctx_set(fd, getpid(), PLABEL_TLSCTX_CUSTOM_LABELS_V1,
				0, tls_offset(&cl_ctx), 0));
	cl_ctx = &set;

#define SET(labels, n) do {						\
		set.storage = (labels);					\
		set.count = set.capacity = (n);				\
	} while (0)
	SET(three, 3);
	run_phase(&ps, "three labels, one without a key", &w_three);
	SET((struct cl_label *)0x10, 3);
	run_phase(&ps, "storage at 0x10", &w_empty);
	SET(lost, 1);
	run_phase(&ps, "the only label unreadable", &w_empty);
	SET(three, 0);
	run_phase(&ps, "no labels", NULL);
	SET(NULL, 0);
	run_phase(&ps, "no labels, no storage", NULL);
	SET(twenty, 20);
	run_phase(&ps, "twenty labels", &w_twenty);
	SET(unreadable, 3);
	run_phase(&ps, "a key in the kernel", &w_a_c);
	SET(too_big, 4);
	run_phase(&ps, "a value too big, a key too long", &w_a_c);
	SET(full, 2);
	run_phase(&ps, "exactly PLABEL_TLSCTX_BYTES", &w_full);
#undef SET
	cl_ctx = (void *)(uintptr_t)KERNEL_ADDR;
	run_phase(&ps, "set in the kernel", NULL);
	cl_ctx = NULL;
	run_phase(&ps, "NULL set", NULL);

	ASSERT_EQ(0, su_stop(fd));
	READ_CTX_STREAM(&rdr, &st);
	check_phases(_metadata, &st, su_gettid(), &ps);
	su_stream_free(&st);
	close(fd);
}

/* --- hostile pointers -------------------------------------------------- */

TEST(hostile_pointers)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t big[1200 / 8], exp_big[PLABEL_TLSCTX_BYTES / 8];
	unsigned char attrs[1200 - OTEL_HEAD], exp_end[64];
	struct want w_end, w_big;
	struct su_reader rdr;
	struct su_stream st;
	struct phases ps = { 0 };
	int32_t pid = getpid();
	char *two, *none;
	int64_t none_off;
	size_t i;
	int fd;

	NEED_ROOT();
	for (i = 0; i < sizeof(attrs); i++)
		attrs[i] = i * 7 + 3;
	/* a record whose attrs-data-size goes past PLABEL_TLSCTX_BYTES */
	otel_build(big, 0x40, attrs, sizeof(attrs), 0xffff);
	memcpy(exp_big, big, sizeof(exp_big));
	w_big = want_otel(exp_big, PLABEL_TLSCTX_BYTES);
	/* less than attrs-data-size says: partial */
	w_big.flags = PLABEL_TLSCTX_PARTIAL;
	/* one 20 bytes of attrs-data before an unmapped page */
	two = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, two);
	ASSERT_EQ(0, munmap(two + pg, pg));
	otel_build(two + pg - OTEL_HEAD - 20, 0x50, attrs, 20, 0xffff);
	memcpy(exp_end, two + pg - OTEL_HEAD - 20, OTEL_HEAD + 20);
	w_end = want_otel(exp_end, OTEL_HEAD + 20);
	w_end.flags = PLABEL_TLSCTX_PARTIAL;
	none = mmap(NULL, pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, none);
	none_off = tls_offset(none);

	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start(fd, PLABEL_TARGET_PIDS, PLABEL_CALLCHAIN_FP,
			   PLABEL_RECORD_CPU));
	ASSERT_EQ(0, su_reader_start(&rdr, fd));
	ASSERT_EQ(0, tlsctx_set(fd, pid, PLABEL_TLSCTX_OTEL_V1, 0,
				tls_offset(&otel_ctx), 0));

	otel_ctx = (void *)(uintptr_t)KERNEL_ADDR;
	run_phase(&ps, "record in the kernel", NULL);
	otel_ctx = (void *)1;
	run_phase(&ps, "record at 1", NULL);
	otel_ctx = (void *)0x1007;
	run_phase(&ps, "record at 0x1007", NULL);
	otel_ctx = (void *)(uintptr_t)(~0ull - 3);
	run_phase(&ps, "record at ~0 - 3", NULL);
	otel_ctx = (void *)(uintptr_t)(1ull << 47);
	run_phase(&ps, "record at 1 << 47", NULL);
	otel_ctx = none;
	run_phase(&ps, "record in a PROT_NONE page", NULL);
	otel_ctx = two + pg - OTEL_HEAD - 20;
	run_phase(&ps, "attrs-data up to an unmapped page", &w_end);
	otel_ctx = two + pg - 20;
	run_phase(&ps, "head across into an unmapped page", NULL);
	otel_ctx = big;
	run_phase(&ps, "attrs-data-size 0xffff", &w_big);
	/* the thread-local pointer itself in a PROT_NONE page */
	if (none_off > -PLABEL_TLSCTX_OFFSET_MAX &&
	    none_off < PLABEL_TLSCTX_OFFSET_MAX) {
		ASSERT_EQ(0, tlsctx_set(fd, pid, PLABEL_TLSCTX_OTEL_V1, 0,
					none_off, 0));
		run_phase(&ps, "pointer in a PROT_NONE page", NULL);
	} else {
		TH_LOG("PROT_NONE page %p too far from the FS base", none);
	}
	otel_ctx = NULL;

	ASSERT_EQ(0, su_stop(fd));
	READ_CTX_STREAM(&rdr, &st);
	check_phases(_metadata, &st, su_gettid(), &ps);
	su_stream_free(&st);
	munmap(none, pg);
	munmap(two, pg);
	close(fd);
}

/* --- forgetting, replacing, exec --------------------------------------- */

TEST(forget_and_replace)
{
	uint64_t ra[8], rb[8];
	size_t la = otel_build(ra, 0x60, otel_attrs, OTEL_ATTRS_LEN,
			       OTEL_ATTRS_LEN);
	size_t lb = otel_build(rb, 0x70, otel_attrs, 2, 2);
	struct cl_label labels[] = { CL("phase", "custom") };
	struct cl_set set = { labels, 1, 1 };
	unsigned char e_cl[32];
	struct want wa = want_otel(ra, la), wb = want_otel(rb, lb);
	struct want wc = { PLABEL_TLSCTX_CUSTOM_LABELS_V1, 0,
			   cl_pack(e_cl, labels, 1), e_cl };
	struct su_reader rdr;
	struct su_stream st;
	struct phases ps = { 0 };
	int32_t pid = getpid();
	int fd;

	NEED_ROOT();
	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start(fd, PLABEL_TARGET_PIDS, PLABEL_CALLCHAIN_FP,
			   PLABEL_RECORD_CPU));
	ASSERT_EQ(0, su_reader_start(&rdr, fd));
	otel_ctx = ra;
	otel_ctx2 = rb;
	cl_ctx = &set;

	ASSERT_EQ(0, tlsctx_set(fd, pid, PLABEL_TLSCTX_OTEL_V1, 0,
				tls_offset(&otel_ctx), 0));
	run_phase(&ps, "first variable", &wa);
	ASSERT_EQ(0, tlsctx_set(fd, pid, PLABEL_TLSCTX_OTEL_V1, 0,
				tls_offset(&otel_ctx2), 0));
	run_phase(&ps, "second variable", &wb);
	ASSERT_EQ(0, tlsctx_set(fd, pid, PLABEL_TLSCTX_CUSTOM_LABELS_V1, 0,
				tls_offset(&cl_ctx), 0));
	run_phase(&ps, "custom-labels", &wc);
	ASSERT_EQ(0, tlsctx_set(fd, pid, PLABEL_TLSCTX_NONE, 0, 0, 0));
	run_phase(&ps, "forgotten", NULL);
	ASSERT_EQ(0, tlsctx_set(fd, pid, PLABEL_TLSCTX_OTEL_V1, 0,
				tls_offset(&otel_ctx), 0));
	run_phase(&ps, "registered again", &wa);
	otel_ctx = NULL;
	otel_ctx2 = NULL;
	cl_ctx = NULL;

	ASSERT_EQ(0, su_stop(fd));
	READ_CTX_STREAM(&rdr, &st);
	check_phases(_metadata, &st, su_gettid(), &ps);
	su_stream_free(&st);
	close(fd);
}

/* Times the forked child of exec_ends_registration keeps. */
struct exec_times {
	uint64_t go;		/* it spins with its context from here */
	uint64_t exec;		/* to here, and calls execve() */
};

/*
 * The image that child executes: the same program, so the same TLS
 * offset holds a pointer to a valid record again; it spins and exits
 * before the test harness starts.
 */
__attribute__((constructor)) static void exec_child(void)
{
	static uint64_t rec[8];

	if (!getenv(EXEC_ENV))
		return;
	otel_build(rec, 0x90, otel_attrs, OTEL_ATTRS_LEN, OTEL_ATTRS_LEN);
	otel_ctx = rec;
	su_burn_cpu(2 * PHASE_NS);
	_exit(0);
}

TEST(exec_ends_registration)
{
	uint64_t rec[8];
	size_t len = otel_build(rec, 0x80, otel_attrs, OTEL_ATTRS_LEN,
				OTEL_ATTRS_LEN);
	struct want w = want_otel(rec, len), none = { 0 };
	struct exec_times *et;
	struct plabel_rec_header *h;
	struct su_reader rdr;
	struct su_stream st;
	struct tally before, after;
	uint64_t exec_ns = 0;
	int fd, go[2], status;
	pid_t child;
	size_t off;
	char c;

	NEED_ROOT();
	et = mmap(NULL, sizeof(*et), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, et);
	ASSERT_EQ(0, pipe(go));
	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start(fd, PLABEL_TARGET_TREE, PLABEL_CALLCHAIN_FP,
			   PLABEL_RECORD_CPU | PLABEL_RECORD_THREADS));
	ASSERT_EQ(0, su_reader_start(&rdr, fd));
	otel_ctx = rec;
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		et->go = su_now_ns();
		su_burn_cpu(PHASE_NS);
		et->exec = su_now_ns();
		setenv(EXEC_ENV, "1", 1);
		execl("/proc/self/exe", "tlsctx_test", (char *)NULL);
		_exit(127);
	}
	otel_ctx = NULL;
	EXPECT_EQ(0, tlsctx_set(fd, child, PLABEL_TLSCTX_OTEL_V1, 0,
				tls_offset(&otel_ctx), 0));
	ASSERT_EQ(1, write(go[1], "x", 1));
	ASSERT_EQ(child, waitpid(child, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("child status %#x", status);
	ASSERT_EQ(0, su_stop(fd));
	READ_CTX_STREAM(&rdr, &st);

	FOR_EACH_REC(&st, h, off)
		if (h->type == PLABEL_REC_EXEC &&
		    ((struct plabel_rec_exec *)h)->pid == (uint32_t)child)
			exec_ns = ((struct plabel_rec_exec *)h)->time_ns;
	ASSERT_NE(0ull, exec_ns) TH_LOG("no EXEC record of the child");
	tally(&st, PLABEL_REC_SAMPLE, child, et->go, et->exec, &w, &before);
	tally(&st, PLABEL_REC_SAMPLE, child, exec_ns, UINT64_MAX, &none,
	      &after);
	TH_LOG("before exec: %u samples, %u as wanted", before.records,
	       before.match);
	TH_LOG("after exec: %u samples, %u with a context", after.records,
	       after.with);
	EXPECT_LT(0u, before.records);
	EXPECT_EQ(before.records, before.match) TH_LOG("%s", before.seen);
	EXPECT_LT(0u, after.records);
	EXPECT_EQ(0u, after.with) TH_LOG("%s", after.seen);
	su_stream_free(&st);
	munmap(et, sizeof(*et));
	close(go[0]);
	close(go[1]);
	close(fd);
}

/* --- THREAD, OFFCPU and ALLOC records ---------------------------------- */

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { ns / 1000000000ull, ns % 1000000000ull };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

struct worker {
	void *rec;		/* the context it publishes second */
	pid_t tid;
	uint64_t t0, t1;	/* sleeping with no context */
	uint64_t t2, t3;	/* sleeping with rec */
};

static void *worker_fn(void *arg)
{
	struct worker *wk = arg;

	wk->tid = su_gettid();
	wk->t0 = su_now_ns();
	sleep_ns(10000000);
	wk->t1 = su_now_ns();
	otel_ctx = wk->rec;
	wk->t2 = su_now_ns();
	sleep_ns(10000000);
	wk->t3 = su_now_ns();
	otel_ctx = NULL;
	return NULL;
}

TEST(thread_offcpu_alloc)
{
	uint64_t ra[8], rb[8];
	size_t la = otel_build(ra, 0xa0, otel_attrs, OTEL_ATTRS_LEN,
			       OTEL_ATTRS_LEN);
	size_t lb = otel_build(rb, 0xb0, otel_attrs, OTEL_ATTRS_LEN,
			       OTEL_ATTRS_LEN);
	struct want wa = want_otel(ra, la), wb = want_otel(rb, lb);
	struct want none = { 0 };
	struct worker wk = { .rec = rb };
	struct plabel_heap_args ha = {
		.size = sizeof(ha),
		.requested = 64,
		.usable = 64,
		.weight = 4096,
	};
	struct plabel_rec_header *h;
	struct su_reader rdr;
	struct su_stream st;
	struct tally t;
	uint64_t t0, m0, m1;
	unsigned int threads = 0, threads_ok = 0;
	pid_t me = su_gettid();
	void *block;
	pthread_t th;
	size_t off;
	int fd;

	NEED_ROOT();
	block = malloc(64);
	ASSERT_NE(NULL, block);
	ha.addr = (uintptr_t)block;
	fd = open(SU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, start(fd, PLABEL_TARGET_PIDS, PLABEL_CALLCHAIN_FP,
			   PLABEL_RECORD_CPU | PLABEL_RECORD_THREADS |
			   PLABEL_RECORD_OFFCPU | PLABEL_RECORD_HEAP));
	ASSERT_EQ(0, su_reader_start(&rdr, fd));
	ASSERT_EQ(0, tlsctx_set(fd, getpid(), PLABEL_TLSCTX_OTEL_V1, 0,
				tls_offset(&otel_ctx), 0));
	otel_ctx = ra;
	t0 = su_now_ns();
	ASSERT_EQ(0, pthread_create(&th, NULL, worker_fn, &wk));
	pthread_join(th, NULL);
	m0 = su_now_ns();
	sleep_ns(10000000);
	m1 = su_now_ns();
	EXPECT_EQ(1, ioctl(fd, PLABEL_IOC_HEAP_ALLOC, &ha));
	ha.requested = ha.usable = ha.weight = 0;
	EXPECT_EQ(0, ioctl(fd, PLABEL_IOC_HEAP_FREE, &ha));
	otel_ctx = NULL;
	ASSERT_EQ(0, su_stop(fd));
	READ_CTX_STREAM(&rdr, &st);

	/* the creation, in the creator's context */
	FOR_EACH_REC(&st, h, off) {
		struct plabel_rec_sample *s = (void *)h;
		const struct plabel_rec_tlsctx *c = ctx_of(h);

		if (h->type != PLABEL_REC_THREAD ||
		    s->child_tid != (uint32_t)wk.tid)
			continue;
		threads++;
		EXPECT_EQ((uint32_t)me, s->tid);
		EXPECT_NE(NULL, c);
		if (c && c->format == wa.format && c->flags == 0 &&
		    c->len == wa.len && !memcmp(c + 1, wa.bytes, wa.len))
			threads_ok++;
	}
	EXPECT_EQ(1u, threads);
	EXPECT_EQ(1u, threads_ok);
	/* a new thread's pointer starts NULL; then its own record */
	tally(&st, PLABEL_REC_OFFCPU, wk.tid, wk.t0, wk.t1, &none, &t);
	TH_LOG("worker before: %u OFFCPU, %u with a context", t.records,
	       t.with);
	EXPECT_LT(0u, t.records);
	EXPECT_EQ(0u, t.with) TH_LOG("%s", t.seen);
	tally(&st, PLABEL_REC_OFFCPU, wk.tid, wk.t2, wk.t3, &wb, &t);
	TH_LOG("worker after: %u OFFCPU, %u as wanted", t.records, t.match);
	EXPECT_LT(0u, t.records);
	EXPECT_EQ(t.records, t.match) TH_LOG("%s", t.seen);
	/* the creator's waits: the join and its sleep */
	tally(&st, PLABEL_REC_OFFCPU, me, t0, m1, &wa, &t);
	TH_LOG("creator: %u OFFCPU, %u as wanted", t.records, t.match);
	EXPECT_LT(0u, t.records);
	EXPECT_EQ(t.records, t.match) TH_LOG("%s", t.seen);
	tally(&st, PLABEL_REC_OFFCPU, me, m0, m1, &wa, &t);
	EXPECT_LT(0u, t.records) TH_LOG("no OFFCPU record of the sleep");
	tally(&st, PLABEL_REC_ALLOC, me, m1, UINT64_MAX, &wa, &t);
	EXPECT_EQ(1u, t.records);
	EXPECT_EQ(1u, t.match) TH_LOG("%s", t.seen);
	su_stream_free(&st);
	free(block);
	close(fd);
}

TEST_HARNESS_MAIN
