// SPDX-License-Identifier: MIT
/*
 * collsim: a discrete-event simulator of kcoll's collective schedules.
 *
 * Every rank runs the module's own schedule code (kmod/kcoll_sched.c,
 * compiled in) phase by phase, as the engine does (kmod/kcoll_progress.c):
 *  - a phase starts when the previous one finished on this rank; its copy
 *    costs copy_ns + bytes * copy_ps first, then its send and receive are
 *    posted; a transfer starts once both ends have posted it (the receiver's
 *    grant: the same phase index on both ends);
 *  - transfers are cut in chunks of chunk_bytes (-C). A chunk departs when
 *    the previous one left the sender's NIC (and, for a fwd send, once the
 *    same chunk of the phase's receive was reduced), holds every link of
 *    its path for bytes / link bandwidth from the moment all of them are
 *    free (FIFO per link, in departure order), and lands alpha + bytes /
 *    bottleneck bandwidth after that moment. alpha (-A) is the whole per-
 *    message latency, software and grant included;
 *  - with -L, ranks of one node (-P of them, consecutive) do not use the
 *    network: a chunk between them lands copy_ns + bytes * copy_ps after it
 *    departs (the engine's intra-node path), and the next departs then;
 *  - with -E, a transfer of at most KCOLL_EAGER_MAX bytes (its whole send)
 *    lands after that latency instead of alpha: it needs no grant;
 *  - a reducing receive reduces each chunk when it lands, one chunk at a
 *    time per rank, at gamma (-G); the AVG step costs gamma per byte too;
 *  - a send is done when its last chunk landed, a receive when its last
 *    chunk was reduced; a phase when both are;
 *  - with -o, every transfer between nodes also costs CPU time at both
 *    ends (LogP's o): a grant costs the receiver o to send when it posts
 *    the receive and the sender o to take before the first chunk departs
 *    (an eager transfer, which has no grant, costs the sender o to post
 *    and the receiver nothing until it lands), and the last chunk's landing
 *    costs the receiver o before it is reduced or counts as received.
 *    Per chunk the bandwidth B already holds what the NIC's software
 *    costs. With -U, groups of U consecutive ranks share one CPU (U must
 *    divide a node's ranks for the groups to be nodes): these costs,
 *    its reductions and its copies queue behind each other there (a test
 *    VM of one vCPU whose kernel is the NIC too); without it every rank
 *    has a CPU of its own for its reductions, as before.
 *
 * Topologies (-t):
 *  fullbisection  every rank has its own NIC (bandwidth -B each way) into a
 *                 non-blocking switch: a path is the sender's egress and
 *                 the receiver's ingress;
 *  fattree        two levels: leaves of -k ranks (default 32), each leaf's
 *                 uplinks and downlinks pooled into one link each way of
 *                 k * B / O (-O oversubscription, default 1 = non-blocking);
 *                 a path leaving the leaf is egress, leaf up, leaf down,
 *                 ingress;
 *  ring           ranks on a bidirectional ring of links of bandwidth B (no
 *                 switch): a message takes the shorter way, hop by hop,
 *                 plus -H ns per extra hop.
 *
 * Lower bounds (ratio = simulated time / bound; S as nccl-tests defines it,
 * beta = 1/B, Lc = ceil(log2 n)):
 *  allreduce                            max(2(n-1)/n S beta, Lc alpha)
 *  reduce_scatter, allgather, alltoall  max((n-1)/n S beta, Lc alpha)
 *  broadcast, reduce                    max(S beta, Lc alpha)
 *  barrier                              Lc alpha
 * The reduction bound (n-1)/n S gamma is below the bandwidth bound with the
 * default gamma < beta and is not part of the bound.
 *
 * Usage: collsim -n 4096 -c allreduce -b 8 -e 256M -f 8 -a auto -t
 *	  fullbisection -A 5000 -B 12.5 -G 25 -C 65536 [-d esize] [-k leaf]
 *	  [-O oversub] [-H hop_ns] [-X copy_ns] [-Y copy_GBps] [-P ranks] [-L]
 *	  [-E eager_ns] [-o msg_ns] [-U cpu_ranks] [-q]
 *   -P  ranks per node for the cost model's automatic choice (-a auto), as
 *       the module takes it from the rank table (default 1)
 *   -L  those ranks copy to each other instead of using the network
 *   -V  the v-variants (allgatherv, reduce_scatterv, alltoallv): their
 *       largest block over their smallest (default 1: equal blocks); the
 *       blocks' weights grow linearly over the ranks, the size is the
 *       mean's, as for the equal-block collectives (alltoallv: n <= 1024)
 */
