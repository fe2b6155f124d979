// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll tunables (statistics are kcoll_stats.c's).
 *
 * Each tunable is defined once in kcoll_knobs[] and appears both as a module
 * parameter (load-time default, /sys/module/kcoll/parameters/) and as an
 * attribute of the misc device (/sys/class/misc/kcoll/). Writes take effect
 * where the value is next read: most for rings, communicators or
 * connections set up afterwards; each entry of
 * docs/ABI/sysfs-class-misc-kcoll says when.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/device.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/sysfs.h>

#include "kcoll_types.h"
#include "kcoll_conn.h"
#include "kcoll_sysfs.h"
#include "kcoll_stats.h"
#include "kcoll_tune.h"
#include "kcoll_ib.h"
#include "kcoll_quota.h"
#include "kcoll_reduce.h"
#include "kcoll_cost.h"

struct kcoll_knob {
	const char *name;
	u32 val;
	u32 min;
	u32 max;
	bool pow2;
};

enum {
	KCOLL_KNOB_MAX_SQ, KCOLL_KNOB_MAX_CQ, KCOLL_KNOB_CHUNK,
	KCOLL_KNOB_CONNECT_TIMEOUT, KCOLL_KNOB_ACK_TIMEOUT,
	KCOLL_KNOB_PRIO_SCHED, KCOLL_KNOB_PRIO_AGING, KCOLL_KNOB_OP_TIMEOUT,
	KCOLL_KNOB_QPS_PER_PEER, KCOLL_KNOB_INTRA_NODE, KCOLL_KNOB_EAGER,
	KCOLL_KNOB_LAZY_SIGS, KCOLL_KNOB_EAGER_P2P, KCOLL_KNOB_PRIO_MAX_UNPRIV,
	KCOLL_KNOB_USER_CONTEXTS, KCOLL_KNOB_USER_COMMS, KCOLL_KNOB_USER_REGS,
	KCOLL_KNOB_USER_QPS, KCOLL_KNOB_USER_OPS, KCOLL_KNOB_USER_KERNEL_MB,
	KCOLL_KNOB_USER_DMABUF_MB, KCOLL_KNOB_GPU_POLL_US,
	KCOLL_KNOB_REG_CACHE_MB, KCOLL_KNOB_COLLS_IN_FLIGHT,
	KCOLL_KNOB_PHASES_AHEAD, KCOLL_KNOB_EAGER_AHEAD,
	KCOLL_KNOB_CONFIRM_BEHIND, KCOLL_KNOB_COVER_TOKENS, KCOLL_KNOB_OTHER_NETNS,
	KCOLL_KNOB_DMABUF_WAIT, KCOLL_KNOB_USER_SAME_RANK,
	KCOLL_KNOB_AUTH_TIMEOUT, KCOLL_KNOB_BYE_WAIT, KCOLL_KNOB_BYE_MAX,
	KCOLL_KNOB_NR
};

