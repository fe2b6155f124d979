// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll stream-ordered collectives on GPU memory (KCOLL_SQE_F_GPU).
 *
 * The module cannot run CUDA and the GPU cannot ring the module. They meet
 * on a doorbell page (uapi struct kcoll_gpu_bell): one page of the
 * process's host memory per communicator, pinned here, which the CUDA
 * driver's stream memory operations write and wait on. The stream says
 * where it is (start, done); the module says what may run (ready) and
 * when the operation is over (end, cancel). Nobody spins: the stream waits
 * in the GPU's front end without occupying an SM, and the module looks at
 * the page from an hrtimer every gpu_poll_us only while an operation waits
 * for its stream, queueing the engine when the value it waits for is there.
 *
 * Every exit releases the stream: an operation ends (success or failure)
 * with ready = end = its ticket's last value (and cancel too on failure,
 * so that its kernels leave memory alone); a communicator going away
 * (destroy, abort, the file closed, the device removed) sets every word to
 * KCOLL_GPU_RELEASED (past every ticket, also in the streams' cyclic
 * compare, which ~0 is not). The module never trusts what it reads from the page: it only
 * compares start and done with what it waits for.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kcoll.h"
#include "kcoll_types.h"
#include "kcoll_mem.h"
#include "kcoll_comm.h"
#include "kcoll_reg.h"
#include "kcoll_logic.h"
#include "kcoll_sysfs.h"
#include "kcoll_stats.h"
#include "kcoll_engine.h"
#include "kcoll_gpu.h"


static u64 kcoll_gpu_val(u64 ticket, u64 step)
{
	return (ticket << KCOLL_GPU_TICKET_SHIFT) | step;
}

/* The slot of the ticket in value @v: its words on the page. */
static unsigned int kcoll_gpu_slot(u64 v)
{
	return (v >> KCOLL_GPU_TICKET_SHIFT) % KCOLL_GPU_SLOTS;
}

/* The stream's words of the ticket in value @v. */
static u64 *kcoll_gpu_start(struct kcoll_gpu *g, u64 v)
{
	return &g->bell->start[kcoll_gpu_slot(v)];
}

static u64 *kcoll_gpu_done(struct kcoll_gpu *g, u64 v)
{
	return &g->bell->done[kcoll_gpu_slot(v)];
}

/*
 * Raise a word the module owns to at least @v: they only grow. libcoll
 * raises them too (a ticket whose SQE it could not submit), so this is an
 * atomic maximum, never a store that could lower what it raised.
 * cmpxchg is fully ordered: what the stream may touch once it sees @v
 * is ready. The page is the user's: a thread of theirs that keeps writing
 * other values can make every exchange fail, so after
 * KCOLL_GPU_RAISE_TRIES the word is left as they made it (their streams'
 * business; this runs under comm->lock and must end).
 */
#define KCOLL_GPU_RAISE_TRIES	64

static void kcoll_gpu_raise(u64 *word, u64 v)
{
	u64 old = READ_ONCE(*word), prev;
	unsigned int i;

	for (i = 0; old < v && i < KCOLL_GPU_RAISE_TRIES; i++) {
		prev = cmpxchg64(word, old, v);
		if (prev == old)
			break;
		old = prev;
	}
}

/*
 * The poll interval: gpu_poll_us while a handoff is fresh, doubling up to
 * KCOLL_GPU_POLL_MAX_NS while nothing comes (a stream that never arrives,
 * or one that waits behind long work), back to gpu_poll_us on progress.
 * Whatever a user leaves waiting costs at most 1 / KCOLL_GPU_POLL_MAX_NS
 * timer callbacks per second per communicator.
 */
#define KCOLL_GPU_POLL_MAX_NS	(10 * NSEC_PER_MSEC)

static u64 kcoll_gpu_poll_base(void)
{
	return (u64)kcoll_gpu_poll_us() * NSEC_PER_USEC;
}

static enum hrtimer_restart kcoll_gpu_poll(struct hrtimer *t)
{
	struct kcoll_gpu *g = container_of(t, struct kcoll_gpu, timer);
	u64 ws = READ_ONCE(g->wait_start), wd = READ_ONCE(g->wait_done);

