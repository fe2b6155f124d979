// SPDX-License-Identifier: MIT
/*
 * libcoll communicators: one /dev/kcoll ring per communicator, collectives
 * as SQEs, requests matched to CQEs, groups, memory registrations. See
 * coll.h, section 3, for the API.
 *
 * Accounting (under comm->lock):
 *  - nqueued: SQEs written to the SQ that the kernel has not consumed yet;
 *  - ninflight: SQEs the kernel consumed whose CQE we have not reaped yet.
 * The kernel reserves a CQ slot for every SQE it consumes and fails a
 * submission that would exceed the CQ with -EBUSY; keeping
 * nqueued + ninflight <= cq_entries (comm_reserve()) means that never
 * happens, and bounds the requests in flight by the CQ size.
 *
 * Requests live in slots, one per possible operation in flight; the SQE's
 * user_data is (generation << 32 | slot), so a stale CQE (of a request
 * failed locally after its ring broke) can never complete a newer request.
 *
 * Waiting: one thread at a time (the "reaper") sleeps in the kernel
 * (KCOLL_IOC_ENTER with GETEVENTS, min_complete 1) with the lock released;
 * the other waiters sleep on comm->cond. Only the reaper reaps while it is
 * out, so a CQE it waits for cannot be taken from under it; when it comes
 * back it reaps everything, records each result in its request, and wakes
 * the others, one of which becomes the next reaper if it still waits.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/ioctl.h>

#include "coll_internal.h"
/* The shape of every operation: one table with the module. */
#include "kcoll_shape.h"

struct coll_mem {
	struct coll_mem *next;
	uintptr_t addr;
	size_t len;
	uint32_t handle;
};

struct coll_request {
	coll_comm *comm;
	coll_request *prev, *next;	/* comm->reqs */
	uint32_t slot;
	int res;
	bool done;
	bool report;			/* KCOLL_CQE_F_REPORT: ask the kernel */
	bool orphan;			/* freed by the user while in flight */
};

struct coll_slot {
	coll_request *req;		/* NULL: free */
	uint32_t gen;
};

struct coll_comm {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* completions were recorded */
	struct coll_ring ring;
	uint32_t comm_id;
	bool created;			/* the kernel communicator exists */
	bool reaper;			/* a thread waits in the kernel */
	int rank;
	int nranks;
	uint64_t uid;
	int err;			/* sticky: the ring broke */
	unsigned int nqueued;
	unsigned int ninflight;
	unsigned int cap;		/* CQ entries: most ops in flight */
	struct coll_slot *slots;	/* cap of them */
	uint32_t *free_slots;
	unsigned int nfree;
	coll_request reqs;		/* list head of every live request */
	struct coll_mem *mems;
	uint8_t prio;			/* of the SQEs it submits */
	uint32_t timeout_ms;		/* sqe.timeout_ms of the SQEs */
};

/* Time a destroyed communicator's cancelled operations get to complete. */
#define COLL_DRAIN_MS	10000U

/* ------------------------------------------------------------------ */
/* Types                                                               */
/* ------------------------------------------------------------------ */

size_t coll_dtype_size(coll_dtype dtype)
{
	switch (dtype) {
	case COLL_DTYPE_INT8:
	case COLL_DTYPE_UINT8:
		return 1;
	case COLL_DTYPE_FP16:
	case COLL_DTYPE_BF16:
		return 2;
	case COLL_DTYPE_INT32:
	case COLL_DTYPE_UINT32:
	case COLL_DTYPE_FP32:
		return 4;
	case COLL_DTYPE_INT64:
	case COLL_DTYPE_UINT64:
	case COLL_DTYPE_FP64:
		return 8;
	}
	return 0;
}

const char *coll_dtype_name(coll_dtype dtype)
{
	switch (dtype) {
	case COLL_DTYPE_INT8:	return "int8";
	case COLL_DTYPE_UINT8:	return "uint8";
	case COLL_DTYPE_INT32:	return "int32";
	case COLL_DTYPE_UINT32:	return "uint32";
	case COLL_DTYPE_INT64:	return "int64";
	case COLL_DTYPE_UINT64:	return "uint64";
	case COLL_DTYPE_FP16:	return "fp16";
	case COLL_DTYPE_BF16:	return "bf16";
	case COLL_DTYPE_FP32:	return "fp32";
	case COLL_DTYPE_FP64:	return "fp64";
	}
	return "?";
}

const char *coll_redop_name(coll_redop op)
{
	switch (op) {
	case COLL_REDOP_SUM:	return "sum";
	case COLL_REDOP_PROD:	return "prod";
	case COLL_REDOP_MIN:	return "min";
	case COLL_REDOP_MAX:	return "max";
	case COLL_REDOP_AVG:	return "avg";
	}
	return "?";
}

static bool dtype_is_float(coll_dtype dtype)
{
	return dtype == COLL_DTYPE_FP16 || dtype == COLL_DTYPE_BF16 ||
	       dtype == COLL_DTYPE_FP32 || dtype == COLL_DTYPE_FP64;
}

int coll_redop_valid(coll_dtype dtype, coll_redop op)
{
	if (!coll_dtype_size(dtype))
		return 0;
	if (op < COLL_REDOP_FIRST || op > COLL_REDOP_LAST)
		return 0;
	return op != COLL_REDOP_AVG || dtype_is_float(dtype);
}

/* ------------------------------------------------------------------ */
/* Completion bookkeeping (comm->lock held)                            */
/* ------------------------------------------------------------------ */

static void req_unlink(coll_request *req)
{
	req->prev->next = req->next;
	req->next->prev = req->prev;
	req->prev = req->next = req;
}

static void comm_describe(coll_comm *c, int ret);

/* Record @res in the request behind @user_data, if it is still there. */
static void comm_complete(coll_comm *c, uint64_t user_data, int res,
			  uint32_t flags)
{
	uint32_t slot = (uint32_t)user_data;
	coll_request *req;

	if (slot >= c->cap || c->slots[slot].gen != (uint32_t)(user_data >> 32))
		return;
	req = c->slots[slot].req;
	if (!req)
		return;
	c->slots[slot].req = NULL;
	c->free_slots[c->nfree++] = slot;
	req->res = res;
	req->report = flags & KCOLL_CQE_F_REPORT;
	req->done = true;
	if (req->orphan) {
		req_unlink(req);
		free(req);
	}
}