static struct kcoll_knob kcoll_knobs[KCOLL_KNOB_NR] = {
	[KCOLL_KNOB_MAX_SQ] = { "max_sq_entries", 4096, 1,
				KCOLL_SQ_ENTRIES_LIMIT, true },
	[KCOLL_KNOB_MAX_CQ] = { "max_cq_entries", 8192, 1,
				KCOLL_CQ_ENTRIES_LIMIT, true },
	[KCOLL_KNOB_CHUNK] = { "chunk_bytes", 64 << 10, 4096, 4 << 20,
			       false },
	[KCOLL_KNOB_CONNECT_TIMEOUT] = { "connect_timeout_ms", 60000, 100,
					 KCOLL_CONNECT_TIMEOUT_MAX_MS, false },
	/* IB encoding: 4.096 us * 2^v; 18 (about 1 s) is rdma_cm's own. */
	[KCOLL_KNOB_ACK_TIMEOUT] = { "ack_timeout", 18, 8, 31, false },
	/* 1: the SQE priority orders chunks on a device; 0: FIFO. */
	[KCOLL_KNOB_PRIO_SCHED] = { "prio_sched", 1, 0, 1, false },
	[KCOLL_KNOB_PRIO_AGING] = { "prio_aging_ms", 50, 1, 60000, false },
	/* 0: operations never time out. 10 min is PyTorch's own default
	 * for its NCCL process groups. */
	[KCOLL_KNOB_OP_TIMEOUT] = { "op_timeout_ms", 600000, 0,
				    24 * 3600 * 1000, false },
	/* RC QPs a new communicator opens to each peer it connects to. */
	[KCOLL_KNOB_QPS_PER_PEER] = { "qps_per_peer", 1, 1,
				      KCOLL_QPS_PER_PEER_MAX, false },
	/* 1: data between ranks on one node is copied by the CPU. */
	[KCOLL_KNOB_INTRA_NODE] = { "intra_node", 1, 0, 1, false },
	/* 1: small collective transfers to other nodes need no grant. */
	[KCOLL_KNOB_EAGER] = { "eager", 1, 0, 1, false },
	/* 1: collectives whose every result depends on every rank carry
	 * their signature with the data instead of a SIG to each peer. */
	[KCOLL_KNOB_LAZY_SIGS] = { "lazy_sigs", 1, 0, 1, false },
	/* 1: small point-to-point sends on eager connections need no
	 * grant either. */
	[KCOLL_KNOB_EAGER_P2P] = { "eager_p2p", 1, 0, 1, false },
	/* The highest SQE priority a task without CAP_SYS_NICE may use:
	 * below the top, which stays for what the administrator trusts. */
	[KCOLL_KNOB_PRIO_MAX_UNPRIV] = { "prio_max_unpriv", 5, 0,
					 KCOLL_PRIO_MAX, false },
	/* Per user (kcoll_quota.c): -EDQUOT past them. A communicator
	 * charges a QP per peer and per QP of it when it is created. */
	[KCOLL_KNOB_USER_CONTEXTS] = { "user_max_contexts", 1024, 1,
				       1 << 20, false },
	[KCOLL_KNOB_USER_COMMS] = { "user_max_comms", 1024, 1, 1 << 20,
				    false },
	[KCOLL_KNOB_USER_REGS] = { "user_max_regs", 65536, 1, 1 << 24,
				   false },
	[KCOLL_KNOB_USER_QPS] = { "user_max_qps", 65536, 1, 1 << 24, false },
	/* Communicators of one user with the same uid and rank (their keys
	 * differ): the listener tries each one's key on a hello for them. */
	[KCOLL_KNOB_USER_SAME_RANK] = { "user_max_same_rank", 4, 1, 1024,
					false },
	/* Requests in flight, every file of the user's together. */
	[KCOLL_KNOB_USER_OPS] = { "user_max_ops", 65536, 1, 1 << 24, false },
	/* Staging, eager slots, scratch; 0 until load: a quarter of RAM. */
	[KCOLL_KNOB_USER_KERNEL_MB] = { "user_max_kernel_mb", 0, 1, 1 << 24,
					false },
	/* dma-buf bytes imported by REG_MEM and held (pinned by their
	 * exporter) per user: an exporter's memory is as scarce as pinned
	 * pages; 0 until load: a quarter of RAM (GPU memory is not RAM,
	 * but the administrator knows the GPUs; raise it). */
	[KCOLL_KNOB_USER_DMABUF_MB] = { "user_max_dmabuf_mb", 0, 1, 1 << 30,
					false },
	/* How often the doorbell page of a communicator is looked at while
	 * a stream-ordered operation waits for its GPU stream (and only
	 * then): the handoff latency of a GPU step against CPU time. */
	[KCOLL_KNOB_GPU_POLL_US] = { "gpu_poll_us", 20, 1, 100000, false },
	/* Plain buffers kept pinned and registered per communicator
	 * (kcoll_regcache.c); 0: none, every operation pins its own. */
	[KCOLL_KNOB_REG_CACHE_MB] = { "reg_cache_mb", 256, 0, 1 << 20, false },
	/* Collectives of one communicator that run at once, where their
	 * buffers do not overlap (docs/DESIGN.md, "Several collectives in
	 * flight"); 1: one at a time. */
	[KCOLL_KNOB_COLLS_IN_FLIGHT] = { "colls_in_flight", 4, 1,
					 KCOLL_COLLS_IN_FLIGHT_MAX, false },
	/* An alltoall's next phase while one runs: 0 nothing, 1 its
	 * receive granted, 2 its sends into those grants too (measured
	 * no faster here: docs/PERFORMANCE.md, "Sends ahead"). */
	[KCOLL_KNOB_PHASES_AHEAD] = { "phases_ahead", 1, 0, 2, false },
	/* How many phases ahead of the running one a collective's small
	 * (eager) transfers may go, where nothing before reads or writes
	 * their bytes (docs/DESIGN.md, "Eager transfers ahead"); 0: none. */
	[KCOLL_KNOB_EAGER_AHEAD] = { "eager_ahead",
				     KCOLL_SCHED_EARLY_DEFAULT, 0,
				     KCOLL_SCHED_EARLY_MAX, false },
	/* Broadcasts of one communicator that may have returned to their
	 * callers while their confirmation tokens are still on the way
	 * (docs/DESIGN.md, "Confirmations behind"); 0: a broadcast
	 * returns only once confirmed. */
	[KCOLL_KNOB_CONFIRM_BEHIND] = { "confirm_behind", 16, 0,
					KCOLL_CONFIRM_BEHIND_MAX, false },
	/* 1: a broadcast's confirmation token that would follow another
	 * still on the wire to the same peer waits for it, and the tokens
	 * that gathered go as one (docs/DESIGN.md, "Tokens that cover");
	 * new connections take it from here. */
	[KCOLL_KNOB_COVER_TOKENS] = { "cover_tokens", 1, 0, 1, false },
	/* 1: a task outside the initial network namespace may create
	 * communicators with peers, which reach them through the initial
	 * namespace's addresses and routes (docs/DESIGN.md, "Threat
	 * model"); 0: refused with -EPERM. */
	[KCOLL_KNOB_OTHER_NETNS] = { "other_netns", 0, 0, 1, false },
	/* How long REG_MEM of a dma-buf on the real-NIC path waits for the
	 * exporter's memory moves still running (its kernel fences) before
	 * it fails with -ETIMEDOUT: a GPU that hung never signals them. */
	[KCOLL_KNOB_DMABUF_WAIT] = { "dmabuf_wait_ms", 10000, 1, 600000,
				     false },
	/* How long an accepted connection may take to prove the key (its
	 * AUTH) before the accepting rank drops it and waits for its peer
	 * again: a replayed hello holds a rank's place no longer. Counted
	 * from the hello: a lost REP costs ib_cm about 4 s. */
	[KCOLL_KNOB_AUTH_TIMEOUT] = { "auth_timeout_ms", 15000, 1000, 600000,
				      false },
	/*
	 * A leaving communicator waits for its BYEs' acknowledgements
	 * while the connections owing them complete sends, until this long
	 * without one (a dead peer costs that much), ...
	 */
	[KCOLL_KNOB_BYE_WAIT] = { "bye_wait_ms", 500, 0, 30000, false },
	/*
	 * ... and this long in all: what a close, an abort or a revoke
	 * may wait for a slow link to carry its BYEs (0: not at all, and
	 * peers may read the leaving rank as lost).
	 */
	[KCOLL_KNOB_BYE_MAX] = { "bye_max_ms", 2000, 0, 30000, false },
};

