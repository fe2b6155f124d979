/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * kcoll schedules: what one rank does, phase by phase, to carry out one
 * collective. Plain C (kcoll_plain.h only): the same source builds into the
 * module, the host unit tests (which execute every schedule on an in-memory
 * model of all ranks) and the simulator.
 *
 * Execution model, shared with the engine (kcoll_progress.c):
 *  - an operation is a sequence of phases, executed in order by every rank;
 *    a phase begins when the previous one has finished on this rank (its
 *    send written and acknowledged locally, its receive landed and reduced);
 *  - a phase does, in this order: an optional local copy; then at most one
 *    send and at most one receive, concurrently; then an optional AVG
 *    finishing step over a region;
 *  - a send with @fwd set may only move bytes [a, b) of its region once the
 *    phase's receive has completed (landed and reduced) its bytes [0, b):
 *    this pipelines chains (broadcast, reduce) through a rank chunk by chunk.
 *    A fwd send and its receive always have the same element count;
 *  - a transfer moves @cnt elements; the sender's and the receiver's
 *    schedules always agree on the count of every transfer between them,
 *    and both ends of a transfer are in the same phase index (the k-th
 *    send from A to B and the k-th receive at B from A, FIFO per ordered
 *    pair, sit in phases with the same number);
 *    a transfer with @cnt == 0 still exchanges an empty message (barrier
 *    tokens, zero-count send/recv), so schedules omit transfers that move
 *    nothing unless they carry meaning;
 *  - a reducing receive computes dst = operand OP incoming, element by
 *    element (operand may be dst itself, then it accumulates);
 *  - offsets and counts are in elements of the operation's dtype;
 *  - in place, a schedule references only one user buffer: RECV for
 *    ALLREDUCE, ALLGATHER, ALLTOALL, and BROADCAST, REDUCE and GATHER
 *    (root), SEND for REDUCE_SCATTER (whose result then lands at SEND +
 *    rank*count) and SCATTER (root: its block stays in SEND); the
 *    other buffer's count (kcoll_sched_*_count) is 0;
 *  - KCOLL_SBUF_TMP is a scratch buffer the engine allocates per operation,
 *    of kcoll_sched_tmp_count() elements (0: none).
 */
#ifndef KCOLL_SCHED_H
#define KCOLL_SCHED_H

#include "kcoll_plain.h"

enum kcoll_sbuf {
	KCOLL_SBUF_SEND,	/* the user's send buffer (read only, but
				 * for the in-place REDUCE_SCATTER result) */
	KCOLL_SBUF_RECV,	/* the user's receive buffer */
	KCOLL_SBUF_TMP,		/* engine scratch */
	KCOLL_SBUF_LAND,	/* the engine's only, never in a schedule:
				 * where a stream-ordered GPU operation's
				 * data to reduce lands (kcoll_sched_gpu) */
	KCOLL_SBUF_NR
};

/*
 * Algorithms (struct kcoll_sched_args.algo). DEFAULT is the collective's
 * default schedule (the one named first for it below); every other value
 * must apply to the opcode, else kcoll_sched_check() fails with -EINVAL.
 * kcoll_sched.c describes each schedule and its phase count.
 */
enum kcoll_algo {
	KCOLL_ALGO_DEFAULT = 0,
	KCOLL_ALGO_RING,	/* ALLREDUCE, ALLGATHER, REDUCE_SCATTER */
	KCOLL_ALGO_CHAIN,	/* BROADCAST, REDUCE (pipelined) */
	KCOLL_ALGO_PAIRWISE,	/* ALLTOALL */
	KCOLL_ALGO_DISSEMINATION, /* BARRIER */
	KCOLL_ALGO_DIRECT,	/* SEND, RECV, GATHER, SCATTER */
	KCOLL_ALGO_RECDOUBLING,	/* ALLREDUCE, ALLGATHER */
	KCOLL_ALGO_BINOMIAL,	/* BROADCAST, REDUCE, ALLREDUCE, GATHER, SCATTER */
	KCOLL_ALGO_RABENSEIFNER, /* ALLREDUCE */
	KCOLL_ALGO_RECHALVING,	/* REDUCE_SCATTER */
	KCOLL_ALGO_BRUCK,	/* ALLTOALL */
	KCOLL_ALGO_FARFIRST,	/* ALLGATHER */
	KCOLL_ALGO_NR
};

/* A region of one buffer. */
struct kcoll_sregion {
	u8 buf;			/* enum kcoll_sbuf */
	u64 off;		/* elements */
};

