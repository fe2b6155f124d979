// SPDX-License-Identifier: MIT
/*
 * libcoll and CUDA, at run time only: nothing links CUDA. The driver
 * library (libcuda.so.1) is opened with dlopen() the first time a buffer
 * might be GPU memory; without it, every pointer is host memory. With it,
 * a pointer the driver calls device memory is registered through its
 * dma-buf (cuMemGetHandleForAddressRange), which the kernel imports for
 * the NIC (GPUDirect RDMA), never touching it with the CPU.
 *
 * Stream-ordered collectives (comm.c) also need the stream memory
 * operations (cuStreamWaitValue64/WriteValue64), host memory mapped for
 * the device (the doorbell page), and kcoll's reduction kernels: the
 * fatbin libcoll embeds (kernels/, libcoll/fatbin.S), loaded into the
 * current context on first use.
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
#include "kcoll_kernels.h"

#define CUDA_SUCCESS				0
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE	2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL	9
#define CU_POINTER_ATTRIBUTE_BUFFER_ID		7
#define CU_MEMORYTYPE_DEVICE			2
#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED	124
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD	1
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES 98
#define CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING 118
#define CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS 122
#define CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER 100
#define CU_MEMHOSTREGISTER_DEVICEMAP		0x02
#define CU_STREAM_NON_BLOCKING			0x1
#define CU_STREAM_WAIT_VALUE_GEQ		0x0
#define CU_STREAM_WAIT_VALUE_FLUSH		(1u << 30)
#define CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712

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
	/* stream-ordered collectives: optional, checked when first used */
	cu_result (*ctx_current)(void **);
	cu_result (*ctx_device)(int *);
	cu_result (*host_register)(void *, size_t, unsigned int);
	cu_result (*host_unregister)(void *);
	cu_result (*host_dptr)(cu_deviceptr *, void *, unsigned int);
	cu_result (*mem_alloc)(cu_deviceptr *, size_t);
	cu_result (*mem_free)(cu_deviceptr);
	cu_result (*module_load)(void **, const void *);
	cu_result (*module_fn)(void **, void *, const char *);
	cu_result (*module_unload)(void *);
	cu_result (*launch)(void *, unsigned int, unsigned int, unsigned int,
			    unsigned int, unsigned int, unsigned int,
			    unsigned int, void *, void **, void **);
	cu_result (*wait64)(void *, cu_deviceptr, uint64_t, unsigned int);
	cu_result (*write64)(void *, cu_deviceptr, uint64_t, unsigned int);
	cu_result (*stream_create)(void **, unsigned int);
	cu_result (*stream_sync)(void *);
	cu_result (*stream_destroy)(void *);
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
	/* Stream-ordered collectives: without these, only they fail. */
	cu.ctx_current = (cu_result (*)(void **))dlsym(cu.lib, "cuCtxGetCurrent");
	cu.ctx_device = (cu_result (*)(int *))dlsym(cu.lib, "cuCtxGetDevice");
	cu.host_register = (cu_result (*)(void *, size_t, unsigned int))
			   dlsym(cu.lib, "cuMemHostRegister_v2");
	cu.host_unregister = (cu_result (*)(void *))
			     dlsym(cu.lib, "cuMemHostUnregister");
	cu.host_dptr = (cu_result (*)(cu_deviceptr *, void *, unsigned int))
		       dlsym(cu.lib, "cuMemHostGetDevicePointer_v2");
	cu.mem_alloc = (cu_result (*)(cu_deviceptr *, size_t))
		       dlsym(cu.lib, "cuMemAlloc_v2");
	cu.mem_free = (cu_result (*)(cu_deviceptr))dlsym(cu.lib, "cuMemFree_v2");
	cu.module_load = (cu_result (*)(void **, const void *))
			 dlsym(cu.lib, "cuModuleLoadData");
	cu.module_fn = (cu_result (*)(void **, void *, const char *))
		       dlsym(cu.lib, "cuModuleGetFunction");
	cu.module_unload = (cu_result (*)(void *))
			   dlsym(cu.lib, "cuModuleUnload");
	cu.launch = (cu_result (*)(void *, unsigned int, unsigned int,
				   unsigned int, unsigned int, unsigned int,
				   unsigned int, unsigned int, void *, void **,
				   void **))dlsym(cu.lib, "cuLaunchKernel");
	cu.wait64 = (cu_result (*)(void *, cu_deviceptr, uint64_t, unsigned int))
		    dlsym(cu.lib, "cuStreamWaitValue64_v2");
	if (!cu.wait64)
		cu.wait64 = (cu_result (*)(void *, cu_deviceptr, uint64_t,
					   unsigned int))
			    dlsym(cu.lib, "cuStreamWaitValue64");
	cu.write64 = (cu_result (*)(void *, cu_deviceptr, uint64_t, unsigned int))
		     dlsym(cu.lib, "cuStreamWriteValue64_v2");
	if (!cu.write64)
		cu.write64 = (cu_result (*)(void *, cu_deviceptr, uint64_t,
					    unsigned int))
			     dlsym(cu.lib, "cuStreamWriteValue64");
	cu.stream_create = (cu_result (*)(void **, unsigned int))
			   dlsym(cu.lib, "cuStreamCreate");
	cu.stream_sync = (cu_result (*)(void *))dlsym(cu.lib, "cuStreamSynchronize");
	cu.stream_destroy = (cu_result (*)(void *))dlsym(cu.lib, "cuStreamDestroy_v2");
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

