// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libplabel: process-wide state. The device, the limits, validation and the
 * table of interned sets (content -> struct plabel_labels), and fork.
 *
 * Sets are reference counted. A set's references belong to handles made by
 * plabel_labels_new() and to per-thread caches (thread.c). The last
 * reference removes the set from the table, drops the kernel's reference
 * (PLABEL_IOC_SET_PUT) and frees it; the 1 -> 0 step happens only under
 * plabel_lock, and lookups take their reference under it, so a lookup never
 * returns a set being freed.
 *
 * After fork() the child shares the parent's open file of /dev/plabel, and
 * the kernel's set references belong to that file: a put in the child would
 * drop the parent's reference. The child handler therefore opens its own
 * file and interns every set again there (one ioctl per set, while the
 * child is single-threaded), then closes its copy of the parent's file.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "plabel_uapi.h"
#include "internal.h"

struct plabel_labels plabel_empty_set = { .refs = 1 };
struct plabel_limits plabel_limits = {
	.max_labels = PLABEL_MAX_LABELS,
	.max_key_len = PLABEL_MAX_KEY_LEN,
	.max_value_len = PLABEL_MAX_VALUE_LEN,
};
int plabel_fd = -1;

static pthread_once_t plabel_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t plabel_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t plabel_key;
static int plabel_key_ok;
static int plabel_init_err;
/* The child could not open its own file: never put through the shared one. */
static int plabel_fd_shared;

/* The set table: chained, power-of-two buckets, under plabel_lock. */
static struct plabel_labels **plabel_table;
static size_t plabel_table_mask;	/* buckets - 1, 0 before the first */
static size_t plabel_table_nr;
static uint64_t plabel_seq;

int plabel_dev_ioctl(unsigned long cmd, void *arg)
{
	if (plabel_fd < 0)
		return -ENODEV;
	if (ioctl(plabel_fd, cmd, arg) < 0)
		return -errno;
	return 0;
}

uint64_t plabel_hash_str(const char *s, uint64_t h)
{
	size_t len = strlen(s);
	uint64_t w;

	h ^= len * 0x9e3779b97f4a7c15ULL;
	while (len >= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 29;
		s += 8;
		len -= 8;
	}
	w = 0;
	while (len--)
		w = (w << 8) | (unsigned char)s[len];
	h = (h ^ w) * 0x100000001b3ULL;
	h ^= h >> 29;
	return h;
}

/* Read one unsigned sysctl; keep *val when absent or out of [1, max]. */
static void plabel_read_limit(const char *name, unsigned int *val,
			      unsigned int max)
{
	char path[96], buf[32];
	unsigned long v;
	ssize_t len;
	char *end;
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/kernel/plabel/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return;
	buf[len] = '\0';
	errno = 0;
	v = strtoul(buf, &end, 10);
	if (errno || end == buf || v == 0 || v > max)
		return;
	*val = (unsigned int)v;
}

static void plabel_atfork_prepare(void)
{
	pthread_mutex_lock(&plabel_lock);
}

static void plabel_atfork_parent(void)
{
	pthread_mutex_unlock(&plabel_lock);
}

static int plabel_kernel_new(int fd, const struct plabel_kv *kv, size_t n,
			     uint64_t *id)
{
	struct plabel_label labels[PLABEL_MAX_LABELS];
	struct plabel_set_new_args args;
	size_t i;

	if (n > PLABEL_MAX_LABELS)
		return -E2BIG;
	for (i = 0; i < n; i++) {
		labels[i].key = (uintptr_t)kv[i].key;
		labels[i].value = (uintptr_t)kv[i].value;
		labels[i].key_len = strlen(kv[i].key);
		labels[i].value_len = strlen(kv[i].value);
	}
	memset(&args, 0, sizeof(args));
	args.size = sizeof(args);
	args.labels = (uintptr_t)labels;
	args.count = n;
	if (ioctl(fd, PLABEL_IOC_SET_NEW, &args) < 0)
		return -errno;
	*id = args.id;
	return 0;
}

static void plabel_atfork_child(void)
{
	int oldfd = plabel_fd, newfd, keep_old = 0;
	struct plabel_labels *l;
	size_t b;

	if (oldfd >= 0 && !plabel_fd_shared) {
		newfd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
		if (newfd < 0) {
			/* Keep the inherited ids; never put them. */
			plabel_fd_shared = 1;
		} else {
			for (b = 0; plabel_table && b <= plabel_table_mask;
			     b++) {
				for (l = plabel_table[b]; l; l = l->next) {
					uint64_t id;

					if (plabel_kernel_new(newfd, l->kv,
							      l->count, &id)) {
						keep_old = 1;
						continue;
					}
					l->id = id;
				}
			}
			plabel_fd = newfd;
			if (keep_old)
				plabel_fd_shared = 1;
			else
				close(oldfd);
		}
	}
	plabel_thread_after_fork();
	plabel_otel_after_fork();
	pthread_mutex_unlock(&plabel_lock);
}

