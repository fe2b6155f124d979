/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * kcoll: kernel-scheduled collective communication.
 *
 * This is the stable user/kernel ABI of /dev/kcoll. Rules:
 *  - only fixed-width types; user pointers travel as __u64;
 *  - structures only grow at the end; every reserved field and every unknown
 *    flag bit must be zero, and the kernel rejects them with -EINVAL, so an
 *    old kernel refuses what it does not understand;
 *  - ring positions are reported by KCOLL_IOC_SETUP as offsets into the single
 *    mapping; applications add them to the mmap base and never hard-code them.
 *
 * Ring protocol (see docs/DESIGN.md for the full discussion):
 *  - indices are free-running __u32 counters, masked with (entries - 1);
 *  - the application writes SQEs, then store-releases sq.tail; the kernel
 *    load-acquires sq.tail, copies each SQE once, and store-releases sq.head;
 *  - the kernel writes CQEs, then store-releases cq.tail; the application
 *    load-acquires cq.tail, reads CQEs, and store-releases cq.head;
 *  - the kernel never accepts a descriptor without a reserved CQ slot, so the
 *    CQ cannot overflow: a submission that would exceed it fails with -EBUSY.
 */
#ifndef _UAPI_LINUX_KCOLL_H
#define _UAPI_LINUX_KCOLL_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define KCOLL_ABI_VERSION	1
#define KCOLL_DEV_NAME		"kcoll"

/* ------------------------------------------------------------------ */
/* Descriptors                                                         */
/* ------------------------------------------------------------------ */

/** enum kcoll_op - SQE opcodes. Unknown values complete with -EINVAL. */
enum kcoll_op {
	/* Completes at once with res 0; user_data echoed. */
	KCOLL_OP_NOP		= 0,
	/*
	 * Completes asynchronously from kernel (workqueue) context after
	 * @count microseconds (at most KCOLL_DELAY_MAX_US), with res 0.
	 * Exercises the asynchronous completion and wake-up path.
	 */
	KCOLL_OP_DELAY		= 1,
	/*
	 * Collectives on a communicator (comm_id from KCOLL_IOC_COMM_CREATE).
	 * Buffer sizes in elements of dtype, with n = nranks (NCCL's
	 * conventions); count may be 0. send_addr/recv_addr are user
	 * addresses; send_mr/recv_mr are 0 or a KCOLL_IOC_REG_MEM handle whose
	 * range holds the buffer. In place: the addresses given below.
	 *  ALLREDUCE       send[count] -> recv[count]; in place: send == recv
	 *  REDUCE          send[count] -> recv[count] at root (peer);
	 *                  recv_addr is ignored on the other ranks
	 *  BROADCAST       root's send[count] -> recv[count] on every rank;
	 *                  send_addr is ignored on the other ranks
	 *  ALLGATHER       send[count] -> recv[n*count];
	 *                  in place: send == recv + rank*count
	 *  REDUCE_SCATTER  send[n*count] -> recv[count];
	 *                  in place: recv == send + rank*count
	 *  ALLTOALL        send[n*count] -> recv[n*count] (block j to rank j);
	 *                  in place: send == recv
	 *  SEND / RECV     count elements to / from rank peer; matched with
	 *                  the peer's RECV / SEND in submission order per
	 *                  (communicator, peer), independently of collectives
	 *  BARRIER         no buffers, dtype NONE, count 0
	 *  GATHER          send[count] on every rank -> recv[n*count] at root
	 *                  (peer), block j from rank j; recv_addr is ignored
	 *                  on the other ranks; in place at the root:
	 *                  send == recv + root*count
	 *  SCATTER         root's (peer's) send[n*count] -> recv[count] on
	 *                  every rank, block j to rank j; send_addr is ignored
	 *                  on the other ranks; in place at the root:
	 *                  recv == send + root*count
	 *  ALLGATHERV, REDUCE_SCATTERV, ALLTOALLV: the v-variants (MPI's
	 *                  definitions): per-rank counts and displacements in
	 *                  a table of __u64 in user memory at vec_addr, which
	 *                  the kernel copies at submission (struct
	 *                  kcoll_vec documents its layout); counts may differ
	 *                  per rank and be zero
	 * Collectives on one communicator start and complete in submission
	 * order (those whose buffers do not overlap may run at once: sysfs
	 * colls_in_flight); every rank must submit the same sequence. Each operation's signature (opcode,
	 * dtype, redop, count, root) is checked against every other rank's: a
	 * mismatch completes the operation with -EBADMSG on every rank.
	 */
	KCOLL_OP_ALLREDUCE	= 2,
	KCOLL_OP_REDUCE		= 3,
	KCOLL_OP_BROADCAST	= 4,
	KCOLL_OP_ALLGATHER	= 5,
	KCOLL_OP_REDUCE_SCATTER	= 6,
	KCOLL_OP_ALLTOALL	= 7,
	KCOLL_OP_SEND		= 8,
	KCOLL_OP_RECV		= 9,
	KCOLL_OP_BARRIER	= 10,
	KCOLL_OP_GATHER		= 11,
	KCOLL_OP_SCATTER	= 12,
	KCOLL_OP_ALLGATHERV	= 13,
	KCOLL_OP_REDUCE_SCATTERV = 14,
	KCOLL_OP_ALLTOALLV	= 15,
	KCOLL_OP_LAST		/* not an opcode: number of opcodes */
};

