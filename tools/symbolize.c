// SPDX-License-Identifier: GPL-2.0
/*
 * Symbolization with elfutils: one Dwfl per ELF file (reported at its own
 * link-time addresses), names from DWARF or the symbol table, source lines
 * from the line table, inlined frames from the DIE tree. The file is
 * also mapped read-only for the unwinder's raw reads of .eh_frame_hdr and
 * .eh_frame. Kernel addresses come from /proc/kallsyms.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "symbolize.h"

struct plabel_seg {
	uint64_t vaddr, memsz, offset, filesz;
};

enum plabel_elf_state {
	PLABEL_ELF_SEEN,	/* a regular file when first named: not read yet */
	PLABEL_ELF_LOADED,
	PLABEL_ELF_BAD,		/* unreadable, not ELF, or no longer that file */
};

struct plabel_elf {
	struct plabel_elf *next;
	struct plabel_syms *owner;
	/*
	 * Shared, held for the first read and the libdw and PLT lookups;
	 * recursive, as they call each other. state is stored last, with
	 * release, so that once it is not SEEN the rest is read without it.
	 */
	pthread_mutex_t lock;
	char *path;
	enum plabel_elf_state state;
	struct stat seen;	/* the file as first named */
	const uint8_t *image;	/* the whole file, mapped */
	size_t image_size;
	struct plabel_seg *segs;
	size_t nsegs;
	uint64_t eh_vaddr, eh_size;	/* .eh_frame_hdr; size 0 if none */
	char *build_id;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	Dwarf_Addr mod_bias;	/* Dwfl address = vaddr + mod_bias */
	struct plabel_plt *plt;	/* PLT stubs, by address (plabel_elf_plt) */
	size_t nplt;
	int plt_read;
};

struct plabel_ksym {
	uint64_t addr;
	char *name;
};

struct plabel_syms {
	/*
	 * Shared (plabel_syms_share()): list_lock is held, briefly, for the
	 * list of files, refs (which counts the holders, shared or not),
	 * nelfs and copied: the reader names files under it while others
	 * symbolize. lock is held for the kallsyms lookup; each file has its
	 * own.
	 */
	pthread_mutex_t list_lock;
	pthread_mutex_t lock;
	int shared;
	unsigned int refs;
	size_t nelfs;		/* entries */
	struct plabel_elf *elfs;
	uint64_t copied;	/* bytes of the private copies of files */
	uint64_t copy_limit;	/* PLABEL_ELF_COPY_TOTAL unless a test says */
	int kallsyms_read;
	struct plabel_ksym *ksyms;
	size_t nksyms;
};

/*
 * The largest ELF file read. The path comes from a profiled, possibly
 * hostile, process and the reader runs as root: its memory and time are
 * not to be spent on files of any size.
 */
#define PLABEL_ELF_MAX_SIZE	(1ULL << 30)
/*
 * The most the private copies of files others can write may take in all:
 * a profiled user who maps many large files of its own must not make the
 * reader copy them without end. Files past it stay unsymbolized.
 */
#define PLABEL_ELF_COPY_TOTAL	(2ULL << 30)

/* Separate debug info comes from here alone (see find_debuginfo). */
static char plabel_debug_dir[] = "/usr/lib/debug";
static char *plabel_debuginfo_path = plabel_debug_dir;

/*
 * path opened for reading if it is a regular file of at most
 * PLABEL_ELF_MAX_SIZE bytes, without blocking (a FIFO) and without
 * becoming our terminal (a tty). The fd, or a negative errno.
 */
static int open_regular(const char *path, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, st) || !S_ISREG(st->st_mode) || st->st_size <= 0 ||
	    (uint64_t)st->st_size > PLABEL_ELF_MAX_SIZE) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/* The GNU debuglink checksum (zlib's CRC-32) of regular file fd. */
static int file_crc(int fd, size_t size, uint32_t *crc)
{
	void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	uLong c = crc32(0, Z_NULL, 0);
	size_t done = 0;

	if (p == MAP_FAILED)
		return -errno;
	/* zlib takes uInt lengths */
	while (done < size) {
		uInt n = size - done > (1U << 30) ? 1U << 30 : size - done;

		c = crc32(c, (const Bytef *)p + done, n);
		done += n;
	}
	munmap(p, size);
	*crc = c;
	return 0;
}

