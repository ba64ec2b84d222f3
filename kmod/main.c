// SPDX-License-Identifier: GPL-2.0
/*
 * plabel: labeled profiling for native programs.
 *
 * The misc device /dev/plabel, ioctl dispatch, sysctls under kernel.plabel,
 * debugfs counters, and module init/exit. mmap maps the heap page (heap.c).
 *
 * Lock order (see labels.c, task.c, session.h): pf->lock, then the intern
 * lock; the session mutex, then the intern lock. What may run in interrupt
 * context: plabel_set_lookup_rcu(), plabel_set_put() and
 * plabel_current_set_rcu(); everything in this file runs in process
 * context.
 */
#include <linux/compat.h>
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sysctl.h>
#include <linux/uaccess.h>

#include "compat.h"
#include "internal.h"

unsigned int plabel_max_labels = 16;
unsigned int plabel_max_key_len = 64;
unsigned int plabel_max_value_len = 256;
unsigned int plabel_max_sets_per_user = 65536;
unsigned int plabel_max_bytes_per_user = 16U << 20;
unsigned int plabel_sample_hz = 99;
unsigned int plabel_max_stack = 127;
unsigned int plabel_stack_size = 8192;
unsigned int plabel_ring_kb = 512;
unsigned int plabel_max_refs_per_file = 4096;
unsigned int plabel_max_tasks_per_user = 65536;
unsigned int plabel_max_sessions = 4;
unsigned int plabel_offcpu_min_us;
unsigned int plabel_offcpu_linger_ms = 5000;

struct dentry *plabel_debugfs_dir;

static unsigned int plabel_zero;
static unsigned int plabel_one = 1;
static unsigned int plabel_labels_max = PLABEL_MAX_LABELS;
static unsigned int plabel_key_max = PLABEL_MAX_KEY_LEN;
static unsigned int plabel_value_max = PLABEL_MAX_VALUE_LEN;
static unsigned int plabel_sets_max = 1U << 20;
static unsigned int plabel_bytes_min = 4096;
static unsigned int plabel_bytes_max = 256U << 20;
static unsigned int plabel_hz_max = PLABEL_MAX_SAMPLE_HZ;
static unsigned int plabel_stack_max = 1024;
static unsigned int plabel_snapshot_max = 65528;
static unsigned int plabel_ring_min = 16;
static unsigned int plabel_ring_max = 65536;
static unsigned int plabel_refs_max = 1U << 20;
static unsigned int plabel_tasks_max = 1U << 22;
static unsigned int plabel_sessions_max = PLABEL_MAX_SESSIONS;
static unsigned int plabel_offcpu_min_max = PLABEL_MAX_OFFCPU_MIN_US;
static unsigned int plabel_linger_max = 3600000;

/* stack_size: like proc_douintvec_minmax, and a multiple of 8. */
static int
plabel_stack_size_handler(PLABEL_CTL_TABLE_CONST struct ctl_table *table,
			  int write, void *buffer, size_t *lenp, loff_t *ppos)
{
	struct ctl_table tmp = *table;
	unsigned int val = READ_ONCE(plabel_stack_size);
	int ret;

	tmp.data = &val;
	ret = proc_douintvec_minmax(&tmp, write, buffer, lenp, ppos);
	if (ret || !write)
		return ret;
	if (val % 8)
		return -EINVAL;
	WRITE_ONCE(plabel_stack_size, val);
	return 0;
}

#define PLABEL_UINT_SYSCTL(_name, _var, _min, _max, _handler)		\
	{								\
		.procname	= _name,				\
		.data		= &(_var),				\
		.maxlen		= sizeof(unsigned int),			\
		.mode		= 0644,					\
		.proc_handler	= _handler,				\
		.extra1		= &(_min),				\
		.extra2		= &(_max),				\
	}

