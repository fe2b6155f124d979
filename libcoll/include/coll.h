/* SPDX-License-Identifier: MIT */
/*
 * libcoll: userspace library for /dev/kcoll.
 *
 * Layers (each section below is one of them):
 *  1. common definitions: COLL_API, error strings;
 *  2. the low-level ring API (coll_ring_*): set up the submission and
 *     completion rings of one /dev/kcoll context, fill SQEs, ring the
 *     doorbell, reap CQEs;
 *  3. communicators and collective operations (coll_comm_*, coll_allreduce,
 *     ...), built on layer 2: a TCP bootstrap, then one ring per
 *     communicator.
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
 * thread-safe. Distinct rings are fully independent. Communicators (layer
 * 3) lock their own ring and are thread-safe.
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
#define COLL_VERSION_MINOR	5

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
 *
 * Most values get the C library's text. A few carry a kcoll meaning, which
 * the description names:
 *   EBADMSG	"Collective signature mismatch between ranks"
 *   ECONNRESET	"Peer connection lost (connection reset)"
 *   EACCES	"Permission denied, or a peer did not prove it knows the
 *		communicator key"
 *   ETIMEDOUT	"Connection timed out: a peer did not answer (or holds another
 *		communicator key: see its kernel log)"
 *   ECANCELED	"Operation canceled" (the communicator was destroyed,
 *		cancelled or revoked, here or by a peer)
 * See also coll_last_error() for the details of a communicator failure.
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
/* 3. Communicators and collectives                                    */
/* ------------------------------------------------------------------ */

/*
 * A communicator (coll_comm) is a group of nranks processes ("ranks"),
 * possibly on several nodes, that run collective operations together. It
 * is created in two steps, which can also be called separately:
 *
 *  1. bootstrap (coll_bootstrap): every rank connects over TCP to a
 *     bootstrap root, proves it knows the communicator's secret and sends
 *     the RDMA address of its node; the root answers with the table of all
 *     ranks. The root runs in a thread of the process that called
 *     coll_get_unique_id() (or of rank 0, see coll_comm_init_env());
 *  2. kernel (coll_comm_init_table): the rank opens its own /dev/kcoll
 *     context (a coll_ring), and KCOLL_IOC_COMM_CREATE connects it to every
 *     other rank over RDMA, using the secret as the communicator key.
 *
 * The usual sequence, as with NCCL:
 *
 *	coll_unique_id id;
 *	if (rank == 0)
 *		coll_get_unique_id(&id);	// starts the bootstrap root
 *	// ... hand id to every rank (MPI_Bcast, a file, an environment
 *	//     variable through coll_unique_id_to_string()) ...
 *	coll_comm_init_rank(&comm, nranks, &id, rank);
 *	coll_allreduce(buf, buf, count, COLL_DTYPE_FP32, COLL_REDOP_SUM, comm);
 *	coll_comm_destroy(comm);
 *
 * or, under a launcher, coll_comm_init_env(&comm) alone.
 *
 * Collectives follow NCCL's argument conventions (see enum kcoll_op in
 * linux/kcoll.h for the buffer sizes and the in-place forms). Every rank
 * of a communicator must issue the same sequence of collectives with the
 * same signature (operation, type, reduction, count, root); a mismatch
 * fails that operation on every rank with -EBADMSG. Point-to-point
 * coll_send()/coll_recv() are matched per peer in issue order.
 *
 * Thread safety: every function below may be called from any thread; a
 * communicator serialises access to its ring with a mutex, and completions
 * reaped by one thread are recorded in the requests of the others. Several
 * threads issuing collectives on one communicator must agree on an order
 * themselves (it is the order of the calls). coll_comm_destroy() must not
 * race with other calls on the same communicator.
 *
 * Errors: every function returns 0 (or a documented non-negative value) on
 * success and a negative errno value on failure; coll_strerror() describes
 * it, and coll_last_error() often says more (which rank, which address).
 * Errors of operations (the res of their CQE), as the kernel reports them:
 *   -EBADMSG	the ranks issued different collectives (signature mismatch)
 *   -ECONNRESET	a peer's connection was lost (the peer died, the link
 *		went down)
 *   -ETIMEDOUT	a peer stopped answering
 *   -ECANCELED	the communicator was destroyed, cancelled or revoked (here
 *		or by the peer the report names) while it was in flight
 *   -EFAULT	a buffer is not (entirely) mapped
 *   -EINVAL	an invalid argument the library could not check itself
 */

/*
 * Environment variables read by libcoll (see docs/LIBCOLL.md): rank and
 * size; the id (hex), or the root's host:port and the secret (32 hex
 * digits); Open MPI's rank and size; the node's RDMA address; the address
 * a root advertises; the bootstrap and RDMA connection timeouts; the SQ
 * size of each communicator's ring.
 */
#define COLL_ENV_RANK			"KCOLL_RANK"
#define COLL_ENV_NRANKS			"KCOLL_NRANKS"
#define COLL_ENV_UNIQUE_ID		"KCOLL_UNIQUE_ID"
#define COLL_ENV_ROOT			"KCOLL_ROOT"
#define COLL_ENV_SECRET			"KCOLL_SECRET"
#define COLL_ENV_OMPI_RANK		"OMPI_COMM_WORLD_RANK"
#define COLL_ENV_OMPI_SIZE		"OMPI_COMM_WORLD_SIZE"
#define COLL_ENV_IB_ADDR		"KCOLL_IB_ADDR"
#define COLL_ENV_BOOTSTRAP_ADDR		"KCOLL_BOOTSTRAP_ADDR"
#define COLL_ENV_BOOTSTRAP_TIMEOUT	"KCOLL_BOOTSTRAP_TIMEOUT_MS"
#define COLL_ENV_CONNECT_TIMEOUT	"KCOLL_CONNECT_TIMEOUT_MS"
#define COLL_ENV_RING_ENTRIES		"KCOLL_RING_ENTRIES"
/* 1: communicators are created with KCOLL_COMM_DEVMEM (they will move GPU
 * memory: coll_mem_register_dmabuf() with COLL_MEM_NO_CPU). */
#define COLL_ENV_DEVMEM			"KCOLL_DEVMEM"
/* 1: never load libcuda.so.1 (every pointer is then host memory). */
#define COLL_ENV_NO_CUDA		"KCOLL_NO_CUDA"

/* Default of KCOLL_BOOTSTRAP_TIMEOUT_MS. */
#define COLL_BOOTSTRAP_TIMEOUT_MS_DEFAULT	60000U
/* Default SQ size of a communicator's ring (the CQ is twice as large). */
#define COLL_RING_ENTRIES_DEFAULT		128U

/* Size of a coll_unique_id, and of its string form including the NUL. */
#define COLL_UNIQUE_ID_BYTES	128
#define COLL_UNIQUE_ID_STRLEN	(2 * COLL_UNIQUE_ID_BYTES + 1)

/**
 * coll_unique_id - names one communicator for its bootstrap.
 *
 * Opaque, fixed size, position independent (plain bytes, the same on
 * every architecture): copy it, send it, compare it with memcmp(). It holds
 * the bootstrap root's TCP address (IPv4, port), a random 128-bit secret
 * (also the communicator key the kernel checks between peers), and a
 * random non-zero 64-bit communicator uid. Whoever holds it can join the
 * communicator: hand it only to the ranks.
 */
