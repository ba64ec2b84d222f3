// SPDX-License-Identifier: GPL-2.0
/*
 * What an unprivileged user can do to the module: each test is one attack,
 * tried the way a hostile user would, and what must hold against it.
 * Documentation/testing.rst has the table. Runs as root in the VM; the
 * attackers are children that became other users.
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
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#include "session_util.h"
#include "kselftest/kselftest_harness.h"

#define HD_UID_A	54401	/* the attacker */
#define HD_UID_B	54402	/* a user with a quota of its own */
#define HD_UID_C	54403	/* the owner of a user namespace */

#define HD_NEED_DEVICE()						\
	do {								\
		if (!su_have_dev())					\
			SKIP(return, "no /dev/plabel (module not loaded)"); \
	} while (0)
#define HD_NEED_ROOT()							\
	do {								\
		if (geteuid())						\
			SKIP(return, "needs root");			\
	} while (0)

static int hd_open(void)
{
	return open(SU_DEV, O_RDWR | O_CLOEXEC);
}

static int hd_become(uid_t uid)
{
	return setresgid(uid, uid, uid) || setresuid(uid, uid, uid) ? -1 : 0;
}

static int hd_new(int fd, const char *key, const char *value, uint64_t *id)
{
	struct plabel_label l = {
		.key = (uintptr_t)key,
		.value = (uintptr_t)value,
		.key_len = strlen(key),
		.value_len = strlen(value),
	};
	struct plabel_set_new_args a = {
		.size = sizeof(a),
		.labels = (uintptr_t)&l,
		.count = 1,
	};

	if (ioctl(fd, PLABEL_IOC_SET_NEW, &a))
		return -errno;
	*id = a.id;
	return 0;
}

static int hd_put(int fd, uint64_t id)
{
	struct plabel_set_put_args a = { .size = sizeof(a), .id = id };

	return ioctl(fd, PLABEL_IOC_SET_PUT, &a) ? -errno : 0;
}

/* LABELS_GET: the id, or -errno. */
static int64_t hd_cur(int fd)
{
	struct plabel_labels_get_args a = { .size = sizeof(a) };

	if (ioctl(fd, PLABEL_IOC_LABELS_GET, &a) && errno != ERANGE)
		return -errno;
	return a.id;
}

static int hd_wait(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

static long long hd_sysctl(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), SU_SYSCTL "%s", name);
	return su_read_num(path);
}

static int hd_sysctl_set(const char *name, long long v)
{
	char path[256];

	snprintf(path, sizeof(path), SU_SYSCTL "%s", name);
	return su_write_num(path, v);
}

/* Tests that run longer than the harness's default 30 s. */
FIXTURE(hd) {};
FIXTURE_SETUP(hd) {}
FIXTURE_TEARDOWN(hd) {}

/* --- 1. SET_NEW returns what it interned, whatever SET_PUT does -------- */

/*
 * SET_NEW stores the set in the file, drops the file's lock and returns
 * the set's id; a SET_PUT of that id through the same file from another
 * thread in between frees the set. To open that window wide, the interning
 * threads run at SCHED_IDLE on CPU 0 beside a thread that burns CPU 0 in
 * bursts (so an interning thread preempted anywhere waits milliseconds),
 * and a thread on CPU 1 puts the id the next SET_NEW will return (ids of a
 * lone process's sets count up by one) and the last one returned. Every id
 * returned must be nonzero; on the debug kernel, KASAN must see no use
 * after free.
 */
struct hd_race {
	int fd;
	volatile int stop;
	volatile uint64_t last;
	long calls, zero, bad, puts;
};

static void hd_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *hd_race_new(void *p)
{
	struct sched_param sp = { 0 };
	struct hd_race *r = p;

	hd_pin(0);
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	/* enough for KASAN to see the race; not so many frees that RCU lags */
	while (!r->stop && r->calls < 20000) {
		uint64_t id = 0;

		if (hd_new(r->fd, "race", "x", &id)) {
			__atomic_add_fetch(&r->bad, 1, __ATOMIC_RELAXED);
			continue;
		}
		__atomic_add_fetch(&r->calls, 1, __ATOMIC_RELAXED);
		if (!id)
			__atomic_add_fetch(&r->zero, 1, __ATOMIC_RELAXED);
		r->last = id;
	}
	return NULL;
}

static void *hd_race_put(void *p)
{
	struct hd_race *r = p;

	hd_pin(1);
	while (!r->stop) {
		uint64_t id = r->last;

		if (!id)
			continue;
		if (!hd_put(r->fd, id + 1))
			__atomic_add_fetch(&r->puts, 1, __ATOMIC_RELAXED);
		hd_put(r->fd, id);
	}
	return NULL;
}

static void *hd_race_burn(void *p)
{
	struct hd_race *r = p;

	hd_pin(0);
	while (!r->stop) {
		su_burn_until(su_now_ns() + 60000000);
		usleep(2000);
	}
	return NULL;
}

