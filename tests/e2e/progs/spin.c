// SPDX-License-Identifier: GPL-2.0
/*
 * An unmodified program (no libplabel): burns CPU in parent_spin(), forks
 * a child that burns in child_spin(). `plabel run -l ..` must label both.
 * Usage: spin [MS] (default 400, each).
 */
#include <sys/wait.h>
#include <unistd.h>

#include "burn.h"

static volatile uint64_t plabel_sink;

__attribute__((noinline)) static void child_spin(int64_t ns)
{
	int64_t end = plabel_e2e_cpu_ns() + ns;
	uint64_t x = 3;

	while (plabel_e2e_cpu_ns() < end)
		for (int i = 0; i < 100000; i++)
			plabel_sink = x = x * 2862933555777941757ULL + 7;
}

__attribute__((noinline)) static void parent_spin(int64_t ns)
{
	int64_t end = plabel_e2e_cpu_ns() + ns;
	uint64_t x = 5;

	while (plabel_e2e_cpu_ns() < end)
		for (int i = 0; i < 100000; i++)
			plabel_sink = x = x * 6364136223846793005ULL + 9;
}

int main(int argc, char **argv)
{
	int64_t ns = (argc > 1 ? atoi(argv[1]) : 400) * 1000000LL;
	pid_t pid = fork();

	if (pid < 0)
		return 1;
	if (pid == 0) {
		child_spin(ns);
		_exit(0);
	}
	parent_spin(ns);
	waitpid(pid, NULL, 0);
	return 0;
}
