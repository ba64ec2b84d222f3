/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Finding the module file a test can load again after unloading plabel:
 * PLABEL_KMOD, else the checkout's build for the running kernel, as
 * scripts/plabel-vm loads it. Tests run from the checkout directory.
 */
#ifndef PLABEL_KMOD_UTIL_H
#define PLABEL_KMOD_UTIL_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

static inline const char *plabel_kmod_path(char *buf, size_t len)
{
	const char *env = getenv("PLABEL_KMOD");
	char rel[128];
	FILE *f;

	if (env && *env && strcmp(env, "none"))
		return env;
	f = fopen("/proc/sys/kernel/osrelease", "re");
	if (!f)
		return NULL;
	if (!fgets(rel, sizeof(rel), f)) {
		fclose(f);
		return NULL;
	}
	fclose(f);
	rel[strcspn(rel, "\n")] = '\0';
	snprintf(buf, len, "build/kmod/linux-headers-%s/plabel.ko", rel);
	return buf;
}

/*
 * 0 when the module file is the loaded module (its build-id note, as
 * /sys/module/plabel/notes shows it, is in the file), so that unloading it
 * can be undone by loading the file again; 1 when it is not; -1 when
 * that cannot be told.
 */
static inline int plabel_kmod_differs(int kfd)
{
	unsigned char note[256];
	struct stat st;
	char *buf;
	ssize_t n;
	int fd, differs = -1;

	fd = open("/sys/module/plabel/notes/.note.gnu.build-id",
		  O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, note, sizeof(note));
	close(fd);
	if (n < 16 || fstat(kfd, &st))
		return -1;
	buf = malloc(st.st_size);
	if (!buf)
		return -1;
	if (pread(kfd, buf, st.st_size, 0) == st.st_size)
		differs = !memmem(buf, st.st_size, note, n);
	free(buf);
	return differs;
}

#endif /* PLABEL_KMOD_UTIL_H */