TEST_F_TIMEOUT(hd, set_new_returns_what_it_stored, 120)
{
	struct hd_race r = { 0 };
	pthread_t th[4];
	int i;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "needs two CPUs");
	r.fd = hd_open();
	ASSERT_LE(0, r.fd);
	ASSERT_EQ(0, pthread_create(&th[0], NULL, hd_race_new, &r));
	ASSERT_EQ(0, pthread_create(&th[1], NULL, hd_race_new, &r));
	ASSERT_EQ(0, pthread_create(&th[2], NULL, hd_race_put, &r));
	ASSERT_EQ(0, pthread_create(&th[3], NULL, hd_race_burn, &r));
	usleep(8 * 1000 * 1000);
	r.stop = 1;
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	TH_LOG("%ld SET_NEW calls, %ld failed; %ld sets put before their SET_NEW returned",
	       r.calls, r.bad, r.puts);
	EXPECT_LT(100, r.calls);
	EXPECT_EQ(0, r.zero);
	EXPECT_EQ(0, r.bad);
	close(r.fd);
}

/* --- 2. argument sizes ------------------------------------------------- */

/* A size over a page is refused before anything is scanned. */
TEST(ioctl_size_over_a_page)
{
	long page = sysconf(_SC_PAGESIZE);
	struct plabel_set_new_args *a;
	struct plabel_label l = { 0 };
	int fd;

	HD_NEED_DEVICE();
	fd = hd_open();
	ASSERT_LE(0, fd);
	a = calloc(1, 2 * page);
	ASSERT_NE(NULL, a);
	l.key = (uintptr_t)"k";
	l.key_len = 1;
	l.value = (uintptr_t)"v";
	a->labels = (uintptr_t)&l;
	a->count = 1;
	a->size = page;
	EXPECT_EQ(0, ioctl(fd, PLABEL_IOC_SET_NEW, a));
	a->size = page + 8;
	EXPECT_EQ(-1, ioctl(fd, PLABEL_IOC_SET_NEW, a));
	EXPECT_EQ(E2BIG, errno);
	a->size = 0xfffffff8u;
	EXPECT_EQ(-1, ioctl(fd, PLABEL_IOC_SET_NEW, a));
	EXPECT_EQ(E2BIG, errno);
	free(a);
	close(fd);
}

/*
 * A grown SESSION_START argument, passed with the command number that
 * encodes its grown size, as a newer program built against a newer header
 * would send it.
 */
TEST(session_ioctls_take_grown_sizes)
{
	struct {
		struct plabel_session_start_args a;
		uint64_t more;
	} big;
	unsigned long cmd = _IOC(_IOC_WRITE, PLABEL_IOC_MAGIC, 0x10,
				 sizeof(big));
	int fd;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	fd = hd_open();
	ASSERT_LE(0, fd);
	memset(&big, 0, sizeof(big));
	big.a.size = sizeof(big);
	big.a.record = PLABEL_RECORD_THREADS;
	ASSERT_EQ(0, ioctl(fd, cmd, &big)) TH_LOG("%s", strerror(errno));
	big.more = 1;
	EXPECT_EQ(0, ioctl(fd, PLABEL_IOC_SESSION_STOP));
	close(fd);
	fd = hd_open();
	ASSERT_LE(0, fd);
	/* nonzero bytes beyond what the module knows: -E2BIG */
	EXPECT_EQ(-1, ioctl(fd, cmd, &big));
	EXPECT_EQ(E2BIG, errno);
	close(fd);
}

/* --- 3. label bytes ---------------------------------------------------- */

TEST(control_bytes_refused)
{
	static const char *const bad[] = {
		"a\nb", "\x1b[2J", "x\x7f", "tab\there", "\r", "\n  k: Total 9.9s",
	};
	uint64_t id;
	unsigned int i;
	int fd;

	HD_NEED_DEVICE();
	fd = hd_open();
	ASSERT_LE(0, fd);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-EINVAL, hd_new(fd, "k", bad[i], &id))
			TH_LOG("value %u accepted", i);
		EXPECT_EQ(-EINVAL, hd_new(fd, bad[i], "v", &id))
			TH_LOG("key %u accepted", i);
	}
	/* bytes of UTF-8 text and other printable bytes are fine */
	EXPECT_EQ(0, hd_new(fd, "k", "caf\xc3\xa9 \xe2\x82\xac ~", &id));
	close(fd);
}

/* --- 4. whose labels a process may name or read ------------------------ */

enum hd_victim {
	HD_SETUID,		/* ruid A, euid 0: a setuid-root program */
	HD_NONDUMPABLE,		/* all A, but prctl(PR_SET_DUMPABLE, 0) */
	HD_PLAIN,		/* all A: ptrace would allow */
};

/*
 * The victim interns "secret=..." and sends its id over the pipe, then
 * waits; the attacker, user A, tries to name that id in LABELS_SET and to
 * read it back. Returns the attacker's LABELS_SET result.
 */
