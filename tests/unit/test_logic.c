// SPDX-License-Identifier: MIT
/*
 * Host unit tests of kmod/kcoll_logic.c (ring geometry, index arithmetic,
 * descriptor and ioctl-argument validation). Built directly from the module
 * source:
 *	gcc -I uapi -I kmod tests/unit/test_logic.c kmod/kcoll_logic.c
 *
 * Where it helps, the expected results come from small reference models
 * written here from the documented contract (linux/kcoll.h and
 * kcoll_logic.h), not from the implementation.
 */
#include <limits.h>
#include <stdint.h>

#include "kcoll_logic.h"
#include "unit.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static u32 ref_roundup_pow2(u32 v)
{
	u64 r = 1;

	while (r < v)
		r <<= 1;
	return (u32)r;
}

static bool ref_is_pow2(u64 v)
{
	return v && !(v & (v - 1));
}

static u32 min_u32(u32 a, u32 b)
{
	return a < b ? a : b;
}

static void test_pow2_helpers(void)
{
	u32 v;
	int i;

	UNIT_CHECK(!kcoll_is_pow2(0));
	UNIT_CHECK(kcoll_is_pow2(1));
	UNIT_CHECK(kcoll_is_pow2(1U << 31));
	UNIT_CHECK(!kcoll_is_pow2(UINT32_MAX));
	UNIT_CHECK(!kcoll_is_pow2(3));
	for (i = 0; i < 32; i++) {
		UNIT_CHECK(kcoll_is_pow2(1U << i));
		if (i > 1)
			UNIT_CHECK(!kcoll_is_pow2((1U << i) + 1));
		UNIT_EQ_UINT(kcoll_roundup_pow2(1U << i), 1U << i);
		if (i < 31)
			UNIT_EQ_UINT(kcoll_roundup_pow2((1U << i) + 1),
				     1U << (i + 1));
	}
	/* Domain 1 <= v <= 2^31; above, there is no u32 answer: 0. */
	UNIT_EQ_UINT(kcoll_roundup_pow2((1U << 31) + 1), 0);
	UNIT_EQ_UINT(kcoll_roundup_pow2(UINT32_MAX), 0);
	for (v = 1; v <= 70000; v++)
		if (!UNIT_EQ_UINT(kcoll_roundup_pow2(v), ref_roundup_pow2(v)))
			break;
	UNIT_EQ_UINT(kcoll_ring_used(5, 5), 0);
	UNIT_EQ_UINT(kcoll_ring_used(UINT32_MAX, 3), 4);
	UNIT_EQ_UINT(kcoll_ring_used(UINT32_MAX - 9, UINT32_MAX), 9);
}

/* ------------------------------------------------------------------ */
/* kcoll_ring_size                                                     */
/* ------------------------------------------------------------------ */

static int ring_size(u32 req_sq, u32 req_cq, u32 flags, u32 max_sq,
		     u32 max_cq, u32 *sq, u32 *cq)
{
	*sq = *cq = 0xdeadbeef;
	return kcoll_ring_size(req_sq, req_cq, flags, max_sq, max_cq, sq, cq);
}

static void test_ring_size_zero(void)
{
	u32 sq, cq, f;

	for (f = 0; f <= KCOLL_SETUP_F_ALL; f++) {
		UNIT_EQ_INT(ring_size(0, 0, f, 4096, 8192, &sq, &cq), -EINVAL);
		UNIT_EQ_INT(ring_size(0, 16, f, 4096, 8192, &sq, &cq), -EINVAL);
		/* Zero limits: nothing can be created. */
		UNIT_EQ_INT(ring_size(1, 1, f, 0, 8192, &sq, &cq), -EINVAL);
		UNIT_EQ_INT(ring_size(1, 1, f, 4096, 0, &sq, &cq), -EINVAL);
	}
	/* CQSIZE with a zero CQ size. */
	UNIT_EQ_INT(ring_size(8, 0, KCOLL_SETUP_CQSIZE, 4096, 8192, &sq, &cq),
		    -EINVAL);
	UNIT_EQ_INT(ring_size(8, 0, KCOLL_SETUP_CQSIZE | KCOLL_SETUP_CLAMP,
			      4096, 8192, &sq, &cq), -EINVAL);
}

static void test_ring_size_basic(void)
{
	u32 sq, cq, req;

	UNIT_EQ_INT(ring_size(1, 0, 0, 4096, 8192, &sq, &cq), 0);
	UNIT_EQ_UINT(sq, 1);
	UNIT_EQ_UINT(cq, 2);
	UNIT_EQ_INT(ring_size(4096, 0, 0, 4096, 8192, &sq, &cq), 0);
	UNIT_EQ_UINT(sq, 4096);
	UNIT_EQ_UINT(cq, 8192);

	/* Non-power-of-two requests round up. */
	for (req = 1; req <= 4096; req++) {
		if (!UNIT_EQ_INT(ring_size(req, 0, 0, 4096, 8192, &sq, &cq), 0))
			break;
		UNIT_CHECK(ref_is_pow2(sq));
		UNIT_CHECK(sq >= req && sq < 2 * req);
		UNIT_EQ_UINT(sq, ref_roundup_pow2(req));
		UNIT_EQ_UINT(cq, 2 * sq);
		if (unit_fails())
			break;
	}
	UNIT_EQ_INT(ring_size(3, 0, 0, 4096, 8192, &sq, &cq), 0);
	UNIT_EQ_UINT(sq, 4);
	UNIT_EQ_INT(ring_size(1000, 0, 0, 4096, 8192, &sq, &cq), 0);
	UNIT_EQ_UINT(sq, 1024);
	UNIT_EQ_UINT(cq, 2048);
	/* Over the limit without CLAMP. */
	UNIT_EQ_INT(ring_size(4097, 0, 0, 4096, 8192, &sq, &cq), -EINVAL);
	UNIT_EQ_INT(ring_size(8192, 0, 0, 4096, 8192, &sq, &cq), -EINVAL);
}

static void test_ring_size_huge(void)
{
	u32 sq, cq;

	UNIT_EQ_INT(ring_size(UINT32_MAX, 0, 0, 4096, 8192, &sq, &cq), -EINVAL);
	UNIT_EQ_INT(ring_size(1U << 31, 0, 0, 4096, 8192, &sq, &cq), -EINVAL);
	UNIT_EQ_INT(ring_size(UINT32_MAX, 0, KCOLL_SETUP_CLAMP, 4096, 8192,
			      &sq, &cq), 0);
	UNIT_EQ_UINT(sq, 4096);
	UNIT_EQ_UINT(cq, 8192);

	/* Limits above the hard limits are cut down to them. */
	UNIT_EQ_INT(ring_size(UINT32_MAX, 0, KCOLL_SETUP_CLAMP, UINT32_MAX,
			      UINT32_MAX, &sq, &cq), 0);
	UNIT_EQ_UINT(sq, KCOLL_SQ_ENTRIES_LIMIT);
	UNIT_EQ_UINT(cq, KCOLL_CQ_ENTRIES_LIMIT);
	UNIT_EQ_INT(ring_size(KCOLL_SQ_ENTRIES_LIMIT + 1, 0, 0, UINT32_MAX,
			      UINT32_MAX, &sq, &cq), -EINVAL);
	UNIT_EQ_INT(ring_size(KCOLL_SQ_ENTRIES_LIMIT, 0, 0, UINT32_MAX,
			      UINT32_MAX, &sq, &cq), 0);
	UNIT_EQ_UINT(sq, KCOLL_SQ_ENTRIES_LIMIT);
	UNIT_EQ_UINT(cq, KCOLL_CQ_ENTRIES_LIMIT);
	UNIT_EQ_INT(ring_size(UINT32_MAX, UINT32_MAX, KCOLL_SETUP_F_ALL,
			      UINT32_MAX, UINT32_MAX, &sq, &cq), 0);
	UNIT_EQ_UINT(sq, KCOLL_SQ_ENTRIES_LIMIT);
	UNIT_EQ_UINT(cq, KCOLL_CQ_ENTRIES_LIMIT);
	UNIT_EQ_INT(ring_size(1, UINT32_MAX, KCOLL_SETUP_CQSIZE, UINT32_MAX,
			      UINT32_MAX, &sq, &cq), -EINVAL);
	UNIT_EQ_INT(ring_size(1, KCOLL_CQ_ENTRIES_LIMIT + 1, KCOLL_SETUP_CQSIZE,
			      UINT32_MAX, UINT32_MAX, &sq, &cq), -EINVAL);
	UNIT_EQ_INT(ring_size(1, KCOLL_CQ_ENTRIES_LIMIT, KCOLL_SETUP_CQSIZE,
			      UINT32_MAX, UINT32_MAX, &sq, &cq), 0);
	UNIT_EQ_UINT(cq, KCOLL_CQ_ENTRIES_LIMIT);
	/* The hard limits keep the mapping far below the u32 offset range. */
	UNIT_CHECK((u64)KCOLL_SQ_ENTRIES_LIMIT * sizeof(struct kcoll_sqe) +
		   (u64)KCOLL_CQ_ENTRIES_LIMIT * sizeof(struct kcoll_cqe) <
		   (1ULL << 31));
}

