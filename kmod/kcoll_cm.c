// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll connection setup with kernel rdma_cm. Within a communicator the
 * higher rank connects (the active side: resolve, route, connect with a
 * hello in the REQ private data, retried while the peer's communicator
 * does not exist yet) and the lower one accepts (the passive side: find
 * the communicator by uid, rank and key, check the hello, accept or
 * reject with a reason). Once a lane is established both sides prove the
 * key on it (kcoll_auth.c) before the connection counts as up. The QPs,
 * completions and state changes are kcoll_conn.c's.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/random.h>
#include <linux/ratelimit.h>
#include <linux/slab.h>
#include <crypto/algapi.h>
#include <rdma/ib_cm.h>

#include "kcoll.h"
#include "kcoll_types.h"
#include "kcoll_comm.h"
#include "kcoll_auth.h"
#include "kcoll_quota.h"
#include "kcoll_local.h"
#include "kcoll_coll.h"
#include "kcoll_conn.h"
#include "kcoll_xport.h"
#include "kcoll_sysfs.h"
#include "kcoll_tune.h"
#include "kcoll_ib.h"
#include "kcoll_cost.h"
#include "kcoll_stats.h"

/* ------------------------------------------------------------------ */
/* Active side                                                          */
/* ------------------------------------------------------------------ */

static void kcoll_cm_unbusy(struct kcoll_comm *comm);
static void kcoll_cm_event(struct kcoll_lane *lane, struct rdma_cm_id *id,
			   struct rdma_cm_event *ev);

int kcoll_rank_sockaddr(const struct kcoll_rank_addr *ra,
			struct sockaddr_storage *ss)
{
	static const u8 v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	if (memcmp(ra->addr, v4mapped, sizeof(v4mapped)))
		return -EAFNOSUPPORT;
	sin->sin_family = AF_INET;
	memcpy(&sin->sin_addr.s_addr, ra->addr + 12, 4);
	sin->sin_port = htons(ra->port ? ra->port :
			      kcoll_listen_port);
	return 0;
}

/*
 * Release the verbs objects of every lane (a failed attempt, or the end);
 * not from a handler of theirs.
 */
void kcoll_conn_teardown_id(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;
	unsigned int i;

	for (i = 0; i < KCOLL_MAX_LANES; i++) {
		struct kcoll_lane *lane = &conn->lane[i];
		struct rdma_cm_id *id = lane->cm_id;

		if (!id)
			continue;
		if (lane->qp) {
			/*
			 * Handlers run meanwhile (another connection's, or
			 * this one's completions before the drain's marker):
			 * a receive posted again after the drain's marker
			 * would complete after the ring is freed, and a
			 * kill or a send would reach a destroyed QP.
			 */
			mutex_lock(&comm->lock);
			lane->draining = true;
			mutex_unlock(&comm->lock);
			rdma_disconnect(id);
			ib_drain_qp(lane->qp);
			rdma_destroy_qp(id);
			mutex_lock(&comm->lock);
			lane->qp = NULL;
			mutex_unlock(&comm->lock);
		}
		rdma_destroy_id(id);
		lane->cm_id = NULL;
		kcoll_lane_free_rx(lane);
	}
	conn->lanes_up = 0;
	kcoll_conn_free_cq(conn);
}

