// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll collective engine, buffer overlap: whether two collectives of a
 * communicator may run side by side (docs/DESIGN.md, "Several collectives
 * in flight"). They may not if one writes a page the other reads or
 * writes: the younger would read data the older has not produced yet, or
 * the two results would land in an order the application did not ask
 * for. Pages, not addresses: two mappings of one page (a shared mapping
 * mapped twice, a registration under another address) are one page.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include "kcoll_types.h"
#include "kcoll_engine.h"

/*
 * Each page an operation uses is listed once, with the byte ranges of it
 * that the operation uses (at most two kept: its send and receive
 * buffers'; more, from one page mapped twice, are merged into their hull)
 * and whether it writes them: two buffers that merely share a page (small
 * buffers cut from one allocation) do not overlap.
 */
#define KCOLL_PG_RANGES		2

struct kcoll_pg {
	unsigned long page;	/* struct page * */
	u8 nr;
	bool w[KCOLL_PG_RANGES];
	u16 from[KCOLL_PG_RANGES];	/* bytes [from, to) of the page */
	u16 to[KCOLL_PG_RANGES];
};

/*
 * Pages listed per operation (64 MiB of 4 KiB pages: sorting them costs
 * about a millisecond of CPU); one with more is taken to overlap every
 * other and runs alone, where its own transfer dwarfs what running beside
 * another would save.
 */
#define KCOLL_PG_LIST_MAX	(1U << 14)

/* Does @op write user buffer @which? The receive buffer; the send buffer
 * only where an in-place reduce-scatter leaves its result there. */
static bool kcoll_buf_written(const struct kcoll_task *op, int which)
{
	u8 opc = op->args.opcode;

	return which == KCOLL_SBUF_RECV ||
	       (op->args.in_place && (opc == KCOLL_OP_REDUCE_SCATTER ||
				      opc == KCOLL_OP_REDUCE_SCATTERV));
}

static int kcoll_pg_cmp(const void *a, const void *b)
{
	unsigned long x = ((const struct kcoll_pg *)a)->page;
	unsigned long y = ((const struct kcoll_pg *)b)->page;

	return x < y ? -1 : x > y;
}

/* Add @src's ranges to @dst's (the same page). */
static void kcoll_pg_merge(struct kcoll_pg *dst, const struct kcoll_pg *src)
{
	u8 i, k;

	for (i = 0; i < src->nr; i++) {
		if (dst->nr < KCOLL_PG_RANGES) {
			k = dst->nr++;
			dst->from[k] = src->from[i];
			dst->to[k] = src->to[i];
			dst->w[k] = src->w[i];
			continue;
		}
		k = KCOLL_PG_RANGES - 1;
		dst->from[k] = min(dst->from[k], src->from[i]);
		dst->to[k] = max(dst->to[k], src->to[i]);
		dst->w[k] |= src->w[i];
	}
}

/* Do two entries of one page overlap, one of them writing? */
static bool kcoll_pg_clash(const struct kcoll_pg *a, const struct kcoll_pg *b)
{
	u8 i, k;

	for (i = 0; i < a->nr; i++)
		for (k = 0; k < b->nr; k++)
			if ((a->w[i] || b->w[k]) && a->from[i] < b->to[k] &&
			    b->from[k] < a->to[i])
				return true;
	return false;
}

/*
 * List @op's user pages, sorted, each once with what @op reads and writes
 * of it. Memory the CPU's pages do not describe (a dma-buf import: two
 * exports may share memory, which nothing here can see), or a list that
 * cannot be had, makes @op overlap everything.
 */
static void kcoll_op_pages(struct kcoll_task *op)
{
	struct kcoll_pg *pg;
	u32 n = 0, i, k;
	int w;

	op->pg_built = true;
	for (w = KCOLL_SBUF_SEND; w <= KCOLL_SBUF_RECV; w++) {
		const struct kcoll_buf *b = &op->bufs[w];

		if (!b->len)
			continue;
		if (b->imp || !b->pages) {
			op->pg_all = true;
			return;
		}
		n += DIV_ROUND_UP((b->off0 & ~PAGE_MASK) + b->len, PAGE_SIZE);
	}
	if (!n)
		return;
	if (n > KCOLL_PG_LIST_MAX) {
		op->pg_all = true;
		return;
	}
	pg = kvmalloc_array(n, sizeof(*pg), GFP_KERNEL_ACCOUNT);
	if (!pg) {
		op->pg_all = true;
		return;
	}
	n = 0;
	for (w = KCOLL_SBUF_SEND; w <= KCOLL_SBUF_RECV; w++) {
		const struct kcoll_buf *b = &op->bufs[w];
		bool written = kcoll_buf_written(op, w);
		size_t at, end;

		if (!b->len)
			continue;
		/* Byte b of the buffer is byte off0 + b of its pages. */
		at = b->off0;
		end = b->off0 + b->len;
		while (at < end) {
			size_t pend = min_t(size_t, end,
					    round_down(at, PAGE_SIZE) + PAGE_SIZE);

			pg[n].page = (unsigned long)b->pages[at >> PAGE_SHIFT];
			pg[n].nr = 1;
			pg[n].from[0] = at & ~PAGE_MASK;
			pg[n].to[0] = ((pend - 1) & ~PAGE_MASK) + 1;
			/* What it writes it may read too (in place). */
			pg[n].w[0] = written;
			n++;
			at = pend;
		}
	}
	sort(pg, n, sizeof(*pg), kcoll_pg_cmp, NULL);
	/* One entry per page. */
	for (i = 1, k = 0; i < n; i++) {
		if (pg[i].page == pg[k].page)
			kcoll_pg_merge(&pg[k], &pg[i]);
		else
			pg[++k] = pg[i];
	}
	op->pg = pg;
	op->pg_n = k + 1;
}

/*
 * May @a and @b not run side by side: does one write bytes of a page the
 * other reads or writes? Each list is built once, when first
 * compared. Must hold comm->lock.
 */
bool kcoll_op_overlap(struct kcoll_task *a, struct kcoll_task *b)
{
	const struct kcoll_pg *pa, *pb;
	u32 i = 0, j = 0;

	lockdep_assert_held(&a->comm->lock);
	if (!a->pg_built)
		kcoll_op_pages(a);
	if (!b->pg_built)
		kcoll_op_pages(b);
	if ((a->pg_all && (b->pg_n || b->pg_all)) || (b->pg_all && a->pg_n))
		return true;
	pa = a->pg;
	pb = b->pg;
	while (i < a->pg_n && j < b->pg_n) {
		if (pa[i].page < pb[j].page) {
			i++;
		} else if (pa[i].page > pb[j].page) {
			j++;
		} else {
			if (kcoll_pg_clash(&pa[i], &pb[j]))
				return true;
			i++;
			j++;
		}
	}
	return false;
}
