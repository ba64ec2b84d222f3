/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A call chain built without frame pointers that ends in a snapshot of its
 * own registers and stack, like the kernel takes for `-g dwarf`.
 */
#ifndef PLABEL_TESTS_UNWIND_CHAIN_H
#define PLABEL_TESTS_UNWIND_CHAIN_H

#include <stddef.h>
#include <stdint.h>

#include "plabel_uapi.h"

#define PLABEL_SNAP_STACK	16384

struct plabel_snap {
	uint64_t regs[PLABEL_REGS_NR];
	size_t stack_size;
	uint8_t stack[PLABEL_SNAP_STACK];
};

/* Calls chain_b -> chain_c -> plabel_snap_take(s); returns a value that
 * depends on every level so no call can be a tail call. */
int plabel_chain_a(struct plabel_snap *s, uint64_t stack_end, int x);
int plabel_chain_b(struct plabel_snap *s, uint64_t stack_end, int x);
int plabel_chain_c(struct plabel_snap *s, uint64_t stack_end, int x);
int plabel_snap_take(struct plabel_snap *s, uint64_t stack_end, int x);
/* depth nested calls of itself, then plabel_snap_take(s) */
int plabel_chain_rec(struct plabel_snap *s, uint64_t stack_end, int depth);

#endif /* PLABEL_TESTS_UNWIND_CHAIN_H */
