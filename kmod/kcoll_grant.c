// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll collective engine, grants and sending: the receiver grants each
 * chunk (the transport exposes exactly its bytes: kcoll_xport.h), the
 * sender answers each grant with one put (a WRITE WITH IMM through the NIC,
 * a copy and a DATA message to a peer on this node), and the receiver
 * retires grants in order as their data lands.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "kcoll_types.h"
#include "kcoll_mem.h"
#include "kcoll_coll.h"
#include "kcoll_conn.h"
#include "kcoll_xport.h"
#include "kcoll_sysfs.h"
#include "kcoll_stats.h"
#include "kcoll_engine.h"

/*
 * A collective running beside an older one (not the head) leaves the head
 * at least half of the connection's grant window and staging slots: the
 * head, the oldest collective on every rank that has not completed it,
 * always has room to progress, so each collective completes by induction
 * whatever the younger ones hold (docs/DESIGN.md, "Several collectives in
 * flight"). Whether @op may take one more of @n in use out of @max.
 */
static bool kcoll_room(struct kcoll_task *op, u32 n, u32 max)
{
	if (n >= max)
		return false;
	return op->kind != KCOLL_KIND_COLL || kcoll_op_is_head(op) ||
	       max - n > max / 2;
}

static int kcoll_slot_get(struct kcoll_task *op, struct kcoll_conn *conn)
{
	int slot = find_first_zero_bit(&conn->slot_busy, conn->window);

	if (slot >= conn->window ||
	    !kcoll_room(op, hweight_long(conn->slot_busy), conn->window))
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

/*
 * What kcoll_grant_issue() grants: phase @phase's receive @rv, @total
 * bytes, of which *@granted are (*@any: one grant at least, an empty
 * one for an empty receive).
 */
struct kcoll_grant_to {
	const struct kcoll_srecv *rv;
	u32 phase;
	u64 total;
	u64 *granted;
	bool *any;
};

/* Issue the grants the window allows for receive @to on @conn. */
static void kcoll_grant_issue(struct kcoll_task *op, struct kcoll_conn *conn,
			      const struct kcoll_grant_to *to)
{
	const struct kcoll_srecv *rv = to->rv;
	struct kcoll_buf *dst = &op->bufs[rv->dst.buf];
	size_t base = rv->dst.off * op->esize;
	/* Stream-ordered: what the GPU reduces lands in the scratch. */
	bool land = op->gpu && rv->reduce;

	if (land) {
		dst = &op->bufs[KCOLL_SBUF_LAND];
		base = 0;
	}
	while (*to->granted < to->total || !*to->any) {
		struct kcoll_wire_msg m;
		struct kcoll_grant *g;
		u64 left = to->total - *to->granted;
		size_t len;
		int slot = -1;

		if (!kcoll_room(op, conn->k[op->kind].nr_out, conn->window))
			return;
		if (left && ((rv->reduce && !land) ||
			     (op->unreg && conn->xp->stage_unreg))) {
			/* Reducing, or no MR to write into: staging. */
			slot = kcoll_slot_get(op, conn);
			/* Slots may wait for the transport to be sure
			 * that retired grants cannot be written through
			 * (only when all are taken: a younger collective
			 * refused its share waits, and does not make the
			 * head's invalidations synchronous). */
			if (slot < 0 && conn->xp->reclaim &&
			    hweight_long(conn->slot_busy) >= conn->window &&
			    conn->xp->reclaim(conn))
				slot = kcoll_slot_get(op, conn);
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
							*to->granted));
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
		kcoll_msg_init(op, &m, KCOLL_MSG_GRANT, conn->peer);
		m.len = cpu_to_le32(len);
		m.serial = cpu_to_le32(conn->k[op->kind].serial_out);
		m.phase = cpu_to_le16(to->phase);
		g->len = len;
		g->slot = slot;
		if (len) {
			/* Exposed, then granted: the transport takes the
			 * slot over, whatever happens. */
			int err = slot >= 0 ?
				  conn->xp->expose(conn, op, g, &conn->stage,
						   slot * conn->slot_bytes, &m) :
				  conn->xp->expose(conn, op, g, dst,
						   base + *to->granted, &m);

			if (err) {
				kfree(g);
				/* -ENOBUFS: all MRs out and none retired, or
				 * no room to send; retried after the next
				 * landing or completion. */
				if (err != -ENOBUFS && err != -ENOTCONN)
					kcoll_op_fail(op, err);
				return;
			}
		} else {
			int err = conn->xp->send_msg(conn, &m);

			if (err) {
				/* No room: retried on the next completion.
				 * A dead connection has failed the op
				 * already; anything else fails it. */
				kfree(g);
				if (err != -ENOBUFS && err != -ENOTCONN)
					kcoll_op_fail(op, err);
				return;
			}
		}
		g->seq = op->seq;
		g->phase = to->phase;
		g->serial = conn->k[op->kind].serial_out++;
		g->op = op;
		g->dst_off = *to->granted;
		list_add_tail(&g->node, &conn->k[op->kind].out);
		conn->k[op->kind].nr_out++;
		op->grants_out++;
		if (len)
			op->grants_mem++;
		*to->granted += len;
		*to->any = true;
		if (to->phase != op->phase)
			kcoll_stat_add(KCOLL_STAT_GRANTS_AHEAD, 1);
	}
}

