// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll dma-buf import (GPU memory): REG_MEM of dma-bufs from every
 * exporter the VM has (vgem; the project's kcoll_testbuf, which also
 * imitates GPU memory; udmabuf and the system dma-heap on 6.12), as user
 * nobody with the fd handed over by root (the way a GPU driver's fd
 * reaches a training process); bad input; memory the CPU must not touch
 * (KCOLL_REG_NO_CPU) moved only by the NIC between two ranks on rxe, local
 * copies included;
 * DEREG while busy; a process dying with imports in flight; the per-user
 * limit; and the real-NIC path (attach, pin, map, segmenting) against a
 * PCI device of the VM (module parameter dmabuf_test_dev). After each test
 * the test exporter must hold nothing: every attachment, pin, mapping and
 * vmap kcoll took was given back.
 */
#define _GNU_SOURCE
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <dirent.h>
#include "kselftest_harness.h"
#include "kcoll_test.h"
#include "kcoll_nobody.h"
#include "../../tools/dmabuf-alloc.h"

#define TB_COUNTERS	"/sys/kernel/debug/kcoll_testbuf/counters"
#define KCOLL_PARAM	"/sys/module/kcoll/parameters/"

/* A fixture only for its timeouts: transfers under TCG are slow. */
FIXTURE(dmabuf) {
	int unused;
};

FIXTURE_SETUP(dmabuf)
{
}

FIXTURE_TEARDOWN(dmabuf)
{
}

/* No vgem in this kernel at all (its module neither loaded nor built in,
 * e.g. the KASAN guest's): its tests say SKIP. Debian's kernels have it,
 * and the VM fails if it is there and does not load (guest-lib.sh). */
static int kd_no_vgem(void)
{
	return access("/sys/module/vgem", F_OK) != 0;
}

/* Test exporter counter @name; -1 if unreadable. */
static long long tb_counter(const char *name)
{
	char line[128], key[64];
	long long v, found = -1;
	FILE *f = fopen(TB_COUNTERS, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %lld", key, &v) == 2 && !strcmp(key, name))
			found = v;
	fclose(f);
	return found;
}

/* The exporter's live counts: 0 when kcoll gave everything back. The
 * release of a closed file may trail its close a little. */
static long long tb_live(void)
{
	static const char *const live[] = {
		"buffers", "attachments", "pins", "mappings", "vmaps", "mmaps",
		"fences",
	};
	long long sum = 0;
	int i, tries;

	for (tries = 0; tries < 100; tries++) {
		sum = 0;
		for (i = 0; i < (int)(sizeof(live) / sizeof(live[0])); i++)
			sum += tb_counter(live[i]);
		if (!sum)
			return 0;
		usleep(50000);
	}
	for (i = 0; i < (int)(sizeof(live) / sizeof(live[0])); i++)
		fprintf(stderr, "# testbuf %s %lld\n", live[i],
			tb_counter(live[i]));
	return sum;
}

static int kd_param_write(const char *name, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), KCOLL_PARAM "%s", name);
	return kt_write_file(path, val);
}

static long kd_reg(int fd, __u32 comm, int dfd, __u64 off, __u64 len,
		   const void *name, __u32 flags, __u32 *handle)
{
	struct kcoll_reg_mem m = {
		.addr = (uintptr_t)name, .len = len, .comm_id = comm,
		.flags = flags | KCOLL_REG_DMABUF, .dmabuf_fd = dfd,
		.dmabuf_off = off,
	};
	long err = kt_ioctl(fd, KCOLL_IOC_REG_MEM, &m);

	if (!err && handle)
		*handle = m.handle;
	return err;
}

static long kd_dereg(int fd, __u32 handle)
{
	struct kcoll_dereg_mem d = { .handle = handle };

	return kt_ioctl(fd, KCOLL_IOC_DEREG_MEM, &d);
}

/* A one-rank communicator on this VM's address; 0 or -errno. */
static long kd_comm1(struct tring *r, __u32 *id)
{
	struct kcoll_rank_addr ra;
	const char *ip = getenv("KCOLL_IP");
	long err;

	kt_addr_v4(&ra, ip ? ip : "127.0.0.1");
	err = kt_ring_init(r, 8, 0, 0);
	if (err)
		return err;
	return kt_comm_create(r->fd, 0xd0b0 + getpid(), "dmabuf-one", 0, 1,
			      &ra, 0, id);
}

/* ------------------------------------------------------------------ */
/* Bad input                                                            */
/* ------------------------------------------------------------------ */

struct kd_bad {
	int dfd;		/* a testbuf of 64 KiB */
	void *map;
	int ro_fd;		/* a vgem dma-buf exported read-only, or -1 */
};

#define KD_CHECK(cond, code) do { if (!(cond)) { \
	fprintf(stderr, "# %s:%d: %s\n", __FILE__, __LINE__, #cond); \
	return (code); } } while (0)

static int kd_bad_child(void *arg)
{
	struct kd_bad *b = arg;
	struct kcoll_reg_mem m;
	struct tring r;
	__u32 id, h1, h2;
	int closed;

	KD_CHECK(!kd_comm1(&r, &id), 10);
	/* Not an fd, an fd that is no dma-buf, a closed one. */
	KD_CHECK(kd_reg(r.fd, id, -1, 0, 4096, b->map, 0, NULL) == -EBADF, 11);
	KD_CHECK(kd_reg(r.fd, id, r.fd, 0, 4096, b->map, 0, NULL) == -EINVAL,
		 12);
	closed = dup(b->dfd);
	close(closed);
	KD_CHECK(kd_reg(r.fd, id, closed, 0, 4096, b->map, 0, NULL) == -EBADF,
		 13);
	/* Ranges outside the buffer. */
	KD_CHECK(kd_reg(r.fd, id, b->dfd, 65536, 1, b->map, 0, NULL) == -EINVAL,
		 14);
	KD_CHECK(kd_reg(r.fd, id, b->dfd, 0, 65537, b->map, 0, NULL) == -EINVAL,
		 15);
	KD_CHECK(kd_reg(r.fd, id, b->dfd, ~0ULL - 10, 4096, b->map, 0,
			NULL) == -EINVAL, 16);
	KD_CHECK(kd_reg(r.fd, id, b->dfd, 0, 0, b->map, 0, NULL) == -EINVAL,
		 17);
	KD_CHECK(kd_reg(r.fd, id, b->dfd, 0, 4096, (void *)~0UL, 0,
			NULL) == -EINVAL, 18);
	/* Fields that belong to the dma-buf form, without it. */
	memset(&m, 0, sizeof(m));
	m.addr = (uintptr_t)b->map;
	m.len = 4096;
	m.comm_id = id;
	m.flags = KCOLL_REG_NO_CPU;
	KD_CHECK(kt_ioctl(r.fd, KCOLL_IOC_REG_MEM, &m) == -EINVAL, 19);
	m.flags = 0;
	m.dmabuf_fd = b->dfd;
	KD_CHECK(kt_ioctl(r.fd, KCOLL_IOC_REG_MEM, &m) == -EINVAL, 20);
	m.dmabuf_fd = 0;
	m.dmabuf_off = 4096;
	KD_CHECK(kt_ioctl(r.fd, KCOLL_IOC_REG_MEM, &m) == -EINVAL, 21);
	m.dmabuf_off = 0;
	m.resv = 1;
	KD_CHECK(kt_ioctl(r.fd, KCOLL_IOC_REG_MEM, &m) == -EINVAL, 22);
	m.resv = 0;
	m.flags = 1U << 7;
	KD_CHECK(kt_ioctl(r.fd, KCOLL_IOC_REG_MEM, &m) == -EINVAL, 23);
	/* The same buffer twice: two imports, two handles, both go. */
	KD_CHECK(!kd_reg(r.fd, id, b->dfd, 0, 65536, b->map, 0, &h1), 24);
	KD_CHECK(!kd_reg(r.fd, id, b->dfd, 4096, 8192,
			 (char *)b->map + 4096, 0, &h2), 25);
	KD_CHECK(h1 != h2, 26);
	KD_CHECK(!kd_dereg(r.fd, h2), 27);
	KD_CHECK(kd_dereg(r.fd, h2) == -ENOENT, 28);
	KD_CHECK(!kd_dereg(r.fd, h1), 29);
	/* A dma-buf given for reading only: an import would be written
	 * (by peers, by copies), so it is refused. */
	if (b->ro_fd >= 0)
		KD_CHECK(kd_reg(r.fd, id, b->ro_fd, 0, 4096, b->map, 0,
				NULL) == -EACCES, 30);
	kt_ring_exit(&r);
	return 0;
}