	kcoll_stat_add(KCOLL_STAT_GPU_POLLS, 1);
	/* Acquire: the engine, which looks again, sees what came before. */
	if (READ_ONCE(g->dead) || (!ws && !wd) ||
	    (ws && smp_load_acquire(kcoll_gpu_start(g, ws)) >= ws) ||
	    (wd && smp_load_acquire(kcoll_gpu_done(g, wd)) >= wd)) {
		/* The engine looks (and arms us again if it must). */
		kcoll_mod_delayed(&g->comm->kick, 0);
		return HRTIMER_NORESTART;
	}
	WRITE_ONCE(g->poll_ns, min_t(u64, max(READ_ONCE(g->poll_ns),
					      kcoll_gpu_poll_base()) * 2,
				    max_t(u64, KCOLL_GPU_POLL_MAX_NS,
					  kcoll_gpu_poll_base())));
	hrtimer_forward_now(t, ns_to_ktime(READ_ONCE(g->poll_ns)));
	return HRTIMER_RESTART;
}

static void kcoll_gpu_arm(struct kcoll_gpu *g)
{
	if (g->dead || g->comm->shutting_down)
		return;
	/*
	 * A running callback either re-arms or queues the engine, which
	 * comes back here: no wakeup is lost.
	 */
	if (!hrtimer_active(&g->timer))
		hrtimer_start(&g->timer, ns_to_ktime(max(READ_ONCE(g->poll_ns),
							 kcoll_gpu_poll_base())),
			      HRTIMER_MODE_REL_SOFT);
}

/* ------------------------------------------------------------------ */
/* KCOLL_IOC_GPU_SETUP                                                 */
/* ------------------------------------------------------------------ */

static int kcoll_gpu_pin(struct kcoll_gpu *g, u64 uaddr)
{
	int n;

	if (!uaddr || !PAGE_ALIGNED(uaddr) || uaddr > TASK_SIZE - PAGE_SIZE)
		return -EINVAL;
	n = pin_user_pages_fast(uaddr, 1, FOLL_WRITE | FOLL_LONGTERM,
				&g->page);
	if (n != 1)
		return n < 0 ? n : -EFAULT;
	/* Written by the CPU and the GPU: as any buffer kcoll writes. */
	if (!kcoll_pin_writable_ok(g->page)) {
		unpin_user_page(g->page);
		return -EFAULT;
	}
	g->bell = page_address(g->page);
	g->bell_uaddr = uaddr;
	return 0;
}

int kcoll_gpu_setup_ioctl(struct kcoll_ctx *ctx, void __user *uarg)
{
	struct kcoll_gpu_setup p;
	struct kcoll_comm *comm;
	struct kcoll_gpu *g, *fresh = NULL;
	struct kcoll_mem *mem;
	int err;

	if (copy_from_user(&p, uarg, sizeof(p)))
		return -EFAULT;
	if (!kcoll_all_zero(p.resv, sizeof(p.resv)) || !p.scratch_mr ||
	    !p.scratch_len)
		return -EINVAL;
	comm = kcoll_ctx_comm_get(ctx, p.comm_id);
	if (!comm)
		return -ENOENT;
	/* The scratch: a registration of this comm, covering the range,
	 * that peers' data may land in (under dev_sem, as every use of a
	 * registration: a last put deregisters its MRs). */
	err = 0;
	down_read(&comm->dev_sem);
	mem = kcoll_mem_get(ctx, comm, p.scratch_mr, p.scratch_addr,
			    p.scratch_len, &err);
	if (mem && !mem->buf.writable)
		err = -EACCES;
	if (mem)
		kcoll_mem_put(mem);
	up_read(&comm->dev_sem);
	if (err)
		goto out_put;
	/*
	 * The page at p.bell now, also for a setup again: the page pinned
	 * first must still be the one there (the doorbell unmapped and other
	 * memory mapped at its address would no longer see what we write).
	 */
	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL_ACCOUNT);
	err = -ENOMEM;
	if (!fresh)
		goto out_put;
	err = kcoll_gpu_pin(fresh, p.bell);
	if (err)
		goto out_free;
	fresh->comm = comm;
	hrtimer_init(&fresh->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_SOFT);
	fresh->timer.function = kcoll_gpu_poll;
	mutex_lock(&comm->lock);
	err = kcoll_comm_usable_locked(comm);
	if (err)
		goto out_unlock;
	err = -EOPNOTSUPP;
	if (!comm->devmem || comm->nranks == 1 ||
	    comm->remote_peers != comm->nranks - 1)
		goto out_unlock;
	g = comm->gpu;
	if (g && (g->bell_uaddr != p.bell || g->page != fresh->page ||
		  g->slots_busy)) {
		err = -EBUSY;
		goto out_unlock;
	}
	if (!g) {
		g = fresh;
		fresh = NULL;
		comm->gpu = g;
	}
	g->scratch_mr = p.scratch_mr;
	g->scratch_addr = p.scratch_addr;
	g->scratch_len = p.scratch_len;
	err = 0;