struct kcoll_ssend {
	u32 peer;		/* rank */
	struct kcoll_sregion src;
	u64 cnt;
	bool fwd;		/* see above */
};

struct kcoll_srecv {
	u32 peer;		/* rank */
	struct kcoll_sregion dst;
	u64 cnt;
	bool reduce;		/* dst = operand OP incoming; else dst = incoming */
	struct kcoll_sregion operand;	/* with @reduce */
};

struct kcoll_scopy {
	struct kcoll_sregion src;
	struct kcoll_sregion dst;
	u64 cnt;		/* 0: no copy; src and dst never overlap
				 * unless they are the same region */
};

struct kcoll_phase {
	struct kcoll_scopy copy;	/* first */
	bool has_send;
	bool has_recv;
	struct kcoll_ssend send;
	struct kcoll_srecv recv;
	struct kcoll_sregion avg;	/* last, with avg_cnt > 0: divide by
					 * nranks (redop AVG only) */
	u64 avg_cnt;
};

/**
 * struct kcoll_sched_args - one rank's view of one operation.
 * @opcode:	a collective's uapi opcode (KCOLL_OP_ALLREDUCE and above)
 * @redop:	uapi redop (AVG adds the finishing step), NONE if not reducing
 * @rank, @nranks: this rank, 1 <= nranks <= KCOLL_MAX_RANKS
 * @root:	root of REDUCE, BROADCAST, GATHER and SCATTER, peer of
 *		SEND/RECV, else 0
 * @count:	the SQE count (per-rank element count, uapi conventions)
 * @in_place:	the uapi in-place condition holds on this rank (the engine
 *		decides it from the addresses); only ever set where it means
 *		something (not for SEND/RECV/BARRIER)
 * @algo:	enum kcoll_algo; every rank of the operation must use the same
 *		(DEFAULT where zero-initialised)
 * @vec:	the v-variants (ALLGATHERV, REDUCE_SCATTERV, ALLTOALLV): their
 *		count table, laid out as uapi struct kcoll_vec says (nranks
 *		times kcoll_shape's .vec words); @count is then 0. NULL for
 *		every other collective.
 */
struct kcoll_sched_args {
	u32 opcode;
	u32 redop;
	u32 rank;
	u32 nranks;
	u32 root;
	u64 count;
	bool in_place;
	u8 algo;
	const u64 *vec;
	u64 vec_sig;		/* set by kcoll_sched_vec_check() */
	u64 vec_max;		/* likewise: the largest count of array 0 */
	u64 *vec_pre;		/* optional, nranks words: REDUCE_SCATTERV's
				 * block offsets, filled by
				 * kcoll_sched_vec_check() (without them a
				 * phase sums the counts before its block) */
};

/*
 * The v-variants' tables (kcoll_sched_vec.c). The k-th array of @a's
 * table (uapi struct kcoll_vec: ALLGATHERV counts, displs; REDUCE_SCATTERV
 * counts; ALLTOALLV sendcounts, sdispls, recvcounts, rdispls).
 */
static inline const u64 *kcoll_vec_arr(const struct kcoll_sched_args *a,
					unsigned int k)
{
	return a->vec + (u64)k * a->nranks;
}

/*
 * Whether @a's table is valid for this rank: 0, -ERANGE (a count or
 * displacement above KCOLL_VEC_ELEMS_MAX), or -EINVAL (no table, or
 * ALLTOALLV's own block sent and received with different counts).
 * kcoll_sched_check() checks only that a v-variant has a table (it runs
 * for every phase built, this scan of n words once): whoever makes a
 * table runs this on it before anything else of this file. It also
 * keeps, once and not per message or phase, the hash that ALLGATHERV's
 * and REDUCE_SCATTERV's signatures carry in @a->vec_sig, the largest
 * count in @a->vec_max and, given @a->vec_pre, REDUCE_SCATTERV's block
 * offsets there.
 */
int kcoll_sched_vec_check(struct kcoll_sched_args *a);

/* Does ALLGATHERV run in place with these addresses (send == recv +
 * displs[rank] elements of @esize bytes)? @a's table passed
 * kcoll_sched_vec_check(). */
bool kcoll_sched_vec_in_place(const struct kcoll_sched_args *a, u64 esize,
			      u64 send_addr, u64 recv_addr);

