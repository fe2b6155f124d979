// SPDX-License-Identifier: MIT
/*
 * Host checks of libcoll that need no /dev/kcoll:
 *  - compile time: ABI sizes, and the exact prototypes of the public API;
 *  - link time: every public function resolves (this file is linked once
 *    against libcoll.a and once against libcoll.so);
 *  - error paths of set-up and query (no device, not a kcoll device), with
 *    no file descriptor leaked;
 *  - coll_strerror();
 *  - the prep helpers produce SQEs the kernel's validator accepts;
 *  - the userspace ring accessors, on a fake mapping laid out by the
 *    kernel's own kcoll_ring_layout() and driven by a model kernel that
 *    uses kcoll_sq_ready()/kcoll_cq_space(), across the 2^32 index wrap.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "kcoll_logic.h"
#include "unit.h"

/* ------------------------------------------------------------------ */
/* Compile-time checks                                                 */
/* ------------------------------------------------------------------ */

_Static_assert(sizeof(struct kcoll_sqe) == 64, "SQE size");
_Static_assert(sizeof(struct kcoll_cqe) == 16, "CQE size");
_Static_assert(sizeof(struct kcoll_setup) == 128, "setup size");
_Static_assert(sizeof(struct kcoll_query) == 80, "query size");
_Static_assert(sizeof(struct kcoll_enter) == 40, "enter size");
_Static_assert(sizeof(struct kcoll_eventfd) == 8, "eventfd size");

/* A prototype change in coll.h breaks the build here. */
static int (*const p_init)(struct coll_ring *, unsigned int, unsigned int) =
	coll_ring_init;
static int (*const p_init_params)(struct coll_ring *, struct kcoll_setup *) =
	coll_ring_init_params;
static void (*const p_exit)(struct coll_ring *) = coll_ring_exit;
static int (*const p_query)(int, struct kcoll_query *) = coll_ring_query;
static struct kcoll_sqe *(*const p_get_sqe)(struct coll_ring *) =
	coll_ring_get_sqe;
static int (*const p_submit)(struct coll_ring *) = coll_ring_submit;
static int (*const p_submit_and_wait)(struct coll_ring *, unsigned int) =
	coll_ring_submit_and_wait;
static int (*const p_enter)(struct coll_ring *, unsigned int, unsigned int,
			    unsigned int, uint64_t) = coll_ring_enter;
static int (*const p_peek)(struct coll_ring *, struct kcoll_cqe **) =
	coll_ring_peek_cqe;
static int (*const p_wait)(struct coll_ring *, struct kcoll_cqe **,
			   uint64_t) = coll_ring_wait_cqe;
static void (*const p_seen)(struct coll_ring *, struct kcoll_cqe *) =
	coll_ring_cqe_seen;
static void (*const p_advance)(struct coll_ring *, unsigned int) =
	coll_ring_cq_advance;
static unsigned int (*const p_cq_ready)(struct coll_ring *) =
	coll_ring_cq_ready;
static unsigned int (*const p_sq_space)(struct coll_ring *) =
	coll_ring_sq_space;
static int (*const p_reg_efd)(struct coll_ring *, int) =
	coll_ring_register_eventfd;
static int (*const p_unreg_efd)(struct coll_ring *) =
	coll_ring_unregister_eventfd;
static const char *(*const p_strerror)(int) = coll_strerror;
static void (*const p_prep_nop)(struct kcoll_sqe *, uint64_t) =
	coll_ring_prep_nop;
static void (*const p_prep_delay)(struct kcoll_sqe *, uint64_t, uint64_t) =
	coll_ring_prep_delay;

static void test_api_linked(void)
{
	const void *fns[] = {
		(const void *)p_init, (const void *)p_init_params,
		(const void *)p_exit, (const void *)p_query,
		(const void *)p_get_sqe, (const void *)p_submit,
		(const void *)p_submit_and_wait, (const void *)p_enter,
		(const void *)p_peek, (const void *)p_wait,
		(const void *)p_seen, (const void *)p_advance,
		(const void *)p_cq_ready, (const void *)p_sq_space,
		(const void *)p_reg_efd, (const void *)p_unreg_efd,
		(const void *)p_strerror, (const void *)p_prep_nop,
		(const void *)p_prep_delay,
	};
	size_t i;

	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		UNIT_CHECK(fns[i] != NULL);
	UNIT_EQ_STR(COLL_DEVICE_DEFAULT, "/dev/kcoll");
	UNIT_EQ_STR(COLL_DEVICE_ENV, "KCOLL_DEVICE");
}

