/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * kcoll operation shapes, plain C: for every opcode, the SQE fields it
 * reads, whether it reduces, whether it names a root or a peer, how many
 * elements its send and receive buffers hold on a rank, and when it runs
 * in place. One table, included by the module (SQE checks, issue),
 * libcoll (argument checks, building the SQE), the tests and the fuzzers:
 * a new operation is one entry here.
 */
#ifndef KCOLL_SHAPE_H
#define KCOLL_SHAPE_H

#include "kcoll_plain.h"

/* SQE fields an operation reads; the others must be zero. */
#define KCOLL_USES_DTYPE	(1U << 0)
#define KCOLL_USES_REDOP	(1U << 1)
#define KCOLL_USES_COMM		(1U << 2)
#define KCOLL_USES_PEER		(1U << 3)	/* root or peer */
#define KCOLL_USES_COUNT	(1U << 4)
#define KCOLL_USES_SEND		(1U << 5)
#define KCOLL_USES_RECV		(1U << 6)

/* Elements per buffer: 2^48, far beyond memory, far from overflow. */
#define KCOLL_COUNT_MAX		(1ULL << 48)

/* A buffer's elements on one rank, in units of the SQE's count. */
enum kcoll_shape_elems {
	KCOLL_ELEMS_NONE,	/* not used */
	KCOLL_ELEMS_ONE,	/* count */
	KCOLL_ELEMS_ALL,	/* nranks * count */
	KCOLL_ELEMS_ROOT,	/* count at the root, none elsewhere */
	KCOLL_ELEMS_ROOT_ALL,	/* nranks * count at the root, none
				 * elsewhere */
	KCOLL_ELEMS_VEC,	/* what the count table says (the
				 * v-variants: kcoll_sched_vec_*) */
};

/* When send and receive buffer are one (the operation runs in place). */
enum kcoll_shape_in_place {
	KCOLL_IN_PLACE_NEVER,
	KCOLL_IN_PLACE_SAME,	/* send == recv */
	KCOLL_IN_PLACE_ROOT,	/* send == recv, at the root */
	KCOLL_IN_PLACE_GATHER,	/* send == recv + rank * count: the rank's
				 * own block of the result */
	KCOLL_IN_PLACE_SCATTER,	/* recv == send + rank * count: the rank's
				 * own block of the input */
	KCOLL_IN_PLACE_ROOT_GATHER,	/* GATHER's, at the root */
	KCOLL_IN_PLACE_ROOT_SCATTER,	/* SCATTER's, at the root */
	KCOLL_IN_PLACE_VGATHER,	/* send == recv + displs[rank]: the rank's
				 * own block of an ALLGATHERV's result (the
				 * table decides: kcoll_sched_vec_in_place) */
};

struct kcoll_shape {
	const char *name;	/* NULL: no such operation */
	unsigned int uses;	/* KCOLL_USES_* */
	unsigned long long count_max;	/* with KCOLL_USES_COUNT */
	unsigned char on_comm;	/* runs on a communicator */
	unsigned char reduces;
	unsigned char p2p;	/* the peer field names the other rank */
	unsigned char send;	/* enum kcoll_shape_elems */
	unsigned char recv;
	unsigned char in_place;	/* enum kcoll_shape_in_place */
	unsigned char vec;	/* the count field is a count table's user
				 * address (struct kcoll_vec): words per
				 * rank in it */
};

#define KCOLL_USES_DATA	(KCOLL_USES_DTYPE | KCOLL_USES_COMM | \
			 KCOLL_USES_COUNT)

