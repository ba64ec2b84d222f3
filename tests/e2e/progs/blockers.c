// SPDX-License-Identifier: GPL-2.0
/*
 * Three labeled threads that block until the program ends, for plabel
 * threads:
 *   job=reader   in read() of a pipe nobody writes     (block_read)
 *   job=sleeper  in nanosleep() of an hour              (block_sleep)
 *   job=locker   on a mutex the main thread holds       (block_lock)
 * The main thread prints "ready" once all three are blocked, then sleeps
 * until it is killed (or for 10 minutes).
 */
#include <plabel.h>
#include <pthread.h>
#include <unistd.h>

#include "burn.h"

static int pipefd[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start;

__attribute__((noinline)) static void block_read(void)
{
	char c;

	while (read(pipefd[0], &c, 1) < 0)
		;
}

__attribute__((noinline)) static void block_sleep(void)
{
	struct timespec ts = { 3600, 0 };

	while (nanosleep(&ts, &ts))
		;
}

__attribute__((noinline)) static void block_lock(void)
{
	pthread_mutex_lock(&lock);
	pthread_mutex_unlock(&lock);
}

struct blocker {
	const char *job;
	void (*block)(void);
};

static void *blocker_fn(void *arg)
{
	struct blocker *b = arg;
	struct plabel_kv kv = { "job", b->job };

	plabel_e2e_check(plabel_set(&kv, 1), "plabel_set");
	pthread_barrier_wait(&start);
	b->block();
	return NULL;
}

int main(void)
{
	static struct blocker b[] = {
		{ "reader", block_read },
		{ "sleeper", block_sleep },
		{ "locker", block_lock },
	};
	pthread_t t[3];
	struct timespec ts = { 0, 300000000 };

	if (pipe(pipefd))
		return 2;
	pthread_mutex_lock(&lock);
	pthread_barrier_init(&start, NULL, 4);
	for (int k = 0; k < 3; k++)
		plabel_e2e_check(pthread_create(&t[k], NULL, blocker_fn, &b[k]),
				 "pthread_create");
	pthread_barrier_wait(&start);
	nanosleep(&ts, NULL);	/* (they block right after the barrier) */
	printf("ready\n");
	fflush(stdout);
	sleep(600);
	return 0;
}
