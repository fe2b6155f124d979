// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll collective engine, signatures: every rank's operation must equal
 * every peer's (opcode, dtype, op, count, root) before its data is used;
 * SIG messages, and lazy signatures that ride with the data.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "kcoll_types.h"
#include "kcoll_conn.h"
#include "kcoll_coll.h"
#include "kcoll_stats.h"
#include "kcoll_engine.h"

static void kcoll_sig_confirm(struct kcoll_task *op, struct kcoll_conn *conn)
{
	if (!op->sig_seen || kcoll_sig_confirmed(op, conn))
		return;
	op->sigs_ok++;
	__set_bit(conn->peer, op->sig_seen);
}

/*
 * Check @m, a signature from @conn's peer for @op (a SIG, a grant, or an
 * eager header's, see kcoll_eager_check()): confirm it (a collective's;
 * point-to-point has nothing to confirm), or fail @op, blaming the peer.
 * Returns whether it matched. Must hold comm->lock.
 */
bool kcoll_op_check_sig(struct kcoll_task *op, struct kcoll_conn *conn,
			const struct kcoll_wire_msg *m)
{
	if (m->type == KCOLL_MSG_SIG &&
	    (le32_to_cpu(m->status) & KCOLL_SIG_DONE)) {
		/* It completed this collective: its signature matched. */
		kcoll_sig_confirm(op, conn);
		return true;
	}
	if (kcoll_sig_match(op, m, conn->peer)) {
		if (op->kind == KCOLL_KIND_COLL)
			kcoll_sig_confirm(op, conn);
		return true;
	}
	if (op->kind == KCOLL_KIND_P2P)
		pr_warn_ratelimited("comm %llx rank %u: %s %u with rank %u does not match the peer's (%s/%u count %llu)\n",
				    op->comm->uid, op->comm->rank,
				    kcoll_op_name(op->args.opcode), op->seq,
				    conn->peer, kcoll_op_name(m->opcode),
				    m->dtype, le64_to_cpu(m->count));
	else
		pr_warn_ratelimited("comm %llx rank %u: operation %u does not match rank %u's (%s/%u/%u count %llu root %u)\n",
				    op->comm->uid, op->comm->rank, op->seq,
				    conn->peer, kcoll_op_name(m->opcode),
				    m->dtype, m->redop, le64_to_cpu(m->count),
				    le32_to_cpu(m->root));
	kcoll_op_fail_from(op, -EBADMSG, conn->peer);
	return false;
}

/* Send @op's SIG to @conn's peer, with @status (KCOLL_SIG_*). */
int kcoll_op_send_sig(struct kcoll_task *op, struct kcoll_conn *conn,
		      u32 status)
{
	struct kcoll_wire_msg m;
	int err;

	kcoll_msg_init(op, &m, KCOLL_MSG_SIG, conn->peer);
	m.status = cpu_to_le32(status);
	err = kcoll_conn_send_msg(conn, &m);
	if (!err)
		kcoll_stat_add(KCOLL_STAT_SIG_SENDS, 1);
	return err;
}

/* Forget ask @i of conn->asks. */
static void kcoll_sig_ask_drop(struct kcoll_conn *conn, u32 i)
{
	memmove(conn->asks + i, conn->asks + i + 1,
		(conn->nasks - i - 1) * sizeof(conn->asks[0]));
	conn->nasks--;
}

/*
 * @conn's peer asked for our SIG of collective @seq (KCOLL_SIG_ASK). A peer
 * asks once per collective that stalls, and has at most KCOLL_ASKS_MAX
 * unfinished at once (running, or returned before their confirmations):
 * more asks than that, which only a peer breaking the protocol sends,
 * forget the oldest (the answer only speeds up a report or a mismatch).
 * Must hold comm->lock.
 */
void kcoll_sig_ask_add(struct kcoll_conn *conn, u32 seq)
{
	if (kcoll_sig_asked(conn, seq))
		return;
	if (conn->nasks == KCOLL_ASKS_MAX)
		kcoll_sig_ask_drop(conn, 0);
	conn->asks[conn->nasks++] = seq;
}

bool kcoll_sig_asked(const struct kcoll_conn *conn, u32 seq)
{
	u32 i;

	for (i = 0; i < conn->nasks; i++)
		if (conn->asks[i] == seq)
			return true;
	return false;
}

void kcoll_sig_ask_del(struct kcoll_conn *conn, u32 seq)
{
	u32 i;

	for (i = 0; i < conn->nasks; i++) {
		if (conn->asks[i] == seq) {
			kcoll_sig_ask_drop(conn, i);
			return;
		}
	}
}

/*
 * Answer the ask for collective @seq if we can: true once it needs no
 * more (answered, or the op failed and sent its ABORT). An operation that
 * has not started answers from kcoll_op_progress().
 */
