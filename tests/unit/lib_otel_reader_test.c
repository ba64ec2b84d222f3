// SPDX-License-Identifier: GPL-2.0
/*
 * libplabel's OpenTelemetry thread context read back from outside, as an
 * out-of-process profiler does: a child linked with libplabel.so labels
 * two threads (one with a span); the test, in the parent, finds the
 * process context in the child's /proc/PID/maps, finds
 * otel_thread_ctx_v1 in libplabel.so's .dynsym and the static TLS offset
 * the dynamic linker wrote into the GOT slot of its R_X86_64_TPOFF64
 * relocation, stops each thread (ptrace), takes its thread pointer
 * (fs_base) and reads the record through /proc/PID/mem.
 *
 * x86-64 only (the thread pointer and the relocation type are the
 * architecture's); elsewhere, or without ptrace permission, a SKIP.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <plabel.h>

#include "kselftest/kselftest_harness.h"
#include "otel_decode.h"

extern __thread void *otel_thread_ctx_v1;

static const unsigned char tid2_trace[16] = {
	1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
static const unsigned char tid2_span[8] = { 0xa, 0xb, 0xc, 0xd, 1, 2, 3, 4 };

struct report {
	pid_t tid;
	uint64_t var;		/* &otel_thread_ctx_v1 in that thread */
};

static int report_pipe[2], hold_pipe[2];

static void report_self(void)
{
	struct report r = {
		.tid = (pid_t)syscall(SYS_gettid),
		.var = (uintptr_t)&otel_thread_ctx_v1,
	};

	if (write(report_pipe[1], &r, sizeof(r)) != sizeof(r))
		_exit(20);
}

static void *second_thread(void *arg)
{
	struct plabel_kv kv = { "k", "t2" };
	char c;

	if (plabel_set(&kv, 1) ||
	    plabel_set_trace(tid2_trace, tid2_span, 0x03))
		_exit(21);
	report_self();
	if (read(hold_pipe[0], &c, 1) < 0)
		_exit(22);
	return NULL;
}

static void target(void)
{
	struct plabel_kv kv[] = { { "svc", "api" }, { "k", "main" } };
	pthread_t th;
	char c;

	if (plabel_set(kv, 2))
		_exit(23);
	report_self();
	if (pthread_create(&th, NULL, second_thread, NULL))
		_exit(24);
	if (read(hold_pipe[0], &c, 1) < 0)
		_exit(25);
	pthread_join(th, NULL);
	_exit(0);
}

/* libplabel.so in pid: its path and load bias. */
static int find_lib(pid_t pid, char *path, size_t cap, uint64_t *bias)
{
	char maps[64], line[1024];
	FILE *f;
	int found = 0;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	f = fopen(maps, "r");
	if (!f)
		return -1;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long long s, off;
		char name[512] = "";

		if (sscanf(line, "%llx-%*x %*s %llx %*s %*s %511[^\n]",
			   &s, &off, name) != 3)
			continue;
		if (!strstr(name, "/libplabel.so") || off)
			continue;
		snprintf(path, cap, "%s", name);
		*bias = s;	/* its first PT_LOAD has p_vaddr 0 (checked) */
		found = 1;
	}
	fclose(f);
	return found ? 0 : -1;
}

/*
 * The GOT slot (address relative to the load bias) that the dynamic
 * linker fills with otel_thread_ctx_v1's offset from the thread pointer.
 */
static int find_tpoff_slot(const char *path, uint64_t *slot)
{
	Elf64_Ehdr eh;
	Elf64_Shdr *sh = NULL;
	Elf64_Sym *syms = NULL;
	Elf64_Phdr ph;
	char *strs = NULL;
	size_t nsyms = 0, i, j;
	long symidx = -1;
	int fd, err = -1;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || !eh.e_shnum ||
	    eh.e_shnum > 1024)
		goto out;
	if (pread(fd, &ph, sizeof(ph), eh.e_phoff) != sizeof(ph) ||
	    ph.p_type != PT_LOAD || ph.p_vaddr)
		goto out;
	sh = calloc(eh.e_shnum, sizeof(*sh));
	if (!sh || pread(fd, sh, eh.e_shnum * sizeof(*sh), eh.e_shoff) !=
	    (ssize_t)(eh.e_shnum * sizeof(*sh)))
		goto out;
	for (i = 0; i < eh.e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh.e_shnum)
			continue;
		nsyms = sh[i].sh_size / sizeof(Elf64_Sym);
		syms = malloc(sh[i].sh_size);
		strs = malloc(sh[sh[i].sh_link].sh_size + 1);
		if (!syms || !strs ||
		    pread(fd, syms, sh[i].sh_size, sh[i].sh_offset) !=
		    (ssize_t)sh[i].sh_size ||
		    pread(fd, strs, sh[sh[i].sh_link].sh_size,
			  sh[sh[i].sh_link].sh_offset) !=
		    (ssize_t)sh[sh[i].sh_link].sh_size)
			goto out;
		strs[sh[sh[i].sh_link].sh_size] = '\0';
		for (j = 0; j < nsyms; j++) {
			if (syms[j].st_name >= sh[sh[i].sh_link].sh_size)
				continue;
			if (!strcmp(strs + syms[j].st_name,
				    "otel_thread_ctx_v1") &&
			    ELF64_ST_TYPE(syms[j].st_info) == STT_TLS &&
			    syms[j].st_shndx != SHN_UNDEF)
				symidx = (long)j;
		}
		break;
	}
	if (symidx < 0)
		goto out;
	for (i = 0; i < eh.e_shnum && err; i++) {
		Elf64_Rela r;
		size_t k;

		if (sh[i].sh_type != SHT_RELA)
			continue;
		for (k = 0; k < sh[i].sh_size / sizeof(r); k++) {
			if (pread(fd, &r, sizeof(r), sh[i].sh_offset +
				  k * sizeof(r)) != sizeof(r))
				goto out;
			if (ELF64_R_TYPE(r.r_info) == R_X86_64_TPOFF64 &&
			    (long)ELF64_R_SYM(r.r_info) == symidx &&
			    !r.r_addend) {
				*slot = r.r_offset;
				err = 0;
				break;
			}
		}
	}
