// SPDX-License-Identifier: GPL-2.0
/*
 * The label core of plabel.ko through /dev/plabel: interning and dropping
 * label sets, limits and per-user quotas, every argument error, a thread's
 * labels and its slot, the owner check, inheritance through
 * pthread_create, fork and exec, many short-lived threads, and the live
 * set and task counts in debugfs coming back to where they started.
 *
 * Run as root inside the VM (scripts/plabel-vm); without /dev/plabel every
 * test is skipped. The binary doubles as its own exec helper:
 *   labels_test --expect "k=v,k2=v2"   exit 0 when this thread's labels
 *                                      read back as exactly that ("" none)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "plabel_uapi.h"
#include "kselftest/kselftest_harness.h"
#include "kmod_util.h"
#include "session_util.h"

#define PLABEL_DEBUGFS	"/sys/kernel/debug/plabel/"
#define PLABEL_SYSCTL	"/proc/sys/kernel/plabel/"

/* Users the quota and owner tests switch to. */
#define PLABEL_UID_A	54321
#define PLABEL_UID_B	54322
#define PLABEL_UID_C	54323

static int plabel_open(void)
{
	return open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
}

#define PLABEL_NEED_DEVICE() do {					\
	if (access(PLABEL_DEVICE, F_OK))				\
		SKIP(return, PLABEL_DEVICE " absent: module not loaded"); \
} while (0)

#define PLABEL_NEED_ROOT() do {						\
	if (geteuid())							\
		SKIP(return, "needs root");				\
} while (0)

/* ioctl wrappers: 0 or -errno. */
static int plabel_ioc(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

/* "k=v" strings to a label array; the strings must outlive the array. */
static void plabel_fill(struct plabel_label *l, const char *const *kv,
			int n)
{
	int i;

	for (i = 0; i < n; i++) {
		const char *eq = strchr(kv[i], '=');

		l[i].key = (uintptr_t)kv[i];
		l[i].key_len = eq - kv[i];
		l[i].value = (uintptr_t)(eq + 1);
		l[i].value_len = strlen(eq + 1);
	}
}

static int plabel_new_raw(int fd, struct plabel_label *l, unsigned int n,
			  uint64_t *id)
{
	struct plabel_set_new_args a = {
		.size = sizeof(a), .labels = (uintptr_t)l, .count = n,
	};
	int err = plabel_ioc(fd, PLABEL_IOC_SET_NEW, &a);

	if (!err && id)
		*id = a.id;
	return err;
}

static int plabel_new(int fd, const char *const *kv, int n, uint64_t *id)
{
	struct plabel_label l[PLABEL_MAX_LABELS + 1];

	plabel_fill(l, kv, n);
	return plabel_new_raw(fd, l, n, id);
}

/* A set with one label key=value<i>, distinct for each i. */
static int plabel_new_i(int fd, const char *key, int i, uint64_t *id)
{
	char kv[64];
	const char *p = kv;

	snprintf(kv, sizeof(kv), "%s=value%d", key, i);
	return plabel_new(fd, &p, 1, id);
}

static int plabel_put(int fd, uint64_t id)
{
	struct plabel_set_put_args a = { .size = sizeof(a), .id = id };

	return plabel_ioc(fd, PLABEL_IOC_SET_PUT, &a);
}

static int plabel_use(int fd, uint64_t id)
{
	struct plabel_labels_set_args a = { .size = sizeof(a), .id = id };

	return plabel_ioc(fd, PLABEL_IOC_LABELS_SET, &a);
}

static int plabel_slot(int fd, uint64_t addr)
{
	struct plabel_slot_args a = { .size = sizeof(a), .addr = addr };

	return plabel_ioc(fd, PLABEL_IOC_SLOT_SET, &a);
}

/* This thread's current label set id, 0 for none, or -errno. */
static int64_t plabel_cur(int fd)
{
	struct plabel_labels_get_args a = { .size = sizeof(a) };
	int err = plabel_ioc(fd, PLABEL_IOC_LABELS_GET, &a);

	if (err == -ERANGE || !err)
		return a.id;
	return err;
}

/*
 * This thread's labels as "k=v,k2=v2" (sorted by key, as the kernel
 * returns them), following the -ERANGE protocol. 0 or -errno.
 */
static int plabel_get_str(int fd, char *out, size_t cap, uint64_t *id)
{
	struct plabel_labels_get_args a = { .size = sizeof(a) };
	struct plabel_label *l;
	size_t pos = 0;
	void *buf;
	unsigned int i;
	int err;

	err = plabel_ioc(fd, PLABEL_IOC_LABELS_GET, &a);
	if (err && err != -ERANGE)
		return err;
	out[0] = '\0';
	if (id)
		*id = a.id;
	if (!a.count)
		return a.buf_len ? -EPROTO : 0;
	buf = malloc(a.buf_len);
	if (!buf)
		return -ENOMEM;
	a.buf = (uintptr_t)buf;
	err = plabel_ioc(fd, PLABEL_IOC_LABELS_GET, &a);
	if (err) {
		free(buf);
		return err;
	}
	l = buf;
	for (i = 0; i < a.count; i++) {
		const char *k = (const char *)(uintptr_t)l[i].key;
		const char *v = (const char *)(uintptr_t)l[i].value;

		if (strlen(k) != l[i].key_len || strlen(v) != l[i].value_len) {
			free(buf);
			return -EPROTO;
		}
		pos += snprintf(out + pos, cap > pos ? cap - pos : 0, "%s%s=%s",
				i ? "," : "", k, v);
	}
	free(buf);
	return pos < cap ? 0 : -ENOSPC;
}

/* Sets debugfs "users" charges to uid: 0 when it has no line, -1 absent. */
static int plabel_user_sets(uid_t uid)
{
	unsigned int u, sets;
	unsigned long long bytes;
	char line[128];
	int found = 0;
	FILE *f = fopen(PLABEL_DEBUGFS "users", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%u %u %llu", &u, &sets, &bytes) == 3 &&
		    u == uid && bytes > 0)
			found = sets;
	fclose(f);
	return found;
}

static long plabel_sysctl_get(const char *name)
{
	char path[256], line[64];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), PLABEL_SYSCTL "%s", name);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f))
		v = strtol(line, NULL, 10);
	fclose(f);
	return v;
}

