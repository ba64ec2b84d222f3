// SPDX-License-Identifier: GPL-2.0
/*
 * libplabel with the module: the labels the kernel reports for a thread
 * (PLABEL_IOC_LABELS_GET on a file of our own) are the ones the library
 * set through plabel_set, plabel_switch and plabel_do; inheritance into
 * pthread_create'd threads, fork children and exec'd programs; clearing
 * inherited labels; sets released by the library free kernel quota.
 * Linked with the static libplabel.a.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <plabel.h>
#include "plabel_uapi.h"
#include "kselftest/kselftest_harness.h"

/*
 * Some tests here wait on the module's deferred work (sets_released) or
 * make thousands of calls (random_kernel_agrees): a few seconds each, but
 * on the debugging kernel in a guest whose host is busy, over the
 * harness's 30. The runner's limit per program still bounds the whole.
 */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 150

#define DEV		"/dev/plabel"
#define EXEC_ENV	"PLABEL_LIB_TEST_EXPECT"
#define SYSCTL		"/proc/sys/kernel/plabel/"

#define NEED_MODULE() do { \
	if (access(DEV, F_OK)) \
		SKIP(return, DEV " absent: module not loaded"); \
} while (0)

/*
 * What the kernel says the calling thread's labels are, as "k=v,k=v" (its
 * order: sorted by key), "" for none, "error N" on failure.
 */
static const char *kernel_labels(char *out, size_t len)
{
	struct plabel_labels_get_args a;
	struct plabel_label *lab;
	size_t off = 0;
	char *buf = NULL;
	uint32_t i;
	int fd, r;

	out[0] = '\0';
	fd = open(DEV, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(out, len, "error open %d", errno);
		return out;
	}
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	r = ioctl(fd, PLABEL_IOC_LABELS_GET, &a);
	if (r < 0 && errno == ERANGE) {
		buf = malloc(a.buf_len);
		a.buf = (uintptr_t)buf;
		r = ioctl(fd, PLABEL_IOC_LABELS_GET, &a);
	}
	if (r < 0) {
		snprintf(out, len, "error %d", errno);
		goto out;
	}
	lab = (struct plabel_label *)buf;
	for (i = 0; i < a.count; i++)
		off += snprintf(out + off, len - off, "%s%s=%s", i ? "," : "",
				(const char *)(uintptr_t)lab[i].key,
				(const char *)(uintptr_t)lab[i].value);
out:
	free(buf);
	close(fd);
	return out;
}

/* What the library says, in the same format. */
static const char *lib_labels(char *out, size_t len)
{
	struct plabel_kv kv[64];
	size_t off = 0;
	int n, i;

	out[0] = '\0';
	n = plabel_get(kv, 64);
	if (n < 0)
		snprintf(out, len, "error %d", n);
	for (i = 0; i < n && i < 64; i++)
		off += snprintf(out + off, len - off, "%s%s=%s", i ? "," : "",
				kv[i].key, kv[i].value);
	return out;
}

static char kbuf[4096], lbuf[4096];
#define KERNEL()	kernel_labels(kbuf, sizeof(kbuf))
#define LIB()		lib_labels(lbuf, sizeof(lbuf))

/*
 * A program exec'd by a test: compare the kernel's view of its labels with
 * the expectation in the environment and exit 0 (equal) or 1.
 */
__attribute__((constructor)) static void exec_check(void)
{
	const char *want = getenv(EXEC_ENV);
	char got[4096];

	if (!want)
		return;
	kernel_labels(got, sizeof(got));
	if (strcmp(want, got)) {
		fprintf(stderr, "exec'd: want '%s' kernel '%s'\n", want, got);
		_exit(1);
	}
	/* The library's first call recovers them. */
	lib_labels(got, sizeof(got));
	if (strcmp(want, got)) {
		fprintf(stderr, "exec'd: want '%s' library '%s'\n", want, got);
		_exit(2);
	}
	_exit(0);
}

TEST(available)
{
	NEED_MODULE();
	EXPECT_EQ(1, plabel_available());
}

