// SPDX-License-Identifier: GPL-2.0
/*
 * Per-CPU record rings.
 *
 * The kernel's tracing ring buffer (linux/ring_buffer.h) limits one event to
 * a little less than a page, too small for a dwarf-mode sample with its
 * default 8 KiB stack snapshot. This ring holds records of any size up to its
 * own: a record is reserved for its largest possible size, written in pieces
 * (wrapping at the end of the array), shrunk to its real size and published.
 * The locking rules are in session.h.
 */
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "session.h"

/*
 * The ring's bytes, once: at the session's start for the CPUs online then,
 * in the caller's context so that its memory cgroup is charged; or when a
 * CPU comes online later (charged to no one: the hotplug thread's). Until
 * then the ring's writers (on that CPU) count what they would write as
 * lost, and its reader sees it empty. The positions and counters were
 * zeroed with the session.
 */
int plabel_ring_alloc(struct plabel_ring *r, u32 size, int node)
{
	u8 *data;

	if (r->data)
		return 0;
	data = kvzalloc_node(size, GFP_KERNEL_ACCOUNT, node);
	if (!data)
		return -ENOMEM;
	r->size = size;
	/* size before data: the writers test data */
	smp_store_release(&r->data, data);
	return 0;
}

void plabel_ring_free(struct plabel_ring *r)
{
	kvfree(r->data);
	r->data = NULL;
}

/*
 * Reserve max bytes (a multiple of 8) for one record, leaving the ring's
 * keep bytes (room for FREE records in a heap session) free. Fails,
 * counting the record as lost, when the ring lacks the room.
 */
bool plabel_wr_begin(struct plabel_wr *w, struct plabel_ring *r, u32 max)
{
	return plabel_wr_begin_keep(w, r, max, r->keep);
}

u32 plabel_ring_room(struct plabel_ring *r)
{
	/* the consumer is done with bytes before tail */
	u64 tail = smp_load_acquire(&r->tail);

	if (unlikely(!smp_load_acquire(&r->data)))
		return 0;
	return r->size - (u32)(r->head - tail);
}

bool plabel_wr_begin_keep(struct plabel_wr *w, struct plabel_ring *r, u32 max,
			  u32 keep)
{
	u32 room = plabel_ring_room(r);

	if (max > room || keep > room - max) {
		WRITE_ONCE(r->lost, r->lost + 1);
		__this_cpu_inc(plabel_stats.lost);
		return false;
	}
	w->ring = r;
	w->start = r->head;
	w->len = 0;
	w->max = max;
	return true;
}

/* Bytes from position pos: first piece up to the end of the array. */
static u32 plabel_ring_piece(struct plabel_ring *r, u64 pos, u32 len)
{
	u32 off = pos & (r->size - 1);

	return min(len, r->size - off);
}

static void plabel_ring_write(struct plabel_ring *r, u64 pos, const void *src,
			      u32 len)
{
	u32 first = plabel_ring_piece(r, pos, len);

	memcpy(r->data + (pos & (r->size - 1)), src, first);
	if (len > first)
		memcpy(r->data, src + first, len - first);
}

void plabel_wr_put(struct plabel_wr *w, const void *src, u32 len)
{
	if (unlikely(len > w->max - w->len))
		return;
	plabel_ring_write(w->ring, w->start + w->len, src, len);
	w->len += len;
}

/* Leave len bytes for plabel_wr_patch() to fill in before the commit. */
void plabel_wr_skip(struct plabel_wr *w, u32 len)
{
	if (likely(len <= w->max - w->len))
		w->len += len;
}

void plabel_wr_patch(struct plabel_wr *w, u32 off, const void *src, u32 len)
{
	if (unlikely(off > w->len || len > w->len - off))
		return;
	plabel_ring_write(w->ring, w->start + off, src, len);
}

/*
 * Copy len bytes of user memory at uaddr without faulting, page by page, and
 * stop at the first page that cannot be read. Returns the bytes copied.
 */
