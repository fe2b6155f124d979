// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll connections: one RC QP per (communicator, peer rank), set up with
 * kernel rdma_cm (several with sysfs qps_per_peer: docs/DESIGN.md, "Several
 * QPs per peer"). The module listens on kcoll_listen_port on every RDMA
 * device; within a communicator the higher rank connects to the lower one,
 * presenting a hello (struct kcoll_wire_hello) in the REQ private data. The
 * passive side finds the communicator by (uid, rank), checks magic, version,
 * ranks and key, and accepts or rejects with a reason. "No such
 * communicator (yet)" is retried by the active side until the communicator's
 * connect deadline: ranks do not create their communicators at the same
 * instant.
 *
 * Every connection owns a CQ polled from ib_comp_wq (IB_POLL_WORKQUEUE,
 * process context) and KCOLL_RQ_DEPTH receives of one control message
 * each, reposted as they complete. The engine bounds what it sends to a
 * peer well below that (see docs/DESIGN.md, "Credits").
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/log2.h>
#include <linux/ratelimit.h>
#include <linux/slab.h>
#include <crypto/algapi.h>
#include <rdma/ib_cm.h>

#include "kcoll_xport.h"

static struct rdma_cm_id *kcoll_listen_id;

static void kcoll_lane_free_rx(struct kcoll_lane *lane)
{
	struct ib_cq *cq = lane->conn->cq;
	unsigned int i;

	if (!lane->rx)
		return;
	for (i = 0; i < KCOLL_RQ_DEPTH; i++)
		if (cq && lane->rx[i].dma)
			ib_dma_unmap_single(cq->device, lane->rx[i].dma,
					    sizeof(struct kcoll_wire_msg),
					    DMA_FROM_DEVICE);
	kfree(lane->rx);
	kfree(lane->rx_msgs);
	lane->rx = NULL;
	lane->rx_msgs = NULL;
}

static void kcoll_rx_done(struct ib_cq *cq, struct ib_wc *wc);

static int kcoll_lane_post_rx(struct kcoll_lane *lane, struct kcoll_rx *rx)
{
	struct ib_sge sge = {
		.addr = rx->dma,
		.length = sizeof(struct kcoll_wire_msg),
		.lkey = lane->conn->comm->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_cqe = &rx->cqe,
		.sg_list = &sge,
		.num_sge = 1,
	};

	ib_dma_sync_single_for_device(lane->qp->device, rx->dma,
				      sizeof(*rx->msg), DMA_FROM_DEVICE);
	return ib_post_recv(lane->qp, &wr, NULL);
}

static void kcoll_tx_done(struct ib_cq *cq, struct ib_wc *wc);

/* @n QPs (lanes) to the peer; the grant window grows with them. */
static void kcoll_conn_set_lanes(struct kcoll_conn *conn, unsigned int n)
{
	BUILD_BUG_ON(KCOLL_STAGE_SLOTS > BITS_PER_LONG);
	conn->nlanes = clamp(n, 1U, (unsigned int)KCOLL_MAX_LANES);
	conn->window = KCOLL_GRANT_WINDOW * conn->nlanes;
}

/* Free the connection's CQ once no lane has a QP on it. */
static void kcoll_conn_free_cq(struct kcoll_conn *conn)
{
	unsigned int i;

	for (i = 0; i < KCOLL_MAX_LANES; i++)
		if (conn->lane[i].qp)
			return;
	if (conn->cq) {
		ib_free_cq(conn->cq);
		conn->cq = NULL;
	}
}

/*
 * Destroy @lane's QP during setup. Its posted receives flush; while
 * another lane keeps the shared CQ polled, they must have come back before
 * their ring goes.
 */
static void kcoll_lane_destroy_qp(struct kcoll_lane *lane,
				  struct rdma_cm_id *id)
{
	unsigned int i;

	for (i = 0; i < KCOLL_MAX_LANES; i++)
		if (i != lane->idx && lane->conn->lane[i].qp) {
			ib_drain_qp(lane->qp);
			break;
		}
	rdma_destroy_qp(id);
	lane->qp = NULL;
	kcoll_lane_free_rx(lane);
}

/*
 * QP and receive ring of @lane for @id, on the comm's device and PD; the
 * connection's CQ (sized for all its lanes) comes with the first one.
 */
static int kcoll_lane_create_qp(struct kcoll_lane *lane,
				struct rdma_cm_id *id)
{
	struct kcoll_conn *conn = lane->conn;
	struct kcoll_comm *comm = conn->comm;
	struct ib_qp_init_attr attr = {};
	unsigned int i;
	int err;

	if (id->device != comm->ibdev) {
		pr_warn_ratelimited("comm %llx: peer %u reached through %s, not %s\n",
				    comm->uid, conn->peer,
				    dev_name(&id->device->dev),
				    dev_name(&comm->ibdev->dev));
		return -EXDEV;
	}
	if (!conn->cq) {
		/* + the drain WRs of a lane being torn down */
		conn->cq = ib_alloc_cq(id->device, conn, conn->nlanes *
				       (KCOLL_SQ_DEPTH + KCOLL_RQ_DEPTH) + 2,
				       0, IB_POLL_WORKQUEUE);
		if (IS_ERR(conn->cq)) {
			err = PTR_ERR(conn->cq);
			conn->cq = NULL;
			return err;
		}
	}
	attr.event_handler = NULL;
	attr.qp_context = lane;
	attr.send_cq = conn->cq;
	attr.recv_cq = conn->cq;
	attr.cap.max_send_wr = KCOLL_SQ_DEPTH;
	attr.cap.max_recv_wr = KCOLL_RQ_DEPTH;
	attr.cap.max_send_sge = 2;
	attr.cap.max_recv_sge = 1;
	/* Small writes go inline (kcoll_conn_write_inline()): ask for room
	 * for them, and settle for a control message's if refused. */
	attr.cap.max_inline_data = KCOLL_INLINE_WANT;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	err = rdma_create_qp(id, comm->pd, &attr);
	if (err == -EINVAL || err == -ENOMEM) {
		attr.cap.max_inline_data = sizeof(struct kcoll_wire_msg);
		err = rdma_create_qp(id, comm->pd, &attr);
	}
	if (err)
		goto out_free_cq;
	lane->qp = id->qp;
	/* What the provider granted (at least what we asked for). */
	lane->max_inline = attr.cap.max_inline_data;

	lane->rx = kcalloc(KCOLL_RQ_DEPTH, sizeof(*lane->rx), GFP_KERNEL);
	lane->rx_msgs = kcalloc(KCOLL_RQ_DEPTH, sizeof(*lane->rx_msgs),
				GFP_KERNEL);
	if (!lane->rx || !lane->rx_msgs) {
		err = -ENOMEM;
		goto out_free_rx;
	}
	for (i = 0; i < KCOLL_RQ_DEPTH; i++) {
		struct kcoll_rx *rx = &lane->rx[i];

		rx->lane = lane;
		rx->msg = &lane->rx_msgs[i];
		rx->cqe.done = kcoll_rx_done;
		rx->dma = ib_dma_map_single(id->device, rx->msg,
					    sizeof(*rx->msg), DMA_FROM_DEVICE);
		if (ib_dma_mapping_error(id->device, rx->dma)) {
			rx->dma = 0;
			err = -ENOMEM;
			goto out_free_rx;
		}
		err = kcoll_lane_post_rx(lane, rx);
		if (err)
			goto out_free_rx;
	}
	lane->tx_cqe.done = kcoll_tx_done;
	return 0;

out_free_rx:
	kcoll_lane_destroy_qp(lane, id);
out_free_cq:
	kcoll_conn_free_cq(conn);
	return err;
}

/* Staging slots for reducing receives: allocated once the conn is up. */
static int kcoll_conn_alloc_stage(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;
	int err;

	/* Powers of two, so no slot straddles two MR segments. */
	conn->slot_bytes = rounddown_pow_of_two(min_t(size_t,
					kcoll_chunk_bytes(),
					comm->seg_pages * PAGE_SIZE));
	err = kcoll_buf_alloc(&conn->stage, conn->slot_bytes * conn->window,
			      comm->quota);
	if (err)
		return err;
	err = kcoll_buf_register(&conn->stage, comm);
	if (err)
		goto out_release_stage;
	if (!conn->eager_offer && !conn->eager)
		return 0;
	/* Eager slots and bounces: one MR (kcoll_eager_fits()). */
	err = kcoll_buf_alloc(&conn->ebuf, KCOLL_EAGER_BYTES, comm->quota);
	if (err)
		goto out_release_stage;
	err = kcoll_buf_register(&conn->ebuf, comm);
	if (err)
		goto out_release_ebuf;
	return 0;

out_release_ebuf:
	kcoll_buf_release(&conn->ebuf);
out_release_stage:
	kcoll_buf_release(&conn->stage);
	return err;
}

/*
 * Eager slots are written at any offset of their buffer: it must be one
 * MR, so the device's fast-reg page list must cover it (any real one's
 * does: 33 pages).
 */
static bool kcoll_eager_fits(struct kcoll_comm *comm)
{
	return DIV_ROUND_UP(KCOLL_EAGER_BYTES, PAGE_SIZE) <= comm->seg_pages;
}

/*
 * Send one control message through the connection's transport: in order
 * with the other control messages. Must hold comm->lock.
 */
int kcoll_conn_send_msg(struct kcoll_conn *conn, struct kcoll_wire_msg *m)
{
	lockdep_assert_held(&conn->comm->lock);
	return conn->xp->send_msg(conn, m);
}

/* ------------------------------------------------------------------ */
/* Completions                                                          */
/* ------------------------------------------------------------------ */

static void kcoll_conn_wc_error(struct kcoll_conn *conn, struct ib_wc *wc,
				const char *what)
{
	if (wc->status != IB_WC_WR_FLUSH_ERR)
		pr_warn_ratelimited("comm %llx peer %u: %s failed: %s (%d)\n",
				    conn->comm->uid, conn->peer, what,
				    ib_wc_status_msg(wc->status), wc->status);
	kcoll_conn_kill(conn, wc->status == IB_WC_WR_FLUSH_ERR ?
			      -ECONNRESET : -EIO);
}

static void kcoll_conn_fail_setup(struct kcoll_conn *conn, int err);
static void kcoll_lane_auth(struct kcoll_lane *lane,
			    const struct kcoll_wire_msg *m);

static void kcoll_rx_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kcoll_rx *rx = container_of(wc->wr_cqe, struct kcoll_rx, cqe);
	struct kcoll_lane *lane = rx->lane;
	struct kcoll_conn *conn = lane->conn;
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_wire_msg msg;

	mutex_lock(&comm->lock);
	if (wc->status != IB_WC_SUCCESS) {
		kcoll_conn_wc_error(conn, wc, "receive");
		goto out;
	}
	/* Accepting side: nothing counts before the peer's AUTH. */
	if (!conn->active && !lane->authed &&
	    (wc->opcode != IB_WC_RECV || wc->byte_len != sizeof(msg))) {
		pr_warn_ratelimited("comm %llx rank %u: rank %u sent before proving it knows the key: dropped\n",
				    comm->uid, comm->rank, conn->peer);
		kcoll_conn_fail_setup(conn, -EACCES);
		goto out;
	}
	if (wc->opcode == IB_WC_RECV_RDMA_WITH_IMM) {
		u32 imm = be32_to_cpu(wc->ex.imm_data);

		if (kcoll_lane_post_rx(lane, rx))
			kcoll_conn_kill(conn, -EIO);
		kcoll_engine_data(conn, imm, wc->byte_len);
		goto out;
	}
	if (wc->opcode != IB_WC_RECV || wc->byte_len != sizeof(msg)) {
		pr_warn_ratelimited("comm %llx peer %u: bad message (opcode %d, %u bytes)\n",
				    comm->uid, conn->peer, wc->opcode,
				    wc->byte_len);
		kcoll_conn_kill(conn, -EPROTO);
		goto out;
	}
	ib_dma_sync_single_for_cpu(cq->device, rx->dma, sizeof(msg),
				   DMA_FROM_DEVICE);
	memcpy(&msg, rx->msg, sizeof(msg));
	if (kcoll_lane_post_rx(lane, rx))
		kcoll_conn_kill(conn, -EIO);
	if (!conn->active && !lane->authed)
		kcoll_lane_auth(lane, &msg);
	else
		kcoll_engine_msg(conn, &msg);
out:
	kcoll_engine_reap(comm);
	mutex_unlock(&comm->lock);
}

