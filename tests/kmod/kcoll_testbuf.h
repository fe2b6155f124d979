/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * kcoll_testbuf: the ioctl ABI of the test dma-buf exporter
 * (tests/kmod/kcoll_testbuf.c). Test-only: it lets unprivileged tests in the
 * VMs make dma-bufs, some of them imitating GPU memory, to exercise kcoll's
 * dma-buf import (REG_MEM with a dma-buf fd). Includable from userspace C.
 *
 * Device: /dev/kcoll_testbuf, mode 0666 (misc device, dynamic minor).
 *
 * Counters: /sys/kernel/debug/kcoll_testbuf/counters (root; debugfs), one
 * "name value" line each, in this order:
 *   live counts (back to 0 once every importer let go of everything)
 *     buffers              dma-bufs not yet released
 *     attachments          attachments not yet detached
 *     pins                 pin calls not yet undone by unpin
 *     mappings             map_dma_buf results not yet unmapped
 *     vmaps                vmap results not yet vunmapped
 *     mmaps                user mappings (VMAs) of buffers not yet unmapped
 *     fences               fences added by KCOLL_TESTBUF_IOC_FENCE, not yet
 *                          signalled
 *   totals since load (never decrease)
 *     attach_calls         calls of attach, failed ones included
 *     map_calls            calls of map_dma_buf, failed ones included
 *     vmap_calls           calls of vmap, failed ones included
 *     revokes              successful KCOLL_TESTBUF_IOC_REVOKE
 *     injected_failures    failures made by the KCOLL_TESTBUF_FAIL_* flags
 *     dynamic_attachments  successful attaches by a dynamic importer (one
 *                          that passed importer_ops, so has move_notify)
 *     peer2peer_attachments successful attaches with attach->peer2peer set
 *                          (importer_ops->allow_peer2peer)
 *     fences_added         successful KCOLL_TESTBUF_FENCE_ADD
 *
 * The exporter is dynamic (it implements pin and unpin), so the kernel calls
 * map_dma_buf and unmap_dma_buf with the buffer's reservation lock held. On
 * kernels without CONFIG_DMABUF_MOVE_NOTIFY (Debian's 6.1 and 6.12) the
 * dma-buf core pins the buffer itself around each mapping of a dynamic
 * importer; a static importer (no importer_ops) gets one pinned, cached
 * mapping made at attach time and undone at detach.
 */
#ifndef KCOLL_TESTBUF_H
#define KCOLL_TESTBUF_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define KCOLL_TESTBUF_DEVICE	"/dev/kcoll_testbuf"

/* The largest buffer KCOLL_TESTBUF_IOC_CREATE makes: 256 MiB. */
#define KCOLL_TESTBUF_MAX_SIZE	(256ULL << 20)

/*
 * Flags of struct kcoll_testbuf_create.
 *
 * KCOLL_TESTBUF_VRAM: imitate GPU device memory the way NVIDIA's dma-buf
 *	exporter presents it: no vmap (the dma-buf core answers EINVAL), mmap
 *	fails with EOPNOTSUPP, and
 *	map_dma_buf returns a table with DMA addresses only (sg_dma_address and
 *	sg_dma_len of every entry set; no struct page behind any entry:
 *	sg_page() is NULL and sg->length is 0). An importer that looks at
 *	pages instead of DMA addresses sees NULL.
 * KCOLL_TESTBUF_FAIL_ATTACH: attach fails with EBUSY.
 * KCOLL_TESTBUF_FAIL_MAP: map_dma_buf fails with ENOMEM. For a static
 *	importer this makes the attach fail (the core maps at attach time).
 * KCOLL_TESTBUF_FAIL_VMAP: vmap fails with ENOMEM. The dma-buf core of 6.1
 *	and 6.12 WARNs when an exporter's vmap fails, so a test VM's log scan
 *	fails with it: kcoll's tests do not use it.
 *
 * Without KCOLL_TESTBUF_VRAM the buffer is ordinary kernel memory:
 * map_dma_buf returns a table with one entry per chunk (struct page and
 * length set, DMA-mapped to the attaching device), vmap works (mappings are
 * reference-counted), and mmap of the dma-buf fd works for MAP_SHARED
 * mappings within the buffer (MAP_PRIVATE or a range past the end: EINVAL).
 * All pages are mapped at mmap time and there is no fault handler: a range
 * zapped later (madvise(MADV_DONTNEED)) or grown by mremap gives SIGBUS.
 *
 * Either way map_dma_buf fails with EINVAL for a device that cannot do DMA
 * (no dma_mask, e.g. a software RDMA device) instead of letting the DMA API
 * warn, and with an error (EIO, ENOMEM, ...) when DMA mapping fails.
 *
 * The memory (x86: 4 KiB pages) is allocated zeroed, in chunks of alternately 16 KiB
 * (falling back to 4 KiB when no 16 KiB block is free) and 4 KiB, so the
 * tables have entries of different lengths: 16K, 4K, 16K, 4K, ...; once
 * fewer than 16 KiB remain, the rest comes in 4 KiB chunks. One table entry
 * per chunk: entries are not merged even when neighbouring chunks happen to
 * be physically contiguous (an IOMMU may still merge DMA segments).
 */
#define KCOLL_TESTBUF_VRAM		(1U << 0)
#define KCOLL_TESTBUF_FAIL_ATTACH	(1U << 1)
#define KCOLL_TESTBUF_FAIL_MAP		(1U << 2)
#define KCOLL_TESTBUF_FAIL_VMAP		(1U << 3)
#define KCOLL_TESTBUF_FLAGS_ALL		(KCOLL_TESTBUF_VRAM | \
					 KCOLL_TESTBUF_FAIL_ATTACH | \
					 KCOLL_TESTBUF_FAIL_MAP | \
					 KCOLL_TESTBUF_FAIL_VMAP)

