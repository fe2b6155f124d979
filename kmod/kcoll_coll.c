// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll collective engine, issue: an SQE becomes an operation (its buffers
 * checked, pinned or taken from registrations, its schedule built) and is
 * queued on its communicator. The engine's parts and what they share:
 * kcoll_engine.h.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "kcoll.h"
#include "kcoll_types.h"
#include "kcoll_comm.h"
#include "kcoll_mem.h"
#include "kcoll_reg.h"
#include "kcoll_coll.h"
#include "kcoll_ring.h"
#include "kcoll_sysfs.h"
#include "kcoll_tune.h"
#include "kcoll_engine.h"
#include "kcoll_reduce.h"
#include "kcoll_cost.h"
#include "kcoll_shape.h"
#include "kcoll_stats.h"
#include "kcoll_regcache.h"
#include "kcoll_gpu.h"
#include "kcoll_quota.h"

/* Buffer @which of @op: a view of @mem's [@addr, @addr + @len), whose use
 * the operation now holds. Its callers found the range inside @mem; a
 * range that is not (which they must never pass) is refused here too,
 * before any address is derived from it. */
static int kcoll_op_view(struct kcoll_task *op, int which,
			 struct kcoll_mem *mem, u64 addr, size_t len)
{
	struct kcoll_buf *b = &op->bufs[which];
	size_t delta = addr - mem->addr;

	if (addr < mem->addr || delta > mem->len || len > mem->len - delta) {
		kcoll_mem_put(mem);
		return -EFAULT;
	}
	*b = mem->buf;
	b->off0 = mem->buf.off0 + delta;
	/* NULL stays NULL: memory the CPU must not touch. */
	b->vaddr = mem->buf.vaddr ? mem->buf.vaddr + delta : NULL;
	b->len = len;
	op->mems[which] = mem;
	return 0;
}

/*
 * Plain buffer @which of @op (its want[] filled in), outside dev_sem:
 * pinned for the registration cache (a new entry: a use, no view yet),
 * or as the operation's own pages.
 */
static int kcoll_op_pin_plain(struct kcoll_task *op, int which)
{
	struct kcoll_op_want *w = &op->want[which];
	int err;

	/* Registered anyway: kept for the next operation on these pages. */
	if (!op->unreg) {
		err = kcoll_cache_pin(op->comm, w->addr, w->len, w->writable,
				      &op->mems[which]);
		if (err != -EAGAIN)
			return err;
	}
	return kcoll_cache_pin_user(&op->bufs[which], w->addr, w->len,
				    w->writable);
}

/*
 * Buffer @which (SEND or RECV) of @op, before dev_sem: the range is
 * checked, and a plain one pinned, which may fault (kcoll_op_pin_plain()),
 * unless the registration cache may hold it: kcoll_op_take_cached() looks
 * under dev_sem, and pins only what it did not find. kcoll_op_bind_buf()
 * does the rest.
 */
static int kcoll_op_pin(struct kcoll_task *op, int which, u64 addr,
			u32 handle, u64 elems, bool writable)
{
	struct kcoll_op_want *w = &op->want[which];
	size_t len;

	if (check_mul_overflow((size_t)elems, op->esize, &len))
		return -EOVERFLOW;
	if (!len)
		return 0;
	/* Checked before anything compares with it: a registration's
	 * addresses are the caller's names (a dma-buf's may be a device's),
	 * a plain buffer's are its own process's. */
	if (addr + len < addr || (!handle && addr + len > TASK_SIZE))
		return -EFAULT;
	*w = (struct kcoll_op_want){ .addr = addr, .len = len,
				     .handle = handle, .writable = writable };
	if (handle)
		return 0;
	if (!op->unreg && kcoll_cache_on(len)) {
		w->cached = true;
		return 0;
	}
	return kcoll_op_pin_plain(op, which);
}

/* kcoll_op_bind()'s answer when the cache lacked a buffer:
 * kcoll_op_pin_missed(). */
#define KCOLL_OP_MISSED	1

/*
 * The first thing under dev_sem: a use of the cached entry of each buffer
 * the cache may hold (taken here, not before: a use taken before dev_sem
 * would keep the entry's MRs alive through the other buffer's pin,
 * however long that waits, where a device removal cannot take them once
 * an invalidation has taken the entry off the cache). 0, or
 * KCOLL_OP_MISSED if one has none: the uses taken are dropped again and
 * kcoll_op_pin_missed() pins that buffer, outside dev_sem.
 */
