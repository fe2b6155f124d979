/* SPDX-License-Identifier: MIT */
/*
 * One case of the test oracle (kcoll-check.h) issued with libcoll's
 * blocking (@req NULL) or non-blocking (*@req set) form: the one switch
 * over the collectives that tests/unit/test_comm.c, kcoll-colltest and
 * kcoll-perf share. Send/recv pairs two operations: the callers issue it
 * themselves (-EINVAL here).
 */
#ifndef KCOLL_COLL_ISSUE_H
#define KCOLL_COLL_ISSUE_H

#include <errno.h>
#include "coll.h"
#include "kcoll-check.h"

static inline int chk_issue(const struct chk_case *c, void *send, void *recv,
			    coll_comm *comm, coll_request **req)
{
	size_t n = c->count;

	switch (c->coll) {
	case CHK_ALLREDUCE:
		return req ? coll_iallreduce(send, recv, n, c->dt, c->op, comm,
					     req) :
			     coll_allreduce(send, recv, n, c->dt, c->op, comm);
	case CHK_REDUCE:
		return req ? coll_ireduce(send, recv, n, c->dt, c->op, c->root,
					  comm, req) :
			     coll_reduce(send, recv, n, c->dt, c->op, c->root,
					 comm);
	case CHK_BROADCAST:
		return req ? coll_ibroadcast(send, recv, n, c->dt, c->root,
					     comm, req) :
			     coll_broadcast(send, recv, n, c->dt, c->root, comm);
	case CHK_ALLGATHER:
		return req ? coll_iallgather(send, recv, n, c->dt, comm, req) :
			     coll_allgather(send, recv, n, c->dt, comm);
	case CHK_REDUCE_SCATTER:
		return req ? coll_ireduce_scatter(send, recv, n, c->dt, c->op,
						  comm, req) :
			     coll_reduce_scatter(send, recv, n, c->dt, c->op,
						 comm);
	case CHK_ALLTOALL:
		return req ? coll_ialltoall(send, recv, n, c->dt, comm, req) :
			     coll_alltoall(send, recv, n, c->dt, comm);
	case CHK_GATHER:
		return req ? coll_igather(send, recv, n, c->dt, c->root, comm,
					  req) :
			     coll_gather(send, recv, n, c->dt, c->root, comm);
	case CHK_SCATTER:
		return req ? coll_iscatter(send, recv, n, c->dt, c->root, comm,
					   req) :
			     coll_scatter(send, recv, n, c->dt, c->root, comm);
	default:
		return -EINVAL;
	}
}

#endif /* KCOLL_COLL_ISSUE_H */
