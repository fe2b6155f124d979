/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_ib.c: RDMA devices: PDs, registration QPs, priorities, the devices
 * tunable, measured alpha and beta.
 */
#ifndef KCOLL_IB_H
#define KCOLL_IB_H

#include "kcoll_stats.h"

struct ib_device;
struct ib_pd *kcoll_ib_pd(struct ib_device *ibdev);
void kcoll_ib_set_gone(struct ib_device *ibdev);
u32 kcoll_ib_beta_ps(struct ib_device *ibdev);	/* 0: unknown */
/* Per device: operations started and not finished, by SQE priority. */
struct kcoll_prio {
	atomic_t active[KCOLL_PRIO_MAX + 1];
	unsigned long last[KCOLL_PRIO_MAX + 1];	/* jiffies, last active */
};
struct kcoll_prio *kcoll_ib_prio(struct ib_device *ibdev);
struct ib_mr;
struct ib_mr *kcoll_ib_alloc_mr(struct ib_pd *pd, u32 pages);
void kcoll_ib_dereg_mr(struct ib_mr *mr);
bool kcoll_ib_inv_fences(const struct ib_device *ibdev);
/* One fast-reg MR operation for kcoll_ib_mr_ops(). */
struct kcoll_mr_op {
	struct ib_mr *mr;
	u32 key;	/* to register under, or to invalidate */
	bool inv;
};

int kcoll_ib_mr_ops(struct ib_device *ibdev, const struct kcoll_mr_op *ops,
		    unsigned int n, int access);
int kcoll_ib_reg_mrs(struct ib_device *ibdev, struct ib_mr **mrs,
		     unsigned int n, int access);
struct ib_sge;
int kcoll_ib_self_write(struct ib_device *ibdev, struct ib_mr *mr, u32 key,
			const struct ib_sge *sge);
int kcoll_ib_init(void);
void kcoll_ib_exit(void);
ssize_t kcoll_ib_list(char *buf, size_t size);
/* The devices tunable: which devices new communicators may use. */
#define KCOLL_IB_ALLOW_MAX	64	/* with the NUL; a netlink value fits */
bool kcoll_ib_enabled(struct ib_device *ibdev);
ssize_t kcoll_ib_allow_show(char *buf);
int kcoll_ib_allow_store(const char *buf, size_t count);
struct kcoll_opstats *kcoll_ib_stats(struct ib_device *ibdev);
/* The device's measured message round trip (alpha), 0 if none yet; and a
 * new sample of it. */
#define KCOLL_ALPHA_MAX_NS	1000000000U	/* sysfs alpha_ns's limit */
#define KCOLL_BETA_MAX_PS	1000000000U	/* sysfs beta_ps's limit */
/* β measured on the device's RDMA WRITEs (0 if none yet). */
void kcoll_ib_tx_start(struct ib_device *ibdev);
void kcoll_ib_tx_done(struct ib_device *ibdev, u32 bytes);
u32 kcoll_ib_beta_measured_ps(struct ib_device *ibdev);
u32 kcoll_ib_alpha_ns(struct ib_device *ibdev);
void kcoll_ib_alpha_sample(struct ib_device *ibdev, u64 ns);
/* Call @fn for every device, under the device list lock; stops at the first
 * non-zero return, which it returns. */
int kcoll_ib_for_each(int (*fn)(struct ib_device *ibdev,
				struct kcoll_opstats *st, void *arg),
		      void *arg, unsigned int skip);

#endif /* KCOLL_IB_H */
