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
 *  BROADCAST       chain: pipelined root -> root+1 -> ... -> root-1: 1
 *                  binomial: Lc
 *  ALLGATHER       ring: n-1 (the own block's copy rides in the first one)
 *                  recdoubling: groups of blocks doubling in size: L + 2f
 *  REDUCE_SCATTER  ring, partial sums double-buffered in TMP: n-1
 *                  rechalving: recursive halving of the block range, partial
 *                  sums in TMP: L + 2f
 *  ALLTOALL        pairwise: phase k with ranks rank +- k: n-1 (the own
 *                  block's copy rides in the first one)
 *                  bruck: ceil(log2 n) exchanges of about n/2 blocks, packed
 *                  and unpacked through TMP by copy-only phases: about 3n
 *  SEND / RECV     direct: 1 phase, one transfer (also with count 0)
 *  BARRIER         dissemination, empty tokens: Lc
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
#include "kcoll_sched.h"
#include "kcoll_shape.h"

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
	return opcode == KCOLL_OP_ALLREDUCE || opcode == KCOLL_OP_REDUCE ||
	       opcode == KCOLL_OP_REDUCE_SCATTER;
}

static bool kcoll_sched_rooted(u32 opcode)
{
	return opcode == KCOLL_OP_REDUCE || opcode == KCOLL_OP_BROADCAST ||
	       opcode == KCOLL_OP_SEND || opcode == KCOLL_OP_RECV;
}

int kcoll_sched_check(const struct kcoll_sched_args *a)
{
	if (a->opcode < KCOLL_OP_ALLREDUCE || a->opcode > KCOLL_OP_BARRIER)
		return -EINVAL;
	if (!a->nranks || a->nranks > KCOLL_SCHED_MAX_RANKS ||
	    a->rank >= a->nranks)
		return -EINVAL;
	if (!kcoll_sched_algo_ok(a->opcode, a->algo))
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
 * Whether this rank runs in place: only where the uapi gives in place a
 * meaning for this rank (the root of REDUCE and BROADCAST, every rank of
 * the symmetric collectives); elsewhere the flag is ignored.
 */
static bool kcoll_sched_in_place(const struct kcoll_sched_args *a)
{
	const struct kcoll_shape *d = kcoll_shape(a->opcode);

	if (!a->in_place || !d)
		return false;
	switch (d->in_place) {
	case KCOLL_IN_PLACE_NEVER:
		return false;
	case KCOLL_IN_PLACE_ROOT:
		return a->rank == a->root;
	default:
		return true;
	}
}

/* Ring arithmetic on ranks; all operands are below n <= KCOLL_MAX_RANKS. */
static u32 kcoll_rank_add(u32 r, u32 k, u32 n)
{
	return (r + k) % n;
}

static u32 kcoll_rank_sub(u32 r, u32 k, u32 n)
{
	return (r + n - k % n) % n;
}

static u64 kcoll_chunk_cnt(u64 count, u32 n, u32 j)
{
	return count / n + (j < count % n ? 1 : 0);
}

static u64 kcoll_chunk_off(u64 count, u32 n, u32 j)
{
	u64 rem = count % n;

	return (u64)j * (count / n) + (j < rem ? j : rem);
}

/* Phase builders. */
static void kcoll_ph_copy(struct kcoll_phase *p, u8 sbuf, u64 soff, u8 dbuf,
			  u64 doff, u64 cnt)
{
	p->copy.src.buf = sbuf;
	p->copy.src.off = soff;
	p->copy.dst.buf = dbuf;
	p->copy.dst.off = doff;
	p->copy.cnt = cnt;
}

static void kcoll_ph_send(struct kcoll_phase *p, u32 peer, u8 buf, u64 off,
			  u64 cnt, bool fwd)
{
	p->has_send = true;
	p->send.peer = peer;
	p->send.src.buf = buf;
	p->send.src.off = off;
	p->send.cnt = cnt;
	p->send.fwd = fwd;
}

static void kcoll_ph_recv(struct kcoll_phase *p, u32 peer, u8 buf, u64 off,
			  u64 cnt)
{
	p->has_recv = true;
	p->recv.peer = peer;
	p->recv.dst.buf = buf;
	p->recv.dst.off = off;
	p->recv.cnt = cnt;
	p->recv.reduce = false;
}

static void kcoll_ph_recv_reduce(struct kcoll_phase *p, u32 peer, u8 buf,
				 u64 off, u64 cnt, u8 obuf, u64 ooff)
{
	kcoll_ph_recv(p, peer, buf, off, cnt);
	p->recv.reduce = true;
	p->recv.operand.buf = obuf;
	p->recv.operand.off = ooff;
}

/* AVG finishing step; dividing by a single rank is the identity: skipped. */
static void kcoll_ph_avg(const struct kcoll_sched_args *a,
			 struct kcoll_phase *p, u8 buf, u64 off, u64 cnt)
{
	if (a->redop != KCOLL_REDOP_AVG || a->nranks < 2 || !cnt)
		return;
	p->avg.buf = buf;
	p->avg.off = off;
	p->avg_cnt = cnt;
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
 * forward RECV as it lands.
 */
static void kcoll_sched_broadcast(const struct kcoll_sched_args *a,
				  struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank;
	u32 next = kcoll_rank_add(r, 1, n), prev = kcoll_rank_sub(r, 1, n);
	u32 pos = kcoll_rank_sub(r, a->root, n);
	u64 c = a->count;

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

/* BARRIER: phase k sends a token to rank r+2^k, receives one from r-2^k. */
static void kcoll_sched_barrier(const struct kcoll_sched_args *a, u32 k,
				struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank, d = 1U << k;

	kcoll_ph_send(p, kcoll_rank_add(r, d, n), KCOLL_SBUF_SEND, 0, 0,
		      false);
	kcoll_ph_recv(p, kcoll_rank_sub(r, d, n), KCOLL_SBUF_RECV, 0, 0);
}

/* Where this rank's input to a reduction lives. */
static u8 kcoll_sched_in(const struct kcoll_sched_args *a)
{
	return kcoll_sched_in_place(a) ? KCOLL_SBUF_RECV : KCOLL_SBUF_SEND;
}

/*
 * Recursive doubling and halving on any n ranks: p = 2^L <= n < 2p, rem =
 * n - p. Ranks 2i and 2i+1, i < rem, make virtual rank i: 2i ("away")
 * hands its data to 2i+1 (the "host") in a fold-in phase and gets the
 * result back in a fold-out phase, idle in between; rank r >= 2 rem is
 * virtual rank r - rem. Virtual rank v stands for ranks (and their blocks)
 * [lo(v), lo(v+1)), lo(v) = v + min(v, rem): consecutive virtual ranks
 * stand for consecutive ranks, so a group of them is one block range.
 */
struct kcoll_fold {
	u32 p, L, rem;
	u32 pre;	/* 1 with rem: the fold-in and fold-out phases */
	u32 v;		/* virtual rank (host or plain rank) */
	bool away, host;
};

static void kcoll_fold_init(struct kcoll_fold *f, u32 n, u32 r)
{
	f->L = kcoll_floor_log2(n);
	f->p = 1U << f->L;
	f->rem = n - f->p;
	f->pre = f->rem ? 1 : 0;
	f->away = r < 2 * f->rem && !(r & 1);
	f->host = r < 2 * f->rem && (r & 1);
	f->v = r < 2 * f->rem ? r / 2 : r - f->rem;
}

static u32 kcoll_fold_lo(const struct kcoll_fold *f, u32 v)
{
	return v + (v < f->rem ? v : f->rem);
}

/* The rank that runs virtual rank @v (the host of a pair). */
static u32 kcoll_fold_rank(const struct kcoll_fold *f, u32 v)
{
	return kcoll_fold_lo(f, v + 1) - 1;
}

/*
 * Step @i of a recursive halving over virtual ranks: the group of 2m
 * virtual ranks (m = p >> (i+1)) that holds v splits in two; v keeps the
 * half [*keep, *keep + m) that holds it and sends [*give, *give + m) to
 * its partner v ^ m. Returns the partner's rank.
 */
static u32 kcoll_halving_step(const struct kcoll_fold *f, u32 i, u32 *keep,
			      u32 *give)
{
	u32 m = f->p >> (i + 1), base = f->v & ~(2 * m - 1);

	*keep = base + (f->v & m);
	*give = base + (~f->v & m);
	return kcoll_fold_rank(f, f->v ^ m);
}

/*
 * Step @i of a recursive doubling over virtual ranks: v holds the group
 * [*mine, *mine + 2^i), its partner v ^ 2^i the group [*theirs, ...); they
 * swap them. Returns the partner's rank.
 */
static u32 kcoll_doubling_step(const struct kcoll_fold *f, u32 i, u32 *mine,
			       u32 *theirs)
{
	u32 m = 1U << i;

	*mine = f->v & ~(m - 1);
	*theirs = *mine ^ m;
	return kcoll_fold_rank(f, f->v ^ m);
}

/* Elements [off, off + cnt) of chunks [j0, j1) of count over m chunks. */
static void kcoll_chunk_range(u64 count, u32 m, u32 j0, u32 j1, u64 *off,
			      u64 *cnt)
{
	*off = kcoll_chunk_off(count, m, j0);
	*cnt = kcoll_chunk_off(count, m, j1) - *off;
}

/*
 * Fold-in of a reduction (the away rank's @cnt elements at @in into the
 * host's @dst) and fold-out (the host's result at RECV back to the away
 * rank). @last: the fold-out phase, else the fold-in one.
 */
static void kcoll_fold_phase(const struct kcoll_sched_args *a,
			     const struct kcoll_fold *f, bool last, u8 in,
			     u8 dst, u64 cnt, struct kcoll_phase *p)
{
	u32 r = a->rank;

	if (!last && f->away)
		kcoll_ph_send(p, r + 1, in, 0, cnt, false);
	else if (!last && f->host)
		kcoll_ph_recv_reduce(p, r - 1, dst, 0, cnt, in, 0);
	else if (last && f->host)
		kcoll_ph_send(p, r - 1, KCOLL_SBUF_RECV, 0, cnt, false);
	else if (last && f->away)
		kcoll_ph_recv(p, r + 1, KCOLL_SBUF_RECV, 0, cnt);
}

/*
 * ALLREDUCE by recursive doubling: step i exchanges the whole partial
 * result with virtual rank v ^ 2^i. A send must not read what the
 * concurrent receive writes, so step i reduces into RECV when L-1-i is
 * even and into TMP when it is odd (the last step into RECV), reading the
 * other one: the previous step's result, or at step 0 the input (the
 * host's fold-in result, which it reduced into the buffer that step 0
 * reads). In place, when step 0 must reduce into RECV, its copy first
 * moves the input to TMP.
 */
static u8 kcoll_rd_dst(u32 L, u32 i)
{
	return ((L - 1 - i) & 1) ? KCOLL_SBUF_TMP : KCOLL_SBUF_RECV;
}

static void kcoll_sched_allreduce_rd(const struct kcoll_sched_args *a,
				     u32 idx, struct kcoll_phase *p)
{
	struct kcoll_fold f;
	u8 in = kcoll_sched_in(a), dst, src;
	u64 c = a->count;
	u32 i, peer;

	kcoll_fold_init(&f, a->nranks, a->rank);
	if (idx < f.pre || idx >= f.pre + f.L) {
		/* The host's fold-in reduces into what step 0 reads. */
		kcoll_fold_phase(a, &f, idx >= f.pre, in,
				 (f.L & 1) ? KCOLL_SBUF_TMP : KCOLL_SBUF_RECV,
				 c, p);
		return;
	}
	if (f.away)
		return;
	i = idx - f.pre;
	dst = kcoll_rd_dst(f.L, i);
	src = dst == KCOLL_SBUF_RECV ? KCOLL_SBUF_TMP : KCOLL_SBUF_RECV;
	if (i == 0 && !f.host) {
		if (in == KCOLL_SBUF_SEND)
			src = KCOLL_SBUF_SEND;
		else if (dst == KCOLL_SBUF_TMP)
			src = KCOLL_SBUF_RECV;
		else	/* in place, reducing into RECV: input to TMP */
			kcoll_ph_copy(p, KCOLL_SBUF_RECV, 0, KCOLL_SBUF_TMP,
				      0, c);
	}
	peer = kcoll_fold_rank(&f, f.v ^ (1U << i));
	kcoll_ph_send(p, peer, src, 0, c, false);
	kcoll_ph_recv_reduce(p, peer, dst, 0, c, src, 0);
	if (i == f.L - 1)
		kcoll_ph_avg(a, p, KCOLL_SBUF_RECV, 0, c);
}

/* The low @bits bits of @x in reverse order. */
static u32 kcoll_bitrev(u32 x, u32 bits)
{
	u32 y = 0, i;

	for (i = 0; i < bits; i++)
		y |= ((x >> i) & 1) << (bits - 1 - i);
	return y;
}

/*
 * The chunk range [h, h + (p >> (i+1))) virtual rank @v keeps after step
 * @i of a nearest-first halving: step i splits the range in two by bit i
 * of v, so the kept range is numbered by v's low i+1 bits reversed.
 */
static u32 kcoll_near_half(const struct kcoll_fold *f, u32 v, u32 i)
{
	return kcoll_bitrev(v & ((2U << i) - 1), i + 1) * (f->p >> (i + 1));
}

/*
 * ALLREDUCE, Rabenseifner: reduce-scatter by recursive halving over p
 * chunks, nearest partner first (step i: virtual rank v ^ 2^i; v keeps the
 * half of its chunk range picked by bit i of v and sends the other half,
 * reducing into RECV), after which v owns chunk rev(v) (v's bits
 * reversed); then allgather by recursive doubling of chunk groups in RECV,
 * farthest partner first (step j: v ^ 2^(L-1-j), whose group is the
 * adjacent one of 2^j chunks). Partners near in rank are on the same node
 * when ranks are placed in blocks: the halves that move between nodes are
 * the small ones (a quarter of the data each way for two nodes, against
 * half with the farthest partner first). Empty halves (count < p) move
 * nothing on both ends.
 */
static void kcoll_sched_allreduce_rab(const struct kcoll_sched_args *a,
				      u32 idx, struct kcoll_phase *p)
{
	struct kcoll_fold f;
	u8 in = kcoll_sched_in(a), src;
	u64 c = a->count, koff, kcnt, soff, scnt;
	u32 i, peer, keep, give;

	kcoll_fold_init(&f, a->nranks, a->rank);
	if (idx < f.pre || idx >= f.pre + 2 * f.L) {
		kcoll_fold_phase(a, &f, idx >= f.pre, in, KCOLL_SBUF_RECV, c,
				 p);
		return;
	}
	if (f.away)
		return;
	i = idx - f.pre;
	if (i < f.L) {
		peer = kcoll_fold_rank(&f, f.v ^ (1U << i));
		keep = kcoll_near_half(&f, f.v, i);
		give = kcoll_near_half(&f, f.v ^ (1U << i), i);
		src = i == 0 && !f.host ? in : KCOLL_SBUF_RECV;
		kcoll_chunk_range(c, f.p, keep, keep + (f.p >> (i + 1)), &koff,
				  &kcnt);
		kcoll_chunk_range(c, f.p, give, give + (f.p >> (i + 1)), &soff,
				  &scnt);
		if (scnt)
			kcoll_ph_send(p, peer, src, soff, scnt, false);
		if (kcnt)
			kcoll_ph_recv_reduce(p, peer, KCOLL_SBUF_RECV, koff,
					     kcnt, src, koff);
		if (i == f.L - 1)	/* kept: chunk rev(v) */
			kcoll_ph_avg(a, p, KCOLL_SBUF_RECV, koff, kcnt);
		return;
	}
	i -= f.L;
	peer = kcoll_fold_rank(&f, f.v ^ (f.p >> (i + 1)));
	keep = kcoll_bitrev(f.v, f.L) & ~((1U << i) - 1);
	give = keep ^ (1U << i);
	kcoll_chunk_range(c, f.p, keep, keep + (1U << i), &soff, &scnt);
	kcoll_chunk_range(c, f.p, give, give + (1U << i), &koff, &kcnt);
	if (scnt)
		kcoll_ph_send(p, peer, KCOLL_SBUF_RECV, soff, scnt, false);
	if (kcnt)
		kcoll_ph_recv(p, peer, KCOLL_SBUF_RECV, koff, kcnt);
}

/*
 * What both recursive-doubling allgathers do first: out of place, phase 0
 * also copies the own block into RECV; the fold-in phase (idx < f->pre)
 * hands the away rank's block to its host. True if phase @idx is that.
 */
static bool kcoll_allgather_fold_in(const struct kcoll_sched_args *a,
				    const struct kcoll_fold *f, u32 idx,
				    struct kcoll_phase *p)
{
	bool ip = kcoll_sched_in_place(a);
	u32 r = a->rank;
	u64 c = a->count;

	if (idx == 0 && !ip)
		kcoll_ph_copy(p, KCOLL_SBUF_SEND, 0, KCOLL_SBUF_RECV,
			      (u64)r * c, c);
	if (idx >= f->pre)
		return false;
	if (f->away)
		kcoll_ph_send(p, r + 1, ip ? KCOLL_SBUF_RECV : KCOLL_SBUF_SEND,
			      ip ? (u64)r * c : 0, c, false);
	else if (f->host)
		kcoll_ph_recv(p, r - 1, KCOLL_SBUF_RECV, (u64)(r - 1) * c, c);
	return true;
}

/*
 * ALLGATHER by recursive doubling: step i swaps the blocks of the own
 * group of 2^i virtual ranks for the partner group's, in RECV. The away
 * rank hands its block to its host first and receives all of RECV last
 * (its own block included: one send instead of two). Out of place, the
 * first phase also copies the own block into RECV.
 */
static void kcoll_sched_allgather_rd(const struct kcoll_sched_args *a,
				     u32 idx, struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank, i, peer, mine, theirs;
	u64 c = a->count, lo;
	struct kcoll_fold f;

	kcoll_fold_init(&f, n, r);
	if (kcoll_allgather_fold_in(a, &f, idx, p))
		return;
	if (idx >= f.pre + f.L) {
		kcoll_fold_phase(a, &f, true, 0, 0, (u64)n * c, p);
		return;
	}
	if (f.away)
		return;
	i = idx - f.pre;
	peer = kcoll_doubling_step(&f, i, &mine, &theirs);
	lo = kcoll_fold_lo(&f, mine);
	kcoll_ph_send(p, peer, KCOLL_SBUF_RECV, lo * c,
		      (kcoll_fold_lo(&f, mine + (1U << i)) - lo) * c, false);
	lo = kcoll_fold_lo(&f, theirs);
	kcoll_ph_recv(p, peer, KCOLL_SBUF_RECV, lo * c,
		      (kcoll_fold_lo(&f, theirs + (1U << i)) - lo) * c);
}

/*
 * ALLGATHER by recursive doubling, farthest partner first: step j pairs
 * virtual rank v with v ^ (p >> (j+1)) and swaps the 2^j blocks each holds,
 * one block a phase (2^j phases; p - 1 in all, like the ring). v holds the
 * blocks v ^ x for x in the span of the distances used so far, which are
 * not contiguous, hence a phase per block; phase k of step j moves block
 * v ^ x(k) one way and w ^ x(k) the other, the same k on both ends. With
 * ranks placed in blocks per node, the steps between nodes come first,
 * while each rank holds few blocks: on two nodes a quarter of the data
 * per rank crosses (the ring: three quarters), and the rest is copied on
 * the node. A virtual block is its ranks' blocks (one, or two for a fold
 * host); fold-in and fold-out as in recursive doubling.
 */
static void kcoll_sched_allgather_ff(const struct kcoll_sched_args *a,
				     u32 idx, struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank, i, j, k, b, x, peer, u;
	u64 c = a->count, lo;
	struct kcoll_fold f;

	kcoll_fold_init(&f, n, r);
	if (kcoll_allgather_fold_in(a, &f, idx, p))
		return;
	if (idx >= f.pre + f.p - 1) {
		kcoll_fold_phase(a, &f, true, 0, 0, (u64)n * c, p);
		return;
	}
	if (f.away)
		return;
	i = idx - f.pre;
	j = kcoll_floor_log2(i + 1);
	k = i + 1 - (1U << j);
	for (x = 0, b = 0; b < j; b++)
		if (k & (1U << b))
			x |= f.p >> (b + 1);
	peer = kcoll_fold_rank(&f, f.v ^ (f.p >> (j + 1)));
	u = f.v ^ x;
	lo = kcoll_fold_lo(&f, u);
	kcoll_ph_send(p, peer, KCOLL_SBUF_RECV, lo * c,
		      (kcoll_fold_lo(&f, u + 1) - lo) * c, false);
	u ^= f.p >> (j + 1);
	lo = kcoll_fold_lo(&f, u);
	kcoll_ph_recv(p, peer, KCOLL_SBUF_RECV, lo * c,
		      (kcoll_fold_lo(&f, u + 1) - lo) * c);
}

/*
 * REDUCE_SCATTER by recursive halving of the block range: step i keeps the
 * half of the current range that holds the own block and sends the other
 * half. Partial sums live in TMP, laid out from the first block this rank
 * keeps after step 0 (the host's TMP holds all n blocks, from its fold-in);
 * the last step reduces straight into the result (RECV, or in place SEND
 * block r), but on the host, which keeps two blocks: it copies its own one
 * out and sends its away rank's in the fold-out phase.
 */
static void kcoll_sched_rs_halving(const struct kcoll_sched_args *a,
				   u32 idx, struct kcoll_phase *p)
{
	bool ip = kcoll_sched_in_place(a);
	u32 n = a->nranks, r = a->rank, i, peer, keep, give, m;
	u8 fbuf = ip ? KCOLL_SBUF_SEND : KCOLL_SBUF_RECV, src;
	u64 c = a->count, foff = ip ? (u64)r * c : 0;
	u64 koff, kcnt, soff, sbase, tbase;
	struct kcoll_fold f;

	kcoll_fold_init(&f, n, r);
	if (idx < f.pre) {
		if (f.away)
			kcoll_ph_send(p, r + 1, KCOLL_SBUF_SEND, 0, (u64)n * c,
				      false);
		else if (f.host)
			kcoll_ph_recv_reduce(p, r - 1, KCOLL_SBUF_TMP, 0,
					     (u64)n * c, KCOLL_SBUF_SEND, 0);
		return;
	}
	if (idx >= f.pre + f.L) {
		if (f.host) {
			kcoll_ph_copy(p, KCOLL_SBUF_TMP, (u64)r * c, fbuf, foff,
				      c);
			kcoll_ph_send(p, r - 1, KCOLL_SBUF_TMP,
				      (u64)(r - 1) * c, c, false);
		} else if (f.away) {
			kcoll_ph_recv(p, r + 1, fbuf, foff, c);
		}
		return;
	}
	if (f.away)
		return;
	i = idx - f.pre;
	m = f.p >> (i + 1);
	peer = kcoll_halving_step(&f, i, &keep, &give);
	koff = kcoll_fold_lo(&f, keep) * c;
	kcnt = kcoll_fold_lo(&f, keep + m) * c - koff;
	soff = kcoll_fold_lo(&f, give) * c;
	tbase = f.host ? 0 : kcoll_fold_lo(&f, f.v & (f.p >> 1)) * c;
	src = i == 0 && !f.host ? KCOLL_SBUF_SEND : KCOLL_SBUF_TMP;
	sbase = src == KCOLL_SBUF_TMP ? tbase : 0;
	kcoll_ph_send(p, peer, src, soff - sbase,
		      kcoll_fold_lo(&f, give + m) * c - soff, false);
	if (i == f.L - 1 && !f.host) {	/* kept: block r */
		kcoll_ph_recv_reduce(p, peer, fbuf, foff, kcnt, src,
				     koff - sbase);
		kcoll_ph_avg(a, p, fbuf, foff, kcnt);
		return;
	}
	kcoll_ph_recv_reduce(p, peer, KCOLL_SBUF_TMP, koff - tbase, kcnt, src,
			     koff - sbase);
	if (i == f.L - 1)	/* the host's two blocks */
		kcoll_ph_avg(a, p, KCOLL_SBUF_TMP, koff, kcnt);
}

static u64 kcoll_sched_tmp_rs_halving(const struct kcoll_sched_args *a)
{
	struct kcoll_fold f;
	u32 k0;

	kcoll_fold_init(&f, a->nranks, a->rank);
	if (f.host)
		return (u64)a->nranks * a->count;
	if (f.away || f.L < 2)
		return 0;
	k0 = f.v & (f.p >> 1);
	return (u64)(kcoll_fold_lo(&f, k0 + (f.p >> 1)) -
		     kcoll_fold_lo(&f, k0)) * a->count;
}

/*
 * Binomial trees over relative ranks v = rank - root. Broadcast: in step k
 * the ranks v < 2^k send to v + 2^k (< n) and the ranks 2^k <= v < 2^k+1
 * receive. Reduce, the mirror image: in step k the ranks v = 2^k mod 2^k+1
 * send their partial result to v - 2^k, which reduces it into @acc (with
 * the own input @in as operand at its first receive, step 0); a rank sends
 * @acc if it has received anything (v + 1 < n), else its input.
 */
static void kcoll_binomial_bcast(const struct kcoll_sched_args *a, u32 root,
				 u32 k, u8 src, struct kcoll_phase *p)
{
	u32 n = a->nranks, v = kcoll_rank_sub(a->rank, root, n), d = 1U << k;

	if (v < d && v + d < n)
		kcoll_ph_send(p, kcoll_rank_add(a->rank, d, n), src, 0,
			      a->count, false);
	else if (v >= d && v < 2 * d)
		kcoll_ph_recv(p, kcoll_rank_sub(a->rank, d, n),
			      KCOLL_SBUF_RECV, 0, a->count);
}

static void kcoll_binomial_reduce(const struct kcoll_sched_args *a, u32 root,
				  u32 k, u8 in, u8 acc, struct kcoll_phase *p)
{
	u32 n = a->nranks, v = kcoll_rank_sub(a->rank, root, n), d = 1U << k;

	if ((v & (2 * d - 1)) == d) {
		kcoll_ph_send(p, kcoll_rank_sub(a->rank, d, n),
			      k && v + 1 < n ? acc : in, 0, a->count, false);
	} else if (!(v & (2 * d - 1)) && v + d < n) {
		kcoll_ph_recv_reduce(p, kcoll_rank_add(a->rank, d, n), acc, 0,
				     a->count, k ? acc : in, 0);
		if (v == 0 && 2 * d >= n)	/* the root's last step */
			kcoll_ph_avg(a, p, acc, 0, a->count);
	}
}

static void kcoll_sched_binomial(const struct kcoll_sched_args *a, u32 idx,
				 struct kcoll_phase *p)
{
	u32 lc = kcoll_ceil_log2(a->nranks);
	bool ip = kcoll_sched_in_place(a);

	switch (a->opcode) {
	case KCOLL_OP_BROADCAST:
		if (idx == 0 && a->rank == a->root && !ip)
			kcoll_ph_copy(p, KCOLL_SBUF_SEND, 0, KCOLL_SBUF_RECV, 0,
				      a->count);
		kcoll_binomial_bcast(a, a->root, idx, KCOLL_SBUF_RECV, p);
		break;
	case KCOLL_OP_REDUCE:
		kcoll_binomial_reduce(a, a->root, idx, kcoll_sched_in(a),
				      a->rank == a->root ? KCOLL_SBUF_RECV :
				      KCOLL_SBUF_TMP, p);
		break;
	default:	/* ALLREDUCE: reduce to rank 0, broadcast from it */
		if (idx < lc)
			kcoll_binomial_reduce(a, 0, idx, kcoll_sched_in(a),
					      KCOLL_SBUF_RECV, p);
		else
			kcoll_binomial_bcast(a, 0, idx - lc, KCOLL_SBUF_RECV,
					     p);
		break;
	}
}

/*
 * ALLTOALL, Bruck. TMP holds W (n blocks), P and Q (n/2 blocks each).
 * Phases 0 and 1 rotate the input into W: W[j] = block for rank r + j.
 * Step k (0 <= k < Lc) sends every W[j] with bit k of j set to rank r + 2^k
 * and receives the same j's from rank r - 2^k: the j's form runs of 2^k
 * (the last one shorter) every 2^(k+1), packed into P by one copy-only
 * phase per run, the last copy riding in the phase of the exchange, which
 * receives into Q; one copy-only phase per run then unpacks Q into W (but
 * after the last step). Then W[j] holds the block from rank r - j: n
 * copy-only phases put each into RECV (from Q for the j's of the last step).
 */
static u32 kcoll_bruck_runs(u32 n, u32 k)
{
	return (n + (1U << k) - 1) >> (k + 1);
}

static u32 kcoll_bruck_nph(u32 n)
{
	u32 lc = kcoll_ceil_log2(n), k, nph = 2 + n;

	for (k = 0; k < lc; k++)
		nph += kcoll_bruck_runs(n, k) * (k + 1 < lc ? 2 : 1);
	return nph;
}

static void kcoll_sched_alltoall_bruck(const struct kcoll_sched_args *a,
				       u32 idx, struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank, lc = kcoll_ceil_log2(n), k, d, j, len;
	u8 in = kcoll_sched_in(a);
	u64 c = a->count, P = (u64)n * c, Q = P + (u64)(n / 2) * c;

	if (idx == 0) {
		kcoll_ph_copy(p, in, (u64)r * c, KCOLL_SBUF_TMP, 0,
			      (u64)(n - r) * c);
		return;
	}
	if (idx == 1) {
		if (r)
			kcoll_ph_copy(p, in, 0, KCOLL_SBUF_TMP,
				      (u64)(n - r) * c, (u64)r * c);
		return;
	}
	idx -= 2;
	for (k = 0; k < lc; k++) {
		u32 runs = kcoll_bruck_runs(n, k);

		d = 1U << k;
		if (idx < runs * (k + 1 < lc ? 2 : 1)) {
			bool pack = idx < runs;
			u32 t = pack ? idx : idx - runs;

			j = 2 * d * t + d;
			len = n - j < d ? n - j : d;
			if (pack)
				kcoll_ph_copy(p, KCOLL_SBUF_TMP, (u64)j * c,
					      KCOLL_SBUF_TMP,
					      P + (u64)t * d * c,
					      (u64)len * c);
			else
				kcoll_ph_copy(p, KCOLL_SBUF_TMP,
					      Q + (u64)t * d * c,
					      KCOLL_SBUF_TMP, (u64)j * c,
					      (u64)len * c);
			if (t == runs - 1 && pack) {
				/* j + len - d: the j's with bit k set */
				u64 h = (u64)(t * d + len) * c;

				kcoll_ph_send(p, kcoll_rank_add(r, d, n),
					      KCOLL_SBUF_TMP, P, h, false);
				kcoll_ph_recv(p, kcoll_rank_sub(r, d, n),
					      KCOLL_SBUF_TMP, Q, h);
			}
			return;
		}
		idx -= runs * (k + 1 < lc ? 2 : 1);
	}
	j = idx;
	d = 1U << (lc - 1);
	kcoll_ph_copy(p, KCOLL_SBUF_TMP, j >= d ? Q + (u64)(j - d) * c :
		      (u64)j * c, KCOLL_SBUF_RECV,
		      (u64)kcoll_rank_sub(r, j, n) * c, c);
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
	(void)idx;
	kcoll_sched_broadcast(a, p);
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
		{ KCOLL_ALGO_CHAIN, kcoll_nph_one,
		  kcoll_sched_broadcast_chain, NULL },
		{ KCOLL_ALGO_BINOMIAL, kcoll_nph_log2, kcoll_sched_binomial, NULL }) },
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

	if (!kcoll_colls[a->opcode].no_data) {
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

void kcoll_sched_phase(const struct kcoll_sched_args *a, u32 idx,
		       struct kcoll_phase *p)
{
	const struct kcoll_algo_def *d;

	*p = (struct kcoll_phase){ 0 };
	if (idx >= kcoll_sched_nphases(a))
		return;
	d = kcoll_algo_def(a->opcode, kcoll_sched_algo(a));
	if (a->nranks == 1 && !kcoll_colls[a->opcode].no_data) {
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
u64 kcoll_sched_send_count(const struct kcoll_sched_args *a)
{
	const struct kcoll_shape *d = kcoll_shape(a->opcode);
	unsigned long long c;

	if (kcoll_sched_check(a) ||
	    (kcoll_sched_in_place(a) && d->in_place != KCOLL_IN_PLACE_SCATTER) ||
	    kcoll_shape_count(d->send, a->rank, a->root, a->nranks, a->count,
			      &c))
		return 0;
	return c;
}

u64 kcoll_sched_recv_count(const struct kcoll_sched_args *a)
{
	const struct kcoll_shape *d = kcoll_shape(a->opcode);
	unsigned long long c;

	if (kcoll_sched_check(a) ||
	    (kcoll_sched_in_place(a) && d->in_place == KCOLL_IN_PLACE_SCATTER) ||
	    kcoll_shape_count(d->recv, a->rank, a->root, a->nranks, a->count,
			      &c))
		return 0;
	return c;
}
