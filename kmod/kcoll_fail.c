// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll collective engine, failure: ABORTs to and from peers, timeouts and
 * the report of which ranks an operation waited for, stalled send queues,
 * lost connections, and the end of every operation of a failing
 * communicator.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "kcoll.h"
#include "kcoll_types.h"
#include "kcoll_coll.h"
#include "kcoll_conn.h"
#include "kcoll_xport.h"
#include "kcoll_sysfs.h"
#include "kcoll_nl.h"
#include "kcoll_engine.h"
#include "kcoll_gpu.h"

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

	/*
	 * A peer that said BYE reads nothing more; one that our BYE (a
	 * revoke's, or a leaving comm's) has not reached yet (a full send
	 * queue: it goes with the next send completion) must get that
	 * first, not an ABORT, whose own full queue would end the
	 * connection and flush the BYE unsent. After the BYE no ABORT is
	 * needed: it ends what needs us there.
	 */
	if (!conn || conn->state != KCOLL_CONN_UP || conn->bye ||
	    ((op->comm->revoked || op->comm->byes_begun) && !conn->bye_sent))
		return;
	kcoll_msg_init(op, &m, KCOLL_MSG_ABORT, conn->peer);
	m.status = cpu_to_le32(-op->error);
	/*
	 * Which rank is lost, if any (+1; 0: none): see kcoll_abort_lost().
	 * Failed because a peer went away (its own ABORT told us, before its
	 * disconnect did): that peer, so that our peers blame it and not us.
	 */
	if (!lost && op->report_peer != ~0U && kcoll_err_is_loss(op->error))
		lost = op->report_peer + 1;
	m.root = cpu_to_le32(lost);
	/*
	 * A full SQ means the peer is not draining: it will die or the
	 * comm will be torn down; either resolves what we wait for. The
	 * kill waits for the reap that ends this event: an operation fails
	 * inside walks of the lists a kill frees (the SIGs queued on this
	 * connection, kcoll_op_check_sigs()), and kills would nest through
	 * kcoll_engine_conn_lost() for every connection so stuck.
	 */
	if (kcoll_conn_send_msg(conn, &m) && !conn->kill_due) {
		conn->kill_due = -EIO;
		op->comm->kills_due++;
	}
}

/*
 * How long a failed operation may wait for its posted writes and the
 * peers' writes into its grants: the RC transport's own limit (the first
 * try and 7 retries of the local ACK timeout @ack, what the QPs were
 * connected with) and a second, at least 10 s (a loaded host delays ACKs
 * for seconds and loses nothing). A transfer that is neither done nor
 * failed by then never will be (a peer gone without a trace, a provider
 * that stopped retrying; both seen with rxe): kcoll_engine_timeout_work()
 * closes the op's connections, which flushes them. No upper bound: until
 * 2026-12-07 it stopped at 120 s, shorter than RC's own budget from
 * ack_timeout 22 up, and a healthy connection retrying a lost packet was
 * closed as stalled.
 */
static unsigned long kcoll_drain_jiffies(u32 ack)
{
	u64 ms = div_u64((4096ULL << min(ack, 31u)) * 8, NSEC_PER_MSEC);

	return msecs_to_jiffies(max_t(u64, ms + MSEC_PER_SEC, 10000));
}

/*
 * Tell @op's peers it failed. Over several QPs an ABORT (lane 0) could
 * overtake our WRITEs on the other lanes, and the peer, having forgotten
 * the grants they fill, would take them for stray data: to such peers the
 * ABORT goes once our writes have completed (@deferred: that moment).
 */
void kcoll_op_abort_peers(struct kcoll_task *op, bool deferred)
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
void kcoll_op_fail(struct kcoll_task *op, int err)
{
	struct kcoll_comm *comm = op->comm;

	lockdep_assert_held(&comm->lock);
	if (op->error || op->finished)
		return;
	op->error = err;
	if (!op->started)
		return;		/* nothing sent or granted yet */
	kcoll_op_drain_arm(op);
	kcoll_op_abort_peers(op, false);
}

