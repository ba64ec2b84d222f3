// SPDX-License-Identifier: GPL-2.0
/*
 * `-g dwarf` unwinding (tools/unwind.c) of a real snapshot: this process
 * calls a chain of functions built without frame pointers
 * (tests/unit/tools/unwind_chain.c), the last one copies its registers and
 * stack like the kernel does, and the unwound, symbolized chain must name
 * the chain's functions in order and go on into this test.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kselftest/kselftest_harness.h"

#include "../../tools/collect.h"
#include "../../tools/symbolize.h"
#include "../../tools/unwind.h"
#include "tools/finish.h"
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

/* A fresh unwinder's unwinding of (regs, stack): what no memo gives. */
static int unwind_fresh(const struct plabel_map *maps, size_t n,
			const uint64_t *regs, const uint8_t *stack,
			size_t size, uint64_t *ips)
{
	struct plabel_unwinder *f = plabel_unwinder_new();
	int k;

	if (!f)
		return -1;
	k = plabel_unwind(f, maps, n, regs, stack, size, ips, 64);
	plabel_unwinder_free(f);
	return k;
}

/*
 * A forged stack pointer with bit 63 set: the memo still tells its stack
 * reads from its register reads, and answers the same sample again.
 */
TEST(unwind_memo_with_a_high_stack_pointer)
{
	struct plabel_snap *s = calloc(1, sizeof(*s));
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_unwinder *u = plabel_unwinder_new();
	uint64_t regs[PLABEL_REGS_NR], want[64], ips[64], h0;
	struct plabel_map *maps;
	size_t n;
	int k1, k2;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, u);
	plabel_run_chain(s, stack_end());
	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	memcpy(regs, s->regs, sizeof(regs));
	regs[PLABEL_REG_RSP] |= 1ULL << 63;
	k1 = plabel_unwind(u, maps, n, regs, s->stack, s->stack_size, want,
			   64);
	ASSERT_LE(1, k1);
	h0 = plabel_unwinder_memo_hits(u);
	k2 = plabel_unwind(u, maps, n, regs, s->stack, s->stack_size, ips, 64);
	EXPECT_EQ(h0 + 1, plabel_unwinder_memo_hits(u));
	ASSERT_EQ(k1, k2);
	EXPECT_EQ(0, memcmp(want, ips, k1 * sizeof(*ips)));
	plabel_maps_free(maps, n);
	plabel_unwinder_free(u);
	plabel_syms_free(syms);
	free(s);
}

/*
 * The memo gives an unwinding only when every register and stack word the
 * remembered one read is the same: each register and each of the first
 * 512 words changed in turn, the memo's answer is a fresh unwinder's, and
 * the sample as it was comes back from the memo after each.
 */
