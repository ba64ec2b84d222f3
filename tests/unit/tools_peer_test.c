// SPDX-License-Identifier: GPL-2.0
/*
 * plabel_peer_uid() (tools/peer.c): the owner of the client's end of a
 * loopback TCP connection, as the kernel's socket diagnostics say, over
 * IPv4, IPv6 and IPv4 on an IPv6 listener; nobody for a client that has
 * gone or a four-tuple no socket has. Needs root, to connect as another
 * user.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest/kselftest_harness.h"

#include "../../tools/peer.h"

#define P_NOBODY	65534

/* A listener on addr (port 0), its address in *got. */
static int p_listen(const struct sockaddr *addr, socklen_t len,
		    struct sockaddr_storage *got)
{
	socklen_t glen = sizeof(*got);
	int fd = socket(addr->sa_family, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, addr, len) || listen(fd, 4) ||
	    getsockname(fd, (struct sockaddr *)got, &glen))
		return -1;
	return fd;
}

/*
 * A child of uid connects to srv over family and waits to be killed;
 * the accepted socket, its local and peer address in *l and *p.
 */
static int p_accept_from(int lfd, const struct sockaddr_storage *srv,
			 int family, uid_t uid, pid_t *child,
			 struct sockaddr_storage *l, struct sockaddr_storage *p)
{
	socklen_t len = sizeof(*l);
	int pipefd[2], fd;
	char c;

