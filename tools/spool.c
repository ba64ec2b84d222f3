// SPDX-License-Identifier: GPL-2.0
/*
 * The dwarf spool (see spool.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spool.h"

void plabel_spool_init(struct plabel_spool *sp)
{
	memset(sp, 0, sizeof(*sp));
	sp->fd = -1;
}

void plabel_spool_release(struct plabel_spool *sp)
{
	if (sp->fd >= 0)
		close(sp->fd);
	free(sp->wbuf);
	free(sp->rbuf);
	free(sp->stack);
	plabel_spool_init(sp);
}

int plabel_tmpfile(void)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	int fd;

	if (!dir || !*dir)
		dir = "/tmp";
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && (size_t)snprintf(path, sizeof(path),
				       "%s/plabel-spool-XXXXXX", dir) <
		      sizeof(path)) {
		/* a file system without O_TMPFILE */
		fd = mkostemp(path, O_CLOEXEC);
		if (fd >= 0)
			unlink(path);
	}
	return fd;
}

/* The spool's file. 0, or -1 with the spool marked broken. */
static int spool_open(struct plabel_spool *sp)
{
	int fd;

	if (sp->fd >= 0)
		return 0;
	if (sp->broken)
		return -1;
	fd = plabel_tmpfile();
	if (fd < 0) {
		sp->broken = 1;
		return -1;
	}
	sp->fd = fd;
	return 0;
}

/*
 * Write out wbuf. What a failed write leaves stays in wbuf (to be read
 * from there) and the spool takes no more. 0 or -1.
 */
static int spool_flush(struct plabel_spool *sp)
{
	size_t done = 0;
	ssize_t n;

	while (done < sp->wlen) {
		n = pwrite(sp->fd, sp->wbuf + done, sp->wlen - done,
			   sp->flen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			sp->broken = 1;
			break;
		}
		done += n;
		sp->flen += n;
	}
	memmove(sp->wbuf, sp->wbuf + done, sp->wlen - done);
	sp->wlen -= done;
	return sp->broken ? -1 : 0;
}

int plabel_spool_reserve(struct plabel_spool *sp, size_t n)
{
	size_t need = sp->wlen + sp->iovlen + n, ncap;
	uint8_t *nb;

	if (need <= sp->wcap)
		return 0;
	ncap = need > PLABEL_SPOOL_BUF ? need : PLABEL_SPOOL_BUF;
	nb = realloc(sp->wbuf, ncap);
	if (!nb)
		return -1;
	sp->wbuf = nb;
	sp->wcap = ncap;
	return 0;
}

/* wbuf has room for what cannot be written: plabel_spool_reserve(). */
void plabel_spool_sync(struct plabel_spool *sp)
{
	struct iovec *v = sp->iov;
	int nv = sp->niov;
	ssize_t n;

	while (nv && !sp->broken) {
		n = pwritev(sp->fd, v, nv, sp->flen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			sp->broken = 1;
			break;
		}
		sp->flen += n;
		for (; nv && (size_t)n >= v->iov_len; v++, nv--)
			n -= v->iov_len;
		if (nv) {
			v->iov_base = (uint8_t *)v->iov_base + n;
			v->iov_len -= n;
		}
	}
	for (; nv; v++, nv--) {
		memcpy(sp->wbuf + sp->wlen, v->iov_base, v->iov_len);
		sp->wlen += v->iov_len;
	}
	sp->niov = 0;
	sp->nents = 0;
	sp->iovlen = 0;
}