TEST(unwind_memo_answers_only_for_the_same_reads)
{
	struct plabel_snap *s = calloc(1, sizeof(*s));
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_unwinder *u = plabel_unwinder_new();
	uint64_t ips[64], want[64], got[64], regs[PLABEL_REGS_NR], w;
	uint8_t *stack = malloc(PLABEL_SNAP_STACK);
	size_t n, i, nwords, size;
	int nwant, k, kf, misses = 0, hits = 0;
	struct plabel_map *maps;
	uint64_t h0;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, u);
	ASSERT_NE(NULL, stack);
	plabel_run_chain(s, stack_end());
	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	size = s->stack_size;
	nwant = plabel_unwind(u, maps, n, s->regs, s->stack, size, want, 64);
	ASSERT_LE(5, nwant);
	EXPECT_EQ(0, plabel_unwinder_memo_hits(u));
	k = plabel_unwind(u, maps, n, s->regs, s->stack, size, ips, 64);
	ASSERT_EQ(nwant, k);
	EXPECT_EQ(0, memcmp(want, ips, k * sizeof(*ips)));
	EXPECT_EQ(1, plabel_unwinder_memo_hits(u));
	/* a smaller max: the same frames, as many as fit */
	k = plabel_unwind(u, maps, n, s->regs, s->stack, size, ips, 3);
	ASSERT_EQ(3, k);
	EXPECT_EQ(0, memcmp(want, ips, 3 * sizeof(*ips)));

	nwords = size / 8 < 512 ? size / 8 : 512;
	for (i = 0; i < PLABEL_REGS_NR + nwords; i++) {
		memcpy(regs, s->regs, sizeof(regs));
		memcpy(stack, s->stack, size);
		if (i < PLABEL_REGS_NR) {
			if (i == PLABEL_REG_RIP || i == PLABEL_REG_RSP)
				continue;	/* the key */
			regs[i] ^= 0x5a5a5a5a5a5a5a5aULL;
		} else {
			memcpy(&w, stack + 8 * (i - PLABEL_REGS_NR), 8);
			w ^= 0x5a5a5a5a5a5a5a5aULL;
			memcpy(stack + 8 * (i - PLABEL_REGS_NR), &w, 8);
		}
		h0 = plabel_unwinder_memo_hits(u);
		k = plabel_unwind(u, maps, n, regs, stack, size, got, 64);
		kf = unwind_fresh(maps, n, regs, stack, size, ips);
		if (plabel_unwinder_memo_hits(u) > h0)
			hits++;
		else
			misses++;
		ASSERT_EQ(kf, k) TH_LOG("change %zu", i);
		ASSERT_EQ(0, memcmp(ips, got, k * sizeof(*ips)))
			TH_LOG("change %zu", i);
		k = plabel_unwind(u, maps, n, s->regs, s->stack, size, got,
				  64);
		ASSERT_EQ(nwant, k);
		ASSERT_EQ(0, memcmp(want, got, k * sizeof(*got)));
	}
	TH_LOG("%d changes answered by the memo, %d unwound", hits, misses);
	/* the return addresses were read; the locals of the chain were not */
	EXPECT_LT(0, hits);
	EXPECT_LE(4, misses);
	/* other maps (one less): unwound anew, not answered */
	h0 = plabel_unwinder_memo_hits(u);
	plabel_unwind(u, maps, n - 1, s->regs, s->stack, size, got, 64);
	EXPECT_EQ(h0, plabel_unwinder_memo_hits(u));
	/* and back (another process's records between): still known */
	k = plabel_unwind(u, maps, n, s->regs, s->stack, size, got, 64);
	EXPECT_EQ(h0 + 1, plabel_unwinder_memo_hits(u));
	ASSERT_EQ(nwant, k);
	EXPECT_EQ(0, memcmp(want, got, k * sizeof(*got)));
	plabel_maps_free(maps, n);
	plabel_unwinder_free(u);
	plabel_syms_free(syms);
	free(stack);
	free(s);
}

/* Append a record of type and size (padded to 8) to buf at *len. */
static void *put_rec(uint8_t *buf, size_t *len, uint32_t type, size_t size)
{
	struct plabel_rec_header *h = (void *)(buf + *len);
	size_t padded = (size + 7) & ~7UL;

	memset(h, 0, padded);
	h->type = type;
	h->size = padded;
	*len += padded;
	return h;
}

/*
 * nsamp samples of this process in one buffer through the collector, each
 * with the snapshot s and the user chain fp[0..nfp) (a dwarf sample's is
 * its leaf alone), its mappings recorded only after them (as MMAP records
 * can arrive): every one must be in the profile; returns how many were
 * unwound through the whole chain (whose functions the profile names, in
 * order), which takes the mappings recorded after them. flags: the
 * collector's.
 */
/*
 * The MMAP records of this process's mappings, at time 1000: those of the
 * file holding plabel_snap_take if exe, else the others.
 */
static void put_mmaps(struct __test_metadata *_metadata,
		      struct plabel_syms *syms, uint8_t *buf, size_t cap,
		      size_t *len, int exe)
{
	struct plabel_rec_mmap *rm;
	struct plabel_map *maps;
	const struct plabel_map *m;
	size_t n, i;

	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	m = plabel_maps_find(maps, n, (uintptr_t)plabel_snap_take);
	ASSERT_NE(NULL, m);
	for (i = 0; i < n; i++) {
		size_t pl = strlen(maps[i].path);

		if (!strcmp(maps[i].path, m->path) != !!exe)
			continue;
		ASSERT_GT(cap - 4096, *len + sizeof(*rm) + pl);
		rm = put_rec(buf, len, PLABEL_REC_MMAP, sizeof(*rm) + pl);
		rm->time_ns = 1000;
		rm->pid = getpid();
		rm->path_len = pl;
		rm->start = maps[i].start;
		rm->end = maps[i].end;
		rm->offset = maps[i].offset;
		memcpy(rm + 1, maps[i].path, pl);
	}
	plabel_maps_free(maps, n);
}

