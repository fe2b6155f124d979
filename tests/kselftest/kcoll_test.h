/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Raw-ABI helpers shared by the kcoll selftests. They speak to /dev/kcoll
 * with bare ioctls and the mapping, independent of libcoll, so that the
 * kernel's behaviour is tested against the documented ABI itself.
 */
#ifndef KCOLL_TEST_H
#define KCOLL_TEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/kcoll.h>

#define KCOLL_DEV	"/dev/kcoll"
#define KCOLL_SYSFS	"/sys/class/misc/kcoll/"

struct tring {
	int fd;
	struct kcoll_setup p;
	void *map;
	_Atomic __u32 *sq_head, *sq_tail, *cq_head, *cq_tail;
	__u32 *cq_flags;
	struct kcoll_sqe *sqes;
	struct kcoll_cqe *cqes;
	__u32 sq_mask, cq_mask;
	__u32 sq_local_tail;	/* SQEs prepared, not yet published */
};

static inline int kt_open(void)
{
	return open(KCOLL_DEV, O_RDWR | O_CLOEXEC);
}

/* ioctl returning -errno on failure. */
static inline long kt_ioctl(int fd, unsigned long cmd, void *arg)
{
	long r = ioctl(fd, cmd, arg);

	return r < 0 ? -errno : r;
}

/* Set up and map a ring; returns 0 or -errno. */
static inline int kt_ring_init(struct tring *r, __u32 sq, __u32 cq, __u32 flags)
{
	__u8 *b;
	long err;

	memset(r, 0, sizeof(*r));
	r->fd = kt_open();
	if (r->fd < 0)
		return -errno;
	r->p.sq_entries = sq;
	r->p.cq_entries = cq;
	r->p.flags = flags;
	err = kt_ioctl(r->fd, KCOLL_IOC_SETUP, &r->p);
	if (err) {
		close(r->fd);
		return err;
	}
	r->map = mmap(NULL, r->p.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		      r->fd, r->p.mmap_offset);
	if (r->map == MAP_FAILED) {
		err = -errno;
		close(r->fd);
		return err;
	}
	b = r->map;
	r->sq_head = (void *)(b + r->p.sq_off.head);
	r->sq_tail = (void *)(b + r->p.sq_off.tail);
	r->cq_head = (void *)(b + r->p.cq_off.head);
	r->cq_tail = (void *)(b + r->p.cq_off.tail);
	r->cq_flags = (void *)(b + r->p.cq_off.flags);
	r->sqes = (void *)(b + r->p.sq_off.sqes);
	r->cqes = (void *)(b + r->p.cq_off.cqes);
	r->sq_mask = *(__u32 *)(b + r->p.sq_off.ring_mask);
	r->cq_mask = *(__u32 *)(b + r->p.cq_off.ring_mask);
	r->sq_local_tail = atomic_load_explicit(r->sq_tail, memory_order_relaxed);
	return 0;
}

static inline void kt_ring_exit(struct tring *r)
{
	if (r->map && r->map != MAP_FAILED)
		munmap(r->map, r->p.mmap_size);
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	r->map = NULL;
}

/* Next SQE slot, zeroed; NULL if the SQ is full. */
static inline struct kcoll_sqe *kt_get_sqe(struct tring *r)
{
	__u32 head = atomic_load_explicit(r->sq_head, memory_order_acquire);
	struct kcoll_sqe *sqe;

	if (r->sq_local_tail - head >= r->p.sq_entries)
		return NULL;
	sqe = &r->sqes[r->sq_local_tail++ & r->sq_mask];
	memset(sqe, 0, sizeof(*sqe));
	return sqe;
}

static inline struct kcoll_sqe *kt_prep(struct tring *r, __u8 op, __u64 ud)
{
	struct kcoll_sqe *sqe = kt_get_sqe(r);

	if (sqe) {
		sqe->opcode = op;
		sqe->user_data = ud;
	}
	return sqe;
}

/* Publish prepared SQEs and ring the doorbell. */
static inline long kt_enter(struct tring *r, __u32 to_submit, __u32 min_complete,
			    __u32 flags, __u64 timeout_ns)
{
	struct kcoll_enter e = {
		.to_submit = to_submit, .min_complete = min_complete,
		.flags = flags, .timeout_ns = timeout_ns,
	};

	atomic_store_explicit(r->sq_tail, r->sq_local_tail, memory_order_release);
	return kt_ioctl(r->fd, KCOLL_IOC_ENTER, &e);
}

static inline long kt_submit(struct tring *r)
{
	__u32 n = r->sq_local_tail -
		  atomic_load_explicit(r->sq_head, memory_order_acquire);

	return kt_enter(r, n, 0, 0, 0);
}