/* Reap every ready CQE. Call only when no reaper is out (or as it). */
static void comm_reap(coll_comm *c)
{
	struct kcoll_cqe *cqe;
	unsigned int n = 0;
	uint32_t head;

	coll_ring_for_each_cqe(&c->ring, head, cqe) {
		comm_complete(c, cqe->user_data, cqe->res, cqe->flags);
		n++;
	}
	if (!n)
		return;
	coll_ring_cq_advance(&c->ring, n);
	c->ninflight = n > c->ninflight ? 0 : c->ninflight - n;
	pthread_cond_broadcast(&c->cond);
}

/* The ring broke: every outstanding operation fails with @err. */
static void comm_fail(coll_comm *c, int err)
{
	uint32_t i;

	if (!c->err)
		c->err = err;
	for (i = 0; i < c->cap; i++) {
		coll_request *req = c->slots[i].req;

		if (!req)
			continue;
		c->slots[i].req = NULL;
		c->free_slots[c->nfree++] = i;
		req->res = err;
		req->done = true;
		if (req->orphan) {
			req_unlink(req);
			free(req);
		}
	}
	c->nqueued = 0;
	c->ninflight = 0;
	pthread_cond_broadcast(&c->cond);
}

/* ------------------------------------------------------------------ */
/* Waiting (comm->lock held)                                           */
/* ------------------------------------------------------------------ */

typedef bool (*comm_cond_fn)(coll_comm *c, void *arg);

static bool cond_req_done(coll_comm *c, void *arg)
{
	(void)c;
	return ((coll_request *)arg)->done;
}

static bool cond_room(coll_comm *c, void *arg)
{
	(void)arg;
	return c->nqueued + c->ninflight < c->cap;
}

static bool cond_fewer_inflight(coll_comm *c, void *arg)
{
	return c->ninflight < *(unsigned int *)arg;
}

static bool cond_idle(coll_comm *c, void *arg)
{
	(void)arg;
	return !c->nqueued && !c->ninflight;
}

static bool cond_drained(coll_comm *c, void *arg)
{
	(void)arg;
	return !c->ninflight;
}

static int comm_submit(coll_comm *c);

/*
 * Sleep until @cond holds. With @submit, queued SQEs are submitted first
 * (a wait for them could not end otherwise). @deadline_ms: 0 = none, else
 * -ETIMEDOUT once CLOCK_MONOTONIC passes it.
 */
static int comm_wait_cond(coll_comm *c, comm_cond_fn cond, void *arg,
			  bool submit, uint64_t deadline_ms)
{
	for (;;) {
		uint64_t timeout_ns = 0;
		int ret;

		if (!c->reaper)
			comm_reap(c);
		if (cond(c, arg))
			return 0;
		if (c->err)
			return c->err;
		if (submit && c->nqueued) {
			ret = comm_submit(c);
			if (ret)
				return ret;
			continue;
		}
		if (!c->ninflight && !c->reaper)
			return coll_err(-EDEADLK, "waiting for an operation "
					"that was never submitted");
		if (deadline_ms) {
			uint64_t now = coll_now_ms();

			if (now >= deadline_ms)
				return -ETIMEDOUT;
			timeout_ns = (deadline_ms - now) * 1000000ULL;
		}
		if (c->reaper) {
			if (deadline_ms) {
				struct timespec ts;

				clock_gettime(CLOCK_MONOTONIC, &ts);
				ts.tv_sec += (time_t)(timeout_ns / 1000000000ULL);
				ts.tv_nsec += (long)(timeout_ns % 1000000000ULL);
				if (ts.tv_nsec >= 1000000000L) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000L;
				}
				pthread_cond_timedwait(&c->cond, &c->lock, &ts);
			} else {
				pthread_cond_wait(&c->cond, &c->lock);
			}
			continue;
		}
		c->reaper = true;
		pthread_mutex_unlock(&c->lock);
		ret = coll_ring_enter(&c->ring, 0, 1, KCOLL_ENTER_GETEVENTS,
				      timeout_ns);
		pthread_mutex_lock(&c->lock);
		c->reaper = false;
		comm_reap(c);
		/* Another waiter may have to take over as the reaper. */
		pthread_cond_broadcast(&c->cond);
		if (ret < 0 && ret != -EINTR && ret != -ETIME) {
			coll_err(ret, "waiting on /dev/kcoll: %s",
				 coll_strerror(ret));
			comm_fail(c, ret);
			return ret;
		}
	}
}

/* ------------------------------------------------------------------ */
/* Submission (comm->lock held)                                        */
/* ------------------------------------------------------------------ */

/* Hand every queued SQE to the kernel. */
static int comm_submit(coll_comm *c)
{
	while (c->nqueued) {
		int ret = coll_ring_submit(&c->ring);

		if (ret > 0) {
			unsigned int n = (unsigned int)ret;

			if (n > c->nqueued)
				n = c->nqueued;
			c->nqueued -= n;
			c->ninflight += n;
			continue;
		}
		if (ret == -EINTR)
			continue;
		/* No room in the kernel right now: let something finish. */
		if ((!ret || ret == -EBUSY || ret == -EAGAIN) && c->ninflight) {
			unsigned int before = c->ninflight;

			ret = comm_wait_cond(c, cond_fewer_inflight, &before,
					     false, 0);
			if (ret)
				return ret;
			continue;
		}
		if (!ret)
			ret = -EIO;
		coll_err(ret, "submitting to /dev/kcoll: %s",
			 coll_strerror(ret));
		comm_fail(c, ret);
		return ret;
	}
	return 0;
}

