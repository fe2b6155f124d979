// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll memory: pin user buffers (charged to RLIMIT_MEMLOCK unless
 * CAP_IPC_LOCK), allocate scratch, map them for the CPU (vmap) and register
 * them with the RDMA device as fast-registration MRs of at most
 * comm->seg_pages pages each.
 *
 * These MRs are for the NIC's local reads only (what we send): no peer can
 * write through them. A peer writes only through a grant MR over exactly
 * the bytes it was granted, for as long as the grant lives (kcoll_gmr.c),
 * built from the page DMA addresses kept here (b->dma). Every MR is
 * invalid or deregistered before the pages are unpinned or freed.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/backing-dev.h>
#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/scatterlist.h>
#include <linux/random.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "kcoll_types.h"
#include "kcoll_mem.h"
#include "kcoll_ib.h"
#include "kcoll_quota.h"

static const struct kcoll_buf_ops kcoll_buf_user, kcoll_buf_kernel;

/* Charge @npages to current's pinned_vm against RLIMIT_MEMLOCK. */
static int kcoll_charge_pinned(struct kcoll_buf *b)
{
	unsigned long limit, pinned;

	if (capable(CAP_IPC_LOCK))
		return 0;
	limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	pinned = atomic64_add_return(b->npages, &current->mm->pinned_vm);
	if (pinned > limit) {
		atomic64_sub(b->npages, &current->mm->pinned_vm);
		return -ENOMEM;
	}
	mmgrab(current->mm);
	b->mm = current->mm;
	b->charged = true;
	return 0;
}

static void kcoll_uncharge_pinned(struct kcoll_buf *b)
{
	if (!b->charged)
		return;
	atomic64_sub(b->npages, &b->mm->pinned_vm);
	mmdrop(b->mm);
	b->charged = false;
	b->mm = NULL;
}

/*
 * The kernel's view of @b's pages: read-only unless @b is writable (pinned
 * for writing, or ours), so that no bug of ours can write a page the user
 * may only read (a file's page cache) through it: it would fault instead.
 */
static int kcoll_buf_vmap(struct kcoll_buf *b)
{
	b->vmap_base = vmap(b->pages, b->npages, VM_MAP,
			    b->writable ? PAGE_KERNEL : PAGE_KERNEL_RO);
	if (!b->vmap_base)
		return -ENOMEM;
	b->vaddr = (u8 *)b->vmap_base + b->off0;
	return 0;
}

/*
 * May @page, pinned for writing, stay pinned? Not a page of a file that
 * its file system writes back (a shared mapping of ext4, NFS, FUSE ...):
 * writes through a long-term pin bypass the file system's dirty tracking
 * (the page may be written back, or truncated, under the NIC), and the
 * unpin must dirty it under its page lock, which such a file system may
 * hold for as long as its server likes (a FUSE write waits on the file's
 * daemon with a page locked that is not up to date), and on a page whose
 * up-to-date flag a failed write took, dirtying WARNs. Kernels since 6.5
 * refuse these pins themselves (writable_file_mapping_allowed()); on
 * older ones kcoll does. Anonymous memory, shmem (tmpfs, memfd, POSIX
 * shared memory) and hugetlbfs write nothing back: allowed, as are pages
 * without a mapping. Checked on the pinned pages, not the VMAs, so that
 * no remap between the two can slip one through.
 */
bool kcoll_pin_writable_ok(struct page *page)
{
	struct address_space *mapping;

	if (PageAnon(page))
		return true;
	mapping = folio_mapping(page_folio(page));
	return !mapping || !mapping_can_writeback(mapping);
}

/*
 * kcoll_buf_pin_user - pin @len bytes at user address @uaddr of current.
 * Must be called from the owner's process context, without dev_sem or any
 * lock another user's work needs: a fault may wait on the buffer's owner
 * for as long as it likes (a userfaultfd region, a FUSE file). @len may
 * be 0 (an empty buffer: nothing pinned). Returns 0, -EFAULT (also for a
 * @writable one on a file system's shared mapping), -ENOMEM, -EINTR or
 * -EOVERFLOW.
 */
