// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll grant MRs: what a peer may write into, and for how long.
 *
 * A peer writes into our memory only through the rkey of a grant MR: one
 * fast-registration MR per grant, covering exactly the bytes granted,
 * registered under a fresh key and a random iova before the GRANT that
 * names it is sent, and invalidated once the data is in (or the grant is
 * dropped, or the connection is lost) and before the memory it covers is
 * used for anything else: a staging slot is granted again, and an
 * operation completes and lets go of its pages, only after that
 * (op->gmrs). Eager slots have one each, over exactly the slot, registered
 * anew (invalidated, then registered under the next key) every time the
 * slot is offered. The buffers' own MRs (kcoll_mem.c) are for local reads
 * only. So a WRITE past either end of a grant, after its data landed,
 * after its operation, or with an old rkey fails at the NIC with a remote
 * access error and changes no byte.
 *
 * Registrations and invalidations go through the device's registration QP
 * (kcoll_ib_mr_ops()), synchronously, never on a data connection: rxe
 * stalls and then fails connections whose send queues mix local
 * operations with data (docs/DESIGN.md, "Memory registration"; seen again
 * here: 4-rank runs timed out and rxe re-executed a REG_MR after a
 * retransmission). Invalidations are batched: retiring a grant only marks
 * it (conn->gmr_inv_due); kcoll_gmr_flush() invalidates what is marked,
 * in the same batch as the next grant's registration, when a staging slot
 * or an MR is wanted, and before an operation may complete
 * (kcoll_op_settle()).
 *
 * Everything here runs under comm->lock, in process context.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/random.h>
#include <linux/scatterlist.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include "kcoll_types.h"
#include "kcoll_gmr.h"
#include "kcoll_mem.h"
#include "kcoll_stats.h"
#include "kcoll_conn.h"
#include "kcoll_xport.h"
#include "kcoll_ib.h"
#include "kcoll_quota.h"
#include "kcoll_comm.h"

#define KCOLL_GMR_ACCESS	(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE)

/* What one grant MR with room for @pages pages costs in kernel memory
 * (its scatterlist and the provider's page list), charged to the user. */
static size_t kcoll_gmr_bytes(unsigned int pages)
{
	return struct_size((struct kcoll_gmr *)NULL, sg, pages) +
	       (size_t)pages * sizeof(u64);
}

static void kcoll_gmr_destroy(struct kcoll_gmr *g)
{
	struct kcoll_conn *conn = g->conn;

	conn->gmr_nr--;
	if (g->mem) {
		g->mem->gmr_ties--;
		g->mem = NULL;
	}
	if (g->mr)
		kcoll_ib_dereg_mr(g->mr);
	kcoll_quota_uncharge_bytes(conn->comm->quota,
				   kcoll_gmr_bytes(g->max_pages));
	kvfree(g);
}

static struct kcoll_gmr *kcoll_gmr_alloc(struct kcoll_conn *conn)
{
	unsigned int pages = conn->comm->seg_pages;
	struct mem_cgroup *memcg;
	struct kcoll_gmr *g;
	int err;

	if (!conn->comm->pd)
		return ERR_PTR(-ENODEV);
	/* Bounded per connection (KCOLL_GMR_MAX) and per user (sysfs
	 * user_max_kernel_mb: -EDQUOT). */
	err = kcoll_quota_charge_bytes(conn->comm->quota,
				       kcoll_gmr_bytes(pages));
	if (err)
		return ERR_PTR(err);
	/* Often in a worker: charged to the comm's creator's memcg. */
	memcg = kcoll_comm_memcg_begin(conn->comm);
	g = kvzalloc(struct_size(g, sg, pages), KCOLL_GFP_CHARGED);
	kcoll_comm_memcg_end(memcg);
	if (!g) {
		err = -ENOMEM;
		goto out_uncharge;
	}
	g->mr = kcoll_ib_alloc_mr(conn->comm->pd, pages);
	if (IS_ERR(g->mr)) {
		err = PTR_ERR(g->mr);
		goto out_free;
	}
	g->conn = conn;
	g->max_pages = pages;
	g->slot = -1;
	g->eslot = -1;
	g->state = KCOLL_GMR_FREE;
	INIT_LIST_HEAD(&g->node);
	INIT_LIST_HEAD(&g->due);
	INIT_LIST_HEAD(&g->op_due);
	conn->gmr_nr++;
	return g;

out_free:
	kvfree(g);
out_uncharge:
	kcoll_quota_uncharge_bytes(conn->comm->quota, kcoll_gmr_bytes(pages));
	return ERR_PTR(err);
}

