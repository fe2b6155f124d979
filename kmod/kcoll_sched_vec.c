// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll schedules of the v-variants: ALLGATHERV, REDUCE_SCATTERV and
 * ALLTOALLV, whose blocks have a count (and a displacement) per rank from
 * a table (uapi struct kcoll_vec). Plain C like kcoll_sched.c, whose
 * execution model they follow:
 *  ALLGATHERV       ring: phase s sends block r-s (the own input at s = 0)
 *                   and receives block r-s-1, at the table's
 *                   displacements; out of place the first phase copies
 *                   the own block: n-1 phases
 *  REDUCE_SCATTERV  ring: phase s sends the partial result of block r-s-1
 *                   and receive-reduces block r-s-2 with the own input
 *                   block, into the halves of TMP (each of the largest
 *                   block's count) or, last, into RECV: n-1 phases
 *  ALLTOALLV        pairwise: phase k-1 sends rank r+k its block and
 *                   receives rank r-k's: n-1 phases
 * Block j's count is the same on both ends of every transfer when the
 * tables agree (what the signatures check), so a transfer of a zero block
 * is left out on both. With one rank, at most the own block's copy.
 * REDUCE_SCATTERV's block j starts at the sum of counts[0..j) of the send
 * buffer: from the offsets kcoll_sched_vec_check() kept where the caller
 * gave room for them (the engine does), else summed per phase built.
 */
#include "kcoll_sched_int.h"

static u64 kcoll_vec_sig_all(const struct kcoll_sched_args *a);
static u64 kcoll_vec_max(const u64 *c, u32 n);

int kcoll_sched_vec_check(struct kcoll_sched_args *a)
{
	const struct kcoll_shape *d = kcoll_shape(a->opcode);
	u64 i, words;

	if (!d || !d->vec)
		return a->vec ? -EINVAL : 0;
	if (!a->vec || a->count)
		return -EINVAL;
	words = (u64)d->vec * a->nranks;
	for (i = 0; i < words; i++)
		if (a->vec[i] > KCOLL_VEC_ELEMS_MAX)
			return -ERANGE;
	if (a->opcode == KCOLL_OP_ALLTOALLV &&
	    kcoll_vec_arr(a, 0)[a->rank] != kcoll_vec_arr(a, 2)[a->rank])
		return -EINVAL;
	a->vec_sig = kcoll_vec_sig_all(a);
	a->vec_max = kcoll_vec_max(kcoll_vec_arr(a, 0), a->nranks);
	if (a->vec_pre && a->opcode == KCOLL_OP_REDUCE_SCATTERV) {
		u64 at = 0;
		u32 j;

		for (j = 0; j < a->nranks; j++) {
			a->vec_pre[j] = at;
			at += a->vec[j];
		}
	}
	return 0;
}

bool kcoll_sched_vec_in_place(const struct kcoll_sched_args *a, u64 esize,
			      u64 send_addr, u64 recv_addr)
{
	if (a->opcode != KCOLL_OP_ALLGATHERV || !a->vec)
		return false;
	/* kcoll_sched_vec_check() passed: displs[rank] <= 2^48, and
	 * esize <= 16: no overflow. */
	return send_addr == recv_addr + kcoll_vec_arr(a, 1)[a->rank] * esize;
}

/* SplitMix64's finaliser: a good 64-bit mix of @x. */
static u64 kcoll_vec_mix(u64 x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static u64 kcoll_vec_hash(u64 h, u64 x)
{
	return kcoll_vec_mix(h + 0x9e3779b97f4a7c15ULL + x);
}

/* A hash of the counts every rank must hold alike. */
static u64 kcoll_vec_sig_all(const struct kcoll_sched_args *a)
{
	const u64 *c = kcoll_vec_arr(a, 0);
	u64 h = a->opcode;
	u32 j;

	for (j = 0; j < a->nranks; j++)
		h = kcoll_vec_hash(h, c[j]);
	return h;
}

static u64 kcoll_vec_sig_pair(u64 to, u64 from)
{
	return kcoll_vec_hash(kcoll_vec_hash(KCOLL_OP_ALLTOALLV, to), from);
}

u64 kcoll_sched_sig(const struct kcoll_sched_args *a, u32 peer)
{
	if (!a->vec || peer >= a->nranks)
		return a->count;
	if (a->opcode == KCOLL_OP_ALLTOALLV)
		return kcoll_vec_sig_pair(kcoll_vec_arr(a, 0)[peer],
					  kcoll_vec_arr(a, 2)[peer]);
	return a->vec_sig;
}

u64 kcoll_sched_sig_peer(const struct kcoll_sched_args *a, u32 peer)
{
	if (!a->vec || peer >= a->nranks)
		return a->count;
	if (a->opcode == KCOLL_OP_ALLTOALLV)
		return kcoll_vec_sig_pair(kcoll_vec_arr(a, 2)[peer],
					  kcoll_vec_arr(a, 0)[peer]);
	return a->vec_sig;
}

static u64 kcoll_vec_sum(const u64 *c, u32 n)
{
	u64 s = 0;
	u32 j;

	for (j = 0; j < n; j++)
		s += c[j];
	return s;
}

/* The end of the furthest nonempty block (a zero block's displacement
 * does not matter, as in MPI). */
static u64 kcoll_vec_extent(const u64 *cnt, const u64 *displ, u32 n)
{
	u64 e = 0;
	u32 j;

	for (j = 0; j < n; j++)
		if (cnt[j] && displ[j] + cnt[j] > e)
			e = displ[j] + cnt[j];
	return e;
}

u64 kcoll_sched_total(const struct kcoll_sched_args *a)
{
	if (!a->vec)
		return a->count;
	return kcoll_vec_sum(kcoll_vec_arr(a, a->opcode == KCOLL_OP_ALLTOALLV ?
					   2 : 0), a->nranks);
}

u64 kcoll_sched_vec_send_count(const struct kcoll_sched_args *a)
{
	u32 n = a->nranks;

	switch (a->opcode) {
	case KCOLL_OP_ALLGATHERV:
		return kcoll_sched_in_place(a) ? 0 :
		       kcoll_vec_arr(a, 0)[a->rank];
	case KCOLL_OP_REDUCE_SCATTERV:
		return kcoll_vec_sum(kcoll_vec_arr(a, 0), n);
	case KCOLL_OP_ALLTOALLV:
		return kcoll_vec_extent(kcoll_vec_arr(a, 0),
					kcoll_vec_arr(a, 1), n);
	default:
		return 0;
	}
}

u64 kcoll_sched_vec_recv_count(const struct kcoll_sched_args *a)
{
	u32 n = a->nranks;

	switch (a->opcode) {
	case KCOLL_OP_ALLGATHERV:
		return kcoll_vec_extent(kcoll_vec_arr(a, 0),
					kcoll_vec_arr(a, 1), n);
	case KCOLL_OP_REDUCE_SCATTERV:
		return kcoll_vec_arr(a, 0)[a->rank];
	case KCOLL_OP_ALLTOALLV:
		return kcoll_vec_extent(kcoll_vec_arr(a, 2),
					kcoll_vec_arr(a, 3), n);
	default:
		return 0;
	}
}

void kcoll_sched_allgatherv(const struct kcoll_sched_args *a, u32 s,
			    struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank;
	const u64 *c = kcoll_vec_arr(a, 0), *d = kcoll_vec_arr(a, 1);
	u32 sb = kcoll_rank_sub(r, s, n), rb = kcoll_rank_sub(r, s + 1, n);
	bool ip = kcoll_sched_in_place(a);

	if (s == 0 && !ip)
		kcoll_ph_copy(p, KCOLL_SBUF_SEND, 0, KCOLL_SBUF_RECV, d[r],
			      c[r]);
	if (n == 1)
		return;
	if (c[sb])
		kcoll_ph_send(p, kcoll_rank_add(r, 1, n),
			      s == 0 && !ip ? KCOLL_SBUF_SEND : KCOLL_SBUF_RECV,
			      s == 0 && !ip ? 0 : d[sb], c[sb], false);
	if (c[rb])
		kcoll_ph_recv(p, kcoll_rank_sub(r, 1, n), KCOLL_SBUF_RECV,
			      d[rb], c[rb]);
}

/* The largest block's count: each half of REDUCE_SCATTERV's TMP. */
static u64 kcoll_vec_max(const u64 *c, u32 n)
{
	u64 m = 0;
	u32 j;

	for (j = 0; j < n; j++)
		if (c[j] > m)
			m = c[j];
	return m;
}

u64 kcoll_sched_tmp_rsv(const struct kcoll_sched_args *a)
{
	u64 m = a->vec_max;

	return a->nranks >= 4 ? 2 * m : a->nranks == 3 ? m : 0;
}

/* Where REDUCE_SCATTERV's block @b starts in the send buffer. */
static u64 kcoll_vec_off(const struct kcoll_sched_args *a, u32 b)
{
	return a->vec_pre ? a->vec_pre[b] : kcoll_vec_sum(a->vec, b);
}

void kcoll_sched_reduce_scatterv(const struct kcoll_sched_args *a, u32 s,
				 struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank;
	const u64 *c = kcoll_vec_arr(a, 0);
	u32 sb, rb;
	u64 m, doff;
	u8 dbuf;

	if (n == 1) {
		kcoll_ph_copy(p, KCOLL_SBUF_SEND, 0, KCOLL_SBUF_RECV, 0, c[0]);
		return;
	}
	sb = kcoll_rank_sub(r, s + 1, n);
	rb = kcoll_rank_sub(r, s + 2, n);
	m = a->vec_max;
	if (c[sb]) {
		if (s == 0)
			kcoll_ph_send(p, kcoll_rank_add(r, 1, n),
				      KCOLL_SBUF_SEND, kcoll_vec_off(a, sb),
				      c[sb], false);
		else
			kcoll_ph_send(p, kcoll_rank_add(r, 1, n),
				      KCOLL_SBUF_TMP, ((s - 1) & 1) * m, c[sb],
				      false);
	}
	if (s < n - 2) {
		dbuf = KCOLL_SBUF_TMP;
		doff = (s & 1) * m;
	} else {
		dbuf = KCOLL_SBUF_RECV;	/* rb == r */
		doff = 0;
	}
	if (c[rb])
		kcoll_ph_recv_reduce(p, kcoll_rank_sub(r, 1, n), dbuf, doff,
				     c[rb], KCOLL_SBUF_SEND,
				     kcoll_vec_off(a, rb));
	if (s == n - 2)
		kcoll_ph_avg(a, p, dbuf, doff, c[rb]);
}

void kcoll_sched_alltoallv(const struct kcoll_sched_args *a, u32 idx,
			   struct kcoll_phase *p)
{
	u32 n = a->nranks, r = a->rank, k = idx + 1;
	const u64 *sc = kcoll_vec_arr(a, 0), *sd = kcoll_vec_arr(a, 1);
	const u64 *rc = kcoll_vec_arr(a, 2), *rd = kcoll_vec_arr(a, 3);
	u32 to = kcoll_rank_add(r, k, n), from = kcoll_rank_sub(r, k, n);

	if (idx == 0)
		kcoll_ph_copy(p, KCOLL_SBUF_SEND, sd[r], KCOLL_SBUF_RECV,
			      rd[r], sc[r]);
	if (n == 1)
		return;
	if (sc[to])
		kcoll_ph_send(p, to, KCOLL_SBUF_SEND, sd[to], sc[to], false);
	if (rc[from])
		kcoll_ph_recv(p, from, KCOLL_SBUF_RECV, rd[from], rc[from]);
}
