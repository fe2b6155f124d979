// SPDX-License-Identifier: MIT
/*
 * Host unit tests of the CPU reductions (kmod/kcoll_reduce*.c): every
 * implementation the CPU supports, every valid (dtype, redop), many lengths
 * and misalignments, against a straightforward reference written here,
 * with its own fp16/bf16/fp8 conversions (fp16 through the compiler's
 * _Float16, bf16 and fp8 through exact double arithmetic: fp8 by searching
 * the nearest of its values), and every pair of fp8 values exhaustively.
 */
#include <math.h>
#include <string.h>

#include "unit.h"
#include "kcoll_reduce.h"

static struct unit_rng rng;
static enum kcoll_reduce_impl cur_impl;

static bool impl_supported(enum kcoll_reduce_impl impl, const char **why)
{
	*why = NULL;
	switch (impl) {
	case KCOLL_REDUCE_SCALAR:
		return true;
#if defined(__x86_64__)
	case KCOLL_REDUCE_SSE2:
		return true;
	case KCOLL_REDUCE_AVX2:
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx2") &&
		    __builtin_cpu_supports("f16c"))
			return true;
		*why = "CPU lacks AVX2 or F16C";
		return false;
	case KCOLL_REDUCE_AVX512:
		/* libgcc also checks that the OS enabled the ZMM state */
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx512f") &&
		    __builtin_cpu_supports("avx512bw") &&
		    __builtin_cpu_supports("avx512vl") &&
		    __builtin_cpu_supports("f16c"))
			return true;
		*why = "CPU or OS lacks AVX-512F/BW/VL or F16C";
		return false;
#endif
	default:
		*why = "not built on this architecture";
		return false;
	}
}

static bool is_float(unsigned int dt)
{
	return dt == KCOLL_DTYPE_FP16 || dt == KCOLL_DTYPE_BF16 ||
	       dt == KCOLL_DTYPE_FP32 || dt == KCOLL_DTYPE_FP64 ||
	       dt == KCOLL_DTYPE_FP8_E4M3 || dt == KCOLL_DTYPE_FP8_E5M2;
}


static size_t ref_size(unsigned int dt)
{
	static const size_t sz[KCOLL_DTYPE_LAST] = {
		0, 1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1,
	};

	return dt < KCOLL_DTYPE_LAST ? sz[dt] : 0;
}

/* ------------------------------------------------------------------ */
/* Reference conversions                                               */
/* ------------------------------------------------------------------ */

static float ref_h2f(uint16_t h)
{
	_Float16 x;

	memcpy(&x, &h, 2);
	return (float)x;
}

static uint16_t ref_f2h(float f)
{
	_Float16 x = (_Float16)f;
	uint16_t h;

	memcpy(&h, &x, 2);
	return h;
}

static uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* Magnitude of bf16 bits 0..0x7f80 as a double; 0x7f80 counts as 2^128. */
static double bf_mag(uint32_t m)
{
	uint32_t e = m >> 7, f = m & 0x7f;

	if (e == 0)
		return ldexp(f, -133);
	return ldexp(128 + f, (int)e - 134);
}

static float ref_bf2f(uint16_t h)
{
	uint32_t e = (h >> 7) & 0xff, m = h & 0x7f;
	double v;

	if (e == 0xff)
		v = m ? NAN : INFINITY;
	else
		v = bf_mag(h & 0x7fff);
	return (float)(h & 0x8000 ? -v : v);
}

/* Nearest bf16, ties to even, decided by exact double differences. */
static uint16_t ref_f2bf(float f)
{
	uint16_t sign = signbit(f) ? 0x8000 : 0;
	double d = fabs((double)f), dl, dh;
	uint32_t lo, hi;

	if (isnan(f))
		return 0x7fc0;
	if (isinf(f))
		return sign | 0x7f80;
	lo = f2u(fabsf(f)) >> 16;	/* truncation: lo <= d < hi */
	hi = lo + 1;
	dl = d - bf_mag(lo);
	dh = bf_mag(hi) - d;
	if (dl < dh)
		return sign | lo;
	if (dh < dl)
		return sign | hi;
	return sign | (lo & 1 ? hi : lo);
}

/*
 * fp8 from the OCP definitions: E4M3 (bias 7, no infinities, NaN
 * S.1111.111) and E5M2 (bias 15, infinities S.11111.00). Narrowing: the
 * nearest finite value by exact double distance, ties to the even code;
 * a magnitude at or past the largest finite value (infinity too) gives
 * it (saturation); a NaN gives 0x7f.
 */
static double ref_fp8_mag(unsigned int code, bool e4m3)
{
	unsigned int mb = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
	unsigned int e = (code & 0x7f) >> mb, m = code & ((1u << mb) - 1);

	if (e == 0)
		return ldexp(m, 1 - (int)bias - (int)mb);
	return ldexp((1u << mb) + m, (int)e - (int)bias - (int)mb);
}

static float ref_fp8_2f(uint8_t v, bool e4m3)
{
	double x;

	if (e4m3 ? (v & 0x7f) == 0x7f : (v & 0x7f) > 0x7c)
		x = NAN;
	else if (!e4m3 && (v & 0x7f) == 0x7c)
		x = INFINITY;
	else
		x = ref_fp8_mag(v, e4m3);
	return (float)(v & 0x80 ? -x : x);
}

