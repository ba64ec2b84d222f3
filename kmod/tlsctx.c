// SPDX-License-Identifier: GPL-2.0
/*
 * Thread contexts that programs publish in thread-local storage for outside
 * profilers: the OpenTelemetry thread context (OTEP 4947) and the
 * custom-labels v1 ABI. The session's reader finds where a process keeps
 * its thread-local pointer and registers it (PLABEL_IOC_TLSCTX_SET); every
 * record the session writes for a thread of that process then carries a
 * copy of the thread's context of that moment, which the reader decodes
 * (the UAPI header and Documentation/record-format.rst say how).
 *
 * The table: PLABEL_TLSCTX_SLOTS RCU-published pointers to entries that
 * never change once published, open-addressed by tgid (a lookup probes
 * PLABEL_TLSCTX_PROBE slots). An entry holds a reference to its process's
 * mm_struct (mmgrab(), never followed from the record writers: compared
 * only) and applies while current->mm is that one, so neither an exec nor
 * a tgid reused after an exit meets an old entry. The ioctl changes the
 * table under the session's tlsctx_lock and frees a replaced entry after
 * a grace period; the record writers (interrupts off: the overflow
 * handler, the clone and switch probes, the heap ioctl) read it locklessly
 * and read user memory only with copy_from_user_nofault().
 *
 * Lock order: tlsctx_lock is taken alone (the ioctl), never in interrupt
 * context.
 */
#include <linux/hash.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <asm/fsgsbase.h>

#include "session.h"

#define PLABEL_TLSCTX_BITS	12
#define PLABEL_TLSCTX_SLOTS	(1U << PLABEL_TLSCTX_BITS)
#define PLABEL_TLSCTX_PROBE	32
/* The OTEP 4947 record's fixed head: ids, valid, flags, attrs-data-size */
#define PLABEL_OTEL_HEAD	28
#define PLABEL_OTEL_VALID	24	/* offset of valid */
#define PLABEL_OTEL_SIZE	26	/* offset of attrs-data-size */
/* What a record may carry: the context's header and bytes */
#define PLABEL_TLSCTX_ROOM	(sizeof(struct plabel_rec_tlsctx) + \
				 PLABEL_TLSCTX_BYTES)

struct plabel_tlsctx {
	struct plabel_tlsctx *dead;	/* taken out, freed after a grace period */
	struct mm_struct *mm;	/* mmgrab()ed; compared, never followed */
	pid_t tgid;
	u32 format;
	u32 flags;
	s64 offset;
	u64 module;
};

/*
 * A quarter full at most, and a process's place among 32 slots: -ENOSPC
 * before PLABEL_TLSCTX_PROCS processes is then unlikely even for pids
 * that crowd one place (a lookup reads the 32 pointers: 256 bytes).
 */
static_assert(PLABEL_TLSCTX_SLOTS >= 4 * PLABEL_TLSCTX_PROCS);

static u32 plabel_tlsctx_hash(pid_t tgid)
{
	return hash_32((u32)tgid, PLABEL_TLSCTX_BITS);
}

static struct plabel_tlsctx *
plabel_tlsctx_find(struct plabel_tlsctx __rcu **tab, pid_t tgid)
{
	u32 h = plabel_tlsctx_hash(tgid), i;

	for (i = 0; i < PLABEL_TLSCTX_PROBE; i++) {
		struct plabel_tlsctx *e;

		u32 k = (h + i) & (PLABEL_TLSCTX_SLOTS - 1);

		e = rcu_dereference_sched(tab[k]);
		if (e && e->tgid == tgid)
			return e;
	}
	return NULL;
}

static void plabel_tlsctx_put_entry(struct plabel_tlsctx *e)
{
	mmdrop(e->mm);
	kfree(e);
}

/* Session teardown: nothing writes records for s any more. */
void plabel_tlsctx_free(struct plabel_session *s)
{
	struct plabel_tlsctx __rcu **tab = s->tlsctx;
	u32 i;

	if (!tab)
		return;
	for (i = 0; i < PLABEL_TLSCTX_SLOTS; i++) {
		struct plabel_tlsctx *e = rcu_dereference_protected(tab[i], 1);

		if (e)
			plabel_tlsctx_put_entry(e);
	}
	kvfree(tab);
	s->tlsctx = NULL;
}

