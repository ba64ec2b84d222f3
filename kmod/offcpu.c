// SPDX-License-Identifier: GPL-2.0
/*
 * Off-CPU intervals: the sched_switch probe, registered while at least one
 * session with PLABEL_RECORD_OFFCPU runs, and each such session's table of
 * the threads it saw leave a CPU.
 *
 * When a followed thread leaves its CPU (to wait, or preempted), the probe
 * runs in that thread's context (current is prev, its mm still loaded):
 * sample.c writes an OFFCPU record there with the thread's labels and user
 * stack, taken as for a CPU sample, and the thread goes into the session's
 * table with its switch-out time. When the thread is next switched in (the
 * probe with it as next, on the CPU it runs on, in the context of the task
 * it replaces, whose memory is not its own), its entry leaves the table and,
 * for a wait of at least the session's minimum, a small OFFCPU_END record
 * gives the reader the interval's end. Nothing of the thread's memory is
 * read at the switch-in.
 *
 * The table is bounded and allocated with the session: PLABEL_OFFCPU_BUCKETS
 * buckets of PLABEL_OFFCPU_WAYS slots, a thread's bucket chosen by its
 * task_struct pointer. A slot is taken with cmpxchg() (threads leaving
 * CPUs at once may share a bucket) and freed by the thread's own switch-in,
 * which comes after the switch-out has returned (the scheduler waits for
 * prev to be off its CPU, p->on_cpu, before it runs it elsewhere). A
 * thread that finds its bucket full gets no OFFCPU record: counted as one
 * lost record of its CPU, as a full ring counts them.
 *
 * The probe runs inside __schedule() with the runqueue lock held and
 * interrupts off: it never sleeps, locks, allocates or prints, and reads
 * user memory only of current, without faulting.
 */
#include <linux/hash.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/tracepoint.h>
#include <linux/workqueue.h>
#include <asm/syscall.h>

#include "compat.h"
#include "session.h"

/*
 * The probe is registered with the first session that records off-CPU
 * intervals and taken off kernel.plabel.offcpu_linger_ms after the last
 * one stops (0: at unload only), not at each stop: every registration
 * and removal patches the scheduler's text on every CPU (jump label,
 * static call), which is slow and, done once per session, makes runs of
 * short sessions pay it over and over. While it lingers with no session
 * the probe finds no session to write to. Users and the registration
 * under plabel_offcpu_lock.
 */

static DEFINE_MUTEX(plabel_offcpu_lock);
static unsigned int plabel_offcpu_users;
static bool plabel_offcpu_registered;
static struct tracepoint *plabel_switch_tp;
static void plabel_offcpu_linger_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(plabel_offcpu_linger, plabel_offcpu_linger_fn);

int plabel_offcpu_alloc(struct plabel_session *s)
{
	s->offcpu = kvcalloc(PLABEL_OFFCPU_BUCKETS * PLABEL_OFFCPU_WAYS,
			     sizeof(*s->offcpu), GFP_KERNEL_ACCOUNT);
	return s->offcpu ? 0 : -ENOMEM;
}

void plabel_offcpu_free(struct plabel_session *s)
{
	kvfree(s->offcpu);
	s->offcpu = NULL;
}

static struct plabel_offcpu_slot *
plabel_offcpu_bucket(struct plabel_session *s, struct task_struct *t)
{
	return &s->offcpu[hash_ptr(t, ilog2(PLABEL_OFFCPU_BUCKETS)) *
			  PLABEL_OFFCPU_WAYS];
}

/* A slot for t (current) in s's table, NULL when its bucket is full. */
struct plabel_offcpu_slot *plabel_offcpu_claim(struct plabel_session *s,
					       struct task_struct *t)
{
	struct plabel_offcpu_slot *b = plabel_offcpu_bucket(s, t);
	unsigned long key = (unsigned long)t;
	int i;

	for (i = 0; i < PLABEL_OFFCPU_WAYS; i++)
		if (READ_ONCE(b[i].task) == key)
			return &b[i];
	for (i = 0; i < PLABEL_OFFCPU_WAYS; i++)
		if (!READ_ONCE(b[i].task) && !cmpxchg(&b[i].task, 0, key))
			return &b[i];
	return NULL;
}

