// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll collective engine, receive dispatch: every control message from a
 * peer, checked against what this rank expects before anything is done.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "kcoll_types.h"
#include "kcoll_coll.h"
#include "kcoll_conn.h"
#include "kcoll_comm.h"
#include "kcoll_xport.h"
#include "kcoll_engine.h"

static struct kcoll_task *kcoll_p2p_find(struct list_head *list, u32 seq)
{
	struct kcoll_task *op;

	list_for_each_entry(op, list, node)
		if (op->seq == seq)
			return op;
	return NULL;
}

/* @head holds more than @max entries (walks at most @max + 1). */
static bool kcoll_list_longer(const struct list_head *head, unsigned int max)
{
	const struct list_head *pos;
	unsigned int n = 0;

	list_for_each(pos, head)
		if (++n > max)
			return true;
	return false;
}

/* What kcoll_wire_msg_check() needs to know of @conn. */
static unsigned int kcoll_rx_wconn(const struct kcoll_conn *conn)
{
	return conn->xp->wconn |
	       (conn->eager ? KCOLL_WCONN_EAGER : 0) |
	       (conn->eager_offer ? KCOLL_WCONN_EAGER_OFFERED : 0) |
	       (kcoll_conn_lazy(conn) ? KCOLL_WCONN_LAZY : 0);
}

/*
 * The peer is leaving: close the connection now. Its disconnect may never
 * come (rdma_cm sends the DREQ of an id destroyed while connected once),
 * and our writes to a QP that is gone would wait for RC retries, which rxe
 * was seen never to end. What it sent before the BYE has been processed
 * (one QP, in order); collectives it completed complete here too
 * (kcoll_peer_finished()), unless it says the communicator was revoked.
 */
static int kcoll_rx_bye(struct kcoll_conn *conn, const struct kcoll_wire_msg *m)
{
	bool revoke = le32_to_cpu(m->status) & KCOLL_BYE_REVOKE;
	u32 by = le32_to_cpu(m->root);

	/* Nobody passes on a revoke of ours that we did not make. */
	if (revoke && (!by || by > conn->comm->nranks ||
		       (by - 1 == conn->comm->rank && !conn->comm->revoked)))
		return -EPROTO;
	conn->bye = true;
	conn->bye_done = le32_to_cpu(m->seq);
	/*
	 * Revoked (by the rank @root names, maybe the sender): ours too,
	 * before the connection's loss fails anything otherwise; also if
	 * it overtook our ESTABLISHED (kcoll_conn_up() then ends it).
	 */
	if (revoke)
		kcoll_comm_peer_revoked(conn->comm, by - 1);
	kcoll_conn_kill(conn, -ECONNRESET);
	return 0;
}

static int kcoll_rx_nop(struct kcoll_conn *conn, const struct kcoll_wire_msg *m)
{
	return 0;
}

/*
 * The connecting rank pings once our REP said we answer
 * (KCOLL_ACCEPT_PING); a rank that pings answers too, so the accepting
 * side then times its own. The first PING may overtake our ESTABLISHED:
 * answered once we are up.
 */
static int kcoll_rx_ping(struct kcoll_conn *conn, const struct kcoll_wire_msg *m)
{
	if (conn->state == KCOLL_CONN_UP)
		kcoll_conn_pong(conn, le64_to_cpu(m->count));
	else
		conn->pong_due = le64_to_cpu(m->count);
	if (!conn->active && !conn->peer_pongs) {
		conn->peer_pongs = true;
		if (conn->state == KCOLL_CONN_UP && conn->xp->timed)
			kcoll_conn_ping(conn);
	}
	return 0;
}

static int kcoll_rx_pong(struct kcoll_conn *conn, const struct kcoll_wire_msg *m)
{
	u64 rtt;

	/*
	 * Only as the answer to our PING still unanswered (one at a time),
	 * echoing its clock, and timed by our own: a peer's PONGs beyond
	 * them, or one sent ahead for the PING that answering this one
	 * sends (until 2026-12-05 it passed, and timed a microsecond),
	 * would otherwise feed the device's alpha, which other
	 * communicators' cost models use.
	 */
	if (conn->pongs >= conn->pings ||
	    le64_to_cpu(m->count) != conn->ping_at)
		return -EPROTO;
	conn->pongs++;
	rtt = ktime_get_ns() - conn->ping_at;
	if (!conn->ping_min_ns || rtt < conn->ping_min_ns)
		conn->ping_min_ns = rtt;
	kcoll_conn_ping(conn);
	return 0;
}

