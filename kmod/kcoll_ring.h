/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_ring.c: a file's context, its rings, submission and completion.
 */
#ifndef KCOLL_RING_H
#define KCOLL_RING_H

/* What this module offers: QUERY and SETUP report the same. */
#define KCOLL_FEATURES	(KCOLL_FEAT_SINGLE_MMAP | KCOLL_FEAT_NODROP |	\
			 KCOLL_FEAT_EVENTFD | KCOLL_FEAT_POLL |		\
			 KCOLL_FEAT_COMM | KCOLL_FEAT_TIMEOUT |		\
			 KCOLL_FEAT_ABORT | KCOLL_FEAT_GPU |		\
			 KCOLL_FEAT_PARENT | KCOLL_FEAT_GPU_VEC |	\
			 KCOLL_FEAT_REVOKE | KCOLL_FEAT_GPU_SLOTS)

#include "kcoll.h"

struct kcoll_ctx *kcoll_ctx_create(void);
void kcoll_ctx_release(struct kcoll_ctx *ctx);
long kcoll_ctx_setup(struct kcoll_ctx *ctx, struct kcoll_setup *p);
long kcoll_ctx_enter(struct kcoll_ctx *ctx, const struct kcoll_enter *e);
long kcoll_ctx_eventfd(struct kcoll_ctx *ctx, const struct kcoll_eventfd *e);
__poll_t kcoll_ctx_poll_mask(struct kcoll_ctx *ctx);
void kcoll_req_complete(struct kcoll_req *req, int res);
void kcoll_req_complete_flags(struct kcoll_req *req, int res, u32 cflags);
int kcoll_ring_init(void);
void kcoll_ring_exit(void);

#endif /* KCOLL_RING_H */
