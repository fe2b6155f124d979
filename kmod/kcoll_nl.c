// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll generic netlink family: devices, communicators, statistics and
 * tunables for kcolld/kcollctl, and the events they log. The contract is
 * uapi/linux/kcoll_netlink.h.
 *
 * Requests are validated strictly against kcoll_nl_policy (every command is
 * below resv_start_op). Tunables, devices and statistics are open to
 * everyone to read, like sysfs; communicators are not: a reader without
 * CAP_NET_ADMIN sees only those created by its own uid (their uid, pid,
 * rank table and operations say what a user runs with whom), and the
 * event group, which carries every user's communicators, needs
 * CAP_NET_ADMIN to join. Setting a tunable needs CAP_NET_ADMIN
 * (GENL_ADMIN_PERM). Tunables are exactly the
 * writable attributes of /sys/class/misc/kcoll/ and its algo/ group: the
 * netlink path calls their show/store methods, so both interfaces validate
 * the same way and cannot drift apart.
 *
 * Locking: handlers run in parallel (not under genl_mutex) and take
 * kcoll_ib_lock, then comm->lock (never the other way round);
 * communicators come from kcoll_comms_for_each() on references, outside
 * kcoll_comms_lock. Events are sent from process context, some under
 * comm->lock.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/device.h>
#include <linux/pid_namespace.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <net/genetlink.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

#include "kcoll.h"
#include "kcoll_types.h"
#include "kcoll_comm.h"
#include "kcoll_coll.h"
#include "kcoll_sysfs.h"
#include "kcoll_stats.h"
#include "kcoll_nl.h"
#include "kcoll_tune.h"
#include "kcoll_ib.h"
#include "kcoll_cost.h"

/* Largest member list and missing-rank list in a dump message (a do request
 * for one communicator sizes its reply to carry everything). In a dump,
 * ops and their missing ranks are capped too; a communicator whose record
 * still does not fit an empty dump message (a reader's buffer may be as
 * small as NLMSG_GOODSIZE) goes in its brief form, without members and
 * ops (KCOLL_A_COMM_PARTIAL), so that no owner can stop a dump and hide
 * the communicators after its own. */
#define KCOLL_NL_DUMP_MEMBERS	32
#define KCOLL_NL_MAX_MISSING	256
#define KCOLL_NL_MAX_OPS	64
#define KCOLL_NL_DUMP_MISSING	16
#define KCOLL_NL_DUMP_OPS	16

static const struct nla_policy kcoll_nl_policy[KCOLL_A_MAX + 1] = {
	[KCOLL_A_COMM_ID] = { .type = NLA_U32 },
	[KCOLL_A_TUNABLE_NAME] = { .type = NLA_NUL_STRING,
				   .len = KCOLL_NL_TUNABLE_NAME_MAX - 1 },
	[KCOLL_A_TUNABLE_VALUE] = { .type = NLA_NUL_STRING,
				    .len = KCOLL_NL_TUNABLE_VALUE_MAX - 1 },
};

static const struct genl_multicast_group kcoll_nl_mcgrps[] = {
#ifdef GENL_MCAST_CAP_NET_ADMIN
	{ .name = KCOLL_GENL_MCGRP_EVENTS, .flags = GENL_MCAST_CAP_NET_ADMIN },
#else
#error "kcoll needs GENL_MCAST_CAP_NET_ADMIN: its events would reach every user"
#endif
};

/*
 * May the sender of @skb (its socket's opener) see every communicator?
 * CAP_NET_ADMIN. Asked once per request: the check is audited, and a
 * reader without it made one denial per communicator of the node (until
 * 2026-12-07).
 */
static bool kcoll_nl_sees_all(const struct sk_buff *skb)
{
	return netlink_capable(skb, CAP_NET_ADMIN);
}

/* ... and if not @all, may it see @comm? Its creator's uid. */
static bool kcoll_nl_may_see(const struct sk_buff *skb, bool all,
			     const struct kcoll_comm *comm)
{
	struct sock *sk = NETLINK_CB(skb).sk;

	return all || (sk && uid_eq(sock_i_uid(sk), comm->owner));
}

static struct genl_family kcoll_nl_family;
static bool kcoll_nl_registered;

/* ---------------------------------------------------------------- */
/* Attribute helpers                                                 */
/* ---------------------------------------------------------------- */

static int kcoll_nl_put_u64(struct sk_buff *skb, int type, u64 v)
{
	return nla_put_u64_64bit(skb, type, v, KCOLL_A_PAD);
}

