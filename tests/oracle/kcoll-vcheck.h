/* SPDX-License-Identifier: MIT */
/*
 * kcoll-vcheck.h: the v-variants (allgatherv, reduce_scatterv, alltoallv)
 * run through libcoll and checked, shared by the host model's test
 * (tests/unit/test_comm.c) and the VMs' (tests/vm/kcoll-colltest.c -V).
 * Header only.
 *
 * Every rank derives every table from (seed, nranks) alone: counts up to
 * a maximum, a quarter of them zero (all of them in one case of eight, a
 * few large ones in another); its own displacements put its blocks in a
 * random order with random gaps. Data identifies its origin: element i of
 * the block rank j sends rank k is vchk_val(j, k, i), so a receiver checks
 * it without knowing the sender's displacements; reduce_scatterv's inputs
 * are small integers whose int32 sums are exact. Receive buffers start
 * poisoned, and whatever lies between the blocks must stay so.
 */
#ifndef KCOLL_VCHECK_H
#define KCOLL_VCHECK_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

enum vchk_op { VCHK_ALLGATHERV, VCHK_REDUCE_SCATTERV, VCHK_ALLTOALLV, VCHK_NR };

static const char *const vchk_names[VCHK_NR] = {
	"allgatherv", "reduce_scatterv", "alltoallv",
};

enum vchk_style {
	VCHK_BLOCKING, VCHK_NONBLOCKING, VCHK_GROUP, VCHK_STYLES,
	VCHK_STREAM = VCHK_STYLES,	/* with a vchk_dev only */
};

/*
 * Device memory (kcoll-colltest -S): the buffers are @alloc's, filled and
 * read back through @put and @get; VCHK_STREAM issues the stream-ordered
 * forms on @stream, then @sync waits for it.
 */
struct vchk_dev {
	void *(*alloc)(size_t bytes);
	void (*free)(void *p);
	void (*put)(void *dev, const void *host, size_t bytes);
	void (*get)(void *host, const void *dev, size_t bytes);
	int (*sync)(void *stream);
	void *stream;
};

#define VCHK_POISON	((int32_t)0xa5a5a5a5)

static inline uint64_t vchk_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static inline uint64_t vchk_h(uint64_t seed, uint64_t a, uint64_t b,
			      uint64_t c)
{
	return vchk_mix(vchk_mix(vchk_mix(seed ^ a) ^ b) ^ c);
}

/* The count of block (from, to): every rank computes every one. */
static inline size_t vchk_count(uint64_t seed, int from, int to, size_t maxc)
{
	uint64_t mode = vchk_h(seed, 1, 0, 0) % 8;

	if (mode == 0 || vchk_h(seed, 2, (uint64_t)from, (uint64_t)to) % 4 == 0)
		return 0;
	if (mode == 1 && vchk_h(seed, 3, (uint64_t)from, (uint64_t)to) % 5 == 0)
		return maxc * 4 + vchk_h(seed, 4, (uint64_t)from, (uint64_t)to) % 97;
	return (size_t)(vchk_h(seed, 5, (uint64_t)from, (uint64_t)to) %
			(maxc + 1));
}

/* Rank @r's displacements @d for blocks of counts @c: a random order,
 * random gaps; *@end the elements the buffer needs. */
static inline void vchk_displs(uint64_t seed, int r, int which,
			       const size_t *c, size_t *d, int n, size_t *end)
{
	int *order = malloc((size_t)n * sizeof(*order)), j, k, t;
	size_t at = 0;

	if (!order)
		abort();
	for (j = 0; j < n; j++)
		order[j] = j;
	for (j = n; j > 1; j--) {
		k = (int)(vchk_h(seed, 6 + (uint64_t)which, (uint64_t)r,
				 (uint64_t)j) % (uint64_t)j);
		t = order[j - 1];
		order[j - 1] = order[k];
		order[k] = t;
	}
	for (j = 0; j < n; j++) {
		at += vchk_h(seed, 9 + (uint64_t)which, (uint64_t)r,
			     (uint64_t)j) % 4 == 0 ? 3 : 0;
		d[order[j]] = at;
		at += c[order[j]];
	}
	*end = at + 1;	/* one element past the last block, never written */
	free(order);
}

/* Element i of the block rank @from sends rank @to (data movement). */
static inline int32_t vchk_val(int from, int to, size_t i)
{
	return (int32_t)(((uint32_t)from << 24) ^ ((uint32_t)to << 16) ^
			 (uint32_t)(i * 2654435761U) ^ 0x5a5a0000U);
}

