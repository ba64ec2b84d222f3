/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers of the e2e test programs: burn a given amount of this thread's
 * CPU time (not wall time, so ratios hold however busy the VM is).
 */
#ifndef PLABEL_E2E_BURN_H
#define PLABEL_E2E_BURN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline int64_t plabel_e2e_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void plabel_e2e_check(int ret, const char *what)
{
	if (ret) {
		fprintf(stderr, "%s failed: %d\n", what, ret);
		exit(1);
	}
}

#endif /* PLABEL_E2E_BURN_H */
