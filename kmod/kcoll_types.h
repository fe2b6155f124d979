/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll types: communicators, connections, memory, operations; their
 * lifetimes and the lock order. Each file's functions are declared in its
 * own header (kcoll_comm.h for kcoll_comm.c, ...).
 *
 * Objects and lifetimes:
 *  - struct kcoll_comm: created by KCOLL_IOC_COMM_CREATE on a file, owned by
 *    it (ctx->comms), destroyed by COMM_DESTROY or the file's release. While
 *    it exists it is on the global comm list, where the rdma_cm listener finds
 *    it for incoming connections. A kref keeps it alive for the listener
 *    between lookup and use.
 *  - struct kcoll_conn: one reliable connection (RC QP + CQ + receive ring)
 *    to one peer rank; owned by its comm, torn down only by the comm (never
 *    from an rdma_cm handler: handlers only mark it dead).
 *  - struct kcoll_task: one collective or point-to-point request in flight;
 *    owns its pinned buffers; completes its kcoll_req exactly once.
 *  - struct kcoll_mem: a KCOLL_IOC_REG_MEM registration, owned by the file.
 *
 * Locking (outer to inner):
 *  rdma_cm handler mutex (per cm_id)
 *  ctx->comm_lock (mutex)     a file's comms: create, destroy, DEREG_MEM
 *  comm->dev_sem (rwsem)      registrations on the comm's device, and
 *                             their release until the MRs are gone (read),
 *                             against device removal and destroy (write);
 *                             never held across a user page fault
 *  kcoll_comms_lock (mutex)   the global comm list
 *  comm->lock (mutex)         everything mutable in a comm, its conns and its
 *                             ops; taken by ioctls, rdma_cm handlers and the
 *                             CQ completion handlers
 *                             (IB_POLL_WORKQUEUE: process context,
 *                             so reductions may use the FPU)
 *  ctx->cq_lock (spinlock)    posting CQEs (kcoll_req_complete)
 *  kcoll_lchans_lock, then a channel's lock (spinlocks, kcoll_local.c):
 *                             the intra-node channels, taken under
 *                             comm->lock; the xarray of exposures takes
 *                             its own lock, RCU for lookups
 * Never hold comm->lock across rdma_destroy_id(), ib_drain_qp() or
 * ib_free_cq(): they wait for handlers that take it.
 */
#ifndef KCOLL_TYPES_H
#define KCOLL_TYPES_H

#include <linux/mmu_notifier.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rwsem.h>
#include <linux/scatterlist.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "kcoll.h"
#include "kcoll_ib.h"
#include "kcoll_stats.h"
#include "kcoll_sysfs.h"
#include "kcoll_tune.h"
#include "kcoll_reduce.h"
#include "kcoll_sched.h"
#include "kcoll_wire.h"
#include "kcoll_quota.h"

#define KCOLL_RQ_DEPTH		256	/* receives posted per QP */
#define KCOLL_SQ_DEPTH		256	/* send WRs per QP */
#define KCOLL_GRANT_WINDOW	8	/* grants outstanding per QP & kind */
#define KCOLL_MAX_LANES		KCOLL_QPS_PER_PEER_MAX	/* RC QPs per peer */
/*
 * What a peer may leave queued with us, per connection: its grants we have
 * not written yet (per kind; a correct peer has at most its window out,
 * plus those of operations that failed on its side before ours caught up)
 * and its SIGs and ABORTs for operations we have not started (a correct
 * peer cannot complete a collective without our SIG, so it is never more
 * than a few ahead). More is a protocol error: kernel memory a peer can
 * make us allocate stays bounded.
 */
#define KCOLL_GRANTS_QUEUED_MAX(conn)	(16 * (conn)->window)
#define KCOLL_SIGS_QUEUED_MAX		256
/* A peer's asks for our SIG kept per connection (kcoll_sig_ask_add()):
 * one per collective it can have unfinished, those running and those that
 * returned before their confirmations ("Confirmations behind"). */
#define KCOLL_ASKS_MAX	(KCOLL_COLLS_IN_FLIGHT_MAX + KCOLL_CONFIRM_BEHIND_MAX)
KCOLL_STATIC_ASSERT(KCOLL_ASKS_MAX <= 255, "conn->nasks is a u8");
/* Reduce landing slots per connection: the largest window (a bitmap). */
#define KCOLL_STAGE_SLOTS	(KCOLL_GRANT_WINDOW * KCOLL_MAX_LANES)
/* Grant MRs per connection: every kind's window out and as many again
 * retired, not yet invalidated. */
#define KCOLL_GMR_MAX		(2 * KCOLL_KIND_NR * KCOLL_STAGE_SLOTS)
/*
 * Kernel memory a user makes us allocate: charged to a memory cgroup (the
 * caller's, or in a worker the one kcoll_comm_memcg_begin() names), and
 * past its limit a failure (-ENOMEM), not a call of its OOM killer.
 */
