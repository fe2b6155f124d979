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

#include <linux/dma-mapping.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/log2.h>
#include <linux/ratelimit.h>
#include <linux/slab.h>
#include <crypto/algapi.h>
#include <rdma/ib_cm.h>

#include "kcoll.h"
#include "kcoll_types.h"
#include "kcoll_mem.h"
#include "kcoll_gmr.h"
#include "kcoll_local.h"
#include "kcoll_coll.h"
#include "kcoll_conn.h"
#include "kcoll_xport.h"
#include "kcoll_sysfs.h"
#include "kcoll_ib.h"
#include "kcoll_comm.h"

static struct rdma_cm_id *kcoll_listen_id;

void kcoll_lane_free_rx(struct kcoll_lane *lane)
{
	struct ib_cq *cq = lane->conn->cq;
	unsigned int i;

	/* Either may be there without the other (one allocation failed). */
	for (i = 0; lane->rx && i < KCOLL_RQ_DEPTH; i++)
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
void kcoll_conn_set_lanes(struct kcoll_conn *conn, unsigned int n)
{
	BUILD_BUG_ON(KCOLL_STAGE_SLOTS > BITS_PER_LONG);
	conn->nlanes = clamp(n, 1U, (unsigned int)KCOLL_MAX_LANES);
	conn->window = KCOLL_GRANT_WINDOW * conn->nlanes;
}

/* Free the connection's CQ once no lane has a QP on it. */
void kcoll_conn_free_cq(struct kcoll_conn *conn)
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
 * Destroy @lane's QP during setup. Its posted receives must have come
 * back before their ring goes: a QP already in the error state (a failed
 * rdma_accept() moves it there) flushes them into the CQ, whose worker
 * may be running their handler, which reads the ring, even when no
 * other lane shares the CQ and it is freed right after (until
 * 2026-12-06 only a QP beside another lane's was drained). A QP of a
 * connection being set up: the flushes end nothing (kcoll_conn_kill()).
 * Marked draining first, as kcoll_conn_teardown_id() does: a receive
 * that completed before the drain's marker is not posted again behind
 * it. Must not hold comm->lock.
 */
void kcoll_lane_destroy_qp(struct kcoll_lane *lane,
			   struct rdma_cm_id *id)
{
	struct kcoll_comm *comm = lane->conn->comm;

	mutex_lock(&comm->lock);
	lane->draining = true;
	mutex_unlock(&comm->lock);
	ib_drain_qp(lane->qp);
	rdma_destroy_qp(id);
	lane->qp = NULL;
	kcoll_lane_free_rx(lane);
}

/*
 * QP and receive ring of @lane for @id, on the comm's device and PD; the
 * connection's CQ (sized for all its lanes) comes with the first one.
 */
int kcoll_lane_create_qp(struct kcoll_lane *lane,
			 struct rdma_cm_id *id)
{
	struct kcoll_conn *conn = lane->conn;
	struct kcoll_comm *comm = conn->comm;
	struct ib_qp_init_attr attr = {};
	struct mem_cgroup *memcg;
	unsigned int i, stride;
	int err;

	if (id->device != comm->ibdev) {
		pr_warn_ratelimited("comm %llx: peer %u reached through %s, not %s\n",
				    comm->uid, conn->peer,
				    dev_name(&id->device->dev),
				    dev_name(&comm->ibdev->dev));
		return -EXDEV;
	}
	if (!conn->cq) {
		/* + the drain WRs of each lane (below) */
		conn->cq = ib_alloc_cq(id->device, conn, conn->nlanes *
				       (KCOLL_SQ_DEPTH + KCOLL_RQ_DEPTH + 2),
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
	/*
	 * + 1 each: ib_drain_qp() posts a marker on both queues and needs
	 * room for it, and we keep KCOLL_RQ_DEPTH receives posted and may
	 * have KCOLL_SQ_DEPTH sends out. rxe rounds queues up and siw
	 * flushes at once, but mlx5 sizes them as asked: the drain then
	 * failed (a WARN) and did not wait, and the receive ring was freed
	 * under the CQ's worker (until 2026-12-06).
	 */
	attr.cap.max_send_wr = KCOLL_SQ_DEPTH + 1;
	attr.cap.max_recv_wr = KCOLL_RQ_DEPTH + 1;
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
	lane->draining = false;
	/* What the provider granted (at least what we asked for). */
	lane->max_inline = attr.cap.max_inline_data;

	/* Maybe in rdma_cm's handler: charged to the creator's memcg. */
	memcg = kcoll_comm_memcg_begin(comm);
	lane->rx = kcalloc(KCOLL_RQ_DEPTH, sizeof(*lane->rx),
			   KCOLL_GFP_CHARGED);
	/* Each message in a cache line of its own: the device writes them
	 * (DMA_FROM_DEVICE), and a line two mappings share is one that a
	 * CPU without coherent DMA may write back over the device's data
	 * (and that CONFIG_DMA_API_DEBUG reports). */
	stride = ALIGN(sizeof(*lane->rx_msgs), dma_get_cache_alignment());
	lane->rx_msgs = kcalloc(KCOLL_RQ_DEPTH, stride, KCOLL_GFP_CHARGED);
	kcoll_comm_memcg_end(memcg);
	if (!lane->rx || !lane->rx_msgs) {
		err = -ENOMEM;
		goto out_free_rx;
	}
	for (i = 0; i < KCOLL_RQ_DEPTH; i++) {
		struct kcoll_rx *rx = &lane->rx[i];

		rx->lane = lane;
		rx->msg = (void *)((u8 *)lane->rx_msgs + i * stride);
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

static int __kcoll_conn_alloc_stage(struct kcoll_conn *conn)
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

/* Staging slots for reducing receives: allocated once the conn is up, in
 * rdma_cm's handler, charged to the comm's creator's memory cgroup. */
int kcoll_conn_alloc_stage(struct kcoll_conn *conn)
{
	struct mem_cgroup *old = kcoll_comm_memcg_begin(conn->comm);
	int err = __kcoll_conn_alloc_stage(conn);

	kcoll_comm_memcg_end(old);
	return err;
}

/* Staging and eager slots go (the end, or an attempt unwound). */
void kcoll_conn_free_stage(struct kcoll_conn *conn)
{
	kcoll_buf_release(&conn->stage);
	kcoll_buf_release(&conn->ebuf);
}

/*
 * Eager slots are written at any offset of their buffer: it must be one
 * MR, so the device's fast-reg page list must cover it (any real one's
 * does: 33 pages).
 */
bool kcoll_eager_fits(struct kcoll_comm *comm)
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

/* A receive that completed goes back on the ring, unless its QP is being
 * drained for destruction. Must hold comm->lock. */
static int kcoll_lane_repost_rx(struct kcoll_lane *lane, struct kcoll_rx *rx)
{
	lockdep_assert_held(&lane->conn->comm->lock);
	if (lane->draining)
		return 0;
	return kcoll_lane_post_rx(lane, rx);
}

static void kcoll_rx_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kcoll_rx *rx = container_of(wc->wr_cqe, struct kcoll_rx, cqe);
	struct kcoll_lane *lane = rx->lane;
	struct kcoll_conn *conn = lane->conn;
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_wire_msg msg;

	mutex_lock(&comm->lock);
	if (wc->status != IB_WC_SUCCESS) {
		/*
		 * A peer on this node queued its last messages (its BYE)
		 * before it left: handled first, as on its DISCONNECTED.
		 * One that left during the setup: what it sent before has
		 * been handled now (kcoll_cm.c).
		 */
		if (conn->lchan)
			kcoll_lchan_deliver(conn);
		if (conn->peer_left && conn->state == KCOLL_CONN_CONNECTING)
			kcoll_conn_setup_failed(conn, -ECONNRESET);
		else
			kcoll_conn_wc_error(conn, wc, "receive");
		goto out;
	}
	/* kcoll never sends with invalidate: a peer that does is trying
	 * keys of this device's PD (its MRs are the kernel's). */
	if (wc->wc_flags & IB_WC_WITH_INVALIDATE) {
		pr_warn_ratelimited("comm %llx rank %u: rank %u sent a remote invalidate\n",
				    comm->uid, comm->rank, conn->peer);
		kcoll_conn_kill(conn, -EPROTO);
		goto out;
	}
	/*
	 * Accepting side: nothing counts before the peer's AUTH. Connecting
	 * side: nothing before the accept proved the key (our AUTH goes
	 * then, and the peer sends nothing before it has checked that), nor
	 * after it failed to (the QP may still be up).
	 */
	if (!lane->authed &&
	    (conn->active || wc->opcode != IB_WC_RECV ||
	     wc->byte_len != sizeof(msg))) {
		pr_warn_ratelimited("comm %llx rank %u: rank %u sent before proving it knows the key: dropped\n",
				    comm->uid, comm->rank, conn->peer);
		kcoll_conn_setup_failed(conn, -EACCES);
		goto out;
	}
	if (wc->opcode == IB_WC_RECV_RDMA_WITH_IMM) {
		u32 imm = be32_to_cpu(wc->ex.imm_data);

		if (kcoll_lane_repost_rx(lane, rx))
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
	if (kcoll_lane_repost_rx(lane, rx))
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
	conn->tx_done++;
	lane->sent_at = jiffies;
	if (wc->status != IB_WC_SUCCESS)
		kcoll_conn_wc_error(conn, wc, "send");
	else
		kcoll_conn_bye_retry(conn);
	kcoll_engine_reap(comm);
	if (comm->shutting_down && !conn->sq_posted)
		wake_up_all(&comm->wait);	/* a BYE went out */
	mutex_unlock(&comm->lock);
}

/* Our BYE: collectives completed, and whether (and by whom) revoked. */
static void kcoll_conn_bye_msg(struct kcoll_comm *comm,
			       struct kcoll_wire_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = KCOLL_MSG_BYE;
	m->kind = KCOLL_KIND_COLL;
	m->seq = cpu_to_le32(comm->coll_done_seq);
	if (comm->revoked) {
		m->status = cpu_to_le32(KCOLL_BYE_REVOKE);
		m->root = cpu_to_le32(comm->revoker + 1);
	}
}

/*
 * Tell the peer we are leaving and how many collectives we completed. A
 * peer whose last WRITE to us was acknowledged by our NIC but not yet
 * towards it (a lost ACK) would otherwise fail that collective when our
 * QP goes away, though we have its data and it has ours. Once per
 * connection, and not to a peer that said its own. Must hold comm->lock.
 */
void kcoll_conn_send_bye(struct kcoll_conn *conn)
{
	struct kcoll_wire_msg m;

	lockdep_assert_held(&conn->comm->lock);
	if (conn->state != KCOLL_CONN_UP || conn->bye_sent || conn->bye)
		return;
	kcoll_conn_bye_msg(conn->comm, &m);
	/*
	 * Not sent (a full send queue): the next send completion on that
	 * queue tries again (kcoll_conn_bye_retry()).
	 */
	if (!kcoll_conn_send_msg(conn, &m))
		conn->bye_sent = true;
}

/*
 * A send on @conn completed: a BYE that met lane 0's queue full (a
 * revoke's, or a leaving comm's) is tried again (it fails again if the
 * room is on another lane). Not before the BYEs began: our own revoke
 * marks the comm before its shutdown fails what is in flight. Must hold
 * comm->lock.
 */
void kcoll_conn_bye_retry(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;

	lockdep_assert_held(&comm->lock);
	if (comm->byes_begun && !conn->bye_sent)
		kcoll_conn_send_bye(conn);
}

/* ------------------------------------------------------------------ */
/* State changes                                                        */
/* ------------------------------------------------------------------ */

/*
 * Move @lane's QP to the error state: what is posted flushes, after every
 * real completion. A draining QP is in error already, and may be gone.
 * Must hold comm->lock.
 */
void kcoll_lane_flush(struct kcoll_lane *lane)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

	lockdep_assert_held(&lane->conn->comm->lock);
	if (lane->qp && !lane->draining)
		ib_modify_qp(lane->qp, &attr, IB_QP_STATE);
}

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
	if (conn->lchan && !conn->bye && !conn->bye_sent &&
	    !comm->shutting_down) {
		struct kcoll_wire_msg m;

		kcoll_conn_bye_msg(comm, &m);
		if (!kcoll_lchan_send(conn, &m))
			conn->bye_sent = true;
	}
	comm->nr_up--;
	conn->state = KCOLL_CONN_DEAD;
	conn->error = err;
	for (i = 0; i < conn->nlanes; i++)
		kcoll_lane_flush(&conn->lane[i]);
	if (!comm->shutting_down && !comm->revoked && comm->nr_ops)
		pr_info_ratelimited("comm %llx rank %u: connection to rank %u lost (%d)\n",
				    comm->uid, comm->rank, conn->peer, err);
	kcoll_engine_conn_lost(conn);
	wake_up_all(&comm->wait);
}

void kcoll_conn_up(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;

	lockdep_assert_held(&comm->lock);
	/*
	 * A comm shutting down brings nothing up: its teardown may have
	 * detached this connection from its channel already, and an AUTH
	 * that completes now (a receive, not an rdma_cm event, which would
	 * see shutting_down first) would attach it again, for good.
	 */
	if (conn->state != KCOLL_CONN_CONNECTING || comm->shutting_down)
		return;
	/* A peer on this node: from now on through the channel. */
	if (conn->local) {
		int err = kcoll_lchan_attach(conn);

		if (err) {
			kcoll_conn_fail_setup(conn, err);
			return;
		}
		conn->xp = &kcoll_xport_local;
	}
	conn->state = KCOLL_CONN_UP;
	comm->nr_up++;
	/* Its BYE overtook our ESTABLISHED: it has left already. */
	if (conn->bye) {
		kcoll_conn_kill(conn, -ECONNRESET);
		return;
	}
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
	conn->ping_at = ktime_get_ns();
	m.count = cpu_to_le64(conn->ping_at);
	if (!kcoll_conn_send_msg(conn, &m))
		conn->pings++;
}

void kcoll_conn_fail_setup(struct kcoll_conn *conn, int err)
{
	struct kcoll_comm *comm = conn->comm;

	lockdep_assert_held(&comm->lock);
	/* Up already: its operations and grants must be undone too. */
	if (conn->state == KCOLL_CONN_UP) {
		kcoll_conn_kill(conn, err);
		return;
	}
	if (!comm->error)
		comm->error = err;
	conn->state = KCOLL_CONN_DEAD;
	conn->error = err;
	wake_up_all(&comm->wait);
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
			    !comm->devmem &&
			    !memcmp(comm->ranks[peer].addr,
				    comm->ranks[comm->rank].addr,
				    sizeof(comm->ranks[peer].addr));
	kcoll_conn_set_lanes(conn, conn->active && !conn->local_offer ?
				   comm->lanes : 1);
	/* What COMM_CREATE charged for it; a peer may ask for more. */
	conn->lanes_charged = comm->lanes;
	/* Eager transfers: offered on one QP. */
	conn->eager_offer = conn->active && conn->nlanes == 1 &&
			    kcoll_eager() && !comm->devmem &&
			    kcoll_eager_fits(comm);
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
	kcoll_engine_conn_forget(conn);
	mutex_unlock(&conn->comm->lock);
	/* ... and every grant MR goes, before the PD. */
	kcoll_gmr_conn_shutdown(conn);
	/* Its MRs belong to the device's PD: gone before the device is. */
	kcoll_conn_free_stage(conn);
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
