// SPDX-License-Identifier: GPL-2.0
/*
 * plabel serve: one session on /dev/plabel for the server's life, and an
 * HTTP server (libmicrohttpd) with Go's net/http/pprof paths:
 *
 *   /debug/pprof/profile?seconds=N  the CPU profile of the next N seconds
 *   /debug/pprof/threadcreate       thread creations since the start
 *   /debug/pprof/heap, allocs       with --heap: sampled allocations
 *                                   since the start, and those in use
 *   /debug/pprof/                   an index
 *
 * Every request for a profile is a window: its own collector (collect.h)
 * fed the records stamped from the request's arrival for N seconds, then
 * finished into a gzipped profile.proto. A collector started late lacks
 * what the stream said before it: the label sets (the kernel sends each
 * set once per session, before its first sample), the executable mappings
 * (sent when a process is first sampled, then again at most every few
 * seconds), exec and thread names. So the reader keeps the latest of each
 * of those records that still describes something alive (the "state
 * log": LABELSET by set id, MMAP by process and mapping, EXEC by process,
 * COMM by thread; the pids that are gone are pruned) and feeds them to
 * every new window before its first live record. With --heap the reader
 * also keeps the heap log (the blocks in use and the freed, counted; see
 * struct serve_log) for /debug/pprof/heap and allocs, windows primed
 * from it and finished at once. THREAD records are kept
 * too (up to PLABEL_SERVE_THREAD_LOG bytes, the oldest dropped and
 * counted) for /debug/pprof/threadcreate, which is a window primed with
 * the state log and the thread log and finished at once.
 *
 * Threads:
 *  - main: the options, the socket, the session; then it waits for SIGINT
 *    or SIGTERM (every thread blocks them) and stops the rest in order.
 *  - the reader: the only reader of /dev/plabel; keeps the state log,
 *    feeds each open window what it asked for, and hands windows whose
 *    time is over (and whose records have all come) to the finishers.
 *  - the finishers (PLABEL_SERVE_FINISHERS): build, encode and compress
 *    the profiles, which can take a while (symbols), away from the
 *    reader, so the kernel's rings keep being emptied meanwhile.
 *  - libmicrohttpd's one internal polling thread (poll()): a request's
 *    handler only parses the query, registers a window and suspends the
 *    connection, so one thread serves every connection; unlike a thread
 *    per connection, stalled or slow clients cost no thread each, and the
 *    library's connection timeout and memory limit cut them.
 *
 * Lock: srv->lock guards the window lists, every request's state and the
 * counters; the reader holds it while it feeds the windows, the handlers
 * while they add one, a finisher only to take one and to hand its
 * result back. The state log and the read buffer are the reader's alone.
 * A suspended connection is resumed once its result is there, with the
 * lock dropped (serve_answer()); all are resumed before the daemon stops,
 * as the library asks. srv->syms_lock guards only which struct
 * plabel_syms new windows take (serve_syms()); that struct locks itself.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"
#include "heaplib.h"
#include "plabel.h"
#include "plabel_uapi.h"
#include "peer.h"
#include "serve.h"
#include "session.h"
#include "stream.h"
#include "table.h"
#include "threads.h"

#define PLABEL_SERVE_READ_BUF	(4U << 20)
/*
 * As in record.c, a read() that left this much room emptied every ring:
 * each record stamped before the read began has come, unless it took
 * longer than the margin from its stamp to its ring. record waits 2 s
 * for that (a virtual CPU held up by its host); serve answers a window
 * this long after its end, since scrapers ask for seconds=N with a
 * timeout of about N + 1 s, and a record later still is left out of that
 * window only.
 */
#define PLABEL_SERVE_SETTLE_ROOM	(PLABEL_SERVE_READ_BUF / 2)
#define PLABEL_SERVE_SETTLE_MARGIN_NS	500000000ULL
/* a window is finished this long after its end even if not settled */
#define PLABEL_SERVE_LATE_NS	10000000000ULL
#define PLABEL_SERVE_POLL_MS	250
/*
 * Threads building profiles: each window has its own collector, so they
 * build side by side, and a window whose programs take long to
 * symbolize holds up the others only while they need a file it is
 * reading or looking up.
 */
#define PLABEL_SERVE_FINISHERS	4
/*
 * The windows share the files they symbolize with (libdw's reading of a
 * file's symbols and debug info is most of what a scrape costs), through
 * one struct plabel_syms at a time; a window opened once it is this old,
 * holds this many file versions or copied this many bytes of files others
 * than root can write (half its budget: one user's files must not leave
 * the others' unsymbolized for long) starts a fresh one, and the old one
 * goes with its last window: files of processes gone, and the kernel's
 * modules loaded since, do not stay for the server's life.
 */
#define PLABEL_SERVE_SYMS_NS	(600ULL * 1000000000ULL)
#define PLABEL_SERVE_SYMS_FILES	1024
#define PLABEL_SERVE_SYMS_COPIED	(1ULL << 30)
#define PLABEL_SERVE_PRUNE_NS	10000000000ULL
/* bytes of THREAD records kept for threadcreate; then the oldest half go */
#define PLABEL_SERVE_THREAD_LOG	(32U << 20)
/*
 * bytes of the heap log (heap and allocs): ALLOC and FREE records not
 * settled yet, the blocks in use, one record of each stack, thread,
 * label set and size freed, and their entries; over it, the least
 * recently used half of the larger table goes, counted
 */
#define PLABEL_SERVE_HEAP_LOG	(64U << 20)
/* bytes of LABELSET records kept; then the least recently used half go */
#define PLABEL_SERVE_LSET_LOG	(64U << 20)
/* what a window is fed in one plabel_collect_buffer() when primed */
#define PLABEL_SERVE_CHUNK	(1U << 20)
/* libmicrohttpd's limits */
#define PLABEL_SERVE_CONN_TIMEOUT_S	10
#define PLABEL_SERVE_CONN_MEMORY	(16U << 10)
#define PLABEL_SERVE_CONN_LIMIT		64

static uint64_t serve_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int64_t serve_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- the state log (the reader's) ---- */

/* One kept record: its key (k[]), time, last use and bytes. */
struct serve_ent {
	uint64_t k[4];
	uint64_t time_ns;
	uint64_t used_ns;
	uint8_t *bytes;		/* NULL: removed, until the table is compacted */
	uint32_t len;
	uint8_t *orig;		/* LABELSET: the unsanitized record, or NULL */
	uint32_t orig_len;
	uint64_t n;		/* heap's freed: allocations it stands for */
};

struct serve_tab {
	struct serve_ent *e;
	size_t n, cap;
	struct plabel_itab idx;
	size_t bytes;
	size_t removed;		/* entries removed, until compacted */
};

/*
 * Keys can be chosen by the processes sampled (a heap block's address,
 * its record's bytes): hashed with a seed of the server's own, so that
 * nobody lines them up in one chain.
 */
static uint64_t serve_seed;

static uint64_t serve_key_hash(const uint64_t k[4])
{
	return plabel_hash2(plabel_hash2(k[0] ^ serve_seed, k[1]),
			    plabel_hash2(k[2], k[3]));
}

static struct serve_ent *serve_tab_find(struct serve_tab *t,
					const uint64_t k[4])
{
	size_t pos = SIZE_MAX, i;
	uint64_t h = serve_key_hash(k);

	while ((i = plabel_itab_next(&t->idx, h, &pos)) != SIZE_MAX) {
		struct serve_ent *e = &t->e[i];

		if (e->bytes && !memcmp(e->k, k, sizeof(e->k)))
			return e;
	}
	return NULL;
}

static void serve_ent_drop(struct serve_tab *t, struct serve_ent *e)
{
	if (e->bytes)
		t->removed++;
	t->bytes -= e->len + e->orig_len;
	free(e->bytes);
	free(e->orig);
	e->bytes = e->orig = NULL;
	e->len = e->orig_len = 0;
}

/*
 * Keep rec (len bytes; orig, olen: the unsanitized one or NULL) under k,
 * replacing what was there. 0 or -ENOMEM.
 */
static int serve_tab_put(struct serve_tab *t, const uint64_t k[4],
			 uint64_t time_ns, const void *rec, size_t len,
			 const void *orig, size_t olen)
{
	struct serve_ent *e = serve_tab_find(t, k);
	uint8_t *b = malloc(len), *o = NULL;

	if (!b)
		return -ENOMEM;
	if (orig) {
		o = malloc(olen);
		if (!o) {
			free(b);
			return -ENOMEM;
		}
		memcpy(o, orig, olen);
	}
	memcpy(b, rec, len);
	if (!e) {
		/* a removed entry of this key, not compacted yet, is reused */
		size_t pos = SIZE_MAX, i;

		while ((i = plabel_itab_next(&t->idx, serve_key_hash(k),
					     &pos)) != SIZE_MAX)
			if (!t->e[i].bytes &&
			    !memcmp(t->e[i].k, k, sizeof(t->e[i].k))) {
				e = &t->e[i];
				t->removed--;
				break;
			}
	}
	if (!e) {
		if (plabel_grow(&t->e, &t->cap, t->n, sizeof(*t->e)) ||
		    plabel_itab_reserve(&t->idx, 1)) {
			free(b);
			free(o);
			return -ENOMEM;
		}
		e = &t->e[t->n];
		memset(e, 0, sizeof(*e));
		memcpy(e->k, k, sizeof(e->k));
		plabel_itab_put(&t->idx, serve_key_hash(k), t->n++);
	} else {
		serve_ent_drop(t, e);
	}
	e->bytes = b;
	e->len = len;
	e->orig = o;
	e->orig_len = o ? olen : 0;
	e->time_ns = time_ns;
	e->used_ns = serve_now_ns();
	t->bytes += e->len + e->orig_len;
	return 0;
}

/*
 * Keep record r (stamped time_ns) under k unless what is there is newer.
 * 0 or -ENOMEM.
 */
static int serve_tab_put_newer(struct serve_tab *t, const uint64_t k[4],
			       uint64_t time_ns,
			       const struct plabel_dec_rec *r)
{
	struct serve_ent *e = serve_tab_find(t, k);

	if (e && e->time_ns > time_ns)
		return 0;
	return serve_tab_put(t, k, time_ns, r->raw, r->size, NULL, 0);
}

/* Drop the removed entries and index the rest anew. */
static void serve_tab_compact(struct serve_tab *t)
{
	size_t i, k = 0;

	for (i = 0; i < t->n; i++)
		if (t->e[i].bytes)
			t->e[k++] = t->e[i];
	t->n = k;
	t->removed = 0;
	plabel_itab_clear(&t->idx);
	for (i = 0; i < t->n; i++)
		plabel_itab_put(&t->idx, serve_key_hash(t->e[i].k), i);
}

static void serve_tab_free(struct serve_tab *t)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		free(t->e[i].bytes);
		free(t->e[i].orig);
	}
	free(t->e);
	plabel_itab_free(&t->idx);
	memset(t, 0, sizeof(*t));
}

struct serve_log {
	uint8_t stream[sizeof(struct plabel_rec_stream)];
	size_t stream_len;
	struct serve_tab lsets;	/* k: id */
	struct serve_tab maps;	/* k: pid, start, end, offset */
	struct serve_tab execs;	/* k: pid */
	struct serve_tab comms;	/* k: pid, tid */
	/*
	 * record --every --off-cpu: each thread's last switch-out (its
	 * OFFCPU record) until its END comes, for windows opened while it
	 * waits (k: pid, tid)
	 */
	struct serve_tab waits;
	uint8_t *threads;	/* THREAD records, arrival order */
	size_t nthreads, threads_cap;
	uint64_t threads_dropped;	/* records */
	uint64_t lsets_dropped;
	uint64_t last_set;	/* the set last marked used */
	uint64_t last_prune;
	/*
	 * --heap: ALLOC and FREE records wait in pend until every record
	 * stamped before them has come (settled), then free the blocks
	 * they name in time order: live holds the ALLOC record of each
	 * block in use (k: pid, address), freed one ALLOC record (time and
	 * cpu zeroed, the address 1) for each stack, thread, label set and
	 * size freed, with how many (k: pid, hash, length, a probe).
	 */
	uint8_t *pend;
	size_t npend, pend_cap;
	struct serve_tab live, freed;
	uint64_t frees, unmatched, implied, lost_frees, heap_dropped;
	uint8_t *scratch;	/* a freed record being made */
	size_t scratch_cap;
};

/* ---- windows and requests ---- */

struct serve_req;

struct serve_win {
	struct serve_win *next;
	struct serve_req *req;	/* NULL: the client went away */
	enum plabel_prof_kind kind;
	int primed;
	int err;		/* a failed feed: -ENOMEM */
	uint64_t start_ns, end_ns;
	int64_t wall_ns;
	unsigned int secs;
	uint64_t dur_ns;	/* threadcreate: since the start */
	int file;		/* record --every: written to files, no request */
	int allocs;		/* heap: as /debug/pprof/allocs, alloc_space */
	int64_t stamp_ns;	/* --every's heap: its interval's start */
	/* heap: what it was primed with, records and allocations */
	uint64_t heap_live, heap_freed, heap_freed_n;
	/*
	 * heap?seconds=N: the profile as it was at the request (built
	 * first), which the one N s later less it answers; base_wall_ns
	 * when it was
	 */
	int delta;
	struct plabel_prof *base;
	int64_t base_wall_ns;
	struct plabel_serve_filter filt;
	uint64_t memo_set;	/* label filter: the set last matched */
	int memo_ok;
	struct plabel_syms *syms;
	struct plabel_collect *col;
	struct plabel_timeline *tl;	/* record --every --timeline */
	uint8_t *buf;		/* what it is fed of one read() */
	size_t len, cap;
	uint64_t threads_dropped;
};