static void test_ring_size_clamp(void)
{
	u32 sq, cq;

	UNIT_EQ_INT(ring_size(5000, 0, KCOLL_SETUP_CLAMP, 4096, 8192, &sq, &cq),
		    0);
	UNIT_EQ_UINT(sq, 4096);
	UNIT_EQ_UINT(cq, 8192);
	/* Within the limits, CLAMP changes nothing. */
	UNIT_EQ_INT(ring_size(100, 0, KCOLL_SETUP_CLAMP, 4096, 8192, &sq, &cq),
		    0);
	UNIT_EQ_UINT(sq, 128);
	UNIT_EQ_UINT(cq, 256);
	/* CQ clamp. */
	UNIT_EQ_INT(ring_size(64, 100000, KCOLL_SETUP_CQSIZE, 4096, 8192, &sq,
			      &cq), -EINVAL);
	UNIT_EQ_INT(ring_size(64, 100000, KCOLL_SETUP_CQSIZE |
			      KCOLL_SETUP_CLAMP, 4096, 8192, &sq, &cq), 0);
	UNIT_EQ_UINT(sq, 64);
	UNIT_EQ_UINT(cq, 8192);
	UNIT_EQ_INT(ring_size(9000, 9000, KCOLL_SETUP_F_ALL, 4096, 8192, &sq,
			      &cq), 0);
	UNIT_EQ_UINT(sq, 4096);
	UNIT_EQ_UINT(cq, 8192);
	/* Clamped sizes stay powers of two when the limits are. */
	UNIT_EQ_INT(ring_size(300, 0, KCOLL_SETUP_CLAMP, 256, 1024, &sq, &cq),
		    0);
	UNIT_EQ_UINT(sq, 256);
	UNIT_EQ_UINT(cq, 512);
}

static void test_ring_size_cqsize(void)
{
	const u32 f = KCOLL_SETUP_CQSIZE;
	u32 sq, cq;

	UNIT_EQ_INT(ring_size(64, 64, f, 4096, 8192, &sq, &cq), 0);
	UNIT_EQ_UINT(sq, 64);
	UNIT_EQ_UINT(cq, 64);
	UNIT_EQ_INT(ring_size(64, 100, f, 4096, 8192, &sq, &cq), 0);
	UNIT_EQ_UINT(cq, 128);
	UNIT_EQ_INT(ring_size(64, 1024, f, 4096, 8192, &sq, &cq), 0);
	UNIT_EQ_UINT(cq, 1024);
	/* CQ smaller than SQ is rejected. */
	UNIT_EQ_INT(ring_size(64, 32, f, 4096, 8192, &sq, &cq), -EINVAL);
	UNIT_EQ_INT(ring_size(64, 1, f, 4096, 8192, &sq, &cq), -EINVAL);
	UNIT_EQ_INT(ring_size(4096, 2048, f | KCOLL_SETUP_CLAMP, 4096, 8192,
			      &sq, &cq), -EINVAL);
	/* ... also when the SQ only grows by rounding (5 -> 8 > 4). */
	UNIT_EQ_INT(ring_size(5, 4, f, 4096, 8192, &sq, &cq), -EINVAL);
	/* The comparison is between the rounded sizes: 63 -> 64. */
	UNIT_EQ_INT(ring_size(64, 63, f, 4096, 8192, &sq, &cq), 0);
	UNIT_EQ_UINT(cq, 64);
	UNIT_EQ_INT(ring_size(5, 7, f, 4096, 8192, &sq, &cq), 0);
	UNIT_EQ_UINT(sq, 8);
	UNIT_EQ_UINT(cq, 8);
	/* With CLAMP the SQ is clamped to the CQ limit as well, so the
	 * clamped CQ still holds every SQ slot. */
	UNIT_EQ_INT(ring_size(64, 1000, f | KCOLL_SETUP_CLAMP, 4096, 32, &sq,
			      &cq), 0);
	UNIT_EQ_UINT(sq, 32);
	UNIT_EQ_UINT(cq, 32);
	/* Without CLAMP an SQ above the CQ limit is refused. */
	UNIT_EQ_INT(ring_size(64, 32, f, 4096, 32, &sq, &cq), -EINVAL);
}

static void test_ring_size_cq_without_flag(void)
{
	static const u32 vals[] = { 1, 2, 64, 8192, 8193, UINT32_MAX };
	u32 sq, cq;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(vals); i++) {
		UNIT_EQ_INT(ring_size(16, vals[i], 0, 4096, 8192, &sq, &cq),
			    -EINVAL);
		UNIT_EQ_INT(ring_size(16, vals[i], KCOLL_SETUP_CLAMP, 4096,
				      8192, &sq, &cq), -EINVAL);
	}
}

static void test_ring_size_default_cq(void)
{
	u32 sq, cq, s, mc;

	/* Default CQ is twice the SQ ... */
	for (s = 1; s <= 4096; s <<= 1) {
		UNIT_EQ_INT(ring_size(s, 0, 0, 4096, 8192, &sq, &cq), 0);
		UNIT_EQ_UINT(cq, 2 * s);
	}
	/* ... capped by max_cq ... */
	UNIT_EQ_INT(ring_size(4096, 0, 0, 4096, 4096, &sq, &cq), 0);
	UNIT_EQ_UINT(sq, 4096);
	UNIT_EQ_UINT(cq, 4096);
	UNIT_EQ_INT(ring_size(1024, 0, 0, 4096, 1024, &sq, &cq), 0);
	UNIT_EQ_UINT(cq, 1024);
	UNIT_EQ_INT(ring_size(KCOLL_SQ_ENTRIES_LIMIT, 0, 0, UINT32_MAX,
			      UINT32_MAX, &sq, &cq), 0);
	UNIT_EQ_UINT(cq, 2 * KCOLL_SQ_ENTRIES_LIMIT);
	/* ... and the SQ may not exceed max_cq, since every SQ slot needs a
	 * CQ slot: refused, or clamped to max_cq with KCOLL_SETUP_CLAMP. */
	for (mc = 1; mc <= 8192; mc <<= 1) {
		for (s = 1; s <= 4096; s <<= 1) {
			int r = ring_size(s, 0, 0, 4096, mc, &sq, &cq);

			if (s > mc) {
				UNIT_EQ_INT(r, -EINVAL);
				UNIT_EQ_INT(ring_size(s, 0, KCOLL_SETUP_CLAMP, 4096,
						      mc, &sq, &cq), 0);
				UNIT_EQ_UINT(sq, mc);
				UNIT_EQ_UINT(cq, mc);
				continue;
			}
			if (!UNIT_EQ_INT(r, 0))
				return;
			UNIT_CHECK(cq >= sq);
			UNIT_CHECK(cq <= mc);
			UNIT_CHECK(ref_is_pow2(cq));
			UNIT_EQ_UINT(cq, 2 * s <= mc ? 2 * s : mc);
		}
	}
}

/*
 * Reference model of kcoll_ring_size() from the documented contract: the
 * SQ is limited by min(max_sq, max_cq), the default CQ is min(2 * sq, max_cq).
 */
static int ref_ring_size(u32 req_sq, u32 req_cq, u32 flags, u32 max_sq,
			 u32 max_cq, u32 *sq, u32 *cq)
{
	bool clamp = flags & KCOLL_SETUP_CLAMP;
	u32 msq = min_u32(max_sq, KCOLL_SQ_ENTRIES_LIMIT);
	u32 mcq = min_u32(max_cq, KCOLL_CQ_ENTRIES_LIMIT);
	u32 s, c;

	msq = min_u32(msq, mcq);

	if (!req_sq || !msq || !mcq)
		return -EINVAL;
	if (req_sq > msq && !clamp)
		return -EINVAL;
	s = ref_roundup_pow2(min_u32(req_sq, msq));
	if (flags & KCOLL_SETUP_CQSIZE) {
		if (!req_cq || (req_cq > mcq && !clamp))
			return -EINVAL;
		c = ref_roundup_pow2(min_u32(req_cq, mcq));
		if (c < s)
			return -EINVAL;
	} else {
		if (req_cq)
			return -EINVAL;
		c = (u64)2 * s <= mcq ? 2 * s : mcq;
	}
	*sq = s;
	*cq = c;
	return 0;
}

