// SPDX-License-Identifier: GPL-2.0
/*
 * Interned label sets.
 *
 * A set is a sorted list of (key, value) strings interned by one process
 * (thread group). The same labels from the same process give the same set;
 * another process, even of the same user, gets a set of its own, so an id
 * tells nothing about what other processes labeled.
 *
 * Who may use a set (plabel_set_may_access()):
 * naming one in LABELS_SET, or reading its strings with LABELS_GET, is
 * allowed as ptrace's read access to the process that interned it would
 * be, with its credentials and dumpability at the time of the call (and
 * those it had when it interned the set, once it is gone). The sampler, in
 * interrupt context, only compares the effective uid a set was interned
 * with (owner) with the interrupted thread's.
 *
 * Quotas are charged to the real uid of the caller, or where the caller
 * runs in a user namespace, to the uid that owns its outermost user
 * namespace, as ucounts do, so that ids mapped in namespaces share their
 * owner's quota. A quota record (struct plabel_user) stays until the module
 * is unloaded: there is at most one per user of the system.
 * Each set has a 64-bit id, (generation << 32 | index) where index is its
 * slot in plabel_ids, allocated cyclically; the generation grows each time
 * the index space wraps, so an id is never handed out twice.
 *
 * Lookup by id is lock-free (xa_load() under RCU) and may run in hard
 * interrupt context. Everything else runs in process context under
 * plabel_intern_lock, which guards the dedup table, the per-user quota
 * records and all stores into plabel_ids (so the xarray's own lock is only
 * taken from process context and needs no irq-safety).
 *
 * References: a set is referenced by open files (one ref per file, in
 * pf->refs) and by task entries (task.c). plabel_set_put() may run in any
 * context but NMI (it may queue work); the final put queues the set on
 * plabel_dead_sets and a work item removes it from plabel_ids and the
 * dedup table, returns its quota, and frees it after an RCU grace period.
 * Between the final put and removal the set is still found by xa_load()
 * but has refs == 0, and lookups treat it as gone. An intern that would
 * fail with -EDQUOT first waits for pending removals.
 *
 * Every allocation made for a caller is charged to its memory cgroup
 * (GFP_KERNEL_ACCOUNT, XA_FLAGS_ACCOUNT).
 *
 * Lock order: pf->lock, then plabel_intern_lock, then the xarray lock;
 * session.c's plabel_session_mutex, then plabel_intern_lock.
 */
#include <linux/debugfs.h>
#include <linux/hash.h>
#include <linux/hashtable.h>
#include <linux/jhash.h>
#include <linux/llist.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/cred.h>
#include <linux/capability.h>
#include <linux/pid.h>
#include <linux/random.h>
#include <linux/sched/task.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/user_namespace.h>
#include <linux/workqueue.h>

#include "internal.h"

#define PLABEL_SET_HASH_BITS	12
#define PLABEL_USER_HASH_BITS	6


static DEFINE_MUTEX(plabel_intern_lock);
static DEFINE_HASHTABLE(plabel_set_hash, PLABEL_SET_HASH_BITS);
static DEFINE_HASHTABLE(plabel_user_hash, PLABEL_USER_HASH_BITS);
static DEFINE_XARRAY_FLAGS(plabel_ids, XA_FLAGS_ALLOC1 | XA_FLAGS_ACCOUNT);
static u32 plabel_id_next = 1;
static u32 plabel_id_gen = 1;
static atomic_long_t plabel_nr_sets = ATOMIC_LONG_INIT(0);
/* Random, so users cannot pick labels that collide in the dedup table. */
static u32 plabel_hash_seed __read_mostly;

static LLIST_HEAD(plabel_dead_sets);
static void plabel_reap_fn(struct work_struct *work);
static DECLARE_WORK(plabel_reap_work, plabel_reap_fn);

long plabel_live_sets(void)
{
	return atomic_long_read(&plabel_nr_sets);
}

static u32 plabel_id_index(u64 id)
{
	return (u32)id;
}

static struct plabel_user *plabel_user_find(kuid_t uid)
{
	struct plabel_user *u;

	lockdep_assert_held(&plabel_intern_lock);
	hash_for_each_possible(plabel_user_hash, u, node, __kuid_val(uid))
		if (uid_eq(u->uid, uid))
			return u;
	return NULL;
}

/*
 * The uid current's quotas are charged to: its real uid, or the owner of
 * its outermost user namespace below the initial one.
 */
static kuid_t plabel_quota_uid(void)
{
	const struct user_namespace *ns = current_user_ns();
	kuid_t uid = current_uid();

	while (ns && ns != &init_user_ns) {
		uid = ns->owner;
		ns = ns->parent;
	}
	return uid;
}

