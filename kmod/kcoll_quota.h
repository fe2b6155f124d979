/* SPDX-License-Identifier: GPL-2.0 */
/* kcoll per-user limits (kcoll_quota.c). */
#ifndef KCOLL_QUOTA_H
#define KCOLL_QUOTA_H

#include <linux/list.h>
#include <linux/types.h>

enum kcoll_quota_kind {
	KCOLL_Q_CONTEXTS,	/* open files of /dev/kcoll */
	KCOLL_Q_COMMS,		/* communicators */
	KCOLL_Q_REGS,		/* REG_MEM registrations */
	KCOLL_Q_QPS,		/* RC QPs, a communicator's whole mesh */
	KCOLL_Q_OPS,		/* requests in flight (submitted, no CQE) */
	KCOLL_Q_NR
};

struct kcoll_quota;
struct dentry;

/*
 * Work of a user's that may wait for as long as that user likes (a
 * registration cache entry's notifier removal waits until no
 * invalidation of its mm runs: kcoll_regcache.c). kcoll_quota_defer()
 * runs them one at a time per user, on a workqueue of their own
 * (kcoll_queue_slow()), so that a user who keeps them waiting holds one
 * worker, and none of the module's other work.
 */
struct kcoll_deferred {
	struct list_head node;
	void (*fn)(struct kcoll_deferred *d);
};

struct kcoll_quota *kcoll_quota_get_current(void);
struct kcoll_quota *kcoll_quota_ref(struct kcoll_quota *q);
void kcoll_quota_put(struct kcoll_quota *q);
int kcoll_quota_charge(struct kcoll_quota *q, enum kcoll_quota_kind kind,
		       u32 n);
void kcoll_quota_uncharge(struct kcoll_quota *q, enum kcoll_quota_kind kind,
			  u32 n);
int kcoll_quota_charge_bytes(struct kcoll_quota *q, u64 bytes);
void kcoll_quota_uncharge_bytes(struct kcoll_quota *q, u64 bytes);
bool kcoll_quota_bytes_pressed(struct kcoll_quota *q);
int kcoll_quota_charge_dmabuf(struct kcoll_quota *q, u64 bytes);
void kcoll_quota_uncharge_dmabuf(struct kcoll_quota *q, u64 bytes);
void kcoll_quota_defer(struct kcoll_quota *q, struct kcoll_deferred *d);
void kcoll_quota_debugfs_init(struct dentry *dir);

/* kcoll_sysfs.c: the limits */
u32 kcoll_user_max(enum kcoll_quota_kind kind);
u32 kcoll_user_max_same_rank(void);
/* Log that @q's user met its limit @limit of @what (sysfs user_max_@what). */
void kcoll_quota_refused(const struct kcoll_quota *q, const char *what,
			 u64 limit);
u32 kcoll_user_max_kernel_mb(void);
u32 kcoll_user_max_dmabuf_mb(void);

#endif /* KCOLL_QUOTA_H */
