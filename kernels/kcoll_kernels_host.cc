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
