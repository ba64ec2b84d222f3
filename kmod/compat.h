/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernel versions plabel builds for (Debian's 6.1
 * and 6.12). Every version test of the module lives here.
 */
#ifndef PLABEL_COMPAT_H
#define PLABEL_COMPAT_H

#include <linux/version.h>
#include <linux/sysctl.h>

/*
 * Sysctl handlers take a const table from 6.11 on. Since 6.11 the table
 * size comes from ARRAY_SIZE() inside register_sysctl() and an empty
 * sentinel entry is an error; before 6.6 the sentinel ends the table.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
#define PLABEL_CTL_TABLE_CONST	const
#define PLABEL_SYSCTL_SENTINEL
#else
#define PLABEL_CTL_TABLE_CONST
#define PLABEL_SYSCTL_SENTINEL	{ }
#endif

/*
 * Tasks that share a user mm but never run in user mode: io_uring workers,
 * and from 6.4 on vhost and other user workers (PF_USER_WORKER).
 */
#include <linux/sched.h>
#ifdef PF_USER_WORKER
#define PLABEL_PF_NO_USER	(PF_KTHREAD | PF_IO_WORKER | PF_USER_WORKER)
#else
#define PLABEL_PF_NO_USER	(PF_KTHREAD | PF_IO_WORKER)
#endif

#endif /* PLABEL_COMPAT_H */