u32 kcoll_user_max(enum kcoll_quota_kind kind)
{
	static const u8 knob[KCOLL_Q_NR] = {
		[KCOLL_Q_CONTEXTS] = KCOLL_KNOB_USER_CONTEXTS,
		[KCOLL_Q_COMMS] = KCOLL_KNOB_USER_COMMS,
		[KCOLL_Q_REGS] = KCOLL_KNOB_USER_REGS,
		[KCOLL_Q_QPS] = KCOLL_KNOB_USER_QPS,
		[KCOLL_Q_OPS] = KCOLL_KNOB_USER_OPS,
	};

	return READ_ONCE(kcoll_knobs[knob[kind]].val);
}

u32 kcoll_user_max_same_rank(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_USER_SAME_RANK].val);
}

u32 kcoll_user_max_kernel_mb(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_USER_KERNEL_MB].val);
}

u32 kcoll_user_max_dmabuf_mb(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_USER_DMABUF_MB].val);
}

u32 kcoll_dmabuf_wait_ms(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_DMABUF_WAIT].val);
}

u32 kcoll_auth_timeout_ms(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_AUTH_TIMEOUT].val);
}

u32 kcoll_bye_wait_ms(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_BYE_WAIT].val);
}

u32 kcoll_bye_max_ms(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_BYE_MAX].val);
}

