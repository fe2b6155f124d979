// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll reductions, 64-byte GCC vectors (AVX-512F/BW/VL; fp16 through the
 * AVX-512F conversions). Built with -mavx512f -mavx512bw -mavx512vl -mf16c;
 * call only on CPUs with all four and with the ZMM/opmask state enabled by
 * the OS (the kernel checks X86_FEATURE_AVX512F/BW/VL, F16C, OSXSAVE and
 * cpu_has_xfeatures(SSE | YMM | AVX512)). See kcoll_reduce_body.h.
 *
 * Choice: the module prefers this over AVX2 whenever it is usable and
 * passes the load-time self-test (kcoll_reduce_init() keeps the last
 * usable implementation in enum order). On CPUs whose cores lower their
 * clock while running 512-bit floating point (Intel Skylake-SP, Cascade
 * Lake, Cooper Lake) that can slow whatever else runs on the core for a
 * while after a reduction, and above the L2 size the reduction is memory
 * bound, so AVX2 might be the better pick there. Kept simple on purpose:
 * no knob to cap the width; AVX-512 is used wherever it works, which is
 * the right choice on Ice Lake and later and on AMD Zen 4/5, where
 * 512-bit adds, multiplies and compares do not lower the clock (or hardly).
 */
#define KCOLL_VEC_BYTES 64
#include "kcoll_reduce_body.h"

KCOLL_REDUCE_DEFINE_TABLE(kcoll_reduce_avx512_table, "avx512");