static uint8_t ref_f2fp8(float f, bool e4m3)
{
	unsigned int maxcode = e4m3 ? 0x7e : 0x7b, best = 0;
	uint8_t sign = signbit(f) ? 0x80 : 0;
	double a = fabs((double)f), bd = INFINITY;

	if (isnan(f))
		return 0x7f;
	if (a >= ref_fp8_mag(maxcode, e4m3))
		return sign | maxcode;
	for (unsigned int c = 0; c <= maxcode; c++) {
		double dd = fabs(ref_fp8_mag(c, e4m3) - a);

		if (dd < bd || (dd == bd && !(c & 1))) {
			bd = dd;
			best = c;
		}
	}
	return sign | best;
}

/* ------------------------------------------------------------------ */
/* Reference reduction, one element at a time                          */
/* ------------------------------------------------------------------ */

static double ref_minmax(double a, double b, bool is_min)
{
	if (isnan(a))
		return a;
	if (isnan(b))
		return b;
	if (is_min)
		return a < b ? a : b;
	return a > b ? a : b;
}

static float ref_fop(float a, float b, unsigned int op)
{
	switch (op) {
	case KCOLL_REDOP_SUM:
	case KCOLL_REDOP_AVG:
		return a + b;
	case KCOLL_REDOP_PROD:
		return a * b;
	default:
		return (float)ref_minmax(a, b, op == KCOLL_REDOP_MIN);
	}
}

static double ref_dop(double a, double b, unsigned int op)
{
	switch (op) {
	case KCOLL_REDOP_SUM:
	case KCOLL_REDOP_AVG:
		return a + b;
	case KCOLL_REDOP_PROD:
		return a * b;
	default:
		return ref_minmax(a, b, op == KCOLL_REDOP_MIN);
	}
}

#define REF_INT(UT, ST, d, s, op, is_signed) do {			\
	UT ua_ = (UT)(d), ub_ = (UT)(s);				\
	ST sa_ = (ST)ua_, sb_ = (ST)ub_;				\
	switch (op) {							\
	case KCOLL_REDOP_SUM: (d) = (UT)(ua_ + ub_); break;		\
	case KCOLL_REDOP_PROD: (d) = (UT)((UT)ua_ * (UT)ub_); break;	\
	case KCOLL_REDOP_MIN:						\
		(d) = is_signed ? (UT)(sa_ < sb_ ? sa_ : sb_)		\
				: (ua_ < ub_ ? ua_ : ub_); break;	\
	case KCOLL_REDOP_MAX:						\
		(d) = is_signed ? (UT)(sa_ > sb_ ? sa_ : sb_)		\
				: (ua_ > ub_ ? ua_ : ub_); break;	\
	}								\
} while (0)

static void ref_reduce(void *dst, const void *src, size_t n, unsigned int dt,
		       unsigned int op)
{
	for (size_t i = 0; i < n; i++) {
		switch (dt) {
		case KCOLL_DTYPE_INT8:
		case KCOLL_DTYPE_UINT8:
			REF_INT(uint8_t, int8_t, ((uint8_t *)dst)[i],
				((const uint8_t *)src)[i], op,
				dt == KCOLL_DTYPE_INT8);
			break;
		case KCOLL_DTYPE_INT32:
		case KCOLL_DTYPE_UINT32:
			REF_INT(uint32_t, int32_t, ((uint32_t *)dst)[i],
				((const uint32_t *)src)[i], op,
				dt == KCOLL_DTYPE_INT32);
			break;
		case KCOLL_DTYPE_INT64:
		case KCOLL_DTYPE_UINT64:
			REF_INT(uint64_t, int64_t, ((uint64_t *)dst)[i],
				((const uint64_t *)src)[i], op,
				dt == KCOLL_DTYPE_INT64);
			break;
		case KCOLL_DTYPE_FP16: {
			uint16_t *d = (uint16_t *)dst + i;
			const uint16_t *s = (const uint16_t *)src + i;

			*d = ref_f2h(ref_fop(ref_h2f(*d), ref_h2f(*s), op));
			break;
		}
		case KCOLL_DTYPE_BF16: {
			uint16_t *d = (uint16_t *)dst + i;
			const uint16_t *s = (const uint16_t *)src + i;

			*d = ref_f2bf(ref_fop(ref_bf2f(*d), ref_bf2f(*s), op));
			break;
		}
		case KCOLL_DTYPE_FP32:
			((float *)dst)[i] = ref_fop(((float *)dst)[i],
						    ((const float *)src)[i], op);
			break;
		case KCOLL_DTYPE_FP64:
			((double *)dst)[i] = ref_dop(((double *)dst)[i],
						     ((const double *)src)[i],
						     op);
			break;
		case KCOLL_DTYPE_FP8_E4M3:
		case KCOLL_DTYPE_FP8_E5M2: {
			bool e4 = dt == KCOLL_DTYPE_FP8_E4M3;
			uint8_t *d = (uint8_t *)dst + i;

			*d = ref_f2fp8(ref_fop(ref_fp8_2f(*d, e4),
					       ref_fp8_2f(((const uint8_t *)src)[i],
							  e4), op), e4);
			break;
		}
		}
	}
}

