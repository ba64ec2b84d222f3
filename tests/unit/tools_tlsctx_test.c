// SPDX-License-Identifier: GPL-2.0
/*
 * The reader of the thread contexts other programs publish (tools/tlsctx.c).
 *
 * Locating: each test program of tests/e2e/tlsctx/ (the thread-local
 * pointer in the executable, in a library linked at start through TLSDESC
 * or the general-dynamic model, in a library loaded with dlopen() into
 * dynamic or into static TLS; OTel or custom-labels) is started; for each
 * of its two threads the address plabel_tls_locate() and plabel_tls_addr()
 * give must be the one the thread printed, the context found there must
 * decode (plabel_tctx_labels(), after copying it as the module does) to
 * the labels the thread set, and the OTel key map must read back. A
 * process that publishes neither context (libplabel linked statically
 * exports nothing) has none: -ENOENT; libplabel.so is found like any
 * other library.
 *
 * Decoding: records built byte by byte from the layouts (OTEP 4947; the
 * module's custom-labels encoding in plabel_uapi.h): trace and span ids
 * in lowercase hex, attributes by the key map, unknown key indices and
 * bad values counted and left out, cut entries ignored, the last OTel
 * entry of a key and the first custom-labels label of a key winning.
 *
 * The programs are looked for in $PLABEL_TLSCTX_BIN, by default
 * ../e2e/ beside this test ($(B)/tests/e2e/); one missing is a SKIP.
 * x86-64 only (thread pointer, relocations, the DTV's layout).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest/kselftest_harness.h"
#include "../../tools/collect.h"
#include "../../tools/tlsctx.h"

#define TL_THREADS	2
#define TL_CAP		16

/* ---- Running a test program ---- */

struct tl_child {
	pid_t pid;
	FILE *out;
	int ready;
	int nthreads;
	struct {
		long tid;
		uint64_t tp, var;
	} th[TL_THREADS];
};

/* The path of program name (NULL: there is none). */
static const char *tl_path(char *buf, size_t cap, const char *name)
{
	const char *dir = getenv("PLABEL_TLSCTX_BIN");
	char exe[4096], *slash;
	ssize_t n;

	if (name[0] == '/') {
		snprintf(buf, cap, "%s", name);
	} else if (dir && *dir) {
		snprintf(buf, cap, "%s/%s", dir, name);
	} else {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0)
			return NULL;
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (!slash)
			return NULL;
		*slash = '\0';
		/* $(B)/tests/unit/ -> $(B)/tests/e2e/ */
		snprintf(buf, cap, "%s/../e2e/%s", exe, name);
	}
	return access(buf, X_OK) ? NULL : buf;
}

/*
 * Start path with argument arg (preload: LD_PRELOAD for it, or NULL),
 * killed when this test ends. 0 or -errno.
 */