static int hd_try_victim(enum hd_victim kind, int *victim_self_ok)
{
	int idp[2], done[2], res[2];
	pid_t victim, attacker;
	uint64_t id = 0;
	int got = -1000;
	char c = 0;

	if (pipe(idp) || pipe(done) || pipe(res))
		return -1000;
	victim = fork();
	if (!victim) {
		int fd, ok;
		struct plabel_labels_set_args a = { .size = sizeof(a) };

		if (kind == HD_SETUID ? setresgid(HD_UID_A, HD_UID_A, HD_UID_A) ||
					setresuid(HD_UID_A, 0, 0) :
					hd_become(HD_UID_A))
			_exit(90);
		/* changing credentials left it non-dumpable: as a login is */
		prctl(PR_SET_DUMPABLE, kind == HD_PLAIN);
		fd = hd_open();
		if (fd < 0 || hd_new(fd, "secret", "hunter2", &id))
			_exit(91);
		/* its own labels stay usable by the victim itself */
		a.id = id;
		ok = !ioctl(fd, PLABEL_IOC_LABELS_SET, &a) &&
		     hd_cur(fd) == (int64_t)id;
		if (write(res[1], &ok, sizeof(ok)) != sizeof(ok) ||
		    write(idp[1], &id, sizeof(id)) != sizeof(id))
			_exit(92);
		if (read(done[0], &c, 1) < 0)
			_exit(93);
		_exit(0);
	}
	if (read(res[0], victim_self_ok, sizeof(*victim_self_ok)) !=
	    sizeof(*victim_self_ok) ||
	    read(idp[0], &id, sizeof(id)) != sizeof(id))
		goto out;
	attacker = fork();
	if (!attacker) {
		struct plabel_labels_set_args a = { .size = sizeof(a), .id = id };
		int fd, r;

		if (hd_become(HD_UID_A))
			_exit(90);
		fd = hd_open();
		if (fd < 0)
			_exit(91);
		r = ioctl(fd, PLABEL_IOC_LABELS_SET, &a) ? errno : 0;
		/* named or not, reading must not give the victim's id */
		if (!r && hd_cur(fd) == (int64_t)id)
			r = 200;
		else if (!r)
			r = 201;
		_exit(r);
	}
	got = hd_wait(attacker);
out:
	if (write(done[1], &c, 1) != 1)
		got = -1001;
	hd_wait(victim);
	close(idp[0]);
	close(idp[1]);
	close(done[0]);
	close(done[1]);
	close(res[0]);
	close(res[1]);
	return got;
}

TEST(setuid_program_labels_hidden)
{
	int self_ok = 0;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	EXPECT_EQ(ENOENT, hd_try_victim(HD_SETUID, &self_ok));
	EXPECT_EQ(1, self_ok);
}

TEST(nondumpable_labels_hidden)
{
	int self_ok = 0;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	EXPECT_EQ(ENOENT, hd_try_victim(HD_NONDUMPABLE, &self_ok));
	EXPECT_EQ(1, self_ok);
}

/* What ptrace allows stays allowed: the label reads back (status 200). */
TEST(same_user_labels_shared)
{
	int self_ok = 0;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	EXPECT_EQ(200, hd_try_victim(HD_PLAIN, &self_ok));
	EXPECT_EQ(1, self_ok);
}

/*
 * An exec that gains privileges starts with no inherited labels: the test
 * program, copied setuid root onto a tmpfs, run by user A with labels,
 * finds none. Run with "secure-exec-child" it reports what it has.
 */
#define HD_SUID_DIR	"/dev/shm/plabel-hd"

static int hd_secure_exec_child(void)
{
	int fd = hd_open();
	int64_t cur;

	if (fd < 0)
		return 90;
	cur = hd_cur(fd);
	/* 10: no labels; 11: labels; 12: refused */
	return cur == 0 ? 10 : cur > 0 ? 11 : 12;
}

static int hd_copy(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	if (in < 0)
		return -1;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (out < 0) {
		close(in);
		return -1;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n) {
			n = -1;
			break;
		}
	close(in);
	close(out);
	return n < 0 ? -1 : 0;
}

static int hd_run_labeled(const char *path, uid_t uid)
{
	pid_t pid = fork();

	if (!pid) {
		uint64_t id;
		struct plabel_labels_set_args a = { .size = sizeof(a) };
		int fd;

		if (hd_become(uid))
			_exit(80);
		fd = hd_open();
		if (fd < 0 || hd_new(fd, "job", "x", &id))
			_exit(81);
		a.id = id;
		if (ioctl(fd, PLABEL_IOC_LABELS_SET, &a))
			_exit(82);
		execl(path, path, "secure-exec-child", (char *)NULL);
		_exit(83);
	}
	return hd_wait(pid);
}

TEST(secure_exec_drops_labels)
{
	char self[4096], plain[4200], suid[4200];
	struct statvfs vfs;
	ssize_t n;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ASSERT_LT(0, n);
	self[n] = '\0';
	mkdir(HD_SUID_DIR, 0755);
	if (!statvfs(HD_SUID_DIR, &vfs) && (vfs.f_flag & ST_NOSUID)) {
		rmdir(HD_SUID_DIR);
		SKIP(return, "%s is mounted nosuid", HD_SUID_DIR);
	}
	snprintf(plain, sizeof(plain), "%s/plain", HD_SUID_DIR);
	snprintf(suid, sizeof(suid), "%s/suid", HD_SUID_DIR);
	ASSERT_EQ(0, hd_copy(self, plain));
	ASSERT_EQ(0, hd_copy(self, suid));
	ASSERT_EQ(0, chmod(suid, 04755));
	/* an ordinary exec keeps them */
	EXPECT_EQ(11, hd_run_labeled(plain, HD_UID_A));
	/* a setuid one does not */
	EXPECT_EQ(10, hd_run_labeled(suid, HD_UID_A));
	unlink(plain);
	unlink(suid);
	rmdir(HD_SUID_DIR);
}