int kcoll_buf_pin_user(struct kcoll_buf *b, u64 uaddr, size_t len,
		       bool writable)
{
	unsigned int gup = FOLL_LONGTERM | (writable ? FOLL_WRITE : 0);
	unsigned long start, end, done = 0;
	int err, n;

	memset(b, 0, sizeof(*b));
	if (!len)
		return 0;
	if (uaddr + len < uaddr || uaddr + len > TASK_SIZE)
		return -EFAULT;
	start = uaddr & PAGE_MASK;
	end = PAGE_ALIGN(uaddr + len);
	if ((end - start) >> PAGE_SHIFT > UINT_MAX)
		return -EOVERFLOW;
	/*
	 * More pages than the machine has can never be pinned: fail before
	 * sizing the page array by the request (REG_MEM of a few TiB of
	 * address space asked kvmalloc for more than INT_MAX bytes, which
	 * it refuses with a WARN).
	 */
	if ((end - start) >> PAGE_SHIFT > totalram_pages())
		return -ENOMEM;
	b->npages = (end - start) >> PAGE_SHIFT;
	b->off0 = uaddr & ~PAGE_MASK;
	b->len = len;
	b->ops = &kcoll_buf_user;
	b->writable = writable;

	/* RLIMIT_MEMLOCK first: a request past it must not size (and
	 * allocate, up to 2 GiB) the page array before it is refused. */
	err = kcoll_charge_pinned(b);
	if (err)
		goto out_clear;
	b->pages = kvmalloc_array(b->npages, sizeof(*b->pages),
				  GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!b->pages) {
		kcoll_uncharge_pinned(b);
		err = -ENOMEM;
		goto out_clear;
	}

	while (done < b->npages) {
		unsigned long chunk = min_t(unsigned long, b->npages - done,
					    PAGE_SIZE / sizeof(struct page *));

		n = pin_user_pages_fast(start + done * PAGE_SIZE, chunk, gup,
					b->pages + done);
		if (n <= 0) {
			err = n ? n : -EFAULT;
			goto out_unpin;
		}
		done += n;
		if (fatal_signal_pending(current)) {
			err = -EINTR;
			goto out_unpin;
		}
		cond_resched();
	}
	for (n = 0; writable && n < b->npages; n++) {
		if (!kcoll_pin_writable_ok(b->pages[n])) {
			pr_info_ratelimited("%s[%d]: a buffer to be written lies on a file system's shared mapping (only anonymous memory, shmem and hugetlbfs): -EFAULT\n",
					    current->comm,
					    task_pid_nr(current));
			err = -EFAULT;
			goto out_unpin;
		}
	}
	err = kcoll_buf_vmap(b);
	if (err)
		goto out_unpin;
	return 0;

out_unpin:
	unpin_user_pages(b->pages, done);
	kcoll_uncharge_pinned(b);
	kvfree(b->pages);
	b->pages = NULL;
out_clear:
	b->npages = 0;
	return err;
}

/*
 * Scratch of @len bytes (0 allowed), zeroed, charged to the memcg and to
 * @q, the user's kcoll quota: -EDQUOT past sysfs user_max_kernel_mb.
 * A large one (an operation's, up to the quota) takes a while: -EINTR if
 * the task is killed meanwhile.
 */
