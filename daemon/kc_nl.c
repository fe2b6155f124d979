// SPDX-License-Identifier: MIT
/* The kcoll generic netlink family over libnl-genl-3, see kc_nl.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include "kc_nl.h"
#include "kc_nlparse.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK	270
#endif

/* Event socket receive buffer: a burst of communicator events at job
 * start must not overflow it. */
#define KC_EV_RCVBUF	(1 << 20)
/* Messages handled per kc_evsock_process() call, so that a flood cannot
 * starve the caller's other file descriptors. */
#define KC_EV_BATCH	256

/* libnl's error codes back to errno values. */
static int kc_nlerr(int nlerr)
{
	switch (nlerr < 0 ? -nlerr : nlerr) {
	case 0:			return 0;
	case NLE_OBJ_NOTFOUND:	return -ENOENT;
	case NLE_NOMEM:		return -ENOMEM;
	case NLE_PERM:		return -EPERM;
	case NLE_NOACCESS:	return -EACCES;
	case NLE_INVAL:		return -EINVAL;
	case NLE_AGAIN:		return -EAGAIN;
	case NLE_INTR:		return -EINTR;
	case NLE_OPNOTSUPP:	return -EOPNOTSUPP;
	case NLE_RANGE:		return -ERANGE;
	case NLE_BUSY:		return -EBUSY;
	case NLE_EXIST:		return -EEXIST;
	case NLE_PROTO_MISMATCH: return -EPROTONOSUPPORT;
	default:		return -EIO;
	}
}

static int kc_sock_new(struct nl_sock **skp)
{
	struct nl_sock *sk = nl_socket_alloc();
	int one = 1, ret;

	if (!sk)
		return -ENOMEM;
	ret = genl_connect(sk);
	if (ret < 0) {
		nl_socket_free(sk);
		return kc_nlerr(ret);
	}
	nl_socket_enable_msg_peek(sk);
	/* Extended acks (the kernel's reason for -EINVAL), without the
	 * request echoed back. Older kernels: plain errno. */
	setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_EXT_ACK, &one,
		   sizeof(one));
	setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_CAP_ACK, &one,
		   sizeof(one));
	*skp = sk;
	return 0;
}

int kc_nl_open(struct kc_nl *nl)
{
	memset(nl, 0, sizeof(*nl));
	return kc_sock_new(&nl->sk);
}

void kc_nl_close(struct kc_nl *nl)
{
	if (nl->sk)
		nl_socket_free(nl->sk);
	memset(nl, 0, sizeof(*nl));
}

int kc_nl_resolve(struct kc_nl *nl)
{
	int id = genl_ctrl_resolve(nl->sk, KCOLL_GENL_NAME);

	nl->family = id > 0 ? id : 0;
	return id > 0 ? 0 : kc_nlerr(id);
}

int kc_nl_group(struct kc_nl *nl, const char *family, const char *group)
{
	int id = genl_ctrl_resolve_grp(nl->sk, family, group);

	return id > 0 ? id : kc_nlerr(id);
}

/* ------------------------------------------------------------------ */
/* Requests                                                            */
/* ------------------------------------------------------------------ */

struct kc_req {
	struct kc_nl *nl;
	int (*parse)(struct nlmsghdr *nlh, void *arg);
	void *arg;
	bool done;
	int err;		/* first error: the kernel's or a parse error */
};

/* Every message, first: pick up errors with their extended ack (also the
 * error of a failed dump, which libnl does not report). */
static int kc_req_msg_in(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct kc_req *rq = arg;
	char text[KC_NL_ERRMSG_LEN];
	int error;

	if (nlh->nlmsg_type != NLMSG_ERROR && nlh->nlmsg_type != NLMSG_DONE)
		return NL_OK;
	if (kc_parse_ack(nlh, &error, text, sizeof(text)) || !error)
		return NL_OK;
	if (!rq->err) {
		rq->err = error;
		memcpy(rq->nl->errmsg, text, sizeof(text));
	}
	return NL_OK;
}

