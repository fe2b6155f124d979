// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll: kernel-scheduled collective communication over RDMA.
 *
 * /dev/kcoll: each open file is one context with its own submission and
 * completion rings (KCOLL_IOC_SETUP + mmap), a doorbell (KCOLL_IOC_ENTER),
 * poll() and an optional eventfd. See docs/DESIGN.md.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>

#include "kcoll.h"
#include "kcoll_compat.h"
#include "kcoll_gpu.h"
#include "kcoll_types.h"
#include "kcoll_comm.h"
#include "kcoll_reg.h"
#include "kcoll_ring.h"
#include "kcoll_sysfs.h"
#include "kcoll_stats.h"
#include "kcoll_nl.h"
#include "kcoll_tune.h"
#include "kcoll_ib.h"
#include "kcoll_debugfs.h"
#include "kcoll_reduce.h"
#include "kcoll_cost.h"

#define KCOLL_VERSION "0.6.0"

static int kcoll_open(struct inode *inode, struct file *file)
{
	struct kcoll_ctx *ctx = kcoll_ctx_create();

	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	file->private_data = ctx;
	return nonseekable_open(inode, file);
}

static int kcoll_release(struct inode *inode, struct file *file)
{
	kcoll_ctx_release(file->private_data);
	return 0;
}

static long kcoll_ioctl_query(void __user *uarg)
{
	struct kcoll_query q;
	unsigned int i;

	if (copy_from_user(&q, uarg, sizeof(q)))
		return -EFAULT;
	if (!kcoll_all_zero(&q, sizeof(q)))
		return -EINVAL;
	q.abi_version = KCOLL_ABI_VERSION;
	q.features = KCOLL_FEATURES;
	/* What SETUP enforces: every SQ slot needs a CQ slot. The knob
	 * read once: a pair from one moment, even if root changes it. */
	q.max_cq_entries = kcoll_max_cq_entries();
	q.max_sq_entries = min(kcoll_max_sq_entries(), q.max_cq_entries);
	q.sqe_size = sizeof(struct kcoll_sqe);
	q.cqe_size = sizeof(struct kcoll_cqe);
	q.nr_ops = KCOLL_OP_LAST;
	q.prio_max = KCOLL_PRIO_MAX;
	for (i = 0; i < KCOLL_OP_LAST; i++)
		if (kcoll_ops[i].exec || kcoll_ops[i].issue)
			q.ops_supported |= 1ULL << i;
	q.delay_max_us = KCOLL_DELAY_MAX_US;
	return copy_to_user(uarg, &q, sizeof(q)) ? -EFAULT : 0;
}

static long kcoll_ioctl(struct file *file, unsigned int cmd,
			unsigned long arg)
{
	struct kcoll_ctx *ctx = file->private_data;
	void __user *uarg = (void __user *)arg;
	long ret;

	if (cmd == KCOLL_IOC_QUERY)
		return kcoll_ioctl_query(uarg);
	/*
	 * Everything else acts (rings, communicators, registrations,
	 * transfers): it needs the file open for writing, as write(2)
	 * would. An administrator who gives some users only read access
	 * to the device node (mode 0644, a group with r-) lets them query
	 * the ABI and nothing more.
	 */
	if (!(file->f_mode & FMODE_WRITE) && _IOC_TYPE(cmd) == KCOLL_IOC_MAGIC)
		return -EBADF;
	switch (cmd) {
	case KCOLL_IOC_SETUP: {
		struct kcoll_setup p;

		if (copy_from_user(&p, uarg, sizeof(p)))
			return -EFAULT;
		ret = kcoll_ctx_setup(ctx, &p);
		if (ret)
			return ret;
		/* The rings exist now; a failed copy leaves them usable and
		 * a retry gets -EBUSY, exactly like a lost reply. */
		return copy_to_user(uarg, &p, sizeof(p)) ? -EFAULT : 0;
	}
	case KCOLL_IOC_ENTER: {
		struct kcoll_enter e;

		if (copy_from_user(&e, uarg, sizeof(e)))
			return -EFAULT;
		return kcoll_ctx_enter(ctx, &e);
	}
	case KCOLL_IOC_COMM_CREATE:
		return kcoll_comm_create_ioctl(ctx, uarg);
	case KCOLL_IOC_COMM_DESTROY:
		return kcoll_comm_destroy_ioctl(ctx, uarg);
	case KCOLL_IOC_REG_MEM:
		return kcoll_reg_mem_ioctl(ctx, uarg);
	case KCOLL_IOC_DEREG_MEM:
		return kcoll_dereg_mem_ioctl(ctx, uarg);
	case KCOLL_IOC_COMM_ABORT:
		return kcoll_comm_abort_ioctl(ctx, uarg);
	case KCOLL_IOC_COMM_REPORT:
		return kcoll_comm_report_ioctl(ctx, uarg);
	case KCOLL_IOC_GPU_SETUP:
		return kcoll_gpu_setup_ioctl(ctx, uarg);
	case KCOLL_IOC_EVENTFD: {
		struct kcoll_eventfd e;

		if (copy_from_user(&e, uarg, sizeof(e)))
			return -EFAULT;
		return kcoll_ctx_eventfd(ctx, &e);
	}
	default:
		return -ENOTTY;
	}
}

/*
 * Map @len bytes of the vmalloc'ed @region (not VM_USERMAP:
 * remap_vmalloc_range() refuses it) into @vma, as remap_vmalloc_range()
 * would: page by page, never to grow.
 */
