/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libplabel-heap.so for `plabel record --heap` and `plabel run --heap`:
 * where it is, the --heap argument, and LD_PRELOAD for CMD.
 */
#ifndef PLABEL_TOOLS_HEAPLIB_H
#define PLABEL_TOOLS_HEAPLIB_H

#include <stddef.h>
#include <stdint.h>

/*
 * BYTES of --heap=BYTES: a number with an optional K, M or G (binary
 * multiples), 1..PLABEL_HEAP_BYTES_MAX; NULL: the default. 0 or -EINVAL.
 */
int plabel_heap_parse(const char *arg, uint64_t *bytes);

/*
 * Add libplabel-heap.so to LD_PRELOAD of this process (for what it
 * execs): $PLABEL_HEAP_LIB, else lib/plabel/ next to plabel's bin/, else
 * the installed one. After what LD_PRELOAD had, once. 0, or -ENOENT (not
 * found), -EINVAL (a path LD_PRELOAD cannot hold), -ENOMEM; *path (may be
 * NULL) says which was tried.
 */
int plabel_heap_preload(const char **path);

#endif /* PLABEL_TOOLS_HEAPLIB_H */