static void ref_avg(void *dst, size_t n, unsigned int dt, uint32_t nranks)
{
	for (size_t i = 0; i < n; i++) {
		uint16_t *h = (uint16_t *)dst + i;

		switch (dt) {
		case KCOLL_DTYPE_FP16:
			*h = ref_f2h(ref_h2f(*h) / (float)nranks);
			break;
		case KCOLL_DTYPE_BF16:
			*h = ref_f2bf(ref_bf2f(*h) / (float)nranks);
			break;
		case KCOLL_DTYPE_FP32:
			((float *)dst)[i] /= (float)nranks;
			break;
		case KCOLL_DTYPE_FP64:
			((double *)dst)[i] /= (double)nranks;
			break;
		case KCOLL_DTYPE_FP8_E4M3:
		case KCOLL_DTYPE_FP8_E5M2: {
			bool e4 = dt == KCOLL_DTYPE_FP8_E4M3;
			uint8_t *b = (uint8_t *)dst + i;

			*b = ref_f2fp8(ref_fp8_2f(*b, e4) / (float)nranks, e4);
			break;
		}
		}
	}
}

/* Element i of a and b equal: same bits, or both NaN. */
static bool elem_eq(const void *a, const void *b, size_t i, unsigned int dt)
{
	size_t es = ref_size(dt);
	const uint8_t *pa = (const uint8_t *)a + i * es;
	const uint8_t *pb = (const uint8_t *)b + i * es;
	uint16_t ha, hb;
	float fa, fb;
	double da, db;

	if (!memcmp(pa, pb, es))
		return true;
	switch (dt) {
	case KCOLL_DTYPE_FP16:
		memcpy(&ha, pa, 2);
		memcpy(&hb, pb, 2);
		return isnan(ref_h2f(ha)) && isnan(ref_h2f(hb));
	case KCOLL_DTYPE_BF16:
		memcpy(&ha, pa, 2);
		memcpy(&hb, pb, 2);
		return isnan(ref_bf2f(ha)) && isnan(ref_bf2f(hb));
	case KCOLL_DTYPE_FP32:
		memcpy(&fa, pa, 4);
		memcpy(&fb, pb, 4);
		return isnan(fa) && isnan(fb);
	case KCOLL_DTYPE_FP64:
		memcpy(&da, pa, 8);
		memcpy(&db, pb, 8);
		return isnan(da) && isnan(db);
	}
	/* fp8: bit for bit (every NaN comes out as 0x7f) */
	return false;
}

static uint64_t elem_bits(const void *a, size_t i, unsigned int dt)
{
	uint64_t v = 0;

	memcpy(&v, (const uint8_t *)a + i * ref_size(dt), ref_size(dt));
	return v;
}

/* ------------------------------------------------------------------ */
/* Test data                                                           */
/* ------------------------------------------------------------------ */

static const uint16_t h_special[] = {
	0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00,
	0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7d00, 0x3800, 0x3c01,
};
static const uint16_t bf_special[] = {
	0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x3f80, 0xbf80,
	0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0x7fa0, 0x3f00, 0x3f81,
};

/* Random element: specials, random bits, or values of nearby magnitude. */
static void gen_elem(void *p, unsigned int dt)
{
	uint64_t r = unit_rng_next(&rng);
	unsigned int kind = unit_rng_upto(&rng, 7);
	uint64_t sign = r >> 63;

	switch (dt) {
	case KCOLL_DTYPE_FP16: {
		uint16_t h = (uint16_t)r;

		if (kind == 0)
			h = h_special[r % 16];
		else if (kind >= 3)	/* exponents 8..22: many ties */
			h = (uint16_t)((sign << 15) |
				       ((8 + (r >> 20) % 15) << 10) |
				       (r & 0x3ff));
		memcpy(p, &h, 2);
		return;
	}
	case KCOLL_DTYPE_BF16: {
		uint16_t h = (uint16_t)r;

		if (kind == 0)
			h = bf_special[r % 16];
		else if (kind >= 3)	/* exponents 120..134 */
			h = (uint16_t)((sign << 15) |
				       ((120 + (r >> 20) % 15) << 7) |
				       (r & 0x7f));
		memcpy(p, &h, 2);
		return;
	}
	case KCOLL_DTYPE_FP32: {
		uint32_t u = (uint32_t)r;
		static const float sp[] = { 0.0f, -0.0f, INFINITY, -INFINITY,
					    NAN, 1e-45f, 3.4028235e38f, 1.0f };

		if (kind == 0)
			u = f2u(sp[r % 8]);
		else if (kind >= 3)
			u = (uint32_t)((sign << 31) |
				       ((120 + (r >> 32) % 15) << 23) |
				       (r & 0x7fffff));
		memcpy(p, &u, 4);
		return;
	}
	case KCOLL_DTYPE_FP64: {
		static const double sp[] = { 0.0, -0.0, INFINITY, -INFINITY,
					     NAN, 5e-324, 1.7976931348623157e308,
					     1.0 };

		if (kind == 0) {
			memcpy(p, &sp[r % 8], 8);
			return;
		}
		if (kind >= 3)
			r = (sign << 63) | ((1020 + (r >> 52) % 8) << 52) |
			    (r & 0xfffffffffffffULL);
		memcpy(p, &r, 8);
		return;
	}
	default:
		if (kind == 0)	/* small values so min/max see ties */
			r &= 3;
		memcpy(p, &r, ref_size(dt));
		return;
	}
}