bool coll_cuda_reachable(const void *p)
{
	unsigned int type = 0;

	return !coll_cuda_unavailable() &&
	       cu.ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
			   (cu_deviceptr)(uintptr_t)p) == CUDA_SUCCESS;
}

uint64_t coll_cuda_buffer_id(const void *p)
{
	unsigned long long id = 0;

	if (coll_cuda_unavailable() ||
	    cu.ptr_attr(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
			(cu_deviceptr)(uintptr_t)p) != CUDA_SUCCESS)
		return 0;
	return id;
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

/* ------------------------------------------------------------------ */
/* Stream-ordered collectives                                          */
/* ------------------------------------------------------------------ */

/* The embedded kernels (libcoll/fatbin.S). */
extern const unsigned char coll_kernels_fatbin[] COLL_HIDDEN;
extern const unsigned char coll_kernels_fatbin_end[] COLL_HIDDEN;

static const struct {
	const char *name;
	unsigned int dtype, redop;	/* redop AVG: the scale kernel */
} coll_kernels[] = {
#define KCOLL_KENTRY(n, d, r)	{ n, d, r },
	KCOLL_KERNELS
#undef KCOLL_KENTRY
};
#define COLL_NKERNELS	(sizeof(coll_kernels) / sizeof(coll_kernels[0]))

/* The kernels loaded into one context (a process uses few). */
#define COLL_CUDA_CTXS	8
static struct {
	void *ctx;
	void *module;
	void *fn[COLL_NKERNELS];
	int sms;
} cu_ctx[COLL_CUDA_CTXS];
static pthread_mutex_t cu_ctx_lock = PTHREAD_MUTEX_INITIALIZER;

int coll_cuda_stream_ready(void)
{
	int dev = 0, ok = 0;

	if (coll_cuda_unavailable())
		return coll_err(-ENOTSUP, "stream-ordered collectives need "
				"libcuda.so.1: %s", cu.why);
	if (&coll_kernels_fatbin_end[0] == &coll_kernels_fatbin[0])
		return coll_err(-ENOTSUP, "this libcoll was built without nvcc: "
				"it has no CUDA reduction kernels (rebuild with "
				"the CUDA toolkit installed, see kernels/README.md)");
	if (!cu.ctx_current || !cu.ctx_device || !cu.host_register ||
	    !cu.host_unregister || !cu.host_dptr || !cu.mem_alloc ||
	    !cu.mem_free || !cu.module_load || !cu.module_fn || !cu.launch ||
	    !cu.wait64 || !cu.write64 || !cu.stream_create ||
	    !cu.stream_sync || !cu.stream_destroy)
		return coll_err(-ENOTSUP, "libcuda.so.1 lacks the stream memory "
				"operations or kernel launches (a CUDA driver "
				"older than 11.7?)");
	if (cu.ctx_device(&dev) != CUDA_SUCCESS)
		return coll_err(-ENOTSUP, "no current CUDA context: call "
				"cudaSetDevice() (or cuCtxSetCurrent) first");
	if (cu.dev_attr(&ok, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
			dev) != CUDA_SUCCESS || !ok)
		return coll_err(-ENOTSUP, "GPU %d has no 64-bit stream memory "
				"operations (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_"
				"STREAM_MEM_OPS; the NVIDIA driver module option "
				"NVreg_EnableStreamMemOPs=1 enables them)", dev);
	return 0;
}

/* The loaded kernels of the current context, or NULL (reported). */
static int cuda_kernels(int *slot)
{
	void *ctx = NULL;
	int i, free_slot = -1, dev = 0;
	unsigned int k;
	cu_result r;

	if (cu.ctx_current(&ctx) != CUDA_SUCCESS || !ctx)
		return coll_err(-ENOTSUP, "no current CUDA context");
	pthread_mutex_lock(&cu_ctx_lock);
	for (i = 0; i < COLL_CUDA_CTXS; i++) {
		if (cu_ctx[i].ctx == ctx) {
			*slot = i;
			pthread_mutex_unlock(&cu_ctx_lock);
			return 0;
		}
		if (!cu_ctx[i].ctx && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0) {
		pthread_mutex_unlock(&cu_ctx_lock);
		return coll_err(-ENOSPC, "more than %d CUDA contexts", COLL_CUDA_CTXS);
	}
	i = free_slot;
	r = cu.module_load(&cu_ctx[i].module, coll_kernels_fatbin);
	if (r != CUDA_SUCCESS) {
		pthread_mutex_unlock(&cu_ctx_lock);
		return coll_err(-ENOTSUP, "cuModuleLoadData of kcoll's kernels "
				"failed: CUresult %d (a GPU older than sm_80 and "
				"a driver that cannot JIT compute_90?)", r);
	}
	for (k = 0; k < COLL_NKERNELS; k++) {
		r = cu.module_fn(&cu_ctx[i].fn[k], cu_ctx[i].module,
				 coll_kernels[k].name);
		if (r != CUDA_SUCCESS) {
			/* Not kept: the next call would load it again. */
			if (cu.module_unload)
				cu.module_unload(cu_ctx[i].module);
			cu_ctx[i].module = NULL;
			pthread_mutex_unlock(&cu_ctx_lock);
			return coll_err(-ENOTSUP, "kernel %s missing from kcoll's "
					"fatbin: CUresult %d", coll_kernels[k].name, r);
		}
	}
	cu_ctx[i].sms = 1;
	if (!cu.ctx_device(&dev))
		cu.dev_attr(&cu_ctx[i].sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
			    dev);
	cu_ctx[i].ctx = ctx;
	*slot = i;
	pthread_mutex_unlock(&cu_ctx_lock);
	return 0;
}

int coll_cuda_flush_needed(void)
{
	int dev = 0, order = 0, flush = 0;

	if (cu.ctx_device(&dev) != CUDA_SUCCESS)
		return 0;
	/* NCCL's rule: below OWNER, a NIC's writes need a flush before the
	 * GPU's own kernels may read them. */
	if (cu.dev_attr(&order, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING,
			dev) != CUDA_SUCCESS ||
	    order >= CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER)
		return 0;
	if (cu.dev_attr(&flush, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES,
			dev) == CUDA_SUCCESS && flush)
		return 1;
	/* Neither: later work could read what the NIC wrote before it
	 * lands. NCCL then flushes with an RDMA read of its own, which
	 * the module does not do: refused rather than wrong. */
	return coll_err(-ENOTSUP, "this GPU neither orders the NIC's writes "
			"before its own work (GPU_DIRECT_RDMA_WRITES_ORDERING "
			"%d) nor can flush them (CAN_FLUSH_REMOTE_WRITES 0): "
			"stream-ordered operations on it are not supported",
			order);
}

int coll_cuda_host_map(void *p, size_t len, uint64_t *dptr)
{
	cu_deviceptr d = 0;
	cu_result r;

	r = cu.host_register(p, len, CU_MEMHOSTREGISTER_DEVICEMAP);
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
		return coll_err(-ENOTSUP, "cuMemHostRegister of the doorbell page "
				"failed: CUresult %d", r);
	r = cu.host_dptr(&d, p, 0);
	if (r != CUDA_SUCCESS) {
		cu.host_unregister(p);
		return coll_err(-ENOTSUP, "cuMemHostGetDevicePointer of the "
				"doorbell page failed: CUresult %d", r);
	}
	*dptr = d;
	return 0;
}


int coll_cuda_alloc(size_t len, uint64_t *dptr)
{
	cu_deviceptr d = 0;
	cu_result r = cu.mem_alloc(&d, len);

	if (r != CUDA_SUCCESS)
		return coll_err(-ENOMEM, "cuMemAlloc of %zu bytes of scratch "
				"failed: CUresult %d", len, r);
	*dptr = d;
	return 0;
}

void coll_cuda_free(uint64_t dptr)
{
	cu.mem_free(dptr);
}

int coll_cuda_wait64(void *stream, uint64_t dptr, uint64_t v, bool flush)
{
	cu_result r = cu.wait64(stream, dptr, v, CU_STREAM_WAIT_VALUE_GEQ |
				(flush ? CU_STREAM_WAIT_VALUE_FLUSH : 0));

	return r == CUDA_SUCCESS ? 0 :
	       coll_err(-EIO, "cuStreamWaitValue64 failed: CUresult %d", r);
}

int coll_cuda_write64(void *stream, uint64_t dptr, uint64_t v)
{
	cu_result r = cu.write64(stream, dptr, v, 0);

	return r == CUDA_SUCCESS ? 0 :
	       coll_err(-EIO, "cuStreamWriteValue64 failed: CUresult %d", r);
}

/* Threads for @bytes: one 16-byte vector each, SMs x 16 blocks at most. */
static unsigned int cuda_grid(int slot, uint64_t bytes)
{
	uint64_t blocks = (bytes / 16 + KCOLL_KERNEL_BLOCK) / KCOLL_KERNEL_BLOCK;
	uint64_t most = (uint64_t)(cu_ctx[slot].sms > 0 ? cu_ctx[slot].sms : 1) * 16;

	return (unsigned int)(blocks < 1 ? 1 : blocks > most ? most : blocks);
}

static int cuda_find(unsigned int dtype, unsigned int redop)
{
	unsigned int k;

	for (k = 0; k < COLL_NKERNELS; k++)
		if (coll_kernels[k].dtype == dtype &&
		    coll_kernels[k].redop == redop)
			return (int)k;
	return -1;
}

int coll_cuda_reduce(void *stream, unsigned int dtype, unsigned int redop,
		     uint64_t dst, uint64_t a, uint64_t b, uint64_t n,
		     uint64_t esize, uint64_t cancel, uint64_t ticket)
{
	void *args[] = { &dst, &a, &b, &n, &cancel, &ticket };
	int slot, k, ret;
	cu_result r;

	ret = cuda_kernels(&slot);
	if (ret)
		return ret;
	k = cuda_find(dtype, redop == KCOLL_REDOP_AVG ? KCOLL_REDOP_SUM : redop);
	if (k < 0)
		return coll_err(-EINVAL, "no kernel for dtype %u op %u", dtype,
				redop);
	r = cu.launch(cu_ctx[slot].fn[k], cuda_grid(slot, n * esize), 1, 1,
		      KCOLL_KERNEL_BLOCK, 1, 1, 0, stream, args, NULL);
	return r == CUDA_SUCCESS ? 0 :
	       coll_err(-EIO, "cuLaunchKernel(%s) failed: CUresult %d",
			coll_kernels[k].name, r);
}

int coll_cuda_scale(void *stream, unsigned int dtype, uint64_t dst,
		    uint64_t n, uint64_t esize, uint32_t nranks,
		    uint64_t cancel, uint64_t ticket)
{
	void *args[] = { &dst, &n, &nranks, &cancel, &ticket };
	int slot, k, ret;
	cu_result r;

	ret = cuda_kernels(&slot);
	if (ret)
		return ret;
	k = cuda_find(dtype, KCOLL_REDOP_AVG);
	if (k < 0)
		return coll_err(-EINVAL, "no AVG kernel for dtype %u", dtype);
	r = cu.launch(cu_ctx[slot].fn[k], cuda_grid(slot, n * esize), 1, 1,
		      KCOLL_KERNEL_BLOCK, 1, 1, 0, stream, args, NULL);
	return r == CUDA_SUCCESS ? 0 :
	       coll_err(-EIO, "cuLaunchKernel(%s) failed: CUresult %d",
			coll_kernels[k].name, r);
}

int coll_cuda_stream_create(void **stream)
{
	cu_result r = cu.stream_create(stream, CU_STREAM_NON_BLOCKING);

	return r == CUDA_SUCCESS ? 0 :
	       coll_err(-ENOTSUP, "cuStreamCreate failed: CUresult %d", r);
}

int coll_cuda_stream_sync(void *stream)
{
	cu_result r = cu.stream_sync(stream);

	return r == CUDA_SUCCESS ? 0 :
	       coll_err(-EIO, "cuStreamSynchronize failed: CUresult %d", r);
}

void coll_cuda_stream_destroy(void *stream)
{
	cu.stream_destroy(stream);
}
