// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll reductions, 32-byte GCC vectors (AVX2, fp16 through F16C).
 * Built with -mavx2 -mf16c; call only on CPUs with both.
 * See kcoll_reduce_body.h.
 */
#define KCOLL_VEC_BYTES 32
#include "kcoll_reduce_body.h"

KCOLL_REDUCE_DEFINE_TABLE(kcoll_reduce_avx2_table, "avx2");
