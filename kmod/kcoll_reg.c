// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll registrations: KCOLL_IOC_REG_MEM / DEREG_MEM. A registration
 * (struct kcoll_mem) pins a user buffer, or imports a dma-buf
 * (kcoll_dmabuf.c), and registers it once for many operations of one
 * communicator; operations take a use of it
 * (kcoll_mem_get()), DEREG_MEM refuses while one holds it, and the last
 * put releases it. Pinning and the NIC's MRs are kcoll_mem.c's.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/pagemap.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kcoll.h"
#include "kcoll_types.h"
#include "kcoll_comm.h"
#include "kcoll_mem.h"
#include "kcoll_reg.h"
#include "kcoll_dmabuf.h"
#include "kcoll_quota.h"
#include "kcoll_regcache.h"
#include "kcoll_gmr.h"
#include "kcoll_stats.h"

/*
 * The last use of @mem is gone: it is released (its MRs, and on rxe the
 * grant MRs tied to it, die before its pages are unpinned). Process
 * context: an op's release, DEREG_MEM or the comm's destroy. The
 * notifier of a cache entry or a watched registration goes after, in a
 * work item (kcoll_cache_mem_free()), and the registration counts against
 * user_max_regs until then.
 */
static void kcoll_mem_release(struct kcoll_mem *mem)
{
	kcoll_buf_release(&mem->buf);
	/* A watched registration's notifier goes as a cache entry's does. */
	if (mem->is_cache || mem->mni_on) {
		kcoll_cache_mem_free(mem);
		return;
	}
	kcoll_quota_uncharge(mem->quota, KCOLL_Q_REGS, 1);
	kcoll_quota_put(mem->quota);
	kfree(mem);
}

/* Drop a use of @mem; the last one releases it. Must not hold
 * comm->lock (the grant MRs tied to @mem need it). */
void kcoll_mem_put(struct kcoll_mem *mem)
{
	struct kcoll_comm *comm = mem->comm;

	if (!refcount_dec_and_test(&mem->users))
		return;
	/* No use is left to tie one more (kcoll_gmr_get()). */
	if (READ_ONCE(mem->gmr_ties)) {
		mutex_lock(&comm->lock);
		kcoll_gmr_forget(comm, mem);
		mutex_unlock(&comm->lock);
	}
	kcoll_mem_release(mem);
}

/* kcoll_mem_put(), under @mem's comm->lock (an operation's release). */
void kcoll_mem_put_locked(struct kcoll_mem *mem)
{
	lockdep_assert_held(&mem->comm->lock);
	if (!refcount_dec_and_test(&mem->users))
		return;
	kcoll_gmr_forget(mem->comm, mem);
	kcoll_mem_release(mem);
}

/*
 * Does invalidation @range change more than protection (what a pinned
 * page is mapped as, not where)?
 */
bool kcoll_mmu_moves_pages(const struct mmu_notifier_range *range)
{
	switch (range->event) {
	case MMU_NOTIFY_PROTECTION_VMA:
	case MMU_NOTIFY_PROTECTION_PAGE:
	case MMU_NOTIFY_SOFT_DIRTY:
		return false;
	default:
		return true;
	}
}

/*
 * A registration holds the pages its range mapped when it was made, as an
 * RDMA MR does. Should the program unmap or remap that range, or drop its
 * pages (madvise(DONTNEED)), an operation naming the handle would read
 * and write pages the program no longer sees, and report success: so the
 * range is watched with an MMU interval notifier. The callback, which may
 * run under the mm's locks, only marks the registration suspect; changes
 * of protection alone are ignored (NUMA balancing's, a fork's
 * write-protection, which leaves a pinned page where it was, mprotect():
 * the pages stay what the range maps). The next use walks the page tables
 * (kcoll_mem_recheck()): the same pages, and it goes on (a spurious
 * invalidation: khugepaged's attempt to collapse pinned pages); others, or
 * none, and the registration is stale for good: operations naming it
 * fail with -EFAULT, DEREG_MEM still releases it.
 */
static bool kcoll_reg_invalidate(struct mmu_interval_notifier *mni,
				 const struct mmu_notifier_range *range,
				 unsigned long cur_seq)
{
	struct kcoll_mem *mem = container_of(mni, struct kcoll_mem, mni);

	mmu_interval_set_seq(mni, cur_seq);
	if (kcoll_mmu_moves_pages(range))
		atomic_set(&mem->suspect, 1);
	return true;
}

static const struct mmu_interval_notifier_ops kcoll_reg_ops = {
	.invalidate = kcoll_reg_invalidate,
};

