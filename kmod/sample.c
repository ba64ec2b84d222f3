// SPDX-License-Identifier: GPL-2.0
/*
 * Sampling: one perf cpu-clock kernel counter per session and online CPU,
 * created and destroyed by the session's instance of one multi-instance
 * CPU hotplug state, and their overflow handler, which writes SAMPLE
 * records to its own session's rings; THREAD records for the creator of a
 * new task.
 *
 * The handler serves one session: the one its counter was made for (the
 * counter's context). With several sessions each CPU runs one counter per
 * session, each at its session's rate, so a sample costs what it costs
 * with one session.
 *
 * The overflow handler runs in hard interrupt context (perf's hrtimer for
 * cpu-clock) with interrupts disabled. It never sleeps, locks, allocates or
 * prints: user memory is read with copy_from_user_nofault(), records go to
 * this CPU's ring (ring.c), and everything that must sleep (walking a
 * process's mappings, waking the reader) is left to the session's tick work
 * or irq_work (session.c).
 */
#include <linux/cpuhotplug.h>
#include <linux/hrtimer.h>
#include <linux/math64.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/sched/task_stack.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <asm/fsgsbase.h>
#include <asm/unwind.h>

#include "compat.h"
#include "session.h"

DEFINE_PER_CPU(struct plabel_stats, plabel_stats);

/* The multi-instance hotplug state, one instance per running session. */
static int plabel_hp_state = -1;

/* User registers of current, or NULL for kernel threads. */
static struct pt_regs *plabel_user_regs(struct pt_regs *regs)
{
	if (regs && user_mode(regs))
		return regs;
	/* workers sharing a user mm, and exiting tasks: see compat.h */
	if (!current->mm || (current->flags & PLABEL_PF_NO_USER))
		return NULL;
	return task_pt_regs(current);
}

/* The kernel call chain of an interrupt that hit kernel mode (regs). */
static u16 plabel_kernel_chain(struct plabel_wr *w, struct pt_regs *regs)
{
	struct unwind_state state;
	u64 ip = regs->ip;
	u16 n = 1;

	plabel_wr_put(w, &ip, sizeof(ip));
	for (unwind_start(&state, current, regs, NULL);
	     !unwind_done(&state) && n < PLABEL_KSTACK_MAX;
	     unwind_next_frame(&state)) {
		ip = unwind_get_return_address(&state);
		if (!ip)
			break;
		plabel_wr_put(w, &ip, sizeof(ip));
		n++;
	}
	return n;
}

/*
 * Walk user frame pointers: each frame is {saved rbp, return address} at
 * rbp. Stops at an unreadable, misaligned or non-increasing frame pointer.
 * As perf's own walk does: one pagefault-disabled stretch with __get_user()
 * (a fault ends the walk, it is never serviced), and the addresses written
 * to the ring a batch at a time: this loop is most of a sample's cost, and
 * with a copy_from_user_nofault() and a ring write per frame it took three
 * quarters of the handler's time.
 */
#define PLABEL_FP_BATCH	16