/* Make room for one more SQE: SQ space and a CQ slot. */
static int comm_reserve(coll_comm *c)
{
	for (;;) {
		int ret;

		if (c->err)
			return c->err;
		if (!c->reaper)
			comm_reap(c);
		if (c->nqueued + c->ninflight < c->cap &&
		    coll_ring_sq_space(&c->ring))
			return 0;
		if (c->nqueued) {
			ret = comm_submit(c);
		} else {
			ret = comm_wait_cond(c, cond_room, NULL, false, 0);
		}
		if (ret)
			return ret;
	}
}

/* ------------------------------------------------------------------ */
/* Groups                                                              */
/* ------------------------------------------------------------------ */

struct coll_group {
	int depth;
	coll_comm **comms;
	unsigned int ncomms, capcomms;
	coll_request **waits;		/* blocking calls issued in the group */
	unsigned int nwaits, capwaits;
};

static __thread struct coll_group coll_grp;

static int grow(void **arr, unsigned int *cap, unsigned int need, size_t sz)
{
	unsigned int ncap;
	void *p;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*arr, (size_t)ncap * sz);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* Room in the group's lists for one more call on @c. */
static int group_reserve(coll_comm *c, bool blocking)
{
	struct coll_group *g = &coll_grp;
	unsigned int i;

	if (blocking && grow((void **)&g->waits, &g->capwaits, g->nwaits + 1,
			     sizeof(*g->waits)))
		return coll_err(-ENOMEM, "group: out of memory");
	for (i = 0; i < g->ncomms; i++)
		if (g->comms[i] == c)
			return 0;
	if (grow((void **)&g->comms, &g->capcomms, g->ncomms + 1,
		 sizeof(*g->comms)))
		return coll_err(-ENOMEM, "group: out of memory");
	g->comms[g->ncomms++] = c;
	return 0;
}

int coll_group_start(void)
{
	coll_grp.depth++;
	return 0;
}

int coll_group_end(void)
{
	struct coll_group *g = &coll_grp;
	int first = 0, ret;
	unsigned int i;

	if (g->depth <= 0)
		return coll_err(-EINVAL, "coll_group_end() without "
				"coll_group_start()");
	if (--g->depth)
		return 0;
	/* One ENTER per communicator for everything queued. */
	for (i = 0; i < g->ncomms; i++) {
		coll_comm *c = g->comms[i];

		pthread_mutex_lock(&c->lock);
		ret = comm_submit(c);
		pthread_mutex_unlock(&c->lock);
		if (ret && !first)
			first = ret;
	}
	for (i = 0; i < g->nwaits; i++) {
		ret = coll_wait(g->waits[i]);
		if (ret && !first)
			first = ret;
		coll_request_free(g->waits[i]);
	}
	free(g->comms);
	free(g->waits);
	memset(g, 0, sizeof(*g));
	return first;
}

/* ------------------------------------------------------------------ */
/* Posting operations                                                  */
/* ------------------------------------------------------------------ */

static int comm_gpu_buffers(coll_comm *c, uint64_t addr, uint64_t len);

/* The registration that holds [addr, addr + len) entirely, or 0. */
static uint32_t comm_find_mr(coll_comm *c, uint64_t addr, uint64_t len)
{
	struct coll_mem *m;

	if (!addr || !len)
		return 0;
	for (m = c->mems; m; m = m->next)
		if (addr >= m->addr && addr - m->addr <= m->len &&
		    len <= m->len - (addr - m->addr))
			return m->handle;
	return 0;
}

/*
 * Queue @t (comm_id, user_data and the registrations are filled in here)
 * and, outside a group, submit it. Blocking calls outside a group wait for
 * the result; inside one they are waited for by coll_group_end().
 */
static int comm_post(coll_comm *c, struct kcoll_sqe *t, uint64_t send_bytes,
		     uint64_t recv_bytes, bool blocking, coll_request **reqp)
{
	bool in_group = coll_grp.depth > 0;
	struct kcoll_sqe *sqe;
	coll_request *req;
	uint32_t slot;
	int ret;

	ret = comm_gpu_buffers(c, t->send_addr, send_bytes);
	if (!ret)
		ret = comm_gpu_buffers(c, t->recv_addr, recv_bytes);
	if (ret)
		return ret;
	if (in_group) {
		ret = group_reserve(c, blocking);
		if (ret)
			return ret;
	}
	req = calloc(1, sizeof(*req));
	if (!req)
		return coll_err(-ENOMEM, "out of memory");
	req->comm = c;

	pthread_mutex_lock(&c->lock);
	ret = comm_reserve(c);
	if (ret) {
		pthread_mutex_unlock(&c->lock);
		free(req);
		return ret;
	}
	slot = c->free_slots[--c->nfree];
	c->slots[slot].gen++;
	c->slots[slot].req = req;
	req->slot = slot;
	req->prev = &c->reqs;
	req->next = c->reqs.next;
	c->reqs.next->prev = req;
	c->reqs.next = req;

	sqe = coll_ring_get_sqe(&c->ring);	/* comm_reserve made room */
	*sqe = *t;
	sqe->comm_id = c->comm_id;
	sqe->prio = c->prio;
	sqe->timeout_ms = c->timeout_ms;
	sqe->user_data = (uint64_t)c->slots[slot].gen << 32 | slot;
	sqe->send_mr = comm_find_mr(c, t->send_addr, send_bytes);
	sqe->recv_mr = comm_find_mr(c, t->recv_addr, recv_bytes);
	c->nqueued++;
	if (!in_group)
		ret = comm_submit(c);
	pthread_mutex_unlock(&c->lock);

	if (ret) {
		/* comm_fail() completed it with the error. */
		coll_request_free(req);
		return ret;
	}
	if (blocking && !in_group) {
		ret = coll_wait(req);
		coll_request_free(req);
		return ret;
	}
	if (blocking) {
		coll_grp.waits[coll_grp.nwaits++] = req;
		return 0;
	}
	*reqp = req;
	return 0;
}

static int mul_bytes(uint64_t a, uint64_t b, uint64_t c, uint64_t *out)
{
	uint64_t t;

	if (__builtin_mul_overflow(a, b, &t) ||
	    __builtin_mul_overflow(t, c, out) || *out > (uint64_t)SIZE_MAX)
		return coll_err(-EOVERFLOW, "buffer size overflows");
	return 0;
}

