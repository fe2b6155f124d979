/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver entry points kcoll's test and benchmark programs use
 * (kcoll-colltest -S, kcoll-perf -G, kcoll-gpucheck), reached with dlopen()
 * like libcoll does: nothing links CUDA. The names and constants are the
 * driver's stable ABI (cuda.h). In the VM tests the library found is the
 * stand-in (tests/unit/fake_libcuda.c), which says so through
 * fakecuda_is_standin(); cm_standin is then true and the programs label
 * their output with it.
 */
#ifndef KCOLL_CUDA_MIN_H
#define KCOLL_CUDA_MIN_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef int cm_result;
typedef unsigned long long cm_ptr;

static struct {
	void *lib;
	int standin;
	cm_result (*init)(unsigned int);
	cm_result (*device_get)(int *, int);
	cm_result (*ctx_retain)(void **, int);
	cm_result (*ctx_set)(void *);
	cm_result (*alloc)(cm_ptr *, size_t);
	cm_result (*free)(cm_ptr);
	cm_result (*htod)(cm_ptr, const void *, size_t);
	cm_result (*dtoh)(void *, cm_ptr, size_t);
	cm_result (*stream_create)(void **, unsigned int);
	cm_result (*stream_sync)(void *);
	cm_result (*stream_destroy)(void *);
	cm_result (*stream_query)(void *);
	/* kcoll-gpucheck only: optional in cm_open() */
	cm_result (*dev_attr)(int *, int, int);
	cm_result (*dev_name)(char *, int, int);
	cm_result (*module_load)(void **, const void *);
	cm_result (*module_fn)(void **, void *, const char *);
	cm_result (*launch)(void *, unsigned int, unsigned int, unsigned int,
			    unsigned int, unsigned int, unsigned int,
			    unsigned int, void *, void **, void **);
	cm_result (*host_register)(void *, size_t, unsigned int);
	cm_result (*host_dptr)(cm_ptr *, void *, unsigned int);
	cm_result (*wait64)(void *, cm_ptr, uint64_t, unsigned int);
	cm_result (*write64)(void *, cm_ptr, uint64_t, unsigned int);
	cm_result (*dtod)(cm_ptr, cm_ptr, size_t);
	cm_result (*addr_range)(cm_ptr *, size_t *, cm_ptr);
	cm_result (*dmabuf)(void *, cm_ptr, size_t, int, unsigned long long);
} cm;

/* 0 with a current context on device 0, or -1 with @why filled in. */
static inline int cm_open(char *why, size_t len)
{
	int (*standin)(void);
	void *ctx = NULL;
	int dev = 0;

	cm.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cm.lib) {
		snprintf(why, len, "no libcuda.so.1: %s", dlerror());
		return -1;
	}
#define CM_SYM(f, n)							\
	do {								\
		*(void **)&cm.f = dlsym(cm.lib, n);			\
		if (!cm.f) {						\
			snprintf(why, len, "libcuda.so.1 has no %s", n); \
			return -1;					\
		}							\
	} while (0)
	CM_SYM(init, "cuInit");
	CM_SYM(device_get, "cuDeviceGet");
	CM_SYM(ctx_retain, "cuDevicePrimaryCtxRetain");
	CM_SYM(ctx_set, "cuCtxSetCurrent");
	CM_SYM(alloc, "cuMemAlloc_v2");
	CM_SYM(free, "cuMemFree_v2");
	CM_SYM(htod, "cuMemcpyHtoD_v2");
	CM_SYM(dtoh, "cuMemcpyDtoH_v2");
	CM_SYM(stream_create, "cuStreamCreate");
	CM_SYM(stream_sync, "cuStreamSynchronize");
	CM_SYM(stream_destroy, "cuStreamDestroy_v2");
	CM_SYM(stream_query, "cuStreamQuery");
#undef CM_SYM
	*(void **)&cm.dev_attr = dlsym(cm.lib, "cuDeviceGetAttribute");
	*(void **)&cm.dev_name = dlsym(cm.lib, "cuDeviceGetName");
	*(void **)&cm.module_load = dlsym(cm.lib, "cuModuleLoadData");
	*(void **)&cm.module_fn = dlsym(cm.lib, "cuModuleGetFunction");
	*(void **)&cm.launch = dlsym(cm.lib, "cuLaunchKernel");
	*(void **)&cm.host_register = dlsym(cm.lib, "cuMemHostRegister_v2");
	*(void **)&cm.host_dptr = dlsym(cm.lib, "cuMemHostGetDevicePointer_v2");
	*(void **)&cm.wait64 = dlsym(cm.lib, "cuStreamWaitValue64_v2");
	*(void **)&cm.write64 = dlsym(cm.lib, "cuStreamWriteValue64_v2");
	*(void **)&cm.dtod = dlsym(cm.lib, "cuMemcpyDtoD_v2");
	*(void **)&cm.addr_range = dlsym(cm.lib, "cuMemGetAddressRange_v2");
	*(void **)&cm.dmabuf = dlsym(cm.lib, "cuMemGetHandleForAddressRange");
	*(void **)&standin = dlsym(cm.lib, "fakecuda_is_standin");
	cm.standin = standin && standin();
	if (cm.init(0) || cm.device_get(&dev, 0) || cm.ctx_retain(&ctx, dev) ||
	    cm.ctx_set(ctx)) {
		snprintf(why, len, "no CUDA device 0 or context");
		return -1;
	}
	return 0;
}

#endif /* KCOLL_CUDA_MIN_H */
