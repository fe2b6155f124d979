/* SPDX-License-Identifier: MIT */
/*
 * kcoll-check.h: known inputs and reference results of the collectives,
 * shared by tools/kcoll-perf.c and tests/vm/kcoll-colltest.c (header only).
 *
 * Every rank's input is a deterministic function of (rank, element index,
 * dtype, reduction), so every rank can compute every other rank's input
 * and hence the expected result, with no communication:
 *  - reductions use small integers ([-8, 8]; {1, 2, -1, 3, -2} or
 *    {1, 2, -1, 0.5, -2} for PROD), so float sums, products, minima and
 *    maxima are exact in every type and any order (bf16 holds integers up
 *    to 256 exactly: up to 32 ranks); integer SUM/PROD wrap modulo 2^bits
 *    like the kernel's, and the reference wraps the same way;
 *  - fp8 holds fewer integers exactly (E5M2: up to 8), so its reductions
 *    take inputs from ranks 0 and 1 only ([-4, 4]; the other ranks give 0
 *    to SUM and AVG, +-1 to PROD, whose first three ranks give
 *    {1, 2, -1, 0.5, -2}): every partial result is exact in any order;
 *  - AVG is compared with a relative tolerance (the kernel divides the
 *    exact sum by nranks in the element's precision, fp32 for 16- and
 *    8-bit types);
 *  - data movement (broadcast, allgather, alltoall, send/recv) uses
 *    full-range patterns and is compared bit for bit.
 * Receive buffers are filled with a poison pattern first, so an element
 * the kernel never wrote is caught too.
 */
#ifndef KCOLL_CHECK_H
#define KCOLL_CHECK_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coll.h"

enum chk_coll {
	CHK_ALLREDUCE,
	CHK_REDUCE,
	CHK_BROADCAST,
	CHK_ALLGATHER,
	CHK_REDUCE_SCATTER,
	CHK_ALLTOALL,
	CHK_SENDRECV,		/* send to rank+1, receive from rank-1 */
	CHK_GATHER,
	CHK_SCATTER,
	CHK_NR
};

static const char *const chk_coll_names[CHK_NR] = {
	"allreduce", "reduce", "broadcast", "allgather", "reduce_scatter",
	"alltoall", "sendrecv", "gather", "scatter",
};

static inline bool chk_reduces(enum chk_coll c)
{
	return c == CHK_ALLREDUCE || c == CHK_REDUCE || c == CHK_REDUCE_SCATTER;
}

static inline bool chk_rooted(enum chk_coll c)
{
	return c == CHK_REDUCE || c == CHK_BROADCAST || c == CHK_GATHER ||
	       c == CHK_SCATTER;
}

/* One operation as one rank sees it. */
struct chk_case {
	enum chk_coll coll;
	coll_dtype dt;
	coll_redop op;		/* reductions only */
	int root;		/* rooted ones only */
	size_t count;		/* coll.h conventions (per rank / per peer) */
	bool in_place;
	int rank;
	int nranks;
};

#define CHK_POISON	0xa5

/* ------------------------------------------------------------------ */
/* Element formats                                                     */
/* ------------------------------------------------------------------ */

static inline float chk_u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline uint32_t chk_f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float chk_bf2f(uint16_t b)
{
	return chk_u2f((uint32_t)b << 16);
}

