/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll module internals.
 *
 * Lifetimes:
 *  - struct kcoll_ctx is created by open() and freed when its last reference
 *    goes: the file holds one, every in-flight request holds one. release()
 *    cancels what it can and waits until no request is on the in-flight
 *    list; a completion may still be unwinding (after its CQE) when it
 *    returns, which is why module exit drains kcoll_wq before freeing.
 *  - the ring region is owned by the ctx; mappings pin the file (VMA holds a
 *    file reference), so release() cannot run while the rings are mapped.
 *
 * Locking (outer to inner):
 *  ctx->submit_lock (mutex) - SQ consumption, setup
 *  ctx->cq_lock (spinlock, irqsave) - CQ production and reservation, the
 *                                     ctx->reqs list, the eventfd pointer
 */
#ifndef KCOLL_H
#define KCOLL_H

#include <linux/atomic.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/kref.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/eventfd.h>
#include <linux/xarray.h>

#include "kcoll_logic.h"
#include "../uapi/linux/kcoll_netlink.h"

struct kcoll_ctx;

/* Shared-region fields, resolved from the layout once at setup. */
struct kcoll_rings {
	u32 *sq_head;
	u32 *sq_tail;
	u32 *sq_flags;
	struct kcoll_sqe *sqes;
	u32 *cq_head;
	u32 *cq_tail;
	u32 *cq_flags;
	struct kcoll_cqe *cqes;
};

/**
 * struct kcoll_req - one accepted descriptor until its CQE is posted.
 * @sqe:	the validated copy; the shared SQE is never read again
 * @ctx:	owner (holds a reference)
 * @node:	on ctx->reqs while in flight (under ctx->cq_lock)
 * @dwork:	KCOLL_OP_DELAY timer
 */
struct kcoll_req {
	struct kcoll_sqe sqe;
	struct kcoll_ctx *ctx;
	struct list_head node;
	struct delayed_work dwork;
};

struct kcoll_ctx {
	struct kref ref;
	struct mutex submit_lock;
	spinlock_t cq_lock;
	wait_queue_head_t cq_wait;

	/* Set once by setup, under submit_lock, then read-only. */
	bool ready;
	void *region;
	struct kcoll_ring_layout layout;
	struct kcoll_rings r;

	u32 sq_head;		/* private SQ head; written under submit_lock,
				 * read locklessly by poll() */
	u32 cq_tail;		/* private CQ tail; must hold cq_lock */
	u32 cq_reserved;	/* slots promised to in-flight reqs; cq_lock */
	struct list_head reqs;	/* in-flight requests; cq_lock */

	struct eventfd_ctx *evfd; /* RCU-free not needed: set/cleared under
				   * cq_lock, used under cq_lock */

	struct kcoll_quota *quota;	/* its opener's (real uid): charged
					 * for it and what it creates */
	struct mutex comm_lock;	/* creating/destroying comms and mems */
	struct xarray comms;	/* id -> struct kcoll_comm */
	struct xarray mems;	/* handle -> struct kcoll_mem */
};

/**
 * struct kcoll_opdef - the op table entry of one opcode; exactly one of
 * @exec and @issue is set.
 * @exec:	run the operation inline in the submitting task and return its
 *		result; no request is allocated (NOP and other instant ops).
 * @issue:	start an asynchronous request; it completes later, exactly
 *		once, through kcoll_req_complete() (which may also be called
 *		from @issue itself on an early error).
 * @cancel:	called under ctx->cq_lock (must not sleep) when the file is
 *		released: return true if the request was stopped and will
 *		never complete on its own (the caller completes it with
 *		-ECANCELED), false if its completion is already running.
 */
struct kcoll_opdef {
	int (*exec)(const struct kcoll_sqe *sqe);
	void (*issue)(struct kcoll_req *req);
	bool (*cancel)(struct kcoll_req *req);
};

extern const struct kcoll_opdef kcoll_ops[KCOLL_OP_LAST];
void kcoll_queue_delayed(struct delayed_work *dw, unsigned long delay);
void kcoll_queue_work(struct work_struct *w);
void kcoll_mod_delayed(struct delayed_work *dw, unsigned long delay);
void kcoll_coll_issue(struct kcoll_req *req);	/* kcoll_coll.c */
int kcoll_nop_exec(const struct kcoll_sqe *sqe);
int kcoll_ops_init(void);