#define _GNU_SOURCE

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kcoll_cost.h"
#include "kcoll_sched.h"
#include "kcoll_shape.h"
#include "kcoll_wire.h"

#define SIM_MAX_RANKS	16384

enum { TOPO_FULL, TOPO_FATTREE, TOPO_RING };
enum { EV_POST, EV_DEPART, EV_LAND, EV_DONE };

struct ev {
	u64 t;			/* ps */
	u64 seq;		/* ties: in the order of scheduling */
	u32 rank;
	u32 type;
};

struct rk {
	u32 ph, nph;
	bool posted, started, waiting;
	struct kcoll_phase p;
	u64 s_bytes, r_bytes;
	u32 s_chunks, s_next, s_landed;
	u32 r_chunks, r_landed, r_done;
	u64 cpu_free;		/* without -U: this rank's CPU free at */
	u64 grant_at;		/* -o: its receive's grant left then */
	u64 s_ready;		/* -o: its send may depart from then on */
};

struct link {
	u64 free;		/* ps */
	u64 fs_per_byte;	/* femtoseconds per byte */
};

static struct {
	/* parameters */
	u32 n, esize, topo, leaf, oversub;
	u32 node;		/* -L: ranks per node that copy; 0: none */
	u32 cpu_ranks;		/* -U: ranks sharing one CPU; 0: each its own */
	u64 alpha_ps, hop_ps, copy_ps_fixed, eager_ps, msg_ps;
	u64 beta_fs, gamma_fs, copy_fs;	/* per byte, femtoseconds */
	u64 chunk;
	/* state */
	struct rk *rk;
	struct kcoll_sched_args *args;
	struct link *links;
	u64 *cpu_free;		/* -U: per node of cpu_ranks ranks */
	u32 nlinks;
	struct ev *heap;
	u64 nheap, capheap, seq, events;
	u64 end;
	double skew;		/* -V: the v-variants' largest block over
				 * their smallest */
	u64 *vtab;		/* their tables (alltoallv: one per rank) */
} S;

/* ---------------------------------------------------------------- heap */