/* ------------------------------------------------------------------ */
/* coll_strerror                                                       */
/* ------------------------------------------------------------------ */

static void test_strerror(void)
{
	static const int errs[] = {
		ENOENT, EINVAL, EBUSY, ETIME, EINTR, ENOTTY, EOVERFLOW,
		ERANGE, EBADFD, ECANCELED, EAGAIN, ENOMEM, EPROTO,
	};
	size_t i;

	for (i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		const char *s = coll_strerror(-errs[i]);

		if (!UNIT_CHECK(s && *s))
			continue;
		/* Same text as the C library (this runs in the C locale). */
		UNIT_EQ_STR(s, strerror(errs[i]));
		/* The sign does not matter; the pointer is stable. */
		UNIT_CHECK(coll_strerror(errs[i]) == s);
		UNIT_CHECK(coll_strerror(-errs[i]) == s);
		UNIT_CHECK(strcmp(s, "Unknown error") != 0);
	}
	UNIT_EQ_STR(coll_strerror(-ENOENT), "No such file or directory");
	UNIT_EQ_STR(coll_strerror(-EBUSY), "Device or resource busy");
	UNIT_CHECK(coll_strerror(0) != NULL);
	UNIT_EQ_STR(coll_strerror(-99999), "Unknown error");
	UNIT_EQ_STR(coll_strerror(99999), "Unknown error");
	UNIT_EQ_STR(coll_strerror(INT_MIN), "Unknown error");
	UNIT_EQ_STR(coll_strerror(INT_MAX), "Unknown error");
}

static void *strerror_thread(void *arg)
{
	const char *want = arg;
	long bad = 0;
	int i;

	for (i = 0; i < 20000; i++) {
		bad += strcmp(coll_strerror(-ENOENT), want) != 0;
		bad += coll_strerror(-(i % 200)) == NULL;
	}
	return (void *)bad;
}

static void test_strerror_threads(void)
{
	const char *want = coll_strerror(-ENOENT);
	pthread_t t[4];
	int i, n = 0;

	for (i = 0; i < 4; i++)
		if (UNIT_EQ_INT(pthread_create(&t[i], NULL, strerror_thread,
					       (void *)want), 0))
			n++;
	for (i = 0; i < n; i++) {
		void *bad;

		UNIT_EQ_INT(pthread_join(t[i], &bad), 0);
		UNIT_EQ_INT((long)bad, 0);
	}
	UNIT_EQ_STR(coll_strerror(-ENOENT), want);
}

/* ------------------------------------------------------------------ */
/* Set-up and query error paths                                        */
/* ------------------------------------------------------------------ */

/* The descriptor the next open() would get: a leak shows up as a change. */
static int next_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (fd >= 0)
		close(fd);
	return fd;
}

static bool ring_is_reset(const struct coll_ring *r)
{
	return r->ring_fd == -1 && !r->ring_ptr && !r->ring_sz &&
	       !r->sq.sqes && !r->cq.cqes && !r->sq.khead && !r->cq.khead;
}

/* coll_ring_init() and coll_ring_init_params() on $KCOLL_DEVICE = @path. */
static void expect_init_fails(const char *path, int err)
{
	struct kcoll_setup p, p0;
	struct coll_ring r;
	int fd0 = next_fd();

	if (!UNIT_EQ_INT(setenv(COLL_DEVICE_ENV, path, 1), 0))
		return;
	memset(&r, 0xa5, sizeof(r));
	if (!UNIT_EQ_INT(coll_ring_init(&r, 8, 0), -err))
		UNIT_FAIL("device %s", path);
	UNIT_CHECK(ring_is_reset(&r));
	/* Safe on a ring whose set-up failed, and twice. */
	coll_ring_exit(&r);
	coll_ring_exit(&r);
	UNIT_CHECK(ring_is_reset(&r));

	memset(&p, 0, sizeof(p));
	p.sq_entries = 16;
	p.cq_entries = 64;
	p.flags = KCOLL_SETUP_CQSIZE;
	p0 = p;
	memset(&r, 0x5a, sizeof(r));
	UNIT_EQ_INT(coll_ring_init_params(&r, &p), -err);
	UNIT_CHECK(ring_is_reset(&r));
	UNIT_CHECK(!memcmp(&p, &p0, sizeof(p)));	/* untouched */
	UNIT_EQ_INT(next_fd(), fd0);			/* nothing leaked */
}

