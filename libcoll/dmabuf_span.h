/* SPDX-License-Identifier: MIT */
/*
 * GPU memory through a dma-buf (cuMemGetHandleForAddressRange), for a
 * registration of [@a, @a + @len) inside the allocation [@base, @base +
 * @asize): which bytes libcoll asks the driver to export, and where the
 * registration then lies in the dma-buf it got. Shared by libcoll
 * (comm.c) and kcoll-gpucheck, which asks a real driver for exactly these
 * ranges (make gpu-check).
 */
#ifndef COLL_DMABUF_SPAN_H
#define COLL_DMABUF_SPAN_H

#include <stdint.h>

/* The host pages around the range (the driver takes whole pages), never
 * below the allocation: no more than the registration needs is mapped
 * for the NIC. */
static inline void coll_dmabuf_span(uint64_t a, uint64_t len, uint64_t base,
				    uint64_t page, uint64_t *start,
				    uint64_t *end)
{
	*start = a & ~(page - 1);
	*end = (a + len + page - 1) & ~(page - 1);
	if (*start < base)
		*start = base;
}

/*
 * @a's offset in the dma-buf of @size bytes handed out for [@start, @end):
 * a driver that cuts exactly the range asked for (NVIDIA's) gives @a -
 * @start; an exporter that hands out its whole allocation (@asize bytes
 * rounded up to pages, from @base) whatever the range, as the stand-in
 * does, gives @a - @base. -1 when the size is neither: where the range
 * lies is then unknown, and guessing would move the wrong bytes.
 */
static inline int64_t coll_dmabuf_offset(uint64_t a, uint64_t base,
					 uint64_t asize, uint64_t page,
					 uint64_t start, uint64_t end,
					 uint64_t size)
{
	uint64_t whole = ((base + asize + page - 1) & ~(page - 1)) - base;

	if (size == end - start)
		return (int64_t)(a - start);
	if (size == whole)
		return (int64_t)(a - base);
	return -1;
}

#endif /* COLL_DMABUF_SPAN_H */
