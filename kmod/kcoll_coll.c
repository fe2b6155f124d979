// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll collective engine: runs one rank's schedule (kcoll_sched.c) of each
 * operation over the communicator's connections.
 *
 * Data moves receiver-driven: for every chunk it wants, the receiver sends
 * a GRANT naming where the sender may write it (straight into the
 * destination buffer, or into a staging slot when the data must be
 * reduced); the sender answers with one RDMA WRITE WITH IMM per grant,
 * whose immediate names the grant. Grants and data travel in FIFO order per
 * (connection, kind), so both sides match them by order and check the
 * serial. Collectives additionally exchange a SIG (signature) with every
 * peer; an operation completes only when every peer's signature matched.
 * A failed operation sends ABORT to its peers and waits, before it lets go
 * of its memory, until every chunk it granted has landed or its sender has
 * aborted too (RC ordering: nothing follows an ABORT) or died.
 *
 * Everything here runs under comm->lock (see kcoll_comm.h), from ENTER
 * (issue), rdma_cm handlers and the CQ handlers (process context).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <asm/fpu/api.h>

#include "kcoll_comm.h"

static struct kcoll_conn *kcoll_conn_of(struct kcoll_comm *comm, u32 rank)
{
	return rank < comm->nranks ? comm->conns[rank] : NULL;
}

/* Serial arithmetic on u32 sequence numbers. */
static bool kcoll_seq_before(u32 a, u32 b)
{
	return (s32)(a - b) < 0;
}

static u8 *kcoll_region(struct kcoll_task *op, const struct kcoll_sregion *r)
{
	return op->bufs[r->buf].vaddr + r->off * op->esize;
}

static void kcoll_msg_init(struct kcoll_task *op, struct kcoll_wire_msg *m,
			   u8 type)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->kind = op->kind;
	m->seq = cpu_to_le32(op->seq);
	m->opcode = op->args.opcode;
	m->dtype = op->dtype;
	m->redop = op->redop;
	m->algo = op->args.algo;
	m->root = cpu_to_le32(op->kind == KCOLL_KIND_P2P ? 0 : op->args.root);
	m->count = cpu_to_le64(op->args.count);
}

/* The op's partner on @conn for P2P: a SEND matches a RECV and back. */
static bool kcoll_sig_match(struct kcoll_task *op, const struct kcoll_wire_msg *m)
{
	u8 opcode = op->args.opcode;

	if (op->kind == KCOLL_KIND_P2P)
		opcode = opcode == KCOLL_OP_SEND ? KCOLL_OP_RECV : KCOLL_OP_SEND;
	return m->opcode == opcode && m->dtype == op->dtype &&
	       m->redop == op->redop && m->algo == op->args.algo &&
	       le64_to_cpu(m->count) == op->args.count &&
	       (op->kind == KCOLL_KIND_P2P ||
		le32_to_cpu(m->root) == op->args.root);
}

/* ------------------------------------------------------------------ */
/* Failure                                                              */
/* ------------------------------------------------------------------ */

/* Errors that mean a peer is gone for the communicator. */
static bool kcoll_err_is_loss(int err)
{
	return err == -ECONNRESET || err == -ETIMEDOUT || err == -EIO ||
	       err == -ENODEV || err == -EPROTO;
}

static void kcoll_op_send_abort(struct kcoll_task *op, struct kcoll_conn *conn)
{
	u32 lost = op->comm->lost_rank;
	struct kcoll_wire_msg m;

	if (!conn || conn->state != KCOLL_CONN_UP)
		return;
	kcoll_msg_init(op, &m, KCOLL_MSG_ABORT);
	m.status = cpu_to_le32(-op->error);
	/*
	 * Which rank is lost, if any (+1; 0: none): see kcoll_abort_lost().
	 * Failed because a peer went away (its own ABORT told us, before its
	 * disconnect did): that peer, so that our peers blame it and not us.
	 */
	if (!lost && op->report_peer != ~0U && kcoll_err_is_loss(op->error))
		lost = op->report_peer + 1;
	m.root = cpu_to_le32(lost);
	/* A full SQ means the peer is not draining: it will die or the
	 * comm will be torn down; either resolves what we wait for. */
	if (kcoll_conn_send_msg(conn, &m))
		kcoll_conn_kill(conn, -EIO);
}

static void kcoll_timeout_arm(struct kcoll_comm *comm, unsigned long deadline);

/*
 * How long a failed operation may wait for its posted writes and the
 * peers' writes into its grants: the RC transport's own limit (the first
 * try and 7 retries of the local ACK timeout) and a second, at least 10 s
 * (a loaded host delays ACKs for seconds and loses nothing). A transfer
 * that is neither done nor failed by then never will be (a peer gone
 * without a trace, a provider that stopped retrying; both seen with
 * rxe): kcoll_engine_timeout_work() closes the op's connections, which
 * flushes them.
 */
static unsigned long kcoll_drain_jiffies(void)
{
	u64 ms = div_u64((4096ULL << kcoll_ack_timeout()) * 8, NSEC_PER_MSEC);

	return msecs_to_jiffies(clamp_t(u64, ms + MSEC_PER_SEC, 10000, 120000));
}

/*
 * Tell @op's peers it failed. Over several QPs an ABORT (lane 0) could
 * overtake our WRITEs on the other lanes, and the peer, having forgotten
 * the grants they fill, would take them for stray data: to such peers the
 * ABORT goes once our writes have completed (@deferred: that moment).
 */
static void kcoll_op_abort_peers(struct kcoll_task *op, bool deferred)
{
	struct kcoll_comm *comm = op->comm;
	u32 i, first = 0, end = comm->nranks;

	if (op->kind == KCOLL_KIND_P2P) {
		first = op->args.root;
		end = first + 1;
	}
	for (i = first; i < end; i++) {
		struct kcoll_conn *conn = kcoll_conn_of(comm, i);
		bool lanes = conn && conn->nlanes > 1;

		if (deferred && !lanes)
			continue;
		if (!deferred && lanes && op->writes_inflight) {
			op->abort_deferred = true;
			continue;
		}
		kcoll_op_send_abort(op, conn);
	}
}

/*
 * End @op with @err (first error wins). Its peers are told; the op lingers
 * until nothing can land in its memory any more (kcoll_engine_reap).
 */
static void kcoll_op_fail(struct kcoll_task *op, int err)
{
	struct kcoll_comm *comm = op->comm;

	lockdep_assert_held(&comm->lock);
	if (op->error || op->finished)
		return;
	op->error = err;
	if (!op->started)
		return;		/* nothing sent or granted yet */
	op->drain_by = (jiffies + kcoll_drain_jiffies()) ?: 1;
	kcoll_timeout_arm(comm, op->drain_by);
	kcoll_op_abort_peers(op, false);
}

/* The same, @peer's doing (its ABORT, its differing signature). */
static void kcoll_op_fail_from(struct kcoll_task *op, int err, u32 peer)
{
	if (!op->error && !op->finished)
		op->report_peer = peer;
	kcoll_op_fail(op, err);
}

/* ------------------------------------------------------------------ */
/* Signatures                                                           */
/* ------------------------------------------------------------------ */

/*
 * Lazy signatures (docs/DESIGN.md): on a connection where both ends offered
 * them, a collective whose every result depends on every rank
 * (kcoll_sched_all_dependent(), op->lazy) sends no SIG and waits for none:
 * the signature travels with the data instead (signed eager headers,
 * grants), checked before the data is used, so a rank that completes has
 * seen, along the data's paths, that every rank's signature equals its
 * own. A mismatch fails the op on the rank that sees it, whose ABORTs end
 * it everywhere. An op that has made no progress for KCOLL_SIG_LAZY_MS asks
 * its lazy peers for their SIGs, for the missing-rank report and for peers
 * whose differing operation waits for SIGs; one that is merely long (a
 * large transfer, moving) never asks, so a large communicator does not pay
 * a SIG and an answer per peer for every long collective.
 */
#define KCOLL_SIG_LAZY_MS	50

/*
 * How far @op has come: its phase, then the bytes of that phase sent and
 * received (each phase is far below 2^40 bytes). Equal values 50 ms apart
 * mean it stalled. Must hold comm->lock.
 */
static u64 kcoll_op_mark(const struct kcoll_task *op)
{
	return ((u64)op->phase << 40) + op->send_done + op->recv_done;
}

static struct kcoll_task *kcoll_coll_head(struct kcoll_comm *comm);

static bool kcoll_conn_lazy(const struct kcoll_conn *conn)
{
	return conn->lazy_offer && conn->peer_lazy;
}

/* Has @conn's peer confirmed its signature for collective @op? */
static bool kcoll_sig_confirmed(struct kcoll_task *op,
				const struct kcoll_conn *conn)
{
	return kcoll_seq_before(op->seq, conn->sig_next);
}

