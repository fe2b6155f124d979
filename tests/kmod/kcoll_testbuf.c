// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll_testbuf: a dma-buf exporter for testing kcoll's dma-buf import
 * (REG_MEM with a dma-buf fd, GPUDirect RDMA style) in VMs that have no GPU.
 * Test-only; never load it on a production system.
 *
 * /dev/kcoll_testbuf (mode 0666) makes buffers of zeroed kernel pages,
 * allocated in chunks of different sizes so that scatterlists have entries
 * of varying length. A buffer can imitate GPU memory (KCOLL_TESTBUF_VRAM: no
 * CPU access, a table of DMA addresses without pages) and can fail attach,
 * map_dma_buf or vmap on request. The exporter is dynamic (pin/unpin), and
 * KCOLL_TESTBUF_IOC_REVOKE calls dma_buf_move_notify() as an exporter
 * evicting memory would. debugfs kcoll_testbuf/counters counts what
 * importers hold, so a test can prove an importer let go of everything.
 * The ABI and the counters are described in kcoll_testbuf.h.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/debugfs.h>
#include <linux/dma-buf.h>
#include <linux/dma-fence.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/iosys-map.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/scatterlist.h>
#include <linux/sched/signal.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "kcoll_testbuf.h"

/* Every other chunk is 1 << KCOLL_TESTBUF_BIG_ORDER pages (16 KiB). */
#define KCOLL_TESTBUF_BIG_ORDER	2

/* Physically contiguous pages, one scatterlist entry. */
struct kcoll_testbuf_chunk {
	u32 first;		/* index into kcoll_testbuf_buf.pages */
	u32 npages;
};

struct kcoll_testbuf_buf {
	u32 flags;		/* KCOLL_TESTBUF_* */
	u32 npages;
	u32 nchunks;
	struct page **pages;	/* npages order-0 pages */
	struct kcoll_testbuf_chunk *chunks;
	struct mutex vmap_lock;	/* vmap_count, vaddr */
	unsigned int vmap_count;
	void *vaddr;
	struct mutex fence_mutex;	/* fence */
	struct dma_fence *fence;	/* KCOLL_TESTBUF_FENCE_ADD's, pending */
};

/* A fence with its lock: it may outlive the buffer (the reservation object
 * lets go of it last). dma_fence_free() frees it as one (base first). */
struct kcoll_testbuf_fence_obj {
	struct dma_fence base;
	spinlock_t lock;
};

/* See kcoll_testbuf.h for what each one counts. */
static struct {
	/* live */
	atomic_long_t buffers;
	atomic_long_t attachments;
	atomic_long_t pins;
	atomic_long_t mappings;
	atomic_long_t vmaps;
	atomic_long_t mmaps;
	atomic_long_t fences;
	/* totals */
	atomic_long_t attach_calls;
	atomic_long_t map_calls;
	atomic_long_t vmap_calls;
	atomic_long_t revokes;
	atomic_long_t injected_failures;
	atomic_long_t dynamic_attachments;
	atomic_long_t peer2peer_attachments;
	atomic_long_t fences_added;
} kcoll_testbuf_stats;

#define KCOLL_TESTBUF_COUNTER(name) { #name, &kcoll_testbuf_stats.name }

static const struct {
	const char *name;
	atomic_long_t *val;
} kcoll_testbuf_counter_table[] = {
	KCOLL_TESTBUF_COUNTER(buffers),
	KCOLL_TESTBUF_COUNTER(attachments),
	KCOLL_TESTBUF_COUNTER(pins),
	KCOLL_TESTBUF_COUNTER(mappings),
	KCOLL_TESTBUF_COUNTER(vmaps),
	KCOLL_TESTBUF_COUNTER(mmaps),
	KCOLL_TESTBUF_COUNTER(fences),
	KCOLL_TESTBUF_COUNTER(attach_calls),
	KCOLL_TESTBUF_COUNTER(map_calls),
	KCOLL_TESTBUF_COUNTER(vmap_calls),
	KCOLL_TESTBUF_COUNTER(revokes),
	KCOLL_TESTBUF_COUNTER(injected_failures),
	KCOLL_TESTBUF_COUNTER(dynamic_attachments),
	KCOLL_TESTBUF_COUNTER(peer2peer_attachments),
	KCOLL_TESTBUF_COUNTER(fences_added),
};