TEST_F_TIMEOUT(dmabuf, reg_bad_input, 60)
{
	struct kd_buf b;
	struct kd_bad a;

	ASSERT_EQ(0, kd_alloc(&b, "testbuf", 65536)) {
		TH_LOG("no test exporter (tests/kmod, make testbuf)");
	}
	a.dfd = b.fd;
	a.map = b.map;
	a.ro_fd = kd_vgem_mode(65536, 0);
	if (a.ro_fd < 0)
		TH_LOG("no vgem (%s): the read-only dma-buf is not tried",
		       strerror(-a.ro_fd));
	EXPECT_EQ(0, kt_as_nobody(kd_bad_child, &a));
	if (a.ro_fd >= 0)
		close(a.ro_fd);
	kd_free(&b);
	EXPECT_EQ(0, tb_live());
}

/* ------------------------------------------------------------------ */
/* Every exporter, one rank: the CPU path over imported memory          */
/* ------------------------------------------------------------------ */

struct kd_one {
	struct kd_buf *b;
};

/*
 * Register the whole buffer, close the fd (the import keeps the buffer),
 * then allreduce (SUM, int32) its first half into its second; with one
 * rank, a copy through the exporter's kernel mapping. Checked through the
 * user mapping.
 */
static int kd_one_child(void *arg)
{
	struct kd_buf *b = ((struct kd_one *)arg)->b;
	size_t n = b->size / 2 / sizeof(int32_t), i;
	int32_t *src = b->map, *dst = src + n;
	struct kcoll_sqe s;
	struct tring r;
	__u32 id, h;

	KD_CHECK(!kd_comm1(&r, &id), 10);
	KD_CHECK(!kd_reg(r.fd, id, b->fd, 0, b->size, b->map, 0, &h), 11);
	kd_cpu(b, 1);
	for (i = 0; i < n; i++) {
		src[i] = (int32_t)(i * 2654435761u);
		dst[i] = -1;
	}
	kd_cpu(b, 0);
	kd_close_fd(b);
	s = kt_coll(KCOLL_OP_ALLREDUCE, id, KCOLL_DTYPE_INT32, KCOLL_REDOP_SUM,
		    0, n, src, dst);
	s.send_mr = h;
	s.recv_mr = h;
	KD_CHECK(kt_run(&r, &s) == 0, 12);
	for (i = 0; i < n; i++)
		KD_CHECK(dst[i] == (int32_t)(i * 2654435761u), 13);
	/* An address outside the registration's name is not it. */
	s.recv_addr = (uintptr_t)b->map + b->size;
	KD_CHECK(kt_run(&r, &s) == -ERANGE, 14);
	KD_CHECK(!kd_dereg(r.fd, h), 15);
	kt_ring_exit(&r);
	return 0;
}

TEST_F_TIMEOUT(dmabuf, every_exporter_one_rank, 120)
{
	int i, ran = 0;

	for (i = 0; i < 4; i++) {
		const char *e = kd_exporters[i];
		struct kd_one a;
		struct kd_buf b;
		int err = kd_alloc(&b, e, 1 << 20);

		if (err) {
			/* vgem and the test exporter are in every test VM;
			 * udmabuf and dma-heaps only in 6.12's kernel. */
			if (!strcmp(e, "testbuf") ||
			    (!strcmp(e, "vgem") && !kd_no_vgem())) {
				EXPECT_EQ(0, err) {
					TH_LOG("%s: %s", e, strerror(-err));
				}
			} else {
				printf("# SKIP %s: not on this kernel (%s)\n", e,
				       strerror(-err));
			}
			continue;
		}
		a.b = &b;
		EXPECT_EQ(0, kt_as_nobody(kd_one_child, &a)) TH_LOG("exporter %s", e);
		kd_free(&b);
		ran++;
		printf("# %s: imported, allreduce checked, released\n", e);
	}
	EXPECT_GE(ran, kd_no_vgem() ? 1 : 2);
	EXPECT_EQ(0, tb_live());
}

/* ------------------------------------------------------------------ */
/* Device memory on a device that moves data with the CPU                */
/* ------------------------------------------------------------------ */

TEST_F_TIMEOUT(dmabuf, vram_on_rxe_is_eopnotsupp, 60)
{
	struct kd_buf v;
	struct tring r;
	__u32 id;

	ASSERT_EQ(0, kd_alloc(&v, "vram", 1 << 20));
	ASSERT_EQ(0, kd_comm1(&r, &id));
	/* rxe (and a one-rank comm) reach memory through the CPU: GPU
	 * memory, which has no CPU mapping, cannot be moved there. */
	EXPECT_EQ(-EOPNOTSUPP, kd_reg(r.fd, id, v.fd, 0, 1 << 20,
				      (void *)0x7f0000000000ULL,
				      KCOLL_REG_NO_CPU, NULL));
	/* Nor without NO_CPU: the memory has no CPU mapping either way. */
	EXPECT_EQ(-EOPNOTSUPP, kd_reg(r.fd, id, v.fd, 0, 1 << 20,
				      (void *)0x7f0000000000ULL, 0, NULL));
	kt_ring_exit(&r);
	kd_free(&v);
	EXPECT_EQ(0, tb_live());
}

/* ------------------------------------------------------------------ */
/* The real-NIC path against a PCI device of the VM (dry imports)        */
/* ------------------------------------------------------------------ */

/* The first PCI device with a driver; 0 and its name, or -1. */
static int kd_pci_dev(char *name, size_t len)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *e;
	char path[300];
	int found = -1;

	if (!d)
		return -1;
	while (found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver",
			 e->d_name);
		if (access(path, F_OK))
			continue;
		snprintf(name, len, "%s", e->d_name);
		found = 0;
	}
	closedir(d);
	return found;
}

static double kd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The test exporter's fence on dma-buf @dfd: KCOLL_TESTBUF_FENCE_*. */
static int kd_fence(int dfd, __u32 op)
{
	struct kcoll_testbuf_fence f = { .fd = dfd, .op = op };
	int fd = open(KCOLL_TESTBUF_DEVICE, O_RDWR | O_CLOEXEC), r;

	if (fd < 0)
		return -errno;
	r = ioctl(fd, KCOLL_TESTBUF_IOC_FENCE, &f) ? -errno : 0;
	close(fd);
	return r;
}

static void kd_alarm(int sig)
{
	(void)sig;
}