struct serve_req {
	struct MHD_Connection *conn;
	struct serve_win *win;
	int suspended;
	struct serve_req *resume_next;	/* on srv->resume */
	int done;		/* status and body are set */
	unsigned int status;
	const char *ctype;
	uint8_t *body;		/* malloc()ed */
	size_t len;
};

struct serve {
	int fd;
	struct plabel_tctx *tctx;	/* thread contexts; its own lock */
	int wake[2];		/* the reader's: a new window, or stop */
	pthread_mutex_t lock;
	pthread_mutex_t syms_lock;	/* syms and syms_ns (their own) */
	struct plabel_syms *syms;	/* what new windows symbolize with */
	uint64_t syms_ns;		/* when it was started */
	pthread_cond_t cond;	/* the finisher: a window is ready, or stop */
	pthread_cond_t gone;	/* main: a request ended */
	struct serve_win *open;	/* fed by the reader */
	struct serve_win *ready, **ready_tail;
	struct serve_req *resume;	/* answered, to resume unlocked */
	unsigned int active;	/* windows open, ready or being finished */
	unsigned int nreqs;	/* request contexts alive */
	uint64_t t0_ns;		/* when it started (CLOCK_MONOTONIC) */
	int64_t wall0_ns;	/* and CLOCK_REALTIME */
	int stopping;
	int fatal;
	struct MHD_Daemon *mhd;

	/* options */
	unsigned int max_seconds;
	unsigned int max_requests;
	int sanitize;
	unsigned long hz;
	uint64_t every_ns;	/* record --every: rotate windows */
	const char *out_dir;
	unsigned int files_failed;
	struct sockaddr_storage local;	/* the listener's, for check_peer */
	int check_peer;
	int remote_ok;
	uid_t allow[PLABEL_SERVE_MAX_ALLOW];
	unsigned int nallow;
	uint64_t refused;	/* connections not taken */
	uint64_t refused_said;	/* of them, told on stderr */
	uint64_t refused_ns;	/* when last told */
	const int32_t *pids;	/* goroutine's processes (cfg's) */
	uint32_t npids;
	uint32_t callchain;
	uint64_t heap_bytes;	/* the session's heap interval; 0: none */
	int offcpu;		/* record --every --off-cpu */
	int timeline;		/* record --every --timeline */
	const char *timeline_label;

	/* the reader's */
	struct serve_log log;
	uint8_t *rbuf;
	uint64_t settled;
	uint8_t *sbuf;		/* a sanitized LABELSET */
	size_t sbuf_cap;
	uint64_t lost_reader;	/* records the reader could not keep */
};

static void serve_win_free(struct serve_win *w)
{
	if (!w)
		return;
	plabel_collect_free(w->col);
	plabel_prof_free(w->base);
	if (w->tl)
		plabel_tl_release(w->tl);
	free(w->tl);
	plabel_syms_free(w->syms);
	free(w->buf);
	free(w);
}

static int serve_win_append(struct serve_win *w, const void *rec, size_t len)
{
	if (plabel_grow_to(&w->buf, &w->cap, w->len + len, 1))
		return -ENOMEM;
	memcpy(w->buf + w->len, rec, len);
	w->len += len;
	return 0;
}

static void serve_win_flush(struct serve_win *w)
{
	int ret;

	if (!w->len || w->err)
		return;
	ret = plabel_collect_buffer(w->col, w->buf, w->len);
	w->len = 0;
	if (ret == -ENOMEM)
		w->err = ret;
}

static int serve_win_add(struct serve_win *w, const void *rec, size_t len)
{
	int ret;

	if (w->err)
		return 0;
	ret = serve_win_append(w, rec, len);
	if (ret) {
		w->err = ret;
		return ret;
	}
	if (w->len >= PLABEL_SERVE_CHUNK)
		serve_win_flush(w);
	return 0;
}

/* ---- the reader ---- */

/* Wake the reader (a full pipe already will: its poll() times out too). */
static void serve_wake(struct serve *srv)
{
	char b = 'w';

	if (write(srv->wake[1], &b, 1) < 0) {
		/* full: it is woken already */
	}
}

static void serve_tab_prime(struct serve_win *w, struct serve_tab *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (t->e[i].bytes)
			serve_win_add(w, t->e[i].bytes, t->e[i].len);
}

static void serve_heap_prime(struct serve *srv, struct serve_win *w);
static int serve_heap_stale(struct serve_log *log,
			    const struct serve_ent *e);

/*
 * Feed a new window what the stream said before it: the stream record,
 * the label sets, execs, mappings and thread names (for threadcreate the
 * thread creations, for heap the heap log).
 */
static void serve_prime(struct serve *srv, struct serve_win *w)
{
	struct serve_log *log = &srv->log;

	w->primed = 1;
	if (log->stream_len)
		serve_win_add(w, log->stream, log->stream_len);
	serve_tab_prime(w, &log->lsets);
	serve_tab_prime(w, &log->execs);
	serve_tab_prime(w, &log->maps);
	serve_tab_prime(w, &log->comms);
	/* the waits going on: their ENDs may come in this window */
	if (w->kind == PLABEL_PROF_CPU)
		serve_tab_prime(w, &log->waits);
	if (w->kind == PLABEL_PROF_THREADCREATE) {
		struct plabel_dec d;
		struct plabel_dec_rec *r = malloc(sizeof(*r));

		if (!r) {
			w->err = -ENOMEM;
			return;
		}
		plabel_dec_init(&d, log->threads, log->nthreads);
		while (plabel_dec_next(&d, r) > 0)
			serve_win_add(w, r->raw, r->size);
		free(r);
		w->threads_dropped = log->threads_dropped;
	}
	if (w->kind == PLABEL_PROF_HEAP && w->base) {
		/* the profile to answer with: its time from the first's */
		w->wall_ns = serve_wall_ns();
		w->dur_ns = w->wall_ns > w->base_wall_ns ?
			    (uint64_t)(w->wall_ns - w->base_wall_ns) : 0;
	}
	if (w->kind == PLABEL_PROF_HEAP)
		serve_heap_prime(srv, w);
	serve_win_flush(w);
}

static int serve_alive(uint32_t pid, uint32_t tid)
{
	if (tid && tid != pid)
		return !(syscall(SYS_tgkill, pid, tid, 0) && errno == ESRCH);
	return !(kill(pid, 0) && errno == ESRCH);
}

/* Forget the processes and threads that are gone. */
static void serve_prune(struct serve *srv, uint64_t now)
{
	struct serve_log *log = &srv->log;
	struct serve_tab *tabs[] = { &log->maps, &log->execs, &log->comms,
				     &log->waits };
	uint64_t seen[256];
	size_t i, k;

	log->last_prune = now;
	for (k = 0; k < 4; k++) {
		struct serve_tab *t = tabs[k];
		size_t before = t->n;

		for (i = 0; i < t->n; i++)
			if (t->e[i].bytes &&
			    !serve_alive(t->e[i].k[0],
					 t == &log->comms || t == &log->waits ?
					 t->e[i].k[1] : 0))
				serve_ent_drop(t, &t->e[i]);
		if (before)
			serve_tab_compact(t);
	}
	/* heap entries of processes gone, or of images replaced */
	memset(seen, 0, sizeof(seen));
	for (k = 0; k < 2; k++) {
		struct serve_tab *t = k ? &log->freed : &log->live;
		int any = 0;

		for (i = 0; i < t->n; i++) {
			uint32_t pid = (uint32_t)t->e[i].k[0];
			uint64_t *c = &seen[pid % 256];

			if (!t->e[i].bytes)
				continue;
			/* a pid's answer, cached: 1 + pid * 2 + alive */
			if (!*c || (*c - 1) / 2 != pid)
				*c = 1 + pid * 2 + !!serve_alive(pid, 0);
			if (!((*c - 1) & 1) || serve_heap_stale(log, &t->e[i])) {
				serve_ent_drop(t, &t->e[i]);
				any = 1;
			}
		}
		if (any)
			serve_tab_compact(t);
	}
}

static int serve_cmp_used(const void *a, const void *b)
{
	const struct serve_ent *x = a, *y = b;

	return x->used_ns < y->used_ns ? 1 : x->used_ns > y->used_ns ? -1 : 0;
}

/* Over PLABEL_SERVE_LSET_LOG: keep the most recently used half. */
static void serve_lsets_trim(struct serve_log *log)
{
	struct serve_tab *t = &log->lsets;
	size_t i, keep = t->n / 2;

	if (t->bytes <= PLABEL_SERVE_LSET_LOG)
		return;
	qsort(t->e, t->n, sizeof(*t->e), serve_cmp_used);
	for (i = keep; i < t->n; i++) {
		serve_ent_drop(t, &t->e[i]);
		log->lsets_dropped++;
	}
	serve_tab_compact(t);
}

/* Keep a THREAD record; over the bound, the oldest half go. */
static int serve_keep_thread(struct serve_log *log, const uint8_t *rec,
			     size_t len)
{
	if (log->nthreads + len > PLABEL_SERVE_THREAD_LOG) {
		struct plabel_dec d;
		struct plabel_dec_rec *r = malloc(sizeof(*r));
		size_t cut = 0;

		if (!r)
			return -ENOMEM;
		plabel_dec_init(&d, log->threads, log->nthreads);
		while (cut < log->nthreads / 2 && plabel_dec_next(&d, r) > 0) {
			cut += r->size;
			log->threads_dropped++;
		}
		free(r);
		memmove(log->threads, log->threads + cut, log->nthreads - cut);
		log->nthreads -= cut;
	}
	if (plabel_grow_to(&log->threads, &log->threads_cap,
			   log->nthreads + len, 1))
		return -ENOMEM;
	memcpy(log->threads + log->nthreads, rec, len);
	log->nthreads += len;
	return 0;
}

/* ---- the heap log (the reader's) ---- */

static uint64_t serve_rec_time(const struct plabel_dec_rec *r)
{
	return r->type == PLABEL_REC_FREE ? r->u.free.time_ns :
	       r->u.sample.hdr.time_ns;
}

/* probes of the freed table for one record's hash, then it is dropped */
#define PLABEL_SERVE_FREED_PROBES	8

/*
 * The block of live entry e is freed: its record, less what differs
 * between allocations of one stack, thread and size (time, CPU and
 * address), counts once more among the freed. e is left as it is (the
 * caller drops or replaces it). 0 or -ENOMEM (counted as dropped).
 */
static int serve_heap_freed_add(struct serve_log *log,
				const struct serve_ent *e)
{
	struct plabel_rec_sample *s;
	struct plabel_rec_alloc *a;
	uint64_t k[4] = { e->k[0], PLABEL_FNV_INIT ^ serve_seed, e->len, 0 };
	struct serve_ent *f;
	size_t i;

	if (plabel_grow_to(&log->scratch, &log->scratch_cap, e->len, 1)) {
		log->heap_dropped++;
		return -ENOMEM;
	}
	memcpy(log->scratch, e->bytes, e->len);
	s = (void *)log->scratch;
	a = (void *)(s + 1);
	/* the time goes back in when a window is primed; the decoder wants
	 * an address, any */
	s->time_ns = 0;
	s->cpu = 0;
	a->addr = 1;
	for (i = 0; i < e->len; i++)
		k[1] = (k[1] ^ log->scratch[i]) * PLABEL_FNV_PRIME;
	/* k[3] tells apart records whose hashes are the same */
	while ((f = serve_tab_find(&log->freed, k)) &&
	       (f->len != e->len || memcmp(f->bytes, log->scratch, e->len))) {
		if (++k[3] == PLABEL_SERVE_FREED_PROBES) {
			log->heap_dropped++;
			return 0;
		}
	}
	if (f) {
		f->n++;
		f->used_ns = serve_now_ns();
		if (e->time_ns > f->time_ns)
			f->time_ns = e->time_ns;
		return 0;
	}
	if (serve_tab_put(&log->freed, k, e->time_ns, log->scratch, e->len,
			  NULL, 0)) {
		log->heap_dropped++;
		return -ENOMEM;
	}
	serve_tab_find(&log->freed, k)->n = 1;
	return 0;
}

/* A table's share of the heap log's bound: its records and entries. */
static size_t serve_heap_cost(const struct serve_tab *t)
{
	return t->bytes + t->n * (sizeof(*t->e) + 2 * sizeof(uint64_t));
}

/*
 * Over PLABEL_SERVE_HEAP_LOG (records waiting, records kept and their
 * entries): the least recently used half of the larger table goes, then
 * if need be of the other.
 */
