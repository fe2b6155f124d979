// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over the module's plain logic (kmod/kcoll_logic.c):
 * descriptor validation, ring sizing and layout, index arithmetic, and the
 * ioctl argument checks. Built with -fsanitize=fuzzer,address,undefined
 * (tests/fuzz/fuzz.mk), so any out-of-bounds access or undefined behaviour
 * in that code is a crash too.
 *
 * Each input is read as one record (missing bytes are zero):
 *   64  an SQE                      kcoll_sqe_check() vs tests/oracle/kcoll-sqe-ref.h
 *   24  ring size request + limits  kcoll_ring_size() vs a reference below,
 *                                   then kcoll_ring_layout() invariants
 *   4   another geometry            kcoll_ring_layout() invariants
 *   16  SQ indices                  kcoll_sq_ready() vs reference
 *   16  CQ indices                  kcoll_cq_space()/kcoll_cq_ready()
 *   48  an ENTER + ring sizes       kcoll_enter_check() vs reference
 *   128 a SETUP                     kcoll_setup_check() vs reference
 * The references are written from the documented rules (linux/kcoll.h,
 * docs/DESIGN.md "Contexts and rings", "ENTER", "Descriptors"), not from
 * the implementation; a disagreement aborts with both answers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcoll_logic.h"
#include "kcoll-sqe-ref.h"
#include "fuzz_seed.h"

struct cursor {
	const uint8_t *p;
	size_t left;
};

static void take(struct cursor *c, void *dst, size_t n)
{
	size_t k = n < c->left ? n : c->left;

	memset(dst, 0, n);
	memcpy(dst, c->p, k);
	c->p += k;
	c->left -= k;
}

static u32 take32(struct cursor *c)
{
	u32 v;

	take(c, &v, sizeof(v));
	return v;
}

static __attribute__((noreturn, format(printf, 1, 2)))
void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz_sqe: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* ---------------------------------------------------------------- SQE */

static const char *verdict_name(enum kcoll_ref_verdict v)
{
	static const char *const n[] = { "valid", "-EINVAL", "-ERANGE",
					 "-EINVAL or -ERANGE" };

	return n[v];
}

static void check_sqe(const struct kcoll_sqe *s)
{
	enum kcoll_ref_verdict v = kcoll_ref_sqe(s);
	int r = kcoll_sqe_check(s);
	bool ok = v == KCOLL_REF_VALID ? r == 0 : kcoll_ref_res_ok(v, r);

	if (!ok)
		fail("kcoll_sqe_check(op %u dtype %u redop %u prio %u flags %#x comm %u peer %u count %llu send %#llx/%u recv %#llx/%u timeout %u resv %u) = %d, reference: %s",
		     s->opcode, s->dtype, s->redop, s->prio, s->flags,
		     s->comm_id, s->peer, (unsigned long long)s->count,
		     (unsigned long long)s->send_addr, s->send_mr,
		     (unsigned long long)s->recv_addr, s->recv_mr,
		     s->timeout_ms, s->resv, r, verdict_name(v));
	/* Names exist exactly for the opcodes that can be valid. */
	if ((s->opcode < KCOLL_OP_LAST) != (strcmp(kcoll_op_name(s->opcode), "?") != 0))
		fail("kcoll_op_name(%u) = %s", s->opcode, kcoll_op_name(s->opcode));
}

/* ------------------------------------------------------------ Geometry */

