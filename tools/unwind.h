/* SPDX-License-Identifier: GPL-2.0 */
/*
 * `-g dwarf` unwinding of a recorded sample: user registers plus a copy of
 * the stack from RSP up, unwound with libunwind's remote API against the
 * .eh_frame_hdr/.eh_frame of the ELF files mapped in the process.
 */
#ifndef PLABEL_TOOLS_UNWIND_H
#define PLABEL_TOOLS_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "plabel_uapi.h"
#include "symbolize.h"

struct plabel_unwinder;

struct plabel_unwinder *plabel_unwinder_new(void);
void plabel_unwinder_free(struct plabel_unwinder *u);

/*
 * Unwind: regs[PLABEL_REGS_NR] in enum plabel_reg order, stack_size bytes
 * copied from regs[PLABEL_REG_RSP], maps the process's executable file
 * mappings. Writes up to max instruction pointers, leaf first (the first
 * is regs[PLABEL_REG_RIP], the rest return addresses). Returns the count,
 * or a negative errno (-ENOMEM).
 */
int plabel_unwind(struct plabel_unwinder *u, const struct plabel_map *maps,
		  size_t nmaps, const uint64_t *regs, const void *stack,
		  size_t stack_size, uint64_t *ips, size_t max);

/*
 * How many unwindings came from the unwinder's memo: a sample with the
 * maps, ip, stack pointer and copy size of one unwound before, whose
 * registers and stack words that unwinding read are all the same, gets
 * its result without libunwind (a thread waiting where it waited before).
 */
uint64_t plabel_unwinder_memo_hits(const struct plabel_unwinder *u);

#endif /* PLABEL_TOOLS_UNWIND_H */
