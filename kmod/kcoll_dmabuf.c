// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll dma-buf import: REG_MEM of a dma-buf (GPU memory from its driver,
 * vgem, udmabuf, a dma-heap), the third kind of struct kcoll_buf.
 *
 * Two paths, chosen by the communicator's RDMA device (docs/DESIGN.md,
 * "GPU memory"):
 *
 *  - A real NIC (ib_uses_virt_dma() false): attach dynamically to the
 *    NIC's DMA device (ibdev->dma_device; peer-to-peer allowed), pin, map,
 *    and wait for the exporter's pending kernel fences; then only the DMA
 *    side of the exporter's scatterlist is read (device memory has no
 *    struct page), turned into a page list by the plain-C segmenter
 *    (kcoll_dmaseg.h), from which the buffer's fast-registration MRs and
 *    every grant MR are built. The CPU has no mapping: vaddr is NULL.
 *
 *  - A virtual-DMA device (rxe, siw: ib_uses_virt_dma()): the "NIC" is the
 *    CPU, and its DMA addresses are kernel addresses of pages. The pages
 *    are reached through the exporter's kernel mapping (dma_buf_vmap(),
 *    which keeps them resident) and registered as pinned user pages are.
 *    An exporter without a CPU mapping (device memory) cannot be moved by
 *    such a device: -EOPNOTSUPP.
 *
 * The import holds its own reference to the dma-buf: the fd may be closed.
 * Teardown is the reverse: MRs (kcoll_buf_unregister()), then unmap,
 * unpin, detach (or vunmap), put. Imported bytes are charged to the user
 * (sysfs user_max_dmabuf_mb).
 *
 * move_notify: an exporter that honours pinning never moves a pinned
 * attachment; should one still notify, the import is marked revoked: new
 * operations on it fail with -ENODEV and running ones fail at their next
 * step (kcoll_buf_revoked()).
 *
 * For the tests only: the module parameter dmabuf_test_dev (root, 0600)
 * names a PCI device of the machine; imports then take the real-NIC path
 * against that device (attach, pin, map, segmenting) but are never
 * registered with the RDMA device (rxe would dereference those DMA
 * addresses): a "dry" import, which operations refuse with -ENODEV.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/iosys-map.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <rdma/ib_verbs.h>

#include "kcoll_compat.h"
#include "kcoll_types.h"
#include "kcoll_mem.h"
#include "kcoll_dmabuf.h"
#include "kcoll_dmaseg.h"
#include "kcoll_quota.h"
#include "kcoll_stats.h"
#include "kcoll_sysfs.h"

#ifdef HAVE_MODULE_IMPORT_NS_STRING
MODULE_IMPORT_NS("DMA_BUF");
#else
MODULE_IMPORT_NS(DMA_BUF);
#endif

struct kcoll_dmabuf {
	struct dma_buf *dmabuf;
	/* Real-NIC path */
	struct device *dev;		/* attached to (a reference) */
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;
	bool pinned;
	bool dry;			/* dmabuf_test_dev: never registered */
	/* Virtual-DMA path */
	struct iosys_map map;
	bool vmapped;
	u64 charged;			/* bytes charged to @quota */
	struct kcoll_quota *quota;
	bool revoked;			/* move_notify came; READ_ONCE */
};

static char kcoll_dmabuf_test_dev[32];
module_param_string(dmabuf_test_dev, kcoll_dmabuf_test_dev,
		    sizeof(kcoll_dmabuf_test_dev), 0600);
MODULE_PARM_DESC(dmabuf_test_dev,
		 "Tests only: a PCI device (0000:00:03.0) that dma-buf imports attach to instead of the NIC; such imports are never registered and operations refuse them (default empty)");

static void kcoll_dmabuf_move_notify(struct dma_buf_attachment *attach)
{
	struct kcoll_dmabuf *imp = attach->importer_priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	/* A move before our mapping (the exporter's own, to pin it where
	 * we can reach it) is what the mapping then shows: nothing lost. */
	if (!imp->sgt)
		return;
	WRITE_ONCE(imp->revoked, true);
	kcoll_stat_add(KCOLL_STAT_DMABUF_REVOKED, 1);
	pr_warn_ratelimited("dma-buf %s: its exporter moved a pinned import: operations on it fail\n",
			    imp->dmabuf->exp_name ?: "?");
}

static const struct dma_buf_attach_ops kcoll_dmabuf_attach_ops = {
	.allow_peer2peer = true,
	.move_notify = kcoll_dmabuf_move_notify,
};

static int kcoll_dmabuf_vmap(struct kcoll_dmabuf *imp)
{
#ifdef HAVE_DMA_BUF_VMAP_UNLOCKED
	return dma_buf_vmap_unlocked(imp->dmabuf, &imp->map);
#else
	return dma_buf_vmap(imp->dmabuf, &imp->map);
#endif
}