static void kcoll_testbuf_count(atomic_long_t *counter)
{
	atomic_long_inc(counter);
}

static void kcoll_testbuf_uncount(atomic_long_t *counter)
{
	WARN_ON_ONCE(atomic_long_dec_return(counter) < 0);
}

/* ---------------------------------------------------------------- memory */

/* NULL-safe; frees whatever part of a buffer was allocated. */
static void kcoll_testbuf_free(struct kcoll_testbuf_buf *buf)
{
	u32 i;

	if (!buf)
		return;
	if (buf->pages) {
		/* Chunks were split_page()d: every page goes back alone. */
		for (i = 0; i < buf->npages; i++)
			if (buf->pages[i])
				__free_page(buf->pages[i]);
		kvfree(buf->pages);
	}
	kvfree(buf->chunks);
	mutex_destroy(&buf->vmap_lock);
	mutex_destroy(&buf->fence_mutex);
	kfree(buf);
}

/*
 * Fill buf->pages with zeroed pages in chunks of alternately 16 KiB and 4 KiB
 * (16 KiB falls back to 4 KiB when no such block is free, and the tail is in
 * 4 KiB chunks), so that tables get entries of different lengths.
 */
static int kcoll_testbuf_alloc_pages(struct kcoll_testbuf_buf *buf)
{
	const gfp_t gfp = GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN;
	const u32 big = 1U << KCOLL_TESTBUF_BIG_ORDER;
	u32 i = 0, c = 0, j, n;
	struct page *page;

	while (i < buf->npages) {
		if (fatal_signal_pending(current))
			return -EINTR;
		page = NULL;
		n = 1;
		if (!(c & 1) && buf->npages - i >= big) {
			page = alloc_pages(gfp | __GFP_NORETRY,
					   KCOLL_TESTBUF_BIG_ORDER);
			if (page) {
				/* Independent order-0 pages: vm_insert_page
				 * and __free_page work on each one.
				 */
				split_page(page, KCOLL_TESTBUF_BIG_ORDER);
				n = big;
			}
		}
		if (!page) {
			page = alloc_page(gfp | __GFP_RETRY_MAYFAIL);
			if (!page)
				return -ENOMEM;
		}
		for (j = 0; j < n; j++)
			buf->pages[i + j] = page + j;
		buf->chunks[c].first = i;
		buf->chunks[c].npages = n;
		i += n;
		c++;
		cond_resched();
	}
	buf->nchunks = c;
	return 0;
}

static struct kcoll_testbuf_buf *kcoll_testbuf_alloc(u64 size, u32 flags)
{
	struct kcoll_testbuf_buf *buf;
	int ret;

	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf)
		return ERR_PTR(-ENOMEM);
	mutex_init(&buf->vmap_lock);
	mutex_init(&buf->fence_mutex);
	buf->flags = flags;
	buf->npages = size >> PAGE_SHIFT;

	/* At most one chunk per page. */
	buf->pages = kvcalloc(buf->npages, sizeof(*buf->pages), GFP_KERNEL);
	buf->chunks = kvcalloc(buf->npages, sizeof(*buf->chunks), GFP_KERNEL);
	if (!buf->pages || !buf->chunks) {
		ret = -ENOMEM;
		goto free_buf;
	}
	ret = kcoll_testbuf_alloc_pages(buf);
	if (ret)
		goto free_buf;
	return buf;

free_buf:
	kcoll_testbuf_free(buf);
	return ERR_PTR(ret);
}

/* ---------------------------------------------------------------- dma-buf */

static int kcoll_testbuf_attach(struct dma_buf *dmabuf,
				struct dma_buf_attachment *attach)
{
	struct kcoll_testbuf_buf *buf = dmabuf->priv;

	kcoll_testbuf_count(&kcoll_testbuf_stats.attach_calls);
	if (buf->flags & KCOLL_TESTBUF_FAIL_ATTACH) {
		kcoll_testbuf_count(&kcoll_testbuf_stats.injected_failures);
		return -EBUSY;
	}
	kcoll_testbuf_count(&kcoll_testbuf_stats.attachments);
	if (dma_buf_attachment_is_dynamic(attach))
		kcoll_testbuf_count(&kcoll_testbuf_stats.dynamic_attachments);
	if (attach->peer2peer)
		kcoll_testbuf_count(&kcoll_testbuf_stats.peer2peer_attachments);
	return 0;
}

