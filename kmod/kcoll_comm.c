// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll communicators: KCOLL_IOC_COMM_CREATE / COMM_DESTROY / COMM_ABORT /
 * COMM_REPORT, the global list the rdma_cm listener searches, and device
 * removal. Registrations are in kcoll_reg.c, debugfs in kcoll_debugfs.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <crypto/algapi.h>
#include <linux/in.h>
#include <linux/log2.h>
#include <linux/moduleparam.h>
#include <linux/nsproxy.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <net/net_namespace.h>

#include "kcoll.h"
#include "kcoll_dmabuf.h"
#include "kcoll_gpu.h"
#include "kcoll_types.h"
#include "kcoll_regcache.h"
#include "kcoll_comm.h"
#include "kcoll_mem.h"
#include "kcoll_reg.h"
#include "kcoll_auth.h"
#include "kcoll_local.h"
#include "kcoll_coll.h"
#include "kcoll_conn.h"
#include "kcoll_sysfs.h"
#include "kcoll_engine.h"
#include "kcoll_nl.h"
#include "kcoll_tune.h"
#include "kcoll_ib.h"
#include "kcoll_quota.h"
#include "kcoll_cost.h"

unsigned int kcoll_listen_port = 18515;
module_param_named(listen_port, kcoll_listen_port, uint, 0444);
MODULE_PARM_DESC(listen_port,
		 "rdma_cm port kcoll listens on, on every RDMA device, at load (default 18515; sysfs listen_port moves it)");

static LIST_HEAD(kcoll_comms);
static DEFINE_MUTEX(kcoll_comms_lock);
/* Every comm from creation to free (device removal); a spinlock, since
 * the last kcoll_comm_put() may come from anywhere. */
static LIST_HEAD(kcoll_comms_all);
static DEFINE_SPINLOCK(kcoll_comms_all_lock);
static atomic_t kcoll_comm_gids = ATOMIC_INIT(0);

/* ------------------------------------------------------------------ */
/* Lifetime                                                             */
/* ------------------------------------------------------------------ */

static void kcoll_comm_free(struct kref *ref)
{
	struct kcoll_comm *comm = container_of(ref, struct kcoll_comm, ref);
	u32 i;

	spin_lock(&kcoll_comms_all_lock);
	list_del(&comm->all_node);
	spin_unlock(&kcoll_comms_all_lock);
	if (comm->conns) {
		for (i = 0; i < comm->nranks; i++)
			if (comm->conns[i])
				kcoll_conn_free(comm->conns[i]);
		kvfree(comm->conns);
	}
	kvfree(comm->ranks);
	/* Destroyed before its last reference goes, so unpinned already. */
	WARN_ON_ONCE(comm->gpu);
	kfree(comm->report.missing);
	mutex_destroy(&comm->lock);
	kcoll_auth_free(comm);
	mem_cgroup_put(comm->memcg);
	put_pid(comm->pid);
	if (comm->quota) {
		kcoll_quota_uncharge(comm->quota, KCOLL_Q_QPS, comm->quota_qps);
		kcoll_quota_uncharge(comm->quota, KCOLL_Q_COMMS, 1);
		kcoll_quota_put(comm->quota);
	}
	kfree(comm);
}

void kcoll_comm_put(struct kcoll_comm *comm)
{
	kref_put(&comm->ref, kcoll_comm_free);
}

/*
 * The listener's lookup: a referenced comm that hello @h is for (its uid
 * and rank) and that can check its MAC (its key), or NULL; *@other says
 * whether one of that uid and rank is listed whose key does not. Comms of
 * the same uid and rank but different keys coexist: a local user who saw
 * a uid cannot squat another user's rank with a key of its own.
 */
struct kcoll_comm *kcoll_comm_find_hello(const struct kcoll_wire_hello *h,
					 bool *other)
{
	u64 uid = le64_to_cpu(h->uid);
	u32 rank = le32_to_cpu(h->dst_rank);
	struct kcoll_comm *comm, *found = NULL;

	*other = false;
	mutex_lock(&kcoll_comms_lock);
	list_for_each_entry(comm, &kcoll_comms, node) {
		if (comm->uid != uid || comm->rank != rank)
			continue;
		if (!kcoll_auth_hello_ok(comm, h)) {
			*other = true;
			continue;
		}
		kref_get(&comm->ref);
		found = comm;
		break;
	}
	mutex_unlock(&kcoll_comms_lock);
	return found;
}

/*
 * Does hello @h to @comm come from this module: the connecting rank's
 * communicator (same uid and key) is here, and its connection to us is
 * being set up with that very hello's nonce? The listener's check of a
 * hello that offers the intra-node path. The nonce is random and a hello
 * between two ranks of one node never leaves it, so a peer elsewhere,
 * even with the key, cannot claim to be a local rank.
 */
bool kcoll_comm_hello_is_ours(struct kcoll_comm *comm,
			      const struct kcoll_wire_hello *h)
{
	u32 src = le32_to_cpu(h->src_rank);
	struct kcoll_comm *c, *peer = NULL;
	struct kcoll_conn *conn;
	bool ours = false;

	mutex_lock(&kcoll_comms_lock);
	list_for_each_entry(c, &kcoll_comms, node) {
		if (c->uid == comm->uid && c->rank == src &&
		    !crypto_memneq(c->key, comm->key, KCOLL_KEY_LEN)) {
			kref_get(&c->ref);
			peer = c;
			break;
		}
	}
	mutex_unlock(&kcoll_comms_lock);
	if (!peer)
		return false;
	mutex_lock(&peer->lock);
	conn = comm->rank < peer->nranks ? peer->conns[comm->rank] : NULL;
	if (conn && conn->active && conn->local_offer &&
	    conn->state == KCOLL_CONN_CONNECTING &&
	    !crypto_memneq(conn->lane[0].nonce_hello, h->nonce,
			   KCOLL_AUTH_NONCE))
		ours = true;
	mutex_unlock(&peer->lock);
	kcoll_comm_put(peer);
	return ours;
}

static void kcoll_comm_unlist(struct kcoll_comm *comm)
{
	mutex_lock(&kcoll_comms_lock);
	if (comm->listed)
		list_del(&comm->node);
	comm->listed = false;
	mutex_unlock(&kcoll_comms_lock);
}

/*
 * Wait on comm->wait until @done(@comm, @arg) holds, for at most @timeout
 * jiffies (MAX_SCHEDULE_TIMEOUT: no limit); if @killable, until the task
 * is killed at most, freezable (nothing is held while it sleeps) and not
 * counted as load.
 * @done may sleep (it takes comm->lock): it runs with the task running,
 * which wait_event()'s conditions do not (DEBUG_ATOMIC_SLEEP reported
 * it), and a wake-up between it and the sleep is not lost (wait_woken()).
 * Returns the jiffies left (at least 1) once @done, 0 on timeout, -EINTR
 * if killed.
 */
