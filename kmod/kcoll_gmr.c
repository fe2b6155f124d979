// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll grant MRs: what a peer may write into, and for how long.
 *
 * A peer writes into our memory only through the rkey of a grant MR: one
 * fast-registration MR per grant (or per eager slot) covering exactly the
 * bytes granted. It is registered (IB_WR_REG_MR, under a fresh key) on the
 * connection's lane 0 right before the GRANT or CREDIT that names it, so
 * the NIC has it before the peer can know it; and invalidated
 * (IB_WR_LOCAL_INV) as soon as the data is in, or the grant is dropped.
 * The operation that granted its memory completes only once every one of
 * its grant MRs is invalid (op->gmrs), and a staging slot is granted
 * again only then: a write with an old rkey, past either end of a grant,
 * or after the operation, fails at the NIC with a remote access error and
 * changes no byte. The buffers' own MRs (kcoll_mem.c) are for local reads
 * only.
 *
 * When a connection fails its QPs are in the error state and nothing can
 * be invalidated through them: kcoll_gmr_work() drains them and
 * deregisters every MR still valid, and only then do the operations that
 * granted them let go of their memory.
 *
 * Everything here runs under comm->lock, except the drain work's waits.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/random.h>
#include <linux/scatterlist.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include "kcoll_comm.h"

#define KCOLL_GMR_ACCESS	(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE)

static void kcoll_gmr_inv_done(struct ib_cq *cq, struct ib_wc *wc);

static void kcoll_gmr_destroy(struct kcoll_gmr *g)
{
	if (g->mr)
		ib_dereg_mr(g->mr);
	kfree(g);
}

static struct kcoll_gmr *kcoll_gmr_alloc(struct kcoll_conn *conn)
{
	unsigned int pages = conn->comm->seg_pages;
	struct kcoll_gmr *g;

	g = kzalloc(struct_size(g, sg, pages), GFP_KERNEL_ACCOUNT);
	if (!g)
		return ERR_PTR(-ENOMEM);
	g->mr = ib_alloc_mr(conn->comm->pd, IB_MR_TYPE_MEM_REG, pages);
	if (IS_ERR(g->mr)) {
		int err = PTR_ERR(g->mr);

		kfree(g);
		return ERR_PTR(err);
	}
	g->conn = conn;
	g->max_pages = pages;
	g->slot = -1;
	g->eslot = -1;
	g->state = KCOLL_GMR_FREE;
	g->inv_cqe.done = kcoll_gmr_inv_done;
	INIT_LIST_HEAD(&g->due);
	conn->gmr_nr++;
	return g;
}

/*
 * An invalid grant MR of @conn's, from its pool or new: -ENOBUFS when the
 * connection has KCOLL_GMR_MAX already (a grant waits for one to come
 * back), -ENODEV once the device is gone. Must hold comm->lock.
 */
struct kcoll_gmr *kcoll_gmr_get(struct kcoll_conn *conn)
{
	struct kcoll_gmr *g;

	lockdep_assert_held(&conn->comm->lock);
	g = list_first_entry_or_null(&conn->gmr_free, struct kcoll_gmr, node);
	if (g) {
		list_del(&g->node);
		return g;
	}
	if (conn->gmr_nr >= KCOLL_GMR_MAX)
		return ERR_PTR(-ENOBUFS);
	if (!conn->comm->pd)
		return ERR_PTR(-ENODEV);
	return kcoll_gmr_alloc(conn);
}

/* @g was never registered (or is invalid again): back to the pool. */
void kcoll_gmr_put(struct kcoll_gmr *g)
{
	lockdep_assert_held(&g->conn->comm->lock);
	g->state = KCOLL_GMR_FREE;
	g->op = NULL;
	list_add(&g->node, &g->conn->gmr_free);
}

