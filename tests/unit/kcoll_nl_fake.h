/* SPDX-License-Identifier: MIT */
/*
 * kcoll_nl_fake.c: a model of the module's generic netlink family (and of
 * nlctrl's family lookup) for host tests of daemon/, written from
 * uapi/linux/kcoll_netlink.h. Linking it into a program replaces
 * sendmsg() and recvmsg() on netlink sockets, in the program and in
 * libnl (the executable's definitions come first): requests are answered
 * the way the kernel does (replies, multi-part dumps ending in
 * NLMSG_DONE, acks and errors with an extended-ack message, capped),
 * one datagram per reply; other sockets go to the real system calls.
 * setsockopt() joining or leaving a multicast group is recorded only.
 *
 * The environment sets the initial state, so that the real kcollctl and
 * kcolld linked with it can be run from a shell test:
 *	KC_FAKE_ABSENT=1	no family "kcoll" (module not loaded)
 *	KC_FAKE_UNPRIV=1	TUNABLE_SET fails with -EPERM
 */
#ifndef KCOLL_NL_FAKE_H
#define KCOLL_NL_FAKE_H

#include <stdbool.h>
#include <stddef.h>

#define FAKE_FAMILY_ID		0x21
#define FAKE_EVENTS_GROUP	9
#define FAKE_NOTIFY_GROUP	0x10	/* nlctrl "notify" */

struct nl_msg;

struct fake_state {
	bool absent;		/* family "kcoll" not registered */
	bool unpriv;		/* TUNABLE_SET: -EPERM */
	int dump_error;		/* non-zero: COMM_GET dumps end with it */
	bool silent;		/* requests get no answer at all */
	int enobufs;		/* next recvmsg()s on any socket: ENOBUFS */
	unsigned int requests;	/* kcoll requests received */
	unsigned int sets;	/* successful TUNABLE_SETs */
};

extern struct fake_state fake;

/* Back to the environment's initial state and default tunables; drops
 * every queued datagram and recorded membership. */
void fake_reset(void);
/* A tunable's current value, NULL if unknown. */
const char *fake_tunable(const char *name);
/* Queue @msg (not consumed) as one datagram for socket @fd. */
void fake_queue_msg(int fd, struct nl_msg *msg);
/* Queue an nlctrl NEWFAMILY (@added) or DELFAMILY notification. */
void fake_queue_ctrl(int fd, bool added, const char *name);
/* Whether socket @fd joined multicast group @group. */
bool fake_member(int fd, unsigned int group);
/* Datagrams waiting for @fd. */
size_t fake_pending(int fd);

#endif /* KCOLL_NL_FAKE_H */
