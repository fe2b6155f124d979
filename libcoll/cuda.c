// SPDX-License-Identifier: MIT
/*
 * libcoll and CUDA, at run time only: nothing links CUDA. The driver
 * library (libcuda.so.1) is opened with dlopen() the first time a buffer
 * might be GPU memory; without it, every pointer is host memory. With it,
 * a pointer the driver calls device memory is registered through its
 * dma-buf (cuMemGetHandleForAddressRange), which the kernel imports for
 * the NIC (GPUDirect RDMA), never touching it with the CPU.
 *
 * The few driver entry points and constants used are restated here from
 * CUDA's cuda.h (they are the driver's stable ABI): the _v2 names are the
 * 64-bit forms every driver since CUDA 3.2 exports.
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_internal.h"

#define CUDA_SUCCESS				0
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE	2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL	9
#define CU_MEMORYTYPE_DEVICE			2
#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED	124
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD	1

typedef int cu_result;
typedef unsigned long long cu_deviceptr;

static struct {
	pthread_once_t once;
	void *lib;
	char why[160];		/* why it is not there */
	cu_result (*init)(unsigned int);
	cu_result (*ptr_attr)(void *, int, cu_deviceptr);
	cu_result (*addr_range)(cu_deviceptr *, size_t *, cu_deviceptr);
	cu_result (*handle)(void *, cu_deviceptr, size_t, int,
			    unsigned long long);
	cu_result (*dev_attr)(int *, int, int);
} cu = { .once = PTHREAD_ONCE_INIT };

static void *cuda_sym(const char *name)
{
	void *p = dlsym(cu.lib, name);

	if (!p && !cu.why[0])
		snprintf(cu.why, sizeof(cu.why), "libcuda.so.1 has no %s",
			 name);
	return p;
}

static void cuda_load(void)
{
	const char *off = getenv(COLL_ENV_NO_CUDA);
	const char *err;

	if (off && *off && strcmp(off, "0")) {
		snprintf(cu.why, sizeof(cu.why), "%s is set", COLL_ENV_NO_CUDA);
		return;
	}
	cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu.lib) {
		err = dlerror();
		snprintf(cu.why, sizeof(cu.why), "%s",
			 err ? err : "libcuda.so.1 not found");
		return;
	}
	cu.init = (cu_result (*)(unsigned int))cuda_sym("cuInit");
	cu.ptr_attr = (cu_result (*)(void *, int, cu_deviceptr))
		      cuda_sym("cuPointerGetAttribute");
	cu.addr_range = (cu_result (*)(cu_deviceptr *, size_t *, cu_deviceptr))
			cuda_sym("cuMemGetAddressRange_v2");
	cu.handle = (cu_result (*)(void *, cu_deviceptr, size_t, int,
				   unsigned long long))
		    cuda_sym("cuMemGetHandleForAddressRange");
	cu.dev_attr = (cu_result (*)(int *, int, int))
		      cuda_sym("cuDeviceGetAttribute");
	if (!cu.init || !cu.ptr_attr || !cu.addr_range || !cu.handle ||
	    !cu.dev_attr)
		goto out_close;
	if (cu.init(0) != CUDA_SUCCESS) {
		snprintf(cu.why, sizeof(cu.why), "cuInit failed");
		goto out_close;
	}
	return;

out_close:
	dlclose(cu.lib);
	cu.lib = NULL;
}

const char *coll_cuda_unavailable(void)
{
	pthread_once(&cu.once, cuda_load);
	return cu.lib ? NULL : cu.why;
}

int coll_cuda_range(const void *p, uint64_t *base, uint64_t *size)
{
	cu_deviceptr b = 0;
	unsigned int type = 0;
	size_t sz = 0;

	if (coll_cuda_unavailable() || !p)
		return 0;
	/* Host memory, or memory CUDA does not know: not ours. */
	if (cu.ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
			(cu_deviceptr)(uintptr_t)p) != CUDA_SUCCESS ||
	    type != CU_MEMORYTYPE_DEVICE)
		return 0;
	if (cu.addr_range(&b, &sz, (cu_deviceptr)(uintptr_t)p) != CUDA_SUCCESS)
		return coll_err(-EINVAL, "cuMemGetAddressRange of GPU pointer %p failed",
				p);
	*base = b;
	*size = sz;
	return 1;
}

int coll_cuda_dmabuf(const void *p, uint64_t base, uint64_t size, int *fd)
{
	int dev = 0, ok = 0;
	cu_result r;

	if (coll_cuda_unavailable())
		return coll_err(-ENOTSUP, "GPU memory needs libcuda.so.1: %s",
				cu.why);
	if (cu.ptr_attr(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
			(cu_deviceptr)(uintptr_t)p) != CUDA_SUCCESS ||
	    cu.dev_attr(&ok, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) !=
	    CUDA_SUCCESS || !ok)
		return coll_err(-ENOTSUP, "GPU %d cannot export its memory as a dma-buf "
				"(needs NVIDIA's open kernel modules and a driver "
				"with CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)", dev);
	r = cu.handle(fd, (cu_deviceptr)base, size,
		      CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	if (r != CUDA_SUCCESS)
		return coll_err(-ENOTSUP, "cuMemGetHandleForAddressRange(%#llx, %llu) "
				"failed: CUresult %d", (unsigned long long)base,
				(unsigned long long)size, r);
	return 0;
}