static void plabel_init_once(void)
{
	if (pthread_key_create(&plabel_key, plabel_thread_exit) == 0)
		plabel_key_ok = 1;
	plabel_read_limit("max_labels", &plabel_limits.max_labels,
			  PLABEL_MAX_LABELS);
	plabel_read_limit("max_key_len", &plabel_limits.max_key_len,
			  PLABEL_MAX_KEY_LEN);
	plabel_read_limit("max_value_len", &plabel_limits.max_value_len,
			  PLABEL_MAX_VALUE_LEN);
	if (pthread_atfork(plabel_atfork_prepare, plabel_atfork_parent,
			   plabel_atfork_child)) {
		plabel_init_err = -ENOMEM;
		return;
	}
	plabel_fd = open(PLABEL_DEVICE, O_RDWR | O_CLOEXEC);
	plabel_otel_init();
}

int plabel_global_init(void)
{
	pthread_once(&plabel_once, plabel_init_once);
	return plabel_init_err;
}

int plabel_thread_key_set(void *t)
{
	if (!plabel_key_ok)
		return 0;	/* no destructor: the thread's cache leaks */
	return -pthread_setspecific(plabel_key, t);
}

PLABEL_API int plabel_available(void)
{
	plabel_global_init();
	return plabel_fd >= 0;
}

/*
 * Whether s has a control byte (below 0x20, or 0x7f), which the kernel
 * refuses too: labels are shown in terminals and text reports.
 */
static int plabel_has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

int plabel_sort_kvs(const struct plabel_kv *kvs, size_t n,
		    struct plabel_kv *out)
{
	const struct plabel_limits *lim = &plabel_limits;
	size_t i, j;

	if (n && !kvs)
		return -EINVAL;
	if (n > lim->max_labels)
		return -E2BIG;
	for (i = 0; i < n; i++) {
		struct plabel_kv kv = kvs[i];
		size_t klen;
		int c = 1;

		if (!kv.key || !kv.value || !kv.key[0])
			return -EINVAL;
		klen = strnlen(kv.key, lim->max_key_len + 1);
		if (klen > lim->max_key_len ||
		    strnlen(kv.value, lim->max_value_len + 1) >
		    lim->max_value_len)
			return -E2BIG;
		if (plabel_has_control(kv.key) || plabel_has_control(kv.value))
			return -EINVAL;
		/* Insertion sort: n is at most PLABEL_MAX_LABELS. */
		for (j = i; j > 0; j--) {
			c = strcmp(out[j - 1].key, kv.key);
			if (c <= 0)
				break;
			out[j] = out[j - 1];
		}
		if (j > 0 && c == 0)
			return -EINVAL;
		out[j] = kv;
	}
	return 0;
}

static int plabel_same(const struct plabel_labels *l,
		       const struct plabel_kv *sorted, size_t n)
{
	size_t i;

	if (l->count != n)
		return 0;
	for (i = 0; i < n; i++)
		if (strcmp(l->kv[i].key, sorted[i].key) ||
		    strcmp(l->kv[i].value, sorted[i].value))
			return 0;
	return 1;
}

static void plabel_table_grow(void)
{
	size_t nb = plabel_table_mask ? (plabel_table_mask + 1) * 2 : 64;
	struct plabel_labels **t, *l, *next;
	size_t b;

	t = calloc(nb, sizeof(*t));
	if (!t)
		return;		/* keep the longer chains */
	for (b = 0; plabel_table && b <= plabel_table_mask; b++) {
		for (l = plabel_table[b]; l; l = next) {
			next = l->next;
			l->next = t[l->hash & (nb - 1)];
			t[l->hash & (nb - 1)] = l;
		}
	}
	free(plabel_table);
	plabel_table = t;
	plabel_table_mask = nb - 1;
}

void plabel_lock_take(void)
{
	pthread_mutex_lock(&plabel_lock);
}

void plabel_lock_drop(void)
{
	pthread_mutex_unlock(&plabel_lock);
}

static size_t plabel_strings_end(const struct plabel_kv *sorted, size_t n)
{
	size_t i, bytes = sizeof(struct plabel_labels) + n * sizeof(sorted[0]);

	for (i = 0; i < n; i++)
		bytes += strlen(sorted[i].key) + strlen(sorted[i].value) + 2;
	return (bytes + 7) & ~(size_t)7;
}