/*
 * Watch the range of @mem (before its pages are pinned: a change in
 * between is seen). Without a notifier (the mm's first one gives up at a
 * pending signal, or memory ran out) the registration is made unwatched
 * and counted (stats/reg_untracked).
 */
static void kcoll_reg_watch(struct kcoll_mem *mem)
{
	unsigned long start = mem->addr & PAGE_MASK;

	if (mmu_interval_notifier_insert(&mem->mni, current->mm, start,
					 PAGE_ALIGN(mem->addr + mem->len) - start,
					 &kcoll_reg_ops)) {
		kcoll_stat_add(KCOLL_STAT_REG_UNTRACKED, 1);
		return;
	}
	mem->mni_on = true;
	mem->seq = mmu_interval_read_begin(&mem->mni);
}

/* Page-table lookups per batch of kcoll_mem_recheck(). */
#define KCOLL_RECHECK_BATCH	64

/*
 * Are @mem's pinned pages still what its range maps in the caller's mm
 * (with @gup_flags FOLL_WRITE: writably)? 0 if so (no longer suspect),
 * -EFAULT if not (the caller must be the mm's process; another gets
 * -EFAULT, having looked at nothing),
 * -EAGAIN if the range kept changing meanwhile (still suspect). Walks
 * the page tables without faulting (the caller holds dev_sem): a page no
 * longer mapped is one the range lost. A REG_MEM registration or a cache
 * entry (kcoll_regcache.c), watched by @mem->mni.
 */
int kcoll_mem_recheck(struct kcoll_mem *mem, unsigned int gup_flags)
{
	const unsigned long start = mem->addr & PAGE_MASK;
	struct page *pg[KCOLL_RECHECK_BATCH];
	struct kcoll_buf *b = &mem->buf;
	unsigned int done, i, tries;
	unsigned long seq;
	bool same;
	int n;

	if (current->mm != mem->mni.mm)
		return -EFAULT;
	kcoll_stat_add(KCOLL_STAT_REG_RECHECKS, 1);
	for (tries = 0; tries < 3; tries++) {
		seq = mmu_interval_read_begin(&mem->mni);
		/*
		 * An invalidation from here on moves the sequence: the
		 * retry below sees it, and it marks us suspect again.
		 */
		atomic_set(&mem->suspect, 0);
		same = true;
		for (done = 0; same && done < b->npages; done += n) {
			n = get_user_pages_fast_only(start +
					((unsigned long)done << PAGE_SHIFT),
					min_t(unsigned int, b->npages - done,
					      KCOLL_RECHECK_BATCH), gup_flags,
					pg);
			if (n <= 0) {
				same = false;
				break;
			}
			for (i = 0; i < n; i++) {
				same &= pg[i] == b->pages[done + i];
				put_page(pg[i]);
			}
			cond_resched();
		}
		if (!same)
			return -EFAULT;
		if (!mmu_interval_read_retry(&mem->mni, seq))
			return 0;
	}
	atomic_set(&mem->suspect, 1);
	return -EAGAIN;
}

/*
 * REG_MEM of @p (checked) for @ctx: pin or import, register, publish, and
 * copy the handle out to @uarg. Pinning runs before dev_sem, and the copy
 * out under it takes no fault: *@copy_faulted says that it needed one
 * (everything is undone then; the caller faults @uarg in and tries again).
 */