TEST(kernel_sees_set)
{
	NEED_MODULE();
	EXPECT_STREQ("", KERNEL());
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "tenant", "acme" },
						      { "endpoint", "/a" } },
				2));
	EXPECT_STREQ("endpoint=/a,tenant=acme", KERNEL());
	EXPECT_STREQ(LIB(), KERNEL());
	/* Again from the cache, and a different set. */
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "x", "1" } }, 1));
	EXPECT_STREQ("x=1", KERNEL());
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "endpoint", "/a" },
						      { "tenant", "acme" } },
				2));
	EXPECT_STREQ("endpoint=/a,tenant=acme", KERNEL());
	ASSERT_EQ(0, plabel_clear());
	EXPECT_STREQ("", KERNEL());
}

TEST(kernel_sees_switch)
{
	struct plabel_labels *a, *b;

	NEED_MODULE();
	a = plabel_labels_new((struct plabel_kv[]){ { "h", "a" } }, 1);
	b = plabel_labels_new((struct plabel_kv[]){ { "h", "b" },
						    { "i", "2" } }, 2);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, plabel_switch(a));
	EXPECT_STREQ("h=a", KERNEL());
	ASSERT_EQ(0, plabel_switch(b));
	EXPECT_STREQ("h=b,i=2", KERNEL());
	EXPECT_STREQ(LIB(), KERNEL());
	ASSERT_EQ(0, plabel_switch(NULL));
	EXPECT_STREQ("", KERNEL());
	plabel_labels_free(a);
	plabel_labels_free(b);
}

static char in_fn[4096];

static void capture(void *arg)
{
	snprintf(in_fn, sizeof(in_fn), "%s", KERNEL());
}

static void nested(void *arg)
{
	plabel_do((struct plabel_kv[]){ { "b", "inner" } }, 1, capture, NULL);
	if (strcmp(KERNEL(), "a=1,b=outer"))
		snprintf(in_fn, sizeof(in_fn), "bad restore: %s", KERNEL());
}

TEST(kernel_sees_do)
{
	NEED_MODULE();
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "a", "1" } }, 1));
	EXPECT_EQ(0, plabel_do((struct plabel_kv[]){ { "b", "2" } }, 1,
			       capture, NULL));
	EXPECT_STREQ("a=1,b=2", in_fn);
	EXPECT_STREQ("a=1", KERNEL());
	EXPECT_EQ(0, plabel_do((struct plabel_kv[]){ { "b", "outer" } }, 1,
			       nested, NULL));
	EXPECT_STREQ("a=1,b=inner", in_fn);
	EXPECT_STREQ("a=1", KERNEL());
	ASSERT_EQ(0, plabel_clear());
	EXPECT_EQ(0, plabel_do((struct plabel_kv[]){ { "c", "3" } }, 1,
			       capture, NULL));
	EXPECT_STREQ("c=3", in_fn);
	EXPECT_STREQ("", KERNEL());
}

TEST(kernel_limits)
{
	struct plabel_kv many[PLABEL_MAX_LABELS + 1];
	char names[PLABEL_MAX_LABELS + 1][8];
	unsigned int max = 16;
	FILE *f;
	int i;

	NEED_MODULE();
	f = fopen(SYSCTL "max_labels", "re");
	if (f) {
		if (fscanf(f, "%u", &max) != 1)
			max = 16;
		fclose(f);
	}
	ASSERT_GE(PLABEL_MAX_LABELS, (int)max);
	for (i = 0; i <= (int)max; i++) {
		snprintf(names[i], sizeof(names[i]), "k%02d", i);
		many[i].key = names[i];
		many[i].value = "v";
	}
	EXPECT_EQ(0, plabel_set(many, max));
	EXPECT_EQ((int)max, plabel_get(NULL, 0));
	EXPECT_EQ(-E2BIG, plabel_set(many, max + 1));
	EXPECT_EQ((int)max, plabel_get(NULL, 0));
	EXPECT_EQ(0, plabel_clear());
}

struct child_view {
	char lib[4096];
	char kernel[4096];
	char after_clear[4096];
	char after_set[4096];
};

