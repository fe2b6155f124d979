/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_mem.c: buffers (pinned user pages, our own pages; dma-buf imports
 * are kcoll_dmabuf.c's): pinning,
 * scratch, vmap, DMA mapping and the NIC's local-read MRs.
 */
#ifndef KCOLL_MEM_H
#define KCOLL_MEM_H

#include "kcoll_types.h"

int kcoll_buf_pin_user(struct kcoll_buf *b, u64 uaddr, size_t len,
		       bool writable);
int kcoll_buf_alloc(struct kcoll_buf *b, size_t len, struct kcoll_quota *q);
int kcoll_buf_register(struct kcoll_buf *b, struct kcoll_comm *comm);
void kcoll_buf_release(struct kcoll_buf *b);
bool kcoll_pin_writable_ok(struct page *page);
/* Where the NIC sees bytes [off, off + len) (must not cross a segment). */
void kcoll_buf_sge(const struct kcoll_buf *b, size_t off, size_t len,
		   struct ib_sge *sge);
struct seq_file;
void kcoll_buf_show(struct seq_file *m, const char *name,
		    const struct kcoll_buf *b);
/* Bytes from @off to the end of its segment. */
size_t kcoll_buf_seg_room(const struct kcoll_buf *b, size_t off);
void kcoll_buf_unregister(struct kcoll_buf *b);
/* The page kinds' DMA mapping, for kinds made of pages (kcoll_dmabuf.c). */
int kcoll_buf_pages_dma_map(struct kcoll_buf *b, struct kcoll_mrseg *s,
			    unsigned int first, unsigned int n);
void kcoll_buf_pages_dma_unmap(struct kcoll_buf *b, struct kcoll_mrseg *s);

#endif /* KCOLL_MEM_H */
