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
#include "dmabuf_span.h"
/* The shape of every operation: one table with the module. */
#include "kcoll_shape.h"
/* Which dtypes are floating point (AVG): the module's rule. */
#include "kcoll_logic.h"
/* The GPU steps of stream-ordered collectives: the module's schedules. */
#include "kcoll_sched.h"

struct coll_mem {
	struct coll_mem *next;
	uintptr_t addr;
	size_t len;
	uint32_t handle;
	uint64_t gpu_id;		/* GPU memory: the allocation's buffer id */
	bool autoreg;			/* libcoll's own (comm_gpu_buffers()) */
};

struct coll_request {
	coll_comm *comm;
	coll_request *prev, *next;	/* comm->reqs */
	uint32_t slot;
	int res;
	bool done;
	bool report;			/* KCOLL_CQE_F_REPORT: ask the kernel */
	bool orphan;			/* freed by the user while in flight */
	bool stream;			/* stream-ordered, libcoll's own */
	uint8_t gpu_slot;		/* ... its ticket's doorbell slot */
	uint64_t *vec;			/* a v-variant's count table: the
					 * kernel reads it at submission */
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
	/* Stream-ordered collectives (comm_op_stream()) */
	pthread_mutex_t gpu_lock;	/* tickets in stream and SQ order */
	struct kcoll_gpu_bell *bell;	/* the doorbell page (host memory) */
	uint64_t bell_dptr;		/* ... as the device sees it */
	uint64_t scratch;		/* device memory */
	size_t scratch_len;
	coll_mem *scratch_mem;
	uint32_t gpu_ticket;		/* of the last one */
	uint64_t gpu_busy;		/* the slots (ticket % 64) of their
					 * SQEs not completed */
	int async_err;			/* the first one that failed */
	bool gpu_flush;			/* waits flush the NIC's writes */
	void *int_stream;		/* for the calls that take none */
	uint64_t ops_supported;		/* the kernel's (KCOLL_IOC_QUERY);
					 * 0: not asked yet */
	/* What split, shrink and grow derive a child from (family.c). */
	struct kcoll_rank_addr *table;	/* nranks entries */
	uint8_t key[KCOLL_KEY_LEN];
	uint64_t parent_uid;		/* 0: none */
	uint32_t derived;		/* children derived so far */
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
	case COLL_DTYPE_FP8_E4M3:
	case COLL_DTYPE_FP8_E5M2:
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
	case COLL_DTYPE_FP8_E4M3: return "fp8e4m3";
	case COLL_DTYPE_FP8_E5M2: return "fp8e5m2";
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

int coll_redop_valid(coll_dtype dtype, coll_redop op)
{
	if (!coll_dtype_size(dtype))
		return 0;
	if (op < COLL_REDOP_FIRST || op > COLL_REDOP_LAST)
		return 0;
	/* The module's own rule (kmod/kcoll_logic.h): one list of float
	 * types. */
	return op != COLL_REDOP_AVG || kcoll_dtype_is_float(dtype);
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

static void req_free(coll_request *req)
{
	free(req->vec);
	free(req);
}

static bool comm_describe(coll_comm *c, int ret, bool own);

/*
 * coll_last_error() for done @req's result @ret, if it failed: its report;
 * or for one refused at submission (no report of its own), the one that
 * explains the refusal if the communicator keeps it (same error); or at
 * least the error, never an earlier call's words. Must hold c->lock.
 */
static void req_explain(coll_comm *c, coll_request *req, int ret)
{
	if (ret < 0 && !comm_describe(c, ret, req->report))
		coll_err(ret, "the operation failed: %s", coll_strerror(ret));
}

/* The doorbell slot (of KCOLL_GPU_SLOTS) of stream ticket @ticket. */
static unsigned int ticket_slot(uint64_t ticket)
{
	return (unsigned int)(ticket % KCOLL_GPU_SLOTS);
}

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
	if (req->stream) {
		c->gpu_busy &= ~(1ULL << req->gpu_slot);
		if (res < 0 && !c->async_err) {
			c->async_err = res;
			if (req->report)
				comm_describe(c, res, true);
		}
	}
	if (req->orphan) {
		req_unlink(req);
		req_free(req);
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

static void comm_gpu_release(coll_comm *c, uint64_t T);

/*
 * The ring failed: the stream-ordered SQEs the module did not take have
 * streams that would wait for ever (a group's, queued since its start,
 * included). Let them past.
 */
static void comm_gpu_unsubmitted(coll_comm *c)
{
	struct coll_ring_sq *sq = &c->ring.sq;
	uint32_t i = __atomic_load_n(sq->khead, __ATOMIC_ACQUIRE);

	if (sq->sqe_tail - i > sq->ring_entries)
		i = sq->sqe_tail - sq->ring_entries;
	for (; i != sq->sqe_tail; i++) {
		const struct kcoll_sqe *q = &sq->sqes[i & sq->ring_mask];

		if (q->flags & KCOLL_SQE_F_GPU)
			comm_gpu_release(c, (uint64_t)q->resv <<
					 KCOLL_GPU_TICKET_SHIFT);
	}
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
		if (req->stream) {
			c->gpu_busy &= ~(1ULL << req->gpu_slot);
			if (!c->async_err)
				c->async_err = err;
		}
		if (req->orphan) {
			req_unlink(req);
			req_free(req);
		}
	}
	comm_gpu_unsubmitted(c);
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

/* The doorbell slot of the next ticket is free (and fewer than 64 are
 * in flight): a point-to-point operation may end after later ones. */
static bool cond_gpu_slot_free(coll_comm *c, void *arg)
{
	(void)arg;
	return !(c->gpu_busy >> ticket_slot(c->gpu_ticket + 1ULL) & 1);
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

/* A stream-ordered operation's end wait, enqueued by coll_group_end(). */
struct coll_group_end {
	coll_comm *comm;
	void *stream;
	uint64_t T;			/* its ticket */
};

struct coll_group {
	int depth;
	coll_comm **comms;
	unsigned int ncomms, capcomms;
	coll_request **waits;		/* blocking calls issued in the group */
	unsigned int nwaits, capwaits;
	struct coll_group_end *ends;	/* stream-ordered calls, in order */
	unsigned int nends, capends;
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

static int comm_gpu_end_wait(coll_comm *c, void *stream, uint64_t T);

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
	/*
	 * Only now may the streams wait for the grouped operations' ends:
	 * each waits behind every start of the group on its stream, so a
	 * send and a receive on one stream run together. An operation whose
	 * SQE did not reach the module had its ticket released (its end
	 * passes at once).
	 */
	for (i = 0; i < g->nends; i++) {
		struct coll_group_end *e = &g->ends[i];

		pthread_mutex_lock(&e->comm->gpu_lock);
		ret = comm_gpu_end_wait(e->comm, e->stream, e->T);
		pthread_mutex_unlock(&e->comm->gpu_lock);
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
	free(g->ends);
	memset(g, 0, sizeof(*g));
	return first;
}

/* ------------------------------------------------------------------ */
/* Posting operations                                                  */
/* ------------------------------------------------------------------ */

static int comm_gpu_buffers(coll_comm *c, uint64_t addr, uint64_t len);

/* The registration that holds [addr, addr + len) entirely, or NULL. */
static struct coll_mem *comm_find_mem(coll_comm *c, uint64_t addr,
				      uint64_t len)
{
	struct coll_mem *m;

	if (!addr || !len)
		return NULL;
	for (m = c->mems; m; m = m->next)
		if (addr >= m->addr && addr - m->addr <= m->len &&
		    len <= m->len - (addr - m->addr))
			return m;
	return NULL;
}

static uint32_t comm_find_mr(coll_comm *c, uint64_t addr, uint64_t len)
{
	struct coll_mem *m = comm_find_mem(c, addr, len);

	return m ? m->handle : 0;
}

/*
 * Queue @t (comm_id, user_data and the registrations are filled in here)
 * and, outside a group, submit it. Blocking calls outside a group wait for
 * the result; inside one they are waited for by coll_group_end(). With
 * @written (a stream-ordered one's), whether its SQE went into the ring:
 * from then on a failure of the ring releases its ticket if the module
 * did not take it (comm_fail()), and only then.
 */
static int comm_post(coll_comm *c, struct kcoll_sqe *t, uint64_t send_bytes,
		     uint64_t recv_bytes, bool blocking, coll_request **reqp,
		     bool *written, uint64_t *vec)
{
	bool stream = written != NULL;
	bool in_group = coll_grp.depth > 0;
	struct kcoll_sqe *sqe;
	coll_request *req;
	uint32_t slot;
	int ret;

	ret = comm_gpu_buffers(c, t->send_addr, send_bytes);
	if (!ret)
		ret = comm_gpu_buffers(c, t->recv_addr, recv_bytes);
	if (!ret && in_group)
		ret = group_reserve(c, blocking);
	if (ret) {
		free(vec);
		return ret;
	}
	req = calloc(1, sizeof(*req));
	if (!req) {
		free(vec);
		return coll_err(-ENOMEM, "out of memory");
	}
	req->comm = c;
	/* A v-variant's table lives with its request: the caller's arrays
	 * may go as soon as the call returns, even inside a group. */
	req->vec = vec;
	/* Stream-ordered without a caller's request: libcoll's own, its
	 * error kept for coll_comm_async_error(). */
	req->stream = stream;
	req->orphan = stream && !reqp;

	pthread_mutex_lock(&c->lock);
	ret = comm_reserve(c);
	if (ret) {
		pthread_mutex_unlock(&c->lock);
		req_free(req);
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
	if (written)
		*written = true;
	*sqe = *t;
	sqe->comm_id = c->comm_id;
	sqe->prio = c->prio;
	sqe->timeout_ms = c->timeout_ms;
	sqe->user_data = (uint64_t)c->slots[slot].gen << 32 | slot;
	sqe->send_mr = comm_find_mr(c, t->send_addr, send_bytes);
	sqe->recv_mr = comm_find_mr(c, t->recv_addr, recv_bytes);
	c->nqueued++;
	if (stream) {
		req->gpu_slot = (uint8_t)ticket_slot(t->resv);
		c->gpu_busy |= 1ULL << req->gpu_slot;
	}
	if (!in_group)
		ret = comm_submit(c);
	pthread_mutex_unlock(&c->lock);

	if (ret) {
		/* comm_fail() completed it with the error (and freed it if
		 * it was libcoll's own). */
		if (!(stream && !reqp))
			coll_request_free(req);
		return ret;
	}
	if (stream && !reqp)
		return 0;
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

/* Bytes of the send and receive buffers of @scount, @rcount elements of
 * @es bytes: -EOVERFLOW, or -EINVAL for a NULL buffer that holds some. */
static int comm_buf_bytes(uint64_t scount, uint64_t rcount, uint64_t es,
			  const void *sendbuf, const void *recvbuf,
			  uint64_t *sbytes, uint64_t *rbytes)
{
	int ret = mul_bytes(scount, es, 1, sbytes);

	if (!ret)
		ret = mul_bytes(rcount, es, 1, rbytes);
	if (ret)
		return ret;
	if ((*sbytes && !sendbuf) || (*rbytes && !recvbuf))
		return coll_err(-EINVAL, "NULL buffer with a non-zero count");
	return 0;
}

/*
 * Build the SQE of one operation; @root is the root of REDUCE/BROADCAST
 * and the peer of SEND/RECV. Blocking when @reqp is NULL.
 */
static int comm_op_stream(coll_comm *c, struct kcoll_sqe *t,
			  uint64_t sbytes, uint64_t rbytes, void *stream,
			  coll_request **reqp,
			  const struct kcoll_sched_args *va, uint64_t *vec);
static int comm_op_device(coll_comm *c, struct kcoll_sqe *t,
			  uint64_t sbytes, uint64_t rbytes, bool blocking,
			  coll_request **reqp,
			  const struct kcoll_sched_args *va, uint64_t *vec);

/*
 * Operations newer than the first kernel with communicators (gather and
 * scatter): -EOPNOTSUPP, named, where the loaded module lacks them, rather
 * than its bare -EINVAL for an unknown opcode.
 */
static int comm_op_supported(coll_comm *c, uint8_t opcode, const char *name)
{
	struct kcoll_query q;
	uint64_t ops = __atomic_load_n(&c->ops_supported, __ATOMIC_RELAXED);

	if (opcode < KCOLL_OP_GATHER)
		return 0;
	if (!ops) {
		if (coll_ring_query(c->ring.ring_fd, &q))
			return 0;	/* the kernel will say */
		ops = q.ops_supported | 1;	/* NOP: never 0 again */
		__atomic_store_n(&c->ops_supported, ops, __ATOMIC_RELAXED);
	}
	if (opcode >= 64 || !(ops & (1ULL << opcode)))
		return coll_err(-EOPNOTSUPP, "%s: the loaded kcoll module is "
				"older than this libcoll and lacks it", name);
	return 0;
}

static int comm_op(coll_comm *c, uint8_t opcode, const void *sendbuf,
		   void *recvbuf, size_t count, coll_dtype dtype,
		   coll_redop redop, int root, bool blocking,
		   coll_request **reqp, bool on_stream, void *stream)
{
	const struct kcoll_shape *d = kcoll_shape(opcode);
	uint64_t es = 0, sbytes = 0, rbytes = 0, gbase, gsize;
	unsigned long long scount = 0, rcount = 0;
	unsigned int rank, proot;
	struct kcoll_sqe t;
	int ret;

	if (!c || (!blocking && !reqp && !on_stream))
		return coll_err(-EINVAL, "NULL communicator or request");
	if (reqp)
		*reqp = NULL;
	if (!d || !d->on_comm)
		return coll_err(-EINVAL, "unknown operation");
	ret = comm_op_supported(c, opcode, d->name);
	if (ret)
		return ret;
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
	ret = comm_buf_bytes(scount, rcount, es, sendbuf, recvbuf, &sbytes,
			     &rbytes);
	if (ret)
		return ret;
	/* Buffers an operation ignores on this rank stay zero. */
	if (kcoll_shape_used(d->send, rank, proot))
		t.send_addr = (uintptr_t)sendbuf;
	if (kcoll_shape_used(d->recv, rank, proot))
		t.recv_addr = (uintptr_t)recvbuf;
	if (on_stream)
		return comm_op_stream(c, &t, sbytes, rbytes, stream, NULL,
				      NULL, NULL);
	/* A reduction of GPU memory: the GPU reduces, on libcoll's stream. */
	if (d->reduces && (coll_cuda_range((void *)(uintptr_t)t.send_addr,
					   &gbase, &gsize) > 0 ||
			   coll_cuda_range((void *)(uintptr_t)t.recv_addr,
					   &gbase, &gsize) > 0))
		return comm_op_device(c, &t, sbytes, rbytes, blocking, reqp,
				      NULL, NULL);
	return comm_post(c, &t, sbytes, rbytes, blocking, reqp, NULL, NULL);
}

int coll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
		   coll_dtype dtype, coll_redop op, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_ALLREDUCE, sendbuf, recvbuf, count, dtype,
		       op, 0, true, NULL, false, NULL);
}

int coll_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
		    coll_dtype dtype, coll_redop op, coll_comm *comm,
		    coll_request **req)
{
	return comm_op(comm, KCOLL_OP_ALLREDUCE, sendbuf, recvbuf, count, dtype,
		       op, 0, false, req, false, NULL);
}

int coll_reduce(const void *sendbuf, void *recvbuf, size_t count,
		coll_dtype dtype, coll_redop op, int root, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_REDUCE, sendbuf, recvbuf, count, dtype,
		       op, root, true, NULL, false, NULL);
}

int coll_ireduce(const void *sendbuf, void *recvbuf, size_t count,
		 coll_dtype dtype, coll_redop op, int root, coll_comm *comm,
		 coll_request **req)
{
	return comm_op(comm, KCOLL_OP_REDUCE, sendbuf, recvbuf, count, dtype,
		       op, root, false, req, false, NULL);
}

int coll_broadcast(const void *sendbuf, void *recvbuf, size_t count,
		   coll_dtype dtype, int root, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_BROADCAST, sendbuf, recvbuf, count, dtype,
		       0, root, true, NULL, false, NULL);
}

int coll_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
		    coll_dtype dtype, int root, coll_comm *comm,
		    coll_request **req)
{
	return comm_op(comm, KCOLL_OP_BROADCAST, sendbuf, recvbuf, count, dtype,
		       0, root, false, req, false, NULL);
}

int coll_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
		   coll_dtype dtype, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_ALLGATHER, sendbuf, recvbuf, sendcount,
		       dtype, 0, 0, true, NULL, false, NULL);
}

