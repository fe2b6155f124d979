// SPDX-License-Identifier: GPL-2.0 OR MIT
/* kcoll reductions, 16-byte GCC vectors (SSE2). See kcoll_reduce_body.h. */
#define KCOLL_VEC_BYTES 16
#include "kcoll_reduce_body.h"

KCOLL_REDUCE_DEFINE_TABLE(kcoll_reduce_sse2_table, "sse2");
