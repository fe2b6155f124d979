// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll op table: one entry per uapi opcode. Collectives plug in here with
 * an .issue that starts the schedule and a .cancel that tears it down.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/jiffies.h>

#include "kcoll.h"
#include "kcoll_coll.h"
#include "kcoll_ring.h"

int kcoll_nop_exec(const struct kcoll_sqe *sqe)
{
	return 0;
}

/*
 * A DELAY completes no earlier than its count of microseconds on the
 * monotonic clock: a timer that fires early by it (jiffies and the clock
 * source apart, as seen under an overloaded emulator) waits again for the
 * rest. Nothing touches @req after it is queued again.
 */
static void kcoll_delay_fire(struct work_struct *work)
{
	struct kcoll_req *req = container_of(to_delayed_work(work),
					     struct kcoll_req, dwork);
	u64 now = ktime_get_ns();

	if (now < req->due_ns) {
		kcoll_queue_delayed(&req->dwork,
				    nsecs_to_jiffies(req->due_ns - now) + 1);
		return;
	}
	kcoll_req_complete(req, 0);
}

static void kcoll_delay_issue(struct kcoll_req *req)
{
	INIT_DELAYED_WORK(&req->dwork, kcoll_delay_fire);
	req->due_ns = ktime_get_ns() + req->sqe.count * NSEC_PER_USEC;
	kcoll_queue_delayed(&req->dwork, usecs_to_jiffies(req->sqe.count));
}

/* Must hold req->ctx->cq_lock; does not sleep. */
static bool kcoll_delay_cancel(struct kcoll_req *req)
{
	/* True only if the work was pending: it will now never run. */
	return cancel_delayed_work(&req->dwork);
}

const struct kcoll_opdef kcoll_ops[KCOLL_OP_LAST] = {
	[KCOLL_OP_NOP] = {
		.exec = kcoll_nop_exec,
	},
	[KCOLL_OP_DELAY] = {
		.issue = kcoll_delay_issue,
		.cancel = kcoll_delay_cancel,
	},
	/* Collectives are cancelled by destroying their communicator, which
	 * the file's release does before it waits for requests. */
	[KCOLL_OP_ALLREDUCE] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_REDUCE] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_BROADCAST] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_ALLGATHER] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_REDUCE_SCATTER] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_ALLTOALL] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_SEND] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_RECV] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_BARRIER] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_GATHER] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_SCATTER] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_ALLGATHERV] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_REDUCE_SCATTERV] = { .issue = kcoll_coll_issue },
	[KCOLL_OP_ALLTOALLV] = { .issue = kcoll_coll_issue },
};

/* Every opcode has exactly one of .exec and .issue. */
static int kcoll_ops_check(void)
{
	unsigned int i;

	BUILD_BUG_ON(ARRAY_SIZE(kcoll_ops) != KCOLL_OP_LAST);
	for (i = 0; i < KCOLL_OP_LAST; i++) {
		if (!kcoll_ops[i].exec == !kcoll_ops[i].issue) {
			pr_err("op %u (%s): needs exactly one of exec/issue\n",
			       i, kcoll_op_name(i));
			return -EINVAL;
		}
	}
	return 0;
}

int kcoll_ops_init(void)
{
	return kcoll_ops_check();
}
