// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll plain logic: ring geometry, index arithmetic and descriptor
 * validation. Built into the module and into the host unit tests.
 */
#include "kcoll_logic.h"

/* Which SQE fields an opcode reads and the rest of its shape: one table,
 * kcoll_shape.h. */
#include "kcoll_shape.h"

const char *kcoll_op_name(u32 opcode)
{
	const struct kcoll_shape *d;

	if (opcode >= KCOLL_OP_LAST)
		return "?";
	d = kcoll_shape(kcoll_index_nospec(opcode, KCOLL_OP_LAST));
	return d ? d->name : "?";
}

int kcoll_ring_size(u32 req_sq, u32 req_cq, u32 flags, u32 max_sq,
		    u32 max_cq, u32 *sq, u32 *cq)
{
	bool clamp = flags & KCOLL_SETUP_CLAMP;

	if (max_sq > KCOLL_SQ_ENTRIES_LIMIT)
		max_sq = KCOLL_SQ_ENTRIES_LIMIT;
	if (max_cq > KCOLL_CQ_ENTRIES_LIMIT)
		max_cq = KCOLL_CQ_ENTRIES_LIMIT;
	/* Every SQ slot needs a CQ slot, and the CQ may not exceed max_cq:
	 * the SQ is limited by both. (The limits are powers of two.) */
	if (max_sq > max_cq)
		max_sq = max_cq;
	if (!req_sq || !max_sq || !max_cq)
		return -EINVAL;
	if (req_sq > max_sq) {
		if (!clamp)
			return -EINVAL;
		req_sq = max_sq;
	}
	*sq = kcoll_roundup_pow2(req_sq);

	if (flags & KCOLL_SETUP_CQSIZE) {
		if (!req_cq)
			return -EINVAL;
		if (req_cq > max_cq) {
			if (!clamp)
				return -EINVAL;
			req_cq = max_cq;
		}
		*cq = kcoll_roundup_pow2(req_cq);
		if (*cq < *sq)
			return -EINVAL;
	} else {
		if (req_cq)
			return -EINVAL;
		/* Twice the SQ, within the limit; never below the SQ. */
		*cq = *sq <= max_cq / 2 ? 2 * *sq : max_cq;
	}
	return 0;
}

static u32 kcoll_align(u32 v, u32 a)
{
	return (v + a - 1) & ~(a - 1);
}

void kcoll_ring_layout(u32 sq_entries, u32 cq_entries,
		       struct kcoll_ring_layout *l)
{
	const u32 line = KCOLL_CACHELINE;
	u32 off = 0;

	*l = (struct kcoll_ring_layout){ 0 };
	l->sq_entries = sq_entries;
	l->cq_entries = cq_entries;

	/* Line 0: SQ head (kernel writes) and the read-only SQ geometry. */
	l->sq_off.head = off;
	l->sq_off.ring_mask = off + 4;
	l->sq_off.ring_entries = off + 8;
	l->sq_off.flags = off + 12;
	off += line;
	/* Line 1: SQ tail (application writes). */
	l->sq_off.tail = off;
	off += line;
	/* Line 2: CQ head and CQ flags (application writes). */
	l->cq_off.head = off;
	l->cq_off.flags = off + 4;
	off += line;
	/* Line 3: CQ tail (kernel writes) and the read-only CQ geometry. */
	l->cq_off.tail = off;
	l->cq_off.ring_mask = off + 4;
	l->cq_off.ring_entries = off + 8;
	off += line;

	l->sq_off.sqes = off;
	off += sq_entries * (u32)sizeof(struct kcoll_sqe);
	off = kcoll_align(off, line);
	l->cq_off.cqes = off;
	off += cq_entries * (u32)sizeof(struct kcoll_cqe);
	l->size = kcoll_align(off, KCOLL_PAGE_SIZE);
}

int kcoll_sq_ready(u32 sq_head, u32 sq_tail, u32 sq_entries, u32 to_submit)
{
	u32 queued = kcoll_ring_used(sq_head, sq_tail);

	if (queued > sq_entries)
		return -EOVERFLOW;
	return (int)(to_submit < queued ? to_submit : queued);
}

u32 kcoll_cq_ready(u32 cq_head, u32 cq_tail, u32 cq_entries)
{
	u32 ready = kcoll_ring_used(cq_head, cq_tail);

	return ready > cq_entries ? cq_entries : ready;
}