#define KCOLL_GFP_CHARGED	(GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL | \
				 __GFP_NOWARN)
#define KCOLL_REG_BATCH		32	/* REG_MR WRs per registration batch */
#define KCOLL_INLINE_WANT	256	/* inline data asked of a QP */
#define KCOLL_PINGS		4	/* round trips timed per connection */
/* Operations whose largest buffer is no larger go without MRs. */
#define KCOLL_SMALL_BYTES	KCOLL_EAGER_MAX
/* A connection's eager slots and the bounces of its eager sends. */
#define KCOLL_EAGER_BYTES	(2 * KCOLL_EAGER_SLOTS * KCOLL_EAGER_SLOT_BYTES)

/* ------------------------------------------------------------------ */
/* Memory                                                               */
/* ------------------------------------------------------------------ */

/* One fast-registration MR covering a run of a buffer's pages, for the
 * NIC's local reads (sends): no peer can use it. */
struct kcoll_mrseg {
	struct ib_mr *mr;
	struct sg_table sgt;
	bool mapped;
	size_t start;		/* byte offset in the buffer's page span */
	size_t len;
};

struct kcoll_buf;

/*
 * A kind of buffer: the one interface the engine's memory goes through.
 * The CPU reaches a buffer through b->vaddr (NULL: it cannot, and its
 * reductions must run where the data is); the NIC through its segments'
 * DMA-mapped scatterlists and MRs, and a peer through grant MRs built from
 * b->dma.
 */
struct kcoll_buf_ops {
	const char *name;
	/* DMA-map pages [@first, @first + @n) of @b into segment @s
	 * (s->sgt, s->mapped) for b->ibdev; undo it. */
	int (*dma_map)(struct kcoll_buf *b, struct kcoll_mrseg *s,
		       unsigned int first, unsigned int n);
	void (*dma_unmap)(struct kcoll_buf *b, struct kcoll_mrseg *s);
	/* Give back what backs @b (its MRs, mappings and vmap are gone). */
	void (*release)(struct kcoll_buf *b);
	/* b->dma is the kind's own (an import's DMA addresses), filled
	 * before registration and freed by .release. */
	bool dma_ready;
};

/**
 * struct kcoll_buf - memory the engine moves data in and out of: pinned
 * user pages or pages of its own, mapped for the CPU (vmap) and, when the
 * comm has connections, DMA-mapped and registered (fast-reg MRs).
 * Byte b of the buffer is at vaddr + b and, for the NIC, in segment
 * (off0 + b) / seg_bytes.
 */
struct kcoll_conn;
struct kcoll_comm;
struct kcoll_gpu;
struct kcoll_xport;
struct kcoll_exec;
struct kcoll_dmabuf;
struct kcoll_pg;

struct kcoll_buf {
	/* What backs it, and how that is given back and DMA-mapped
	 * (kcoll_mem.c): pinned user pages, pages of our own, or a dma-buf
	 * import (kcoll_dmabuf.c). NULL: empty. */
	const struct kcoll_buf_ops *ops;
	struct page **pages;
	unsigned int npages;
	size_t off0;		/* offset of byte 0 in the first page */
	size_t len;
	bool writable;		/* pinned with FOLL_WRITE, or ours: grants
				 * may expose it to a peer (else it is only
				 * read); user pages dirtied on release */
	bool charged;		/* npages charged to mm->pinned_vm */
	struct mm_struct *mm;	/* mmgrab()ed when charged */
	void *vmap_base;
	u8 *vaddr;
	struct ib_device *ibdev;
	dma_addr_t *dma;	/* registered: each page's DMA address */
	struct kcoll_mrseg *segs;
	unsigned int nsegs;
	size_t seg_bytes;
	struct kcoll_quota *quota;	/* allocated: charged npages pages */
	/* KCOLL_REG_NO_CPU: the CPU must never touch it (vaddr is NULL);
	 * only the NIC moves its bytes. */
	bool nocpu;
	struct kcoll_dmabuf *imp;	/* a dma-buf import (kcoll_dmabuf.c) */
};

/* A KCOLL_IOC_REG_MEM registration. */
struct kcoll_mem {
	struct list_head node;		/* comm->mems; comm->lock */
	u32 handle;
	u64 addr;
	u64 len;
	struct kcoll_comm *comm;	/* whose device it is registered on */
	struct kcoll_quota *quota;	/* charged one registration */
	struct kcoll_buf buf;
	/* 1 while it has a handle, + 1 per op using it; the last put frees
	 * it (kcoll_mem_put()). Taken under ctx->mems' xa_lock. */
	refcount_t users;
	/* Registration cache entries (kcoll_regcache.c): no handle; on
	 * comm->cache while @cached (comm->lock), which holds a use. */
	bool is_cache;
	bool cached;
	bool mni_on;			/* @mni inserted */
	unsigned long seq;		/* @mni's, before the pin */
	bool comm_ref;			/* holds a reference of @comm */
	/* Grant MRs tied to it (struct kcoll_gmr's @mem); comm->lock. */
	unsigned int gmr_ties;
	/*
	 * Cache entries: the mapping changed, never reused. REG_MEM
	 * registrations: their pages are not what the range maps now.
	 */
	atomic_t stale;
	/*
	 * REG_MEM registrations watched by @mni: the mm changed the range
	 * (not only its protection); checked again at the next use.
	 */
	atomic_t suspect;
	struct mmu_interval_notifier mni;
	/* Off the cache after a change (per user: kcoll_quota_defer()). */
	struct kcoll_deferred drop;
	struct kcoll_deferred free;	/* after the last put: notifier, comm,
					 * registration quota (one at a time
					 * per user: kcoll_quota_defer()) */
};


