// SPDX-License-Identifier: GPL-2.0
/*
 * Three labeled threads that wait in different ways, each ten times,
 * with a little work between:
 *   endpoint=/api/search  nanosleep() of 4 units     (wait=sleep)
 *   endpoint=/api/upload  read() of a pipe the main thread writes a
 *                         byte to every 2 units       (wait=io)
 *   endpoint=/api/login   pthread_cond_wait() for the main thread's
 *                         signal, every unit           (wait=futex)
 * The main thread ticks until the login thread has had its ten, so a
 * login thread that falls behind (a tick that comes while it works is
 * not one it waits for) waits longer instead of for ever.
 * At exit each thread's truth is printed: "thread ENDPOINT elapsed_ns=N
 * cpu_ns=N", its time from setting its labels to clearing them and the
 * CPU time it used meanwhile; elapsed less CPU is the time it spent off
 * its CPU.
 * Usage: waiters [UNIT_MS] (default 10).
 */
#include <plabel.h>
#include <pthread.h>
#include <unistd.h>

#include "burn.h"

#define ROUNDS	10

static int unit_ms = 10;
static int pipefd[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tick = PTHREAD_COND_INITIALIZER;
static unsigned int ticks;
static int login_done;		/* atomic: no lock after its clocks */
static pthread_barrier_t start;
static volatile uint64_t sink;

struct waiter {
	const char *endpoint;
	void (*wait)(void);
	int64_t elapsed_ns, cpu_ns;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts))
		;
}

/* About a millisecond of CPU time. */
__attribute__((noinline)) static void work(void)
{
	int64_t end = plabel_e2e_cpu_ns() + 1000000;
	uint64_t x = 1;

	while (plabel_e2e_cpu_ns() < end)
		for (int i = 0; i < 1000; i++)
			x = x * 6364136223846793005ULL + 1;
	sink = x;
}

__attribute__((noinline)) static void wait_search(void)
{
	sleep_ms(4 * unit_ms);
}

__attribute__((noinline)) static void wait_upload(void)
{
	char c;

	if (read(pipefd[0], &c, 1) != 1)
		exit(1);
}

__attribute__((noinline)) static void wait_login(void)
{
	unsigned int seen;

	pthread_mutex_lock(&lock);
	seen = ticks;
	while (ticks == seen)
		pthread_cond_wait(&tick, &lock);
	pthread_mutex_unlock(&lock);
}

static void *waiter_fn(void *arg)
{
	struct waiter *w = arg;
	struct plabel_kv kv = { "endpoint", w->endpoint };
	int64_t t0, c0;

	/* the clocks run while the labels are set */
	plabel_e2e_check(plabel_set(&kv, 1), "plabel_set");
	t0 = now_ns();
	c0 = plabel_e2e_cpu_ns();
	pthread_barrier_wait(&start);
	for (int i = 0; i < ROUNDS; i++) {
		work();
		w->wait();
	}
	plabel_e2e_check(plabel_set(NULL, 0), "plabel_set");
	w->cpu_ns = plabel_e2e_cpu_ns() - c0;
	w->elapsed_ns = now_ns() - t0;
	if (w->wait == wait_login)
		__atomic_store_n(&login_done, 1, __ATOMIC_RELAXED);
	return NULL;
}

int main(int argc, char **argv)
{
	struct waiter w[] = {
		{ .endpoint = "/api/search", .wait = wait_search },
		{ .endpoint = "/api/upload", .wait = wait_upload },
		{ .endpoint = "/api/login", .wait = wait_login },
	};
	pthread_t t[3];

	if (argc > 1)
		unit_ms = atoi(argv[1]);
	if (unit_ms < 1 || unit_ms > 1000 || pipe(pipefd))
		return 2;
	pthread_barrier_init(&start, NULL, 4);
	for (int k = 0; k < 3; k++)
		plabel_e2e_check(pthread_create(&t[k], NULL, waiter_fn, &w[k]),
				 "pthread_create");
	pthread_barrier_wait(&start);
	/*
	 * A tick every unit, a byte to the pipe every second one (ten in
	 * all: the pipe keeps those upload has not read yet).
	 */
	for (int i = 1, done = 0; !done || i <= 2 * ROUNDS; i++) {
		sleep_ms(unit_ms);
		pthread_mutex_lock(&lock);
		ticks++;
		pthread_cond_signal(&tick);
		pthread_mutex_unlock(&lock);
		done = __atomic_load_n(&login_done, __ATOMIC_RELAXED);
		if (i % 2 == 0 && i <= 2 * ROUNDS &&
		    write(pipefd[1], "x", 1) != 1)
			return 1;
	}
	for (int k = 0; k < 3; k++)
		pthread_join(t[k], NULL);
	for (int k = 0; k < 3; k++)
		printf("thread %s elapsed_ns=%lld cpu_ns=%lld\n", w[k].endpoint,
		       (long long)w[k].elapsed_ns, (long long)w[k].cpu_ns);
	return 0;
}