/* Active side: start connecting lane @idx (lane 0 first, then the rest). */
static int kcoll_conn_connect(struct kcoll_conn *conn, unsigned int idx)
{
	struct kcoll_lane *lane = &conn->lane[idx];
	struct kcoll_comm *comm = conn->comm;
	struct sockaddr_storage dst;
	struct rdma_cm_id *id;
	int err;

	err = kcoll_rank_sockaddr(&comm->ranks[conn->peer], &dst);
	if (err)
		return err;
	id = rdma_create_id(&init_net, kcoll_cm_handler, lane, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	lane->cm_id = id;
	if (!idx)
		conn->state = KCOLL_CONN_CONNECTING;
	err = rdma_resolve_addr(id, (struct sockaddr *)&comm->self_addr,
				(struct sockaddr *)&dst, 2000);
	if (err) {
		lane->cm_id = NULL;
		rdma_destroy_id(id);
	}
	return err;
}

/* Accepting side: the peer proved the key on the first QP. */
static bool kcoll_conn_proven(const struct kcoll_conn *conn)
{
	return conn->lane[0].authed;
}

/*
 * Accepting side: start unwinding the attempt, which failed with @err
 * before it proved the key. Must hold comm->lock.
 */
static void kcoll_conn_unwind_begin(struct kcoll_conn *conn, int err)
{
	struct kcoll_comm *comm = conn->comm;

	lockdep_assert_held(&comm->lock);
	conn->unwinding = true;
	kcoll_stat_add(KCOLL_STAT_ATTEMPTS_DROPPED, 1);
	/* What COMM_CREATE reports if no later attempt gets through. */
	conn->setup_err = err;
	pr_warn_ratelimited("comm %llx rank %u: a connection as rank %u failed before it proved the key (%pe): dropped, waiting for rank %u again\n",
			    comm->uid, comm->rank, conn->peer, ERR_PTR(err),
			    conn->peer);
}

/*
 * The attempt being set up failed with @err. On the accepting side,
 * before its first QP proved the key, whoever made it may hold no more
 * than a hello it captured (a replayer cannot answer our nonce): that
 * must not end the setup. The attempt is torn down
 * (kcoll_conn_unwind_work()) and the connection waits for its peer
 * again, whose own hellos meanwhile were refused as duplicates and are
 * tried again. Anything else fails the setup. Must hold comm->lock.
 */
void kcoll_conn_setup_failed(struct kcoll_conn *conn, int err)
{
	struct kcoll_comm *comm = conn->comm;

	lockdep_assert_held(&comm->lock);
	if (conn->active || conn->state != KCOLL_CONN_CONNECTING ||
	    comm->shutting_down || comm->error || kcoll_conn_proven(conn)) {
		kcoll_conn_fail_setup(conn, err);
		return;
	}
	if (conn->unwinding)
		return;
	kcoll_conn_unwind_begin(conn, err);
	kcoll_mod_delayed(&conn->retry, 0);
}

/*
 * An accept of kcoll_conn_request() is over: its id is the lane's, or
 * gone. Must hold comm->lock.
 */
static void kcoll_conn_accepted(struct kcoll_conn *conn)
{
	lockdep_assert_held(&conn->comm->lock);
	if (!--conn->accepting)
		wake_up_all(&conn->comm->wait);
}

/*
 * Accepting side, conn->retry: the AUTH deadline of the attempt (a first
 * QP accepted auth_timeout_ms ago that has not proved the key is dropped
 * as above), or the unwinding asked for. The attempt's ids, QPs, CQ,
 * staging and eager slots go; then the connection is idle and takes the
 * next hello (until then kcoll_conn_request() refuses them as
 * duplicates).
 */
static void kcoll_conn_unwind_work(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;
	unsigned int i;
	bool go;

	mutex_lock(&comm->lock);
	/* Not an earlier attempt's run, nor one asked for and done. */
	if (!conn->unwinding && conn->state == KCOLL_CONN_CONNECTING &&
	    !comm->shutting_down && !comm->error &&
	    !kcoll_conn_proven(conn) &&
	    time_after_eq(jiffies, conn->auth_due))
		kcoll_conn_unwind_begin(conn, -ETIMEDOUT);
	go = conn->unwinding;
	mutex_unlock(&comm->lock);
	if (!go)
		return;
	/*
	 * An accept between its QP and its id's being the lane's (the peer
	 * may send as soon as the REP is out) finishes first, or its QP
	 * would be left behind. No new one starts while unwinding.
	 */
	wait_event(comm->wait, !READ_ONCE(conn->accepting));
	kcoll_conn_teardown_id(conn);
	kcoll_conn_free_stage(conn);
	mutex_lock(&comm->lock);
	for (i = 0; i < KCOLL_MAX_LANES; i++) {
		conn->lane[i].established = false;
		conn->lane[i].authed = false;
	}
	conn->local = false;
	conn->eager = false;
	conn->peer_left = false;
	conn->unwinding = false;
	if (conn->state == KCOLL_CONN_CONNECTING)
		conn->state = KCOLL_CONN_IDLE;
	mutex_unlock(&comm->lock);
}

void kcoll_conn_retry_work(struct work_struct *work)
{
	struct kcoll_conn *conn = container_of(to_delayed_work(work),
					       struct kcoll_conn, retry);
	struct kcoll_comm *comm = conn->comm;
	int err;

	if (!conn->active) {
		kcoll_conn_unwind_work(conn);
		return;
	}
	/* The first try, or one after an attempt whose first QP was never
	 * accepted (kcoll_conn_rejected()): no staging to free. */
	kcoll_conn_teardown_id(conn);
	mutex_lock(&comm->lock);
	if (comm->shutting_down || comm->error) {
		mutex_unlock(&comm->lock);
		return;
	}
	if (time_after(jiffies, comm->connect_deadline)) {
		pr_warn_ratelimited("comm %llx rank %u: rank %u unreachable after %u attempt(s)\n",
				    comm->uid, comm->rank, conn->peer,
				    conn->attempts);
		kcoll_conn_fail_setup(conn, -ETIMEDOUT);
		mutex_unlock(&comm->lock);
		return;
	}
	conn->attempts++;
	mutex_unlock(&comm->lock);
	err = kcoll_conn_connect(conn, 0);
	if (err) {
		mutex_lock(&comm->lock);
		kcoll_conn_fail_setup(conn, err);
		mutex_unlock(&comm->lock);
	}
}

/* The longest wait between two attempts to reach a peer. */
#define KCOLL_RETRY_MAX_MS	5000U

/*
 * Try again later (the peer's communicator may not exist yet): after 20
 * ms, doubling to 200 ms, and once the communicator has waited longer
 * than 1.6 s, after an eighth of the time it has waited, an eighth more
 * or less at random so that the ranks waiting for one late peer do not
 * knock in step. A peer that comes t seconds late is reached about t/8
 * later; one that never comes costs an rdma_cm id, a QP and its receives
 * every few seconds per connection instead of every 200 ms. The gap is
 * at most a sixteenth of the connect timeout (within 200 ms and
 * KCOLL_RETRY_MAX_MS) and a quarter of what is left of it (200 ms at
 * least), so that a peer coming just before the deadline is still tried
 * (a 2026-12-05 review of the first version, which went quiet for the
 * last gap); never past the deadline, which then fails it.
 */
static void kcoll_conn_retry_later(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;
	unsigned long now = jiffies, delay;
	unsigned int waited = jiffies_to_msecs(now - comm->connect_start);
	unsigned int span = jiffies_to_msecs(comm->connect_deadline -
					     comm->connect_start);
	long left = (long)(comm->connect_deadline - now);
	unsigned int ms, cap;

	ms = max(min(20U << min(conn->attempts, 4U), 200U), waited / 8);
	ms = ms - ms / 8 + get_random_u32() % (ms / 4 + 1);
	cap = clamp(span / 16, 200U, KCOLL_RETRY_MAX_MS);
	if (left > 0)
		cap = min(cap, max(jiffies_to_msecs(left) / 4, 200U));
	delay = msecs_to_jiffies(min(ms, cap));
	if (left >= 0 && delay > (unsigned long)left + 1)
		delay = left + 1;
	kcoll_queue_delayed(&conn->retry, delay);
}

/*
 * A peer's cost model inputs (0: it does not know): the communicator's
 * model is the largest of each over every rank, so every rank, having
 * heard every other one, chooses alike. Must hold comm->lock.
 */
static void kcoll_comm_model_merge(struct kcoll_comm *comm, __le32 alpha_ns,
				   __le32 beta_ps, __le32 gamma_ps)
{
	struct kcoll_model *m = &comm->model;

	lockdep_assert_held(&comm->lock);
	m->alpha_ns = max(m->alpha_ns, le32_to_cpu(alpha_ns));
	m->beta_ps = max(m->beta_ps, le32_to_cpu(beta_ps));
	m->gamma_ps = max(m->gamma_ps, le32_to_cpu(gamma_ps));
}

/*
 * rdma_set_ack_timeout() of @lane's @id with the knob read once: the lane
 * and its communicator keep what the QP was given, which the drain and
 * stall budgets are computed from (the knob may change meanwhile).
 */
static void kcoll_lane_set_ack_timeout(struct kcoll_lane *lane,
				       struct rdma_cm_id *id)
{
	struct kcoll_comm *comm = lane->conn->comm;
	int t = kcoll_ack_timeout(), old = atomic_read(&comm->ack_max);

	WRITE_ONCE(lane->ack_timeout, t);
	while (t > old && !atomic_try_cmpxchg(&comm->ack_max, &old, t))
		;
	rdma_set_ack_timeout(id, t);
}

static int kcoll_conn_send_hello(struct kcoll_lane *lane,
				 struct rdma_cm_id *id)
{
	struct kcoll_conn *conn = lane->conn;
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_wire_hello hello = {
		.version = KCOLL_WIRE_VERSION,
		.flags = kcoll_hello_lanes(lane->idx, conn->nlanes) |
			 (conn->local_offer ? KCOLL_HELLO_LOCAL : 0) |
			 (conn->eager_offer ? KCOLL_HELLO_EAGER : 0),
		.magic = cpu_to_le32(KCOLL_WIRE_MAGIC),
		.uid = cpu_to_le64(comm->uid),
		.src_rank = cpu_to_le32(comm->rank),
		.dst_rank = cpu_to_le32(conn->peer),
		.nranks = cpu_to_le32(comm->nranks),
	};
	struct rdma_conn_param param = {
		.private_data = &hello,
		.private_data_len = sizeof(hello),
		.responder_resources = 1,
		.initiator_depth = 1,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};

	int err;

	/* A fresh nonce per attempt; the key itself never goes out. */
	err = kcoll_auth_hello_sign(comm, &hello);
	if (err)
		return err;
	memcpy(lane->nonce_hello, hello.nonce, KCOLL_AUTH_NONCE);
	lane->hello = hello;
	lane->established = false;
	lane->authed = false;
	/* How long a lost packet stalls the QP before it is resent. */
	kcoll_lane_set_ack_timeout(lane, id);
	return rdma_connect_locked(id, &param);
}

/* A REJECTED event on the active side: retry, or fail with the reason. */
static void kcoll_conn_rejected(struct kcoll_lane *lane,
				struct rdma_cm_event *ev)
{
	const struct kcoll_wire_reject *rej = ev->param.conn.private_data;
	struct kcoll_conn *conn = lane->conn;
	struct kcoll_comm *comm = conn->comm;
	int reason = 0;

	/*
	 * Only a connection being set up is rejected. ib_cm also delivers
	 * a REJ to an established id: a peer that sends one (a node of the
	 * communicator, crafting CM MADs) ends the connection as a
	 * disconnect would, its operations failed and its grants undone;
	 * after that, or for an idle one, there is nothing left to end.
	 */
	if (conn->state == KCOLL_CONN_UP) {
		kcoll_conn_kill(conn, -ECONNRESET);
		return;
	}
	if (conn->state != KCOLL_CONN_CONNECTING)
		return;
	/*
	 * Connecting side, a lane whose accept proved the key (while the
	 * other lanes connect): its peer, or someone on the path, ended an
	 * established QP, as a disconnect would. The setup fails, as for a
	 * disconnect: a retry would tear down lanes whose handlers still
	 * run and set up again over the first attempt's staging.
	 */
	if (conn->active && lane->authed) {
		pr_warn_ratelimited("comm %llx rank %u: rank %u rejected QP %u of %u after accepting it\n",
				    comm->uid, comm->rank, conn->peer,
				    lane->idx, conn->nlanes);
		kcoll_conn_fail_setup(conn, -ECONNRESET);
		return;
	}
	/* The accepting side: the connecting one gave up (ib_cm's REJ for
	 * an accepted REQ whose id went away). It does not dial back. */
	if (!conn->active) {
		kcoll_conn_setup_failed(conn, -ECONNRESET);
		return;
	}
	if (ev->status == IB_CM_REJ_CONSUMER_DEFINED && rej &&
	    ev->param.conn.private_data_len >= sizeof(*rej) &&
	    le32_to_cpu(rej->magic) == KCOLL_WIRE_MAGIC)
		reason = rej->reason;
	switch (reason) {
	case KCOLL_REJ_KEY:
		pr_warn_ratelimited("comm %llx rank %u: rank %u refused our key\n",
				    comm->uid, comm->rank, conn->peer);
		kcoll_conn_fail_setup(conn, -EACCES);
		return;
	case KCOLL_REJ_VERSION:
		pr_warn_ratelimited("comm %llx rank %u: rank %u speaks another kcoll wire version (this node: %u)\n",
				    comm->uid, comm->rank, conn->peer,
				    KCOLL_WIRE_VERSION);
		kcoll_conn_fail_setup(conn, -EPROTONOSUPPORT);
		return;
	case KCOLL_REJ_TAKEN:
		pr_warn_ratelimited("comm %llx rank %u: rank %u is connected to another process as our rank (a second process of rank %u?)\n",
				    comm->uid, comm->rank, conn->peer,
				    comm->rank);
		kcoll_conn_fail_setup(conn, -EADDRINUSE);
		return;
	case KCOLL_REJ_DEVICE:
		pr_warn_ratelimited("comm %llx rank %u: rank %u does not use the device our hello reached\n",
				    comm->uid, comm->rank, conn->peer);
		kcoll_conn_fail_setup(conn, -ENXIO);
		return;
	case KCOLL_REJ_RANK:
	case KCOLL_REJ_DUP:
		if (lane->idx) {
			pr_warn_ratelimited("comm %llx rank %u: rank %u refused QP %u of %u: does its kcoll predate several QPs per peer? (qps_per_peer=1 talks to it)\n",
					    comm->uid, comm->rank, conn->peer,
					    lane->idx, conn->nlanes);
			kcoll_conn_fail_setup(conn, -EPROTONOSUPPORT);
			return;
		}
		/*
		 * Another attempt as our rank, not yet proven, holds our
		 * place there: one of ours the peer still holds, or a hello
		 * of ours that was captured and replayed. The peer drops it
		 * once it fails to prove the key (auth_timeout_ms at most).
		 * Try again; COMM_CREATE says so if no try gets through. (A
		 * place a proven connection holds is KCOLL_REJ_TAKEN.)
		 */
		if (reason == KCOLL_REJ_DUP) {
			if (!conn->peer_dup)
				pr_info_ratelimited("comm %llx rank %u: rank %u holds another connection as our rank; trying again\n",
						    comm->uid, comm->rank,
						    conn->peer);
			conn->peer_dup = true;
			kcoll_conn_retry_later(conn);
			return;
		}
		pr_warn_ratelimited("comm %llx rank %u: rank %u refused the rank table (%d)\n",
				    comm->uid, comm->rank, conn->peer, reason);
		kcoll_conn_fail_setup(conn, -EINVAL);
		return;
	case KCOLL_REJ_STALE:
		/* Every hello of ours is newer than the one before; the
		 * next one gets in once the clock has passed what the peer
		 * saw. */
		if (!lane->idx) {
			if (!conn->peer_stale)
				pr_info_ratelimited("comm %llx rank %u: rank %u refused our hello as no newer than one it saw from us (a replay of ours got there first, or this node's clock went back); trying again\n",
						    comm->uid, comm->rank,
						    conn->peer);
			conn->peer_stale = true;
			kcoll_conn_retry_later(conn);
			return;
		}
		fallthrough;
	default:
		/* Not there yet (no comm, no listener) or no room there
		 * (REJ_NOMEM: its memory or its user's limits): try again.
		 * Lanes after the first go to a peer that has accepted one. */
		if (reason == KCOLL_REJ_NOMEM && !conn->peer_no_room)
			pr_info_ratelimited("comm %llx rank %u: rank %u has no room for our connection (memory or its user's limits on its node); trying again\n",
					    comm->uid, comm->rank, conn->peer);
		/* Sticky: its later answers may be "no such communicator"
		 * once its own setup gave up. */
		if (reason == KCOLL_REJ_NOMEM)
			conn->peer_no_room = true;
		if (lane->idx) {
			pr_warn_ratelimited("comm %llx rank %u: rank %u refused QP %u of %u (%d)\n",
					    comm->uid, comm->rank, conn->peer,
					    lane->idx, conn->nlanes, reason);
			kcoll_conn_fail_setup(conn, -ECONNREFUSED);
			return;
		}
		kcoll_conn_retry_later(conn);
	}
}

/* ------------------------------------------------------------------ */
/* Passive side                                                         */
/* ------------------------------------------------------------------ */

static void kcoll_reject(struct rdma_cm_id *id, u8 reason)
{
	struct kcoll_wire_reject rej = {
		.magic = cpu_to_le32(KCOLL_WIRE_MAGIC),
		.reason = reason,
	};

	rdma_reject(id, &rej, sizeof(rej), IB_CM_REJ_CONSUMER_DEFINED);
}

/*
 * CONNECT_REQUEST on the listener: @id is new. Returns 0 (accepted or
 * rejected; the listener keeps @id or it is destroyed with the reject) or
 * non-zero to have rdma_cm destroy @id.
 */
static int kcoll_conn_request(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	const struct kcoll_wire_hello *h = ev->param.conn.private_data;
	struct kcoll_wire_accept acc = {
		.magic = cpu_to_le32(KCOLL_WIRE_MAGIC),
	};
	struct rdma_conn_param param = {
		.private_data = &acc,
		.private_data_len = sizeof(acc),
		.responder_resources = 1,
		.initiator_depth = 1,
		.rnr_retry_count = 7,
	};
	struct kcoll_lane *lane = NULL;
	struct kcoll_comm *comm;
	struct ib_device *ours;
	struct kcoll_conn *conn;
	u32 src, dst, n, idx, nlanes;
	bool local, other, newer;
	u64 stamp;
	int err;

	switch (kcoll_wire_hello_check(h, ev->param.conn.private_data_len,
				       KCOLL_MAX_LANES)) {
	case 0:
		break;
	case KCOLL_WIRE_HELLO_VERSION:
		pr_warn_ratelimited("refusing a connection from %pISc: kcoll wire version %u, this node speaks %u (upgrade the nodes together)\n",
				    &id->route.addr.dst_addr, h->version,
				    KCOLL_WIRE_VERSION);
		kcoll_reject(id, KCOLL_REJ_VERSION);
		return -ECONNREFUSED;
	case KCOLL_WIRE_HELLO_LANES:
		pr_warn_ratelimited("refusing a connection for QP %u of %u (from %pISc)\n",
				    kcoll_hello_lane(h->flags),
				    kcoll_hello_nlanes(h->flags),
				    &id->route.addr.dst_addr);
		kcoll_reject(id, KCOLL_REJ_RANK);
		return -ECONNREFUSED;
	default:
		pr_warn_ratelimited("refusing a connection with a foreign hello (from %pISc)\n",
				    &id->route.addr.dst_addr);
		kcoll_reject(id, KCOLL_REJ_VERSION);
		return -ECONNREFUSED;
	}
	src = le32_to_cpu(h->src_rank);
	dst = le32_to_cpu(h->dst_rank);
	n = le32_to_cpu(h->nranks);
	idx = kcoll_hello_lane(h->flags);
	nlanes = kcoll_hello_nlanes(h->flags);
	comm = kcoll_comm_find_hello(h, &other);
	if (!comm && other) {
		/*
		 * Refused as if there were no such communicator: whoever
		 * lacks the key learns nothing from the answer (which
		 * (uid, rank) exist), and a rank whose own communicator is
		 * not listed yet while another user squats its uid and rank
		 * with another key retries instead of failing. The
		 * connecting side times out; the reason is logged here.
		 */
		pr_warn_ratelimited("comm %llx rank %u: refusing rank %u from %pISc: its hello is not signed with our key\n",
				    le64_to_cpu(h->uid), dst, src,
				    &id->route.addr.dst_addr);
		kcoll_reject(id, KCOLL_REJ_NOCOMM);
		return -ECONNREFUSED;
	}
	if (!comm) {
		/* The devices tunable: on a device this node does not use,
		 * no communicator of ours will ever be there. */
		if (!kcoll_ib_enabled(id->device)) {
			pr_warn_ratelimited("refusing a connection from %pISc on %s: not in the devices tunable\n",
					    &id->route.addr.dst_addr,
					    dev_name(&id->device->dev));
			kcoll_reject(id, KCOLL_REJ_DEVICE);
		} else {
			kcoll_reject(id, KCOLL_REJ_NOCOMM);
		}
		return -ECONNREFUSED;
	}
	/* An existing communicator keeps its device, whatever the tunable
	 * says now; a hello on another is refused as such at once. */
	ours = READ_ONCE(comm->ibdev);	/* set once, by the first connect */
	if (id->device != ours) {
		pr_warn_ratelimited("comm %llx rank %u: refusing rank %u from %pISc on %s: the communicator uses %s\n",
				    comm->uid, comm->rank, src,
				    &id->route.addr.dst_addr,
				    dev_name(&id->device->dev),
				    ours ? dev_name(&ours->dev) : "none");
		kcoll_reject(id, KCOLL_REJ_DEVICE);
		goto out_put;
	}
	if (!kcoll_wire_hello_ranks_ok(h, comm->nranks, comm->rank)) {
		pr_warn_ratelimited("comm %llx rank %u: refusing rank %u of %u (we have %u ranks)\n",
				    comm->uid, comm->rank, src, n,
				    comm->nranks);
		kcoll_reject(id, KCOLL_REJ_RANK);
		goto out_put;
	}
	/* The intra-node path, if offered, and only if the connecting
	 * rank's communicator really is in this module. */
	local = !idx && nlanes == 1 && (h->flags & KCOLL_HELLO_LOCAL) &&
		kcoll_intra_node() && !comm->devmem &&
		kcoll_comm_hello_is_ours(comm, h);
	mutex_lock(&comm->lock);
	conn = comm->conns[src];
	if (!conn) {
		/* Listed, its connections not allocated yet (or never, the
		 * creation failing): as if it did not exist yet. */
		mutex_unlock(&comm->lock);
		kcoll_reject(id, KCOLL_REJ_NOCOMM);
		goto out_put;
	}
	/* Failed or going: as if it were gone already (the connecting
	 * side's deadline then says "unreachable", not "duplicate"). */
	if (comm->shutting_down || comm->error) {
		mutex_unlock(&comm->lock);
		kcoll_reject(id, KCOLL_REJ_NOCOMM);
		goto out_put;
	}
	/*
	 * A first QP counts only if newer than every hello seen from that
	 * rank (each of its attempts is: kcoll_auth_hello_sign()): whoever
	 * captured hellos of a rank that was retrying, the listener not
	 * there yet, cannot replay them to hold its place once its next
	 * hello has come, nor replay one twice. The other QPs of an
	 * attempt, signed after its first but started together, may come
	 * in any order (or one again from ib_cm after a lost REQ): each
	 * must only be newer than the first QP it joins, which a QP of an
	 * older attempt is not.
	 */
	stamp = kcoll_hello_stamp(h);
	newer = stamp > (idx ? kcoll_nonce_stamp(conn->lane[0].nonce_hello) :
			       conn->hello_seen);
	if (stamp > conn->hello_seen)
		conn->hello_seen = stamp;
	/* The first QP finds the connection idle and sets the number of
	 * QPs; the others join it while it is being set up, not while an
	 * attempt that failed is unwound. */
	if (conn->unwinding ||
	    (!idx && conn->state != KCOLL_CONN_IDLE) ||
	    (idx && (conn->state != KCOLL_CONN_CONNECTING ||
		     conn->nlanes != nlanes || conn->lane[idx].cm_id ||
		     !conn->lane[0].cm_id))) {
		/*
		 * A first QP for a place whose peer has proved the key (up,
		 * or was) will never get in: a second process of that rank
		 * fails at once. One that an attempt not yet proven holds
		 * may get in once it is unwound: busy, try again.
		 */
		bool taken = !idx && !conn->unwinding &&
			     (conn->state != KCOLL_CONN_CONNECTING ||
			      kcoll_conn_proven(conn));

		/*
		 * A newer first QP than the attempt that holds the place,
		 * not yet proven: that one is a replay, or one its rank
		 * gave up (its REP lost). It is unwound now, as a failed
		 * attempt is, not at its AUTH deadline; this one is tried
		 * again.
		 */
		if (!idx && !taken && newer && !conn->unwinding)
			kcoll_conn_setup_failed(conn, -ECONNRESET);
		mutex_unlock(&comm->lock);
		kcoll_reject(id, taken ? KCOLL_REJ_TAKEN : KCOLL_REJ_DUP);
		goto out_put;
	}
	if (!newer) {
		mutex_unlock(&comm->lock);
		kcoll_stat_add(KCOLL_STAT_HELLOS_STALE, 1);
		pr_warn_ratelimited("comm %llx rank %u: refusing a hello of rank %u (from %pISc) no newer than one it sent before: a replay, or its clock went back\n",
				    comm->uid, comm->rank, src,
				    &id->route.addr.dst_addr);
		kcoll_reject(id, KCOLL_REJ_STALE);
		goto out_put;
	}
	/*
	 * More QPs than COMM_CREATE charged for this connection (the
	 * peer's node has a larger qps_per_peer, or the peer asks for
	 * more): charged to the user now, or refused (KCOLL_REJ_NOMEM: the
	 * connecting rank tries again until its connect deadline, by which
	 * this user may have made room).
	 */
	if (!idx && nlanes > conn->lanes_charged) {
		if (kcoll_quota_charge(comm->quota, KCOLL_Q_QPS,
				       nlanes - conn->lanes_charged)) {
			/* What COMM_CREATE reports if no try gets through. */
			conn->setup_err = -EDQUOT;
			mutex_unlock(&comm->lock);
			kcoll_reject(id, KCOLL_REJ_NOMEM);
			goto out_put;
		}
		comm->quota_qps += nlanes - conn->lanes_charged;
		conn->lanes_charged = nlanes;
	}
	if (!idx) {
		conn->state = KCOLL_CONN_CONNECTING;
		conn->auth_due = jiffies +
				 msecs_to_jiffies(kcoll_auth_timeout_ms());
		kcoll_conn_set_lanes(conn, nlanes);
		conn->local = local;
		conn->eager = nlanes == 1 &&
			      (h->flags & KCOLL_HELLO_EAGER) && kcoll_eager() &&
			      !comm->devmem && kcoll_eager_fits(comm);
		acc.flags = (local ? KCOLL_ACCEPT_LOCAL : 0) |
			    (conn->eager ? KCOLL_ACCEPT_EAGER : 0) |
			    KCOLL_ACCEPT_PING;
	}
	lane = &conn->lane[idx];
	comm->cm_busy++;
	/* Until @id is the lane's, an unwinding waits (kcoll_conn_accepted()). */
	conn->accepting++;
	acc.alpha_ns = cpu_to_le32(comm->mine.alpha_ns);
	acc.beta_ps = cpu_to_le32(comm->mine.beta_ps);
	acc.gamma_ps = cpu_to_le32(comm->mine.gamma_ps);
	/* Our proof, over the hello: the connecting side checks it, then
	 * proves itself over both nonces (KCOLL_MSG_AUTH). */
	err = kcoll_auth_accept_sign(comm, h, &acc);
	memcpy(lane->nonce_hello, h->nonce, KCOLL_AUTH_NONCE);
	memcpy(lane->nonce_accept, acc.nonce, KCOLL_AUTH_NONCE);
	lane->established = false;
	lane->authed = false;
	mutex_unlock(&comm->lock);
	if (!err)
		err = kcoll_lane_create_qp(lane, id);
	if (err) {
		/* Our own lack of room: the peer tries again; if no try
		 * gets through, COMM_CREATE reports it, not a timeout. */
		kcoll_reject(id, KCOLL_REJ_NOMEM);
		mutex_lock(&comm->lock);
		conn->setup_err = err;
		mutex_unlock(&comm->lock);
		goto out_idle;
	}
	kcoll_lane_set_ack_timeout(lane, id);
	err = rdma_accept(id, &param);
	if (err) {
		/* Our non-zero return destroys @id; the QP goes first. */
		kcoll_lane_destroy_qp(lane, id);
		kcoll_conn_free_cq(conn);
		goto out_idle;
	}
	mutex_lock(&comm->lock);
	conn->setup_err = 0;	/* this try got through */
	id->context = lane;
	lane->cm_id = id;
	/* Proven by then, or dropped (kcoll_conn_unwind_work()); not if a
	 * newer hello asked for that at once meanwhile. */
	if (!idx && !conn->unwinding)
		kcoll_mod_delayed(&conn->retry,
				  (long)(conn->auth_due - jiffies) > 0 ?
				  conn->auth_due - jiffies : 0);
	kcoll_conn_accepted(conn);
	kcoll_cm_unbusy(comm);
	mutex_unlock(&comm->lock);
	kcoll_comm_put(comm);
	return 0;

out_idle:
	mutex_lock(&comm->lock);
	kcoll_conn_accepted(conn);
	/* A later QP's failure fails the setup (the active side does not
	 * retry once the first is accepted), unless nothing proved the key
	 * yet: then the attempt is unwound. */
	if (idx)
		kcoll_conn_setup_failed(conn, err);
	else if (!conn->unwinding)
		conn->state = KCOLL_CONN_IDLE;
	kcoll_cm_unbusy(comm);
	mutex_unlock(&comm->lock);
out_put:
	kcoll_comm_put(comm);
	return -ECONNREFUSED;
}

/* ------------------------------------------------------------------ */
/* The event handler                                                    */
/* ------------------------------------------------------------------ */

int kcoll_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct kcoll_lane *lane = id->context;
	struct kcoll_conn *conn;
	struct kcoll_comm *comm;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		return kcoll_conn_request(id, ev);
	if (!lane)	/* the listener itself */
		return 0;
	conn = lane->conn;
	comm = conn->comm;
	pr_debug("comm %llx peer %u QP %u: %s (%d)\n", comm->uid, conn->peer,
		 lane->idx, rdma_event_msg(ev->event), ev->status);
	/* A shutting-down comm is tearing this id down: touch nothing. */
	mutex_lock(&comm->lock);
	if (comm->shutting_down) {
		mutex_unlock(&comm->lock);
		return 0;
	}
	comm->cm_busy++;
	mutex_unlock(&comm->lock);
	kcoll_cm_event(lane, id, ev);
	mutex_lock(&comm->lock);
	kcoll_cm_unbusy(comm);
	mutex_unlock(&comm->lock);
	return 0;
}