/* REG_MEM of all of the 1 MiB dma-buf @fd: its result, and its time in
 * *@took (seconds). */
static long kd_reg_timed(int rfd, __u32 id, int fd, double *took)
{
	double t0 = kd_now();
	long r = kd_reg(rfd, id, fd, 0, 1 << 20, (void *)0x7f0000000000ULL, 0,
			NULL);

	*took = kd_now() - t0;
	return r;
}

/*
 * The exporter's memory moves still running when a real NIC's REG_MEM
 * attaches: a kernel fence nothing signals (a GPU that hung in one). The
 * wait for it is bounded by sysfs dmabuf_wait_ms (-ETIMEDOUT) and ends at
 * a signal (-EINTR: the handler does not restart), where it used to wait
 * uninterruptibly for ever, holding the buffer's reservation lock and the
 * communicator's dev_sem (2026-12-05). Once signalled, it registers.
 */
static void kd_fence_case(struct __test_metadata *_metadata, int rfd, __u32 id)
{
	struct sigaction sa = { .sa_handler = kd_alarm }, old_sa;
	struct itimerval it = { .it_value = { 0, 300000 } };
	long long wait0 = kt_sysfs_read("dmabuf_wait_ms");
	double took;
	char v[24];
	__u32 h;
	int fd;

	ASSERT_LT(0, wait0);
	fd = kd_testbuf(1 << 20, 0);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(0, kd_fence(fd, KCOLL_TESTBUF_FENCE_ADD));
	EXPECT_EQ(-EBUSY, kd_fence(fd, KCOLL_TESTBUF_FENCE_ADD));
	EXPECT_EQ(1, tb_counter("fences"));
	ASSERT_EQ(0, kt_sysfs_write("dmabuf_wait_ms", "300"));
	EXPECT_EQ(-ETIMEDOUT, kd_reg_timed(rfd, id, fd, &took));
	TH_LOG("REG_MEM behind a fence nothing signals, dmabuf_wait_ms 300: %.2f s", took);
	EXPECT_LE(0.25, took);
	EXPECT_GT(5.0, took);
	/* Nothing of the failed import is left with the exporter. */
	EXPECT_EQ(0, tb_counter("attachments"));
	EXPECT_EQ(0, tb_counter("pins"));
	EXPECT_EQ(0, tb_counter("mappings"));

	ASSERT_EQ(0, kt_sysfs_write("dmabuf_wait_ms", "60000"));
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, &old_sa));
	ASSERT_EQ(0, setitimer(ITIMER_REAL, &it, NULL));
	EXPECT_EQ(-EINTR, kd_reg_timed(rfd, id, fd, &took));
	TH_LOG("the same with a signal after 0.3 s: %.2f s", took);
	EXPECT_GT(10.0, took);
	sigaction(SIGALRM, &old_sa, NULL);

	EXPECT_EQ(0, kd_fence(fd, KCOLL_TESTBUF_FENCE_SIGNAL));
	EXPECT_EQ(-ENOENT, kd_fence(fd, KCOLL_TESTBUF_FENCE_SIGNAL));
	EXPECT_EQ(0, kd_reg(rfd, id, fd, 0, 1 << 20,
			    (void *)0x7f0000000000ULL, 0, &h));
	EXPECT_EQ(0, kd_dereg(rfd, h));
	snprintf(v, sizeof(v), "%lld", wait0);
	EXPECT_EQ(0, kt_sysfs_write("dmabuf_wait_ms", v));
	close(fd);
}

TEST_F_TIMEOUT(dmabuf, real_nic_path_dry, 60)
{
	struct kcoll_testbuf_revoke rv = { 0 };
	long long att0, p2p0, rev0, dyn0;
	char dev[300];
	struct kd_buf v, g;
	struct kcoll_sqe s;
	struct tring r;
	__u32 id, h;
	int fd;

	if (getuid())
		SKIP(return, "needs root (module parameter dmabuf_test_dev)");
	ASSERT_EQ(0, kd_pci_dev(dev, sizeof(dev))) TH_LOG("no PCI device with a driver");
	TH_LOG("attaching to PCI device %s", dev);
	ASSERT_EQ(0, kd_param_write("dmabuf_test_dev", dev));
	ASSERT_EQ(0, kd_comm1(&r, &id));
	ASSERT_EQ(0, kd_alloc(&v, "vram", 1 << 20));
	att0 = tb_counter("attach_calls");
	p2p0 = tb_counter("peer2peer_attachments");
	dyn0 = tb_counter("dynamic_attachments");
	rev0 = kt_sysfs_read("stats/dmabuf_revoked");

	/* GPU-like memory: attached (peer-to-peer allowed, dynamic), pinned,
	 * mapped, its DMA-only scatterlist segmented into pages. */
	EXPECT_EQ(0, kd_reg(r.fd, id, v.fd, 4096, 512 << 10,
			    (void *)0x7f0000000000ULL, KCOLL_REG_NO_CPU, &h));
	EXPECT_EQ(1, tb_counter("attachments"));
	EXPECT_EQ(1, tb_counter("mappings"));
	/* The module cannot go while an import is alive: its file holds
	 * it. */
	EXPECT_EQ(-1, syscall(SYS_delete_module, "kcoll", O_NONBLOCK));
	EXPECT_TRUE(errno == EWOULDBLOCK || errno == EBUSY);
	EXPECT_LE(1, tb_counter("pins"));
	EXPECT_EQ(att0 + 1, tb_counter("attach_calls"));
	EXPECT_EQ(p2p0 + 1, tb_counter("peer2peer_attachments"));
	EXPECT_EQ(dyn0 + 1, tb_counter("dynamic_attachments"));
	/* A dry import is never on the NIC: operations refuse it. */
	s = kt_coll(KCOLL_OP_BROADCAST, id, KCOLL_DTYPE_UINT8, 0, 0, 4096,
		    (void *)0x7f0000000000ULL, (void *)0x7f0000000000ULL);
	s.send_mr = h;
	s.recv_mr = h;
	EXPECT_EQ(-ENODEV, kt_run(&r, &s));
	/* The exporter takes it back: counted, and it stays refused. */
	rv.fd = v.fd;
	fd = open(KCOLL_TESTBUF_DEVICE, O_RDWR);
	ASSERT_GE(fd, 0);
	EXPECT_EQ(0, ioctl(fd, KCOLL_TESTBUF_IOC_REVOKE, &rv));
	close(fd);
	EXPECT_EQ(rev0 + 1, kt_sysfs_read("stats/dmabuf_revoked"));
	EXPECT_EQ(-ENODEV, kt_run(&r, &s));
	EXPECT_EQ(0, kd_dereg(r.fd, h));
	/* Given back in reverse: the buffer itself is still ours. */
	EXPECT_EQ(0, tb_counter("attachments"));
	EXPECT_EQ(0, tb_counter("mappings"));
	EXPECT_EQ(0, tb_counter("pins"));

	/* The exporter refusing attach, or the mapping. */
	fd = kd_testbuf(1 << 20, KCOLL_TESTBUF_FAIL_ATTACH);
	ASSERT_GE(fd, 0);
	EXPECT_EQ(-EBUSY, kd_reg(r.fd, id, fd, 0, 1 << 20,
				 (void *)0x7f0000000000ULL, 0, NULL));
	close(fd);
	fd = kd_testbuf(1 << 20, KCOLL_TESTBUF_FAIL_MAP);
	ASSERT_GE(fd, 0);
	EXPECT_EQ(-ENOMEM, kd_reg(r.fd, id, fd, 0, 1 << 20,
				  (void *)0x7f0000000000ULL, 0, NULL));
	close(fd);
	kd_fence_case(_metadata, r.fd, id);
	/* A static exporter (vgem maps at attach) on the same path. */
	if (!kd_alloc(&g, "vgem", 1 << 20)) {
		EXPECT_EQ(0, kd_reg(r.fd, id, g.fd, 0, 1 << 20, g.map, 0, &h));
		EXPECT_EQ(0, kd_dereg(r.fd, h));
		kd_free(&g);
	}
	kt_ring_exit(&r);
	kd_free(&v);
	EXPECT_EQ(0, kd_param_write("dmabuf_test_dev", "\n"));
	EXPECT_EQ(0, tb_live());
}