out_unlock:
	mutex_unlock(&comm->lock);
	if (fresh)
		unpin_user_page(fresh->page);
out_free:
	kfree(fresh);
out_put:
	kcoll_comm_put(comm);
	return err;
}

/* ------------------------------------------------------------------ */
/* Operations                                                          */
/* ------------------------------------------------------------------ */

static int kcoll_gpu_view(struct kcoll_task *op, int which, u32 handle,
			  u64 addr, u64 elems)
{
	struct kcoll_buf *b = &op->bufs[which];
	struct kcoll_mem *mem;
	int err = 0;

	if (!elems)
		return 0;
	mem = kcoll_mem_get(op->req->ctx, op->comm, handle, addr,
			    elems * op->esize, &err);
	if (!mem)
		return err;
	/* The scratch is written: GPU_SETUP checked its registration, but
	 * the handle may name another one since (deregistered, reused). */
	if (!mem->buf.writable) {
		kcoll_mem_put(mem);
		return -EACCES;
	}
	*b = mem->buf;
	b->off0 = mem->buf.off0 + (addr - mem->addr);
	b->vaddr = mem->buf.vaddr ? mem->buf.vaddr + (addr - mem->addr) : NULL;
	b->len = elems * op->esize;
	op->mems[which] = mem;
	return 0;
}

/*
 * The TMP elements and the landing region of @op live in the comm's
 * scratch (device memory), laid out by kcoll_sched_gpu_layout() exactly
 * as libcoll computed it when it enqueued the kernels.
 */
int kcoll_gpu_prepare(struct kcoll_task *op, const struct kcoll_sqe *sqe)
{
	struct kcoll_comm *comm = op->comm;
	struct kcoll_gpu_layout l;
	u64 addr, len;
	u32 mr;
	int err;

	if (!sqe->resv)
		return -EINVAL;
	mutex_lock(&comm->lock);
	if (!comm->gpu) {
		mutex_unlock(&comm->lock);
		return -ENODEV;		/* no KCOLL_IOC_GPU_SETUP */
	}
	mr = comm->gpu->scratch_mr;
	addr = comm->gpu->scratch_addr;
	len = comm->gpu->scratch_len;
	mutex_unlock(&comm->lock);

	op->gpu_t = kcoll_gpu_val(sqe->resv, 0);
	err = kcoll_sched_gpu_layout(&op->args, op->esize, &l);
	if (err)
		return err;
	if (l.scratch_bytes > len)
		return -ENOSPC;
	op->gpu_nsteps = l.nsteps;
	err = kcoll_gpu_view(op, KCOLL_SBUF_TMP, mr, addr, l.tmp_cnt);
	if (err)
		return err;
	return kcoll_gpu_view(op, KCOLL_SBUF_LAND, mr, addr + l.land_off,
			      l.land_cnt);
}

/* Tickets only grow: an older one would find its start already there. */
int kcoll_gpu_queue(struct kcoll_task *op)
{
	struct kcoll_gpu *g = op->comm->gpu;

	lockdep_assert_held(&op->comm->lock);
	if (!g || g->dead)
		return -ECANCELED;
	if (op->gpu_t <= kcoll_gpu_val(g->last_ticket, 0))
		return -EINVAL;
	/* It would share its slot's words with one in flight (a point-to-
	 * point operation may end after later ones; all 64 busy: as many
	 * in flight as there are slots). */
	if (g->slots_busy & BIT_ULL(kcoll_gpu_slot(op->gpu_t)))
		return -EBUSY;
	g->last_ticket = op->gpu_t >> KCOLL_GPU_TICKET_SHIFT;
	g->slots_busy |= BIT_ULL(kcoll_gpu_slot(op->gpu_t));
	kcoll_stat_add(KCOLL_STAT_GPU_OPS, 1);
	return 0;
}

/* Release ticket @t of @g: its waits pass; @failed: its kernels skip. */
static void kcoll_gpu_release(struct kcoll_gpu *g, u64 t, bool failed)
{
	u64 last = kcoll_gpu_val(t, KCOLL_GPU_STEP_MASK);
	unsigned int s = kcoll_gpu_slot(last);

	if (g->dead)
		return;
	/* The slot's own words first: cancel before what lets it go. */
	if (failed)
		kcoll_gpu_raise(&g->bell->cancel_s[s], last);
	kcoll_gpu_raise(&g->bell->ready_s[s], last);
	kcoll_gpu_raise(&g->bell->end_s[s], last);
	/* The single words, for streams of an older libcoll. */
	if (failed)
		kcoll_gpu_raise(&g->bell->cancel, last);
	kcoll_gpu_raise(&g->bell->ready, last);
	kcoll_gpu_raise(&g->bell->end, last);
}

