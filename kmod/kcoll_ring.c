// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll submission and completion rings.
 *
 * Memory ordering (the pairs; see docs/DESIGN.md):
 *  A1 app: write SQEs; store-release sq.tail
 *  K1 kernel (ENTER): load-acquire sq.tail          -- pairs with A1
 *  K2 kernel: copy SQEs once; store-release sq.head -- pairs with the app's
 *     load-acquire of sq.head before it reuses a slot
 *  K3 kernel (completion): write CQE; store-release cq.tail
 *  A2 app: load-acquire cq.tail                     -- pairs with K3
 *  A3 app: read CQEs; store-release cq.head
 *  K4 kernel: READ_ONCE(cq.head) before reserving slots. A slot is only
 *     rewritten after head passed it; the CQE stores that follow depend on
 *     the value read, and a stale head only makes the kernel more
 *     conservative, so no further barrier is needed.
 * Every value read from the shared region is read once and then checked.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/nospec.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/sched/signal.h>
#include <linux/poll.h>
#include <linux/hrtimer.h>
#include <linux/lockdep.h>
#include <linux/indirect_call_wrapper.h>

#include "kcoll.h"
#include "kcoll_gpu.h"
#include "kcoll_types.h"
#include "kcoll_comm.h"
#include "kcoll_ring.h"
#include "kcoll_sysfs.h"
#include "kcoll_stats.h"
#include "kcoll_quota.h"
#include "kcoll_compat.h"

static struct kmem_cache *kcoll_req_cache;

/* A new context charged to current's user, or an ERR_PTR (-EDQUOT past
 * sysfs user_max_contexts). */
struct kcoll_ctx *kcoll_ctx_create(void)
{
	struct kcoll_ctx *ctx;
	int err;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return ERR_PTR(-ENOMEM);
	ctx->quota = kcoll_quota_get_current();
	if (!ctx->quota) {
		kfree(ctx);
		return ERR_PTR(-ENOMEM);
	}
	err = kcoll_quota_charge(ctx->quota, KCOLL_Q_CONTEXTS, 1);
	if (err) {
		kcoll_quota_put(ctx->quota);
		kfree(ctx);
		return ERR_PTR(err);
	}
	kref_init(&ctx->ref);
	mutex_init(&ctx->submit_lock);
	spin_lock_init(&ctx->cq_lock);
	init_waitqueue_head(&ctx->cq_wait);
	INIT_LIST_HEAD(&ctx->reqs);
	mutex_init(&ctx->comm_lock);
	xa_init_flags(&ctx->comms, XA_FLAGS_ALLOC1);
	xa_init_flags(&ctx->mems, XA_FLAGS_ALLOC1);
	atomic_inc(&kcoll_nr_contexts);
	return ctx;
}

static void kcoll_ctx_free(struct kref *ref)
{
	struct kcoll_ctx *ctx = container_of(ref, struct kcoll_ctx, ref);

	if (ctx->evfd)
		eventfd_ctx_put(ctx->evfd);
	vfree(ctx->region);
	mutex_destroy(&ctx->submit_lock);
	mutex_destroy(&ctx->comm_lock);
	atomic_dec(&kcoll_nr_contexts);
	kcoll_quota_uncharge(ctx->quota, KCOLL_Q_CONTEXTS, 1);
	kcoll_quota_put(ctx->quota);
	kfree(ctx);
}

/* ---------------------------------------------------------------- */
/* Completion side                                                   */
/* ---------------------------------------------------------------- */

/*
 * Write one CQE into a slot reserved at submission, without publishing it.
 * Must hold ctx->cq_lock; kcoll_cq_publish() must follow before the lock
 * is dropped. @pending counts filled, unpublished CQEs.
 */
static void kcoll_cq_fill(struct kcoll_ctx *ctx, u32 pending, u64 user_data,
			  int res, u32 cflags)
	__must_hold(&ctx->cq_lock)
{
	struct kcoll_cqe *cqe;

	lockdep_assert_held(&ctx->cq_lock);
	cqe = &ctx->r.cqes[(ctx->cq_tail + pending) &
			   (ctx->layout.cq_entries - 1)];
	WRITE_ONCE(cqe->user_data, user_data);
	WRITE_ONCE(cqe->res, res);
	WRITE_ONCE(cqe->flags, cflags);
}

