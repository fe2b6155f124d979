// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll RDMA device tracking (ib_client).
 *
 * Every RDMA device that supports kernel verbs gets a struct kcoll_ibdev with
 * its own protection domain, created in .add and destroyed in .remove.
 * Communicators use that PD for their QPs and MRs; .remove fails them and
 * releases their verbs objects before the PD goes.
 *
 * The devices tunable (sysfs devices, kcolld's "devices =") limits which of
 * them new communicators may use and which accept incoming connections: a
 * list of names, empty for every device. Names, not devices: a device
 * added later is in or out by its name.
 *
 * Locking: kcoll_ib_lock (mutex) protects kcoll_ib_devs. ib_core serialises
 * .add/.remove per device and calls .remove for every device before
 * ib_unregister_client() returns. kcoll_ib_allow_lock (spinlock) protects
 * kcoll_ib_allow.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ctype.h>
#include <linux/delay.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/sysfs.h>
#include <rdma/ib_cache.h>
#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>

#include "kcoll_types.h"
#include "kcoll_comm.h"
#include "kcoll_stats.h"
#include "kcoll_nl.h"
#include "kcoll_ib.h"

/*
 * One per RDMA device: the PD every communicator on it uses, and the
 * registration QP. Fast-registration work requests go on a QP of their
 * own, which never carries data: on a data QP a REG_MR completes only
 * after every earlier WR there is acknowledged (minutes behind
 * retransmissions on a lossy link), and rxe's retransmission logic does
 * not cope with local operations between the data WRs of a window (it
 * stalled the QP in tests). Here nothing precedes a REG_MR, so it
 * completes at once, and the MR is then valid on every QP of the PD.
 */
struct kcoll_ibdev {
	struct list_head node;	/* on kcoll_ib_devs; kcoll_ib_lock */
	struct ib_device *ibdev;
	struct ib_pd *pd;

	struct mutex reg_lock;	/* the registration QP, one batch at a time */
	struct ib_cq *reg_cq;	/* IB_POLL_DIRECT: polled by the registrar */
	struct ib_qp *reg_qp;	/* RC, connected to itself; NULL until used */
	bool removed;		/* under reg_lock: no new registration QP */
	atomic_t mrs;		/* MRs on pd (kcoll_ib_alloc_mr()) */
	wait_queue_head_t mrs_wait;	/* woken when mrs drops to 0 */
	bool gone;		/* removal has begun: no new communicator
				 * binds to it (kcoll_ib_set_gone()) */
	struct ib_reg_wr reg_wrs[KCOLL_REG_BATCH];	/* under reg_lock */
	struct kcoll_prio prio;	/* what runs on it, by priority */
	struct kcoll_opstats stats;	/* operations of comms on it */
	atomic_t alpha_ns;	/* measured round trip, smoothed; 0: none */
	/* The wire's pace: bytes of RDMA WRITEs completed while some were
	 * in flight, over that time (kcoll_ib_tx_*()). */
	spinlock_t tx_lock;
	u32 tx_inflight;
	u64 tx_mark;		/* ktime ns: last completion, or busy since */
	u64 tx_ns, tx_bytes;	/* not yet made a sample */
	atomic_t beta_ps;	/* measured, smoothed; 0: none */
	/* The port rate's beta (kcoll_ib_beta_ps()) and when it was read
	 * (jiffies; 0: never). */
	u32 rate_beta_ps;
	unsigned long rate_at;
};

static LIST_HEAD(kcoll_ib_devs);
static DEFINE_MUTEX(kcoll_ib_lock);
static struct ib_client kcoll_ib_client;

/* The devices tunable: names separated by single commas; "": all. */
static char kcoll_ib_allow[KCOLL_IB_ALLOW_MAX];
static DEFINE_SPINLOCK(kcoll_ib_allow_lock);

#define KCOLL_REG_QP_DEPTH	(KCOLL_REG_BATCH + 1)

/* Must hold dev->reg_lock. */
static void kcoll_reg_qp_destroy(struct kcoll_ibdev *dev)
{
	if (dev->reg_qp) {
		ib_destroy_qp(dev->reg_qp);
		dev->reg_qp = NULL;
	}
	if (dev->reg_cq) {
		ib_free_cq(dev->reg_cq);
		dev->reg_cq = NULL;
	}
}

/*
 * Bring the registration QP to RTS, connected to itself: REG_MR needs a
 * send queue in RTS but sends nothing on the wire. The address is the
 * port's GID 0 (link-local on RoCE, so no neighbour lookup) or its LID.
 */
static int kcoll_reg_qp_connect(struct kcoll_ibdev *dev, struct ib_qp *qp)
{
	struct ib_device *ib = dev->ibdev;
	u32 port = rdma_start_port(ib);
	struct ib_port_attr pattr;
	struct ib_qp_attr a = {};
	union ib_gid gid;
	int err;

	err = ib_query_port(ib, port, &pattr);
	if (err)
		return err;
	a.qp_state = IB_QPS_INIT;
	a.port_num = port;
	a.pkey_index = 0;
	/* Its only peer is itself: the NIC's local copies of memory the CPU
	 * must not touch are WRITEs to itself (kcoll_ib_self_write()),
	 * through an MR valid for that WRITE only. */
	a.qp_access_flags = IB_ACCESS_REMOTE_WRITE;
	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (err)
		return err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.type = rdma_ah_find_type(ib, port);
	rdma_ah_set_port_num(&a.ah_attr, port);
	if (rdma_protocol_roce(ib, port)) {
		const struct ib_gid_attr *ga;
		struct net_device *ndev;

		err = rdma_query_gid(ib, port, 0, &gid);
		if (err)
			return err;
		rdma_ah_set_grh(&a.ah_attr, &gid, 0, 0, 1, 0);
		/*
		 * A kernel QP's address comes resolved: its MAC is the port's
		 * own. The registration QP only ever sent local operations;
		 * the NIC's own copies (kcoll_ib_self_write()) go on the wire,
		 * and rxe loops back only what is addressed to its own MAC.
		 */
		ga = rdma_get_gid_attr(ib, port, 0);
		if (IS_ERR(ga))
			return PTR_ERR(ga);
		rcu_read_lock();
		ndev = rdma_read_gid_attr_ndev_rcu(ga);
		if (!IS_ERR(ndev))
			memcpy(a.ah_attr.roce.dmac, ndev->dev_addr, ETH_ALEN);
		rcu_read_unlock();
		rdma_put_gid_attr(ga);
	} else {
		rdma_ah_set_dlid(&a.ah_attr, pattr.lid);
	}
	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (err)
		return err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN | IB_QP_TIMEOUT |
			    IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
			    IB_QP_MAX_QP_RD_ATOMIC);
}