out:
	free(sh);
	free(syms);
	free(strs);
	close(fd);
	return err;
}

/* Stop tid, read its thread pointer, resume it. */
static int thread_pointer(pid_t tid, uint64_t *tp)
{
	struct user_regs_struct regs;
	int status, err = -1;

	if (ptrace(PTRACE_SEIZE, tid, NULL, NULL))
		return -errno;
	if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) ||
	    waitpid(tid, &status, __WALL) != tid)
		goto out;
	if (!ptrace(PTRACE_GETREGS, tid, NULL, &regs)) {
		*tp = regs.fs_base;
		err = 0;
	}
out:
	ptrace(PTRACE_DETACH, tid, NULL, NULL);
	return err;
}

static const char *attr_by_name(const struct od_rec *r,
				const struct od_ctx *c, const char *name)
{
	const char *v = NULL;
	unsigned int i;

	/* The last occurrence of a key wins (OTEP 4947). */
	for (i = 0; i < r->nattrs; i++)
		if (r->attr[i].key < c->nkeys &&
		    !strcmp(c->keys[r->attr[i].key], name))
			v = r->attr[i].val;
	return v;
}

TEST(read_from_outside)
{
	struct report rep[2];
	struct od_ctx *c;
	char lib[512], mem[64];
	uint64_t bias, slot;
	int64_t tpoff;
	int fd, i, status;
	pid_t pid;

#ifndef __x86_64__
	SKIP(return, "the reader here knows x86-64's TLS only");
#endif
	ASSERT_EQ(0, pipe(report_pipe));
	ASSERT_EQ(0, pipe(hold_pipe));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		target();
	for (i = 0; i < 2; i++)
		ASSERT_EQ((ssize_t)sizeof(rep[i]),
			  read(report_pipe[0], &rep[i], sizeof(rep[i])));

	c = calloc(1, sizeof(*c));
	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, od_read(pid, c));
	EXPECT_STREQ("tls_v1", c->schema);
	ASSERT_EQ(0, find_lib(pid, lib, sizeof(lib), &bias));
	ASSERT_EQ(0, find_tpoff_slot(lib, &slot));
	snprintf(mem, sizeof(mem), "/proc/%d/mem", (int)pid);
	fd = open(mem, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, od_mem_read(fd, bias + slot, &tpoff, 8));

	for (i = 0; i < 2; i++) {
		unsigned char buf[640];
		struct od_rec r;
		uint64_t tp = 0, recp = 0;
		int err;

		err = thread_pointer(rep[i].tid, &tp);
		if (err == -EPERM) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			SKIP(return, "no ptrace permission over the child");
		}
		ASSERT_EQ(0, err);
		/* The address the thread itself sees. */
		EXPECT_EQ(rep[i].var, tp + (uint64_t)tpoff);
		ASSERT_EQ(0, od_mem_read(fd, tp + (uint64_t)tpoff, &recp, 8));
		ASSERT_NE(0U, recp);
		/* Two reads: the fixed 28 bytes, then attrs-data-size. */
		ASSERT_EQ(0, od_mem_read(fd, recp, buf, 28));
		ASSERT_GE(612, *(uint16_t *)(buf + 26));
		ASSERT_EQ(0, od_mem_read(fd, recp + 28, buf + 28,
					 *(uint16_t *)(buf + 26)));
		ASSERT_EQ(0, od_parse_rec(buf, sizeof(buf), &r));
		EXPECT_EQ(1, r.valid);
		if (!i) {
			static const unsigned char zero[16];

			EXPECT_EQ(0, memcmp(r.trace_id, zero, 16));
			EXPECT_EQ(0, memcmp(r.span_id, zero, 8));
			EXPECT_EQ(0, r.flags);
			EXPECT_EQ(2U, r.nattrs);
			EXPECT_STREQ("api", attr_by_name(&r, c, "svc"));
			EXPECT_STREQ("main", attr_by_name(&r, c, "k"));
		} else {
			EXPECT_EQ(0, memcmp(r.trace_id, tid2_trace, 16));
			EXPECT_EQ(0, memcmp(r.span_id, tid2_span, 8));
			EXPECT_EQ(3, r.flags);
			EXPECT_EQ(1U, r.nattrs);
			EXPECT_STREQ("t2", attr_by_name(&r, c, "k"));
		}
	}
	close(fd);
	free(c);
	ASSERT_EQ(2, write(hold_pipe[1], "xx", 2));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

TEST_HARNESS_MAIN