/*
 * Publish @n filled CQEs (@failed of them with res < 0). Must hold
 * ctx->cq_lock.
 */
static void kcoll_cq_publish(struct kcoll_ctx *ctx, u32 n, u32 failed)
	__must_hold(&ctx->cq_lock)
{
	lockdep_assert_held(&ctx->cq_lock);
	ctx->cq_reserved -= n;
	/* K3: the CQE stores are visible before the new tail. */
	smp_store_release(ctx->r.cq_tail, ctx->cq_tail + n);
	/* Advance the private tail only once the CQEs are published:
	 * lockless waiters (kcoll_cq_has) read it and must never see a CQE
	 * early. */
	WRITE_ONCE(ctx->cq_tail, ctx->cq_tail + n);

	kcoll_stat_add(KCOLL_STAT_COMPLETED, n);
	if (failed)
		kcoll_stat_add(KCOLL_STAT_FAILED, failed);
}

/* Fill and publish one CQE. Must hold ctx->cq_lock. */
static void kcoll_cq_post(struct kcoll_ctx *ctx, u64 user_data, int res,
			  u32 cflags)
	__must_hold(&ctx->cq_lock)
{
	kcoll_cq_fill(ctx, 0, user_data, res, cflags);
	kcoll_cq_publish(ctx, 1, res < 0);
}

/*
 * Wake waiters (CQEs arrived, or SQ room for pollers) and, if @posted CQEs
 * were published, signal the eventfd once. Must hold ctx->cq_lock.
 */
static void kcoll_cq_notify(struct kcoll_ctx *ctx, u32 posted)
	__must_hold(&ctx->cq_lock)
{
	lockdep_assert_held(&ctx->cq_lock);
	/* The eventfd first: a woken poller often reads it next. */
	if (posted && ctx->evfd &&
	    !(READ_ONCE(*ctx->r.cq_flags) & KCOLL_CQ_F_EVENTFD_DISABLED))
		kcoll_eventfd_signal(ctx->evfd);
	if (wq_has_sleeper(&ctx->cq_wait))
		wake_up_all(&ctx->cq_wait);
}

/* Results of inline ops, kept on the submitter's stack until flushed. */
#define KCOLL_INLINE_BATCH	16
struct kcoll_inline {
	u64 user_data;
	int res;
};

/*
 * Fill and publish @nr inline results, and put @req (if any) on the
 * in-flight list, under one hold of cq_lock. Must not hold cq_lock.
 */
static void kcoll_flush_inline(struct kcoll_ctx *ctx,
			       const struct kcoll_inline *done, u32 nr,
			       struct kcoll_req *req)
{
	u32 i, failed = 0;

	if (!nr && !req)
		return;
	spin_lock_irq(&ctx->cq_lock);
	for (i = 0; i < nr; i++) {
		kcoll_cq_fill(ctx, i, done[i].user_data, done[i].res, 0);
		failed += done[i].res < 0;
	}
	if (nr)
		kcoll_cq_publish(ctx, nr, failed);
	if (req)
		list_add_tail(&req->node, &ctx->reqs);
	spin_unlock_irq(&ctx->cq_lock);
}

/* Must hold ctx->cq_lock; frees @req. The caller drops the ctx reference. */
static void __kcoll_req_finish(struct kcoll_req *req, int res, u32 cflags)
	__must_hold(&req->ctx->cq_lock)
{
	struct kcoll_ctx *ctx = req->ctx;

	kcoll_cq_post(ctx, req->sqe.user_data, res, cflags);
	list_del(&req->node);
	atomic_dec(&kcoll_nr_inflight);
	kcoll_cq_notify(ctx, 1);
	kmem_cache_free(kcoll_req_cache, req);
	kcoll_quota_uncharge(ctx->quota, KCOLL_Q_OPS, 1);
	atomic_dec(&kcoll_nr_live_reqs);
}

