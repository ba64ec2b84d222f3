// SPDX-License-Identifier: GPL-2.0
/*
 * plabel record: run a session on /dev/plabel, collect its records and
 * write DIR/cpu.pb.gz and DIR/threadcreate.pb.gz.
 *
 * The session ends when CMD exits (it is forked held on a pipe, so the
 * session covers it from its exec on), when every -p process has exited
 * (without CMD), after --duration, or on SIGINT/SIGTERM; then the session
 * is stopped, the rest of the stream drained, and the files are written in
 * every case. With CMD, plabel exits with CMD's status.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"
#include "heaplib.h"
#include "plabel.h"
#include "plabel_uapi.h"
#include "serve.h"
#include "session.h"
#include "spool.h"
#include "timeline.h"

#define PLABEL_READ_BUF		(4U << 20)

/*
 * A read() that leaves more room than any record takes (the largest, a
 * label set at the limits, is under 300 KiB) went round every CPU's ring
 * and emptied it, so each record stamped before the read began has been
 * read, unless it took longer than this from its stamp to its ring: the
 * kernel stamps and writes a record with interrupts off, but a virtual
 * CPU can be held up by its host.
 */
#define PLABEL_SETTLE_LEFT	(512U << 10)
#define PLABEL_SETTLE_MARGIN_NS	2000000000ULL
#define PLABEL_DEFAULT_DIR	"plabel-out"
/*
 * The longest the main loop sleeps: the status line's period, and how late
 * an ending goes unnoticed where no pidfd or signal tells (a signal that
 * comes just before poll()). The kernel wakes the reader rarely too: every
 * wake-up is CPU time the profiled programs do not get.
 */
#define PLABEL_POLL_MS		1000

static volatile sig_atomic_t plabel_stop_sig;

static void plabel_on_signal(int sig)
{
	plabel_stop_sig = sig;
}

static void plabel_on_child(int sig)
{
	/* only here to interrupt poll() */
}

void plabel_record_usage(FILE *f)
{
	fputs("usage: plabel record [-F HZ] [-g fp|dwarf] [-o DIR] [--duration S]\n"
	      "                     [--no-process-labels] [--off-cpu [--off-cpu-min D]]\n"
	      "                     [--timeline [--timeline-label KEY=VALUE]]\n"
	      "                     [--heap[=BYTES]]\n"
	      "                     [-a | -p PID[,PID..]] [-- CMD ARGS..]\n"
	      "       plabel record --every T [-F HZ] [-g fp|dwarf] [-o DIR] [--duration S]\n"
	      "                     [--heap[=BYTES]] [--off-cpu [--off-cpu-min D]]\n"
	      "                     [--timeline [--timeline-label KEY=VALUE]]\n"
	      "                     -a | -p PID[,PID..]\n"
	      "\n"
	      "Record labeled CPU samples and thread creations and write\n"
	      "DIR/cpu.pb.gz and DIR/threadcreate.pb.gz (pprof format).\n"
	      "A CPU sample's nanoseconds are the CPU time its thread used since\n"
	      "its previous sample, as the kernel accounts it.\n"
	      "Without -a or -p, CMD and everything it starts is recorded; with\n"
	      "them, they are recorded while CMD runs. Recording ends when CMD\n"
	      "exits, when every PID has exited, after --duration, or on\n"
	      "SIGINT/SIGTERM; the files are written in every case. A previous\n"
	      "DIR is kept as DIR.old. One line on stderr says when sampling is\n"
	      "live. With CMD the exit status is CMD's (126/127: it could not be\n"
	      "run, 128+N: killed by signal N).\n"
	      "\n"
	      "  -F, --freq HZ          samples per second per CPU, 1.." PLABEL_STR(PLABEL_MAX_SAMPLE_HZ) "\n"
	      "                         (default: the kernel.plabel.sample_hz sysctl)\n"
	      "  -g, --call-graph MODE  fp: frame-pointer call chains (default);\n"
	      "                         dwarf: stack snapshots unwound with the\n"
	      "                         programs' .eh_frame (no frame pointers needed)\n"
	      "  -o, --output DIR       output directory (default: ./plabel-out)\n"
	      "  -a, --all-cpus         every process on the system\n"
	      "  -p, --pid PID[,PID..]  these processes (and threads) only\n"
	      "      --duration S       stop after S seconds (decimals allowed;\n"
	      "                         CMD, if still running, gets SIGTERM)\n"
	      "      --no-process-labels  no process and thread name labels\n"
	      "      --off-cpu          also where threads wait off their CPU:\n"
	      "                         DIR/offcpu.pb.gz (switches/count,\n"
	      "                         off-cpu/nanoseconds, label wait=sleep|io|\n"
	      "                         futex|other) and DIR/wall.pb.gz\n"
	      "                         (wall/nanoseconds: CPU and off-CPU time)\n"
	      "      --off-cpu-min D    only waits of at least D (N us, ms or s, at\n"
	      "                         most 10s; default: the\n"
	      "                         kernel.plabel.offcpu_min_us sysctl)\n"
	      "      --timeline         also DIR/timeline.json.gz (Trace Event Format,\n"
	      "                         for Perfetto UI and speedscope): a track per\n"
	      "                         thread, on- and off-CPU slices with their\n"
	      "                         labels, samples with stacks, thread creations;\n"
	      "                         at most " PLABEL_STR(PLABEL_TL_MAX_OBS) " observations. Implies\n"
	      "                         --off-cpu (--off-cpu-min applies)\n"
	      "      --timeline-label KEY=VALUE  only threads that carried this label\n"
	      "      --heap[=BYTES]     also DIR/heap.pb.gz: allocations sampled every\n"
	      "                         BYTES on average (default 512K; K, M, G), by\n"
	      "                         libplabel-heap.so, preloaded into CMD (and\n"
	      "                         what it starts); with -a or -p, of the\n"
	      "                         processes started with plabel run --heap\n"
	      "      --every T          one profile of each kind per T (S, Ss, Mm or\n"
	      "                         Hh) as DIR/cpu-YYYYmmddTHHMMSS.pb.gz and\n"
	      "                         DIR/threadcreate-..., stamped with the\n"
	      "                         interval's start (UTC); memory stays bounded.\n"
	      "                         With --heap, DIR/heap-...: the allocations\n"
	      "                         since the start, at the interval's end;\n"
	      "                         with --off-cpu, DIR/offcpu-... and\n"
	      "                         DIR/wall-...: the waits that ended in it;\n"
	      "                         with --timeline, DIR/timeline-....json.gz:\n"
	      "                         its observations, each wait whole where it\n"
	      "                         ended\n"
	      "      --version          show plabel's version\n"
	      "  -h, --help             show this help\n", f);
}

/* CLOCK_MONOTONIC in ns, the records' clock */
static uint64_t plabel_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static double plabel_now(void)
{
	return plabel_now_ns() / 1e9;
}

/*
 * The bytes of one or more read()s (read() writes them here, at len, with
 * the rest of PLABEL_READ_BUF as room), queued for the collector thread,
 * and for each read where its bytes end and the time before which every
 * record has been read with them (0: not known). The collector gives the
 * buffer back for more read()s, so records are not copied once more and
 * the buffer's pages stay mapped.
 */