int coll_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
		    coll_dtype dtype, coll_comm *comm, coll_request **req)
{
	return comm_op(comm, KCOLL_OP_ALLGATHER, sendbuf, recvbuf, sendcount,
		       dtype, 0, 0, false, req, false, NULL);
}

int coll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
			coll_dtype dtype, coll_redop op, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_REDUCE_SCATTER, sendbuf, recvbuf,
		       recvcount, dtype, op, 0, true, NULL, false, NULL);
}

int coll_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
			 coll_dtype dtype, coll_redop op, coll_comm *comm,
			 coll_request **req)
{
	return comm_op(comm, KCOLL_OP_REDUCE_SCATTER, sendbuf, recvbuf,
		       recvcount, dtype, op, 0, false, req, false, NULL);
}

int coll_alltoall(const void *sendbuf, void *recvbuf, size_t count,
		  coll_dtype dtype, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_ALLTOALL, sendbuf, recvbuf, count, dtype,
		       0, 0, true, NULL, false, NULL);
}

int coll_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
		   coll_dtype dtype, coll_comm *comm, coll_request **req)
{
	return comm_op(comm, KCOLL_OP_ALLTOALL, sendbuf, recvbuf, count, dtype,
		       0, 0, false, req, false, NULL);
}

int coll_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
		coll_dtype dtype, int root, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_GATHER, sendbuf, recvbuf, sendcount,
		       dtype, 0, root, true, NULL, false, NULL);
}