typedef struct coll_unique_id {
	unsigned char internal[COLL_UNIQUE_ID_BYTES];
} coll_unique_id;

/* A communicator; see coll_comm_init_rank(). */
typedef struct coll_comm coll_comm;
/* A non-blocking operation in flight; see coll_test(). */
typedef struct coll_request coll_request;
/* A memory registration; see coll_mem_register(). */
typedef struct coll_mem coll_mem;

/* Element types; the values are the uapi's KCOLL_DTYPE_*. */
typedef enum coll_dtype {
	COLL_DTYPE_INT8		= KCOLL_DTYPE_INT8,
	COLL_DTYPE_UINT8	= KCOLL_DTYPE_UINT8,
	COLL_DTYPE_INT32	= KCOLL_DTYPE_INT32,
	COLL_DTYPE_UINT32	= KCOLL_DTYPE_UINT32,
	COLL_DTYPE_INT64	= KCOLL_DTYPE_INT64,
	COLL_DTYPE_UINT64	= KCOLL_DTYPE_UINT64,
	COLL_DTYPE_FP16		= KCOLL_DTYPE_FP16,	/* IEEE binary16 */
	COLL_DTYPE_BF16		= KCOLL_DTYPE_BF16,	/* bfloat16 */
	COLL_DTYPE_FP32		= KCOLL_DTYPE_FP32,
	COLL_DTYPE_FP64		= KCOLL_DTYPE_FP64,
	/* OCP 8-bit floating point (NVIDIA's __nv_fp8_e4m3, __nv_fp8_e5m2):
	 * E4M3 up to 448, no infinities; E5M2 up to 57344. */
	COLL_DTYPE_FP8_E4M3	= KCOLL_DTYPE_FP8_E4M3,
	COLL_DTYPE_FP8_E5M2	= KCOLL_DTYPE_FP8_E5M2,
} coll_dtype;

/* First and last valid coll_dtype, for loops over every type. */
#define COLL_DTYPE_FIRST	COLL_DTYPE_INT8
#define COLL_DTYPE_LAST		COLL_DTYPE_FP8_E5M2

/*
 * Reduction operators; the values are the uapi's KCOLL_REDOP_*. Integer
 * SUM and PROD wrap modulo 2^bits (signed types too). AVG (sum divided by
 * nranks) is valid for the floating-point types only. fp16, bf16 and fp8
 * are combined in fp32 and rounded back to nearest-even at each step; fp8
 * saturates there (OCP's saturation mode: a magnitude past the largest
 * finite value, an infinity included, becomes that value; a NaN 0x7f).
 */
typedef enum coll_redop {
	COLL_REDOP_SUM		= KCOLL_REDOP_SUM,
	COLL_REDOP_PROD		= KCOLL_REDOP_PROD,
	COLL_REDOP_MIN		= KCOLL_REDOP_MIN,
	COLL_REDOP_MAX		= KCOLL_REDOP_MAX,
	COLL_REDOP_AVG		= KCOLL_REDOP_AVG,
} coll_redop;

#define COLL_REDOP_FIRST	COLL_REDOP_SUM
#define COLL_REDOP_LAST		COLL_REDOP_AVG

/**
 * coll_dtype_size() - size of one element of @dtype in bytes.
 * Returns 1, 2, 4 or 8, or 0 for a value that is not a coll_dtype.
 */
COLL_API size_t coll_dtype_size(coll_dtype dtype);

/**
 * coll_dtype_name() - short name of @dtype: "int8", "uint8", "int32",
 * "uint32", "int64", "uint64", "fp16", "bf16", "fp32", "fp64", "fp8e4m3",
 * "fp8e5m2", or "?".
 * The string is static.
 */
COLL_API const char *coll_dtype_name(coll_dtype dtype);

/**
 * coll_redop_name() - short name of @op: "sum", "prod", "min", "max",
 * "avg", or "?". The string is static.
 */
COLL_API const char *coll_redop_name(coll_redop op);

/**
 * coll_redop_valid() - whether @op may reduce elements of @dtype.
 * Returns 1 if so, 0 if not (AVG on an integer type, out-of-range values).
 */
COLL_API int coll_redop_valid(coll_dtype dtype, coll_redop op);

/**
 * coll_last_error() - details of the last failure in this thread.
 *
 * After a libcoll function of this section failed, a one-line English
 * description of what went wrong (e.g. "bootstrap root 10.0.0.1:40321
 * refused rank 3: wrong secret"). Not cleared on success: look at it only
 * right after a failure. The string belongs to the calling thread and
 * stays valid until its next libcoll call. Never NULL.
 */
COLL_API const char *coll_last_error(void);

/* Unique ids ---------------------------------------------------------- */

/**
 * coll_get_unique_id() - create a communicator id and start its root.
 * @id:	out: the new id
 *
 * Draws a fresh secret and uid (getrandom), opens a listening TCP socket
 * on an ephemeral port of every local address, and starts the bootstrap
 * root in a detached thread of the calling process. The id advertises
 * $KCOLL_BOOTSTRAP_ADDR (an IPv4 address or host name) if set, else the
 * node's RDMA address (coll_node_addr()), else the first non-loopback
 * IPv4 address. Call it in one process, usually the one of rank 0, which
 * must then live until every rank has joined.
 *
 * The root serves exactly one communicator: it waits up to
 * $KCOLL_BOOTSTRAP_TIMEOUT_MS (60 s by default) for the first rank and as
 * long again after each rank joins, sends the table once all nranks have
 * joined, and exits (closing its socket). It refuses, with an error the
 * rank reports, a connection presenting a wrong secret (-EACCES), a rank
 * number that is taken (-EEXIST) or out of range (-ERANGE), an nranks that
 * differs from the first rank's (-EINVAL), and malformed messages
 * (-EPROTO). A refused connection does not disturb the others.
 *
 * Returns 0, or -errno: -EADDRNOTAVAIL (no usable address), or an error of
 * getrandom(), socket(), bind(), listen(), pthread_create().
 */
COLL_API int coll_get_unique_id(coll_unique_id *id);

/**
 * coll_unique_id_to_string() - hex form of @id (for environment variables,
 * command lines).
 * @id:		the id
 * @buf:	out: 2 * COLL_UNIQUE_ID_BYTES lower-case hex digits and a NUL
 * @len:	size of @buf, at least COLL_UNIQUE_ID_STRLEN
 *
 * Returns 0, or -EINVAL (a NULL pointer) or -ENOSPC (@len too small).
 */
COLL_API int coll_unique_id_to_string(const coll_unique_id *id, char *buf,
				      size_t len);

/**
 * coll_unique_id_from_string() - parse the output of
 * coll_unique_id_to_string() (upper-case digits are accepted too;
 * surrounding white space is not).
 *
 * Returns 0, or -EINVAL if @s is not the string form of a valid id.
 */
COLL_API int coll_unique_id_from_string(coll_unique_id *id, const char *s);

/**
 * coll_unique_id_from_root() - build an id from a known root address and
 * secret, without starting a root (a launcher-chosen rendezvous).
 * @id:		out: the id
 * @root:	"host:port" of the bootstrap root (IPv4 address or a name
 *		that resolves to one; port 1..65535)
 * @secret_hex:	the secret, exactly 32 hex digits (16 bytes)
 *
 * The uid of such an id is 0: the root draws a fresh one when it starts
 * and hands it to every rank with the table, so one fixed secret can name
 * many successive communicators. Somebody must serve the root at that
 * address: coll_comm_init_env() does it in rank 0.
 *
 * Returns 0, or -EINVAL (malformed arguments), or -EADDRNOTAVAIL (the
 * host does not resolve to an IPv4 address).
 */