static int kcoll_nl_put_stats(struct sk_buff *skb, struct kcoll_opstats *st,
			      bool node, u32 ncomms)
{
	u64 hist[KCOLL_NL_LAT_BUCKETS], prof[KCOLL_NL_PROF_NR];
	struct nlattr *nest;
	int i;

	nest = nla_nest_start(skb, KCOLL_A_STATS);
	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < KCOLL_NL_LAT_BUCKETS; i++)
		hist[i] = atomic64_read(&st->lat[i]);
	if (kcoll_nl_put_u64(skb, KCOLL_A_STAT_OPS, atomic64_read(&st->ops)) ||
	    kcoll_nl_put_u64(skb, KCOLL_A_STAT_BYTES,
			     atomic64_read(&st->bytes)) ||
	    kcoll_nl_put_u64(skb, KCOLL_A_STAT_ERRORS,
			     atomic64_read(&st->errors)) ||
	    kcoll_nl_put_u64(skb, KCOLL_A_STAT_TIMEOUTS,
			     atomic64_read(&st->timeouts)) ||
	    nla_put(skb, KCOLL_A_STAT_LAT_HIST, sizeof(hist), hist))
		goto out_cancel;
	for (i = 0; i < KCOLL_NL_PROF_NR; i++)
		prof[i] = atomic64_read(&st->prof[i]);
	if (nla_put(skb, KCOLL_A_STAT_PROFILE, sizeof(prof), prof))
		goto out_cancel;
	if (node && (kcoll_nl_put_u64(skb, KCOLL_A_STAT_INFLIGHT,
				      atomic_read(&kcoll_nr_inflight)) ||
		     kcoll_nl_put_u64(skb, KCOLL_A_STAT_CONTEXTS,
				      atomic_read(&kcoll_nr_contexts)) ||
		     kcoll_nl_put_u64(skb, KCOLL_A_STAT_COMMS, ncomms)))
		goto out_cancel;
	nla_nest_end(skb, nest);
	return 0;

out_cancel:
	nla_nest_cancel(skb, nest);
	return -EMSGSIZE;
}

/* ---------------------------------------------------------------- */
/* Devices                                                           */
/* ---------------------------------------------------------------- */

static int kcoll_nl_count_dev_comms(struct kcoll_comm *comm, void *arg)
{
	void **a = arg;

	if (comm->ibdev == a[0])
		(*(u32 *)a[1])++;
	return 0;
}

static int kcoll_nl_put_model(struct sk_buff *skb, const struct kcoll_model *m)
{
	if (nla_put_u32(skb, KCOLL_A_COST_ALPHA_NS, m->alpha_ns) ||
	    nla_put_u32(skb, KCOLL_A_COST_BETA_PS, m->beta_ps) ||
	    nla_put_u32(skb, KCOLL_A_COST_GAMMA_PS, m->gamma_ps))
		return -EMSGSIZE;
	return 0;
}

static int kcoll_nl_put_dev_attrs(struct sk_buff *skb, struct ib_device *ibdev,
				  struct kcoll_opstats *st)
{
	enum ib_port_state state;
	struct kcoll_model model;
	u32 ncomms = 0;
	void *a[2] = { ibdev, &ncomms };

	/* The core's cache: a query would ask the provider (rxe takes
	 * rtnl_lock, and on 6.1 logs a line for a netdev of unknown speed)
	 * on every request of every user. */
	if (ib_get_cached_port_state(ibdev, rdma_start_port(ibdev), &state))
		state = IB_PORT_NOP;
	kcoll_comms_for_each(kcoll_nl_count_dev_comms, a, 0);
	kcoll_tune_model(ibdev, &model);
	if (kcoll_nl_put_model(skb, &model) ||
	    nla_put_string(skb, KCOLL_A_DEV_NAME, dev_name(&ibdev->dev)) ||
	    nla_put_u32(skb, KCOLL_A_DEV_INDEX, ibdev->index) ||
	    kcoll_nl_put_u64(skb, KCOLL_A_DEV_NODE_GUID,
			     be64_to_cpu(ibdev->node_guid)) ||
	    nla_put_u8(skb, KCOLL_A_DEV_PORT_STATE, state) ||
	    nla_put_u32(skb, KCOLL_A_DEV_COMMS, ncomms) ||
	    nla_put_u8(skb, KCOLL_A_DEV_ENABLED, kcoll_ib_enabled(ibdev)))
		return -EMSGSIZE;
	return st ? kcoll_nl_put_stats(skb, st, false, 0) : 0;
}

struct kcoll_nl_dump {
	struct sk_buff *skb;
	struct netlink_callback *cb;
	u32 done;		/* entries written in this pass */
	bool all;		/* kcoll_nl_sees_all() */
};

static int kcoll_nl_dev_one(struct ib_device *ibdev, struct kcoll_opstats *st,
			    void *arg)
{
	struct kcoll_nl_dump *d = arg;
	void *hdr;

	hdr = genlmsg_put(d->skb, NETLINK_CB(d->cb->skb).portid,
			  d->cb->nlh->nlmsg_seq, &kcoll_nl_family, NLM_F_MULTI,
			  KCOLL_CMD_DEV_GET);
	if (!hdr)
		return -EMSGSIZE;
	if (kcoll_nl_put_dev_attrs(d->skb, ibdev, st)) {
		genlmsg_cancel(d->skb, hdr);
		return -EMSGSIZE;
	}
	genlmsg_end(d->skb, hdr);
	d->done++;
	return 0;
}

static int kcoll_nl_dev_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct kcoll_nl_dump d = { .skb = skb, .cb = cb };
	int err;

	err = kcoll_ib_for_each(kcoll_nl_dev_one, &d, cb->args[0]);
	cb->args[0] += d.done;
	if (err && !d.done)
		return err;	/* one device does not fit an empty message */
	return skb->len;
}

/* ---------------------------------------------------------------- */
/* Communicators                                                     */
/* ---------------------------------------------------------------- */