/*
 * The first MR of @conn's pool that may map @mem (NULL: memory that is
 * not a registration's or a cache entry's), on a device whose
 * invalidation is no fence when @tie: one already tied to @mem, else an
 * untied one. Must hold comm->lock.
 */
static struct kcoll_gmr *kcoll_gmr_pick(struct kcoll_conn *conn,
					struct kcoll_mem *mem, bool tie)
{
	struct kcoll_gmr *g, *untied = NULL;

	list_for_each_entry(g, &conn->gmr_free, node) {
		if (!tie || g->mem == mem)
			return g;
		if (!g->mem && !untied)
			untied = g;
	}
	return untied;
}

/*
 * MRs tied to a buffer that sit idle in @conn's pool hold the user's
 * kernel memory (user_max_kernel_mb, shared by all its communicators:
 * another's pool may be empty and need it) and the cgroup's. Once the
 * user has charged more than half its limit, past two windows of them
 * the longest-idle ones are deregistered, so that a process rotating over
 * many buffers keeps little more than an untied pool would. Must hold
 * comm->lock.
 */
static void kcoll_gmr_trim(struct kcoll_conn *conn)
{
	unsigned int keep = 2 * conn->window, n = 0;
	struct kcoll_gmr *g, *tmp;

	if (!kcoll_quota_bytes_pressed(conn->comm->quota))
		return;
	list_for_each_entry(g, &conn->gmr_free, node)
		n += !!g->mem;
	list_for_each_entry_safe(g, tmp, &conn->gmr_free, node) {
		if (n <= keep)
			break;
		if (!g->mem)
			continue;
		list_del_init(&g->node);
		kcoll_gmr_destroy(g);	/* waits for its packets */
		n--;
	}
}

/*
 * An invalid grant MR of @conn's, from its pool or new, to map bytes of
 * @mem (or, NULL, of memory that no registration or cache entry holds):
 * -ENOBUFS when the connection has KCOLL_GMR_MAX already (a grant waits
 * for one to come back), -ENODEV once the device is gone.
 *
 * With @tie (a device whose invalidation is no fence: rxe), a packet that
 * took an MR before its invalidation may still be copying through it, so
 * an MR that has mapped a registration's or cache entry's pages stays
 * tied to it (g->mem) until it is deregistered: it maps nothing else, and
 * the entry lets its pages go only after its tied MRs are deregistered
 * (kcoll_gmr_forget()). Where the pool has only MRs tied to other
 * memory and no new one may be allocated (KCOLL_GMR_MAX, the user's
 * quota, the cgroup's memory), its longest-idle one is deregistered and a
 * new one allocated; and with the user's kernel memory half spent it
 * keeps at most two windows of idle tied MRs (kcoll_gmr_trim()). Must
 * hold comm->lock.
 */
struct kcoll_gmr *kcoll_gmr_get(struct kcoll_conn *conn,
				struct kcoll_mem *mem, bool tie)
{
	struct kcoll_gmr *g;