/* Must hold dev->reg_lock. */
static int kcoll_reg_qp_create(struct kcoll_ibdev *dev)
{
	struct ib_qp_init_attr attr = {};
	int err;

	dev->reg_cq = ib_alloc_cq(dev->ibdev, NULL, KCOLL_REG_QP_DEPTH, 0,
				  IB_POLL_DIRECT);
	if (IS_ERR(dev->reg_cq)) {
		err = PTR_ERR(dev->reg_cq);
		dev->reg_cq = NULL;
		return err;
	}
	attr.send_cq = dev->reg_cq;
	attr.recv_cq = dev->reg_cq;
	attr.cap.max_send_wr = KCOLL_REG_QP_DEPTH;
	attr.cap.max_recv_wr = 1;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	dev->reg_qp = ib_create_qp(dev->pd, &attr);
	if (IS_ERR(dev->reg_qp)) {
		err = PTR_ERR(dev->reg_qp);
		dev->reg_qp = NULL;
		goto out_destroy;
	}
	err = kcoll_reg_qp_connect(dev, dev->reg_qp);
	if (err)
		goto out_destroy;
	return 0;

out_destroy:
	pr_warn("%s: cannot set up the registration QP (%d)\n",
		dev_name(&dev->ibdev->dev), err);
	kcoll_reg_qp_destroy(dev);
	return err;
}

static int kcoll_reg_post_wait(struct kcoll_ibdev *dev,
			       const struct ib_send_wr *wr);

/*
 * kcoll_ib_mr_ops - the @n (≤ KCOLL_REG_BATCH) operations @ops on fast-reg
 * MRs of @ibdev, in order: register (under op->key, with @access:
 * IB_ACCESS_* flags, 0: local reads only) or invalidate (op->key: the key
 * it was registered under). Waits until the device has done them: when
 * this returns 0 the registered MRs are valid on every QP of the PD and
 * the invalidated ones on none. On an error any of them may be either:
 * the caller deregisters them.
 * Sleeps (polls the CQ); process context, no spinlocks held.
 */
