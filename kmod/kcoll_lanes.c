// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll transport through the NIC (kcoll_xport.h): a connection's RC QPs
 * (its lanes). Control messages are inline SENDs on lane 0; a grant is an
 * MR over exactly the granted bytes (kcoll_gmr.c), named in the GRANT; a
 * put is an RDMA WRITE WITH IMM whose immediate names the grant, inline
 * when small; an eager transfer is one WRITE WITH IMM from our bounce into
 * a slot the peer offered. Every WR is signalled and counted in sq_posted
 * until its completion runs.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/slab.h>

#include "kcoll_types.h"
#include "kcoll_mem.h"
#include "kcoll_gmr.h"
#include "kcoll_coll.h"
#include "kcoll_conn.h"
#include "kcoll_xport.h"
#include "kcoll_stats.h"
#include "kcoll_ib.h"

/* ------------------------------------------------------------------ */
/* Posting                                                              */
/* ------------------------------------------------------------------ */

/* Send WRs lane @idx of @conn can still take. Must hold comm->lock. */
unsigned int kcoll_conn_sq_room(struct kcoll_conn *conn, unsigned int idx)
{
	lockdep_assert_held(&conn->comm->lock);
	if (idx >= conn->nlanes || conn->lane[idx].sq_posted >= KCOLL_SQ_DEPTH)
		return 0;
	return KCOLL_SQ_DEPTH - conn->lane[idx].sq_posted;
}

/*
 * Post one signalled send-queue WR on @conn's lane @idx: every WR of ours
 * is signalled and counted in sq_posted (the lane's and the connection's)
 * until its completion handler runs. Must hold comm->lock.
 */
static int kcoll_conn_post(struct kcoll_conn *conn, unsigned int idx,
			   struct ib_send_wr *wr)
{
	struct kcoll_lane *lane = &conn->lane[idx];
	int err;

	lockdep_assert_held(&conn->comm->lock);
	if (conn->state != KCOLL_CONN_UP || lane->draining)
		return -ENOTCONN;
	if (idx >= conn->nlanes)
		return -EINVAL;
	if (lane->sq_posted >= KCOLL_SQ_DEPTH)
		return -ENOBUFS;
	wr->send_flags |= IB_SEND_SIGNALED;
	err = ib_post_send(lane->qp, wr, NULL);
	if (!err) {
		conn->sq_posted++;
		conn->tx_posted++;
		if (!lane->sq_posted++)
			kcoll_engine_sq_busy(lane);
	}
	return err;
}

/* A control message: inline SEND on lane 0, in order with the others. */
static int kcoll_conn_send_qp(struct kcoll_conn *conn,
			      struct kcoll_wire_msg *m)
{
	struct ib_sge sge = {
		.addr = (uintptr_t)m,
		.length = sizeof(*m),
	};
	struct ib_send_wr wr = {
		.wr_cqe = &conn->lane[0].tx_cqe,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_INLINE,
	};

	return kcoll_conn_post(conn, 0, &wr);
}

/*
 * RDMA WRITE WITH IMM of @sge to (@raddr, @rkey) on lane @lane. Must hold
 * comm->lock.
 */
static int kcoll_conn_write(struct kcoll_conn *conn, unsigned int lane,
			    struct ib_sge *sge, int nsge, u64 raddr, u32 rkey,
			    u32 imm, struct ib_cqe *cqe)
{
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_cqe = cqe,
			.sg_list = nsge ? sge : NULL,
			.num_sge = nsge,
			.opcode = IB_WR_RDMA_WRITE_WITH_IMM,
			.ex.imm_data = cpu_to_be32(imm),
		},
		.remote_addr = raddr,
		.rkey = rkey,
	};

	return kcoll_conn_post(conn, lane, &wr.wr);
}

/*
 * The same with the data inline (@len <= the lane's max_inline; @buf a
 * kernel address): the WQE holds a copy once posted, so the caller may
 * count it sent at once. Its completion is a control SEND's (tx_cqe):
 * a failure kills the connection. Must hold comm->lock.
 */
