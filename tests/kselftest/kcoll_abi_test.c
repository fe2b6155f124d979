// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/kcoll ABI: every ioctl and mapping, well-formed and malformed.
 * Each malformed input must get its documented errno and leave the file
 * usable; the VM runner separately fails on any kernel log report.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/eventfd.h>
#include "kcoll_test.h"
#include "kselftest_harness.h"

#define BAD_PTR ((void *)8)	/* never mapped */

FIXTURE(dev) {
	int fd;
};

FIXTURE_SETUP(dev)
{
	self->fd = kt_open();
	/* Debian 12's harness runs the test after a SKIP in its setup:
	 * its exit status 255 says SKIP instead. */
	if (self->fd < 0)
		SKIP(_exit(255), "cannot open " KCOLL_DEV ": %s (module not loaded?)",
		     strerror(errno));
}

FIXTURE_TEARDOWN(dev)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(dev, query)
{
	struct kcoll_query q = { 0 };

	ASSERT_EQ(0, kt_ioctl(self->fd, KCOLL_IOC_QUERY, &q));
	EXPECT_EQ(KCOLL_ABI_VERSION, q.abi_version);
	EXPECT_EQ(64, q.sqe_size);
	EXPECT_EQ(16, q.cqe_size);
	EXPECT_EQ(KCOLL_OP_LAST, q.nr_ops);
	EXPECT_EQ(KCOLL_PRIO_MAX, q.prio_max);
	/* Every opcode of this ABI is implemented. */
	EXPECT_EQ((1ULL << KCOLL_OP_LAST) - 1, q.ops_supported);
	EXPECT_TRUE(q.features & KCOLL_FEAT_COMM);
	EXPECT_EQ(KCOLL_DELAY_MAX_US, q.delay_max_us);
	EXPECT_TRUE(q.features & KCOLL_FEAT_NODROP);
	EXPECT_TRUE(q.features & KCOLL_FEAT_SINGLE_MMAP);
	EXPECT_EQ(kt_sysfs_read("max_sq_entries"), q.max_sq_entries);
	EXPECT_EQ(kt_sysfs_read("max_cq_entries"), q.max_cq_entries);
	EXPECT_EQ(KCOLL_ABI_VERSION, kt_sysfs_read("abi_version"));
}

TEST_F(dev, query_rejects_nonzero_input)
{
	struct kcoll_query q = { 0 };

	q.resv[3] = 1;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_QUERY, &q));
	memset(&q, 0, sizeof(q));
	q.abi_version = 99;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_QUERY, &q));
}

TEST_F(dev, bad_user_pointers)
{
	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, KCOLL_IOC_QUERY, BAD_PTR));
	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, KCOLL_IOC_SETUP, BAD_PTR));
	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, KCOLL_IOC_ENTER, BAD_PTR));
	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, KCOLL_IOC_EVENTFD, BAD_PTR));
	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, KCOLL_IOC_SETUP, NULL));
	/* A kernel address is not a user pointer either. */
	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, KCOLL_IOC_SETUP,
				    (void *)0xffffffff81000000ULL));
	/* Nothing was set up by any of these. */
	struct kcoll_enter e = { 0 };
	EXPECT_EQ(-EBADFD, kt_ioctl(self->fd, KCOLL_IOC_ENTER, &e));
}

TEST_F(dev, unknown_ioctls)
{
	char buf[256] = { 0 };

	EXPECT_EQ(-ENOTTY, kt_ioctl(self->fd, _IOWR('k', 0x7f, struct kcoll_query), buf));
	EXPECT_EQ(-ENOTTY, kt_ioctl(self->fd, _IO('k', 0x00), NULL));
	/* Same number, wrong size: the size is part of the command. */
	EXPECT_EQ(-ENOTTY, kt_ioctl(self->fd, _IOWR('k', 0x01, __u64), buf));
	EXPECT_EQ(-ENOTTY, kt_ioctl(self->fd, _IOWR('X', 0x01, struct kcoll_setup), buf));
}

