// SPDX-License-Identifier: GPL-2.0
/*
 * A context-switch-heavy load for the cost of the off-CPU hook: two
 * threads pass a byte back and forth over two pipes for MS milliseconds,
 * each blocking in read() at every turn, so every pass is a voluntary
 * switch out and a switch in. Prints "switches_per_s N" (two per round
 * trip). Usage: pingpong [MS] (default 2000).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int ping[2], pong[2];
static volatile int stop;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void *echo(void *arg)
{
	char c;

	while (read(ping[0], &c, 1) == 1 && c)
		if (write(pong[1], &c, 1) != 1)
			break;
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t ms = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000;
	uint64_t t0, end, rounds = 0;
	pthread_t t;
	char c = 1;

	if (!ms || pipe(ping) || pipe(pong) ||
	    pthread_create(&t, NULL, echo, NULL))
		return 2;
	t0 = now_ns();
	end = t0 + ms * 1000000ULL;
	while (now_ns() < end) {
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
			return 1;
		rounds++;
	}
	c = 0;
	if (write(ping[1], &c, 1) != 1)
		return 1;
	pthread_join(t, NULL);
	printf("switches_per_s %.0f\n",
	       2.0 * rounds * 1e9 / (double)(now_ns() - t0));
	return 0;
}
