// SPDX-License-Identifier: GPL-2.0
/*
 * Per-task label state and the task lifetime hooks.
 *
 * A thread that has labels, a registered slot or a known stack top has an
 * entry in plabel_tasks, keyed by its task_struct pointer:
 *
 *   slot       user address of a __u64 holding a set id (0: none), in the
 *              address space slot_mm (compared, never followed: between
 *              exec_mmap() and the exec probe a slot address of the old
 *              image must not be read in the new one)
 *   set        the kernel-stored set (one reference), or NULL
 *   stack_top  where the thread's user stack ends (0: not known), kept for
 *              threads created while a session samples their process, so
 *              that a stack snapshot stops there (sample.c)
 *
 * Only the task itself changes or removes its entry (ioctls, exec and exit
 * probes, all running as current), except that the creator fills in a new
 * child's entry before the child first runs, and module exit frees all.
 * So an entry needs no lock: writers never race, and readers (the sampler in
 * hard interrupt context, via plabel_current_set_rcu()) see the fields with
 * READ_ONCE() and rcu_dereference() and the entry itself under RCU; removed
 * entries are freed after a grace period.
 *
 * Each entry made for a user's thread is charged to its quota record
 * (kernel.plabel.max_tasks_per_user) and memory cgroup; entries made only
 * for a session's stack top are not a user's doing and are not charged.
 *
 * The probes run from tracepoints with preemption disabled: they use
 * GFP_ATOMIC and non-faulting user reads. task_newtask fires at the end of
 * copy_process(), after its last failure point and before the child is
 * woken, so an entry made for the child is always removed by its exit.
 */
#include <linux/cred.h>
#include <linux/debugfs.h>
#include <linux/binfmts.h>
#include <linux/mm.h>
#include <linux/rhashtable.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>

#include "compat.h"
#include "internal.h"

struct plabel_task {
	struct rhash_head node;
	struct task_struct *task;
	u64 slot;
	const struct mm_struct *slot_mm;
	struct plabel_set __rcu *set;
	unsigned long stack_top;
	struct plabel_user *user;	/* quota charged, or NULL */
	struct rcu_head rcu;
};

static const struct rhashtable_params plabel_task_params = {
	.key_len = sizeof(struct task_struct *),
	.key_offset = offsetof(struct plabel_task, task),
	.head_offset = offsetof(struct plabel_task, node),
	.automatic_shrinking = true,
};

static struct rhashtable plabel_tasks;
static atomic_long_t plabel_nr_tasks = ATOMIC_LONG_INIT(0);
/* Children that could not inherit (no memory in the clone probe). */
static atomic_t plabel_inherit_failed = ATOMIC_INIT(0);

long plabel_live_tasks(void)
{
	return atomic_long_read(&plabel_nr_tasks);
}

/* Under rcu_read_lock(), or for current's own entry. */
static struct plabel_task *plabel_task_find(struct task_struct *t)
{
	return rhashtable_lookup(&plabel_tasks, &t, plabel_task_params);
}

static struct plabel_task *plabel_task_find_current(void)
{
	struct plabel_task *e;

	rcu_read_lock();
	e = plabel_task_find(current);
	rcu_read_unlock();
	return e;
}

static struct plabel_task *plabel_task_alloc(struct task_struct *t, u64 slot,
					     struct plabel_set *set,
					     unsigned long stack_top,
					     struct plabel_user *user,
					     gfp_t gfp)
{
	struct plabel_task *e;
	int err;

	if (!plabel_user_charge_task(user))
		return ERR_PTR(-EDQUOT);
	e = kzalloc(sizeof(*e), gfp | __GFP_ACCOUNT);
	if (!e) {
		plabel_user_uncharge_task(user);
		return ERR_PTR(-ENOMEM);
	}
	e->task = t;
	e->slot = slot;
	e->slot_mm = t->mm;
	e->stack_top = stack_top;
	e->user = user;
	if (set)
		plabel_set_get(set);
	RCU_INIT_POINTER(e->set, set);
	err = rhashtable_lookup_insert_fast(&plabel_tasks, &e->node,
					    plabel_task_params);
	if (err) {
		WARN_ON_ONCE(err == -EEXIST);
		plabel_set_put(set);
		plabel_user_uncharge_task(user);
		kfree(e);
		return ERR_PTR(err);
	}
	atomic_long_inc(&plabel_nr_tasks);
	return e;
}

