// SPDX-License-Identifier: GPL-2.0
/*
 * Symbolization (tools/symbolize.c) of this test binary itself (built with
 * -g): function names, source file and line of known code, an inlined
 * frame expanded into its caller, build ids, a libc function through its
 * symbol table, and the kernel through /proc/kallsyms.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kselftest/kselftest_harness.h"

#include "../../tools/symbolize.h"

__attribute__((noinline)) void *plabel_sym_ra(void);
__attribute__((noinline)) void *plabel_sym_ra(void)
{
	void *ra = __builtin_return_address(0);

	asm volatile("" : : "r"(ra) : "memory");
	return ra;
}

static int plabel_sym_line;

static inline __attribute__((always_inline)) void *plabel_sym_inlined(void)
{
	void *ra;

	plabel_sym_line = __LINE__; ra = plabel_sym_ra();
	asm volatile("" : : "r"(ra) : "memory");
	return ra;
}

static int plabel_sym_outer_line;

__attribute__((noinline)) void *plabel_sym_outer(void);
__attribute__((noinline)) void *plabel_sym_outer(void)
{
	void *ra;

	plabel_sym_outer_line = __LINE__; ra = plabel_sym_inlined();
	asm volatile("" : : "r"(ra) : "memory");
	return ra;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a, b;

	if (!s)
		return 0;
	a = strlen(s);
	b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

/* Symbolize a runtime address of this process. */
static int sym_self(struct plabel_syms *syms, uint64_t addr,
		    struct plabel_sym_frame *fr, const char **build_id)
{
	struct plabel_map *maps;
	const struct plabel_map *m;
	uint64_t bias;
	size_t n;
	int ret = -ENOENT;

	if (plabel_maps_read_proc(syms, getpid(), &maps, &n))
		return -EIO;
	m = plabel_maps_find(maps, n, addr);
	if (m && m->elf && !plabel_elf_bias(m->elf, m->start, m->offset,
					    &bias)) {
		if (build_id)
			*build_id = plabel_elf_build_id(m->elf);
		ret = plabel_elf_symbolize(m->elf, addr - bias, fr,
					   PLABEL_SYM_MAX_FRAMES);
	}
	plabel_maps_free(maps, n);
	return ret;
}

TEST(function_file_line_inlined)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	struct plabel_syms *syms = plabel_syms_new();
	const char *bid = NULL;
	uint64_t ra = (uintptr_t)plabel_sym_outer();
	int n;

	ASSERT_NE(NULL, syms);
	/* the call instruction is just before the return address */
	n = sym_self(syms, ra - 1, fr, &bid);
	ASSERT_EQ(2, n);
	EXPECT_STREQ("plabel_sym_inlined", fr[0].function);
	EXPECT_TRUE(ends_with(fr[0].file, "tests/unit/tools_symbolize_test.c"));
	EXPECT_EQ(plabel_sym_line, fr[0].line);
	EXPECT_STREQ("plabel_sym_outer", fr[1].function);
	EXPECT_TRUE(ends_with(fr[1].file, "tests/unit/tools_symbolize_test.c"));
	EXPECT_EQ(plabel_sym_outer_line, fr[1].line);
	/* gcc and ld give every binary a GNU build id */
	ASSERT_NE(NULL, bid);
	EXPECT_EQ(40, strlen(bid));
	plabel_syms_free(syms);
}

TEST(function_entry)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	struct plabel_syms *syms = plabel_syms_new();
	int n;

	n = sym_self(syms, (uintptr_t)plabel_sym_ra, fr, NULL);
	ASSERT_LE(1, n);
	EXPECT_STREQ("plabel_sym_ra", fr[n - 1].function);
	EXPECT_TRUE(ends_with(fr[0].file, "tools_symbolize_test.c"));
	EXPECT_LT(0, fr[0].line);
	plabel_syms_free(syms);
}

TEST(libc_symbol_table)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	struct plabel_syms *syms = plabel_syms_new();
	int n;

	/* Debian's libc has no debug info installed: the .dynsym names it */
	n = sym_self(syms, (uintptr_t)qsort + 4, fr, NULL);
	ASSERT_LE(1, n);
	EXPECT_STREQ("qsort", fr[n - 1].function);
	plabel_syms_free(syms);
}