void kcoll_gpu_refused(struct kcoll_comm *comm, const struct kcoll_sqe *sqe)
{
	struct kcoll_gpu *g = comm->gpu;
	unsigned int s;

	lockdep_assert_held(&comm->lock);
	/* An older ticket's values are below what its stream passed. */
	if (!g || sqe->resv <= g->last_ticket)
		return;
	/*
	 * Its slot's words belong to a ticket still in flight (64 ahead):
	 * raised to this one's values now, they would let that one's
	 * stream go on (and skip its kernels) while its collective runs.
	 * This one's stream is let go when that one ends.
	 */
	s = kcoll_gpu_slot(kcoll_gpu_val(sqe->resv, 0));
	if (g->slots_busy & BIT_ULL(s)) {
		g->refused[s] = max(g->refused[s], sqe->resv);
		return;
	}
	kcoll_gpu_release(g, sqe->resv, true);
}

void kcoll_gpu_reject(struct kcoll_ctx *ctx, const struct kcoll_sqe *sqe)
{
	struct kcoll_comm *comm;

	if (!(sqe->flags & KCOLL_SQE_F_GPU) || !sqe->resv)
		return;
	comm = kcoll_ctx_comm_get(ctx, sqe->comm_id);
	if (!comm)
		return;
	mutex_lock(&comm->lock);
	kcoll_gpu_refused(comm, sqe);
	mutex_unlock(&comm->lock);
	kcoll_comm_put(comm);
}

bool kcoll_gpu_started(struct kcoll_task *op)
{
	struct kcoll_gpu *g = op->comm->gpu;

	lockdep_assert_held(&op->comm->lock);
	if (op->gpu_started)
		return true;
	/* Acquire, pairs with the stream's fenced WriteValue64(start). */
	if (smp_load_acquire(kcoll_gpu_start(g, op->gpu_t)) >= op->gpu_t) {
		/* The stream's earlier work on these buffers is over. */
		op->gpu_started = true;
		WRITE_ONCE(g->poll_ns, 0);	/* progress: poll fast again */
		op->gpu_waiting = false;
		WRITE_ONCE(g->wait_start, 0);
		return true;
	}
	op->gpu_waiting = true;
	/*
	 * The oldest ticket waiting: a collective and point-to-point
	 * operations may wait at once, and a stream gets to a later ticket
	 * only after an earlier one of its own. (Whoever starts clears it;
	 * the timer then queues the engine, and the others set it again.)
	 */
	if (!g->wait_start || op->gpu_t < g->wait_start)
		WRITE_ONCE(g->wait_start, op->gpu_t);
	kcoll_gpu_arm(g);
	return false;
}

/* The next GPU step of @op: handed to the stream, then done? */
static bool kcoll_gpu_step(struct kcoll_task *op)
{
	struct kcoll_gpu *g = op->comm->gpu;
	u64 v = op->gpu_t | (op->gpu_step + 1);

	if (op->gpu_step >= op->gpu_nsteps) {
		/* More steps than libcoll planned: it disagrees with us. */
		kcoll_op_fail(op, -EPROTO);
		return false;
	}
	if (!op->gpu_posted) {
		/*
		 * The landed data (and what the NIC copied) is complete:
		 * the completions that said so came before.
		 */
		kcoll_gpu_raise(&g->bell->ready_s[kcoll_gpu_slot(v)], v);
		kcoll_gpu_raise(&g->bell->ready, v);
		op->gpu_posted = true;
		op->gpu_posted_ns = ktime_get_ns();
		kcoll_stat_add(KCOLL_STAT_GPU_STEPS, 1);
	}
	/* Acquire, pairs with the stream's fenced WriteValue64(done). */
	if (smp_load_acquire(kcoll_gpu_done(g, v)) < v) {
		op->gpu_waiting = true;
		WRITE_ONCE(g->wait_done, v);
		kcoll_gpu_arm(g);
		return false;
	}
	/*
	 * The kernel's writes are visible: the stream's WriteValue fenced
	 * them before it wrote done.
	 */
	op->gpu_waiting = false;
	WRITE_ONCE(g->wait_done, 0);
	op->gpu_posted = false;
	op->gpu_step++;
	WRITE_ONCE(g->poll_ns, 0);		/* progress: poll fast again */
	kcoll_stat_add(KCOLL_STAT_GPU_STEP_NS,
		       ktime_get_ns() - op->gpu_posted_ns);
	return true;
}