/*
 * Build the SQE of one operation; @root is the root of REDUCE/BROADCAST
 * and the peer of SEND/RECV. Blocking when @reqp is NULL.
 */
static int comm_op(coll_comm *c, uint8_t opcode, const void *sendbuf,
		   void *recvbuf, size_t count, coll_dtype dtype,
		   coll_redop redop, int root, bool blocking,
		   coll_request **reqp)
{
	const struct kcoll_shape *d = kcoll_shape(opcode);
	uint64_t es = 0, sbytes = 0, rbytes = 0;
	unsigned long long scount = 0, rcount = 0;
	unsigned int rank, proot;
	struct kcoll_sqe t;
	int ret;

	if (!c || (!blocking && !reqp))
		return coll_err(-EINVAL, "NULL communicator or request");
	if (reqp)
		*reqp = NULL;
	if (!d || !d->on_comm)
		return coll_err(-EINVAL, "unknown operation");
	memset(&t, 0, sizeof(t));
	t.opcode = opcode;
	/* Buffer sizes from the operation's shape (kcoll_shape.h); a root
	 * out of range is refused below. */
	rank = (unsigned int)c->rank;
	proot = root < 0 ? ~0U : (unsigned int)root;
	ret = kcoll_shape_count(d->send, rank, proot, (unsigned int)c->nranks,
				count, &scount);
	if (!ret)
		ret = kcoll_shape_count(d->recv, rank, proot,
					(unsigned int)c->nranks, count, &rcount);
	if (ret)
		return coll_err(ret, "%s of %zu elements on %d ranks: too large",
				d->name, count, c->nranks);

	if (opcode != KCOLL_OP_BARRIER) {
		es = coll_dtype_size(dtype);
		if (!es)
			return coll_err(-EINVAL, "invalid dtype %d", (int)dtype);
		t.dtype = (uint8_t)dtype;
		t.count = count;
	}
	if (d->reduces) {
		if (!coll_redop_valid(dtype, redop))
			return coll_err(-EINVAL, "reduction %s is not valid "
					"for %s", coll_redop_name(redop),
					coll_dtype_name(dtype));
		t.redop = (uint8_t)redop;
	}
	if (d->uses & KCOLL_USES_PEER) {
		if (root < 0 || root >= c->nranks)
			return coll_err(-EINVAL, "%s %d not in 0..%d",
					d->p2p ? "peer" : "root",
					root, c->nranks - 1);
		t.peer = (uint32_t)root;
	}
	ret = mul_bytes(scount, es, 1, &sbytes);
	if (!ret)
		ret = mul_bytes(rcount, es, 1, &rbytes);
	if (ret)
		return ret;
	if ((sbytes && !sendbuf) || (rbytes && !recvbuf))
		return coll_err(-EINVAL, "NULL buffer with a non-zero count");
	/* Buffers an operation ignores on this rank stay zero. */
	if (kcoll_shape_used(d->send, rank, proot))
		t.send_addr = (uintptr_t)sendbuf;
	if (kcoll_shape_used(d->recv, rank, proot))
		t.recv_addr = (uintptr_t)recvbuf;
	return comm_post(c, &t, sbytes, rbytes, blocking, reqp);
}

int coll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
		   coll_dtype dtype, coll_redop op, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_ALLREDUCE, sendbuf, recvbuf, count, dtype,
		       op, 0, true, NULL);
}

int coll_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
		    coll_dtype dtype, coll_redop op, coll_comm *comm,
		    coll_request **req)
{
	return comm_op(comm, KCOLL_OP_ALLREDUCE, sendbuf, recvbuf, count, dtype,
		       op, 0, false, req);
}

int coll_reduce(const void *sendbuf, void *recvbuf, size_t count,
		coll_dtype dtype, coll_redop op, int root, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_REDUCE, sendbuf, recvbuf, count, dtype,
		       op, root, true, NULL);
}

int coll_ireduce(const void *sendbuf, void *recvbuf, size_t count,
		 coll_dtype dtype, coll_redop op, int root, coll_comm *comm,
		 coll_request **req)
{
	return comm_op(comm, KCOLL_OP_REDUCE, sendbuf, recvbuf, count, dtype,
		       op, root, false, req);
}

int coll_broadcast(const void *sendbuf, void *recvbuf, size_t count,
		   coll_dtype dtype, int root, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_BROADCAST, sendbuf, recvbuf, count, dtype,
		       0, root, true, NULL);
}

int coll_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
		    coll_dtype dtype, int root, coll_comm *comm,
		    coll_request **req)
{
	return comm_op(comm, KCOLL_OP_BROADCAST, sendbuf, recvbuf, count, dtype,
		       0, root, false, req);
}

int coll_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
		   coll_dtype dtype, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_ALLGATHER, sendbuf, recvbuf, sendcount,
		       dtype, 0, 0, true, NULL);
}

int coll_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
		    coll_dtype dtype, coll_comm *comm, coll_request **req)
{
	return comm_op(comm, KCOLL_OP_ALLGATHER, sendbuf, recvbuf, sendcount,
		       dtype, 0, 0, false, req);
}

int coll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
			coll_dtype dtype, coll_redop op, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_REDUCE_SCATTER, sendbuf, recvbuf,
		       recvcount, dtype, op, 0, true, NULL);
}

int coll_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
			 coll_dtype dtype, coll_redop op, coll_comm *comm,
			 coll_request **req)
{
	return comm_op(comm, KCOLL_OP_REDUCE_SCATTER, sendbuf, recvbuf,
		       recvcount, dtype, op, 0, false, req);
}

int coll_alltoall(const void *sendbuf, void *recvbuf, size_t count,
		  coll_dtype dtype, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_ALLTOALL, sendbuf, recvbuf, count, dtype,
		       0, 0, true, NULL);
}