/*
 * libdwfl's find_debuginfo callback. libdwfl's standard one also looks
 * next to the file and in its .debug/ directory, under a name taken from
 * the file (its .gnu_debuglink, or its own name), and opens what it finds
 * there blocking: the profiled process chooses all of that, and could
 * put a FIFO, a device or a huge file there for the reader to open as
 * root (the ELF fuzzer's file at /proc/self/fd/N had libdwfl open other
 * descriptors of the fuzzer as its debug file). Here separate debug info
 * comes from root's /usr/lib/debug alone: by build id through libdwfl
 * (in .build-id/ of plabel_debuginfo_path), else by the debuglink name,
 * which must be a plain file name, in /usr/lib/debug/DIR/ for the file's
 * directory DIR, opened like the file itself and checked against the
 * link's CRC. The same for a DWZ alternate file, whose absolute name must
 * be under /usr/lib/debug/. Never debuginfod.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata,
			  const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink,
			  GElf_Word crc, char **debuginfo_file_name)
{
	const char *slash;
	struct stat st;
	uint32_t seen = 0;
	char *path;
	int fd;

	fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base,
					  file_name, debuglink, crc,
					  debuginfo_file_name);
	if (fd >= 0 || !debuglink || !debuglink[0] || strstr(debuglink, ".."))
		return -1;
	if (debuglink[0] == '/') {
		/* an alternate file (DWZ): named in full */
		if (strncmp(debuglink, plabel_debug_dir,
			    sizeof(plabel_debug_dir) - 1) ||
		    debuglink[sizeof(plabel_debug_dir) - 1] != '/')
			return -1;
		path = strdup(debuglink);
	} else {
		if (strchr(debuglink, '/') || !file_name ||
		    file_name[0] != '/' || strstr(file_name, "/./") ||
		    strstr(file_name, "/../"))
			return -1;
		slash = strrchr(file_name, '/');
		if (asprintf(&path, "%s%.*s/%s", plabel_debug_dir,
			     (int)(slash - file_name), file_name,
			     debuglink) < 0)
			path = NULL;
	}
	if (!path)
		return -1;
	fd = open_regular(path, &st);
	if (fd >= 0 && crc &&
	    (file_crc(fd, st.st_size, &seen) || seen != crc)) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		free(path);
		return -1;
	}
	*debuginfo_file_name = path;
	return fd;
}

static const Dwfl_Callbacks plabel_dwfl_cb = {
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &plabel_debuginfo_path,
};

/* A recursive mutex in *m. 0 or an errno. */
static int recursive_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int ret = pthread_mutexattr_init(&a);

	if (ret)
		return ret;
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	ret = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return ret;
}

static pthread_once_t libelf_once = PTHREAD_ONCE_INIT;

static void libelf_init(void)
{
	elf_version(EV_CURRENT);
}

struct plabel_syms *plabel_syms_new(void)
{
	struct plabel_syms *s = calloc(1, sizeof(struct plabel_syms));

	pthread_once(&libelf_once, libelf_init);
	if (!s)
		return NULL;
	if (pthread_mutex_init(&s->lock, NULL)) {
		free(s);
		return NULL;
	}
	if (pthread_mutex_init(&s->list_lock, NULL)) {
		pthread_mutex_destroy(&s->lock);
		free(s);
		return NULL;
	}
	s->copy_limit = PLABEL_ELF_COPY_TOTAL;
	s->refs = 1;
	return s;
}

void plabel_syms_share(struct plabel_syms *s)
{
	s->shared = 1;
}

struct plabel_syms *plabel_syms_get(struct plabel_syms *s)
{
	pthread_mutex_lock(&s->list_lock);
	s->refs++;
	pthread_mutex_unlock(&s->list_lock);
	return s;
}

static void syms_lock(struct plabel_syms *s)
{
	if (s->shared)
		pthread_mutex_lock(&s->lock);
}

static void syms_unlock(struct plabel_syms *s)
{
	if (s->shared)
		pthread_mutex_unlock(&s->lock);
}

static void elf_lock(struct plabel_elf *e)
{
	if (e->owner->shared)
		pthread_mutex_lock(&e->lock);
}

static void elf_unlock(struct plabel_elf *e)
{
	if (e->owner->shared)
		pthread_mutex_unlock(&e->lock);
}

void plabel_syms_usage(struct plabel_syms *s, size_t *files,
		       uint64_t *copied)
{
	pthread_mutex_lock(&s->list_lock);
	*files = s->nelfs;
	*copied = s->copied;
	pthread_mutex_unlock(&s->list_lock);
}

void plabel_syms_set_copy_limit(struct plabel_syms *s, uint64_t bytes)
{
	s->copy_limit = bytes;
}

struct plabel_plt {
	uint64_t start, end;	/* ELF vaddrs of the stub */
	char *name;		/* "func@plt" */
};

