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
	u64 due_ns;		/* KCOLL_OP_DELAY: ktime_get_ns() to complete */
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

/* kcoll_ops.c: the op table */
extern const struct kcoll_opdef kcoll_ops[KCOLL_OP_LAST];
int kcoll_nop_exec(const struct kcoll_sqe *sqe);
int kcoll_ops_init(void);

/* kcoll_main.c: the device and the module's workqueue */
struct device *kcoll_misc_device(void);
void kcoll_queue_delayed(struct delayed_work *dw, unsigned long delay);
void kcoll_queue_work(struct work_struct *w);
bool kcoll_queue_slow(struct work_struct *w);
void kcoll_mod_delayed(struct delayed_work *dw, unsigned long delay);

#endif /* KCOLL_H */