static int kcoll_conn_write_inline(struct kcoll_conn *conn, unsigned int lane,
				   const void *buf, u32 len, u64 raddr,
				   u32 rkey, u32 imm)
{
	struct ib_sge sge = {
		.addr = (uintptr_t)buf,
		.length = len,
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_cqe = &conn->lane[lane].tx_cqe,
			.sg_list = len ? &sge : NULL,
			.num_sge = len ? 1 : 0,
			.opcode = IB_WR_RDMA_WRITE_WITH_IMM,
			.send_flags = IB_SEND_INLINE,
			.ex.imm_data = cpu_to_be32(imm),
		},
		.remote_addr = raddr,
		.rkey = rkey,
	};

	if (lane >= conn->nlanes || len > conn->lane[lane].max_inline)
		return -EINVAL;
	return kcoll_conn_post(conn, lane, &wr.wr);
}

/* ------------------------------------------------------------------ */
/* The transport                                                        */
/* ------------------------------------------------------------------ */

/*
 * Whose are @b's pages? *@mem: the registration or cache entry of @op's
 * that holds them (op->mems), or NULL. True if they are @op's buffer's
 * and let go when @op completes (a plain address pinned for it, or pages
 * of its own); false for a held buffer and for the connection's own
 * memory (staging).
 */
static bool kcoll_op_lets_go(const struct kcoll_task *op,
			     const struct kcoll_buf *b, struct kcoll_mem **mem)
{
	int i;

	*mem = NULL;
	for (i = 0; i < KCOLL_SBUF_NR; i++) {
		if (b == &op->bufs[i]) {
			*mem = op->mems[i];
			return !op->mems[i];
		}
	}
	return false;
}

/* An MR over exactly the granted bytes, registered before the GRANT. */
static int kcoll_lanes_expose(struct kcoll_conn *conn, struct kcoll_task *op,
			      struct kcoll_grant *g, const struct kcoll_buf *b,
			      size_t off, struct kcoll_wire_msg *m)
{
	struct ib_device *ibdev = READ_ONCE(conn->comm->ibdev);
	/* Where an invalidation is no fence (struct kcoll_gmr). */
	bool nofence = !ibdev || !kcoll_ib_inv_fences(ibdev);
	struct kcoll_mem *mem;
	bool lets_go = kcoll_op_lets_go(op, b, &mem);
	struct kcoll_gmr *gmr = kcoll_gmr_get(conn, mem, nofence);
	int err = PTR_ERR_OR_ZERO(gmr);

	if (!err)
		err = kcoll_gmr_map(gmr, b, off, g->len, &g->addr, &g->rkey);
	if (err) {
		if (!IS_ERR(gmr))
			kcoll_gmr_put(gmr);
		if (g->slot >= 0)
			__clear_bit(g->slot, &conn->slot_busy);
		/* All MRs out and none retired: one comes back with a
		 * landing, then the grant is tried again. */
		return err;
	}
	m->addr = cpu_to_le64(g->addr);
	m->rkey = cpu_to_le32(g->rkey);
	/*
	 * Where an invalidation is no fence, an MR over pages that go with
	 * @op ends deregistered (struct kcoll_gmr), so that no packet still
	 * copies into them once they are unpinned; one over a held buffer's
	 * stays tied to it (kcoll_gmr_get()).
	 */
	gmr->fence = lets_go && nofence;
	/* It takes the MR and the slot over, whatever happens. */
	err = kcoll_gmr_grant(gmr, g->slot, op, m);
	if (!err)
		g->gmr = gmr;
	return err;
}

/* Retired: invalidated with the next batch; the slot is free once the MR
 * is invalid (kcoll_gmr_flush()), not before. */
static void kcoll_lanes_unexpose(struct kcoll_conn *conn,
				 struct kcoll_grant *g)
{
	if (!g->gmr)
		return;
	kcoll_gmr_retire(g->gmr);
	g->gmr = NULL;
	g->slot = -1;
}

/* Slots wait for their grant MRs' invalidation (or deregistration, if
 * that fails): invalidate what is due now. */
static bool kcoll_lanes_reclaim(struct kcoll_conn *conn)
{
	if (list_empty(&conn->gmr_inv_due))
		return false;
	kcoll_gmr_flush(conn);
	return true;
}

/* Every grant MR of the connection is dead now (kcoll_gmr_conn_lost()). */
static void kcoll_lanes_lost(struct kcoll_conn *conn)
{
	kcoll_gmr_conn_lost(conn);
}