/*
 * Failed @op starts its drain clock (op->drain_by), if it is not quiet.
 * A collective behind the head waits for the head first: a peer that has
 * not started it (its own older ones still run) answers its grants with
 * an ABORT only then, which is no sign of a connection that stopped.
 * Must hold comm->lock.
 */
void kcoll_op_drain_arm(struct kcoll_task *op)
{
	if (!op->error || op->drain_by || kcoll_op_quiet(op) ||
	    (op->kind == KCOLL_KIND_COLL && !kcoll_op_is_head(op)))
		return;
	/* The largest timeout its QPs were connected with (the peers'
	 * QPs, which write into its grants, take the same knob), not the
	 * knob's value now: raised to 31, that would be 19 hours. */
	op->drain_by = (jiffies +
			kcoll_drain_jiffies(atomic_read(&op->comm->ack_max) ?:
					    kcoll_ack_timeout())) ?: 1;
	kcoll_timeout_arm(op->comm, op->drain_by);
}

/* The same, @peer's doing (its ABORT, its differing signature). */
void kcoll_op_fail_from(struct kcoll_task *op, int err, u32 peer)
{
	if (!op->error && !op->finished)
		op->report_peer = peer;
	kcoll_op_fail(op, err);
}

/*
 * How far @op has come: its phase, then the bytes of that phase sent and
 * received, and of the next one's sent and received ahead (each phase is
 * far below 2^38 bytes). Equal values 50 ms apart mean it stalled. Must
 * hold comm->lock.
 */
u64 kcoll_op_mark(const struct kcoll_task *op)
{
	return ((u64)op->phase << 40) + op->send_done + op->recv_done +
	       op->ahead_done + op->ahead_sent + op->early_next;
}

/* The error an ABORT carries, as this rank reports it. */
int kcoll_abort_status(const struct kcoll_wire_msg *m)
{
	u32 status = le32_to_cpu(m->status);
	int err;

	/* Not an errno at all (no negation of INT_MIN), or the peer's
	 * operation was cancelled (its communicator or process went
	 * away): for us the peer is lost. */
	if (!status || status > MAX_ERRNO)
		return -ECONNRESET;
	err = -(int)status;
	if (err == -ECANCELED)
		return -ECONNRESET;
	/* The kernel's own codes (-ERESTARTSYS and up) never reach user
	 * space, and no peer of ours sends one: a peer that does lies. */
	if (err <= -ERESTARTSYS)
		return -EPROTO;
	return err;
}

/*
 * An ABORT from @conn's peer naming a lost rank: that rank is gone for us
 * too, even if its disconnect never reached us (RC notices a dead peer
 * only when sending to it; a rank that only receives from it would wait
 * forever). A peer with the key may name any rank, and no check here can
 * tell a hung rank from a healthy one, so the log says who named it.
 */
void kcoll_abort_lost(struct kcoll_conn *conn,
		      const struct kcoll_wire_msg *m)
{
	struct kcoll_comm *comm = conn->comm;
	u32 lost = le32_to_cpu(m->root);

	if (!lost || lost > comm->nranks || lost - 1 == comm->rank)
		return;
	/* A peer that timed out waiting for that rank says so. */
	if (comm->conns[lost - 1] &&
	    comm->conns[lost - 1]->state == KCOLL_CONN_UP) {
		pr_info_ratelimited("comm %llx rank %u: rank %u reports rank %u lost\n",
				    comm->uid, comm->rank, conn->peer,
				    lost - 1);
		kcoll_conn_kill(comm->conns[lost - 1],
				kcoll_abort_status(m) == -ETIMEDOUT ?
				-ETIMEDOUT : -ECONNRESET);
	}
}

/*
 * Whom an ABORT from @conn's peer blames: the rank it names as lost, or
 * the sender itself. One that names us is talking to us, so it blames
 * its sender, as kcoll_abort_lost() ignores it: otherwise our report
 * would name ourselves, and the ABORTs we pass on would tell every peer
 * that we are lost.
 */
