/* SPDX-License-Identifier: MIT */
/*
 * One case of the test oracle (kcoll-check.h) issued with libcoll's
 * stream-ordered forms on @stream: kcoll-colltest -S and kcoll-perf -G.
 */
#ifndef KCOLL_COLL_STREAM_H
#define KCOLL_COLL_STREAM_H

#include <errno.h>
#include "coll.h"
#include "kcoll-check.h"

static inline int chk_issue_stream(const struct chk_case *c, void *send,
				   void *recv, coll_comm *comm, void *stream)
{
	switch (c->coll) {
	case CHK_ALLREDUCE:
		return coll_allreduce_stream(send, recv, c->count, c->dt, c->op,
					     comm, stream);
	case CHK_REDUCE:
		return coll_reduce_stream(send, recv, c->count, c->dt, c->op,
					  c->root, comm, stream);
	case CHK_BROADCAST:
		return coll_broadcast_stream(send, recv, c->count, c->dt,
					     c->root, comm, stream);
	case CHK_ALLGATHER:
		return coll_allgather_stream(send, recv, c->count, c->dt, comm,
					     stream);
	case CHK_REDUCE_SCATTER:
		return coll_reduce_scatter_stream(send, recv, c->count, c->dt,
						  c->op, comm, stream);
	case CHK_ALLTOALL:
		return coll_alltoall_stream(send, recv, c->count, c->dt, comm,
					    stream);
	case CHK_GATHER:
		return coll_gather_stream(send, recv, c->count, c->dt, c->root,
					  comm, stream);
	case CHK_SCATTER:
		return coll_scatter_stream(send, recv, c->count, c->dt,
					   c->root, comm, stream);
	default:
		return -EINVAL;	/* no stream-ordered send/recv */
	}
}

#endif /* KCOLL_COLL_STREAM_H */