/* ------------------------------------------------------------------ */
/* Two ranks on rxe: NO_CPU memory moved by the NIC only                 */
/* ------------------------------------------------------------------ */

#define KD_BIG	(1u << 20)

struct kd_rank {
	int rank;
	__u32 flags;		/* COMM_CREATE */
	__u64 uid;
	struct kd_buf *b;	/* this rank's dma-buf, KD_BIG * 4 */
	pthread_barrier_t *bar;
	int code;
};

static void kd_fill(struct kd_buf *b, size_t off, size_t len, int seed)
{
	unsigned char *p = (unsigned char *)b->map + off;
	size_t i;

	kd_cpu(b, 1);
	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 11));
	kd_cpu(b, 0);
}

static int kd_same(struct kd_buf *b, size_t off, size_t len, int seed)
{
	const unsigned char *p = (unsigned char *)b->map + off;
	size_t i;

	kd_cpu(b, 1);
	for (i = 0; i < len; i++)
		if (p[i] != (unsigned char)(seed * 131 + i * 7 + (i >> 11)))
			break;
	kd_cpu(b, 0);
	return i == len;
}

/*
 * Ticket 2 (after kd_gpu()'s ticket 1, and a refused 3): a stream-ordered
 * send from rank 0 to rank 1 (KCOLL_FEAT_GPU_SLOTS). Rank 0's stream starts at once; rank
 * 1's only 300 ms later, and until then nothing may land in its buffer
 * (its receive grants nothing before its stream got there). Then both
 * end, released through their slot's words. 0, or the check that failed.
 */
static int kd_gpu_p2p(struct kd_rank *k, struct tring *r, __u32 id, __u32 h,
		      struct kd_buf *b, struct kcoll_gpu_bell *bell)
{
	const size_t n = 1024;
	float *v = (float *)b->map, *dst = v + n;
	__u64 T = 2ULL << KCOLL_GPU_TICKET_SHIFT;
	struct kcoll_sqe s, *q;
	struct kcoll_cqe c;
	size_t i;
	int ok;

	kd_cpu(b, 1);
	for (i = 0; i < n; i++) {
		v[i] = (float)(k->rank * 100 + i % 13);
		dst[i] = -1.0f;
	}
	kd_cpu(b, 0);
	if (k->rank == 0) {
		s = kt_coll(KCOLL_OP_SEND, id, KCOLL_DTYPE_FP32, 0, 1, n, v,
			    NULL);
		s.send_mr = h;
	} else {
		s = kt_coll(KCOLL_OP_RECV, id, KCOLL_DTYPE_FP32, 0, 0, n, NULL,
			    dst);
		s.recv_mr = h;
	}
	s.flags = KCOLL_SQE_F_GPU;
	s.resv = 2;
	s.timeout_ms = 20000;
	q = kt_get_sqe(r);
	if (!q)
		return 91;
	*q = s;
	if (kt_submit(r) != 1)
		return 92;
	if (k->rank == 1) {
		usleep(300000);
		kd_cpu(b, 1);
		for (ok = 1, i = 0; i < n; i++)
			ok &= dst[i] == -1.0f;
		kd_cpu(b, 0);
		if (!ok || kt_cq_ready(r))
			return 93;	/* landed before its stream came */
	}
	__atomic_store_n(&bell->start[2], T, __ATOMIC_RELEASE);
	while (kt_pop(r, &c))
		if (kt_enter(r, 0, 1, KCOLL_ENTER_GETEVENTS, 0) < 0)
			return 94;
	if (c.res)
		return 95;
	if (bell->end_s[2] < (T | KCOLL_GPU_STEP_MASK) ||
	    bell->cancel_s[2] >= T)
		return 96;
	if (k->rank == 1) {
		kd_cpu(b, 1);
		for (ok = 1, i = 0; i < n; i++)
			ok &= dst[i] == (float)(i % 13);
		kd_cpu(b, 0);
		if (!ok)
			return 97;
	}
	return 0;
}

/*
 * Stream-ordered operations (KCOLL_SQE_F_GPU) at the ABI, with this
 * thread playing the GPU stream on the doorbell page (the module is the
 * real one): GPU_SETUP's bad input, an allreduce whose reduction step the
 * thread computes, a ticket that does not grow, and a stream that never
 * comes. 0, or the number of the check that failed.
 */
static int kd_gpu(struct kd_rank *k, struct tring *r, __u32 id, __u32 h,
		  struct kd_buf *b)
{
	const size_t n = 4096, half = n / 2;
	long page = sysconf(_SC_PAGESIZE);
	char *base = b->map, *scratch = base + 3 * KD_BIG;
	struct kcoll_gpu_bell *bell, *bell2;
	struct kcoll_gpu_setup g, x;
	struct kcoll_comm_report rep;
	struct kcoll_cqe c;
	struct kcoll_sqe s, bad, *q;
	float *v = (float *)base, *landed = (float *)scratch;
	__u64 T, T3;
	size_t i, off;
	double t0;
	int ok;