static void test_ring_size_model(void)
{
	static const u32 reqs[] = {
		0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 100,
		127, 128, 129, 255, 256, 1000, 1023, 1024, 1025, 4095, 4096,
		4097, 8191, 8192, 8193, 16384, 32767, 32768, 32769, 65535,
		65536, 65537, 1U << 20, 1U << 31, UINT32_MAX - 1, UINT32_MAX,
	};
	static const u32 maxes[] = {
		0, 1, 2, 4, 8, 64, 1024, 4096, 8192, 16384, 32768, 65536,
		131072, 1U << 31, UINT32_MAX,
	};
	unsigned long combos = 0;
	size_t a, b, c, d;
	u32 f;

	for (a = 0; a < ARRAY_SIZE(maxes); a++)
	for (b = 0; b < ARRAY_SIZE(maxes); b++)
	for (c = 0; c < ARRAY_SIZE(reqs); c++)
	for (d = 0; d < ARRAY_SIZE(reqs); d++)
	for (f = 0; f <= KCOLL_SETUP_F_ALL; f++) {
		u32 sq, cq, rsq = 0, rcq = 0;
		int ret, ref;

		ret = ring_size(reqs[c], reqs[d], f, maxes[a], maxes[b],
				&sq, &cq);
		ref = ref_ring_size(reqs[c], reqs[d], f, maxes[a], maxes[b],
				    &rsq, &rcq);
		combos++;
		if (!UNIT_EQ_INT(ret, ref) ||
		    (!ret && (!UNIT_EQ_UINT(sq, rsq) ||
			      !UNIT_EQ_UINT(cq, rcq)))) {
			UNIT_FAIL("req_sq %u req_cq %u flags %u max %u/%u",
				  reqs[c], reqs[d], f, maxes[a], maxes[b]);
			return;
		}
		if (ret)
			continue;
		/* Properties every accepted geometry must have. */
		UNIT_CHECK(ref_is_pow2(sq) && ref_is_pow2(cq));
		UNIT_CHECK(sq <= KCOLL_SQ_ENTRIES_LIMIT);
		UNIT_CHECK(cq <= KCOLL_CQ_ENTRIES_LIMIT);
		UNIT_CHECK(sq <= maxes[a]);
		UNIT_CHECK(cq >= sq);
		if (unit_fails())
			return;
	}
	unit_diag("%lu combinations", combos);
}

/* ------------------------------------------------------------------ */
/* kcoll_ring_layout                                                   */
/* ------------------------------------------------------------------ */

enum writer { W_KERNEL, W_APP, W_SETUP };

struct span {
	const char *name;
	u64 off;
	u64 len;
	enum writer w;
};

static u64 line_of(u64 off)
{
	return off / KCOLL_CACHELINE;
}

static bool spans_share_line(const struct span *a, const struct span *b)
{
	return line_of(a->off) <= line_of(b->off + b->len - 1) &&
	       line_of(b->off) <= line_of(a->off + a->len - 1);
}

/* Check one layout; returns false after the first problem. */
static bool check_layout(u32 sq, u32 cq)
{
	struct kcoll_ring_layout l, l2;
	const struct kcoll_sq_offsets *so;
	const struct kcoll_cq_offsets *co;
	struct span s[14];
	const u64 u = 4;
	u64 cq_end;
	size_t n = 0, i, j;

	memset(&l, 0xa5, sizeof(l));
	kcoll_ring_layout(sq, cq, &l);
	so = &l.sq_off;
	co = &l.cq_off;

	s[n++] = (struct span){ "sq.head", so->head, u, W_KERNEL };
	s[n++] = (struct span){ "sq.tail", so->tail, u, W_APP };
	s[n++] = (struct span){ "sq.ring_mask", so->ring_mask, u, W_SETUP };
	s[n++] = (struct span){ "sq.ring_entries", so->ring_entries, u,
				W_SETUP };
	s[n++] = (struct span){ "sq.flags", so->flags, u, W_KERNEL };
	s[n++] = (struct span){ "sqes", so->sqes,
				(u64)sq * sizeof(struct kcoll_sqe), W_APP };
	s[n++] = (struct span){ "cq.head", co->head, u, W_APP };
	s[n++] = (struct span){ "cq.tail", co->tail, u, W_KERNEL };
	s[n++] = (struct span){ "cq.ring_mask", co->ring_mask, u, W_SETUP };
	s[n++] = (struct span){ "cq.ring_entries", co->ring_entries, u,
				W_SETUP };
	s[n++] = (struct span){ "cq.flags", co->flags, u, W_APP };
	s[n++] = (struct span){ "cqes", co->cqes,
				(u64)cq * sizeof(struct kcoll_cqe), W_KERNEL };

	if (!UNIT_EQ_UINT(l.sq_entries, sq) || !UNIT_EQ_UINT(l.cq_entries, cq))
		return false;
	/* Reserved fields come out zero, whatever was there before. */
	if (!UNIT_EQ_UINT(so->resv[0], 0) || !UNIT_EQ_UINT(so->resv[1], 0) ||
	    !UNIT_EQ_UINT(co->resv[0], 0) ||
	    !UNIT_EQ_UINT(co->resv[1], 0))
		return false;

	for (i = 0; i < n; i++) {
		if (!UNIT_EQ_UINT(s[i].off % 4, 0)) {
			UNIT_FAIL("%s misaligned (sq %u cq %u)", s[i].name,
				  sq, cq);
			return false;
		}
		if (!UNIT_CHECK(s[i].off + s[i].len <= l.size)) {
			UNIT_FAIL("%s beyond the mapping (sq %u cq %u)",
				  s[i].name, sq, cq);
			return false;
		}
		for (j = i + 1; j < n; j++) {
			bool overlap = s[i].off < s[j].off + s[j].len &&
				       s[j].off < s[i].off + s[i].len;

			if (!UNIT_CHECK(!overlap)) {
				UNIT_FAIL("%s overlaps %s (sq %u cq %u)",
					  s[i].name, s[j].name, sq, cq);
				return false;
			}
			/* Nothing the kernel writes shares a cache line with
			 * anything the application writes. */
			if ((s[i].w == W_KERNEL && s[j].w == W_APP) ||
			    (s[i].w == W_APP && s[j].w == W_KERNEL)) {
				if (!UNIT_CHECK(!spans_share_line(&s[i],
								  &s[j]))) {
					UNIT_FAIL("%s and %s share a line "
						  "(sq %u cq %u)", s[i].name,
						  s[j].name, sq, cq);
					return false;
				}
			}
		}
	}
	/* The four indices each on a line of their own. */
	{
		const u32 idx[4] = { so->head, so->tail, co->head, co->tail };

		for (i = 0; i < 4; i++)
			for (j = i + 1; j < 4; j++)
				if (!UNIT_CHECK(line_of(idx[i]) !=
						line_of(idx[j]))) {
					UNIT_FAIL("indices %zu/%zu share a line "
						  "(sq %u cq %u)", i, j, sq, cq);
					return false;
				}
	}
	if (!UNIT_EQ_UINT(so->sqes % KCOLL_CACHELINE, 0) ||
	    !UNIT_EQ_UINT(co->cqes % KCOLL_CACHELINE, 0))
		return false;
	cq_end = (u64)co->cqes + (u64)cq * sizeof(struct kcoll_cqe);
	if (!UNIT_EQ_UINT(l.size % KCOLL_PAGE_SIZE, 0) ||
	    !UNIT_CHECK(l.size >= cq_end) ||
	    !UNIT_CHECK(l.size - cq_end < KCOLL_PAGE_SIZE) ||
	    !UNIT_CHECK(l.size <= UINT32_MAX)) {
		UNIT_FAIL("size %" PRIu64 " (sq %u cq %u)", l.size, sq, cq);
		return false;
	}
	/* Deterministic, whatever the output buffer held. */
	memset(&l2, 0x5a, sizeof(l2));
	kcoll_ring_layout(sq, cq, &l2);
	if (!UNIT_CHECK(!memcmp(&l, &l2, sizeof(l))))
		return false;
	return true;
}

static void test_ring_layout(void)
{
	unsigned long n = 0;
	u32 sq, cq;

	/* Every power-of-two geometry within the hard limits. */
	for (sq = 1; sq <= KCOLL_SQ_ENTRIES_LIMIT; sq <<= 1)
		for (cq = 1; cq <= KCOLL_CQ_ENTRIES_LIMIT; cq <<= 1, n++)
			if (!check_layout(sq, cq))
				return;
	/* Odd sizes too: the layout must not rely on powers of two. */
	for (sq = 1; sq <= 130; sq++)
		for (cq = sq; cq <= 2 * sq + 3; cq += 3, n++)
			if (!check_layout(sq, cq))
				return;
	unit_diag("%lu geometries", n);
}

static void test_ring_layout_fields(void)
{
	struct kcoll_ring_layout l;

	kcoll_ring_layout(1, 2, &l);
	/* Smallest ring: four index lines, one SQE line, one CQE line. */
	UNIT_EQ_UINT(l.size, KCOLL_PAGE_SIZE);
	UNIT_CHECK(l.sq_off.sqes >= 4 * KCOLL_CACHELINE);
	kcoll_ring_layout(KCOLL_SQ_ENTRIES_LIMIT, KCOLL_CQ_ENTRIES_LIMIT, &l);
	UNIT_CHECK(l.size >= (u64)KCOLL_SQ_ENTRIES_LIMIT * 64 +
			     (u64)KCOLL_CQ_ENTRIES_LIMIT * 16);
	UNIT_CHECK(l.cq_off.cqes >= l.sq_off.sqes +
				    (u64)KCOLL_SQ_ENTRIES_LIMIT * 64);
}

