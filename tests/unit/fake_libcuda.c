// SPDX-License-Identifier: MIT
/*
 * A STAND-IN for NVIDIA's CUDA driver library (libcuda.so.1), for tests
 * without a GPU: the entry points libcoll/cuda.c and the test programs
 * reach, with the driver's names, calling conventions and constants. It is
 * loaded exactly as the real one would be (dlopen("libcuda.so.1") through
 * LD_LIBRARY_PATH); it is not CUDA and says so (fakecuda_is_standin()).
 *
 * "Device memory" is a dma-buf mapped into the process: from the exporter
 * FAKECUDA_DMABUF names (vgem, udmabuf, heap, testbuf: tools/dmabuf-alloc.h,
 * in the VM tests, so that the module imports real dma-bufs), or a memfd
 * (host unit tests, where the model takes any fd). The dma-buf handed out
 * for a range is a duplicate of that fd.
 *
 * A stream is a thread working through a queue: WaitValue64 polls the word
 * every FAKECUDA_POLL_US (default 20) microseconds, as the GPU's front end
 * would wait without an SM; WriteValue64 stores with release semantics;
 * a kernel launch runs the host build of kcoll's CUDA kernels
 * (kernels/kcoll_kernels_host.cc, the same template bodies nvcc compiles).
 * The kernels are elementwise, so the order their threads run in cannot
 * be seen; the stand-in runs each launch as one thread walking every
 * element in order (twelve times faster on a CPU than the grid's
 * thread-by-thread stride; test_kernels runs the grid decompositions). The legacy default stream (NULL, 0x1) and the
 * per-thread one (0x2) are one shared stream. Kernel parameters are copied
 * at launch, as the driver does.
 *
 * FAKECUDA_NO_DMABUF=1: the GPU refuses dma-buf export.
 * FAKECUDA_STALL_MS=N: a stream starts its first work only N ms after it
 * was created (a stream that does not reach its part of a collective in
 * time).
 * FAKECUDA_TRACE=1: every stream operation on stderr as it runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../../tools/dmabuf-alloc.h"
#include "../../kernels/kcoll_kernels_host.h"

#define FAKE_MAX	256
#define OK		0
#define ERR_VALUE	1		/* CUDA_ERROR_INVALID_VALUE */
#define ERR_MEMORY	2		/* CUDA_ERROR_OUT_OF_MEMORY */
#define ERR_IMAGE	200		/* CUDA_ERROR_INVALID_IMAGE */
#define ERR_NOT_FOUND	500		/* CUDA_ERROR_NOT_FOUND */

static struct {
	uintptr_t base;
	size_t size;
	struct kd_buf kd;		/* kd.fd: the dma-buf (or memfd) */
	unsigned long long id;		/* CU_POINTER_ATTRIBUTE_BUFFER_ID */
} fake[FAKE_MAX];
static int nfake, handles, launches;
static unsigned long long next_id = 1;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

int fakecuda_is_standin(void)
{
	return 1;
}

/* Test hook: @size bytes of "device memory"; NULL on failure. */
void *fakecuda_alloc(size_t size)
{
	const char *exp = getenv("FAKECUDA_DMABUF");
	long page = sysconf(_SC_PAGESIZE);
	struct kd_buf kd;
	void *p = NULL;
	int fd, i;

	size = (size + (size_t)page - 1) & ~((size_t)page - 1);
	pthread_mutex_lock(&fake_lock);
	for (i = 0; i < nfake && fake[i].base; i++)
		;
	if (i == FAKE_MAX)
		goto out;
	if (exp && *exp) {
		if (kd_alloc(&kd, exp, size) || !kd.map)
			goto out;
	} else {
		memset(&kd, 0, sizeof(kd));
		fd = memfd_create("fakecuda", MFD_CLOEXEC);
		if (fd < 0)
			goto out;
		if (ftruncate(fd, (off_t)size)) {
			close(fd);
			goto out;
		}
		kd.map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
			      fd, 0);
		if (kd.map == MAP_FAILED) {
			close(fd);
			goto out;
		}
		kd.fd = fd;
		kd.size = size;
	}
	p = kd.map;
	/* A freed slot first: addresses and slots get reused, as with the
	 * real driver; only the buffer id tells the allocations apart. */
	for (i = 0; i < nfake && fake[i].base; i++)
		;
	fake[i].base = (uintptr_t)p;
	fake[i].size = size;
	fake[i].kd = kd;
	fake[i].id = next_id++;
	if (i == nfake)
		nfake++;