/*
 * As collect_chains, of OFFCPU records (each with its END) or SAMPLE ones
 * (type), the mappings of the file holding the chain after the samples
 * and, if others_first, the others before them.
 */
static int64_t collect_recs(struct __test_metadata *_metadata,
			    struct plabel_snap *s, size_t nsamp,
			    unsigned int flags, const uint64_t *fp,
			    size_t nfp, uint32_t type, int others_first);

static int64_t collect_chains(struct __test_metadata *_metadata,
			      struct plabel_snap *s, size_t nsamp,
			      unsigned int flags, const uint64_t *fp,
			      size_t nfp)
{
	return collect_recs(_metadata, s, nsamp, flags, fp, nfp,
			    PLABEL_REC_SAMPLE, 0);
}

static int64_t collect_recs(struct __test_metadata *_metadata,
			    struct plabel_snap *s, size_t nsamp,
			    unsigned int flags, const uint64_t *fp,
			    size_t nfp, uint32_t type, int others_first)
{
	static const char *const want[] = {
		"plabel_snap_take", "plabel_chain_c", "plabel_chain_b",
		"plabel_chain_a", "plabel_run_chain",
	};
	struct plabel_syms *syms = plabel_syms_new();
	size_t cap = (1 << 20) + nsamp * (sizeof(struct plabel_rec_sample) +
					  sizeof(struct plabel_rec_offcpu_end) +
					  8 * nfp + 8 * PLABEL_REGS_NR +
					  s->stack_size + 8);
	size_t len = 0, i, j, w;
	int64_t whole = 0, total = 0;
	uint8_t *buf = malloc(cap), *p;
	struct plabel_prof *profs[PLABEL_PROF_NKINDS], *cpu;
	struct plabel_prof_sample_info si;
	struct plabel_prof_location_info li;
	struct plabel_rec_offcpu_end *re;
	struct plabel_rec_sample *rs;
	struct plabel_collect *c;
	int k;

	ASSERT_NE(NULL, syms);
	ASSERT_NE(NULL, buf);
	if (others_first)
		put_mmaps(_metadata, syms, buf, cap, &len, 0);
	for (i = 0; i < nsamp; i++) {
		rs = put_rec(buf, &len, type, sizeof(*rs) +
			     8 * nfp + 8 * PLABEL_REGS_NR + s->stack_size);
		rs->time_ns = 2000000 + 1000 * i;
		rs->pid = getpid();
		rs->tid = getpid();
		rs->flags = PLABEL_SAMPLE_USER | PLABEL_SAMPLE_REGS;
		rs->nr_user = nfp;
		rs->stack_size = s->stack_size;
		p = (uint8_t *)(rs + 1);
		memcpy(p, fp, 8 * nfp);
		p += 8 * nfp;
		memcpy(p, s->regs, 8 * PLABEL_REGS_NR);
		memcpy(p + 8 * PLABEL_REGS_NR, s->stack, s->stack_size);
		if (type != PLABEL_REC_OFFCPU)
			continue;
		/* a wait of 500 ns */
		re = put_rec(buf, &len, PLABEL_REC_OFFCPU_END, sizeof(*re));
		re->out_ns = rs->time_ns;
		re->time_ns = rs->time_ns + 500;
		re->pid = getpid();
		re->tid = getpid();
	}
	put_mmaps(_metadata, syms, buf, cap, &len, 1);
	if (!others_first)
		put_mmaps(_metadata, syms, buf, cap, &len, 0);
	c = plabel_collect_new(syms, flags);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, plabel_collect_buffer(c, buf, len));
	ASSERT_EQ(0, plabel_collect_finish(c, 0, 0, profs));
	k = type == PLABEL_REC_OFFCPU ? PLABEL_PROF_OFFCPU : PLABEL_PROF_CPU;
	cpu = profs[k];
	for (i = 0; i < PLABEL_PROF_NKINDS; i++)
		if ((int)i != k)
			plabel_prof_free(profs[i]);
	for (j = 0; j < plabel_prof_num_samples(cpu); j++) {
		plabel_prof_get_sample(cpu, j, &si);
		ASSERT_LE(1, si.nlocs);
		for (i = 0, w = 0; i < si.nlocs; i++) {
			ASSERT_EQ(0, plabel_prof_find_location(cpu,
							       si.loc_ids[i],
							       &li));
			if (w < sizeof(want) / sizeof(want[0]) && li.nlines &&
			    !strcmp(li.lines[li.nlines - 1].function, want[w]))
				w++;
		}
		/* (an off-CPU profile's first value: switches) */
		if (w == sizeof(want) / sizeof(want[0]))
			whole += si.values[0];
		total += si.values[0];
	}
	EXPECT_EQ((int64_t)nsamp, total);
	plabel_prof_free(cpu);
	plabel_collect_free(c);
	plabel_syms_free(syms);
	free(buf);
	return whole;
}

