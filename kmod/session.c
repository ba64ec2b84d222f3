// SPDX-License-Identifier: GPL-2.0
/*
 * Profiling sessions: start/stop, the record stream (read/poll), thread
 * creation and exec records, mapping records, target filtering.
 *
 * Up to kernel.plabel.max_sessions sessions run at once, each with its own
 * options, target, counters, rings and reader; a session belongs to the
 * open file that started it and lives until that file is released (a file
 * runs at most one session). Records about a process (THREAD, EXEC, COMM,
 * MMAP, LABELSET) go to every session that follows it, each through its
 * own rings, so a reader that falls behind loses only its own records.
 * Locking is described in session.h. What runs where:
 *   - the overflow handler (sample.c), hard irq: plabel_session_wants(),
 *     plabel_session_emit_labelset(), plabel_session_note_mm(),
 *     plabel_session_committed();
 *   - on_clone/on_exec, tracepoint probes (preemption off, may not sleep):
 *     the same, with interrupts disabled around ring writes;
 *   - the tick (delayed work, every PLABEL_TICK_MS; for a WATERMARK
 *     session once a second while nothing waits, brought nearer by the
 *     kick irq_work): walks the mappings of the mms the handler queued;
 *     every PLABEL_WAKE_MS wakes the reader if records wait;
 *   - the wake irq_work: wakes a sleeping reader when a ring is half full;
 *   - the sync callback (RCU, softirq): publishes the time before which
 *     every ring holds all its records, for SYNC records;
 *   - the HEAP_ALLOC and HEAP_FREE ioctls (heap.c), process context:
 *     plabel_session_on_alloc() and plabel_session_on_free(), each ring
 *     write with interrupts disabled, as on_clone's.
 * A reader is woken rarely: each wake-up costs the profiled programs a
 * read's worth of CPU time, whether one record waits or thousands.
 */
#include <linux/bsearch.h>
#include <linux/capability.h>
#include <linux/debugfs.h>
#include <linux/fs_struct.h>
#include <linux/hash.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/random.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <asm/unwind.h>

#include "session.h"

static DEFINE_MUTEX(plabel_session_mutex);
/*
 * The sessions' ticks and the off-CPU probe's linger: one queue for every
 * queueing of a work item, the kernel's promise that it does not run on
 * two CPUs at once holds only for that (schedule_delayed_work() has moved
 * from system_wq to another queue in newer kernels).
 */
struct workqueue_struct *plabel_wq;
/*
 * The running sessions: a list the tracepoint probes walk under RCU, and
 * the slots they hold (bit i: slot i is taken), changed under
 * plabel_session_mutex, which also guards the count.
 */
static LIST_HEAD(plabel_sessions);
static DECLARE_BITMAP(plabel_slots, PLABEL_MAX_SESSIONS);
static unsigned int plabel_nr_sessions;
/*
 * Sessions started whose file is still open, running or stopped: their
 * rings and tables stay allocated until the release, so max_sessions
 * bounds these, not only the running ones.
 */
static unsigned int plabel_nr_held;
/*
 * The last generation given to a session in each slot, under
 * plabel_session_mutex. A set's entry for a slot equal to the running
 * session's generation says that session carried it; 65535 sessions in
 * one slot go by before the count starts over, and only then does a walk
 * over every set clear their entries for the slot (a start with 10^6 sets
 * would otherwise stall interning for tens of milliseconds each time).
 */
static u16 plabel_slot_gen[PLABEL_MAX_SESSIONS];

/* Under plabel_session_mutex, with no session in slot: a new generation. */
static u16 plabel_slot_next_gen(unsigned int slot)
{
	if (plabel_slot_gen[slot] == U16_MAX) {
		plabel_sets_forget_slot(slot);
		plabel_slot_gen[slot] = 0;
	}
	return ++plabel_slot_gen[slot];
}

/* Each running session, under rcu_read_lock(). */
#define plabel_for_each_session(s)	\
	list_for_each_entry_rcu(s, &plabel_sessions, node)

/* Targets */

static int plabel_pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

static u32 plabel_tree_slot(pid_t tgid)
{
	return hash_32((u32)tgid, ilog2(PLABEL_TREE_SLOTS));
}

/*
 * The TREE table: open addressing with linear probing over at most
 * PLABEL_TREE_PROBE slots, lock-free. A process leaves it when its last
 * thread exits: its slot becomes a tombstone, which a later add may take
 * again, so the table holds the processes alive now, not all there ever
 * were. Concurrent adds of one tgid may leave two copies; removal clears
 * every copy.
 */
static bool plabel_tree_has(struct plabel_session *s, pid_t tgid)
{
	u32 i = plabel_tree_slot(tgid), n;

	for (n = 0; n < PLABEL_TREE_PROBE; n++) {
		pid_t v = READ_ONCE(s->tree[i]);

		if (v == tgid)
			return true;
		if (!v)
			return false;
		i = (i + 1) & (PLABEL_TREE_SLOTS - 1);
	}
	return false;
}

/* Any context. */
static void plabel_tree_add(struct plabel_session *s, pid_t tgid)
{
	u32 i = plabel_tree_slot(tgid), n;

	if (plabel_tree_has(s, tgid))
		return;
	if (atomic_inc_return(&s->tree_count) > PLABEL_TREE_MAX)
		goto err_full;
	for (n = 0; n < PLABEL_TREE_PROBE; n++) {
		pid_t v = READ_ONCE(s->tree[i]);

		if ((v == 0 || v == PLABEL_TREE_TOMB) &&
		    cmpxchg(&s->tree[i], v, tgid) == v)
			return;
		if (v == tgid)
			break;	/* added meanwhile */
		i = (i + 1) & (PLABEL_TREE_SLOTS - 1);
	}
	if (n < PLABEL_TREE_PROBE) {
		atomic_dec(&s->tree_count);
		return;
	}
err_full:
	atomic_dec(&s->tree_count);
	this_cpu_inc(plabel_stats.tree_full);
	atomic64_inc(&s->lost_procs);
}

/* Any context: tgid has exited. */
static void plabel_tree_remove(struct plabel_session *s, pid_t tgid)
{
	u32 i = plabel_tree_slot(tgid), n;

	for (n = 0; n < PLABEL_TREE_PROBE; n++) {
		pid_t v = READ_ONCE(s->tree[i]);

		if (!v)
			return;
		if (v == tgid &&
		    cmpxchg(&s->tree[i], tgid, PLABEL_TREE_TOMB) == tgid)
			atomic_dec(&s->tree_count);
		i = (i + 1) & (PLABEL_TREE_SLOTS - 1);
	}
}

/*
 * PLABEL_START_AT_EXEC: current exec'ed; a listed process joins the tree
 * at its first exec (a later process with its id does not).
 */
static void plabel_tree_join(struct plabel_session *s)
{
	pid_t tgid = current->tgid;
	pid_t *p = bsearch(&tgid, s->pids, s->npids, sizeof(pid_t),
			   plabel_pid_cmp);
	u32 i;

	if (!p)
		return;
	i = p - s->pids;
	if (s->exec_pids[i] == task_tgid(current) &&
	    !test_and_set_bit(i, s->joined))
		plabel_tree_add(s, tgid);
}

bool plabel_session_wants(struct plabel_session *s, pid_t tgid)
{
	switch (s->target) {
	case PLABEL_TARGET_PIDS:
		return bsearch(&tgid, s->pids, s->npids, sizeof(pid_t),
			       plabel_pid_cmp);
	case PLABEL_TARGET_TREE:
		return plabel_tree_has(s, tgid);
	default:
		return true;
	}
}

/* Records */