static void serve_heap_trim(struct serve_log *log)
{
	struct serve_tab *tabs[2] = { &log->freed, &log->live };
	size_t i, k;

	if (serve_heap_cost(&log->live) > serve_heap_cost(&log->freed)) {
		tabs[0] = &log->live;
		tabs[1] = &log->freed;
	}
	for (k = 0; k < 2; k++) {
		struct serve_tab *t = tabs[k];

		if (log->npend + serve_heap_cost(&log->live) +
		    serve_heap_cost(&log->freed) <= PLABEL_SERVE_HEAP_LOG)
			return;
		serve_tab_compact(t);
		qsort(t->e, t->n, sizeof(*t->e), serve_cmp_used);
		for (i = t->n / 2; i < t->n; i++) {
			log->heap_dropped += t == &log->freed ? t->e[i].n : 1;
			serve_ent_drop(t, &t->e[i]);
		}
		serve_tab_compact(t);
	}
}

/* Whether ALLOC r was made by an image its process has since replaced. */
static int serve_heap_old_image(struct serve_log *log,
				const struct plabel_dec_rec *r)
{
	uint64_t k[4] = { r->u.sample.hdr.pid };
	struct serve_ent *e = serve_tab_find(&log->execs, k);

	return e && e->time_ns > r->u.sample.hdr.time_ns;
}

/* Apply one settled ALLOC or FREE. 0 or -ENOMEM. */
static int serve_heap_apply(struct serve_log *log,
			    const struct plabel_dec_rec *r)
{
	uint64_t k[4] = { 0 };
	struct serve_ent *e;
	int ret;

	if (r->type == PLABEL_REC_FREE) {
		k[0] = r->u.free.pid;
		k[1] = r->u.free.addr;
		e = serve_tab_find(&log->live, k);
		log->frees++;
		/* none, or a later block (this FREE came too late) */
		if (!e || e->time_ns > r->u.free.time_ns) {
			log->unmatched++;
			return 0;
		}
		ret = serve_heap_freed_add(log, e);
		serve_ent_drop(&log->live, e);
		return ret;
	}
	if (serve_heap_old_image(log, r))
		return 0;
	k[0] = r->u.sample.hdr.pid;
	k[1] = r->u.sample.alloc.addr;
	e = serve_tab_find(&log->live, k);
	if (e && e->time_ns > r->u.sample.hdr.time_ns) {
		/* an older block at a later one's address: freed since */
		struct serve_ent old = {
			.k = { k[0] },
			.time_ns = r->u.sample.hdr.time_ns,
			.bytes = (uint8_t *)r->raw,
			.len = r->size,
		};

		log->implied++;
		return serve_heap_freed_add(log, &old);
	}
	if (e) {
		/* sampled again at its address: its FREE was not seen */
		log->implied++;
		ret = serve_heap_freed_add(log, e);
		if (ret)
			return ret;
	}
	/* (into e's place when there was one) */
	return serve_tab_put(&log->live, k, serve_rec_time(r), r->raw,
			     r->size, NULL, 0);
}

struct serve_pend_ref {
	uint64_t time_ns;
	uint32_t off, free;
};

static int serve_pend_cmp(const void *a, const void *b)
{
	const struct serve_pend_ref *x = a, *y = b;

	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	if (x->free != y->free)
		return x->free < y->free ? -1 : 1;	/* ALLOCs first */
	return x->off < y->off ? -1 : x->off > y->off;
}

/*
 * The pending heap records stamped before srv->settled, in time order:
 * into the heap log; the others stay. When reads stay too full to say
 * what has settled, those older than PLABEL_SERVE_LATE_NS go in anyway,
 * and all of them once they are over PLABEL_SERVE_HEAP_LOG. Those the
 * log could not keep are counted in lost_reader and as dropped.
 */
static void serve_heap_settle(struct serve *srv, uint64_t now,
			      struct plabel_dec_rec *r)
{
	struct serve_log *log = &srv->log;
	uint64_t before = srv->settled;
	struct serve_pend_ref *refs;
	struct plabel_dec d;
	size_t n = 0, i, keep = 0;
	uint8_t *rest;

	if (!log->npend)
		return;
	if (now > PLABEL_SERVE_LATE_NS && now - PLABEL_SERVE_LATE_NS > before)
		before = now - PLABEL_SERVE_LATE_NS;
	if (log->npend > PLABEL_SERVE_HEAP_LOG)
		before = UINT64_MAX;
	refs = malloc(log->npend / sizeof(struct plabel_rec_free) *
		      sizeof(*refs) + sizeof(*refs));
	rest = malloc(log->npend);
	if (!refs || !rest) {
		free(refs);
		free(rest);
		return;		/* kept for the next round */
	}
	plabel_dec_init(&d, log->pend, log->npend);
	while (plabel_dec_next(&d, r) > 0) {
		size_t off = (const uint8_t *)r->raw - log->pend;

		if (serve_rec_time(r) < before) {
			refs[n].time_ns = serve_rec_time(r);
			refs[n].off = (uint32_t)off;
			refs[n++].free = r->type == PLABEL_REC_FREE;
		} else {
			memcpy(rest + keep, r->raw, r->size);
			keep += r->size;
		}
	}
	if (n)
		qsort(refs, n, sizeof(*refs), serve_pend_cmp);
	for (i = 0; i < n; i++) {
		plabel_dec_init(&d, log->pend + refs[i].off,
				log->npend - refs[i].off);
		if (plabel_dec_next(&d, r) > 0 &&
		    serve_heap_apply(log, r) == -ENOMEM)
			srv->lost_reader++;
	}
	memcpy(log->pend, rest, keep);
	log->npend = keep;
	free(rest);
	free(refs);
	/* the entries of freed blocks were only marked removed */
	if (log->live.removed > log->live.n / 4)
		serve_tab_compact(&log->live);
	serve_heap_trim(log);
}

/*
 * A heap window's own, after the state: the blocks in use, the records
 * not settled yet (its collector matches those itself) and the freed
 * records with their counts, of each process's image now; the log's
 * counts.
 */
static void serve_heap_prime(struct serve *srv, struct serve_win *w)
{
	struct serve_log *log = &srv->log;
	struct plabel_dec_rec *r = malloc(sizeof(*r));
	struct plabel_dec d;
	size_t i;

	if (!r) {
		w->err = -ENOMEM;
		return;
	}
	for (i = 0; i < log->live.n; i++)
		if (log->live.e[i].bytes &&
		    !serve_heap_stale(log, &log->live.e[i])) {
			serve_win_add(w, log->live.e[i].bytes,
				      log->live.e[i].len);
			w->heap_live++;
		}
	plabel_dec_init(&d, log->pend, log->npend);
	while (plabel_dec_next(&d, r) > 0)
		if (r->type != PLABEL_REC_ALLOC ||
		    !serve_heap_old_image(log, r))
			serve_win_add(w, r->raw, r->size);
	free(r);
	serve_win_flush(w);
	for (i = 0; i < log->freed.n && !w->err; i++) {
		struct serve_ent *e = &log->freed.e[i];
		struct plabel_rec_sample *s = (void *)e->bytes;

		if (!e->bytes || serve_heap_stale(log, e))
			continue;
		/* stamped as the latest of them, of the image now */
		s->time_ns = e->time_ns;
		if (plabel_collect_heap_freed(w->col, e->bytes, e->len,
					      e->n) == -ENOMEM)
			w->err = -ENOMEM;
		s->time_ns = 0;
		w->heap_freed++;
		w->heap_freed_n += e->n;
	}
	plabel_collect_heap_counts(w->col, log->frees, log->unmatched,
				   log->implied, log->lost_frees,
				   log->heap_dropped);
}

/*
 * What a heap window's profile rests on, in its comments (for whoever
 * wonders about the server's memory). 0 or -ENOMEM.
 */
static int serve_heap_comment(const struct serve_win *w,
			      struct plabel_prof *p)
{
	char line[200];

	if (w->kind != PLABEL_PROF_HEAP)
		return 0;
	snprintf(line, sizeof(line),
		 "heap: plabel serve keeps %" PRIu64 " blocks in use and %" PRIu64 " freed records standing for %" PRIu64 " allocations",
		 w->heap_live, w->heap_freed, w->heap_freed_n);
	return plabel_prof_add_comment(p, line);
}

/* Keep heap record r until it settles. 0 or -ENOMEM. */
static int serve_heap_pend(struct serve_log *log,
			   const struct plabel_dec_rec *r)
{
	if (plabel_grow_to(&log->pend, &log->pend_cap, log->npend + r->size,
			   1))
		return -ENOMEM;
	memcpy(log->pend + log->npend, r->raw, r->size);
	log->npend += r->size;
	return 0;
}

/*
 * Whether heap entry e (k[0] its pid) is of an image its process has
 * since replaced: left out of windows, and dropped at the next prune.
 */
static int serve_heap_stale(struct serve_log *log, const struct serve_ent *e)
{
	uint64_t k[4] = { e->k[0] };
	struct serve_ent *x = serve_tab_find(&log->execs, k);

	return x && x->time_ns > e->time_ns;
}

/* Note what record r says about the state; 0 or -ENOMEM. */
static int serve_note(struct serve *srv, const struct plabel_dec_rec *r)
{
	struct serve_log *log = &srv->log;
	uint64_t k[4] = { 0 };
	struct serve_ent *e;
	size_t n;

	switch (r->type) {
	case PLABEL_REC_STREAM:
		if (r->size <= sizeof(log->stream) && !log->stream_len) {
			memcpy(log->stream, r->raw, r->size);
			log->stream_len = r->size;
		}
		return 0;
	case PLABEL_REC_LABELSET:
		k[0] = r->u.labelset.id;
		e = serve_tab_find(&log->lsets, k);
		/* repeats are expected; a different set is a reused id */
		if (e && (e->orig ? e->orig_len : e->len) == r->size &&
		    !memcmp(e->orig ? e->orig : e->bytes, r->raw, r->size))
			return 0;
		if (!srv->sanitize)
			return serve_tab_put(&log->lsets, k, 0, r->raw,
					     r->size, NULL, 0);
		n = r->size + PLABEL_MAX_LABELS * 8 + 8;
		if (n > srv->sbuf_cap) {
			uint8_t *nb = realloc(srv->sbuf, n);

			if (!nb)
				return -ENOMEM;
			srv->sbuf = nb;
			srv->sbuf_cap = n;
		}
		n = plabel_serve_sanitize_labelset(r->raw, r->size, srv->sbuf,
						   srv->sbuf_cap);
		if (!n)
			return 0;
		return serve_tab_put(&log->lsets, k, 0, srv->sbuf, n, r->raw,
				     r->size);
	case PLABEL_REC_MMAP:
		k[0] = r->u.mmap.hdr.pid;
		/* stamped before the process's last exec: an old image */
		e = serve_tab_find(&log->execs, k);
		if (e && e->time_ns > r->u.mmap.hdr.time_ns)
			return 0;
		k[1] = r->u.mmap.hdr.start;
		k[2] = r->u.mmap.hdr.end;
		k[3] = r->u.mmap.hdr.offset;
		return serve_tab_put_newer(&log->maps, k, r->u.mmap.hdr.time_ns,
					   r);
	case PLABEL_REC_EXEC:
		k[0] = r->u.exec.pid;
		e = serve_tab_find(&log->execs, k);
		if (e && e->time_ns > r->u.exec.time_ns)
			return 0;
		/* the mappings of the image it replaced go */
		for (n = 0; n < log->maps.n; n++) {
			e = &log->maps.e[n];
			if (e->bytes && e->k[0] == r->u.exec.pid &&
			    e->time_ns < r->u.exec.time_ns)
				serve_ent_drop(&log->maps, e);
		}
		return serve_tab_put(&log->execs, k, r->u.exec.time_ns,
				     r->raw, r->size, NULL, 0);
	case PLABEL_REC_COMM:
		k[0] = r->u.comm.pid;
		k[1] = r->u.comm.tid;
		return serve_tab_put_newer(&log->comms, k, r->u.comm.time_ns, r);
	case PLABEL_REC_THREAD:
		return serve_keep_thread(log, r->raw, r->size);
	case PLABEL_REC_OFFCPU:
		if (!srv->offcpu)
			return 0;
		k[0] = r->u.sample.hdr.pid;
		k[1] = r->u.sample.hdr.tid;
		return serve_tab_put_newer(&log->waits, k,
					   r->u.sample.hdr.time_ns, r);
	case PLABEL_REC_OFFCPU_END:
		k[0] = r->u.offcpu_end.pid;
		k[1] = r->u.offcpu_end.tid;
		e = serve_tab_find(&log->waits, k);
		if (e && e->time_ns == r->u.offcpu_end.out_ns)
			serve_ent_drop(&log->waits, e);	/* it ended */
		return 0;
	case PLABEL_REC_LOST:
		if (r->u.lost.kind == PLABEL_LOST_FREES)
			log->lost_frees += r->u.lost.lost;
		return 0;
	case PLABEL_REC_FREE:
		return srv->heap_bytes ? serve_heap_pend(log, r) : 0;
	case PLABEL_REC_ALLOC:
		if (!srv->heap_bytes)
			return 0;
		if (serve_heap_pend(log, r))
			return -ENOMEM;
		/* its label set is in use */
		/* fall through */
	case PLABEL_REC_SAMPLE:
		if (r->u.sample.hdr.set_id &&
		    r->u.sample.hdr.set_id != log->last_set) {
			k[0] = r->u.sample.hdr.set_id;
			e = serve_tab_find(&log->lsets, k);
			if (e)
				e->used_ns = serve_now_ns();
			log->last_set = k[0];
		}
		return 0;
	default:
		return 0;
	}
}

