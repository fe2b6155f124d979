/* SPDX-License-Identifier: MIT */
/*
 * libcoll: userspace library for /dev/kcoll.
 *
 * Layers (each section below is one of them):
 *  1. common definitions: COLL_API, error strings;
 *  2. the low-level ring API (coll_ring_*): set up the submission and
 *     completion rings of one /dev/kcoll context, fill SQEs, ring the
 *     doorbell, reap CQEs;
 *  3. (later) communicators and collective operations, built on layer 2.
 *
 * Conventions:
 *  - every function that can fail returns 0 (or a non-negative count) on
 *    success and a negative errno value on failure; errno itself is not
 *    meant to be inspected, although system calls may have changed it;
 *  - sizes and counts are unsigned; ring indices are free-running 32-bit
 *    counters that wrap around.
 *
 * Thread safety: a struct coll_ring is not internally locked. Use one ring
 * per thread, or serialise every call on a ring with an external lock.
 * Functions that take no ring (coll_strerror, coll_ring_query) are
 * thread-safe. Distinct rings are fully independent.
 *
 * Memory ordering (the userspace half of the protocol in linux/kcoll.h):
 *  - SQEs are written into slots the kernel has released (load-acquire of
 *    sq.head), then published with a store-release of sq.tail;
 *  - CQEs are read after a load-acquire of cq.tail, and their slots are
 *    handed back with a store-release of cq.head.
 */
#ifndef COLL_H
#define COLL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "linux/kcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* 1. Common definitions                                               */
/* ------------------------------------------------------------------ */

/* Marks the functions exported from libcoll.so. */
#ifndef COLL_API
#define COLL_API __attribute__((visibility("default")))
#endif

/* Version of the library API described by this header. */
#define COLL_VERSION_MAJOR	0
#define COLL_VERSION_MINOR	1

/* Environment variable that overrides the device path. */
#define COLL_DEVICE_ENV		"KCOLL_DEVICE"
/* Device path used when COLL_DEVICE_ENV is unset or empty. */
#define COLL_DEVICE_DEFAULT	"/dev/" KCOLL_DEV_NAME

/**
 * coll_strerror() - describe an error code.
 * @err: a negative errno value as returned by libcoll (a positive errno
 *	 value is accepted too and means the same)
 *
 * Returns a constant, NUL-terminated English description. Never NULL; an
 * unknown value yields "Unknown error". The string is static and read-only,
 * so the function is thread-safe and the result never changes.
 */
COLL_API const char *coll_strerror(int err);

/* ------------------------------------------------------------------ */
/* 2. Ring API                                                         */
/* ------------------------------------------------------------------ */

/*
 * Submission queue. The k* pointers point into the shared mapping; do not
 * write them except through the functions below.
 */
struct coll_ring_sq {
	uint32_t *khead;		/* kernel writes: next SQE to read */
	uint32_t *ktail;		/* we write: published tail */
	uint32_t *kflags;		/* kernel writes: KCOLL_SQ_F_* */
	struct kcoll_sqe *sqes;		/* the SQE array */
	uint32_t ring_mask;
	uint32_t ring_entries;
	uint32_t sqe_tail;		/* private: next slot to hand out */
	uint32_t pad;
};

/* Completion queue; same conventions as struct coll_ring_sq. */
struct coll_ring_cq {
	uint32_t *khead;		/* we write: next CQE to reap */
	uint32_t *ktail;		/* kernel writes: next CQE to fill */
	uint32_t *kflags;		/* we write: KCOLL_CQ_F_* */
	struct kcoll_cqe *cqes;		/* the CQE array */
	uint32_t ring_mask;
	uint32_t ring_entries;
};

/**
 * struct coll_ring - one /dev/kcoll context with its mapped rings.
 * @sq:		submission queue
 * @cq:		completion queue
 * @ring_ptr:	base of the shared mapping
 * @ring_sz:	length of the shared mapping
 * @ring_fd:	the open /dev/kcoll file, -1 when not set up
 * @flags:	KCOLL_SETUP_* flags the ring was created with
 * @features:	KCOLL_FEAT_* reported by the kernel
 *
 * The fields may be read (e.g. @ring_fd for poll(), @sq.ring_entries);
 * they must not be changed by the application.
 */
struct coll_ring {
	struct coll_ring_sq sq;
	struct coll_ring_cq cq;
	void *ring_ptr;
	size_t ring_sz;
	int ring_fd;
	unsigned int flags;
	unsigned int features;
	unsigned int resv;
};