/* Round to nearest even; NaN stays NaN. */
static inline uint16_t chk_f2bf(float f)
{
	uint32_t u = chk_f2u(f);

	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static inline float chk_h2f(uint16_t h)
{
	uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f;
	uint32_t m = h & 0x3ff;

	if (e == 0x1f)
		return chk_u2f(s | 0x7f800000 | m << 13);
	if (e == 0) {
		float v = (float)m * (1.0f / 16777216.0f);	/* m * 2^-24 */

		return s ? -v : v;
	}
	return chk_u2f(s | (e + 112) << 23 | m << 13);
}

/* Round to nearest even, overflow to infinity. */
static inline uint16_t chk_f2h(float f)
{
	uint32_t u = chk_f2u(f), s = (u >> 16) & 0x8000;
	uint32_t a = u & 0x7fffffff;
	int32_t e;
	uint32_t m, r;

	if (a > 0x7f800000)
		return (uint16_t)(s | 0x7e00);
	if (a >= 0x477ff000)		/* rounds to >= 65536: infinity */
		return (uint16_t)(s | 0x7c00);
	e = (int32_t)(a >> 23) - 127;
	if (e < -25)
		return (uint16_t)s;
	m = (a & 0x7fffff) | 0x800000;
	if (e < -14) {			/* subnormal */
		uint32_t sh = (uint32_t)(-14 - e) + 13;

		r = m >> sh;
		if ((m & ((1U << sh) - 1)) > (1U << (sh - 1)) ||
		    ((m & ((1U << sh) - 1)) == (1U << (sh - 1)) && (r & 1)))
			r++;
		return (uint16_t)(s | r);
	}
	r = (uint32_t)(e + 15) << 10 | ((m >> 13) & 0x3ff);
	if ((m & 0x1fff) > 0x1000 || ((m & 0x1fff) == 0x1000 && (r & 1)))
		r++;			/* may carry into the exponent: fine */
	return (uint16_t)(s | r);
}

/*
 * fp8 (OCP E4M3 and E5M2), written apart from the module's bit code: the
 * value from its definition, and back by rounding |x| to the quantum of
 * its binade with nearbyint() (ties to even in the default rounding
 * mode), saturating at the largest finite value; NaN is 0x7f.
 */
static inline double chk_fp8_to_d(uint8_t v, int e4m3)
{
	int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
	int e = (v & 0x7f) >> mbits, m = v & ((1 << mbits) - 1);
	double x;

	if (e == (0x7f >> mbits) && (!e4m3 || m == (1 << mbits) - 1))
		x = (!e4m3 && !m) ? INFINITY : NAN;
	else if (e == 0)
		x = ldexp(m, 1 - bias - mbits);
	else
		x = ldexp((1 << mbits) + m, e - bias - mbits);
	return v & 0x80 ? -x : x;
}

static inline uint8_t chk_d_to_fp8(double f, int e4m3)
{
	int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, e;
	double max = e4m3 ? 448 : 57344, a = fabs(f), r;
	uint8_t s = signbit(f) ? 0x80 : 0;

	if (isnan(f))
		return 0x7f;
	if (a >= max)
		return s | (e4m3 ? 0x7e : 0x7b);
	frexp(a, &e);			/* a in [2^(e-1), 2^e) */
	if (e - 1 < 1 - bias)		/* subnormal: the smallest quantum */
		e = 2 - bias;
	r = nearbyint(ldexp(a, mbits - (e - 1)));	/* in quanta */
	r = ldexp(r, (e - 1) - mbits);
	if (r == 0)
		return s;
	frexp(r, &e);
	if (e - 1 + bias >= 1)
		return s | (uint8_t)((e - 1 + bias) << mbits |
				     ((int)ldexp(r, mbits - (e - 1)) -
				      (1 << mbits)));
	return s | (uint8_t)ldexp(r, bias - 1 + mbits);
}

static inline bool chk_is_fp8(coll_dtype dt)
{
	return dt == COLL_DTYPE_FP8_E4M3 || dt == COLL_DTYPE_FP8_E5M2;
}

static inline bool chk_is_float(coll_dtype dt)
{
	return dt == COLL_DTYPE_FP16 || dt == COLL_DTYPE_BF16 ||
	       dt == COLL_DTYPE_FP32 || dt == COLL_DTYPE_FP64 ||
	       chk_is_fp8(dt);
}

/* Store integer @v (wrapped to the width) or float @f as element @i. */
static inline void chk_store(coll_dtype dt, void *buf, size_t i, int64_t v,
			     double f)
{
	switch (dt) {
	case COLL_DTYPE_INT8:
	case COLL_DTYPE_UINT8:
		((uint8_t *)buf)[i] = (uint8_t)v;
		break;
	case COLL_DTYPE_INT32:
	case COLL_DTYPE_UINT32:
		((uint32_t *)buf)[i] = (uint32_t)v;
		break;
	case COLL_DTYPE_INT64:
	case COLL_DTYPE_UINT64:
		((uint64_t *)buf)[i] = (uint64_t)v;
		break;
	case COLL_DTYPE_FP16:
		((uint16_t *)buf)[i] = chk_f2h((float)f);
		break;
	case COLL_DTYPE_BF16:
		((uint16_t *)buf)[i] = chk_f2bf((float)f);
		break;
	case COLL_DTYPE_FP32:
		((float *)buf)[i] = (float)f;
		break;
	case COLL_DTYPE_FP64:
		((double *)buf)[i] = f;
		break;
	case COLL_DTYPE_FP8_E4M3:
	case COLL_DTYPE_FP8_E5M2:
		((uint8_t *)buf)[i] = chk_d_to_fp8(f, dt == COLL_DTYPE_FP8_E4M3);
		break;
	}
}

/* Element @i as a double (floats) or a sign/zero-extended integer. */
static inline double chk_load_f(coll_dtype dt, const void *buf, size_t i)
{
	switch (dt) {
	case COLL_DTYPE_FP16:
		return chk_h2f(((const uint16_t *)buf)[i]);
	case COLL_DTYPE_BF16:
		return chk_bf2f(((const uint16_t *)buf)[i]);
	case COLL_DTYPE_FP32:
		return ((const float *)buf)[i];
	case COLL_DTYPE_FP64:
		return ((const double *)buf)[i];
	case COLL_DTYPE_FP8_E4M3:
	case COLL_DTYPE_FP8_E5M2:
		return chk_fp8_to_d(((const uint8_t *)buf)[i],
				    dt == COLL_DTYPE_FP8_E4M3);
	default:
		return 0;
	}
}

/* ------------------------------------------------------------------ */
/* Inputs                                                              */
/* ------------------------------------------------------------------ */

static inline uint64_t chk_hash(int rank, uint64_t i)
{
	uint64_t h = i * 0x9e3779b97f4a7c15ULL +
		     (uint64_t)(rank + 1) * 0xbf58476d1ce4e5b9ULL;

	h ^= h >> 31;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 29;
	return h;
}

/*
 * Input element @i of @rank for reduction @op (0: data movement), as an
 * integer (*@v) and a double (*@f); chk_store() keeps the right one.
 */
static inline void chk_gen(coll_dtype dt, int op, int rank, uint64_t i,
			   int64_t *v, double *f)
{
	static const int8_t iprod[8] = { 1, 2, -1, 3, 1, -2, 1, 1 };
	static const double fprod[8] = { 1, 2, -1, 0.5, 1, -2, 1, 1 };
	uint64_t h = chk_hash(rank, i);

	switch (op) {
	case COLL_REDOP_PROD:
		*v = iprod[h % 8];
		*f = fprod[h % 8];
		break;
	case COLL_REDOP_SUM:
	case COLL_REDOP_MIN:
	case COLL_REDOP_MAX:
	case COLL_REDOP_AVG:
		*v = (int64_t)(h % 17) - 8;
		*f = (double)*v;
		break;
	default:
		*v = (int64_t)h;
		*f = (double)((int64_t)(h % 4001) - 2000) / 4.0;
		break;
	}
	if (!chk_is_fp8(dt) || !op || op == COLL_REDOP_MIN ||
	    op == COLL_REDOP_MAX)
		return;
	/* fp8: partial results exact in any order (see the top). */
	if (op == COLL_REDOP_PROD)
		*f = rank < 3 ? fprod[h % 8] : (h & 1 ? 1.0 : -1.0);
	else
		*f = rank < 2 ? (double)((int64_t)(h % 9) - 4) : 0.0;
}

static inline void chk_fill_input(coll_dtype dt, int op, int rank, void *buf,
				  size_t first, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++) {
		int64_t v;
		double f;

		chk_gen(dt, op, rank, first + k, &v, &f);
		chk_store(dt, buf, k, v, f);
	}
}