out:
	pthread_mutex_unlock(&fake_lock);
	return p;
}

static int find(unsigned long long p)
{
	int i;

	for (i = 0; i < nfake; i++)
		if (fake[i].base && p >= fake[i].base &&
		    p < fake[i].base + fake[i].size)
			return i;
	return -1;
}

/* Test hook: the memfd/dma-buf behind allocation @p (-1). */
int fakecuda_memfd(const void *p)
{
	int i = find((uintptr_t)p);

	return i < 0 ? -1 : fake[i].kd.fd;
}

int fakecuda_handles(void)
{
	return handles;
}

int fakecuda_launches(void)
{
	return __atomic_load_n(&launches, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ */
/* Context, device, memory                                             */
/* ------------------------------------------------------------------ */

static int fake_ctx;			/* its address is "the context" */

int cuInit(unsigned int flags)
{
	return flags ? ERR_VALUE : OK;
}

int cuDeviceGet(int *dev, int ordinal)
{
	if (ordinal)
		return 101;		/* CUDA_ERROR_INVALID_DEVICE */
	*dev = 0;
	return OK;
}

int cuDeviceGetName(char *name, int len, int dev)
{
	if (dev || len < 1)
		return ERR_VALUE;
	snprintf(name, (size_t)len, "kcoll's stand-in CUDA driver (no GPU)");
	return OK;
}

int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
	if (dev)
		return 101;
	*ctx = &fake_ctx;
	return OK;
}

int cuCtxSetCurrent(void *ctx)
{
	return ctx == &fake_ctx || !ctx ? OK : ERR_VALUE;
}

int cuCtxGetCurrent(void **ctx)
{
	*ctx = &fake_ctx;
	return OK;
}

int cuCtxGetDevice(int *dev)
{
	*dev = 0;
	return OK;
}

int cuPointerGetAttribute(void *data, int attr, unsigned long long p)
{
	int i = find(p);

	if (i < 0)
		return ERR_VALUE;
	if (attr == 2)			/* MEMORY_TYPE: DEVICE */
		*(unsigned int *)data = 2;
	else if (attr == 7)		/* BUFFER_ID */
		*(unsigned long long *)data = fake[i].id;
	else if (attr == 9)		/* DEVICE_ORDINAL */
		*(int *)data = 0;
	else
		return ERR_VALUE;
	return OK;
}

int cuMemGetAddressRange_v2(unsigned long long *base, size_t *size,
			    unsigned long long p)
{
	int i = find(p);

	if (i < 0)
		return ERR_VALUE;
	if (base)
		*base = fake[i].base;
	if (size)
		*size = fake[i].size;
	return OK;
}

/* $@name as an int, else @dflt: tests pick the GPU's answers. */
static int fake_env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : dflt;
}

int cuDeviceGetAttribute(int *v, int attr, int dev)
{
	const char *no = getenv("FAKECUDA_NO_DMABUF");

	if (dev)
		return ERR_VALUE;
	switch (attr) {
	case 124:			/* DMA_BUF_SUPPORTED */
		*v = !(no && *no == '1');
		return OK;
	case 122:			/* CAN_USE_64_BIT_STREAM_MEM_OPS */
		*v = 1;
		return OK;
	case 16:			/* MULTIPROCESSOR_COUNT */
		*v = 4;
		return OK;
	case 98:			/* CAN_FLUSH_REMOTE_WRITES */
		*v = fake_env_int("FAKECUDA_CAN_FLUSH", 0);
		return OK;
	case 118:			/* GPU_DIRECT_RDMA_WRITES_ORDERING */
		/* ALL_DEVICES (200): no flush needed */
		*v = fake_env_int("FAKECUDA_WRITES_ORDERING", 200);
		return OK;
	}
	return ERR_VALUE;
}

