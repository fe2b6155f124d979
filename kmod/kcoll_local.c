// SPDX-License-Identifier: GPL-2.0
/*
 * The intra-node transport, kcoll_xport_local (kcoll_xport.h; docs/DESIGN.md,
 * "Ranks on the same node").
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
 * receiver's, so the wait cannot deadlock. An exposure belongs to its
 * channel (a generation number no other channel ever has): only a sender
 * on that channel, the same communicator's key and ranks, may copy into
 * it, whatever id a GRANT names (until 2026-12-05 any connection with the
 * communicator's uid and ranks could, and another user could make one
 * with a key of its own and a fake local peer of its own that sent
 * GRANTs over the QP).
 *
 * Control messages between the two take a channel (struct kcoll_lchan)
 * instead of the QP: a queue per direction, drained by the receiving
 * connection's work item under its comm->lock, as its CQ handler would.
 * rxe loops every SEND through the same checksumming packet path as a
 * remote one (a round trip costs milliseconds under TCG), and a hardware
 * HCA through PCIe. The rdma_cm connection stays for setup, key check and
 * disconnects; its QP carries nothing once the connection is up.
 * Channel lifetime: found by (uid, key, ranks, the nonce of the
 * connection's hello) in kcoll_lchans; each end attaches when its
 * connection comes up and detaches in its teardown, after its BYE has
 * been queued. What is queued for an end that has not
 * attached yet waits for it, even after the sender detached (a rank that
 * revokes right after its COMM_CREATE may leave before the accepting
 * rank, which attaches only once the peer proved the key, comes up: until
 * 2026-12-07 its BYE went with the channel, and the peer took the
 * disconnect for a lost rank, -ECONNRESET instead of -ECANCELED). What is
 * sent to an end that detached is dropped, as a SEND to a QP that is gone.
 * The last end to detach frees it; a channel kept for an end that has not
 * come goes when that end's connection is torn down without attaching, or
 * once twice auth_timeout_ms have passed (by then the accepting side has
 * dropped an attempt that did not prove the key: a delayed work sweeps
 * them while any is kept), or at unload.
 * A queue holds at most KCOLL_LCHAN_QUEUED messages (the protocol's
 * windows keep a real peer far below): past that the sender's operation
 * fails with -EPROTO, so a peer end that never attaches, or never reads,
 * cannot make the sender's queue grow without bound.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <crypto/algapi.h>
#include <linux/completion.h>
#include <linux/debugfs.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/xarray.h>

#include "kcoll.h"
#include "kcoll_types.h"
#include "kcoll_local.h"
#include "kcoll_coll.h"
#include "kcoll_comm.h"
#include "kcoll_xport.h"
#include "kcoll_stats.h"
#include "kcoll_sysfs.h"

struct kcoll_xpose {
	refcount_t users;		/* 1 (the grant) + copies running */
	struct completion idle;		/* the last copy is over */
	u8 *vaddr;
	u32 len;
	u64 gen;			/* its channel's (kcoll_lchan.gen) */
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
static int kcoll_xpose_add(struct kcoll_conn *conn, u8 *vaddr, u32 len,
			   u32 *id)
{
	struct mem_cgroup *memcg;
	struct kcoll_xpose *x;
	int err;

	lockdep_assert_held(&conn->comm->lock);
	if (!conn->lchan)
		return -ENOTCONN;
	/* Often in a worker (a CQ's, the channel's): the comm's creator
	 * pays, as for everything else a connection holds.
	 */
	memcg = kcoll_comm_memcg_begin(conn->comm);
	x = kmalloc(sizeof(*x), GFP_KERNEL_ACCOUNT);
	if (!x) {
		kcoll_comm_memcg_end(memcg);
		return -ENOMEM;
	}
	refcount_set(&x->users, 1);
	init_completion(&x->idle);
	x->vaddr = vaddr;
	x->len = len;
	x->gen = conn->lchan_gen;
	x->uid = conn->comm->uid;
	x->owner = conn->comm->rank;
	x->writer = conn->peer;
	err = xa_alloc_cyclic(&kcoll_xposes, id, x, xa_limit_32b,
			      &kcoll_xpose_next, GFP_KERNEL_ACCOUNT);
	kcoll_comm_memcg_end(memcg);
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
static void kcoll_xpose_revoke(u32 id)
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
static int kcoll_xpose_copy(struct kcoll_conn *conn, u32 id, const u8 *src,
			    u32 len)
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
	if (x->gen != conn->lchan_gen || x->uid != comm->uid ||
	    x->writer != comm->rank || x->owner != conn->peer ||
	    len > x->len) {
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

/*
 * debugfs kcoll/exposures (root): one line per live exposure, "id uid
 * owner writer len", for whoever debugs the intra-node path (and the
 * selftest that plays another user's fake local peer).
 */
static int kcoll_xposes_show(struct seq_file *m, void *unused)
{
	struct kcoll_xpose *x;
	unsigned long id;

	rcu_read_lock();
	xa_for_each(&kcoll_xposes, id, x)
		seq_printf(m, "%lu %llx %u %u %u\n", id, x->uid, x->owner,
			   x->writer, x->len);
	rcu_read_unlock();
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kcoll_xposes);

void kcoll_local_debugfs_init(struct dentry *dir)
{
	debugfs_create_file("exposures", 0400, dir, NULL,
			    &kcoll_xposes_fops);
}

/* ------------------------------------------------------------------ */
/* Control channel                                                      */
/* ------------------------------------------------------------------ */

struct kcoll_lmsg {
	struct list_head node;
	struct kcoll_wire_msg msg;
	u32 plen;			/* EAGER: bytes of payload */
	u8 payload[];			/* EAGER: header and data */
};

struct kcoll_lchan {
	struct list_head node;		/* kcoll_lchans; kcoll_lchans_lock */
	u64 uid;
	u8 key[KCOLL_KEY_LEN];		/* comms of one uid with other keys
					 * are other comms */
	u32 rank[2];			/* [0] the lower, [1] the higher */
	u8 nonce[KCOLL_AUTH_NONCE];	/* the connection's hello nonce */
	u64 gen;			/* never another channel's */
	unsigned int users;		/* ends that attached and did not
					 * detach yet; kcoll_lchans_lock */
	/*
	 * users == 0 (kept for the end that has not attached): until
	 * then, in jiffies; kcoll_lchans_lock
	 */
	unsigned long expires;
	spinlock_t lock;		/* the rest */
	struct kcoll_conn *end[2];	/* attached connections */
	bool gone[2];			/* detached for good */
	struct list_head inbox[2];	/* messages for end i */
	unsigned int queued[2];		/* on inbox[i] */
};

#define KCOLL_LCHAN_QUEUED	4096

static LIST_HEAD(kcoll_lchans);
static DEFINE_SPINLOCK(kcoll_lchans_lock);
static atomic64_t kcoll_lchan_gens = ATOMIC64_INIT(0);

/* Which end of its channel @conn is. */
static unsigned int kcoll_lchan_end(const struct kcoll_conn *conn)
{
	return conn->comm->rank > conn->peer;
}

/* Free the messages on @msgs (taken off a channel). */
static void kcoll_lmsgs_free(struct list_head *msgs)
{
	struct kcoll_lmsg *lm, *tmp;

	list_for_each_entry_safe(lm, tmp, msgs, node)
		kfree(lm);
}

/* Free @ch, which no end holds and no list has, with what it still queues. */
static void kcoll_lchan_free(struct kcoll_lchan *ch)
{
	kcoll_lmsgs_free(&ch->inbox[0]);
	kcoll_lmsgs_free(&ch->inbox[1]);
	kfree(ch);
}

/* Free the channels on @dead (taken off kcoll_lchans). */
static void kcoll_lchans_free(struct list_head *dead)
{
	struct kcoll_lchan *ch, *tmp;

	list_for_each_entry_safe(ch, tmp, dead, node)
		kcoll_lchan_free(ch);
}

/*
 * The sweep of kept channels, every auth_timeout_ms while there are any:
 * one whose end is late goes (its attempt has been dropped by now, and
 * one that never proved the key has nothing to read there; the messages
 * are charged to the memory cgroup of a process that may have left).
 */
static void kcoll_lchans_gc(struct work_struct *work);
static DECLARE_DELAYED_WORK(kcoll_lchans_gc_work, kcoll_lchans_gc);

static void kcoll_lchans_gc(struct work_struct *work)
{
	struct kcoll_lchan *ch, *tmp;
	bool kept = false;
	LIST_HEAD(dead);

	spin_lock(&kcoll_lchans_lock);
	list_for_each_entry_safe(ch, tmp, &kcoll_lchans, node) {
		if (ch->users)
			continue;
		if (time_after(jiffies, ch->expires))
			list_move(&ch->node, &dead);
		else
			kept = true;
	}
	spin_unlock(&kcoll_lchans_lock);
	kcoll_lchans_free(&dead);
	if (kept)
		schedule_delayed_work(&kcoll_lchans_gc_work,
				      msecs_to_jiffies(kcoll_auth_timeout_ms()));
}

static bool kcoll_lchan_is(const struct kcoll_lchan *ch,
			   const struct kcoll_comm *comm, u32 peer,
			   const u8 *nonce)
{
	return ch->uid == comm->uid &&
	       ch->rank[0] == min(comm->rank, peer) &&
	       ch->rank[1] == max(comm->rank, peer) &&
	       !crypto_memneq(ch->key, comm->key, KCOLL_KEY_LEN) &&
	       !memcmp(ch->nonce, nonce, KCOLL_AUTH_NONCE);
}

/*
 * @conn (local) is up: attach it to the channel its peer shares, created
 * by whichever end comes first, and deliver what is already queued for
 * it. Must hold comm->lock.
 *
 * The channel is the connection's: both ends know the nonce of the hello
 * it was set up with (authenticated: kcoll_auth.c). Until 2026-12-06 the
 * communicator (uid, key, ranks) named it, and a communicator created
 * again with the same uid and key while its predecessor was still being
 * torn down (unlisted, not yet detached) joined that one's channel: what
 * it sent went to an end that had left, and the old end's detach freed
 * the new one's queue.
 */
int kcoll_lchan_attach(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;
	unsigned int me = kcoll_lchan_end(conn);
	struct kcoll_lchan *ch, *fresh;
	u32 lo = min(comm->rank, conn->peer), hi = max(comm->rank, conn->peer);
	struct mem_cgroup *memcg;

	lockdep_assert_held(&comm->lock);
	if (conn->lchan)
		return 0;
	memcg = kcoll_comm_memcg_begin(comm);
	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL_ACCOUNT);
	kcoll_comm_memcg_end(memcg);
	if (!fresh)
		return -ENOMEM;
	spin_lock(&kcoll_lchans_lock);
	list_for_each_entry(ch, &kcoll_lchans, node)
		if (kcoll_lchan_is(ch, comm, conn->peer,
				   conn->lane[0].nonce_hello))
			goto found;
	ch = fresh;
	fresh = NULL;
	ch->uid = comm->uid;
	memcpy(ch->key, comm->key, KCOLL_KEY_LEN);
	memcpy(ch->nonce, conn->lane[0].nonce_hello, KCOLL_AUTH_NONCE);
	ch->rank[0] = lo;
	ch->rank[1] = hi;
	ch->gen = atomic64_inc_return(&kcoll_lchan_gens);
	spin_lock_init(&ch->lock);
	INIT_LIST_HEAD(&ch->inbox[0]);
	INIT_LIST_HEAD(&ch->inbox[1]);
	list_add(&ch->node, &kcoll_lchans);
found:
	spin_lock(&ch->lock);
	/* One connection per nonce and end: a second is no peer of ours. */
	if (ch->end[me] || ch->gone[me]) {
		spin_unlock(&ch->lock);
		spin_unlock(&kcoll_lchans_lock);
		kfree(fresh);
		return -EPROTO;
	}
	ch->users++;
	ch->end[me] = conn;
	if (!list_empty(&ch->inbox[me]))
		kcoll_queue_work(&conn->lrx);
	spin_unlock(&ch->lock);
	spin_unlock(&kcoll_lchans_lock);
	kfree(fresh);
	conn->lchan = ch;
	conn->lchan_gen = ch->gen;
	return 0;
}

/*
 * @conn's teardown without a channel: it never attached (its attempt
 * failed, or its comm went before the peer proved the key), and never
 * will. A channel its peer made for this attempt no longer waits for it:
 * what is queued for it goes, what the peer sends from now on is dropped,
 * and one the peer has left already goes now.
 */
static void kcoll_lchan_forgo(struct kcoll_conn *conn, const u8 *nonce)
{
	unsigned int me = kcoll_lchan_end(conn);
	struct kcoll_lchan *ch;
	LIST_HEAD(dead);
	LIST_HEAD(drop);

	spin_lock(&kcoll_lchans_lock);
	list_for_each_entry(ch, &kcoll_lchans, node) {
		if (!kcoll_lchan_is(ch, conn->comm, conn->peer, nonce))
			continue;
		spin_lock(&ch->lock);
		if (!ch->end[me] && !ch->gone[me]) {
			ch->gone[me] = true;
			list_splice_init(&ch->inbox[me], &drop);
			ch->queued[me] = 0;
			if (!ch->users)
				list_move(&ch->node, &dead);
		}
		spin_unlock(&ch->lock);
		break;
	}
	spin_unlock(&kcoll_lchans_lock);
	kcoll_lchans_free(&dead);
	kcoll_lmsgs_free(&drop);
}

/*
 * @conn's teardown: nothing is delivered to it any more, what waits for it
 * is dropped, and the channel goes with its last end, unless it holds
 * messages for an end that has not attached yet. Must not hold comm->lock
 * (waits for the delivery work).
 */
void kcoll_lchan_detach(struct kcoll_conn *conn)
{
	unsigned int me = kcoll_lchan_end(conn);
	u8 nonce[KCOLL_AUTH_NONCE];
	bool last, keep = false, again, local;
	struct kcoll_lchan *ch;
	LIST_HEAD(drop);

	/*
	 * Senders (under comm->lock: another connection's completion may
	 * still reap and send on this one) and the delivery work find no
	 * channel from now on; the channel may be freed below. Until
	 * 2026-12-05 it was freed first and forgotten after.
	 */
	mutex_lock(&conn->comm->lock);
	ch = conn->lchan;
	conn->lchan = NULL;
	again = conn->lchan_detached;
	conn->lchan_detached = true;
	local = conn->local;
	memcpy(nonce, conn->lane[0].nonce_hello, KCOLL_AUTH_NONCE);
	mutex_unlock(&conn->comm->lock);
	/*
	 * The second shutdown (kcoll_conn_free(), maybe from a worker
	 * while the module unloads): done already.
	 */
	if (again)
		return;
	/*
	 * Only a local attempt's peer makes a channel for it; one of an
	 * attempt unwound before (local no more) goes with the sweep.
	 */
	if (!ch) {
		if (local)
			kcoll_lchan_forgo(conn, nonce);
		return;
	}
	spin_lock(&ch->lock);
	ch->end[me] = NULL;
	ch->gone[me] = true;
	list_splice_init(&ch->inbox[me], &drop);
	ch->queued[me] = 0;
	spin_unlock(&ch->lock);
	cancel_work_sync(&conn->lrx);
	kcoll_lmsgs_free(&drop);
	/* What the work took but did not get to: none, it ran to the end. */
	spin_lock(&kcoll_lchans_lock);
	last = !--ch->users;
	if (last) {
		/*
		 * The other end detached first (its queue has nobody to
		 * read it), or has not attached yet: then what we sent it,
		 * our BYE above all, waits for it. Nobody else sends to it:
		 * we were its only sender, and are gone.
		 */
		spin_lock(&ch->lock);
		keep = !ch->gone[!me] && !list_empty(&ch->inbox[!me]);
		spin_unlock(&ch->lock);
		if (keep)
			ch->expires = jiffies +
				2 * msecs_to_jiffies(kcoll_auth_timeout_ms());
		else
			list_del(&ch->node);
	}
	spin_unlock(&kcoll_lchans_lock);
	if (last && !keep)
		kcoll_lchan_free(ch);
	if (keep)
		schedule_delayed_work(&kcoll_lchans_gc_work,
				      msecs_to_jiffies(kcoll_auth_timeout_ms()));
}

/*
 * Queue @m for the peer of @conn (local, attached), with a payload (an
 * EAGER message's: @hlen bytes of header, struct kcoll_wire_eager and the
 * signature, then @len bytes of @data) if @hdr. 0, or -ENOMEM; a peer
 * that has left loses it, as a SEND to a QP that is gone would. Must hold
 * comm->lock.
 */
static int kcoll_lchan_send_data(struct kcoll_conn *conn,
				 const struct kcoll_wire_msg *m,
				 const void *hdr, u32 hlen, const void *data,
				 u32 len)
{
	struct kcoll_lchan *ch = conn->lchan;
	unsigned int peer = !kcoll_lchan_end(conn);
	u32 plen = hdr ? hlen + len : 0;
	struct mem_cgroup *memcg;
	struct kcoll_lmsg *lm;

	lockdep_assert_held(&conn->comm->lock);
	if (!ch)
		return -ENOTCONN;
	/* Mostly sent from workers, which have no memory cgroup of their
	 * own: charged to the sender's comm's creator.
	 */
	memcg = kcoll_comm_memcg_begin(conn->comm);
	lm = kmalloc(struct_size(lm, payload, plen), GFP_KERNEL_ACCOUNT);
	kcoll_comm_memcg_end(memcg);
	if (!lm)
		return -ENOMEM;
	lm->msg = *m;
	lm->plen = plen;
	if (hdr) {
		memcpy(lm->payload, hdr, hlen);
		memcpy(lm->payload + hlen, data, len);
	}
	spin_lock(&ch->lock);
	if (ch->gone[peer]) {
		spin_unlock(&ch->lock);
		kfree(lm);
		return 0;
	}
	if (ch->queued[peer] >= KCOLL_LCHAN_QUEUED) {
		spin_unlock(&ch->lock);
		kfree(lm);
		pr_warn_ratelimited("comm %llx rank %u: rank %u on this node leaves %u messages unread: refused\n",
				    conn->comm->uid, conn->comm->rank,
				    conn->peer, KCOLL_LCHAN_QUEUED);
		return -EPROTO;
	}
	ch->queued[peer]++;
	list_add_tail(&lm->node, &ch->inbox[peer]);
	if (ch->end[peer])
		kcoll_queue_work(&ch->end[peer]->lrx);
	spin_unlock(&ch->lock);
	return 0;
}

/* The same without a payload: a control message. */
int kcoll_lchan_send(struct kcoll_conn *conn, const struct kcoll_wire_msg *m)
{
	return kcoll_lchan_send_data(conn, m, NULL, 0, NULL, 0);
}

/*
 * Deliver what the channel holds for @conn, in order. Also called when the
 * peer disconnects: what it sent before (its BYE included) is handled
 * before the connection is declared lost, as a QP's flush would order it.
 * Must hold comm->lock.
 */
void kcoll_lchan_deliver(struct kcoll_conn *conn)
{
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_lchan *ch = conn->lchan;
	unsigned int me = kcoll_lchan_end(conn);
	struct kcoll_lmsg *lm, *tmp;
	LIST_HEAD(batch);

	lockdep_assert_held(&comm->lock);
	if (!ch)
		return;
	spin_lock(&ch->lock);
	list_splice_init(&ch->inbox[me], &batch);
	conn->lchan_left += ch->queued[me];
	ch->queued[me] = 0;
	spin_unlock(&ch->lock);
	list_for_each_entry_safe(lm, tmp, &batch, node) {
		/* A dead connection drops what comes, as a QP in the error
		 * state flushes it. */
		bool up = conn->state == KCOLL_CONN_UP &&
			  !comm->shutting_down;

		conn->lchan_left--;
		if (up && lm->msg.type == KCOLL_MSG_EAGER)
			kcoll_engine_eager_in(conn, &lm->msg, lm->payload,
					      lm->plen);
		else if (up)
			kcoll_engine_msg(conn, &lm->msg);
		kfree(lm);
	}
	if (!comm->shutting_down)
		kcoll_engine_reap(comm);
}

/*
 * Does the channel hold messages for @conn not handled yet, queued or
 * later in the batch being delivered? Must hold comm->lock.
 */
static bool kcoll_lchan_unread(struct kcoll_conn *conn)
{
	struct kcoll_lchan *ch = conn->lchan;
	bool unread;

	lockdep_assert_held(&conn->comm->lock);
	if (!ch)
		return false;
	if (conn->lchan_left)
		return true;
	spin_lock(&ch->lock);
	unread = !list_empty(&ch->inbox[kcoll_lchan_end(conn)]);
	spin_unlock(&ch->lock);
	return unread;
}

/* conn->lrx: the channel has messages for this end. */
void kcoll_lchan_rx_work(struct work_struct *work)
{
	struct kcoll_conn *conn = container_of(work, struct kcoll_conn, lrx);
	struct kcoll_comm *comm = conn->comm;

	mutex_lock(&comm->lock);
	kcoll_lchan_deliver(conn);
	mutex_unlock(&comm->lock);
}

/* ------------------------------------------------------------------ */
/* The transport                                                        */
/* ------------------------------------------------------------------ */

static int kcoll_local_send_msg(struct kcoll_conn *conn,
				struct kcoll_wire_msg *m)
{
	lockdep_assert_held(&conn->comm->lock);
	if (conn->state != KCOLL_CONN_UP || !conn->lchan)
		return -ENOTCONN;
	return kcoll_lchan_send(conn, m);
}

/* The bytes are exposed under an id, which the GRANT names. */
static int kcoll_local_expose(struct kcoll_conn *conn, struct kcoll_task *op,
			      struct kcoll_grant *g, const struct kcoll_buf *b,
			      size_t off, struct kcoll_wire_msg *m)
{
	int err;

	/* What a peer writes must be ours to write, as a grant MR needs
	 * the buffer's writable DMA map (every schedule lands in such a
	 * buffer: this only keeps it so). */
	if (!b->writable)
		return -EACCES;
	err = kcoll_xpose_add(conn, b->vaddr + off, g->len, &g->xid);
	if (!err) {
		g->addr = g->xid;
		m->addr = cpu_to_le64(g->addr);
		err = kcoll_local_send_msg(conn, m);
		if (err) {
			kcoll_xpose_revoke(g->xid);
			g->xid = 0;
		}
	}
	if (err && g->slot >= 0)
		__clear_bit(g->slot, &conn->slot_busy);
	return err;
}

/* Waits for a copy in progress: none can start or run after it. */
static void kcoll_local_unexpose(struct kcoll_conn *conn,
				 struct kcoll_grant *g)
{
	kcoll_xpose_revoke(g->xid);
	g->xid = 0;
}

/*
 * Fill grant @g of the peer from @src + @off: copy, then tell it with the
 * DATA message @m where a WRITE WITH IMM would have told it. The peer's
 * channel delivers the message after the copy. Done at once: there is no
 * completion to wait for.
 */
static int kcoll_local_put(struct kcoll_task *op, struct kcoll_conn *conn,
			   struct kcoll_grant *g, struct kcoll_buf *src,
			   size_t off, struct kcoll_wire_msg *m)
{
	int err;

	/* Up before copying: the DATA message after it must go out. If
	 * the channel refuses it (its peer left 4096 unread, or out of
	 * memory) after the copy landed, the operation fails and the
	 * exposure is revoked with it: the bytes are within the grant. */
	if (conn->state != KCOLL_CONN_UP)
		return conn->error ?: -ECONNRESET;
	/* An exposure's id is 32 bits and it has no key: a grant that says
	 * otherwise is not one this module's peer sent.
	 */
	if (g->addr > U32_MAX || g->rkey)
		return -EPROTO;
	if (g->len) {
		err = kcoll_xpose_copy(conn, g->addr, src->vaddr + off, g->len);
		/*
		 * Gone: the peer dropped the grant. One that leaves (its
		 * revoke, abort or teardown) queues its BYE before it
		 * withdraws what it exposed, and what the BYE says (a
		 * revoke: -ECANCELED) comes first: while the channel holds
		 * messages for us not handled yet, the put waits for them
		 * (their delivery reaps). Until 2026-12-07 the operation
		 * failed with -ECONNRESET at once.
		 */
		if (err == -ENOENT && kcoll_lchan_unread(conn))
			return -ENOBUFS;
		if (err)
			return err;
	}
	err = kcoll_local_send_msg(conn, m);
	if (err)
		return err == -ENOTCONN ? (conn->error ?: -ECONNRESET) : err;
	conn->local_bytes += g->len;
	kcoll_stat_add(KCOLL_STAT_INTRA_BYTES, g->len);
	return KCOLL_PUT_DONE;
}

/* Slots are named by number: nothing to register or announce. */
static int kcoll_local_eager_up(struct kcoll_conn *conn)
{
	return 0;
}

static int kcoll_local_eager_offer(struct kcoll_conn *conn,
				   unsigned long slots, bool again,
				   struct kcoll_wire_msg *m)
{
	return 0;
}

static void kcoll_local_eager_credit(struct kcoll_conn *conn,
				     unsigned int slot,
				     struct kcoll_wire_msg *m)
{
}

static void kcoll_local_eager_reoffered(struct kcoll_conn *conn,
					unsigned long slots,
					const struct kcoll_wire_msg *m)
{
}

/* One channel message carries header and data (kcoll_engine_eager_in()
 * puts them in the slot on the other side). */
static int kcoll_local_eager_put(struct kcoll_conn *conn, u32 slot,
				 struct kcoll_wire_msg *m, const void *h,
				 u32 hlen, const u8 *src, u32 len)
{
	int err;

	if (conn->state != KCOLL_CONN_UP || !conn->lchan)
		return -ENOTCONN;
	err = kcoll_lchan_send_data(conn, m, h, hlen, src, len);
	if (err)
		return err;
	conn->local_bytes += len;
	kcoll_stat_add(KCOLL_STAT_INTRA_BYTES, len);
	return 0;
}

const struct kcoll_xport kcoll_xport_local = {
	.name = "local",
	.wconn = KCOLL_WCONN_LOCAL,
	.send_msg = kcoll_local_send_msg,
	.expose = kcoll_local_expose,
	.unexpose = kcoll_local_unexpose,
	.put = kcoll_local_put,
	.eager_up = kcoll_local_eager_up,
	.eager_offer = kcoll_local_eager_offer,
	.eager_credit = kcoll_local_eager_credit,
	.eager_reoffered = kcoll_local_eager_reoffered,
	.eager_put = kcoll_local_eager_put,
};

/* Module unload: every communicator is gone, and with it every grant. */
void kcoll_local_exit(void)
{
	struct kcoll_lchan *ch, *tmp;
	LIST_HEAD(left);

	/* No channel is kept from now on: every communicator is gone. */
	cancel_delayed_work_sync(&kcoll_lchans_gc_work);
	if (!xa_empty(&kcoll_xposes))
		pr_err("exposed memory left at unload\n");
	/*
	 * Kept for an end that never came (kcoll_lchan_detach()): those
	 * go now; one an end still holds is a bug, and stays. Under the
	 * lock: a communicator's last reference may still be dropped by a
	 * worker (kcoll_exit() drains them later).
	 */
	spin_lock(&kcoll_lchans_lock);
	list_for_each_entry_safe(ch, tmp, &kcoll_lchans, node) {
		if (ch->users) {
			pr_err("intra-node channel left at unload\n");
			continue;
		}
		list_move(&ch->node, &left);
	}
	spin_unlock(&kcoll_lchans_lock);
	kcoll_lchans_free(&left);
	xa_destroy(&kcoll_xposes);
}