/* Issue the grants the window allows for the current phase's receive. */
void kcoll_op_grant(struct kcoll_task *op)
{
	struct kcoll_conn *conn = kcoll_conn_of(op->comm, op->ph.recv.peer);
	struct kcoll_grant_to to = {
		.rv = &op->ph.recv, .phase = op->phase,
		.total = op->recv_total, .granted = &op->recv_granted,
		.any = &op->recv_granted_any,
	};

	if (!conn)
		return;
	if (kcoll_op_eager_undecided(op, conn, op->recv_total))
		return;		/* the peer's first CREDIT runs us again */
	if (kcoll_op_eager(op, conn, op->recv_total)) {
		kcoll_op_eager_recv(op, conn);
		/* Point-to-point, waited for: granted as well (below). */
		if (op->kind != KCOLL_KIND_P2P || !kcoll_p2p_waited(op, conn))
			return;
	} else if (op->kind == KCOLL_KIND_P2P && !op->recv_granted_any &&
		   conn->erx_p2p) {
		kcoll_eager_p2p_granted(op, conn);
		if (op->error)
			return;
	}
	kcoll_grant_issue(op, conn, &to);
}

/*
 * May @op grant phase @nx's receive (from @conn's peer) while its current
 * phase runs? The schedule's part is plain C (kcoll_sched_recv_ahead(),
 * which the host model executes); here what the connection adds. Only a
 * new peer's, through the NIC: where the round trip to a peer is worth
 * saving (xp->timed; on the intra-node channel a grant is a local
 * message, nothing to save), and not the peer of the phase running now,
 * whose grants already flow. Not eager, and no staging (unregistered
 * memory on a transport that stages it).
 */
static bool kcoll_op_may_grant_ahead(struct kcoll_task *op,
				     const struct kcoll_phase *nx,
				     struct kcoll_conn *conn)
{
	return conn && conn->xp->timed &&
	       kcoll_sched_recv_ahead(&op->args, &op->ph, nx) &&
	       !(op->ph.has_recv && op->ph.recv.peer == nx->recv.peer) &&
	       !kcoll_op_eager(op, conn, nx->recv.cnt * op->esize) &&
	       !(op->unreg && conn->xp->stage_unreg);
}

/*
 * Grant the next phase's receive while this phase runs, once this one's
 * receive needs no more grants: its sender finds them waiting when it
 * gets there, instead of a round trip later (an alltoall's pairwise
 * phases each wait for a new peer's first grant otherwise). Grants of a
 * later phase queue at the sender until it reaches that phase
 * (kcoll_op_send()), and take window like any other (kcoll_room()).
 * Alltoall and alltoallv only: theirs is the wait the module's profile
 * showed, and the A/B runs measured them faster; allgathers measured no
 * different (docs/PERFORMANCE.md, "One module against itself"). Not
 * stream-ordered ones; not with sysfs phases_ahead 0. Must hold
 * comm->lock.
 */