int cuMemGetHandleForAddressRange(void *handle, unsigned long long p,
				  size_t size, int type,
				  unsigned long long flags)
{
	long page = sysconf(_SC_PAGESIZE);
	int i = find(p);

	/* The driver's rules: a dma-buf fd of page-aligned whole pages.
	 * The driver's dma-buf holds exactly the range; this one is the
	 * whole allocation's whatever the range, as some exporters' are,
	 * which libcoll tells apart by its size (libcoll/dmabuf_span.h). */
	if (i < 0 || type != 1 || flags || (p | size) % (unsigned long)page ||
	    p + size > fake[i].base + fake[i].size)
		return ERR_VALUE;
	*(int *)handle = dup(fake[i].kd.fd);
	handles++;
	return *(int *)handle < 0 ? ERR_MEMORY : OK;
}

int cuMemAlloc_v2(unsigned long long *dptr, size_t size)
{
	void *p = size ? fakecuda_alloc(size) : NULL;

	if (!p)
		return ERR_MEMORY;
	*dptr = (uintptr_t)p;
	return OK;
}

int cuMemFree_v2(unsigned long long dptr)
{
	int i;

	pthread_mutex_lock(&fake_lock);
	i = find(dptr);
	if (i >= 0 && fake[i].base == dptr) {
		if (fake[i].kd.exporter)
			kd_free(&fake[i].kd);
		else {
			munmap(fake[i].kd.map, fake[i].size);
			close(fake[i].kd.fd);
		}
		fake[i].base = 0;
		fake[i].size = 0;
	}
	pthread_mutex_unlock(&fake_lock);
	return i < 0 ? ERR_VALUE : OK;
}

/*
 * The "device" touches its memory through the CPU's mapping of the
 * dma-buf: bracketed like any CPU access (DMA_BUF_IOCTL_SYNC), so that
 * what the NIC wrote through the kernel's mapping is seen and what the
 * "GPU" wrote reaches the kernel's.
 */
static void dev_access(unsigned long long p, int start)
{
	int i = find(p);

	if (i >= 0 && fake[i].kd.exporter)
		kd_cpu(&fake[i].kd, start);
}

/* Copies are synchronous here (the test programs synchronize anyway). */
int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n)
{
	if (find(dst) < 0)
		return ERR_VALUE;
	dev_access(dst, 1);
	memcpy((void *)(uintptr_t)dst, src, n);
	dev_access(dst, 0);
	return OK;
}

int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n)
{
	if (find(src) < 0)
		return ERR_VALUE;
	dev_access(src, 1);
	memcpy(dst, (const void *)(uintptr_t)src, n);
	dev_access(src, 0);
	return OK;
}

int cuMemcpyDtoD_v2(unsigned long long dst, unsigned long long src, size_t n)
{
	if (find(src) < 0 || find(dst) < 0)
		return ERR_VALUE;
	dev_access(src, 1);
	dev_access(dst, 1);
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	dev_access(dst, 0);
	dev_access(src, 0);
	return OK;
}

int cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
	return p && size && !(flags & ~0x0fu) ? OK : ERR_VALUE;
}

int cuMemHostUnregister(void *p)
{
	return p ? OK : ERR_VALUE;
}

/* Host memory is mapped at the same address for the "device". */
int cuMemHostGetDevicePointer_v2(unsigned long long *dptr, void *p,
				 unsigned int flags)
{
	if (flags)
		return ERR_VALUE;
	*dptr = (uintptr_t)p;
	return OK;
}

/* ------------------------------------------------------------------ */
/* Modules and kernels                                                 */
/* ------------------------------------------------------------------ */

static int fake_module;

int cuModuleLoadData(void **mod, const void *image)
{
	uint32_t magic;

	memcpy(&magic, image, sizeof(magic));
	if (magic != 0xba55ed50u)	/* a fatbin */
		return ERR_IMAGE;
	*mod = &fake_module;
	return OK;
}

int cuModuleUnload(void *mod)
{
	return mod == &fake_module ? OK : ERR_VALUE;
}

int cuModuleGetFunction(void **fn, void *mod, const char *name)
{
	const struct kcoll_host_kernel *k;

	if (mod != &fake_module)
		return ERR_VALUE;
	k = kcoll_host_kernel(name);
	if (!k)
		return ERR_NOT_FOUND;
	*fn = (void *)k;
	return OK;
}

/* ------------------------------------------------------------------ */
/* Streams                                                             */
/* ------------------------------------------------------------------ */

enum { W_WAIT, W_WRITE, W_LAUNCH };

struct work {
	struct work *next;
	int kind;
	volatile uint64_t *addr;
	uint64_t value;
	const struct kcoll_host_kernel *k;
	uint64_t nthr;
	uint64_t arg[6];
};

