// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll schedules: one rank's phases for each collective (the execution
 * model is described in kcoll_sched.h). Plain C, built into the module and
 * into the host unit tests, which run every schedule of every rank on an
 * in-memory model.
 *
 * Algorithms (struct kcoll_sched_args.algo; DEFAULT = the first one named
 * for the collective, today's schedule), with their phase counts for
 * n > 1 ranks, L = floor(log2 n), Lc = ceil(log2 n), f = 1 if n is not a
 * power of two, else 0:
 *  ALLREDUCE       ring: reduce-scatter then allgather, both around the
 *                  ring over n chunks of the buffer: 2(n-1) phases
 *                  recdoubling: whole-buffer exchanges with rank ^ 2^i,
 *                  reduced into RECV and TMP alternately: L + 2f
 *                  binomial: binomial reduce to rank 0, binomial broadcast
 *                  from it, accumulating in RECV: 2 Lc
 *                  rabenseifner: reduce-scatter by recursive halving, then
 *                  allgather by recursive doubling, over 2^L chunks: 2L + 2f
 *  REDUCE          chain: pipelined root+1 -> root+2 -> ... -> root: 1
 *                  binomial: Lc
 *  BROADCAST       chain: pipelined root -> root+1 -> ... -> root-1, then
 *                  the last rank's empty token to the root: 2
 *                  binomial: Lc, then empty tokens back up the same tree
 *                  (each rank's once its subtree's are in): 2 Lc
 *  ALLGATHER       ring: n-1 (the own block's copy rides in the first one)
 *                  recdoubling: groups of blocks doubling in size: L + 2f
 *  REDUCE_SCATTER  ring, partial sums double-buffered in TMP: n-1
 *                  rechalving: recursive halving of the block range, partial
 *                  sums in TMP: L + 2f
 *  ALLTOALL        pairwise: phase k with ranks rank +- k: n-1 (the own
 *                  block's copy rides in the first one)
 *                  bruck: ceil(log2 n) exchanges of about n/2 blocks, packed
 *                  and unpacked through TMP by copy-only phases: about 3n
 *  GATHER          direct: phase k-1, k = 1..n-1, the root receives the
 *                  block of rank root+k, which sends it then: n-1 (the
 *                  root's own block's copy rides in the first one)
 *                  binomial: subtrees' blocks up the tree, the root's
 *                  two copies out of its scratch: Lc + 2
 *  SCATTER         direct: phase k-1 the root sends rank root+k its
 *                  block: n-1 (likewise)
 *                  binomial: the root's two copies into its scratch,
 *                  then down the tree: Lc + 2
 *  SEND / RECV     direct: 1 phase, one transfer (also with count 0)
 *  BARRIER         dissemination, empty tokens: Lc
 *  ALLGATHERV, REDUCE_SCATTERV  ring, ALLTOALLV  pairwise: n-1, the
 *                  schedules above with a count per block (kcoll_sched_vec.c)
 * A collective with count 0 has no phase; with n == 1 it has at most one
 * (the out-of-place copy), whatever the algorithm. Schedules keep their
 * phase count when count < n: the phases whose chunks are empty have no
 * transfer, and both ends of every transfer compute the same chunk, so they
 * agree. Ranks idle in a phase (the tree and fold schedules) get an empty
 * phase, so every transfer sits at the same phase index on both ends.
 *
 * Non-powers of two (recdoubling, rabenseifner, rechalving): p = 2^L, rem =
 * n - p; rank 2i (i < rem) hands its data to rank 2i+1 in phase 0 and gets
 * the result back in the last phase, idle in between; the others run the
 * power-of-two schedule on p virtual ranks (see struct kcoll_fold).
 *
 * Chunks (ring ALLREDUCE over n, rabenseifner over p): chunk j of count
 * elements over m has count/m + (j < count%m) elements, laid out in order.
 * Ring direction: every rank sends to rank+1 and receives from rank-1.
 */
#include "kcoll_sched_int.h"

/* Bound on n*count: every element offset and count fits u64 comfortably. */
#define KCOLL_SCHED_MAX_ELEMS	(1ULL << 62)

/* The uapi's rank bound; the simulator (tools/collsim.c) raises it. */
#ifndef KCOLL_SCHED_MAX_RANKS
#define KCOLL_SCHED_MAX_RANKS	KCOLL_MAX_RANKS
#endif
KCOLL_STATIC_ASSERT(KCOLL_SCHED_MAX_RANKS <= 16384,
		    "bruck's phase count must stay below 65536");

/* The wire carries phase numbers in 16 bits. */
#define KCOLL_SCHED_MAX_PHASES	65535U

static const char *const kcoll_algo_names[KCOLL_ALGO_NR] = {
	[KCOLL_ALGO_DEFAULT] = "default",
	[KCOLL_ALGO_RING] = "ring",
	[KCOLL_ALGO_CHAIN] = "chain",
	[KCOLL_ALGO_PAIRWISE] = "pairwise",
	[KCOLL_ALGO_DISSEMINATION] = "dissemination",
	[KCOLL_ALGO_DIRECT] = "direct",
	[KCOLL_ALGO_RECDOUBLING] = "recdoubling",
	[KCOLL_ALGO_BINOMIAL] = "binomial",
	[KCOLL_ALGO_RABENSEIFNER] = "rabenseifner",
	[KCOLL_ALGO_RECHALVING] = "rechalving",
	[KCOLL_ALGO_BRUCK] = "bruck",
	[KCOLL_ALGO_FARFIRST] = "farfirst",
};

const char *kcoll_algo_name(u8 algo)
{
	return algo < KCOLL_ALGO_NR ? kcoll_algo_names[algo] : "?";
}

static u32 kcoll_sched_nph(const struct kcoll_sched_args *a);

static bool kcoll_sched_reducing(u32 opcode)
{
	const struct kcoll_shape *d = kcoll_shape(opcode);

	return d && d->reduces;
}

static bool kcoll_sched_rooted(u32 opcode)
{
	const struct kcoll_shape *d = kcoll_shape(opcode);

	return d && (d->uses & KCOLL_USES_PEER);
}

int kcoll_sched_check(const struct kcoll_sched_args *a)
{
	const struct kcoll_shape *d;

	if (!a->nranks || a->nranks > KCOLL_SCHED_MAX_RANKS ||
	    a->rank >= a->nranks)
		return -EINVAL;
	if (!kcoll_sched_algo_ok(a->opcode, a->algo))
		return -EINVAL;
	/* The table's values: kcoll_sched_vec_check(), once per table. */
	d = kcoll_shape(a->opcode);
	if (!d || !d->vec != !a->vec || (a->vec && a->count))
		return -EINVAL;
	if (kcoll_sched_rooted(a->opcode) && a->root >= a->nranks)
		return -EINVAL;
	if ((a->opcode == KCOLL_OP_SEND || a->opcode == KCOLL_OP_RECV) &&
	    a->root == a->rank)
		return -EINVAL;
	if (a->opcode == KCOLL_OP_BARRIER && a->count)
		return -EINVAL;
	if (kcoll_sched_reducing(a->opcode)) {
		if (a->redop == KCOLL_REDOP_NONE || a->redop >= KCOLL_REDOP_LAST)
			return -EINVAL;
	} else if (a->redop != KCOLL_REDOP_NONE) {
		return -EINVAL;
	}
	if (a->count > KCOLL_SCHED_MAX_ELEMS / a->nranks)
		return -EINVAL;
	/* Never reached within KCOLL_SCHED_MAX_RANKS; kept as the rule. */
	if (kcoll_sched_nph(a) > KCOLL_SCHED_MAX_PHASES)
		return -EINVAL;
	return 0;
}

/*
 * ALLREDUCE, n > 1. Phases s = 0..n-2 (reduce-scatter): send chunk r-s
 * (the own input at s = 0, else the partial sum received at s-1) and
 * receive-reduce chunk r-s-1 into RECV with the own input as operand.
 * After them rank r holds the full result of chunk r+1 (averaged there with
 * AVG). Phases n-1+s, s = 0..n-2 (allgather): send chunk r+1-s, receive
 * chunk r-s. Out of place every chunk of RECV but r+1 is written by a
 * receive, chunk r+1 by the reduce of the last reduce-scatter phase, so no
 * initial copy is needed.
 */
static void kcoll_sched_allreduce(const struct kcoll_sched_args *a, u32 idx,
				  struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank;
	u32 next = kcoll_rank_add(r, 1, n), prev = kcoll_rank_sub(r, 1, n);
	u8 in = kcoll_sched_in_place(a) ? KCOLL_SBUF_RECV : KCOLL_SBUF_SEND;
	u64 c = a->count;
	u32 sc, rc;

	if (idx < n - 1) {
		u32 s = idx;

		sc = kcoll_rank_sub(r, s, n);
		rc = kcoll_rank_sub(r, s + 1, n);
		if (kcoll_chunk_cnt(c, n, sc))
			kcoll_ph_send(p, next, s ? KCOLL_SBUF_RECV : in,
				      kcoll_chunk_off(c, n, sc),
				      kcoll_chunk_cnt(c, n, sc), false);
		if (kcoll_chunk_cnt(c, n, rc))
			kcoll_ph_recv_reduce(p, prev, KCOLL_SBUF_RECV,
					     kcoll_chunk_off(c, n, rc),
					     kcoll_chunk_cnt(c, n, rc), in,
					     kcoll_chunk_off(c, n, rc));
		if (s == n - 2)		/* rc == r + 1: the chunk we own */
			kcoll_ph_avg(a, p, KCOLL_SBUF_RECV,
				     kcoll_chunk_off(c, n, rc),
				     kcoll_chunk_cnt(c, n, rc));
	} else {
		u32 s = idx - (n - 1);

		sc = kcoll_rank_sub(kcoll_rank_add(r, 1, n), s, n);
		rc = kcoll_rank_sub(r, s, n);
		if (kcoll_chunk_cnt(c, n, sc))
			kcoll_ph_send(p, next, KCOLL_SBUF_RECV,
				      kcoll_chunk_off(c, n, sc),
				      kcoll_chunk_cnt(c, n, sc), false);
		if (kcoll_chunk_cnt(c, n, rc))
			kcoll_ph_recv(p, prev, KCOLL_SBUF_RECV,
				      kcoll_chunk_off(c, n, rc),
				      kcoll_chunk_cnt(c, n, rc));
	}
}

/*
 * REDUCE, n > 1: the chain root+1, root+2, ..., root-1, root. Its head
 * sends its input; every inner rank reduces what it receives with its own
 * input into TMP and forwards TMP as it lands; the root reduces into RECV.
 */
static void kcoll_sched_reduce(const struct kcoll_sched_args *a,
			       struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank;
	u32 next = kcoll_rank_add(r, 1, n), prev = kcoll_rank_sub(r, 1, n);
	u32 pos = kcoll_rank_sub(r, kcoll_rank_add(a->root, 1, n), n);
	u64 c = a->count;

	if (pos == 0) {
		kcoll_ph_send(p, next, KCOLL_SBUF_SEND, 0, c, false);
	} else if (pos < n - 1) {
		kcoll_ph_recv_reduce(p, prev, KCOLL_SBUF_TMP, 0, c,
				     KCOLL_SBUF_SEND, 0);
		kcoll_ph_send(p, next, KCOLL_SBUF_TMP, 0, c, true);
	} else {
		kcoll_ph_recv_reduce(p, prev, KCOLL_SBUF_RECV, 0, c,
				     kcoll_sched_in_place(a) ?
				     KCOLL_SBUF_RECV : KCOLL_SBUF_SEND, 0);
		kcoll_ph_avg(a, p, KCOLL_SBUF_RECV, 0, c);
	}
}

/*
 * BROADCAST, n > 1: the chain root, root+1, ..., root-1; inner ranks
 * forward RECV as it lands. Phase 1 is the confirmation: the last rank,
 * having checked what it received, sends the root an empty token (the root
 * receives no data, so this is how it learns that every rank's signature
 * matched: kcoll_sched_lazy()).
 */
static void kcoll_sched_broadcast(const struct kcoll_sched_args *a, u32 idx,
				  struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank;
	u32 next = kcoll_rank_add(r, 1, n), prev = kcoll_rank_sub(r, 1, n);
	u32 pos = kcoll_rank_sub(r, a->root, n);
	u64 c = a->count;

	if (idx == 1) {
		if (pos == n - 1)
			kcoll_ph_send(p, next, KCOLL_SBUF_RECV, 0, 0, false);
		else if (pos == 0)
			kcoll_ph_recv(p, prev, KCOLL_SBUF_RECV, 0, 0);
		return;
	}
	if (pos == 0) {
		if (kcoll_sched_in_place(a)) {
			kcoll_ph_send(p, next, KCOLL_SBUF_RECV, 0, c, false);
		} else {
			kcoll_ph_copy(p, KCOLL_SBUF_SEND, 0, KCOLL_SBUF_RECV, 0,
				      c);
			kcoll_ph_send(p, next, KCOLL_SBUF_SEND, 0, c, false);
		}
	} else {
		kcoll_ph_recv(p, prev, KCOLL_SBUF_RECV, 0, c);
		if (pos < n - 1)
			kcoll_ph_send(p, next, KCOLL_SBUF_RECV, 0, c, true);
	}
}

/*
 * ALLGATHER, n > 1: phase s sends block r-s (the own input at s = 0) and
 * receives block r-s-1. Out of place the first phase also copies the own
 * block into RECV.
 */
static void kcoll_sched_allgather(const struct kcoll_sched_args *a, u32 s,
				  struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank;
	u32 next = kcoll_rank_add(r, 1, n), prev = kcoll_rank_sub(r, 1, n);
	u32 sb = kcoll_rank_sub(r, s, n), rb = kcoll_rank_sub(r, s + 1, n);
	u64 c = a->count;

	if (s == 0 && !kcoll_sched_in_place(a)) {
		kcoll_ph_copy(p, KCOLL_SBUF_SEND, 0, KCOLL_SBUF_RECV,
			      (u64)r * c, c);
		kcoll_ph_send(p, next, KCOLL_SBUF_SEND, 0, c, false);
	} else {
		kcoll_ph_send(p, next, KCOLL_SBUF_RECV, (u64)sb * c, c, false);
	}
	kcoll_ph_recv(p, prev, KCOLL_SBUF_RECV, (u64)rb * c, c);
}

/*
 * REDUCE_SCATTER, n > 1: phase s sends the partial result of block r-s-1
 * (the own input at s = 0, else what phase s-1 produced) and receive-reduces
 * block r-s-2 with the own input block as operand: into TMP half s%2, or,
 * in the last phase (block r), into RECV (in place: SEND block r, which is
 * also the operand).
 */
static void kcoll_sched_reduce_scatter(const struct kcoll_sched_args *a,
				       u32 s, struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank;
	u32 next = kcoll_rank_add(r, 1, n), prev = kcoll_rank_sub(r, 1, n);
	u32 sb = kcoll_rank_sub(r, s + 1, n), rb = kcoll_rank_sub(r, s + 2, n);
	u64 c = a->count;
	u8 dbuf;
	u64 doff;

	if (s == 0)
		kcoll_ph_send(p, next, KCOLL_SBUF_SEND, (u64)sb * c, c, false);
	else
		kcoll_ph_send(p, next, KCOLL_SBUF_TMP, ((s - 1) & 1) * c, c,
			      false);
	if (s < n - 2) {
		dbuf = KCOLL_SBUF_TMP;
		doff = (s & 1) * c;
	} else if (kcoll_sched_in_place(a)) {
		dbuf = KCOLL_SBUF_SEND;
		doff = (u64)r * c;	/* rb == r */
	} else {
		dbuf = KCOLL_SBUF_RECV;
		doff = 0;
	}
	kcoll_ph_recv_reduce(p, prev, dbuf, doff, c, KCOLL_SBUF_SEND,
			     (u64)rb * c);
	if (s == n - 2)
		kcoll_ph_avg(a, p, dbuf, doff, c);
}

/*
 * ALLTOALL, n > 1: phase k-1, k = 1..n-1, sends block r+k to rank r+k and
 * receives block r-k from rank r-k. The first phase also copies the own
 * block (out of place) or saves the whole of RECV into TMP, where the
 * sends then read from (in place).
 */
static void kcoll_sched_alltoall(const struct kcoll_sched_args *a, u32 idx,
				 struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank, k = idx + 1;
	u32 to = kcoll_rank_add(r, k, n), from = kcoll_rank_sub(r, k, n);
	bool ip = kcoll_sched_in_place(a);
	u64 c = a->count;

	if (idx == 0) {
		if (ip)
			kcoll_ph_copy(p, KCOLL_SBUF_RECV, 0, KCOLL_SBUF_TMP, 0,
				      (u64)n * c);
		else
			kcoll_ph_copy(p, KCOLL_SBUF_SEND, (u64)r * c,
				      KCOLL_SBUF_RECV, (u64)r * c, c);
	}
	kcoll_ph_send(p, to, ip ? KCOLL_SBUF_TMP : KCOLL_SBUF_SEND,
		      (u64)to * c, c, false);
	kcoll_ph_recv(p, from, KCOLL_SBUF_RECV, (u64)from * c, c);
}

/*
 * GATHER, n > 1: in phase k-1, k = 1..n-1, rank root+k sends its block and
 * the root receives it at block root+k of RECV; the others are idle. Out
 * of place the root's first phase also copies its own block.
 */
static void kcoll_sched_gather(const struct kcoll_sched_args *a, u32 idx,
			       struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank, k = idx + 1;
	u32 from = kcoll_rank_add(a->root, k, n);
	u64 c = a->count;

	if (r != a->root) {
		if (r == from)
			kcoll_ph_send(p, a->root, KCOLL_SBUF_SEND, 0, c, false);
		return;
	}
	if (idx == 0 && !kcoll_sched_in_place(a))
		kcoll_ph_copy(p, KCOLL_SBUF_SEND, 0, KCOLL_SBUF_RECV,
			      (u64)r * c, c);
	kcoll_ph_recv(p, from, KCOLL_SBUF_RECV, (u64)from * c, c);
}

/*
 * SCATTER, n > 1: in phase k-1, k = 1..n-1, the root sends block root+k of
 * SEND to rank root+k, which receives it into RECV; the others are idle.
 * Out of place the root's first phase also copies its own block.
 */
static void kcoll_sched_scatter(const struct kcoll_sched_args *a, u32 idx,
				struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank, k = idx + 1;
	u32 to = kcoll_rank_add(a->root, k, n);
	u64 c = a->count;

	if (r != a->root) {
		if (r == to)
			kcoll_ph_recv(p, a->root, KCOLL_SBUF_RECV, 0, c);
		return;
	}
	if (idx == 0 && !kcoll_sched_in_place(a))
		kcoll_ph_copy(p, KCOLL_SBUF_SEND, (u64)r * c, KCOLL_SBUF_RECV,
			      0, c);
	kcoll_ph_send(p, to, KCOLL_SBUF_SEND, (u64)to * c, c, false);
}

/* BARRIER: phase k sends a token to rank r+2^k, receives one from r-2^k. */
static void kcoll_sched_barrier(const struct kcoll_sched_args *a, u32 k,
				struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank, d = 1U << k;

	kcoll_ph_send(p, kcoll_rank_add(r, d, n), KCOLL_SBUF_SEND, 0, 0,
		      false);
	kcoll_ph_recv(p, kcoll_rank_sub(r, d, n), KCOLL_SBUF_RECV, 0, 0);
}

/* ------------------------------------------------------------------ */
/* The algorithms of each collective                                    */
/* ------------------------------------------------------------------ */

/* Phase counts (n > 1, count > 0 where data moves); @f folded for rank 0. */
static u32 kcoll_nph_one(const struct kcoll_sched_args *a,
			 const struct kcoll_fold *f)
{
	(void)a;
	(void)f;
	return 1;
}

static u32 kcoll_nph_two(const struct kcoll_sched_args *a,
			 const struct kcoll_fold *f)
{
	(void)a;
	(void)f;
	return 2;
}

static u32 kcoll_nph_n1(const struct kcoll_sched_args *a,
			const struct kcoll_fold *f)
{
	(void)f;
	return a->nranks - 1;
}

static u32 kcoll_nph_ring2(const struct kcoll_sched_args *a,
			   const struct kcoll_fold *f)
{
	(void)f;
	return 2 * (a->nranks - 1);
}

static u32 kcoll_nph_fold(const struct kcoll_sched_args *a,
			  const struct kcoll_fold *f)
{
	(void)a;
	return f->L + 2 * f->pre;
}

static u32 kcoll_nph_fold2(const struct kcoll_sched_args *a,
			   const struct kcoll_fold *f)
{
	(void)a;
	return 2 * f->L + 2 * f->pre;
}

static u32 kcoll_nph_farfirst(const struct kcoll_sched_args *a,
			      const struct kcoll_fold *f)
{
	(void)a;
	return f->p - 1 + 2 * f->pre;
}

static u32 kcoll_nph_log2(const struct kcoll_sched_args *a,
			  const struct kcoll_fold *f)
{
	(void)f;
	return kcoll_ceil_log2(a->nranks);
}

static u32 kcoll_nph_log2x2(const struct kcoll_sched_args *a,
			    const struct kcoll_fold *f)
{
	(void)f;
	return 2 * kcoll_ceil_log2(a->nranks);
}

static u32 kcoll_nph_log2p2(const struct kcoll_sched_args *a,
			    const struct kcoll_fold *f)
{
	(void)f;
	return kcoll_ceil_log2(a->nranks) + 2;
}

static u32 kcoll_nph_bruck(const struct kcoll_sched_args *a,
			   const struct kcoll_fold *f)
{
	(void)f;
	return kcoll_bruck_nph(a->nranks);
}

/* Phase builders that do not need the phase index. */
static void kcoll_sched_reduce_chain(const struct kcoll_sched_args *a,
				     u32 idx, struct kcoll_phase *p)
{
	(void)idx;
	kcoll_sched_reduce(a, p);
}

static void kcoll_sched_broadcast_chain(const struct kcoll_sched_args *a,
					u32 idx, struct kcoll_phase *p)
{
	kcoll_sched_broadcast(a, idx, p);
}

static void kcoll_sched_send(const struct kcoll_sched_args *a, u32 idx,
			     struct kcoll_phase *p)
{
	(void)idx;
	kcoll_ph_send(p, a->root, KCOLL_SBUF_SEND, 0, a->count, false);
}

static void kcoll_sched_recv(const struct kcoll_sched_args *a, u32 idx,
			     struct kcoll_phase *p)
{
	(void)idx;
	kcoll_ph_recv(p, a->root, KCOLL_SBUF_RECV, 0, a->count);
}

/* Scratch (TMP elements) on this rank, n > 1 and some phase to run. */
static u64 kcoll_tmp_reduce_chain(const struct kcoll_sched_args *a)
{
	u32 n = a->nranks;
	u32 pos = kcoll_rank_sub(a->rank, kcoll_rank_add(a->root, 1, n), n);

	return pos > 0 && pos < n - 1 ? a->count : 0;
}

/* Phases 0..n-3 reduce into TMP halves 0, 1, 0, ... */
static u64 kcoll_tmp_rs_ring(const struct kcoll_sched_args *a)
{
	u32 n = a->nranks;

	return n >= 4 ? 2 * a->count : n == 3 ? a->count : 0;
}

static u64 kcoll_tmp_alltoall_pairwise(const struct kcoll_sched_args *a)
{
	return kcoll_sched_in_place(a) ? (u64)a->nranks * a->count : 0;
}

/* TMP is a step's destination from L = 2 on; with L = 1 only the host's
 * fold-in and the in-place copy use it. */
static u64 kcoll_tmp_allreduce_rd(const struct kcoll_sched_args *a)
{
	struct kcoll_fold f;

	kcoll_fold_init(&f, a->nranks, a->rank);
	return !f.away && (f.L >= 2 || f.host || kcoll_sched_in_place(a)) ?
	       a->count : 0;
}

/* Non-root reduce ranks that receive accumulate in TMP. */
static u64 kcoll_tmp_reduce_binomial(const struct kcoll_sched_args *a)
{
	u32 n = a->nranks, v = kcoll_rank_sub(a->rank, a->root, n);

	if (a->rank == a->root)
		return 0;
	return !(v & 1) && v + 1 < n ? a->count : 0;
}

static u64 kcoll_tmp_bruck(const struct kcoll_sched_args *a)
{
	u32 n = a->nranks;

	return (u64)(n + 2 * (n / 2)) * a->count;
}

/*
 * One row per algorithm a collective has: its phase count, the builder of
 * its phases, and its scratch. The first row is the collective's default
 * (what KCOLL_ALGO_DEFAULT stands for when nothing chooses).
 */
struct kcoll_algo_def {
	u8 algo;
	u32 (*nph)(const struct kcoll_sched_args *a,
		   const struct kcoll_fold *f);
	void (*phase)(const struct kcoll_sched_args *a, u32 idx,
		      struct kcoll_phase *p);
	u64 (*tmp)(const struct kcoll_sched_args *a);	/* NULL: none */
};

#define KCOLL_ALGOS(...) \
	.algos = (const struct kcoll_algo_def[]){ __VA_ARGS__ }, \
	.nalgos = sizeof((const struct kcoll_algo_def[]){ __VA_ARGS__ }) / \
		  sizeof(struct kcoll_algo_def)

static const struct kcoll_coll_def {
	/* Phases whatever the count and nranks (no data, or one message):
	 * no single-rank copy, no empty schedule for count 0. */
	bool no_data;
	/* Every rank's result depends on every rank's input (lazy
	 * signatures may ride with the data: kcoll_sched.h). */
	bool all_dependent;
	const struct kcoll_algo_def *algos;
	u8 nalgos;
} kcoll_colls[KCOLL_OP_LAST] = {
	[KCOLL_OP_ALLREDUCE] = { .all_dependent = true, KCOLL_ALGOS(
		{ KCOLL_ALGO_RING, kcoll_nph_ring2, kcoll_sched_allreduce, NULL },
		{ KCOLL_ALGO_RECDOUBLING, kcoll_nph_fold,
		  kcoll_sched_allreduce_rd, kcoll_tmp_allreduce_rd },
		{ KCOLL_ALGO_BINOMIAL, kcoll_nph_log2x2, kcoll_sched_binomial, NULL },
		{ KCOLL_ALGO_RABENSEIFNER, kcoll_nph_fold2,
		  kcoll_sched_allreduce_rab, NULL }) },
	[KCOLL_OP_REDUCE] = { KCOLL_ALGOS(
		{ KCOLL_ALGO_CHAIN, kcoll_nph_one, kcoll_sched_reduce_chain,
		  kcoll_tmp_reduce_chain },
		{ KCOLL_ALGO_BINOMIAL, kcoll_nph_log2, kcoll_sched_binomial,
		  kcoll_tmp_reduce_binomial }) },
	[KCOLL_OP_BROADCAST] = { KCOLL_ALGOS(
		{ KCOLL_ALGO_CHAIN, kcoll_nph_two,
		  kcoll_sched_broadcast_chain, NULL },
		{ KCOLL_ALGO_BINOMIAL, kcoll_nph_log2x2, kcoll_sched_binomial,
		  NULL }) },
	[KCOLL_OP_ALLGATHER] = { .all_dependent = true, KCOLL_ALGOS(
		{ KCOLL_ALGO_RING, kcoll_nph_n1, kcoll_sched_allgather, NULL },
		{ KCOLL_ALGO_RECDOUBLING, kcoll_nph_fold,
		  kcoll_sched_allgather_rd, NULL },
		{ KCOLL_ALGO_FARFIRST, kcoll_nph_farfirst,
		  kcoll_sched_allgather_ff, NULL }) },
	[KCOLL_OP_REDUCE_SCATTER] = { .all_dependent = true, KCOLL_ALGOS(
		{ KCOLL_ALGO_RING, kcoll_nph_n1, kcoll_sched_reduce_scatter,
		  kcoll_tmp_rs_ring },
		{ KCOLL_ALGO_RECHALVING, kcoll_nph_fold, kcoll_sched_rs_halving,
		  kcoll_sched_tmp_rs_halving }) },
	[KCOLL_OP_ALLTOALL] = { .all_dependent = true, KCOLL_ALGOS(
		{ KCOLL_ALGO_PAIRWISE, kcoll_nph_n1, kcoll_sched_alltoall,
		  kcoll_tmp_alltoall_pairwise },
		{ KCOLL_ALGO_BRUCK, kcoll_nph_bruck, kcoll_sched_alltoall_bruck,
		  kcoll_tmp_bruck }) },
	[KCOLL_OP_SEND] = { .no_data = true, KCOLL_ALGOS(
		{ KCOLL_ALGO_DIRECT, kcoll_nph_one, kcoll_sched_send, NULL }) },
	[KCOLL_OP_RECV] = { .no_data = true, KCOLL_ALGOS(
		{ KCOLL_ALGO_DIRECT, kcoll_nph_one, kcoll_sched_recv, NULL }) },
	[KCOLL_OP_BARRIER] = { .no_data = true, .all_dependent = true,
			       KCOLL_ALGOS(
		{ KCOLL_ALGO_DISSEMINATION, kcoll_nph_log2,
		  kcoll_sched_barrier, NULL }) },
	[KCOLL_OP_GATHER] = { KCOLL_ALGOS(
		{ KCOLL_ALGO_DIRECT, kcoll_nph_n1, kcoll_sched_gather, NULL },
		{ KCOLL_ALGO_BINOMIAL, kcoll_nph_log2p2,
		  kcoll_sched_gather_binomial, kcoll_sched_tmp_gs_binomial }) },
	[KCOLL_OP_SCATTER] = { KCOLL_ALGOS(
		{ KCOLL_ALGO_DIRECT, kcoll_nph_n1, kcoll_sched_scatter, NULL },
		{ KCOLL_ALGO_BINOMIAL, kcoll_nph_log2p2,
		  kcoll_sched_scatter_binomial, kcoll_sched_tmp_gs_binomial }) },
	[KCOLL_OP_ALLGATHERV] = { KCOLL_ALGOS(
		{ KCOLL_ALGO_RING, kcoll_nph_n1, kcoll_sched_allgatherv, NULL }) },
	[KCOLL_OP_REDUCE_SCATTERV] = { KCOLL_ALGOS(
		{ KCOLL_ALGO_RING, kcoll_nph_n1, kcoll_sched_reduce_scatterv,
		  kcoll_sched_tmp_rsv }) },
	[KCOLL_OP_ALLTOALLV] = { KCOLL_ALGOS(
		{ KCOLL_ALGO_PAIRWISE, kcoll_nph_n1, kcoll_sched_alltoallv,
		  NULL }) },
};

/* @algo's row for @opcode (not DEFAULT), or NULL if it has none. */
static const struct kcoll_algo_def *kcoll_algo_def(u32 opcode, u8 algo)
{
	const struct kcoll_coll_def *c;
	u8 i;

	if (opcode >= KCOLL_OP_LAST)
		return NULL;
	c = &kcoll_colls[opcode];
	for (i = 0; i < c->nalgos; i++)
		if (c->algos[i].algo == algo)
			return &c->algos[i];
	return NULL;
}

bool kcoll_sched_algo_ok(u32 opcode, u8 algo)
{
	return opcode < KCOLL_OP_LAST && kcoll_colls[opcode].nalgos &&
	       (algo == KCOLL_ALGO_DEFAULT || kcoll_algo_def(opcode, algo));
}

u8 kcoll_sched_algo(const struct kcoll_sched_args *a)
{
	if (a->algo != KCOLL_ALGO_DEFAULT)
		return a->algo;
	if (a->opcode >= KCOLL_OP_LAST || !kcoll_colls[a->opcode].nalgos)
		return KCOLL_ALGO_RING;
	return kcoll_colls[a->opcode].algos[0].algo;
}

/* Phases of @a, which passed every check but the phase count. */
static u32 kcoll_sched_nph(const struct kcoll_sched_args *a)
{
	const struct kcoll_algo_def *d = kcoll_algo_def(a->opcode,
							kcoll_sched_algo(a));
	struct kcoll_fold f;

	if (!d || a->opcode >= KCOLL_OP_LAST)
		return 0;
	/* The v-variants: their phases whatever the counts, so that a
	 * rank whose blocks are all empty still runs them with its peers'
	 * (ALLTOALLV's counts differ per rank); one rank, the copy. */
	if (a->vec && a->nranks == 1)
		return kcoll_sched_in_place(a) ? 0 : 1;
	if (!kcoll_colls[a->opcode].no_data && !a->vec) {
		if (!a->count)
			return 0;
		if (a->nranks == 1)	/* at most the out-of-place copy */
			return kcoll_sched_in_place(a) ? 0 : 1;
	}
	kcoll_fold_init(&f, a->nranks, 0);
	return d->nph(a, &f);
}

u32 kcoll_sched_nphases(const struct kcoll_sched_args *a)
{
	if (kcoll_sched_check(a))
		return 0;
	return kcoll_sched_nph(a);
}

bool kcoll_sched_all_dependent(const struct kcoll_sched_args *a)
{
	if (a->nranks < 2 || a->opcode >= KCOLL_OP_LAST ||
	    !kcoll_colls[a->opcode].all_dependent)
		return false;
	return a->count > 0 || kcoll_colls[a->opcode].no_data;
}

/*
 * Whether regions @x (@xc elements) and @y (@yc) of an operation's buffers
 * may share bytes. In place (as the schedules take it:
 * kcoll_sched_in_place()), the send buffer lies inside the receive buffer
 * (uapi: at the offset of the rank's block, or at its start): any two
 * regions of those two meet. Empty regions meet nothing.
 */
static bool kcoll_sregions_meet(const struct kcoll_sched_args *a,
				const struct kcoll_sregion *x, u64 xc,
				const struct kcoll_sregion *y, u64 yc)
{
	if (!xc || !yc)
		return false;
	if (x->buf != y->buf)
		return kcoll_sched_in_place(a) && x->buf != KCOLL_SBUF_TMP &&
		       y->buf != KCOLL_SBUF_TMP;
	return x->off < y->off + yc && y->off < x->off + xc;
}

bool kcoll_sched_recv_ahead(const struct kcoll_sched_args *a,
			    const struct kcoll_phase *ph,
			    const struct kcoll_phase *nx)
{
	const struct kcoll_sregion *r = &nx->recv.dst;
	u64 n = nx->recv.cnt;

	if (!nx->has_recv || !n || nx->recv.reduce)
		return false;
	if (ph->has_send &&
	    kcoll_sregions_meet(a, r, n, &ph->send.src, ph->send.cnt))
		return false;
	if (ph->has_recv &&
	    (kcoll_sregions_meet(a, r, n, &ph->recv.dst, ph->recv.cnt) ||
	     (ph->recv.reduce &&
	      kcoll_sregions_meet(a, r, n, &ph->recv.operand,
				  ph->recv.cnt))))
		return false;
	if (kcoll_sregions_meet(a, r, n, &ph->copy.src, ph->copy.cnt) ||
	    kcoll_sregions_meet(a, r, n, &ph->copy.dst, ph->copy.cnt) ||
	    kcoll_sregions_meet(a, r, n, &ph->avg, ph->avg_cnt) ||
	    kcoll_sregions_meet(a, r, n, &nx->copy.src, nx->copy.cnt) ||
	    kcoll_sregions_meet(a, r, n, &nx->copy.dst, nx->copy.cnt))
		return false;
	return !nx->has_send || nx->send.fwd ||
	       !kcoll_sregions_meet(a, r, n, &nx->send.src, nx->send.cnt);
}

bool kcoll_sched_send_ahead(const struct kcoll_sched_args *a,
			    const struct kcoll_phase *ph,
			    const struct kcoll_phase *nx)
{
	const struct kcoll_sregion *s = &nx->send.src;
	u64 n = nx->send.cnt;

	if (!nx->has_send || !n || nx->send.fwd)
		return false;
	if (ph->has_recv &&
	    kcoll_sregions_meet(a, s, n, &ph->recv.dst, ph->recv.cnt))
		return false;
	if (nx->has_recv &&
	    kcoll_sregions_meet(a, s, n, &nx->recv.dst, nx->recv.cnt))
		return false;
	/* @ph's copy is done: it ran as @ph opened, before any of this. */
	return !kcoll_sregions_meet(a, s, n, &ph->avg, ph->avg_cnt) &&
	       !kcoll_sregions_meet(a, s, n, &nx->copy.dst, nx->copy.cnt);
}

bool kcoll_sched_early_past(const struct kcoll_sched_args *a,
			    const struct kcoll_phase *pk, bool running,
			    const struct kcoll_phase *pj)
{
	const struct kcoll_sregion *s = &pj->send.src;
	u64 n = pj->send.cnt;

	/* @pk's copy ran as it opened if it is the running phase. */
	if (!running && kcoll_sregions_meet(a, s, n, &pk->copy.dst,
					    pk->copy.cnt))
		return false;
	if (pk->has_recv &&
	    kcoll_sregions_meet(a, s, n, &pk->recv.dst, pk->recv.cnt))
		return false;
	return !kcoll_sregions_meet(a, s, n, &pk->avg, pk->avg_cnt);
}

bool kcoll_sched_send_early(const struct kcoll_sched_args *a, u32 cur,
			    u32 j, const struct kcoll_phase *pj)
{
	const struct kcoll_sregion *s = &pj->send.src;
	u64 n = pj->send.cnt;
	struct kcoll_phase pk;
	u32 k;

	/* Empty: a token, whose going is what it says. */
	if (j <= cur || !pj->has_send || !n || pj->send.fwd)
		return false;
	if (kcoll_sregions_meet(a, s, n, &pj->copy.dst, pj->copy.cnt) ||
	    (pj->has_recv &&
	     kcoll_sregions_meet(a, s, n, &pj->recv.dst, pj->recv.cnt)))
		return false;
	for (k = cur; k < j; k++) {
		kcoll_sched_phase(a, k, &pk);
		if (!kcoll_sched_early_past(a, &pk, k == cur, pj))
			return false;
	}
	return true;
}

/* Does phase @p touch memory: copy, move or average any byte? */
static bool kcoll_phase_moves(const struct kcoll_phase *p)
{
	return p->copy.cnt || p->avg_cnt ||
	       (p->has_send && p->send.cnt) || (p->has_recv && p->recv.cnt);
}

u32 kcoll_sched_data_phases(const struct kcoll_sched_args *a)
{
	u32 n = kcoll_sched_nphases(a);
	struct kcoll_phase p;

	while (n) {
		kcoll_sched_phase(a, n - 1, &p);
		if (kcoll_phase_moves(&p))
			break;
		n--;
	}
	return n;
}

bool kcoll_sched_lazy(const struct kcoll_sched_args *a)
{
	if (kcoll_sched_all_dependent(a))
		return true;
	return a->nranks >= 2 && a->count > 0 &&
	       (a->opcode == KCOLL_OP_BROADCAST ||
		a->opcode == KCOLL_OP_REDUCE || a->opcode == KCOLL_OP_GATHER);
}

void kcoll_sched_phase(const struct kcoll_sched_args *a, u32 idx,
		       struct kcoll_phase *p)
{
	const struct kcoll_algo_def *d;

	*p = (struct kcoll_phase){ 0 };
	if (idx >= kcoll_sched_nphases(a))
		return;
	d = kcoll_algo_def(a->opcode, kcoll_sched_algo(a));
	if (a->nranks == 1 && !kcoll_colls[a->opcode].no_data && !a->vec) {
		/* Not in place (else no phase): the own input to RECV. */
		kcoll_ph_copy(p, KCOLL_SBUF_SEND, 0, KCOLL_SBUF_RECV, 0,
			      a->count);
		return;
	}
	d->phase(a, idx, p);
}

u64 kcoll_sched_tmp_count(const struct kcoll_sched_args *a)
{
	const struct kcoll_algo_def *d;

	if (!kcoll_sched_nphases(a) || a->nranks == 1)
		return 0;
	d = kcoll_algo_def(a->opcode, kcoll_sched_algo(a));
	return d->tmp ? d->tmp(a) : 0;
}

/*
 * The user buffers' elements on this rank (kcoll_shape.h), less the one
 * that running in place absorbs: the send buffer, but for REDUCE_SCATTER,
 * whose input stays where it is and whose result is written into it.
 */
static bool kcoll_in_place_keeps_send(const struct kcoll_shape *d)
{
	return d->in_place == KCOLL_IN_PLACE_SCATTER ||
	       d->in_place == KCOLL_IN_PLACE_ROOT_SCATTER;
}

u64 kcoll_sched_send_count(const struct kcoll_sched_args *a)
{
	const struct kcoll_shape *d = kcoll_shape(a->opcode);
	unsigned long long c;

	if (!kcoll_sched_check(a) && a->vec)
		return kcoll_sched_vec_send_count(a);
	if (kcoll_sched_check(a) ||
	    (kcoll_sched_in_place(a) && !kcoll_in_place_keeps_send(d)) ||
	    kcoll_shape_count(d->send, a->rank, a->root, a->nranks, a->count,
			      &c))
		return 0;
	return c;
}

u64 kcoll_sched_recv_count(const struct kcoll_sched_args *a)
{
	const struct kcoll_shape *d = kcoll_shape(a->opcode);
	unsigned long long c;

	if (!kcoll_sched_check(a) && a->vec)
		return kcoll_sched_vec_recv_count(a);
	if (kcoll_sched_check(a) ||
	    (kcoll_sched_in_place(a) && kcoll_in_place_keeps_send(d)) ||
	    kcoll_shape_count(d->recv, a->rank, a->root, a->nranks, a->count,
			      &c))
		return 0;
	return c;
}

unsigned int kcoll_sched_gpu_phase(const struct kcoll_phase *ph)
{
	unsigned int steps = 0;

	if (ph->has_recv && ph->recv.reduce && ph->recv.cnt)
		steps |= KCOLL_GPU_STEP_REDUCE;
	if (ph->avg_cnt)
		steps |= KCOLL_GPU_STEP_AVG;
	return steps;
}

int kcoll_sched_gpu_layout(const struct kcoll_sched_args *a, u32 esize,
			   struct kcoll_gpu_layout *l)
{
	struct kcoll_phase ph;
	unsigned int s;
	u64 tmp_bytes, land_bytes;
	u32 i, n;

	*l = (struct kcoll_gpu_layout){ 0 };
	if (a->algo != KCOLL_ALGO_DEFAULT || !esize || kcoll_sched_check(a))
		return -EINVAL;
	n = kcoll_sched_nphases(a);
	for (i = 0; i < n; i++) {
		kcoll_sched_phase(a, i, &ph);
		s = kcoll_sched_gpu_phase(&ph);
		if (s & KCOLL_GPU_STEP_REDUCE) {
			l->nsteps++;
			if (ph.recv.cnt > l->land_cnt)
				l->land_cnt = ph.recv.cnt;
		}
		if (s & KCOLL_GPU_STEP_AVG)
			l->nsteps++;
	}
	l->tmp_cnt = kcoll_sched_tmp_count(a);
	if (l->tmp_cnt > kcoll_div64(~0ULL >> 1, esize) ||
	    l->land_cnt > kcoll_div64(~0ULL >> 1, esize))
		return -EOVERFLOW;
	tmp_bytes = l->tmp_cnt * esize;
	land_bytes = l->land_cnt * esize;
	l->land_off = (tmp_bytes + KCOLL_GPU_ALIGN - 1) &
		      ~(u64)(KCOLL_GPU_ALIGN - 1);
	l->scratch_bytes = l->land_off + land_bytes;
	return 0;
}
