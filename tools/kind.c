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
	/* how long threads waited off their CPU, and how often */
	[PLABEL_PROF_OFFCPU] = {
		.name = "offcpu",
		.file = "offcpu.pb.gz",
		.rec_type = PLABEL_REC_OFFCPU,
		.record_flag = PLABEL_RECORD_OFFCPU,
		.optional = 1,
		.waits_only = 1,
		.nvalues = 2,
		.values = {
			{ "switches", "count" },
			{ "off-cpu", "nanoseconds" },
		},
		.period_value = 1,
		.default_type = "off-cpu",
	},
	/* CPU time and off-CPU time together: each thread's elapsed time */
	[PLABEL_PROF_WALL] = {
		.name = "wall",
		.file = "wall.pb.gz",
		.rec_type = PLABEL_REC_SAMPLE,
		.rec_type2 = PLABEL_REC_OFFCPU,
		.record_flag = PLABEL_RECORD_OFFCPU,
		.optional = 1,
		.nvalues = 1,
		.nanos_only = 1,
		.values = {
			{ "wall", "nanoseconds" },
		},
		.period_value = 0,
	},
	/*
	 * Go's heap profile: its four values in its order, its period type
	 * (space/bytes); the period, the sampling interval, is set by
	 * collect.c. No default type: viewers show the last, inuse_space.
	 */
	[PLABEL_PROF_HEAP] = {
		.name = "heap",
		.file = "heap.pb.gz",
		.rec_type = PLABEL_REC_ALLOC,
		.record_flag = PLABEL_RECORD_HEAP,
		.nvalues = 4,
		.values = {
			{ "alloc_objects", "count" },
			{ "alloc_space", "bytes" },
			{ "inuse_objects", "count" },
			{ "inuse_space", "bytes" },
		},
		.period_type = { "space", "bytes" },
		.optional = 1,
	},
	/*
	 * Each thread's state now (plabel threads, serve's goroutine path):
	 * never recorded, so no record flag; record and serve's windows
	 * make none
	 */
	[PLABEL_PROF_THREADS] = {
		.name = "threads",
		.file = "threads.pb.gz",
		.rec_type = PLABEL_REC_THREADSTATE,
		.optional = 1,
		.nvalues = 1,
		.values = {
			{ "threads", "count" },
		},
		.period_value = 0,
	},
};

static const char *const plabel_wait_names[] = {
	[PLABEL_WAIT_OTHER] = "other",
	[PLABEL_WAIT_SLEEP] = "sleep",
	[PLABEL_WAIT_IO] = "io",
	[PLABEL_WAIT_FUTEX] = "futex",
	[PLABEL_WAIT_PREEMPTED] = "preempted",
};

const char *plabel_wait_name(uint32_t kind)
{
	size_t n = sizeof(plabel_wait_names) / sizeof(plabel_wait_names[0]);

	return kind < n && plabel_wait_names[kind] ? plabel_wait_names[kind] :
	       "other";
}
