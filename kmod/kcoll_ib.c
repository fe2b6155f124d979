// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll RDMA device tracking (ib_client).
 *
 * Every RDMA device that supports kernel verbs gets a struct kcoll_ibdev with
 * its own protection domain, created in .add and destroyed in .remove.
 * Communicators use that PD for their QPs and MRs; .remove fails them and
 * releases their verbs objects before the PD goes.
 *
 * Locking: kcoll_ib_lock (mutex) protects kcoll_ib_devs. ib_core serialises
 * .add/.remove per device and calls .remove for every device before
 * ib_unregister_client() returns.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "kcoll.h"
#include "kcoll_comm.h"

struct kcoll_ibdev {
	struct list_head node;	/* on kcoll_ib_devs; kcoll_ib_lock */
	struct ib_device *ibdev;
	struct ib_pd *pd;
};

static LIST_HEAD(kcoll_ib_devs);
static DEFINE_MUTEX(kcoll_ib_lock);
static struct ib_client kcoll_ib_client;

static int kcoll_ib_add(struct ib_device *ibdev)
{
	struct kcoll_ibdev *dev;
	int err;

	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev)
		return -ENOMEM;
	dev->ibdev = ibdev;
	dev->pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(dev->pd)) {
		err = PTR_ERR(dev->pd);
		pr_warn("%s: cannot allocate a PD (%d), device not used\n",
			dev_name(&ibdev->dev), err);
		goto out_free_dev;
	}
	ib_set_client_data(ibdev, &kcoll_ib_client, dev);

	mutex_lock(&kcoll_ib_lock);
	list_add_tail(&dev->node, &kcoll_ib_devs);
	mutex_unlock(&kcoll_ib_lock);
	pr_info("%s: added (%u port(s))\n", dev_name(&ibdev->dev),
		rdma_end_port(ibdev));
	return 0;

out_free_dev:
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
	ib_dealloc_pd(dev->pd);
	pr_info("%s: removed\n", dev_name(&ibdev->dev));
	kfree(dev);
}

static struct ib_client kcoll_ib_client = {
	.name = "kcoll",
	.add = kcoll_ib_add,
	.remove = kcoll_ib_remove,
};

/* The PD kcoll uses on @ibdev, or NULL if kcoll does not use the device. */
struct ib_pd *kcoll_ib_pd(struct ib_device *ibdev)
{
	struct kcoll_ibdev *dev = ib_get_client_data(ibdev, &kcoll_ib_client);

	return dev ? dev->pd : NULL;
}

/*
 * One line per device: "<name> ports=<n> port1=<state> ..." where state is
 * the ib_port_state name (ACTIVE, DOWN, ...).
 */
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
			struct ib_port_attr attr;
			const char *st = "?";

			if (!ib_query_port(ib, port, &attr) &&
			    attr.state < ARRAY_SIZE(states))
				st = states[attr.state];
			len += scnprintf(buf + len, size - len, " port%u=%s",
					 port, st);
		}
		len += scnprintf(buf + len, size - len, "\n");
	}
	mutex_unlock(&kcoll_ib_lock);
	return len;
}

int kcoll_ib_init(void)
{
	return ib_register_client(&kcoll_ib_client);
}

void kcoll_ib_exit(void)
{
	ib_unregister_client(&kcoll_ib_client);
}