static u8 kcoll_nl_comm_state(struct kcoll_comm *comm)
{
	if (comm->revoked)
		return KCOLL_COMM_REVOKED;
	if (comm->aborted)
		return KCOLL_COMM_ABORTED;
	if (comm->error)
		return KCOLL_COMM_FAILED;
	if (comm->nr_up + 1 < comm->nranks)
		return KCOLL_COMM_CONNECTING;
	return KCOLL_COMM_READY;
}

/*
 * The communicator's names. Its creator's pid as @ns sees it (0: not at
 * all): a reply gives the reader's, never the host's number inside a
 * container (until 2026-12-07); an event, for the initial namespace's
 * CAP_NET_ADMIN listeners, the host's.
 */
static int kcoll_nl_put_comm_id_ns(struct sk_buff *skb,
				   struct kcoll_comm *comm,
				   struct pid_namespace *ns)
{
	pid_t pid = pid_nr_ns(comm->pid, ns);

	if (nla_put_u32(skb, KCOLL_A_COMM_ID, comm->gid) ||
	    kcoll_nl_put_u64(skb, KCOLL_A_COMM_UID, comm->uid) ||
	    nla_put_u32(skb, KCOLL_A_COMM_PID, pid) ||
	    nla_put_u32(skb, KCOLL_A_RANK, comm->rank) ||
	    nla_put_u32(skb, KCOLL_A_NRANKS, comm->nranks) ||
	    (comm->parent_uid &&
	     kcoll_nl_put_u64(skb, KCOLL_A_COMM_PARENT_UID, comm->parent_uid)))
		return -EMSGSIZE;
	return 0;
}

/* kcoll_nl_put_comm_id_ns() for a reply, in the requester's context. */
static int kcoll_nl_put_comm_id(struct sk_buff *skb, struct kcoll_comm *comm)
{
	return kcoll_nl_put_comm_id_ns(skb, comm, task_active_pid_ns(current));
}

static int kcoll_nl_put_missing(struct sk_buff *skb, const u32 *r, u32 n,
				u32 max)
{
	if (!n)
		return 0;
	return nla_put(skb, KCOLL_A_MISSING_RANKS, min(n, max) * sizeof(u32), r);
}

/*
 * Has @nest, the last attribute opened in @skb, outgrown the 16 bits of
 * its nla_len? (nla_nest_end() would truncate it, and a reader would take
 * what follows the short length for top-level attributes.) Its last
 * element is then taken back: a reply lists what fits (KCOLL_A_NRANKS
 * says how many ranks there are).
 */
static bool kcoll_nl_nest_full(struct sk_buff *skb, struct nlattr *nest)
{
	return skb_tail_pointer(skb) - (unsigned char *)nest > U16_MAX;
}

/* Must hold comm->lock. */
static int kcoll_nl_put_members(struct sk_buff *skb, struct kcoll_comm *comm)
{
	struct nlattr *nest, *m;
	u32 i;

	lockdep_assert_held(&comm->lock);
	nest = nla_nest_start(skb, KCOLL_A_COMM_MEMBERS);
	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < comm->nranks; i++) {
		const struct kcoll_rank_addr *ra = &comm->ranks[i];
		struct kcoll_conn *conn = comm->conns[i];
		u8 up = i == comm->rank ||
			(conn && conn->state == KCOLL_CONN_UP);

		m = nla_nest_start(skb, KCOLL_A_MEMBER);
		if (!m ||
		    nla_put_u32(skb, KCOLL_A_RANK, i) ||
		    nla_put(skb, KCOLL_A_MEMBER_ADDR, sizeof(ra->addr),
			    ra->addr) ||
		    nla_put_u16(skb, KCOLL_A_MEMBER_PORT,
				ra->port ?: kcoll_listen_port) ||
		    nla_put_u16(skb, KCOLL_A_MEMBER_LOCAL_INDEX,
				ra->local_index) ||
		    nla_put_u8(skb, KCOLL_A_MEMBER_CONNECTED, up))
			goto out_cancel;
		if (kcoll_nl_nest_full(skb, nest)) {
			nla_nest_cancel(skb, m);
			break;
		}
		nla_nest_end(skb, m);
	}
	nla_nest_end(skb, nest);
	return 0;

out_cancel:
	nla_nest_cancel(skb, nest);
	return -EMSGSIZE;
}

/* At most @max_ops ops, each with at most @max_miss missing ranks. Must
 * hold comm->lock. */
