// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over the collective schedules (kmod/kcoll_sched.c) and
 * the cost model's choice (kmod/kcoll_cost.c).
 *
 * It drives the in-memory model the unit test uses (tests/unit/
 * sched_model.[ch]): every rank's schedule is executed with real
 * data (rendezvous transfers, FIFO per ordered pair, phases validated
 * before they run, buffers of exactly the declared sizes with poisoned
 * redzones, results against a reference computed from the uapi
 * conventions). The input chooses up to three operations run back to back
 * on the same ranks (opcode, reduction, algorithm, root, count, in place)
 * on at most 64 ranks with small counts, so each input takes milliseconds.
 *
 * Beyond what can be executed (up to KCOLL_MAX_RANKS ranks, counts up to
 * the module's limit), it checks every rank's geometry statically: phase
 * count as documented, buffer sizes as the uapi says, scratch within its
 * bound, and sampled phases within those buffers. It also checks
 * kcoll_sched_check() against the documented algorithm table, and that
 * kcoll_sched_choose() with fuzzed tunables always returns an algorithm
 * that applies to the collective.
 *
 * A failure prints the model's diagnostics and aborts (libFuzzer saves the
 * input; run the target on that file to repeat it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_model.h"
#include "fuzz_seed.h"

struct cursor {
	const uint8_t *p;
	size_t left;
};

static u64 take(struct cursor *c, unsigned int bytes)
{
	u64 v = 0;
	unsigned int i;

	for (i = 0; i < bytes; i++) {
		v |= (u64)(c->left ? *c->p : 0) << (8 * i);
		if (c->left) {
			c->p++;
			c->left--;
		}
	}
	return v;
}

static __attribute__((noreturn)) void die(const char *what)
{
	fflush(stdout);
	fprintf(stderr, "fuzz_sched: %s\n", what);
	abort();
}

static const u32 coll_ops[] = {
	KCOLL_OP_ALLREDUCE, KCOLL_OP_REDUCE, KCOLL_OP_BROADCAST,
	KCOLL_OP_ALLGATHER, KCOLL_OP_REDUCE_SCATTER, KCOLL_OP_ALLTOALL,
	KCOLL_OP_SEND, KCOLL_OP_BARRIER, KCOLL_OP_GATHER, KCOLL_OP_SCATTER,
};

/* kcoll_sched.h: which algorithm applies to which collective. */
static bool ref_algo_ok(u32 op, u8 algo)
{
	switch (algo) {
	case KCOLL_ALGO_DEFAULT:
		return true;
	case KCOLL_ALGO_RING:
		return op == KCOLL_OP_ALLREDUCE || op == KCOLL_OP_ALLGATHER ||
		       op == KCOLL_OP_REDUCE_SCATTER;
	case KCOLL_ALGO_CHAIN:
		return op == KCOLL_OP_BROADCAST || op == KCOLL_OP_REDUCE;
	case KCOLL_ALGO_PAIRWISE:
		return op == KCOLL_OP_ALLTOALL;
	case KCOLL_ALGO_DISSEMINATION:
		return op == KCOLL_OP_BARRIER;
	case KCOLL_ALGO_DIRECT:
		return op == KCOLL_OP_SEND || op == KCOLL_OP_RECV ||
		       op == KCOLL_OP_GATHER || op == KCOLL_OP_SCATTER;
	case KCOLL_ALGO_RECDOUBLING:
		return op == KCOLL_OP_ALLREDUCE || op == KCOLL_OP_ALLGATHER;
	case KCOLL_ALGO_BINOMIAL:
		return op == KCOLL_OP_BROADCAST || op == KCOLL_OP_REDUCE ||
		       op == KCOLL_OP_ALLREDUCE || op == KCOLL_OP_GATHER ||
		       op == KCOLL_OP_SCATTER;
	case KCOLL_ALGO_RABENSEIFNER:
		return op == KCOLL_OP_ALLREDUCE;
	case KCOLL_ALGO_RECHALVING:
		return op == KCOLL_OP_REDUCE_SCATTER;
	case KCOLL_ALGO_BRUCK:
		return op == KCOLL_OP_ALLTOALL;
	case KCOLL_ALGO_FARFIRST:
		return op == KCOLL_OP_ALLGATHER;
	default:
		return false;
	}
}

/* One operation from the input; false if it is not a valid one (then
 * kcoll_sched_check() must say so on every rank). */
static bool decode_spec(struct cursor *c, struct spec *s, u32 n, bool big)
{
	u32 opi = take(c, 1), sel = take(c, 1);
	u64 cnt = take(c, big ? 6 : 3);

	memset(s, 0, sizeof(*s));
	s->op = coll_ops[opi % ARRAY_SIZE(coll_ops)];
	s->n = n;
	s->algo = (u8)take(c, 1);
	if (!(sel & 0x80))
		s->algo %= KCOLL_ALGO_NR;
	if (is_reducing(s->op))
		s->redop = all_redops[(sel & 7) % ARRAY_SIZE(all_redops)];
	s->ip = sel & 8;
	s->root = (u32)take(c, 2) % n;
	s->src = (u32)take(c, 2) % n;
	if (s->op == KCOLL_OP_BARRIER) {
		cnt = 0;
	} else if (!big) {
		/* n * n * count elements in all: small enough to execute. */
		u64 cap = (1U << 16) / ((u64)n * n);

		cnt %= (cap ? cap : 1) + 1;
	}
	s->count = cnt;
	s->salt = take(c, 1);
	return ref_algo_ok(s->op, s->algo) &&
	       !(is_p2p(s->op) && (n < 2 || s->src == s->root));
}

/* kcoll_sched_check() for every rank of @s agrees with @valid. */
static void check_validity(const struct spec *s, bool valid)
{
	struct kcoll_sched_args a;
	struct mop m;
	u32 r, step = s->n > 64 ? s->n / 61 + 1 : 1;

	for (r = 0; r < s->n; r += step) {
		memset(&a, 0, sizeof(a));
		a.opcode = s->op;
		a.redop = s->redop;
		a.rank = r;
		a.nranks = s->n;
		a.count = s->count;
		a.algo = s->algo;
		a.root = s->root;
		a.in_place = s->ip;
		if (is_p2p(s->op)) {
			if (r != s->src && r != s->root)
				continue;
			a.opcode = r == s->src ? KCOLL_OP_SEND : KCOLL_OP_RECV;
			a.root = r == s->src ? s->root : s->src;
			a.in_place = false;
		}
		if (kcoll_sched_algo_ok(s->op, s->algo) != ref_algo_ok(s->op, s->algo))
			die("kcoll_sched_algo_ok disagrees with the documented table");
		if ((kcoll_sched_check(&a) == 0) != valid) {
			printf("# %s/%u n %u rank %u root %u count %llu: kcoll_sched_check %d, expected %s\n",
			       op_name(a.opcode), s->algo, s->n, r, a.root,
			       (unsigned long long)a.count, kcoll_sched_check(&a),
			       valid ? "valid" : "invalid");
			die("kcoll_sched_check");
		}
		if (!valid) {
			if (kcoll_sched_nphases(&a))
				die("an invalid operation has phases");
			continue;
		}
		/* Static geometry: what mop_init() and phase_valid() check,
		 * without buffers, on sampled phases. */
		memset(&m, 0, sizeof(m));
		m.s = s;
		m.a = a;
		m.nph = kcoll_sched_nphases(&a);
		if (m.nph != expected_nphases(&a)) {
			MFAIL(&m, "nphases %u, expected %u", m.nph,
			      expected_nphases(&a));
			die("phase count");
		}
		{
			u64 snd, rcv;
			u32 k, idx[4] = { 0, m.nph / 2, m.nph - 1,
					  (u32)(s->salt * 2654435761U) };

			uapi_counts(&a, &snd, &rcv);
			m.len[KCOLL_SBUF_SEND] = kcoll_sched_send_count(&a);
			m.len[KCOLL_SBUF_RECV] = kcoll_sched_recv_count(&a);
			m.len[KCOLL_SBUF_TMP] = kcoll_sched_tmp_count(&a);
			if (m.len[KCOLL_SBUF_SEND] != snd ||
			    m.len[KCOLL_SBUF_RECV] != rcv)
				die("buffer sizes differ from the uapi's");
			if (m.len[KCOLL_SBUF_TMP] > 2 * (u64)s->n * s->count)
				die("scratch beyond 2 n count");
			for (k = 0; k < 4 && m.nph; k++) {
				struct kcoll_phase p;

				kcoll_sched_phase(&a, idx[k] % m.nph, &p);
				if (!phase_valid(&m, idx[k] % m.nph, &p))
					die("invalid phase");
			}
		}
	}
}

/* The cost model's choice applies to the collective, whatever the knobs. */
static void check_choice(struct cursor *c, u32 n)
{
	struct kcoll_tune t;
	u32 op = coll_ops[take(c, 1) % ARRAY_SIZE(coll_ops)];
	u64 bytes = take(c, 6);
	u8 ch, a;

	kcoll_tune_init(&t);
	if (take(c, 1) & 1) {
		t.cost.alpha_ns = (u32)take(c, 4);
		t.cost.beta_ps = (u32)take(c, 4);
		t.cost.gamma_ps = (u32)take(c, 4);
		t.cost.copy_ns = (u32)take(c, 4);
		t.cost.copy_ps = (u32)take(c, 4);
		t.cost.chunk_bytes = (u32)take(c, 4) | 1;	/* > 0 */
		t.coll[op].force = (u8)take(c, 1);
		t.coll[op].disabled = (u32)take(c, 4);
		for (a = 0; a < KCOLL_ALGO_NR; a++)
			t.coll[op].max_bytes[a] = take(c, 1) & 1 ? take(c, 4) : 0;
	}
	if (op == KCOLL_OP_SEND)
		return;		/* point to point: no choice */
	ch = kcoll_sched_choose(&t, op, n, bytes);
	if (ch == KCOLL_ALGO_DEFAULT || !ref_algo_ok(op, ch)) {
		printf("# %s n %u bytes %llu: chose %u (%s)\n", op_name(op), n,
		       (unsigned long long)bytes, ch, kcoll_algo_name(ch));
		die("kcoll_sched_choose returned an algorithm that does not apply");
	}
	/* No estimate for an algorithm that does not apply (an estimate may
	 * saturate at UINT64_MAX for one that does). */
	for (a = 1; a < KCOLL_ALGO_NR; a++)
		if (!ref_algo_ok(op, a) &&
		    kcoll_cost_ns(&t.cost, op, a, n, bytes) != UINT64_MAX)
			die("kcoll_cost_ns: an estimate for an algorithm that does not apply");
}

/*
 * Seeds are generated, not committed: with KCOLL_FUZZ_SEEDS=DIR the target
 * writes one record per collective (4 and 7 ranks, the default algorithm)
 * there and exits (tests/fuzz/run.sh).
 */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("KCOLL_FUZZ_SEEDS");
	u32 i, n;

	(void)argc;
	(void)argv;
	if (!dir)
		return 0;
	for (n = 4; n <= 7; n += 3) {
		for (i = 0; i < ARRAY_SIZE(coll_ops); i++) {
			/* mode, n, op, sel, count(3), algo, root(2), src(2),
			 * salt, then the cost-model record. */
			u8 rec[32] = { 0, (u8)(n - 1), 0, (u8)i, 1, 5, 0, 0, 0,
				       1, 0, 0, 0, 7 };

			fuzz_seed_write(dir, rec, sizeof(rec), "seed-%s-%u",
					op_name(coll_ops[i]), n);
		}
	}
	exit(0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	struct spec specs[3];
	u32 mode = take(&c, 1), n, k, nspecs;
	bool big = mode & 1, all_valid = true;

	unit_st.cur_fails = 0;
	/* Up to 64 ranks executed; up to KCOLL_MAX_RANKS checked statically. */
	n = (u32)take(&c, 2);
	n = big ? n % KCOLL_MAX_RANKS + 1 : n % 64 + 1;
	nspecs = big ? 1 : (mode >> 1) % 3 + 1;
	for (k = 0; k < nspecs; k++) {
		bool valid = decode_spec(&c, &specs[k], n, big);

		check_validity(&specs[k], valid);
		all_valid &= valid;
	}
	if (unit_fails())
		die("static check failed");
	check_choice(&c, n);
	if (!big && all_valid && !run_world(specs, nspecs, n))
		die("schedule execution failed (see the diagnostics above)");
	return 0;
}