u32 kcoll_gpu_poll_us(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_GPU_POLL_US].val);
}

u32 kcoll_colls_in_flight(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_COLLS_IN_FLIGHT].val);
}

u32 kcoll_phases_ahead(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_PHASES_AHEAD].val);
}

u32 kcoll_eager_ahead(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_EAGER_AHEAD].val);
}

u32 kcoll_confirm_behind(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_CONFIRM_BEHIND].val);
}

bool kcoll_cover_tokens(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_COVER_TOKENS].val);
}

bool kcoll_other_netns(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_OTHER_NETNS].val);
}

u32 kcoll_reg_cache_mb(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_REG_CACHE_MB].val);
}

/* Defaults that depend on the machine (unless set at load). */
void kcoll_knobs_init(void)
{
	u32 quarter = max_t(u32, 1, (totalram_pages() >> (20 - PAGE_SHIFT)) / 4);
	struct kcoll_knob *k = &kcoll_knobs[KCOLL_KNOB_USER_KERNEL_MB];

	if (!k->val)
		k->val = quarter;
	k = &kcoll_knobs[KCOLL_KNOB_USER_DMABUF_MB];
	if (!k->val)
		k->val = quarter;
}

u32 kcoll_prio_max_unpriv(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_PRIO_MAX_UNPRIV].val);
}

bool kcoll_lazy_sigs(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_LAZY_SIGS].val);
}

bool kcoll_eager_p2p(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_EAGER_P2P].val);
}

bool kcoll_eager(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_EAGER].val);
}

bool kcoll_intra_node(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_INTRA_NODE].val);
}

u32 kcoll_qps_per_peer(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_QPS_PER_PEER].val);
}

u32 kcoll_op_timeout_ms(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_OP_TIMEOUT].val);
}

bool kcoll_prio_sched(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_PRIO_SCHED].val);
}

u32 kcoll_prio_aging_ms(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_PRIO_AGING].val);
}

u32 kcoll_ack_timeout(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_ACK_TIMEOUT].val);
}

u32 kcoll_chunk_bytes(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_CHUNK].val);
}

u32 kcoll_connect_timeout_ms(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_CONNECT_TIMEOUT].val);
}

u32 kcoll_max_sq_entries(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_MAX_SQ].val);
}

u32 kcoll_max_cq_entries(void)
{
	return READ_ONCE(kcoll_knobs[KCOLL_KNOB_MAX_CQ].val);
}

static int kcoll_knob_parse(struct kcoll_knob *k, const char *buf)
{
	u32 v;
	int err;

	err = kstrtou32(buf, 0, &v);
	if (err)
		return err;
	if (v < k->min || v > k->max || (k->pow2 && !kcoll_is_pow2(v)))
		return -EINVAL;
	WRITE_ONCE(k->val, v);
	return 0;
}

static int kcoll_param_set(const char *val, const struct kernel_param *kp)
{
	return kcoll_knob_parse(kp->arg, val);
}

static int kcoll_param_get(char *buf, const struct kernel_param *kp)
{
	const struct kcoll_knob *k = kp->arg;

	return sysfs_emit(buf, "%u\n", READ_ONCE(k->val));
}

static const struct kernel_param_ops kcoll_param_ops = {
	.set = kcoll_param_set,
	.get = kcoll_param_get,
};

module_param_cb(max_sq_entries, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_MAX_SQ], 0644);
MODULE_PARM_DESC(max_sq_entries,
		 "Largest SQ a ring may have (power of two, 1..32768; default 4096)");
module_param_cb(max_cq_entries, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_MAX_CQ], 0644);
MODULE_PARM_DESC(max_cq_entries,
		 "Largest CQ a ring may have (power of two, 1..65536; default 8192)");
module_param_cb(chunk_bytes, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_CHUNK], 0644);
MODULE_PARM_DESC(chunk_bytes,
		 "Bytes per RDMA write and reduction step (4096..4194304; default 65536)");
module_param_cb(connect_timeout_ms, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_CONNECT_TIMEOUT], 0644);
module_param_cb(ack_timeout, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_ACK_TIMEOUT], 0644);
MODULE_PARM_DESC(ack_timeout,
		 "RC local ACK timeout of new connections, 4.096us * 2^v (8..31; default 18, about 1 s)");