static void plabel_elf_free(struct plabel_elf *e)
{
	size_t i;

	for (i = 0; i < e->nplt; i++)
		free(e->plt[i].name);
	free(e->plt);
	if (e->dwfl)
		dwfl_end(e->dwfl);
	if (e->image)
		munmap((void *)e->image, e->image_size);
	free(e->segs);
	free(e->build_id);
	free(e->path);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

void plabel_syms_free(struct plabel_syms *s)
{
	struct plabel_elf *e, *next;
	unsigned int refs;
	size_t i;

	if (!s)
		return;
	pthread_mutex_lock(&s->list_lock);
	refs = --s->refs;
	pthread_mutex_unlock(&s->list_lock);
	if (refs)
		return;
	pthread_mutex_destroy(&s->list_lock);
	pthread_mutex_destroy(&s->lock);
	for (e = s->elfs; e; e = next) {
		next = e->next;
		plabel_elf_free(e);
	}
	for (i = 0; i < s->nksyms; i++)
		free(s->ksyms[i].name);
	free(s->ksyms);
	free(s);
}

/*
 * What the sections of a file may claim in all, decompressed: libdw
 * allocates a compressed (SHF_COMPRESSED or .zdebug) section's stated
 * size and inflates into it, and a few kilobytes of zlib inflate to
 * megabytes, so a small file could have the reader (root) allocate and
 * fill gigabytes.
 */
#define PLABEL_ELF_MAX_INFLATED	(1ULL << 30)

/*
 * Check the section table before libdwfl sees the file: header entry
 * sizes as the class has them, every section with contents inside the
 * file, compressed sections claiming no more than PLABEL_ELF_MAX_INFLATED
 * bytes in all. 0, or -ENOEXEC for a file to leave alone.
 */
static int plabel_elf_check_sections(Elf *elf, size_t image_size)
{
	uint64_t inflated = 0;
	Elf_Scn *scn = NULL;
	size_t shstrndx, shnum, phnum;
	GElf_Ehdr eh;
	int cls = gelf_getclass(elf);

	if (!gelf_getehdr(elf, &eh) || (cls != ELFCLASS32 && cls != ELFCLASS64))
		return -ENOEXEC;
	if (elf_getshdrnum(elf, &shnum) || elf_getphdrnum(elf, &phnum))
		return -ENOEXEC;
	if ((phnum && eh.e_phentsize != gelf_fsize(elf, ELF_T_PHDR, 1,
						  EV_CURRENT)) ||
	    (shnum && eh.e_shentsize != gelf_fsize(elf, ELF_T_SHDR, 1,
						  EV_CURRENT)))
		return -ENOEXEC;
	if (shnum && elf_getshdrstrndx(elf, &shstrndx))
		return -ENOEXEC;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			return -ENOEXEC;
		if (sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_NULL)
			continue;
		if (sh.sh_offset > image_size ||
		    sh.sh_size > image_size - sh.sh_offset)
			return -ENOEXEC;
		if (sh.sh_flags & SHF_COMPRESSED) {
			GElf_Chdr ch;

			if (!gelf_getchdr(scn, &ch))
				return -ENOEXEC;
			inflated += ch.ch_size < PLABEL_ELF_MAX_INFLATED ?
				    ch.ch_size : PLABEL_ELF_MAX_INFLATED;
		} else if ((name = elf_strptr(elf, shstrndx, sh.sh_name)) &&
			   !strncmp(name, ".zdebug", 7)) {
			/* "ZLIB" and the size, 8 bytes big-endian */
			const uint8_t *z;
			Elf_Data *d = elf_rawdata(scn, NULL);
			uint64_t zs = 0;
			int i;

			if (!d || d->d_size < 12 || memcmp(d->d_buf, "ZLIB", 4))
				continue;	/* not compressed: libdw agrees */
			z = (const uint8_t *)d->d_buf + 4;
			for (i = 0; i < 8; i++)
				zs = zs << 8 | z[i];
			inflated += zs < PLABEL_ELF_MAX_INFLATED ?
				    zs : PLABEL_ELF_MAX_INFLATED;
		}
		if (inflated > PLABEL_ELF_MAX_INFLATED)
			return -ENOEXEC;
	}
	return 0;
}

static int plabel_elf_load_phdrs(struct plabel_elf *e, Elf *elf)
{
	size_t phnum, i;
	const void *bid;
	ssize_t bidlen;

	if (elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &phnum))
		return -ENOEXEC;
	e->segs = calloc(phnum ? phnum : 1, sizeof(*e->segs));
	if (!e->segs)
		return -ENOMEM;
	for (i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph))
			return -ENOEXEC;
		if (ph.p_type == PT_LOAD) {
			struct plabel_seg *sg = &e->segs[e->nsegs++];

			sg->vaddr = ph.p_vaddr;
			sg->memsz = ph.p_memsz;
			sg->offset = ph.p_offset;
			sg->filesz = ph.p_filesz;
			if (sg->offset > e->image_size ||
			    sg->filesz > e->image_size - sg->offset ||
			    sg->filesz > sg->memsz)
				e->nsegs--;	/* nonsense: ignore it */
		} else if (ph.p_type == PT_GNU_EH_FRAME) {
			e->eh_vaddr = ph.p_vaddr;
			e->eh_size = ph.p_memsz;
		}
	}
	bidlen = dwelf_elf_gnu_build_id(elf, &bid);
	if (bidlen > 0) {
		const uint8_t *b = bid;
		ssize_t j;

		e->build_id = malloc(bidlen * 2 + 1);
		if (!e->build_id)
			return -ENOMEM;
		for (j = 0; j < bidlen; j++)
			sprintf(e->build_id + 2 * j, "%02x", b[j]);
	}
	return 0;
}

/*
 * A private, sealed copy of the size bytes of regular file fd in a memfd:
 * what the file's owner does to it later (truncating it under a mapping
 * would be SIGBUS, rewriting it would change what was checked) no longer
 * reaches the reader. The memfd, or a negative errno.
 */
static int plabel_elf_copy(int fd, size_t size)
{
	size_t done = 0;
	int mfd;

	mfd = memfd_create("plabel-elf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return -errno;
	while (done < size) {
		off_t pos = done;
		ssize_t n = sendfile(mfd, fd, &pos, size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* shrunk while read: not the file we were asked about */
			close(mfd);
			return n < 0 ? -errno : -ESTALE;
		}
		done += n;
	}
	if (fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
		  F_SEAL_WRITE | F_SEAL_SEAL)) {
		int err = -errno;

		close(mfd);
		return err;
	}
	return mfd;
}

