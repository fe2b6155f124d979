// SPDX-License-Identifier: MIT
/*
 * kcoll-gpucheck: what kcoll needs of a GPU, on the machine it runs on
 * (make gpu-check; no RDMA needed). TAP output, one line per check:
 *
 *  1. the attributes kcoll depends on: 64-bit stream memory operations
 *     (required), dma-buf export (required for GPUDirect RDMA), and, for
 *     information, the GPUDirect RDMA write ordering and flush support;
 *  2. every CUDA reduction kernel of the fatbin (-f, default
 *     build/kernels/kcoll_kernels.fatbin) against the host build of the
 *     same kernels (kernels/kcoll_kernels_host.cc, which make check proves
 *     bit-exact with the module's CPU reduction): random and edge values,
 *     aligned and misaligned, in place and out of place; bit for bit,
 *     NaN payloads aside;
 *  3. their throughput against cuMemcpyDtoD of the same buffers (-s bytes
 *     per operand, default 256 MiB): a reduction reads two operands and
 *     writes one, a copy reads one and writes one, so both are compared
 *     as bytes moved per second (target >= 0.9);
 *  4. the stream protocol against a CPU thread playing the module: the
 *     doorbell page in host memory, the stream's WriteValue64(start), per
 *     step WaitValue64(ready) + kernel + WriteValue64(done), its end wait;
 *     results checked, the handoff latency per step measured (the thread
 *     writes ready, then sees done), and a cancelled operation whose
 *     kernels must leave memory alone;
 *  5. GPU memory exported as a dma-buf the way libcoll asks for it
 *     (libcoll/dmabuf_span.h), for allocations of many sizes and for
 *     the whole, the middle and the last byte of each: every export must
 *     succeed with a dma-buf whose size tells libcoll where the range
 *     lies in it (exactly the range, or the whole allocation).
 *     For each allocation, what the driver says of its bounds and of
 *     other ranges (the exact bytes, the allocation, the pages around it,
 *     the pages around a middle slice alone) is printed, for information.
 *
 * With the STAND-IN driver (tests/unit/fake_libcuda.c, make check runs it
 * so, with small sizes) every line says so and the figures are not a GPU's.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>
#include "../uapi/linux/kcoll.h"
#include "cuda-min.h"
#include "../kernels/kcoll_kernels_host.h"
#include "../libcoll/dmabuf_span.h"

#define BLOCK	256

static unsigned int tap_n, tap_fail;
static const char *label = "";

static void tap(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tap(bool ok, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	tap_fail += !ok;
	printf("%sok %u - %s", ok ? "" : "not ", tap_n, label);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void need(cm_result r, const char *what)
{
	if (r) {
		printf("Bail out! %s failed: CUresult %d\n", what, r);
		exit(1);
	}
}

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define esize kcoll_host_esize

/* Random bytes with edge values sprinkled in (NaN, infinities, zeros,
 * subnormals, extremes) for every type. */
static void fill(uint8_t *p, size_t n, unsigned int dt)
{
	static const uint64_t edge[] = {
		0, 0x8000000000000000ull, 0x7ff0000000000000ull,
		0x7ff8000000000001ull, 1, 0x7f800001u, 0xff800000u, 0x7fc00000u,
		0x0001, 0x7c01, 0xfc00, 0x7e00, 0x8000, 0x7fffffff, 0x80000000u,
		~0ull,
	};
	size_t es = esize(dt), i;

	for (i = 0; i < n; i++) {
		uint64_t v = rnd();

		if (!(v & 7))
			v = edge[(v >> 3) % (sizeof(edge) / sizeof(edge[0]))];
		memcpy(p + i * es, &v, es);
	}
}

static size_t count_diff(const uint8_t *a, const uint8_t *b, size_t n,
			 unsigned int dt)
{
	return kcoll_host_count_diff(a, b, n, dt, NULL);
}

static void *g_module;

static void *kernel(const char *name)
{
	void *f = NULL;

	need(cm.module_fn(&f, g_module, name), name);
	return f;
}

static unsigned int grid_for(size_t bytes, int sms)
{
	size_t blocks = (bytes / 16 + BLOCK) / BLOCK, most = (size_t)sms * 16;

	return (unsigned int)(blocks > most ? most : blocks ? blocks : 1);
}