/* Called after a ring write, interrupts off. */
void plabel_session_committed(struct plabel_session *s, struct plabel_ring *r)
{
	u32 used = r->head - READ_ONCE(r->tail);

	if (used >= r->size / 2 && wq_has_sleeper(&s->wq))
		irq_work_queue(&s->wake_work);
}

bool plabel_session_emit_labelset(struct plabel_session *s,
				  struct plabel_ring *r,
				  struct plabel_set *set)
{
	struct plabel_rec_labelset rec = {
		.hdr.type = PLABEL_REC_LABELSET,
		.id = set->id,
		.count = set->count,
		.uid = from_kuid_munged(&init_user_ns, set->owner),
	};
	struct plabel_wr w;
	u32 size = sizeof(rec), i;

	for (i = 0; i < set->count; i++)
		size += sizeof(struct plabel_rec_label) +
			set->labels[i].key_len + set->labels[i].value_len;
	if (!plabel_wr_begin(&w, r, ALIGN(size, 8)))
		return false;
	plabel_wr_put(&w, &rec, sizeof(rec));
	for (i = 0; i < set->count; i++) {
		struct plabel_rec_label l = {
			.key_len = set->labels[i].key_len,
			.value_len = set->labels[i].value_len,
		};

		plabel_wr_put(&w, &l, sizeof(l));
	}
	for (i = 0; i < set->count; i++) {
		plabel_wr_put(&w, set->labels[i].key, set->labels[i].key_len);
		plabel_wr_put(&w, set->labels[i].value,
			      set->labels[i].value_len);
	}
	plabel_wr_commit(&w);
	return true;
}

/*
 * A WATERMARK session's tick comes once a second while it has nothing to
 * walk: a walk queued or news brings it to within PLABEL_TICK_MS (the
 * kicked bit, until the tick runs, makes that one irq_work a tick at
 * most). Any context, NMI too.
 */
static void plabel_session_kick(struct plabel_session *s)
{
	if ((s->start_flags & PLABEL_START_WATERMARK) &&
	    !test_and_set_bit(0, &s->kicked))
		irq_work_queue(&s->kick_work);
}

static void plabel_kick_fn(struct irq_work *work)
{
	struct plabel_session *s = container_of(work, struct plabel_session,
						kick_work);
	unsigned long soon = msecs_to_jiffies(PLABEL_TICK_MS);

	/*
	 * Not later than it is: queued to run, or due within a tick
	 * (racy, and then one tick is late by up to a tick, no more).
	 */
	if (delayed_work_pending(&s->tick) &&
	    (!timer_pending(&s->tick.timer) ||
	     time_before_eq(READ_ONCE(s->tick.timer.expires), jiffies + soon)))
		return;
	mod_delayed_work(plabel_wq, &s->tick, soon);
}

/*
 * Queue a scan of current's executable mappings unless this CPU scanned the
 * same mm recently: with as many executable pages (mm->exec_vm: a dlopen()
 * or dlclose() changes it, a new thread's stack does not) and no exec
 * since. Interrupts off.
 * When every pending slot is taken nothing is remembered, so a later sample
 * tries again.
 */
void plabel_session_note_mm(struct plabel_session *s, struct plabel_cpu *c,
			    u64 time_ns)
{
	struct mm_struct *mm = current->mm;
	unsigned long exec_vm = READ_ONCE(mm->exec_vm);
	u32 seq = atomic_read(&s->exec_seq);
	struct plabel_mm_ref *e, *free;
	unsigned int i;

	for (i = 0; i < PLABEL_MM_CACHE; i++) {
		e = &c->cache[i];
		if (e->mm == mm && e->tgid == current->tgid &&
		    e->exec_vm == exec_vm && e->seq == seq)
			return;
	}
	for (i = 0, free = NULL; i < PLABEL_MM_PENDING; i++) {
		struct mm_struct *pm;

		e = &c->pending[i];
		/* pairs with the release that frees the slot */
		pm = smp_load_acquire(&e->mm);
		/*
		 * Queued already: its walk reads the mappings as they are
		 * then. A process that keeps changing its mappings so takes
		 * one slot, not all of them.
		 */
		if (pm == mm && e->tgid == current->tgid)
			return;
		if (!pm && !free)
			free = e;
	}
	if (!free || !mmget_not_zero(mm))
		return;
	e = free;
	e->tgid = current->tgid;
	e->time_ns = time_ns;
	e->task = get_task_struct(current);
	/* tgid, time and task before mm: pairs with the scanner's acquire */
	smp_store_release(&e->mm, mm);
	plabel_session_kick(s);

	e = &c->cache[c->cache_next++ % PLABEL_MM_CACHE];
	e->mm = mm;
	e->tgid = current->tgid;
	e->exec_vm = exec_vm;
	e->seq = seq;
}

/*
 * A followed process exec'ed, was created or had its executable mappings
 * reported: a WATERMARK reader hears of it at the next tick, for what it
 * looks up by process (thread contexts). Not at once: a program that
 * forks or execs thousands of times a second would have it read as
 * often; the tick makes that 20 reads a second at most. After the
 * records are written; any context but NMI.
 */
static void plabel_session_news(struct plabel_session *s)
{
	if (!(s->start_flags & PLABEL_START_WATERMARK))
		return;
	/*
	 * After the record: a reader that clears the news and then looks
	 * at the rings (plabel_session_copy()) either finds the record or
	 * leaves the news set; both sides need a full barrier for that.
	 */
	smp_mb();
	WRITE_ONCE(s->news, true);
}

static void plabel_emit_mmap(struct plabel_session *s, pid_t tgid,
			     u64 time_ns, struct vm_area_struct *vma,
			     const char *path, u32 path_len)
{
	struct plabel_rec_mmap rec = {
		.hdr.type = PLABEL_REC_MMAP,
		.time_ns = time_ns,
		.pid = tgid,
		.path_len = path_len,
		.start = vma->vm_start,
		.end = vma->vm_end,
		.offset = (u64)vma->vm_pgoff << PAGE_SHIFT,
	};
	struct plabel_ring *r;
	struct plabel_wr w;
	unsigned long flags;

	local_irq_save(flags);
	r = &s->cpu[smp_processor_id()]->ring;
	if (plabel_wr_begin(&w, r, ALIGN(sizeof(rec) + path_len, 8))) {
		plabel_wr_put(&w, &rec, sizeof(rec));
		plabel_wr_put(&w, path, path_len);
		plabel_wr_commit(&w);
		plabel_session_committed(s, r);
	}
	local_irq_restore(flags);
}

/*
 * The scanner runs in a kworker, whose root directory is the system's: a
 * path d_path() gives there is made relative to the sampled task's root
 * directory (chroot) when it lies below it, so paths are as the sampled
 * process saw them (when the whole process is gone, they stay as the
 * system's root sees them). Returns the root's path length, 0 for "/" or
 * none.
 */
static size_t plabel_task_root(struct plabel_session *s,
			       struct task_struct *task, char **rootp)
{
	struct task_struct *t;
	struct path root;
	bool have = false;
	char *p;

	/* the sampled thread may be gone (exit drops ->fs): any will do */
	rcu_read_lock();
	for_each_thread(task, t) {
		task_lock(t);
		if (t->fs) {
			get_fs_root(t->fs, &root);
			have = true;
		}
		task_unlock(t);
		if (have)
			break;
	}
	rcu_read_unlock();
	if (!have)
		return 0;
	p = d_path(&root, s->root_buf, PATH_MAX);
	path_put(&root);
	if (IS_ERR(p) || !strcmp(p, "/"))
		return 0;
	*rootp = p;
	return strlen(p);
}

/*
 * Process context: MMAP records for each executable file mapping of mm,
 * stamped with the time of the record that queued the walk: the image
 * that record ran in, even when the process has exec'ed since. Returns
 * whether there were any.
 */
