// SPDX-License-Identifier: GPL-2.0
/*
 * The timeline as a Trace Event Format file. See timeline.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "plabel_uapi.h"
#include "kind.h"
#include "timeline.h"

#ifndef PLABEL_VERSION
#define PLABEL_VERSION "unknown"
#endif

/* Bytes of JSON gathered before they go to the compressor. */
#define PLABEL_TL_FLUSH		(256U << 10)

void plabel_tl_init(struct plabel_timeline *tl, size_t max)
{
	memset(tl, 0, sizeof(*tl));
	tl->max = max ? max : PLABEL_TL_MAX_OBS;
}

void plabel_tl_release(struct plabel_timeline *tl)
{
	size_t i;

	for (i = 0; i < tl->nframes; i++)
		free(tl->frames[i].name);
	free(tl->frames);
	plabel_itab_free(&tl->frame_tab);
	free(tl->obs);
	free(tl->focus_key);
	free(tl->focus_value);
	memset(tl, 0, sizeof(*tl));
}

int plabel_tl_set_focus(struct plabel_timeline *tl, const char *kv)
{
	const char *eq = strchr(kv, '=');
	const unsigned char *p;

	if (!eq || eq == kv)
		return -EINVAL;
	for (p = (const unsigned char *)kv; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return -EINVAL;
	free(tl->focus_key);
	free(tl->focus_value);
	tl->focus_key = strndup(kv, eq - kv);
	tl->focus_value = strdup(eq + 1);
	if (!tl->focus_key || !tl->focus_value)
		return -ENOMEM;
	return 0;
}

int plabel_tl_add(struct plabel_timeline *tl, const struct plabel_tl_obs *o)
{
	/* past the bound, or out of memory: one observation less, counted */
	if (tl->n >= tl->max ||
	    plabel_grow(&tl->obs, &tl->cap, tl->n, sizeof(*tl->obs))) {
		tl->dropped++;
		return 0;
	}
	tl->obs[tl->n++] = *o;
	return 0;
}

uint32_t plabel_tl_frame(struct plabel_timeline *tl, uint32_t parent,
			 const char *name)
{
	uint64_t h = plabel_hash2(parent,
				  plabel_str_hash(PLABEL_FNV_INIT, name));
	struct plabel_tl_frame *f;
	size_t i, pos = SIZE_MAX;

	while ((i = plabel_itab_next(&tl->frame_tab, h, &pos)) != SIZE_MAX) {
		f = &tl->frames[i];
		if (f->parent == parent && !strcmp(f->name, name))
			return (uint32_t)i + 1;
	}
	if (tl->nframes >= UINT32_MAX - 1 ||
	    plabel_itab_reserve(&tl->frame_tab, 1) ||
	    plabel_grow(&tl->frames, &tl->frames_cap, tl->nframes,
			sizeof(*tl->frames)))
		return 0;
	f = &tl->frames[tl->nframes];
	f->name = strdup(name);
	if (!f->name)
		return 0;
	f->parent = parent;
	plabel_itab_put(&tl->frame_tab, h, tl->nframes);
	return (uint32_t)++tl->nframes;
}

/* ---- JSON text ---- */

static int buf_put(char **buf, size_t *len, size_t *cap, const char *s,
		   size_t n)
{
	if (plabel_grow_to(buf, cap, *len + n + 1, 1))
		return -ENOMEM;
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = 0;
	return 0;
}

/*
 * The length of the well-formed UTF-8 sequence at s (2 to 4 bytes), or 0:
 * no overlong forms, surrogates or code points past U+10FFFF.
 */
static size_t utf8_seq(const unsigned char *s)
{
	unsigned int c = s[0], n, i, cp;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

int plabel_tl_json_str(char **buf, size_t *len, size_t *cap, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	char esc[8];
	size_t n;

	while (*p) {
		if (*p == '"') {
			if (buf_put(buf, len, cap, "\\\"", 2))
				return -ENOMEM;
			p++;
		} else if (*p == '\\') {
			/* the profiles' escaping doubles it, JSON's again */
			if (buf_put(buf, len, cap, "\\\\\\\\", 4))
				return -ENOMEM;
			p++;
		} else if (*p < 0x20 || *p == 0x7f ||
			   (*p >= 0x80 && !utf8_seq(p))) {
			/* \xNN as text: its backslash quoted for JSON */
			snprintf(esc, sizeof(esc), "\\\\x%02x", *p);
			if (buf_put(buf, len, cap, esc, strlen(esc)))
				return -ENOMEM;
			p++;
		} else {
			n = *p >= 0x80 ? utf8_seq(p) : 1;
			if (buf_put(buf, len, cap, (const char *)p, n))
				return -ENOMEM;
			p += n;
		}
	}
	return 0;
}

/* ---- the writer ---- */

struct tl_out {
	char *buf;
	size_t len, cap;
	gzFile gz;
	int err;
	int first;		/* no event written yet */
};

static void out_flush(struct tl_out *o)
{
	if (!o->gz || o->err || !o->len)
		return;
	if (gzwrite(o->gz, o->buf, (unsigned int)o->len) != (int)o->len)
		o->err = -EIO;
	o->len = 0;
}

static void out_raw(struct tl_out *o, const char *s)
{
	if (!o->err && buf_put(&o->buf, &o->len, &o->cap, s, strlen(s)))
		o->err = -ENOMEM;
	if (o->len >= PLABEL_TL_FLUSH)
		out_flush(o);
}

static void out_fmt(struct tl_out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void out_fmt(struct tl_out *o, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	out_raw(o, tmp);
}

/* "s", quoted */
static void out_str(struct tl_out *o, const char *s)
{
	out_raw(o, "\"");
	if (!o->err && plabel_tl_json_str(&o->buf, &o->len, &o->cap, s))
		o->err = -ENOMEM;
	out_raw(o, "\"");
}

/*
 * Whole microseconds since the stream's start (0 for anything before it).
 * Whole, so that a slice's end (ts + dur) is exactly where the next one
 * starts: viewers add them as doubles, and decimals would leave the end a
 * rounding error after the next start, which speedscope then nests.
 */
static uint64_t tl_us(const struct plabel_timeline *tl, uint64_t ns)
{
	return ns > tl->start_ns ? (ns - tl->start_ns) / 1000 : 0;
}

static void out_us(struct tl_out *o, const char *key, uint64_t us)
{
	out_fmt(o, ",\"%s\":%" PRIu64, key, us);
}

/* The start of the next event: a comma between events. */
static void out_event(struct tl_out *o)
{
	out_raw(o, o->first ? "\n" : ",\n");
	o->first = 0;
}

struct tl_writer {
	struct plabel_timeline *tl;
	const struct plabel_tl_source *src;
	struct tl_out out;
	/* kept threads, sorted by (pid, tid): where their events start */
	struct tl_thread {
		uint32_t pid, tid;
		uint64_t first_ns;
	} *thr;
	size_t nthr;
	/* thread creations by child (pid, tid) */
	struct tl_creation {
		uint32_t pid, tid;	/* the child */
		uint64_t time_ns, id;
	} *cre;
	size_t ncre;
	uint8_t *frame_used;
};

static int obs_cmp(const void *pa, const void *pb)
{
	const struct plabel_tl_obs *a = pa, *b = pb;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->time_ns != b->time_ns)
		return a->time_ns < b->time_ns ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int thr_cmp(const void *pa, const void *pb)
{
	const struct tl_thread *a = pa, *b = pb;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return a->tid < b->tid ? -1 : a->tid > b->tid;
}

static const struct tl_thread *thr_find(const struct tl_writer *w,
					uint32_t pid, uint32_t tid)
{
	struct tl_thread k = { .pid = pid, .tid = tid };

	return bsearch(&k, w->thr, w->nthr, sizeof(k), thr_cmp);
}

static int cre_cmp(const void *pa, const void *pb)
{
	const struct tl_creation *a = pa, *b = pb;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* Observations [i, end) are one thread's: end. */
static size_t thread_end(const struct plabel_timeline *tl, size_t i)
{
	size_t e = i;

	while (e < tl->n && tl->obs[e].pid == tl->obs[i].pid &&
	       tl->obs[e].tid == tl->obs[i].tid)
		e++;
	return e;
}

/* Whether set id holds the --timeline-label label. */
static int set_has_focus(const struct tl_writer *w, uint64_t id)
{
	const struct plabel_prof_label *l;
	uint32_t n = 0, k;

	if (!id)
		return 0;
	l = w->src->labels(w->src->ctx, id, &n);
	for (k = 0; l && k < n; k++)
		if (!strcmp(l[k].key, w->tl->focus_key) &&
		    !strcmp(l[k].value, w->tl->focus_value))
			return 1;
	return 0;
}

/* Whether the thread of observations [i, e) is written. */
static int thread_kept(const struct tl_writer *w, size_t i, size_t e)
{
	uint64_t last = 0;
	size_t k;

	for (k = i; k < e; k++) {
		const struct plabel_tl_obs *o = &w->tl->obs[k];

		if (o->skip)
			continue;
		if (!w->tl->focus_key)
			return 1;
		/* one lookup per run of one set */
		if (o->set_id != last && set_has_focus(w, o->set_id))
			return 1;
		last = o->set_id;
	}
	return 0;
}

/* Frame f and its callers are written. */
static void frames_use(struct tl_writer *w, uint32_t f)
{
	for (; f && !w->frame_used[f]; f = w->tl->frames[f - 1].parent)
		w->frame_used[f] = 1;
}

/* The threads written, and the frames their samples use. 0 or -ENOMEM. */
static int find_threads(struct tl_writer *w)
{
	struct plabel_timeline *tl = w->tl;
	size_t i, e, k, cnt = 0;

	w->thr = malloc((tl->n ? tl->n : 1) * sizeof(*w->thr));
	w->frame_used = calloc(tl->nframes + 1, 1);
	if (!w->thr || !w->frame_used)
		return -ENOMEM;
	for (i = 0; i < tl->n; i = e) {
		e = thread_end(tl, i);
		if (!thread_kept(w, i, e))
			continue;
		for (k = i; k < e && tl->obs[k].skip; k++)
			;
		w->thr[cnt].pid = tl->obs[i].pid;
		w->thr[cnt].tid = tl->obs[i].tid;
		w->thr[cnt++].first_ns = tl->obs[k].time_ns;
		for (k = i; k < e; k++)
			frames_use(w, tl->obs[k].skip ? 0 : tl->obs[k].stack);
	}
	w->nthr = cnt;
	return 0;
}

/* The creations whose both threads are written, by child. 0 or -ENOMEM. */
static int find_creations(struct tl_writer *w)
{
	const struct plabel_timeline *tl = w->tl;
	struct tl_creation *c;
	size_t k;

	w->cre = malloc((tl->n ? tl->n : 1) * sizeof(*w->cre));
	if (!w->cre)
		return -ENOMEM;
	for (k = 0; k < tl->n; k++) {
		const struct plabel_tl_obs *o = &tl->obs[k];

		if (o->kind != PLABEL_TL_THREAD || o->skip || !o->child_tid ||
		    !thr_find(w, o->pid, o->tid) ||
		    !thr_find(w, o->child_pid, o->child_tid))
			continue;
		c = &w->cre[w->ncre++];
		c->pid = o->child_pid;
		c->tid = o->child_tid;
		c->time_ns = o->time_ns;
		c->id = o->seq + 1;
	}
	qsort(w->cre, w->ncre, sizeof(*w->cre), cre_cmp);
	return 0;
}

/* ,"args":{labels of set id} */
static void out_args(struct tl_writer *w, uint64_t id)
{
	const struct plabel_prof_label *l = NULL;
	char idbuf[32];
	uint32_t n = 0, k;

	if (id)
		l = w->src->labels(w->src->ctx, id, &n);
	out_raw(&w->out, ",\"args\":{");
	if (id && !l) {
		/* as in the profiles: never dropped silently */
		snprintf(idbuf, sizeof(idbuf), "%" PRIu64, id);
		out_str(&w->out, "plabel_unresolved_set");
		out_raw(&w->out, ":");
		out_str(&w->out, idbuf);
	}
	for (k = 0; l && k < n; k++) {
		if (k)
			out_raw(&w->out, ",");
		out_str(&w->out, l[k].key);
		out_raw(&w->out, ":");
		out_str(&w->out, l[k].value);
	}
	out_raw(&w->out, "}");
}

/* An X event on o's track from t0 to t1. */
static void out_slice(struct tl_writer *w, const struct plabel_tl_obs *o,
		      const char *what, const char *cat, uint64_t t0,
		      uint64_t t1, uint64_t set_id)
{
	uint64_t us0 = tl_us(w->tl, t0);

	out_event(&w->out);
	out_raw(&w->out, "{\"name\":");
	out_str(&w->out, what);
	out_fmt(&w->out, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%" PRIu32
		",\"tid\":%" PRIu32, cat, o->pid, o->tid);
	out_us(&w->out, "ts", us0);
	out_us(&w->out, "dur", tl_us(w->tl, t1) - us0);
	out_args(w, set_id);
	out_raw(&w->out, "}");
}

/* A CPU sample: an instant event with its stack. */
static void out_sample(struct tl_writer *w, const struct plabel_tl_obs *o,
		       uint64_t t)
{
	out_event(&w->out);
	out_fmt(&w->out, "{\"name\":\"sample\",\"cat\":\"cpu\",\"ph\":\"i\",\"s\":\"t\",\"pid\":%"
		PRIu32 ",\"tid\":%" PRIu32, o->pid, o->tid);
	out_us(&w->out, "ts", tl_us(w->tl, t));
	if (o->stack)
		out_fmt(&w->out, ",\"sf\":%" PRIu32, o->stack);
	out_args(w, o->set_id);
	out_raw(&w->out, "}");
}

/* One end of the flow id of a thread creation. */
static void out_flow(struct tl_writer *w, uint32_t pid, uint32_t tid,
		     const char *ph, uint64_t id, uint64_t t)
{
	out_event(&w->out);
	out_fmt(&w->out, "{\"name\":\"thread creation\",\"cat\":\"thread\",\"ph\":\"%s\",\"id\":%"
		PRIu64 ",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32 "%s", ph, id,
		pid, tid, *ph == 'f' ? ",\"bp\":\"e\"" : "");
	out_us(&w->out, "ts", tl_us(w->tl, t));
	out_raw(&w->out, "}");
}

/* A creation of thread o: its flow starts here if the child is written. */
static void out_creation(struct tl_writer *w, const struct plabel_tl_obs *o,
			 uint64_t t)
{
	if (o->child_tid && thr_find(w, o->child_pid, o->child_tid))
		out_flow(w, o->pid, o->tid, "s", o->seq + 1, t);
}

/* The flows into thread pid/tid, whose track starts at first_ns. */
static void out_flows_in(struct tl_writer *w, uint32_t pid, uint32_t tid,
			 uint64_t first_ns)
{
	size_t lo = 0, hi = w->ncre, mid;

	/* the first creation of this child */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (w->cre[mid].pid < pid ||
		    (w->cre[mid].pid == pid && w->cre[mid].tid < tid))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < w->ncre && w->cre[lo].pid == pid &&
	       w->cre[lo].tid == tid; lo++)
		out_flow(w, pid, tid, "f", w->cre[lo].id,
			 w->cre[lo].time_ns > first_ns ? w->cre[lo].time_ns :
			 first_ns);
}

/* The track's names. */
static void out_names(struct tl_writer *w, const struct plabel_tl_obs *o,
		      uint64_t t, int new_pid)
{
	const char *pn = w->src->process_name ?
			 w->src->process_name(w->src->ctx, o->pid, t) : NULL;
	const char *tn = w->src->thread_name ?
			 w->src->thread_name(w->src->ctx, o->tid, t) : NULL;
	char fallback[32];

	if (new_pid) {
		snprintf(fallback, sizeof(fallback), "pid %" PRIu32, o->pid);
		out_event(&w->out);
		out_fmt(&w->out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%"
			PRIu32 ",\"tid\":%" PRIu32 ",\"args\":{\"name\":",
			o->pid, o->pid);
		out_str(&w->out, pn ? pn : fallback);
		out_raw(&w->out, "}}");
	}
	snprintf(fallback, sizeof(fallback), "tid %" PRIu32, o->tid);
	out_event(&w->out);
	out_fmt(&w->out, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%"
		PRIu32 ",\"tid\":%" PRIu32 ",\"args\":{\"name\":", o->pid,
		o->tid);
	out_str(&w->out, tn ? tn : fallback);
	out_raw(&w->out, "}}");
}

/*
 * One thread's track from its observations [i, e): on-CPU slices from its
 * first observation, or the end of a wait, to the next switch-out, split
 * where the label set changes; the waits; the samples; the creations.
 */
static void out_thread(struct tl_writer *w, size_t i, size_t e)
{
	const struct plabel_tl_obs *obs = w->tl->obs, *o;
	uint64_t open_ts = 0, open_set = 0, cursor = 0, last = 0, t, end;
	int open = 0, filled = 0;
	size_t k;
	char what[32];

	for (k = i; k < e; k++) {
		o = &obs[k];
		if (o->skip)
			continue;
		/* slices on one track must not overlap */
		t = o->time_ns > cursor ? o->time_ns : cursor;
		if (o->kind == PLABEL_TL_OFFCPU) {
			if (open && (filled || t > open_ts))
				out_slice(w, o, "on-CPU", "cpu", open_ts, t,
					  open_set);
			end = o->end_ns > t ? o->end_ns : t;
			snprintf(what, sizeof(what), "off-CPU (%s)",
				 plabel_wait_name(o->wait));
			out_slice(w, o, what, "off-cpu", t, end, o->set_id);
			/* it runs on with the labels it waited with */
			open = 1;
			filled = 0;
			open_ts = cursor = last = end;
			open_set = o->set_id;
			continue;
		}
		if (!open) {
			open = 1;
			open_ts = t;
			open_set = o->set_id;
		} else if (o->set_id != open_set) {
			/* a label change: the slice ends here */
			if (filled || t > open_ts)
				out_slice(w, o, "on-CPU", "cpu", open_ts, t,
					  open_set);
			open_ts = cursor = t;
			open_set = o->set_id;
		}
		filled = 1;
		last = t;
		if (o->kind == PLABEL_TL_SAMPLE)
			out_sample(w, o, t);
		else
			out_creation(w, o, t);
	}
	if (open && (filled || last > open_ts))
		out_slice(w, &obs[i], "on-CPU", "cpu", open_ts, last,
			  open_set);
}

static void out_frames(struct tl_writer *w)
{
	const struct plabel_timeline *tl = w->tl;
	int first = 1;
	size_t f;

	out_raw(&w->out, "\n],\n\"stackFrames\":{");
	for (f = 1; f <= tl->nframes; f++) {
		if (!w->frame_used[f])
			continue;
		out_fmt(&w->out, "%s\n\"%zu\":{\"name\":", first ? "" : ",",
			f);
		first = 0;
		out_str(&w->out, tl->frames[f - 1].name);
		out_raw(&w->out, ",\"category\":\"plabel\"");
		if (tl->frames[f - 1].parent)
			out_fmt(&w->out, ",\"parent\":\"%" PRIu32 "\"",
				tl->frames[f - 1].parent);
		out_raw(&w->out, "}");
	}
	out_raw(&w->out, "\n}");
}

static void out_header(struct tl_writer *w)
{
	const struct plabel_timeline *tl = w->tl;

	out_raw(&w->out, "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"producer\":");
	out_str(&w->out, "plabel " PLABEL_VERSION);
	out_fmt(&w->out, ",\"observations\":\"%zu\",\"max_observations\":\"%zu\",\"dropped_observations\":\"%" PRIu64 "\"",
		tl->n, tl->max, tl->dropped);
	if (tl->dropped)
		out_fmt(&w->out, ",\"note\":\"timeline cut short: it keeps at most %zu observations (CPU samples, waits, thread creations), fewer when memory runs out; %" PRIu64 " are left out (the pprof profiles have them all)\"",
			tl->max, tl->dropped);
	if (tl->focus_key) {
		out_raw(&w->out, ",\"timeline_label\":");
		out_str(&w->out, tl->focus_key);
		out_raw(&w->out, ",\"timeline_label_value\":");
		out_str(&w->out, tl->focus_value);
	}
	out_raw(&w->out, "},\n\"traceEvents\":[");
}

static void out_body(struct tl_writer *w)
{
	const struct plabel_timeline *tl = w->tl;
	const struct tl_thread *th;
	uint32_t last_pid = 0;
	size_t i, e;
	int any = 0;

	for (i = 0; i < tl->n; i = e) {
		e = thread_end(tl, i);
		th = thr_find(w, tl->obs[i].pid, tl->obs[i].tid);
		if (!th)
			continue;
		out_names(w, &tl->obs[i], tl->obs[e - 1].time_ns,
			  !any || tl->obs[i].pid != last_pid);
		any = 1;
		last_pid = tl->obs[i].pid;
		out_thread(w, i, e);
		out_flows_in(w, th->pid, th->tid, th->first_ns);
	}
}

int plabel_tl_write(struct plabel_timeline *tl,
		    const struct plabel_tl_source *src, const char *path,
		    char **out, size_t *len)
{
	struct tl_writer w = { .tl = tl, .src = src };
	int ret;

	w.out.first = 1;
	qsort(tl->obs, tl->n, sizeof(*tl->obs), obs_cmp);
	ret = find_threads(&w);
	if (!ret)
		ret = find_creations(&w);
	if (ret)
		goto out;
	if (path) {
		w.out.gz = gzopen(path, "wb");
		if (!w.out.gz) {
			ret = errno ? -errno : -ENOMEM;
			goto out;
		}
	}
	out_header(&w);
	out_body(&w);
	out_frames(&w);
	out_raw(&w.out, "}\n");
	out_flush(&w.out);
	ret = w.out.err;
	if (w.out.gz && gzclose(w.out.gz) != Z_OK && !ret)
		ret = -EIO;
	if (!path && !ret) {
		*out = w.out.buf;
		*len = w.out.len;
		w.out.buf = NULL;
	}
out:
	free(w.out.buf);
	free(w.thr);
	free(w.cre);
	free(w.frame_used);
	return ret;
}