static u64 ref_pow2_up(u64 v)
{
	u64 r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

/*
 * DESIGN.md: sq_entries rounds up to a power of two; 0, or more than
 * min(max_sq, max_cq) (hard limits 2^15 and 2^16) is -EINVAL unless CLAMP
 * clamps it. The CQ defaults to 2 x SQ capped by max_cq; CQSIZE asks for a
 * size (not 0, clamped like the SQ), at least the SQ's; without CQSIZE
 * cq_entries must be 0.
 */
static int ref_ring_size(u32 rsq, u32 rcq, u32 flags, u32 max_sq, u32 max_cq,
			 u64 *sq, u64 *cq)
{
	u64 mcq = max_cq < KCOLL_CQ_ENTRIES_LIMIT ? max_cq : KCOLL_CQ_ENTRIES_LIMIT;
	u64 msq = max_sq < KCOLL_SQ_ENTRIES_LIMIT ? max_sq : KCOLL_SQ_ENTRIES_LIMIT;
	bool clamp = flags & KCOLL_SETUP_CLAMP;
	u64 want_sq = rsq, want_cq = rcq;

	if (msq > mcq)
		msq = mcq;
	if (!want_sq || !msq)
		return -EINVAL;
	if (want_sq > msq) {
		if (!clamp)
			return -EINVAL;
		want_sq = msq;
	}
	*sq = ref_pow2_up(want_sq);
	if (!(flags & KCOLL_SETUP_CQSIZE)) {
		if (want_cq)
			return -EINVAL;
		*cq = 2 * *sq <= mcq ? 2 * *sq : mcq;
		return 0;
	}
	if (!want_cq)
		return -EINVAL;
	if (want_cq > mcq) {
		if (!clamp)
			return -EINVAL;
		want_cq = mcq;
	}
	*cq = ref_pow2_up(want_cq);
	return *cq < *sq ? -EINVAL : 0;
}

struct span {
	u64 off, len;
	const char *what;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

static u32 line(u32 off)
{
	return off / KCOLL_CACHELINE;
}

/* Everything inside the mapping, aligned, nothing overlapping, producer
 * and consumer fields on different cache lines. */
static void check_layout(u32 sq, u32 cq)
{
	struct kcoll_ring_layout l;
	struct span sp[12];
	u64 end;
	int i, n = 0;

	memset(&l, 0x5a, sizeof(l));
	kcoll_ring_layout(sq, cq, &l);
	if (l.sq_entries != sq || l.cq_entries != cq)
		fail("layout(%u, %u) records %u, %u", sq, cq, l.sq_entries, l.cq_entries);
#define SPAN(o, n_, w) sp[n++] = (struct span){ (o), (n_), (w) }
	SPAN(l.sq_off.head, 4, "sq.head");
	SPAN(l.sq_off.tail, 4, "sq.tail");
	SPAN(l.sq_off.ring_mask, 4, "sq.ring_mask");
	SPAN(l.sq_off.ring_entries, 4, "sq.ring_entries");
	SPAN(l.sq_off.flags, 4, "sq.flags");
	SPAN(l.sq_off.sqes, (u64)sq * sizeof(struct kcoll_sqe), "sqes");
	SPAN(l.cq_off.head, 4, "cq.head");
	SPAN(l.cq_off.tail, 4, "cq.tail");
	SPAN(l.cq_off.ring_mask, 4, "cq.ring_mask");
	SPAN(l.cq_off.ring_entries, 4, "cq.ring_entries");
	SPAN(l.cq_off.flags, 4, "cq.flags");
	SPAN(l.cq_off.cqes, (u64)cq * sizeof(struct kcoll_cqe), "cqes");
#undef SPAN
	if (l.size % KCOLL_PAGE_SIZE || l.size > 0xffffffffULL || !l.size)
		fail("layout(%u, %u): size %llu", sq, cq, (unsigned long long)l.size);
	for (i = 0; i < n; i++) {
		if (sp[i].off % 4)
			fail("layout(%u, %u): %s at %llu is not aligned", sq, cq,
			     sp[i].what, (unsigned long long)sp[i].off);
		if (sp[i].off + sp[i].len > l.size)
			fail("layout(%u, %u): %s [%llu, +%llu) beyond size %llu",
			     sq, cq, sp[i].what, (unsigned long long)sp[i].off,
			     (unsigned long long)sp[i].len,
			     (unsigned long long)l.size);
	}
	if (l.sq_off.sqes % KCOLL_CACHELINE || l.cq_off.cqes % KCOLL_CACHELINE)
		fail("layout(%u, %u): arrays at %u and %u not cache-line aligned",
		     sq, cq, l.sq_off.sqes, l.cq_off.cqes);
	qsort(sp, n, sizeof(sp[0]), span_cmp);
	for (i = 1; i < n; i++)
		if (sp[i - 1].off + sp[i - 1].len > sp[i].off)
			fail("layout(%u, %u): %s overlaps %s", sq, cq,
			     sp[i - 1].what, sp[i].what);
	/* Kernel-written indices never share a line with application-
	 * written fields (sq.tail, cq.head, cq.flags). */
	if (line(l.sq_off.head) == line(l.sq_off.tail) ||
	    line(l.cq_off.tail) == line(l.cq_off.head) ||
	    line(l.sq_off.head) == line(l.cq_off.head) ||
	    line(l.cq_off.tail) == line(l.sq_off.tail) ||
	    line(l.cq_off.tail) == line(l.cq_off.flags) ||
	    line(l.sq_off.head) == line(l.cq_off.flags))
		fail("layout(%u, %u): producer and consumer indices share a cache line",
		     sq, cq);
	/* No more than a page of slack. */
	end = (u64)l.cq_off.cqes + (u64)cq * sizeof(struct kcoll_cqe);
	if (l.size - end >= KCOLL_PAGE_SIZE)
		fail("layout(%u, %u): size %llu for %llu bytes", sq, cq,
		     (unsigned long long)l.size, (unsigned long long)end);
}

static void check_ring_size(struct cursor *c)
{
	u32 rsq = take32(c), rcq = take32(c), flags = take32(c);
	u32 max_sq = take32(c), max_cq = take32(c), sel = take32(c);
	u32 sq = 0xdead, cq = 0xbeef;
	u64 rs, rc;
	int r, want;

	/* The module's limits are powers of two within the hard limits
	 * (sysfs refuses others): the documented precondition. Arbitrary
	 * ones only have to be survived. */
	bool pre = !(sel & 1);

	if (pre) {
		max_sq = 1U << (max_sq % 16);		/* 1 .. 2^15 */
		max_cq = 1U << (max_cq % 17);		/* 1 .. 2^16 */
	}
	if (sel & 2)
		rsq %= 2 * KCOLL_CQ_ENTRIES_LIMIT;	/* near the limits */
	if (sel & 4)
		rcq %= 4 * KCOLL_CQ_ENTRIES_LIMIT;
	flags &= (sel & 8) ? ~0U : KCOLL_SETUP_F_ALL;
	r = kcoll_ring_size(rsq, rcq, flags, max_sq, max_cq, &sq, &cq);
	if (r && r != -EINVAL)
		fail("kcoll_ring_size: %d", r);
	/* With limits that are not powers of two the result need not be
	 * one either (the CQ default is capped at max_cq): only survived. */
	if (!pre)
		return;
	if (!r && (!kcoll_is_pow2(sq) || !kcoll_is_pow2(cq) || cq < sq ||
		   sq > KCOLL_SQ_ENTRIES_LIMIT || cq > KCOLL_CQ_ENTRIES_LIMIT))
		fail("kcoll_ring_size(%u, %u, %#x, %u, %u) = sq %u cq %u",
		     rsq, rcq, flags, max_sq, max_cq, sq, cq);
	want = ref_ring_size(rsq, rcq, flags, max_sq, max_cq, &rs, &rc);
	if (r != want || (!r && (sq != rs || cq != rc)))
		fail("kcoll_ring_size(sq %u, cq %u, flags %#x, max %u/%u) = %d (sq %u cq %u), reference %d (sq %llu cq %llu)",
		     rsq, rcq, flags, max_sq, max_cq, r, sq, cq, want,
		     (unsigned long long)rs, (unsigned long long)rc);
	if (!r && (sq > max_sq || sq > max_cq || cq > max_cq))
		fail("ring of sq %u cq %u exceeds the limits %u/%u", sq, cq,
		     max_sq, max_cq);
	if (!r)
		check_layout(sq, cq);
}

/* ------------------------------------------------------------- Indices */

static void check_indices(struct cursor *c)
{
	u32 head = take32(c), tail = take32(c), entries = take32(c);
	u32 to_submit = take32(c), used;
	u32 ch = take32(c), ct = take32(c), ce = take32(c), res = take32(c);
	int r, want;
	u32 sp;
	u64 total;

	/* SQ: any indices (the tail is the application's), a ring size
	 * the module can have (the result is an int). */
	entries %= KCOLL_SQ_ENTRIES_LIMIT + 1;
	used = tail - head;
	want = used > entries ? -EOVERFLOW :
	       (int)(to_submit < used ? to_submit : used);
	r = kcoll_sq_ready(head, tail, entries, to_submit);
	if (r != want || r > (int)entries)
		fail("kcoll_sq_ready(head %u, tail %u, entries %u, to_submit %u) = %d, reference %d",
		     head, tail, entries, to_submit, r, want);

	/* CQ: any head (the application's), the kernel's own tail, and a
	 * reservation the kernel never lets exceed the ring. */
	ce = ce % KCOLL_CQ_ENTRIES_LIMIT + 1;
	res %= ce + 1;
	used = ct - ch;
	total = (u64)used + res;
	sp = kcoll_cq_space(ch, ct, ce, res);
	if (sp != (used > ce || total >= ce ? 0 : ce - total))
		fail("kcoll_cq_space(head %u, tail %u, entries %u, reserved %u) = %u",
		     ch, ct, ce, res, sp);
	if (sp && (u64)sp + used + res > ce)
		fail("kcoll_cq_space(head %u, tail %u, entries %u, reserved %u) = %u overcommits",
		     ch, ct, ce, res, sp);
	sp = kcoll_cq_ready(ch, ct, ce);
	if (sp != (used > ce ? ce : used))
		fail("kcoll_cq_ready(head %u, tail %u, entries %u) = %u", ch, ct, ce, sp);
}

/* ---------------------------------------------------------------- ioctls */

static void check_enter(struct cursor *c)
{
	struct kcoll_enter e;
	u32 sq, cq, sel = 0;
	bool inval;
	int r;

	take(c, &e, sizeof(e));
	sq = take32(c);
	cq = take32(c);
	take(c, &sel, 1);
	/* Real geometries most of the time, fields near them. */
	if (!(sel & 1)) {
		sq = 1U << (sq % 16);
		cq = sq << (cq % 3);
		if (cq > KCOLL_CQ_ENTRIES_LIMIT)
			cq = KCOLL_CQ_ENTRIES_LIMIT;
		e.to_submit %= 2 * sq + 1;
		e.min_complete %= 2 * cq + 1;
	}
	if (!(sel & 2)) {
		e.flags &= KCOLL_ENTER_F_ALL;
		e.resv0 = 0;
		memset(e.resv, 0, sizeof(e.resv));
	}
	if (sel & 4)
		e.timeout_ns = 0;
	inval = (e.flags & ~KCOLL_ENTER_F_ALL) || e.resv0 || e.resv[0] ||
		e.resv[1] || e.to_submit > sq || e.min_complete > cq ||
		(!(e.flags & KCOLL_ENTER_GETEVENTS) &&
		 (e.min_complete || e.timeout_ns));
	r = kcoll_enter_check(&e, sq, cq);
	if (r != (inval ? -EINVAL : 0))
		fail("kcoll_enter_check({%u, %u, %#x, resv0 %u, %llu, resv %llu %llu}, sq %u, cq %u) = %d, reference %d",
		     e.to_submit, e.min_complete, e.flags, e.resv0,
		     (unsigned long long)e.timeout_ns,
		     (unsigned long long)e.resv[0], (unsigned long long)e.resv[1],
		     sq, cq, r, inval ? -EINVAL : 0);
}

static void check_setup(struct cursor *c)
{
	struct kcoll_setup p;
	u8 sel = 0;
	bool inval;
	int r;

	take(c, &p, sizeof(p));
	take(c, &sel, 1);
	/* Mostly clean requests with one field at fault, sometimes anything. */
	if (!(sel & 1)) {
		struct kcoll_setup q = { .sq_entries = p.sq_entries,
					 .cq_entries = p.cq_entries,
					 .flags = p.flags & KCOLL_SETUP_F_ALL };
		u8 *b = (u8 *)&q;

		if (sel & 2)
			b[offsetof(struct kcoll_setup, features) +
			  (sel >> 2) % (sizeof(q) - offsetof(struct kcoll_setup, features))] |= 1U << (sel >> 5);
		p = q;
	}
	inval = (p.flags & ~KCOLL_SETUP_F_ALL) || p.features || p.mmap_size ||
		p.mmap_offset;
	for (size_t i = 0; i < sizeof(p.sq_off); i++)
		inval |= ((u8 *)&p.sq_off)[i] || ((u8 *)&p.cq_off)[i];
	for (size_t i = 0; i < 4; i++)
		inval |= p.resv[i] != 0;
	r = kcoll_setup_check(&p);
	if (r != (inval ? -EINVAL : 0))
		fail("kcoll_setup_check(flags %#x features %#x size %llu off %llu ...) = %d, reference %d",
		     p.flags, p.features, (unsigned long long)p.mmap_size,
		     (unsigned long long)p.mmap_offset, r, inval ? -EINVAL : 0);
}

/*
 * Seeds are generated, not committed: with KCOLL_FUZZ_SEEDS=DIR the target
 * writes one valid record per opcode there and exits (tests/fuzz/run.sh).
 */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("KCOLL_FUZZ_SEEDS");
	u8 op;

	(void)argc;
	(void)argv;
	if (!dir)
		return 0;
	for (op = 0; op < KCOLL_OP_LAST; op++) {
		struct {
			struct kcoll_sqe sqe;
			u32 ring[6];	/* sq 8, default cq, limits 4096/8192 */
			u32 geo;
			u32 idx[8];
			struct kcoll_enter e;
			u32 sizes[2];
			u8 esel;
			struct kcoll_setup su;
			u8 ssel;
		} __attribute__((packed)) rec = {
			.ring = { 8, 0, 0, 12, 13, 0 },
			.geo = 3 | 4 << 8,
			.idx = { 0, 3, 8, 2, 5, 9, 16, 2 },
			.e = { .to_submit = 1, .min_complete = 1,
			       .flags = KCOLL_ENTER_GETEVENTS, .timeout_ns = 1000 },
			.sizes = { 3, 1 },
			.su = { .sq_entries = 8 },
		};
		struct kcoll_ref_use u;

		kcoll_ref_use(op, &u);
		rec.sqe.opcode = op;
		rec.sqe.user_data = op;
		rec.sqe.dtype = u.dtype ? KCOLL_DTYPE_FP32 : 0;
		rec.sqe.redop = u.redop ? KCOLL_REDOP_SUM : 0;
		rec.sqe.comm_id = u.comm ? 1 : 0;
		rec.sqe.count = u.count ? 100 : 0;
		rec.sqe.send_addr = u.send ? 0x10000 : 0;
		rec.sqe.recv_addr = u.recv ? 0x20000 : 0;
		fuzz_seed_write(dir, &rec, sizeof(rec), "seed-%s",
				kcoll_op_name(op));
	}
	exit(0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	struct kcoll_sqe sqe;
	u32 g;

	take(&c, &sqe, sizeof(sqe));
	check_sqe(&sqe);
	check_ring_size(&c);
	g = take32(&c);
	check_layout(1U << (g % 16), 1U << ((g >> 8) % 17));
	check_indices(&c);
	check_enter(&c);
	check_setup(&c);
	return 0;
}
