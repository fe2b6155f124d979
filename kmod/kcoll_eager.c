// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll collective engine, eager transfers: small collective steps (and,
 * where both ends agree, small point-to-point messages) written without a
 * grant into slots the receiver offered with CREDIT and CREDITS messages
 * (docs/DESIGN.md, "Eager transfers", "Eager point-to-point").
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "kcoll_types.h"
#include "kcoll_coll.h"
#include "kcoll_conn.h"
#include "kcoll_xport.h"
#include "kcoll_sysfs.h"
#include "kcoll_stats.h"
#include "kcoll_engine.h"

bool kcoll_op_eager(const struct kcoll_task *op,
		    const struct kcoll_conn *conn, u64 bytes)
{
	if (!conn->eager || bytes > KCOLL_EAGER_MAX)
		return false;
	return op->kind == KCOLL_KIND_COLL || kcoll_conn_p2p(conn);
}

/*
 * Whether a point-to-point transfer of @bytes on @conn cannot be decided
 * yet: eager point-to-point is agreed by the peer's first CREDIT, which
 * both ends must have seen before either decides, or a sender and its
 * receiver could decide differently.
 */
bool kcoll_op_eager_undecided(const struct kcoll_task *op,
			      const struct kcoll_conn *conn, u64 bytes)
{
	return op->kind == KCOLL_KIND_P2P && conn->eager && conn->p2p_offer &&
	       !conn->etx_known && bytes <= KCOLL_EAGER_MAX;
}

/* Our receive slot @slot (the bounces of our sends follow the slots). */
static u8 *kcoll_eager_slot(struct kcoll_conn *conn, u32 slot)
{
	return conn->ebuf.vaddr + (size_t)slot * KCOLL_EAGER_SLOT_BYTES;
}

/*
 * Offer the peer the slots of conn->erx_due: each one's first time with a
 * CREDIT naming its address; after that, once half of the slots are due,
 * all of them with one CREDITS (a message less per small transfer, which
 * is most of a small collective's cost). Holding back up to half never
 * deadlocks: of a sender's transfers that fill our slots, at most half are
 * ones we consume only later (point-to-point, a collective behind our
 * head, a later phase's: kcoll_eager_post()); the rest we consume, in
 * order, before we need the one waiting, and once they are consumed half
 * of the slots are due and go back with a CREDITS. A
 * full send queue (or a channel message without memory) leaves them due:
 * kcoll_engine_reap() retries after every completion. Must hold
 * comm->lock.
 */
void kcoll_engine_eager_credit(struct kcoll_conn *conn)
{
	unsigned long again = conn->erx_due & conn->erx_offered;
	unsigned long fresh = conn->erx_due & ~conn->erx_offered;
	/* Half of the slots no point-to-point transfer holds: those are
	 * the ones the argument above is about. */
	unsigned int half = max(1U, (KCOLL_EAGER_SLOTS - conn->erx_p2p) / 2);
	unsigned int slot;
	int err;

	lockdep_assert_held(&conn->comm->lock);
	if (hweight_long(again) >= half) {
		struct kcoll_wire_msg m = {
			.type = KCOLL_MSG_CREDITS,
			.kind = KCOLL_KIND_COLL,
			.count = cpu_to_le64(again),
		};

		/* The transport names them anew (through the NIC each
		 * slot's MR is registered again under its next key). A
		 * send that fails leaves them due: the next offer does
		 * that again. */
		err = conn->xp->eager_offer(conn, again, true, &m);
		if (err && err != -ENOBUFS) {
			kcoll_conn_kill(conn, -EIO);
			return;
		}
		if (!err && !conn->xp->send_msg(conn, &m))
			conn->erx_due &= ~again;
	}
	if (fresh) {
		/* No room: they stay due (offered later). */
		err = conn->xp->eager_offer(conn, fresh, false, NULL);
		if (err == -ENOBUFS)
			return;
		if (err) {
			kcoll_conn_kill(conn, -EIO);
			return;
		}
	}
	for_each_set_bit(slot, &fresh, KCOLL_EAGER_SLOTS) {
		struct kcoll_wire_msg m = {
			.type = KCOLL_MSG_CREDIT,
			.kind = KCOLL_KIND_COLL,
			.len = cpu_to_le32(KCOLL_EAGER_SLOT_BYTES),
			.serial = cpu_to_le32(slot),
			.status = cpu_to_le32((conn->lazy_offer ?
					       KCOLL_CREDIT_LAZY : 0) |
					      (conn->lazy_offer &&
					       conn->cover_offer ?
					       KCOLL_CREDIT_COVER : 0) |
					      (conn->p2p_offer ?
					       KCOLL_CREDIT_P2P |
					       KCOLL_CREDIT_P2P_ASK : 0)),
		};

		conn->xp->eager_credit(conn, slot, &m);
		if (conn->xp->send_msg(conn, &m))
			return;
		__clear_bit(slot, &conn->erx_due);
		__set_bit(slot, &conn->erx_offered);
	}
}