/* Integer @v wrapped to @dt's width, sign- or zero-extended. */
static inline int64_t chk_wrap(coll_dtype dt, int64_t v)
{
	switch (dt) {
	case COLL_DTYPE_INT8:	return (int8_t)v;
	case COLL_DTYPE_UINT8:	return (uint8_t)v;
	case COLL_DTYPE_INT32:	return (int32_t)v;
	case COLL_DTYPE_UINT32:	return (uint32_t)v;
	default:		return v;
	}
}

/* Is a < b in @dt's integer order? */
static inline bool chk_int_less(coll_dtype dt, int64_t a, int64_t b)
{
	if (dt == COLL_DTYPE_UINT64)
		return (uint64_t)a < (uint64_t)b;
	return a < b;
}

/* The reduction over every rank of input element @i, stored as element 0
 * of @out (an element-sized scratch). */
static inline void chk_reduce_ref(coll_dtype dt, coll_redop op, int nranks,
				  uint64_t i, void *out)
{
	int64_t acc = 0, v;
	double facc = 0, f;
	int r;

	for (r = 0; r < nranks; r++) {
		chk_gen(dt, op, r, i, &v, &f);
		v = chk_wrap(dt, v);
		if (!r) {
			acc = v;
			facc = f;
			continue;
		}
		switch (op) {
		case COLL_REDOP_SUM:
		case COLL_REDOP_AVG:
			acc = (int64_t)((uint64_t)acc + (uint64_t)v);
			facc += f;
			break;
		case COLL_REDOP_PROD:
			acc = (int64_t)((uint64_t)acc * (uint64_t)v);
			facc *= f;
			break;
		case COLL_REDOP_MIN:
			if (chk_int_less(dt, v, chk_wrap(dt, acc)))
				acc = v;
			if (f < facc)
				facc = f;
			break;
		case COLL_REDOP_MAX:
			if (chk_int_less(dt, chk_wrap(dt, acc), v))
				acc = v;
			if (f > facc)
				facc = f;
			break;
		}
		acc = chk_wrap(dt, acc);
	}
	if (op == COLL_REDOP_AVG)
		facc /= nranks;
	chk_store(dt, out, 0, acc, facc);
}