static void kcoll_cm_unbusy(struct kcoll_comm *comm)
{
	lockdep_assert_held(&comm->lock);
	if (!--comm->cm_busy)
		wake_up_all(&comm->wait);
}

/*
 * @lane counts: the connection is up once all its lanes do. Returns true
 * when the caller is to start the other lanes (the active side's first).
 * Must hold comm->lock.
 */
static bool kcoll_lane_ready(struct kcoll_lane *lane)
{
	struct kcoll_conn *conn = lane->conn;

	lockdep_assert_held(&conn->comm->lock);
	conn->lanes_up++;
	if (conn->lanes_up == conn->nlanes)
		kcoll_conn_up(conn);
	return conn->active && !lane->idx && conn->nlanes > 1;
}

/*
 * Connecting side: our proof over both nonces, the first message on
 * @lane's QP (before the connection is up, so not through
 * kcoll_conn_send_msg()). Must hold comm->lock.
 */
static int kcoll_lane_send_auth(struct kcoll_lane *lane)
{
	struct kcoll_conn *conn = lane->conn;
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_wire_auth a = {
		.type = KCOLL_MSG_AUTH,
		.alpha_ns = cpu_to_le32(comm->mine.alpha_ns),
		.beta_ps = cpu_to_le32(comm->mine.beta_ps),
		.gamma_ps = cpu_to_le32(comm->mine.gamma_ps),
	};
	struct ib_sge sge = { .addr = (uintptr_t)&a, .length = sizeof(a) };
	struct ib_send_wr wr = {
		.wr_cqe = &lane->tx_cqe,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_INLINE | IB_SEND_SIGNALED,
	};
	int err;

	lockdep_assert_held(&comm->lock);
	err = kcoll_auth_msg_sign(comm, lane, &a);
	if (err)
		return err;
	err = ib_post_send(lane->qp, &wr, NULL);
	if (!err) {
		conn->sq_posted++;
		conn->tx_posted++;
		if (!lane->sq_posted++)
			kcoll_engine_sq_busy(lane);
	}
	return err;
}