/* ------------------------------------------------------------------ */
/* Connections                                                          */
/* ------------------------------------------------------------------ */

enum kcoll_conn_state {
	KCOLL_CONN_IDLE,	/* nothing yet (passive side waits) */
	KCOLL_CONN_CONNECTING,
	KCOLL_CONN_UP,
	KCOLL_CONN_DEAD,	/* lost; the comm has failed */
};

struct kcoll_rx {
	struct ib_cqe cqe;
	struct kcoll_lane *lane;
	struct kcoll_wire_msg *msg;
	u64 dma;
};

/*
 * A grant MR (kcoll_gmr.c): the only way a peer can write into our memory.
 * One fast-registration MR per grant (or eager slot), over exactly the
 * bytes granted, registered before the GRANT (or CREDIT) that names it is
 * sent, invalidated once the data is in (or the grant is dropped) and
 * before the memory can be used for anything else.
 */
enum kcoll_gmr_state {
	KCOLL_GMR_FREE,		/* invalid; in conn->gmr_free (eager: idle) */
	KCOLL_GMR_LIVE,		/* registered, in conn->gmr_busy: a peer may
				 * write (also once retired, until the next
				 * kcoll_gmr_flush()) */
};

struct kcoll_task;

struct kcoll_gmr {
	struct list_head node;		/* conn->gmr_free / gmr_busy */
	struct list_head due;		/* conn->gmr_inv_due: retired */
	struct list_head op_due;	/* op->gmr_due: retired, of an op */
	struct kcoll_conn *conn;
	struct ib_mr *mr;
	enum kcoll_gmr_state state;
	struct kcoll_task *op;		/* whose grant (counted in op->gmrs) */
	int slot;			/* staging slot freed once invalid */
	int eslot;			/* eager slot it serves, or -1 */
	bool mapped;			/* eager: mapped (once, for good) */
	bool fence;			/* maps pages its op unpins when it
					 * completes, on a device whose
					 * invalidation is no fence: when its
					 * grant ends it is deregistered */
	/*
	 * On such a device, the registration or cache entry whose pages it
	 * has mapped since it was allocated (counted in its gmr_ties): it
	 * maps nothing else until deregistered, and it is deregistered
	 * before those pages are let go (kcoll_gmr_forget()). comm->lock.
	 */
	struct kcoll_mem *mem;
	unsigned int max_pages;
	struct scatterlist sg[];	/* max_pages: the grant's pages */
};

/* A grant we issued (waiting for data) or received (waiting to be used). */
struct kcoll_grant {
	struct list_head node;
	struct ib_cqe cqe;	/* received grants: the WRITE's completion */
	struct kcoll_conn *conn;
	u32 seq;
	u32 phase;		/* issued: the phase it is for (op->phase,
				 * or the next one: kcoll_op_grant_ahead()) */
	u32 serial;
	u64 addr;		/* received grants: where to write */
	u32 rkey;
	u32 len;
	struct kcoll_task *op;	/* the op receiving (issued) or sending
				 * (received, once used) */
	size_t dst_off;		/* issued: byte offset in the op's recv region */
	int slot;		/* issued: staging slot, or -1 (direct) */
	bool landed;		/* issued: its data is here (lanes land out
				 * of order; grants retire in order) */
	u8 lane;		/* received: the QP its WRITE went on */
	u32 xid;		/* issued on an intra-node connection: the
				 * exposure of its memory (0: none) */
	struct kcoll_gmr *gmr;	/* issued through the NIC: its MR */
	/* Received grants: the receiver's signature, checked when our send
	 * first uses them (collectives: also when they arrive during our
	 * operation). */
	bool sig_unchecked;
	struct kcoll_wire_msg sig;
};

/*
 * One RC QP of a connection. Lane 0 carries every control message and its
 * share of the data; lanes 1.. carry data only (docs/DESIGN.md, "Several
 * QPs per peer"). All lanes of a connection share its CQ.
 */
