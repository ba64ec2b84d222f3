// SPDX-License-Identifier: GPL-2.0
/*
 * plabel serve on the host: its parsing (addresses, paths, seconds,
 * filters, the label key mapping), and the server itself, fed a record
 * stream through a pipe instead of /dev/plabel, over real HTTP with
 * libmicrohttpd: profiles of windows opened after the label sets came,
 * two at once, filters, the bad requests, the limit on requests, a
 * stalled client, an oversized request and a clean stop on SIGTERM.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "kselftest/kselftest_harness.h"
#include "../../tools/profile.h"
#include "../../tools/serve.h"
#include "../../tools/session.h"
#include "tools/stream_build.h"

/* ---- parsing ---- */

TEST(listen_addresses)
{
	struct sockaddr_storage ss;
	socklen_t len;
	const char *why;

	ASSERT_EQ(0, plabel_serve_parse_listen("127.0.0.1:6060", &ss, &len,
					       &why));
	EXPECT_EQ(AF_INET, ss.ss_family);
	EXPECT_EQ(6060, ntohs(((struct sockaddr_in *)&ss)->sin_port));
	EXPECT_EQ(1, plabel_serve_is_loopback((struct sockaddr *)&ss));
	ASSERT_EQ(0, plabel_serve_parse_listen("127.9.8.7:0", &ss, &len, &why));
	EXPECT_EQ(1, plabel_serve_is_loopback((struct sockaddr *)&ss));
	ASSERT_EQ(0, plabel_serve_parse_listen("[::1]:7000", &ss, &len, &why));
	EXPECT_EQ(AF_INET6, ss.ss_family);
	EXPECT_EQ(1, plabel_serve_is_loopback((struct sockaddr *)&ss));
	ASSERT_EQ(0, plabel_serve_parse_listen(":6060", &ss, &len, &why));
	EXPECT_EQ(0, plabel_serve_is_loopback((struct sockaddr *)&ss));
	ASSERT_EQ(0, plabel_serve_parse_listen("0.0.0.0:6060", &ss, &len,
					       &why));
	EXPECT_EQ(0, plabel_serve_is_loopback((struct sockaddr *)&ss));
	ASSERT_EQ(0, plabel_serve_parse_listen("10.1.2.3:6060", &ss, &len,
					       &why));
	EXPECT_EQ(0, plabel_serve_is_loopback((struct sockaddr *)&ss));
	ASSERT_EQ(0, plabel_serve_parse_listen("[::ffff:127.0.0.1]:1", &ss,
					       &len, &why));
	EXPECT_EQ(1, plabel_serve_is_loopback((struct sockaddr *)&ss));
	ASSERT_EQ(0, plabel_serve_parse_listen("[::]:1", &ss, &len, &why));
	EXPECT_EQ(0, plabel_serve_is_loopback((struct sockaddr *)&ss));

	EXPECT_EQ(-EINVAL, plabel_serve_parse_listen("6060", &ss, &len, &why));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_listen("127.0.0.1:", &ss, &len,
						     &why));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_listen("127.0.0.1:65536", &ss,
						     &len, &why));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_listen("127.0.0.1:x", &ss, &len,
						     &why));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_listen("::1:6060", &ss, &len,
						     &why));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_listen("[::1]6060", &ss, &len,
						     &why));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_listen("127.0.0.1:-1", &ss,
						     &len, &why));
}

TEST(routes)
{
	const char *why;

	EXPECT_EQ(PLABEL_ROUTE_INDEX, plabel_serve_route("/debug/pprof/", &why));
	EXPECT_EQ(PLABEL_ROUTE_INDEX, plabel_serve_route("/debug/pprof", &why));
	EXPECT_EQ(PLABEL_ROUTE_PROFILE,
		  plabel_serve_route("/debug/pprof/profile", &why));
	EXPECT_EQ(PLABEL_ROUTE_THREADCREATE,
		  plabel_serve_route("/debug/pprof/threadcreate", &why));
	EXPECT_EQ(PLABEL_ROUTE_HEAP,
		  plabel_serve_route("/debug/pprof/heap", &why));
	EXPECT_EQ(PLABEL_ROUTE_ALLOCS,
		  plabel_serve_route("/debug/pprof/allocs", &why));
	EXPECT_EQ(PLABEL_ROUTE_LACKING,
		  plabel_serve_route("/debug/pprof/block", &why));
	EXPECT_EQ(PLABEL_ROUTE_LACKING,
		  plabel_serve_route("/debug/pprof/mutex", &why));
	EXPECT_EQ(PLABEL_ROUTE_GOROUTINE,
		  plabel_serve_route("/debug/pprof/goroutine", &why));
	EXPECT_EQ(PLABEL_ROUTE_LACKING,
		  plabel_serve_route("/debug/pprof/delta_heap", &why));
	EXPECT_EQ(PLABEL_ROUTE_LACKING, plabel_serve_route("/debug/fgprof", &why));
	EXPECT_EQ(PLABEL_ROUTE_UNKNOWN, plabel_serve_route("/", &why));
	EXPECT_EQ(PLABEL_ROUTE_UNKNOWN,
		  plabel_serve_route("/debug/pprof/profile/", &why));
	EXPECT_EQ(PLABEL_ROUTE_UNKNOWN,
		  plabel_serve_route("/debug/pprof/../etc", &why));
	EXPECT_EQ(PLABEL_ROUTE_UNKNOWN, plabel_serve_route("/metrics", &why));
}

TEST(seconds)
{
	const char *why = NULL;
	unsigned int s = 0;

	ASSERT_EQ(0, plabel_serve_parse_seconds(NULL, 300, &s, &why));
	EXPECT_EQ(30, s);
	ASSERT_EQ(0, plabel_serve_parse_seconds(NULL, 10, &s, &why));
	EXPECT_EQ(10, s);
	ASSERT_EQ(0, plabel_serve_parse_seconds("7", 300, &s, &why));
	EXPECT_EQ(7, s);
	ASSERT_EQ(0, plabel_serve_parse_seconds("300", 300, &s, &why));
	EXPECT_EQ(300, s);
	EXPECT_EQ(-EINVAL, plabel_serve_parse_seconds("301", 300, &s, &why));
	EXPECT_NE(NULL, strstr(why, "maximum"));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_seconds("abc", 300, &s, &why));
	EXPECT_NE(NULL, strstr(why, "whole number"));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_seconds("-5", 300, &s, &why));
	EXPECT_NE(NULL, strstr(why, "positive"));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_seconds("0", 300, &s, &why));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_seconds("", 300, &s, &why));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_seconds("1.5", 300, &s, &why));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_seconds(" 5", 300, &s, &why));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_seconds("5s", 300, &s, &why));
	EXPECT_EQ(-EINVAL, plabel_serve_parse_seconds(
				   "99999999999999999999999", 300, &s, &why));
}