TEST_F(dev, enter_before_setup)
{
	struct kcoll_enter e = { .to_submit = 1 };

	EXPECT_EQ(-EBADFD, kt_ioctl(self->fd, KCOLL_IOC_ENTER, &e));
}

TEST_F(dev, mmap_before_setup)
{
	void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);

	EXPECT_EQ(MAP_FAILED, m);
	EXPECT_EQ(ENXIO, errno);
}

static long setup(int fd, __u32 sq, __u32 cq, __u32 flags, struct kcoll_setup *out)
{
	struct kcoll_setup p = { .sq_entries = sq, .cq_entries = cq, .flags = flags };
	long r = kt_ioctl(fd, KCOLL_IOC_SETUP, &p);

	if (out)
		*out = p;
	return r;
}

TEST_F(dev, setup_sizes)
{
	struct kcoll_setup p;

	EXPECT_EQ(-EINVAL, setup(self->fd, 0, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, setup(self->fd, 0xffffffff, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, setup(self->fd, kt_sysfs_read("max_sq_entries") + 1, 0, 0, NULL));
	/* cq_entries without CQSIZE, CQSIZE with 0 or with cq < sq. */
	EXPECT_EQ(-EINVAL, setup(self->fd, 8, 16, 0, NULL));
	EXPECT_EQ(-EINVAL, setup(self->fd, 8, 0, KCOLL_SETUP_CQSIZE, NULL));
	EXPECT_EQ(-EINVAL, setup(self->fd, 16, 8, KCOLL_SETUP_CQSIZE, NULL));
	/* None of the failures consumed the one setup: this one works and
	 * rounds to powers of two. */
	ASSERT_EQ(0, setup(self->fd, 5, 0, 0, &p));
	EXPECT_EQ(8, p.sq_entries);
	EXPECT_EQ(16, p.cq_entries);
	EXPECT_EQ(KCOLL_OFF_RINGS, p.mmap_offset);
	EXPECT_EQ(0, p.mmap_size % 4096);
}

TEST_F(dev, setup_clamp)
{
	struct kcoll_setup p;

	ASSERT_EQ(0, setup(self->fd, 0xffffffff, 0xffffffff,
			   KCOLL_SETUP_CLAMP | KCOLL_SETUP_CQSIZE, &p));
	EXPECT_EQ(kt_sysfs_read("max_sq_entries"), p.sq_entries);
	EXPECT_EQ(kt_sysfs_read("max_cq_entries"), p.cq_entries);
}

TEST_F(dev, setup_cqsize)
{
	struct kcoll_setup p;

	ASSERT_EQ(0, setup(self->fd, 4, 100, KCOLL_SETUP_CQSIZE, &p));
	EXPECT_EQ(4, p.sq_entries);
	EXPECT_EQ(128, p.cq_entries);
}

TEST_F(dev, setup_rejects_unknown_flags_and_reserved)
{
	struct kcoll_setup p = { .sq_entries = 8 };

	EXPECT_EQ(-EINVAL, setup(self->fd, 8, 0, 1U << 31, NULL));
	EXPECT_EQ(-EINVAL, setup(self->fd, 8, 0, 1U << 2, NULL));
	p.resv[0] = 1;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_SETUP, &p));
	memset(&p, 0, sizeof(p));
	p.sq_entries = 8;
	p.sq_off.resv[1] = 1;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_SETUP, &p));
	memset(&p, 0, sizeof(p));
	p.sq_entries = 8;
	p.mmap_size = 4096;	/* an output field, must come in zero */
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_SETUP, &p));
	memset(&p, 0, sizeof(p));
	p.sq_entries = 8;
	p.features = 1;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_SETUP, &p));
	EXPECT_EQ(0, setup(self->fd, 8, 0, 0, NULL));
}

TEST_F(dev, double_setup)
{
	EXPECT_EQ(0, setup(self->fd, 8, 0, 0, NULL));
	EXPECT_EQ(-EBUSY, setup(self->fd, 8, 0, 0, NULL));
	EXPECT_EQ(-EBUSY, setup(self->fd, 16, 0, 0, NULL));
}