struct kcoll_lane {
	struct kcoll_conn *conn;
	u8 idx;
	struct rdma_cm_id *cm_id;	/* NULL once destroyed */
	struct ib_qp *qp;
	struct kcoll_rx *rx;		/* KCOLL_RQ_DEPTH */
	struct kcoll_wire_msg *rx_msgs;	/* KCOLL_RQ_DEPTH, one per cache
					 * line (kcoll_lane_create_qp()) */
	struct ib_cqe tx_cqe;		/* control SENDs, inline WRITEs */
	u32 max_inline;			/* the QP's inline data limit */
	u32 sq_posted;			/* send WRs not yet completed */
	unsigned long sent_at;		/* jiffies: last send completion, or
					 * the posting that ended idleness */
	u8 ack_timeout;			/* what its QP was connected with
					 * (sysfs ack_timeout then) */
	/* Authentication (kcoll_auth.c): the hello's and the accept's
	 * nonces; the accepting side counts the QP established once it
	 * has seen both the ESTABLISHED event and a good AUTH. */
	struct kcoll_wire_hello hello;	/* connecting side: what we sent */
	u8 nonce_hello[KCOLL_AUTH_NONCE];
	u8 nonce_accept[KCOLL_AUTH_NONCE];
	bool established;
	bool authed;
	bool draining;			/* its QP is being destroyed (set
					 * under comm->lock before the drain):
					 * no receive is posted again, nothing
					 * is sent, no kill touches the QP */
};

struct kcoll_conn {
	struct kcoll_comm *comm;
	u32 peer;
	bool active;			/* we connect; the peer listens */
	bool local;			/* the peer is on this node: data is
					 * copied, not written (kcoll_local.c) */
	bool local_offer;		/* active side: we asked for that */
	u64 local_bytes;		/* copied to the peer (intra-node) */
	bool peer_pongs;		/* the peer answers PING (its REP said
					 * so, or it pinged us) */
	u8 pings;			/* sent so far (KCOLL_PINGS at most) */
	u8 pongs;			/* ... and answered */
	u64 ping_at;			/* ktime_get_ns() at the last PING */
	u64 ping_min_ns;		/* shortest round trip seen */
	u64 pong_due;			/* passive side: a PING's clock that
					 * came before we were up (0: none) */
	const struct kcoll_xport *xp;	/* how data and messages move
					 * (kcoll_xport.h): the NIC's lanes,
					 * or the channel once a local peer
					 * is up */
	struct kcoll_lchan *lchan;	/* local and up: control messages
					 * go through it, not the QP */
	u64 lchan_gen;			/* its generation, kept after it
					 * goes: what this connection's
					 * copies may fill (kcoll_local.c) */
	struct work_struct lrx;		/* delivers the channel's messages */
	/*
	 * Of the channel's batch being delivered, the messages not
	 * handled yet (kcoll_local.c); comm->lock
	 */
	unsigned int lchan_left;
	/* Its teardown detached it (once: kcoll_conn_free() may shut down
	 * again); comm->lock.
	 */
	bool lchan_detached;
	enum kcoll_conn_state state;
	int error;			/* why it died */
	struct ib_cq *cq;		/* every lane's */
	struct delayed_work retry;	/* active side: reconnect later;
					 * passive side: an attempt's AUTH
					 * deadline, or its unwinding */
	unsigned int attempts;
	int setup_err;			/* passive side: why we last refused
					 * it for want of room here (-EDQUOT,
					 * -ENOMEM, ...); 0: none */
	bool peer_no_room;		/* active side: the peer refused it
					 * for want of room (KCOLL_REJ_NOMEM)
					 * at least once */
	bool peer_stale;		/* active side: the peer refused our
					 * hello as no newer than one it saw
					 * from us (KCOLL_REJ_STALE) since our
					 * last accepted attempt */
	bool peer_dup;			/* active side: the peer refused it
					 * as a duplicate (KCOLL_REJ_DUP: an
					 * attempt from our rank held its
					 * place) at least once */
	/*
	 * Passive side, setting up: the peer disconnected, and its QP was
	 * flushed so that what it sent before (its AUTH, its BYE) is
	 * handled first; the flushed receives then fail the attempt.
	 */
	bool peer_left;
	bool unwinding;			/* passive side: an attempt that
					 * failed before proving the key is
					 * being torn down (conn->retry); the
					 * connection then waits again */
	u8 accepting;			/* passive side: accepts of
					 * kcoll_conn_request() in flight */
	unsigned long auth_due;		/* passive side: jiffies by which the
					 * attempt's first QP proves the key */
	u64 hello_seen;			/* passive side: the newest stamp of
					 * a hello with our key from the peer
					 * (kcoll_hello_stamp()); 0: none */
	u8 nlanes;			/* QPs: the active side's choice */
	u8 lanes_up;			/* established during setup */
	u8 lanes_charged;		/* QPs charged for it (user_max_qps) */
	struct kcoll_lane lane[KCOLL_MAX_LANES];
	u32 sq_posted;			/* every lane's, summed */
	u32 window;			/* grants out per kind */

	struct kcoll_buf stage;		/* reduce landing slots */
	size_t slot_bytes;
	unsigned long slot_busy;	/* bitmap of conn->window slots */

