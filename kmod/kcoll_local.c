// SPDX-License-Identifier: GPL-2.0
/*
 * The intra-node data path (docs/DESIGN.md, "Ranks on the same node").
 *
 * Two ranks of a communicator on the same node still have an RC connection
 * (rdma_cm finds the local device) for their control messages, but their
 * data does not go through the NIC: Soft-RoCE would checksum and copy every
 * packet twice, a real HCA would loop it through PCIe. The receiver exposes
 * the memory a grant covers (its pinned, vmapped destination or a staging
 * slot) under a node-wide id instead of an rkey; the sender copies its chunk
 * into it with the CPU and sends a DATA message where it would have written
 * with an immediate. One copy, as the NIC would make.
 *
 * Lifetime: an exposure lives while its grant is on the receiver's
 * conn->k[].out list. Whoever drops such a grant revokes the exposure
 * first (kcoll_xpose_revoke()), which waits for a copy in progress, so no
 * copy can outlive the memory: the receiver's pages are unpinned and its
 * staging freed only after the grants are gone. The copier holds a
 * reference only for the memcpy, under its own comm->lock, never the
 * receiver's, so the wait cannot deadlock.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/xarray.h>

#include "kcoll_comm.h"

struct kcoll_xpose {
	refcount_t users;		/* 1 (the grant) + copies running */
	struct completion idle;		/* the last copy is over */
	u8 *vaddr;
	u32 len;
	u64 uid;			/* the communicator */
	u32 owner;			/* the receiving rank */
	u32 writer;			/* the only rank that may copy in */
	struct rcu_head rcu;
};

/* Id 0 is never allocated: a grant's xid of 0 exposes nothing. */
static DEFINE_XARRAY_FLAGS(kcoll_xposes, XA_FLAGS_ALLOC1);
static u32 kcoll_xpose_next;

/*
 * Expose @len bytes at @vaddr to @conn's peer, which is on this node.
 * Returns 0 and the id in *@id. Must hold comm->lock.
 */
int kcoll_xpose_add(struct kcoll_conn *conn, u8 *vaddr, u32 len, u32 *id)
{
	struct kcoll_xpose *x;
	int err;

	lockdep_assert_held(&conn->comm->lock);
	x = kmalloc(sizeof(*x), GFP_KERNEL);
	if (!x)
		return -ENOMEM;
	refcount_set(&x->users, 1);
	init_completion(&x->idle);
	x->vaddr = vaddr;
	x->len = len;
	x->uid = conn->comm->uid;
	x->owner = conn->comm->rank;
	x->writer = conn->peer;
	err = xa_alloc_cyclic(&kcoll_xposes, id, x, xa_limit_32b,
			      &kcoll_xpose_next, GFP_KERNEL);
	if (err < 0) {
		kfree(x);
		return err;
	}
	return 0;
}

/*
 * Withdraw exposure @id (0: none): no copy into it starts after this, and
 * one in progress has finished when it returns.
 */
void kcoll_xpose_revoke(u32 id)
{
	struct kcoll_xpose *x;

	if (!id)
		return;
	x = xa_erase(&kcoll_xposes, id);
	if (!x)
		return;
	if (!refcount_dec_and_test(&x->users))
		wait_for_completion(&x->idle);
	kfree_rcu(x, rcu);
}

/*
 * Copy @len bytes from @src into exposure @id, which @conn's peer granted
 * us. -ENOENT: it is gone (the receiver dropped the grant: its operation
 * or connection failed); -EPROTO: it is not ours or too small. Must hold
 * comm->lock.
 */
int kcoll_xpose_copy(struct kcoll_conn *conn, u32 id, const u8 *src, u32 len)
{
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_xpose *x;

	lockdep_assert_held(&comm->lock);
	rcu_read_lock();
	x = xa_load(&kcoll_xposes, id);
	if (x && !refcount_inc_not_zero(&x->users))
		x = NULL;
	rcu_read_unlock();
	if (!x)
		return -ENOENT;
	if (x->uid != comm->uid || x->writer != comm->rank ||
	    x->owner != conn->peer || len > x->len) {
		pr_warn_ratelimited("comm %llx rank %u: rank %u granted memory that is not ours to fill (%u of %u bytes)\n",
				    comm->uid, comm->rank, conn->peer, len,
				    x->len);
		if (refcount_dec_and_test(&x->users))
			complete(&x->idle);
		return -EPROTO;
	}
	memcpy(x->vaddr, src, len);
	if (refcount_dec_and_test(&x->users))
		complete(&x->idle);
	return 0;
}

/* Module unload: every communicator is gone, and with it every grant. */
void kcoll_local_exit(void)
{
	if (!xa_empty(&kcoll_xposes))
		pr_err("exposed memory left at unload\n");
	xa_destroy(&kcoll_xposes);
}
