// SPDX-License-Identifier: GPL-2.0
/*
 * libplabel across threads and processes, without the module: many
 * threads switching concurrently each see only their own labels, threads
 * exit with cached sets, new threads start unlabeled in-process, a fork
 * child keeps its labels.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <plabel.h>

#include "kselftest/kselftest_harness.h"

#define NTHREADS	8
#define ITERS		20000

static const char *cur(char *buf, size_t len)
{
	struct plabel_kv kv[64];
	size_t off = 0;
	int n, i;

	buf[0] = '\0';
	n = plabel_get(kv, 64);
	if (n < 0) {
		snprintf(buf, len, "error %d", n);
		return buf;
	}
	for (i = 0; i < n && i < 64; i++)
		off += snprintf(buf + off, len - off, "%s%s=%s",
				i ? "," : "", kv[i].key, kv[i].value);
	return buf;
}

struct worker {
	pthread_t th;
	int id;
	int bad;
	int ops;
	struct plabel_labels *shared;	/* one set all threads switch to */
};

struct req {
	struct worker *w;
	int i;
};

static void req_fn(void *arg)
{
	struct req *r = arg;
	char want[128], buf[256];

	snprintf(want, sizeof(want), "req=%d,shared=yes,worker=%d",
		 r->i % 11, r->w->id);
	if (strcmp(want, cur(buf, sizeof(buf))))
		r->w->bad++;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char wid[16], val[16], want[128], buf[256];
	struct plabel_labels *own;
	int i;

	/* A new thread starts without labels in-process. */
	if (plabel_get(NULL, 0) != 0)
		w->bad++;
	snprintf(wid, sizeof(wid), "%d", w->id);
	own = plabel_labels_new((struct plabel_kv[]){ { "worker", wid } }, 1);
	if (!own) {
		w->bad++;
		return NULL;
	}
	for (i = 0; i < ITERS; i++) {
		struct req r = { w, i };

		switch (i % 4) {
		case 0:
			if (plabel_switch(own))
				w->bad++;
			snprintf(want, sizeof(want), "worker=%d", w->id);
			break;
		case 1:
			if (plabel_switch(w->shared))
				w->bad++;
			snprintf(want, sizeof(want), "shared=yes");
			break;
		case 2:
			snprintf(val, sizeof(val), "%d", i % 13);
			if (plabel_set((struct plabel_kv[]){ { "worker", wid },
							     { "n", val } },
				       2))
				w->bad++;
			snprintf(want, sizeof(want), "n=%d,worker=%d",
				 i % 13, w->id);
			break;
		default:
			if (plabel_set((struct plabel_kv[]){ { "worker", wid },
							     { "shared",
							       "yes" } }, 2))
				w->bad++;
			snprintf(val, sizeof(val), "%d", i % 11);
			if (plabel_do((struct plabel_kv[]){ { "req", val } }, 1,
				      req_fn, &r))
				w->bad++;
			snprintf(want, sizeof(want), "shared=yes,worker=%d",
				 w->id);
			break;
		}
		if (strcmp(want, cur(buf, sizeof(buf))))
			w->bad++;
		w->ops++;
	}
	plabel_clear();
	plabel_labels_free(own);
	return NULL;
}

TEST(threads_switch_concurrently)
{
	struct worker w[NTHREADS];
	struct plabel_labels *shared;
	int i;

	shared = plabel_labels_new((struct plabel_kv[]){ { "shared", "yes" } },
				   1);
	ASSERT_NE(NULL, shared);
	for (i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].id = i;
		w[i].shared = shared;
		ASSERT_EQ(0, pthread_create(&w[i].th, NULL, worker_main,
					    &w[i]));
	}
	for (i = 0; i < NTHREADS; i++) {
		ASSERT_EQ(0, pthread_join(w[i].th, NULL));
		EXPECT_EQ(0, w[i].bad);
		EXPECT_EQ(ITERS, w[i].ops);
	}
	plabel_labels_free(shared);
}

static void clear_fn(void *arg)
{
	plabel_clear();
}

static void *short_lived(void *arg)
{
	char val[16];
	long n = (long)arg;

	snprintf(val, sizeof(val), "%ld", n);
	if (plabel_set((struct plabel_kv[]){ { "gen", val } }, 1))
		return (void *)1L;
	if (plabel_do((struct plabel_kv[]){ { "more", val } }, 1,
		      clear_fn, NULL))
		return (void *)1L;
	return plabel_get(NULL, 0) == 1 ? NULL : (void *)1L;
}

/* Threads exiting with cached sets release them; sets made again work. */
TEST(threads_exit_with_labels)
{
	pthread_t th;
	void *ret;
	long i;

	for (i = 0; i < 200; i++) {
		ASSERT_EQ(0, pthread_create(&th, NULL, short_lived,
					    (void *)(i % 5)));
		ASSERT_EQ(0, pthread_join(th, &ret));
		EXPECT_EQ(NULL, ret);
	}
}

