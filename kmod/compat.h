/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernel versions plabel builds for: Debian's 5.10
 * (bullseye), 6.1 (bookworm), 6.12 (bookworm-backports) and the newest of
 * unstable (7.2). Every version test of the module lives here; the .c
 * files call the plabel_ helpers below instead of the kernel's own where
 * the kernel's changed.
 *
 * 5.10 is the oldest kernel it is built and tested on; it cannot go below
 * 5.8 (copy_from_user_nofault(), which the sampler needs, came then).
 */
#ifndef PLABEL_COMPAT_H
#define PLABEL_COMPAT_H

#include <linux/version.h>
#include <linux/binfmts.h>
#include <linux/build_bug.h>
#include <linux/hrtimer.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/sysctl.h>
#include <linux/uaccess.h>
#include <asm/unistd.h>
#include <trace/events/sched.h>
#include <trace/events/task.h>

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
 * Walking a process's mappings: the maple tree and its VMA iterator came
 * in 6.1; before, the mappings are a list from mm->mmap. Both under the
 * mmap lock.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 1, 0)
#define PLABEL_VMA_ITERATOR(name, mm)	VMA_ITERATOR(name, mm, 0)
#define plabel_for_each_vma(it, vma)	for_each_vma(it, vma)
#else
struct plabel_vma_iter {
	struct mm_struct *mm;
};

#define PLABEL_VMA_ITERATOR(name, mm_)	\
	struct plabel_vma_iter name = { .mm = (mm_) }
#define plabel_for_each_vma(it, vma)	\
	for ((vma) = (it).mm->mmap; (vma); (vma) = (vma)->vm_next)
#endif

/*
 * A user address range check that is safe in interrupt context: x86's
 * access_ok() warns there before 5.18 (WARN_ON_IN_IRQ), and __access_ok(),
 * the check without the warning, came with 5.18's generic access_ok().
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(5, 18, 0)
#define plabel_access_ok(addr, size)	__access_ok(addr, size)
#else
#define plabel_access_ok(addr, size)	\
	likely(!__range_not_ok(addr, size, TASK_SIZE_MAX))
#endif

/*
 * When an hrtimer expires, in ns of its clock. hrtimer_get_expires_ns() is
 * gone in 7.x; hrtimer_get_expires() is there on every version.
 */
static inline u64 plabel_hrtimer_expires_ns(const struct hrtimer *timer)
{
	return ktime_to_ns(hrtimer_get_expires(timer));
}

/*
 * Tracepoint probes. The probes are registered through a void pointer
 * (tracepoint_probe_register() on a tracepoint found by name), so nothing
 * checks their prototypes but this: PLABEL_PROBE() fails the build when a
 * probe does not have its tracepoint's type, through the
 * check_trace_callback_type_<name>() the kernel's tracepoint headers
 * define. A mismatch would pass wrong arguments at run time, and on a
 * kernel with kCFI the call is a panic.
 *
 * sched_process_exit gained the group_dead flag in 6.16; task_newtask's
 * clone flags are a u64 from 6.18 on (an unsigned long before: the same
 * size here, but another type for the check and for kCFI).
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 16, 0)
#define PLABEL_PROBE_EXIT_ARGS	\
	void *data, struct task_struct *p, bool group_dead
#else
#define PLABEL_PROBE_EXIT_ARGS	void *data, struct task_struct *p
#endif

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 18, 0)
#define PLABEL_PROBE_NEWTASK_ARGS	\
	void *data, struct task_struct *child, u64 clone_flags
#else
#define PLABEL_PROBE_NEWTASK_ARGS	\
	void *data, struct task_struct *child, unsigned long clone_flags
#endif

/*
 * From 6.16 on sched_process_exit also fires earlier in do_exit(): before
 * exit_mm() (it came after). Once the exit probe has dropped a thread's
 * entry the thread may still run with its mm, and a sample there would
 * take a user stack without its labels or the stack's end (the snapshot
 * would run on to the FS base). PLABEL_PF_NO_USER are the task flags
 * under which a sample takes no user state: kernel threads; io_uring
 * workers and, from 6.4 on, vhost and other user workers
 * (PF_USER_WORKER), which share a user mm but never run in user mode; and
 * from 6.16 on an exiting task, as before 6.16 from exit_mm() on.
 */