/* --max-seconds, --max-requests and -F share one parser of bounded numbers */
TEST(bounded_numbers)
{
	unsigned long v = 7;

	EXPECT_EQ(0, plabel_parse_ulong("1", 1, 86400, &v));
	EXPECT_EQ(1, v);
	EXPECT_EQ(0, plabel_parse_ulong("86400", 1, 86400, &v));
	EXPECT_EQ(86400, v);
	EXPECT_EQ(-EINVAL, plabel_parse_ulong("0", 1, 86400, &v));
	EXPECT_EQ(-EINVAL, plabel_parse_ulong("86401", 1, 86400, &v));
	EXPECT_EQ(-EINVAL, plabel_parse_ulong("", 1, 10, &v));
	EXPECT_EQ(-EINVAL, plabel_parse_ulong("-1", 0, 10, &v));
	EXPECT_EQ(-EINVAL, plabel_parse_ulong("+1", 0, 10, &v));
	EXPECT_EQ(-EINVAL, plabel_parse_ulong(" 1", 0, 10, &v));
	EXPECT_EQ(-EINVAL, plabel_parse_ulong("1s", 0, 10, &v));
	EXPECT_EQ(-EINVAL, plabel_parse_ulong("99999999999999999999999", 0,
					      ~0UL, &v));
	EXPECT_EQ(86400, v);	/* untouched by the failures */
	EXPECT_EQ(0, plabel_parse_hz("20000", &v));
	EXPECT_EQ(-EINVAL, plabel_parse_hz("0", &v));
}

TEST(filters)
{
	static struct plabel_serve_filter f;
	const char *why;
	char big[PLABEL_MAX_VALUE_LEN + 16];
	int i;

	memset(&f, 0, sizeof(f));
	ASSERT_EQ(0, plabel_serve_filter_pids(&f, "12,34", &why));
	EXPECT_EQ(2, f.npids);
	EXPECT_EQ(34, f.pids[1]);
	EXPECT_EQ(-EINVAL, plabel_serve_filter_pids(&f, "x", &why));
	EXPECT_EQ(-EINVAL, plabel_serve_filter_pids(&f, "-1", &why));
	EXPECT_EQ(-EINVAL, plabel_serve_filter_pids(&f, "", &why));
	ASSERT_EQ(0, plabel_serve_filter_label(&f, "worker:alpha", &why));
	EXPECT_STREQ("worker", f.labels[0].key);
	EXPECT_STREQ("alpha", f.labels[0].value);
	/* the value may hold colons; the key may not be empty */
	ASSERT_EQ(0, plabel_serve_filter_label(&f, "url:http://x:1/", &why));
	EXPECT_STREQ("http://x:1/", f.labels[1].value);
	ASSERT_EQ(0, plabel_serve_filter_label(&f, "k:", &why));
	EXPECT_STREQ("", f.labels[2].value);
	EXPECT_EQ(-EINVAL, plabel_serve_filter_label(&f, ":v", &why));
	EXPECT_EQ(-EINVAL, plabel_serve_filter_label(&f, "novalue", &why));
	memset(big, 'v', sizeof(big) - 1);
	big[0] = 'k';
	big[1] = ':';
	big[sizeof(big) - 1] = 0;
	EXPECT_EQ(-EINVAL, plabel_serve_filter_label(&f, big, &why));
	for (i = 3; i < PLABEL_SERVE_MAX_FILTER_LABELS; i++)
		ASSERT_EQ(0, plabel_serve_filter_label(&f, "a:b", &why));
	EXPECT_EQ(-E2BIG, plabel_serve_filter_label(&f, "a:b", &why));
}

static const char *sanitized(const char *key)
{
	static char out[PLABEL_MAX_KEY_LEN + 1];

	plabel_serve_sanitize_key(key, strlen(key), out, sizeof(out));
	return out;
}

TEST(sanitize_keys)
{
	char longkey[300];

	EXPECT_STREQ("endpoint", sanitized("endpoint"));
	EXPECT_STREQ("http_route", sanitized("http.route"));
	EXPECT_STREQ("a_b_c", sanitized("a-b c"));
	EXPECT_STREQ("_1st", sanitized("1st"));
	EXPECT_STREQ("caf__", sanitized("caf\xc3\xa9"));
	EXPECT_STREQ("_Ok_09", sanitized("_Ok_09"));
	EXPECT_STREQ("trace_id", sanitized("trace_id"));
	EXPECT_STREQ("trace_id", sanitized("traceId"));
	EXPECT_STREQ("trace_id", sanitized("X-Trace-Id"));
	EXPECT_STREQ("trace_id", sanitized("otel.trace_id"));
	EXPECT_STREQ("span_id", sanitized("span.id"));
	EXPECT_STREQ("span_id", sanitized("request_id"));
	EXPECT_STREQ("span_id", sanitized("X-Request-ID"));
	EXPECT_STREQ("span_id", sanitized("requestId"));
	EXPECT_STREQ("span_id", sanitized("req_id"));
	EXPECT_STREQ("span_id", sanitized("correlation-id"));
	EXPECT_STREQ("request", sanitized("request"));
	EXPECT_STREQ("tracer", sanitized("tracer"));
	memset(longkey, '9', 255);
	longkey[255] = 0;
	EXPECT_EQ(255, strlen(sanitized(longkey)));
	EXPECT_EQ('_', sanitized(longkey)[0]);
}

TEST(sanitize_labelset_record)
{
	static const char *const kvs[] = {
		"http.route", "/a", "http_route", "/b", "http-route", "/c",
		"x-request-id", "r-17", "ok", "v",
	};
	static struct sbuf in;
	static uint8_t out[4096];
	struct plabel_dec_rec *r = malloc(sizeof(*r));
	struct plabel_dec d;
	size_t n;

	ASSERT_NE(NULL, r);
	in.len = 0;
	sb_labelset(&in, 9, kvs, 5);
	n = plabel_serve_sanitize_labelset(in.data, in.len, out, sizeof(out));
	ASSERT_NE(0, n);
	EXPECT_EQ(0, n % 8);
	plabel_dec_init(&d, out, n);
	ASSERT_EQ(1, plabel_dec_next(&d, r));
	ASSERT_EQ(PLABEL_REC_LABELSET, r->type);
	EXPECT_EQ(9, r->u.labelset.id);
	ASSERT_EQ(5, r->u.labelset.count);
	EXPECT_EQ(strlen("http_route"), r->u.labelset.labels[0].key.len);
	EXPECT_EQ(0, strncmp("http_route", r->u.labelset.labels[0].key.ptr,
			     r->u.labelset.labels[0].key.len));
	EXPECT_EQ(strlen("http_route_2"), r->u.labelset.labels[1].key.len);
	EXPECT_EQ(0, strncmp("http_route_2", r->u.labelset.labels[1].key.ptr,
			     r->u.labelset.labels[1].key.len));
	EXPECT_EQ(strlen("http_route_3"), r->u.labelset.labels[2].key.len);
	EXPECT_EQ(0, strncmp("http_route_3", r->u.labelset.labels[2].key.ptr,
			     r->u.labelset.labels[2].key.len));
	EXPECT_EQ(strlen("span_id"), r->u.labelset.labels[3].key.len);
	EXPECT_EQ(0, strncmp("span_id", r->u.labelset.labels[3].key.ptr,
			     r->u.labelset.labels[3].key.len));
	EXPECT_EQ(strlen("ok"), r->u.labelset.labels[4].key.len);
	EXPECT_EQ(0, strncmp("ok", r->u.labelset.labels[4].key.ptr,
			     r->u.labelset.labels[4].key.len));
	EXPECT_EQ(0, strncmp("r-17", r->u.labelset.labels[3].value.ptr, 4));
	EXPECT_EQ(0, plabel_dec_next(&d, r));
	/* too small an output: refused, not overrun */
	EXPECT_EQ(0, plabel_serve_sanitize_labelset(in.data, in.len, out, 40));
	/* a truncated record */
	EXPECT_EQ(0, plabel_serve_sanitize_labelset(in.data, 20, out,
						    sizeof(out)));
	free(r);
}