/* Whether label set id (as the program set it) has every filter label. */
static int serve_set_matches(struct serve *srv, struct serve_win *w,
			     uint64_t id)
{
	uint64_t k[4] = { id };
	struct serve_ent *e;
	struct plabel_dec d;
	struct plabel_dec_rec *r;
	uint32_t i, j;
	int ok = 0;

	if (w->memo_set == id && id)
		return w->memo_ok;
	e = id ? serve_tab_find(&srv->log.lsets, k) : NULL;
	if (!e)
		return 0;
	r = malloc(sizeof(*r));
	if (!r)
		return 0;
	plabel_dec_init(&d, e->orig ? e->orig : e->bytes,
			e->orig ? e->orig_len : e->len);
	if (plabel_dec_next(&d, r) > 0 && r->type == PLABEL_REC_LABELSET) {
		ok = 1;
		for (i = 0; i < w->filt.nlabels && ok; i++) {
			const char *fk = w->filt.labels[i].key;
			const char *fv = w->filt.labels[i].value;
			int found = 0;

			for (j = 0; j < r->u.labelset.count && !found; j++) {
				const struct plabel_dec_label *l =
					&r->u.labelset.labels[j];
				char sk[PLABEL_MAX_KEY_LEN + 1];
				size_t sl;
				int key_ok = l->key.len == strlen(fk) &&
					     !memcmp(l->key.ptr, fk,
						     l->key.len);

				if (!key_ok && srv->sanitize) {
					sl = plabel_serve_sanitize_key(
						l->key.ptr, l->key.len, sk,
						sizeof(sk));
					key_ok = sl == strlen(fk) &&
						 !memcmp(sk, fk, sl);
				}
				found = key_ok &&
					l->value.len == strlen(fv) &&
					!memcmp(l->value.ptr, fv,
						l->value.len);
			}
			ok = found;
		}
	}
	free(r);
	w->memo_set = id;
	w->memo_ok = ok;
	return ok;
}

/* Whether window w takes record r (state records always). */
static int serve_wants(struct serve *srv, struct serve_win *w,
		       const struct plabel_dec_rec *r)
{
	const struct plabel_rec_sample *h = &r->u.sample.hdr;
	uint32_t i;

	if (r->type == PLABEL_REC_ALLOC || r->type == PLABEL_REC_FREE)
		return w->kind == PLABEL_PROF_HEAP;
	if (w->kind == PLABEL_PROF_HEAP &&
	    (r->type == PLABEL_REC_SAMPLE || r->type == PLABEL_REC_THREAD ||
	     r->type == PLABEL_REC_OFFCPU ||
	     r->type == PLABEL_REC_OFFCPU_END))
		return 0;	/* (its names come with the state) */
	/* a wait is the window's where it ended; its start goes to all */
	if (r->type == PLABEL_REC_OFFCPU_END)
		return r->u.offcpu_end.time_ns >= w->start_ns &&
		       r->u.offcpu_end.time_ns < w->end_ns;
	if (r->type != PLABEL_REC_SAMPLE && r->type != PLABEL_REC_THREAD)
		return 1;
	if (h->time_ns < w->start_ns || h->time_ns >= w->end_ns)
		return 0;
	if (r->type == PLABEL_REC_THREAD)
		return 1;	/* the new thread's name */
	if (w->filt.npids) {
		for (i = 0; i < w->filt.npids; i++)
			if ((uint32_t)w->filt.pids[i] == h->pid)
				break;
		if (i == w->filt.npids)
			return 0;
	}
	return !w->filt.nlabels || serve_set_matches(srv, w, h->set_id);
}

/* Hand w to the finisher (lock held). */
static void serve_ready(struct serve *srv, struct serve_win *w)
{
	w->next = NULL;
	*srv->ready_tail = w;
	srv->ready_tail = &w->next;
	pthread_cond_signal(&srv->cond);
}

/*
 * One read()'s records (buf, len; none when len is 0): into the state
 * log, then to every window; then the windows whose time is over go to
 * the finisher. Lock held.
 */
static void serve_feed(struct serve *srv, const uint8_t *buf, size_t len,
		       uint64_t now, struct plabel_dec_rec *r)
{
	struct serve_win **pw, *w;
	struct plabel_dec d;
	int ret;

	/*
	 * new windows get the state as it was before these records; the
	 * second half of a heap delta once its seconds are over
	 */
	for (w = srv->open; w; w = w->next)
		if (!w->primed && (w->req || w->file) &&
		    !(w->base && now < w->end_ns))
			serve_prime(srv, w);
	/* the state first: a label set may come after its first sample */
	plabel_dec_init(&d, buf, len);
	while ((ret = plabel_dec_next(&d, r)) > 0)
		if (serve_note(srv, r) == -ENOMEM)
			srv->lost_reader++;
	serve_lsets_trim(&srv->log);
	if (srv->heap_bytes)
		serve_heap_settle(srv, now, r);

	for (pw = &srv->open; (w = *pw);) {
		if (!w->req && !w->file) {
			/* the client went away */
			*pw = w->next;
			srv->active--;
			serve_win_free(w);
			continue;
		}
		if (!w->primed) {
			pw = &w->next;	/* a heap delta waiting */
			continue;
		}
		plabel_dec_init(&d, buf, len);
		while (plabel_dec_next(&d, r) > 0) {
			const uint8_t *rec = r->raw;
			size_t rlen = r->size;

			if (!serve_wants(srv, w, r))
				continue;
			if (r->type == PLABEL_REC_LABELSET && srv->sanitize) {
				uint64_t k[4] = { r->u.labelset.id };
				struct serve_ent *e =
					serve_tab_find(&srv->log.lsets, k);

				if (!e)
					continue;
				rec = e->bytes;
				rlen = e->len;
			}
			serve_win_add(w, rec, rlen);
		}
		serve_win_flush(w);
		if (srv->settled && !w->err)
			plabel_collect_settled(w->col, srv->settled);
		if (w->kind == PLABEL_PROF_THREADCREATE ||
		    w->kind == PLABEL_PROF_HEAP || w->err ||
		    srv->settled >= w->end_ns ||
		    now >= w->end_ns + PLABEL_SERVE_LATE_NS) {
			*pw = w->next;
			serve_ready(srv, w);
			continue;
		}
		pw = &w->next;
	}
}

/*
 * How long the reader may sleep: PLABEL_SERVE_POLL_MS, or until the
 * first window can be settled, so that its answer is not held up.
 */
static int serve_poll_ms(struct serve *srv)
{
	uint64_t now = serve_now_ns(), first = UINT64_MAX;
	struct serve_win *w;
	int ms = PLABEL_SERVE_POLL_MS;

	pthread_mutex_lock(&srv->lock);
	for (w = srv->open; w; w = w->next) {
		/* a heap delta is primed at its end, not settled */
		uint64_t at = w->end_ns + (w->base && !w->primed ? 0 :
					   PLABEL_SERVE_SETTLE_MARGIN_NS);

		if (at < first)
			first = at;
	}
	pthread_mutex_unlock(&srv->lock);
	if (first != UINT64_MAX) {
		uint64_t left = first > now ? first - now : 0;

		if (left / 1000000 + 1 < (uint64_t)ms)
			ms = left / 1000000 + 1;
	}
	return ms < 10 ? 10 : ms;	/* never a busy loop */
}

static void *serve_reader(void *arg)
{
	struct serve *srv = arg;
	struct plabel_dec_rec *r = malloc(sizeof(*r));
	int stop = 0;

	if (!r) {
		srv->fatal = 1;
		kill(getpid(), SIGTERM);
		return NULL;
	}
	while (!stop) {
		struct pollfd p[2] = {
			{ .fd = srv->fd, .events = POLLIN },
			{ .fd = srv->wake[0], .events = POLLIN },
		};
		uint64_t t = serve_now_ns();
		ssize_t n = 0;
		char drain[64];

		if (poll(p, 2, serve_poll_ms(srv)) < 0 && errno != EINTR)
			break;
		if (p[1].revents & POLLIN)
			while (read(srv->wake[0], drain, sizeof(drain)) > 0)
				;
		/*
		 * Read also when poll() timed out: the kernel wakes the
		 * reader only now and then, and only what a read() found
		 * the rings holding tells what has come.
		 */
		t = serve_now_ns();
		n = read(srv->fd, srv->rbuf, PLABEL_SERVE_READ_BUF);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			fprintf(stderr, "plabel serve: reading %s: %s\n",
				PLABEL_DEVICE, n ? strerror(errno) :
				"the session ended");
			srv->fatal = 1;
			pthread_mutex_lock(&srv->lock);
			pthread_cond_broadcast(&srv->gone);
			pthread_mutex_unlock(&srv->lock);
			kill(getpid(), SIGTERM);
			break;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			n = 0;
		/* processes that may publish thread contexts */
		if (srv->tctx)
			plabel_tctx_scan(srv->tctx, srv->rbuf, (size_t)n);
		/* everything stamped before t has been read */
		if ((size_t)n <= PLABEL_SERVE_SETTLE_ROOM &&
		    t > PLABEL_SERVE_SETTLE_MARGIN_NS &&
		    t - PLABEL_SERVE_SETTLE_MARGIN_NS > srv->settled)
			srv->settled = t - PLABEL_SERVE_SETTLE_MARGIN_NS;
		pthread_mutex_lock(&srv->lock);
		stop = srv->stopping;
		if (!stop)
			serve_feed(srv, srv->rbuf, n, serve_now_ns(), r);
		pthread_mutex_unlock(&srv->lock);
		if (serve_now_ns() - srv->log.last_prune > PLABEL_SERVE_PRUNE_NS)
			serve_prune(srv, serve_now_ns());
	}
	free(r);
	return NULL;
}

/* ---- answers ---- */

/*
 * Give req its answer (lock held). Its connection is resumed by
 * serve_resume(), after the lock is dropped: libmicrohttpd takes a lock
 * of its own there, and may hold it when it calls serve_completed(),
 * which takes srv->lock.
 */
static void serve_answer(struct serve *srv, struct serve_req *req,
			 unsigned int status, const char *ctype,
			 uint8_t *body, size_t len)
{
	req->status = status;
	req->ctype = ctype;
	req->body = body;
	req->len = len;
	req->done = 1;
	req->win = NULL;
	if (req->suspended) {
		req->suspended = 0;
		req->resume_next = srv->resume;
		srv->resume = req;
	}
}

static void serve_answer_text(struct serve *srv, struct serve_req *req,
			      unsigned int status, const char *text)
{
	char *body = NULL;
	int n = asprintf(&body, "%s\n", text);

	serve_answer(srv, req, status, "text/plain; charset=utf-8",
		     n < 0 ? NULL : (uint8_t *)body, n < 0 ? 0 : n);
}

/*
 * Resume the connections answered (lock not held). A suspended
 * connection cannot end, so each request is still there until its
 * connection is resumed.
 */
static void serve_resume(struct serve *srv)
{
	struct serve_req *r, *next;

	pthread_mutex_lock(&srv->lock);
	r = srv->resume;
	srv->resume = NULL;
	pthread_mutex_unlock(&srv->lock);
	for (; r; r = next) {
		next = r->resume_next;
		MHD_resume_connection(r->conn);
	}
}

/* The finished profile of w into a gzipped buffer; 0 or -errno. */
static int serve_build(struct serve *srv, struct serve_win *w,
		       uint8_t **body, size_t *len)
{
	struct plabel_prof *profs[PLABEL_PROF_NKINDS] = { NULL };
	int64_t dur = w->kind == PLABEL_PROF_CPU ?
		      (int64_t)w->secs * 1000000000LL : (int64_t)w->dur_ns;
	char comment[160];
	size_t k;
	int ret;

	if (w->err)
		return w->err;
	ret = plabel_collect_finish(w->col, w->wall_ns, dur, profs);
	if (ret)
		return ret;
	if (w->base) {
		ret = plabel_prof_subtract(profs[w->kind], w->base);
		snprintf(comment, sizeof(comment),
			 "heap: what changed over %u s (seconds=%u): this profile less the one at its start",
			 w->secs, w->secs);
		if (!ret && plabel_prof_add_comment(profs[w->kind], comment))
			ret = -ENOMEM;
	}
	if (!ret && w->allocs)
		ret = plabel_prof_set_default_type(profs[w->kind],
						   "alloc_space");
	if (!ret)
		ret = serve_heap_comment(w, profs[w->kind]);
	if (!ret && w->kind == PLABEL_PROF_THREADCREATE && w->threads_dropped) {
		snprintf(comment, sizeof(comment),
			 "thread creations left out (the oldest, over plabel serve's bound): %" PRIu64,
			 w->threads_dropped);
		if (plabel_prof_add_comment(profs[w->kind], comment))
			ret = -ENOMEM;
	}
	if (!ret)
		ret = plabel_prof_encode(profs[w->kind], body, len);
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		plabel_prof_free(profs[k]);
	return ret;
}

/*
 * record --every --timeline: window w's timeline (after its profiles were
 * built) into DIR/timeline-STAMP.json.gz. 0 or -errno, after a message.
 */
