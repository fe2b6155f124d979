// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel side of the CPU reductions: picks the implementation for this CPU
 * and proves it against the scalar one at load, inside
 * kernel_fpu_begin()/end(). (The collectives will call the chosen table in
 * bounded FPU sections from process context.) No floating point in this file: the
 * arithmetic lives in kcoll_reduce_{scalar,sse2,avx2}.c, built with FPU
 * flags (see kmod/Kbuild).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/random.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <asm/cpufeature.h>
#include <asm/fpu/api.h>

#include "kcoll.h"
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
	pr_info("reduce: using %s\n", kcoll_reduce_impl_active());
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