/* ---- the server, fed through a pipe ---- */

#define PID_A	4242
#define PID_B	4343

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

struct feeder {
	int fd;
	volatile int stop;
	pthread_t thr;
};

/*
 * Every 10 ms: three samples of set 1 (worker=alpha, in PID_A) and one of
 * set 2 (worker=beta, in PID_B), stamped now, and a thread creation.
 */
static void *feed(void *arg)
{
	static const uint64_t ips_a[] = { 0x401000, 0x402000 };
	static const uint64_t ips_b[] = { 0x501000, 0x502000 };
	struct feeder *f = arg;
	static struct sbuf b;

	while (!f->stop) {
		struct plabel_rec_sample *s;
		uint64_t now = mono_ns();
		int i;

		b.len = 0;
		for (i = 0; i < 3; i++) {
			s = sb_sample(&b, PLABEL_REC_SAMPLE, 1, PID_A, ips_a, 0, 2);
			s->time_ns = now;
		}
		s = sb_sample(&b, PLABEL_REC_SAMPLE, 2, PID_B, ips_b, 0, 2);
		s->time_ns = now;
		s = sb_sample(&b, PLABEL_REC_THREAD, 1, PID_A, ips_a, 0, 2);
		s->time_ns = now;
		s->child_pid = PID_A;
		s->child_tid = PID_A + 100;
		if (write_all(f->fd, b.data, b.len))
			break;
		usleep(10000);
	}
	return NULL;
}

FIXTURE(srv)
{
	pid_t child;
	int port;
	int rec[2];
	struct feeder f;
};

static const char *const kv_alpha[] = { "worker", "alpha", "x-request-id", "r1" };
static const char *const kv_beta[] = { "worker", "beta" };

/* srv_start's peer check: off, or on with these users allowed */
static int srv_check_peer;
static uid_t srv_allow[2];
static unsigned int srv_nallow;
static uint64_t srv_heap_bytes;	/* and heap records: --heap */

static void srv_start(struct __test_metadata *_metadata,
		      FIXTURE_DATA(srv) *self, int sanitize,
		      unsigned int max_requests)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);
	static struct sbuf b;
	int lfd;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_LE(0, lfd);
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, listen(lfd, 16));
	ASSERT_EQ(0, getsockname(lfd, (struct sockaddr *)&sin, &sl));
	self->port = ntohs(sin.sin_port);
	ASSERT_EQ(0, pipe(self->rec));
	/* the label sets and names come long before any request */
	b.len = 0;
	sb_stream(&b, 10000000);
	sb_labelset(&b, 1, kv_alpha, 2);
	sb_labelset(&b, 2, kv_beta, 1);
	sb_comm(&b, PID_A, PID_A + 1, mono_ns(), "alpha-main");
	ASSERT_EQ(0, write_all(self->rec[1], b.data, b.len));

	self->child = fork();
	ASSERT_LE(0, self->child);
	if (!self->child) {
		struct plabel_serve_cfg cfg = {
			.max_seconds = 5,
			.max_requests = max_requests,
			.sanitize = sanitize,
			.check_peer = srv_check_peer,
			.allow = srv_allow,
			.nallow = srv_nallow,
			.heap_bytes = srv_heap_bytes,
		};

		close(self->rec[1]);
		_exit(plabel_serve_run(&cfg, self->rec[0], lfd, "test"));
	}
	close(lfd);
	close(self->rec[0]);
	self->f.fd = self->rec[1];
	self->f.stop = 0;
	ASSERT_EQ(0, pthread_create(&self->f.thr, NULL, feed, &self->f));
	usleep(300000);	/* the first records are read before any window */
}

/* SIGTERM: exit status 0 */
static void srv_stop(struct __test_metadata *_metadata,
		     FIXTURE_DATA(srv) *self)
{
	int st = -1;

	if (self->child <= 0)
		return;
	/* the feeder stops first; the pipe stays open until the child ends */
	self->f.stop = 1;
	pthread_join(self->f.thr, NULL);
	kill(self->child, SIGTERM);
	ASSERT_EQ(self->child, waitpid(self->child, &st, 0));
	self->child = 0;
	close(self->rec[1]);
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
}

FIXTURE_SETUP(srv)
{
	signal(SIGPIPE, SIG_IGN);
	self->child = 0;
}

FIXTURE_TEARDOWN(srv)
{
	if (self->child > 0) {
		kill(self->child, SIGKILL);
		waitpid(self->child, NULL, 0);
		self->f.stop = 1;
		pthread_join(self->f.thr, NULL);
	}
}

struct resp {
	int status;
	char head[4096];
	uint8_t *body;
	size_t len;
};

static int dial(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Read to the end (the server closes: Connection: close). */
static int read_resp(int fd, struct resp *r)
{
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf = malloc(cap);
	char *sep;
	ssize_t n;

	memset(r, 0, sizeof(*r));
	r->status = -1;
	if (!buf)
		return -1;
	for (;;) {
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap * 2);

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += n;
	}
	if (len == cap) {
		free(buf);
		return -1;
	}
	buf[len] = 0;
	sep = memmem(buf, len, "\r\n\r\n", 4);
	if (!sep || sscanf((char *)buf, "HTTP/1.%*d %d", &r->status) != 1) {
		free(buf);
		return -1;
	}
	snprintf(r->head, sizeof(r->head), "%.*s", (int)((uint8_t *)sep - buf),
		 (char *)buf);
	r->len = len - ((uint8_t *)sep + 4 - buf);
	r->body = malloc(r->len + 1);
	if (r->body) {
		memcpy(r->body, sep + 4, r->len);
		r->body[r->len] = 0;
	}
	free(buf);
	return 0;
}

static int get(int port, const char *path, struct resp *r)
{
	char req[1024];
	int fd = dial(port), ret;

	if (fd < 0)
		return -1;
	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
		 path);
	if (write_all(fd, req, strlen(req))) {
		close(fd);
		return -1;
	}
	ret = read_resp(fd, r);
	close(fd);
	return ret;
}

struct sums {
	int64_t alpha, beta, other, total;
	int64_t pids_a;
	int span_ids, request_ids;
};

/* CPU nanoseconds by worker label, of a gzipped profile. */
static int sum_profile(const struct resp *r, struct sums *s)
{
	struct plabel_prof *p = NULL;
	const char *err = NULL;
	size_t i, j, vi;

	memset(s, 0, sizeof(*s));
	if (plabel_prof_decode(r->body, r->len, &p, &err))
		return -1;
	vi = plabel_prof_default_index(p);
	for (i = 0; i < plabel_prof_num_samples(p); i++) {
		struct plabel_prof_sample_info si;
		const char *w = NULL;

		plabel_prof_get_sample(p, i, &si);
		for (j = 0; j < si.nlabels; j++) {
			if (!strcmp(si.labels[j].key, "worker"))
				w = si.labels[j].value;
			if (!strcmp(si.labels[j].key, "span_id"))
				s->span_ids++;
			if (!strcmp(si.labels[j].key, "x-request-id"))
				s->request_ids++;
		}
		for (j = 0; j < si.nnumlabels; j++)
			if (!strcmp(si.numlabels[j].key, "pid") &&
			    si.numlabels[j].num == PID_A)
				s->pids_a += si.values[vi];
		if (w && !strcmp(w, "alpha"))
			s->alpha += si.values[vi];
		else if (w && !strcmp(w, "beta"))
			s->beta += si.values[vi];
		else
			s->other += si.values[vi];
		s->total += si.values[vi];
	}
	plabel_prof_free(p);
	return 0;
}

