// SPDX-License-Identifier: GPL-2.0
/*
 * plabel serve's parsing (see serve.h). Everything here reads untrusted
 * text from the command line or a request and checks it before use.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "session.h"

int plabel_serve_parse_listen(const char *arg, struct sockaddr_storage *ss,
			      socklen_t *len, const char **why)
{
	struct addrinfo hints, *res = NULL;
	char host[256], *end;
	const char *colon, *port;
	unsigned long p;
	size_t hlen;

	*why = "expected HOST:PORT, [ADDR]:PORT or :PORT";
	if (arg[0] == '[') {
		const char *rb = strchr(arg, ']');

		if (!rb || rb[1] != ':')
			return -EINVAL;
		hlen = rb - arg - 1;
		if (hlen >= sizeof(host))
			return -EINVAL;
		memcpy(host, arg + 1, hlen);
		port = rb + 2;
	} else {
		colon = strrchr(arg, ':');
		if (!colon || memchr(arg, ':', colon - arg))
			return -EINVAL;
		hlen = colon - arg;
		if (hlen >= sizeof(host))
			return -EINVAL;
		memcpy(host, arg, hlen);
		port = colon + 1;
	}
	host[hlen] = 0;
	if (*port < '0' || *port > '9') {
		*why = "the port must be a number, 0..65535";
		return -EINVAL;
	}
	errno = 0;
	p = strtoul(port, &end, 10);
	if (errno || *end || p > 65535) {
		*why = "the port must be a number, 0..65535";
		return -EINVAL;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if (getaddrinfo(hlen ? host : NULL, port, &hints, &res) || !res) {
		*why = "cannot resolve the host";
		return -EINVAL;
	}
	if (!hlen) {
		/* every address: IPv4's any, as Go's ":6060" does */
		struct addrinfo *ai;

		for (ai = res; ai; ai = ai->ai_next)
			if (ai->ai_family == AF_INET)
				break;
		if (ai) {
			memcpy(ss, ai->ai_addr, ai->ai_addrlen);
			*len = ai->ai_addrlen;
			freeaddrinfo(res);
			return 0;
		}
	}
	if (res->ai_addrlen > sizeof(*ss)) {
		freeaddrinfo(res);
		return -EINVAL;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

int plabel_serve_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		const uint8_t *b = in6->sin6_addr.s6_addr;

		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return 1;
		return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && b[12] == 127;
	}
	return 0;
}

int plabel_serve_is_wildcard(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)sa)
			       ->sin_addr.s_addr == htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(
			&((const struct sockaddr_in6 *)(const void *)sa)
				 ->sin6_addr);
	return 0;
}

int plabel_serve_parse_users(const char *arg, uid_t *uids, unsigned int *n,
			     unsigned int max)
{
	char name[256];
	const char *p = arg;

	while (*p) {
		size_t len = strcspn(p, ",");
		struct passwd pw, *res = NULL;
		char buf[4096], *end;
		unsigned long v;

		if (!len || len >= sizeof(name) || *n >= max)
			return -EINVAL;
		memcpy(name, p, len);
		name[len] = 0;
		errno = 0;
		v = strtoul(name, &end, 10);
		if (name[0] >= '0' && name[0] <= '9' && !*end && !errno &&
		    v < (uid_t)-1) {
			uids[(*n)++] = v;
		} else if (!getpwnam_r(name, &pw, buf, sizeof(buf), &res) &&
			   res) {
			uids[(*n)++] = res->pw_uid;
		} else {
			return -ENOENT;
		}
		p += len;
		if (*p == ',' && !*++p)
			return -EINVAL;
	}
	return *n ? 0 : -EINVAL;
}

/*
 * Go's net/http/pprof paths that Parca and Grafana Alloy scrape by
 * default, and what plabel says about them.
 */
static const struct {
	const char *path;
	const char *why;
} plabel_lacking[] = {
	{ "delta_heap", "plabel serve has no delta heap profile: /debug/pprof/heap and allocs are since the server started" },
	{ "block", "plabel serve has no blocking profile" },
	{ "delta_block", "plabel serve has no blocking profile" },
	{ "mutex", "plabel serve has no mutex contention profile" },
	{ "delta_mutex", "plabel serve has no mutex contention profile" },
	{ "trace", "plabel serve has no execution trace" },
	{ "cmdline", "plabel serve profiles other processes: it has no command line of its own to show" },
	{ "symbol", "plabel's profiles come symbolized: there is nothing to look up" },
};

