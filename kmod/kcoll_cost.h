/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * kcoll cost model: an alpha-beta-gamma estimate of each schedule's time
 * (kcoll_sched.c), and the choice of the cheapest algorithm. Plain C,
 * integers only (kernel: no floating point): times in nanoseconds, rates
 * in picoseconds per byte. Built into the module, the unit tests and the
 * simulator (tools/collsim.c), which checks the choice.
 *
 * The model of one phase that moves m bytes (and reduces them, for a
 * reducing receive), with the engine cutting transfers in chunks of
 * chunk_bytes C that pipeline through the NIC and the reduction:
 *	alpha + m * beta + min(m, C) * gamma + (m - min(m, C)) * max(0, gamma - beta)
 * (the reduction of a chunk overlaps the next chunk's transfer; only a
 * reduction slower than the wire shows beyond the last chunk). A pipelined
 * chain over h hops: h * phase(min(m, C)) + (m - C) * max(beta, gamma).
 * Copy-only phases (bruck) cost copy_ns + bytes * copy_ps.
 *
 * Every rank must choose the same algorithm: the choice depends only on
 * (opcode, nranks, bytes) and the tunables, which must therefore be equal
 * on every rank of a communicator.
 */
#ifndef KCOLL_COST_H
#define KCOLL_COST_H

#include "kcoll_sched.h"

/*
 * Defaults, for a 100 Gb/s RDMA NIC driven by the kernel engine:
 *  alpha 5000 ns: one message step including the grant, the completion
 *	handling and the engine's software (performance reference section
 *	2.2: 1-3 us per hardware RDMA write, NCCL models 2.7-9.6 us a hop);
 *  beta 80 ps/B: 12.5 GB/s, 100 Gb/s line rate;
 *  gamma 40 ps/B: 25 GB/s reduction of chunks that are cache-resident
 *	when reduced (docs/PERFORMANCE.md: fp32 AVX2 50-90 GB/s at 64 KiB to
 *	1 MiB, bf16 22-28 GB/s; 10-15 GB/s only from DRAM);
 *  copy 200 ns + 50 ps/B: one copy-only phase (20 GB/s memmove);
 *  chunk 65536 B: the engine's default chunk_bytes.
 */
#define KCOLL_COST_ALPHA_NS	5000
#define KCOLL_COST_BETA_PS	80
#define KCOLL_COST_GAMMA_PS	40
#define KCOLL_COST_COPY_NS	200
#define KCOLL_COST_COPY_PS	50
#define KCOLL_COST_CHUNK_BYTES	65536

struct kcoll_cost {
	u32 alpha_ns;		/* per message (phase step), software included */
	u32 beta_ps;		/* per byte on the wire (1000/GBps) */
	u32 gamma_ps;		/* per byte reduced */
	u32 copy_ns;		/* per copy-only phase */
	u32 copy_ps;		/* per byte copied */
	u32 chunk_bytes;	/* the engine's pipelining unit (> 0) */
	/*
	 * Ranks per node sharing its NIC, ranks placed in blocks (0 or 1:
	 * one per node, or unknown). A step whose partners are on other
	 * nodes puts all of a node's ranks on its NIC at once, each at
	 * 1/node_ranks of the wire; a ring or chain keeps one flow per
	 * node and direction. A step between ranks of one node costs a
	 * copy (copy_ps), not the wire: the module's intra-node path.
	 */
	u32 node_ranks;
};

/*
 * Per-collective overrides, for sysfs later (every rank must see the same):
 * @force:	KCOLL_ALGO_DEFAULT: choose by cost; else always this algorithm
 *		(if it applies to the collective, else it is ignored)
 * @disabled:	bit (1 << algo): never chosen by cost
 * @max_bytes:	per algorithm, 0: no limit; else not chosen by cost above
 *		this many bytes (count * element size): thresholds
 */
struct kcoll_coll_tune {
	u8 force;
	u32 disabled;
	u64 max_bytes[KCOLL_ALGO_NR];
};

struct kcoll_tune {
	struct kcoll_cost cost;
	struct kcoll_coll_tune coll[KCOLL_OP_LAST];
};

/* The defaults above, no override. */
void kcoll_tune_init(struct kcoll_tune *t);

/*
 * Estimated time (ns, saturating) of @algo (not DEFAULT: resolve it with
 * kcoll_sched_algo()) for @opcode on @nranks ranks, @bytes = count * element
 * size (the SQE's per-rank count, uapi conventions); U64_MAX if the
 * algorithm does not apply.
 */
u64 kcoll_cost_ns(const struct kcoll_cost *c, u32 opcode, u8 algo,
		  u32 nranks, u64 bytes);

/* The algorithm to run: forced, else the cheapest allowed (never DEFAULT;
 * ties go to the collective's default). */
u8 kcoll_sched_choose(const struct kcoll_tune *t, u32 opcode, u32 nranks,
		      u64 bytes);
/* The same with @cost in place of t->cost (the module: a communicator's
 * agreed alpha, beta and gamma). */
u8 kcoll_sched_choose_cost(const struct kcoll_tune *t,
			   const struct kcoll_cost *cost, u32 opcode,
			   u32 nranks, u64 bytes);

#endif /* KCOLL_COST_H */