/* 0 or -errno of the write. */
static int plabel_sysctl_set(const char *name, long v)
{
	char path[256], line[64];
	int fd, n, err = 0;

	snprintf(path, sizeof(path), PLABEL_SYSCTL "%s", name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = snprintf(line, sizeof(line), "%ld\n", v);
	if (write(fd, line, n) != n)
		err = -errno;
	close(fd);
	return err;
}

/* Runs fn in a forked child under uid; returns its exit status or -1. */
static int plabel_as_user(uid_t uid, int (*fn)(void *), void *arg)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (!pid) {
		if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
			_exit(100);
		_exit(fn(arg));
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Forks, runs fn in the child, returns its exit status (or -1). */
static int plabel_in_child(int (*fn)(void *), void *arg)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (!pid)
		_exit(fn(arg));
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Exec's this program as the --expect helper; returns its exit status. */
static int plabel_exec_expect(const char *expect)
{
	execl("/proc/self/exe", "labels_test", "--expect", expect,
	      (char *)NULL);
	return 99;
}

/* The fixed address the exec test keeps a slot at, in both programs. */
#define PLABEL_FIXED_SLOT	0x5a5a00000000ULL

static uint64_t *plabel_map_fixed_slot(void)
{
	void *p = mmap((void *)PLABEL_FIXED_SLOT, 4096,
		       PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	return p == (void *)PLABEL_FIXED_SLOT ? p : NULL;
}

/*
 * The helper. With slot_id, it first stores that id at the fixed slot
 * address: a slot registration that wrongly survived exec would then
 * name that set.
 */
static int plabel_expect_main(const char *expect, const char *slot_id)
{
	char got[8192];
	int fd = plabel_open();
	int err;

	if (slot_id) {
		uint64_t *slot = plabel_map_fixed_slot();

		if (!slot) {
			fprintf(stderr, "expect: mmap: %s\n", strerror(errno));
			return 2;
		}
		*slot = strtoull(slot_id, NULL, 0);
	}
	if (fd < 0) {
		fprintf(stderr, "expect: open: %s\n", strerror(errno));
		return 2;
	}
	err = plabel_get_str(fd, got, sizeof(got), NULL);
	if (err) {
		fprintf(stderr, "expect: get: %s\n", strerror(-err));
		return 2;
	}
	if (strcmp(got, expect)) {
		fprintf(stderr, "expect: labels \"%s\", wanted \"%s\"\n", got,
			expect);
		return 1;
	}
	return 0;
}

static const char *const kv_ab[] = { "alpha=1", "beta=2" };
static const char *const kv_ba[] = { "beta=2", "alpha=1" };

TEST(intern_and_put)
{
	uint64_t id, id2;
	int fd;

	PLABEL_NEED_DEVICE();
	fd = plabel_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, plabel_new(fd, kv_ab, 2, &id));
	EXPECT_NE((uint64_t)0, id);
	EXPECT_EQ(0, plabel_put(fd, id));
	EXPECT_EQ(-ENOENT, plabel_put(fd, id));
	/* The set is gone; the same labels get a new id, never the old. */
	ASSERT_EQ(0, plabel_new(fd, kv_ab, 2, &id2));
	EXPECT_NE(id, id2);
	EXPECT_EQ(-ENOENT, plabel_use(fd, id));
	EXPECT_EQ(0, plabel_put(fd, id2));
	/* No labels: id 0, nothing to put. */
	ASSERT_EQ(0, plabel_new(fd, kv_ab, 0, &id));
	EXPECT_EQ((uint64_t)0, id);
	EXPECT_EQ(-ENOENT, plabel_put(fd, 0));
	EXPECT_EQ(-ENOENT, plabel_put(fd, 12345));
	close(fd);
}

TEST(dedup_any_order)
{
	static const char *const kv_other[] = { "alpha=1", "beta=3" };
	static const char *const kv_one[] = { "alpha=1" };
	uint64_t a, b, c, d, e;
	int fd;

	PLABEL_NEED_DEVICE();
	fd = plabel_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, plabel_new(fd, kv_ab, 2, &a));
	ASSERT_EQ(0, plabel_new(fd, kv_ba, 2, &b));
	EXPECT_EQ(a, b);
	ASSERT_EQ(0, plabel_new(fd, kv_other, 2, &c));
	EXPECT_NE(a, c);
	ASSERT_EQ(0, plabel_new(fd, kv_one, 1, &d));
	EXPECT_NE(a, d);
	/* The file holds one reference per set, however often interned. */
	ASSERT_EQ(0, plabel_new(fd, kv_ab, 2, &e));
	EXPECT_EQ(a, e);
	EXPECT_EQ(0, plabel_put(fd, a));
	EXPECT_EQ(-ENOENT, plabel_put(fd, a));
	EXPECT_EQ(0, plabel_put(fd, c));
	EXPECT_EQ(0, plabel_put(fd, d));
	close(fd);
}

TEST(same_id_two_files)
{
	uint64_t a, b;
	int fd1, fd2;

	PLABEL_NEED_DEVICE();
	fd1 = plabel_open();
	fd2 = plabel_open();
	ASSERT_LE(0, fd1);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, plabel_new(fd1, kv_ab, 2, &a));
	ASSERT_EQ(0, plabel_new(fd2, kv_ba, 2, &b));
	EXPECT_EQ(a, b);
	/* fd2's reference keeps the set alive after fd1 drops its own. */
	EXPECT_EQ(0, plabel_put(fd1, a));
	EXPECT_EQ(-ENOENT, plabel_put(fd1, a));
	EXPECT_EQ(0, plabel_use(fd1, a));
	EXPECT_EQ((int64_t)a, plabel_cur(fd1));
	/* The thread's reference keeps it alive after both files drop it. */
	EXPECT_EQ(0, plabel_put(fd2, a));
	EXPECT_EQ((int64_t)a, plabel_cur(fd2));
	EXPECT_EQ(0, plabel_use(fd2, 0));
	EXPECT_EQ(0, plabel_cur(fd2));
	EXPECT_EQ(-ENOENT, plabel_use(fd2, a));
	close(fd1);
	close(fd2);
}

TEST(close_drops_references)
{
	long sets0;
	uint64_t id;
	int fd, i;

	PLABEL_NEED_DEVICE();
	sets0 = su_counter("live_sets");
	if (sets0 < 0)
		SKIP(return, "debugfs counters absent");
	fd = plabel_open();
	ASSERT_LE(0, fd);
	for (i = 0; i < 20; i++)
		ASSERT_EQ(0, plabel_new_i(fd, "close", i, &id));
	EXPECT_EQ(sets0 + 20, su_counter("live_sets"));
	close(fd);
	EXPECT_EQ(sets0, su_counter_wait("live_sets", sets0));
}