/* --- 5. a session file is no capability by itself ----------------------- */

/* Root opened nothing: the file was opened while root acted as user A. */
TEST(session_needs_a_privileged_opener)
{
	pid_t pid;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	pid = fork();
	if (!pid) {
		struct plabel_session_start_args a;
		int fd, r;

		if (setresuid(-1, HD_UID_A, -1))
			_exit(80);
		fd = hd_open();
		if (setresuid(-1, 0, -1))
			_exit(81);
		if (fd < 0)
			_exit(82);
		su_args_init(&a);
		a.record = PLABEL_RECORD_THREADS;
		r = su_start(fd, &a);
		_exit(r == -EPERM ? 0 : r ? 83 : 84);
	}
	EXPECT_EQ(0, hd_wait(pid));
}

/* A child that dropped its privileges cannot read or stop root's session. */
TEST(inherited_session_needs_privilege)
{
	struct plabel_session_start_args a;
	char buf[65536];
	pid_t pid;
	int fd;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	fd = hd_open();
	ASSERT_LE(0, fd);
	su_args_init(&a);
	a.record = PLABEL_RECORD_THREADS;
	ASSERT_EQ(0, su_start(fd, &a));
	pid = fork();
	if (!pid) {
		int r;

		if (hd_become(HD_UID_A))
			_exit(80);
		if (read(fd, buf, sizeof(buf)) >= 0)
			_exit(81);
		r = errno;
		if (r != EPERM)
			_exit(82);
		if (!ioctl(fd, PLABEL_IOC_SESSION_STOP) || errno != EPERM)
			_exit(83);
		_exit(0);
	}
	EXPECT_EQ(0, hd_wait(pid));
	/* root's own reads go on */
	EXPECT_EQ(0, su_stop(fd));
	EXPECT_LT(0, read(fd, buf, sizeof(buf)));
	close(fd);
}

/* --- 6. limits on what a user pins ------------------------------------ */

TEST(references_per_file_bounded)
{
	long long old = hd_sysctl("max_refs_per_file");
	char value[16];
	uint64_t id;
	int fd, i;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	ASSERT_LT(0, old);
	ASSERT_EQ(0, hd_sysctl_set("max_refs_per_file", 8));
	fd = hd_open();
	ASSERT_LE(0, fd);
	for (i = 0; i < 8; i++) {
		snprintf(value, sizeof(value), "%d", i);
		EXPECT_EQ(0, hd_new(fd, "n", value, &id));
	}
	EXPECT_EQ(-EDQUOT, hd_new(fd, "n", "8", &id));
	/* one already referenced is no new reference */
	EXPECT_EQ(0, hd_new(fd, "n", "0", &id));
	EXPECT_EQ(0, hd_put(fd, id));
	EXPECT_EQ(0, hd_new(fd, "n", "8", &id));
	EXPECT_EQ(0, hd_sysctl_set("max_refs_per_file", old));
	close(fd);
}

static void *hd_label_thread(void *p)
{
	int *args = p;	/* fd, then result */
	struct plabel_labels_set_args a = { .size = sizeof(a) };
	uint64_t id;

	if (hd_new(args[0], "t", "1", &id)) {
		args[1] = -1000;
		return NULL;
	}
	a.id = id;
	args[1] = ioctl(args[0], PLABEL_IOC_LABELS_SET, &a) ? -errno : 0;
	return NULL;
}

/* A labeled child that stays; returns its pid, or -1 if it could not. */
static pid_t hd_labeled_child(int fd, int *err)
{
	int p[2];
	pid_t c;

	*err = -1000;
	if (pipe(p))
		return -1;
	c = fork();
	if (!c) {
		struct plabel_labels_set_args a = { .size = sizeof(a) };
		uint64_t id;
		int r = 0;

		if (hd_new(fd, "p", "1", &id))
			r = -1000;
		a.id = id;
		if (!r && ioctl(fd, PLABEL_IOC_LABELS_SET, &a))
			r = -errno;
		if (write(p[1], &r, sizeof(r)) != sizeof(r) || r)
			_exit(1);
		pause();
		_exit(0);
	}
	if (read(p[0], err, sizeof(*err)) != sizeof(*err))
		*err = -1001;
	close(p[0]);
	close(p[1]);
	return c;
}