/**
 * kcoll_req_complete - post the CQE of an asynchronous request and free it.
 * @req: the request, issued and not yet completed
 * @res: result for the CQE (0 or positive, or -errno)
 *
 * Exactly once per issued request, from process context with no spinlock
 * held (every caller is: the CQs poll from a workqueue, timers queue
 * work): the last reference to the context may be dropped here, and its
 * free takes kcoll_quota_lock, a spinlock never taken with interrupts off.
 */
void kcoll_req_complete(struct kcoll_req *req, int res)
{
	kcoll_req_complete_flags(req, res, 0);
}

/* The same, with KCOLL_CQE_F_* @cflags in the CQE. */
void kcoll_req_complete_flags(struct kcoll_req *req, int res, u32 cflags)
{
	struct kcoll_ctx *ctx = req->ctx;
	unsigned long flags;

	spin_lock_irqsave(&ctx->cq_lock, flags);
	__kcoll_req_finish(req, res, cflags);
	spin_unlock_irqrestore(&ctx->cq_lock, flags);
	kref_put(&ctx->ref, kcoll_ctx_free);
}

/* ---------------------------------------------------------------- */
/* Setup                                                             */
/* ---------------------------------------------------------------- */

static void kcoll_rings_resolve(struct kcoll_ctx *ctx)
{
	const struct kcoll_ring_layout *l = &ctx->layout;
	u8 *base = ctx->region;

	ctx->r.sq_head = (u32 *)(base + l->sq_off.head);
	ctx->r.sq_tail = (u32 *)(base + l->sq_off.tail);
	ctx->r.sq_flags = (u32 *)(base + l->sq_off.flags);
	ctx->r.sqes = (struct kcoll_sqe *)(base + l->sq_off.sqes);
	ctx->r.cq_head = (u32 *)(base + l->cq_off.head);
	ctx->r.cq_tail = (u32 *)(base + l->cq_off.tail);
	ctx->r.cq_flags = (u32 *)(base + l->cq_off.flags);
	ctx->r.cqes = (struct kcoll_cqe *)(base + l->cq_off.cqes);

	*(u32 *)(base + l->sq_off.ring_mask) = l->sq_entries - 1;
	*(u32 *)(base + l->sq_off.ring_entries) = l->sq_entries;
	*(u32 *)(base + l->cq_off.ring_mask) = l->cq_entries - 1;
	*(u32 *)(base + l->cq_off.ring_entries) = l->cq_entries;
}

long kcoll_ctx_setup(struct kcoll_ctx *ctx, struct kcoll_setup *p)
{
	struct kcoll_ring_layout l;
	u32 sq, cq;
	void *region;
	int err;

	err = kcoll_setup_check(p);
	if (err)
		return err;
	err = kcoll_ring_size(p->sq_entries, p->cq_entries, p->flags,
			      kcoll_max_sq_entries(), kcoll_max_cq_entries(),
			      &sq, &cq);
	if (err)
		return err;
	kcoll_ring_layout(sq, cq, &l);

	/*
	 * Rings are set up once. Say so before taking the lock: an ENTER
	 * holds it while it may wait in a fault of the user's memory for
	 * as long as that user likes (a FUSE file nobody serves), and a
	 * caller that can only fail must not sleep uninterruptibly behind
	 * it. The lock itself is taken killably, as ENTER takes it.
	 */
	if (smp_load_acquire(&ctx->ready))
		return -EBUSY;
	if (mutex_lock_killable(&ctx->submit_lock))
		return -EINTR;
	if (ctx->ready) {
		err = -EBUSY;
		goto out_unlock;
	}
	/*
	 * Zeroed and page-aligned (kcoll_mmap() maps it page by page), and
	 * charged to the caller's memory cgroup, which vmalloc_user() is
	 * not: past the cgroup's limit SETUP fails with -ENOMEM instead of
	 * calling its OOM killer (__GFP_RETRY_MAYFAIL).
	 */
	region = __vmalloc(l.size, KCOLL_GFP_CHARGED | __GFP_ZERO);
	if (!region) {
		err = -ENOMEM;
		goto out_unlock;
	}
	ctx->region = region;
	ctx->layout = l;
	kcoll_rings_resolve(ctx);
	/* Publish region and layout to mmap()/poll(), which take no lock. */
	smp_store_release(&ctx->ready, true);
	mutex_unlock(&ctx->submit_lock);

	p->sq_entries = sq;
	p->cq_entries = cq;
	p->features = KCOLL_FEATURES;
	p->sq_off = l.sq_off;
	p->cq_off = l.cq_off;
	p->mmap_size = l.size;
	p->mmap_offset = KCOLL_OFF_RINGS;
	return 0;

out_unlock:
	mutex_unlock(&ctx->submit_lock);
	return err;
}

