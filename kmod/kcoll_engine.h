/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll collective engine, internal interface: what its files (kcoll_coll.c,
 * kcoll_progress.c, kcoll_grant.c, kcoll_eager.c, kcoll_sig.c, kcoll_rx.c,
 * kcoll_fail.c) share. The engine runs one rank's schedule (kcoll_sched.c)
 * of each operation over the communicator's connections.
 *
 * Data moves receiver-driven: for every chunk it wants, the receiver sends
 * a GRANT naming where the sender may write it (straight into the
 * destination buffer, or into a staging slot when the data must be
 * reduced); the sender answers with one RDMA WRITE WITH IMM per grant,
 * whose immediate names the grant. Grants and data travel in FIFO order per
 * (connection, kind), so both sides match them by order and check the
 * serial. Collectives additionally exchange a SIG (signature) with every
 * peer; an operation completes only when every peer's signature matched.
 * A failed operation sends ABORT to its peers and waits, before it lets go
 * of its memory, until every chunk it granted has landed or its sender has
 * aborted too (RC ordering: nothing follows an ABORT) or died.
 *
 * Everything here runs under comm->lock (see kcoll_comm.h), from ENTER
 * (issue), rdma_cm handlers and the CQ handlers (process context).
 */
#ifndef KCOLL_ENGINE_H
#define KCOLL_ENGINE_H

#include "kcoll_types.h"

/*
 * Lazy signatures (docs/DESIGN.md): on a connection where both ends offered
 * them, a collective whose every result depends on every rank
 * (kcoll_sched_all_dependent()), and a broadcast or reduce, whose root
 * depends on every rank (kcoll_sched_lazy(), op->lazy), sends no SIG and
 * waits for none:
 * the signature travels with the data instead (signed eager headers,
 * grants), checked before the data is used, so a rank that completes has
 * seen, along the data's paths, that every rank's signature equals its
 * own. A mismatch fails the op on the rank that sees it, whose ABORTs end
 * it everywhere. An op that has made no progress for KCOLL_SIG_LAZY_MS asks
 * its lazy peers for their SIGs, for the missing-rank report and for peers
 * whose differing operation waits for SIGs; one that is merely long (a
 * large transfer, moving) never asks, so a large communicator does not pay
 * a SIG and an answer per peer for every long collective.
 */
#define KCOLL_SIG_LAZY_MS	50

static inline struct kcoll_conn *kcoll_conn_of(struct kcoll_comm *comm, u32 rank)
{
	return rank < comm->nranks ? comm->conns[rank] : NULL;
}

/* Serial arithmetic on u32 sequence numbers. */
static inline bool kcoll_seq_before(u32 a, u32 b)
{
	return (s32)(a - b) < 0;
}

static inline u8 *kcoll_region(struct kcoll_task *op, const struct kcoll_sregion *r)
{
	return op->bufs[r->buf].vaddr + r->off * op->esize;
}

/* A message of @op to rank @peer, signed (kcoll_sched_sig()). */
static inline void kcoll_msg_init(struct kcoll_task *op, struct kcoll_wire_msg *m,
				  u8 type, u32 peer)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->kind = op->kind;
	m->seq = cpu_to_le32(op->seq);
	m->opcode = op->args.opcode;
	m->dtype = op->dtype;
	m->redop = op->redop;
	m->algo = op->args.algo;
	m->root = cpu_to_le32(op->kind == KCOLL_KIND_P2P ? 0 : op->args.root);
	m->count = cpu_to_le64(kcoll_sched_sig(&op->args, peer));
}

/* Does @m, from rank @peer, sign what @op expects of it? For P2P the
 * op's partner: a SEND matches a RECV and back. */
static inline bool kcoll_sig_match(struct kcoll_task *op,
				   const struct kcoll_wire_msg *m, u32 peer)
{
	u8 opcode = op->args.opcode;

	if (op->kind == KCOLL_KIND_P2P)
		opcode = opcode == KCOLL_OP_SEND ? KCOLL_OP_RECV : KCOLL_OP_SEND;
	return m->opcode == opcode && m->dtype == op->dtype &&
	       m->redop == op->redop && m->algo == op->args.algo &&
	       le64_to_cpu(m->count) ==
	       kcoll_sched_sig_peer(&op->args, peer) &&
	       (op->kind == KCOLL_KIND_P2P ||
		le32_to_cpu(m->root) == op->args.root);
}

static inline bool kcoll_conn_lazy(const struct kcoll_conn *conn)
{
	return conn->lazy_offer && conn->peer_lazy;
}