/*
 * @conn just came up: offer every slot of ours. (The peer's CREDITs may
 * have come before our ESTABLISHED: etx_free is not reset here.) Must
 * hold comm->lock.
 */
void kcoll_engine_eager_up(struct kcoll_conn *conn)
{
	int err;

	conn->lazy_offer = kcoll_lazy_sigs();
	conn->p2p_offer = kcoll_eager_p2p();
	conn->cover_offer = kcoll_cover_tokens();
	conn->erx_due = GENMASK(KCOLL_EAGER_SLOTS - 1, 0);
	err = conn->xp->eager_up(conn);
	if (err) {
		kcoll_conn_kill(conn, err);
		return;
	}
	kcoll_engine_eager_credit(conn);
}

/* Slot @slot's data is consumed (or stale): offer it again. */
static void kcoll_eager_release(struct kcoll_conn *conn, u32 slot)
{
	if (conn->erx[slot].kind == KCOLL_KIND_P2P)
		conn->erx_p2p--;
	conn->erx[slot].full = false;
	__set_bit(slot, &conn->erx_due);
	kcoll_engine_eager_credit(conn);
}

/*
 * The signature slot @slot's data came with, for collective @op (its
 * seq): checked as soon as both are here, and again before the data is
 * used. A mismatch frees the slot (nothing will consume it) and fails
 * @op. Returns whether @op may use the data. Must hold comm->lock.
 */
static bool kcoll_eager_check(struct kcoll_task *op, struct kcoll_conn *conn,
			      u32 slot)
{
	const struct kcoll_wire_eager_sig *es = &conn->erx[slot].sig;
	struct kcoll_wire_msg m = {
		.type = KCOLL_MSG_EAGER,
		.kind = KCOLL_KIND_COLL,
		.opcode = es->opcode,
		.dtype = es->dtype,
		.redop = es->redop,
		.algo = es->algo,
		.root = es->root,
		.count = es->count,
	};

	if (!conn->erx[slot].signed_ || op->error)
		return !op->error;
	if (kcoll_op_check_sig(op, conn, &m))
		return true;
	kcoll_eager_release(conn, slot);
	return false;
}

/*
 * Point-to-point @op's data came eagerly, whether it is taken or fails
 * @op (a signature or size that differs): the send is over, and its
 * sender drops any grant of ours for it (given after waiting,
 * kcoll_p2p_waited()), so none is ever filled and no ABORT comes to undo
 * them: forget them here, or the failed receive waits for them to drain
 * and closes the connection. Until 2026-12-06 only a receive that took
 * the data forgot them (make check, under load: a mismatched receive
 * that had granted ended its connections 10 s later). A collective's
 * grants out on this connection are for its next phase
 * (kcoll_op_grant_ahead()): they stay. Must hold comm->lock.
 */
static void kcoll_eager_p2p_sent(struct kcoll_task *op,
				 struct kcoll_conn *conn)
{
	if (op->kind == KCOLL_KIND_P2P && op->grants_out)
		kcoll_op_forget_grants(op, conn);
}

/*
 * A point-to-point transfer landed in slot @slot: our receive of it, in
 * order per direction, takes it when it reaches the head (only the head
 * runs). One for a receive that failed here is dropped; one for the
 * running receive, which is granted (larger than eager), fails it: the
 * sizes disagree, and nothing else would ever tell it.
 */