static int serve_write_timeline(struct serve *srv, struct serve_win *w,
				const char *stamp)
{
	char path[PATH_MAX];
	int n, ret;

	n = snprintf(path, sizeof(path), "%s/timeline-%s.json.gz",
		     srv->out_dir, stamp);
	ret = n < 0 || (size_t)n >= sizeof(path) ? -ENAMETOOLONG :
	      plabel_collect_write_timeline(w->col, path);
	if (ret)
		fprintf(stderr, "plabel record: cannot write %s: %s\n", path,
			strerror(-ret));
	else if (w->tl->dropped)
		fprintf(stderr, "plabel record: %s holds the first %zu observations only: %" PRIu64 " later ones were left out (the profiles have them)\n",
			path, w->tl->n, w->tl->dropped);
	return ret;
}

/*
 * record --every: window w's profiles into DIR/cpu-STAMP.pb.gz and
 * DIR/threadcreate-STAMP.pb.gz (a heap window's into DIR/heap-STAMP),
 * STAMP its interval's start in UTC. 0 or 1 after one message.
 */
static int serve_write_files(struct serve *srv, struct serve_win *w)
{
	struct plabel_prof *profs[PLABEL_PROF_NKINDS] = { NULL };
	time_t sec = (w->stamp_ns ? w->stamp_ns : w->wall_ns) / 1000000000LL;
	char stamp[32], path[PATH_MAX];
	struct tm tm;
	size_t k;
	int ret = w->err;

	gmtime_r(&sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
	if (!ret)
		ret = plabel_collect_finish(w->col, w->wall_ns,
					    (int64_t)(w->end_ns - w->start_ns),
					    profs);
	if (!ret)
		ret = serve_heap_comment(w, profs[PLABEL_PROF_HEAP]);
	if (ret) {
		fprintf(stderr, "plabel record: building the profiles of %s: %s\n",
			stamp, strerror(-ret));
		return 1;
	}
	for (k = 0; k < PLABEL_PROF_NKINDS && !ret; k++) {
		const char *file = plabel_kinds[k].file;
		const char *dot = strchr(file, '.');

		/*
		 * a heap window writes the heap profile only; the others
		 * no optional kind but, with --off-cpu, off-CPU and wall
		 */
		if (w->kind == PLABEL_PROF_HEAP ? k != PLABEL_PROF_HEAP :
		    plabel_kinds[k].optional &&
		    !(srv->offcpu && (k == PLABEL_PROF_OFFCPU ||
				      k == PLABEL_PROF_WALL)))
			continue;
		int n = snprintf(path, sizeof(path), "%s/%.*s-%s%s",
				 srv->out_dir, (int)(dot ? dot - file :
						     (int)strlen(file)),
				 file, stamp, dot ? dot : "");
		if (n < 0 || (size_t)n >= sizeof(path))
			ret = -ENAMETOOLONG;
		else
			ret = plabel_prof_write(profs[k], path);
		if (ret)
			fprintf(stderr, "plabel record: cannot write %s: %s\n",
				path, strerror(-ret));
	}
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		plabel_prof_free(profs[k]);
	if (!ret && w->tl)
		ret = serve_write_timeline(srv, w, stamp);
	if (!ret)
		fprintf(stderr, "plabel: wrote %s/%s-%s.pb.gz%s%s%s\n",
			srv->out_dir,
			w->kind == PLABEL_PROF_HEAP ? "heap" : "*", stamp,
			w->tl ? " and timeline-" : "", w->tl ? stamp : "",
			w->tl ? ".json.gz" : "");
	return ret ? 1 : 0;
}

static int serve_win_col(struct serve *srv, struct serve_win *w);

/*
 * heap?seconds=N, its first half (lock held, dropped meanwhile): build
 * the profile of the heap now, keep it as w's base and put w back on the
 * open list with a fresh collector, for the reader to prime once its
 * seconds are over. Answered at once if that fails or the server stops.
 */
static void serve_delta_base(struct serve *srv, struct serve_win *w)
{
	struct plabel_prof *profs[PLABEL_PROF_NKINDS] = { NULL };
	size_t k;
	int ret;

	pthread_mutex_unlock(&srv->lock);
	ret = plabel_collect_finish(w->col, w->base_wall_ns, 0, profs);
	if (!ret) {
		w->base = profs[w->kind];
		profs[w->kind] = NULL;
		ret = serve_win_col(srv, w);
	}
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		plabel_prof_free(profs[k]);
	pthread_mutex_lock(&srv->lock);
	if (!ret && w->req && !srv->stopping) {
		w->primed = 0;
		w->heap_live = w->heap_freed = w->heap_freed_n = 0;
		w->next = srv->open;
		srv->open = w;
		serve_wake(srv);
		return;
	}
	if (w->req)
		serve_answer_text(srv, w->req, srv->stopping ?
				  MHD_HTTP_SERVICE_UNAVAILABLE :
				  MHD_HTTP_INTERNAL_SERVER_ERROR,
				  srv->stopping ? "the server is stopping" :
				  ret == -ENOMEM ?
				  "out of memory building the profile" :
				  "cannot build the profile");
	srv->active--;
	serve_win_free(w);
}

static void *serve_finisher(void *arg)
{
	struct serve *srv = arg;

	pthread_mutex_lock(&srv->lock);
	for (;;) {
		struct serve_win *w;
		uint8_t *body = NULL;
		size_t len = 0;
		int ret;

		if (srv->resume) {
			pthread_mutex_unlock(&srv->lock);
			serve_resume(srv);
			pthread_mutex_lock(&srv->lock);
		}
		while (!srv->ready && !srv->stopping)
			pthread_cond_wait(&srv->cond, &srv->lock);
		w = srv->ready;
		if (!w)
			break;	/* stopping, and nothing left */
		srv->ready = w->next;
		if (!srv->ready)
			srv->ready_tail = &srv->ready;
		if (w->file) {
			pthread_mutex_unlock(&srv->lock);
			ret = serve_write_files(srv, w);
			pthread_mutex_lock(&srv->lock);
			if (ret)
				srv->files_failed++;
			srv->active--;
			serve_win_free(w);
			pthread_cond_broadcast(&srv->gone);
			continue;
		}
		if (srv->stopping || !w->req) {
			if (w->req)
				serve_answer_text(srv, w->req,
						  MHD_HTTP_SERVICE_UNAVAILABLE,
						  "the server is stopping");
			srv->active--;
			serve_win_free(w);
			continue;
		}
		if (w->delta && !w->base && !w->err) {
			serve_delta_base(srv, w);
			continue;
		}
		pthread_mutex_unlock(&srv->lock);
		ret = serve_build(srv, w, &body, &len);
		pthread_mutex_lock(&srv->lock);
		if (w->req && !ret)
			serve_answer(srv, w->req, MHD_HTTP_OK,
				     "application/octet-stream", body, len);
		else if (w->req)
			serve_answer_text(srv, w->req,
					  MHD_HTTP_INTERNAL_SERVER_ERROR,
					  ret == -ENOMEM ?
					  "out of memory building the profile" :
					  "cannot build the profile");
		else
			free(body);
		srv->active--;
		serve_win_free(w);
	}
	pthread_mutex_unlock(&srv->lock);
	serve_resume(srv);
	return NULL;
}

/* ---- requests ---- */

struct serve_query {
	const char *seconds;
	const char *why;	/* a bad argument's reason */
	int debug;
	struct plabel_serve_filter *filt;
};

static enum MHD_Result serve_arg(void *cls, enum MHD_ValueKind kind,
				 const char *key, const char *value)
{
	struct serve_query *q = cls;

	if (q->why)
		return MHD_NO;
	if (!strcmp(key, "seconds")) {
		if (!q->seconds)
			q->seconds = value ? value : "";
	} else if (!strcmp(key, "pid")) {
		plabel_serve_filter_pids(q->filt, value ? value : "", &q->why);
	} else if (!strcmp(key, "label")) {
		plabel_serve_filter_label(q->filt, value ? value : "",
					  &q->why);
	} else if (!strcmp(key, "debug")) {
		q->debug = value && strcmp(value, "0");
	}
	return q->why ? MHD_NO : MHD_YES;
}

static const char serve_index_html[] =
	"<!DOCTYPE html>\n<html><head><title>/debug/pprof/</title></head>\n"
	"<body>\n<p>plabel serve: labeled profiles of native programs, in pprof format.</p>\n"
	"<table>\n"
	"<tr><td><a href=\"profile?seconds=30\">profile</a></td><td>CPU profile of the next N seconds (?seconds=N, default 30); filters: pid=PID[,PID..], label=KEY:VALUE</td></tr>\n"
	"<tr><td><a href=\"threadcreate\">threadcreate</a></td><td>thread creations since the server started, with their creators' stacks and labels</td></tr>\n"
	"<tr><td><a href=\"heap\">heap</a></td><td>with plabel serve --heap: allocations sampled since the server started in programs run with plabel run --heap, and those still in use (inuse_space shown first); ?seconds=N: what changed over the next N seconds</td></tr>\n"
	"<tr><td><a href=\"allocs\">allocs</a></td><td>the same, alloc_space shown first</td></tr>\n"
	"<tr><td><a href=\"goroutine?debug=1\">goroutine</a></td><td>every thread of the processes served, now: its labels, state and stack (?debug=1: as text); filter: pid=PID[,PID..]</td></tr>\n"
	"</table>\n"
	"<p>Not available: block, mutex, trace.</p>\n"
	"<p>Use: <code>go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=10</code></p>\n"
	"</body></html>\n";

static enum MHD_Result serve_queue(struct MHD_Connection *conn,
				   unsigned int status, const char *ctype,
				   uint8_t *body, size_t len,
				   const char *retry_after)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (!body && !strncmp(ctype, "text/html", 9))
		resp = MHD_create_response_from_buffer(
			sizeof(serve_index_html) - 1,
			(void *)serve_index_html, MHD_RESPMEM_PERSISTENT);
	else
		resp = MHD_create_response_from_buffer(len, body,
						       body ?
						       MHD_RESPMEM_MUST_FREE :
						       MHD_RESPMEM_PERSISTENT);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
				"no-store");
	if (status == MHD_HTTP_OK && !strcmp(ctype, "application/octet-stream"))
		MHD_add_response_header(resp,
					MHD_HTTP_HEADER_CONTENT_DISPOSITION,
					"attachment; filename=\"profile\"");
	if (retry_after)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER,
					retry_after);
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result serve_text(struct MHD_Connection *conn,
				  unsigned int status, const char *text,
				  const char *retry_after)
{
	char *body = NULL;
	int n = asprintf(&body, "%s\n", text);

	if (n < 0)
		return MHD_NO;
	return serve_queue(conn, status, "text/plain; charset=utf-8",
			   (uint8_t *)body, n, retry_after);
}

/*
 * Whether process pid has a command line: kernel threads (and zombies)
 * have none, nor user stacks to show.
 */
static int serve_has_cmdline(int32_t pid)
{
	char path[32], c;
	ssize_t got;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	got = read(fd, &c, 1);
	close(fd);
	return got == 1;
}

/*
 * The processes /debug/pprof/goroutine shows: the server's -p ones, or
 * with -a every process in /proc but kernel threads (the kernel leaves
 * out those the server may not read), at most
 * PLABEL_SERVE_THREADS_MAX_PROCS in /proc's order; a pid= filter keeps only its processes. *more counts those left
 * out over the bound. A malloc()ed array, NULL on ENOMEM.
 */
static int32_t *serve_threads_pids(struct serve *srv,
				   const struct plabel_serve_filter *f,
				   uint32_t *n, uint32_t *more)
{
	int32_t *pids = calloc(PLABEL_SERVE_THREADS_MAX_PROCS,
			       sizeof(*pids));
	struct dirent *de;
	uint32_t i, k;
	DIR *d;

	*n = 0;
	*more = 0;
	if (!pids)
		return NULL;
	if (srv->npids || f->npids) {
		const int32_t *src = srv->npids ? srv->pids : f->pids;
		uint32_t ns = srv->npids ? srv->npids : f->npids;

		for (i = 0; i < ns; i++) {
			/* with both: those of -p the filter names */
			if (srv->npids && f->npids) {
				for (k = 0; k < f->npids; k++)
					if (f->pids[k] == src[i])
						break;
				if (k == f->npids)
					continue;
			}
			if (*n < PLABEL_SERVE_THREADS_MAX_PROCS)
				pids[(*n)++] = src[i];
			else
				(*more)++;
		}
		return pids;
	}
	d = opendir("/proc");
	if (!d)
		return pids;
	while ((de = readdir(d))) {
		unsigned long pid;

		if (plabel_parse_ulong(de->d_name, 1, INT32_MAX, &pid) ||
		    !serve_has_cmdline((int32_t)pid))
			continue;
		if (*n < PLABEL_SERVE_THREADS_MAX_PROCS)
			pids[(*n)++] = (int32_t)pid;
		else
			(*more)++;
	}
	closedir(d);
	return pids;
}

/*
 * /debug/pprof/goroutine: the threads profile of the processes served,
 * read now (no window: the kernel answers at once), as pprof or, with
 * ?debug=1, its text view.
 */