TEST(limits)
{
	struct plabel_label l[PLABEL_MAX_LABELS + 1];
	char key[PLABEL_MAX_KEY_LEN + 2], value[PLABEL_MAX_VALUE_LEN + 2];
	char keys[PLABEL_MAX_LABELS + 1][8];
	long max_labels, max_key, max_value;
	uint64_t id;
	int fd, i;

	PLABEL_NEED_DEVICE();
	max_labels = plabel_sysctl_get("max_labels");
	max_key = plabel_sysctl_get("max_key_len");
	max_value = plabel_sysctl_get("max_value_len");
	ASSERT_LT(0, max_labels);
	ASSERT_GE(PLABEL_MAX_LABELS, max_labels);
	ASSERT_GE(PLABEL_MAX_KEY_LEN, max_key);
	ASSERT_GE(PLABEL_MAX_VALUE_LEN, max_value);
	fd = plabel_open();
	ASSERT_LE(0, fd);

	memset(key, 'k', sizeof(key));
	memset(value, 'v', sizeof(value));
	for (i = 0; i <= PLABEL_MAX_LABELS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%02d", i);
		l[i].key = (uintptr_t)keys[i];
		l[i].key_len = strlen(keys[i]);
		l[i].value = (uintptr_t)value;
		l[i].value_len = 1;
	}
	/* Labels per set. */
	EXPECT_EQ(0, plabel_new_raw(fd, l, max_labels, &id));
	EXPECT_EQ(-E2BIG, plabel_new_raw(fd, l, max_labels + 1, &id));
	EXPECT_EQ(-E2BIG, plabel_new_raw(fd, l, 1000000, &id));
	/* Key length. */
	l[0].key = (uintptr_t)key;
	l[0].key_len = max_key;
	EXPECT_EQ(0, plabel_new_raw(fd, l, 1, &id));
	l[0].key_len = max_key + 1;
	EXPECT_EQ(-E2BIG, plabel_new_raw(fd, l, 1, &id));
	l[0].key_len = PLABEL_MAX_KEY_LEN + 1;
	EXPECT_EQ(-E2BIG, plabel_new_raw(fd, l, 1, &id));
	/* Value length; an empty value is fine. */
	l[0].key_len = 1;
	l[0].value_len = max_value;
	EXPECT_EQ(0, plabel_new_raw(fd, l, 1, &id));
	l[0].value_len = max_value + 1;
	EXPECT_EQ(-E2BIG, plabel_new_raw(fd, l, 1, &id));
	l[0].value_len = 0;
	EXPECT_EQ(0, plabel_new_raw(fd, l, 1, &id));

	/* The sysctls move the limits, within their bounds. */
	if (geteuid()) {
		close(fd);
		return;
	}
	EXPECT_EQ(-EINVAL, plabel_sysctl_set("max_labels", 0));
	EXPECT_EQ(-EINVAL, plabel_sysctl_set("max_labels",
					     PLABEL_MAX_LABELS + 1));
	EXPECT_EQ(-EINVAL, plabel_sysctl_set("max_key_len", 0));
	EXPECT_EQ(-EINVAL, plabel_sysctl_set("max_key_len", 256));
	EXPECT_EQ(-EINVAL, plabel_sysctl_set("max_value_len", 4097));
	EXPECT_EQ(-EINVAL, plabel_sysctl_set("stack_size", 12));
	EXPECT_EQ(-EINVAL, plabel_sysctl_set("sample_hz", 0));
	EXPECT_EQ(-EINVAL, plabel_sysctl_set("ring_kb", 8));
	EXPECT_EQ(max_labels, plabel_sysctl_get("max_labels"));
	ASSERT_EQ(0, plabel_sysctl_set("max_labels", 2));
	ASSERT_EQ(0, plabel_sysctl_set("max_key_len", 3));
	ASSERT_EQ(0, plabel_sysctl_set("max_value_len", 0));
	l[0].key = (uintptr_t)keys[0];
	l[0].key_len = 3;
	l[0].value_len = 0;
	l[1].value_len = 0;
	l[2].value_len = 0;
	EXPECT_EQ(0, plabel_new_raw(fd, l, 2, &id));
	EXPECT_EQ(-E2BIG, plabel_new_raw(fd, l, 3, &id));
	l[1].value_len = 1;
	EXPECT_EQ(-E2BIG, plabel_new_raw(fd, l, 2, &id));
	l[1].value_len = 0;
	l[0].key = (uintptr_t)key;
	l[0].key_len = 4;
	EXPECT_EQ(-E2BIG, plabel_new_raw(fd, l, 2, &id));
	EXPECT_EQ(0, plabel_sysctl_set("max_labels", max_labels));
	EXPECT_EQ(0, plabel_sysctl_set("max_key_len", max_key));
	EXPECT_EQ(0, plabel_sysctl_set("max_value_len", max_value));
	/* The ceilings themselves. */
	ASSERT_EQ(0, plabel_sysctl_set("max_labels", PLABEL_MAX_LABELS));
	ASSERT_EQ(0, plabel_sysctl_set("max_key_len", PLABEL_MAX_KEY_LEN));
	ASSERT_EQ(0, plabel_sysctl_set("max_value_len", PLABEL_MAX_VALUE_LEN));
	l[0].key_len = PLABEL_MAX_KEY_LEN;
	l[0].value_len = PLABEL_MAX_VALUE_LEN;
	EXPECT_EQ(0, plabel_new_raw(fd, l, PLABEL_MAX_LABELS, &id));
	EXPECT_EQ(-E2BIG, plabel_new_raw(fd, l, PLABEL_MAX_LABELS + 1, &id));
	EXPECT_EQ(0, plabel_sysctl_set("max_labels", max_labels));
	EXPECT_EQ(0, plabel_sysctl_set("max_key_len", max_key));
	EXPECT_EQ(0, plabel_sysctl_set("max_value_len", max_value));
	close(fd);
}

struct plabel_quota_arg {
	int nsets;		/* sets to create before the limit */
	int value_len;		/* bytes of each value */
	int ready_fd;		/* write a byte when the quota is used up */
	int go_fd;		/* then wait for a byte here */
};

/*
 * As some user: intern distinct sets until -EDQUOT, which must come at
 * set nsets + 1 (or, for nsets == 0, at some point). Checks a known set
 * still interns, and a put frees room. Exit 0 when all held.
 */
static int plabel_quota_user(void *p)
{
	struct plabel_quota_arg *q = p;
	char value[PLABEL_MAX_VALUE_LEN + 1];
	struct plabel_label l = { .key = (uintptr_t)"q", .key_len = 1 };
	uint64_t ids[4096], id;
	int fd = plabel_open(), i, err = 0;
	char c = 0;

	if (fd < 0)
		return 10;
	l.value = (uintptr_t)value;
	l.value_len = q->value_len;
	for (i = 0; i < 4096; i++) {
		snprintf(value, sizeof(value), "%0*d", q->value_len, i);
		err = plabel_new_raw(fd, &l, 1, &ids[i]);
		if (err)
			break;
	}
	if (err != -EDQUOT)
		return 11;
	if (q->nsets && i != q->nsets)
		return 12;
	if (i < 2)
		return 13;
	/* Re-interning a set the user has costs nothing. */
	snprintf(value, sizeof(value), "%0*d", q->value_len, 0);
	if (plabel_new_raw(fd, &l, 1, &id) || id != ids[0])
		return 14;
	if (q->ready_fd >= 0) {
		if (write(q->ready_fd, &c, 1) != 1 ||
		    read(q->go_fd, &c, 1) != 1)
			return 15;
	}
	/* Freeing one makes room for one, at once. */
	if (plabel_put(fd, ids[1]))
		return 16;
	snprintf(value, sizeof(value), "%0*d", q->value_len, 99999);
	if (plabel_new_raw(fd, &l, 1, &id))
		return 17;
	if (plabel_new_raw(fd, &l, 1, &id))
		return 18;
	if (q->nsets && plabel_new_i(fd, "q", 1, &id) != -EDQUOT)
		return 19;
	close(fd);
	return 0;
}

static int plabel_quota_other(void *p)
{
	uint64_t id;
	int fd = plabel_open();

	if (fd < 0)
		return 10;
	if (plabel_new_i(fd, "other", 1, &id) || !id)
		return 11;
	close(fd);
	return 0;
}

TEST(quota_per_user)
{
	struct plabel_quota_arg q = { .nsets = 5, .value_len = 4 };
	long max_sets, max_bytes;
	int ready[2], go[2], status;
	pid_t pid;

	PLABEL_NEED_DEVICE();
	PLABEL_NEED_ROOT();
	max_sets = plabel_sysctl_get("max_sets_per_user");
	max_bytes = plabel_sysctl_get("max_bytes_per_user");
	ASSERT_LT(0, max_sets);
	ASSERT_LT(0, max_bytes);
	ASSERT_EQ(-EINVAL, plabel_sysctl_set("max_sets_per_user", 0));
	ASSERT_EQ(-EINVAL, plabel_sysctl_set("max_bytes_per_user", 1));

	/* Set count: user A runs out while user B and root still work. */
	ASSERT_EQ(0, plabel_sysctl_set("max_sets_per_user", 5));
	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(go));
	q.ready_fd = ready[1];
	q.go_fd = go[0];
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (setresgid(PLABEL_UID_A, PLABEL_UID_A, PLABEL_UID_A) ||
		    setresuid(PLABEL_UID_A, PLABEL_UID_A, PLABEL_UID_A))
			_exit(100);
		_exit(plabel_quota_user(&q));
	}
	{
		char c;

		ASSERT_EQ(1, read(ready[0], &c, 1));
		EXPECT_EQ(5, plabel_user_sets(PLABEL_UID_A));
		EXPECT_EQ(0, plabel_as_user(PLABEL_UID_B, plabel_quota_other,
					    NULL));
		EXPECT_EQ(0, plabel_in_child(plabel_quota_other, NULL));
		ASSERT_EQ(1, write(go[1], &c, 1));
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* The user's accounting goes with its last set. */
	for (int i = 0; i < 100 && plabel_user_sets(PLABEL_UID_A); i++)
		usleep(50000);
	EXPECT_EQ(0, plabel_user_sets(PLABEL_UID_A));
	EXPECT_EQ(0, plabel_sysctl_set("max_sets_per_user", max_sets));

	/* Bytes: 4096 bytes hold a few sets with 200-byte values, not 20. */
	ASSERT_EQ(0, plabel_sysctl_set("max_bytes_per_user", 4096));
	q.nsets = 0;
	q.value_len = 200;
	q.ready_fd = -1;
	EXPECT_EQ(0, plabel_as_user(PLABEL_UID_C, plabel_quota_user, &q));
	EXPECT_EQ(0, plabel_as_user(PLABEL_UID_B, plabel_quota_other, NULL));
	EXPECT_EQ(0, plabel_sysctl_set("max_bytes_per_user", max_bytes));
}

