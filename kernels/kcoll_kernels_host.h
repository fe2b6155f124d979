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

#ifdef __cplusplus
}
#endif

#endif /* KCOLL_KERNELS_HOST_H */
