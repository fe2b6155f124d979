// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll collective engine, grants and sending: the receiver grants each
 * chunk (through a grant MR over exactly its bytes, kcoll_gmr.c, or an
 * exposure of its pages to a peer on this node), the sender answers each
 * grant with one WRITE WITH IMM (or a copy and a DATA message), and the
 * receiver retires grants in order as their data lands.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "kcoll_comm.h"
#include "kcoll_engine.h"

static int kcoll_slot_get(struct kcoll_conn *conn)
{
	int slot = find_first_zero_bit(&conn->slot_busy, conn->window);

	if (slot >= conn->window)
		return -1;
	__set_bit(slot, &conn->slot_busy);
	return slot;
}

/*
 * A WRITE for @op on @conn was posted with result @err: true if the
 * caller stops here, with @op failed, or (a full send queue) to be
 * retried on the next completion.
 */
bool kcoll_op_post_stopped(struct kcoll_task *op,
			   struct kcoll_conn *conn, int err)
{
	if (err && err != -ENOBUFS)
		kcoll_op_fail(op, err == -ENOTCONN ?
			      (conn->error ?: -ECONNRESET) : err);
	return err;
}

/* Issue the grants the window allows for the current phase's receive. */
void kcoll_op_grant(struct kcoll_task *op)
{
	const struct kcoll_srecv *rv = &op->ph.recv;
	struct kcoll_conn *conn = kcoll_conn_of(op->comm, rv->peer);
	struct kcoll_buf *dst = &op->bufs[rv->dst.buf];
	size_t base = rv->dst.off * op->esize;

	if (!conn)
		return;
	if (kcoll_op_eager(op, conn, op->recv_total)) {
		kcoll_op_eager_recv(op, conn);
		return;
	}
	while (op->recv_granted < op->recv_total || !op->recv_granted_any) {
		struct kcoll_wire_msg m;
		struct kcoll_grant *g;
		u64 left = op->recv_total - op->recv_granted;
		size_t len;
		int slot = -1;

		if (conn->k[op->kind].nr_out >= conn->window)
			return;
		if (left && (rv->reduce || (op->unreg && !conn->local))) {
			/* Reducing, or no MR to write into: staging. */
			slot = kcoll_slot_get(conn);
			/* Slots wait for their grant MRs' invalidation
			 * (or deregistration, if that fails). */
			if (slot < 0 && !list_empty(&conn->gmr_inv_due)) {
				kcoll_gmr_flush(conn);
				slot = kcoll_slot_get(conn);
			}
			if (slot < 0)
				return;
			len = min_t(u64, left, rounddown(conn->slot_bytes,
							 op->esize));
		} else if (left) {
			len = min_t(u64, left, kcoll_chunk_bytes());
			/* within one segment: at most seg_pages pages,
			 * what a grant MR holds */
			if (dst->segs)
				len = min(len, kcoll_buf_seg_room(dst, base +
							op->recv_granted));
		} else {
			len = 0;
		}
		g = kzalloc(sizeof(*g), GFP_KERNEL);
		if (!g) {
			if (slot >= 0)
				__clear_bit(slot, &conn->slot_busy);
			kcoll_op_fail(op, -ENOMEM);
			return;
		}
		kcoll_msg_init(op, &m, KCOLL_MSG_GRANT);
		if (conn->local && len) {
			u8 *va = slot >= 0 ?
				 conn->stage.vaddr + slot * conn->slot_bytes :
				 dst->vaddr + base + op->recv_granted;
			int err = kcoll_xpose_add(conn, va, len, &g->xid);

			if (err) {
				if (slot >= 0)
					__clear_bit(slot, &conn->slot_busy);
				kfree(g);
				kcoll_op_fail(op, err);
				return;
			}
			g->addr = g->xid;
		} else if (len) {
			/* An MR over exactly these bytes, for this grant. */
			int err;

			g->gmr = kcoll_gmr_get(conn);
			err = PTR_ERR_OR_ZERO(g->gmr);
			if (!err)
				err = slot >= 0 ?
				      kcoll_gmr_map(g->gmr, &conn->stage,
						    slot * conn->slot_bytes,
						    len, &g->addr, &g->rkey) :
				      kcoll_gmr_map(g->gmr, dst,
						    base + op->recv_granted,
						    len, &g->addr, &g->rkey);
			if (err) {
				if (!IS_ERR(g->gmr))
					kcoll_gmr_put(g->gmr);
				if (slot >= 0)
					__clear_bit(slot, &conn->slot_busy);
				kfree(g);
				/* All MRs out and none retired: one comes
				 * back with a landing, then we retry. */
				if (err != -ENOBUFS)
					kcoll_op_fail(op, err);
				return;
			}
		}
		m.addr = cpu_to_le64(g->addr);
		m.rkey = cpu_to_le32(g->rkey);
		m.len = cpu_to_le32(len);
		m.serial = cpu_to_le32(conn->k[op->kind].serial_out);
		m.phase = cpu_to_le16(op->phase);
		if (g->gmr) {
			/* It takes the MR and the slot over, whatever
			 * happens. */
			int err = kcoll_gmr_grant(g->gmr, slot, op, &m);

			if (err) {
				kfree(g);
				if (err != -ENOBUFS && err != -ENOTCONN)
					kcoll_op_fail(op, err);
				return;
			}
		} else if (kcoll_conn_send_msg(conn, &m)) {
			/* SQ full: retried on the next completion. A dead
			 * connection has failed the op already. */
			kcoll_xpose_revoke(g->xid);
			if (slot >= 0)
				__clear_bit(slot, &conn->slot_busy);
			kfree(g);
			return;
		}
		g->seq = op->seq;
		g->serial = conn->k[op->kind].serial_out++;
		g->len = len;
		g->op = op;
		g->dst_off = op->recv_granted;
		g->slot = slot;
		list_add_tail(&g->node, &conn->k[op->kind].out);
		conn->k[op->kind].nr_out++;
		op->grants_out++;
		op->recv_granted += len;
		op->recv_granted_any = true;
	}
}

