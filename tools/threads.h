/* SPDX-License-Identifier: GPL-2.0 */
/*
 * plabel threads: each thread of a process, its labels, state and stack
 * now (PLABEL_IOC_THREADS_GET), as a threads profile (kind threads,
 * sample type threads/count) and its text view, which serve's goroutine
 * path shares.
 */
#ifndef PLABEL_TOOLS_THREADS_H
#define PLABEL_TOOLS_THREADS_H

#include <stdint.h>
#include <stdio.h>

#include "profile.h"

/*
 * The threads profile of the processes pids[n] (each thread a sample with
 * its labels, "state", "wait", "process", "thread" and pid/tid) into
 * *out; callchain an enum plabel_callchain. Of several processes, those
 * gone (-ESRCH) or that the caller may not read (-EACCES) are left out
 * and counted in *skipped (may be NULL); threads the kernel left out
 * (another user's, in a process the caller may read) are counted in the
 * profile's comment "threads left out (not readable)". 0 or a negative
 * errno (-ENOMEM, or the ioctl's error).
 */
int plabel_threads_profile(int fd, const int32_t *pids, uint32_t n,
			   uint32_t callchain, struct plabel_prof **out,
			   uint32_t *skipped);

/*
 * The text view of a threads profile, like Go's goroutine profile at
 * debug=1: "threads profile: total N", then one group per distinct stack
 * and labels (pid, tid and the "thread" name left out, so that threads
 * doing the same thing fall together), the most threads first:
 *
 *   COUNT @ ADDR ADDR ...
 *   # labels: {"key":"value", ...}
 *   #	ADDR	FUNCTION	FILE:LINE
 *
 * 0 or -ENOMEM (-EIO when out fails).
 */
int plabel_threads_text(const struct plabel_prof *p, FILE *out);

#endif /* PLABEL_TOOLS_THREADS_H */