static u16 plabel_user_fp_chain(struct plabel_wr *w, struct pt_regs *uregs,
				u32 max, u32 *flags)
{
	unsigned long fp = uregs->bp, next;
	u64 batch[PLABEL_FP_BATCH], ret, frame[2];
	/* the addresses straight into the ring, where max of them fit */
	u64 *dst = plabel_wr_place(w, w->len, max * sizeof(u64));
	u32 nb = 1, cap = PLABEL_FP_BATCH;
	u16 n = 1;

	if (dst)
		cap = max;
	else
		dst = batch;
	dst[0] = uregs->ip;
	/*
	 * current's mm is the loaded one: this runs in its process context
	 * or interrupts it, never inside switch_mm (interrupts off there).
	 * The first frame is read with copy_from_user_nofault() all the
	 * same: it asks nmi_uaccess_okay() (not exported to modules), as
	 * perf's walk does, whether this CPU's page tables are current's;
	 * the answer cannot change while this runs with interrupts off.
	 */
	if (!user_64bit_mode(uregs))
		goto out;
	if (fp && !(fp & 7) && fp >= uregs->sp &&
	    copy_from_user_nofault(frame, (const void __user *)fp,
				   sizeof(frame)))
		goto out;
	pagefault_disable();
	for (;;) {
		if (n >= max) {
			*flags |= PLABEL_SAMPLE_TRUNC;
			break;
		}
		if (!fp || (fp & 7) || fp < uregs->sp ||
		    !plabel_access_ok((const void __user *)fp, 16) ||
		    __get_user(next, (unsigned long __user *)fp) ||
		    __get_user(ret, (u64 __user *)(fp + 8)) || !ret)
			break;
		if (nb == cap) {
			plabel_wr_put(w, batch, sizeof(batch));
			nb = 0;
		}
		dst[nb++] = ret;
		n++;
		if (next <= fp)
			break;
		fp = next;
	}
	pagefault_enable();
out:
	if (dst == batch)
		plabel_wr_put(w, batch, nb * sizeof(u64));
	else
		plabel_wr_skip(w, nb * sizeof(u64));
	return n;
}

static void plabel_user_regs_copy(u64 *r, struct pt_regs *uregs)
{
	r[PLABEL_REG_RAX] = uregs->ax;
	r[PLABEL_REG_RDX] = uregs->dx;
	r[PLABEL_REG_RCX] = uregs->cx;
	r[PLABEL_REG_RBX] = uregs->bx;
	r[PLABEL_REG_RSI] = uregs->si;
	r[PLABEL_REG_RDI] = uregs->di;
	r[PLABEL_REG_RBP] = uregs->bp;
	r[PLABEL_REG_RSP] = uregs->sp;
	r[PLABEL_REG_R8] = uregs->r8;
	r[PLABEL_REG_R9] = uregs->r9;
	r[PLABEL_REG_R10] = uregs->r10;
	r[PLABEL_REG_R11] = uregs->r11;
	r[PLABEL_REG_R12] = uregs->r12;
	r[PLABEL_REG_R13] = uregs->r13;
	r[PLABEL_REG_R14] = uregs->r14;
	r[PLABEL_REG_R15] = uregs->r15;
	r[PLABEL_REG_RIP] = uregs->ip;
}

/*
 * Bytes of user stack a record carries for the reader to unwind: in dwarf
 * mode the session's stack_size; in fp mode, thread creations carry up to
 * PLABEL_THREAD_SNAP too, since their stack runs through the C library's
 * clone wrappers, which keep no frame pointers. That is enough to unwind
 * from clone3 to the creating function and a few of its callers, and
 * small enough that a burst of creations does not flood the ring.
 * Returns false when the record carries no registers and no snapshot.
 */
#define PLABEL_THREAD_SNAP	2048

static bool plabel_snap_size(struct plabel_session *s, u32 type, u32 *size)
{
	if (s->callchain == PLABEL_CALLCHAIN_DWARF) {
		*size = s->stack_size;
		return true;
	}
	if (s->callchain == PLABEL_CALLCHAIN_FP &&
	    (type == PLABEL_REC_THREAD || type == PLABEL_REC_OFFCPU)) {
		*size = min_t(u32, s->stack_size, PLABEL_THREAD_SNAP);
		return true;
	}
	return false;
}

/* Largest record plabel_emit_chain() may write for session s. */
static u32 plabel_chain_max(struct plabel_session *s, bool kernel, bool snap,
			    u32 snap_size)
{
	u32 max = sizeof(struct plabel_rec_sample);

	if (kernel)
		max += PLABEL_KSTACK_MAX * sizeof(u64);
	if (s->callchain == PLABEL_CALLCHAIN_FP)
		max += s->max_stack * sizeof(u64);
	else
		max += sizeof(u64);
	if (snap)
		max += PLABEL_REGS_NR * sizeof(u64) + snap_size;
	return ALIGN(max, 8);
}