static inline __u32 kt_cq_ready(struct tring *r)
{
	return atomic_load_explicit(r->cq_tail, memory_order_acquire) -
	       atomic_load_explicit(r->cq_head, memory_order_relaxed);
}

/* Pop one CQE into *out; returns 0 or -EAGAIN. */
static inline int kt_pop(struct tring *r, struct kcoll_cqe *out)
{
	__u32 head = atomic_load_explicit(r->cq_head, memory_order_relaxed);

	if (atomic_load_explicit(r->cq_tail, memory_order_acquire) == head)
		return -EAGAIN;
	*out = r->cqes[head & r->cq_mask];
	atomic_store_explicit(r->cq_head, head + 1, memory_order_release);
	return 0;
}

/* Read a decimal sysfs value of the kcoll device; -1 on error. */
static inline long long kt_sysfs_read(const char *name)
{
	char path[256], buf[64];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), KCOLL_SYSFS "%s", name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f))
		v = strtoll(buf, NULL, 0);
	fclose(f);
	return v;
}

/* Records of the kernel log containing @what (/dev/kmsg: root); -1 if
 * it cannot be read. */
static inline int kt_klog_count(const char *what)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK), n = 0;
	char rec[8192];
	ssize_t len;

	if (fd < 0)
		return -1;
	for (;;) {
		len = read(fd, rec, sizeof(rec) - 1);
		if (len < 0 && errno == EPIPE)	/* overwritten meanwhile */
			continue;
		if (len <= 0)
			break;			/* EAGAIN: the end */
		rec[len] = 0;
		n += strstr(rec, what) != NULL;
	}
	close(fd);
	return n;
}

/*
 * Wait up to @tenths tenths of a second for port 1 of RDMA device @dev
 * to be ACTIVE (sysfs; an ibv_devinfo per poll costs a TCG guest three
 * processes, more than a second): 0, or -1.
 */
static inline int kt_port_wait_active(const char *dev, int tenths)
{
	char path[128], st[32];
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/state",
		 dev);
	for (i = 0; i < tenths; i++) {
		f = fopen(path, "r");
		if (f) {
			if (fgets(st, sizeof(st), f) && strstr(st, "ACTIVE")) {
				fclose(f);
				return 0;
			}
			fclose(f);
		}
		usleep(100 * 1000);
	}
	return -1;
}

/* Write @val to the file at @path (sysfs, procfs, cgroupfs): 0, or -errno
 * (-EIO for a short write). */
static inline int kt_write_file(const char *path, const char *val)
{
	ssize_t n;
	int fd, err = 0;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	if (n < 0)
		err = -errno;
	else if ((size_t)n != strlen(val))
		err = -EIO;
	close(fd);
	return err;
}

static inline int kt_sysfs_write(const char *name, const char *val)
{
	char path[256];

	snprintf(path, sizeof(path), KCOLL_SYSFS "%s", name);
	return kt_write_file(path, val);
}

/* Memory cgroups (kcoll_harden_test.c, kcoll_comm_test.c) ------------- */

/*
 * Make @name, a cgroup of its own with memory.max @max, under the cgroup2
 * hierarchy (mounted at /tmp/kcoll-cg2 if none is: *@mounted), its path
 * in @dir: 0, or -1 with why it cannot in @why (the caller skips).
 * kt_memcg_remove() undoes it. Needs root.
 */