u32 kcoll_abort_culprit(struct kcoll_conn *conn,
			const struct kcoll_wire_msg *m)
{
	u32 lost = le32_to_cpu(m->root);

	if (lost && lost <= conn->comm->nranks &&
	    lost - 1 != conn->comm->rank)
		return lost - 1;
	return conn->peer;
}

/* Has @conn's peer sent its signature (or ABORT) for collective @op? */
static bool kcoll_op_sig_seen(struct kcoll_task *op, struct kcoll_conn *conn)
{
	struct kcoll_sig *s;

	if (kcoll_sig_confirmed(op, conn))
		return true;
	list_for_each_entry(s, &conn->sigs, node)
		if (s->seq == op->seq)
			return true;
	return false;
}

/* Callers add each rank once: the counting pass (@cap 0) cannot compare. */
static void kcoll_missing_add(u32 *out, u32 cap, u32 *n, u32 rank)
{
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
	bool recv_missing;
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
	recv_missing = ph->has_recv && !(op->recv_landed_any &&
					 op->recv_done == op->recv_total);
	if (recv_missing)
		kcoll_missing_add(out, cap, &n, ph->recv.peer);
	/* A pairwise phase's one peer is one rank missing, not two. */
	if (ph->has_send && !(op->send_done_any &&
			      op->send_done == op->send_total) &&
	    !(recv_missing && ph->send.peer == ph->recv.peer))
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

	/* Waiting for its own GPU stream, not for a peer. */
	if (kcoll_gpu_timeout(op))
		return;
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
void kcoll_timeout_arm(struct kcoll_comm *comm, unsigned long deadline)
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
 * budgets of the QP's own ack timeout (30 s at least) is closed, so its
 * operations fail now, naming the peer, rather than at their own timeout
 * (10 min by default).
 */
static unsigned long kcoll_stall_jiffies(const struct kcoll_lane *lane)
{
	/* Set before the QP connected (kcoll_lane_set_ack_timeout()),
	 * so before anything was posted on it. */
	return 3 * kcoll_drain_jiffies(READ_ONCE(lane->ack_timeout));
}

/* @lane's send queue went from empty to busy. Must hold comm->lock. */
void kcoll_engine_sq_busy(struct kcoll_lane *lane)
{
	struct kcoll_comm *comm = lane->conn->comm;

	lockdep_assert_held(&comm->lock);
	lane->sent_at = jiffies;
	kcoll_timeout_arm(comm, lane->sent_at + kcoll_stall_jiffies(lane));
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
			at = lane->sent_at + kcoll_stall_jiffies(lane);
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
		/* A lazy op's clock runs from when it is the head. */
		if (op->lazy && op->was_head && !op->lazy_due && !op->error &&
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
		/* An eager point-to-point receive still waiting: it
		 * grants too (kcoll_p2p_waited()). */
		if (op->p2p_grant_at && !op->p2p_grant_due && !op->error &&
		    !op->finished && !op->recv_landed_any) {
			if (time_after_eq(now, op->p2p_grant_at)) {
				op->p2p_grant_due = true;
				kcoll_stat_add(KCOLL_STAT_P2P_WAITS, 1);
				any = true;
			} else if (!next ||
				   time_before(op->p2p_grant_at, next)) {
				next = op->p2p_grant_at;
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
void kcoll_report_set(struct kcoll_task *op, u64 ns)
{
	struct kcoll_report *r = &op->comm->report;

	kcoll_op_reason(op);
	kfree(r->missing);
	r->user_data = op->user_data;
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

/*
 * Does @op still need @conn's peer: its signature, or a transfer with it
 * in this or a later phase? (A peer that finished its part and left is
 * no failure for an operation that has everything it needs from it.) A
 * broadcast or reduce needs no signature from a lazy peer: it depends on
 * the ranks it exchanges data with, whose own operations fail (and ABORT)
 * if the rank lost was theirs to wait for (kcoll_sched_lazy()); an
 * all-dependent operation needs every rank, transitively.
 */
static bool kcoll_op_needs_peer(struct kcoll_task *op, struct kcoll_conn *conn)
{
	struct kcoll_phase ph;
	u32 i, peer = conn->peer;

	if (op->finished || kcoll_peer_finished(conn, op))
		return false;
	if (op->kind == KCOLL_KIND_P2P) {
		/* Done with the peer: the message moved (all of it landed
		 * here, or it was sent), or it waits in our slot. */
		if (op->args.root != peer)
			return false;
		if (op->args.opcode == KCOLL_OP_RECV)
			return !(op->started && op->phase_open &&
				 op->recv_landed_any &&
				 op->recv_done == op->recv_total) &&
			       !kcoll_eager_p2p_here(conn, op->seq);
		return !(op->started && op->phase_open &&
			 op->send_done_any && op->send_done == op->send_total);
	}
	if (!op->started)
		return true;
	if (!kcoll_sig_confirmed(op, conn) &&
	    !(op->lazy && kcoll_conn_lazy(conn) &&
	      !kcoll_sched_all_dependent(&op->args)))
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
		/* Its token already came, inside a later one's. */
		if (kcoll_op_tok_covered(op, i))
			ph.has_recv = false;
		if ((ph.has_send && ph.send.peer == peer) ||
		    (ph.has_recv && ph.recv.peer == peer))
			return true;
	}
	return false;
}

/*
 * Free what the peer sent @conn that waits to be used: grants not yet
 * filled, SIGs and ABORTs not yet checked. At its loss, and at its
 * shutdown (what came after a loss, or on a connection never up, would
 * stay otherwise). Must hold comm->lock.
 */
void kcoll_engine_conn_forget(struct kcoll_conn *conn)
{
	struct kcoll_grant *g, *tmp;
	struct kcoll_sig *s, *stmp;
	int k;

	lockdep_assert_held(&conn->comm->lock);
	for (k = 0; k < KCOLL_KIND_NR; k++) {
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
	struct kcoll_task *op;
	int k;

	lockdep_assert_held(&comm->lock);
	if (!comm->error) {
		comm->error = conn->error ?: -ECONNRESET;
		comm->lost_rank = conn->peer + 1;
	}
	/* Revoked: the revoke's event says it; its BYEs end connections. */
	if (!comm->shutting_down && !comm->revoked)
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
	/* Operations that are done with that peer may still finish. One
	 * that failed already is not walked: a shutdown kills every
	 * connection, and each walk may cover every phase (8190 for a ring
	 * of 4096 ranks), all under comm->lock. */
	list_for_each_entry(op, &comm->ops, all)
		if (!op->error && kcoll_op_needs_peer(op, conn))
			kcoll_op_fail(op, comm->error);
	/* Nothing of the peer's lands any more: no grant of ours lets it
	 * write, nor does anything else the transport exposed (through the
	 * NIC its grant MRs are deregistered or invalidated now, through
	 * the registration QP, which does not depend on the connection:
	 * kcoll_gmr_conn_lost()). */
	for (k = 0; k < KCOLL_KIND_NR; k++) {
		list_for_each_entry_safe(g, tmp, &conn->k[k].out, node) {
			list_del(&g->node);
			g->op->grants_out--;
			if (g->len)
				g->op->grants_mem--;
			conn->xp->unexpose(conn, g);
			kfree(g);
		}
		conn->k[k].nr_out = 0;
	}
	kcoll_engine_conn_forget(conn);
	if (conn->xp->lost)
		conn->xp->lost(conn);
	conn->slot_busy = 0;
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
		/*
		 * A broadcast that returned and then had every token in
		 * succeeded: it only waited for an older one's CQE.
		 */
		if (!op->error && !(op->returned && op->finished))
			op->error = comm->error ?: -ECANCELED;
		op->grants_out = 0;
		op->grants_mem = 0;
		op->writes_inflight = 0;
		/* Its grant MRs went with the connections, each detached,
		 * so none is left on op->gmr_due (kcoll_conn_shutdown()). */
		op->gmrs = 0;
		kcoll_op_complete(op);
	}
}