/* ------------------------------------------------------------------ */
/* Index arithmetic                                                    */
/* ------------------------------------------------------------------ */

static const u32 bases[] = {
	0, 1, 2, 100, 0x7fffffffU, 0x80000000U, 0x80000001U,
	UINT32_MAX - 1000, UINT32_MAX - 64, UINT32_MAX - 2, UINT32_MAX - 1,
	UINT32_MAX,
};

static const u32 ring_sizes[] = { 1, 2, 4, 8, 64, 4096, 32768, 65536 };

static int ref_sq_ready(u32 head, u32 tail, u32 entries, u32 to_submit)
{
	u64 queued = (u64)(u32)(tail - head);

	if (queued > entries)
		return -EOVERFLOW;
	return (int)(to_submit < queued ? to_submit : queued);
}

static void test_sq_ready(void)
{
	size_t b, e;

	for (b = 0; b < ARRAY_SIZE(bases); b++) {
		for (e = 0; e < ARRAY_SIZE(ring_sizes); e++) {
			const u32 h = bases[b], n = ring_sizes[e];
			const u32 qs[] = { 0, 1, n / 2, n - 1, n, n + 1, n + 2,
					   2 * n, UINT32_MAX / 2, UINT32_MAX - n,
					   UINT32_MAX - 1, UINT32_MAX };
			const u32 ts[] = { 0, 1, n / 2, n - 1, n, n + 1,
					   UINT32_MAX };
			size_t q, t;

			for (q = 0; q < ARRAY_SIZE(qs); q++)
				for (t = 0; t < ARRAY_SIZE(ts); t++) {
					int got = kcoll_sq_ready(h, h + qs[q],
								 n, ts[t]);
					int want = ref_sq_ready(h, h + qs[q],
								n, ts[t]);

					if (!UNIT_EQ_INT(got, want)) {
						UNIT_FAIL("head %u queued %u "
							  "entries %u submit %u",
							  h, qs[q], n, ts[t]);
						return;
					}
				}
		}
	}
	/* Spot checks, independent of the model. */
	UNIT_EQ_INT(kcoll_sq_ready(7, 7, 8, 8), 0);
	UNIT_EQ_INT(kcoll_sq_ready(UINT32_MAX - 2, 2, 8, 8), 5);
	UNIT_EQ_INT(kcoll_sq_ready(UINT32_MAX - 2, 2, 8, 3), 3);
	UNIT_EQ_INT(kcoll_sq_ready(UINT32_MAX - 2, 2, 8, 0), 0);
	UNIT_EQ_INT(kcoll_sq_ready(UINT32_MAX, UINT32_MAX + 8U, 8, 8), 8);
	UNIT_EQ_INT(kcoll_sq_ready(UINT32_MAX, UINT32_MAX + 9U, 8, 8),
		    -EOVERFLOW);
	/* A tail behind the head is corrupt, not "4 billion queued". */
	UNIT_EQ_INT(kcoll_sq_ready(10, 9, 8, 8), -EOVERFLOW);
	UNIT_EQ_INT(kcoll_sq_ready(0, UINT32_MAX, 8, 8), -EOVERFLOW);
	UNIT_EQ_INT(kcoll_sq_ready(0, UINT32_MAX, 8, 0), -EOVERFLOW);
	UNIT_EQ_INT(kcoll_sq_ready(0, 0x80000000U, KCOLL_SQ_ENTRIES_LIMIT,
				   KCOLL_SQ_ENTRIES_LIMIT), -EOVERFLOW);
}

static u32 ref_cq_space(u32 head, u32 tail, u32 entries, u32 reserved)
{
	u64 used = (u32)(tail - head);

	if (used > entries)
		return 0;
	used += reserved;
	return used >= entries ? 0 : (u32)(entries - used);
}

static u32 ref_cq_ready(u32 head, u32 tail, u32 entries)
{
	u32 used = tail - head;

	return used > entries ? entries : used;
}

static void test_cq_space_ready(void)
{
	size_t b, e;

	for (b = 0; b < ARRAY_SIZE(bases); b++) {
		for (e = 0; e < ARRAY_SIZE(ring_sizes); e++) {
			const u32 h = bases[b], n = ring_sizes[e];
			const u32 us[] = { 0, 1, n / 2, n - 1, n, n + 1,
					   2 * n, UINT32_MAX / 2,
					   UINT32_MAX - n, UINT32_MAX };
			const u32 rs[] = { 0, 1, n / 2, n - 1, n };
			size_t x, y;

			for (x = 0; x < ARRAY_SIZE(us); x++) {
				const u32 t = h + us[x];

				if (!UNIT_EQ_UINT(kcoll_cq_ready(h, t, n),
						  ref_cq_ready(h, t, n))) {
					UNIT_FAIL("ready: head %u used %u n %u",
						  h, us[x], n);
					return;
				}
				for (y = 0; y < ARRAY_SIZE(rs); y++) {
					u32 got = kcoll_cq_space(h, t, n, rs[y]);

					if (!UNIT_EQ_UINT(got,
							  ref_cq_space(h, t, n,
								       rs[y]))) {
						UNIT_FAIL("space: head %u used %u "
							  "n %u reserved %u",
							  h, us[x], n, rs[y]);
						return;
					}
					/* On a sane ring: exactly what is
					 * left, never more. */
					if ((u64)us[x] + rs[y] <= n)
						UNIT_EQ_UINT((u64)got + us[x] +
							     rs[y], n);
				}
			}
		}
	}
	/* Spot checks. */
	UNIT_EQ_UINT(kcoll_cq_space(0, 0, 16, 0), 16);
	UNIT_EQ_UINT(kcoll_cq_space(0, 0, 16, 16), 0);
	UNIT_EQ_UINT(kcoll_cq_space(0, 10, 16, 6), 0);
	UNIT_EQ_UINT(kcoll_cq_space(0, 10, 16, 5), 1);
	UNIT_EQ_UINT(kcoll_cq_space(UINT32_MAX - 3, 4, 16, 2), 6);
	UNIT_EQ_UINT(kcoll_cq_space(UINT32_MAX - 3, 12, 16, 0), 0);
	/* Head ahead of the tail (corrupted by the application): full. */
	UNIT_EQ_UINT(kcoll_cq_space(5, 4, 16, 0), 0);
	UNIT_EQ_UINT(kcoll_cq_space(0, UINT32_MAX, 16, 0), 0);
	UNIT_EQ_UINT(kcoll_cq_space(0, 17, 16, 0), 0);
	UNIT_EQ_UINT(kcoll_cq_space(12345, 12345 + 0x80000000U, 16, 0), 0);
	UNIT_EQ_UINT(kcoll_cq_ready(0, 0, 16), 0);
	UNIT_EQ_UINT(kcoll_cq_ready(UINT32_MAX, 3, 16), 4);
	UNIT_EQ_UINT(kcoll_cq_ready(UINT32_MAX - 15, 0, 16), 16);
	UNIT_EQ_UINT(kcoll_cq_ready(5, 4, 16), 16);
	UNIT_EQ_UINT(kcoll_cq_ready(0, 1000, 16), 16);
}

/* ------------------------------------------------------------------ */
/* kcoll_sqe_check                                                     */
/* ------------------------------------------------------------------ */

/* Which fields each opcode reads, restated from the uapi comments. */
#define F_DTYPE	(1U << 0)
#define F_REDOP	(1U << 1)
#define F_COMM	(1U << 2)
#define F_PEER	(1U << 3)
#define F_COUNT	(1U << 4)
#define F_SEND	(1U << 5)
#define F_RECV	(1U << 6)
#define F_VEC	(1U << 7)	/* count is a count table's address */
#define F_COLL	(F_DTYPE | F_COMM | F_COUNT)

static u32 op_fields(u8 op)
{
	switch (op) {
	case KCOLL_OP_DELAY:
		return F_COUNT;
	case KCOLL_OP_ALLREDUCE:
	case KCOLL_OP_REDUCE_SCATTER:
		return F_COLL | F_REDOP | F_SEND | F_RECV;
	case KCOLL_OP_REDUCE:
		return F_COLL | F_REDOP | F_PEER | F_SEND | F_RECV;
	case KCOLL_OP_BROADCAST:
	case KCOLL_OP_GATHER:
	case KCOLL_OP_SCATTER:
		return F_COLL | F_PEER | F_SEND | F_RECV;
	case KCOLL_OP_ALLGATHER:
	case KCOLL_OP_ALLTOALL:
		return F_COLL | F_SEND | F_RECV;
	case KCOLL_OP_SEND:
		return F_COLL | F_PEER | F_SEND;
	case KCOLL_OP_RECV:
		return F_COLL | F_PEER | F_RECV;
	case KCOLL_OP_BARRIER:
		return F_COMM;
	case KCOLL_OP_REDUCE_SCATTERV:
		return F_COLL | F_REDOP | F_SEND | F_RECV | F_VEC;
	case KCOLL_OP_ALLGATHERV:
	case KCOLL_OP_ALLTOALLV:
		return F_COLL | F_SEND | F_RECV | F_VEC;
	default:
		return 0;
	}
}

