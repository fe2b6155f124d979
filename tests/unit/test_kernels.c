// SPDX-License-Identifier: MIT
/*
 * kcoll's CUDA reduction kernels, host build (kernels/kcoll_kernels_host.cc:
 * the same template bodies nvcc compiles, run "thread" by "thread" by g++),
 * against the module's scalar CPU reduction (kmod/kcoll_reduce_scalar.c,
 * which test_reduce checks against an independent reference): every
 * (dtype, op) and AVG's finish, bit for bit, on edge values (NaN, signed
 * zeros, infinities, subnormals, ties, integer wrap), on every fp16/bf16
 * pattern pair, at every co-alignment and misalignment a device pointer can
 * have, for several grid sizes. Equal means the same bits; two NaNs also
 * count as equal, as between the module's own SIMD variants (their
 * payloads are not part of the contract, see kmod/kcoll_redop.h).
 */
#include <math.h>

#include "unit.h"
#include "kcoll_reduce.h"
#include "../../kernels/kcoll_kernels_host.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static const uint64_t edge_int[] = {
	0, 1, 2, 0x7f, 0x80, 0xff, 0x7fffffff, 0x80000000, 0xffffffff,
	0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull, 3, 100,
};
static const uint32_t edge_f32[] = {
	0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
	0xffc00001, 0x7f800001, 0x00000001, 0x807fffff, 0x00800000,
	0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000, 0x477ff000,
	0x477fe000, 0x33000000, 0x38800000, 0x387fc000, 0x3f800001,
};
static const uint64_t edge_f64[] = {
	0, 0x8000000000000000ull, 0x7ff0000000000000ull,
	0xfff0000000000000ull, 0x7ff8000000000000ull, 0xfff8000000000001ull,
	0x7ff0000000000001ull, 1, 0x800fffffffffffffull,
	0x0010000000000000ull, 0x7fefffffffffffffull, 0x3ff0000000000000ull,
	0xbff0000000000000ull, 0x3ff0000000000001ull,
};
static const uint16_t edge_f16[] = {
	0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfd01, 0x7c01, 0x0001,
	0x83ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0xbc00, 0x3c01, 0x1000,
	/* bf16 edges read as fp16 are ordinary values; and the reverse */
	0x7f80, 0xff80, 0x7fc0, 0x0080, 0x7f7f, 0x3f80, 0x007f,
};

/* One element of @dt: half the time an edge value, else random bits. */
static void gen(void *p, unsigned int dt)
{
	size_t es = kcoll_dtype_size(dt);
	uint64_t v = rnd();
	bool edge = rnd() & 1;

	switch (dt) {
	case KCOLL_DTYPE_FP16:
	case KCOLL_DTYPE_BF16:
		if (edge)
			v = edge_f16[rnd() % (sizeof(edge_f16) / 2)];
		break;
	case KCOLL_DTYPE_FP32:
		if (edge)
			v = edge_f32[rnd() % (sizeof(edge_f32) / 4)];
		break;
	case KCOLL_DTYPE_FP64:
		if (edge)
			v = edge_f64[rnd() % (sizeof(edge_f64) / 8)];
		break;
	default:
		if (edge)
			v = edge_int[rnd() % (sizeof(edge_int) / 8)];
		break;
	}
	memcpy(p, &v, es);	/* little endian: the low bytes */
}

/* First element where a and b differ (not both NaN), or -1. */
static long first_diff(const uint8_t *a, const uint8_t *b, size_t n,
		       unsigned int dt)
{
	long first;

	kcoll_host_count_diff(a, b, n, dt, &first);
	return first;
}

static const size_t sizes[] = { 0, 1, 2, 7, 15, 16, 17, 33, 255, 1000, 4099 };
static const uint64_t grids[] = { 1, 3, 256, 1024 };
#define MAXN	4099

/*
 * Every kernel: random/edge data at (dst, src) byte offsets that are
 * co-aligned (vector body) and not (all scalar), element-aligned as device
 * pointers must be.
 */