int kcoll_ib_mr_ops(struct ib_device *ibdev, const struct kcoll_mr_op *ops,
		    unsigned int n, int access)
{
	struct kcoll_ibdev *dev = ib_get_client_data(ibdev, &kcoll_ib_client);
	struct ib_reg_wr *wrs;
	unsigned int i;
	int err;

	if (!dev)
		return -ENODEV;
	if (!n || n > KCOLL_REG_BATCH)
		return -EINVAL;

	mutex_lock(&dev->reg_lock);
	wrs = dev->reg_wrs;
	memset(wrs, 0, n * sizeof(*wrs));
	for (i = 0; i < n; i++) {
		wrs[i].wr.wr_id = i;
		wrs[i].wr.next = i + 1 < n ? &wrs[i + 1].wr : NULL;
		if (ops[i].inv) {
			wrs[i].wr.opcode = IB_WR_LOCAL_INV;
			wrs[i].wr.ex.invalidate_rkey = ops[i].key;
			continue;
		}
		wrs[i].wr.opcode = IB_WR_REG_MR;
		wrs[i].mr = ops[i].mr;
		wrs[i].key = ops[i].key;
		wrs[i].access = access;
	}
	/* The last completes the batch: a send queue completes in order. */
	wrs[n - 1].wr.send_flags = IB_SEND_SIGNALED;

	if (dev->removed) {
		err = -ENODEV;
		goto out_unlock;
	}
	if (!dev->reg_qp) {
		err = kcoll_reg_qp_create(dev);
		if (err)
			goto out_unlock;
	}
	err = kcoll_reg_post_wait(dev, &wrs[0].wr);
out_unlock:
	mutex_unlock(&dev->reg_lock);
	return err;
}

/* The registration QP, created if need be. Must hold dev->reg_lock. */
static int kcoll_reg_qp_get(struct kcoll_ibdev *dev)
{
	lockdep_assert_held(&dev->reg_lock);
	if (dev->removed)
		return -ENODEV;
	return dev->reg_qp ? 0 : kcoll_reg_qp_create(dev);
}

/*
 * Post @wr (a chain whose last WR is signalled) on the registration QP and
 * wait for it. Must hold dev->reg_lock, the QP created.
 */
static int kcoll_reg_post_wait(struct kcoll_ibdev *dev,
			       const struct ib_send_wr *wr)
{
	struct ib_device *ibdev = dev->ibdev;
	unsigned long deadline;
	struct ib_wc wc;
	int err, got;

	lockdep_assert_held(&dev->reg_lock);
	err = ib_post_send(dev->reg_qp, wr, NULL);
	if (err)
		return err;
	deadline = jiffies + 10 * HZ;
	for (;;) {
		got = ib_poll_cq(dev->reg_cq, 1, &wc);
		if (got > 0)
			break;
		if (got < 0 || time_after(jiffies, deadline)) {
			/* Never seen: start over with a fresh QP. */
			pr_warn_ratelimited("%s: memory registration (or a NIC copy) did not complete\n",
					    dev_name(&ibdev->dev));
			kcoll_reg_qp_destroy(dev);
			return -ETIMEDOUT;
		}
		usleep_range(10, 50);
	}
	if (wc.status != IB_WC_SUCCESS) {
		pr_warn_ratelimited("%s: memory registration (or a NIC copy) failed: %s\n",
				    dev_name(&ibdev->dev),
				    ib_wc_status_msg(wc.status));
		/* The QP is in error now; the next batch gets a new one. */
		kcoll_reg_qp_destroy(dev);
		err = -EIO;
	}
	return err;
}

/*
 * kcoll_ib_self_write - copy with the NIC, no CPU on the data: register
 * @mr (mapped over the destination by the caller) under @key for remote
 * writes, WRITE @sge into it through the registration QP (connected to
 * itself), and invalidate it; the MR is writable for that WRITE only.
 * Each step completes before the next is posted: rxe stalls a send queue
 * that has local operations and data in flight together (see
 * kcoll_gmr.c). Sleeps; process context.
 */