int coll_igather(const void *sendbuf, void *recvbuf, size_t sendcount,
		 coll_dtype dtype, int root, coll_comm *comm,
		 coll_request **req)
{
	return comm_op(comm, KCOLL_OP_GATHER, sendbuf, recvbuf, sendcount,
		       dtype, 0, root, false, req, false, NULL);
}

int coll_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
		 coll_dtype dtype, int root, coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_SCATTER, sendbuf, recvbuf, recvcount,
		       dtype, 0, root, true, NULL, false, NULL);
}

int coll_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount,
		  coll_dtype dtype, int root, coll_comm *comm,
		  coll_request **req)
{
	return comm_op(comm, KCOLL_OP_SCATTER, sendbuf, recvbuf, recvcount,
		       dtype, 0, root, false, req, false, NULL);
}

/*
 * The v-variants: the table the kernel reads (uapi struct kcoll_vec) is
 * built here from the caller's arrays and kept with the request; the
 * schedules' own code (kcoll_sched_vec.c, as the kernel runs it) checks it
 * and says which buffers it spans. @arrs are the caller's arrays in the
 * table's order.
 */
static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b,
			   uint64_t blen)
{
	return alen && blen && a < b + blen && b < a + alen;
}

static int comm_vop(coll_comm *c, uint8_t opcode, const void *sendbuf,
		    void *recvbuf, const size_t *const *arrs,
		    coll_dtype dtype, coll_redop redop, bool blocking,
		    coll_request **reqp, bool on_stream, void *stream)
{
	const struct kcoll_shape *d = kcoll_shape(opcode);
	uint64_t es, sbytes = 0, rbytes = 0, gbase, gsize;
	struct kcoll_sched_args a = { .opcode = opcode };
	uint64_t *vec;
	struct kcoll_sqe t;
	unsigned int k, w = d->vec;
	size_t words, pre;
	int n, j, ret;
	bool dev;

	if (!c || (!blocking && !reqp && !on_stream))
		return coll_err(-EINVAL, "NULL communicator or request");
	if (reqp)
		*reqp = NULL;
	ret = comm_op_supported(c, opcode, d->name);
	if (ret)
		return ret;
	n = c->nranks;
	for (k = 0; k < w; k++)
		if (!arrs[k])
			return coll_err(-EINVAL, "%s: NULL count or "
					"displacement array", d->name);
	es = coll_dtype_size(dtype);
	if (!es)
		return coll_err(-EINVAL, "invalid dtype %d", (int)dtype);
	if (d->reduces && !coll_redop_valid(dtype, redop))
		return coll_err(-EINVAL, "reduction %s is not valid for %s",
				coll_redop_name(redop), coll_dtype_name(dtype));
	/* REDUCE_SCATTERV: room for its block offsets, which the GPU
	 * steps' schedule reads (the kernel keeps its own). */
	words = (size_t)w * n;
	pre = opcode == KCOLL_OP_REDUCE_SCATTERV ? (size_t)n : 0;
	vec = malloc((words + pre) * sizeof(*vec));
	if (!vec)
		return coll_err(-ENOMEM, "out of memory");
	for (k = 0; k < w; k++)
		for (j = 0; j < n; j++)
			vec[(size_t)k * n + j] = arrs[k][j];
	a.redop = d->reduces ? (uint32_t)redop : KCOLL_REDOP_NONE;
	a.rank = (uint32_t)c->rank;
	a.nranks = (uint32_t)n;
	a.vec = vec;
	a.vec_pre = pre ? vec + words : NULL;
	ret = kcoll_sched_vec_check(&a);
	if (ret) {
		free(vec);
		return ret == -ERANGE ?
		       coll_err(ret, "%s: a count or displacement above 2^48 "
				"elements", d->name) :
		       coll_err(ret, "%s: rank %d sends itself %zu elements "
				"but receives %zu", d->name, c->rank,
				arrs[0][c->rank], arrs[2][c->rank]);
	}
	a.in_place = kcoll_sched_vec_in_place(&a, es, (uintptr_t)sendbuf,
					      (uintptr_t)recvbuf);
	ret = comm_buf_bytes(kcoll_sched_send_count(&a),
			     kcoll_sched_recv_count(&a), es, sendbuf, recvbuf,
			     &sbytes, &rbytes);
	/* In place means only ALLGATHERV's own block (MPI_IN_PLACE's
	 * layout); anything else overlapping would read what it writes. */
	if (!ret && !a.in_place &&
	    ranges_overlap((uintptr_t)sendbuf, sbytes, (uintptr_t)recvbuf,
			   rbytes))
		ret = coll_err(-EINVAL, "%s: send and receive buffers overlap",
			       d->name);
	if (ret) {
		free(vec);
		return ret;
	}
	memset(&t, 0, sizeof(t));
	t.opcode = opcode;
	t.dtype = (uint8_t)dtype;
	t.redop = (uint8_t)a.redop;
	t.vec_addr = (uintptr_t)vec;
	if (sbytes || a.in_place)
		t.send_addr = (uintptr_t)sendbuf;
	t.recv_addr = (uintptr_t)recvbuf;
	/* A reduction of GPU memory: the GPU reduces, on libcoll's stream. */
	dev = d->reduces && !on_stream &&
	      (coll_cuda_range((void *)sendbuf, &gbase, &gsize) > 0 ||
	       coll_cuda_range(recvbuf, &gbase, &gsize) > 0);
	if ((on_stream || dev) && !(c->ring.features & KCOLL_FEAT_GPU_VEC)) {
		free(vec);
		return coll_err(-EOPNOTSUPP, "%s on a CUDA stream: the loaded "
				"kcoll module is older than this libcoll and "
				"lacks it", d->name);
	}
	if (on_stream)
		return comm_op_stream(c, &t, sbytes, rbytes, stream, NULL, &a,
				      vec);
	if (dev)
		return comm_op_device(c, &t, sbytes, rbytes, blocking, reqp,
				      &a, vec);
	return comm_post(c, &t, sbytes, rbytes, blocking, reqp, NULL, vec);
}