/* kcoll_ring.c */
struct kcoll_ctx *kcoll_ctx_create(void);
void kcoll_ctx_release(struct kcoll_ctx *ctx);
long kcoll_ctx_setup(struct kcoll_ctx *ctx, struct kcoll_setup *p);
long kcoll_ctx_enter(struct kcoll_ctx *ctx, const struct kcoll_enter *e);
long kcoll_ctx_eventfd(struct kcoll_ctx *ctx, const struct kcoll_eventfd *e);
__poll_t kcoll_ctx_poll_mask(struct kcoll_ctx *ctx);
void kcoll_req_complete(struct kcoll_req *req, int res);
void kcoll_req_complete_flags(struct kcoll_req *req, int res, u32 cflags);
int kcoll_ring_init(void);
void kcoll_ring_exit(void);

/* kcoll_sysfs.c: tunables and statistics */
enum kcoll_stat {
	KCOLL_STAT_SUBMITTED,	/* descriptors consumed from SQs */
	KCOLL_STAT_COMPLETED,	/* CQEs posted */
	KCOLL_STAT_FAILED,	/* CQEs posted with res < 0 */
	KCOLL_STAT_REJECTED,	/* ENTER calls refused for lack of CQ room */
	KCOLL_STAT_RDMA_BYTES,	/* payload sent by RDMA WRITE */
	KCOLL_STAT_INTRA_BYTES,	/* payload copied to ranks on this node */
	KCOLL_STAT_EAGER_SENDS,	/* transfers written without a grant */
	KCOLL_STAT_SIG_SENDS,	/* SIG messages sent */
	KCOLL_STAT_NR
};
void kcoll_stat_add(enum kcoll_stat s, u64 v);
extern atomic_t kcoll_nr_contexts;	/* open files */
extern atomic_t kcoll_nr_inflight;	/* accepted requests not completed */
extern atomic_t kcoll_nr_live_reqs;	/* allocated requests (leak check) */
u32 kcoll_max_sq_entries(void);
u32 kcoll_max_cq_entries(void);
u32 kcoll_chunk_bytes(void);		/* new grants use it */
u32 kcoll_connect_timeout_ms(void);	/* COMM_CREATE default */
u32 kcoll_ack_timeout(void);		/* new connections */
#define KCOLL_QPS_PER_PEER_MAX	4
u32 kcoll_qps_per_peer(void);		/* new communicators */
bool kcoll_intra_node(void);		/* new connections */
bool kcoll_lazy_sigs(void);
bool kcoll_eager(void);			/* new connections */
bool kcoll_prio_sched(void);		/* priorities (else FIFO) */
u32 kcoll_prio_aging_ms(void);
u32 kcoll_prio_max_unpriv(void);
void kcoll_knobs_init(void);
u32 kcoll_op_timeout_ms(void);		/* SQE timeout_ms 0 means this */
extern unsigned int kcoll_listen_port;	/* module parameter; sysfs moves it */
/* kcoll_conn.c: listen on @port from now on (the sysfs listen_port). */
int kcoll_listen_set_port(unsigned int port);
extern const struct attribute_group *kcoll_attr_groups[];
struct device *kcoll_misc_device(void);	/* kcoll_main.c */

/*
 * Operation statistics of a communicator, a device or the node: lockless
 * counters, updated once per completed collective or send/recv.
 */
struct kcoll_opstats {
	atomic64_t ops;
	atomic64_t bytes;
	atomic64_t errors;
	atomic64_t timeouts;
	atomic64_t lat[KCOLL_NL_LAT_BUCKETS];	/* log2 microseconds */
};
void kcoll_opstats_add(struct kcoll_opstats *st, u64 bytes, int res,
		       u64 ns);
extern struct kcoll_opstats kcoll_node_stats;

/* kcoll_nl.c: generic netlink family and events */
struct ib_device;
int kcoll_nl_init(void);
void kcoll_nl_exit(void);
struct kcoll_comm;
void kcoll_nl_comm_event(struct kcoll_comm *comm, u8 cmd, u32 inflight);
void kcoll_nl_peer_lost(struct kcoll_comm *comm, u32 peer, int err);
void kcoll_nl_op_timeout(struct kcoll_comm *comm, u64 seq, u8 opcode,
			 u32 timeout_ms, const u32 *missing, u32 nmissing);
void kcoll_nl_dev_event(struct ib_device *ibdev, u8 cmd);

