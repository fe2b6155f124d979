/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The host build of the CUDA reduction kernels (kcoll_kernels_host.cc):
 * each entry runs its kernel's body for "threads" 0 .. nthr-1 in turn,
 * exactly the arithmetic and memory pattern of a grid of nthr threads.
 */
#ifndef KCOLL_KERNELS_HOST_H
#define KCOLL_KERNELS_HOST_H

#include <stdint.h>
#include <stddef.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif
#include <linux/types.h>
#include "../uapi/linux/kcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

struct kcoll_host_kernel {
	const char *name;
	unsigned int dtype, redop;	/* redop AVG: a scale kernel */
	/* dst = a OP b (a may be dst) */
	void (*reduce)(void *dst, const void *a, const void *b, uint64_t n,
		       uint64_t nthr);
	void (*scale)(void *dst, uint64_t n, uint32_t nranks, uint64_t nthr);
};

/* Every kernel, ending with a NULL name. */
extern const struct kcoll_host_kernel kcoll_host_kernels[];
const struct kcoll_host_kernel *kcoll_host_kernel(const char *name);

/* Element size of @dtype (0: none); is the element at @p a NaN? */
size_t kcoll_host_esize(unsigned int dtype);
bool kcoll_host_is_nan(const void *p, unsigned int dtype);
/*
 * Elements of @a and @b that differ (two NaNs count as equal: their
 * payloads are not part of the contract, see kmod/kcoll_redop.h); the
 * first such index in *@first (-1: none) when @first is not NULL.
 */
size_t kcoll_host_count_diff(const void *a, const void *b, size_t n,
			     unsigned int dtype, long *first);

#ifdef __cplusplus
}
#endif

#endif /* KCOLL_KERNELS_HOST_H */
