// SPDX-License-Identifier: MIT
/*
 * The in-memory model of a communicator that executes kcoll's schedules
 * with real data (sched_model.h); its rules are described at the top of
 * test_sched.c.
 */
#include "sched_model.h"
#include "kcoll_shape.h"

/* Totals over the whole program, reported at the end. */
struct sched_model_stats stats;

const char *op_name(u32 op)
{
	return kcoll_shape(op) ? kcoll_shape(op)->name : "?";
}

bool is_reducing(u32 op)
{
	return kcoll_shape(op) && kcoll_shape(op)->reduces;
}

bool is_p2p(u32 op)
{
	return kcoll_shape(op) && kcoll_shape(op)->p2p;
}

/* Input element j of rank r for an operation. */
static union elem gen(const struct spec *s, u32 r, u64 j)
{
	union elem e;
	u64 salt = s->salt;

	switch (s->redop) {
	case KCOLL_REDOP_NONE:
		/* Unique per (operation, rank, index). */
		e.i = (int64_t)((((u64)r + 1) << 40) | ((salt & 0xff) << 32) |
				(j + 1));
		break;
	case KCOLL_REDOP_AVG:
		e.d = (double)((int64_t)((r * 131ULL + j * 7 + salt) % 1999) -
			       999) + 0.25;
		break;
	case KCOLL_REDOP_PROD:
		/* Mostly +-1, a 2 on one rank in 61: no overflow for 4096. */
		if ((r + j + salt) % 61 == 0)
			e.i = 2;
		else
			e.i = ((r * 3 + j * 5 + salt) >> 1) & 1 ? -1 : 1;
		break;
	default:
		e.i = (int64_t)((r * 7919ULL + j * 104729ULL + salt * 31) %
				2001) - 1000;
		break;
	}
	return e;
}

/* dst = operand OP incoming; wrap-around integer arithmetic (no UB). */
static union elem reduce1(u32 redop, union elem a, union elem b)
{
	union elem e;

	switch (redop) {
	case KCOLL_REDOP_SUM:
		e.i = (int64_t)((u64)a.i + (u64)b.i);
		break;
	case KCOLL_REDOP_PROD:
		e.i = (int64_t)((u64)a.i * (u64)b.i);
		break;
	case KCOLL_REDOP_MIN:
		e.i = a.i < b.i ? a.i : b.i;
		break;
	case KCOLL_REDOP_MAX:
		e.i = a.i > b.i ? a.i : b.i;
		break;
	case KCOLL_REDOP_AVG:
		e.d = a.d + b.d;
		break;
	default:
		e.i = POISON;
		break;
	}
	return e;
}

static bool elem_eq(u32 redop, union elem got, union elem want)
{
	double diff, tol;

	if (redop != KCOLL_REDOP_AVG)
		return got.i == want.i;
	diff = got.d - want.d;
	tol = 1e-9 * (want.d < 0 ? -want.d : want.d) + 1e-12;
	return diff <= tol && -diff <= tol;
}

static u64 vsum(const u64 *c, u32 n)
{
	u64 t = 0;
	u32 j;

	for (j = 0; j < n; j++)
		t += c[j];
	return t;
}

/* The end of the furthest nonempty block: written independently of
 * kcoll_sched_vec.c's. */
static u64 vextent(const u64 *c, const u64 *d, u32 n)
{
	u64 e = 0;
	u32 j;

	for (j = 0; j < n; j++)
		if (c[j] && d[j] + c[j] > e)
			e = d[j] + c[j];
	return e;
}

/* Rank @r's input length of the v-variant @s. */
static u64 vinput_len(const struct spec *s, u32 r)
{
	switch (s->op) {
	case KCOLL_OP_ALLGATHERV:
		return vec_of(s, r, 0)[r];
	case KCOLL_OP_REDUCE_SCATTERV:
		return vsum(vec_of(s, r, 0), s->n);
	default:
		return vextent(vec_of(s, r, 0), vec_of(s, r, 1), s->n);
	}
}

/* Input length of one rank (elements): n*count where the uapi says so. */
static u64 input_len(const struct spec *s)
{
	if (s->vtab)	/* the same on every rank */
		return vsum(vec_of(s, 0, 0), s->n);
	if (s->op == KCOLL_OP_REDUCE_SCATTER || s->op == KCOLL_OP_ALLTOALL ||
	    s->op == KCOLL_OP_SCATTER)
		return (u64)s->n * s->count;
	return s->count;
}

/* The uapi sizes of the user buffers (what the engine must pin). */
void uapi_counts(const struct kcoll_sched_args *a, u64 *snd, u64 *rcv)
{
	u64 c = a->count, nc = (u64)a->nranks * c;
	bool root = a->rank == a->root, ip = a->in_place;

	switch (a->opcode) {
	case KCOLL_OP_ALLREDUCE:
		*snd = ip ? 0 : c;
		*rcv = c;
		break;
	case KCOLL_OP_REDUCE:
		*snd = root && ip ? 0 : c;
		*rcv = root ? c : 0;
		break;
	case KCOLL_OP_BROADCAST:
		*snd = root && !ip ? c : 0;
		*rcv = c;
		break;
	case KCOLL_OP_ALLGATHER:
		*snd = ip ? 0 : c;
		*rcv = nc;
		break;
	case KCOLL_OP_REDUCE_SCATTER:
		*snd = nc;
		*rcv = ip ? 0 : c;
		break;
	case KCOLL_OP_ALLTOALL:
		*snd = ip ? 0 : nc;
		*rcv = nc;
		break;
	case KCOLL_OP_GATHER:
		*snd = root && ip ? 0 : c;
		*rcv = root ? nc : 0;
		break;
	case KCOLL_OP_SCATTER:
		*snd = root ? nc : 0;
		*rcv = root && ip ? 0 : c;
		break;
	case KCOLL_OP_SEND:
		*snd = c;
		*rcv = 0;
		break;
	case KCOLL_OP_RECV:
		*snd = 0;
		*rcv = c;
		break;
	case KCOLL_OP_ALLGATHERV:
		*snd = ip ? 0 : kcoll_vec_arr(a, 0)[a->rank];
		*rcv = vextent(kcoll_vec_arr(a, 0), kcoll_vec_arr(a, 1),
			       a->nranks);
		break;
	case KCOLL_OP_REDUCE_SCATTERV:
		*snd = vsum(kcoll_vec_arr(a, 0), a->nranks);
		*rcv = kcoll_vec_arr(a, 0)[a->rank];
		break;
	case KCOLL_OP_ALLTOALLV:
		*snd = vextent(kcoll_vec_arr(a, 0), kcoll_vec_arr(a, 1),
			       a->nranks);
		*rcv = vextent(kcoll_vec_arr(a, 2), kcoll_vec_arr(a, 3),
			       a->nranks);
		break;
	default:
		*snd = *rcv = 0;
		break;
	}
}