static void launch_reduce(void *fn, cm_ptr dst, cm_ptr a, cm_ptr b,
			  uint64_t n, cm_ptr cancel, uint64_t ticket,
			  void *stream, int sms, size_t es)
{
	void *args[] = { &dst, &a, &b, &n, &cancel, &ticket };

	need(cm.launch(fn, grid_for(n * es, sms), 1, 1, BLOCK, 1, 1, 0, stream,
		       args, NULL), "cuLaunchKernel");
}

static void launch_scale(void *fn, cm_ptr dst, uint64_t n, uint32_t q,
			 void *stream, int sms, size_t es)
{
	cm_ptr cancel = 0;
	uint64_t ticket = 0;
	void *args[] = { &dst, &n, &q, &cancel, &ticket };

	need(cm.launch(fn, grid_for(n * es, sms), 1, 1, BLOCK, 1, 1, 0, stream,
		       args, NULL), "cuLaunchKernel");
}

/* 2: every kernel against its host build. */
static void check_kernels(void *stream, int sms, size_t n)
{
	size_t bytes = n * 8 + 64;
	uint8_t *a = malloc(bytes), *b = malloc(bytes), *ref = malloc(bytes);
	uint8_t *out = malloc(bytes), *guard = malloc(bytes);
	cm_ptr da, db, dd;
	unsigned int nk = 0;
	size_t bad_total = 0, outside_total = 0;

	need(cm.alloc(&da, bytes), "cuMemAlloc");
	need(cm.alloc(&db, bytes), "cuMemAlloc");
	need(cm.alloc(&dd, bytes), "cuMemAlloc");
	for (const struct kcoll_host_kernel *k = kcoll_host_kernels; k->name;
	     k++) {
		size_t es = esize(k->dtype), bad = 0, outside = 0;
		void *fn = kernel(k->name);
		int v;

		nk++;
		/* aligned in place; misaligned by one element out of place */
		for (v = 0; v < 2; v++) {
			size_t off = v ? es : 0, m = n - (size_t)v * 3;

			fill(a, n + 8, k->dtype);
			fill(b, n + 8, k->dtype);
			need(cm.htod(da, a, bytes), "cuMemcpyHtoD");
			need(cm.htod(db, b, bytes), "cuMemcpyHtoD");
			/* what the output buffer holds before the launch:
			 * the bytes around the range must keep it */
			if (v && k->reduce)
				memset(guard, 0xa5, bytes);
			else
				memcpy(guard, a, bytes);
			if (v)
				need(cm.htod(dd, guard, bytes), "cuMemcpyHtoD");
			memcpy(ref, guard, bytes);
			if (k->reduce) {
				k->reduce(ref + off, a + off, b + off, m, 1);
				if (v)
					launch_reduce(fn, dd + off, da + off,
						      db + off, m, 0, 0, stream,
						      sms, es);
				else
					launch_reduce(fn, da, da, db, m, 0, 0,
						      stream, sms, es);
			} else {
				k->scale(ref + off, m, 7, 1);
				launch_scale(fn, (v ? dd : da) + off, m, 7, stream,
					     sms, es);
			}
			need(cm.stream_sync(stream), "cuStreamSynchronize");
			need(cm.dtoh(out, v ? dd : da, bytes), "cuMemcpyDtoH");
			bad += count_diff(out + off, ref + off, m, k->dtype);
			outside += !!memcmp(out, ref, off) +
				   !!memcmp(out + off + m * es, ref + off + m * es,
					    bytes - off - m * es);
		}
		if (bad || outside)
			printf("# %s: %zu elements differ from the host build, "
			       "%zu writes outside the range\n", k->name, bad,
			       outside);
		bad_total += bad;
		outside_total += outside;
	}
	tap(!bad_total && nk == 54, "kernels: %u kernels, %zu elements each, "
	    "bit-exact with the host build (NaN payloads aside): %zu differ",
	    nk, n, bad_total);
	tap(!outside_total, "kernels: no byte outside the range written "
	    "(misaligned head and tail, in and out of place): %zu launches did",
	    outside_total);
	cm.free(da);
	cm.free(db);
	cm.free(dd);
	free(a);
	free(b);
	free(ref);
	free(out);
	free(guard);
}