TEST_F(srv, index_paths_and_bad_requests)
{
	struct resp r;

	srv_start(_metadata, self, 0, 8);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/", &r));
	EXPECT_EQ(200, r.status);
	EXPECT_NE(NULL, strstr((char *)r.body, "threadcreate"));
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/nope", &r));
	EXPECT_EQ(404, r.status);
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/heap", &r));
	EXPECT_EQ(404, r.status);
	EXPECT_NE(NULL, strstr((char *)r.body, "plabel serve --heap"));
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/allocs", &r));
	EXPECT_EQ(404, r.status);
	free(r.body);
	/* (the server's stream here is no /dev/plabel: no thread states) */
	ASSERT_EQ(0, get(self->port, "/debug/pprof/goroutine?debug=1", &r));
	EXPECT_EQ(503, r.status);
	EXPECT_NE(NULL, strstr((char *)r.body, "no thread states"));
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/goroutine?seconds=3", &r));
	EXPECT_EQ(400, r.status);
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/goroutine?pid=x", &r));
	EXPECT_EQ(400, r.status);
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/profile?seconds=abc", &r));
	EXPECT_EQ(400, r.status);
	EXPECT_NE(NULL, strstr((char *)r.body, "whole number"));
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/profile?seconds=-3", &r));
	EXPECT_EQ(400, r.status);
	EXPECT_NE(NULL, strstr((char *)r.body, "positive"));
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/profile?seconds=6", &r));
	EXPECT_EQ(400, r.status);
	EXPECT_NE(NULL, strstr((char *)r.body, "maximum"));
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/profile?seconds=1&label=novalue", &r));
	EXPECT_EQ(400, r.status);
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/profile?seconds=1&pid=abc", &r));
	EXPECT_EQ(400, r.status);
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/profile?debug=1", &r));
	EXPECT_EQ(400, r.status);
	free(r.body);
	srv_stop(_metadata, self);
}

/*
 * The HTTP status uid gets for path (0: the connection closed with no
 * answer), from a child that is uid; -1 when it could not ask.
 */
static int get_as(uid_t uid, int port, const char *path)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (!pid) {
		struct resp r;

		if (setresuid(uid, uid, uid))
			_exit(255);
		if (get(port, path, &r))
			_exit(0);
		_exit(r.status == 200 ? 200 : r.status / 100);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) == 255)
		return -1;
	return WEXITSTATUS(st);
}

TEST_F(srv, other_users_are_closed_unanswered)
{
	struct resp r;

	if (geteuid())
		SKIP(return, "needs root to connect as another user");
	srv_check_peer = 1;
	srv_nallow = 0;
	srv_start(_metadata, self, 0, 8);
	srv_check_peer = 0;
	EXPECT_EQ(0, get_as(65534, self->port, "/debug/pprof/"));
	EXPECT_EQ(0, get_as(65534, self->port, "/debug/pprof/threadcreate"));
	/* root, the server's user, is answered still */
	ASSERT_EQ(0, get(self->port, "/debug/pprof/", &r));
	EXPECT_EQ(200, r.status);
	free(r.body);
	srv_stop(_metadata, self);
}

TEST_F(srv, allowed_users_are_answered)
{
	if (geteuid())
		SKIP(return, "needs root to connect as another user");
	srv_check_peer = 1;
	srv_allow[0] = 65534;
	srv_nallow = 1;
	srv_start(_metadata, self, 0, 8);
	srv_check_peer = 0;
	srv_nallow = 0;
	EXPECT_EQ(200, get_as(65534, self->port, "/debug/pprof/"));
	EXPECT_EQ(0, get_as(65533, self->port, "/debug/pprof/"));
	EXPECT_EQ(200, get_as(0, self->port, "/debug/pprof/"));
	srv_stop(_metadata, self);
}

TEST_F(srv, profile_has_labels_sent_before_it)
{
	struct resp r;
	struct sums s;
	uint64_t t0 = mono_ns();

	srv_start(_metadata, self, 0, 8);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/profile?seconds=1", &r));
	ASSERT_EQ(200, r.status);
	/* after its second, and the margin for records still on their way */
	EXPECT_LE(1000000000ULL, mono_ns() - t0);
	EXPECT_NE(NULL, strstr(r.head, "application/octet-stream"));
	ASSERT_LE(2, r.len);
	EXPECT_EQ(0x1f, r.body[0]);
	ASSERT_EQ(0, sum_profile(&r, &s));
	free(r.body);
	TH_LOG("alpha %lld beta %lld other %lld", (long long)s.alpha,
	       (long long)s.beta, (long long)s.other);
	/* about 100 rounds of 10 ms: 3 x 10 ms alpha, 10 ms beta each */
	EXPECT_LT(0, s.beta);
	EXPECT_EQ(0, s.other);
	EXPECT_LE(s.beta * 25 / 10, s.alpha);
	EXPECT_GE(s.beta * 35 / 10, s.alpha);
	EXPECT_LE(500000000LL, s.total);
	EXPECT_GE(6000000000LL, s.total);
	EXPECT_EQ(s.alpha, s.pids_a);
	EXPECT_LT(0, s.request_ids);	/* not sanitized */
	EXPECT_EQ(0, s.span_ids);

	ASSERT_EQ(0, get(self->port, "/debug/pprof/threadcreate", &r));
	ASSERT_EQ(200, r.status);
	ASSERT_EQ(0, sum_profile(&r, &s));
	free(r.body);
	/* one creation per 10 ms since the start, all labeled alpha */
	EXPECT_LE(50, s.total);
	EXPECT_EQ(s.total, s.alpha);
	srv_stop(_metadata, self);
}

struct fetch {
	int port;
	const char *path;
	struct resp r;
	int ret;
	pthread_t thr;
};

static void *fetch_thr(void *arg)
{
	struct fetch *f = arg;

	f->ret = get(f->port, f->path, &f->r);
	return NULL;
}

TEST_F(srv, two_at_once_and_filters)
{
	struct fetch f[3] = {
		{ .path = "/debug/pprof/profile?seconds=2" },
		{ .path = "/debug/pprof/profile?seconds=1&label=worker:beta" },
		{ .path = "/debug/pprof/profile?seconds=1&pid=4242" },
	};
	struct sums s[3];
	int i;

	srv_start(_metadata, self, 0, 8);
	for (i = 0; i < 3; i++) {
		f[i].port = self->port;
		ASSERT_EQ(0, pthread_create(&f[i].thr, NULL, fetch_thr, &f[i]));
	}
	for (i = 0; i < 3; i++) {
		pthread_join(f[i].thr, NULL);
		ASSERT_EQ(0, f[i].ret);
		ASSERT_EQ(200, f[i].r.status);
		ASSERT_EQ(0, sum_profile(&f[i].r, &s[i]));
		free(f[i].r.body);
	}
	EXPECT_LT(0, s[0].alpha);
	EXPECT_LT(0, s[0].beta);
	EXPECT_EQ(0, s[1].alpha);
	EXPECT_LT(0, s[1].beta);
	EXPECT_LT(0, s[2].alpha);
	EXPECT_EQ(0, s[2].beta);
	/* the two-second window saw about twice what the one-second did */
	EXPECT_LE(s[2].alpha * 15 / 10, s[0].alpha);
	srv_stop(_metadata, self);
}

