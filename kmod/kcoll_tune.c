// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll algorithm selection: the module's copy of the cost model's
 * tunables (kcoll_cost.h) and their sysfs files, and per-algorithm
 * operation counts.
 *
 * /sys/class/misc/kcoll/algo/
 *	alpha_ns beta_ps gamma_ps	the cost model (rw): what this node
 *					advertises to new communicators;
 *					0 (the default): alpha_ns the
 *					device's timed round trips (PING),
 *					beta_ps its port rate, gamma_ps the
 *					fp32 sum measured at load
 *	<collective>			"auto" or a forced algorithm (rw)
 *	max_bytes_<algorithm>		0, or the largest operation (count *
 *					element size) the cost-based choice
 *					may give that algorithm (rw)
 * /sys/class/misc/kcoll/algo_ops/<algorithm>	collectives run with it
 *
 * The choice is made on each rank independently, from the communicator's
 * alpha, beta and gamma, which its ranks agree on when they connect (the
 * largest each advertises), and from the per-collective settings here,
 * which every rank must have alike. The algorithm travels in the
 * signature, so ranks that chose differently fail with -EBADMSG instead of
 * exchanging data that does not fit.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/device.h>
#include <linux/kernel.h>
#include <linux/seqlock.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "kcoll_tune.h"
#include "kcoll_ib.h"
#include "kcoll_reduce.h"
#include "kcoll_cost.h"

/* Every algorithm a collective can run (not DEFAULT, not DIRECT p2p). */
#define KCOLL_TUNE_ALGOS(X)						\
	X(ring, KCOLL_ALGO_RING)					\
	X(chain, KCOLL_ALGO_CHAIN)					\
	X(pairwise, KCOLL_ALGO_PAIRWISE)				\
	X(dissemination, KCOLL_ALGO_DISSEMINATION)			\
	X(recdoubling, KCOLL_ALGO_RECDOUBLING)				\
	X(binomial, KCOLL_ALGO_BINOMIAL)				\
	X(rabenseifner, KCOLL_ALGO_RABENSEIFNER)			\
	X(rechalving, KCOLL_ALGO_RECHALVING)				\
	X(bruck, KCOLL_ALGO_BRUCK)					\
	X(farfirst, KCOLL_ALGO_FARFIRST)

static struct kcoll_tune kcoll_tune_cur;
/*
 * Every submitted collective reads the tunables; sysfs and netlink rarely
 * write them. Readers retry instead of locking (kcoll_sched_choose() is a
 * pure function of the struct); writers and the sysfs readers take the
 * seqlock's spinlock, for a handful of word stores at most.
 */
static DEFINE_SEQLOCK(kcoll_tune_lock);
static atomic64_t kcoll_algo_ops[KCOLL_ALGO_NR];

void kcoll_tune_setup(void)
{
	kcoll_tune_init(&kcoll_tune_cur);
	/* Estimated unless set: the device's round trips and rate, the
	 * measured reduction. */
	kcoll_tune_cur.cost.alpha_ns = 0;
	kcoll_tune_cur.cost.beta_ps = 0;
	kcoll_tune_cur.cost.gamma_ps = 0;
}

/*
 * What this node advertises for a new communicator on @ibdev (NULL: none):
 * the sysfs values, with beta and gamma estimated where they are 0, and
 * the built-in defaults where no estimate exists.
 */
void kcoll_tune_model(struct ib_device *ibdev, struct kcoll_model *m)
{
	unsigned int seq;

	do {
		seq = read_seqbegin(&kcoll_tune_lock);
		m->alpha_ns = kcoll_tune_cur.cost.alpha_ns;
		m->beta_ps = kcoll_tune_cur.cost.beta_ps;
		m->gamma_ps = kcoll_tune_cur.cost.gamma_ps;
	} while (read_seqretry(&kcoll_tune_lock, seq));
	if (!m->alpha_ns && ibdev)
		m->alpha_ns = kcoll_ib_alpha_ns(ibdev);
	if (!m->alpha_ns)
		m->alpha_ns = KCOLL_COST_ALPHA_NS;
	/* What the wire did for earlier communicators, else its port rate:
	 * a software NIC (rxe) claims a rate its CPU never reaches. */
	if (!m->beta_ps && ibdev)
		m->beta_ps = kcoll_ib_beta_measured_ps(ibdev);
	if (!m->beta_ps && ibdev)
		m->beta_ps = kcoll_ib_beta_ps(ibdev);
	if (!m->beta_ps)
		m->beta_ps = KCOLL_COST_BETA_PS;
	if (!m->gamma_ps)
		m->gamma_ps = kcoll_reduce_gamma_ps() ?: KCOLL_COST_GAMMA_PS;
	m->node_ranks = 0;	/* the communicator's rank table decides */
}

/*
 * The algorithm for a collective of a communicator whose agreed model is
 * @m (a zero field: this node's sysfs value); the rest of the model and
 * the per-collective settings are read now, so they apply to the next
 * operation.
 */