COLL_API int coll_unique_id_from_root(coll_unique_id *id, const char *root,
				      const char *secret_hex);

/**
 * coll_unique_id_secret() - the secret inside @id, which is also the
 * communicator key given to KCOLL_IOC_COMM_CREATE.
 * @id:		the id
 * @key:	out: KCOLL_KEY_LEN bytes
 *
 * Returns 0, or -EINVAL if @id is not valid.
 */
COLL_API int coll_unique_id_secret(const coll_unique_id *id,
				   uint8_t key[KCOLL_KEY_LEN]);

/**
 * coll_env_unique_id() - rank, size and id from a launcher's environment.
 * @id:		out: the communicator id
 * @rank:	out: this process's rank
 * @nranks:	out: number of ranks
 *
 * The rank is $KCOLL_RANK, else $OMPI_COMM_WORLD_RANK; the size is
 * $KCOLL_NRANKS, else $OMPI_COMM_WORLD_SIZE. The id is
 * $KCOLL_UNIQUE_ID (coll_unique_id_to_string() form) if set; else
 * $KCOLL_ROOT ("host:port") with $KCOLL_SECRET (32 hex digits), see
 * coll_unique_id_from_root(); in that mode rank 0 serves the bootstrap
 * root itself, on every local address at that port, and this call starts
 * it (so rank 0 must run on the host named by KCOLL_ROOT).
 *
 * Returns 0, or -EINVAL (variables missing or malformed, rank out of
 * range), or an error of starting the root (-EADDRINUSE: the port is taken).
 */
COLL_API int coll_env_unique_id(coll_unique_id *id, int *rank, int *nranks);

/* Bootstrap ------------------------------------------------------------ */

/**
 * coll_node_addr() - the RDMA address of this node, as the kernel wants it.
 * @self:	out: addr = the IPv4-mapped IPv6 address (::ffff:a.b.c.d),
 *		port 0 (the node's default listen port), local_index 0
 *
 * $KCOLL_IB_ADDR (dotted IPv4) if set; else the IPv4 address of the
 * network device under the first RDMA device (by name) in
 * /sys/class/infiniband: the netdev named by ports/1/gid_attrs/ndevs/0,
 * else device/net/<netdev>, else the rxe "parent" attribute; else, as a
 * last resort, the first non-loopback IPv4 address of the host.
 *
 * Returns 0, or -EINVAL (a malformed KCOLL_IB_ADDR), -EADDRNOTAVAIL (no
 * IPv4 address found), or an error of getifaddrs().
 */
COLL_API int coll_node_addr(struct kcoll_rank_addr *self);

/**
 * coll_bootstrap() - step 1 of coll_comm_init_rank(): the TCP exchange.
 * @id:		the communicator id (root address, secret, uid)
 * @nranks:	number of ranks, 1 .. KCOLL_MAX_RANKS
 * @rank:	this rank, 0 .. nranks - 1
 * @self:	this rank's entry (usually from coll_node_addr(); local_index
 *		and resv are ignored)
 * @table:	out: @nranks entries, entry i for rank i, with local_index
 *		= the index of rank i among the ranks with the same address
 *		(in rank order)
 * @uid:	out, may be NULL: the communicator uid (the id's, or the one
 *		the root drew for an id without one)
 *
 * Connects to the root, retrying with backoff while it is not reachable
 * yet, presents the secret, and waits for the table; all of it within
 * $KCOLL_BOOTSTRAP_TIMEOUT_MS (default 60 s). Every rank receives the same
 * table.
 *
 * Returns 0, or -errno: -EINVAL (bad arguments or id), -ETIMEDOUT (root
 * unreachable, or not every rank joined in time), -ECONNRESET (the root
 * went away), the root's refusal (-EACCES wrong secret, -EEXIST rank
 * taken, -ERANGE rank out of range, -EINVAL nranks or uid mismatch,
 * -EPROTO), -ENOMEM. coll_last_error() tells which.
 */
COLL_API int coll_bootstrap(const coll_unique_id *id, int nranks, int rank,
			    const struct kcoll_rank_addr *self,
			    struct kcoll_rank_addr *table, uint64_t *uid);

/* Communicators ------------------------------------------------------- */

/**
 * coll_comm_init_rank() - create this rank's side of a communicator.
 * @out:	out: the communicator (NULL on failure)
 * @nranks:	number of ranks, 1 .. KCOLL_MAX_RANKS
 * @id:		the same id on every rank (see coll_get_unique_id())
 * @rank:	this rank, 0 .. nranks - 1, each exactly once
 *
 * coll_node_addr(), coll_bootstrap(), then coll_comm_init_table() with the
 * id's secret as the key. Blocks until every rank has done the same (or a
 * timeout: $KCOLL_BOOTSTRAP_TIMEOUT_MS for the bootstrap,
 * $KCOLL_CONNECT_TIMEOUT_MS, default the module's connect_timeout_ms, for
 * the RDMA connections).
 *
 * Returns 0, or -errno: those of the three steps.
 */
COLL_API int coll_comm_init_rank(coll_comm **out, int nranks,
				 const coll_unique_id *id, int rank);

/**
 * coll_comm_init_env() - coll_comm_init_rank() with rank, size and id
 * from the environment (see coll_env_unique_id()):
 *  - KCOLL_RANK, KCOLL_NRANKS, KCOLL_UNIQUE_ID: a launcher that ran
 *    coll_get_unique_id() (and keeps the root alive) passes the hex id;
 *  - KCOLL_RANK, KCOLL_NRANKS, KCOLL_ROOT=host:port, KCOLL_SECRET=hex:
 *    rank 0 serves the root at that port;
 *  - Open MPI: OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE stand in for
 *    KCOLL_RANK/KCOLL_NRANKS, with KCOLL_ROOT and KCOLL_SECRET exported to
 *    every rank (mpirun -x KCOLL_ROOT -x KCOLL_SECRET).
 *
 * Returns 0, or -errno as coll_env_unique_id() and coll_comm_init_rank().
 */
COLL_API int coll_comm_init_env(coll_comm **out);

/**
 * coll_comm_init_table() - step 2 of coll_comm_init_rank(): open a
 * /dev/kcoll context and create the communicator in the kernel.
 * @out:	out: the communicator (NULL on failure)
 * @nranks:	number of ranks
 * @rank:	this rank
 * @table:	@nranks entries (see coll_bootstrap()), the same on every rank
 * @uid:	communicator uid, the same on every rank, not 0
 * @key:	communicator key (KCOLL_KEY_LEN bytes), the same on every rank;
 *		peers presenting another key are refused
 *
 * Sets up a ring of $KCOLL_RING_ENTRIES SQEs (default 128) and calls
 * KCOLL_IOC_COMM_CREATE, which returns once this rank is connected to
 * every other one.
 *
 * Returns 0, or -errno: those of coll_ring_init() (-ENOENT: module not
 * loaded), -EOPNOTSUPP (the module has no communicators), and those of
 * KCOLL_IOC_COMM_CREATE: -ETIMEDOUT (a peer did not answer in time),
 * -EACCES (a peer refused our key), -EADDRINUSE (a peer is connected to
 * another process as our rank), -ESTALE (a peer refused our hellos as
 * older than one it saw from our rank), -EDQUOT, -EINVAL, -EAFNOSUPPORT,
 * -ENOMEM. The error's text (coll_last_error()) says what to look at.
 */