	lockdep_assert_held(&conn->comm->lock);
	if (tie)
		kcoll_gmr_trim(conn);
	g = kcoll_gmr_pick(conn, mem, tie);
	if (!g && conn->gmr_nr >= KCOLL_GMR_MAX &&
	    !list_empty(&conn->gmr_inv_due)) {
		/* Retired ones come back (cheaper than a deregistration). */
		kcoll_gmr_flush(conn);
		g = kcoll_gmr_pick(conn, mem, tie);
	}
	if (g) {
		list_del_init(&g->node);
	} else {
		if (conn->gmr_nr < KCOLL_GMR_MAX) {
			g = kcoll_gmr_alloc(conn);
			/* Out of the user's quota or the cgroup's memory: an
			 * MR tied to other memory makes room. */
			if (!IS_ERR(g) || PTR_ERR(g) == -ENODEV ||
			    list_empty(&conn->gmr_free))
				goto out;
		} else if (list_empty(&conn->gmr_free)) {
			return ERR_PTR(-ENOBUFS);
		}
		g = list_first_entry(&conn->gmr_free, struct kcoll_gmr, node);
		list_del_init(&g->node);
		kcoll_gmr_destroy(g);	/* waits for its packets */
		g = kcoll_gmr_alloc(conn);
	}
out:
	if (!IS_ERR(g) && tie && mem && !g->mem) {
		g->mem = mem;
		mem->gmr_ties++;
	}
	return g;
}

/*
 * @mem (a registration or a cache entry of @comm's) is about to let its
 * pages go: on a device whose invalidation is no fence, the grant MRs tied
 * to it (kcoll_gmr_get()) are deregistered first, which waits for the
 * packets that may still be copying through them into those pages. They
 * are all invalid by now, in their pools (no operation uses @mem, and an
 * operation completes, or returns, only once its grants are), or retired
 * and due: those are invalidated first. Must hold comm->lock.
 */
void kcoll_gmr_forget(struct kcoll_comm *comm, struct kcoll_mem *mem)
{
	struct kcoll_gmr *g, *tmp;
	struct kcoll_conn *conn;
	u32 i;

	lockdep_assert_held(&comm->lock);
	for (i = 0; mem->gmr_ties && comm->conns && i < comm->nranks; i++) {
		conn = comm->conns[i];
		if (!conn)
			continue;
		list_for_each_entry(g, &conn->gmr_busy, node) {
			if (g->mem == mem && !list_empty(&g->due)) {
				kcoll_gmr_flush(conn);
				break;
			}
		}
		list_for_each_entry_safe(g, tmp, &conn->gmr_free, node) {
			if (g->mem != mem)
				continue;
			list_del_init(&g->node);
			kcoll_gmr_destroy(g);
			kcoll_stat_add(KCOLL_STAT_GRANTS_FENCED_HELD, 1);
		}
		/*
		 * One still live over @mem would be an operation's, using it
		 * (a bug): it is untied at least, so that it names no freed
		 * memory.
		 */
		list_for_each_entry(g, &conn->gmr_busy, node) {
			if (WARN_ON_ONCE(g->mem == mem)) {
				g->mem = NULL;
				mem->gmr_ties--;
			}
		}
	}
}

/*
 * @g is invalid (never registered, or invalidated): back to the pool, at
 * its end. On rxe a packet that took the MR before its invalidation may
 * still be copying, and follows the page list the MR's next mapping
 * writes (docs/DESIGN.md, "An invalidation is not a fence on rxe"): the
 * pool hands out its longest-idle MR, so that the next mapping comes as
 * late as the pool allows.
 */
void kcoll_gmr_put(struct kcoll_gmr *g)
{
	lockdep_assert_held(&g->conn->comm->lock);
	g->state = KCOLL_GMR_FREE;
	g->op = NULL;
	g->fence = false;
	list_move_tail(&g->node, &g->conn->gmr_free);
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
	    n > g->max_pages || g->state != KCOLL_GMR_FREE)
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

/*
 * kcoll_nic_copy - copy @len bytes from byte @soff of @src to byte @doff of
 * @dst with the NIC (memory the CPU must not touch: KCOLL_REG_NO_CPU), one
 * piece per pair of MR segments: an MR over the destination piece,
 * writable for one WRITE from the source's local MR to itself
 * (kcoll_ib_self_write()). Both buffers are registered on @comm's device;
 * @dst is writable. Sleeps; process context.
 */