static void test_reduce_kernels(void)
{
	static uint8_t dbuf[MAXN * 8 + 64], sbuf[MAXN * 8 + 64];
	static uint8_t ref[MAXN * 8 + 64], src0[MAXN * 8 + 64];
	unsigned int nk = 0, ncase = 0;

	for (const struct kcoll_host_kernel *k = kcoll_host_kernels; k->name;
	     k++) {
		size_t es = kcoll_dtype_size(k->dtype);
		kcoll_reduce_fn cpu;

		if (!k->reduce)
			continue;
		nk++;
		cpu = kcoll_reduce_get(KCOLL_REDUCE_SCALAR, k->dtype, k->redop);
		if (!UNIT_CHECK(cpu != NULL))
			continue;
		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
		for (size_t doff = 0; doff < 16; doff += es)
		for (size_t soff = 0; soff < 16; soff += es) {
			size_t n = sizes[si];
			uint64_t g = grids[(doff + soff + si) % 4];
			long bad;

			for (size_t i = 0; i < n; i++) {
				gen(dbuf + doff + i * es, k->dtype);
				gen(sbuf + soff + i * es, k->dtype);
			}
			/* the bytes around dst must stay as they are */
			memset(dbuf + doff + n * es, 0xa5, 16);
			memcpy(ref, dbuf, sizeof(ref));
			memcpy(src0, sbuf, sizeof(src0));
			cpu(ref + doff, sbuf + soff, n);
			k->reduce(dbuf + doff, dbuf + doff, sbuf + soff, n, g);
			ncase++;
			bad = first_diff(dbuf + doff, ref + doff, n, k->dtype);
			if (!UNIT_CHECK(bad < 0) ||
			    !UNIT_CHECK(!memcmp(dbuf, ref, doff)) ||
			    !UNIT_CHECK(!memcmp(dbuf + doff + n * es,
						ref + doff + n * es, 16)) ||
			    !UNIT_CHECK(!memcmp(sbuf, src0, sizeof(sbuf)))) {
				UNIT_FAIL("%s n %zu dst+%zu src+%zu grid %" PRIu64
					  ": element %ld differs from the CPU's",
					  k->name, n, doff, soff, g, bad);
				return;
			}
		}
	}
	printf("# %u reduce kernels, %u cases, all bit-exact with the CPU's\n",
	       nk, ncase);
	UNIT_EQ_INT(nk, 48);
}

/*
 * Out of place (dst = a OP b, three buffers, as a GPU step whose operand
 * is not its destination): dst gets the CPU's answer, a and b stay.
 */
static void test_reduce_out_of_place(void)
{
	static uint8_t dbuf[MAXN * 8 + 64], abuf[MAXN * 8 + 64];
	static uint8_t bbuf[MAXN * 8 + 64], ref[MAXN * 8 + 64];
	static uint8_t a0[MAXN * 8 + 64], b0[MAXN * 8 + 64];

	for (const struct kcoll_host_kernel *k = kcoll_host_kernels; k->name;
	     k++) {
		size_t es = kcoll_dtype_size(k->dtype);
		kcoll_reduce_fn cpu;

		if (!k->reduce)
			continue;
		cpu = kcoll_reduce_get(KCOLL_REDUCE_SCALAR, k->dtype, k->redop);
		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
		for (size_t off = 0; off < 32; off += 8) {
			size_t n = sizes[si], doff = off % 16;
			size_t aoff = (off / 16) ? (doff + es) % 16 : doff;
			long bad;

			for (size_t i = 0; i < n; i++) {
				gen(abuf + aoff + i * es, k->dtype);
				gen(bbuf + doff + i * es, k->dtype);
			}
			memset(dbuf, 0x5a, sizeof(dbuf));
			memcpy(ref, dbuf, sizeof(ref));
			memcpy(ref + doff, abuf + aoff, n * es);
			memcpy(a0, abuf, sizeof(a0));
			memcpy(b0, bbuf, sizeof(b0));
			cpu(ref + doff, bbuf + doff, n);
			k->reduce(dbuf + doff, abuf + aoff, bbuf + doff, n,
				  grids[si % 4]);
			bad = first_diff(dbuf + doff, ref + doff, n, k->dtype);
			if (!UNIT_CHECK(bad < 0) ||
			    !UNIT_CHECK(!memcmp(abuf, a0, sizeof(a0))) ||
			    !UNIT_CHECK(!memcmp(bbuf, b0, sizeof(b0))) ||
			    !UNIT_CHECK(!memcmp(dbuf + doff + n * es,
						ref + doff + n * es, 16))) {
				UNIT_FAIL("%s n %zu dst+%zu a+%zu: element %ld",
					  k->name, n, doff, aoff, bad);
				return;
			}
		}
	}
}

/* fp16/bf16: every pattern against a permutation of all patterns. */
static void test_half_all_pairs(void)
{
	const size_t n = 65536;
	uint16_t *d = malloc(n * 2), *s = malloc(n * 2), *r = malloc(n * 2);

	for (const struct kcoll_host_kernel *k = kcoll_host_kernels; k->name;
	     k++) {
		kcoll_reduce_fn cpu;
		long bad;

		if (!k->reduce || (k->dtype != KCOLL_DTYPE_FP16 &&
				   k->dtype != KCOLL_DTYPE_BF16))
			continue;
		cpu = kcoll_reduce_get(KCOLL_REDUCE_SCALAR, k->dtype, k->redop);
		for (unsigned int mul = 1; mul < 40504; mul += 40502) {
			for (uint32_t i = 0; i < n; i++) {
				d[i] = r[i] = (uint16_t)i;
				s[i] = (uint16_t)(i * mul + 12345u);
			}
			cpu(r, s, n);
			k->reduce(d, d, s, n, 512);
			bad = first_diff((uint8_t *)d, (uint8_t *)r, n, k->dtype);
			if (!UNIT_CHECK(bad < 0))
				UNIT_FAIL("%s: 0x%04lx op 0x%04x", k->name, bad,
					  s[bad]);
		}
	}
	free(d);
	free(s);
	free(r);
}

