// SPDX-License-Identifier: GPL-2.0
/*
 * Session setup shared by plabel record and plabel serve (see session.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "kind.h"
#include "plabel_uapi.h"
#include "session.h"

int plabel_parse_pids(const char *arg, int32_t *pids, uint32_t *n)
{
	const char *p = arg;

	*n = 0;
	while (*p) {
		char *end;
		long v;

		errno = 0;
		v = strtol(p, &end, 10);
		if (errno || end == p || v <= 0 || v > INT32_MAX ||
		    (*end && *end != ','))
			return -EINVAL;
		if (*n == PLABEL_MAX_PIDS)
			return -E2BIG;
		pids[(*n)++] = v;
		p = *end ? end + 1 : end;
	}
	return *n ? 0 : -EINVAL;
}

int plabel_parse_ulong(const char *arg, unsigned long lo, unsigned long hi,
		       unsigned long *out)
{
	unsigned long v;
	char *end;

	if (*arg < '0' || *arg > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

int plabel_parse_hz(const char *arg, unsigned long *hz)
{
	return plabel_parse_ulong(arg, 1, PLABEL_MAX_SAMPLE_HZ, hz);
}

int plabel_parse_callchain(const char *arg, uint32_t *mode)
{
	if (!strcmp(arg, "fp"))
		*mode = PLABEL_CALLCHAIN_FP;
	else if (!strcmp(arg, "dwarf"))
		*mode = PLABEL_CALLCHAIN_DWARF;
	else
		return -EINVAL;
	return 0;
}

const char *plabel_start_err(int err)
{
	switch (err) {
	case EPERM:
	case EACCES:
		return "recording needs CAP_PERFMON or root";
	case EBUSY:
		return "all kernel.plabel.max_sessions sessions are in use";
	case ESRCH:
		return "no such process";
	case EINVAL:
		return "the module rejected the session's settings (is -F above kernel.plabel.sample_hz's limit?)";
	default:
		return strerror(err);
	}
}

int plabel_session_start(int fd, const struct plabel_session_opts *o)
{
	struct plabel_session_start_args sa;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.size = sizeof(sa);
	sa.target = o->target;
	sa.callchain = o->callchain;
	sa.sample_hz = o->hz;
	sa.record = PLABEL_RECORD_KERNEL;
	for (i = 0; i < PLABEL_PROF_NKINDS; i++)
		if (!plabel_kinds[i].optional ||
		    (o->record & plabel_kinds[i].record_flag))
			sa.record |= plabel_kinds[i].record_flag;
	sa.offcpu_min_us = o->offcpu_min_us;
	if (o->heap_bytes) {
		sa.record |= PLABEL_RECORD_HEAP;
		sa.heap_bytes = o->heap_bytes;
	}
	if (o->target != PLABEL_TARGET_ALL) {
		sa.pids = (uintptr_t)o->pids;
		sa.npids = o->npids;
	}
	/*
	 * A module without the flags: records are read sooner, or what a
	 * command does before its exec is recorded too (and dropped by the
	 * reader), that is all.
	 */
	sa.flags = o->flags;
	for (;;) {
		if (!ioctl(fd, PLABEL_IOC_SESSION_START, &sa))
			return 0;
		if (errno != EINVAL || !sa.flags)
			return -errno;
		sa.flags = sa.flags & PLABEL_START_AT_EXEC ?
			   sa.flags & ~PLABEL_START_AT_EXEC : 0;
	}
}