#define KCOLL_DELAY_MAX_US	(60U * 1000 * 1000)

/** enum kcoll_dtype - element types of collective buffers. */
enum kcoll_dtype {
	KCOLL_DTYPE_NONE	= 0,	/* for ops that carry no typed data */
	KCOLL_DTYPE_INT8	= 1,
	KCOLL_DTYPE_UINT8	= 2,
	KCOLL_DTYPE_INT32	= 3,
	KCOLL_DTYPE_UINT32	= 4,
	KCOLL_DTYPE_INT64	= 5,
	KCOLL_DTYPE_UINT64	= 6,
	KCOLL_DTYPE_FP16	= 7,
	KCOLL_DTYPE_BF16	= 8,
	KCOLL_DTYPE_FP32	= 9,
	KCOLL_DTYPE_FP64	= 10,
	/* OCP 8-bit floating point: reduced through fp32, rounded back to
	 * nearest even, saturating at the largest finite value. */
	KCOLL_DTYPE_FP8_E4M3	= 11,
	KCOLL_DTYPE_FP8_E5M2	= 12,
	KCOLL_DTYPE_LAST
};

/** enum kcoll_redop - reduction operators. */
enum kcoll_redop {
	KCOLL_REDOP_NONE	= 0,	/* for ops that do not reduce */
	KCOLL_REDOP_SUM		= 1,
	KCOLL_REDOP_PROD	= 2,
	KCOLL_REDOP_MIN		= 3,
	KCOLL_REDOP_MAX		= 4,
	KCOLL_REDOP_AVG		= 5,	/* floating-point types only */
	KCOLL_REDOP_LAST
};

/* Priorities: 0 is the lowest, KCOLL_PRIO_MAX the highest. */
#define KCOLL_PRIO_MAX		7

/*
 * SQE flags; any other set bit is -EINVAL.
 * KCOLL_SQE_F_GPU: a stream-ordered collective (KCOLL_IOC_GPU_SETUP): @resv
 * holds its ticket (nonzero), the GPU reduces and the kernel waits for the
 * stream's values on the communicator's doorbell page (struct
 * kcoll_gpu_bell). Collectives only.
 */
#define KCOLL_SQE_F_GPU		(1U << 0)
#define KCOLL_SQE_F_ALL		KCOLL_SQE_F_GPU

/**
 * struct kcoll_sqe - submission queue entry, 64 bytes.
 * @opcode:	enum kcoll_op
 * @dtype:	enum kcoll_dtype (zero for ops without typed data)
 * @redop:	enum kcoll_redop (zero for ops that do not reduce)
 * @prio:	0..KCOLL_PRIO_MAX
 * @flags:	KCOLL_SQE_F_*
 * @user_data:	opaque, echoed in the CQE
 * @comm_id:	communicator handle (zero for ops without one)
 * @peer:	root rank for rooted collectives, peer rank for send/recv
 * @count:	element count (KCOLL_OP_DELAY: microseconds)
 * @vec_addr:	the v-variants, in @count's place: user address of their
 *		count table (struct kcoll_vec)
 * @send_addr:	send buffer: user address (also with @send_mr)
 * @recv_addr:	receive buffer: user address (also with @recv_mr)
 * @send_mr:	REG_MEM handle whose range holds the send buffer; 0: the
 *		buffer is pinned and registered for this operation only
 * @recv_mr:	registration handle of the receive buffer, 0 = plain address
 * @timeout_ms:	collectives and send/recv: give up after this many
 *		milliseconds from submission with -ETIMEDOUT (and a report, see
 *		KCOLL_IOC_COMM_REPORT); 0: the sysfs op_timeout_ms default;
 *		KCOLL_TIMEOUT_NONE: never. Other ops: must be zero.
 * @resv:	must be zero; with KCOLL_SQE_F_GPU the operation's ticket
 *
 * Every field an opcode does not use must be zero.
 */