/* fp8: every pair of the 256 patterns, in both orders. */
static void test_fp8_all_pairs(void)
{
	const size_t n = 65536;
	uint8_t *d = malloc(n), *s = malloc(n), *r = malloc(n);
	unsigned int nk = 0;

	for (const struct kcoll_host_kernel *k = kcoll_host_kernels; k->name;
	     k++) {
		kcoll_reduce_fn cpu;
		long bad;

		if (!k->reduce || (k->dtype != KCOLL_DTYPE_FP8_E4M3 &&
				   k->dtype != KCOLL_DTYPE_FP8_E5M2))
			continue;
		nk++;
		cpu = kcoll_reduce_get(KCOLL_REDUCE_SCALAR, k->dtype, k->redop);
		for (uint32_t i = 0; i < n; i++) {
			d[i] = r[i] = (uint8_t)i;
			s[i] = (uint8_t)(i >> 8);
		}
		cpu(r, s, n);
		k->reduce(d, d, s, n, 256);
		bad = first_diff(d, r, n, k->dtype);
		if (!UNIT_CHECK(bad < 0))
			UNIT_FAIL("%s: 0x%02lx op 0x%02x", k->name, bad & 0xff,
				  s[bad]);
	}
	UNIT_EQ_INT(nk, 8);
	free(d);
	free(s);
	free(r);
}

/* AVG's finish against the module's, nranks 1 .. 64. */
static void test_scale_kernels(void)
{
	static uint8_t dbuf[MAXN * 8 + 64], ref[MAXN * 8 + 64];
	static const uint32_t nr[] = { 1, 2, 3, 7, 64 };
	unsigned int nk = 0;

	for (const struct kcoll_host_kernel *k = kcoll_host_kernels; k->name;
	     k++) {
		size_t es = kcoll_dtype_size(k->dtype);

		if (!k->scale)
			continue;
		nk++;
		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
		for (size_t off = 0; off < 16; off += es) {
			size_t n = sizes[si];
			uint32_t q = nr[(si + off) % 5];
			long bad;

			for (size_t i = 0; i < n; i++)
				gen(dbuf + off + i * es, k->dtype);
			memcpy(ref, dbuf, sizeof(ref));
			UNIT_EQ_INT(kcoll_reduce_avg_finish(KCOLL_REDUCE_SCALAR,
							    ref + off, n,
							    k->dtype, q), 0);
			k->scale(dbuf + off, n, q, grids[si % 4]);
			bad = first_diff(dbuf + off, ref + off, n, k->dtype);
			if (!UNIT_CHECK(bad < 0) ||
			    !UNIT_CHECK(!memcmp(dbuf, ref, sizeof(ref)) ||
					bad < 0)) {
				UNIT_FAIL("%s n %zu +%zu nranks %u: element %ld",
					  k->name, n, off, q, bad);
				return;
			}
		}
	}
	UNIT_EQ_INT(nk, 6);
}

/*
 * The table is complete: a kernel for every valid (dtype, op) the module
 * reduces, none for an invalid one (AVG's steps are SUM's kernels).
 */
static void test_table_complete(void)
{
	for (unsigned int dt = 1; dt < KCOLL_DTYPE_LAST; dt++)
		for (unsigned int op = 1; op < KCOLL_REDOP_LAST; op++) {
			bool cpu = kcoll_reduce_get(KCOLL_REDUCE_SCALAR, dt,
						    op) != NULL;
			bool red = false, scale = false, gpu;

			for (const struct kcoll_host_kernel *k =
				     kcoll_host_kernels; k->name; k++) {
				if (k->dtype != dt)
					continue;
				if (k->reduce && k->redop ==
				    (op == KCOLL_REDOP_AVG ? KCOLL_REDOP_SUM : op))
					red = true;
				if (k->scale)
					scale = true;
			}
			/* AVG: SUM's kernel, then the scale kernel */
			gpu = red && (op != KCOLL_REDOP_AVG || scale);
			if (!UNIT_CHECK(cpu == gpu))
				UNIT_FAIL("dtype %u op %u: cpu %d gpu %d", dt,
					  op, cpu, gpu);
		}
	UNIT_CHECK(kcoll_host_kernel("kcoll_reduce_bf16_max") != NULL);
	UNIT_CHECK(kcoll_host_kernel("kcoll_scale_fp64") != NULL);
	UNIT_CHECK(kcoll_host_kernel("kcoll_reduce_fp32_avg") == NULL);
}

int main(int argc, char **argv)
{
	unit_init(argc, argv);
	UNIT_RUN(test_table_complete);
	UNIT_RUN(test_reduce_kernels);
	UNIT_RUN(test_reduce_out_of_place);
	UNIT_RUN(test_half_all_pairs);
	UNIT_RUN(test_fp8_all_pairs);
	UNIT_RUN(test_scale_kernels);
	return unit_done();
}