struct plabel_user *plabel_user_current(void)
{
	kuid_t uid = plabel_quota_uid();
	struct plabel_user *u;

	mutex_lock(&plabel_intern_lock);
	u = plabel_user_find(uid);
	if (!u) {
		u = kzalloc(sizeof(*u), GFP_KERNEL_ACCOUNT);
		if (u) {
			u->uid = uid;
			atomic_set(&u->tasks, 0);
			hash_add(plabel_user_hash, &u->node, __kuid_val(uid));
		}
	}
	mutex_unlock(&plabel_intern_lock);
	return u;
}

/* Charges one set of @bytes to @u; -EDQUOT when over quota. */
static int plabel_user_charge(struct plabel_user *u, u32 bytes)
{
	unsigned int max_sets = READ_ONCE(plabel_max_sets_per_user);
	unsigned int max_bytes = READ_ONCE(plabel_max_bytes_per_user);

	lockdep_assert_held(&plabel_intern_lock);
	if (u->sets + 1 > max_sets || u->bytes + bytes > max_bytes)
		return -EDQUOT;
	u->sets++;
	u->bytes += bytes;
	return 0;
}

static void plabel_user_uncharge(struct plabel_user *u, u32 bytes)
{
	lockdep_assert_held(&plabel_intern_lock);
	if (WARN_ON_ONCE(!u->sets || u->bytes < bytes))
		return;
	u->sets--;
	u->bytes -= bytes;
}

bool plabel_user_charge_task(struct plabel_user *u)
{
	if (!u)
		return true;
	if (atomic_inc_return(&u->tasks) > READ_ONCE(plabel_max_tasks_per_user)) {
		atomic_dec(&u->tasks);
		return false;
	}
	return true;
}

void plabel_user_uncharge_task(struct plabel_user *u)
{
	if (u)
		WARN_ON_ONCE(atomic_dec_return(&u->tasks) < 0);
}

/* Removes a set whose last reference is gone; frees it after RCU. */
static void plabel_set_destroy(struct plabel_set *set)
{
	lockdep_assert_held(&plabel_intern_lock);
	hash_del(&set->hnode);
	xa_erase(&plabel_ids, plabel_id_index(set->id));
	plabel_user_uncharge(set->user, set->bytes);
	atomic_long_dec(&plabel_nr_sets);
	/* only holders of a reference look at these */
	put_pid(set->creator);
	put_cred(set->cred);
	kvfree_rcu(set, rcu);
}

static void plabel_reap_fn(struct work_struct *work)
{
	struct llist_node *list = llist_del_all(&plabel_dead_sets);
	struct plabel_set *set, *tmp;

	if (!list)
		return;
	mutex_lock(&plabel_intern_lock);
	llist_for_each_entry_safe(set, tmp, list, dead)
		plabel_set_destroy(set);
	mutex_unlock(&plabel_intern_lock);
}

void plabel_set_get(struct plabel_set *set)
{
	refcount_inc(&set->refs);
}

void plabel_set_put(struct plabel_set *set)
{
	if (!set || !refcount_dec_and_test(&set->refs))
		return;
	llist_add(&set->dead, &plabel_dead_sets);
	schedule_work(&plabel_reap_work);
}

struct plabel_set *plabel_set_lookup_rcu(u64 id)
{
	struct plabel_set *set;

	if (!id)
		return NULL;
	set = xa_load(&plabel_ids, plabel_id_index(id));
	if (!set || READ_ONCE(set->id) != id || !refcount_read(&set->refs))
		return NULL;
	return set;
}

struct plabel_set *plabel_set_get_id(u64 id)
{
	struct plabel_set *set;

	rcu_read_lock();
	set = plabel_set_lookup_rcu(id);
	if (set && !refcount_inc_not_zero(&set->refs))
		set = NULL;
	rcu_read_unlock();
	return set;
}

/*
 * Whether a caller with credentials @c may read what a process with
 * credentials @t and dumpability @dumpable made: as ptrace's read access
 * (__ptrace_may_access() with PTRACE_MODE_FSCREDS, and commoncap's check
 * that the target has no capability the caller lacks), or CAP_SYS_PTRACE.
 * Security modules' own ptrace rules (Yama, AppArmor, SELinux) are not
 * consulted: their hooks are not exported to modules.
 */