int kcoll_buf_alloc(struct kcoll_buf *b, size_t len, struct kcoll_quota *q)
{
	unsigned int i;
	int err;

	memset(b, 0, sizeof(*b));
	if (!len)
		return 0;
	if (PAGE_ALIGN(len) >> PAGE_SHIFT > UINT_MAX)
		return -EOVERFLOW;
	err = kcoll_quota_charge_bytes(q, PAGE_ALIGN(len));
	if (err)
		return err;
	err = -ENOMEM;
	b->quota = q;
	b->ops = &kcoll_buf_kernel;
	b->npages = PAGE_ALIGN(len) >> PAGE_SHIFT;
	b->len = len;
	b->writable = true;	/* ours: landing room, scratch */
	/* Past a memory cgroup's limit they fail (-ENOMEM), as ring memory
	 * does, rather than call its OOM killer, maybe from a worker. */
	b->pages = kvcalloc(b->npages, sizeof(*b->pages),
			    KCOLL_GFP_CHARGED);
	if (!b->pages)
		goto out_uncharge;
	for (i = 0; i < b->npages; i++) {
		if (i && !(i % 512)) {
			if (fatal_signal_pending(current)) {
				err = -EINTR;
				goto out_free;
			}
			cond_resched();
		}
		/* Direct-map pages: rxe turns DMA addresses back into pages. */
		b->pages[i] = alloc_page(KCOLL_GFP_CHARGED | __GFP_ZERO);
		if (!b->pages[i])
			goto out_free;
	}
	if (kcoll_buf_vmap(b))
		goto out_free;
	return 0;

out_free:
	while (i--)
		__free_page(b->pages[i]);
	kvfree(b->pages);
out_uncharge:
	kcoll_quota_uncharge_bytes(q, PAGE_ALIGN(len));
	memset(b, 0, sizeof(*b));
	return err;
}

/* How the device may touch @b's pages: a buffer we never write (a send
 * buffer, maybe a read-only mapping) only towards it. */
static enum dma_data_direction kcoll_buf_dma_dir(const struct kcoll_buf *b)
{
	return b->writable ? DMA_BIDIRECTIONAL : DMA_TO_DEVICE;
}

void kcoll_buf_unregister(struct kcoll_buf *b)
{
	unsigned int i;

	for (i = 0; b->segs && i < b->nsegs; i++) {
		struct kcoll_mrseg *s = &b->segs[i];

		/* The rkey dies with the MR, before the pages go. */
		if (s->mr)
			kcoll_ib_dereg_mr(s->mr);
		if (s->mapped)
			b->ops->dma_unmap(b, s);
		sg_free_table(&s->sgt);
	}
	kvfree(b->segs);
	b->segs = NULL;
	b->nsegs = 0;
	if (!b->ops || !b->ops->dma_ready) {
		kvfree(b->dma);
		b->dma = NULL;
	}
	b->ibdev = NULL;
}

/* Keep the DMA address of each of pages [@first, @first + @n) of @b,
 * mapped as segment @s: grant MRs are built from them. */
static void kcoll_buf_note_dma(struct kcoll_buf *b,
			       const struct kcoll_mrseg *s, unsigned int first,
			       unsigned int n)
{
	struct sg_dma_page_iter it;
	unsigned int k = first;

	for_each_sgtable_dma_page(&s->sgt, &it, 0) {
		if (k >= first + n)
			break;
		b->dma[k++] = sg_page_iter_dma_address(&it);
	}
}

/*
 * kcoll_buf_register - DMA-map @b on @comm's device and register it, one
 * fast-reg MR per run of comm->seg_pages pages, for local reads only. A
 * comm without connections (one rank) needs no registration: returns 0
 * and leaves @b CPU-only. Only a writable buffer (pinned with FOLL_WRITE,
 * or our own pages) is DMA-mapped both ways, so that grant MRs
 * (kcoll_gmr.c) can let a peer write into parts of it; a send buffer is
 * mapped to the device only, so that a send from a read-only mapping (a
 * file the user may only read) never has its pages written by the NIC.
 * -ENODEV once the comm's device is gone.
 * The REG_MR work requests go on the device's registration QP
 * (kcoll_ib_reg_mrs()), which waits for them: the MRs are then valid on
 * every connection. Process context; sleeps.
 */