struct stream {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	struct work *head, *tail;
	int busy;
	int quit;
};

static struct stream *default_stream;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void sleep_us(long us)
{
	struct timespec ts = { 0, us * 1000 };

	nanosleep(&ts, NULL);
}

static long poll_us(void)
{
	const char *s = getenv("FAKECUDA_POLL_US");
	long v = s ? atol(s) : 20;

	return v > 0 ? v : 20;
}

static void run_kernel(struct work *w)
{
	const struct kcoll_host_kernel *k = w->k;
	const volatile uint64_t *cancel;
	uint64_t ticket;

	if (k->reduce) {
		/* (dst, a, b, n, cancel, ticket) */
		cancel = (const volatile uint64_t *)(uintptr_t)w->arg[4];
		ticket = w->arg[5];
		if (cancel && *cancel >= ticket)
			return;
		dev_access(w->arg[1], 1);
		dev_access(w->arg[2], 1);
		dev_access(w->arg[0], 1);
		k->reduce((void *)(uintptr_t)w->arg[0],
			  (const void *)(uintptr_t)w->arg[1],
			  (const void *)(uintptr_t)w->arg[2], w->arg[3], w->nthr);
		dev_access(w->arg[0], 0);
		dev_access(w->arg[2], 0);
		dev_access(w->arg[1], 0);
	} else {
		/* (dst, n, nranks, cancel, ticket) */
		cancel = (const volatile uint64_t *)(uintptr_t)w->arg[3];
		ticket = w->arg[4];
		if (cancel && *cancel >= ticket)
			return;
		dev_access(w->arg[0], 1);
		k->scale((void *)(uintptr_t)w->arg[0], w->arg[1],
			 (uint32_t)w->arg[2], w->nthr);
		dev_access(w->arg[0], 0);
	}
	__atomic_fetch_add(&launches, 1, __ATOMIC_RELAXED);
}

static void *stream_main(void *arg)
{
	struct stream *s = arg;
	const char *stall = getenv("FAKECUDA_STALL_MS");
	long stall_ms = stall ? atol(stall) : 0;
	const char *tr = getenv("FAKECUDA_TRACE");
	int trace = tr && *tr == '1';
	long us = poll_us();

	for (;;) {
		struct work *w;

		pthread_mutex_lock(&s->lock);
		while (!s->head && !s->quit)
			pthread_cond_wait(&s->cond, &s->lock);
		if (!s->head) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		w = s->head;
		s->busy = 1;
		pthread_mutex_unlock(&s->lock);

		for (; stall_ms > 0 && !s->quit; stall_ms--)
			sleep_us(1000);
		if (trace)
			fprintf(stderr, "fakecuda: stream %p: %s %#llx %#llx (now %#llx)%s%s\n",
				(void *)s, w->kind == W_WAIT ? "wait" :
				w->kind == W_WRITE ? "write" : "launch",
				(unsigned long long)(uintptr_t)w->addr,
				(unsigned long long)w->value,
				w->addr ? (unsigned long long)*w->addr : 0ULL,
				w->k ? " " : "", w->k ? w->k->name : "");
		if (trace && w->k)
			fprintf(stderr, "fakecuda:   args %#llx %#llx %#llx %llu %#llx %#llx\n",
				(unsigned long long)w->arg[0], (unsigned long long)w->arg[1],
				(unsigned long long)w->arg[2], (unsigned long long)w->arg[3],
				(unsigned long long)w->arg[4], (unsigned long long)w->arg[5]);
		switch (w->kind) {
		case W_WAIT:
			/* GEQ: (int64_t)(*addr - value) >= 0 */
			while ((int64_t)(__atomic_load_n(w->addr,
							 __ATOMIC_ACQUIRE) -
					 w->value) < 0 && !s->quit)
				sleep_us(us);
			break;
		case W_WRITE:
			__atomic_store_n(w->addr, w->value, __ATOMIC_RELEASE);
			break;
		case W_LAUNCH:
			run_kernel(w);
			__atomic_thread_fence(__ATOMIC_RELEASE);
			break;
		}
		pthread_mutex_lock(&s->lock);
		s->head = w->next;
		if (!s->head)
			s->tail = NULL;
		s->busy = 0;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		free(w);
	}
}