int kcoll_nic_copy(struct kcoll_comm *comm, const struct kcoll_buf *dst,
		   size_t doff, const struct kcoll_buf *src, size_t soff,
		   size_t len)
{
	unsigned int pages = comm->seg_pages;
	struct kcoll_gmr *g;
	struct ib_sge sge;
	int err = 0;

	if (!len)
		return 0;
	if (!comm->pd || !src->segs || !dst->dma)
		return -EINVAL;
	err = kcoll_quota_charge_bytes(comm->quota, kcoll_gmr_bytes(pages));
	if (err)
		return err;
	g = kvzalloc(struct_size(g, sg, pages), GFP_KERNEL_ACCOUNT);
	if (!g) {
		err = -ENOMEM;
		goto out_uncharge;
	}
	g->mr = kcoll_ib_alloc_mr(comm->pd, pages);
	if (IS_ERR(g->mr)) {
		err = PTR_ERR(g->mr);
		goto out_free;
	}
	g->max_pages = pages;
	while (len && !err) {
		size_t n = min(len, kcoll_buf_seg_room(src, soff));
		u64 addr;
		u32 rkey;

		/* The destination piece within what one MR maps. */
		n = min_t(size_t, n, (size_t)pages * PAGE_SIZE -
			  ((dst->off0 + doff) & ~PAGE_MASK));
		g->state = KCOLL_GMR_FREE;
		err = kcoll_gmr_map(g, dst, doff, n, &addr, &rkey);
		if (err)
			break;
		kcoll_buf_sge(src, soff, n, &sge);
		err = kcoll_ib_self_write(comm->ibdev, g->mr, rkey, &sge);
		kcoll_stat_add(KCOLL_STAT_NIC_COPY_BYTES, err ? 0 : n);
		soff += n;
		doff += n;
		len -= n;
	}
	kcoll_ib_dereg_mr(g->mr);
out_free:
	kvfree(g);
out_uncharge:
	kcoll_quota_uncharge_bytes(comm->quota, kcoll_gmr_bytes(pages));
	return err;
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
	list_del_init(&g->due);
	list_del_init(&g->op_due);
	g->state = KCOLL_GMR_FREE;
}

/* @g goes for good: off every list and its eager slot, deregistered
 * (which also waits for what the device is still writing through it). */
static void kcoll_gmr_drop(struct kcoll_gmr *g)
{
	kcoll_gmr_detach(g);
	if (g->eslot >= 0)
		g->conn->egmr[g->eslot] = NULL;
	list_del_init(&g->node);
	kcoll_gmr_destroy(g);
}

/*
 * Run @n MR operations of @conn's (@gs[i]: invalidate where @inv has bit i,
 * else register @gs[i] for a grant; invalidations may be of any of the
 * communicator's connections). On success the invalidated ones are
 * detached and back in the pool (eager slots' stay with their slot;
 * fenced ones, struct kcoll_gmr, are deregistered) and the registered
 * ones live. On failure every one of them may be valid:
 * each is detached and deregistered (which invalidates it for good), and
 * the error returned. Must hold comm->lock.
 */
static int kcoll_gmr_ops(struct kcoll_conn *conn, struct kcoll_gmr **gs,
			 const u32 *keys, u64 inv, unsigned int n)
{
	struct kcoll_mr_op ops[KCOLL_REG_BATCH];
	unsigned int i;
	int err;

	lockdep_assert_held(&conn->comm->lock);
	if (!n)
		return 0;
	for (i = 0; i < n; i++)
		ops[i] = (struct kcoll_mr_op){
			.mr = gs[i]->mr, .key = keys[i],
			.inv = !!(inv & BIT_ULL(i)),
		};
	err = conn->comm->ibdev ?
	      kcoll_ib_mr_ops(conn->comm->ibdev, ops, n, KCOLL_GMR_ACCESS) :
	      -ENODEV;
	for (i = 0; i < n; i++) {
		struct kcoll_gmr *g = gs[i];

		if (err) {
			unsigned int j;

			/* An eager slot's MR comes twice (invalidated, then
			 * registered again): deregister it once. */
			for (j = 0; j < i && gs[j] != g; j++)
				;
			if (j < i)
				continue;
			kcoll_gmr_drop(g);
		} else if (inv & BIT_ULL(i) && g->fence) {
			/*
			 * Invalid, but on rxe a packet may still be copying
			 * through it into pages about to be unpinned: the
			 * deregistration waits for that.
			 */
			kcoll_gmr_drop(g);
			kcoll_stat_add(KCOLL_STAT_GRANTS_FENCED, 1);
		} else if (inv & BIT_ULL(i)) {
			kcoll_gmr_detach(g);
			if (g->eslot >= 0)
				list_del_init(&g->node);
			else
				kcoll_gmr_put(g);
		} else {
			g->state = KCOLL_GMR_LIVE;
			list_move_tail(&g->node, &conn->gmr_busy);
		}
	}
	/*
	 * Only a registration is @conn's own: invalidations may be of
	 * several connections' MRs (kcoll_gmr_flush_op()).
	 */
	if (err && inv != GENMASK_ULL(n - 1, 0))
		pr_warn_ratelimited("comm %llx rank %u: grant memory to rank %u: %d\n",
				    conn->comm->uid, conn->comm->rank,
				    conn->peer, err);
	else if (err)
		pr_warn_ratelimited("comm %llx rank %u: invalidating %u grant MRs: %d\n",
				    conn->comm->uid, conn->comm->rank, n, err);
	return err;
}

