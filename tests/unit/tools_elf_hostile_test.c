// SPDX-License-Identifier: GPL-2.0
/*
 * The symbolizer (tools/symbolize.c) on files a hostile profiled process
 * can put in its own mappings' place: the reader runs as root and reads
 * any file a process names. Each test is a problem the ELF fuzzer
 * (fuzz/elf_fuzz.c) or a review of the file handling found: broken DWARF
 * that made libdw leak, a FIFO swapped in for the file that made open()
 * block, a file truncated under the reader's mapping (SIGBUS), files of
 * any size, separate debug info looked up next to the file, and section
 * tables claiming more than the file holds or inflates to; and the
 * unwinder (tools/unwind.c) on unwind info the fuzzer made up.
 */
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kselftest/kselftest_harness.h"

#include "../../tools/symbolize.h"
#include "../../tools/unwind.h"

/* A file, read whole. */
static uint8_t *read_path(const char *path, size_t *size)
{
	struct stat st;
	uint8_t *buf;
	size_t done = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st))
		return NULL;
	buf = malloc(st.st_size);
	while (buf && done < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + done, st.st_size - done);

		if (n <= 0) {
			free(buf);
			buf = NULL;
			break;
		}
		done += n;
	}
	close(fd);
	*size = st.st_size;
	return buf;
}

/* This test program, read whole. */
static uint8_t *read_self(size_t *size)
{
	return read_path("/proc/self/exe", size);
}

static int write_file(const char *path, const void *buf, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, buf, size);
	close(fd);
	return n == (ssize_t)size ? 0 : -EIO;
}

/* vaddr of a symbol of this program in its own ELF file. */
static uint64_t self_vaddr(const void *fn)
{
	FILE *f = fopen("/proc/self/maps", "re");
	uint64_t start, end, off, addr = (uintptr_t)fn, vaddr = 0;
	char line[512], perms[8];
	uint8_t *img;
	size_t size, i;
	Elf *elf;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s %lx", &start, &end, perms,
			   &off) == 4 && addr >= start && addr < end)
			break;
	fclose(f);
	img = read_self(&size);
	if (!img)
		return 0;
	elf_version(EV_CURRENT);
	elf = elf_memory((char *)img, size);
	for (i = 0; elf && vaddr == 0; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph))
			break;
		if (ph.p_type == PT_LOAD && off >= (ph.p_offset & ~4095UL) &&
		    off < ph.p_offset + ph.p_filesz)
			vaddr = addr - start + off - ph.p_offset + ph.p_vaddr;
	}
	if (elf)
		elf_end(elf);
	free(img);
	return vaddr;
}

FIXTURE(hostile) {
	char dir[64];
	char path[128];
	struct plabel_syms *syms;
};

FIXTURE_SETUP(hostile)
{
	strcpy(self->dir, "/tmp/plabel-elf-hostile.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	snprintf(self->path, sizeof(self->path), "%s/prog", self->dir);
	self->syms = plabel_syms_new();
	ASSERT_NE(NULL, self->syms);
}

FIXTURE_TEARDOWN(hostile)
{
	char cmd[160];

	plabel_syms_free(self->syms);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", self->dir);
	if (system(cmd))
		TH_LOG("could not remove %s", self->dir);
}

/*
 * Find the first DW_TAG_inlined_subroutine with a DW_FORM_ref4
 * DW_AT_abstract_origin in img: its low pc and the offset in img of the
 * reference. 0 when found.
 */
static int find_inlined(uint8_t *img, size_t size, uint64_t *pc,
			size_t *ref_off)
{
	Dwarf_Off off = 0, next;
	size_t hsize;
	Dwarf *dw;
	Elf *elf;
	int ret = -ENOENT;

	elf_version(EV_CURRENT);
	elf = elf_memory((char *)img, size);
	dw = elf ? dwarf_begin_elf(elf, DWARF_C_READ, NULL) : NULL;
	while (dw && ret && !dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL,
					  NULL)) {
		Dwarf_Die cu, stack[64];
		int depth = 0;

		if (!dwarf_offdie(dw, off + hsize, &cu) ||
		    dwarf_child(&cu, &stack[0]))
			goto next_cu;
		for (;;) {
			Dwarf_Die *d = &stack[depth];
			Dwarf_Attribute a;
			Dwarf_Addr lo;

			if (dwarf_tag(d) == DW_TAG_inlined_subroutine &&
			    dwarf_attr(d, DW_AT_abstract_origin, &a) &&
			    a.form == DW_FORM_ref4 && !dwarf_lowpc(d, &lo)) {
				*pc = lo;
				*ref_off = (uint8_t *)a.valp - img;
				ret = 0;
				break;
			}
			if (depth < 63 && !dwarf_child(d, &stack[depth + 1])) {
				depth++;
				continue;
			}
			while (depth >= 0 && dwarf_siblingof(&stack[depth],
							     &stack[depth]))
				depth--;
			if (depth < 0)
				break;
		}
next_cu:
		off = next;
	}
	if (dw)
		dwarf_end(dw);
	if (elf)
		elf_end(elf);
	return ret;
}