/* Data of grant @g landed: out of staging, if it came there. */
static void kcoll_op_landed(struct kcoll_task *op, struct kcoll_conn *conn,
			    struct kcoll_grant *g)
{
	if (g->slot >= 0)
		kcoll_op_land(op, conn->stage.vaddr +
				  g->slot * conn->slot_bytes,
			      g->dst_off, g->len);
}

/* The immediate of a WRITE answering grant @serial on @conn. */
static u32 kcoll_conn_imm(struct kcoll_conn *conn, u32 kind, u32 serial)
{
	return kcoll_grant_imm(kind, serial, conn->eager);
}

/*
 * RDMA WRITE WITH IMM from @conn's peer completed here. With one QP per
 * peer the data comes in grant order; with several it may not, so the
 * grant is found by its serial, and grants retire (op->recv_done grows)
 * only in order: a forwarding send relies on recv_done covering a
 * contiguous prefix of the receive.
 */
void kcoll_engine_data(struct kcoll_conn *conn, u32 imm, u32 byte_len)
{
	u32 kind = imm >> KCOLL_IMM_KIND_SHIFT;
	struct kcoll_grant *g, *tmp;
	struct kcoll_task *op;
	bool found = false;

	lockdep_assert_held(&conn->comm->lock);
	/* Dead (a BYE, an error): what other QPs still complete behind it
	 * is no concern of anyone's any more. */
	if (conn->state != KCOLL_CONN_UP)
		return;
	if (conn->eager && (imm & KCOLL_IMM_EAGER)) {
		kcoll_engine_eager(conn, imm, byte_len);
		return;
	}
	list_for_each_entry(g, &conn->k[kind].out, node) {
		if (kcoll_conn_imm(conn, kind, g->serial) == imm) {
			found = !g->landed && byte_len == g->len;
			break;
		}
	}
	if (!found) {
		pr_warn_ratelimited("comm %llx rank %u: unexpected data from rank %u (imm %#x, %u bytes)\n",
				    conn->comm->uid, conn->comm->rank,
				    conn->peer, imm, byte_len);
		kcoll_conn_kill(conn, -EPROTO);
		return;
	}
	g->landed = true;
	/* Intra-node: the copy is over (it came before the DATA message). */
	kcoll_xpose_revoke(g->xid);
	g->xid = 0;
	if (!g->op->error)
		kcoll_op_landed(g->op, conn, g);
	if (g->gmr) {
		/* Through the NIC: the grant is over; its slot is free
		 * once its MR is invalid. */
		kcoll_gmr_retire(g->gmr);
		g->gmr = NULL;
		g->slot = -1;
	} else if (g->slot >= 0) {
		__clear_bit(g->slot, &conn->slot_busy);
		g->slot = -1;
	}
	list_for_each_entry_safe(g, tmp, &conn->k[kind].out, node) {
		if (!g->landed)
			break;
		list_del(&g->node);
		conn->k[kind].nr_out--;
		op = g->op;
		op->grants_out--;
		if (!op->error) {
			op->recv_done += g->len;
			op->recv_landed_any = true;
		}
		kfree(g);
	}
}