static int kc_req_valid(struct nl_msg *msg, void *arg)
{
	struct kc_req *rq = arg;
	int ret;

	if (!rq->parse)
		return NL_OK;
	ret = rq->parse(nlmsg_hdr(msg), rq->arg);
	/* A reply we cannot read is not the kernel refusing the request. */
	if (ret == -EINVAL)
		ret = -EBADMSG;
	/* Keep reading to the end of the reply: the socket stays usable. */
	if (ret && !rq->err)
		rq->err = ret;
	return NL_OK;
}

static int kc_req_done(struct nl_msg *msg, void *arg)
{
	struct kc_req *rq = arg;

	(void)msg;
	rq->done = true;
	return NL_STOP;
}

static int kc_req_error(struct sockaddr_nl *nla, struct nlmsgerr *e,
			void *arg)
{
	struct kc_req *rq = arg;

	(void)nla;
	if (!rq->err)
		rq->err = kc_errno_sane(e->error);
	rq->done = true;
	return NL_STOP;
}

static int kc_req_intr(struct nl_msg *msg, void *arg)
{
	/* A dump that raced with a change: its data is still each
	 * object's own; showing it beats failing. */
	(void)msg;
	(void)arg;
	return NL_OK;
}

static struct nl_cb *kc_req_cb(struct kc_req *rq)
{
	struct nl_cb *cb = nl_cb_alloc(NL_CB_DEFAULT);

	if (!cb)
		return NULL;
	nl_cb_set(cb, NL_CB_MSG_IN, NL_CB_CUSTOM, kc_req_msg_in, rq);
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, kc_req_valid, rq);
	nl_cb_set(cb, NL_CB_FINISH, NL_CB_CUSTOM, kc_req_done, rq);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, kc_req_done, rq);
	nl_cb_set(cb, NL_CB_DUMP_INTR, NL_CB_CUSTOM, kc_req_intr, rq);
	nl_cb_err(cb, NL_CB_CUSTOM, kc_req_error, rq);
	return cb;
}

/* Send @msg (consumed) and read the reply up to its ACK or DONE. */
static int kc_req_run(struct kc_nl *nl, struct nl_msg *msg,
		      int (*parse)(struct nlmsghdr *, void *), void *arg)
{
	struct kc_req rq = { .nl = nl, .parse = parse, .arg = arg };
	struct nl_cb *cb = kc_req_cb(&rq);
	int ret;

	nl->errmsg[0] = '\0';
	if (!cb) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	ret = nl_send_auto(nl->sk, msg);
	nlmsg_free(msg);
	while (ret >= 0 && !rq.done)
		ret = nl_recvmsgs(nl->sk, cb);
	nl_cb_put(cb);
	if (rq.err)
		return rq.err;
	return ret < 0 ? kc_nlerr(ret) : 0;
}

static struct nl_msg *kc_req_msg(struct kc_nl *nl, uint8_t cmd, int flags)
{
	struct nl_msg *msg;

	if (!nl->family)
		return NULL;
	msg = nlmsg_alloc();
	if (msg && !genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, nl->family, 0,
				flags, cmd, KCOLL_GENL_VERSION)) {
		nlmsg_free(msg);
		msg = NULL;
	}
	return msg;
}

/* A request without attributes. */
static int kc_req_simple(struct kc_nl *nl, uint8_t cmd, int flags,
			 int (*parse)(struct nlmsghdr *, void *), void *arg)
{
	struct nl_msg *msg = kc_req_msg(nl, cmd, flags);

	if (!msg)
		return nl->family ? -ENOMEM : -ENOENT;
	return kc_req_run(nl, msg, parse, arg);
}

/* Growing arrays filled by the per-message parsers. */
struct kc_devs_acc {
	struct kc_dev *v;
	size_t n;
};