static inline __attribute__((always_inline)) int hostile_inlined(int x)
{
	asm volatile("" : "+r"(x));
	return x * 7;
}

__attribute__((noinline)) int hostile_outer(int x);
__attribute__((noinline)) int hostile_outer(int x)
{
	return hostile_inlined(x) + 1;
}

/*
 * An inlined call whose DW_AT_abstract_origin points nowhere: libdw's
 * dwarf_getscopes() lost its result array (32 bytes a lookup, found by
 * the fuzzer under LeakSanitizer). Symbolizing there many times must not
 * grow the heap, and must still give the function its symbol name.
 */
TEST_F(hostile, broken_abstract_origin_does_not_leak)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	static size_t size, ref;
	struct plabel_elf *e;
	struct mallinfo2 before, after;
	static uint64_t pc;
	uint8_t *img;
	uint32_t bad = 0xfffffff0;
	int i, n = 0;

	ASSERT_EQ(8, hostile_outer(1) + 0);
	img = read_self(&size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, find_inlined(img, size, &pc, &ref));
	memcpy(img + ref, &bad, sizeof(bad));
	ASSERT_EQ(0, write_file(self->path, img, size));
	free(img);
	e = plabel_syms_elf(self->syms, self->path);
	ASSERT_NE(NULL, e);
	/* the first lookups load the file and libdw's tables */
	for (i = 0; i < 10; i++)
		n = plabel_elf_symbolize(e, pc, fr, PLABEL_SYM_MAX_FRAMES);
	ASSERT_LE(1, n);
	before = mallinfo2();
	for (i = 0; i < 2000; i++)
		plabel_elf_symbolize(e, pc, fr, PLABEL_SYM_MAX_FRAMES);
	after = mallinfo2();
	/* under 2 bytes a lookup: nothing kept per lookup */
	EXPECT_GT(4000, after.uordblks - before.uordblks);
}

/*
 * The file was regular when named; a FIFO is in its place by the time it
 * is read. Opening a FIFO for reading waits for a writer: the reader (as
 * root) would hang. It must give up at once.
 */
TEST_F(hostile, fifo_in_its_place_does_not_block)
{
	struct plabel_elf *e;

	ASSERT_EQ(0, write_file(self->path, "\177ELF", 4));
	e = plabel_syms_elf(self->syms, self->path);
	ASSERT_NE(NULL, e);
	ASSERT_EQ(0, unlink(self->path));
	ASSERT_EQ(0, mkfifo(self->path, 0600));
	alarm(10);
	EXPECT_EQ(NULL, plabel_elf_build_id(e));
	alarm(0);
}

/* Devices and FIFOs are refused when named, without being opened. */
TEST_F(hostile, devices_and_fifos_refused)
{
	char fifo[160];

	snprintf(fifo, sizeof(fifo), "%s/fifo", self->dir);
	ASSERT_EQ(0, mkfifo(fifo, 0600));
	alarm(10);
	EXPECT_EQ(NULL, plabel_syms_elf(self->syms, fifo));
	EXPECT_EQ(NULL, plabel_syms_elf(self->syms, "/dev/zero"));
	EXPECT_EQ(NULL, plabel_syms_elf(self->syms, "/dev/tty"));
	EXPECT_EQ(NULL, plabel_syms_elf(self->syms, self->dir));
	alarm(0);
}