/*
 * How much of the user stack at sp to copy, at most size bytes: up to where
 * that stack ends, when that is known. Candidates for the end: top, the
 * stack pointer current's thread started with (task.c keeps it for threads
 * created while a session samples their process); the FS base, since the C
 * libraries put a thread's control block, which it points at on x86-64, at
 * the top of the thread's stack mapping, above its static TLS; and
 * mm->start_stack, the stack pointer exec left the main thread. None of
 * these lies inside the frames above sp of whatever stack sp is on, so the
 * copy stops at the nearest above sp and leaves out nothing the unwinder
 * reads. A stack elsewhere (a coroutine's, a signal stack, a runtime's own)
 * is copied whole. The FS base is taken both from the CPU, where user space
 * may have written it, and from what was saved for current, since the
 * CPU's can read 0 for a new thread's first moments.
 */
static u32 plabel_snap_len(unsigned long sp, u32 size, unsigned long top)
{
	unsigned long end[4] = { top, x86_fsbase_read_cpu(),
				 READ_ONCE(current->thread.fsbase), 0 };
	struct mm_struct *mm = READ_ONCE(current->mm);
	u32 len = size;
	int i;

	if (mm)
		end[3] = READ_ONCE(mm->start_stack);
	for (i = 0; i < ARRAY_SIZE(end); i++)
		if (end[i] >= sp && end[i] - sp < len)
			len = end[i] - sp;
	return len;
}

/*
 * A record's kernel chain: walked from the interrupted registers regs, or
 * (regs NULL) the nk addresses at ips, walked already.
 */
struct plabel_kchain {
	struct pt_regs *regs;
	const u64 *ips;
	u16 nk;
};

/*
 * Write a SAMPLE, THREAD or OFFCPU record to this CPU's ring. rec holds
 * the fixed part but for the counts; kc, when not NULL, is the kernel
 * chain; top is where current's stack ends, 0 when not known. Interrupts
 * are off.
 */
static bool plabel_emit_chain(struct plabel_session *s, struct plabel_ring *r,
			      struct plabel_rec_sample *rec,
			      const void *extra, u32 extra_len,
			      const struct plabel_kchain *kc,
			      struct pt_regs *uregs, unsigned long top,
			      struct plabel_wr *wp)
{
	bool kernel = kc != NULL;
	u32 snap_size = 0;
	bool snap = plabel_snap_size(s, rec->hdr.type, &snap_size);
	const struct plabel_tlsctx *tlsctx = NULL;
	struct plabel_rec_sample *place;
	struct plabel_wr w;
	u32 ctx_room = 0;