COLL_API int coll_comm_init_table(coll_comm **out, int nranks, int rank,
				  const struct kcoll_rank_addr *table,
				  uint64_t uid,
				  const uint8_t key[KCOLL_KEY_LEN]);

/**
 * coll_comm_destroy() - wait for every operation in flight, then destroy
 * the communicator and free it.
 * @comm:	the communicator (NULL is ignored)
 *
 * Submits whatever is still queued, waits for all operations issued on
 * @comm to complete, destroys the kernel communicator, releases its memory
 * registrations and closes its /dev/kcoll context. Request handles of
 * @comm that were not freed yet are freed and become invalid. @comm is
 * freed whatever the result.
 *
 * Returns 0, or the first error met (e.g. of KCOLL_IOC_COMM_DESTROY).
 */
COLL_API int coll_comm_destroy(coll_comm *comm);

/**
 * coll_comm_abort() - destroy the communicator without waiting: operations
 * in flight are cancelled in the kernel (coll_comm_cancel()) and complete
 * with -ECANCELED, then everything is released as by coll_comm_destroy().
 * Use it after an error (a dead peer, a timeout), or to give up. Like
 * coll_comm_destroy(), it must not race with other calls on @comm; from a
 * watchdog thread, call coll_comm_cancel() instead.
 */
COLL_API int coll_comm_abort(coll_comm *comm);

/**
 * coll_comm_cancel() - cancel everything in flight on @comm, now.
 *
 * Every operation in flight completes with -ECANCELED within bounded time
 * (the kernel tears the connections down; nothing waits for the peers),
 * and later operations on @comm fail with -ECANCELED at once. The peers'
 * operations that need this rank fail with -ECONNRESET, naming it in
 * their reports (what it had completed still completes there; to end
 * everything everywhere, coll_comm_revoke()).
 * Unlike every other call, this one may run while other threads use @comm,
 * for instance wait in coll_wait(): it is how a watchdog thread unblocks
 * them. @comm stays allocated; free it with coll_comm_destroy() or
 * coll_comm_abort(), then create a new communicator to carry on.
 *
 * Returns 0, or -errno (-ENOENT if the kernel communicator is gone).
 */
COLL_API int coll_comm_cancel(coll_comm *comm);

/**
 * coll_comm_revoke() - revoke @comm: every operation in flight on it, and
 * every later one, fails on every rank that can still be reached, so that
 * no rank is left waiting (ncclCommRevoke, MPIX_Comm_revoke).
 *
 * Here operations fail with -ECANCELED and the kernel tears down this
 * rank's connections, as coll_comm_cancel() does. Every peer reached takes
 * the revoke as its own: its operations of @comm, in flight or later, fail
 * with -ECANCELED, its report naming this rank (reason
 * COLL_REPORT_ABORTED), its connections close at once (nothing waits for
 * writes to ranks that are gone), and it passes the revoke on, so a rank
 * this one cannot reach hears of it from one that can. It returns once
 * the local part is done, in bounded time, whatever the peers do;
 * thread-safe like coll_comm_cancel(). (With a kernel module older than
 * KCOLL_FEAT_REVOKE it is coll_comm_cancel(): peers fail -ECONNRESET,
 * and only what needs this rank.) @comm stays allocated for
 * coll_comm_get_report(), coll_comm_shrink() and coll_comm_destroy().
 * Returns 0 or -errno.
 */
COLL_API int coll_comm_revoke(coll_comm *comm);

/* coll_comm_split()'s color for "no new communicator" (MPI_UNDEFINED). */
#define COLL_SPLIT_NOCOLOR	(-1)

/**
 * coll_comm_split() - collective over @comm: the ranks that pass the same
 * @color (>= 0) form a new communicator, ordered by @key, ties by their
 * rank in @comm (MPI_Comm_split, ncclCommSplit). A rank passing
 * COLL_SPLIT_NOCOLOR takes part and gets *@newcomm = NULL.
 *
 * No bootstrap: the colors and keys travel by an allgather on @comm, and
 * the new communicator's members, id and secret are derived from @comm's
 * (its rank table and key, which every member holds) and from how many
 * communicators @comm has made before, so every rank must make its
 * split/shrink calls in the same order (a call that fails after its
 * argument checks still counts). The new communicator connects
 * anew to its members (its own QPs; @comm's connections are not shared)
 * and names @comm as its parent, which kcollctl shows. @comm stays as it
 * was. Bounded in time: the allgather by @comm's operation timeout
 * (unless that is COLL_TIMEOUT_NONE), connecting by the connect timeout
 * (-ETIMEDOUT when a member never comes).
 *
 * Returns 0, or -EINVAL (a color below -1), or the allgather's or the
 * creation's error; *@newcomm is NULL on every error.
 */
COLL_API int coll_comm_split(coll_comm *comm, int color, int key,
			     coll_comm **newcomm);

/* coll_comm_shrink() flags. */
#define COLL_SHRINK_ABORT	(1U << 0)	/* revoke @comm first */

/**
 * coll_comm_shrink() - a new communicator of @comm's ranks less the
 * @nexclude ranks in @exclude (ncclCommShrink): called by the surviving
 * ranks alone, each with the same set (in any order); the excluded ranks
 * take no part and may be dead, exiting, or stuck.
 *
 * Survivors keep their order. The members, id and secret are derived as
 * coll_comm_split() derives them, with no message on @comm (which may be
 * broken), so survivors that disagree on the set end with -EACCES or
 * -ETIMEDOUT, never with a communicator of the wrong size. Connecting is
 * bounded by the connect timeout, also while other survivors die. With
 * COLL_SHRINK_ABORT, @comm is revoked first (coll_comm_revoke()): what
 * was in flight on it fails here and on its other ranks. Without it, @comm
 * must be idle (-EBUSY otherwise), as after a failure has completed
 * everything with an error. @comm stays allocated; destroy it after.
 *
 * The excluded ranks knew @comm's secret and so could compute the new
 * one: to lock a rank out for good, bootstrap a communicator with a fresh
 * coll_unique_id instead.
 *
 * Returns 0, -EINVAL (a rank out of range, listed twice, or this rank),
 * -EBUSY, or the creation's error.
 */
COLL_API int coll_comm_shrink(coll_comm *comm, const int *exclude,
			      int nexclude, unsigned int flags,
			      coll_comm **newcomm);

/**
 * coll_comm_create_group() - a new communicator of the @n ranks of @comm
 * listed in @ranks, collective over those ranks alone
 * (MPI_Comm_create_group): each of them passes the same list, in the same
 * order, and the same @tag; its rank in the new communicator is its
 * position in the list. The others take no part. No message on @comm:
 * the members, id and secret are derived as coll_comm_split() derives
 * them, from @comm's table and key, the tag and the list (not from how
 * many children @comm has made, which differs between ranks that take
 * part in different groups). Members that disagree on the list or the
 * tag end with -EACCES or -ETIMEDOUT, never with a communicator of the
 * wrong ranks. A (tag, list) is one communicator: while one made with it
 * lives, making it again on the same rank fails with -EEXIST; pick tags
 * that differ (a framework can agree on a random one through its store,
 * as the torch backend's new_group() does). The new communicator
 * connects anew and names @comm as its parent. Bounded by the connect
 * timeout.
 *
 * Returns 0, -EINVAL (a NULL argument, @n out of 1..size, a rank out of
 * range or listed twice, or this rank not listed), -EEXIST, or the
 * creation's error; *@newcomm is NULL on every error.
 */
