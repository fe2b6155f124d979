// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll statistics: per-CPU counters summed on read, the node's and the
 * devices' operation statistics, and their sysfs files
 * (/sys/class/misc/kcoll/stats/). Netlink reads the same (kcoll_nl.c).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/device.h>
#include <linux/percpu.h>
#include <linux/sysfs.h>

#include "kcoll_stats.h"
struct kcoll_pcpu_stats {
	u64 v[KCOLL_STAT_NR];
};
static DEFINE_PER_CPU(struct kcoll_pcpu_stats, kcoll_pcpu_stats);

atomic_t kcoll_nr_contexts = ATOMIC_INIT(0);
atomic_t kcoll_nr_inflight = ATOMIC_INIT(0);
atomic_t kcoll_nr_live_reqs = ATOMIC_INIT(0);

void kcoll_stat_add(enum kcoll_stat s, u64 v)
{
	this_cpu_add(kcoll_pcpu_stats.v[s], v);
}

static u64 kcoll_stat_sum(enum kcoll_stat s)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += per_cpu(kcoll_pcpu_stats, cpu).v[s];
	return sum;
}

#define KCOLL_STAT_ATTR(_name, _stat)					\
	static ssize_t _name##_show(struct device *dev,			\
				    struct device_attribute *attr,	\
				    char *buf)				\
	{								\
		return sysfs_emit(buf, "%llu\n",			\
				  (unsigned long long)kcoll_stat_sum(_stat)); \
	}								\
	static DEVICE_ATTR_RO(_name)