static void kcoll_tx_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kcoll_lane *lane = wc->qp->qp_context;
	struct kcoll_conn *conn = lane->conn;
	struct kcoll_comm *comm = conn->comm;

	mutex_lock(&comm->lock);
	lane->sq_posted--;
	conn->sq_posted--;
	lane->sent_at = jiffies;
	if (wc->status != IB_WC_SUCCESS)
		kcoll_conn_wc_error(conn, wc, "send");
	kcoll_engine_reap(comm);
	if (comm->shutting_down && !conn->sq_posted)
		wake_up_all(&comm->wait);	/* a BYE went out */
	mutex_unlock(&comm->lock);
}

/*
 * Tell the peer we are leaving and how many collectives we completed. A
 * peer whose last WRITE to us was acknowledged by our NIC but not yet
 * towards it (a lost ACK) would otherwise fail that collective when our
 * QP goes away, though we have its data and it has ours. Must hold
 * comm->lock.
 */
void kcoll_conn_send_bye(struct kcoll_conn *conn)
{
	struct kcoll_wire_msg m = {
		.type = KCOLL_MSG_BYE,
		.kind = KCOLL_KIND_COLL,
		.seq = cpu_to_le32(conn->comm->coll_done_seq),
	};

	lockdep_assert_held(&conn->comm->lock);
	if (conn->state == KCOLL_CONN_UP)
		kcoll_conn_send_msg(conn, &m);
}

