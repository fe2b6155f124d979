/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * kcoll plain logic: ring geometry, index arithmetic and descriptor
 * validation. No kernel headers: see kcoll_plain.h.
 */
#ifndef KCOLL_LOGIC_H
#define KCOLL_LOGIC_H

#include "kcoll_plain.h"

/* Hard limits, whatever sysfs says: keep index arithmetic in u32 and the
 * mapping well below 4 GiB so every offset fits the u32 offset fields. */
#define KCOLL_SQ_ENTRIES_LIMIT	(1U << 15)
#define KCOLL_CQ_ENTRIES_LIMIT	(1U << 16)
#define KCOLL_CACHELINE		64U
#define KCOLL_PAGE_SIZE		4096U

/* Compile-time ABI checks, shared by the module and every userspace build. */
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_sqe) == 64, "SQE must be 64 bytes");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_cqe) == 16, "CQE must be 16 bytes");
KCOLL_STATIC_ASSERT(offsetof(struct kcoll_sqe, user_data) == 8, "sqe layout");
KCOLL_STATIC_ASSERT(offsetof(struct kcoll_sqe, comm_id) == 16, "sqe layout");
KCOLL_STATIC_ASSERT(offsetof(struct kcoll_sqe, count) == 24, "sqe layout");
KCOLL_STATIC_ASSERT(offsetof(struct kcoll_sqe, send_addr) == 32, "sqe layout");
KCOLL_STATIC_ASSERT(offsetof(struct kcoll_sqe, send_mr) == 48, "sqe layout");
KCOLL_STATIC_ASSERT(offsetof(struct kcoll_sqe, timeout_ms) == 56, "sqe layout");
KCOLL_STATIC_ASSERT(offsetof(struct kcoll_sqe, resv) == 60, "sqe layout");
KCOLL_STATIC_ASSERT(offsetof(struct kcoll_cqe, res) == 8, "cqe layout");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_sq_offsets) == 32, "sq_off size");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_cq_offsets) == 32, "cq_off size");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_query) == 80, "query size");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_setup) == 128, "setup size");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_enter) == 40, "enter size");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_eventfd) == 8, "eventfd size");
KCOLL_STATIC_ASSERT(KCOLL_OP_LAST <= 64, "ops_supported is a u64 mask");

/**
 * struct kcoll_ring_layout - where everything sits in the ring mapping.
 * Each index lives on its own cache line so producer and consumer do not
 * false-share; the SQE and CQE arrays are cache-line aligned.
 */
struct kcoll_ring_layout {
	u32 sq_entries;
	u32 cq_entries;
	struct kcoll_sq_offsets sq_off;
	struct kcoll_cq_offsets cq_off;
	u64 size;		/* total, rounded up to KCOLL_PAGE_SIZE */
};

/* Number of entries between two free-running indices. */
static inline u32 kcoll_ring_used(u32 head, u32 tail)
{
	return tail - head;	/* well defined: unsigned wrap-around */
}

/* A floating-point dtype (AVG is for these alone). */
static inline bool kcoll_dtype_is_float(u32 dtype)
{
	return dtype == KCOLL_DTYPE_FP16 || dtype == KCOLL_DTYPE_BF16 ||
	       dtype == KCOLL_DTYPE_FP32 || dtype == KCOLL_DTYPE_FP64 ||
	       dtype == KCOLL_DTYPE_FP8_E4M3 || dtype == KCOLL_DTYPE_FP8_E5M2;
}

static inline bool kcoll_is_pow2(u32 v)
{
	return v && !(v & (v - 1));
}

/* Smallest power of two >= v; 0 if there is none in u32 (v > 2^31). */
static inline u32 kcoll_roundup_pow2(u32 v)
{
	u32 r = 1;

	if (v > (1U << 31))
		return 0;
	while (r < v)
		r <<= 1;
	return r;
}

int kcoll_ring_size(u32 req_sq, u32 req_cq, u32 flags, u32 max_sq,
		    u32 max_cq, u32 *sq, u32 *cq);
void kcoll_ring_layout(u32 sq_entries, u32 cq_entries,
		       struct kcoll_ring_layout *l);

/*
 * How many SQEs may be consumed now. @sq_head is the kernel's private copy,
 * @sq_tail the value loaded (once) from the shared ring. Returns -EOVERFLOW if
 * the application published a tail more than @sq_entries ahead (a corrupted
 * ring), otherwise min(to_submit, queued).
 */
int kcoll_sq_ready(u32 sq_head, u32 sq_tail, u32 sq_entries, u32 to_submit);

/*
 * Free CQ slots that may be reserved for new descriptors. @cq_tail is the
 * kernel's private tail, @cq_head the value loaded (once) from the shared
 * ring, @reserved the slots already promised to in-flight descriptors. A
 * corrupted head (more than @cq_entries behind the tail, or ahead of it) is
 * treated as a full ring: nothing new is accepted until it is sane again.
 */
u32 kcoll_cq_space(u32 cq_head, u32 cq_tail, u32 cq_entries, u32 reserved);

/* CQEs ready for the application, clamped to the ring size. */
u32 kcoll_cq_ready(u32 cq_head, u32 cq_tail, u32 cq_entries);

/* True if the @n bytes at @p are all zero (reserved fields, ioctl input). */
bool kcoll_all_zero(const void *p, size_t n);

/* Validate a copied SQE: 0, or the -errno its CQE will carry. */
int kcoll_sqe_check(const struct kcoll_sqe *sqe);

/* Validate the fixed parts of the ioctl arguments. */
int kcoll_setup_check(const struct kcoll_setup *p);
int kcoll_enter_check(const struct kcoll_enter *e, u32 sq_entries,
		      u32 cq_entries);

/* Human-readable opcode name, "?" for unknown values. */
const char *kcoll_op_name(u32 opcode);

#endif /* KCOLL_LOGIC_H */