/*
 * Intra-node: the data of grant @serial has been copied in. The message
 * carries the whole serial; it stands for the WRITE's immediate, reduced
 * the same way (from the 2^30th grant on, an eager connection's bit 30
 * would otherwise read as an eager write and end the connection).
 */
static int kcoll_rx_data(struct kcoll_conn *conn, const struct kcoll_wire_msg *m)
{
	kcoll_engine_data(conn, kcoll_grant_imm(m->kind, le32_to_cpu(m->serial),
						conn->eager),
			  le32_to_cpu(m->len));
	return 0;
}

/* The first offer of one of the peer's slots, once per slot; CREDITS
 * offers them again. */
static int kcoll_rx_credit(struct kcoll_conn *conn,
			   const struct kcoll_wire_msg *m)
{
	/* Below KCOLL_EAGER_SLOTS (kcoll_wire_msg_check()), on every path. */
	u32 slot = array_index_nospec(le32_to_cpu(m->serial),
				      KCOLL_EAGER_SLOTS);
	u32 status = le32_to_cpu(m->status);

	if (test_bit(slot, &conn->etx_known))
		return -EPROTO;
	/*
	 * Lazy signatures, eager point-to-point (kcoll_conn_p2p()): decided
	 * by the peer's first CREDIT, its slots then take our signed
	 * headers. Every later one must say the same: a change would turn
	 * operations already decided (a receive granted) the other way.
	 */
	if (!conn->etx_known) {
		conn->peer_lazy = status & KCOLL_CREDIT_LAZY;
		conn->peer_p2p = status & KCOLL_CREDIT_P2P;
		conn->peer_p2p_ask = status & KCOLL_CREDIT_P2P_ASK;
		conn->peer_cover = status & KCOLL_CREDIT_COVER;
	} else if (!(status & KCOLL_CREDIT_LAZY) != !conn->peer_lazy ||
		   !(status & KCOLL_CREDIT_P2P) != !conn->peer_p2p ||
		   !(status & KCOLL_CREDIT_P2P_ASK) != !conn->peer_p2p_ask ||
		   !(status & KCOLL_CREDIT_COVER) != !conn->peer_cover) {
		return -EPROTO;
	}
	conn->etx_addr[slot] = le64_to_cpu(m->addr);
	conn->etx_rkey[slot] = le32_to_cpu(m->rkey);
	__set_bit(slot, &conn->etx_free);
	__set_bit(slot, &conn->etx_known);
	return 0;
}

static int kcoll_rx_credits(struct kcoll_conn *conn,
			    const struct kcoll_wire_msg *m)
{
	u64 slots = le64_to_cpu(m->count);

	/* Slots offered before, each in use by us until now. */
	if ((slots & ~(u64)conn->etx_known) || (slots & (u64)conn->etx_free))
		return -EPROTO;
	conn->etx_free |= slots;
	conn->etx_p2p &= ~(unsigned long)slots;
	conn->etx_young &= ~(unsigned long)slots;
	/* The transport may name them anew (through the NIC: new keys). */
	conn->xp->eager_reoffered(conn, slots, m);
	return 0;
}