static void kcoll_eager_p2p_landed(struct kcoll_conn *conn, u32 slot)
{
	struct kcoll_task *op;

	op = list_first_entry_or_null(&conn->k[KCOLL_KIND_P2P].p2p_recvs,
				      struct kcoll_task, node);
	if (!op || !op->started)
		return;
	if (kcoll_seq_before(conn->erx[slot].seq, op->seq)) {
		kcoll_eager_release(conn, slot);
	} else if (conn->erx[slot].seq == op->seq &&
		   !kcoll_op_eager_undecided(op, conn, op->recv_total) &&
		   !kcoll_op_eager(op, conn, op->recv_total)) {
		kcoll_eager_release(conn, slot);
		kcoll_op_fail_from(op, -EBADMSG, conn->peer);
		kcoll_eager_p2p_sent(op, conn);
	}
}

/*
 * Has point-to-point message @seq from @conn's peer landed in one of our
 * slots, waiting for its receive? Its sender may have completed and left
 * (an eager send completes once posted): the receive still gets it. Must
 * hold comm->lock.
 */
bool kcoll_eager_p2p_here(const struct kcoll_conn *conn, u32 seq)
{
	u32 slot;

	for (slot = 0; slot < KCOLL_EAGER_SLOTS; slot++)
		if (conn->erx[slot].full &&
		    conn->erx[slot].kind == KCOLL_KIND_P2P &&
		    conn->erx[slot].seq == seq)
			return true;
	return false;
}

/*
 * Point-to-point receive @op, granted (larger than eager), reached the
 * head: what landed eagerly before it is either stale or its own sender's
 * smaller send, which fails it (see above).
 */
void kcoll_eager_p2p_granted(struct kcoll_task *op, struct kcoll_conn *conn)
{
	u32 slot;

	for (slot = 0; slot < KCOLL_EAGER_SLOTS && !op->error; slot++)
		if (conn->erx[slot].full &&
		    conn->erx[slot].kind == KCOLL_KIND_P2P)
			kcoll_eager_p2p_landed(conn, slot);
}

/*
 * An eager write from @conn's peer landed in slot @imm's. It is checked
 * here and consumed when our operation reaches its phase
 * (kcoll_op_eager_recv()); until then the slot stays taken, so a sender
 * runs at most KCOLL_EAGER_SLOTS transfers ahead of us.
 */
void kcoll_engine_eager(struct kcoll_conn *conn, u32 imm,
			u32 byte_len)
{
	u32 slot = imm & KCOLL_IMM_EAGER_SERIAL, hlen;
	u32 kind = imm >> KCOLL_IMM_KIND_SHIFT;
	bool p2p = kind == KCOLL_KIND_P2P;
	struct kcoll_wire_eager h;
	struct kcoll_task *op;
	__le64 cover = 0;
	const u8 *in;
	bool sig, cov;

	/* Point-to-point only where we offered it, and into at most half
	 * of our slots (a sender keeps to that: conn->etx_p2p, with the
	 * transfers of collectives behind its head). */
	if ((kind != KCOLL_KIND_COLL && !(p2p && conn->p2p_offer)) ||
	    (p2p && conn->erx_p2p >= KCOLL_EAGER_SLOTS / 2) ||
	    slot >= KCOLL_EAGER_SLOTS || conn->erx[slot].full ||
	    test_bit(slot, &conn->erx_due) || byte_len < sizeof(h))
		goto bad;
	/* The peer's index, checked: not past the slots on any path. */
	slot = array_index_nospec(slot, KCOLL_EAGER_SLOTS);
	/*
	 * The slot stays writable by the peer until it is offered again
	 * (kcoll_gmr_eager_offer()): copy the header (and the signature)
	 * once, then check and use only the copies, so that a second write
	 * between the check and the use changes nothing.
	 */
	in = kcoll_eager_slot(conn, slot);
	memcpy(&h, in, sizeof(h));
	barrier();
	/* Signed only where we offered lazy signatures (our CREDITs said
	 * so); a peer that offered them too always signs. */
	sig = h.flags & KCOLL_EAGER_SIGNED;
	/* A token that covers older ones (kcoll_eager_cover_in()): only
	 * where we offered it, signed, its data the bitmap alone. */
	cov = h.flags & KCOLL_EAGER_COVER;
	hlen = sizeof(h) + (sig ? sizeof(struct kcoll_wire_eager_sig) : 0);
	/* A point-to-point message has one phase, 0: one for another
	 * would be taken as here (kcoll_eager_p2p_here()) and never used. */
	if (h.kind != kind || le32_to_cpu(h.len) > KCOLL_EAGER_MAX ||
	    (p2p && h.phase) ||
	    (h.flags & ~(KCOLL_EAGER_SIGNED | KCOLL_EAGER_COVER)) ||
	    (p2p ? !sig : ((sig && !conn->lazy_offer) ||
			   (!sig && kcoll_conn_lazy(conn)))) ||
	    (cov && (p2p || !sig || !conn->cover_offer ||
		     le32_to_cpu(h.len) != KCOLL_COVER_BYTES)) ||
	    byte_len < hlen || le32_to_cpu(h.len) != byte_len - hlen)
		goto bad;
	if (cov)
		memcpy(&cover, in + hlen, sizeof(cover));
	conn->erx[slot].full = true;
	conn->erx[slot].kind = kind;
	conn->erx[slot].signed_ = sig;
	conn->erx[slot].hlen = hlen;
	conn->erx[slot].seq = le32_to_cpu(h.seq);
	conn->erx[slot].phase = le16_to_cpu(h.phase);
	/* A covering token's own collective receives no data. */
	conn->erx[slot].len = cov ? 0 : le32_to_cpu(h.len);
	if (sig)
		memcpy(&conn->erx[slot].sig, in + sizeof(h),
		       sizeof(conn->erx[slot].sig));
	if (cov)
		kcoll_eager_cover_in(conn, conn->erx[slot].seq,
				     le64_to_cpu(cover));
	if (p2p) {
		conn->erx_p2p++;
		kcoll_eager_p2p_landed(conn, slot);
		return;
	}
	op = kcoll_coll_head(conn->comm);
	if (op && op->started &&
	    kcoll_coll_over(conn->comm, conn->erx[slot].seq)) {
		kcoll_eager_release(conn, slot);  /* for an op that failed */
		return;
	}
	op = kcoll_coll_running(conn->comm, conn->erx[slot].seq);
	if (op)
		kcoll_eager_check(op, conn, slot);
	return;
bad:
	pr_warn_ratelimited("comm %llx rank %u: bad eager write from rank %u (imm %#x, %u bytes)\n",
			    conn->comm->uid, conn->comm->rank, conn->peer, imm,
			    byte_len);
	kcoll_conn_kill(conn, -EPROTO);
}