static bool ev_before(const struct ev *a, const struct ev *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void ev_push(u64 t, u32 rank, u32 type)
{
	struct ev e = { .t = t, .seq = S.seq++, .rank = rank, .type = type };
	u64 i;

	if (S.nheap == S.capheap) {
		S.capheap = S.capheap ? 2 * S.capheap : 1024;
		S.heap = realloc(S.heap, S.capheap * sizeof(*S.heap));
		if (!S.heap) {
			perror("collsim");
			exit(1);
		}
	}
	i = S.nheap++;
	while (i && ev_before(&e, &S.heap[(i - 1) / 2])) {
		S.heap[i] = S.heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	S.heap[i] = e;
}

static struct ev ev_pop(void)
{
	struct ev top = S.heap[0], last = S.heap[--S.nheap];
	u64 i = 0, c;

	for (;;) {
		c = 2 * i + 1;
		if (c >= S.nheap)
			break;
		if (c + 1 < S.nheap && ev_before(&S.heap[c + 1], &S.heap[c]))
			c++;
		if (!ev_before(&S.heap[c], &last))
			break;
		S.heap[i] = S.heap[c];
		i = c;
	}
	if (S.nheap)
		S.heap[i] = last;
	return top;
}

/* ------------------------------------------------------------ network */

static u64 fs_to_ps(u64 bytes, u64 fs)
{
	return (bytes * fs + 999) / 1000;
}

/* Links of the path from @s to @d into @out; returns their number. */
static u32 path(u32 s, u32 d, u32 *out)
{
	u32 n = S.n, k = 0, cw, i;

	switch (S.topo) {
	case TOPO_RING:
		cw = (d + n - s) % n;
		if (cw <= n - cw) {
			for (i = 0; i < cw; i++)	/* link r: r -> r+1 */
				out[k++] = (s + i) % n;
		} else {
			for (i = 0; i < n - cw; i++)	/* n + r: r -> r-1 */
				out[k++] = n + (s + n - i) % n;
		}
		return k;
	case TOPO_FATTREE:
		out[k++] = s;
		if (s / S.leaf != d / S.leaf) {
			out[k++] = 2 * n + s / S.leaf;
			out[k++] = 2 * n + (n + S.leaf - 1) / S.leaf +
				   d / S.leaf;
		}
		out[k++] = n + d;
		return k;
	default:
		out[k++] = s;
		out[k++] = n + d;
		return k;
	}
}

static u32 *path_buf;

static u64 chunk_bytes(u64 total, u32 i)
{
	u64 off = (u64)i * S.chunk;

	return total - off < S.chunk ? total - off : S.chunk;
}

static u32 nchunks(u64 bytes)
{
	return bytes ? (u32)((bytes + S.chunk - 1) / S.chunk) : 1;
}

/* ------------------------------------------------------------- ranks */

/* @r's CPU does @cost of work from @t on (or once it is free): returns
 * when it is done. */
static u64 cpu_take(u32 r, u64 t, u64 cost)
{
	u64 *f = S.cpu_ranks ? &S.cpu_free[r / S.cpu_ranks] :
		 &S.rk[r].cpu_free;

	*f = (t > *f ? t : *f) + cost;
	return *f;
}

/* Does @s's transfer to @d cross the network (rather than the node)? */
static bool remote(u32 s, u32 d)
{
	return !(S.node > 1 && s / S.node == d / S.node);
}

static void phase_load(u32 r, u64 t)
{
	struct rk *k = &S.rk[r];
	u64 dt = 0;

	kcoll_sched_phase(&S.args[r], k->ph, &k->p);
	k->posted = k->started = k->waiting = false;
	k->s_next = k->s_landed = k->r_landed = k->r_done = 0;
	k->s_bytes = k->p.has_send ? k->p.send.cnt * S.esize : 0;
	k->r_bytes = k->p.has_recv ? k->p.recv.cnt * S.esize : 0;
	k->s_chunks = nchunks(k->s_bytes);
	k->r_chunks = nchunks(k->r_bytes);
	if (k->p.copy.cnt)
		dt = S.copy_ps_fixed + fs_to_ps(k->p.copy.cnt * S.esize,
						S.copy_fs);
	ev_push(S.cpu_ranks && dt ? cpu_take(r, t, dt) : t + dt, r, EV_POST);
}

static void phase_done_check(u32 r, u64 t)
{
	struct rk *k = &S.rk[r];

	if (!k->posted || (k->p.has_send && k->s_landed < k->s_chunks) ||
	    (k->p.has_recv && k->r_done < k->r_chunks))
		return;
	if (k->p.avg_cnt)
		t += fs_to_ps(k->p.avg_cnt * S.esize, S.gamma_fs);
	k->posted = false;
	if (++k->ph < k->nph) {
		phase_load(r, t);
		return;
	}
	if (t > S.end)
		S.end = t;
}

/* Can @r's send chunk s_next depart (fwd: its receive reduced it)? */
static bool can_depart(const struct rk *k)
{
	return k->s_next < k->s_chunks &&
	       (!k->p.send.fwd || k->r_done > k->s_next);
}

static void send_start(u32 r, u64 t)
{
	struct rk *k = &S.rk[r];
	u32 d = k->p.send.peer;

	k->started = true;
	if (S.msg_ps && remote(r, d)) {
		/* The sender takes the receiver's grant (sent when the
		 * receiver posted), or posts an eager transfer. */
		if (S.rk[d].grant_at > t)
			t = S.rk[d].grant_at;
		t = cpu_take(r, t, S.msg_ps);
	}
	k->s_ready = t;
	if (can_depart(k))
		ev_push(t, r, EV_DEPART);
	else
		k->waiting = true;
}

/* Both ends of @s's send posted? */
static bool matched(u32 s)
{
	const struct rk *a = &S.rk[s], *b = &S.rk[a->p.send.peer];

	return a->posted && !a->started && a->p.has_send && b->posted &&
	       b->ph == a->ph && b->p.has_recv && b->p.recv.peer == s;
}

static void on_post(u32 r, u64 t)
{
	struct rk *k = &S.rk[r];

	k->posted = true;
	/* -o: the grant for a receive from another node, unless eager. */
	k->grant_at = 0;
	if (S.msg_ps && k->p.has_recv && remote(k->p.recv.peer, r) &&
	    !(S.eager_ps && k->r_bytes <= KCOLL_EAGER_MAX))
		k->grant_at = cpu_take(r, t, S.msg_ps);
	if (k->p.has_send && matched(r))
		send_start(r, t);
	if (k->p.has_recv && matched(k->p.recv.peer))
		send_start(k->p.recv.peer, t);
	phase_done_check(r, t);
}

static void on_depart(u32 r, u64 t)
{
	struct rk *k = &S.rk[r];
	u64 b = chunk_bytes(k->s_bytes, k->s_next), start = t, occ, worst = 0;
	u64 lat = S.eager_ps && k->s_bytes <= KCOLL_EAGER_MAX ? S.eager_ps :
		  S.alpha_ps;
	u64 land, next;		/* it lands; the next may depart */
	u32 np, i;

	if (!remote(r, k->p.send.peer)) {
		/* Same node: the sender's CPU copies it into place. */
		land = next = S.cpu_ranks ?
			cpu_take(r, t, S.copy_ps_fixed + fs_to_ps(b, S.copy_fs)) :
			t + S.copy_ps_fixed + fs_to_ps(b, S.copy_fs);
	} else {
		np = path(r, k->p.send.peer, path_buf);
		for (i = 0; i < np; i++)
			if (S.links[path_buf[i]].free > start)
				start = S.links[path_buf[i]].free;
		for (i = 0; i < np; i++) {
			occ = fs_to_ps(b, S.links[path_buf[i]].fs_per_byte);
			S.links[path_buf[i]].free = start + occ;
			if (occ > worst)
				worst = occ;
		}
		land = start + lat + worst +
		       (np > 2 && S.topo == TOPO_RING ? (np - 1) * S.hop_ps : 0);
		next = S.links[path_buf[0]].free;  /* the egress link freed */
	}
	ev_push(land, r, EV_LAND);
	k->s_next++;
	if (can_depart(k))
		ev_push(next, r, EV_DEPART);
	else if (k->s_next < k->s_chunks)
		k->waiting = true;
}

static void on_done(u32 r, u64 t)
{
	struct rk *k = &S.rk[r];

	k->r_done++;
	if (k->waiting && can_depart(k)) {
		k->waiting = false;
		ev_push(t > k->s_ready ? t : k->s_ready, r, EV_DEPART);
	}
	phase_done_check(r, t);
}

/* Chunk of @s's send landed at its peer. */
static void on_land(u32 s, u64 t)
{
	struct rk *a = &S.rk[s];
	u32 d = a->p.send.peer;
	struct rk *b = &S.rk[d];
	u64 bytes = chunk_bytes(b->r_bytes, b->r_landed++), td = t;

	a->s_landed++;
	/* The receiver takes the completion of the transfer's last chunk
	 * (the sender's send is done when it landed: @t). */
	if (S.msg_ps && b->r_landed == b->r_chunks && remote(s, d))
		td = cpu_take(d, t, S.msg_ps);
	if (b->p.recv.reduce)
		ev_push(cpu_take(d, td, fs_to_ps(bytes, S.gamma_fs)), d,
			EV_DONE);
	else if (td > t)
		ev_push(td, d, EV_DONE);
	else
		on_done(d, t);
	phase_done_check(s, t);
}

/* -------------------------------------------------------------- driver */

/*
 * The v-variants' tables for a mean block of @count elements: block j's
 * weight grows linearly from 1 to the skew (-V) over the ranks (for
 * alltoallv, block i -> j's by (i + j) mod n, so every rank sends and
 * receives the same total), contiguous displacements. One table for
 * every rank of allgatherv and reduce_scatterv, built for rank 0.
 */
static const u64 *vec_table(u32 op, u32 r, u64 count)
{
	u32 n = S.n, j, w = op == KCOLL_OP_ALLTOALLV ? 4 : 2;
	double mean = (1 + S.skew) / 2;
	u64 *t, at;

	if (!S.vtab) {
		S.vtab = calloc((size_t)w * n * (op == KCOLL_OP_ALLTOALLV ?
						   n : 1), sizeof(u64));
		if (!S.vtab) {
			perror("collsim");
			exit(1);
		}
	}
	t = S.vtab + (op == KCOLL_OP_ALLTOALLV ? (size_t)r * w * n : 0);
	if (op != KCOLL_OP_ALLTOALLV && r)	/* rank 0's, shared */
		return t;
	for (j = 0, at = 0; j < n; j++) {
		u32 k = op == KCOLL_OP_ALLTOALLV ? (r + j) % n : j;
		double wt = n > 1 ? 1 + (S.skew - 1) * k / (n - 1) : 1;

		t[j] = (u64)llround(count * wt / mean);
		t[n + j] = at;
		at += t[j];
	}
	if (op == KCOLL_OP_ALLTOALLV)	/* receive side: the column */
		for (j = 0, at = 0; j < n; j++) {
			u32 k = (j + r) % n;

			t[2 * n + j] = (u64)llround(count * (n > 1 ?
				1 + (S.skew - 1) * k / (n - 1) : 1) / mean);
			t[3 * n + j] = at;
			at += t[2 * n + j];
		}
	return t;
}

static u64 simulate(u32 op, u8 algo, u64 count)
{
	u32 n = S.n, r, i;
	struct ev e;

	S.seq = S.nheap = S.end = 0;
	for (i = 0; i < S.nlinks; i++)
		S.links[i].free = 0;
	if (S.cpu_ranks)
		memset(S.cpu_free, 0, ((n + S.cpu_ranks - 1) / S.cpu_ranks) *
		       sizeof(*S.cpu_free));
	for (r = 0; r < n; r++) {
		S.args[r] = (struct kcoll_sched_args){
			.opcode = op, .rank = r, .nranks = n, .count = count,
			.redop = kcoll_shape(op)->reduces ?
				 KCOLL_REDOP_SUM : KCOLL_REDOP_NONE,
			.algo = algo,
		};
		if (kcoll_shape(op)->vec) {
			S.args[r].count = 0;
			S.args[r].vec = vec_table(op, r, count);
			if (kcoll_sched_vec_check(&S.args[r])) {
				fprintf(stderr, "collsim: a table out of "
					"range\n");
				exit(2);
			}
		}
		if (kcoll_sched_check(&S.args[r])) {
			fprintf(stderr, "collsim: %s does not run %s here\n",
				kcoll_algo_name(algo), "this collective");
			exit(2);
		}
		memset(&S.rk[r], 0, sizeof(S.rk[r]));
		S.rk[r].nph = kcoll_sched_nphases(&S.args[r]);
		if (S.rk[r].nph)
			phase_load(r, 0);
	}
	while (S.nheap) {
		e = ev_pop();
		S.events++;
		switch (e.type) {
		case EV_POST:
			on_post(e.rank, e.t);
			break;
		case EV_DEPART:
			on_depart(e.rank, e.t);
			break;
		case EV_LAND:
			on_land(e.rank, e.t);
			break;
		default:
			on_done(e.rank, e.t);
			break;
		}
	}
	for (r = 0; r < n; r++) {
		if (S.rk[r].ph < S.rk[r].nph) {
			fprintf(stderr, "collsim: rank %u stuck in phase %u "
				"of %u\n", r, S.rk[r].ph, S.rk[r].nph);
			exit(3);
		}
	}
	return S.end;
}

static void setup_links(double gbps)
{
	u32 n = S.n, i, nleaf = (n + S.leaf - 1) / S.leaf;
	u64 fs = (u64)llround(1e6 / gbps);	/* fs per byte at gbps GB/s */

	S.nlinks = 2 * n + (S.topo == TOPO_FATTREE ? 2 * nleaf : 0);
	S.links = calloc(S.nlinks, sizeof(*S.links));
	path_buf = calloc(n + 4, sizeof(*path_buf));
	if (!S.links || !path_buf) {
		perror("collsim");
		exit(1);
	}
	for (i = 0; i < S.nlinks; i++)
		S.links[i].fs_per_byte = i < 2 * n ? fs :
			fs * S.oversub / S.leaf;
	S.beta_fs = fs;
}

static u64 parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'K': case 'k': v *= 1024; break;
	case 'M': case 'm': v *= 1024 * 1024; break;
	case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
	default: break;
	}
	return (u64)v;
}