/* ---------------------------------------------------------------- */
/* Submission                                                        */
/* ---------------------------------------------------------------- */

/*
 * Consume up to @to_submit SQEs. Every consumed SQE gets exactly one CQE,
 * in a slot reserved here. Returns the number consumed, -EBUSY if SQEs were
 * queued but no CQ slot was free, or -EOVERFLOW if the SQ tail is corrupt.
 * Must hold ctx->submit_lock.
 */
static int kcoll_submit(struct kcoll_ctx *ctx, u32 to_submit)
	__must_hold(&ctx->submit_lock)
{
	const u32 sq_mask = ctx->layout.sq_entries - 1;
	struct kcoll_inline done[KCOLL_INLINE_BATCH];
	u32 tail, space, i, pending = 0, published = 0;
	int n;

	lockdep_assert_held(&ctx->submit_lock);
	/* K1: the SQE contents are visible once the tail is. */
	tail = smp_load_acquire(ctx->r.sq_tail);
	n = kcoll_sq_ready(ctx->sq_head, tail, ctx->layout.sq_entries,
			   to_submit);
	if (n <= 0) {
		if (n == -EOVERFLOW)
			pr_debug("pid %d: SQ tail %u is %u ahead of head %u\n",
				 task_pid_nr(current), tail, tail - ctx->sq_head,
				 ctx->sq_head);
		return n;
	}

	spin_lock_irq(&ctx->cq_lock);
	space = kcoll_cq_space(READ_ONCE(*ctx->r.cq_head), ctx->cq_tail,
			       ctx->layout.cq_entries, ctx->cq_reserved);
	if ((u32)n > space)
		n = space;
	ctx->cq_reserved += n;
	spin_unlock_irq(&ctx->cq_lock);
	if (!n) {
		kcoll_stat_add(KCOLL_STAT_REJECTED, 1);
		return -EBUSY;
	}

	/*
	 * Copy, validation, inline execution and request allocation run
	 * without cq_lock (allocation may sleep). Inline results are kept on
	 * the stack and filled and published under one short hold of cq_lock
	 * per KCOLL_INLINE_BATCH; pending ones are flushed before an
	 * asynchronous request starts, so CQEs keep submission order.
	 */
	for (i = 0; i < (u32)n; i++) {
		const struct kcoll_opdef *op;
		struct kcoll_req *req;
		struct kcoll_sqe sqe;
		int res;

		/* Copy once; validate and use only the copy. The barrier
		 * keeps the compiler from reading a field from the shared
		 * slot again in place of the copy (the user may rewrite it
		 * meanwhile), however much gets inlined.
		 */
		memcpy(&sqe, &ctx->r.sqes[ctx->sq_head & sq_mask], sizeof(sqe));
		barrier();
		WRITE_ONCE(ctx->sq_head, ctx->sq_head + 1);

		res = kcoll_sqe_check(&sqe);
		if (res)
			goto complete_now;
		/*
		 * Checked, but a mispredicted branch could still index the
		 * op, type and reduction tables with the user's values:
		 * clamp them in the copy every later use reads.
		 */
		sqe.opcode = array_index_nospec(sqe.opcode, KCOLL_OP_LAST);
		sqe.dtype = array_index_nospec(sqe.dtype, KCOLL_DTYPE_LAST);
		sqe.redop = array_index_nospec(sqe.redop, KCOLL_REDOP_LAST);
		/* The top priorities throttle everyone's traffic on the
		 * device: not for every user (sysfs prio_max_unpriv). */
		if (sqe.prio > kcoll_prio_max_unpriv() &&
		    !capable(CAP_SYS_NICE)) {
			res = -EPERM;
			goto complete_now;
		}
		op = &kcoll_ops[sqe.opcode];
		if (op->exec) {
			/* Direct call for NOP, the hot inline op: no retpoline. */
			res = INDIRECT_CALL_1(op->exec, kcoll_nop_exec, &sqe);
			goto complete_now;
		}

		/* The user's requests in flight (sysfs user_max_ops):
		 * each holds kernel memory until its CQE. */
		res = kcoll_quota_charge(ctx->quota, KCOLL_Q_OPS, 1);
		if (res)
			goto complete_now;
		req = kmem_cache_alloc(kcoll_req_cache, GFP_KERNEL_ACCOUNT);
		if (!req) {
			kcoll_quota_uncharge(ctx->quota, KCOLL_Q_OPS, 1);
			res = -ENOMEM;
			goto complete_now;
		}
		atomic_inc(&kcoll_nr_live_reqs);
		req->sqe = sqe;
		req->ctx = ctx;
		kref_get(&ctx->ref);
		atomic_inc(&kcoll_nr_inflight);
		published += pending;
		kcoll_flush_inline(ctx, done, pending, req);
		pending = 0;
		op->issue(req);
		continue;

complete_now:
		/* Refused before it became an operation: a stream waiting
		 * for a stream-ordered one goes on. */
		if (unlikely(res < 0 && (sqe.flags & KCOLL_SQE_F_GPU)))
			kcoll_gpu_reject(ctx, &sqe);
		done[pending].user_data = sqe.user_data;
		done[pending].res = res;
		if (++pending == KCOLL_INLINE_BATCH) {
			kcoll_flush_inline(ctx, done, pending, NULL);
			published += pending;
			pending = 0;
		}
	}
	kcoll_flush_inline(ctx, done, pending, NULL);
	published += pending;

	/* K2: the SQ slots may be reused. */
	smp_store_release(ctx->r.sq_head, ctx->sq_head);
	kcoll_stat_add(KCOLL_STAT_SUBMITTED, n);

	/* After the SQ head moved: pollers waiting for SQ room, and one
	 * notification for the inline completions of the whole batch. */
	spin_lock_irq(&ctx->cq_lock);
	kcoll_cq_notify(ctx, published);
	spin_unlock_irq(&ctx->cq_lock);
	return n;
}