TEST(set_new_errors)
{
	struct plabel_label l[3];
	struct {
		struct plabel_set_new_args a;
		uint64_t extra;
	} big;
	struct plabel_set_new_args a;
	static const char nul_key[] = "ke\0y";
	static const char nul_value[] = "va\0lue";
	void *unmapped;
	uint64_t id;
	int fd;

	PLABEL_NEED_DEVICE();
	fd = plabel_open();
	ASSERT_LE(0, fd);
	unmapped = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	ASSERT_NE(MAP_FAILED, unmapped);
	ASSERT_EQ(0, munmap(unmapped, 4096));

	plabel_fill(l, kv_ab, 2);
	/* Flags, padding, size. */
	a = (struct plabel_set_new_args){ .size = sizeof(a), .flags = 1,
		.labels = (uintptr_t)l, .count = 2 };
	EXPECT_EQ(-EINVAL, plabel_ioc(fd, PLABEL_IOC_SET_NEW, &a));
	a.flags = 0;
	a.pad = 1;
	EXPECT_EQ(-EINVAL, plabel_ioc(fd, PLABEL_IOC_SET_NEW, &a));
	a.pad = 0;
	a.size = sizeof(a) - 8;
	EXPECT_EQ(-EINVAL, plabel_ioc(fd, PLABEL_IOC_SET_NEW, &a));
	a.size = 0;
	EXPECT_EQ(-EINVAL, plabel_ioc(fd, PLABEL_IOC_SET_NEW, &a));
	/* A longer struct from a newer caller: fine when the tail is 0. */
	memset(&big, 0, sizeof(big));
	big.a = (struct plabel_set_new_args){ .size = sizeof(big),
		.labels = (uintptr_t)l, .count = 2 };
	EXPECT_EQ(0, plabel_ioc(fd, PLABEL_IOC_SET_NEW, &big));
	EXPECT_NE((__u64)0, big.a.id);
	big.extra = 1;
	EXPECT_EQ(-E2BIG, plabel_ioc(fd, PLABEL_IOC_SET_NEW, &big));
	a.size = sizeof(a);
	EXPECT_EQ(0, plabel_ioc(fd, PLABEL_IOC_SET_NEW, &a));
	EXPECT_EQ(big.a.id, a.id);

	/* Bad pointers. */
	EXPECT_EQ(-EFAULT, plabel_ioc(fd, PLABEL_IOC_SET_NEW, NULL));
	EXPECT_EQ(-EFAULT, plabel_ioc(fd, PLABEL_IOC_SET_NEW, unmapped));
	a.labels = (uintptr_t)unmapped;
	EXPECT_EQ(-EFAULT, plabel_ioc(fd, PLABEL_IOC_SET_NEW, &a));
	a.labels = 0;
	EXPECT_EQ(-EFAULT, plabel_ioc(fd, PLABEL_IOC_SET_NEW, &a));
	plabel_fill(l, kv_ab, 2);
	l[1].key = (uintptr_t)unmapped;
	EXPECT_EQ(-EFAULT, plabel_new_raw(fd, l, 2, &id));
	plabel_fill(l, kv_ab, 2);
	l[1].value = (uintptr_t)unmapped;
	EXPECT_EQ(-EFAULT, plabel_new_raw(fd, l, 2, &id));
	l[1].value = (uintptr_t)0xffff888000000000ULL;
	EXPECT_EQ(-EFAULT, plabel_new_raw(fd, l, 2, &id));
	/* A zero-length value needs no readable pointer. */
	l[1].value = 0;
	l[1].value_len = 0;
	EXPECT_EQ(0, plabel_new_raw(fd, l, 2, &id));

	/* Malformed labels. */
	plabel_fill(l, kv_ab, 2);
	l[1].key_len = 0;
	EXPECT_EQ(-EINVAL, plabel_new_raw(fd, l, 2, &id));
	plabel_fill(l, kv_ab, 2);
	l[2] = l[0];
	EXPECT_EQ(-EINVAL, plabel_new_raw(fd, l, 3, &id));
	l[2].value = l[1].value;	/* same key, other value */
	EXPECT_EQ(-EINVAL, plabel_new_raw(fd, l, 3, &id));
	plabel_fill(l, kv_ab, 2);
	l[0].key = (uintptr_t)nul_key;
	l[0].key_len = sizeof(nul_key) - 1;
	EXPECT_EQ(-EINVAL, plabel_new_raw(fd, l, 2, &id));
	plabel_fill(l, kv_ab, 2);
	l[0].value = (uintptr_t)nul_value;
	l[0].value_len = sizeof(nul_value) - 1;
	EXPECT_EQ(-EINVAL, plabel_new_raw(fd, l, 2, &id));
	/* A key that is a prefix of another is a different key. */
	plabel_fill(l, kv_ab, 2);
	l[1].key = l[0].key;
	l[1].key_len = l[0].key_len - 1;
	EXPECT_EQ(0, plabel_new_raw(fd, l, 2, &id));
	close(fd);
}