/* A profile file's bytes as a response's body (malloc()ed). 0 or -1. */
static int read_resp_file(const char *path, struct resp *r)
{
	FILE *f = fopen(path, "rb");
	long n;

	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	r->body = malloc(n > 0 ? n : 1);
	if (!r->body || n <= 0 || fread(r->body, n, 1, f) != 1) {
		fclose(f);
		free(r->body);
		r->body = NULL;
		return -1;
	}
	fclose(f);
	r->len = n;
	return 0;
}

/* Whether profile r has a comment holding s. */
static int resp_has_comment(const struct resp *r, const char *s)
{
	struct plabel_prof *p = NULL;
	const char *err = NULL;
	size_t i;
	int found = 0;

	if (plabel_prof_decode(r->body, r->len, &p, &err))
		return 0;
	for (i = 0; i < plabel_prof_num_comments(p); i++)
		if (strstr(plabel_prof_comment(p, i), s))
			found = 1;
	plabel_prof_free(p);
	return found;
}

/* Heap values by worker label: [alpha, beta][the four] of profile r. */
static int heap_sums(const struct resp *r, int64_t v[2][4], size_t *dflt)
{
	struct plabel_prof *p = NULL;
	const char *err = NULL;
	size_t i, j, k;

	memset(v, 0, sizeof(int64_t) * 8);
	if (plabel_prof_decode(r->body, r->len, &p, &err))
		return -1;
	*dflt = plabel_prof_default_index(p);
	for (i = 0; i < plabel_prof_num_samples(p); i++) {
		struct plabel_prof_sample_info si;

		plabel_prof_get_sample(p, i, &si);
		for (j = 0; j < si.nlabels; j++) {
			if (strcmp(si.labels[j].key, "worker"))
				continue;
			k = !strcmp(si.labels[j].value, "beta");
			v[k][0] += si.values[0];
			v[k][1] += si.values[1];
			v[k][2] += si.values[2];
			v[k][3] += si.values[3];
		}
	}
	plabel_prof_free(p);
	return 0;
}

/*
 * --heap: allocations since the start, the freed ones kept as counts.
 * This process: 100 blocks of 1000 bytes (alpha) allocated and freed,
 * each FREE written before its ALLOC (as two CPUs' rings can give them),
 * and 3 of 3000 bytes (beta), one freed; the kernel lost 2 FREEs; the
 * parent's 2 blocks, then its exec. After they settle, heap and allocs
 * (asked twice: nothing is used up) say so, and the freed of one stack
 * are one record.
 */
TEST_F(srv, heap_and_allocs_since_the_start)
{
	static const uint64_t ip = 0x401000;
	static struct sbuf b;
	const double rate = 4096;
	double sa = 1 / (1 - exp(-1000 / rate));
	double sb = 1 / (1 - exp(-3000 / rate));
	int64_t v[2][4];
	size_t dflt, i;
	uint32_t me = (uint32_t)getpid(), parent = (uint32_t)getppid();
	uint64_t t;
	struct resp r;
	int round;

	srv_heap_bytes = (uint64_t)rate;
	srv_start(_metadata, self, 0, 8);
	srv_heap_bytes = 0;
	t = mono_ns();
	for (i = 0; i < 100; i++) {
		b.len = 0;
		sb_free(&b, me, t + 2 * i + 1, 0x10000 + 0x100 * i);
		sb_alloc(&b, 1, me, t + 2 * i, 0x10000 + 0x100 * i, 1000,
			 (uint64_t)rate, ip);
		ASSERT_EQ(0, write_all(self->rec[1], b.data, b.len));
	}
	b.len = 0;
	for (i = 0; i < 3; i++)
		sb_alloc(&b, 2, me, t + 300 + i, 0x90000 + 0x100 * i, 3000,
			 (uint64_t)rate, ip + 0x100);
	sb_free(&b, me, t + 400, 0x90000);
	sb_free(&b, me, t + 401, 0xdead00);	/* never sampled */
	sb_lost_frees(&b, 2);
	/* another process's two blocks, then its exec: they are gone */
	sb_alloc(&b, 1, parent, t + 500, 0x70000, 5000, (uint64_t)rate, ip);
	sb_alloc(&b, 1, parent, t + 501, 0x71000, 5000, (uint64_t)rate, ip);
	sb_exec(&b, parent, t + 600);
	ASSERT_EQ(0, write_all(self->rec[1], b.data, b.len));
	usleep(1500000);	/* settled: 0.5 s after a read */

	for (round = 0; round < 2; round++) {
		ASSERT_EQ(0, get(self->port, "/debug/pprof/heap", &r));
		ASSERT_EQ(200, r.status);
		ASSERT_EQ(0, heap_sums(&r, v, &dflt));
		free(r.body);
		EXPECT_EQ(3, dflt);	/* inuse_space */
		EXPECT_EQ(llround(100 * sa), v[0][0]);
		EXPECT_EQ(llround(100 * 1000 * sa), v[0][1]);
		EXPECT_EQ(0, v[0][2]);
		EXPECT_EQ(0, v[0][3]);
		EXPECT_EQ(llround(3 * sb), v[1][0]);
		EXPECT_EQ(llround(3 * 3000 * sb), v[1][1]);
		EXPECT_EQ(llround(2 * sb), v[1][2]);
		EXPECT_EQ(llround(2 * 3000 * sb), v[1][3]);
	}
	ASSERT_EQ(0, get(self->port, "/debug/pprof/allocs", &r));
	ASSERT_EQ(200, r.status);
	ASSERT_EQ(0, heap_sums(&r, v, &dflt));
	EXPECT_EQ(1, dflt);	/* alloc_space */
	EXPECT_EQ(llround(100 * 1000 * sa), v[0][1]);
	EXPECT_EQ(llround(2 * 3000 * sb), v[1][3]);
	EXPECT_TRUE(resp_has_comment(&r, "heap: 2 FREE records lost"));
	/* the 100 frees of one stack, thread and size: one record */
	EXPECT_TRUE(resp_has_comment(&r, "heap: plabel serve keeps 2 blocks in use and 2 freed records standing for 101 allocations"));
	EXPECT_TRUE(resp_has_comment(&r, "sampled allocations: 103, frees: 102 (of blocks sampled before recording or before a fork: 1)"));
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/heap?seconds=0", &r));
	EXPECT_EQ(400, r.status);
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/heap?seconds=x", &r));
	EXPECT_EQ(400, r.status);
	free(r.body);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/heap?pid=1", &r));
	EXPECT_EQ(400, r.status);
	free(r.body);
	srv_stop(_metadata, self);
}

/*
 * heap?seconds=N: what changed over those seconds, as go tool pprof
 * -base would show it. Before the request: 2 alpha blocks. During it: one
 * of them freed, one beta block allocated. The delta has no alpha
 * allocations, alpha in use down by one block, and the beta block both
 * allocated and in use; the unchanged alpha block is in no sample.
 */