/* An entry whose process has exited or exec'ed: its slot may be reused. */
static bool plabel_tlsctx_stale(const struct plabel_tlsctx *e)
{
	return !atomic_read(&e->mm->mm_users);
}

static int plabel_tlsctx_check(const struct plabel_tlsctx_args *a)
{
	if (a->flags & ~(PLABEL_TLSCTX_DTV | PLABEL_TLSCTX_HEAD) ||
	    a->pid <= 0 || a->format > PLABEL_TLSCTX_CUSTOM_LABELS_V1)
		return -EINVAL;
	if ((a->flags & PLABEL_TLSCTX_HEAD) &&
	    a->format != PLABEL_TLSCTX_OTEL_V1)
		return -EINVAL;
	if (a->format == PLABEL_TLSCTX_NONE)
		return a->flags || a->offset || a->module ? -EINVAL : 0;
	if (a->flags & PLABEL_TLSCTX_DTV)
		return a->module && a->module <= PLABEL_TLSCTX_MODULE_MAX &&
		       a->offset >= 0 && a->offset < PLABEL_TLSCTX_OFFSET_MAX ?
		       0 : -EINVAL;
	return !a->module && a->offset &&
	       a->offset > -PLABEL_TLSCTX_OFFSET_MAX &&
	       a->offset < PLABEL_TLSCTX_OFFSET_MAX ? 0 : -EINVAL;
}

/*
 * The mm (mmgrab()ed) and global tgid of process pid of the caller's pid
 * namespace, or NULL: from any of its threads that has one (the leader
 * may have exited).
 */
static struct mm_struct *plabel_tlsctx_mm(pid_t pid, pid_t *tgid)
{
	struct task_struct *leader, *t;
	struct mm_struct *mm = NULL;

	rcu_read_lock();
	leader = pid_task(find_vpid(pid), PIDTYPE_TGID);
	if (!leader || (leader->flags & PF_KTHREAD))
		goto out;
	*tgid = task_tgid_nr(leader);
	for_each_thread(leader, t) {
		task_lock(t);
		mm = t->mm;
		if (mm)
			mmgrab(mm);
		task_unlock(t);
		if (mm)
			break;
	}
out:
	rcu_read_unlock();
	return mm;
}

/*
 * The table is full: take out every entry whose process exited or
 * exec'ed, onto *dead. Returns how many.
 */
static u32 plabel_tlsctx_reap(struct plabel_session *s,
			      struct plabel_tlsctx __rcu **tab,
			      struct plabel_tlsctx **dead)
{
	u32 i, n = 0;

	for (i = 0; i < PLABEL_TLSCTX_SLOTS; i++) {
		struct plabel_tlsctx *x;

		x = rcu_dereference_protected(tab[i],
					      lockdep_is_held(&s->tlsctx_lock));
		if (!x || !plabel_tlsctx_stale(x))
			continue;
		RCU_INIT_POINTER(tab[i], NULL);
		x->dead = *dead;
		*dead = x;
		n++;
	}
	s->tlsctx_count -= n;
	return n;
}