/* Eager point-to-point agreed on @conn: both ends' CREDITs said
 * KCOLL_CREDIT_P2P (docs/DESIGN.md, "Eager point-to-point"). */
static inline bool kcoll_conn_p2p(const struct kcoll_conn *conn)
{
	return conn->eager && conn->p2p_offer && conn->peer_p2p;
}

/* ... and a send that finds no slot may ask its receiver for a grant
 * (KCOLL_CREDIT_P2P_ASK). */
static inline bool kcoll_conn_p2p_ask(const struct kcoll_conn *conn)
{
	return kcoll_conn_p2p(conn) && conn->peer_p2p_ask;
}

/* Tokens that cover agreed on @conn: both ends' CREDITs said
 * KCOLL_CREDIT_COVER, with lazy signatures (docs/DESIGN.md, "Tokens that
 * cover"). */
static inline bool kcoll_conn_cover(const struct kcoll_conn *conn)
{
	return conn->eager && kcoll_conn_lazy(conn) && conn->cover_offer &&
	       conn->peer_cover;
}

/* Has @conn's peer confirmed its signature for collective @op? */
static inline bool kcoll_sig_confirmed(struct kcoll_task *op,
				       const struct kcoll_conn *conn)
{
	return op->sig_seen && test_bit(conn->peer, op->sig_seen);
}

/* The oldest collective not yet completed: every one before it has. */
static inline struct kcoll_task *kcoll_coll_head(struct kcoll_comm *comm)
{
	return list_first_entry_or_null(&comm->colls, struct kcoll_task, node);
}

static inline bool kcoll_op_is_head(struct kcoll_task *op)
{
	return op->kind == KCOLL_KIND_COLL && kcoll_coll_head(op->comm) == op;
}

/*
 * Is collective @seq over here (completed, so what comes for it is
 * stale)? Collectives complete in seq order: those before the head.
 */
static inline bool kcoll_coll_over(struct kcoll_comm *comm, u32 seq)
{
	struct kcoll_task *head = kcoll_coll_head(comm);

	return kcoll_seq_before(seq, head ? head->seq : comm->coll_seq);
}

/*
 * The collective @seq if it runs (has started) here, else NULL. The
 * running ones are the head and those started beside it: a prefix of
 * comm->colls, at most KCOLL_COLLS_IN_FLIGHT_MAX long.
 */
static inline struct kcoll_task *kcoll_coll_running(struct kcoll_comm *comm,
						    u32 seq)
{
	struct kcoll_task *op;

	list_for_each_entry(op, &comm->colls, node) {
		if (!op->started)
			break;
		if (op->seq == seq)
			return op;
	}
	return NULL;
}

/* Nothing can land in @op's memory any more and nothing of it is posted. */
static inline bool kcoll_op_quiet(struct kcoll_task *op)
{
	return !op->grants_out && !op->writes_inflight && !op->gmrs;
}

/*
 * The executor: where an operation's local steps run: a phase's copy, the
 * reduction of landed data into its destination, the AVG finish. The CPU
 * today (kcoll_exec_cpu, kcoll_progress.c: SIMD reductions in FPU sections
 * of 64 KiB); data the CPU cannot reach (GPU memory) needs one that runs
 * them where the data is. Set when the operation is prepared; called under
 * comm->lock, process context.
 */
struct kcoll_exec {
	const char *name;
	/* @bytes from @src to @dst; they may overlap. */
	void (*copy)(struct kcoll_task *op, u8 *dst, const u8 *src,
		     size_t bytes);
	/* dst[i] = dst[i] (op->redop) src[i], @n elements of op->dtype. */
	void (*reduce)(struct kcoll_task *op, u8 *dst, const u8 *src,
		       size_t n);
	/* p[i] /= nranks, @n elements (AVG's last step). */
	void (*avg)(struct kcoll_task *op, u8 *p, size_t n);
};

extern const struct kcoll_exec kcoll_exec_cpu;
/* Memory no CPU may touch: no step runs here yet (kcoll_op_nocpu() refuses
 * schedules that would need one); reaching it is a bug, counted, WARNed,
 * and the operation fails. The CUDA reducer replaces it. */
extern const struct kcoll_exec kcoll_exec_nocpu;

/* kcoll_fail.c */
u32 kcoll_abort_culprit(struct kcoll_conn *conn,
			const struct kcoll_wire_msg *m);
void kcoll_abort_lost(struct kcoll_conn *conn,
		      const struct kcoll_wire_msg *m);
