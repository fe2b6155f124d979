// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll collective engine, tokens that cover: a broadcast's confirmation
 * token (an empty eager transfer back up its tree, docs/DESIGN.md, "Lazy
 * signatures") waits while the last token to the same peer is still on
 * the wire, and the tokens that gathered meanwhile go as one write whose
 * bitmap names the older ones (docs/DESIGN.md, "Tokens that cover").
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "kcoll_types.h"
#include "kcoll_conn.h"
#include "kcoll_stats.h"
#include "kcoll_engine.h"
#include "kcoll_sched.h"

/*
 * Is @op's current send a broadcast's confirmation token to @conn's peer
 * that kcoll_tokens_flush() sends, alone or with others? Only where both
 * ends agreed (kcoll_conn_cover()), and not for stream-ordered ones,
 * which run alone.
 */
bool kcoll_op_token_held(const struct kcoll_task *op,
			 const struct kcoll_conn *conn)
{
	return op->kind == KCOLL_KIND_COLL &&
	       op->args.opcode == KCOLL_OP_BROADCAST && !op->gpu &&
	       !op->send_total && op->phase >= op->data_phases &&
	       kcoll_conn_cover(conn);
}

/*
 * Through the NIC, one token write per connection is on the wire at a
 * time: until its send completion (the peer's NIC has it), the tokens
 * that come wait for it, as Nagle's small segments wait for an ACK. The
 * completion comes whatever the ranks do next, so no token waits on
 * another collective, and a token alone goes at once.
 */
static bool kcoll_token_busy(struct kcoll_conn *conn)
{
	if (conn->tok_busy && (s32)(conn->tx_done - conn->tok_mark) >= 0)
		conn->tok_busy = false;
	return conn->tok_busy;
}

/*
 * Send the tokens that wait (tok_want), per peer the youngest one's write
 * carrying the older ones within KCOLL_COVER_SPAN seqs of it. Called by
 * kcoll_engine_reap() once every collective has moved, so that the tokens
 * one pass readies go together. Returns whether any went (their
 * collectives move on). Must hold comm->lock.
 */
bool kcoll_tokens_flush(struct kcoll_comm *comm)
{
	struct kcoll_task *op, *o;
	bool sent = false;

	lockdep_assert_held(&comm->lock);
	/* Every event ends in a reap: most have no token waiting. */
	if (!comm->tok_waiting)
		return false;
	comm->tok_waiting = false;
	list_for_each_entry_reverse(op, &comm->colls, node) {
		struct kcoll_conn *conn;
		u32 peer, covered = 0;
		u64 bits = 0;

		if (!op->tok_want || op->error)
			continue;
		peer = op->ph.send.peer;
		conn = kcoll_conn_of(comm, peer);
		if (!conn || kcoll_token_busy(conn)) {
			comm->tok_waiting = true;	/* still */
			continue;
		}
		list_for_each_entry(o, &comm->colls, node) {
			if (o == op)
				break;
			if (o->tok_want && !o->error && o->ph.send.peer == peer)
				bits = kcoll_cover_add(bits, op->seq, o->seq);
		}
		if (!kcoll_eager_post_token(op, conn, bits)) {
			/* No slot: its CREDITS runs us again. */
			comm->tok_waiting = true;
			continue;
		}
		list_for_each_entry(o, &comm->colls, node) {
			if (o == op)
				break;
			if (o->tok_want && !o->error &&
			    o->ph.send.peer == peer &&
			    kcoll_cover_has(op->seq, bits, o->seq)) {
				kcoll_op_eager_sent(o);
				covered++;
			}
		}
		kcoll_stat_add(KCOLL_STAT_TOKENS_COVERED, covered);
		sent = true;
	}
	return sent;
}

/*
 * A token from @conn's peer for its collective @base covers its tokens for
 * the collectives of @bits (kcoll_cover_has()). Each such collective of
 * ours must be a broadcast with a token from that peer to receive: that
 * phase counts as received when the collective gets there
 * (kcoll_op_tok_covered()). A peer's token says that it completed the
 * broadcast's data phases, every transfer it used checked against its
 * signature, as a BYE's "completed" does ("Lazy signatures"); one that
 * names a collective of ours that expects none from it disagrees on that
 * collective, which fails (-EBADMSG, blaming it). Seqs of collectives
 * that are over, or not started here (no correct peer has data of those
 * to confirm), are ignored. Must hold comm->lock.
 */
void kcoll_eager_cover_in(struct kcoll_conn *conn, u32 base, u64 bits)
{
	struct kcoll_comm *comm = conn->comm;
	struct kcoll_task *op, *tmp;

	lockdep_assert_held(&comm->lock);
	list_for_each_entry_safe(op, tmp, &comm->colls, node) {
		struct kcoll_phase ph;
		u32 j;

		if (!op->started || op->error ||
		    !kcoll_cover_has(base, bits, op->seq))
			continue;
		j = op->nphases;
		if (op->args.opcode == KCOLL_OP_BROADCAST)
			for (j = op->data_phases; j < op->nphases; j++) {
				kcoll_sched_phase(&op->args, j, &ph);
				if (ph.has_recv && !ph.recv.cnt &&
				    ph.recv.peer == conn->peer)
					break;
			}
		if (j >= op->nphases ||
		    j >= BITS_PER_TYPE(op->tok_cover)) {
			kcoll_op_fail_from(op, -EBADMSG, conn->peer);
			continue;
		}
		op->tok_cover |= BIT_ULL(j);
	}
}