static void in_child(void *arg)
{
	int *status = arg;
	char buf[256];

	*status = strcmp("a=1,b=2,c=3", cur(buf, sizeof(buf))) ? 3 : 0;
}

TEST(fork_child_keeps_labels)
{
	struct plabel_labels *l;
	char buf[256];
	int status;
	pid_t pid;

	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "a", "1" },
						      { "b", "2" } }, 2));
	l = plabel_labels_new((struct plabel_kv[]){ { "h", "x" } }, 1);
	ASSERT_NE(NULL, l);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int st = 0;

		if (strcmp("a=1,b=2", cur(buf, sizeof(buf))))
			_exit(1);
		if (plabel_do((struct plabel_kv[]){ { "c", "3" } }, 1,
			      in_child, &st) || st)
			_exit(2);
		if (strcmp("a=1,b=2", cur(buf, sizeof(buf))))
			_exit(4);
		/* Handles made before fork still work in the child. */
		if (plabel_switch(l) || strcmp("h=x", cur(buf, sizeof(buf))))
			_exit(5);
		plabel_labels_free(l);
		if (plabel_clear() || plabel_get(NULL, 0))
			_exit(6);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* The parent is untouched by the child's calls. */
	EXPECT_STREQ("a=1,b=2", cur(buf, sizeof(buf)));
	EXPECT_EQ(0, plabel_switch(l));
	EXPECT_STREQ("h=x", cur(buf, sizeof(buf)));
	EXPECT_EQ(0, plabel_clear());
	plabel_labels_free(l);
}

static void *fork_from_thread(void *arg)
{
	char buf[256];
	int status;
	pid_t pid;

	if (plabel_set((struct plabel_kv[]){ { "t", "forker" } }, 1))
		return (void *)1L;
	pid = fork();
	if (pid < 0)
		return (void *)2L;
	if (pid == 0)
		_exit(strcmp("t=forker", cur(buf, sizeof(buf))) ? 1 : 0);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return (void *)3L;
	return NULL;
}

/* fork() while other threads use the library does not deadlock. */
TEST(fork_while_threads_busy)
{
	struct worker w[2];
	struct plabel_labels *shared;
	pthread_t th;
	void *ret;
	int i;

	shared = plabel_labels_new((struct plabel_kv[]){ { "shared", "yes" } },
				   1);
	ASSERT_NE(NULL, shared);
	for (i = 0; i < 2; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].id = i;
		w[i].shared = shared;
		ASSERT_EQ(0, pthread_create(&w[i].th, NULL, worker_main,
					    &w[i]));
	}
	for (i = 0; i < 20; i++) {
		ASSERT_EQ(0, pthread_create(&th, NULL, fork_from_thread, NULL));
		ASSERT_EQ(0, pthread_join(th, &ret));
		EXPECT_EQ(NULL, ret);
	}
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, pthread_join(w[i].th, NULL));
		EXPECT_EQ(0, w[i].bad);
	}
	plabel_labels_free(shared);
}

static volatile sig_atomic_t sig_seen, sig_bad;

/* A profiler-like handler: read the interrupted thread's labels. */
static void on_prof(int sig)
{
	struct plabel_kv kv[4];
	int n = plabel_get(kv, 4);

	sig_seen++;
	if (n < 0 || n > 2)
		sig_bad++;
	else if (n >= 1 && (kv[0].key[0] != 'a' || kv[0].value[0] != '1'))
		sig_bad++;
	else if (n == 2 && (kv[1].key[0] != 'b' || kv[1].value[0] != '2'))
		sig_bad++;
}

static void sig_inner(void *arg)
{
	int *bad = arg;

	if (plabel_get(NULL, 0) != 2)
		(*bad)++;
}

/* plabel_get from a signal handler while the thread changes labels. */
TEST(signal_handler_reads)
{
	struct itimerval it = { { 0, 200 }, { 0, 200 } };
	struct sigaction sa;
	struct timespec t0, t;
	int bad = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_prof;
	sa.sa_flags = SA_RESTART;
	ASSERT_EQ(0, sigaction(SIGPROF, &sa, NULL));
	ASSERT_EQ(0, plabel_clear());	/* first call outside the handler */
	ASSERT_EQ(0, setitimer(ITIMER_PROF, &it, NULL));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int i;

		for (i = 0; i < 1000; i++) {
			if (plabel_set((struct plabel_kv[]){ { "a", "1" } },
				       1))
				bad++;
			if (plabel_do((struct plabel_kv[]){ { "b", "2" } }, 1,
				      sig_inner, &bad))
				bad++;
			if (plabel_clear())
				bad++;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 1 && sig_seen < 200);
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_PROF, &it, NULL);
	EXPECT_EQ(0, bad);
	EXPECT_EQ(0, sig_bad);
	EXPECT_LT(0, sig_seen);
}

TEST_HARNESS_MAIN
