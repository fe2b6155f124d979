/* SPDX-License-Identifier: MIT */
/*
 * Which bytes of GPU memory libcoll asks the CUDA driver to export as a
 * dma-buf (cuMemGetHandleForAddressRange) for a registration of
 * [@a, @a + @len) inside the allocation that starts at @base: from the
 * allocation's start to the end of the last host page the bytes touch
 * (the driver takes whole pages), so that the registration's offset in
 * the dma-buf is @a - @base whether the driver hands out exactly that
 * range or (as the stand-in does) the whole allocation. Shared by libcoll
 * (comm.c) and kcoll-gpucheck, which asks a real driver for exactly these
 * ranges (make gpu-check).
 */
#ifndef COLL_DMABUF_SPAN_H
#define COLL_DMABUF_SPAN_H

#include <stdint.h>

static inline void coll_dmabuf_span(uint64_t a, uint64_t len, uint64_t base,
				    uint64_t page, uint64_t *start,
				    uint64_t *end)
{
	*start = base;
	*end = (a + len + page - 1) & ~(page - 1);
}

#endif /* COLL_DMABUF_SPAN_H */