static struct stream *stream_new(void)
{
	struct stream *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	if (pthread_create(&s->thread, NULL, stream_main, s)) {
		free(s);
		return NULL;
	}
	return s;
}

static void default_init(void)
{
	default_stream = stream_new();
}

static struct stream *stream_of(void *h)
{
	if (!h || h == (void *)0x1 || h == (void *)0x2) {
		pthread_once(&default_once, default_init);
		return default_stream;
	}
	return h;
}

static int enqueue(void *h, struct work *w)
{
	struct stream *s = stream_of(h);

	if (!s) {
		free(w);
		return ERR_MEMORY;
	}
	pthread_mutex_lock(&s->lock);
	if (s->tail)
		s->tail->next = w;
	else
		s->head = w;
	s->tail = w;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return OK;
}

int cuStreamCreate(void **h, unsigned int flags)
{
	if (flags & ~1u)
		return ERR_VALUE;
	*h = stream_new();
	return *h ? OK : ERR_MEMORY;
}

int cuStreamSynchronize(void *h)
{
	struct stream *s = stream_of(h);

	if (!s)
		return ERR_VALUE;
	pthread_mutex_lock(&s->lock);
	while (s->head || s->busy)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	return OK;
}

int cuStreamQuery(void *h)
{
	struct stream *s = stream_of(h);
	int idle;

	if (!s)
		return ERR_VALUE;
	pthread_mutex_lock(&s->lock);
	idle = !s->head && !s->busy;
	pthread_mutex_unlock(&s->lock);
	return idle ? OK : 600;		/* CUDA_ERROR_NOT_READY */
}

int cuStreamDestroy_v2(void *h)
{
	struct stream *s = h;

	if (!h || h == (void *)0x1 || h == (void *)0x2)
		return ERR_VALUE;
	cuStreamSynchronize(h);
	pthread_mutex_lock(&s->lock);
	s->quit = 1;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	free(s);
	return OK;
}

static int memop(void *h, unsigned long long addr, uint64_t value,
		 unsigned int flags, int kind)
{
	struct work *w;

	/* GEQ (0) only, and FLUSH (1 << 30) for the wait. */
	if (!addr || (addr & 7) ||
	    (flags & ~(kind == W_WAIT ? (1u << 30) : 0u)))
		return ERR_VALUE;
	w = calloc(1, sizeof(*w));
	if (!w)
		return ERR_MEMORY;
	w->kind = kind;
	w->addr = (volatile uint64_t *)(uintptr_t)addr;
	w->value = value;
	return enqueue(h, w);
}

int cuStreamWaitValue64_v2(void *h, unsigned long long addr, uint64_t value,
			   unsigned int flags)
{
	return memop(h, addr, value, flags, W_WAIT);
}

int cuStreamWriteValue64_v2(void *h, unsigned long long addr, uint64_t value,
			    unsigned int flags)
{
	return memop(h, addr, value, flags, W_WRITE);
}

int cuLaunchKernel(void *fn, unsigned int gx, unsigned int gy,
		   unsigned int gz, unsigned int bx, unsigned int by,
		   unsigned int bz, unsigned int shmem, void *h, void **params,
		   void **extra)
{
	const struct kcoll_host_kernel *k = fn;
	struct work *w;

	if (!k || !params || extra || !gx || !bx || gy != 1 || gz != 1 ||
	    by != 1 || bz != 1 || bx > 1024 || shmem)
		return ERR_VALUE;
	w = calloc(1, sizeof(*w));
	if (!w)
		return ERR_MEMORY;
	w->kind = W_LAUNCH;
	w->k = k;
	w->nthr = 1;		/* see the top of the file */
	if (k->reduce) {
		w->arg[0] = *(uint64_t *)params[0];
		w->arg[1] = *(uint64_t *)params[1];
		w->arg[2] = *(uint64_t *)params[2];
		w->arg[3] = *(uint64_t *)params[3];
		w->arg[4] = *(uint64_t *)params[4];
		w->arg[5] = *(uint64_t *)params[5];
	} else {
		w->arg[0] = *(uint64_t *)params[0];
		w->arg[1] = *(uint64_t *)params[1];
		w->arg[2] = *(uint32_t *)params[2];
		w->arg[3] = *(uint64_t *)params[3];
		w->arg[4] = *(uint64_t *)params[4];
	}
	return enqueue(h, w);
}