#define PLABEL_QSEG_MAX		64	/* read()s a buffer holds */
#define PLABEL_QBUF_MIN_ROOM	(1U << 20)	/* to read into it again */

struct plabel_qseg {
	size_t end;
	uint64_t settled;
};

struct plabel_qbuf {
	struct plabel_qbuf *next;
	size_t len;
	unsigned int nseg;
	struct plabel_qseg seg[PLABEL_QSEG_MAX];
	uint8_t data[];
};

/*
 * Buffers at most. They are reused, their pages staying mapped: mapping
 * and clearing fresh pages for every read() cost more than the copy when
 * the collector lags. When all wait for it, the next read() waits too, and
 * the kernel counts what its rings then cannot hold as lost.
 */
#define PLABEL_QBUF_MAX		8
#define PLABEL_QBUF_LAZY	(PLABEL_QBUF_MAX / 2)
/* of the first buffer: all of it, so a recording of up to 4 MiB of records
 * maps no page of it while the program runs */
#define PLABEL_PREFAULT		(sizeof(struct plabel_qbuf) + PLABEL_READ_BUF)
/*
 * A lazy collector's buffers, once PLABEL_QBUF_LAZY wait, go to a file as
 * read (up to this much), to be collected at the end, as perf leaves its
 * records in perf.data: writing a buffer costs a copy, collecting it
 * about a thousand instructions a record, while the program runs.
 */
#define PLABEL_RAW_MAX		(1ULL << 30)

/*
 * The main thread only reads /dev/plabel and queues what it read, so the
 * kernel's buffers are emptied promptly; a second thread decodes and
 * collects, in read order (dwarf snapshots are only spooled to a file then:
 * unwinding them waits for the end).
 *
 * Recording CMD, the collector waits until PLABEL_QBUF_LAZY buffers are
 * queued (or the end, or the reader is out of memory for another), then
 * takes all that are: what CMD's threads run meanwhile is not cut into by
 * the collector's work, which perf too leaves for later (in perf.data).
 * Every process and thread of CMD starts in the session, so the kernel's
 * records name them and their mappings, and the collector reads /proc only
 * where a record comes late or was lost (a sample read before its
 * process's THREAD record), which waiting makes likelier to find the
 * process gone. With -p or -a, whose processes can end any time with
 * names and mappings only /proc has, it collects each buffer as it comes.
 */
struct plabel_rec_state {
	int fd;
	struct plabel_collect *col;
	int corrupt;
	pthread_t worker;
	pthread_mutex_t qlock;	/* the queue, the buffers and done */
	pthread_cond_t qcond;	/* a buffer was queued, or done */
	pthread_cond_t freecond;	/* a buffer came back */
	struct plabel_qbuf *head, *tail;
	struct plabel_qbuf *spare;	/* for the next read()s */
	struct plabel_qbuf *fill;	/* main thread: read()s go on here */
	unsigned int nbufs;	/* allocated, at most PLABEL_QBUF_MAX */
	unsigned int nqueued;	/* on the queue */
	int lazy;		/* collect from PLABEL_QBUF_LAZY queued on */
	uint64_t bytes_read;	/* main thread only */
	int draining;		/* the collector takes all that are queued */
	int starved;		/* the reader waits for a buffer back */
	int done;
	pthread_mutex_t col_lock;	/* col, while the worker runs */
	volatile int nomem;
	struct plabel_tctx *tctx;	/* thread contexts; main thread */
	/* the collector's: buffers set aside in a file, in read order */
	int rawfd;		/* -1: none yet */
	uint64_t raw_bytes;	/* written */
	int raw_off;		/* full or failed: collect as they come */
};

/*
 * A new buffer, or NULL. Mapped on its own, without huge pages: a read()
 * mostly fills a few pages of it, and a huge page would be 2 MiB to clear
 * and keep for them, while the profiled program waits for the CPU.
 */
static struct plabel_qbuf *plabel_qbuf_new(void)
{
	size_t size = sizeof(struct plabel_qbuf) + PLABEL_READ_BUF;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, size, MADV_NOHUGEPAGE);
	return p;
}

static void plabel_qbuf_free(struct plabel_qbuf *q)
{
	if (q)
		munmap(q, sizeof(*q) + PLABEL_READ_BUF);
}

/* A buffer to read() into, or NULL. */
static struct plabel_qbuf *plabel_qbuf_get(struct plabel_rec_state *st)
{
	struct plabel_qbuf *q;

	pthread_mutex_lock(&st->qlock);
	while (!st->spare && st->nbufs >= PLABEL_QBUF_MAX)
		pthread_cond_wait(&st->freecond, &st->qlock);
	q = st->spare;
	if (q)
		st->spare = q->next;
	else
		st->nbufs++;
	pthread_mutex_unlock(&st->qlock);
	if (!q)
		q = plabel_qbuf_new();
	if (!q) {
		/*
		 * No memory for another: wait for one of those queued (all
		 * are, or with the collector), woken to take them if lazy.
		 */
		pthread_mutex_lock(&st->qlock);
		st->nbufs--;
		if (st->nbufs) {
			st->starved = 1;
			pthread_cond_signal(&st->qcond);
			while (!st->spare)
				pthread_cond_wait(&st->freecond, &st->qlock);
			q = st->spare;
			st->spare = q->next;
			st->starved = 0;
		}
		pthread_mutex_unlock(&st->qlock);
		if (!q)
			return NULL;
	}
	q->next = NULL;
	q->len = 0;
	q->nseg = 0;
	return q;
}

static void plabel_qbuf_put(struct plabel_rec_state *st,
			    struct plabel_qbuf *q)
{
	pthread_mutex_lock(&st->qlock);
	q->next = st->spare;
	st->spare = q;
	pthread_cond_signal(&st->freecond);
	pthread_mutex_unlock(&st->qlock);
}

/* Collect the records of buffer q, in its read()s' order. */
static void plabel_collect_qbuf(struct plabel_rec_state *st,
				struct plabel_qbuf *q)
{
	unsigned int i;
	size_t at;
	int ret;

	pthread_mutex_lock(&st->col_lock);
	for (i = 0, at = 0, ret = 0; i < q->nseg && !st->nomem; i++) {
		const struct plabel_qseg *g = &q->seg[i];
		int r;

		r = plabel_collect_buffer(st->col, q->data + at, g->end - at);
		if (!r && g->settled)
			r = plabel_collect_settled(st->col, g->settled);
		at = g->end;
		if (r == -ENOMEM)
			st->nomem = 1;
		if (r && !ret)
			ret = r;
	}
	pthread_mutex_unlock(&st->col_lock);
	if (ret == -EBADMSG && !st->corrupt) {
		st->corrupt = 1;
		fprintf(stderr, "plabel record: malformed records from %s skipped\n",
			PLABEL_DEVICE);
	}
}

/* Write all of buf at off. 0 or -1. */
static int plabel_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, buf, len, off);

		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		buf = (const char *)buf + n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* Read all of buf at off. 0 or -1. */
