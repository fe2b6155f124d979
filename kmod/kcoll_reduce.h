/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * kcoll CPU reductions: dst[i] = dst[i] OP src[i], i = 0 .. n-1.
 *
 * Plain interface (kcoll_plain.h only): the same sources build into the
 * module and into userspace (unit tests, benchmark).
 *
 * Semantics, identical in every implementation (bit for bit, except the
 * payload of a NaN result, which may differ):
 *  - the reduction is elementwise and in place; element i only ever
 *    combines dst[i] with src[i], so the result does not depend on the
 *    implementation, the vector width or the alignment (deterministic);
 *  - integer SUM and PROD wrap modulo 2^bits (also for signed types);
 *  - MIN/MAX: min(a, b) = (a < b || a is NaN) ? a : b, and max alike, with
 *    a = dst[i], b = src[i]: a NaN in either operand gives a NaN;
 *  - fp16 and bf16 are widened to fp32 exactly, combined in fp32, and
 *    rounded back to nearest-even (overflow gives infinity, NaN stays NaN);
 *  - AVG (floating types only) reduces as SUM; kcoll_reduce_avg_finish()
 *    then divides every element by nranks (fp32 division for 16-bit types).
 *
 * dst and src may be unaligned; they must either be equal or not overlap.
 *
 * Kernel use: every implementation (the scalar one too) is compiled with
 * SSE enabled, so callers must bracket the calls with kernel_fpu_begin()/
 * kernel_fpu_end(), and pick SSE2/AVX2/AVX-512 only when the CPU has them
 * (AVX2 needs X86_FEATURE_AVX2 and X86_FEATURE_F16C; AVX-512 needs
 * X86_FEATURE_AVX512F, AVX512BW, AVX512VL and F16C, with the ZMM state
 * enabled). kcoll_reduce_get() does not check the CPU.
 */
#ifndef KCOLL_REDUCE_H
#define KCOLL_REDUCE_H

#include "kcoll_plain.h"

enum kcoll_reduce_impl {
	KCOLL_REDUCE_SCALAR,
	KCOLL_REDUCE_SSE2,	/* x86-64 only */
	KCOLL_REDUCE_AVX2,	/* x86-64 only; needs AVX2 and F16C */
	KCOLL_REDUCE_AVX512,	/* x86-64 only; AVX-512F/BW/VL and F16C */
	KCOLL_REDUCE_NR
};

typedef void (*kcoll_reduce_fn)(void *dst, const void *src, size_t n);
typedef void (*kcoll_reduce_finish_fn)(void *dst, size_t n, u32 nranks);

/* One implementation: NULL entries are invalid (dtype, redop) pairs. */
struct kcoll_reduce_table {
	const char *name;
	kcoll_reduce_fn fn[KCOLL_DTYPE_LAST][KCOLL_REDOP_LAST];
	kcoll_reduce_finish_fn avg_finish[KCOLL_DTYPE_LAST];
};

extern const struct kcoll_reduce_table kcoll_reduce_scalar_table;
#if defined(__x86_64__)
extern const struct kcoll_reduce_table kcoll_reduce_sse2_table;
extern const struct kcoll_reduce_table kcoll_reduce_avx2_table;
extern const struct kcoll_reduce_table kcoll_reduce_avx512_table;
#endif

/*
 * The reduction of @dtype with @redop in @impl, or NULL when the pair is
 * invalid (NONE, out of range, AVG on an integer type) or @impl does not
 * exist on this architecture.
 */
kcoll_reduce_fn kcoll_reduce_get(enum kcoll_reduce_impl impl,
				 unsigned int dtype, unsigned int redop);

/*
 * The AVG finishing step: dst[i] = dst[i] / nranks. Returns 0, or -EINVAL
 * for a non-floating @dtype, an unknown @impl or nranks == 0.
 */
int kcoll_reduce_avg_finish(enum kcoll_reduce_impl impl, void *dst, size_t n,
			    unsigned int dtype, u32 nranks);

/* Element size in bytes, 0 for NONE and unknown types. */
size_t kcoll_dtype_size(unsigned int dtype);

/* "scalar", "sse2", "avx2", "avx512", or "?" */
const char *kcoll_reduce_impl_name(enum kcoll_reduce_impl impl);

#ifdef __KERNEL__
/* kcoll_reduce.c: the module's choice of implementation */
int kcoll_reduce_init(void);
u32 kcoll_reduce_gamma_ps(void);	/* fp32 sum, measured at load */
struct dentry;
void kcoll_reduce_debugfs_init(struct dentry *dir);
const char *kcoll_reduce_impl_active(void);
/* Callers bracket these with kernel_fpu_begin()/kernel_fpu_end(). */
void (*kcoll_reduce_active(unsigned int dtype, unsigned int redop))
	(void *dst, const void *src, size_t n);
int kcoll_reduce_active_avg(void *dst, size_t n, unsigned int dtype,
			    u32 nranks);
#endif

#endif /* KCOLL_REDUCE_H */