/* Our RDMA WRITE completed (the peer's HCA has the data), or failed. */
static void kcoll_lanes_put_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kcoll_grant *g = container_of(wc->wr_cqe, struct kcoll_grant,
					     cqe);
	struct kcoll_conn *conn = g->conn;
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_task *op = g->op;
	int err = 0;

	mutex_lock(&comm->lock);
	/* Under the lock: after the poster's kcoll_ib_tx_start(). */
	kcoll_ib_tx_done(comm->ibdev, wc->status == IB_WC_SUCCESS ? g->len : 0);
	conn->sq_posted--;
	conn->tx_done++;
	conn->lane[g->lane].sq_posted--;
	conn->lane[g->lane].sent_at = jiffies;
	if (wc->status == IB_WC_SUCCESS ||
	    (wc->status == IB_WC_WR_FLUSH_ERR && kcoll_peer_finished(conn, op))) {
		/* Flushed after the peer's BYE: it had the data. */
		kcoll_stat_add(KCOLL_STAT_RDMA_BYTES, g->len);
		if (wc->status != IB_WC_SUCCESS)
			kcoll_conn_kill(conn, -ECONNRESET);
		else
			kcoll_conn_bye_retry(conn);
	} else {
		if (wc->status != IB_WC_WR_FLUSH_ERR)
			pr_warn_ratelimited("comm %llx rank %u: write to rank %u failed: %s\n",
					    comm->uid, comm->rank, conn->peer,
					    ib_wc_status_msg(wc->status));
		kcoll_conn_kill(conn, -EIO);
		err = -EIO;
	}
	kcoll_engine_put_done(conn, op, g->phase, g->len, err);
	kfree(g);
	if (comm->shutting_down && !conn->sq_posted)
		wake_up_all(&comm->wait);	/* the BYE wait */
	mutex_unlock(&comm->lock);
}

static int kcoll_lanes_put(struct kcoll_task *op, struct kcoll_conn *conn,
			   struct kcoll_grant *g, struct kcoll_buf *src,
			   size_t off, struct kcoll_wire_msg *m)
{
	u32 imm = kcoll_grant_imm(op->kind, g->serial, conn->eager);
	struct ib_sge sge[2];
	size_t first;
	int nsge = 0, err;

	if (conn->nlanes == 1 && g->len <= conn->lane[0].max_inline &&
	    !src->nocpu) {
		/*
		 * Small: the data goes in the WQE, so the send is done once
		 * posted, one RC ACK sooner than a WRITE from memory (a
		 * latency-bound step's third trip). One QP only: with
		 * several, an ABORT must wait for our writes
		 * (abort_deferred), which this does not count.
		 */
		err = kcoll_conn_write_inline(conn, 0, src->vaddr + off,
					      g->len, g->addr, g->rkey, imm);
		if (err)
			return err;
		kcoll_stat_add(KCOLL_STAT_RDMA_BYTES, g->len);
		return KCOLL_PUT_DONE;
	}
	if (g->len && !src->segs) {
		/* An unregistered buffer too large to go inline: register
		 * it now (once per operation). */
		err = kcoll_buf_register(src, op->comm);
		if (err)
			return err;
	}
	if (g->len) {
		first = min_t(size_t, g->len, kcoll_buf_seg_room(src, off));
		kcoll_buf_sge(src, off, first, &sge[nsge++]);
		if (first < g->len) {
			if (g->len - first > kcoll_buf_seg_room(src, off + first))
				return -EMSGSIZE;
			kcoll_buf_sge(src, off + first, g->len - first,
				      &sge[nsge++]);
		}
	}
	g->cqe.done = kcoll_lanes_put_done;
	g->conn = conn;
	g->op = op;
	g->lane = g->serial % conn->nlanes;
	err = kcoll_conn_write(conn, g->lane, sge, nsge, g->addr, g->rkey, imm,
			       &g->cqe);
	if (err)
		return err;
	kcoll_ib_tx_start(op->comm->ibdev);
	return KCOLL_PUT_POSTED;
}

/* One grant MR per slot, over exactly the slot. */
static int kcoll_lanes_eager_up(struct kcoll_conn *conn)
{
	return kcoll_gmr_eager_setup(conn);
}