/* Element e of rank @r's reduce_scatterv input: small, exact sums. */
static inline int32_t vchk_rin(int r, size_t e)
{
	return (int32_t)((r * 7 + (int)(e % 1009) * 3) % 17) - 8;
}

struct vchk {
	enum vchk_op op;
	uint64_t seed;
	size_t maxc;
	int rank, nranks;
	enum vchk_style style;
	bool in_place;		/* allgatherv only */
	const struct vchk_dev *dev;	/* NULL: host memory */
	/* Set by the run: */
	char msg[256];
	double bytes;		/* received by this rank */
};

/* A wrong result: -EPROTO, with what was wrong in v->msg. */
static inline int vchk_fail(struct vchk *v, const char *fmt, size_t a,
			    size_t b)
{
	if (!v->msg[0])
		snprintf(v->msg, sizeof(v->msg), fmt, a, b);
	return -EPROTO;
}

/* The non-blocking form of @op on int32 (reduce_scatterv: SUM), with the
 * arrays in kcoll_vec's order. */
static inline int vchk_issue_nb(enum vchk_op op, coll_comm *comm,
				const void *send, void *recv,
				size_t *const *a, coll_request **req)
{
	switch (op) {
	case VCHK_ALLGATHERV:
		return coll_iallgatherv(send, recv, a[0], a[1],
					COLL_DTYPE_INT32, comm, req);
	case VCHK_REDUCE_SCATTERV:
		return coll_ireduce_scatterv(send, recv, a[0], COLL_DTYPE_INT32,
					     COLL_REDOP_SUM, comm, req);
	default:
		return coll_ialltoallv(send, a[0], a[1], recv, a[2], a[3],
				       COLL_DTYPE_INT32, comm, req);
	}
}

/* The stream-ordered form of @op on @stream (kcoll-perf -G too). */
static inline int vchk_issue_stream(enum vchk_op op, coll_comm *comm,
				    const void *send, void *recv,
				    size_t *const *a, void *stream)
{
	switch (op) {
	case VCHK_ALLGATHERV:
		return coll_allgatherv_stream(send, recv, a[0], a[1],
					      COLL_DTYPE_INT32, comm, stream);
	case VCHK_REDUCE_SCATTERV:
		return coll_reduce_scatterv_stream(send, recv, a[0],
						   COLL_DTYPE_INT32,
						   COLL_REDOP_SUM, comm,
						   stream);
	default:
		return coll_alltoallv_stream(send, a[0], a[1], recv, a[2],
					     a[3], COLL_DTYPE_INT32, comm,
					     stream);
	}
}

/*
 * Issue @v's operation on @comm in its style, with the arrays given.
 * Returns the operation's result.
 */
static inline int vchk_issue(struct vchk *v, coll_comm *comm,
			     const void *send, void *recv, size_t *a0,
			     size_t *a1, size_t *a2, size_t *a3)
{
	size_t *const a[4] = { a0, a1, a2, a3 };
	coll_request *req = NULL;
	int ret, ret2;

	if (v->style == VCHK_STREAM) {
		ret = vchk_issue_stream(v->op, comm, send, recv, a,
					v->dev->stream);
		memset(a0, 0xee, (size_t)v->nranks * sizeof(*a0));
		if (ret)
			return ret;
		ret = v->dev->sync(v->dev->stream);
		return ret ? ret : coll_comm_async_error(comm);
	}
	if (v->style == VCHK_GROUP)
		coll_group_start();
	if (v->style == VCHK_NONBLOCKING)
		ret = vchk_issue_nb(v->op, comm, send, recv, a, &req);
	else if (v->op == VCHK_ALLGATHERV)
		ret = coll_allgatherv(send, recv, a0, a1, COLL_DTYPE_INT32,
				      comm);
	else if (v->op == VCHK_REDUCE_SCATTERV)
		ret = coll_reduce_scatterv(send, recv, a0, COLL_DTYPE_INT32,
					   COLL_REDOP_SUM, comm);
	else
		ret = coll_alltoallv(send, a0, a1, recv, a2, a3,
				     COLL_DTYPE_INT32, comm);
	/* The arrays are the caller's only until the call returns. */
	memset(a0, 0xee, (size_t)v->nranks * sizeof(*a0));
	if (v->style == VCHK_GROUP) {
		ret2 = coll_group_end();
		if (!ret)
			ret = ret2;
	}
	if (!ret && req) {
		ret = coll_wait(req);
		coll_request_free(req);
	}
	return ret;
}

