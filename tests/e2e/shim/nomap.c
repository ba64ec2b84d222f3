// SPDX-License-Identifier: GPL-2.0
/*
 * LD_PRELOAD shim for record_cli: anonymous mappings of NOMAP_MIN bytes
 * or more fail with ENOMEM once NOMAP_ALLOW of them have been made, so
 * plabel record runs out of memory for its read buffers on cue.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/types.h>

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	static void *(*real)(void *, size_t, int, int, int, off_t);
	static unsigned long made;
	const char *min = getenv("NOMAP_MIN"), *allow = getenv("NOMAP_ALLOW");

	if (!real)
		real = (void *(*)(void *, size_t, int, int, int, off_t))
			dlsym(RTLD_NEXT, "mmap");
	if (min && allow && (flags & MAP_ANONYMOUS) &&
	    len >= strtoul(min, NULL, 0) &&
	    __atomic_fetch_add(&made, 1, __ATOMIC_RELAXED) >=
	    strtoul(allow, NULL, 0)) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	return real(addr, len, prot, flags, fd, off);
}
