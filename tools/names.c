// SPDX-License-Identifier: GPL-2.0
/*
 * Process and thread names (see names.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "names.h"

/* A rename of a thread: its name from time_ns. */
struct plabel_tev {
	uint64_t time_ns;
	uint32_t name;
	uint32_t reserved;
};

/*
 * A thread's names: first, what it was called when first seen (from
 * /proc, or its creator's name), then each rename, in arrival order.
 */
struct plabel_tnames {
	uint32_t tid;		/* first: plabel_itab_u32()'s key */
	uint32_t first;		/* name id, 0: unknown */
	uint8_t tried;		/* /proc was read for first */
	struct plabel_tev *ev;
	size_t nev, cap;
};

void plabel_names_release(struct plabel_names *nm)
{
	size_t i;

	for (i = 0; i < nm->n; i++)
		free(nm->strs[i]);
	free(nm->strs);
	for (i = 0; i < nm->ntns; i++)
		free(nm->tns[i].ev);
	free(nm->tns);
	plabel_itab_free(&nm->tn_tab);
	memset(nm, 0, sizeof(*nm));
}

/*
 * Few distinct names: a linear search, done once per thread seen or
 * renamed, never per sample.
 */
uint32_t plabel_names_id(struct plabel_names *nm, const char *s, size_t len)
{
	size_t i, n = strnlen(s, len);
	char *d;

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		n--;
	if (!n)
		return 0;
	for (i = 0; i < nm->n; i++)
		if (!strncmp(nm->strs[i], s, n) && !nm->strs[i][n])
			return i + 1;
	if (nm->n >= UINT32_MAX - 1 ||
	    plabel_grow(&nm->strs, &nm->cap, nm->n, sizeof(*nm->strs)))
		return 0;
	d = strndup(s, n);
	if (!d)
		return 0;
	nm->strs[nm->n++] = d;
	return nm->n;
}

/* First line of a small /proc file into buf; bytes read, 0 on failure. */
static size_t read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return strlen(buf);
}

/*
 * The 15 bytes of comm are what EXEC records carry, so a name reads the
 * same however it was learnt.
 */
uint32_t plabel_names_proc_now(struct plabel_names *nm, uint32_t pid)
{
	char path[64], buf[PATH_MAX];
	const char *base;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%u/exe", pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		if (n > 10 && !strcmp(buf + n - 10, " (deleted)"))
			buf[n - 10] = '\0';
		base = strrchr(buf, '/');
		base = base ? base + 1 : buf;
		return plabel_names_id(nm, base, 15);
	}
	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	if (!read_small(path, buf, sizeof(buf)))
		return 0;
	return plabel_names_id(nm, buf, 15);
}

/* Thread tid's names, added if new. NULL on ENOMEM. */
static struct plabel_tnames *thread_get(struct plabel_names *nm,
					uint32_t tid)
{
	size_t i = plabel_itab_u32(&nm->tn_tab, &nm->tns, &nm->ntns,
				   &nm->tns_cap, sizeof(*nm->tns), tid, NULL);

	return i == SIZE_MAX ? NULL : &nm->tns[i];
}

int plabel_names_thread_seen(struct plabel_names *nm, uint32_t pid,
			     uint32_t tid)
{
	struct plabel_tnames *tn = thread_get(nm, tid);
	char path[64], buf[64];

	if (!tn)
		return -ENOMEM;
	if (!tn->tried) {
		tn->tried = 1;
		snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid,
			 tid);
		if (read_small(path, buf, sizeof(buf)))
			tn->first = plabel_names_id(nm, buf, 15);
	}
	return 0;
}

int plabel_names_thread_new(struct plabel_names *nm, uint32_t tid,
			    uint64_t t, uint32_t child_tid)
{
	uint32_t tname = plabel_names_thread_at(nm, tid, t);
	struct plabel_tnames *ct = thread_get(nm, child_tid);
	size_t i, k = 0;

	if (!ct)
		return -ENOMEM;
	ct->first = tname;
	ct->tried = 1;
	/* a reused tid: the names of the thread it was before go */
	for (i = 0; i < ct->nev; i++)
		if (ct->ev[i].time_ns >= t)
			ct->ev[k++] = ct->ev[i];
	ct->nev = k;
	return 0;
}

int plabel_names_thread_rename(struct plabel_names *nm, uint32_t tid,
			       uint64_t t, const char *comm, size_t len)
{
	struct plabel_tnames *tn = thread_get(nm, tid);
	uint32_t name = plabel_names_id(nm, comm, len);

	if (!tn)
		return -ENOMEM;
	if (!name)
		return 0;
	if (plabel_grow(&tn->ev, &tn->cap, tn->nev, sizeof(*tn->ev)))
		return -ENOMEM;
	tn->ev[tn->nev].time_ns = t;
	tn->ev[tn->nev].reserved = 0;
	tn->ev[tn->nev++].name = name;
	tn->tried = 1;
	return 0;
}

uint32_t plabel_names_thread_at(struct plabel_names *nm, uint32_t tid,
				uint64_t t)
{
	struct plabel_tnames *tn = thread_get(nm, tid);
	uint64_t best_t = 0;
	uint32_t name;
	size_t i;

	if (!tn)
		return 0;
	name = tn->first;
	for (i = 0; i < tn->nev; i++)
		if (tn->ev[i].time_ns <= t && tn->ev[i].time_ns >= best_t) {
			best_t = tn->ev[i].time_ns;
			name = tn->ev[i].name;
		}
	/* renamed before its first sample was read: the oldest name known */
	if (!name && tn->nev)
		name = tn->ev[0].name;
	return name;
}