TEST_F(srv, heap_seconds_is_the_change_over_them)
{
	static const uint64_t ip = 0x401000;
	static struct sbuf b;
	const double rate = 4096;
	double sa = 1 / (1 - exp(-1000 / rate));
	double sb = 1 / (1 - exp(-3000 / rate));
	struct fetch f = { .path = "/debug/pprof/heap?seconds=2" };
	struct plabel_prof *p = NULL;
	const char *err = NULL;
	uint32_t me = (uint32_t)getpid();
	int64_t v[2][4];
	size_t dflt, i;
	uint64_t t;

	srv_heap_bytes = (uint64_t)rate;
	srv_start(_metadata, self, 0, 8);
	srv_heap_bytes = 0;
	t = mono_ns();
	b.len = 0;
	sb_alloc(&b, 1, me, t, 0x10000, 1000, (uint64_t)rate, ip);
	sb_alloc(&b, 1, me, t + 1, 0x20000, 1000, (uint64_t)rate, ip + 0x40);
	ASSERT_EQ(0, write_all(self->rec[1], b.data, b.len));
	usleep(1500000);	/* settled */

	f.port = self->port;
	ASSERT_EQ(0, pthread_create(&f.thr, NULL, fetch_thr, &f));
	usleep(700000);
	t = mono_ns();
	b.len = 0;
	sb_free(&b, me, t, 0x10000);
	sb_alloc(&b, 2, me, t + 1, 0x90000, 3000, (uint64_t)rate, ip + 0x100);
	ASSERT_EQ(0, write_all(self->rec[1], b.data, b.len));
	pthread_join(f.thr, NULL);
	ASSERT_EQ(0, f.ret);
	ASSERT_EQ(200, f.r.status);
	ASSERT_EQ(0, heap_sums(&f.r, v, &dflt));
	EXPECT_EQ(3, dflt);
	EXPECT_EQ(0, v[0][0]);
	EXPECT_EQ(0, v[0][1]);
	EXPECT_EQ(-llround(sa), v[0][2]);
	EXPECT_EQ(-llround(1000 * sa), v[0][3]);
	EXPECT_EQ(llround(sb), v[1][0]);
	EXPECT_EQ(llround(3000 * sb), v[1][1]);
	EXPECT_EQ(llround(sb), v[1][2]);
	EXPECT_EQ(llround(3000 * sb), v[1][3]);
	EXPECT_TRUE(resp_has_comment(&f.r, "heap: what changed over 2 s (seconds=2)"));
	ASSERT_EQ(0, plabel_prof_decode(f.r.body, f.r.len, &p, &err));
	/* the block at ip + 0x40, unchanged, is in no sample */
	for (i = 0; i < plabel_prof_num_samples(p); i++) {
		struct plabel_prof_sample_info si;

		plabel_prof_get_sample(p, i, &si);
		EXPECT_TRUE(si.values[0] || si.values[1] || si.values[2] ||
			    si.values[3]);
	}
	EXPECT_EQ(2, plabel_prof_num_samples(p));
	EXPECT_LE(1900000000LL, plabel_prof_duration_nanos(p));
	EXPECT_GE(3000000000LL, plabel_prof_duration_nanos(p));
	plabel_prof_free(p);
	free(f.r.body);
	srv_stop(_metadata, self);
}

TEST_F(srv, sanitized_labels)
{
	struct resp r;
	struct sums s;

	srv_start(_metadata, self, 1, 8);
	ASSERT_EQ(0, get(self->port,
			 "/debug/pprof/profile?seconds=1&label=span_id:r1", &r));
	ASSERT_EQ(200, r.status);
	ASSERT_EQ(0, sum_profile(&r, &s));
	free(r.body);
	EXPECT_LT(0, s.alpha);
	EXPECT_EQ(0, s.beta);
	EXPECT_LT(0, s.span_ids);
	EXPECT_EQ(0, s.request_ids);
	srv_stop(_metadata, self);
}

TEST_F(srv, too_many_requests_then_stop)
{
	struct fetch f[2] = {
		{ .path = "/debug/pprof/profile?seconds=5" },
		{ .path = "/debug/pprof/profile?seconds=5" },
	};
	struct resp r;
	char *ra;
	int i;

	srv_start(_metadata, self, 0, 2);
	for (i = 0; i < 2; i++) {
		f[i].port = self->port;
		ASSERT_EQ(0, pthread_create(&f[i].thr, NULL, fetch_thr, &f[i]));
	}
	usleep(300000);
	ASSERT_EQ(0, get(self->port, "/debug/pprof/profile?seconds=1", &r));
	EXPECT_EQ(503, r.status);
	ra = strcasestr(r.head, "\nRetry-After: ");
	ASSERT_NE(NULL, ra);
	EXPECT_LE(1, atoi(ra + 14));
	EXPECT_GE(6, atoi(ra + 14));
	free(r.body);
	/* the index still answers */
	ASSERT_EQ(0, get(self->port, "/debug/pprof/", &r));
	EXPECT_EQ(200, r.status);
	free(r.body);
	/* a stop answers the windows still open: 503, then exit 0 */
	srv_stop(_metadata, self);
	for (i = 0; i < 2; i++) {
		pthread_join(f[i].thr, NULL);
		ASSERT_EQ(0, f[i].ret);
		EXPECT_EQ(503, f[i].r.status);
		free(f[i].r.body);
	}
}

TEST_F(srv, stalled_and_oversized_clients)
{
	static char big[40000];
	struct fetch f = { .path = "/debug/pprof/profile?seconds=1" };
	struct pollfd p;
	struct resp r;
	uint64_t t0;
	char buf[256];
	int fd, big_fd;
	ssize_t n;

	srv_start(_metadata, self, 0, 8);
	/* half a request, then nothing */
	fd = dial(self->port);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, write_all(fd, "GET /debug/pprof/ HTTP/1.1\r\nHo", 30));
	/* headers over the connection's memory limit */
	big_fd = dial(self->port);
	ASSERT_LE(0, big_fd);
	memcpy(big, "GET /debug/pprof/ HTTP/1.1\r\nX-Big: ", 36);
	memset(big + 36, 'a', sizeof(big) - 36 - 4);
	memcpy(big + sizeof(big) - 4, "\r\n\r\n", 4);
	write_all(big_fd, big, sizeof(big));
	ASSERT_EQ(0, read_resp(big_fd, &r));
	EXPECT_LE(400, r.status);
	EXPECT_GT(500, r.status);
	free(r.body);
	close(big_fd);
	/* meanwhile profiles are served */
	f.port = self->port;
	fetch_thr(&f);
	ASSERT_EQ(0, f.ret);
	EXPECT_EQ(200, f.r.status);
	free(f.r.body);
	/* the stalled one is cut by the connection timeout */
	t0 = mono_ns();
	p.fd = fd;
	p.events = POLLIN;
	ASSERT_EQ(1, poll(&p, 1, 20000));
	n = read(fd, buf, sizeof(buf));
	EXPECT_GE(0, n);
	TH_LOG("stalled client cut after %.1f s more",
	       (mono_ns() - t0) / 1e9);
	close(fd);
	srv_stop(_metadata, self);
}

/* record --every through the same windows: files back to back */
/*
 * record --every 1s --duration 3.5 into dir over self->rec (its stream
 * written already), with heap_bytes and offcpu, the feeder started.
 */
static void every_start_cfg(struct __test_metadata *_metadata,
			    FIXTURE_DATA(srv) *self,
			    const struct plabel_serve_cfg *cfg)
{
	self->child = fork();
	ASSERT_LE(0, self->child);
	if (!self->child) {
		close(self->rec[1]);
		_exit(plabel_serve_run(cfg, self->rec[0], -1, NULL));
	}
	close(self->rec[0]);
	self->f.fd = self->rec[1];
	self->f.stop = 0;
	ASSERT_EQ(0, pthread_create(&self->f.thr, NULL, feed, &self->f));
}