static int kcoll_nl_put_ops(struct sk_buff *skb, struct kcoll_comm *comm,
			    u32 *missing, u32 max_ops, u32 max_miss)
{
	u64 now = ktime_get_ns();
	struct kcoll_task *op;
	struct nlattr *nest, *o;
	u32 n = 0, nmiss;

	lockdep_assert_held(&comm->lock);
	nest = nla_nest_start(skb, KCOLL_A_COMM_OPS);
	if (!nest)
		return -EMSGSIZE;
	list_for_each_entry(op, &comm->ops, all) {
		if (n++ >= max_ops)
			break;
		nmiss = missing ? kcoll_op_missing(op, missing, max_miss) : 0;
		o = nla_nest_start(skb, KCOLL_A_OP);
		if (!o ||
		    kcoll_nl_put_u64(skb, KCOLL_A_OP_SEQ, op->seq) ||
		    nla_put_u8(skb, KCOLL_A_OP_OPCODE, op->args.opcode) ||
		    nla_put_string(skb, KCOLL_A_OP_ALGO,
				   kcoll_algo_name(kcoll_sched_algo(&op->args))) ||
		    nla_put_u8(skb, KCOLL_A_OP_PRIO, op->prio) ||
		    kcoll_nl_put_u64(skb, KCOLL_A_OP_BYTES, op->bytes) ||
		    kcoll_nl_put_u64(skb, KCOLL_A_OP_AGE_MS,
				     div_u64(now - op->t_submit,
					     NSEC_PER_MSEC)) ||
		    nla_put_u32(skb, KCOLL_A_OP_TIMEOUT_MS, op->timeout_ms) ||
		    kcoll_nl_put_missing(skb, missing, nmiss, max_miss))
			goto out_cancel;
		if (kcoll_nl_nest_full(skb, nest)) {
			nla_nest_cancel(skb, o);
			break;
		}
		nla_nest_end(skb, o);
	}
	nla_nest_end(skb, nest);
	return 0;

out_cancel:
	nla_nest_cancel(skb, nest);
	return -EMSGSIZE;
}

/* At most @max_miss of its missing ranks. Must hold comm->lock. */
static int kcoll_nl_put_last_error(struct sk_buff *skb,
				   struct kcoll_comm *comm, u32 max_miss)
{
	const struct kcoll_report *r = &comm->report;
	struct nlattr *nest;

	if (!r->error)
		return 0;
	nest = nla_nest_start(skb, KCOLL_A_COMM_LAST_ERROR);
	if (!nest ||
	    kcoll_nl_put_u64(skb, KCOLL_A_OP_SEQ, r->seq) ||
	    nla_put_u8(skb, KCOLL_A_OP_OPCODE, r->opcode) ||
	    nla_put_s32(skb, KCOLL_A_ERRNO, r->error) ||
	    (r->peer != ~0U && nla_put_u32(skb, KCOLL_A_PEER_RANK, r->peer)) ||
	    kcoll_nl_put_missing(skb, r->missing, r->nmissing, max_miss))
		goto out_cancel;
	nla_nest_end(skb, nest);
	return 0;

out_cancel:
	if (nest)
		nla_nest_cancel(skb, nest);
	return -EMSGSIZE;
}

/* How much of a communicator a COMM_GET message carries. */
enum kcoll_nl_form {
	KCOLL_NL_FULL,		/* a do request's reply: everything */
	KCOLL_NL_DUMP,		/* a dump's: members, ops and ranks capped */
	KCOLL_NL_BRIEF,		/* a dump's that the above did not fit */
};

static int kcoll_nl_fill_comm(struct sk_buff *skb, struct kcoll_comm *comm,
			      u32 portid, u32 seq, int flags,
			      enum kcoll_nl_form form)
{
	bool full = form == KCOLL_NL_FULL, brief = form == KCOLL_NL_BRIEF;
	u32 max_miss = full ? KCOLL_NL_MAX_MISSING : KCOLL_NL_DUMP_MISSING;
	u32 *missing = NULL;
	void *hdr;
	int err = -EMSGSIZE;

	if (!brief)
		missing = kmalloc_array(KCOLL_NL_MAX_MISSING, sizeof(u32),
					GFP_KERNEL);
	hdr = genlmsg_put(skb, portid, seq, &kcoll_nl_family, flags,
			  KCOLL_CMD_COMM_GET);
	if (!hdr) {
		kfree(missing);
		return -EMSGSIZE;
	}
	/* A comm's lock may be held for long (an operation's registrations
	 * and copies on the device): whoever asks may give up. */
	if (mutex_lock_killable(&comm->lock)) {
		kfree(missing);
		genlmsg_cancel(skb, hdr);
		return -EINTR;
	}
	if (kcoll_nl_put_comm_id(skb, comm) ||
	    nla_put_u8(skb, KCOLL_A_COMM_STATE, kcoll_nl_comm_state(comm)) ||
	    (comm->ibdev && nla_put_string(skb, KCOLL_A_DEV_NAME,
					   dev_name(&comm->ibdev->dev))) ||
	    nla_put_u32(skb, KCOLL_A_COMM_INFLIGHT, comm->nr_ops) ||
	    kcoll_nl_put_model(skb, &comm->model) ||
	    (brief && nla_put_u8(skb, KCOLL_A_COMM_PARTIAL, 1)) ||
	    (!brief && (full || comm->nranks <= KCOLL_NL_DUMP_MEMBERS) &&
	     kcoll_nl_put_members(skb, comm)) ||
	    (!brief &&
	     kcoll_nl_put_ops(skb, comm, missing,
			      full ? KCOLL_NL_MAX_OPS : KCOLL_NL_DUMP_OPS,
			      max_miss)) ||
	    kcoll_nl_put_stats(skb, &comm->stats, false, 0) ||
	    kcoll_nl_put_last_error(skb, comm, max_miss))
		goto out_unlock;
	err = 0;
out_unlock:
	mutex_unlock(&comm->lock);
	kfree(missing);
	if (err) {
		genlmsg_cancel(skb, hdr);
		return err;
	}
	genlmsg_end(skb, hdr);
	return 0;
}

