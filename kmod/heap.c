// SPDX-License-Identifier: GPL-2.0
/*
 * Heap profiling: the heap page and the HEAP_ALLOC / HEAP_FREE ioctls.
 *
 * The heap page is one zeroed page of the module whose first word is the
 * sampling interval in force (struct plabel_heap_page): the smallest
 * heap_bytes of the running heap sessions, 0 when none runs. Anyone may
 * map it from /dev/plabel, read-only: a preloaded allocator reads it on
 * every allocation instead of asking the kernel. It holds nothing else,
 * so mapping it shows an unprivileged user no more than whether a heap
 * session runs and at what rate. The session code (under its mutex)
 * writes the word; the page lives as long as the module, and a mapping
 * holds the file, which holds the module.
 *
 * The ioctls run in the caller's process context; the records are written
 * by session.c and sample.c for each session that follows the caller.
 */
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/sched.h>

#include "compat.h"
#include "internal.h"

static struct plabel_heap_page *plabel_heap_pg;

int plabel_heap_init(void)
{
	plabel_heap_pg = (struct plabel_heap_page *)get_zeroed_page(GFP_KERNEL);
	return plabel_heap_pg ? 0 : -ENOMEM;
}

void plabel_heap_exit(void)
{
	free_page((unsigned long)plabel_heap_pg);
	plabel_heap_pg = NULL;
}

/* Under plabel_session_mutex: the interval in force, 0 for none. */
void plabel_heap_set_interval(u64 interval)
{
	WRITE_ONCE(plabel_heap_pg->interval, interval);
}

/*
 * mmap of /dev/plabel: only the heap page, whole, at its offset, and
 * never writable or executable (now or by a later mprotect()).
 */
int plabel_heap_mmap(struct file *file, struct vm_area_struct *vma)
{
	if (vma->vm_pgoff != PLABEL_HEAP_PAGE_OFFSET >> PAGE_SHIFT ||
	    vma->vm_end - vma->vm_start != PAGE_SIZE)
		return -EINVAL;
	if (vma->vm_flags & (VM_WRITE | VM_EXEC))
		return -EPERM;
	plabel_vm_flags_mod(vma, VM_DONTEXPAND | VM_DONTDUMP,
			    VM_MAYWRITE | VM_MAYEXEC);
	return remap_pfn_range(vma, vma->vm_start,
			       page_to_pfn(virt_to_page(plabel_heap_pg)),
			       PAGE_SIZE, vma->vm_page_prot);
}

/* Process context: the arguments of HEAP_ALLOC or HEAP_FREE checked. */
long plabel_heap_ioctl(unsigned int cmd, struct plabel_heap_args *a)
{
	if (a->flags || !a->addr || a->addr >= TASK_SIZE_MAX)
		return -EINVAL;
	if (cmd == PLABEL_IOC_HEAP_FREE) {
		if (a->requested || a->usable || a->weight)
			return -EINVAL;
		plabel_session_on_free(a->addr);
		return 0;
	}
	if (!a->usable || a->requested > a->usable || !a->weight ||
	    a->weight > PLABEL_HEAP_BYTES_MAX)
		return -EINVAL;
	return plabel_session_on_alloc(a);
}