static bool plabel_scan_mm(struct plabel_session *s, struct mm_struct *mm,
			   struct task_struct *task, pid_t tgid, u64 time_ns)
{
	struct vm_area_struct *vma;
	char *root = NULL;
	u32 maps = 0;
	size_t rlen;
	PLABEL_VMA_ITERATOR(vmi, mm);

	rlen = plabel_task_root(s, task, &root);
	mmap_read_lock(mm);
	plabel_for_each_vma(vmi, vma) {
		char *path;

		if (!(vma->vm_flags & VM_EXEC) || !vma->vm_file)
			continue;
		if (++maps > PLABEL_SCAN_MAPS) {
			/* the rest is counted, not reported */
			atomic64_inc(&s->lost_maps);
			continue;
		}
		path = d_path(&vma->vm_file->f_path, s->path_buf, PATH_MAX);
		if (IS_ERR(path))
			continue;
		if (rlen && !strncmp(path, root, rlen) && path[rlen] == '/')
			path += rlen;
		plabel_emit_mmap(s, tgid, time_ns, vma, path,
				 s->path_buf + PATH_MAX - 1 - path);
	}
	mmap_read_unlock(mm);
	this_cpu_inc(plabel_stats.mm_scans);
	return maps;
}

/*
 * Whether mm was walked less than PLABEL_SCAN_GAP_MS ago (for the same
 * process and exec generation); if not, note that it is walked now, and
 * in *news whether its executable mappings may have changed since the
 * last walk (a first walk, or another mm->exec_vm). A process that keeps
 * changing its executable mappings is walked at that rate at most,
 * however often its samples ask. Process context, one caller at a time.
 */
static bool plabel_scan_too_soon(struct plabel_session *s,
				 struct mm_struct *mm, pid_t tgid, bool *news)
{
	u64 now = ktime_get_ns(), gap = PLABEL_SCAN_GAP_MS * NSEC_PER_MSEC;
	unsigned long exec_vm = READ_ONCE(mm->exec_vm);
	u32 seq = atomic_read(&s->exec_seq);
	struct plabel_scan_hist *h, *oldest = &s->scan_hist[0];
	unsigned int i;

	for (i = 0; i < PLABEL_SCAN_HIST; i++) {
		h = &s->scan_hist[i];
		if (h->mm == mm && h->tgid == tgid && h->seq == seq) {
			if (now - h->when < gap)
				return true;
			h->when = now;
			*news = h->exec_vm != exec_vm;
			h->exec_vm = exec_vm;
			return false;
		}
		if (h->when < oldest->when)
			oldest = h;
	}
	*oldest = (struct plabel_scan_hist) {
		.mm = mm, .tgid = tgid, .seq = seq, .when = now,
		.exec_vm = exec_vm,
	};
	*news = true;
	return false;
}

/*
 * Process context; one caller at a time (the tick, or stop after it). The
 * tick (budget) walks PLABEL_SCAN_BUDGET_US a tick on average: each walk's
 * time is a debt, each tick pays off one budget, and a tick in debt walks
 * nothing, so however long one walk takes the walker's share of a CPU
 * stays at a tenth. What is too soon or over budget waits queued for a
 * later tick; stop walks everything queued. Returns whether walks may
 * still wait.
 */
static bool plabel_scan_pending(struct plabel_session *s, bool budget)
{
	s64 pay = PLABEL_SCAN_BUDGET_US * NSEC_PER_USEC;
	u64 t0 = ktime_get_ns(), t;
	unsigned int n, cpu, i;
	bool news = false, left = false;

	if (budget) {
		/* no saving up beyond one tick's budget */
		s->scan_debt = max_t(s64, s->scan_debt - pay, -pay);
		if (s->scan_debt >= 0)
			return true;
	}

	for (n = 0, cpu = s->scan_cpu; n < nr_cpu_ids;
	     n++, cpu = (cpu + 1) % nr_cpu_ids) {
		struct plabel_cpu *c;

		if (!cpu_possible(cpu))
			continue;
		c = s->cpu[cpu];
		for (i = 0; i < PLABEL_MM_PENDING; i++) {
			struct plabel_mm_ref *e = &c->pending[i];
			/* pairs with the release in plabel_session_note_mm() */
			struct mm_struct *mm = smp_load_acquire(&e->mm);

			if (!mm)
				continue;
			t = ktime_get_ns();
			if (budget && s->scan_debt + (s64)(t - t0) >= 0) {
				s->scan_cpu = cpu;
				left = true;
				goto out;
			}
			if (budget &&
			    plabel_scan_too_soon(s, mm, e->tgid, &news)) {
				left = true;
				continue;
			}
			/*
			 * A session owner that exits releases its file after
			 * exit_fs(): d_path() needs current->fs, and no one
			 * reads this session's records any more.
			 */
			if (current->fs &&
			    plabel_scan_mm(s, mm, e->task, e->tgid,
					   e->time_ns) && news)
				plabel_session_news(s);
			mmput(mm);
			put_task_struct(e->task);
			/* done with the slot: pairs with the acquire in note_mm */
			smp_store_release(&e->mm, NULL);
			cond_resched();
		}
	}
	s->scan_cpu = 0;
out:
	t = ktime_get_ns() - t0;
	if (budget)
		s->scan_debt += t;
	this_cpu_add(plabel_stats.scan_ns, t);
	return left;
}

static bool plabel_session_has_data(struct plabel_session *s)
{
	unsigned int cpu;

	if (!s->stream_sent)
		return true;
	for_each_possible_cpu(cpu) {
		struct plabel_ring *r = &s->cpu[cpu]->ring;

		if (!plabel_ring_empty(r) ||
		    READ_ONCE(r->lost) != r->lost_seen ||
		    READ_ONCE(r->lost_periods) != r->lost_periods_seen)
			return true;
	}
	return atomic64_read(&s->lost_maps) != s->lost_maps_seen ||
	       atomic64_read(&s->lost_procs) != s->lost_procs_seen;
}

/*
 * Whether a reader has something to read now: any record, or with
 * PLABEL_START_WATERMARK a ring half full, a loss or news of a process.
 */
static bool plabel_session_ready(struct plabel_session *s)
{
	unsigned int cpu;

	if (!(s->start_flags & PLABEL_START_WATERMARK))
		return plabel_session_has_data(s);
	if (!s->stream_sent || READ_ONCE(s->news))
		return true;
	for_each_possible_cpu(cpu) {
		struct plabel_ring *r = &s->cpu[cpu]->ring;

		/* a CPU without a ring (offline at the start) has none */
		if ((smp_load_acquire(&r->data) &&
		     READ_ONCE(r->head) - READ_ONCE(r->tail) >= r->size / 2) ||
		    READ_ONCE(r->lost) != r->lost_seen ||
		    READ_ONCE(r->lost_periods) != r->lost_periods_seen)
			return true;
	}
	return atomic64_read(&s->lost_maps) != s->lost_maps_seen ||
	       atomic64_read(&s->lost_procs) != s->lost_procs_seen;
}

static void plabel_wake_fn(struct irq_work *work)
{
	struct plabel_session *s = container_of(work, struct plabel_session,
						wake_work);

	wake_up_interruptible(&s->wq);
}

/*
 * A grace period after the tick read sync_start: every writer that had
 * interrupts off then (and every record is stamped and committed in one
 * such stretch, on its ring's CPU) has committed since.
 */
static void plabel_sync_fn(struct rcu_head *head)
{
	struct plabel_session *s = container_of(head, struct plabel_session,
						sync_rcu);

	/* pairs with the acquire in plabel_session_copy() */
	smp_store_release(&s->synced_ns, s->sync_start);
	/* the last touch of s: the tick may queue the head again */
	smp_store_release(&s->sync_pending, false);
}