static struct ctl_table plabel_sysctls[] = {
	PLABEL_UINT_SYSCTL("max_labels", plabel_max_labels, plabel_one,
			   plabel_labels_max, proc_douintvec_minmax),
	PLABEL_UINT_SYSCTL("max_key_len", plabel_max_key_len, plabel_one,
			   plabel_key_max, proc_douintvec_minmax),
	PLABEL_UINT_SYSCTL("max_value_len", plabel_max_value_len, plabel_zero,
			   plabel_value_max, proc_douintvec_minmax),
	PLABEL_UINT_SYSCTL("max_sets_per_user", plabel_max_sets_per_user,
			   plabel_one, plabel_sets_max, proc_douintvec_minmax),
	PLABEL_UINT_SYSCTL("max_bytes_per_user", plabel_max_bytes_per_user,
			   plabel_bytes_min, plabel_bytes_max,
			   proc_douintvec_minmax),
	PLABEL_UINT_SYSCTL("sample_hz", plabel_sample_hz, plabel_one,
			   plabel_hz_max, proc_douintvec_minmax),
	PLABEL_UINT_SYSCTL("max_stack", plabel_max_stack, plabel_one,
			   plabel_stack_max, proc_douintvec_minmax),
	PLABEL_UINT_SYSCTL("stack_size", plabel_stack_size, plabel_zero,
			   plabel_snapshot_max, plabel_stack_size_handler),
	PLABEL_UINT_SYSCTL("ring_kb", plabel_ring_kb, plabel_ring_min,
			   plabel_ring_max, proc_douintvec_minmax),
	PLABEL_UINT_SYSCTL("max_refs_per_file", plabel_max_refs_per_file,
			   plabel_one, plabel_refs_max, proc_douintvec_minmax),
	PLABEL_UINT_SYSCTL("max_tasks_per_user", plabel_max_tasks_per_user,
			   plabel_one, plabel_tasks_max, proc_douintvec_minmax),
	PLABEL_UINT_SYSCTL("max_sessions", plabel_max_sessions, plabel_one,
			   plabel_sessions_max, proc_douintvec_minmax),
	PLABEL_UINT_SYSCTL("offcpu_min_us", plabel_offcpu_min_us, plabel_zero,
			   plabel_offcpu_min_max, proc_douintvec_minmax),
	PLABEL_UINT_SYSCTL("offcpu_linger_ms", plabel_offcpu_linger_ms,
			   plabel_zero, plabel_linger_max,
			   proc_douintvec_minmax),
	PLABEL_SYSCTL_SENTINEL
};

static struct ctl_table_header *plabel_sysctl_header;

static int plabel_open(struct inode *inode, struct file *file)
{
	struct plabel_file *pf;

	pf = kzalloc(sizeof(*pf), GFP_KERNEL_ACCOUNT);
	if (!pf)
		return -ENOMEM;
	xa_init_flags(&pf->refs, XA_FLAGS_ACCOUNT);
	mutex_init(&pf->lock);
	file->private_data = pf;
	return nonseekable_open(inode, file);
}

static int plabel_release(struct inode *inode, struct file *file)
{
	struct plabel_file *pf = file->private_data;

	plabel_session_release(pf);
	plabel_file_release_sets(pf);
	mutex_destroy(&pf->lock);
	kfree(pf);
	return 0;
}

/*
 * Copies an ioctl argument in: the leading __u32 size says how much the
 * caller passed; shorter than the first version is -EINVAL, longer is fine
 * when the extra bytes are zero (copy_struct_from_user()), up to a page:
 * more is -E2BIG, as for openat2() and clone3(), so that no call scans
 * gigabytes for nonzero bytes.
 */
int plabel_args_in(void *karg, size_t ksize, void __user *uarg, u32 *usize)
{
	return plabel_args_in_min(karg, ksize, ksize, uarg, usize);
}

/* The same for an argument that grew: min is its first version's size. */
int plabel_args_in_min(void *karg, size_t ksize, size_t min,
		       void __user *uarg, u32 *usize)
{
	if (get_user(*usize, (u32 __user *)uarg))
		return -EFAULT;
	if (*usize < min)
		return -EINVAL;
	if (*usize > PAGE_SIZE)
		return -E2BIG;
	return copy_struct_from_user(karg, ksize, uarg, *usize);
}

