// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The CUDA reduction kernels built for the host by g++: the same template
 * bodies (kcoll_reduce_dev.h) the GPU runs, one "thread" after another.
 * For the bit-exactness unit test and for the stand-in CUDA driver's
 * "kernel launches" (tests/unit/fake_libcuda.c); never part of libcoll.
 */
#include <string.h>

#include "kcoll_reduce_dev.h"
#include "kcoll_kernels_host.h"

#define KCOLL_KRED(dn, op, DT, RO, F)					\
	static void kh_reduce_##dn##_##op(void *dst, const void *a,	\
					  const void *b, uint64_t n,	\
					  uint64_t nthr)		\
	{								\
		for (uint64_t t = 0; t < nthr; t++)			\
			kr_reduce<F>(dst, a, b, n, t, nthr);		\
	}
#define KCOLL_KSCALE(dn, DT, F)						\
	static void kh_scale_##dn(void *dst, uint64_t n, uint32_t q,	\
				  uint64_t nthr)			\
	{								\
		for (uint64_t t = 0; t < nthr; t++)			\
			kr_scale_all<F>(dst, n, q, t, nthr);		\
	}
#include "kcoll_kernels.def"
KCOLL_KERNELS
#undef KCOLL_KRED
#undef KCOLL_KSCALE

#define KCOLL_KRED(dn, op, DT, RO, F)					\
	{ "kcoll_reduce_" #dn "_" #op, DT, RO, kh_reduce_##dn##_##op, NULL },
#define KCOLL_KSCALE(dn, DT, F)						\
	{ "kcoll_scale_" #dn, DT, KCOLL_REDOP_AVG, NULL, kh_scale_##dn },

extern "C" const struct kcoll_host_kernel kcoll_host_kernels[] = {
	KCOLL_KERNELS
	{ NULL, 0, 0, NULL, NULL }
};

extern "C" const struct kcoll_host_kernel *kcoll_host_kernel(const char *name)
{
	const struct kcoll_host_kernel *k;

	for (k = kcoll_host_kernels; k->name; k++)
		if (!strcmp(k->name, name))
			return k;
	return NULL;
}

extern "C" size_t kcoll_host_esize(unsigned int dtype)
{
	switch (dtype) {
	case KCOLL_DTYPE_INT8: case KCOLL_DTYPE_UINT8:
	case KCOLL_DTYPE_FP8_E4M3: case KCOLL_DTYPE_FP8_E5M2: return 1;
	case KCOLL_DTYPE_FP16: case KCOLL_DTYPE_BF16: return 2;
	case KCOLL_DTYPE_INT32: case KCOLL_DTYPE_UINT32:
	case KCOLL_DTYPE_FP32: return 4;
	case KCOLL_DTYPE_INT64: case KCOLL_DTYPE_UINT64:
	case KCOLL_DTYPE_FP64: return 8;
	}
	return 0;
}

extern "C" bool kcoll_host_is_nan(const void *p, unsigned int dtype)
{
	uint16_t h;
	uint32_t f;
	uint64_t d;

	switch (dtype) {
	case KCOLL_DTYPE_FP8_E4M3:
		return (*(const uint8_t *)p & 0x7f) == 0x7f;
	case KCOLL_DTYPE_FP8_E5M2:
		return (*(const uint8_t *)p & 0x7f) > 0x7c;
	case KCOLL_DTYPE_FP16:
		memcpy(&h, p, 2);
		return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
	case KCOLL_DTYPE_BF16:
		memcpy(&h, p, 2);
		return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
	case KCOLL_DTYPE_FP32:
		memcpy(&f, p, 4);
		return (f & 0x7fffffff) > 0x7f800000;
	case KCOLL_DTYPE_FP64:
		memcpy(&d, p, 8);
		return (d & ~(1ull << 63)) > 0x7ff0000000000000ull;
	}
	return false;
}

extern "C" size_t kcoll_host_count_diff(const void *a, const void *b, size_t n,
					unsigned int dtype, long *first)
{
	const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;
	size_t es = kcoll_host_esize(dtype), i, bad = 0;

	if (first)
		*first = -1;
	for (i = 0; i < n; i++) {
		if (!memcmp(x + i * es, y + i * es, es) ||
		    (kcoll_host_is_nan(x + i * es, dtype) &&
		     kcoll_host_is_nan(y + i * es, dtype)))
			continue;
		if (first && *first < 0)
			*first = (long)i;
		bad++;
	}
	return bad;
}