/*
 * Take up to @max of the grant MRs due for invalidation on @head (a
 * connection's gmr_inv_due, linked by their @due, or with @of_op an
 * operation's gmr_due, by their @op_due) into @gs, @keys (their keys);
 * returns how many.
 */
static unsigned int kcoll_gmr_take_due(struct list_head *head, bool of_op,
				       struct kcoll_gmr **gs, u32 *keys,
				       unsigned int max)
{
	struct list_head *pos;
	unsigned int n = 0;

	list_for_each(pos, head) {
		struct kcoll_gmr *g = of_op ?
			list_entry(pos, struct kcoll_gmr, op_due) :
			list_entry(pos, struct kcoll_gmr, due);

		if (n == max)
			break;
		gs[n] = g;
		keys[n++] = g->mr->rkey;
	}
	return n;
}

/*
 * Invalidate every grant MR on @head (kcoll_gmr_take_due()), in batches
 * of KCOLL_REG_BATCH, each one trip to the registration QP; each MR
 * leaves both lists it is on (kcoll_gmr_detach()). 0, or the error of
 * the registration QP (the MRs are then deregistered: just as dead).
 */
static int kcoll_gmr_inv_all(struct list_head *head, bool of_op)
{
	struct kcoll_gmr *gs[KCOLL_REG_BATCH];
	u32 keys[KCOLL_REG_BATCH];
	int err = 0;

	while (!list_empty(head)) {
		unsigned int n = kcoll_gmr_take_due(head, of_op, gs, keys,
						    KCOLL_REG_BATCH);
		int e = kcoll_gmr_ops(gs[0]->conn, gs, keys,
				      GENMASK_ULL(n - 1, 0), n);

		if (of_op)
			kcoll_stat_add(KCOLL_STAT_GRANTS_CLOSED, n);
		err = err ?: e;
	}
	return err;
}

/* Invalidate every grant MR of @conn that was retired: kcoll_gmr_inv_all().
 * Must hold comm->lock. */
int kcoll_gmr_flush(struct kcoll_conn *conn)
{
	lockdep_assert_held(&conn->comm->lock);
	return kcoll_gmr_inv_all(&conn->gmr_inv_due, false);
}

/*
 * Register mapped @g (which owns staging slot @slot, or -1) for a grant
 * of @op's, invalidating in the same batch what @conn has due, then send
 * @m, the GRANT naming it. Takes @g and @slot over in every case: on
 * success they are @op's until the grant is retired; -ENOBUFS: a full
 * send queue, nothing happened (@g back in the pool, @slot free), try
 * again later; another error: the op must fail (a GRANT that could not
 * be sent after the registration leaves @g retired and @slot taken until
 * the next flush). Must hold comm->lock.
 */
int kcoll_gmr_grant(struct kcoll_gmr *g, int slot, struct kcoll_task *op,
		    struct kcoll_wire_msg *m)
{
	struct kcoll_conn *conn = g->conn;
	struct kcoll_gmr *gs[KCOLL_REG_BATCH];
	u32 keys[KCOLL_REG_BATCH];
	unsigned int n;
	int err;