TEST(task_entries_per_user_bounded)
{
	long long old = hd_sysctl("max_tasks_per_user");
	pid_t pid;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	ASSERT_LT(0, old);
	ASSERT_EQ(0, hd_sysctl_set("max_tasks_per_user", 3));
	pid = fork();
	if (!pid) {
		pid_t kids[4];
		int args[2], err[4], i, fd;
		pthread_t th;

		if (hd_become(HD_UID_B))
			_exit(80);
		fd = hd_open();
		if (fd < 0)
			_exit(81);
		/* a labeled thread's entry goes with it: room for the next */
		for (i = 0; i < 5; i++) {
			args[0] = fd;
			pthread_create(&th, NULL, hd_label_thread, args);
			pthread_join(th, NULL);
			if (args[1])
				_exit(82);
		}
		for (i = 0; i < 4; i++)
			kids[i] = hd_labeled_child(fd, &err[i]);
		for (i = 0; i < 4; i++)
			if (kids[i] > 0)
				kill(kids[i], SIGKILL);
		for (i = 0; i < 4; i++)
			if (kids[i] > 0)
				waitpid(kids[i], NULL, 0);
		/* three labeled processes of user B at most */
		if (err[0] || err[1] || err[2])
			_exit(83);
		_exit(err[3] == -EDQUOT ? 0 : 84);
	}
	EXPECT_EQ(0, hd_wait(pid));
	EXPECT_EQ(0, hd_sysctl_set("max_tasks_per_user", old));
}

/* Sets debugfs "users" charges to uid; -1 without the file. */
static long hd_user_sets(uid_t uid)
{
	unsigned int u, sets;
	char line[128];
	long found = 0;
	FILE *f = fopen(SU_DEBUGFS "users", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%u %u", &u, &sets) == 2 && u == uid)
			found = sets;
	fclose(f);
	return found;
}

/*
 * Quotas cannot be multiplied through user namespaces: a user's namespace
 * maps 1000 uids (root wrote its map, as newuidmap does from
 * /etc/subuid), and sets interned as one of them count against A, the
 * namespace's owner, not against the mapped uid.
 */
#define HD_SUBUID	300000

TEST(quota_counts_the_namespace_owner)
{
	int ready[2], go[2], done[2];
	char path[64], map[64];
	long owner_sets, mapped_sets;
	pid_t pid;
	int fd;
	char c = 0;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	if (access("/proc/self/ns/user", F_OK))
		SKIP(return, "no user namespaces in this kernel");
	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(done));
	pid = fork();
	if (!pid) {
		uint64_t id;
		int i;

		/*
		 * No user namespace is made from inside a chroot (as the VM
		 * runs its command): go to init's root first, which has
		 * /dev/plabel too.
		 */
		if (chroot("/proc/1/root") || chdir("/"))
			_exit(79);
		if (hd_become(HD_UID_C))
			_exit(80);
		if (unshare(CLONE_NEWUSER)) {
			c = 'e';
			_exit(write(ready[1], &c, 1) == 1 ? 0 : 80);
		}
		if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(81);
		/* uid 5 inside is HD_SUBUID + 5 outside */
		if (setresgid(5, 5, 5) || setresuid(5, 5, 5))
			_exit(82);
		fd = hd_open();
		if (fd < 0)
			_exit(83);
		for (i = 0; i < 3; i++) {
			char v[8];

			snprintf(v, sizeof(v), "%d", i);
			if (hd_new(fd, "ns", v, &id))
				_exit(84);
		}
		if (write(done[1], "d", 1) != 1)
			_exit(85);
		pause();
		_exit(0);
	}
	close(ready[1]);
	close(done[1]);
	if (read(ready[0], &c, 1) != 1 || c == 'e') {
		TH_LOG("child: exit %d, %c", hd_wait(pid), c);
		ASSERT_TRUE(0);
	}
	snprintf(map, sizeof(map), "0 %d 1000", HD_SUBUID);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)strlen(map), write(fd, map, strlen(map)));
	close(fd);
	snprintf(path, sizeof(path), "/proc/%d/setgroups", pid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ASSERT_EQ(4, write(fd, "deny", 4));
		close(fd);
	}
	snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)strlen(map), write(fd, map, strlen(map)));
	close(fd);
	ASSERT_EQ(1, write(go[1], "g", 1));
	if (read(done[0], &c, 1) != 1) {
		TH_LOG("child: exit %d", hd_wait(pid));
		ASSERT_TRUE(0);
	}
	owner_sets = hd_user_sets(HD_UID_C);
	mapped_sets = hd_user_sets(HD_SUBUID + 5);
	kill(pid, SIGKILL);
	hd_wait(pid);
	TH_LOG("owner %d: %ld sets; mapped uid %d: %ld sets", HD_UID_C,
	       owner_sets, HD_SUBUID + 5, mapped_sets);
	EXPECT_EQ(3, owner_sets);
	EXPECT_EQ(0, mapped_sets);
}

/*
 * Memory a user makes the module allocate is charged to the user's memory
 * cgroup: 64 files each referencing 256 sets whose ids lie far apart make
 * the files' index trees take several megabytes, which must show in the
 * cgroup's memory.current.
 */
#define HD_CG	"/dev/shm/plabel-hd-cg"

static long long hd_cg_num(const char *dir, const char *file)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return su_read_num(path);
}

static int hd_cg_write(const char *dir, const char *file, const char *v)
{
	char path[1024];
	int fd, ok;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ok = write(fd, v, strlen(v)) == (ssize_t)strlen(v);
	close(fd);
	return ok ? 0 : -EIO;
}