int kcoll_abort_status(const struct kcoll_wire_msg *m);
void kcoll_op_abort_peers(struct kcoll_task *op, bool deferred);
void kcoll_op_fail(struct kcoll_task *op, int err);
void kcoll_op_fail_from(struct kcoll_task *op, int err, u32 peer);
void kcoll_op_drain_arm(struct kcoll_task *op);
u64 kcoll_op_mark(const struct kcoll_task *op);
void kcoll_report_set(struct kcoll_task *op, u64 ns);
void kcoll_timeout_arm(struct kcoll_comm *comm, unsigned long deadline);

/* kcoll_sig.c */
bool kcoll_op_check_sig(struct kcoll_task *op, struct kcoll_conn *conn,
			const struct kcoll_wire_msg *m);
void kcoll_op_check_sigs(struct kcoll_task *op, struct kcoll_conn *conn);
void kcoll_op_lazy_ask(struct kcoll_task *op);
int kcoll_op_send_sig(struct kcoll_task *op, struct kcoll_conn *conn,
		      u32 status);
bool kcoll_op_sigs_in(struct kcoll_task *op);
bool kcoll_op_sig_stranded(struct kcoll_task *op, u32 *peer);
void kcoll_sig_reply(struct kcoll_conn *conn);
void kcoll_sig_ask_add(struct kcoll_conn *conn, u32 seq);
bool kcoll_sig_asked(const struct kcoll_conn *conn, u32 seq);
void kcoll_sig_ask_del(struct kcoll_conn *conn, u32 seq);

/* kcoll_eager.c */
void kcoll_eager_start(struct kcoll_task *op, struct kcoll_conn *conn);
void kcoll_eager_sweep(struct kcoll_comm *comm);
void kcoll_engine_eager(struct kcoll_conn *conn, u32 imm,
			u32 byte_len);
bool kcoll_op_eager(const struct kcoll_task *op,
		    const struct kcoll_conn *conn, u64 bytes);
bool kcoll_op_eager_undecided(const struct kcoll_task *op,
			      const struct kcoll_conn *conn, u64 bytes);
void kcoll_op_eager_recv(struct kcoll_task *op, struct kcoll_conn *conn);
void kcoll_eager_p2p_granted(struct kcoll_task *op, struct kcoll_conn *conn);
bool kcoll_eager_p2p_here(const struct kcoll_conn *conn, u32 seq);
bool kcoll_p2p_waited(struct kcoll_task *op, struct kcoll_conn *conn);
void kcoll_p2p_ask(struct kcoll_task *op, struct kcoll_conn *conn);
void kcoll_p2p_asked(struct kcoll_conn *conn, u32 seq);
int kcoll_p2p_grants(struct kcoll_task *op, struct kcoll_conn *conn);
void kcoll_op_send_eager(struct kcoll_task *op, struct kcoll_conn *conn,
			 const u8 *src);
void kcoll_op_eager_sent(struct kcoll_task *op);
bool kcoll_eager_post_token(struct kcoll_task *op, struct kcoll_conn *conn,
			    u64 cover);

/* kcoll_token.c */
bool kcoll_op_token_held(const struct kcoll_task *op,
			 const struct kcoll_conn *conn);
bool kcoll_tokens_flush(struct kcoll_comm *comm);
void kcoll_eager_cover_in(struct kcoll_conn *conn, u32 base, u64 bits);

/* Has the token @op receives in phase @j come inside a later one's
 * (kcoll_eager_cover_in(); op->tok_cover has a bit per phase)? */
static inline bool kcoll_op_tok_covered(const struct kcoll_task *op, u32 j)
{
	return j < BITS_PER_TYPE(op->tok_cover) &&
	       (op->tok_cover & BIT_ULL(j));
}

/* kcoll_grant.c */
void kcoll_op_forget_grants(struct kcoll_task *op, struct kcoll_conn *conn);
void kcoll_op_grant(struct kcoll_task *op);
void kcoll_op_grant_ahead(struct kcoll_task *op);
void kcoll_op_send_ahead(struct kcoll_task *op);
void kcoll_op_send_early(struct kcoll_task *op);
bool kcoll_op_post_stopped(struct kcoll_task *op,
			   struct kcoll_conn *conn, int err);
void kcoll_op_send(struct kcoll_task *op);

/* kcoll_overlap.c */
bool kcoll_op_overlap(struct kcoll_task *a, struct kcoll_task *b);

/* kcoll_progress.c */
void kcoll_op_complete(struct kcoll_task *op);
void kcoll_op_free(struct kcoll_task *op);
bool kcoll_op_held(struct kcoll_task *op);
void kcoll_op_land(struct kcoll_task *op, const u8 *in, size_t off,
		   size_t len);

#endif /* KCOLL_ENGINE_H */