int kcoll_buf_register(struct kcoll_buf *b, struct kcoll_comm *comm)
{
	struct ib_mr *batch[KCOLL_REG_BATCH];
	unsigned int i, nb = 0;
	int err = 0;

	/* Registered already (kcoll_op_nocpu() does all of an op's): a
	 * second registration would lose the first one's MRs, and a device
	 * removal would wait for them for ever. */
	if (!b->npages || comm->nranks == 1 || b->segs)
		return 0;
	if (!comm->pd)
		return -ENODEV;
	b->ibdev = comm->ibdev;
	b->seg_bytes = comm->seg_pages * PAGE_SIZE;
	b->nsegs = DIV_ROUND_UP(b->npages, comm->seg_pages);
	/* Sized by the pinned pages (more than 2^28 of them past what
	 * kvmalloc gives: -ENOMEM, not a WARN). */
	b->segs = kvcalloc(b->nsegs, sizeof(*b->segs),
			   KCOLL_GFP_CHARGED);
	/* Only what a peer may be granted needs its pages' DMA addresses
	 * (kcoll_gmr_map() refuses a buffer without them). */
	if (b->writable && !b->ops->dma_ready)
		b->dma = kvcalloc(b->npages, sizeof(*b->dma),
				  KCOLL_GFP_CHARGED);
	if (!b->segs || (b->writable && !b->dma)) {
		err = -ENOMEM;
		goto out_unreg;
	}
	for (i = 0; i < b->nsegs; i++) {
		struct kcoll_mrseg *s = &b->segs[i];
		unsigned int first = i * comm->seg_pages;
		unsigned int n = min_t(unsigned int, comm->seg_pages,
				       b->npages - first);
		int mapped;

		s->start = (size_t)first * PAGE_SIZE;
		s->len = (size_t)n * PAGE_SIZE;
		err = b->ops->dma_map(b, s, first, n);
		if (err)
			goto out_unreg;
		if (b->dma && !b->ops->dma_ready)
			kcoll_buf_note_dma(b, s, first, n);
		s->mr = kcoll_ib_alloc_mr(comm->pd, n);
		if (IS_ERR(s->mr)) {
			err = PTR_ERR(s->mr);
			s->mr = NULL;
			goto out_unreg;
		}
		mapped = ib_map_mr_sg(s->mr, s->sgt.sgl, s->sgt.nents, NULL,
				      PAGE_SIZE);
		if (mapped != (int)s->sgt.nents) {
			err = mapped < 0 ? mapped : -EINVAL;
			goto out_unreg;
		}
		/*
		 * The iova peers address the MR by: mapping sets it to the
		 * first page's DMA address, which on rxe and siw is the
		 * kernel's direct-map address (KASLR would be gone with
		 * the first grant). A random page-aligned base below 2^40
		 * instead (as ib_map_mr_sg_zbva() sets 0): it says nothing
		 * about kernel memory, and a peer who guessed an rkey still
		 * needs it.
		 */
		s->mr->iova = (get_random_u64() & (BIT_ULL(40) - 1)) &
			      PAGE_MASK;
		ib_update_fast_reg_key(s->mr, ib_inc_rkey(s->mr->rkey));
		batch[nb++] = s->mr;
		if (nb == KCOLL_REG_BATCH || i == b->nsegs - 1) {
			err = kcoll_ib_reg_mrs(b->ibdev, batch, nb, 0);
			if (err)
				goto out_unreg;
			nb = 0;
		}
	}
	return 0;

out_unreg:
	kcoll_buf_unregister(b);
	return err;
}

/* Undo pin/alloc, map and registration; @b may be empty. Process context. */
void kcoll_buf_release(struct kcoll_buf *b)
{
	if (b->segs)
		kcoll_buf_unregister(b);
	if (b->vmap_base)
		vunmap(b->vmap_base);
	if (b->ops)
		b->ops->release(b);
	memset(b, 0, sizeof(*b));
}

/* ------------------------------------------------------------------ */
/* Kinds of buffers                                                     */
/* ------------------------------------------------------------------ */

