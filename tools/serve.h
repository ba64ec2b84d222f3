/* SPDX-License-Identifier: GPL-2.0 */
/*
 * plabel serve's parsing: the listening address, the request's path and
 * query, label filters, and the label key mapping of --sanitize-labels.
 * Pure functions (serve_parse.c), tested on the host.
 */
#ifndef PLABEL_TOOLS_SERVE_H
#define PLABEL_TOOLS_SERVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "plabel_uapi.h"

#define PLABEL_SERVE_DEFAULT_LISTEN	"127.0.0.1:6060"
#define PLABEL_SERVE_DEFAULT_SECONDS	30
#define PLABEL_SERVE_MAX_SECONDS	300	/* --max-seconds default */
#define PLABEL_SERVE_MAX_REQUESTS	8	/* --max-requests default */
#define PLABEL_SERVE_MAX_FILTER_LABELS	8	/* label= in one request */
#define PLABEL_SERVE_MAX_ALLOW		16	/* --allow-user users */
/* /debug/pprof/goroutine with -a: the most processes one answer shows */
#define PLABEL_SERVE_THREADS_MAX_PROCS	128

/*
 * --listen HOST:PORT, [V6HOST]:PORT or :PORT (every address). HOST is a
 * numeric address or a name (the first address it has). 0, or -EINVAL
 * with *why set.
 */
int plabel_serve_parse_listen(const char *arg, struct sockaddr_storage *ss,
			      socklen_t *len, const char **why);

/* 1 when sa is a loopback address (127.0.0.0/8, ::1, ::ffff:127.x). */
int plabel_serve_is_loopback(const struct sockaddr *sa);
/* 1 when sa is 0.0.0.0 or ::, which listen on every address. */
int plabel_serve_is_wildcard(const struct sockaddr *sa);
/*
 * Append the users of arg (names or uids, comma-separated) to uids[*n];
 * -EINVAL when it is empty, malformed or over max, -ENOENT for a name
 * no user has.
 */
int plabel_serve_parse_users(const char *arg, uid_t *uids, unsigned int *n,
			     unsigned int max);

/* What a request's path is. */
enum plabel_serve_route {
	PLABEL_ROUTE_UNKNOWN,	/* 404 */
	PLABEL_ROUTE_INDEX,	/* /debug/pprof/ */
	PLABEL_ROUTE_PROFILE,	/* /debug/pprof/profile */
	PLABEL_ROUTE_THREADCREATE,	/* /debug/pprof/threadcreate */
	PLABEL_ROUTE_GOROUTINE,	/* /debug/pprof/goroutine: thread states */
	PLABEL_ROUTE_HEAP,	/* /debug/pprof/heap: with --heap */
	PLABEL_ROUTE_ALLOCS,	/* /debug/pprof/allocs: the same, alloc_space */
	PLABEL_ROUTE_LACKING,	/* a Go path plabel lacks: 404 with *why */
};

enum plabel_serve_route plabel_serve_route(const char *path,
					   const char **why);

/*
 * seconds= of a profile request (NULL: not given, the default, capped at
 * max). 0 and *secs, or -EINVAL with *why.
 */
int plabel_serve_parse_seconds(const char *arg, unsigned int max,
			       unsigned int *secs, const char **why);

struct plabel_serve_filter {
	uint32_t npids;		/* 0: every process */
	int32_t pids[64];
	uint32_t nlabels;	/* all must match */
	struct {
		char key[PLABEL_MAX_KEY_LEN + 1];
		char value[PLABEL_MAX_VALUE_LEN + 1];
	} labels[PLABEL_SERVE_MAX_FILTER_LABELS];
};

/* Add pid=PID[,PID..]. 0, or -EINVAL/-E2BIG with *why. */
int plabel_serve_filter_pids(struct plabel_serve_filter *f, const char *arg,
			     const char **why);