KCOLL_STAT_ATTR(submitted, KCOLL_STAT_SUBMITTED);
KCOLL_STAT_ATTR(completed, KCOLL_STAT_COMPLETED);
KCOLL_STAT_ATTR(failed, KCOLL_STAT_FAILED);
KCOLL_STAT_ATTR(rejected, KCOLL_STAT_REJECTED);
KCOLL_STAT_ATTR(rdma_write_bytes, KCOLL_STAT_RDMA_BYTES);
KCOLL_STAT_ATTR(intra_node_bytes, KCOLL_STAT_INTRA_BYTES);
KCOLL_STAT_ATTR(eager_sends, KCOLL_STAT_EAGER_SENDS);
KCOLL_STAT_ATTR(sig_sends, KCOLL_STAT_SIG_SENDS);
KCOLL_STAT_ATTR(dmabuf_imports, KCOLL_STAT_DMABUF_IMPORTS);
KCOLL_STAT_ATTR(dmabuf_revoked, KCOLL_STAT_DMABUF_REVOKED);
KCOLL_STAT_ATTR(nocpu_ops, KCOLL_STAT_NOCPU_OPS);
KCOLL_STAT_ATTR(nic_copy_bytes, KCOLL_STAT_NIC_COPY_BYTES);
KCOLL_STAT_ATTR(nocpu_cpu_touches, KCOLL_STAT_NOCPU_TOUCH);
KCOLL_STAT_ATTR(gpu_ops, KCOLL_STAT_GPU_OPS);
KCOLL_STAT_ATTR(gpu_steps, KCOLL_STAT_GPU_STEPS);
KCOLL_STAT_ATTR(gpu_polls, KCOLL_STAT_GPU_POLLS);
KCOLL_STAT_ATTR(gpu_step_ns, KCOLL_STAT_GPU_STEP_NS);
KCOLL_STAT_ATTR(reg_cache_hits, KCOLL_STAT_REGCACHE_HITS);
KCOLL_STAT_ATTR(reg_cache_misses, KCOLL_STAT_REGCACHE_MISSES);
KCOLL_STAT_ATTR(reg_cache_invalidations, KCOLL_STAT_REGCACHE_INVAL);
KCOLL_STAT_ATTR(colls_beside, KCOLL_STAT_COLLS_BESIDE);
KCOLL_STAT_ATTR(colls_overlap_waits, KCOLL_STAT_COLLS_OVERLAP);
KCOLL_STAT_ATTR(eager_beside, KCOLL_STAT_EAGER_BESIDE);
KCOLL_STAT_ATTR(grants_ahead, KCOLL_STAT_GRANTS_AHEAD);
KCOLL_STAT_ATTR(grants_closed, KCOLL_STAT_GRANTS_CLOSED);
KCOLL_STAT_ATTR(grants_fenced, KCOLL_STAT_GRANTS_FENCED);
KCOLL_STAT_ATTR(grants_fenced_held, KCOLL_STAT_GRANTS_FENCED_HELD);
KCOLL_STAT_ATTR(sends_ahead, KCOLL_STAT_SENDS_AHEAD);
KCOLL_STAT_ATTR(eager_ahead, KCOLL_STAT_EAGER_AHEAD);
KCOLL_STAT_ATTR(returned_early, KCOLL_STAT_RETURNED_EARLY);
KCOLL_STAT_ATTR(late_errors, KCOLL_STAT_LATE_ERRORS);
KCOLL_STAT_ATTR(p2p_waits, KCOLL_STAT_P2P_WAITS);
KCOLL_STAT_ATTR(p2p_asks, KCOLL_STAT_P2P_ASKS);
KCOLL_STAT_ATTR(tokens_covered, KCOLL_STAT_TOKENS_COVERED);
KCOLL_STAT_ATTR(hellos_stale, KCOLL_STAT_HELLOS_STALE);
KCOLL_STAT_ATTR(attempts_dropped, KCOLL_STAT_ATTEMPTS_DROPPED);
KCOLL_STAT_ATTR(reg_cache_sheds, KCOLL_STAT_REGCACHE_SHEDS);
KCOLL_STAT_ATTR(reg_cache_unnotified, KCOLL_STAT_REGCACHE_UNNOTIFIED);
KCOLL_STAT_ATTR(reg_rechecks, KCOLL_STAT_REG_RECHECKS);
KCOLL_STAT_ATTR(reg_stale, KCOLL_STAT_REG_STALE);
KCOLL_STAT_ATTR(reg_untracked, KCOLL_STAT_REG_UNTRACKED);
/* The node's profile of collectives (struct kcoll_opstats.prof). */
#define KCOLL_PROF_ATTR(_name, _idx)					\
	static ssize_t _name##_show(struct device *dev,			\
				    struct device_attribute *attr,	\
				    char *buf)				\
	{								\
		return sysfs_emit(buf, "%llu\n", (unsigned long long)	\
				  atomic64_read(&kcoll_node_stats.prof[_idx])); \
	}								\
	static DEVICE_ATTR_RO(_name)

KCOLL_PROF_ATTR(time_ops, KCOLL_NL_PROF_OPS);
KCOLL_PROF_ATTR(time_phases, KCOLL_NL_PROF_PHASES);
KCOLL_PROF_ATTR(time_total_ns, KCOLL_NL_PROF_TOTAL_NS);
KCOLL_PROF_ATTR(time_queued_ns, KCOLL_NL_PROF_QUEUED_NS);
KCOLL_PROF_ATTR(time_wait_ns, KCOLL_NL_PROF_WAIT_NS);
KCOLL_PROF_ATTR(time_move_ns, KCOLL_NL_PROF_MOVE_NS);
KCOLL_PROF_ATTR(time_land_ns, KCOLL_NL_PROF_LAND_NS);
KCOLL_PROF_ATTR(time_sigs_ns, KCOLL_NL_PROF_SIGS_NS);
KCOLL_PROF_ATTR(time_settle_ns, KCOLL_NL_PROF_SETTLE_NS);

struct kcoll_opstats kcoll_node_stats;