/* t's slot in s's table, NULL when it has none. */
static struct plabel_offcpu_slot *
plabel_offcpu_find(struct plabel_session *s, struct task_struct *t)
{
	struct plabel_offcpu_slot *b = plabel_offcpu_bucket(s, t);
	int i;

	for (i = 0; i < PLABEL_OFFCPU_WAYS; i++)
		if (READ_ONCE(b[i].task) == (unsigned long)t)
			return &b[i];
	return NULL;
}

void plabel_offcpu_release(struct plabel_offcpu_slot *slot)
{
	WRITE_ONCE(slot->task, 0);
}

/*
 * What a thread waits for, from the system call it is in, nr (a 64-bit
 * one; -1: none, a wait outside of one, a page fault, is other), and
 * whether it waits for block I/O.
 */
static u32 plabel_wait_kind_of(long nr, bool iowait)
{
	if (iowait)
		return PLABEL_WAIT_IO;
	if (nr < 0)
		return PLABEL_WAIT_OTHER;
	nr &= ~(long)__X32_SYSCALL_BIT;
	if (nr == __NR_futex || nr == PLABEL_NR_FUTEX_WAITV)
		return PLABEL_WAIT_FUTEX;
	switch (nr) {
	case __NR_nanosleep:
	case __NR_clock_nanosleep:
	case __NR_pause:
		return PLABEL_WAIT_SLEEP;
	case __NR_read:
	case __NR_readv:
	case __NR_pread64:
	case __NR_preadv:
	case __NR_preadv2:
	case __NR_write:
	case __NR_writev:
	case __NR_pwrite64:
	case __NR_pwritev:
	case __NR_pwritev2:
	case __NR_recvfrom:
	case __NR_recvmsg:
	case __NR_recvmmsg:
	case __NR_sendto:
	case __NR_sendmsg:
	case __NR_sendmmsg:
	case __NR_accept:
	case __NR_accept4:
	case __NR_connect:
	case __NR_poll:
	case __NR_ppoll:
	case __NR_select:
	case __NR_pselect6:
	case __NR_epoll_wait:
	case __NR_epoll_pwait:
	case __NR_io_getevents:
	case __NR_io_pgetevents:
	case __NR_io_uring_enter:
	case __NR_splice:
	case __NR_sendfile:
	case __NR_fsync:
	case __NR_fdatasync:
		return PLABEL_WAIT_IO;
	}
	if (nr == PLABEL_NR_EPOLL_PWAIT2)
		return PLABEL_WAIT_IO;
	return PLABEL_WAIT_OTHER;
}

/* What current waits for, as it leaves its CPU. */
u32 plabel_offcpu_kind(void)
{
	struct pt_regs *regs = task_pt_regs(current);

	if (!user_64bit_mode(regs))
		return plabel_wait_kind_of(-1, current->in_iowait);
	return plabel_wait_kind_of(syscall_get_nr(current, regs),
				   current->in_iowait);
}

/*
 * What task t, another thread, waits for: the same from its saved
 * registers, copied with plabel_task_user_regs() (its stack may go while
 * this runs). Process context.
 */
u32 plabel_task_wait_kind(struct task_struct *t)
{
	struct pt_regs regs;
	long nr = -1;

	if (plabel_task_user_regs(t, &regs) && user_64bit_mode(&regs))
		nr = syscall_get_nr(t, &regs);
	return plabel_wait_kind_of(nr, t->in_iowait);
}

/*
 * next runs again: its slot leaves the table, and a wait of at least the
 * session's minimum gets its OFFCPU_END record on this CPU's ring.
 */
void plabel_offcpu_in(struct plabel_session *s, struct task_struct *next,
		      u64 now)
{
	struct plabel_offcpu_slot *slot = plabel_offcpu_find(s, next);
	struct plabel_rec_offcpu_end rec;
	struct plabel_ring *r;
	struct plabel_wr w;
	u64 out;

	if (!slot)
		return;
	out = READ_ONCE(slot->out_ns);
	plabel_offcpu_release(slot);
	if (now < out || now - out < s->offcpu_min_ns)
		return;
	rec = (struct plabel_rec_offcpu_end) {
		.hdr.type = PLABEL_REC_OFFCPU_END,
		.time_ns = now,
		.out_ns = out,
		.pid = next->tgid,
		.tid = next->pid,
		.cpu = smp_processor_id(),
	};
	r = &s->cpu[smp_processor_id()]->ring;
	if (!plabel_wr_begin(&w, r, sizeof(rec)))
		return;
	plabel_wr_put(&w, &rec, sizeof(rec));
	plabel_wr_commit(&w);
	plabel_session_committed(s, r);
}