/*
 * Map bytes [@off, @off + @len) of @b (registered: its pages DMA-mapped)
 * into @g and give it its next key. *@addr and *@rkey are what the peer
 * is told. The iova is random (a kernel address would defeat KASLR, see
 * kcoll_buf_register()) and keeps the first byte's offset in its page,
 * which providers derive the page offset from. 0, or -EINVAL when the
 * range does not fit the MR (a caller's bug) or the provider refuses it.
 */
int kcoll_gmr_map(struct kcoll_gmr *g, const struct kcoll_buf *b,
		  size_t off, size_t len, u64 *addr, u32 *rkey)
{
	size_t pos = b->off0 + off, first = pos >> PAGE_SHIFT;
	size_t in_page = pos & ~PAGE_MASK, left = len;
	unsigned int n = DIV_ROUND_UP(in_page + len, PAGE_SIZE), i;
	int mapped;

	if (!len || !b->dma || off + len > b->len || off + len < off ||
	    n > g->max_pages || WARN_ON_ONCE(g->state != KCOLL_GMR_FREE))
		return -EINVAL;
	sg_init_table(g->sg, n);
	for (i = 0; i < n; i++) {
		size_t o = i ? 0 : in_page;
		size_t l = min_t(size_t, left, PAGE_SIZE - o);

		/* Only the DMA side of the list is read by ib_map_mr_sg(). */
		sg_dma_address(&g->sg[i]) = b->dma[first + i] + o;
		sg_dma_len(&g->sg[i]) = l;
		left -= l;
	}
	mapped = ib_map_mr_sg(g->mr, g->sg, n, NULL, PAGE_SIZE);
	if (mapped != (int)n)
		return mapped < 0 ? mapped : -EINVAL;
	g->mr->iova = ((get_random_u64() & (BIT_ULL(40) - 1)) & PAGE_MASK) |
		      in_page;
	ib_update_fast_reg_key(g->mr, ib_inc_rkey(g->mr->rkey));
	*addr = g->mr->iova;
	*rkey = g->mr->rkey;
	return 0;
}

/* Count @g as @op's until it is invalid again. */
static void kcoll_gmr_attach(struct kcoll_gmr *g, struct kcoll_task *op)
{
	g->op = op;
	if (op)
		op->gmrs++;
	g->state = KCOLL_GMR_LIVE;
	list_add_tail(&g->node, &g->conn->gmr_busy);
}

/* @g can no longer be written through: its grant's memory is free. */
static void kcoll_gmr_detach(struct kcoll_gmr *g)
{
	struct kcoll_conn *conn = g->conn;

	if (g->op)
		g->op->gmrs--;
	g->op = NULL;
	if (g->slot >= 0)
		__clear_bit(g->slot, &conn->slot_busy);
	g->slot = -1;
	if (!list_empty(&g->due))
		list_del_init(&g->due);
}

/*
 * Register mapped @g for @op (NULL: an eager slot) and send @m (the GRANT
 * or CREDIT naming it; NULL: the caller sends it next), one chain on lane
 * 0. On success @g is @op's until it is retired; on failure it is
 * untouched (-ENOBUFS: no room, try again later). Must hold comm->lock.
 */
int kcoll_gmr_grant(struct kcoll_gmr *g, struct kcoll_task *op,
		    struct kcoll_wire_msg *m)
{
	struct kcoll_conn *conn = g->conn;
	struct ib_sge sge = {};
	struct ib_send_wr send = {
		.wr_cqe = &conn->lane[0].tx_cqe,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_INLINE,
	};
	struct ib_reg_wr reg = {
		.wr = {
			.wr_cqe = &conn->lane[0].tx_cqe,
			.opcode = IB_WR_REG_MR,
			.next = m ? &send : NULL,
		},
		.mr = g->mr,
		.key = g->mr->rkey,
		.access = KCOLL_GMR_ACCESS,
	};
	u32 posted;
	int err;