module_param_cb(prio_sched, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_PRIO_SCHED], 0644);
MODULE_PARM_DESC(prio_sched,
		 "1: SQE priorities order the chunks of all operations on a device; 0: FIFO (default 1)");
module_param_cb(prio_aging_ms, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_PRIO_AGING], 0644);
MODULE_PARM_DESC(prio_aging_ms,
		 "A held-back lower-priority operation still sends one chunk this often (1..60000 ms; default 50)");
module_param_cb(op_timeout_ms, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_OP_TIMEOUT], 0644);
MODULE_PARM_DESC(op_timeout_ms,
		 "Default operation timeout when the SQE gives none (0: never; up to 86400000 ms; default 600000)");
module_param_cb(qps_per_peer, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_QPS_PER_PEER], 0644);
MODULE_PARM_DESC(qps_per_peer,
		 "RC QPs per peer of new communicators; chunks are spread over them (1..4; default 1)");
module_param_cb(intra_node, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_INTRA_NODE], 0644);
MODULE_PARM_DESC(intra_node,
		 "1: new connections between ranks on this node copy data with the CPU instead of the NIC; 0: through the NIC (default 1)");
module_param_cb(eager, &kcoll_param_ops, &kcoll_knobs[KCOLL_KNOB_EAGER],
		0644);
MODULE_PARM_DESC(eager,
		 "1: new connections send collective transfers of up to 8 KiB without waiting for a grant (both ends must agree); 0: always granted (default 1)");
module_param_cb(lazy_sigs, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_LAZY_SIGS], 0644);
MODULE_PARM_DESC(lazy_sigs,
		 "1: new eager connections check signatures on the data, and allreduce, allgather, reduce-scatter, alltoall and barrier send no per-peer SIG where both ends agree; 0: a SIG to every peer per collective (default 1)");
module_param_cb(eager_p2p, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_EAGER_P2P], 0644);
MODULE_PARM_DESC(eager_p2p,
		 "1: new eager connections also send point-to-point messages of up to 8 KiB without waiting for a grant (both ends must agree); 0: granted (default 1)");
module_param_cb(prio_max_unpriv, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_PRIO_MAX_UNPRIV], 0644);
MODULE_PARM_DESC(prio_max_unpriv,
		 "Highest SQE priority without CAP_SYS_NICE; above it an operation fails with -EPERM (0..7; default 5)");
module_param_cb(user_max_contexts, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_USER_CONTEXTS], 0644);
MODULE_PARM_DESC(user_max_contexts,
		 "Open files of /dev/kcoll per user; past it open() fails with -EDQUOT (default 1024)");
module_param_cb(user_max_comms, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_USER_COMMS], 0644);
MODULE_PARM_DESC(user_max_comms,
		 "Communicators per user; past it COMM_CREATE fails with -EDQUOT (default 1024)");
module_param_cb(user_max_same_rank, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_USER_SAME_RANK], 0644);
MODULE_PARM_DESC(user_max_same_rank,
		 "Communicators per user with the same uid and rank (different keys); past it COMM_CREATE fails with -EDQUOT (1..1024; default 4)");
module_param_cb(user_max_regs, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_USER_REGS], 0644);
MODULE_PARM_DESC(user_max_regs,
		 "REG_MEM registrations per user; past it -EDQUOT (default 65536)");
module_param_cb(user_max_qps, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_USER_QPS], 0644);
MODULE_PARM_DESC(user_max_qps,
		 "RC QPs per user (a communicator of n ranks charges (n - 1) x qps_per_peer); past it COMM_CREATE fails with -EDQUOT (default 65536)");
module_param_cb(user_max_ops, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_USER_OPS], 0644);
MODULE_PARM_DESC(user_max_ops,
		 "Requests in flight per user (submitted, CQE not yet posted); past it the SQE completes with -EDQUOT (default 65536)");
module_param_cb(user_max_kernel_mb, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_USER_KERNEL_MB], 0644);
MODULE_PARM_DESC(user_max_kernel_mb,
		 "Kernel memory per user for staging, eager slots and scratch, in MiB; past it -EDQUOT (default a quarter of RAM)");