static int tl_start(struct tl_child *c, const char *path, const char *arg,
		    const char *preload)
{
	int p[2];

	memset(c, 0, sizeof(*c));
	c->pid = -1;
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	c->pid = fork();
	if (c->pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (!c->pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (dup2(p[1], 1) < 0)
			_exit(126);
		if (preload)
			setenv("LD_PRELOAD", preload, 1);
		execl(path, path, arg, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	c->out = fdopen(p[0], "r");
	if (!c->out) {
		close(p[0]);
		return -ENOMEM;
	}
	return 0;
}

/* Read the program's lines up to "ready": 0, or -1 when it ended first. */
static int tl_wait_ready(struct tl_child *c)
{
	char line[256];

	while (fgets(line, sizeof(line), c->out)) {
		unsigned long long tp, var;
		long tid;

		if (!strcmp(line, "ready\n")) {
			c->ready = 1;
			return 0;
		}
		if (c->nthreads < TL_THREADS && sscanf(line,
		    "thread %ld %llx %llx", &tid, &tp, &var) == 3) {
			c->th[c->nthreads].tid = tid;
			c->th[c->nthreads].tp = tp;
			c->th[c->nthreads].var = var;
			c->nthreads++;
		}
	}
	return -1;
}

static void tl_stop(struct tl_child *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
		c->pid = -1;
	}
	if (c->out) {
		fclose(c->out);
		c->out = NULL;
	}
}

/*
 * plabel_tls_locate() once the child has exec'ed (before, the reader sees
 * its own image in it and says -EAGAIN): at most 5 s of -EAGAIN, and with
 * loading of -ENOENT too (the dynamic linker has not mapped the library
 * yet).
 */
static int tl_locate(pid_t pid, struct plabel_tls_loc *loc, int loading)
{
	struct timespec ms10 = { 0, 10000000 };
	int i, ret = -EAGAIN;

	for (i = 0; i < 500; i++) {
		ret = plabel_tls_locate(pid, loc);
		if (ret != -EAGAIN && (ret != -ENOENT || !loading))
			break;
		nanosleep(&ms10, NULL);
	}
	return ret;
}

/* Until pid has the C library mapped (its libraries loaded): 0, or -1. */
static int tl_wait_loaded(pid_t pid)
{
	struct timespec ms10 = { 0, 10000000 };
	char maps[64], line[4200];
	int i, found = 0;
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	for (i = 0; i < 500 && !found; i++) {
		f = fopen(maps, "re");
		if (!f)
			return -1;
		while (!found && fgets(line, sizeof(line), f))
			found = strstr(line, "/libc.so") != NULL;
		fclose(f);
		if (!found)
			nanosleep(&ms10, NULL);
	}
	return found ? 0 : -1;
}

static int tl_read(int mem, uint64_t addr, void *buf, size_t len)
{
	return pread(mem, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

static void tl_put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

/*
 * The context of the thread whose pointer is at var, as the module copies
 * it into a record (plabel_uapi.h): its length, or -1.
 */
static int tl_copy_ctx(int mem, uint32_t format, uint64_t var, uint8_t *out)
{
	uint64_t ptr;
	size_t n = 0;

	if (tl_read(mem, var, &ptr, 8) || !ptr)
		return -1;
	if (format == PLABEL_TLSCTX_OTEL_V1) {
		uint16_t size;

		/* the 28-byte head and as much of attrs-data as fits */
		if (tl_read(mem, ptr, out, 28))
			return -1;
		memcpy(&size, out + 26, 2);
		if (size > PLABEL_TLSCTX_BYTES - 28)
			size = PLABEL_TLSCTX_BYTES - 28;
		if (tl_read(mem, ptr + 28, out + 28, size))
			return -1;
		return 28 + size;
	}
	if (format == PLABEL_TLSCTX_CUSTOM_LABELS_V1) {
		/* {storage, count, capacity}; a label: {len, buf} twice */
		uint64_t set[3], l[4];
		size_t i;

		if (tl_read(mem, ptr, set, sizeof(set)))
			return -1;
		for (i = 0; i < set[1] && i < PLABEL_TLSCTX_LABELS; i++) {
			if (tl_read(mem, set[0] + 32 * i, l, sizeof(l)))
				return -1;
			if (!l[1])
				continue;	/* no key */
			if (4 + l[0] + l[2] > PLABEL_TLSCTX_BYTES - n)
				return -1;
			tl_put16(out + n, (uint16_t)l[0]);
			tl_put16(out + n + 2, (uint16_t)l[2]);
			if (tl_read(mem, l[1], out + n + 4, l[0]) ||
			    tl_read(mem, l[3], out + n + 4 + l[0], l[2]))
				return -1;
			n += 4 + l[0] + l[2];
		}
		return (int)n;
	}
	return -1;
}

/* ---- Locating, in each test program ---- */

FIXTURE(prog) {
	struct tl_child c;
	int missing;
};

FIXTURE_VARIANT(prog) {
	const char *name;
	uint32_t format;
	/* 1: PLABEL_TLSCTX_DTV expected, 0: not expected, -1: either */
	int dtv;
};

FIXTURE_VARIANT_ADD(prog, otel_exe) {
	.name = "tlsctx_otel_exe",
	.format = PLABEL_TLSCTX_OTEL_V1,
	.dtv = 0,
};

FIXTURE_VARIANT_ADD(prog, otel_desc) {
	.name = "tlsctx_otel_desc",
	.format = PLABEL_TLSCTX_OTEL_V1,
	.dtv = -1,
};

FIXTURE_VARIANT_ADD(prog, otel_gd) {
	.name = "tlsctx_otel_gd",
	.format = PLABEL_TLSCTX_OTEL_V1,
	.dtv = -1,
};

FIXTURE_VARIANT_ADD(prog, otel_dlopen) {
	.name = "tlsctx_otel_dlopen",
	.format = PLABEL_TLSCTX_OTEL_V1,
	.dtv = 1,
};

FIXTURE_VARIANT_ADD(prog, otel_dlsmall) {
	.name = "tlsctx_otel_dlsmall",
	.format = PLABEL_TLSCTX_OTEL_V1,
	.dtv = -1,
};

FIXTURE_VARIANT_ADD(prog, cl_exe) {
	.name = "tlsctx_cl_exe",
	.format = PLABEL_TLSCTX_CUSTOM_LABELS_V1,
	.dtv = 0,
};

FIXTURE_VARIANT_ADD(prog, cl_lib) {
	.name = "tlsctx_cl_lib",
	.format = PLABEL_TLSCTX_CUSTOM_LABELS_V1,
	.dtv = -1,
};

/* a library without .gnu.hash: its symbols compared one by one */
FIXTURE_VARIANT_ADD(prog, otel_sysv) {
	.name = "tlsctx_otel_sysv",
	.format = PLABEL_TLSCTX_OTEL_V1,
	.dtv = -1,
};

/* libplabel.so beside the test programs' directory: $(B)/lib/ */
static const char *tl_libplabel(char *buf, size_t cap)
{
	char dir[4096];

	if (!tl_path(dir, sizeof(dir), "tlsctx_otel_exe"))
		return NULL;
	*strrchr(dir, '/') = '\0';
	snprintf(buf, cap, "%s/../../lib/libplabel.so.1", dir);
	return access(buf, R_OK) ? NULL : buf;
}

FIXTURE_SETUP(prog)
{
	char path[4200];

	self->c.pid = -1;
	if (!tl_path(path, sizeof(path), variant->name)) {
		self->missing = 1;
		return;
	}
	/* long enough for the test, which kills it */
	ASSERT_EQ(0, tl_start(&self->c, path, "20", NULL));
}

FIXTURE_TEARDOWN(prog)
{
	tl_stop(&self->c);
}

TEST_F(prog, locate)
{
	struct plabel_tctx_stats st = { 0 };
	struct plabel_otel_keymap km = { 0 };
	struct plabel_tctx_label *out;
	struct plabel_tls_loc loc;
	char mem_path[64];
	int i, mem, ret, saw_alpha = 0, saw_beta = 0;

	if (self->missing)
		SKIP(return, "%s not built", variant->name);
	ASSERT_EQ(0, tl_wait_ready(&self->c));
	ASSERT_EQ(TL_THREADS, self->c.nthreads);

	ret = tl_locate(self->c.pid, &loc, 0);
	if (ret == -EACCES || ret == -EPERM)
		SKIP(return, "the process's memory is not readable (ptrace)");
	ASSERT_EQ(0, ret);
	TH_LOG("%s: format %u flags %#x offset %lld module %llu",
	       variant->name, loc.format, loc.flags, (long long)loc.offset,
	       (unsigned long long)loc.module);
	ASSERT_EQ(variant->format, loc.format);
	if (variant->dtv >= 0)
		ASSERT_EQ(variant->dtv ? PLABEL_TLSCTX_DTV : 0,
			  loc.flags & PLABEL_TLSCTX_DTV);

	snprintf(mem_path, sizeof(mem_path), "/proc/%d/mem", self->c.pid);
	mem = open(mem_path, O_RDONLY | O_CLOEXEC);
	if (mem < 0 && (errno == EACCES || errno == EPERM))
		SKIP(return, "the process's memory is not readable (ptrace)");
	ASSERT_LE(0, mem);
	if (variant->format == PLABEL_TLSCTX_OTEL_V1) {
		ASSERT_EQ(0, plabel_otel_keymap_read(self->c.pid, &km));
		ASSERT_EQ(1, km.schema_ok);
		ASSERT_EQ(2, km.nkeys);
		ASSERT_NE(NULL, km.keys[0]);
		ASSERT_NE(NULL, km.keys[1]);
		ASSERT_STREQ("endpoint", km.keys[0]);
		ASSERT_STREQ("tenant", km.keys[1]);
		ASSERT_NE(0, km.published_at_ns);
	} else {
		ASSERT_EQ(-ENOENT, plabel_otel_keymap_read(self->c.pid, &km));
	}

	out = calloc(TL_CAP, sizeof(*out));
	ASSERT_NE(NULL, out);
	for (i = 0; i < self->c.nthreads; i++) {
		uint8_t blob[PLABEL_TLSCTX_BYTES];
		int len, otel = variant->format == PLABEL_TLSCTX_OTEL_V1;
		size_t n, a = otel ? 2 : 0;

		TH_LOG("thread %ld tp %#llx var %#llx", self->c.th[i].tid,
		       (unsigned long long)self->c.th[i].tp,
		       (unsigned long long)self->c.th[i].var);
		ASSERT_EQ(self->c.th[i].var,
			  plabel_tls_addr(mem, &loc, self->c.th[i].tp));

		/* what the module would copy decodes to what was set */
		len = tl_copy_ctx(mem, variant->format, self->c.th[i].var,
				  blob);
		ASSERT_LT(0, len);
		n = plabel_tctx_labels(variant->format, 0, blob, (uint32_t)len,
				       &km, out, TL_CAP, &st);
		ASSERT_LE(1, n);
		if (n == a + 2) {
			saw_alpha++;
			if (otel) {
				ASSERT_STREQ("trace_id", out[0].key);
				ASSERT_STREQ("0102030405060708090a0b0c0d0e0f10",
					     out[0].value);
				ASSERT_STREQ("span_id", out[1].key);
				ASSERT_STREQ("a1a2a3a4a5a6a7a8", out[1].value);
			}
			ASSERT_STREQ("endpoint", out[a].key);
			ASSERT_STREQ("/alpha", out[a].value);
			ASSERT_STREQ("tenant", out[a + 1].key);
			ASSERT_STREQ("acme", out[a + 1].value);
		} else {
			saw_beta++;
			/* the overridden /gamma is not shown */
			ASSERT_EQ(1, n);
			ASSERT_STREQ("endpoint", out[0].key);
			ASSERT_STREQ("/beta", out[0].value);
		}
	}
	EXPECT_EQ(1, saw_alpha);
	EXPECT_EQ(1, saw_beta);
	EXPECT_EQ(0, st.unknown_keys);
	EXPECT_EQ(0, st.bad_labels);
	free(out);
	plabel_otel_keymap_release(&km);
	close(mem);
}

/*
 * The small library that dlopen() loaded into glibc's optional static
 * TLS: its variable below the thread pointer, not in a block of its own
 * (with another C library the test above still holds, this notes it).
 */
TEST(dlsmall_in_static_tls)
{
	struct tl_child c;
	char path[4200];
	int i;

	if (!tl_path(path, sizeof(path), "tlsctx_otel_dlsmall"))
		SKIP(return, "tlsctx_otel_dlsmall not built");
	ASSERT_EQ(0, tl_start(&c, path, "20", NULL));
	ASSERT_EQ(0, tl_wait_ready(&c));
	for (i = 0; i < c.nthreads; i++)
		if (c.th[i].var > c.th[i].tp ||
		    c.th[i].tp - c.th[i].var > 1 << 20)
			break;
	tl_stop(&c);
	ASSERT_EQ(TL_THREADS, c.nthreads);
	if (i < c.nthreads)
		SKIP(return, "this C library gave it dynamic TLS");
}

/* A process that publishes nothing: -ENOENT. */
static void tl_none(struct __test_metadata *_metadata, const char *name,
		    const char *arg)
{
	struct plabel_tls_loc loc;
	char path[4200];
	struct tl_child c;
	int ret;

	if (!tl_path(path, sizeof(path), name))
		SKIP(return, "%s not built", name);
	ASSERT_EQ(0, tl_start(&c, path, arg, NULL));
	/* not merely too early: with every library mapped */
	ret = tl_wait_loaded(c.pid);
	if (!ret)
		ret = tl_locate(c.pid, &loc, 0);
	tl_stop(&c);
	ASSERT_EQ(-ENOENT, ret);
}

/*
 * The short look: files known, from the kernel's records, to be what a
 * process maps are asked for the symbols without /proc/PID/maps.
 */
TEST(known_none)
{
	char path[4096], two[8192];
	const char *libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
	size_t n;

	/* the C library defines none of them; the file, as this process sees it */
	EXPECT_EQ(1, plabel_tls_known_none(getpid(), libc, 1));
	if (!tl_path(path, sizeof(path), "tlsctx_otel_exe"))
		SKIP(return, "tlsctx_otel_exe not built");
	ASSERT_EQ('/', path[0]);
	/* a program that defines otel_thread_ctx_v1 is not "none" */
	EXPECT_EQ(0, plabel_tls_known_none(getpid(), path, 1));
	/* nor is a list with it anywhere in it */
	n = strlen(libc) + 1;
	memcpy(two, libc, n);
	memcpy(two + n, path, strlen(path) + 1);
	EXPECT_EQ(0, plabel_tls_known_none(getpid(), two, 2));
	EXPECT_EQ(1, plabel_tls_known_none(getpid(), two, 1));
	/* what is not there, or not a path from the root, is not known */
	EXPECT_EQ(0, plabel_tls_known_none(getpid(), "/nonexistent/lib.so", 1));
	EXPECT_EQ(0, plabel_tls_known_none(getpid(), "lib/libc.so.6", 1));
	EXPECT_EQ(0, plabel_tls_known_none(getpid(), "/dev/null", 1));
	/* a process that is gone */
	EXPECT_EQ(0, plabel_tls_known_none(0x3fffffff, libc, 1));
}

TEST(none_in_sleep)
{
	tl_none(_metadata, "/bin/sleep", "20");
}

/* libplabel.a linked in: its variable is not in .dynsym */
TEST(none_in_static_libplabel)
{
	tl_none(_metadata, "workers", "5000");
}

/*
 * libplabel.so exports otel_thread_ctx_v1 (initial-exec: its
 * R_X86_64_TPOFF64 gives a static offset), and is read like any other,
 * for the head only (the span): its attributes are the module's label
 * sets already.
 */
TEST(libplabel_so)
{
	struct plabel_tls_loc loc;
	char path[] = "/bin/sleep", lib[4200];
	const char *pre = tl_libplabel(lib, sizeof(lib));
	struct tl_child c;
	int ret;

	if (!pre)
		SKIP(return, "libplabel.so not built");
	ASSERT_EQ(0, tl_start(&c, path, "20", pre));
	ret = tl_locate(c.pid, &loc, 1);
	tl_stop(&c);
	ASSERT_EQ(0, ret);
	EXPECT_EQ(PLABEL_TLSCTX_OTEL_V1, loc.format);
	EXPECT_EQ(PLABEL_TLSCTX_HEAD, loc.flags);
	EXPECT_GT(0, loc.offset);
}

/*
 * The bookkeeping's own thread looks at a process it is told of and
 * registers it; a registration the module refuses (here: the file is
 * not /dev/plabel, -ENOTTY) is counted as failed, and the profiles say
 * so in their comments.
 */
TEST(tctx_counts_failed_registrations)
{
	struct plabel_prof *profs[PLABEL_PROF_NKINDS];
	uint32_t registered = 0, failed = 0;
	struct plabel_collect *col;
	struct plabel_syms *syms;
	struct plabel_tctx *t;
	struct tl_child c;
	char path[4200];
	size_t k, n;
	int fd, i, said = 0;

	if (!tl_path(path, sizeof(path), "tlsctx_otel_exe"))
		SKIP(return, "tlsctx_otel_exe not built");
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	t = plabel_tctx_new(fd);
	ASSERT_NE(NULL, t);
	ASSERT_EQ(0, tl_start(&c, path, "20", NULL));
	ASSERT_EQ(0, tl_wait_ready(&c));
	plabel_tctx_watch(t, (uint32_t)c.pid);
	for (i = 0; i < 500 && !failed; i++) {
		usleep(10000);
		plabel_tctx_counts(t, &registered, &failed);
	}
	tl_stop(&c);
	EXPECT_EQ(1, failed);
	EXPECT_EQ(0, registered);

	syms = plabel_syms_new();
	ASSERT_NE(NULL, syms);
	col = plabel_collect_new(syms, 0);
	ASSERT_NE(NULL, col);
	plabel_collect_set_tctx(col, t);
	ASSERT_EQ(0, plabel_collect_finish(col, 1, 2, profs));
	n = plabel_prof_num_comments(profs[PLABEL_PROF_CPU]);
	for (k = 0; k < n; k++)
		said |= !strcmp(plabel_prof_comment(profs[PLABEL_PROF_CPU], k),
				"processes whose thread context could not be registered: 1");
	EXPECT_TRUE(said);
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		plabel_prof_free(profs[k]);
	plabel_collect_free(col);
	plabel_syms_free(syms);
	plabel_tctx_free(t);
	close(fd);
}

TEST(gone)
{
	struct plabel_tls_loc loc;
	struct plabel_otel_keymap km = { 0 };
	pid_t pid = fork();
	int ret;

	ASSERT_LE(0, pid);
	if (!pid)
		_exit(0);
	ASSERT_EQ(pid, waitpid(pid, NULL, 0));
	EXPECT_EQ(-ESRCH, plabel_tls_locate(pid, &loc));
	ret = plabel_otel_keymap_read(pid, &km);
	EXPECT_TRUE(ret == -ENOENT || ret == -ESRCH);
}

/* ---- Decoding: OTEP 4947 records ---- */

static const uint8_t tl_trace[16] = {
	0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
	0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10,
};
static const uint8_t tl_span[8] = {
	0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8,
};

/* A record's head: 28 bytes; attrs-data-size set by tl_otel_end(). */
static size_t tl_otel_head(uint8_t *r, const uint8_t *trace,
			   const uint8_t *span, uint8_t valid, uint8_t flags)
{
	memset(r, 0, 28);
	if (trace)
		memcpy(r, trace, 16);
	if (span)
		memcpy(r + 16, span, 8);
	r[24] = valid;
	r[25] = flags;
	return 28;
}

static size_t tl_otel_attr(uint8_t *r, size_t n, uint8_t key,
			   const char *v, size_t len)
{
	r[n] = key;
	r[n + 1] = (uint8_t)len;
	memcpy(r + n + 2, v, len);
	return n + 2 + len;
}

static size_t tl_otel_end(uint8_t *r, size_t n)
{
	tl_put16(r + 26, (uint16_t)(n - 28));
	return n;
}

/* The key map of the test programs: endpoint, tenant. */
static void tl_keymap(struct plabel_otel_keymap *km)
{
	memset(km, 0, sizeof(*km));
	km->schema_ok = 1;
	km->nkeys = 2;
	km->keys[0] = strdup("endpoint");
	km->keys[1] = strdup("tenant");
}

FIXTURE(otel) {
	struct plabel_otel_keymap km;
	struct plabel_tctx_stats st;
	struct plabel_tctx_label out[TL_CAP];
	uint8_t r[PLABEL_TLSCTX_BYTES];
};

FIXTURE_SETUP(otel)
{
	tl_keymap(&self->km);
	ASSERT_NE(NULL, self->km.keys[0]);
	ASSERT_NE(NULL, self->km.keys[1]);
}

FIXTURE_TEARDOWN(otel)
{
	plabel_otel_keymap_release(&self->km);
}

static size_t tl_otel(FIXTURE_DATA(otel) *self, size_t len)
{
	return plabel_tctx_labels(PLABEL_TLSCTX_OTEL_V1, 0, self->r,
				  (uint32_t)len, &self->km, self->out, TL_CAP,
				  &self->st);
}

/* The layout, byte by byte: a span and two attributes. */
TEST_F(otel, span_and_attributes)
{
	static const uint8_t rec[] = {
		/* trace-id */
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10,
		/* span-id */
		0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8,
		/* valid, trace-flags, attrs-data-size (14, host order) */
		0x01, 0x01, 14, 0,
		/* key 0 "/alpha", key 1 "acme" */
		0, 6, '/', 'a', 'l', 'p', 'h', 'a',
		1, 4, 'a', 'c', 'm', 'e',
	};
	size_t n;

	memcpy(self->r, rec, sizeof(rec));
	n = tl_otel(self, sizeof(rec));
	ASSERT_EQ(4, n);
	EXPECT_STREQ("trace_id", self->out[0].key);
	EXPECT_STREQ("0102030405060708090a0b0c0d0e0f10", self->out[0].value);
	EXPECT_STREQ("span_id", self->out[1].key);
	EXPECT_STREQ("a1a2a3a4a5a6a7a8", self->out[1].value);
	EXPECT_STREQ("endpoint", self->out[2].key);
	EXPECT_STREQ("/alpha", self->out[2].value);
	EXPECT_STREQ("tenant", self->out[3].key);
	EXPECT_STREQ("acme", self->out[3].value);
	EXPECT_EQ(1, self->st.contexts);
	EXPECT_EQ(0, self->st.unknown_keys);
	EXPECT_EQ(0, self->st.bad_labels);
	EXPECT_EQ(0, self->st.partial);
}

/* High nibbles and bytes above 0x7f: lowercase, zero-padded. */
TEST_F(otel, hex_ids)
{
	static const uint8_t t[16] = {
		0xff, 0x00, 0xab, 0xcd, 0xef, 0x10, 0x09, 0x90,
		0x7f, 0x80, 0x01, 0xfe, 0x00, 0x00, 0x00, 0x01,
	};
	static const uint8_t s[8] = { 0, 0, 0, 0, 0, 0, 0, 0x0a };
	size_t n;

	n = tl_otel_end(self->r, tl_otel_head(self->r, t, s, 1, 0));
	ASSERT_EQ(2, tl_otel(self, n));
	EXPECT_STREQ("ff00abcdef1009907f8001fe00000001", self->out[0].value);
	EXPECT_STREQ("000000000000000a", self->out[1].value);
}

TEST_F(otel, zero_trace_id_no_span_labels)
{
	size_t n = tl_otel_head(self->r, NULL, tl_span, 1, 1);

	n = tl_otel_end(self->r, tl_otel_attr(self->r, n, 0, "/beta", 5));
	ASSERT_EQ(1, tl_otel(self, n));
	EXPECT_STREQ("endpoint", self->out[0].key);
	EXPECT_STREQ("/beta", self->out[0].value);
}

TEST_F(otel, not_valid)
{
	size_t n = tl_otel_head(self->r, tl_trace, tl_span, 0, 1);

	n = tl_otel_end(self->r, tl_otel_attr(self->r, n, 0, "/beta", 5));
	EXPECT_EQ(0, tl_otel(self, n));
	self->r[24] = 2;
	EXPECT_EQ(0, tl_otel(self, n));
	/* a head cut short */
	self->r[24] = 1;
	EXPECT_EQ(0, tl_otel(self, 27));
}

TEST_F(otel, unknown_key_skipped)
{
	size_t n = tl_otel_head(self->r, NULL, NULL, 1, 0);

	n = tl_otel_attr(self->r, n, 7, "x", 1);
	n = tl_otel_attr(self->r, n, 1, "acme", 4);
	n = tl_otel_attr(self->r, n, 2, "y", 1);
	n = tl_otel_end(self->r, n);
	ASSERT_EQ(1, tl_otel(self, n));
	EXPECT_STREQ("tenant", self->out[0].key);
	EXPECT_STREQ("acme", self->out[0].value);
	EXPECT_EQ(2, self->st.unknown_keys);
	EXPECT_EQ(0, self->st.bad_labels);
}

/* The record's copy ends inside the last entry: the entry is left out. */
TEST_F(otel, cut_entry_ignored)
{
	size_t n = tl_otel_head(self->r, NULL, NULL, 1, 0);

	n = tl_otel_attr(self->r, n, 0, "/alpha", 6);
	n = tl_otel_attr(self->r, n, 1, "acme", 4);
	n = tl_otel_end(self->r, n);
	/* the copy has 3 of the value's 4 bytes */
	ASSERT_EQ(1, tl_otel(self, n - 1));
	EXPECT_STREQ("/alpha", self->out[0].value);
	/* and only the entry's head */
	ASSERT_EQ(1, tl_otel(self, n - 4));
	/* and half of the head */
	ASSERT_EQ(1, tl_otel(self, n - 5));
	EXPECT_STREQ("endpoint", self->out[0].key);
}

/* attrs-data-size ends inside an entry: the bytes past it are not read. */
TEST_F(otel, size_ends_inside_entry)
{
	size_t n = tl_otel_head(self->r, NULL, NULL, 1, 0);

	n = tl_otel_attr(self->r, n, 0, "/alpha", 6);
	n = tl_otel_attr(self->r, n, 1, "acme", 4);
	tl_put16(self->r + 26, (uint16_t)(n - 28 - 2));
	ASSERT_EQ(1, tl_otel(self, n));
	EXPECT_STREQ("endpoint", self->out[0].key);
	EXPECT_STREQ("/alpha", self->out[0].value);
	/* attrs-data-size 0: no attributes, whatever follows */
	tl_put16(self->r + 26, 0);
	EXPECT_EQ(0, tl_otel(self, n));
}

TEST_F(otel, repeated_key_last_wins)
{
	size_t n = tl_otel_head(self->r, NULL, NULL, 1, 0);

	n = tl_otel_attr(self->r, n, 0, "/gamma", 6);
	n = tl_otel_attr(self->r, n, 1, "acme", 4);
	n = tl_otel_attr(self->r, n, 0, "/beta", 5);
	n = tl_otel_end(self->r, n);
	ASSERT_EQ(2, tl_otel(self, n));
	EXPECT_STREQ("endpoint", self->out[0].key);
	EXPECT_STREQ("/beta", self->out[0].value);
	EXPECT_STREQ("tenant", self->out[1].key);
	EXPECT_STREQ("acme", self->out[1].value);
}

/* A longer value first, a shorter one last: no bytes of the first left. */
TEST_F(otel, repeated_key_shorter_last)
{
	size_t n = tl_otel_head(self->r, NULL, NULL, 1, 0);

	n = tl_otel_attr(self->r, n, 0, "/longer/path", 12);
	n = tl_otel_attr(self->r, n, 0, "/b", 2);
	n = tl_otel_end(self->r, n);
	ASSERT_EQ(1, tl_otel(self, n));
	EXPECT_STREQ("/b", self->out[0].value);
}

TEST_F(otel, control_byte_left_out)
{
	size_t n = tl_otel_head(self->r, NULL, NULL, 1, 0);

	n = tl_otel_attr(self->r, n, 0, "/a\001b", 4);
	n = tl_otel_attr(self->r, n, 1, "acme", 4);
	n = tl_otel_attr(self->r, n, 1, "ac\177e", 4);
	n = tl_otel_end(self->r, n);
	ASSERT_EQ(1, tl_otel(self, n));
	EXPECT_STREQ("tenant", self->out[0].key);
	EXPECT_STREQ("acme", self->out[0].value);
	EXPECT_EQ(2, self->st.bad_labels);
	EXPECT_EQ(0, self->st.unknown_keys);
}

/* A value of 255 bytes, the most an entry holds, whole. */
TEST_F(otel, longest_value)
{
	char v[255];
	size_t n = tl_otel_head(self->r, NULL, NULL, 1, 0);

	memset(v, 'v', sizeof(v));
	n = tl_otel_end(self->r, tl_otel_attr(self->r, n, 1, v, sizeof(v)));
	ASSERT_EQ(1, tl_otel(self, n));
	EXPECT_EQ(255, strlen(self->out[0].value));
	EXPECT_EQ(0, memcmp(v, self->out[0].value, 255));
}

/* Without a key map, or one without the schema, no attributes. */
TEST_F(otel, no_key_map)
{
	size_t n = tl_otel_head(self->r, tl_trace, tl_span, 1, 1);

	n = tl_otel_end(self->r, tl_otel_attr(self->r, n, 0, "/alpha", 6));
	ASSERT_EQ(2, plabel_tctx_labels(PLABEL_TLSCTX_OTEL_V1, 0, self->r,
					(uint32_t)n, NULL, self->out, TL_CAP,
					NULL));
	EXPECT_STREQ("trace_id", self->out[0].key);
	EXPECT_STREQ("span_id", self->out[1].key);
	self->km.schema_ok = 0;
	ASSERT_EQ(2, tl_otel(self, n));
	EXPECT_STREQ("span_id", self->out[1].key);
}

TEST_F(otel, at_most_cap)
{
	size_t n = tl_otel_head(self->r, tl_trace, tl_span, 1, 1);

	n = tl_otel_attr(self->r, n, 0, "/alpha", 6);
	n = tl_otel_end(self->r, tl_otel_attr(self->r, n, 1, "acme", 4));
	self->out[3].key[0] = 'X';
	ASSERT_EQ(3, plabel_tctx_labels(PLABEL_TLSCTX_OTEL_V1, 0, self->r,
					(uint32_t)n, &self->km, self->out, 3,
					NULL));
	EXPECT_STREQ("endpoint", self->out[2].key);
	EXPECT_EQ('X', self->out[3].key[0]);
}

TEST_F(otel, stats_count_contexts_and_partial)
{
	size_t n = tl_otel_head(self->r, NULL, NULL, 1, 0);

	n = tl_otel_end(self->r, n);
	EXPECT_EQ(0, tl_otel(self, n));
	EXPECT_EQ(0, plabel_tctx_labels(PLABEL_TLSCTX_OTEL_V1,
					PLABEL_TLSCTX_PARTIAL, self->r,
					(uint32_t)n, &self->km, self->out,
					TL_CAP, &self->st));
	EXPECT_EQ(2, self->st.contexts);
	EXPECT_EQ(1, self->st.partial);
	/* an unknown format labels nothing */
	EXPECT_EQ(0, plabel_tctx_labels(7, 0, self->r, (uint32_t)n, &self->km,
					self->out, TL_CAP, NULL));
}

/* ---- Decoding: custom-labels v1, as the module encodes it ---- */

static size_t tl_cl(uint8_t *b, size_t n, const char *k, size_t kl,
		    const char *v, size_t vl)
{
	tl_put16(b + n, (uint16_t)kl);
	tl_put16(b + n + 2, (uint16_t)vl);
	memcpy(b + n + 4, k, kl);
	memcpy(b + n + 4 + kl, v, vl);
	return n + 4 + kl + vl;
}

static size_t tl_cl_labels(const uint8_t *b, size_t len,
			   struct plabel_tctx_label *out,
			   struct plabel_tctx_stats *st)
{
	return plabel_tctx_labels(PLABEL_TLSCTX_CUSTOM_LABELS_V1, 0, b,
				  (uint32_t)len, NULL, out, TL_CAP, st);
}

TEST(cl_layout)
{
	/* u16 key_len, u16 value_len, key, value; packed */
	static const uint8_t b[] = {
		8, 0, 6, 0, 'e', 'n', 'd', 'p', 'o', 'i', 'n', 't',
		'/', 'a', 'l', 'p', 'h', 'a',
		6, 0, 4, 0, 't', 'e', 'n', 'a', 'n', 't', 'a', 'c', 'm', 'e',
	};
	struct plabel_tctx_label out[TL_CAP];
	struct plabel_tctx_stats st = { 0 };

	ASSERT_EQ(2, tl_cl_labels(b, sizeof(b), out, &st));
	EXPECT_STREQ("endpoint", out[0].key);
	EXPECT_STREQ("/alpha", out[0].value);
	EXPECT_STREQ("tenant", out[1].key);
	EXPECT_STREQ("acme", out[1].value);
	EXPECT_EQ(1, st.contexts);
	EXPECT_EQ(0, st.bad_labels);
}

TEST(cl_first_wins)
{
	struct plabel_tctx_label out[TL_CAP];
	uint8_t b[256];
	size_t n = 0;

	n = tl_cl(b, n, "endpoint", 8, "/beta", 5);
	n = tl_cl(b, n, "tenant", 6, "acme", 4);
	n = tl_cl(b, n, "endpoint", 8, "/gamma", 6);
	ASSERT_EQ(2, tl_cl_labels(b, n, out, NULL));
	EXPECT_STREQ("endpoint", out[0].key);
	EXPECT_STREQ("/beta", out[0].value);
	EXPECT_STREQ("tenant", out[1].key);
	EXPECT_STREQ("acme", out[1].value);
}

TEST(cl_empty_key_skipped)
{
	struct plabel_tctx_label out[TL_CAP];
	struct plabel_tctx_stats st = { 0 };
	uint8_t b[256];
	size_t n = 0;

	n = tl_cl(b, n, "", 0, "keyless", 7);
	n = tl_cl(b, n, "endpoint", 8, "/x", 2);
	ASSERT_EQ(1, tl_cl_labels(b, n, out, &st));
	EXPECT_STREQ("endpoint", out[0].key);
	EXPECT_STREQ("/x", out[0].value);
	EXPECT_EQ(1, st.bad_labels);
}

TEST(cl_control_bytes_left_out)
{
	struct plabel_tctx_label out[TL_CAP];
	struct plabel_tctx_stats st = { 0 };
	uint8_t b[256];
	size_t n = 0;

	n = tl_cl(b, n, "end\npoint", 9, "/x", 2);
	n = tl_cl(b, n, "tenant", 6, "a\tb", 3);
	n = tl_cl(b, n, "endpoint", 8, "/y", 2);
	ASSERT_EQ(1, tl_cl_labels(b, n, out, &st));
	EXPECT_STREQ("endpoint", out[0].key);
	EXPECT_STREQ("/y", out[0].value);
	EXPECT_EQ(2, st.bad_labels);
}

TEST(cl_cut_entry_ignored)
{
	struct plabel_tctx_label out[TL_CAP];
	uint8_t b[256];
	size_t n = 0, i;

	n = tl_cl(b, n, "endpoint", 8, "/x", 2);
	n = tl_cl(b, n, "tenant", 6, "acme", 4);
	/* every length that cuts the second entry */
	for (i = n - 1; i > n - 14; i--) {
		ASSERT_EQ(1, tl_cl_labels(b, i, out, NULL));
		EXPECT_STREQ("endpoint", out[0].key);
		EXPECT_STREQ("/x", out[0].value);
	}
	EXPECT_EQ(0, tl_cl_labels(b, 3, out, NULL));
	EXPECT_EQ(0, tl_cl_labels(b, 0, out, NULL));
}

TEST(cl_empty_value)
{
	struct plabel_tctx_label out[TL_CAP];
	uint8_t b[64];
	size_t n = tl_cl(b, 0, "endpoint", 8, "", 0);

	ASSERT_EQ(1, tl_cl_labels(b, n, out, NULL));
	EXPECT_STREQ("endpoint", out[0].key);
	EXPECT_STREQ("", out[0].value);
}

TEST_HARNESS_MAIN