struct kcoll_sqe {
	__u8	opcode;
	__u8	dtype;
	__u8	redop;
	__u8	prio;
	__u32	flags;
	__u64	user_data;
	__u32	comm_id;
	__u32	peer;
	union {
		__u64	count;
		__u64	vec_addr;
	};
	__u64	send_addr;
	__u64	recv_addr;
	__u32	send_mr;
	__u32	recv_mr;
	__u32	timeout_ms;
	__u32	resv;
};

#define KCOLL_TIMEOUT_NONE	0xffffffffU

/**
 * struct kcoll_vec - the count table of a v-variant, nranks-long arrays of
 * __u64 one after another at the SQE's vec_addr, in elements of the dtype,
 * with n = nranks and r = this rank:
 *  ALLGATHERV       counts[n], displs[n]: rank j's block lands at
 *                   recv + displs[j]; send[counts[r]];
 *                   in place: send == recv + displs[r]
 *  REDUCE_SCATTERV  counts[n]: send[sum(counts)], block j (at the sum of
 *                   counts[0..j)) reduced over every rank lands at rank
 *                   j's recv[counts[j]]; never in place
 *  ALLTOALLV        sendcounts[n], sdispls[n], recvcounts[n], rdispls[n]:
 *                   send + sdispls[j] (sendcounts[j]) goes to rank j, the
 *                   block from rank j lands at recv + rdispls[j]
 *                   (recvcounts[j]); sendcounts[r] == recvcounts[r];
 *                   never in place
 * Every count and displacement is at most KCOLL_VEC_ELEMS_MAX (-ERANGE
 * otherwise). ALLGATHERV's and REDUCE_SCATTERV's counts must be the same
 * on every rank, and ALLTOALLV's sendcounts[j] on rank i must equal
 * recvcounts[i] on rank j: the signature check covers them (-EBADMSG).
 * A receive buffer's blocks must not overlap (MPI's rule; the kernel does
 * not check it: the data written is then undefined, nothing else).
 */
#define KCOLL_VEC_ELEMS_MAX	(1ULL << 48)

/**
 * struct kcoll_cqe - completion queue entry, 16 bytes.
 * @user_data:	copied from the SQE
 * @res:	0 or a positive result on success, -errno on failure
 * @flags:	KCOLL_CQE_F_*
 */
struct kcoll_cqe {
	__u64	user_data;
	__s32	res;
	__u32	flags;
};

/*
 * CQE flags. KCOLL_CQE_F_REPORT: the operation failed and its communicator
 * holds a report about it (which ranks never arrived, which peer was lost),
 * returned by KCOLL_IOC_COMM_REPORT until a later failure replaces it.
 */
#define KCOLL_CQE_F_REPORT	(1U << 0)

/* ------------------------------------------------------------------ */
/* Rings                                                               */
/* ------------------------------------------------------------------ */

/*
 * All rings live in one mapping, created by KCOLL_IOC_SETUP and mapped with
 * mmap(NULL, setup.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
 *      KCOLL_OFF_RINGS) on a file opened O_RDWR. Private mappings, other
 *      offsets and other lengths are -EINVAL.
 */
#define KCOLL_OFF_RINGS		0ULL

/* Offsets of the SQ fields, relative to the start of the mapping. */
struct kcoll_sq_offsets {
	__u32	head;		/* kernel writes: next SQE the kernel reads */
	__u32	tail;		/* application writes: next free SQE slot */
	__u32	ring_mask;
	__u32	ring_entries;
	__u32	flags;		/* kernel writes: KCOLL_SQ_F_* */
	__u32	sqes;		/* the SQE array */
	__u32	resv[2];
};

/* sq.flags, set by the kernel. None is defined in ABI version 1 (always 0);
 * room for a kernel-side poller's NEED_WAKEUP. */

/* Offsets of the CQ fields, relative to the start of the mapping. */
struct kcoll_cq_offsets {
	__u32	head;		/* application writes: next CQE to reap */
	__u32	tail;		/* kernel writes: next CQE slot to fill */
	__u32	ring_mask;
	__u32	ring_entries;
	__u32	flags;		/* application writes: KCOLL_CQ_F_* */
	__u32	cqes;		/* the CQE array */
	__u32	resv[2];
};

/* cq.flags, set by the application. */
#define KCOLL_CQ_F_EVENTFD_DISABLED	(1U << 0)	/* mute the eventfd */
#define KCOLL_CQ_F_ALL			(KCOLL_CQ_F_EVENTFD_DISABLED)