#ifdef PF_USER_WORKER
#define PLABEL_PF_USER_WORKER	PF_USER_WORKER
#else
#define PLABEL_PF_USER_WORKER	0
#endif
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 16, 0)
#define PLABEL_PF_EXITING	PF_EXITING
#else
#define PLABEL_PF_EXITING	0
#endif
#define PLABEL_PF_NO_USER	(PF_KTHREAD | PF_IO_WORKER | \
				 PLABEL_PF_USER_WORKER | PLABEL_PF_EXITING)

/*
 * sched_switch gained the state prev leaves in (prev_state) in 5.18;
 * before, it is prev's state field itself, named __state from 5.14 on
 * (state before). PLABEL_SWITCH_STATE() is that state inside a probe
 * declared with PLABEL_PROBE_SWITCH_ARGS.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(5, 18, 0)
#define PLABEL_PROBE_SWITCH_ARGS					\
	void *data, bool preempt, struct task_struct *prev,		\
	struct task_struct *next, unsigned int prev_state
#define PLABEL_SWITCH_STATE(prev)	(prev_state)
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(5, 14, 0)
#define PLABEL_PROBE_SWITCH_ARGS					\
	void *data, bool preempt, struct task_struct *prev,		\
	struct task_struct *next
#define PLABEL_SWITCH_STATE(prev)	READ_ONCE((prev)->__state)
#else
#define PLABEL_PROBE_SWITCH_ARGS					\
	void *data, bool preempt, struct task_struct *prev,		\
	struct task_struct *next
#define PLABEL_SWITCH_STATE(prev)	\
	((unsigned int)READ_ONCE((prev)->state))
#endif

/*
 * System calls that came after 5.10, for the off-CPU wait kinds:
 * epoll_pwait2 (5.11), futex_waitv (5.16). -1 where there is none.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(5, 11, 0)
#define PLABEL_NR_EPOLL_PWAIT2	__NR_epoll_pwait2
#else
#define PLABEL_NR_EPOLL_PWAIT2	(-1)
#endif
#if LINUX_VERSION_CODE >= KERNEL_VERSION(5, 16, 0)
#define PLABEL_NR_FUTEX_WAITV	__NR_futex_waitv
#else
#define PLABEL_NR_FUTEX_WAITV	(-1)
#endif

#define PLABEL_PROBE_CHECK(tp, fn)	\
	BUILD_BUG_ON_ZERO(!sizeof((check_trace_callback_type_##tp(fn), 0)))

/* An entry of a table of probes: { .name, .func }, type checked. */
#define PLABEL_PROBE(tp, fn)	{				\
	.name = #tp,						\
	.func = (void *)(fn) + PLABEL_PROBE_CHECK(tp, fn),	\
}

/*
 * A task's dumpability, the gate of ptrace and core dumps: in its mm's
 * flags (get_dumpable()) until the kernel moved it to the task's exec
 * state (linux/sched/exec_state.h, 7.x), with the same values. Tested by
 * the header's presence, as the version it came with is not one Debian
 * ships. plabel_task_dumpable(): PLABEL_DUMP_USER when ptrace by a uid
 * match is allowed, another value when not, -1 when not known (a task
 * without an mm, before 7.x). Process context, under rcu_read_lock().
 */
#if __has_include(<linux/sched/exec_state.h>)
#include <linux/sched/exec_state.h>
#define PLABEL_DUMP_USER	TASK_DUMPABLE_OWNER