	/* Eager transfers (docs/DESIGN.md, "Eager transfers"). */
	bool eager_offer;		/* active side: our hello offered it */
	bool eager;			/* agreed: small collective transfers
					 * go without a grant */
	struct kcoll_buf ebuf;		/* our receive slots, then the
					 * bounces of our sends */
	struct kcoll_gmr *egmr[KCOLL_EAGER_SLOTS];	/* each receive
					 * slot's MR (through the NIC) */
	struct {
		bool full;		/* landed, not yet consumed */
		bool signed_;		/* @sig came with it */
		u8 kind;		/* KCOLL_KIND_COLL or _P2P */
		u16 phase;
		u32 seq;
		u32 len;
		u32 hlen;		/* header (and signature) bytes */
		struct kcoll_wire_eager_sig sig;
	} erx[KCOLL_EAGER_SLOTS];
	unsigned long erx_due;		/* consumed; CREDIT not yet sent */
	unsigned long erx_offered;	/* first CREDIT sent (then CREDITS,
					 * each re-offer under the next key) */
	/*
	 * Eager point-to-point (docs/DESIGN.md, "Eager point-to-point"):
	 * agreed once both CREDITs said KCOLL_CREDIT_P2P (kcoll_conn_p2p()).
	 * A small send landing before its receive is posted holds its slot
	 * for as long as the application likes: at most half of a peer's
	 * slots ever hold ours (etx_p2p, together with the transfers of
	 * collectives behind our head, etx_young), so the head always has
	 * the rest, and a receiver refuses more (erx_p2p).
	 */
	bool p2p_offer;			/* our CREDITs said so */
	bool peer_p2p;			/* the peer's did */
	bool peer_p2p_ask;		/* ... and KCOLL_CREDIT_P2P_ASK (ours
					 * always say it with KCOLL_CREDIT_P2P) */
	bool p2p_asked;			/* the peer asked for a grant ... */
	u32 p2p_ask_seq;		/* ... of receive seq, and older ones
					 * (kcoll_p2p_waited()) */
	unsigned long etx_p2p;		/* the peer's slots our point-to-point
					 * writes hold until offered again */
	unsigned long etx_young;	/* ... and those of collectives
					 * behind our head (kcoll_op_send_eager()) */
	unsigned int erx_p2p;		/* our slots holding theirs */
	unsigned long etx_free;		/* the peer's slots we may write */
	unsigned long etx_known;	/* offered once: address known */
	u64 etx_addr[KCOLL_EAGER_SLOTS];
	u32 etx_rkey[KCOLL_EAGER_SLOTS];

	struct {
		u32 serial_out;		/* next grant serial we issue */
		u32 serial_in;		/* next grant serial we expect */
		struct list_head out;	/* issued, waiting for data */
		struct list_head in;	/* received, not yet written */
		u32 nr_out;
		u32 p2p_send_seq;	/* P2P only: next seq per direction */
		u32 p2p_recv_seq;
		struct list_head p2p_sends;	/* P2P ops to this peer */
		struct list_head p2p_recvs;	/* P2P ops from this peer */
	} k[KCOLL_KIND_NR];
	/* Grant MRs (kcoll_gmr.c); comm->lock. */
	struct list_head gmr_free;
	struct list_head gmr_busy;	/* LIVE */
	struct list_head gmr_inv_due;	/* retired, to invalidate */
	unsigned int gmr_nr;		/* allocated, the eager slots' too;
					 * grants' stop at KCOLL_GMR_MAX */

	struct list_head sigs;		/* received SIGs not yet checked */
	/* Lazy signatures (docs/DESIGN.md): both must offer them. */
	bool lazy_offer;		/* our CREDITs say KCOLL_CREDIT_LAZY */
	bool peer_lazy;			/* the peer's CREDITs said so */
	/* Tokens that cover: both must offer them (KCOLL_CREDIT_COVER). One
	 * token write at a time through the NIC: tok_busy until the send
	 * completion numbered tok_mark (tx_done reaching it). */
	bool cover_offer;
	bool peer_cover;
	bool tok_busy;
	u32 tok_mark;
	u32 tx_posted;			/* send WRs posted, all lanes ... */
	u32 tx_done;			/* ... and completed, ever (wrap) */
	/* The collectives whose SIG the peer asked for (KCOLL_SIG_ASK) and
	 * we have not sent yet: one per collective it has unfinished; past
	 * KCOLL_ASKS_MAX the oldest ask is forgotten (best effort). */
	u8 nasks;			/* KCOLL_ASKS_MAX fits */
	u32 asks[KCOLL_ASKS_MAX];
	bool bye;			/* the peer said BYE: */
	u32 bye_done;			/* it completed every collective
					 * below this seq */
	bool bye_sent;			/* we said ours */
	/* An ABORT of ours found no room (the peer drains nothing): the
	 * connection is killed with this error by kcoll_engine_reap(),
	 * not by the sender, which may be walking lists the kill frees. */
	int kill_due;
};