static int kcoll_nl_comm_one(struct kcoll_comm *comm, void *arg)
{
	struct kcoll_nl_dump *d = arg;
	int err;

	if (!kcoll_nl_may_see(d->cb->skb, d->all, comm)) {
		d->done++;	/* passed over, as if written */
		return 0;
	}
	err = kcoll_nl_fill_comm(d->skb, comm, NETLINK_CB(d->cb->skb).portid,
				 d->cb->nlh->nlmsg_seq, NLM_F_MULTI,
				 KCOLL_NL_DUMP);
	/* Alone in the message and still too large: what always fits. A
	 * message with others in it goes first; the next one has room. */
	if (err == -EMSGSIZE && !d->skb->len)
		err = kcoll_nl_fill_comm(d->skb, comm,
					 NETLINK_CB(d->cb->skb).portid,
					 d->cb->nlh->nlmsg_seq, NLM_F_MULTI,
					 KCOLL_NL_BRIEF);
	if (!err)
		d->done++;
	return err;
}

static int kcoll_nl_comm_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct kcoll_nl_dump d = {
		.skb = skb, .cb = cb, .all = kcoll_nl_sees_all(cb->skb),
	};
	int err;

	err = kcoll_comms_for_each(kcoll_nl_comm_one, &d, cb->args[0]);
	cb->args[0] += d.done;
	/* Only a message with nothing in it ends the dump (d.done also
	 * counts the communicators the reader may not see). */
	if (err && !skb->len)
		return err;
	return skb->len;
}

struct kcoll_nl_find {
	u32 gid;
	const struct sk_buff *skb;	/* the request: who asks */
	bool all;			/* kcoll_nl_sees_all() */
	struct kcoll_comm *comm;
};

static int kcoll_nl_find_comm(struct kcoll_comm *comm, void *arg)
{
	struct kcoll_nl_find *f = arg;

	if (comm->gid != f->gid || !kcoll_nl_may_see(f->skb, f->all, comm))
		return 0;
	kref_get(&comm->ref);
	f->comm = comm;
	return 1;
}

static int kcoll_nl_comm_get(struct sk_buff *skb, struct genl_info *info)
{
	struct kcoll_nl_find f = {};
	struct sk_buff *msg;
	size_t size;
	int err;

	if (!info->attrs[KCOLL_A_COMM_ID]) {
		NL_SET_ERR_MSG(info->extack, "KCOLL_A_COMM_ID is required (or dump)");
		return -EINVAL;
	}
	f.gid = nla_get_u32(info->attrs[KCOLL_A_COMM_ID]);
	f.skb = skb;
	f.all = kcoll_nl_sees_all(skb);
	kcoll_comms_for_each(kcoll_nl_find_comm, &f, 0);
	if (!f.comm) {
		/* Another user's looks the same as none. */
		NL_SET_ERR_MSG_ATTR(info->extack, info->attrs[KCOLL_A_COMM_ID],
				    "no such communicator");
		return -ENOENT;
	}
	/*
	 * Members, ops with their missing ranks, histogram, profile: most
	 * comms fit a page; only one that does not gets the largest reply
	 * it can need (until 2026-12-06 every request allocated that,
	 * about 74 KiB, an order-5 allocation).
	 */
	for (size = NLMSG_GOODSIZE; ; ) {
		msg = genlmsg_new(size, GFP_KERNEL);
		if (!msg) {
			err = -ENOMEM;
			break;
		}
		err = kcoll_nl_fill_comm(msg, f.comm, info->snd_portid,
					 info->snd_seq, 0, KCOLL_NL_FULL);
		if (!err) {
			err = genlmsg_reply(msg, info);
			break;
		}
		nlmsg_free(msg);
		if (err != -EMSGSIZE || size > NLMSG_GOODSIZE)
			break;
		size = NLMSG_DEFAULT_SIZE + (size_t)f.comm->nranks * 56 +
		       KCOLL_NL_MAX_OPS * (128 + KCOLL_NL_MAX_MISSING * 4) +
		       nla_total_size(KCOLL_NL_PROF_NR * sizeof(u64));
	}
	kcoll_comm_put(f.comm);
	return err;
}

/* ---------------------------------------------------------------- */
/* Statistics                                                        */
/* ---------------------------------------------------------------- */

static int kcoll_nl_count_comm(struct kcoll_comm *comm, void *arg)
{
	(*(u32 *)arg)++;
	return 0;
}

static int kcoll_nl_stats_dev(struct ib_device *ibdev, struct kcoll_opstats *st,
			      void *arg)
{
	struct sk_buff *skb = arg;
	struct nlattr *nest;

	nest = nla_nest_start(skb, KCOLL_A_DEV);
	if (!nest)
		return -EMSGSIZE;
	if (kcoll_nl_put_dev_attrs(skb, ibdev, st)) {
		nla_nest_cancel(skb, nest);
		return -EMSGSIZE;
	}
	nla_nest_end(skb, nest);
	return 0;
}

static int kcoll_nl_count_dev(struct ib_device *ibdev,
			      struct kcoll_opstats *st, void *arg)
{
	(*(u32 *)arg)++;
	return 0;
}