int kcoll_ib_self_write(struct ib_device *ibdev, struct ib_mr *mr, u32 key,
			const struct ib_sge *sge)
{
	struct kcoll_ibdev *dev = ib_get_client_data(ibdev, &kcoll_ib_client);
	struct ib_rdma_wr wr = {};
	struct ib_send_wr inv = {};
	struct ib_reg_wr reg = {};
	int err, err2;

	if (!dev)
		return -ENODEV;
	reg.wr.opcode = IB_WR_REG_MR;
	reg.wr.send_flags = IB_SEND_SIGNALED;
	reg.mr = mr;
	reg.key = key;
	reg.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	wr.wr.opcode = IB_WR_RDMA_WRITE;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.wr.sg_list = (struct ib_sge *)sge;
	wr.wr.num_sge = 1;
	wr.remote_addr = mr->iova;
	wr.rkey = key;
	inv.opcode = IB_WR_LOCAL_INV;
	inv.send_flags = IB_SEND_SIGNALED;
	inv.ex.invalidate_rkey = key;

	mutex_lock(&dev->reg_lock);
	err = kcoll_reg_qp_get(dev);
	if (!err)
		err = kcoll_reg_post_wait(dev, &reg.wr);
	if (err)
		goto out_unlock;
	err = kcoll_reg_post_wait(dev, &wr.wr);
	/* Invalid again whatever the WRITE did (a failed one took the QP
	 * with it: a fresh one invalidates). */
	err2 = kcoll_reg_qp_get(dev);
	if (!err2)
		err2 = kcoll_reg_post_wait(dev, &inv);
	err = err ?: err2;
out_unlock:
	mutex_unlock(&dev->reg_lock);
	return err;
}

int kcoll_ib_reg_mrs(struct ib_device *ibdev, struct ib_mr **mrs,
		     unsigned int n, int access)
{
	struct kcoll_mr_op ops[KCOLL_REG_BATCH];
	unsigned int i;

	if (n > KCOLL_REG_BATCH)
		return -EINVAL;
	for (i = 0; i < n; i++)
		ops[i] = (struct kcoll_mr_op){ .mr = mrs[i], .key = mrs[i]->rkey };
	return kcoll_ib_mr_ops(ibdev, ops, n, access);
}

static int kcoll_ib_add(struct ib_device *ibdev)
{
	struct kcoll_ibdev *dev;
	int err;

	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev)
		return -ENOMEM;
	dev->ibdev = ibdev;
	mutex_init(&dev->reg_lock);
	spin_lock_init(&dev->tx_lock);
	init_waitqueue_head(&dev->mrs_wait);
	dev->pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(dev->pd)) {
		err = PTR_ERR(dev->pd);
		pr_warn("%s: cannot allocate a PD (%d), device not used\n",
			dev_name(&ibdev->dev), err);
		goto out_free_dev;
	}
	ib_set_client_data(ibdev, &kcoll_ib_client, dev);
	/* Now if the port is up, else at the first registration. */
	mutex_lock(&dev->reg_lock);
	kcoll_reg_qp_create(dev);
	mutex_unlock(&dev->reg_lock);

	mutex_lock(&kcoll_ib_lock);
	list_add_tail(&dev->node, &kcoll_ib_devs);
	mutex_unlock(&kcoll_ib_lock);
	pr_info("%s: added (%u port(s))\n", dev_name(&ibdev->dev),
		rdma_end_port(ibdev));
	kcoll_nl_dev_event(ibdev, KCOLL_CMD_EV_DEV_ADDED);
	return 0;

out_free_dev:
	mutex_destroy(&dev->reg_lock);
	kfree(dev);
	return err;
}

static void kcoll_ib_remove(struct ib_device *ibdev, void *client_data)
{
	struct kcoll_ibdev *dev = client_data;

	mutex_lock(&kcoll_ib_lock);
	list_del(&dev->node);
	mutex_unlock(&kcoll_ib_lock);
	/* Communicators on it fail and let go of its QPs and MRs first. */
	kcoll_comms_device_removed(ibdev);
	mutex_lock(&dev->reg_lock);
	dev->removed = true;
	kcoll_reg_qp_destroy(dev);
	mutex_unlock(&dev->reg_lock);
	mutex_destroy(&dev->reg_lock);
	/*
	 * Every MR is deregistered before the PD goes (ib_dereg_mr() writes
	 * to the PD). The communicators let go of theirs above; one whose
	 * owner took it off every list a removal walks just before, holding
	 * the comm's dev_sem, is gone already. This wait only catches what
	 * those rules missed: a stall named in the log, not a PD freed under
	 * its MRs.
	 */
	while (!wait_event_timeout(dev->mrs_wait, !atomic_read(&dev->mrs),
				   10 * HZ))
		pr_err("%s: %d MRs still registered, waiting before the PD goes\n",
		       dev_name(&ibdev->dev), atomic_read(&dev->mrs));
	ib_dealloc_pd(dev->pd);
	pr_info("%s: removed\n", dev_name(&ibdev->dev));
	kcoll_nl_dev_event(ibdev, KCOLL_CMD_EV_DEV_REMOVED);
	/*
	 * The core erases our client data only after this returns: until
	 * then a lookup by device (a COMM_CREATE binding to it, which
	 * kcoll_ib_pd() then refuses) would find @dev freed. Clear it, and
	 * let every lookup that found it (under RCU: kcoll_ib_pd(), the
	 * last MR's wake-up in kcoll_ib_dereg_mr()) finish before it goes.
	 */
	ib_set_client_data(ibdev, &kcoll_ib_client, NULL);
	synchronize_rcu();
	kfree(dev);
}

