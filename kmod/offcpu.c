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
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/tracepoint.h>
#include <asm/syscall.h>

#include "compat.h"
#include "session.h"

/* Sessions that record off-CPU intervals; under plabel_session_mutex. */
static unsigned int plabel_offcpu_users;
static struct tracepoint *plabel_switch_tp;

int plabel_offcpu_alloc(struct plabel_session *s)
{
	s->offcpu = kvcalloc(PLABEL_OFFCPU_BUCKETS * PLABEL_OFFCPU_WAYS,
			     sizeof(*s->offcpu), GFP_KERNEL);
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
 * What current waits for, from the state it leaves in and the system call
 * it is in (a 64-bit one; a wait outside of one, a page fault, is other).
 */
u32 plabel_offcpu_kind(void)
{
	struct pt_regs *regs = task_pt_regs(current);
	long nr;

	if (current->in_iowait)
		return PLABEL_WAIT_IO;
	if (!user_64bit_mode(regs))
		return PLABEL_WAIT_OTHER;
	nr = syscall_get_nr(current, regs);
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
	unsigned int state = preempt ? TASK_RUNNING : PLABEL_SWITCH_STATE(prev);
	bool out = plabel_offcpu_leaves(prev, state);
	bool in = !(next->flags & PF_KTHREAD) && !is_idle_task(next);

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

/* Process context, under plabel_session_mutex: one session more. */
int plabel_offcpu_hook_get(void)
{
	int err;

	if (plabel_offcpu_users) {
		plabel_offcpu_users++;
		return 0;
	}
	if (!plabel_switch_tp)
		for_each_kernel_tracepoint(plabel_find_switch, NULL);
	if (!plabel_switch_tp)
		return -ENOENT;
	err = tracepoint_probe_register(plabel_switch_tp,
					plabel_switch_probe.func, NULL);
	if (err)
		return err;
	plabel_offcpu_users = 1;
	return 0;
}

/*
 * Process context, under plabel_session_mutex: one session less. The
 * last one takes the probe off and waits until no call of it runs.
 */
void plabel_offcpu_hook_put(void)
{
	if (WARN_ON_ONCE(!plabel_offcpu_users) || --plabel_offcpu_users)
		return;
	WARN_ON_ONCE(tracepoint_probe_unregister(plabel_switch_tp,
						 plabel_switch_probe.func,
						 NULL));
	tracepoint_synchronize_unregister();
}