	/*
	 * room for a thread context only where the process has one; no
	 * call at all in a session where none has
	 */
	if (uregs && READ_ONCE(s->tlsctx))
		tlsctx = plabel_tlsctx_lookup(s, &ctx_room);
	if (!plabel_wr_begin(&w, r, plabel_chain_max(s, kernel, snap,
						     snap_size) + extra_len +
			     ctx_room))
		return false;
	/* the fixed part last, once its counts are known */
	plabel_wr_skip(&w, sizeof(*rec));
	/* ALLOC: its plabel_rec_alloc (a multiple of 8 bytes) */
	if (extra_len)
		plabel_wr_put(&w, extra, extra_len);
	if (kc && kc->regs) {
		rec->nr_kernel = plabel_kernel_chain(&w, kc->regs);
	} else if (kc) {
		plabel_wr_put(&w, kc->ips, kc->nk * sizeof(u64));
		rec->nr_kernel = kc->nk;
	}
	if (uregs) {
		if (s->callchain == PLABEL_CALLCHAIN_FP) {
			rec->nr_user = plabel_user_fp_chain(&w, uregs,
							    s->max_stack,
							    &rec->flags);
		} else {
			u64 ip = uregs->ip;

			plabel_wr_put(&w, &ip, sizeof(ip));
			rec->nr_user = 1;
		}
	}
	if (uregs && snap && user_64bit_mode(uregs)) {
		bool fp_offcpu = s->callchain == PLABEL_CALLCHAIN_FP &&
				 rec->hdr.type == PLABEL_REC_OFFCPU;
		u64 regs[PLABEL_REGS_NR];
		u32 len;

		/*
		 * fp-mode OFFCPU: the reader unwinds only the C library's
		 * wrappers, from the leaf to the frame at rbp, whose rules
		 * read ip, sp and memory (and rbp, where a wrapper keeps a
		 * frame): those three registers, not all of them. A
		 * switch-heavy program writes one of these at every switch:
		 * the fewer bytes the better.
		 */
		if (fp_offcpu) {
			regs[0] = uregs->ip;
			regs[1] = uregs->sp;
			regs[2] = uregs->bp;
			plabel_wr_put(&w, regs, PLABEL_FP_REGS_NR * sizeof(u64));
			rec->flags |= PLABEL_SAMPLE_FP_REGS;
		} else {
			plabel_user_regs_copy(regs, uregs);
			plabel_wr_put(&w, regs, sizeof(regs));
		}
		len = plabel_snap_len(uregs->sp, snap_size, top);
		/*
		 * fp-mode OFFCPU: the walk above has the frames from the one
		 * at rbp on; the reader needs the stack below it, to unwind
		 * the C library's wrappers, and that frame's record, where the
		 * two meet (record-format.rst). Only when the walk went on
		 * from that frame to another (an rbp the C library uses for
		 * something else rarely leads to two frames): else the whole
		 * copy, for the reader to unwind.
		 */
		if (fp_offcpu && rec->nr_user >= 3 &&
		    !(uregs->bp & 7) && uregs->bp > uregs->sp &&
		    uregs->bp - uregs->sp + 16 < len)
			len = uregs->bp - uregs->sp + 16;
		rec->stack_size = plabel_wr_put_user(&w, uregs->sp, len);
		rec->flags |= PLABEL_SAMPLE_REGS;
	}
	/* the thread context a program publishes, after all that */
	if (tlsctx)
		plabel_tlsctx_emit(tlsctx, &w, &rec->flags);
	place = plabel_wr_place(&w, 0, sizeof(*rec));
	if (place)
		*place = *rec;
	else
		plabel_wr_patch(&w, 0, rec, sizeof(*rec));
	plabel_wr_commit(&w);
	if (wp)
		*wp = w;
	return true;
}

/*
 * How many sampling periods this overflow stands for. perf's cpu-clock
 * timer fires on a grid of the interval it was last forwarded by (see
 * plabel_next_period()); when an interrupt comes late (an emulated CPU, a
 * long section with interrupts off), perf skips the grid points that
 * passed meanwhile, while the kernel charges that time to the task that
 * was running. Count the grid points since the previous overflow on this
 * CPU, but only those after current was switched in: at least one, at
 * most PLABEL_WEIGHT_MAX. On time, it is one.
 */
#ifdef CONFIG_SCHED_INFO
/* Of n periods since last, those after current was switched in. */
static u64 plabel_periods_ran(struct plabel_cpu *c, u64 last, u64 expiry,
			      u64 n)
{
	/* switch-in time, from sched_clock to the timer's CLOCK_MONOTONIC */
	u64 arrival = current->sched_info.last_arrival + ktime_get_ns() -
		      local_clock();

	if (arrival <= last)
		return n;
	if (expiry <= arrival)
		return 1;
	return min(n, div64_u64(expiry - arrival + c->period - 1, c->period));
}
#else
/*
 * Without the switch-in time (no CONFIG_SCHED_INFO): all n when the same
 * task was interrupted at the previous overflow too, else one.
 */
static u64 plabel_periods_ran(struct plabel_cpu *c, u64 last, u64 expiry,
			      u64 n)
{
	return c->last_task == current ? n : 1;
}
#endif