int coll_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
		   coll_dtype dtype, coll_comm *comm, coll_request **req)
{
	return comm_op(comm, KCOLL_OP_ALLTOALL, sendbuf, recvbuf, count, dtype,
		       0, 0, false, req);
}

int coll_send(const void *sendbuf, size_t count, coll_dtype dtype, int peer,
	      coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_SEND, sendbuf, NULL, count, dtype, 0,
		       peer, true, NULL);
}

int coll_isend(const void *sendbuf, size_t count, coll_dtype dtype, int peer,
	       coll_comm *comm, coll_request **req)
{
	return comm_op(comm, KCOLL_OP_SEND, sendbuf, NULL, count, dtype, 0,
		       peer, false, req);
}

int coll_recv(void *recvbuf, size_t count, coll_dtype dtype, int peer,
	      coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_RECV, NULL, recvbuf, count, dtype, 0,
		       peer, true, NULL);
}

int coll_irecv(void *recvbuf, size_t count, coll_dtype dtype, int peer,
	       coll_comm *comm, coll_request **req)
{
	return comm_op(comm, KCOLL_OP_RECV, NULL, recvbuf, count, dtype, 0,
		       peer, false, req);
}

int coll_barrier(coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_BARRIER, NULL, NULL, 0, 0, 0, 0, true,
		       NULL);
}

int coll_ibarrier(coll_comm *comm, coll_request **req)
{
	return comm_op(comm, KCOLL_OP_BARRIER, NULL, NULL, 0, 0, 0, 0, false,
		       req);
}

/* ------------------------------------------------------------------ */
/* Requests                                                            */
/* ------------------------------------------------------------------ */

int coll_test(coll_request *req, int *done)
{
	coll_comm *c;
	int ret = 0;

	if (!req || !done)
		return coll_err(-EINVAL, "coll_test: NULL argument");
	c = req->comm;
	pthread_mutex_lock(&c->lock);
	if (!c->reaper)
		comm_reap(c);
	*done = req->done;
	if (req->done)
		ret = req->res;
	else if (c->err)
		ret = c->err;
	if (req->done && req->report)
		comm_describe(c, ret);
	pthread_mutex_unlock(&c->lock);
	return ret;
}

int coll_wait(coll_request *req)
{
	coll_comm *c;
	int ret;

	if (!req)
		return coll_err(-EINVAL, "coll_wait: NULL request");
	c = req->comm;
	pthread_mutex_lock(&c->lock);
	ret = comm_wait_cond(c, cond_req_done, req, true, 0);
	if (req->done)
		ret = req->res;
	if (req->done && req->report)
		comm_describe(c, ret);
	pthread_mutex_unlock(&c->lock);
	return ret;
}

void coll_request_free(coll_request *req)
{
	coll_comm *c;

	if (!req)
		return;
	c = req->comm;
	pthread_mutex_lock(&c->lock);
	if (req->done) {
		req_unlink(req);
		free(req);
	} else {
		req->orphan = true;
	}
	pthread_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------------ */
/* Communicators                                                       */
/* ------------------------------------------------------------------ */

static int kcoll_ioctl(int fd, unsigned long cmd, void *arg)
{
	int ret;

	do {
		ret = ioctl(fd, cmd, arg);
	} while (ret < 0 && errno == EINTR);
	return ret < 0 ? -errno : 0;
}

/* Release everything but the kernel communicator itself. */
static void comm_free(coll_comm *c)
{
	struct coll_mem *m;

	while ((m = c->mems)) {
		struct kcoll_dereg_mem d;

		c->mems = m->next;
		memset(&d, 0, sizeof(d));
		d.handle = m->handle;
		/* Closing the file releases whatever this leaves. */
		kcoll_ioctl(c->ring.ring_fd, KCOLL_IOC_DEREG_MEM, &d);
		free(m);
	}
	while (c->reqs.next != &c->reqs) {
		coll_request *req = c->reqs.next;

		req_unlink(req);
		free(req);
	}
	coll_ring_exit(&c->ring);
	free(c->slots);
	free(c->free_slots);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static coll_comm *comm_alloc(void)
{
	pthread_condattr_t ca;
	coll_comm *c;

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->ring.ring_fd = -1;
	c->reqs.prev = c->reqs.next = &c->reqs;
	if (pthread_mutex_init(&c->lock, NULL)) {
		free(c);
		return NULL;
	}
	if (pthread_condattr_init(&ca)) {
		pthread_mutex_destroy(&c->lock);
		free(c);
		return NULL;
	}
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&c->cond, &ca)) {
		pthread_condattr_destroy(&ca);
		pthread_mutex_destroy(&c->lock);
		free(c);
		return NULL;
	}
	pthread_condattr_destroy(&ca);
	return c;
}