	if (pipe(pipefd))
		return -1;
	*child = fork();
	if (*child < 0)
		return -1;
	if (!*child) {
		struct sockaddr_storage to = *srv;
		socklen_t tolen = sizeof(struct sockaddr_in6);
		int s;

		if (family == AF_INET && srv->ss_family == AF_INET6) {
			/* IPv4 to an IPv6 listener on ::ffff:127.0.0.1 */
			struct sockaddr_in *in = (void *)&to;

			in->sin_family = AF_INET;
			in->sin_port = ((struct sockaddr_in6 *)srv)->sin6_port;
			in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		}
		if (to.ss_family == AF_INET)
			tolen = sizeof(struct sockaddr_in);
		if (setresuid(uid, uid, uid))
			_exit(1);
		s = socket(family, SOCK_STREAM, 0);	/* uid's socket */
		if (s < 0 || connect(s, (struct sockaddr *)&to, tolen))
			_exit(1);
		if (write(pipefd[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(pipefd[1]);
	if (read(pipefd[0], &c, 1) != 1) {
		close(pipefd[0]);
		return -1;
	}
	close(pipefd[0]);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0 || getsockname(fd, (struct sockaddr *)l, &len))
		return -1;
	len = sizeof(*p);
	if (getpeername(fd, (struct sockaddr *)p, &len))
		return -1;
	return fd;
}

FIXTURE(peer) {
	int lfd, fd;
	pid_t child;
	struct sockaddr_storage srv, l, p;	/* listener; accepted ends */
};

FIXTURE_SETUP(peer)
{
	self->lfd = self->fd = -1;
	self->child = 0;
	if (geteuid())
		SKIP(return, "needs root to connect as another user");
}

FIXTURE_TEARDOWN(peer)
{
	if (self->child > 0) {
		kill(self->child, SIGKILL);
		waitpid(self->child, NULL, 0);
	}
	if (self->fd >= 0)
		close(self->fd);
	if (self->lfd >= 0)
		close(self->lfd);
}

/*
 * A listener on addr, and a connection to it from a child of uid over
 * family, accepted: 0, or -1 when addr cannot be listened on here.
 */
static int p_connect(struct __test_metadata *_metadata,
		     FIXTURE_DATA(peer) *self, const char *addr, int family,
		     uid_t uid)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in a4 = { .sin_family = AF_INET };

	if (inet_pton(AF_INET, addr, &a4.sin_addr) == 1)
		self->lfd = p_listen((struct sockaddr *)&a4, sizeof(a4),
				     &self->srv);
	else if (inet_pton(AF_INET6, addr, &a6.sin6_addr) == 1)
		self->lfd = p_listen((struct sockaddr *)&a6, sizeof(a6),
				     &self->srv);
	if (self->lfd < 0)
		return -1;
	self->fd = p_accept_from(self->lfd, &self->srv, family, uid,
				 &self->child, &self->l, &self->p);
	EXPECT_LE(0, self->fd);
	return self->fd < 0 ? -1 : 0;
}

/* plabel_peer_uid() of the accepted connection: its result, *uid */
static int p_uid(FIXTURE_DATA(peer) *self, uid_t *uid)
{
	return plabel_peer_uid((struct sockaddr *)&self->l,
			       (struct sockaddr *)&self->p, uid);
}

TEST_F(peer, ipv4_names_the_clients_user)
{
	uid_t uid = 1;

	ASSERT_EQ(0, p_connect(_metadata, self, "127.0.0.1", AF_INET,
			       P_NOBODY));
	EXPECT_EQ(0, p_uid(self, &uid));
	EXPECT_EQ(P_NOBODY, uid);
	/* our own end is root's: the lookup is of the client's end */
	EXPECT_EQ(0, plabel_peer_uid((struct sockaddr *)&self->p,
				     (struct sockaddr *)&self->l, &uid));
	EXPECT_EQ(0, uid);
}

TEST_F(peer, root_client_is_root)
{
	uid_t uid = 1;

	ASSERT_EQ(0, p_connect(_metadata, self, "127.0.0.1", AF_INET, 0));
	EXPECT_EQ(0, p_uid(self, &uid));
	EXPECT_EQ(0, uid);
}

TEST_F(peer, ipv6_names_the_clients_user)
{
	uid_t uid = 1;

	if (p_connect(_metadata, self, "::1", AF_INET6, P_NOBODY))
		SKIP(return, "no IPv6 loopback here");
	EXPECT_EQ(0, p_uid(self, &uid));
	EXPECT_EQ(P_NOBODY, uid);
}

TEST_F(peer, ipv4_client_of_an_ipv6_listener)
{
	uid_t uid = 1;

	if (p_connect(_metadata, self, "::ffff:127.0.0.1", AF_INET,
		      P_NOBODY))
		SKIP(return, "no IPv6 here");
	ASSERT_EQ(AF_INET6, self->p.ss_family);
	EXPECT_EQ(0, p_uid(self, &uid));
	EXPECT_EQ(P_NOBODY, uid);
}

TEST_F(peer, gone_client_names_nobody)
{
	uid_t uid = 12345;
	int ret;

	ASSERT_EQ(0, p_connect(_metadata, self, "127.0.0.1", AF_INET,
			       P_NOBODY));
	/* its socket is closed: no process holds it */
	kill(self->child, SIGKILL);
	waitpid(self->child, NULL, 0);
	self->child = 0;
	ret = p_uid(self, &uid);
	EXPECT_TRUE(ret == -ENOTCONN || ret == -ENOENT);
	EXPECT_EQ(12345, uid);
}

TEST_F(peer, unknown_tuple_is_enoent)
{
	struct sockaddr_in l = { .sin_family = AF_INET, .sin_port = htons(1),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in p = { .sin_family = AF_INET, .sin_port = htons(2),
				 .sin_addr.s_addr = htonl(0x7f000002) };
	struct sockaddr_in6 p6 = { .sin6_family = AF_INET6 };
	struct sockaddr_un { sa_family_t f; char path[8]; } u = { AF_UNIX, "" };
	uid_t uid = 12345;

	EXPECT_EQ(-ENOENT, plabel_peer_uid((struct sockaddr *)&l,
					   (struct sockaddr *)&p, &uid));
	EXPECT_EQ(-EAFNOSUPPORT, plabel_peer_uid((struct sockaddr *)&l,
						 (struct sockaddr *)&p6,
						 &uid));
	EXPECT_EQ(-EAFNOSUPPORT, plabel_peer_uid((struct sockaddr *)&u,
						 (struct sockaddr *)&u, &uid));
	EXPECT_EQ(12345, uid);
}

TEST_HARNESS_MAIN
