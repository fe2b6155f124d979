// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll reductions, plain C implementation, and the dispatch helpers.
 * See kcoll_reduce_body.h. Built with SSE enabled (kernel: CC_FLAGS_FPU).
 */
#define KCOLL_VEC_BYTES 0
#include "kcoll_reduce_body.h"

KCOLL_REDUCE_DEFINE_TABLE(kcoll_reduce_scalar_table, "scalar");

static const struct kcoll_reduce_table *
kcoll_reduce_table_of(enum kcoll_reduce_impl impl)
{
	switch (impl) {
	case KCOLL_REDUCE_SCALAR:
		return &kcoll_reduce_scalar_table;
#if defined(__x86_64__)
	case KCOLL_REDUCE_SSE2:
		return &kcoll_reduce_sse2_table;
	case KCOLL_REDUCE_AVX2:
		return &kcoll_reduce_avx2_table;
	case KCOLL_REDUCE_AVX512:
		return &kcoll_reduce_avx512_table;
#endif
	default:
		return NULL;
	}
}

kcoll_reduce_fn kcoll_reduce_get(enum kcoll_reduce_impl impl,
				 unsigned int dtype, unsigned int redop)
{
	const struct kcoll_reduce_table *t = kcoll_reduce_table_of(impl);

	if (!t || dtype >= KCOLL_DTYPE_LAST || redop >= KCOLL_REDOP_LAST)
		return NULL;
	return t->fn[dtype][redop];
}

int kcoll_reduce_avg_finish(enum kcoll_reduce_impl impl, void *dst, size_t n,
			    unsigned int dtype, u32 nranks)
{
	const struct kcoll_reduce_table *t = kcoll_reduce_table_of(impl);

	if (!t || dtype >= KCOLL_DTYPE_LAST || !t->avg_finish[dtype] ||
	    !nranks)
		return -EINVAL;
	t->avg_finish[dtype](dst, n, nranks);
	return 0;
}

size_t kcoll_dtype_size(unsigned int dtype)
{
	switch (dtype) {
	case KCOLL_DTYPE_INT8:
	case KCOLL_DTYPE_UINT8:
	case KCOLL_DTYPE_FP8_E4M3:
	case KCOLL_DTYPE_FP8_E5M2:
		return 1;
	case KCOLL_DTYPE_FP16:
	case KCOLL_DTYPE_BF16:
		return 2;
	case KCOLL_DTYPE_INT32:
	case KCOLL_DTYPE_UINT32:
	case KCOLL_DTYPE_FP32:
		return 4;
	case KCOLL_DTYPE_INT64:
	case KCOLL_DTYPE_UINT64:
	case KCOLL_DTYPE_FP64:
		return 8;
	default:
		return 0;
	}
}

const char *kcoll_reduce_impl_name(enum kcoll_reduce_impl impl)
{
	const struct kcoll_reduce_table *t = kcoll_reduce_table_of(impl);

	return t ? t->name : "?";
}
