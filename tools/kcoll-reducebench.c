// SPDX-License-Identifier: MIT
/*
 * kcoll-reducebench: throughput of the CPU reductions (kmod/kcoll_reduce*)
 * against memcpy of the same number of bytes, measured in the same run.
 *
 *	kcoll-reducebench [-s SIZE]... [-n SAMPLES]
 *
 * SIZE is the dst buffer size in bytes (suffix K, M or G; may be repeated
 * or comma-separated); default 64K, 1M and 16M. For every size, dtype
 * (fp32, bf16, int32, fp64; all SUM) and implementation the CPU supports,
 * it prints the median over SAMPLES of dst bytes reduced per second
 * (n * elem_size / time), the median memcpy rate of the same byte count
 * (memcpy(dst2, src, bytes)), and their ratio.
 * Target (issue): fp32 sum >= 0.8x memcpy.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kcoll_reduce.h"

#define MAX_SIZES	16
#define WARMUP		3

static unsigned int nsamples = 21;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static bool impl_supported(enum kcoll_reduce_impl impl)
{
	switch (impl) {
	case KCOLL_REDUCE_SCALAR:
		return true;
#if defined(__x86_64__)
	case KCOLL_REDUCE_SSE2:
		return true;
	case KCOLL_REDUCE_AVX2:
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx2") &&
		       __builtin_cpu_supports("f16c");
	case KCOLL_REDUCE_AVX512:
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx512f") &&
		       __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx512vl") &&
		       __builtin_cpu_supports("f16c");
#endif
	default:
		return false;
	}
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if ((*end && *end != ',') || !v)
		return -1;
	*out = (size_t)v;
	return (int)(end - s);
}

/* Loop count per sample so that one sample moves about 8 MiB. */
static unsigned int inner_loops(size_t bytes)
{
	size_t k = (8u << 20) / bytes;

	return k ? (unsigned int)k : 1;
}

static volatile uint8_t sink;

static double bench_memcpy(void *dst, const void *src, size_t bytes)
{
	unsigned int k = inner_loops(bytes);
	double t[256];

	for (unsigned int w = 0; w < WARMUP + nsamples; w++) {
		double t0 = now_s();

		for (unsigned int j = 0; j < k; j++) {
			memcpy(dst, src, bytes);
			__asm__ volatile("" : : "r"(dst) : "memory");
		}
		if (w >= WARMUP)
			t[w - WARMUP] = (now_s() - t0) / k;
	}
	sink = ((uint8_t *)dst)[bytes - 1];
	return (double)bytes / median(t, nsamples) * 1e-9;
}

static double bench_reduce(kcoll_reduce_fn fn, void *dst, const void *src,
			   size_t n, size_t bytes)
{
	unsigned int k = inner_loops(bytes);
	double t[256];

	for (unsigned int w = 0; w < WARMUP + nsamples; w++) {
		double t0 = now_s();

		for (unsigned int j = 0; j < k; j++) {
			fn(dst, src, n);
			__asm__ volatile("" : : "r"(dst) : "memory");
		}
		if (w >= WARMUP)
			t[w - WARMUP] = (now_s() - t0) / k;
	}
	sink = ((uint8_t *)dst)[bytes - 1];
	return (double)bytes / median(t, nsamples) * 1e-9;
}

