/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Private interfaces of the profiling session (session.c), the sampler
 * (sample.c) and the per-CPU record rings (ring.c).
 *
 * Rings: one per CPU that was online during the session (its bytes are
 * allocated at the start by the starter for the CPUs online then, or when
 * a CPU comes online later, kept until the session is freed, NULL
 * before), a power-of-two byte array with free-running head (producer) and tail (consumer) positions. Every writer of a CPU's ring
 * runs on that CPU with interrupts disabled (the perf overflow handler in hard
 * interrupt context; clone/exec/mmap writers in process context wrap their
 * writes in local_irq_save()), so there is exactly one producer at a time per
 * ring and records never interleave. The consumer is read(), serialized by
 * the session's read_lock. head is published with smp_store_release() after
 * the record's bytes, tail after they were copied out; each side reads the
 * other's position with smp_load_acquire().
 *
 * Sessions: up to kernel.plabel.max_sessions run at once, each with its own
 * options, counters (one perf event per CPU, an instance of the module's
 * multi-instance CPU hotplug state), rings, tick and reader. A running
 * session is on an RCU list (session.c) and holds one of
 * PLABEL_MAX_SESSIONS slots (its entry in plabel_set.gen); the
 * tracepoint hooks walk the list under RCU, each overflow handler knows
 * only its own counter's session. Start, stop and release run under
 * plabel_session_mutex; a stop takes the session off the list and waits
 * for an RCU grace period before its slot is free again or it is freed.
 *
 * Lock order: plabel_session_mutex (start/stop/release) > labels.c's
 * plabel_intern_lock (plabel_sets_forget_slot() when a slot's
 * generations start over, and the slot_gen debugfs file) and the CPU
 * hotplug lock and cpuhp_state_mutex (taken inside
 * cpuhp_state_add_instance() and cpuhp_state_remove_instance(); the
 * hotplug callbacks take none of plabel's locks) > session->read_lock >
 * mmap_lock of a scanned mm. Off-CPU sessions: plabel_session_mutex >
 * offcpu.c's plabel_offcpu_lock > tracepoints_mutex and the CPU hotplug
 * lock (inside tracepoint_probe_register()/_unregister(), for jump labels
 * and static calls); the probe's linger work takes plabel_offcpu_lock
 * alone, and unload cancels that work before it takes the lock.
 * Nothing in interrupt context takes a lock.
 */
#ifndef PLABEL_SESSION_H
#define PLABEL_SESSION_H

#include <linux/irq_work.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "internal.h"

#define PLABEL_HZ_MAX		PLABEL_MAX_SAMPLE_HZ	/* sample_hz ceiling */
#define PLABEL_STACK_MAX	1024	/* max_stack ceiling, user frames */
#define PLABEL_KSTACK_MAX	64	/* kernel frames per record */
#define PLABEL_SNAP_MAX		65528	/* dwarf stack_size ceiling, bytes */
#define PLABEL_RING_MIN		4096	/* bytes */
#define PLABEL_RING_MAX		(64U << 20)
#define PLABEL_TREE_MAX		4096	/* processes a TREE session follows */
#define PLABEL_TREE_SLOTS	(2 * PLABEL_TREE_MAX)
#define PLABEL_TREE_PROBE	64	/* slots a lookup probes at most */
#define PLABEL_TREE_TOMB	(-1)	/* a slot whose process exited */
#define PLABEL_MM_CACHE		8	/* recently scanned mms, per CPU */
#define PLABEL_MM_PENDING	16	/* mm scans waiting, per CPU */
#define PLABEL_TICK_MS		50	/* mm scan period */
#define PLABEL_IDLE_TICK_MS	1000	/* WATERMARK, with nothing to walk */
#define PLABEL_SCAN_BUDGET_US	5000	/* mm walking per tick, at most */
#define PLABEL_SCAN_MAPS	1024	/* mappings reported per walk */
#define PLABEL_SCAN_GAP_MS	200	/* between walks of one mm */
#define PLABEL_SCAN_HIST	64	/* mms whose last walk is kept */
#define PLABEL_WAKE_MS		1000	/* between the tick's reader wake-ups */
#define PLABEL_WEIGHT_MAX	PLABEL_SAMPLE_PERIODS_MAX
/* Ring bytes an ALLOC leaves free, for FREEs: size >> this */
#define PLABEL_FREE_RESERVE_SHIFT	3
#define PLABEL_OFFCPU_BUCKETS	4096	/* off-CPU table, a power of 2 */
#define PLABEL_OFFCPU_WAYS	4	/* slots per bucket */

struct plabel_ring {
	u8 *data;
	u32 size;		/* bytes, power of two */
	u32 keep;		/* bytes only FREE records may take */
	u64 head;		/* producer position */
	u64 tail;		/* consumer position */
	u64 lost;		/* producer: records dropped, in total */
	u64 lost_seen;		/* consumer: drops already reported */
	u64 lost_periods;	/* producer: periods of dropped samples */
	u64 lost_periods_seen;	/* consumer */
	u64 lost_frees;		/* producer: FREE records dropped */
	u64 lost_frees_seen;	/* consumer */
	u64 sync_sent;		/* consumer: time_ns of the last SYNC */
};

/* A record being written into a ring; see plabel_wr_begin(). */
struct plabel_wr {
	struct plabel_ring *ring;
	u64 start;
	u32 len;
	u32 max;
};

struct plabel_mm_ref {
	struct mm_struct *mm;	/* NULL: free; set last (release) */
	struct task_struct *task;	/* pending only: for its root dir */
	pid_t tgid;
	u64 time_ns;		/* pending only: of the record that asked */
	unsigned long exec_vm;	/* cache only: executable pages */
	u32 seq;		/* cache only: session exec_seq */
};

/* Per CPU state of a session; written only on that CPU with irqs off. */
struct plabel_cpu {
	struct plabel_ring ring;
	struct perf_event *event;	/* the CPU's counter, hotplug callbacks */
	u64 last_expiry;	/* timer expiry of the last overflow here */
	const void *last_task;	/* current then; compared, never followed */
	u64 period;		/* the timer's interval since then */
	u64 rnd;		/* xorshift64 state for the next period */
	struct plabel_mm_ref cache[PLABEL_MM_CACHE];
	unsigned int cache_next;
	struct plabel_mm_ref pending[PLABEL_MM_PENDING];
};

/* When an mm was last walked; the tick's own, process context. */
struct plabel_scan_hist {
	struct mm_struct *mm;	/* compared, never followed */
	pid_t tgid;
	u32 seq;
	u64 when;
	unsigned long exec_vm;	/* mm->exec_vm at that walk */
};

/* A thread off its CPU, in its session's table (offcpu.c). */
struct plabel_offcpu_slot {
	unsigned long task;	/* its task_struct, 0: free; compared only */
	u64 out_ns;		/* time_ns of its OFFCPU record */
};

enum plabel_session_state {
	PLABEL_SESSION_RUNNING = 1,
	PLABEL_SESSION_STOPPED = 2,
};

struct plabel_session {
	/* options in force, fixed while running */
	u32 target;
	u32 callchain;
	u32 record;
	u32 hz;
	u64 period_ns;
	u32 max_stack;
	u32 stack_size;
	u64 heap_bytes;		/* PLABEL_RECORD_HEAP: mean sampling interval */
	u32 slot;		/* its entry in plabel_set.gen, while running */
	u16 gen;		/* its generation in that slot, never 0 */
	u64 offcpu_min_ns;	/* shortest wait with an OFFCPU_END record */
	struct plabel_offcpu_slot *offcpu;	/* OFFCPU: the table */
	bool offcpu_hooked;	/* holds a reference to the switch probe */
	struct list_head node;	/* in the running list, session.c */
	pid_t *pids;		/* PIDS: sorted */
	u32 npids;
	pid_t *tree;		/* TREE: open-addressed tgids, 0 is empty */
	unsigned long *joined;	/* AT_EXEC: bit i, pids[i] exec'ed */
	struct pid **exec_pids;	/* AT_EXEC: the processes pids[] named */
	atomic_t tree_count;
	atomic_t exec_seq;	/* bumped by exec: invalidates mm caches */
	atomic64_t lost_maps;	/* mappings not reported (walk cap) */
	atomic64_t lost_procs;	/* TREE processes not followed */
	u64 lost_maps_seen;	/* under read_lock */
	u64 lost_procs_seen;
	struct plabel_scan_hist scan_hist[PLABEL_SCAN_HIST];
	unsigned int scan_cpu;	/* where the tick's walk goes on */
	s64 scan_debt;		/* walking time not yet paid off, ns */

	struct plabel_cpu **cpu;	/* [nr_cpu_ids], possible CPUs */
	u32 ring_size;
	struct hlist_node hp_node;	/* instance of the hotplug state */
	bool hp_added;		/* hp_node is an instance */
	bool starting;		/* cpuhp callbacks of the start itself */

	int state;		/* enum plabel_session_state */
	struct plabel_rec_stream stream;
	bool stream_sent;	/* under read_lock */
	u32 start_flags;	/* PLABEL_START_*, fixed */
	bool news;		/* WATERMARK: plabel_session_news() since a read */
	unsigned int next_cpu;	/* under read_lock */
	struct mutex read_lock;
	wait_queue_head_t wq;
	struct irq_work wake_work;
	struct delayed_work tick;
	/* WATERMARK: bit 0, the tick was asked to come within a tick */
	unsigned long kicked;
	struct irq_work kick_work;	/* brings the tick nearer */
	u64 wake_next;		/* the tick's next reader wake-up, ns */
	u64 sync_next;		/* a WATERMARK tick's next grace period */
	/*
	 * SYNC records (session.c): the tick notes sync_start and waits for a
	 * grace period (call_rcu); every record stamped before sync_start
	 * was written with interrupts off, so it is in its ring once the
	 * grace period ends, and the callback publishes synced_ns.
	 */
	struct rcu_head sync_rcu;
	u64 sync_start;		/* tick's, while sync_pending */
	u64 synced_ns;		/* release/acquire */
	bool sync_pending;	/* the tick's call_rcu is queued */
	/* processes whose thread contexts records carry (tlsctx.c) */
	struct plabel_tlsctx __rcu **tlsctx;
	u32 tlsctx_count;	/* entries in it, under tlsctx_lock */
	struct mutex tlsctx_lock;
	char *path_buf;		/* PATH_MAX, for the mm scanner */
	char *root_buf;		/* PATH_MAX, for the mm scanner */
};

/* Counters shown in debugfs, per CPU, updated with irqs off. */
struct plabel_stats {
	u64 samples;		/* SAMPLE records written */
	u64 offcpu;		/* OFFCPU records written */
	u64 switch_calls;	/* switch probe calls with work to do */
	u64 switch_ns;		/* local_clock() time in them */
	u64 records;		/* all records written to rings */
	u64 lost;		/* records dropped, ring full */
	u64 handler_calls;
	u64 handler_ns;		/* local_clock() time inside the handler */
	u64 mm_scans;
	u64 tree_full;		/* TREE processes not followed */
	u64 scan_ns;		/* time walking mappings */
	u64 online_failed;	/* counters that did not start on a CPU */
};
DECLARE_PER_CPU(struct plabel_stats, plabel_stats);

/* session.c: the queue of the sessions' ticks and the off-CPU linger */
extern struct workqueue_struct *plabel_wq;

/* ring.c; irqs off, on the ring's CPU, for the producer side */
/* process context: the session's start, or the CPU's online callback */
int plabel_ring_alloc(struct plabel_ring *r, u32 size, int node);
void plabel_ring_free(struct plabel_ring *r);
bool plabel_wr_begin(struct plabel_wr *w, struct plabel_ring *r, u32 max);
/* The same, when keep bytes would still be free after max. */
bool plabel_wr_begin_keep(struct plabel_wr *w, struct plabel_ring *r, u32 max,
			  u32 keep);
/* Bytes a record may take now (0 before the ring has its bytes). */
u32 plabel_ring_room(struct plabel_ring *r);
void plabel_wr_put(struct plabel_wr *w, const void *src, u32 len);
void plabel_wr_skip(struct plabel_wr *w, u32 len);
u32 plabel_wr_put_user(struct plabel_wr *w, unsigned long uaddr, u32 len);
void plabel_wr_patch(struct plabel_wr *w, u32 off, const void *src, u32 len);
void plabel_wr_commit(struct plabel_wr *w);

/*
 * Where bytes [off, off + len) of the record being written lie in the
 * ring, when in one piece (not across the ring's end) and within the
 * room reserved; NULL if not. For writing in place what a put or a patch
 * would copy: in the handler, fewer instructions than a memcpy(), which
 * on x86 moves a byte a step (rep movsb).
 */
static inline void *plabel_wr_place(struct plabel_wr *w, u32 off, u32 len)
{
	struct plabel_ring *r = w->ring;
	u32 at = (w->start + off) & (r->size - 1);

	if (off > w->max || len > w->max - off || len > r->size - at)
		return NULL;
	return r->data + at;
}
/* consumer side, under read_lock */
bool plabel_ring_empty(struct plabel_ring *r);
ssize_t plabel_ring_copy_out(struct plabel_ring *r, char __user *buf,
			     size_t len);

/* session.c, any context */
bool plabel_session_wants(struct plabel_session *s, pid_t tgid);
void plabel_session_note_mm(struct plabel_session *s, struct plabel_cpu *c,
			    u64 time_ns);
void plabel_session_committed(struct plabel_session *s, struct plabel_ring *r);
bool plabel_session_emit_labelset(struct plabel_session *s,
				  struct plabel_ring *r,
				  struct plabel_set *set);

/* session.c: the sched_switch probe's work (offcpu.c) */
void plabel_session_on_switch(struct task_struct *prev,
			      struct task_struct *next, unsigned int state,
			      bool out, bool in, void *kfirst);

/*
 * offcpu.c. The hook and the table's allocation in process context (the
 * hook's users under offcpu.c's own lock); the rest from the switch probe.
 */
int plabel_offcpu_alloc(struct plabel_session *s);
void plabel_offcpu_free(struct plabel_session *s);
int plabel_offcpu_hook_get(void);
void plabel_offcpu_hook_put(void);
void plabel_offcpu_exit(void);
struct plabel_offcpu_slot *plabel_offcpu_claim(struct plabel_session *s,
					       struct task_struct *t);
void plabel_offcpu_release(struct plabel_offcpu_slot *slot);
u32 plabel_offcpu_kind(void);
void plabel_offcpu_in(struct plabel_session *s, struct task_struct *next,
		      u64 now);

/* sample.c */
/*
 * From the switch probe: current leaves its CPU in state, at now; its
 * kernel chain, when the session records one, is kips[0..nk).
 */
void plabel_sample_offcpu(struct plabel_session *s, unsigned int state,
			  u64 now, const u64 *kips, u16 nk);
int plabel_sample_init(void);
void plabel_sample_exit(void);
int plabel_sample_start(struct plabel_session *s);
void plabel_sample_stop(struct plabel_session *s);
/* irqs off; current is the creator */
void plabel_sample_thread(struct plabel_session *s, struct task_struct *child,
			  u64 clone_flags, struct plabel_set *set,
			  unsigned long stack_top);
/*
 * Process context, irqs off: an ALLOC record of current (false: no room,
 * counted as a lost record), a FREE record (no room: counted in
 * lost_frees).
 */
bool plabel_sample_alloc(struct plabel_session *s,
			 const struct plabel_heap_args *a);
void plabel_sample_free(struct plabel_session *s, u64 addr);

/* tlsctx.c: the ioctl and teardown in process context, the rest irqs off */
struct plabel_tlsctx;
int plabel_tlsctx_set(struct plabel_session *s,
		      const struct plabel_tlsctx_args *a);
void plabel_tlsctx_free(struct plabel_session *s);
const struct plabel_tlsctx *plabel_tlsctx_lookup(struct plabel_session *s,
						 u32 *room);
void plabel_tlsctx_emit(const struct plabel_tlsctx *e, struct plabel_wr *w,
			u32 *flags);

#endif /* PLABEL_SESSION_H */