/* ------------------------------------------------------------------ */
/* Tests                                                               */
/* ------------------------------------------------------------------ */

static const size_t lengths[] = {
	0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 255,
	256, 257, 1000, 4099,
};

#define GUARD	64
#define PAT	0xa5

/*
 * One run: dst at byte offset od and src at os of their buffers; checks
 * the result against the reference and that no byte outside dst[0..n)
 * changed (nor src at all).
 */
static bool run_one(kcoll_reduce_fn fn, unsigned int dt, unsigned int op,
		    size_t n, size_t od, size_t os)
{
	size_t es = ref_size(dt), bytes = n * es;
	size_t total = bytes + 2 * GUARD;
	uint8_t *dbuf = malloc(total), *sbuf = malloc(total);
	uint8_t *dref = malloc(bytes + 1), *sref = malloc(bytes + 1);
	uint8_t *scopy = malloc(total);
	bool ok = true;

	memset(dbuf, PAT, total);
	memset(sbuf, PAT ^ 0xff, total);
	for (size_t i = 0; i < n; i++) {
		gen_elem(dref + i * es, dt);
		gen_elem(sref + i * es, dt);
	}
	memcpy(dbuf + GUARD + od, dref, bytes);
	memcpy(sbuf + GUARD + os, sref, bytes);
	memcpy(scopy, sbuf, total);

	fn(dbuf + GUARD + od, sbuf + GUARD + os, n);
	ref_reduce(dref, sref, n, dt, op);

	for (size_t i = 0; i < n; i++) {
		if (!elem_eq(dbuf + GUARD + od, dref, i, dt)) {
			UNIT_FAIL("%s dtype %u redop %u n %zu od %zu os %zu: "
				  "elem %zu src 0x%" PRIx64 " got 0x%" PRIx64
				  " want 0x%" PRIx64,
				  kcoll_reduce_impl_name(cur_impl), dt, op, n,
				  od, os, i, elem_bits(sref, i, dt),
				  elem_bits(dbuf + GUARD + od, i, dt),
				  elem_bits(dref, i, dt));
			ok = false;
			break;
		}
	}
	for (size_t b = 0; b < total; b++) {
		if (b >= GUARD + od && b < GUARD + od + bytes)
			continue;
		if (dbuf[b] != PAT) {
			UNIT_FAIL("%s dtype %u redop %u n %zu od %zu: byte %zd "
				  "outside dst changed",
				  kcoll_reduce_impl_name(cur_impl), dt, op, n,
				  od, (ssize_t)b - (ssize_t)(GUARD + od));
			ok = false;
			break;
		}
	}
	if (memcmp(sbuf, scopy, total)) {
		UNIT_FAIL("src changed");
		ok = false;
	}
	free(dbuf);
	free(sbuf);
	free(dref);
	free(sref);
	free(scopy);
	return ok;
}

static void test_reduce_all(void)
{
	for (unsigned int dt = 1; dt < KCOLL_DTYPE_LAST; dt++) {
		size_t es = ref_size(dt);
		size_t offs[3] = { 0, 1, es };
		unsigned int noffs = es == 1 ? 2 : 3;

		for (unsigned int op = 1; op < KCOLL_REDOP_LAST; op++) {
			kcoll_reduce_fn fn = kcoll_reduce_get(cur_impl, dt, op);

			if (op == KCOLL_REDOP_AVG && !is_float(dt)) {
				UNIT_CHECK(fn == NULL);
				continue;
			}
			if (!UNIT_CHECK(fn != NULL))
				continue;
			for (size_t li = 0; li < sizeof(lengths) /
					 sizeof(lengths[0]); li++)
				for (unsigned int a = 0; a < noffs; a++)
					for (unsigned int b = 0; b < noffs; b++)
						if (!run_one(fn, dt, op,
							     lengths[li],
							     offs[a], offs[b]))
							goto next_op;
next_op:		;
		}
	}
}

/* dst == src is allowed (x OP x). */
static void test_reduce_inplace(void)
{
	for (unsigned int dt = 1; dt < KCOLL_DTYPE_LAST; dt++) {
		size_t es = ref_size(dt), n = 1000;
		uint8_t *buf = malloc(n * es), *ref = malloc(n * es);
		uint8_t *ref2 = malloc(n * es);

		for (unsigned int op = 1; op < KCOLL_REDOP_LAST; op++) {
			kcoll_reduce_fn fn = kcoll_reduce_get(cur_impl, dt, op);

			if (!fn)
				continue;
			for (size_t i = 0; i < n; i++)
				gen_elem(ref + i * es, dt);
			memcpy(buf, ref, n * es);
			memcpy(ref2, ref, n * es);
			fn(buf, buf, n);
			ref_reduce(ref, ref2, n, dt, op);
			for (size_t i = 0; i < n; i++)
				if (!UNIT_CHECK(elem_eq(buf, ref, i, dt)))
					break;
		}
		free(buf);
		free(ref);
		free(ref2);
	}
}