int coll_comm_init_table(coll_comm **out, int nranks, int rank,
			 const struct kcoll_rank_addr *table, uint64_t uid,
			 const uint8_t key[KCOLL_KEY_LEN])
{
	struct kcoll_comm_create cc;
	uint64_t entries, tmo, devmem;
	coll_comm *c;
	uint32_t i;
	int ret;

	if (!out || !table || !key)
		return coll_err(-EINVAL, "coll_comm_init_table: NULL argument");
	*out = NULL;
	if (nranks < 1 || nranks > KCOLL_MAX_RANKS || rank < 0 ||
	    rank >= nranks)
		return coll_err(-EINVAL, "rank %d / nranks %d out of range",
				rank, nranks);
	if (!uid)
		return coll_err(-EINVAL, "communicator uid 0");
	ret = coll_env_uint(COLL_ENV_RING_ENTRIES, COLL_RING_ENTRIES_DEFAULT,
			    1U << 15, &entries);
	if (!ret)
		ret = coll_env_uint(COLL_ENV_CONNECT_TIMEOUT, 0, UINT32_MAX,
				    &tmo);
	if (!ret)
		ret = coll_env_uint(COLL_ENV_DEVMEM, 0, 1, &devmem);
	if (ret)
		return ret;
	if (!entries)
		entries = COLL_RING_ENTRIES_DEFAULT;

	c = comm_alloc();
	if (!c)
		return coll_err(-ENOMEM, "out of memory");
	ret = coll_ring_init(&c->ring, (unsigned int)entries,
			     KCOLL_SETUP_CLAMP);
	if (ret) {
		coll_err(ret, "cannot set up a ring on %s: %s%s",
			 getenv(COLL_DEVICE_ENV) && *getenv(COLL_DEVICE_ENV) ?
			 getenv(COLL_DEVICE_ENV) : COLL_DEVICE_DEFAULT,
			 coll_strerror(ret),
			 ret == -ENOENT ? " (is the kcoll module loaded?)" : "");
		goto out_free;
	}
	if (!(c->ring.features & KCOLL_FEAT_COMM)) {
		ret = coll_err(-EOPNOTSUPP, "this kcoll module has no "
			       "communicators (KCOLL_FEAT_COMM)");
		goto out_free;
	}
	c->cap = c->ring.cq.ring_entries;
	c->slots = calloc(c->cap, sizeof(*c->slots));
	c->free_slots = malloc(c->cap * sizeof(*c->free_slots));
	if (!c->slots || !c->free_slots) {
		ret = coll_err(-ENOMEM, "out of memory");
		goto out_free;
	}
	for (i = 0; i < c->cap; i++)
		c->free_slots[i] = c->cap - 1 - i;
	c->nfree = c->cap;

	memset(&cc, 0, sizeof(cc));
	cc.ranks = (uintptr_t)table;
	cc.uid = uid;
	memcpy(cc.key, key, KCOLL_KEY_LEN);
	cc.rank = (uint32_t)rank;
	cc.nranks = (uint32_t)nranks;
	cc.timeout_ms = (uint32_t)tmo;
	cc.flags = devmem ? KCOLL_COMM_DEVMEM : 0;
	ret = kcoll_ioctl(c->ring.ring_fd, KCOLL_IOC_COMM_CREATE, &cc);
	if (ret) {
		coll_err(ret, "KCOLL_IOC_COMM_CREATE (rank %d of %d): %s",
			 rank, nranks, coll_strerror(ret));
		goto out_free;
	}
	c->comm_id = cc.comm_id;
	c->created = true;
	c->rank = rank;
	c->nranks = nranks;
	c->uid = uid;
	*out = c;
	return 0;

out_free:
	comm_free(c);
	return ret;
}

int coll_comm_init_rank(coll_comm **out, int nranks, const coll_unique_id *id,
			int rank)
{
	uint8_t key[KCOLL_KEY_LEN];
	struct kcoll_rank_addr self, *table;
	uint64_t uid;
	int ret;

	if (!out || !id)
		return coll_err(-EINVAL, "coll_comm_init_rank: NULL argument");
	*out = NULL;
	if (nranks < 1 || nranks > KCOLL_MAX_RANKS || rank < 0 ||
	    rank >= nranks)
		return coll_err(-EINVAL, "rank %d / nranks %d out of range",
				rank, nranks);
	ret = coll_unique_id_secret(id, key);
	if (ret)
		return ret;
	ret = coll_node_addr(&self);
	if (ret)
		return ret;
	table = calloc((size_t)nranks, sizeof(*table));
	if (!table)
		return coll_err(-ENOMEM, "out of memory");
	ret = coll_bootstrap(id, nranks, rank, &self, table, &uid);
	if (!ret)
		ret = coll_comm_init_table(out, nranks, rank, table, uid, key);
	free(table);
	return ret;
}

int coll_comm_init_env(coll_comm **out)
{
	coll_unique_id id;
	int rank, nranks, ret;

	if (!out)
		return coll_err(-EINVAL, "coll_comm_init_env: NULL argument");
	*out = NULL;
	ret = coll_env_unique_id(&id, &rank, &nranks);
	if (ret)
		return ret;
	return coll_comm_init_rank(out, nranks, &id, rank);
}

static int comm_destroy(coll_comm *c, bool abort)
{
	int first = 0, ret;

	if (!c)
		return 0;
	if (abort && c->created)	/* cancel in the kernel first */
		coll_comm_cancel(c);
	pthread_mutex_lock(&c->lock);
	if (!abort && !c->err) {
		ret = comm_wait_cond(c, cond_idle, NULL, true, 0);
		if (ret)
			first = ret;
	}
	if (c->created) {
		struct kcoll_comm_destroy d;

		memset(&d, 0, sizeof(d));
		d.comm_id = c->comm_id;
		ret = kcoll_ioctl(c->ring.ring_fd, KCOLL_IOC_COMM_DESTROY, &d);
		if (ret && !first)
			first = coll_err(ret, "KCOLL_IOC_COMM_DESTROY: %s",
					 coll_strerror(ret));
		c->created = false;
		/* What was in flight completes -ECANCELED; queued SQEs were
		 * never seen by the kernel and go with the ring. */
		if (!c->err && c->ninflight)
			comm_wait_cond(c, cond_drained, NULL, false,
				       coll_now_ms() + COLL_DRAIN_MS);
	}
	pthread_mutex_unlock(&c->lock);
	comm_free(c);
	return first;
}

int coll_comm_destroy(coll_comm *comm)
{
	return comm_destroy(comm, false);
}

int coll_comm_abort(coll_comm *comm)
{
	return comm_destroy(comm, true);
}

int coll_comm_rank(const coll_comm *comm)
{
	return comm ? comm->rank : -EINVAL;
}

int coll_comm_size(const coll_comm *comm)
{
	return comm ? comm->nranks : -EINVAL;
}

int coll_comm_set_priority(coll_comm *comm, int prio)
{
	if (!comm)
		return -EINVAL;
	if (prio < 0 || prio > COLL_PRIO_MAX)
		return coll_err(-EINVAL, "priority %d not in 0..%d", prio,
				COLL_PRIO_MAX);
	pthread_mutex_lock(&comm->lock);
	comm->prio = (uint8_t)prio;
	pthread_mutex_unlock(&comm->lock);
	return 0;
}

int coll_comm_get_priority(const coll_comm *comm)
{
	return comm ? comm->prio : -EINVAL;
}