/*
 * Room for a private copy of size bytes in s's budget, taken. 0 or 1.
 * A size below 0 (as a uint64_t: over the budget) gives it back.
 */
static int copy_take(struct plabel_syms *s, uint64_t size)
{
	int over;

	if (s->shared)
		pthread_mutex_lock(&s->list_lock);
	if ((int64_t)size < 0) {
		s->copied += size;
		over = 0;
	} else {
		over = size > s->copy_limit - s->copied;
		if (!over)
			s->copied += size;
	}
	if (s->shared)
		pthread_mutex_unlock(&s->list_lock);
	return over;
}

static int plabel_elf_open(struct plabel_elf *e)
{
	struct stat st;
	Elf *elf;
	int fd, mfd, ret;

	/* a FIFO put in the file's place since it was named must not block */
	fd = open_regular(e->path, &st);
	if (fd < 0)
		return fd;
	/* replaced since it was named (say, rebuilt): its names would lie */
	if (st.st_dev != e->seen.st_dev ||
	    st.st_ino != e->seen.st_ino || st.st_size != e->seen.st_size ||
	    st.st_mtim.tv_sec != e->seen.st_mtim.tv_sec ||
	    st.st_mtim.tv_nsec != e->seen.st_mtim.tv_nsec) {
		close(fd);
		return -ESTALE;
	}
	/*
	 * Only root can change a file that root owns and its group and
	 * others cannot write: such files (the system's programs and
	 * libraries, most of what is mapped) are read in place, without the
	 * memory a copy costs. Any other file is copied first.
	 */
	if (st.st_uid == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH))) {
		mfd = fd;
	} else if (copy_take(e->owner, st.st_size)) {
		close(fd);
		return -E2BIG;
	} else {
		mfd = plabel_elf_copy(fd, st.st_size);
		close(fd);
		if (mfd < 0) {
			copy_take(e->owner, -(uint64_t)st.st_size);
			return mfd;
		}
	}
	e->image_size = st.st_size;
	e->image = mmap(NULL, e->image_size, PROT_READ, MAP_PRIVATE, mfd, 0);
	if (e->image == MAP_FAILED) {
		ret = -errno;
		e->image = NULL;
		close(mfd);
		return ret;
	}
	elf = elf_memory((char *)e->image, e->image_size);
	if (!elf) {
		close(mfd);
		return -ENOEXEC;
	}
	ret = plabel_elf_check_sections(elf, e->image_size);
	if (!ret)
		ret = plabel_elf_load_phdrs(e, elf);
	elf_end(elf);
	if (ret) {
		close(mfd);
		return ret;
	}

	/* libdwfl reads what was checked, never the path again */
	e->dwfl = dwfl_begin(&plabel_dwfl_cb);
	if (!e->dwfl) {
		close(mfd);
		return 0;
	}
	dwfl_report_begin(e->dwfl);
	e->mod = dwfl_report_elf(e->dwfl, e->path, e->path, mfd, 0, false);
	if (!e->mod)
		close(mfd);	/* consumed only on success */
	dwfl_report_end(e->dwfl, NULL, NULL);
	if (e->mod && !dwfl_module_getelf(e->mod, &e->mod_bias))
		e->mod = NULL;
	return 0;
}

/* Whether a and b are the same version of a file. */
static int same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The most versions of one path a shared struct names (see syms_elf()). */
#define PLABEL_ELF_MAX_VERSIONS	8

/* e, or NULL when it can't be read (as plabel_syms_elf() says). */
static struct plabel_elf *elf_if_ok(struct plabel_elf *e)
{
	return __atomic_load_n(&e->state, __ATOMIC_RELAXED) != PLABEL_ELF_BAD ?
	       e : NULL;
}

/*
 * The entry of path, named now if it has none. Shared, s outlives the
 * processes that named a file: a file replaced since (an upgrade) is
 * named anew, and the old entry stays for those who hold it. now is then
 * what path is now (stat() by the caller, outside the lock): its entry is
 * found among all of the path's versions (a process swapping two back
 * and forth adds none), at most PLABEL_ELF_MAX_VERSIONS of them (past
 * that the file gets no symbols); a path that is not there (now NULL)
 * gets nothing and no entry, as it may come back.
 */
