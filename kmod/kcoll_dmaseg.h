/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * kcoll dma-buf segmenting, plain C (module and host unit tests): turn the
 * DMA side of an exporter's scatterlist into the page list that
 * fast-registration MRs are built from.
 *
 * An exporter of device memory (NVIDIA's, kcoll_testbuf's "vram" mode) gives
 * a list of (DMA address, length) entries with no struct page behind them,
 * of any sizes. A registration of bytes [off, off + len) of the buffer needs
 * the DMA address of every page-sized, page-aligned window that the range
 * touches, in order: that is what an MR's page list holds (ib_map_mr_sg()
 * with page size @page). It exists only if the range, laid out in DMA
 * space, is made of whole pages wherever it crosses from one entry to the
 * next: an entry the range leaves must end on a page boundary and the one
 * it enters must start on one. Otherwise the range cannot be one MR list
 * and the import fails with -EINVAL (nothing real exports such lists: GPU
 * and system memory come in pages).
 */
#ifndef KCOLL_DMASEG_H
#define KCOLL_DMASEG_H

#include "kcoll_plain.h"

struct kcoll_dma_ent {
	u64 addr;
	u64 len;
};

/*
 * kcoll_dmaseg_pages - the page list of bytes [@off, @off + @len) of the
 * buffer described by @ents[0..@n) (in buffer order).
 * @page: the MR page size, a power of two.
 * @out: receives the DMA address of each page, at most @max_out of them.
 * @npages, @off0: how many pages, and the offset of byte @off in the first.
 *
 * Returns 0; -EINVAL when @len is 0, the range is not inside the buffer or
 * crosses an entry boundary off a page boundary; -EOVERFLOW when more than
 * @max_out pages would be needed.
 */
static inline int kcoll_dmaseg_pages(const struct kcoll_dma_ent *ents,
				     size_t n, u64 off, u64 len, u64 page,
				     u64 *out, u64 max_out, u64 *npages,
				     u64 *off0)
{
	u64 pos = 0, end = off + len, k = 0, mask = page - 1;
	bool started = false;
	size_t i;

	if (!len || end < off || !page || (page & mask))
		return -EINVAL;
	for (i = 0; i < n && pos < end; i++) {
		u64 eend = pos + ents[i].len;
		u64 s, e, a, last;

		if (eend < pos)
			return -EINVAL;		/* lengths wrap */
		if (eend <= off || !ents[i].len) {
			pos = eend;
			continue;
		}
		/* The part of this entry inside the range, in DMA space. */
		s = off > pos ? off - pos : 0;
		e = (end < eend ? end : eend) - pos;
		a = ents[i].addr + s;
		if (ents[i].addr + ents[i].len < ents[i].addr)
			return -EINVAL;
		if (started && (a & mask))
			return -EINVAL;		/* entered off a boundary */
		if (end > eend && ((ents[i].addr + e) & mask))
			return -EINVAL;		/* left off a boundary */
		if (!started) {
			*off0 = a & mask;
			started = true;
		}
		last = (ents[i].addr + e - 1) & ~mask;
		for (a &= ~mask; ; a += page) {
			if (k == max_out)
				return -EOVERFLOW;
			out[k++] = a;
			if (a == last)
				break;
		}
		pos = eend;
	}
	if (!started || pos < end)
		return -EINVAL;			/* beyond the buffer */
	*npages = k;
	return 0;
}

#endif /* KCOLL_DMASEG_H */
