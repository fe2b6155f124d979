/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_auth.c: proofs of the communicator's key (since wire version 2).
 */
#ifndef KCOLL_AUTH_H
#define KCOLL_AUTH_H

#include "kcoll_types.h"

int kcoll_auth_init(struct kcoll_comm *comm);
void kcoll_auth_free(struct kcoll_comm *comm);
int kcoll_auth_hello_sign(struct kcoll_comm *comm, struct kcoll_wire_hello *h);
bool kcoll_auth_hello_ok(struct kcoll_comm *comm,
			 const struct kcoll_wire_hello *h);
int kcoll_auth_accept_sign(struct kcoll_comm *comm,
			   const struct kcoll_wire_hello *h,
			   struct kcoll_wire_accept *acc);
bool kcoll_auth_accept_ok(struct kcoll_comm *comm,
			  const struct kcoll_wire_hello *h,
			  const struct kcoll_wire_accept *acc);
int kcoll_auth_msg_sign(struct kcoll_comm *comm, const struct kcoll_lane *lane,
			struct kcoll_wire_auth *a);
bool kcoll_auth_msg_ok(struct kcoll_comm *comm, const struct kcoll_lane *lane,
		       const struct kcoll_wire_auth *a);

#endif /* KCOLL_AUTH_H */
