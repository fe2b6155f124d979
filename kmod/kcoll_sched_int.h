/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * kcoll schedules, internal: what kcoll_sched.c (checks, the simple
 * algorithms, the table of algorithms per collective) and kcoll_sched_log.c
 * (the logarithmic algorithms) share. Plain C, like both.
 */
#ifndef KCOLL_SCHED_INT_H
#define KCOLL_SCHED_INT_H

#include "kcoll_sched.h"
#include "kcoll_shape.h"

/*
 * Whether this rank runs in place: only where the uapi gives in place a
 * meaning for this rank (the root of REDUCE, BROADCAST, GATHER and
 * SCATTER, every rank of
 * the symmetric collectives); elsewhere the flag is ignored.
 */
static inline bool kcoll_sched_in_place(const struct kcoll_sched_args *a)
{
	const struct kcoll_shape *d = kcoll_shape(a->opcode);

	if (!a->in_place || !d)
		return false;
	switch (d->in_place) {
	case KCOLL_IN_PLACE_NEVER:
		return false;
	case KCOLL_IN_PLACE_VGATHER:
		return !!a->vec;
	case KCOLL_IN_PLACE_ROOT:
	case KCOLL_IN_PLACE_ROOT_GATHER:
	case KCOLL_IN_PLACE_ROOT_SCATTER:
		return a->rank == a->root;
	default:
		return true;
	}
}

/* Ring arithmetic on ranks; all operands are below n <= KCOLL_MAX_RANKS. */
static inline u32 kcoll_rank_add(u32 r, u32 k, u32 n)
{
	return (r + k) % n;
}

static inline u32 kcoll_rank_sub(u32 r, u32 k, u32 n)
{
	return (r + n - k % n) % n;
}

static inline u64 kcoll_chunk_cnt(u64 count, u32 n, u32 j)
{
	return count / n + (j < count % n ? 1 : 0);
}

static inline u64 kcoll_chunk_off(u64 count, u32 n, u32 j)
{
	u64 rem = count % n;

	return (u64)j * (count / n) + (j < rem ? j : rem);
}

/* Phase builders. */
static inline void kcoll_ph_copy(struct kcoll_phase *p, u8 sbuf, u64 soff, u8 dbuf,
			  u64 doff, u64 cnt)
{
	p->copy.src.buf = sbuf;
	p->copy.src.off = soff;
	p->copy.dst.buf = dbuf;
	p->copy.dst.off = doff;
	p->copy.cnt = cnt;
}

static inline void kcoll_ph_send(struct kcoll_phase *p, u32 peer, u8 buf, u64 off,
			  u64 cnt, bool fwd)
{
	p->has_send = true;
	p->send.peer = peer;
	p->send.src.buf = buf;
	p->send.src.off = off;
	p->send.cnt = cnt;
	p->send.fwd = fwd;
}

static inline void kcoll_ph_recv(struct kcoll_phase *p, u32 peer, u8 buf, u64 off,
			  u64 cnt)
{
	p->has_recv = true;
	p->recv.peer = peer;
	p->recv.dst.buf = buf;
	p->recv.dst.off = off;
	p->recv.cnt = cnt;
	p->recv.reduce = false;
}

static inline void kcoll_ph_recv_reduce(struct kcoll_phase *p, u32 peer, u8 buf,
				 u64 off, u64 cnt, u8 obuf, u64 ooff)
{
	kcoll_ph_recv(p, peer, buf, off, cnt);
	p->recv.reduce = true;
	p->recv.operand.buf = obuf;
	p->recv.operand.off = ooff;
}

/* AVG finishing step; dividing by a single rank is the identity: skipped. */
static inline void kcoll_ph_avg(const struct kcoll_sched_args *a,
			 struct kcoll_phase *p, u8 buf, u64 off, u64 cnt)
{
	if (a->redop != KCOLL_REDOP_AVG || a->nranks < 2 || !cnt)
		return;
	p->avg.buf = buf;
	p->avg.off = off;
	p->avg_cnt = cnt;
}

/* Where this rank's input to a reduction lives. */
static inline u8 kcoll_sched_in(const struct kcoll_sched_args *a)
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

static inline void kcoll_fold_init(struct kcoll_fold *f, u32 n, u32 r)
{
	f->L = kcoll_floor_log2(n);
	f->p = 1U << f->L;
	f->rem = n - f->p;
	f->pre = f->rem ? 1 : 0;
	f->away = r < 2 * f->rem && !(r & 1);
	f->host = r < 2 * f->rem && (r & 1);
	f->v = r < 2 * f->rem ? r / 2 : r - f->rem;
}

/* kcoll_sched_log.c: phase builders, phase counts and scratch */
void kcoll_sched_allreduce_rd(const struct kcoll_sched_args *a,
			      u32 idx, struct kcoll_phase *p);
void kcoll_sched_allreduce_rab(const struct kcoll_sched_args *a,
			       u32 idx, struct kcoll_phase *p);
void kcoll_sched_allgather_rd(const struct kcoll_sched_args *a,
			      u32 idx, struct kcoll_phase *p);
void kcoll_sched_allgather_ff(const struct kcoll_sched_args *a,
			      u32 idx, struct kcoll_phase *p);
void kcoll_sched_rs_halving(const struct kcoll_sched_args *a,
			    u32 idx, struct kcoll_phase *p);
u64 kcoll_sched_tmp_rs_halving(const struct kcoll_sched_args *a);
void kcoll_sched_binomial(const struct kcoll_sched_args *a, u32 idx,
			  struct kcoll_phase *p);
void kcoll_sched_alltoall_bruck(const struct kcoll_sched_args *a,
				u32 idx, struct kcoll_phase *p);
u32 kcoll_bruck_nph(u32 n);
void kcoll_sched_gather_binomial(const struct kcoll_sched_args *a, u32 idx,
				 struct kcoll_phase *p);
void kcoll_sched_scatter_binomial(const struct kcoll_sched_args *a, u32 idx,
				  struct kcoll_phase *p);
u64 kcoll_sched_tmp_gs_binomial(const struct kcoll_sched_args *a);

/* The v-variants (kcoll_sched_vec.c), n > 1 but for their n == 1 copy. */
void kcoll_sched_allgatherv(const struct kcoll_sched_args *a, u32 idx,
			    struct kcoll_phase *p);
void kcoll_sched_reduce_scatterv(const struct kcoll_sched_args *a, u32 idx,
				 struct kcoll_phase *p);
void kcoll_sched_alltoallv(const struct kcoll_sched_args *a, u32 idx,
			   struct kcoll_phase *p);
u64 kcoll_sched_tmp_rsv(const struct kcoll_sched_args *a);
u64 kcoll_sched_vec_send_count(const struct kcoll_sched_args *a);
u64 kcoll_sched_vec_recv_count(const struct kcoll_sched_args *a);

#endif /* KCOLL_SCHED_INT_H */