static bool kcoll_cq_has(struct kcoll_ctx *ctx, u32 want)
{
	return kcoll_cq_ready(READ_ONCE(*ctx->r.cq_head),
			      READ_ONCE(ctx->cq_tail),
			      ctx->layout.cq_entries) >= want;
}

static int kcoll_wait(struct kcoll_ctx *ctx, u32 want, u64 timeout_ns)
{
	long ret;

	/* Past KTIME_MAX (292 years) ktime_t turns negative, which would
	 * not wait at all: as long as it can. */
	if (!timeout_ns || timeout_ns > KTIME_MAX)
		ret = wait_event_interruptible(ctx->cq_wait,
					       kcoll_cq_has(ctx, want));
	else
		ret = wait_event_interruptible_hrtimeout(ctx->cq_wait,
							 kcoll_cq_has(ctx, want),
							 ns_to_ktime(timeout_ns));
	/* Never restart: a restarted call would wait the whole relative
	 * timeout again. The caller re-enters if it wants to. */
	return ret == -ERESTARTSYS ? -EINTR : ret;	/* 0, -ETIME, -EINTR */
}

long kcoll_ctx_enter(struct kcoll_ctx *ctx, const struct kcoll_enter *e)
{
	int submitted = 0;
	int err;

	/* Pairs with the release in kcoll_ctx_setup(). */
	if (!smp_load_acquire(&ctx->ready))
		return -EBADFD;
	err = kcoll_enter_check(e, ctx->layout.sq_entries,
				ctx->layout.cq_entries);
	if (err)
		return err;

	if (e->to_submit) {
		/*
		 * Killable: a submission faults its buffers in under it
		 * (kcoll_coll_issue()), and a page may make it wait for as
		 * long as its owner likes (a FUSE file nobody answers).
		 */
		if (mutex_lock_killable(&ctx->submit_lock))
			return -EINTR;
		submitted = kcoll_submit(ctx, e->to_submit);
		mutex_unlock(&ctx->submit_lock);
		if (submitted < 0)
			return submitted;
	}
	if ((e->flags & KCOLL_ENTER_GETEVENTS) && e->min_complete) {
		err = kcoll_wait(ctx, e->min_complete, e->timeout_ns);
		/* Consumed SQEs are reported even if the wait ended early:
		 * the application must learn that they are in flight. */
		if (err && !submitted)
			return err;
	}
	return submitted;
}