/* A memory cgroup for a test at grp; nonzero when the kernel has none. */
static int hd_cg_setup(char *grp, size_t len)
{
	mkdir(HD_CG, 0755);
	if (mount("none", HD_CG, "cgroup2", 0, NULL) && errno != EBUSY)
		return -errno;
	if (hd_cg_write(HD_CG, "cgroup.subtree_control", "+memory")) {
		umount(HD_CG);
		return -ENOENT;
	}
	snprintf(grp, len, "%s/hd", HD_CG);
	mkdir(grp, 0755);
	return 0;
}

static void hd_cg_teardown(const char *grp)
{
	for (int i = 0; i < 50 && rmdir(grp); i++)
		usleep(100000);
	umount(HD_CG);
	rmdir(HD_CG);
}

TEST_F_TIMEOUT(hd, references_charged_to_memcg, 120)
{
	char pidbuf[32], grp[600];
	long long before, after;
	int go[2], done[2];
	pid_t pid;
	char c;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	if (hd_cg_setup(grp, sizeof(grp)))
		SKIP(return, "no cgroup2 with a memory controller");
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(done));
	pid = fork();
	if (!pid) {
		static int fds[64];
		uint64_t id, skip;
		char v[32];
		int i, j, k;

		if (read(go[0], &c, 1) != 1 || hd_become(HD_UID_A))
			_exit(80);
		for (i = 0; i < 64; i++)
			if ((fds[i] = hd_open()) < 0)
				_exit(81);
		for (k = 0; k < 256; k++) {
			snprintf(v, sizeof(v), "%d", k);
			for (i = 0; i < 64; i++)
				if (hd_new(fds[i], "spread", v, &id))
					_exit(82);
			/* the next set's id 64 further on */
			for (j = 0; j < 64; j++) {
				snprintf(v, sizeof(v), "skip%d", j);
				if (hd_new(fds[0], "s", v, &skip) ||
				    hd_put(fds[0], skip))
					_exit(83);
			}
		}
		if (write(done[1], &c, 1) != 1)
			_exit(84);
		pause();
		_exit(0);
	}
	snprintf(pidbuf, sizeof(pidbuf), "%d", pid);
	ASSERT_EQ(0, hd_cg_write(grp, "cgroup.procs", pidbuf));
	before = hd_cg_num(grp, "memory.current");
	ASSERT_EQ(1, write(go[1], "g", 1));
	ASSERT_EQ(1, read(done[0], &c, 1));
	after = hd_cg_num(grp, "memory.current");
	kill(pid, SIGKILL);
	hd_wait(pid);
	TH_LOG("cgroup charged %lld KiB for 64 files x 256 spread references",
	       (after - before) / 1024);
	/* 16384 references, one index node each: over 4 MiB */
	EXPECT_LT(4LL << 20, after - before);
	hd_cg_teardown(grp);
}

/*
 * A session's rings and tables are charged to the memory cgroup of whoever
 * starts it: with 4 MiB rings, starting one must raise the starter's
 * memory.current by at least a ring for each online CPU.
 */
TEST_F_TIMEOUT(hd, session_charged_to_memcg, 120)
{
	long long ring_kb, ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int go[2], res[2];
	char pidbuf[32], grp[600];
	long long delta = -1;
	pid_t pid;
	char c;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	ring_kb = su_read_num(SU_SYSCTL "ring_kb");
	if (ring_kb < 0)
		SKIP(return, "no ring_kb sysctl");
	if (hd_cg_setup(grp, sizeof(grp)))
		SKIP(return, "no cgroup2 with a memory controller");
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(res));
	ASSERT_EQ(0, su_write_num(SU_SYSCTL "ring_kb", 4096));
	pid = fork();
	if (!pid) {
		struct plabel_session_start_args a;
		long long before, after;
		int fd;

		if (read(go[0], &c, 1) != 1 || (fd = hd_open()) < 0)
			_exit(80);
		su_args_init(&a);
		before = hd_cg_num(grp, "memory.current");
		if (su_start(fd, &a))
			_exit(81);
		after = hd_cg_num(grp, "memory.current");
		delta = after - before;
		if (write(res[1], &delta, sizeof(delta)) != sizeof(delta))
			_exit(82);
		su_stop(fd);
		close(fd);
		_exit(0);
	}
	snprintf(pidbuf, sizeof(pidbuf), "%d", pid);
	ASSERT_EQ(0, hd_cg_write(grp, "cgroup.procs", pidbuf));
	ASSERT_EQ(1, write(go[1], "g", 1));
	close(res[1]);
	if (read(res[0], &delta, sizeof(delta)) != sizeof(delta))
		delta = -1;
	EXPECT_EQ(0, hd_wait(pid));
	su_write_num(SU_SYSCTL "ring_kb", ring_kb);
	TH_LOG("session start charged %lld KiB to the starter's cgroup "
	       "(%lld CPUs, 4096 KiB rings)", delta / 1024, ncpu);
	EXPECT_LE(ncpu * (4LL << 20), delta);
	hd_cg_teardown(grp);
}

/* --- 7. what processes can do to a root session ------------------------ */