/* The smallest valid SQE of @op. */
static struct kcoll_sqe sqe_of(u8 op)
{
	struct kcoll_sqe s;
	u32 f = op_fields(op);

	memset(&s, 0, sizeof(s));
	s.opcode = op;
	if (f & F_DTYPE)
		s.dtype = KCOLL_DTYPE_FP32;
	if (f & F_REDOP)
		s.redop = KCOLL_REDOP_SUM;
	if (f & F_COMM)
		s.comm_id = 1;
	if (f & F_VEC)		/* the count table's address */
		s.vec_addr = 0x1000;
	return s;
}

static int sqe_check(const struct kcoll_sqe *s)
{
	struct kcoll_sqe copy = *s;
	int ret = kcoll_sqe_check(&copy);

	UNIT_CHECK(!memcmp(&copy, s, sizeof(copy)));	/* not modified */
	return ret;
}

static void test_sqe_check_valid(void)
{
	static const u64 uds[] = { 0, 1, 0x8000000000000000ULL, UINT64_MAX };
	struct kcoll_sqe s;
	size_t i;
	u32 p;

	s = sqe_of(KCOLL_OP_NOP);
	UNIT_EQ_INT(sqe_check(&s), 0);
	s = sqe_of(KCOLL_OP_DELAY);
	UNIT_EQ_INT(sqe_check(&s), 0);
	for (i = 0; i < ARRAY_SIZE(uds); i++) {
		s = sqe_of(KCOLL_OP_NOP);
		s.user_data = uds[i];
		UNIT_EQ_INT(sqe_check(&s), 0);
		s = sqe_of(KCOLL_OP_DELAY);
		s.user_data = uds[i];
		s.count = 1000;
		UNIT_EQ_INT(sqe_check(&s), 0);
	}
	for (p = 0; p <= 255; p++) {
		s = sqe_of(KCOLL_OP_NOP);
		s.prio = (u8)p;
		UNIT_EQ_INT(sqe_check(&s), p <= KCOLL_PRIO_MAX ? 0 : -EINVAL);
		s = sqe_of(KCOLL_OP_DELAY);
		s.prio = (u8)p;
		s.count = 1;
		UNIT_EQ_INT(sqe_check(&s), p <= KCOLL_PRIO_MAX ? 0 : -EINVAL);
	}
}

static void test_sqe_check_delay_range(void)
{
	static const struct { u64 count; int want; } cases[] = {
		{ 0, 0 },
		{ 1, 0 },
		{ KCOLL_DELAY_MAX_US - 1, 0 },
		{ KCOLL_DELAY_MAX_US, 0 },
		{ (u64)KCOLL_DELAY_MAX_US + 1, -ERANGE },
		{ 2ULL * KCOLL_DELAY_MAX_US, -ERANGE },
		{ UINT32_MAX, -ERANGE },
		{ (u64)UINT32_MAX + 1, -ERANGE },
		{ 1ULL << 63, -ERANGE },
		{ UINT64_MAX, -ERANGE },
	};
	struct kcoll_sqe s;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		s = sqe_of(KCOLL_OP_DELAY);
		s.count = cases[i].count;
		if (!UNIT_EQ_INT(sqe_check(&s), cases[i].want))
			UNIT_FAIL("count %" PRIu64, cases[i].count);
	}
	/* NOP takes no count at all. */
	s = sqe_of(KCOLL_OP_NOP);
	s.count = 1;
	UNIT_EQ_INT(sqe_check(&s), -EINVAL);
}

static void test_sqe_check_unknown_opcode(void)
{
	struct kcoll_sqe s;
	u32 op;

	for (op = KCOLL_OP_LAST; op <= 255; op++) {
		s = sqe_of((u8)op);
		if (!UNIT_EQ_INT(sqe_check(&s), -EINVAL)) {
			UNIT_FAIL("opcode %u", op);
			return;
		}
	}
}

/* One named SQE field, and whether an opcode may set it. */
struct sqe_field {
	const char *name;
	size_t off;
	size_t size;
};

#define SQE_FIELD(f) { #f, offsetof(struct kcoll_sqe, f), \
		       sizeof(((struct kcoll_sqe *)0)->f) }

static const struct sqe_field sqe_fields[] = {
	SQE_FIELD(opcode), SQE_FIELD(dtype), SQE_FIELD(redop),
	SQE_FIELD(prio), SQE_FIELD(flags), SQE_FIELD(user_data),
	SQE_FIELD(comm_id), SQE_FIELD(peer), SQE_FIELD(count),
	SQE_FIELD(send_addr), SQE_FIELD(recv_addr), SQE_FIELD(send_mr),
	SQE_FIELD(recv_mr), SQE_FIELD(timeout_ms), SQE_FIELD(resv),
};

static const struct sqe_field *sqe_field_at(size_t byte)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sqe_fields); i++)
		if (byte >= sqe_fields[i].off &&
		    byte < sqe_fields[i].off + sqe_fields[i].size)
			return &sqe_fields[i];
	return NULL;
}

/* Expected result from the documented contract: NOP uses nothing, DELAY
 * uses count (<= KCOLL_DELAY_MAX_US), collectives what op_fields() says
 * (dtype and comm required, redop required where it reduces, AVG only for
 * floating types, count <= 2^48); user_data and prio (<= max) are free;
 * everything else must be zero. */
static int ref_sqe_check(const struct kcoll_sqe *s)
{
	u32 f = op_fields(s->opcode);
	bool bad = false;

	if (s->opcode >= KCOLL_OP_LAST)
		return -EINVAL;
	bad |= s->prio > KCOLL_PRIO_MAX;
	bad |= s->flags != 0;
	bad |= s->resv != 0;
	if (f & F_DTYPE)
		bad |= !s->dtype || s->dtype >= KCOLL_DTYPE_LAST;
	else
		bad |= s->dtype != 0;
	if (f & F_REDOP)
		bad |= !s->redop || s->redop >= KCOLL_REDOP_LAST ||
		       (s->redop == KCOLL_REDOP_AVG &&
			s->dtype != KCOLL_DTYPE_FP16 &&
			s->dtype != KCOLL_DTYPE_BF16 &&
			s->dtype != KCOLL_DTYPE_FP32 &&
			s->dtype != KCOLL_DTYPE_FP64 &&
			s->dtype != KCOLL_DTYPE_FP8_E4M3 &&
			s->dtype != KCOLL_DTYPE_FP8_E5M2);
	else
		bad |= s->redop != 0;
	bad |= (f & F_COMM) ? !s->comm_id : s->comm_id != 0;
	if (!(f & F_COMM))	/* timeouts apply to communicator ops only */
		bad |= s->timeout_ms != 0;
	if (!(f & F_PEER))
		bad |= s->peer != 0;
	if (!(f & F_SEND))
		bad |= s->send_addr || s->send_mr;
	if (!(f & F_RECV))
		bad |= s->recv_addr || s->recv_mr;
	if (!(f & F_COUNT))
		bad |= s->count != 0;
	if (f & F_VEC)		/* any address but none */
		bad |= s->vec_addr == 0;
	if (bad)
		return -EINVAL;
	if (s->opcode == KCOLL_OP_DELAY && s->count > KCOLL_DELAY_MAX_US)
		return -ERANGE;
	if ((f & F_COUNT) && !(f & F_VEC) && s->opcode != KCOLL_OP_DELAY &&
	    s->count > (1ULL << 48))
		return -ERANGE;
	return 0;
}

/* Set every single bit (and then every whole byte) of an otherwise valid
 * SQE, for every opcode: unused fields must be refused. */
static void test_sqe_check_every_bit(void)
{
	u32 op;
	size_t byte, bit, i;

	/* The field table covers the whole SQE exactly once. */
	for (byte = 0; byte < sizeof(struct kcoll_sqe); byte++)
		UNIT_CHECK(sqe_field_at(byte) != NULL);
	for (i = 0, byte = 0; i < ARRAY_SIZE(sqe_fields); i++)
		byte += sqe_fields[i].size;
	UNIT_EQ_UINT(byte, sizeof(struct kcoll_sqe));

	for (op = 0; op < KCOLL_OP_LAST; op++) {
		for (byte = 1; byte < sizeof(struct kcoll_sqe); byte++) {
			const struct sqe_field *f = sqe_field_at(byte);

			for (bit = 0; bit <= 8; bit++) {
				struct kcoll_sqe s = sqe_of((u8)op);
				u8 *raw = (u8 *)&s;
				int got, want;

				/* bit 8: the whole byte. */
				raw[byte] = bit == 8 ? 0xff : (u8)(1U << bit);
				got = sqe_check(&s);
				want = ref_sqe_check(&s);
				if (!UNIT_EQ_INT(got, want)) {
					UNIT_FAIL("op %s: %s byte %zu = 0x%02x",
						  kcoll_op_name(op), f->name,
						  byte - f->off, raw[byte]);
					return;
				}
				/* Fields nobody reads are always refused. */
				if (f->off == offsetof(struct kcoll_sqe,
						       flags) ||
				    f->off == offsetof(struct kcoll_sqe, resv) ||
				    (!op_fields((u8)op) &&
				     f->off != offsetof(struct kcoll_sqe,
							user_data) &&
				     f->off != offsetof(struct kcoll_sqe,
							prio)))
					UNIT_EQ_INT(got, -EINVAL);
			}
		}
	}
}