/* ------------------------------------------------------------------ */
/* State changes                                                        */
/* ------------------------------------------------------------------ */

/*
 * The connection is unusable: fail the comm's operations. The QP is moved
 * to the error state so nothing lands any more; it is destroyed later by
 * the comm. Must hold comm->lock.
 */
void kcoll_conn_kill(struct kcoll_conn *conn, int err)
{
	struct kcoll_comm *comm = conn->comm;
	unsigned int i;

	lockdep_assert_held(&comm->lock);
	/* Setup failures (flushes after a reject, say) are the rdma_cm
	 * handler's business: it retries or fails the setup. */
	if (conn->state != KCOLL_CONN_UP)
		return;
	/*
	 * A peer on this node would not notice: nothing of ours fails on
	 * its side as a dead QP's retries would. Say BYE for us, unless
	 * this is its BYE (it has gone) or our shutdown (which sent one).
	 */
	if (conn->lchan && !conn->bye && !comm->shutting_down) {
		struct kcoll_wire_msg m = {
			.type = KCOLL_MSG_BYE,
			.kind = KCOLL_KIND_COLL,
			.seq = cpu_to_le32(comm->coll_done_seq),
		};

		kcoll_lchan_send(conn, &m);
	}
	comm->nr_up--;
	conn->state = KCOLL_CONN_DEAD;
	conn->error = err;
	for (i = 0; i < conn->nlanes; i++) {
		struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

		if (conn->lane[i].qp)
			ib_modify_qp(conn->lane[i].qp, &attr, IB_QP_STATE);
	}
	if (!comm->shutting_down && comm->nr_ops)
		pr_info_ratelimited("comm %llx rank %u: connection to rank %u lost (%d)\n",
				    comm->uid, comm->rank, conn->peer, err);
	kcoll_engine_conn_lost(conn);
	wake_up_all(&comm->wait);
}