static int kc_devs_add(struct nlmsghdr *nlh, void *arg)
{
	struct kc_devs_acc *acc = arg;
	struct kc_dev *v;
	int ret;

	v = realloc(acc->v, (acc->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	acc->v = v;
	ret = kc_parse_dev_msg(nlh, &v[acc->n]);
	if (!ret)
		acc->n++;
	return ret;
}

int kc_nl_dev_dump(struct kc_nl *nl, struct kc_dev **devs, size_t *n)
{
	struct kc_devs_acc acc = { 0 };
	int ret;

	ret = kc_req_simple(nl, KCOLL_CMD_DEV_GET, NLM_F_DUMP, kc_devs_add,
			    &acc);
	if (ret) {
		free(acc.v);
		acc.v = NULL;
		acc.n = 0;
	}
	*devs = acc.v;
	*n = acc.n;
	return ret;
}

struct kc_comms_acc {
	struct kc_comm *v;
	size_t n;
};

static int kc_comms_add(struct nlmsghdr *nlh, void *arg)
{
	struct kc_comms_acc *acc = arg;
	struct kc_comm *v;
	int ret;

	v = realloc(acc->v, (acc->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	acc->v = v;
	ret = kc_parse_comm_msg(nlh, &v[acc->n]);
	if (!ret)
		acc->n++;
	return ret;
}

int kc_nl_comm_get(struct kc_nl *nl, bool all, uint32_t id,
		   struct kc_comm **comms, size_t *n)
{
	struct kc_comms_acc acc = { 0 };
	struct nl_msg *msg;
	int ret;

	msg = kc_req_msg(nl, KCOLL_CMD_COMM_GET, all ? NLM_F_DUMP : 0);
	if (!msg)
		return nl->family ? -ENOMEM : -ENOENT;
	if (!all && nla_put_u32(msg, KCOLL_A_COMM_ID, id) < 0) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	ret = kc_req_run(nl, msg, kc_comms_add, &acc);
	if (ret) {
		kc_comms_free(acc.v, acc.n);
		acc.v = NULL;
		acc.n = 0;
	}
	*comms = acc.v;
	*n = acc.n;
	return ret;
}

struct kc_stats_acc {
	struct kc_node_stats *ns;
	bool got;
};

static int kc_stats_one(struct nlmsghdr *nlh, void *arg)
{
	struct kc_stats_acc *acc = arg;

	if (acc->got)		/* one reply expected */
		return -EPROTO;
	acc->got = true;
	return kc_parse_stats_msg(nlh, acc->ns);
}

int kc_nl_stats_get(struct kc_nl *nl, struct kc_node_stats *ns)
{
	struct kc_stats_acc acc = { .ns = ns };
	int ret;

	memset(ns, 0, sizeof(*ns));
	ret = kc_req_simple(nl, KCOLL_CMD_STATS_GET, 0, kc_stats_one, &acc);
	if (!ret && !acc.got)
		ret = -EPROTO;
	if (ret)
		kc_node_stats_free(ns);
	return ret;
}

struct kc_tun_acc {
	struct kc_tunable *v;
	size_t n;
};

static int kc_tun_add(struct nlmsghdr *nlh, void *arg)
{
	struct kc_tun_acc *acc = arg;

	return kc_parse_tunables_msg(nlh, &acc->v, &acc->n);
}

int kc_nl_tunable_get(struct kc_nl *nl, const char *name,
		      struct kc_tunable **arr, size_t *n)
{
	struct kc_tun_acc acc = { 0 };
	struct nl_msg *msg;
	int ret;

	msg = kc_req_msg(nl, KCOLL_CMD_TUNABLE_GET, name ? 0 : NLM_F_DUMP);
	if (!msg)
		return nl->family ? -ENOMEM : -ENOENT;
	if (name && nla_put_string(msg, KCOLL_A_TUNABLE_NAME, name) < 0) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	ret = kc_req_run(nl, msg, kc_tun_add, &acc);
	if (ret) {
		free(acc.v);
		acc.v = NULL;
		acc.n = 0;
	}
	*arr = acc.v;
	*n = acc.n;
	return ret;
}

int kc_nl_tunable_set(struct kc_nl *nl, const char *name, const char *value)
{
	struct nl_msg *msg;

	msg = kc_req_msg(nl, KCOLL_CMD_TUNABLE_SET, 0);
	if (!msg)
		return nl->family ? -ENOMEM : -ENOENT;
	if (nla_put_string(msg, KCOLL_A_TUNABLE_NAME, name) < 0 ||
	    nla_put_string(msg, KCOLL_A_TUNABLE_VALUE, value) < 0) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	return kc_req_run(nl, msg, NULL, NULL);
}

/* ------------------------------------------------------------------ */
/* Events                                                              */
/* ------------------------------------------------------------------ */

static void kc_ev_ctrl(struct kc_evsock *es, struct nlmsghdr *nlh)
{
	char name[GENL_NAMSIZ];
	uint16_t id;
	uint8_t cmd;

	if (kc_parse_ctrl_msg(nlh, &cmd, name, sizeof(name), &id)) {
		if (es->ops->bad)
			es->ops->bad("nlctrl notification", -EINVAL, es->arg);
		return;
	}
	if (strcmp(name, KCOLL_GENL_NAME) || !es->ops->family)
		return;
	if (cmd == CTRL_CMD_NEWFAMILY)
		es->ops->family(true, es->arg);
	else if (cmd == CTRL_CMD_DELFAMILY)
		es->ops->family(false, es->arg);
}

static int kc_ev_valid(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct kc_evsock *es = arg;
	struct kc_event ev;
	int ret;

	if (nlh->nlmsg_type == GENL_ID_CTRL) {
		kc_ev_ctrl(es, nlh);
		return NL_OK;
	}
	if (!es->family || nlh->nlmsg_type != es->family)
		return NL_OK;
	ret = kc_parse_event_msg(nlh, &ev);
	if (ret) {
		if (es->ops->bad)
			es->ops->bad("kcoll event", ret, es->arg);
	} else if (es->ops->event) {
		es->ops->event(&ev, es->arg);
	}
	kc_event_free(&ev);
	return NL_OK;
}

int kc_evsock_open(struct kc_evsock *es, struct kc_nl *nl, bool watch_family,
		   const struct kc_ev_ops *ops, void *arg)
{
	int ret;

	memset(es, 0, sizeof(*es));
	es->ops = ops;
	es->arg = arg;
	ret = kc_sock_new(&es->sk);
	if (ret)
		return ret;
	nl_socket_disable_seq_check(es->sk);
	nl_socket_disable_auto_ack(es->sk);
	nl_socket_set_buffer_size(es->sk, KC_EV_RCVBUF, 0);
	ret = kc_nlerr(nl_socket_set_nonblocking(es->sk));
	if (!ret)
		ret = kc_nlerr(nl_socket_modify_cb(es->sk, NL_CB_VALID,
						   NL_CB_CUSTOM, kc_ev_valid,
						   es));
	if (!ret && watch_family) {
		ret = kc_nl_group(nl, "nlctrl", "notify");
		if (ret > 0) {
			es->ctrl_group = ret;
			ret = kc_nlerr(nl_socket_add_membership(es->sk, ret));
		}
	}
	if (ret < 0)
		kc_evsock_close(es);
	return ret < 0 ? ret : 0;
}

void kc_evsock_close(struct kc_evsock *es)
{
	if (es->sk)
		nl_socket_free(es->sk);
	memset(es, 0, sizeof(*es));
}

int kc_evsock_join(struct kc_evsock *es, struct kc_nl *nl)
{
	int grp, ret;

	kc_evsock_leave(es);
	grp = kc_nl_group(nl, KCOLL_GENL_NAME, KCOLL_GENL_MCGRP_EVENTS);
	if (grp < 0)
		return grp;
	ret = kc_nlerr(nl_socket_add_membership(es->sk, grp));
	if (ret)
		return ret;
	es->group = grp;
	es->family = nl->family;
	return 0;
}

void kc_evsock_leave(struct kc_evsock *es)
{
	/* The kernel dropped the membership with the family; this only
	 * matters if the id was reused meanwhile. */
	if (es->group)
		nl_socket_drop_membership(es->sk, es->group);
	es->group = 0;
	es->family = 0;
}

int kc_evsock_fd(const struct kc_evsock *es)
{
	return nl_socket_get_fd(es->sk);
}

int kc_evsock_process(struct kc_evsock *es)
{
	struct nl_cb *cb = nl_socket_get_cb(es->sk);
	int i, ret = 0;

	for (i = 0; i < KC_EV_BATCH; i++) {
		ret = nl_recvmsgs_report(es->sk, cb);
		if (ret <= 0)
			break;
	}
	nl_cb_put(cb);
	/* Drained: libnl 3.7 reports EAGAIN, some versions return 0. */
	if (ret == -NLE_AGAIN)
		return 0;
	/* nl_recv() reports ENOBUFS (lost messages) as NLE_NOMEM. */
	if (ret == -NLE_NOMEM)
		return -ENOBUFS;
	return ret < 0 ? kc_nlerr(ret) : 0;
}