static struct ib_client kcoll_ib_client = {
	.name = "kcoll",
	.add = kcoll_ib_add,
	.remove = kcoll_ib_remove,
};

/*
 * Does an invalidation's completion on @ibdev mean that nothing accesses
 * the MR any more? The verbs promise it, and hardware keeps it; rxe does
 * not: its LOCAL_INV only marks the MR invalid, and a WRITE packet its
 * responder took the MR for before goes on copying into the pages, while
 * a deregistration waits for it (docs/DESIGN.md, "Grant MRs").
 */
bool kcoll_ib_inv_fences(const struct ib_device *ibdev)
{
	return ibdev->ops.driver_id != RDMA_DRIVER_RXE;
}

/*
 * A fast-registration MR with room for @pages pages on @pd, kcoll's PD of
 * its device (kcoll_ib_pd()), counted: the device's removal frees the PD
 * only when every such MR is gone (kcoll_ib_dereg_mr()).
 */
struct ib_mr *kcoll_ib_alloc_mr(struct ib_pd *pd, u32 pages)
{
	struct kcoll_ibdev *dev = ib_get_client_data(pd->device,
						     &kcoll_ib_client);
	struct ib_mr *mr;

	if (!dev || dev->pd != pd)
		return ERR_PTR(-ENODEV);
	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, pages);
	if (!IS_ERR(mr))
		atomic_inc(&dev->mrs);
	return mr;
}

/* Deregister @mr, from kcoll_ib_alloc_mr(). Sleeps. */
void kcoll_ib_dereg_mr(struct ib_mr *mr)
{
	struct ib_device *ibdev = mr->device;
	struct kcoll_ibdev *dev;

	ib_dereg_mr(mr);
	/* Still there: its removal waits for this MR, and then (RCU) for
	 * this wake-up to be over before it frees @dev. */
	rcu_read_lock();
	dev = ib_get_client_data(ibdev, &kcoll_ib_client);
	if (dev && atomic_dec_and_test(&dev->mrs))
		wake_up_all(&dev->mrs_wait);
	rcu_read_unlock();
}

/*
 * The PD kcoll uses on @ibdev, or NULL if kcoll does not use the device
 * or its removal has begun. The caller serialises against
 * kcoll_ib_set_gone() (kcoll_comm.c: kcoll_comms_all_lock), so that a
 * communicator either binds before removal looks for the device's
 * communicators, and is found, or not at all.
 */
struct ib_pd *kcoll_ib_pd(struct ib_device *ibdev)
{
	struct kcoll_ibdev *dev;
	struct ib_pd *pd;

	/* Against kcoll_ib_remove()'s free of a device already gone. */
	rcu_read_lock();
	dev = ib_get_client_data(ibdev, &kcoll_ib_client);
	pd = dev && !READ_ONCE(dev->gone) ? dev->pd : NULL;
	rcu_read_unlock();
	return pd;
}

/* @ibdev is being removed: kcoll_ib_pd() says NULL from now on. */
void kcoll_ib_set_gone(struct ib_device *ibdev)
{
	struct kcoll_ibdev *dev = ib_get_client_data(ibdev, &kcoll_ib_client);

	if (dev)
		WRITE_ONCE(dev->gone, true);
}

/*
 * The cost model's beta for @ibdev: picoseconds per byte at the data rate
 * of its first port (lane rate after line encoding, times the width), or
 * 0 if the port reports nothing we know. ib_port_speed values by number:
 * the newer ones are not in every kernel's enum.
 */