int coll_comm_set_timeout(coll_comm *comm, uint32_t timeout_ms)
{
	if (!comm)
		return -EINVAL;
	pthread_mutex_lock(&comm->lock);
	comm->timeout_ms = timeout_ms;
	pthread_mutex_unlock(&comm->lock);
	return 0;
}

int64_t coll_comm_get_timeout(const coll_comm *comm)
{
	return comm ? (int64_t)comm->timeout_ms : -EINVAL;
}

/* Deliberately lock-free towards @comm: it must work while another thread
 * holds comm->lock waiting in the kernel. comm_id and the fd are constant
 * while the communicator exists. */
int coll_comm_cancel(coll_comm *comm)
{
	struct kcoll_comm_abort a;
	int ret;

	if (!comm)
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	a.comm_id = comm->comm_id;
	ret = kcoll_ioctl(comm->ring.ring_fd, KCOLL_IOC_COMM_ABORT, &a);
	if (ret)
		return coll_err(ret, "KCOLL_IOC_COMM_ABORT: %s",
				coll_strerror(ret));
	return 0;
}

static const char *report_reason_name(int reason)
{
	switch (reason) {
	case COLL_REPORT_TIMEOUT: return "timeout";
	case COLL_REPORT_PEER_LOST: return "peer lost";
	case COLL_REPORT_MISMATCH: return "signature mismatch";
	case COLL_REPORT_ABORTED: return "aborted";
	case COLL_REPORT_OTHER: return "error";
	}
	return "none";
}

int coll_comm_get_report(coll_comm *comm, coll_report *r)
{
	struct kcoll_comm_report k;
	uint32_t i;
	int ret;

	if (!comm || !r)
		return coll_err(-EINVAL, "coll_comm_get_report: NULL argument");
	memset(r, 0, sizeof(*r));
	memset(&k, 0, sizeof(k));
	k.comm_id = comm->comm_id;
	k.missing_cap = COLL_REPORT_MAX_MISSING;
	k.missing = (uintptr_t)r->missing;
	ret = kcoll_ioctl(comm->ring.ring_fd, KCOLL_IOC_COMM_REPORT, &k);
	if (ret)
		return coll_err(ret, "KCOLL_IOC_COMM_REPORT: %s",
				coll_strerror(ret));
	r->error = k.error;
	r->reason = k.reason;
	r->opcode = k.opcode;
	r->peer = k.peer == ~0U ? -1 : (int)k.peer;
	r->seq = k.seq;
	r->elapsed_ms = k.elapsed_ms;
	r->nmissing = k.nmissing;
	for (i = k.nmissing; i < COLL_REPORT_MAX_MISSING; i++)
		r->missing[i] = 0;
	return 0;
}

/* snprintf at @*n into @buf, keeping @*n the length needed so far. */
static void report_append(char *buf, size_t size, int *n, const char *fmt, ...)
{
	size_t at = (size_t)*n < size ? (size_t)*n : size;
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(buf + at, size - at, fmt, ap);
	va_end(ap);
	if (k > 0)
		*n += k;
}

int coll_report_format(const coll_report *r, char *buf, size_t size)
{
	static const char *const ops[] = {
		"nop", "delay", "allreduce", "reduce", "broadcast", "allgather",
		"reduce_scatter", "alltoall", "send", "recv", "barrier",
	};
	const char *op = r->opcode >= 0 &&
			 (size_t)r->opcode < sizeof(ops) / sizeof(ops[0]) ?
			 ops[r->opcode] : "?";
	uint32_t i, shown;
	int n = 0;

	if (size)
		buf[0] = '\0';
	if (!r->error) {
		report_append(buf, size, &n, "no operation has failed");
		return n;
	}
	report_append(buf, size, &n, "%s #%llu failed after %llu ms: %s (%s)",
		      op, (unsigned long long)r->seq,
		      (unsigned long long)r->elapsed_ms,
		      report_reason_name(r->reason), coll_strerror(r->error));
	if (r->peer >= 0)
		report_append(buf, size, &n, "; rank %d%s", r->peer,
			      r->reason == COLL_REPORT_MISMATCH ? " differs" :
			      r->reason == COLL_REPORT_PEER_LOST ? " lost" :
			      r->reason == COLL_REPORT_TIMEOUT ?
			      " missing" : "");
	if (r->nmissing) {
		shown = r->nmissing < COLL_REPORT_MAX_MISSING ?
			r->nmissing : COLL_REPORT_MAX_MISSING;
		report_append(buf, size, &n, "; waiting for %u rank(s):",
			      r->nmissing);
		for (i = 0; i < shown; i++)
			report_append(buf, size, &n, "%s%u", i ? "," : " ",
				      r->missing[i]);
		if (shown < r->nmissing)
			report_append(buf, size, &n, ",...");
	}
	return n;
}

/* A failed operation has a kernel report: make it coll_last_error(). */
static void comm_describe(coll_comm *c, int ret)
{
	coll_report r;
	char msg[512];

	if (coll_comm_get_report(c, &r) || !r.error)
		return;
	coll_report_format(&r, msg, sizeof(msg));
	coll_err(ret, "%s", msg);
}

int coll_comm_fd(const coll_comm *comm)
{
	return comm ? comm->ring.ring_fd : -EINVAL;
}

/* ------------------------------------------------------------------ */
/* Memory registration                                                 */
/* ------------------------------------------------------------------ */

