/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_gmr.c: grant MRs, the only way a peer writes into our memory.
 */
#ifndef KCOLL_GMR_H
#define KCOLL_GMR_H

#include "kcoll_types.h"

struct kcoll_gmr *kcoll_gmr_get(struct kcoll_conn *conn,
				struct kcoll_mem *mem, bool tie);
void kcoll_gmr_forget(struct kcoll_comm *comm, struct kcoll_mem *mem);
void kcoll_gmr_put(struct kcoll_gmr *g);
int kcoll_gmr_map(struct kcoll_gmr *g, const struct kcoll_buf *b,
		  size_t off, size_t len, u64 *addr, u32 *rkey);
int kcoll_gmr_grant(struct kcoll_gmr *g, int slot, struct kcoll_task *op,
		    struct kcoll_wire_msg *m);
void kcoll_gmr_retire(struct kcoll_gmr *g);
int kcoll_gmr_flush(struct kcoll_conn *conn);
int kcoll_gmr_flush_op(struct kcoll_task *op);
void kcoll_gmr_conn_init(struct kcoll_conn *conn);
void kcoll_gmr_conn_lost(struct kcoll_conn *conn);
void kcoll_gmr_conn_shutdown(struct kcoll_conn *conn);
int kcoll_gmr_eager_setup(struct kcoll_conn *conn);
int kcoll_gmr_eager_offer(struct kcoll_conn *conn, unsigned long slots);
void kcoll_gmr_show(struct seq_file *m, struct kcoll_conn *conn);
int kcoll_nic_copy(struct kcoll_comm *comm, const struct kcoll_buf *dst,
		   size_t doff, const struct kcoll_buf *src, size_t soff,
		   size_t len);

#endif /* KCOLL_GMR_H */