COLL_API int coll_comm_create_group(coll_comm *comm, const int *ranks,
				    int n, uint64_t tag, coll_comm **newcomm);

/**
 * coll_comm_grow() - a new communicator of @nranks ranks (more than
 * @comm's): @comm's ranks keep their ranks and call this; the new ones
 * are @comm's size .. @nranks - 1 and call coll_comm_init_rank() with the
 * same @nranks and @id (ncclCommGrow). @id is a fresh coll_unique_id that
 * one rank of @comm made (coll_get_unique_id()) and handed to the others
 * and to the new ranks, as any bootstrap needs. On @comm's ranks the new
 * communicator names @comm as its parent (the new ranks never knew it);
 * @comm stays as it was. Bounded by the bootstrap's and the connect
 * timeouts.
 *
 * Returns 0, -EINVAL (@nranks not above @comm's size, or above
 * KCOLL_MAX_RANKS), or the bootstrap's or the creation's error.
 */
COLL_API int coll_comm_grow(coll_comm *comm, int nranks,
			    const coll_unique_id *id, coll_comm **newcomm);

/**
 * coll_comm_uid() - the id every rank of @comm shares (kcollctl shows it);
 * coll_comm_parent_uid() - the id of the communicator @comm was made from
 * by split, shrink or grow, or 0.
 */
COLL_API uint64_t coll_comm_uid(const coll_comm *comm);
COLL_API uint64_t coll_comm_parent_uid(const coll_comm *comm);

/* No timeout for the operations of a communicator (coll_comm_set_timeout). */
#define COLL_TIMEOUT_NONE	KCOLL_TIMEOUT_NONE

/**
 * coll_comm_set_timeout() - limit for the operations @comm submits from
 * now on, in milliseconds from submission: 0 (the default) uses the
 * kernel's op_timeout_ms (sysfs, 10 min unless changed); COLL_TIMEOUT_NONE
 * never times out. An operation past its limit completes with -ETIMEDOUT;
 * coll_last_error() and coll_comm_get_report() then name the ranks it was
 * waiting for, which the kernel disconnects: the communicator is failed,
 * destroy it and build a new one without them.
 */
COLL_API int coll_comm_set_timeout(coll_comm *comm, uint32_t timeout_ms);

/** coll_comm_get_timeout() - as set, or -EINVAL if @comm is NULL. */
COLL_API int64_t coll_comm_get_timeout(const coll_comm *comm);

/* Why an operation failed (coll_report.reason). */
enum coll_report_reason {
	COLL_REPORT_NONE	= KCOLL_REPORT_NONE,
	COLL_REPORT_TIMEOUT	= KCOLL_REPORT_TIMEOUT,	  /* see missing[] */
	COLL_REPORT_PEER_LOST	= KCOLL_REPORT_PEER_LOST, /* see peer */
	COLL_REPORT_MISMATCH	= KCOLL_REPORT_MISMATCH,  /* see peer */
	COLL_REPORT_ABORTED	= KCOLL_REPORT_ABORTED,
	COLL_REPORT_OTHER	= KCOLL_REPORT_OTHER,
	/* a stream-ordered operation's own CUDA stream never reached it, or
	 * never finished a reduction step */
	COLL_REPORT_GPU_STREAM	= KCOLL_REPORT_GPU_STREAM,
};

#define COLL_REPORT_MAX_MISSING	64

/**
 * struct coll_report - the kernel's account of the last failed operation
 * of a communicator (coll_comm_get_report()).
 * @error:	its result (-errno); 0 if no operation has failed
 * @reason:	enum coll_report_reason
 * @opcode:	enum kcoll_op (KCOLL_OP_ALLREDUCE, ...)
 * @peer:	the rank the reason names (the lost peer, the one whose
 *		signature differs, the first missing one), or -1
 * @seq:	the collective's sequence number on the communicator
 * @elapsed_ms:	from submission to failure
 * @nmissing:	ranks the operation was still waiting for (timeouts), of
 *		which the first COLL_REPORT_MAX_MISSING are in @missing,
 *		ascending
 */
typedef struct coll_report {
	int error;
	int reason;
	int opcode;
	int peer;
	uint64_t seq;
	uint64_t elapsed_ms;
	uint32_t nmissing;
	uint32_t missing[COLL_REPORT_MAX_MISSING];
} coll_report;

/**
 * coll_comm_get_report() - why the last failed operation of @comm failed.
 * coll_wait() and coll_test() already put its one-line form in
 * coll_last_error() when they return the failure. Thread-safe like
 * coll_comm_cancel(). Returns 0 (r->error 0: nothing failed) or -errno.
 */
COLL_API int coll_comm_get_report(coll_comm *comm, coll_report *r);

/**
 * coll_report_format() - @r as one English line into @buf (snprintf
 * semantics: returns the length it needed), e.g. "allreduce #17 failed
 * after 5003 ms: timeout (Connection timed out); rank 2 never arrived;
 * waiting for 1 rank(s): 2".
 */
COLL_API int coll_report_format(const coll_report *r, char *buf,
				size_t size);

/**
 * coll_comm_rank() - this process's rank in @comm, or -EINVAL if @comm is
 * NULL.
 */
COLL_API int coll_comm_rank(const coll_comm *comm);

/**
 * coll_comm_size() - number of ranks of @comm, or -EINVAL if @comm is NULL.
 */
COLL_API int coll_comm_size(const coll_comm *comm);

/**
 * coll_comm_set_priority() - priority of the operations @comm submits from
 * now on: 0 (the default, lowest) to COLL_PRIO_MAX (highest).
 *
 * On a device, the kernel holds back the chunks of an operation while one
 * of a higher priority (of any communicator or process) is running, so a
 * small urgent collective overtakes a large one at the next chunk boundary
 * (sysfs prio_sched switches this off, prio_aging_ms bounds the hold).
 * Every rank of @comm should use the same priority. Above sysfs
 * prio_max_unpriv (default 5) the operations need CAP_SYS_NICE, else they
 * complete with -EPERM.
 *
 * Returns 0, or -EINVAL (NULL @comm, @prio out of range).
 */
#define COLL_PRIO_MAX	KCOLL_PRIO_MAX
COLL_API int coll_comm_set_priority(coll_comm *comm, int prio);

/** coll_comm_get_priority() - as set, or -EINVAL if @comm is NULL. */
COLL_API int coll_comm_get_priority(const coll_comm *comm);

/**
 * coll_comm_fd() - the /dev/kcoll file descriptor of @comm, or -EINVAL.
 *
 * It becomes readable (poll/epoll) when a completion is ready: wait for
 * that in an event loop, then call coll_test() on the requests. Do not
 * read, close or ioctl it.
 */
COLL_API int coll_comm_fd(const coll_comm *comm);