static void plabel_task_remove(struct plabel_task *e)
{
	if (WARN_ON_ONCE(rhashtable_remove_fast(&plabel_tasks, &e->node,
						plabel_task_params)))
		return;
	/* Readers that still see the set hold off its free through RCU. */
	plabel_set_put(rcu_replace_pointer(e->set, NULL, true));
	plabel_user_uncharge_task(e->user);
	atomic_long_dec(&plabel_nr_tasks);
	kfree_rcu(e, rcu);
}

/* An entry with no labels, no slot and no stack top is of no use. */
static void plabel_task_maybe_drop(struct plabel_task *e)
{
	if (!READ_ONCE(e->slot) && !rcu_access_pointer(e->set) &&
	    !READ_ONCE(e->stack_top))
		plabel_task_remove(e);
}

/*
 * The set a slot value names, if current may use it: one interned with
 * current's effective uid. Any context, under RCU.
 */
static struct plabel_set *plabel_slot_set_rcu(u64 id)
{
	struct plabel_set *set = plabel_set_lookup_rcu(id);

	if (set && !uid_eq(set->owner, current_euid()))
		return NULL;
	return set;
}

/* current's slot address, if it is one of the address space it runs in. */
static u64 plabel_task_slot(const struct plabel_task *e)
{
	u64 slot = READ_ONCE(e->slot);

	if (!slot || !current->mm || READ_ONCE(e->slot_mm) != current->mm)
		return 0;
	return slot;
}

struct plabel_set *plabel_current_set_rcu(unsigned long *stack_top)
{
	struct plabel_task *e;
	u64 slot, id;

	*stack_top = 0;
	/*
	 * Kernel threads carry no labels, and one of them must not be looked
	 * up from interrupt context: the table's resize (rht_deferred_worker,
	 * a kworker) points a moved entry at its new chain before unlinking
	 * it from the old one, so a lookup interrupting that worker on its
	 * own CPU restarts forever (seen as an RCU stall and soft lockup).
	 */
	if (current->flags & PF_KTHREAD)
		return NULL;
	e = plabel_task_find(current);
	if (!e)
		return NULL;
	*stack_top = READ_ONCE(e->stack_top);
	slot = plabel_task_slot(e);
	if (slot &&
	    !copy_from_user_nofault(&id, u64_to_user_ptr(slot), sizeof(id)) &&
	    id) {
		struct plabel_set *set = plabel_slot_set_rcu(id);

		if (set)
			return set;
	}
	return rcu_dereference(e->set);
}

/* Under RCU: a reference to a set, NULL when it is dying. */
static struct plabel_set *plabel_try_get(struct plabel_set *set)
{
	if (set && !refcount_inc_not_zero(&set->refs))
		return NULL;
	return set;
}

/*
 * current's effective set with a reference. In process context the slot is
 * read with a faulting read (may_fault), in the probes without.
 */
static struct plabel_set *plabel_task_effective(struct plabel_task *e,
						bool may_fault)
{
	struct plabel_set *set = NULL;
	u64 slot = plabel_task_slot(e), id = 0;
	int err = -EFAULT;

	if (slot) {
		if (may_fault)
			err = get_user(id, (u64 __user *)u64_to_user_ptr(slot));
		else
			err = copy_from_user_nofault(&id, u64_to_user_ptr(slot),
						     sizeof(id));
	}
	rcu_read_lock();
	if (!err && id)
		set = plabel_try_get(plabel_slot_set_rcu(id));
	if (!set)
		set = plabel_try_get(rcu_dereference(e->set));
	rcu_read_unlock();
	return set;
}