static struct plabel_elf *syms_elf(struct plabel_syms *s, const char *path,
				   const struct stat *now)
{
	struct plabel_elf *e;
	int bad, nver = 0;

	for (e = s->elfs; e; e = e->next) {
		if (strcmp(e->path, path))
			continue;
		if (!s->shared || same_file(now, &e->seen))
			return elf_if_ok(e);
		if (++nver >= PLABEL_ELF_MAX_VERSIONS)
			return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->owner = s;
	e->path = strdup(path);
	if (!e->path || recursive_init(&e->lock)) {
		free(e->path);
		free(e);
		return NULL;
	}
	/* only looked at: reading it waits for the first question */
	if (s->shared) {
		e->seen = *now;
		bad = 0;
	} else {
		bad = stat(path, &e->seen);
		if (bad)
			memset(&e->seen, 0, sizeof(e->seen));
	}
	e->state = bad || !S_ISREG(e->seen.st_mode) ||
		   e->seen.st_size <= 0 ||
		   (uint64_t)e->seen.st_size > PLABEL_ELF_MAX_SIZE ?
		   PLABEL_ELF_BAD : PLABEL_ELF_SEEN;
	e->next = s->elfs;
	s->elfs = e;
	s->nelfs++;
	return elf_if_ok(e);
}

struct plabel_elf *plabel_syms_elf(struct plabel_syms *s, const char *path)
{
	struct plabel_elf *e;

	struct stat now;

	if (!s->shared)
		return syms_elf(s, path, NULL);
	if (stat(path, &now))
		return NULL;
	pthread_mutex_lock(&s->list_lock);
	e = syms_elf(s, path, &now);
	pthread_mutex_unlock(&s->list_lock);
	return e;
}

/*
 * Read the file on first use. 0, or -ENOEXEC when it can't be. Shared,
 * the first read is made under the file's lock; what it sets is read
 * after state says it is done, without it.
 */
static int plabel_elf_load(struct plabel_elf *e)
{
	enum plabel_elf_state st = __atomic_load_n(&e->state,
						   __ATOMIC_ACQUIRE);
	int bad;

	if (st == PLABEL_ELF_SEEN) {
		elf_lock(e);
		st = e->state;
		if (st == PLABEL_ELF_SEEN) {
			bad = plabel_elf_open(e) != 0;
			if (bad && e->dwfl) {
				dwfl_end(e->dwfl);
				e->dwfl = NULL;
			}
			st = bad ? PLABEL_ELF_BAD : PLABEL_ELF_LOADED;
			__atomic_store_n(&e->state, st, __ATOMIC_RELEASE);
		}
		elf_unlock(e);
	}
	return st == PLABEL_ELF_LOADED ? 0 : -ENOEXEC;
}

const char *plabel_elf_build_id(struct plabel_elf *e)
{
	return plabel_elf_load(e) ? NULL : e->build_id;
}

int plabel_elf_bias(struct plabel_elf *e, uint64_t map_start,
		    uint64_t map_offset, uint64_t *bias)
{
	size_t i;

	if (plabel_elf_load(e))
		return -ENOENT;
	for (i = 0; i < e->nsegs; i++) {
		const struct plabel_seg *sg = &e->segs[i];

		/* mappings start page aligned, segments need not */
		if (map_offset >= (sg->offset & ~4095ULL) &&
		    map_offset < sg->offset + sg->filesz) {
			*bias = map_start - map_offset -
				(sg->vaddr - sg->offset);
			return 0;
		}
	}
	return -ENOENT;
}

int plabel_elf_read(struct plabel_elf *e, uint64_t vaddr, void *buf,
		    size_t len)
{
	size_t i;

	if (plabel_elf_load(e))
		return -EFAULT;
	for (i = 0; i < e->nsegs; i++) {
		const struct plabel_seg *sg = &e->segs[i];
		uint64_t rel, nfile;

		if (vaddr < sg->vaddr || vaddr - sg->vaddr >= sg->memsz ||
		    len > sg->memsz - (vaddr - sg->vaddr))
			continue;
		rel = vaddr - sg->vaddr;
		nfile = rel < sg->filesz ? sg->filesz - rel : 0;
		if (nfile > len)
			nfile = len;
		if (nfile)
			memcpy(buf, e->image + sg->offset + rel, nfile);
		memset((uint8_t *)buf + nfile, 0, len - nfile);
		return 0;
	}
	return -EFAULT;
}

void plabel_elf_extent(struct plabel_elf *e, uint64_t *lo,
		       uint64_t *hi)
{
	size_t i;

	*lo = UINT64_MAX;
	*hi = 0;
	for (i = 0; !plabel_elf_load(e) && i < e->nsegs; i++) {
		if (e->segs[i].vaddr < *lo)
			*lo = e->segs[i].vaddr;
		if (e->segs[i].vaddr + e->segs[i].memsz > *hi)
			*hi = e->segs[i].vaddr + e->segs[i].memsz;
	}
	if (*lo > *hi)
		*lo = *hi = 0;
}

int plabel_elf_eh_frame_hdr(struct plabel_elf *e, uint64_t *vaddr,
			    uint64_t *size)
{
	if (plabel_elf_load(e) || !e->eh_size)
		return -ENOENT;
	*vaddr = e->eh_vaddr;
	*size = e->eh_size;
	return 0;
}

static const char *src_file(Dwarf_Files *files, Dwarf_Word idx)
{
	if (!files)
		return NULL;
	return dwarf_filesrc(files, idx, NULL, NULL);
}

static int is_func(Dwarf_Die *d)
{
	int tag = dwarf_tag(d);

	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine;
}

/* DIEs that may hold functions whether or not they have addresses. */
static int is_container(Dwarf_Die *d)
{
	switch (dwarf_tag(d)) {
	case DW_TAG_namespace:
	case DW_TAG_module:
	case DW_TAG_class_type:
	case DW_TAG_structure_type:
	case DW_TAG_union_type:
		return 1;
	}
	return 0;
}

/* DIEs with code, to be entered only when they cover the address. */
static int is_code_scope(Dwarf_Die *d)
{
	switch (dwarf_tag(d)) {
	case DW_TAG_subprogram:
	case DW_TAG_inlined_subroutine:
	case DW_TAG_lexical_block:
	case DW_TAG_try_block:
	case DW_TAG_catch_block:
	case DW_TAG_with_stmt:
	case DW_TAG_entry_point:
		return 1;
	}
	return 0;
}

/*
 * The innermost subprogram or inlined subroutine of cu's DIE tree that
 * covers pc, into *out. 1 when found, else 0.
 *
 * Walked here rather than with dwarf_getscopes(): that one also resolves
 * every abstract origin of the scopes it found, which plabel does not
 * need, and elfutils 0.188 leaks its result when one of those
 * references is broken. Descends only through DIEs that cover pc (and
 * through namespaces and classes, which have no addresses), never deeper
 * than PLABEL_SCOPE_DEPTH, and looks at no more than PLABEL_SCOPE_DIES
 * DIEs, so a crafted tree costs bounded time.
 */
#define PLABEL_SCOPE_DEPTH	256
#define PLABEL_SCOPE_DIES	(1 << 20)

static int scope_walk(Dwarf_Die *parent, Dwarf_Addr pc,
		      Dwarf_Die *out, unsigned int depth,
		      unsigned int *budget)
{
	Dwarf_Die child;

	if (depth >= PLABEL_SCOPE_DEPTH || dwarf_child(parent, &child))
		return 0;
	do {
		if (!*budget)
			return 0;
		(*budget)--;
		if (is_code_scope(&child)) {
			if (dwarf_haspc(&child, pc) != 1)
				continue;
			/* scopes with code nest: this one is the way in */
			if (is_func(&child))
				*out = child;
			scope_walk(&child, pc, out, depth + 1, budget);
			return 1;
		}
		if (is_container(&child) &&
		    dwarf_haschildren(&child) == 1 &&
		    scope_walk(&child, pc, out, depth + 1, budget))
			return 1;
	} while (dwarf_siblingof(&child, &child) == 0);
	return 0;
}

static int innermost_func(Dwarf_Die *cu, Dwarf_Addr pc,
			  Dwarf_Die *out)
{
	unsigned int budget = PLABEL_SCOPE_DIES;
	Dwarf_Die found;

	found.addr = NULL;
	scope_walk(cu, pc, &found, 0, &budget);
	if (!found.addr)
		return 0;
	*out = found;
	return 1;
}

static const char *die_name(Dwarf_Die *d)
{
	Dwarf_Attribute a;
	const char *n;

	/* C++: the mangled name is what pprof demangles */
	n = dwarf_formstring(dwarf_attr_integrate(d, DW_AT_linkage_name, &a));
	if (n)
		return n;
	return dwarf_diename(d);
}

static int elf_symbolize(struct plabel_elf *e, uint64_t vaddr,
			 struct plabel_sym_frame *frames, int max)
{
	Dwarf_Addr addr, cubias = 0;
	Dwarf_Files *files = NULL;
	const char *symname = NULL;
	Dwarf_Die *cudie, cur;
	Dwfl_Line *line;
	GElf_Off off;
	GElf_Sym sym;
	int n = 0, i;

	if (plabel_elf_load(e) || !e->mod || max <= 0)
		return 0;
	addr = vaddr + e->mod_bias;
	frames[0].function = NULL;
	frames[0].file = NULL;
	frames[0].line = 0;
	symname = dwfl_module_addrinfo(e->mod, addr, &off, &sym, NULL, NULL,
				       NULL);
	line = dwfl_module_getsrc(e->mod, addr);
	if (line) {
		int lineno = 0;
		const char *f = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL,
					      NULL);

		frames[0].file = f;
		frames[0].line = lineno;
	}

	cudie = dwfl_module_addrdie(e->mod, addr, &cubias);
	if (cudie && innermost_func(cudie, addr - cubias, &cur)) {
		dwarf_getsrcfiles(cudie, &files, NULL);
		frames[n++].function = die_name(&cur);
		/*
		 * The concrete caller of an inlined instance is found from
		 * the instance's own parents.
		 */
		while (dwarf_tag(&cur) == DW_TAG_inlined_subroutine &&
		       n < max) {
			Dwarf_Die *ps = NULL;
			Dwarf_Attribute a;
			Dwarf_Word cf = 0, cl = 0;
			int np, j;

			frames[n].function = NULL;
			frames[n].file = NULL;
			frames[n].line = 0;
			if (dwarf_formudata(dwarf_attr(&cur, DW_AT_call_file,
						       &a), &cf) == 0)
				frames[n].file = src_file(files, cf);
			if (dwarf_formudata(dwarf_attr(&cur, DW_AT_call_line,
						       &a), &cl) == 0)
				frames[n].line = cl;
			np = dwarf_getscopes_die(&cur, &ps);
			for (j = 1; j < np; j++)
				if (is_func(&ps[j]))
					break;
			if (j >= np) {
				free(ps);
				n++;	/* the caller is unknown by name */
				break;
			}
			cur = ps[j];
			free(ps);
			frames[n++].function = die_name(&cur);
		}
	}
	if (n == 0) {
		if (!symname && !frames[0].file)
			return 0;
		n = 1;
	}
	/*
	 * The outermost frame is the real function: trust the symbol table
	 * when DWARF gave no name.
	 */
	if (!frames[n - 1].function)
		frames[n - 1].function = symname;
	for (i = 0; i < n; i++) {
		const char *f = frames[i].function;

		if (!f)
			f = symname;
		/* glibc's hidden internal aliases: show the public name */
		if (f && !strncmp(f, "__GI_", 5) && f[5])
			f += 5;
		frames[i].function = f;
	}
	return n;
}

