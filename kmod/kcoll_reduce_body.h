/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * kcoll reduction implementation template. Included once by each of
 * kcoll_reduce_{scalar,sse2,avx2,avx512}.c after defining KCOLL_VEC_BYTES:
 *	0	plain C (the compiler may still auto-vectorize)
 *	16	GCC vector extensions, 16-byte vectors (SSE2)
 *	32	GCC vector extensions, 32-byte vectors (AVX2; fp16 through F16C,
 *		so the file must be built with -mavx2 -mf16c)
 *	64	GCC vector extensions, 64-byte vectors (AVX-512; fp16 through the
 *		AVX-512F forms of the F16C conversions, so the file must be
 *		built with -mavx512f -mavx512bw -mavx512vl -mf16c)
 * then KCOLL_REDUCE_DEFINE_TABLE(symbol, "name") defines the table.
 *
 * Order of operations: strictly elementwise. dst[i] is computed from dst[i]
 * and src[i] alone, with the same operation in the vector main loop and in
 * the scalar tail, so every implementation, vector width and alignment gives
 * the same bits (NaN payloads aside). No horizontal operation, no FMA
 * contraction (a single operation per element), no reassociation.
 *
 * Floating point lives only in this file (and the files including it).
 * No library calls: no memcpy, no libgcc helpers.
 */
#ifndef KCOLL_VEC_BYTES
#error "define KCOLL_VEC_BYTES (0, 16, 32 or 64) before including kcoll_reduce_body.h"
#endif

#include "kcoll_reduce.h"
#include "kcoll_redop.h"

#define KR_VB	KCOLL_VEC_BYTES

#if KR_VB != 0 && KR_VB != 16 && KR_VB != 32 && KR_VB != 64
#error "KCOLL_VEC_BYTES must be 0, 16, 32 or 64"
#endif
#if KR_VB == 32 && !defined(__F16C__)
#error "the 32-byte reduction must be compiled with -mavx2 -mf16c"
#endif
/*
 * 64 bytes: F for the zmm arithmetic and conversions, BW for the 8-bit
 * lanes (without it GCC splits u8/s8 vectors into 256-bit halves), VL so
 * the 256-bit half-vectors of the fp16 path may use EVEX forms too.
 */
#if KR_VB == 64 && !(defined(__AVX512F__) && defined(__AVX512BW__) && \
		     defined(__AVX512VL__) && defined(__F16C__))
#error "the 64-byte reduction must be compiled with -mavx512f -mavx512bw -mavx512vl -mf16c"
#endif

typedef signed char kr_s8;
/* Element access types for possibly unaligned buffers. */
typedef u16 kr_u16_m __attribute__((aligned(1), may_alias));
typedef float kr_f32_m __attribute__((aligned(1), may_alias));
typedef double kr_f64_m __attribute__((aligned(1), may_alias));

/* ------------------------------------------------------------------ */
/* Scalar operations (also the tail of the vector loops)              */
/* ------------------------------------------------------------------ */

/* The element arithmetic is kcoll_redop.h's, shared with the CUDA kernels. */
#define KR_S_SUM(T, a, b)	KCOLL_RED_SUM(T, a, b)
#define KR_S_PROD(T, a, b)	KCOLL_RED_PROD(T, a, b)
#define KR_S_MIN(T, a, b)	KCOLL_RED_MIN(T, a, b)
#define KR_S_MAX(T, a, b)	KCOLL_RED_MAX(T, a, b)

/* ------------------------------------------------------------------ */
/* Vector types and operations                                         */
/* ------------------------------------------------------------------ */
#if KR_VB
/* Aligned (register) type and unaligned, aliasing memory-access type. */
#define KR_VTYPE(T, name)						\
	typedef T name __attribute__((vector_size(KR_VB)));		\
	typedef T name##_m __attribute__((vector_size(KR_VB), aligned(1), \
					  may_alias))
KR_VTYPE(u8, kr_vu8);
KR_VTYPE(kr_s8, kr_vs8);
KR_VTYPE(u32, kr_vu32);
KR_VTYPE(s32, kr_vs32);
KR_VTYPE(u64, kr_vu64);
KR_VTYPE(s64, kr_vs64);
KR_VTYPE(float, kr_vf32);
KR_VTYPE(double, kr_vf64);