static enum MHD_Result serve_goroutine(struct serve *srv,
				       struct MHD_Connection *conn,
				       struct serve_query *q)
{
	struct plabel_prof *prof = NULL;
	uint32_t n, more, skipped = 0;
	char *body = NULL, note[96];
	size_t len = 0;
	int32_t *pids;
	FILE *f;
	int ret;

	if (q->seconds || q->filt->nlabels)
		return serve_text(conn, MHD_HTTP_BAD_REQUEST,
				  "goroutine takes no seconds or label "
				  "arguments: it shows the threads now", NULL);
	pids = serve_threads_pids(srv, q->filt, &n, &more);
	if (!pids)
		return serve_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				  "out of memory", NULL);
	if (!n) {
		free(pids);
		return serve_text(conn, MHD_HTTP_NOT_FOUND,
				  "no such process among those served", NULL);
	}
	ret = plabel_threads_profile(srv->fd, pids, n, srv->callchain, &prof,
				     &skipped);
	free(pids);
	if (ret == -ESRCH || ret == -EACCES)
		return serve_text(conn, MHD_HTTP_NOT_FOUND, ret == -ESRCH ?
				  "no such process" :
				  "the server may not read that process", NULL);
	if (ret == -ENOTTY || ret == -EINVAL)
		return serve_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
				  "the plabel module loaded has no thread "
				  "states (PLABEL_IOC_THREADS_GET)", NULL);
	if (ret)
		return serve_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				  ret == -ENOMEM ? "out of memory" :
				  "cannot read the thread states", NULL);
	snprintf(note, sizeof(note), "processes left out: %u", more + skipped);
	if ((more || skipped) && plabel_prof_add_comment(prof, note))
		ret = -ENOMEM;
	if (!ret && q->debug) {
		f = open_memstream(&body, &len);
		ret = f ? plabel_threads_text(prof, f) : -ENOMEM;
		if (f && !ret && more)
			fprintf(f, "# %u processes left out (more than %u): "
				"ask for some with ?pid=\n", more,
				PLABEL_SERVE_THREADS_MAX_PROCS);
		if (f && fclose(f))
			ret = -ENOMEM;
	} else if (!ret) {
		uint8_t *buf = NULL;

		ret = plabel_prof_encode(prof, &buf, &len);
		body = (char *)buf;
	}
	plabel_prof_free(prof);
	if (ret) {
		free(body);
		return serve_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				  "cannot build the profile", NULL);
	}
	return serve_queue(conn, MHD_HTTP_OK, q->debug ?
			   "text/plain; charset=utf-8" :
			   "application/octet-stream", (uint8_t *)body, len,
			   NULL);
}

/* The windows' shared symbols, a reference for a new one, or NULL. */
static struct plabel_syms *serve_syms(struct serve *srv)
{
	uint64_t now = serve_now_ns(), copied = 0;
	struct plabel_syms *s = NULL;
	size_t files = 0;

	pthread_mutex_lock(&srv->syms_lock);
	if (srv->syms)
		plabel_syms_usage(srv->syms, &files, &copied);
	if (!srv->syms || now - srv->syms_ns >= PLABEL_SERVE_SYMS_NS ||
	    files >= PLABEL_SERVE_SYMS_FILES ||
	    copied >= PLABEL_SERVE_SYMS_COPIED) {
		s = plabel_syms_new();
		if (s) {
			plabel_syms_share(s);
			plabel_syms_free(srv->syms);
			srv->syms = s;
			srv->syms_ns = now;
		}
	}
	s = srv->syms ? plabel_syms_get(srv->syms) : NULL;
	pthread_mutex_unlock(&srv->syms_lock);
	return s;
}

/* A fresh collector for window w, with its symbols. 0 or -ENOMEM. */
static int serve_win_col(struct serve *srv, struct serve_win *w)
{
	plabel_collect_free(w->col);
	w->col = plabel_collect_new(w->syms, PLABEL_COLLECT_PROC_MAPS |
				    PLABEL_COLLECT_PID_LABELS |
				    PLABEL_COLLECT_NAME_LABELS);
	if (!w->col)
		return -ENOMEM;
	if (srv->hz)
		plabel_collect_set_period(w->col, 1000000000ULL / srv->hz);
	if (srv->heap_bytes)
		plabel_collect_set_heap_rate(w->col, srv->heap_bytes);
	if (srv->tctx)
		plabel_collect_set_tctx(w->col, srv->tctx);
	return 0;
}

/* A window with its own collector, or NULL. */
static struct serve_win *serve_win_new(struct serve *srv)
{
	struct serve_win *w = calloc(1, sizeof(*w));

	if (w)
		w->syms = serve_syms(srv);
	if (!w || !w->syms || serve_win_col(srv, w)) {
		serve_win_free(w);
		return NULL;
	}
	return w;
}

/* Seconds until the first window ends, for Retry-After (lock held). */
static unsigned int serve_retry_after(struct serve *srv)
{
	uint64_t now = serve_now_ns(), first = UINT64_MAX;
	struct serve_win *w;

	for (w = srv->open; w; w = w->next)
		if (w->end_ns < first)
			first = w->end_ns;
	if (first == UINT64_MAX || first <= now)
		return 1;
	return (first - now) / 1000000000ULL + 1;
}

static enum MHD_Result serve_profile(struct serve *srv, struct serve_req *req,
				     enum plabel_serve_route route,
				     struct serve_query *q)
{
	struct MHD_Connection *conn = req->conn;
	struct serve_win *w;
	unsigned int secs = 0;
	const char *why = NULL;
	char retry[24];

	if (q->debug)
		return serve_text(conn, MHD_HTTP_BAD_REQUEST,
				  "plabel serve writes pprof's format only (debug=0)",
				  NULL);
	if ((route == PLABEL_ROUTE_HEAP || route == PLABEL_ROUTE_ALLOCS) &&
	    !srv->heap_bytes)
		return serve_text(conn, MHD_HTTP_NOT_FOUND,
				  "this server samples no allocations: start it with plabel serve --heap, and the programs with plabel run --heap",
				  NULL);
	if ((route == PLABEL_ROUTE_HEAP || route == PLABEL_ROUTE_ALLOCS) &&
	    (q->filt->npids || q->filt->nlabels))
		return serve_text(conn, MHD_HTTP_BAD_REQUEST,
				  "heap and allocs take no pid= or label= filter (go tool pprof's -tagfocus does it)",
				  NULL);
	/* heap and allocs: since the start, or what changed over seconds=N */
	if ((route == PLABEL_ROUTE_PROFILE || q->seconds) &&
	    plabel_serve_parse_seconds(q->seconds, srv->max_seconds, &secs,
				       &why)) {
		char msg[160];

		snprintf(msg, sizeof(msg), "bad seconds: %s (1..%u)", why,
			 srv->max_seconds);
		return serve_text(conn, MHD_HTTP_BAD_REQUEST, msg, NULL);
	}
	w = serve_win_new(srv);
	if (!w)
		return serve_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				  "out of memory", NULL);
	w->kind = route == PLABEL_ROUTE_PROFILE ? PLABEL_PROF_CPU :
		  route == PLABEL_ROUTE_THREADCREATE ? PLABEL_PROF_THREADCREATE :
		  PLABEL_PROF_HEAP;
	w->allocs = route == PLABEL_ROUTE_ALLOCS;
	w->secs = secs;
	w->filt = *q->filt;
	w->start_ns = serve_now_ns();
	w->end_ns = w->start_ns + (uint64_t)secs * 1000000000ULL;
	w->wall_ns = serve_wall_ns();

	pthread_mutex_lock(&srv->lock);
	if (srv->stopping) {
		pthread_mutex_unlock(&srv->lock);
		serve_win_free(w);
		return serve_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
				  "the server is stopping", NULL);
	}
	if (srv->active >= srv->max_requests) {
		snprintf(retry, sizeof(retry), "%u", serve_retry_after(srv));
		pthread_mutex_unlock(&srv->lock);
		serve_win_free(w);
		return serve_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
				  "too many profiles being taken at once (--max-requests): retry later",
				  retry);
	}
	if (w->kind == PLABEL_PROF_THREADCREATE ||
	    w->kind == PLABEL_PROF_HEAP) {
		/* since the start */
		w->start_ns = 0;
		w->wall_ns = srv->wall0_ns;
		w->dur_ns = w->end_ns - srv->t0_ns;
	}
	if (w->kind == PLABEL_PROF_HEAP && secs) {
		w->delta = 1;
		w->base_wall_ns = serve_wall_ns();
	}
	w->req = req;
	req->win = w;
	w->next = srv->open;
	srv->open = w;
	srv->active++;
	MHD_suspend_connection(conn);
	req->suspended = 1;
	pthread_mutex_unlock(&srv->lock);
	/* the reader primes it now, not at its next poll timeout */
	serve_wake(srv);
	return MHD_YES;
}

/*
 * Profiles show the names, stacks and labels of every process sampled,
 * so of this host's users only those who could read them anyway take
 * them: root, the server's own user, and --allow-user's. Anything else
 * is closed at once, before it holds a connection slot; one line on
 * stderr says so, at most every 10 s. Called on MHD's one polling
 * thread only.
 */
static enum MHD_Result serve_accept(void *cls, const struct sockaddr *addr,
				    socklen_t addrlen)
{
	struct serve *srv = cls;
	uid_t uid = (uid_t)-1;
	unsigned int i;
	uint64_t now;
	int ret;

	(void)addrlen;
	if (!srv->check_peer)
		return MHD_YES;
	ret = plabel_peer_uid((const struct sockaddr *)&srv->local, addr, &uid);
	if (ret == -ENOENT && srv->remote_ok)
		return MHD_YES;	/* not on this host */
	if (!ret) {
		if (uid == 0 || uid == geteuid())
			return MHD_YES;
		for (i = 0; i < srv->nallow; i++)
			if (uid == srv->allow[i])
				return MHD_YES;
	}
	srv->refused++;
	now = serve_now_ns();
	if (srv->refused_said && now - srv->refused_ns < 10000000000ULL)
		return MHD_NO;
	if (ret)
		fprintf(stderr, "plabel serve: refused a connection: its owner is unknown (%s)",
			strerror(-ret));
	else
		fprintf(stderr, "plabel serve: refused a connection from uid %u: only root, uid %u and --allow-user users read profiles",
			(unsigned int)uid, (unsigned int)geteuid());
	if (srv->refused - srv->refused_said > 1)
		fprintf(stderr, " (%" PRIu64 " refused since the last report)",
			srv->refused - srv->refused_said);
	fputc('\n', stderr);
	srv->refused_said = srv->refused;
	srv->refused_ns = now;
	return MHD_NO;
}

static enum MHD_Result serve_handler(void *cls, struct MHD_Connection *conn,
				     const char *url, const char *method,
				     const char *version,
				     const char *upload_data,
				     size_t *upload_size, void **req_cls)
{
	struct serve *srv = cls;
	struct serve_req *req = *req_cls;
	struct plabel_serve_filter filt;
	struct serve_query q = { .filt = &filt };
	enum plabel_serve_route route;
	const char *why;

	if (req && req->done) {
		uint8_t *body = req->body;

		req->body = NULL;
		return serve_queue(conn, req->status, req->ctype, body,
				   req->len, NULL);
	}
	if (req) {
		/* a request body: not wanted, dropped */
		*upload_size = 0;
		return MHD_YES;
	}
	req = calloc(1, sizeof(*req));
	if (!req)
		return MHD_NO;
	req->conn = conn;
	*req_cls = req;
	pthread_mutex_lock(&srv->lock);
	srv->nreqs++;
	pthread_mutex_unlock(&srv->lock);

	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return serve_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
				  "only GET and HEAD", NULL);
	route = plabel_serve_route(url, &why);
	switch (route) {
	case PLABEL_ROUTE_INDEX:
		return serve_queue(conn, MHD_HTTP_OK, "text/html; charset=utf-8",
				   NULL, 0, NULL);
	case PLABEL_ROUTE_PROFILE:
	case PLABEL_ROUTE_THREADCREATE:
	case PLABEL_ROUTE_GOROUTINE:
	case PLABEL_ROUTE_HEAP:
	case PLABEL_ROUTE_ALLOCS:
		memset(&filt, 0, sizeof(filt));
		MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND,
					  serve_arg, &q);
		if (q.why)
			return serve_text(conn, MHD_HTTP_BAD_REQUEST, q.why,
					  NULL);
		return route == PLABEL_ROUTE_GOROUTINE ?
		       serve_goroutine(srv, conn, &q) :
		       serve_profile(srv, req, route, &q);
	case PLABEL_ROUTE_LACKING:
	case PLABEL_ROUTE_UNKNOWN:
	default:
		return serve_text(conn, MHD_HTTP_NOT_FOUND, why, NULL);
	}
}

static void serve_completed(void *cls, struct MHD_Connection *conn,
			    void **req_cls, enum MHD_RequestTerminationCode toe)
{
	struct serve *srv = cls;
	struct serve_req *req = *req_cls;

	if (!req)
		return;
	pthread_mutex_lock(&srv->lock);
	if (req->win)
		req->win->req = NULL;	/* its window is dropped */
	srv->nreqs--;
	pthread_cond_broadcast(&srv->gone);
	pthread_mutex_unlock(&srv->lock);
	free(req->body);
	free(req);
	*req_cls = NULL;
}