int plabel_elf_symbolize(struct plabel_elf *e, uint64_t vaddr,
			 struct plabel_sym_frame *frames, int max)
{
	int ret;

	elf_lock(e);
	ret = elf_symbolize(e, vaddr, frames, max);
	elf_unlock(e);
	return ret;
}

static int ksym_cmp(const void *a, const void *b)
{
	const struct plabel_ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void kallsyms_read(struct plabel_syms *s)
{
	char line[512], name[256], type;
	size_t cap = 0;
	uint64_t addr;
	FILE *f;

	s->kallsyms_read = 1;
	f = fopen("/proc/kallsyms", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		struct plabel_ksym *k;

		if (sscanf(line, "%" SCNx64 " %c %255s", &addr, &type,
			   name) != 3)
			continue;
		if (!addr || (type != 't' && type != 'T' && type != 'w' &&
			      type != 'W'))
			continue;
		if (s->nksyms == cap) {
			size_t ncap = cap ? cap * 2 : 4096;

			k = realloc(s->ksyms, ncap * sizeof(*k));
			if (!k)
				break;
			s->ksyms = k;
			cap = ncap;
		}
		k = &s->ksyms[s->nksyms];
		k->addr = addr;
		k->name = strdup(name);
		if (!k->name)
			break;
		s->nksyms++;
	}
	fclose(f);
	if (s->nksyms)
		qsort(s->ksyms, s->nksyms, sizeof(*s->ksyms),
		      ksym_cmp);
}

static const char *syms_kernel(struct plabel_syms *s, uint64_t addr)
{
	size_t lo = 0, hi;

	if (!s->kallsyms_read)
		kallsyms_read(s);
	hi = s->nksyms;
	if (!hi || addr < s->ksyms[0].addr)
		return NULL;
	/* last symbol with ksyms[i].addr <= addr */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->ksyms[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	return s->ksyms[lo].name;
}

const char *plabel_syms_kernel(struct plabel_syms *s, uint64_t addr)
{
	const char *ret;

	syms_lock(s);
	ret = syms_kernel(s, addr);
	syms_unlock(s);
	return ret;
}

void plabel_maps_free(struct plabel_map *maps, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(maps[i].path);
	free(maps);
}

int plabel_maps_read_proc(struct plabel_syms *s, pid_t pid,
			  struct plabel_map **maps, size_t *n)
{
	struct plabel_map *m = NULL, *nm;
	size_t cnt = 0, cap = 0;
	char fn[64], line[4352];
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	f = fopen(fn, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, end, off;
		char perms[8];
		int pos = 0;
		char *path;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64
			   " %*s %*u %n", &start, &end, perms, &off,
			   &pos) < 4 || !pos)
			continue;
		path = line + pos;
		path[strcspn(path, "\n")] = 0;
		if (perms[2] != 'x' || path[0] != '/')
			continue;
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			nm = realloc(m, cap * sizeof(*m));
			if (!nm)
				goto err_nomem;
			m = nm;
		}
		m[cnt].start = start;
		m[cnt].end = end;
		m[cnt].offset = off;
		m[cnt].time_ns = 0;
		m[cnt].path = strdup(path);
		if (!m[cnt].path)
			goto err_nomem;
		m[cnt].elf = plabel_syms_elf(s, path);
		cnt++;
	}
	fclose(f);
	*maps = m;
	*n = cnt;
	return 0;

