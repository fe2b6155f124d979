/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_local.c: the intra-node channel (its transport, kcoll_xport_local,
 * is declared in kcoll_xport.h).
 */
#ifndef KCOLL_LOCAL_H
#define KCOLL_LOCAL_H

#include "kcoll_types.h"

void kcoll_local_exit(void);
struct dentry;
void kcoll_local_debugfs_init(struct dentry *dir);
int kcoll_lchan_attach(struct kcoll_conn *conn);
void kcoll_lchan_detach(struct kcoll_conn *conn);
int kcoll_lchan_send(struct kcoll_conn *conn, const struct kcoll_wire_msg *m);
void kcoll_lchan_rx_work(struct work_struct *work);
void kcoll_lchan_deliver(struct kcoll_conn *conn);

#endif /* KCOLL_LOCAL_H */
