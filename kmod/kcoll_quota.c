// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll per-user limits. Everything a user can make the module allocate is
 * charged to that user (the real uid of the task that opened the file):
 * open files (contexts), communicators, registrations, RC QPs (charged for
 * a communicator's whole mesh when it is created), requests in flight
 * (each holds a request and an operation, about 2 KiB of slab, until its
 * CQE; the CQ sizes alone bounded them by 1024 files x 8192) and the
 * kernel memory
 * behind staging slots, eager slots and operations' scratch, and the bytes
 * of dma-bufs imported (GPU memory their exporter keeps pinned). Each has a
 * sysfs limit (user_max_*, also module parameters and netlink tunables);
 * past it the request fails with -EDQUOT and nothing else changes. Pinned
 * user pages are not charged here: RLIMIT_MEMLOCK bounds them.
 *
 * One struct kcoll_quota per user with a charge outstanding, in a small
 * hash table; it goes with its last reference. A task in a user namespace
 * that a user other than root made counts as that user (and so on up):
 * a user's subordinate uids are not more users here. The uids of one that
 * root made (a container runtime's) are users of their own, as root
 * assigned them.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cred.h>
#include <linux/debugfs.h>
#include <linux/hashtable.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uidgid.h>
#include <linux/user_namespace.h>
#include <linux/workqueue.h>

#include "kcoll.h"

#include "kcoll_quota.h"

struct kcoll_quota {
	struct hlist_node node;		/* kcoll_quotas; kcoll_quota_lock */
	kuid_t uid;
	refcount_t ref;
	atomic_t n[KCOLL_Q_NR];
	atomic64_t bytes;
	atomic64_t dmabuf;		/* dma-buf bytes imported */
	/* kcoll_quota_defer(): queued, and the work that runs them. */
	spinlock_t slow_lock;
	struct list_head slow;
	struct work_struct slow_work;
};

static void kcoll_quota_slow_work(struct work_struct *w);

static DEFINE_HASHTABLE(kcoll_quotas, 6);
static DEFINE_SPINLOCK(kcoll_quota_lock);

static const char * const kcoll_quota_names[KCOLL_Q_NR] = {
	[KCOLL_Q_CONTEXTS] = "contexts",
	[KCOLL_Q_COMMS] = "comms",
	[KCOLL_Q_REGS] = "regs",
	[KCOLL_Q_QPS] = "qps",
	[KCOLL_Q_OPS] = "ops",
};

static struct kcoll_quota *kcoll_quota_find(kuid_t uid)
{
	struct kcoll_quota *q;

	lockdep_assert_held(&kcoll_quota_lock);
	hash_for_each_possible(kcoll_quotas, q, node, __kuid_val(uid))
		if (uid_eq(q->uid, uid) && refcount_inc_not_zero(&q->ref))
			return q;
	return NULL;
}

/*
 * Whom current's charges go to: its real uid, or in a user namespace that
 * a user other than root made, that user (the outermost such one below
 * the first that root made, or below the initial namespace). Until
 * 2026-12-05 it was the uid alone, and a user with a range of
 * subordinate uids (newuidmap) had a fresh set of limits for each.
 */
static kuid_t kcoll_quota_uid(void)
{
	const struct user_namespace *ns = current_user_ns();
	kuid_t uid = current_uid();

	while (ns != &init_user_ns && !uid_eq(ns->owner, GLOBAL_ROOT_UID)) {
		uid = ns->owner;
		ns = ns->parent;
	}
	return uid;
}

/* The quota of current's user (kcoll_quota_uid()), referenced; NULL
 * without memory. */
struct kcoll_quota *kcoll_quota_get_current(void)
{
	kuid_t uid = kcoll_quota_uid();
	struct kcoll_quota *q, *found;

	spin_lock(&kcoll_quota_lock);
	q = kcoll_quota_find(uid);
	spin_unlock(&kcoll_quota_lock);
	if (q)
		return q;
	q = kzalloc(sizeof(*q), GFP_KERNEL);
	if (!q)
		return NULL;
	q->uid = uid;
	refcount_set(&q->ref, 1);
	spin_lock_init(&q->slow_lock);
	INIT_LIST_HEAD(&q->slow);
	INIT_WORK(&q->slow_work, kcoll_quota_slow_work);
	spin_lock(&kcoll_quota_lock);
	found = kcoll_quota_find(uid);
	if (!found)
		hash_add(kcoll_quotas, &q->node, __kuid_val(uid));
	spin_unlock(&kcoll_quota_lock);
	if (found) {
		kfree(q);
		q = found;
	}
	return q;
}

struct kcoll_quota *kcoll_quota_ref(struct kcoll_quota *q)
{
	refcount_inc(&q->ref);
	return q;
}

void kcoll_quota_put(struct kcoll_quota *q)
{
	if (!q || !refcount_dec_and_lock(&q->ref, &kcoll_quota_lock))
		return;
	hash_del(&q->node);
	spin_unlock(&kcoll_quota_lock);
	kfree(q);
}

/* @q's deferred work, oldest first; the reference its queueing took goes
 * last (it may free @q, and this work with it: nothing touches either
 * after). */
static void kcoll_quota_slow_work(struct work_struct *w)
{
	struct kcoll_quota *q = container_of(w, struct kcoll_quota, slow_work);
	struct kcoll_deferred *d;

	for (;;) {
		spin_lock(&q->slow_lock);
		d = list_first_entry_or_null(&q->slow, struct kcoll_deferred,
					     node);
		if (d)
			list_del(&d->node);
		spin_unlock(&q->slow_lock);
		if (!d)
			break;
		d->fn(d);
	}
	kcoll_quota_put(q);
}

/*
 * Run @d->fn(@d) later, in process context, after @q's work deferred
 * before it and never beside any of it. The caller holds a reference to
 * @q (@d's, which @d->fn may give back).
 */
void kcoll_quota_defer(struct kcoll_quota *q, struct kcoll_deferred *d)
{
	/* One reference per time queued, the work gives it back; taken
	 * first: a worker already running may take @d, run it (which may
	 * put @d's reference) and finish before we queue. */
	kcoll_quota_ref(q);
	spin_lock(&q->slow_lock);
	list_add_tail(&d->node, &q->slow);
	spin_unlock(&q->slow_lock);
	if (!kcoll_queue_slow(&q->slow_work))
		kcoll_quota_put(q);
}

void kcoll_quota_refused(const struct kcoll_quota *q, const char *what,
			 u64 limit)
{
	pr_info_ratelimited("uid %u: at its limit of %llu %s (sysfs user_max_%s): refused with -EDQUOT\n",
			    from_kuid(&init_user_ns, q->uid), limit, what,
			    what);
}

/* Charge @n objects of @kind to @q: 0, or -EDQUOT past the user's limit. */
int kcoll_quota_charge(struct kcoll_quota *q, enum kcoll_quota_kind kind,
		       u32 n)
{
	u32 limit = kcoll_user_max(kind);

	if (atomic_add_return(n, &q->n[kind]) > limit) {
		atomic_sub(n, &q->n[kind]);
		kcoll_quota_refused(q, kcoll_quota_names[kind], limit);
		return -EDQUOT;
	}
	return 0;
}

/* Give back what kcoll_quota_charge() took; a NULL @q was never charged
 * (the uncharges below likewise). */
void kcoll_quota_uncharge(struct kcoll_quota *q, enum kcoll_quota_kind kind,
			  u32 n)
{
	if (q)
		atomic_sub(n, &q->n[kind]);
}

/* Kernel memory: @bytes more, 0 or -EDQUOT (sysfs user_max_kernel_mb). */
int kcoll_quota_charge_bytes(struct kcoll_quota *q, u64 bytes)
{
	u64 limit = (u64)kcoll_user_max_kernel_mb() << 20;

	if (atomic64_add_return(bytes, &q->bytes) > limit) {
		atomic64_sub(bytes, &q->bytes);
		kcoll_quota_refused(q, "kernel_mb", limit >> 20);
		return -EDQUOT;
	}
	return 0;
}

void kcoll_quota_uncharge_bytes(struct kcoll_quota *q, u64 bytes)
{
	if (q)
		atomic64_sub(bytes, &q->bytes);
}

/* Has @q's user charged more than half of user_max_kernel_mb? */
bool kcoll_quota_bytes_pressed(struct kcoll_quota *q)
{
	return q && (u64)atomic64_read(&q->bytes) >
		    ((u64)kcoll_user_max_kernel_mb() << 19);
}

/* dma-buf bytes imported: 0 or -EDQUOT (sysfs user_max_dmabuf_mb). */
int kcoll_quota_charge_dmabuf(struct kcoll_quota *q, u64 bytes)
{
	u64 limit = (u64)kcoll_user_max_dmabuf_mb() << 20;

	if (atomic64_add_return(bytes, &q->dmabuf) > limit) {
		atomic64_sub(bytes, &q->dmabuf);
		kcoll_quota_refused(q, "dmabuf_mb", limit >> 20);
		return -EDQUOT;
	}
	return 0;
}

void kcoll_quota_uncharge_dmabuf(struct kcoll_quota *q, u64 bytes)
{
	if (q)
		atomic64_sub(bytes, &q->dmabuf);
}

/* debugfs kcoll/quota: what each user holds now. */
static int kcoll_quota_show(struct seq_file *m, void *unused)
{
	struct kcoll_quota *q;
	unsigned int b;
	int k;

	spin_lock(&kcoll_quota_lock);
	hash_for_each(kcoll_quotas, b, q, node) {
		seq_printf(m, "uid %u", from_kuid(&init_user_ns, q->uid));
		for (k = 0; k < KCOLL_Q_NR; k++)
			seq_printf(m, " %s %d", kcoll_quota_names[k],
				   atomic_read(&q->n[k]));
		seq_printf(m, " kernel_bytes %lld dmabuf_bytes %lld\n",
			   (long long)atomic64_read(&q->bytes),
			   (long long)atomic64_read(&q->dmabuf));
	}
	spin_unlock(&kcoll_quota_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kcoll_quota);

void kcoll_quota_debugfs_init(struct dentry *dir)
{
	debugfs_create_file("quota", 0400, dir, NULL, &kcoll_quota_fops);
}