/*
 * KCOLL_TESTBUF_IOC_CREATE: make a dma-buf.
 * In:  size (bytes; nonzero, a multiple of the page size), flags
 *      (KCOLL_TESTBUF_*), resv (zero). fd is ignored.
 * Out: fd, a new dma-buf file descriptor (O_RDWR, close-on-exec). The ioctl
 *      returns 0.
 * Errors: EINVAL (size 0 or not page-aligned, unknown flag, resv not zero),
 *      E2BIG (size over KCOLL_TESTBUF_MAX_SIZE), ENOMEM, EMFILE, EFAULT,
 *      EINTR (a fatal signal arrived while allocating).
 * The buffer lives until the last reference (the fd, an mmap, an importer's
 * attachment) goes; the module cannot be unloaded while one lives.
 */
struct kcoll_testbuf_create {
	__u64 size;
	__u32 flags;
	__s32 fd;
	__u64 resv[2];
};

/*
 * KCOLL_TESTBUF_IOC_REVOKE: tell every dynamic importer of a buffer that it
 * moves (dma_buf_move_notify under the buffer's reservation lock), as an
 * exporter evicting GPU memory would. Nothing actually moves: an importer
 * that maps again gets the same memory. Static importers are not told.
 * In:  fd (a dma-buf from KCOLL_TESTBUF_IOC_CREATE), resv (zero).
 * Errors: EINVAL (resv not zero, or fd is a dma-buf of another exporter or
 *      not a dma-buf), EBADF (fd not open), EINTR (a signal arrived while
 *      waiting for the reservation lock).
 */
struct kcoll_testbuf_revoke {
	__s32 fd;
	__u32 resv;
};

/*
 * KCOLL_TESTBUF_IOC_FENCE: op KCOLL_TESTBUF_FENCE_ADD puts a fence that
 * nothing signals into the buffer's reservation object with
 * DMA_RESV_USAGE_KERNEL, as an exporter's memory move that is still
 * running (or a GPU that hung in one) would; op KCOLL_TESTBUF_FENCE_SIGNAL
 * signals it. At most one such fence per buffer at a time; a buffer
 * released with its fence unsignalled signals it then.
 * In:  fd (a dma-buf from KCOLL_TESTBUF_IOC_CREATE), op.
 * Errors: EINVAL (unknown op, or fd is a dma-buf of another exporter or
 *      not a dma-buf), EBADF (fd not open), EBUSY (ADD: one is pending),
 *      ENOENT (SIGNAL: none is), ENOMEM, EINTR (a signal arrived while
 *      waiting for the reservation lock).
 */
#define KCOLL_TESTBUF_FENCE_ADD		1
#define KCOLL_TESTBUF_FENCE_SIGNAL	2
struct kcoll_testbuf_fence {
	__s32 fd;
	__u32 op;
};

#define KCOLL_TESTBUF_IOC_MAGIC		'T'
#define KCOLL_TESTBUF_IOC_CREATE	_IOWR(KCOLL_TESTBUF_IOC_MAGIC, 0x01, \
					      struct kcoll_testbuf_create)
#define KCOLL_TESTBUF_IOC_REVOKE	_IOW(KCOLL_TESTBUF_IOC_MAGIC, 0x02, \
					     struct kcoll_testbuf_revoke)
#define KCOLL_TESTBUF_IOC_FENCE		_IOW(KCOLL_TESTBUF_IOC_MAGIC, 0x03, \
					     struct kcoll_testbuf_fence)

#endif /* KCOLL_TESTBUF_H */
