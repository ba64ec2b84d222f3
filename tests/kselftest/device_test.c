// SPDX-License-Identifier: GPL-2.0
/*
 * The module is loaded and /dev/plabel behaves as a misc device should:
 * a character device any user may open, unknown commands answered with
 * ENOTTY. Unloading is checked by the VM runner's rmmod after the tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "plabel_uapi.h"
#include "kselftest/kselftest_harness.h"

#define PLABEL_DEV "/dev/plabel"

/* 1 when /proc/modules lists plabel, 0 when not, -errno when unreadable */
static int plabel_module_listed(void)
{
	char line[512];
	FILE *f;
	int found = 0;

	f = fopen("/proc/modules", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "plabel ", strlen("plabel "))) {
			found = 1;
			break;
		}
	}
	fclose(f);
	return found;
}

#define PLABEL_NEED_DEVICE() do { \
	if (access(PLABEL_DEV, F_OK)) \
		SKIP(return, PLABEL_DEV " absent: module not loaded"); \
} while (0)

TEST(module_listed)
{
	PLABEL_NEED_DEVICE();
	ASSERT_EQ(1, plabel_module_listed());
}

TEST(char_device_mode)
{
	struct stat st;

	PLABEL_NEED_DEVICE();
	ASSERT_EQ(0, stat(PLABEL_DEV, &st));
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT_EQ(0666U, st.st_mode & 07777);
	EXPECT_EQ(0U, st.st_uid);
}

TEST(open_close)
{
	int fd, fd2;

	PLABEL_NEED_DEVICE();
	fd = open(PLABEL_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd) TH_LOG("open: %s", strerror(errno));
	/* a second, independent open works while the first is held */
	fd2 = open(PLABEL_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2) TH_LOG("second open: %s", strerror(errno));
	EXPECT_EQ(0, close(fd2));
	EXPECT_EQ(0, close(fd));
	/* and again after both are closed */
	fd = open(PLABEL_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, close(fd));
}

TEST(unknown_ioctl_enotty)
{
	int fd, ret;

	PLABEL_NEED_DEVICE();
	fd = open(PLABEL_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);

	/* our magic, a number no command uses */
	errno = 0;
	ret = ioctl(fd, _IO(PLABEL_IOC_MAGIC, 0x7f), 0);
	EXPECT_EQ(-1, ret);
	EXPECT_EQ(ENOTTY, errno);

	/* same number but with a direction and size no command has */
	errno = 0;
	ret = ioctl(fd, _IOWR(PLABEL_IOC_MAGIC, 0x7f, __u64), 0);
	EXPECT_EQ(-1, ret);
	EXPECT_EQ(ENOTTY, errno);

	/* an existing command's number with another magic */
	errno = 0;
	ret = ioctl(fd, _IO(PLABEL_IOC_MAGIC ^ 0x01, 0x11), 0);
	EXPECT_EQ(-1, ret);
	EXPECT_EQ(ENOTTY, errno);

	/* a terminal ioctl: the file is no tty */
	errno = 0;
	ret = ioctl(fd, TCGETS, NULL);
	EXPECT_EQ(-1, ret);
	EXPECT_EQ(ENOTTY, errno);

	EXPECT_EQ(0, close(fd));
}

TEST_HARNESS_MAIN
