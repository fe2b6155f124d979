/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * An independent reference of SQE validation, written from the uapi
 * comments (linux/kcoll.h, docs/DESIGN.md "Descriptors"), not from
 * kmod/kcoll_logic.c: the host fuzzer (tests/fuzz/fuzz_sqe.c) compares
 * kcoll_sqe_check() with it, and the in-VM fuzzer (tests/vm/kcoll-fuzz.c)
 * the CQEs the kernel posts.
 *
 * The rules: an unknown opcode, an unknown flag, a priority above
 * KCOLL_PRIO_MAX, a non-zero resv (but a stream-ordered operation's
 * ticket: KCOLL_SQE_F_GPU on an operation of a communicator, send and
 * receive included, with resv its non-zero ticket), a field the opcode does not
 * use that is not zero, a
 * missing dtype/redop/comm where the opcode needs one, AVG on an integer
 * type, a v-variant without a count table's address are -EINVAL; a
 * count above the opcode's limit is -ERANGE. When both
 * kinds of fault are present, the kernel may report either (the order of
 * its checks is not part of the ABI).
 */
#ifndef KCOLL_SQE_REF_H
#define KCOLL_SQE_REF_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <linux/kcoll.h>

/* What a descriptor is expected to complete with. */
enum kcoll_ref_verdict {
	KCOLL_REF_VALID,	/* passes validation */
	KCOLL_REF_EINVAL,	/* -EINVAL */
	KCOLL_REF_ERANGE,	/* -ERANGE */
	KCOLL_REF_EITHER,	/* -EINVAL or -ERANGE */
};

struct kcoll_ref_use {
	bool dtype, redop, comm, peer, count, send, recv;
	bool vec;		/* count is the count table's address: any
				 * value but 0 */
	uint64_t count_max;
};

static inline bool kcoll_ref_use(uint8_t op, struct kcoll_ref_use *u)
{
	/* 2^48 elements: the documented collective limit (DESIGN.md). */
	const uint64_t coll_max = 1ULL << 48;

	*u = (struct kcoll_ref_use){ 0 };
	switch (op) {
	case KCOLL_OP_NOP:
		return true;
	case KCOLL_OP_DELAY:
		u->count = true;
		u->count_max = KCOLL_DELAY_MAX_US;
		return true;
	case KCOLL_OP_BARRIER:
		u->comm = true;
		return true;
	case KCOLL_OP_ALLREDUCE:
	case KCOLL_OP_REDUCE_SCATTER:
	case KCOLL_OP_REDUCE:
		u->redop = true;
		/* fall through */
	case KCOLL_OP_BROADCAST:
	case KCOLL_OP_ALLGATHER:
	case KCOLL_OP_ALLTOALL:
	case KCOLL_OP_SEND:
	case KCOLL_OP_RECV:
	case KCOLL_OP_GATHER:
	case KCOLL_OP_SCATTER:
		u->dtype = u->comm = u->count = true;
		u->count_max = coll_max;
		/* The rooted ones name their root in peer. */
		u->peer = op == KCOLL_OP_REDUCE || op == KCOLL_OP_BROADCAST ||
			  op == KCOLL_OP_SEND || op == KCOLL_OP_RECV ||
			  op == KCOLL_OP_GATHER || op == KCOLL_OP_SCATTER;
		u->send = op != KCOLL_OP_RECV;
		u->recv = op != KCOLL_OP_SEND;
		return true;
	case KCOLL_OP_REDUCE_SCATTERV:
		u->redop = true;
		/* fall through */
	case KCOLL_OP_ALLGATHERV:
	case KCOLL_OP_ALLTOALLV:
		u->dtype = u->comm = u->send = u->recv = u->vec = true;
		return true;
	default:
		return false;
	}
}

static inline bool kcoll_ref_float(uint8_t dtype)
{
	return dtype == KCOLL_DTYPE_FP16 || dtype == KCOLL_DTYPE_BF16 ||
	       dtype == KCOLL_DTYPE_FP32 || dtype == KCOLL_DTYPE_FP64 ||
	       dtype == KCOLL_DTYPE_FP8_E4M3 || dtype == KCOLL_DTYPE_FP8_E5M2;
}

static inline enum kcoll_ref_verdict
kcoll_ref_sqe(const struct kcoll_sqe *s)
{
	struct kcoll_ref_use u;
	bool inval = false, range = false;

	if (!kcoll_ref_use(s->opcode, &u))
		return KCOLL_REF_EINVAL;
	inval |= (s->flags & ~KCOLL_SQE_F_GPU) || s->prio > KCOLL_PRIO_MAX;
	if (s->flags & KCOLL_SQE_F_GPU)
		inval |= !u.comm || s->resv == 0;
	else
		inval |= s->resv != 0;
	if (u.dtype)
		inval |= s->dtype == KCOLL_DTYPE_NONE ||
			 s->dtype >= KCOLL_DTYPE_LAST;
	else
		inval |= s->dtype != 0;
	if (u.redop)
		inval |= s->redop == KCOLL_REDOP_NONE ||
			 s->redop >= KCOLL_REDOP_LAST ||
			 (s->redop == KCOLL_REDOP_AVG &&
			  !kcoll_ref_float(s->dtype));
	else
		inval |= s->redop != 0;
	/* timeout_ms belongs to the operations on a communicator. */
	if (u.comm)
		inval |= s->comm_id == 0;
	else
		inval |= s->comm_id != 0 || s->timeout_ms != 0;
	inval |= !u.peer && s->peer != 0;
	if (u.vec)
		inval |= s->vec_addr == 0;
	else if (u.count)
		range = s->count > u.count_max;
	else
		inval |= s->count != 0;
	inval |= !u.send && (s->send_addr != 0 || s->send_mr != 0);
	inval |= !u.recv && (s->recv_addr != 0 || s->recv_mr != 0);

	if (inval && range)
		return KCOLL_REF_EITHER;
	if (inval)
		return KCOLL_REF_EINVAL;
	return range ? KCOLL_REF_ERANGE : KCOLL_REF_VALID;
}

/* Does the CQE result @res agree with @v? */
static inline bool kcoll_ref_res_ok(enum kcoll_ref_verdict v, int res)
{
	switch (v) {
	case KCOLL_REF_EINVAL:
		return res == -EINVAL;
	case KCOLL_REF_ERANGE:
		return res == -ERANGE;
	case KCOLL_REF_EITHER:
		return res == -EINVAL || res == -ERANGE;
	default:
		return true;	/* valid: the operation decides */
	}
}

#endif /* KCOLL_SQE_REF_H */