/* ------------------------------------------------------------------ */
/* Operations                                                           */
/* ------------------------------------------------------------------ */

struct kcoll_sig {
	struct list_head node;
	u32 seq;
	struct kcoll_wire_msg msg;
};

/* Whether a collective grants (or sends) its next phase ahead
 * (kcoll_op_grant_ahead(), kcoll_op_send_ahead()). */
enum kcoll_ahead {
	KCOLL_AHEAD_UNDECIDED,		/* not looked at in this phase yet */
	KCOLL_AHEAD_ON,			/* ahead_rv (ahead_sd): doing it */
	KCOLL_AHEAD_OFF,		/* not possible in this phase */
};

struct kcoll_task {
	struct kcoll_req *req;
	struct kcoll_comm *comm;
	struct list_head node;		/* comm->colls, or a conn's p2p list */
	struct list_head all;		/* comm->ops */
	u32 kind;
	u32 seq;
	struct kcoll_sched_args args;
	u64 *vec;			/* the v-variants' count table, copied
					 * in (args.vec), charged to vec_quota */
	size_t vec_bytes;
	struct kcoll_quota *vec_quota;
	/* The SEND and RECV buffers as the SQE names them, from
	 * kcoll_op_prepare() (which pins plain ones, no dev_sem) to
	 * kcoll_op_bind() (which registers and takes views, under it). */
	struct kcoll_op_want {
		u64 addr;
		size_t len;
		u32 handle;
		bool writable;
		bool cached;	/* the cache may hold it: taken in bind */
		bool missed;	/* it did not: pinned outside dev_sem */
	} want[2];
	u8 dtype;
	u8 redop;
	u8 prio;			/* SQE priority */
	/* Counted there while started, until it returns or completes. */
	struct kcoll_prio *prio_dev;
	unsigned long held_since;	/* jiffies; with @held */
	u8 prio_aged;			/* levels gained while held (aging) */
	bool held;			/* sends held back for a higher prio */
	size_t esize;
	kcoll_reduce_fn reduce;		/* the CPU's, for the executor */
	const struct kcoll_exec *exec;	/* where its local steps run */

	struct kcoll_buf bufs[KCOLL_SBUF_NR];
	struct kcoll_mem *mems[KCOLL_SBUF_NR];	/* registered, or NULL */
	size_t buf_base[KCOLL_SBUF_NR];	/* byte offset of the user address
					 * in a registered buffer */

	bool unreg;			/* its buffers have no MRs (small, or
					 * no peer through the NIC): receives
					 * land in staging, sends go inline or
					 * register on demand */
	bool nocpu;			/* a buffer is KCOLL_REG_NO_CPU */
	/* Stream-ordered on a GPU (KCOLL_SQE_F_GPU, kcoll_gpu.c) */
	bool gpu;
	bool gpu_started;		/* its stream reached it */
	bool gpu_waiting;		/* for its stream, now */
	bool gpu_posted;		/* step gpu_step is handed over */
	bool gpu_reduced;		/* the current phase's step is done */
	u64 gpu_t;			/* ticket << KCOLL_GPU_TICKET_SHIFT */
	u32 gpu_step;			/* steps done */
	u32 gpu_nsteps;			/* steps its schedule has */
	u64 gpu_posted_ns;		/* when step gpu_step was handed over */
	bool started;
	u32 nphases;
	u32 data_phases;		/* those that touch memory: the rest
					 * are empty (kcoll_sched_data_phases) */
	u32 phase;			/* current */
	bool phase_open;
	struct kcoll_phase ph;
	/* current phase, bytes */
	u64 send_total, send_posted, send_done;
	u64 recv_total, recv_granted, recv_done;
	bool send_posted_any, send_done_any;	/* empty transfers count */
	bool recv_granted_any, recv_landed_any;
	/*
	 * The next phase's receive, granted while this phase runs
	 * (kcoll_op_grant_ahead()): decided once per phase, its bytes
	 * granted and landed so far, which become the phase's own when it
	 * opens.
	 */
	enum kcoll_ahead ahead;
	struct kcoll_srecv ahead_rv;
	u64 ahead_granted, ahead_done;
	bool ahead_granted_any, ahead_landed_any;
	/*
	 * The next phase's send, into the grants its receiver issued for it,
	 * once this phase's send is posted (kcoll_op_send_ahead()): decided
	 * once per phase, its bytes posted and written so far, which become
	 * the phase's own when it opens.
	 */
	enum kcoll_ahead sahead;
	struct kcoll_ssend ahead_sd;
	u64 ahead_posted, ahead_sent;
	bool ahead_posted_any, ahead_sent_any;
	/*
	 * Eager transfers of later phases, sent once this phase's send is
	 * posted (kcoll_op_send_early()): every phase below early_next
	 * that sends has sent; early_stop: the next one may not while this
	 * phase runs.
	 */
	u32 early_next;
	bool early_stop;
	bool early_ok;			/* the rule let early_next go: it
					 * waits for a slot */
	u32 writes_inflight;
	bool abort_deferred;		/* ABORTs wait for writes_inflight */
	u32 grants_out;			/* issued by this op, data not in */
	u32 grants_mem;			/* ... of those, over memory (len > 0:
					 * an empty one, a token's, exposes
					 * none) */
	u32 gmrs;			/* its grants' MRs not yet invalid */
	struct list_head gmr_due;	/* ... of those, retired: every
					 * connection's (kcoll_gmr_flush_op()) */