enum plabel_serve_route plabel_serve_route(const char *path,
					   const char **why)
{
	static const char pre[] = "/debug/pprof/";
	const char *name;
	size_t i;

	*why = "no such path (see /debug/pprof/)";
	if (!strcmp(path, "/debug/pprof") || !strcmp(path, pre))
		return PLABEL_ROUTE_INDEX;
	if (!strcmp(path, "/debug/fgprof")) {
		*why = "plabel serve has no wall-clock profile (fgprof)";
		return PLABEL_ROUTE_LACKING;
	}
	if (strncmp(path, pre, sizeof(pre) - 1))
		return PLABEL_ROUTE_UNKNOWN;
	name = path + sizeof(pre) - 1;
	if (!strcmp(name, "profile"))
		return PLABEL_ROUTE_PROFILE;
	if (!strcmp(name, "threadcreate"))
		return PLABEL_ROUTE_THREADCREATE;
	if (!strcmp(name, "goroutine"))
		return PLABEL_ROUTE_GOROUTINE;
	if (!strcmp(name, "heap"))
		return PLABEL_ROUTE_HEAP;
	if (!strcmp(name, "allocs"))
		return PLABEL_ROUTE_ALLOCS;
	for (i = 0; i < sizeof(plabel_lacking) / sizeof(plabel_lacking[0]);
	     i++) {
		if (!strcmp(name, plabel_lacking[i].path)) {
			*why = plabel_lacking[i].why;
			return PLABEL_ROUTE_LACKING;
		}
	}
	return PLABEL_ROUTE_UNKNOWN;
}

int plabel_serve_parse_seconds(const char *arg, unsigned int max,
			       unsigned int *secs, const char **why)
{
	unsigned long v;
	char *end;

	if (!arg) {
		*secs = PLABEL_SERVE_DEFAULT_SECONDS < max ?
			PLABEL_SERVE_DEFAULT_SECONDS : max;
		return 0;
	}
	if (*arg == '-') {
		*why = "seconds must be positive";
		return -EINVAL;
	}
	if (*arg < '0' || *arg > '9') {
		*why = "seconds must be a whole number of seconds";
		return -EINVAL;
	}
	errno = 0;
	v = strtoul(arg, &end, 10);
	if (*end) {
		*why = "seconds must be a whole number of seconds";
		return -EINVAL;
	}
	if (!v) {
		*why = "seconds must be positive";
		return -EINVAL;
	}
	if (errno || v > max) {
		*why = "seconds is over this server's maximum (--max-seconds)";
		return -EINVAL;
	}
	*secs = v;
	return 0;
}

int plabel_serve_filter_pids(struct plabel_serve_filter *f, const char *arg,
			     const char **why)
{
	int32_t pids[PLABEL_MAX_PIDS];
	uint32_t n, i;
	int ret = plabel_parse_pids(arg, pids, &n);

	if (ret) {
		*why = "pid must be PID[,PID..]";
		return -EINVAL;
	}
	if (f->npids + n > sizeof(f->pids) / sizeof(f->pids[0])) {
		*why = "too many pids in one request (64 at most)";
		return -E2BIG;
	}
	for (i = 0; i < n; i++)
		f->pids[f->npids++] = pids[i];
	return 0;
}

int plabel_serve_filter_label(struct plabel_serve_filter *f, const char *arg,
			      const char **why)
{
	const char *colon = strchr(arg, ':');
	size_t klen, vlen;

	if (!colon || colon == arg) {
		*why = "label must be KEY:VALUE";
		return -EINVAL;
	}
	klen = colon - arg;
	vlen = strlen(colon + 1);
	if (klen > PLABEL_MAX_KEY_LEN || vlen > PLABEL_MAX_VALUE_LEN) {
		*why = "label key or value too long";
		return -EINVAL;
	}
	if (f->nlabels == PLABEL_SERVE_MAX_FILTER_LABELS) {
		*why = "too many label filters in one request (8 at most)";
		return -E2BIG;
	}
	memcpy(f->labels[f->nlabels].key, arg, klen);
	f->labels[f->nlabels].key[klen] = 0;
	memcpy(f->labels[f->nlabels].value, colon + 1, vlen + 1);
	f->nlabels++;
	return 0;
}

/* key's letters and digits only, lower case, into out. */
static size_t plabel_fold_key(const char *key, size_t len, char *out,
			      size_t cap)
{
	size_t i, n = 0;

	for (i = 0; i < len && n + 1 < cap; i++) {
		unsigned char ch = key[i];

		if (ch < 0x80 && isalnum(ch))
			out[n++] = tolower(ch);
	}
	out[n] = 0;
	return n;
}