int coll_allgatherv(const void *sendbuf, void *recvbuf,
		    const size_t *recvcounts, const size_t *displs,
		    coll_dtype dtype, coll_comm *comm)
{
	const size_t *a[] = { recvcounts, displs };

	return comm_vop(comm, KCOLL_OP_ALLGATHERV, sendbuf, recvbuf, a, dtype,
			0, true, NULL, false, NULL);
}

int coll_iallgatherv(const void *sendbuf, void *recvbuf,
		     const size_t *recvcounts, const size_t *displs,
		     coll_dtype dtype, coll_comm *comm, coll_request **req)
{
	const size_t *a[] = { recvcounts, displs };

	return comm_vop(comm, KCOLL_OP_ALLGATHERV, sendbuf, recvbuf, a, dtype,
			0, false, req, false, NULL);
}

int coll_reduce_scatterv(const void *sendbuf, void *recvbuf,
			 const size_t *recvcounts, coll_dtype dtype,
			 coll_redop op, coll_comm *comm)
{
	const size_t *a[] = { recvcounts };

	return comm_vop(comm, KCOLL_OP_REDUCE_SCATTERV, sendbuf, recvbuf, a,
			dtype, op, true, NULL, false, NULL);
}

int coll_ireduce_scatterv(const void *sendbuf, void *recvbuf,
			  const size_t *recvcounts, coll_dtype dtype,
			  coll_redop op, coll_comm *comm, coll_request **req)
{
	const size_t *a[] = { recvcounts };

	return comm_vop(comm, KCOLL_OP_REDUCE_SCATTERV, sendbuf, recvbuf, a,
			dtype, op, false, req, false, NULL);
}

int coll_alltoallv(const void *sendbuf, const size_t *sendcounts,
		   const size_t *sdispls, void *recvbuf,
		   const size_t *recvcounts, const size_t *rdispls,
		   coll_dtype dtype, coll_comm *comm)
{
	const size_t *a[] = { sendcounts, sdispls, recvcounts, rdispls };

	return comm_vop(comm, KCOLL_OP_ALLTOALLV, sendbuf, recvbuf, a, dtype,
			0, true, NULL, false, NULL);
}

int coll_ialltoallv(const void *sendbuf, const size_t *sendcounts,
		    const size_t *sdispls, void *recvbuf,
		    const size_t *recvcounts, const size_t *rdispls,
		    coll_dtype dtype, coll_comm *comm, coll_request **req)
{
	const size_t *a[] = { sendcounts, sdispls, recvcounts, rdispls };

	return comm_vop(comm, KCOLL_OP_ALLTOALLV, sendbuf, recvbuf, a, dtype,
			0, false, req, false, NULL);
}

int coll_send(const void *sendbuf, size_t count, coll_dtype dtype, int peer,
	      coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_SEND, sendbuf, NULL, count, dtype, 0,
		       peer, true, NULL, false, NULL);
}

int coll_isend(const void *sendbuf, size_t count, coll_dtype dtype, int peer,
	       coll_comm *comm, coll_request **req)
{
	return comm_op(comm, KCOLL_OP_SEND, sendbuf, NULL, count, dtype, 0,
		       peer, false, req, false, NULL);
}

int coll_recv(void *recvbuf, size_t count, coll_dtype dtype, int peer,
	      coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_RECV, NULL, recvbuf, count, dtype, 0,
		       peer, true, NULL, false, NULL);
}

int coll_irecv(void *recvbuf, size_t count, coll_dtype dtype, int peer,
	       coll_comm *comm, coll_request **req)
{
	return comm_op(comm, KCOLL_OP_RECV, NULL, recvbuf, count, dtype, 0,
		       peer, false, req, false, NULL);
}

int coll_barrier(coll_comm *comm)
{
	return comm_op(comm, KCOLL_OP_BARRIER, NULL, NULL, 0, 0, 0, 0, true,
		       NULL, false, NULL);
}

int coll_ibarrier(coll_comm *comm, coll_request **req)
{
	return comm_op(comm, KCOLL_OP_BARRIER, NULL, NULL, 0, 0, 0, 0, false,
		       req, false, NULL);
}

/* ------------------------------------------------------------------ */
/* Stream-ordered collectives                                          */
/* ------------------------------------------------------------------ */

/*
 * The module and the GPU meet on the doorbell page (uapi struct
 * kcoll_gpu_bell, docs/DESIGN.md "GPU reductions"). For each operation
 * libcoll enqueues on the caller's stream, in this order:
 *	WriteValue64(start, T)			the stream reached it
 *	per reduction step j = 1..k:
 *	  WaitValue64(ready >= T | j)		the step's data landed
 *	  kernel (dst = operand OP landed, or dst /= nranks)
 *	  WriteValue64(done, T | j)		the module may go on
 *	WaitValue64(end >= T | STEP_MASK)	the operation is over
 * then submits the SQE (KCOLL_SQE_F_GPU, ticket in resv). The steps come
 * from the same plain schedule code the module runs
 * (kcoll_sched_gpu_layout()): no thread of libcoll's waits for anything.
 */

#define COLL_SCRATCH_MIN	(1u << 20)

static int kcoll_ioctl(int fd, unsigned long cmd, void *arg);

static bool cond_gpu_idle(coll_comm *c, void *arg)
{
	(void)arg;
	return !c->gpu_busy;
}

/* The doorbell page and a scratch of @need bytes, given to the kernel. */
static int comm_gpu_setup(coll_comm *c, uint64_t need)
{
	long page = sysconf(_SC_PAGESIZE);
	struct kcoll_gpu_setup g;
	uint64_t len, dptr;
	coll_mem *m;
	int ret;

	if (!c->bell) {
		void *p = NULL;

		if (posix_memalign(&p, (size_t)page, (size_t)page))
			return coll_err(-ENOMEM, "out of memory");
		memset(p, 0, (size_t)page);
		ret = coll_cuda_flush_needed();
		if (ret < 0) {
			free(p);
			return ret;
		}
		c->gpu_flush = ret;
		ret = coll_cuda_host_map(p, (size_t)page, &c->bell_dptr);
		if (ret) {
			free(p);
			return ret;
		}
		c->bell = p;
	}
	if (c->scratch && need <= c->scratch_len)
		return 0;
	/* A bigger scratch: only once nothing in flight uses the old one. */
	if (c->scratch) {
		pthread_mutex_lock(&c->lock);
		ret = comm_wait_cond(c, cond_gpu_idle, NULL, true, 0);
		pthread_mutex_unlock(&c->lock);
		if (ret)
			return ret;
	}
	len = need < COLL_SCRATCH_MIN ? COLL_SCRATCH_MIN : need;
	len = (len + COLL_SCRATCH_MIN - 1) & ~(uint64_t)(COLL_SCRATCH_MIN - 1);
	ret = coll_cuda_alloc(len, &dptr);
	if (ret)
		return ret;
	ret = coll_mem_register(c, (void *)(uintptr_t)dptr, len, &m);
	if (ret) {
		coll_cuda_free(dptr);
		return ret;
	}
	memset(&g, 0, sizeof(g));
	g.comm_id = c->comm_id;
	g.bell = (uintptr_t)c->bell;
	g.scratch_mr = m->handle;
	g.scratch_addr = dptr;
	g.scratch_len = len;
	ret = kcoll_ioctl(c->ring.ring_fd, KCOLL_IOC_GPU_SETUP, &g);
	if (ret) {
		coll_mem_deregister(c, m);
		coll_cuda_free(dptr);
		return coll_err(ret, "KCOLL_IOC_GPU_SETUP: %s%s", coll_strerror(ret),
				ret == -EOPNOTSUPP ? " (stream-ordered collectives "
				"need a communicator created with KCOLL_DEVMEM=1 "
				"whose peers are all on other nodes)" : "");
	}
	if (c->scratch) {
		coll_mem_deregister(c, c->scratch_mem);
		coll_cuda_free(c->scratch);
	}
	c->scratch = dptr;
	c->scratch_len = len;
	c->scratch_mem = m;
	return 0;
}