/*
 * A descriptor opened read-only may query the ABI and nothing else
 * (-EBADF, as write(2) says): read access to the device node grants no
 * rings, communicators or registrations. Until 2026-12-06 every ioctl
 * ignored the open mode. Write-only: SETUP works, but the rings cannot
 * be mapped without read access (the kernel's own mmap rule).
 */
TEST_F(dev, read_only_descriptors_may_only_query)
{
	struct kcoll_comm_create cc = { 0 };
	struct kcoll_comm_destroy cd = { 0 };
	struct kcoll_reg_mem rm = { 0 };
	struct kcoll_eventfd ev = { .fd = -1 };
	struct kcoll_enter e = { 0 };
	struct kcoll_query q = { 0 };
	struct kcoll_setup p;
	char buf[256] = { 0 };
	int ro = open(KCOLL_DEV, O_RDONLY | O_CLOEXEC);
	int wo = open(KCOLL_DEV, O_WRONLY | O_CLOEXEC);
	void *m;

	ASSERT_LE(0, ro);
	ASSERT_LE(0, wo);
	EXPECT_EQ(0, kt_ioctl(ro, KCOLL_IOC_QUERY, &q));
	EXPECT_EQ(KCOLL_ABI_VERSION, q.abi_version);
	EXPECT_EQ(-EBADF, setup(ro, 8, 0, 0, NULL));
	EXPECT_EQ(-EBADF, kt_ioctl(ro, KCOLL_IOC_ENTER, &e));
	EXPECT_EQ(-EBADF, kt_ioctl(ro, KCOLL_IOC_EVENTFD, &ev));
	EXPECT_EQ(-EBADF, kt_ioctl(ro, KCOLL_IOC_COMM_CREATE, &cc));
	EXPECT_EQ(-EBADF, kt_ioctl(ro, KCOLL_IOC_COMM_DESTROY, &cd));
	EXPECT_EQ(-EBADF, kt_ioctl(ro, KCOLL_IOC_REG_MEM, &rm));
	/* Not ours at all: still not a tty. */
	EXPECT_EQ(-ENOTTY, kt_ioctl(ro, _IOWR('X', 0x01, struct kcoll_setup),
				    buf));

	ASSERT_EQ(0, setup(wo, 8, 0, 0, &p));
	m = mmap(NULL, p.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, wo,
		 p.mmap_offset);
	EXPECT_EQ(MAP_FAILED, m);
	EXPECT_EQ(EACCES, errno);
	/* The same, read-write, as every caller opens it. */
	ASSERT_EQ(0, setup(self->fd, 8, 0, 0, &p));
	m = mmap(NULL, p.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 self->fd, p.mmap_offset);
	ASSERT_NE(MAP_FAILED, m);
	munmap(m, p.mmap_size);
	close(wo);
	close(ro);
}

TEST_F(dev, mmap_checks)
{
	struct kcoll_setup p;
	void *m;

	ASSERT_EQ(0, setup(self->fd, 64, 0, 0, &p));
	/* Wrong offset. */
	m = mmap(NULL, p.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 4096);
	EXPECT_EQ(MAP_FAILED, m);
	EXPECT_EQ(EINVAL, errno);
	m = mmap(NULL, p.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd,
		 0x10000000);
	EXPECT_EQ(MAP_FAILED, m);
	/* Too large and too small. */
	m = mmap(NULL, p.mmap_size + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);
	EXPECT_EQ(MAP_FAILED, m);
	EXPECT_EQ(EINVAL, errno);
	if (p.mmap_size > 4096) {
		m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);
		EXPECT_EQ(MAP_FAILED, m);
	}
	/* Private mappings would detach the application from the rings. */
	m = mmap(NULL, p.mmap_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, self->fd, 0);
	EXPECT_EQ(MAP_FAILED, m);
	EXPECT_EQ(EINVAL, errno);
	/* The right one works, twice (two views of the same rings). */
	void *a = mmap(NULL, p.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);
	void *b = mmap(NULL, p.mmap_size, PROT_READ, MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, a);
	ASSERT_NE(MAP_FAILED, b);
	*(volatile __u32 *)((char *)a + p.sq_off.tail) = 3;
	EXPECT_EQ(3, *(volatile __u32 *)((char *)b + p.sq_off.tail));
	EXPECT_EQ(63, *(__u32 *)((char *)b + p.sq_off.ring_mask));
	EXPECT_EQ(64, *(__u32 *)((char *)b + p.sq_off.ring_entries));
	/* The mapping cannot grow beyond the rings. */
	EXPECT_EQ(MAP_FAILED, mremap(a, p.mmap_size, p.mmap_size * 2, MREMAP_MAYMOVE));
	munmap(a, p.mmap_size);
	munmap(b, p.mmap_size);
}

