/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Builds record streams in memory, as the kernel writes them, for the
 * tests of the decoder and the collector.
 */
#ifndef PLABEL_TESTS_STREAM_BUILD_H
#define PLABEL_TESTS_STREAM_BUILD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plabel_uapi.h"

#include "../../../tools/stream.h"

struct sbuf {
	uint8_t data[65536];
	size_t len;
};

static inline void *sb_rec(struct sbuf *b, uint32_t type, size_t size)
{
	struct plabel_rec_header *h;
	size_t padded = (size + 7) & ~7UL;

	h = (void *)(b->data + b->len);
	memset(h, 0, padded);
	h->type = type;
	h->size = padded;
	b->len += padded;
	return h;
}

static inline void sb_stream(struct sbuf *b, uint64_t period)
{
	struct plabel_rec_stream *s = sb_rec(b, PLABEL_REC_STREAM, sizeof(*s));

	s->version = PLABEL_REC_VERSION;
	s->callchain = PLABEL_CALLCHAIN_FP;
	s->period_ns = period;
	s->ncpus = 2;
}

/* kvs: "k1", "v1", "k2", "v2", ..., n pairs */
static inline void sb_labelset(struct sbuf *b, uint64_t id,
			       const char *const *kvs, uint32_t n)
{
	size_t size = sizeof(struct plabel_rec_labelset) +
		      n * sizeof(struct plabel_rec_label), i;
	struct plabel_rec_labelset *ls;
	struct plabel_rec_label *l;
	char *p;

	for (i = 0; i < 2 * n; i++)
		size += strlen(kvs[i]);
	ls = sb_rec(b, PLABEL_REC_LABELSET, size);
	ls->id = id;
	ls->count = n;
	l = (void *)(ls + 1);
	p = (char *)(l + n);
	for (i = 0; i < n; i++) {
		l[i].key_len = strlen(kvs[2 * i]);
		l[i].value_len = strlen(kvs[2 * i + 1]);
		memcpy(p, kvs[2 * i], l[i].key_len);
		p += l[i].key_len;
		memcpy(p, kvs[2 * i + 1], l[i].value_len);
		p += l[i].value_len;
	}
}

static inline struct plabel_rec_sample *
sb_sample(struct sbuf *b, uint32_t type, uint64_t set, uint32_t pid,
	  const uint64_t *ips, uint16_t nk, uint16_t nu)
{
	size_t size = sizeof(struct plabel_rec_sample) +
		      (nk + nu) * sizeof(uint64_t);
	struct plabel_rec_sample *s = sb_rec(b, type, size);

	s->time_ns = 1000;
	s->set_id = set;
	s->pid = pid;
	s->tid = pid + 1;
	s->flags = nk ? 0 : PLABEL_SAMPLE_USER;
	s->nr_kernel = nk;
	s->nr_user = nu;
	memcpy(s + 1, ips, (nk + nu) * sizeof(uint64_t));
	return s;
}

/* tid of pid ran again at end_ns after a wait from out_ns */
static inline void sb_offcpu_end(struct sbuf *b, uint32_t pid, uint32_t tid,
				 uint64_t out_ns, uint64_t end_ns)
{
	struct plabel_rec_offcpu_end *e = sb_rec(b, PLABEL_REC_OFFCPU_END,
						 sizeof(*e));

	e->pid = pid;
	e->tid = tid;
	e->out_ns = out_ns;
	e->time_ns = end_ns;
}

static inline void sb_lost(struct sbuf *b, uint64_t n)
{
	struct plabel_rec_lost *l = sb_rec(b, PLABEL_REC_LOST, sizeof(*l));

	l->lost = n;
}

static inline struct plabel_rec_mmap *
sb_mmap(struct sbuf *b, uint32_t pid, uint64_t start, uint64_t end,
	uint64_t off, const char *path)
{
	size_t pl = strlen(path);
	struct plabel_rec_mmap *m = sb_rec(b, PLABEL_REC_MMAP,
					   sizeof(*m) + pl);

	m->pid = pid;
	m->path_len = pl;
	m->start = start;
	m->end = end;
	m->offset = off;
	memcpy(m + 1, path, pl);
	return m;
}

static inline struct plabel_rec_exec *sb_exec(struct sbuf *b,
						     uint32_t pid,
						     uint64_t time_ns)
{
	struct plabel_rec_exec *ex = sb_rec(b, PLABEL_REC_EXEC, sizeof(*ex));

	ex->pid = pid;
	ex->time_ns = time_ns;
	return ex;
}

static inline void sb_comm(struct sbuf *b, uint32_t pid, uint32_t tid,
			   uint64_t time_ns, const char *comm)
{
	struct plabel_rec_comm *c = sb_rec(b, PLABEL_REC_COMM, sizeof(*c));

	c->pid = pid;
	c->tid = tid;
	c->time_ns = time_ns;
	strncpy(c->comm, comm, sizeof(c->comm) - 1);
}

/* An ALLOC record: one user frame ip, tid = pid. */
static inline void sb_alloc(struct sbuf *b, uint64_t set, uint32_t pid,
			    uint64_t t, uint64_t addr, uint64_t bytes,
			    uint64_t weight, uint64_t ip)
{
	struct plabel_rec_sample *s;
	struct plabel_rec_alloc *a;

	s = sb_rec(b, PLABEL_REC_ALLOC, sizeof(*s) + sizeof(*a) + 8);
	s->time_ns = t;
	s->set_id = set;
	s->pid = pid;
	s->tid = pid;
	s->flags = PLABEL_SAMPLE_USER;
	s->nr_user = 1;
	a = (void *)(s + 1);
	a->addr = addr;
	a->requested = bytes;
	a->usable = bytes;
	a->weight = weight;
	memcpy(a + 1, &ip, 8);
}

/*
 * A thread context (format, its len bytes) after the record that starts
 * at offset at, the last in b (one whose bytes end 8-aligned).
 */
static inline void sb_ctx(struct sbuf *b, size_t at, uint16_t format,
			  const void *bytes, uint32_t len)
{
	struct plabel_rec_sample *s = (void *)(b->data + at);
	struct plabel_rec_tlsctx *t = sb_rec(b, 0, sizeof(*t) + len);

	/* (sb_rec's header is the context's: it becomes the record's) */
	t->format = format;
	t->flags = 0;
	t->len = len;
	memcpy(t + 1, bytes, len);
	s->hdr.size = (uint32_t)(b->len - at);
	s->flags |= PLABEL_SAMPLE_TLSCTX;
}

static inline void sb_free(struct sbuf *b, uint32_t pid, uint64_t t,
			   uint64_t addr)
{
	struct plabel_rec_free *f = sb_rec(b, PLABEL_REC_FREE, sizeof(*f));

	f->pid = pid;
	f->tid = pid;
	f->time_ns = t;
	f->addr = addr;
}

static inline void sb_lost_frees(struct sbuf *b, uint64_t n)
{
	struct plabel_rec_lost *l = sb_rec(b, PLABEL_REC_LOST, sizeof(*l));

	l->kind = PLABEL_LOST_FREES;
	l->lost = n;
}

/* Decode buf to its end: the last plabel_dec_next() result, *count records. */
static inline int decode_all(const void *buf, size_t len, int *count)
{
	struct plabel_dec_rec *r = malloc(sizeof(*r));
	struct plabel_dec d;
	int ret;

	*count = 0;
	plabel_dec_init(&d, buf, len);
	while ((ret = plabel_dec_next(&d, r)) > 0)
		(*count)++;
	free(r);
	return ret;
}

#endif /* PLABEL_TESTS_STREAM_BUILD_H */