	lockdep_assert_held(&conn->comm->lock);
	if (conn->state != KCOLL_CONN_UP)
		return -ENOTCONN;
	if (m) {
		sge.addr = (uintptr_t)m;
		sge.length = sizeof(*m);
	}
	if (kcoll_conn_sq_room(conn, 0) < (m ? 2 : 1))
		return -ENOBUFS;
	posted = conn->lane[0].sq_posted;
	err = kcoll_conn_post(conn, 0, &reg.wr);
	if (err && conn->lane[0].sq_posted != posted) {
		/* The provider took the REG_MR but not the message: the MR
		 * is (or will be) valid and nobody knows it. */
		kcoll_gmr_attach(g, op);
		kcoll_gmr_retire(g, -1);
		return err;
	}
	if (!err)
		kcoll_gmr_attach(g, op);
	return err;
}

static int kcoll_gmr_post_inv(struct kcoll_gmr *g)
{
	struct ib_send_wr wr = {
		.wr_cqe = &g->inv_cqe,
		.opcode = IB_WR_LOCAL_INV,
		.ex.invalidate_rkey = g->mr->rkey,
	};

	return kcoll_conn_post(g->conn, 0, &wr);
}

/*
 * The grant @g served is over (its data is in, or it was dropped): make
 * it invalid. @slot: a staging slot to free only then (-1: none). Until
 * the LOCAL_INV completes the op still counts it. A full send queue
 * leaves it due (kcoll_gmr_retry()); a failed connection leaves it to
 * kcoll_gmr_work(). Must hold comm->lock.
 */
void kcoll_gmr_retire(struct kcoll_gmr *g, int slot)
{
	struct kcoll_conn *conn = g->conn;
	int err;

	lockdep_assert_held(&conn->comm->lock);
	if (slot >= 0)
		g->slot = slot;
	if (g->state != KCOLL_GMR_LIVE)
		return;
	if (!list_empty(&conn->gmr_inv_due)) {
		/* Behind the ones already waiting. */
		if (list_empty(&g->due))
			list_add_tail(&g->due, &conn->gmr_inv_due);
		return;
	}
	err = kcoll_gmr_post_inv(g);
	if (!err) {
		g->state = KCOLL_GMR_INVAL;
	} else if (err == -ENOBUFS) {
		list_add_tail(&g->due, &conn->gmr_inv_due);
	} else {
		g->state = KCOLL_GMR_STALE;
		if (conn->state == KCOLL_CONN_UP)
			kcoll_conn_kill(conn, -EIO);
	}
}

/* Post the invalidations a full send queue held back. Must hold
 * comm->lock. */
void kcoll_gmr_retry(struct kcoll_conn *conn)
{
	struct kcoll_gmr *g, *tmp;

	lockdep_assert_held(&conn->comm->lock);
	list_for_each_entry_safe(g, tmp, &conn->gmr_inv_due, due) {
		int err;

		if (conn->state != KCOLL_CONN_UP)
			return;
		err = kcoll_gmr_post_inv(g);
		if (err == -ENOBUFS)
			return;
		list_del_init(&g->due);
		if (err) {
			g->state = KCOLL_GMR_STALE;
			kcoll_conn_kill(conn, -EIO);
			return;
		}
		g->state = KCOLL_GMR_INVAL;
	}
}