/* Count one completed operation in @st: @ns from submission to completion. */
void kcoll_opstats_add(struct kcoll_opstats *st, u64 bytes, int res, u64 ns)
{
	u64 us = ns / NSEC_PER_USEC;
	unsigned int b = us ? min_t(unsigned int, ilog2(us),
				    KCOLL_NL_LAT_BUCKETS - 1) : 0;

	atomic64_inc(&st->ops);
	atomic64_add(bytes, &st->bytes);
	if (res < 0)
		atomic64_inc(&st->errors);
	if (res == -ETIMEDOUT)
		atomic64_inc(&st->timeouts);
	atomic64_inc(&st->lat[b]);
}

/* Add one collective's profile @v to @st. */
void kcoll_opstats_prof(struct kcoll_opstats *st,
			const u64 v[KCOLL_NL_PROF_NR])
{
	int i;

	for (i = 0; i < KCOLL_NL_PROF_NR; i++)
		atomic64_add(v[i], &st->prof[i]);
}

static ssize_t timeouts_show(struct device *dev,
			     struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%lld\n",
			  (long long)atomic64_read(&kcoll_node_stats.timeouts));
}
static DEVICE_ATTR_RO(timeouts);

static ssize_t contexts_show(struct device *dev,
			     struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&kcoll_nr_contexts));
}
static DEVICE_ATTR_RO(contexts);

static ssize_t inflight_show(struct device *dev,
			     struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&kcoll_nr_inflight));
}
static DEVICE_ATTR_RO(inflight);

static struct attribute *kcoll_stats_attrs[] = {
	&dev_attr_submitted.attr,
	&dev_attr_completed.attr,
	&dev_attr_failed.attr,
	&dev_attr_rejected.attr,
	&dev_attr_rdma_write_bytes.attr,
	&dev_attr_intra_node_bytes.attr,
	&dev_attr_eager_sends.attr,
	&dev_attr_sig_sends.attr,
	&dev_attr_dmabuf_imports.attr,
	&dev_attr_dmabuf_revoked.attr,
	&dev_attr_nocpu_ops.attr,
	&dev_attr_nic_copy_bytes.attr,
	&dev_attr_nocpu_cpu_touches.attr,
	&dev_attr_gpu_ops.attr,
	&dev_attr_gpu_steps.attr,
	&dev_attr_gpu_polls.attr,
	&dev_attr_gpu_step_ns.attr,
	&dev_attr_reg_cache_hits.attr,
	&dev_attr_reg_cache_misses.attr,
	&dev_attr_reg_cache_invalidations.attr,
	&dev_attr_colls_beside.attr,
	&dev_attr_colls_overlap_waits.attr,
	&dev_attr_eager_beside.attr,
	&dev_attr_grants_ahead.attr,
	&dev_attr_grants_closed.attr,
	&dev_attr_grants_fenced.attr,
	&dev_attr_grants_fenced_held.attr,
	&dev_attr_sends_ahead.attr,
	&dev_attr_eager_ahead.attr,
	&dev_attr_returned_early.attr,
	&dev_attr_late_errors.attr,
	&dev_attr_p2p_waits.attr,
	&dev_attr_p2p_asks.attr,
	&dev_attr_tokens_covered.attr,
	&dev_attr_hellos_stale.attr,
	&dev_attr_attempts_dropped.attr,
	&dev_attr_reg_cache_sheds.attr,
	&dev_attr_reg_cache_unnotified.attr,
	&dev_attr_reg_rechecks.attr,
	&dev_attr_reg_stale.attr,
	&dev_attr_reg_untracked.attr,
	&dev_attr_time_ops.attr,
	&dev_attr_time_phases.attr,
	&dev_attr_time_total_ns.attr,
	&dev_attr_time_queued_ns.attr,
	&dev_attr_time_wait_ns.attr,
	&dev_attr_time_move_ns.attr,
	&dev_attr_time_land_ns.attr,
	&dev_attr_time_sigs_ns.attr,
	&dev_attr_time_settle_ns.attr,
	&dev_attr_timeouts.attr,
	&dev_attr_contexts.attr,
	&dev_attr_inflight.attr,
	NULL,
};

const struct attribute_group kcoll_stats_group = {
	.name = "stats",
	.attrs = kcoll_stats_attrs,
};