/*
 * Lane @lane is established. On the connecting side the accept must prove
 * that the peer knows the key (else we give up: -EACCES), our AUTH goes
 * first on the QP, and the first lane's accept brings the peer's model
 * and what it agreed to. On the accepting side the lane counts once the
 * peer's AUTH has been checked too (kcoll_lane_auth()), whichever comes
 * first. Returns true when the caller is to start the other lanes. Must
 * hold comm->lock.
 */
static bool kcoll_lane_established(struct kcoll_lane *lane,
				   struct rdma_cm_event *ev, int err)
{
	struct kcoll_conn *conn = lane->conn;
	struct kcoll_comm *comm = conn->comm;

	lockdep_assert_held(&comm->lock);
	if (conn->state != KCOLL_CONN_CONNECTING)
		return false;
	if (conn->active) {
		const struct kcoll_wire_accept *acc =
			ev->param.conn.private_data;
		u8 len = acc ? ev->param.conn.private_data_len : 0;

		if (!err && (len < sizeof(*acc) ||
			     le32_to_cpu(acc->magic) != KCOLL_WIRE_MAGIC ||
			     !kcoll_auth_accept_ok(comm, &lane->hello, acc))) {
			pr_warn_ratelimited("comm %llx rank %u: rank %u's listener (%pISc) did not prove it knows the key: refused\n",
					    comm->uid, comm->rank, conn->peer,
					    &lane->cm_id->route.addr.dst_addr);
			err = -EACCES;
		}
		if (!err) {
			memcpy(lane->nonce_accept, acc->nonce,
			       KCOLL_AUTH_NONCE);
			/* The peer proved the key: what it sends counts
			 * (kcoll_rx_done()). */
			lane->authed = true;
			err = kcoll_lane_send_auth(lane);
		}
		if (!err && !lane->idx) {
			/* Our place there is ours now. */
			conn->peer_dup = false;
			conn->peer_stale = false;
			kcoll_comm_model_merge(comm, acc->alpha_ns,
					       acc->beta_ps, acc->gamma_ps);
			/* Offered by us and confirmed by the peer. */
			conn->local = conn->local_offer &&
				      (acc->flags & KCOLL_ACCEPT_LOCAL);
			conn->peer_pongs = acc->flags & KCOLL_ACCEPT_PING;
			conn->eager = conn->eager_offer &&
				      (acc->flags & KCOLL_ACCEPT_EAGER);
		}
		if (err) {
			kcoll_conn_fail_setup(conn, err);
			return false;
		}
		return kcoll_lane_ready(lane);
	}
	if (err) {
		/* Our staging, for an attempt that may be a replay's. */
		kcoll_conn_setup_failed(conn, err);
		return false;
	}
	lane->established = true;
	return lane->authed && kcoll_lane_ready(lane);
}

