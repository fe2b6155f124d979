/* SPDX-License-Identifier: MIT */
/*
 * Userspace dma-buf allocation from the exporters a test machine has, for
 * the tests and kcoll-perf -D: what GPU memory is to kcoll, without a GPU.
 *
 *   vgem     a DRM dumb buffer of the virtual GEM driver, exported with
 *            PRIME (shmem pages, write-combined); both test kernels
 *   udmabuf  a sealed memfd turned into a dma-buf by /dev/udmabuf (6.12)
 *   heap     the system dma-heap, /dev/dma_heap/system (6.12)
 *   testbuf  the project's test exporter (tests/kmod), ordinary pages
 *   vram     the test exporter's "GPU memory": no CPU mapping at all
 *
 * The DRM ioctls used are restated here (no libdrm or drm headers needed):
 * their layouts are the kernel's stable ABI.
 */
#ifndef KCOLL_DMABUF_ALLOC_H
#define KCOLL_DMABUF_ALLOC_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>
#include <linux/udmabuf.h>
#include "../tests/kmod/kcoll_testbuf.h"

/* drm.h / drm_mode.h, the three calls vgem needs */
struct kd_drm_create_dumb {
	uint32_t height, width, bpp, flags;
	uint32_t handle, pitch;
	uint64_t size;
};
struct kd_drm_prime_handle {
	uint32_t handle, flags;
	int32_t fd;
};
struct kd_drm_gem_close {
	uint32_t handle, pad;
};
#define KD_DRM_IOCTL_GEM_CLOSE	_IOW('d', 0x09, struct kd_drm_gem_close)
#define KD_DRM_IOCTL_PRIME_HANDLE_TO_FD \
	_IOWR('d', 0x2d, struct kd_drm_prime_handle)
#define KD_DRM_IOCTL_MODE_CREATE_DUMB \
	_IOWR('d', 0xb2, struct kd_drm_create_dumb)

struct kd_buf {
	int fd;			/* the dma-buf; -1: none */
	void *map;		/* MAP_SHARED of it, NULL where it has none */
	size_t size;
	const char *exporter;
};

static const char *const kd_exporters[] = {
	"vgem", "udmabuf", "heap", "testbuf", "vram",
};

struct kd_drm_version {
	int major, minor, patchlevel;
	size_t name_len;
	char *name;
	size_t date_len;
	char *date;
	size_t desc_len;
	char *desc;
};
#define KD_DRM_IOCTL_VERSION	_IOWR('d', 0x00, struct kd_drm_version)

/* The DRM card whose driver is vgem, opened; -errno if none. */
static inline int kd_vgem_open(void)
{
	char path[64], name[32];
	int i, fd;

	for (i = 0; i < 16; i++) {
		struct kd_drm_version v = { 0 };

		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		memset(name, 0, sizeof(name));
		v.name = name;
		v.name_len = sizeof(name) - 1;
		if (!ioctl(fd, KD_DRM_IOCTL_VERSION, &v) && !strcmp(name, "vgem"))
			return fd;
		close(fd);
	}
	return -ENODEV;
}

/* A vgem buffer's dma-buf fd; @rdwr 0: exported for reading only. */
static inline int kd_vgem_mode(size_t size, int rdwr)
{
	struct kd_drm_create_dumb c = { 0 };
	struct kd_drm_prime_handle p = { 0 };
	struct kd_drm_gem_close g = { 0 };
	int card = kd_vgem_open(), err = 0;

	if (card < 0)
		return card;
	/* One byte per pixel, 4096 to a row: size bytes. */
	c.width = 4096;
	c.height = (size + 4095) / 4096;
	c.bpp = 8;
	if (ioctl(card, KD_DRM_IOCTL_MODE_CREATE_DUMB, &c)) {
		err = -errno;
		goto out;
	}
	p.handle = c.handle;
	p.flags = O_CLOEXEC | (rdwr ? O_RDWR : 0);
	if (ioctl(card, KD_DRM_IOCTL_PRIME_HANDLE_TO_FD, &p))
		err = -errno;
	/* The dma-buf holds the object: the handle may go. */
	g.handle = c.handle;
	ioctl(card, KD_DRM_IOCTL_GEM_CLOSE, &g);
out:
	close(card);
	return err ? err : p.fd;
}