/* ------------------------------------------------------------------ */
/* ioctls                                                              */
/* ------------------------------------------------------------------ */

#define KCOLL_IOC_MAGIC		'k'

/* Features reported by KCOLL_IOC_QUERY and KCOLL_IOC_SETUP. */
#define KCOLL_FEAT_SINGLE_MMAP	(1U << 0)	/* all rings in one mapping */
#define KCOLL_FEAT_NODROP	(1U << 1)	/* CQ slots reserved at submit */
#define KCOLL_FEAT_EVENTFD	(1U << 2)	/* KCOLL_IOC_EVENTFD */
#define KCOLL_FEAT_POLL		(1U << 3)	/* poll()/epoll on the fd */
#define KCOLL_FEAT_COMM		(1U << 4)	/* communicators, collectives */
#define KCOLL_FEAT_TIMEOUT	(1U << 5)	/* sqe.timeout_ms, COMM_REPORT */
#define KCOLL_FEAT_ABORT	(1U << 6)	/* KCOLL_IOC_COMM_ABORT */
#define KCOLL_FEAT_GPU		(1U << 7)	/* KCOLL_IOC_GPU_SETUP */
#define KCOLL_FEAT_PARENT	(1U << 8)	/* kcoll_comm_create.parent_uid */
#define KCOLL_FEAT_GPU_VEC	(1U << 9)	/* v-variants on a stream */
#define KCOLL_FEAT_REVOKE	(1U << 10)	/* KCOLL_ABORT_REVOKE */
#define KCOLL_FEAT_GPU_SLOTS	(1U << 11)	/* kcoll_gpu_bell.*_s[] */

/**
 * struct kcoll_query - KCOLL_IOC_QUERY: what this kernel offers.
 * All fields are written by the kernel; the input must be all zero.
 */
struct kcoll_query {
	__u32	abi_version;		/* KCOLL_ABI_VERSION */
	__u32	features;		/* KCOLL_FEAT_* */
	__u32	max_sq_entries;		/* largest SQ SETUP accepts now */
	__u32	max_cq_entries;		/* current sysfs limit */
	__u32	sqe_size;		/* sizeof(struct kcoll_sqe) */
	__u32	cqe_size;		/* sizeof(struct kcoll_cqe) */
	__u32	nr_ops;			/* KCOLL_OP_LAST of the kernel */
	__u32	prio_max;		/* KCOLL_PRIO_MAX */
	__u64	ops_supported;		/* bit n set: opcode n is supported */
	__u64	delay_max_us;		/* KCOLL_DELAY_MAX_US */
	__u64	resv[4];
};

/* KCOLL_IOC_SETUP flags. */
#define KCOLL_SETUP_CQSIZE	(1U << 0)	/* honour cq_entries */
#define KCOLL_SETUP_CLAMP	(1U << 1)	/* clamp over-large sizes */
#define KCOLL_SETUP_F_ALL	(KCOLL_SETUP_CQSIZE | KCOLL_SETUP_CLAMP)

/**
 * struct kcoll_setup - KCOLL_IOC_SETUP: create the rings (once per open file).
 * @sq_entries:	in: requested SQ size (1..query.max_sq_entries, which is
 *		min(max_sq_entries, max_cq_entries); any size with
 *		KCOLL_SETUP_CLAMP); out: actual size, a power of two
 * @cq_entries:	in: with KCOLL_SETUP_CQSIZE, the requested CQ size (at
 *		least sq_entries); without it, must be 0. out: actual size, a
 *		power of two; default min(2 * sq_entries, max_cq_entries)
 * @flags:	KCOLL_SETUP_*
 * @features:	out: KCOLL_FEAT_*
 * @sq_off:	out: SQ field offsets
 * @cq_off:	out: CQ field offsets
 * @mmap_size:	out: length to pass to mmap()
 * @mmap_offset: out: offset to pass to mmap() (KCOLL_OFF_RINGS)
 * @resv:	must be zero
 */
struct kcoll_setup {
	__u32	sq_entries;
	__u32	cq_entries;
	__u32	flags;
	__u32	features;
	struct kcoll_sq_offsets sq_off;
	struct kcoll_cq_offsets cq_off;
	__u64	mmap_size;
	__u64	mmap_offset;
	__u64	resv[4];
};

/* KCOLL_IOC_ENTER flags. */
#define KCOLL_ENTER_GETEVENTS	(1U << 0)	/* wait for min_complete CQEs */
#define KCOLL_ENTER_F_ALL	(KCOLL_ENTER_GETEVENTS)

