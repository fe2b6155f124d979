// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll wire checks, plain C: what a hello or a control message must be,
 * decided from its own bytes and a few facts about the connection, before
 * the engine looks at any state. Built into the module (kcoll_conn.c,
 * kcoll_rx.c), the host unit tests (tests/unit/test_wire.c) and a
 * libFuzzer target (tests/fuzz/fuzz_wire.c).
 */
#include "kcoll_wire.h"

/* Message kinds a type may carry. */
#define KCOLL_KINDS_COLL	(1U << KCOLL_KIND_COLL)
#define KCOLL_KINDS_ANY		((1U << KCOLL_KIND_COLL) | (1U << KCOLL_KIND_P2P))

struct kcoll_msg_rule {
	u8 kinds;		/* KCOLL_KINDS_* */
	u8 need;		/* KCOLL_WCONN_* the connection must have
				 * (any of them) */
	u8 reject;		/* KCOLL_WCONN_* it must not have */
};

/*
 * One row per message type that reaches the engine's dispatch; a type
 * without a row (AUTH, handled before the connection is up, and EAGER,
 * which only the intra-node channel delivers) is a protocol error there.
 */
static const struct kcoll_msg_rule kcoll_msg_rules[KCOLL_MSG_AUTH + 1] = {
	[KCOLL_MSG_SIG] = { .kinds = KCOLL_KINDS_ANY },
	[KCOLL_MSG_GRANT] = { .kinds = KCOLL_KINDS_ANY },
	[KCOLL_MSG_ABORT] = { .kinds = KCOLL_KINDS_ANY },
	[KCOLL_MSG_NOP] = { .kinds = KCOLL_KINDS_ANY },
	[KCOLL_MSG_BYE] = { .kinds = KCOLL_KINDS_ANY },
	[KCOLL_MSG_DATA] = { .kinds = KCOLL_KINDS_ANY,
			     .need = KCOLL_WCONN_LOCAL },
	[KCOLL_MSG_PING] = { .kinds = KCOLL_KINDS_ANY },
	[KCOLL_MSG_PONG] = { .kinds = KCOLL_KINDS_ANY },
	/* A first offer may overtake our ESTABLISHED, before the REP has
	 * told the connecting side that the peer agreed. */
	[KCOLL_MSG_CREDIT] = { .kinds = KCOLL_KINDS_COLL,
			       .need = KCOLL_WCONN_EAGER |
				       KCOLL_WCONN_EAGER_OFFERED },
	[KCOLL_MSG_CREDITS] = { .kinds = KCOLL_KINDS_COLL,
				.need = KCOLL_WCONN_EAGER },
};

/*
 * kcoll_wire_msg_check - may @m, received on a connection described by
 * @wconn (KCOLL_WCONN_*), be dispatched? KCOLL_WIRE_OK, or why not (enum
 * kcoll_wire_verdict). What depends on the engine's state (serials,
 * slots known and free, a PONG without a PING) is the handler's to check.
 */
int kcoll_wire_msg_check(const struct kcoll_wire_msg *m, unsigned int wconn)
{
	const struct kcoll_msg_rule *r;
	u32 status = le32_to_cpu(m->status);

	if (m->type >= sizeof(kcoll_msg_rules) / sizeof(kcoll_msg_rules[0]) ||
	    !kcoll_msg_rules[m->type].kinds)
		return KCOLL_WIRE_BAD_TYPE;
	r = &kcoll_msg_rules[m->type];
	if (m->kind >= KCOLL_KIND_NR || !(r->kinds & (1U << m->kind)))
		return KCOLL_WIRE_BAD_KIND;
	if (r->need && !(wconn & r->need))
		return KCOLL_WIRE_NOT_HERE;
	switch (m->type) {
	case KCOLL_MSG_CREDIT: {
		u32 need = sizeof(struct kcoll_wire_eager) + KCOLL_EAGER_MAX;

		if (le32_to_cpu(m->serial) >= KCOLL_EAGER_SLOTS)
			return KCOLL_WIRE_BAD_SLOT;
		/* Lazy signatures, eager point-to-point: its slots then
		 * take our signed headers, which must fit. */
		if (status & (KCOLL_CREDIT_LAZY | KCOLL_CREDIT_P2P))
			need += sizeof(struct kcoll_wire_eager_sig);
		if (le32_to_cpu(m->len) < need)
			return KCOLL_WIRE_SHORT_SLOT;
		break;
	}
	case KCOLL_MSG_CREDITS: {
		u64 slots = le64_to_cpu(m->count);

		if (!slots || (slots >> KCOLL_EAGER_SLOTS))
			return KCOLL_WIRE_BAD_SLOT;
		break;
	}
	case KCOLL_MSG_BYE:
		if (status & ~(u32)KCOLL_BYE_REVOKE)
			return KCOLL_WIRE_BAD_STATUS;
		break;
	case KCOLL_MSG_SIG:
		/* Point-to-point: only a send's ask for a grant, on an
		 * eager connection (where the peer learnt from our CREDIT
		 * that we take asks; its own may not have come yet). */
		if (m->kind == KCOLL_KIND_P2P) {
			if (!(wconn & (KCOLL_WCONN_EAGER |
				       KCOLL_WCONN_EAGER_OFFERED)))
				return KCOLL_WIRE_NOT_HERE;
			if (status != KCOLL_SIG_ASK)
				return KCOLL_WIRE_BAD_STATUS;
			break;
		}
		/* Only between ranks that both offered lazy signatures
		 * (older peers send none). */
		if (status && (!(wconn & KCOLL_WCONN_LAZY) ||
			       (status & ~(u32)(KCOLL_SIG_ASK |
						KCOLL_SIG_DONE))))
			return KCOLL_WIRE_BAD_STATUS;
		break;
	}
	return KCOLL_WIRE_OK;
}

/*
 * kcoll_wire_hello_check - may the hello in @pd (@len bytes of REQ private
 * data) be looked up at all? 0, KCOLL_WIRE_HELLO_FOREIGN (too short, not
 * kcoll's magic), KCOLL_WIRE_HELLO_VERSION (another wire version) or
 * KCOLL_WIRE_HELLO_LANES (QP index or count impossible, at most
 * @max_lanes QPs). Its MAC and ranks are checked against the communicator
 * it names (kcoll_auth.c, kcoll_wire_hello_ranks_ok()).
 */
int kcoll_wire_hello_check(const void *pd, u32 len, u32 max_lanes)
{
	const struct kcoll_wire_hello *h = pd;
	u32 idx, nlanes;

	if (!h || len < sizeof(*h) || le32_to_cpu(h->magic) != KCOLL_WIRE_MAGIC)
		return KCOLL_WIRE_HELLO_FOREIGN;
	if (h->version != KCOLL_WIRE_VERSION)
		return KCOLL_WIRE_HELLO_VERSION;
	idx = kcoll_hello_lane(h->flags);
	nlanes = kcoll_hello_nlanes(h->flags);
	if (idx >= nlanes || nlanes > max_lanes)
		return KCOLL_WIRE_HELLO_LANES;
	return 0;
}

/* The hello's ranks fit a communicator of @nranks where we are @rank (the
 * lower rank accepts). */
bool kcoll_wire_hello_ranks_ok(const struct kcoll_wire_hello *h, u32 nranks,
			       u32 rank)
{
	u32 src = le32_to_cpu(h->src_rank);

	return le32_to_cpu(h->nranks) == nranks && src < nranks && src > rank;
}