u32 kcoll_cq_space(u32 cq_head, u32 cq_tail, u32 cq_entries, u32 reserved)
{
	u32 used = kcoll_ring_used(cq_head, cq_tail);

	if (used > cq_entries)		/* head corrupted by the application */
		return 0;
	used += reserved;
	return used >= cq_entries ? 0 : cq_entries - used;
}

bool kcoll_all_zero(const void *p, size_t n)
{
	const u8 *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

int kcoll_sqe_check(const struct kcoll_sqe *sqe)
{
	const struct kcoll_shape *shape;
	u32 uses;

	if (sqe->opcode >= KCOLL_OP_LAST)
		return -EINVAL;
	shape = kcoll_shape(kcoll_index_nospec(sqe->opcode, KCOLL_OP_LAST));
	if (!shape)
		return -EINVAL;
	uses = shape->uses;

	if (sqe->flags & ~KCOLL_SQE_F_ALL)
		return -EINVAL;
	if (sqe->prio > KCOLL_PRIO_MAX)
		return -EINVAL;
	/* resv is a stream-ordered collective's ticket, else zero. */
	if (sqe->flags & KCOLL_SQE_F_GPU) {
		if (!(uses & KCOLL_USES_COMM) || !sqe->resv)
			return -EINVAL;
	} else if (sqe->resv) {
		return -EINVAL;
	}

	if (uses & KCOLL_USES_DTYPE) {
		if (sqe->dtype == KCOLL_DTYPE_NONE || sqe->dtype >= KCOLL_DTYPE_LAST)
			return -EINVAL;
	} else if (sqe->dtype) {
		return -EINVAL;
	}
	if (uses & KCOLL_USES_REDOP) {
		if (sqe->redop == KCOLL_REDOP_NONE || sqe->redop >= KCOLL_REDOP_LAST)
			return -EINVAL;
	} else if (sqe->redop) {
		return -EINVAL;
	}
	if (uses & KCOLL_USES_REDOP && sqe->redop == KCOLL_REDOP_AVG &&
	    !kcoll_dtype_is_float(sqe->dtype))
		return -EINVAL;		/* AVG is for floating types */
	if (uses & KCOLL_USES_COMM) {
		if (!sqe->comm_id)
			return -EINVAL;
	} else if (sqe->comm_id || sqe->timeout_ms) {
		return -EINVAL;
	}
	if (!(uses & KCOLL_USES_PEER) && sqe->peer)
		return -EINVAL;
	if (shape->vec) {
		if (!sqe->vec_addr)	/* the count table's address */
			return -EINVAL;
	} else if (uses & KCOLL_USES_COUNT) {
		if (sqe->count > shape->count_max)
			return -ERANGE;
	} else if (sqe->count) {
		return -EINVAL;
	}
	if (!(uses & KCOLL_USES_SEND) && (sqe->send_addr || sqe->send_mr))
		return -EINVAL;
	if (!(uses & KCOLL_USES_RECV) && (sqe->recv_addr || sqe->recv_mr))
		return -EINVAL;
	return 0;
}

int kcoll_setup_check(const struct kcoll_setup *p)
{
	if (p->flags & ~KCOLL_SETUP_F_ALL)
		return -EINVAL;
	/* Output fields must come in zeroed, like reserved ones, so that a
	 * later ABI can turn them into inputs. */
	if (p->features || p->mmap_size || p->mmap_offset)
		return -EINVAL;
	if (!kcoll_all_zero(&p->sq_off, sizeof(p->sq_off)) ||
	    !kcoll_all_zero(&p->cq_off, sizeof(p->cq_off)) ||
	    !kcoll_all_zero(p->resv, sizeof(p->resv)))
		return -EINVAL;
	return 0;
}

int kcoll_enter_check(const struct kcoll_enter *e, u32 sq_entries,
		      u32 cq_entries)
{
	if (e->flags & ~KCOLL_ENTER_F_ALL)
		return -EINVAL;
	if (e->resv0 || !kcoll_all_zero(e->resv, sizeof(e->resv)))
		return -EINVAL;
	if (e->to_submit > sq_entries)
		return -EINVAL;
	if (!(e->flags & KCOLL_ENTER_GETEVENTS) && (e->min_complete || e->timeout_ns))
		return -EINVAL;
	if (e->min_complete > cq_entries)
		return -EINVAL;
	return 0;
}
