// SPDX-License-Identifier: MIT
/*
 * libcoll's GPU-memory path (libcoll/cuda.c) on the host, without a GPU:
 * linked with tests/unit/fake_libcuda.c, a stand-in for the CUDA driver
 * (libcuda.so.1) whose "device memory" is a memfd mapping, and with the
 * model of /dev/kcoll, which records the dma-buf registrations it gets.
 * libcoll finds the stand-in with its own dlopen("libcuda.so.1") (already
 * loaded by soname). Checked: a GPU pointer is registered through its
 * dma-buf with NO_CPU, from the right file, offset, length and name; an
 * operation on unregistered GPU memory registers its whole allocation once;
 * a GPU that cannot export dma-bufs, and an unmapped address without
 * libcuda, fail with -ENOTSUP and a message that says why.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "coll.h"
#include "coll_internal.h"
#include "dmabuf_span.h"
#include "kcoll_model.h"
#include "unit.h"

void *fakecuda_alloc(size_t size);
int fakecuda_memfd(const void *p);
int fakecuda_handles(void);

static coll_comm *one_rank(void)
{
	struct kcoll_rank_addr self;
	uint8_t key[KCOLL_KEY_LEN] = { 1, 2, 3 };
	coll_comm *c = NULL;

	if (coll_node_addr(&self) ||
	    coll_comm_init_table(&c, 1, 0, &self, 0xc0da + getpid(), key))
		return NULL;
	return c;
}

static unsigned long long ino_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? 0 : (unsigned long long)st.st_ino;
}

static void test_register_gpu_pointer(void)
{
	size_t size = 1 << 20;
	char *dev = fakecuda_alloc(size);
	coll_comm *c = one_rank();
	coll_mem *m = NULL;
	long page = sysconf(_SC_PAGESIZE);
	int h0 = fakecuda_handles();

	if (!UNIT_CHECK(dev && c))
		return;
	UNIT_EQ_INT(coll_mem_register(c, dev + 100, 5000, &m), 0);
	/* Through the stand-in, not some other libcuda.so.1. */
	UNIT_EQ_INT(fakecuda_handles(), h0 + 1);
	UNIT_EQ_UINT(kcoll_model_last_dmabuf.flags,
		     KCOLL_REG_DMABUF | KCOLL_REG_NO_CPU);
	UNIT_EQ_UINT(kcoll_model_last_dmabuf.ino, ino_of(fakecuda_memfd(dev)));
	/* The pages around the range (libcoll/dmabuf_span.h); the
	 * stand-in's dma-buf is the whole allocation's, so byte 100 of it,
	 * named by its address. */
	UNIT_EQ_UINT(kcoll_model_last_dmabuf.off, 100);
	UNIT_EQ_UINT(kcoll_model_last_dmabuf.len, 5000);
	UNIT_EQ_UINT(kcoll_model_last_dmabuf.addr, (uintptr_t)(dev + 100));
	UNIT_EQ_INT(coll_mem_deregister(c, m), 0);
	/* In the middle of the allocation: the stand-in's dma-buf is
	 * still the whole allocation's, so the offset counts from its
	 * start (an offset within the range's own page, as libcoll gave
	 * before it looked at the dma-buf's size, pointed the module at
	 * the allocation's first page). */
	UNIT_EQ_INT(coll_mem_register(c, dev + 3 * page + 8, 100, &m), 0);
	UNIT_EQ_UINT(kcoll_model_last_dmabuf.off, 3 * page + 8);
	UNIT_EQ_UINT(kcoll_model_last_dmabuf.ino, ino_of(fakecuda_memfd(dev)));
	UNIT_EQ_INT(coll_mem_deregister(c, m), 0);
	/* Past the allocation's end. */
	UNIT_EQ_INT(coll_mem_register(c, dev + size - 10, 100, &m), -EINVAL);
	coll_comm_destroy(c);
}