static void every_start(struct __test_metadata *_metadata,
			FIXTURE_DATA(srv) *self, const char *dir,
			uint64_t heap_bytes, int offcpu)
{
	struct plabel_serve_cfg cfg = {
		.every_ns = 1000000000ULL,
		.out_dir = dir,
		.duration_ns = 3500000000ULL,
		.heap_bytes = heap_bytes,
		.offcpu = offcpu,
	};

	every_start_cfg(_metadata, self, &cfg);
}

/*
 * record --every 1s --duration 3.5 (with --heap): 4 intervals, each its
 * cpu-STAMP and threadcreate-STAMP; with --heap a heap-STAMP at each
 * interval's end, all of them holding the 3 blocks allocated at the start
 * (one freed), the same stamps as the others.
 */
TEST_F(srv, rotating_files)
{
	char dir[] = "/tmp/plabel-every-XXXXXX";
	static struct sbuf b;
	int ncpu = 0, ntc = 0, nheap = 0, st = -1;
	int64_t total = 0, sum_a = 0, sum_b = 0, v[2][4];
	double sb3 = 1 / (1 - exp(-3000 / 4096.0));
	char stamps[2][8][32];
	int nst[2] = { 0, 0 };
	struct dirent *de;
	uint64_t t0;
	size_t dflt;
	int i;
	DIR *d;

	ASSERT_NE(NULL, mkdtemp(dir));
	ASSERT_EQ(0, pipe(self->rec));
	b.len = 0;
	sb_stream(&b, 10000000);
	sb_labelset(&b, 1, kv_alpha, 2);
	sb_labelset(&b, 2, kv_beta, 1);
	t0 = mono_ns();
	/* (this process's: a pid that is gone would be pruned) */
	for (i = 0; i < 3; i++)
		sb_alloc(&b, 2, getpid(), t0 + i, 0x90000 + 0x100 * i, 3000,
			 4096, 0x501000);
	sb_free(&b, getpid(), t0 + 10, 0x90100);
	ASSERT_EQ(0, write_all(self->rec[1], b.data, b.len));
	every_start(_metadata, self, dir, 4096, 0);
	ASSERT_EQ(self->child, waitpid(self->child, &st, 0));
	self->child = 0;
	self->f.stop = 1;
	pthread_join(self->f.thr, NULL);
	close(self->rec[1]);
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	/* 3.5 s, and the last window's records to wait for */
	EXPECT_LE(3500000000ULL, mono_ns() - t0);
	EXPECT_GE(8000000000ULL, mono_ns() - t0);

	d = opendir(dir);
	ASSERT_NE(NULL, d);
	while ((de = readdir(d))) {
		char path[512];
		struct resp r = { 0 };
		struct sums s;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		TH_LOG("%s", de->d_name);
		/* cpu-YYYYmmddTHHMMSS.pb.gz, threadcreate-... */
		EXPECT_EQ(0, strcmp(de->d_name + strlen(de->d_name) - 6, ".pb.gz"));
		EXPECT_EQ('T', strchr(de->d_name, '-')[9]);
		ASSERT_EQ(0, read_resp_file(path, &r));
		ASSERT_EQ(0, sum_profile(&r, &s));
		if (!strncmp(de->d_name, "heap-", 5)) {
			ASSERT_EQ(0, heap_sums(&r, v, &dflt));
			EXPECT_EQ(llround(3 * sb3), v[1][0]);
			EXPECT_EQ(llround(2 * 3000 * sb3), v[1][3]);
			nheap++;
		}
		if (nst[0] < 8 && !strncmp(de->d_name, "cpu-", 4))
			snprintf(stamps[0][nst[0]++], 32, "%s", de->d_name + 4);
		if (nst[1] < 8 && !strncmp(de->d_name, "heap-", 5))
			snprintf(stamps[1][nst[1]++], 32, "%s", de->d_name + 5);
		free(r.body);
		unlink(path);
		if (!strncmp(de->d_name, "cpu-", 4)) {
			ncpu++;
			total += s.total;
			sum_a += s.alpha;
			sum_b += s.beta;
		} else if (!strncmp(de->d_name, "threadcreate-", 13)) {
			ntc++;
		}
	}
	closedir(d);
	rmdir(dir);
	EXPECT_EQ(4, ncpu);
	EXPECT_EQ(4, ntc);
	EXPECT_EQ(4, nheap);
	/* each heap file is stamped as one interval's cpu file */
	for (i = 0; i < nst[1]; i++) {
		int k, found = 0;

		for (k = 0; k < nst[0]; k++)
			found |= !strcmp(stamps[1][i], stamps[0][k]);
		EXPECT_TRUE(found);
	}
	/* 3.5 s of 4 samples of 10 ms each per 10 ms */
	TH_LOG("total %lld alpha %lld beta %lld", (long long)total,
	       (long long)sum_a, (long long)sum_b);
	EXPECT_LE(10000000000LL, total);
	EXPECT_GE(15000000000LL, total);
	EXPECT_LE(sum_b * 25 / 10, sum_a);
	EXPECT_GE(sum_b * 35 / 10, sum_a);
}

/* The default values of a profile file, summed; -1 when unreadable. */
static int64_t file_total(const char *path)
{
	struct resp r = { 0 };
	struct sums s;

	if (read_resp_file(path, &r))
		return -1;
	if (sum_profile(&r, &s))
		s.total = -1;
	free(r.body);
	return s.total;
}

/*
 * For a server started by every_start*(): two waits of set 1 in this
 * process, once the server has surely started (one stamped before its
 * first window would be in none): a sleep from 0.2 s to 2.2 s, its END
 * written once that time has come (in the third interval), and an I/O
 * wait from 0.3 to 0.4 s of another thread. Then the server's end:
 * exit status 0.
 */
static void every_waits(struct __test_metadata *_metadata,
			FIXTURE_DATA(srv) *self)
{
	static const uint64_t ips[] = { 0x401000 };
	uint32_t me = (uint32_t)getpid();
	struct plabel_rec_sample *s;
	static struct sbuf b;
	int st = -1;
	uint64_t t0;

	usleep(300000);
	t0 = mono_ns();
	b.len = 0;
	s = sb_sample(&b, PLABEL_REC_OFFCPU, 1, me, ips, 0, 1);
	s->tid = me;
	s->time_ns = t0 + 200000000ULL;
	s->wait_kind = PLABEL_WAIT_SLEEP;
	s = sb_sample(&b, PLABEL_REC_OFFCPU, 1, me, ips, 0, 1);
	s->tid = me + 1;
	s->time_ns = t0 + 300000000ULL;
	s->wait_kind = PLABEL_WAIT_IO;
	sb_offcpu_end(&b, me, me + 1, t0 + 300000000ULL, t0 + 400000000ULL);
	ASSERT_EQ(0, write_all(self->rec[1], b.data, b.len));
	/* the long wait's END, once it has come: in the third interval */
	while (mono_ns() < t0 + 2300000000ULL)
		usleep(20000);
	b.len = 0;
	sb_offcpu_end(&b, me, me, t0 + 200000000ULL, t0 + 2200000000ULL);
	ASSERT_EQ(0, write_all(self->rec[1], b.data, b.len));
	ASSERT_EQ(self->child, waitpid(self->child, &st, 0));
	self->child = 0;
	self->f.stop = 1;
	pthread_join(self->f.thr, NULL);
	close(self->rec[1]);
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
}

