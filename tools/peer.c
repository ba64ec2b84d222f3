// SPDX-License-Identifier: GPL-2.0
/*
 * Who is on the other end of a loopback TCP connection.
 *
 * A client on this host has a socket whose local address is our peer's
 * and whose remote address is our local one. The kernel's socket
 * diagnostics (NETLINK_SOCK_DIAG, one exact lookup, no privilege needed)
 * say which user owns it, as ss -e shows.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "peer.h"

/* Copy sa's address and port into the diag id's fields. */
static int peer_put(const struct sockaddr *sa, __be32 addr[4], __be16 *port,
		    int family)
{
	if (sa->sa_family != family)
		return -EAFNOSUPPORT;
	if (family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		addr[0] = in->sin_addr.s_addr;
		*port = in->sin_port;
	} else {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		memcpy(addr, &in6->sin6_addr, 16);
		*port = in6->sin6_port;
	}
	return 0;
}

/* sa as an AF_INET address, when it is an IPv4-mapped IPv6 one. */
static int peer_unmap(const struct sockaddr *sa, struct sockaddr_in *in)
{
	const struct sockaddr_in6 *in6 = (const void *)sa;

	if (!IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
		return 0;
	memset(in, 0, sizeof(*in));
	in->sin_family = AF_INET;
	in->sin_port = in6->sin6_port;
	memcpy(&in->sin_addr, &in6->sin6_addr.s6_addr[12], 4);
	return 1;
}

int plabel_peer_uid(const struct sockaddr *local, const struct sockaddr *peer,
		    uid_t *uid)
{
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 req;
	} msg;
	union {
		struct nlmsghdr nlh;
		char buf[1024];
	} ans;
	struct timeval tv = { .tv_sec = 1 };
	int family = peer->sa_family, fd, ret = -EPROTO;
	ssize_t n;

	struct sockaddr_in l4, p4;

	if (family != AF_INET && family != AF_INET6)
		return -EAFNOSUPPORT;
	/* an IPv4 client of an IPv6 socket: its own socket is AF_INET */
	if (family == AF_INET6 && local->sa_family == AF_INET6 &&
	    peer_unmap(local, &l4) && peer_unmap(peer, &p4)) {
		local = (const struct sockaddr *)&l4;
		peer = (const struct sockaddr *)&p4;
		family = AF_INET;
	}
	memset(&msg, 0, sizeof(msg));
	msg.nlh.nlmsg_len = sizeof(msg);
	msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	msg.nlh.nlmsg_flags = NLM_F_REQUEST;
	msg.nlh.nlmsg_seq = 1;
	msg.req.sdiag_family = family;
	msg.req.sdiag_protocol = IPPROTO_TCP;
	msg.req.idiag_states = ~0U;
	/* the client's socket: its source is our peer, its destination us */
	if (peer_put(peer, msg.req.id.idiag_src, &msg.req.id.idiag_sport,
		     family) ||
	    peer_put(local, msg.req.id.idiag_dst, &msg.req.id.idiag_dport,
		     family))
		return -EAFNOSUPPORT;
	msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (sendto(fd, &msg, sizeof(msg), 0, (struct sockaddr *)&nl,
		   sizeof(nl)) != (ssize_t)sizeof(msg)) {
		ret = -errno;
		goto out;
	}
	n = recv(fd, &ans, sizeof(ans), 0);
	if (n < 0) {
		ret = -errno;
		goto out;
	}
	if ((size_t)n < sizeof(struct nlmsghdr) || ans.nlh.nlmsg_len > n ||
	    ans.nlh.nlmsg_seq != 1)
		goto out;
	if (ans.nlh.nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *e = NLMSG_DATA(&ans.nlh);

		if (ans.nlh.nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error)
			ret = e->error;
		goto out;
	}
	if (ans.nlh.nlmsg_type == SOCK_DIAG_BY_FAMILY &&
	    ans.nlh.nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
		const struct inet_diag_msg *m = NLMSG_DATA(&ans.nlh);

		/*
		 * The kernel found this exact four-tuple; check it anyway.
		 * A socket no process holds (closed, or a time-wait
		 * minisocket, both reported with uid 0) names nobody.
		 */
		if (!m->idiag_inode) {
			ret = -ENOTCONN;
		} else if (m->idiag_family == family &&
		    m->id.idiag_sport == msg.req.id.idiag_sport &&
		    m->id.idiag_dport == msg.req.id.idiag_dport) {
			*uid = m->idiag_uid;
			ret = 0;
		}
	}
out:
	close(fd);
	return ret;
}