static const struct kcoll_shape kcoll_shapes[KCOLL_OP_LAST] = {
	[KCOLL_OP_NOP] = { .name = "nop" },
	[KCOLL_OP_DELAY] = {
		.name = "delay",
		.uses = KCOLL_USES_COUNT,
		.count_max = KCOLL_DELAY_MAX_US,
	},
	/* Counts: the engine checks the byte sizes against nranks. */
	[KCOLL_OP_ALLREDUCE] = {
		.name = "allreduce", .on_comm = 1, .reduces = 1,
		.uses = KCOLL_USES_DATA | KCOLL_USES_REDOP |
			KCOLL_USES_SEND | KCOLL_USES_RECV,
		.count_max = KCOLL_COUNT_MAX,
		.send = KCOLL_ELEMS_ONE, .recv = KCOLL_ELEMS_ONE,
		.in_place = KCOLL_IN_PLACE_SAME,
	},
	[KCOLL_OP_REDUCE] = {
		.name = "reduce", .on_comm = 1, .reduces = 1,
		.uses = KCOLL_USES_DATA | KCOLL_USES_REDOP | KCOLL_USES_PEER |
			KCOLL_USES_SEND | KCOLL_USES_RECV,
		.count_max = KCOLL_COUNT_MAX,
		.send = KCOLL_ELEMS_ONE, .recv = KCOLL_ELEMS_ROOT,
		.in_place = KCOLL_IN_PLACE_ROOT,
	},
	[KCOLL_OP_BROADCAST] = {
		.name = "broadcast", .on_comm = 1,
		.uses = KCOLL_USES_DATA | KCOLL_USES_PEER |
			KCOLL_USES_SEND | KCOLL_USES_RECV,
		.count_max = KCOLL_COUNT_MAX,
		.send = KCOLL_ELEMS_ROOT, .recv = KCOLL_ELEMS_ONE,
		.in_place = KCOLL_IN_PLACE_ROOT,
	},
	[KCOLL_OP_ALLGATHER] = {
		.name = "allgather", .on_comm = 1,
		.uses = KCOLL_USES_DATA | KCOLL_USES_SEND | KCOLL_USES_RECV,
		.count_max = KCOLL_COUNT_MAX,
		.send = KCOLL_ELEMS_ONE, .recv = KCOLL_ELEMS_ALL,
		.in_place = KCOLL_IN_PLACE_GATHER,
	},
	[KCOLL_OP_REDUCE_SCATTER] = {
		.name = "reduce_scatter", .on_comm = 1, .reduces = 1,
		.uses = KCOLL_USES_DATA | KCOLL_USES_REDOP |
			KCOLL_USES_SEND | KCOLL_USES_RECV,
		.count_max = KCOLL_COUNT_MAX,
		.send = KCOLL_ELEMS_ALL, .recv = KCOLL_ELEMS_ONE,
		.in_place = KCOLL_IN_PLACE_SCATTER,
	},
	[KCOLL_OP_ALLTOALL] = {
		.name = "alltoall", .on_comm = 1,
		.uses = KCOLL_USES_DATA | KCOLL_USES_SEND | KCOLL_USES_RECV,
		.count_max = KCOLL_COUNT_MAX,
		.send = KCOLL_ELEMS_ALL, .recv = KCOLL_ELEMS_ALL,
		.in_place = KCOLL_IN_PLACE_SAME,
	},
	[KCOLL_OP_SEND] = {
		.name = "send", .on_comm = 1, .p2p = 1,
		.uses = KCOLL_USES_DATA | KCOLL_USES_PEER | KCOLL_USES_SEND,
		.count_max = KCOLL_COUNT_MAX,
		.send = KCOLL_ELEMS_ONE,
	},
	[KCOLL_OP_RECV] = {
		.name = "recv", .on_comm = 1, .p2p = 1,
		.uses = KCOLL_USES_DATA | KCOLL_USES_PEER | KCOLL_USES_RECV,
		.count_max = KCOLL_COUNT_MAX,
		.recv = KCOLL_ELEMS_ONE,
	},
	[KCOLL_OP_BARRIER] = {
		.name = "barrier", .on_comm = 1,
		.uses = KCOLL_USES_COMM,
	},
	[KCOLL_OP_GATHER] = {
		.name = "gather", .on_comm = 1,
		.uses = KCOLL_USES_DATA | KCOLL_USES_PEER |
			KCOLL_USES_SEND | KCOLL_USES_RECV,
		.count_max = KCOLL_COUNT_MAX,
		.send = KCOLL_ELEMS_ONE, .recv = KCOLL_ELEMS_ROOT_ALL,
		.in_place = KCOLL_IN_PLACE_ROOT_GATHER,
	},
	[KCOLL_OP_SCATTER] = {
		.name = "scatter", .on_comm = 1,
		.uses = KCOLL_USES_DATA | KCOLL_USES_PEER |
			KCOLL_USES_SEND | KCOLL_USES_RECV,
		.count_max = KCOLL_COUNT_MAX,
		.send = KCOLL_ELEMS_ROOT_ALL, .recv = KCOLL_ELEMS_ONE,
		.in_place = KCOLL_IN_PLACE_ROOT_SCATTER,
	},
	/* The count field holds the table's address: any value. */
	[KCOLL_OP_ALLGATHERV] = {
		.name = "allgatherv", .on_comm = 1, .vec = 2,
		.uses = KCOLL_USES_DATA | KCOLL_USES_SEND | KCOLL_USES_RECV,
		.count_max = ~0ULL,
		.send = KCOLL_ELEMS_VEC, .recv = KCOLL_ELEMS_VEC,
		.in_place = KCOLL_IN_PLACE_VGATHER,
	},
	[KCOLL_OP_REDUCE_SCATTERV] = {
		.name = "reduce_scatterv", .on_comm = 1, .reduces = 1, .vec = 1,
		.uses = KCOLL_USES_DATA | KCOLL_USES_REDOP |
			KCOLL_USES_SEND | KCOLL_USES_RECV,
		.count_max = ~0ULL,
		.send = KCOLL_ELEMS_VEC, .recv = KCOLL_ELEMS_VEC,
	},
	[KCOLL_OP_ALLTOALLV] = {
		.name = "alltoallv", .on_comm = 1, .vec = 4,
		.uses = KCOLL_USES_DATA | KCOLL_USES_SEND | KCOLL_USES_RECV,
		.count_max = ~0ULL,
		.send = KCOLL_ELEMS_VEC, .recv = KCOLL_ELEMS_VEC,
	},
};