static void expect_query_fails(const char *path, int err)
{
	struct kcoll_query q;
	int fd0 = next_fd();

	if (!UNIT_EQ_INT(setenv(COLL_DEVICE_ENV, path, 1), 0))
		return;
	memset(&q, 0xa5, sizeof(q));
	if (!UNIT_EQ_INT(coll_ring_query(-1, &q), -err))
		UNIT_FAIL("device %s", path);
	UNIT_EQ_INT(next_fd(), fd0);
}

static void test_init_nonexistent(void)
{
	expect_init_fails("/nonexistent", ENOENT);
	expect_init_fails("/nonexistent/dir/kcoll", ENOENT);
	UNIT_EQ_INT(unsetenv(COLL_DEVICE_ENV), 0);
}

static void test_query_nonexistent(void)
{
	struct kcoll_query q;

	expect_query_fails("/nonexistent", ENOENT);
	/* Any negative fd means "open the device". */
	UNIT_EQ_INT(setenv(COLL_DEVICE_ENV, "/nonexistent", 1), 0);
	UNIT_EQ_INT(coll_ring_query(INT_MIN, &q), -ENOENT);
	UNIT_EQ_INT(coll_ring_query(-1, NULL), -EINVAL);
	UNIT_EQ_INT(unsetenv(COLL_DEVICE_ENV), 0);
}

static void test_init_not_kcoll(void)
{
	char path[] = "/tmp/kcoll-unit-XXXXXX";
	struct kcoll_query q;
	int fd;

	/* A character device without our ioctls. */
	expect_init_fails("/dev/null", ENOTTY);
	expect_query_fails("/dev/null", ENOTTY);
	/* A directory cannot be opened for writing. */
	expect_init_fails("/", EISDIR);
	/* A regular file. */
	fd = mkstemp(path);
	if (UNIT_CHECK(fd >= 0)) {
		expect_init_fails(path, ENOTTY);
		/* Query on a caller's fd that is not the device. */
		UNIT_EQ_INT(coll_ring_query(fd, &q), -ENOTTY);
		/* ... which is left open. */
		UNIT_CHECK(fcntl(fd, F_GETFD) >= 0);
		close(fd);
		unlink(path);
	}
	/* A closed descriptor. */
	UNIT_EQ_INT(coll_ring_query(INT_MAX, &q), -EBADF);
	UNIT_EQ_INT(unsetenv(COLL_DEVICE_ENV), 0);
}

/* ------------------------------------------------------------------ */
/* Prep helpers                                                        */
/* ------------------------------------------------------------------ */

static void test_prep_helpers(void)
{
	struct kcoll_sqe s, z;

	memset(&z, 0, sizeof(z));

	memset(&s, 0xff, sizeof(s));
	coll_ring_prep_nop(&s, 0x1122334455667788ULL);
	UNIT_EQ_UINT(s.opcode, KCOLL_OP_NOP);
	UNIT_EQ_UINT(s.user_data, 0x1122334455667788ULL);
	s.user_data = 0;
	UNIT_CHECK(!memcmp(&s, &z, sizeof(s)));	/* everything else zero */
	coll_ring_prep_nop(&s, UINT64_MAX);
	UNIT_EQ_INT(kcoll_sqe_check(&s), 0);

	memset(&s, 0xff, sizeof(s));
	coll_ring_prep_delay(&s, 1500, 42);
	UNIT_EQ_UINT(s.opcode, KCOLL_OP_DELAY);
	UNIT_EQ_UINT(s.count, 1500);
	UNIT_EQ_UINT(s.user_data, 42);
	UNIT_EQ_INT(kcoll_sqe_check(&s), 0);
	s.opcode = 0;
	s.count = 0;
	s.user_data = 0;
	UNIT_CHECK(!memcmp(&s, &z, sizeof(s)));

	coll_ring_prep_delay(&s, KCOLL_DELAY_MAX_US, 1);
	UNIT_EQ_INT(kcoll_sqe_check(&s), 0);
	coll_ring_prep_delay(&s, (uint64_t)KCOLL_DELAY_MAX_US + 1, 1);
	UNIT_EQ_INT(kcoll_sqe_check(&s), -ERANGE);
	coll_ring_prep_delay(&s, 0, 1);
	UNIT_EQ_INT(kcoll_sqe_check(&s), 0);
}