/*
 * Signatures. What this rank signs as the count toward @peer (SIGs,
 * grants, eager headers) and what @peer's own must say for the two to
 * match. Every collective but the v-variants: the count, both. ALLGATHERV
 * and REDUCE_SCATTERV: a hash of the counts, which every rank must hold
 * alike. ALLTOALLV: a hash of the pair's two counts (what this rank sends
 * @peer, what it receives from it), which @peer signs the other way round.
 */
u64 kcoll_sched_sig(const struct kcoll_sched_args *a, u32 peer);
u64 kcoll_sched_sig_peer(const struct kcoll_sched_args *a, u32 peer);

/* Elements this rank's operation is about (statistics, the tuner's size):
 * the count, for the v-variants the elements of the receive buffer's
 * blocks (REDUCE_SCATTERV: of the send buffer). */
u64 kcoll_sched_total(const struct kcoll_sched_args *a);

/* floor(log2 n) and ceil(log2 n), n >= 1 (schedules and cost model). */
static inline u32 kcoll_floor_log2(u32 n)
{
	u32 k = 0;

	while (n >> (k + 1))
		k++;
	return k;
}

static inline u32 kcoll_ceil_log2(u32 n)
{
	u32 k = kcoll_floor_log2(n);

	return (1U << k) < n ? k + 1 : k;
}

/* 0 if @a is a valid operation for the schedules, else -EINVAL. */
int kcoll_sched_check(const struct kcoll_sched_args *a);

/*
 * The algorithm @a runs (DEFAULT resolved to the collective's default),
 * whether @algo applies to @opcode (DEFAULT applies to every opcode), and
 * a short name for messages and tools ("ring", "bruck", ...; "?" if none).
 */
u8 kcoll_sched_algo(const struct kcoll_sched_args *a);
bool kcoll_sched_algo_ok(u32 opcode, u8 algo);
const char *kcoll_algo_name(u8 algo);

/* Number of phases of @a on this rank (may be 0: nothing to move). */
u32 kcoll_sched_nphases(const struct kcoll_sched_args *a);

/*
 * Does every rank's result depend on every rank's input, through the
 * schedule's transfers (an empty one counts: it still carries a message)?
 * Then a rank that checks the signature on everything it receives, and
 * whose operation completes, has every rank's signature equal to its own
 * (equality is transitive along the data's paths): the engine sends no
 * SIG for such operations (docs/DESIGN.md, "Lazy signatures"). Decided
 * from the signature alone (never from @rank), so that all ranks agree;
 * test_sched checks it against every schedule.
 */
bool kcoll_sched_all_dependent(const struct kcoll_sched_args *a);

/*
 * May @a go without SIGs to peers that take lazy signatures? Every
 * all-dependent collective, and BROADCAST, REDUCE and GATHER (n > 1,
 * count > 0): their root depends on every rank (REDUCE and GATHER through
 * the data, BROADCAST through the confirmation tokens its schedule sends
 * back up), and every other rank checks the signature of each rank whose
 * data it uses. So the root completes only if every rank's signature
 * equals its own, and a rank that completes holds data made under the
 * root's signature; a rank whose operation differs fails, with every rank
 * on its path to the root, and the ABORTs end the rest that have not
 * completed (a REDUCE or GATHER leaf whose small transfer went eager may
 * have completed by then: it used nobody's data). Decided from the
 * signature alone; test_sched checks the root's dependency on every rank
 * for every schedule.
 */
bool kcoll_sched_lazy(const struct kcoll_sched_args *a);

/*
 * May phase @nx's receive land while phase @ph (the one before it) runs
 * and before @nx opens (the engine grants it ahead)? Only a plain receive
 * (not empty, not reducing) into memory that neither @ph uses (its send,
 * receive, operand, copy, average) nor @nx's copy (done as it opens) or
 * send (unless that forwards what it receives). The host model lands such
 * receives early to prove it.
 */
bool kcoll_sched_recv_ahead(const struct kcoll_sched_args *a,
			    const struct kcoll_phase *ph,
			    const struct kcoll_phase *nx);

/*
 * May phase @nx's send go while phase @ph (the one before it) runs and
 * before @nx opens (the engine sends it ahead, into grants its receiver
 * issued for @nx)? Only a plain send (not empty, not forwarding what @ph
 * or @nx receives) from memory that nothing writes before @nx would have
 * read it: not @ph's receive or average (@ph's copy is done: it ran as @ph
 * opened), nor @nx's copy (done as it opens) or receive (which may land
 * ahead). The host model sends such transfers early to prove it.
 */
bool kcoll_sched_send_ahead(const struct kcoll_sched_args *a,
			    const struct kcoll_phase *ph,
			    const struct kcoll_phase *nx);

