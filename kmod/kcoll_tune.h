/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_tune.c: algorithm choice, the cost model's tunables and counts.
 */
#ifndef KCOLL_TUNE_H
#define KCOLL_TUNE_H

#include "kcoll.h"

struct ib_device;

/*
 * The alpha-beta-gamma inputs of the cost model for one communicator: each
 * rank advertises its own (kcoll_tune_model()) in the connection handshake
 * and every rank takes the largest of each over all ranks, so that all
 * choose alike (kcoll_comm_model_merge()). 0: not known.
 */
struct kcoll_model {
	u32 alpha_ns;
	u32 beta_ps;
	u32 gamma_ps;
	u32 node_ranks;		/* from the rank table, not exchanged */
};

/* kcoll_tune.c: algorithm choice (cost model tunables) */
void kcoll_tune_setup(void);
void kcoll_tune_model(struct ib_device *ibdev, struct kcoll_model *m);
u8 kcoll_tune_choose(u32 opcode, u32 nranks, u64 bytes,
		     const struct kcoll_model *m);
void kcoll_tune_count(u8 algo);
extern const struct attribute_group kcoll_algo_group;
extern const struct attribute_group kcoll_algo_ops_group;

#endif /* KCOLL_TUNE_H */
