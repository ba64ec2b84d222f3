// SPDX-License-Identifier: GPL-2.0
/*
 * Bounds-checked decoder of the /dev/plabel record stream. See stream.h.
 */
#include <errno.h>
#include <string.h>

#include "stream.h"

void plabel_dec_init(struct plabel_dec *d, const void *buf, size_t len)
{
	d->buf = buf;
	d->len = len;
	d->pos = 0;
}

uint64_t plabel_dec_ip(const struct plabel_dec_rec *rec, size_t i)
{
	uint64_t v;

	memcpy(&v, rec->u.sample.ips + i * sizeof(v), sizeof(v));
	return v;
}

static int dec_labelset(struct plabel_dec_rec *rec)
{
	struct plabel_rec_labelset ls;
	const uint8_t *p = rec->raw;
	size_t off, need, i;

	if (rec->size < sizeof(ls))
		return -EBADMSG;
	memcpy(&ls, p, sizeof(ls));
	if (ls.count > PLABEL_MAX_LABELS)
		return -EBADMSG;
	need = sizeof(ls) + (size_t)ls.count * sizeof(struct plabel_rec_label);
	if (need > rec->size)
		return -EBADMSG;
	rec->u.labelset.id = ls.id;
	rec->u.labelset.count = ls.count;
	off = need;
	for (i = 0; i < ls.count; i++) {
		struct plabel_rec_label l;
		struct plabel_dec_label *dl = &rec->u.labelset.labels[i];

		memcpy(&l, p + sizeof(ls) + i * sizeof(l), sizeof(l));
		if (l.key_len == 0 || l.key_len > PLABEL_MAX_KEY_LEN ||
		    l.value_len > PLABEL_MAX_VALUE_LEN)
			return -EBADMSG;
		if ((size_t)l.key_len + l.value_len > rec->size - off)
			return -EBADMSG;
		dl->key.ptr = (const char *)p + off;
		dl->key.len = l.key_len;
		off += l.key_len;
		dl->value.ptr = (const char *)p + off;
		dl->value.len = l.value_len;
		off += l.value_len;
		if (memchr(dl->key.ptr, 0, dl->key.len) ||
		    memchr(dl->value.ptr, 0, dl->value.len))
			return -EBADMSG;
	}
	return 0;
}

/* With PLABEL_SAMPLE_TLSCTX: the context at the 8-aligned off. */
static int dec_tlsctx(struct plabel_dec_rec *rec, size_t off)
{
	struct plabel_rec_tlsctx *t = &rec->u.sample.tlsctx;

	if (!(rec->u.sample.hdr.flags & PLABEL_SAMPLE_TLSCTX))
		return 0;
	off = (off + 7) & ~(size_t)7;
	if (off > rec->size || sizeof(*t) > rec->size - off)
		return -EBADMSG;
	memcpy(t, rec->raw + off, sizeof(*t));
	off += sizeof(*t);
	if (t->len > PLABEL_TLSCTX_BYTES || t->len > rec->size - off ||
	    t->format == PLABEL_TLSCTX_NONE ||
	    t->format > PLABEL_TLSCTX_CUSTOM_LABELS_V1)
		return -EBADMSG;
	rec->u.sample.tlsctx_data = rec->raw + off;
	return 0;
}

static int dec_sample(struct plabel_dec_rec *rec)
{
	struct plabel_rec_sample *s = &rec->u.sample.hdr;
	size_t off, nips;

	if (rec->size < sizeof(*s))
		return -EBADMSG;
	memcpy(s, rec->raw, sizeof(*s));
	off = sizeof(*s);
	if (rec->type == PLABEL_REC_ALLOC) {
		struct plabel_rec_alloc *a = &rec->u.sample.alloc;

		if (rec->size - off < sizeof(*a))
			return -EBADMSG;
		memcpy(a, rec->raw + off, sizeof(*a));
		off += sizeof(*a);
		if (!a->addr || !a->weight || a->requested > a->usable ||
		    a->weight > PLABEL_HEAP_BYTES_MAX)
			return -EBADMSG;
	} else {
		memset(&rec->u.sample.alloc, 0, sizeof(rec->u.sample.alloc));
	}
	nips = (size_t)s->nr_kernel + s->nr_user;
	if (nips > (rec->size - off) / sizeof(uint64_t))
		return -EBADMSG;
	rec->u.sample.ips = rec->raw + off;
	off += nips * sizeof(uint64_t);
	rec->u.sample.has_regs = !!(s->flags & PLABEL_SAMPLE_REGS);
	rec->u.sample.stack = NULL;
	memset(&rec->u.sample.tlsctx, 0, sizeof(rec->u.sample.tlsctx));
	rec->u.sample.tlsctx_data = NULL;
	if (!rec->u.sample.has_regs) {
		if (s->stack_size)
			return -EBADMSG;
		/* (regs are not to be read then) */
		return dec_tlsctx(rec, off);
	}
	if (s->flags & PLABEL_SAMPLE_FP_REGS) {
		uint64_t r[PLABEL_FP_REGS_NR];

		/* the others read 0, as a register a snapshot lacks */
		if (sizeof(r) > rec->size - off)
			return -EBADMSG;
		memcpy(r, rec->raw + off, sizeof(r));
		off += sizeof(r);
		memset(rec->u.sample.regs, 0, sizeof(rec->u.sample.regs));
		rec->u.sample.regs[PLABEL_REG_RIP] = r[0];
		rec->u.sample.regs[PLABEL_REG_RSP] = r[1];
		rec->u.sample.regs[PLABEL_REG_RBP] = r[2];
	} else {
		if (sizeof(rec->u.sample.regs) > rec->size - off)
			return -EBADMSG;
		memcpy(rec->u.sample.regs, rec->raw + off,
		       sizeof(rec->u.sample.regs));
		off += sizeof(rec->u.sample.regs);
	}
	if (s->stack_size > rec->size - off)
		return -EBADMSG;
	rec->u.sample.stack = rec->raw + off;
	return dec_tlsctx(rec, off + s->stack_size);
}