static void *thread_main(void *arg)
{
	struct child_view *v = arg;

	/* The first call recovers what the kernel gave the new thread. */
	lib_labels(v->lib, sizeof(v->lib));
	kernel_labels(v->kernel, sizeof(v->kernel));
	plabel_clear();
	kernel_labels(v->after_clear, sizeof(v->after_clear));
	plabel_set((struct plabel_kv[]){ { "thread", "own" } }, 1);
	kernel_labels(v->after_set, sizeof(v->after_set));
	return NULL;
}

TEST(thread_inherits)
{
	struct child_view v;
	pthread_t th;

	NEED_MODULE();
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "job", "parent" },
						      { "n", "1" } }, 2));
	memset(&v, 0, sizeof(v));
	ASSERT_EQ(0, pthread_create(&th, NULL, thread_main, &v));
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_STREQ("job=parent,n=1", v.lib);
	EXPECT_STREQ("job=parent,n=1", v.kernel);
	EXPECT_STREQ("", v.after_clear);
	EXPECT_STREQ("thread=own", v.after_set);
	/* The parent thread is unaffected. */
	EXPECT_STREQ("job=parent,n=1", KERNEL());
	EXPECT_EQ(0, plabel_clear());
}

static void fork_do(void *arg)
{
	int *bad = arg;

	if (strcmp("job=parent,step=child", KERNEL()))
		*bad = 1;
}

TEST(fork_inherits)
{
	struct plabel_labels *h;
	int status;
	pid_t pid;

	NEED_MODULE();
	h = plabel_labels_new((struct plabel_kv[]){ { "handle", "pre" } }, 1);
	ASSERT_NE(NULL, h);
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "job", "parent" } },
				1));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int bad = 0;

		if (strcmp("job=parent", LIB()) ||
		    strcmp("job=parent", KERNEL()))
			_exit(1);
		if (plabel_do((struct plabel_kv[]){ { "step", "child" } }, 1,
			      fork_do, &bad) || bad)
			_exit(2);
		if (strcmp("job=parent", KERNEL()))
			_exit(3);
		/* A handle made before fork, then freed in the child. */
		if (plabel_switch(h) || strcmp("handle=pre", KERNEL()))
			_exit(4);
		if (plabel_clear() || strcmp("", KERNEL()))
			_exit(5);
		plabel_labels_free(h);
		if (plabel_set((struct plabel_kv[]){ { "job", "child" } }, 1) ||
		    strcmp("job=child", KERNEL()))
			_exit(6);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* The child's frees did not drop the parent's sets. */
	EXPECT_STREQ("job=parent", KERNEL());
	EXPECT_EQ(0, plabel_switch(h));
	EXPECT_STREQ("handle=pre", KERNEL());
	EXPECT_EQ(0, plabel_clear());
	plabel_labels_free(h);
}

static int run_self(const char *expect, int do_fork_first_clear)
{
	int status;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (do_fork_first_clear) {
			/* Only slot labels in this process, then exec. */
			plabel_clear();
			plabel_set((struct plabel_kv[]){ { "slot", "only" } },
				   1);
		}
		setenv(EXEC_ENV, expect, 1);
		execl("/proc/self/exe", "lib_test", (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

TEST(exec_keeps_inherited)
{
	NEED_MODULE();
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "run", "exec" } }, 1));
	/* fork + exec: the child's kernel-stored copy survives the exec. */
	EXPECT_EQ(0, run_self("run=exec", 0));
	/* A direct exec drops the slot: only kernel-stored labels remain. */
	EXPECT_EQ(0, run_self("", 1));
	EXPECT_EQ(0, plabel_clear());
}

struct racer {
	pthread_t th;
	int id;
	int bad;
	struct plabel_labels *shared;
};

static void racer_do(void *arg)
{
	struct racer *r = arg;
	char want[64], got[256];

	snprintf(want, sizeof(want), "req=x,worker=%d", r->id);
	if (strcmp(want, kernel_labels(got, sizeof(got))))
		r->bad++;
}