/* Raise a word the module owns to at least @v: an atomic maximum, as
 * the module's own raise (the two may race; neither lowers the other). */
static void bell_raise(__u64 *w, __u64 v)
{
	__u64 old = __atomic_load_n(w, __ATOMIC_RELAXED);

	while (old < v &&
	       !__atomic_compare_exchange_n(w, &old, v, false,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

/*
 * Let the stream past ticket @T (nothing in the kernel will): its slot's
 * words only, not those of earlier tickets still in flight (every
 * stream-ordered operation needs KCOLL_FEAT_GPU_SLOTS: comm_op_stream()).
 */
static void comm_gpu_release(coll_comm *c, uint64_t T)
{
	uint64_t last = T | KCOLL_GPU_STEP_MASK;
	unsigned int s = ticket_slot(T >> KCOLL_GPU_TICKET_SHIFT);

	bell_raise(&c->bell->cancel_s[s], last);
	bell_raise(&c->bell->ready_s[s], last);
	bell_raise(&c->bell->end_s[s], last);
}

static uint64_t bell_word(coll_comm *c, size_t off)
{
	return c->bell_dptr + off;
}

/* Where a schedule region of @t lives on the device. */
static uint64_t gpu_region(coll_comm *c, const struct kcoll_sqe *t,
			   const struct kcoll_sregion *r, uint64_t es)
{
	uint64_t base = r->buf == KCOLL_SBUF_SEND ? t->send_addr :
			r->buf == KCOLL_SBUF_RECV ? t->recv_addr : c->scratch;

	return base + r->off * es;
}

/* The device address of ticket @T's word: its slot's in the array at
 * @off_s. */
static uint64_t bell_slot_word(coll_comm *c, uint64_t T, size_t off_s)
{
	unsigned int slot = ticket_slot(T >> KCOLL_GPU_TICKET_SHIFT);

	return bell_word(c, off_s + slot * sizeof(uint64_t));
}

#define BELL_WORD(c, T, name)						\
	bell_slot_word(c, T, offsetof(struct kcoll_gpu_bell, name##_s))

/*
 * @stream waits for the end of ticket @T's operation, flushing what the
 * NIC wrote where the GPU needs it: the work after it reads what landed
 * in the user's buffers (an allgather's, a broadcast's, a receive's),
 * not only what the reduction kernels read (until 2026-12-06 only the
 * ready waits flushed, a review).
 */
static int comm_gpu_end_wait(coll_comm *c, void *stream, uint64_t T)
{
	return coll_cuda_wait64(stream, BELL_WORD(c, T, end),
				T | KCOLL_GPU_STEP_MASK, c->gpu_flush);
}

/*
 * Enqueue @t's part on @stream (ticket @T, layout @l), but for its end
 * wait with @defer_end (a group's: coll_group_end() enqueues it).
 */
static int comm_gpu_enqueue(coll_comm *c, const struct kcoll_sqe *t,
			    const struct kcoll_sched_args *a, uint64_t es,
			    const struct kcoll_gpu_layout *l, uint64_t T,
			    void *stream, bool defer_end)
{
	unsigned int slot = ticket_slot(T >> KCOLL_GPU_TICKET_SHIFT);
	uint64_t cancel = BELL_WORD(c, T, cancel);
	uint64_t ready = BELL_WORD(c, T, ready);
	uint64_t done = bell_word(c, offsetof(struct kcoll_gpu_bell, done) +
				  slot * sizeof(uint64_t));
	uint32_t i, n = kcoll_sched_nphases(a), j = 0;
	struct kcoll_phase ph;
	unsigned int steps;
	int ret;

	ret = coll_cuda_write64(stream, bell_word(c, offsetof(struct kcoll_gpu_bell,
							       start) +
						  slot * sizeof(uint64_t)), T);
	for (i = 0; i < n && !ret; i++) {
		kcoll_sched_phase(a, i, &ph);
		steps = kcoll_sched_gpu_phase(&ph);
		if (steps & KCOLL_GPU_STEP_REDUCE) {
			j++;
			ret = coll_cuda_wait64(stream, ready, T | j, c->gpu_flush);
			if (!ret)
				ret = coll_cuda_reduce(stream, t->dtype, t->redop,
						       gpu_region(c, t, &ph.recv.dst, es),
						       gpu_region(c, t, &ph.recv.operand, es),
						       c->scratch + l->land_off,
						       ph.recv.cnt, es, cancel, T);
			if (!ret)
				ret = coll_cuda_write64(stream, done, T | j);
		}
		if ((steps & KCOLL_GPU_STEP_AVG) && !ret) {
			j++;
			ret = coll_cuda_wait64(stream, ready, T | j, false);
			if (!ret)
				ret = coll_cuda_scale(stream, t->dtype,
						      gpu_region(c, t, &ph.avg, es),
						      ph.avg_cnt, es,
						      (uint32_t)c->nranks, cancel, T);
			if (!ret)
				ret = coll_cuda_write64(stream, done, T | j);
		}
	}
	if (!ret && !defer_end)
		ret = comm_gpu_end_wait(c, stream, T);
	return ret;
}

/*
 * Enqueue @t on @stream and submit it. A v-variant comes with its
 * schedule's arguments @va (its table checked) and the table @vec, which
 * is the request's from here on, freed with it or on an error.
 */
static int comm_op_stream(coll_comm *c, struct kcoll_sqe *t,
			  uint64_t sbytes, uint64_t rbytes, void *stream,
			  coll_request **reqp,
			  const struct kcoll_sched_args *va, uint64_t *vec)
{
	const struct kcoll_shape *d = kcoll_shape(t->opcode);
	struct coll_group *g = &coll_grp;
	bool in_group = g->depth > 0, written = false;
	struct kcoll_sched_args a;
	struct kcoll_gpu_layout l;
	uint64_t es, T;
	int ret;

	/* In a group, each stream waits for the ends at coll_group_end(). */
	if (in_group && grow((void **)&g->ends, &g->capends, g->nends + 1,
			     sizeof(*g->ends))) {
		ret = coll_err(-ENOMEM, "group: out of memory");
		goto out_free;
	}
	/* Only the module's per-slot words let one ticket's failure pass
	 * its own waits and no other's (point-to-point ones may also end
	 * after later tickets): with one set of words, a failure released
	 * the waits of every older operation still in flight, which then
	 * ran on unreduced data (a review). */
	if (!(c->ring.features & KCOLL_FEAT_GPU_SLOTS)) {
		ret = coll_err(-EOPNOTSUPP, "stream-ordered %s needs a newer "
			       "kcoll module (KCOLL_FEAT_GPU_SLOTS)", d->name);
		goto out_free;
	}
	ret = coll_cuda_stream_ready();
	if (ret)
		goto out_free;
	/* The GPU reduces: its kernels read and write both buffers. */
	if (d->reduces &&
	    ((t->send_addr &&
	      !coll_cuda_reachable((void *)(uintptr_t)t->send_addr)) ||
	     (t->recv_addr &&
	      !coll_cuda_reachable((void *)(uintptr_t)t->recv_addr)))) {
		ret = coll_err(-EINVAL, "%s on the GPU: a buffer is host "
			       "memory CUDA does not know (its kernels cannot "
			       "reach it): give device memory, or memory "
			       "CUDA pinned", d->name);
		goto out_free;
	}
	es = t->opcode == KCOLL_OP_BARRIER ? 1 : coll_dtype_size(t->dtype);
	if ((t->send_addr | t->recv_addr) % es) {
		ret = coll_err(-EINVAL, "device buffers must be aligned to "
			       "their element size (%llu bytes)",
			       (unsigned long long)es);
		goto out_free;
	}
	if (va) {
		a = *va;
	} else {
		memset(&a, 0, sizeof(a));
		a.opcode = t->opcode;
		a.redop = t->redop;
		a.rank = (uint32_t)c->rank;
		a.nranks = (uint32_t)c->nranks;
		a.count = t->count;
		a.root = (d->uses & KCOLL_USES_PEER) ? t->peer : 0;
		a.in_place = kcoll_shape_in_place(d, a.rank, a.root, t->count,
						  es, t->send_addr,
						  t->recv_addr);
	}
	ret = kcoll_sched_gpu_layout(&a, (uint32_t)es, &l);
	if (ret) {
		ret = va ? coll_err(ret, "%s: no GPU schedule", d->name) :
		      coll_err(ret, "%s of %llu elements: no GPU schedule",
			       d->name, (unsigned long long)t->count);
		goto out_free;
	}

	pthread_mutex_lock(&c->gpu_lock);
	/*
	 * A bigger scratch waits until no operation is in flight, which in
	 * a group may wait for operations whose peers come later in theirs.
	 */
	if (in_group && c->scratch && l.scratch_bytes > c->scratch_len &&
	    c->gpu_busy) {
		ret = coll_err(-EBUSY, "%s needs %llu bytes of GPU scratch, more "
			       "than this communicator has (%llu), and in a "
			       "group it cannot wait for the operations in "
			       "flight to grow it: issue the largest "
			       "stream-ordered operation once outside a group",
			       d->name, (unsigned long long)l.scratch_bytes,
			       (unsigned long long)c->scratch_len);
		goto out_unlock;
	}
	ret = comm_gpu_setup(c, l.scratch_bytes);
	if (ret)
		goto out_unlock;
	if (c->gpu_ticket == UINT32_MAX) {
		ret = coll_err(-EOVERFLOW, "this communicator ran out of "
			       "stream tickets: create a new one");
		goto out_unlock;
	}
	/*
	 * The next ticket's slot free (its words on the page; with all of
	 * them busy, KCOLL_GPU_SLOTS are in flight). c->gpu_ticket holds
	 * still: we hold gpu_lock. A group's queued SQEs go to the module
	 * first, so that they can end and free theirs (their streams do not
	 * wait for any end before coll_group_end()).
	 */
	pthread_mutex_lock(&c->lock);
	ret = comm_wait_cond(c, cond_gpu_slot_free, NULL, true, 0);
	pthread_mutex_unlock(&c->lock);
	if (ret)
		goto out_unlock;
	T = (uint64_t)(c->gpu_ticket + 1) << KCOLL_GPU_TICKET_SHIFT;
	ret = comm_gpu_enqueue(c, t, &a, es, &l, T, stream, in_group);
	c->gpu_ticket++;
	if (ret) {
		/* Part of it may be on the stream already. */
		comm_gpu_release(c, T);
		goto out_unlock;
	}
	t->flags = KCOLL_SQE_F_GPU;
	t->resv = c->gpu_ticket;
	/* The table is the request's now, freed with it on any path. */
	ret = comm_post(c, t, sbytes, rbytes, false, reqp, &written, vec);
	vec = NULL;
	/* Not in the ring: nobody else will let its stream past. In it,
	 * the module may have taken it, and only comm_fail() can tell. */
	if (ret && !written)
		comm_gpu_release(c, T);
	else if (in_group)
		g->ends[g->nends++] = (struct coll_group_end){
			.comm = c, .stream = stream, .T = T };
out_unlock:
	pthread_mutex_unlock(&c->gpu_lock);
out_free:
	free(vec);
	return ret;
}

/*
 * A blocking or request-returning reduction of GPU memory: on libcoll's
 * own stream (created once per communicator), waited for as usual.
 */
static int comm_op_device(coll_comm *c, struct kcoll_sqe *t,
			  uint64_t sbytes, uint64_t rbytes, bool blocking,
			  coll_request **reqp,
			  const struct kcoll_sched_args *va, uint64_t *vec)
{
	coll_request *req = NULL;
	int ret;

	/* Its request completes before its stream is done: waited for at
	 * once, which a group must not do. */
	if (coll_grp.depth > 0) {
		free(vec);
		return coll_err(-ENOTSUP, "a reduction of GPU memory cannot be "
				"grouped in its plain form: use its _stream "
				"form");
	}
	ret = coll_cuda_stream_ready();
	if (ret) {
		free(vec);
		return coll_err(ret, "a reduction of GPU memory runs on the GPU: %s",
				coll_last_error());
	}
	pthread_mutex_lock(&c->gpu_lock);
	if (!c->int_stream)
		ret = coll_cuda_stream_create(&c->int_stream);
	pthread_mutex_unlock(&c->gpu_lock);
	if (ret) {
		free(vec);
		return ret;
	}
	ret = comm_op_stream(c, t, sbytes, rbytes, c->int_stream, &req, va,
			     vec);
	if (ret || !blocking) {
		if (!ret)
			*reqp = req;
		return ret;
	}
	ret = coll_wait(req);
	coll_request_free(req);
	/* Its kernels are done before its last step was: the stream is at
	 * its end wait, which the completion released. */
	if (!ret)
		ret = coll_cuda_stream_sync(c->int_stream);
	return ret;
}

int coll_send_stream(const void *sendbuf, size_t count, coll_dtype dtype,
		     int peer, coll_comm *comm, void *stream)
{
	return comm_op(comm, KCOLL_OP_SEND, sendbuf, NULL, count, dtype, 0,
		       peer, false, NULL, true, stream);
}

int coll_recv_stream(void *recvbuf, size_t count, coll_dtype dtype, int peer,
		     coll_comm *comm, void *stream)
{
	return comm_op(comm, KCOLL_OP_RECV, NULL, recvbuf, count, dtype, 0,
		       peer, false, NULL, true, stream);
}

int coll_allreduce_stream(const void *sendbuf, void *recvbuf, size_t count,
			  coll_dtype dtype, coll_redop op, coll_comm *comm,
			  void *stream)
{
	return comm_op(comm, KCOLL_OP_ALLREDUCE, sendbuf, recvbuf, count, dtype,
		       op, 0, false, NULL, true, stream);
}

int coll_reduce_stream(const void *sendbuf, void *recvbuf, size_t count,
		       coll_dtype dtype, coll_redop op, int root,
		       coll_comm *comm, void *stream)
{
	return comm_op(comm, KCOLL_OP_REDUCE, sendbuf, recvbuf, count, dtype,
		       op, root, false, NULL, true, stream);
}

int coll_broadcast_stream(const void *sendbuf, void *recvbuf, size_t count,
			  coll_dtype dtype, int root, coll_comm *comm,
			  void *stream)
{
	return comm_op(comm, KCOLL_OP_BROADCAST, sendbuf, recvbuf, count, dtype,
		       0, root, false, NULL, true, stream);
}

int coll_allgather_stream(const void *sendbuf, void *recvbuf,
			  size_t sendcount, coll_dtype dtype, coll_comm *comm,
			  void *stream)
{
	return comm_op(comm, KCOLL_OP_ALLGATHER, sendbuf, recvbuf, sendcount,
		       dtype, 0, 0, false, NULL, true, stream);
}

int coll_reduce_scatter_stream(const void *sendbuf, void *recvbuf,
			       size_t recvcount, coll_dtype dtype,
			       coll_redop op, coll_comm *comm, void *stream)
{
	return comm_op(comm, KCOLL_OP_REDUCE_SCATTER, sendbuf, recvbuf,
		       recvcount, dtype, op, 0, false, NULL, true, stream);
}

int coll_alltoall_stream(const void *sendbuf, void *recvbuf, size_t count,
			 coll_dtype dtype, coll_comm *comm, void *stream)
{
	return comm_op(comm, KCOLL_OP_ALLTOALL, sendbuf, recvbuf, count, dtype,
		       0, 0, false, NULL, true, stream);
}

int coll_gather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
		       coll_dtype dtype, int root, coll_comm *comm,
		       void *stream)
{
	return comm_op(comm, KCOLL_OP_GATHER, sendbuf, recvbuf, sendcount,
		       dtype, 0, root, false, NULL, true, stream);
}

int coll_scatter_stream(const void *sendbuf, void *recvbuf, size_t recvcount,
			coll_dtype dtype, int root, coll_comm *comm,
			void *stream)
{
	return comm_op(comm, KCOLL_OP_SCATTER, sendbuf, recvbuf, recvcount,
		       dtype, 0, root, false, NULL, true, stream);
}

int coll_barrier_stream(coll_comm *comm, void *stream)
{
	return comm_op(comm, KCOLL_OP_BARRIER, NULL, NULL, 0, 0, 0, 0, false,
		       NULL, true, stream);
}

int coll_allgatherv_stream(const void *sendbuf, void *recvbuf,
			   const size_t *recvcounts, const size_t *displs,
			   coll_dtype dtype, coll_comm *comm, void *stream)
{
	const size_t *a[] = { recvcounts, displs };

	return comm_vop(comm, KCOLL_OP_ALLGATHERV, sendbuf, recvbuf, a, dtype,
			0, false, NULL, true, stream);
}

int coll_reduce_scatterv_stream(const void *sendbuf, void *recvbuf,
				const size_t *recvcounts, coll_dtype dtype,
				coll_redop op, coll_comm *comm, void *stream)
{
	const size_t *a[] = { recvcounts };

	return comm_vop(comm, KCOLL_OP_REDUCE_SCATTERV, sendbuf, recvbuf, a,
			dtype, op, false, NULL, true, stream);
}

int coll_alltoallv_stream(const void *sendbuf, const size_t *sendcounts,
			  const size_t *sdispls, void *recvbuf,
			  const size_t *recvcounts, const size_t *rdispls,
			  coll_dtype dtype, coll_comm *comm, void *stream)
{
	const size_t *a[] = { sendcounts, sdispls, recvcounts, rdispls };

	return comm_vop(comm, KCOLL_OP_ALLTOALLV, sendbuf, recvbuf, a, dtype,
			0, false, NULL, true, stream);
}

int coll_comm_async_error(coll_comm *comm)
{
	int ret;

	if (!comm)
		return coll_err(-EINVAL, "NULL communicator");
	pthread_mutex_lock(&comm->lock);
	if (!comm->reaper)
		comm_reap(comm);
	ret = comm->async_err ? comm->async_err : comm->err;
	pthread_mutex_unlock(&comm->lock);
	return ret;
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
	if (req->done)
		req_explain(c, req, ret);
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
	if (req->done)
		req_explain(c, req, ret);
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
		req_free(req);
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

/*
 * A doorbell page outlives its communicator: streams that had operations
 * of it enqueued may still be on their way through its waits (the kernel
 * released them all, with cancel set, before the communicator went; a
 * stream that has not run yet reads those words later), and CUDA must not
 * find the page unregistered or reused then. One page per communicator
 * that ran a stream-ordered operation, kept (registered) for the life of
 * the process.
 */
static struct parked_bell {
	struct parked_bell *next;
	void *page;
} *parked_bells;
static pthread_mutex_t parked_lock = PTHREAD_MUTEX_INITIALIZER;

static void comm_park_bell(void *page)
{
	struct parked_bell *b = malloc(sizeof(*b));

	if (!b)
		return;		/* lost, still registered: the same */
	b->page = page;
	pthread_mutex_lock(&parked_lock);
	b->next = parked_bells;
	parked_bells = b;
	pthread_mutex_unlock(&parked_lock);
}

/*
 * What a failed COMM_CREATE means for the job: the kernel log (dmesg)
 * names the rank and the reason on both sides.
 */
static const char *comm_create_hint(int err)
{
	switch (err) {
	case -ETIMEDOUT:
		return " (some ranks were not reached in time: the kernel log"
		       " names them; are all ranks started, with the same"
		       " unique id, and is listen_port open between nodes?)";
	case -EADDRINUSE:
		return " (another process holds this rank's place at a peer:"
		       " two processes with the same rank?)";
	case -ESTALE:
		return " (a peer refused this rank's hellos as older than one"
		       " it saw from this rank: is this node's clock behind, or"
		       " did it go back? see the kernel log)";
	case -EACCES:
		return " (the node at a peer's address, or a connection"
		       " claiming a peer's rank, did not prove the"
		       " communicator's key: see the kernel log)";
	case -EDQUOT:
		return " (over a per-user limit of the module:"
		       " /sys/class/misc/kcoll/user_max_*; the kernel log"
		       " names it)";
	case -EPROTONOSUPPORT:
		return " (a peer runs another kcoll version: upgrade the nodes"
		       " together)";
	default:
		return "";
	}
}

/* Release everything but the kernel communicator itself. */
static void comm_free(coll_comm *c)
{
	struct coll_mem *m;

	/* The kernel has let go of the doorbell page (its communicator is
	 * destroyed, or the file closes below) and released every stream. */
	if (c->int_stream)
		coll_cuda_stream_destroy(c->int_stream);

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
		req_free(req);
	}
	coll_ring_exit(&c->ring);
	if (c->scratch)
		coll_cuda_free(c->scratch);
	if (c->bell)
		comm_park_bell(c->bell);
	free(c->slots);
	free(c->free_slots);
	free(c->table);
	explicit_bzero(c->key, sizeof(c->key));
	pthread_mutex_destroy(&c->gpu_lock);
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
	pthread_mutex_init(&c->gpu_lock, NULL);
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
	return coll_comm_create_child(out, nranks, rank, table, uid, key, 0);
}

int coll_comm_create_child(coll_comm **out, int nranks, int rank,
			   const struct kcoll_rank_addr *table, uint64_t uid,
			   const uint8_t key[KCOLL_KEY_LEN], uint64_t parent_uid)
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
	if (!uid || uid == parent_uid)
		return coll_err(-EINVAL, "communicator uid %s",
				uid ? "equal to its parent's" : "0");
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
	c->table = malloc((size_t)nranks * sizeof(*c->table));
	if (!c->table) {
		ret = coll_err(-ENOMEM, "out of memory");
		goto out_free;
	}
	memcpy(c->table, table, (size_t)nranks * sizeof(*c->table));
	memcpy(c->key, key, KCOLL_KEY_LEN);
	c->parent_uid = parent_uid;

	memset(&cc, 0, sizeof(cc));
	cc.ranks = (uintptr_t)table;
	cc.uid = uid;
	memcpy(cc.key, key, KCOLL_KEY_LEN);
	cc.rank = (uint32_t)rank;
	cc.nranks = (uint32_t)nranks;
	cc.timeout_ms = (uint32_t)tmo;
	cc.flags = devmem ? KCOLL_COMM_DEVMEM : 0;
	/* Only shown by kcollctl: a module that predates it gets 0. */
	if (c->ring.features & KCOLL_FEAT_PARENT)
		cc.parent_uid = parent_uid;
	ret = kcoll_ioctl(c->ring.ring_fd, KCOLL_IOC_COMM_CREATE, &cc);
	explicit_bzero(cc.key, sizeof(cc.key));
	if (ret) {
		coll_err(ret, "KCOLL_IOC_COMM_CREATE (rank %d of %d): %s%s",
			 rank, nranks, coll_strerror(ret),
			 comm_create_hint(ret));
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

/* What family.c derives children from. */
const struct kcoll_rank_addr *coll_comm_table(const coll_comm *c)
{
	return c->table;
}

const uint8_t *coll_comm_key(const coll_comm *c)
{
	return c->key;
}

uint32_t coll_comm_derive_next(coll_comm *c)
{
	return __atomic_add_fetch(&c->derived, 1, __ATOMIC_RELAXED);
}

/* Operations submitted and not completed (0 for an idle communicator). */
unsigned int coll_comm_busy(coll_comm *c)
{
	unsigned int n;

	pthread_mutex_lock(&c->lock);
	n = c->nqueued + c->ninflight;
	pthread_mutex_unlock(&c->lock);
	return n;
}

int coll_comm_init_rank(coll_comm **out, int nranks, const coll_unique_id *id,
			int rank)
{
	return coll_comm_init_rank_child(out, nranks, id, rank, 0);
}

int coll_comm_init_rank_child(coll_comm **out, int nranks,
			      const coll_unique_id *id, int rank,
			      uint64_t parent_uid)
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
	ret = coll_node_addr(&self);
	if (ret)
		return ret;
	ret = coll_unique_id_secret(id, key);
	if (ret)
		return ret;
	table = calloc((size_t)nranks, sizeof(*table));
	if (!table) {
		explicit_bzero(key, sizeof(key));
		return coll_err(-ENOMEM, "out of memory");
	}
	ret = coll_bootstrap(id, nranks, rank, &self, table, &uid);
	if (!ret)
		ret = coll_comm_create_child(out, nranks, rank, table, uid, key,
					     parent_uid);
	explicit_bzero(key, sizeof(key));
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

uint64_t coll_comm_uid(const coll_comm *comm)
{
	return comm ? comm->uid : 0;
}

uint64_t coll_comm_parent_uid(const coll_comm *comm)
{
	return comm ? comm->parent_uid : 0;
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
static int comm_abort_ioctl(coll_comm *comm, uint32_t flags)
{
	struct kcoll_comm_abort a;
	int ret;

	if (!comm)
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	a.comm_id = comm->comm_id;
	a.flags = flags;
	ret = kcoll_ioctl(comm->ring.ring_fd, KCOLL_IOC_COMM_ABORT, &a);
	if (ret)
		return coll_err(ret, "KCOLL_IOC_COMM_ABORT: %s",
				coll_strerror(ret));
	return 0;
}

int coll_comm_cancel(coll_comm *comm)
{
	return comm_abort_ioctl(comm, 0);
}

/* A revoke the peers pass on; a module without it cancels (its peers
 * then fail only what needs this rank). */
int coll_comm_revoke_kernel(coll_comm *comm)
{
	if (comm && !(comm->ring.features & KCOLL_FEAT_REVOKE))
		return comm_abort_ioctl(comm, 0);
	return comm_abort_ioctl(comm, KCOLL_ABORT_REVOKE);
}

static const char *report_reason_name(int reason)
{
	switch (reason) {
	case COLL_REPORT_TIMEOUT: return "timeout";
	case COLL_REPORT_PEER_LOST: return "peer lost";
	case COLL_REPORT_MISMATCH: return "signature mismatch";
	case COLL_REPORT_ABORTED: return "aborted";
	case COLL_REPORT_OTHER: return "error";
	case COLL_REPORT_GPU_STREAM: return "its GPU stream never got there";
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
	const struct kcoll_shape *d = r->opcode >= 0 ?
				      kcoll_shape((unsigned int)r->opcode) : NULL;
	const char *op = d ? d->name : "?";
	uint32_t i, shown;
	int n = 0;

	if (size)
		buf[0] = '\0';
	if (!r->error) {
		report_append(buf, size, &n, "no operation has failed");
		return n;
	}
	/* No operation was in flight when the communicator broke: the
	 * kernel's report is of the communicator, not of an operation. */
	if (r->opcode == KCOLL_OP_NOP)
		report_append(buf, size, &n, "communicator failed after %llu collective(s): %s (%s)",
			      (unsigned long long)r->seq,
			      report_reason_name(r->reason),
			      coll_strerror(r->error));
	else
		report_append(buf, size, &n, "%s #%llu failed after %llu ms: %s (%s)",
			      op, (unsigned long long)r->seq,
			      (unsigned long long)r->elapsed_ms,
			      report_reason_name(r->reason),
			      coll_strerror(r->error));
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

/*
 * coll_last_error() is the communicator's report, if it has one (true):
 * the operation's @own, or one of the same error, which explains an
 * operation refused because of that failure.
 */
static bool comm_describe(coll_comm *c, int ret, bool own)
{
	coll_report r;
	char msg[512];

	if (coll_comm_get_report(c, &r) || !r.error ||
	    (!own && r.error != ret))
		return false;
	coll_report_format(&r, msg, sizeof(msg));
	coll_err(ret, "%s", msg);
	return true;
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
	uint64_t start, end;
	struct kcoll_reg_mem r;
	int fd = -1, ret;
	int64_t off;
	off_t got;

	if (a < base || a + len > base + size)
		return coll_err(-EINVAL, "%zu bytes at GPU pointer %p go past its allocation",
				len, addr);
	coll_dmabuf_span(a, len, base, page, &start, &end);
	ret = coll_cuda_dmabuf(addr, start, end - start, &fd);
	if (ret)
		return ret;
	/* Exactly the range, or (some exporters) the whole allocation. */
	got = lseek(fd, 0, SEEK_END);
	off = got < 0 ? -1 : coll_dmabuf_offset(a, base, size, page, start, end,
						  (uint64_t)got);
	if (off < 0) {
		close(fd);
		return coll_err(-ENOTSUP, "the dma-buf exported for [%#llx, %#llx) of "
				"GPU allocation %#llx (%llu bytes) is %lld bytes: "
				"neither that range nor the allocation",
				(unsigned long long)start, (unsigned long long)end,
				(unsigned long long)base, (unsigned long long)size,
				(long long)got);
	}
	memset(&r, 0, sizeof(r));
	r.addr = a;
	r.len = len;
	r.flags = KCOLL_REG_DMABUF | KCOLL_REG_NO_CPU;
	r.dmabuf_fd = fd;
	r.dmabuf_off = (uint64_t)off;
	ret = mem_register(comm, &r, out);
	close(fd);
	if (!ret)
		(*out)->gpu_id = coll_cuda_buffer_id(addr);
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
	uint64_t base, size, id, mid;
	coll_mem *m;
	int ret;

	if (!addr || !len)
		return 0;
	for (;;) {
		pthread_mutex_lock(&c->lock);
		m = comm_find_mem(c, addr, len);
		mid = m && m->autoreg ? m->gpu_id : 0;
		pthread_mutex_unlock(&c->lock);
		if (!m)
			break;
		if (!mid)
			return 0;	/* host memory, or the caller's: the
					 * caller deregisters what it frees */
		/*
		 * GPU memory registered before: still the same allocation?
		 * One freed and allocated again at the same address is
		 * another, whose pages the old registration does not hold.
		 */
		id = coll_cuda_buffer_id((void *)(uintptr_t)addr);
		if (id == mid)
			return 0;
		ret = coll_mem_deregister(c, m);
		if (ret)
			return coll_err(ret, "GPU memory at %#llx was freed and "
					"allocated again while an operation still "
					"used it: %s", (unsigned long long)addr,
					coll_last_error());
	}
	ret = coll_cuda_range((void *)(uintptr_t)addr, &base, &size);
	if (ret <= 0)
		return ret;
	if (addr + len > base + size)
		return coll_err(-EINVAL, "%llu bytes at GPU pointer %#llx go past its allocation",
				(unsigned long long)len, (unsigned long long)addr);
	ret = mem_register_cuda(c, (void *)(uintptr_t)base, size, base, size,
				&m);
	if (!ret)
		m->autoreg = true;
	return ret;
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