static bool plabel_cred_may_read(const struct cred *c, const struct cred *t,
				 int dumpable)
{
	if (ns_capable_noaudit(t->user_ns, CAP_SYS_PTRACE))
		return true;
	if (!uid_eq(c->fsuid, t->euid) || !uid_eq(c->fsuid, t->suid) ||
	    !uid_eq(c->fsuid, t->uid) || !gid_eq(c->fsgid, t->egid) ||
	    !gid_eq(c->fsgid, t->sgid) || !gid_eq(c->fsgid, t->gid))
		return false;
	if (dumpable != PLABEL_DUMP_USER)
		return false;
	/* as the kernel's ptrace check with file system credentials */
	if (c->user_ns != t->user_ns ||
	    !cap_issubset(t->cap_permitted, c->cap_effective))
		return false;
	return true;
}

bool plabel_set_may_access(const struct plabel_set *set)
{
	const struct cred *tcred = set->cred;
	int dumpable = set->dumpable ? PLABEL_DUMP_USER : 0, d;
	struct task_struct *t;
	bool ok;

	if (set->creator == task_tgid(current))
		return true;
	rcu_read_lock();
	/* the process as it is now, while it lives */
	t = pid_task(set->creator, PIDTYPE_TGID);
	if (t) {
		tcred = __task_cred(t);
		/* credentials first, as ptrace: pairs with commit_creds() */
		smp_rmb();
		d = plabel_task_dumpable(t);
		if (d >= 0)
			dumpable = d;
	}
	ok = plabel_cred_may_read(current_cred(), tcred, dumpable);
	rcu_read_unlock();
	return ok;
}

bool plabel_may_read_task(struct task_struct *t)
{
	const struct cred *tcred;
	bool ok;
	int d;

	if (same_thread_group(t, current))
		return true;
	rcu_read_lock();
	tcred = __task_cred(t);
	/*
	 * Credentials before dumpability, as ptrace reads them: a task
	 * becomes non-dumpable before its new credentials show (smp_wmb()
	 * in commit_creds()), so the pair is never the old dumpability with
	 * the new credentials.
	 */
	smp_rmb();
	d = plabel_task_dumpable(t);
	/* no memory (an exited leader): as ptrace, the credentials decide */
	if (d < 0)
		d = PLABEL_DUMP_USER;
	ok = plabel_cred_may_read(current_cred(), tcred, d);
	rcu_read_unlock();
	return ok;
}

static int plabel_label_cmp(const void *a, const void *b)
{
	const struct plabel_label_k *la = a, *lb = b;

	return strcmp(la->key, lb->key);
}

static u32 plabel_set_hash_of(const struct plabel_set *set)
{
	u32 h = jhash_2words(hash_ptr(set->creator, 32), set->count,
			     plabel_hash_seed);
	u32 i;

	for (i = 0; i < set->count; i++) {
		const struct plabel_label_k *l = &set->labels[i];

		h = jhash(l->key, l->key_len, h);
		h = jhash(l->value, l->value_len, h ^ l->key_len);
	}
	return h;
}

static bool plabel_set_same(const struct plabel_set *a,
			    const struct plabel_set *b)
{
	u32 i;

	if (a->hash != b->hash || a->creator != b->creator ||
	    a->count != b->count)
		return false;
	for (i = 0; i < a->count; i++) {
		const struct plabel_label_k *x = &a->labels[i];
		const struct plabel_label_k *y = &b->labels[i];

		if (x->key_len != y->key_len || x->value_len != y->value_len ||
		    memcmp(x->key, y->key, x->key_len) ||
		    memcmp(x->value, y->value, x->value_len))
			return false;
	}
	return true;
}

/*
 * Copies @len bytes from user memory to @dst and NUL-terminates. Control
 * bytes (below 0x20, and 0x7f) are refused: labels end up in terminals and
 * text reports, where they could forge lines or send escape sequences.
 */
static int plabel_copy_string(char *dst, u64 src, u32 len)
{
	u32 i;

	if (copy_from_user(dst, u64_to_user_ptr(src), len))
		return -EFAULT;
	for (i = 0; i < len; i++)
		if ((u8)dst[i] < 0x20 || dst[i] == 0x7f)
			return -EINVAL;
	dst[len] = '\0';
	return 0;
}

static void plabel_set_free_unpublished(struct plabel_set *set)
{
	put_pid(set->creator);
	put_cred(set->cred);
	kvfree(set);
}

/*
 * Builds an unpublished set from the user's label array: validates the
 * limits, copies and checks the strings, sorts by key and rejects repeated
 * keys.
 */