u8 kcoll_tune_choose(u32 opcode, u32 nranks, u64 bytes,
		     const struct kcoll_model *m)
{
	struct kcoll_cost c;
	unsigned int seq;
	u8 algo;

	do {
		seq = read_seqbegin(&kcoll_tune_lock);
		c = kcoll_tune_cur.cost;
		if (m->alpha_ns)
			c.alpha_ns = m->alpha_ns;
		if (m->beta_ps)
			c.beta_ps = m->beta_ps;
		if (m->gamma_ps)
			c.gamma_ps = m->gamma_ps;
		c.alpha_ns = c.alpha_ns ?: KCOLL_COST_ALPHA_NS;
		c.beta_ps = c.beta_ps ?: KCOLL_COST_BETA_PS;
		c.gamma_ps = c.gamma_ps ?: KCOLL_COST_GAMMA_PS;
		c.node_ranks = m->node_ranks;
		algo = kcoll_sched_choose_cost(&kcoll_tune_cur, &c, opcode,
					       nranks, bytes);
	} while (read_seqretry(&kcoll_tune_lock, seq));
	return algo;
}

void kcoll_tune_count(u8 algo)
{
	if (algo < KCOLL_ALGO_NR)
		atomic64_inc(&kcoll_algo_ops[algo]);
}

/* ---------------------------------------------------------------- */
/* Cost model                                                        */
/* ---------------------------------------------------------------- */

struct kcoll_cost_attr {
	struct device_attribute attr;
	size_t off;		/* in struct kcoll_cost */
	u32 min, max;
};

static ssize_t kcoll_cost_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	struct kcoll_cost_attr *ca = container_of(attr, struct kcoll_cost_attr,
						  attr);
	u32 v;

	read_seqlock_excl(&kcoll_tune_lock);
	v = *(u32 *)((u8 *)&kcoll_tune_cur.cost + ca->off);
	read_sequnlock_excl(&kcoll_tune_lock);
	return sysfs_emit(buf, "%u\n", v);
}

static ssize_t kcoll_cost_store(struct device *dev,
				struct device_attribute *attr, const char *buf,
				size_t count)
{
	struct kcoll_cost_attr *ca = container_of(attr, struct kcoll_cost_attr,
						  attr);
	u32 v;
	int err;

	err = kstrtou32(buf, 0, &v);
	if (err)
		return err;
	if (v < ca->min || v > ca->max)
		return -ERANGE;
	write_seqlock(&kcoll_tune_lock);
	*(u32 *)((u8 *)&kcoll_tune_cur.cost + ca->off) = v;
	write_sequnlock(&kcoll_tune_lock);
	return count;
}

#define KCOLL_COST_ATTR(_name, _field, _min, _max)			\
	static struct kcoll_cost_attr kcoll_cost_attr_##_name = {	\
		.attr = __ATTR(_name, 0644, kcoll_cost_show,		\
			       kcoll_cost_store),			\
		.off = offsetof(struct kcoll_cost, _field),		\
		.min = _min, .max = _max,				\
	}

/* Bounds keep the model's u64 arithmetic far from overflow. */
KCOLL_COST_ATTR(alpha_ns, alpha_ns, 0, 1000000000);
KCOLL_COST_ATTR(beta_ps, beta_ps, 0, 1000000);
KCOLL_COST_ATTR(gamma_ps, gamma_ps, 0, 1000000);

/* ---------------------------------------------------------------- */
/* Forced algorithm per collective                                   */
/* ---------------------------------------------------------------- */

struct kcoll_force_attr {
	struct device_attribute attr;
	u32 opcode;
};

static ssize_t kcoll_force_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	struct kcoll_force_attr *fa = container_of(attr,
						   struct kcoll_force_attr,
						   attr);
	u8 algo;

	read_seqlock_excl(&kcoll_tune_lock);
	algo = kcoll_tune_cur.coll[fa->opcode].force;
	read_sequnlock_excl(&kcoll_tune_lock);
	return sysfs_emit(buf, "%s\n", algo == KCOLL_ALGO_DEFAULT ? "auto" :
			  kcoll_algo_name(algo));
}

static ssize_t kcoll_force_store(struct device *dev,
				 struct device_attribute *attr,
				 const char *buf, size_t count)
{
	struct kcoll_force_attr *fa = container_of(attr,
						   struct kcoll_force_attr,
						   attr);
	u8 algo;

	if (sysfs_streq(buf, "auto")) {
		algo = KCOLL_ALGO_DEFAULT;
	} else {
		for (algo = KCOLL_ALGO_DEFAULT + 1; algo < KCOLL_ALGO_NR; algo++)
			if (sysfs_streq(buf, kcoll_algo_name(algo)))
				break;
		if (algo == KCOLL_ALGO_NR ||
		    !kcoll_sched_algo_ok(fa->opcode, algo))
			return -EINVAL;
	}
	write_seqlock(&kcoll_tune_lock);
	kcoll_tune_cur.coll[fa->opcode].force = algo;
	write_sequnlock(&kcoll_tune_lock);
	return count;
}

#define KCOLL_FORCE_ATTR(_name, _op)					\
	static struct kcoll_force_attr kcoll_force_attr_##_name = {	\
		.attr = __ATTR(_name, 0644, kcoll_force_show,		\
			       kcoll_force_store),			\
		.opcode = _op,						\
	}