TEST(other_ioctl_errors)
{
	struct plabel_set_put_args put = { .size = sizeof(put), .flags = 1 };
	struct plabel_labels_set_args ls = { .size = sizeof(ls), .flags = 2 };
	struct plabel_labels_get_args lg = { .size = sizeof(lg), .flags = 4 };
	struct plabel_slot_args sl = { .size = sizeof(sl), .flags = 8 };
	int fd;

	PLABEL_NEED_DEVICE();
	fd = plabel_open();
	ASSERT_LE(0, fd);
	EXPECT_EQ(-EINVAL, plabel_ioc(fd, PLABEL_IOC_SET_PUT, &put));
	EXPECT_EQ(-EINVAL, plabel_ioc(fd, PLABEL_IOC_LABELS_SET, &ls));
	EXPECT_EQ(-EINVAL, plabel_ioc(fd, PLABEL_IOC_LABELS_GET, &lg));
	EXPECT_EQ(-EINVAL, plabel_ioc(fd, PLABEL_IOC_SLOT_SET, &sl));
	put.flags = ls.flags = lg.flags = sl.flags = 0;
	put.size = ls.size = lg.size = sl.size = 4;
	EXPECT_EQ(-EINVAL, plabel_ioc(fd, PLABEL_IOC_SET_PUT, &put));
	EXPECT_EQ(-EINVAL, plabel_ioc(fd, PLABEL_IOC_LABELS_SET, &ls));
	EXPECT_EQ(-EINVAL, plabel_ioc(fd, PLABEL_IOC_LABELS_GET, &lg));
	EXPECT_EQ(-EINVAL, plabel_ioc(fd, PLABEL_IOC_SLOT_SET, &sl));
	EXPECT_EQ(-EFAULT, plabel_ioc(fd, PLABEL_IOC_SET_PUT, NULL));
	EXPECT_EQ(-EFAULT, plabel_ioc(fd, PLABEL_IOC_LABELS_SET, NULL));
	EXPECT_EQ(-EFAULT, plabel_ioc(fd, PLABEL_IOC_LABELS_GET, NULL));
	EXPECT_EQ(-EFAULT, plabel_ioc(fd, PLABEL_IOC_SLOT_SET, NULL));
	EXPECT_EQ(-EFAULT, plabel_ioc(fd, PLABEL_IOC_LABELS_GET,
				      (void *)0xffff888000000000ULL));
	/* Unknown commands. */
	EXPECT_EQ(-ENOTTY, plabel_ioc(fd, _IO(PLABEL_IOC_MAGIC, 0x7f), NULL));
	EXPECT_EQ(-ENOTTY, plabel_ioc(fd, _IOW(PLABEL_IOC_MAGIC, 0x06,
					       struct plabel_slot_args), &sl));
	EXPECT_EQ(-ENOTTY, plabel_ioc(fd, _IOW('x', 0x01,
					       struct plabel_set_put_args),
				      &put));
	EXPECT_EQ(-ENOTTY, plabel_ioc(fd, TCGETS, &put));
	close(fd);
}

TEST(labels_set_get)
{
	static const char *const kv3[] = { "zeta=last", "a=", "mid=dle" };
	struct plabel_labels_get_args g = { .size = sizeof(g) };
	struct plabel_label *l;
	unsigned char buf[4096];
	uint64_t id, other;
	char s[256];
	size_t need;
	unsigned int i;
	int fd;

	PLABEL_NEED_DEVICE();
	fd = plabel_open();
	ASSERT_LE(0, fd);
	/* No labels yet. */
	ASSERT_EQ(0, plabel_ioc(fd, PLABEL_IOC_LABELS_GET, &g));
	EXPECT_EQ((__u64)0, g.id);
	EXPECT_EQ(0U, g.count);
	EXPECT_EQ(0U, g.buf_len);
	EXPECT_EQ(0, plabel_use(fd, 0));
	EXPECT_EQ(-ENOENT, plabel_use(fd, 0x100000001ULL));

	ASSERT_EQ(0, plabel_new(fd, kv3, 3, &id));
	ASSERT_EQ(0, plabel_new(fd, kv_ab, 2, &other));
	ASSERT_EQ(0, plabel_use(fd, id));
	/* -ERANGE with no buffer: id, count and the size needed. */
	ASSERT_EQ(-ERANGE, plabel_ioc(fd, PLABEL_IOC_LABELS_GET, &g));
	EXPECT_EQ(id, g.id);
	EXPECT_EQ(3U, g.count);
	need = 3 * sizeof(*l) + strlen("zeta") + strlen("last") +
	       strlen("a") + strlen("mid") + strlen("dle") + 6;
	EXPECT_EQ(need, g.buf_len);
	/* One byte short: -ERANGE, and the buffer is not touched. */
	memset(buf, 0xaa, sizeof(buf));
	g.buf = (uintptr_t)buf;
	g.buf_len = need - 1;
	ASSERT_EQ(-ERANGE, plabel_ioc(fd, PLABEL_IOC_LABELS_GET, &g));
	EXPECT_EQ(need, g.buf_len);
	for (i = 0; i < sizeof(buf); i++)
		if (buf[i] != 0xaa)
			break;
	EXPECT_EQ(sizeof(buf), i);
	/* Enough room: labels sorted by key, NUL-terminated strings. */
	g.buf_len = sizeof(buf);
	ASSERT_EQ(0, plabel_ioc(fd, PLABEL_IOC_LABELS_GET, &g));
	EXPECT_EQ(need, g.buf_len);
	EXPECT_EQ(id, g.id);
	l = (struct plabel_label *)buf;
	EXPECT_STREQ("a", (char *)(uintptr_t)l[0].key);
	EXPECT_STREQ("", (char *)(uintptr_t)l[0].value);
	EXPECT_EQ(0U, l[0].value_len);
	EXPECT_STREQ("mid", (char *)(uintptr_t)l[1].key);
	EXPECT_STREQ("dle", (char *)(uintptr_t)l[1].value);
	EXPECT_STREQ("zeta", (char *)(uintptr_t)l[2].key);
	EXPECT_EQ(4U, l[2].key_len);
	EXPECT_STREQ("last", (char *)(uintptr_t)l[2].value);
	EXPECT_EQ(4U, l[2].value_len);
	for (i = 0; i < 3; i++) {
		EXPECT_LE((uintptr_t)buf, l[i].key);
		EXPECT_GT((uintptr_t)buf + need, l[i].value);
	}
	EXPECT_EQ(0xaa, buf[need]);
	/* A bad buffer pointer. */
	g.buf = 8;
	EXPECT_EQ(-EFAULT, plabel_ioc(fd, PLABEL_IOC_LABELS_GET, &g));
	/* Switch, read back, clear. */
	ASSERT_EQ(0, plabel_use(fd, other));
	ASSERT_EQ(0, plabel_get_str(fd, s, sizeof(s), &id));
	EXPECT_STREQ("alpha=1,beta=2", s);
	EXPECT_EQ(other, id);
	EXPECT_EQ(0, plabel_use(fd, 0));
	EXPECT_EQ(0, plabel_cur(fd));
	close(fd);
}

static __thread uint64_t plabel_tls_slot;