/* Our RDMA WRITE completed (the peer's HCA has the data). */
/* @conn's peer said BYE after completing collective @op: it needs
 * nothing more of it, and everything it sent for it has landed here. */
bool kcoll_peer_finished(struct kcoll_conn *conn, struct kcoll_task *op)
{
	return conn->bye && op->kind == KCOLL_KIND_COLL &&
	       kcoll_seq_before(op->seq, conn->bye_done);
}

void kcoll_write_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kcoll_grant *g = container_of(wc->wr_cqe, struct kcoll_grant,
					     cqe);
	struct kcoll_conn *conn = g->conn;
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_task *op = g->op;

	mutex_lock(&comm->lock);
	/* Under the lock: after the poster's kcoll_ib_tx_start(). */
	kcoll_ib_tx_done(comm->ibdev, wc->status == IB_WC_SUCCESS ? g->len : 0);
	conn->sq_posted--;
	conn->lane[g->lane].sq_posted--;
	conn->lane[g->lane].sent_at = jiffies;
	op->writes_inflight--;
	if (wc->status == IB_WC_SUCCESS ||
	    (wc->status == IB_WC_WR_FLUSH_ERR && kcoll_peer_finished(conn, op))) {
		/* Flushed after the peer's BYE: it had the data. */
		kcoll_stat_add(KCOLL_STAT_RDMA_BYTES, g->len);
		op->send_done += g->len;
		op->send_done_any = true;
		if (wc->status != IB_WC_SUCCESS)
			kcoll_conn_kill(conn, -ECONNRESET);
	} else {
		if (wc->status != IB_WC_WR_FLUSH_ERR)
			pr_warn_ratelimited("comm %llx rank %u: write to rank %u failed: %s\n",
					    comm->uid, comm->rank, conn->peer,
					    ib_wc_status_msg(wc->status));
		kcoll_conn_kill(conn, -EIO);
		kcoll_op_fail(op, -EIO);
	}
	kfree(g);
	if (op->abort_deferred && !op->writes_inflight) {
		op->abort_deferred = false;
		kcoll_op_abort_peers(op, true);
	}
	kcoll_engine_reap(comm);
	if (comm->shutting_down && !conn->sq_posted)
		wake_up_all(&comm->wait);	/* the BYE wait */
	mutex_unlock(&comm->lock);
}

/*
 * Fill grant @g of a peer on this node from @src: copy, then tell it with a
 * DATA message where a WRITE WITH IMM would have told it. The peer's CQ
 * handler sees the message after the copy (the post orders them). Done at
 * once: there is no completion to wait for.
 */