static const char *const op_names[KCOLL_OP_LAST] = {
	[KCOLL_OP_ALLREDUCE] = "allreduce", [KCOLL_OP_REDUCE] = "reduce",
	[KCOLL_OP_BROADCAST] = "broadcast", [KCOLL_OP_ALLGATHER] = "allgather",
	[KCOLL_OP_REDUCE_SCATTER] = "reduce_scatter",
	[KCOLL_OP_ALLTOALL] = "alltoall", [KCOLL_OP_BARRIER] = "barrier",
	[KCOLL_OP_GATHER] = "gather", [KCOLL_OP_SCATTER] = "scatter",
	[KCOLL_OP_ALLGATHERV] = "allgatherv",
	[KCOLL_OP_REDUCE_SCATTERV] = "reduce_scatterv",
	[KCOLL_OP_ALLTOALLV] = "alltoallv",
};

static void usage(void)
{
	fprintf(stderr,
		"usage: collsim [-n ranks] [-c collective] [-b min] [-e max] "
		"[-f factor]\n"
		"       [-a auto|all|ALGO] [-t fullbisection|fattree|ring] "
		"[-A alpha_ns]\n"
		"       [-B GBps] [-G reduce_GBps] [-C chunk_bytes] [-d esize] "
		"[-k leaf]\n"
		"       [-O oversub] [-H hop_ns] [-X copy_ns] [-Y copy_GBps] "
		"[-P node_ranks] [-L]\n"
		"       [-E eager_ns] [-o msg_ns] [-U cpu_ranks] [-V skew] "
		"[-q]\n");
	exit(2);
}