/*
 * A collective completed: offer again the slots that still hold data of
 * collectives that are over (they failed, or it came after they did).
 * Those that started beside it could not offer them when they started.
 * Must hold comm->lock.
 */
void kcoll_eager_sweep(struct kcoll_comm *comm)
{
	u32 i, slot;

	lockdep_assert_held(&comm->lock);
	for (i = 0; i < comm->nranks; i++) {
		struct kcoll_conn *conn = comm->conns[i];

		if (!conn || !conn->eager || conn->state != KCOLL_CONN_UP)
			continue;
		for (slot = 0; slot < KCOLL_EAGER_SLOTS; slot++)
			if (conn->erx[slot].full &&
			    conn->erx[slot].kind == KCOLL_KIND_COLL &&
			    kcoll_coll_over(comm, conn->erx[slot].seq))
				kcoll_eager_release(conn, slot);
	}
}

/*
 * Collective @op starts: offer again the slots holding data of
 * collectives that are over (they failed here, and nobody will consume
 * it; not those of older ones still running beside @op), and check the
 * signatures of what came early for it.
 */
void kcoll_eager_start(struct kcoll_task *op, struct kcoll_conn *conn)
{
	u32 slot;

	for (slot = 0; slot < KCOLL_EAGER_SLOTS; slot++) {
		if (!conn->erx[slot].full ||
		    conn->erx[slot].kind != KCOLL_KIND_COLL)
			continue;
		if (kcoll_coll_over(op->comm, conn->erx[slot].seq))
			kcoll_eager_release(conn, slot);
		else if (conn->erx[slot].seq == op->seq &&
			 !kcoll_eager_check(op, conn, slot))
			return;
	}
}

/*
 * An EAGER message whose transport carries the payload an eager WRITE
 * would have put in our slot (a peer on this node): into the slot it
 * names, then as if it had been written there. Must hold comm->lock.
 */
