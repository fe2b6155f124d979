/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_sysfs.c: tunables (sysfs and module parameters).
 */
#ifndef KCOLL_SYSFS_H
#define KCOLL_SYSFS_H

#include "kcoll.h"

u32 kcoll_max_sq_entries(void);
u32 kcoll_max_cq_entries(void);
u32 kcoll_chunk_bytes(void);		/* new grants use it */
u32 kcoll_connect_timeout_ms(void);	/* COMM_CREATE default */
u32 kcoll_ack_timeout(void);		/* new connections */
#define KCOLL_QPS_PER_PEER_MAX	4
u32 kcoll_qps_per_peer(void);		/* new communicators */
bool kcoll_intra_node(void);		/* new connections */
bool kcoll_lazy_sigs(void);
bool kcoll_eager(void);			/* new connections */
bool kcoll_eager_p2p(void);		/* new eager connections */
bool kcoll_prio_sched(void);		/* priorities (else FIFO) */
u32 kcoll_prio_aging_ms(void);
u32 kcoll_prio_max_unpriv(void);
void kcoll_knobs_init(void);
u32 kcoll_op_timeout_ms(void);		/* SQE timeout_ms 0 means this */
u32 kcoll_gpu_poll_us(void);
u32 kcoll_dmabuf_wait_ms(void);		/* REG_MEM's wait for fences */
u32 kcoll_auth_timeout_ms(void);	/* an accepted QP's AUTH, at most */
u32 kcoll_bye_wait_ms(void);		/* without a send completion */
u32 kcoll_bye_max_ms(void);		/* in all */
u32 kcoll_reg_cache_mb(void);
/* Collectives a communicator runs at once (kcoll_progress.c). */
#define KCOLL_COLLS_IN_FLIGHT_MAX	16
u32 kcoll_colls_in_flight(void);
u32 kcoll_phases_ahead(void);	/* 0, 1 grants, 2 grants and sends */
u32 kcoll_eager_ahead(void);	/* phases; 0: none */
/* Broadcasts returned before their confirmations, per communicator. */
#define KCOLL_CONFIRM_BEHIND_MAX	64
u32 kcoll_confirm_behind(void);
bool kcoll_cover_tokens(void);	/* docs/DESIGN.md, "Tokens that cover" */
bool kcoll_other_netns(void);	/* docs/DESIGN.md, "Threat model" */
extern unsigned int kcoll_listen_port;	/* module parameter; sysfs moves it */
extern const struct attribute_group *kcoll_attr_groups[];


#endif /* KCOLL_SYSFS_H */