static u32 plabel_sample_weight(struct perf_event *event, struct plabel_cpu *c)
{
	u64 expiry = plabel_hrtimer_expires_ns(&event->hw.hrtimer);
	u64 last = c->last_expiry, n = 1;

	if (last && expiry > last) {
		n = div64_u64(expiry - last + c->period / 2, c->period);
		/* on time: one, without reading the clocks */
		if (n > 1)
			n = plabel_periods_ran(c, last, expiry, n);
	}
	c->last_expiry = expiry;
	c->last_task = current;
	return clamp_t(u64, n, 1, PLABEL_WEIGHT_MAX);
}

/*
 * The CPU time current has used by now (local_clock() at the overflow's
 * start, read once for both), for PLABEL_SAMPLE_CPUTIME. The scheduler
 * adds to sum_exec_runtime at ticks and switches; the time since, counted
 * from exec_start, is added here where exec_start is on local_clock()'s
 * scale (rq->clock_task equals rq->clock without interrupt or steal time
 * accounting).
 *
 * Not while a reschedule is pending: a wakeup that preempts current asks
 * the coming __schedule() to skip its clock update (check_preempt_curr(),
 * wakeup_preempt()), so the stretch from that wakeup's clock reading to
 * the switch is charged to the next task, never to current; on a virtual
 * CPU the reschedule interrupt may take a millisecond. The sum alone is
 * then what current will have been charged, and the next sample carries
 * the rest.
 *
 * Another CPU may update both while they are read (waking a task onto
 * this CPU's runqueue). The fair class stores exec_start first, so a pair
 * torn by that is low; the others (update_current_exec_runtime()) store
 * the sum first, so theirs may be up to a tick high. A store that lands
 * between the two reads of either field is seen, and the reads retried a
 * few times at most: in an interrupt, a rare torn reading is better than
 * a loop (the reader weighs a reading below its thread's highest as
 * nothing, and a high one is made good by the next readings standing for
 * less). Where sched_clock is not stable across CPUs, a start taken from
 * another CPU's view of this runqueue's clock may lie a little ahead of
 * local_clock(): the time since then counts as none, a low reading too.
 */
static u64 plabel_task_cpu_ns(u64 now)
{
	struct sched_entity *se = &current->se;
	u64 sum, start, sum2, start2;
	int tries = 3;

	if (IS_ENABLED(CONFIG_IRQ_TIME_ACCOUNTING) ||
	    IS_ENABLED(CONFIG_PARAVIRT_TIME_ACCOUNTING) ||
	    test_tsk_need_resched(current))
		return READ_ONCE(se->sum_exec_runtime);
	do {
		start = READ_ONCE(se->exec_start);
		smp_rmb();
		sum = READ_ONCE(se->sum_exec_runtime);
		smp_rmb();
		sum2 = READ_ONCE(se->sum_exec_runtime);
		smp_rmb();
		start2 = READ_ONCE(se->exec_start);
	} while ((sum != sum2 || start != start2) && --tries);
	return now > start ? sum + (now - start) : sum;
}

/*
 * Labels first, when this session has not carried them yet: the set's
 * entry for its slot is not its generation. Its CPUs may each write the
 * record once, which the reader takes as one.
 */
static u64 plabel_labels_for(struct plabel_session *s, struct plabel_ring *r,
			     struct plabel_set *set)
{
	if (!set)
		return 0;
	if (READ_ONCE(set->gen[s->slot]) != s->gen &&
	    plabel_session_emit_labelset(s, r, set))
		WRITE_ONCE(set->gen[s->slot], s->gen);
	return set->id;
}

