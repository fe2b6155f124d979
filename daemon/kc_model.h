/* SPDX-License-Identifier: MIT */
/*
 * Plain C view of what the kcoll netlink family reports (devices,
 * communicators, statistics, tunables, events), filled by kc_nlparse.c and
 * rendered by kc_render.c / kc_prom.c. No libnl types here, so rendering is
 * tested without a socket.
 *
 * Every struct carries @have: bit N set means attribute N of enum
 * kcoll_nl_attr was in the message (KC_HAS()). Renderers print only what
 * the kernel sent; the kernel may send more than this version knows.
 */
#ifndef KC_MODEL_H
#define KC_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/kcoll_netlink.h>

_Static_assert(KCOLL_A_MAX < 64, "kc_*.have holds one bit per attribute");

#define KC_BIT(attr)		(1ULL << (attr))
#define KC_HAS(obj, attr)	(!!((obj)->have & KC_BIT(attr)))

/* IB_DEVICE_NAME_MAX */
#define KC_DEV_NAME_MAX		64
#define KC_ALGO_NAME_MAX	32

/* A list of ranks (MISSING_RANKS). */
struct kc_ranks {
	uint32_t *v;
	uint32_t n;
};

/* STATS nest: per device, per communicator or node-wide. */
struct kc_stats {
	uint64_t have;
	uint64_t ops;
	uint64_t bytes;
	uint64_t errors;
	uint64_t timeouts;
	uint64_t inflight;		/* node-wide only */
	uint64_t contexts;		/* node-wide only */
	uint64_t comms;			/* node-wide only */
	uint64_t lat[KCOLL_NL_LAT_BUCKETS];
	uint64_t prof[KCOLL_NL_PROF_NR];	/* KCOLL_A_STAT_PROFILE */
};

/* KCOLL_A_COST_*: the cost model's inputs (see kcoll_netlink.h). */
struct kc_cost {
	uint32_t alpha_ns, beta_ps, gamma_ps;
};

struct kc_dev {
	uint64_t have;
	char name[KC_DEV_NAME_MAX];
	uint32_t index;
	uint64_t node_guid;
	uint8_t port_state;
	uint32_t comms;
	uint8_t enabled;		/* the module's devices tunable */
	struct kc_cost cost;		/* what the node advertises on it */
	struct kc_stats stats;		/* valid if KC_HAS(dev, KCOLL_A_STATS) */
};

struct kc_member {
	uint64_t have;
	uint32_t rank;
	uint8_t addr[16];		/* IPv4-mapped IPv6 for IPv4 */
	uint16_t port;
	uint16_t local_index;
	uint8_t connected;
};

struct kc_op {
	uint64_t have;
	uint64_t seq;
	uint8_t opcode;			/* enum kcoll_op */
	char algo[KC_ALGO_NAME_MAX];
	uint8_t prio;
	uint64_t bytes;
	uint64_t age_ms;
	uint32_t timeout_ms;
	struct kc_ranks missing;
};

/* COMM_LAST_ERROR nest. */
struct kc_lasterr {
	uint64_t have;
	uint64_t seq;
	uint8_t opcode;
	int32_t err;			/* negative errno */
	struct kc_ranks missing;
};

struct kc_comm {
	uint64_t have;
	uint32_t id;
	uint64_t uid;
	uint64_t parent_uid;		/* KC_HAS(comm, KCOLL_A_COMM_PARENT_UID) */
	uint32_t pid;
	uint32_t rank;
	uint32_t nranks;
	uint8_t state;			/* enum kcoll_comm_state */
	char dev[KC_DEV_NAME_MAX];
	uint32_t inflight;
	struct kc_cost cost;		/* agreed by the ranks */
	struct kc_member *members;
	size_t n_members;
	struct kc_op *ops;
	size_t n_ops;
	struct kc_lasterr last_error;	/* KC_HAS(comm, KCOLL_A_COMM_LAST_ERROR) */
	struct kc_stats stats;		/* KC_HAS(comm, KCOLL_A_STATS) */
};

/* KCOLL_CMD_STATS_GET: node-wide STATS and one DEV nest per device. */
struct kc_node_stats {
	struct kc_stats node;
	struct kc_dev *devs;
	size_t n_devs;
};

struct kc_tunable {
	char name[KCOLL_NL_TUNABLE_NAME_MAX];
	char value[KCOLL_NL_TUNABLE_VALUE_MAX];
};

/* One multicast event (cmd: KCOLL_CMD_EV_*). */
struct kc_event {
	uint8_t cmd;
	uint64_t have;
	uint32_t comm_id;
	uint64_t uid;
	uint64_t parent_uid;
	uint32_t pid;
	uint32_t rank;
	uint32_t nranks;
	char dev[KC_DEV_NAME_MAX];
	uint32_t dev_index;
	uint64_t seq;
	uint8_t opcode;
	uint32_t timeout_ms;
	uint32_t peer_rank;
	int32_t err;
	uint32_t inflight;
	struct kc_ranks missing;
};

void kc_ranks_free(struct kc_ranks *r);
void kc_comm_free(struct kc_comm *c);
void kc_comms_free(struct kc_comm *c, size_t n);
void kc_node_stats_free(struct kc_node_stats *ns);
void kc_event_free(struct kc_event *ev);

#endif /* KC_MODEL_H */