/* ------------------------------------------------------------------ */
/* Ring accessors on a fake mapping                                    */
/* ------------------------------------------------------------------ */

struct fake {
	struct coll_ring r;
	struct kcoll_ring_layout l;
	uint8_t *mem;
	/* Model kernel state. */
	u32 k_sq_head;
	u32 k_cq_tail;
	u32 k_reserved;
};

static u32 *fake_u32(struct fake *f, u32 off)
{
	return (u32 *)(f->mem + off);
}

/* Lay out and "map" rings like the kernel does; indices start at @start. */
static bool fake_init(struct fake *f, u32 sq, u32 cq, u32 start)
{
	memset(f, 0, sizeof(*f));
	kcoll_ring_layout(sq, cq, &f->l);
	f->mem = aligned_alloc(KCOLL_PAGE_SIZE, f->l.size);
	if (!UNIT_CHECK(f->mem))
		return false;
	memset(f->mem, 0xee, f->l.size);	/* stale SQE contents */
	*fake_u32(f, f->l.sq_off.ring_mask) = sq - 1;
	*fake_u32(f, f->l.sq_off.ring_entries) = sq;
	*fake_u32(f, f->l.cq_off.ring_mask) = cq - 1;
	*fake_u32(f, f->l.cq_off.ring_entries) = cq;
	*fake_u32(f, f->l.sq_off.head) = start;
	*fake_u32(f, f->l.sq_off.tail) = start;
	*fake_u32(f, f->l.cq_off.head) = start;
	*fake_u32(f, f->l.cq_off.tail) = start;
	*fake_u32(f, f->l.sq_off.flags) = 0;
	*fake_u32(f, f->l.cq_off.flags) = 0;
	f->k_sq_head = start;
	f->k_cq_tail = start;

	/* What coll_ring_init_params() fills in, by hand; no device. */
	f->r.sq.khead = fake_u32(f, f->l.sq_off.head);
	f->r.sq.ktail = fake_u32(f, f->l.sq_off.tail);
	f->r.sq.kflags = fake_u32(f, f->l.sq_off.flags);
	f->r.sq.sqes = (struct kcoll_sqe *)(f->mem + f->l.sq_off.sqes);
	f->r.sq.ring_mask = sq - 1;
	f->r.sq.ring_entries = sq;
	f->r.sq.sqe_tail = start;
	f->r.cq.khead = fake_u32(f, f->l.cq_off.head);
	f->r.cq.ktail = fake_u32(f, f->l.cq_off.tail);
	f->r.cq.kflags = fake_u32(f, f->l.cq_off.flags);
	f->r.cq.cqes = (struct kcoll_cqe *)(f->mem + f->l.cq_off.cqes);
	f->r.cq.ring_mask = cq - 1;
	f->r.cq.ring_entries = cq;
	f->r.ring_fd = -1;		/* every ioctl fails with -EBADF */
	return true;
}

static void fake_free(struct fake *f)
{
	free(f->mem);
	f->mem = NULL;
}

/*
 * Model kernel: consume up to @to_submit published SQEs as kcoll_submit()
 * does, and complete each at once with res = ~user_data. Returns the count
 * or -errno.
 */
