// SPDX-License-Identifier: GPL-2.0
/*
 * Interned label sets.
 *
 * A set is a sorted list of (key, value) strings owned by the user (uid)
 * that interned it. The same labels from the same owner give the same set.
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
 * Lock order: pf->lock, then plabel_intern_lock, then the xarray lock.
 */
#include <linux/debugfs.h>
#include <linux/hashtable.h>
#include <linux/jhash.h>
#include <linux/llist.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/random.h>
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

/* Quota record of one owner; exists while the owner has sets. */
struct plabel_user {
	struct hlist_node node;
	kuid_t uid;
	u32 sets;
	u64 bytes;
};

static DEFINE_MUTEX(plabel_intern_lock);
static DEFINE_HASHTABLE(plabel_set_hash, PLABEL_SET_HASH_BITS);
static DEFINE_HASHTABLE(plabel_user_hash, PLABEL_USER_HASH_BITS);
static DEFINE_XARRAY_ALLOC1(plabel_ids);
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

/* Charges one set of @bytes to @uid; -EDQUOT when over quota. */
static int plabel_user_charge(kuid_t uid, u32 bytes)
{
	unsigned int max_sets = READ_ONCE(plabel_max_sets_per_user);
	unsigned int max_bytes = READ_ONCE(plabel_max_bytes_per_user);
	struct plabel_user *u;

	lockdep_assert_held(&plabel_intern_lock);
	u = plabel_user_find(uid);
	if (!u) {
		if (bytes > max_bytes || max_sets < 1)
			return -EDQUOT;
		u = kzalloc(sizeof(*u), GFP_KERNEL);
		if (!u)
			return -ENOMEM;
		u->uid = uid;
		hash_add(plabel_user_hash, &u->node, __kuid_val(uid));
	} else if (u->sets + 1 > max_sets || u->bytes + bytes > max_bytes) {
		return -EDQUOT;
	}
	u->sets++;
	u->bytes += bytes;
	return 0;
}

static void plabel_user_uncharge(kuid_t uid, u32 bytes)
{
	struct plabel_user *u;

	lockdep_assert_held(&plabel_intern_lock);
	u = plabel_user_find(uid);
	if (WARN_ON_ONCE(!u || !u->sets || u->bytes < bytes))
		return;
	u->sets--;
	u->bytes -= bytes;
	if (!u->sets) {
		hash_del(&u->node);
		kfree(u);
	}
}

/* Removes a set whose last reference is gone; frees it after RCU. */
static void plabel_set_destroy(struct plabel_set *set)
{
	lockdep_assert_held(&plabel_intern_lock);
	hash_del(&set->hnode);
	xa_erase(&plabel_ids, plabel_id_index(set->id));
	plabel_user_uncharge(set->owner, set->bytes);
	atomic_long_dec(&plabel_nr_sets);
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

static int plabel_label_cmp(const void *a, const void *b)
{
	const struct plabel_label_k *la = a, *lb = b;

	return strcmp(la->key, lb->key);
}

static u32 plabel_set_hash_of(const struct plabel_set *set)
{
	u32 h = jhash_2words(__kuid_val(set->owner), set->count,
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

	if (a->hash != b->hash || !uid_eq(a->owner, b->owner) ||
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

/* Copies @len bytes from user memory to @dst, NUL-terminates, no NULs. */
static int plabel_copy_string(char *dst, u64 src, u32 len)
{
	if (copy_from_user(dst, u64_to_user_ptr(src), len))
		return -EFAULT;
	if (memchr(dst, '\0', len))
		return -EINVAL;
	dst[len] = '\0';
	return 0;
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
	set->owner = current_uid();
	set->count = count;
	set->bytes = size;
	refcount_set(&set->refs, 1);
	atomic_set(&set->emitted_gen, 0);
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
	kvfree(set);
	return ERR_PTR(err);
}

/*
 * Returns the interned set equal to @new with a new reference (freeing
 * @new), or publishes @new with its first reference.
 */
static struct plabel_set *plabel_intern(struct plabel_set *new)
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
			kvfree(new);
			return set;
		}
	}
	ret = plabel_user_charge(new->owner, new->bytes);
	if (ret == -EDQUOT && !flushed) {
		/* Sets just put still hold quota until reaped: reap now. */
		mutex_unlock(&plabel_intern_lock);
		flush_work(&plabel_reap_work);
		flushed = true;
		goto again;
	}
	if (ret)
		goto err_unlock;
	/* Reserve the index, fill in the id, then publish. */
	ret = xa_alloc_cyclic(&plabel_ids, &index, NULL, xa_limit_32b,
			      &plabel_id_next, GFP_KERNEL);
	if (ret < 0)
		goto err_uncharge;
	if (ret == 1)
		plabel_id_gen++;
	new->id = (u64)plabel_id_gen << 32 | index;
	xa_store(&plabel_ids, index, new, GFP_KERNEL);
	hash_add(plabel_set_hash, &new->hnode, new->hash);
	atomic_long_inc(&plabel_nr_sets);
	mutex_unlock(&plabel_intern_lock);
	return new;

err_uncharge:
	plabel_user_uncharge(new->owner, new->bytes);
err_unlock:
	mutex_unlock(&plabel_intern_lock);
	kvfree(new);
	return ERR_PTR(ret == -EBUSY ? -ENOSPC : ret);
}

int plabel_set_new(struct plabel_file *pf, struct plabel_set_new_args *args)
{
	struct plabel_label *ul;
	struct plabel_set *set, *old;
	u32 count = args->count;
	int err;

	args->id = 0;
	if (!count)
		return 0;
	if (count > READ_ONCE(plabel_max_labels))
		return -E2BIG;
	ul = kmalloc_array(count, sizeof(*ul), GFP_KERNEL);
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
	set = plabel_intern(set);
	if (IS_ERR(set)) {
		err = PTR_ERR(set);
		goto err_free;
	}
	kfree(ul);

	/* The file keeps one reference per set. */
	mutex_lock(&pf->lock);
	old = xa_load(&pf->refs, plabel_id_index(set->id));
	if (old) {
		WARN_ON_ONCE(old != set);
		plabel_set_put(set);
	} else {
		err = xa_err(xa_store(&pf->refs, plabel_id_index(set->id), set,
				      GFP_KERNEL));
		if (err) {
			mutex_unlock(&pf->lock);
			plabel_set_put(set);
			return err;
		}
	}
	mutex_unlock(&pf->lock);
	args->id = set->id;
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
		seq_printf(m, "%u %u %llu\n",
			   from_kuid_munged(&init_user_ns, u->uid), u->sets,
			   u->bytes);
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
 * Module exit: every file is closed and every task entry is gone, so the
 * only sets left are on their way through RCU callbacks and the reap work.
 */
void plabel_labels_exit(void)
{
	struct plabel_set *set;
	unsigned long index;

	rcu_barrier();
	flush_work(&plabel_reap_work);
	mutex_lock(&plabel_intern_lock);
	xa_for_each(&plabel_ids, index, set) {
		WARN_ON_ONCE(1);
		plabel_set_destroy(set);
	}
	mutex_unlock(&plabel_intern_lock);
	xa_destroy(&plabel_ids);
	/* The sets' kvfree_rcu() calls need no module code. */
}