	lockdep_assert_held(&conn->comm->lock);
	if (conn->state != KCOLL_CONN_UP || !kcoll_conn_sq_room(conn, 0)) {
		kcoll_gmr_put(g);
		if (slot >= 0)
			__clear_bit(slot, &conn->slot_busy);
		return conn->state == KCOLL_CONN_UP ? -ENOBUFS : -ENOTCONN;
	}
	n = kcoll_gmr_take_due(&conn->gmr_inv_due, false, gs, keys,
			       KCOLL_REG_BATCH - 1);
	gs[n] = g;
	keys[n] = g->mr->rkey;
	g->op = op;
	g->slot = slot;
	op->gmrs++;
	err = kcoll_gmr_ops(conn, gs, keys, n ? GENMASK_ULL(n - 1, 0) : 0,
			    n + 1);
	if (err)
		return err;	/* @g is gone, and @slot free */
	err = kcoll_conn_send_msg(conn, m);
	if (err)	/* registered, never granted: invalid again */
		kcoll_gmr_retire(g);
	return err;
}

/*
 * The grant @g served is over (its data is in, or it was dropped): it is
 * invalidated by the next kcoll_gmr_flush() (or grant), and until then
 * still counts for its op, and its staging slot stays taken. Must hold
 * comm->lock.
 */
void kcoll_gmr_retire(struct kcoll_gmr *g)
{
	lockdep_assert_held(&g->conn->comm->lock);
	if (g->state != KCOLL_GMR_LIVE || !list_empty(&g->due))
		return;
	list_add_tail(&g->due, &g->conn->gmr_inv_due);
	if (g->op)
		list_add_tail(&g->op_due, &g->op->gmr_due);
}

/*
 * @op's phase is done: what its peers wrote is about to be used (its
 * average taken, copied, granted to another peer: a Bruck alltoall's
 * scratch takes a new peer's data in every step). Every grant of @op's
 * that was retired, on any connection, is made invalid first, so that a
 * peer writes only while its grant lives (until 2026-12-05 only the same
 * connection's next grant or the operation's settling did, and a peer
 * could keep writing, with a plain WRITE and its old key, into memory
 * granted to another meanwhile). kcoll_gmr_inv_all(), over every
 * connection at once; nothing when none is due. Must hold comm->lock.
 */
int kcoll_gmr_flush_op(struct kcoll_task *op)
{
	lockdep_assert_held(&op->comm->lock);
	return kcoll_gmr_inv_all(&op->gmr_due, true);
}

void kcoll_gmr_conn_init(struct kcoll_conn *conn)
{
	INIT_LIST_HEAD(&conn->gmr_free);
	INIT_LIST_HEAD(&conn->gmr_busy);
	INIT_LIST_HEAD(&conn->gmr_inv_due);
}

/*
 * @conn failed: no grant of it will be filled, and its operations may
 * finish and let their pages go as soon as its grant MRs are dead. So
 * those over an operation's memory are deregistered, not invalidated:
 * rxe's LOCAL_INV only marks an MR invalid, while a WRITE its responder
 * has already begun goes on copying into the pages, and a deregistration
 * waits for that (as a NIC's does for its DMA). Those over the
 * connection's own memory (eager slots: kernel pages freed only after
 * their deregistration at shutdown) are invalidated, through the
 * registration QP, which does not depend on the connection. Must hold
 * comm->lock.
 */
void kcoll_gmr_conn_lost(struct kcoll_conn *conn)
{
	struct kcoll_gmr *g, *tmp;

	lockdep_assert_held(&conn->comm->lock);
	list_for_each_entry_safe(g, tmp, &conn->gmr_busy, node) {
		if (g->eslot >= 0)
			kcoll_gmr_retire(g);
		else
			kcoll_gmr_drop(g);
	}
	kcoll_gmr_flush(conn);
}

/*
 * The connection goes: every grant MR goes, before the device's PD does
 * (deregistering a valid MR invalidates it). Must not hold comm->lock.
 */