void kcoll_op_grant_ahead(struct kcoll_task *op)
{
	struct kcoll_grant_to to;
	struct kcoll_conn *conn;

	lockdep_assert_held(&op->comm->lock);
	/* Failed (its send, just now): nothing new may expose its memory. */
	if (op->error || op->ahead == KCOLL_AHEAD_OFF || op->kind != KCOLL_KIND_COLL ||
	    op->gpu || op->phase + 1 >= op->nphases ||
	    (op->ahead == KCOLL_AHEAD_UNDECIDED && kcoll_phases_ahead() < 1) ||
	    (op->args.opcode != KCOLL_OP_ALLTOALL &&
	     op->args.opcode != KCOLL_OP_ALLTOALLV))
		return;
	if (op->ph.has_recv && op->ph.recv.cnt) {
		conn = kcoll_conn_of(op->comm, op->ph.recv.peer);
		if (conn && !kcoll_op_eager(op, conn, op->recv_total) &&
		    (op->recv_granted < op->recv_total ||
		     !op->recv_granted_any))
			return;		/* this phase's own first */
	}
	if (op->ahead == KCOLL_AHEAD_UNDECIDED) {
		struct kcoll_phase nx;

		kcoll_sched_phase(&op->args, op->phase + 1, &nx);
		conn = nx.has_recv ? kcoll_conn_of(op->comm, nx.recv.peer) :
				     NULL;
		if (!kcoll_op_may_grant_ahead(op, &nx, conn)) {
			op->ahead = KCOLL_AHEAD_OFF;
			return;
		}
		op->ahead = KCOLL_AHEAD_ON;
		op->ahead_rv = nx.recv;
	}
	conn = kcoll_conn_of(op->comm, op->ahead_rv.peer);
	if (!conn)
		return;
	to = (struct kcoll_grant_to){
		.rv = &op->ahead_rv, .phase = op->phase + 1,
		.total = op->ahead_rv.cnt * op->esize,
		.granted = &op->ahead_granted,
		.any = &op->ahead_granted_any,
	};
	kcoll_grant_issue(op, conn, &to);
}