/* Pages (pinned or ours) reach the NIC through the DMA API, page by page. */
int kcoll_buf_pages_dma_map(struct kcoll_buf *b, struct kcoll_mrseg *s,
			    unsigned int first, unsigned int n)
{
	int err;

	err = sg_alloc_table_from_pages(&s->sgt, b->pages + first, n, 0,
					s->len, GFP_KERNEL);
	if (err)
		return err;
	err = ib_dma_map_sgtable_attrs(b->ibdev, &s->sgt,
				       kcoll_buf_dma_dir(b), 0);
	if (err)
		return err;	/* the table goes with the segment */
	s->mapped = true;
	return 0;
}

void kcoll_buf_pages_dma_unmap(struct kcoll_buf *b, struct kcoll_mrseg *s)
{
	ib_dma_unmap_sgtable_attrs(b->ibdev, &s->sgt, kcoll_buf_dma_dir(b), 0);
	s->mapped = false;
}

static void kcoll_buf_user_release(struct kcoll_buf *b)
{
	if (!b->pages)
		return;
	/* Only what we may have written: a send buffer can be a read-only
	 * file mapping, whose pages must not become dirty. */
	unpin_user_pages_dirty_lock(b->pages, b->npages, b->writable);
	kcoll_uncharge_pinned(b);
	kvfree(b->pages);
}

static void kcoll_buf_kernel_release(struct kcoll_buf *b)
{
	unsigned int i;

	if (!b->pages)
		return;
	for (i = 0; i < b->npages; i++)
		__free_page(b->pages[i]);
	kcoll_quota_uncharge_bytes(b->quota, (u64)b->npages << PAGE_SHIFT);
	kvfree(b->pages);
}

/* A user's buffer, pinned (kcoll_buf_pin_user()). */
static const struct kcoll_buf_ops kcoll_buf_user = {
	.name = "user",
	.dma_map = kcoll_buf_pages_dma_map,
	.dma_unmap = kcoll_buf_pages_dma_unmap,
	.release = kcoll_buf_user_release,
};

/* Our own pages: scratch, staging, eager slots (kcoll_buf_alloc()). */
static const struct kcoll_buf_ops kcoll_buf_kernel = {
	.name = "kernel",
	.dma_map = kcoll_buf_pages_dma_map,
	.dma_unmap = kcoll_buf_pages_dma_unmap,
	.release = kcoll_buf_kernel_release,
};

static const struct kcoll_mrseg *kcoll_buf_seg(const struct kcoll_buf *b,
					       size_t off, size_t *in_seg)
{
	size_t pos = b->off0 + off;
	const struct kcoll_mrseg *s = &b->segs[pos / b->seg_bytes];

	*in_seg = pos - s->start;
	return s;
}

size_t kcoll_buf_seg_room(const struct kcoll_buf *b, size_t off)
{
	size_t in_seg;
	const struct kcoll_mrseg *s = kcoll_buf_seg(b, off, &in_seg);

	return s->len - in_seg;
}

void kcoll_buf_sge(const struct kcoll_buf *b, size_t off, size_t len,
		   struct ib_sge *sge)
{
	size_t in_seg;
	const struct kcoll_mrseg *s = kcoll_buf_seg(b, off, &in_seg);

	sge->addr = s->mr->iova + in_seg;
	sge->length = len;
	sge->lkey = s->mr->lkey;
}

/*
 * debugfs: @b's MRs, one line each (rkey, iova, length: local reads only,
 * no peer may use them). Root only; for diagnosis and for the tests that
 * play a peer who learned an rkey.
 */
void kcoll_buf_show(struct seq_file *m, const char *name,
		    const struct kcoll_buf *b)
{
	unsigned int i;

	for (i = 0; i < b->nsegs; i++) {
		const struct kcoll_mrseg *s = &b->segs[i];

		if (!s->mr)
			continue;
		seq_printf(m, "    mr %s %u rkey %#x iova %#llx len %zu local-read %s\n",
			   name, i, s->mr->rkey, s->mr->iova, s->len,
			   b->ops ? b->ops->name : "-");
	}
}
