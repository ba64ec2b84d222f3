// SPDX-License-Identifier: GPL-2.0
/*
 * The profile kinds (see kind.h).
 */
#include "plabel_uapi.h"

#include "kind.h"

const struct plabel_kind plabel_kinds[PLABEL_PROF_NKINDS] = {
	[PLABEL_PROF_CPU] = {
		.name = "cpu",
		.file = "cpu.pb.gz",
		.rec_type = PLABEL_REC_SAMPLE,
		.record_flag = PLABEL_RECORD_CPU,
		.nvalues = 2,
		.values = {
			{ "samples", "count" },
			{ "cpu", "nanoseconds" },
		},
		.period_value = 1,
		.period_is_sampling = 1,
	},
	[PLABEL_PROF_THREADCREATE] = {
		.name = "threadcreate",
		.file = "threadcreate.pb.gz",
		.rec_type = PLABEL_REC_THREAD,
		.record_flag = PLABEL_RECORD_THREADS,
		.nvalues = 1,
		.values = {
			{ "threadcreate", "count" },
		},
		.period_value = 0,
	},
};
