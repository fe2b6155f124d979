/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * kcoll's element arithmetic: one definition for the module's CPU
 * reductions (kcoll_reduce_body.h, built by gcc into the module and the
 * host tests) and for the CUDA reduction kernels (kernels/, built by nvcc
 * and, for the host tests and the stand-in driver, by g++). A mixed
 * communicator (ranks reducing on CPUs and on GPUs) gives one answer only
 * if every one of them combines two elements with exactly these steps.
 *
 * The rules (see kcoll_reduce.h for the full contract):
 *  - integer SUM/PROD on the unsigned type of the same width: wraps;
 *  - MIN/MAX as (a < b || a is NaN) ? a : b: a NaN in either operand is
 *    the result (fminf()/fmaxf() would drop it);
 *  - fp16/bf16 widened exactly to fp32, one fp32 operation, rounded back to
 *    nearest even (the conversions are integer code, so no FPU mode or
 *    device intrinsic can change them);
 *  - fp32/fp64: one IEEE operation, round to nearest, subnormals kept (no
 *    flush to zero, no FMA contraction: nvcc runs with -fmad=false and
 *    without fast math);
 *  - fp8 (E4M3, E5M2): the same through fp32, rounded back to nearest
 *    even with saturation (below);
 *  - AVG: SUM steps, then one correctly rounded division by nranks (fp32
 *    for the 16- and 8-bit types).
 * What may differ between a CPU and a GPU is only the payload of a NaN that
 * fp32/fp64 arithmetic produced (x86 keeps the first operand's, a GPU gives
 * the canonical one), as between the module's own SIMD variants.
 *
 * No kernel header, no libc: the module includes kcoll_plain.h first.
 */
#ifndef KCOLL_REDOP_H
#define KCOLL_REDOP_H

#if !defined(__KERNEL__)
#include <stdint.h>
#endif

#if defined(__CUDACC__)
#define KCOLL_HD static inline __host__ __device__
#else
#define KCOLL_HD static inline
#endif

/* The scalar operations; callers pass unsigned types for integer SUM/PROD. */
#define KCOLL_RED_SUM(T, a, b)	((T)((a) + (b)))
#define KCOLL_RED_PROD(T, a, b)	((T)((a) * (b)))
#define KCOLL_RED_MIN(T, a, b)	(((a) < (b) || (a) != (a)) ? (a) : (b))
#define KCOLL_RED_MAX(T, a, b)	(((a) > (b) || (a) != (a)) ? (a) : (b))

union kcoll_f32bits {
	float f;
	uint32_t u;
};

KCOLL_HD float kcoll_u2f(uint32_t u)
{
	union kcoll_f32bits x;

	x.u = u;
	return x.f;
}

KCOLL_HD uint32_t kcoll_f2u(float f)
{
	union kcoll_f32bits x;

	x.f = f;
	return x.u;
}

/* bf16 -> fp32: exact. */
KCOLL_HD float kcoll_bf2f(uint16_t h)
{
	return kcoll_u2f((uint32_t)h << 16);
}

/* fp32 -> bf16, round to nearest even; a NaN stays a (quiet) NaN. */
KCOLL_HD uint16_t kcoll_f2bf(float f)
{
	uint32_t u = kcoll_f2u(f);

	if ((u & 0x7fffffffU) > 0x7f800000U)
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fffU + ((u >> 16) & 1)) >> 16);
}

/* fp16 -> fp32: exact, subnormals included; a NaN comes out quiet. */
KCOLL_HD float kcoll_h2f(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f;
	uint32_t m = h & 0x3ff;

	if (e == 0x1f)
		return kcoll_u2f(sign | 0x7f800000U | (m << 13) |
				 (m ? 0x400000U : 0));
	if (e == 0) {
		if (!m)
			return kcoll_u2f(sign);
		/* subnormal m * 2^-24: normalize */
		e = 1;
		while (!(m & 0x400)) {
			m <<= 1;
			e--;
		}
		m &= 0x3ff;
	}
	return kcoll_u2f(sign | ((e + 112) << 23) | (m << 13));
}

