/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_comm.c: communicators (create, destroy, abort, report), the global
 * list the listener searches, device removal.
 */
#ifndef KCOLL_COMM_H
#define KCOLL_COMM_H

#include <linux/memcontrol.h>
#include <linux/sched/mm.h>

#include "kcoll_types.h"

int kcoll_comm_create_ioctl(struct kcoll_ctx *ctx, void __user *uarg);
int kcoll_comm_destroy_ioctl(struct kcoll_ctx *ctx, void __user *uarg);
int kcoll_comm_abort_ioctl(struct kcoll_ctx *ctx, void __user *uarg);
struct kcoll_comm *kcoll_ctx_comm_get(struct kcoll_ctx *ctx, u32 id);
int kcoll_comm_usable(struct kcoll_comm *comm);
int kcoll_comm_usable_locked(struct kcoll_comm *comm);
int kcoll_comm_op_usable_locked(struct kcoll_comm *comm,
				const struct kcoll_task *op);
int kcoll_comm_report_ioctl(struct kcoll_ctx *ctx, void __user *uarg);
/* Netlink: call @fn for each comm on the node from the @skip'th, on a
 * reference (not under the comm list lock); stops at the first non-zero
 * return, which it returns. */
int kcoll_comms_for_each(int (*fn)(struct kcoll_comm *comm, void *arg),
			 void *arg, unsigned int skip);
void kcoll_ctx_comms_release(struct kcoll_ctx *ctx);
struct kcoll_comm *kcoll_comm_find_hello(const struct kcoll_wire_hello *h,
					 bool *other);
void kcoll_comm_put(struct kcoll_comm *comm);
/* A peer's BYE said @revoker revoked @comm. Must hold comm->lock. */
void kcoll_comm_peer_revoked(struct kcoll_comm *comm, u32 revoker);
void kcoll_comms_device_removed(struct ib_device *ibdev);
int kcoll_comm_init(void);
void kcoll_comm_exit(void);


/*
 * What a worker or rdma_cm's handler allocates for @comm from here to
 * kcoll_comm_memcg_end() (with __GFP_ACCOUNT) is charged to the memory
 * cgroup of the process that created it, as what the process allocates
 * itself is: a connection's staging, eager and receive buffers, grant
 * MRs. Returns what kcoll_comm_memcg_end() restores. Process context.
 */
static inline struct mem_cgroup *kcoll_comm_memcg_begin(struct kcoll_comm *comm)
{
	return set_active_memcg(comm->memcg);
}

static inline void kcoll_comm_memcg_end(struct mem_cgroup *old)
{
	set_active_memcg(old);
}

/* Is the hello @h to @comm from a rank in this module? */
bool kcoll_comm_hello_is_ours(struct kcoll_comm *comm,
			      const struct kcoll_wire_hello *h);

#endif /* KCOLL_COMM_H */