static int plabel_args_out(void __user *uarg, const void *karg, size_t ksize)
{
	return copy_to_user(uarg, karg, ksize) ? -EFAULT : 0;
}

#define PLABEL_ARGS_IN(uarg, args)					\
	plabel_args_in(&(args), sizeof(args), (uarg), &usize)

/* The ioctl number without its size bits, so arguments may grow. */
#define PLABEL_IOC_BASE(cmd)	((cmd) & ~IOCSIZE_MASK)

static long plabel_ioctl(struct file *file, unsigned int cmd,
			 unsigned long arg)
{
	struct plabel_file *pf = file->private_data;
	void __user *uarg = (void __user *)arg;
	union {
		struct plabel_set_new_args set_new;
		struct plabel_set_put_args set_put;
		struct plabel_labels_set_args labels_set;
		struct plabel_labels_get_args labels_get;
		struct plabel_slot_args slot;
		struct plabel_heap_args heap;
		struct plabel_threads_get_args threads_get;
	} a;
	u32 usize;
	int err;

	if (_IOC_TYPE(cmd) != PLABEL_IOC_MAGIC)
		return -ENOTTY;
	switch (PLABEL_IOC_BASE(cmd)) {
	case PLABEL_IOC_BASE(PLABEL_IOC_SET_NEW):
		err = PLABEL_ARGS_IN(uarg, a.set_new);
		if (err)
			return err;
		if (a.set_new.flags || a.set_new.pad)
			return -EINVAL;
		err = plabel_set_new(pf, &a.set_new);
		if (err)
			return err;
		/* On -EFAULT the reference stays with the file until close. */
		return plabel_args_out(uarg, &a.set_new, sizeof(a.set_new));
	case PLABEL_IOC_BASE(PLABEL_IOC_SET_PUT):
		err = PLABEL_ARGS_IN(uarg, a.set_put);
		if (err)
			return err;
		if (a.set_put.flags)
			return -EINVAL;
		return plabel_set_put_id(pf, a.set_put.id);
	case PLABEL_IOC_BASE(PLABEL_IOC_LABELS_SET):
		err = PLABEL_ARGS_IN(uarg, a.labels_set);
		if (err)
			return err;
		if (a.labels_set.flags)
			return -EINVAL;
		return plabel_ioctl_labels_set(&a.labels_set);
	case PLABEL_IOC_BASE(PLABEL_IOC_LABELS_GET):
		err = PLABEL_ARGS_IN(uarg, a.labels_get);
		if (err)
			return err;
		if (a.labels_get.flags)
			return -EINVAL;
		err = plabel_ioctl_labels_get(&a.labels_get);
		if (err && err != -ERANGE)
			return err;
		return plabel_args_out(uarg, &a.labels_get,
				       sizeof(a.labels_get)) ?: err;
	case PLABEL_IOC_BASE(PLABEL_IOC_SLOT_SET):
		err = PLABEL_ARGS_IN(uarg, a.slot);
		if (err)
			return err;
		if (a.slot.flags)
			return -EINVAL;
		return plabel_ioctl_slot_set(&a.slot);
	case PLABEL_IOC_BASE(PLABEL_IOC_THREADS_GET):
		err = PLABEL_ARGS_IN(uarg, a.threads_get);
		if (err)
			return err;
		err = plabel_ioctl_threads_get(&a.threads_get);
		/* -ENOSPC: the whole records that fit are there */
		if (err && err != -ENOSPC)
			return err;
		return plabel_args_out(uarg, &a.threads_get,
				       sizeof(a.threads_get)) ?: err;
	case PLABEL_IOC_BASE(PLABEL_IOC_SESSION_START):
	case PLABEL_IOC_BASE(PLABEL_IOC_SESSION_STOP):
	case PLABEL_IOC_BASE(PLABEL_IOC_TLSCTX_SET):
		return plabel_session_ioctl(pf, file, cmd, arg);
	case PLABEL_IOC_BASE(PLABEL_IOC_HEAP_ALLOC):
	case PLABEL_IOC_BASE(PLABEL_IOC_HEAP_FREE):
		err = PLABEL_ARGS_IN(uarg, a.heap);
		if (err)
			return err;
		return plabel_heap_ioctl(PLABEL_IOC_BASE(cmd) ==
					 PLABEL_IOC_BASE(PLABEL_IOC_HEAP_FREE) ?
					 PLABEL_IOC_HEAP_FREE :
					 PLABEL_IOC_HEAP_ALLOC, &a.heap);
	}
	return -ENOTTY;
}