TEST_F(dev, mapping_outlives_close)
{
	struct kcoll_setup p;
	__u32 *tail;
	void *m;

	ASSERT_EQ(0, setup(self->fd, 8, 0, 0, &p));
	m = mmap(NULL, p.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, m);
	close(self->fd);
	self->fd = -1;
	/* The VMA holds the file: the memory stays valid until munmap. */
	tail = (__u32 *)((char *)m + p.sq_off.tail);
	*tail = 7;
	EXPECT_EQ(7, *tail);
	EXPECT_EQ(0, munmap(m, p.mmap_size));
}

TEST_F(dev, enter_validation)
{
	struct kcoll_enter e;

	ASSERT_EQ(0, setup(self->fd, 8, 0, 0, NULL));
	memset(&e, 0, sizeof(e));
	e.to_submit = 9;	/* more than sq_entries */
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_ENTER, &e));
	e.to_submit = 0xffffffff;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_ENTER, &e));
	memset(&e, 0, sizeof(e));
	e.flags = 1U << 5;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_ENTER, &e));
	memset(&e, 0, sizeof(e));
	e.resv0 = 1;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_ENTER, &e));
	memset(&e, 0, sizeof(e));
	e.resv[1] = 1;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_ENTER, &e));
	memset(&e, 0, sizeof(e));
	e.min_complete = 1;	/* without GETEVENTS */
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_ENTER, &e));
	memset(&e, 0, sizeof(e));
	e.flags = KCOLL_ENTER_GETEVENTS;
	e.min_complete = 17;	/* more than cq_entries */
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_ENTER, &e));
	/* A valid empty enter does nothing and succeeds. */
	memset(&e, 0, sizeof(e));
	EXPECT_EQ(0, kt_ioctl(self->fd, KCOLL_IOC_ENTER, &e));
	e.to_submit = 8;	/* nothing queued: consumes nothing */
	EXPECT_EQ(0, kt_ioctl(self->fd, KCOLL_IOC_ENTER, &e));
}

TEST_F(dev, eventfd_validation)
{
	struct kcoll_eventfd e = { .fd = -1 };
	int efd;

	EXPECT_EQ(-ENOENT, kt_ioctl(self->fd, KCOLL_IOC_EVENTFD, &e));
	e.fd = 1000000;
	EXPECT_EQ(-EBADF, kt_ioctl(self->fd, KCOLL_IOC_EVENTFD, &e));
	e.fd = -5;
	EXPECT_EQ(-EBADF, kt_ioctl(self->fd, KCOLL_IOC_EVENTFD, &e));
	e.fd = self->fd;	/* not an eventfd */
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_EVENTFD, &e));
	efd = eventfd(0, EFD_CLOEXEC);
	ASSERT_GE(efd, 0);
	e.fd = efd;
	e.resv = 1;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, KCOLL_IOC_EVENTFD, &e));
	e.resv = 0;
	EXPECT_EQ(0, kt_ioctl(self->fd, KCOLL_IOC_EVENTFD, &e));
	EXPECT_EQ(-EBUSY, kt_ioctl(self->fd, KCOLL_IOC_EVENTFD, &e));
	e.fd = -1;
	EXPECT_EQ(0, kt_ioctl(self->fd, KCOLL_IOC_EVENTFD, &e));
	EXPECT_EQ(-ENOENT, kt_ioctl(self->fd, KCOLL_IOC_EVENTFD, &e));
	/* Registered and left registered at close: released with the file. */
	e.fd = efd;
	EXPECT_EQ(0, kt_ioctl(self->fd, KCOLL_IOC_EVENTFD, &e));
	close(efd);
}