/* An idle WATERMARK tick's delay: up to its next wake-up or grace period */
static unsigned int plabel_idle_ms(struct plabel_session *s, u64 now)
{
	u64 next = min(s->wake_next, s->sync_next);
	unsigned int ms = PLABEL_IDLE_TICK_MS;

	if (next > now)
		ms = min_t(u64, ms, div_u64(next - now, NSEC_PER_MSEC) + 1);
	return max_t(unsigned int, ms, PLABEL_TICK_MS);
}

static void plabel_tick_fn(struct work_struct *work)
{
	struct plabel_session *s = container_of(to_delayed_work(work),
						struct plabel_session, tick);
	bool mark = s->start_flags & PLABEL_START_WATERMARK;
	u64 now = ktime_get_ns();
	bool left;

	/*
	 * A kick from here on brings another tick: the walks it asks for
	 * may come after the look below (pairs with the kick's atomic).
	 */
	clear_bit(0, &s->kicked);
	smp_mb__after_atomic();
	/*
	 * A grace period each tick keeps SYNC records some 50 to 100 ms
	 * behind; a WATERMARK reader, which reads rarely, does with one a
	 * second (each costs the CPUs the RCU kthread's turns)
	 */
	if ((!mark || now >= s->sync_next) &&
	    !smp_load_acquire(&s->sync_pending)) {
		s->sync_next = now + NSEC_PER_SEC;
		s->sync_start = now;
		WRITE_ONCE(s->sync_pending, true);
		plabel_call_rcu_hurry(&s->sync_rcu, plabel_sync_fn);
	}
	left = plabel_scan_pending(s, true);
	/* news (plabel_session_news()): each tick; wq_has_sleeper() orders */
	if (READ_ONCE(s->news) && wq_has_sleeper(&s->wq))
		wake_up_interruptible(&s->wq);
	if (now >= s->wake_next) {
		s->wake_next = now + PLABEL_WAKE_MS * NSEC_PER_MSEC;
		if (wq_has_sleeper(&s->wq) && plabel_session_ready(s))
			wake_up_interruptible(&s->wq);
	}
	/*
	 * Nothing to walk: a WATERMARK tick has only its grace period and
	 * its look at the rings left, once a second, until a kick. Queued
	 * already (a kick), this changes nothing.
	 */
	queue_delayed_work(plabel_wq, &s->tick,
			   msecs_to_jiffies(mark && !left ?
					    plabel_idle_ms(s, now) :
					    PLABEL_TICK_MS));
}

/* Tracepoint hooks (task.c) */

/*
 * A THREAD record for current creating child, whose stack ends at
 * stack_top (0: not known). Returns whether the session samples the child.
 */
bool plabel_session_on_clone(struct task_struct *child, u64 clone_flags,
			     struct plabel_set *set, unsigned long stack_top)
{
	struct plabel_session *s;
	unsigned long flags;
	bool wants = false;

	rcu_read_lock();
	plabel_for_each_session(s) {
		if (!plabel_session_wants(s, current->tgid))
			continue;
		if (s->target == PLABEL_TARGET_TREE &&
		    !(clone_flags & CLONE_THREAD))
			plabel_tree_add(s, child->tgid);
		if (s->record & PLABEL_RECORD_THREADS) {
			local_irq_save(flags);
			plabel_sample_thread(s, child, clone_flags, set,
					     stack_top);
			local_irq_restore(flags);
			if (!(clone_flags & CLONE_THREAD)) {
				plabel_session_news(s);
				plabel_session_kick(s);
			}
		}
		if (plabel_session_wants(s, child->tgid))
			wants = true;
	}
	rcu_read_unlock();
	return wants;
}

/*
 * Write the fixed-size record rec (size bytes, a multiple of 8) to this
 * CPU's ring, *time_ns (inside rec) stamped where it is written: readers
 * rely on the two being close. Any context but NMI.
 */
static void plabel_emit_stamped(struct plabel_session *s, void *rec,
				u32 size, u64 *time_ns)
{
	struct plabel_ring *r;
	struct plabel_wr w;
	unsigned long flags;

	local_irq_save(flags);
	*time_ns = ktime_get_ns();
	r = &s->cpu[smp_processor_id()]->ring;
	if (plabel_wr_begin(&w, r, size)) {
		plabel_wr_put(&w, rec, size);
		plabel_wr_commit(&w);
		plabel_session_committed(s, r);
	}
	local_irq_restore(flags);
}

void plabel_session_on_exec(void)
{
	struct plabel_rec_exec rec = {
		.hdr.type = PLABEL_REC_EXEC,
		.pid = current->tgid,
		.tid = current->pid,
	};
	struct plabel_session *s;

	strscpy_pad(rec.comm, current->comm, sizeof(rec.comm));
	rcu_read_lock();
	plabel_for_each_session(s) {
		unsigned long flags;

		/*
		 * A process joining at this exec: no sample of it on this
		 * CPU between the join and the EXEC record's stamp, so none
		 * of its samples is stamped before that.
		 */
		local_irq_save(flags);
		if (s->start_flags & PLABEL_START_AT_EXEC)
			plabel_tree_join(s);
		if (!plabel_session_wants(s, current->tgid)) {
			local_irq_restore(flags);
			continue;
		}
		atomic_inc(&s->exec_seq);
		plabel_emit_stamped(s, &rec, sizeof(rec), &rec.time_ns);
		local_irq_restore(flags);
		plabel_session_news(s);
		plabel_session_kick(s);
	}
	rcu_read_unlock();
}

/* The last thread of current's process is exiting: no TREE follows it. */
void plabel_session_on_exit(void)
{
	struct plabel_session *s;

	rcu_read_lock();
	plabel_for_each_session(s)
		if (s->target == PLABEL_TARGET_TREE)
			plabel_tree_remove(s, current->tgid);
	rcu_read_unlock();
}

/*
 * task was renamed to comm: a COMM record when the session follows it.
 * From the task_rename tracepoint, with task's lock held (a spinlock, so
 * no sleeping) and task->comm still the old name; task may be another
 * than current (a write to /proc/PID/task/TID/comm).
 */
void plabel_session_on_comm(struct task_struct *task, const char *comm)
{
	struct plabel_rec_comm rec = {
		.hdr.type = PLABEL_REC_COMM,
		.pid = task->tgid,
		.tid = task->pid,
	};
	struct plabel_session *s;

	strscpy_pad(rec.comm, comm, sizeof(rec.comm));
	rcu_read_lock();
	plabel_for_each_session(s)
		if (plabel_session_wants(s, task->tgid))
			plabel_emit_stamped(s, &rec, sizeof(rec),
					    &rec.time_ns);
	rcu_read_unlock();
}

/* Heap records */

/*
 * Under plabel_session_mutex, after the running list changed: the heap
 * page says the smallest interval of the running heap sessions.
 */
static void plabel_session_heap_interval(void)
{
	struct plabel_session *s;
	u64 iv = 0;

	list_for_each_entry(s, &plabel_sessions, node)
		if ((s->record & PLABEL_RECORD_HEAP) &&
		    (!iv || s->heap_bytes < iv))
			iv = s->heap_bytes;
	plabel_heap_set_interval(iv);
}

int plabel_session_on_alloc(const struct plabel_heap_args *a)
{
	struct plabel_session *s;
	unsigned long flags;
	int n = 0;

	rcu_read_lock();
	plabel_for_each_session(s) {
		if (!(s->record & PLABEL_RECORD_HEAP) ||
		    !plabel_session_wants(s, current->tgid))
			continue;
		local_irq_save(flags);
		if (plabel_sample_alloc(s, a))
			n++;
		local_irq_restore(flags);
	}
	rcu_read_unlock();
	return n;
}

