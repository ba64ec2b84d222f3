// SPDX-License-Identifier: GPL-2.0
/*
 * Opening /dev/plabel with one clear message for each way it fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "plabel.h"
#include "plabel_uapi.h"

int plabel_open_device(void)
{
	int fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd >= 0)
		return fd;
	if (errno == ENOENT || errno == ENXIO || errno == ENODEV)
		fprintf(stderr, "plabel: %s not found: is the plabel module loaded?\n",
			PLABEL_DEVICE);
	else
		fprintf(stderr, "plabel: cannot open %s: %s\n",
			PLABEL_DEVICE, strerror(errno));
	return -1;
}