static int kcoll_rx_grant(struct kcoll_conn *conn,
			  const struct kcoll_wire_msg *m)
{
	struct kcoll_comm *comm = conn->comm;
	u32 seq = le32_to_cpu(m->seq);
	struct kcoll_task *op = NULL;
	struct kcoll_grant *g;

	if (le32_to_cpu(m->serial) != conn->k[m->kind].serial_in)
		return -EPROTO;
	conn->k[m->kind].serial_in++;
	if (m->kind == KCOLL_KIND_P2P) {
		op = kcoll_p2p_find(&conn->k[m->kind].p2p_sends, seq);
		if (op && !kcoll_op_check_sig(op, conn, m)) {
			/* Not started, it sent no ABORT: the receive
			 * would wait for its timeout. */
			if (!op->started)
				kcoll_op_abort_peers(op, false);
		}
		/*
		 * For a send that is over (an eager one's receiver waited and
		 * granted it too), or that went eagerly: nothing will use it.
		 * A send not issued yet finds it (kcoll_op_send()).
		 */
		if (op ? op->eager_sent :
			 kcoll_seq_before(seq,
					  conn->k[m->kind].p2p_send_seq))
			return 0;
	}
	if (kcoll_list_longer(&conn->k[m->kind].in,
			      KCOLL_GRANTS_QUEUED_MAX(conn))) {
		pr_warn_ratelimited("comm %llx rank %u: rank %u sent more than %u grants we could not use yet\n",
				    comm->uid, comm->rank, conn->peer,
				    KCOLL_GRANTS_QUEUED_MAX(conn));
		return -EPROTO;
	}
	g = kzalloc(sizeof(*g), GFP_KERNEL);
	if (!g) {
		kcoll_conn_kill(conn, -ENOMEM);
		return 0;
	}
	g->seq = seq;
	g->serial = le32_to_cpu(m->serial);
	g->addr = le64_to_cpu(m->addr);
	g->rkey = le32_to_cpu(m->rkey);
	g->len = le32_to_cpu(m->len);
	g->phase = le16_to_cpu(m->phase);
	g->slot = -1;
	if (m->kind == KCOLL_KIND_COLL || !op) {
		/* Checked when kcoll_op_send() first uses it: P2P, our send
		 * is not issued yet; collectives, the receiver's signature
		 * stands for its SIG. */
		g->sig = *m;
		g->sig_unchecked = true;
	}
	list_add_tail(&g->node, &conn->k[m->kind].in);
	op = m->kind == KCOLL_KIND_COLL ? kcoll_coll_running(comm, seq) : NULL;
	if (op && !op->error) {
		g->sig_unchecked = false;
		kcoll_op_check_sig(op, conn, m);
	}
	return 0;
}

/* A point-to-point ABORT: our send or receive with that peer and seq. */
static void kcoll_rx_p2p_abort(struct kcoll_conn *conn,
			       const struct kcoll_wire_msg *m)
{
	u32 seq = le32_to_cpu(m->seq);
	struct kcoll_task *op;

	op = kcoll_p2p_find(&conn->k[m->kind].p2p_sends, seq);
	if (op && m->opcode == KCOLL_OP_RECV) {
		kcoll_op_fail_from(op, kcoll_abort_status(m),
				   kcoll_abort_culprit(conn, m));
		kcoll_op_forget_grants(op, conn);
	}
	op = kcoll_p2p_find(&conn->k[m->kind].p2p_recvs, seq);
	if (op && m->opcode == KCOLL_OP_SEND) {
		kcoll_op_fail_from(op, kcoll_abort_status(m),
				   kcoll_abort_culprit(conn, m));
		kcoll_op_forget_grants(op, conn);
	}
}

/* A collective's SIG or ABORT: for the running op, or kept for a later
 * one. */