/* Room for one device's nest in a STATS_GET reply (its name, counters,
 * latency histogram and profile come to about 500 bytes). */
#define KCOLL_NL_DEV_STATS_SIZE	1024

static int kcoll_nl_stats_get(struct sk_buff *skb, struct genl_info *info)
{
	struct sk_buff *msg;
	u32 ncomms = 0, ndevs = 0;
	size_t size;
	void *hdr;
	int err, tries;

	kcoll_comms_for_each(kcoll_nl_count_comm, &ncomms, 0);
	/*
	 * A nest per device, and a node may have many (SR-IOV functions,
	 * any number of rxe devices): sized for the devices there are now,
	 * and larger again if some came meanwhile.
	 */
	kcoll_ib_for_each(kcoll_nl_count_dev, &ndevs, 0);
	size = NLMSG_GOODSIZE + (size_t)ndevs * KCOLL_NL_DEV_STATS_SIZE;
	for (tries = 0; ; tries++) {
		msg = genlmsg_new(size, GFP_KERNEL);
		if (!msg)
			return -ENOMEM;
		err = -EMSGSIZE;
		hdr = genlmsg_put_reply(msg, info, &kcoll_nl_family, 0,
					KCOLL_CMD_STATS_GET);
		if (hdr &&
		    !kcoll_nl_put_stats(msg, &kcoll_node_stats, true, ncomms))
			err = kcoll_ib_for_each(kcoll_nl_stats_dev, msg, 0);
		if (!err) {
			genlmsg_end(msg, hdr);
			return genlmsg_reply(msg, info);
		}
		nlmsg_free(msg);
		if (err != -EMSGSIZE || tries == 2)
			return err;
		size *= 2;
	}
}

/* ---------------------------------------------------------------- */
/* Tunables                                                          */
/* ---------------------------------------------------------------- */

/* The groups whose writable attributes are tunables. */
static const struct attribute_group *kcoll_nl_tunable_group(unsigned int g)
{
	const struct attribute_group *grp;
	unsigned int i, k = 0;

	for (i = 0; (grp = kcoll_attr_groups[i]); i++) {
		if (grp->name && strcmp(grp->name, "algo"))
			continue;	/* stats/, algo_ops/: read-only */
		if (k++ == g)
			return grp;
	}
	return NULL;
}

/* The @idx'th tunable, its full name into @name; NULL past the end. */
static struct device_attribute *kcoll_nl_tunable_at(unsigned int idx,
						    char *name, size_t size)
{
	const struct attribute_group *grp;
	struct attribute *const *a;
	unsigned int g, k = 0;

	for (g = 0; (grp = kcoll_nl_tunable_group(g)); g++) {
		for (a = grp->attrs; *a; a++) {
			if (!((*a)->mode & 0222))
				continue;
			if (k++ != idx)
				continue;
			if (grp->name)
				snprintf(name, size, "%s/%s", grp->name,
					 (*a)->name);
			else
				strscpy(name, (*a)->name, size);
			return container_of(*a, struct device_attribute, attr);
		}
	}
	return NULL;
}

static struct device_attribute *kcoll_nl_tunable_find(const char *name)
{
	char buf[KCOLL_NL_TUNABLE_NAME_MAX];
	struct device_attribute *da;
	unsigned int i;

	for (i = 0; (da = kcoll_nl_tunable_at(i, buf, sizeof(buf))); i++)
		if (!strcmp(buf, name))
			return da;
	return NULL;
}

/* The value as sysfs shows it, without the newline, into @page. */
static int kcoll_nl_tunable_show(struct device_attribute *da, char *page)
{
	ssize_t n = da->show(kcoll_misc_device(), da, page);

	if (n < 0)
		return n;
	while (n > 0 && (page[n - 1] == '\n' || page[n - 1] == ' '))
		n--;
	page[min_t(ssize_t, n, KCOLL_NL_TUNABLE_VALUE_MAX - 1)] = '\0';
	return 0;
}

static int kcoll_nl_put_tunable(struct sk_buff *skb, const char *name,
				struct device_attribute *da, char *page,
				bool nest)
{
	struct nlattr *n = NULL;
	int err;

	err = kcoll_nl_tunable_show(da, page);
	if (err)
		return err;
	if (nest) {
		n = nla_nest_start(skb, KCOLL_A_TUNABLE);
		if (!n)
			return -EMSGSIZE;
	}
	if (nla_put_string(skb, KCOLL_A_TUNABLE_NAME, name) ||
	    nla_put_string(skb, KCOLL_A_TUNABLE_VALUE, page)) {
		if (n)
			nla_nest_cancel(skb, n);
		return -EMSGSIZE;
	}
	if (n)
		nla_nest_end(skb, n);
	return 0;
}

static int kcoll_nl_tunable_dump(struct sk_buff *skb,
				 struct netlink_callback *cb)
{
	char name[KCOLL_NL_TUNABLE_NAME_MAX];
	struct device_attribute *da;
	unsigned long idx;
	char *page;
	void *hdr;
	int err = 0;

