// SPDX-License-Identifier: GPL-2.0
/* Profiling sessions: placeholder until sampling lands. */
#include "internal.h"

int plabel_session_init(void)
{
	return 0;
}

void plabel_session_exit(void)
{
}

void plabel_session_on_clone(struct task_struct *child, u64 clone_flags,
			     struct plabel_set *set)
{
}

void plabel_session_on_exec(void)
{
}

long plabel_session_ioctl(struct plabel_file *pf, unsigned int cmd,
			  unsigned long arg)
{
	return -ENOTTY;
}

ssize_t plabel_session_read(struct plabel_file *pf, struct file *file,
			    char __user *buf, size_t len)
{
	return -EINVAL;
}

__poll_t plabel_session_poll(struct plabel_file *pf, struct file *file,
			     poll_table *wait)
{
	return EPOLLERR;
}

void plabel_session_release(struct plabel_file *pf)
{
}