/* Every 16-bit pattern survives x * 1.0 (widening and narrowing). */
static void test_half_roundtrip(void)
{
	static uint16_t d[65536], s[65536];
	static const struct { unsigned int dt; uint16_t one; } t[] = {
		{ KCOLL_DTYPE_FP16, 0x3c00 }, { KCOLL_DTYPE_BF16, 0x3f80 },
	};

	for (unsigned int k = 0; k < 2; k++) {
		kcoll_reduce_fn fn = kcoll_reduce_get(cur_impl, t[k].dt,
						      KCOLL_REDOP_PROD);

		for (uint32_t i = 0; i < 65536; i++) {
			d[i] = (uint16_t)i;
			s[i] = t[k].one;
		}
		fn(d, s, 65536);
		for (uint32_t i = 0; i < 65536; i++) {
			uint16_t want = (uint16_t)i;

			if (!UNIT_CHECK(elem_eq(&d[i], &want, 0, t[k].dt))) {
				UNIT_FAIL("dtype %u 0x%04x -> 0x%04x", t[k].dt,
					  i, d[i]);
				break;
			}
			/* NaN stays NaN, and comes back quiet */
			if (t[k].dt == KCOLL_DTYPE_FP16 &&
			    (i & 0x7c00) == 0x7c00 && (i & 0x3ff))
				UNIT_CHECK(d[i] & 0x200);
			if (t[k].dt == KCOLL_DTYPE_BF16 &&
			    (i & 0x7f80) == 0x7f80 && (i & 0x7f))
				UNIT_CHECK(d[i] & 0x40);
		}
	}
}

/*
 * Every 16-bit pattern as dst against every pattern as src (in a shuffled
 * order, then random values), for every redop, once with aligned buffers
 * and once with both pointers one byte off: NaNs, infinities, subnormals
 * and ties through the vector widening/narrowing, against the reference.
 */
static void test_half_all(void)
{
	static const unsigned int dts[] = { KCOLL_DTYPE_FP16, KCOLL_DTYPE_BF16 };
	const size_t n = 65536, bytes = n * 2;
	uint8_t *dbuf = malloc(bytes + 1), *sbuf = malloc(bytes + 1);
	uint16_t *dref = malloc(bytes), *sref = malloc(bytes);

	for (unsigned int k = 0; k < 2; k++) {
		for (unsigned int op = 1; op < KCOLL_REDOP_LAST; op++) {
			kcoll_reduce_fn fn = kcoll_reduce_get(cur_impl, dts[k],
							      op);

			if (!UNIT_CHECK(fn != NULL))
				continue;
			for (unsigned int pass = 0; pass < 4; pass++) {
				size_t off = pass & 1;

				for (uint32_t i = 0; i < n; i++) {
					dref[i] = (uint16_t)i;
					if (pass < 2)	/* odd factor: bijection */
						sref[i] = (uint16_t)(i * 40503u +
								     12345u);
					else
						gen_elem(&sref[i], dts[k]);
				}
				memcpy(dbuf + off, dref, bytes);
				memcpy(sbuf + off, sref, bytes);
				fn(dbuf + off, sbuf + off, n);
				ref_reduce(dref, sref, n, dts[k], op);
				for (size_t i = 0; i < n; i++) {
					if (elem_eq(dbuf + off, dref, i, dts[k]))
						continue;
					UNIT_FAIL("%s dtype %u redop %u off %zu: "
						  "0x%04zx op 0x%04x got 0x%04" PRIx64
						  " want 0x%04x",
						  kcoll_reduce_impl_name(cur_impl),
						  dts[k], op, off, i, sref[i],
						  elem_bits(dbuf + off, i, dts[k]),
						  dref[i]);
					break;
				}
			}
		}
	}
	free(dbuf);
	free(sbuf);
	free(dref);
	free(sref);
}