/* The same for dwarf samples: the chain the record carries is the leaf. */
static int64_t collect_snapshots(struct __test_metadata *_metadata,
				 struct plabel_snap *s, size_t nsamp,
				 unsigned int flags)
{
	return collect_chains(_metadata, s, nsamp, flags,
			      &s->regs[PLABEL_REG_RIP], 1);
}

/*
 * An fp-mode OFFCPU record's snapshot reaches only just past the first
 * frame the frame-pointer walk found; the walk misses the frames before
 * it (here plabel_chain_c, which keeps no frame pointer). The snapshot's
 * short unwinding and the record's chain are spliced where they meet: the
 * profile has the whole chain.
 */
TEST(collect_splices_a_short_snapshot_onto_the_fp_chain)
{
	struct plabel_snap *s = calloc(1, sizeof(*s));
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_unwinder *u = plabel_unwinder_new();
	uint64_t ips[64], part[64], fp[64];
	struct plabel_map *maps;
	size_t n, size, i, nfp;
	int nips, k = 0;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, syms);
	ASSERT_NE(NULL, u);
	plabel_run_chain(s, stack_end());
	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	nips = plabel_unwind(u, maps, n, s->regs, s->stack, s->stack_size,
			     ips, 64);
	ASSERT_LE(6, nips);
	/* the shortest copy whose unwinding reaches plabel_chain_b */
	for (size = 8; size <= s->stack_size; size += 8) {
		k = plabel_unwind(u, maps, n, s->regs, s->stack, size, part,
				  64);
		if (k >= 3)
			break;
	}
	plabel_maps_free(maps, n);
	plabel_unwinder_free(u);
	plabel_syms_free(syms);
	ASSERT_EQ(3, k);
	ASSERT_EQ(ips[2], part[2]);
	/* the walk's chain: the leaf, then plabel_chain_b's return on */
	fp[0] = ips[0];
	for (i = 2, nfp = 1; i < (size_t)nips; i++)
		fp[nfp++] = ips[i];
	s->stack_size = size;
	EXPECT_EQ(1, collect_chains(_metadata, s, 1, 0, fp, nfp));
	/* a chain they do not meet in is kept as it is: not whole */
	fp[1] = 8;
	EXPECT_EQ(0, collect_chains(_metadata, s, 1, 0, fp, nfp));
	free(s);
}

/*
 * OFFCPU snapshots are unwound on arrival when their process's mappings
 * are known, but one whose unwinding ends outside them (here the file
 * that holds the chain is mapped later, as a library dlopen()ed since)
 * waits for the end, and the mappings recorded by then: every wait has
 * the whole chain. Unwound on arrival with what was known, only the leaf.
 */
