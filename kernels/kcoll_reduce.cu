// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll's CUDA reduction kernels: every (dtype, op) of kcoll_kernels.def as
 * a stable extern "C" entry that libcoll finds by name in the fatbin it
 * embeds. Grid-stride loops, so any grid covers any n.
 *
 *   kcoll_reduce_<dtype>_<op>(dst, a, b, n, cancel, ticket):
 *	dst[i] = a[i] OP b[i]		(a may be dst)
 *   kcoll_scale_<dtype>(dst, n, nranks, cancel, ticket):
 *	dst[i] = dst[i] / nranks
 *
 * @cancel, when not NULL, is the cancel word of the communicator's doorbell
 * page (host memory mapped for the device, uapi struct kcoll_gpu_bell):
 * once it reaches @ticket (the operation's start value) the operation
 * failed, and a kernel its released stream still runs leaves memory alone.
 */
#include "kcoll_reduce_dev.h"

#define KR_TID	((uint64_t)blockIdx.x * blockDim.x + threadIdx.x)
#define KR_NTHR	((uint64_t)gridDim.x * blockDim.x)

#define KCOLL_KRED(dn, op, DT, RO, F)					\
	extern "C" __global__ void __launch_bounds__(256)		\
	kcoll_reduce_##dn##_##op(void *dst, const void *a, const void *b, \
				 unsigned long long n,			\
				 const volatile unsigned long long *cancel, \
				 unsigned long long ticket)		\
	{								\
		if (cancel && *cancel >= ticket)			\
			return;						\
		kr_reduce<F>(dst, a, b, n, KR_TID, KR_NTHR);		\
	}
#define KCOLL_KSCALE(dn, DT, F)						\
	extern "C" __global__ void __launch_bounds__(256)		\
	kcoll_scale_##dn(void *dst, unsigned long long n,		\
			 unsigned int nranks,				\
			 const volatile unsigned long long *cancel,	\
			 unsigned long long ticket)			\
	{								\
		if (cancel && *cancel >= ticket)			\
			return;						\
		kr_scale_all<F>(dst, n, nranks, KR_TID, KR_NTHR);	\
	}

#include "kcoll_kernels.def"
KCOLL_KERNELS
