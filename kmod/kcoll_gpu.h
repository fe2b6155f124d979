/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Stream-ordered collectives on GPU memory (KCOLL_SQE_F_GPU): the
 * communicator's doorbell page and scratch, and what the engine asks of
 * them. The protocol is uapi's (struct kcoll_gpu_bell); docs/DESIGN.md
 * "GPU reductions" has who waits for whom.
 */
#ifndef KCOLL_GPU_H
#define KCOLL_GPU_H

#include <linux/hrtimer.h>
#include "kcoll_types.h"

struct kcoll_gpu {
	struct kcoll_comm *comm;
	struct page *page;		/* the pinned doorbell page */
	struct kcoll_gpu_bell *bell;	/* its kernel address */
	u64 bell_uaddr;
	u32 scratch_mr;			/* REG_MEM handle */
	u64 scratch_addr;
	u64 scratch_len;
	u64 last_ticket;		/* of the last GPU op queued */
	u64 slots_busy;			/* the slots (ticket % 64) of GPU ops
					 * queued, not completed (point-to-
					 * point ones end out of order) */
	/* Per busy slot, the newest ticket refused while its words were
	 * another's (0: none): released once that one ends. */
	u64 refused[64];
	/*
	 * What the engine waits for (0: nothing): start >= wait_start,
	 * done >= wait_done. Written under comm->lock, read by the timer.
	 */
	u64 wait_start;
	u64 wait_done;
	struct hrtimer timer;		/* polls while one is set */
	u64 poll_ns;			/* its interval now (0: gpu_poll_us),
					 * doubled while nothing comes */
	bool dead;			/* every word released for good */
};

int kcoll_gpu_setup_ioctl(struct kcoll_ctx *ctx, void __user *uarg);
/* comm->lock: prepare @op's GPU part (TMP and landing in the scratch). */
int kcoll_gpu_prepare(struct kcoll_task *op, const struct kcoll_sqe *sqe);
/* comm->lock: @op is queued / was refused before it was queued. */
int kcoll_gpu_queue(struct kcoll_task *op);
void kcoll_gpu_refused(struct kcoll_comm *comm, const struct kcoll_sqe *sqe);
/*
 * An SQE that never reached an operation (bad fields): its stream must
 * not wait for it.
 */
void kcoll_gpu_reject(struct kcoll_ctx *ctx, const struct kcoll_sqe *sqe);
/* comm->lock: has @op's stream reached it? (Else the timer is armed.) */
bool kcoll_gpu_started(struct kcoll_task *op);
/* comm->lock: the current phase's GPU reduction is done (or none). */
bool kcoll_gpu_phase(struct kcoll_task *op);
/* comm->lock: the current phase's AVG finish is done. */
bool kcoll_gpu_avg(struct kcoll_task *op);
/* comm->lock: @op is over (@res): its stream goes on. */
void kcoll_gpu_op_end(struct kcoll_task *op, int res);
/* comm->lock: @op timed out waiting for its stream: reported, true. */
bool kcoll_gpu_timeout(struct kcoll_task *op);
/* Shutdown: every word released, the timer stopped. No comm->lock. */
void kcoll_gpu_shutdown(struct kcoll_comm *comm);
/* Destroy (after the shutdown): the page unpinned. */
void kcoll_gpu_destroy(struct kcoll_comm *comm);

#endif /* KCOLL_GPU_H */