static inline int plabel_task_dumpable(struct task_struct *t)
{
	struct task_exec_state *es = rcu_dereference(t->exec_state);

	return es ? (int)READ_ONCE(es->dumpable) : -1;
}
#else
#include <linux/sched/coredump.h>
#define PLABEL_DUMP_USER	SUID_DUMP_USER

static inline int plabel_task_dumpable(struct task_struct *t)
{
	int d = -1;

	task_lock(t);
	if (t->mm)
		d = get_dumpable(t->mm);
	task_unlock(t);
	return d;
}
#endif

/*
 * A mapping's flags are changed through vm_flags_mod() from 6.3 on (the
 * field became read-only for everyone else); before, directly. Under the
 * mmap lock, in an mmap handler.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
static inline void plabel_vm_flags_mod(struct vm_area_struct *vma,
				       unsigned long set, unsigned long clear)
{
	vm_flags_mod(vma, set, clear);
}
#else
static inline void plabel_vm_flags_mod(struct vm_area_struct *vma,
				       unsigned long set, unsigned long clear)
{
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
}
#endif

/*
 * Another task's saved user registers (the pt_regs at the top of its
 * kernel stack), copied into *regs; false when its stack is gone. The
 * caller holds a reference to t, which keeps the task_struct, not its
 * stack: a task's stack goes when it has exited and switched out for the
 * last time (put_task_stack(), not exported, so no reference can be
 * taken here). A stack whose count is not 0 inside this RCU section is
 * not freed before its end: from 5.18 on, an exited task's stack is
 * freed after an RCU grace period (thread_stack_delayed_free()) or kept
 * in a per-CPU cache for the next task (memory that stays mapped);
 * before, vfree_atomic() may unmap it at any time, which the non-faulting
 * copy turns into a failed copy. Either way what is copied is only data:
 * register values that may be stale, never dereferenced.
 */
static inline bool plabel_task_user_regs(struct task_struct *t,
					 struct pt_regs *regs)
{
	bool ok = false;

	rcu_read_lock();
	if (refcount_read(&t->stack_refcount) && READ_ONCE(t->stack))
		ok = !copy_from_kernel_nofault(regs, task_pt_regs(t),
					       sizeof(*regs));
	rcu_read_unlock();
	return ok;
}

/*
 * A sleeping task's kernel call chain: stack_trace_save_tsk(), which
 * holds the task's stack while it walks it, is exported to modules on
 * 6.12 and 7.2, not on 5.10 and 6.1 (the release in between that began
 * to is not one built here). Without it there are no kernel chains of
 * other threads (PLABEL_THREADS_KERNEL is -EOPNOTSUPP).
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0)
#include <linux/stacktrace.h>
#define PLABEL_HAVE_TASK_KSTACK	1

static inline unsigned int plabel_task_kstack(struct task_struct *t,
					      unsigned long *store,
					      unsigned int size)
{
	return stack_trace_save_tsk(t, store, size, 0);
}
#else
#define PLABEL_HAVE_TASK_KSTACK	0

static inline unsigned int plabel_task_kstack(struct task_struct *t,
					      unsigned long *store,
					      unsigned int size)
{
	return 0;
}
#endif

/* Whether t is on a CPU now (the scheduler's p->on_cpu; SMP kernels). */
static inline bool plabel_task_on_cpu(struct task_struct *t)
{
#ifdef CONFIG_SMP
	return READ_ONCE(t->on_cpu);
#else
	return false;
#endif
}

/*
 * A grace period soon: from 6.2 on, call_rcu() may wait some 10 s to batch
 * lazy callbacks (CONFIG_RCU_LAZY, on offloaded CPUs), and call_rcu_hurry()
 * does not; before, call_rcu() never waited so.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
#define plabel_call_rcu_hurry(head, func)	call_rcu_hurry(head, func)
#else
#define plabel_call_rcu_hurry(head, func)	call_rcu(head, func)
#endif

#endif /* PLABEL_COMPAT_H */