err_nomem:
	fclose(f);
	plabel_maps_free(m, cnt);
	return -ENOMEM;
}

const struct plabel_map *plabel_maps_find(const struct plabel_map *maps,
					  size_t n, uint64_t addr)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (addr >= maps[i].start && addr < maps[i].end)
			return &maps[i];
	return NULL;
}

/* ---- PLT stubs: func@plt, as perf names them ---- */

struct plabel_plt_rel {
	uint64_t got;		/* the GOT slot the stub jumps through */
	const char *sym;	/* the symbol the slot is bound to, or NULL: */
	int64_t addend;		/* an IFUNC resolver's address (IRELATIVE) */
};

static int plt_rel_cmp(const void *a, const void *b)
{
	const struct plabel_plt_rel *x = a, *y = b;

	return x->got < y->got ? -1 : x->got > y->got;
}

static int plt_cmp(const void *a, const void *b)
{
	const struct plabel_plt *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The dynamic relocations with a symbol (JUMP_SLOT, GLOB_DAT), by slot. */
static int plt_rels(Elf *elf, struct plabel_plt_rel **out, size_t *n)
{
	Elf_Scn *scn = NULL;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh, symsh;
		Elf_Scn *symscn;
		Elf_Data *d, *symd;
		size_t i, nrel;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA ||
		    !sh.sh_entsize)
			continue;
		symscn = elf_getscn(elf, sh.sh_link);
		d = elf_getdata(scn, NULL);
		if (!symscn || !gelf_getshdr(symscn, &symsh) ||
		    symsh.sh_type != SHT_DYNSYM || !d)
			continue;
		symd = elf_getdata(symscn, NULL);
		if (!symd)
			continue;
		nrel = d->d_size / sh.sh_entsize;
		for (i = 0; i < nrel; i++) {
			GElf_Rela r;
			GElf_Sym sym;
			const char *name;
			unsigned long type;

			if (!gelf_getrela(d, i, &r))
				break;
			type = GELF_R_TYPE(r.r_info);
			if (type == R_X86_64_IRELATIVE) {
				name = NULL;
			} else if ((type != R_X86_64_JUMP_SLOT &&
				    type != R_X86_64_GLOB_DAT) ||
				   !GELF_R_SYM(r.r_info) ||
				   !gelf_getsym(symd, GELF_R_SYM(r.r_info),
						&sym)) {
				continue;
			} else {
				name = elf_strptr(elf, symsh.sh_link,
						  sym.st_name);
				if (!name || !*name)
					continue;
			}
			if (*n == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct plabel_plt_rel *nr;

				nr = realloc(*out, ncap * sizeof(*nr));
				if (!nr)
					return -ENOMEM;
				*out = nr;
				cap = ncap;
			}
			(*out)[*n].got = r.r_offset;
			(*out)[*n].addend = r.r_addend;
			(*out)[(*n)++].sym = name;
		}
	}
	if (*n)
		qsort(*out, *n, sizeof(**out), plt_rel_cmp);
	return 0;
}