void kcoll_gmr_conn_shutdown(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_gmr *g, *tmp;
	unsigned int i;

	mutex_lock(&comm->lock);
	list_for_each_entry_safe(g, tmp, &conn->gmr_busy, node)
		kcoll_gmr_drop(g);
	list_for_each_entry_safe(g, tmp, &conn->gmr_free, node) {
		list_del_init(&g->node);
		kcoll_gmr_destroy(g);
	}
	for (i = 0; i < KCOLL_EAGER_SLOTS; i++) {
		if (conn->egmr[i]) {
			kcoll_gmr_destroy(conn->egmr[i]);
			conn->egmr[i] = NULL;
		}
	}
	mutex_unlock(&comm->lock);
}

/*
 * Eager slots through the NIC: one grant MR each, over exactly the slot,
 * kept by the slot (kcoll_gmr_eager_offer()). Must hold comm->lock.
 */
int kcoll_gmr_eager_setup(struct kcoll_conn *conn)
{
	unsigned int i;

	lockdep_assert_held(&conn->comm->lock);
	for (i = 0; i < KCOLL_EAGER_SLOTS; i++) {
		struct kcoll_gmr *g;

		if (conn->egmr[i])
			continue;
		g = kcoll_gmr_alloc(conn);
		if (IS_ERR(g))
			return PTR_ERR(g);
		g->eslot = i;
		conn->egmr[i] = g;
	}
	return 0;
}

/*
 * Eager slots @slots are about to be offered: each slot's MR, if live
 * from its last offer, is invalidated, and registered again under its
 * next key, at the same address (a CREDITS names keys, not addresses);
 * the first time it is mapped over exactly the slot. 0, or an error (the
 * connection is then of no use). Must hold comm->lock.
 */
int kcoll_gmr_eager_offer(struct kcoll_conn *conn, unsigned long slots)
{
	struct kcoll_gmr *gs[2 * KCOLL_EAGER_SLOTS];
	u32 keys[2 * KCOLL_EAGER_SLOTS];
	unsigned int slot, n = 0;
	u64 inv = 0, addr;
	u32 rkey;
	int err;

	BUILD_BUG_ON(2 * KCOLL_EAGER_SLOTS > KCOLL_REG_BATCH);
	lockdep_assert_held(&conn->comm->lock);
	/* A lost connection's MRs were invalidated for good. */
	if (conn->state != KCOLL_CONN_UP)
		return -ENOTCONN;
	for_each_set_bit(slot, &slots, KCOLL_EAGER_SLOTS) {
		struct kcoll_gmr *g = conn->egmr[slot];

		if (!g)
			return -ENODEV;
		if (g->state == KCOLL_GMR_LIVE) {
			inv |= BIT_ULL(n);
			gs[n] = g;
			keys[n++] = g->mr->rkey;
		}
	}
	for_each_set_bit(slot, &slots, KCOLL_EAGER_SLOTS) {
		struct kcoll_gmr *g = conn->egmr[slot];

		if (!g->mapped) {
			err = kcoll_gmr_map(g, &conn->ebuf,
					    (size_t)slot * KCOLL_EAGER_SLOT_BYTES,
					    KCOLL_EAGER_SLOT_BYTES, &addr, &rkey);
			if (err)
				return err;
			g->mapped = true;
		} else {
			ib_update_fast_reg_key(g->mr, ib_inc_rkey(g->mr->rkey));
		}
		gs[n] = g;
		keys[n++] = g->mr->rkey;
	}
	return kcoll_gmr_ops(conn, gs, keys, inv, n);
}

/* debugfs: @conn's grant MRs that a peer may be writing through. */
void kcoll_gmr_show(struct seq_file *m, struct kcoll_conn *conn)
{
	struct kcoll_gmr *g;

	list_for_each_entry(g, &conn->gmr_busy, node)
		seq_printf(m, "    gmr rank %u rkey %#x iova %#llx len %llu %s%s\n",
			   conn->peer, g->mr->rkey, g->mr->iova,
			   g->mr->length,
			   list_empty(&g->due) ? "live" : "retired",
			   g->eslot >= 0 ? " eager" : "");
}