static int kcoll_map_region(struct vm_area_struct *vma, void *region,
			    unsigned long len)
{
	unsigned long off;
	int err;

	kcoll_vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	for (off = 0; off < len; off += PAGE_SIZE) {
		err = vm_insert_page(vma, vma->vm_start + off,
				     vmalloc_to_page(region + off));
		if (err)
			return err;
	}
	return 0;
}

static int kcoll_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct kcoll_ctx *ctx = file->private_data;
	unsigned long len = vma->vm_end - vma->vm_start;

	/* Pairs with the release in kcoll_ctx_setup(). */
	if (!smp_load_acquire(&ctx->ready))
		return -ENXIO;
	if (vma->vm_pgoff != (KCOLL_OFF_RINGS >> PAGE_SHIFT))
		return -EINVAL;
	if (len != ctx->layout.size)
		return -EINVAL;
	/* A private (copy-on-write) mapping would silently detach the
	 * application from the kernel's view of the rings. */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	return kcoll_map_region(vma, ctx->region, len);
}

static __poll_t kcoll_poll(struct file *file, poll_table *wait)
{
	struct kcoll_ctx *ctx = file->private_data;

	poll_wait(file, &ctx->cq_wait, wait);
	/* Pairs with the barrier in wq_has_sleeper() on the completion side:
	 * either the waker sees us on the queue or we see its new tail. */
	smp_mb();
	return kcoll_ctx_poll_mask(ctx);
}

static const struct file_operations kcoll_fops = {
	.owner = THIS_MODULE,
	.open = kcoll_open,
	.release = kcoll_release,
	.unlocked_ioctl = kcoll_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = kcoll_mmap,
	.poll = kcoll_poll,
};

static struct miscdevice kcoll_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = KCOLL_DEV_NAME,
	.fops = &kcoll_fops,
	.groups = kcoll_attr_groups,
	.mode = 0666,
};

struct device *kcoll_misc_device(void)
{
	return kcoll_misc.this_device;
}

/* ------------------------------------------------------------------ */
/* The module's workqueue                                               */
/* ------------------------------------------------------------------ */

static struct workqueue_struct *kcoll_wq;
/*
 * Work that may wait for as long as a user likes (kcoll_quota_defer()),
 * or for a peer (a revoke's shutdown: kcoll_comm_peer_revoked()).
 */
static struct workqueue_struct *kcoll_slow_wq;

/* Deferred work of the module: drained (destroy_workqueue) at exit. */
void kcoll_queue_delayed(struct delayed_work *dw, unsigned long delay)
{
	queue_delayed_work(kcoll_wq, dw, delay);
}

void kcoll_queue_work(struct work_struct *w)
{
	queue_work(kcoll_wq, w);
}

/* Queue @w on the workqueue of work that may wait for as long as a user
 * likes; false if it was queued already. */
bool kcoll_queue_slow(struct work_struct *w)
{
	return queue_work(kcoll_slow_wq, w);
}

/* Queue @dw to run in @delay jiffies, moving it if it is already queued. */
void kcoll_mod_delayed(struct delayed_work *dw, unsigned long delay)
{
	mod_delayed_work(kcoll_wq, dw, delay);
}

static int __init kcoll_init(void)
{
	int err;

	kcoll_tune_setup();
	kcoll_knobs_init();
	err = kcoll_reduce_init();
	if (err)
		return err;
	err = kcoll_ring_init();
	if (err)
		return err;
	err = kcoll_ops_init();
	if (err)
		goto out_ring_exit;
	kcoll_wq = alloc_workqueue("kcoll", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!kcoll_wq) {
		err = -ENOMEM;
		goto out_ring_exit;
	}
	kcoll_slow_wq = alloc_workqueue("kcoll_slow", WQ_UNBOUND, 0);
	if (!kcoll_slow_wq) {
		err = -ENOMEM;
		goto out_destroy_wq;
	}
	/* Before the devices: adding them sends events. */
	err = kcoll_nl_init();
	if (err)
		goto out_destroy_slow_wq;
	err = kcoll_ib_init();
	if (err)
		goto out_nl_exit;
	err = kcoll_comm_init();
	if (err)
		goto out_ib_exit;
	err = misc_register(&kcoll_misc);
	if (err)
		goto out_comm_exit;
	kcoll_debugfs_init();
	pr_info("version " KCOLL_VERSION ", ABI %u\n", KCOLL_ABI_VERSION);
	return 0;

out_comm_exit:
	kcoll_comm_exit();
out_ib_exit:
	kcoll_ib_exit();
out_nl_exit:
	kcoll_nl_exit();
out_destroy_slow_wq:
	destroy_workqueue(kcoll_slow_wq);
out_destroy_wq:
	destroy_workqueue(kcoll_wq);
out_ring_exit:
	kcoll_ring_exit();
	return err;
}

static void __exit kcoll_exit(void)
{
	int live;

	kcoll_debugfs_exit();
	misc_deregister(&kcoll_misc);
	kcoll_comm_exit();
	kcoll_ib_exit();
	kcoll_nl_exit();
	/* All files are closed by now; wait for any completion still
	 * unwinding, then for what that deferred (kcoll_quota_defer()). */
	destroy_workqueue(kcoll_wq);
	destroy_workqueue(kcoll_slow_wq);
	live = atomic_read(&kcoll_nr_live_reqs);
	if (live || atomic_read(&kcoll_nr_contexts))
		pr_err("leak: %d request(s), %d context(s) still allocated\n",
		       live, atomic_read(&kcoll_nr_contexts));
	kcoll_ring_exit();
	pr_info("unloaded\n");
}

module_init(kcoll_init);
module_exit(kcoll_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("kcoll developers");
MODULE_DESCRIPTION("Kernel-scheduled collective communication over RDMA");
MODULE_VERSION(KCOLL_VERSION);
