/* SPDX-License-Identifier: MIT */
/*
 * The in-memory model of a communicator that executes kcoll's schedules
 * (kmod/kcoll_sched.c) with real data: what tests/unit/test_sched.c and
 * tests/fuzz/fuzz_sched.c share. The rules it holds schedules to are in
 * sched_model.c.
 */
#ifndef SCHED_MODEL_H
#define SCHED_MODEL_H

#include <inttypes.h>
#include <stdint.h>

#include "kcoll_sched.h"
#include "kcoll_cost.h"
#include "kcoll_shape.h"
#include "unit.h"

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#endif

union elem {
	int64_t i;
	double d;
};

#define POISON		((int64_t)0x5a5a5a5a5a5a5a5aULL)

/*
 * One operation as the test describes it. For SEND/RECV a spec is one
 * message: rank @src does SEND to @root, rank @root does RECV from @src,
 * the other ranks do nothing.
 */
struct spec {
	u32 op;
	u32 redop;
	u32 n;
	u32 root;
	u32 src;		/* SEND/RECV only */
	u64 count;
	bool ip;
	u8 algo;		/* enum kcoll_algo */
	u64 salt;
	/* The v-variants: every rank's count table (struct kcoll_vec),
	 * rank r's at vtab + r * vec_words(op) * n; count is 0. */
	const u64 *vtab;
};

/* Words per rank of @op's count table (0: not a v-variant). */
static inline u32 vec_words(u32 op)
{
	return kcoll_shape(op) ? kcoll_shape(op)->vec : 0;
}

/* Rank @r's table of @s, array @k of it (struct kcoll_vec). */
static inline const u64 *vec_of(const struct spec *s, u32 r, u32 k)
{
	return s->vtab + ((u64)r * vec_words(s->op) + k) * s->n;
}

/* One rank's part in one operation. */
struct mop {
	const struct spec *s;
	struct kcoll_sched_args a;
	u32 nph;
	u32 data_phases;	/* kcoll_sched_data_phases() */
	union elem *buf[KCOLL_SBUF_NR];
	u64 len[KCOLL_SBUF_NR];
	union elem *in;		/* copy of the rank's input, for checks */
	u64 in_len;
};

struct early_msg;

struct mrank {
	struct mop *ops;
	u32 nops;
	u32 op, ph;		/* current operation and phase */
	bool done;
	struct kcoll_phase p;
	bool send_done, recv_done;
	/* The next phase's receive may land now, as the engine's grants
	 * ahead let it (kcoll_sched_recv_ahead()); and it has. */
	struct kcoll_phase nx;
	bool ahead_ok, ahead_done;
	/* The next phase's send may go now, once this phase's has, as the
	 * engine's sends ahead let it (kcoll_sched_send_ahead()); and it
	 * has. */
	bool sahead_ok, sahead_done;
	/* Later phases' sends that went early, with a copy of their bytes,
	 * as the engine's eager transfers ahead do
	 * (kcoll_sched_send_early()): phases below early_next have, and
	 * early_stop: the rule refused the next one while this phase runs.
	 * The copies addressed to this rank wait in @mail until it reaches
	 * their phase. */
	u32 early_next;
	bool early_stop;
	struct early_msg *mail;
};

struct world {
	u32 n;
	struct mrank *rk;
	const struct spec *specs;
	u32 nspecs;
	union elem **ref;	/* per spec: reduced reference, or NULL */
	bool early;		/* sends go early (send_early()) */
};

/* Every reduction the model checks (elements: int64, double for AVG). */
static const u32 all_redops[] = {
	KCOLL_REDOP_SUM, KCOLL_REDOP_PROD, KCOLL_REDOP_MIN, KCOLL_REDOP_MAX,
	KCOLL_REDOP_AVG,
};

/* Totals over the whole program, reported at the end. */
struct sched_model_stats {
	u64 runs, phases, transfers;
	u64 ahead;		/* phases whose next receive may land ahead */
	u64 landed_ahead;	/* ... and transfers that did */
	u64 sahead;		/* phases whose next send may go ahead */
	u64 sent_ahead;		/* ... and transfers that did */
	u64 sent_early;		/* transfers that went early, copied */
	u64 early_reach;	/* the most phases ahead one went */
	u64 empty_tail;		/* phases after the last touching memory */
};
extern struct sched_model_stats stats;
/* Varies the inputs from one run to the next. */
extern u64 salt_next;

/* Diagnostic prefix naming the operation and the rank. */
#define MFAIL(m, fmt, ...) \
	UNIT_FAIL("%s/%s redop %u n %u root %u count %" PRIu64 " ip %d " \
		  "rank %u: " fmt, op_name((m)->a.opcode), \
		  kcoll_algo_name((m)->a.algo), (m)->a.redop, (m)->a.nranks, \
		  (m)->a.root, (m)->a.count, (m)->a.in_place, (m)->a.rank, \
		  __VA_ARGS__)

const char *op_name(u32 op);
bool is_reducing(u32 op);
bool is_p2p(u32 op);
void uapi_counts(const struct kcoll_sched_args *a, u64 *snd, u64 *rcv);
u32 ceil_log2(u32 n);
u32 expected_nphases(const struct kcoll_sched_args *a);
void arena_free(void);
bool mop_init(struct mop *m, const struct spec *s, u32 r);
bool phase_valid(const struct mop *m, u32 idx,
			const struct kcoll_phase *p);
bool phase_eq(const struct kcoll_phase *a, const struct kcoll_phase *b);
bool run_world(const struct spec *specs, u32 nspecs, u32 n);

#endif /* SCHED_MODEL_H */