/* Half-width vector of 16-bit elements: as many lanes as kr_vf32. */
typedef u16 kr_vh __attribute__((vector_size(KR_VB / 2)));
typedef u16 kr_vh_m __attribute__((vector_size(KR_VB / 2), aligned(1),
				   may_alias));

#define KR_V_SUM(VT, a, b)	((a) + (b))
#define KR_V_PROD(VT, a, b)	((a) * (b))
/*
 * Bitwise select by comparison mask; the mask type is the signed integer
 * vector of the same lane width. (a) != (a) is the NaN test (folded away
 * for integers).
 */
#define KR_V_SEL(VT, m, a, b)						\
	((VT)((m & (__typeof__(m))(a)) | (~m & (__typeof__(m))(b))))
#define KR_V_MIN(VT, a, b) ({						\
	__typeof__((a) < (b)) kr_m_ = ((a) < (b)) | ((a) != (a));	\
	KR_V_SEL(VT, kr_m_, a, b); })
#define KR_V_MAX(VT, a, b) ({						\
	__typeof__((a) > (b)) kr_m_ = ((a) > (b)) | ((a) != (a));	\
	KR_V_SEL(VT, kr_m_, a, b); })

/* Main loop, unrolled 4x, then single vectors; leaves i for the tail. */
#define KR_VLOOP(T, VT, VOP)						\
	do {								\
		const size_t e_ = KR_VB / sizeof(T);			\
		for (; i + 4 * e_ <= n; i += 4 * e_) {			\
			VT a0 = *(const VT##_m *)(d + i);		\
			VT a1 = *(const VT##_m *)(d + i + e_);		\
			VT a2 = *(const VT##_m *)(d + i + 2 * e_);	\
			VT a3 = *(const VT##_m *)(d + i + 3 * e_);	\
			VT b0 = *(const VT##_m *)(s + i);		\
			VT b1 = *(const VT##_m *)(s + i + e_);		\
			VT b2 = *(const VT##_m *)(s + i + 2 * e_);	\
			VT b3 = *(const VT##_m *)(s + i + 3 * e_);	\
			*(VT##_m *)(d + i) = VOP(VT, a0, b0);		\
			*(VT##_m *)(d + i + e_) = VOP(VT, a1, b1);	\
			*(VT##_m *)(d + i + 2 * e_) = VOP(VT, a2, b2);	\
			*(VT##_m *)(d + i + 3 * e_) = VOP(VT, a3, b3);	\
		}							\
		for (; i + e_ <= n; i += e_) {				\
			VT a0 = *(const VT##_m *)(d + i);		\
			VT b0 = *(const VT##_m *)(s + i);		\
			*(VT##_m *)(d + i) = VOP(VT, a0, b0);		\
		}							\
	} while (0)
#else
#define KR_VLOOP(T, VT, VOP)	do { } while (0)
#endif

/* fname: dst[i] = SOP(dst[i], src[i]) for element type T. */
#define KR_DEF(fname, T, VT, VOP, SOP)					\
static void fname(void *dst, const void *src, size_t n)		\
{									\
	typedef T kr_t_m __attribute__((aligned(1), may_alias));	\
	kr_t_m *d = (kr_t_m *)dst;					\
	const kr_t_m *s = (const kr_t_m *)src;				\
	size_t i = 0;							\
									\
	KR_VLOOP(T, VT, VOP);						\
	for (; i < n; i++)						\
		d[i] = SOP(T, d[i], s[i]);				\
}

#define KR_DEF_INT(sfx, T, VT)						\
	KR_DEF(kr_sum_##sfx, T, VT, KR_V_SUM, KR_S_SUM)			\
	KR_DEF(kr_prod_##sfx, T, VT, KR_V_PROD, KR_S_PROD)		\
	KR_DEF(kr_min_##sfx, T, VT, KR_V_MIN, KR_S_MIN)			\
	KR_DEF(kr_max_##sfx, T, VT, KR_V_MAX, KR_S_MAX)

/* Signed sum/prod use the unsigned functions (same bits, no UB). */
#define KR_DEF_SINT(sfx, T, VT)						\
	KR_DEF(kr_min_##sfx, T, VT, KR_V_MIN, KR_S_MIN)			\
	KR_DEF(kr_max_##sfx, T, VT, KR_V_MAX, KR_S_MAX)

#define KR_DEF_FLT	KR_DEF_INT

KR_DEF_INT(u8, u8, kr_vu8)
KR_DEF_SINT(s8, kr_s8, kr_vs8)
KR_DEF_INT(u32, u32, kr_vu32)
KR_DEF_SINT(s32, s32, kr_vs32)
KR_DEF_INT(u64, u64, kr_vu64)
KR_DEF_SINT(s64, s64, kr_vs64)
KR_DEF_FLT(f32, float, kr_vf32)
KR_DEF_FLT(f64, double, kr_vf64)

/* ------------------------------------------------------------------ */
/* 16-bit floating types                                              */
/* ------------------------------------------------------------------ */

#define kr_bf2f	kcoll_bf2f
#define kr_f2bf	kcoll_f2bf
#define kr_h2f	kcoll_h2f
#define kr_f2h	kcoll_f2h

#define KR_F_SUM(a, b)	((a) + (b))
#define KR_F_PROD(a, b)	((a) * (b))
#define KR_F_MIN(a, b)	KR_S_MIN(float, a, b)
#define KR_F_MAX(a, b)	KR_S_MAX(float, a, b)
#define KR_FV_SUM(a, b)	((a) + (b))
#define KR_FV_PROD(a, b) ((a) * (b))
#define KR_FV_MIN(a, b)	KR_V_MIN(kr_vf32, a, b)
#define KR_FV_MAX(a, b)	KR_V_MAX(kr_vf32, a, b)

#if KR_VB
#define KR_VLOOP16(VCVT_IN, VCVT_OUT, FVOP)				\
	do {								\
		const size_t e_ = KR_VB / 4;				\
		for (; i + 2 * e_ <= n; i += 2 * e_) {			\
			kr_vf32 a0 = VCVT_IN(*(const kr_vh_m *)(d + i)); \
			kr_vf32 a1 = VCVT_IN(*(const kr_vh_m *)(d + i + e_)); \
			kr_vf32 b0 = VCVT_IN(*(const kr_vh_m *)(s + i)); \
			kr_vf32 b1 = VCVT_IN(*(const kr_vh_m *)(s + i + e_)); \
			*(kr_vh_m *)(d + i) = VCVT_OUT(FVOP(a0, b0));	\
			*(kr_vh_m *)(d + i + e_) = VCVT_OUT(FVOP(a1, b1)); \
		}							\
		for (; i + e_ <= n; i += e_) {				\
			kr_vf32 a0 = VCVT_IN(*(const kr_vh_m *)(d + i)); \
			kr_vf32 b0 = VCVT_IN(*(const kr_vh_m *)(s + i)); \
			*(kr_vh_m *)(d + i) = VCVT_OUT(FVOP(a0, b0));	\
		}							\
	} while (0)
#endif

#if KR_VB && defined(__BYTE_ORDER__) && \
	__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/*
 * bf16 without lane shuffles: a 32-bit lane holds two bf16 elements (little
 * endian: the even one low). Widening is a shift (even) or a mask (odd);
 * the rounded results come back with a shift and a mask. Same per-element
 * arithmetic as kr_bf2f()/kr_f2bf().
 */
static inline kr_vu32 kr_vbf_round(kr_vf32 f)	/* result in bits 31..16 */
{
	kr_vu32 u = (kr_vu32)f;
	kr_vs32 nan = (kr_vs32)(u & 0x7fffffffU) > 0x7f800000;
	kr_vu32 rn = u + 0x7fffU + ((u >> 16) & 1);
	kr_vu32 qn = u | 0x400000U;

	return KR_V_SEL(kr_vu32, nan, qn, rn);
}

#define KR_VLOOP_BF16(FVOP)						\
	do {								\
		const size_t e_ = KR_VB / 2;				\
		for (; i + e_ <= n; i += e_) {				\
			kr_vu32 a = *(const kr_vu32_m *)(d + i);	\
			kr_vu32 b = *(const kr_vu32_m *)(s + i);	\
			kr_vf32 ae = (kr_vf32)(a << 16);		\
			kr_vf32 ao = (kr_vf32)(a & 0xffff0000U);	\
			kr_vf32 be = (kr_vf32)(b << 16);		\
			kr_vf32 bo = (kr_vf32)(b & 0xffff0000U);	\
			kr_vu32 re = kr_vbf_round(FVOP(ae, be));	\
			kr_vu32 ro = kr_vbf_round(FVOP(ao, bo));	\
									\
			*(kr_vu32_m *)(d + i) =				\
				(re >> 16) | (ro & 0xffff0000U);	\
		}							\
	} while (0)
#else
#define KR_VLOOP_BF16(FVOP)	do { } while (0)
#endif

#if KR_VB == 32
/* F16C: 8 halves <-> 8 floats, rounding imm 0 = nearest even. */
typedef short kr_v8hi __attribute__((vector_size(16)));

static inline kr_vf32 kr_vh2f(kr_vh h)
{
	return (kr_vf32)__builtin_ia32_vcvtph2ps256((kr_v8hi)h);
}

static inline kr_vh kr_vf2h(kr_vf32 f)
{
	return (kr_vh)__builtin_ia32_vcvtps2ph256(f, 0);
}
#define KR_VLOOP_FP16(FVOP)	KR_VLOOP16(kr_vh2f, kr_vf2h, FVOP)
#elif KR_VB == 64
/*
 * AVX-512F: 16 halves <-> 16 floats (vcvtph2ps/vcvtps2ph on zmm), the same
 * conversions as F16C's: widening is exact (subnormals included, a NaN
 * comes out quiet), narrowing with imm 0 rounds to nearest even. These are
 * the builtins behind _mm512_cvtph_ps()/_mm512_cvtps_ph() in GCC and
 * clang (<immintrin.h> cannot be included in the kernel); all-ones mask,
 * so the pass-through operand is unused, and rounding operand 4
 * (_MM_FROUND_CUR_DIRECTION: MXCSR, which the conversion does not use
 * anyway for ph -> ps).
 */
typedef short kr_v16hi __attribute__((vector_size(32)));

static inline kr_vf32 kr_vh2f(kr_vh h)
{
	return (kr_vf32)__builtin_ia32_vcvtph2ps512_mask((kr_v16hi)h,
							 (kr_vf32){ 0 },
							 (unsigned short)0xffff,
							 4);
}

static inline kr_vh kr_vf2h(kr_vf32 f)
{
	return (kr_vh)__builtin_ia32_vcvtps2ph512_mask(f, 0, (kr_v16hi){ 0 },
						       (unsigned short)0xffff);
}
#define KR_VLOOP_FP16(FVOP)	KR_VLOOP16(kr_vh2f, kr_vf2h, FVOP)
#else
#define KR_VLOOP_FP16(FVOP)	do { } while (0)
#endif

#define KR_DEF16(fname, VLOOP, TOF, FROMF, FVOP, FOP)			\
static void fname(void *dst, const void *src, size_t n)		\
{									\
	kr_u16_m *d = (kr_u16_m *)dst;					\
	const kr_u16_m *s = (const kr_u16_m *)src;			\
	size_t i = 0;							\
									\
	VLOOP(FVOP);							\
	for (; i < n; i++)						\
		d[i] = FROMF(FOP(TOF(d[i]), TOF(s[i])));		\
}

#define KR_DEF_HALF(kind, VLOOP, TOF, FROMF)				\
	KR_DEF16(kr_sum_##kind, VLOOP, TOF, FROMF, KR_FV_SUM, KR_F_SUM)	\
	KR_DEF16(kr_prod_##kind, VLOOP, TOF, FROMF, KR_FV_PROD, KR_F_PROD) \
	KR_DEF16(kr_min_##kind, VLOOP, TOF, FROMF, KR_FV_MIN, KR_F_MIN)	\
	KR_DEF16(kr_max_##kind, VLOOP, TOF, FROMF, KR_FV_MAX, KR_F_MAX)

KR_DEF_HALF(fp16, KR_VLOOP_FP16, kr_h2f, kr_f2h)
KR_DEF_HALF(bf16, KR_VLOOP_BF16, kr_bf2f, kr_f2bf)

/*
 * fp8: through fp32, element by element in the scalar and SSE2 builds. The
 * AVX2 and AVX-512 builds take a vector of 32-bit lanes, each holding four
 * elements (as the bf16 path holds two), and convert one byte of every
 * lane at a time with kcoll_redop.h's steps done lane-wise, selects for
 * branches (integer steps; the subnormal fp8 values through an exact float
 * multiply): no shuffles, and the same bits as every other build.
 */
#if KR_VB >= 32
#define KR_VBC(x)	((kr_vu32){ 0 } + (x))	/* broadcast */

/* @v: one fp8 code per lane (0..255). @unit: 2^(1 - bias - mb), the
 * subnormal step (exact in fp32). */
static inline kr_vf32 kr_vfp8_to_f(kr_vu32 v, unsigned int mb,
				   unsigned int bias, int has_inf, float unit)
{
	kr_vu32 sign = (v & 0x80) << 24;
	kr_vu32 a = v & 0x7f;
	kr_vu32 e = a >> mb;
	kr_vu32 m = a & ((1U << mb) - 1);
	kr_vu32 nrm = sign | ((a << (23 - mb)) + ((127 - bias) << 23));
	kr_vu32 sub = sign | (kr_vu32)(__builtin_convertvector(m, kr_vf32) *
				       unit);
	kr_vs32 special, is_sub = e == 0;
	kr_vu32 spec, r;

	if (has_inf) {
		kr_vs32 inf = m == 0;

		special = e == (0x7fU >> mb);
		spec = sign | KR_V_SEL(kr_vu32, inf, KR_VBC(0x7f800000U),
				       KR_VBC(0x7fc00000U));
	} else {
		special = a == 0x7f;
		spec = sign | 0x7fc00000U;
	}
	r = KR_V_SEL(kr_vu32, special, spec, nrm);
	r = KR_V_SEL(kr_vu32, is_sub, sub, r);
	return (kr_vf32)r;
}

/* One fp8 code per lane, in bits 7..0. */
static inline kr_vu32 kr_vf_to_fp8(kr_vf32 f, unsigned int mb,
				   unsigned int bias, u32 maxbits, u32 maxcode)
{
	kr_vu32 u = (kr_vu32)f;
	kr_vu32 sign = (u >> 24) & 0x80;
	kr_vu32 a = u & 0x7fffffffU;
	/* normal: round to nearest even by adding half - 1 and the LSB */
	kr_vu32 rn = (a - ((127 - bias) << 23) + ((1U << (22 - mb)) - 1) +
		      ((a >> (23 - mb)) & 1)) >> (23 - mb);
	/* subnormal: shift counts kept in 1..25 (25: below half a unit) */
	kr_vu32 sh = (151 - bias - mb) - (a >> 23);
	kr_vu32 mant = (a & 0x7fffff) | 0x800000;
	kr_vu32 rs, rem, half, r;
	kr_vs32 up, big = sh > 25, small, nrm, sat, nan;

	sh = KR_V_SEL(kr_vu32, big, KR_VBC(25), sh);
	small = sh < 1;
	sh = KR_V_SEL(kr_vu32, small, KR_VBC(1), sh);
	rs = mant >> sh;
	rem = mant & ((KR_VBC(1) << sh) - 1);
	half = KR_VBC(1) << (sh - 1);
	up = (rem > half) | ((rem == half) & -(kr_vs32)(rs & 1));
	rs -= (kr_vu32)up;
	nrm = a >= ((128 - bias) << 23);
	sat = a >= maxbits;
	nan = a > 0x7f800000U;
	r = sign | KR_V_SEL(kr_vu32, nrm, rn, rs);
	r = KR_V_SEL(kr_vu32, sat, sign | maxcode, r);
	r = KR_V_SEL(kr_vu32, nan, KR_VBC(0x7f), r);
	return r;
}

static inline kr_vf32 kr_ve4m3_2f(kr_vu32 v)
{
	return kr_vfp8_to_f(v, 3, 7, 0, 1.0f / 512);
}

static inline kr_vu32 kr_vf2e4m3(kr_vf32 f)
{
	return kr_vf_to_fp8(f, 3, 7, 0x43e00000U, 0x7e);
}

static inline kr_vf32 kr_ve5m2_2f(kr_vu32 v)
{
	return kr_vfp8_to_f(v, 2, 15, 1, 1.0f / 65536);
}

static inline kr_vu32 kr_vf2e5m2(kr_vf32 f)
{
	return kr_vf_to_fp8(f, 2, 15, 0x47600000U, 0x7b);
}

/* Byte k of every lane: elements 4 * lane + k of the vector. */
#define KR_VLOOP_FP8(kind, FVOP)					\
	for (; i + KR_VB <= n; i += KR_VB) {				\
		kr_vu32 x_ = *(const kr_vu32_m *)(d + i);		\
		kr_vu32 y_ = *(const kr_vu32_m *)(s + i);		\
		kr_vu32 o_ = { 0 };					\
		unsigned int k_;					\
									\
		for (k_ = 0; k_ < 32; k_ += 8) {			\
			kr_vf32 a_ = kr_v##kind##_2f((x_ >> k_) & 0xff); \
			kr_vf32 b_ = kr_v##kind##_2f((y_ >> k_) & 0xff); \
									\
			o_ |= kr_vf2##kind(FVOP(a_, b_)) << k_;		\
		}							\
		*(kr_vu32_m *)(d + i) = o_;				\
	}
#define KR_VLOOP_FP8_AVG(kind)						\
	for (; i + KR_VB <= n; i += KR_VB) {				\
		kr_vu32 x_ = *(const kr_vu32_m *)(d + i);		\
		kr_vu32 o_ = { 0 };					\
		unsigned int k_;					\
									\
		for (k_ = 0; k_ < 32; k_ += 8)				\
			o_ |= kr_vf2##kind(kr_v##kind##_2f((x_ >> k_) &	\
							   0xff) / q) << k_; \
		*(kr_vu32_m *)(d + i) = o_;				\
	}
#else
#define KR_VLOOP_FP8(kind, FVOP)
#define KR_VLOOP_FP8_AVG(kind)
#endif

#define KR_DEF8(fname, kind, FVOP, FOP)					\
static void fname(void *dst, const void *src, size_t n)		\
{									\
	u8 *d = (u8 *)dst;						\
	const u8 *s = (const u8 *)src;					\
	size_t i = 0;							\
									\
	KR_VLOOP_FP8(kind, FVOP)					\
	for (; i < n; i++)						\
		d[i] = kcoll_f2##kind(FOP(kcoll_##kind##_2f(d[i]),	\
					  kcoll_##kind##_2f(s[i])));	\
}

#define KR_DEF_FP8(kind)						\
	KR_DEF8(kr_sum_##kind, kind, KR_FV_SUM, KR_F_SUM)		\
	KR_DEF8(kr_prod_##kind, kind, KR_FV_PROD, KR_F_PROD)		\
	KR_DEF8(kr_min_##kind, kind, KR_FV_MIN, KR_F_MIN)		\
	KR_DEF8(kr_max_##kind, kind, KR_FV_MAX, KR_F_MAX)		\
static void kr_avg_##kind(void *dst, size_t n, u32 nranks)		\
{									\
	u8 *d = (u8 *)dst;						\
	float q = (float)nranks;					\
	size_t i = 0;							\
									\
	KR_VLOOP_FP8_AVG(kind)						\
	for (; i < n; i++)						\
		d[i] = kcoll_f2##kind(kcoll_##kind##_2f(d[i]) / q);	\
}

KR_DEF_FP8(e4m3)
KR_DEF_FP8(e5m2)

/* ------------------------------------------------------------------ */
/* AVG finish: dst[i] /= nranks (a true division, correctly rounded)  */
/* ------------------------------------------------------------------ */

static void kr_avg_f32(void *dst, size_t n, u32 nranks)
{
	kr_f32_m *d = (kr_f32_m *)dst;
	float q = (float)nranks;
	size_t i = 0;

#if KR_VB
	for (; i + KR_VB / 4 <= n; i += KR_VB / 4) {
		kr_vf32 a = *(const kr_vf32_m *)(d + i);

		*(kr_vf32_m *)(d + i) = a / q;
	}
#endif
	for (; i < n; i++)
		d[i] = d[i] / q;
}

static void kr_avg_f64(void *dst, size_t n, u32 nranks)
{
	kr_f64_m *d = (kr_f64_m *)dst;
	double q = (double)nranks;
	size_t i = 0;

#if KR_VB
	for (; i + KR_VB / 8 <= n; i += KR_VB / 8) {
		kr_vf64 a = *(const kr_vf64_m *)(d + i);

		*(kr_vf64_m *)(d + i) = a / q;
	}
#endif
	for (; i < n; i++)
		d[i] = d[i] / q;
}

static void kr_avg_fp16(void *dst, size_t n, u32 nranks)
{
	kr_u16_m *d = (kr_u16_m *)dst;
	float q = (float)nranks;
	size_t i;

	for (i = 0; i < n; i++)
		d[i] = kr_f2h(kr_h2f(d[i]) / q);
}

static void kr_avg_bf16(void *dst, size_t n, u32 nranks)
{
	kr_u16_m *d = (kr_u16_m *)dst;
	float q = (float)nranks;
	size_t i;

	for (i = 0; i < n; i++)
		d[i] = kr_f2bf(kr_bf2f(d[i]) / q);
}

/* ------------------------------------------------------------------ */
/* Table                                                              */
/* ------------------------------------------------------------------ */

#define KR_ROW(sum, prod, min, max, avg) {				\
	[KCOLL_REDOP_SUM] = sum, [KCOLL_REDOP_PROD] = prod,		\
	[KCOLL_REDOP_MIN] = min, [KCOLL_REDOP_MAX] = max,		\
	[KCOLL_REDOP_AVG] = avg }
#define KR_IROW(u, s)	KR_ROW(kr_sum_##u, kr_prod_##u, kr_min_##s,	\
			       kr_max_##s, NULL)
#define KR_FROW(f)	KR_ROW(kr_sum_##f, kr_prod_##f, kr_min_##f,	\
			       kr_max_##f, kr_sum_##f)

#define KCOLL_REDUCE_DEFINE_TABLE(sym, impl_name)			\
const struct kcoll_reduce_table sym = {					\
	.name = impl_name,						\
	.fn = {								\
		[KCOLL_DTYPE_INT8]	= KR_IROW(u8, s8),		\
		[KCOLL_DTYPE_UINT8]	= KR_IROW(u8, u8),		\
		[KCOLL_DTYPE_INT32]	= KR_IROW(u32, s32),		\
		[KCOLL_DTYPE_UINT32]	= KR_IROW(u32, u32),		\
		[KCOLL_DTYPE_INT64]	= KR_IROW(u64, s64),		\
		[KCOLL_DTYPE_UINT64]	= KR_IROW(u64, u64),		\
		[KCOLL_DTYPE_FP16]	= KR_FROW(fp16),		\
		[KCOLL_DTYPE_BF16]	= KR_FROW(bf16),		\
		[KCOLL_DTYPE_FP32]	= KR_FROW(f32),			\
		[KCOLL_DTYPE_FP64]	= KR_FROW(f64),			\
		[KCOLL_DTYPE_FP8_E4M3]	= KR_FROW(e4m3),		\
		[KCOLL_DTYPE_FP8_E5M2]	= KR_FROW(e5m2),		\
	},								\
	.avg_finish = {							\
		[KCOLL_DTYPE_FP16]	= kr_avg_fp16,			\
		[KCOLL_DTYPE_BF16]	= kr_avg_bf16,			\
		[KCOLL_DTYPE_FP32]	= kr_avg_f32,			\
		[KCOLL_DTYPE_FP64]	= kr_avg_f64,			\
		[KCOLL_DTYPE_FP8_E4M3]	= kr_avg_e4m3,			\
		[KCOLL_DTYPE_FP8_E5M2]	= kr_avg_e5m2,			\
	},								\
}
