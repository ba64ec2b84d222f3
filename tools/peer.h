/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLABEL_TOOLS_PEER_H
#define PLABEL_TOOLS_PEER_H

#include <sys/socket.h>
#include <sys/types.h>

/*
 * The user owning the socket at the other end of the TCP connection
 * local <-> peer (both AF_INET or both AF_INET6), when that socket is on
 * this host, in this network namespace, and held open by a process.
 * 0, or -ENOENT when there is no such socket (a remote peer, or one
 * that has gone), -ENOTCONN when no process holds it any more, another
 * -errno when the kernel could not be asked.
 */
int plabel_peer_uid(const struct sockaddr *local, const struct sockaddr *peer,
		    uid_t *uid);

#endif /* PLABEL_TOOLS_PEER_H */