/* Known answers: rounding ties, overflow, subnormals, infinities. */
static void test_half_known(void)
{
	static const struct {
		unsigned int dt, op;
		uint16_t a, b, want;
	} t[] = {
		/* fp16 */
		{ 7, KCOLL_REDOP_SUM, 0x3c00, 0x1000, 0x3c00 },	/* 1+2^-11 tie */
		{ 7, KCOLL_REDOP_SUM, 0x3c01, 0x1000, 0x3c02 },	/* tie -> even */
		{ 7, KCOLL_REDOP_SUM, 0x3c00, 0x1001, 0x3c01 },	/* above tie */
		{ 7, KCOLL_REDOP_SUM, 0x7bff, 0x4c00, 0x7c00 },	/* 65520: inf */
		{ 7, KCOLL_REDOP_SUM, 0x7bff, 0x4800, 0x7bff },	/* 65512 */
		{ 7, KCOLL_REDOP_SUM, 0xfbff, 0xcc00, 0xfc00 },	/* -inf */
		{ 7, KCOLL_REDOP_PROD, 0x0001, 0x3800, 0x0000 },	/* 2^-25 tie */
		{ 7, KCOLL_REDOP_PROD, 0x8001, 0x3800, 0x8000 },	/* -0 */
		{ 7, KCOLL_REDOP_PROD, 0x0003, 0x3800, 0x0002 },	/* 1.5: even */
		{ 7, KCOLL_REDOP_PROD, 0x0001, 0x3e00, 0x0002 },
		{ 7, KCOLL_REDOP_PROD, 0x0001, 0x3a00, 0x0001 },	/* 0.75 */
		{ 7, KCOLL_REDOP_PROD, 0x0400, 0x3800, 0x0200 },	/* to subnormal */
		{ 7, KCOLL_REDOP_SUM, 0x03ff, 0x0001, 0x0400 },	/* to normal */
		{ 7, KCOLL_REDOP_SUM, 0x7c00, 0xfc00, 0x7e00 },	/* inf-inf NaN */
		{ 7, KCOLL_REDOP_PROD, 0x7c00, 0x0000, 0x7e00 },
		{ 7, KCOLL_REDOP_SUM, 0x7c00, 0x3c00, 0x7c00 },
		{ 7, KCOLL_REDOP_MIN, 0x7e00, 0x3c00, 0x7e00 },
		{ 7, KCOLL_REDOP_MIN, 0x3c00, 0x7e00, 0x7e00 },
		{ 7, KCOLL_REDOP_MAX, 0xfc00, 0x0001, 0x0001 },
		{ 7, KCOLL_REDOP_MIN, 0xfc00, 0x0001, 0xfc00 },
		{ 7, KCOLL_REDOP_SUM, 0x8000, 0x8000, 0x8000 },	/* -0 + -0 */
		/* bf16 */
		{ 8, KCOLL_REDOP_SUM, 0x3f80, 0x3b80, 0x3f80 },	/* 1+2^-8 tie */
		{ 8, KCOLL_REDOP_SUM, 0x3f81, 0x3b80, 0x3f82 },
		{ 8, KCOLL_REDOP_SUM, 0x7f7f, 0x7b00, 0x7f80 },	/* max+tie: inf */
		{ 8, KCOLL_REDOP_SUM, 0x7f7f, 0x7b80, 0x7f80 },	/* 2^128: inf */
		{ 8, KCOLL_REDOP_SUM, 0x7f7f, 0x7a80, 0x7f7f },
		{ 8, KCOLL_REDOP_PROD, 0x0001, 0x3f00, 0x0000 },	/* tie: 0 */
		{ 8, KCOLL_REDOP_PROD, 0x0003, 0x3f00, 0x0002 },
		{ 8, KCOLL_REDOP_SUM, 0x7f80, 0xff80, 0x7fc0 },
		{ 8, KCOLL_REDOP_MAX, 0x3f80, 0x7fc0, 0x7fc0 },
	};

	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
		kcoll_reduce_fn fn = kcoll_reduce_get(cur_impl, t[k].dt,
						      t[k].op);
		/*
		 * 60 copies: the unrolled and single-vector loops and the
		 * scalar tail, for every vector width.
		 */
		uint16_t d[60], s[60], want = t[k].want;

		for (int i = 0; i < 60; i++) {
			d[i] = t[k].a;
			s[i] = t[k].b;
		}
		fn(d, s, 60);
		for (int i = 0; i < 60; i++) {
			if (!elem_eq(&d[i], &want, 0, t[k].dt)) {
				UNIT_FAIL("case %zu elem %d: 0x%04x want 0x%04x",
					  k, i, d[i], want);
				break;
			}
		}
		/* the reference agrees with the known answer */
		d[0] = t[k].a;
		ref_reduce(d, s, 1, t[k].dt, t[k].op);
		if (!elem_eq(&d[0], &want, 0, t[k].dt))
			UNIT_FAIL("reference case %zu: 0x%04x want 0x%04x", k,
				  d[0], want);
	}
}

static void test_avg_finish(void)
{
	static const uint32_t ranks[] = { 1, 3, 7, 8, 1000 };

	for (unsigned int dt = 1; dt < KCOLL_DTYPE_LAST; dt++) {
		size_t es = ref_size(dt);

		if (!is_float(dt)) {
			uint8_t x[8] = { 0 };

			UNIT_EQ_INT(kcoll_reduce_avg_finish(cur_impl, x, 1, dt,
							    2), -EINVAL);
			continue;
		}
		UNIT_EQ_INT(kcoll_reduce_avg_finish(cur_impl, NULL, 0, dt, 0),
			    -EINVAL);
		for (size_t li = 0; li < sizeof(lengths) / sizeof(lengths[0]);
		     li++) {
			size_t n = lengths[li], bytes = n * es, od = li % 2;
			uint8_t *buf = malloc(bytes + 2 * GUARD);
			uint8_t *ref = malloc(bytes + 1);

			for (unsigned int r = 0; r < 5; r++) {
				memset(buf, PAT, bytes + 2 * GUARD);
				for (size_t i = 0; i < n; i++)
					gen_elem(ref + i * es, dt);
				memcpy(buf + GUARD + od, ref, bytes);
				UNIT_EQ_INT(kcoll_reduce_avg_finish(cur_impl,
						buf + GUARD + od, n, dt,
						ranks[r]), 0);
				ref_avg(ref, n, dt, ranks[r]);
				for (size_t i = 0; i < n; i++)
					if (!UNIT_CHECK(elem_eq(buf + GUARD + od,
								ref, i, dt)))
						break;
				for (size_t b = 0; b < GUARD + od; b++)
					UNIT_CHECK(buf[b] == PAT);
				for (size_t b = GUARD + od + bytes;
				     b < bytes + 2 * GUARD; b++)
					UNIT_CHECK(buf[b] == PAT);
			}
			free(buf);
			free(ref);
		}
	}
}