/**
 * coll_ring_init() - open the device and set up a ring.
 * @r:		ring to initialise
 * @sq_entries:	requested SQ size (rounded up to a power of two by the
 *		kernel; see struct kcoll_setup)
 * @flags:	KCOLL_SETUP_* flags. KCOLL_SETUP_CQSIZE needs a CQ size and
 *		so cannot be used here: use coll_ring_init_params().
 *
 * Opens the device ($KCOLL_DEVICE, or /dev/kcoll), creates the rings with
 * KCOLL_IOC_SETUP and maps them. The CQ gets the kernel's default size.
 *
 * Returns 0, or a negative errno value: -ENOENT (no device: module not
 * loaded), -EACCES, -EINVAL (bad size or flags), -ENOMEM, -ENOTTY (the path
 * is not a kcoll device), -EPROTO (the kernel reported an unusable ring
 * geometry), or any error of open(), ioctl() and mmap(). On failure @r is
 * left zeroed with @r->ring_fd == -1, and no resource is held.
 */
COLL_API int coll_ring_init(struct coll_ring *r, unsigned int sq_entries,
			    unsigned int flags);

/**
 * coll_ring_init_params() - coll_ring_init() with full control.
 * @r:	ring to initialise
 * @p:	in: sq_entries, cq_entries and flags; every other field must be
 *	zero. out, on success only: filled in by the kernel (actual sizes,
 *	features, offsets, mmap geometry).
 *
 * Returns 0 or a negative errno value, as coll_ring_init().
 */
COLL_API int coll_ring_init_params(struct coll_ring *r, struct kcoll_setup *p);

/**
 * coll_ring_exit() - unmap the rings and close the device.
 * @r:	a ring set up by coll_ring_init*(), or one whose set-up failed
 *
 * Requests still in flight are cancelled or completed by the kernel; their
 * CQEs are lost. @r is zeroed with @r->ring_fd == -1 afterwards, so calling
 * this twice is harmless.
 */
COLL_API void coll_ring_exit(struct coll_ring *r);

/**
 * coll_ring_query() - ask the kernel what it supports (KCOLL_IOC_QUERY).
 * @fd:	an open /dev/kcoll file, or a negative value to open (and close)
 *	the device for this call only
 * @q:	out: the answer
 *
 * Returns 0, or a negative errno value: those of open() (e.g. -ENOENT when
 * the device does not exist) when @fd < 0, -ENOTTY if @fd is not a kcoll
 * device, -EFAULT, -EINVAL.
 */
COLL_API int coll_ring_query(int fd, struct kcoll_query *q);

/**
 * coll_ring_get_sqe() - take the next free SQ slot.
 * @r:	the ring
 *
 * Returns a pointer to a zeroed SQE that the caller fills in (see the
 * coll_ring_prep_* helpers), or NULL if the SQ is full: submit, then retry.
 * The SQE is handed to the kernel by the next coll_ring_submit*(); until
 * then it is only queued privately.
 */
COLL_API struct kcoll_sqe *coll_ring_get_sqe(struct coll_ring *r);

/**
 * coll_ring_submit() - hand every queued SQE to the kernel.
 * @r:	the ring
 *
 * Publishes the SQEs obtained from coll_ring_get_sqe() and rings the
 * doorbell for all SQEs the kernel has not consumed yet.
 *
 * Returns the number of SQEs consumed (0 if none was queued; possibly fewer
 * than queued, the rest stay queued for the next call), or a negative errno
 * value: -EBUSY (no CQ slot is free: reap CQEs and submit again),
 * -EOVERFLOW (the shared SQ indices are corrupt), -EBADFD (ring not set
 * up), -EINTR, or another ioctl() error. Each consumed SQE produces exactly
 * one CQE, including SQEs that the kernel rejects (their CQE carries the
 * error in res).
 */
COLL_API int coll_ring_submit(struct coll_ring *r);

/**
 * coll_ring_submit_and_wait() - submit, then wait for completions.
 * @r:		the ring
 * @wait_nr:	return once at least this many CQEs are ready (0: don't wait;
 *		at most cq.ring_entries)
 *
 * Returns as coll_ring_submit(). If SQEs were consumed, their number is
 * returned even when the wait was cut short (by a signal): check
 * coll_ring_cq_ready(). If none was consumed, a failed wait returns its
 * error (-EINTR). -EINVAL if @wait_nr exceeds the CQ size.
 */
COLL_API int coll_ring_submit_and_wait(struct coll_ring *r,
				       unsigned int wait_nr);

/**
 * coll_ring_enter() - raw doorbell (KCOLL_IOC_ENTER).
 * @r:		the ring
 * @to_submit:	SQEs to consume from the published SQ (at most
 *		sq.ring_entries)
 * @min_complete: with KCOLL_ENTER_GETEVENTS, wait until this many CQEs are
 *		ready
 * @flags:	KCOLL_ENTER_*
 * @timeout_ns:	with KCOLL_ENTER_GETEVENTS: wait limit, 0 = none
 *
 * Does not publish privately queued SQEs (coll_ring_submit() does).
 * Returns the ioctl result (SQEs consumed) or a negative errno value:
 * -ETIME (timeout), -EINTR, -EINVAL (bad arguments), -EBUSY, -EOVERFLOW,
 * -EBADFD.
 */