static void plabel_sample(struct plabel_session *s, struct pt_regs *regs,
			  u32 weight, u64 now)
{
	struct plabel_cpu *c = s->cpu[smp_processor_id()];
	struct plabel_rec_sample rec = {
		.hdr.type = PLABEL_REC_SAMPLE,
		.time_ns = ktime_get_ns(),
		.pid = current->tgid,
		.tid = current->pid,
		.cpu = smp_processor_id(),
		.flags = PLABEL_SAMPLE_CPUTIME,
		.cpu_ns = plabel_task_cpu_ns(now),
	};
	struct pt_regs *uregs = plabel_user_regs(regs);
	struct plabel_kchain kc = { .regs = regs };
	bool kernel = false;
	struct plabel_set *set;
	unsigned long top;

	if (user_mode(regs))
		rec.flags |= PLABEL_SAMPLE_USER;
	else
		kernel = s->record & PLABEL_RECORD_KERNEL;

	rcu_read_lock();
	set = plabel_current_set_rcu(&top);
	rec.set_id = plabel_labels_for(s, &c->ring, set);
	rcu_read_unlock();

	/* a late sample stands for each period it covers */
	rec.flags |= (weight - 1) << PLABEL_SAMPLE_PERIODS_SHIFT;
	if (plabel_emit_chain(s, &c->ring, &rec, NULL, 0, kernel ? &kc : NULL,
			      uregs, top, NULL))
		__this_cpu_inc(plabel_stats.samples);
	else
		WRITE_ONCE(c->ring.lost_periods, c->ring.lost_periods + weight);
	if (uregs)
		plabel_session_note_mm(s, c, rec.time_ns);
	plabel_session_committed(s, &c->ring);
}

/*
 * The next sampling interval, uniform in [P/2, 3P/2) around the session's
 * period P: with a fixed one, work that repeats in step with it (a loop
 * of requests of a fixed length) is sampled at the same points of each
 * round and its labels misread; a random interval breaks the step and
 * keeps the mean rate. perf_swevent_hrtimer() forwards the timer by the
 * event's sample_period after the handler returns, so this is the time to
 * the next overflow (on time), and the grid a late one is counted on.
 * xorshift64, per CPU, interrupts off; P/2 stays above perf's 10 us
 * floor (PLABEL_HZ_MAX).
 */
static u64 plabel_next_period(struct plabel_session *s, struct plabel_cpu *c)
{
	u64 x = c->rnd;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	c->rnd = x;
	return s->period_ns / 2 + (((x >> 32) * s->period_ns) >> 32);
}

static void plabel_overflow(struct perf_event *event,
			    struct perf_sample_data *data,
			    struct pt_regs *regs)
{
	struct plabel_session *s = event->overflow_handler_context;
	struct plabel_cpu *c = s->cpu[smp_processor_id()];
	u64 t0 = local_clock();
	u32 weight = plabel_sample_weight(event, c);

	c->period = plabel_next_period(s, c);
	event->hw.sample_period = c->period;

	if (regs && !is_idle_task(current) &&
	    plabel_session_wants(s, current->tgid))
		plabel_sample(s, regs, weight, t0);
	__this_cpu_add(plabel_stats.handler_ns, local_clock() - t0);
	__this_cpu_inc(plabel_stats.handler_calls);
}

void plabel_sample_thread(struct plabel_session *s, struct task_struct *child,
			  u64 clone_flags, struct plabel_set *set,
			  unsigned long stack_top)
{
	struct plabel_cpu *c = s->cpu[smp_processor_id()];
	struct plabel_rec_sample rec = {
		.hdr.type = PLABEL_REC_THREAD,
		.time_ns = ktime_get_ns(),
		.pid = current->tgid,
		.tid = current->pid,
		.cpu = smp_processor_id(),
		.child_pid = child->tgid,
		.child_tid = child->pid,
	};
	struct pt_regs *uregs = plabel_user_regs(NULL);

	if (!(clone_flags & CLONE_THREAD))
		rec.flags |= PLABEL_THREAD_PROCESS;
	rec.set_id = plabel_labels_for(s, &c->ring, set);
	plabel_emit_chain(s, &c->ring, &rec, NULL, 0, NULL, uregs, stack_top,
			  NULL);
	if (uregs)
		plabel_session_note_mm(s, c, rec.time_ns);
	plabel_session_committed(s, &c->ring);
}