/* Called only for attachments whose attach succeeded. */
static void kcoll_testbuf_detach(struct dma_buf *dmabuf,
				 struct dma_buf_attachment *attach)
{
	kcoll_testbuf_uncount(&kcoll_testbuf_stats.attachments);
}

/* Nothing ever moves, so pinning is only counted. */
static int kcoll_testbuf_pin(struct dma_buf_attachment *attach)
{
	dma_resv_assert_held(attach->dmabuf->resv);
	kcoll_testbuf_count(&kcoll_testbuf_stats.pins);
	return 0;
}

static void kcoll_testbuf_unpin(struct dma_buf_attachment *attach)
{
	dma_resv_assert_held(attach->dmabuf->resv);
	kcoll_testbuf_uncount(&kcoll_testbuf_stats.pins);
}

/* Undo the first @count dma_map_page() of kcoll_testbuf_map_vram(). */
static void kcoll_testbuf_unmap_vram(struct device *dev, struct sg_table *sgt,
				     unsigned int count,
				     enum dma_data_direction dir)
{
	struct scatterlist *sg;
	unsigned int i;

	for_each_sg(sgt->sgl, sg, count, i)
		dma_unmap_page(dev, sg_dma_address(sg), sg_dma_len(sg), dir);
}

/*
 * GPU memory as NVIDIA's exporter gives it: every entry carries a DMA
 * address and length only. sg_alloc_table() left page_link without a page
 * (just the end marker on the last entry) and length 0, and so they stay.
 */
static int kcoll_testbuf_map_vram(struct kcoll_testbuf_buf *buf,
				  struct device *dev, struct sg_table *sgt,
				  enum dma_data_direction dir)
{
	const struct kcoll_testbuf_chunk *chunk;
	struct scatterlist *sg;
	dma_addr_t addr;
	size_t len;
	unsigned int i;

	for_each_sgtable_sg(sgt, sg, i) {
		chunk = &buf->chunks[i];
		len = (size_t)chunk->npages << PAGE_SHIFT;
		addr = dma_map_page(dev, buf->pages[chunk->first], 0, len, dir);
		if (dma_mapping_error(dev, addr)) {
			kcoll_testbuf_unmap_vram(dev, sgt, i, dir);
			return -EIO;
		}
		sg_dma_address(sg) = addr;
		sg_dma_len(sg) = len;
	}
	return 0;
}

/* Ordinary memory: one page-backed entry per chunk, DMA-mapped. */
static int kcoll_testbuf_map_pages(struct kcoll_testbuf_buf *buf,
				   struct device *dev, struct sg_table *sgt,
				   enum dma_data_direction dir)
{
	const struct kcoll_testbuf_chunk *chunk;
	struct scatterlist *sg;
	unsigned int i;

	for_each_sgtable_sg(sgt, sg, i) {
		chunk = &buf->chunks[i];
		sg_set_page(sg, buf->pages[chunk->first],
			    chunk->npages << PAGE_SHIFT, 0);
	}
	return dma_map_sgtable(dev, sgt, dir, 0);
}

static struct sg_table *kcoll_testbuf_map(struct dma_buf_attachment *attach,
					  enum dma_data_direction dir)
{
	struct kcoll_testbuf_buf *buf = attach->dmabuf->priv;
	struct device *dev = attach->dev;
	struct sg_table *sgt;
	int ret;