static int kcoll_reg_mem(struct kcoll_ctx *ctx, void __user *uarg,
			 const struct kcoll_reg_mem *in, bool dmabuf,
			 bool *copy_faulted)
{
	struct kcoll_reg_mem p = *in;
	struct kcoll_comm *comm;
	struct kcoll_mem *mem;
	u32 handle;
	int err;

	comm = kcoll_ctx_comm_get(ctx, p.comm_id);
	if (!comm)
		return -ENOENT;
	mem = kzalloc(sizeof(*mem), GFP_KERNEL_ACCOUNT);
	if (!mem) {
		err = -ENOMEM;
		goto out_put_comm;
	}
	refcount_set(&mem->users, 1);
	mem->addr = p.addr;
	mem->len = p.len;
	mem->comm = comm;
	err = kcoll_quota_charge(ctx->quota, KCOLL_Q_REGS, 1);
	if (err) {
		kfree(mem);
		goto out_put_comm;
	}
	mem->quota = kcoll_quota_ref(ctx->quota);

	/*
	 * Pinning may wait on the buffer's owner for ever (a userfaultfd
	 * region, a FUSE file): before dev_sem, so that what waits is this
	 * registration alone, not the device's removal or the comm's
	 * destroy.
	 */
	if (!dmabuf) {
		kcoll_reg_watch(mem);
		err = kcoll_cache_pin_user(&mem->buf, p.addr, p.len,
					   !(p.flags & KCOLL_REG_READONLY));
		if (err)
			goto out_uncharge;
		if (mem->mni_on && mmu_interval_read_retry(&mem->mni, mem->seq))
			atomic_set(&mem->suspect, 1);
	}
	/*
	 * Importing and registering may take long: not under
	 * ctx->comm_lock (every other comm of the file would wait), but
	 * under dev_sem, so that neither the device's removal nor the
	 * comm's destroy runs until the registration is on comm->mems,
	 * where they find it.
	 */
	down_read(&comm->dev_sem);
	err = kcoll_comm_usable(comm);
	if (err)
		goto out_release;
	if (dmabuf) {
		err = kcoll_buf_import_dmabuf(&mem->buf, comm, p.dmabuf_fd,
					      p.dmabuf_off, p.len,
					      p.flags & KCOLL_REG_NO_CPU,
					      ctx->quota);
		if (err)
			goto out_unlock_dev;
	}
	if (!kcoll_buf_dry(&mem->buf)) {
		err = kcoll_buf_register(&mem->buf, comm);
		if (err)
			goto out_release;
	}
	/* XA_FLAGS_ALLOC1: handles start at 1; 0 means "no handle". The
	 * handle is reserved (NULL) until the registration is complete. */
	err = xa_alloc(&ctx->mems, &handle, NULL, xa_limit_31b, GFP_KERNEL);
	if (err)
		goto out_release;
	mem->handle = handle;
	mutex_lock(&comm->lock);
	err = kcoll_comm_usable_locked(comm);
	if (!err)
		list_add_tail(&mem->node, &comm->mems);
	mutex_unlock(&comm->lock);
	if (err) {
		xa_erase(&ctx->mems, handle);
		goto out_release;
	}
	/*
	 * The handle goes out while it is still reserved: nobody else can
	 * name it yet, so a failed copy takes back exactly this
	 * registration (once published, another thread could deregister
	 * it and a new one get its number).
	 */
	p.handle = handle;
	if (copy_to_user_nofault(uarg, &p, sizeof(p))) {
		mutex_lock(&comm->lock);
		list_del(&mem->node);
		mutex_unlock(&comm->lock);
		xa_erase(&ctx->mems, handle);
		*copy_faulted = true;
		err = -EFAULT;
		goto out_release;
	}
	xa_store(&ctx->mems, handle, mem, GFP_KERNEL);
	up_read(&comm->dev_sem);
	kcoll_comm_put(comm);
	return 0;

out_release:
	kcoll_buf_release(&mem->buf);
out_unlock_dev:
	up_read(&comm->dev_sem);
out_uncharge:
	if (mem->mni_on) {
		/* Its notifier, quota and memory, as after a last put. */
		kcoll_cache_mem_free(mem);
		goto out_put_comm;
	}
	kcoll_quota_uncharge(mem->quota, KCOLL_Q_REGS, 1);
	kcoll_quota_put(mem->quota);
	kfree(mem);
out_put_comm:
	kcoll_comm_put(comm);
	return err;
}

/* How many times REG_MEM tries before it gives up with -EFAULT. */
#define KCOLL_REG_TRIES	16

int kcoll_reg_mem_ioctl(struct kcoll_ctx *ctx, void __user *uarg)
{
	struct kcoll_reg_mem p;
	bool dmabuf, faulted;
	unsigned int tries;
	int err;

	if (copy_from_user(&p, uarg, sizeof(p)))
		return -EFAULT;
	if ((p.flags & ~KCOLL_REG_FLAGS) || p.handle || p.resv)
		return -EINVAL;
	dmabuf = p.flags & KCOLL_REG_DMABUF;
	/* The CPU rule is for imported memory: the user's own pages are
	 * the CPU's anyway. */
	if (!dmabuf && (p.dmabuf_fd || p.dmabuf_off ||
			(p.flags & KCOLL_REG_NO_CPU)))
		return -EINVAL;
	/* An import is mapped for the device both ways. */
	if (dmabuf && (p.flags & KCOLL_REG_READONLY))
		return -EINVAL;
	if (!p.len)
		return -EINVAL;
	if (p.addr + p.len < p.addr)
		return dmabuf ? -EINVAL : -EFAULT;

	/*
	 * The argument made writable before each try: the handle goes out
	 * under dev_sem, where it may not fault (one COW-shared since a
	 * fork would otherwise fail it). A try whose copy still faulted
	 * (another thread took the page away again) was undone whole.
	 */
	for (tries = 1;; tries++) {
		if (fault_in_safe_writeable(uarg, sizeof(p)))
			return -EFAULT;
		faulted = false;
		err = kcoll_reg_mem(ctx, uarg, &p, dmabuf, &faulted);
		if (!faulted || tries == KCOLL_REG_TRIES)
			return err;
	}
}