/*
 * Makes sure current's entry, made without a user (for a stack top), is
 * charged before the user's own ioctl stores labels or a slot in it.
 */
static int plabel_task_charge(struct plabel_task *e)
{
	struct plabel_user *user;

	if (e->user)
		return 0;
	user = plabel_user_current();
	if (!user)
		return -ENOMEM;
	if (!plabel_user_charge_task(user))
		return -EDQUOT;
	e->user = user;
	return 0;
}

int plabel_ioctl_labels_set(struct plabel_labels_set_args *args)
{
	struct plabel_set *set = NULL;
	struct plabel_user *user;
	struct plabel_task *e;
	int err;

	if (args->id) {
		set = plabel_set_get_id(args->id);
		if (!set)
			return -ENOENT;
		if (!plabel_set_may_access(set)) {
			plabel_set_put(set);
			return -ENOENT;
		}
	}
	e = plabel_task_find_current();
	if (!e) {
		if (!set)
			return 0;
		user = plabel_user_current();
		e = user ? plabel_task_alloc(current, 0, set, 0, user,
					     GFP_KERNEL) : ERR_PTR(-ENOMEM);
		plabel_set_put(set);
		return PTR_ERR_OR_ZERO(e);
	}
	if (set) {
		err = plabel_task_charge(e);
		if (err) {
			plabel_set_put(set);
			return err;
		}
	}
	plabel_set_put(rcu_replace_pointer(e->set, set, true));
	plabel_task_maybe_drop(e);
	return 0;
}

int plabel_ioctl_slot_set(struct plabel_slot_args *args)
{
	u64 __user *uslot = u64_to_user_ptr(args->addr);
	struct plabel_user *user;
	struct plabel_task *e;
	int err;
	u64 v;

	if (args->addr & (sizeof(u64) - 1))
		return -EINVAL;
	if (args->addr && get_user(v, uslot))
		return -EFAULT;
	e = plabel_task_find_current();
	if (!e) {
		if (!args->addr)
			return 0;
		user = plabel_user_current();
		e = user ? plabel_task_alloc(current, args->addr, NULL, 0, user,
					     GFP_KERNEL) : ERR_PTR(-ENOMEM);
		return PTR_ERR_OR_ZERO(e);
	}
	if (args->addr) {
		err = plabel_task_charge(e);
		if (err)
			return err;
	}
	WRITE_ONCE(e->slot_mm, current->mm);
	WRITE_ONCE(e->slot, args->addr);
	plabel_task_maybe_drop(e);
	return 0;
}

int plabel_ioctl_labels_get(struct plabel_labels_get_args *args)
{
	struct plabel_label *out;
	struct plabel_set *set = NULL;
	struct plabel_task *e;
	size_t need;
	u32 have = args->buf_len;
	char *buf, *p;
	u32 i;
	int err = 0;

	e = plabel_task_find_current();
	if (e)
		set = plabel_task_effective(e, true);
	if (!set) {
		args->id = 0;
		args->count = 0;
		args->buf_len = 0;
		return 0;
	}
	/* labels current carries but may not read, like ptrace */
	if (!plabel_set_may_access(set)) {
		plabel_set_put(set);
		return -EACCES;
	}
	need = set->count * sizeof(*out);
	for (i = 0; i < set->count; i++)
		need += set->labels[i].key_len + set->labels[i].value_len + 2;
	args->id = set->id;
	args->count = set->count;
	args->buf_len = need;
	if (have < need) {
		err = -ERANGE;
		goto out_put;
	}
	buf = kvzalloc(need, GFP_KERNEL_ACCOUNT);
	if (!buf) {
		err = -ENOMEM;
		goto out_put;
	}
	out = (struct plabel_label *)buf;
	p = buf + set->count * sizeof(*out);
	for (i = 0; i < set->count; i++) {
		const struct plabel_label_k *l = &set->labels[i];

		out[i].key = args->buf + (p - buf);
		out[i].key_len = l->key_len;
		memcpy(p, l->key, l->key_len + 1);
		p += l->key_len + 1;
		out[i].value = args->buf + (p - buf);
		out[i].value_len = l->value_len;
		memcpy(p, l->value, l->value_len + 1);
		p += l->value_len + 1;
	}
	if (copy_to_user(u64_to_user_ptr(args->buf), buf, need))
		err = -EFAULT;
	kvfree(buf);
out_put:
	plabel_set_put(set);
	return err;
}