static u32 kcoll_ib_port_beta_ps(struct ib_device *ibdev)
{
	struct ib_port_attr pattr;
	u32 lane_mbps, mbps;
	int width;

	if (ib_query_port(ibdev, rdma_start_port(ibdev), &pattr) ||
	    pattr.state != IB_PORT_ACTIVE)
		return 0;
	switch (pattr.active_speed) {
	case 1:   lane_mbps = 2000; break;	/* SDR, 8b/10b */
	case 2:   lane_mbps = 4000; break;	/* DDR */
	case 4:   lane_mbps = 8000; break;	/* QDR */
	case 8:   lane_mbps = 9697; break;	/* FDR10, 64b/66b */
	case 16:  lane_mbps = 13636; break;	/* FDR */
	case 32:  lane_mbps = 25000; break;	/* EDR */
	case 64:  lane_mbps = 50000; break;	/* HDR */
	case 128: lane_mbps = 100000; break;	/* NDR */
	case 256: lane_mbps = 200000; break;	/* XDR */
	default:  return 0;
	}
	width = ib_width_enum_to_int(pattr.active_width);
	if (width <= 0)
		return 0;
	mbps = lane_mbps * (u32)width;
	/* 1 Mb/s is 125000 B/s: 8e6 ps per byte. */
	return max_t(u32, 1, 8000000U / mbps);
}

/* How long a port rate read stays good (a link that renegotiates); one
 * that gave none (a speed we do not know) is asked again sooner.
 */
#define KCOLL_RATE_TTL		(10 * HZ)
#define KCOLL_RATE_TTL_NONE	HZ

/*
 * kcoll_ib_port_beta_ps(), read again at most every KCOLL_RATE_TTL: every
 * COMM_CREATE and every user's netlink DEV_GET or STATS_GET asks, and a
 * provider's query may take rtnl_lock (rxe) and on 6.1 log a warning (a
 * RoCE port over a netdev whose speed is unknown: virtio, veth, dummy).
 * A port the core's cache calls down has no rate and is not asked at
 * all: until 2026-12-07 one was queried at every request of anyone.
 */
u32 kcoll_ib_beta_ps(struct ib_device *ibdev)
{
	struct kcoll_ibdev *dev = ib_get_client_data(ibdev, &kcoll_ib_client);
	unsigned long at, ttl, now = jiffies;
	enum ib_port_state state;
	u32 beta;

	if (ib_get_cached_port_state(ibdev, rdma_start_port(ibdev), &state) ||
	    state != IB_PORT_ACTIVE)
		return 0;
	if (!dev)
		return kcoll_ib_port_beta_ps(ibdev);
	at = READ_ONCE(dev->rate_at);
	beta = READ_ONCE(dev->rate_beta_ps);
	ttl = beta ? KCOLL_RATE_TTL : KCOLL_RATE_TTL_NONE;
	if (at && time_before(now, at + ttl))
		return beta;
	beta = kcoll_ib_port_beta_ps(ibdev);
	WRITE_ONCE(dev->rate_beta_ps, beta);
	WRITE_ONCE(dev->rate_at, now ?: 1);
	return beta;
}

struct kcoll_prio *kcoll_ib_prio(struct ib_device *ibdev)
{
	struct kcoll_ibdev *dev = ib_get_client_data(ibdev, &kcoll_ib_client);

	return dev ? &dev->prio : NULL;
}

u32 kcoll_ib_alpha_ns(struct ib_device *ibdev)
{
	struct kcoll_ibdev *dev = ib_get_client_data(ibdev, &kcoll_ib_client);

	return dev ? atomic_read(&dev->alpha_ns) : 0;
}

/*
 * β measured: the device is busy while it has RDMA WRITEs of data in
 * flight (to other nodes), and its pace is the bytes they complete over
 * that time, all connections together, so it is what collectives get
 * with the wire as loaded as they load it (both directions at once,
 * several flows). Every KCOLL_BETA_SAMPLE_BYTES a sample, smoothed with
 * weight 1/4. Inline writes and the intra-node path are not counted.
 */
#define KCOLL_BETA_SAMPLE_BYTES	(4U << 20)

/* Fold @sample into the smoothed @avg (weight 1/4; the first is taken). */
static void kcoll_ib_smooth(atomic_t *avg, u32 sample)
{
	u32 old, new;

	do {
		old = atomic_read(avg);
		new = old ? (u32)(((u64)old * 3 + sample) / 4) : sample;
	} while (atomic_cmpxchg(avg, old, new) != old);
}