/* ------------------------------------------------------------------ */
/* Buffers                                                             */
/* ------------------------------------------------------------------ */

/* Elements of the send and receive buffers (out of place; in place, the
 * one buffer has chk_inplace_elems()). */
static inline size_t chk_send_elems(const struct chk_case *c)
{
	size_t n = (size_t)c->nranks;

	switch (c->coll) {
	case CHK_REDUCE_SCATTER:
	case CHK_ALLTOALL:
	case CHK_SCATTER:	/* the root's; the others' is ignored */
		return n * c->count;
	default:
		return c->count;
	}
}

static inline size_t chk_recv_elems(const struct chk_case *c)
{
	size_t n = (size_t)c->nranks;

	switch (c->coll) {
	case CHK_ALLGATHER:
	case CHK_ALLTOALL:
	case CHK_GATHER:	/* the root's; the others' is ignored */
		return n * c->count;
	default:
		return c->count;
	}
}

static inline size_t chk_inplace_elems(const struct chk_case *c)
{
	return chk_send_elems(c) > chk_recv_elems(c) ? chk_send_elems(c) :
						       chk_recv_elems(c);
}

/* Whether the case has an in-place form. */
static inline bool chk_has_in_place(enum chk_coll c)
{
	return c != CHK_SENDRECV;
}

/* In place: where send and recv point inside the one buffer @buf. */
static inline void chk_inplace_ptrs(const struct chk_case *c, void *buf,
				    void **send, void **recv)
{
	size_t off = (size_t)c->rank * c->count * coll_dtype_size(c->dt);

	*send = *recv = buf;
	if (c->coll == CHK_ALLGATHER || c->coll == CHK_GATHER)
		*send = (char *)buf + off;
	else if (c->coll == CHK_REDUCE_SCATTER || c->coll == CHK_SCATTER)
		*recv = (char *)buf + off;
}

/* Fill the inputs (and poison what must be overwritten). Out of place:
 * @send and @recv are separate buffers of chk_send_elems() and
 * chk_recv_elems(); in place: @send is the one buffer, @recv is ignored. */