module_param_cb(user_max_dmabuf_mb, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_USER_DMABUF_MB], 0644);
MODULE_PARM_DESC(user_max_dmabuf_mb,
		 "dma-buf memory (GPU memory) a user's registrations may hold imported, in MiB; past it REG_MEM fails with -EDQUOT (default a quarter of RAM)");
module_param_cb(gpu_poll_us, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_GPU_POLL_US], 0644);
MODULE_PARM_DESC(gpu_poll_us,
		 "While a stream-ordered GPU collective waits for its CUDA stream, look at the doorbell page every this many microseconds (1..100000; default 20)");
module_param_cb(dmabuf_wait_ms, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_DMABUF_WAIT], 0644);
MODULE_PARM_DESC(dmabuf_wait_ms,
		 "How long registering a dma-buf for a real NIC waits for its exporter's memory moves; past it -ETIMEDOUT (1..600000; default 10000)");
module_param_cb(auth_timeout_ms, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_AUTH_TIMEOUT], 0644);
MODULE_PARM_DESC(auth_timeout_ms,
		 "How long an accepted connection may take to prove the communicator's key before it is dropped and its rank waited for again (1000..600000; default 15000)");
module_param_cb(bye_wait_ms, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_BYE_WAIT], 0644);
MODULE_PARM_DESC(bye_wait_ms,
		 "A leaving communicator waits for its BYEs while its links complete sends, until this long without one (0..30000; default 500)");
module_param_cb(bye_max_ms, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_BYE_MAX], 0644);
MODULE_PARM_DESC(bye_max_ms,
		 "... and this long in all after its shutdown began (0..30000; default 2000)");
module_param_cb(reg_cache_mb, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_REG_CACHE_MB], 0644);
MODULE_PARM_DESC(reg_cache_mb,
		 "Plain buffers kept pinned and registered for the next operation on the same pages, per communicator, in MiB (0 disables; default 256)");
module_param_cb(colls_in_flight, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_COLLS_IN_FLIGHT], 0644);
MODULE_PARM_DESC(colls_in_flight,
		 "Collectives of one communicator running at once where their buffers do not overlap (1..16; 1: one at a time; default 4)");
module_param_cb(phases_ahead, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_PHASES_AHEAD], 0644);
MODULE_PARM_DESC(phases_ahead,
		 "An alltoall's next phase while one runs, through the NIC: 0 waits for it to open; 1 grants its receive; 2 also sends into the grants of its peer (default 1)");
module_param_cb(eager_ahead, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_EAGER_AHEAD], 0644);
MODULE_PARM_DESC(eager_ahead,
		 "How many phases ahead of the running one a collective's small (eager) transfers may be sent, where nothing before them touches their bytes (0..64; 0: none; default 16)");
module_param_cb(confirm_behind, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_CONFIRM_BEHIND], 0644);
MODULE_PARM_DESC(confirm_behind,
		 "Broadcasts per communicator that may have returned while their confirmation tokens are still on the way (0..64; 0: a broadcast returns once confirmed; default 16)");
module_param_cb(cover_tokens, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_COVER_TOKENS], 0644);
MODULE_PARM_DESC(cover_tokens,
		 "Send a broadcast's confirmation tokens that gather behind one still on the wire to the same peer as one (0..1; taken by new connections; default 1)");
module_param_cb(other_netns, &kcoll_param_ops,
		&kcoll_knobs[KCOLL_KNOB_OTHER_NETNS], 0644);
MODULE_PARM_DESC(other_netns,
		 "Let tasks outside the initial network namespace create communicators with peers, reached through the initial namespace (0..1; default 0: refused with -EPERM)");
MODULE_PARM_DESC(connect_timeout_ms,
		 "How long COMM_CREATE waits for every peer by default (100..3600000 ms; default 60000)");

/* ---------------------------------------------------------------- */
/* Device attributes                                                 */
/* ---------------------------------------------------------------- */

struct kcoll_knob_attr {
	struct device_attribute attr;
	struct kcoll_knob *knob;
};

static ssize_t kcoll_knob_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	struct kcoll_knob_attr *ka = container_of(attr, struct kcoll_knob_attr,
						  attr);

	return sysfs_emit(buf, "%u\n", READ_ONCE(ka->knob->val));
}