/* 3: kernel bandwidth against a device-to-device copy. */
static void check_bandwidth(void *stream, int sms, size_t bytes, int iters)
{
	static const char *const names[] = {
		"kcoll_reduce_fp32_sum", "kcoll_reduce_bf16_sum",
		"kcoll_reduce_fp16_max", "kcoll_reduce_int8_sum",
	};
	static const unsigned int dts[] = {
		KCOLL_DTYPE_FP32, KCOLL_DTYPE_BF16, KCOLL_DTYPE_FP16,
		KCOLL_DTYPE_INT8,
	};
	cm_ptr a, b, d;
	double t0, tcopy, tk, ratio;
	unsigned int i;
	int it;

	need(cm.alloc(&a, bytes), "cuMemAlloc");
	need(cm.alloc(&b, bytes), "cuMemAlloc");
	need(cm.alloc(&d, bytes), "cuMemAlloc");
	need(cm.dtod(d, a, bytes), "cuMemcpyDtoD");	/* warm up */
	need(cm.stream_sync(stream), "cuStreamSynchronize");
	t0 = now();
	for (it = 0; it < iters; it++)
		need(cm.dtod(d, a, bytes), "cuMemcpyDtoD");
	need(cm.stream_sync(NULL), "cuStreamSynchronize");
	tcopy = (now() - t0) / iters;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *fn = kernel(names[i]);
		size_t es = esize(dts[i]);

		launch_reduce(fn, d, a, b, bytes / es, 0, 0, stream, sms, es);
		need(cm.stream_sync(stream), "cuStreamSynchronize");
		t0 = now();
		for (it = 0; it < iters; it++)
			launch_reduce(fn, d, a, b, bytes / es, 0, 0, stream,
				      sms, es);
		need(cm.stream_sync(stream), "cuStreamSynchronize");
		tk = (now() - t0) / iters;
		/* bytes moved per second: 3 per element for the kernel, 2
		 * for the copy */
		ratio = (3.0 * bytes / tk) / (2.0 * bytes / tcopy);
		if (cm.standin)
			tap(true, "bandwidth %s: %.2f x a device copy of %zu MiB "
			    "# SKIP the stand-in driver runs on the CPU: not a "
			    "GPU's figure", names[i], ratio, bytes >> 20);
		else
			tap(ratio >= 0.9, "bandwidth %s: %.1f GB/s moved against "
			    "%.1f GB/s for cuMemcpyDtoD: %.2f x (target 0.9)",
			    names[i], 3.0 * bytes / tk / 1e9,
			    2.0 * bytes / tcopy / 1e9, ratio);
	}
	cm.free(a);
	cm.free(b);
	cm.free(d);
}

/* 4: the doorbell protocol, with this thread as the module. */
struct player {
	volatile struct kcoll_gpu_bell *bell;
	uint64_t T;
	unsigned int steps;
	bool cancel;
	double handoff_s;	/* sum over the steps */
	bool ok;
};