/**
 * struct kcoll_enter - KCOLL_IOC_ENTER: submit and/or wait.
 * @to_submit:	SQEs to consume from the SQ (at most sq_entries)
 * @min_complete: with KCOLL_ENTER_GETEVENTS, return once at least this many
 *		CQEs are ready (at most cq_entries)
 * @flags:	KCOLL_ENTER_*
 * @resv0:	must be zero
 * @timeout_ns:	wait limit, 0 = no limit; -ETIME when it expires
 * @resv:	must be zero
 *
 * Returns the number of SQEs consumed (each one gets exactly one CQE), or
 * -errno if none was consumed and the call failed.
 */
struct kcoll_enter {
	__u32	to_submit;
	__u32	min_complete;
	__u32	flags;
	__u32	resv0;
	__u64	timeout_ns;
	__u64	resv[2];
};

/**
 * struct kcoll_eventfd - KCOLL_IOC_EVENTFD: signal an eventfd per CQE batch.
 * @fd:	an eventfd, or -1 to unregister
 * @resv: must be zero
 */
struct kcoll_eventfd {
	__s32	fd;
	__u32	resv;
};

/* Communicators ------------------------------------------------------ */

/**
 * struct kcoll_rank_addr - where one rank of a communicator lives.
 * @addr:	the node's RDMA (RoCE/IPoIB) address: IPv4-mapped IPv6
 *		(::ffff:a.b.c.d); native IPv6 is -EAFNOSUPPORT for now
 * @port:	rdma_cm port of that node's kcoll (host order); 0: this node's
 *		sysfs listen_port
 * @local_index: index of the rank among the ranks on its node
 * @resv:	must be zero
 */
struct kcoll_rank_addr {
	__u8	addr[16];
	__u16	port;
	__u16	local_index;
	__u32	resv;
};

#define KCOLL_KEY_LEN		16
#define KCOLL_MAX_RANKS		4096
/* COMM_CREATE's timeout_ms is at most this (sysfs connect_timeout_ms too). */
#define KCOLL_CONNECT_TIMEOUT_MAX_MS	(3600U * 1000)

/**
 * struct kcoll_comm_create - KCOLL_IOC_COMM_CREATE argument. Blocks until
 * this rank is connected to every other rank (or the timeout expires:
 * -ETIMEDOUT; a peer refusing our key: -EACCES). Only a fatal signal
 * ends the wait early; other signals are taken after it. A peer whose
 * COMM_CREATE returned first may revoke (KCOLL_ABORT_REVOKE) before this
 * one returns: it still returns a handle, to the revoked communicator,
 * as if the revoke had come a moment later (unless this rank's setup had
 * failed first: that error).
 * @ranks:	user pointer to @nranks struct kcoll_rank_addr
 * @uid:	communicator id, the same on every rank, not 0
 * @key:	shared secret; peers presenting another key are refused
 * @rank:	this rank, < @nranks
 * @nranks:	1 .. KCOLL_MAX_RANKS
 * @flags:	KCOLL_COMM_*
 * @timeout_ms:	connection setup limit; 0: sysfs connect_timeout_ms;
 *		at most an hour (KCOLL_CONNECT_TIMEOUT_MAX_MS): more is
 *		taken for that
 * @comm_id:	out: handle for SQEs and the other ioctls, local to the file
 * @parent_uid:	the uid of the communicator this one was made from (split,
 *		shrink or grow in libcoll), shown by kcollctl; 0: none. Not
 *		checked against anything (the parent may be gone); not @uid.
 *		Kernels without KCOLL_FEAT_PARENT refuse it non-zero (-EINVAL)
 */
struct kcoll_comm_create {
	__u64	ranks;
	__u64	uid;
	__u8	key[KCOLL_KEY_LEN];
	__u32	rank;
	__u32	nranks;
	__u32	flags;
	__u32	timeout_ms;
	__u32	comm_id;
	__u32	resv0;
	__u64	parent_uid;
	__u64	resv[3];
};

/*
 * KCOLL_COMM_DEVMEM: the communicator will move device memory (KCOLL_REG_NO_CPU
 * registrations), so its connections never route data through the CPU: no
 * eager transfers (they bounce through kernel slots) and no intra-node
 * channel (a peer on the same node is reached through the NIC, loopback).
 * Every rank must set it alike (each connection agrees on the weaker of the
 * two); operations on NO_CPU registrations need it (-EOPNOTSUPP without).
 */
#define KCOLL_COMM_DEVMEM	(1U << 0)
#define KCOLL_COMM_FLAGS	KCOLL_COMM_DEVMEM

