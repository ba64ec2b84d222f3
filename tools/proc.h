/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The processes of a recording: each one's mappings per exec generation
 * (from MMAP records, or /proc when the kernel gave none), its exec times
 * and names, and the view of one generation's mappings that unwinding and
 * address lookups take.
 */
#ifndef PLABEL_TOOLS_PROC_H
#define PLABEL_TOOLS_PROC_H

#include <stddef.h>
#include <stdint.h>

#include "symbolize.h"
#include "table.h"

/* Mappings of one process generation that addresses are looked up in. */
#define PLABEL_VIEW_MAX		256

struct plabel_proc {
	uint32_t pid;		/* first: plabel_itab_u32()'s key */
	uint32_t tried_gen;	/* 1 + generation /proc/PID/maps was read for */
	struct plabel_map *maps;
	size_t nmaps, cap;
	uint32_t *map_gen;	/* generation of maps[i] */
	uint64_t *map_last;	/* newest time maps[i] was reported at */
	uint8_t *map_fallback;	/* maps[i] came from /proc */
	uint64_t *exec_times;	/* EXEC record times */
	uint32_t *exec_names;	/* the name each exec gave it (name ids) */
	size_t nexec, exec_cap;
	uint32_t name0;		/* name before any exec seen; 0: unknown */
	uint8_t name0_tried;

	/*
	 * The mappings of generation view_gen as one array, what the
	 * unwinder and the address lookups take: real ones first, /proc
	 * fallbacks after. Samples of a process nearly always share it, so
	 * it is kept until a mapping or an exec is added.
	 */
	struct plabel_map *view;
	uint32_t *view_idx;	/* view[k] is a copy of maps[view_idx[k]] */
	size_t nview, view_cap;
	uint32_t view_gen;
	int view_ok;
};

/* The processes by pid; a zeroed one holds none. */
struct plabel_procs {
	struct plabel_proc *by_idx;
	size_t n, cap;
	struct plabel_itab tab;	/* by pid */
	size_t last;		/* 1 + index of the last one looked up, or 0 */
};

void plabel_procs_release(struct plabel_procs *ps);
/* The process pid, added if new (others may move). NULL on ENOMEM. */
struct plabel_proc *plabel_procs_get(struct plabel_procs *ps, uint32_t pid);
/* The first tables allocated and touched. 0 or -ENOMEM. */
int plabel_procs_prefault(struct plabel_procs *ps);

static inline size_t plabel_procs_index(const struct plabel_procs *ps,
					const struct plabel_proc *p)
{
	return (size_t)(p - ps->by_idx);
}

/* The exec generation of p at time t: the EXEC records before it. */
uint32_t plabel_proc_gen(const struct plabel_proc *p, uint64_t t);
/*
 * A mapping of p at time t (path_len bytes of path, its ELF file opened
 * through syms), from /proc when fallback. A repeat is kept once. 0 or
 * -ENOMEM.
 */
int plabel_proc_add_map(struct plabel_syms *syms, struct plabel_proc *p,
			uint64_t start, uint64_t end, uint64_t off, uint64_t t,
			const char *path, size_t path_len, int fallback);
/*
 * p's mappings from /proc/PID/maps now, as fallbacks at time t: 1 when
 * read, 0 when the process is gone, -ENOMEM.
 */
int plabel_proc_read_maps(struct plabel_syms *syms, struct plabel_proc *p,
			  uint64_t t);
/*
 * Make p's view the mappings of generation gen (at most PLABEL_VIEW_MAX).
 * 0 or -ENOMEM.
 */
int plabel_proc_view(struct plabel_proc *p, uint32_t gen);
/*
 * p exec'd at time t, taking the name name (a name id, 0: none): a new
 * generation, and the kernel's mappings stamped after t move to it. 0 or
 * -ENOMEM.
 */
int plabel_proc_exec(struct plabel_syms *syms, struct plabel_proc *p,
		     uint64_t t, uint32_t name);
/* The id of p's name at time t (after the latest exec before t); 0: none. */
uint32_t plabel_proc_name_at(const struct plabel_proc *p, uint64_t t);

#endif /* PLABEL_TOOLS_PROC_H */