static int kcoll_rx_sig(struct kcoll_conn *conn, const struct kcoll_wire_msg *m)
{
	struct kcoll_comm *comm = conn->comm;
	u32 seq = le32_to_cpu(m->seq);
	struct kcoll_task *op;
	struct kcoll_sig *s;

	if (m->type == KCOLL_MSG_ABORT) {
		kcoll_abort_lost(conn, m);
		/* It named its own sender lost: that connection is gone. */
		if (conn->state == KCOLL_CONN_DEAD)
			return 0;
	}
	if (m->kind == KCOLL_KIND_P2P) {
		/* a SIG only as a send's ask (kcoll_wire_msg_check()) */
		if (m->type == KCOLL_MSG_SIG)
			kcoll_p2p_asked(conn, seq);
		else
			kcoll_rx_p2p_abort(conn, m);
		return 0;
	}
	if (m->type == KCOLL_MSG_SIG &&
	    (le32_to_cpu(m->status) & KCOLL_SIG_ASK)) {
		kcoll_sig_ask_add(conn, seq);
		kcoll_sig_reply(conn);
	}
	if (kcoll_coll_over(comm, seq))
		return 0;			/* stale */
	/* For the head, or one running beside it. */
	op = kcoll_coll_running(comm, seq);
	if (m->type == KCOLL_MSG_ABORT && op) {
		kcoll_op_fail_from(op, kcoll_abort_status(m),
				   kcoll_abort_culprit(conn, m));
		kcoll_op_forget_grants(op, conn);
		return 0;
	}
	if (kcoll_list_longer(&conn->sigs, KCOLL_SIGS_QUEUED_MAX)) {
		pr_warn_ratelimited("comm %llx rank %u: rank %u sent more than %u signatures ahead of us\n",
				    comm->uid, comm->rank, conn->peer,
				    KCOLL_SIGS_QUEUED_MAX);
		return -EPROTO;
	}
	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s) {
		kcoll_conn_kill(conn, -ENOMEM);
		return 0;
	}
	s->seq = seq;
	s->msg = *m;
	list_add_tail(&s->node, &conn->sigs);
	if (op)
		kcoll_op_check_sigs(op, conn);
	return 0;
}

/*
 * One handler per message type that reaches the dispatch, each called
 * once kcoll_wire_msg_check() has passed the message (kind, where it may
 * come, its own fields); it checks what depends on the engine's state and
 * returns -EPROTO for a protocol error.
 */
static int (*const kcoll_rx_handlers[])(struct kcoll_conn *conn,
					const struct kcoll_wire_msg *m) = {
	[KCOLL_MSG_SIG] = kcoll_rx_sig,
	[KCOLL_MSG_GRANT] = kcoll_rx_grant,
	[KCOLL_MSG_ABORT] = kcoll_rx_sig,
	[KCOLL_MSG_NOP] = kcoll_rx_nop,
	[KCOLL_MSG_BYE] = kcoll_rx_bye,
	[KCOLL_MSG_DATA] = kcoll_rx_data,
	[KCOLL_MSG_PING] = kcoll_rx_ping,
	[KCOLL_MSG_PONG] = kcoll_rx_pong,
	[KCOLL_MSG_CREDIT] = kcoll_rx_credit,
	[KCOLL_MSG_CREDITS] = kcoll_rx_credits,
};

void kcoll_engine_msg(struct kcoll_conn *conn, const struct kcoll_wire_msg *m)
{
	struct kcoll_comm *comm = conn->comm;
	int verdict;

	lockdep_assert_held(&comm->lock);
	/* Killed (by an earlier message of the same batch: a BYE, an
	 * ABORT naming the sender): what it still delivers counts for
	 * nothing, and would wait on its lists for ever. */
	if (conn->state == KCOLL_CONN_DEAD)
		return;
	verdict = kcoll_wire_msg_check(m, kcoll_rx_wconn(conn));
	if (!verdict && (m->type >= ARRAY_SIZE(kcoll_rx_handlers) ||
			 !kcoll_rx_handlers[m->type]))
		verdict = KCOLL_WIRE_BAD_TYPE;
	if (!verdict) {
		u8 type = array_index_nospec(m->type,
					     ARRAY_SIZE(kcoll_rx_handlers));
		/* The handlers index per-kind state by it: clamped under
		 * speculation too, as the type is. */
		struct kcoll_wire_msg mk = *m;

		mk.kind = array_index_nospec(mk.kind, KCOLL_KIND_NR);
		if (!kcoll_rx_handlers[type](conn, &mk))
			return;
		verdict = KCOLL_WIRE_BAD_STATE;
	}
	pr_warn_ratelimited("comm %llx rank %u: protocol error from rank %u (type %u kind %u, %d)\n",
			    comm->uid, comm->rank, conn->peer, m->type, m->kind,
			    verdict);
	kcoll_conn_kill(conn, -EPROTO);
}