static int kcoll_op_send_local(struct kcoll_task *op, struct kcoll_conn *conn,
			       struct kcoll_grant *g, const u8 *src)
{
	struct kcoll_wire_msg m;
	int err;

	/* Up before copying: the DATA message after it must go out (the
	 * channel never refuses one for lack of room). */
	if (conn->state != KCOLL_CONN_UP)
		return conn->error ?: -ECONNRESET;
	if (g->len) {
		err = kcoll_xpose_copy(conn, g->addr, src, g->len);
		if (err)
			return err;
	}
	kcoll_msg_init(op, &m, KCOLL_MSG_DATA);
	m.serial = cpu_to_le32(g->serial);
	m.len = cpu_to_le32(g->len);
	err = kcoll_conn_send_msg(conn, &m);
	if (err)
		return err == -ENOTCONN ? (conn->error ?: -ECONNRESET) : err;
	op->send_posted += g->len;
	op->send_posted_any = true;
	op->send_done += g->len;
	op->send_done_any = true;
	conn->local_bytes += g->len;
	kcoll_stat_add(KCOLL_STAT_INTRA_BYTES, g->len);
	return 0;
}

/* Answer the grants that have arrived for the current phase's send. */
void kcoll_op_send(struct kcoll_task *op)
{
	const struct kcoll_ssend *sd = &op->ph.send;
	struct kcoll_conn *conn = kcoll_conn_of(op->comm, sd->peer);
	struct kcoll_buf *src = &op->bufs[sd->src.buf];
	size_t base = sd->src.off * op->esize;
	struct kcoll_grant *g, *tmp;

	if (!conn)
		return;
	if (kcoll_op_eager(op, conn, op->send_total)) {
		kcoll_op_send_eager(op, conn, src->vaddr + base);
		return;
	}
	list_for_each_entry_safe(g, tmp, &conn->k[op->kind].in, node) {
		struct ib_sge sge[2];
		int nsge = 0, err;
		size_t off, first;

		if (kcoll_seq_before(g->seq, op->seq)) {
			/* Left over from an aborted operation. */
			list_del(&g->node);
			kfree(g);
			continue;
		}
		if (g->seq != op->seq || g->phase > (u16)op->phase)
			return;		/* the peer is ahead of us */
		if (g->sig_unchecked && op->kind == KCOLL_KIND_COLL) {
			g->sig_unchecked = false;
			if (!kcoll_op_check_sig(op, conn, &g->sig))
				return;
		} else if (g->sig_unchecked) {
			/* Granted before this send was issued. */
			g->sig_unchecked = false;
			if (!kcoll_sig_match(op, &g->sig)) {
				pr_warn_ratelimited("comm %llx rank %u: send %u to rank %u does not match its receive\n",
						    op->comm->uid, op->comm->rank,
						    op->seq, conn->peer);
				kcoll_op_fail(op, -EBADMSG);
				return;
			}
		}
		if (g->phase != (u16)op->phase ||
		    (op->send_posted >= op->send_total && op->send_posted_any)) {
			kcoll_op_fail(op, -EBADMSG);	/* schedules disagree */
			return;
		}
		if (g->len > op->send_total - op->send_posted ||
		    (!g->len && op->send_total)) {
			kcoll_op_fail(op, -EBADMSG);	/* sizes disagree */
			return;
		}
		if (sd->fwd && op->recv_done < op->send_posted + g->len)
			return;		/* not received (and reduced) yet */
		if (g->len && kcoll_op_held(op))
			return;		/* a higher priority runs */
		off = base + op->send_posted;
		if (conn->local) {
			err = kcoll_op_send_local(op, conn, g, src->vaddr + off);
			if (err == -ENOENT) {
				/* The peer dropped the grant: it failed. */
				kcoll_op_fail_from(op, -ECONNRESET, conn->peer);
				return;
			}
			if (err) {
				kcoll_op_fail(op, err);
				if (err == -EPROTO)	/* frees the grants */
					kcoll_conn_kill(conn, err);
				return;
			}
			list_del(&g->node);
			kfree(g);
			continue;
		}
		if (conn->nlanes == 1 && g->len <= conn->lane[0].max_inline) {
			/*
			 * Small: the data goes in the WQE, so the send is
			 * done once posted, one RC ACK sooner than a WRITE
			 * from memory (a latency-bound step's third trip).
			 * One QP only: with several, an ABORT must wait for
			 * our writes (abort_deferred), which this does not
			 * count.
			 */
			err = kcoll_conn_write_inline(conn, 0, src->vaddr + off,
						      g->len, g->addr, g->rkey,
						      kcoll_conn_imm(conn, op->kind,
								     g->serial));
			if (kcoll_op_post_stopped(op, conn, err))
				return;
			kcoll_stat_add(KCOLL_STAT_RDMA_BYTES, g->len);
			op->send_posted += g->len;
			op->send_posted_any = true;
			op->send_done += g->len;
			op->send_done_any = true;
			list_del(&g->node);
			kfree(g);
			continue;
		}
		if (g->len && !src->segs) {
			/* An unregistered buffer too large to go inline:
			 * register it now (once per operation). */
			err = kcoll_buf_register(src, op->comm);
			if (err) {
				kcoll_op_fail(op, err);
				return;
			}
		}
		if (g->len) {
			first = min_t(size_t, g->len,
				      kcoll_buf_seg_room(src, off));
			kcoll_buf_sge(src, off, first, &sge[nsge++]);
			if (first < g->len) {
				if (g->len - first >
				    kcoll_buf_seg_room(src, off + first)) {
					kcoll_op_fail(op, -EMSGSIZE);
					return;
				}
				kcoll_buf_sge(src, off + first, g->len - first,
					      &sge[nsge++]);
			}
		}
		g->cqe.done = kcoll_write_done;
		g->conn = conn;
		g->op = op;
		g->lane = g->serial % conn->nlanes;
		err = kcoll_conn_write(conn, g->lane, sge, nsge, g->addr, g->rkey,
				       kcoll_conn_imm(conn, op->kind, g->serial),
				       &g->cqe);
		if (kcoll_op_post_stopped(op, conn, err))
			return;
		kcoll_ib_tx_start(op->comm->ibdev);
		list_del(&g->node);
		op->writes_inflight++;
		op->send_posted += g->len;
		op->send_posted_any = true;
	}
}