static void test_invalid(void)
{
	static const unsigned int vals[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
					     11, 12, 255, 0x10000, ~0U };

	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		for (size_t j = 0; j < sizeof(vals) / sizeof(vals[0]); j++) {
			unsigned int dt = vals[i], op = vals[j];
			bool valid = dt > KCOLL_DTYPE_NONE &&
				     dt < KCOLL_DTYPE_LAST &&
				     op > KCOLL_REDOP_NONE &&
				     op < KCOLL_REDOP_LAST &&
				     (op != KCOLL_REDOP_AVG || is_float(dt));

			for (int impl = 0; impl < KCOLL_REDUCE_NR; impl++) {
				kcoll_reduce_fn fn = kcoll_reduce_get(impl, dt,
								      op);

				if (!UNIT_CHECK((fn != NULL) == valid))
					UNIT_FAIL("impl %d dtype %u redop %u",
						  impl, dt, op);
			}
			UNIT_CHECK(!kcoll_reduce_get(KCOLL_REDUCE_NR, dt, op));
			UNIT_CHECK(!kcoll_reduce_get(99, dt, op));
		}
		UNIT_EQ_UINT(kcoll_dtype_size(vals[i]), ref_size(vals[i]));
	}
	/* AVG reduces as SUM */
	UNIT_CHECK(kcoll_reduce_get(KCOLL_REDUCE_SCALAR, KCOLL_DTYPE_FP32,
				    KCOLL_REDOP_AVG) ==
		   kcoll_reduce_get(KCOLL_REDUCE_SCALAR, KCOLL_DTYPE_FP32,
				    KCOLL_REDOP_SUM));
	UNIT_EQ_INT(kcoll_reduce_avg_finish(KCOLL_REDUCE_NR, NULL, 0,
					    KCOLL_DTYPE_FP32, 1), -EINVAL);
	UNIT_EQ_STR(kcoll_reduce_impl_name(KCOLL_REDUCE_SCALAR), "scalar");
#if defined(__x86_64__)
	UNIT_EQ_STR(kcoll_reduce_impl_name(KCOLL_REDUCE_SSE2), "sse2");
	UNIT_EQ_STR(kcoll_reduce_impl_name(KCOLL_REDUCE_AVX2), "avx2");
	UNIT_EQ_STR(kcoll_reduce_impl_name(KCOLL_REDUCE_AVX512), "avx512");
#endif
	UNIT_EQ_STR(kcoll_reduce_impl_name(KCOLL_REDUCE_NR), "?");
}

/* The test's own conversions against a few fixed points. */
static void test_ref_self(void)
{
	UNIT_EQ_UINT(ref_f2h(1.0f), 0x3c00);
	UNIT_EQ_UINT(ref_f2h(65504.0f), 0x7bff);
	UNIT_EQ_UINT(ref_f2h(65520.0f), 0x7c00);
	UNIT_EQ_UINT(ref_f2h(ldexpf(1, -24)), 0x0001);
	UNIT_EQ_UINT(ref_f2h(ldexpf(1, -25)), 0x0000);
	UNIT_EQ_UINT(ref_f2h(ldexpf(3, -26)), 0x0001);
	UNIT_CHECK(ref_h2f(0x0001) == ldexpf(1, -24));
	UNIT_CHECK(ref_h2f(0x7bff) == 65504.0f);
	UNIT_EQ_UINT(ref_f2bf(1.0f), 0x3f80);
	UNIT_EQ_UINT(ref_f2bf(u2f(0x3f808000)), 0x3f80);	/* tie, even */
	UNIT_EQ_UINT(ref_f2bf(u2f(0x3f818000)), 0x3f82);	/* tie, even */
	UNIT_EQ_UINT(ref_f2bf(u2f(0x3f808001)), 0x3f81);
	UNIT_EQ_UINT(ref_f2bf(u2f(0x7f7fffff)), 0x7f80);	/* overflow */
	UNIT_EQ_UINT(ref_f2bf(u2f(0x00008000)), 0x0000);	/* subnormal tie */
	UNIT_EQ_UINT(ref_f2bf(u2f(0x80018000)), 0x8002);
	UNIT_EQ_UINT(ref_f2bf(-INFINITY), 0xff80);
	UNIT_CHECK(ref_bf2f(0x0001) == ldexpf(1, -133));
	UNIT_CHECK(isnan(ref_bf2f(0x7fc1)));
	/* fp8 E4M3 */
	UNIT_EQ_UINT(ref_f2fp8(1.0f, true), 0x38);
	UNIT_EQ_UINT(ref_f2fp8(448.0f, true), 0x7e);
	UNIT_EQ_UINT(ref_f2fp8(-500.0f, true), 0xfe);	/* saturates */
	UNIT_EQ_UINT(ref_f2fp8(INFINITY, true), 0x7e);
	UNIT_EQ_UINT(ref_f2fp8(-NAN, true), 0x7f);
	UNIT_EQ_UINT(ref_f2fp8(1.0625f, true), 0x38);	/* tie, even */
	UNIT_EQ_UINT(ref_f2fp8(1.1875f, true), 0x3a);	/* tie, even */
	UNIT_EQ_UINT(ref_f2fp8(ldexpf(1, -9), true), 0x01);
	UNIT_EQ_UINT(ref_f2fp8(ldexpf(1, -10), true), 0x00);	/* tie */
	UNIT_EQ_UINT(ref_f2fp8(-ldexpf(3, -11), true), 0x81);
	UNIT_CHECK(ref_fp8_2f(0x7e, true) == 448.0f);
	UNIT_CHECK(ref_fp8_2f(0x08, true) == ldexpf(1, -6));
	UNIT_CHECK(isnan(ref_fp8_2f(0xff, true)));
	/* fp8 E5M2 */
	UNIT_EQ_UINT(ref_f2fp8(1.0f, false), 0x3c);
	UNIT_EQ_UINT(ref_f2fp8(57344.0f, false), 0x7b);
	UNIT_EQ_UINT(ref_f2fp8(-INFINITY, false), 0xfb);
	UNIT_EQ_UINT(ref_f2fp8(ldexpf(1, -16), false), 0x01);
	UNIT_EQ_UINT(ref_f2fp8(1.125f, false), 0x3c);	/* tie, even */
	UNIT_CHECK(ref_fp8_2f(0x7c, false) == INFINITY);
	UNIT_CHECK(isnan(ref_fp8_2f(0x7d, false)));
	UNIT_CHECK(ref_fp8_2f(0x04, false) == ldexpf(1, -14));
}