/* REG_MEM @r on @comm and list it: 0 or -errno (reported). */
static int mem_register(coll_comm *comm, struct kcoll_reg_mem *r,
			coll_mem **out)
{
	struct coll_mem *m;
	int ret;

	*out = NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return coll_err(-ENOMEM, "out of memory");
	r->comm_id = comm->comm_id;
	ret = kcoll_ioctl(comm->ring.ring_fd, KCOLL_IOC_REG_MEM, r);
	if (ret) {
		free(m);
		if (!(r->flags & KCOLL_REG_DMABUF))
			return coll_err(ret, "KCOLL_IOC_REG_MEM of %llu bytes: %s",
					(unsigned long long)r->len,
					coll_strerror(ret));
		return coll_err(ret, "KCOLL_IOC_REG_MEM of dma-buf fd %d "
				"(%llu bytes at %llu): %s%s", r->dmabuf_fd,
				(unsigned long long)r->len,
				(unsigned long long)r->dmabuf_off,
				coll_strerror(ret),
				ret == -EOPNOTSUPP ? " (this RDMA device moves "
				"data with the CPU, and the buffer has no CPU "
				"mapping: device memory needs a real NIC)" :
				ret == -EDQUOT ? " (over the module's "
				"user_max_dmabuf_mb)" : "");
	}
	m->addr = r->addr;
	m->len = r->len;
	m->handle = r->handle;
	pthread_mutex_lock(&comm->lock);
	m->next = comm->mems;
	comm->mems = m;
	pthread_mutex_unlock(&comm->lock);
	*out = m;
	return 0;
}

int coll_mem_register_dmabuf(coll_comm *comm, int fd, uint64_t offset,
			     size_t len, const void *addr, unsigned int flags,
			     coll_mem **out)
{
	struct kcoll_reg_mem r;

	if (!comm || fd < 0 || !len || !out || (flags & ~COLL_MEM_NO_CPU))
		return coll_err(-EINVAL, "coll_mem_register_dmabuf: bad argument");
	memset(&r, 0, sizeof(r));
	r.addr = (uintptr_t)addr;
	r.len = len;
	r.flags = KCOLL_REG_DMABUF | flags;
	r.dmabuf_fd = fd;
	r.dmabuf_off = offset;
	return mem_register(comm, &r, out);
}

/* GPU memory: the pages around [@addr, @addr + @len) of the allocation
 * [@base, @base + @size), through their dma-buf, for the NIC only. */
static int mem_register_cuda(coll_comm *comm, void *addr, size_t len,
			     uint64_t base, uint64_t size, coll_mem **out)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)addr;
	uint64_t start = a & ~(page - 1), end = (a + len + page - 1) & ~(page - 1);
	struct kcoll_reg_mem r;
	int fd = -1, ret;

	if (a < base || a + len > base + size)
		return coll_err(-EINVAL, "%zu bytes at GPU pointer %p go past its allocation",
				len, addr);
	if (start < base)
		start = base;
	ret = coll_cuda_dmabuf(addr, start, end - start, &fd);
	if (ret)
		return ret;
	memset(&r, 0, sizeof(r));
	r.addr = a;
	r.len = len;
	r.flags = KCOLL_REG_DMABUF | KCOLL_REG_NO_CPU;
	r.dmabuf_fd = fd;
	r.dmabuf_off = a - start;
	ret = mem_register(comm, &r, out);
	close(fd);
	return ret;
}

/* Is the page of @p mapped in this process? */
static bool mem_mapped(const void *p)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned char v;

	return !mincore((void *)((uintptr_t)p & ~(uintptr_t)(page - 1)),
			(size_t)page, &v) || errno != ENOMEM;
}

int coll_mem_register(coll_comm *comm, void *addr, size_t len, coll_mem **out)
{
	struct kcoll_reg_mem r;
	uint64_t base, size;
	int ret;

	if (!comm || !addr || !len || !out)
		return coll_err(-EINVAL, "coll_mem_register: bad argument");
	ret = coll_cuda_range(addr, &base, &size);
	if (ret < 0)
		return ret;
	if (ret)
		return mem_register_cuda(comm, addr, len, base, size, out);
	memset(&r, 0, sizeof(r));
	r.addr = (uintptr_t)addr;
	r.len = len;
	ret = mem_register(comm, &r, out);
	if (ret == -EFAULT && !mem_mapped(addr) && coll_cuda_unavailable())
		return coll_err(-ENOTSUP, "%p is not mapped in this process: if it "
				"is GPU memory, libcoll needs libcuda.so.1 (%s)",
				addr, coll_cuda_unavailable());
	return ret;
}

/*
 * The buffers of an operation that are GPU memory in no registration: their
 * whole allocation registered, once (the registrations stay with the
 * communicator, a cache of GPU allocations). 0 or -errno.
 */
static int comm_gpu_buffers(coll_comm *c, uint64_t addr, uint64_t len)
{
	uint64_t base, size;
	coll_mem *m;
	uint32_t h;
	int ret;

	if (!addr || !len)
		return 0;
	pthread_mutex_lock(&c->lock);
	h = comm_find_mr(c, addr, len);
	pthread_mutex_unlock(&c->lock);
	if (h)
		return 0;
	ret = coll_cuda_range((void *)(uintptr_t)addr, &base, &size);
	if (ret <= 0)
		return ret;
	if (addr + len > base + size)
		return coll_err(-EINVAL, "%llu bytes at GPU pointer %#llx go past its allocation",
				(unsigned long long)len, (unsigned long long)addr);
	return mem_register_cuda(c, (void *)(uintptr_t)base, size, base, size,
				 &m);
}

int coll_mem_deregister(coll_comm *comm, coll_mem *mem)
{
	struct kcoll_dereg_mem d;
	struct coll_mem **pp;
	int ret;

	if (!comm || !mem)
		return coll_err(-EINVAL, "coll_mem_deregister: NULL argument");
	pthread_mutex_lock(&comm->lock);
	for (pp = &comm->mems; *pp && *pp != mem; pp = &(*pp)->next)
		;
	if (!*pp) {
		pthread_mutex_unlock(&comm->lock);
		return coll_err(-EINVAL, "registration not of this "
				"communicator");
	}
	memset(&d, 0, sizeof(d));
	d.handle = mem->handle;
	ret = kcoll_ioctl(comm->ring.ring_fd, KCOLL_IOC_DEREG_MEM, &d);
	if (ret) {
		pthread_mutex_unlock(&comm->lock);
		return coll_err(ret, "KCOLL_IOC_DEREG_MEM: %s",
				coll_strerror(ret));
	}
	*pp = mem->next;
	pthread_mutex_unlock(&comm->lock);
	free(mem);
	return 0;
}