static void kcoll_conn_fail_setup(struct kcoll_conn *conn, int err);

static void kcoll_conn_up(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;

	lockdep_assert_held(&comm->lock);
	if (conn->state != KCOLL_CONN_CONNECTING)
		return;
	/* A peer on this node: from now on through the channel. */
	if (conn->local) {
		if (kcoll_lchan_attach(conn)) {
			kcoll_conn_fail_setup(conn, -ENOMEM);
			return;
		}
		conn->xp = &kcoll_xport_local;
	}
	conn->state = KCOLL_CONN_UP;
	comm->nr_up++;
	/* Offer the peer our eager slots. */
	if (conn->eager)
		kcoll_engine_eager_up(conn);
	/* Time the device's round trip (the cost model's alpha), unless the
	 * peer is on this node: that one never touches the wire. The
	 * accepting side starts once the peer's first PING shows that it
	 * answers. */
	if (conn->peer_pongs && conn->xp->timed)
		kcoll_conn_ping(conn);
	if (conn->pong_due) {
		kcoll_conn_pong(conn, conn->pong_due);
		conn->pong_due = 0;
	}
	wake_up_all(&comm->wait);
}

/* Answer a PING that carried @clock. Must hold comm->lock. */
void kcoll_conn_pong(struct kcoll_conn *conn, u64 clock)
{
	struct kcoll_wire_msg m = {
		.type = KCOLL_MSG_PONG,
		.kind = KCOLL_KIND_COLL,
		.count = cpu_to_le64(clock),
	};

	kcoll_conn_send_msg(conn, &m);
}