	/* Dynamic exporter: the core holds the lock around every map. */
	dma_resv_assert_held(attach->dmabuf->resv);
	kcoll_testbuf_count(&kcoll_testbuf_stats.map_calls);
	if (buf->flags & KCOLL_TESTBUF_FAIL_MAP) {
		kcoll_testbuf_count(&kcoll_testbuf_stats.injected_failures);
		return ERR_PTR(-ENOMEM);
	}
	/*
	 * A device that cannot do DMA (a software RDMA device, say): the DMA
	 * API would WARN, and a WARN fails the VM tests; refuse quietly.
	 */
	if (!dev->dma_mask)
		return ERR_PTR(-EINVAL);

	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(sgt, buf->nchunks, GFP_KERNEL);
	if (ret)
		goto free_sgt;
	if (buf->flags & KCOLL_TESTBUF_VRAM)
		ret = kcoll_testbuf_map_vram(buf, dev, sgt, dir);
	else
		ret = kcoll_testbuf_map_pages(buf, dev, sgt, dir);
	if (ret)
		goto free_table;
	kcoll_testbuf_count(&kcoll_testbuf_stats.mappings);
	return sgt;

free_table:
	sg_free_table(sgt);
free_sgt:
	kfree(sgt);
	return ERR_PTR(ret);
}

static void kcoll_testbuf_unmap(struct dma_buf_attachment *attach,
				struct sg_table *sgt,
				enum dma_data_direction dir)
{
	struct kcoll_testbuf_buf *buf = attach->dmabuf->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (buf->flags & KCOLL_TESTBUF_VRAM)
		kcoll_testbuf_unmap_vram(attach->dev, sgt, sgt->nents, dir);
	else
		dma_unmap_sgtable(attach->dev, sgt, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
	kcoll_testbuf_uncount(&kcoll_testbuf_stats.mappings);
}

/* Signal and drop the buffer's pending fence, if any. */
static void kcoll_testbuf_fence_end(struct kcoll_testbuf_buf *buf)
{
	dma_fence_signal(buf->fence);
	dma_fence_put(buf->fence);
	buf->fence = NULL;
	kcoll_testbuf_uncount(&kcoll_testbuf_stats.fences);
}

/* After the last reference: no attachment, vmap or user mapping is left. */
static void kcoll_testbuf_release(struct dma_buf *dmabuf)
{
	struct kcoll_testbuf_buf *buf = dmabuf->priv;

	WARN_ON(buf->vmap_count);
	if (buf->fence)
		kcoll_testbuf_fence_end(buf);
	kcoll_testbuf_free(buf);
	kcoll_testbuf_uncount(&kcoll_testbuf_stats.buffers);
}

/*
 * The core counts vmaps itself and calls this for the first one only, under
 * dmabuf->lock (6.1) or the reservation lock (6.12); the own count and
 * mutex keep it right whichever way it is called.
 */
static int kcoll_testbuf_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct kcoll_testbuf_buf *buf = dmabuf->priv;
	void *vaddr;

	kcoll_testbuf_count(&kcoll_testbuf_stats.vmap_calls);
	if (buf->flags & KCOLL_TESTBUF_FAIL_VMAP) {
		kcoll_testbuf_count(&kcoll_testbuf_stats.injected_failures);
		return -ENOMEM;
	}
	if (buf->flags & KCOLL_TESTBUF_VRAM)
		return -EOPNOTSUPP;

	mutex_lock(&buf->vmap_lock);
	if (!buf->vmap_count) {
		vaddr = vmap(buf->pages, buf->npages, VM_MAP, PAGE_KERNEL);
		if (!vaddr) {
			mutex_unlock(&buf->vmap_lock);
			return -ENOMEM;
		}
		buf->vaddr = vaddr;
	}
	buf->vmap_count++;
	iosys_map_set_vaddr(map, buf->vaddr);
	mutex_unlock(&buf->vmap_lock);
	kcoll_testbuf_count(&kcoll_testbuf_stats.vmaps);
	return 0;
}

static void kcoll_testbuf_vunmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct kcoll_testbuf_buf *buf = dmabuf->priv;

	mutex_lock(&buf->vmap_lock);
	if (WARN_ON(!buf->vmap_count || map->is_iomem ||
		    map->vaddr != buf->vaddr)) {
		mutex_unlock(&buf->vmap_lock);
		return;
	}
	if (!--buf->vmap_count) {
		vunmap(buf->vaddr);
		buf->vaddr = NULL;
	}
	mutex_unlock(&buf->vmap_lock);
	kcoll_testbuf_uncount(&kcoll_testbuf_stats.vmaps);
}

