// SPDX-License-Identifier: GPL-2.0
/*
 * PLT stubs get perf's names, func@plt (and an IFUNC's *ABS*+0xADDR@plt):
 * every stub objdump names in this test program and in the libc it runs
 * with is named the same by
 * plabel_elf_plt(), at its first byte and inside it; addresses outside the
 * PLT get none.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kselftest/kselftest_harness.h"
#include "../../tools/symbolize.h"

/*
 * Compare with `objdump -d` of path's PLT sections; returns how many stubs
 * objdump named (-1: objdump did not run).
 */
static int check_file(struct __test_metadata *_metadata, const char *path)
{
	struct plabel_syms *s = plabel_syms_new();
	struct plabel_elf *e;
	char cmd[PATH_MAX + 128], line[1024];
	int n = 0;
	FILE *f;

	if (!s)
		return -1;
	e = plabel_syms_elf(s, path);
	if (!e) {
		plabel_syms_free(s);
		return -1;
	}
	snprintf(cmd, sizeof(cmd),
		 "objdump -d -j .plt -j .plt.sec -j .plt.got '%s' 2>/dev/null",
		 path);
	f = popen(cmd, "r");
	if (!f) {
		plabel_syms_free(s);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long long addr;
		char name[512];
		const char *got;

		/* "0000000000001030 <puts@plt>:" */
		/* (the PLT's header is named after a neighbour: "f@plt-0x10") */
		if (sscanf(line, "%llx <%511[^>]>:", &addr, name) != 2 ||
		    !strstr(name, "@plt") || strstr(name, "@plt-") ||
		    strstr(name, "@plt+"))
			continue;
		got = plabel_elf_plt(e, addr);
		EXPECT_STREQ(name, got ? got : "(none)") TH_LOG("%s at %llx", path, addr);
		got = plabel_elf_plt(e, addr + 5);
		EXPECT_STREQ(name, got ? got : "(none)") TH_LOG("%s at %llx + 5", path, addr);
		n++;
	}
	if (pclose(f))
		n = n ? n : -1;
	EXPECT_EQ(NULL, plabel_elf_plt(e, 0));
	plabel_syms_free(s);
	return n;
}

TEST(plt_stubs_named_as_objdump_names_them)
{
	char self[PATH_MAX];
	ssize_t len;
	int n;

	if (system("command -v objdump >/dev/null 2>&1"))
		SKIP(return, "objdump (binutils) is not installed");
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ASSERT_LT(0, len);
	self[len] = '\0';
	n = check_file(_metadata, self);
	/* this program calls printf, popen, strstr.. through its PLT */
	EXPECT_LT(3, n);
	n = check_file(_metadata, "/lib/x86_64-linux-gnu/libc.so.6");
	EXPECT_LT(0, n) TH_LOG("libc: %d stubs named by objdump", n);
}

TEST(no_names_without_a_file)
{
	struct plabel_syms *s = plabel_syms_new();
	struct plabel_elf *e;

	ASSERT_NE(NULL, s);
	e = plabel_syms_elf(s, "/dev/null");
	if (e)
		EXPECT_EQ(NULL, plabel_elf_plt(e, 0x1000));
	plabel_syms_free(s);
}

TEST_HARNESS_MAIN