void kcoll_engine_eager_in(struct kcoll_conn *conn,
			   const struct kcoll_wire_msg *m,
			   const void *payload, u32 plen)
{
	u32 slot = le32_to_cpu(m->serial);

	lockdep_assert_held(&conn->comm->lock);
	if (!conn->eager || m->kind >= KCOLL_KIND_NR ||
	    slot >= KCOLL_EAGER_SLOTS ||
	    conn->erx[slot].full || test_bit(slot, &conn->erx_due) ||
	    plen > KCOLL_EAGER_SLOT_BYTES || plen != le32_to_cpu(m->len)) {
		pr_warn_ratelimited("comm %llx rank %u: bad eager message from rank %u (slot %u, %u bytes)\n",
				    conn->comm->uid, conn->comm->rank,
				    conn->peer, slot, plen);
		kcoll_conn_kill(conn, -EPROTO);
		return;
	}
	slot = array_index_nospec(slot, KCOLL_EAGER_SLOTS);
	memcpy(kcoll_eager_slot(conn, slot), payload, plen);
	kcoll_engine_eager(conn, kcoll_imm_make(m->kind,
						KCOLL_IMM_EAGER | slot), plen);
}

/*
 * Eager point-to-point, the receiver: whether receive @op (from @conn's
 * peer) should grant its buffer as well, as a larger one does
 * (kcoll_op_grant()): once its sender asked (kcoll_p2p_asked()), or once
 * it has waited KCOLL_SIG_LAZY_MS for its data (as a lazy collective asks
 * for SIGs only then; kcoll_engine_timeout_work() sets p2p_grant_due). A
 * sender that found no slot free writes through the grant (the peer's
 * slots may hold collective data we consume only after this receive, or
 * its own four unreceived sends), and a larger sender, which waits for a
 * grant, fails on its signature instead of both waiting for their
 * timeouts. A receive whose data comes in time costs no message but the
 * data. Must hold comm->lock.
 */
bool kcoll_p2p_waited(struct kcoll_task *op, struct kcoll_conn *conn)
{
	if (op->recv_landed_any || op->error)
		return false;
	if (conn->p2p_asked) {
		if (!kcoll_seq_before(conn->p2p_ask_seq, op->seq)) {
			/* due, but not a wait: the timer leaves it */
			op->p2p_grant_due = true;
			return true;
		}
		conn->p2p_asked = false;	/* behind the head receive:
						 * spent */
	}
	if (!op->p2p_grant_at) {
		op->p2p_grant_at = (jiffies +
			       msecs_to_jiffies(KCOLL_SIG_LAZY_MS)) ?: 1;
		kcoll_timeout_arm(op->comm, op->p2p_grant_at);
	}
	return op->p2p_grant_due;
}

/*
 * Eager point-to-point, the sender: send @op found none of the peer's
 * slots free for it (collectives ahead of their peer may hold the half
 * that point-to-point shares: kcoll_eager_post()). Where the peer takes
 * asks (kcoll_conn_p2p_ask()), tell it at once, once per send, so that
 * its receive grants without waiting KCOLL_SIG_LAZY_MS; the send then goes
 * through that grant, or eagerly if a slot comes back first, as after the
 * wait. A send already posted (through a grant that came after the
 * receiver's wait) has nothing to ask for. A full send queue leaves the
 * ask for the next try. Not a signature: stats/sig_sends does not count
 * it. Must hold comm->lock.
 */
void kcoll_p2p_ask(struct kcoll_task *op, struct kcoll_conn *conn)
{
	struct kcoll_wire_msg m;

	if (op->p2p_asked || op->eager_sent || op->send_posted_any ||
	    op->error || !kcoll_conn_p2p_ask(conn) || kcoll_op_held(op))
		return;
	kcoll_msg_init(op, &m, KCOLL_MSG_SIG, conn->peer);
	m.status = cpu_to_le32(KCOLL_SIG_ASK);
	if (kcoll_conn_send_msg(conn, &m))
		return;
	op->p2p_asked = true;
	kcoll_stat_add(KCOLL_STAT_P2P_ASKS, 1);
}

/*
 * Eager point-to-point, the receiver: @conn's peer asked for a grant of
 * its send @seq (kcoll_p2p_ask()). Our receives up to @seq grant as soon
 * as they run (kcoll_p2p_waited()), whether posted yet or not; the first
 * past @seq forgets it. No send runs further ahead of our receives than
 * the few slots its unreceived predecessors may hold, so an ask beyond
 * KCOLL_EAGER_SLOTS past our next receive is dropped rather than kept for
 * receives to come. All a peer gains by asking falsely is the grant of a
 * receive buffer it would get after KCOLL_SIG_LAZY_MS anyway; nothing is
 * allocated. An ask may come before the peer's CREDIT has told us it
 * takes asks (its CREDIT deferred by a full send queue): it is kept all
 * the same, and only eager receives look at it. Must hold comm->lock.
 */