TEST(unreadable_file_is_null_not_fatal)
{
	struct plabel_syms *syms = plabel_syms_new();

	EXPECT_EQ(NULL, plabel_syms_elf(syms, "/nonexistent/plabel/file"));
	EXPECT_EQ(NULL, plabel_syms_elf(syms, "/nonexistent/plabel/file"));
	EXPECT_EQ(NULL, plabel_syms_elf(syms, "/proc/self/status"));
	plabel_syms_free(syms);
}

/* A copy of this test binary at path; 0 or -1. */
static int copy_self(const char *path)
{
	char buf[65536];
	int in = open("/proc/self/exe", O_RDONLY), out;
	ssize_t n = 0;

	out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			n = -1;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return in >= 0 && out >= 0 && n == 0 ? 0 : -1;
}

/* How many entries syms holds. */
static size_t syms_files(struct plabel_syms *syms)
{
	uint64_t copied;
	size_t n;

	plabel_syms_usage(syms, &n, &copied);
	return n;
}

/* The answers a file that can't be read gets. */
static int answers_unknown(struct plabel_elf *e)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	uint64_t bias, lo, hi, word;

	plabel_elf_extent(e, &lo, &hi);
	return !plabel_elf_build_id(e) &&
	       plabel_elf_bias(e, 0x400000, 0, &bias) == -ENOENT &&
	       plabel_elf_read(e, 0, &word, sizeof(word)) == -EFAULT &&
	       plabel_elf_eh_frame_hdr(e, &lo, &hi) == -ENOENT &&
	       plabel_elf_symbolize(e, 0x1000, fr, PLABEL_SYM_MAX_FRAMES) == 0 &&
	       lo == 0 && hi == 0;
}

TEST(files_are_read_when_asked_and_only_if_unchanged)
{
	char dir[] = "/tmp/plabel-sym-XXXXXX", same[64], replaced[64], text[64],
	     tmp[64];
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_elf *e_same, *e_replaced, *e_text;
	uint64_t bias;
	FILE *f;

	ASSERT_NE(NULL, mkdtemp(dir));
	snprintf(same, sizeof(same), "%s/same", dir);
	snprintf(replaced, sizeof(replaced), "%s/replaced", dir);
	snprintf(text, sizeof(text), "%s/text", dir);
	snprintf(tmp, sizeof(tmp), "%s/tmp", dir);
	ASSERT_EQ(0, copy_self(same));
	ASSERT_EQ(0, copy_self(replaced));
	f = fopen(text, "w");
	ASSERT_NE(NULL, f);
	fputs("not an ELF file\n", f);
	fclose(f);

	e_same = plabel_syms_elf(syms, same);
	e_replaced = plabel_syms_elf(syms, replaced);
	e_text = plabel_syms_elf(syms, text);
	ASSERT_NE(NULL, e_same);
	ASSERT_NE(NULL, e_replaced);
	/* named, not read: what it is shows when it is asked */
	ASSERT_NE(NULL, e_text);
	EXPECT_EQ(e_same, plabel_syms_elf(syms, same));

	/* a rebuild renamed over the file after it was named */
	ASSERT_EQ(0, copy_self(tmp));
	ASSERT_EQ(0, rename(tmp, replaced));

	EXPECT_EQ(0, plabel_elf_bias(e_same, 0x400000, 0, &bias));
	EXPECT_NE(NULL, plabel_elf_build_id(e_same));
	EXPECT_TRUE(answers_unknown(e_replaced));
	EXPECT_TRUE(answers_unknown(e_text));
	/* and it stays that way: once decided, the file is not read again */
	EXPECT_EQ(NULL, plabel_syms_elf(syms, text));
	EXPECT_EQ(NULL, plabel_syms_elf(syms, replaced));

	plabel_syms_free(syms);
	unlink(same);
	unlink(replaced);
	unlink(text);
	rmdir(dir);
}