static inline void chk_fill(const struct chk_case *c, void *send, void *recv)
{
	size_t es = coll_dtype_size(c->dt);
	int op = chk_reduces(c->coll) ? (int)c->op : 0;
	void *buf = send;

	if (c->in_place) {
		memset(buf, CHK_POISON, chk_inplace_elems(c) * es);
		switch (c->coll) {
		case CHK_BROADCAST:
			if (c->rank == c->root)
				chk_fill_input(c->dt, 0, c->rank, buf, 0,
					       c->count);
			break;
		case CHK_ALLGATHER:
		case CHK_GATHER:
			chk_fill_input(c->dt, 0, c->rank,
				       (char *)buf + (size_t)c->rank * c->count * es,
				       0, c->count);
			break;
		case CHK_SCATTER:
			if (c->rank == c->root)
				chk_fill_input(c->dt, 0, c->rank, buf, 0,
					       chk_inplace_elems(c));
			break;
		default:
			chk_fill_input(c->dt, op, c->rank, buf, 0,
				       chk_inplace_elems(c));
			break;
		}
		return;
	}
	memset(recv, CHK_POISON, chk_recv_elems(c) * es);
	if ((c->coll == CHK_BROADCAST || c->coll == CHK_SCATTER) &&
	    c->rank != c->root)
		memset(send, CHK_POISON, chk_send_elems(c) * es);
	else
		chk_fill_input(c->dt, op, c->rank, send, 0, chk_send_elems(c));
}

/*
 * Expected value of element @j of this rank's result (the receive buffer,
 * or in place the result region), into @out (one element). Returns false
 * where nothing is expected (a non-root's REDUCE result).
 */
static inline bool chk_expected(const struct chk_case *c, size_t j, void *out)
{
	size_t n = (size_t)c->nranks, blk, k;
	int64_t v;
	double f;
	int src;

	switch (c->coll) {
	case CHK_ALLREDUCE:
		chk_reduce_ref(c->dt, c->op, c->nranks, j, out);
		return true;
	case CHK_REDUCE:
		if (c->rank != c->root)
			return false;
		chk_reduce_ref(c->dt, c->op, c->nranks, j, out);
		return true;
	case CHK_REDUCE_SCATTER:
		chk_reduce_ref(c->dt, c->op, c->nranks,
			       (size_t)c->rank * c->count + j, out);
		return true;
	case CHK_BROADCAST:
		chk_gen(c->dt, 0, c->root, j, &v, &f);
		break;
	case CHK_ALLGATHER:
		blk = j / c->count;
		chk_gen(c->dt, 0, (int)blk, j % c->count, &v, &f);
		break;
	case CHK_ALLTOALL:
		blk = j / c->count;
		k = j % c->count;
		chk_gen(c->dt, 0, (int)blk, (size_t)c->rank * c->count + k,
			&v, &f);
		break;
	case CHK_SENDRECV:
		src = (c->rank + c->nranks - 1) % c->nranks;
		chk_gen(c->dt, 0, src, j, &v, &f);
		break;
	case CHK_GATHER:
		if (c->rank != c->root)
			return false;
		blk = j / c->count;
		chk_gen(c->dt, 0, (int)blk, j % c->count, &v, &f);
		break;
	case CHK_SCATTER:
		chk_gen(c->dt, 0, c->root, (size_t)c->rank * c->count + j,
			&v, &f);
		break;
	default:
		return false;
	}
	(void)n;
	chk_store(c->dt, out, 0, v, f);
	return true;
}

/* Relative tolerance of AVG results. */
static inline double chk_avg_tol(coll_dtype dt)
{
	switch (dt) {
	case COLL_DTYPE_FP16:	return 2e-3;
	case COLL_DTYPE_BF16:	return 1.6e-2;
	case COLL_DTYPE_FP8_E4M3: return 0.13;	/* an ulp: 2^-3 */
	case COLL_DTYPE_FP8_E5M2: return 0.26;	/* 2^-2 */
	case COLL_DTYPE_FP32:	return 2e-7;
	default:		return 1e-15;
	}
}

static inline bool chk_elem_ok(const struct chk_case *c, const void *got,
			       size_t j, const void *want)
{
	size_t es = coll_dtype_size(c->dt);
	double g, w;

	if (!memcmp((const char *)got + j * es, want, es))
		return true;
	if (!chk_reduces(c->coll) || c->op != COLL_REDOP_AVG)
		return false;
	g = chk_load_f(c->dt, got, j);
	w = chk_load_f(c->dt, want, 0);
	return fabs(g - w) <= chk_avg_tol(c->dt) * fabs(w) + 1e-30;
}