/*
 * The connection is being torn down: withdraw the memory its grants expose
 * to a peer on this node before the staging and the ops' pages go. The
 * grants themselves are freed by kcoll_engine_conn_lost(). Must hold
 * comm->lock.
 */
void kcoll_engine_conn_unexpose(struct kcoll_conn *conn)
{
	struct kcoll_grant *g;
	int k;

	lockdep_assert_held(&conn->comm->lock);
	for (k = 0; k < KCOLL_KIND_NR; k++) {
		list_for_each_entry(g, &conn->k[k].out, node) {
			kcoll_xpose_revoke(g->xid);
			g->xid = 0;
		}
	}
}

/* Drop the grants @conn's peer will never fill for @op (it aborted). */
void kcoll_op_forget_grants(struct kcoll_task *op, struct kcoll_conn *conn)
{
	struct kcoll_grant *g, *tmp;

	list_for_each_entry_safe(g, tmp, &conn->k[op->kind].out, node) {
		if (g->op != op)
			continue;
		/* Grants are found by serial and retire in order once
		 * landed: dropping @op's leaves the others' valid. */
		list_del(&g->node);
		conn->k[op->kind].nr_out--;
		op->grants_out--;
		kcoll_xpose_revoke(g->xid);
		if (g->gmr)
			kcoll_gmr_retire(g->gmr);
		else if (g->slot >= 0)
			__clear_bit(g->slot, &conn->slot_busy);
		kfree(g);
	}
}