static int plabel_pread_all(int fd, void *buf, size_t len, off_t off)
{
	while (len) {
		ssize_t n = pread(fd, buf, len, off);

		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		buf = (char *)buf + n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/*
 * Buffer q to the file, behind its header (the struct up to its data):
 * 0, or -1 when it cannot take it (no file, full: it stays as it was).
 */
static int plabel_raw_put(struct plabel_rec_state *st, struct plabel_qbuf *q)
{
	size_t head = offsetof(struct plabel_qbuf, data);

	if (st->raw_off || st->raw_bytes + head + q->len > PLABEL_RAW_MAX)
		return -1;
	if (st->rawfd < 0)
		st->rawfd = plabel_tmpfile();
	if (st->rawfd < 0 ||
	    plabel_pwrite_all(st->rawfd, q, head + q->len,
			      (off_t)st->raw_bytes))
		return -1;
	st->raw_bytes += head + q->len;
	return 0;
}

/*
 * Collect what the file holds, buffer by buffer through q (a buffer of
 * the worker's own), and write no more to it: from then on buffers are
 * collected as they come, after these.
 */
static void plabel_raw_replay(struct plabel_rec_state *st,
			      struct plabel_qbuf *q)
{
	size_t head = offsetof(struct plabel_qbuf, data);
	uint64_t off = 0;

	st->raw_off = 1;
	while (off < st->raw_bytes) {
		unsigned int i;
		size_t end = 0;
		int bad;

		errno = 0;
		bad = plabel_pread_all(st->rawfd, q, head, (off_t)off) ||
		      q->len > PLABEL_READ_BUF || q->nseg > PLABEL_QSEG_MAX;
		/* the segments' ends grow and stay within the bytes */
		for (i = 0; !bad && i < q->nseg; i++) {
			bad = q->seg[i].end < end;
			end = q->seg[i].end;
		}
		if (bad || end > q->len ||
		    plabel_pread_all(st->rawfd, q->data, q->len,
				     (off_t)(off + head))) {
			fprintf(stderr, "plabel record: cannot read back what was set aside (%s): %.1f MiB of records left out\n",
				errno ? strerror(errno) : "not as written",
				(st->raw_bytes - off) / 1048576.0);
			break;
		}
		off += head + q->len;
		plabel_collect_qbuf(st, q);
	}
	if (st->rawfd >= 0)
		close(st->rawfd);
	st->rawfd = -1;
	st->raw_bytes = 0;
}

/* A buffer for the collector to read back into: a spare one, or new. */
static struct plabel_qbuf *plabel_worker_buf(struct plabel_rec_state *st)
{
	struct plabel_qbuf *q;

	pthread_mutex_lock(&st->qlock);
	q = st->spare;
	if (q)
		st->spare = q->next;
	pthread_mutex_unlock(&st->qlock);
	return q ? q : plabel_qbuf_new();
}

/* Collect what was set aside, before anything read after it. */
static void plabel_raw_drain(struct plabel_rec_state *st)
{
	struct plabel_qbuf *own = plabel_worker_buf(st);

	if (!own) {
		st->nomem = 1;
		fprintf(stderr, "plabel record: out of memory for the records set aside\n");
		return;
	}
	plabel_raw_replay(st, own);
	plabel_qbuf_put(st, own);
}

static void *plabel_worker(void *arg)
{
	struct plabel_rec_state *st = arg;
	struct plabel_qbuf *q;
	int done;

	for (;;) {
		pthread_mutex_lock(&st->qlock);
		while (!st->done && (!st->head ||
				     (st->lazy && !st->draining &&
				      !st->starved &&
				      st->nqueued < PLABEL_QBUF_LAZY)))
			pthread_cond_wait(&st->qcond, &st->qlock);
		q = st->head;
		if (q) {
			st->head = q->next;
			if (!st->head)
				st->tail = NULL;
			st->nqueued--;
		}
		/* a lazy collector drains the queue, then waits again */
		st->draining = st->head != NULL;
		done = st->done;
		pthread_mutex_unlock(&st->qlock);
		if (!q)
			break;	/* done and drained */
		/* while the program runs: set aside, collect at the end */
		if (st->lazy && !done && !plabel_raw_put(st, q)) {
			plabel_qbuf_put(st, q);
			continue;
		}
		/*
		 * What was set aside comes first: q joins it if it can, and
		 * its memory reads them all back (no buffer more needed).
		 */
		if (st->raw_bytes && !plabel_raw_put(st, q)) {
			plabel_raw_replay(st, q);
			plabel_qbuf_put(st, q);
			continue;
		}
		if (st->raw_bytes)
			plabel_raw_drain(st);
		st->raw_off = 1;
		plabel_collect_qbuf(st, q);
		plabel_qbuf_put(st, q);
	}
	if (st->raw_bytes)
		plabel_raw_drain(st);
	if (st->rawfd >= 0)
		close(st->rawfd);
	return NULL;
}

static int plabel_worker_start(struct plabel_rec_state *st)
{
	sigset_t all, old;
	int ret;

	pthread_mutex_init(&st->qlock, NULL);
	pthread_cond_init(&st->qcond, NULL);
	pthread_cond_init(&st->freecond, NULL);
	pthread_mutex_init(&st->col_lock, NULL);
	/* signals stay with the main thread, whose poll() they interrupt */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ret = pthread_create(&st->worker, NULL, plabel_worker, st);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!ret)
		pthread_setname_np(st->worker, "plabel-collect");
	return -ret;
}

static void plabel_worker_finish(struct plabel_rec_state *st)
{
	pthread_mutex_lock(&st->qlock);
	st->done = 1;
	pthread_cond_signal(&st->qcond);
	pthread_mutex_unlock(&st->qlock);
	pthread_join(st->worker, NULL);
}

/*
 * Queue the buffer being filled, if it holds anything; an empty one goes
 * back with the spares. At the end the collector may need a buffer to
 * read back what it set aside, and where no other can be had (out of
 * memory) the reading's last, empty one is it.
 */
static void plabel_fill_queue(struct plabel_rec_state *st)
{
	struct plabel_qbuf *q = st->fill;

	if (!q)
		return;
	st->fill = NULL;
	if (!q->nseg) {
		plabel_qbuf_put(st, q);
		return;
	}
	pthread_mutex_lock(&st->qlock);
	if (st->tail)
		st->tail->next = q;
	else
		st->head = q;
	st->tail = q;
	/* no wake-up that finds too little to do */
	if (++st->nqueued >= PLABEL_QBUF_LAZY || !st->lazy)
		pthread_cond_signal(&st->qcond);
	pthread_mutex_unlock(&st->qlock);
}

/*
 * One read(): >0 bytes read, 0 end of stream, -EAGAIN, or an error. The
 * bytes go on in the buffer being filled; it is queued at once unless the
 * collector is lazy and it has room for another read().
 */
static ssize_t plabel_read_once(struct plabel_rec_state *st)
{
	struct plabel_qbuf *q;
	uint64_t t = plabel_now_ns();
	size_t room;
	ssize_t n;
	int err;

	if (st->nomem)
		return -ENOMEM;
	if (!st->fill)
		st->fill = plabel_qbuf_get(st);
	q = st->fill;
	if (!q)
		return -ENOMEM;
	room = PLABEL_READ_BUF - q->len;
	n = read(st->fd, q->data + q->len, room);
	err = errno;
	if (n <= 0)
		return n < 0 ? -err : 0;
	/* processes that may publish thread contexts, at once */
	if (st->tctx)
		plabel_tctx_scan(st->tctx, q->data + q->len, (size_t)n);
	q->len += n;
	q->seg[q->nseg].end = q->len;
	q->seg[q->nseg].settled = room - n >= PLABEL_SETTLE_LEFT &&
				  t > PLABEL_SETTLE_MARGIN_NS ?
				  t - PLABEL_SETTLE_MARGIN_NS : 0;
	q->nseg++;
	st->bytes_read += n;
	if (!st->lazy || q->nseg == PLABEL_QSEG_MAX ||
	    PLABEL_READ_BUF - q->len < PLABEL_QBUF_MIN_ROOM)
		plabel_fill_queue(st);
	return n;
}

/* The status line; skipped while the worker holds the collector. */
static void plabel_progress(struct plabel_rec_state *st, double t0,
			    int final)
{
	struct plabel_collect_stats s;

	if (final)
		pthread_mutex_lock(&st->col_lock);
	else if (pthread_mutex_trylock(&st->col_lock))
		return;
	plabel_collect_stats(st->col, &s);
	pthread_mutex_unlock(&st->col_lock);
	/* samples are counted once collected, read bytes at once */
	fprintf(stderr, "\rplabel: recording %.0fs, %.1f MiB read, %" PRIu64
		" samples, %" PRIu64 " lost%s", plabel_now() - t0,
		st->bytes_read / 1048576.0, s.samples, s.lost,
		final ? "\n" : "   ");
}

/* Whether record writes kind k, with the optional kinds in record. */
static int plabel_kind_written(size_t k, uint32_t record)
{
	return !plabel_kinds[k].optional ||
	       (record & plabel_kinds[k].record_flag);
}

/*
 * DIR/timeline.json.gz, after the profiles were built; its path in *path
 * (malloc()ed). 0 or -errno, after a message.
 */
static int plabel_write_timeline(struct plabel_collect *col,
				 const struct plabel_timeline *tl,
				 const char *dir, char **path)
{
	int ret;

	if (asprintf(path, "%s/%s", dir, PLABEL_TIMELINE_FILE) < 0) {
		*path = NULL;
		return -ENOMEM;
	}
	ret = plabel_collect_write_timeline(col, *path);
	if (ret)
		fprintf(stderr, "plabel record: cannot write %s: %s\n", *path,
			strerror(-ret));
	else if (tl->dropped)
		fprintf(stderr, "plabel record: %s holds the first %zu observations only: %" PRIu64 " later ones were left out (the profiles have them)\n",
			*path, tl->n, tl->dropped);
	return ret;
}

static int plabel_write_profiles(struct plabel_collect *col, const char *dir,
				 int64_t wall_ns, int64_t dur_ns,
				 uint32_t record,
				 const struct plabel_timeline *tl)
{
	char *tl_path = NULL;
	struct plabel_prof *profs[PLABEL_PROF_NKINDS] = { NULL };
	char *paths[PLABEL_PROF_NKINDS] = { NULL };
	struct plabel_collect_stats s;
	size_t k;
	int ret;

	ret = plabel_collect_finish(col, wall_ns, dur_ns, profs);
	if (ret) {
		fprintf(stderr, "plabel record: building the profiles: %s\n",
			strerror(-ret));
		return 1;
	}
	for (k = 0; k < PLABEL_PROF_NKINDS && !ret; k++) {
		if (asprintf(&paths[k], "%s/%s", dir,
			     plabel_kinds[k].file) < 0) {
			paths[k] = NULL;
			ret = -ENOMEM;
		}
	}
	for (k = 0; k < PLABEL_PROF_NKINDS && !ret; k++) {
		if (!plabel_kind_written(k, record))
			continue;
		ret = plabel_prof_write(profs[k], paths[k]);
		if (ret)
			fprintf(stderr, "plabel record: cannot write %s: %s\n",
				paths[k], strerror(-ret));
	}
	if (!ret && tl)
		ret = plabel_write_timeline(col, tl, dir, &tl_path);
	if (ret)
		goto out;
	plabel_collect_stats(col, &s);
	/* an older stream reads on: each change is marked by a flag */
	if (s.version > PLABEL_REC_VERSION)
		fprintf(stderr, "plabel record: the module writes record format %u, this plabel knows %u: update plabel\n",
			s.version, PLABEL_REC_VERSION);
	fprintf(stderr, "plabel: %" PRIu64 " samples, %" PRIu64
		" thread creations, %" PRIu64 " label sets, %" PRIu64
		" lost records%s", s.samples, s.threads,
		s.labelsets, s.lost, s.unresolved ?
		" (some label sets unresolved)" : "");
	if (record & PLABEL_RECORD_OFFCPU)
		fprintf(stderr, ", %" PRIu64 " waits", s.waits);
	fputs("; wrote", stderr);
	for (k = 0; k < PLABEL_PROF_NKINDS; k++)
		if (plabel_kind_written(k, record))
			fprintf(stderr, "%s %s", k ? "," : "", paths[k]);
	if (tl_path)
		fprintf(stderr, ", %s", tl_path);
	fputc('\n', stderr);
	if (record & PLABEL_RECORD_HEAP)
		fprintf(stderr, "plabel: %" PRIu64 " sampled allocations, %" PRIu64
			" frees, %" PRIu64 " lost frees\n", s.allocs, s.frees,
			s.lost_frees);
out:
	free(tl_path);
	if (ret == -ENOMEM)
		fprintf(stderr, "plabel record: out of memory\n");
	for (k = 0; k < PLABEL_PROF_NKINDS; k++) {
		free(paths[k]);
		plabel_prof_free(profs[k]);
	}
	return ret ? 1 : 0;
}

/* The child side of CMD: wait for the session, then exec. */
static void plabel_child(int rfd, char **argv, int thp_off)
{
	char b = 0;

	while (read(rfd, &b, 1) < 0 && errno == EINTR)
		;
	close(rfd);
	if (b != 'g')
		_exit(127);
	/*
	 * The command's transparent huge pages as they were for plabel: the
	 * setting (bit 0) and its flags (PR_THP_DISABLE_EXCEPT_ADVISED)
	 */
	prctl(PR_SET_THP_DISABLE, thp_off & 1, thp_off & ~1, 0, 0);
	execvp(argv[0], argv);
	b = errno == ENOENT ? 127 : 126;
	fprintf(stderr, "plabel record: cannot run %s: %s\n", argv[0],
		strerror(errno));
	_exit(b);
}

/* A shell's status for a wait() status: the code, or 128 + the signal. */
static int plabel_shell_status(int wst)
{
	if (WIFEXITED(wst))
		return WEXITSTATUS(wst);
	if (WIFSIGNALED(wst))
		return 128 + WTERMSIG(wst);
	return 1;
}

/* The name of the i-th file record writes (NULL past the last). */
static const char *plabel_out_file(size_t i)
{
	if (i < PLABEL_PROF_NKINDS)
		return plabel_kinds[i].file;
	return i == PLABEL_PROF_NKINDS ? PLABEL_TIMELINE_FILE : NULL;
}

/* Whether dir holds one of the files record writes. */
static int plabel_dir_has_profile(const char *dir)
{
	char path[PATH_MAX];
	size_t i;

	for (i = 0; plabel_out_file(i); i++) {
		if (snprintf(path, sizeof(path), "%s/%s", dir,
			     plabel_out_file(i)) < (int)sizeof(path) &&
		    !access(path, F_OK))
			return 1;
	}
	return 0;
}

/* Remove old, a directory holding only files record writes. -errno. */
static int plabel_remove_old(const char *old)
{
	char path[PATH_MAX];
	size_t i;

	for (i = 0; plabel_out_file(i); i++) {
		if (snprintf(path, sizeof(path), "%s/%s", old,
			     plabel_out_file(i)) >= (int)sizeof(path))
			return -ENAMETOOLONG;
		if (unlink(path) && errno != ENOENT)
			return -errno;
	}
	return rmdir(old) ? -errno : 0;
}

/*
 * Before recording: make dir a writable directory, a previous recording in
 * it moved to DIR.old (as perf keeps perf.data.old). Where the directory
 * itself cannot move ("." or a mount point), its files are renamed to
 * FILE.old in it. 0, or 1 after one message.
 */
static int plabel_prepare_dir(const char *dir)
{
	char old[PATH_MAX], probe[PATH_MAX];
	struct stat st;
	size_t i;
	int fd;

	if (strlen(dir) + 32 > sizeof(old)) {
		fprintf(stderr, "plabel record: output path too long\n");
		return 1;
	}
	if (snprintf(old, sizeof(old), "%s.old", dir) >= (int)sizeof(old))
		return 1;
	if (!stat(dir, &st) && !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "plabel record: %s exists and is not a directory\n",
			dir);
		return 1;
	}
	if (!stat(dir, &st) && plabel_dir_has_profile(dir)) {
		int ret = lstat(old, &st) ? 0 : plabel_remove_old(old);

		if (!ret && rename(dir, old))
			ret = -errno;
		if (ret == -EBUSY || ret == -EINVAL) {
			/* the directory cannot move: its files do */
			for (i = 0, ret = 0; plabel_out_file(i) && !ret; i++) {
				char from[PATH_MAX];

				if (snprintf(from, sizeof(from), "%s/%s", dir,
					     plabel_out_file(i)) >=
				    (int)sizeof(from) ||
				    snprintf(probe, sizeof(probe), "%s.old",
					     from) >= (int)sizeof(probe))
					ret = -ENAMETOOLONG;
				else if (rename(from, probe) && errno != ENOENT)
					ret = -errno;
			}
			if (!ret)
				fprintf(stderr, "plabel record: kept the previous files in %s as *.old\n",
					dir);
		} else if (!ret) {
			fprintf(stderr, "plabel record: kept the previous %s as %s\n",
				dir, old);
		}
		if (ret) {
			fprintf(stderr, "plabel record: cannot keep the previous %s as %s: %s\n",
				dir, old, strerror(-ret));
			return 1;
		}
	}
	if (mkdir(dir, 0777) && errno != EEXIST) {
		fprintf(stderr, "plabel record: cannot create %s: %s\n", dir,
			strerror(errno));
		return 1;
	}
	/* writable? (root passes access(); a read-only file system not) */
	if (snprintf(probe, sizeof(probe), "%s/.plabel-XXXXXX", dir) >=
	    (int)sizeof(probe))
		return 1;
	fd = mkstemp(probe);
	if (fd < 0) {
		fprintf(stderr, "plabel record: cannot write in %s: %s\n", dir,
			strerror(errno));
		return 1;
	}
	close(fd);
	unlink(probe);
	return 0;
}

