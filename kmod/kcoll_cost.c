// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll cost model and algorithm choice (see kcoll_cost.h). The estimates
 * follow the schedules of kcoll_sched.c phase by phase, in closed form:
 * n ranks, b bytes per rank, p = 2^L <= n < 2p, Lc = ceil(log2 n),
 * fold = the fold-in and fold-out phases when p < n.
 */
#include "kcoll_cost.h"

#define KCOLL_COST_INF	((u64)-1)

static u64 kcoll_sat_add(u64 a, u64 b)
{
	return a + b < a ? KCOLL_COST_INF : a + b;
}

static u64 kcoll_sat_mul(u64 a, u64 b)
{
	if (a && b > kcoll_div64(KCOLL_COST_INF, a))
		return KCOLL_COST_INF;
	return a * b;
}

/* @bytes at @ps picoseconds a byte, in ns. */
static u64 kcoll_ps(u64 bytes, u32 ps)
{
	u64 t = kcoll_sat_mul(bytes, ps);

	return t == KCOLL_COST_INF ? t : kcoll_div64(t, 1000);
}

/* One phase moving @m bytes, reduced at the receiver if @red, each NIC
 * carrying @share such flows at once. */
static u64 kcoll_phase_sh_ns(const struct kcoll_cost *c, u64 m, bool red,
			     u32 share)
{
	u64 t = kcoll_sat_add(c->alpha_ns,
			      kcoll_ps(kcoll_sat_mul(m, share), c->beta_ps));
	u64 first = m < c->chunk_bytes ? m : c->chunk_bytes;

	if (!red)
		return t;
	t = kcoll_sat_add(t, kcoll_ps(first, c->gamma_ps));
	if (c->gamma_ps > c->beta_ps)
		t = kcoll_sat_add(t, kcoll_ps(m - first,
					      c->gamma_ps - c->beta_ps));
	return t;
}

static u64 kcoll_phase_ns(const struct kcoll_cost *c, u64 m, bool red)
{
	return kcoll_phase_sh_ns(c, m, red, 1);
}

static u64 kcoll_steps_ns(const struct kcoll_cost *c, u64 k, u64 m, bool red)
{
	return kcoll_sat_mul(k, kcoll_phase_ns(c, m, red));
}

/* log2 of the ranks per node (block placement), 0 if one or unknown. */
static u32 kcoll_node_log2(const struct kcoll_cost *c)
{
	return c->node_ranks > 1 ? kcoll_floor_log2(c->node_ranks) : 0;
}

/*
 * One phase moving @m bytes between ranks on the same node: the sender
 * copies it into the receiver's memory (the intra-node path), chunk by
 * chunk while the receiver reduces the previous one.
 */
static u64 kcoll_local_phase_ns(const struct kcoll_cost *c, u64 m, bool red)
{
	u64 first = m < c->chunk_bytes ? m : c->chunk_bytes;
	u32 slow = c->copy_ps, fast = 0;

	if (red) {
		slow = c->gamma_ps > c->copy_ps ? c->gamma_ps : c->copy_ps;
		fast = c->gamma_ps > c->copy_ps ? c->copy_ps : c->gamma_ps;
	}
	return kcoll_sat_add(kcoll_sat_add(c->alpha_ns, kcoll_ps(m, slow)),
			     kcoll_ps(first, fast));
}

/*
 * One step of @m bytes between partners 2^@d ranks apart (recursive
 * doubling and halving, binomial trees, Bruck): with ranks placed in
 * blocks, those nearer than the ranks per node are on the same node and
 * copy; the others cross nodes with every rank of the node on its NIC at
 * once.
 */
static u64 kcoll_step_ns(const struct kcoll_cost *c, u32 d, u64 m, bool red)
{
	u32 g = kcoll_node_log2(c);

	if (d < g)
		return kcoll_local_phase_ns(c, m, red);
	return kcoll_phase_sh_ns(c, m, red, 1U << g);
}