static uint64_t ld(volatile __u64 *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static bool wait_ge(volatile __u64 *p, uint64_t v, double limit)
{
	double t0 = now();

	while (ld(p) < v)
		if (now() - t0 > limit)
			return false;
	return true;
}

static void *play(void *arg)
{
	struct player *p = arg;
	unsigned int slot = (unsigned int)(p->T >> KCOLL_GPU_TICKET_SHIFT) %
			    KCOLL_GPU_SLOTS;
	unsigned int j;
	double t0;

	p->ok = wait_ge(&p->bell->start[slot], p->T, 30);
	if (p->cancel) {
		/* a failed operation: kernels skip, every wait passes */
		__atomic_store_n(&p->bell->cancel, p->T | KCOLL_GPU_STEP_MASK,
				 __ATOMIC_RELEASE);
	}
	for (j = 1; j <= p->steps && p->ok && !p->cancel; j++) {
		t0 = now();
		__atomic_store_n(&p->bell->ready, p->T | j, __ATOMIC_RELEASE);
		p->ok = wait_ge(&p->bell->done[slot], p->T | j, 30);
		p->handoff_s += now() - t0;
	}
	__atomic_store_n(&p->bell->ready, p->T | KCOLL_GPU_STEP_MASK,
			 __ATOMIC_RELEASE);
	__atomic_store_n(&p->bell->end, p->T | KCOLL_GPU_STEP_MASK,
			 __ATOMIC_RELEASE);
	return NULL;
}

static void check_protocol(void *stream, int sms)
{
	enum { STEPS = 200, N = 64 };
	long page = sysconf(_SC_PAGESIZE);
	struct kcoll_gpu_bell *bell = NULL;
	void *fn = kernel("kcoll_reduce_int32_sum");
	int32_t acc[N], one[N], out[N];
	struct player p;
	pthread_t th;
	cm_ptr bd, dacc, done;
	unsigned int slot, j, i;
	bool good = true;
	int pass;

	if (posix_memalign((void **)&bell, (size_t)page, (size_t)page))
		exit(1);
	memset(bell, 0, (size_t)page);
	need(cm.host_register(bell, (size_t)page, 0x02), "cuMemHostRegister");
	need(cm.host_dptr(&bd, bell, 0), "cuMemHostGetDevicePointer");
	need(cm.alloc(&dacc, sizeof(acc)), "cuMemAlloc");
	need(cm.alloc(&done, sizeof(one)), "cuMemAlloc");
	for (pass = 0; pass < 2; pass++) {
		uint64_t T = (uint64_t)(pass + 1) << KCOLL_GPU_TICKET_SHIFT;

		for (i = 0; i < N; i++) {
			acc[i] = (int32_t)i;
			one[i] = 1;
		}
		need(cm.htod(dacc, acc, sizeof(acc)), "cuMemcpyHtoD");
		need(cm.htod(done, one, sizeof(one)), "cuMemcpyHtoD");
		slot = (unsigned int)(T >> KCOLL_GPU_TICKET_SHIFT) % KCOLL_GPU_SLOTS;
		/* what libcoll enqueues: start, steps, end */
		need(cm.write64(stream, bd + offsetof(struct kcoll_gpu_bell, start) +
				slot * 8, T, 0), "cuStreamWriteValue64");
		for (j = 1; j <= STEPS; j++) {
			need(cm.wait64(stream, bd + offsetof(struct kcoll_gpu_bell,
							     ready), T | j, 0),
			     "cuStreamWaitValue64");
			launch_reduce(fn, dacc, dacc, done, N,
				      bd + offsetof(struct kcoll_gpu_bell, cancel),
				      T, stream, sms, 4);
			need(cm.write64(stream, bd + offsetof(struct kcoll_gpu_bell,
							      done) + slot * 8,
					T | j, 0), "cuStreamWriteValue64");
		}
		need(cm.wait64(stream, bd + offsetof(struct kcoll_gpu_bell, end),
			       T | KCOLL_GPU_STEP_MASK, 0), "cuStreamWaitValue64");
		memset(&p, 0, sizeof(p));
		p.bell = bell;
		p.T = T;
		p.steps = STEPS;
		p.cancel = pass == 1;
		pthread_create(&th, NULL, play, &p);
		pthread_join(th, NULL);
		need(cm.stream_sync(stream), "cuStreamSynchronize");
		need(cm.dtoh(out, dacc, sizeof(out)), "cuMemcpyDtoH");
		for (i = 0; i < N; i++)
			good &= out[i] == (int32_t)i + (pass ? 0 : STEPS);
		if (!pass)
			tap(p.ok && good, "protocol: %d steps handed over and "
			    "back, results right; %.1f us per step (ready "
			    "written to done seen: handoff, kernel, handoff)%s",
			    STEPS, p.handoff_s / STEPS * 1e6,
			    cm.standin ? " # the stand-in's figure, not a GPU's" :
			    "");
		else
			tap(p.ok && good, "protocol: a cancelled operation's "
			    "%d kernels left memory alone and its stream went "
			    "on", STEPS);
	}
	cm.free(dacc);
	cm.free(done);
}

/* 5: one export; its dma-buf's size (-1: refused). */
static off_t dmabuf_try(cm_ptr start, uint64_t len, char *what, size_t wlen)
{
	char path[64], link[96] = "?", line[160], exp[64] = "?";
	cm_result r;
	int fd = -1;
	off_t sz;
	ssize_t k;
	FILE *f;

	r = cm.dmabuf(&fd, start, len, 1 /* DMA_BUF_FD */, 0);
	if (r != 0 || fd < 0) {
		snprintf(what, wlen, "refused, CUresult %d", r);
		return -1;
	}
	sz = lseek(fd, 0, SEEK_END);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	k = readlink(path, link, sizeof(link) - 1);
	link[k > 0 ? k : 0] = 0;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "exp_name: %63s", exp) == 1)
			break;
	if (f)
		fclose(f);
	close(fd);
	snprintf(what, wlen, "fd of %lld bytes (%s, exporter %s)",
		 (long long)sz, link, exp);
	return sz;
}