TEST(slot)
{
	static const char *const kv_k[] = { "k=kernel" };
	static const char *const kv_s[] = { "k=slot" };
	uint64_t kid, sid, misaligned[2];
	void *unmapped;
	char s[64];
	int fd;

	PLABEL_NEED_DEVICE();
	fd = plabel_open();
	ASSERT_LE(0, fd);
	unmapped = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	ASSERT_NE(MAP_FAILED, unmapped);
	ASSERT_EQ(0, munmap(unmapped, 4096));
	ASSERT_EQ(0, plabel_new(fd, kv_k, 1, &kid));
	ASSERT_EQ(0, plabel_new(fd, kv_s, 1, &sid));

	/* Bad registrations. */
	EXPECT_EQ(-EINVAL, plabel_slot(fd, (uintptr_t)misaligned + 4));
	EXPECT_EQ(-EINVAL, plabel_slot(fd, 1));
	EXPECT_EQ(-EFAULT, plabel_slot(fd, (uintptr_t)unmapped));
	EXPECT_EQ(-EFAULT, plabel_slot(fd, 8));
	EXPECT_EQ(-EFAULT, plabel_slot(fd, 0xffff888000000000ULL));
	EXPECT_EQ(0, plabel_slot(fd, 0));

	/* A registered slot with 0 falls back to the kernel-stored set. */
	plabel_tls_slot = 0;
	ASSERT_EQ(0, plabel_slot(fd, (uintptr_t)&plabel_tls_slot));
	EXPECT_EQ(0, plabel_cur(fd));
	ASSERT_EQ(0, plabel_use(fd, kid));
	EXPECT_EQ((int64_t)kid, plabel_cur(fd));
	/* A store switches, with no system call. */
	plabel_tls_slot = sid;
	ASSERT_EQ(0, plabel_get_str(fd, s, sizeof(s), NULL));
	EXPECT_STREQ("k=slot", s);
	plabel_tls_slot = kid;
	EXPECT_EQ((int64_t)kid, plabel_cur(fd));
	/* Bogus ids label nothing and harm nothing. */
	plabel_tls_slot = sid + 1;
	EXPECT_EQ((int64_t)kid, plabel_cur(fd));
	plabel_tls_slot = ~0ULL;
	EXPECT_EQ((int64_t)kid, plabel_cur(fd));
	plabel_tls_slot = (sid & 0xffffffffULL) | 0x7700000000ULL;
	EXPECT_EQ((int64_t)kid, plabel_cur(fd));
	/* A put set in the slot is gone too. */
	plabel_tls_slot = sid;
	EXPECT_EQ((int64_t)sid, plabel_cur(fd));
	ASSERT_EQ(0, plabel_put(fd, sid));
	EXPECT_EQ((int64_t)kid, plabel_cur(fd));
	/* Re-registering elsewhere, then unregistering. */
	ASSERT_EQ(0, plabel_new(fd, kv_s, 1, &sid));
	misaligned[0] = sid;
	ASSERT_EQ(0, plabel_slot(fd, (uintptr_t)&misaligned[0]));
	EXPECT_EQ((int64_t)sid, plabel_cur(fd));
	ASSERT_EQ(0, plabel_slot(fd, 0));
	EXPECT_EQ((int64_t)kid, plabel_cur(fd));
	ASSERT_EQ(0, plabel_use(fd, 0));
	EXPECT_EQ(0, plabel_cur(fd));
	/* A slot alone, with no kernel-stored set. */
	ASSERT_EQ(0, plabel_slot(fd, (uintptr_t)&misaligned[0]));
	EXPECT_EQ((int64_t)sid, plabel_cur(fd));
	misaligned[0] = 0;
	EXPECT_EQ(0, plabel_cur(fd));
	ASSERT_EQ(0, plabel_slot(fd, 0));
	close(fd);
}

struct plabel_owner_arg {
	int fd;
	uint64_t root_id;
};

/* As another user, with root's file and id: the id names nothing. */
static int plabel_owner_child(void *p)
{
	struct plabel_owner_arg *o = p;
	uint64_t mine;

	if (plabel_use(o->fd, o->root_id) != -ENOENT)
		return 10;
	plabel_tls_slot = o->root_id;
	if (plabel_slot(o->fd, (uintptr_t)&plabel_tls_slot))
		return 11;
	if (plabel_cur(o->fd) != 0)
		return 12;
	/* The same labels are a different set for this user. */
	if (plabel_new(o->fd, kv_ab, 2, &mine) || mine == o->root_id)
		return 13;
	plabel_tls_slot = mine;
	if (plabel_cur(o->fd) != (int64_t)mine)
		return 14;
	return 0;
}

/* Inherited labels stay with a task whose uid changes. */
/*
 * Root's labels, inherited by a child that became another user, are that
 * child's labels but not for it to read: root's process is not its to
 * ptrace.
 */
static int plabel_owner_inherited(void *p)
{
	struct plabel_owner_arg *o = p;

	return plabel_cur(o->fd) == -EACCES ? 0 : 20;
}

TEST(other_user_ids)
{
	struct plabel_owner_arg o;

	PLABEL_NEED_DEVICE();
	PLABEL_NEED_ROOT();
	o.fd = plabel_open();
	ASSERT_LE(0, o.fd);
	ASSERT_EQ(0, plabel_new(o.fd, kv_ab, 2, &o.root_id));
	EXPECT_EQ(0, plabel_as_user(PLABEL_UID_A, plabel_owner_child, &o));
	ASSERT_EQ(0, plabel_use(o.fd, o.root_id));
	EXPECT_EQ(0, plabel_as_user(PLABEL_UID_A, plabel_owner_inherited,
				    &o));
	/* Root's own use is unaffected. */
	EXPECT_EQ((int64_t)o.root_id, plabel_cur(o.fd));
	close(o.fd);
}

struct plabel_thread_arg {
	int fd;
	int64_t seen;
	char labels[128];
};

static void *plabel_thread_get(void *p)
{
	struct plabel_thread_arg *t = p;

	t->seen = plabel_cur(t->fd);
	if (plabel_get_str(t->fd, t->labels, sizeof(t->labels), NULL))
		t->labels[0] = '\0';
	return NULL;
}

struct plabel_wait_arg {
	int fd;
	int go[2];
	int64_t seen;
};

/* Reads this thread's labels after the creator says go. */
static void *plabel_thread_wait_get(void *p)
{
	struct plabel_wait_arg *w = p;
	char c;

	w->seen = read(w->go[0], &c, 1) == 1 ? plabel_cur(w->fd) : -EIO;
	return NULL;
}

TEST(inherit_pthread)
{
	static const char *const kv_s[] = { "via=slot" };
	struct plabel_thread_arg t = { 0 };
	struct plabel_wait_arg w;
	uint64_t id, sid;
	pthread_t th;

	PLABEL_NEED_DEVICE();
	t.fd = plabel_open();
	ASSERT_LE(0, t.fd);
	ASSERT_EQ(0, plabel_new(t.fd, kv_ab, 2, &id));
	ASSERT_EQ(0, plabel_new(t.fd, kv_s, 1, &sid));
	ASSERT_EQ(0, plabel_use(t.fd, id));
	ASSERT_EQ(0, pthread_create(&th, NULL, plabel_thread_get, &t));
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_EQ((int64_t)id, t.seen);
	EXPECT_STREQ("alpha=1,beta=2", t.labels);
	/* A new thread starts with the creator's slot-switched labels. */
	plabel_tls_slot = sid;
	ASSERT_EQ(0, plabel_slot(t.fd, (uintptr_t)&plabel_tls_slot));
	ASSERT_EQ(0, pthread_create(&th, NULL, plabel_thread_get, &t));
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_EQ((int64_t)sid, t.seen);
	EXPECT_STREQ("via=slot", t.labels);
	/*
	 * The new thread got the labels, not the slot: the creator switching
	 * afterwards does not change the thread's labels.
	 */
	w.fd = t.fd;
	ASSERT_EQ(0, pipe(w.go));
	ASSERT_EQ(0, pthread_create(&th, NULL, plabel_thread_wait_get, &w));
	plabel_tls_slot = id;
	EXPECT_EQ((int64_t)id, plabel_cur(t.fd));
	ASSERT_EQ(1, write(w.go[1], "", 1));
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_EQ((int64_t)sid, w.seen);
	close(w.go[0]);
	close(w.go[1]);
	/* No labels, none inherited. */
	plabel_tls_slot = 0;
	ASSERT_EQ(0, plabel_use(t.fd, 0));
	ASSERT_EQ(0, pthread_create(&th, NULL, plabel_thread_get, &t));
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_EQ(0, t.seen);
	ASSERT_EQ(0, plabel_slot(t.fd, 0));
	close(t.fd);
}

struct plabel_fork_arg {
	int fd;
	uint64_t want;
	uint64_t other;
};

static int plabel_fork_child(void *p)
{
	struct plabel_fork_arg *f = p;

	if (plabel_cur(f->fd) != (int64_t)f->want)
		return 10;
	/* The slot registration came along: a store still switches. */
	plabel_tls_slot = f->other;
	if (plabel_cur(f->fd) != (int64_t)f->other)
		return 11;
	return 0;
}