static struct plabel_labels *plabel_alloc(const struct plabel_kv *sorted,
					  size_t n, uint64_t hash)
{
	size_t i, bytes = plabel_strings_end(sorted, n);
	struct plabel_labels *l;
	char *p;

	bytes += plabel_otel_size(sorted, n);
	l = malloc(bytes);
	if (!l)
		return NULL;
	memset(l, 0, sizeof(*l));
	l->hash = hash;
	l->refs = 1;
	l->count = n;
	p = (char *)&l->kv[n];
	for (i = 0; i < n; i++) {
		size_t kl = strlen(sorted[i].key) + 1;
		size_t vl = strlen(sorted[i].value) + 1;

		memcpy(p, sorted[i].key, kl);
		l->kv[i].key = p;
		p += kl;
		memcpy(p, sorted[i].value, vl);
		l->kv[i].value = p;
		p += vl;
	}
	return l;
}

int plabel_intern(const struct plabel_kv *sorted, size_t n,
		  struct plabel_labels **out)
{
	struct plabel_labels *l;
	uint64_t hash;
	int err;

	err = plabel_hash_kvs(sorted, n, &hash);
	if (err)
		return err;
	pthread_mutex_lock(&plabel_lock);
	if (plabel_table) {
		for (l = plabel_table[hash & plabel_table_mask]; l;
		     l = l->next) {
			if (l->hash == hash && plabel_same(l, sorted, n)) {
				__atomic_add_fetch(&l->refs, 1,
						   __ATOMIC_RELAXED);
				goto out;
			}
		}
	}
	if (plabel_table_nr >= plabel_table_mask)
		plabel_table_grow();
	err = -ENOMEM;
	if (!plabel_table)
		goto err_unlock;
	l = plabel_alloc(sorted, n, hash);
	if (!l)
		goto err_unlock;
	if (plabel_fd >= 0) {
		err = plabel_kernel_new(plabel_fd, l->kv, n, &l->id);
		if (err)
			goto err_free;
	}
	err = plabel_otel_build(l, (unsigned char *)l +
				plabel_strings_end(l->kv, n));
	if (err)
		goto err_put;
	l->seq = ++plabel_seq;
	l->next = plabel_table[hash & plabel_table_mask];
	plabel_table[hash & plabel_table_mask] = l;
	plabel_table_nr++;
out:
	pthread_mutex_unlock(&plabel_lock);
	*out = l;
	return 0;

err_put:
	if (plabel_fd >= 0) {
		struct plabel_set_put_args args = {
			.size = sizeof(args),
			.id = l->id,
		};

		ioctl(plabel_fd, PLABEL_IOC_SET_PUT, &args);
	}
err_free:
	free(l);
err_unlock:
	pthread_mutex_unlock(&plabel_lock);
	return err;
}

void plabel_put(struct plabel_labels *l)
{
	struct plabel_labels **pp;
	long r;

	if (!l || l == &plabel_empty_set)
		return;
	r = __atomic_load_n(&l->refs, __ATOMIC_RELAXED);
	while (r > 1) {
		if (__atomic_compare_exchange_n(&l->refs, &r, r - 1, 0,
						__ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			return;
	}
	pthread_mutex_lock(&plabel_lock);
	if (__atomic_sub_fetch(&l->refs, 1, __ATOMIC_ACQ_REL)) {
		pthread_mutex_unlock(&plabel_lock);
		return;
	}
	for (pp = &plabel_table[l->hash & plabel_table_mask]; *pp;
	     pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			plabel_table_nr--;
			break;
		}
	}
	if (plabel_fd >= 0 && !plabel_fd_shared && l->id) {
		struct plabel_set_put_args args = {
			.size = sizeof(args),
			.id = l->id,
		};

		/* Nothing to do on failure: the file drops it at close. */
		ioctl(plabel_fd, PLABEL_IOC_SET_PUT, &args);
	}
	pthread_mutex_unlock(&plabel_lock);
	free(l);
}

PLABEL_API struct plabel_labels *plabel_labels_new(const struct plabel_kv *kvs,
						   size_t n)
{
	struct plabel_kv sorted[PLABEL_MAX_LABELS];
	struct plabel_labels *l;
	int err;

	err = plabel_global_init();
	if (err)
		goto err_out;
	err = plabel_sort_kvs(kvs, n, sorted);
	if (err)
		goto err_out;
	if (!n)
		return &plabel_empty_set;
	err = plabel_intern(sorted, n, &l);
	if (err)
		goto err_out;
	return l;

err_out:
	errno = -err;
	return NULL;
}

PLABEL_API void plabel_labels_free(struct plabel_labels *l)
{
	plabel_put(l);
}