static int fake_kernel_enter(struct fake *f, u32 to_submit)
{
	const u32 sq_n = f->l.sq_entries, cq_n = f->l.cq_entries;
	u32 tail = __atomic_load_n(fake_u32(f, f->l.sq_off.tail),
				   __ATOMIC_ACQUIRE);
	u32 cq_head = __atomic_load_n(fake_u32(f, f->l.cq_off.head),
				      __ATOMIC_ACQUIRE);
	u32 space, i;
	int n;

	n = kcoll_sq_ready(f->k_sq_head, tail, sq_n, to_submit);
	if (n <= 0)
		return n;
	space = kcoll_cq_space(cq_head, f->k_cq_tail, cq_n, f->k_reserved);
	if ((u32)n > space)
		n = (int)space;
	if (!n)
		return -EBUSY;
	for (i = 0; i < (u32)n; i++) {
		struct kcoll_sqe sqe = f->r.sq.sqes[f->k_sq_head & (sq_n - 1)];
		struct kcoll_cqe *cqe;

		f->k_sq_head++;
		cqe = &f->r.cq.cqes[f->k_cq_tail & (cq_n - 1)];
		cqe->user_data = sqe.user_data;
		cqe->res = kcoll_sqe_check(&sqe) ? -1 : (s32)~sqe.user_data;
		cqe->flags = 0;
		f->k_cq_tail++;
	}
	__atomic_store_n(fake_u32(f, f->l.sq_off.head), f->k_sq_head,
			 __ATOMIC_RELEASE);
	__atomic_store_n(fake_u32(f, f->l.cq_off.tail), f->k_cq_tail,
			 __ATOMIC_RELEASE);
	return n;
}

static void test_fake_ring_basics(void)
{
	struct kcoll_cqe *cqe = (struct kcoll_cqe *)1;
	struct kcoll_sqe *sqe, *prev = NULL;
	struct fake f;
	u32 i;

	if (!fake_init(&f, 8, 16, 0))
		return;
	UNIT_EQ_UINT(coll_ring_sq_space(&f.r), 8);
	UNIT_EQ_UINT(coll_ring_cq_ready(&f.r), 0);
	UNIT_EQ_INT(coll_ring_peek_cqe(&f.r, &cqe), -EAGAIN);
	UNIT_CHECK(cqe == NULL);
	/* Nothing to do: no system call, no error. */
	UNIT_EQ_INT(coll_ring_submit(&f.r), 0);
	UNIT_EQ_INT(coll_ring_submit_and_wait(&f.r, 0), 0);

	/* The whole SQ, slot by slot, each one zeroed. */
	for (i = 0; i < 8; i++) {
		sqe = coll_ring_get_sqe(&f.r);
		if (!UNIT_CHECK(sqe))
			break;
		UNIT_CHECK(sqe == &f.r.sq.sqes[i]);
		UNIT_CHECK(!prev || sqe == prev + 1);
		UNIT_EQ_UINT(sqe->opcode | sqe->flags | sqe->user_data |
			     sqe->count | sqe->timeout_ms | sqe->resv, 0);
		coll_ring_prep_nop(sqe, 100 + i);
		prev = sqe;
		UNIT_EQ_UINT(coll_ring_sq_space(&f.r), 7 - i);
	}
	UNIT_CHECK(coll_ring_get_sqe(&f.r) == NULL);
	UNIT_EQ_UINT(coll_ring_sq_space(&f.r), 0);
	/* Queued privately: the kernel sees nothing yet. */
	UNIT_EQ_UINT(*f.r.sq.ktail, 0);

	/* Submit publishes the tail before ringing the (absent) doorbell. */
	UNIT_EQ_INT(coll_ring_submit(&f.r), -EBADF);
	UNIT_EQ_UINT(*f.r.sq.ktail, 8);
	UNIT_EQ_INT(coll_ring_submit_and_wait(&f.r, 1), -EBADF);
	UNIT_EQ_INT(coll_ring_enter(&f.r, 0, 0, 0, 0), -EBADF);

	/* The kernel takes 5 (the CQ has room for all). */
	UNIT_EQ_INT(fake_kernel_enter(&f, 5), 5);
	UNIT_EQ_UINT(coll_ring_sq_space(&f.r), 5);
	UNIT_EQ_UINT(coll_ring_cq_ready(&f.r), 5);
	UNIT_EQ_INT(fake_kernel_enter(&f, 8), 3);
	UNIT_EQ_UINT(coll_ring_sq_space(&f.r), 8);
	UNIT_EQ_UINT(coll_ring_cq_ready(&f.r), 8);

	/* Reap one by one, then in bulk. */
	for (i = 0; i < 3; i++) {
		if (!UNIT_EQ_INT(coll_ring_peek_cqe(&f.r, &cqe), 0))
			break;
		UNIT_CHECK(cqe == &f.r.cq.cqes[i]);
		UNIT_EQ_UINT(cqe->user_data, 100 + i);
		UNIT_EQ_INT(cqe->res, (s32)~(u64)(100 + i));
		/* Peek is idempotent until seen. */
		UNIT_EQ_INT(coll_ring_peek_cqe(&f.r, &cqe), 0);
		UNIT_EQ_UINT(cqe->user_data, 100 + i);
		coll_ring_cqe_seen(&f.r, cqe);
		UNIT_EQ_UINT(*f.r.cq.khead, i + 1);
	}
	coll_ring_cqe_seen(&f.r, NULL);		/* no-op */
	UNIT_EQ_UINT(*f.r.cq.khead, 3);
	/* wait_cqe returns at once, without a system call, if one is ready. */
	UNIT_EQ_INT(coll_ring_wait_cqe(&f.r, &cqe, 0), 0);
	UNIT_EQ_UINT(cqe->user_data, 103);
	UNIT_EQ_UINT(coll_ring_cq_ready(&f.r), 5);
	coll_ring_cq_advance(&f.r, 0);		/* no-op */
	UNIT_EQ_UINT(*f.r.cq.khead, 3);
	coll_ring_cq_advance(&f.r, 5);
	UNIT_EQ_UINT(*f.r.cq.khead, 8);
	UNIT_EQ_UINT(coll_ring_cq_ready(&f.r), 0);
	UNIT_EQ_INT(coll_ring_peek_cqe(&f.r, &cqe), -EAGAIN);
	/* Nothing ready: wait_cqe must enter the kernel, which fails here. */
	cqe = (struct kcoll_cqe *)1;
	UNIT_EQ_INT(coll_ring_wait_cqe(&f.r, &cqe, 0), -EBADF);
	UNIT_CHECK(cqe == NULL);
	UNIT_EQ_INT(coll_ring_wait_cqe(&f.r, &cqe, 1000000), -EBADF);

	/* Eventfd ioctls reach the (absent) kernel; -1 is refused first. */
	UNIT_EQ_INT(coll_ring_register_eventfd(&f.r, -1), -EBADF);
	UNIT_EQ_INT(coll_ring_register_eventfd(&f.r, 0), -EBADF);
	UNIT_EQ_INT(coll_ring_unregister_eventfd(&f.r), -EBADF);

	/* exit() on a ring without mapping or fd just resets it. */
	f.r.ring_ptr = NULL;
	coll_ring_exit(&f.r);
	UNIT_CHECK(ring_is_reset(&f.r));
	fake_free(&f);
}