/*
 * Process context: the labels task t carries now, with a reference (NULL
 * for none), and in *stack_top where its user stack ends (0: not known).
 * t's slot, when it has one in the address space t runs in (mm, from
 * get_task_mm(), or NULL), is read from t's memory with
 * access_process_vm(): t may run, exit or exec meanwhile, and then what is
 * read is at worst a stale id, which names a set t may use or nothing.
 */
struct plabel_set *plabel_task_labels_get(struct task_struct *t,
					  struct mm_struct *mm,
					  unsigned long *stack_top)
{
	struct plabel_set *set = NULL, *slot_set = NULL;
	struct plabel_task *e;
	u64 slot = 0, id = 0;

	*stack_top = 0;
	rcu_read_lock();
	e = plabel_task_find(t);
	if (e) {
		*stack_top = READ_ONCE(e->stack_top);
		if (mm && READ_ONCE(e->slot_mm) == mm)
			slot = READ_ONCE(e->slot);
		set = plabel_try_get(rcu_dereference(e->set));
	}
	rcu_read_unlock();
	if (slot && access_process_vm(t, slot, &id, sizeof(id), 0) ==
		    sizeof(id) && id) {
		rcu_read_lock();
		slot_set = plabel_set_lookup_rcu(id);
		/* as plabel_slot_set_rcu(), with t's effective uid */
		if (slot_set && !uid_eq(slot_set->owner, task_euid(t)))
			slot_set = NULL;
		slot_set = plabel_try_get(slot_set);
		rcu_read_unlock();
	}
	if (slot_set) {
		plabel_set_put(set);
		return slot_set;
	}
	return set;
}

/* Tracepoint probes: preemption is disabled, current is the actor. */

/*
 * Where a new user task's stack ends: a task started on a stack of its own
 * (a thread: clone with a new stack pointer) has nothing above the stack
 * pointer it starts with; one that goes on on its creator's stack (fork,
 * vfork) shares its creator's end, when that is known.
 */
static unsigned long plabel_child_stack_top(struct task_struct *child,
					    unsigned long parent_top)
{
	unsigned long sp;

	if (child->flags & PLABEL_PF_NO_USER ||
	    current->flags & PF_KTHREAD)
		return 0;
	sp = task_pt_regs(child)->sp;
	return sp != task_pt_regs(current)->sp ? sp : parent_top;
}

static void plabel_probe_newtask(PLABEL_PROBE_NEWTASK_ARGS)
{
	struct plabel_set *set = NULL;
	struct plabel_user *user = NULL;
	struct plabel_task *parent;
	unsigned long top = 0, parent_top = 0;
	u64 slot = 0;

	parent = plabel_task_find_current();
	if (parent) {
		set = plabel_task_effective(parent, false);
		/* fork copies the slot with the memory it is in */
		if (!(clone_flags & CLONE_VM))
			slot = plabel_task_slot(parent);
		parent_top = READ_ONCE(parent->stack_top);
		user = parent->user;
	}
	/* a stack top is kept only for tasks a session samples */
	if (plabel_session_on_clone(child, clone_flags, set, parent_top))
		top = plabel_child_stack_top(child, parent_top);
	/* without memory for the stack top, only the snapshots grow */
	if ((set || slot || top) &&
	    IS_ERR(plabel_task_alloc(child, slot, set, top,
				     set || slot ? user : NULL,
				     GFP_ATOMIC | __GFP_NOWARN)) &&
	    (set || slot))
		atomic_inc(&plabel_inherit_failed);
	plabel_set_put(set);
}

