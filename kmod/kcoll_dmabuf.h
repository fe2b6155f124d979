/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_dmabuf.c: dma-buf imports (GPU memory), a kind of struct kcoll_buf.
 */
#ifndef KCOLL_DMABUF_H
#define KCOLL_DMABUF_H

#include "kcoll_types.h"

int kcoll_buf_import_dmabuf(struct kcoll_buf *b, struct kcoll_comm *comm,
			    int fd, u64 off, u64 len, bool nocpu,
			    struct kcoll_quota *q);
void kcoll_buf_device_gone(struct kcoll_buf *b);
bool kcoll_buf_dry(const struct kcoll_buf *b);
bool kcoll_buf_revoked(const struct kcoll_buf *b);

#endif /* KCOLL_DMABUF_H */