/* Benign data: no NaN, infinity or subnormal on any path. */
static void fill(void *buf, size_t n, unsigned int dtype, int seed)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t v = (uint32_t)(i * 2654435761u + (uint32_t)seed);

		switch (dtype) {
		case KCOLL_DTYPE_FP32:
			((float *)buf)[i] = 1.0f + (float)(v & 0xff) / 256;
			break;
		case KCOLL_DTYPE_FP64:
			((double *)buf)[i] = 1.0 + (double)(v & 0xff) / 256;
			break;
		case KCOLL_DTYPE_BF16:	/* 1.0 .. 2.0 */
			((uint16_t *)buf)[i] = (uint16_t)(0x3f80 | (v & 0x7f));
			break;
		case KCOLL_DTYPE_FP8_E4M3:	/* 1.0 .. 1.875 */
			((uint8_t *)buf)[i] = (uint8_t)(0x38 | (v & 7));
			break;
		default:
			((uint32_t *)buf)[i] = v;
			break;
		}
	}
}

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s [-s SIZE[,SIZE...]]... [-n SAMPLES(1..255)]\n",
		prog);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct { unsigned int dtype; const char *name; } dts[] = {
		{ KCOLL_DTYPE_FP32, "fp32" }, { KCOLL_DTYPE_BF16, "bf16" },
		{ KCOLL_DTYPE_INT32, "int32" }, { KCOLL_DTYPE_FP64, "fp64" },
		{ KCOLL_DTYPE_FP8_E4M3, "fp8e4m3" },
	};
	size_t sizes[MAX_SIZES] = { 64u << 10, 1u << 20, 16u << 20 };
	unsigned int nsizes = 3;
	bool user_sizes = false;
	double worst_fp32 = 1e30;
	int opt;

	while ((opt = getopt(argc, argv, "s:n:h")) != -1) {
		switch (opt) {
		case 's': {
			const char *p = optarg;

			if (!user_sizes) {
				nsizes = 0;
				user_sizes = true;
			}
			while (*p) {
				int len;

				if (nsizes == MAX_SIZES)
					usage(argv[0]);
				len = parse_size(p, &sizes[nsizes++]);
				if (len < 0)
					usage(argv[0]);
				p += len;
				if (*p == ',')
					p++;
			}
			break;
		}
		case 'n':
			nsamples = (unsigned int)atoi(optarg);
			if (nsamples < 1 || nsamples > 255)
				usage(argv[0]);
			break;
		default:
			usage(argv[0]);
		}
	}

	printf("# kcoll-reducebench: dst bytes reduced per second (dst OP= src), "
	       "median of %u samples,\n# vs memcpy of the same bytes; "
	       "target: fp32 sum >= 0.80x memcpy\n", nsamples);
	printf("%-9s %-6s %-7s %12s %12s %7s\n", "size", "dtype", "impl",
	       "reduce GB/s", "memcpy GB/s", "ratio");

	for (unsigned int si = 0; si < nsizes; si++) {
		size_t bytes = sizes[si];

		for (unsigned int di = 0; di < sizeof(dts) / sizeof(dts[0]);
		     di++) {
			size_t es = kcoll_dtype_size(dts[di].dtype);
			size_t n = bytes / es, nb = n * es;
			void *dst, *src, *dst2;

			if (!n)
				continue;
			if (posix_memalign(&dst, 64, nb) ||
			    posix_memalign(&src, 64, nb) ||
			    posix_memalign(&dst2, 64, nb)) {
				fprintf(stderr, "out of memory\n");
				return 1;
			}
			fill(dst, n, dts[di].dtype, 1);
			fill(src, n, dts[di].dtype, 2);
			memset(dst2, 0, nb);
			for (int impl = 0; impl < KCOLL_REDUCE_NR; impl++) {
				kcoll_reduce_fn fn;
				double mc, rd;
				char sz[32];

				if (!impl_supported(impl))
					continue;
				fn = kcoll_reduce_get(impl, dts[di].dtype,
						      KCOLL_REDOP_SUM);
				if (!fn)
					continue;
				mc = bench_memcpy(dst2, src, nb);
				rd = bench_reduce(fn, dst, src, n, nb);
				if (nb % (1u << 20) == 0)
					snprintf(sz, sizeof(sz), "%zuM", nb >> 20);
				else if (nb % 1024 == 0)
					snprintf(sz, sizeof(sz), "%zuK", nb >> 10);
				else
					snprintf(sz, sizeof(sz), "%zu", nb);
				printf("%-9s %-6s %-7s %12.2f %12.2f %6.2fx%s\n",
				       sz, dts[di].name,
				       kcoll_reduce_impl_name(impl), rd, mc,
				       rd / mc,
				       dts[di].dtype == KCOLL_DTYPE_FP32 &&
				       rd / mc < 0.8 ? "  (below 0.8)" : "");
				if (dts[di].dtype == KCOLL_DTYPE_FP32 &&
				    impl != KCOLL_REDUCE_SCALAR &&
				    rd / mc < worst_fp32)
					worst_fp32 = rd / mc;
			}
			free(dst);
			free(src);
			free(dst2);
		}
	}
	if (worst_fp32 < 1e30)
		printf("# fp32 sum, vector impls (sse2/avx2/avx512): lowest ratio "
		       "%.2fx (target 0.80x)\n", worst_fp32);
	return 0;
}
