/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The names of a recording's processes and threads (the process and
 * thread labels): each distinct name stored once and named by an id, and
 * each thread's names over time.
 */
#ifndef PLABEL_TOOLS_NAMES_H
#define PLABEL_TOOLS_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "table.h"

struct plabel_tnames;

/* A zeroed one holds none. */
struct plabel_names {
	char **strs;		/* name id - 1 -> name */
	size_t n, cap;
	struct plabel_tnames *tns;	/* threads' names */
	size_t ntns, tns_cap;
	struct plabel_itab tn_tab;	/* by tid */
};

void plabel_names_release(struct plabel_names *nm);

/*
 * The id of name s (at most len bytes, up to a NUL, trailing newlines and
 * spaces cut), added if new; 0 on ENOMEM or an empty name.
 */
uint32_t plabel_names_id(struct plabel_names *nm, const char *s, size_t len);

/* The name of id (not 0). */
static inline const char *plabel_names_str(const struct plabel_names *nm,
					   uint32_t id)
{
	return nm->strs[id - 1];
}

/*
 * The id of the name of running process pid as exec gives it: the base
 * name of its executable, cut to the kernel's 15 bytes of comm; for a
 * kernel thread its comm. 0: not known.
 */
uint32_t plabel_names_proc_now(struct plabel_names *nm, uint32_t pid);

/*
 * Thread tid of process pid seen: what it is called is read from /proc
 * the first time. 0 or -ENOMEM.
 */
int plabel_names_thread_seen(struct plabel_names *nm, uint32_t pid,
			     uint32_t tid);

/*
 * Thread tid created child_tid at time t: the child is called what tid
 * was then, and the names of a thread that had that tid before go. 0 or
 * -ENOMEM.
 */
int plabel_names_thread_new(struct plabel_names *nm, uint32_t tid,
			    uint64_t t, uint32_t child_tid);

/* Thread tid called comm (len bytes at most) from time t. 0 or -ENOMEM. */
int plabel_names_thread_rename(struct plabel_names *nm, uint32_t tid,
			       uint64_t t, const char *comm, size_t len);

/* The id of thread tid's name at time t; 0: not known. */
uint32_t plabel_names_thread_at(struct plabel_names *nm, uint32_t tid,
				uint64_t t);

#endif /* PLABEL_TOOLS_NAMES_H */