/* Every named field nonzero on its own, for every opcode. */
static void test_sqe_check_fields(void)
{
	struct kcoll_sqe s;
	u32 op;

	for (op = 0; op < KCOLL_OP_LAST; op++) {
#define BAD_FIELD(field, val) do {					\
		s = sqe_of((u8)op);					\
		s.field = (val);					\
		if (!UNIT_EQ_INT(sqe_check(&s), -EINVAL))		\
			UNIT_FAIL("op %s field %s", kcoll_op_name(op),	\
				  #field);				\
	} while (0)
		u32 f = op_fields((u8)op);

		if (!(f & F_DTYPE))
			BAD_FIELD(dtype, KCOLL_DTYPE_INT32);
		BAD_FIELD(dtype, 255);
		if (!(f & F_REDOP))
			BAD_FIELD(redop, KCOLL_REDOP_SUM);
		BAD_FIELD(redop, 255);
		BAD_FIELD(prio, KCOLL_PRIO_MAX + 1);
		BAD_FIELD(flags, 1);
		BAD_FIELD(flags, 0x80000000U);
		BAD_FIELD(comm_id, (f & F_COMM) ? 0 : 1);
		if (!(f & F_PEER)) {
			BAD_FIELD(peer, 1);
			BAD_FIELD(peer, UINT32_MAX);
		}
		if (!(f & F_SEND)) {
			BAD_FIELD(send_addr, 0x1000);
			BAD_FIELD(send_mr, 1);
		}
		if (!(f & F_RECV)) {
			BAD_FIELD(recv_addr, 0x1000);
			BAD_FIELD(recv_mr, 1);
		}
		BAD_FIELD(resv, 1);
		BAD_FIELD(resv, UINT32_MAX);
		BAD_FIELD(resv, 0x80000000U);
		if (f & F_REDOP) {
			s = sqe_of((u8)op);
			s.dtype = KCOLL_DTYPE_INT32;
			s.redop = KCOLL_REDOP_AVG;
			UNIT_EQ_INT(sqe_check(&s), -EINVAL);
		}
#undef BAD_FIELD
	}
}

static void test_sqe_check_random(void)
{
	struct unit_rng rng;
	unsigned long i, accepted = 0;

	unit_rng_seed(&rng, unit_seed(0x5eedf00dULL));
	for (i = 0; i < 2000000; i++) {
		struct kcoll_sqe s;
		int got, want;

		memset(&s, 0, sizeof(s));
		/* Mostly valid opcodes, each field nonzero now and then. */
		s.opcode = unit_rng_upto(&rng, 7) ?
			   unit_rng_upto(&rng, KCOLL_OP_LAST - 1) :
			   (u8)unit_rng_next(&rng);
		/* Collectives: start from a valid one half of the time. */
		if (s.opcode < KCOLL_OP_LAST && unit_rng_upto(&rng, 1)) {
			u64 ud = s.user_data;

			s = sqe_of(s.opcode);
			s.user_data = ud;
		}
		s.user_data = unit_rng_next(&rng);
#define MAYBE(field, val) do {						\
		if (!unit_rng_upto(&rng, 15))				\
			s.field = (val);				\
	} while (0)
		MAYBE(dtype, (u8)unit_rng_next(&rng));
		MAYBE(redop, (u8)unit_rng_next(&rng));
		s.prio = (u8)unit_rng_upto(&rng, unit_rng_upto(&rng, 7) ?
						 KCOLL_PRIO_MAX : 255);
		MAYBE(flags, (u32)unit_rng_next(&rng));
		MAYBE(comm_id, (u32)unit_rng_next(&rng));
		MAYBE(peer, (u32)unit_rng_next(&rng));
		switch (unit_rng_upto(&rng, 3)) {
		case 0:
			s.count = 0;
			break;
		case 3:
			s.count = unit_rng_next(&rng) >>
				  unit_rng_upto(&rng, 63);
			break;
		default:
			s.count = unit_rng_upto(&rng, KCOLL_DELAY_MAX_US + 10);
			break;
		}
		MAYBE(send_addr, unit_rng_next(&rng));
		MAYBE(recv_addr, unit_rng_next(&rng));
		MAYBE(send_mr, (u32)unit_rng_next(&rng));
		MAYBE(recv_mr, (u32)unit_rng_next(&rng));
		MAYBE(timeout_ms, (u32)unit_rng_next(&rng));
		MAYBE(resv, (u32)unit_rng_next(&rng));
#undef MAYBE
		got = kcoll_sqe_check(&s);
		want = ref_sqe_check(&s);
		accepted += !got;
		/* With several faults the errno may come from any of them;
		 * with one it must be exact. */
		if (!UNIT_EQ_INT(got == 0, want == 0) ||
		    !UNIT_CHECK(got == 0 || got == -EINVAL || got == -ERANGE) ||
		    (want == -ERANGE && !UNIT_EQ_INT(got, -ERANGE))) {
			UNIT_FAIL("iteration %lu: op %u count %" PRIu64, i,
				  s.opcode, (u64)s.count);
			return;
		}
	}
	unit_diag("%lu of %lu random SQEs valid", accepted, i);
	UNIT_CHECK(accepted > i / 20 && accepted < i - i / 20);
}

/* ------------------------------------------------------------------ */
/* kcoll_setup_check / kcoll_enter_check                               */
/* ------------------------------------------------------------------ */

static void test_setup_check(void)
{
	struct kcoll_setup p;
	size_t byte, bit;
	u32 f;

	memset(&p, 0, sizeof(p));
	UNIT_EQ_INT(kcoll_setup_check(&p), 0);
	for (f = 0; f <= KCOLL_SETUP_F_ALL; f++) {
		p.flags = f;
		UNIT_EQ_INT(kcoll_setup_check(&p), 0);
	}
	for (bit = 0; bit < 32; bit++) {
		p.flags = 1U << bit;
		UNIT_EQ_INT(kcoll_setup_check(&p),
			    (p.flags & ~KCOLL_SETUP_F_ALL) ? -EINVAL : 0);
	}
	/* Sizes are not this function's business. */
	memset(&p, 0, sizeof(p));
	p.sq_entries = UINT32_MAX;
	p.cq_entries = UINT32_MAX;
	UNIT_EQ_INT(kcoll_setup_check(&p), 0);

	/* Every bit of every output and reserved field is refused. */
	for (byte = 0; byte < sizeof(p); byte++) {
		for (bit = 0; bit <= 8; bit++) {
			u8 *raw = (u8 *)&p;
			bool input, ok;
			int got;

			memset(&p, 0, sizeof(p));
			raw[byte] = bit == 8 ? 0xff : (u8)(1U << bit);
			input = byte < offsetof(struct kcoll_setup, flags);
			if (byte >= offsetof(struct kcoll_setup, flags) &&
			    byte < offsetof(struct kcoll_setup, features))
				ok = !(p.flags & ~KCOLL_SETUP_F_ALL);
			else
				ok = input;
			got = kcoll_setup_check(&p);
			if (!UNIT_EQ_INT(got, ok ? 0 : -EINVAL)) {
				UNIT_FAIL("setup byte %zu = 0x%02x", byte,
					  raw[byte]);
				return;
			}
		}
	}
	/* Named examples. */
	memset(&p, 0, sizeof(p));
	p.features = KCOLL_FEAT_SINGLE_MMAP;
	UNIT_EQ_INT(kcoll_setup_check(&p), -EINVAL);
	memset(&p, 0, sizeof(p));
	p.mmap_size = 4096;
	UNIT_EQ_INT(kcoll_setup_check(&p), -EINVAL);
	memset(&p, 0, sizeof(p));
	p.mmap_offset = 4096;
	UNIT_EQ_INT(kcoll_setup_check(&p), -EINVAL);
	memset(&p, 0, sizeof(p));
	p.sq_off.sqes = 256;
	UNIT_EQ_INT(kcoll_setup_check(&p), -EINVAL);
	memset(&p, 0, sizeof(p));
	p.cq_off.resv[1] = 1;
	UNIT_EQ_INT(kcoll_setup_check(&p), -EINVAL);
	memset(&p, 0, sizeof(p));
	p.resv[3] = 1ULL << 63;
	UNIT_EQ_INT(kcoll_setup_check(&p), -EINVAL);
}