/*
 * @k steps of @m bytes at partner distances 1, 2, 4, ... (recursive
 * doubling, binomial trees).
 */
static u64 kcoll_spread_steps_ns(const struct kcoll_cost *c, u32 k, u64 m,
				 bool red)
{
	u32 g = kcoll_node_log2(c), local = g < k ? g : k;

	return kcoll_sat_add(kcoll_sat_mul(k - local,
					   kcoll_step_ns(c, g, m, red)),
			     kcoll_sat_mul(local,
					   kcoll_step_ns(c, 0, m, red)));
}

/* A pipelined chain of @hops carrying @m bytes. */
static u64 kcoll_chain_ns(const struct kcoll_cost *c, u32 hops, u64 m,
			  bool red)
{
	u64 first = m < c->chunk_bytes ? m : c->chunk_bytes;
	u32 rate = red && c->gamma_ps > c->beta_ps ? c->gamma_ps : c->beta_ps;

	return kcoll_sat_add(kcoll_steps_ns(c, hops, first, red),
			     kcoll_ps(m - first, rate));
}

/*
 * L halving (or doubling) steps moving m/2, m/4, ..., m/2^L bytes: the
 * step moving m / 2^i is between partners n / 2^i apart (farthest first
 * in halving, last in doubling), or, @near, 2^(i-1) apart (Rabenseifner:
 * the large halves stay near, on the node).
 */
static u64 kcoll_log_steps_ns(const struct kcoll_cost *c, u32 L, u64 m,
			      bool red, bool near)
{
	u64 t = 0;
	u32 i;

	for (i = 1; i <= L; i++)
		t = kcoll_sat_add(t, kcoll_step_ns(c, near ? i - 1 : L - i,
						   m >> i, red));
	return t;
}

/* Bruck: about n/2 blocks a step, and its copy-only phases. */
static u64 kcoll_bruck_ns(const struct kcoll_cost *c, u32 n, u64 b)
{
	struct kcoll_sched_args a = {
		.opcode = KCOLL_OP_ALLTOALL, .algo = KCOLL_ALGO_BRUCK,
		.nranks = n, .count = 1,
	};
	u32 lc = kcoll_ceil_log2(n), k, nph = kcoll_sched_nphases(&a);
	u64 t = 0, moved = 0;

	for (k = 0; k < lc; k++) {
		u32 d = 1U << k, tail = n & (2 * d - 1);
		u64 h = (u64)(n >> (k + 1)) * d + (tail > d ? tail - d : 0);

		t = kcoll_sat_add(t, kcoll_step_ns(c, k, kcoll_sat_mul(h, b),
						   false));
		moved += h;
	}
	/* Every phase copies: rotation and placing (2n blocks), packing and
	 * unpacking (2 * moved, less the last step's unpacking). */
	t = kcoll_sat_add(t, kcoll_sat_mul(nph - lc, c->copy_ns));
	return kcoll_sat_add(t, kcoll_ps(kcoll_sat_mul(2 * (n + moved), b),
					 c->copy_ps));
}