static int kcoll_op_take_cached(struct kcoll_task *op)
{
	struct kcoll_op_want *w;
	bool missed = false;
	int i;

	lockdep_assert_held(&op->comm->dev_sem);
	for (i = KCOLL_SBUF_SEND; i <= KCOLL_SBUF_RECV; i++) {
		w = &op->want[i];
		if (!w->cached)
			continue;
		op->mems[i] = kcoll_cache_take(op->comm, w->addr, w->len,
					       w->writable);
		if (!op->mems[i]) {
			w->cached = false;
			w->missed = true;
			missed = true;
		}
	}
	if (!missed)
		return 0;
	for (i = KCOLL_SBUF_SEND; i <= KCOLL_SBUF_RECV; i++) {
		if (op->want[i].cached && op->mems[i]) {
			kcoll_mem_put(op->mems[i]);
			op->mems[i] = NULL;
		}
	}
	return KCOLL_OP_MISSED;
}

/*
 * Outside dev_sem again: the buffers kcoll_op_take_cached() found no
 * cached entry for, pinned (a new entry, or the operation's own pages).
 * Each buffer comes here at most once, so a submission binds at most
 * three times.
 */
static int kcoll_op_pin_missed(struct kcoll_task *op)
{
	int i, err;

	for (i = KCOLL_SBUF_SEND; i <= KCOLL_SBUF_RECV; i++) {
		if (!op->want[i].missed)
			continue;
		op->want[i].missed = false;
		err = kcoll_op_pin_plain(op, i);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Buffer @which of @op, under dev_sem: a view of a registration (the
 * SQE's, or the cache's, registered now if it is new), or the pages
 * kcoll_op_pin() pinned, registered unless the operation goes
 * unregistered.
 */
static int kcoll_op_bind_buf(struct kcoll_task *op, int which)
{
	const struct kcoll_op_want *w = &op->want[which];
	struct kcoll_comm *comm = op->comm;
	struct kcoll_mem *mem;
	int err = 0;

	lockdep_assert_held(&comm->dev_sem);
	if (!w->len)
		return 0;
	if (w->handle) {
		mem = kcoll_mem_get(op->req->ctx, comm, w->handle, w->addr,
				    w->len, &err);
		if (!mem)
			return err;
		/* KCOLL_REG_READONLY: pinned for reading only. */
		if (w->writable && !mem->buf.writable) {
			kcoll_mem_put(mem);
			return -EACCES;
		}
		return kcoll_op_view(op, which, mem, w->addr, w->len);
	}
	mem = op->mems[which];
	if (mem) {
		op->mems[which] = NULL;	/* the view takes the use */
		err = w->cached ? 0 : kcoll_cache_commit(comm, mem);
		if (err) {
			kcoll_mem_put(mem);
			return err;
		}
		return kcoll_op_view(op, which, mem, w->addr, w->len);
	}
	if (op->unreg)
		return 0;
	return kcoll_buf_register(&op->bufs[which], comm);
}

/* Does a step of @ph run on the CPU over a buffer it must not touch? (Its
 * copy does not: the NIC makes it, kcoll_nic_copy().) */
static bool kcoll_phase_touches_nocpu(const struct kcoll_task *op,
				      const struct kcoll_phase *ph)
{
	const struct kcoll_buf *b = op->bufs;

	if (ph->avg_cnt && b[ph->avg.buf].nocpu)
		return true;
	return ph->has_recv && ph->recv.reduce &&
	       (b[ph->recv.dst.buf].nocpu || b[ph->recv.operand.buf].nocpu);
}

/*
 * An operation on KCOLL_REG_NO_CPU memory moves it with the NIC only: it
 * needs a KCOLL_COMM_DEVMEM communicator whose every peer is reached
 * through the NIC (no eager slots, no intra-node copies), registered
 * buffers (no staging, no inline sends; local copies are the NIC's), and a
 * schedule without a CPU step (a reduction, the AVG finish) on such
 * memory, unless the operation is stream-ordered (KCOLL_SQE_F_GPU: the
 * GPU reduces, kcoll_gpu.c). -EOPNOTSUPP otherwise.
 */
static int kcoll_op_nocpu(struct kcoll_task *op)
{
	struct kcoll_comm *comm = op->comm;
	struct kcoll_phase ph;
	u32 i, n;
	int err;

	if (!comm->devmem || comm->nranks == 1 ||
	    comm->remote_peers != comm->nranks - 1)
		return -EOPNOTSUPP;
	/* Stream-ordered: the GPU does the CPU's steps (kcoll_gpu.c);
	 * otherwise no reduction at all. */
	if (op->reduce && !op->gpu)
		return -EOPNOTSUPP;
	n = op->gpu ? 0 : kcoll_sched_nphases(&op->args);
	for (i = 0; i < n; i++) {
		kcoll_sched_phase(&op->args, i, &ph);
		if (kcoll_phase_touches_nocpu(op, &ph))
			return -EOPNOTSUPP;
	}
	op->exec = &kcoll_exec_nocpu;
	if (op->unreg) {
		/* Everything goes by MR now: register what was pinned. */
		op->unreg = false;
		for (i = 0; i < KCOLL_SBUF_NR; i++) {
			if (op->mems[i] || !op->bufs[i].npages)
				continue;
			err = kcoll_buf_register(&op->bufs[i], comm);
			if (err)
				return err;
		}
	}
	kcoll_stat_add(KCOLL_STAT_NOCPU_OPS, 1);
	return 0;
}

/*
 * A v-variant's count table (uapi struct kcoll_vec): copied in once, at
 * submission, charged to the user's kernel memory (n <= KCOLL_MAX_RANKS:
 * at most 128 KiB, with REDUCE_SCATTERV's block offsets), and checked
 * (-ERANGE, -EINVAL); the schedules read only this copy, so the user's
 * later writes to the table change nothing. Stream-ordered ones
 * (KCOLL_FEAT_GPU_VEC) take the same path: the GPU's steps come from the
 * same schedule, which libcoll runs on its own copy.
 */
static int kcoll_op_vec(struct kcoll_task *op, const struct kcoll_sqe *sqe)
{
	struct kcoll_comm *comm = op->comm;
	size_t words = (size_t)kcoll_shape(sqe->opcode)->vec * comm->nranks;
	/* REDUCE_SCATTERV: room for its block offsets after the table. */
	size_t pre = sqe->opcode == KCOLL_OP_REDUCE_SCATTERV ?
		     comm->nranks : 0;
	int err;

	op->vec_bytes = (words + pre) * sizeof(u64);
	err = kcoll_quota_charge_bytes(comm->quota, op->vec_bytes);
	if (err)
		return err;
	op->vec = kvmalloc(op->vec_bytes, GFP_KERNEL_ACCOUNT);
	if (!op->vec) {
		kcoll_quota_uncharge_bytes(comm->quota, op->vec_bytes);
		return -ENOMEM;
	}
	op->vec_quota = comm->quota;
	if (copy_from_user(op->vec, u64_to_user_ptr(sqe->vec_addr),
			   words * sizeof(u64)))
		return -EFAULT;
	op->args.vec = op->vec;
	op->args.vec_pre = pre ? op->vec + words : NULL;
	return kcoll_sched_vec_check(&op->args);
}

/*
 * The first part of @op's preparation, without dev_sem: the SQE checked
 * against the communicator, the v-variant table copied in, the schedule
 * chosen, plain buffers pinned, scratch allocated. Copies and pins may
 * fault, and a fault may wait on the buffer's owner for as long as it
 * likes: nothing here holds what another user's work (a device removal, a
 * destroy) waits for.
 */
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
	op->gpu = sqe->flags & KCOLL_SQE_F_GPU;
	/* Host memory: its copies and reductions run on this CPU. */
	op->exec = &kcoll_exec_cpu;
	op->prio = sqe->prio;		/* <= KCOLL_PRIO_MAX: checked at submit */
	a->opcode = sqe->opcode;
	a->redop = sqe->redop;
	a->rank = comm->rank;
	a->nranks = comm->nranks;
	a->count = kcoll_shape(sqe->opcode)->vec ? 0 : sqe->count;
	a->root = kcoll_shape(sqe->opcode)->uses & KCOLL_USES_PEER ?
		  sqe->peer : 0;
	if (sqe->opcode == KCOLL_OP_BARRIER) {
		op->esize = 1;
	} else {
		op->esize = kcoll_dtype_size(sqe->dtype);
		if (!op->esize)
			return -EINVAL;
	}
	if (sqe->redop) {
		/* kcoll_sqe_check() refused AVG of an integer type; the
		 * table has no function for any pair it refused. */
		op->reduce = kcoll_reduce_active(sqe->dtype, sqe->redop);
		if (!op->reduce)
			return -EINVAL;
	}
	if (a->root >= n || (p2p && a->root == comm->rank))
		return -EINVAL;
	if (kcoll_shape(sqe->opcode)->vec) {
		/* Counts and displacements <= 2^48: byte sizes fit. */
		err = kcoll_op_vec(op, sqe);
		if (err)
			return err;
		a->in_place = kcoll_sched_vec_in_place(a, op->esize,
						       sqe->send_addr,
						       sqe->recv_addr);
	} else {
		/* Whole-buffer sizes must fit comfortably in size_t bytes. */
		if (sqe->count > (U64_MAX >> 16) / n / op->esize)
			return -EOVERFLOW;
		a->in_place = kcoll_shape_in_place(kcoll_shape(sqe->opcode),
						   comm->rank, a->root,
						   sqe->count, op->esize,
						   sqe->send_addr,
						   sqe->recv_addr);
	}
	/*
	 * Same inputs on every rank, same choice (kcoll_tune.c). A
	 * stream-ordered op runs the default, as libcoll planned it, and so
	 * does every op of a DEVMEM communicator: a rank reducing on its
	 * CPU then runs the same schedule as one reducing on its GPU.
	 */
	if (!p2p && !op->gpu && !comm->devmem && !a->vec)
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
	err = kcoll_op_pin(op, KCOLL_SBUF_SEND, sqe->send_addr, sqe->send_mr,
			   scount,
			   a->in_place && sqe->opcode == KCOLL_OP_REDUCE_SCATTER);
	if (!err)
		err = kcoll_op_pin(op, KCOLL_SBUF_RECV, sqe->recv_addr,
				   sqe->recv_mr, rcount, true);
	/*
	 * Scratch is allocated here, before dev_sem: as large as the
	 * operation (up to the user's quota), it may take seconds, and
	 * what waits then is this submission, not the device's removal or
	 * the comm's destroy (until 2026-12-06 they waited with it).
	 * Registered in kcoll_op_bind(); a stream-ordered op has its own.
	 */
	if (err || !tcount || op->gpu)
		return err;
	if (check_mul_overflow((size_t)tcount, op->esize, &tlen))
		return -EOVERFLOW;
	return kcoll_buf_alloc(&op->bufs[KCOLL_SBUF_TMP], tlen, comm->quota);
}

/*
 * The rest of @op's preparation, under comm->dev_sem (read), which keeps
 * the device: views of registrations, registrations of what was pinned
 * and of the scratch, the stream-ordered and device-memory parts. Nothing
 * here touches user memory.
 */
static int kcoll_op_bind(struct kcoll_task *op, const struct kcoll_sqe *sqe)
{
	struct kcoll_comm *comm = op->comm;
	int err;

	lockdep_assert_held(&comm->dev_sem);
	kcoll_cache_fit(comm);
	err = kcoll_op_take_cached(op);
	if (err)
		return err;
	err = kcoll_op_bind_buf(op, KCOLL_SBUF_SEND);
	if (err)
		return err;
	err = kcoll_op_bind_buf(op, KCOLL_SBUF_RECV);
	if (err)
		return err;
	/* A stream-ordered op: its data is the GPU's whatever it is. */
	op->nocpu = op->gpu || op->bufs[KCOLL_SBUF_SEND].nocpu ||
		    op->bufs[KCOLL_SBUF_RECV].nocpu;
	if (op->nocpu) {
		err = kcoll_op_nocpu(op);
		if (err)
			return err;
	}
	if (op->gpu)
		return kcoll_gpu_prepare(op, sqe);
	/* The scratch of kcoll_op_prepare() (kcoll_op_nocpu() may have
	 * registered it with the rest: a registered buffer stays as it is). */
	if (!op->unreg)
		err = kcoll_buf_register(&op->bufs[KCOLL_SBUF_TMP], comm);
	return err;
}

/* A new operation of @req on @comm, not yet prepared; NULL: -ENOMEM. */
static struct kcoll_task *kcoll_op_new(struct kcoll_req *req,
				       struct kcoll_comm *comm)
{
	const struct kcoll_sqe *sqe = &req->sqe;
	struct kcoll_task *op;

	op = kzalloc(sizeof(*op), GFP_KERNEL_ACCOUNT);
	if (!op)
		return NULL;
	op->req = req;
	op->user_data = sqe->user_data;
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
	INIT_LIST_HEAD(&op->gmr_due);
	if (op->kind == KCOLL_KIND_COLL) {
		/* The peers whose signature matched, by rank. */
		op->sig_seen = bitmap_zalloc(comm->nranks, GFP_KERNEL_ACCOUNT);
		if (!op->sig_seen) {
			kfree(op);
			return NULL;
		}
	}
	return op;
}

/* Has @comm failed for @sqe? Its error, or 0. A hint, without
 * comm->lock: the check under the lock at queueing decides. */
static int kcoll_comm_dead_hint(struct kcoll_comm *comm,
				const struct kcoll_sqe *sqe)
{
	int err = READ_ONCE(comm->error);

	if (READ_ONCE(comm->aborted))
		return -ECANCELED;
	/* Peers that left (-ECONNRESET) may have completed what a
	 * collective needs of them: only a shutdown ends those. */
	if ((err && (sqe->opcode == KCOLL_OP_SEND || err != -ECONNRESET)) ||
	    READ_ONCE(comm->shutting_down))
		return err ?: -ECANCELED;
	return 0;
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
	op = kcoll_op_new(req, comm);
	if (!op) {
		err = -ENOMEM;
		goto out_refused;
	}
	/*
	 * A dead comm fails before anything is pinned (one mutex round trip
	 * less per submission: the check under comm->lock below decides).
	 * Then what may fault (pins, the v-variant table) runs before
	 * dev_sem: a page may wait on its owner for as long as it likes (a
	 * userfaultfd region, a FUSE file), and what waits is this
	 * submission alone, not the device's removal or the comm's destroy
	 * (until 2026-12-05 they waited with it).
	 */
	err = kcoll_comm_dead_hint(comm, sqe);
	if (!err)
		err = kcoll_op_prepare(op, sqe);
bind:
	/*
	 * From here to the queueing, nothing takes the comm's device away
	 * (its removal and the comm's destroy wait on dev_sem): what bind
	 * registers is queued with the op, where they find it, or released
	 * here, and a cached registration is taken only here, with its MRs
	 * (kcoll_op_take_cached(); a buffer it lacks sends us back once to
	 * pin, kcoll_op_pin_missed()). The op is freed under it too: its
	 * MRs, and those of a cache entry whose last use it holds, die while
	 * the device is certainly there.
	 */
	down_read(&comm->dev_sem);
	if (err)
		goto out_unlock_dev;
	err = kcoll_comm_dead_hint(comm, sqe);
	if (!err)
		err = kcoll_op_bind(op, sqe);
	if (err == KCOLL_OP_MISSED) {
		up_read(&comm->dev_sem);
		err = kcoll_op_pin_missed(op);
		goto bind;
	}
	if (err)
		goto out_unlock_dev;

	op->bytes = kcoll_sched_total(&op->args) * op->esize;
	mutex_lock(&comm->lock);
	/* The seq it gets if it is queued (peers that left after completing
	 * it do not keep it from running). */
	if (op->kind == KCOLL_KIND_COLL)
		op->seq = comm->coll_seq;
	else if (sqe->opcode == KCOLL_OP_RECV && comm->conns[op->args.root])
		op->seq = comm->conns[op->args.root]->k[KCOLL_KIND_P2P].p2p_recv_seq;
	err = kcoll_comm_op_usable_locked(comm, op);
	if (err) {
		mutex_unlock(&comm->lock);
		goto out_unlock_dev;
	}
	if (op->gpu) {
		err = kcoll_gpu_queue(op);
		if (err) {
			mutex_unlock(&comm->lock);
			goto out_unlock_dev;
		}
	}
	if (op->kind == KCOLL_KIND_COLL) {
		comm->coll_seq++;	/* op->seq took it above */
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
out_refused:
	if (sqe->flags & KCOLL_SQE_F_GPU) {
		/* Its stream must not wait for it. */
		mutex_lock(&comm->lock);
		kcoll_gpu_refused(comm, sqe);
		mutex_unlock(&comm->lock);
	}
	kcoll_comm_put(comm);
	kcoll_req_complete(req, err);
}