void plabel_session_on_free(u64 addr)
{
	struct plabel_session *s;
	unsigned long flags;

	rcu_read_lock();
	plabel_for_each_session(s) {
		if (!(s->record & PLABEL_RECORD_HEAP) ||
		    !plabel_session_wants(s, current->tgid))
			continue;
		local_irq_save(flags);
		plabel_sample_free(s, addr);
		local_irq_restore(flags);
	}
	rcu_read_unlock();
}

/* prev's kernel chain at a switch, written from the probe (interrupts off) */
static DEFINE_PER_CPU(u64 [PLABEL_KSTACK_MAX], plabel_switch_ips);

/*
 * current's kernel chain from the caller of the probe (its frame at
 * kfirst) on, into ips: at most PLABEL_KSTACK_MAX addresses. The unwinder
 * starts where it is called and walks to kfirst, skipping every frame on
 * the way; under ORC each costs a table lookup, more in a module. Walked
 * here, inlined into the function the probe calls last (as a tail call,
 * in the probe's own place), it skips two frames; from the record writer
 * it skipped six, and those were most of an off-CPU record's cost.
 */
static __always_inline u16 plabel_switch_kchain(u64 *ips, void *kfirst)
{
	struct unwind_state state;
	u16 n = 0;

	for (unwind_start(&state, current, NULL, kfirst);
	     !unwind_done(&state) && n < PLABEL_KSTACK_MAX;
	     unwind_next_frame(&state)) {
		u64 ip = unwind_get_return_address(&state);

		if (!ip)
			break;
		ips[n++] = ip;
	}
	return n;
}

/*
 * The sched_switch probe (offcpu.c), with out when prev leaves waiting,
 * in when next is a user thread: prev is current, the runqueue lock is
 * held, interrupts are off. kfirst: the probe's frame. prev's kernel
 * chain is walked once, for the first session that wants it.
 */
void plabel_session_on_switch(struct task_struct *prev,
			      struct task_struct *next, unsigned int state,
			      bool out, bool in, void *kfirst)
{
	struct plabel_session *s;
	u64 t0 = local_clock(), now = ktime_get_ns();
	u64 *kips = NULL;
	u16 nk = 0;

	rcu_read_lock();
	plabel_for_each_session(s) {
		if (!(s->record & PLABEL_RECORD_OFFCPU))
			continue;
		if (in)
			plabel_offcpu_in(s, next, now);
		if (!out || !plabel_session_wants(s, prev->tgid))
			continue;
		if ((s->record & PLABEL_RECORD_KERNEL) && !kips) {
			kips = this_cpu_ptr(plabel_switch_ips);
			nk = plabel_switch_kchain(kips, kfirst);
		}
		plabel_sample_offcpu(s, state, now, kips, nk);
	}
	rcu_read_unlock();
	__this_cpu_add(plabel_stats.switch_ns, local_clock() - t0);
	__this_cpu_inc(plabel_stats.switch_calls);
}

/* Session lifetime */

static void plabel_session_free(struct plabel_session *s)
{
	unsigned int cpu;
	u32 i;

	if (s->cpu) {
		for_each_possible_cpu(cpu) {
			if (!s->cpu[cpu])
				continue;
			plabel_ring_free(&s->cpu[cpu]->ring);
			kfree(s->cpu[cpu]);
		}
		kfree(s->cpu);
	}
	kfree(s->path_buf);
	kfree(s->root_buf);
	plabel_offcpu_free(s);
	plabel_tlsctx_free(s);
	kvfree(s->tree);
	bitmap_free(s->joined);
	for (i = 0; s->exec_pids && i < s->npids; i++)
		put_pid(s->exec_pids[i]);
	kfree(s->exec_pids);
	kfree(s->pids);
	kfree(s);
}

static u32 plabel_ring_bytes(void)
{
	u64 bytes = (u64)READ_ONCE(plabel_ring_kb) * 1024;

	bytes = clamp_t(u64, bytes, PLABEL_RING_MIN, PLABEL_RING_MAX);
	return roundup_pow_of_two(bytes);
}

static int plabel_session_args(struct plabel_session *s,
			       struct plabel_session_start_args *a)
{
	u32 v;

	if ((a->flags & ~(PLABEL_START_WATERMARK | PLABEL_START_AT_EXEC)) ||
	    ((a->flags & PLABEL_START_AT_EXEC) &&
	     a->target != PLABEL_TARGET_TREE) ||
	    a->pad || a->pad2 || a->target > PLABEL_TARGET_TREE ||
	    a->callchain > PLABEL_CALLCHAIN_DWARF ||
	    (a->record & ~(PLABEL_RECORD_CPU | PLABEL_RECORD_THREADS |
			   PLABEL_RECORD_KERNEL | PLABEL_RECORD_OFFCPU |
			   PLABEL_RECORD_HEAP)))
		return -EINVAL;
	if (a->offcpu_min_us > PLABEL_MAX_OFFCPU_MIN_US ||
	    (a->offcpu_min_us && !(a->record & PLABEL_RECORD_OFFCPU)))
		return -EINVAL;
	if ((a->record & PLABEL_RECORD_HEAP) ?
	    a->heap_bytes > PLABEL_HEAP_BYTES_MAX : a->heap_bytes)
		return -EINVAL;
	if (a->target == PLABEL_TARGET_ALL ? a->npids || a->pids :
	    !a->npids || a->npids > PLABEL_MAX_PIDS)
		return -EINVAL;
	if (a->sample_hz > PLABEL_HZ_MAX || a->max_stack > PLABEL_STACK_MAX ||
	    a->stack_size > PLABEL_SNAP_MAX || (a->stack_size & 7))
		return -EINVAL;

	s->target = a->target;
	s->start_flags = a->flags;
	s->callchain = a->callchain;
	s->record = a->record ?: PLABEL_RECORD_CPU | PLABEL_RECORD_THREADS;
	v = a->sample_hz ?: READ_ONCE(plabel_sample_hz);
	s->hz = clamp_t(u32, v, 1, PLABEL_HZ_MAX);
	s->period_ns = NSEC_PER_SEC / s->hz;
	v = a->max_stack ?: READ_ONCE(plabel_max_stack);
	s->max_stack = clamp_t(u32, v, 1, PLABEL_STACK_MAX);
	v = a->stack_size ?: READ_ONCE(plabel_stack_size);
	s->stack_size = round_down(min_t(u32, v, PLABEL_SNAP_MAX), 8);
	if (s->record & PLABEL_RECORD_HEAP)
		s->heap_bytes = a->heap_bytes ?: PLABEL_HEAP_BYTES_DEFAULT;
	v = a->offcpu_min_us ?: READ_ONCE(plabel_offcpu_min_us);
	s->offcpu_min_ns = (u64)min_t(u32, v, PLABEL_MAX_OFFCPU_MIN_US) *
			   NSEC_PER_USEC;
	return 0;
}

static int plabel_session_pids(struct plabel_session *s,
			       struct plabel_session_start_args *a)
{
	u32 i;