u32 ceil_log2(u32 n)
{
	u32 k = 0;

	while ((1U << k) < n)
		k++;
	return k;
}

static u32 floor_log2(u32 n)
{
	u32 k = 0;

	while ((2U << k) <= n)
		k++;
	return k;
}

/* Bruck: 2 rotation copies, per step k one pack copy per run of 2^k
 * indices with bit k set (the last one with the exchange) and as many
 * unpack copies (but after the last step), then n placing copies. */
static u32 bruck_nphases(u32 n)
{
	u32 lc = ceil_log2(n), k, j, runs, nph = 2 + n;

	for (k = 0; k < lc; k++) {
		for (runs = 0, j = 0; j < n; j++)
			if ((j & (1U << k)) && !(j & ((1U << k) - 1)))
				runs++;	/* j starts a run */
		nph += runs * (k + 1 < lc ? 2 : 1);
	}
	return nph;
}

/* The phase counts the schedules promise (see kcoll_sched.c). */
u32 expected_nphases(const struct kcoll_sched_args *a)
{
	u32 n = a->nranks;
	u32 fold = n & (n - 1) ? 2 : 0;	/* fold-in and fold-out */

	if (is_p2p(a->opcode))
		return 1;
	if (a->opcode == KCOLL_OP_BARRIER)
		return ceil_log2(n);
	if (a->vec)	/* whatever the counts */
		return n == 1 ? !a->in_place : n - 1;
	if (!a->count)
		return 0;
	if (n == 1)
		return a->in_place ? 0 : 1;
	switch (a->algo) {
	case KCOLL_ALGO_RECDOUBLING:
	case KCOLL_ALGO_RECHALVING:
		return floor_log2(n) + fold;
	case KCOLL_ALGO_RABENSEIFNER:
		return 2 * floor_log2(n) + fold;
	case KCOLL_ALGO_FARFIRST:	/* a block a phase */
		return (1U << floor_log2(n)) - 1 + fold;
	case KCOLL_ALGO_BINOMIAL:
		/* GATHER, SCATTER: the tree and the root's two copies. */
		if (a->opcode == KCOLL_OP_GATHER ||
		    a->opcode == KCOLL_OP_SCATTER)
			return ceil_log2(n) + 2;
		/* ALLREDUCE: reduce, then broadcast; BROADCAST: the data,
		 * then the confirmation tokens back up the tree. */
		return ceil_log2(n) * (a->opcode == KCOLL_OP_REDUCE ? 1 : 2);
	case KCOLL_ALGO_BRUCK:
		return bruck_nphases(n);
	default:
		break;
	}
	switch (a->opcode) {
	case KCOLL_OP_ALLREDUCE:
		return 2 * (n - 1);
	case KCOLL_OP_REDUCE:
		return 1;
	case KCOLL_OP_BROADCAST:	/* the chain, the last rank's token */
		return 2;
	default:
		return n - 1;
	}
}

/* Where the rank's input lives before the operation. */
static union elem *input_at(struct mop *m)
{
	const struct spec *s = m->s;

	if (!m->a.in_place)
		return m->buf[KCOLL_SBUF_SEND];
	switch (s->op) {
	case KCOLL_OP_REDUCE_SCATTER:
		return m->buf[KCOLL_SBUF_SEND];
	case KCOLL_OP_ALLGATHERV:
		return m->buf[KCOLL_SBUF_RECV] + vec_of(s, m->a.rank, 1)[m->a.rank];
	case KCOLL_OP_ALLGATHER:
	case KCOLL_OP_GATHER:	/* in place only at the root */
		return m->buf[KCOLL_SBUF_RECV] + (u64)m->a.rank * s->count;
	case KCOLL_OP_SCATTER:
		return m->buf[KCOLL_SBUF_SEND];
	default:
		return m->buf[KCOLL_SBUF_RECV];
	}
}

/*
 * Element buffers come from an arena reused from run to run: fresh memory
 * for every buffer of every run costs more in page faults than the test
 * itself. Under ASan, what is not handed out (the redzone after each
 * buffer, the rest of a block, everything after arena_reset) is poisoned,
 * so an access past a buffer's declared size still fails loudly.
 */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN	1
#endif
#endif
#ifdef TEST_ASAN
#include <sanitizer/asan_interface.h>
#define MEM_POISON(p, n)	ASAN_POISON_MEMORY_REGION(p, n)
#define MEM_UNPOISON(p, n)	ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define MEM_POISON(p, n)	((void)(p), (void)(n))
#define MEM_UNPOISON(p, n)	((void)(p), (void)(n))
#endif

#define ARENA_BLOCK	(16UL << 20)
#define ARENA_REDZONE	64UL
#define ARENA_MAX_BLOCKS 64

struct arena_blk {
	char *base;
	size_t size, used;
};

static struct {
	struct arena_blk b[ARENA_MAX_BLOCKS];
	u32 nb, cur;
} arena;

static void *arena_alloc(size_t bytes)
{
	size_t need = (bytes + 2 * ARENA_REDZONE - 1) & ~(ARENA_REDZONE - 1);
	struct arena_blk *b;
	char *p;

	while (arena.cur < arena.nb &&
	       arena.b[arena.cur].size - arena.b[arena.cur].used < need)
		arena.cur++;
	if (arena.cur == arena.nb) {
		if (arena.nb == ARENA_MAX_BLOCKS) {
			fprintf(stderr, "test arena exhausted\n");
			exit(2);
		}
		b = &arena.b[arena.nb++];
		b->size = need > ARENA_BLOCK ? need : ARENA_BLOCK;
		b->base = malloc(b->size);
		if (!b->base) {
			fprintf(stderr, "out of memory\n");
			exit(2);
		}
		MEM_POISON(b->base, b->size);
	}
	b = &arena.b[arena.cur];
	p = b->base + b->used;
	b->used += need;
	MEM_UNPOISON(p, bytes);
	return p;
}