/* fp32 -> fp16, round to nearest even, as F16C with imm 0. */
KCOLL_HD uint16_t kcoll_f2h(float f)
{
	uint32_t u = kcoll_f2u(f);
	uint32_t sign = (u >> 16) & 0x8000;
	uint32_t a = u & 0x7fffffffU;
	uint32_t r, rem, halfw, exp, mant, shift;

	if (a > 0x7f800000U)			/* NaN: keep top payload bits */
		return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
	if (a >= 0x477ff000U)			/* >= 65520: rounds to inf */
		return (uint16_t)(sign | 0x7c00);
	if (a >= 0x38800000U) {			/* normal half */
		r = (a - 0x38000000U) >> 13;
		rem = a & 0x1fff;
		if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	/* subnormal half or zero: value in units of 2^-24 */
	exp = a >> 23;
	mant = (a & 0x7fffff) | 0x800000;
	shift = 126 - exp;			/* >= 14 here */
	if (shift > 24)
		return (uint16_t)sign;
	r = mant >> shift;
	rem = mant & ((1U << shift) - 1);
	halfw = 1U << (shift - 1);
	if (rem > halfw || (rem == halfw && (r & 1)))
		r++;
	return (uint16_t)(sign | r);
}

/*
 * fp8, the two OCP 8-bit formats (OFP8 1.0):
 *  E4M3: bias 7, no infinities, NaN only S.1111.111, largest 448;
 *  E5M2: bias 15, IEEE-like, infinities S.11111.00, largest 57344.
 * Widening to fp32 is exact (subnormals included; a NaN comes out quiet,
 * its sign kept). Narrowing rounds to nearest even and saturates, OCP's
 * saturation mode (NVIDIA's __NV_SATFINITE): a magnitude at or above the
 * largest finite value, an infinity included, becomes that value with its
 * sign; every NaN becomes 0x7f. So an fp8 reduction step never makes an
 * infinity or a NaN out of finite inputs.
 */
KCOLL_HD float kcoll_fp8_to_f(uint8_t v, unsigned int mbits,
			      unsigned int bias, int has_inf)
{
	uint32_t sign = (uint32_t)(v & 0x80) << 24;
	uint32_t mmask = (1U << mbits) - 1;
	uint32_t e = (uint32_t)(v & 0x7f) >> mbits;
	uint32_t m = v & mmask;

	if (e == (0x7fU >> mbits) && (has_inf || m == mmask)) {
		if (has_inf && !m)
			return kcoll_u2f(sign | 0x7f800000U);
		return kcoll_u2f(sign | 0x7fc00000U);
	}
	if (e == 0) {
		if (!m)
			return kcoll_u2f(sign);
		/* subnormal: normalize (e wraps below 0, as in kcoll_h2f) */
		e = 1;
		while (!(m & (1U << mbits))) {
			m <<= 1;
			e--;
		}
		m &= mmask;
	}
	return kcoll_u2f(sign | ((e + 127 - bias) << 23) |
			 (m << (23 - mbits)));
}

/* @maxbits: the fp32 bits of the largest finite value, @maxcode its code. */
KCOLL_HD uint8_t kcoll_f_to_fp8(float f, unsigned int mbits,
				unsigned int bias, uint32_t maxbits,
				uint8_t maxcode)
{
	uint32_t u = kcoll_f2u(f);
	uint32_t sign = (u >> 24) & 0x80;
	uint32_t a = u & 0x7fffffffU;
	uint32_t r, rem, halfw, exp, mant, shift;

	if (a > 0x7f800000U)			/* NaN */
		return 0x7f;
	if (a >= maxbits)			/* saturate, infinities too */
		return (uint8_t)(sign | maxcode);
	if (a >= (128 - bias) << 23) {		/* normal: 2^(1 - bias) up */
		r = (a - ((127 - bias) << 23)) >> (23 - mbits);
		rem = a & ((1U << (23 - mbits)) - 1);
		halfw = 1U << (22 - mbits);
		if (rem > halfw || (rem == halfw && (r & 1)))
			r++;
		return (uint8_t)(sign | r);
	}
	/* subnormal or zero: in units of 2^(1 - bias - mbits) */
	exp = a >> 23;
	mant = (a & 0x7fffff) | 0x800000;
	shift = 151 - bias - mbits - exp;
	if (shift > 24)				/* below half a unit */
		return (uint8_t)sign;
	r = mant >> shift;
	rem = mant & ((1U << shift) - 1);
	halfw = 1U << (shift - 1);
	if (rem > halfw || (rem == halfw && (r & 1)))
		r++;
	return (uint8_t)(sign | r);
}

KCOLL_HD float kcoll_e4m3_2f(uint8_t v)
{
	return kcoll_fp8_to_f(v, 3, 7, 0);
}

KCOLL_HD uint8_t kcoll_f2e4m3(float f)
{
	return kcoll_f_to_fp8(f, 3, 7, 0x43e00000U, 0x7e);	/* 448 */
}

KCOLL_HD float kcoll_e5m2_2f(uint8_t v)
{
	return kcoll_fp8_to_f(v, 2, 15, 1);
}

KCOLL_HD uint8_t kcoll_f2e5m2(float f)
{
	return kcoll_f_to_fp8(f, 2, 15, 0x47600000U, 0x7b);	/* 57344 */
}

#endif /* KCOLL_REDOP_H */