static ssize_t kcoll_knob_store(struct device *dev,
				struct device_attribute *attr,
				const char *buf, size_t count)
{
	struct kcoll_knob_attr *ka = container_of(attr, struct kcoll_knob_attr,
						  attr);
	int err = kcoll_knob_parse(ka->knob, buf);

	return err ? err : count;
}

#define KCOLL_KNOB_ATTR(_name, _idx)					\
	static struct kcoll_knob_attr kcoll_attr_##_name = {		\
		.attr = __ATTR(_name, 0644, kcoll_knob_show,		\
			       kcoll_knob_store),			\
		.knob = &kcoll_knobs[_idx],				\
	}

KCOLL_KNOB_ATTR(max_sq_entries, KCOLL_KNOB_MAX_SQ);
KCOLL_KNOB_ATTR(max_cq_entries, KCOLL_KNOB_MAX_CQ);
KCOLL_KNOB_ATTR(chunk_bytes, KCOLL_KNOB_CHUNK);
KCOLL_KNOB_ATTR(connect_timeout_ms, KCOLL_KNOB_CONNECT_TIMEOUT);
KCOLL_KNOB_ATTR(ack_timeout, KCOLL_KNOB_ACK_TIMEOUT);
KCOLL_KNOB_ATTR(prio_sched, KCOLL_KNOB_PRIO_SCHED);
KCOLL_KNOB_ATTR(prio_aging_ms, KCOLL_KNOB_PRIO_AGING);
KCOLL_KNOB_ATTR(op_timeout_ms, KCOLL_KNOB_OP_TIMEOUT);
KCOLL_KNOB_ATTR(qps_per_peer, KCOLL_KNOB_QPS_PER_PEER);
KCOLL_KNOB_ATTR(intra_node, KCOLL_KNOB_INTRA_NODE);
KCOLL_KNOB_ATTR(eager, KCOLL_KNOB_EAGER);
KCOLL_KNOB_ATTR(lazy_sigs, KCOLL_KNOB_LAZY_SIGS);
KCOLL_KNOB_ATTR(eager_p2p, KCOLL_KNOB_EAGER_P2P);
KCOLL_KNOB_ATTR(prio_max_unpriv, KCOLL_KNOB_PRIO_MAX_UNPRIV);
KCOLL_KNOB_ATTR(user_max_contexts, KCOLL_KNOB_USER_CONTEXTS);
KCOLL_KNOB_ATTR(user_max_comms, KCOLL_KNOB_USER_COMMS);
KCOLL_KNOB_ATTR(user_max_same_rank, KCOLL_KNOB_USER_SAME_RANK);
KCOLL_KNOB_ATTR(user_max_regs, KCOLL_KNOB_USER_REGS);
KCOLL_KNOB_ATTR(user_max_qps, KCOLL_KNOB_USER_QPS);
KCOLL_KNOB_ATTR(user_max_ops, KCOLL_KNOB_USER_OPS);
KCOLL_KNOB_ATTR(user_max_kernel_mb, KCOLL_KNOB_USER_KERNEL_MB);
KCOLL_KNOB_ATTR(user_max_dmabuf_mb, KCOLL_KNOB_USER_DMABUF_MB);
KCOLL_KNOB_ATTR(gpu_poll_us, KCOLL_KNOB_GPU_POLL_US);
KCOLL_KNOB_ATTR(dmabuf_wait_ms, KCOLL_KNOB_DMABUF_WAIT);
KCOLL_KNOB_ATTR(auth_timeout_ms, KCOLL_KNOB_AUTH_TIMEOUT);
KCOLL_KNOB_ATTR(bye_wait_ms, KCOLL_KNOB_BYE_WAIT);
KCOLL_KNOB_ATTR(bye_max_ms, KCOLL_KNOB_BYE_MAX);
KCOLL_KNOB_ATTR(reg_cache_mb, KCOLL_KNOB_REG_CACHE_MB);
KCOLL_KNOB_ATTR(colls_in_flight, KCOLL_KNOB_COLLS_IN_FLIGHT);
KCOLL_KNOB_ATTR(phases_ahead, KCOLL_KNOB_PHASES_AHEAD);
KCOLL_KNOB_ATTR(eager_ahead, KCOLL_KNOB_EAGER_AHEAD);
KCOLL_KNOB_ATTR(confirm_behind, KCOLL_KNOB_CONFIRM_BEHIND);
KCOLL_KNOB_ATTR(cover_tokens, KCOLL_KNOB_COVER_TOKENS);
KCOLL_KNOB_ATTR(other_netns, KCOLL_KNOB_OTHER_NETNS);

