// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll collective engine, receive dispatch: every control message from a
 * peer, checked against what this rank expects before anything is done.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "kcoll_comm.h"
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

void kcoll_engine_msg(struct kcoll_conn *conn, const struct kcoll_wire_msg *m)
{
	struct kcoll_comm *comm = conn->comm;
	u32 seq = le32_to_cpu(m->seq);
	struct kcoll_grant *g;
	struct kcoll_sig *s;
	struct kcoll_task *op;

	lockdep_assert_held(&comm->lock);
	if (m->kind >= KCOLL_KIND_NR)
		goto bad;
	if (m->type == KCOLL_MSG_ABORT)
		kcoll_abort_lost(comm, m);
	switch (m->type) {
	case KCOLL_MSG_NOP:
		return;
	case KCOLL_MSG_BYE:
		/*
		 * The peer is leaving: close the connection now. Its
		 * disconnect may never come (rdma_cm sends the DREQ of an
		 * id destroyed while connected once), and our writes to a QP
		 * that is gone would wait for RC retries, which rxe was seen
		 * never to end. What it sent before the BYE has been
		 * processed (one QP, in order); collectives it completed
		 * complete here too (kcoll_peer_finished()).
		 */
		conn->bye = true;
		conn->bye_done = seq;
		kcoll_conn_kill(conn, -ECONNRESET);
		return;
	case KCOLL_MSG_PING:
		/*
		 * The connecting rank pings once our REP said we answer
		 * (KCOLL_ACCEPT_PING); a rank that pings answers too, so the
		 * accepting side then times its own. The first PING may
		 * overtake our ESTABLISHED: answered once we are up.
		 */
		if (conn->state == KCOLL_CONN_UP)
			kcoll_conn_pong(conn, le64_to_cpu(m->count));
		else
			conn->pong_due = le64_to_cpu(m->count);
		if (!conn->active && !conn->peer_pongs) {
			conn->peer_pongs = true;
			if (conn->state == KCOLL_CONN_UP && !conn->local)
				kcoll_conn_ping(conn);
		}
		return;
	case KCOLL_MSG_PONG:
		if (!conn->pings)
			goto bad;
		{
			u64 rtt = ktime_get_ns() - le64_to_cpu(m->count);

			if (!conn->ping_min_ns || rtt < conn->ping_min_ns)
				conn->ping_min_ns = rtt;
		}
		kcoll_conn_ping(conn);
		return;
	case KCOLL_MSG_DATA:
		if (!conn->local)
			goto bad;
		kcoll_engine_data(conn, kcoll_imm_make(m->kind,
						       le32_to_cpu(m->serial)),
				  le32_to_cpu(m->len));
		return;
	case KCOLL_MSG_CREDIT: {
		u32 slot = le32_to_cpu(m->serial);

		/*
		 * The first offer of one of the peer's slots, once per slot;
		 * CREDITS offers them again. These may overtake our
		 * ESTABLISHED, before the REP has told the connecting side
		 * that the peer agreed.
		 */
		if (!(conn->eager || conn->eager_offer) ||
		    m->kind != KCOLL_KIND_COLL ||
		    slot >= KCOLL_EAGER_SLOTS ||
		    le32_to_cpu(m->len) < sizeof(struct kcoll_wire_eager) +
					  KCOLL_EAGER_MAX ||
		    test_bit(slot, &conn->etx_known))
			goto bad;
		/* Lazy signatures: every CREDIT of the peer says the same;
		 * its slots then take our signed headers. */
		if (le32_to_cpu(m->status) & KCOLL_CREDIT_LAZY) {
			if (le32_to_cpu(m->len) <
			    sizeof(struct kcoll_wire_eager) +
			    sizeof(struct kcoll_wire_eager_sig) +
			    KCOLL_EAGER_MAX)
				goto bad;
			conn->peer_lazy = true;
		}
		conn->etx_addr[slot] = le64_to_cpu(m->addr);
		conn->etx_rkey[slot] = le32_to_cpu(m->rkey);
		__set_bit(slot, &conn->etx_free);
		__set_bit(slot, &conn->etx_known);
		return;
	}
	case KCOLL_MSG_CREDITS: {
		u64 slots = le64_to_cpu(m->count);

		/* Slots offered before, each in use by us until now. */
		if (!conn->eager || m->kind != KCOLL_KIND_COLL || !slots ||
		    (slots & ~(u64)conn->etx_known) ||
		    (slots & (u64)conn->etx_free))
			goto bad;
		conn->etx_free |= slots;
		/* Through the NIC each offer is a new registration of the
		 * slot's MR: byte @slot of addr is its new key byte. */
		if (!conn->local) {
			unsigned long bits = slots;
			u64 keys = le64_to_cpu(m->addr);
			unsigned int slot;

			BUILD_BUG_ON(KCOLL_EAGER_SLOTS * 8 > 64);
			for_each_set_bit(slot, &bits, KCOLL_EAGER_SLOTS)
				conn->etx_rkey[slot] =
					(conn->etx_rkey[slot] & ~0xffU) |
					((keys >> (8 * slot)) & 0xff);
		}
		return;
	}
	case KCOLL_MSG_GRANT:
		if (le32_to_cpu(m->serial) != conn->k[m->kind].serial_in)
			goto bad;
		conn->k[m->kind].serial_in++;
		if (m->kind == KCOLL_KIND_P2P) {
			op = kcoll_p2p_find(&conn->k[m->kind].p2p_sends, seq);
			if (op && !kcoll_sig_match(op, m)) {
				pr_warn_ratelimited("comm %llx rank %u: send %u to rank %u does not match its receive\n",
						    comm->uid, comm->rank, seq,
						    conn->peer);
				kcoll_op_fail(op, -EBADMSG);
			}
		}
		if (kcoll_list_longer(&conn->k[m->kind].in,
				      KCOLL_GRANTS_QUEUED_MAX(conn))) {
			pr_warn_ratelimited("comm %llx rank %u: rank %u sent more than %u grants we could not use yet\n",
					    comm->uid, comm->rank, conn->peer,
					    KCOLL_GRANTS_QUEUED_MAX(conn));
			goto bad;
		}
		g = kzalloc(sizeof(*g), GFP_KERNEL);
		if (!g) {
			kcoll_conn_kill(conn, -ENOMEM);
			return;
		}
		g->seq = seq;
		g->serial = le32_to_cpu(m->serial);
		g->addr = le64_to_cpu(m->addr);
		g->rkey = le32_to_cpu(m->rkey);
		g->len = le32_to_cpu(m->len);
		g->phase = le16_to_cpu(m->phase);
		g->slot = -1;
		if (m->kind == KCOLL_KIND_COLL || !op) {
			/* Checked when kcoll_op_send() first uses it: P2P,
			 * our send is not issued yet; collectives, the
			 * receiver's signature stands for its SIG. */
			g->sig = *m;
			g->sig_unchecked = true;
		}
		list_add_tail(&g->node, &conn->k[m->kind].in);
		op = kcoll_coll_head(comm);
		if (m->kind == KCOLL_KIND_COLL && op && op->started &&
		    !op->error && seq == op->seq) {
			g->sig_unchecked = false;
			kcoll_op_check_sig(op, conn, m);
		}
		return;
	case KCOLL_MSG_SIG:
	case KCOLL_MSG_ABORT:
		if (m->kind == KCOLL_KIND_P2P) {
			if (m->type != KCOLL_MSG_ABORT)
				goto bad;
			/* Our send or receive with that peer and seq. */
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
			return;
		}
		if (m->type == KCOLL_MSG_SIG && m->status) {
			u32 st = le32_to_cpu(m->status);

			/* Only between ranks that both offered lazy
			 * signatures (older peers send none). */
			if (!kcoll_conn_lazy(conn) ||
			    (st & ~(KCOLL_SIG_ASK | KCOLL_SIG_DONE)))
				goto bad;
			if (st & KCOLL_SIG_ASK) {
				conn->sig_reply_due = true;
				conn->sig_reply_seq = seq;
				kcoll_sig_reply(conn);
			}
		}
		op = kcoll_coll_head(comm);
		if (op && op->started && kcoll_seq_before(seq, op->seq))
			return;			/* stale */
		if (m->type == KCOLL_MSG_ABORT && op && op->started &&
		    seq == op->seq) {
			kcoll_op_fail_from(op, kcoll_abort_status(m),
					   kcoll_abort_culprit(conn, m));
			kcoll_op_forget_grants(op, conn);
			return;
		}
		if (kcoll_list_longer(&conn->sigs, KCOLL_SIGS_QUEUED_MAX)) {
			pr_warn_ratelimited("comm %llx rank %u: rank %u sent more than %u signatures ahead of us\n",
					    comm->uid, comm->rank, conn->peer,
					    KCOLL_SIGS_QUEUED_MAX);
			goto bad;
		}
		s = kzalloc(sizeof(*s), GFP_KERNEL);
		if (!s) {
			kcoll_conn_kill(conn, -ENOMEM);
			return;
		}
		s->seq = seq;
		s->msg = *m;
		list_add_tail(&s->node, &conn->sigs);
		if (op && op->started && seq == op->seq)
			kcoll_op_check_sigs(op, conn);
		return;
	}
bad:
	pr_warn_ratelimited("comm %llx rank %u: protocol error from rank %u (type %u kind %u)\n",
			    comm->uid, comm->rank, conn->peer, m->type, m->kind);
	kcoll_conn_kill(conn, -EPROTO);
}