/*
 * Take a use of registration @handle of @ctx on @comm for the bytes
 * [@addr, @addr + @len); NULL with *err set if there is none, or it does
 * not hold the range, or its device went away, or its range no longer
 * maps its pages (-EFAULT; -EAGAIN while the range keeps changing:
 * kcoll_mem_recheck()). The caller holds comm->dev_sem for read, not
 * comm->lock.
 */
struct kcoll_mem *kcoll_mem_get(struct kcoll_ctx *ctx, struct kcoll_comm *comm,
				u32 handle, u64 addr, u64 len, int *err)
{
	struct kcoll_mem *mem;

	xa_lock(&ctx->mems);
	mem = xa_load(&ctx->mems, handle);
	if (!mem || mem->comm != comm) {
		*err = -ENOENT;
		mem = NULL;
	} else if (addr < mem->addr || addr - mem->addr > mem->len ||
		   len > mem->len - (addr - mem->addr)) {
		*err = -ERANGE;
		mem = NULL;
	} else if ((!mem->buf.segs && comm->nranks > 1) ||
		   kcoll_buf_dry(&mem->buf) || kcoll_buf_revoked(&mem->buf)) {
		/* Its device went away, it is a test's dry import, or its
		 * exporter took it back. */
		*err = -ENODEV;
		mem = NULL;
	} else {
		/* Its handle holds a use until erased, under this lock. */
		refcount_inc(&mem->users);
	}
	xa_unlock(&ctx->mems);
	if (mem && mem->mni_on &&
	    (atomic_read(&mem->stale) || atomic_read(&mem->suspect))) {
		if (atomic_read(&mem->stale) || current->mm != mem->mni.mm) {
			/*
			 * Stale; or another process (a child after fork),
			 * which cannot tell: refused, the registration
			 * left as it is for its owner.
			 */
			*err = -EFAULT;
		} else {
			*err = kcoll_mem_recheck(mem, 0);
			if (*err == -EFAULT && !atomic_xchg(&mem->stale, 1))
				kcoll_stat_add(KCOLL_STAT_REG_STALE, 1);
		}
		if (*err) {
			/* Not the last: the handle holds one. */
			kcoll_mem_put(mem);
			mem = NULL;
		}
	}
	return mem;
}

static int kcoll_dereg_mem(struct kcoll_ctx *ctx, u32 handle)
{
	struct kcoll_comm *comm;
	struct kcoll_mem *mem;

	/* A COMM_DESTROY of the file may hold it for a while. */
	if (mutex_lock_killable(&ctx->comm_lock))
		return -EINTR;
	xa_lock(&ctx->mems);
	mem = xa_load(&ctx->mems, handle);
	if (!mem) {
		xa_unlock(&ctx->mems);
		mutex_unlock(&ctx->comm_lock);
		return -ENOENT;
	}
	/* Uses are taken under the same lock: none can come now. */
	if (refcount_read(&mem->users) != 1) {
		xa_unlock(&ctx->mems);
		mutex_unlock(&ctx->comm_lock);
		return -EBUSY;
	}
	__xa_erase(&ctx->mems, handle);
	xa_unlock(&ctx->mems);
	/*
	 * Off comm->mems and its MRs gone with no device removal in
	 * between (it takes dev_sem for write): a removal that no longer
	 * finds it on the list must not free the PD under its MRs. The
	 * file's reference keeps the comm while we hold its comm_lock.
	 */
	comm = mem->comm;
	down_read(&comm->dev_sem);
	mutex_lock(&comm->lock);
	list_del(&mem->node);
	mutex_unlock(&comm->lock);
	kcoll_mem_put(mem);
	up_read(&comm->dev_sem);
	mutex_unlock(&ctx->comm_lock);
	return 0;
}

int kcoll_dereg_mem_ioctl(struct kcoll_ctx *ctx, void __user *uarg)
{
	struct kcoll_dereg_mem p;

	if (copy_from_user(&p, uarg, sizeof(p)))
		return -EFAULT;
	if (p.resv)
		return -EINVAL;
	return kcoll_dereg_mem(ctx, p.handle);
}