static bool kcoll_sig_reply_one(struct kcoll_conn *conn, u32 seq)
{
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_task *op;
	int err;

	list_for_each_entry(op, &comm->colls, node) {
		if (op->seq != seq)
			continue;
		if (!op->started)
			return false;
		if (op->error)
			return true;
		return !kcoll_op_send_sig(op, conn, op->finished ?
						    KCOLL_SIG_DONE : 0);
	}
	if (kcoll_coll_over(comm, seq)) {
		struct kcoll_wire_msg m = {
			.type = KCOLL_MSG_SIG,
			.kind = KCOLL_KIND_COLL,
			.seq = cpu_to_le32(seq),
			.status = cpu_to_le32(KCOLL_SIG_DONE),
		};

		err = kcoll_conn_send_msg(conn, &m);
		if (!err)
			kcoll_stat_add(KCOLL_STAT_SIG_SENDS, 1);
		return !err;
	}
	return false;		/* not submitted here yet */
}

/*
 * Answer what @conn's peer asked for (conn->asks) as far as we can now; a
 * full send queue, or an operation not started or not submitted yet,
 * leaves the rest for the next event. Must hold comm->lock.
 */
void kcoll_sig_reply(struct kcoll_conn *conn)
{
	u32 i = 0;

	lockdep_assert_held(&conn->comm->lock);
	if (conn->state != KCOLL_CONN_UP)
		return;
	while (i < conn->nasks) {
		if (kcoll_sig_reply_one(conn, conn->asks[i]))
			kcoll_sig_ask_drop(conn, i);
		else
			i++;
	}
}

/* Check the SIGs and ABORTs @conn has queued for @op. */
void kcoll_op_check_sigs(struct kcoll_task *op, struct kcoll_conn *conn)
{
	struct kcoll_sig *s, *tmp;

	list_for_each_entry_safe(s, tmp, &conn->sigs, node) {
		/* Not those of older ones still running beside @op. */
		if (kcoll_coll_over(op->comm, s->seq)) {
			list_del(&s->node);
			kfree(s);
			continue;
		}
		if (s->seq != op->seq)
			continue;
		list_del(&s->node);
		if (s->msg.type == KCOLL_MSG_ABORT) {
			kcoll_op_fail_from(op, kcoll_abort_status(&s->msg),
					   kcoll_abort_culprit(conn, &s->msg));
			/* As for one that comes while @op runs: the peer
			 * fills none of them (a full send queue may have
			 * let @op's phases grant before this check). */
			kcoll_op_forget_grants(op, conn);
		} else if (!op->error)
			kcoll_op_check_sig(op, conn, &s->msg);
		kfree(s);
	}
}

/*
 * @op (lazy) ran for KCOLL_SIG_LAZY_MS: ask the lazy peers that have not
 * confirmed their signature for it. The answers feed the missing-rank
 * report, and a peer whose operation differs and waits for SIGs gets ours
 * (it fails with the mismatch, and its ABORT ends ours). Best effort: a
 * full send queue skips a peer. Must hold comm->lock.
 */
void kcoll_op_lazy_ask(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	u32 i;

	lockdep_assert_held(&comm->lock);
	op->lazy_sent = true;
	for (i = 0; i < comm->nranks; i++) {
		struct kcoll_conn *conn = comm->conns[i];

		if (conn && kcoll_conn_lazy(conn) &&
		    !kcoll_sig_confirmed(op, conn))
			kcoll_op_send_sig(op, conn, KCOLL_SIG_ASK);
	}
}

/*
 * Does @op wait for the signature of a peer that said BYE after completing
 * this collective (kcoll_peer_finished()), where kcoll_op_sigs_in() needs
 * it? Its connection is gone, so nothing of it comes any more: a rank that
 * completed the collective had sent its SIG first, on the same QP, so the
 * BYE's watermark was a lie (or the SIG was queued for an operation not
 * yet started here, and went with the connection). The operation would
 * wait for its own timeout, or for ever without one; its caller fails it
 * now, naming *@peer. Must hold comm->lock.
 */
bool kcoll_op_sig_stranded(struct kcoll_task *op, u32 *peer)
{
	struct kcoll_comm *comm = op->comm;
	u32 i;

	lockdep_assert_held(&comm->lock);
	for (i = 0; i < comm->nranks; i++) {
		struct kcoll_conn *conn = comm->conns[i];

		if (!conn || kcoll_sig_confirmed(op, conn) ||
		    !kcoll_peer_finished(conn, op) ||
		    (op->lazy && kcoll_conn_lazy(conn)))
			continue;
		*peer = i;
		return true;
	}
	return false;
}

/*
 * Are the signatures @op must have in: ours out to every peer, and every
 * peer's confirmed but, for a lazy op, those of lazy peers? (Their view of
 * us can lag ours of them by a CREDIT in flight: evaluated afresh each
 * time.) Must hold comm->lock.
 */
bool kcoll_op_sigs_in(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	u32 i;

	if (op->sigs_sent < comm->nranks)
		return false;
	if (op->sigs_ok >= comm->nranks - 1)
		return true;
	if (!op->lazy)
		return false;
	for (i = 0; i < comm->nranks; i++) {
		struct kcoll_conn *conn = comm->conns[i];

		if (conn && !kcoll_conn_lazy(conn) &&
		    !kcoll_sig_confirmed(op, conn))
			return false;
	}
	return true;
}