bool kcoll_gpu_phase(struct kcoll_task *op)
{
	lockdep_assert_held(&op->comm->lock);
	if (op->gpu_reduced || op->error ||
	    !(kcoll_sched_gpu_phase(&op->ph) & KCOLL_GPU_STEP_REDUCE))
		return true;
	/* Not all landed: kcoll_phase_done() says so. */
	if (!op->recv_landed_any || op->recv_done < op->recv_total)
		return true;
	if (!kcoll_gpu_step(op))
		return false;
	op->gpu_reduced = true;
	/* What this phase forwards is reduced now. */
	if (op->ph.has_send && op->ph.send.fwd)
		kcoll_op_send(op);
	return true;
}

bool kcoll_gpu_avg(struct kcoll_task *op)
{
	lockdep_assert_held(&op->comm->lock);
	return kcoll_gpu_step(op);
}

void kcoll_gpu_op_end(struct kcoll_task *op, int res)
{
	struct kcoll_gpu *g = op->comm->gpu;
	unsigned int s;

	lockdep_assert_held(&op->comm->lock);
	if (!g)
		return;
	s = kcoll_gpu_slot(op->gpu_t);
	g->slots_busy &= ~BIT_ULL(s);
	if (op->gpu_waiting) {
		WRITE_ONCE(g->wait_start, 0);
		WRITE_ONCE(g->wait_done, 0);
	}
	kcoll_gpu_release(g, op->gpu_t >> KCOLL_GPU_TICKET_SHIFT, res < 0);
	/* A ticket refused meanwhile on this slot (kcoll_gpu_refused()). */
	if (g->refused[s]) {
		u64 t = g->refused[s];

		g->refused[s] = 0;
		kcoll_gpu_release(g, t, true);
	}
}

bool kcoll_gpu_timeout(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	struct kcoll_gpu *g = comm->gpu;

	lockdep_assert_held(&comm->lock);
	if (!op->gpu || !op->gpu_waiting || !g)
		return false;
	op->reason = KCOLL_REPORT_GPU_STREAM;
	pr_warn_ratelimited("comm %llx rank %u: %s %u timed out after %u ms waiting for its GPU stream (ticket %llu: %s, stream at start %#llx done %#llx)\n",
			    comm->uid, comm->rank,
			    kcoll_op_name(op->args.opcode), op->seq,
			    op->timeout_ms, op->gpu_t >> KCOLL_GPU_TICKET_SHIFT,
			    op->gpu_started ? "never finished a reduction step" :
					      "never reached the operation",
			    READ_ONCE(*kcoll_gpu_start(g, op->gpu_t)),
			    READ_ONCE(*kcoll_gpu_done(g, op->gpu_t)));
	kcoll_op_fail(op, -ETIMEDOUT);
	return true;
}

void kcoll_gpu_shutdown(struct kcoll_comm *comm)
{
	struct kcoll_gpu *g;
	unsigned int s;

	mutex_lock(&comm->lock);
	g = comm->gpu;
	if (g && !g->dead) {
		/* cancel first: the raises are fully ordered */
		for (s = 0; s < KCOLL_GPU_SLOTS; s++)
			kcoll_gpu_raise(&g->bell->cancel_s[s],
					KCOLL_GPU_RELEASED);
		kcoll_gpu_raise(&g->bell->cancel, KCOLL_GPU_RELEASED);
		for (s = 0; s < KCOLL_GPU_SLOTS; s++) {
			kcoll_gpu_raise(&g->bell->ready_s[s],
					KCOLL_GPU_RELEASED);
			kcoll_gpu_raise(&g->bell->end_s[s],
					KCOLL_GPU_RELEASED);
		}
		kcoll_gpu_raise(&g->bell->ready, KCOLL_GPU_RELEASED);
		kcoll_gpu_raise(&g->bell->end, KCOLL_GPU_RELEASED);
		WRITE_ONCE(g->dead, true);
	}
	mutex_unlock(&comm->lock);
	if (g)
		hrtimer_cancel(&g->timer);
}

void kcoll_gpu_destroy(struct kcoll_comm *comm)
{
	struct kcoll_gpu *g;

	mutex_lock(&comm->lock);
	g = comm->gpu;
	comm->gpu = NULL;
	mutex_unlock(&comm->lock);
	if (!g)
		return;
	hrtimer_cancel(&g->timer);
	unpin_user_pages_dirty_lock(&g->page, 1, true);
	kfree(g);
}