static inline int kt_memcg_make(const char *name, unsigned long max,
				char *dir, size_t n, char *root, size_t rn,
				int *mounted, char *why, size_t wn)
{
	char path[512], line[512];
	FILE *f;

	*mounted = 0;
	root[0] = 0;
	f = fopen("/proc/mounts", "re");
	if (!f) {
		snprintf(why, wn, "/proc/mounts: %s", strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char dev[64], mnt[200], type[32];

		if (sscanf(line, "%63s %199s %31s", dev, mnt, type) == 3 &&
		    !strcmp(type, "cgroup2")) {
			snprintf(root, rn, "%s", mnt);
			break;
		}
	}
	fclose(f);
	if (!root[0]) {
		snprintf(root, rn, "/tmp/kcoll-cg2");
		mkdir(root, 0700);
		if (mount("none", root, "cgroup2", 0, NULL)) {
			snprintf(why, wn, "no cgroup2 mounted and mounting one failed: %s",
				 strerror(errno));
			return -1;
		}
		*mounted = 1;
	}
	snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
	f = fopen(path, "re");
	line[0] = 0;
	if (!f || !fgets(line, sizeof(line), f))
		line[0] = 0;
	if (f)
		fclose(f);
	if (!strstr(line, "memory")) {
		if (*mounted)
			umount(root);
		snprintf(why, wn, "this kernel's cgroup2 has no memory controller");
		return -1;
	}
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", root);
	if (kt_write_file(path, "+memory")) {
		snprintf(why, wn, "enabling the memory controller failed");
		return -1;
	}
	snprintf(dir, n, "%s/%s", root, name);
	rmdir(dir);
	if (mkdir(dir, 0755)) {
		snprintf(why, wn, "mkdir of the test cgroup: %s",
			 strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/memory.max", dir);
	snprintf(line, sizeof(line), "%lu", max);
	if (kt_write_file(path, line)) {
		rmdir(dir);
		snprintf(why, wn, "writing the test cgroup's memory.max failed");
		return -1;
	}
	return 0;
}

/* Undo kt_memcg_make(): 0, or -errno of the rmdir. */
static inline int kt_memcg_remove(const char *dir, const char *root,
				  int mounted)
{
	int err = rmdir(dir) ? -errno : 0;

	if (mounted)
		umount(root);
	return err;
}

/* The calling process joins the cgroup at @dir: 0 or -errno. */
static inline int kt_memcg_join(const char *dir)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	return kt_write_file(path, "0");
}

/* The cgroup at @dir's memory.current, or -1. */
static inline long long kt_memcg_current(const char *dir)
{
	char path[512];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/memory.current", dir);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* Communicators (kcoll_comm_test.c, kcoll_fault_test.c) ---------------- */

static inline void kt_addr_v4(struct kcoll_rank_addr *ra, const char *ip)
{
	unsigned int a, b, c, d;

	memset(ra, 0, sizeof(*ra));
	ra->addr[10] = 0xff;
	ra->addr[11] = 0xff;
	if (sscanf(ip, "%u.%u.%u.%u", &a, &b, &c, &d) == 4) {
		ra->addr[12] = a;
		ra->addr[13] = b;
		ra->addr[14] = c;
		ra->addr[15] = d;
	}
}

/* Two ranks on one node at @ip: the second by local index 1. */
static inline void kt_addr_pair(struct kcoll_rank_addr ranks[2],
				const char *ip)
{
	kt_addr_v4(&ranks[0], ip);
	kt_addr_v4(&ranks[1], ip);
	ranks[1].local_index = 1;
}

static inline long kt_comm_create(int fd, __u64 uid, const char *key, __u32 rank,
			   __u32 nranks, struct kcoll_rank_addr *ranks,
			   __u32 timeout_ms, __u32 *id)
{
	struct kcoll_comm_create c = {
		.ranks = (uintptr_t)ranks, .uid = uid, .rank = rank,
		.nranks = nranks, .timeout_ms = timeout_ms,
	};
	long r;

	memcpy(c.key, key, strnlen(key, sizeof(c.key)));
	r = kt_ioctl(fd, KCOLL_IOC_COMM_CREATE, &c);
	if (!r && id)
		*id = c.comm_id;
	return r;
}

/* Submit one SQE and wait for its CQE (the whole CQE into @cqe). */
static inline int kt_run_cqe(struct tring *r, struct kcoll_sqe *tmpl,
			     struct kcoll_cqe *cqe)
{
	struct kcoll_sqe *sqe = kt_get_sqe(r);
	long e;

	if (!sqe)
		return -ENOSPC;
	*sqe = *tmpl;
	e = kt_enter(r, 1, 1, KCOLL_ENTER_GETEVENTS, 0);
	if (e < 0)
		return (int)e;
	while (kt_pop(r, cqe)) {
		e = kt_enter(r, 0, 1, KCOLL_ENTER_GETEVENTS, 0);
		if (e < 0)
			return (int)e;
	}
	return 0;
}

/* Submit one SQE and wait for its CQE; returns the CQE's res. */
static inline int kt_run(struct tring *r, struct kcoll_sqe *tmpl)
{
	struct kcoll_cqe cqe;
	int e = kt_run_cqe(r, tmpl, &cqe);

	return e ? e : cqe.res;
}

static inline struct kcoll_sqe kt_coll(__u8 op, __u32 comm, __u8 dtype, __u8 redop,
				__u32 peer, __u64 count, const void *s, void *d)
{
	struct kcoll_sqe sqe = {
		.opcode = op, .comm_id = comm, .dtype = dtype, .redop = redop,
		.peer = peer, .count = count, .send_addr = (uintptr_t)s,
		.recv_addr = (uintptr_t)d, .user_data = 42,
	};

	return sqe;
}

#endif /* KCOLL_TEST_H */