/* Reads all records of an stopped session and sums LOST records by kind. */
static void hd_lost(struct su_stream *st, uint64_t *lost)
{
	struct plabel_rec_header *h;
	size_t off = 0;

	lost[0] = lost[1] = lost[2] = 0;
	while ((h = su_next(st, &off)))
		if (h->type == PLABEL_REC_LOST) {
			struct plabel_rec_lost *l = (void *)h;

			if (l->kind < 3)
				lost[l->kind] += l->lost;
		}
}

static uint64_t hd_samples_of(struct su_stream *st, pid_t pid)
{
	struct plabel_rec_header *h;
	uint64_t n = 0;
	size_t off = 0;

	while ((h = su_next(st, &off)))
		if (h->type == PLABEL_REC_SAMPLE &&
		    ((struct plabel_rec_sample *)h)->pid == (uint32_t)pid)
			n++;
	return n;
}

/*
 * A profiled program that forks more than the session's process table
 * holds, one short-lived child after another, still has its last child
 * followed: exited processes leave the table.
 */
TEST_F_TIMEOUT(hd, tree_follows_after_many_forks, 240)
{
	struct plabel_session_start_args a;
	struct su_reader rd;
	int go[2], fin[2];
	pid_t prog, last = 0;
	uint64_t lost[3];
	int32_t p;
	char c;
	int fd;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(fin));
	prog = fork();
	if (!prog) {
		pid_t k;
		int i;

		if (read(go[0], &c, 1) != 1)
			_exit(80);
		/*
		 * vfork: a new process each time, without copying the
		 * address space (fork costs 30 ms under KASAN and TCG).
		 */
		for (i = 0; i < 4200; i++) {
			k = vfork();
			if (!k)
				_exit(0);
			if (k < 0 || hd_wait(k))
				_exit(81);
		}
		k = fork();
		if (!k) {
			su_burn_cpu(300 * 1000 * 1000ull);
			_exit(0);
		}
		if (write(fin[1], &k, sizeof(k)) != sizeof(k))
			_exit(82);
		_exit(hd_wait(k));
	}
	fd = hd_open();
	ASSERT_LE(0, fd);
	su_args_init(&a);
	a.target = PLABEL_TARGET_TREE;
	a.record = PLABEL_RECORD_CPU;
	a.sample_hz = 499;
	p = prog;
	a.pids = (uintptr_t)&p;
	a.npids = 1;
	ASSERT_EQ(0, su_start(fd, &a));
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	ASSERT_EQ(1, write(go[1], "g", 1));
	ASSERT_EQ((ssize_t)sizeof(last), read(fin[0], &last, sizeof(last)));
	EXPECT_EQ(0, hd_wait(prog));
	EXPECT_EQ(0, su_stop(fd));
	EXPECT_EQ(0, su_reader_join(&rd));
	hd_lost(&rd.st, lost);
	TH_LOG("last child %d: %llu samples; %llu processes not followed",
	       last, (unsigned long long)hd_samples_of(&rd.st, last),
	       (unsigned long long)lost[PLABEL_LOST_PROCESSES]);
	EXPECT_LT(20ULL, (unsigned long long)hd_samples_of(&rd.st, last));
	EXPECT_EQ(0ULL, (unsigned long long)lost[PLABEL_LOST_PROCESSES]);
	su_stream_free(&rd.st);
	close(fd);
}

/*
 * Processes with thousands of executable mappings that they keep changing
 * cannot keep the mapping walker busy: it walks one process at most every
 * 200 ms, reports at most 1024 mappings a walk (the rest counted as lost
 * mappings), and spends a bounded share of a CPU.
 */
#define HD_MAPS		1300	/* over the 1024 a walk reports */

