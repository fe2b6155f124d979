// SPDX-License-Identifier: MIT
/*
 * libcoll ring layer: set-up, SQE hand-out, doorbell and CQE reaping for one
 * /dev/kcoll context. See coll.h for the API and linux/kcoll.h for the ring
 * protocol.
 *
 * Ordering, application side (the kernel side is in kmod/kcoll_ring.c):
 *  - coll_ring_get_sqe() load-acquires sq.head before handing out a slot:
 *    the kernel store-releases sq.head after copying the SQEs, so its reads
 *    of a slot happen before our writes to it;
 *  - coll_ring_submit*() store-releases sq.tail after the SQE writes, which
 *    the kernel load-acquires before copying them;
 *  - CQE readers load-acquire cq.tail (the kernel store-releases it after
 *    writing the CQEs), and coll_ring_cq_advance() store-releases cq.head
 *    after the CQE reads, so the kernel never overwrites a CQE being read.
 * Fields only we write (sq.tail, cq.head) are read back with relaxed loads.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "coll.h"

/* ---------------------------------------------------------------- */
/* Shared-index accessors                                            */
/* ---------------------------------------------------------------- */

static inline uint32_t coll_load_acquire(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline uint32_t coll_load_relaxed(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static inline void coll_store_release(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* ---------------------------------------------------------------- */
/* Error strings                                                     */
/* ---------------------------------------------------------------- */

/* Used where the C library has no thread-safe description table. */
static const char *coll_errdesc_fallback(int e)
{
	switch (e) {
	case 0:			return "Success";
	case EPERM:		return "Operation not permitted";
	case ENOENT:		return "No such file or directory";
	case EINTR:		return "Interrupted system call";
	case EIO:		return "Input/output error";
	case ENXIO:		return "No such device or address";
	case EBADF:		return "Bad file descriptor";
	case EAGAIN:		return "Resource temporarily unavailable";
	case ENOMEM:		return "Cannot allocate memory";
	case EFAULT:		return "Bad address";
	case EBUSY:		return "Device or resource busy";
	case ENODEV:		return "No such device";
	case EINVAL:		return "Invalid argument";
	case ENFILE:		return "Too many open files in system";
	case EMFILE:		return "Too many open files";
	case ENOTTY:		return "Inappropriate ioctl for device";
	case ERANGE:		return "Numerical result out of range";
	case ENOSYS:		return "Function not implemented";
	case ETIME:		return "Timer expired";
	case EPROTO:		return "Protocol error";
	case EOVERFLOW:		return "Value too large for defined data type";
	case EBADFD:		return "File descriptor in bad state";
	case EOPNOTSUPP:	return "Operation not supported";
	case ECANCELED:		return "Operation canceled";
	default:		return NULL;
	}
}

/* Errors that carry a kcoll meaning (see coll.h). ECANCELED keeps the C
 * library's text, which already says it. */
static const char *coll_errdesc_kcoll(int e)
{
	switch (e) {
	case EBADMSG:	 return "Collective signature mismatch between ranks";
	case ECONNRESET: return "Peer connection lost (connection reset)";
	case EACCES:
		return "Permission denied, or a peer did not prove it knows the communicator key";
	case ETIMEDOUT:
		return "Connection timed out: a peer did not answer (or holds another communicator key: see its kernel log)";
	default:	 return NULL;
	}
}

const char *coll_strerror(int err)
{
	const char *s;
	int e;

	if (err == INT_MIN)
		return "Unknown error";
	e = err < 0 ? -err : err;
	s = coll_errdesc_kcoll(e);
	if (s)
		return s;
#if defined(__GLIBC__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 32)
	/* Returns static, untranslated strings: no buffer, no locale. */
	s = strerrordesc_np(e);
#endif
#endif
	if (!s)
		s = coll_errdesc_fallback(e);
	return s ? s : "Unknown error";
}

/* ---------------------------------------------------------------- */
/* Set-up and tear-down                                              */
/* ---------------------------------------------------------------- */

static const char *coll_device_path(void)
{
	const char *path;

#if defined(__GLIBC__)
	/* Not honoured in set-user-ID programs. */
	path = secure_getenv(COLL_DEVICE_ENV);
#else
	path = getenv(COLL_DEVICE_ENV);
#endif
	return path && *path ? path : COLL_DEVICE_DEFAULT;
}

/* Returns an fd or -errno. */
static int coll_open_device(void)
{
	const char *path = coll_device_path();
	int fd;

	do {
		fd = open(path, O_RDWR | O_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : fd;
}

static bool coll_is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* Is [off, off + len) inside a mapping of @size bytes, aligned to @align? */
static bool coll_span_ok(uint64_t off, uint64_t len, uint64_t align,
			 uint64_t size)
{
	return !(off & (align - 1)) && off <= size && len <= size - off;
}

/* Sanity-check what KCOLL_IOC_SETUP returned before trusting it. */
static int coll_setup_sane(const struct kcoll_setup *s)
{
	const struct kcoll_sq_offsets *so = &s->sq_off;
	const struct kcoll_cq_offsets *co = &s->cq_off;
	const uint64_t size = s->mmap_size;
	const uint64_t u = sizeof(uint32_t);

	if (!(s->features & KCOLL_FEAT_SINGLE_MMAP))
		return -EOPNOTSUPP;
	if (!coll_is_pow2(s->sq_entries) || !coll_is_pow2(s->cq_entries))
		return -EPROTO;
	if (!size || size > SIZE_MAX || s->mmap_offset > (uint64_t)INT64_MAX)
		return -EPROTO;
	if (!coll_span_ok(so->head, u, u, size) ||
	    !coll_span_ok(so->tail, u, u, size) ||
	    !coll_span_ok(so->ring_mask, u, u, size) ||
	    !coll_span_ok(so->ring_entries, u, u, size) ||
	    !coll_span_ok(so->flags, u, u, size) ||
	    !coll_span_ok(so->sqes,
			  (uint64_t)s->sq_entries * sizeof(struct kcoll_sqe),
			  _Alignof(struct kcoll_sqe), size))
		return -EPROTO;
	if (!coll_span_ok(co->head, u, u, size) ||
	    !coll_span_ok(co->tail, u, u, size) ||
	    !coll_span_ok(co->ring_mask, u, u, size) ||
	    !coll_span_ok(co->ring_entries, u, u, size) ||
	    !coll_span_ok(co->flags, u, u, size) ||
	    !coll_span_ok(co->cqes,
			  (uint64_t)s->cq_entries * sizeof(struct kcoll_cqe),
			  _Alignof(struct kcoll_cqe), size))
		return -EPROTO;
	return 0;
}

static void coll_ring_reset(struct coll_ring *r)
{
	memset(r, 0, sizeof(*r));
	r->ring_fd = -1;
}

/* Point @r into the mapping at @base, laid out as @s describes. */
static int coll_ring_resolve(struct coll_ring *r, const struct kcoll_setup *s,
			     void *base)
{
	uint8_t *b = base;
	struct coll_ring_sq *sq = &r->sq;
	struct coll_ring_cq *cq = &r->cq;

	sq->khead = (uint32_t *)(b + s->sq_off.head);
	sq->ktail = (uint32_t *)(b + s->sq_off.tail);
	sq->kflags = (uint32_t *)(b + s->sq_off.flags);
	sq->sqes = (struct kcoll_sqe *)(b + s->sq_off.sqes);
	sq->ring_mask = *(const uint32_t *)(b + s->sq_off.ring_mask);
	sq->ring_entries = *(const uint32_t *)(b + s->sq_off.ring_entries);

	cq->khead = (uint32_t *)(b + s->cq_off.head);
	cq->ktail = (uint32_t *)(b + s->cq_off.tail);
	cq->kflags = (uint32_t *)(b + s->cq_off.flags);
	cq->cqes = (struct kcoll_cqe *)(b + s->cq_off.cqes);
	cq->ring_mask = *(const uint32_t *)(b + s->cq_off.ring_mask);
	cq->ring_entries = *(const uint32_t *)(b + s->cq_off.ring_entries);

	/* The geometry in the mapping must match the ioctl's answer. */
	if (sq->ring_entries != s->sq_entries ||
	    sq->ring_mask != s->sq_entries - 1 ||
	    cq->ring_entries != s->cq_entries ||
	    cq->ring_mask != s->cq_entries - 1)
		return -EPROTO;

	/* A fresh ring starts empty; resume from wherever it stands. */
	sq->sqe_tail = coll_load_relaxed(sq->ktail);
	return 0;
}

int coll_ring_init_params(struct coll_ring *r, struct kcoll_setup *p)
{
	struct kcoll_setup s;
	void *base;
	int fd, err;

	coll_ring_reset(r);
	if (!p)
		return -EINVAL;

	fd = coll_open_device();
	if (fd < 0)
		return fd;

	s = *p;
	if (ioctl(fd, KCOLL_IOC_SETUP, &s) < 0) {
		err = -errno;
		goto out_close;
	}
	err = coll_setup_sane(&s);
	if (err)
		goto out_close;

	base = mmap(NULL, (size_t)s.mmap_size, PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, (off_t)s.mmap_offset);
	if (base == MAP_FAILED) {
		err = -errno;
		goto out_close;
	}
	err = coll_ring_resolve(r, &s, base);
	if (err) {
		munmap(base, (size_t)s.mmap_size);
		coll_ring_reset(r);
		goto out_close;
	}

	r->ring_ptr = base;
	r->ring_sz = (size_t)s.mmap_size;
	r->ring_fd = fd;
	r->flags = s.flags;
	r->features = s.features;
	*p = s;
	return 0;

out_close:
	close(fd);
	return err;
}

int coll_ring_init(struct coll_ring *r, unsigned int sq_entries,
		   unsigned int flags)
{
	struct kcoll_setup p;

	memset(&p, 0, sizeof(p));
	p.sq_entries = sq_entries;
	p.flags = flags;
	return coll_ring_init_params(r, &p);
}

void coll_ring_exit(struct coll_ring *r)
{
	if (r->ring_ptr)
		munmap(r->ring_ptr, r->ring_sz);
	if (r->ring_fd >= 0)
		close(r->ring_fd);
	coll_ring_reset(r);
}

int coll_ring_query(int fd, struct kcoll_query *q)
{
	bool own = fd < 0;
	int ret = 0;

	if (!q)
		return -EINVAL;
	if (own) {
		fd = coll_open_device();
		if (fd < 0)
			return fd;
	}
	/* The kernel wants an all-zero input. */
	memset(q, 0, sizeof(*q));
	if (ioctl(fd, KCOLL_IOC_QUERY, q) < 0)
		ret = -errno;
	if (own)
		close(fd);
	return ret;
}

/* ---------------------------------------------------------------- */
/* Submission                                                        */
/* ---------------------------------------------------------------- */

struct kcoll_sqe *coll_ring_get_sqe(struct coll_ring *r)
{
	struct coll_ring_sq *sq = &r->sq;
	uint32_t head = coll_load_acquire(sq->khead);
	struct kcoll_sqe *sqe;

	if (sq->sqe_tail - head >= sq->ring_entries)
		return NULL;
	sqe = &sq->sqes[sq->sqe_tail & sq->ring_mask];
	sq->sqe_tail++;
	memset(sqe, 0, sizeof(*sqe));
	return sqe;
}

unsigned int coll_ring_sq_space(struct coll_ring *r)
{
	struct coll_ring_sq *sq = &r->sq;
	uint32_t used = sq->sqe_tail - coll_load_acquire(sq->khead);

	return used >= sq->ring_entries ? 0 : sq->ring_entries - used;
}

/*
 * Publish the privately queued SQEs and return how many the kernel has not
 * consumed yet (including any left over by an earlier partial submit).
 */
static unsigned int coll_sq_flush(struct coll_ring *r)
{
	struct coll_ring_sq *sq = &r->sq;
	uint32_t pending;

	/* A1: the SQE writes are visible before the new tail. */
	if (coll_load_relaxed(sq->ktail) != sq->sqe_tail)
		coll_store_release(sq->ktail, sq->sqe_tail);
	pending = sq->sqe_tail - coll_load_acquire(sq->khead);
	/* More would be corrupt; let the kernel report -EOVERFLOW. */
	return pending > sq->ring_entries ? sq->ring_entries : pending;
}

int coll_ring_enter(struct coll_ring *r, unsigned int to_submit,
		    unsigned int min_complete, unsigned int flags,
		    uint64_t timeout_ns)
{
	struct kcoll_enter e;
	int ret;

	memset(&e, 0, sizeof(e));
	e.to_submit = to_submit;
	e.min_complete = min_complete;
	e.flags = flags;
	e.timeout_ns = timeout_ns;
	ret = ioctl(r->ring_fd, KCOLL_IOC_ENTER, &e);
	return ret < 0 ? -errno : ret;
}

int coll_ring_submit(struct coll_ring *r)
{
	unsigned int pending = coll_sq_flush(r);

	if (!pending)
		return 0;
	return coll_ring_enter(r, pending, 0, 0, 0);
}

int coll_ring_submit_and_wait(struct coll_ring *r, unsigned int wait_nr)
{
	unsigned int pending = coll_sq_flush(r);

	if (!pending && !wait_nr)
		return 0;
	return coll_ring_enter(r, pending, wait_nr,
			       wait_nr ? KCOLL_ENTER_GETEVENTS : 0, 0);
}

/* ---------------------------------------------------------------- */
/* Completion                                                        */
/* ---------------------------------------------------------------- */

unsigned int coll_ring_cq_ready(struct coll_ring *r)
{
	struct coll_ring_cq *cq = &r->cq;
	/* A2: pairs with the kernel's store-release of cq.tail. */
	uint32_t tail = coll_load_acquire(cq->ktail);
	uint32_t ready = tail - coll_load_relaxed(cq->khead);

	return ready > cq->ring_entries ? cq->ring_entries : ready;
}

int coll_ring_peek_cqe(struct coll_ring *r, struct kcoll_cqe **cqe)
{
	struct coll_ring_cq *cq = &r->cq;
	uint32_t head = coll_load_relaxed(cq->khead);

	/* A2: the CQE contents are visible once the tail is. */
	if (coll_load_acquire(cq->ktail) == head) {
		*cqe = NULL;
		return -EAGAIN;
	}
	*cqe = &cq->cqes[head & cq->ring_mask];
	return 0;
}

static uint64_t coll_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int coll_ring_wait_cqe(struct coll_ring *r, struct kcoll_cqe **cqe,
		       uint64_t timeout_ns)
{
	uint64_t deadline = 0, left = 0;
	int ret;

	if (!coll_ring_peek_cqe(r, cqe))
		return 0;
	if (timeout_ns) {
		deadline = coll_now_ns() + timeout_ns;
		if (deadline < timeout_ns)	/* wrapped: treat as no limit */
			timeout_ns = 0;
	}
	for (;;) {
		if (timeout_ns) {
			uint64_t now = coll_now_ns();

			if (now >= deadline)
				return -ETIME;
			left = deadline - now;
		}
		ret = coll_ring_enter(r, 0, 1, KCOLL_ENTER_GETEVENTS, left);
		if (ret < 0) {
			/* One may have landed just as the time ran out. */
			if (ret == -ETIME && !coll_ring_peek_cqe(r, cqe))
				return 0;
			*cqe = NULL;
			return ret;
		}
		/* The wait may end a moment before the tail is published:
		 * go round again, with what is left of the timeout. */
		if (!coll_ring_peek_cqe(r, cqe))
			return 0;
	}
}

void coll_ring_cq_advance(struct coll_ring *r, unsigned int n)
{
	struct coll_ring_cq *cq = &r->cq;

	if (!n)
		return;
	/* A3: our CQE reads are done before the kernel may reuse the slots. */
	coll_store_release(cq->khead, coll_load_relaxed(cq->khead) + n);
}

void coll_ring_cqe_seen(struct coll_ring *r, struct kcoll_cqe *cqe)
{
	if (cqe)
		coll_ring_cq_advance(r, 1);
}

/* ---------------------------------------------------------------- */
/* Eventfd                                                           */
/* ---------------------------------------------------------------- */

static int coll_ring_set_eventfd(struct coll_ring *r, int efd)
{
	struct kcoll_eventfd e;

	memset(&e, 0, sizeof(e));
	e.fd = efd;
	return ioctl(r->ring_fd, KCOLL_IOC_EVENTFD, &e) < 0 ? -errno : 0;
}

int coll_ring_register_eventfd(struct coll_ring *r, int efd)
{
	/* -1 would mean "unregister" to the kernel. */
	if (efd < 0)
		return -EBADF;
	return coll_ring_set_eventfd(r, efd);
}

int coll_ring_unregister_eventfd(struct coll_ring *r)
{
	return coll_ring_set_eventfd(r, -1);
}