/*
 * The file is truncated after the reader has loaded it: reads of its
 * image (the unwinder's, of .eh_frame) and symbolization must still
 * work on what was read, not die of SIGBUS on a mapping past the end.
 */
TEST_F(hostile, truncated_after_load)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	uint64_t lo, hi, word, pc = self_vaddr(hostile_outer);
	struct plabel_elf *e;
	size_t size;
	uint8_t *img;
	int n;

	ASSERT_NE(0, pc);
	img = read_self(&size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, write_file(self->path, img, size));
	free(img);
	/* as root, give it away: only a file root alone can write is read
	 * in place */
	if (!geteuid())
		ASSERT_EQ(0, chown(self->path, 65534, 65534));
	e = plabel_syms_elf(self->syms, self->path);
	ASSERT_NE(NULL, e);
	ASSERT_NE(NULL, plabel_elf_build_id(e));
	ASSERT_EQ(0, truncate(self->path, 0));
	plabel_elf_extent(e, &lo, &hi);
	ASSERT_LT(lo, hi);
	EXPECT_EQ(0, plabel_elf_read(e, pc, &word, sizeof(word)));
	n = plabel_elf_symbolize(e, pc, fr, PLABEL_SYM_MAX_FRAMES);
	ASSERT_LE(1, n);
	EXPECT_STREQ("hostile_outer", fr[n - 1].function);
}

/*
 * Files others can write are copied before they are read, and the copies
 * have a total: a user who maps many large files of its own cannot make
 * the reader copy them without end. With the limit set to one file's
 * size, the first file is read and the second is not.
 */
TEST_F(hostile, copies_have_a_total)
{
	char second[160];
	struct plabel_elf *e;
	size_t size;
	uint8_t *img;

	img = read_self(&size);
	ASSERT_NE(NULL, img);
	snprintf(second, sizeof(second), "%s/prog2", self->dir);
	ASSERT_EQ(0, write_file(self->path, img, size));
	ASSERT_EQ(0, write_file(second, img, size));
	free(img);
	ASSERT_EQ(0, chmod(self->path, 0666));
	ASSERT_EQ(0, chmod(second, 0666));
	plabel_syms_set_copy_limit(self->syms, size + size / 2);
	e = plabel_syms_elf(self->syms, self->path);
	ASSERT_NE(NULL, e);
	EXPECT_NE(NULL, plabel_elf_build_id(e));
	e = plabel_syms_elf(self->syms, second);
	if (e)
		EXPECT_EQ(NULL, plabel_elf_build_id(e));
}

/* A file over the size limit (sparse: costs no disk) is not read. */
TEST_F(hostile, oversized_file_refused)
{
	struct plabel_elf *e;
	size_t size;
	uint8_t *img;

	img = read_self(&size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, write_file(self->path, img, size));
	free(img);
	/* a real ELF file at its start: only its size is wrong */
	ASSERT_EQ(0, truncate(self->path, (1LL << 30) + 1));
	e = plabel_syms_elf(self->syms, self->path);
	if (e)
		EXPECT_EQ(NULL, plabel_elf_build_id(e));
}

/*
 * DIR/prog: this program without its DWARF, with a .gnu_debuglink to
 * DIR/prog.debug, which holds the DWARF. 0, or -1 without objcopy.
 */
static int split_debug(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && objcopy --only-keep-debug /proc/%d/exe prog.debug"
		 " && objcopy --strip-debug --add-gnu-debuglink=prog.debug"
		 " /proc/%d/exe prog", dir, (int)getpid(), (int)getpid());
	return system(cmd) ? -1 : 0;
}

/*
 * The file's debug link names a FIFO next to it. libdwfl's standard
 * lookup opened it, blocking, as root: the reader hung on the first
 * address. Debug info is not looked for next to the file any more; the
 * symbol table still names the function.
 */