/*
 * Where a registration lies in the dma-buf it got (libcoll/dmabuf_span.h):
 * from the range's first page when the driver cut exactly that range (as
 * NVIDIA's does: the stand-in cannot), from the allocation's start when
 * the exporter handed out the whole allocation, and nowhere libcoll would
 * guess otherwise.
 */
static void test_dmabuf_offsets(void)
{
	const uint64_t page = 4096, base = 0x7f0000200000ull;
	const uint64_t asize = 10 * page + 5, a = base + 3 * page + 8;
	uint64_t st, en;

	coll_dmabuf_span(a, 100, base, page, &st, &en);
	UNIT_EQ_UINT(st, base + 3 * page);
	UNIT_EQ_UINT(en, base + 4 * page);
	UNIT_EQ_INT(coll_dmabuf_offset(a, base, asize, page, st, en, page), 8);
	UNIT_EQ_INT(coll_dmabuf_offset(a, base, asize, page, st, en,
				       11 * page), 3 * page + 8);
	UNIT_EQ_INT(coll_dmabuf_offset(a, base, asize, page, st, en,
				       2 * page), -1);
	UNIT_EQ_INT(coll_dmabuf_offset(a, base, asize, page, st, en,
				       10 * page), -1);
	/* Never below the allocation, whose start may share a page. */
	coll_dmabuf_span(base + 600 + 8, 8, base + 512, page, &st, &en);
	UNIT_EQ_UINT(st, base + 512);
	UNIT_EQ_UINT(en, base + page);
	/* Across a page boundary: both pages. */
	coll_dmabuf_span(base + page - 4, 8, base, page, &st, &en);
	UNIT_EQ_UINT(st, base);
	UNIT_EQ_UINT(en, base + 2 * page);
}

static void test_operation_registers_allocation_once(void)
{
	size_t size = 1 << 20, n = 4096;
	float *dev = fakecuda_alloc(size);
	coll_comm *c = one_rank();
	unsigned int count0 = kcoll_model_last_dmabuf.count, i;

	if (!UNIT_CHECK(dev && c))
		return;
	for (i = 0; i < n; i++)
		dev[i] = (float)i;
	/* (A reduction of GPU memory is stream-ordered, on the GPU: the
	 * VM tests run those with the module.) */
	UNIT_EQ_INT(coll_allgather(dev, dev + n, n, COLL_DTYPE_FP32, c), 0);
	UNIT_EQ_UINT(kcoll_model_last_dmabuf.count, count0 + 1);
	UNIT_EQ_UINT(kcoll_model_last_dmabuf.len, size);
	UNIT_EQ_UINT(kcoll_model_last_dmabuf.addr, (uintptr_t)dev);
	UNIT_CHECK(dev[n + 77] == 77.0f);
	/* Another operation on the same allocation: no new registration. */
	UNIT_EQ_INT(coll_broadcast(dev + 10, dev + 2 * n, n, COLL_DTYPE_FP32, 0,
				   c), 0);
	UNIT_EQ_UINT(kcoll_model_last_dmabuf.count, count0 + 1);
	UNIT_EQ_INT(coll_comm_destroy(c), 0);
}

static void test_gpu_without_dmabuf_export(void)
{
	char *dev = fakecuda_alloc(1 << 16);
	coll_comm *c = one_rank();
	coll_mem *m = NULL;

	if (!UNIT_CHECK(dev && c))
		return;
	setenv("FAKECUDA_NO_DMABUF", "1", 1);
	UNIT_EQ_INT(coll_mem_register(c, dev, 4096, &m), -ENOTSUP);
	UNIT_CHECK(strstr(coll_last_error(), "cannot export"));
	UNIT_EQ_INT(coll_allreduce(dev, dev + 8192, 16, COLL_DTYPE_INT8,
				   COLL_REDOP_SUM, c), -ENOTSUP);
	unsetenv("FAKECUDA_NO_DMABUF");
	coll_comm_destroy(c);
}