long kcoll_ctx_eventfd(struct kcoll_ctx *ctx, const struct kcoll_eventfd *e)
{
	struct eventfd_ctx *new = NULL, *old = NULL;
	long err = 0;

	if (e->resv)
		return -EINVAL;
	if (e->fd != -1) {
		if (e->fd < 0)
			return -EBADF;
		new = eventfd_ctx_fdget(e->fd);
		if (IS_ERR(new))
			return PTR_ERR(new);
	}

	spin_lock_irq(&ctx->cq_lock);
	if (new && ctx->evfd) {
		err = -EBUSY;
		old = new;	/* drop the reference just taken */
	} else if (!new && !ctx->evfd) {
		err = -ENOENT;
	} else {
		old = ctx->evfd;
		ctx->evfd = new;
	}
	spin_unlock_irq(&ctx->cq_lock);
	if (old)
		eventfd_ctx_put(old);
	return err;
}

__poll_t kcoll_ctx_poll_mask(struct kcoll_ctx *ctx)
{
	__poll_t mask = 0;
	u32 queued;

	if (!smp_load_acquire(&ctx->ready))
		return 0;
	if (kcoll_cq_has(ctx, 1))
		mask |= EPOLLIN | EPOLLRDNORM;
	/* The kernel's own SQ head, not the shared copy the app can write. */
	queued = kcoll_ring_used(READ_ONCE(ctx->sq_head),
				 READ_ONCE(*ctx->r.sq_tail));
	if (queued < ctx->layout.sq_entries)
		mask |= EPOLLOUT | EPOLLWRNORM;
	return mask;
}

/*
 * The file is gone: stop what can be stopped, wait for the rest, then drop
 * the file's reference. No request runs once this returns.
 */
void kcoll_ctx_release(struct kcoll_ctx *ctx)
{
	struct kcoll_req *req, *tmp;
	LIST_HEAD(cancelled);
	int nr = 0;

	/* Collectives end with their communicators (-ECANCELED). */
	kcoll_ctx_comms_release(ctx);

	/* Under the lock only stop what can be stopped; finish it after. */
	spin_lock_irq(&ctx->cq_lock);
	list_for_each_entry_safe(req, tmp, &ctx->reqs, node) {
		const struct kcoll_opdef *op = &kcoll_ops[req->sqe.opcode];

		if (op->cancel && op->cancel(req))
			list_move_tail(&req->node, &cancelled);
	}
	spin_unlock_irq(&ctx->cq_lock);

	list_for_each_entry_safe(req, tmp, &cancelled, node) {
		/* The file still holds a reference: never the last put. */
		kcoll_req_complete(req, -ECANCELED);
		nr++;
	}
	if (nr)
		pr_debug("released context with %d request(s) cancelled\n", nr);

	/* Requests whose completion was already running finish on their own. */
	wait_event(ctx->cq_wait, ({
		bool empty;

		spin_lock_irq(&ctx->cq_lock);
		empty = list_empty(&ctx->reqs);
		spin_unlock_irq(&ctx->cq_lock);
		empty;
	}));
	kref_put(&ctx->ref, kcoll_ctx_free);
}

int kcoll_ring_init(void)
{
	/* Charged to the submitter's memory cgroup. */
	kcoll_req_cache = KMEM_CACHE(kcoll_req, SLAB_ACCOUNT);
	return kcoll_req_cache ? 0 : -ENOMEM;
}

void kcoll_ring_exit(void)
{
	kmem_cache_destroy(kcoll_req_cache);
}