static int plabel_ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && !memcmp(s + n - k, suffix, k);
}

size_t plabel_serve_sanitize_key(const char *key, size_t len, char *out,
				 size_t cap)
{
	char fold[PLABEL_MAX_KEY_LEN + 1];
	size_t n, i, o = 0;
	const char *fixed = NULL;

	if (cap > PLABEL_MAX_KEY_LEN + 1)
		cap = PLABEL_MAX_KEY_LEN + 1;
	if (!cap)
		return 0;
	n = plabel_fold_key(key, len, fold, sizeof(fold));
	if (plabel_ends_with(fold, n, "traceid"))
		fixed = "trace_id";
	else if (plabel_ends_with(fold, n, "spanid") ||
		 plabel_ends_with(fold, n, "requestid") ||
		 !strcmp(fold, "reqid") || !strcmp(fold, "xreqid") ||
		 plabel_ends_with(fold, n, "correlationid"))
		fixed = "span_id";
	if (fixed) {
		snprintf(out, cap, "%s", fixed);
		return strlen(out);
	}
	if (!len || (key[0] >= '0' && key[0] <= '9'))
		out[o++] = '_';
	for (i = 0; i < len && o + 1 < cap; i++) {
		unsigned char ch = key[i];

		out[o++] = ch < 0x80 && (isalnum(ch) || ch == '_') ? ch : '_';
	}
	out[o] = 0;
	return o;
}

size_t plabel_serve_sanitize_labelset(const void *rec, size_t len, void *out,
				      size_t cap)
{
	char keys[PLABEL_MAX_LABELS][PLABEL_MAX_KEY_LEN + 1];
	size_t klens[PLABEL_MAX_LABELS];
	struct plabel_rec_labelset ls;
	const uint8_t *in = rec;
	uint8_t *o = out;
	size_t off, woff, i, j, size;

	if (len < sizeof(ls))
		return 0;
	memcpy(&ls, in, sizeof(ls));
	if (ls.count > PLABEL_MAX_LABELS ||
	    sizeof(ls) + ls.count * sizeof(struct plabel_rec_label) > len)
		return 0;
	off = sizeof(ls) + ls.count * sizeof(struct plabel_rec_label);
	woff = off;
	if (woff > cap)
		return 0;
	for (i = 0; i < ls.count; i++) {
		struct plabel_rec_label l;
		char base[PLABEL_MAX_KEY_LEN + 1];
		unsigned int dup = 1;
		size_t bl;

		memcpy(&l, in + sizeof(ls) + i * sizeof(l), sizeof(l));
		if (l.key_len > PLABEL_MAX_KEY_LEN ||
		    l.value_len > PLABEL_MAX_VALUE_LEN ||
		    (size_t)l.key_len + l.value_len > len - off)
			return 0;
		klens[i] = plabel_serve_sanitize_key((const char *)in + off,
						     l.key_len, keys[i],
						     sizeof(keys[i]));
		/* room for a _NN after it */
		bl = klens[i] < PLABEL_MAX_KEY_LEN - 4 ?
		     klens[i] : PLABEL_MAX_KEY_LEN - 4;
		memcpy(base, keys[i], bl);
		base[bl] = 0;
		/* the same as an earlier key: _2, _3.. until it is not */
		for (j = 0; j < i; j++) {
			if (klens[j] != klens[i] ||
			    memcmp(keys[j], keys[i], klens[i]))
				continue;
			dup++;	/* at most PLABEL_MAX_LABELS: two digits */
			memcpy(keys[i], base, bl);
			klens[i] = bl;
			keys[i][klens[i]++] = '_';
			if (dup >= 10)
				keys[i][klens[i]++] = '0' + dup / 10;
			keys[i][klens[i]++] = '0' + dup % 10;
			keys[i][klens[i]] = 0;
			j = (size_t)-1;	/* the loop's j++ makes it 0 */
		}
		if (woff + klens[i] + l.value_len > cap)
			return 0;
		memcpy(o + woff, keys[i], klens[i]);
		memcpy(o + woff + klens[i], in + off + l.key_len, l.value_len);
		off += (size_t)l.key_len + l.value_len;
		woff += klens[i] + l.value_len;
		l.key_len = klens[i];
		memcpy(o + sizeof(ls) + i * sizeof(l), &l, sizeof(l));
	}
	size = (woff + 7) & ~(size_t)7;
	if (size > cap)
		return 0;
	memset(o + woff, 0, size - woff);
	ls.hdr.size = size;
	memcpy(o, &ls, sizeof(ls));
	return size;
}