	if (s->target == PLABEL_TARGET_ALL)
		return 0;
	s->pids = kmalloc_array(a->npids, sizeof(pid_t), GFP_KERNEL_ACCOUNT);
	if (!s->pids)
		return -ENOMEM;
	if (copy_from_user(s->pids, u64_to_user_ptr(a->pids),
			   a->npids * sizeof(pid_t)))
		return -EFAULT;
	for (i = 0; i < a->npids; i++)
		if (s->pids[i] <= 0)
			return -EINVAL;
	sort(s->pids, a->npids, sizeof(pid_t), plabel_pid_cmp, NULL);
	s->npids = a->npids;
	if (s->target != PLABEL_TARGET_TREE)
		return 0;
	s->tree = kvcalloc(PLABEL_TREE_SLOTS, sizeof(pid_t), GFP_KERNEL_ACCOUNT);
	if (!s->tree)
		return -ENOMEM;
	if (s->start_flags & PLABEL_START_AT_EXEC) {
		/*
		 * They join at their exec (plabel_tree_join()): the processes
		 * these ids name now, not a later one given an id again.
		 */
		s->joined = bitmap_zalloc(s->npids, GFP_KERNEL_ACCOUNT);
		s->exec_pids = kcalloc(s->npids, sizeof(*s->exec_pids),
				       GFP_KERNEL_ACCOUNT);
		if (!s->joined || !s->exec_pids)
			return -ENOMEM;
		rcu_read_lock();
		for (i = 0; i < s->npids; i++)
			s->exec_pids[i] = get_pid(find_pid_ns(s->pids[i],
							      &init_pid_ns));
		rcu_read_unlock();
		return 0;
	}
	for (i = 0; i < s->npids; i++)
		plabel_tree_add(s, s->pids[i]);
	return 0;
}

static int plabel_session_alloc_cpus(struct plabel_session *s)
{
	unsigned int cpu;

	s->ring_size = plabel_ring_bytes();
	s->cpu = kcalloc(nr_cpu_ids, sizeof(*s->cpu), GFP_KERNEL_ACCOUNT);
	if (!s->cpu)
		return -ENOMEM;
	for_each_possible_cpu(cpu) {
		s->cpu[cpu] = kzalloc_node(sizeof(*s->cpu[cpu]),
					   GFP_KERNEL_ACCOUNT, cpu_to_node(cpu));
		if (!s->cpu[cpu])
			return -ENOMEM;
		s->cpu[cpu]->rnd = get_random_u64() | 1;
		if (s->record & PLABEL_RECORD_HEAP)
			s->cpu[cpu]->ring.keep =
				s->ring_size >> PLABEL_FREE_RESERVE_SHIFT;
	}
	/*
	 * The rings of the CPUs online now, charged to the caller; no
	 * hotplug callback runs for s yet. A CPU that comes online later
	 * gets its ring then (sample.c).
	 */
	for_each_online_cpu(cpu)
		if (plabel_ring_alloc(&s->cpu[cpu]->ring, s->ring_size,
				      cpu_to_node(cpu)))
			return -ENOMEM;
	s->path_buf = kmalloc(PATH_MAX, GFP_KERNEL_ACCOUNT);
	s->root_buf = kmalloc(PATH_MAX, GFP_KERNEL_ACCOUNT);
	return s->path_buf && s->root_buf ? 0 : -ENOMEM;
}

/*
 * A session's records show every process's stacks and labels: whoever
 * starts, reads or stops one must be privileged now (a file passed on or
 * inherited is no capability by itself), and so must have been whoever
 * opened the file (a privileged helper acting on an unprivileged caller's
 * file must not start one for it), as perf_event_open() checks its
 * callers. Security modules' perf_event hooks do not run for the kernel
 * counters a session uses.
 */
static bool plabel_perfmon_now(void)
{
	return ns_capable_noaudit(&init_user_ns, CAP_PERFMON) ||
	       ns_capable_noaudit(&init_user_ns, CAP_SYS_ADMIN);
}

static bool plabel_perfmon_file(struct file *file)
{
	return file_ns_capable(file, &init_user_ns, CAP_PERFMON) ||
	       file_ns_capable(file, &init_user_ns, CAP_SYS_ADMIN);
}

static int plabel_session_start(struct plabel_file *pf, struct file *file,
				void __user *uarg)
{
	struct plabel_session_start_args a;
	struct plabel_session *s;
	u32 usize, slot;
	int ret;

	if (!plabel_perfmon_file(file) || !perfmon_capable())
		return -EPERM;
	ret = plabel_args_in_min(&a, sizeof(a),
				 offsetof(struct plabel_session_start_args,
					  offcpu_min_us), uarg, &usize);
	if (ret)
		return ret;

	s = kzalloc(sizeof(*s), GFP_KERNEL_ACCOUNT);
	if (!s)
		return -ENOMEM;
	INIT_HLIST_NODE(&s->hp_node);
	mutex_init(&s->read_lock);
	mutex_init(&s->tlsctx_lock);
	init_waitqueue_head(&s->wq);
	init_irq_work(&s->wake_work, plabel_wake_fn);
	init_irq_work(&s->kick_work, plabel_kick_fn);
	INIT_DELAYED_WORK(&s->tick, plabel_tick_fn);
	ret = plabel_session_args(s, &a);
	if (ret)
		goto err_free;
	ret = plabel_session_pids(s, &a);
	if (ret)
		goto err_free;
	if (s->record & PLABEL_RECORD_OFFCPU) {
		ret = plabel_offcpu_alloc(s);
		if (ret)
			goto err_free;
	}

	mutex_lock(&plabel_session_mutex);
	/*
	 * A file runs one session in its life; and no more than max_sessions
	 * are held at once, running or stopped but not yet released
	 * (lowering it stops none: only new ones wait).
	 */
	ret = -EBUSY;
	if (pf->session ||
	    plabel_nr_held >= READ_ONCE(plabel_max_sessions))
		goto err_unlock;
	slot = find_first_zero_bit(plabel_slots, PLABEL_MAX_SESSIONS);
	if (WARN_ON_ONCE(slot >= PLABEL_MAX_SESSIONS))
		goto err_unlock;
	s->slot = slot;
	ret = plabel_session_alloc_cpus(s);
	if (ret)
		goto err_unlock;
	/* what sessions in this slot before carried, this one has not */
	s->gen = plabel_slot_next_gen(slot);
	s->stream = (struct plabel_rec_stream) {
		.hdr.type = PLABEL_REC_STREAM,
		.hdr.size = sizeof(s->stream),
		.version = PLABEL_REC_VERSION,
		.callchain = s->callchain,
		.period_ns = s->period_ns,
		.start_ns = ktime_get_ns(),
		.ncpus = num_online_cpus(),
		.record = s->record,
	};
	s->state = PLABEL_SESSION_RUNNING;
	/* rings on every online CPU (and counters) before any hook writes */
	ret = plabel_sample_start(s);
	if (ret)
		goto err_drain;
	if (s->record & PLABEL_RECORD_OFFCPU) {
		ret = plabel_offcpu_hook_get();
		if (ret)
			goto err_stop;
		s->offcpu_hooked = true;
	}
	__set_bit(slot, plabel_slots);
	list_add_tail_rcu(&s->node, &plabel_sessions);
	plabel_session_heap_interval();
	plabel_nr_sessions++;
	plabel_nr_held++;
	queue_delayed_work(plabel_wq, &s->tick, msecs_to_jiffies(PLABEL_TICK_MS));
	/* a fully set up session: pairs with read()/poll() */
	smp_store_release(&pf->session, s);
	mutex_unlock(&plabel_session_mutex);
	return 0;

err_stop:
	plabel_sample_stop(s);
err_drain:
	irq_work_sync(&s->wake_work);
	/* a sample's kick may have queued the tick, and it a grace period */
	irq_work_sync(&s->kick_work);
	cancel_delayed_work_sync(&s->tick);
	if (READ_ONCE(s->sync_pending))
		rcu_barrier();
	plabel_scan_pending(s, false);
err_unlock:
	mutex_unlock(&plabel_session_mutex);
err_free:
	plabel_session_free(s);
	return ret;
}

/*
 * Under plabel_session_mutex. The counters go first, then the hooks stop
 * seeing the session; after the grace period nothing writes to its rings
 * or sets its slot's entry in a set's gen, and the slot may be taken
 * again (under the same mutex, so not before this returns).
 */