static void kcoll_gmr_inv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kcoll_gmr *g = container_of(wc->wr_cqe, struct kcoll_gmr,
					   inv_cqe);
	struct kcoll_lane *lane = wc->qp->qp_context;
	struct kcoll_conn *conn = g->conn;
	struct kcoll_comm *comm = conn->comm;

	mutex_lock(&comm->lock);
	lane->sq_posted--;
	conn->sq_posted--;
	lane->sent_at = jiffies;
	if (wc->status == IB_WC_SUCCESS && g->state == KCOLL_GMR_INVAL) {
		kcoll_gmr_detach(g);
		if (g->eslot >= 0) {
			g->state = KCOLL_GMR_FREE;	/* stays the slot's */
			list_del_init(&g->node);
		} else {
			list_del(&g->node);
			kcoll_gmr_put(g);
		}
	} else {
		/* Flushed, or failed: still valid as far as we know. */
		if (g->state == KCOLL_GMR_INVAL)
			g->state = KCOLL_GMR_STALE;
		if (wc->status != IB_WC_WR_FLUSH_ERR)
			pr_warn_ratelimited("comm %llx rank %u: invalidating a grant to rank %u failed: %s\n",
					    comm->uid, comm->rank, conn->peer,
					    ib_wc_status_msg(wc->status));
		kcoll_conn_kill(conn, -EIO);
	}
	kcoll_gmr_retry(conn);
	kcoll_engine_reap(comm);
	if (comm->shutting_down && !conn->sq_posted)
		wake_up_all(&comm->wait);
	mutex_unlock(&comm->lock);
}

/*
 * After a loss: once the QPs are drained (no WR of ours can still use an
 * MR), deregister every grant MR that may be valid, which frees its
 * grant's memory for the operation, and let the operations finish.
 */
static void kcoll_gmr_work(struct work_struct *work)
{
	struct kcoll_conn *conn = container_of(work, struct kcoll_conn,
					       gmr_work);
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_gmr *g, *tmp;
	unsigned int i;

	/* kcoll_gmr_conn_shutdown() flushes this before the QPs go. */
	for (i = 0; i < conn->nlanes; i++)
		if (conn->lane[i].qp)
			ib_drain_sq(conn->lane[i].qp);
	mutex_lock(&comm->lock);
	list_for_each_entry_safe(g, tmp, &conn->gmr_busy, node) {
		list_del_init(&g->node);
		kcoll_gmr_detach(g);
		if (g->eslot >= 0)
			conn->egmr[g->eslot] = NULL;
		kcoll_gmr_destroy(g);
		conn->gmr_nr--;
	}
	kcoll_engine_reap(comm);
	wake_up_all(&comm->wait);
	mutex_unlock(&comm->lock);
}

void kcoll_gmr_conn_init(struct kcoll_conn *conn)
{
	INIT_LIST_HEAD(&conn->gmr_free);
	INIT_LIST_HEAD(&conn->gmr_busy);
	INIT_LIST_HEAD(&conn->gmr_inv_due);
	INIT_WORK(&conn->gmr_work, kcoll_gmr_work);
}

/*
 * @conn failed (its QPs are in the error state): nothing more is
 * invalidated through them. Must hold comm->lock.
 */
void kcoll_gmr_conn_lost(struct kcoll_conn *conn)
{
	struct kcoll_gmr *g, *tmp;

	lockdep_assert_held(&conn->comm->lock);
	list_for_each_entry_safe(g, tmp, &conn->gmr_inv_due, due)
		list_del_init(&g->due);
	if (list_empty(&conn->gmr_busy) || conn->gmr_gone)
		return;
	list_for_each_entry(g, &conn->gmr_busy, node)
		if (g->state == KCOLL_GMR_LIVE)
			g->state = KCOLL_GMR_STALE;
	kcoll_queue_work(&conn->gmr_work);
}

/*
 * The connection is going: no more drain work, and the one queued (if
 * any) is over when this returns; its QPs may then be destroyed. Must not
 * hold comm->lock.
 */
void kcoll_gmr_conn_stop(struct kcoll_conn *conn)
{
	mutex_lock(&conn->comm->lock);
	conn->gmr_gone = true;
	mutex_unlock(&conn->comm->lock);
	flush_work(&conn->gmr_work);
}

/*
 * The connection's QPs are destroyed (no WR of ours is left): every grant
 * MR goes, before the device's PD does. Must not hold comm->lock.
 */