/*
 * record --every 1s --off-cpu: offcpu-STAMP and wall-STAMP per interval,
 * each wait in the interval it ended in, whole: one of 0.1 s within the
 * first, one of 2 s from the first to the third (its END written when
 * it comes, after a window opened that never saw its start).
 */
TEST_F(srv, rotating_files_with_waits)
{
	char dir[] = "/tmp/plabel-every-XXXXXX";
	static struct sbuf b;
	int64_t got, total = 0, most = 0;
	int noff = 0, nwall = 0;
	struct dirent *de;
	DIR *d;

	ASSERT_NE(NULL, mkdtemp(dir));
	ASSERT_EQ(0, pipe(self->rec));
	b.len = 0;
	sb_stream(&b, 10000000);
	sb_labelset(&b, 1, kv_alpha, 2);
	ASSERT_EQ(0, write_all(self->rec[1], b.data, b.len));
	every_start(_metadata, self, dir, 0, 1);
	every_waits(_metadata, self);

	d = opendir(dir);
	ASSERT_NE(NULL, d);
	while ((de = readdir(d))) {
		char path[512];

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!strncmp(de->d_name, "offcpu-", 7)) {
			got = file_total(path);
			TH_LOG("%s: %lld ns off-CPU", de->d_name, (long long)got);
			noff++;
			total += got;
			if (got > most)
				most = got;
		} else if (!strncmp(de->d_name, "wall-", 5)) {
			nwall++;
		}
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
	EXPECT_EQ(4, noff);
	EXPECT_EQ(4, nwall);
	EXPECT_EQ(2100000000LL, total);
	EXPECT_EQ(2000000000LL, most);
}

/* A gzipped file's text (NUL-terminated, malloc()ed), or NULL. */
static char *read_gz_text(const char *path)
{
	gzFile f = gzopen(path, "rb");
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	int n;

	if (!f || !buf) {
		if (f)
			gzclose(f);
		free(buf);
		return NULL;
	}
	while ((n = gzread(f, buf + len, cap - len - 1)) > 0) {
		len += n;
		if (cap - len < 2) {
			char *nb = realloc(buf, cap * 2);

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	gzclose(f);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[len] = 0;
	return buf;
}

static int count_str(const char *s, const char *what)
{
	int n = 0;

	while ((s = strstr(s, what))) {
		n++;
		s += strlen(what);
	}
	return n;
}

/*
 * record --every 1s --timeline --timeline-label worker=alpha: a
 * timeline-STAMP.json.gz beside each interval's cpu file, each with that
 * interval's samples of the alpha threads only, and each wait in the
 * interval it ended in (the 2 s one in the third, never in the first).
 */
TEST_F(srv, rotating_timelines)
{
	char dir[] = "/tmp/plabel-every-XXXXXX";
	struct plabel_serve_cfg cfg = {
		.every_ns = 1000000000ULL,
		.out_dir = dir,
		.duration_ns = 3500000000ULL,
		.timeline = 1,
		.timeline_label = "worker=alpha",
	};
	char cpu_stamps[8][32], tl_stamps[8][32], long_stamp[32] = "";
	int ncpu = 0, ntl = 0, sleeps = 0, ios = 0, i;
	static struct sbuf b;
	struct dirent *de;
	DIR *d;

	ASSERT_NE(NULL, mkdtemp(dir));
	ASSERT_EQ(0, pipe(self->rec));
	b.len = 0;
	sb_stream(&b, 10000000);
	sb_labelset(&b, 1, kv_alpha, 2);
	sb_labelset(&b, 2, kv_beta, 1);
	ASSERT_EQ(0, write_all(self->rec[1], b.data, b.len));
	every_start_cfg(_metadata, self, &cfg);
	every_waits(_metadata, self);

	d = opendir(dir);
	ASSERT_NE(NULL, d);
	while ((de = readdir(d))) {
		char path[512], *text;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!strncmp(de->d_name, "cpu-", 4) && ncpu < 8)
			snprintf(cpu_stamps[ncpu++], 32, "%.15s",
				 de->d_name + 4);
		if (!strncmp(de->d_name, "timeline-", 9) && ntl < 8) {
			EXPECT_EQ(0, strcmp(de->d_name + 24, ".json.gz"));
			snprintf(tl_stamps[ntl++], 32, "%.15s",
				 de->d_name + 9);
			text = read_gz_text(path);
			ASSERT_NE(NULL, text);
			TH_LOG("%s: %zu bytes, %d samples", de->d_name,
			       strlen(text), count_str(text, "\"sample\""));
			/* alpha's samples, none of beta's process */
			EXPECT_LT(20, count_str(text, "\"name\":\"sample\""));
			EXPECT_EQ(NULL, strstr(text, "\"pid\":" "4343"));
			EXPECT_NE(NULL, strstr(text, "\"pid\":" "4242"));
			EXPECT_NE(NULL, strstr(text, "\"timeline_label\":\"worker\""));
			if (count_str(text, "off-CPU (sleep)")) {
				snprintf(long_stamp, sizeof(long_stamp),
					 "%.15s", de->d_name + 9);
				/* from 0.2 s to 2.2 s after t0: whole */
				EXPECT_TRUE(strstr(text, "\"dur\":2000000") ||
					    strstr(text, "\"dur\":1999999"));
			}
			sleeps += count_str(text, "off-CPU (sleep)");
			ios += count_str(text, "off-CPU (io)");
			free(text);
		}
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
	EXPECT_EQ(4, ncpu);
	EXPECT_EQ(4, ntl);
	EXPECT_EQ(1, sleeps);
	EXPECT_EQ(1, ios);
	/* each timeline is stamped as a cpu file; the long wait's not first */
	for (i = 0; i < ntl; i++) {
		int k, found = 0;

		for (k = 0; k < ncpu; k++)
			found |= !strcmp(tl_stamps[i], cpu_stamps[k]);
		EXPECT_TRUE(found);
	}
	for (i = 1; i < ncpu; i++)
		if (strcmp(cpu_stamps[i], cpu_stamps[0]) < 0)
			memcpy(cpu_stamps[0], cpu_stamps[i], 32);
	EXPECT_LT(strcmp(cpu_stamps[0], long_stamp), 0);
}

/* libmicrohttpd on a Unix socket, as --unix gives it */
TEST(unix_socket)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	static const char req[] =
		"GET /debug/pprof/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	int lfd, fd, rec[2], st = -1;
	struct resp r;
	pid_t child;

	signal(SIGPIPE, SIG_IGN);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "/tmp/plabel-serve-%d.sock",
		 (int)getpid());
	unlink(sun.sun_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_LE(0, lfd);
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&sun, sizeof(sun)));
	ASSERT_EQ(0, listen(lfd, 4));
	ASSERT_EQ(0, pipe(rec));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct plabel_serve_cfg cfg = {
			.max_seconds = 5,
			.max_requests = 8,
		};

		close(rec[1]);
		_exit(plabel_serve_run(&cfg, rec[0], lfd, "unix"));
	}
	close(lfd);
	close(rec[0]);
	usleep(300000);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, connect(fd, (struct sockaddr *)&sun, sizeof(sun)));
	ASSERT_EQ(0, write_all(fd, req, sizeof(req) - 1));
	ASSERT_EQ(0, read_resp(fd, &r));
	close(fd);
	EXPECT_EQ(200, r.status);
	free(r.body);
	kill(child, SIGTERM);
	ASSERT_EQ(child, waitpid(child, &st, 0));
	close(rec[1]);
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	unlink(sun.sun_path);
}

TEST_HARNESS_MAIN