/* KCOLL_IOC_COMM_DESTROY: operations still in flight complete -ECANCELED. */
struct kcoll_comm_destroy {
	__u32	comm_id;
	__u32	resv;
};

/**
 * struct kcoll_reg_mem - KCOLL_IOC_REG_MEM: register memory with the RDMA
 * device of @comm_id once; SQEs then name the returned @handle in
 * send_mr/recv_mr with addresses inside [@addr, @addr + @len). The handle
 * belongs to the file and dies with it.
 *
 * Without KCOLL_REG_DMABUF: pin @len bytes at user address @addr (counts
 * against RLIMIT_MEMLOCK unless CAP_IPC_LOCK); @dmabuf_fd and @dmabuf_off
 * must be 0. The registration holds the pages the range mapped then.
 * Should the range lose them (munmap, mremap, a new mapping over it,
 * madvise(MADV_DONTNEED)), SQEs naming the handle fail with -EFAULT from
 * then on (-EAGAIN while the range keeps changing under the submission),
 * and the new pages are never touched: deregister, and register the new
 * memory. Changes of protection alone (mprotect, fork) change nothing. A
 * process other than the registering one (a child after fork) that names
 * the handle after such a change gets -EFAULT too.
 *
 * With KCOLL_REG_DMABUF: import @len bytes at byte @dmabuf_off of the
 * dma-buf @dmabuf_fd (GPU memory exported by its driver, vgem, udmabuf, a
 * dma-heap ...). @addr is then only a name: the address SQEs use for byte 0
 * (a CUDA device pointer, say); it is never dereferenced. The fd may be
 * closed once this returns. Imported bytes count against the per-user
 * limit user_max_dmabuf_mb (-EDQUOT). Errors of the import: -EBADF (not an
 * open fd), -EINVAL (not a dma-buf, or the range is not inside it),
 * -EOPNOTSUPP (the device reaches memory through the CPU — rxe, siw — and
 * the exporter gives no CPU mapping: device memory), or the exporter's own
 * error from attach/pin/map (-EBUSY, -ENOMEM ...).
 *
 * KCOLL_REG_NO_CPU (with KCOLL_REG_DMABUF only): the kernel must never read
 * or write these bytes with the CPU (device memory). Operations naming the
 * registration then move its data only with the NIC; one that would need
 * the CPU on it (a reduction, a local copy, a peer on the same node, a
 * communicator of one rank) fails at submission with -EOPNOTSUPP.
 *
 * KCOLL_REG_READONLY (without KCOLL_REG_DMABUF): pin the pages for reading
 * only (read-only mappings, a file the caller may only read). Neither the
 * kernel nor a peer ever writes them: the registration may be named only as
 * a send buffer the operation does not write; naming it where the operation
 * writes (recv_mr, an in-place reduce-scatter's send_mr) fails the SQE with
 * -EACCES. Without the flag, a read-only mapping is refused with -EFAULT.
 */
struct kcoll_reg_mem {
	__u64	addr;
	__u64	len;
	__u32	comm_id;
	__u32	flags;		/* KCOLL_REG_* */
	__u32	handle;		/* out, never 0 */
	__s32	dmabuf_fd;	/* KCOLL_REG_DMABUF; else 0 */
	__u64	dmabuf_off;	/* KCOLL_REG_DMABUF; else 0 */
	__u64	resv;
};

#define KCOLL_REG_DMABUF	(1U << 0)
#define KCOLL_REG_NO_CPU	(1U << 1)
#define KCOLL_REG_READONLY	(1U << 2)
#define KCOLL_REG_FLAGS		(KCOLL_REG_DMABUF | KCOLL_REG_NO_CPU | \
				 KCOLL_REG_READONLY)

/* KCOLL_IOC_DEREG_MEM: -EBUSY while an operation in flight uses it. */
struct kcoll_dereg_mem {
	__u32	handle;
	__u32	resv;
};

/**
 * KCOLL_IOC_COMM_ABORT: end every operation in flight on @comm_id with
 * -ECANCELED, at once (memory the NIC may still write is released only when
 * the connections are down), tell the peers and refuse new operations with
 * -ECANCELED. The peers' operations that still need this rank fail with
 * -ECONNRESET naming it; a collective this rank had completed still
 * completes there.
 *
 * With KCOLL_ABORT_REVOKE (KCOLL_FEAT_REVOKE) the communicator is revoked
 * instead: every peer reached treats it as its own abort at once (every
 * operation of its communicator, in flight or later, fails with
 * -ECANCELED, its report naming this rank as the one that revoked, and
 * its connections close without waiting for writes to ranks that are
 * gone) and passes the revoke on to every rank it still reaches. A
 * communicator already aborted, destroyed or failed by its device's
 * removal has no connections left to say it: the flag then changes
 * nothing.
 *
 * The handle stays valid for KCOLL_IOC_COMM_REPORT and
 * KCOLL_IOC_COMM_DESTROY. May be called from any thread, also while
 * another one waits in KCOLL_IOC_ENTER. @flags: KCOLL_ABORT_*, others
 * -EINVAL.
 */
