// SPDX-License-Identifier: MIT
/*
 * A STAND-IN for NVIDIA's CUDA driver library (libcuda.so.1), for host
 * tests without a GPU: the five entry points libcoll/cuda.c reaches, with
 * the driver's names and calling conventions. Its "device memory" is a
 * memfd mapped into the process (fakecuda_alloc()); the dma-buf it hands
 * out for a range is a duplicate of that memfd, so a test can check which
 * file and offset libcoll registered. FAKECUDA_NO_DMABUF=1 makes the GPU
 * refuse dma-buf export (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAKE_MAX	8

static struct {
	uintptr_t base;
	size_t size;
	int memfd;
} fake[FAKE_MAX];
static int nfake, handles;

/* Test hook: @size bytes of "device memory"; NULL on failure. */
void *fakecuda_alloc(size_t size)
{
	int fd = memfd_create("fakecuda", MFD_CLOEXEC);
	void *p;

	if (fd < 0 || nfake == FAKE_MAX || ftruncate(fd, size))
		return NULL;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return NULL;
	fake[nfake].base = (uintptr_t)p;
	fake[nfake].size = size;
	fake[nfake].memfd = fd;
	nfake++;
	return p;
}

/* Test hook: the memfd behind allocation @p (-1), handles handed out. */
int fakecuda_memfd(const void *p)
{
	int i;

	for (i = 0; i < nfake; i++)
		if ((uintptr_t)p >= fake[i].base &&
		    (uintptr_t)p < fake[i].base + fake[i].size)
			return fake[i].memfd;
	return -1;
}

int fakecuda_handles(void)
{
	return handles;
}

static int find(unsigned long long p)
{
	int i;

	for (i = 0; i < nfake; i++)
		if (p >= fake[i].base && p < fake[i].base + fake[i].size)
			return i;
	return -1;
}

int cuInit(unsigned int flags)
{
	return flags ? 1 : 0;
}

int cuPointerGetAttribute(void *data, int attr, unsigned long long p)
{
	int i = find(p);

	if (i < 0)
		return 1;		/* CUDA_ERROR_INVALID_VALUE */
	if (attr == 2)			/* MEMORY_TYPE: DEVICE */
		*(unsigned int *)data = 2;
	else if (attr == 9)		/* DEVICE_ORDINAL */
		*(int *)data = 0;
	else
		return 1;
	return 0;
}

int cuMemGetAddressRange_v2(unsigned long long *base, size_t *size,
			    unsigned long long p)
{
	int i = find(p);

	if (i < 0)
		return 1;
	*base = fake[i].base;
	*size = fake[i].size;
	return 0;
}

int cuDeviceGetAttribute(int *v, int attr, int dev)
{
	const char *no = getenv("FAKECUDA_NO_DMABUF");

	if (attr != 124 || dev)
		return 1;
	*v = !(no && *no == '1');
	return 0;
}

int cuMemGetHandleForAddressRange(void *handle, unsigned long long p,
				  size_t size, int type,
				  unsigned long long flags)
{
	long page = sysconf(_SC_PAGESIZE);
	int i = find(p);

	/* The driver's rules: a dma-buf fd of page-aligned whole pages. */
	if (i < 0 || type != 1 || flags || (p | size) % page ||
	    p + size > fake[i].base + fake[i].size)
		return 1;
	*(int *)handle = dup(fake[i].memfd);
	handles++;
	return *(int *)handle < 0 ? 2 : 0;
}