int plabel_tlsctx_set(struct plabel_session *s,
		      const struct plabel_tlsctx_args *a)
{
	struct plabel_tlsctx __rcu **tab;
	struct plabel_tlsctx *e = NULL, *old = NULL, *dead = NULL;
	struct mm_struct *mm;
	int i, at = -1, ret = 0;
	pid_t tgid = 0;
	u32 h;

	ret = plabel_tlsctx_check(a);
	if (ret)
		return ret;
	mm = plabel_tlsctx_mm(a->pid, &tgid);
	if (!mm)
		return -ESRCH;
	if (a->format != PLABEL_TLSCTX_NONE) {
		e = kzalloc(sizeof(*e), GFP_KERNEL_ACCOUNT);
		if (!e) {
			mmdrop(mm);
			return -ENOMEM;
		}
		*e = (struct plabel_tlsctx) {
			.mm = mm,
			.tgid = tgid,
			.format = a->format,
			.flags = a->flags,
			.offset = a->offset,
			.module = a->module,
		};
		mm = NULL;
	}

	mutex_lock(&s->tlsctx_lock);
	tab = s->tlsctx;
	if (!tab) {
		ret = 0;
		if (!e)		/* nothing to forget */
			goto out_unlock;
		ret = -ENOMEM;
		tab = kvcalloc(PLABEL_TLSCTX_SLOTS, sizeof(*tab),
			       GFP_KERNEL_ACCOUNT);
		if (!tab)
			goto out_unlock;
		/* the record writers test the pointer: its slots first */
		smp_store_release(&s->tlsctx, tab);
	}
	h = plabel_tlsctx_hash(tgid);
	/* the process's own slot if it has one, else the first free one */
	for (i = 0; i < PLABEL_TLSCTX_PROBE; i++) {
		u32 k = (h + i) & (PLABEL_TLSCTX_SLOTS - 1);
		struct plabel_tlsctx *x;

		x = rcu_dereference_protected(tab[k],
					      lockdep_is_held(&s->tlsctx_lock));
		if (x && x->tgid == tgid) {
			at = k;
			break;
		}
		if (at < 0 && (!x || plabel_tlsctx_stale(x)))
			at = k;
	}
	ret = 0;
	old = at < 0 ? NULL :
	      rcu_dereference_protected(tab[at],
					lockdep_is_held(&s->tlsctx_lock));
	if (!e) {
		/* forgetting: only the process's own entry */
		if (!old || old->tgid != tgid) {
			old = NULL;
			goto out_unlock;
		}
		s->tlsctx_count--;
	} else if (at < 0 ||
		   (!old && s->tlsctx_count >= PLABEL_TLSCTX_PROCS &&
		    !plabel_tlsctx_reap(s, tab, &dead))) {
		ret = -ENOSPC;
		goto out_unlock;
	} else if (!old) {
		s->tlsctx_count++;
	}
	rcu_assign_pointer(tab[at], e);
	e = NULL;
out_unlock:
	mutex_unlock(&s->tlsctx_lock);
	if (old || dead) {
		/* no record writer still looks at them */
		synchronize_rcu();
		if (old)
			plabel_tlsctx_put_entry(old);
		while (dead) {
			old = dead;
			dead = dead->dead;
			plabel_tlsctx_put_entry(old);
		}
	}
	if (e)
		plabel_tlsctx_put_entry(e);
	if (mm)
		mmdrop(mm);
	return ret;
}

static bool plabel_tlsctx_u64(u64 *v, unsigned long addr)
{
	return !copy_from_user_nofault(v, (const void __user *)addr,
				       sizeof(*v));
}

/* Where current's thread-local pointer is, or 0. */
static unsigned long plabel_tlsctx_var(const struct plabel_tlsctx *e)
{
	unsigned long tp = x86_fsbase_read_cpu();
	u64 dtv, n, block;

	if (!tp)
		return 0;
	if (!(e->flags & PLABEL_TLSCTX_DTV))
		return tp + e->offset;
	/* glibc: tcbhead_t.dtv at tp + 8 points past the count entry */
	if (!plabel_tlsctx_u64(&dtv, tp + 8) || dtv < 16 ||
	    !plabel_tlsctx_u64(&n, dtv - 16) || e->module > n ||
	    !plabel_tlsctx_u64(&block, dtv + 16 * e->module))
		return 0;
	/* 0 or -1 (TLS_DTV_UNALLOCATED): not allocated in this thread */
	if (!block || block == ~0ULL)
		return 0;
	return block + e->offset;
}

/* The OTEP 4947 record at p: its head when valid, then attrs-data. */
static void plabel_tlsctx_otel(struct plabel_wr *w, unsigned long p,
			       u32 flags, struct plabel_rec_tlsctx *h)
{
	u8 head[PLABEL_OTEL_HEAD];
	u16 size;
	u32 n;

	if (copy_from_user_nofault(head, (const void __user *)p, sizeof(head)))
		return;
	/* valid: 1, anything else means not (now) */
	if (head[PLABEL_OTEL_VALID] != 1)
		return;
	memcpy(&size, head + PLABEL_OTEL_SIZE, sizeof(size));
	plabel_wr_put(w, head, sizeof(head));
	h->len = sizeof(head);
	if (flags & PLABEL_TLSCTX_HEAD)
		return;
	n = min_t(u32, size, PLABEL_TLSCTX_BYTES - sizeof(head));
	n = plabel_wr_put_user(w, p + sizeof(head), n);
	h->len += n;
	if (n < size)
		h->flags |= PLABEL_TLSCTX_PARTIAL;
}

