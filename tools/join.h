/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Joins each OFFCPU record (a thread's switch-out, with its stack) with its
 * OFFCPU_END (when it ran again), on (tid, out_ns). The two come from the
 * rings of different CPUs, in either order; a wait shorter than the
 * session's minimum has no END, and a lost OFFCPU leaves its END alone.
 *
 * A thread has one wait going on at a time, but a read copies one CPU's
 * ring after another: the OFFCPU records of all the waits a thread began
 * since the last read can come before any of their ENDs, from another
 * CPU's ring, or the other way round. Each half waits until its other one
 * comes or cannot come any more (what was stamped before the settled time
 * has all been fed): an OFFCPU record with a later one of the thread
 * stamped before settled, an END whose OFFCPU record, stamped before
 * settled, is not in. Per thread at most PLABEL_JOIN_MAX of each half
 * wait (the oldest goes first), which only a settled time held back for
 * long reaches. OFFCPU records waiting are copied.
 */
#ifndef PLABEL_TOOLS_JOIN_H
#define PLABEL_TOOLS_JOIN_H

#include <stddef.h>
#include <stdint.h>

#include "table.h"

#define PLABEL_JOIN_MAX		1024

struct plabel_join_thr;

struct plabel_join {
	struct plabel_join_thr *thrs;
	size_t n, cap;
	struct plabel_itab tab;		/* by tid */
	uint64_t dropped;		/* ENDs whose OFFCPU never came */
};

void plabel_join_release(struct plabel_join *j);

/*
 * The OFFCPU record raw (size bytes) of tid, switched out at out_ns.
 * 1 when its END came already: *end_ns is when it ran again, and the
 * caller takes the record now; 0 when it is kept (copied) for its END;
 * -ENOMEM. settled: every record stamped before it has been fed.
 */
int plabel_join_begin(struct plabel_join *j, uint32_t tid, uint64_t out_ns,
		      const void *raw, uint32_t size, uint64_t settled,
		      uint64_t *end_ns);

/*
 * The END of tid's wait from out_ns to end_ns. 1 when its OFFCPU record
 * came already: *raw and *size are its copy, which the caller frees; 0
 * when the END is kept for it; -ENOMEM.
 */
int plabel_join_end(struct plabel_join *j, uint32_t tid, uint64_t out_ns,
		    uint64_t end_ns, uint64_t settled, uint8_t **raw,
		    uint32_t *size);

#endif /* PLABEL_TOOLS_JOIN_H */
