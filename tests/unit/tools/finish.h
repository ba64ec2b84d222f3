/* SPDX-License-Identifier: GPL-2.0 */
/*
 * plabel_collect_finish() for tests that look at the cpu and threadcreate
 * profiles by name.
 */
#ifndef PLABEL_TESTS_FINISH_H
#define PLABEL_TESTS_FINISH_H

#include "../../../tools/collect.h"

static inline int finish_cpu_tc(struct plabel_collect *c, int64_t time_nanos,
				int64_t duration_nanos,
				struct plabel_prof **cpu,
				struct plabel_prof **tc)
{
	struct plabel_prof *profs[PLABEL_PROF_NKINDS];
	int ret, k;

	ret = plabel_collect_finish(c, time_nanos, duration_nanos, profs);
	if (ret)
		return ret;
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		if (k != PLABEL_PROF_CPU && k != PLABEL_PROF_THREADCREATE)
			plabel_prof_free(profs[k]);
	*cpu = profs[PLABEL_PROF_CPU];
	*tc = profs[PLABEL_PROF_THREADCREATE];
	return 0;
}

#endif /* PLABEL_TESTS_FINISH_H */