KCOLL_FORCE_ATTR(allreduce, KCOLL_OP_ALLREDUCE);
KCOLL_FORCE_ATTR(reduce, KCOLL_OP_REDUCE);
KCOLL_FORCE_ATTR(broadcast, KCOLL_OP_BROADCAST);
KCOLL_FORCE_ATTR(allgather, KCOLL_OP_ALLGATHER);
KCOLL_FORCE_ATTR(reduce_scatter, KCOLL_OP_REDUCE_SCATTER);
KCOLL_FORCE_ATTR(alltoall, KCOLL_OP_ALLTOALL);
KCOLL_FORCE_ATTR(gather, KCOLL_OP_GATHER);
KCOLL_FORCE_ATTR(scatter, KCOLL_OP_SCATTER);

/* ---------------------------------------------------------------- */
/* Size limits per algorithm (every collective it serves)            */
/* ---------------------------------------------------------------- */

struct kcoll_max_attr {
	struct device_attribute attr;
	u8 algo;
};

static ssize_t kcoll_max_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	struct kcoll_max_attr *ma = container_of(attr, struct kcoll_max_attr,
						 attr);
	u64 v;

	read_seqlock_excl(&kcoll_tune_lock);
	v = kcoll_tune_cur.coll[KCOLL_OP_ALLREDUCE].max_bytes[ma->algo];
	read_sequnlock_excl(&kcoll_tune_lock);
	return sysfs_emit(buf, "%llu\n", (unsigned long long)v);
}

static ssize_t kcoll_max_store(struct device *dev,
			       struct device_attribute *attr, const char *buf,
			       size_t count)
{
	struct kcoll_max_attr *ma = container_of(attr, struct kcoll_max_attr,
						 attr);
	unsigned int op;
	u64 v;
	int err;

	err = kstrtou64(buf, 0, &v);
	if (err)
		return err;
	write_seqlock(&kcoll_tune_lock);
	for (op = 0; op < ARRAY_SIZE(kcoll_tune_cur.coll); op++)
		kcoll_tune_cur.coll[op].max_bytes[ma->algo] = v;
	write_sequnlock(&kcoll_tune_lock);
	return count;
}

#define KCOLL_MAX_ATTR(_name, _algo)					\
	static struct kcoll_max_attr kcoll_max_attr_##_name = {		\
		.attr = __ATTR(max_bytes_##_name, 0644, kcoll_max_show,	\
			       kcoll_max_store),			\
		.algo = _algo,						\
	};

KCOLL_TUNE_ALGOS(KCOLL_MAX_ATTR)

static struct attribute *kcoll_algo_attrs[] = {
	&kcoll_cost_attr_alpha_ns.attr.attr,
	&kcoll_cost_attr_beta_ps.attr.attr,
	&kcoll_cost_attr_gamma_ps.attr.attr,
	&kcoll_force_attr_allreduce.attr.attr,
	&kcoll_force_attr_reduce.attr.attr,
	&kcoll_force_attr_broadcast.attr.attr,
	&kcoll_force_attr_allgather.attr.attr,
	&kcoll_force_attr_reduce_scatter.attr.attr,
	&kcoll_force_attr_alltoall.attr.attr,
	&kcoll_force_attr_gather.attr.attr,
	&kcoll_force_attr_scatter.attr.attr,
#define KCOLL_MAX_PTR(_name, _algo) &kcoll_max_attr_##_name.attr.attr,
	KCOLL_TUNE_ALGOS(KCOLL_MAX_PTR)
	NULL,
};

const struct attribute_group kcoll_algo_group = {
	.name = "algo",
	.attrs = kcoll_algo_attrs,
};

/* ---------------------------------------------------------------- */
/* algo_ops/<algorithm>                                              */
/* ---------------------------------------------------------------- */

struct kcoll_algo_stat_attr {
	struct device_attribute attr;
	u8 algo;
};

static ssize_t kcoll_algo_stat_show(struct device *dev,
				    struct device_attribute *attr, char *buf)
{
	struct kcoll_algo_stat_attr *sa =
		container_of(attr, struct kcoll_algo_stat_attr, attr);

	return sysfs_emit(buf, "%lld\n",
			  (long long)atomic64_read(&kcoll_algo_ops[sa->algo]));
}

#define KCOLL_ALGO_STAT_ATTR(_name, _algo)				\
	static struct kcoll_algo_stat_attr kcoll_algo_stat_##_name = {	\
		.attr = __ATTR(_name, 0444, kcoll_algo_stat_show, NULL),	\
		.algo = _algo,						\
	};

KCOLL_TUNE_ALGOS(KCOLL_ALGO_STAT_ATTR)

static struct attribute *kcoll_algo_stat_attrs[] = {
#define KCOLL_STAT_PTR(_name, _algo) &kcoll_algo_stat_##_name.attr.attr,
	KCOLL_TUNE_ALGOS(KCOLL_STAT_PTR)
	NULL,
};

const struct attribute_group kcoll_algo_ops_group = {
	.name = "algo_ops",
	.attrs = kcoll_algo_stat_attrs,
};