/* ---- setup ---- */

void plabel_serve_usage(FILE *f)
{
	fputs("usage: plabel serve [--listen HOST:PORT | --unix PATH] [-a | -p PID[,PID..]]\n"
	      "                    [-F HZ] [-g fp|dwarf] [--max-seconds N] [--max-requests N]\n"
	      "                    [--sanitize-labels] [--allow-user USER[,USER..]]\n"
	      "                    [--allow-remote] [--heap[=BYTES]]\n"
	      "\n"
	      "Sample for as long as it runs and serve labeled profiles over HTTP\n"
	      "on Go's net/http/pprof paths, for go tool pprof, Parca, Grafana Alloy\n"
	      "and the OpenTelemetry Collector:\n"
	      "  /debug/pprof/profile?seconds=N  CPU profile of the next N seconds\n"
	      "                                  (default 30; pid=PID[,PID..] and\n"
	      "                                  label=KEY:VALUE keep only those)\n"
	      "  /debug/pprof/threadcreate       thread creations since the start\n"
	      "  /debug/pprof/goroutine          every thread now: labels, state,\n"
	      "                                  stack (?debug=1: text; pid=PID[,PID..]);\n"
	      "                                  with -a, the processes it may read,\n"
	      "                                  at most " PLABEL_STR(PLABEL_SERVE_THREADS_MAX_PROCS) "\n"
	      "  /debug/pprof/heap               with --heap: allocations sampled since\n"
	      "                                  the start, and those in use;\n"
	      "                                  ?seconds=N: what changed over N s\n"
	      "  /debug/pprof/allocs             the same, alloc_space first\n"
	      "  /debug/pprof/                   an index\n"
	      "Other Go paths (block, mutex, trace) answer 404\n"
	      "with the reason. One line on stderr says where it listens; SIGINT\n"
	      "or SIGTERM stops it (exit status 0). A profile shows the names,\n"
	      "stacks and labels of every process sampled: keep it on loopback,\n"
	      "where it takes connections only from root, its own user and\n"
	      "--allow-user's users, and closes the others'.\n"
	      "\n"
	      "  -l, --listen ADDR      HOST:PORT, [IPV6]:PORT or :PORT (default\n"
	      "                         " PLABEL_SERVE_DEFAULT_LISTEN "); port 0 picks a free one\n"
	      "  -u, --unix PATH        a Unix socket instead, mode 0600\n"
	      "      --allow-user USERS these users' connections too (names or uids)\n"
	      "      --allow-remote     allow a --listen address that is not loopback:\n"
	      "                         anyone who reaches it reads profiles\n"
	      "  -a, --all-cpus         every process on the system (the default)\n"
	      "  -p, --pid PID[,PID..]  these processes (and threads) only\n"
	      "  -F, --freq HZ          samples per second per CPU, 1.." PLABEL_STR(PLABEL_MAX_SAMPLE_HZ) "\n"
	      "                         (default: the kernel.plabel.sample_hz sysctl)\n"
	      "  -g, --call-graph MODE  fp (default) or dwarf, as for plabel record\n"
	      "      --max-seconds N    the longest seconds=N accepted (default " PLABEL_STR(PLABEL_SERVE_MAX_SECONDS) ")\n"
	      "      --max-requests N   profiles taken at once; more get 503 (default " PLABEL_STR(PLABEL_SERVE_MAX_REQUESTS) ")\n"
	      "      --sanitize-labels  label keys as [a-zA-Z_][a-zA-Z0-9_]*, request,\n"
	      "                         span and trace ids as span_id and trace_id\n"
	      "      --heap[=BYTES]     sample allocations every BYTES on average\n"
	      "                         (default 512K; K, M, G) in the processes\n"
	      "                         served that run with plabel run --heap\n"
	      "      --version          show plabel's version\n"
	      "  -h, --help             show this help\n", f);
}

/* A listening TCP socket on ss; -1 after one message. */
static int serve_listen_tcp(const struct sockaddr_storage *ss, socklen_t len,
			    const char *arg, char *shown, size_t shown_len)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage got;
	socklen_t glen = sizeof(got);
	char host[64] = "?";
	int one = 1;

	if (fd < 0) {
		fprintf(stderr, "plabel serve: socket: %s\n", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, len) || listen(fd, 64) ||
	    getsockname(fd, (struct sockaddr *)&got, &glen)) {
		fprintf(stderr, "plabel serve: cannot listen on %s: %s\n", arg,
			strerror(errno));
		close(fd);
		return -1;
	}
	if (got.ss_family == AF_INET) {
		struct sockaddr_in *in = (void *)&got;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(shown, shown_len, "http://%s:%u/debug/pprof/", host,
			 ntohs(in->sin_port));
	} else {
		struct sockaddr_in6 *in6 = (void *)&got;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(shown, shown_len, "http://[%s]:%u/debug/pprof/", host,
			 ntohs(in6->sin6_port));
	}
	return fd;
}

/* A listening Unix socket at path, mode 0600; -1 after one message. */
static int serve_listen_unix(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "plabel serve: socket path too long: %s\n",
			path);
		return -1;
	}
	strcpy(sun.sun_path, path);
	if (!lstat(path, &st)) {
		int probe;

		if (!S_ISSOCK(st.st_mode)) {
			fprintf(stderr, "plabel serve: %s exists and is not a socket\n",
				path);
			return -1;
		}
		/* a socket no one listens on is left from an earlier run */
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 &&
		    !connect(probe, (struct sockaddr *)&sun, sizeof(sun))) {
			close(probe);
			fprintf(stderr, "plabel serve: %s is in use by another server\n",
				path);
			return -1;
		}
		if (probe >= 0)
			close(probe);
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "plabel serve: socket: %s\n", strerror(errno));
		return -1;
	}
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun))) {
		umask(old);
		fprintf(stderr, "plabel serve: cannot listen on %s: %s\n", path,
			strerror(errno));
		close(fd);
		return -1;
	}
	umask(old);
	if (chmod(path, 0600) || listen(fd, 64)) {
		fprintf(stderr, "plabel serve: cannot listen on %s: %s\n", path,
			strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	return fd;
}

static void serve_log_free(struct serve_log *log)
{
	serve_tab_free(&log->lsets);
	serve_tab_free(&log->maps);
	serve_tab_free(&log->execs);
	serve_tab_free(&log->comms);
	serve_tab_free(&log->waits);
	serve_tab_free(&log->live);
	serve_tab_free(&log->freed);
	free(log->threads);
	free(log->pend);
}

/*
 * Stop: no new windows; every window waiting gets 503 and its connection
 * is resumed; the reader and the finisher end (the profile being built is
 * sent); the daemon stops once the answers are out (2 s at most).
 */
static void serve_shutdown(struct serve *srv, pthread_t reader,
			   const pthread_t *finishers, unsigned int nfin)
{
	struct serve_win *w;
	struct timespec until;
	unsigned int i;

	pthread_mutex_lock(&srv->lock);
	srv->stopping = 1;
	while ((w = srv->open)) {
		srv->open = w->next;
		if (w->req)
			serve_answer_text(srv, w->req,
					  MHD_HTTP_SERVICE_UNAVAILABLE,
					  "the server is stopping");
		srv->active--;
		serve_win_free(w);
	}
	pthread_cond_broadcast(&srv->cond);
	pthread_mutex_unlock(&srv->lock);
	serve_resume(srv);
	serve_wake(srv);
	pthread_join(reader, NULL);
	for (i = 0; i < nfin; i++)
		pthread_join(finishers[i], NULL);
	serve_resume(srv);

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	pthread_mutex_lock(&srv->lock);
	while (srv->nreqs &&
	       pthread_cond_timedwait(&srv->gone, &srv->lock, &until) == 0)
		;
	pthread_mutex_unlock(&srv->lock);
	if (srv->mhd)
		MHD_stop_daemon(srv->mhd);
	srv->mhd = NULL;
}

/*
 * With --heap, the heap profile as it is at the end of the interval that
 * began at start, written as heap-STAMP beside that interval's files
 * (lock held). 0 or -ENOMEM.
 */
static int serve_rotate_heap(struct serve *srv, uint64_t start)
{
	struct serve_win *w;

	if (!srv->heap_bytes)
		return 0;
	w = serve_win_new(srv);
	if (!w)
		return -ENOMEM;
	w->kind = PLABEL_PROF_HEAP;
	w->file = 1;
	w->start_ns = srv->t0_ns;	/* since the start */
	w->end_ns = serve_now_ns();
	w->wall_ns = srv->wall0_ns;
	w->stamp_ns = srv->wall0_ns + (int64_t)(start - srv->t0_ns);
	w->next = srv->open;
	srv->open = w;
	srv->active++;
	return 0;
}

/* Add a file window [start, start + every) (lock held). 0 or -ENOMEM. */
static int serve_rotate_add(struct serve *srv, uint64_t start)
{
	struct serve_win *w = serve_win_new(srv);

	if (!w)
		return -ENOMEM;
	if (srv->timeline) {
		w->tl = malloc(sizeof(*w->tl));
		if (!w->tl) {
			serve_win_free(w);
			return -ENOMEM;
		}
		plabel_tl_init(w->tl, 0);
		/* (the label was checked by record) */
		if (srv->timeline_label &&
		    plabel_tl_set_focus(w->tl, srv->timeline_label)) {
			serve_win_free(w);
			return -ENOMEM;
		}
		plabel_collect_set_timeline(w->col, w->tl);
	}
	w->kind = PLABEL_PROF_CPU;
	w->file = 1;
	w->start_ns = start;
	w->end_ns = start + srv->every_ns;
	w->wall_ns = srv->wall0_ns + (int64_t)(start - srv->t0_ns);
	w->next = srv->open;
	srv->open = w;
	srv->active++;
	return 0;
}

static int serve_any_alive(const struct plabel_serve_cfg *cfg)
{
	uint32_t i;

	for (i = 0; i < cfg->nwatch; i++)
		if (!(kill(cfg->watch[i], 0) && errno == ESRCH))
			return 1;
	return 0;
}

/*
 * record --every: windows back to back from the start, each written when
 * its records have come; the next one is always open already, so no
 * record falls between two. Ends on SIGINT/SIGTERM, after duration_ns,
 * or when every watched process is gone: the current window ends then
 * and is written, the next is dropped.
 */
static void serve_rotate(struct serve *srv, const struct plabel_serve_cfg *cfg,
			 const sigset_t *sigs)
{
	uint64_t next = srv->t0_ns + srv->every_ns, now, stop_at = 0;
	struct serve_win *w, **pw;
	struct timespec ts;

	if (cfg->duration_ns)
		stop_at = srv->t0_ns + cfg->duration_ns;
	pthread_mutex_lock(&srv->lock);
	if (serve_rotate_add(srv, srv->t0_ns) || serve_rotate_add(srv, next))
		srv->fatal = 1;
	pthread_mutex_unlock(&srv->lock);
	serve_wake(srv);
	while (!srv->fatal) {
		uint64_t until = next;
		int sig;

		now = serve_now_ns();
		if (stop_at && stop_at < until)
			until = stop_at;
		if (cfg->nwatch && until > now + 1000000000ULL)
			until = now + 1000000000ULL;	/* look again in 1 s */
		if (until > now) {
			ts.tv_sec = (until - now) / 1000000000ULL;
			ts.tv_nsec = (until - now) % 1000000000ULL;
			sig = sigtimedwait(sigs, NULL, &ts);
			if (sig == SIGINT || sig == SIGTERM)
				break;
		}
		now = serve_now_ns();
		if ((stop_at && now >= stop_at) ||
		    (cfg->nwatch && !serve_any_alive(cfg)))
			break;
		if (now >= next) {
			next += srv->every_ns;
			pthread_mutex_lock(&srv->lock);
			if (serve_rotate_heap(srv, next - 2 * srv->every_ns) ||
			    serve_rotate_add(srv, next)) {
				fprintf(stderr, "plabel record: out of memory\n");
				srv->fatal = 1;
			}
			pthread_mutex_unlock(&srv->lock);
		}
	}
	/* the window running now ends now; the next is dropped */
	now = serve_now_ns();
	pthread_mutex_lock(&srv->lock);
	for (pw = &srv->open; (w = *pw);) {
		if (w->start_ns >= now) {
			*pw = w->next;
			srv->active--;
			serve_win_free(w);
			continue;
		}
		if (w->end_ns > now)
			w->end_ns = now;
		pw = &w->next;
	}
	if (serve_rotate_heap(srv, next - srv->every_ns))
		srv->fatal = 1;
	serve_wake(srv);
	/* the reader hands them to the finisher once their records came */
	while (srv->active && !srv->fatal)
		pthread_cond_wait(&srv->gone, &srv->lock);
	pthread_mutex_unlock(&srv->lock);
}

int plabel_serve_run(const struct plabel_serve_cfg *cfg, int rec_fd,
		     int listen_fd, const char *shown)
{
	static struct serve srv_s;
	struct serve *srv = &srv_s;
	pthread_t reader, finishers[PLABEL_SERVE_FINISHERS];
	unsigned int nfin = 0, i;
	sigset_t sigs, old;
	int status = 1;

	memset(srv, 0, sizeof(*srv));
	srv->fd = rec_fd;
	srv->wake[0] = srv->wake[1] = -1;
	srv->max_seconds = cfg->max_seconds;
	srv->max_requests = cfg->max_requests;
	srv->sanitize = cfg->sanitize;
	srv->hz = cfg->hz;
	srv->pids = cfg->pids;
	srv->npids = cfg->npids;
	srv->callchain = cfg->callchain;
	srv->heap_bytes = cfg->heap_bytes;
	/* a timeline's waits are the off-CPU profiles' (as in record) */
	srv->offcpu = cfg->offcpu || cfg->timeline;
	srv->timeline = cfg->timeline;
	srv->timeline_label = cfg->timeline_label;
	if (getrandom(&serve_seed, sizeof(serve_seed), 0) !=
	    sizeof(serve_seed))
		serve_seed = serve_now_ns() ^ ((uint64_t)getpid() << 32);
	srv->ready_tail = &srv->ready;
	srv->t0_ns = serve_now_ns();
	srv->wall0_ns = serve_wall_ns();
	pthread_mutex_init(&srv->lock, NULL);
	pthread_mutex_init(&srv->syms_lock, NULL);
	pthread_cond_init(&srv->cond, NULL);
	pthread_cond_init(&srv->gone, NULL);
	if (cfg->check_peer) {
		socklen_t len = sizeof(srv->local);

		/* the port bound, which --listen's :0 does not say */
		if (getsockname(listen_fd, (struct sockaddr *)&srv->local,
				&len)) {
			fprintf(stderr, "plabel serve: getsockname: %s\n",
				strerror(errno));
			goto out;
		}
		srv->check_peer = 1;
		srv->remote_ok = cfg->remote_ok;
		srv->nallow = cfg->nallow;
		memcpy(srv->allow, cfg->allow, cfg->nallow * sizeof(uid_t));
	}
	srv->rbuf = malloc(PLABEL_SERVE_READ_BUF);
	if (!srv->rbuf || pipe2(srv->wake, O_CLOEXEC | O_NONBLOCK)) {
		fprintf(stderr, "plabel serve: out of memory\n");
		goto out;
	}
	fcntl(rec_fd, F_SETFL, fcntl(rec_fd, F_GETFL) | O_NONBLOCK);
	/* without memory for it, only other programs' contexts are lost */
	srv->tctx = plabel_tctx_new(rec_fd);
	for (i = 0; srv->tctx && i < cfg->npids; i++)
		plabel_tctx_watch(srv->tctx, (uint32_t)cfg->pids[i]);

	/* the signals are main's, through sigwaitinfo(); no SIGPIPE */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &sigs, &old);
	if (pthread_create(&reader, NULL, serve_reader, srv)) {
		fprintf(stderr, "plabel serve: cannot start a thread\n");
		goto out_mask;
	}
	for (i = 0; i < PLABEL_SERVE_FINISHERS; i++) {
		if (pthread_create(&finishers[i], NULL, serve_finisher, srv))
			break;
		nfin++;
	}
	if (!nfin) {
		fprintf(stderr, "plabel serve: cannot start a thread\n");
		pthread_mutex_lock(&srv->lock);
		srv->stopping = 1;
		pthread_mutex_unlock(&srv->lock);
		serve_wake(srv);
		pthread_join(reader, NULL);
		goto out_mask;
	}
	if (cfg->every_ns) {
		srv->every_ns = cfg->every_ns;
		srv->out_dir = cfg->out_dir;
		serve_rotate(srv, cfg, &sigs);
		serve_shutdown(srv, reader, finishers, nfin);
		status = srv->fatal || srv->files_failed ? 1 : 0;
		goto out_mask;
	}
	srv->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
				    MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME,
				    0, serve_accept, srv, serve_handler, srv,
				    MHD_OPTION_LISTEN_SOCKET, listen_fd,
				    MHD_OPTION_CONNECTION_TIMEOUT,
				    (unsigned int)PLABEL_SERVE_CONN_TIMEOUT_S,
				    MHD_OPTION_CONNECTION_MEMORY_LIMIT,
				    (size_t)PLABEL_SERVE_CONN_MEMORY,
				    MHD_OPTION_CONNECTION_LIMIT,
				    (unsigned int)PLABEL_SERVE_CONN_LIMIT,
				    MHD_OPTION_NOTIFY_COMPLETED,
				    serve_completed, srv,
				    MHD_OPTION_END);
	if (!srv->mhd) {
		fprintf(stderr, "plabel serve: cannot start the HTTP server on %s\n",
			shown);
		pthread_mutex_lock(&srv->lock);
		srv->stopping = 1;
		pthread_cond_broadcast(&srv->cond);
		pthread_mutex_unlock(&srv->lock);
		serve_wake(srv);
		pthread_join(reader, NULL);
		for (i = 0; i < nfin; i++)
			pthread_join(finishers[i], NULL);
		goto out_mask;
	}
	listen_fd = -1;	/* the daemon's now */
	fprintf(stderr, "plabel serve: listening on %s\n", shown);

	for (;;) {
		int sig = sigwaitinfo(&sigs, NULL);

		if (sig == SIGINT || sig == SIGTERM)
			break;
	}
	serve_shutdown(srv, reader, finishers, nfin);
	status = srv->fatal ? 1 : 0;