static int ref_enter_check(const struct kcoll_enter *e, u32 sq, u32 cq)
{
	if (e->flags & ~KCOLL_ENTER_F_ALL)
		return -EINVAL;
	if (e->resv0 || e->resv[0] || e->resv[1])
		return -EINVAL;
	if (e->to_submit > sq)
		return -EINVAL;
	if (!(e->flags & KCOLL_ENTER_GETEVENTS) &&
	    (e->min_complete || e->timeout_ns))
		return -EINVAL;
	if (e->min_complete > cq)
		return -EINVAL;
	return 0;
}

static void test_enter_check(void)
{
	const u32 G = KCOLL_ENTER_GETEVENTS;
	struct kcoll_enter e;
	struct unit_rng rng;
	size_t byte, bit;
	unsigned long i;

#define ENTER(ts, mc, fl, to) do {					\
		memset(&e, 0, sizeof(e));				\
		e.to_submit = (ts);					\
		e.min_complete = (mc);					\
		e.flags = (fl);						\
		e.timeout_ns = (to);					\
	} while (0)
	ENTER(0, 0, 0, 0);
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), 0);
	ENTER(8, 0, 0, 0);
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), 0);
	ENTER(9, 0, 0, 0);
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), -EINVAL);
	ENTER(UINT32_MAX, 0, 0, 0);
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), -EINVAL);
	ENTER(0, 16, G, 0);
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), 0);
	ENTER(0, 17, G, 0);
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), -EINVAL);
	ENTER(0, 0, G, 0);
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), 0);
	ENTER(8, 1, G, 1000000);
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), 0);
	ENTER(0, 0, G, UINT64_MAX);
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), 0);
	/* Waiting arguments without GETEVENTS. */
	ENTER(0, 1, 0, 0);
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), -EINVAL);
	ENTER(1, 0, 0, 1);
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), -EINVAL);
	/* Unknown flags and reserved words. */
	for (bit = 1; bit < 32; bit++) {
		ENTER(0, 0, 1U << bit, 0);
		UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), -EINVAL);
	}
	ENTER(0, 0, 0, 0);
	e.resv0 = 1;
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), -EINVAL);
	ENTER(0, 0, 0, 0);
	e.resv[0] = 1;
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), -EINVAL);
	ENTER(0, 0, G, 0);
	e.resv[1] = 1ULL << 63;
	UNIT_EQ_INT(kcoll_enter_check(&e, 8, 16), -EINVAL);
#undef ENTER

	/* Every bit of the structure, against the model. */
	for (byte = 0; byte < sizeof(e); byte++) {
		for (bit = 0; bit <= 8; bit++) {
			u8 *raw = (u8 *)&e;

			memset(&e, 0, sizeof(e));
			e.flags = byte == offsetof(struct kcoll_enter, flags) ?
				  0 : G;
			raw[byte] |= bit == 8 ? 0xff : (u8)(1U << bit);
			if (!UNIT_EQ_INT(kcoll_enter_check(&e, 64, 128),
					 ref_enter_check(&e, 64, 128))) {
				UNIT_FAIL("enter byte %zu = 0x%02x", byte,
					  raw[byte]);
				return;
			}
		}
	}
	/* Random arguments, against the model. */
	unit_rng_seed(&rng, 12345);
	for (i = 0; i < 500000; i++) {
		u32 sq = 1U << unit_rng_upto(&rng, 15);
		u32 cq = sq << unit_rng_upto(&rng, 1);

		memset(&e, 0, sizeof(e));
		e.to_submit = unit_rng_upto(&rng, 2 * sq);
		e.min_complete = unit_rng_upto(&rng, 3) ? 0 :
				 unit_rng_upto(&rng, 2 * cq);
		e.flags = unit_rng_upto(&rng, 31) ? unit_rng_upto(&rng, 1) :
			  (u32)unit_rng_next(&rng);
		e.timeout_ns = unit_rng_upto(&rng, 3) ? 0 : unit_rng_next(&rng);
		if (!unit_rng_upto(&rng, 31))
			e.resv0 = 1;
		if (!unit_rng_upto(&rng, 31))
			e.resv[unit_rng_upto(&rng, 1)] = unit_rng_next(&rng);
		if (!UNIT_EQ_INT(kcoll_enter_check(&e, sq, cq),
				 ref_enter_check(&e, sq, cq))) {
			UNIT_FAIL("iteration %lu", i);
			return;
		}
	}
}

static void test_op_name(void)
{
	u32 op;

	UNIT_EQ_STR(kcoll_op_name(KCOLL_OP_NOP), "nop");
	UNIT_EQ_STR(kcoll_op_name(KCOLL_OP_DELAY), "delay");
	UNIT_EQ_STR(kcoll_op_name(KCOLL_OP_LAST), "?");
	UNIT_EQ_STR(kcoll_op_name(255), "?");
	UNIT_EQ_STR(kcoll_op_name(256), "?");
	UNIT_EQ_STR(kcoll_op_name(UINT32_MAX), "?");
	UNIT_EQ_STR(kcoll_op_name(0x80000000U), "?");
	/* Every valid opcode has a real, distinct name. */
	for (op = 0; op < KCOLL_OP_LAST; op++) {
		u32 o;

		UNIT_CHECK(kcoll_op_name(op) != NULL);
		UNIT_CHECK(strcmp(kcoll_op_name(op), "?") != 0);
		for (o = 0; o < op; o++)
			UNIT_CHECK(strcmp(kcoll_op_name(op),
					  kcoll_op_name(o)) != 0);
	}
	for (op = KCOLL_OP_LAST; op < 100000; op++)
		if (!UNIT_EQ_STR(kcoll_op_name(op), "?"))
			return;
}

/* ------------------------------------------------------------------ */
/* Ring simulation                                                     */
/* ------------------------------------------------------------------ */

/*
 * A single-threaded model of one context: the "application" writes SQEs
 * and reaps CQEs, the "kernel" consumes SQEs exactly like kcoll_submit()
 * (kcoll_sq_ready(), then kcoll_cq_space() to reserve a CQ slot per
 * descriptor) and completes each descriptor either inline or later, in
 * any order. Every SQE carries a sequence number, which the model checks
 * arrives exactly once, in SQ order, and that no CQE slot is overwritten
 * before the application reaped it.
 */
struct sim_cqe {
	u64 seq;
	bool live;
};

struct sim {
	u32 sq_entries, cq_entries;
	/* Kernel-written: */
	u32 sq_head;		/* private == shared after every submit */
	u32 cq_tail;		/* private == shared: single-threaded */
	u32 reserved;
	/* Application-written: */
	u32 sq_tail;
	u32 cq_head;

	u64 *sq_slot;		/* seq stored in each SQE slot */
	struct sim_cqe *cq_slot;
	u64 *inflight;		/* seqs issued, not yet completed */
	u32 nr_inflight;

	u64 next_seq;		/* next SQE the application writes */
	u64 next_consume;	/* next SQE the kernel must read */
	u64 reaped;
	u8 *seen;		/* bitmap of reaped seqs */
	u64 seen_bits;
	bool sq_wrapped, cq_wrapped;
	struct unit_rng rng;
};

static void sim_mark_seen(struct sim *s, u64 seq)
{
	if (seq >= s->seen_bits) {
		u64 nb = s->seen_bits ? s->seen_bits : 1 << 16;
		u8 *p;

		while (nb <= seq)
			nb *= 2;
		p = realloc(s->seen, nb / 8);
		if (!p) {
			UNIT_FAIL("out of memory");
			return;
		}
		memset(p + s->seen_bits / 8, 0, (nb - s->seen_bits) / 8);
		s->seen = p;
		s->seen_bits = nb;
	}
	if (s->seen[seq / 8] & (1U << (seq % 8)))
		UNIT_FAIL("seq %" PRIu64 " completed twice", seq);
	s->seen[seq / 8] |= 1U << (seq % 8);
}

static bool sim_invariant(struct sim *s)
{
	u32 posted = s->cq_tail - s->cq_head;

	if (!UNIT_CHECK((u64)posted + s->reserved <= s->cq_entries) ||
	    !UNIT_CHECK(s->sq_tail - s->sq_head <= s->sq_entries) ||
	    !UNIT_EQ_UINT(s->reserved, s->nr_inflight)) {
		UNIT_FAIL("posted %u reserved %u cq %u; sq %u..%u",
			  posted, s->reserved, s->cq_entries, s->sq_head,
			  s->sq_tail);
		return false;
	}
	return true;
}

/* Kernel: post the CQE of @seq into a slot reserved earlier. */
static void sim_post(struct sim *s, u64 seq)
{
	struct sim_cqe *c = &s->cq_slot[s->cq_tail & (s->cq_entries - 1)];

	if (!UNIT_CHECK(s->reserved > 0))
		return;
	if (c->live)
		UNIT_FAIL("CQE slot %u overwritten before it was reaped",
			  s->cq_tail & (s->cq_entries - 1));
	c->seq = seq;
	c->live = true;
	s->cq_tail++;
	if (!s->cq_tail)
		s->cq_wrapped = true;
	s->reserved--;
}