	u32 sigs_ok;			/* peers whose signature matched */
	unsigned long *sig_seen;	/* collectives: those peers, by rank */
	/*
	 * Collectives that run beside an older one (docs/DESIGN.md,
	 * "Several collectives in flight"): the pages of its user buffers,
	 * sorted, each with the parts the op reads and writes (built when
	 * first compared, kcoll_overlap.c); NULL and pg_n 0: none.
	 */
	struct kcoll_pg *pg;
	u32 pg_n;
	bool pg_built;
	bool pg_all;			/* could not list them: overlaps all */
	bool overlap_counted;		/* in stats/colls_overlap_waits */
	u32 overlap_seq;		/* ... because of this older one */
	bool was_head;			/* has been the head: its lazy clock
					 * (lazy_at) runs from then */
	u32 sigs_sent;			/* ranks below this have our SIG (a
					 * full send queue defers the rest) */
	bool lazy;			/* all-dependent: no SIG to, and none
					 * needed from, kcoll_conn_lazy() peers */
	bool lazy_due;			/* stalled past lazy_at: ask them too */
	bool p2p_grant_due;		/* eager point-to-point receive that
					 * waited past p2p_grant_at: grant it
					 * too (kcoll_p2p_waited()) */
	bool eager_sent;		/* written eagerly (kcoll_op_send_eager) */
	bool p2p_asked;			/* a point-to-point send that found no
					 * slot asked its receiver to grant
					 * (kcoll_p2p_ask()) */
	unsigned long p2p_grant_at;		/* jiffies; 0: not armed */
	bool lazy_sent;			/* the asks are out */
	unsigned long lazy_at;		/* jiffies */
	u64 lazy_mark;			/* kcoll_op_mark() at lazy_at */
	int error;			/* first error, sticky */
	u8 reason;			/* enum kcoll_report_reason of @error */
	u32 report_peer;		/* the rank @reason names, or ~0U */
	u32 *missing;			/* timed out: ranks still waited for */
	u32 nmissing;
	u64 t_submit;			/* ktime_get_ns() at submission */
	u64 user_data;			/* its SQE's, for the report */
	bool returned;			/* its CQE went before its confirmation
					 * tokens were in; @req is NULL since
					 * (kcoll_op_return()) */
	/*
	 * Tokens that cover (docs/DESIGN.md): tok_want, its phase's token
	 * waits for kcoll_tokens_flush(), which sends it, alone or with
	 * younger ones; tok_cover, bit j: phase j's token came inside a
	 * younger collective's (kcoll_eager_cover_in()).
	 */
	bool tok_want;
	u64 tok_cover;
	/*
	 * Where a collective's time goes (sysfs stats time_*, added when
	 * it completes without error): ktime_get_ns() when it started,
	 * its phase opened, the phase's first byte moved (posted or
	 * landed), its last phase ended and it finished; and the sums.
	 */
	u64 t_start, t_phase, t_first, t_phases_end, t_finished;
	u64 ns_wait, ns_move, ns_land;
	unsigned long deadline;		/* jiffies; 0: no timeout */
	unsigned long drain_by;		/* failed: quiet by then, or its
					 * connections are closed (0: n/a) */
	u32 timeout_ms;
	u64 bytes;			/* payload, for statistics */
	bool aborted_sent;
	bool finished;
};

/* ------------------------------------------------------------------ */
/* Communicators                                                        */
/* ------------------------------------------------------------------ */

/* Why the last failed operation failed (KCOLL_IOC_COMM_REPORT). */
struct kcoll_report {
	u64 user_data;
	u64 seq;
	int error;
	u8 reason;
	u8 opcode;
	u32 peer;
	u32 *missing;			/* kmalloc'ed, @nmissing ranks */
	u32 nmissing;
	u64 elapsed_ms;
};