void kcoll_p2p_asked(struct kcoll_conn *conn, u32 seq)
{
	u32 next = conn->k[KCOLL_KIND_P2P].p2p_recv_seq;

	if ((s32)(seq - next) > KCOLL_EAGER_SLOTS)
		return;
	if (!conn->p2p_asked || kcoll_seq_before(conn->p2p_ask_seq, seq))
		conn->p2p_ask_seq = seq;
	conn->p2p_asked = true;
}

/*
 * Eager point-to-point, the sender: the receiver's grants that came for
 * this send or for sends before it. Stale ones go. One for this send must
 * match it (else @op fails with -EBADMSG: the receive differs, a larger
 * one included); then the receiver has waited (kcoll_p2p_waited()) and the
 * send goes through it, as a larger one would. Returns 1 if it does, 0 if
 * it may go eagerly, or -EBADMSG (@op failed). Must hold comm->lock.
 */
int kcoll_p2p_grants(struct kcoll_task *op, struct kcoll_conn *conn)
{
	struct kcoll_wire_msg sig;
	struct kcoll_grant *g, *tmp;

	list_for_each_entry_safe(g, tmp, &conn->k[op->kind].in, node) {
		if (kcoll_seq_before(g->seq, op->seq)) {
			list_del(&g->node);
			kfree(g);
			continue;
		}
		if (g->seq != op->seq)
			return 0;	/* for a later send */
		if (!g->sig_unchecked ||
		    kcoll_sig_match(op, &g->sig, conn->peer)) {
			g->sig_unchecked = false;	/* checked here */
			return 1;
		}
		/* Gone from the list before failing @op: its ABORT may
		 * find the send queue full, and the connection's end frees
		 * the list. */
		sig = g->sig;
		list_del(&g->node);
		kfree(g);
		kcoll_op_check_sig(op, conn, &sig);	/* fails @op */
		return -EBADMSG;
	}
	return 0;
}

/*
 * The current phase receives eagerly from @conn's peer: consume its data if
 * it has landed.
 */
void kcoll_op_eager_recv(struct kcoll_task *op, struct kcoll_conn *conn)
{
	u32 slot;

	if (op->recv_landed_any)
		return;
	for (slot = 0; slot < KCOLL_EAGER_SLOTS; slot++) {
		typeof(conn->erx[0]) *e = &conn->erx[slot];

		if (!e->full || e->kind != op->kind)
			continue;
		/* Point-to-point: for a receive that failed before us. */
		if (op->kind == KCOLL_KIND_P2P &&
		    kcoll_seq_before(e->seq, op->seq)) {
			kcoll_eager_release(conn, slot);
			continue;
		}
		if (e->seq != op->seq || e->phase != (u16)op->phase)
			continue;
		/*
		 * Nothing is used unchecked: a signed transfer is checked
		 * here, an unsigned one waits for the sender's SIG (which
		 * precedes it on the connection unless a full send queue
		 * deferred it). A lazy op forwards what it uses to peers that
		 * trust its own signature for it.
		 */
		if (!e->signed_ && !kcoll_sig_confirmed(op, conn))
			return;
		if (!kcoll_eager_check(op, conn, slot)) {
			kcoll_eager_p2p_sent(op, conn);
			return;
		}
		if (e->len != op->recv_total) {
			kcoll_eager_release(conn, slot);
			kcoll_op_fail(op, -EBADMSG);	/* sizes disagree */
			kcoll_eager_p2p_sent(op, conn);
			return;
		}
		if (e->len)
			kcoll_op_land(op, kcoll_eager_slot(conn, slot) +
					  e->hlen, 0, e->len);
		kcoll_eager_release(conn, slot);
		op->recv_done = op->recv_total;
		op->recv_landed_any = true;
		kcoll_eager_p2p_sent(op, conn);
		return;
	}
}