/*
 * Accepting side: the first message on @lane's QP, which must be the
 * connecting side's AUTH over both nonces. Anything else (a replayed
 * hello's sender cannot produce it) ends the setup. Must hold comm->lock.
 */
void kcoll_lane_auth(struct kcoll_lane *lane,
		     const struct kcoll_wire_msg *m)
{
	const struct kcoll_wire_auth *a = (const void *)m;
	struct kcoll_conn *conn = lane->conn;
	struct kcoll_comm *comm = conn->comm;

	lockdep_assert_held(&comm->lock);
	if (conn->state != KCOLL_CONN_CONNECTING || conn->unwinding)
		return;
	if (!kcoll_auth_msg_ok(comm, lane, a)) {
		pr_warn_ratelimited("comm %llx rank %u: rank %u's first message on QP %u is no proof of the key: dropped\n",
				    comm->uid, comm->rank, conn->peer,
				    lane->idx);
		kcoll_conn_setup_failed(conn, -EACCES);
		return;
	}
	lane->authed = true;
	if (!lane->idx)
		kcoll_comm_model_merge(comm, a->alpha_ns, a->beta_ps,
				       a->gamma_ps);
	if (lane->established)
		kcoll_lane_ready(lane);
}

/*
 * Active side, from the first lane's ESTABLISHED handler: connect the
 * others. The comm cannot go away meanwhile (its shutdown waits for
 * cm_busy); nothing else touches these lanes until they have an id.
 */
