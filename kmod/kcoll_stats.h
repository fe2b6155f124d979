/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_stats.c: counters and operation statistics.
 */
#ifndef KCOLL_STATS_H
#define KCOLL_STATS_H

#include "kcoll.h"

enum kcoll_stat {
	KCOLL_STAT_SUBMITTED,	/* descriptors consumed from SQs */
	KCOLL_STAT_COMPLETED,	/* CQEs posted */
	KCOLL_STAT_FAILED,	/* CQEs posted with res < 0 */
	KCOLL_STAT_REJECTED,	/* ENTER calls refused for lack of CQ room */
	KCOLL_STAT_RDMA_BYTES,	/* payload sent by RDMA WRITE */
	KCOLL_STAT_INTRA_BYTES,	/* payload copied to ranks on this node */
	KCOLL_STAT_EAGER_SENDS,	/* transfers written without a grant */
	KCOLL_STAT_SIG_SENDS,	/* SIG messages sent */
	KCOLL_STAT_DMABUF_IMPORTS,	/* dma-bufs imported by REG_MEM */
	KCOLL_STAT_DMABUF_REVOKED,	/* move_notify on an import */
	KCOLL_STAT_NOCPU_OPS,	/* operations on KCOLL_REG_NO_CPU memory */
	KCOLL_STAT_NIC_COPY_BYTES,	/* local copies made by the NIC (memory
				 * the CPU must not touch) */
	KCOLL_STAT_NOCPU_TOUCH,	/* times the CPU was about to touch such
				 * memory: a bug, also WARNed; must stay 0 */
	KCOLL_STAT_GPU_OPS,	/* stream-ordered operations (KCOLL_SQE_F_GPU) */
	KCOLL_STAT_GPU_STEPS,	/* reduction steps handed to a GPU stream */
	KCOLL_STAT_GPU_POLLS,	/* looks at a doorbell page by the timer */
	KCOLL_STAT_GPU_STEP_NS,	/* steps handed over to seen done: the
				 * handoffs and the kernels, summed */
	KCOLL_STAT_REGCACHE_HITS,	/* plain buffers found registered */
	KCOLL_STAT_REGCACHE_MISSES,	/* ... pinned and registered anew */
	KCOLL_STAT_REGCACHE_INVAL,	/* cached ones whose mapping changed */
	KCOLL_STAT_COLLS_BESIDE,	/* collectives started while an older
				 * one of their communicator ran */
	KCOLL_STAT_COLLS_OVERLAP,	/* ... that could have, but waited: their
				 * buffers overlap an older one's */
	KCOLL_STAT_EAGER_BESIDE,	/* eager transfers of collectives
				 * behind the head (in eager_sends too) */
	KCOLL_STAT_GRANTS_AHEAD,	/* grants issued for a collective's
				 * next phase while one ran */
	KCOLL_STAT_SENDS_AHEAD,		/* writes posted for a collective's
					 * next phase while one ran */
	KCOLL_STAT_EAGER_AHEAD,		/* eager transfers of a collective's
					 * later phase, sent while one ran
					 * (in eager_sends too) */
	KCOLL_STAT_RETURNED_EARLY,	/* broadcasts returned to their caller
					 * before their confirmation tokens
					 * were in (sysfs confirm_behind) */
	KCOLL_STAT_LATE_ERRORS,		/* ... that failed after that: their
					 * error went with a later collective */
	KCOLL_STAT_P2P_WAITS,		/* eager point-to-point receives that
					 * waited 50 ms for their data and
					 * granted their buffer too */
	KCOLL_STAT_P2P_ASKS,		/* eager point-to-point sends that found
					 * no slot and asked their receiver
					 * for a grant at once */
	KCOLL_STAT_TOKENS_COVERED,	/* broadcast confirmation tokens that
					 * went inside a younger one's */
	KCOLL_STAT_GRANTS_CLOSED,	/* retired grant MRs invalidated as
					 * their phase ended (kcoll_gmr_flush_op()) */
	KCOLL_STAT_GRANTS_FENCED,	/* grant MRs deregistered, not
					 * invalidated, as their grant ended:
					 * they mapped pages an operation
					 * unpins, on rxe (struct kcoll_gmr) */
	KCOLL_STAT_GRANTS_FENCED_HELD,	/* pooled grant MRs deregistered as
					 * the registration or cache entry
					 * they had mapped let its pages go,
					 * on rxe (kcoll_gmr_forget()) */
	KCOLL_STAT_HELLOS_STALE,	/* hellos refused as no newer than
					 * one seen from their rank (a replay,
					 * or its clock went back) */
	KCOLL_STAT_ATTEMPTS_DROPPED,	/* accepted connections dropped
					 * before they proved the key (a
					 * replay's, or one its rank gave
					 * up): the rank waits again */
	KCOLL_STAT_REGCACHE_SHEDS,	/* pins short of RLIMIT_MEMLOCK tried
					 * again after the caches let go of
					 * the process's pages */
	KCOLL_STAT_REGCACHE_UNNOTIFIED,	/* buffers pinned without the cache:
					 * no MMU notifier could be set up */
	KCOLL_STAT_REG_RECHECKS,	/* REG_MEMs checked after a change */
	KCOLL_STAT_REG_STALE,		/* ... that lost their pages' mapping */
	KCOLL_STAT_REG_UNTRACKED,	/* REG_MEMs without an MMU notifier */
	KCOLL_STAT_NR
};
void kcoll_stat_add(enum kcoll_stat s, u64 v);
extern atomic_t kcoll_nr_contexts;	/* open files */
extern atomic_t kcoll_nr_inflight;	/* accepted requests not completed */
extern atomic_t kcoll_nr_live_reqs;	/* allocated requests (leak check) */

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
	/*
	 * Where the time of its collectives that succeeded went, summed
	 * over them (uapi enum kcoll_nl_prof; kcoll_op_time_done()).
	 */
	atomic64_t prof[KCOLL_NL_PROF_NR];
};
void kcoll_opstats_add(struct kcoll_opstats *st, u64 bytes, int res,
		       u64 ns);
void kcoll_opstats_prof(struct kcoll_opstats *st,
			const u64 v[KCOLL_NL_PROF_NR]);
extern struct kcoll_opstats kcoll_node_stats;
extern const struct attribute_group kcoll_stats_group;

#endif /* KCOLL_STATS_H */