/* Everything handed out since the last reset goes back (and is poisoned). */
static void arena_reset(void)
{
	u32 i;

	for (i = 0; i < arena.nb; i++) {
		MEM_POISON(arena.b[i].base, arena.b[i].used);
		arena.b[i].used = 0;
	}
	arena.cur = 0;
}

void arena_free(void)
{
	u32 i;

	for (i = 0; i < arena.nb; i++) {
		MEM_UNPOISON(arena.b[i].base, arena.b[i].size);
		free(arena.b[i].base);
	}
	memset(&arena, 0, sizeof(arena));
}

/* @n elements, poisoned with POISON; valid until the next arena_reset. */
static union elem *alloc_elems(u64 n)
{
	union elem *v = arena_alloc(n * sizeof(*v));
	u64 i;

	for (i = 0; i < n; i++)
		v[i].i = POISON;
	return v;
}

/* Set up rank @r's part of @s; false if the declared sizes are wrong. */
bool mop_init(struct mop *m, const struct spec *s, u32 r)
{
	struct kcoll_sched_args *a = &m->a;
	u64 snd, rcv, i;
	union elem *in;
	bool has_input;
	int b;

	memset(m, 0, sizeof(*m));
	m->s = s;
	a->opcode = s->op;
	a->redop = s->redop;
	a->rank = r;
	a->nranks = s->n;
	a->count = s->count;
	a->algo = s->algo;
	if (is_p2p(s->op)) {
		a->opcode = r == s->src ? KCOLL_OP_SEND : KCOLL_OP_RECV;
		a->root = r == s->src ? s->root : s->src;
	} else if (s->op == KCOLL_OP_REDUCE || s->op == KCOLL_OP_BROADCAST ||
		   s->op == KCOLL_OP_GATHER || s->op == KCOLL_OP_SCATTER) {
		a->root = s->root;
		/* The engine sets it only where it means something. */
		a->in_place = s->ip && r == s->root;
	} else if (s->op != KCOLL_OP_BARRIER) {
		a->in_place = s->ip;
	}
	if (s->vtab) {
		a->vec = vec_of(s, r, 0);
		/* Half the runs with the block offsets the engine keeps,
		 * half summing them per phase. */
		if (s->salt & 1)
			a->vec_pre = (u64 *)arena_alloc((u64)s->n * sizeof(u64));
		/* The engine decides in place from the addresses. */
		a->in_place = s->ip && s->op == KCOLL_OP_ALLGATHERV;
		if (!UNIT_EQ_INT(kcoll_sched_vec_check(a), 0))
			return false;
	}

	if (!UNIT_EQ_INT(kcoll_sched_check(a), 0))
		return false;
	m->nph = kcoll_sched_nphases(a);
	m->data_phases = kcoll_sched_data_phases(a);
	if (m->data_phases > m->nph) {
		MFAIL(m, "%u phases touch memory of %u", m->data_phases,
		      m->nph);
		return false;
	}
	if (m->nph != expected_nphases(a)) {
		MFAIL(m, "nphases %u, expected %u", m->nph,
		      expected_nphases(a));
		return false;
	}
	uapi_counts(a, &snd, &rcv);
	m->len[KCOLL_SBUF_SEND] = kcoll_sched_send_count(a);
	m->len[KCOLL_SBUF_RECV] = kcoll_sched_recv_count(a);
	m->len[KCOLL_SBUF_TMP] = kcoll_sched_tmp_count(a);
	if (m->len[KCOLL_SBUF_SEND] != snd || m->len[KCOLL_SBUF_RECV] != rcv) {
		MFAIL(m, "buffer counts send %" PRIu64 " recv %" PRIu64
		      ", uapi says %" PRIu64 " %" PRIu64,
		      m->len[KCOLL_SBUF_SEND], m->len[KCOLL_SBUF_RECV], snd,
		      rcv);
		return false;
	}
	/* Scratch: at most 2*count, n*count for in-place pairwise alltoall
	 * and halving reduce-scatter, 2*n*count for bruck, (n-1)*count for
	 * binomial gather and scatter (the root's). */
	if (s->vtab) {
		u64 mx = 0, j;

		for (j = 0; j < s->n; j++)
			if (vec_of(s, r, 0)[j] > mx)
				mx = vec_of(s, r, 0)[j];
		if (m->len[KCOLL_SBUF_TMP] > 2 * mx ||
		    (s->op != KCOLL_OP_REDUCE_SCATTERV &&
		     m->len[KCOLL_SBUF_TMP])) {
			MFAIL(m, "tmp count %" PRIu64, m->len[KCOLL_SBUF_TMP]);
			return false;
		}
	} else if (m->len[KCOLL_SBUF_TMP] > 2 * s->count &&
	    !((s->op == KCOLL_OP_GATHER || s->op == KCOLL_OP_SCATTER) &&
	      m->len[KCOLL_SBUF_TMP] <= (u64)(s->n - 1) * s->count) &&
	    !(s->op == KCOLL_OP_ALLTOALL && a->in_place &&
	      m->len[KCOLL_SBUF_TMP] == (u64)s->n * s->count) &&
	    !(s->algo == KCOLL_ALGO_RECHALVING &&
	      m->len[KCOLL_SBUF_TMP] <= (u64)s->n * s->count) &&
	    !(s->algo == KCOLL_ALGO_BRUCK &&
	      m->len[KCOLL_SBUF_TMP] <= 2 * (u64)s->n * s->count)) {
		MFAIL(m, "tmp count %" PRIu64, m->len[KCOLL_SBUF_TMP]);
		return false;
	}
	for (b = 0; b < KCOLL_SBUF_NR; b++)
		m->buf[b] = alloc_elems(m->len[b]);

	/* The input: every rank's for most ops, the root's for broadcast,
	 * the sender's for send/recv. */
	if (s->op == KCOLL_OP_BROADCAST || s->op == KCOLL_OP_SCATTER)
		has_input = r == s->root;
	else if (a->opcode == KCOLL_OP_RECV || s->op == KCOLL_OP_BARRIER)
		has_input = false;
	else
		has_input = true;
	if (has_input) {
		m->in_len = s->vtab ? vinput_len(s, r) : input_len(s);
		m->in = alloc_elems(m->in_len);
		in = input_at(m);
		for (i = 0; i < m->in_len; i++)
			m->in[i] = in[i] = gen(s, r, i);
	}
	return true;
}