static inline void chk_fmt_elem(coll_dtype dt, const void *buf, size_t i,
				char *s, size_t len)
{
	if (chk_is_float(dt)) {
		snprintf(s, len, "%g", chk_load_f(dt, buf, i));
		return;
	}
	switch (dt) {
	case COLL_DTYPE_INT8:
		snprintf(s, len, "%d", ((const int8_t *)buf)[i]);
		break;
	case COLL_DTYPE_UINT8:
		snprintf(s, len, "%u", ((const uint8_t *)buf)[i]);
		break;
	case COLL_DTYPE_INT32:
		snprintf(s, len, "%d", ((const int32_t *)buf)[i]);
		break;
	case COLL_DTYPE_UINT32:
		snprintf(s, len, "%u", ((const uint32_t *)buf)[i]);
		break;
	case COLL_DTYPE_INT64:
		snprintf(s, len, "%lld", (long long)((const int64_t *)buf)[i]);
		break;
	default:
		snprintf(s, len, "%llu",
			 (unsigned long long)((const uint64_t *)buf)[i]);
		break;
	}
}

/*
 * Count the wrong elements of this rank's result; out of place, also the
 * elements of the send buffer that changed (the input is read-only).
 * @send/@recv as given to chk_fill(). The first problem is described in
 * @diag (may be NULL).
 */
static inline size_t chk_verify(const struct chk_case *c, const void *send,
				const void *recv, char *diag, size_t dlen)
{
	size_t es = coll_dtype_size(c->dt), n, j, bad = 0;
	int op = chk_reduces(c->coll) ? (int)c->op : 0;
	const char *res = recv;
	uint8_t want[8];
	char gs[32], ws[32];

	if (diag && dlen)
		diag[0] = '\0';
	n = c->coll == CHK_REDUCE_SCATTER || c->coll == CHK_REDUCE ||
	    c->coll == CHK_ALLREDUCE || c->coll == CHK_BROADCAST ||
	    c->coll == CHK_SENDRECV || c->coll == CHK_SCATTER ?
	    c->count : (size_t)c->nranks * c->count;
	if (c->in_place) {
		void *s, *r;

		chk_inplace_ptrs(c, (void *)send, &s, &r);
		res = r;
	}
	for (j = 0; j < n; j++) {
		if (!chk_expected(c, j, want))
			break;
		if (chk_elem_ok(c, res, j, want))
			continue;
		if (!bad++ && diag) {
			chk_fmt_elem(c->dt, res, j, gs, sizeof(gs));
			chk_fmt_elem(c->dt, want, 0, ws, sizeof(ws));
			snprintf(diag, dlen, "element %zu is %s, expected %s",
				 j, gs, ws);
		}
	}
	if (c->in_place)
		return bad;
	/* A non-root's REDUCE or GATHER receive buffer must stay
	 * untouched. */
	if ((c->coll == CHK_REDUCE || c->coll == CHK_GATHER) &&
	    c->rank != c->root) {
		for (j = 0; j < chk_recv_elems(c) * es; j++) {
			if (((const uint8_t *)recv)[j] == CHK_POISON)
				continue;
			if (!bad++ && diag)
				snprintf(diag, dlen, "non-root receive buffer "
					 "written at byte %zu", j);
		}
	}
	/* The send buffer is read-only. */
	if ((c->coll == CHK_BROADCAST || c->coll == CHK_SCATTER) &&
	    c->rank != c->root)
		return bad;
	for (j = 0; j < chk_send_elems(c); j++) {
		int64_t v;
		double f;

		chk_gen(c->dt, op, c->rank, j, &v, &f);
		chk_store(c->dt, want, 0, v, f);
		if (!memcmp((const char *)send + j * es, want, es))
			continue;
		if (!bad++ && diag)
			snprintf(diag, dlen, "send buffer element %zu changed",
				 j);
	}
	return bad;
}

#endif /* KCOLL_CHECK_H */