	bell = mmap(NULL, page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* A page nobody may touch (not an unmapped address: the other
	 * rank, a thread of this process, could map something there). */
	bell2 = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		     -1, 0);
	if (bell == MAP_FAILED || bell2 == MAP_FAILED)
		return 50;
	memset(&g, 0, sizeof(g));
	g.comm_id = id;
	g.scratch_mr = h;
	g.bell = (uintptr_t)bell;
	g.scratch_addr = (uintptr_t)scratch;
	g.scratch_len = KD_BIG;
#define KG(field_expr, want, code) do { x = g; field_expr; \
	if (kt_ioctl(r->fd, KCOLL_IOC_GPU_SETUP, &x) != (want)) return code; } while (0)
	KG(x.bell = 0, -EINVAL, 51);
	KG(x.bell += 8, -EINVAL, 52);
	KG(x.bell = 0xffff888000000000ULL, -EINVAL, 53);
	KG(x.bell = (uintptr_t)bell2, -EFAULT, 54);
	KG(x.resv[1] = 1, -EINVAL, 55);
	KG(x.scratch_mr = 0, -EINVAL, 56);
	KG(x.scratch_mr = h + 1000, -ENOENT, 57);
	KG(x.scratch_len = 2 * KD_BIG, -ERANGE, 58);
	KG(x.comm_id = id + 1000, -ENOENT, 59);
	KG(x.scratch_len = 0, -EINVAL, 60);
	KG((void)0, 0, 61);
	KG(x.bell = (uintptr_t)bell + page * 0 + 0, 0, 62);	/* same page: ok */
	munmap(bell2, page);
	bell2 = mmap(NULL, page, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (bell2 == MAP_FAILED)
		return 50;
	KG(x.bell = (uintptr_t)bell2, -EBUSY, 63);	/* one page per comm */
	/*
	 * The same address over another page: the doorbell moved away
	 * (to bell2's place; MREMAP_DONTUNMAP leaves its address mapped, so
	 * that the other rank, a thread of this process, cannot map
	 * something there meanwhile) and a fresh page faulted in where it
	 * was. Refused: the module writes the page it pinned, which the
	 * streams would no longer see (until 2026-12-07 accepted). Then the
	 * doorbell goes back.
	 */
	if (mremap(bell, page, page,
		   MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
		   bell2) != bell2)
		return 50;
	*(volatile char *)bell = 1;	/* a page there, not only a mapping */
	KG((void)0, -EBUSY, 84);
	if (mremap(bell2, page, page, MREMAP_MAYMOVE | MREMAP_FIXED,
		   bell) != bell)
		return 50;
	KG((void)0, 0, 85);	/* the pinned page again: ok */
#undef KG

	/* An in-place allreduce of fp32, ticket 1. Ring on 2 ranks: this
	 * rank reduces the other's half of the buffer in the scratch. */
	kd_cpu(b, 1);
	for (i = 0; i < n; i++)
		v[i] = (float)(k->rank + 1 + i % 7);
	kd_cpu(b, 0);
	s = kt_coll(KCOLL_OP_ALLREDUCE, id, KCOLL_DTYPE_FP32, KCOLL_REDOP_SUM,
		    0, n, base, base);
	s.send_mr = s.recv_mr = h;
	s.flags = KCOLL_SQE_F_GPU;
	s.resv = 1;
	s.timeout_ms = 20000;
	q = kt_get_sqe(r);
	if (!q)
		return 64;
	*q = s;
	if (kt_submit(r) != 1)
		return 65;
	T = 1ULL << KCOLL_GPU_TICKET_SHIFT;
	/* The module must not touch the buffers before the stream comes. */
	usleep(200000);
	if (kt_cq_ready(r))
		return 66;
	/*
	 * A later ticket refused (a bad dtype) while ticket 1 waits: its own
	 * slot is released at once, ticket 1's words stay (KCOLL_FEAT_GPU_SLOTS;
	 * the single words, for older libcolls, go past both).
	 */
	bad = s;
	bad.resv = 3;
	bad.dtype = KCOLL_DTYPE_LAST;
	if (kt_run(r, &bad) != -EINVAL)
		return 80;
	T3 = 3ULL << KCOLL_GPU_TICKET_SHIFT | KCOLL_GPU_STEP_MASK;
	if (bell->ready_s[3] < T3 || bell->end_s[3] < T3 ||
	    bell->cancel_s[3] < T3 || bell->ready_s[1] || bell->end_s[1] ||
	    bell->cancel_s[1])
		return 81;
	/*
	 * Ticket 65, refused the same way, has ticket 1's slot (65 % 64):
	 * its words must stay ticket 1's (raised now, they would let ticket
	 * 1's stream go on, kernels skipped, while its collective runs);
	 * they go past 65 once ticket 1 has ended (checked below).
	 */
	bad.resv = 65;
	if (kt_run(r, &bad) != -EINVAL)
		return 82;
	if (bell->ready_s[1] || bell->end_s[1] || bell->cancel_s[1])
		return 83;
	__atomic_store_n(&bell->start[1], T, __ATOMIC_RELEASE);
	for (t0 = kd_now(); __atomic_load_n(&bell->ready_s[1], __ATOMIC_ACQUIRE) <
			    (T | 1); usleep(1000))
		if (kd_now() - t0 > 20)
			return 67;
	/* The "kernel": dst = operand + landed, chunk rank - 1 (mod 2). */
	off = k->rank == 0 ? half : 0;
	kd_cpu(b, 1);
	for (i = 0; i < half; i++)
		v[off + i] += landed[i];
	kd_cpu(b, 0);
	__atomic_store_n(&bell->done[1], T | 1, __ATOMIC_RELEASE);
	while (kt_pop(r, &c))
		if (kt_enter(r, 0, 1, KCOLL_ENTER_GETEVENTS, 0) < 0)
			return 68;
	if (c.res)
		return 69;
	kd_cpu(b, 1);
	for (ok = 1, i = 0; i < n; i++)
		ok &= v[i] == (float)(3 + 2 * (i % 7));
	kd_cpu(b, 0);
	if (!ok)
		return 70;
	/* Ticket 1's words, then ticket 65's release (cancelled). */
	if (bell->end_s[1] < (65ULL << KCOLL_GPU_TICKET_SHIFT |
			      KCOLL_GPU_STEP_MASK) ||
	    bell->cancel_s[1] != (65ULL << KCOLL_GPU_TICKET_SHIFT |
				  KCOLL_GPU_STEP_MASK) ||
	    bell->end < (T | KCOLL_GPU_STEP_MASK))
		return 71;

	/* The same ticket again: refused, nothing waits. */
	if (kt_run(r, &s) != -EINVAL)
		return 72;

	/* Ticket 2: point-to-point. */
	ok = kd_gpu_p2p(k, r, id, h, b, bell);
	if (ok)
		return ok;

	/* Ticket 4: rank 0's stream never comes. It fails first (the
	 * shorter timeout) saying so; rank 1 fails naming rank 0; both
	 * streams are released, their kernels told to skip. */
	s.resv = 4;
	s.timeout_ms = k->rank == 0 ? 1500 : 8000;
	T = 4ULL << KCOLL_GPU_TICKET_SHIFT;
	if (k->rank == 1)
		__atomic_store_n(&bell->start[4], T, __ATOMIC_RELEASE);
	if (kt_run(r, &s) >= 0)
		return 73;
	if (bell->ready_s[4] < (T | KCOLL_GPU_STEP_MASK) ||
	    bell->end_s[4] < (T | KCOLL_GPU_STEP_MASK) ||
	    bell->cancel_s[4] < (T | KCOLL_GPU_STEP_MASK) ||
	    bell->ready < (T | KCOLL_GPU_STEP_MASK) ||
	    bell->end < (T | KCOLL_GPU_STEP_MASK) ||
	    bell->cancel < (T | KCOLL_GPU_STEP_MASK))
		return 74;
	memset(&rep, 0, sizeof(rep));
	rep.comm_id = id;
	if (kt_ioctl(r->fd, KCOLL_IOC_COMM_REPORT, &rep))
		return 75;
	if (k->rank == 0 && (rep.error != -ETIMEDOUT ||
			     rep.reason != KCOLL_REPORT_GPU_STREAM))
		return 76;
	if (k->rank == 1 && rep.peer != 0)
		return 77;
	return 0;
}