/*
 * Each VMA of a user mapping counts once: open is called for copies (fork,
 * split, mremap), close for every one that goes. vm_insert_page() made the
 * VMA VM_MIXEDMAP, which is never merged away (freed without close). The
 * VMA's file holds the dma-buf, and so this module, until after close.
 */
static void kcoll_testbuf_vm_open(struct vm_area_struct *vma)
{
	kcoll_testbuf_count(&kcoll_testbuf_stats.mmaps);
}

static void kcoll_testbuf_vm_close(struct vm_area_struct *vma)
{
	kcoll_testbuf_uncount(&kcoll_testbuf_stats.mmaps);
}

static const struct vm_operations_struct kcoll_testbuf_vm_ops = {
	.open = kcoll_testbuf_vm_open,
	.close = kcoll_testbuf_vm_close,
};

/*
 * All pages are inserted now (there is no fault handler), so a range zapped
 * later (madvise(MADV_DONTNEED)) reads as SIGBUS. Only shared mappings: a
 * private one would copy on write and hide the buffer.
 */
static int kcoll_testbuf_mmap(struct dma_buf *dmabuf,
			      struct vm_area_struct *vma)
{
	struct kcoll_testbuf_buf *buf = dmabuf->priv;
	unsigned long npages = vma_pages(vma);
	unsigned long first = vma->vm_pgoff;
	unsigned long addr = vma->vm_start;
	unsigned long i;
	int ret;

	if (buf->flags & KCOLL_TESTBUF_VRAM)
		return -EOPNOTSUPP;
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	if (first >= buf->npages || npages > buf->npages - first)
		return -EINVAL;

	/*
	 * On failure the mmap caller unmaps what was inserted; vm_ops is set
	 * only on success, so close is called only for counted VMAs.
	 */
	for (i = 0; i < npages; i++, addr += PAGE_SIZE) {
		ret = vm_insert_page(vma, addr, buf->pages[first + i]);
		if (ret)
			return ret;
	}
	vma->vm_ops = &kcoll_testbuf_vm_ops;
	kcoll_testbuf_count(&kcoll_testbuf_stats.mmaps);
	return 0;
}

/* Cached kernel memory, coherent on x86: nothing to do around CPU access. */
static int kcoll_testbuf_begin_cpu_access(struct dma_buf *dmabuf,
					  enum dma_data_direction dir)
{
	return 0;
}

static int kcoll_testbuf_end_cpu_access(struct dma_buf *dmabuf,
					enum dma_data_direction dir)
{
	return 0;
}

static const struct dma_buf_ops kcoll_testbuf_ops = {
	.attach = kcoll_testbuf_attach,
	.detach = kcoll_testbuf_detach,
	.pin = kcoll_testbuf_pin,
	.unpin = kcoll_testbuf_unpin,
	.map_dma_buf = kcoll_testbuf_map,
	.unmap_dma_buf = kcoll_testbuf_unmap,
	.release = kcoll_testbuf_release,
	.begin_cpu_access = kcoll_testbuf_begin_cpu_access,
	.end_cpu_access = kcoll_testbuf_end_cpu_access,
	.mmap = kcoll_testbuf_mmap,
	.vmap = kcoll_testbuf_vmap,
	.vunmap = kcoll_testbuf_vunmap,
};

/*
 * "vram" buffers have no .vmap at all, like an exporter of device memory:
 * the dma-buf core then refuses a vmap with -EINVAL quietly, where an
 * exporter's failing .vmap makes it WARN (6.1 and 6.12).
 */
static const struct dma_buf_ops kcoll_testbuf_vram_ops = {
	.attach = kcoll_testbuf_attach,
	.detach = kcoll_testbuf_detach,
	.pin = kcoll_testbuf_pin,
	.unpin = kcoll_testbuf_unpin,
	.map_dma_buf = kcoll_testbuf_map,
	.unmap_dma_buf = kcoll_testbuf_unmap,
	.release = kcoll_testbuf_release,
	.begin_cpu_access = kcoll_testbuf_begin_cpu_access,
	.end_cpu_access = kcoll_testbuf_end_cpu_access,
	.mmap = kcoll_testbuf_mmap,
};

/* ---------------------------------------------------------------- ioctls */

