// SPDX-License-Identifier: GPL-2.0
/*
 * `-g dwarf` unwinding (tools/unwind.c) of a real snapshot: this process
 * calls a chain of functions built without frame pointers
 * (tests/unit/tools/unwind_chain.c), the last one copies its registers and
 * stack like the kernel does, and the unwound, symbolized chain must name
 * the chain's functions in order and go on into this test.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kselftest/kselftest_harness.h"

#include "../../tools/symbolize.h"
#include "../../tools/unwind.h"
#include "tools/unwind_chain.h"

static uint64_t stack_end(void)
{
	char line[512];
	uint64_t lo, hi, end = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]") &&
		    sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) == 2)
			end = hi;
	fclose(f);
	return end;
}

/* The outermost function name of ip (leaf: exact, else a return address). */
static const char *name_of(struct plabel_syms *syms,
			   const struct plabel_map *maps, size_t n,
			   uint64_t ip, int leaf)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	const struct plabel_map *m = plabel_maps_find(maps, n, ip);
	uint64_t bias;
	int k;

	if (!m || !m->elf || plabel_elf_bias(m->elf, m->start, m->offset,
					     &bias))
		return NULL;
	k = plabel_elf_symbolize(m->elf, ip - bias - !leaf, fr,
				 PLABEL_SYM_MAX_FRAMES);
	return k > 0 ? fr[k - 1].function : NULL;
}

static int plabel_unwind_and_check(struct __test_metadata *_metadata,
				   struct plabel_snap *s)
{
	static const char *const want[] = {
		"plabel_snap_take", "plabel_chain_c", "plabel_chain_b",
		"plabel_chain_a", "plabel_run_chain",
	};
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_unwinder *u = plabel_unwinder_new();
	struct plabel_map *maps;
	uint64_t ips[64];
	size_t n, i, w = 0;
	int nips;

	ASSERT_NE(NULL, syms);
	ASSERT_NE(NULL, u);
	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	nips = plabel_unwind(u, maps, n, s->regs, s->stack, s->stack_size,
			     ips, 64);
	for (i = 0; i < (size_t)nips; i++) {
		const char *name = name_of(syms, maps, n, ips[i], i == 0);

		TH_LOG("frame %zu: %#" PRIx64 " %s", i, ips[i],
		       name ? name : "?");
		if (w < sizeof(want) / sizeof(want[0]) && name &&
		    !strcmp(name, want[w]))
			w++;
	}
	/* the chain, in order, with nothing of it missing */
	EXPECT_EQ(sizeof(want) / sizeof(want[0]), w);
	EXPECT_STREQ("plabel_snap_take", name_of(syms, maps, n, ips[0], 1));
	EXPECT_STREQ("plabel_chain_c", name_of(syms, maps, n, ips[1], 0));
	EXPECT_STREQ("plabel_chain_b", name_of(syms, maps, n, ips[2], 0));
	EXPECT_STREQ("plabel_chain_a", name_of(syms, maps, n, ips[3], 0));
	plabel_maps_free(maps, n);
	plabel_unwinder_free(u);
	plabel_syms_free(syms);
	return 0;
}

__attribute__((noinline)) int plabel_run_chain(struct plabel_snap *s,
					       uint64_t end);
__attribute__((noinline)) int plabel_run_chain(struct plabel_snap *s,
					       uint64_t end)
{
	int r = plabel_chain_a(s, end, 4);

	asm volatile("" : "+r"(r));
	return r;
}

TEST(unwind_snapshot_without_frame_pointers)
{
	struct plabel_snap *s = calloc(1, sizeof(*s));
	uint64_t end = stack_end();

	ASSERT_NE(NULL, s);
	ASSERT_NE(0, end);
	plabel_run_chain(s, end);
	ASSERT_LT(64, s->stack_size);
	plabel_unwind_and_check(_metadata, s);
	free(s);
}

TEST(unwind_recursion)
{
	struct plabel_snap *s = calloc(1, sizeof(*s));
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_unwinder *u = plabel_unwinder_new();
	struct plabel_map *maps;
	uint64_t ips[64];
	size_t n;
	int nips, i, rec = 0;

	ASSERT_NE(NULL, s);
	plabel_chain_rec(s, stack_end(), 6);
	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	nips = plabel_unwind(u, maps, n, s->regs, s->stack, s->stack_size,
			     ips, 64);
	for (i = 1; i < nips; i++) {
		const char *name = name_of(syms, maps, n, ips[i], 0);

		if (name && !strcmp(name, "plabel_chain_rec"))
			rec++;
	}
	/* the outer call plus six nested ones */
	EXPECT_EQ(7, rec);
	plabel_maps_free(maps, n);
	plabel_unwinder_free(u);
	plabel_syms_free(syms);
	free(s);
}

TEST(unwind_truncated_stack_stops_cleanly)
{
	struct plabel_snap *s = calloc(1, sizeof(*s));
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_unwinder *u = plabel_unwinder_new();
	struct plabel_map *maps;
	uint64_t ips[64];
	size_t n;
	int nips;

	ASSERT_NE(NULL, s);
	plabel_run_chain(s, stack_end());
	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	/* 8 bytes of stack: the leaf is known, little more */
	nips = plabel_unwind(u, maps, n, s->regs, s->stack, 8, ips, 64);
	ASSERT_LE(1, nips);
	EXPECT_EQ(s->regs[PLABEL_REG_RIP], ips[0]);
	EXPECT_GT(5, nips);
	/* no mappings at all */
	nips = plabel_unwind(u, NULL, 0, s->regs, s->stack, s->stack_size,
			     ips, 64);
	EXPECT_LE(1, nips);
	plabel_maps_free(maps, n);
	plabel_unwinder_free(u);
	plabel_syms_free(syms);
	free(s);
}

TEST_HARNESS_MAIN