void kcoll_ib_tx_start(struct ib_device *ibdev)
{
	struct kcoll_ibdev *dev = ib_get_client_data(ibdev, &kcoll_ib_client);

	if (!dev)
		return;
	spin_lock_bh(&dev->tx_lock);
	if (!dev->tx_inflight++)
		dev->tx_mark = ktime_get_ns();
	spin_unlock_bh(&dev->tx_lock);
}

void kcoll_ib_tx_done(struct ib_device *ibdev, u32 bytes)
{
	struct kcoll_ibdev *dev = ib_get_client_data(ibdev, &kcoll_ib_client);
	u64 now = ktime_get_ns(), ps = 0;

	if (!dev)
		return;
	spin_lock_bh(&dev->tx_lock);
	if (dev->tx_inflight) {
		dev->tx_inflight--;
		dev->tx_ns += now - dev->tx_mark;
		dev->tx_mark = now;
		dev->tx_bytes += bytes;
		if (dev->tx_bytes >= KCOLL_BETA_SAMPLE_BYTES) {
			ps = div64_u64(dev->tx_ns * 1000, dev->tx_bytes);
			dev->tx_ns = 0;
			dev->tx_bytes = 0;
		}
	}
	spin_unlock_bh(&dev->tx_lock);
	if (!ps)
		return;
	kcoll_ib_smooth(&dev->beta_ps, min_t(u64, ps, KCOLL_BETA_MAX_PS));
}

u32 kcoll_ib_beta_measured_ps(struct ib_device *ibdev)
{
	struct kcoll_ibdev *dev = ib_get_client_data(ibdev, &kcoll_ib_client);

	return dev ? atomic_read(&dev->beta_ps) : 0;
}

/*
 * A connection's shortest timed round trip: PING, the peer's CQ handler,
 * PONG, ours; what a grant and the write answering it cost, software
 * included. Smoothed over connections (1/4 weight to the new sample), so
 * one busy moment does not swing the model of the next communicators.
 */
void kcoll_ib_alpha_sample(struct ib_device *ibdev, u64 ns)
{
	struct kcoll_ibdev *dev = ib_get_client_data(ibdev, &kcoll_ib_client);

	if (dev)
		kcoll_ib_smooth(&dev->alpha_ns, min_t(u64, max_t(u64, ns, 1),
						      KCOLL_ALPHA_MAX_NS));
}

struct kcoll_opstats *kcoll_ib_stats(struct ib_device *ibdev)
{
	struct kcoll_ibdev *dev = ib_get_client_data(ibdev, &kcoll_ib_client);

	return dev ? &dev->stats : NULL;
}

int kcoll_ib_for_each(int (*fn)(struct ib_device *ibdev,
				struct kcoll_opstats *st, void *arg),
		      void *arg, unsigned int skip)
{
	struct kcoll_ibdev *dev;
	unsigned int i = 0;
	int ret = 0;

	mutex_lock(&kcoll_ib_lock);
	list_for_each_entry(dev, &kcoll_ib_devs, node) {
		if (i++ < skip)
			continue;
		ret = fn(dev->ibdev, &dev->stats, arg);
		if (ret)
			break;
	}
	mutex_unlock(&kcoll_ib_lock);
	return ret;
}

ssize_t kcoll_ib_list(char *buf, size_t size)
{
	static const char *const states[] = {
		[IB_PORT_NOP] = "NOP", [IB_PORT_DOWN] = "DOWN",
		[IB_PORT_INIT] = "INIT", [IB_PORT_ARMED] = "ARMED",
		[IB_PORT_ACTIVE] = "ACTIVE",
		[IB_PORT_ACTIVE_DEFER] = "ACTIVE_DEFER",
	};
	struct kcoll_ibdev *dev;
	size_t len = 0;

	mutex_lock(&kcoll_ib_lock);
	list_for_each_entry(dev, &kcoll_ib_devs, node) {
		struct ib_device *ib = dev->ibdev;
		u32 port;

		len += scnprintf(buf + len, size - len, "%s ports=%u",
				 dev_name(&ib->dev), rdma_end_port(ib));
		rdma_for_each_port(ib, port) {
			enum ib_port_state state;
			const char *st = "?";

			/* Cached, as for netlink (kcoll_nl.c): a file any
			 * user may read must not query the provider. */
			if (!ib_get_cached_port_state(ib, port, &state) &&
			    state < ARRAY_SIZE(states))
				st = states[state];
			len += scnprintf(buf + len, size - len, " port%u=%s",
					 port, st);
		}
		len += scnprintf(buf + len, size - len,
				 " alpha_ns=%d beta_ps=%d\n",
				 atomic_read(&dev->alpha_ns),
				 atomic_read(&dev->beta_ps));
	}
	mutex_unlock(&kcoll_ib_lock);
	return len;
}