static void hd_mapper(uint64_t end)
{
	long page = sysconf(_SC_PAGESIZE);
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	char *base;
	int i;

	if (fd < 0)
		_exit(70);
	/* reserve, then map every other page: separate mappings */
	base = mmap(NULL, 2 * HD_MAPS * page, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		_exit(71);
	for (i = 0; i < HD_MAPS; i++)
		if (mmap(base + 2 * i * page, page, PROT_READ | PROT_EXEC,
			 MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED)
			_exit(72);
	while (su_now_ns() < end) {
		/* one executable page in and out: exec_vm changes */
		void *x = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE,
			       fd, 0);

		if (x != MAP_FAILED)
			munmap(x, page);
	}
	_exit(0);
}

TEST_F_TIMEOUT(hd, mapping_walk_bounded, 240)
{
	struct plabel_session_start_args a;
	long long scans0, scans1, ns0, ns1;
	struct su_reader rd;
	uint64_t t0, t1, lost[3], end;
	pid_t kids[4];
	int fd, i;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	fd = hd_open();
	ASSERT_LE(0, fd);
	su_args_init(&a);
	a.sample_hz = 999;
	a.record = PLABEL_RECORD_CPU;
	ASSERT_EQ(0, su_start(fd, &a));
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	scans0 = su_read_num(SU_DEBUGFS "mm_scans");
	ns0 = su_read_num(SU_DEBUGFS "scan_ns_total");
	t0 = su_now_ns();
	end = t0 + 4000000000ull;
	for (i = 0; i < 4; i++) {
		kids[i] = fork();
		if (!kids[i]) {
			if (hd_become(HD_UID_A))
				_exit(80);
			hd_mapper(end);
		}
	}
	for (i = 0; i < 4; i++)
		EXPECT_EQ(0, hd_wait(kids[i]));
	t1 = su_now_ns();
	scans1 = su_read_num(SU_DEBUGFS "mm_scans");
	ns1 = su_read_num(SU_DEBUGFS "scan_ns_total");
	EXPECT_EQ(0, su_stop(fd));
	EXPECT_EQ(0, su_reader_join(&rd));
	hd_lost(&rd.st, lost);
	TH_LOG("%lld walks, %llu records lost", scans1 - scans0,
	       (unsigned long long)lost[PLABEL_LOST_RECORDS]);
	ASSERT_LE(0, ns0) TH_LOG("no debugfs scan_ns_total");
	TH_LOG("%lld walks, %.1f%% of one CPU walking, %llu mappings and %llu records lost in %.1f s",
	       scans1 - scans0, 100.0 * (ns1 - ns0) / (double)(t1 - t0),
	       (unsigned long long)lost[PLABEL_LOST_MAPPINGS],
	       (unsigned long long)lost[PLABEL_LOST_RECORDS],
	       (t1 - t0) / 1e9);
	/* 4 processes, one walk each per 200 ms, and a few of others */
	EXPECT_GT(4 * (long long)((t1 - t0) / 200000000) + 40, scans1 - scans0);
	EXPECT_LT(0ULL, (unsigned long long)lost[PLABEL_LOST_MAPPINGS]);
	/* budget: 5 ms a 50 ms tick, and the walks when it stops */
	EXPECT_GT(0.25 * (t1 - t0), (double)(ns1 - ns0));
	su_stream_free(&rd.st);
	close(fd);
}

/*
 * A late timer interrupt writes one sample that says how many periods it
 * stands for, not a copy per period (up to a megabyte of copying in hard
 * interrupt context in dwarf mode): no two samples of one CPU share their
 * time, and the periods the samples stand for add up to the CPU time the
 * burning threads used.
 */
struct hd_burn {
	uint64_t end, cpu_ns;
};

static void *hd_burn_fn(void *p)
{
	struct hd_burn *b = p;

	su_burn_until(b->end);
	b->cpu_ns = su_thread_cpu_ns();
	return NULL;
}

TEST_F_TIMEOUT(hd, late_samples_are_not_copied, 60)
{
	struct plabel_session_start_args a;
	struct hd_burn burn[2];
	struct plabel_rec_header *h;
	struct su_reader rd;
	pthread_t th[2];
	uint64_t periods = 0, late = 0, dup = 0, n = 0, cpu = 0, period;
	uint64_t last_time[64] = { 0 };
	int32_t pid = getpid();
	size_t off = 0;
	int fd, i;

	HD_NEED_DEVICE();
	HD_NEED_ROOT();
	fd = hd_open();
	ASSERT_LE(0, fd);
	su_args_init(&a);
	a.target = PLABEL_TARGET_PIDS;
	a.pids = (uintptr_t)&pid;
	a.npids = 1;
	a.sample_hz = 4999;
	a.record = PLABEL_RECORD_CPU;
	ASSERT_EQ(0, su_start(fd, &a));
	ASSERT_EQ(0, su_reader_start(&rd, fd));
	for (i = 0; i < 2; i++) {
		burn[i].end = su_now_ns() + 2000000000ull;
		ASSERT_EQ(0, pthread_create(&th[i], NULL, hd_burn_fn, &burn[i]));
	}
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		cpu += burn[i].cpu_ns;
	}
	EXPECT_EQ(0, su_stop(fd));
	EXPECT_EQ(0, su_reader_join(&rd));
	period = ((struct plabel_rec_stream *)rd.st.buf)->period_ns;
	while ((h = su_next(&rd.st, &off))) {
		struct plabel_rec_sample *sm = (void *)h;

		if (h->type != PLABEL_REC_SAMPLE || sm->tid == (uint32_t)pid)
			continue;
		n++;
		periods += PLABEL_SAMPLE_PERIODS(sm->flags);
		late += PLABEL_SAMPLE_PERIODS(sm->flags) > 1;
		if (sm->cpu < 64) {
			dup += sm->time_ns == last_time[sm->cpu];
			last_time[sm->cpu] = sm->time_ns;
		}
	}
	TH_LOG("%llu samples, %llu late, standing for %llu periods = %.3f s; threads used %.3f s; %llu copies",
	       (unsigned long long)n, (unsigned long long)late,
	       (unsigned long long)periods, periods * period / 1e9, cpu / 1e9,
	       (unsigned long long)dup);
	EXPECT_EQ(0ULL, (unsigned long long)dup);
	EXPECT_LT(0.75 * cpu, (double)periods * period);
	EXPECT_GT(1.25 * cpu, (double)periods * period);
	su_stream_free(&rd.st);
	close(fd);
}

/* glibc passes constructors main's arguments */
static void __attribute__((constructor)) hd_early(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "secure-exec-child"))
		_exit(hd_secure_exec_child());
}

TEST_HARNESS_MAIN
