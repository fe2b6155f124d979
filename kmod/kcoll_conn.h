/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll connections: kcoll_conn.c (lanes, QPs, completions, state changes,
 * the listener) and kcoll_cm.c (rdma_cm: connecting, accepting, hellos,
 * authentication); what the module uses of them, then what they share. Every function here must be
 * called with comm->lock held unless its comment in the .c says otherwise.
 */
#ifndef KCOLL_CONN_H
#define KCOLL_CONN_H

#include "kcoll_types.h"

/* kcoll_conn.c, for the rest of the module */
/* Listen on @port from now on (the sysfs listen_port). */
int kcoll_listen_set_port(unsigned int port);
int kcoll_listen_start(void);
void kcoll_listen_stop(void);
int kcoll_rank_sockaddr(const struct kcoll_rank_addr *ra,
			struct sockaddr_storage *ss);
int kcoll_conn_start(struct kcoll_comm *comm, u32 peer);
void kcoll_conn_shutdown(struct kcoll_conn *conn);
void kcoll_conn_send_bye(struct kcoll_conn *conn);
void kcoll_conn_bye_retry(struct kcoll_conn *conn);
void kcoll_lane_flush(struct kcoll_lane *lane);
void kcoll_conn_free(struct kcoll_conn *conn);
void kcoll_conn_kill(struct kcoll_conn *conn, int err);
void kcoll_conn_ping(struct kcoll_conn *conn);
void kcoll_conn_pong(struct kcoll_conn *conn, u64 clock);
int kcoll_conn_send_msg(struct kcoll_conn *conn, struct kcoll_wire_msg *m);

/* kcoll_conn.c, for kcoll_cm.c */
int kcoll_conn_alloc_stage(struct kcoll_conn *conn);
void kcoll_conn_free_stage(struct kcoll_conn *conn);
void kcoll_conn_fail_setup(struct kcoll_conn *conn, int err);
void kcoll_conn_setup_failed(struct kcoll_conn *conn, int err);
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
