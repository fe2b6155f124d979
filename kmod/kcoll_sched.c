// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll schedules: one rank's phases for each collective (the execution
 * model is described in kcoll_sched.h). Plain C, built into the module and
 * into the host unit tests, which run every schedule of every rank on an
 * in-memory model.
 *
 * One schedule per collective, bandwidth-optimal for large messages:
 *  ALLREDUCE       ring reduce-scatter, then ring allgather, over n chunks
 *                  of the buffer: 2(n-1) phases
 *  REDUCE          pipelined chain root+1 -> root+2 -> ... -> root: 1 phase
 *  BROADCAST       pipelined chain root -> root+1 -> ... -> root-1: 1 phase
 *  ALLGATHER       ring: n-1 phases (the own block's copy rides in the
 *                  first one)
 *  REDUCE_SCATTER  ring, partial sums double-buffered in TMP: n-1 phases
 *  ALLTOALL        pairwise exchange, phase k with ranks rank +- k: n-1
 *                  phases (the own block's copy rides in the first one)
 *  SEND / RECV     1 phase, one transfer (also with count 0)
 *  BARRIER         dissemination, empty tokens: ceil(log2 n) phases
 * A collective with count 0 has no phase; with n == 1 it has at most one
 * (the out-of-place copy). Ring schedules keep their phase count when
 * count < n: the phases whose chunks are empty have no transfer, and both
 * ends of every transfer compute the same chunk, so they agree.
 *
 * Chunks (ALLREDUCE): chunk j of count elements over n ranks has
 * count/n + (j < count%n) elements, the chunks laid out in order.
 * Ring direction: every rank sends to rank+1 and receives from rank-1.
 */
#include "kcoll_sched.h"

/* Bound on n*count: every element offset and count fits u64 comfortably. */
#define KCOLL_SCHED_MAX_ELEMS	(1ULL << 62)

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
	if (!a->nranks || a->nranks > KCOLL_MAX_RANKS || a->rank >= a->nranks)
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
	return 0;
}

/*
 * Whether this rank runs in place: only where the uapi gives in place a
 * meaning for this rank (the root of REDUCE and BROADCAST, every rank of
 * the symmetric collectives); elsewhere the flag is ignored.
 */