/* Threads switching at once: the kernel sees each one's own labels. */
static void *racer_main(void *arg)
{
	struct racer *r = arg;
	char wid[16], want[64], got[256];
	int i;

	snprintf(wid, sizeof(wid), "%d", r->id);
	for (i = 0; i < 60; i++) {
		if (plabel_set((struct plabel_kv[]){ { "worker", wid } }, 1))
			r->bad++;
		snprintf(want, sizeof(want), "worker=%d", r->id);
		if (strcmp(want, kernel_labels(got, sizeof(got))))
			r->bad++;
		if (plabel_do((struct plabel_kv[]){ { "req", "x" } }, 1,
			      racer_do, r))
			r->bad++;
		if (plabel_switch(r->shared) ||
		    strcmp("shared=1", kernel_labels(got, sizeof(got))))
			r->bad++;
	}
	plabel_clear();
	if (strcmp("", kernel_labels(got, sizeof(got))))
		r->bad++;
	return NULL;
}

TEST(threads_concurrent)
{
	struct racer r[4];
	struct plabel_labels *shared;
	int i;

	NEED_MODULE();
	shared = plabel_labels_new((struct plabel_kv[]){ { "shared", "1" } },
				   1);
	ASSERT_NE(NULL, shared);
	for (i = 0; i < 4; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].id = i;
		r[i].shared = shared;
		ASSERT_EQ(0, pthread_create(&r[i].th, NULL, racer_main, &r[i]));
	}
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(0, pthread_join(r[i].th, NULL));
		EXPECT_EQ(0, r[i].bad);
	}
	plabel_labels_free(shared);
}

static volatile int churn_stop;

/* Interns new sets all the time: the fork handlers' lock is contended. */
static void *churn_main(void *arg)
{
	char val[32];
	long i = 0;

	while (!churn_stop) {
		snprintf(val, sizeof(val), "%ld-%ld", (long)arg, i++ % 50);
		plabel_set((struct plabel_kv[]){ { "churn", val } }, 1);
	}
	return NULL;
}

TEST(fork_while_interning)
{
	pthread_t th[2];
	int i, status, bad = 0;
	pid_t pid;

	NEED_MODULE();
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "main", "1" } }, 1));
	churn_stop = 0;
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, churn_main,
					    (void *)(long)i));
	for (i = 0; i < 10; i++) {
		pid = fork();
		ASSERT_LE(0, pid);
		if (pid == 0) {
			if (strcmp("main=1", KERNEL()) ||
			    strcmp("main=1", LIB()))
				_exit(1);
			if (plabel_set((struct plabel_kv[]){ { "child", "1" } },
				       1) || strcmp("child=1", KERNEL()))
				_exit(2);
			_exit(0);
		}
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			bad++;
	}
	churn_stop = 1;
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_join(th[i], NULL));
	EXPECT_EQ(0, bad);
	EXPECT_STREQ("main=1", KERNEL());
	EXPECT_EQ(0, plabel_clear());
}

/* Random set/do/switch/clear; the kernel must agree after every step. */
static const char *rk_keys[] = { "a", "bb", "c", "endpoint" };
static const char *rk_vals[] = { "", "0", "/api/users", "x" };
static struct plabel_labels *rk_handles[4];
static unsigned long long rk_rng = 0x9e3779b97f4a7c15ULL;
static int rk_steps, rk_bad;

static unsigned int rk_rnd(unsigned int n)
{
	rk_rng ^= rk_rng << 13;
	rk_rng ^= rk_rng >> 7;
	rk_rng ^= rk_rng << 17;
	return (unsigned int)(rk_rng % n);
}

static size_t rk_kvs(struct plabel_kv *kv)
{
	size_t n = 1 + rk_rnd(3), i, j;

	for (i = 0; i < n; i++) {
		kv[i].key = rk_keys[rk_rnd(4)];
		kv[i].value = rk_vals[rk_rnd(4)];
		for (j = 0; j < i; j++)
			if (!strcmp(kv[j].key, kv[i].key))
				break;
		if (j < i)
			n = i--;	/* drop the repeat */
	}
	return n;
}

