// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for the record stream: the decoder (tools/stream.c)
 * and everything a decoded record reaches in `plabel record` (the
 * collector, symbolization, the dwarf unwinder on fuzzed registers and
 * stacks, the profile builder and encoder). The input is one read()'s
 * worth of records, as /dev/plabel would return it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collect.h"
#include "profile.h"
#include "stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct plabel_syms *syms;
	struct plabel_prof *profs[PLABEL_PROF_NKINDS] = { NULL };
	struct plabel_dec_rec *r;
	struct plabel_collect *c;
	struct plabel_dec d;
	uint8_t *copy, *enc;
	size_t len, i, k;

	/* the ELF cache survives between inputs, as in a long recording */
	if (!syms)
		syms = plabel_syms_new();
	if (!syms)
		return 0;

	/* a private copy, so reads past the end are caught */
	copy = malloc(size ? size : 1);
	r = malloc(sizeof(*r));
	if (!copy || !r)
		goto out;
	memcpy(copy, data, size);

	/* the decoder alone: every field of every record it accepts */
	plabel_dec_init(&d, copy, size);
	while (plabel_dec_next(&d, r) > 0) {
		volatile uint64_t sink = 0;

		switch (r->type) {
		case PLABEL_REC_LABELSET:
			for (i = 0; i < r->u.labelset.count; i++)
				sink += r->u.labelset.labels[i].key.ptr[0] +
					(r->u.labelset.labels[i].value.len ?
					 r->u.labelset.labels[i].value.ptr[
					 r->u.labelset.labels[i].value.len - 1] :
					 0);
			break;
		case PLABEL_REC_SAMPLE:
		case PLABEL_REC_THREAD:
		case PLABEL_REC_OFFCPU:
			for (i = 0; i < (size_t)r->u.sample.hdr.nr_kernel +
				    r->u.sample.hdr.nr_user; i++)
				sink += plabel_dec_ip(r, i);
			if (r->u.sample.has_regs && r->u.sample.hdr.stack_size)
				sink += r->u.sample.stack[
					r->u.sample.hdr.stack_size - 1];
			break;
		case PLABEL_REC_MMAP:
			sink += r->u.mmap.path.ptr[r->u.mmap.path.len - 1];
			break;
		case PLABEL_REC_OFFCPU_END:
			sink += r->u.offcpu_end.time_ns - r->u.offcpu_end.out_ns;
			break;
		}
		(void)sink;
	}

	/* and all the way to a profile */
	c = plabel_collect_new(syms, 0);
	if (!c)
		goto out;
	plabel_collect_buffer(c, copy, size);
	if (!plabel_collect_finish(c, 0, 0, profs)) {
		for (k = 0; k < PLABEL_PROF_NKINDS; k++) {
			if (!plabel_prof_encode(profs[k], &enc, &len))
				free(enc);
			plabel_prof_free(profs[k]);
		}
	}
	plabel_collect_free(c);
out:
	free(r);
	free(copy);
	return 0;
}