static void plabel_session_stop_locked(struct plabel_session *s)
{
	if (s->state != PLABEL_SESSION_RUNNING)
		return;
	plabel_sample_stop(s);
	list_del_rcu(&s->node);
	plabel_session_heap_interval();
	plabel_nr_sessions--;
	synchronize_rcu();
	if (s->offcpu_hooked)
		plabel_offcpu_hook_put();
	s->offcpu_hooked = false;
	__clear_bit(s->slot, plabel_slots);
	/* nothing kicks any more: a kick's queueing of the tick before */
	irq_work_sync(&s->kick_work);
	cancel_delayed_work_sync(&s->tick);
	/* the tick's sync callback, if queued, before s can be freed */
	if (READ_ONCE(s->sync_pending))
		rcu_barrier();
	plabel_scan_pending(s, false);
	irq_work_sync(&s->wake_work);
	/* records written before are visible to a reader seeing STOPPED */
	smp_store_release(&s->state, PLABEL_SESSION_STOPPED);
	wake_up_all(&s->wq);
}

/* The ioctl number without its size bits, so arguments may grow. */
#define PLABEL_IOC_BASE(cmd)	((cmd) & ~IOCSIZE_MASK)

/*
 * PLABEL_IOC_TLSCTX_SET: the caller must be privileged now, as for reading
 * the session's records, which the registration adds to.
 */
static int plabel_session_tlsctx(struct plabel_file *pf, void __user *uarg)
{
	/* pairs with the release in plabel_session_start() */
	struct plabel_session *s = smp_load_acquire(&pf->session);
	struct plabel_tlsctx_args a;
	u32 usize;
	int ret;

	ret = plabel_args_in(&a, sizeof(a), uarg, &usize);
	if (ret)
		return ret;
	if (!s)
		return -EINVAL;
	if (!plabel_perfmon_now())
		return -EPERM;
	return plabel_tlsctx_set(s, &a);
}

long plabel_session_ioctl(struct plabel_file *pf, struct file *file,
			  unsigned int cmd, unsigned long arg)
{
	struct plabel_session *s;

	switch (PLABEL_IOC_BASE(cmd)) {
	case PLABEL_IOC_BASE(PLABEL_IOC_SESSION_START):
		return plabel_session_start(pf, file, (void __user *)arg);
	case PLABEL_IOC_BASE(PLABEL_IOC_SESSION_STOP):
		if (!plabel_perfmon_now())
			return -EPERM;
		mutex_lock(&plabel_session_mutex);
		s = pf->session;
		if (s)
			plabel_session_stop_locked(s);
		mutex_unlock(&plabel_session_mutex);
		return s ? 0 : -EINVAL;
	case PLABEL_IOC_BASE(PLABEL_IOC_TLSCTX_SET):
		return plabel_session_tlsctx(pf, (void __user *)arg);
	default:
		return -ENOTTY;
	}
}

/* Stopped: every record is in the rings. */
static bool plabel_session_stopped(struct plabel_session *s)
{
	/* pairs with the release in plabel_session_stop_locked() */
	return smp_load_acquire(&s->state) == PLABEL_SESSION_STOPPED;
}

/* size bytes of rec at buf + *done: 0, -ENOSPC without room in len, -EFAULT */
static int plabel_copy_rec(char __user *buf, size_t len, size_t *done,
			   const void *rec, size_t size)
{
	if (len - *done < size)
		return -ENOSPC;
	if (copy_to_user(buf + *done, rec, size))
		return -EFAULT;
	*done += size;
	return 0;
}

/*
 * A LOST record of @kind for what @count grew by since *@seen, at buf +
 * *@done: 0 when written or when nothing is new, -ENOSPC without room in
 * len, -EFAULT.
 */
static int plabel_copy_lost(char __user *buf, size_t len, size_t *done,
			    u32 cpu, u32 kind, u64 count, u64 *seen)
{
	struct plabel_rec_lost rec = {
		.hdr.type = PLABEL_REC_LOST,
		.hdr.size = sizeof(rec),
		.cpu = cpu,
		.kind = kind,
		.lost = count - *seen,
	};

	int err;

	if (count == *seen)
		return 0;
	err = plabel_copy_rec(buf, len, done, &rec, sizeof(rec));
	if (!err)
		*seen = count;
	return err;
}

/*
 * A SYNC record for cpu, whose ring was found empty after synced was read:
 * every record it got stamped before synced has been copied out. 0 when
 * written or nothing is new, -ENOSPC without room in len, -EFAULT.
 */
static int plabel_copy_sync(char __user *buf, size_t len, size_t *done,
			    u32 cpu, u64 synced, u64 *sent)
{
	struct plabel_rec_sync rec = {
		.hdr.type = PLABEL_REC_SYNC,
		.hdr.size = sizeof(rec),
		.cpu = cpu,
		.time_ns = synced,
	};

	int err;

	if (synced <= *sent)
		return 0;
	err = plabel_copy_rec(buf, len, done, &rec, sizeof(rec));
	if (!err)
		*sent = synced;
	return err;
}

/*
 * Copy whole records; under read_lock. *all: whether every ring was
 * drained (else buf filled up, or an error ended the copy).
 */
static ssize_t plabel_session_copy_all(struct plabel_session *s,
				       char __user *buf, size_t len,
				       bool *all)
{
	/* before the rings are looked at: pairs with plabel_sync_fn() */
	u64 synced = smp_load_acquire(&s->synced_ns);
	unsigned int n, cpu = s->next_cpu;
	size_t done = 0;
	ssize_t ret;
	int err;

	*all = false;
	if (!s->stream_sent) {
		err = plabel_copy_rec(buf, len, &done, &s->stream,
				      sizeof(s->stream));
		if (err)
			return err;
		s->stream_sent = true;
	}
	err = plabel_copy_lost(buf, len, &done, 0, PLABEL_LOST_MAPPINGS,
			       atomic64_read(&s->lost_maps),
			       &s->lost_maps_seen) ?:
	      plabel_copy_lost(buf, len, &done, 0, PLABEL_LOST_PROCESSES,
			       atomic64_read(&s->lost_procs),
			       &s->lost_procs_seen);
	if (err)
		return done ? done : err;
	for (n = 0; n < nr_cpu_ids; n++, cpu = (cpu + 1) % nr_cpu_ids) {
		struct plabel_ring *r;

		if (!cpu_possible(cpu))
			continue;
		r = &s->cpu[cpu]->ring;
		err = plabel_copy_lost(buf, len, &done, cpu,
				       PLABEL_LOST_RECORDS,
				       READ_ONCE(r->lost), &r->lost_seen) ?:
		      plabel_copy_lost(buf, len, &done, cpu,
				       PLABEL_LOST_PERIODS,
				       READ_ONCE(r->lost_periods),
				       &r->lost_periods_seen) ?:
		      plabel_copy_lost(buf, len, &done, cpu,
				       PLABEL_LOST_FREES,
				       READ_ONCE(r->lost_frees),
				       &r->lost_frees_seen);
		if (err == -ENOSPC)
			break;
		if (err)
			return done ? done : err;
		ret = plabel_ring_copy_out(r, buf + done, len - done);
		if (ret == -ENOSPC && done)
			break;
		if (ret < 0)
			return done ? done : ret;
		done += ret;
		if (!plabel_ring_empty(r))
			break;	/* buf is full */
		/* CPUs that never had a ring have no records to sync */
		if (!READ_ONCE(r->data))
			continue;
		err = plabel_copy_sync(buf, len, &done, cpu, synced,
				       &r->sync_sent);
		if (err == -ENOSPC)
			break;
		if (err)
			return done ? done : err;
	}
	s->next_cpu = cpu;
	*all = n == nr_cpu_ids;
	return done;
}

