/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The body of kcoll's CUDA reduction kernels, as C++ templates that nvcc
 * compiles for the GPU (kcoll_reduce.cu) and g++ compiles for the host
 * (kcoll_kernels_host.cc: the unit test, the stand-in CUDA driver). One
 * thread of a grid calls kr_reduce() with its global index and the grid's
 * size; the host build runs every index in turn. Each element is combined
 * with kmod/kcoll_redop.h's operations, exactly as the module's CPU
 * reduction does, so the results are bit for bit the module's.
 *
 * Memory access: when dst, a and b share their alignment modulo 16, a scalar
 * head brings dst to a 16-byte boundary, the body moves 16 bytes per load
 * and store (ld.global.v4 / st.global.v4 on the GPU) and a scalar tail
 * finishes; otherwise every element is scalar. Elements must be aligned to
 * their size (cudaMalloc'd memory is; libcoll refuses a device buffer that
 * is not).
 */
#ifndef KCOLL_REDUCE_DEV_H
#define KCOLL_REDUCE_DEV_H

#include <stdint.h>
#include "kcoll_redop.h"

#if defined(__CUDACC__)
#define KR_HD __host__ __device__ __forceinline__
/* The lanes of a 16-byte vector stay in registers only if their loop is
 * unrolled (16 fp8 lanes with their conversions otherwise went to a stack
 * frame). */
#define KR_UNROLL _Pragma("unroll")
typedef uint4 kr_raw16;
#else
#define KR_UNROLL
#define KR_HD inline
struct alignas(16) kr_raw16 {
	uint32_t x, y, z, w;
};
#endif

/* Binary operations on one element of type T (the storage type). */
template <class T> struct kr_sum {
	typedef T type;
	static KR_HD T f(T a, T b) { return KCOLL_RED_SUM(T, a, b); }
};
template <class T> struct kr_prod {
	typedef T type;
	static KR_HD T f(T a, T b) { return KCOLL_RED_PROD(T, a, b); }
};
template <class T> struct kr_min {
	typedef T type;
	static KR_HD T f(T a, T b) { return KCOLL_RED_MIN(T, a, b); }
};
template <class T> struct kr_max {
	typedef T type;
	static KR_HD T f(T a, T b) { return KCOLL_RED_MAX(T, a, b); }
};

/* 16-bit floating types: widen, one fp32 operation Op, round back. */
template <class Op> struct kr_half {
	typedef uint16_t type;
	static KR_HD uint16_t f(uint16_t a, uint16_t b)
	{
		return kcoll_f2h(Op::f(kcoll_h2f(a), kcoll_h2f(b)));
	}
};
template <class Op> struct kr_bfloat {
	typedef uint16_t type;
	static KR_HD uint16_t f(uint16_t a, uint16_t b)
	{
		return kcoll_f2bf(Op::f(kcoll_bf2f(a), kcoll_bf2f(b)));
	}
};

/* fp8: the same through fp32, rounded back with saturation. */
template <class Op> struct kr_e4m3 {
	typedef uint8_t type;
	static KR_HD uint8_t f(uint8_t a, uint8_t b)
	{
		return kcoll_f2e4m3(Op::f(kcoll_e4m3_2f(a), kcoll_e4m3_2f(b)));
	}
};
template <class Op> struct kr_e5m2 {
	typedef uint8_t type;
	static KR_HD uint8_t f(uint8_t a, uint8_t b)
	{
		return kcoll_f2e5m2(Op::f(kcoll_e5m2_2f(a), kcoll_e5m2_2f(b)));
	}
};