static ssize_t plabel_read(struct file *file, char __user *buf, size_t len,
			   loff_t *ppos)
{
	return plabel_session_read(file->private_data, file, buf, len);
}

static __poll_t plabel_poll(struct file *file, poll_table *wait)
{
	return plabel_session_poll(file->private_data, file, wait);
}

static int plabel_mmap(struct file *file, struct vm_area_struct *vma)
{
	return plabel_heap_mmap(file, vma);
}

static const struct file_operations plabel_fops = {
	.owner		= THIS_MODULE,
	.open		= plabel_open,
	.release	= plabel_release,
	.read		= plabel_read,
	.poll		= plabel_poll,
	.mmap		= plabel_mmap,
	.unlocked_ioctl	= plabel_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
};

static struct miscdevice plabel_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "plabel",
	.fops	= &plabel_fops,
	.mode	= 0666,
};

static int plabel_live_sets_get(void *data, u64 *val)
{
	*val = plabel_live_sets();
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(plabel_live_sets_fops, plabel_live_sets_get, NULL,
			 "%llu\n");

static int plabel_live_tasks_get(void *data, u64 *val)
{
	*val = plabel_live_tasks();
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(plabel_live_tasks_fops, plabel_live_tasks_get, NULL,
			 "%llu\n");

static void plabel_debugfs_init(void)
{
	struct dentry *dir = debugfs_create_dir("plabel", NULL);

	if (IS_ERR_OR_NULL(dir))
		return;
	plabel_debugfs_dir = dir;
	debugfs_create_file_unsafe("live_sets", 0444, dir, NULL,
				   &plabel_live_sets_fops);
	debugfs_create_file_unsafe("live_tasks", 0444, dir, NULL,
				   &plabel_live_tasks_fops);
}

static int __init plabel_init(void)
{
	int err;

	plabel_debugfs_init();
	err = plabel_heap_init();
	if (err)
		goto err_debugfs;
	err = plabel_labels_init();
	if (err)
		goto err_heap;
	err = plabel_session_init();
	if (err)
		goto err_labels;
	err = plabel_task_init();
	if (err)
		goto err_session;
	plabel_sysctl_header = register_sysctl("kernel/plabel", plabel_sysctls);
	if (!plabel_sysctl_header) {
		err = -ENOMEM;
		goto err_task;
	}
	err = misc_register(&plabel_misc);
	if (err)
		goto err_sysctl;
	return 0;

err_sysctl:
	unregister_sysctl_table(plabel_sysctl_header);
err_task:
	plabel_task_exit();
err_session:
	plabel_session_exit();
err_labels:
	plabel_labels_exit();
err_heap:
	plabel_heap_exit();
err_debugfs:
	debugfs_remove_recursive(plabel_debugfs_dir);
	return err;
}

static void __exit plabel_exit(void)
{
	misc_deregister(&plabel_misc);
	unregister_sysctl_table(plabel_sysctl_header);
	debugfs_remove_recursive(plabel_debugfs_dir);
	plabel_debugfs_dir = NULL;
	plabel_task_exit();
	plabel_session_exit();
	plabel_labels_exit();
	plabel_heap_exit();
}

module_init(plabel_init);
module_exit(plabel_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("plabel: labeled profiling for native programs");