/* A user thread leaving, as opposed to one that exits. */
static bool plabel_offcpu_leaves(struct task_struct *prev, unsigned int state)
{
	return !(state & TASK_DEAD) && prev->mm &&
	       !(prev->flags & PLABEL_PF_NO_USER) && !is_idle_task(prev);
}

/*
 * A thread that leaves preempted (or yielding: it stays runnable) is
 * recorded too, as TASK_RUNNING, of kind PLABEL_WAIT_PREEMPTED: its time
 * in the run queue is neither CPU time nor a wait, and without it a
 * thread's CPU and off-CPU time would not add up to its elapsed time.
 */
static void plabel_probe_switch(PLABEL_PROBE_SWITCH_ARGS)
{
	unsigned int state;
	bool out, in;

	/* lingering (see plabel_offcpu_lock): no session in the list uses it */
	if (!READ_ONCE(plabel_offcpu_users))
		return;
	state = preempt ? TASK_RUNNING : PLABEL_SWITCH_STATE(prev);
	out = plabel_offcpu_leaves(prev, state);
	in = !(next->flags & PF_KTHREAD) && !is_idle_task(next);
	/* a kernel chain starts at the probe's caller */
	if (out || in)
		plabel_session_on_switch(prev, next, state, out, in,
					 __builtin_frame_address(0));
}

static const struct {
	const char *name;
	void *func;
} plabel_switch_probe = PLABEL_PROBE(sched_switch, plabel_probe_switch);

static void plabel_find_switch(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, plabel_switch_probe.name))
		plabel_switch_tp = tp;
}

/* Under plabel_offcpu_lock: off, and no call of it runs any more. */
static void plabel_offcpu_unregister(void)
{
	if (!plabel_offcpu_registered)
		return;
	WARN_ON_ONCE(tracepoint_probe_unregister(plabel_switch_tp,
						 plabel_switch_probe.func,
						 NULL));
	tracepoint_synchronize_unregister();
	plabel_offcpu_registered = false;
}

static void plabel_offcpu_linger_fn(struct work_struct *work)
{
	mutex_lock(&plabel_offcpu_lock);
	if (!plabel_offcpu_users)
		plabel_offcpu_unregister();
	mutex_unlock(&plabel_offcpu_lock);
}

/* Process context: one session more. */
int plabel_offcpu_hook_get(void)
{
	int err = 0;

	mutex_lock(&plabel_offcpu_lock);
	if (!plabel_offcpu_registered) {
		if (!plabel_switch_tp)
			for_each_kernel_tracepoint(plabel_find_switch, NULL);
		err = plabel_switch_tp ?
		      tracepoint_probe_register(plabel_switch_tp,
						plabel_switch_probe.func,
						NULL) : -ENOENT;
		plabel_offcpu_registered = !err;
	}
	if (!err)
		WRITE_ONCE(plabel_offcpu_users, plabel_offcpu_users + 1);
	mutex_unlock(&plabel_offcpu_lock);
	return err;
}

/*
 * Process context: one session less. Its records stop with it (it is off
 * the session list); the probe lingers, see plabel_offcpu_lock.
 */
void plabel_offcpu_hook_put(void)
{
	unsigned int ms;

	mutex_lock(&plabel_offcpu_lock);
	if (WARN_ON_ONCE(!plabel_offcpu_users))
		goto out;
	WRITE_ONCE(plabel_offcpu_users, plabel_offcpu_users - 1);
	ms = READ_ONCE(plabel_offcpu_linger_ms);
	if (!plabel_offcpu_users && ms)
		mod_delayed_work(plabel_wq, &plabel_offcpu_linger,
				 msecs_to_jiffies(ms));
out:
	mutex_unlock(&plabel_offcpu_lock);
}

/* Module unload: no session is left; the probe goes now. */
void plabel_offcpu_exit(void)
{
	cancel_delayed_work_sync(&plabel_offcpu_linger);
	mutex_lock(&plabel_offcpu_lock);
	WARN_ON_ONCE(plabel_offcpu_users);
	plabel_offcpu_unregister();
	mutex_unlock(&plabel_offcpu_lock);
}
