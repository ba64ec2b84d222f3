// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for the ELF files the reader opens: the input is the
 * file a profiled process has mapped, written to a memfd and named by its
 * /proc/self/fd path, as `plabel record` would name it from the process's
 * mappings. It runs everything the reader does with such a file: the
 * symbolizer (libelf for the program headers and build id, libdwfl/libdw
 * for the symbol table, DWARF names, lines and inlined frames) at the
 * entry point and across the loaded extent, and the dwarf unwinder
 * (libunwind's remote API on the file's .eh_frame_hdr and .eh_frame) on a
 * made-up stack whose words point into the file.
 *
 *   make build/fuzz/elf_fuzz && fuzz/run.sh 60 elf
 */
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symbolize.h"
#include "unwind.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PLABEL_FUZZ_STACK_WORDS	64

static int plabel_fuzz_fd = -1;
static char plabel_fuzz_path[64];
static struct plabel_unwinder *plabel_fuzz_uw;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	plabel_fuzz_fd = memfd_create("plabel-elf-fuzz", MFD_CLOEXEC);
	if (plabel_fuzz_fd >= 0)
		snprintf(plabel_fuzz_path, sizeof(plabel_fuzz_path),
			 "/proc/self/fd/%d", plabel_fuzz_fd);
	/* one unwinder for the run, as in a recording (its cache flushed
	 * when the mappings change, which they do with every input) */
	plabel_fuzz_uw = plabel_unwinder_new();
	return 0;
}

static void plabel_fuzz_symbolize(struct plabel_elf *e, uint64_t vaddr)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	volatile size_t sink = 0;
	int n, i;

	n = plabel_elf_symbolize(e, vaddr, fr, PLABEL_SYM_MAX_FRAMES);
	if (n < 0 || n > PLABEL_SYM_MAX_FRAMES)
		abort();
	/* every string handed out must be readable to its end */
	for (i = 0; i < n; i++) {
		if (fr[i].function)
			sink += strlen(fr[i].function);
		if (fr[i].file)
			sink += strlen(fr[i].file);
	}
	(void)sink;
}

static void plabel_fuzz_unwind(struct plabel_elf *e, uint64_t entry,
			       uint64_t lo, uint64_t hi)
{
	uint64_t regs[PLABEL_REGS_NR], stack[PLABEL_FUZZ_STACK_WORDS];
	uint64_t ips[32], span = hi - lo;
	struct plabel_map map;
	size_t i;

	if (!plabel_fuzz_uw || hi <= lo)
		return;
	/* mapped at its link-time addresses: bias 0 when offset 0 is vaddr lo */
	memset(&map, 0, sizeof(map));
	map.start = lo & ~4095ULL;
	map.end = hi;
	map.offset = 0;
	map.path = plabel_fuzz_path;
	map.elf = e;
	memset(regs, 0, sizeof(regs));
	regs[PLABEL_REG_RIP] = entry >= lo && entry < hi ? entry : lo;
	regs[PLABEL_REG_RSP] = 0x7ffd00001000ULL;
	regs[PLABEL_REG_RBP] = regs[PLABEL_REG_RSP] + 8 * 16;
	/* return addresses into the file, saved frame pointers, junk */
	for (i = 0; i < PLABEL_FUZZ_STACK_WORDS; i++) {
		switch (i % 3) {
		case 0:
			stack[i] = lo + (span / PLABEL_FUZZ_STACK_WORDS) * i + 1;
			break;
		case 1:
			stack[i] = regs[PLABEL_REG_RSP] + 8 * (i + 8);
			break;
		default:
			stack[i] = 0x5a5a5a5a5a5a5a5aULL * i;
		}
	}
	if (plabel_unwind(plabel_fuzz_uw, &map, 1, regs, stack, sizeof(stack),
			  ips, sizeof(ips) / sizeof(ips[0])) > 32)
		abort();
	/* the same with the program counter at the end of the extent */
	regs[PLABEL_REG_RIP] = hi - 1;
	plabel_unwind(plabel_fuzz_uw, &map, 1, regs, stack, sizeof(stack),
		      ips, sizeof(ips) / sizeof(ips[0]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t lo, hi, entry = 0, eh, ehsize, bias, span;
	struct plabel_syms *syms;
	struct plabel_elf *e;
	uint8_t buf[64];
	size_t done = 0;
	int i;

	if (plabel_fuzz_fd < 0 || ftruncate(plabel_fuzz_fd, 0))
		return 0;
	while (done < size) {
		ssize_t w = pwrite(plabel_fuzz_fd, data + done, size - done,
				   done);

		if (w <= 0)
			return 0;
		done += w;
	}
	if (size >= sizeof(Elf64_Ehdr) && data[EI_CLASS] == ELFCLASS64)
		memcpy(&entry, data + offsetof(Elf64_Ehdr, e_entry), 8);

	/* a fresh cache: every input is a new file at the same path */
	syms = plabel_syms_new();
	if (!syms)
		return 0;
	e = plabel_syms_elf(syms, plabel_fuzz_path);
	if (!e)
		goto out;
	(void)plabel_elf_build_id(e);
	(void)plabel_elf_bias(e, 0x400000, 0, &bias);
	plabel_elf_extent(e, &lo, &hi);
	if (!plabel_elf_eh_frame_hdr(e, &eh, &ehsize))
		(void)plabel_elf_read(e, eh, buf, sizeof(buf));
	(void)plabel_elf_read(e, lo, buf, sizeof(buf));
	(void)plabel_elf_read(e, entry, buf, 1);

	plabel_fuzz_symbolize(e, entry);
	span = hi - lo;
	for (i = 0; i < 8; i++)
		plabel_fuzz_symbolize(e, lo + span / 8 * i + i);
	plabel_fuzz_symbolize(e, hi - 1);
	plabel_fuzz_unwind(e, entry, lo, hi);
out:
	plabel_syms_free(syms);
	return 0;
}