static long kcoll_comm_wait(struct kcoll_comm *comm,
			    bool (*done)(struct kcoll_comm *comm, void *arg),
			    void *arg, long timeout, bool killable)
{
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	long left = timeout;

	add_wait_queue(&comm->wait, &wait);
	for (;;) {
		if (done(comm, arg)) {
			left = max(left, 1L);
			break;
		}
		if (!left)
			break;
		if (killable && fatal_signal_pending(current)) {
			left = -EINTR;
			break;
		}
		/* Waiting for the network, as a connect() would: not load. */
		left = wait_woken(&wait, killable ?
					 TASK_KILLABLE | TASK_NOLOAD |
					 TASK_FREEZABLE :
					 TASK_UNINTERRUPTIBLE, left);
	}
	remove_wait_queue(&comm->wait, &wait);
	return left;
}

static bool kcoll_comm_is_shut(struct kcoll_comm *comm, void *unused)
{
	bool shut;

	mutex_lock(&comm->lock);
	shut = comm->shut;
	mutex_unlock(&comm->lock);
	return shut;
}

/*
 * How long a destroy waits for the confirmation tokens of broadcasts that
 * returned before them (kcoll_comm_confirmed()).
 */
#define KCOLL_LINGER_MS		5000

/*
 * Nothing has returned to the caller unconfirmed (docs/DESIGN.md,
 * "Confirmations behind"), or it never will be: the comm failed.
 */
static bool kcoll_comm_confirmed(struct kcoll_comm *comm, void *unused)
{
	bool done;

	/* Not comm->error: a peer that completed and said BYE sets it, and
	 * what needs a lost peer fails (and completes) by itself. */
	mutex_lock(&comm->lock);
	done = !comm->nr_returned || comm->shutting_down;
	mutex_unlock(&comm->lock);
	return done;
}

/*
 * A broadcast that returned before its confirmation tokens were in still
 * owes its peers its own token: leaving first would fail theirs (our BYE
 * would say we did not complete it). So a destroy waits for that, until
 * @deadline (jiffies) at most: its peers' loss or its own deadline ends
 * such a broadcast sooner. @killable for a caller that may stop waiting
 * (COMM_DESTROY: the destroy goes on without it); a file's release waits
 * out its bound.
 */
static void kcoll_comm_linger(struct kcoll_comm *comm, unsigned long deadline,
			      bool killable)
{
	long left = (long)(deadline - jiffies);

	if (left > 0)
		kcoll_comm_wait(comm, kcoll_comm_confirmed, NULL, left,
				killable);
}

/*
 * Until when the BYEs are worth waiting for (@until, jiffies): the last
 * send completion of any connection still owing its acknowledgment (or
 * the shutdown's start, if later) plus sysfs bye_wait_ms (500), at most
 * bye_max_ms (2000) after that start. False when none owes one (every send
 * posted on a live connection has completed). A slow link still
 * carries the BYE behind the writes queued ahead of it (a revoke's BYE
 * that never arrives reads as a lost peer there); a dead one completes
 * nothing, and is not waited for longer than before.
 */
static bool kcoll_comm_bye_until(struct kcoll_comm *comm,
				 unsigned long *until)
{
	unsigned long at, cap = comm->bye_since +
				msecs_to_jiffies(kcoll_bye_max_ms());
	unsigned long window = msecs_to_jiffies(kcoll_bye_wait_ms());
	bool owed = false;
	u32 i, l;

	mutex_lock(&comm->lock);
	for (i = 0; i < comm->nranks; i++) {
		struct kcoll_conn *conn = comm->conns[i];

		if (!conn || conn->state != KCOLL_CONN_UP || !conn->sq_posted)
			continue;
		at = comm->bye_since;
		for (l = 0; l < conn->nlanes; l++)
			if (time_in_range(conn->lane[l].sent_at, at, jiffies))
				at = conn->lane[l].sent_at;
		at += window;
		if (!owed || time_after(at, *until))
			*until = at;
		owed = true;
	}
	if (owed && time_after(*until, cap))
		*until = cap;
	mutex_unlock(&comm->lock);
	return owed;
}

/* The wait's condition: no BYE (nor anything before it) is owed. */
static bool kcoll_comm_sends_done(struct kcoll_comm *comm, void *unused)
{
	unsigned long until;

	return !kcoll_comm_bye_until(comm, &until);
}

static bool kcoll_comm_cm_idle(struct kcoll_comm *comm, void *unused)
{
	bool idle;

	mutex_lock(&comm->lock);
	idle = !comm->cm_busy;
	mutex_unlock(&comm->lock);
	return idle;
}

/*
 * The first half of a shutdown: every peer still connected is told, every
 * operation fails with @err, and nothing new starts. It does not wait:
 * kcoll_comm_shutdown_finish() does (kcoll_comm_bye_until(): at most
 * bye_max_ms after this), so that a file closing many communicators
 * begins them all and waits once (kcoll_ctx_comms_release()). Idempotent.
 * Must not hold comm->lock.
 */
static void kcoll_comm_shutdown_begin(struct kcoll_comm *comm, int err)
{
	u32 i;

	mutex_lock(&comm->lock);
	if (comm->shutting_down) {
		mutex_unlock(&comm->lock);
		return;
	}
	/*
	 * Every peer still connected gets a BYE, healthy comm or not: it
	 * closes its connection at once instead of waiting for a disconnect
	 * that may not come, and a peer still finishing a collective with us
	 * knows we have it (kcoll_conn_send_bye()). It goes before the
	 * ABORTs of what is in flight, so those are never needed; one that
	 * meets a full send queue goes with its next completion, and no
	 * ABORT goes there before it (kcoll_op_send_abort()).
	 */
	comm->byes_begun = true;
	for (i = 0; i < comm->nranks; i++)
		if (comm->conns[i])
			kcoll_conn_send_bye(comm->conns[i]);
	if (!comm->error)
		comm->error = err;
	kcoll_engine_fail_all(comm, err);
	/* Handlers check this first and then do nothing. */
	WRITE_ONCE(comm->shutting_down, true);
	comm->shut_owed = true;
	comm->shut_err = err;
	comm->bye_since = jiffies;
	mutex_unlock(&comm->lock);
	/* A COMM_CREATE waiting for connections sees the error now. */
	wake_up_all(&comm->wait);
}

/*
 * The second half: once the BYEs are acknowledged (or their deadline
 * passed), tear down every connection (drained: no completion will
 * follow) and complete the operations. The first caller after
 * kcoll_comm_shutdown_begin() does it; any other waits until it is over,
 * as every caller may free what the ops used once this returns. Must not
 * hold comm->lock.
 */