u64 kcoll_cost_ns(const struct kcoll_cost *c, u32 opcode, u8 algo,
		  u32 nranks, u64 bytes)
{
	u32 n = nranks, L, lc, p;
	u64 nb, fold = 0;

	if (!n || algo == KCOLL_ALGO_DEFAULT ||
	    !kcoll_sched_algo_ok(opcode, algo) || !c->chunk_bytes)
		return KCOLL_COST_INF;
	if (n == 1)
		return 0;
	L = kcoll_floor_log2(n);
	lc = kcoll_ceil_log2(n);
	p = 1U << L;
	nb = kcoll_sat_mul(n, bytes);
	switch (opcode) {
	case KCOLL_OP_ALLREDUCE:
		if (p < n)
			fold = kcoll_sat_add(kcoll_phase_ns(c, bytes, true),
					     kcoll_phase_ns(c, bytes, false));
		switch (algo) {
		case KCOLL_ALGO_RING:
			nb = kcoll_div64(bytes, n);
			nb += nb * n < bytes;	/* the largest chunk */
			return kcoll_sat_add(kcoll_steps_ns(c, n - 1, nb, true),
					     kcoll_steps_ns(c, n - 1, nb, false));
		case KCOLL_ALGO_RECDOUBLING:
			return kcoll_sat_add(fold, kcoll_spread_steps_ns(c, L,
								bytes, true));
		case KCOLL_ALGO_BINOMIAL:
			return kcoll_sat_add(kcoll_spread_steps_ns(c, lc, bytes,
								   true),
					     kcoll_spread_steps_ns(c, lc, bytes,
								   false));
		default:	/* RABENSEIFNER */
			fold = kcoll_sat_add(fold, kcoll_log_steps_ns(c, L, bytes,
								      true, true));
			return kcoll_sat_add(fold, kcoll_log_steps_ns(c, L, bytes,
								      false, true));
		}
	case KCOLL_OP_REDUCE:
		if (algo == KCOLL_ALGO_CHAIN)
			return kcoll_chain_ns(c, n - 1, bytes, true);
		return kcoll_spread_steps_ns(c, lc, bytes, true);
	case KCOLL_OP_BROADCAST:
		/* Then the confirmation tokens: one, or back up the tree. */
		if (algo == KCOLL_ALGO_CHAIN)
			return kcoll_sat_add(kcoll_chain_ns(c, n - 1, bytes,
							    false),
					     kcoll_steps_ns(c, 1, 0, false));
		return kcoll_sat_add(kcoll_spread_steps_ns(c, lc, bytes, false),
				     kcoll_steps_ns(c, lc, 0, false));
	case KCOLL_OP_ALLGATHER:
		if (algo == KCOLL_ALGO_RING)
			return kcoll_steps_ns(c, n - 1, bytes, false);
		if (p < n)
			fold = kcoll_sat_add(kcoll_phase_ns(c, bytes, false),
					     kcoll_phase_ns(c, nb, false));
		if (algo == KCOLL_ALGO_FARFIRST) {
			u64 vb = kcoll_div64(nb, p);	/* a virtual block */
			u32 j;

			/* Step j: 2^j blocks, partners p / 2^(j+1) apart. */
			for (j = 0; j < L; j++)
				fold = kcoll_sat_add(fold, kcoll_sat_mul(1U << j,
					kcoll_step_ns(c, L - 1 - j, vb, false)));
			return fold;
		}
		/* Groups of 2^i virtual ranks: about 2^i n / p blocks. */
		return kcoll_sat_add(fold, kcoll_log_steps_ns(c, L,
				     kcoll_div64(nb, p) << L, false, false));
	case KCOLL_OP_REDUCE_SCATTER:
		if (algo == KCOLL_ALGO_RING)
			return kcoll_steps_ns(c, n - 1, bytes, true);
		if (p < n)
			fold = kcoll_sat_add(kcoll_phase_ns(c, nb, true),
					     kcoll_phase_ns(c, bytes, false));
		return kcoll_sat_add(fold, kcoll_log_steps_ns(c, L, nb, true,
							      false));
	case KCOLL_OP_ALLTOALL:
		if (algo == KCOLL_ALGO_BRUCK)
			return kcoll_bruck_ns(c, n, bytes);
		/* Pairwise: the phases with a partner on another node have
		 * every rank of the node on its NIC. */
		if (c->node_ranks > 1 && c->node_ranks < n)
			return kcoll_sat_add(
				kcoll_sat_mul(n - c->node_ranks,
					kcoll_phase_sh_ns(c, bytes, false,
							  c->node_ranks)),
				kcoll_sat_mul(c->node_ranks - 1,
					kcoll_local_phase_ns(c, bytes, false)));
		return kcoll_steps_ns(c, n - 1, bytes, false);
	case KCOLL_OP_BARRIER:
		return kcoll_steps_ns(c, lc, 0, false);
	case KCOLL_OP_GATHER:
	case KCOLL_OP_SCATTER: {
		u64 t;
		u32 k;

		/* Direct: the root's n-1 blocks, one after the other. */
		if (algo == KCOLL_ALGO_DIRECT)
			return kcoll_steps_ns(c, n - 1, bytes, false);
		/*
		 * Binomial: step k moves up to 2^k blocks 2^k ranks apart,
		 * and the root copies its n-1 blocks through its scratch.
		 */
		t = kcoll_sat_add(kcoll_sat_mul(2, c->copy_ns),
				  kcoll_ps(kcoll_sat_mul(n - 1, bytes),
					   c->copy_ps));
		for (k = 0; k < lc; k++) {
			u32 d = 1U << k, blocks = n - d < d ? n - d : d;

			t = kcoll_sat_add(t, kcoll_step_ns(c, k,
					  kcoll_sat_mul(blocks, bytes), false));
		}
		return t;
	}
	default:	/* SEND, RECV */
		return kcoll_phase_ns(c, bytes, false);
	}
}