out_mask:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
out:
	if (listen_fd >= 0)
		close(listen_fd);
	if (srv->wake[0] >= 0)
		close(srv->wake[0]);
	if (srv->wake[1] >= 0)
		close(srv->wake[1]);
	serve_log_free(&srv->log);
	plabel_tctx_free(srv->tctx);
	free(srv->rbuf);
	free(srv->sbuf);
	plabel_syms_free(srv->syms);
	pthread_cond_destroy(&srv->gone);
	pthread_cond_destroy(&srv->cond);
	pthread_mutex_destroy(&srv->syms_lock);
	pthread_mutex_destroy(&srv->lock);
	return status;
}

int plabel_cmd_serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "unix", required_argument, NULL, 'u' },
		{ "allow-remote", no_argument, NULL, 'R' },
		{ "allow-user", required_argument, NULL, 'U' },
		{ "all-cpus", no_argument, NULL, 'a' },
		{ "pid", required_argument, NULL, 'p' },
		{ "freq", required_argument, NULL, 'F' },
		{ "call-graph", required_argument, NULL, 'g' },
		{ "max-seconds", required_argument, NULL, 'S' },
		{ "max-requests", required_argument, NULL, 'M' },
		{ "sanitize-labels", no_argument, NULL, 'Z' },
		{ "heap", optional_argument, NULL, 'H' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static int32_t pids[PLABEL_MAX_PIDS];
	static uid_t allow[PLABEL_SERVE_MAX_ALLOW];
	struct plabel_serve_cfg cfg = {
		.allow = allow,
		.max_seconds = PLABEL_SERVE_MAX_SECONDS,
		.max_requests = PLABEL_SERVE_MAX_REQUESTS,
	};
	const char *listen_arg = PLABEL_SERVE_DEFAULT_LISTEN, *unix_path = NULL;
	struct plabel_session_opts so = { .callchain = PLABEL_CALLCHAIN_FP };
	int c, ret, remote = 0, all = 0, lfd = -1, fd = -1, status = 1;
	int gave_listen = 0, made_sock = 0;
	struct sockaddr_storage ss;
	socklen_t sslen = 0;
	uint32_t npids = 0;
	unsigned long ul;
	const char *why;
	char shown[256];

	optind = 1;
	while ((c = getopt_long(argc, argv, "+l:u:ap:F:g:h", opts, NULL)) !=
	       -1) {
		switch (c) {
		case 'l':
			listen_arg = optarg;
			gave_listen = 1;
			break;
		case 'u':
			unix_path = optarg;
			break;
		case 'R':
			remote = 1;
			break;
		case 'U':
			ret = plabel_serve_parse_users(optarg, allow,
						       &cfg.nallow,
						       PLABEL_SERVE_MAX_ALLOW);
			if (ret) {
				fprintf(stderr, ret == -ENOENT ?
					"plabel serve: bad --allow-user '%s': no such user\n" :
					"plabel serve: bad --allow-user '%s': user names or uids, comma-separated, at most " PLABEL_STR(PLABEL_SERVE_MAX_ALLOW) "\n",
					optarg);
				return 2;
			}
			break;
		case 'a':
			all = 1;
			break;
		case 'p':
			if (plabel_parse_pids(optarg, pids, &npids)) {
				fprintf(stderr, "plabel serve: bad pid list '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'F':
			if (plabel_parse_hz(optarg, &cfg.hz)) {
				fprintf(stderr, "plabel serve: bad frequency '%s': the module samples at 1..%d Hz\n",
					optarg, PLABEL_MAX_SAMPLE_HZ);
				return 2;
			}
			break;
		case 'g':
			if (plabel_parse_callchain(optarg, &so.callchain)) {
				fprintf(stderr, "plabel serve: bad call graph mode '%s' (fp or dwarf)\n",
					optarg);
				return 2;
			}
			break;
		case 'S':
			if (plabel_parse_ulong(optarg, 1, 86400, &ul)) {
				fprintf(stderr, "plabel serve: bad --max-seconds '%s' (1..86400)\n",
					optarg);
				return 2;
			}
			cfg.max_seconds = ul;
			break;
		case 'M':
			if (plabel_parse_ulong(optarg, 1, 1024, &ul)) {
				fprintf(stderr, "plabel serve: bad --max-requests '%s' (1..1024)\n",
					optarg);
				return 2;
			}
			cfg.max_requests = ul;
			break;
		case 'Z':
			cfg.sanitize = 1;
			break;
		case 'H':
			if (plabel_heap_parse(optarg, &cfg.heap_bytes)) {
				fprintf(stderr, "plabel serve: bad heap interval '%s' (bytes, 1 to 2^40, with K, M or G)\n",
					optarg);
				return 2;
			}
			break;
		case 'V':
			printf("plabel %s\n", PLABEL_VERSION);
			return 0;
		case 'h':
			plabel_serve_usage(stdout);
			return 0;
		default:
			plabel_serve_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "plabel serve: unexpected argument '%s'\n",
			argv[optind]);
		plabel_serve_usage(stderr);
		return 2;
	}
	if (all && npids) {
		fprintf(stderr, "plabel serve: give -a or -p PIDS, not both\n");
		return 2;
	}
	if (cfg.heap_bytes && so.callchain == PLABEL_CALLCHAIN_DWARF) {
		fprintf(stderr, "plabel serve: --heap takes frame-pointer stacks (-g fp): with dwarf snapshots no two freed allocations are alike, and what it keeps would grow with every one\n");
		return 2;
	}
	if (gave_listen && unix_path) {
		fprintf(stderr, "plabel serve: give --listen or --unix, not both\n");
		return 2;
	}
	if (!unix_path) {
		if (plabel_serve_parse_listen(listen_arg, &ss, &sslen, &why)) {
			fprintf(stderr, "plabel serve: bad --listen '%s': %s\n",
				listen_arg, why);
			return 2;
		}
		if (!plabel_serve_is_loopback((struct sockaddr *)&ss) &&
		    !remote) {
			fprintf(stderr, "plabel serve: %s is not a loopback address: profiles show every sampled process's names, stacks and labels; give --allow-remote to serve them there\n",
				listen_arg);
			return 2;
		}
		if (plabel_serve_is_wildcard((struct sockaddr *)&ss)) {
			if (cfg.nallow) {
				fprintf(stderr, "plabel serve: --allow-user needs a --listen address that is not a wildcard: on %s local users cannot be told from remote ones\n",
					listen_arg);
				return 2;
			}
		} else {
			cfg.check_peer = 1;
			cfg.remote_ok = remote;
		}
	} else if (cfg.nallow) {
		fprintf(stderr, "plabel serve: --allow-user is for --listen: a --unix socket is its owner's (mode 0600)\n");
		return 2;
	}

	fd = plabel_open_device();
	if (fd < 0)
		return 1;
	lfd = unix_path ? serve_listen_unix(unix_path) :
	      serve_listen_tcp(&ss, sslen, listen_arg, shown, sizeof(shown));
	if (lfd < 0)
		goto out;
	if (unix_path) {
		made_sock = 1;
		snprintf(shown, sizeof(shown), "unix:%s (/debug/pprof/)",
			 unix_path);
	}
	so.target = npids ? PLABEL_TARGET_PIDS : PLABEL_TARGET_ALL;
	cfg.pids = pids;
	cfg.npids = npids;
	cfg.callchain = so.callchain;
	so.hz = cfg.hz;
	so.heap_bytes = cfg.heap_bytes;
	so.pids = pids;
	so.npids = npids;
	ret = plabel_session_start(fd, &so);
	if (ret) {
		fprintf(stderr, "plabel serve: cannot start sampling: %s\n",
			plabel_start_err(-ret));
		close(lfd);
		goto out;
	}
	status = plabel_serve_run(&cfg, fd, lfd, shown);
	if (ioctl(fd, PLABEL_IOC_SESSION_STOP) && errno != EINVAL)
		fprintf(stderr, "plabel serve: stopping the session: %s\n",
			strerror(errno));
out:
	if (made_sock)
		unlink(unix_path);
	close(fd);
	return status;
}