TEST(collect_offcpu_waits_for_mappings_it_lacks)
{
	struct plabel_snap *s = calloc(1, sizeof(*s));

	ASSERT_NE(NULL, s);
	plabel_run_chain(s, stack_end());
	EXPECT_EQ(3, collect_recs(_metadata, s, 3, 0, &s->regs[PLABEL_REG_RIP],
				  1, PLABEL_REC_OFFCPU, 1));
	EXPECT_EQ(3, collect_recs(_metadata, s, 3, 0, &s->regs[PLABEL_REG_RIP],
				  1, PLABEL_REC_OFFCPU, 0));
	free(s);
}

/*
 * The collector unwinds snapshots at the end, against every mapping
 * recorded by then. The first MiB of them it keeps in memory; past that,
 * with no usable temporary directory, it unwinds them on arrival instead,
 * still keeping the sample.
 */
TEST(collect_unwinds_at_the_end)
{
	struct plabel_snap *s = calloc(1, sizeof(*s));
	const char *tmp = getenv("TMPDIR");
	char *saved = tmp ? strdup(tmp) : NULL;
	size_t per;

	ASSERT_NE(NULL, s);
	plabel_run_chain(s, stack_end());
	/* a snapshot in the spool: its registers, then its stack padded */
	per = 8 + 8 * PLABEL_REGS_NR + ((s->stack_size + 7) & ~7UL);
	ASSERT_LT(per * 8, 1U << 20);
	EXPECT_EQ(1, collect_snapshots(_metadata, s, 1, 0));
	setenv("TMPDIR", "/nonexistent/plabel-test", 1);
	EXPECT_EQ(1, collect_snapshots(_metadata, s, 1, 0));
	/* on arrival no mapping is known yet: the leaf at least */
	EXPECT_EQ((int64_t)((1U << 20) / per),
		  collect_snapshots(_metadata, s, (1U << 20) / per + 8, 0));
	if (saved)
		setenv("TMPDIR", saved, 1);
	else
		unsetenv("TMPDIR");
	free(saved);
	free(s);
}

/*
 * Many snapshots in one buffer: the first MiB is kept in memory, then
 * written at once, and the rest in batches of 256. When the spool file
 * cannot grow past 1 MiB (RLIMIT_FSIZE: a short write, then EFBIG), what
 * the failed batch could not write stays in memory and is unwound at the
 * end with the rest; then the spool takes what its memory holds, and
 * later samples are unwound on arrival. None is lost.
 */
/*
 * plabel_run_chain 8 KiB further down the stack: a snapshot of at least
 * that, wherever the stack's top was placed (its random offset alone moves
 * a shallow snapshot's size by kilobytes).
 */
__attribute__((noinline)) static void run_chain_deep(struct plabel_snap *s)
{
	volatile char pad[8192];

	pad[0] = 0;
	plabel_run_chain(s, stack_end());
	pad[sizeof(pad) - 1] = pad[0];
}

TEST(collect_spools_many_and_survives_a_full_file)
{
	struct plabel_snap *s = calloc(1, sizeof(*s));
	struct rlimit old, lim = { 1 << 20, 1 << 20 };
	void (*oldsig)(int);

	ASSERT_NE(NULL, s);
	run_chain_deep(s);
	ASSERT_LT(8192U, s->stack_size);	/* 600 of them: some MiB */
	EXPECT_EQ(600, collect_snapshots(_metadata, s, 600, 0));
	/* with its first tables made ahead, as plabel record makes them */
	EXPECT_EQ(600, collect_snapshots(_metadata, s, 600,
					 PLABEL_COLLECT_PREFAULT));
	ASSERT_EQ(0, getrlimit(RLIMIT_FSIZE, &old));
	oldsig = signal(SIGXFSZ, SIG_IGN);
	lim.rlim_max = old.rlim_max;
	ASSERT_EQ(0, setrlimit(RLIMIT_FSIZE, &lim));
	/* the first MiB and the next batch, all unwound at the end */
	EXPECT_LE(256, collect_snapshots(_metadata, s, 600, 0));
	ASSERT_EQ(0, setrlimit(RLIMIT_FSIZE, &old));
	signal(SIGXFSZ, oldsig);
	free(s);
}

TEST_HARNESS_MAIN