/* ------------------------------------------------------------------ */
/* Phase validation                                                    */
/* ------------------------------------------------------------------ */

static bool region_ok(const struct mop *m, struct kcoll_sregion r, u64 cnt)
{
	return r.buf < KCOLL_SBUF_NR && r.off <= m->len[r.buf] &&
	       cnt <= m->len[r.buf] - r.off;
}

static bool same(struct kcoll_sregion a, struct kcoll_sregion b)
{
	return a.buf == b.buf && a.off == b.off;
}

static bool overlap(struct kcoll_sregion a, u64 ca, struct kcoll_sregion b,
		    u64 cb)
{
	return a.buf == b.buf && ca && cb && a.off < b.off + cb &&
	       b.off < a.off + ca;
}

/* May the schedule write to this buffer? SEND is read only but for the
 * in-place reduce-scatter, whose result lands in it. */
static bool writable(const struct mop *m, u8 buf)
{
	return buf != KCOLL_SBUF_SEND ||
	       (m->a.opcode == KCOLL_OP_REDUCE_SCATTER && m->a.in_place);
}

/* Empty transfers carry meaning: point-to-point of count 0, barrier and
 * broadcast confirmation tokens. */
static bool empty_ok(u32 op)
{
	return is_p2p(op) || op == KCOLL_OP_BARRIER ||
	       op == KCOLL_OP_BROADCAST;
}

static bool peer_ok(const struct mop *m, u32 peer)
{
	return peer < m->a.nranks && peer != m->a.rank;
}