/* A process that exited but was not reaped yet (a zombie) is gone too. */
static int plabel_pid_alive(pid_t pid)
{
	char fn[64], buf[512], *p;
	ssize_t n;
	int fd;

	if (kill(pid, 0) && errno == ESRCH)
		return 0;
	snprintf(fn, sizeof(fn), "/proc/%d/stat", (int)pid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = 0;
	/* "pid (comm) S ...": the state follows the last ')' */
	p = strrchr(buf, ')');
	if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
		return 0;
	return 1;
}

static int plabel_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
	return syscall(SYS_pidfd_open, pid, 0);
#else
	errno = ENOSYS;
	return -1;
#endif
}

/*
 * -g dwarf spools snapshots to an unlinked file in $TMPDIR (else /tmp),
 * and unwinds them on arrival when it cannot: say so before recording.
 */
static void plabel_check_tmpdir(void)
{
	const char *dir = getenv("TMPDIR");
	int fd = plabel_tmpfile(), err = errno;

	if (fd >= 0) {
		close(fd);
		return;
	}
	if (!dir || !*dir)
		dir = "/tmp";
	fprintf(stderr, "plabel record: -g dwarf: cannot create a file in %s (%s): falling back to unwinding stack snapshots as they arrive (more CPU while recording, maybe lost records); set TMPDIR to a writable directory\n",
		dir, strerror(err));
}