/*
 * Send the next PING of the connection's KCOLL_PINGS; after the last PONG
 * the shortest round trip becomes a sample of the device's alpha. Must
 * hold comm->lock.
 */
void kcoll_conn_ping(struct kcoll_conn *conn)
{
	struct kcoll_wire_msg m = {
		.type = KCOLL_MSG_PING,
		.kind = KCOLL_KIND_COLL,
	};

	lockdep_assert_held(&conn->comm->lock);
	if (conn->pings >= KCOLL_PINGS) {
		if (conn->ping_min_ns)
			kcoll_ib_alpha_sample(conn->comm->ibdev,
					      conn->ping_min_ns);
		return;
	}
	m.count = cpu_to_le64(ktime_get_ns());
	if (!kcoll_conn_send_msg(conn, &m))
		conn->pings++;
}

static void kcoll_conn_fail_setup(struct kcoll_conn *conn, int err)
{
	struct kcoll_comm *comm = conn->comm;

	lockdep_assert_held(&comm->lock);
	if (!comm->error)
		comm->error = err;
	conn->state = KCOLL_CONN_DEAD;
	conn->error = err;
	wake_up_all(&comm->wait);
}

/* ------------------------------------------------------------------ */
/* Active side                                                          */
/* ------------------------------------------------------------------ */