struct kcoll_comm_abort {
	__u32	comm_id;
	union {
		__u32	flags;
		__u32	resv;	/* its name before KCOLL_FEAT_REVOKE */
	};
};

#define KCOLL_ABORT_REVOKE	(1U << 0)
#define KCOLL_ABORT_FLAGS	KCOLL_ABORT_REVOKE

/* Reasons in struct kcoll_comm_report. */
enum kcoll_report_reason {
	KCOLL_REPORT_NONE	= 0,	/* no operation has failed */
	KCOLL_REPORT_TIMEOUT	= 1,	/* @missing: ranks never heard from */
	KCOLL_REPORT_PEER_LOST	= 2,	/* @peer: the lost rank */
	KCOLL_REPORT_MISMATCH	= 3,	/* @peer: a rank whose signature differs */
	KCOLL_REPORT_ABORTED	= 4,	/* KCOLL_IOC_COMM_ABORT, or @peer aborted
					 * (-ECANCELED: @peer revoked the
					 * communicator) */
	KCOLL_REPORT_OTHER	= 5,	/* see @error */
	KCOLL_REPORT_GPU_STREAM	= 6,	/* the GPU stream never reached the
					 * operation (its start value), or
					 * never finished a reduction step */
};

/**
 * struct kcoll_comm_report - KCOLL_IOC_COMM_REPORT: why the last failed
 * operation of a communicator failed.
 * @comm_id:	in
 * @missing_cap: in: room in @missing, in ranks (0: do not copy)
 * @missing:	in: user pointer to __u32[@missing_cap], or 0
 * @user_data:	out: the failed operation's SQE user_data
 * @seq:	out: its sequence number on the communicator (collectives)
 * @error:	out: its CQE res (0: nothing failed yet)
 * @reason:	out: enum kcoll_report_reason
 * @opcode:	out: enum kcoll_op
 * @peer:	out: see @reason; ~0U if none
 * @nmissing:	out: how many ranks the operation still waited for; the
 *		first min(@nmissing, @missing_cap) are copied, ascending
 * @elapsed_ms:	out: submission to failure
 * @resv:	must be zero
 */
struct kcoll_comm_report {
	__u32	comm_id;
	__u32	missing_cap;
	__u64	missing;
	__u64	user_data;
	__u64	seq;
	__s32	error;
	__u8	reason;
	__u8	opcode;
	__u16	resv0;
	__u32	peer;
	__u32	nmissing;
	__u64	elapsed_ms;
	__u64	resv[2];
};

/* ------------------------------------------------------------------ */
/* Stream-ordered collectives on GPU memory                            */
/* ------------------------------------------------------------------ */

/*
 * The doorbell page: one page of the process's host memory per
 * communicator, which the kernel pins (KCOLL_IOC_GPU_SETUP) and the GPU
 * reaches through the CUDA driver's stream memory operations. Values are
 * (ticket << KCOLL_GPU_TICKET_SHIFT) | step, compared "greater or equal".
 * The tickets of a communicator's SQEs must increase; at most
 * KCOLL_GPU_SLOTS of its stream-ordered operations may be in flight
 * (-EBUSY), and the stream of ticket t writes only slot t % KCOLL_GPU_SLOTS
 * of start[] and done[], so that streams running ahead of one another
 * never overwrite each other's words.
 *
 *  stream: WriteValue64(start[s], T)       T = ticket << SHIFT
 *  kernel: waits for start[s] >= T, then runs the operation; for
 *          reduction step j (1-based) the data to reduce is in the
 *          scratch buffer: ready = T | j
 *  stream: WaitValue64(ready >= T | j); reduction kernel;
 *          WriteValue64(done[s], T | j)
 *  kernel: waits for done[s] >= T | j before it goes on
 *  kernel: at the end (success or failure) ready = end = T | STEP_MASK
 *  stream: WaitValue64(end >= T | STEP_MASK)
 *
 * A failed operation also sets cancel = T | STEP_MASK: its kernels (which
 * take &cancel and T) leave memory alone. When the communicator goes away
 * (destroy, abort, process exit) ready, end and cancel are raised to
 * KCOLL_GPU_RELEASED, past every ticket's values (and still ahead of them
 * in the streams' cyclic "greater or equal", which ~0 is not): no stream
 * waits for ever. The kernel only writes ready, end and cancel; it
 * only reads start[] and done[].
 *
 * KCOLL_FEAT_GPU_SLOTS: the kernel also keeps ready, end and cancel per
 * slot (ready_s[s], end_s[s], cancel_s[s]: the same values, for the
 * ticket of slot s only), and a stream should wait on those. The single
 * words are raised past every earlier ticket when a later one is
 * released first (an SQE refused or never submitted while others are in
 * flight), which cancels the earlier ones' kernels and lets their
 * streams pass; a slot's words move only for its own ticket.
 */