/*
 * --off-cpu-min: "Nus", "Nms" or "Ns" into microseconds, 1 us to
 * PLABEL_MAX_OFFCPU_MIN_US. 0 or -EINVAL.
 */
static int plabel_parse_min_us(const char *arg, uint32_t *us)
{
	unsigned long long v;
	unsigned long long unit;
	char *end;

	if (*arg < '0' || *arg > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(arg, &end, 10);
	if (!strcmp(end, "us"))
		unit = 1;
	else if (!strcmp(end, "ms"))
		unit = 1000;
	else if (!strcmp(end, "s"))
		unit = 1000000;
	else
		return -EINVAL;
	if (errno || !v || v > PLABEL_MAX_OFFCPU_MIN_US / unit)
		return -EINVAL;
	*us = (uint32_t)(v * unit);
	return 0;
}

/* --every: "S", "Ss", "Mm" or "Hh" into ns, 1 s at least. 0 or -EINVAL. */
static int plabel_parse_every(const char *arg, uint64_t *ns)
{
	unsigned long v;
	uint64_t unit = 1000000000ULL;
	char *end;

	if (*arg < '0' || *arg > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(arg, &end, 10);
	if (!strcmp(end, "m"))
		unit *= 60;
	else if (!strcmp(end, "h"))
		unit *= 3600;
	else if (*end && strcmp(end, "s"))
		return -EINVAL;
	if (errno || !v || v > 1000000)
		return -EINVAL;
	*ns = v * unit;
	return 0;
}

/*
 * record --every: the session's records go through serve's windows, one
 * per interval back to back, each written to its files when its records
 * have come (serve.h), with heap (--heap's interval, or 0) the heap
 * profile since the start at each interval's end, and with
 * PLABEL_RECORD_OFFCPU in record the off-CPU and wall profiles of the
 * waits that ended in each interval, with timeline each interval's
 * timeline (of tl_label's threads, or all). fd is closed.
 */
static int plabel_record_every(int fd, const char *dir, uint64_t every,
			       int all, const int32_t *pids, uint32_t npids,
			       unsigned long hz, uint32_t callchain,
			       double duration, uint64_t heap,
			       uint32_t record, uint32_t offcpu_min_us,
			       int timeline, const char *tl_label)
{
	struct plabel_session_opts so = {
		.target = all ? PLABEL_TARGET_ALL : PLABEL_TARGET_PIDS,
		.callchain = callchain,
		.hz = hz,
		.pids = pids,
		.npids = npids,
		.heap_bytes = heap,
		.record = record & PLABEL_RECORD_OFFCPU,
		.offcpu_min_us = offcpu_min_us,
	};
	struct plabel_serve_cfg cfg = {
		.hz = hz,
		.heap_bytes = heap,
		.offcpu = !!(record & PLABEL_RECORD_OFFCPU),
		.timeline = timeline,
		.timeline_label = tl_label,
		.every_ns = every,
		.out_dir = dir,
		.duration_ns = (uint64_t)(duration * 1e9),
		.watch = pids,
		.nwatch = all ? 0 : npids,
	};
	int ret, status;

	if (mkdir(dir, 0777) && errno != EEXIST) {
		fprintf(stderr, "plabel record: cannot create %s: %s\n", dir,
			strerror(errno));
		close(fd);
		return 1;
	}
	if (access(dir, W_OK)) {
		fprintf(stderr, "plabel record: cannot write in %s: %s\n", dir,
			strerror(errno));
		close(fd);
		return 1;
	}
	ret = plabel_session_start(fd, &so);
	if (ret) {
		fprintf(stderr, "plabel record: cannot start recording: %s\n",
			plabel_start_err(-ret));
		close(fd);
		return 1;
	}
	fprintf(stderr, "plabel: recording started (%s), a profile every %.0f s in %s\n",
		all ? "every process" : npids == 1 ? "1 process" :
		"the processes given", every / 1e9, dir);
	status = plabel_serve_run(&cfg, fd, -1, NULL);
	if (ioctl(fd, PLABEL_IOC_SESSION_STOP) && errno != EINVAL)
		fprintf(stderr, "plabel record: stopping the session: %s\n",
			strerror(errno));
	close(fd);
	return status;
}

/*
 * --timeline and --timeline-label into tl. 0, or 2 (bad usage) after a
 * message.
 */
static int plabel_record_timeline_opts(struct plabel_timeline *tl,
				       int timeline, const char *label)
{
	int ret;

	if (!label)
		return 0;
	if (!timeline) {
		fprintf(stderr, "plabel record: --timeline-label needs --timeline\n");
		return 2;
	}
	ret = plabel_tl_set_focus(tl, label);
	if (ret == -ENOMEM) {
		fprintf(stderr, "plabel record: out of memory\n");
		return 1;
	}
	if (ret) {
		fprintf(stderr, "plabel record: bad --timeline-label '%s' (KEY=VALUE, a key not empty, no control bytes)\n",
			label);
		return 2;
	}
	return 0;
}

static int plabel_record_run(int argc, char **argv,
			     struct plabel_timeline *tl);

int plabel_cmd_record(int argc, char **argv)
{
	struct plabel_timeline tl;
	int ret;

	plabel_tl_init(&tl, 0);
	ret = plabel_record_run(argc, argv, &tl);
	plabel_tl_release(&tl);
	return ret;
}

static int plabel_record_run(int argc, char **argv,
			     struct plabel_timeline *tl)
{
	static const struct option opts[] = {
		{ "freq", required_argument, NULL, 'F' },
		{ "call-graph", required_argument, NULL, 'g' },
		{ "output", required_argument, NULL, 'o' },
		{ "all-cpus", no_argument, NULL, 'a' },
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'D' },
		{ "no-process-labels", no_argument, NULL, 'N' },
		{ "every", required_argument, NULL, 'E' },
		{ "off-cpu", no_argument, NULL, 'O' },
		{ "off-cpu-min", required_argument, NULL, 'M' },
		{ "timeline", no_argument, NULL, 'T' },
		{ "timeline-label", required_argument, NULL, 'L' },
		{ "heap", optional_argument, NULL, 'H' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct plabel_session_opts so = { 0 };
	struct plabel_rec_state st = { .fd = -1, .rawfd = -1 };
	struct sigaction act, old_int, old_term, old_chld;
	struct pollfd pfds[1 + PLABEL_MAX_PIDS];
	static int32_t pids[PLABEL_MAX_PIDS];
	const char *dir = PLABEL_DEFAULT_DIR;
	uint32_t npids = 0, callchain = PLABEL_CALLCHAIN_FP, i;
	int all = 0, c, ret, status = 1, pipefd[2] = { -1, -1 };
	int pidfds[PLABEL_MAX_PIDS], npidfds = 0, tty, cmd_status = 0;
	int forever = 0;	/* the loop's poll() needs no timeout */
	int check = 1;	/* -p: see who is alive (at start, timeouts, ends) */
	int thp_off = 0;
	int watch = 0;	/* -p without CMD: ends when they have exited */
	int names = 1;	/* process and thread labels */
	double duration = 0, deadline = 0;
	uint64_t every = 0, heap = 0;
	uint32_t record = 0, min_us = 0;
	unsigned long hz = 0;
	pid_t child = -1;
	double t0, last = 0;
	struct timespec wall;
	struct plabel_syms *syms = NULL;
	unsigned int flags;
	char **cmd = NULL;
	int timeline = 0, offcpu = 0;
	const char *tl_label = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+F:g:o:ap:h", opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'F':
			if (plabel_parse_hz(optarg, &hz)) {
				fprintf(stderr, "plabel record: bad frequency '%s': the module samples at 1..%d Hz\n",
					optarg, PLABEL_MAX_SAMPLE_HZ);
				return 2;
			}
			break;
		case 'g':
			if (plabel_parse_callchain(optarg, &callchain)) {
				fprintf(stderr, "plabel record: bad call graph mode '%s' (fp or dwarf)\n",
					optarg);
				return 2;
			}
			break;
		case 'o':
			dir = optarg;
			break;
		case 'a':
			all = 1;
			break;
		case 'p':
			ret = plabel_parse_pids(optarg, pids, &npids);
			if (ret) {
				fprintf(stderr, "plabel record: bad pid list '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'D':
			errno = 0;
			duration = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(duration > 0) ||
			    duration > 1e9) {
				fprintf(stderr, "plabel record: bad duration '%s' (seconds, more than 0)\n",
					optarg);
				return 2;
			}
			break;
		case 'N':
			names = 0;
			break;
		case 'E':
			if (plabel_parse_every(optarg, &every)) {
				fprintf(stderr, "plabel record: bad interval '%s' (1s or more, as S, Ss, Mm or Hh)\n",
					optarg);
				return 2;
			}
			break;
		case 'H':
			if (plabel_heap_parse(optarg, &heap)) {
				fprintf(stderr, "plabel record: bad heap interval '%s' (bytes, 1 to 2^40, with K, M or G)\n",
					optarg);
				return 2;
			}
			record |= PLABEL_RECORD_HEAP;
			break;
		case 'O':
			offcpu = 1;
			break;
		case 'T':
			timeline = 1;
			break;
		case 'L':
			tl_label = optarg;
			break;
		case 'M':
			if (plabel_parse_min_us(optarg, &min_us)) {
				fprintf(stderr, "plabel record: bad minimum wait '%s' (1us to 10s, as Nus, Nms or Ns)\n",
					optarg);
				return 2;
			}
			break;
		case 'V':
			printf("plabel %s\n", PLABEL_VERSION);
			return 0;
		case 'h':
			plabel_record_usage(stdout);
			return 0;
		default:
			plabel_record_usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		cmd = argv + optind;
	ret = plabel_record_timeline_opts(tl, timeline, tl_label);
	if (ret)
		return ret;
	/* the timeline's off-CPU slices come from the off-CPU records */
	if (offcpu || timeline)
		record |= PLABEL_RECORD_OFFCPU;
	if (min_us && !(record & PLABEL_RECORD_OFFCPU)) {
		fprintf(stderr, "plabel record: --off-cpu-min needs --off-cpu\n");
		return 2;
	}
	if (heap && cmd) {
		const char *lib;

		ret = plabel_heap_preload(&lib);
		if (ret) {
			fprintf(stderr, "plabel record: --heap: %s %s (set PLABEL_HEAP_LIB)\n",
				ret == -ENOENT ? "cannot find" :
				ret == -EINVAL ? "cannot preload" :
				"out of memory for", lib);
			return 1;
		}
	}
	if (every && (cmd || (!all && !npids))) {
		fprintf(stderr, "plabel record: --every needs -a or -p PIDS (and no CMD)\n");
		plabel_record_usage(stderr);
		return 2;
	}
	if (every && heap && callchain == PLABEL_CALLCHAIN_DWARF) {
		fprintf(stderr, "plabel record: --every --heap takes frame-pointer stacks (-g fp): with dwarf snapshots no two freed allocations are alike, and what it keeps would grow with every one\n");
		return 2;
	}
	if (all && npids) {
		fprintf(stderr, "plabel record: give -a or -p PIDS, not both\n");
		plabel_record_usage(stderr);
		return 2;
	}
	if (!all && !npids && !cmd && !duration) {
		fprintf(stderr, "plabel record: give -a, -p PIDS or -- CMD\n");
		plabel_record_usage(stderr);
		return 2;
	}
	if (!all && !npids && !cmd) {
		fprintf(stderr, "plabel record: --duration needs -a, -p PIDS or -- CMD\n");
		return 2;
	}
	watch = npids && !cmd;
	for (i = 0; i < npids; i++) {
		if (kill(pids[i], 0) && errno == ESRCH) {
			fprintf(stderr, "plabel record: no process %d\n",
				pids[i]);
			return 1;
		}
	}
	st.fd = plabel_open_device();
	if (st.fd < 0)
		return 1;
	if (every)
		return plabel_record_every(st.fd, dir, every, all, pids, npids,
					   hz, callchain, duration, heap,
					   record, min_us, timeline, tl_label);
	if (plabel_prepare_dir(dir)) {
		close(st.fd);
		return 1;
	}
	if (callchain == PLABEL_CALLCHAIN_DWARF)
		plabel_check_tmpdir();
	flags = PLABEL_COLLECT_PROC_MAPS | PLABEL_COLLECT_PID_LABELS |
		PLABEL_COLLECT_PREFAULT;
	if (names)
		flags |= PLABEL_COLLECT_NAME_LABELS;
	/*
	 * One malloc arena: the reading and the collecting thread take
	 * turns, and a second arena would be set up by the collector's first
	 * allocation, while the profiled program runs.
	 */
	mallopt(M_ARENA_MAX, 1);
	/*
	 * No transparent huge pages for plabel's own buffers and tables:
	 * khugepaged would copy them into huge pages while the program
	 * runs, on its CPUs (some 16 ms a 2 MiB page under instruction
	 * counting, more than a 1.5 s recording at 99 Hz costs otherwise).
	 * The command, forked below, gets back the setting plabel had.
	 */
	thp_off = prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0);
	if (thp_off < 0)
		thp_off = 0;
	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	/* the first read()'s buffer, before the worker shares the list */
	st.spare = plabel_qbuf_new();
	if (st.spare) {
		st.spare->next = NULL;
		st.nbufs = 1;
		/*
		 * Its first pages now, as the kernel's rings were allocated:
		 * not while the first read() holds up the profiled program.
		 */
		madvise(st.spare, PLABEL_PREFAULT, MADV_POPULATE_WRITE);
	}
	syms = plabel_syms_new();
	st.col = syms ? plabel_collect_new(syms, flags) : NULL;
	if (!st.spare || !st.col) {
		fprintf(stderr, "plabel record: out of memory\n");
		goto err_free;
	}
	if (hz)
		plabel_collect_set_period(st.col, 1000000000ULL / hz);
	if (timeline)
		plabel_collect_set_timeline(st.col, tl);
	if (heap)
		plabel_collect_set_heap_rate(st.col, heap);

	memset(&act, 0, sizeof(act));
	act.sa_handler = plabel_on_signal;
	sigaction(SIGINT, &act, &old_int);
	sigaction(SIGTERM, &act, &old_term);
	act.sa_handler = plabel_on_child;
	act.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &act, &old_chld);

	if (cmd) {
		if (pipe2(pipefd, O_CLOEXEC)) {
			fprintf(stderr, "plabel record: pipe: %s\n",
				strerror(errno));
			goto err_sig;
		}
		child = fork();
		if (child < 0) {
			fprintf(stderr, "plabel record: fork: %s\n",
				strerror(errno));
			goto err_sig;
		}
		if (child == 0) {
			sigaction(SIGINT, &old_int, NULL);
			sigaction(SIGTERM, &old_term, NULL);
			sigaction(SIGCHLD, &old_chld, NULL);
			close(pipefd[1]);
			plabel_child(pipefd[0], cmd, thp_off);
		}
		close(pipefd[0]);
		pipefd[0] = -1;
		plabel_collect_skip_before_exec(st.col, child);
		if (!all && !npids) {
			pids[0] = child;
			npids = 1;
		}
	}

	so.target = all ? PLABEL_TARGET_ALL :
		    watch || pids[0] != child ? PLABEL_TARGET_PIDS :
		    PLABEL_TARGET_TREE;
	so.callchain = callchain;
	so.hz = hz;
	so.pids = pids;
	so.npids = npids;
	so.heap_bytes = heap;
	so.record = record;
	so.offcpu_min_us = min_us;
	/*
	 * CMD and what it starts: the reader keeps the records to the end,
	 * so it need not read them before a ring is half full (but for news
	 * of processes, which the thread-context look wants at once). The
	 * program gets the CPU time reading would take.
	 */
	if (so.target == PLABEL_TARGET_TREE)
		so.flags = PLABEL_START_WATERMARK;
	/*
	 * CMD from its exec: this child's samples before it are of plabel,
	 * and a walk of its mappings (a copy of the reader's) would hold
	 * that address space, to be torn down by the module while CMD runs.
	 */
	if (so.target == PLABEL_TARGET_TREE && cmd)
		so.flags |= PLABEL_START_AT_EXEC;
	ret = plabel_session_start(st.fd, &so);
	if (ret) {
		fprintf(stderr, "plabel record: cannot start recording: %s\n",
			plabel_start_err(-ret));
		goto err_child;
	}
	st.lazy = so.target == PLABEL_TARGET_TREE;
	/* without memory for it, only other programs' contexts are lost */
	st.tctx = plabel_tctx_new(st.fd);
	if (st.tctx) {
		plabel_collect_set_tctx(st.col, st.tctx);
		for (i = 0; watch && i < npids; i++)
			plabel_tctx_watch(st.tctx, (uint32_t)pids[i]);
		/* its look, once it runs, need not read the program file */
		if (cmd)
			plabel_tls_prewarm_cmd(cmd[0]);
	}
	ret = plabel_worker_start(&st);
	if (ret) {
		fprintf(stderr, "plabel record: cannot start a thread: %s\n",
			strerror(-ret));
		ioctl(st.fd, PLABEL_IOC_SESSION_STOP);
		goto err_child;
	}
	clock_gettime(CLOCK_REALTIME, &wall);
	t0 = plabel_now();
	if (duration)
		deadline = t0 + duration;
	/* one line for scripts that wait to start their load */
	fprintf(stderr, "plabel: recording started (%s)\n",
		all ? "every process" : cmd && pids[0] == child ? cmd[0] :
		npids == 1 ? "1 process" : "the processes given");
	if (cmd) {
		char go = 'g';

		/* on failure the child exits unexec'ed; the loop reaps it */
		if (write(pipefd[1], &go, 1) != 1)
			fprintf(stderr, "plabel record: cannot start %s\n",
				cmd[0]);
		close(pipefd[1]);
		pipefd[1] = -1;
		if (st.tctx)
			plabel_tctx_watch_exec(st.tctx, (uint32_t)child);
	}
	/* readable when the process ends: poll() needs no signal for that */
	for (i = 0; watch && i < npids; i++) {
		int pfd = plabel_pidfd_open(pids[i]);

		if (pfd >= 0)
			pidfds[npidfds++] = pfd;
	}
	/*
	 * So is CMD's: then nothing but the kernel, a signal or the end of
	 * CMD need wake this loop, not a timeout each second while CMD runs.
	 */
	if (cmd && !watch && child > 0) {
		int pfd = plabel_pidfd_open(child);

		if (pfd >= 0) {
			pidfds[npidfds++] = pfd;
			forever = 1;
		}
	}
	fcntl(st.fd, F_SETFL, fcntl(st.fd, F_GETFL) | O_NONBLOCK);
	tty = isatty(2);
	if (tty)
		forever = 0;	/* the progress line, each second */

	for (;;) {
		int nfds = 1, alive;
		ssize_t n;

		int wait_ms = forever ? -1 : PLABEL_POLL_MS;

		if (plabel_stop_sig)
			break;
		if (deadline) {
			double left = deadline - plabel_now();

			if (left <= 0)
				break;
			if (wait_ms < 0 || left * 1000 < wait_ms)
				wait_ms = (int)((left < 3600 ? left : 3600) *
						1000) + 1;
		}

		if (child > 0) {
			int wst;
			pid_t w = waitpid(child, &wst, WNOHANG);

			if (w == child) {
				cmd_status = wst;
				child = -1;
				break;
			}
		} else if (watch && check) {
			/* -p: done when all are gone */
			for (i = 0, alive = 0; i < npids; i++)
				alive += plabel_pid_alive(pids[i]);
			if (!alive)
				break;
			check = 0;
		}
		pfds[0].fd = st.fd;
		pfds[0].events = POLLIN;
		pfds[0].revents = 0;
		for (i = 0; i < (uint32_t)npidfds; i++) {
			pfds[nfds].fd = pidfds[i];
			pfds[nfds].revents = 0;
			pfds[nfds++].events = POLLIN;
		}
		ret = poll(pfds, nfds, wait_ms);
		if (ret < 0 && errno != EINTR) {
			fprintf(stderr, "plabel record: poll: %s\n",
				strerror(errno));
			break;
		}
		if (ret <= 0)
			check = 1;
		/* an ended process's pidfd stays readable: done with it */
		for (i = nfds; i-- > 1;) {
			if (!pfds[i].revents)
				continue;
			close(pidfds[i - 1]);
			pidfds[i - 1] = pidfds[--npidfds];
			check = 1;	/* who is left? */
		}
		if (pfds[0].revents & (POLLIN | POLLERR)) {
			n = plabel_read_once(&st);
			if (n == 0)
				break;	/* the session ended */
			if (n == -ENOMEM) {
				fprintf(stderr, "plabel record: out of memory, stopping\n");
				break;
			}
			if (n < 0 && n != -EAGAIN && n != -EINTR) {
				fprintf(stderr, "plabel record: reading %s: %s\n",
					PLABEL_DEVICE, strerror((int)-n));
				break;
			}
		}
		if (tty && plabel_now() - last >= 1.0) {
			last = plabel_now();
			plabel_progress(&st, t0, 0);
		}
	}

	if (ioctl(st.fd, PLABEL_IOC_SESSION_STOP) && errno != EINVAL)
		fprintf(stderr, "plabel record: stopping the session: %s\n",
			strerror(errno));
	/* drain: after the stop read() returns what is left, then 0 */
	for (;;) {
		struct pollfd p = { .fd = st.fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 2000) <= 0)
			break;
		n = plabel_read_once(&st);
		if (n <= 0 && n != -EINTR)
			break;
	}
	plabel_fill_queue(&st);
	plabel_worker_finish(&st);
	if (tty)
		plabel_progress(&st, t0, 1);
	for (i = 0; i < (uint32_t)npidfds; i++)
		close(pidfds[i]);
	if (child > 0) {
		/*
		 * Interrupted (CMD got the terminal's signal too) or
		 * --duration is over: end it and reap it.
		 */
		kill(child, SIGTERM);
		waitpid(child, &cmd_status, 0);
	}
	if (cmd && WIFEXITED(cmd_status) && WEXITSTATUS(cmd_status))
		fprintf(stderr, "plabel record: %s exited with status %d\n",
			cmd[0], WEXITSTATUS(cmd_status));
	else if (cmd && WIFSIGNALED(cmd_status))
		fprintf(stderr, "plabel record: %s was killed by signal %d (%s)\n",
			cmd[0], WTERMSIG(cmd_status),
			strsignal(WTERMSIG(cmd_status)));
	status = plabel_write_profiles(st.col, dir,
				       (int64_t)wall.tv_sec * 1000000000LL +
				       wall.tv_nsec,
				       (int64_t)((plabel_now() - t0) * 1e9),
				       record, timeline ? tl : NULL);
	/* `plabel record -- make && ..` works as `make && ..` does */
	if (cmd && plabel_shell_status(cmd_status))
		status = plabel_shell_status(cmd_status);
	goto out;

err_child:
	if (child > 0) {
		close(pipefd[1]);	/* the child exits without exec */
		pipefd[1] = -1;
		waitpid(child, NULL, 0);
	}
out:
err_sig:
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGCHLD, &old_chld, NULL);
err_free:
	plabel_collect_free(st.col);
	plabel_tctx_free(st.tctx);
	plabel_syms_free(syms);
	plabel_qbuf_free(st.fill);
	while (st.spare) {
		struct plabel_qbuf *q = st.spare;

		st.spare = q->next;
		plabel_qbuf_free(q);
	}
	if (st.fd >= 0)
		close(st.fd);
	return status;
}