	page = (char *)get_zeroed_page(GFP_KERNEL);
	if (!page)
		return -ENOMEM;
	for (idx = cb->args[0];
	     (da = kcoll_nl_tunable_at(idx, name, sizeof(name))); idx++) {
		hdr = genlmsg_put(skb, NETLINK_CB(cb->skb).portid,
				  cb->nlh->nlmsg_seq, &kcoll_nl_family,
				  NLM_F_MULTI, KCOLL_CMD_TUNABLE_GET);
		if (!hdr)
			break;
		err = kcoll_nl_put_tunable(skb, name, da, page, true);
		if (err) {
			genlmsg_cancel(skb, hdr);
			break;
		}
		genlmsg_end(skb, hdr);
	}
	free_page((unsigned long)page);
	if (err && err != -EMSGSIZE)
		return err;
	cb->args[0] = idx;
	return skb->len;
}

static int kcoll_nl_tunable_get(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *na = info->attrs[KCOLL_A_TUNABLE_NAME];
	struct device_attribute *da;
	struct sk_buff *msg;
	char *page;
	void *hdr;
	int err;

	if (!na) {
		NL_SET_ERR_MSG(info->extack, "KCOLL_A_TUNABLE_NAME is required (or dump)");
		return -EINVAL;
	}
	da = kcoll_nl_tunable_find(nla_data(na));
	if (!da) {
		NL_SET_ERR_MSG_ATTR(info->extack, na, "no such tunable");
		return -ENOENT;
	}
	page = (char *)get_zeroed_page(GFP_KERNEL);
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	err = -ENOMEM;
	if (!page || !msg)
		goto out_free;
	err = -EMSGSIZE;
	hdr = genlmsg_put_reply(msg, info, &kcoll_nl_family, 0,
				KCOLL_CMD_TUNABLE_GET);
	if (!hdr)
		goto out_free;
	err = kcoll_nl_put_tunable(msg, nla_data(na), da, page, false);
	if (err)
		goto out_free;
	genlmsg_end(msg, hdr);
	free_page((unsigned long)page);
	return genlmsg_reply(msg, info);

out_free:
	nlmsg_free(msg);
	free_page((unsigned long)page);
	return err;
}

static int kcoll_nl_tunable_set(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *na = info->attrs[KCOLL_A_TUNABLE_NAME];
	struct nlattr *va = info->attrs[KCOLL_A_TUNABLE_VALUE];
	struct device_attribute *da;
	const char *val;
	ssize_t n;

	if (!na || !va) {
		NL_SET_ERR_MSG(info->extack, "KCOLL_A_TUNABLE_NAME and KCOLL_A_TUNABLE_VALUE are required");
		return -EINVAL;
	}
	da = kcoll_nl_tunable_find(nla_data(na));
	if (!da) {
		NL_SET_ERR_MSG_ATTR(info->extack, na, "no such tunable");
		return -ENOENT;
	}
	val = nla_data(va);
	n = da->store(kcoll_misc_device(), da, val, strlen(val));
	if (n < 0) {
		NL_SET_ERR_MSG_ATTR(info->extack, va,
				    "value refused (out of range or malformed)");
		return n;
	}
	pr_info("tunable %s set to %s by pid %d (netlink)\n",
		(char *)nla_data(na), val, task_tgid_nr(current));
	return 0;
}

/* ---------------------------------------------------------------- */
/* Family                                                            */
/* ---------------------------------------------------------------- */

static const struct genl_small_ops kcoll_nl_ops[] = {
	{
		.cmd = KCOLL_CMD_DEV_GET,
		.dumpit = kcoll_nl_dev_dump,
	},
	{
		.cmd = KCOLL_CMD_COMM_GET,
		.doit = kcoll_nl_comm_get,
		.dumpit = kcoll_nl_comm_dump,
	},
	{
		.cmd = KCOLL_CMD_STATS_GET,
		.doit = kcoll_nl_stats_get,
	},
	{
		.cmd = KCOLL_CMD_TUNABLE_GET,
		.doit = kcoll_nl_tunable_get,
		.dumpit = kcoll_nl_tunable_dump,
	},
	{
		.cmd = KCOLL_CMD_TUNABLE_SET,
		.doit = kcoll_nl_tunable_set,
		.flags = GENL_ADMIN_PERM,
	},
};

static struct genl_family kcoll_nl_family = {
	.name = KCOLL_GENL_NAME,
	.version = KCOLL_GENL_VERSION,
	.maxattr = KCOLL_A_MAX,
	.policy = kcoll_nl_policy,
	.module = THIS_MODULE,
	.small_ops = kcoll_nl_ops,
	.n_small_ops = ARRAY_SIZE(kcoll_nl_ops),
	.mcgrps = kcoll_nl_mcgrps,
	.n_mcgrps = ARRAY_SIZE(kcoll_nl_mcgrps),
	/* Every command gets strict validation. */
	.resv_start_op = KCOLL_CMD_TUNABLE_SET + 1,
	/*
	 * Not under genl_mutex, which every family without this shares: a
	 * request waiting for a comm's lock would hold up all of generic
	 * netlink on the node (until 2026-12-06). Nothing here relies on
	 * it: a tunable's store serializes itself, as sysfs already
	 * needs, and a dump's state is its own.
	 */
	.parallel_ops = true,
};

/* ---------------------------------------------------------------- */
/* Events                                                            */
/* ---------------------------------------------------------------- */