static void kcoll_comm_shutdown_finish(struct kcoll_comm *comm)
{
	unsigned long until = 0;
	long left;
	int err;
	u32 i;

	mutex_lock(&comm->lock);
	if (!comm->shut_owed) {
		mutex_unlock(&comm->lock);
		/* Another caller (abort, device removal) is at it. */
		kcoll_comm_wait(comm, kcoll_comm_is_shut, NULL,
				MAX_SCHEDULE_TIMEOUT, false);
		return;
	}
	comm->shut_owed = false;
	err = comm->shut_err;
	mutex_unlock(&comm->lock);
	/*
	 * Woken when a connection's last send completes; each timeout looks
	 * again whether sends still complete.
	 */
	while (kcoll_comm_bye_until(comm, &until)) {
		left = (long)(until - jiffies);
		if (left <= 0)
			break;
		kcoll_comm_wait(comm, kcoll_comm_sends_done, NULL, left,
				false);
	}
	kcoll_comm_wait(comm, kcoll_comm_cm_idle, NULL, MAX_SCHEDULE_TIMEOUT,
			false);

	for (i = 0; i < comm->nranks; i++)
		if (comm->conns[i])
			kcoll_conn_shutdown(comm->conns[i]);

	mutex_lock(&comm->lock);
	for (i = 0; i < comm->nranks; i++)
		if (comm->conns[i])
			kcoll_conn_kill(comm->conns[i], err);
	kcoll_engine_force_reap(comm);
	mutex_unlock(&comm->lock);
	/* Every stream waiting on the doorbell page goes on. */
	kcoll_gpu_shutdown(comm);
	/* No op is left to queue them again. */
	cancel_delayed_work_sync(&comm->kick);
	cancel_delayed_work_sync(&comm->timeout_work);
	mutex_lock(&comm->lock);
	comm->shut = true;
	mutex_unlock(&comm->lock);
	wake_up_all(&comm->wait);
}

/*
 * Stop everything: fail the operations (peers are told), tear down every
 * connection and complete the operations with @err (the first shutdown's
 * error, if one began already). Idempotent; when it returns the
 * shutdown is over, whoever ran it. Must not hold comm->lock.
 */
static void kcoll_comm_shutdown(struct kcoll_comm *comm, int err)
{
	kcoll_comm_shutdown_begin(comm, err);
	kcoll_comm_shutdown_finish(comm);
}

/* A peer's revoke: the log line and the event (once per comm). */
static void kcoll_comm_revoke_report(struct kcoll_comm *comm)
{
	pr_info_ratelimited("comm %llx rank %u/%u revoked by rank %u, %u operation(s) cancelled\n",
			    comm->uid, comm->rank, comm->nranks, comm->revoker,
			    comm->revoke_nops);
	kcoll_nl_comm_event(comm, KCOLL_CMD_EV_COMM_ABORTED,
			    comm->revoke_nops);
}

/*
 * A peer's revoke, from a worker: the shutdown our own abort runs. Its
 * BYEs pass the revoke on; the connections close without waiting for
 * writes to ranks that are gone (their QPs are flushed).
 */
static void kcoll_comm_revoke_work(struct work_struct *w)
{
	struct kcoll_comm *comm = container_of(w, struct kcoll_comm,
					       revoke_work);

	kcoll_comm_unlist(comm);
	kcoll_comm_shutdown(comm, -ECANCELED);
	kcoll_comm_revoke_report(comm);
	kcoll_comm_put(comm);
}

/*
 * Rank @revoker revoked @comm (a peer's BYE says so, first-hand or passed
 * on): every operation fails now with -ECANCELED naming it, the peers
 * hear of it before any ABORT (so they fail alike), and the rest of our
 * own abort runs from a worker. Nothing after the first revoke, during
 * our own abort or once shutting down. Must hold comm->lock.
 */
void kcoll_comm_peer_revoked(struct kcoll_comm *comm, u32 revoker)
{
	struct kcoll_task *op;
	u32 i;

	lockdep_assert_held(&comm->lock);
	/* Ours came first (an abort in progress, or a revoke passed on). */
	if (comm->revoked || comm->aborted || comm->shutting_down)
		return;
	comm->revoked = true;
	comm->revoked_first = !comm->error;
	comm->revoker = revoker;
	comm->revoke_nops = comm->nr_ops;
	/* As our own abort: later work fails -ECANCELED, a later
	 * KCOLL_IOC_COMM_ABORT reports nothing twice. */
	comm->aborted = true;
	comm->byes_begun = true;
	for (i = 0; i < comm->nranks; i++)
		if (comm->conns[i])
			kcoll_conn_send_bye(comm->conns[i]);
	/* A peer that left with its BYE left the comm usable for what it
	 * completed: not once revoked. Whom a loss named stays (lost_rank:
	 * the reports of what it failed). */
	if (!comm->error || comm->error == -ECONNRESET)
		comm->error = -ECANCELED;
	/* An earlier failure's report stays: it says more (who died). */
	if (!comm->report.error) {
		comm->report.error = -ECANCELED;
		comm->report.reason = KCOLL_REPORT_ABORTED;
		comm->report.peer = revoker;
		comm->report.seq = comm->coll_seq;
	}
	list_for_each_entry(op, &comm->ops, all)
		kcoll_op_fail_from(op, -ECANCELED, revoker);
	kref_get(&comm->ref);
	/*
	 * Its shutdown waits for BYEs and rdma_cm's handlers: not on the
	 * workqueue that runs every user's timeouts and kicks.
	 */
	kcoll_queue_slow(&comm->revoke_work);
}

/* No revoke work runs or will for @comm: it was shut down (none is
 * queued afterwards). One that never ran still says what happened. */
static void kcoll_comm_revoke_flush(struct kcoll_comm *comm)
{
	if (!cancel_work_sync(&comm->revoke_work))
		return;
	kcoll_comm_revoke_report(comm);
	kcoll_comm_put(comm);
}

/*
 * Wait until nobody registers memory on @comm's device any more: those
 * that did saw comm->error (set before this is called) or finished
 * queueing their op. Must not hold comm->lock.
 */
static void kcoll_comm_registrations_drain(struct kcoll_comm *comm)
{
	down_write(&comm->dev_sem);
	up_write(&comm->dev_sem);
}

/*
 * Destroy @comm: it leaves the file (already erased from ctx->comms by the
 * caller), its registrations are released, its ops cancelled.
 * Must hold ctx->comm_lock.
 */