/* Run and check @v on @comm: 0, the operation's error, or -EPROTO with
 * v->msg saying what was wrong. */
static inline int vchk_run(struct vchk *v, coll_comm *comm)
{
	int n = v->nranks, r = v->rank, j, ret = -ENOMEM;
	size_t *a[4] = { NULL }, *keep = NULL, send_n = 0, recv_n = 0, i, e;
	int32_t *send = NULL, *recv = NULL, *in_place_send, *ds = NULL, *dr = NULL;

	v->msg[0] = 0;
	v->bytes = 0;
	for (j = 0; j < 4; j++)
		if (!(a[j] = calloc((size_t)n, sizeof(size_t))))
			goto out;
	keep = calloc((size_t)n * 2, sizeof(size_t));
	if (!keep)
		goto out;
	/* a[0]/a[1]: counts and displs (alltoallv: to send); a[2]/a[3]:
	 * alltoallv's receive side. */
	for (j = 0; j < n; j++) {
		if (v->op == VCHK_ALLTOALLV) {
			a[0][j] = vchk_count(v->seed, r, j, v->maxc);
			a[2][j] = vchk_count(v->seed, j, r, v->maxc);
		} else {
			a[0][j] = vchk_count(v->seed, j, 0, v->maxc);
		}
	}
	switch (v->op) {
	case VCHK_ALLGATHERV:
		vchk_displs(v->seed, r, 0, a[0], a[1], n, &recv_n);
		send_n = a[0][r];
		break;
	case VCHK_REDUCE_SCATTERV:
		for (j = 0; j < n; j++)
			send_n += a[0][j];
		recv_n = a[0][r] + 1;
		break;
	default:
		vchk_displs(v->seed, r, 0, a[0], a[1], n, &send_n);
		vchk_displs(v->seed, r, 1, a[2], a[3], n, &recv_n);
		break;
	}
	send = malloc((send_n + 1) * sizeof(*send));
	recv = malloc(recv_n * sizeof(*recv));
	if (!send || !recv)
		goto out;
	for (i = 0; i < recv_n; i++)
		recv[i] = VCHK_POISON;
	for (i = 0; i <= send_n; i++)
		send[i] = VCHK_POISON;
	switch (v->op) {
	case VCHK_ALLGATHERV:
		for (i = 0; i < a[0][r]; i++)
			send[i] = vchk_val(r, 0, i);
		break;
	case VCHK_REDUCE_SCATTERV:
		for (i = 0; i < send_n; i++)
			send[i] = vchk_rin(r, i);
		break;
	default:
		for (j = 0; j < n; j++)
			for (i = 0; i < a[0][j]; i++)
				send[a[1][j] + i] = vchk_val(r, j, i);
		break;
	}
	in_place_send = send;
	if (v->op == VCHK_ALLGATHERV && v->in_place) {
		in_place_send = recv + a[1][r];
		memcpy(in_place_send, send, a[0][r] * sizeof(*send));
	}
	/* The checks below need the arrays that vchk_issue() scribbles on. */
	memcpy(keep, a[0], (size_t)n * sizeof(size_t));
	if (v->op == VCHK_ALLTOALLV)
		memcpy(keep + n, a[2], (size_t)n * sizeof(size_t));
	if (v->dev) {
		/* The same contents on the device; read back after. */
		ds = v->dev->alloc((send_n + 1) * sizeof(*send));
		dr = v->dev->alloc(recv_n * sizeof(*recv));
		if (!ds || !dr) {
			ret = -ENOMEM;
			goto out;
		}
		v->dev->put(ds, send, (send_n + 1) * sizeof(*send));
		v->dev->put(dr, recv, recv_n * sizeof(*recv));
		ret = vchk_issue(v, comm, in_place_send == send ? ds :
				 dr + a[1][r], dr, a[0], a[1], a[2], a[3]);
		v->dev->get(send, ds, (send_n + 1) * sizeof(*send));
		v->dev->get(recv, dr, recv_n * sizeof(*recv));
	} else {
		ret = vchk_issue(v, comm, in_place_send, recv, a[0], a[1],
				 a[2], a[3]);
	}
	memcpy(a[0], keep, (size_t)n * sizeof(size_t));
	if (ret)
		goto out;
	switch (v->op) {
	case VCHK_ALLGATHERV:
		for (j = 0; j < n; j++)
			for (i = 0; i < a[0][j]; i++)
				if (recv[a[1][j] + i] != vchk_val(j, 0, i)) {
					ret = vchk_fail(v, "block of rank "
							"%zu, element %zu",
							(size_t)j, i);
					goto out;
				}
		break;
	case VCHK_REDUCE_SCATTERV:
		for (e = 0, j = 0; j < r; j++)
			e += a[0][j];
		for (i = 0; i < a[0][r]; i++) {
			int32_t want = 0;

			for (j = 0; j < n; j++)
				want += vchk_rin(j, e + i);
			if (recv[i] != want) {
				ret = vchk_fail(v, "element %zu of %zu",
						i, a[0][r]);
				goto out;
			}
		}
		break;
	default:
		for (j = 0; j < n; j++)
			for (i = 0; i < a[2][j]; i++)
				if (recv[a[3][j] + i] != vchk_val(j, r, i)) {
					ret = vchk_fail(v, "block from rank "
							"%zu, element %zu",
							(size_t)j, i);
					goto out;
				}
		break;
	}
	/* Nothing between or after the blocks was written. */
	for (i = 0; i < recv_n; i++) {
		bool in = false;
		int k = v->op == VCHK_ALLTOALLV ? 2 : 0;

		if (v->op == VCHK_REDUCE_SCATTERV) {
			in = i < a[0][r];
		} else {
			for (j = 0; j < n && !in; j++)
				in = i >= a[k + 1][j] &&
				     i < a[k + 1][j] + a[k][j];
		}
		if (!in && recv[i] != VCHK_POISON) {
			ret = vchk_fail(v, "element %zu of %zu, outside "
					"every block, was written", i, recv_n);
			goto out;
		}
	}
	/* The send buffer is read only. */
	if (!(v->op == VCHK_ALLGATHERV && v->in_place) &&
	    send[send_n] != VCHK_POISON) {
		ret = vchk_fail(v, "send[%zu] of %zu written", send_n,
				send_n);
		goto out;
	}
	v->bytes = (double)(recv_n - 1) * sizeof(int32_t);
out:
	for (j = 0; j < 4; j++)
		free(a[j]);
	if (ds)
		v->dev->free(ds);
	if (dr)
		v->dev->free(dr);
	free(keep);
	free(send);
	free(recv);
	return ret;
}