/*
 * What the GPU says about the NIC's writes decides the waits: ordered
 * (OWNER, 100, or more): no flush; below it with CAN_FLUSH_REMOTE_WRITES:
 * every wait flushes; below it without: refused, not run unordered.
 */
static void test_flush_rule(void)
{
	UNIT_CHECK(!coll_cuda_unavailable());
	UNIT_EQ_INT(coll_cuda_flush_needed(), 0);
	setenv("FAKECUDA_WRITES_ORDERING", "100", 1);
	UNIT_EQ_INT(coll_cuda_flush_needed(), 0);
	setenv("FAKECUDA_WRITES_ORDERING", "0", 1);
	setenv("FAKECUDA_CAN_FLUSH", "1", 1);
	UNIT_EQ_INT(coll_cuda_flush_needed(), 1);
	setenv("FAKECUDA_CAN_FLUSH", "0", 1);
	UNIT_EQ_INT(coll_cuda_flush_needed(), -ENOTSUP);
	UNIT_CHECK(strstr(coll_last_error(), "CAN_FLUSH_REMOTE_WRITES 0") != NULL);
	unsetenv("FAKECUDA_WRITES_ORDERING");
	unsetenv("FAKECUDA_CAN_FLUSH");
}

/* A kernel can reach device memory (and memory CUDA pinned), not plain
 * host memory: a GPU reduction refuses the latter before anything runs. */
static void test_reachable(void)
{
	static char host[4096];
	char *dev = fakecuda_alloc(1 << 16);

	if (!UNIT_CHECK(dev))
		return;
	UNIT_CHECK(coll_cuda_reachable(dev));
	UNIT_CHECK(coll_cuda_reachable(dev + 4096));
	UNIT_CHECK(!coll_cuda_reachable(host));
}

/* In a child that never loads CUDA ($KCOLL_NO_CUDA=1): an address not
 * mapped here (a device pointer, for all libcoll can tell) is -ENOTSUP
 * with the reason; host memory registers as ever. */
static void test_no_cuda(void)
{
	pid_t pid;
	int st = -1;

	pid = fork();
	if (!pid) {
		coll_comm *c;
		coll_mem *m;
		static char host[8192];
		int bad = 0;

		setenv(COLL_ENV_NO_CUDA, "1", 1);
		c = one_rank();
		if (!c)
			_exit(10);
		if (coll_mem_register(c, (void *)0x7e0000000000ULL, 4096, &m) !=
		    -ENOTSUP)
			bad |= 1;
		if (!strstr(coll_last_error(), "libcuda.so.1") ||
		    !strstr(coll_last_error(), COLL_ENV_NO_CUDA))
			bad |= 2;
		if (coll_mem_register(c, host, sizeof(host), &m) ||
		    coll_mem_deregister(c, m))
			bad |= 4;
		coll_comm_destroy(c);
		if (bad) fprintf(stderr, "# last error: %s\n", coll_last_error());
		_exit(bad);
	}
	UNIT_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	UNIT_EQ_INT(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + st, 0);
}

int main(int argc, char **argv)
{
	unit_init(argc, argv);
	setenv(COLL_ENV_BOOTSTRAP_ADDR, "127.0.0.1", 1);
	setenv(COLL_ENV_IB_ADDR, "127.0.0.1", 1);
	kcoll_model_start(0, 1);
	/* First: its child must not inherit a loaded driver. */
	UNIT_RUN(test_no_cuda);
	UNIT_RUN(test_register_gpu_pointer);
	UNIT_RUN(test_dmabuf_offsets);
	UNIT_RUN(test_operation_registers_allocation_once);
	UNIT_RUN(test_gpu_without_dmabuf_export);
	UNIT_RUN(test_flush_rule);
	UNIT_RUN(test_reachable);
	kcoll_model_stop();
	return unit_done();
}