static void kcoll_comm_destroy(struct kcoll_ctx *ctx, struct kcoll_comm *comm)
{
	struct kcoll_mem *mem, *tmp;

	lockdep_assert_held(&ctx->comm_lock);
	kcoll_comm_unlist(comm);
	kcoll_comm_shutdown(comm, -ECANCELED);
	kcoll_comm_revoke_flush(comm);
	/*
	 * Queued ops are all completed now, but a submission may still be
	 * between its checks and its queueing, holding a registration (it
	 * will find comm->error and let go): wait for it. Its use of the
	 * registration is counted anyway, so whichever put is last frees.
	 */
	kcoll_comm_registrations_drain(comm);
	kcoll_gpu_destroy(comm);
	kcoll_nl_comm_event(comm, KCOLL_CMD_EV_COMM_DESTROYED, 0);
	/*
	 * The registrations go with no device removal in between: one that
	 * began already deregistered their MRs, one that comes later finds
	 * none. Never off the lists and still holding MRs while the device
	 * goes (its PD would be freed under them).
	 */
	down_read(&comm->dev_sem);
	list_for_each_entry_safe(mem, tmp, &comm->mems, node) {
		mutex_lock(&comm->lock);
		list_del(&mem->node);
		mutex_unlock(&comm->lock);
		xa_erase(&ctx->mems, mem->handle);
		kcoll_mem_put(mem);
	}
	kcoll_cache_flush(comm);
	up_read(&comm->dev_sem);
	kcoll_comm_put(comm);
}

/* ------------------------------------------------------------------ */
/* Create / destroy                                                     */
/* ------------------------------------------------------------------ */

/*
 * The bound id's only event: its device going away while we look at it
 * (rdma_cm calls every id's handler on removal; a NULL one was called,
 * an oops). We destroy the id ourselves, right after: 0 says so. The
 * removal itself we see through kcoll_ib_pd().
 */
static int kcoll_comm_bind_event(struct rdma_cm_id *id,
				 struct rdma_cm_event *ev)
{
	return 0;
}