static struct plabel_set *plabel_set_build(const struct plabel_label *ul,
					   u32 count)
{
	unsigned int max_key = READ_ONCE(plabel_max_key_len);
	unsigned int max_value = READ_ONCE(plabel_max_value_len);
	struct plabel_set *set;
	size_t strings = 0, size;
	char *p;
	u32 i;
	int err;

	for (i = 0; i < count; i++) {
		if (!ul[i].key_len)
			return ERR_PTR(-EINVAL);
		if (ul[i].key_len > max_key || ul[i].value_len > max_value)
			return ERR_PTR(-E2BIG);
		strings += (size_t)ul[i].key_len + ul[i].value_len + 2;
	}
	size = struct_size(set, labels, count) + strings;
	if (size > U32_MAX)
		return ERR_PTR(-E2BIG);
	set = kvzalloc(size, GFP_KERNEL_ACCOUNT);
	if (!set)
		return ERR_PTR(-ENOMEM);
	set->owner = current_euid();
	set->creator = get_task_pid(current, PIDTYPE_TGID);
	set->cred = get_current_cred();
	rcu_read_lock();
	set->dumpable = plabel_task_dumpable(current) == PLABEL_DUMP_USER;
	rcu_read_unlock();
	set->count = count;
	set->bytes = size;
	refcount_set(&set->refs, 1);
	INIT_HLIST_NODE(&set->hnode);

	p = (char *)&set->labels[count];
	for (i = 0; i < count; i++) {
		struct plabel_label_k *l = &set->labels[i];

		err = plabel_copy_string(p, ul[i].key, ul[i].key_len);
		if (err)
			goto err_free;
		l->key = p;
		l->key_len = ul[i].key_len;
		p += l->key_len + 1;
		err = plabel_copy_string(p, ul[i].value, ul[i].value_len);
		if (err)
			goto err_free;
		l->value = p;
		l->value_len = ul[i].value_len;
		p += l->value_len + 1;
	}
	sort(set->labels, count, sizeof(set->labels[0]), plabel_label_cmp,
	     NULL);
	for (i = 1; i < count; i++) {
		if (!strcmp(set->labels[i - 1].key, set->labels[i].key)) {
			err = -EINVAL;
			goto err_free;
		}
	}
	set->hash = plabel_set_hash_of(set);
	return set;

err_free:
	plabel_set_free_unpublished(set);
	return ERR_PTR(err);
}

/*
 * Returns the interned set equal to @new with a new reference (freeing
 * @new), or publishes @new with its first reference.
 */
static struct plabel_set *plabel_intern(struct plabel_set *new,
				       struct plabel_user *user)
{
	struct plabel_set *set;
	bool flushed = false;
	u32 index;
	int ret;

again:
	mutex_lock(&plabel_intern_lock);
	hash_for_each_possible(plabel_set_hash, set, hnode, new->hash) {
		if (plabel_set_same(set, new) &&
		    refcount_inc_not_zero(&set->refs)) {
			mutex_unlock(&plabel_intern_lock);
			plabel_set_free_unpublished(new);
			return set;
		}
	}
	ret = plabel_user_charge(user, new->bytes);
	if (ret == -EDQUOT && !flushed) {
		/* Sets just put still hold quota until reaped: reap now. */
		mutex_unlock(&plabel_intern_lock);
		flush_work(&plabel_reap_work);
		flushed = true;
		goto again;
	}
	if (ret)
		goto err_unlock;
	new->user = user;
	/* Reserve the index, fill in the id, then publish. */
	ret = xa_alloc_cyclic(&plabel_ids, &index, NULL, xa_limit_32b,
			      &plabel_id_next, GFP_KERNEL_ACCOUNT);
	if (ret < 0)
		goto err_uncharge;
	if (ret == 1)
		plabel_id_gen++;
	new->id = (u64)plabel_id_gen << 32 | index;
	xa_store(&plabel_ids, index, new, GFP_KERNEL_ACCOUNT);
	hash_add(plabel_set_hash, &new->hnode, new->hash);
	atomic_long_inc(&plabel_nr_sets);
	mutex_unlock(&plabel_intern_lock);
	return new;

err_uncharge:
	plabel_user_uncharge(user, new->bytes);
err_unlock:
	mutex_unlock(&plabel_intern_lock);
	plabel_set_free_unpublished(new);
	return ERR_PTR(ret == -EBUSY ? -ENOSPC : ret);
}