/* AVG's finish: a / nranks, one correctly rounded division. */
template <class T> struct kr_scale {
	typedef T type;
	static KR_HD T f(T a, uint32_t q) { return a / (T)q; }
};
struct kr_scale_half {
	typedef uint16_t type;
	static KR_HD uint16_t f(uint16_t a, uint32_t q)
	{
		return kcoll_f2h(kcoll_h2f(a) / (float)q);
	}
};
struct kr_scale_bfloat {
	typedef uint16_t type;
	static KR_HD uint16_t f(uint16_t a, uint32_t q)
	{
		return kcoll_f2bf(kcoll_bf2f(a) / (float)q);
	}
};
struct kr_scale_e4m3 {
	typedef uint8_t type;
	static KR_HD uint8_t f(uint8_t a, uint32_t q)
	{
		return kcoll_f2e4m3(kcoll_e4m3_2f(a) / (float)q);
	}
};
struct kr_scale_e5m2 {
	typedef uint8_t type;
	static KR_HD uint8_t f(uint8_t a, uint32_t q)
	{
		return kcoll_f2e5m2(kcoll_e5m2_2f(a) / (float)q);
	}
};

/* 16 bytes seen as lanes of S. */
template <class S> union kr_lanes {
	kr_raw16 raw;
	S e[16 / sizeof(S)];
};

/*
 * Where the 16-byte body starts (in elements) and how many 16-byte vectors
 * it has; head == n and nvec == 0 when dst, a and b are not co-aligned.
 */
template <class S>
static KR_HD void kr_split(uintptr_t da, uintptr_t aa, uintptr_t ba,
			   uint64_t n, uint64_t *head, uint64_t *nvec)
{
	const uint64_t lanes = 16 / sizeof(S);

	*head = n;
	*nvec = 0;
	if ((((da ^ aa) | (da ^ ba)) & 15) || (da % sizeof(S)))
		return;
	*head = ((16 - (da & 15)) & 15) / sizeof(S);
	if (*head > n)
		*head = n;
	*nvec = (n - *head) / lanes;
}

/*
 * dst[i] = F(a[i], b[i]) for the elements of thread tid of nthr. a may be
 * dst (in place); otherwise none of the three overlap.
 */
template <class F>
static KR_HD void kr_reduce(void *dst, const void *a, const void *b,
			    uint64_t n, uint64_t tid, uint64_t nthr)
{
	typedef typename F::type S;
	const uint64_t lanes = 16 / sizeof(S);
	S *d = (S *)dst;
	const S *x = (const S *)a, *y = (const S *)b;
	uint64_t head, nvec, i, j;

	kr_split<S>((uintptr_t)dst, (uintptr_t)a, (uintptr_t)b, n, &head,
		    &nvec);
	for (i = tid; i < head; i += nthr)
		d[i] = F::f(x[i], y[i]);
	for (i = tid; i < nvec; i += nthr) {
		uint64_t e = head + i * lanes;
		kr_lanes<S> va, vb;

		va.raw = *(const kr_raw16 *)(x + e);
		vb.raw = *(const kr_raw16 *)(y + e);
		KR_UNROLL
		for (j = 0; j < lanes; j++)
			va.e[j] = F::f(va.e[j], vb.e[j]);
		*(kr_raw16 *)(d + e) = va.raw;
	}
	for (i = head + nvec * lanes + tid; i < n; i += nthr)
		d[i] = F::f(x[i], y[i]);
}

/* dst[i] = F(dst[i], nranks): AVG's finish, same memory pattern. */
template <class F>
static KR_HD void kr_scale_all(void *dst, uint64_t n, uint32_t nranks,
			       uint64_t tid, uint64_t nthr)
{
	typedef typename F::type S;
	const uint64_t lanes = 16 / sizeof(S);
	S *d = (S *)dst;
	uint64_t head, nvec, i, j;

	kr_split<S>((uintptr_t)dst, (uintptr_t)dst, (uintptr_t)dst, n, &head,
		    &nvec);
	for (i = tid; i < head; i += nthr)
		d[i] = F::f(d[i], nranks);
	for (i = tid; i < nvec; i += nthr) {
		kr_raw16 *dv = (kr_raw16 *)(d + head + i * lanes);
		kr_lanes<S> a;

		a.raw = *dv;
		KR_UNROLL
		for (j = 0; j < lanes; j++)
			a.e[j] = F::f(a.e[j], nranks);
		*dv = a.raw;
	}
	for (i = head + nvec * lanes + tid; i < n; i += nthr)
		d[i] = F::f(d[i], nranks);
}

#endif /* KCOLL_REDUCE_DEV_H */