static void rk_agree(void)
{
	char l[1024], k[1024];

	rk_steps++;
	if (strcmp(lib_labels(l, sizeof(l)), kernel_labels(k, sizeof(k)))) {
		if (!rk_bad++)
			fprintf(stderr, "# step %d: library '%s' kernel '%s'\n",
				rk_steps, l, k);
	}
}

static void rk_run(void *arg)
{
	long depth = (long)arg;
	struct plabel_kv kv[4];
	int i, n = 1 + rk_rnd(3);

	rk_agree();
	for (i = 0; i < n; i++) {
		switch (rk_rnd(depth < 3 ? 5 : 4)) {
		case 0:
			plabel_set(kv, rk_kvs(kv));
			break;
		case 1:
			plabel_switch(rk_handles[rk_rnd(4)]);
			break;
		case 2:
			plabel_clear();
			break;
		case 3:
			plabel_do(NULL, 0, rk_run, (void *)(depth + 1));
			break;
		default:
			plabel_do(kv, rk_kvs(kv), rk_run, (void *)(depth + 1));
			break;
		}
		rk_agree();
	}
}

TEST(random_kernel_agrees)
{
	struct plabel_kv kv[4];
	int i;

	NEED_MODULE();
	for (i = 0; i < 4; i++) {
		rk_handles[i] = plabel_labels_new(kv, i ? rk_kvs(kv) : 0);
		ASSERT_NE(NULL, rk_handles[i]);
	}
	for (i = 0; i < 150; i++)
		rk_run((void *)0L);
	EXPECT_EQ(0, rk_bad);
	TH_LOG("%d steps compared", rk_steps);
	plabel_clear();
	for (i = 0; i < 4; i++)
		plabel_labels_free(rk_handles[i]);
}

static unsigned int read_uint(const char *path)
{
	unsigned int v = 0;
	FILE *f = fopen(path, "re");

	if (f) {
		if (fscanf(f, "%u", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

static int write_uint(const char *path, unsigned int v)
{
	FILE *f = fopen(path, "we");
	int r;

	if (!f)
		return -errno;
	r = fprintf(f, "%u\n", v) > 0 ? 0 : -EIO;
	if (fclose(f))
		r = -errno;
	return r;
}

/* Sets the library lets go of return their quota to the user. */
TEST(sets_released)
{
	const char *q = SYSCTL "max_sets_per_user";
	unsigned int old;
	char val[16];
	int i, err = 0, fails = 0, tries, waits = 0;

	NEED_MODULE();
	old = read_uint(q);
	if (!old || write_uint(q, 200))
		SKIP(return, "cannot set %s", q);
	for (i = 0; i < 500; i++) {
		struct plabel_labels *l;

		snprintf(val, sizeof(val), "%d", i);
		l = plabel_labels_new((struct plabel_kv[]){ { "new", val } },
				      1);
		if (!l || plabel_switch(l)) {
			TH_LOG("plabel_labels_new #%d: %s", i, strerror(errno));
			fails++;
			break;
		}
		plabel_switch(NULL);
		plabel_labels_free(l);
	}
	EXPECT_EQ(0, fails);
	for (i = 0; i < 500 && !fails; i++) {
		snprintf(val, sizeof(val), "%d", i);
		err = plabel_set((struct plabel_kv[]){ { "set", val } }, 1);
		/*
		 * The module returns a set's quota from a work item after
		 * the last put: give it time. Sets the library leaked would
		 * never come back.
		 */
		for (tries = 0; err == -EDQUOT && tries < 100; tries++) {
			usleep(10000);
			err = plabel_set((struct plabel_kv[]){ { "set", val } },
					 1);
		}
		waits += tries;
		if (err) {
			TH_LOG("plabel_set #%d: %d", i, err);
			fails++;
		}
	}
	EXPECT_EQ(0, fails);
	EXPECT_STREQ("set=499", KERNEL());
	if (waits)
		TH_LOG("waited %d times for the module to reap sets", waits);
	plabel_clear();
	write_uint(q, old);
}

TEST_HARNESS_MAIN