static int kcoll_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev);
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
static void kcoll_conn_teardown_id(struct kcoll_conn *conn)
{
	unsigned int i;

	for (i = 0; i < KCOLL_MAX_LANES; i++) {
		struct kcoll_lane *lane = &conn->lane[i];
		struct rdma_cm_id *id = lane->cm_id;

		if (!id)
			continue;
		if (lane->qp) {
			rdma_disconnect(id);
			ib_drain_qp(lane->qp);
			rdma_destroy_qp(id);
			lane->qp = NULL;
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

static void kcoll_conn_retry_work(struct work_struct *work)
{
	struct kcoll_conn *conn = container_of(to_delayed_work(work),
					       struct kcoll_conn, retry);
	struct kcoll_comm *comm = conn->comm;
	int err;

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

/* Try again shortly (the peer's communicator may not exist yet). */
static void kcoll_conn_retry_later(struct kcoll_conn *conn)
{
	unsigned long delay = msecs_to_jiffies(min(20U << min(conn->attempts, 4U),
						    200U));

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
	rdma_set_ack_timeout(id, kcoll_ack_timeout());
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

	/* The accepting side: the connecting one gave up (ib_cm's REJ for
	 * an accepted REQ whose id went away). It does not dial back. */
	if (!conn->active) {
		kcoll_conn_fail_setup(conn, -ECONNRESET);
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
		pr_warn_ratelimited("comm %llx rank %u: rank %u refused the rank table (%d)\n",
				    comm->uid, comm->rank, conn->peer, reason);
		kcoll_conn_fail_setup(conn, -EINVAL);
		return;
	default:
		/* Not there yet (no comm, no listener): try again. Lanes
		 * after the first go to a peer that has accepted one. */
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
	struct kcoll_conn *conn;
	u32 src, dst, n, idx, nlanes;
	bool local, other;
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
	if (id->device != comm->ibdev) {
		pr_warn_ratelimited("comm %llx rank %u: refusing rank %u from %pISc on %s: the communicator uses %s\n",
				    comm->uid, comm->rank, src,
				    &id->route.addr.dst_addr,
				    dev_name(&id->device->dev),
				    comm->ibdev ? dev_name(&comm->ibdev->dev) :
						  "none");
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
		kcoll_intra_node() && kcoll_comm_hello_is_ours(comm, h);
	mutex_lock(&comm->lock);
	conn = comm->conns[src];
	if (!conn) {
		/* Listed, its connections not allocated yet (or never, the
		 * creation failing): as if it did not exist yet. */
		mutex_unlock(&comm->lock);
		kcoll_reject(id, KCOLL_REJ_NOCOMM);
		goto out_put;
	}
	/* The first QP finds the connection idle and sets the number of
	 * QPs; the others join it while it is being set up. */
	if (comm->shutting_down || comm->error ||
	    (!idx && conn->state != KCOLL_CONN_IDLE) ||
	    (idx && (conn->state != KCOLL_CONN_CONNECTING ||
		     conn->nlanes != nlanes || conn->lane[idx].cm_id ||
		     !conn->lane[0].cm_id))) {
		mutex_unlock(&comm->lock);
		kcoll_reject(id, KCOLL_REJ_DUP);
		goto out_put;
	}
	if (!idx) {
		conn->state = KCOLL_CONN_CONNECTING;
		kcoll_conn_set_lanes(conn, nlanes);
		conn->local = local;
		conn->eager = nlanes == 1 &&
			      (h->flags & KCOLL_HELLO_EAGER) && kcoll_eager() &&
			      kcoll_eager_fits(comm);
		acc.flags = (local ? KCOLL_ACCEPT_LOCAL : 0) |
			    (conn->eager ? KCOLL_ACCEPT_EAGER : 0) |
			    KCOLL_ACCEPT_PING;
	}
	lane = &conn->lane[idx];
	comm->cm_busy++;
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
	if (err) {
		kcoll_reject(id, KCOLL_REJ_NOMEM);
		goto out_idle;
	}

	err = kcoll_lane_create_qp(lane, id);
	if (err) {
		kcoll_reject(id, KCOLL_REJ_NOMEM);
		goto out_idle;
	}
	rdma_set_ack_timeout(id, kcoll_ack_timeout());
	err = rdma_accept(id, &param);
	if (err) {
		/* Our non-zero return destroys @id; the QP goes first. */
		kcoll_lane_destroy_qp(lane, id);
		kcoll_conn_free_cq(conn);
		goto out_idle;
	}
	mutex_lock(&comm->lock);
	id->context = lane;
	lane->cm_id = id;
	kcoll_cm_unbusy(comm);
	mutex_unlock(&comm->lock);
	kcoll_comm_put(comm);
	return 0;

out_idle:
	mutex_lock(&comm->lock);
	/* A later QP's failure fails the setup: the active side does not
	 * retry once the first is accepted. */
	if (idx)
		kcoll_conn_fail_setup(conn, err);
	else
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

static int kcoll_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
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
			err = kcoll_lane_send_auth(lane);
		}
		if (!err && !lane->idx) {
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
		kcoll_conn_fail_setup(conn, err);
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
static void kcoll_lane_auth(struct kcoll_lane *lane,
			    const struct kcoll_wire_msg *m)
{
	const struct kcoll_wire_auth *a = (const void *)m;
	struct kcoll_conn *conn = lane->conn;
	struct kcoll_comm *comm = conn->comm;

	lockdep_assert_held(&comm->lock);
	if (conn->state != KCOLL_CONN_CONNECTING)
		return;
	if (!kcoll_auth_msg_ok(comm, lane, a)) {
		pr_warn_ratelimited("comm %llx rank %u: rank %u's first message on QP %u is no proof of the key: dropped\n",
				    comm->uid, comm->rank, conn->peer,
				    lane->idx);
		kcoll_conn_fail_setup(conn, -EACCES);
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
			kcoll_conn_fail_setup(conn, -ECONNRESET);
		} else if (ev->event == RDMA_CM_EVENT_DISCONNECTED &&
			   conn->state == KCOLL_CONN_UP && lane->qp) {
			/*
			 * The peer closed. What it sent before may still be
			 * waiting in our CQ: flush instead of failing now.
			 * The flushed receives come after every real
			 * completion and kill the connection then.
			 */
			struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

			ib_modify_qp(lane->qp, &attr, IB_QP_STATE);
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
	}
	mutex_unlock(&comm->lock);
	return;
}

/* ------------------------------------------------------------------ */
/* Comm-facing                                                          */
/* ------------------------------------------------------------------ */

/* Allocate the connection to @peer and, on the active side, start it. */
int kcoll_conn_start(struct kcoll_comm *comm, u32 peer)
{
	struct kcoll_conn *conn;
	int k;

	conn = kzalloc(sizeof(*conn), GFP_KERNEL_ACCOUNT);
	if (!conn)
		return -ENOMEM;
	conn->comm = comm;
	conn->peer = peer;
	conn->active = peer < comm->rank;
	conn->state = KCOLL_CONN_IDLE;
	for (k = 0; k < KCOLL_MAX_LANES; k++) {
		conn->lane[k].conn = conn;
		conn->lane[k].idx = k;
	}
	/*
	 * The connecting side chooses; the listening side learns it. A peer
	 * on this node gets one QP: its data does not go through the NIC.
	 */
	conn->local_offer = conn->active && kcoll_intra_node() &&
			    !memcmp(comm->ranks[peer].addr,
				    comm->ranks[comm->rank].addr,
				    sizeof(comm->ranks[peer].addr));
	kcoll_conn_set_lanes(conn, conn->active && !conn->local_offer ?
				   comm->lanes : 1);
	/* Eager transfers: offered on one QP. */
	conn->eager_offer = conn->active && conn->nlanes == 1 &&
			    kcoll_eager() && kcoll_eager_fits(comm);
	INIT_DELAYED_WORK(&conn->retry, kcoll_conn_retry_work);
	INIT_WORK(&conn->lrx, kcoll_lchan_rx_work);
	INIT_LIST_HEAD(&conn->sigs);
	kcoll_gmr_conn_init(conn);
	conn->xp = &kcoll_xport_rdma;	/* until it is up */
	for (k = 0; k < KCOLL_KIND_NR; k++) {
		INIT_LIST_HEAD(&conn->k[k].out);
		INIT_LIST_HEAD(&conn->k[k].in);
		INIT_LIST_HEAD(&conn->k[k].p2p_sends);
		INIT_LIST_HEAD(&conn->k[k].p2p_recvs);
	}
	comm->conns[peer] = conn;
	if (conn->active) {
		conn->state = KCOLL_CONN_CONNECTING;
		kcoll_queue_delayed(&conn->retry, 0);
	}
	return 0;
}

/*
 * Tear the connection down. The comm is shutting down and no
 * rdma_cm handler of it is running (comm->cm_busy == 0): none will touch
 * the connection again. Must not hold comm->lock. kcoll_conn_free() frees
 * it (and shuts it down if that did not happen yet).
 */
void kcoll_conn_shutdown(struct kcoll_conn *conn)
{
	cancel_delayed_work_sync(&conn->retry);
	/* Our BYE is queued already: the peer still gets it. */
	kcoll_lchan_detach(conn);
	kcoll_conn_teardown_id(conn);
	/* What grants still expose is withdrawn before the staging and the
	 * pages go (a peer on this node copies without the NIC) ... */
	mutex_lock(&conn->comm->lock);
	kcoll_engine_conn_unexpose(conn);
	mutex_unlock(&conn->comm->lock);
	/* ... and every grant MR goes, before the PD. */
	kcoll_gmr_conn_shutdown(conn);
	/* Its MRs belong to the device's PD: gone before the device is. */
	kcoll_buf_release(&conn->stage);
	kcoll_buf_release(&conn->ebuf);
}

void kcoll_conn_free(struct kcoll_conn *conn)
{
	kcoll_conn_shutdown(conn);
	kfree(conn);
}

/* kcoll_listen_id (NULL: not listening), the port, kcoll_listen_stopped. */
static DEFINE_MUTEX(kcoll_listen_lock);
static bool kcoll_listen_stopped;

/*
 * A listener on @port, every address: the new id or an ERR_PTR. Must hold
 * kcoll_listen_lock.
 */
static struct rdma_cm_id *kcoll_listen_on(unsigned int port)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_ANY),
		.sin_port = htons(port),
	};
	struct rdma_cm_id *id;
	int err;

	lockdep_assert_held(&kcoll_listen_lock);
	id = rdma_create_id(&init_net, kcoll_cm_handler, NULL, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return id;
	err = rdma_bind_addr(id, (struct sockaddr *)&sin);
	if (err)
		goto out_destroy;
	err = rdma_listen(id, 128);
	if (err)
		goto out_destroy;
	pr_info("listening on port %u\n", port);
	return id;

out_destroy:
	pr_err("cannot listen on port %u: %d\n", port, err);
	rdma_destroy_id(id);
	return ERR_PTR(err);
}

static bool kcoll_port_ok(unsigned int port)
{
	return port && port <= 65535;
}

int kcoll_listen_start(void)
{
	struct rdma_cm_id *id;

	/* The module parameter: what sysfs would refuse, refused at load. */
	if (!kcoll_port_ok(kcoll_listen_port)) {
		pr_err("listen_port=%u: not a port (1..65535)\n",
		       kcoll_listen_port);
		return -EINVAL;
	}
	mutex_lock(&kcoll_listen_lock);
	id = kcoll_listen_on(kcoll_listen_port);
	if (!IS_ERR(id))
		kcoll_listen_id = id;
	mutex_unlock(&kcoll_listen_lock);
	return PTR_ERR_OR_ZERO(id);
}

/*
 * Listen on @port from now on: the new listener first (a port that cannot
 * be had leaves the old one, -EADDRINUSE), then the old one closes.
 * Connections already made stay; communicators whose rank table gives no
 * port connect to @port from now on. Before the listener starts (netlink
 * is up first at load) the port is only recorded for it; once it stopped
 * (unload): -ENODEV.
 */
int kcoll_listen_set_port(unsigned int port)
{
	struct rdma_cm_id *id, *old;

	if (!kcoll_port_ok(port))
		return -EINVAL;
	mutex_lock(&kcoll_listen_lock);
	if (kcoll_listen_stopped) {
		mutex_unlock(&kcoll_listen_lock);
		return -ENODEV;
	}
	if (!kcoll_listen_id || port == kcoll_listen_port) {
		WRITE_ONCE(kcoll_listen_port, port);
		mutex_unlock(&kcoll_listen_lock);
		return 0;
	}
	id = kcoll_listen_on(port);
	if (IS_ERR(id)) {
		mutex_unlock(&kcoll_listen_lock);
		return PTR_ERR(id);
	}
	old = kcoll_listen_id;
	kcoll_listen_id = id;
	pr_info("no longer listening on port %u\n", kcoll_listen_port);
	WRITE_ONCE(kcoll_listen_port, port);
	/* Under the lock: kcoll_listen_stop() must not see it half gone. */
	rdma_destroy_id(old);
	mutex_unlock(&kcoll_listen_lock);
	return 0;
}

void kcoll_listen_stop(void)
{
	mutex_lock(&kcoll_listen_lock);
	if (kcoll_listen_id)
		rdma_destroy_id(kcoll_listen_id);
	kcoll_listen_id = NULL;
	kcoll_listen_stopped = true;
	mutex_unlock(&kcoll_listen_lock);
}
