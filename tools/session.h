/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Starting a session on /dev/plabel, shared by record and serve: the
 * options both take (-F, -g, -p) and the PLABEL_IOC_SESSION_START call.
 */
#ifndef PLABEL_TOOLS_SESSION_H
#define PLABEL_TOOLS_SESSION_H

#include <stdint.h>

/* "PID[,PID..]" into pids[PLABEL_MAX_PIDS]. 0, -EINVAL or -E2BIG. */
int plabel_parse_pids(const char *arg, int32_t *pids, uint32_t *n);

/*
 * A decimal number lo..hi, digits only (no sign, space or suffix). 0 or
 * -EINVAL.
 */
int plabel_parse_ulong(const char *arg, unsigned long lo, unsigned long hi,
		       unsigned long *out);

/* -F: 1..PLABEL_MAX_SAMPLE_HZ. 0 or -EINVAL. */
int plabel_parse_hz(const char *arg, unsigned long *hz);

/* -g: "fp" or "dwarf" into PLABEL_CALLCHAIN_*. 0 or -EINVAL. */
int plabel_parse_callchain(const char *arg, uint32_t *mode);

/* What a failed PLABEL_IOC_SESSION_START's errno means, for one message. */
const char *plabel_start_err(int err);

struct plabel_session_opts {
	uint32_t target;	/* enum plabel_target */
	uint32_t callchain;	/* enum plabel_callchain */
	unsigned long hz;	/* 0: the sysctl's default */
	const int32_t *pids;	/* PIDS and TREE targets */
	uint32_t npids;
	uint32_t record;	/* PLABEL_RECORD_* of the optional kinds asked */
	uint32_t offcpu_min_us;	/* 0: the sysctl's default */
	uint64_t heap_bytes;	/* heap records at this interval; 0: none */
	uint32_t flags;		/* PLABEL_START_*, dropped if not known */
};

/*
 * Start a session on fd recording every profile kind (kind.h) but the
 * optional ones not in o->record (the heap's: with heap_bytes), and
 * kernel frames. 0 or -errno (see plabel_start_err()).
 */
int plabel_session_start(int fd, const struct plabel_session_opts *o);

#endif /* PLABEL_TOOLS_SESSION_H */
