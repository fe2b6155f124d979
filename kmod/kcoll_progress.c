// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll collective engine, progress: phases opened and closed in schedule
 * order, data landed (copied or reduced, on the CPU in bounded FPU
 * sections), sends held back for higher priorities, completion, and
 * kcoll_engine_reap(), which every event ends with.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <asm/fpu/api.h>

#include "kcoll.h"
#include "kcoll_types.h"
#include "kcoll_conn.h"
#include "kcoll_mem.h"
#include "kcoll_reg.h"
#include "kcoll_coll.h"
#include "kcoll_comm.h"
#include "kcoll_xport.h"
#include "kcoll_ring.h"
#include "kcoll_sysfs.h"
#include "kcoll_stats.h"
#include "kcoll_gmr.h"
#include "kcoll_dmabuf.h"
#include "kcoll_ib.h"
#include "kcoll_engine.h"
#include "kcoll_reduce.h"
#include "kcoll_gpu.h"

/*
 * Elements per kernel_fpu_begin() section: preemption is off inside one,
 * so a chunk (up to 4 MiB) or an AVG finish over a whole buffer is cut
 * into pieces of 64 KiB, a few microseconds each for 4- and 8-byte
 * types. fp16, bf16 and fp8 convert each element through fp32, scalar
 * where the CPU lacks the instructions: 64 KiB of fp8 took up to 0.8 ms
 * (a review's measurement, SSE2 path), so they go 4096 elements at a
 * time (tens of microseconds). 1-byte integers need no conversion and
 * keep 64 KiB.
 */
#define KCOLL_FPU_BYTES		(64u << 10)
#define KCOLL_FPU_NARROW_ELEMS	4096u

static size_t kcoll_fpu_elems(const struct kcoll_task *op)
{
	switch (op->dtype) {
	case KCOLL_DTYPE_FP16:
	case KCOLL_DTYPE_BF16:
	case KCOLL_DTYPE_FP8_E4M3:
	case KCOLL_DTYPE_FP8_E5M2:
		return KCOLL_FPU_NARROW_ELEMS;
	default:
		return KCOLL_FPU_BYTES / op->esize;
	}
}

/*
 * dst[i] = dst[i] (op) src[i] for @n elements, FPU section by section,
 * with a chance to reschedule between them: a step may be as large as
 * RLIMIT_MEMLOCK lets a user pin, and it runs under comm->lock.
 */
static void kcoll_cpu_reduce(struct kcoll_task *op, u8 *dst, const u8 *src,
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
		cond_resched();
	}
}