TEST_F(hostile, debuglink_to_fifo_does_not_block)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	uint64_t pc = self_vaddr(hostile_outer);
	char dbg[160];
	struct plabel_elf *e;
	int n;

	ASSERT_NE(0, pc);
	if (split_debug(self->dir))
		SKIP(return, "objcopy failed (binutils missing?)");
	snprintf(dbg, sizeof(dbg), "%s/prog.debug", self->dir);
	ASSERT_EQ(0, unlink(dbg));
	ASSERT_EQ(0, mkfifo(dbg, 0600));
	e = plabel_syms_elf(self->syms, self->path);
	ASSERT_NE(NULL, e);
	alarm(10);
	n = plabel_elf_symbolize(e, pc, fr, PLABEL_SYM_MAX_FRAMES);
	alarm(0);
	ASSERT_EQ(1, n);
	EXPECT_STREQ("hostile_outer", fr[0].function);
}

/*
 * Nor is a regular debug file next to it used: the profiled process
 * chooses what is there. (Its lines would be the process's word only.)
 */
TEST_F(hostile, debug_file_next_to_file_not_used)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	uint64_t pc = self_vaddr(hostile_outer);
	struct plabel_elf *e;
	int n;

	ASSERT_NE(0, pc);
	if (split_debug(self->dir))
		SKIP(return, "objcopy failed (binutils missing?)");
	e = plabel_syms_elf(self->syms, self->path);
	ASSERT_NE(NULL, e);
	n = plabel_elf_symbolize(e, pc, fr, PLABEL_SYM_MAX_FRAMES);
	ASSERT_EQ(1, n);
	EXPECT_STREQ("hostile_outer", fr[0].function);
	EXPECT_EQ(NULL, fr[0].file);
	EXPECT_EQ(0, fr[0].line);
}

/* The section header of the section called name in a 64-bit ELF image. */
static Elf64_Shdr *find_shdr(uint8_t *img, size_t size, const char *name)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	Elf64_Shdr *sh, *str;
	int i;

	if (size < sizeof(*eh) || eh->e_shoff > size ||
	    (size - eh->e_shoff) / sizeof(*sh) < eh->e_shnum ||
	    eh->e_shstrndx >= eh->e_shnum)
		return NULL;
	sh = (Elf64_Shdr *)(img + eh->e_shoff);
	str = &sh[eh->e_shstrndx];
	for (i = 0; i < eh->e_shnum; i++)
		if (str->sh_offset + sh[i].sh_name < size &&
		    !strcmp((char *)img + str->sh_offset + sh[i].sh_name, name))
			return &sh[i];
	return NULL;
}

/*
 * A section claiming contents past the end of the file: the file is left
 * alone before libdwfl sees it. (libelf checks this too, section by
 * section, when asked for one; plabel no longer relies on it.)
 */
TEST_F(hostile, section_past_end_refused)
{
	struct plabel_elf *e;
	Elf64_Shdr *sh;
	size_t size;
	uint8_t *img;

	img = read_self(&size);
	ASSERT_NE(NULL, img);
	sh = find_shdr(img, size, ".debug_info");
	ASSERT_NE(NULL, sh);
	sh->sh_size = size;
	ASSERT_EQ(0, write_file(self->path, img, size));
	free(img);
	e = plabel_syms_elf(self->syms, self->path);
	ASSERT_NE(NULL, e);
	EXPECT_EQ(NULL, plabel_elf_build_id(e));
}

/*
 * A compressed debug section claiming to inflate to 2 GiB: libdw would
 * allocate that much and inflate into it (a real zlib bomb fills it from
 * about 2 MB). The file is refused.
 */