static int kcoll_testbuf_create(struct kcoll_testbuf_create __user *uarg)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp_info);
	struct kcoll_testbuf_create arg;
	struct kcoll_testbuf_buf *buf;
	struct dma_buf *dmabuf;
	int fd, ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if ((arg.flags & ~KCOLL_TESTBUF_FLAGS_ALL) || arg.resv[0] ||
	    arg.resv[1])
		return -EINVAL;
	if (!arg.size || !PAGE_ALIGNED(arg.size))
		return -EINVAL;
	if (arg.size > KCOLL_TESTBUF_MAX_SIZE)
		return -E2BIG;

	/*
	 * The fd is reserved first and installed last, once the caller has
	 * it: a failed copy_to_user can then still take everything back
	 * (dma_buf_fd() would have published the fd already).
	 */
	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0)
		return fd;

	buf = kcoll_testbuf_alloc(arg.size, arg.flags);
	if (IS_ERR(buf)) {
		ret = PTR_ERR(buf);
		goto put_fd;
	}

	exp_info.ops = arg.flags & KCOLL_TESTBUF_VRAM ?
		       &kcoll_testbuf_vram_ops : &kcoll_testbuf_ops;
	exp_info.owner = THIS_MODULE;
	exp_info.size = arg.size;
	exp_info.flags = O_RDWR;
	exp_info.priv = buf;
	dmabuf = dma_buf_export(&exp_info);
	if (IS_ERR(dmabuf)) {
		ret = PTR_ERR(dmabuf);
		goto free_buf;
	}
	/* From here the buffer is freed by kcoll_testbuf_release(). */
	kcoll_testbuf_count(&kcoll_testbuf_stats.buffers);

	arg.fd = fd;
	if (copy_to_user(uarg, &arg, sizeof(arg))) {
		ret = -EFAULT;
		goto put_dmabuf;
	}
	fd_install(fd, dmabuf->file);	/* the fd takes the export's ref */
	return 0;

put_dmabuf:
	dma_buf_put(dmabuf);
	buf = NULL;		/* the release frees it */
free_buf:
	kcoll_testbuf_free(buf);
put_fd:
	put_unused_fd(fd);
	return ret;
}

/* A referenced dma-buf of this exporter from @fd, or an ERR_PTR (EINVAL:
 * another exporter's, or not a dma-buf). */
static struct dma_buf *kcoll_testbuf_get(int fd)
{
	struct dma_buf *dmabuf = dma_buf_get(fd);

	if (IS_ERR(dmabuf))
		return dmabuf;
	if (dmabuf->ops != &kcoll_testbuf_ops &&
	    dmabuf->ops != &kcoll_testbuf_vram_ops) {
		dma_buf_put(dmabuf);
		return ERR_PTR(-EINVAL);
	}
	return dmabuf;
}

static int kcoll_testbuf_revoke(struct kcoll_testbuf_revoke __user *uarg)
{
	struct kcoll_testbuf_revoke arg;
	struct dma_buf *dmabuf;
	int ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.resv)
		return -EINVAL;

	dmabuf = kcoll_testbuf_get(arg.fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	ret = dma_resv_lock_interruptible(dmabuf->resv, NULL);
	if (ret)
		goto put_dmabuf;
	dma_buf_move_notify(dmabuf);
	dma_resv_unlock(dmabuf->resv);
	kcoll_testbuf_count(&kcoll_testbuf_stats.revokes);

put_dmabuf:
	dma_buf_put(dmabuf);
	return ret;
}

static const char *kcoll_testbuf_fence_name(struct dma_fence *f)
{
	return "kcoll_testbuf";
}

static const struct dma_fence_ops kcoll_testbuf_fence_ops = {
	.get_driver_name = kcoll_testbuf_fence_name,
	.get_timeline_name = kcoll_testbuf_fence_name,
};

/* Add a kernel-usage fence under the reservation lock: buf->fence_mutex
 * held. */
static int kcoll_testbuf_fence_add(struct dma_buf *dmabuf,
				   struct kcoll_testbuf_buf *buf)
{
	struct kcoll_testbuf_fence_obj *o;
	struct dma_fence *f;
	int ret;