static bool kcoll_sched_in_place(const struct kcoll_sched_args *a)
{
	switch (a->opcode) {
	case KCOLL_OP_ALLREDUCE:
	case KCOLL_OP_ALLGATHER:
	case KCOLL_OP_REDUCE_SCATTER:
	case KCOLL_OP_ALLTOALL:
		return a->in_place;
	case KCOLL_OP_REDUCE:
	case KCOLL_OP_BROADCAST:
		return a->in_place && a->rank == a->root;
	default:
		return false;
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

/* ceil(log2 n) for n >= 1. */
static u32 kcoll_ceil_log2(u32 n)
{
	u32 k = 0;

	while (k < 32 && (1ULL << k) < n)
		k++;
	return k;
}

u32 kcoll_sched_nphases(const struct kcoll_sched_args *a)
{
	if (kcoll_sched_check(a))
		return 0;
	switch (a->opcode) {
	case KCOLL_OP_SEND:
	case KCOLL_OP_RECV:
		return 1;
	case KCOLL_OP_BARRIER:
		return kcoll_ceil_log2(a->nranks);
	default:
		break;
	}
	if (!a->count)
		return 0;
	if (a->nranks == 1)	/* at most the out-of-place copy */
		return kcoll_sched_in_place(a) ? 0 : 1;
	switch (a->opcode) {
	case KCOLL_OP_ALLREDUCE:
		return 2 * (a->nranks - 1);
	case KCOLL_OP_REDUCE:
	case KCOLL_OP_BROADCAST:
		return 1;
	default:		/* ALLGATHER, REDUCE_SCATTER, ALLTOALL */
		return a->nranks - 1;
	}
}

void kcoll_sched_phase(const struct kcoll_sched_args *a, u32 idx,
		       struct kcoll_phase *p)
{
	*p = (struct kcoll_phase){ 0 };
	if (idx >= kcoll_sched_nphases(a))
		return;

	switch (a->opcode) {
	case KCOLL_OP_SEND:
		kcoll_ph_send(p, a->root, KCOLL_SBUF_SEND, 0, a->count, false);
		return;
	case KCOLL_OP_RECV:
		kcoll_ph_recv(p, a->root, KCOLL_SBUF_RECV, 0, a->count);
		return;
	case KCOLL_OP_BARRIER:
		kcoll_sched_barrier(a, idx, p);
		return;
	default:
		break;
	}

	if (a->nranks == 1) {
		/* Not in place (else no phase): the own input to RECV. */
		kcoll_ph_copy(p, KCOLL_SBUF_SEND, 0, KCOLL_SBUF_RECV, 0,
			      a->count);
		return;
	}

	switch (a->opcode) {
	case KCOLL_OP_ALLREDUCE:
		kcoll_sched_allreduce(a, idx, p);
		break;
	case KCOLL_OP_REDUCE:
		kcoll_sched_reduce(a, p);
		break;
	case KCOLL_OP_BROADCAST:
		kcoll_sched_broadcast(a, p);
		break;
	case KCOLL_OP_ALLGATHER:
		kcoll_sched_allgather(a, idx, p);
		break;
	case KCOLL_OP_REDUCE_SCATTER:
		kcoll_sched_reduce_scatter(a, idx, p);
		break;
	case KCOLL_OP_ALLTOALL:
		kcoll_sched_alltoall(a, idx, p);
		break;
	}
}

u64 kcoll_sched_tmp_count(const struct kcoll_sched_args *a)
{
	u32 n = a->nranks;

	if (!kcoll_sched_nphases(a) || n == 1)
		return 0;
	switch (a->opcode) {
	case KCOLL_OP_REDUCE: {
		u32 pos = kcoll_rank_sub(a->rank, kcoll_rank_add(a->root, 1, n),
					 n);

		return pos > 0 && pos < n - 1 ? a->count : 0;
	}
	case KCOLL_OP_REDUCE_SCATTER:
		/* Phases 0..n-3 reduce into TMP halves 0, 1, 0, ... */
		return n >= 4 ? 2 * a->count : n == 3 ? a->count : 0;
	case KCOLL_OP_ALLTOALL:
		return kcoll_sched_in_place(a) ? (u64)n * a->count : 0;
	default:
		return 0;
	}
}

u64 kcoll_sched_send_count(const struct kcoll_sched_args *a)
{
	u64 c = a->count;
	bool ip = kcoll_sched_in_place(a);

	if (kcoll_sched_check(a))
		return 0;
	switch (a->opcode) {
	case KCOLL_OP_ALLREDUCE:
	case KCOLL_OP_ALLGATHER:
		return ip ? 0 : c;
	case KCOLL_OP_REDUCE:
		return ip ? 0 : c;	/* in place only at the root */
	case KCOLL_OP_BROADCAST:
		return a->rank == a->root && !ip ? c : 0;
	case KCOLL_OP_REDUCE_SCATTER:
		return (u64)a->nranks * c;
	case KCOLL_OP_ALLTOALL:
		return ip ? 0 : (u64)a->nranks * c;
	case KCOLL_OP_SEND:
		return c;
	default:		/* RECV, BARRIER */
		return 0;
	}
}

u64 kcoll_sched_recv_count(const struct kcoll_sched_args *a)
{
	u64 c = a->count;

	if (kcoll_sched_check(a))
		return 0;
	switch (a->opcode) {
	case KCOLL_OP_ALLREDUCE:
	case KCOLL_OP_BROADCAST:
	case KCOLL_OP_RECV:
		return c;
	case KCOLL_OP_REDUCE:
		return a->rank == a->root ? c : 0;
	case KCOLL_OP_ALLGATHER:
	case KCOLL_OP_ALLTOALL:
		return (u64)a->nranks * c;
	case KCOLL_OP_REDUCE_SCATTER:
		return kcoll_sched_in_place(a) ? 0 : c;
	default:		/* SEND, BARRIER */
		return 0;
	}
}
