/* SPDX-License-Identifier: MIT */
/*
 * kcoll-wire-ref.h: the control-message rules of docs/DESIGN.md ("Wire
 * protocol", "Eager transfers", "Lazy signatures", "Eager point-to-point")
 * restated without the
 * module's table, as the oracle of kmod/kcoll_wire.c's
 * kcoll_wire_msg_check() for tests/unit/test_wire.c and
 * tests/fuzz/fuzz_wire.c. Include after kmod/kcoll_wire.h.
 */
#ifndef KCOLL_WIRE_REF_H
#define KCOLL_WIRE_REF_H

#include <endian.h>
#include <stdbool.h>

#define ALL_WCONN	(KCOLL_WCONN_LOCAL | KCOLL_WCONN_EAGER | \
			 KCOLL_WCONN_EAGER_OFFERED | KCOLL_WCONN_LAZY)

/*
 * The rules of docs/DESIGN.md ("Wire protocol", "Eager transfers", "Lazy
 * signatures"), restated without the table the module uses: true when the
 * engine may look at @m at all.
 */
static inline bool ref_ok(const struct kcoll_wire_msg *m, unsigned int wconn)
{
	u32 status = le32toh(m->status);
	u32 len = le32toh(m->len);
	u64 count = le64toh(m->count);

	if (m->kind > KCOLL_KIND_P2P)
		return false;
	switch (m->type) {
	case KCOLL_MSG_GRANT:
	case KCOLL_MSG_ABORT:
	case KCOLL_MSG_NOP:
	case KCOLL_MSG_PING:
	case KCOLL_MSG_PONG:
		return true;
	case KCOLL_MSG_BYE:	/* a revoke (bit 0) or a plain leave */
		return status <= 1;
	case KCOLL_MSG_DATA:
		return wconn & KCOLL_WCONN_LOCAL;
	case KCOLL_MSG_SIG:
		/* point-to-point: a send's ask for a grant, on an eager
		 * connection */
		if (m->kind == KCOLL_KIND_P2P)
			return (wconn & (KCOLL_WCONN_EAGER |
					 KCOLL_WCONN_EAGER_OFFERED)) &&
			       status == KCOLL_SIG_ASK;
		if (!status)
			return true;
		return (wconn & KCOLL_WCONN_LAZY) &&
		       !(status & ~(u32)(KCOLL_SIG_ASK | KCOLL_SIG_DONE));
	case KCOLL_MSG_CREDIT:
		if (m->kind != KCOLL_KIND_COLL ||
		    !(wconn & (KCOLL_WCONN_EAGER | KCOLL_WCONN_EAGER_OFFERED)) ||
		    le32toh(m->serial) >= KCOLL_EAGER_SLOTS)
			return false;
		return len >= 16u + KCOLL_EAGER_MAX +
			      ((status & (KCOLL_CREDIT_LAZY |
					  KCOLL_CREDIT_P2P)) ? 16u : 0u);
	case KCOLL_MSG_CREDITS:
		return m->kind == KCOLL_KIND_COLL &&
		       (wconn & KCOLL_WCONN_EAGER) && count &&
		       count < (1ULL << KCOLL_EAGER_SLOTS);
	default:	/* AUTH, EAGER: not through the dispatch */
		return false;
	}
}

#endif /* KCOLL_WIRE_REF_H */
