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
#include "kcoll_stats.h"
#include "kcoll_engine.h"

static void kcoll_sig_confirm(struct kcoll_task *op, struct kcoll_conn *conn)
{
	if (kcoll_sig_confirmed(op, conn))
		return;
	op->sigs_ok++;
	conn->sig_next = op->seq + 1;
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

/*
 * @conn's peer asked for our signature of collective conn->sig_reply_seq
 * (KCOLL_SIG_ASK): answer once we can. An operation that has not started
 * answers from kcoll_op_progress(); one that failed has sent its ABORT.
 * Must hold comm->lock.
 */
void kcoll_sig_reply(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_task *op = kcoll_coll_head(comm);
	u32 seq = conn->sig_reply_seq;
	int err;

	lockdep_assert_held(&comm->lock);
	if (!conn->sig_reply_due || conn->state != KCOLL_CONN_UP)
		return;
	if (op && op->seq == seq) {
		if (!op->started)
			return;
		if (op->error) {
			conn->sig_reply_due = false;
			return;
		}
		err = kcoll_op_send_sig(op, conn, op->finished ?
						  KCOLL_SIG_DONE : 0);
	} else if (kcoll_seq_before(seq, op ? op->seq : comm->coll_seq)) {
		struct kcoll_wire_msg m = {
			.type = KCOLL_MSG_SIG,
			.kind = KCOLL_KIND_COLL,
			.seq = cpu_to_le32(seq),
			.status = cpu_to_le32(KCOLL_SIG_DONE),
		};

		err = kcoll_conn_send_msg(conn, &m);
		if (!err)
			kcoll_stat_add(KCOLL_STAT_SIG_SENDS, 1);
	} else {
		return;		/* not submitted here yet */
	}
	if (!err)
		conn->sig_reply_due = false;
}

/* Check the SIGs and ABORTs @conn has queued for @op. */
void kcoll_op_check_sigs(struct kcoll_task *op, struct kcoll_conn *conn)
{
	struct kcoll_sig *s, *tmp;

	list_for_each_entry_safe(s, tmp, &conn->sigs, node) {
		if (kcoll_seq_before(s->seq, op->seq)) {
			list_del(&s->node);
			kfree(s);
			continue;
		}
		if (s->seq != op->seq)
			continue;
		list_del(&s->node);
		if (s->msg.type == KCOLL_MSG_ABORT)
			kcoll_op_fail_from(op, kcoll_abort_status(&s->msg),
					   kcoll_abort_culprit(conn, &s->msg));
		else if (!op->error)
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