/*
 * A sampled allocation of current (HEAP_ALLOC), from its system call: the
 * user registers are those it entered the kernel with, so the stack starts
 * in the C library's ioctl() and runs through the allocator's frames to
 * the allocating function. Stamped with the labels a sample would carry
 * now. Process context with interrupts off.
 */
bool plabel_sample_alloc(struct plabel_session *s,
			 const struct plabel_heap_args *a)
{
	struct plabel_cpu *c = s->cpu[smp_processor_id()];
	struct plabel_rec_sample rec = {
		.hdr.type = PLABEL_REC_ALLOC,
		.time_ns = ktime_get_ns(),
		.pid = current->tgid,
		.tid = current->pid,
		.cpu = smp_processor_id(),
		.flags = PLABEL_SAMPLE_USER,
	};
	struct plabel_rec_alloc info = {
		.addr = a->addr,
		.requested = a->requested,
		.usable = a->usable,
		.weight = a->weight,
	};
	struct pt_regs *uregs = plabel_user_regs(NULL);
	struct plabel_set *set;
	unsigned long top;
	bool ok;

	rcu_read_lock();
	set = plabel_current_set_rcu(&top);
	rec.set_id = plabel_labels_for(s, &c->ring, set);
	rcu_read_unlock();
	ok = plabel_emit_chain(s, &c->ring, &rec, &info, sizeof(info), NULL,
			       uregs, top, NULL);
	if (uregs)
		plabel_session_note_mm(s, c, rec.time_ns);
	plabel_session_committed(s, &c->ring);
	return ok;
}

/*
 * The FREE of a block an ALLOC reported: into the room ALLOCs and the
 * other records leave free, else counted exactly (lost_frees). Process
 * context with interrupts off.
 */
void plabel_sample_free(struct plabel_session *s, u64 addr)
{
	struct plabel_cpu *c = s->cpu[smp_processor_id()];
	struct plabel_rec_free rec = {
		.hdr.type = PLABEL_REC_FREE,
		.time_ns = ktime_get_ns(),
		.pid = current->tgid,
		.tid = current->pid,
		.addr = addr,
	};
	struct plabel_wr w;

	if (plabel_ring_room(&c->ring) < sizeof(rec) ||
	    !plabel_wr_begin_keep(&w, &c->ring, sizeof(rec), 0)) {
		WRITE_ONCE(c->ring.lost_frees, c->ring.lost_frees + 1);
		return;
	}
	plabel_wr_put(&w, &rec, sizeof(rec));
	plabel_wr_commit(&w);
	plabel_session_committed(s, &c->ring);
}

/*
 * From the sched_switch probe (offcpu.c): current leaves its CPU waiting,
 * in state (TASK_RUNNING: preempted), at now; kips[0..nk) is its kernel
 * chain (session.c walks it). Its OFFCPU record, then its slot in the
 * session's off-CPU table (taken first: without one, no record is written
 * and one is counted lost). Interrupts are off, the runqueue lock held.
 */
void plabel_sample_offcpu(struct plabel_session *s, unsigned int state,
			  u64 now, const u64 *kips, u16 nk)
{
	struct plabel_cpu *c = s->cpu[smp_processor_id()];
	struct plabel_rec_sample rec = {
		.hdr.type = PLABEL_REC_OFFCPU,
		.time_ns = now,
		.pid = current->tgid,
		.tid = current->pid,
		.cpu = smp_processor_id(),
		.wait_kind = state == TASK_RUNNING ? PLABEL_WAIT_PREEMPTED :
			     plabel_offcpu_kind(),
		.wait_state = state,
	};
	struct pt_regs *uregs = plabel_user_regs(NULL);
	struct plabel_kchain kc = { .ips = kips, .nk = nk };
	bool kernel = s->record & PLABEL_RECORD_KERNEL;
	struct plabel_offcpu_slot *slot;
	struct plabel_set *set;
	unsigned long top;

	if (!uregs)
		return;
	slot = plabel_offcpu_claim(s, current);
	if (!slot) {
		WRITE_ONCE(c->ring.lost, c->ring.lost + 1);
		__this_cpu_inc(plabel_stats.lost);
		return;
	}
	rcu_read_lock();
	set = plabel_current_set_rcu(&top);
	rec.set_id = plabel_labels_for(s, &c->ring, set);
	rcu_read_unlock();
	if (!plabel_emit_chain(s, &c->ring, &rec, NULL, 0, kernel ? &kc : NULL,
			       uregs, top, NULL)) {
		plabel_offcpu_release(slot);
		return;
	}
	WRITE_ONCE(slot->out_ns, now);
	__this_cpu_inc(plabel_stats.offcpu);
	plabel_session_note_mm(s, c, rec.time_ns);
	plabel_session_committed(s, &c->ring);
}

