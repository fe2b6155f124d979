/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll connections, internal: what kcoll_conn.c (lanes, QPs, completions,
 * state changes, the listener) and kcoll_cm.c (rdma_cm: connecting,
 * accepting, hellos, authentication) share. Every function here must be
 * called with comm->lock held unless its comment in the .c says otherwise.
 */
#ifndef KCOLL_CONN_H
#define KCOLL_CONN_H

#include "kcoll_comm.h"

/* kcoll_conn.c */
int kcoll_conn_alloc_stage(struct kcoll_conn *conn);
void kcoll_conn_fail_setup(struct kcoll_conn *conn, int err);
void kcoll_conn_free_cq(struct kcoll_conn *conn);
void kcoll_conn_set_lanes(struct kcoll_conn *conn, unsigned int n);
void kcoll_conn_up(struct kcoll_conn *conn);
bool kcoll_eager_fits(struct kcoll_comm *comm);
int kcoll_lane_create_qp(struct kcoll_lane *lane,
			 struct rdma_cm_id *id);
void kcoll_lane_destroy_qp(struct kcoll_lane *lane,
			   struct rdma_cm_id *id);
void kcoll_lane_free_rx(struct kcoll_lane *lane);

/* kcoll_cm.c */
int kcoll_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev);
void kcoll_conn_retry_work(struct work_struct *work);
void kcoll_conn_teardown_id(struct kcoll_conn *conn);
void kcoll_lane_auth(struct kcoll_lane *lane,
		     const struct kcoll_wire_msg *m);

#endif /* KCOLL_CONN_H */