/* A full CQ: the kernel refuses with -EBUSY, SQEs stay queued. */
static void test_fake_ring_cq_full(void)
{
	struct kcoll_cqe *cqe;
	struct fake f;
	u32 i;

	if (!fake_init(&f, 4, 4, UINT32_MAX - 1))
		return;
	for (i = 0; i < 4; i++)
		coll_ring_prep_nop(coll_ring_get_sqe(&f.r), i);
	UNIT_EQ_INT(coll_ring_submit(&f.r), -EBADF);
	UNIT_EQ_INT(fake_kernel_enter(&f, 4), 4);
	for (i = 0; i < 4; i++)
		coll_ring_prep_nop(coll_ring_get_sqe(&f.r), 10 + i);
	UNIT_CHECK(coll_ring_get_sqe(&f.r) == NULL);
	UNIT_EQ_INT(coll_ring_submit(&f.r), -EBADF);
	UNIT_EQ_INT(fake_kernel_enter(&f, 4), -EBUSY);
	UNIT_EQ_UINT(coll_ring_sq_space(&f.r), 0);
	/* Reap two: two more fit. */
	UNIT_EQ_INT(coll_ring_peek_cqe(&f.r, &cqe), 0);
	UNIT_EQ_UINT(cqe->user_data, 0);
	coll_ring_cq_advance(&f.r, 2);
	UNIT_EQ_INT(fake_kernel_enter(&f, 4), 2);
	UNIT_EQ_UINT(coll_ring_sq_space(&f.r), 2);
	UNIT_EQ_UINT(coll_ring_cq_ready(&f.r), 4);
	UNIT_EQ_INT(coll_ring_peek_cqe(&f.r, &cqe), 0);
	UNIT_EQ_UINT(cqe->user_data, 2);
	coll_ring_cq_advance(&f.r, 4);
	UNIT_EQ_INT(fake_kernel_enter(&f, 4), 2);
	UNIT_EQ_INT(coll_ring_peek_cqe(&f.r, &cqe), 0);
	UNIT_EQ_UINT(cqe->user_data, 12);
	/* The indices wrapped through zero on the way. */
	UNIT_CHECK(*f.r.sq.khead < 16 && *f.r.cq.ktail < 16);
	fake_free(&f);
}