/*
 * fp8: every pair of the 256 x 256 values, every operation, both formats,
 * against the reference; and AVG's finish of every value for several
 * nranks. (The CUDA kernels' host build is held to the module's scalar
 * code the same way in test_kernels.)
 */
static void test_fp8_all(void)
{
	static const uint32_t ranks[] = { 1, 2, 3, 5, 7, 8, 9, 64, 1000 };
	static uint8_t d[65536], s[65536], r[65536];
	static const unsigned int dts[] = { KCOLL_DTYPE_FP8_E4M3,
					    KCOLL_DTYPE_FP8_E5M2 };

	for (unsigned int k = 0; k < 2; k++) {
		unsigned int dt = dts[k];

		for (unsigned int op = 1; op < KCOLL_REDOP_LAST; op++) {
			kcoll_reduce_fn fn = kcoll_reduce_get(cur_impl, dt, op);

			if (op == KCOLL_REDOP_AVG)
				continue;	/* SUM's steps */
			for (uint32_t i = 0; i < 65536; i++) {
				d[i] = r[i] = (uint8_t)i;
				s[i] = (uint8_t)(i >> 8);
			}
			fn(d, s, 65536);
			ref_reduce(r, s, 65536, dt, op);
			for (uint32_t i = 0; i < 65536; i++)
				if (!UNIT_CHECK(d[i] == r[i])) {
					UNIT_FAIL("dtype %u op %u: 0x%02x, 0x%02x -> 0x%02x, want 0x%02x",
						  dt, op, i & 0xff, i >> 8,
						  d[i], r[i]);
					break;
				}
		}
		for (unsigned int q = 0; q < sizeof(ranks) / sizeof(ranks[0]);
		     q++) {
			for (uint32_t i = 0; i < 256; i++)
				d[i] = r[i] = (uint8_t)i;
			UNIT_EQ_INT(kcoll_reduce_avg_finish(cur_impl, d, 256, dt,
							    ranks[q]), 0);
			ref_avg(r, 256, dt, ranks[q]);
			for (uint32_t i = 0; i < 256; i++)
				if (!UNIT_CHECK(d[i] == r[i])) {
					UNIT_FAIL("dtype %u avg of 0x%02x over %u: 0x%02x, want 0x%02x",
						  dt, i, ranks[q], d[i], r[i]);
					break;
				}
		}
	}
}

static const char *const impl_test_names[KCOLL_REDUCE_NR] = {
	"scalar", "sse2", "avx2", "avx512",
};

static void run_impl_test(const char *name, void (*fn)(void))
{
	char full[96];
	const char *why;

	for (int impl = 0; impl < KCOLL_REDUCE_NR; impl++) {
		snprintf(full, sizeof(full), "%s_%s", name,
			 impl_test_names[impl]);
		if (unit_st.filter && !strstr(full, unit_st.filter))
			continue;
		if (!impl_supported(impl, &why)) {
			unit_st.nr++;
			unit_st.passed++;
			printf("ok %u %s # SKIP %s\n", unit_st.nr, full, why);
			continue;
		}
		cur_impl = impl;
		unit_run(full, fn);
	}
}

int main(int argc, char **argv)
{
	unit_init(argc, argv);
	unit_rng_seed(&rng, unit_seed(0x5eed7ed0cULL));

	UNIT_RUN(test_ref_self);
	UNIT_RUN(test_invalid);
	run_impl_test("test_reduce_all", test_reduce_all);
	run_impl_test("test_reduce_inplace", test_reduce_inplace);
	run_impl_test("test_half_roundtrip", test_half_roundtrip);
	run_impl_test("test_half_all", test_half_all);
	run_impl_test("test_half_known", test_half_known);
	run_impl_test("test_avg_finish", test_avg_finish);
	run_impl_test("test_fp8_all", test_fp8_all);
	return unit_done();
}