static void check_dmabuf(int supported)
{
	static const size_t sizes[] = {
		1, 256, 4096, 4097, 65536 + 100, 2u << 20, (2u << 20) + 4097,
		64u << 20,
	};
	enum { NS = sizeof(sizes) / sizeof(sizes[0]) };
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	unsigned int tried = 0, failed = 0, i, j, w;
	cm_ptr p[NS][2];
	char what[160];

	if (!cm.dmabuf || !cm.addr_range || !supported) {
		tap(true, "dma-buf export of libcoll's ranges # SKIP %s",
		    supported ? "libcuda.so.1 has no cuMemGetHandleForAddressRange" :
		    "the GPU does not export dma-bufs");
		return;
	}
	/* two of each size in turn, to see whether small ones share pages */
	for (i = 0; i < NS; i++)
		for (j = 0; j < 2; j++)
			need(cm.alloc(&p[i][j], sizes[i]), "cuMemAlloc");
	for (i = 0; i < NS; i++) {
		for (j = 0; j < 2; j++) {
			size_t size = 0, S = sizes[i];
			cm_ptr base = 0;
			int64_t off;
			off_t got;
			bool ok;

			need(cm.addr_range(&base, &size, p[i][j]),
			     "cuMemGetAddressRange");
			printf("# cuMemAlloc(%zu) = %#llx: allocation %#llx + %zu, "
			     "base mod 4 KiB %llu, mod 64 KiB %llu, mod 2 MiB %llu\n",
			     S, p[i][j], base, size, base % 4096, base % 65536,
			     base % (2u << 20));
			for (w = 0; w < 3; w++) {
				static const char *const wn[] = {
					"whole", "middle 8 bytes", "last byte",
				};
				uint64_t a = p[i][j], len = S, st, en;

				if (w == 1) {
					if (S < 16)
						continue;
					a += (S / 2) & ~7ull;
					len = 8;
				} else if (w == 2) {
					a += S - 1;
					len = 1;
				}
				coll_dmabuf_span(a, len, base, page, &st, &en);
				got = dmabuf_try(st, en - st, what, sizeof(what));
				off = got < 0 ? -1 :
				      coll_dmabuf_offset(a, base, size, page, st,
							 en, (uint64_t)got);
				ok = off >= 0;
				if (ok)
					snprintf(what + strlen(what),
						 sizeof(what) - strlen(what),
						 ": %s, offset %lld",
						 got == (off_t)(en - st) ?
						 "exactly the range" :
						 "the whole allocation",
						 (long long)off);
				tried++;
				failed += !ok;
				printf("#   %s: libcoll asks [+%llu, +%llu): %s%s\n",
				       wn[w], (unsigned long long)(st - base),
				       (unsigned long long)(en - base), what,
				       ok ? "" : "  <-- FAILS");
				if (w == 1 && S >= 3 * page) {
					st = a & ~(page - 1);
					dmabuf_try(st, page, what, sizeof(what));
					printf("#     its page alone [+%llu, +%llu): "
					       "%s\n", (unsigned long long)(st - base),
					       (unsigned long long)(st - base + page),
					       what);
				}
				if (w)
					continue;
				dmabuf_try(a, len, what, sizeof(what));
				printf("#     exact bytes [+0, +%zu): %s\n", S, what);
				dmabuf_try(base, size, what, sizeof(what));
				printf("#     allocation [+0, +%zu): %s\n", size,
				       what);
				st = base & ~(page - 1);
				en = (base + size + page - 1) & ~(page - 1);
				dmabuf_try(st, en - st, what, sizeof(what));
				printf("#     pages around it [-%llu, +%llu): %s\n",
				       (unsigned long long)(base - st),
				       (unsigned long long)(en - base), what);
			}
		}
	}
	for (i = 0; i < NS; i++)
		for (j = 0; j < 2; j++)
			cm.free(p[i][j]);
	tap(!failed, "dma-buf: %u exports of libcoll's ranges in %u "
	    "allocations, each exactly its range or the whole allocation: "
	    "%u failed%s",
	    tried, NS * 2, failed, cm.standin ? " # the stand-in's rules, "
	    "not a driver's" : "");
}