/* Bind to our own address to learn which RDMA device serves it. */
static int kcoll_comm_bind_device(struct kcoll_comm *comm)
{
	struct rdma_cm_id *id;
	struct ib_pd *pd;
	u32 pages;
	int err;

	id = rdma_create_id(&init_net, kcoll_comm_bind_event, NULL,
			    RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	err = rdma_bind_addr(id, (struct sockaddr *)&comm->self_addr);
	if (err)
		goto out_destroy;
	if (!id->device) {
		err = -ENODEV;		/* not an RDMA interface's address */
		goto out_destroy;
	}
	if (!kcoll_ib_enabled(id->device)) {
		pr_warn_ratelimited("comm %llx rank %u: %s, the device of our address, is not in the devices tunable\n",
				    comm->uid, comm->rank,
				    dev_name(&id->device->dev));
		err = -ENXIO;
		goto out_destroy;
	}
	if (!(id->device->attrs.device_cap_flags &
	      IB_DEVICE_MEM_MGT_EXTENSIONS)) {
		err = -EOPNOTSUPP;	/* no fast registration */
		goto out_destroy;
	}
	pages = min_t(u32, id->device->attrs.max_fast_reg_page_list_len, 512);
	if (!pages) {
		err = -EOPNOTSUPP;
		goto out_destroy;
	}
	/*
	 * Bind under kcoll_comms_all_lock, against device removal's
	 * kcoll_ib_set_gone(): either we bind before removal looks for the
	 * device's communicators, and it finds us, or we see it gone. (The
	 * device's removal can have begun while rdma_cm still resolves our
	 * address to it.)
	 */
	spin_lock(&kcoll_comms_all_lock);
	pd = kcoll_ib_pd(id->device);
	if (pd) {
		WRITE_ONCE(comm->ibdev, id->device);
		comm->pd = pd;
		comm->prio = kcoll_ib_prio(id->device);
		comm->dstats = kcoll_ib_stats(id->device);
	}
	spin_unlock(&kcoll_comms_all_lock);
	if (!pd) {
		err = -ENODEV;
		goto out_destroy;
	}
	comm->seg_pages = rounddown_pow_of_two(pages);

out_destroy:
	rdma_destroy_id(id);
	return err;
}

/*
 * Ranks per node if the rank table places them in equal blocks (ranks
 * 0..k-1 on one node, k..2k-1 on the next, ...), else 1. Every rank has the
 * same table, so every rank gets the same answer (the cost model's
 * node_ranks).
 */
static u32 kcoll_node_ranks(const struct kcoll_rank_addr *r, u32 n)
{
	u32 k = 1, i;

	while (k < n && !memcmp(r[k].addr, r[0].addr, sizeof(r->addr)))
		k++;
	if (k == 1 || n % k)
		return 1;
	for (i = 0; i < n; i++) {
		const struct kcoll_rank_addr *head = &r[i - i % k];

		if (memcmp(r[i].addr, head->addr, sizeof(r->addr)))
			return 1;
		/* A new block is a new node. */
		if (i % k == 0 && i &&
		    !memcmp(head->addr, r[i - k].addr, sizeof(r->addr)))
			return 1;
	}
	return k;
}

static bool kcoll_comm_connected(struct kcoll_comm *comm, void *arg)
{
	int *err = arg;
	bool done;

	u32 i;

	mutex_lock(&comm->lock);
	/*
	 * A peer revoked it, its COMM_CREATE having returned before ours:
	 * created all the same, and revoked, as if the revoke had come a
	 * moment later (its operations fail with -ECANCELED, its report
	 * names the revoker). Until 2026-12-07 COMM_CREATE failed with
	 * -ECANCELED and no handle: its rank could not ask for the report,
	 * nor tell a revoke from a failure of its own. A failure that came
	 * first (a setup refused here, a peer lost) is still its error.
	 */
	*err = comm->revoked && comm->revoked_first ? 0 : comm->error;
	done = *err || comm->revoked || comm->nr_up == comm->nranks - 1;
	if (done && !*err) {
		/* Which peers are reached through the NIC: fixed now. */
		comm->remote_peers = 0;
		for (i = 0; i < comm->nranks; i++)
			if (comm->conns[i] && !comm->conns[i]->local)
				comm->remote_peers++;
	}
	mutex_unlock(&comm->lock);
	return done;
}

/*
 * COMM_CREATE ran out of time: name the ranks not reached, and return
 * -ETIMEDOUT, or this node's own reason if its last refusal of a
 * connection that never got through was for want of room here (-EDQUOT
 * past a user limit, -ENOMEM past the memory cgroup's, or whatever else
 * setting up its QP failed with, or why the last attempt that reached
 * it failed before proving the key: -EACCES, -ECONNRESET, -ETIMEDOUT),
 * or -EADDRINUSE if the peer refused us as a duplicate (another attempt
 * as our rank held our place there), or -ESTALE if it refused our hellos
 * as older than one it saw from us (our clock went back, or a hello of
 * ours stamped ahead was replayed): a user who hit a limit must read the
 * limit, not a network fault.
 */
static int kcoll_comm_create_timed_out(struct kcoll_comm *comm)
{
	struct kcoll_conn *conn;
	int err = -ETIMEDOUT;
	u32 i;

	mutex_lock(&comm->lock);
	for (i = 0; i < comm->nranks; i++) {
		conn = comm->conns[i];
		if (!conn || conn->state == KCOLL_CONN_UP)
			continue;
		if (conn->setup_err) {
			pr_warn_ratelimited("comm %llx rank %u: no connection to rank %u: setting it up failed here (%pe)\n",
					    comm->uid, comm->rank, i,
					    ERR_PTR(conn->setup_err));
			if (err == -ETIMEDOUT)
				err = conn->setup_err;
		} else if (conn->peer_dup) {
			/* Our place there stayed taken to the end. */
			pr_warn_ratelimited("comm %llx rank %u: no connection to rank %u: another attempt as our rank, never proven, held our place there (a replayed hello?)\n",
					    comm->uid, comm->rank, i);
			if (err == -ETIMEDOUT)
				err = -EADDRINUSE;
		} else if (conn->peer_stale) {
			pr_warn_ratelimited("comm %llx rank %u: no connection to rank %u: it refused our hellos as no newer than one it saw from us (this node's clock behind a predecessor's of this rank, or went back?)\n",
					    comm->uid, comm->rank, i);
			if (err == -ETIMEDOUT)
				err = -ESTALE;
		} else {
			pr_warn_ratelimited("comm %llx rank %u: no connection to rank %u%s\n",
					    comm->uid, comm->rank, i,
					    conn->peer_no_room ?
					    " (it refused us for want of room)" : "");
		}
	}
	mutex_unlock(&comm->lock);
	return err;
}

int kcoll_comm_create_ioctl(struct kcoll_ctx *ctx, void __user *uarg)
{
	struct kcoll_comm_create p;
	struct kcoll_comm *comm;
	long left;
	u32 i, id, qps, lanes;
	int err;

	/* The ABI: parent_uid took resv[0]'s place, nothing moved. */
	BUILD_BUG_ON(sizeof(p) != 88 ||
		     offsetof(struct kcoll_comm_create, parent_uid) != 56);
	if (copy_from_user(&p, uarg, sizeof(p)))
		return -EFAULT;
	if ((p.flags & ~KCOLL_COMM_FLAGS) || p.resv0 ||
	    !kcoll_all_zero(p.resv, sizeof(p.resv)) || p.comm_id)
		return -EINVAL;
	if (!p.uid || !p.nranks || p.nranks > KCOLL_MAX_RANKS ||
	    p.rank >= p.nranks || p.parent_uid == p.uid)
		return -EINVAL;
	/* A key of zeros is no secret (a forgotten initialisation). */
	if (kcoll_all_zero(p.key, sizeof(p.key)))
		return -EINVAL;
	/*
	 * Peers are reached through the initial network namespace (the
	 * listener's and every rdma_cm id's): a task in another one would
	 * reach past its own namespace's addresses, routes and filters.
	 */
	if (p.nranks > 1 && current->nsproxy->net_ns != &init_net &&
	    !kcoll_other_netns()) {
		pr_info_ratelimited("pid %d: communicator with peers refused: not in the initial network namespace (sysfs other_netns)\n",
				    task_tgid_nr(current));
		return -EPERM;
	}

	comm = kzalloc(sizeof(*comm), GFP_KERNEL_ACCOUNT);
	if (!comm)
		return -ENOMEM;
	kref_init(&comm->ref);
	mutex_init(&comm->lock);
	init_rwsem(&comm->dev_sem);
	spin_lock(&kcoll_comms_all_lock);
	list_add_tail(&comm->all_node, &kcoll_comms_all);
	spin_unlock(&kcoll_comms_all_lock);
	INIT_DELAYED_WORK(&comm->kick, kcoll_engine_kick_work);
	INIT_DELAYED_WORK(&comm->timeout_work, kcoll_engine_timeout_work);
	INIT_WORK(&comm->revoke_work, kcoll_comm_revoke_work);
	comm->gid = atomic_inc_return(&kcoll_comm_gids) ?:
		    atomic_inc_return(&kcoll_comm_gids);
	comm->pid = get_task_pid(current, PIDTYPE_TGID);
	comm->owner = current_uid();
	comm->report.peer = ~0U;
	init_waitqueue_head(&comm->wait);
	INIT_LIST_HEAD(&comm->colls);
	INIT_LIST_HEAD(&comm->ops);
	INIT_LIST_HEAD(&comm->mems);
	INIT_LIST_HEAD(&comm->cache);
	comm->ctx = ctx;
	/*
	 * The user's limits: one communicator, and a QP per peer and per QP
	 * of it (the mesh it will connect), charged now rather than as the
	 * connections come and go. Its kernel buffers charge ctx->quota as
	 * they are allocated.
	 */
	lanes = kcoll_qps_per_peer();	/* read once: charged and used */
	qps = (p.nranks - 1) * lanes;
	err = kcoll_quota_charge(ctx->quota, KCOLL_Q_COMMS, 1);
	if (err)
		goto out_put;
	err = kcoll_quota_charge(ctx->quota, KCOLL_Q_QPS, qps);
	if (err) {
		kcoll_quota_uncharge(ctx->quota, KCOLL_Q_COMMS, 1);
		goto out_put;
	}
	comm->quota = kcoll_quota_ref(ctx->quota);
	comm->quota_qps = qps;
	comm->memcg = get_mem_cgroup_from_mm(current->mm);
	comm->uid = p.uid;
	comm->parent_uid = p.parent_uid;
	comm->rank = p.rank;
	comm->nranks = p.nranks;
	comm->devmem = p.flags & KCOLL_COMM_DEVMEM;
	memcpy(comm->key, p.key, sizeof(comm->key));
	err = kcoll_auth_init(comm);
	if (err)
		goto out_put;

	comm->ranks = kvmalloc_array(p.nranks, sizeof(*comm->ranks),
				     GFP_KERNEL_ACCOUNT);
	comm->conns = kvcalloc(p.nranks, sizeof(*comm->conns),
			       GFP_KERNEL_ACCOUNT);
	if (!comm->ranks || !comm->conns) {
		err = -ENOMEM;
		goto out_put;
	}
	if (copy_from_user(comm->ranks, u64_to_user_ptr(p.ranks),
			   array_size(p.nranks, sizeof(*comm->ranks)))) {
		err = -EFAULT;
		goto out_put;
	}
	for (i = 0; i < p.nranks; i++) {
		struct sockaddr_storage ss;

		if (comm->ranks[i].resv) {
			err = -EINVAL;
			goto out_put;
		}
		err = kcoll_rank_sockaddr(&comm->ranks[i], &ss);
		if (err)
			goto out_put;
	}
	err = kcoll_rank_sockaddr(&comm->ranks[p.rank], &comm->self_addr);
	if (err)
		goto out_put;
	((struct sockaddr_in *)&comm->self_addr)->sin_port = 0;

	if (p.nranks > 1) {
		err = kcoll_comm_bind_device(comm);
		if (err)
			goto out_put;
	}
	/*
	 * Under dev_sem: a removal of the device takes it for writing before
	 * it clears comm->ibdev and long before it frees its state, which
	 * the model reads (its measured alpha and beta).
	 */
	down_read(&comm->dev_sem);
	kcoll_tune_model(READ_ONCE(comm->ibdev), &comm->mine);
	up_read(&comm->dev_sem);
	comm->lanes = lanes;
	comm->mine.node_ranks = kcoll_node_ranks(comm->ranks, comm->nranks);
	comm->model = comm->mine;
	/*
	 * At most an hour: a communicator whose peers never come retries
	 * every connection until then (kcoll_conn_retry_later(): an rdma_cm
	 * id, a QP and its receives every few seconds per peer; u32
	 * milliseconds would allow 49 days of it).
	 */
	comm->connect_start = jiffies;
	comm->connect_deadline = jiffies + msecs_to_jiffies(
		min(p.timeout_ms ?: kcoll_connect_timeout_ms(),
		    KCOLL_CONNECT_TIMEOUT_MAX_MS));

	mutex_lock(&kcoll_comms_lock);
	{
		u32 same = 0, max_same = kcoll_user_max_same_rank();
		struct kcoll_comm *c;

		/*
		 * Communicators of one uid and rank coexist if their keys
		 * differ (another user's cannot squat ours), and the
		 * listener tries each one's key on a hello for them
		 * (kcoll_comm_find_hello(), under this lock): so few of
		 * them per user (user_max_same_rank).
		 */
		list_for_each_entry(c, &kcoll_comms, node) {
			if (c->uid != comm->uid || c->rank != comm->rank)
				continue;
			if (!crypto_memneq(c->key, comm->key, KCOLL_KEY_LEN))
				err = -EEXIST;
			else if (c->quota == comm->quota && ++same >= max_same)
				err = -EDQUOT;
			if (err) {
				mutex_unlock(&kcoll_comms_lock);
				if (err == -EDQUOT)
					kcoll_quota_refused(comm->quota,
							    "same_rank",
							    max_same);
				goto out_put;
			}
		}
	}
	list_add_tail(&comm->node, &kcoll_comms);
	comm->listed = true;
	mutex_unlock(&kcoll_comms_lock);

	mutex_lock(&comm->lock);
	/* The device may have gone already (its removal failed us). */
	if (comm->shutting_down)
		err = comm->error ?: -ENODEV;
	for (i = 0; i < p.nranks && !err; i++)
		if (i != p.rank)
			err = kcoll_conn_start(comm, i);
	mutex_unlock(&comm->lock);
	if (err)
		goto out_shutdown;

	/*
	 * Killably, not interruptibly: a signal its caller handles (a
	 * profiler's SIGPROF, a SIGCHLD, a watchdog's alarm) must not end
	 * it. Ending it would shut the communicator down, BYEs to the peers
	 * already connected included, which fails their COMM_CREATE too,
	 * and refuse the retry (until 2026-12-07 it did). The wait is
	 * bounded by the connect deadline.
	 */
	left = kcoll_comm_wait(comm, kcoll_comm_connected, &err,
			max_t(long, (long)(comm->connect_deadline - jiffies), 1),
			true);
	if (left < 0)
		err = left;
	else if (!left && !err)
		err = -ETIMEDOUT;
	if (err)
		goto out_shutdown;

	if (mutex_lock_killable(&ctx->comm_lock)) {
		err = -EINTR;
		goto out_shutdown;
	}
	err = xa_alloc(&ctx->comms, &id, comm, xa_limit_31b, GFP_KERNEL);
	if (!err) {
		comm->id = id;
		/*
		 * Once the lock is dropped, another thread of the file may
		 * destroy the comm (ids are small and easy to guess): keep
		 * it alive until we are done with it here.
		 */
		kref_get(&comm->ref);
	}
	mutex_unlock(&ctx->comm_lock);
	if (err)
		goto out_shutdown;
	p.comm_id = id;
	kcoll_nl_comm_event(comm, KCOLL_CMD_EV_COMM_CREATED, 0);
	if (copy_to_user(uarg, &p, sizeof(p))) {
		/* Nobody can name it: undo, unless someone did already. */
		mutex_lock(&ctx->comm_lock);
		if (xa_cmpxchg(&ctx->comms, id, comm, NULL, 0) == comm)
			kcoll_comm_destroy(ctx, comm);
		mutex_unlock(&ctx->comm_lock);
		kcoll_comm_put(comm);
		return -EFAULT;
	}
	pr_debug("comm %llx rank %u/%u created (id %u)\n", comm->uid,
		 comm->rank, comm->nranks, id);
	kcoll_comm_put(comm);
	return 0;

out_shutdown:
	if (err == -ETIMEDOUT)
		err = kcoll_comm_create_timed_out(comm);
	kcoll_comm_unlist(comm);
	kcoll_comm_shutdown(comm, err);
	kcoll_comm_revoke_flush(comm);
out_put:
	kcoll_comm_put(comm);
	return err;
}

int kcoll_comm_destroy_ioctl(struct kcoll_ctx *ctx, void __user *uarg)
{
	struct kcoll_comm_destroy p;
	struct kcoll_comm *comm;

	if (copy_from_user(&p, uarg, sizeof(p)))
		return -EFAULT;
	if (p.resv)
		return -EINVAL;
	/*
	 * Never erase index 0: in an XA_FLAGS_ALLOC1 array it holds the
	 * reservation that keeps 0 from being allocated, and erasing it
	 * makes the next COMM_CREATE return comm_id 0.
	 */
	if (!p.comm_id)
		return -ENOENT;
	/* Before the lock: the file's other communicators go on meanwhile. */
	comm = kcoll_ctx_comm_get(ctx, p.comm_id);
	if (comm) {
		kcoll_comm_linger(comm, jiffies +
				  msecs_to_jiffies(KCOLL_LINGER_MS), true);
		kcoll_comm_put(comm);
	}
	/* Destroys of one file go one at a time: a killed caller need
	 * not wait for the others' (its file's release does the rest). */
	if (mutex_lock_killable(&ctx->comm_lock))
		return -EINTR;
	comm = xa_erase(&ctx->comms, p.comm_id);
	if (comm)
		kcoll_comm_destroy(ctx, comm);
	mutex_unlock(&ctx->comm_lock);
	return comm ? 0 : -ENOENT;
}

/*
 * 0 if @comm takes new work, else the error new work fails with: aborted,
 * failed (its device gone, a peer lost) or shutting down.
 */
int kcoll_comm_usable_locked(struct kcoll_comm *comm)
{
	lockdep_assert_held(&comm->lock);
	if (comm->aborted)
		return -ECANCELED;
	if (comm->error || comm->shutting_down)
		return comm->error ?: -ECANCELED;
	return 0;
}

/*
 * Did every peer @comm lost leave with its BYE, and (@coll) after it had
 * completed collective @seq? Any other error (a peer lost without BYE,
 * the device gone, an abort) ends the comm. Must hold comm->lock.
 */
static bool kcoll_comm_left(struct kcoll_comm *comm, bool coll, u32 seq)
{
	u32 i;

	lockdep_assert_held(&comm->lock);
	if (comm->error != -ECONNRESET || comm->aborted ||
	    comm->shutting_down)
		return false;
	for (i = 0; i < comm->nranks; i++) {
		struct kcoll_conn *conn = comm->conns[i];

		if (!conn || conn->state == KCOLL_CONN_UP)
			continue;
		if (!conn->bye ||
		    (coll && (s32)(seq - conn->bye_done) >= 0))
			return false;
	}
	return true;
}

/*
 * May @op, queued or about to be, start on @comm? 0, or the error it fails
 * with: kcoll_comm_usable_locked()'s, except for a host-memory collective
 * that every peer lost completed before leaving (a stream-ordered one is
 * not started after a loss) and a receive whose message came before its
 * sender left (kcoll_comm_left()). Must hold comm->lock.
 */
int kcoll_comm_op_usable_locked(struct kcoll_comm *comm,
				const struct kcoll_task *op)
{
	int err = kcoll_comm_usable_locked(comm);

	if (!err || op->gpu)
		return err;
	/*
	 * A collective every peer lost completed before leaving: a
	 * broadcast's or reduce's non-root may complete before another rank
	 * has even submitted it (lazy signatures) and leave; the others'
	 * needs nothing more from it than its completion.
	 */
	if (op->kind == KCOLL_KIND_COLL && kcoll_comm_left(comm, true, op->seq))
		return 0;
	/*
	 * A receive whose message landed in our slot before its sender
	 * left: an eager send completes once posted (docs/DESIGN.md,
	 * "Eager point-to-point"). @op->seq is set.
	 */
	if (op->kind == KCOLL_KIND_P2P && op->args.opcode == KCOLL_OP_RECV &&
	    comm->conns[op->args.root] && kcoll_comm_left(comm, false, 0) &&
	    kcoll_eager_p2p_here(comm->conns[op->args.root], op->seq))
		return 0;
	return err;
}

int kcoll_comm_usable(struct kcoll_comm *comm)
{
	int err;

	mutex_lock(&comm->lock);
	err = kcoll_comm_usable_locked(comm);
	mutex_unlock(&comm->lock);
	return err;
}

/*
 * A referenced comm of @ctx, or NULL. Under the xarray's own lock, not ctx->comm_lock, which a COMM_DESTROY
 * holds through the comm's shutdown (up to bye_max_ms for its BYEs
 * and the teardown after): every ENTER, REG_MEM, ABORT and REPORT of the
 * file waited behind each destroy in turn, uninterruptibly (until
 * 2026-12-06). The array holds the file's reference until a destroy
 * erases the entry, under the same lock: what is found is alive.
 */
struct kcoll_comm *kcoll_ctx_comm_get(struct kcoll_ctx *ctx, u32 id)
{
	struct kcoll_comm *comm;

	xa_lock(&ctx->comms);
	comm = xa_load(&ctx->comms, id);
	if (comm)
		kref_get(&comm->ref);
	xa_unlock(&ctx->comms);
	return comm;
}

/*
 * KCOLL_IOC_COMM_ABORT: cancel everything in flight now and refuse what
 * comes. Only ctx->comm_lock's lookup is shared with destroy: the
 * shutdown itself runs on a reference, so a thread blocked in another
 * ioctl of the same file does not hold it up.
 */
int kcoll_comm_abort_ioctl(struct kcoll_ctx *ctx, void __user *uarg)
{
	struct kcoll_comm_abort p;
	struct kcoll_comm *comm;
	bool first, revoking = false;
	u32 inflight;

	if (copy_from_user(&p, uarg, sizeof(p)))
		return -EFAULT;
	if (p.flags & ~KCOLL_ABORT_FLAGS)
		return -EINVAL;
	comm = kcoll_ctx_comm_get(ctx, p.comm_id);
	if (!comm)
		return -ENOENT;
	mutex_lock(&comm->lock);
	first = !comm->aborted;
	comm->aborted = true;
	/* Our shutdown's BYEs say so; a peer's revoke that came first is
	 * passed on already. */
	if ((p.flags & KCOLL_ABORT_REVOKE) && !comm->revoked &&
	    !comm->shutting_down) {
		comm->revoked = true;
		comm->revoker = comm->rank;
		revoking = true;
	}
	inflight = comm->nr_ops;
	mutex_unlock(&comm->lock);
	kcoll_comm_unlist(comm);
	kcoll_comm_shutdown(comm, -ECANCELED);
	if (first) {
		/* Any user can abort in a loop: the event is not limited. */
		pr_info_ratelimited("comm %llx rank %u/%u %s, %u operation(s) cancelled\n",
				    comm->uid, comm->rank, comm->nranks,
				    revoking ? "revoked" : "aborted", inflight);
		kcoll_nl_comm_event(comm, KCOLL_CMD_EV_COMM_ABORTED, inflight);
	}
	kcoll_comm_put(comm);
	return 0;
}

/* KCOLL_IOC_COMM_REPORT: the last failure of a communicator. */
int kcoll_comm_report_ioctl(struct kcoll_ctx *ctx, void __user *uarg)
{
	struct kcoll_comm_report p;
	struct kcoll_comm *comm;
	u32 *missing = NULL;
	u32 ncopy = 0;
	int err = 0;

	if (copy_from_user(&p, uarg, sizeof(p)))
		return -EFAULT;
	if (p.resv0 || !kcoll_all_zero(p.resv, sizeof(p.resv)))
		return -EINVAL;
	if (p.missing_cap && !p.missing)
		return -EINVAL;
	comm = kcoll_ctx_comm_get(ctx, p.comm_id);
	if (!comm)
		return -ENOENT;
	mutex_lock(&comm->lock);
	p.user_data = comm->report.user_data;
	p.seq = comm->report.seq;
	p.error = comm->report.error;
	p.reason = comm->report.reason;
	p.opcode = comm->report.opcode;
	p.peer = comm->report.peer;
	p.nmissing = comm->report.nmissing;
	p.elapsed_ms = comm->report.elapsed_ms;
	ncopy = min(p.nmissing, p.missing_cap);
	if (ncopy) {
		missing = kmemdup(comm->report.missing, ncopy * sizeof(u32),
				  GFP_KERNEL);
		if (!missing)
			err = -ENOMEM;
	}
	mutex_unlock(&comm->lock);
	kcoll_comm_put(comm);
	if (err)
		return err;
	if (ncopy && copy_to_user(u64_to_user_ptr(p.missing), missing,
				  ncopy * sizeof(u32)))
		err = -EFAULT;
	kfree(missing);
	if (!err && copy_to_user(uarg, &p, sizeof(p)))
		err = -EFAULT;
	return err;
}

/* The file is going away: destroy its communicators (cancels their ops). */
void kcoll_ctx_comms_release(struct kcoll_ctx *ctx)
{
	unsigned long id, deadline = jiffies + msecs_to_jiffies(KCOLL_LINGER_MS);
	struct kcoll_comm *comm;

	mutex_lock(&ctx->comm_lock);
	/*
	 * Nothing else uses the file now: all linger at once (at most
	 * KCOLL_LINGER_MS in all), then all say BYE at once (and wait for
	 * it bye_max_ms at most in all, not each in turn), then go.
	 */
	xa_for_each(&ctx->comms, id, comm)
		kcoll_comm_linger(comm, deadline, false);
	xa_for_each(&ctx->comms, id, comm) {
		kcoll_comm_unlist(comm);
		kcoll_comm_shutdown_begin(comm, -ECANCELED);
	}
	xa_for_each(&ctx->comms, id, comm) {
		xa_erase(&ctx->comms, id);
		kcoll_comm_destroy(ctx, comm);
	}
	mutex_unlock(&ctx->comm_lock);
	WARN_ON_ONCE(!xa_empty(&ctx->mems));
	xa_destroy(&ctx->comms);
	xa_destroy(&ctx->mems);
}

/* ------------------------------------------------------------------ */
/* Device removal                                                       */
/* ------------------------------------------------------------------ */

/*
 * A referenced comm on @ibdev (whose shutdown has not begun, if
 * @unbegun), or NULL: found on kcoll_comms_all, creation to free.
 */
static struct kcoll_comm *kcoll_comm_on_device(struct ib_device *ibdev,
					       bool unbegun)
{
	struct kcoll_comm *comm, *found = NULL;

	spin_lock(&kcoll_comms_all_lock);
	list_for_each_entry(comm, &kcoll_comms_all, all_node) {
		if (READ_ONCE(comm->ibdev) == ibdev &&
		    !(unbegun && READ_ONCE(comm->shutting_down)) &&
		    kref_get_unless_zero(&comm->ref)) {
			found = comm;
			break;
		}
	}
	spin_unlock(&kcoll_comms_all_lock);
	return found;
}

/*
 * @ibdev is being removed (ib_client .remove, before its PD goes): every
 * comm on it fails with -ENODEV, its connections and MRs are released now.
 * The comms stay until their owners destroy them.
 */
void kcoll_comms_device_removed(struct ib_device *ibdev)
{
	struct kcoll_comm *victim;
	struct kcoll_mem *mem;

	/* No communicator binds to it from now on (kcoll_comm_bind_device()). */
	spin_lock(&kcoll_comms_all_lock);
	kcoll_ib_set_gone(ibdev);
	spin_unlock(&kcoll_comms_all_lock);
	/*
	 * Every comm on it begins its shutdown first, so that their waits
	 * for the BYEs' acknowledgements overlap (bye_max_ms in all,
	 * not per comm, while the device's removal waits for us). Each turn
	 * begins one (or finds one begun meanwhile): it ends.
	 */
	while ((victim = kcoll_comm_on_device(ibdev, true))) {
		kcoll_comm_shutdown_begin(victim, -ENODEV);
		kcoll_comm_put(victim);
	}
	/*
	 * Every comm on it, listed or not: a destroyed or aborted comm is
	 * off the listener's list but may still hold registrations (or a
	 * submission registering) until its last reference goes.
	 */
	while ((victim = kcoll_comm_on_device(ibdev, false))) {
		kcoll_comm_unlist(victim);
		pr_warn("%s removed: communicator %llx rank %u fails\n",
			dev_name(&ibdev->dev), victim->uid, victim->rank);
		/* No registration runs while we take its MRs away. */
		down_write(&victim->dev_sem);
		kcoll_comm_shutdown(victim, -ENODEV);
		mutex_lock(&victim->lock);
		list_for_each_entry(mem, &victim->mems, node) {
			kcoll_buf_unregister(&mem->buf);
			kcoll_buf_device_gone(&mem->buf);
		}
		/* Lookups pass over an entry without MRs. */
		list_for_each_entry(mem, &victim->cache, node)
			kcoll_buf_unregister(&mem->buf);
		WRITE_ONCE(victim->ibdev, NULL);
		victim->pd = NULL;
		victim->prio = NULL;
		victim->dstats = NULL;
		mutex_unlock(&victim->lock);
		up_write(&victim->dev_sem);
		kcoll_comm_put(victim);
	}
}

int kcoll_comms_for_each(int (*fn)(struct kcoll_comm *comm, void *arg),
			 void *arg, unsigned int skip)
{
	struct kcoll_comm *batch[16], *comm;
	unsigned int pos = skip, n, i;
	int ret = 0;

	/*
	 * @fn takes comm->lock, which a registration or a connection's
	 * setup may hold for long: call it on references taken a batch at
	 * a time, not under kcoll_comms_lock, which every incoming
	 * connection on the node needs. A comm listed or unlisted between
	 * two batches may be seen twice or not at all, as in any dump.
	 */
	do {
		n = 0;
		i = 0;
		mutex_lock(&kcoll_comms_lock);
		list_for_each_entry(comm, &kcoll_comms, node) {
			if (i++ < pos)
				continue;
			kref_get(&comm->ref);
			batch[n++] = comm;
			if (n == ARRAY_SIZE(batch))
				break;
		}
		mutex_unlock(&kcoll_comms_lock);
		for (i = 0; i < n; i++) {
			if (!ret)
				ret = fn(batch[i], arg);
			kcoll_comm_put(batch[i]);
		}
		pos += n;
	} while (!ret && n == ARRAY_SIZE(batch));
	return ret;
}

int kcoll_comm_init(void)
{
	return kcoll_listen_start();
}

void kcoll_comm_exit(void)
{
	kcoll_listen_stop();
	kcoll_local_exit();
}