#define KR_CHECK(cond, c) do { if (!(cond)) { \
	fprintf(stderr, "# rank %d: %s:%d: %s\n", k->rank, __FILE__, \
		__LINE__, #cond); k->code = (c); goto out; } } while (0)

static void *kd_rank_main(void *arg)
{
	struct kd_rank *k = arg;
	struct kcoll_rank_addr ranks[2];
	struct kcoll_comm_create c;
	const char *ip = getenv("KCOLL_IP");
	struct kd_buf *b = k->b;
	char *base = b->map;
	struct kcoll_sqe s;
	struct tring r;
	size_t sizes[2] = { 64, KD_BIG }, z;
	__u32 id, h;
	int other = 1 - k->rank, si;

	k->code = 1;
	kt_addr_pair(ranks, ip ? ip : "127.0.0.1");
	if (kt_ring_init(&r, 16, 0, 0))
		return NULL;
	memset(&c, 0, sizeof(c));
	c.ranks = (uintptr_t)ranks;
	c.uid = k->uid;
	memcpy(c.key, "dmabuf-pair", 11);
	c.rank = k->rank;
	c.nranks = 2;
	c.flags = k->flags;
	c.timeout_ms = 30000;
	KR_CHECK(!kt_ioctl(r.fd, KCOLL_IOC_COMM_CREATE, &c), 2);
	id = c.comm_id;
	KR_CHECK(!kd_reg(r.fd, id, b->fd, 0, b->size, base, KCOLL_REG_NO_CPU,
			 &h), 3);

	if (!(k->flags & KCOLL_COMM_DEVMEM)) {
		/* Without KCOLL_COMM_DEVMEM the connection may bounce data
		 * through the CPU: refused, on both ranks alike. */
		s = kt_coll(KCOLL_OP_BROADCAST, id, KCOLL_DTYPE_UINT8, 0, 0, 64,
			    base, base);
		s.send_mr = s.recv_mr = h;
		KR_CHECK(kt_run(&r, &s) == -EOPNOTSUPP, 4);
		goto done;
	}
	for (si = 0; si < 2; si++) {
		z = sizes[si];
		/* Broadcast, in place, from each root. */
		if (k->rank == 0)
			kd_fill(b, 0, z, 10 + si);
		memset(&s, 0, sizeof(s));
		s = kt_coll(KCOLL_OP_BROADCAST, id, KCOLL_DTYPE_UINT8, 0, 0, z,
			    base, base);
		s.send_mr = s.recv_mr = h;
		KR_CHECK(kt_run(&r, &s) == 0, 10);
		KR_CHECK(kd_same(b, 0, z, 10 + si), 11);
		if (k->rank == 1)
			kd_fill(b, 0, z, 20 + si);
		s.peer = 1;
		KR_CHECK(kt_run(&r, &s) == 0, 12);
		KR_CHECK(kd_same(b, 0, z, 20 + si), 13);

		/* Allgather in place: block r at r * z. */
		kd_fill(b, k->rank * z, z, 30 + k->rank + si);
		s = kt_coll(KCOLL_OP_ALLGATHER, id, KCOLL_DTYPE_UINT8, 0, 0, z,
			    base + k->rank * z, base);
		s.send_mr = s.recv_mr = h;
		KR_CHECK(kt_run(&r, &s) == 0, 14);
		KR_CHECK(kd_same(b, 0, z, 30 + si), 15);
		KR_CHECK(kd_same(b, z, z, 31 + si), 16);

		/* Send from rank 0's first half to rank 1's second. */
		if (k->rank == 0) {
			kd_fill(b, 0, z, 40 + si);
			s = kt_coll(KCOLL_OP_SEND, id, KCOLL_DTYPE_UINT8, 0, 1, z,
				    base, NULL);
			s.send_mr = h;
		} else {
			s = kt_coll(KCOLL_OP_RECV, id, KCOLL_DTYPE_UINT8, 0, 0, z,
				    NULL, base + KD_BIG);
			s.recv_mr = h;
		}
		KR_CHECK(kt_run(&r, &s) == 0, 17);
		if (k->rank == 1)
			KR_CHECK(kd_same(b, KD_BIG, z, 40 + si), 18);

		/* Out of place, the local part is the NIC's copy: broadcast
		 * from root 0 (its send to its receive buffer), allgather
		 * (each rank's own block), alltoall (its own block), and an
		 * alltoall in place (through the kernel's scratch). */
		kd_fill(b, 0, z, 0);
		if (k->rank == 0)
			kd_fill(b, 2 * KD_BIG, z, 50 + si);
		s = kt_coll(KCOLL_OP_BROADCAST, id, KCOLL_DTYPE_UINT8, 0, 0, z,
			    base + 2 * KD_BIG, base);
		s.send_mr = s.recv_mr = h;
		KR_CHECK(kt_run(&r, &s) == 0, 19);
		KR_CHECK(kd_same(b, 0, z, 50 + si), 20);

		kd_fill(b, 2 * KD_BIG, z, 60 + k->rank + si);
		s = kt_coll(KCOLL_OP_ALLGATHER, id, KCOLL_DTYPE_UINT8, 0, 0, z,
			    base + 2 * KD_BIG, base);
		s.send_mr = s.recv_mr = h;
		KR_CHECK(kt_run(&r, &s) == 0, 21);
		KR_CHECK(kd_same(b, 0, z, 60 + si), 22);
		KR_CHECK(kd_same(b, z, z, 61 + si), 23);

		kd_fill(b, 2 * KD_BIG, z, 70 + 2 * k->rank + si);
		kd_fill(b, 2 * KD_BIG + z, z, 71 + 2 * k->rank + si);
		s = kt_coll(KCOLL_OP_ALLTOALL, id, KCOLL_DTYPE_UINT8, 0, 0, z,
			    base + 2 * KD_BIG, base);
		s.send_mr = s.recv_mr = h;
		KR_CHECK(kt_run(&r, &s) == 0, 24);
		KR_CHECK(kd_same(b, 0, z, 70 + k->rank + si), 25);
		KR_CHECK(kd_same(b, z, z, 72 + k->rank + si), 26);

		kd_fill(b, 0, z, 80 + 2 * k->rank + si);
		kd_fill(b, z, z, 81 + 2 * k->rank + si);
		s = kt_coll(KCOLL_OP_ALLTOALL, id, KCOLL_DTYPE_UINT8, 0, 0, z,
			    base, base);
		s.send_mr = s.recv_mr = h;
		KR_CHECK(kt_run(&r, &s) == 0, 27);
		KR_CHECK(kd_same(b, 0, z, 80 + k->rank + si), 28);
		KR_CHECK(kd_same(b, z, z, 82 + k->rank + si), 29);
		pthread_barrier_wait(k->bar);
	}
	/* A reduction needs arithmetic where the data is: refused on both
	 * ranks alike until the device reducer exists. */
	s = kt_coll(KCOLL_OP_ALLREDUCE, id, KCOLL_DTYPE_FP32, KCOLL_REDOP_SUM,
		    0, 1024, base, base);
	s.send_mr = s.recv_mr = h;
	KR_CHECK(kt_run(&r, &s) == -EOPNOTSUPP, 30);
	s = kt_coll(KCOLL_OP_REDUCE_SCATTER, id, KCOLL_DTYPE_FP32,
		    KCOLL_REDOP_MAX, 0, 1024, base + 2 * KD_BIG, base);
	s.send_mr = s.recv_mr = h;
	KR_CHECK(kt_run(&r, &s) == -EOPNOTSUPP, 31);
	/* ... unless stream-ordered: the GPU (here this thread) reduces. */
	pthread_barrier_wait(k->bar);
	k->code = kd_gpu(k, &r, id, h, b);
	if (k->code) {
		fprintf(stderr, "# rank %d: stream-ordered check %d failed\n",
			k->rank, k->code);
		goto out;
	}
	k->code = 1;
	(void)other;
done:
	pthread_barrier_wait(k->bar);
	KR_CHECK(!kd_dereg(r.fd, h), 40);
	k->code = 0;
out:
	kt_ring_exit(&r);
	return NULL;
}

struct kd_pair {
	__u32 flags;
	struct kd_buf *b;	/* [2] */
};

static int kd_pair_run(void *arg)
{
	struct kd_pair *p = arg;
	struct kd_rank k[2];
	pthread_barrier_t bar;
	pthread_t t[2];
	int i;

	pthread_barrier_init(&bar, NULL, 2);
	for (i = 0; i < 2; i++) {
		k[i] = (struct kd_rank){ .rank = i, .flags = p->flags,
					 .uid = 0xd0b1 + p->flags, .b = &p->b[i],
					 .bar = &bar };
		if (pthread_create(&t[i], NULL, kd_rank_main, &k[i]))
			return 90;
	}
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return k[0].code ?: k[1].code;
}

static void kd_pair_test(struct __test_metadata *_metadata,
			 const char *exporter)
{
	long long ops0, touch0, intra0, eager0, wr0, copy0, gops0, gsteps0;
	struct kd_buf b[2];
	struct kd_pair p;
	int err;

	err = kd_alloc(&b[0], exporter, 4 * KD_BIG);
	/* vgem and the test exporter are in every test VM; udmabuf only in
	 * 6.12's kernel (Debian's 6.1 is built without it). */
	if (err && !strcmp(exporter, "udmabuf"))
		SKIP(return, "no udmabuf on this kernel (%s)", strerror(-err));
	if (err && !strcmp(exporter, "vgem") && kd_no_vgem())
		SKIP(return, "no vgem in this kernel");
	ASSERT_EQ(0, err) {
		TH_LOG("%s: %s", exporter, strerror(-err));
	}
	ASSERT_EQ(0, kd_alloc(&b[1], exporter, 4 * KD_BIG));
	ops0 = kt_sysfs_read("stats/nocpu_ops");
	touch0 = kt_sysfs_read("stats/nocpu_cpu_touches");
	intra0 = kt_sysfs_read("stats/intra_node_bytes");
	eager0 = kt_sysfs_read("stats/eager_sends");
	wr0 = kt_sysfs_read("stats/rdma_write_bytes");
	copy0 = kt_sysfs_read("stats/nic_copy_bytes");
	gops0 = kt_sysfs_read("stats/gpu_ops");
	gsteps0 = kt_sysfs_read("stats/gpu_steps");
	p.b = b;
	p.flags = KCOLL_COMM_DEVMEM;
	EXPECT_EQ(0, kt_as_nobody(kd_pair_run, &p)) TH_LOG("%s, DEVMEM", exporter);
	/* Every byte went by RDMA WRITE, none through the CPU: no intra-node
	 * copy, no eager bounce, and the executor that would count a CPU
	 * step on such memory never ran. */
	EXPECT_EQ(touch0, kt_sysfs_read("stats/nocpu_cpu_touches"));
	EXPECT_EQ(intra0, kt_sysfs_read("stats/intra_node_bytes"));
	EXPECT_EQ(eager0, kt_sysfs_read("stats/eager_sends"));
	EXPECT_LE(ops0 + 2 * 2 * 4, kt_sysfs_read("stats/nocpu_ops"));
	EXPECT_LE(wr0 + 5 * KD_BIG, kt_sysfs_read("stats/rdma_write_bytes"));
	/* The local parts (broadcast's root, allgather's and alltoall's own
	 * blocks, alltoall in place) were the NIC's copies. */
	EXPECT_LE(copy0 + 6 * KD_BIG, kt_sysfs_read("stats/nic_copy_bytes"));
	/* The stream-ordered part ran: tickets 1 and 2 on each rank, one
	 * reduction step each handed to the "stream". */
	EXPECT_LE(gops0 + 4, kt_sysfs_read("stats/gpu_ops"));
	EXPECT_LE(gsteps0 + 2, kt_sysfs_read("stats/gpu_steps"));
	p.flags = 0;
	EXPECT_EQ(0, kt_as_nobody(kd_pair_run, &p)) TH_LOG("%s, not DEVMEM", exporter);
	kd_free(&b[0]);
	kd_free(&b[1]);
	EXPECT_EQ(0, tb_live());
}

TEST_F_TIMEOUT(dmabuf, nocpu_pair_testbuf, 300)
{
	kd_pair_test(_metadata, "testbuf");
}

TEST_F_TIMEOUT(dmabuf, nocpu_pair_vgem, 300)
{
	kd_pair_test(_metadata, "vgem");
}

TEST_F_TIMEOUT(dmabuf, nocpu_pair_udmabuf, 300)
{
	kd_pair_test(_metadata, "udmabuf");
}

/* ------------------------------------------------------------------ */
/* DEREG while an operation uses it; a process dying with imports       */
/* ------------------------------------------------------------------ */

struct kd_busy {
	struct kd_buf *b;	/* [2] */
	int die;		/* the process is killed with the recv pending */
};

struct kd_busy_rank {
	struct kd_busy *a;
	int rank, code;
	pthread_barrier_t *bar;
};

static void *kd_busy_rank(void *arg)
{
	struct kd_busy_rank *k = arg;
	struct kd_buf *b = &k->a->b[k->rank];
	struct kcoll_rank_addr ranks[2];
	const char *ip = getenv("KCOLL_IP");
	struct kcoll_sqe s, *sq;
	struct kcoll_cqe cqe;
	struct tring r;
	__u32 id, h;

	k->code = 1;
	kt_addr_pair(ranks, ip ? ip : "127.0.0.1");
	if (kt_ring_init(&r, 8, 0, 0))
		return NULL;
	KR_CHECK(!kt_comm_create(r.fd, 0xd0b5 + k->a->die, "dmabuf-busy",
				 k->rank, 2, ranks, 30000, &id), 2);
	KR_CHECK(!kd_reg(r.fd, id, b->fd, 0, b->size, b->map, 0, &h), 3);
	kd_close_fd(b);
	if (k->rank == 0) {
		s = kt_coll(KCOLL_OP_RECV, id, KCOLL_DTYPE_UINT8, 0, 1, 65536,
			    NULL, b->map);
		s.recv_mr = h;
		sq = kt_get_sqe(&r);
		KR_CHECK(sq, 4);
		*sq = s;
		KR_CHECK(kt_enter(&r, 1, 0, 0, 0) == 1, 5);
		usleep(100000);
		KR_CHECK(kd_dereg(r.fd, h) == -EBUSY, 6);
		if (k->a->die) {
			/* Killed with the import in use by a pending recv. */
			kill(getpid(), SIGKILL);
			pause();
		}
		pthread_barrier_wait(k->bar);
		KR_CHECK(kt_enter(&r, 0, 1, KCOLL_ENTER_GETEVENTS, 0) >= 0, 7);
		while (kt_pop(&r, &cqe))
			KR_CHECK(kt_enter(&r, 0, 1, KCOLL_ENTER_GETEVENTS, 0) >= 0,
				 8);
		if (cqe.res)
			fprintf(stderr, "# recv: %d\n", cqe.res);
		KR_CHECK(cqe.res == 0, 9);
		KR_CHECK(!kd_dereg(r.fd, h), 10);
		pthread_barrier_wait(k->bar);
	} else {
		pthread_barrier_wait(k->bar);
		s = kt_coll(KCOLL_OP_SEND, id, KCOLL_DTYPE_UINT8, 0, 0, 65536,
			    b->map, NULL);
		s.send_mr = h;
		KR_CHECK(kt_run(&r, &s) == 0, 11);
		KR_CHECK(!kd_dereg(r.fd, h), 12);
		/* Our leaving would reset the connection: not before the
		 * receiver has its completion. */
		pthread_barrier_wait(k->bar);
	}
	k->code = 0;
out:
	kt_ring_exit(&r);
	return NULL;
}

static int kd_busy_run(void *arg)
{
	struct kd_busy_rank k[2];
	pthread_barrier_t bar;
	pthread_t t[2];
	int i;

	pthread_barrier_init(&bar, NULL, 2);
	for (i = 0; i < 2; i++) {
		k[i] = (struct kd_busy_rank){ .a = arg, .rank = i, .bar = &bar };
		if (pthread_create(&t[i], NULL, kd_busy_rank, &k[i]))
			return 90;
	}
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return k[0].code ?: k[1].code;
}

TEST_F_TIMEOUT(dmabuf, dereg_busy_and_death, 180)
{
	struct kd_busy a;
	struct kd_buf b[2];
	int i;

	for (a.die = 0; a.die < 2; a.die++) {
		for (i = 0; i < 2; i++)
			ASSERT_EQ(0, kd_alloc(&b[i], "testbuf", 1 << 20));
		a.b = b;
		/* die: SIGKILL mid-recv; the kernel cleans up. */
		EXPECT_EQ(a.die ? 200 + SIGKILL : 0,
			  kt_as_nobody(kd_busy_run, &a));
		for (i = 0; i < 2; i++)
			kd_free(&b[i]);
		EXPECT_EQ(0, tb_live()) TH_LOG("die %d", a.die);
	}
}

/* ------------------------------------------------------------------ */
/* The per-user limit                                                    */
/* ------------------------------------------------------------------ */

/*
 * Under a 1 MiB limit: an import is charged the whole dma-buf, which it
 * attaches and maps (or vmaps) whatever slice it registers, so 4 KiB of a
 * 4 MiB buffer is refused, as is a second import of a 1 MiB one; the
 * first import's deregistration gives its charge back.
 */
static int kd_quota_child(void *arg)
{
	struct kd_buf *b = arg, *big = &b[0], *one = &b[1];
	struct tring r;
	__u32 id, h;

	KD_CHECK(!kd_comm1(&r, &id), 10);
	KD_CHECK(kd_reg(r.fd, id, big->fd, 0, 4096, big->map, 0, NULL) ==
		 -EDQUOT, 11);
	KD_CHECK(!kd_reg(r.fd, id, one->fd, 0, 1 << 20, one->map, 0, &h), 12);
	KD_CHECK(kd_reg(r.fd, id, one->fd, 4096, 4096,
			(char *)one->map + 4096, 0, NULL) == -EDQUOT, 13);
	KD_CHECK(!kd_dereg(r.fd, h), 14);
	KD_CHECK(!kd_reg(r.fd, id, one->fd, 4096, 4096,
			 (char *)one->map + 4096, 0, &h), 15);
	kt_ring_exit(&r);
	return 0;
}

TEST_F_TIMEOUT(dmabuf, user_max_dmabuf_mb, 60)
{
	long long old = kt_sysfs_read("user_max_dmabuf_mb");
	char buf[32];
	struct kd_buf b[2];

	if (getuid())
		SKIP(return, "needs root to set the limit");
	ASSERT_LT(0, old);
	ASSERT_EQ(0, kd_alloc(&b[0], "testbuf", 4 << 20));
	ASSERT_EQ(0, kd_alloc(&b[1], "testbuf", 1 << 20));
	ASSERT_EQ(0, kt_sysfs_write("user_max_dmabuf_mb", "1"));
	EXPECT_EQ(0, kt_as_nobody(kd_quota_child, b));
	snprintf(buf, sizeof(buf), "%lld", old);
	EXPECT_EQ(0, kt_sysfs_write("user_max_dmabuf_mb", buf));
	kd_free(&b[0]);
	kd_free(&b[1]);
	EXPECT_EQ(0, tb_live());
}

/*
 * A removed NIC takes its imports' attachments with it: the module lets
 * go of the attachment, pin and mapping at the removal, not at the
 * owner's DEREG_MEM or close, when unmapping would call the DMA API on a
 * device already deleted (an oops under an IOMMU). rxe has no DMA device,
 * so a dry import (dmabuf_test_dev) stands for the NIC's attachment: the
 * removal walks every registration of the communicators on rxe0 alike.
 */
struct kd_gone_rank {
	const char *ip;
	int rank;
	int go_fd;		/* rank 1 leaves when it can read */
	long err;
};

static void *kd_gone_rank1(void *arg)
{
	struct kd_gone_rank *k = arg;
	struct kcoll_rank_addr ranks[2];
	struct tring r;
	char c;

	kt_addr_pair(ranks, k->ip);
	k->err = kt_ring_init(&r, 8, 0, 0);
	if (k->err)
		return NULL;
	k->err = kt_comm_create(r.fd, 0xd0e0 + getpid(), "dmabuf-gone",
				k->rank, 2, ranks, 20000, NULL);
	if (read(k->go_fd, &c, 1) != 1 && !k->err)
		k->err = -EIO;
	kt_ring_exit(&r);
	return NULL;
}

TEST_F_TIMEOUT(dmabuf, imports_let_go_of_a_removed_device, 120)
{
	const char *ip = getenv("KCOLL_IP");
	struct kcoll_rank_addr ranks[2];
	struct kd_gone_rank k1;
	struct kd_buf v;
	struct tring r;
	pthread_t t;
	char dev[300];
	__u32 id, h;
	int p[2];

	if (!ip)
		SKIP(return, "KCOLL_IP not set: no RDMA address in this environment");
	if (getuid())
		SKIP(return, "needs root (dmabuf_test_dev, deleting rxe0)");
	ASSERT_EQ(0, kd_pci_dev(dev, sizeof(dev))) TH_LOG("no PCI device with a driver");
	ASSERT_EQ(0, kd_param_write("dmabuf_test_dev", dev));
	ASSERT_EQ(0, kd_alloc(&v, "vram", 1 << 20));
	ASSERT_EQ(0, pipe(p));
	k1 = (struct kd_gone_rank){ .ip = ip, .rank = 1, .go_fd = p[0] };
	ASSERT_EQ(0, pthread_create(&t, NULL, kd_gone_rank1, &k1));
	kt_addr_pair(ranks, ip);
	ASSERT_EQ(0, kt_ring_init(&r, 8, 0, 0));
	ASSERT_EQ(0, kt_comm_create(r.fd, 0xd0e0 + getpid(), "dmabuf-gone",
				    0, 2, ranks, 20000, &id));
	EXPECT_EQ(0, kd_reg(r.fd, id, v.fd, 0, 1 << 20,
			    (void *)0x7f0000000000ULL, KCOLL_REG_NO_CPU, &h));
	EXPECT_EQ(1, tb_counter("attachments"));
	EXPECT_EQ(1, tb_counter("mappings"));

	EXPECT_EQ(0, system("rdma link delete rxe0"));
	/* Let go at the removal, the registration itself still listed. */
	EXPECT_EQ(0, tb_counter("attachments"));
	EXPECT_EQ(0, tb_counter("mappings"));
	EXPECT_EQ(0, tb_counter("pins"));
	EXPECT_EQ(0, kd_dereg(r.fd, h));
	EXPECT_EQ(1, write(p[1], "g", 1));
	pthread_join(t, NULL);
	EXPECT_EQ(0, k1.err);
	kt_ring_exit(&r);
	close(p[0]);
	close(p[1]);
	kd_free(&v);
	EXPECT_EQ(0, kd_param_write("dmabuf_test_dev", "\n"));
	EXPECT_EQ(0, tb_live());
	/* rxe0 back for the tests after this one. */
	ASSERT_EQ(0, system("rdma link add rxe0 type rxe netdev eth0"));
	EXPECT_EQ(0, kt_port_wait_active("rxe0", 100));
}

#include "kcoll_test_main.h"
