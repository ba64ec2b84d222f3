/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Interfaces between the parts of plabel.ko:
 *
 *   main.c     misc device, ioctl dispatch, sysctls, debugfs, init/exit
 *   labels.c   interned label sets (id -> set, per-user quotas)
 *   task.c     per-task entries, the slot, clone/exec/exit tracepoints
 *   session.c  profiling sessions, read()/poll(), per-CPU rings
 *   sample.c   perf cpu-clock counters, the overflow handler, call chains
 *   heap.c     the heap page (mmap) and the HEAP_ALLOC/HEAP_FREE ioctls
 *   threads.c  PLABEL_IOC_THREADS_GET: every thread's labels, state, stacks
 *
 * Context rules: functions marked "any context" may run in hard interrupt
 * context (the perf overflow handler) and must not sleep, lock or allocate;
 * the others run in process context and may sleep.
 */
#ifndef PLABEL_INTERNAL_H
#define PLABEL_INTERNAL_H

#include <linux/types.h>
#include <linux/fs.h>
#include <linux/poll.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/xarray.h>
#include <linux/uidgid.h>

#include "compat.h"
#include "plabel_uapi.h"

struct task_struct;
struct cred;
struct pid;
struct pt_regs;
struct dentry;
struct plabel_session;
struct vm_area_struct;

/* Tunables (sysctls in main.c). Read with READ_ONCE(). */
extern unsigned int plabel_max_labels;
extern unsigned int plabel_max_key_len;
extern unsigned int plabel_max_value_len;
extern unsigned int plabel_max_sets_per_user;
extern unsigned int plabel_max_bytes_per_user;
extern unsigned int plabel_sample_hz;
extern unsigned int plabel_max_stack;
extern unsigned int plabel_stack_size;
extern unsigned int plabel_ring_kb;
extern unsigned int plabel_max_refs_per_file;
extern unsigned int plabel_max_tasks_per_user;
extern unsigned int plabel_max_sessions;
extern unsigned int plabel_offcpu_min_us;
extern unsigned int plabel_offcpu_linger_ms;

/* debugfs directory (main.c), NULL when debugfs is absent. */
extern struct dentry *plabel_debugfs_dir;

/*
 * Quota record of one user (see labels.c): sets and bytes under the intern
 * lock, tasks atomic (the clone probe charges it).
 */
struct plabel_user {
	struct hlist_node node;
	kuid_t uid;
	u32 sets;
	u64 bytes;
	atomic_t tasks;		/* task entries (task.c) */
};

/* One interned label set. Immutable after creation but for refs. */
struct plabel_set {
	u64 id;
	kuid_t owner;		/* creator's euid, checked at sample time */
	refcount_t refs;
	struct plabel_user *user;	/* quota charged */
	struct pid *creator;	/* thread group that interned it */
	const struct cred *cred;	/* its credentials then */
	bool dumpable;		/* it was dumpable then */
	u32 count;		/* labels */
	u32 bytes;		/* kernel memory it takes, for the quota */
	/*
	 * sample.c: gen[i] is the generation of the session in slot i that
	 * wrote the set's LABELSET record (WRITE_ONCE(), any context), 0
	 * for none. Each session in a slot has a generation of its own
	 * (session.c), so what an earlier one wrote does not count for it;
	 * when a slot's count starts over, plabel_sets_forget_slot() clears
	 * its entry in every set first.
	 */
	u16 gen[PLABEL_MAX_SESSIONS];
	struct rcu_head rcu;
	/* labels.c private fields */
	struct hlist_node hnode;	/* dedup table, under the intern lock */
	struct llist_node dead;		/* waiting for removal from tables */
	u32 hash;
	struct plabel_label_k {
		const char *key;	/* NUL-terminated, inside the set */
		const char *value;
		u32 key_len;
		u32 value_len;
	} labels[];		/* sorted by key */
};

/* Per open file of /dev/plabel. */
struct plabel_file {
	struct xarray refs;		/* set id index -> set, one ref each */
	u32 nrefs;			/* entries in refs, under lock */
	struct mutex lock;		/* serializes refs updates, session */
	struct plabel_session *session;	/* session.c, NULL when none */
};

/* main.c: a sized ioctl argument in (see main.c), process context */
int plabel_args_in(void *karg, size_t ksize, void __user *uarg, u32 *usize);
int plabel_args_in_min(void *karg, size_t ksize, size_t min,
		       void __user *uarg, u32 *usize);