static struct sk_buff *kcoll_nl_event_new(size_t size, u8 cmd, void **hdr)
{
	struct sk_buff *skb;

	if (!READ_ONCE(kcoll_nl_registered) ||
	    !genl_has_listeners(&kcoll_nl_family, &init_net, 0))
		return NULL;
	skb = genlmsg_new(size, GFP_KERNEL);
	if (!skb)
		return NULL;
	*hdr = genlmsg_put(skb, 0, 0, &kcoll_nl_family, 0, cmd);
	if (!*hdr) {
		nlmsg_free(skb);
		return NULL;
	}
	return skb;
}

static void kcoll_nl_event_send(struct sk_buff *skb, void *hdr, int err)
{
	if (err) {
		nlmsg_free(skb);
		return;
	}
	genlmsg_end(skb, hdr);
	genlmsg_multicast(&kcoll_nl_family, skb, 0, 0, GFP_KERNEL);
}

void kcoll_nl_comm_event(struct kcoll_comm *comm, u8 cmd, u32 inflight)
{
	struct sk_buff *skb;
	void *hdr;
	int err;

	skb = kcoll_nl_event_new(NLMSG_DEFAULT_SIZE, cmd, &hdr);
	if (!skb)
		return;
	err = kcoll_nl_put_comm_id_ns(skb, comm, &init_pid_ns);
	if (!err && cmd == KCOLL_CMD_EV_COMM_CREATED) {
		struct ib_device *ibdev;

		/* Sent with no lock held; a device's removal clears
		 * comm->ibdev with dev_sem held for writing. */
		down_read(&comm->dev_sem);
		ibdev = READ_ONCE(comm->ibdev);
		if (ibdev)
			err = nla_put_string(skb, KCOLL_A_DEV_NAME,
					     dev_name(&ibdev->dev));
		up_read(&comm->dev_sem);
	}
	if (!err && cmd == KCOLL_CMD_EV_COMM_ABORTED)
		err = nla_put_u32(skb, KCOLL_A_COMM_INFLIGHT, inflight);
	if (!err && cmd == KCOLL_CMD_EV_COMM_ABORTED && READ_ONCE(comm->revoked))
		err = nla_put_u32(skb, KCOLL_A_PEER_RANK,
				  READ_ONCE(comm->revoker));
	kcoll_nl_event_send(skb, hdr, err);
}

void kcoll_nl_peer_lost(struct kcoll_comm *comm, u32 peer, int error)
{
	struct sk_buff *skb;
	void *hdr;
	int err;

	skb = kcoll_nl_event_new(NLMSG_DEFAULT_SIZE, KCOLL_CMD_EV_PEER_LOST,
				 &hdr);
	if (!skb)
		return;
	err = kcoll_nl_put_comm_id_ns(skb, comm, &init_pid_ns) ?:
	      nla_put_u32(skb, KCOLL_A_PEER_RANK, peer) ?:
	      nla_put_s32(skb, KCOLL_A_ERRNO, error);
	kcoll_nl_event_send(skb, hdr, err);
}

void kcoll_nl_op_timeout(struct kcoll_comm *comm, u64 seq, u8 opcode,
			 u32 timeout_ms, const u32 *missing, u32 nmissing)
{
	struct sk_buff *skb;
	void *hdr;
	int err;

	skb = kcoll_nl_event_new(NLMSG_DEFAULT_SIZE +
				 (size_t)nmissing * sizeof(u32),
				 KCOLL_CMD_EV_OP_TIMEOUT, &hdr);
	if (!skb)
		return;
	err = kcoll_nl_put_comm_id_ns(skb, comm, &init_pid_ns) ?:
	      kcoll_nl_put_u64(skb, KCOLL_A_OP_SEQ, seq) ?:
	      nla_put_u8(skb, KCOLL_A_OP_OPCODE, opcode) ?:
	      nla_put_u32(skb, KCOLL_A_OP_TIMEOUT_MS, timeout_ms);
	if (!err && nmissing)
		err = nla_put(skb, KCOLL_A_MISSING_RANKS,
			      nmissing * sizeof(u32), missing);
	kcoll_nl_event_send(skb, hdr, err);
}

void kcoll_nl_dev_event(struct ib_device *ibdev, u8 cmd)
{
	struct sk_buff *skb;
	void *hdr;
	int err;

	skb = kcoll_nl_event_new(NLMSG_DEFAULT_SIZE, cmd, &hdr);
	if (!skb)
		return;
	err = nla_put_string(skb, KCOLL_A_DEV_NAME, dev_name(&ibdev->dev)) ?:
	      nla_put_u32(skb, KCOLL_A_DEV_INDEX, ibdev->index);
	kcoll_nl_event_send(skb, hdr, err);
}

int kcoll_nl_init(void)
{
	int err;

	err = genl_register_family(&kcoll_nl_family);
	if (err) {
		pr_err("cannot register generic netlink family: %d\n", err);
		return err;
	}
	WRITE_ONCE(kcoll_nl_registered, true);
	return 0;
}

void kcoll_nl_exit(void)
{
	WRITE_ONCE(kcoll_nl_registered, false);
	genl_unregister_family(&kcoll_nl_family);
}