static void *load_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	long len;
	void *p;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	p = len > 0 ? malloc((size_t)len) : NULL;
	if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
		free(p);
		p = NULL;
	}
	fclose(f);
	return p;
}

int main(int argc, char **argv)
{
	const char *fatbin = "build/kernels/kcoll_kernels.fatbin";
	size_t bytes = 256u << 20, n = 1000003;
	int opt, v64 = 0, dmabuf = 0, order = 0, flush = 0, sms = 1;
	char why[160], name[128] = "?";
	void *stream = NULL, *image;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "f:s:n:")) != -1) {
		switch (opt) {
		case 'f': fatbin = optarg; break;
		case 's': bytes = strtoull(optarg, NULL, 0) << 20; break;
		case 'n': n = strtoull(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: kcoll-gpucheck [-f fatbin] "
				"[-s MiB] [-n elements]\n");
			return 2;
		}
	}
	if (cm_open(why, sizeof(why))) {
		printf("1..0 # SKIP no GPU to check: %s\n", why);
		return 0;
	}
	if (!cm.dev_attr || !cm.module_load || !cm.module_fn || !cm.launch ||
	    !cm.host_register || !cm.host_dptr || !cm.wait64 || !cm.write64 ||
	    !cm.dtod) {
		printf("Bail out! libcuda.so.1 lacks entry points kcoll uses\n");
		return 1;
	}
	if (cm.standin)
		label = "[stand-in CUDA driver, no GPU] ";
	if (cm.dev_name)
		cm.dev_name(name, sizeof(name), 0);
	printf("# kcoll-gpucheck on %s\n", name);
	cm.dev_attr(&v64, 122, 0);	/* CAN_USE_64_BIT_STREAM_MEM_OPS */
	cm.dev_attr(&dmabuf, 124, 0);	/* DMA_BUF_SUPPORTED */
	cm.dev_attr(&order, 118, 0);	/* GPU_DIRECT_RDMA_WRITES_ORDERING */
	cm.dev_attr(&flush, 98, 0);	/* CAN_FLUSH_REMOTE_WRITES */
	cm.dev_attr(&sms, 16, 0);	/* MULTIPROCESSOR_COUNT */
	tap(v64, "attribute: 64-bit stream memory operations %s", v64 ? "yes" :
	    "NO (NVreg_EnableStreamMemOPs=1 enables them)");
	tap(dmabuf, "attribute: dma-buf export %s", dmabuf ? "yes" :
	    "NO (needs NVIDIA's open kernel modules)");
	printf("# GPUDirect RDMA write ordering %d (100: owner, 200: all "
	       "devices; below: libcoll flushes), flush of remote writes %s, "
	       "%d SMs\n", order, flush ? "yes" : "no", sms);
	image = load_file(fatbin);
	if (!image) {
		printf("Bail out! no fatbin at %s (make kernels)\n", fatbin);
		return 1;
	}
	need(cm.module_load(&g_module, image), "cuModuleLoadData");
	need(cm.stream_create(&stream, 1), "cuStreamCreate");
	check_kernels(stream, sms, n);
	check_bandwidth(stream, sms, bytes, cm.standin ? 2 : 20);
	check_protocol(stream, sms);
	check_dmabuf(dmabuf);
	printf("1..%u\n# kcoll-gpucheck: %u passed, %u failed\n", tap_n,
	       tap_n - tap_fail, tap_fail);
	return tap_fail ? 1 : 0;
}