int plabel_set_new(struct plabel_file *pf, struct plabel_set_new_args *args)
{
	struct plabel_label *ul;
	struct plabel_set *set, *old;
	struct plabel_user *user;
	u32 count = args->count;
	u64 id;
	int err;

	args->id = 0;
	if (!count)
		return 0;
	if (count > READ_ONCE(plabel_max_labels))
		return -E2BIG;
	user = plabel_user_current();
	if (!user)
		return -ENOMEM;
	ul = kmalloc_array(count, sizeof(*ul), GFP_KERNEL_ACCOUNT);
	if (!ul)
		return -ENOMEM;
	if (copy_from_user(ul, u64_to_user_ptr(args->labels),
			   count * sizeof(*ul))) {
		err = -EFAULT;
		goto err_free;
	}
	set = plabel_set_build(ul, count);
	if (IS_ERR(set)) {
		err = PTR_ERR(set);
		goto err_free;
	}
	set = plabel_intern(set, user);
	if (IS_ERR(set)) {
		err = PTR_ERR(set);
		goto err_free;
	}
	kfree(ul);

	/*
	 * The file keeps one reference per set. Once the lock is dropped
	 * another thread's SET_PUT through this file may free the set: read
	 * what is returned while holding it.
	 */
	mutex_lock(&pf->lock);
	id = set->id;
	old = xa_load(&pf->refs, plabel_id_index(id));
	if (old) {
		WARN_ON_ONCE(old != set);
		plabel_set_put(set);
	} else {
		err = -EDQUOT;
		if (pf->nrefs < READ_ONCE(plabel_max_refs_per_file))
			err = xa_err(xa_store(&pf->refs, plabel_id_index(id),
					      set, GFP_KERNEL_ACCOUNT));
		if (err) {
			mutex_unlock(&pf->lock);
			plabel_set_put(set);
			return err;
		}
		pf->nrefs++;
	}
	mutex_unlock(&pf->lock);
	args->id = id;
	return 0;

err_free:
	kfree(ul);
	return err;
}

int plabel_set_put_id(struct plabel_file *pf, u64 id)
{
	struct plabel_set *set;

	mutex_lock(&pf->lock);
	set = xa_load(&pf->refs, plabel_id_index(id));
	if (!set || set->id != id) {
		mutex_unlock(&pf->lock);
		return -ENOENT;
	}
	xa_erase(&pf->refs, plabel_id_index(id));
	pf->nrefs--;
	mutex_unlock(&pf->lock);
	plabel_set_put(set);
	return 0;
}

void plabel_file_release_sets(struct plabel_file *pf)
{
	struct plabel_set *set;
	unsigned long index;

	xa_for_each(&pf->refs, index, set) {
		xa_erase(&pf->refs, index);
		plabel_set_put(set);
	}
	xa_destroy(&pf->refs);
}

static int plabel_users_show(struct seq_file *m, void *v)
{
	struct plabel_user *u;
	int bkt;

	mutex_lock(&plabel_intern_lock);
	hash_for_each(plabel_user_hash, bkt, u, node)
		seq_printf(m, "%u %u %llu %d\n",
			   from_kuid_munged(&init_user_ns, u->uid), u->sets,
			   u->bytes, atomic_read(&u->tasks));
	mutex_unlock(&plabel_intern_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(plabel_users);

int plabel_labels_init(void)
{
	plabel_hash_seed = get_random_u32();
	if (plabel_debugfs_dir)
		debugfs_create_file("users", 0444, plabel_debugfs_dir, NULL,
				    &plabel_users_fops);
	return 0;
}

/*
 * Under the intern lock every set in plabel_ids stays (removal takes it),
 * and the entry of a slot no session holds changes only here: a pass over
 * all sets, rescheduling as it goes.
 */
void plabel_sets_forget_slot(unsigned int slot)
{
	struct plabel_set *set;
	unsigned long index;

	mutex_lock(&plabel_intern_lock);
	xa_for_each(&plabel_ids, index, set) {
		WRITE_ONCE(set->gen[slot], 0);
		cond_resched();
	}
	mutex_unlock(&plabel_intern_lock);
}

/*
 * Module exit: every file is closed and every task entry is gone, so the
 * only sets left are on their way through RCU callbacks and the reap work.
 */
void plabel_labels_exit(void)
{
	struct plabel_set *set;
	struct plabel_user *u;
	struct hlist_node *tmp;
	unsigned long index;
	int bkt;

	rcu_barrier();
	flush_work(&plabel_reap_work);
	mutex_lock(&plabel_intern_lock);
	xa_for_each(&plabel_ids, index, set) {
		WARN_ON_ONCE(1);
		plabel_set_destroy(set);
	}
	hash_for_each_safe(plabel_user_hash, bkt, tmp, u, node) {
		WARN_ON_ONCE(u->sets || atomic_read(&u->tasks));
		hash_del(&u->node);
		kfree(u);
	}
	mutex_unlock(&plabel_intern_lock);
	xa_destroy(&plabel_ids);
	/* The sets' kvfree_rcu() calls need no module code. */
}
