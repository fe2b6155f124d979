// SPDX-License-Identifier: MIT
/*
 * Unit tests of kmod/kcoll_dmaseg.h, the segmenter that turns an
 * exporter's DMA-only scatterlist (device memory: entries of any size, no
 * pages) into the page list of an MR. Ragged random lists are checked
 * against a byte-by-byte reference: byte p of the buffer is at DMA address
 * d(p); an MR page list L with first-page offset off0 is right iff every
 * byte of the range is where L puts it, and a list exists iff the bytes of
 * each MR page sit in one page of DMA space at the same offset.
 */
#include "unit.h"
#include "kcoll_dmaseg.h"

#define PG	256ULL		/* small pages: many of them in few bytes */

static uint64_t rng = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t dma_of(const struct kcoll_dma_ent *e, size_t n, uint64_t p)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (p < e[i].len)
			return e[i].addr + p;
		p -= e[i].len;
	}
	return ~0ULL;
}

/* Reference: the page list, or -EINVAL when none exists. */
static int ref_pages(const struct kcoll_dma_ent *e, size_t n, uint64_t total,
		     uint64_t off, uint64_t len, uint64_t *out, uint64_t *np,
		     uint64_t *off0)
{
	uint64_t p, k;

	if (!len || off + len > total)
		return -EINVAL;
	*off0 = dma_of(e, n, off) % PG;
	*np = (*off0 + len + PG - 1) / PG;
	for (k = 0; k < *np; k++)
		out[k] = ~0ULL;
	for (p = off; p < off + len; p++) {
		uint64_t v = *off0 + (p - off), d = dma_of(e, n, p);

		if (d % PG != v % PG)
			return -EINVAL;
		if (out[v / PG] == ~0ULL)
			out[v / PG] = d - v % PG;
		else if (out[v / PG] != d - v % PG)
			return -EINVAL;
	}
	return 0;
}

static void test_simple(void)
{
	struct kcoll_dma_ent e[] = {
		{ 0x10000, 4 * PG }, { 0x80000, PG }, { 0x20000, 2 * PG },
	};
	uint64_t out[16], np = 0, off0 = 0;

	UNIT_EQ_INT(kcoll_dmaseg_pages(e, 3, 0, 7 * PG, PG, out, 16, &np,
				       &off0), 0);
	UNIT_EQ_UINT(np, 7);
	UNIT_EQ_UINT(off0, 0);
	UNIT_EQ_UINT(out[0], 0x10000);
	UNIT_EQ_UINT(out[3], 0x10000 + 3 * PG);
	UNIT_EQ_UINT(out[4], 0x80000);
	UNIT_EQ_UINT(out[6], 0x20000 + PG);
	/* A range inside one page of the middle entry. */
	UNIT_EQ_INT(kcoll_dmaseg_pages(e, 3, 4 * PG + 10, 20, PG, out, 16,
				       &np, &off0), 0);
	UNIT_EQ_UINT(np, 1);
	UNIT_EQ_UINT(off0, 10);
	UNIT_EQ_UINT(out[0], 0x80000);
	/* Past the end, empty, too many pages for the room. */
	UNIT_EQ_INT(kcoll_dmaseg_pages(e, 3, 6 * PG, 2 * PG, PG, out, 16,
				       &np, &off0), -EINVAL);
	UNIT_EQ_INT(kcoll_dmaseg_pages(e, 3, 0, 0, PG, out, 16, &np, &off0),
		    -EINVAL);
	UNIT_EQ_INT(kcoll_dmaseg_pages(e, 3, 0, 7 * PG, PG, out, 6, &np,
				       &off0), -EOVERFLOW);
	/* Lengths that wrap, a page size that is no power of two. */
	e[1].len = ~0ULL;
	UNIT_EQ_INT(kcoll_dmaseg_pages(e, 3, 0, 7 * PG, PG, out, 16, &np,
				       &off0), -EINVAL);
	e[1].len = PG;
	UNIT_EQ_INT(kcoll_dmaseg_pages(e, 3, 0, PG, 3 * PG, out, 16, &np,
				       &off0), -EINVAL);
}

/* An entry boundary off a page boundary inside the range: no MR list;
 * the same boundary outside the range does not matter. */
static void test_ragged_boundary(void)
{
	struct kcoll_dma_ent e[] = { { 0x10000, PG + 16 }, { 0x30000, PG } };
	uint64_t out[8], np, off0;

	UNIT_EQ_INT(kcoll_dmaseg_pages(e, 2, 0, 2 * PG, PG, out, 8, &np,
				       &off0), -EINVAL);
	UNIT_EQ_INT(kcoll_dmaseg_pages(e, 2, 0, PG + 16, PG, out, 8, &np,
				       &off0), 0);
	UNIT_EQ_UINT(np, 2);
	UNIT_EQ_INT(kcoll_dmaseg_pages(e, 2, PG + 16, PG, PG, out, 8, &np,
				       &off0), 0);
	UNIT_EQ_UINT(np, 1);
	UNIT_EQ_UINT(out[0], 0x30000);
}

static void test_random_vs_reference(void)
{
	unsigned int iter, bad = 0, valid = 0, invalid = 0;

	for (iter = 0; iter < 20000 && bad < 5; iter++) {
		struct kcoll_dma_ent e[12];
		uint64_t out[128], ref[128], np = 0, rnp = 0, off0 = 0,
			 roff0 = 0, total = 0, off, len;
		size_t n = 1 + rnd() % 12, i;
		int got, want;

		for (i = 0; i < n; i++) {
			/* Mostly whole pages at page-aligned addresses (what
			 * exporters give), sometimes not, sometimes empty. */
			uint64_t pages = rnd() % 4;

			e[i].len = pages * PG;
			if (rnd() % 8 == 0)
				e[i].len += rnd() % PG;
			e[i].addr = (rnd() % 4096) * PG;
			if (rnd() % 10 == 0)
				e[i].addr += rnd() % PG;
			total += e[i].len;
		}
		if (!total)
			continue;
		off = rnd() % total;
		len = 1 + rnd() % (total - off + (rnd() % 4 == 0 ? PG : 0));
		want = ref_pages(e, n, total, off, len, ref, &rnp, &roff0);
		got = kcoll_dmaseg_pages(e, n, off, len, PG, out, 128, &np,
					 &off0);
		if (got != want) {
			bad++;
			UNIT_CHECK(!"result differs from the reference");
			printf("# iter %u: got %d want %d (n %zu off %" PRIu64
			       " len %" PRIu64 ")\n", iter, got, want, n, off,
			       len);
			continue;
		}
		if (got) {
			invalid++;
			continue;
		}
		valid++;
		if (!UNIT_EQ_UINT(np, rnp) || !UNIT_EQ_UINT(off0, roff0)) {
			bad++;
			continue;
		}
		for (i = 0; i < np; i++)
			if (!UNIT_EQ_UINT(out[i], ref[i])) {
				bad++;
				break;
			}
	}
	/* Both outcomes were exercised. */
	UNIT_CHECK(valid > 1000);
	UNIT_CHECK(invalid > 1000);
}

int main(int argc, char **argv)
{
	unit_init(argc, argv);
	UNIT_RUN(test_simple);
	UNIT_RUN(test_ragged_boundary);
	UNIT_RUN(test_random_vs_reference);
	return unit_done();
}