/* Add label=KEY:VALUE. 0, or -EINVAL/-E2BIG with *why. */
int plabel_serve_filter_label(struct plabel_serve_filter *f, const char *arg,
			      const char **why);

/*
 * --sanitize-labels: key (len bytes) as a name that matches
 * [a-zA-Z_][a-zA-Z0-9_]*, into out (cap bytes, NUL-terminated, at most
 * PLABEL_MAX_KEY_LEN bytes). Trace-id-like keys become trace_id; span-id
 * and request-id-like keys span_id (see Documentation/serve.rst); any
 * other byte outside [a-zA-Z0-9_] becomes '_', and a leading digit gets a
 * '_' before it. Returns the length.
 */
size_t plabel_serve_sanitize_key(const char *key, size_t len, char *out,
				 size_t cap);

/*
 * A LABELSET record (rec, len bytes, already checked by the decoder) with
 * its keys sanitized, a key that then repeats another getting _2, _3..:
 * into out (cap bytes, at least len + PLABEL_MAX_LABELS * 8). Returns the
 * new record's size, or 0 when it does not fit.
 */
size_t plabel_serve_sanitize_labelset(const void *rec, size_t len, void *out,
				      size_t cap);

/* What plabel_serve_run() needs of the options. */
struct plabel_serve_cfg {
	unsigned int max_seconds;
	unsigned int max_requests;
	int sanitize;
	unsigned long hz;	/* 0: the stream says */
	/*
	 * record --every: no HTTP; a CPU and a thread-create profile per
	 * every_ns into out_dir, until a signal, duration_ns (0: none) or
	 * the end of every watch[] process (nwatch 0: none).
	 */
	uint64_t every_ns;
	const char *out_dir;
	/*
	 * On a listener whose address is not a wildcard: a connection from
	 * this host is taken only from root, the server's user or one of
	 * allow[] (see tools/peer.h); one from elsewhere only with
	 * remote_ok. 0: anyone who can connect (a wildcard address, a Unix
	 * socket, tests).
	 */
	int check_peer;
	const uid_t *allow;
	unsigned int nallow;
	int remote_ok;		/* a peer not on this host is taken */
	uint64_t duration_ns;
	const int32_t *watch;
	uint32_t nwatch;
	/*
	 * /debug/pprof/goroutine: the processes whose threads it shows
	 * (npids 0: every process the server may read, at most
	 * PLABEL_SERVE_THREADS_MAX_PROCS of them) and how their stacks are
	 * taken (enum plabel_callchain).
	 */
	const int32_t *pids;
	uint32_t npids;
	uint32_t callchain;
	/*
	 * The session's heap sampling interval (PLABEL_RECORD_HEAP), for
	 * /debug/pprof/heap and allocs; 0: none, they answer 404.
	 */
	uint64_t heap_bytes;
	/*
	 * record --every --off-cpu: the session records waits; each file
	 * window writes offcpu-STAMP and wall-STAMP too, with the waits
	 * that ended in its interval.
	 */
	int offcpu;
	/*
	 * record --every --timeline: each file window writes
	 * timeline-STAMP.json.gz too, of the threads that carried
	 * timeline_label (KEY=VALUE; NULL: all), and as with offcpu the
	 * off-CPU and wall profiles (the session records waits).
	 */
	int timeline;
	const char *timeline_label;
};

/*
 * Serve the records read from rec_fd (a /dev/plabel file with a session
 * started, or for tests any readable file) over HTTP on listen_fd (a
 * listening socket, taken over) until SIGINT or SIGTERM. shown names
 * the address in the "listening" line. With cfg->every_ns, write files
 * instead (listen_fd -1). Returns the exit status: 0, or 1 when reading
 * the records or writing a file failed.
 */
int plabel_serve_run(const struct plabel_serve_cfg *cfg, int rec_fd,
		     int listen_fd, const char *shown);

#endif /* PLABEL_TOOLS_SERVE_H */