	BUILD_BUG_ON(offsetof(struct kcoll_testbuf_fence_obj, base));
	if (buf->fence)
		return -EBUSY;
	o = kzalloc(sizeof(*o), GFP_KERNEL);
	if (!o)
		return -ENOMEM;
	spin_lock_init(&o->lock);
	f = &o->base;
	dma_fence_init(f, &kcoll_testbuf_fence_ops, &o->lock,
		       dma_fence_context_alloc(1), 1);
	ret = dma_resv_lock_interruptible(dmabuf->resv, NULL);
	if (ret)
		goto put_fence;
	ret = dma_resv_reserve_fences(dmabuf->resv, 1);
	if (!ret)
		dma_resv_add_fence(dmabuf->resv, f, DMA_RESV_USAGE_KERNEL);
	dma_resv_unlock(dmabuf->resv);
	if (ret)
		goto put_fence;
	buf->fence = f;		/* our reference; the object holds its own */
	kcoll_testbuf_count(&kcoll_testbuf_stats.fences);
	kcoll_testbuf_count(&kcoll_testbuf_stats.fences_added);
	return 0;

put_fence:
	dma_fence_put(f);
	return ret;
}

static int kcoll_testbuf_fence(struct kcoll_testbuf_fence __user *uarg)
{
	struct kcoll_testbuf_fence arg;
	struct kcoll_testbuf_buf *buf;
	struct dma_buf *dmabuf;
	int ret = 0;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.op != KCOLL_TESTBUF_FENCE_ADD &&
	    arg.op != KCOLL_TESTBUF_FENCE_SIGNAL)
		return -EINVAL;
	dmabuf = kcoll_testbuf_get(arg.fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	buf = dmabuf->priv;
	mutex_lock(&buf->fence_mutex);
	if (arg.op == KCOLL_TESTBUF_FENCE_ADD)
		ret = kcoll_testbuf_fence_add(dmabuf, buf);
	else if (!buf->fence)
		ret = -ENOENT;
	else
		kcoll_testbuf_fence_end(buf);
	mutex_unlock(&buf->fence_mutex);
	dma_buf_put(dmabuf);
	return ret;
}

static long kcoll_testbuf_ioctl(struct file *file, unsigned int cmd,
				unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case KCOLL_TESTBUF_IOC_CREATE:
		return kcoll_testbuf_create(uarg);
	case KCOLL_TESTBUF_IOC_REVOKE:
		return kcoll_testbuf_revoke(uarg);
	case KCOLL_TESTBUF_IOC_FENCE:
		return kcoll_testbuf_fence(uarg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations kcoll_testbuf_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = kcoll_testbuf_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice kcoll_testbuf_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kcoll_testbuf",
	.fops = &kcoll_testbuf_fops,
	.mode = 0666,
};

/* ---------------------------------------------------------------- debugfs */

static int kcoll_testbuf_counters_show(struct seq_file *m, void *unused)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(kcoll_testbuf_counter_table); i++)
		seq_printf(m, "%s %ld\n", kcoll_testbuf_counter_table[i].name,
			   atomic_long_read(kcoll_testbuf_counter_table[i].val));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kcoll_testbuf_counters);

static struct dentry *kcoll_testbuf_debugfs;

/* ---------------------------------------------------------------- module */

static int __init kcoll_testbuf_init(void)
{
	int ret;

	/* debugfs failures are not fatal; the counters are then missing. */
	kcoll_testbuf_debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("counters", 0444, kcoll_testbuf_debugfs, NULL,
			    &kcoll_testbuf_counters_fops);

	ret = misc_register(&kcoll_testbuf_misc);
	if (ret) {
		pr_err("misc_register: %d\n", ret);
		goto remove_debugfs;
	}
	return 0;

remove_debugfs:
	debugfs_remove_recursive(kcoll_testbuf_debugfs);
	return ret;
}

/* Only once no buffer lives: each holds a module reference. */
static void __exit kcoll_testbuf_exit(void)
{
	misc_deregister(&kcoll_testbuf_misc);
	debugfs_remove_recursive(kcoll_testbuf_debugfs);
}

module_init(kcoll_testbuf_init);
module_exit(kcoll_testbuf_exit);

MODULE_DESCRIPTION("kcoll test dma-buf exporter (imitates GPU memory)");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(DMA_BUF);
