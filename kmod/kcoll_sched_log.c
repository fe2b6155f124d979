// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll schedules, the logarithmic algorithms: recursive doubling and
 * halving (allreduce, allgather, reduce-scatter), Rabenseifner, farthest
 * first, binomial trees and Bruck's alltoall. Plain C. The execution model
 * and the conventions (chunks, folding of non-powers of two) are described
 * at the top of kcoll_sched.c; which algorithm serves which collective is
 * its table, kcoll_colls[].
 */
#include "kcoll_sched_int.h"

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

void kcoll_sched_allreduce_rd(const struct kcoll_sched_args *a,
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
void kcoll_sched_allreduce_rab(const struct kcoll_sched_args *a,
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
void kcoll_sched_allgather_rd(const struct kcoll_sched_args *a,
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
void kcoll_sched_allgather_ff(const struct kcoll_sched_args *a,
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
void kcoll_sched_rs_halving(const struct kcoll_sched_args *a,
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

u64 kcoll_sched_tmp_rs_halving(const struct kcoll_sched_args *a)
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

/*
 * Broadcast's confirmation, step k of the tree run backwards: the ranks
 * 2^k <= v < 2^k+1 send their parent v - 2^k an empty token (by then they
 * have their data and, from the earlier confirmation phases, the tokens
 * of their own subtree), the ranks v < 2^k with a child v + 2^k receive.
 */
static void kcoll_binomial_bcast_ack(const struct kcoll_sched_args *a,
				     u32 root, u32 k, struct kcoll_phase *p)
{
	u32 n = a->nranks, v = kcoll_rank_sub(a->rank, root, n), d = 1U << k;

	if (v >= d && v < 2 * d)
		kcoll_ph_send(p, kcoll_rank_sub(a->rank, d, n),
			      KCOLL_SBUF_RECV, 0, 0, false);
	else if (v < d && v + d < n)
		kcoll_ph_recv(p, kcoll_rank_add(a->rank, d, n),
			      KCOLL_SBUF_RECV, 0, 0);
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

void kcoll_sched_binomial(const struct kcoll_sched_args *a, u32 idx,
			  struct kcoll_phase *p)
{
	u32 lc = kcoll_ceil_log2(a->nranks);
	bool ip = kcoll_sched_in_place(a);

	switch (a->opcode) {
	case KCOLL_OP_BROADCAST:
		if (idx >= lc) {	/* the confirmation */
			kcoll_binomial_bcast_ack(a, a->root, 2 * lc - 1 - idx,
						 p);
			break;
		}
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
 * GATHER and SCATTER, binomial: Lc + 2 phases. With v = rank - root (mod
 * n), rank v's subtree is the ranks [v, v + sz(v)), sz(v) = min(lowbit(v),
 * n - v) (the root's: all n). The blocks of a subtree travel together, in
 * v order: in a scratch of its root (TMP, block j of rank v + j at j), but
 * where the subtree is one rank, which uses its own buffer.
 *
 * GATHER: step k (phase k, d = 2^k): a rank with v mod 2d == d sends its
 * subtree's blocks to v - d, which receives them at block d of its
 * scratch. The root's scratch holds the blocks of v = 1..n-1 at v - 1 (at
 * root 0, RECV itself stands for it, block v at v); phases Lc and Lc + 1
 * copy its two halves into RECV, where v wraps past rank n-1. A rank
 * with children copies its own block to scratch block 0 in phase 0.
 *
 * SCATTER runs it backwards: phases 0 and 1 copy the root's SEND into its
 * scratch in v order (root 0: none); step i (phase 2 + i, d = 2^(Lc-1-i))
 * a rank with v mod 2d == 0 and v + d < n sends blocks [v + d, v + d +
 * sz(v + d)) to v + d, which receives them into its scratch (straight
 * into RECV if sz is 1) and copies its own block from there to RECV in
 * the next phase. The root copies its own block (out of place) in phase
 * 0 of a gather, phase 2 of a scatter.
 */
static u32 kcoll_gs_sz(u32 n, u32 v)
{
	u32 low = v & -v;

	return n - v < low ? n - v : low;
}

/*
 * Does rank @v have a child @v + @d in the step of distance @d? Then the
 * child's subtree's elements (returned, else 0) sit in *@buf at *@off on
 * @v: its scratch at block d, or at the root block d - 1 of its scratch
 * (root 0: @ubuf, the user's buffer, at block d).
 */
static u64 kcoll_gs_child(const struct kcoll_sched_args *a, u32 v, u32 d,
			  u8 ubuf, u8 *buf, u64 *off)
{
	u32 n = a->nranks;

	if ((v & (2 * d - 1)) || v + d >= n)
		return 0;
	*buf = v || a->root ? KCOLL_SBUF_TMP : ubuf;
	*off = (u64)(v || !a->root ? d : d - 1) * a->count;
	return (u64)kcoll_gs_sz(n, v + d) * a->count;
}

void kcoll_sched_gather_binomial(const struct kcoll_sched_args *a, u32 idx,
				 struct kcoll_phase *p)
{
	u32 n = a->nranks, v = kcoll_rank_sub(a->rank, a->root, n);
	u32 lc = kcoll_ceil_log2(n), d = 1U << idx;
	u64 c = a->count, tail = n - a->root;	/* relative 0 .. tail-1 */
	u64 off, cnt;
	u8 buf;

	if (idx >= lc) {	/* the root's scratch into RECV */
		if (v || !a->root)
			return;
		if (idx == lc)
			kcoll_ph_copy(p, KCOLL_SBUF_TMP, 0, KCOLL_SBUF_RECV,
				      (u64)(a->root + 1) * c, (tail - 1) * c);
		else
			kcoll_ph_copy(p, KCOLL_SBUF_TMP, (tail - 1) * c,
				      KCOLL_SBUF_RECV, 0, (u64)a->root * c);
		return;
	}
	if (idx == 0 && !v && !kcoll_sched_in_place(a))
		kcoll_ph_copy(p, KCOLL_SBUF_SEND, 0, KCOLL_SBUF_RECV,
			      (u64)a->root * c, c);
	else if (idx == 0 && v && kcoll_gs_sz(n, v) > 1)
		kcoll_ph_copy(p, KCOLL_SBUF_SEND, 0, KCOLL_SBUF_TMP, 0, c);
	if (v && (v & (2 * d - 1)) == d) {
		u32 sz = kcoll_gs_sz(n, v);

		kcoll_ph_send(p, kcoll_rank_sub(a->rank, d, n),
			      sz > 1 ? KCOLL_SBUF_TMP : KCOLL_SBUF_SEND, 0,
			      (u64)sz * c, false);
	} else {
		cnt = kcoll_gs_child(a, v, d, KCOLL_SBUF_RECV, &buf, &off);
		if (cnt)
			kcoll_ph_recv(p, kcoll_rank_add(a->rank, d, n), buf,
				      off, cnt);
	}
}

void kcoll_sched_scatter_binomial(const struct kcoll_sched_args *a, u32 idx,
				  struct kcoll_phase *p)
{
	u32 n = a->nranks, v = kcoll_rank_sub(a->rank, a->root, n);
	u32 lc = kcoll_ceil_log2(n), i, d;
	u64 c = a->count, tail = n - a->root;
	u64 off, cnt;
	u8 buf;

	if (idx < 2) {		/* the root's SEND into its scratch */
		if (v || !a->root)
			return;
		if (idx == 0)
			kcoll_ph_copy(p, KCOLL_SBUF_SEND, (u64)(a->root + 1) * c,
				      KCOLL_SBUF_TMP, 0, (tail - 1) * c);
		else
			kcoll_ph_copy(p, KCOLL_SBUF_SEND, 0, KCOLL_SBUF_TMP,
				      (tail - 1) * c, (u64)a->root * c);
		return;
	}
	i = idx - 2;
	d = 1U << (lc - 1 - i);
	if (!v && i == 0 && !kcoll_sched_in_place(a))
		kcoll_ph_copy(p, KCOLL_SBUF_SEND, (u64)a->root * c,
			      KCOLL_SBUF_RECV, 0, c);
	/* The step after a rank with children received its subtree. */
	if (v && kcoll_gs_sz(n, v) > 1 && (v & -v) == 2 * d)
		kcoll_ph_copy(p, KCOLL_SBUF_TMP, 0, KCOLL_SBUF_RECV, 0, c);
	if (v && (v & (2 * d - 1)) == d) {
		u32 sz = kcoll_gs_sz(n, v);

		kcoll_ph_recv(p, kcoll_rank_sub(a->rank, d, n),
			      sz > 1 ? KCOLL_SBUF_TMP : KCOLL_SBUF_RECV, 0,
			      (u64)sz * c);
	} else {
		cnt = kcoll_gs_child(a, v, d, KCOLL_SBUF_SEND, &buf, &off);
		if (cnt)
			kcoll_ph_send(p, kcoll_rank_add(a->rank, d, n), buf,
				      off, cnt, false);
	}
}

u64 kcoll_sched_tmp_gs_binomial(const struct kcoll_sched_args *a)
{
	u32 n = a->nranks, v = kcoll_rank_sub(a->rank, a->root, n);

	if (!v)
		return a->root ? (u64)(n - 1) * a->count : 0;
	return kcoll_gs_sz(n, v) > 1 ? (u64)kcoll_gs_sz(n, v) * a->count : 0;
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

u32 kcoll_bruck_nph(u32 n)
{
	u32 lc = kcoll_ceil_log2(n), k, nph = 2 + n;

	for (k = 0; k < lc; k++)
		nph += kcoll_bruck_runs(n, k) * (k + 1 < lc ? 2 : 1);
	return nph;
}

void kcoll_sched_alltoall_bruck(const struct kcoll_sched_args *a,
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
