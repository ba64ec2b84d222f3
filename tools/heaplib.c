// SPDX-License-Identifier: GPL-2.0
/*
 * Finding and preloading libplabel-heap.so. See heaplib.h.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plabel_uapi.h"
#include "heaplib.h"

#ifndef PLABEL_LIBDIR
#define PLABEL_LIBDIR	"/usr/local/lib"
#endif
#define PLABEL_HEAP_SO	"libplabel-heap.so"

int plabel_heap_parse(const char *arg, uint64_t *bytes)
{
	unsigned long long v;
	char *end;

	if (!arg) {
		*bytes = PLABEL_HEAP_BYTES_DEFAULT;
		return 0;
	}
	if (*arg < '0' || *arg > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end == 'K' || *end == 'k') {
		v = v > (1ULL << 53) ? 0 : v << 10;
		end++;
	} else if (*end == 'M' || *end == 'm') {
		v = v > (1ULL << 43) ? 0 : v << 20;
		end++;
	} else if (*end == 'G' || *end == 'g') {
		v = v > (1ULL << 33) ? 0 : v << 30;
		end++;
	}
	if (*end || !v || v > PLABEL_HEAP_BYTES_MAX)
		return -EINVAL;
	*bytes = v;
	return 0;
}

/* dir of /proc/self/exe, then ../lib/plabel/ */
static int heap_beside_exe(char *buf, size_t cap)
{
	char exe[PATH_MAX], lib[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0)
		return -ENOENT;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	if (snprintf(lib, sizeof(lib), "%s/../lib/plabel/" PLABEL_HEAP_SO,
		     exe) >= (int)sizeof(lib) || cap < PATH_MAX)
		return -ENAMETOOLONG;
	return realpath(lib, buf) && !access(buf, R_OK) ? 0 : -ENOENT;
}

int plabel_heap_preload(const char **path)
{
	static char found[PATH_MAX];
	const char *lib = getenv("PLABEL_HEAP_LIB"), *old, *p;
	char *val;
	size_t n;

	if (lib && *lib) {
		snprintf(found, sizeof(found), "%s", lib);
	} else if (heap_beside_exe(found, sizeof(found))) {
		snprintf(found, sizeof(found), "%s/plabel/" PLABEL_HEAP_SO,
			 PLABEL_LIBDIR);
	}
	if (path)
		*path = found;
	/* LD_PRELOAD splits at spaces and colons */
	if (found[0] != '/' || strpbrk(found, " :\t"))
		return -EINVAL;
	if (access(found, R_OK))
		return -ENOENT;
	old = getenv("LD_PRELOAD");
	if (old && *old) {
		n = strlen(found);
		p = strstr(old, found);

		/* there already (an outer plabel run --heap) */
		if (p && (p == old || strchr(" :", p[-1])) &&
		    (!p[n] || strchr(" :", p[n])))
			return 0;
		if (asprintf(&val, "%s:%s", old, found) < 0)
			return -ENOMEM;
	} else {
		val = strdup(found);
		if (!val)
			return -ENOMEM;
	}
	n = setenv("LD_PRELOAD", val, 1) ? (size_t)-1 : 0;
	free(val);
	return n ? -ENOMEM : 0;
}