static ssize_t listen_port_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(kcoll_listen_port));
}

/* A new listener on the new port; the old one closes once it is up. */
static ssize_t listen_port_store(struct device *dev,
				 struct device_attribute *attr,
				 const char *buf, size_t count)
{
	unsigned int port;
	int err;

	err = kstrtouint(buf, 0, &port);
	if (err)
		return err;
	err = kcoll_listen_set_port(port);	/* checks the range */
	return err ? err : count;
}
static DEVICE_ATTR_RW(listen_port);

static ssize_t devices_show(struct device *dev,
			    struct device_attribute *attr, char *buf)
{
	return kcoll_ib_allow_show(buf);
}

static ssize_t devices_store(struct device *dev,
			     struct device_attribute *attr,
			     const char *buf, size_t count)
{
	int err = kcoll_ib_allow_store(buf, count);

	return err ? err : count;
}
static DEVICE_ATTR_RW(devices);

static ssize_t abi_version_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", KCOLL_ABI_VERSION);
}
static DEVICE_ATTR_RO(abi_version);

static ssize_t rdma_devices_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	return kcoll_ib_list(buf, PAGE_SIZE);
}
static DEVICE_ATTR_RO(rdma_devices);

static ssize_t reduce_impl_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", kcoll_reduce_impl_active());
}
static DEVICE_ATTR_RO(reduce_impl);

static struct attribute *kcoll_attrs[] = {
	&dev_attr_reduce_impl.attr,
	&kcoll_attr_max_sq_entries.attr.attr,
	&kcoll_attr_max_cq_entries.attr.attr,
	&kcoll_attr_chunk_bytes.attr.attr,
	&kcoll_attr_connect_timeout_ms.attr.attr,
	&kcoll_attr_ack_timeout.attr.attr,
	&kcoll_attr_prio_sched.attr.attr,
	&kcoll_attr_prio_aging_ms.attr.attr,
	&kcoll_attr_op_timeout_ms.attr.attr,
	&kcoll_attr_qps_per_peer.attr.attr,
	&kcoll_attr_intra_node.attr.attr,
	&kcoll_attr_eager.attr.attr,
	&kcoll_attr_lazy_sigs.attr.attr,
	&kcoll_attr_eager_p2p.attr.attr,
	&kcoll_attr_prio_max_unpriv.attr.attr,
	&kcoll_attr_user_max_contexts.attr.attr,
	&kcoll_attr_user_max_comms.attr.attr,
	&kcoll_attr_user_max_same_rank.attr.attr,
	&kcoll_attr_user_max_regs.attr.attr,
	&kcoll_attr_user_max_qps.attr.attr,
	&kcoll_attr_user_max_ops.attr.attr,
	&kcoll_attr_user_max_kernel_mb.attr.attr,
	&kcoll_attr_user_max_dmabuf_mb.attr.attr,
	&kcoll_attr_gpu_poll_us.attr.attr,
	&kcoll_attr_dmabuf_wait_ms.attr.attr,
	&kcoll_attr_auth_timeout_ms.attr.attr,
	&kcoll_attr_bye_wait_ms.attr.attr,
	&kcoll_attr_bye_max_ms.attr.attr,
	&kcoll_attr_reg_cache_mb.attr.attr,
	&kcoll_attr_colls_in_flight.attr.attr,
	&kcoll_attr_phases_ahead.attr.attr,
	&kcoll_attr_eager_ahead.attr.attr,
	&kcoll_attr_confirm_behind.attr.attr,
	&kcoll_attr_cover_tokens.attr.attr,
	&kcoll_attr_other_netns.attr.attr,
	&dev_attr_listen_port.attr,
	&dev_attr_devices.attr,
	&dev_attr_abi_version.attr,
	&dev_attr_rdma_devices.attr,
	NULL,
};

static const struct attribute_group kcoll_group = {
	.attrs = kcoll_attrs,
};

const struct attribute_group *kcoll_attr_groups[] = {
	&kcoll_group,
	&kcoll_stats_group,
	&kcoll_algo_group,
	&kcoll_algo_ops_group,
	NULL,
};
