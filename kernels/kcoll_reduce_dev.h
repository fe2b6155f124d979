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

/*
 * The narrow floating types (fp16, bf16, fp8 E4M3 and E5M2): C::in widens
 * to fp32 exactly, one fp32 operation Op, C::out rounds back.
 */
template <class C, class Op> struct kr_narrow {
	typedef typename C::type type;
	static KR_HD type f(type a, type b)
	{
		return C::out(Op::f(C::in(a), C::in(b)));
	}
};

#define KR_CVT(name, T, IN, OUT)					\
	struct name {							\
		typedef T type;						\
		static KR_HD float in(T v) { return IN(v); }		\
		static KR_HD T out(float f) { return OUT(f); }		\
	}
KR_CVT(kr_cvt_half, uint16_t, kcoll_h2f, kcoll_f2h);
KR_CVT(kr_cvt_bfloat, uint16_t, kcoll_bf2f, kcoll_f2bf);
KR_CVT(kr_cvt_e4m3, uint8_t, kcoll_e4m3_2f, kcoll_f2e4m3);
KR_CVT(kr_cvt_e5m2, uint8_t, kcoll_e5m2_2f, kcoll_f2e5m2);

template <class Op> using kr_half = kr_narrow<kr_cvt_half, Op>;
template <class Op> using kr_bfloat = kr_narrow<kr_cvt_bfloat, Op>;
template <class Op> using kr_e4m3 = kr_narrow<kr_cvt_e4m3, Op>;
template <class Op> using kr_e5m2 = kr_narrow<kr_cvt_e5m2, Op>;

/* AVG's finish: a / nranks, one correctly rounded division (in fp32 for
 * the narrow types). */
template <class T> struct kr_scale {
	typedef T type;
	static KR_HD T f(T a, uint32_t q) { return a / (T)q; }
};
template <class C> struct kr_scale_narrow {
	typedef typename C::type type;
	static KR_HD type f(type a, uint32_t q)
	{
		return C::out(C::in(a) / (float)q);
	}
};
typedef kr_scale_narrow<kr_cvt_half> kr_scale_half;
typedef kr_scale_narrow<kr_cvt_bfloat> kr_scale_bfloat;
typedef kr_scale_narrow<kr_cvt_e4m3> kr_scale_e4m3;
typedef kr_scale_narrow<kr_cvt_e5m2> kr_scale_e5m2;

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