static void kcoll_sig_confirm(struct kcoll_task *op, struct kcoll_conn *conn)
{
	if (kcoll_sig_confirmed(op, conn))
		return;
	op->sigs_ok++;
	conn->sig_next = op->seq + 1;
}

/*
 * Check @m, a signature from @conn's peer for collective @op (a SIG, a
 * grant, or an eager header's, see kcoll_eager_check()): confirm it, or
 * fail @op, blaming the peer. Returns whether it matched. Must hold
 * comm->lock.
 */
static bool kcoll_op_check_sig(struct kcoll_task *op, struct kcoll_conn *conn,
			       const struct kcoll_wire_msg *m)
{
	if (m->type == KCOLL_MSG_SIG &&
	    (le32_to_cpu(m->status) & KCOLL_SIG_DONE)) {
		/* It completed this collective: its signature matched. */
		kcoll_sig_confirm(op, conn);
		return true;
	}
	if (kcoll_sig_match(op, m)) {
		kcoll_sig_confirm(op, conn);
		return true;
	}
	pr_warn_ratelimited("comm %llx rank %u: operation %u does not match rank %u's (%s/%u/%u count %llu root %u)\n",
			    op->comm->uid, op->comm->rank, op->seq, conn->peer,
			    kcoll_op_name(m->opcode), m->dtype, m->redop,
			    le64_to_cpu(m->count), le32_to_cpu(m->root));
	kcoll_op_fail_from(op, -EBADMSG, conn->peer);
	return false;
}