/*
 * Tables that disagree: for allgatherv, rank 1 counts one more element
 * for rank 0 (every rank fails with -EBADMSG); for alltoallv, rank 0
 * sends rank 1 one more element than rank 1 expects (both fail with
 * -EBADMSG; the others may complete, their own pairs agreeing, or fail by
 * the ABORT). Returns true if this rank saw what it must.
 */
static inline bool vchk_mismatch(enum vchk_op op, coll_comm *comm, int rank,
				 int n, int *got)
{
	size_t *c = calloc((size_t)n * 4, sizeof(size_t));
	int32_t *buf = calloc((size_t)n * 8 + 8, sizeof(int32_t));
	int32_t *out = calloc((size_t)n * 8 + 8, sizeof(int32_t));
	int j, ret;
	bool ok;

	if (!c || !buf || !out)
		abort();
	for (j = 0; j < n; j++) {
		c[j] = 2;			/* counts / sendcounts */
		c[n + j] = (size_t)j * 3;	/* displacements */
		c[2 * n + j] = 2;		/* recvcounts */
		c[3 * n + j] = (size_t)j * 3;
	}
	if (op == VCHK_ALLGATHERV) {
		if (rank == 1)
			c[0] = 3;
		ret = coll_allgatherv(buf, out, c, c + n, COLL_DTYPE_INT32,
				      comm);
		ok = ret == -EBADMSG;
	} else {
		if (rank == 0)
			c[1] = 3;
		ret = coll_alltoallv(buf, c, c + n, out, c + 2 * n, c + 3 * n,
				     COLL_DTYPE_INT32, comm);
		ok = rank <= 1 ? ret == -EBADMSG : (!ret || ret == -EBADMSG);
	}
	*got = ret;
	free(c);
	free(buf);
	free(out);
	return ok;
}

#endif /* KCOLL_VCHECK_H */