/*
 * The alpha-beta-gamma inputs of the cost model for one communicator: each
 * rank advertises its own (kcoll_tune_model()) in the connection handshake
 * and every rank takes the largest of each over all ranks, so that all
 * choose alike (kcoll_comm_model_merge()). 0: not known.
 */
struct kcoll_model {
	u32 alpha_ns;
	u32 beta_ps;
	u32 gamma_ps;
	u32 node_ranks;		/* from the rank table, not exchanged */
};

/* kcoll_tune.c: algorithm choice (cost model tunables) */
void kcoll_tune_setup(void);
void kcoll_tune_model(struct ib_device *ibdev, struct kcoll_model *m);
u8 kcoll_tune_choose(u32 opcode, u32 nranks, u64 bytes,
		     const struct kcoll_model *m);
void kcoll_tune_count(u8 algo);
extern const struct attribute_group kcoll_algo_group;
extern const struct attribute_group kcoll_algo_ops_group;

/* kcoll_reduce.c: CPU reductions */
int kcoll_reduce_init(void);
u32 kcoll_reduce_gamma_ps(void);	/* fp32 sum, measured at load */
struct dentry;
void kcoll_reduce_debugfs_init(struct dentry *dir);
/* kcoll_debugfs.c */
void kcoll_debugfs_init(void);
void kcoll_debugfs_exit(void);
const char *kcoll_reduce_impl_active(void);
/* Callers bracket these with kernel_fpu_begin()/kernel_fpu_end(). */
void (*kcoll_reduce_active(unsigned int dtype, unsigned int redop))
	(void *dst, const void *src, size_t n);
int kcoll_reduce_active_avg(void *dst, size_t n, unsigned int dtype,
			    u32 nranks);

/* kcoll_ib.c: RDMA devices */
struct ib_device;
struct ib_pd *kcoll_ib_pd(struct ib_device *ibdev);
void kcoll_ib_set_gone(struct ib_device *ibdev);
u32 kcoll_ib_beta_ps(struct ib_device *ibdev);	/* 0: unknown */
/* Per device: operations started and not finished, by SQE priority. */
struct kcoll_prio {
	atomic_t active[KCOLL_PRIO_MAX + 1];
	unsigned long last[KCOLL_PRIO_MAX + 1];	/* jiffies, last active */
};
struct kcoll_prio *kcoll_ib_prio(struct ib_device *ibdev);
struct ib_mr;
/* One fast-reg MR operation for kcoll_ib_mr_ops(). */
struct kcoll_mr_op {
	struct ib_mr *mr;
	u32 key;	/* to register under, or to invalidate */
	bool inv;
};

int kcoll_ib_mr_ops(struct ib_device *ibdev, const struct kcoll_mr_op *ops,
		    unsigned int n, int access);
int kcoll_ib_reg_mrs(struct ib_device *ibdev, struct ib_mr **mrs,
		     unsigned int n, int access);
int kcoll_ib_init(void);
void kcoll_ib_exit(void);
ssize_t kcoll_ib_list(char *buf, size_t size);
/* The devices tunable: which devices new communicators may use. */
#define KCOLL_IB_ALLOW_MAX	64	/* with the NUL; a netlink value fits */
bool kcoll_ib_enabled(struct ib_device *ibdev);
ssize_t kcoll_ib_allow_show(char *buf);
int kcoll_ib_allow_store(const char *buf, size_t count);
struct kcoll_opstats *kcoll_ib_stats(struct ib_device *ibdev);
/* The device's measured message round trip (alpha), 0 if none yet; and a
 * new sample of it. */
#define KCOLL_ALPHA_MAX_NS	1000000000U	/* sysfs alpha_ns's limit */
#define KCOLL_BETA_MAX_PS	1000000000U	/* sysfs beta_ps's limit */
/* β measured on the device's RDMA WRITEs (0 if none yet). */
void kcoll_ib_tx_start(struct ib_device *ibdev);
void kcoll_ib_tx_done(struct ib_device *ibdev, u32 bytes);
u32 kcoll_ib_beta_measured_ps(struct ib_device *ibdev);
u32 kcoll_ib_alpha_ns(struct ib_device *ibdev);
void kcoll_ib_alpha_sample(struct ib_device *ibdev, u64 ns);
/* Call @fn for every device, under the device list lock; stops at the first
 * non-zero return, which it returns. */
int kcoll_ib_for_each(int (*fn)(struct ib_device *ibdev,
				struct kcoll_opstats *st, void *arg),
		      void *arg, unsigned int skip);

#endif /* KCOLL_H */