/* @opcode's entry, or NULL if there is no such operation. */
static inline const struct kcoll_shape *kcoll_shape(unsigned int opcode)
{
	if (opcode >= KCOLL_OP_LAST || !kcoll_shapes[opcode].name)
		return (const struct kcoll_shape *)0;
	return &kcoll_shapes[opcode];
}

/* Whether a buffer of shape @elems is read or written on rank @rank. */
static inline int kcoll_shape_used(unsigned int elems, unsigned int rank,
				   unsigned int root)
{
	if (elems == KCOLL_ELEMS_ROOT || elems == KCOLL_ELEMS_ROOT_ALL)
		return rank == root;
	return elems != KCOLL_ELEMS_NONE;
}

/*
 * Elements of a buffer of shape @elems on rank @rank (@root the root) of
 * @nranks for an SQE count of @count, in *@out. 0, or -EOVERFLOW.
 */
static inline int kcoll_shape_count(unsigned int elems, unsigned int rank,
				    unsigned int root, unsigned int nranks,
				    unsigned long long count,
				    unsigned long long *out)
{
	*out = 0;
	if (!kcoll_shape_used(elems, rank, root))
		return 0;
	switch (elems) {
	case KCOLL_ELEMS_ONE:
	case KCOLL_ELEMS_ROOT:
		*out = count;
		return 0;
	case KCOLL_ELEMS_ALL:
	case KCOLL_ELEMS_ROOT_ALL:
		if (nranks && count > ~0ULL / nranks)
			return -EOVERFLOW;
		*out = count * nranks;
		return 0;
	default:
		return 0;
	}
}

/*
 * Does @d run in place on rank @rank (@root the root) with these
 * addresses, for @count elements of @esize bytes? (The caller checked
 * that the products do not overflow.)
 */
static inline int kcoll_shape_in_place(const struct kcoll_shape *d,
				       unsigned int rank, unsigned int root,
				       unsigned long long count,
				       unsigned long long esize,
				       unsigned long long send_addr,
				       unsigned long long recv_addr)
{
	unsigned long long block = rank * count * esize;

	switch (d ? d->in_place : KCOLL_IN_PLACE_NEVER) {
	case KCOLL_IN_PLACE_SAME:
		return send_addr == recv_addr;
	case KCOLL_IN_PLACE_ROOT:
		return rank == root && send_addr == recv_addr;
	case KCOLL_IN_PLACE_GATHER:
		return send_addr == recv_addr + block;
	case KCOLL_IN_PLACE_SCATTER:
		return recv_addr == send_addr + block;
	case KCOLL_IN_PLACE_ROOT_GATHER:
		return rank == root && send_addr == recv_addr + block;
	case KCOLL_IN_PLACE_ROOT_SCATTER:
		return rank == root && recv_addr == send_addr + block;
	default:
		return 0;
	}
}

#endif /* KCOLL_SHAPE_H */
