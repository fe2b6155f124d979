// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel side of the CPU reductions: picks the implementation for this CPU
 * and proves it against the scalar one at load, inside
 * kernel_fpu_begin()/end(). The engine (kcoll_progress.c) calls the chosen
 * table in FPU sections of one chunk, from process context. It also offers
 * an in-kernel benchmark in debugfs. No floating point in this file: the
 * arithmetic lives in kcoll_reduce_{scalar,sse2,avx2,avx512}.c, built with
 * FPU flags (see kmod/Kbuild).
 *
 * Choice: the widest usable implementation that passes the self-test, so
 * AVX-512 over AVX2 over SSE2. On the few CPUs that lower their clock for
 * 512-bit floating point (Skylake-SP to Cooper Lake) AVX2 might serve the
 * rest of the system better; there is deliberately no knob for that (see
 * kcoll_reduce_avx512.c).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/random.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/debugfs.h>
#include <linux/ktime.h>
#include <linux/math64.h>
#include <linux/seq_file.h>
#include <linux/vmalloc.h>
#include <asm/cpufeature.h>
#include <asm/fpu/api.h>

#include "kcoll_reduce.h"

static enum kcoll_reduce_impl kcoll_reduce_best = KCOLL_REDUCE_SCALAR;

static bool kcoll_reduce_usable(enum kcoll_reduce_impl impl)
{
	switch (impl) {
	case KCOLL_REDUCE_SCALAR:
	case KCOLL_REDUCE_SSE2:		/* baseline on x86-64 */
		return true;
	case KCOLL_REDUCE_AVX2:
		return boot_cpu_has(X86_FEATURE_AVX2) &&
		       boot_cpu_has(X86_FEATURE_F16C) &&
		       boot_cpu_has(X86_FEATURE_OSXSAVE);
	case KCOLL_REDUCE_AVX512:
		/* and the OS must save/restore the opmask and ZMM state */
		return boot_cpu_has(X86_FEATURE_AVX512F) &&
		       boot_cpu_has(X86_FEATURE_AVX512BW) &&
		       boot_cpu_has(X86_FEATURE_AVX512VL) &&
		       boot_cpu_has(X86_FEATURE_F16C) &&
		       boot_cpu_has(X86_FEATURE_OSXSAVE) &&
		       cpu_has_xfeatures(XFEATURE_MASK_SSE | XFEATURE_MASK_YMM |
					 XFEATURE_MASK_AVX512, NULL);
	default:
		return false;
	}
}

const char *kcoll_reduce_impl_active(void)
{
	return kcoll_reduce_impl_name(kcoll_reduce_best);
}

/*
 * Random operands that are finite and far from overflow for the float
 * types (built from integer bits: no floating point here), so every
 * implementation must produce identical bits.
 */
static void kcoll_reduce_fill(void *buf, size_t n, unsigned int dtype)
{
	size_t i;

	get_random_bytes(buf, n * kcoll_dtype_size(dtype));
	for (i = 0; i < n; i++) {
		switch (dtype) {
		case KCOLL_DTYPE_FP16: {
			u16 *h = buf;

			h[i] = (h[i] & 0x83ff) | ((8 + h[i] % 16) << 10);
			break;
		}
		case KCOLL_DTYPE_BF16: {
			u16 *h = buf;

			h[i] = (h[i] & 0x807f) | ((100 + h[i] % 50) << 7);
			break;
		}
		case KCOLL_DTYPE_FP32: {
			u32 *f = buf;

			f[i] = (f[i] & 0x807fffff) | ((100 + f[i] % 50) << 23);
			break;
		}
		case KCOLL_DTYPE_FP64: {
			u64 *d = buf;

			d[i] = (d[i] & 0x800fffffffffffffULL) |
			       ((u64)(1000 + d[i] % 50) << 52);
			break;
		}
		}
	}
}

/*
 * At load: every usable implementation must match the scalar one bit for
 * bit on every (dtype, redop) pair, over a length with a vector body and a
 * scalar tail. An implementation that does not is not used.
 */
static int kcoll_reduce_selftest(enum kcoll_reduce_impl impl)
{
	const size_t n = 203;	/* vector body + tail for every width */
	u8 *a, *b, *src;
	unsigned int dt, op;
	int err = 0;

	a = kmalloc(n * 8, GFP_KERNEL);
	b = kmalloc(n * 8, GFP_KERNEL);
	src = kmalloc(n * 8, GFP_KERNEL);
	if (!a || !b || !src) {
		err = -ENOMEM;
		goto out_free;
	}
	for (dt = 1; dt < KCOLL_DTYPE_LAST && !err; dt++) {
		for (op = 1; op < KCOLL_REDOP_LAST; op++) {
			kcoll_reduce_fn ref = kcoll_reduce_get(KCOLL_REDUCE_SCALAR, dt, op);
			kcoll_reduce_fn fn = kcoll_reduce_get(impl, dt, op);
			size_t bytes = n * kcoll_dtype_size(dt);

			if (!ref != !fn) {
				err = -EINVAL;
				break;
			}
			if (!ref)
				continue;
			kcoll_reduce_fill(a, n, dt);
			kcoll_reduce_fill(src, n, dt);
			memcpy(b, a, bytes);
			kernel_fpu_begin();
			ref(a, src, n);
			fn(b, src, n);
			kernel_fpu_end();
			if (memcmp(a, b, bytes)) {
				pr_err("reduce: %s differs from scalar for dtype %u op %u\n",
				       kcoll_reduce_impl_name(impl), dt, op);
				err = -EIO;
				break;
			}
		}
	}
out_free:
	kfree(src);
	kfree(b);
	kfree(a);
	return err;
}