static void kcoll_dmabuf_vunmap(struct kcoll_dmabuf *imp)
{
#ifdef HAVE_DMA_BUF_VMAP_UNLOCKED
	dma_buf_vunmap_unlocked(imp->dmabuf, &imp->map);
#else
	dma_buf_vunmap(imp->dmabuf, &imp->map);
#endif
}

/* The device dma-bufs are attached to on the real-NIC path (referenced),
 * or NULL: the NIC's own, or dmabuf_test_dev's (*dry set). */
static struct device *kcoll_dmabuf_dev(struct ib_device *ibdev, bool *dry)
{
	char buf[sizeof(kcoll_dmabuf_test_dev)], *name;

	/* Read under the parameter lock: root may write it meanwhile. */
	kernel_param_lock(THIS_MODULE);
	strscpy(buf, kcoll_dmabuf_test_dev, sizeof(buf));
	kernel_param_unlock(THIS_MODULE);
	name = strim(buf);
	*dry = name[0];
	if (*dry)
		return bus_find_device_by_name(&pci_bus_type, NULL, name);
	if (!ibdev || ib_uses_virt_dma(ibdev) || !ibdev->dma_device)
		return NULL;
	return get_device(ibdev->dma_device);
}

/* Undo kcoll_dmabuf_attach(); any part of it. */
static void kcoll_dmabuf_detach(struct kcoll_dmabuf *imp)
{
	struct dma_resv *resv = imp->dmabuf->resv;

	if (imp->sgt || imp->pinned) {
		dma_resv_lock(resv, NULL);
		if (imp->sgt)
			dma_buf_unmap_attachment(imp->attach, imp->sgt,
						 DMA_BIDIRECTIONAL);
		if (imp->pinned)
			dma_buf_unpin(imp->attach);
		/* Under the lock: move_notify reads them under it. */
		imp->sgt = NULL;
		imp->pinned = false;
		dma_resv_unlock(resv);
	}
	if (imp->attach)
		dma_buf_detach(imp->dmabuf, imp->attach);
	imp->attach = NULL;
	put_device(imp->dev);
	imp->dev = NULL;
}

/*
 * Real-NIC path: attach to imp->dev, pin, map; the exporter's moves that
 * are still running (its kernel fences) are waited for, for sysfs
 * dmabuf_wait_ms at most (-ETIMEDOUT: a hung GPU never signals them, and
 * this holds the comm's dev_sem, which a device removal waits for) and
 * interruptibly (-EINTR, or the call is restarted). The wait is outside
 * the reservation lock, which others' imports of the same buffer and
 * every teardown take: the mapping is pinned and cannot move meanwhile.
 */
static int kcoll_dmabuf_attach(struct kcoll_dmabuf *imp)
{
	struct dma_resv *resv = imp->dmabuf->resv;
	struct sg_table *sgt;
	long left;
	int err;

	imp->attach = dma_buf_dynamic_attach(imp->dmabuf, imp->dev,
					     &kcoll_dmabuf_attach_ops, imp);
	if (IS_ERR(imp->attach)) {
		err = PTR_ERR(imp->attach);
		imp->attach = NULL;
		return err;
	}
	/* Pin and map under the reservation lock: what both kernels
	 * expect of a dynamic importer. */
	err = dma_resv_lock_interruptible(resv, NULL);
	if (err)
		return err;
	err = dma_buf_pin(imp->attach);
	if (err)
		goto out_unlock;
	imp->pinned = true;
	sgt = dma_buf_map_attachment(imp->attach, DMA_BIDIRECTIONAL);
	if (IS_ERR(sgt)) {
		err = PTR_ERR(sgt);
		goto out_unlock;
	}
	imp->sgt = sgt;
	dma_resv_unlock(resv);

	left = dma_resv_wait_timeout(resv, DMA_RESV_USAGE_KERNEL, true,
				     msecs_to_jiffies(kcoll_dmabuf_wait_ms()));
	err = left < 0 ? left : left ? 0 : -ETIMEDOUT;
	if (err == -ETIMEDOUT)
		pr_warn_ratelimited("pid %d: dma-buf %lu B: its exporter's memory moves still run after %u ms (sysfs dmabuf_wait_ms): not registered\n",
				    task_pid_nr(current),
				    (unsigned long)imp->dmabuf->size,
				    kcoll_dmabuf_wait_ms());
	return err;

out_unlock:
	dma_resv_unlock(resv);
	return err;
}

/*
 * The page list of bytes [@off, @off + @len) of the mapped buffer into
 * b->dma (b->npages, b->off0): the DMA side of the scatterlist only.
 */