/* The AVG finish: divide by the rank count. */
static void kcoll_cpu_avg(struct kcoll_task *op, u8 *p, size_t n)
{
	size_t step = kcoll_fpu_elems(op), k;

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
 * memmove() of @bytes, a MiB at a time with a chance to reschedule in
 * between (as kcoll_cpu_reduce()); regions may overlap, so the pieces go
 * in the order memmove() would copy them: from the end when @dst lies
 * inside the source.
 */
#define KCOLL_COPY_STEP		(1u << 20)

static void kcoll_cpu_copy(struct kcoll_task *op, u8 *dst, const u8 *src,
			   size_t bytes)
{
	size_t k;

	if (dst <= src || dst >= src + bytes) {
		while (bytes) {
			k = min_t(size_t, bytes, KCOLL_COPY_STEP);
			memmove(dst, src, k);
			dst += k;
			src += k;
			bytes -= k;
			cond_resched();
		}
		return;
	}
	/* After the last piece too: a schedule may run thousands of small
	 * copies in a row (Bruck's unpack phases). */
	while (bytes) {
		k = min_t(size_t, bytes, KCOLL_COPY_STEP);
		bytes -= k;
		memmove(dst + bytes, src + bytes, k);
		cond_resched();
	}
}

const struct kcoll_exec kcoll_exec_cpu = {
	.name = "cpu",
	.copy = kcoll_cpu_copy,
	.reduce = kcoll_cpu_reduce,
	.avg = kcoll_cpu_avg,
};

/* A CPU step on memory the CPU must not touch: unreachable by design
 * (kcoll_op_nocpu()), so a bug if it happens; the data stays untouched. */
static void kcoll_nocpu_touch(struct kcoll_task *op)
{
	kcoll_stat_add(KCOLL_STAT_NOCPU_TOUCH, 1);
	WARN_ONCE(1, "kcoll: a CPU step on NO_CPU memory (opcode %u)\n",
		  op->args.opcode);
	kcoll_op_fail(op, -EOPNOTSUPP);
}

static void kcoll_nocpu_copy(struct kcoll_task *op, u8 *dst, const u8 *src,
			     size_t bytes)
{
	kcoll_nocpu_touch(op);
}

static void kcoll_nocpu_reduce(struct kcoll_task *op, u8 *dst, const u8 *src,
			       size_t n)
{
	kcoll_nocpu_touch(op);
}

static void kcoll_nocpu_avg(struct kcoll_task *op, u8 *p, size_t n)
{
	kcoll_nocpu_touch(op);
}

const struct kcoll_exec kcoll_exec_nocpu = {
	.name = "nocpu",
	.copy = kcoll_nocpu_copy,
	.reduce = kcoll_nocpu_reduce,
	.avg = kcoll_nocpu_avg,
};

/*
 * @len bytes of the current phase's receive, at byte @off of it, came into
 * staging at @in: reduce them into the destination, or copy them there.
 */
void kcoll_op_land(struct kcoll_task *op, const u8 *in, size_t off,
		   size_t len)
{
	const struct kcoll_srecv *rv = &op->ph.recv;
	u8 *dst = kcoll_region(op, &rv->dst) + off;
	u64 t = ktime_get_ns();

	if (rv->reduce) {
		const u8 *opnd = kcoll_region(op, &rv->operand) + off;

		if (opnd != dst)
			op->exec->copy(op, dst, opnd, len);
		op->exec->reduce(op, dst, in, len / op->esize);
	} else {
		op->exec->copy(op, dst, in, len);
	}
	op->ns_land += ktime_get_ns() - t;
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
bool kcoll_op_held(struct kcoll_task *op)
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

static void kcoll_phase_open(struct kcoll_task *op)
{
	struct kcoll_phase *ph = &op->ph;

	kcoll_sched_phase(&op->args, op->phase, ph);
	op->phase_open = true;
	op->t_phase = ktime_get_ns();
	op->t_first = 0;
	op->send_total = ph->has_send ? ph->send.cnt * op->esize : 0;
	op->recv_total = ph->has_recv ? ph->recv.cnt * op->esize : 0;
	op->send_posted = op->send_done = 0;
	op->recv_granted = op->recv_done = 0;
	op->send_posted_any = op->send_done_any = false;
	op->recv_granted_any = op->recv_landed_any = false;
	op->gpu_reduced = false;
	if (op->ahead == KCOLL_AHEAD_ON) {
		/* Granted while the phase before ran: its grants (g->phase)
		 * are this phase's now. */
		op->recv_granted = op->ahead_granted;
		op->recv_done = op->ahead_done;
		op->recv_granted_any = op->ahead_granted_any;
		op->recv_landed_any = op->ahead_landed_any;
	}
	op->ahead = KCOLL_AHEAD_UNDECIDED;
	op->ahead_granted = op->ahead_done = 0;
	op->ahead_granted_any = op->ahead_landed_any = false;
	if (op->sahead == KCOLL_AHEAD_ON) {
		/* Sent while the phase before ran: its writes still in
		 * flight (g->phase) complete as this phase's now. */
		op->send_posted = op->ahead_posted;
		op->send_done = op->ahead_sent;
		op->send_posted_any = op->ahead_posted_any;
		op->send_done_any = op->ahead_sent_any;
	}
	op->sahead = KCOLL_AHEAD_UNDECIDED;
	op->ahead_posted = op->ahead_sent = 0;
	op->ahead_posted_any = op->ahead_sent_any = false;
	op->early_stop = false;
	if (ph->has_send && op->phase < op->early_next) {
		/* Its eager transfer went while a phase before ran. */
		op->eager_sent = true;
		op->send_posted = op->send_done = op->send_total;
		op->send_posted_any = op->send_done_any = true;
	}
	if (ph->copy.cnt && op->nocpu) {
		/* Memory the CPU must not touch: the NIC copies it. */
		const struct kcoll_sregion *d = &ph->copy.dst, *s = &ph->copy.src;
		int err = 0;

		if (d->buf != s->buf || d->off != s->off)
			err = kcoll_nic_copy(op->comm, &op->bufs[d->buf],
					     d->off * op->esize,
					     &op->bufs[s->buf],
					     s->off * op->esize,
					     ph->copy.cnt * op->esize);
		if (err)
			kcoll_op_fail(op, err);
	} else if (ph->copy.cnt) {
		u8 *dst = kcoll_region(op, &ph->copy.dst);
		const u8 *src = kcoll_region(op, &ph->copy.src);

		if (dst != src)
			op->exec->copy(op, dst, src, ph->copy.cnt * op->esize);
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
 * The current phase's receive is an empty token (a broadcast's
 * confirmation, a barrier's) from a peer that has said BYE after
 * completing this collective: its completion says what the token would
 * have (it had its data, and its subtree's tokens), and the token itself
 * may have gone with its connection. So it counts as received.
 */
static bool kcoll_token_from_finished(struct kcoll_task *op)
{
	struct kcoll_conn *conn = kcoll_conn_of(op->comm, op->ph.recv.peer);

	return op->kind == KCOLL_KIND_COLL && conn &&
	       kcoll_peer_finished(conn, op);
}

/*
 * Does the current phase of @op wait on data that a peer which said BYE
 * after completing this collective owes it (its receive not all landed,
 * or a send, empty ones included, still waiting for the peer's grants or
 * an eager slot)? A rank that completed
 * it had sent us all its data and taken all of ours first, and nothing
 * lands from its connection any more: the BYE's watermark was a lie (or
 * its data's completions were dropped behind it, from another QP). The
 * operation would wait for its own timeout; it fails now, naming the
 * peer.
 */
static bool kcoll_op_stranded(struct kcoll_task *op, u32 *peer)
{
	const struct kcoll_phase *ph = &op->ph;
	struct kcoll_conn *conn;

	if (op->kind != KCOLL_KIND_COLL)
		return false;
	if (ph->has_recv && ph->recv.cnt &&
	    !(op->recv_landed_any && op->recv_done == op->recv_total)) {
		conn = kcoll_conn_of(op->comm, ph->recv.peer);
		if (conn && kcoll_peer_finished(conn, op)) {
			*peer = ph->recv.peer;
			return true;
		}
	}
	/* An empty send too (a barrier's or a confirmation's token): the
	 * peer had it before it completed (until 2026-12-05 only sends
	 * with data counted, and one owed a token waited). */
	if (ph->has_send &&
	    !(op->send_posted_any && op->send_posted >= op->send_total)) {
		conn = kcoll_conn_of(op->comm, ph->send.peer);
		if (conn && kcoll_peer_finished(conn, op)) {
			*peer = ph->send.peer;
			return true;
		}
	}
	return false;
}

/*
 * The phase of @op that just ended: its wait for the first byte to move
 * (a grant, a credit, forwarded data, the peer's data) and the rest.
 */
static void kcoll_op_time_phase(struct kcoll_task *op)
{
	u64 now = ktime_get_ns(), first = op->t_first ?: now;

	op->ns_wait += first - op->t_phase;
	op->ns_move += now - first;
}

/*
 * Where a collective that succeeded spent its time: added to its
 * communicator's, its device's and the node's profile (netlink STATS,
 * sysfs stats/time_*).
 */
static void kcoll_op_time_done(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	u64 now, v[KCOLL_NL_PROF_NR];

	if (op->kind != KCOLL_KIND_COLL || !op->finished || op->error ||
	    !op->t_start)
		return;
	now = ktime_get_ns();
	v[KCOLL_NL_PROF_OPS] = 1;
	v[KCOLL_NL_PROF_PHASES] = op->nphases;
	v[KCOLL_NL_PROF_TOTAL_NS] = now - op->t_submit;
	v[KCOLL_NL_PROF_QUEUED_NS] = op->t_start - op->t_submit;
	v[KCOLL_NL_PROF_WAIT_NS] = op->ns_wait;
	v[KCOLL_NL_PROF_MOVE_NS] = op->ns_move;
	v[KCOLL_NL_PROF_LAND_NS] = op->ns_land;
	v[KCOLL_NL_PROF_SIGS_NS] = op->t_finished - op->t_phases_end;
	v[KCOLL_NL_PROF_SETTLE_NS] = now - op->t_finished;
	kcoll_opstats_prof(&comm->stats, v);
	if (comm->dstats)
		kcoll_opstats_prof(comm->dstats, v);
	kcoll_opstats_prof(&kcoll_node_stats, v);
}

/* Run @op as far as it can go now. */
static void kcoll_op_progress(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	u32 i, peer;

	lockdep_assert_held(&comm->lock);
	/* A dma-buf its exporter took back (move_notify): no further step. */
	for (i = 0; i < KCOLL_SBUF_NR && !op->error; i++)
		if (op->mems[i] && kcoll_buf_revoked(&op->mems[i]->buf))
			kcoll_op_fail(op, -ENODEV);
	if (!op->started) {
		op->started = true;
		op->t_start = ktime_get_ns();
		op->nphases = kcoll_sched_nphases(&op->args);
		op->data_phases = kcoll_sched_data_phases(&op->args);
		if (!op->error && comm->error)	/* nothing sent yet */
			op->error = kcoll_comm_op_usable_locked(comm, op);
		if (op->error)
			return;
		if (comm->prio) {
			op->prio_dev = comm->prio;
			atomic_inc(&op->prio_dev->active[op->prio]);
			WRITE_ONCE(op->prio_dev->last[op->prio], jiffies);
		}
		/* Its lazy clock starts when it is the head
		 * (kcoll_engine_reap()). */
		if (op->kind == KCOLL_KIND_COLL &&
		    kcoll_sched_lazy(&op->args))
			op->lazy = true;
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
		if (op->lazy && kcoll_conn_lazy(conn) &&
		    !kcoll_sig_asked(conn, op->seq)) {
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
		kcoll_sig_ask_del(conn, op->seq);
		kcoll_op_check_sigs(op, conn);
	}
	if (op->error)
		return;
	if (op->lazy_due && !op->lazy_sent && op->sigs_sent == comm->nranks)
		kcoll_op_lazy_ask(op);
	/*
	 * Stream-ordered: no byte of its buffers is read or exposed before
	 * its stream got here (the SIGs above carry none).
	 */
	if (op->gpu && !kcoll_gpu_started(op))
		return;
	while (!op->error && op->phase < op->nphases) {
		if (!op->phase_open)
			kcoll_phase_open(op);
		if (op->ph.has_recv && !op->ph.recv.cnt &&
		    (kcoll_token_from_finished(op) ||
		     kcoll_op_tok_covered(op, op->phase)))
			op->recv_landed_any = true;
		else if (op->ph.has_recv)
			kcoll_op_grant(op);
		if (op->ph.has_send)
			kcoll_op_send(op);
		if (!op->error && kcoll_op_stranded(op, &peer)) {
			kcoll_op_fail_from(op, -ECONNRESET, peer);
			return;
		}
		kcoll_op_grant_ahead(op);
		kcoll_op_send_ahead(op);
		kcoll_op_send_early(op);
		if (!op->t_first && (op->send_posted_any ||
				     op->recv_landed_any))
			op->t_first = ktime_get_ns();
		/* Landed whole: the GPU reduces it (stream-ordered op). */
		if (op->gpu && !kcoll_gpu_phase(op))
			return;
		if (op->error || !kcoll_phase_done(op))
			return;
		/* Its landed grants end before their bytes are used. */
		if (!list_empty(&op->gmr_due))
			kcoll_gmr_flush_op(op);
		if (op->ph.avg_cnt && op->gpu) {
			if (!kcoll_gpu_avg(op))
				return;
		} else if (op->ph.avg_cnt) {
			op->exec->avg(op, kcoll_region(op, &op->ph.avg),
				      op->ph.avg_cnt);
		}
		kcoll_op_time_phase(op);
		op->phase_open = false;
		op->phase++;
	}
	if (op->error)
		return;
	if (!op->t_phases_end)
		op->t_phases_end = ktime_get_ns();
	if (op->kind == KCOLL_KIND_COLL && !kcoll_op_sigs_in(op)) {
		if (kcoll_op_sig_stranded(op, &peer))
			kcoll_op_fail_from(op, -ECONNRESET, peer);
		return;
	}
	op->finished = true;
	op->t_finished = ktime_get_ns();
}

/* @op's buffers go; @locked: under comm->lock (kcoll_mem_put_locked()). */
static void kcoll_op_release(struct kcoll_task *op, bool locked)
{
	int i;

	for (i = 0; i < KCOLL_SBUF_NR; i++) {
		if (op->mems[i]) {
			if (locked)
				kcoll_mem_put_locked(op->mems[i]);
			else
				kcoll_mem_put(op->mems[i]);
			op->mems[i] = NULL;
			memset(&op->bufs[i], 0, sizeof(op->bufs[i]));
		} else {
			kcoll_buf_release(&op->bufs[i]);
		}
	}
}

static void __kcoll_op_free(struct kcoll_task *op, bool locked)
{
	kcoll_op_release(op, locked);
	if (op->vec) {
		kvfree(op->vec);
		kcoll_quota_uncharge_bytes(op->vec_quota, op->vec_bytes);
	}
	bitmap_free(op->sig_seen);
	kvfree(op->pg);
	kfree(op->missing);
	kfree(op);
}

/* An op that never ran (its submission failed): not under comm->lock. */
void kcoll_op_free(struct kcoll_task *op)
{
	__kcoll_op_free(op, false);
}

/* An op that completed, under comm->lock. */
static void kcoll_op_free_locked(struct kcoll_task *op)
{
	lockdep_assert_held(&op->comm->lock);
	__kcoll_op_free(op, true);
}

/* @op's result and latency as its caller saw them, at every level. */
static void kcoll_op_count(struct kcoll_task *op, int res, u64 ns)
{
	struct kcoll_comm *comm = op->comm;

	kcoll_opstats_add(&comm->stats, op->bytes, res, ns);
	if (comm->dstats)
		kcoll_opstats_add(comm->dstats, op->bytes, res, ns);
	kcoll_opstats_add(&kcoll_node_stats, op->bytes, res, ns);
}

/*
 * @op no longer counts as active at its priority on its device
 * (kcoll_op_held()): it completed, or it returned and what is left of it
 * moves no data (a returned broadcast's tokens would otherwise hold every
 * lower priority's sends on the device back until its slowest peer
 * confirms). Its priority's burst clock restarts now.
 */
static void kcoll_op_prio_end(struct kcoll_task *op)
{
	if (!op->prio_dev)
		return;
	WRITE_ONCE(op->prio_dev->last[op->prio], jiffies);
	atomic_dec(&op->prio_dev->active[op->prio]);
	op->prio_dev = NULL;
}

void kcoll_op_complete(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	struct kcoll_req *req = op->req;
	u64 ns = ktime_get_ns() - op->t_submit;
	int res = op->error;
	u32 cflags = 0;

	if (op->returned) {
		/*
		 * Its caller has its CQE already: a failure now (a peer's
		 * signature differed, one was lost before confirming) goes
		 * with the next collective to complete, and is the report.
		 */
		comm->nr_returned--;
		if (!comm->nr_returned)
			wake_up_all(&comm->wait);	/* a destroy lingers */
		if (res < 0 && res != -ECANCELED) {	/* not abort, destroy */
			/*
			 * The report and the error the next CQE carries
			 * name the same (the latest) failure.
			 */
			kcoll_report_set(op, ns);
			comm->late_err = res;
			kcoll_stat_add(KCOLL_STAT_LATE_ERRORS, 1);
		}
	} else if (res < 0) {
		kcoll_report_set(op, ns);
		cflags = KCOLL_CQE_F_REPORT;
		/* Its own failure goes, and is the report now: the caller
		 * learns that something failed, and an older one's stays
		 * with no later success. */
		if (op->kind == KCOLL_KIND_COLL)
			comm->late_err = 0;
	} else if (comm->late_err && op->kind == KCOLL_KIND_COLL) {
		/* An earlier broadcast failed after it returned: its report
		 * stands (kcoll_report_set() above, then). */
		res = comm->late_err;
		comm->late_err = 0;
		cflags = KCOLL_CQE_F_REPORT;
	}
	kcoll_op_time_done(op);
	if (!op->returned)	/* else counted when it returned */
		kcoll_op_count(op, res, ns);
	list_del(&op->node);
	list_del(&op->all);
	comm->nr_ops--;
	kcoll_op_prio_end(op);
	if (op->kind == KCOLL_KIND_COLL)
		comm->coll_done_seq = op->seq + 1;
	if (op->gpu)
		kcoll_gpu_op_end(op, res);
	kcoll_op_free_locked(op);
	if (req)
		kcoll_req_complete_flags(req, res, cflags);
}

/*
 * May @op, whose older collectives have all returned, return to its
 * caller now, before it is over (docs/DESIGN.md, "Confirmations
 * behind")? Only a broadcast whose data phases are done, whose every
 * grant over memory has died (an empty one, for a token, exposes none)
 * and whose SIGs from peers that are not lazy are in (those are checked
 * before its CQE, as without this): what is left of it is its
 * confirmation tokens, empty transfers that touch no memory, or only the
 * completions of its writes (those of its data read bounces of ours, or
 * have completed: a granted write's bytes count as sent once it has).
 * Not while an earlier one's late error waits for a CQE to go with (this
 * one's then), nor while an older one has failed and still drains (the
 * caller checks), nor past sysfs confirm_behind of them per communicator.
 * Must hold comm->lock.
 */
static bool kcoll_op_may_return(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;

	return op->kind == KCOLL_KIND_COLL && !op->returned &&
	       op->args.opcode == KCOLL_OP_BROADCAST && !op->gpu &&
	       op->started && !op->error && op->data_phases &&
	       (op->finished || op->phase >= op->data_phases) &&
	       !op->grants_mem && !op->gmrs && !comm->late_err &&
	       comm->nr_returned < kcoll_confirm_behind() &&
	       kcoll_op_sigs_in(op);
}

/*
 * @op's CQE goes now; the op runs on without its request, and without
 * its buffers (none of its phases left touches them): a registration it
 * used may be deregistered at once, as after any collective.
 */
static void kcoll_op_return(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	u64 ns = ktime_get_ns() - op->t_submit;

	lockdep_assert_held(&comm->lock);
	kcoll_op_release(op, true);
	kcoll_op_prio_end(op);
	kcoll_op_count(op, 0, ns);
	op->returned = true;
	comm->nr_returned++;
	kcoll_stat_add(KCOLL_STAT_RETURNED_EARLY, 1);
	kcoll_req_complete_flags(op->req, 0, 0);
	op->req = NULL;
}

/*
 * Has @o, started, run every phase that touches its memory, without
 * failing? What is left of it moves no byte: a collective on the same
 * buffers may start beside it.
 */
static bool kcoll_op_data_done(const struct kcoll_task *o)
{
	return o->started && !o->error && o->phase >= o->data_phases;
}

/*
 * ... and is none of its grants' MRs valid any more (kcoll_op_settle()
 * invalidates them once it is past its data)? Only then are its buffers
 * no longer its: a peer could still write through a live grant.
 */
static bool kcoll_op_mem_free(const struct kcoll_task *o)
{
	return kcoll_op_data_done(o) && !o->gmrs;
}

/*
 * @op is done (or failed), or past its last phase that touches memory
 * (only a broadcast's tokens left, or its peers' SIGs): what the
 * transports still hold of its retired grants (through the NIC, MRs
 * waiting for invalidation) is let go now, so that it may complete, and
 * so that no peer writes through them into memory a younger collective
 * may already use (kcoll_op_mem_free(); until 2026-12-05 an operation
 * waiting for a SIG kept its grants' MRs while one on the same buffer
 * ran). While it moves data the invalidations ride along with its next
 * grant's registration instead (kcoll_gmr_grant()): one trip to the
 * registration QP per chunk, not two.
 */
static void kcoll_op_settle(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	u32 i;

	if (!op->gmrs ||
	    !(op->finished || op->error || kcoll_op_data_done(op)))
		return;
	for (i = 0; i < comm->nranks; i++)
		if (comm->conns[i] && comm->conns[i]->xp->reclaim)
			comm->conns[i]->xp->reclaim(comm->conns[i]);
}

/*
 * May collective @op start beside the older ones ahead of it, all started
 * (docs/DESIGN.md, "Several collectives in flight")? Within the window
 * (sysfs colls_in_flight, counting the head), none of them stream-ordered
 * (those run alone: their stream and the GPU scratch are the
 * communicator's), none of a lower priority (a younger operation must not
 * hold back an older one of its own communicator: kcoll_op_held()), and
 * no page it writes touched by one of theirs, nor one it reads written by
 * one of theirs, unless that one is past its last phase that touches
 * memory and no peer can write through its grants any more
 * (kcoll_op_mem_free()). @pos counts the older ones that have
 * not returned (kcoll_op_return(): those are past their data and bounded
 * by sysfs confirm_behind instead).
 */
static bool kcoll_op_may_join(struct kcoll_task *op, u32 pos)
{
	struct kcoll_task *o;

	if (pos >= kcoll_colls_in_flight() || op->gpu)
		return false;
	/* Overlapping one that has not completed: it still does, unless it
	 * is past its last phase that touches memory. */
	if (op->overlap_counted && !kcoll_coll_over(op->comm, op->overlap_seq)) {
		o = kcoll_coll_running(op->comm, op->overlap_seq);
		if (!o || !kcoll_op_mem_free(o))
			return false;
	}
	list_for_each_entry(o, &op->comm->colls, node) {
		if (o == op) {
			/* Failed before it started: it only completes. */
			if (!op->error)
				kcoll_stat_add(KCOLL_STAT_COLLS_BESIDE, 1);
			return true;
		}
		if (o->returned)
			continue;
		if (o->gpu || o->prio < op->prio)
			return false;
		/* Only empty transfers or SIGs left (a broadcast's
		 * confirmation tokens), its grants invalid: its buffers
		 * are no longer its. */
		if (kcoll_op_mem_free(o))
			continue;
		if (kcoll_op_overlap(o, op)) {
			if (!op->overlap_counted)
				kcoll_stat_add(KCOLL_STAT_COLLS_OVERLAP, 1);
			op->overlap_counted = true;
			op->overlap_seq = o->seq;
			return false;
		}
	}
	return false;
}

/*
 * Kill the connections whose ABORT found no room (conn->kill_due), now that
 * no list of theirs is being walked. Killing fails operations, whose
 * ABORTs may find other connections full: until none is left.
 */
static void kcoll_engine_kills(struct kcoll_comm *comm)
{
	u32 i;

	while (comm->kills_due) {
		comm->kills_due = 0;
		for (i = 0; i < comm->nranks; i++) {
			struct kcoll_conn *conn = comm->conns[i];
			int err;

			if (!conn || !conn->kill_due)
				continue;
			err = conn->kill_due;
			conn->kill_due = 0;
			kcoll_conn_kill(conn, err);
		}
	}
}

/*
 * Progress every op that can move and complete the ones that are over:
 * collectives in seq order (completions, the BYE's watermark and the
 * report rely on it), the head and those started beside it. Called after
 * every event. Must hold comm->lock.
 */
void kcoll_engine_reap(struct kcoll_comm *comm)
{
	struct kcoll_task *op, *tmp;
	bool again;
	bool failed;
	u32 i, pos;

	lockdep_assert_held(&comm->lock);
	do {
		kcoll_engine_kills(comm);
		again = false;
		failed = false;	/* an older one failed, not completed */
		i = 0;
		pos = 0;	/* older ones not returned */
		list_for_each_entry_safe(op, tmp, &comm->colls, node) {
			if (i && !op->started && !kcoll_op_may_join(op, pos))
				break;
			if (!op->finished && !op->error)
				kcoll_op_progress(op);
			kcoll_op_settle(op);
			if (!i && (op->finished || op->error) &&
			    kcoll_op_quiet(op)) {
				kcoll_op_complete(op);
				kcoll_eager_sweep(comm);
				again = true;	/* the next is the head */
				break;
			}
			/* Every older one has returned: its CQE may go
			 * before its tokens are in, in seq order. */
			if (!pos && !failed && kcoll_op_may_return(op))
				kcoll_op_return(op);
			failed |= !!op->error;
			/* The head, failed: its drain clock runs now. */
			if (!i && op->error && op->started)
				kcoll_op_drain_arm(op);
			/*
			 * Just started as the head, or become it: a lazy
			 * op's clock starts now. Behind the head it may
			 * wait for the head (its peers may hold its data
			 * until their own head is done), which is no stall
			 * of its peers'.
			 */
			if (!i && op->started && !op->was_head) {
				op->was_head = true;
				if (op->lazy) {
					op->lazy_at = jiffies + msecs_to_jiffies(
						KCOLL_SIG_LAZY_MS);
					op->lazy_mark = kcoll_op_mark(op);
					kcoll_timeout_arm(comm, op->lazy_at);
				}
			}
			/* Failed before it started: it completes as the
			 * head, and nothing behind it starts before. */
			if (!op->started)
				break;
			i++;
			if (!op->returned)
				pos++;
		}
		/* The tokens this pass readied, together. */
		if (kcoll_tokens_flush(comm))
			again = true;
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
			/* Answers to a peer's ASKs, held back the same way
			 * or until our operation is done. */
			if (conn->nasks)
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
				kcoll_op_settle(op);
				if ((op->finished || op->error) &&
				    kcoll_op_quiet(op)) {
					kcoll_op_complete(op);
					again = true;
				}
			}
		}
	} while (again || comm->kills_due);

	/* Failed ops queued behind the head never start: finish them too
	 * once they reach the head (above). Failed P2P ops that are not at
	 * the head cannot have posted anything either. */
	list_for_each_entry_safe(op, tmp, &comm->ops, all) {
		if (op->error && !op->started && kcoll_op_quiet(op) &&
		    op->kind == KCOLL_KIND_P2P)
			kcoll_op_complete(op);
	}
}