struct kcoll_comm {
	struct kref ref;
	struct kcoll_ctx *ctx;
	struct kcoll_quota *quota;	/* charged the comm and its QPs (NULL
					 * until both are) */
	u32 quota_qps;
	/* The creator's memory cgroup (a reference), which what workers
	 * and rdma_cm's handler allocate for the comm is charged to
	 * (kcoll_comm_memcg_begin()); NULL without memcg. */
	struct mem_cgroup *memcg;
	u32 id;				/* handle in ctx->comms */
	u32 gid;			/* node-wide id (netlink), never 0 */
	struct pid *pid;		/* creator's thread group (held) */
	kuid_t owner;			/* creator's real uid: who may see it
					 * through netlink */
	struct list_head node;		/* kcoll_comms; kcoll_comms_lock */
	bool listed;
	struct list_head all_node;	/* kcoll_comms_all, from creation to
					 * free: device removal finds every
					 * comm that may hold its resources */
	/*
	 * Held for read by whoever registers memory on the comm's device
	 * (an operation from its checks to its queueing, REG_MEM), for write
	 * by device removal and destroy: they wait for those registrations,
	 * which find comm->error set afterwards. Outside ctx->comm_lock,
	 * outside comm->lock.
	 */
	struct rw_semaphore dev_sem;

	u64 uid;
	u64 parent_uid;			/* informational; 0: none */
	u8 key[KCOLL_KEY_LEN];
	struct crypto_shash *auth;	/* hmac(sha256) keyed with @key */
	atomic64_t hello_stamp;		/* the last stamp our hellos used */
	u32 rank;
	u32 nranks;
	struct kcoll_rank_addr *ranks;
	struct sockaddr_storage self_addr;

	struct mutex lock;
	wait_queue_head_t wait;		/* connection progress */
	struct kcoll_conn **conns;	/* [nranks]; NULL for self */
	u32 nr_up;
	u32 remote_peers;		/* connections through the NIC, once
					 * all are up; 0: buffers need no MRs */
	bool devmem;			/* KCOLL_COMM_DEVMEM: no eager, no
					 * intra-node channel offered */
	u32 cm_busy;			/* rdma_cm handlers running */
	struct list_head mems;		/* registrations on this comm */
	struct list_head cache;		/* kcoll_regcache.c, MRU first; lock */
	u64 cache_bytes;
	u32 cache_n;
	int error;			/* sticky: the comm is unusable */
	u32 lost_rank;			/* + 1, the peer whose loss set it */
	bool shutting_down;
	bool shut_owed;			/* begun, its finish not claimed */
	int shut_err;			/* what the shutdown fails ops with */
	/*
	 * Our BYEs were tried (leaving, or a peer's revoke): no ABORT
	 * goes where one is still owed.
	 */
	bool byes_begun;
	/* jiffies: the shutdown's BYEs queued (kcoll_comm_bye_until()) */
	unsigned long bye_since;
	bool shut;			/* kcoll_comm_shutdown() is over */
	bool aborted;			/* KCOLL_IOC_COMM_ABORT */
	bool revoked;			/* KCOLL_ABORT_REVOKE, here or by a
					 * peer: our BYEs pass it on */
	/*
	 * A peer's revoke came before any failure: a COMM_CREATE still
	 * waiting returns the revoked comm (kcoll_comm_connected()), not
	 * the failure's error.
	 */
	bool revoked_first;
	u32 revoker;			/* the rank that revoked */
	u32 revoke_nops;		/* a peer's revoke: ops it cancelled */
	struct work_struct revoke_work;	/* a peer's revoke: our shutdown */
	struct ib_device *ibdev;	/* of every connection; NULL once
					 * removed (under dev_sem, write) */
	struct ib_pd *pd;
	/* The cost model inputs of every rank seen so far, the largest of
	 * each: complete (and equal on every rank) once all are connected.
	 * Under @lock. */
	struct kcoll_model model;
	struct kcoll_model mine;	/* what this rank advertises; fixed */
	struct kcoll_prio *prio;	/* the device's, NULL without one */
	u8 lanes;			/* QPs per peer we connect with */
	struct delayed_work kick;	/* re-run the engine (held ops) */
	struct delayed_work timeout_work; /* fails ops past their deadline */
	unsigned long timeout_at;	/* jiffies it is queued for */
	struct kcoll_report report;	/* last failure */
	struct kcoll_opstats stats;
	struct kcoll_opstats *dstats;	/* the device's, NULL without one */
	size_t seg_pages;		/* fast-reg page list length */
	unsigned long connect_start;	/* jiffies: COMM_CREATE began */
	unsigned long connect_deadline;	/* jiffies */

	struct kcoll_gpu *gpu;		/* KCOLL_IOC_GPU_SETUP, under @lock */

	u32 coll_seq;			/* next collective seq to assign */
	u32 coll_done_seq;		/* collectives finished */
	u32 nr_returned;		/* in @colls, returned to the caller
					 * before confirmed (op->returned) */
	u32 kills_due;			/* connections with kill_due set */
	atomic_t ack_max;		/* the largest lane->ack_timeout */
	bool tok_waiting;		/* some collective's tok_want may be
					 * set (kcoll_tokens_flush()) */
	int late_err;			/* one of those failed since: the next
					 * collective to complete reports it */
	struct list_head colls;		/* queued collectives, head active */
	struct list_head ops;		/* every op in flight */
	u32 nr_ops;
};

#endif /* KCOLL_TYPES_H */