static int kcoll_dmabuf_segment(struct kcoll_buf *b, struct kcoll_dmabuf *imp,
				u64 off, u64 len)
{
	struct kcoll_dma_ent *ents;
	struct scatterlist *sg;
	u64 max = (len >> PAGE_SHIFT) + 2, npages, off0;
	unsigned int i;
	int err;

	/* Sized by the exporter's list and the user's length: a refusal,
	 * not a WARN, when that is more than kvmalloc gives. */
	ents = kvcalloc(imp->sgt->nents ?: 1, sizeof(*ents),
			GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	b->dma = kvcalloc(max, sizeof(*b->dma),
			  GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!ents || !b->dma) {
		err = -ENOMEM;
		goto out_free;
	}
	for_each_sgtable_dma_sg(imp->sgt, sg, i) {
		ents[i].addr = sg_dma_address(sg);
		ents[i].len = sg_dma_len(sg);
	}
	/* dma_addr_t is u64 on every kernel this builds for (x86-64). */
	BUILD_BUG_ON(sizeof(*b->dma) != sizeof(u64));
	err = kcoll_dmaseg_pages(ents, imp->sgt->nents, off, len, PAGE_SIZE,
				 (u64 *)b->dma, max, &npages, &off0);
	if (err)
		goto out_free;
	if (npages > UINT_MAX) {
		err = -EOVERFLOW;
		goto out_free;
	}
	b->npages = npages;
	b->off0 = off0;
	kvfree(ents);
	return 0;

out_free:
	kvfree(ents);
	kvfree(b->dma);
	b->dma = NULL;
	return err;
}

/* Virtual-DMA path: the exporter's kernel mapping and its pages. */
static int kcoll_dmabuf_map_cpu(struct kcoll_buf *b, struct kcoll_dmabuf *imp,
				u64 off, u64 len)
{
	u64 first = off >> PAGE_SHIFT, npages, i;
	u8 *base;
	int err;

	err = kcoll_dmabuf_vmap(imp);
	if (err == -EINVAL || err == -EOPNOTSUPP || err == -ENOTSUPP ||
	    err == -ENXIO)
		/* No CPU mapping: device memory (dma-buf core's answer
		 * without .vmap, or the exporter's). This device moves data
		 * with the CPU and cannot reach it. */
		return -EOPNOTSUPP;
	if (err)
		return err;
	imp->vmapped = true;
	if (imp->map.is_iomem)
		return -EOPNOTSUPP;	/* I/O memory: no pages */
	base = imp->map.vaddr;
	/* As the NIC path's: b->npages counts b->pages. */
	npages = (PAGE_ALIGN(off + len) >> PAGE_SHIFT) - first;
	if (npages > UINT_MAX)
		return -EOVERFLOW;
	b->npages = npages;
	b->off0 = off & ~PAGE_MASK;
	b->pages = kvmalloc_array(b->npages, sizeof(*b->pages),
				  GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!b->pages)
		return -ENOMEM;
	for (i = 0; i < b->npages; i++) {
		void *va = base + ((first + i) << PAGE_SHIFT);

		b->pages[i] = is_vmalloc_addr(va) ? vmalloc_to_page(va) :
			      virt_addr_valid(va) ? virt_to_page(va) : NULL;
		if (!b->pages[i])
			return -EOPNOTSUPP;
	}
	if (!b->nocpu)
		b->vaddr = base + off;
	return 0;
}

static void kcoll_dmabuf_release(struct kcoll_buf *b)
{
	struct kcoll_dmabuf *imp = b->imp;

	if (!imp)
		return;
	kvfree(b->pages);
	kvfree(b->dma);
	b->dma = NULL;
	if (imp->vmapped)
		kcoll_dmabuf_vunmap(imp);
	kcoll_dmabuf_detach(imp);
	dma_buf_put(imp->dmabuf);
	if (imp->charged) {
		kcoll_quota_uncharge_dmabuf(imp->quota, imp->charged);
		kcoll_quota_put(imp->quota);
	}
	kfree(imp);
	b->imp = NULL;
}

/* Real-NIC path: segment @s is built from the page list, DMA side only
 * (it is mapped already, for the NIC's DMA device). */
static int kcoll_dmabuf_dma_map(struct kcoll_buf *b, struct kcoll_mrseg *s,
				unsigned int first, unsigned int n)
{
	struct scatterlist *sg;
	unsigned int i;
	int err;

	err = sg_alloc_table(&s->sgt, n, GFP_KERNEL);
	if (err)
		return err;
	for_each_sg(s->sgt.sgl, sg, n, i) {
		sg_dma_address(sg) = b->dma[first + i];
		sg_dma_len(sg) = PAGE_SIZE;
	}
	return 0;
}

static void kcoll_dmabuf_dma_unmap(struct kcoll_buf *b, struct kcoll_mrseg *s)
{
}

static const struct kcoll_buf_ops kcoll_buf_dmabuf_dev = {
	.name = "dmabuf",
	.dma_map = kcoll_dmabuf_dma_map,
	.dma_unmap = kcoll_dmabuf_dma_unmap,
	.release = kcoll_dmabuf_release,
	.dma_ready = true,
};

/* Virtual-DMA path: its pages go the way pinned pages go. */
static const struct kcoll_buf_ops kcoll_buf_dmabuf_virt = {
	.name = "dmabuf-cpu",
	.dma_map = kcoll_buf_pages_dma_map,
	.dma_unmap = kcoll_buf_pages_dma_unmap,
	.release = kcoll_dmabuf_release,
};

/*
 * kcoll_buf_import_dmabuf - import bytes [@off, @off + @len) of dma-buf
 * @fd into @b for @comm's device, charged to @q. @nocpu: the CPU must not
 * touch it. Process context. The caller registers @b afterwards
 * (kcoll_buf_register()) unless kcoll_buf_dry(@b).
 */
int kcoll_buf_import_dmabuf(struct kcoll_buf *b, struct kcoll_comm *comm,
			    int fd, u64 off, u64 len, bool nocpu,
			    struct kcoll_quota *q)
{
	struct kcoll_dmabuf *imp;
	struct dma_buf *dmabuf;
	int err;

	memset(b, 0, sizeof(*b));
	if (!len || off + len < off)
		return -EINVAL;
	dmabuf = dma_buf_get(fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);	/* -EBADF, or -EINVAL: not one */
	if (off + len > dmabuf->size) {
		dma_buf_put(dmabuf);
		return -EINVAL;
	}
	/* An import is written (by peers, by copies): not from an fd that
	 * was given read access only (a PRIME export without DRM_RDWR). */
	if (!(dmabuf->file->f_mode & FMODE_WRITE)) {
		dma_buf_put(dmabuf);
		return -EACCES;
	}
	imp = kzalloc(sizeof(*imp), GFP_KERNEL_ACCOUNT);
	if (!imp) {
		dma_buf_put(dmabuf);
		return -ENOMEM;
	}
	imp->dmabuf = dmabuf;
	b->imp = imp;
	b->len = len;
	b->writable = true;
	b->nocpu = nocpu;
	/* Charged what it holds: every path attaches and maps (or vmaps)
	 * the whole dma-buf, whatever slice is registered. */
	err = kcoll_quota_charge_dmabuf(q, dmabuf->size);
	if (err)
		goto out_release;
	imp->charged = dmabuf->size;
	imp->quota = kcoll_quota_ref(q);

	imp->dev = kcoll_dmabuf_dev(comm->ibdev, &imp->dry);
	if (imp->dry && !imp->dev) {
		err = -ENODEV;	/* dmabuf_test_dev names no PCI device */
		goto out_release;
	}
	if (imp->dev) {
		b->ops = &kcoll_buf_dmabuf_dev;
		err = kcoll_dmabuf_attach(imp);
		if (!err)
			err = kcoll_dmabuf_segment(b, imp, off, len);
		b->nocpu = true;	/* no CPU mapping on this path */
	} else {
		b->ops = &kcoll_buf_dmabuf_virt;
		err = kcoll_dmabuf_map_cpu(b, imp, off, len);
	}
	if (err)
		goto out_release;
	kcoll_stat_add(KCOLL_STAT_DMABUF_IMPORTS, 1);
	return 0;

out_release:
	kcoll_dmabuf_release(b);
	memset(b, 0, sizeof(*b));
	return err;
}

/*
 * @b's communicator lost its device (after kcoll_buf_unregister()): an
 * import attached to it lets go of its attachment, pin and mapping now.
 * Unmapping them later, at the owner's DEREG_MEM or close, would call the
 * DMA API on a device already deleted. Operations find no MRs (-ENODEV).
 */
void kcoll_buf_device_gone(struct kcoll_buf *b)
{
	struct kcoll_dmabuf *imp = b->imp;

	if (!imp || !imp->attach)
		return;
	kvfree(b->dma);
	b->dma = NULL;
	kcoll_dmabuf_detach(imp);
}

/* A dry import (dmabuf_test_dev): never registered, refused by operations. */
bool kcoll_buf_dry(const struct kcoll_buf *b)
{
	return b->imp && b->imp->dry;
}

/* Its exporter moved it (move_notify): no operation may use it now. */
bool kcoll_buf_revoked(const struct kcoll_buf *b)
{
	return b->imp && READ_ONCE(b->imp->revoked);
}