static void plabel_probe_exec(void *data, struct task_struct *p,
			      pid_t old_pid, struct linux_binprm *bprm)
{
	struct plabel_task *e = plabel_task_find_current();

	/*
	 * The slot and the stack were in the old address space; the stored
	 * set stays, but for an exec that gained privileges (setuid, file
	 * capabilities: AT_SECURE), which starts with no labels.
	 */
	if (e) {
		WRITE_ONCE(e->slot, 0);
		WRITE_ONCE(e->stack_top, 0);
		if (bprm->secureexec)
			plabel_set_put(rcu_replace_pointer(e->set, NULL, true));
		plabel_task_maybe_drop(e);
	}
	plabel_session_on_exec();
}

static void plabel_probe_exit(PLABEL_PROBE_EXIT_ARGS)
{
	struct plabel_task *e = plabel_task_find_current();

	if (e)
		plabel_task_remove(e);
	/* the tracepoint comes after the group's live count went down */
	if (!atomic_read(&current->signal->live))
		plabel_session_on_exit();
}

static void plabel_probe_rename(void *data, struct task_struct *task,
				const char *comm)
{
	plabel_session_on_comm(task, comm);
}

struct plabel_probe {
	const char *name;
	void *func;
	struct tracepoint *tp;
	bool registered;
};

/* Registered in this order (exit first), unregistered in reverse. */
static struct plabel_probe plabel_probes[] = {
	PLABEL_PROBE(sched_process_exit, plabel_probe_exit),
	PLABEL_PROBE(sched_process_exec, plabel_probe_exec),
	PLABEL_PROBE(task_newtask, plabel_probe_newtask),
	PLABEL_PROBE(task_rename, plabel_probe_rename),
};

static void plabel_find_tracepoint(struct tracepoint *tp, void *priv)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(plabel_probes); i++)
		if (!strcmp(tp->name, plabel_probes[i].name))
			plabel_probes[i].tp = tp;
}

static void plabel_probes_unregister(void)
{
	int i;

	for (i = ARRAY_SIZE(plabel_probes) - 1; i >= 0; i--) {
		struct plabel_probe *p = &plabel_probes[i];

		if (p->registered)
			WARN_ON_ONCE(tracepoint_probe_unregister(p->tp, p->func,
								 NULL));
		p->registered = false;
	}
	tracepoint_synchronize_unregister();
}

static int plabel_probes_register(void)
{
	int i, err;

	for_each_kernel_tracepoint(plabel_find_tracepoint, NULL);
	for (i = 0; i < ARRAY_SIZE(plabel_probes); i++) {
		struct plabel_probe *p = &plabel_probes[i];

		if (!p->tp) {
			pr_err("plabel: tracepoint %s not found\n", p->name);
			err = -ENOENT;
			goto err_unregister;
		}
		err = tracepoint_probe_register(p->tp, p->func, NULL);
		if (err)
			goto err_unregister;
		p->registered = true;
	}
	return 0;

err_unregister:
	plabel_probes_unregister();
	return err;
}

static void plabel_task_free(void *ptr, void *arg)
{
	struct plabel_task *e = ptr;

	plabel_set_put(rcu_dereference_protected(e->set, true));
	plabel_user_uncharge_task(e->user);
	atomic_long_dec(&plabel_nr_tasks);
	kfree_rcu(e, rcu);
}

int plabel_task_init(void)
{
	int err;

	err = rhashtable_init(&plabel_tasks, &plabel_task_params);
	if (err)
		return err;
	err = plabel_probes_register();
	if (err)
		goto err_table;
	if (plabel_debugfs_dir)
		debugfs_create_atomic_t("inherit_failed", 0444,
					plabel_debugfs_dir,
					&plabel_inherit_failed);
	return 0;

err_table:
	rhashtable_destroy(&plabel_tasks);
	return err;
}

/*
 * Module exit: no file is open, so no ioctl or session runs; once the
 * probes are gone nothing else touches the table.
 */
void plabel_task_exit(void)
{
	plabel_probes_unregister();
	rhashtable_free_and_destroy(&plabel_tasks, plabel_task_free, NULL);
}