TEST(inherit_fork)
{
	static const char *const kv_s[] = { "via=slot" };
	struct plabel_fork_arg f;
	uint64_t id;

	PLABEL_NEED_DEVICE();
	f.fd = plabel_open();
	ASSERT_LE(0, f.fd);
	ASSERT_EQ(0, plabel_new(f.fd, kv_ab, 2, &id));
	ASSERT_EQ(0, plabel_new(f.fd, kv_s, 1, &f.other));
	ASSERT_EQ(0, plabel_use(f.fd, id));
	plabel_tls_slot = 0;
	ASSERT_EQ(0, plabel_slot(f.fd, (uintptr_t)&plabel_tls_slot));
	f.want = id;
	EXPECT_EQ(0, plabel_in_child(plabel_fork_child, &f));
	/* Slot-switched labels are what the child starts with. */
	plabel_tls_slot = f.other;
	f.want = f.other;
	f.other = id;
	EXPECT_EQ(0, plabel_in_child(plabel_fork_child, &f));
	EXPECT_EQ((int64_t)f.want, plabel_cur(f.fd));
	ASSERT_EQ(0, plabel_slot(f.fd, 0));
	close(f.fd);
}

static int plabel_exec_child(void *p)
{
	return plabel_exec_expect(p);
}

struct plabel_direct_exec_arg {
	int fd;
	uint64_t kernel_id;
	uint64_t slot_id;
	const char *expect;
};

/*
 * In a child: kernel-stored labels, then slot labels (the slot at a fixed
 * address), then exec the helper, which puts the slot's id back at that
 * address before reading its labels.
 */
static int plabel_direct_exec_child(void *p)
{
	struct plabel_direct_exec_arg *d = p;
	char id[32];
	uint64_t *slot;

	if (plabel_use(d->fd, d->kernel_id))
		return 10;
	if (!d->slot_id)
		return plabel_exec_expect(d->expect);
	slot = plabel_map_fixed_slot();
	if (!slot)
		return 11;
	*slot = d->slot_id;
	if (plabel_slot(d->fd, (uintptr_t)slot))
		return 12;
	if (plabel_cur(d->fd) != (int64_t)d->slot_id)
		return 13;
	snprintf(id, sizeof(id), "%llu", (unsigned long long)d->slot_id);
	execl("/proc/self/exe", "labels_test", "--expect", d->expect, id,
	      (char *)NULL);
	return 99;
}

TEST(inherit_exec)
{
	static const char *const kv_s[] = { "via=slot" };
	struct plabel_direct_exec_arg d = { 0 };
	uint64_t id, sid;
	int fd;

	PLABEL_NEED_DEVICE();
	fd = plabel_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, plabel_new(fd, kv_ab, 2, &id));
	ASSERT_EQ(0, plabel_new(fd, kv_s, 1, &sid));
	/* fork + exec: labels reach the new program. */
	EXPECT_EQ(0, plabel_in_child(plabel_exec_child, ""));
	ASSERT_EQ(0, plabel_use(fd, id));
	EXPECT_EQ(0, plabel_in_child(plabel_exec_child, "alpha=1,beta=2"));
	/* fork + exec keeps slot-switched labels (the fork copies them). */
	plabel_tls_slot = sid;
	ASSERT_EQ(0, plabel_slot(fd, (uintptr_t)&plabel_tls_slot));
	EXPECT_EQ(0, plabel_in_child(plabel_exec_child, "via=slot"));
	ASSERT_EQ(0, plabel_slot(fd, 0));
	ASSERT_EQ(0, plabel_use(fd, 0));
	/* A direct exec keeps the kernel-stored set ... */
	d.fd = fd;
	d.kernel_id = id;
	d.expect = "alpha=1,beta=2";
	EXPECT_EQ(0, plabel_in_child(plabel_direct_exec_child, &d));
	/* ... but drops the slot with the old address space. */
	d.slot_id = sid;
	EXPECT_EQ(0, plabel_in_child(plabel_direct_exec_child, &d));
	close(fd);
}

/*
 * Many short-lived threads, each checking what it inherited, switching
 * labels through ioctls and its slot and starting a grandchild thread,
 * while the creator keeps changing its own labels.
 */
#define PLABEL_STORM_ROUNDS	30
#define PLABEL_STORM_BATCH	50
#define PLABEL_STORM_SETS	8

struct plabel_storm {
	int fd;
	uint64_t ids[PLABEL_STORM_SETS];
	uint64_t want;		/* the creator's labels for this round */
	int errors;
	pthread_mutex_t lock;
};

static void plabel_storm_error(struct plabel_storm *s)
{
	pthread_mutex_lock(&s->lock);
	s->errors++;
	pthread_mutex_unlock(&s->lock);
}

struct plabel_storm_grand {
	struct plabel_storm *s;
	uint64_t want;
};

static void *plabel_storm_grandchild(void *p)
{
	struct plabel_storm_grand *g = p;

	if (plabel_cur(g->s->fd) != (int64_t)g->want)
		plabel_storm_error(g->s);
	return NULL;
}

static void *plabel_storm_thread(void *p)
{
	struct plabel_storm *s = p;
	struct plabel_storm_grand g = { .s = s };
	unsigned int seed = (unsigned int)(uintptr_t)&g;
	pthread_t th;
	int i;

	if (plabel_cur(s->fd) != (int64_t)s->want)
		plabel_storm_error(s);
	if (plabel_use(s->fd, s->ids[rand_r(&seed) % PLABEL_STORM_SETS]))
		plabel_storm_error(s);
	plabel_tls_slot = 0;
	if (plabel_slot(s->fd, (uintptr_t)&plabel_tls_slot))
		plabel_storm_error(s);
	for (i = 0; i < 2; i++) {
		uint64_t id = s->ids[rand_r(&seed) % PLABEL_STORM_SETS];

		plabel_tls_slot = id;
		if (plabel_cur(s->fd) != (int64_t)id)
			plabel_storm_error(s);
	}
	if ((rand_r(&seed) & 3) == 0) {
		g.want = plabel_tls_slot;
		if (pthread_create(&th, NULL, plabel_storm_grandchild, &g) ||
		    pthread_join(th, NULL))
			plabel_storm_error(s);
	}
	/* Half the threads leave with labels, half clear them first. */
	if (rand_r(&seed) & 1) {
		plabel_tls_slot = 0;
		if (plabel_slot(s->fd, 0) || plabel_use(s->fd, 0))
			plabel_storm_error(s);
	}
	return NULL;
}

FIXTURE(storm) {
};

FIXTURE_SETUP(storm)
{
}

FIXTURE_TEARDOWN(storm)
{
}