static u32 kcoll_gamma_ps;

static u64 kcoll_bench_one(u8 *dst, const u8 *src, size_t bytes, bool reduce,
			   unsigned int iters);

/*
 * The cost model's gamma: picoseconds per byte of the engine's fp32 SUM on
 * one 64 KiB chunk that is in cache, as the engine reduces a chunk that has
 * just landed (the best of three runs of 16). About a millisecond.
 */
static void kcoll_reduce_calibrate(void)
{
	const size_t bytes = 64 << 10;
	u64 ns = U64_MAX;
	u8 *src, *dst;
	int i;

	src = kzalloc(bytes, GFP_KERNEL);
	dst = kzalloc(bytes, GFP_KERNEL);
	if (src && dst) {
		kcoll_bench_one(dst, src, bytes, true, 1);
		for (i = 0; i < 3; i++)
			ns = min(ns, kcoll_bench_one(dst, src, bytes, true, 16));
		kcoll_gamma_ps = (u32)clamp_t(u64, div64_u64(ns * 1000,
							     bytes * 16),
					      1, 1000000);
	}
	kfree(src);
	kfree(dst);
}

u32 kcoll_reduce_gamma_ps(void)
{
	return kcoll_gamma_ps;
}

int kcoll_reduce_init(void)
{
	enum kcoll_reduce_impl impl;
	int err;

	for (impl = KCOLL_REDUCE_SSE2; impl < KCOLL_REDUCE_NR; impl++) {
		if (!kcoll_reduce_usable(impl))
			continue;
		err = kcoll_reduce_selftest(impl);
		if (err == -ENOMEM)
			return err;
		if (err)
			continue;
		kcoll_reduce_best = impl;
	}
	kcoll_reduce_calibrate();
	pr_info("reduce: using %s, fp32 sum %u ps/B\n",
		kcoll_reduce_impl_active(), kcoll_gamma_ps);
	return 0;
}

/* The reduction the engine uses: the implementation chosen at load. */
kcoll_reduce_fn kcoll_reduce_active(unsigned int dtype, unsigned int redop)
{
	return kcoll_reduce_get(kcoll_reduce_best, dtype, redop);
}

/* AVG finishing step with the implementation chosen at load. */
int kcoll_reduce_active_avg(void *dst, size_t n, unsigned int dtype,
			    u32 nranks)
{
	return kcoll_reduce_avg_finish(kcoll_reduce_best, dst, n, dtype, nranks);
}

/*
 * debugfs kcoll/reduce_bench: reading it measures, in the kernel, the
 * engine's fp32 SUM (the active implementation, in kernel_fpu sections of
 * one chunk) against memcpy of the same bytes, for a few buffer sizes.
 * For benchmarks only (docs/PERFORMANCE.md); takes about a second.
 */
#define KCOLL_BENCH_MAX		(16U << 20)
#define KCOLL_BENCH_CHUNK	(256U << 10)

static u64 kcoll_bench_one(u8 *dst, const u8 *src, size_t bytes, bool reduce,
			   unsigned int iters)
{
	kcoll_reduce_fn fn = kcoll_reduce_active(KCOLL_DTYPE_FP32,
						 KCOLL_REDOP_SUM);
	unsigned int i;
	size_t off;
	ktime_t t0;

	t0 = ktime_get();
	for (i = 0; i < iters; i++) {
		for (off = 0; off < bytes; off += KCOLL_BENCH_CHUNK) {
			size_t len = min_t(size_t, KCOLL_BENCH_CHUNK,
					   bytes - off);

			if (reduce) {
				kernel_fpu_begin();
				fn(dst + off, src + off, len / 4);
				kernel_fpu_end();
			} else {
				memcpy(dst + off, src + off, len);
			}
		}
		cond_resched();
	}
	return ktime_to_ns(ktime_sub(ktime_get(), t0)) ?: 1;
}

static int kcoll_bench_show(struct seq_file *m, void *unused)
{
	static const size_t sizes[] = { 64 << 10, 1 << 20, 16 << 20 };
	u8 *src, *dst;
	unsigned int i;

	src = vzalloc(KCOLL_BENCH_MAX);
	dst = vzalloc(KCOLL_BENCH_MAX);
	if (!src || !dst) {
		vfree(src);
		vfree(dst);
		return -ENOMEM;
	}
	seq_printf(m, "# impl %s; MB/s of destination bytes, same buffers\n",
		   kcoll_reduce_impl_active());
	seq_puts(m, "# bytes fp32_sum_MBps memcpy_MBps ratio_x1000\n");
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		size_t bytes = sizes[i];
		unsigned int iters = max_t(unsigned int, 4,
					   (64U << 20) / bytes);
		u64 tr, tc, mbr, mbc;

		/* Warm both paths once, then take the better of two runs. */
		kcoll_bench_one(dst, src, bytes, true, 1);
		tr = min(kcoll_bench_one(dst, src, bytes, true, iters),
			 kcoll_bench_one(dst, src, bytes, true, iters));
		tc = min(kcoll_bench_one(dst, src, bytes, false, iters),
			 kcoll_bench_one(dst, src, bytes, false, iters));
		mbr = div64_u64((u64)bytes * iters * 1000, tr);
		mbc = div64_u64((u64)bytes * iters * 1000, tc);
		seq_printf(m, "%zu %llu %llu %llu\n", bytes, mbr, mbc,
			   div64_u64(mbr * 1000, mbc ?: 1));
	}
	vfree(src);
	vfree(dst);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kcoll_bench);

void kcoll_reduce_debugfs_init(struct dentry *dir)
{
	debugfs_create_file("reduce_bench", 0400, dir, NULL,
			    &kcoll_bench_fops);
}