#define KCOLL_GPU_TICKET_SHIFT	24
#define KCOLL_GPU_STEP_MASK	((1ULL << KCOLL_GPU_TICKET_SHIFT) - 1)
#define KCOLL_GPU_SLOTS		64
#define KCOLL_GPU_RELEASED	(1ULL << 62)

struct kcoll_gpu_bell {
	__u64	ready;		/* kernel writes */
	__u64	end;		/* kernel writes */
	__u64	cancel;		/* kernel writes */
	__u64	resv[5];
	__u64	start[KCOLL_GPU_SLOTS];	/* stream writes */
	__u64	done[KCOLL_GPU_SLOTS];	/* stream writes */
	/* KCOLL_FEAT_GPU_SLOTS, kernel writes */
	__u64	ready_s[KCOLL_GPU_SLOTS];
	__u64	end_s[KCOLL_GPU_SLOTS];
	__u64	cancel_s[KCOLL_GPU_SLOTS];
};

/**
 * struct kcoll_gpu_setup - KCOLL_IOC_GPU_SETUP: give @comm_id a doorbell
 * page and a scratch buffer for its stream-ordered collectives.
 * @bell:	user address of a page-aligned page of host memory (it
 *		starts with struct kcoll_gpu_bell); pinned until the
 *		communicator is destroyed. Once per communicator (-EBUSY;
 *		also for the same address over another page than the one
 *		pinned).
 * @scratch_mr:	REG_MEM handle of the scratch: device memory where data
 *		to be reduced lands, and where schedules keep partial results
 * @scratch_addr, @scratch_len: the scratch, inside @scratch_mr's range.
 *		May be replaced by a later call with @bell the same, while
 *		no KCOLL_SQE_F_GPU operation is in flight (-EBUSY).
 * The communicator must be KCOLL_COMM_DEVMEM with every peer through the
 * NIC (-EOPNOTSUPP).
 */
struct kcoll_gpu_setup {
	__u32	comm_id;
	__u32	scratch_mr;
	__u64	bell;
	__u64	scratch_addr;
	__u64	scratch_len;
	__u64	resv[2];
};

#define KCOLL_IOC_QUERY		_IOWR(KCOLL_IOC_MAGIC, 0x00, struct kcoll_query)
#define KCOLL_IOC_SETUP		_IOWR(KCOLL_IOC_MAGIC, 0x01, struct kcoll_setup)
#define KCOLL_IOC_ENTER		_IOW(KCOLL_IOC_MAGIC, 0x02, struct kcoll_enter)
#define KCOLL_IOC_EVENTFD	_IOW(KCOLL_IOC_MAGIC, 0x03, struct kcoll_eventfd)
#define KCOLL_IOC_COMM_CREATE	_IOWR(KCOLL_IOC_MAGIC, 0x04, struct kcoll_comm_create)
#define KCOLL_IOC_COMM_DESTROY	_IOW(KCOLL_IOC_MAGIC, 0x05, struct kcoll_comm_destroy)
#define KCOLL_IOC_REG_MEM	_IOWR(KCOLL_IOC_MAGIC, 0x06, struct kcoll_reg_mem)
#define KCOLL_IOC_DEREG_MEM	_IOW(KCOLL_IOC_MAGIC, 0x07, struct kcoll_dereg_mem)
#define KCOLL_IOC_COMM_ABORT	_IOW(KCOLL_IOC_MAGIC, 0x08, struct kcoll_comm_abort)
#define KCOLL_IOC_COMM_REPORT	_IOWR(KCOLL_IOC_MAGIC, 0x09, struct kcoll_comm_report)
#define KCOLL_IOC_GPU_SETUP	_IOW(KCOLL_IOC_MAGIC, 0x0a, struct kcoll_gpu_setup)

#endif /* _UAPI_LINUX_KCOLL_H */