bool phase_valid(const struct mop *m, u32 idx,
			const struct kcoll_phase *p)
{
	const struct kcoll_scopy *c = &p->copy;
	const struct kcoll_ssend *snd = &p->send;
	const struct kcoll_srecv *rcv = &p->recv;

	if (c->cnt) {
		if (!region_ok(m, c->src, c->cnt) ||
		    !region_ok(m, c->dst, c->cnt)) {
			MFAIL(m, "phase %u: copy out of bounds", idx);
			return false;
		}
		if (!same(c->src, c->dst) &&
		    overlap(c->src, c->cnt, c->dst, c->cnt)) {
			MFAIL(m, "phase %u: copy overlaps partially", idx);
			return false;
		}
		if (!writable(m, c->dst.buf)) {
			MFAIL(m, "phase %u: copy writes SEND", idx);
			return false;
		}
	}
	if (p->has_send) {
		if (!peer_ok(m, snd->peer) || !region_ok(m, snd->src, snd->cnt) ||
		    (!snd->cnt && !empty_ok(m->a.opcode))) {
			MFAIL(m, "phase %u: bad send (peer %u cnt %" PRIu64 ")",
			      idx, snd->peer, snd->cnt);
			return false;
		}
		if (snd->fwd && (!p->has_recv || rcv->cnt != snd->cnt ||
				 !same(snd->src, rcv->dst))) {
			MFAIL(m, "phase %u: fwd send does not forward its "
			      "receive", idx);
			return false;
		}
		if (!snd->fwd && p->has_recv &&
		    overlap(snd->src, snd->cnt, rcv->dst, rcv->cnt)) {
			MFAIL(m, "phase %u: send reads what the receive "
			      "writes", idx);
			return false;
		}
	}
	if (p->has_recv) {
		if (!peer_ok(m, rcv->peer) || !region_ok(m, rcv->dst, rcv->cnt) ||
		    !writable(m, rcv->dst.buf) ||
		    (!rcv->cnt && !empty_ok(m->a.opcode))) {
			MFAIL(m, "phase %u: bad recv (peer %u cnt %" PRIu64 ")",
			      idx, rcv->peer, rcv->cnt);
			return false;
		}
		if (rcv->reduce &&
		    (!is_reducing(m->a.opcode) ||
		     !region_ok(m, rcv->operand, rcv->cnt) ||
		     (!same(rcv->operand, rcv->dst) &&
		      overlap(rcv->operand, rcv->cnt, rcv->dst, rcv->cnt)))) {
			MFAIL(m, "phase %u: bad reduce operand", idx);
			return false;
		}
	}
	if (m->a.opcode == KCOLL_OP_BARRIER &&
	    (!p->has_send || !p->has_recv || snd->cnt || rcv->cnt ||
	     c->cnt || p->avg_cnt)) {
		MFAIL(m, "phase %u: barrier phase moves data", idx);
		return false;
	}
	if (p->avg_cnt && (m->a.redop != KCOLL_REDOP_AVG ||
			   !region_ok(m, p->avg, p->avg_cnt) ||
			   !writable(m, p->avg.buf))) {
		MFAIL(m, "phase %u: bad avg step", idx);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------ */
/* Static check: per ordered pair, send counts == receive counts       */
/* ------------------------------------------------------------------ */

/* Field by field (padding aside). */
bool phase_eq(const struct kcoll_phase *a, const struct kcoll_phase *b)
{
	return same(a->copy.src, b->copy.src) &&
	       same(a->copy.dst, b->copy.dst) && a->copy.cnt == b->copy.cnt &&
	       a->has_send == b->has_send && a->has_recv == b->has_recv &&
	       a->send.peer == b->send.peer && same(a->send.src, b->send.src) &&
	       a->send.cnt == b->send.cnt && a->send.fwd == b->send.fwd &&
	       a->recv.peer == b->recv.peer && same(a->recv.dst, b->recv.dst) &&
	       a->recv.cnt == b->recv.cnt &&
	       a->recv.reduce == b->recv.reduce &&
	       same(a->recv.operand, b->recv.operand) &&
	       same(a->avg, b->avg) && a->avg_cnt == b->avg_cnt;
}

/* The messages of one ordered pair, as seen by one side. */
struct pairseq {
	u64 nr;			/* number of messages */
	u64 hash;		/* of their counts, in order */
};

static void pairseq_add(struct pairseq *q, u32 phase, u64 cnt)
{
	q->nr++;
	q->hash = (q->hash ^ (cnt + 0x9e3779b97f4a7c15ULL)) *
		  0x100000001b3ULL;
	q->hash = (q->hash ^ phase) * 0x100000001b3ULL;
	q->hash ^= q->hash >> 29;
}

/*
 * Walk every phase of every rank (in order) without executing anything:
 * the sends from A to B, in order, must have the counts and the phase
 * indices of the receives at B from A, in order (compared through a hash
 * of each sequence). Also checks that kcoll_sched_phase() initialises the
 * whole result.
 */
static bool pairs_match(struct world *w)
{
	u64 nn = (u64)w->n * w->n, i;
	struct pairseq *snd, *rcv;
	struct kcoll_phase p, q;
	bool ok = true;
	u32 r, o, k;

	snd = arena_alloc(nn * sizeof(*snd));
	rcv = arena_alloc(nn * sizeof(*rcv));
	memset(snd, 0, nn * sizeof(*snd));
	memset(rcv, 0, nn * sizeof(*rcv));
	for (r = 0; r < w->n && ok; r++) {
		for (o = 0; o < w->rk[r].nops && ok; o++) {
			const struct mop *m = &w->rk[r].ops[o];

			for (k = 0; k < m->nph; k++) {
				memset(&p, 0, sizeof(p));
				memset(&q, 0xff, sizeof(q));
				kcoll_sched_phase(&m->a, k, &p);
				kcoll_sched_phase(&m->a, k, &q);
				if (!phase_eq(&p, &q)) {
					MFAIL(m, "phase %u not fully "
					      "initialised", k);
					ok = false;
					break;
				}
				if (p.has_send && p.send.peer < w->n)
					pairseq_add(&snd[(u64)r * w->n +
							 p.send.peer],
						    k, p.send.cnt);
				if (p.has_recv && p.recv.peer < w->n)
					pairseq_add(&rcv[(u64)p.recv.peer *
							 w->n + r],
						    k, p.recv.cnt);
			}
		}
	}
	for (i = 0; ok && i < nn; i++) {
		if (snd[i].nr != rcv[i].nr || snd[i].hash != rcv[i].hash) {
			UNIT_FAIL("%s n %u: %" PRIu64 " messages from %u to "
				  "%u, %" PRIu64 " received%s",
				  op_name(w->specs[0].op), w->n, snd[i].nr,
				  (u32)(i / w->n), (u32)(i % w->n), rcv[i].nr,
				  snd[i].nr == rcv[i].nr ?
				  ", counts differ" : "");
			ok = false;
		}
	}
	return ok;
}

/* ------------------------------------------------------------------ */
/* Execution                                                           */
/* ------------------------------------------------------------------ */

static union elem *reg(struct mop *m, struct kcoll_sregion r)
{
	return m->buf[r.buf] + r.off;
}

/* Does @p copy, move or average any byte? */
static bool phase_moves(const struct kcoll_phase *p)
{
	return p->copy.cnt || p->avg_cnt || (p->has_send && p->send.cnt) ||
	       (p->has_recv && p->recv.cnt);
}

/* Enter rank @r's next phase (copy first); false on an invalid phase. */
static bool enter_phase(struct world *w, u32 r)
{
	struct mrank *rk = &w->rk[r];
	struct kcoll_phase *p = &rk->p;
	struct mop *m;

	while (rk->op < rk->nops && rk->ph >= rk->ops[rk->op].nph) {
		rk->op++;
		rk->ph = 0;
		rk->early_next = 0;
	}
	rk->early_stop = false;
	if (rk->op == rk->nops) {
		rk->done = true;
		return true;
	}
	m = &rk->ops[rk->op];
	kcoll_sched_phase(&m->a, rk->ph, p);
	if (!phase_valid(m, rk->ph, p))
		return false;
	/* Only empty transfers after the phases that touch memory, and
	 * the last of those does (kcoll_sched_data_phases()). */
	if ((rk->ph >= m->data_phases) == phase_moves(p) &&
	    (rk->ph >= m->data_phases || rk->ph + 1 == m->data_phases)) {
		MFAIL(m, "phase %u %s memory, %u of %u phases said to", rk->ph,
		      phase_moves(p) ? "touches" : "touches no", m->data_phases,
		      m->nph);
		return false;
	}
	if (rk->ph >= m->data_phases)
		stats.empty_tail++;
	/* Landed or sent ahead (before this copy, which must not touch
	 * either). */
	rk->recv_done = !p->has_recv || (rk->ph && rk->ahead_done);
	if (p->copy.cnt && !same(p->copy.src, p->copy.dst))
		memcpy(reg(m, p->copy.dst), reg(m, p->copy.src),
		       p->copy.cnt * sizeof(union elem));
	rk->send_done = !p->has_send || (rk->ph && rk->sahead_done) ||
			rk->ph < rk->early_next;
	rk->ahead_ok = rk->sahead_ok = false;
	rk->ahead_done = rk->sahead_done = false;
	if (rk->ph + 1 < m->nph) {
		kcoll_sched_phase(&m->a, rk->ph + 1, &rk->nx);
		rk->ahead_ok = kcoll_sched_recv_ahead(&m->a, p, &rk->nx);
		if (rk->ahead_ok)
			stats.ahead++;
		rk->sahead_ok = kcoll_sched_send_ahead(&m->a, p, &rk->nx) &&
				rk->ph + 1 >= rk->early_next;
		if (rk->sahead_ok)
			stats.sahead++;
	}
	stats.phases++;
	return true;
}

/* A send that went early: a copy of its bytes, until its phase. */
struct early_msg {
	struct early_msg *next;
	const struct spec *s;
	u32 from, phase;
	u64 cnt;
	union elem data[];
};

/* @b's current receive, from @from, is waiting in its mail. */
static bool mail_waiting(const struct mrank *b, u32 from)
{
	const struct early_msg *e;

	for (e = b->mail; e; e = e->next)
		if (e->s == b->ops[b->op].s && e->from == from &&
		    e->phase == b->ph)
			return true;
	return false;
}

/*
 * May @from's send (@snext: its next phase's, sent ahead once its current
 * one has gone) move to @to's receive (@rnext: its next phase's, granted
 * ahead) now? Ahead, both ends must be at the same phase of the same
 * operation; in step, a mismatch is the schedule's error (xfer()).
 */
static bool can_xfer(struct world *w, u32 from, u32 to, bool snext,
		     bool rnext)
{
	struct mrank *a = &w->rk[from], *b = &w->rk[to];
	const struct kcoll_ssend *sd = snext ? &a->nx.send : &a->p.send;
	const struct kcoll_srecv *rv = rnext ? &b->nx.recv : &b->p.recv;

	if (a->done || b->done || sd->peer != to || rv->peer != from)
		return false;
	if (snext ? !a->send_done || !a->sahead_ok || a->sahead_done :
		    a->send_done || (sd->fwd && !a->recv_done))
		return false;
	if (rnext ? !b->ahead_ok || b->ahead_done :
		    b->recv_done || mail_waiting(b, from))
		return false;
	return (!snext && !rnext) ||
	       (a->op == b->op && a->ph + snext == b->ph + rnext);
}

/* Move that message; false on a phase or count mismatch. */
static bool xfer(struct world *w, u32 from, u32 to, bool snext, bool rnext)
{
	struct mrank *a = &w->rk[from], *b = &w->rk[to];
	struct mop *ma = &a->ops[a->op], *mb = &b->ops[b->op];
	const struct kcoll_ssend *snd = snext ? &a->nx.send : &a->p.send;
	const struct kcoll_srecv *rcv = rnext ? &b->nx.recv : &b->p.recv;
	u32 sph = a->ph + snext, rph = b->ph + rnext;
	union elem *src, *dst, *opd;
	u64 i;

	/* The engine matches the receiver's grants by phase index. */
	if (sph != rph) {
		MFAIL(mb, "phase %u receives from %u, which sends in its "
		      "phase %u", rph, from, sph);
		return false;
	}
	if (snd->cnt != rcv->cnt) {
		MFAIL(mb, "phase %u receives %" PRIu64 " from %u, which "
		      "sends %" PRIu64 " in its phase %u (%s)", rph,
		      rcv->cnt, from, snd->cnt, sph, op_name(ma->a.opcode));
		return false;
	}
	src = reg(ma, snd->src);
	dst = reg(mb, rcv->dst);
	opd = rcv->reduce ? reg(mb, rcv->operand) : NULL;
	for (i = 0; i < rcv->cnt; i++)
		dst[i] = opd ? reduce1(mb->a.redop, opd[i], src[i]) : src[i];
	if (snext) {
		a->sahead_done = true;
		stats.sent_ahead++;
	} else {
		a->send_done = true;
	}
	if (rnext) {
		b->ahead_done = true;
		stats.landed_ahead++;
	} else {
		b->recv_done = true;
	}
	stats.transfers++;
	return true;
}

/* Finish rank @r's phase (the avg step last) and enter the next one. */
static bool finish_phase(struct world *w, u32 r)
{
	struct mrank *rk = &w->rk[r];
	struct mop *m = &rk->ops[rk->op];
	union elem *v;
	u64 i;

	if (rk->p.avg_cnt) {
		v = reg(m, rk->p.avg);
		for (i = 0; i < rk->p.avg_cnt; i++)
			v[i].d /= m->a.nranks;
	}
	rk->ph++;
	return enter_phase(w, r);
}

/*
 * Move @from's send (@snext: its next phase's) to @to's receive (@rnext:
 * its next phase's, which has not opened) if it can now; *@did if it
 * moved. False on an error.
 */
static bool try_move(struct world *w, u32 from, u32 to, bool snext,
		     bool rnext, bool *did)
{
	if (!can_xfer(w, from, to, snext, rnext))
		return true;
	*did = true;
	return xfer(w, from, to, snext, rnext);
}

/*
 * Rank @r's current phase has sent: send the later phases' sends that the
 * rule lets go now, each a copy of its bytes into its receiver's mail (as
 * the engine's eager transfers ahead), as far as it lets them.
 */
static void send_early(struct world *w, u32 r, bool *did)
{
	struct mrank *rk = &w->rk[r];
	struct mop *m = &rk->ops[rk->op];
	u32 j = rk->early_next > rk->ph + 1 ? rk->early_next : rk->ph + 1;
	u32 lim = rk->ph + 1 + KCOLL_SCHED_EARLY_MAX;

	if (lim > m->nph)
		lim = m->nph;
	for (; j < lim; j++) {
		struct kcoll_phase pj;
		struct early_msg *e;
		struct mrank *to;

		kcoll_sched_phase(&m->a, j, &pj);
		if (!pj.has_send)
			continue;
		/* Sent ahead already (kcoll_sched_send_ahead()), or not
		 * allowed: not while this phase runs. */
		if ((j == rk->ph + 1 && rk->sahead_done) ||
		    !kcoll_sched_send_early(&m->a, rk->ph, j, &pj)) {
			rk->early_stop = true;
			break;
		}
		e = malloc(sizeof(*e) + pj.send.cnt * sizeof(union elem));
		if (!e)
			exit(2);
		e->s = m->s;
		e->from = r;
		e->phase = j;
		e->cnt = pj.send.cnt;
		memcpy(e->data, reg(m, pj.send.src),
		       pj.send.cnt * sizeof(union elem));
		to = &w->rk[pj.send.peer < w->n ? pj.send.peer : r];
		e->next = to->mail;
		to->mail = e;
		if (j == rk->ph + 1)
			rk->sahead_ok = false;
		if (j - rk->ph > stats.early_reach)
			stats.early_reach = j - rk->ph;
		stats.sent_early++;
		*did = true;
	}
	rk->early_next = j;
}

/*
 * Rank @r's current receive from the mail, if its copy is there; false on
 * a count mismatch.
 */
static bool take_mail(struct world *w, u32 r, bool *did)
{
	struct mrank *rk = &w->rk[r];
	struct mop *m = &rk->ops[rk->op];
	const struct kcoll_srecv *rcv = &rk->p.recv;
	struct early_msg **pe, *e;
	union elem *dst, *opd;
	u64 i;

	for (pe = &rk->mail; (e = *pe); pe = &e->next)
		if (e->s == m->s && e->from == rcv->peer &&
		    e->phase == rk->ph)
			break;
	if (!e)
		return true;
	if (e->cnt != rcv->cnt) {
		MFAIL(m, "phase %u receives %" PRIu64 " from %u, which sent "
		      "%" PRIu64 " early", rk->ph, rcv->cnt, e->from, e->cnt);
		return false;
	}
	dst = reg(m, rcv->dst);
	opd = rcv->reduce ? reg(m, rcv->operand) : NULL;
	for (i = 0; i < rcv->cnt; i++)
		dst[i] = opd ? reduce1(m->a.redop, opd[i], e->data[i]) :
			       e->data[i];
	*pe = e->next;
	free(e);
	rk->recv_done = true;
	stats.transfers++;
	*did = true;
	return true;
}

/* Run every rank to completion; false on an error or a deadlock. */
static bool execute(struct world *w)
{
	bool progress = true;
	u32 r;

	for (r = 0; r < w->n; r++)
		if (!enter_phase(w, r))
			return false;
	while (progress) {
		progress = false;
		for (r = 0; r < w->n; r++) {
			struct mrank *rk = &w->rk[r];

			while (!rk->done) {
				bool did = false;

				/* Ahead first, whenever it can: the order
				 * that finds a rule that is too loose. */
				if (w->early && rk->send_done &&
				    !rk->early_stop)
					send_early(w, r, &did);
				if ((!rk->recv_done && !take_mail(w, r, &did)) ||
				    (rk->sahead_ok && !rk->sahead_done &&
				     (!try_move(w, r, rk->nx.send.peer, true,
						true, &did) ||
				      !try_move(w, r, rk->nx.send.peer, true,
						false, &did))) ||
				    (rk->ahead_ok && !rk->ahead_done &&
				     !try_move(w, rk->nx.recv.peer, r, false,
					       true, &did)) ||
				    (!rk->send_done &&
				     !try_move(w, r, rk->p.send.peer, false,
					       true, &did)) ||
				    (!rk->recv_done &&
				     !try_move(w, rk->p.recv.peer, r, false,
					       false, &did)) ||
				    (!rk->send_done &&
				     !try_move(w, r, rk->p.send.peer, false,
					       false, &did)))
					return false;
				if (rk->send_done && rk->recv_done) {
					if (!finish_phase(w, r))
						return false;
					did = true;
				}
				if (!did)
					break;
				progress = true;
			}
		}
	}
	for (r = 0; r < w->n; r++) {
		struct mrank *rk = &w->rk[r];

		if (rk->mail) {
			UNIT_FAIL("rank %u: phase %u's early transfer from "
				  "%u never received", r, rk->mail->phase,
				  rk->mail->from);
			return false;
		}
		if (!rk->done) {
			MFAIL(&rk->ops[rk->op], "deadlock in phase %u "
			      "(send %d to %u done %d, recv %d from %u done %d)",
			      rk->ph, rk->p.has_send, rk->p.send.peer,
			      rk->send_done, rk->p.has_recv, rk->p.recv.peer,
			      rk->recv_done);
			return false;
		}
	}
	return true;
}

/* ------------------------------------------------------------------ */
/* Reference and result checks                                         */
/* ------------------------------------------------------------------ */

/* The element-wise reduction over all ranks of their inputs. */
static union elem *reference(const struct spec *s)
{
	u64 len = input_len(s), j;
	union elem *ref = alloc_elems(len);
	u32 r;

	for (j = 0; j < len; j++) {
		union elem acc = gen(s, 0, j);

		for (r = 1; r < s->n; r++)
			acc = reduce1(s->redop, acc, gen(s, r, j));
		if (s->redop == KCOLL_REDOP_AVG)
			acc.d /= s->n;
		ref[j] = acc;
	}
	return ref;
}

/* Compare @cnt elements of @got with @want; reports the first mismatch. */
static bool cmp_elems(const struct mop *m, const char *what, u32 redop,
		      const union elem *got, const union elem *want, u64 cnt)
{
	u64 i;

	for (i = 0; i < cnt; i++) {
		if (!elem_eq(redop, got[i], want[i])) {
			if (redop == KCOLL_REDOP_AVG)
				MFAIL(m, "%s[%" PRIu64 "] = %g, expected %g",
				      what, i, got[i].d, want[i].d);
			else
				MFAIL(m, "%s[%" PRIu64 "] = %" PRId64
				      " (0x%" PRIx64 "), expected %" PRId64
				      " (0x%" PRIx64 ")", what, i, got[i].i,
				      (u64)got[i].i, want[i].i,
				      (u64)want[i].i);
			return false;
		}
	}
	return true;
}

/* Expected value of one element of a non-reducing result. */
static bool check_gathered(const struct mop *m, const union elem *got,
			   u32 from, u64 from_off, u64 cnt, const char *what)
{
	u64 i;

	for (i = 0; i < cnt; i++) {
		union elem want = gen(m->s, from, from_off + i);

		if (got[i].i != want.i) {
			MFAIL(m, "%s[%" PRIu64 "] = 0x%" PRIx64 ", expected "
			      "element %" PRIu64 " of rank %u (0x%" PRIx64 ")",
			      what, i, (u64)got[i].i, from_off + i, from,
			      (u64)want.i);
			return false;
		}
	}
	return true;
}

/* Is element @i of rank @r's receive buffer in one of @s's blocks? */
static bool in_vblock(const struct spec *s, u32 r, u64 i)
{
	u32 k = s->op == KCOLL_OP_ALLTOALLV ? 2 : 0, j;
	const u64 *c = vec_of(s, r, k), *d = vec_of(s, r, k + 1);

	for (j = 0; j < s->n; j++)
		if (c[j] && i >= d[j] && i < d[j] + c[j])
			return true;
	return false;
}

/* The v-variants: every block where the tables put it, and nothing
 * written between the blocks. */
static void check_vresult(const struct mop *m, const union elem *ref)
{
	const struct spec *s = m->s;
	const union elem *recv = m->buf[KCOLL_SBUF_RECV];
	u32 r = m->a.rank, n = s->n, b;
	const u64 *c = vec_of(s, r, 0), *d;
	u64 i;

	switch (s->op) {
	case KCOLL_OP_ALLGATHERV:
		d = vec_of(s, r, 1);
		for (b = 0; b < n; b++)
			if (!check_gathered(m, recv + d[b], b, 0, c[b],
					    "recv block"))
				return;
		break;
	case KCOLL_OP_REDUCE_SCATTERV:
		cmp_elems(m, "recv", s->redop, recv, ref + vsum(c, r), c[r]);
		return;
	case KCOLL_OP_ALLTOALLV:
		for (b = 0; b < n; b++)
			if (!check_gathered(m, recv + vec_of(s, r, 3)[b], b,
					    vec_of(s, b, 1)[r],
					    vec_of(s, r, 2)[b], "recv block"))
				return;
		break;
	}
	for (i = 0; i < m->len[KCOLL_SBUF_RECV]; i++) {
		if (recv[i].i != POISON && !in_vblock(s, r, i)) {
			MFAIL(m, "recv[%" PRIu64 "], between the blocks, "
			      "was written", i);
			return;
		}
	}
}

static void check_result(const struct mop *m, const union elem *ref)
{
	const struct spec *s = m->s;
	const union elem *send = m->buf[KCOLL_SBUF_SEND];
	const union elem *recv = m->buf[KCOLL_SBUF_RECV];
	u32 r = m->a.rank, n = s->n, b;
	u64 c = s->count;

	switch (m->a.opcode) {
	case KCOLL_OP_ALLREDUCE:
		cmp_elems(m, "recv", s->redop, recv, ref, c);
		break;
	case KCOLL_OP_REDUCE:
		if (r == s->root)
			cmp_elems(m, "recv", s->redop, recv, ref, c);
		break;
	case KCOLL_OP_BROADCAST:
		check_gathered(m, recv, s->root, 0, c, "recv");
		break;
	case KCOLL_OP_ALLGATHER:
		for (b = 0; b < n; b++)
			if (!check_gathered(m, recv + (u64)b * c, b, 0, c,
					    "recv block"))
				break;
		break;
	case KCOLL_OP_REDUCE_SCATTER:
		if (!m->a.in_place) {
			cmp_elems(m, "recv", s->redop, recv, ref + (u64)r * c,
				  c);
			break;
		}
		cmp_elems(m, "send block rank", s->redop, send + (u64)r * c,
			  ref + (u64)r * c, c);
		/* The other blocks are left alone. */
		for (b = 0; b < n; b++)
			if (b != r)
				cmp_elems(m, "send block (input)",
					  KCOLL_REDOP_NONE, send + (u64)b * c,
					  m->in + (u64)b * c, c);
		break;
	case KCOLL_OP_ALLTOALL:
		for (b = 0; b < n; b++)
			if (!check_gathered(m, recv + (u64)b * c, b,
					    (u64)r * c, c, "recv block"))
				break;
		break;
	case KCOLL_OP_GATHER:
		for (b = 0; r == s->root && b < n; b++)
			if (!check_gathered(m, recv + (u64)b * c, b, 0, c,
					    "recv block"))
				break;
		break;
	case KCOLL_OP_SCATTER:
		if (r == s->root && m->a.in_place)	/* its block stays */
			cmp_elems(m, "send (input, in place)",
				  KCOLL_REDOP_NONE, send, m->in, (u64)n * c);
		else
			check_gathered(m, recv, s->root, (u64)r * c, c, "recv");
		break;
	case KCOLL_OP_RECV:
		check_gathered(m, recv, s->src, 0, c, "recv");
		break;
	case KCOLL_OP_ALLGATHERV:
	case KCOLL_OP_REDUCE_SCATTERV:
	case KCOLL_OP_ALLTOALLV:
		check_vresult(m, ref);
		break;
	default:
		break;
	}
	/* The send buffer is read only. */
	if (!m->a.in_place && m->len[KCOLL_SBUF_SEND] && m->in)
		cmp_elems(m, "send (input)", KCOLL_REDOP_NONE, send, m->in,
			  m->len[KCOLL_SBUF_SEND]);
}

/* ------------------------------------------------------------------ */
/* Driver                                                              */
/* ------------------------------------------------------------------ */

/* Static pass only while it stays cheap (n*n pair table). */
#define PAIR_CHECK_MAX_N	300

/*
 * Run a sequence of operations on n ranks: every rank does its part of
 * specs[0], then of specs[1], ... Returns false if anything failed.
 */
bool run_world(const struct spec *specs, u32 nspecs, u32 n)
{
	struct world w = { .n = n, .specs = specs, .nspecs = nspecs };
	bool ok = true;
	u32 r, k;

	stats.runs++;
	/* Every other run sends early (the rest leave the phases that
	 * allow it to the sends ahead, which early sends would take). */
	w.early = stats.runs & 1;
	w.rk = calloc(n, sizeof(*w.rk));
	w.ref = calloc(nspecs, sizeof(*w.ref));
	if (!w.rk || !w.ref)
		exit(2);
	for (k = 0; k < nspecs; k++)
		if (is_reducing(specs[k].op))
			w.ref[k] = reference(&specs[k]);
	for (r = 0; r < n; r++) {
		struct mrank *rk = &w.rk[r];

		rk->ops = calloc(nspecs ? nspecs : 1, sizeof(*rk->ops));
		if (!rk->ops)
			exit(2);
		for (k = 0; k < nspecs && ok; k++) {
			const struct spec *s = &specs[k];

			if (is_p2p(s->op) && r != s->src && r != s->root)
				continue;
			ok = mop_init(&rk->ops[rk->nops], s, r);
			rk->nops++;
		}
	}
	if (ok && n <= PAIR_CHECK_MAX_N)
		ok = pairs_match(&w);
	if (ok)
		ok = execute(&w);
	for (r = 0; r < n; r++) {
		for (k = 0; k < w.rk[r].nops; k++) {
			struct mop *m = &w.rk[r].ops[k];

			if (ok)
				check_result(m, w.ref[m->s - specs]);
		}
		free(w.rk[r].ops);
		while (w.rk[r].mail) {
			struct early_msg *e = w.rk[r].mail;

			w.rk[r].mail = e->next;
			free(e);
		}
	}
	arena_reset();
	free(w.ref);
	free(w.rk);
	return ok && !unit_fails();
}

u64 salt_next;

