/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Decoder of the /dev/plabel record stream (include/uapi/plabel_uapi.h).
 *
 * The input is untrusted: every record's size, type-specific fixed part and
 * counts are checked against the bytes actually there before anything is
 * read, and nothing is read through an aligned pointer into the buffer (the
 * fixed parts are copied out), so a corrupt or truncated buffer yields an
 * error, never an out-of-bounds access. Records of unknown types are
 * returned as PLABEL_DEC_UNKNOWN for the caller to skip.
 */
#ifndef PLABEL_TOOLS_STREAM_H
#define PLABEL_TOOLS_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "plabel_uapi.h"

struct plabel_dec_str {
	const char *ptr;	/* not NUL-terminated */
	uint32_t len;
};

struct plabel_dec_label {
	struct plabel_dec_str key;
	struct plabel_dec_str value;
};

struct plabel_dec_rec {
	uint32_t type;		/* enum plabel_rec_type, or unknown */
	uint32_t size;		/* whole record, header included */
	const uint8_t *raw;	/* the record's bytes */
	union {
		struct plabel_rec_stream stream;
		struct {
			uint64_t id;
			uint32_t count;
			struct plabel_dec_label labels[PLABEL_MAX_LABELS];
		} labelset;
		struct {
			/* SAMPLE, THREAD, OFFCPU, ALLOC and THREADSTATE */
			struct plabel_rec_sample hdr;
			struct plabel_rec_alloc alloc;	/* ALLOC only */
			const uint8_t *ips;	/* nr_kernel + nr_user u64s */
			int has_regs;	/* regs, stack: set only then */
			uint64_t regs[PLABEL_REGS_NR];
			const uint8_t *stack;	/* hdr.stack_size bytes */
			/* PLABEL_SAMPLE_TLSCTX: the thread's context */
			struct plabel_rec_tlsctx tlsctx;	/* else 0 */
			const uint8_t *tlsctx_data;	/* tlsctx.len bytes */
		} sample;
		struct plabel_rec_lost lost;
		struct {
			struct plabel_rec_mmap hdr;
			struct plabel_dec_str path;
		} mmap;
		struct plabel_rec_exec exec;
		struct plabel_rec_comm comm;
		struct plabel_rec_free free;
		struct plabel_rec_offcpu_end offcpu_end;
		struct plabel_rec_sync sync;
	} u;
};

struct plabel_dec {
	const uint8_t *buf;
	size_t len;
	size_t pos;
};

void plabel_dec_init(struct plabel_dec *d, const void *buf, size_t len);

/*
 * Decode the next record into *rec. Returns 1 when a record was decoded,
 * 0 at the end of the buffer, -EBADMSG for a malformed record (the
 * decoder then stops: pos is left at the bad record).
 */
int plabel_dec_next(struct plabel_dec *d, struct plabel_dec_rec *rec);

/* ips[i] of a decoded SAMPLE/THREAD/OFFCPU/ALLOC record; i < nr_kernel + nr_user. */
uint64_t plabel_dec_ip(const struct plabel_dec_rec *rec, size_t i);

#endif /* PLABEL_TOOLS_STREAM_H */