TEST_F(hostile, compressed_section_claiming_too_much_refused)
{
	struct plabel_elf *e;
	Elf64_Chdr *ch;
	Elf64_Shdr *sh;
	char cmd[512];
	size_t size;
	uint8_t *img;

	snprintf(cmd, sizeof(cmd),
		 "objcopy --compress-debug-sections=zlib /proc/%d/exe '%s'",
		 (int)getpid(), self->path);
	if (system(cmd))
		SKIP(return, "objcopy failed (binutils missing?)");
	e = plabel_syms_elf(self->syms, self->path);
	ASSERT_NE(NULL, e);
	/* compressed as it is: read, build id and all */
	ASSERT_NE(NULL, plabel_elf_build_id(e));
	plabel_syms_free(self->syms);
	self->syms = plabel_syms_new();
	ASSERT_NE(NULL, self->syms);

	img = read_path(self->path, &size);
	ASSERT_NE(NULL, img);
	sh = find_shdr(img, size, ".debug_info");
	ASSERT_NE(NULL, sh);
	ASSERT_NE(0, sh->sh_flags & SHF_COMPRESSED);
	ch = (Elf64_Chdr *)(img + sh->sh_offset);
	ch->ch_size = 2ULL << 30;
	ASSERT_EQ(0, unlink(self->path));
	ASSERT_EQ(0, write_file(self->path, img, size));
	free(img);
	e = plabel_syms_elf(self->syms, self->path);
	ASSERT_NE(NULL, e);
	EXPECT_EQ(NULL, plabel_elf_build_id(e));
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * The ELF fuzzer's file fuzz/corpus/elf/unwind-nop-fde: a PT_LOAD whose
 * memory size runs on for exabytes past its 2 KB of file (zeros, which
 * are DW_CFA_nop), and unwind info that sends libunwind into it. These
 * two unwinds made 16.8 and 33.6 million reads, half a second of CPU
 * (45 seconds each under the fuzzer's sanitizers): for every sample of a
 * process that maps such a file. They must take milliseconds.
 */
TEST(unwind_through_crafted_unwind_info_is_bounded)
{
	uint64_t regs[PLABEL_REGS_NR], stack[64], ips[32], lo, hi, entry = 0;
	uint64_t t0, t1;
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_unwinder *u = plabel_unwinder_new();
	const char *path = PLABEL_ELF_CORPUS "/unwind-nop-fde";
	struct plabel_map map;
	struct plabel_elf *e;
	size_t size, i;
	uint8_t *img;
	int n;

	ASSERT_NE(NULL, syms);
	ASSERT_NE(NULL, u);
	img = read_path(path, &size);
	ASSERT_NE(NULL, img);
	ASSERT_LE(sizeof(Elf64_Ehdr), size);
	entry = ((Elf64_Ehdr *)img)->e_entry;
	free(img);
	e = plabel_syms_elf(syms, path);
	ASSERT_NE(NULL, e);
	plabel_elf_extent(e, &lo, &hi);
	ASSERT_LT(lo, hi);

	/* as fuzz/elf_fuzz.c sets it up */
	memset(&map, 0, sizeof(map));
	map.start = lo & ~4095ULL;
	map.end = hi;
	map.path = (char *)path;
	map.elf = e;
	memset(regs, 0, sizeof(regs));
	regs[PLABEL_REG_RIP] = entry >= lo && entry < hi ? entry : lo;
	regs[PLABEL_REG_RSP] = 0x7ffd00001000ULL;
	regs[PLABEL_REG_RBP] = regs[PLABEL_REG_RSP] + 8 * 16;
	for (i = 0; i < 64; i++)
		stack[i] = i % 3 == 0 ? lo + (hi - lo) / 64 * i + 1 :
			   i % 3 == 1 ? regs[PLABEL_REG_RSP] + 8 * (i + 8) :
			   0x5a5a5a5a5a5a5a5aULL * i;
	alarm(10);
	t0 = thread_cpu_ns();
	n = plabel_unwind(u, &map, 1, regs, stack, sizeof(stack), ips, 32);
	ASSERT_LE(1, n);
	EXPECT_EQ(regs[PLABEL_REG_RIP], ips[0]);
	/* and from the last byte of the extent */
	regs[PLABEL_REG_RIP] = hi - 1;
	n = plabel_unwind(u, &map, 1, regs, stack, sizeof(stack), ips, 32);
	t1 = thread_cpu_ns();
	alarm(0);
	ASSERT_LE(1, n);
	EXPECT_EQ(regs[PLABEL_REG_RIP], ips[0]);
	/* about 10 ms with the read budget, 500 before it */
	EXPECT_GT(100000000ULL, t1 - t0);
	plabel_unwinder_free(u);
	plabel_syms_free(syms);
}

TEST_HARNESS_MAIN