static inline int kd_vgem(size_t size)
{
	return kd_vgem_mode(size, 1);
}

static inline int kd_udmabuf(size_t size)
{
	struct udmabuf_create c = { 0 };
	int dev, mfd, fd;

	dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return -errno;
	mfd = memfd_create("kcoll-udmabuf", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	if (mfd < 0 || ftruncate(mfd, size) ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK)) {
		fd = -errno;
		goto out;
	}
	c.memfd = mfd;
	c.flags = UDMABUF_FLAGS_CLOEXEC;
	c.size = size;
	fd = ioctl(dev, UDMABUF_CREATE, &c);
	if (fd < 0)
		fd = -errno;
out:
	if (mfd >= 0)
		close(mfd);	/* the dma-buf keeps the memfd's pages */
	close(dev);
	return fd;
}

static inline int kd_heap(size_t size)
{
	struct dma_heap_allocation_data a = { 0 };
	int dev = open("/dev/dma_heap/system", O_RDWR | O_CLOEXEC), err = 0;

	if (dev < 0)
		return -errno;
	a.len = size;
	a.fd_flags = O_RDWR | O_CLOEXEC;
	if (ioctl(dev, DMA_HEAP_IOCTL_ALLOC, &a))
		err = -errno;
	close(dev);
	return err ? err : (int)a.fd;
}

static inline int kd_testbuf(size_t size, uint32_t flags)
{
	struct kcoll_testbuf_create c = { 0 };
	int dev = open(KCOLL_TESTBUF_DEVICE, O_RDWR | O_CLOEXEC), err = 0;

	if (dev < 0)
		return -errno;
	c.size = size;
	c.flags = flags;
	if (ioctl(dev, KCOLL_TESTBUF_IOC_CREATE, &c))
		err = -errno;
	close(dev);
	return err ? err : c.fd;
}

/*
 * A dma-buf of @size bytes (a page multiple) from @exporter, mapped
 * MAP_SHARED where the exporter allows it. 0, or -errno: -ENODEV/-ENOENT
 * when this machine has no such exporter, -EINVAL for an unknown name.
 */
static inline int kd_alloc(struct kd_buf *b, const char *exporter, size_t size)
{
	int fd;

	memset(b, 0, sizeof(*b));
	b->fd = -1;
	if (!strcmp(exporter, "vgem"))
		fd = kd_vgem(size);
	else if (!strcmp(exporter, "udmabuf"))
		fd = kd_udmabuf(size);
	else if (!strcmp(exporter, "heap"))
		fd = kd_heap(size);
	else if (!strcmp(exporter, "testbuf"))
		fd = kd_testbuf(size, 0);
	else if (!strcmp(exporter, "vram"))
		fd = kd_testbuf(size, KCOLL_TESTBUF_VRAM);
	else
		return -EINVAL;
	if (fd < 0)
		return fd;
	b->fd = fd;
	b->size = size;
	b->exporter = exporter;
	if (strcmp(exporter, "vram")) {
		b->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
			      fd, 0);
		if (b->map == MAP_FAILED) {
			int err = -errno;

			close(fd);
			b->fd = -1;
			b->map = NULL;
			return err;
		}
	}
	return 0;
}

/* Bracket CPU access to the mapping (the exporter may need to flush). */
static inline void kd_cpu(const struct kd_buf *b, int start)
{
	struct dma_buf_sync s = {
		.flags = DMA_BUF_SYNC_RW |
			 (start ? DMA_BUF_SYNC_START : DMA_BUF_SYNC_END),
	};

	if (b->fd >= 0)
		ioctl(b->fd, DMA_BUF_IOCTL_SYNC, &s);
}

/* Close the fd (an importer may keep the buffer alive). */
static inline void kd_close_fd(struct kd_buf *b)
{
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
}

static inline void kd_free(struct kd_buf *b)
{
	if (b->map)
		munmap(b->map, b->size);
	kd_close_fd(b);
	memset(b, 0, sizeof(*b));
	b->fd = -1;
}

#endif /* KCOLL_DMABUF_ALLOC_H */