void kcoll_tune_init(struct kcoll_tune *t)
{
	*t = (struct kcoll_tune){
		.cost = {
			.alpha_ns = KCOLL_COST_ALPHA_NS,
			.beta_ps = KCOLL_COST_BETA_PS,
			.gamma_ps = KCOLL_COST_GAMMA_PS,
			.copy_ns = KCOLL_COST_COPY_NS,
			.copy_ps = KCOLL_COST_COPY_PS,
			.chunk_bytes = KCOLL_COST_CHUNK_BYTES,
		},
	};
}

/* May the cost model pick @algo for @bytes? */
static bool kcoll_algo_allowed(const struct kcoll_coll_tune *ct, u32 opcode,
			       u8 algo, u64 bytes)
{
	return kcoll_sched_algo_ok(opcode, algo) &&
	       !(ct->disabled & (1U << algo)) &&
	       !(ct->max_bytes[algo] && bytes > ct->max_bytes[algo]);
}

u8 kcoll_sched_choose(const struct kcoll_tune *t, u32 opcode, u32 nranks,
		      u64 bytes)
{
	return kcoll_sched_choose_cost(t, &t->cost, opcode, nranks, bytes);
}

u8 kcoll_sched_choose_cost(const struct kcoll_tune *t,
			   const struct kcoll_cost *cost, u32 opcode,
			   u32 nranks, u64 bytes)
{
	struct kcoll_sched_args a = { .opcode = opcode };
	u8 dflt = kcoll_sched_algo(&a), best = dflt, algo;
	const struct kcoll_coll_tune *ct;
	u64 best_ns = KCOLL_COST_INF, ns;
	struct kcoll_cost c = *cost;

	if (opcode >= KCOLL_OP_LAST)
		return best;
	/*
	 * A copy streams the same bytes a reduction does: never price it
	 * below the (measured, agreed) reduction. Under emulation the 20 GB/s
	 * default is 40 x too fast, which made Bruck's packing look free
	 * (docs/PERFORMANCE.md); gamma is agreed, so every rank still
	 * chooses alike.
	 */
	if (c.copy_ps < c.gamma_ps)
		c.copy_ps = c.gamma_ps;
	cost = &c;
	ct = &t->coll[opcode];
	if (ct->force != KCOLL_ALGO_DEFAULT &&
	    kcoll_sched_algo_ok(opcode, ct->force))
		return ct->force;
	/* The default wins ties; it is also the answer if none is allowed. */
	if (kcoll_algo_allowed(ct, opcode, dflt, bytes))
		best_ns = kcoll_cost_ns(cost, opcode, dflt, nranks, bytes);
	for (algo = KCOLL_ALGO_DEFAULT + 1; algo < KCOLL_ALGO_NR; algo++) {
		if (algo == dflt || !kcoll_algo_allowed(ct, opcode, algo, bytes))
			continue;
		ns = kcoll_cost_ns(cost, opcode, algo, nranks, bytes);
		if (ns < best_ns) {
			best_ns = ns;
			best = algo;
		}
	}
	return best;
}