static void kcoll_conn_connect_rest(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;
	unsigned int i;
	int err;

	for (i = 1; i < conn->nlanes; i++) {
		err = kcoll_conn_connect(conn, i);
		if (err) {
			mutex_lock(&comm->lock);
			kcoll_conn_fail_setup(conn, err);
			mutex_unlock(&comm->lock);
			return;
		}
	}
}

static void kcoll_cm_event(struct kcoll_lane *lane, struct rdma_cm_id *id,
			   struct rdma_cm_event *ev)
{
	struct kcoll_conn *conn = lane->conn;
	struct kcoll_comm *comm = conn->comm;
	bool more;
	int err;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		err = rdma_resolve_route(id, 2000);
		if (err)
			goto retry;
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		err = kcoll_lane_create_qp(lane, id);
		if (err) {
			mutex_lock(&comm->lock);
			kcoll_conn_fail_setup(conn, err);
			mutex_unlock(&comm->lock);
			return;
		}
		err = kcoll_conn_send_hello(lane, id);
		if (err)
			goto retry;
		return;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		goto retry;
	case RDMA_CM_EVENT_REJECTED:
		mutex_lock(&comm->lock);
		kcoll_conn_rejected(lane, ev);
		mutex_unlock(&comm->lock);
		return;
	case RDMA_CM_EVENT_ESTABLISHED:
		/* Staging is the connection's: with its first lane. */
		err = lane->idx ? 0 : kcoll_conn_alloc_stage(conn);
		mutex_lock(&comm->lock);
		more = kcoll_lane_established(lane, ev, err);
		mutex_unlock(&comm->lock);
		if (more)
			kcoll_conn_connect_rest(conn);
		return;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
	case RDMA_CM_EVENT_ADDR_CHANGE:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		mutex_lock(&comm->lock);
		/* A peer on this node queued its last messages (its BYE)
		 * before it disconnected: handle them first. */
		if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
			kcoll_lchan_deliver(conn);
		if (conn->state == KCOLL_CONN_CONNECTING) {
			/* Only the peer's leaving may be unproven. */
			if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL ||
			    ev->event == RDMA_CM_EVENT_ADDR_CHANGE) {
				kcoll_conn_fail_setup(conn, -ECONNRESET);
			} else if (ev->event == RDMA_CM_EVENT_DISCONNECTED &&
				   !conn->active && !conn->unwinding &&
				   lane->established && lane->qp &&
				   !lane->draining) {
				/*
				 * Its AUTH, and a BYE after it (a revoke
				 * made as soon as its COMM_CREATE returned),
				 * may still wait in our CQ: rdma_cm's event
				 * and the completions run apart. Flushed,
				 * they come first, and the flushed receives
				 * then fail the attempt (kcoll_rx_done()).
				 * Until 2026-12-07 the attempt failed here,
				 * and such a revoke read as a lost peer.
				 */
				conn->peer_left = true;
				kcoll_lane_flush(lane);
			} else {
				kcoll_conn_setup_failed(conn, -ECONNRESET);
			}
		} else if (ev->event == RDMA_CM_EVENT_DISCONNECTED &&
			   conn->state == KCOLL_CONN_UP && lane->qp &&
			   !lane->draining) {
			/*
			 * The peer closed. What it sent before may still be
			 * waiting in our CQ: flush instead of failing now.
			 * The flushed receives come after every real
			 * completion and kill the connection then.
			 */
			kcoll_lane_flush(lane);
		} else if (ev->event != RDMA_CM_EVENT_TIMEWAIT_EXIT) {
			kcoll_conn_kill(conn, ev->event ==
					RDMA_CM_EVENT_DEVICE_REMOVAL ?
					-ENODEV : -ECONNRESET);
		}
		mutex_unlock(&comm->lock);
		return;
	default:
		return;
	}

retry:
	mutex_lock(&comm->lock);
	if (conn->state == KCOLL_CONN_CONNECTING && conn->active) {
		/* Only the first lane retries (see kcoll_conn_rejected()). */
		if (lane->idx)
			kcoll_conn_fail_setup(conn, -EHOSTUNREACH);
		else
			kcoll_conn_retry_later(conn);
	} else if (conn->state == KCOLL_CONN_CONNECTING) {
		/* Our accept went unanswered (ib_cm gave up resending it). */
		kcoll_conn_setup_failed(conn, -EHOSTUNREACH);
	}
	mutex_unlock(&comm->lock);
	return;
}