static int plabel_cpu_online(unsigned int cpu, struct hlist_node *node)
{
	struct plabel_session *s = hlist_entry(node, struct plabel_session,
					       hp_node);
	struct plabel_cpu *c = s->cpu[cpu];
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.size = sizeof(attr),
		.sample_period = s->period_ns,
		.pinned = 1,
		.exclude_idle = 1,
	};
	struct perf_event *event;

	/*
	 * The ring first. A CPU's bring-up must not fail for want of a
	 * profiling ring or counter: count it (debugfs online_failed) and
	 * leave that CPU unsampled; only the session's own start fails.
	 */
	if (plabel_ring_alloc(&c->ring, s->ring_size, cpu_to_node(cpu))) {
		if (s->starting)
			return -ENOMEM;
		this_cpu_inc(plabel_stats.online_failed);
		return 0;
	}
	if (!(s->record & PLABEL_RECORD_CPU))
		return 0;
	/* a new counter: its first interval is the period, no grid yet */
	c->period = s->period_ns;
	c->last_expiry = 0;
	event = perf_event_create_kernel_counter(&attr, cpu, NULL,
						 plabel_overflow, s);
	if (IS_ERR(event)) {
		this_cpu_inc(plabel_stats.online_failed);
		return 0;
	}
	c->event = event;
	return 0;
}

static int plabel_cpu_offline(unsigned int cpu, struct hlist_node *node)
{
	struct plabel_session *s = hlist_entry(node, struct plabel_session,
					       hp_node);
	struct plabel_cpu *c = s->cpu[cpu];
	struct perf_event *event = c->event;

	c->event = NULL;
	if (event)
		perf_event_release_kernel(event);
	return 0;
}

/*
 * Module init: the hotplug state, with no instance (no callback runs).
 * Sessions add and remove their instances.
 */
int plabel_sample_init(void)
{
	int ret;

	ret = cpuhp_setup_state_multi(CPUHP_AP_ONLINE_DYN, "plabel:online",
				      plabel_cpu_online, plabel_cpu_offline);
	if (ret < 0)
		return ret;
	plabel_hp_state = ret;
	return 0;
}

/* Module exit: no session is left, so no instance. */
void plabel_sample_exit(void)
{
	if (plabel_hp_state < 0)
		return;
	cpuhp_remove_multi_state(plabel_hp_state);
	plabel_hp_state = -1;
}

/*
 * Process context, under plabel_session_mutex: the session's ring and
 * counter on every online CPU, and on each CPU coming online. A failure
 * on any CPU undoes the others (the hotplug core calls the offline
 * callback for each CPU already done).
 */
int plabel_sample_start(struct plabel_session *s)
{
	int ret;

	s->starting = true;
	ret = cpuhp_state_add_instance(plabel_hp_state, &s->hp_node);
	s->starting = false;
	if (ret)
		return ret;
	s->hp_added = true;
	return 0;
}

/*
 * Process context, under plabel_session_mutex. Releasing a counter removes
 * it from its CPU first, so no handler runs for s after this returns.
 */
void plabel_sample_stop(struct plabel_session *s)
{
	if (!s->hp_added)
		return;
	cpuhp_state_remove_instance(plabel_hp_state, &s->hp_node);
	s->hp_added = false;
}