/* Application: queue up to @n SQEs. */
static void sim_app_submit(struct sim *s, u32 n)
{
	/* The application's view of the free slots (as libcoll computes). */
	u32 space = s->sq_entries - (s->sq_tail - s->sq_head);

	if (n > space)
		n = space;
	while (n--) {
		s->sq_slot[s->sq_tail & (s->sq_entries - 1)] = s->next_seq++;
		s->sq_tail++;
		if (!s->sq_tail)
			s->sq_wrapped = true;
	}
}

/* Kernel: KCOLL_IOC_ENTER with @to_submit, as kcoll_submit() does it. */
static void sim_kernel_submit(struct sim *s, u32 to_submit)
{
	u32 queued = s->sq_tail - s->sq_head;
	u32 space, i;
	int n;

	n = kcoll_sq_ready(s->sq_head, s->sq_tail, s->sq_entries, to_submit);
	if (!UNIT_CHECK(n >= 0) ||
	    !UNIT_EQ_INT(n, min_u32(to_submit, queued)))
		return;
	if (!n)
		return;
	space = kcoll_cq_space(s->cq_head, s->cq_tail, s->cq_entries,
			       s->reserved);
	/* Cross-check against the obvious formula on a sane ring. */
	if (!UNIT_EQ_UINT(space, s->cq_entries - (s->cq_tail - s->cq_head) -
				 s->reserved))
		return;
	if ((u32)n > space)
		n = (int)space;
	s->reserved += n;
	/* The NODROP invariant, at its tightest point. */
	if (!UNIT_CHECK((u64)(u32)(s->cq_tail - s->cq_head) + s->reserved <=
			s->cq_entries))
		return;
	for (i = 0; i < (u32)n; i++) {
		u64 seq = s->sq_slot[s->sq_head & (s->sq_entries - 1)];

		if (!UNIT_EQ_UINT(seq, s->next_consume))
			return;
		s->next_consume++;
		s->sq_head++;
		/* Half inline (like NOP), half asynchronous (like DELAY). */
		if (unit_rng_upto(&s->rng, 1)) {
			sim_post(s, seq);
		} else {
			s->inflight[s->nr_inflight++] = seq;
		}
	}
}

/* Asynchronous completions, in random order. */
static void sim_complete(struct sim *s, u32 n)
{
	while (n-- && s->nr_inflight) {
		u32 k = unit_rng_upto(&s->rng, s->nr_inflight - 1);
		u64 seq = s->inflight[k];

		s->inflight[k] = s->inflight[--s->nr_inflight];
		sim_post(s, seq);
	}
}

/* Application: reap up to @n CQEs. */
static void sim_reap(struct sim *s, u32 n)
{
	u32 ready = kcoll_cq_ready(s->cq_head, s->cq_tail, s->cq_entries);

	if (!UNIT_EQ_UINT(ready, s->cq_tail - s->cq_head))
		return;
	if (n > ready)
		n = ready;
	while (n--) {
		struct sim_cqe *c = &s->cq_slot[s->cq_head &
						(s->cq_entries - 1)];

		if (!UNIT_CHECK(c->live))
			return;
		c->live = false;
		sim_mark_seen(s, c->seq);
		s->reaped++;
		s->cq_head++;
	}
}

static void sim_run(u32 sq_entries, u32 cq_entries, unsigned long ops,
		    u64 seed)
{
	const u32 start_sq = UINT32_MAX - 1000, start_cq = UINT32_MAX - 777;
	struct sim s;
	unsigned long i;

	memset(&s, 0, sizeof(s));
	s.sq_entries = sq_entries;
	s.cq_entries = cq_entries;
	s.sq_head = s.sq_tail = start_sq;
	s.cq_head = s.cq_tail = start_cq;
	s.sq_slot = calloc(sq_entries, sizeof(*s.sq_slot));
	s.cq_slot = calloc(cq_entries, sizeof(*s.cq_slot));
	s.inflight = calloc(cq_entries, sizeof(*s.inflight));
	unit_rng_seed(&s.rng, seed);
	if (!UNIT_CHECK(s.sq_slot && s.cq_slot && s.inflight))
		goto out;

	for (i = 0; i < ops && !unit_fails(); i++) {
		/* Batches from 0 up to a bit over each ring's size. */
		u32 sq_batch = unit_rng_upto(&s.rng, sq_entries + 1);
		u32 cq_batch = unit_rng_upto(&s.rng, cq_entries + 1);

		switch (unit_rng_upto(&s.rng, 3)) {
		case 0:
			sim_app_submit(&s, sq_batch);
			break;
		case 1:
			/* ENTER never asks for more than sq_entries. */
			sim_kernel_submit(&s, min_u32(sq_batch, sq_entries));
			break;
		case 2:
			sim_complete(&s, cq_batch);
			break;
		case 3:
			sim_reap(&s, cq_batch);
			break;
		}
		sim_invariant(&s);
	}
	/* Drain: everything written must come back exactly once. */
	while (!unit_fails() && (s.sq_tail != s.sq_head || s.nr_inflight ||
				 s.cq_tail != s.cq_head)) {
		sim_kernel_submit(&s, sq_entries);
		sim_complete(&s, cq_entries);
		sim_reap(&s, cq_entries);
	}
	UNIT_EQ_UINT(s.next_consume, s.next_seq);
	UNIT_EQ_UINT(s.reaped, s.next_seq);
	UNIT_EQ_UINT(s.reserved, 0);
	/* The run must really have crossed the 2^32 boundary. */
	UNIT_CHECK(s.sq_wrapped);
	UNIT_CHECK(s.cq_wrapped);
	UNIT_CHECK(s.next_seq > 1000);
	unit_diag("sq %u cq %u: %lu ops, %" PRIu64 " descriptors", sq_entries,
		  cq_entries, i, s.next_seq);
out:
	free(s.sq_slot);
	free(s.cq_slot);
	free(s.inflight);
	free(s.seen);
}

static void test_ring_simulation(void)
{
	u64 seed = unit_seed(0xc011ec7ULL);

	/* The main run: 10 million operations. */
	sim_run(64, 128, 10000000UL, seed);
	/* Corner geometries: CQ == SQ, single-entry rings, large rings. */
	sim_run(1, 1, 500000UL, seed + 1);
	sim_run(1, 2, 500000UL, seed + 2);
	sim_run(4, 4, 500000UL, seed + 3);
	sim_run(8, 64, 500000UL, seed + 4);
	sim_run(256, 256, 500000UL, seed + 5);
}

/* A corrupted CQ head stops new reservations but never underflows. */
static void test_ring_corrupt_head(void)
{
	const u32 n = 16;
	u32 tail = 5, reserved = 3, bad;

	for (bad = 0; bad < 4096; bad++) {
		u32 head = tail + 1 + bad;	/* ahead of the tail */
		u32 space = kcoll_cq_space(head, tail, n, reserved);

		if (!UNIT_EQ_UINT(space, 0))
			return;
		UNIT_CHECK(kcoll_cq_ready(head, tail, n) <= n);
	}
	/* Recovers once the head is sane again. */
	UNIT_EQ_UINT(kcoll_cq_space(tail, tail, n, reserved), n - reserved);
	UNIT_EQ_UINT(kcoll_cq_space(tail - n, tail, n, 0), 0);
	UNIT_EQ_UINT(kcoll_cq_space(tail - n + 1, tail, n, 0), 1);
}

int main(int argc, char **argv)
{
	unit_init(argc, argv);
	UNIT_RUN(test_pow2_helpers);
	UNIT_RUN(test_ring_size_zero);
	UNIT_RUN(test_ring_size_basic);
	UNIT_RUN(test_ring_size_huge);
	UNIT_RUN(test_ring_size_clamp);
	UNIT_RUN(test_ring_size_cqsize);
	UNIT_RUN(test_ring_size_cq_without_flag);
	UNIT_RUN(test_ring_size_default_cq);
	UNIT_RUN(test_ring_size_model);
	UNIT_RUN(test_ring_layout);
	UNIT_RUN(test_ring_layout_fields);
	UNIT_RUN(test_sq_ready);
	UNIT_RUN(test_cq_space_ready);
	UNIT_RUN(test_ring_corrupt_head);
	UNIT_RUN(test_sqe_check_valid);
	UNIT_RUN(test_sqe_check_delay_range);
	UNIT_RUN(test_sqe_check_unknown_opcode);
	UNIT_RUN(test_sqe_check_fields);
	UNIT_RUN(test_sqe_check_every_bit);
	UNIT_RUN(test_sqe_check_random);
	UNIT_RUN(test_setup_check);
	UNIT_RUN(test_enter_check);
	UNIT_RUN(test_op_name);
	UNIT_RUN(test_ring_simulation);
	return unit_done();
}