int plabel_spool_add(struct plabel_spool *sp,
		     const uint64_t regs[PLABEL_REGS_NR], const void *stack,
		     uint32_t stack_size)
{
	static const uint8_t zeros[8];
	size_t ssz = stack_size;
	size_t pad = ((ssz + 7) & ~7UL) - ssz;
	size_t sz = sizeof(struct plabel_spool_ent) + ssz + pad;
	struct plabel_spool_ent *e;
	int copy;

	if (sp->fd < 0 && sp->wlen + sz > PLABEL_SPOOL_BUF &&
	    spool_open(sp))
		return -1;
	if (sp->broken)
		return -1;
	if (sp->niov + 3 > PLABEL_SPOOL_IOV)
		plabel_spool_sync(sp);
	if (sp->wlen && sp->wlen + sz > sp->wcap && spool_flush(sp))
		return -1;
	if (plabel_spool_reserve(sp, sz))
		return -1;
	copy = sp->wlen || sp->fd < 0;
	e = copy ? (struct plabel_spool_ent *)(sp->wbuf + sp->wlen) :
		   &sp->ents[sp->nents++];
	memset(e, 0, sizeof(*e));
	e->stack_size = ssz;
	memcpy(e->regs, regs, sizeof(e->regs));
	if (copy) {
		memcpy(e + 1, stack, ssz);
		memset((uint8_t *)(e + 1) + ssz, 0, pad);
		sp->wlen += sz;
		return 0;
	}
	sp->iov[sp->niov].iov_base = e;
	sp->iov[sp->niov++].iov_len = sizeof(*e);
	sp->iov[sp->niov].iov_base = (void *)stack;
	sp->iov[sp->niov++].iov_len = ssz;
	sp->iov[sp->niov].iov_base = (void *)zeros;
	sp->iov[sp->niov++].iov_len = pad;
	sp->iovlen += sz;
	return 0;
}

/* Read the next n bytes of the spool into dst. 0 or -EIO. */
static int spool_read(struct plabel_spool *sp, void *dst, size_t n)
{
	uint8_t *d = dst;
	size_t k;
	ssize_t got;

	while (n) {
		if (sp->rpos >= sp->flen) {
			uint64_t off = sp->rpos - sp->flen;

			if (off > sp->wlen || n > sp->wlen - off)
				return -EIO;
			memcpy(d, sp->wbuf + off, n);
			sp->rpos += n;
			return 0;
		}
		if (sp->rpos < sp->roff || sp->rpos >= sp->roff + sp->rlen) {
			if (!sp->rbuf) {
				sp->rbuf = malloc(PLABEL_SPOOL_BUF);
				if (!sp->rbuf)
					return -ENOMEM;
			}
			k = sp->flen - sp->rpos < PLABEL_SPOOL_BUF ?
			    sp->flen - sp->rpos : PLABEL_SPOOL_BUF;
			do {
				got = pread(sp->fd, sp->rbuf, k, sp->rpos);
			} while (got < 0 && errno == EINTR);
			if (got <= 0)
				return -EIO;
			sp->roff = sp->rpos;
			sp->rlen = got;
		}
		k = sp->roff + sp->rlen - sp->rpos;
		if (k > n)
			k = n;
		memcpy(d, sp->rbuf + (sp->rpos - sp->roff), k);
		d += k;
		n -= k;
		sp->rpos += k;
	}
	return 0;
}

int plabel_spool_next(struct plabel_spool *sp,
		      const struct plabel_snapshot **snap)
{
	struct plabel_spool_ent e;
	size_t sz;
	int ret;

	ret = spool_read(sp, &e, sizeof(e));
	if (ret)
		return ret;
	sz = ((size_t)e.stack_size + 7) & ~7UL;
	if (sz > sp->stack_cap) {
		uint8_t *ns = realloc(sp->stack, sz);

		if (!ns)
			return -ENOMEM;
		sp->stack = ns;
		sp->stack_cap = sz;
	}
	ret = spool_read(sp, sp->stack, sz);
	if (ret)
		return ret;
	memcpy(sp->cur.regs, e.regs, sizeof(sp->cur.regs));
	sp->cur.stack = sp->stack;
	sp->cur.stack_size = e.stack_size;
	*snap = &sp->cur;
	return 0;
}

void plabel_spool_rewind(struct plabel_spool *sp)
{
	if (sp->fd >= 0 && sp->rpos == sp->flen + sp->wlen &&
	    !ftruncate(sp->fd, 0)) {
		sp->flen = 0;
		sp->wlen = 0;
		sp->rpos = 0;
		sp->roff = 0;
		sp->rlen = 0;
	}
}
