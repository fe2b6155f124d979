/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The collective engine's interface to the rest of the module (its parts
 * and what they share are in kcoll_engine.h). Must hold comm->lock unless
 * said otherwise.
 */
#ifndef KCOLL_COLL_H
#define KCOLL_COLL_H

#include "kcoll_types.h"

void kcoll_coll_issue(struct kcoll_req *req);
void kcoll_engine_msg(struct kcoll_conn *conn, const struct kcoll_wire_msg *m);
void kcoll_engine_data(struct kcoll_conn *conn, u32 imm, u32 byte_len);
void kcoll_engine_eager_up(struct kcoll_conn *conn);
void kcoll_engine_eager_credit(struct kcoll_conn *conn);
void kcoll_engine_conn_lost(struct kcoll_conn *conn);
void kcoll_engine_conn_forget(struct kcoll_conn *conn);
void kcoll_engine_fail_all(struct kcoll_comm *comm, int err);
void kcoll_engine_reap(struct kcoll_comm *comm);
void kcoll_engine_force_reap(struct kcoll_comm *comm);
void kcoll_engine_kick_work(struct work_struct *work);
bool kcoll_peer_finished(struct kcoll_conn *conn, struct kcoll_task *op);
void kcoll_engine_timeout_work(struct work_struct *work);
void kcoll_engine_sq_busy(struct kcoll_lane *lane);
void kcoll_engine_conn_unexpose(struct kcoll_conn *conn);
u32 kcoll_op_missing(struct kcoll_task *op, u32 *out, u32 cap);

#endif /* KCOLL_COLL_H */