void kcoll_gmr_conn_shutdown(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_gmr *g, *tmp;
	unsigned int i;

	mutex_lock(&comm->lock);
	list_for_each_entry_safe(g, tmp, &conn->gmr_busy, node) {
		list_del_init(&g->node);
		kcoll_gmr_detach(g);
		if (g->eslot >= 0)
			conn->egmr[g->eslot] = NULL;
		kcoll_gmr_destroy(g);
		conn->gmr_nr--;
	}
	list_for_each_entry_safe(g, tmp, &conn->gmr_free, node) {
		list_del(&g->node);
		kcoll_gmr_destroy(g);
		conn->gmr_nr--;
	}
	for (i = 0; i < KCOLL_EAGER_SLOTS; i++) {
		if (conn->egmr[i]) {
			kcoll_gmr_destroy(conn->egmr[i]);
			conn->egmr[i] = NULL;
			conn->gmr_nr--;
		}
	}
	mutex_unlock(&comm->lock);
}

/*
 * Eager slots through the NIC: one grant MR each, over exactly the slot,
 * kept by the slot; registered under its next key before each offer
 * (kcoll_gmr_eager_ready()), invalidated once a write has landed in it.
 * Must hold comm->lock.
 */
int kcoll_gmr_eager_setup(struct kcoll_conn *conn)
{
	unsigned int i;

	lockdep_assert_held(&conn->comm->lock);
	for (i = 0; i < KCOLL_EAGER_SLOTS; i++) {
		struct kcoll_gmr *g;

		if (conn->egmr[i])
			continue;
		if (conn->gmr_nr >= KCOLL_GMR_MAX + KCOLL_EAGER_SLOTS)
			return -ENOBUFS;
		g = kcoll_gmr_alloc(conn);
		if (IS_ERR(g))
			return PTR_ERR(g);
		g->eslot = i;
		INIT_LIST_HEAD(&g->node);
		conn->egmr[i] = g;
	}
	return 0;
}

/*
 * Eager slot @slot is about to be offered: register its MR under the next
 * key (the peer steps the key it knows the same way on a CREDITS). False:
 * not now (its MR is still being invalidated, or the send queue is full);
 * the offer waits. Must hold comm->lock.
 */
bool kcoll_gmr_eager_ready(struct kcoll_conn *conn, u32 slot)
{
	struct kcoll_gmr *g = conn->egmr[slot];
	u64 addr;
	u32 rkey;

	lockdep_assert_held(&conn->comm->lock);
	if (!g || g->state != KCOLL_GMR_FREE || !kcoll_conn_sq_room(conn, 0))
		return false;
	/* Mapped once, at one address (a CREDITS names none); each offer
	 * only changes the key. */
	if (!g->mapped) {
		if (kcoll_gmr_map(g, &conn->ebuf,
				  (size_t)slot * KCOLL_EAGER_SLOT_BYTES,
				  KCOLL_EAGER_SLOT_BYTES, &addr, &rkey))
			return false;
		g->mapped = true;
	} else {
		ib_update_fast_reg_key(g->mr, ib_inc_rkey(g->mr->rkey));
	}
	if (kcoll_gmr_grant(g, NULL, NULL)) {
		/* Only a provider's refusal: the connection is of no use. */
		kcoll_conn_kill(conn, -EIO);
		return false;
	}
	return true;
}

/* debugfs: @conn's grant MRs that a peer may be writing through. */
void kcoll_gmr_show(struct seq_file *m, struct kcoll_conn *conn)
{
	static const char * const names[] = {
		[KCOLL_GMR_FREE] = "free", [KCOLL_GMR_LIVE] = "live",
		[KCOLL_GMR_INVAL] = "invalidating", [KCOLL_GMR_STALE] = "stale",
	};
	struct kcoll_gmr *g;

	list_for_each_entry(g, &conn->gmr_busy, node)
		seq_printf(m, "    gmr rank %u rkey %#x iova %#llx len %llu %s%s\n",
			   conn->peer, g->mr ? g->mr->rkey : 0,
			   g->mr ? g->mr->iova : 0,
			   g->mr ? g->mr->length : 0, names[g->state],
			   g->eslot >= 0 ? " eager" : "");
}