/*
 * Name every stub of .plt, .plt.sec and .plt.got: each is an indirect
 * jump through a GOT slot (ff 25 disp32, maybe after endbr64 or a bnd
 * prefix), and the slot's dynamic relocation names the function. Every
 * read is inside the section's data, so a malformed file yields no names.
 */
static int plt_read(struct plabel_elf *e)
{
	struct plabel_plt_rel *rels = NULL;
	size_t nrels = 0, shstrndx, cap = 0;
	Elf_Scn *scn = NULL;
	GElf_Addr bias;
	Elf *elf;
	int ret = 0;

	e->plt_read = 1;
	if (plabel_elf_load(e) || !e->mod)
		return 0;
	elf = dwfl_module_getelf(e->mod, &bias);
	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return 0;
	ret = plt_rels(elf, &rels, &nrels);
	while (!ret && nrels && (scn = elf_nextscn(elf, scn))) {
		uint64_t ent, off;
		const char *sname;
		const uint8_t *b;
		Elf_Data *d;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_EXECINSTR))
			continue;
		sname = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!sname || (strcmp(sname, ".plt") &&
			       strcmp(sname, ".plt.sec") &&
			       strcmp(sname, ".plt.got")))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		ent = sh.sh_entsize >= 8 && sh.sh_entsize <= 32 ?
		      sh.sh_entsize : 16;
		b = d->d_buf;
		for (off = 0; off + ent <= d->d_size; off += ent) {
			struct plabel_plt_rel key, *hit = NULL;
			uint64_t k;

			for (k = 0; k + 6 <= ent && !hit; k++) {
				int32_t disp;

				if (b[off + k] != 0xff || b[off + k + 1] != 0x25)
					continue;
				memcpy(&disp, b + off + k + 2, 4);
				key.got = sh.sh_addr + off + k + 6 + (int64_t)disp;
				hit = bsearch(&key, rels, nrels, sizeof(*rels),
					      plt_rel_cmp);
			}
			if (!hit)
				continue;
			if (e->nplt == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct plabel_plt *np;

				np = realloc(e->plt, ncap * sizeof(*np));
				if (!np) {
					ret = -ENOMEM;
					break;
				}
				e->plt = np;
				cap = ncap;
			}
			e->plt[e->nplt].start = sh.sh_addr + off;
			e->plt[e->nplt].end = sh.sh_addr + off + ent;
			/* an IFUNC's stub as binutils names it */
			if ((hit->sym ?
			     asprintf(&e->plt[e->nplt].name, "%s@plt",
				      hit->sym) :
			     asprintf(&e->plt[e->nplt].name,
				      "*ABS*+0x%" PRIx64 "@plt",
				      (uint64_t)hit->addend)) < 0) {
				ret = -ENOMEM;
				break;
			}
			e->nplt++;
		}
	}
	free(rels);
	if (e->nplt > 1)
		qsort(e->plt, e->nplt, sizeof(*e->plt), plt_cmp);
	return ret;
}

static const char *elf_plt(struct plabel_elf *e, uint64_t vaddr)
{
	size_t lo = 0, hi;

	if (!e->plt_read && plt_read(e) == -ENOMEM)
		return NULL;
	hi = e->nplt;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (vaddr < e->plt[mid].start)
			hi = mid;
		else if (vaddr >= e->plt[mid].end)
			lo = mid + 1;
		else
			return e->plt[mid].name;
	}
	return NULL;
}

const char *plabel_elf_plt(struct plabel_elf *e, uint64_t vaddr)
{
	const char *ret;

	elf_lock(e);
	ret = elf_plt(e, vaddr);
	elf_unlock(e);
	return ret;
}
