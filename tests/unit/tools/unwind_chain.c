// SPDX-License-Identifier: GPL-2.0
/*
 * Compiled with -fomit-frame-pointer (tools/build.mk): only .eh_frame can
 * unwind through these functions.
 */
#include <string.h>

#include "unwind_chain.h"

__attribute__((noinline, noclone))
int plabel_snap_take(struct plabel_snap *s, uint64_t stack_end, int x)
{
	uint64_t *r = s->regs, sp;
	size_t n;

	/* one asm: every register as of the same instruction */
	asm volatile(
		"movq %%rax, 0(%0)\n\t"
		"movq %%rdx, 8(%0)\n\t"
		"movq %%rcx, 16(%0)\n\t"
		"movq %%rbx, 24(%0)\n\t"
		"movq %%rsi, 32(%0)\n\t"
		"movq %%rdi, 40(%0)\n\t"
		"movq %%rbp, 48(%0)\n\t"
		"movq %%rsp, 56(%0)\n\t"
		"movq %%r8, 64(%0)\n\t"
		"movq %%r9, 72(%0)\n\t"
		"movq %%r10, 80(%0)\n\t"
		"movq %%r11, 88(%0)\n\t"
		"movq %%r12, 96(%0)\n\t"
		"movq %%r13, 104(%0)\n\t"
		"movq %%r14, 112(%0)\n\t"
		"movq %%r15, 120(%0)\n\t"
		"1: leaq 1b(%%rip), %%rax\n\t"
		"movq %%rax, 128(%0)\n\t"
		: : "r"(r) : "rax", "memory");
	sp = r[PLABEL_REG_RSP];
	n = stack_end - sp;
	if (n > PLABEL_SNAP_STACK)
		n = PLABEL_SNAP_STACK;
	memcpy(s->stack, (void *)(uintptr_t)sp, n);
	s->stack_size = n;
	return x + 1;
}

__attribute__((noinline, noclone))
int plabel_chain_c(struct plabel_snap *s, uint64_t stack_end, int x)
{
	int r = plabel_snap_take(s, stack_end, x * 2);

	asm volatile("" : "+r"(r));
	return r + 3;
}

__attribute__((noinline, noclone))
int plabel_chain_b(struct plabel_snap *s, uint64_t stack_end, int x)
{
	int r = plabel_chain_c(s, stack_end, x + 5);

	asm volatile("" : "+r"(r));
	return r * 7;
}

__attribute__((noinline, noclone))
int plabel_chain_a(struct plabel_snap *s, uint64_t stack_end, int x)
{
	int r = plabel_chain_b(s, stack_end, x - 1);

	asm volatile("" : "+r"(r));
	return r - 11;
}

/* Recursion: consecutive frames with the same return address. */
__attribute__((noinline, noclone))
int plabel_chain_rec(struct plabel_snap *s, uint64_t stack_end, int depth)
{
	int r;

	if (!depth)
		return plabel_snap_take(s, stack_end, 0);
	r = plabel_chain_rec(s, stack_end, depth - 1);
	asm volatile("" : "+r"(r));
	return r + 1;
}
