/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_nl.c: the generic netlink family and its events.
 */
#ifndef KCOLL_NL_H
#define KCOLL_NL_H

#include "kcoll.h"

struct ib_device;
int kcoll_nl_init(void);
void kcoll_nl_exit(void);
struct kcoll_comm;
void kcoll_nl_comm_event(struct kcoll_comm *comm, u8 cmd, u32 inflight);
void kcoll_nl_peer_lost(struct kcoll_comm *comm, u32 peer, int err);
void kcoll_nl_op_timeout(struct kcoll_comm *comm, u64 seq, u8 opcode,
			 u32 timeout_ms, const u32 *missing, u32 nmissing);
void kcoll_nl_dev_event(struct ib_device *ibdev, u8 cmd);

#endif /* KCOLL_NL_H */