/* Collectives ------------------------------------------------------------
 *
 * Each collective exists blocking (coll_X) and non-blocking (coll_iX, with
 * a trailing @req). Counts are in elements of @dtype, n = nranks:
 *  coll_allreduce       send[count] -> recv[count]
 *                       in place: send == recv
 *  coll_reduce          send[count] -> recv[count] at @root (recv ignored
 *                       elsewhere); in place: send == recv
 *  coll_broadcast       @root's send[count] -> recv[count] (send ignored
 *                       elsewhere); in place: send == recv
 *  coll_allgather       send[sendcount] -> recv[n*sendcount]
 *                       in place: send == recv + rank*sendcount
 *  coll_reduce_scatter  send[n*recvcount] -> recv[recvcount]
 *                       in place: recv == send + rank*recvcount
 *  coll_alltoall        send[n*count] -> recv[n*count], block j to rank j
 *                       in place: send == recv
 *  coll_gather          send[sendcount] -> recv[n*sendcount] at @root,
 *                       block j from rank j (recv ignored elsewhere);
 *                       in place at @root: send == recv + root*sendcount
 *                       (MPI_Gather; ncclGather)
 *  coll_scatter         @root's send[n*recvcount] -> recv[recvcount],
 *                       block j to rank j (send ignored elsewhere); in
 *                       place at @root: recv == send + root*recvcount
 *                       (MPI_Scatter; ncclScatter)
 *  coll_send/coll_recv  count elements to/from @peer, matched per peer in
 *                       issue order (not to oneself)
 *  coll_barrier         no data
 * Counts may be 0. Buffers are plain process memory; a buffer entirely
 * inside a registration (coll_mem_register()) uses it automatically.
 *
 * The blocking forms return the operation's result: 0 or -errno (see the
 * top of this section). Inside a group (coll_group_start()) they only
 * queue the operation and return 0; coll_group_end() waits for them and
 * returns their first error. The buffers must stay valid and untouched
 * until the operation completed.
 *
 * The non-blocking forms queue the operation, submit it (unless inside a
 * group) and return 0 with *@req set; the caller must eventually free the
 * request (coll_request_free()). They return -errno without a request if
 * the operation could not be issued: -EINVAL (bad type, reduction, root,
 * peer or NULL argument), -EOVERFLOW (the byte size does not fit), -ENOMEM,
 * or the communicator's error once it broke (e.g. -EBADFD).
 *
 * Issuing blocks (sleeping, not spinning) while the communicator already
 * has as many operations in flight as its CQ holds.
 */
COLL_API int coll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
			    coll_dtype dtype, coll_redop op, coll_comm *comm);
COLL_API int coll_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
			     coll_dtype dtype, coll_redop op, coll_comm *comm,
			     coll_request **req);

COLL_API int coll_reduce(const void *sendbuf, void *recvbuf, size_t count,
			 coll_dtype dtype, coll_redop op, int root,
			 coll_comm *comm);
COLL_API int coll_ireduce(const void *sendbuf, void *recvbuf, size_t count,
			  coll_dtype dtype, coll_redop op, int root,
			  coll_comm *comm, coll_request **req);

COLL_API int coll_broadcast(const void *sendbuf, void *recvbuf, size_t count,
			    coll_dtype dtype, int root, coll_comm *comm);
COLL_API int coll_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
			     coll_dtype dtype, int root, coll_comm *comm,
			     coll_request **req);

COLL_API int coll_allgather(const void *sendbuf, void *recvbuf,
			    size_t sendcount, coll_dtype dtype,
			    coll_comm *comm);
COLL_API int coll_iallgather(const void *sendbuf, void *recvbuf,
			     size_t sendcount, coll_dtype dtype,
			     coll_comm *comm, coll_request **req);

COLL_API int coll_reduce_scatter(const void *sendbuf, void *recvbuf,
				 size_t recvcount, coll_dtype dtype,
				 coll_redop op, coll_comm *comm);
COLL_API int coll_ireduce_scatter(const void *sendbuf, void *recvbuf,
				  size_t recvcount, coll_dtype dtype,
				  coll_redop op, coll_comm *comm,
				  coll_request **req);

COLL_API int coll_alltoall(const void *sendbuf, void *recvbuf, size_t count,
			   coll_dtype dtype, coll_comm *comm);
COLL_API int coll_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
			    coll_dtype dtype, coll_comm *comm,
			    coll_request **req);

/* Since libcoll 0.3 (symbol version KCOLL_0.7); -EOPNOTSUPP (named) where
 * the loaded module is older. */
COLL_API int coll_gather(const void *sendbuf, void *recvbuf,
			 size_t sendcount, coll_dtype dtype, int root,
			 coll_comm *comm);
COLL_API int coll_igather(const void *sendbuf, void *recvbuf,
			  size_t sendcount, coll_dtype dtype, int root,
			  coll_comm *comm, coll_request **req);
COLL_API int coll_scatter(const void *sendbuf, void *recvbuf,
			  size_t recvcount, coll_dtype dtype, int root,
			  coll_comm *comm);
COLL_API int coll_iscatter(const void *sendbuf, void *recvbuf,
			   size_t recvcount, coll_dtype dtype, int root,
			   coll_comm *comm, coll_request **req);

/*
 * The v-variants (since libcoll 0.5, symbol version KCOLL_0.9; MPI's
 * definitions, counts and displacements in elements of @dtype, one entry
 * per rank; -EOPNOTSUPP, named, where the loaded module is older):
 *  coll_allgatherv      send[recvcounts[rank]] -> rank j's block at
 *                       recv + displs[j] (recvcounts[j]) on every rank;
 *                       in place: send == recv + displs[rank]
 *                       (MPI_Allgatherv; NCCLX allgatherv)
 *  coll_reduce_scatterv send[sum of recvcounts] -> recv[recvcounts[rank]]:
 *                       block j, at the sum of recvcounts[0..j) of send,
 *                       reduced over every rank, lands at rank j
 *                       (MPI_Reduce_scatter)
 *  coll_alltoallv       send + sdispls[j] (sendcounts[j]) to rank j, rank
 *                       j's block to recv + rdispls[j] (recvcounts[j])
 *                       (MPI_Alltoallv; what mixture-of-experts layers
 *                       exchange tokens with)
 * Counts may differ per rank and be zero; every count and displacement is
 * at most 2^48 (-ERANGE). recvcounts of allgatherv and reduce_scatterv
 * must be the same on every rank, and alltoallv's sendcounts[j] on rank i
 * must equal recvcounts[i] on rank j: a mismatch fails the operation on
 * every rank with -EBADMSG (the kernel compares them), never corrupts.
 * Blocks must not overlap in a receive buffer, and send and receive
 * buffers must not overlap but for allgatherv in place (-EINVAL). The
 * arrays are copied before the call returns (non-blocking and grouped
 * forms too); the buffers, as always, must stay until completion.
 * Reductions of GPU memory are not supported yet (-EOPNOTSUPP).
 */
COLL_API int coll_allgatherv(const void *sendbuf, void *recvbuf,
			     const size_t *recvcounts, const size_t *displs,
			     coll_dtype dtype, coll_comm *comm);
COLL_API int coll_iallgatherv(const void *sendbuf, void *recvbuf,
			      const size_t *recvcounts, const size_t *displs,
			      coll_dtype dtype, coll_comm *comm,
			      coll_request **req);
COLL_API int coll_reduce_scatterv(const void *sendbuf, void *recvbuf,
				  const size_t *recvcounts, coll_dtype dtype,
				  coll_redop op, coll_comm *comm);
COLL_API int coll_ireduce_scatterv(const void *sendbuf, void *recvbuf,
				   const size_t *recvcounts, coll_dtype dtype,
				   coll_redop op, coll_comm *comm,
				   coll_request **req);