/* Busbw factor and bound (ps) of @op for S bytes (see the top). */
static double bound_ps(u32 op, double sz, double *factor)
{
	double n = S.n, beta = S.beta_fs / 1000.0, lat;
	u32 lc = 0;

	while ((1U << lc) < S.n)
		lc++;
	lat = lc * (double)S.alpha_ps;
	switch (op) {
	case KCOLL_OP_ALLREDUCE:
		*factor = 2 * (n - 1) / n;
		break;
	case KCOLL_OP_REDUCE:
	case KCOLL_OP_BROADCAST:
		*factor = 1;
		break;
	case KCOLL_OP_BARRIER:
		*factor = 0;
		break;
	default:
		*factor = (n - 1) / n;
		break;
	}
	return fmax(*factor * sz * beta, lat);
}

int main(int argc, char **argv)
{
	double gbps = 12.5, rgbps = 1000.0 / KCOLL_COST_GAMMA_PS, cgbps = 20;
	u64 bmin = 8, bmax = 256ULL << 20, alpha_ns = KCOLL_COST_ALPHA_NS;
	u64 copy_ns = KCOLL_COST_COPY_NS, hop_ns = 0, eager_ns = 0, msg_ns = 0;
	bool local = false;
	const char *algo_arg = "auto", *topo = "fullbisection";
	u32 op = KCOLL_OP_ALLREDUCE, factor = 2, i, opt, node_ranks = 1;
	struct kcoll_tune tune;
	bool quiet = false;
	u64 sz;

	S.n = 8;
	S.esize = 4;
	S.chunk = KCOLL_COST_CHUNK_BYTES;
	S.leaf = 32;
	S.oversub = 1;
	S.skew = 1;
	while ((int)(opt = getopt(argc, argv, "n:c:b:e:f:a:t:A:B:G:C:d:k:O:H:X:Y:P:LE:o:U:V:q")) != -1) {
		switch (opt) {
		case 'n': S.n = strtoul(optarg, NULL, 0); break;
		case 'c':
			for (op = 0; op < KCOLL_OP_LAST; op++)
				if (op_names[op] && !strcmp(op_names[op], optarg))
					break;
			if (op == KCOLL_OP_LAST)
				usage();
			break;
		case 'b': bmin = parse_size(optarg); break;
		case 'e': bmax = parse_size(optarg); break;
		case 'f': factor = strtoul(optarg, NULL, 0); break;
		case 'a': algo_arg = optarg; break;
		case 't': topo = optarg; break;
		case 'A': alpha_ns = strtoull(optarg, NULL, 0); break;
		case 'P': node_ranks = (u32)strtoul(optarg, NULL, 0); break;
		case 'B': gbps = atof(optarg); break;
		case 'G': rgbps = atof(optarg); break;
		case 'C': S.chunk = parse_size(optarg); break;
		case 'd': S.esize = strtoul(optarg, NULL, 0); break;
		case 'k': S.leaf = strtoul(optarg, NULL, 0); break;
		case 'O': S.oversub = strtoul(optarg, NULL, 0); break;
		case 'H': hop_ns = strtoull(optarg, NULL, 0); break;
		case 'X': copy_ns = strtoull(optarg, NULL, 0); break;
		case 'Y': cgbps = atof(optarg); break;
		case 'L': local = true; break;
		case 'E': eager_ns = strtoull(optarg, NULL, 0); break;
		case 'o': msg_ns = strtoull(optarg, NULL, 0); break;
		case 'U': S.cpu_ranks = strtoul(optarg, NULL, 0); break;
		case 'V': S.skew = atof(optarg); break;
		case 'q': quiet = true; break;
		default: usage();
		}
	}
	if (!S.n || S.n > SIM_MAX_RANKS || !S.esize || !S.chunk || !S.leaf ||
	    !S.oversub || factor < 2 || gbps <= 0 || rgbps <= 0 || cgbps <= 0 ||
	    S.skew < 1)
		usage();
	/* alltoallv: a table of 4n words per rank. */
	if (op == KCOLL_OP_ALLTOALLV && S.n > 1024) {
		fprintf(stderr, "collsim: alltoallv on at most 1024 ranks\n");
		return 2;
	}
	if (!strcmp(topo, "fullbisection"))
		S.topo = TOPO_FULL;
	else if (!strcmp(topo, "fattree"))
		S.topo = TOPO_FATTREE;
	else if (!strcmp(topo, "ring"))
		S.topo = TOPO_RING;
	else
		usage();
	S.alpha_ps = alpha_ns * 1000;
	S.hop_ps = hop_ns * 1000;
	S.eager_ps = eager_ns * 1000;
	S.msg_ps = msg_ns * 1000;
	S.node = local ? node_ranks : 0;
	S.copy_ps_fixed = copy_ns * 1000;
	S.gamma_fs = (u64)llround(1e6 / rgbps);
	S.copy_fs = (u64)llround(1e6 / cgbps);
	setup_links(gbps);
	S.rk = calloc(S.n, sizeof(*S.rk));
	S.args = calloc(S.n, sizeof(*S.args));
	if (S.cpu_ranks)
		S.cpu_free = calloc((S.n + S.cpu_ranks - 1) / S.cpu_ranks,
				    sizeof(*S.cpu_free));
	if (!S.rk || !S.args || (S.cpu_ranks && !S.cpu_free)) {
		perror("collsim");
		return 1;
	}
	kcoll_tune_init(&tune);
	tune.cost.alpha_ns = alpha_ns;
	tune.cost.beta_ps = (u32)llround(1000 / gbps);
	tune.cost.gamma_ps = (u32)llround(1000 / rgbps);
	tune.cost.node_ranks = node_ranks;
	tune.cost.copy_ns = copy_ns;
	tune.cost.copy_ps = (u32)llround(1000 / cgbps);
	tune.cost.chunk_bytes = S.chunk;

	if (!quiet)
		printf("# collsim: %s, n %u, %s, alpha %llu ns, %.3g GB/s, "
		       "reduce %.3g GB/s, chunk %llu B, esize %u, "
		       "o %llu ns, %u ranks per CPU\n",
		       op_names[op], S.n, topo, (unsigned long long)alpha_ns,
		       gbps, rgbps, (unsigned long long)S.chunk, S.esize,
		       (unsigned long long)msg_ns, S.cpu_ranks);
	printf("%-14s %-13s %12s %7s %12s %10s %10s %12s %7s\n", "collective",
	       "algorithm", "size(B)", "phases", "time(us)", "algbw", "busbw",
	       "bound(us)", "ratio");
	for (sz = op == KCOLL_OP_BARRIER ? 0 : bmin; sz <= bmax;
	     sz = sz ? sz * factor : bmax + 1) {
		bool per_rank = op == KCOLL_OP_ALLGATHER ||
				op == KCOLL_OP_REDUCE_SCATTER ||
				op == KCOLL_OP_ALLTOALL ||
				op == KCOLL_OP_GATHER ||
				op == KCOLL_OP_SCATTER || kcoll_shape(op)->vec;
		u64 count = op == KCOLL_OP_BARRIER ? 0 :
			    sz / S.esize / (per_rank ? S.n : 1);
		double real = (double)count * S.esize * (per_rank ? S.n : 1);

		if (op != KCOLL_OP_BARRIER && !count)
			continue;
		for (i = KCOLL_ALGO_DEFAULT + 1; i < KCOLL_ALGO_NR; i++) {
			struct timespec t0, t1;
			double f, b, secs, t;
			u64 ev0 = S.events;
			u8 algo;

			if (!strcmp(algo_arg, "auto")) {
				if (i > 1)
					break;
				/* The v-variants have one schedule each. */
				algo = kcoll_shape(op)->vec ?
				       (op == KCOLL_OP_ALLTOALLV ?
					KCOLL_ALGO_PAIRWISE : KCOLL_ALGO_RING) :
				       kcoll_sched_choose(&tune, op, S.n,
							  count * S.esize);
			} else if (!strcmp(algo_arg, "all")) {
				algo = i;
				if (!kcoll_sched_algo_ok(op, algo))
					continue;
			} else {
				algo = i;
				if (strcmp(algo_arg, kcoll_algo_name(algo)))
					continue;
			}
			clock_gettime(CLOCK_MONOTONIC, &t0);
			t = (double)simulate(op, algo, count);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			secs = (t1.tv_sec - t0.tv_sec) +
			       (t1.tv_nsec - t0.tv_nsec) * 1e-9;
			b = bound_ps(op, real, &f);
			printf("%-14s %-13s %12.0f %7u %12.2f %10.3f %10.3f "
			       "%12.2f %7.3f", op_names[op],
			       kcoll_algo_name(algo), real,
			       kcoll_sched_nphases(&S.args[0]), t / 1e6,
			       t ? real / (t / 1e3) : 0,
			       t ? f * real / (t / 1e3) : 0, b / 1e6,
			       b ? t / b : 0);
			if (!quiet)
				printf("  # %llu events, %.2f Mevents/s",
				       (unsigned long long)(S.events - ev0),
				       secs > 0 ? (S.events - ev0) / secs / 1e6 :
				       0);
			printf("\n");
		}
	}
	return 0;
}
