// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll's CUDA reduction kernels: every (dtype, op) of kcoll_kernels.def as
 * a stable extern "C" entry that libcoll finds by name in the fatbin it
 * embeds. Grid-stride loops, so any grid covers any n.
 *
 *   kcoll_reduce_<dtype>_<op>(dst, src, n, abort): dst[i] = dst[i] OP src[i]
 *   kcoll_scale_<dtype>(dst, n, nranks, abort):    dst[i] = dst[i] / nranks
 *
 * @abort, when not NULL, is the communicator's abort word (in host memory
 * mapped for the device): a kernel that a released stream runs after an
 * abort leaves the buffers untouched.
 */
#include "kcoll_reduce_dev.h"

#define KR_TID	((uint64_t)blockIdx.x * blockDim.x + threadIdx.x)
#define KR_NTHR	((uint64_t)gridDim.x * blockDim.x)

#define KCOLL_KRED(dn, op, DT, RO, F)					\
	extern "C" __global__ void __launch_bounds__(256)		\
	kcoll_reduce_##dn##_##op(void *dst, const void *src,		\
				 unsigned long long n,			\
				 const volatile unsigned long long *abort) \
	{								\
		if (abort && *abort)					\
			return;						\
		kr_reduce<F>(dst, src, n, KR_TID, KR_NTHR);		\
	}
#define KCOLL_KSCALE(dn, DT, F)						\
	extern "C" __global__ void __launch_bounds__(256)		\
	kcoll_scale_##dn(void *dst, unsigned long long n,		\
			 unsigned int nranks,				\
			 const volatile unsigned long long *abort)	\
	{								\
		if (abort && *abort)					\
			return;						\
		kr_scale_all<F>(dst, n, nranks, KR_TID, KR_NTHR);	\
	}

#include "kcoll_kernels.def"
KCOLL_KERNELS
