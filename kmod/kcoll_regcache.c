// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll registration cache: an operation's plain (unregistered) buffer
 * stays pinned and registered after the operation, so the next operation
 * on the same pages of the same process costs no pinning and no MR.
 *
 * An entry is a struct kcoll_mem without a handle, on comm->cache (most
 * recently used first), holding one use of itself ("the cache's"), one
 * reference of its communicator, and an MMU interval notifier over its
 * pages in the process's mm. Whatever changes that range's mapping (munmap,
 * mremap, madvise(DONTNEED), migration, exit) invalidates it: the
 * notifier marks it stale at once, so no later lookup returns it, and a
 * work item takes it off the cache and drops the cache's use. A change of
 * protection alone only makes it suspect: the next lookup checks its
 * pages (kcoll_cache_invalidate()). An operation that already holds a
 * use goes on with the pages it pinned, as one that pinned its own buffer
 * would; the last put deregisters and unpins, and deferred work then
 * removes the notifier (kcoll_cache_free()), one entry at a time per
 * user, on a workqueue of its own: the removal waits until no
 * invalidation of the mm runs, which the owner can keep up for as long
 * as it likes.
 *
 * Lookups happen under comm->lock and take a use there; the notifier
 * callback never sleeps and never frees (it may run under the mm's locks):
 * it only sets the stale flag and queues the work, which holds a use of
 * its own so the entry outlives it. Insertion races with a mapping change
 * the usual way: the notifier is in place before the pages are pinned, and
 * an invalidation seen in between (mmu_interval_read_retry()) keeps the
 * entry out of the cache.
 *
 * Bounds: sysfs reg_cache_mb per communicator (0: no cache), at most
 * KCOLL_CACHE_MAX entries; past them the least recently used go. Each
 * entry counts as a registration of its user (user_max_regs): past that
 * limit operations pin their own buffers, as without the cache. Cached
 * pages stay charged to the owner's RLIMIT_MEMLOCK: when pinning fails
 * with -ENOMEM, the communicator's cache is emptied and the pin tried once
 * more.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mmu_notifier.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "kcoll.h"
#include "kcoll_types.h"
#include "kcoll_comm.h"
#include "kcoll_mem.h"
#include "kcoll_reg.h"
#include "kcoll_quota.h"
#include "kcoll_regcache.h"
#include "kcoll_stats.h"
#include "kcoll_sysfs.h"

#define KCOLL_CACHE_MAX	64

static void kcoll_cache_drop(struct kcoll_deferred *d);

/*
 * @mem's mapping changed: never found again, and dropped from the cache
 * (by deferred work holding a use of its own).
 */
static void kcoll_cache_stale(struct kcoll_mem *mem)
{
	if (atomic_xchg(&mem->stale, 1))
		return;
	kcoll_stat_add(KCOLL_STAT_REGCACHE_INVAL, 1);
	/* The drop's own use; none left means the entry is being freed
	 * (its free work waits for us in mmu_interval_notifier_remove()).
	 * Deferred per user, as the free is: the drop waits for dev_sem
	 * and comm->lock, which the owner can keep busy, and one region
	 * unmapped under thousands of entries would otherwise take as
	 * many of the module's shared workers (until 2026-12-07).
	 */
	if (refcount_inc_not_zero(&mem->users))
		kcoll_quota_defer(mem->quota, &mem->drop);
}

/*
 * A change of protection alone (NUMA balancing's scans, which on a NUMA
 * host pass over every mapping each period; a fork's write-protection;
 * mprotect(); soft-dirty) leaves pinned pages where they were: the entry
 * is only suspect, and the next lookup that finds it checks its pages
 * (kcoll_mem_recheck(), writably for a writable entry, so that one the
 * program made read-only is not written through the cache). Until
 * 2026-12-07 every such change dropped the entry, and a NUMA host's
 * balancing emptied the cache at each scan.
 */
static bool kcoll_cache_invalidate(struct mmu_interval_notifier *mni,
				   const struct mmu_notifier_range *range,
				   unsigned long cur_seq)
{
	struct kcoll_mem *mem = container_of(mni, struct kcoll_mem, mni);

	mmu_interval_set_seq(mni, cur_seq);
	if (kcoll_mmu_moves_pages(range))
		kcoll_cache_stale(mem);
	else
		atomic_set(&mem->suspect, 1);
	return true;
}

static const struct mmu_interval_notifier_ops kcoll_cache_ops = {
	.invalidate = kcoll_cache_invalidate,
};

/* Take @mem off @comm's cache if it is there; true if it was (the caller
 * then drops the cache's use). Must hold comm->lock. */
static bool kcoll_cache_unlink(struct kcoll_comm *comm, struct kcoll_mem *mem)
{
	lockdep_assert_held(&comm->lock);
	if (!mem->cached)
		return false;
	list_del(&mem->node);
	mem->cached = false;
	comm->cache_bytes -= mem->len;
	comm->cache_n--;
	return true;
}

static void kcoll_cache_drop(struct kcoll_deferred *d)
{
	struct kcoll_mem *mem = container_of(d, struct kcoll_mem, drop);
	struct kcoll_comm *comm = mem->comm;
	bool was;

	/* The entry's reference may be the comm's last: ours outlives it. */
	kref_get(&comm->ref);
	/* Off the cache and its MRs gone with no device removal in between
	 * (kcoll_comm.c: kcoll_comm_destroy()). */
	down_read(&comm->dev_sem);
	mutex_lock(&comm->lock);
	was = kcoll_cache_unlink(comm, mem);
	mutex_unlock(&comm->lock);
	if (was)
		kcoll_mem_put(mem);
	kcoll_mem_put(mem);	/* the drop's */
	up_read(&comm->dev_sem);
	kcoll_comm_put(comm);
}

/* Drop the cache's use of each entry on @gone (unlinked from it), outside
 * comm->lock; under comm->dev_sem (read). */
static void kcoll_cache_put_all(struct list_head *gone)
{
	struct kcoll_mem *mem, *tmp;

	list_for_each_entry_safe(mem, tmp, gone, node) {
		list_del(&mem->node);
		kcoll_mem_put(mem);
	}
}

/*
 * Empty @comm's cache down to @keep_bytes and KCOLL_CACHE_MAX - 1 entries
 * (all of it: 0 and 0), least recently used first. Entries in use stay
 * with their operations until those end. Must hold comm->dev_sem (read):
 * what leaves the cache keeps its MRs until put, and a device removal
 * only deregisters what it finds on the cache.
 */
static void kcoll_cache_trim(struct kcoll_comm *comm, u64 keep_bytes,
			     u32 keep_n)
{
	struct kcoll_mem *mem;
	LIST_HEAD(gone);

	lockdep_assert_held(&comm->dev_sem);
	mutex_lock(&comm->lock);
	while (!list_empty(&comm->cache) &&
	       (comm->cache_bytes > keep_bytes || comm->cache_n > keep_n)) {
		mem = list_last_entry(&comm->cache, struct kcoll_mem, node);
		kcoll_cache_unlink(comm, mem);
		list_add(&mem->node, &gone);
	}
	mutex_unlock(&comm->lock);
	kcoll_cache_put_all(&gone);
}

/* Release everything @comm's cache holds: its destroy. Must hold
 * comm->dev_sem (read). */
void kcoll_cache_flush(struct kcoll_comm *comm)
{
	kcoll_cache_trim(comm, 0, 0);
}

struct kcoll_cache_shed {
	struct mm_struct *mm;
	bool shed;
};

/* kcoll_comms_for_each(): the entries of @arg's mm off @comm's cache,
 * their pins (charged to that mm's RLIMIT_MEMLOCK) gone with their last
 * use; entries an operation uses stay with it until it ends. */
static int kcoll_cache_shed_comm(struct kcoll_comm *comm, void *arg)
{
	struct kcoll_cache_shed *sh = arg;
	struct kcoll_mem *mem, *tmp;
	LIST_HEAD(gone);

	/* Only the caller's own comms: another user's lock is not ours to
	 * wait for (a process's comms are its creator's). */
	if (!READ_ONCE(comm->cache_n) || !uid_eq(comm->owner, current_uid()))
		return 0;
	/* As for a trim: off the cache with no device removal between. */
	down_read(&comm->dev_sem);
	mutex_lock(&comm->lock);
	list_for_each_entry_safe(mem, tmp, &comm->cache, node) {
		if (mem->buf.mm != sh->mm)
			continue;
		kcoll_cache_unlink(comm, mem);
		list_add(&mem->node, &gone);
		sh->shed = true;
	}
	mutex_unlock(&comm->lock);
	kcoll_cache_put_all(&gone);
	up_read(&comm->dev_sem);
	return 0;
}

/*
 * kcoll_buf_pin_user() for a registration, the cache or an operation's
 * own pages; if RLIMIT_MEMLOCK refused it (-ENOMEM), once more after the
 * caches let go of this process's pages: every communicator's, not only
 * the one pinning. libcoll opens a file per communicator, and until
 * 2026-12-06 only the pinning comm's cache was emptied: what another
 * comm's cache held failed this comm's operations and REG_MEMs until
 * that buffer was unmapped. Must hold no comm's dev_sem.
 */
int kcoll_cache_pin_user(struct kcoll_buf *b, u64 addr, size_t len,
			 bool writable)
{
	struct kcoll_cache_shed sh = { .mm = current->mm };
	int err;

	err = kcoll_buf_pin_user(b, addr, len, writable);
	if (err != -ENOMEM)
		return err;
	kcoll_comms_for_each(kcoll_cache_shed_comm, &sh, 0);
	if (sh.shed) {
		kcoll_stat_add(KCOLL_STAT_REGCACHE_SHEDS, 1);
		err = kcoll_buf_pin_user(b, addr, len, writable);
	}
	return err;
}

/*
 * The rest of an entry after its last put (kcoll_mem_put(): its MRs and
 * pages are gone): the notifier, then the communicator's reference, the
 * registration it counts as, and the entry. Deferred, holding no lock of
 * kcoll's: mmu_interval_notifier_remove() waits until no invalidation of
 * the mm is running at all, which its owner can keep up for as long as it
 * likes (threads that madvise() in turn), and the last put runs under
 * dev_sem or comm->lock (until 2026-12-05 a device removal waited with
 * it). Deferred per user (kcoll_quota_defer()), not on the module's
 * workqueue: an owner that keeps its removals waiting holds one worker
 * of a queue of their own, not the timeouts, the intra-node messages and
 * the restarts of every other user's communicators (until 2026-12-05
 * each removal took one of kcoll_wq's 256). Its entries count against
 * its user_max_regs until they are gone, which bounds them. An
 * invalidation meanwhile finds no use to take and queues nothing.
 */
static void kcoll_cache_free(struct kcoll_deferred *d)
{
	struct kcoll_mem *mem = container_of(d, struct kcoll_mem, free);

	if (mem->mni_on)
		mmu_interval_notifier_remove(&mem->mni);
	if (mem->comm_ref)
		kcoll_comm_put(mem->comm);
	kcoll_quota_uncharge(mem->quota, KCOLL_Q_REGS, 1);
	kcoll_quota_put(mem->quota);
	kfree(mem);
}

void kcoll_cache_mem_free(struct kcoll_mem *mem)
{
	/* Also a watched REG_MEM's (kcoll_reg.c), which set no fn. */
	mem->free.fn = kcoll_cache_free;
	kcoll_quota_defer(mem->quota, &mem->free);
}

static u64 kcoll_cache_limit(void)
{
	return (u64)kcoll_reg_cache_mb() << 20;
}

/*
 * @comm's cache within sysfs reg_cache_mb, should root have lowered it (0
 * included) since it filled: each operation's preparation lets go of what
 * lies past it. Until 2026-12-07 only the next caching trimmed, which a
 * lowered limit refuses for the buffers over it, so those stayed pinned.
 * Must hold comm->dev_sem (read).
 */
void kcoll_cache_fit(struct kcoll_comm *comm)
{
	u64 limit = kcoll_cache_limit();

	/* Unlocked: a hint, which the trim checks again under the lock. */
	if (data_race(comm->cache_bytes) > limit)
		kcoll_cache_trim(comm, limit, KCOLL_CACHE_MAX);
}

/* A usable entry of @comm over [@addr, @addr + @len) of current's mm;
 * with a use taken. */
static struct kcoll_mem *kcoll_cache_find(struct kcoll_comm *comm, u64 addr,
					  size_t len, bool writable)
{
	struct kcoll_mem *mem, *found = NULL;

	mutex_lock(&comm->lock);
	list_for_each_entry(mem, &comm->cache, node) {
		/* Inside the entry, in terms that cannot wrap (@addr and
		 * @len are the user's). */
		if (atomic_read(&mem->stale) || mem->mni.mm != current->mm ||
		    addr < mem->addr || addr - mem->addr > mem->len ||
		    len > mem->len - (addr - mem->addr) ||
		    (writable && !mem->buf.writable) || !mem->buf.segs)
			continue;
		if (!refcount_inc_not_zero(&mem->users))
			continue;
		list_move(&mem->node, &comm->cache);
		found = mem;
		break;
	}
	mutex_unlock(&comm->lock);
	return found;
}

/* Does the cache take a plain buffer of @len bytes of current's? */
bool kcoll_cache_on(size_t len)
{
	u64 limit = kcoll_cache_limit();

	return limit && current->mm && len <= limit;
}

/*
 * kcoll_cache_pin - a new entry for an operation's plain buffer [@addr,
 * @addr + @len) that kcoll_cache_take() did not find: notified and
 * pinned, but neither registered nor cached (kcoll_cache_commit() does
 * both under dev_sem). On success *@out holds a use for the operation.
 * Returns 0, -EAGAIN if the cache is off or full for this user or its
 * notifier could not be set up (the caller pins for this operation alone),
 * or the error of pinning.
 *
 * Process context of the buffer's owner, without dev_sem: pinning may
 * fault, and a fault may wait on the buffer's owner for as long as it
 * likes (a FUSE file, a userfaultfd region), so it must hold back nobody
 * else. That is also why an operation takes cached entries only under
 * dev_sem, after its pins: a use taken before would keep the entry's MRs
 * alive through the other buffer's pin, and an invalidation in between
 * takes the entry off the cache, where a device removal no longer finds
 * them, so the removal would wait on that fault.
 */
int kcoll_cache_pin(struct kcoll_comm *comm, u64 addr, size_t len,
		    bool writable, struct kcoll_mem **out)
{
	unsigned long start;
	struct kcoll_mem *mem;
	int err;

	if (!kcoll_cache_on(len))
		return -EAGAIN;
	kcoll_stat_add(KCOLL_STAT_REGCACHE_MISSES, 1);

	/* A registration like REG_MEM's, under the same per-user limit
	 * (user_max_regs); past it this operation pins its own. */
	if (kcoll_quota_charge(comm->quota, KCOLL_Q_REGS, 1))
		return -EAGAIN;
	mem = kzalloc(sizeof(*mem), GFP_KERNEL_ACCOUNT);
	if (!mem) {
		kcoll_quota_uncharge(comm->quota, KCOLL_Q_REGS, 1);
		return -ENOMEM;
	}
	mem->quota = kcoll_quota_ref(comm->quota);
	start = addr & PAGE_MASK;
	mem->addr = addr;
	mem->len = len;
	mem->comm = comm;
	mem->is_cache = true;
	mem->drop.fn = kcoll_cache_drop;
	refcount_set(&mem->users, 1);		/* the operation's */
	/* Before the pages are pinned: a change in between is seen. */
	err = mmu_interval_notifier_insert(&mem->mni, current->mm, start,
					   PAGE_ALIGN(addr + len) - start,
					   &kcoll_cache_ops);
	if (err) {
		kcoll_quota_uncharge(mem->quota, KCOLL_Q_REGS, 1);
		kcoll_quota_put(mem->quota);
		kfree(mem);
		/*
		 * A process's first notifier registers its mm's, which gives
		 * up on any pending signal, fatal or not (-EINTR, from
		 * mm_take_all_locks()). A submission is never restarted, so
		 * that would fail the operation for a signal its owner
		 * handles: it pins its own pages instead, as it does past
		 * the cache's limits (and fails there if the task is dying).
		 * Counted: under a steady signal (a profiler's) the cache
		 * may never start for that process.
		 */
		kcoll_stat_add(KCOLL_STAT_REGCACHE_UNNOTIFIED, 1);
		return -EAGAIN;
	}
	mem->mni_on = true;
	kref_get(&comm->ref);
	mem->comm_ref = true;
	mem->seq = mmu_interval_read_begin(&mem->mni);

	err = kcoll_cache_pin_user(&mem->buf, addr, len, writable);
	if (err) {
		/* Nothing registered: no device to wait for. */
		kcoll_mem_put(mem);
		return err;
	}
	*out = mem;
	return 0;
}

/*
 * kcoll_cache_take - a cached entry over an operation's plain buffer
 * [@addr, @addr + @len), with a use for the operation; NULL if there is
 * none (never was, or an invalidation or the cache's bounds took it): the
 * caller pins, outside dev_sem (kcoll_cache_pin()). Under comm->dev_sem
 * (read): the entry's MRs, which a device removal takes only from entries
 * on the cache, stay until dev_sem goes, and the operation's use then
 * keeps them where the removal finds them (queued with the operation).
 */
struct kcoll_mem *kcoll_cache_take(struct kcoll_comm *comm, u64 addr,
				   size_t len, bool writable)
{
	struct kcoll_mem *mem;

	lockdep_assert_held(&comm->dev_sem);
	mem = kcoll_cache_find(comm, addr, len, writable);
	if (mem && atomic_read(&mem->suspect) &&
	    kcoll_mem_recheck(mem, mem->buf.writable ? FOLL_WRITE : 0)) {
		/* Maybe the last use (the drop ran meanwhile): under
		 * dev_sem, as a last put must be.
		 */
		kcoll_cache_stale(mem);
		kcoll_mem_put(mem);
		mem = NULL;
	}
	if (mem)
		kcoll_stat_add(KCOLL_STAT_REGCACHE_HITS, 1);
	return mem;
}

/*
 * kcoll_cache_commit - make @mem (from kcoll_cache_pin(), the operation's
 * use) usable by the operation: registered, and cached unless its mapping
 * changed meanwhile or the communicator is failing. On error the caller
 * drops its use. Under comm->dev_sem (read).
 */
int kcoll_cache_commit(struct kcoll_comm *comm, struct kcoll_mem *mem)
{
	bool keep;
	int err;

	lockdep_assert_held(&comm->dev_sem);
	err = kcoll_buf_register(&mem->buf, comm);
	if (err)
		return err;

	mutex_lock(&comm->lock);
	keep = !mmu_interval_read_retry(&mem->mni, mem->seq) &&
	       !atomic_read(&mem->stale) && !comm->shutting_down &&
	       !comm->error;
	if (keep) {
		refcount_inc(&mem->users);	/* the cache's */
		list_add(&mem->node, &comm->cache);
		mem->cached = true;
		comm->cache_bytes += mem->len;
		comm->cache_n++;
	}
	mutex_unlock(&comm->lock);
	if (keep)
		kcoll_cache_trim(comm, kcoll_cache_limit(), KCOLL_CACHE_MAX);
	return 0;
}
