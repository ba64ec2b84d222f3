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

static void p_reap(pid_t child)
{
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

FIXTURE(peer) {
	int lfd;
	struct sockaddr_storage srv;
};

FIXTURE_SETUP(peer)
{
	if (geteuid())
		SKIP(return, "needs root to connect as another user");
	self->lfd = -1;
}

FIXTURE_TEARDOWN(peer)
{
	if (self->lfd >= 0)
		close(self->lfd);
}

TEST_F(peer, ipv4_names_the_clients_user)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_storage l, p;
	uid_t uid = 1;
	pid_t child;
	int fd;

	self->lfd = p_listen((struct sockaddr *)&a, sizeof(a), &self->srv);
	ASSERT_LE(0, self->lfd);
	fd = p_accept_from(self->lfd, &self->srv, AF_INET, P_NOBODY, &child,
			   &l, &p);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, plabel_peer_uid((struct sockaddr *)&l,
				     (struct sockaddr *)&p, &uid));
	EXPECT_EQ(P_NOBODY, uid);
	/* our own end is root's: the lookup is of the client's end */
	EXPECT_EQ(0, plabel_peer_uid((struct sockaddr *)&p,
				     (struct sockaddr *)&l, &uid));
	EXPECT_EQ(0, uid);
	p_reap(child);
	close(fd);
}

TEST_F(peer, root_client_is_root)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_storage l, p;
	uid_t uid = 1;
	pid_t child;
	int fd;

	self->lfd = p_listen((struct sockaddr *)&a, sizeof(a), &self->srv);
	ASSERT_LE(0, self->lfd);
	fd = p_accept_from(self->lfd, &self->srv, AF_INET, 0, &child, &l, &p);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, plabel_peer_uid((struct sockaddr *)&l,
				     (struct sockaddr *)&p, &uid));
	EXPECT_EQ(0, uid);
	p_reap(child);
	close(fd);
}

TEST_F(peer, ipv6_names_the_clients_user)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6,
				  .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct sockaddr_storage l, p;
	uid_t uid = 1;
	pid_t child;
	int fd;

	self->lfd = p_listen((struct sockaddr *)&a, sizeof(a), &self->srv);
	if (self->lfd < 0)
		SKIP(return, "no IPv6 loopback here");
	fd = p_accept_from(self->lfd, &self->srv, AF_INET6, P_NOBODY, &child,
			   &l, &p);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, plabel_peer_uid((struct sockaddr *)&l,
				     (struct sockaddr *)&p, &uid));
	EXPECT_EQ(P_NOBODY, uid);
	p_reap(child);
	close(fd);
}

TEST_F(peer, ipv4_client_of_an_ipv6_listener)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6 };
	struct sockaddr_storage l, p;
	uid_t uid = 1;
	pid_t child;
	int fd;

	inet_pton(AF_INET6, "::ffff:127.0.0.1", &a.sin6_addr);
	self->lfd = p_listen((struct sockaddr *)&a, sizeof(a), &self->srv);
	if (self->lfd < 0)
		SKIP(return, "no IPv6 here");
	fd = p_accept_from(self->lfd, &self->srv, AF_INET, P_NOBODY, &child,
			   &l, &p);
	ASSERT_LE(0, fd);
	ASSERT_EQ(AF_INET6, p.ss_family);
	EXPECT_EQ(0, plabel_peer_uid((struct sockaddr *)&l,
				     (struct sockaddr *)&p, &uid));
	EXPECT_EQ(P_NOBODY, uid);
	p_reap(child);
	close(fd);
}

TEST_F(peer, gone_client_names_nobody)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_storage l, p;
	uid_t uid = 12345;
	pid_t child;
	int fd, ret;

	self->lfd = p_listen((struct sockaddr *)&a, sizeof(a), &self->srv);
	ASSERT_LE(0, self->lfd);
	fd = p_accept_from(self->lfd, &self->srv, AF_INET, P_NOBODY, &child,
			   &l, &p);
	ASSERT_LE(0, fd);
	p_reap(child);	/* its socket is closed: no process holds it */
	ret = plabel_peer_uid((struct sockaddr *)&l, (struct sockaddr *)&p,
			      &uid);
	EXPECT_TRUE(ret == -ENOTCONN || ret == -ENOENT);
	EXPECT_EQ(12345, uid);
	close(fd);
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