/* custom-labels v1: the set at p, each label as key_len, value_len, bytes */
static void plabel_tlsctx_custom(struct plabel_wr *w, unsigned long p,
				 struct plabel_rec_tlsctx *h)
{
	struct {
		u64 storage, count, capacity;
	} set;
	struct {
		u64 key_len, key, value_len, value;
	} l;
	u32 i;

	if (copy_from_user_nofault(&set, (const void __user *)p, sizeof(set)) ||
	    !set.storage)
		return;
	if (set.count > PLABEL_TLSCTX_LABELS) {
		set.count = PLABEL_TLSCTX_LABELS;
		h->flags |= PLABEL_TLSCTX_PARTIAL;
	}
	for (i = 0; i < set.count; i++) {
		unsigned long at = set.storage + i * sizeof(l);
		u32 mark = w->len;
		u16 lens[2];

		if (copy_from_user_nofault(&l, (const void __user *)at,
					   sizeof(l))) {
			h->flags |= PLABEL_TLSCTX_PARTIAL;
			break;
		}
		if (!l.key)
			continue;
		if (!l.value || l.key_len > PLABEL_MAX_KEY_LEN ||
		    l.value_len > PLABEL_TLSCTX_BYTES ||
		    h->len + sizeof(lens) + l.key_len + l.value_len >
		    PLABEL_TLSCTX_BYTES) {
			h->flags |= PLABEL_TLSCTX_PARTIAL;
			continue;
		}
		lens[0] = l.key_len;
		lens[1] = l.value_len;
		plabel_wr_put(w, lens, sizeof(lens));
		if (plabel_wr_put_user(w, l.key, l.key_len) != l.key_len ||
		    plabel_wr_put_user(w, l.value, l.value_len) !=
		    l.value_len) {
			/* not whole: the entry goes */
			w->len = mark;
			h->flags |= PLABEL_TLSCTX_PARTIAL;
			continue;
		}
		h->len += w->len - mark;
	}
}

/*
 * current's entry in s's table, or NULL, and the bytes its context may
 * add to a record (*room: 0 without one), for the caller to reserve;
 * interrupts off, current a user task. A record whose bytes end
 * 8-aligned (the chain, the registers) needs no padding before the
 * context; one with a stack copy has reserved up to 7 bytes more for it
 * than it uses.
 */
const struct plabel_tlsctx *plabel_tlsctx_lookup(struct plabel_session *s,
						 u32 *room)
{
	struct plabel_tlsctx __rcu **tab = READ_ONCE(s->tlsctx);
	const struct plabel_tlsctx *e;

	*room = 0;
	if (!tab || !current->mm)
		return NULL;
	e = plabel_tlsctx_find(tab, current->tgid);
	if (!e || e->mm != current->mm)
		return NULL;
	*room = ALIGN(PLABEL_TLSCTX_ROOM, 8) + 8;
	return e;
}

/*
 * Append current's thread context to the record being written, when e
 * (plabel_tlsctx_lookup()'s) says where and it has one; sets
 * PLABEL_SAMPLE_TLSCTX in *flags then.
 */
void plabel_tlsctx_emit(const struct plabel_tlsctx *e, struct plabel_wr *w,
			u32 *flags)
{
	static const u8 zeros[8];
	struct plabel_rec_tlsctx h = { 0 };
	unsigned long var;
	u32 start = w->len, at;
	u64 p;

	if (!e)
		return;
	var = plabel_tlsctx_var(e);
	if (!var || !plabel_tlsctx_u64(&p, var) || !p)
		return;
	plabel_wr_put(w, zeros, ALIGN(start, 8) - start);
	at = w->len;
	h.format = e->format;
	plabel_wr_skip(w, sizeof(h));
	if (e->format == PLABEL_TLSCTX_OTEL_V1)
		plabel_tlsctx_otel(w, p, e->flags, &h);
	else
		plabel_tlsctx_custom(w, p, &h);
	if (!h.len && !(h.flags & PLABEL_TLSCTX_PARTIAL)) {
		/* no context: the record goes without */
		w->len = start;
		return;
	}
	plabel_wr_patch(w, at, &h, sizeof(h));
	*flags |= PLABEL_SAMPLE_TLSCTX;
}