/* labels.c */
int plabel_labels_init(void);
void plabel_labels_exit(void);
/* Process context. */
int plabel_set_new(struct plabel_file *pf, struct plabel_set_new_args *args);
int plabel_set_put_id(struct plabel_file *pf, u64 id);
void plabel_file_release_sets(struct plabel_file *pf);
/* Any context, under rcu_read_lock(): a live set with that id, else NULL. */
struct plabel_set *plabel_set_lookup_rcu(u64 id);
/* Process context: a live set with that id and a reference, else NULL. */
struct plabel_set *plabel_set_get_id(u64 id);
void plabel_set_get(struct plabel_set *set);
/*
 * Process context: whether current may name @set or read its labels, as
 * ptrace read access to the process that interned it.
 */
bool plabel_set_may_access(const struct plabel_set *set);
/*
 * Process context: whether current may read task t, as ptrace's read
 * access with the caller's fs credentials (see labels.c).
 */
bool plabel_may_read_task(struct task_struct *t);
/* Process context: current's quota record, created when missing. */
struct plabel_user *plabel_user_current(void);
/* Any context: one task entry more (false: over quota) or less; NULL ok. */
bool plabel_user_charge_task(struct plabel_user *u);
void plabel_user_uncharge_task(struct plabel_user *u);
/*
 * Any context but NMI: drops a reference; the last one removes the set
 * from the tables through a work item and frees it after an RCU grace
 * period.
 */
void plabel_set_put(struct plabel_set *set);
long plabel_live_sets(void);
/*
 * Process context, with no session in slot: no set has been carried by a
 * session in that slot (a walk over every set, under the intern lock).
 */
void plabel_sets_forget_slot(unsigned int slot);

/* task.c */
int plabel_task_init(void);
void plabel_task_exit(void);
int plabel_ioctl_labels_set(struct plabel_labels_set_args *args);
int plabel_ioctl_labels_get(struct plabel_labels_get_args *args);
int plabel_ioctl_slot_set(struct plabel_slot_args *args);
/*
 * Any context, under rcu_read_lock(): the labels current would carry now
 * (valid slot id, else kernel-stored set), or NULL, and in *stack_top where
 * current's user stack ends, or 0 when not known. In interrupt context the
 * slot is read with copy_from_user_nofault().
 */
struct plabel_set *plabel_current_set_rcu(unsigned long *stack_top);
long plabel_live_tasks(void);
/* Process context: task t's labels now, referenced (see task.c). */
struct plabel_set *plabel_task_labels_get(struct task_struct *t,
					  struct mm_struct *mm,
					  unsigned long *stack_top);

/*
 * session.c, called by task.c's tracepoint probes and by main.c.
 * on_clone and on_exec run in the creator's / the exec'ing task's context
 * (current), but inside a tracepoint probe: preemption is disabled, so they
 * must not sleep (no GFP_KERNEL, no faulting user access; use
 * copy_from_user_nofault()). The others run in process context.
 * Each runs for every live session that follows the process. on_clone
 * returns whether any of them samples the child.
 */
int plabel_session_init(void);
void plabel_session_exit(void);
bool plabel_session_on_clone(struct task_struct *child, u64 clone_flags,
			     struct plabel_set *set, unsigned long stack_top);
void plabel_session_on_exec(void);
void plabel_session_on_exit(void);
void plabel_session_on_comm(struct task_struct *task, const char *comm);
long plabel_session_ioctl(struct plabel_file *pf, struct file *file,
			  unsigned int cmd, unsigned long arg);
ssize_t plabel_session_read(struct plabel_file *pf, struct file *file,
			    char __user *buf, size_t len);
__poll_t plabel_session_poll(struct plabel_file *pf, struct file *file,
			     poll_table *wait);
void plabel_session_release(struct plabel_file *pf);

/* heap.c */
int plabel_heap_init(void);
void plabel_heap_exit(void);
int plabel_heap_mmap(struct file *file, struct vm_area_struct *vma);
/* Process context, the arguments copied in. */
long plabel_heap_ioctl(unsigned int cmd, struct plabel_heap_args *a);
/* Under plabel_session_mutex. */
void plabel_heap_set_interval(u64 interval);

/*
 * session.c, process context: ALLOC records for current to each heap
 * session following it (returns how many got one), FREE records.
 */
int plabel_session_on_alloc(const struct plabel_heap_args *a);
void plabel_session_on_free(u64 addr);
/* offcpu.c: what task t waits for (enum plabel_wait_kind), process context */
u32 plabel_task_wait_kind(struct task_struct *t);

/* threads.c */
int plabel_ioctl_threads_get(struct plabel_threads_get_args *args);

#endif /* PLABEL_INTERNAL_H */