u32 plabel_wr_put_user(struct plabel_wr *w, unsigned long uaddr, u32 len)
{
	struct plabel_ring *r = w->ring;
	u32 done = 0;

	len = min(len, w->max - w->len);
	while (done < len) {
		u64 pos = w->start + w->len;
		u32 n = len - done;

		n = min_t(u32, n, PAGE_SIZE - (uaddr & ~PAGE_MASK));
		n = plabel_ring_piece(r, pos, n);
		if (copy_from_user_nofault(r->data + (pos & (r->size - 1)),
					   (const void __user *)uaddr, n))
			break;
		w->len += n;
		done += n;
		uaddr += n;
	}
	return done;
}

/* Pad to 8 bytes, set the header's size and publish the record. */
void plabel_wr_commit(struct plabel_wr *w)
{
	static const u8 zeros[8];
	struct plabel_ring *r = w->ring;
	u32 size = ALIGN(w->len, 8);
	u32 *hsize;

	if (size > w->len)
		plabel_wr_put(w, zeros, size - w->len);
	/* the header is 8 bytes at an 8-aligned position: never split */
	hsize = (u32 *)(r->data + ((w->start + 4) & (r->size - 1)));
	*hsize = size;
	/* publish the record's bytes: pairs with the consumer's acquire */
	smp_store_release(&r->head, w->start + size);
	__this_cpu_inc(plabel_stats.records);
}

bool plabel_ring_empty(struct plabel_ring *r)
{
	/* pairs with the producer's release of head */
	return smp_load_acquire(&r->head) == r->tail;
}

/* Size of the record at position pos; 0 if it is not a valid record. */
static u32 plabel_ring_rec_size(struct plabel_ring *r, u64 pos, u64 head)
{
	struct plabel_rec_header hdr;

	memcpy(&hdr, r->data + (pos & (r->size - 1)), sizeof(hdr));
	if (WARN_ON_ONCE(hdr.size < sizeof(hdr) || hdr.size & 7 ||
			 hdr.size > head - pos))
		return 0;	/* cannot happen */
	return hdr.size;
}

/*
 * Copy whole records to buf, at most len bytes. Returns the bytes copied,
 * -ENOSPC when the next record does not fit into len at all, -EFAULT.
 * The records that fit are copied in one piece (two where the ring wraps),
 * not one by one: a read of thousands of samples is then a few copies.
 */
ssize_t plabel_ring_copy_out(struct plabel_ring *r, char __user *buf,
			     size_t len)
{
	/* pairs with the producer's release of head */
	u64 head = smp_load_acquire(&r->head);
	u64 tail = r->tail, end = tail;
	u32 size = 0, first;
	size_t n, left;

	while (end != head) {
		size = plabel_ring_rec_size(r, end, head);
		if (!size || size > len - (end - tail))
			break;
		end += size;
	}
	n = end - tail;
	if (!n) {
		if (end != head && !size) {
			/* a broken record: drop the ring's contents */
			smp_store_release(&r->tail, head);
			return 0;
		}
		return end == head ? 0 : -ENOSPC;
	}
	first = plabel_ring_piece(r, tail, n);
	left = copy_to_user(buf, r->data + (tail & (r->size - 1)), first);
	if (!left && n > first)
		left = copy_to_user(buf + first, r->data, n - first);
	else if (left)
		left += n - first;
	if (left) {
		/* keep what did not reach buf whole for the next read */
		u64 copied = tail + n - left, stop = end;

		for (end = tail; end < stop; end += size) {
			size = plabel_ring_rec_size(r, end, head);
			if (end + size > copied)
				break;
		}
		n = end - tail;
		if (!n)
			return -EFAULT;
	} else if (end != head && !size) {
		/* after a broken record: drop the rest */
		end = head;
	}
	/* free the bytes: pairs with the producer's acquire of tail */
	smp_store_release(&r->tail, end);
	return n;
}
