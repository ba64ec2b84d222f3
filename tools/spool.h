/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The dwarf spool: register and stack snapshots kept for later.
 *
 * Unwinding a dwarf snapshot takes far longer than collecting a sample,
 * and on arrival it competes with the profiled program for the CPUs: the
 * reader falls behind and records are lost. So the snapshots (registers
 * and stack copy, up to 8 KiB a sample) are appended to an unlinked
 * temporary file and unwound at the end, in arrival order; the sample in
 * memory keeps the chain the record itself carries until then. The file
 * is the bytes written so far, then wbuf: what could not be written yet,
 * or at all (a full disk), stays there and is read from there.
 *
 * The first PLABEL_SPOOL_BUF bytes of snapshots are only copied to wbuf:
 * a short recording, or one whose only snapshots are thread creations,
 * neither creates the file nor writes it while the program runs. After
 * that, the snapshots of a buffer being fed are not copied: they are
 * written from the buffer itself with pwritev() once it has been fed
 * (while its caller still holds it), each behind its plabel_spool_ent in
 * ents. wbuf keeps room for all of them, to take what a failed write
 * leaves.
 */
#ifndef PLABEL_TOOLS_SPOOL_H
#define PLABEL_TOOLS_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "plabel_uapi.h"

/*
 * An unlinked file in $TMPDIR (else /tmp), read and written: nothing is
 * left behind however plabel ends. A descriptor, or -1 with errno.
 */
int plabel_tmpfile(void);

/* A snapshot read back: valid until the next plabel_spool_next(). */
struct plabel_snapshot {
	uint64_t regs[PLABEL_REGS_NR];
	const uint8_t *stack;
	uint32_t stack_size;
};

struct plabel_spool_ent {
	uint32_t stack_size;	/* bytes after this, padded to 8 */
	uint32_t reserved;
	uint64_t regs[PLABEL_REGS_NR];
};

#define PLABEL_SPOOL_BUF	(1U << 20)
#define PLABEL_SPOOL_IOV	768	/* 3 a snapshot, at most IOV_MAX */

struct plabel_spool {
	int fd;			/* -1: not opened (yet) */
	int broken;		/* cannot be created or written: unwind now */
	uint64_t flen;		/* bytes in the file */
	uint8_t *wbuf;		/* bytes after those */
	size_t wlen, wcap;
	uint64_t rpos;		/* next byte to read, file then wbuf */
	uint8_t *rbuf;		/* file bytes [roff, roff + rlen) */
	uint64_t roff;
	size_t rlen;
	uint8_t *stack;		/* a snapshot's stack while it is unwound */
	size_t stack_cap;
	struct plabel_snapshot cur;	/* plabel_spool_next()'s */
	struct iovec iov[PLABEL_SPOOL_IOV];	/* queued, not written yet */
	struct plabel_spool_ent ents[PLABEL_SPOOL_IOV / 3];
	int niov, nents;
	size_t iovlen;		/* bytes in iov */
};

void plabel_spool_init(struct plabel_spool *sp);
/* Close the file and free the buffers. */
void plabel_spool_release(struct plabel_spool *sp);

/* Set when the spool takes no more: snapshots are to be unwound now. */
static inline int plabel_spool_broken(const struct plabel_spool *sp)
{
	return sp->broken;
}

/* Room in wbuf for n bytes more than it and the queue hold. 0 or -1. */
int plabel_spool_reserve(struct plabel_spool *sp, size_t n);

/*
 * Append a snapshot: regs, and stack_size bytes at stack, which may stay
 * queued (not copied) until plabel_spool_sync(). All or nothing: 0, or -1
 * when it is not spooled (then it is to be unwound now).
 */
int plabel_spool_add(struct plabel_spool *sp,
		     const uint64_t regs[PLABEL_REGS_NR], const void *stack,
		     uint32_t stack_size);

/*
 * Write the queued snapshots, before the memory they are in goes away.
 * What cannot be written goes to wbuf, and the spool takes no more.
 */
void plabel_spool_sync(struct plabel_spool *sp);

/* The next snapshot, in the order added. 0, -EIO or -ENOMEM. */
int plabel_spool_next(struct plabel_spool *sp,
		      const struct plabel_snapshot **snap);

/* Every snapshot has been read: give the file's space back. */
void plabel_spool_rewind(struct plabel_spool *sp);

#endif /* PLABEL_TOOLS_SPOOL_H */