/* Whether @ibdev may carry new communicators (the devices tunable). */
bool kcoll_ib_enabled(struct ib_device *ibdev)
{
	const char *name = dev_name(&ibdev->dev);
	size_t len = strlen(name), n;
	const char *p;
	bool ok;

	spin_lock(&kcoll_ib_allow_lock);
	ok = !kcoll_ib_allow[0];
	for (p = kcoll_ib_allow; !ok && *p; p += n + (p[n] == ',')) {
		n = strcspn(p, ",");
		ok = n == len && !memcmp(p, name, len);
	}
	spin_unlock(&kcoll_ib_allow_lock);
	return ok;
}

/* The devices tunable as sysfs shows it: "*" for every device. */
ssize_t kcoll_ib_allow_show(char *buf)
{
	char copy[KCOLL_IB_ALLOW_MAX];

	spin_lock(&kcoll_ib_allow_lock);
	memcpy(copy, kcoll_ib_allow, sizeof(copy));
	spin_unlock(&kcoll_ib_allow_lock);
	return sysfs_emit(buf, "%s\n", copy[0] ? copy : "*");
}

static bool kcoll_ib_name_char(char c)
{
	return isalnum(c) || c == '_' || c == '-' || c == '.';
}

/*
 * Set the devices tunable from @buf: device names separated by commas or
 * white space, or "*" (or nothing) for every device. -EINVAL for a name
 * with other characters than [A-Za-z0-9_.-], or a list longer than
 * KCOLL_IB_ALLOW_MAX - 1 once written with single commas. Communicators
 * that exist keep their device.
 */
/*
 * Say which names of @list no RDMA device has now: a typo would otherwise
 * refuse every communicator without a word. Still stored: a device of
 * that name may come later.
 */
static void kcoll_ib_allow_check(const char *list)
{
	struct kcoll_ibdev *dev;
	const char *p;
	size_t n;
	bool seen;

	mutex_lock(&kcoll_ib_lock);
	for (p = list; *p; p += n + (p[n] == ',')) {
		n = strcspn(p, ",");
		seen = false;
		list_for_each_entry(dev, &kcoll_ib_devs, node) {
			const char *name = dev_name(&dev->ibdev->dev);

			if (strlen(name) == n && !strncmp(name, p, n)) {
				seen = true;
				break;
			}
		}
		if (!seen)
			pr_warn("devices: no RDMA device is called %.*s (yet); kept in the list\n",
				(int)n, p);
	}
	mutex_unlock(&kcoll_ib_lock);
}

int kcoll_ib_allow_store(const char *buf, size_t count)
{
	char list[KCOLL_IB_ALLOW_MAX] = "";
	size_t len = 0, i = 0, n;
	bool all = false;

	while (i < count && buf[i]) {
		if (buf[i] == ',' || isspace(buf[i])) {
			i++;
			continue;
		}
		for (n = 0; i + n < count && buf[i + n] && buf[i + n] != ',' &&
		     !isspace(buf[i + n]); n++)
			;
		if (n == 1 && buf[i] == '*') {
			all = true;
			i++;
			continue;
		}
		if (len + !!len + n >= sizeof(list))
			return -EINVAL;
		if (len)
			list[len++] = ',';
		for (; n; n--, i++) {
			if (!kcoll_ib_name_char(buf[i]))
				return -EINVAL;
			list[len++] = buf[i];
		}
		list[len] = '\0';
	}
	if (all && len)
		return -EINVAL;		/* "*" stands alone */
	spin_lock(&kcoll_ib_allow_lock);
	memcpy(kcoll_ib_allow, list, sizeof(list));
	spin_unlock(&kcoll_ib_allow_lock);
	pr_info("devices: %s\n", list[0] ? list : "* (every device)");
	kcoll_ib_allow_check(list);
	return 0;
}

int kcoll_ib_init(void)
{
	return ib_register_client(&kcoll_ib_client);
}

void kcoll_ib_exit(void)
{
	ib_unregister_client(&kcoll_ib_client);
}