COLL_API int coll_ring_enter(struct coll_ring *r, unsigned int to_submit,
			     unsigned int min_complete, unsigned int flags,
			     uint64_t timeout_ns);

/**
 * coll_ring_peek_cqe() - look at the next CQE without waiting.
 * @r:		the ring
 * @cqe:	out: the CQE, valid until coll_ring_cqe_seen() or
 *		coll_ring_cq_advance() hands it back
 *
 * Returns 0 with *@cqe set, or -EAGAIN (with *@cqe = NULL) if none is ready.
 */
COLL_API int coll_ring_peek_cqe(struct coll_ring *r, struct kcoll_cqe **cqe);

/**
 * coll_ring_wait_cqe() - wait for the next CQE.
 * @r:		the ring
 * @cqe:	out: as coll_ring_peek_cqe()
 * @timeout_ns:	wait limit, 0 = no limit
 *
 * Returns 0 with *@cqe set, or a negative errno value (with *@cqe = NULL):
 * -ETIME if @timeout_ns passed, -EINTR if a signal arrived, or another
 * error of coll_ring_enter().
 */
COLL_API int coll_ring_wait_cqe(struct coll_ring *r, struct kcoll_cqe **cqe,
				uint64_t timeout_ns);

/**
 * coll_ring_cqe_seen() - hand back the CQE from peek/wait.
 * @r:		the ring
 * @cqe:	the CQE (ignored if NULL); must be the oldest unreaped one
 */
COLL_API void coll_ring_cqe_seen(struct coll_ring *r, struct kcoll_cqe *cqe);

/**
 * coll_ring_for_each_cqe() - visit every ready CQE without consuming it.
 * @r:		the ring
 * @head:	a uint32_t cursor
 * @cqe:	a struct kcoll_cqe * set to each CQE in turn
 *
 * Count the CQEs visited and hand them back with one
 * coll_ring_cq_advance() afterwards: one release store per batch instead of
 * one per CQE. Each step load-acquires cq.tail, pairing with the kernel's
 * store-release after it writes the CQEs.
 */
#define coll_ring_for_each_cqe(r, head, cqe)				\
	for ((head) = *(r)->cq.khead;					\
	     (head) != __atomic_load_n((r)->cq.ktail, __ATOMIC_ACQUIRE) &&	\
	     ((cqe) = &(r)->cq.cqes[(head) & (r)->cq.ring_mask], 1);	\
	     (head)++)

/**
 * coll_ring_cq_advance() - hand back the @n oldest CQEs at once.
 * @r:	the ring
 * @n:	number of CQEs read, at most coll_ring_cq_ready()
 */
COLL_API void coll_ring_cq_advance(struct coll_ring *r, unsigned int n);

/**
 * coll_ring_cq_ready() - number of CQEs ready to be reaped.
 * @r:	the ring
 *
 * Returns a value between 0 and cq.ring_entries.
 */
COLL_API unsigned int coll_ring_cq_ready(struct coll_ring *r);

/**
 * coll_ring_sq_space() - number of SQEs coll_ring_get_sqe() can still hand
 * out before the SQ is full.
 * @r:	the ring
 */
COLL_API unsigned int coll_ring_sq_space(struct coll_ring *r);

/**
 * coll_ring_register_eventfd() - signal @efd when CQEs are posted.
 * @r:		the ring
 * @efd:	an eventfd (see eventfd(2))
 *
 * Returns 0, or -EBUSY (one is already registered), -EBADF, -EINVAL (not
 * an eventfd), or another ioctl() error.
 */
COLL_API int coll_ring_register_eventfd(struct coll_ring *r, int efd);

/**
 * coll_ring_unregister_eventfd() - stop signalling the registered eventfd.
 * @r:	the ring
 *
 * Returns 0, or -ENOENT if none is registered, or another ioctl() error.
 */
COLL_API int coll_ring_unregister_eventfd(struct coll_ring *r);

/* SQE preparation helpers. @sqe should come zeroed from coll_ring_get_sqe();
 * every field an opcode does not use must stay zero. */

/* KCOLL_OP_NOP: completes at once with res 0. */
static inline void coll_ring_prep_nop(struct kcoll_sqe *sqe,
				      uint64_t user_data)
{
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = KCOLL_OP_NOP;
	sqe->user_data = user_data;
}

/* KCOLL_OP_DELAY: completes with res 0 after @usec microseconds (at most
 * KCOLL_DELAY_MAX_US; a larger value completes with -ERANGE). */
static inline void coll_ring_prep_delay(struct kcoll_sqe *sqe, uint64_t usec,
					uint64_t user_data)
{
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = KCOLL_OP_DELAY;
	sqe->count = usec;
	sqe->user_data = user_data;
}

/* ------------------------------------------------------------------ */
/* 3. Communicators and collectives: not yet defined.                  */
/* ------------------------------------------------------------------ */

#ifdef __cplusplus
}
#endif

#endif /* COLL_H */