COLL_API int coll_alltoallv(const void *sendbuf, const size_t *sendcounts,
			    const size_t *sdispls, void *recvbuf,
			    const size_t *recvcounts, const size_t *rdispls,
			    coll_dtype dtype, coll_comm *comm);
COLL_API int coll_ialltoallv(const void *sendbuf, const size_t *sendcounts,
			     const size_t *sdispls, void *recvbuf,
			     const size_t *recvcounts, const size_t *rdispls,
			     coll_dtype dtype, coll_comm *comm,
			     coll_request **req);

/*
 * Point to point. A blocking coll_send() returns once the data left (the
 * kernel decides when that is; it may wait for the matching receive): to
 * exchange data both ways, use the non-blocking forms or a group.
 */
COLL_API int coll_send(const void *sendbuf, size_t count, coll_dtype dtype,
		       int peer, coll_comm *comm);
COLL_API int coll_isend(const void *sendbuf, size_t count, coll_dtype dtype,
			int peer, coll_comm *comm, coll_request **req);
COLL_API int coll_recv(void *recvbuf, size_t count, coll_dtype dtype,
		       int peer, coll_comm *comm);
COLL_API int coll_irecv(void *recvbuf, size_t count, coll_dtype dtype,
			int peer, coll_comm *comm, coll_request **req);

COLL_API int coll_barrier(coll_comm *comm);
COLL_API int coll_ibarrier(coll_comm *comm, coll_request **req);

/*
 * Stream-ordered collectives (CUDA), in NCCL's spirit: the operation is
 * enqueued on @stream (a CUstream / cudaStream_t; NULL is the legacy
 * default stream) and these return once it is enqueued. It starts when the
 * stream gets there (work enqueued earlier on @stream is finished and
 * visible), and work enqueued later on @stream sees its result. The GPU
 * reduces (kcoll's CUDA kernels, embedded in libcoll); the kernel module
 * moves the data with the NIC; no thread of the process and no SM spins
 * while it waits. Buffers are device pointers (any cudaMalloc'ed memory,
 * aligned to the element size), registered on first use; a reduction's
 * given plain host memory, which its kernels cannot reach, is -EINVAL.
 *
 * Requirements: libcuda.so.1 with 64-bit stream memory operations, a
 * current CUDA context, a GPU that orders the NIC's writes before its
 * own work or can flush them, a communicator created with KCOLL_DEVMEM=1
 * whose peers are all on other nodes, a module with
 * KCOLL_FEAT_GPU_SLOTS, and a libcoll built with nvcc. Otherwise
 * -ENOTSUP (or -EOPNOTSUPP) at once, with coll_last_error() saying
 * which.
 *
 * Failures after enqueueing (a peer lost, a timeout, an abort) do not
 * hang the stream: the kernel releases every wait, the operation's
 * kernels leave memory alone, and coll_comm_async_error() returns the
 * first such error (the report is in coll_comm_get_report()). Destroying
 * the communicator while a stream has not reached its operations waits
 * for them (or for their timeout): synchronize the streams first, or
 * abort. Inside a group (coll_group_start()) each call enqueues its
 * operation's start at once, and its stream waits for its end only at
 * coll_group_end(): see there.
 *
 * The blocking and non-blocking forms above also take device pointers:
 * a reduction of GPU memory then runs like these on a stream of libcoll's
 * own, and completes as usual.
 */
COLL_API int coll_allreduce_stream(const void *sendbuf, void *recvbuf,
				   size_t count, coll_dtype dtype,
				   coll_redop op, coll_comm *comm,
				   void *stream);
COLL_API int coll_reduce_stream(const void *sendbuf, void *recvbuf,
				size_t count, coll_dtype dtype, coll_redop op,
				int root, coll_comm *comm, void *stream);
COLL_API int coll_broadcast_stream(const void *sendbuf, void *recvbuf,
				   size_t count, coll_dtype dtype, int root,
				   coll_comm *comm, void *stream);
COLL_API int coll_allgather_stream(const void *sendbuf, void *recvbuf,
				   size_t sendcount, coll_dtype dtype,
				   coll_comm *comm, void *stream);
COLL_API int coll_reduce_scatter_stream(const void *sendbuf, void *recvbuf,
					size_t recvcount, coll_dtype dtype,
					coll_redop op, coll_comm *comm,
					void *stream);
COLL_API int coll_alltoall_stream(const void *sendbuf, void *recvbuf,
				  size_t count, coll_dtype dtype,
				  coll_comm *comm, void *stream);
COLL_API int coll_gather_stream(const void *sendbuf, void *recvbuf,
				size_t sendcount, coll_dtype dtype, int root,
				coll_comm *comm, void *stream);
COLL_API int coll_scatter_stream(const void *sendbuf, void *recvbuf,
				 size_t recvcount, coll_dtype dtype, int root,
				 coll_comm *comm, void *stream);
COLL_API int coll_barrier_stream(coll_comm *comm, void *stream);
/*
 * The v-variants on @stream: the arrays are read before the call returns,
 * as in the forms above; the blocking and non-blocking forms also take
 * device pointers (coll_reduce_scatterv() then reduces on the GPU).
 * Needs a module with KCOLL_FEAT_GPU_VEC (-EOPNOTSUPP otherwise).
 */
COLL_API int coll_allgatherv_stream(const void *sendbuf, void *recvbuf,
				    const size_t *recvcounts,
				    const size_t *displs, coll_dtype dtype,
				    coll_comm *comm, void *stream);
COLL_API int coll_reduce_scatterv_stream(const void *sendbuf, void *recvbuf,
					 const size_t *recvcounts,
					 coll_dtype dtype, coll_redop op,
					 coll_comm *comm, void *stream);
COLL_API int coll_alltoallv_stream(const void *sendbuf,
				   const size_t *sendcounts,
				   const size_t *sdispls, void *recvbuf,
				   const size_t *recvcounts,
				   const size_t *rdispls, coll_dtype dtype,
				   coll_comm *comm, void *stream);
/*
 * Point-to-point on @stream (ncclSend/ncclRecv): the message's buffer is
 * read (sent) or written (received) once the stream gets there, and work
 * enqueued later on @stream sees it done. They are matched with the
 * peer's receives and sends in order, as the plain forms are, and may
 * end before stream-ordered operations enqueued earlier on other
 * streams. Outside a group, two ranks that each send to the other first
 * on one stream wait for each other for ever (a send waits for its
 * receive to be posted): group them (as with ncclGroupStart()), order
 * them (the lower rank sends first), or use two streams. Needs a module
 * with KCOLL_FEAT_GPU_SLOTS (-EOPNOTSUPP otherwise), as every
 * stream-ordered operation does.
 */
COLL_API int coll_send_stream(const void *sendbuf, size_t count,
			      coll_dtype dtype, int peer, coll_comm *comm,
			      void *stream);
COLL_API int coll_recv_stream(void *recvbuf, size_t count, coll_dtype dtype,
			      int peer, coll_comm *comm, void *stream);
/* 0, or the first error of a stream-ordered operation of @comm. */
COLL_API int coll_comm_async_error(coll_comm *comm);

/* Requests ------------------------------------------------------------ */