static int dec_mmap(struct plabel_dec_rec *rec)
{
	struct plabel_rec_mmap *m = &rec->u.mmap.hdr;

	if (rec->size < sizeof(*m))
		return -EBADMSG;
	memcpy(m, rec->raw, sizeof(*m));
	if (m->path_len == 0 || m->path_len > rec->size - sizeof(*m))
		return -EBADMSG;
	if (m->end <= m->start)
		return -EBADMSG;
	rec->u.mmap.path.ptr = (const char *)rec->raw + sizeof(*m);
	rec->u.mmap.path.len = m->path_len;
	if (memchr(rec->u.mmap.path.ptr, 0, m->path_len))
		return -EBADMSG;
	return 0;
}

static int dec_fixed(struct plabel_dec_rec *rec, void *dst,
		     size_t size)
{
	if (rec->size < size)
		return -EBADMSG;
	memcpy(dst, rec->raw, size);
	return 0;
}

int plabel_dec_next(struct plabel_dec *d, struct plabel_dec_rec *rec)
{
	struct plabel_rec_header h;
	size_t left;
	int ret;

	if (d->pos >= d->len)
		return 0;
	left = d->len - d->pos;
	if (left < sizeof(h))
		return -EBADMSG;
	memcpy(&h, d->buf + d->pos, sizeof(h));
	if (h.size < sizeof(h) || h.size % 8 || h.size > left)
		return -EBADMSG;
	rec->type = h.type;
	rec->size = h.size;
	rec->raw = d->buf + d->pos;

	switch (h.type) {
	case PLABEL_REC_STREAM:
		ret = dec_fixed(rec, &rec->u.stream,
				sizeof(rec->u.stream));
		break;
	case PLABEL_REC_LABELSET:
		ret = dec_labelset(rec);
		break;
	case PLABEL_REC_SAMPLE:
	case PLABEL_REC_THREAD:
	case PLABEL_REC_ALLOC:
		ret = dec_sample(rec);
		break;
	case PLABEL_REC_FREE:
		ret = dec_fixed(rec, &rec->u.free, sizeof(rec->u.free));
		break;
	case PLABEL_REC_OFFCPU:
	case PLABEL_REC_THREADSTATE:
		ret = dec_sample(rec);
		break;
	case PLABEL_REC_OFFCPU_END:
		ret = dec_fixed(rec, &rec->u.offcpu_end,
				sizeof(rec->u.offcpu_end));
		if (!ret && rec->u.offcpu_end.time_ns <
			    rec->u.offcpu_end.out_ns)
			ret = -EBADMSG;
		break;
	case PLABEL_REC_LOST:
		ret = dec_fixed(rec, &rec->u.lost, sizeof(rec->u.lost));
		break;
	case PLABEL_REC_MMAP:
		ret = dec_mmap(rec);
		break;
	case PLABEL_REC_COMM:
		ret = dec_fixed(rec, &rec->u.comm, sizeof(rec->u.comm));
		break;
	case PLABEL_REC_EXEC:
		ret = dec_fixed(rec, &rec->u.exec, sizeof(rec->u.exec));
		break;
	case PLABEL_REC_SYNC:
		ret = dec_fixed(rec, &rec->u.sync, sizeof(rec->u.sync));
		break;
	default:
		ret = 0;	/* unknown: the caller skips it */
		break;
	}
	if (ret)
		return ret;
	d->pos += h.size;
	return 1;
}