/*
 * Write phase @phase's @len bytes at @src eagerly to @conn's peer: header
 * and data into a free slot of the peer's, by the transport (through the
 * NIC, one WRITE WITH IMM from a bounce of ours; to a peer on this node,
 * one channel message that carries both). @young: the peer may consume it
 * only after its head collective, or only in a later phase than the one
 * it runs (kcoll_op_send_early()). True once posted: it counts as sent
 * then, since the slot is ours until the peer offers it again, which it
 * does only after the data has landed; a failed completion kills the
 * connection like a control message's. @cover: an empty transfer, a
 * token, that covers older ones (kcoll_tokens_flush()); its bitmap goes
 * as the data. False: not now (no slot, a full send queue, a higher
 * priority running), or @op failed.
 */
static bool kcoll_eager_post(struct kcoll_task *op, struct kcoll_conn *conn,
			     u32 phase, const u8 *src, u32 len, bool young,
			     const u64 *cover)
{
	struct {
		struct kcoll_wire_eager h;
		struct kcoll_wire_eager_sig s;
	} h;
	struct kcoll_wire_msg m;
	__le64 bits;
	u32 hlen, slot;
	int err;

	if (len && kcoll_op_held(op))
		return false;	/* a higher priority runs */
	/*
	 * At most half of the peer's slots hold our data that it may
	 * consume only later: point-to-point messages, the transfers of
	 * collectives behind our head (the peer may not run them before
	 * its own head completes) and those of later phases. The peer owes
	 * a CREDITS for at most 3 slots (fewer than half of those no
	 * point-to-point message holds), so a head's transfer for the
	 * phase it runs always finds a slot free or one coming back
	 * (docs/DESIGN.md, "Several collectives in flight"). A
	 * point-to-point send that finds the half full asks its receiver
	 * for a grant (kcoll_p2p_ask(); a peer that takes no asks grants
	 * after 50 ms, stats/p2p_waits); keeping a slot for it measured
	 * slower for small collectives (docs/PERFORMANCE.md, "A slot kept
	 * for point-to-point").
	 */
	if ((op->kind == KCOLL_KIND_P2P || young) &&
	    hweight_long(conn->etx_p2p | conn->etx_young) >=
	    KCOLL_EAGER_SLOTS / 2)
		return false;
	slot = find_first_bit(&conn->etx_free, KCOLL_EAGER_SLOTS);
	if (slot >= KCOLL_EAGER_SLOTS)
		return false;	/* the peer's next CREDIT runs us again */
	/* A peer that offered lazy signatures gets ours with every
	 * transfer; point-to-point transfers are always signed. */
	memset(&h, 0, sizeof(h));
	h.h.seq = cpu_to_le32(op->seq);
	h.h.phase = cpu_to_le16(phase);
	h.h.kind = op->kind;
	h.h.len = cpu_to_le32(len);
	hlen = sizeof(h.h);
	if (conn->peer_lazy || op->kind == KCOLL_KIND_P2P) {
		h.h.flags = KCOLL_EAGER_SIGNED;
		h.s.opcode = op->args.opcode;
		h.s.dtype = op->dtype;
		h.s.redop = op->redop;
		h.s.algo = op->args.algo;
		h.s.root = cpu_to_le32(op->kind == KCOLL_KIND_P2P ? 0 :
				       op->args.root);
		h.s.count = cpu_to_le64(kcoll_sched_sig(&op->args, conn->peer));
		hlen += sizeof(h.s);
	}
	if (cover) {	/* signed: kcoll_conn_cover() needs lazy peers */
		bits = cpu_to_le64(*cover);
		h.h.flags |= KCOLL_EAGER_COVER;
		src = (const u8 *)&bits;
		len = sizeof(bits);
		h.h.len = cpu_to_le32(len);
	}
	kcoll_msg_init(op, &m, KCOLL_MSG_EAGER, conn->peer);
	m.serial = cpu_to_le32(slot);
	m.len = cpu_to_le32(hlen + len);
	err = conn->xp->eager_put(conn, slot, &m, &h, hlen, src, len);
	if (kcoll_op_post_stopped(op, conn, err))
		return false;
	__clear_bit(slot, &conn->etx_free);
	if (op->kind == KCOLL_KIND_P2P)
		__set_bit(slot, &conn->etx_p2p);
	if (young)
		__set_bit(slot, &conn->etx_young);
	kcoll_stat_add(KCOLL_STAT_EAGER_SENDS, 1);
	return true;
}