/*
 * Each slot's MR is registered anew under its next key before an offer.
 * A CREDITS names keys, not addresses: the key byte (the rkey's low 8
 * bits) of slot @slot goes in byte @slot of addr.
 */
static int kcoll_lanes_eager_offer(struct kcoll_conn *conn,
				   unsigned long slots, bool again,
				   struct kcoll_wire_msg *m)
{
	unsigned int slot;
	u64 keys = 0;
	int err;

	/* A full send queue: they stay due (offered later). */
	if (!kcoll_conn_sq_room(conn, 0))
		return -ENOBUFS;
	err = kcoll_gmr_eager_offer(conn, slots);
	if (err)
		return err;
	if (again) {
		for_each_set_bit(slot, &slots, KCOLL_EAGER_SLOTS)
			keys |= (u64)(conn->egmr[slot]->mr->rkey & 0xff)
				<< (8 * slot);
		m->addr = cpu_to_le64(keys);
	}
	return 0;
}

static void kcoll_lanes_eager_credit(struct kcoll_conn *conn,
				     unsigned int slot,
				     struct kcoll_wire_msg *m)
{
	m->addr = cpu_to_le64(conn->egmr[slot]->mr->iova);
	m->rkey = cpu_to_le32(conn->egmr[slot]->mr->rkey);
}

/* Each re-offer is a new registration of the slot's MR: byte @slot of
 * addr is its new key byte. */
static void kcoll_lanes_eager_reoffered(struct kcoll_conn *conn,
					unsigned long slots,
					const struct kcoll_wire_msg *m)
{
	u64 keys = le64_to_cpu(m->addr);
	unsigned int slot;

	BUILD_BUG_ON(KCOLL_EAGER_SLOTS * 8 > 64);
	for_each_set_bit(slot, &slots, KCOLL_EAGER_SLOTS)
		conn->etx_rkey[slot] = (conn->etx_rkey[slot] & ~0xffU) |
				       ((keys >> (8 * slot)) & 0xff);
}

/*
 * Header and data into our bounce for slot @slot (registered with the
 * slots), then one WRITE WITH IMM from it into the peer's slot, inline when
 * it fits. The bounce is ours until the peer offers the slot again, which
 * it does only after the data has landed; a failed completion kills the
 * connection like a control message's.
 */
static int kcoll_lanes_eager_put(struct kcoll_conn *conn, u32 slot,
				 struct kcoll_wire_msg *m, const void *h,
				 u32 hlen, const u8 *src, u32 len)
{
	size_t boff = (size_t)(KCOLL_EAGER_SLOTS + slot) * KCOLL_EAGER_SLOT_BYTES;
	u32 imm = kcoll_imm_make(m->kind, KCOLL_IMM_EAGER | slot);
	u8 *bounce = conn->ebuf.vaddr + boff;
	u32 n = hlen + len;
	struct ib_sge sge;
	int err;

	memcpy(bounce, h, hlen);
	memcpy(bounce + hlen, src, len);
	if (n <= conn->lane[0].max_inline) {
		err = kcoll_conn_write_inline(conn, 0, bounce, n,
					      conn->etx_addr[slot],
					      conn->etx_rkey[slot], imm);
	} else {
		kcoll_buf_sge(&conn->ebuf, boff, n, &sge);
		err = kcoll_conn_write(conn, 0, &sge, 1, conn->etx_addr[slot],
				       conn->etx_rkey[slot], imm,
				       &conn->lane[0].tx_cqe);
	}
	if (!err)
		kcoll_stat_add(KCOLL_STAT_RDMA_BYTES, len);
	return err;
}

const struct kcoll_xport kcoll_xport_rdma = {
	.name = "rdma",
	.stage_unreg = true,
	.timed = true,
	.send_msg = kcoll_conn_send_qp,
	.expose = kcoll_lanes_expose,
	.unexpose = kcoll_lanes_unexpose,
	.reclaim = kcoll_lanes_reclaim,
	.lost = kcoll_lanes_lost,
	.put = kcoll_lanes_put,
	.eager_up = kcoll_lanes_eager_up,
	.eager_offer = kcoll_lanes_eager_offer,
	.eager_credit = kcoll_lanes_eager_credit,
	.eager_reoffered = kcoll_lanes_eager_reoffered,
	.eager_put = kcoll_lanes_eager_put,
};