/**
 * coll_test() - has the operation of @req completed?
 * @req:	a request from a coll_i* call
 * @done:	out: 1 if it completed, else 0
 *
 * Never sleeps: reaps the completions that are ready (recording them in
 * their requests) and looks at @req. Inside a group the operation may not
 * be submitted yet, and coll_test() does not submit it.
 *
 * Returns the operation's result (0 or -errno) with *@done = 1, or 0 with
 * *@done = 0 while it is in flight; -EINVAL for NULL arguments.
 */
COLL_API int coll_test(coll_request *req, int *done);

/**
 * coll_wait() - wait until the operation of @req has completed.
 * @req:	a request from a coll_i* call
 *
 * Submits what is still queued on the communicator (even inside a group),
 * then sleeps in the kernel (KCOLL_IOC_ENTER with KCOLL_ENTER_GETEVENTS)
 * until the completion arrives; never spins. Signals do not cut the wait
 * short. Completions of other requests reaped meanwhile are recorded in
 * them. Several threads may wait at once: one sleeps in the kernel, the
 * others on a condition variable.
 *
 * Returns the operation's result: 0 or -errno (-EBADMSG, -ECONNRESET, ...,
 * see the top of this section); -EINVAL for NULL; or the communicator's
 * error if its ring broke.
 */
COLL_API int coll_wait(coll_request *req);

/**
 * coll_request_free() - release @req (NULL is ignored). If the operation
 * is still in flight it goes on and the request is released when it
 * completes; its buffers must stay valid until then.
 */
COLL_API void coll_request_free(coll_request *req);

/* Groups -------------------------------------------------------------- */

/**
 * coll_group_start() - open a group (groups nest; the count is per
 * thread).
 *
 * Until the matching outermost coll_group_end(), collectives called by
 * this thread are only queued in their communicator's SQ: blocking calls
 * return 0 at once, and non-blocking ones return their request without
 * submitting. This batches many operations into one KCOLL_IOC_ENTER per
 * communicator, and lets one thread post sends and receives to several
 * peers without deadlocking on their order. If a communicator's SQ (or
 * its CQ reservation) fills up inside a group, what is queued is
 * submitted at once (and, if the CQ is full, the call waits for some
 * operation to complete), and queuing goes on: the batch is split.
 *
 * Stream-ordered calls (coll_*_stream()) in a group enqueue their
 * operation's start (and a reduction's steps) on their stream at once,
 * in call order, and their end waits at coll_group_end(): the group's
 * operations on one stream run together. The 65th stream-ordered call on
 * a communicator waits until the operation 64 calls earlier has ended
 * (each rank's first 64 must be able to complete among themselves); one
 * that would have to grow the communicator's GPU scratch while others
 * are in flight fails with -EBUSY. The plain forms given device pointers
 * to reduce are refused in a group (-ENOTSUP): use their _stream forms.
 *
 * Returns 0.
 */
COLL_API int coll_group_start(void);

/**
 * coll_group_end() - close a group.
 *
 * When the outermost group closes: submits everything queued, with one
 * KCOLL_IOC_ENTER per communicator used in the group, enqueues the end
 * waits of the group's stream-ordered operations on their streams, then
 * waits for the blocking calls made inside the group. Non-blocking
 * requests of the group are not waited for.
 *
 * Returns 0, the first error among those (a submission, an end wait the
 * CUDA driver refused: that stream then does not wait for its operation,
 * a blocking call), or -EINVAL if no group is open on this thread.
 */
COLL_API int coll_group_end(void);

/* Memory registration ------------------------------------------------ */

/**
 * coll_mem_register() - pin and register a buffer with @comm's RDMA device.
 * @comm:	the communicator
 * @addr:	start of the buffer
 * @len:	its length in bytes, > 0
 * @out:	out: the registration
 *
 * KCOLL_IOC_REG_MEM. Operations of @comm whose send or receive buffer
 * lies entirely inside a registration then name it in their SQE (send_mr,
 * recv_mr), which spares the kernel pinning and registering it per
 * operation. Counts against RLIMIT_MEMLOCK unless CAP_IPC_LOCK.
 *
 * GPU memory: libcoll loads libcuda.so.1 at run time (never at link time;
 * $KCOLL_NO_CUDA=1 keeps it from trying). When the driver calls @addr
 * device memory, the pages around [@addr, @addr + @len) are registered
 * through their dma-buf (cuMemGetHandleForAddressRange) with
 * COLL_MEM_NO_CPU, as coll_mem_register_dmabuf() would. An operation on
 * GPU memory that is in no registration registers its whole allocation
 * first, once (it stays until coll_comm_destroy()).
 *
 * Returns 0, or -EINVAL, -ENOMEM (-EPERM/-ENOMEM also when over
 * RLIMIT_MEMLOCK), -EFAULT, -ENOTSUP (GPU memory the driver cannot export,
 * or an address that is not mapped in this process while libcuda.so.1
 * cannot be loaded: coll_last_error() says which), or another ioctl()
 * error.
 */
COLL_API int coll_mem_register(coll_comm *comm, void *addr, size_t len,
			       coll_mem **out);

/* coll_mem_register_dmabuf() flags */
#define COLL_MEM_NO_CPU		KCOLL_REG_NO_CPU

/**
 * coll_mem_register_dmabuf() - import a dma-buf (GPU memory) and register
 * it with @comm's RDMA device.
 * @comm:	the communicator
 * @fd:		the dma-buf, e.g. from cuMemGetHandleForAddressRange(...,
 *		CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, ...), a DRM PRIME export,
 *		udmabuf or a dma-heap; it may be closed once this returns
 * @offset:	where in the dma-buf the registration starts
 * @len:	its length in bytes, > 0
 * @addr:	the address operations name for byte @offset: a CUDA device
 *		pointer, or wherever the buffer is mapped; never dereferenced
 *		by libcoll or the kernel. An operation whose buffer lies inside
 *		[@addr, @addr + @len) uses this registration, as with
 *		coll_mem_register().
 * @flags:	COLL_MEM_NO_CPU: no CPU may touch the bytes (GPU memory).
 *		Operations on them then move data with the NIC only; they need
 *		a communicator created with $KCOLL_DEVMEM=1, and those that
 *		would need the CPU on such memory (reductions and local copies
 *		until the device reducer exists) fail with -EOPNOTSUPP.
 * @out:	out: the registration; coll_mem_deregister() undoes it
 *
 * KCOLL_IOC_REG_MEM with KCOLL_REG_DMABUF. Imported bytes count against the
 * module's per-user limit user_max_dmabuf_mb.
 *
 * Returns 0, or -EINVAL (bad argument, not a dma-buf, range outside it),
 * -EBADF (not an open fd), -EOPNOTSUPP (the RDMA device moves data with the
 * CPU — rxe, siw — and the buffer has no CPU mapping: device memory needs
 * a real NIC), -EDQUOT (over user_max_dmabuf_mb), or the exporter's error.
 */
COLL_API int coll_mem_register_dmabuf(coll_comm *comm, int fd, uint64_t offset,
				      size_t len, const void *addr,
				      unsigned int flags, coll_mem **out);

/**
 * coll_mem_deregister() - undo coll_mem_register() (or
 * coll_mem_register_dmabuf()) and free @mem.
 *
 * Returns 0, -EINVAL (NULL, or @mem does not belong to @comm), or -EBUSY
 * while an operation in flight uses it (@mem then stays registered).
 * coll_comm_destroy() releases the registrations that are left.
 */
COLL_API int coll_mem_deregister(coll_comm *comm, coll_mem *mem);

#ifdef __cplusplus
}
#endif

#endif /* COLL_H */