static ssize_t plabel_session_copy(struct plabel_session *s, char __user *buf,
				   size_t len)
{
	bool news = READ_ONCE(s->news), all;
	ssize_t ret;

	/* what is written from here on is news again */
	if (news) {
		WRITE_ONCE(s->news, false);
		smp_mb();
	}
	ret = plabel_session_copy_all(s, buf, len, &all);
	/* the news may be in what is left */
	if (news && !all)
		WRITE_ONCE(s->news, true);
	return ret;
}

ssize_t plabel_session_read(struct plabel_file *pf, struct file *file,
			    char __user *buf, size_t len)
{
	/* pairs with the release in plabel_session_start() */
	struct plabel_session *s = smp_load_acquire(&pf->session);
	ssize_t ret;
	int stopped;

	if (!s || len < sizeof(s->stream))
		return -EINVAL;
	if (!plabel_perfmon_now())
		return -EPERM;
	for (;;) {
		if (mutex_lock_interruptible(&s->read_lock))
			return -ERESTARTSYS;
		stopped = plabel_session_stopped(s);
		ret = plabel_session_copy(s, buf, len);
		mutex_unlock(&s->read_lock);
		if (ret == -ENOSPC)
			return -EINVAL;
		if (ret || stopped)
			return ret;
		if (file->f_flags & O_NONBLOCK)
			return -EAGAIN;
		if (wait_event_interruptible(s->wq, plabel_session_ready(s) ||
					     plabel_session_stopped(s)))
			return -ERESTARTSYS;
	}
}

__poll_t plabel_session_poll(struct plabel_file *pf, struct file *file,
			     poll_table *wait)
{
	/* pairs with the release in plabel_session_start() */
	struct plabel_session *s = smp_load_acquire(&pf->session);
	__poll_t mask = 0;

	if (!s || !plabel_perfmon_now())
		return EPOLLERR;
	poll_wait(file, &s->wq, wait);
	if (plabel_session_ready(s))
		mask |= EPOLLIN | EPOLLRDNORM;
	if (plabel_session_stopped(s))
		mask |= EPOLLIN | EPOLLRDNORM | EPOLLHUP;
	return mask;
}

void plabel_session_release(struct plabel_file *pf)
{
	struct plabel_session *s;

	mutex_lock(&plabel_session_mutex);
	s = pf->session;
	if (s) {
		plabel_session_stop_locked(s);
		plabel_nr_held--;
	}
	pf->session = NULL;
	mutex_unlock(&plabel_session_mutex);
	if (s)
		plabel_session_free(s);
}

/* debugfs */

#define PLABEL_STAT_ATTR(field)						\
static int plabel_stat_##field##_get(void *data, u64 *val)		\
{									\
	unsigned int cpu;						\
									\
	*val = 0;							\
	for_each_possible_cpu(cpu)					\
		*val += READ_ONCE(per_cpu(plabel_stats, cpu).field);	\
	return 0;							\
}									\
DEFINE_DEBUGFS_ATTRIBUTE(plabel_stat_##field##_fops,			\
			 plabel_stat_##field##_get, NULL, "%llu\n")

PLABEL_STAT_ATTR(samples);
PLABEL_STAT_ATTR(offcpu);
PLABEL_STAT_ATTR(switch_calls);
PLABEL_STAT_ATTR(switch_ns);
PLABEL_STAT_ATTR(records);
PLABEL_STAT_ATTR(lost);
PLABEL_STAT_ATTR(handler_calls);
PLABEL_STAT_ATTR(handler_ns);
PLABEL_STAT_ATTR(mm_scans);
PLABEL_STAT_ATTR(tree_full);
PLABEL_STAT_ATTR(scan_ns);
PLABEL_STAT_ATTR(online_failed);

static int plabel_sessions_get(void *data, u64 *val)
{
	mutex_lock(&plabel_session_mutex);
	*val = plabel_nr_sessions;
	mutex_unlock(&plabel_session_mutex);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(plabel_sessions_fops, plabel_sessions_get, NULL,
			 "%llu\n");

/*
 * slot_gen, for tests of the count starting over: reads slot 0's last
 * generation; writing N (at most 65535, while no session runs) makes N the
 * last of every slot, a lower one than before after that slot's walk, so
 * no set's entry can match a session's generation it was not written by.
 */
static int plabel_slot_gen_get(void *data, u64 *val)
{
	mutex_lock(&plabel_session_mutex);
	*val = plabel_slot_gen[0];
	mutex_unlock(&plabel_session_mutex);
	return 0;
}

static int plabel_slot_gen_set(void *data, u64 val)
{
	unsigned int i;
	int ret = 0;

	if (val > U16_MAX)
		return -ERANGE;
	mutex_lock(&plabel_session_mutex);
	if (plabel_nr_sessions) {
		ret = -EBUSY;
		goto out;
	}
	for (i = 0; i < PLABEL_MAX_SESSIONS; i++) {
		if (val < plabel_slot_gen[i])
			plabel_sets_forget_slot(i);
		plabel_slot_gen[i] = val;
	}
out:
	mutex_unlock(&plabel_session_mutex);
	return ret;
}
DEFINE_DEBUGFS_ATTRIBUTE(plabel_slot_gen_fops, plabel_slot_gen_get,
			 plabel_slot_gen_set, "%llu\n");

int plabel_session_init(void)
{
	struct dentry *d = plabel_debugfs_dir;
	int ret;

	plabel_wq = alloc_workqueue("plabel", WQ_UNBOUND, 0);
	if (!plabel_wq)
		return -ENOMEM;
	ret = plabel_sample_init();
	if (ret) {
		destroy_workqueue(plabel_wq);
		return ret;
	}
	if (IS_ERR_OR_NULL(d))
		return 0;
	debugfs_create_file_unsafe("sessions", 0444, d, NULL,
				   &plabel_sessions_fops);
	debugfs_create_file_unsafe("slot_gen", 0600, d, NULL,
				   &plabel_slot_gen_fops);
	debugfs_create_file_unsafe("samples", 0444, d, NULL,
				   &plabel_stat_samples_fops);
	debugfs_create_file_unsafe("offcpu", 0444, d, NULL,
				   &plabel_stat_offcpu_fops);
	debugfs_create_file_unsafe("switch_calls", 0444, d, NULL,
				   &plabel_stat_switch_calls_fops);
	debugfs_create_file_unsafe("switch_ns_total", 0444, d, NULL,
				   &plabel_stat_switch_ns_fops);
	debugfs_create_file_unsafe("records", 0444, d, NULL,
				   &plabel_stat_records_fops);
	debugfs_create_file_unsafe("lost", 0444, d, NULL,
				   &plabel_stat_lost_fops);
	debugfs_create_file_unsafe("handler_calls", 0444, d, NULL,
				   &plabel_stat_handler_calls_fops);
	debugfs_create_file_unsafe("handler_ns_total", 0444, d, NULL,
				   &plabel_stat_handler_ns_fops);
	debugfs_create_file_unsafe("mm_scans", 0444, d, NULL,
				   &plabel_stat_mm_scans_fops);
	debugfs_create_file_unsafe("tree_full", 0444, d, NULL,
				   &plabel_stat_tree_full_fops);
	debugfs_create_file_unsafe("scan_ns_total", 0444, d, NULL,
				   &plabel_stat_scan_ns_fops);
	debugfs_create_file_unsafe("online_failed", 0444, d, NULL,
				   &plabel_stat_online_failed_fops);
	return 0;
}

void plabel_session_exit(void)
{
	WARN_ON_ONCE(!list_empty(&plabel_sessions));
	WARN_ON_ONCE(plabel_nr_sessions || plabel_nr_held);
	plabel_offcpu_exit();
	plabel_sample_exit();
	destroy_workqueue(plabel_wq);
}