/* Data of a grant landed: out of staging slot @slot, if it came there. */
static void kcoll_op_landed(struct kcoll_task *op, struct kcoll_conn *conn,
			    struct kcoll_grant *g, int slot)
{
	if (slot >= 0)
		kcoll_op_land(op, conn->stage.vaddr + slot * conn->slot_bytes,
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
	int slot;

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
	/* The grant is over: the peer may not write through it any more
	 * (before its data is used: on one node, a copy into it has
	 * finished). Its slot stays ours until it is consumed, and through
	 * the NIC until its MR is invalid too. */
	slot = g->slot;
	conn->xp->unexpose(conn, g);
	if (!g->op->error)
		kcoll_op_landed(g->op, conn, g, slot);
	if (g->slot >= 0) {
		__clear_bit(g->slot, &conn->slot_busy);
		g->slot = -1;
	}
	/* Retired in order per operation: collectives running side by
	 * side each have their own prefix. */
	op = g->op;
	list_for_each_entry_safe(g, tmp, &conn->k[kind].out, node) {
		if (g->op != op)
			continue;
		if (!g->landed)
			break;
		list_del(&g->node);
		conn->k[kind].nr_out--;
		op->grants_out--;
		if (g->len)
			op->grants_mem--;
		if (op->error) {
			/* nothing counts any more */
		} else if (g->phase == op->phase) {
			op->recv_done += g->len;
			op->recv_landed_any = true;
		} else {
			/* Granted ahead: the next phase's. */
			op->ahead_done += g->len;
			op->ahead_landed_any = true;
		}
		kfree(g);
	}
}

/* @conn's peer said BYE after completing collective @op: it needs
 * nothing more of it, and everything it sent for it has landed here. */
bool kcoll_peer_finished(struct kcoll_conn *conn, struct kcoll_task *op)
{
	return conn->bye && op->kind == KCOLL_KIND_COLL &&
	       kcoll_seq_before(op->seq, conn->bye_done);
}

/*
 * A put of @len bytes for phase @phase of @op that was in flight
 * completed: the peer has the data, or (@err) it failed. The transport has
 * let go of its grant. Must hold comm->lock.
 */
void kcoll_engine_put_done(struct kcoll_conn *conn, struct kcoll_task *op,
			   u32 phase, u32 len, int err)
{
	lockdep_assert_held(&conn->comm->lock);
	op->writes_inflight--;
	if (!err && (u16)phase == (u16)op->phase) {	/* g->phase: wire u16 */
		op->send_done += len;
		op->send_done_any = true;
	} else if (!err) {
		/* Sent ahead (kcoll_op_send_ahead()): the next phase's. */
		op->ahead_sent += len;
		op->ahead_sent_any = true;
	} else {
		kcoll_op_fail(op, err);
	}
	if (op->abort_deferred && !op->writes_inflight) {
		op->abort_deferred = false;
		kcoll_op_abort_peers(op, true);
	}
	kcoll_engine_reap(conn->comm);
}

/*
 * What kcoll_send_issue() sends: phase @phase's send @sd, @total bytes, of
 * which *@posted are posted and *@done written (*@posted_any, *@done_any:
 * one at least, an empty one for an empty send).
 */
struct kcoll_send_to {
	const struct kcoll_ssend *sd;
	u32 phase;
	u64 total;
	u64 *posted, *done;
	bool *posted_any, *done_any;
};

/* Answer the grants that have arrived on @conn for send @to. */
static void kcoll_send_issue(struct kcoll_task *op, struct kcoll_conn *conn,
			     const struct kcoll_send_to *to)
{
	const struct kcoll_ssend *sd = to->sd;
	struct kcoll_buf *src = &op->bufs[sd->src.buf];
	size_t base = sd->src.off * op->esize;
	struct kcoll_grant *g, *tmp;

	list_for_each_entry_safe(g, tmp, &conn->k[op->kind].in, node) {
		struct kcoll_wire_msg m;
		size_t off;
		int ret;

		if (op->kind == KCOLL_KIND_COLL ?
		    kcoll_coll_over(op->comm, g->seq) :
		    kcoll_seq_before(g->seq, op->seq)) {
			/* Left over from an aborted operation. */
			list_del(&g->node);
			kfree(g);
			continue;
		}
		/* Another collective's, running beside @op or not yet. */
		if (g->seq != op->seq && op->kind == KCOLL_KIND_COLL)
			continue;
		if (g->seq != op->seq || g->phase > (u16)to->phase)
			return;		/* the peer is ahead of us */
		/* Collectives: the receiver's signature stands for its
		 * SIG; point-to-point: granted before this send was
		 * issued. */
		if (g->sig_unchecked) {
			g->sig_unchecked = false;
			if (!kcoll_op_check_sig(op, conn, &g->sig))
				return;
		}
		if (g->phase != (u16)to->phase ||
		    (*to->posted >= to->total && *to->posted_any)) {
			kcoll_op_fail(op, -EBADMSG);	/* schedules disagree */
			return;
		}
		if (g->len > to->total - *to->posted ||
		    (!g->len && to->total)) {
			kcoll_op_fail(op, -EBADMSG);	/* sizes disagree */
			return;
		}
		if (sd->fwd && (op->recv_done < *to->posted + g->len ||
				(op->gpu && op->ph.recv.reduce &&
				 !op->gpu_reduced)))
			return;		/* not received (and reduced) yet */
		if (g->len && kcoll_op_held(op))
			return;		/* a higher priority runs */
		off = base + *to->posted;
		kcoll_msg_init(op, &m, KCOLL_MSG_DATA, conn->peer);
		m.serial = cpu_to_le32(g->serial);
		m.len = cpu_to_le32(g->len);
		ret = conn->xp->put(op, conn, g, src, off, &m);
		if (ret == -ENOENT) {
			/* The peer dropped the grant: it failed. */
			kcoll_op_fail_from(op, -ECONNRESET, conn->peer);
			return;
		}
		if (ret == -EPROTO) {
			/* Not a grant of the peer's: the connection ends
			 * (which frees the grants). */
			kcoll_op_fail(op, ret);
			kcoll_conn_kill(conn, ret);
			return;
		}
		if (kcoll_op_post_stopped(op, conn, min(ret, 0)))
			return;
		list_del(&g->node);
		*to->posted += g->len;
		*to->posted_any = true;
		if (to->phase != op->phase)
			kcoll_stat_add(KCOLL_STAT_SENDS_AHEAD, 1);
		if (ret == KCOLL_PUT_POSTED) {
			op->writes_inflight++;	/* kcoll_engine_put_done() */
			continue;
		}
		*to->done += g->len;
		*to->done_any = true;
		kfree(g);
	}
}

/* Answer the grants that have arrived for the current phase's send. */
void kcoll_op_send(struct kcoll_task *op)
{
	const struct kcoll_ssend *sd = &op->ph.send;
	struct kcoll_conn *conn = kcoll_conn_of(op->comm, sd->peer);
	struct kcoll_send_to to = {
		.sd = sd, .phase = op->phase, .total = op->send_total,
		.posted = &op->send_posted, .done = &op->send_done,
		.posted_any = &op->send_posted_any,
		.done_any = &op->send_done_any,
	};

	if (!conn)
		return;
	if (kcoll_op_eager_undecided(op, conn, op->send_total))
		return;		/* the peer's first CREDIT runs us again */
	if (kcoll_op_eager(op, conn, op->send_total)) {
		/* Point-to-point: granted meanwhile (its receiver waited),
		 * it goes through the grant below. */
		int granted = op->kind == KCOLL_KIND_P2P && !op->eager_sent ?
			      kcoll_p2p_grants(op, conn) : 0;

		if (granted < 0)
			return;
		if (!granted) {
			kcoll_op_send_eager(op, conn, op->bufs[sd->src.buf].vaddr +
						      sd->src.off * op->esize);
			/* No slot for it: the receiver may grant at once. */
			if (op->kind == KCOLL_KIND_P2P)
				kcoll_p2p_ask(op, conn);
			return;
		}
	}
	kcoll_send_issue(op, conn, &to);
}

/*
 * May @op send phase @nx's data (to @conn's peer) while its current phase
 * runs? The schedule's part is plain C (kcoll_sched_send_ahead(), which
 * the host model executes); here what the connection adds, as for grants
 * ahead (kcoll_op_may_grant_ahead()): through the NIC, to a new peer, not
 * eager, and not from memory without MRs.
 */
static bool kcoll_op_may_send_ahead(struct kcoll_task *op,
				    const struct kcoll_phase *nx,
				    struct kcoll_conn *conn)
{
	return conn && conn->xp->timed && !op->unreg &&
	       kcoll_sched_send_ahead(&op->args, &op->ph, nx) &&
	       !(op->ph.has_send && op->ph.send.peer == nx->send.peer) &&
	       !kcoll_op_eager(op, conn, nx->send.cnt * op->esize);
}

/*
 * Send the next phase's data while this phase runs, once this one's send
 * is posted whole: into the grants its receiver issued for that phase,
 * ahead (kcoll_op_grant_ahead()) or in it. The sender then no longer
 * waits for its own receive (a slow peer's data) before it feeds the next
 * peer, which absorbs one phase of skew between the ranks. Alltoall and
 * alltoallv only, as grants ahead (their phases are independent), and not
 * stream-ordered ones; only with sysfs phases_ahead 2, which is not the
 * default (no gain on the test bed: docs/PERFORMANCE.md, "Sends ahead").
 * Must hold comm->lock.
 */
void kcoll_op_send_ahead(struct kcoll_task *op)
{
	struct kcoll_send_to to;
	struct kcoll_conn *conn;

	lockdep_assert_held(&op->comm->lock);
	if (op->error || op->sahead == KCOLL_AHEAD_OFF ||
	    op->kind != KCOLL_KIND_COLL || op->gpu ||
	    op->phase + 1 >= op->nphases ||
	    (op->sahead == KCOLL_AHEAD_UNDECIDED && kcoll_phases_ahead() < 2) ||
	    (op->args.opcode != KCOLL_OP_ALLTOALL &&
	     op->args.opcode != KCOLL_OP_ALLTOALLV))
		return;
	if (op->ph.has_send && (op->send_posted < op->send_total ||
				!op->send_posted_any))
		return;		/* this phase's own first */
	if (op->sahead == KCOLL_AHEAD_UNDECIDED) {
		struct kcoll_phase nx;

		kcoll_sched_phase(&op->args, op->phase + 1, &nx);
		conn = nx.has_send ? kcoll_conn_of(op->comm, nx.send.peer) :
				     NULL;
		if (!kcoll_op_may_send_ahead(op, &nx, conn)) {
			op->sahead = KCOLL_AHEAD_OFF;
			return;
		}
		op->sahead = KCOLL_AHEAD_ON;
		op->ahead_sd = nx.send;
	}
	conn = kcoll_conn_of(op->comm, op->ahead_sd.peer);
	if (!conn)
		return;
	to = (struct kcoll_send_to){
		.sd = &op->ahead_sd, .phase = op->phase + 1,
		.total = op->ahead_sd.cnt * op->esize,
		.posted = &op->ahead_posted, .done = &op->ahead_sent,
		.posted_any = &op->ahead_posted_any,
		.done_any = &op->ahead_sent_any,
	};
	kcoll_send_issue(op, conn, &to);
}

/*
 * The connection is being torn down: withdraw what its grants still expose
 * to the peer before the staging and the ops' pages go (before the
 * transport's MRs are destroyed, too). The grants themselves are freed by
 * kcoll_engine_conn_lost(). Must hold comm->lock.
 */
void kcoll_engine_conn_unexpose(struct kcoll_conn *conn)
{
	struct kcoll_grant *g;
	int k;

	lockdep_assert_held(&conn->comm->lock);
	for (k = 0; k < KCOLL_KIND_NR; k++) {
		list_for_each_entry(g, &conn->k[k].out, node)
			conn->xp->unexpose(conn, g);
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
		if (g->len)
			op->grants_mem--;
		conn->xp->unexpose(conn, g);
		if (g->slot >= 0)
			__clear_bit(g->slot, &conn->slot_busy);
		kfree(g);
	}
}