/* The current phase sends eagerly to @conn's peer (kcoll_eager_post()). */
void kcoll_op_send_eager(struct kcoll_task *op, struct kcoll_conn *conn,
			 const u8 *src)
{
	bool young;

	if (op->send_posted_any)
		return;
	if (op->ph.send.fwd && op->recv_done < op->send_total)
		return;		/* not received (and reduced) yet */
	young = op->kind == KCOLL_KIND_COLL && !kcoll_op_is_head(op);
	/* A broadcast's confirmation token goes with the others that
	 * gather (kcoll_tokens_flush()). */
	if (kcoll_op_token_held(op, conn)) {
		op->tok_want = true;
		op->comm->tok_waiting = true;
		return;
	}
	if (!kcoll_eager_post(op, conn, op->phase, src, op->send_total, young,
			      NULL))
		return;
	if (young)
		kcoll_stat_add(KCOLL_STAT_EAGER_BESIDE, 1);
	kcoll_op_eager_sent(op);
}

/* @op's current send has gone eagerly (or inside a younger token's):
 * posted and done, the slot is the peer's now. */
void kcoll_op_eager_sent(struct kcoll_task *op)
{
	op->tok_want = false;
	op->eager_sent = true;
	op->send_posted = op->send_done = op->send_total;
	op->send_posted_any = op->send_done_any = true;
}

/*
 * Post @op's confirmation token to @conn's peer, covering the older ones
 * of @cover (kcoll_tokens_flush(); @cover 0: a plain token), and count it
 * sent. Through the NIC the connection then holds further tokens until
 * this write's send completion (kcoll_token_busy()). True once posted.
 */
bool kcoll_eager_post_token(struct kcoll_task *op, struct kcoll_conn *conn,
			    u64 cover)
{
	bool young = !kcoll_op_is_head(op);

	if (!kcoll_eager_post(op, conn, op->phase, (const u8 *)&cover, 0, young,
			      cover ? &cover : NULL))
		return false;
	if (young)
		kcoll_stat_add(KCOLL_STAT_EAGER_BESIDE, 1);
	kcoll_op_eager_sent(op);
	if (conn->xp->timed) {
		conn->tok_busy = true;
		conn->tok_mark = conn->tx_posted;
	}
	return true;
}

/*
 * Send the eager transfers of the phases after this one, once this
 * phase's send is posted, as far as kcoll_sched_send_early() lets them go
 * (sysfs eager_ahead phases at most): each carries a copy of its bytes
 * and waits in the peer's slot until the peer reaches its phase, so a
 * small collective whose phases each send to another peer (a pairwise
 * alltoall, a direct scatter's root) has all of them on the wire within
 * one link latency instead of one latency each. They are "young"
 * (kcoll_eager_post()), within half of each peer's slots. A phase whose
 * send cannot go now stops the rest until the next phase opens and asks
 * again. Not stream-ordered ones (their GPU memory is not the CPU's to
 * copy). Must hold comm->lock.
 */
void kcoll_op_send_early(struct kcoll_task *op)
{
	u32 lim = op->phase + 1 + kcoll_eager_ahead();

	lockdep_assert_held(&op->comm->lock);
	if (op->error || op->early_stop || op->kind != KCOLL_KIND_COLL ||
	    op->gpu || (op->ph.has_send && !op->send_posted_any))
		return;
	if (lim > op->nphases)
		lim = op->nphases;
	if (op->early_next <= op->phase) {
		op->early_next = op->phase + 1;
		op->early_ok = false;
	}
	while (op->early_next < lim) {
		struct kcoll_conn *conn;
		struct kcoll_phase nx;
		u64 len;

		kcoll_sched_phase(&op->args, op->early_next, &nx);
		if (!nx.has_send) {
			op->early_next++;
			continue;
		}
		len = nx.send.cnt * op->esize;
		conn = kcoll_conn_of(op->comm, nx.send.peer);
		if (!conn || !kcoll_op_eager(op, conn, len) ||
		    (!op->early_ok &&
		     !kcoll_sched_send_early(&op->args, op->phase,
					     op->early_next, &nx))) {
			op->early_stop = true;
			return;
		}
		/* Still true once later phases run: fewer are between. */
		op->early_ok = true;
		if (!kcoll_eager_post(op, conn, op->early_next,
				      op->bufs[nx.send.src.buf].vaddr +
				      nx.send.src.off * op->esize, len, true,
				      NULL))
			return;		/* the next completion or CREDIT */
		kcoll_stat_add(KCOLL_STAT_EAGER_AHEAD, 1);
		op->early_ok = false;
		op->early_next++;
	}
}