/* Send @op's SIG to @conn's peer, with @status (KCOLL_SIG_*). */
static int kcoll_op_send_sig(struct kcoll_task *op, struct kcoll_conn *conn,
			     u32 status)
{
	struct kcoll_wire_msg m;
	int err;

	kcoll_msg_init(op, &m, KCOLL_MSG_SIG);
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
static void kcoll_sig_reply(struct kcoll_conn *conn)
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

/* ------------------------------------------------------------------ */
/* Receiving                                                            */
/* ------------------------------------------------------------------ */

static int kcoll_slot_get(struct kcoll_conn *conn)
{
	int slot = find_first_zero_bit(&conn->slot_busy, conn->window);

	if (slot >= conn->window)
		return -1;
	__set_bit(slot, &conn->slot_busy);
	return slot;
}

/*
 * Elements per kernel_fpu_begin() section: preemption is off inside one,
 * so a chunk (up to 4 MiB) or an AVG finish over a whole buffer is cut
 * into pieces of 64 KiB, a few microseconds each.
 */
#define KCOLL_FPU_BYTES		(64u << 10)

static size_t kcoll_fpu_elems(const struct kcoll_task *op)
{
	return KCOLL_FPU_BYTES / op->esize;
}

/* dst[i] = dst[i] (op) src[i] for @n elements, FPU section by section. */
static void kcoll_op_reduce(struct kcoll_task *op, u8 *dst, const u8 *src,
			    size_t n)
{
	size_t step = kcoll_fpu_elems(op), k;

	while (n) {
		k = min(n, step);
		kernel_fpu_begin();
		op->reduce(dst, src, k);
		kernel_fpu_end();
		dst += k * op->esize;
		src += k * op->esize;
		n -= k;
	}
}

/* The AVG finish of the current phase: divide by the rank count. */
static void kcoll_op_avg(struct kcoll_task *op)
{
	u8 *p = kcoll_region(op, &op->ph.avg);
	size_t n = op->ph.avg_cnt, step = kcoll_fpu_elems(op), k;

	while (n) {
		k = min(n, step);
		kernel_fpu_begin();
		kcoll_reduce_active_avg(p, k, op->dtype, op->comm->nranks);
		kernel_fpu_end();
		p += k * op->esize;
		n -= k;
		cond_resched();
	}
}

/*
 * @len bytes of the current phase's receive, at byte @off of it, came into
 * staging at @in: reduce them into the destination, or copy them there.
 */
static void kcoll_op_land(struct kcoll_task *op, const u8 *in, size_t off,
			  size_t len)
{
	const struct kcoll_srecv *rv = &op->ph.recv;
	u8 *dst = kcoll_region(op, &rv->dst) + off;

	if (rv->reduce) {
		const u8 *opnd = kcoll_region(op, &rv->operand) + off;

		if (opnd != dst)
			memcpy(dst, opnd, len);
		kcoll_op_reduce(op, dst, in, len / op->esize);
	} else {
		memcpy(dst, in, len);
	}
}

/*
 * A WRITE for @op on @conn was posted with result @err: true if the
 * caller stops here, with @op failed, or (a full send queue) to be
 * retried on the next completion.
 */
static bool kcoll_op_post_stopped(struct kcoll_task *op,
				  struct kcoll_conn *conn, int err)
{
	if (err && err != -ENOBUFS)
		kcoll_op_fail(op, err == -ENOTCONN ?
			      (conn->error ?: -ECONNRESET) : err);
	return err;
}

/* ------------------------------------------------------------------ */
/* Eager transfers                                                      */
/* ------------------------------------------------------------------ */

/*
 * A collective transfer of at most KCOLL_EAGER_MAX bytes on a connection
 * that agreed on it goes without a grant: the sender writes it, behind a
 * header naming its operation and phase, into one of the receiver's eager
 * slots, which the receiver offered with CREDIT messages and offers again
 * once it has consumed what landed there. A latency-bound step then costs
 * one trip instead of two (the grant's, then the data's). Both sides
 * decide from the transfer's size, which the schedule gives both.
 */
static bool kcoll_op_held(struct kcoll_task *op);

static bool kcoll_op_eager(const struct kcoll_task *op,
			   const struct kcoll_conn *conn, u64 bytes)
{
	return conn->eager && op->kind == KCOLL_KIND_COLL &&
	       bytes <= KCOLL_EAGER_MAX;
}

static size_t kcoll_eager_off(u32 slot, bool bounce)
{
	return ((bounce ? KCOLL_EAGER_SLOTS : 0) + slot) *
	       KCOLL_EAGER_SLOT_BYTES;
}

static u8 *kcoll_eager_slot(struct kcoll_conn *conn, u32 slot, bool bounce)
{
	return conn->ebuf.vaddr + kcoll_eager_off(slot, bounce);
}

/*
 * Offer the peer the slots of conn->erx_due: each one's first time with a
 * CREDIT naming its address; after that, once half of the slots are due,
 * all of them with one CREDITS (a message less per small transfer, which
 * is most of a small collective's cost). Holding back up to half never
 * deadlocks: a sender that has run out of slots has only transfers the
 * receiver will consume, in order, before it needs the one waiting. A
 * full send queue (or a channel message without memory) leaves them due:
 * kcoll_engine_reap() retries after every completion. Must hold
 * comm->lock.
 */
void kcoll_engine_eager_credit(struct kcoll_conn *conn)
{
	unsigned long again = conn->erx_due & conn->erx_offered;
	unsigned long fresh = conn->erx_due & ~conn->erx_offered;
	unsigned int slot;

	lockdep_assert_held(&conn->comm->lock);
	if (hweight_long(again) >= KCOLL_EAGER_SLOTS / 2 &&
	    (conn->local || kcoll_conn_sq_room(conn, 0))) {
		struct kcoll_wire_msg m = {
			.type = KCOLL_MSG_CREDITS,
			.kind = KCOLL_KIND_COLL,
			.count = cpu_to_le64(again),
		};

		/* Through the NIC each slot's MR is registered anew under
		 * its next key, whose key byte (the rkey's low 8 bits)
		 * goes in byte @slot of addr. A send that fails leaves
		 * them due: the next offer registers them again. */
		if (!conn->local) {
			u64 keys = 0;

			if (kcoll_gmr_eager_offer(conn, again)) {
				kcoll_conn_kill(conn, -EIO);
				return;
			}
			for_each_set_bit(slot, &again, KCOLL_EAGER_SLOTS)
				keys |= (u64)(conn->egmr[slot]->mr->rkey & 0xff)
					<< (8 * slot);
			m.addr = cpu_to_le64(keys);
		}
		if (!kcoll_conn_send_msg(conn, &m))
			conn->erx_due &= ~again;
	}
	if (fresh && !conn->local &&
	    (!kcoll_conn_sq_room(conn, 0) ||
	     kcoll_gmr_eager_offer(conn, fresh))) {
		if (kcoll_conn_sq_room(conn, 0))
			kcoll_conn_kill(conn, -EIO);
		return;
	}
	for_each_set_bit(slot, &fresh, KCOLL_EAGER_SLOTS) {
		struct kcoll_wire_msg m = {
			.type = KCOLL_MSG_CREDIT,
			.kind = KCOLL_KIND_COLL,
			.len = cpu_to_le32(KCOLL_EAGER_SLOT_BYTES),
			.serial = cpu_to_le32(slot),
			.status = cpu_to_le32(conn->lazy_offer ?
					      KCOLL_CREDIT_LAZY : 0),
		};

		if (!conn->local) {
			m.addr = cpu_to_le64(conn->egmr[slot]->mr->iova);
			m.rkey = cpu_to_le32(conn->egmr[slot]->mr->rkey);
		}
		if (kcoll_conn_send_msg(conn, &m))
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
	conn->lazy_offer = kcoll_lazy_sigs();
	conn->erx_due = GENMASK(KCOLL_EAGER_SLOTS - 1, 0);
	if (!conn->local && kcoll_gmr_eager_setup(conn)) {
		kcoll_conn_kill(conn, -ENOMEM);
		return;
	}
	kcoll_engine_eager_credit(conn);
}

/* Slot @slot's data is consumed (or stale): offer it again. */
static void kcoll_eager_release(struct kcoll_conn *conn, u32 slot)
{
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
 * An eager write from @conn's peer landed in slot @imm's. It is checked
 * here and consumed when our operation reaches its phase
 * (kcoll_op_eager_recv()); until then the slot stays taken, so a sender
 * runs at most KCOLL_EAGER_SLOTS transfers ahead of us.
 */
static void kcoll_engine_eager(struct kcoll_conn *conn, u32 imm,
			       u32 byte_len)
{
	u32 slot = imm & KCOLL_IMM_EAGER_SERIAL, hlen;
	struct kcoll_wire_eager h;
	struct kcoll_task *op;
	const u8 *in;
	bool sig;

	if ((imm >> KCOLL_IMM_KIND_SHIFT) != KCOLL_KIND_COLL ||
	    slot >= KCOLL_EAGER_SLOTS || conn->erx[slot].full ||
	    test_bit(slot, &conn->erx_due) || byte_len < sizeof(h))
		goto bad;
	/*
	 * The slot stays writable by the peer until it is offered again
	 * (kcoll_gmr_eager_offer()): copy the header (and the signature)
	 * once, then check and use only the copies, so that a second write
	 * between the check and the use changes nothing.
	 */
	in = kcoll_eager_slot(conn, slot, false);
	memcpy(&h, in, sizeof(h));
	barrier();
	/* Signed only where we offered lazy signatures (our CREDITs said
	 * so); a peer that offered them too always signs. */
	sig = h.flags & KCOLL_EAGER_SIGNED;
	hlen = sizeof(h) + (sig ? sizeof(struct kcoll_wire_eager_sig) : 0);
	if (h.kind != KCOLL_KIND_COLL || le32_to_cpu(h.len) > KCOLL_EAGER_MAX ||
	    (h.flags & ~KCOLL_EAGER_SIGNED) || (sig && !conn->lazy_offer) ||
	    (!sig && kcoll_conn_lazy(conn)) ||
	    byte_len < hlen || le32_to_cpu(h.len) != byte_len - hlen)
		goto bad;
	conn->erx[slot].full = true;
	conn->erx[slot].signed_ = sig;
	conn->erx[slot].hlen = hlen;
	conn->erx[slot].seq = le32_to_cpu(h.seq);
	conn->erx[slot].phase = le16_to_cpu(h.phase);
	conn->erx[slot].len = le32_to_cpu(h.len);
	if (sig)
		memcpy(&conn->erx[slot].sig, in + sizeof(h),
		       sizeof(conn->erx[slot].sig));
	op = kcoll_coll_head(conn->comm);
	if (op && op->started && kcoll_seq_before(conn->erx[slot].seq, op->seq))
		kcoll_eager_release(conn, slot);  /* for an op that failed */
	else if (op && op->started && conn->erx[slot].seq == op->seq)
		kcoll_eager_check(op, conn, slot);
	return;
bad:
	pr_warn_ratelimited("comm %llx rank %u: bad eager write from rank %u (imm %#x, %u bytes)\n",
			    conn->comm->uid, conn->comm->rank, conn->peer, imm,
			    byte_len);
	kcoll_conn_kill(conn, -EPROTO);
}

/*
 * Collective @op starts: offer again the slots holding data of
 * collectives before it (they failed here, and nobody will consume it),
 * and check the signatures of what came early for it.
 */
static void kcoll_eager_start(struct kcoll_task *op, struct kcoll_conn *conn)
{
	u32 slot;

	for (slot = 0; slot < KCOLL_EAGER_SLOTS; slot++) {
		if (!conn->erx[slot].full)
			continue;
		if (kcoll_seq_before(conn->erx[slot].seq, op->seq))
			kcoll_eager_release(conn, slot);
		else if (conn->erx[slot].seq == op->seq &&
			 !kcoll_eager_check(op, conn, slot))
			return;
	}
}

/*
 * An EAGER message from a peer on this node (the channel carries the
 * payload an eager WRITE would have): into the slot it names, then as if
 * it had been written there. Must hold comm->lock.
 */
void kcoll_engine_eager_local(struct kcoll_conn *conn,
			      const struct kcoll_wire_msg *m,
			      const void *payload, u32 plen)
{
	u32 slot = le32_to_cpu(m->serial);

	lockdep_assert_held(&conn->comm->lock);
	if (!conn->local || !conn->eager || slot >= KCOLL_EAGER_SLOTS ||
	    conn->erx[slot].full || test_bit(slot, &conn->erx_due) ||
	    plen > KCOLL_EAGER_SLOT_BYTES || plen != le32_to_cpu(m->len)) {
		pr_warn_ratelimited("comm %llx rank %u: bad eager message from rank %u (slot %u, %u bytes)\n",
				    conn->comm->uid, conn->comm->rank,
				    conn->peer, slot, plen);
		kcoll_conn_kill(conn, -EPROTO);
		return;
	}
	memcpy(kcoll_eager_slot(conn, slot, false), payload, plen);
	kcoll_engine_eager(conn, kcoll_imm_make(m->kind,
						KCOLL_IMM_EAGER | slot), plen);
}

/*
 * The current phase receives eagerly from @conn's peer: consume its data if
 * it has landed.
 */
static void kcoll_op_eager_recv(struct kcoll_task *op, struct kcoll_conn *conn)
{
	u32 slot;

	if (op->recv_landed_any)
		return;
	for (slot = 0; slot < KCOLL_EAGER_SLOTS; slot++) {
		typeof(conn->erx[0]) *e = &conn->erx[slot];

		if (!e->full || e->seq != op->seq || e->phase != (u16)op->phase)
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
		if (!kcoll_eager_check(op, conn, slot))
			return;
		if (e->len != op->recv_total) {
			kcoll_eager_release(conn, slot);
			kcoll_op_fail(op, -EBADMSG);	/* sizes disagree */
			return;
		}
		if (e->len)
			kcoll_op_land(op, kcoll_eager_slot(conn, slot, false) +
					  e->hlen, 0, e->len);
		kcoll_eager_release(conn, slot);
		op->recv_done = op->recv_total;
		op->recv_landed_any = true;
		return;
	}
}

/*
 * The current phase sends eagerly to @conn's peer: header and data into a
 * bounce of ours (registered with the slots), then one WRITE WITH IMM
 * from it into a free slot of the peer's (inline when it fits); to a peer
 * on this node, one channel message that carries both. It counts
 * as sent once posted: the bounce is ours until the peer offers the slot
 * again, which it does only after the data has landed; a failed
 * completion kills the connection like a control message's.
 */
static void kcoll_op_send_eager(struct kcoll_task *op, struct kcoll_conn *conn,
				const u8 *src)
{
	struct {
		struct kcoll_wire_eager h;
		struct kcoll_wire_eager_sig s;
	} hdr, *h;
	u32 len = op->send_total, hlen, n, slot, imm;
	struct ib_sge sge;
	int err;

	if (op->send_posted_any)
		return;
	if (op->ph.send.fwd && op->recv_done < op->send_total)
		return;		/* not received (and reduced) yet */
	if (len && kcoll_op_held(op))
		return;		/* a higher priority runs */
	slot = find_first_bit(&conn->etx_free, KCOLL_EAGER_SLOTS);
	if (slot >= KCOLL_EAGER_SLOTS)
		return;		/* the peer's next CREDIT runs us again */
	/* Through the NIC the header goes first in our bounce, the data
	 * behind it; the channel carries them itself. A peer that offered
	 * lazy signatures gets ours with every transfer. */
	h = conn->local ? &hdr : (void *)kcoll_eager_slot(conn, slot, true);
	memset(h, 0, sizeof(*h));
	h->h.seq = cpu_to_le32(op->seq);
	h->h.phase = cpu_to_le16(op->phase);
	h->h.kind = KCOLL_KIND_COLL;
	h->h.len = cpu_to_le32(len);
	hlen = sizeof(h->h);
	if (conn->peer_lazy) {
		h->h.flags = KCOLL_EAGER_SIGNED;
		h->s.opcode = op->args.opcode;
		h->s.dtype = op->dtype;
		h->s.redop = op->redop;
		h->s.algo = op->args.algo;
		h->s.root = cpu_to_le32(op->args.root);
		h->s.count = cpu_to_le64(op->args.count);
		hlen += sizeof(h->s);
	}
	n = hlen + len;
	imm = kcoll_imm_make(KCOLL_KIND_COLL, KCOLL_IMM_EAGER | slot);
	if (conn->local) {
		struct kcoll_wire_msg m;

		kcoll_msg_init(op, &m, KCOLL_MSG_EAGER);
		m.serial = cpu_to_le32(slot);
		m.len = cpu_to_le32(n);
		err = conn->state == KCOLL_CONN_UP ?
		      kcoll_lchan_send_data(conn, &m, h, hlen, src, len) :
		      -ENOTCONN;
	} else {
		memcpy((u8 *)h + hlen, src, len);
		if (n <= conn->lane[0].max_inline) {
			err = kcoll_conn_write_inline(conn, 0, h, n,
						      conn->etx_addr[slot],
						      conn->etx_rkey[slot], imm);
		} else {
			kcoll_buf_sge(&conn->ebuf, kcoll_eager_off(slot, true),
				      n, &sge);
			err = kcoll_conn_write(conn, 0, &sge, 1,
					       conn->etx_addr[slot],
					       conn->etx_rkey[slot], imm,
					       &conn->lane[0].tx_cqe);
		}
	}
	if (kcoll_op_post_stopped(op, conn, err))
		return;
	__clear_bit(slot, &conn->etx_free);
	if (conn->local) {
		conn->local_bytes += len;
		kcoll_stat_add(KCOLL_STAT_INTRA_BYTES, len);
	} else {
		kcoll_stat_add(KCOLL_STAT_RDMA_BYTES, len);
	}
	kcoll_stat_add(KCOLL_STAT_EAGER_SENDS, 1);
	op->send_posted = op->send_done = len;
	op->send_posted_any = op->send_done_any = true;
}

/* Issue the grants the window allows for the current phase's receive. */
static void kcoll_op_grant(struct kcoll_task *op)
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
			if (slot < 0)
				return;
			len = min_t(u64, left, rounddown(conn->slot_bytes,
							 op->esize));
		} else if (left) {
			len = min_t(u64, left, kcoll_chunk_bytes());
			if (dst->segs)	/* one MR per WRITE */
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
				/* All MRs out: retired ones come back at the
				 * next flush, then we retry. */
				if (err == -ENOBUFS)
					kcoll_gmr_flush(conn);
				else
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
	return kcoll_imm_make(kind, conn->eager ?
				    serial & KCOLL_IMM_EAGER_SERIAL : serial);
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
		kcoll_gmr_retire(g->gmr, g->slot);
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

/* ------------------------------------------------------------------ */
/* Sending                                                              */
/* ------------------------------------------------------------------ */

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
 * Priorities (sysfs prio_sched): while an operation of a higher priority
 * has started and not finished on the same device, in any communicator or
 * process, @op posts no new chunk; what it has posted drains, so the
 * higher one starts at the next chunk boundary. Every prio_aging_ms a held
 * op still sends one chunk, and rises one level (op->prio_aged, for the
 * rest of its life): nothing starves, two nodes whose priorities cross
 * (each waiting for the other's held op) still progress, and what one
 * operation can take from a lower one is bounded by the levels between
 * them times prio_aging_ms — a higher operation stuck waiting for a peer
 * that never submits holds the others back that long, not until its own
 * timeout. Equal priorities are not ordered: their QPs share the NIC. A
 * held op re-runs from comm->kick. Must hold comm->lock.
 */
static bool kcoll_op_held(struct kcoll_task *op)
{
	struct kcoll_prio *pr = op->prio_dev;
	unsigned long recent;
	unsigned int p;

	if (!pr || !kcoll_prio_sched())
		goto run;
	recent = jiffies - msecs_to_jiffies(kcoll_prio_aging_ms());
	for (p = op->prio + op->prio_aged + 1; p <= KCOLL_PRIO_MAX; p++) {
		if (atomic_read(&pr->active[p]))
			break;
		/*
		 * Urgent operations come in bursts (one per layer): for a
		 * while after one, keep at most one chunk of ours in flight,
		 * so the next finds at most that ahead of it on the NIC.
		 */
		if (time_after(READ_ONCE(pr->last[p]), recent) &&
		    op->writes_inflight) {
			kcoll_queue_delayed(&op->comm->kick, 1);
			return true;
		}
	}
	if (p > KCOLL_PRIO_MAX)
		goto run;
	if (!op->held) {
		op->held = true;
		op->held_since = jiffies;
	} else if (time_after_eq(jiffies, op->held_since +
				 msecs_to_jiffies(kcoll_prio_aging_ms()))) {
		op->held_since = jiffies;	/* one chunk, then hold again */
		if (op->prio + op->prio_aged < KCOLL_PRIO_MAX)
			op->prio_aged++;
		return false;
	}
	kcoll_queue_delayed(&op->comm->kick, 1);
	return true;
run:
	op->held = false;
	return false;
}

/* comm->kick: held operations look again. */
void kcoll_engine_kick_work(struct work_struct *work)
{
	struct kcoll_comm *comm = container_of(to_delayed_work(work),
					       struct kcoll_comm, kick);

	mutex_lock(&comm->lock);
	if (!comm->shutting_down)
		kcoll_engine_reap(comm);
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
static void kcoll_op_send(struct kcoll_task *op)
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

/* ------------------------------------------------------------------ */
/* Control messages                                                     */
/* ------------------------------------------------------------------ */

static struct kcoll_task *kcoll_coll_head(struct kcoll_comm *comm)
{
	return list_first_entry_or_null(&comm->colls, struct kcoll_task, node);
}

/* The error an ABORT carries, as this rank reports it. */
static int kcoll_abort_status(const struct kcoll_wire_msg *m)
{
	int err = -(int)le32_to_cpu(m->status);

	/* The peer's operation was cancelled (its communicator or process
	 * went away): for us the peer is lost. */
	if (err == -ECANCELED || err >= 0 || err < -MAX_ERRNO)
		return -ECONNRESET;
	return err;
}

/*
 * An ABORT naming a lost rank: that rank is gone for us too, even if its
 * disconnect never reached us (RC notices a dead peer only when sending
 * to it; a rank that only receives from it would wait forever).
 */
static void kcoll_abort_lost(struct kcoll_comm *comm,
			     const struct kcoll_wire_msg *m)
{
	u32 lost = le32_to_cpu(m->root);

	if (!lost || lost > comm->nranks || lost - 1 == comm->rank)
		return;
	/* A peer that timed out waiting for that rank says so. */
	if (comm->conns[lost - 1])
		kcoll_conn_kill(comm->conns[lost - 1],
				kcoll_abort_status(m) == -ETIMEDOUT ?
				-ETIMEDOUT : -ECONNRESET);
}

/* Whom an ABORT from @conn's peer blames: the rank it names as lost, or
 * the sender itself. */
static u32 kcoll_abort_culprit(struct kcoll_conn *conn,
			       const struct kcoll_wire_msg *m)
{
	u32 lost = le32_to_cpu(m->root);

	if (lost && lost <= conn->comm->nranks)
		return lost - 1;
	return conn->peer;
}

/* Check the SIGs and ABORTs @conn has queued for @op. */
static void kcoll_op_check_sigs(struct kcoll_task *op, struct kcoll_conn *conn)
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
static void kcoll_op_forget_grants(struct kcoll_task *op, struct kcoll_conn *conn)
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
			kcoll_gmr_retire(g->gmr, g->slot);
		else if (g->slot >= 0)
			__clear_bit(g->slot, &conn->slot_busy);
		kfree(g);
	}
}

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

/* ------------------------------------------------------------------ */
/* Phases                                                               */
/* ------------------------------------------------------------------ */

static void kcoll_phase_open(struct kcoll_task *op)
{
	struct kcoll_phase *ph = &op->ph;

	kcoll_sched_phase(&op->args, op->phase, ph);
	op->phase_open = true;
	op->send_total = ph->has_send ? ph->send.cnt * op->esize : 0;
	op->recv_total = ph->has_recv ? ph->recv.cnt * op->esize : 0;
	op->send_posted = op->send_done = 0;
	op->recv_granted = op->recv_done = 0;
	op->send_posted_any = op->send_done_any = false;
	op->recv_granted_any = op->recv_landed_any = false;
	if (ph->copy.cnt) {
		u8 *dst = kcoll_region(op, &ph->copy.dst);
		const u8 *src = kcoll_region(op, &ph->copy.src);

		if (dst != src)
			memmove(dst, src, ph->copy.cnt * op->esize);
	}
}

static bool kcoll_phase_done(struct kcoll_task *op)
{
	const struct kcoll_phase *ph = &op->ph;

	if (ph->has_send && (!op->send_done_any ||
			     op->send_done < op->send_total))
		return false;
	if (ph->has_recv && (!op->recv_landed_any ||
			     op->recv_done < op->recv_total))
		return false;
	return true;
}

/*
 * @op (lazy) ran for KCOLL_SIG_LAZY_MS: ask the lazy peers that have not
 * confirmed their signature for it. The answers feed the missing-rank
 * report, and a peer whose operation differs and waits for SIGs gets ours
 * (it fails with the mismatch, and its ABORT ends ours). Best effort: a
 * full send queue skips a peer. Must hold comm->lock.
 */
static void kcoll_op_lazy_ask(struct kcoll_task *op)
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
static bool kcoll_op_sigs_in(struct kcoll_task *op)
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

/* Run @op as far as it can go now. */
static void kcoll_op_progress(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	u32 i;

	lockdep_assert_held(&comm->lock);
	if (!op->started) {
		op->started = true;
		op->nphases = kcoll_sched_nphases(&op->args);
		if (!op->error && comm->error)
			op->error = comm->error;	/* nothing sent yet */
		if (op->error)
			return;
		if (comm->prio) {
			op->prio_dev = comm->prio;
			atomic_inc(&op->prio_dev->active[op->prio]);
			WRITE_ONCE(op->prio_dev->last[op->prio], jiffies);
		}
		if (op->kind == KCOLL_KIND_COLL &&
		    kcoll_sched_all_dependent(&op->args)) {
			op->lazy = true;
			op->lazy_at = jiffies +
				      msecs_to_jiffies(KCOLL_SIG_LAZY_MS);
			kcoll_timeout_arm(comm, op->lazy_at);
		}
	}
	/*
	 * Our SIG to every peer (but lazy ones, see kcoll_conn_lazy()). A
	 * full send queue (a burst, or a provider whose completions stall)
	 * defers the rest to the next completion: the operation cannot
	 * finish before they are out, or a peer would wait for ours for
	 * ever.
	 */
	for (i = op->sigs_sent; op->kind == KCOLL_KIND_COLL && i < comm->nranks;
	     i = ++op->sigs_sent) {
		struct kcoll_conn *conn = comm->conns[i];
		int err;

		if (!conn)
			continue;
		if (conn->eager)
			kcoll_eager_start(op, conn);
		if (op->error)
			return;
		if (op->lazy && kcoll_conn_lazy(conn) && !(conn->sig_reply_due &&
		    conn->sig_reply_seq == op->seq)) {
			kcoll_op_check_sigs(op, conn);
			continue;
		}
		err = kcoll_op_send_sig(op, conn, 0);
		if (err == -ENOBUFS)
			break;
		if (err) {
			kcoll_op_fail_from(op, -ECONNRESET, conn->peer);
			return;
		}
		if (conn->sig_reply_seq == op->seq)
			conn->sig_reply_due = false;
		kcoll_op_check_sigs(op, conn);
	}
	if (op->error)
		return;
	if (op->lazy_due && !op->lazy_sent && op->sigs_sent == comm->nranks)
		kcoll_op_lazy_ask(op);
	while (!op->error && op->phase < op->nphases) {
		if (!op->phase_open)
			kcoll_phase_open(op);
		if (op->ph.has_recv)
			kcoll_op_grant(op);
		if (op->ph.has_send)
			kcoll_op_send(op);
		if (op->error || !kcoll_phase_done(op))
			return;
		if (op->ph.avg_cnt)
			kcoll_op_avg(op);
		op->phase_open = false;
		op->phase++;
	}
	if (op->error)
		return;
	if (op->kind == KCOLL_KIND_COLL && !kcoll_op_sigs_in(op))
		return;
	op->finished = true;
}

/* ------------------------------------------------------------------ */
/* Timeouts                                                             */
/* ------------------------------------------------------------------ */

/* Has @conn's peer sent its signature (or ABORT) for collective @op? */
static bool kcoll_op_sig_seen(struct kcoll_task *op, struct kcoll_conn *conn)
{
	struct kcoll_sig *s;

	if (kcoll_seq_before(op->seq, conn->sig_next))
		return true;
	list_for_each_entry(s, &conn->sigs, node)
		if (s->seq == op->seq)
			return true;
	return false;
}

static void kcoll_missing_add(u32 *out, u32 cap, u32 *n, u32 rank)
{
	u32 i;

	for (i = 0; i < min(*n, cap); i++)
		if (out[i] == rank)
			return;
	if (*n < cap)
		out[*n] = rank;
	(*n)++;
}

/*
 * The ranks @op still waits for, into @out (at most @cap of them, @out may
 * be NULL with @cap 0); returns how many there are. A collective waits
 * first for the peers whose signature has not come (they have not submitted
 * it), ascending; once every signature is in, for the peers of its current
 * phase whose data (or grants) are missing. A lazy op counts lazy peers'
 * signatures once it has asked for them (KCOLL_SIG_LAZY_MS). Must hold
 * comm->lock.
 */
u32 kcoll_op_missing(struct kcoll_task *op, u32 *out, u32 cap)
{
	struct kcoll_comm *comm = op->comm;
	const struct kcoll_phase *ph = &op->ph;
	u32 i, n = 0;

	lockdep_assert_held(&comm->lock);
	if (op->kind == KCOLL_KIND_P2P) {
		kcoll_missing_add(out, cap, &n, op->args.root);
		return n;
	}
	for (i = 0; i < comm->nranks; i++) {
		struct kcoll_conn *conn = comm->conns[i];

		/* A lazy peer's SIG comes only when asked (op->lazy_sent). */
		if (conn && !kcoll_op_sig_seen(op, conn) &&
		    (!op->lazy || op->lazy_sent || !kcoll_conn_lazy(conn)))
			kcoll_missing_add(out, cap, &n, i);
	}
	if (n || !op->started || !op->phase_open)
		return n;
	if (ph->has_recv && !(op->recv_landed_any &&
			      op->recv_done == op->recv_total))
		kcoll_missing_add(out, cap, &n, ph->recv.peer);
	if (ph->has_send && !(op->send_done_any &&
			      op->send_done == op->send_total))
		kcoll_missing_add(out, cap, &n, ph->send.peer);
	if (n == 2 && cap >= 2 && out[0] > out[1])
		swap(out[0], out[1]);
	return n;
}

/*
 * @op ran past its deadline. It fails with -ETIMEDOUT on this rank; the
 * ranks it still waits for are reported (log, netlink event, the comm's
 * report) and their connections are closed: they may still hold grants
 * into @op's memory, which must not be written once @op completes, and a
 * rank that stalls a collective this long is as good as lost for the
 * communicator. The ABORTs to the other peers name the first missing rank,
 * so they fail at once with the same error instead of waiting for their own
 * timers. Must hold comm->lock.
 */
static void kcoll_op_timeout(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	u32 i, n;

	n = kcoll_op_missing(op, NULL, 0);
	op->missing = n ? kmalloc_array(n, sizeof(u32), GFP_KERNEL) : NULL;
	op->nmissing = op->missing ? kcoll_op_missing(op, op->missing, n) : 0;
	op->reason = KCOLL_REPORT_TIMEOUT;
	pr_warn_ratelimited("comm %llx rank %u: %s %u timed out after %u ms, waiting for %u rank(s)%s%u%s\n",
			    comm->uid, comm->rank,
			    kcoll_op_name(op->args.opcode), op->seq,
			    op->timeout_ms, n, op->nmissing ? ", first " : "",
			    op->nmissing ? op->missing[0] : 0,
			    op->nmissing > 1 ? " ..." : "");
	kcoll_nl_op_timeout(comm, op->seq, op->args.opcode, op->timeout_ms,
			    op->missing, op->nmissing);
	if (!comm->error && op->nmissing) {
		comm->error = -ETIMEDOUT;
		comm->lost_rank = op->missing[0] + 1;
	}
	if (op->nmissing)
		op->report_peer = op->missing[0];
	kcoll_op_fail(op, -ETIMEDOUT);
	for (i = 0; i < op->nmissing; i++) {
		struct kcoll_conn *conn = kcoll_conn_of(comm, op->missing[i]);

		if (conn)
			kcoll_conn_kill(conn, -ETIMEDOUT);
	}
}

/* Run comm->timeout_work at @deadline, or earlier. Must hold comm->lock. */
static void kcoll_timeout_arm(struct kcoll_comm *comm, unsigned long deadline)
{
	unsigned long now = jiffies;

	lockdep_assert_held(&comm->lock);
	if (delayed_work_pending(&comm->timeout_work) &&
	    time_before_eq(comm->timeout_at, deadline))
		return;
	comm->timeout_at = deadline;
	kcoll_mod_delayed(&comm->timeout_work,
			  time_after(deadline, now) ? deadline - now : 0);
}

static bool kcoll_op_quiet(struct kcoll_task *op);

/* Has @op a grant out with @conn's peer (it may still write into it)? */
static bool kcoll_op_granted_to(struct kcoll_task *op, struct kcoll_conn *conn)
{
	struct kcoll_grant *g;

	list_for_each_entry(g, &conn->k[op->kind].out, node)
		if (g->op == op)
			return true;
	return false;
}

/*
 * Failed @op did not drain by op->drain_by: close the connections that
 * hold its transfers (or any posted work: writes are not tracked per
 * connection). Their QPs go to the error state and flush, so @op
 * completes. Must hold comm->lock.
 */
static void kcoll_op_unstick(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	u32 i;

	lockdep_assert_held(&comm->lock);
	pr_warn_ratelimited("comm %llx rank %u: %s %u failed (%d) and its transfers did not drain (%u write(s), %u grant(s), %u grant MR(s)); closing their connections\n",
			    comm->uid, comm->rank,
			    kcoll_op_name(op->args.opcode), op->seq, op->error,
			    op->writes_inflight, op->grants_out, op->gmrs);
	for (i = 0; i < comm->nranks; i++) {
		struct kcoll_conn *conn = comm->conns[i];

		if (conn && conn->state == KCOLL_CONN_UP &&
		    (conn->sq_posted || kcoll_op_granted_to(op, conn)))
			kcoll_conn_kill(conn, -ETIMEDOUT);
	}
	op->drain_by = 0;
}

/*
 * A send queue that stops: RC completes every posted WR, with success or
 * an error, within its retry budget (kcoll_drain_jiffies()), unless the
 * provider stops retrying or the peer stops answering RNR (retried for
 * ever). A connection with work posted and no send completion for three
 * budgets (30 s to 6 min) is closed, so its operations fail now, naming
 * the peer, rather than at their own timeout (10 min by default).
 */
static unsigned long kcoll_stall_jiffies(void)
{
	return 3 * kcoll_drain_jiffies();
}

/* @lane's send queue went from empty to busy. Must hold comm->lock. */
void kcoll_engine_sq_busy(struct kcoll_lane *lane)
{
	struct kcoll_comm *comm = lane->conn->comm;

	lockdep_assert_held(&comm->lock);
	lane->sent_at = jiffies;
	kcoll_timeout_arm(comm, lane->sent_at + kcoll_stall_jiffies());
}

/* Close the connections whose send queue stalled; the next check time. */
static unsigned long kcoll_conns_check_stall(struct kcoll_comm *comm,
					     unsigned long now, bool *any)
{
	unsigned long next = 0, at;
	u32 i;

	lockdep_assert_held(&comm->lock);
	for (i = 0; i < comm->nranks; i++) {
		struct kcoll_conn *conn = comm->conns[i];
		unsigned int l;

		if (!conn || conn->state != KCOLL_CONN_UP)
			continue;
		/* Per QP: one that stops hides behind others that do not. */
		for (l = 0; l < conn->nlanes; l++) {
			struct kcoll_lane *lane = &conn->lane[l];

			if (!lane->sq_posted)
				continue;
			at = lane->sent_at + kcoll_stall_jiffies();
			if (time_before(now, at)) {
				if (!next || time_before(at, next))
					next = at;
				continue;
			}
			pr_warn_ratelimited("comm %llx rank %u: %u send(s) to rank %u (QP %u) and no completion for %u s: closing the connection\n",
					    comm->uid, comm->rank,
					    lane->sq_posted, conn->peer, l,
					    jiffies_to_msecs(now - lane->sent_at) /
					    1000);
			kcoll_conn_kill(conn, -ETIMEDOUT);
			*any = true;
			break;
		}
	}
	return next;
}

/*
 * comm->timeout_work: fail the operations past their deadline; close the
 * connections of failed ones that do not drain, and those whose send
 * queue stalled.
 */
void kcoll_engine_timeout_work(struct work_struct *work)
{
	struct kcoll_comm *comm = container_of(to_delayed_work(work),
					       struct kcoll_comm,
					       timeout_work);
	unsigned long next = 0, stall, now = jiffies;
	struct kcoll_task *op, *tmp;
	bool any = false;

	mutex_lock(&comm->lock);
	if (comm->shutting_down)
		goto out_unlock;
	list_for_each_entry_safe(op, tmp, &comm->ops, all) {
		if (op->lazy && !op->lazy_due && op->started && !op->error &&
		    !op->finished) {
			u64 mark = kcoll_op_mark(op);

			if (time_after_eq(now, op->lazy_at) &&
			    mark != op->lazy_mark) {
				/* Moving: look again later. */
				op->lazy_mark = mark;
				op->lazy_at = now +
					msecs_to_jiffies(KCOLL_SIG_LAZY_MS);
			}
			if (time_after_eq(now, op->lazy_at)) {
				op->lazy_due = true;	/* progress asks */
				any = true;
			} else if (!next || time_before(op->lazy_at, next)) {
				next = op->lazy_at;
			}
		}
		if (op->drain_by && !kcoll_op_quiet(op)) {
			if (time_after_eq(now, op->drain_by)) {
				kcoll_op_unstick(op);
				any = true;
			} else if (!next || time_before(op->drain_by, next)) {
				next = op->drain_by;
			}
			continue;
		}
		if (!op->deadline || op->error || op->finished)
			continue;
		if (time_after_eq(now, op->deadline)) {
			kcoll_op_timeout(op);
			any = true;
		} else if (!next || time_before(op->deadline, next)) {
			next = op->deadline;
		}
	}
	stall = kcoll_conns_check_stall(comm, now, &any);
	if (stall && (!next || time_before(stall, next)))
		next = stall;
	if (any)
		kcoll_engine_reap(comm);
	if (next)
		kcoll_timeout_arm(comm, next);
out_unlock:
	mutex_unlock(&comm->lock);
}

/* ------------------------------------------------------------------ */
/* Completion                                                           */
/* ------------------------------------------------------------------ */

static void kcoll_op_release(struct kcoll_task *op)
{
	int i;

	for (i = 0; i < KCOLL_SBUF_NR; i++) {
		if (op->mems[i]) {
			kcoll_mem_put(op->mems[i]);
			op->mems[i] = NULL;
			memset(&op->bufs[i], 0, sizeof(op->bufs[i]));
		} else {
			kcoll_buf_release(&op->bufs[i]);
		}
	}
}

static void kcoll_op_free(struct kcoll_task *op)
{
	kcoll_op_release(op);
	kfree(op->missing);
	kfree(op);
}

/* Nothing can land in @op's memory any more and nothing of it is posted. */
static bool kcoll_op_quiet(struct kcoll_task *op)
{
	return !op->grants_out && !op->writes_inflight && !op->gmrs;
}

/* What the report of failed @op says; op->reason if the failure set it. */
static void kcoll_op_reason(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;

	if (op->reason)
		return;
	switch (op->error) {
	case -ETIMEDOUT:
		op->reason = KCOLL_REPORT_TIMEOUT;
		break;
	case -EBADMSG:
		op->reason = KCOLL_REPORT_MISMATCH;
		break;
	case -ECANCELED:
		op->reason = KCOLL_REPORT_ABORTED;
		break;
	case -ECONNRESET:
	case -ENODEV:
	case -EIO:
	case -EPROTO:
		op->reason = KCOLL_REPORT_PEER_LOST;
		break;
	default:
		op->reason = KCOLL_REPORT_OTHER;
	}
	if (op->report_peer == ~0U && comm->lost_rank &&
	    op->reason != KCOLL_REPORT_MISMATCH)
		op->report_peer = comm->lost_rank - 1;
	/* Failed because a peer timed out: whom we were waiting for. */
	if (op->reason == KCOLL_REPORT_TIMEOUT && !op->missing) {
		u32 n = kcoll_op_missing(op, NULL, 0);

		op->missing = n ? kmalloc_array(n, sizeof(u32), GFP_KERNEL) :
				  NULL;
		op->nmissing = op->missing ? kcoll_op_missing(op, op->missing,
							      n) : 0;
	}
}

/* @op failed: it becomes the comm's report. Must hold comm->lock. */
static void kcoll_report_set(struct kcoll_task *op, u64 ns)
{
	struct kcoll_report *r = &op->comm->report;

	kcoll_op_reason(op);
	kfree(r->missing);
	r->user_data = op->req->sqe.user_data;
	r->seq = op->seq;
	r->error = op->error;
	r->reason = op->reason;
	r->opcode = op->args.opcode;
	r->peer = op->report_peer;
	r->missing = op->missing;	/* moves */
	r->nmissing = op->nmissing;
	r->elapsed_ms = div_u64(ns, NSEC_PER_MSEC);
	op->missing = NULL;
	op->nmissing = 0;
}

static void kcoll_op_complete(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	struct kcoll_req *req = op->req;
	u64 ns = ktime_get_ns() - op->t_submit;
	int res = op->error;
	u32 cflags = 0;

	if (res < 0) {
		kcoll_report_set(op, ns);
		cflags = KCOLL_CQE_F_REPORT;
	}
	kcoll_opstats_add(&comm->stats, op->bytes, res, ns);
	if (comm->dstats)
		kcoll_opstats_add(comm->dstats, op->bytes, res, ns);
	kcoll_opstats_add(&kcoll_node_stats, op->bytes, res, ns);
	list_del(&op->node);
	list_del(&op->all);
	comm->nr_ops--;
	if (op->prio_dev) {
		WRITE_ONCE(op->prio_dev->last[op->prio], jiffies);
		atomic_dec(&op->prio_dev->active[op->prio]);
	}
	if (op->kind == KCOLL_KIND_COLL)
		comm->coll_done_seq = op->seq + 1;
	kcoll_op_free(op);
	kcoll_req_complete_flags(req, res, cflags);
}

/*
 * Progress every op that can move and complete the ones that are over.
 * Called after every event. Must hold comm->lock.
 */
void kcoll_engine_reap(struct kcoll_comm *comm)
{
	struct kcoll_task *op, *tmp;
	bool again;
	u32 i;

	lockdep_assert_held(&comm->lock);
	do {
		again = false;
		/* What landed must be invalid before its op may complete,
		 * its slot be granted again. */
		for (i = 0; i < comm->nranks; i++)
			if (comm->conns[i] &&
			    !list_empty(&comm->conns[i]->gmr_inv_due))
				kcoll_gmr_flush(comm->conns[i]);
		op = kcoll_coll_head(comm);
		if (op) {
			if (!op->finished && !op->error)
				kcoll_op_progress(op);
			if ((op->finished || op->error) && kcoll_op_quiet(op)) {
				kcoll_op_complete(op);
				again = true;	/* start the next one */
			}
		}
		for (i = 0; i < comm->nranks; i++) {
			struct kcoll_conn *conn = comm->conns[i];
			struct list_head *lists[2];
			int l;

			if (!conn)
				continue;
			/* Credits a full send queue (or a channel without
			 * memory) held back. */
			if (conn->erx_due && conn->state == KCOLL_CONN_UP)
				kcoll_engine_eager_credit(conn);
			/* An answer to a peer's ASK, held back the same way
			 * or until our operation is done. */
			if (conn->sig_reply_due)
				kcoll_sig_reply(conn);
			lists[0] = &conn->k[KCOLL_KIND_P2P].p2p_sends;
			lists[1] = &conn->k[KCOLL_KIND_P2P].p2p_recvs;
			for (l = 0; l < 2; l++) {
				/* Per direction, in order: only the head runs. */
				op = list_first_entry_or_null(lists[l],
							      struct kcoll_task,
							      node);
				if (!op)
					continue;
				if (!op->finished && !op->error)
					kcoll_op_progress(op);
				if ((op->finished || op->error) &&
				    kcoll_op_quiet(op)) {
					kcoll_op_complete(op);
					again = true;
				}
			}
		}
	} while (again);

	/* Failed ops queued behind the head never start: finish them too
	 * once they reach the head (above). Failed P2P ops that are not at
	 * the head cannot have posted anything either. */
	list_for_each_entry_safe(op, tmp, &comm->ops, all) {
		if (op->error && !op->started && kcoll_op_quiet(op) &&
		    op->kind == KCOLL_KIND_P2P)
			kcoll_op_complete(op);
	}
}

/*
 * Does @op still need @conn's peer: its signature, or a transfer with it
 * in this or a later phase? (A peer that finished its part and left is
 * no failure for an operation that has everything it needs from it.)
 */
static bool kcoll_op_needs_peer(struct kcoll_task *op, struct kcoll_conn *conn)
{
	struct kcoll_phase ph;
	u32 i, peer = conn->peer;

	if (op->finished || kcoll_peer_finished(conn, op))
		return false;
	if (op->kind == KCOLL_KIND_P2P)
		return op->args.root == peer;
	if (!op->started || !kcoll_seq_before(op->seq, conn->sig_next))
		return true;
	for (i = op->phase; i < op->nphases; i++) {
		if (i == op->phase && op->phase_open) {
			ph = op->ph;
			if (ph.has_send && ph.send.peer == peer &&
			    !(op->send_done_any && op->send_done == op->send_total))
				return true;
			if (ph.has_recv && ph.recv.peer == peer &&
			    !(op->recv_landed_any && op->recv_done == op->recv_total))
				return true;
			continue;
		}
		kcoll_sched_phase(&op->args, i, &ph);
		if ((ph.has_send && ph.send.peer == peer) ||
		    (ph.has_recv && ph.recv.peer == peer))
			return true;
	}
	return false;
}

/*
 * @conn died: everything it carried is gone and the communicator cannot
 * start anything new; operations that still need the peer fail (their
 * ABORTs name the lost rank, so peers that only receive from it learn of
 * it too). Must hold comm->lock.
 */
void kcoll_engine_conn_lost(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_grant *g, *tmp;
	struct kcoll_sig *s, *stmp;
	struct kcoll_task *op;
	int k;

	lockdep_assert_held(&comm->lock);
	if (!comm->error) {
		comm->error = conn->error ?: -ECONNRESET;
		comm->lost_rank = conn->peer + 1;
	}
	if (!comm->shutting_down)
		kcoll_nl_peer_lost(comm, conn->peer, conn->error ?: -ECONNRESET);
	/* With nothing in flight the loss still explains every later
	 * refusal; a failing operation's report replaces this one. */
	if (!comm->report.error) {
		comm->report.error = comm->error;
		comm->report.reason = comm->error == -ETIMEDOUT ?
				      KCOLL_REPORT_TIMEOUT :
				      KCOLL_REPORT_PEER_LOST;
		comm->report.peer = comm->lost_rank - 1;
		comm->report.seq = comm->coll_seq;
	}
	/* Operations that are done with that peer may still finish. */
	list_for_each_entry(op, &comm->ops, all)
		if (kcoll_op_needs_peer(op, conn))
			kcoll_op_fail(op, comm->error);
	/* Grant MRs still valid go once the QPs are drained. */
	kcoll_gmr_conn_lost(conn);
	for (k = 0; k < KCOLL_KIND_NR; k++) {
		list_for_each_entry_safe(g, tmp, &conn->k[k].out, node) {
			list_del(&g->node);
			g->op->grants_out--;
			kcoll_xpose_revoke(g->xid);
			kfree(g);
		}
		conn->k[k].nr_out = 0;
		conn->slot_busy = 0;
		list_for_each_entry_safe(g, tmp, &conn->k[k].in, node) {
			list_del(&g->node);
			kfree(g);
		}
	}
	list_for_each_entry_safe(s, stmp, &conn->sigs, node) {
		list_del(&s->node);
		kfree(s);
	}
}

/* Fail every op of @comm. Must hold comm->lock. */
void kcoll_engine_fail_all(struct kcoll_comm *comm, int err)
{
	struct kcoll_task *op;

	lockdep_assert_held(&comm->lock);
	list_for_each_entry(op, &comm->ops, all)
		kcoll_op_fail(op, err);
}

/*
 * The comm's connections are destroyed (drained): no completion will come
 * for anything. Complete every op. Must hold comm->lock.
 */
void kcoll_engine_force_reap(struct kcoll_comm *comm)
{
	struct kcoll_task *op, *tmp;

	lockdep_assert_held(&comm->lock);
	list_for_each_entry_safe(op, tmp, &comm->ops, all) {
		if (!op->error)
			op->error = comm->error ?: -ECANCELED;
		op->grants_out = 0;
		op->writes_inflight = 0;
		op->gmrs = 0;
		kcoll_op_complete(op);
	}
}

/* ------------------------------------------------------------------ */
/* Issue                                                                */
/* ------------------------------------------------------------------ */

static bool kcoll_is_float(u8 dtype)
{
	return dtype == KCOLL_DTYPE_FP16 || dtype == KCOLL_DTYPE_BF16 ||
	       dtype == KCOLL_DTYPE_FP32 || dtype == KCOLL_DTYPE_FP64;
}

/* Set up buffer @which of @op: a view of a registration, or pinned now. */
static int kcoll_op_buf(struct kcoll_task *op, int which, u64 addr, u32 handle,
			u64 elems, bool writable)
{
	struct kcoll_comm *comm = op->comm;
	struct kcoll_buf *b = &op->bufs[which];
	struct kcoll_mem *mem;
	size_t len;
	int err = 0;

	if (check_mul_overflow((size_t)elems, op->esize, &len))
		return -EOVERFLOW;
	if (!len)
		return 0;
	if (handle) {
		size_t delta;

		mem = kcoll_mem_get(op->req->ctx, comm, handle, addr, len,
				    &err);
		if (!mem)
			return err;
		delta = addr - mem->addr;
		*b = mem->buf;
		b->off0 = mem->buf.off0 + delta;
		b->vaddr = mem->buf.vaddr + delta;
		b->len = len;
		op->mems[which] = mem;
		return 0;
	}
	err = kcoll_buf_pin_user(b, addr, len, writable);
	if (err || op->unreg)
		return err;
	return kcoll_buf_register(b, comm);
}

static int kcoll_op_prepare(struct kcoll_task *op, const struct kcoll_sqe *sqe)
{
	struct kcoll_comm *comm = op->comm;
	struct kcoll_sched_args *a = &op->args;
	u64 scount, rcount, tcount, n = comm->nranks;
	bool p2p = op->kind == KCOLL_KIND_P2P;
	size_t tlen;
	int err;

	op->dtype = sqe->dtype;
	op->redop = sqe->redop;
	op->prio = sqe->prio;		/* <= KCOLL_PRIO_MAX: checked at submit */
	a->opcode = sqe->opcode;
	a->redop = sqe->redop;
	a->rank = comm->rank;
	a->nranks = comm->nranks;
	a->count = sqe->count;
	a->root = (sqe->opcode == KCOLL_OP_REDUCE ||
		   sqe->opcode == KCOLL_OP_BROADCAST || p2p) ? sqe->peer : 0;
	if (sqe->opcode == KCOLL_OP_BARRIER) {
		op->esize = 1;
	} else {
		op->esize = kcoll_dtype_size(sqe->dtype);
		if (!op->esize)
			return -EINVAL;
	}
	if (sqe->redop) {
		if (sqe->redop == KCOLL_REDOP_AVG && !kcoll_is_float(sqe->dtype))
			return -EINVAL;
		op->reduce = kcoll_reduce_active(sqe->dtype, sqe->redop);
		if (!op->reduce)
			return -EINVAL;
	}
	if (a->root >= n || (p2p && a->root == comm->rank))
		return -EINVAL;
	/* Whole-buffer sizes must fit comfortably in size_t bytes. */
	if (sqe->count > (U64_MAX >> 16) / n / op->esize)
		return -EOVERFLOW;

	switch (sqe->opcode) {
	case KCOLL_OP_ALLREDUCE:
	case KCOLL_OP_ALLTOALL:
		a->in_place = sqe->send_addr == sqe->recv_addr;
		break;
	case KCOLL_OP_REDUCE:
	case KCOLL_OP_BROADCAST:
		a->in_place = a->root == comm->rank &&
			      sqe->send_addr == sqe->recv_addr;
		break;
	case KCOLL_OP_ALLGATHER:
		a->in_place = sqe->send_addr ==
			      sqe->recv_addr + comm->rank * sqe->count * op->esize;
		break;
	case KCOLL_OP_REDUCE_SCATTER:
		a->in_place = sqe->recv_addr ==
			      sqe->send_addr + comm->rank * sqe->count * op->esize;
		break;
	default:
		a->in_place = false;
	}
	/* Same inputs on every rank, same choice (kcoll_tune.c). */
	if (!p2p)
		a->algo = kcoll_tune_choose(a->opcode, a->nranks,
					    sqe->count * op->esize,
					    &comm->model);
	err = kcoll_sched_check(a);
	if (err)
		return err;

	scount = kcoll_sched_send_count(a);
	rcount = kcoll_sched_recv_count(a);
	tcount = kcoll_sched_tmp_count(a);
	/*
	 * Registering costs a device round trip per buffer, more than a
	 * small operation's transfers: small ones (and every one of a
	 * communicator without peers through the NIC) go unregistered.
	 */
	op->unreg = !comm->remote_peers ||
		    (u64)max3(scount, rcount, tcount) * op->esize <=
		    KCOLL_SMALL_BYTES;
	err = kcoll_op_buf(op, KCOLL_SBUF_SEND, sqe->send_addr, sqe->send_mr,
			   scount,
			   a->in_place && sqe->opcode == KCOLL_OP_REDUCE_SCATTER);
	if (err)
		return err;
	err = kcoll_op_buf(op, KCOLL_SBUF_RECV, sqe->recv_addr, sqe->recv_mr,
			   rcount, true);
	if (err)
		return err;
	if (tcount) {
		if (check_mul_overflow((size_t)tcount, op->esize, &tlen))
			return -EOVERFLOW;
		err = kcoll_buf_alloc(&op->bufs[KCOLL_SBUF_TMP], tlen,
				      comm->quota);
		if (err || op->unreg)
			return err;
		err = kcoll_buf_register(&op->bufs[KCOLL_SBUF_TMP], comm);
	}
	return err;
}

/* The .issue of every collective opcode: runs in the submitting task. */
void kcoll_coll_issue(struct kcoll_req *req)
{
	const struct kcoll_sqe *sqe = &req->sqe;
	struct kcoll_comm *comm;
	struct kcoll_conn *conn;
	struct kcoll_task *op;
	int err;

	comm = kcoll_ctx_comm_get(req->ctx, sqe->comm_id);
	if (!comm) {
		kcoll_req_complete(req, -ENOENT);
		return;
	}
	op = kzalloc(sizeof(*op), GFP_KERNEL_ACCOUNT);
	if (!op) {
		err = -ENOMEM;
		goto out_put;
	}
	op->req = req;
	op->comm = comm;
	op->t_submit = ktime_get_ns();
	op->report_peer = ~0U;
	op->timeout_ms = sqe->timeout_ms == KCOLL_TIMEOUT_NONE ? 0 :
			 sqe->timeout_ms ?: kcoll_op_timeout_ms();
	if (op->timeout_ms)
		op->deadline = (jiffies + msecs_to_jiffies(op->timeout_ms)) ?: 1;
	op->kind = (sqe->opcode == KCOLL_OP_SEND ||
		    sqe->opcode == KCOLL_OP_RECV) ? KCOLL_KIND_P2P :
						    KCOLL_KIND_COLL;
	INIT_LIST_HEAD(&op->node);
	INIT_LIST_HEAD(&op->all);
	/*
	 * From the checks to the queueing, nothing takes the comm's device
	 * away (its removal and the comm's destroy wait on dev_sem): what
	 * prepare registers is queued with the op, where they find it, or
	 * released here.
	 */
	down_read(&comm->dev_sem);
	/*
	 * A dead comm fails before anything is pinned. A hint, without
	 * comm->lock (one mutex round trip less per submission): the
	 * check under the lock below decides, and a registration on a
	 * device gone meanwhile fails in kcoll_buf_register().
	 */
	if (READ_ONCE(comm->error) || READ_ONCE(comm->shutting_down) ||
	    READ_ONCE(comm->aborted)) {
		err = READ_ONCE(comm->aborted) ? -ECANCELED :
		      READ_ONCE(comm->error) ?: -ECANCELED;
		goto out_unlock_dev;
	}
	err = kcoll_op_prepare(op, sqe);
	if (err)
		goto out_unlock_dev;

	op->bytes = (u64)sqe->count * op->esize;
	mutex_lock(&comm->lock);
	err = kcoll_comm_usable_locked(comm);
	if (err) {
		mutex_unlock(&comm->lock);
		goto out_unlock_dev;
	}
	if (op->kind == KCOLL_KIND_COLL) {
		op->seq = comm->coll_seq++;
		list_add_tail(&op->node, &comm->colls);
	} else {
		conn = comm->conns[op->args.root];
		if (sqe->opcode == KCOLL_OP_SEND) {
			op->seq = conn->k[KCOLL_KIND_P2P].p2p_send_seq++;
			list_add_tail(&op->node,
				      &conn->k[KCOLL_KIND_P2P].p2p_sends);
		} else {
			op->seq = conn->k[KCOLL_KIND_P2P].p2p_recv_seq++;
			list_add_tail(&op->node,
				      &conn->k[KCOLL_KIND_P2P].p2p_recvs);
		}
	}
	list_add_tail(&op->all, &comm->ops);
	comm->nr_ops++;
	if (op->deadline)
		kcoll_timeout_arm(comm, op->deadline);
	kcoll_tune_count(kcoll_sched_algo(&op->args));
	kcoll_engine_reap(comm);
	mutex_unlock(&comm->lock);
	up_read(&comm->dev_sem);
	kcoll_comm_put(comm);
	return;

out_unlock_dev:
	/* Its MRs die while the device is certainly there. */
	kcoll_op_free(op);
	up_read(&comm->dev_sem);
out_put:
	kcoll_comm_put(comm);
	kcoll_req_complete(req, err);
}