/* Random traffic through the library and the model kernel across the
 * 2^32 wrap: every SQE comes back exactly once, in order. */
static void test_fake_ring_wrap(void)
{
	static const u32 geo[][2] = { { 1, 1 }, { 1, 2 }, { 4, 8 },
				      { 16, 16 }, { 32, 128 } };
	struct unit_rng rng;
	size_t g;

	unit_rng_seed(&rng, unit_seed(0xabcdefULL));
	for (g = 0; g < sizeof(geo) / sizeof(geo[0]); g++) {
		u64 next = 0, expect = 0;
		struct fake f;
		unsigned long i;

		if (!fake_init(&f, geo[g][0], geo[g][1], UINT32_MAX - 300))
			return;
		for (i = 0; i < 200000 && !unit_fails(); i++) {
			struct kcoll_cqe *cqe;
			struct kcoll_sqe *sqe;
			u32 k, n;
			int ret;

			n = unit_rng_upto(&rng, geo[g][0] + 1);
			for (k = 0; k < n; k++) {
				u32 space = coll_ring_sq_space(&f.r);

				sqe = coll_ring_get_sqe(&f.r);
				if (!UNIT_EQ_INT(sqe != NULL, space > 0))
					break;
				if (!sqe)
					break;
				coll_ring_prep_nop(sqe, next++);
			}
			if (unit_rng_upto(&rng, 1)) {
				u32 pending = f.r.sq.sqe_tail - *f.r.sq.khead;

				/* Publishes, then fails at the doorbell;
				 * with nothing pending, no doorbell. */
				UNIT_EQ_INT(coll_ring_submit(&f.r),
					    pending ? -EBADF : 0);
				UNIT_EQ_UINT(*f.r.sq.ktail, f.r.sq.sqe_tail);
			}
			ret = fake_kernel_enter(&f, unit_rng_upto(&rng,
								  geo[g][0]));
			UNIT_CHECK(ret >= 0 || ret == -EBUSY);
			n = unit_rng_upto(&rng, geo[g][1]);
			UNIT_CHECK(coll_ring_cq_ready(&f.r) <= geo[g][1]);
			while (n-- && !coll_ring_peek_cqe(&f.r, &cqe)) {
				if (!UNIT_EQ_UINT(cqe->user_data, expect))
					break;
				UNIT_EQ_INT(cqe->res, (s32)~expect);
				expect++;
				coll_ring_cqe_seen(&f.r, cqe);
			}
		}
		UNIT_CHECK(expect > 300);	/* crossed the wrap */
		UNIT_CHECK(next >= expect);
		UNIT_CHECK(next - expect <= geo[g][0] + geo[g][1]);
		fake_free(&f);
	}
}

int main(int argc, char **argv)
{
	unit_init(argc, argv);
	UNIT_RUN(test_api_linked);
	UNIT_RUN(test_strerror);
	UNIT_RUN(test_strerror_threads);
	UNIT_RUN(test_init_nonexistent);
	UNIT_RUN(test_query_nonexistent);
	UNIT_RUN(test_init_not_kcoll);
	UNIT_RUN(test_prep_helpers);
	UNIT_RUN(test_fake_ring_basics);
	UNIT_RUN(test_fake_ring_cq_full);
	UNIT_RUN(test_fake_ring_wrap);
	return unit_done();
}
