/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Symbolization: ELF files on disk (opened once per path, through libdwfl
 * for names, source lines and inlined frames, and mapped for raw reads by
 * the unwinder), process mappings, and the kernel's /proc/kallsyms.
 */
#ifndef PLABEL_TOOLS_SYMBOLIZE_H
#define PLABEL_TOOLS_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct plabel_syms;
struct plabel_elf;

/* One executable file mapping of a process. */
struct plabel_map {
	uint64_t start, end;	/* runtime addresses, end exclusive */
	uint64_t offset;	/* file offset of start */
	uint64_t time_ns;	/* when it was seen */
	char *path;
	struct plabel_elf *elf;	/* NULL when the file can't be read */
};

/* One frame of a symbolized address: innermost (inlined) first. */
struct plabel_sym_frame {
	const char *function;	/* NULL if unknown */
	const char *file;	/* NULL if unknown */
	int line;		/* 0 if unknown */
};

#define PLABEL_SYM_MAX_FRAMES	16

struct plabel_syms *plabel_syms_new(void);
/* Drops a holder's reference (plabel_syms_new() gives one): the last frees. */
void plabel_syms_free(struct plabel_syms *s);
/*
 * For use by several threads at once, from now on: before any other
 * thread has s. A file named again after it was replaced (another inode,
 * size or mtime) is then named anew, as s outlives the processes that
 * mapped it: plabel_syms_elf() stat()s the path each time and gives the
 * entry of the version it names now (at most 8 versions a path; a path
 * not there gets NULL and no entry).
 */
void plabel_syms_share(struct plabel_syms *s);
/* One more holder's reference: s, for plabel_syms_free(). */
struct plabel_syms *plabel_syms_get(struct plabel_syms *s);
/*
 * How many entries (versions of files named) s holds, and the bytes of
 * its private copies of files (out of 2 GiB).
 */
void plabel_syms_usage(struct plabel_syms *s, size_t *files,
		       uint64_t *copied);
/*
 * The most the private copies of files others can write may take in all
 * (default 2 GiB); files past it stay unsymbolized. For tests.
 */
void plabel_syms_set_copy_limit(struct plabel_syms *s, uint64_t bytes);

/*
 * The ELF file at path, cached by path (NULL every time when it is not a
 * regular file, or is empty or over 1 GiB; shared, see
 * plabel_syms_share()). Naming it costs a stat(); the
 * file is read on the first question asked of it below, and only if it is
 * still the file first named (same inode, size and mtime): after that, or
 * when it is not ELF, every question gets the "unknown" answer. It is
 * opened without blocking and, unless only root can write it, copied
 * whole into a sealed memfd, which is all that is read after: the file's
 * owner cannot change or truncate what the reader looks at.
 */
struct plabel_elf *plabel_syms_elf(struct plabel_syms *s, const char *path);

/* Hex GNU build id, or NULL when the file has none. */
const char *plabel_elf_build_id(struct plabel_elf *e);

/*
 * Load bias of a mapping of e: runtime address = ELF vaddr + bias.
 * -ENOENT when no PT_LOAD segment covers map_offset.
 */
int plabel_elf_bias(struct plabel_elf *e, uint64_t map_start,
		    uint64_t map_offset, uint64_t *bias);

/*
 * Copy len bytes of the loaded image at ELF vaddr (zeros past a segment's
 * file size). -EFAULT when [vaddr, vaddr+len) is not inside one PT_LOAD.
 */
int plabel_elf_read(struct plabel_elf *e, uint64_t vaddr, void *buf,
		    size_t len);

/* Lowest and highest (exclusive) PT_LOAD vaddr. */
void plabel_elf_extent(struct plabel_elf *e, uint64_t *lo,
		       uint64_t *hi);

/* vaddr and size of .eh_frame_hdr (PT_GNU_EH_FRAME); -ENOENT if none. */
int plabel_elf_eh_frame_hdr(struct plabel_elf *e, uint64_t *vaddr,
			    uint64_t *size);

/*
 * Symbolize ELF vaddr: fills up to max frames, innermost first (inlined
 * frames expanded when debug info exists). Returns the count, 0 when
 * nothing is known. Strings live until plabel_syms_free().
 */
int plabel_elf_symbolize(struct plabel_elf *e, uint64_t vaddr,
			 struct plabel_sym_frame *frames, int max);

/*
 * The PLT stub at ELF vaddr, named "func@plt" after the function it jumps
 * to (as perf names them), or NULL when vaddr is in none.
 */
const char *plabel_elf_plt(struct plabel_elf *e, uint64_t vaddr);

/*
 * Kernel symbol of addr from /proc/kallsyms (read once; unreadable or
 * hidden addresses give none). NULL when unknown.
 */
const char *plabel_syms_kernel(struct plabel_syms *s, uint64_t addr);

/*
 * Executable file-backed mappings of pid from /proc/PID/maps, with elf
 * resolved through s. *maps is malloc()ed; free with plabel_maps_free().
 */
int plabel_maps_read_proc(struct plabel_syms *s, pid_t pid,
			  struct plabel_map **maps, size_t *n);
void plabel_maps_free(struct plabel_map *maps, size_t n);

/* The mapping in maps[0..n) containing addr, or NULL. */
const struct plabel_map *plabel_maps_find(const struct plabel_map *maps,
					  size_t n, uint64_t addr);

#endif /* PLABEL_TOOLS_SYMBOLIZE_H */
