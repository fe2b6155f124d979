/* SPDX-License-Identifier: MIT */
/*
 * Netlink messages of the kcoll family into the plain structs of
 * kc_model.h. No socket: the functions take a received (or, in the unit
 * tests, hand-built) message. Attributes this version does not know are
 * ignored; known ones with a wrong type or length make the message
 * -EINVAL. Return 0 or a negative errno.
 */
#ifndef KC_NLPARSE_H
#define KC_NLPARSE_H

#include <errno.h>
#include <linux/netlink.h>

#include "kc_model.h"

struct nlattr;

/* A STATS nest. */
int kc_parse_stats(struct nlattr *nest, struct kc_stats *st);
/* KCOLL_CMD_DEV_GET reply (DEV_NAME required). */
int kc_parse_dev_msg(struct nlmsghdr *nlh, struct kc_dev *d);
/* KCOLL_CMD_COMM_GET reply (COMM_ID required); kc_comm_free() after. */
int kc_parse_comm_msg(struct nlmsghdr *nlh, struct kc_comm *c);
/* KCOLL_CMD_STATS_GET reply; kc_node_stats_free() after. */
int kc_parse_stats_msg(struct nlmsghdr *nlh, struct kc_node_stats *ns);
/*
 * KCOLL_CMD_TUNABLE_GET reply: TUNABLE_NAME and TUNABLE_VALUE at the top
 * level, or any number of TUNABLE nests of them. Appends to *@arr (free()
 * it), *@n counts.
 */
int kc_parse_tunables_msg(struct nlmsghdr *nlh, struct kc_tunable **arr,
			  size_t *n);
/* A multicast event (any KCOLL_CMD_EV_*); kc_event_free() after. */
int kc_parse_event_msg(struct nlmsghdr *nlh, struct kc_event *ev);

/*
 * An nlctrl notification (CTRL_CMD_NEWFAMILY, CTRL_CMD_DELFAMILY, ...):
 * its command, family name and id (0 if absent).
 */
int kc_parse_ctrl_msg(struct nlmsghdr *nlh, uint8_t *cmd, char *name,
		      size_t len, uint16_t *id);

/*
 * A negative errno as the kernel may send it, kept within what an errno
 * can be: 0 stays 0, anything positive or below -4095 (no errno; negating
 * INT_MIN is undefined) becomes -EPROTO.
 */
static inline int kc_errno_sane(int e)
{
	return (e > 0 || e < -4095) ? -EPROTO : e;
}

/*
 * An NLMSG_ERROR message: *@error gets its error (0 or a negative errno),
 * @msg the extended ack's message ("" if none). An NLMSG_DONE message
 * whose payload holds a negative int (a dump that failed) the same way.
 * -EINVAL if the message is truncated or of another type.
 */
int kc_parse_ack(const struct nlmsghdr *nlh, int *error, char *msg,
		 size_t len);

#endif /* KC_NLPARSE_H */