/* The most phases ahead of the running one an eager send may go
 * (sysfs eager_ahead's limit; the host model's reach), and its default. */
#define KCOLL_SCHED_EARLY_MAX	64
#define KCOLL_SCHED_EARLY_DEFAULT	16

/*
 * May phase @j's send go while phase @cur (< @j) runs, before the phases
 * between have run? The engine does this for eager transfers, which carry
 * a copy of their bytes (docs/DESIGN.md, "Eager transfers ahead"): the
 * receiver keeps it until it reaches phase @j. Only a send that forwards
 * nothing received, from memory that nothing writes before phase @j would
 * have read it: not the receive or average of any phase from @cur on, nor
 * the copy of one after @cur (@cur's ran as it opened), nor @j's own copy
 * or receive. Not an empty send: it reads nothing, but it says that its
 * sender got to phase @j (a barrier's tokens, a broadcast's confirmation
 * that the data came and was checked), which going early would make a
 * lie. @pj is phase @j; the phases between are computed. The host model
 * sends such transfers as early as this allows, with a copy of their
 * bytes, to prove it.
 */
bool kcoll_sched_send_early(const struct kcoll_sched_args *a, u32 cur,
			    u32 j, const struct kcoll_phase *pj);
/* Its test for one phase @pk before @pj (@running: the running one). */
bool kcoll_sched_early_past(const struct kcoll_sched_args *a,
			    const struct kcoll_phase *pk, bool running,
			    const struct kcoll_phase *pj);

/*
 * The phases of @a up to its last that touches memory (copies, moves or
 * averages a byte): after them only empty transfers remain (a broadcast's
 * confirmation tokens back up its tree, a barrier's messages), and the
 * engine lets a younger collective on the same buffers start (docs/
 * DESIGN.md, "Several collectives in flight"). 0 for a barrier.
 */
u32 kcoll_sched_data_phases(const struct kcoll_sched_args *a);

/* Phase @idx (< nphases) of @a; the result is fully initialised. */
void kcoll_sched_phase(const struct kcoll_sched_args *a, u32 idx,
		       struct kcoll_phase *p);

/* Elements of scratch the schedule needs on this rank (0: none). */
u64 kcoll_sched_tmp_count(const struct kcoll_sched_args *a);

/*
 * Elements of the user's send and receive buffers on this rank (what the
 * engine must pin: 0 where the buffer is not used, e.g. recv of REDUCE on a
 * non-root rank, send of BROADCAST on a non-root rank, both of BARRIER).
 */
u64 kcoll_sched_send_count(const struct kcoll_sched_args *a);
u64 kcoll_sched_recv_count(const struct kcoll_sched_args *a);

/*
 * Stream-ordered operations (KCOLL_SQE_F_GPU) reduce on the GPU. libcoll
 * enqueues their reduction kernels on the CUDA stream before the kernel
 * sees the SQE, so both sides derive the steps from this plain code with
 * the collective's default algorithm (no tuning): in phase order, a phase
 * whose receive reduces (with data) is one GPU step,
 *	dst = operand OP landed,
 * where "landed" is the start of the landing region of the scratch buffer
 * (the phase's whole receive lands there first), and a phase with an AVG
 * finish is one more step (dst /= nranks). The scratch holds the
 * schedule's TMP elements at byte 0 and the landing region at
 * @land_off (TMP's bytes rounded up to KCOLL_GPU_ALIGN).
 */
#define KCOLL_GPU_ALIGN		256
#define KCOLL_GPU_STEP_REDUCE	(1U << 0)
#define KCOLL_GPU_STEP_AVG	(1U << 1)

/* KCOLL_GPU_STEP_* of phase @ph. */
unsigned int kcoll_sched_gpu_phase(const struct kcoll_phase *ph);

struct kcoll_gpu_layout {
	u32 nsteps;		/* GPU steps of the whole operation */
	u64 tmp_cnt;		/* elements */
	u64 land_cnt;		/* elements: the largest reducing receive */
	u64 land_off;		/* bytes */
	u64 scratch_bytes;	/* what the scratch must hold */
};

/* The layout of @a (algo DEFAULT) for elements of @esize bytes; -EINVAL if
 * @a is not valid, -EOVERFLOW if its bytes do not fit in 64 bits. */
int kcoll_sched_gpu_layout(const struct kcoll_sched_args *a, u32 esize,
			   struct kcoll_gpu_layout *l);

#endif /* KCOLL_SCHED_H */
