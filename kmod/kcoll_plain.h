/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Environment shim for kcoll's plain-logic sources: the files that hold no
 * kernel state (ring arithmetic, descriptor validation, later the schedules)
 * include this instead of kernel headers, so the same sources build into the
 * module, the host unit tests, the fuzzers and the simulator.
 */
#ifndef KCOLL_PLAIN_H
#define KCOLL_PLAIN_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/errno.h>
#include <linux/stddef.h>
#include <linux/build_bug.h>
#include <linux/math64.h>
#include <linux/nospec.h>
#include <asm/byteorder.h>
#define KCOLL_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
/* @i, known to be below @n, also under speculation (a user's index). */
#define kcoll_index_nospec(i, n) array_index_nospec(i, n)
/* u64 / u64, also on 32-bit kernels (no libgcc __udivdi3 there). */
static inline u64 kcoll_div64(u64 a, u64 b)
{
	return div64_u64(a, b);
}
#else
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <errno.h>
#include <linux/types.h>
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;
typedef int64_t s64;
#include <endian.h>
#define KCOLL_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#define kcoll_index_nospec(i, n) (i)
#define le16_to_cpu(x) le16toh(x)
#define le32_to_cpu(x) le32toh(x)
#define le64_to_cpu(x) le64toh(x)
#define cpu_to_le16(x) htole16(x)
#define cpu_to_le32(x) htole32(x)
#define cpu_to_le64(x) htole64(x)
static inline u64 kcoll_div64(u64 a, u64 b)
{
	return a / b;
}
#endif

#include "../uapi/linux/kcoll.h"

#endif /* KCOLL_PLAIN_H */