TEST(shared_names_a_replaced_file_anew)
{
	char dir[] = "/tmp/plabel-sym-XXXXXX", path[64], tmp[64];
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_elf *first, *again;
	uint64_t bias;

	ASSERT_NE(NULL, syms);
	plabel_syms_share(syms);
	ASSERT_NE(NULL, mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/prog", dir);
	snprintf(tmp, sizeof(tmp), "%s/tmp", dir);
	ASSERT_EQ(0, copy_self(path));
	first = plabel_syms_elf(syms, path);
	ASSERT_NE(NULL, first);
	EXPECT_EQ(first, plabel_syms_elf(syms, path));
	EXPECT_EQ(1, syms_files(syms));

	/* an upgrade renamed over it: later windows get the new file */
	ASSERT_EQ(0, copy_self(tmp));
	ASSERT_EQ(0, rename(tmp, path));
	again = plabel_syms_elf(syms, path);
	ASSERT_NE(NULL, again);
	EXPECT_NE(first, again);
	EXPECT_EQ(again, plabel_syms_elf(syms, path));
	EXPECT_EQ(2, syms_files(syms));
	EXPECT_EQ(0, plabel_elf_bias(again, 0x400000, 0, &bias));
	EXPECT_NE(NULL, plabel_elf_build_id(again));
	/* who holds the old one gets what a replaced file gets */
	EXPECT_TRUE(answers_unknown(first));

	/* gone, then back: nothing named while it is gone */
	ASSERT_EQ(0, unlink(path));
	EXPECT_EQ(NULL, plabel_syms_elf(syms, path));
	EXPECT_EQ(NULL, plabel_syms_elf(syms, path));
	EXPECT_EQ(2, syms_files(syms));
	ASSERT_EQ(0, copy_self(path));
	again = plabel_syms_elf(syms, path);
	ASSERT_NE(NULL, again);
	EXPECT_NE(NULL, plabel_elf_build_id(again));
	EXPECT_EQ(3, syms_files(syms));

	/* each holder's reference: the last one frees */
	EXPECT_EQ(syms, plabel_syms_get(syms));
	plabel_syms_free(syms);
	EXPECT_EQ(again, plabel_syms_elf(syms, path));
	plabel_syms_free(syms);
	unlink(path);
	rmdir(dir);
}

/*
 * A process swapping two versions of a file back and forth names them
 * once each, and a path's versions are bounded: past 8 it gets no
 * symbols, however many more it is given.
 */
TEST(shared_versions_are_found_and_bounded)
{
	char dir[] = "/tmp/plabel-sym-XXXXXX", path[64], a[64], b[64],
	     tmp[64];
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_elf *ea, *eb;
	int i;

	ASSERT_NE(NULL, syms);
	plabel_syms_share(syms);
	ASSERT_NE(NULL, mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/prog", dir);
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/b", dir);
	snprintf(tmp, sizeof(tmp), "%s/tmp", dir);
	ASSERT_EQ(0, copy_self(a));
	ASSERT_EQ(0, copy_self(b));

	/* hard links: renaming one over path keeps its identity */
	ASSERT_EQ(0, link(a, tmp));
	ASSERT_EQ(0, rename(tmp, path));
	ea = plabel_syms_elf(syms, path);
	ASSERT_NE(NULL, ea);
	/* read while path is that version: loaded ones answer after */
	EXPECT_NE(NULL, plabel_elf_build_id(ea));
	ASSERT_EQ(0, link(b, tmp));
	ASSERT_EQ(0, rename(tmp, path));
	eb = plabel_syms_elf(syms, path);
	ASSERT_NE(NULL, eb);
	EXPECT_NE(ea, eb);
	EXPECT_NE(NULL, plabel_elf_build_id(eb));
	for (i = 0; i < 5; i++) {
		ASSERT_EQ(0, link(i % 2 ? b : a, tmp));
		ASSERT_EQ(0, rename(tmp, path));
		EXPECT_EQ(i % 2 ? eb : ea, plabel_syms_elf(syms, path));
	}
	EXPECT_EQ(2, syms_files(syms));
	EXPECT_NE(NULL, plabel_elf_build_id(ea));
	EXPECT_NE(NULL, plabel_elf_build_id(eb));

	for (i = 2; i < 12; i++) {
		struct plabel_elf *e;

		ASSERT_EQ(0, copy_self(tmp));
		ASSERT_EQ(0, rename(tmp, path));
		e = plabel_syms_elf(syms, path);

		EXPECT_EQ(i < 8, e != NULL);
	}
	EXPECT_EQ(8, syms_files(syms));
	plabel_syms_free(syms);
	unlink(path);
	unlink(a);
	unlink(b);
	rmdir(dir);
}

/* A call's return address in plabel_sym_outer(), taken once. */
static uint64_t sym_thread_ra;

/* One of the threads of shared_from_threads: 0, or the check failed. */
static void *sym_thread(void *arg)
{
	struct plabel_sym_frame fr[PLABEL_SYM_MAX_FRAMES];
	struct plabel_syms *syms = arg;
	uint64_t ra = sym_thread_ra;
	int n, ok = 1;

	n = sym_self(syms, ra - 1, fr, NULL);
	ok &= n == 2 && fr[1].function &&
	      !strcmp(fr[1].function, "plabel_sym_outer") &&
	      fr[1].line == plabel_sym_outer_line;
	n = sym_self(syms, (uintptr_t)qsort + 4, fr, NULL);
	ok &= n >= 1 && fr[n - 1].function &&
	      !strcmp(fr[n - 1].function, "qsort");
	plabel_syms_kernel(syms, 0);
	plabel_syms_free(syms);
	return ok ? NULL : (void *)1;
}

/*
 * What plabel serve's windows do: symbolize with one struct plabel_syms
 * from several threads at once, each holding a reference. Fresh each
 * round, so that the threads race to read the files first.
 */
TEST(shared_from_threads)
{
	pthread_t th[4];
	void *res;
	int r, i, failed = 0;

	sym_thread_ra = (uintptr_t)plabel_sym_outer();
	for (r = 0; r < 20; r++) {
		struct plabel_syms *syms = plabel_syms_new();

		ASSERT_NE(NULL, syms);
		plabel_syms_share(syms);
		for (i = 0; i < 4; i++)
			ASSERT_EQ(0, pthread_create(&th[i], NULL, sym_thread,
						    plabel_syms_get(syms)));
		plabel_syms_free(syms);
		for (i = 0; i < 4; i++) {
			ASSERT_EQ(0, pthread_join(th[i], &res));
			failed += res != NULL;
		}
	}
	EXPECT_EQ(0, failed);
}

TEST(elf_bias_and_read)
{
	struct plabel_syms *syms = plabel_syms_new();
	struct plabel_map *maps;
	const struct plabel_map *m;
	uint64_t fn = (uintptr_t)plabel_sym_ra, bias, word, hdr, hsz;
	size_t n;

	ASSERT_EQ(0, plabel_maps_read_proc(syms, getpid(), &maps, &n));
	m = plabel_maps_find(maps, n, fn);
	ASSERT_NE(NULL, m);
	ASSERT_NE(NULL, m->elf);
	ASSERT_EQ(0, plabel_elf_bias(m->elf, m->start, m->offset, &bias));
	/* the file's bytes at the function are the code running here */
	ASSERT_EQ(0, plabel_elf_read(m->elf, fn - bias, &word, sizeof(word)));
	EXPECT_EQ(0, memcmp(&word, (void *)(uintptr_t)fn, sizeof(word)));
	EXPECT_EQ(0, plabel_elf_eh_frame_hdr(m->elf, &hdr, &hsz));
	EXPECT_LT(8, hsz);
	EXPECT_EQ(-EFAULT, plabel_elf_read(m->elf, UINT64_MAX - 4, &word,
					   sizeof(word)));
	plabel_maps_free(maps, n);
	plabel_syms_free(syms);
}

TEST(kernel_kallsyms)
{
	struct plabel_syms *syms = plabel_syms_new();
	char line[256], name[128], type;
	unsigned long long addr = 0;
	FILE *f = fopen("/proc/kallsyms", "r");
	const char *got;
	int have = 0;

	if (!f) {
		plabel_syms_free(syms);
		SKIP(return, "/proc/kallsyms not readable");
	}
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %127s", &addr, &type, name) == 3 &&
		    addr && (type == 'T' || type == 't') &&
		    !strcmp(name, "schedule")) {
			have = 1;
			break;
		}
	fclose(f);
	if (!have) {
		plabel_syms_free(syms);
		SKIP(return, "kernel addresses hidden (kptr_restrict)");
	}
	got = plabel_syms_kernel(syms, addr + 1);
	ASSERT_NE(NULL, got);
	EXPECT_STREQ("schedule", got);
	plabel_syms_free(syms);
}

TEST_HARNESS_MAIN