TEST(sysfs_knobs)
{
	long long sq = kt_sysfs_read("max_sq_entries");
	char old[32];

	if (sq < 0)
		SKIP(return, "no %s (module not loaded?)", KCOLL_SYSFS);
	if (geteuid() != 0)
		SKIP(return, "writing sysfs knobs needs root");
	snprintf(old, sizeof(old), "%lld", sq);
	EXPECT_EQ(-EINVAL, kt_sysfs_write("max_sq_entries", "0"));
	EXPECT_EQ(-EINVAL, kt_sysfs_write("max_sq_entries", "100"));	/* not 2^n */
	EXPECT_EQ(-EINVAL, kt_sysfs_write("max_sq_entries", "65536"));	/* > limit */
	EXPECT_EQ(-EINVAL, kt_sysfs_write("max_sq_entries", "-8"));
	EXPECT_EQ(-EINVAL, kt_sysfs_write("max_sq_entries", "abc"));
	EXPECT_EQ(sq, kt_sysfs_read("max_sq_entries"));
	/* Statistics are read-only, even for root. */
	EXPECT_NE(0, kt_sysfs_write("stats/submitted", "0"));

	/* A new limit applies to rings set up afterwards, no reload. */
	ASSERT_EQ(0, kt_sysfs_write("max_sq_entries", "64"));
	int fd = kt_open();

	ASSERT_GE(fd, 0);
	EXPECT_EQ(-EINVAL, setup(fd, 128, 0, 0, NULL));
	struct kcoll_setup p;

	EXPECT_EQ(0, setup(fd, 128, 0, KCOLL_SETUP_CLAMP, &p));
	EXPECT_EQ(64, p.sq_entries);
	close(fd);
	EXPECT_EQ(0, kt_sysfs_write("max_sq_entries", old));

	/* Every SQ slot needs a CQ slot: a CQ limit below the SQ request
	 * refuses it, or clamps the SQ too. */
	long long cq = kt_sysfs_read("max_cq_entries");
	char oldcq[32];

	snprintf(oldcq, sizeof(oldcq), "%lld", cq);
	ASSERT_EQ(0, kt_sysfs_write("max_cq_entries", "16"));
	fd = kt_open();
	ASSERT_GE(fd, 0);
	EXPECT_EQ(-EINVAL, setup(fd, 32, 0, 0, NULL));
	EXPECT_EQ(0, setup(fd, 32, 0, KCOLL_SETUP_CLAMP, &p));
	EXPECT_EQ(16, p.sq_entries);
	EXPECT_EQ(16, p.cq_entries);
	close(fd);
	EXPECT_EQ(0, kt_sysfs_write("max_cq_entries", oldcq));
	/* The module parameter is the same knob. */
	FILE *f = fopen("/sys/module/kcoll/parameters/max_sq_entries", "r");

	ASSERT_NE(NULL, f);
	long long pv = -1;

	EXPECT_EQ(1, fscanf(f, "%lld", &pv));
	fclose(f);
	EXPECT_EQ(sq, pv);
}

/* The reduction implementation passed its load-time self-test. */
TEST(reduce_impl)
{
	char buf[32] = "";
	FILE *f = fopen(KCOLL_SYSFS "reduce_impl", "r");

	if (!f)
		SKIP(return, "no %sreduce_impl (module not loaded?)", KCOLL_SYSFS);
	ASSERT_NE(NULL, fgets(buf, sizeof(buf), f));
	fclose(f);
	TH_LOG("reduce_impl: %s", buf);
#ifdef __x86_64__
	/* SSE2 is baseline on x86-64: falling back to scalar means a
	 * vector implementation failed its self-test. */
	EXPECT_TRUE(!strcmp(buf, "sse2\n") || !strcmp(buf, "avx2\n") ||
		    !strcmp(buf, "avx512\n"));
#else
	EXPECT_STREQ("scalar\n", buf);
#endif
}

#include "kcoll_test_main.h"