/* Usually a few seconds under TCG; the default 30 s is tight on a busy host. */
TEST_F_TIMEOUT(storm, thread_storm, 180)
{
	struct timespec t0, t1;
	pthread_t th[PLABEL_STORM_BATCH];
	struct plabel_storm s = { 0 };
	long tasks0, sets0;
	int r, i;

	PLABEL_NEED_DEVICE();
	tasks0 = su_counter("live_tasks");
	sets0 = su_counter("live_sets");
	s.fd = plabel_open();
	ASSERT_LE(0, s.fd);
	pthread_mutex_init(&s.lock, NULL);
	for (i = 0; i < PLABEL_STORM_SETS; i++)
		ASSERT_EQ(0, plabel_new_i(s.fd, "storm", i, &s.ids[i]));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (r = 0; r < PLABEL_STORM_ROUNDS; r++) {
		s.want = r % 3 ? s.ids[r % PLABEL_STORM_SETS] : 0;
		ASSERT_EQ(0, plabel_use(s.fd, s.want));
		for (i = 0; i < PLABEL_STORM_BATCH; i++)
			ASSERT_EQ(0, pthread_create(&th[i], NULL,
						    plabel_storm_thread, &s));
		for (i = 0; i < PLABEL_STORM_BATCH; i++)
			ASSERT_EQ(0, pthread_join(th[i], NULL));
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	TH_LOG("%d threads in %.1f s", PLABEL_STORM_ROUNDS * PLABEL_STORM_BATCH,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	EXPECT_EQ(0, s.errors);
	EXPECT_EQ(0, plabel_use(s.fd, 0));
	close(s.fd);
	if (tasks0 >= 0) {
		EXPECT_EQ(tasks0, su_counter_wait("live_tasks", tasks0));
		EXPECT_EQ(sets0, su_counter_wait("live_sets", sets0));
	}
	EXPECT_EQ(0, su_counter("inherit_failed"));
}

/* A labeled process tree: threads, forks, exec, all exiting. */
static int plabel_workload(void *p)
{
	static const char *const kv_s[] = { "via=slot" };
	pthread_t th[8];
	struct plabel_thread_arg t[8] = { 0 };
	uint64_t id, sid;
	int fd, i, status;
	pid_t pid;

	fd = plabel_open();
	if (fd < 0)
		return 10;
	if (plabel_new(fd, kv_ab, 2, &id) || plabel_new(fd, kv_s, 1, &sid))
		return 11;
	if (plabel_use(fd, id))
		return 12;
	plabel_tls_slot = sid;
	if (plabel_slot(fd, (uintptr_t)&plabel_tls_slot))
		return 13;
	for (i = 0; i < 8; i++) {
		t[i].fd = fd;
		if (pthread_create(&th[i], NULL, plabel_thread_get, &t[i]))
			return 14;
	}
	for (i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		if (t[i].seen != (int64_t)sid)
			return 17;
	}
	for (i = 0; i < 4; i++) {
		pid = fork();
		if (pid < 0)
			return 15;
		if (!pid)
			_exit(i & 1 ? plabel_exec_expect("via=slot") : 0);
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			return 16;
	}
	/* Exit with labels, a slot and references held. */
	return 0;
}

TEST(counts_back_to_start)
{
	long tasks0, sets0;

	PLABEL_NEED_DEVICE();
	tasks0 = su_counter("live_tasks");
	sets0 = su_counter("live_sets");
	if (tasks0 < 0 || sets0 < 0)
		SKIP(return, "debugfs counters absent");
	EXPECT_EQ(0, plabel_in_child(plabel_workload, NULL));
	EXPECT_EQ(tasks0, su_counter_wait("live_tasks", tasks0));
	EXPECT_EQ(sets0, su_counter_wait("live_sets", sets0));
}

/*
 * A labeled daemon: threads with kernel-stored labels and a slot, the
 * file closed, one of them starting short-lived threads all the time.
 * Runs until killed; writes a byte to ready_fd when set up.
 */
static void *plabel_daemon_short(void *p)
{
	return NULL;
}

/* Keeps labeled threads starting and ending, across the unload too. */
static void *plabel_daemon_thread(void *p)
{
	pthread_t th;

	for (;;) {
		if (pthread_create(&th, NULL, plabel_daemon_short, NULL) == 0)
			pthread_join(th, NULL);
		usleep(1000);
	}
	return NULL;
}

static void plabel_daemon(int ready_fd)
{
	pthread_t th;
	uint64_t id;
	char c = 0;
	int fd = plabel_open();

	if (fd < 0 || plabel_new(fd, kv_ab, 2, &id) || plabel_use(fd, id))
		_exit(1);
	plabel_tls_slot = id;
	if (plabel_slot(fd, (uintptr_t)&plabel_tls_slot))
		_exit(2);
	if (pthread_create(&th, NULL, plabel_daemon_thread, NULL))
		_exit(3);
	close(fd);
	if (write(ready_fd, &c, 1) != 1)
		_exit(4);
	close(ready_fd);
	for (;;)
		pause();
}

static pid_t plabel_start_daemon(void)
{
	int ready[2];
	char c;
	pid_t pid;

	if (pipe(ready))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		close(ready[0]);
		plabel_daemon(ready[1]);
	}
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1)
		pid = -1;
	close(ready[0]);
	return pid;
}

/*
 * Unloading the module while labeled threads run, after their file is
 * closed: rmmod succeeds, they run on, and the module loads again (fresh,
 * with nothing live). An open file holds the module (rmmod fails).
 */
TEST(unload_with_labeled_threads)
{
	char path[256];
	const char *ko;
	long tasks0;
	pid_t d1;
	int fd, kfd, status;

	PLABEL_NEED_DEVICE();
	PLABEL_NEED_ROOT();
	ko = plabel_kmod_path(path, sizeof(path));
	if (!ko || access(ko, R_OK))
		SKIP(return, "module file not found (set PLABEL_KMOD)");
	kfd = open(ko, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, kfd);
	if (plabel_kmod_differs(kfd) == 1) {
		close(kfd);
		SKIP(return, "%s is not the loaded module (set PLABEL_KMOD)",
		     ko);
	}
	tasks0 = su_counter("live_tasks");

	d1 = plabel_start_daemon();
	ASSERT_LT(0, d1);
	/* Two threads with labels, a third now and then. */
	EXPECT_LE(tasks0 + 2, su_counter("live_tasks"));
	EXPECT_GE(tasks0 + 3, su_counter("live_tasks"));

	/* An open file pins the module. */
	fd = plabel_open();
	ASSERT_LE(0, fd);
	EXPECT_NE(0, syscall(__NR_delete_module, "plabel", O_NONBLOCK));
	EXPECT_TRUE(errno == EWOULDBLOCK || errno == EBUSY)
		TH_LOG("delete_module: %s", strerror(errno));
	close(fd);

	/*
	 * Closed: it unloads under the labeled daemon. The daemon is held
	 * stopped, its labeled threads alive, while the module's tracepoint
	 * probes go and come: patching the tracepoint sites in do_exit()
	 * while other vCPUs run through them has crashed qemu's emulated
	 * CPUs (a stale int3 after the patch completed), which real CPUs
	 * never do. Threads start and end again right after.
	 */
	ASSERT_EQ(0, kill(d1, SIGSTOP));
	ASSERT_EQ(0, syscall(__NR_delete_module, "plabel", O_NONBLOCK))
		TH_LOG("delete_module: %s", strerror(errno));
	EXPECT_NE(0, access(PLABEL_DEVICE, F_OK));
	/* The daemon lives on, its threads starting and ending unlabeled. */
	EXPECT_EQ(0, kill(d1, SIGCONT));
	usleep(100000);
	EXPECT_EQ(0, kill(d1, 0));
	EXPECT_EQ(0, kill(d1, SIGSTOP));
	ASSERT_EQ(0, syscall(__NR_finit_module, kfd, "", 0))
		TH_LOG("finit_module %s: %s", ko, strerror(errno));
	close(kfd);
	/* and on with the module back, which knows nothing of them */
	EXPECT_EQ(0, kill(d1, SIGCONT));
	usleep(100000);
	EXPECT_EQ(0, kill(d1, SIGKILL));
	EXPECT_EQ(d1, waitpid(d1, &status, 0));
	/* devtmpfs creates the node; give udev-less systems a moment. */
	for (int i = 0; i < 50 && access(PLABEL_DEVICE, F_OK); i++)
		usleep(20000);
	ASSERT_EQ(0, access(PLABEL_DEVICE, F_OK));
	EXPECT_EQ(0, su_counter("live_tasks"));
	EXPECT_EQ(0, su_counter("live_sets"));
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "--expect"))
		return plabel_expect_main(argv[2], argc >= 4 ? argv[3] : NULL);
	return test_harness_run(argc, argv);
}
