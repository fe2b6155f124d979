/* SPDX-License-Identifier: MIT */
/*
 * libcoll internals shared by bootstrap.c and comm.c (and the host unit
 * tests, which link libcoll.a and may call these). Not installed; nothing
 * here is exported from libcoll.so.
 */
#ifndef COLL_INTERNAL_H
#define COLL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>

#include "coll.h"

#define COLL_HIDDEN __attribute__((visibility("hidden")))

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/*
 * Record the details of a failure for coll_last_error() and return @err
 * (a negative errno value), so that call sites read
 *	return coll_err(-EINVAL, "rank %d out of range", rank);
 */
COLL_HIDDEN int coll_err(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------ */
/* CUDA, at run time (cuda.c)                                          */
/* ------------------------------------------------------------------ */

/* NULL when libcuda.so.1 is loaded and initialised; else why not. */
COLL_HIDDEN const char *coll_cuda_unavailable(void);
/* 1 with the allocation holding @p when the driver calls @p device memory;
 * 0 for anything else (host memory, or no CUDA); -errno on a driver
 * error. */
COLL_HIDDEN int coll_cuda_range(const void *p, uint64_t *base,
				uint64_t *size);
/* Does CUDA know @p (device memory, or host memory it pinned), so that a
 * kernel may touch it? Plain host memory is not: without HMM or ATS a
 * kernel's access faults and the whole context is lost. */
COLL_HIDDEN bool coll_cuda_reachable(const void *p);
/* The driver's id of the allocation holding @p (0: none): an address
 * freed and allocated again gets another. */
COLL_HIDDEN uint64_t coll_cuda_buffer_id(const void *p);
/* A dma-buf fd of device memory [@base, @base + @size) (page-aligned),
 * @p inside it; 0 or -ENOTSUP with coll_last_error() saying why. */
COLL_HIDDEN int coll_cuda_dmabuf(const void *p, uint64_t base, uint64_t size,
				 int *fd);

/*
 * Stream-ordered collectives (see comm.c): 0 when this process can run
 * them (the driver, its stream memory operations, the embedded kernels,
 * a current context), else -ENOTSUP saying why.
 */
COLL_HIDDEN int coll_cuda_stream_ready(void);
/* Must a wait on NIC-written data flush them (GPUDirect write ordering)?
 * 1 yes, 0 no, -ENOTSUP when the GPU can neither order nor flush them. */
COLL_HIDDEN int coll_cuda_flush_needed(void);
COLL_HIDDEN int coll_cuda_host_map(void *p, size_t len, uint64_t *dptr);
COLL_HIDDEN int coll_cuda_alloc(size_t len, uint64_t *dptr);
COLL_HIDDEN void coll_cuda_free(uint64_t dptr);
COLL_HIDDEN int coll_cuda_wait64(void *stream, uint64_t dptr, uint64_t v,
				 bool flush);
COLL_HIDDEN int coll_cuda_write64(void *stream, uint64_t dptr, uint64_t v);
/* dst = a OP b on @stream (AVG: SUM); skipped once *cancel >= ticket. */
COLL_HIDDEN int coll_cuda_reduce(void *stream, unsigned int dtype,
				 unsigned int redop, uint64_t dst, uint64_t a,
				 uint64_t b, uint64_t n, uint64_t esize,
				 uint64_t cancel, uint64_t ticket);
/* dst /= nranks on @stream. */
COLL_HIDDEN int coll_cuda_scale(void *stream, unsigned int dtype,
				uint64_t dst, uint64_t n, uint64_t esize,
				uint32_t nranks, uint64_t cancel,
				uint64_t ticket);
COLL_HIDDEN int coll_cuda_stream_create(void **stream);
COLL_HIDDEN int coll_cuda_stream_sync(void *stream);
COLL_HIDDEN void coll_cuda_stream_destroy(void *stream);

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

/* CLOCK_MONOTONIC in milliseconds. */
COLL_HIDDEN uint64_t coll_now_ms(void);

/*
 * An unsigned decimal environment variable: 0 with *@val set (to @def
 * when unset or empty), or -EINVAL (with coll_last_error() naming it) when
 * it is not a number <= @max.
 */
COLL_HIDDEN int coll_env_uint(const char *name, uint64_t def, uint64_t max,
			      uint64_t *val);

/* Parse exactly 2 * @n hex digits of @s into @out; 0 or -EINVAL. */
COLL_HIDDEN int coll_hex_decode(const char *s, uint8_t *out, size_t n);

/* ::ffff:a.b.c.d from an IPv4 address (network order). */
COLL_HIDDEN void coll_addr_from_ipv4(struct kcoll_rank_addr *a,
				     struct in_addr ip);

/* The IPv4 address inside an IPv4-mapped entry; false if it is not one. */
COLL_HIDDEN bool coll_addr_to_ipv4(const struct kcoll_rank_addr *a,
				   struct in_addr *ip);

/* ------------------------------------------------------------------ */
/* Unique ids and the bootstrap root                                   */
/* ------------------------------------------------------------------ */

/* The fields of a coll_unique_id (its bytes are a fixed encoding). */
struct coll_id_fields {
	struct in_addr ip;		/* root address */
	uint16_t port;			/* root port, host order */
	uint8_t secret[KCOLL_KEY_LEN];
	uint64_t uid;			/* 0: the root draws one */
};

COLL_HIDDEN void coll_id_encode(coll_unique_id *id,
				const struct coll_id_fields *f);
/* 0, or -EINVAL if @id is not a valid id. */
COLL_HIDDEN int coll_id_decode(const coll_unique_id *id,
			       struct coll_id_fields *f);

/*
 * Start the bootstrap root of @f in a detached thread, listening on every
 * local address at @f->port (0: an ephemeral port, written back to
 * @f->port). A zero @f->uid is replaced by a random one (written back).
 * Returns 0 or -errno.
 */
COLL_HIDDEN int coll_root_start(struct coll_id_fields *f);

/*
 * coll_node_addr() with another sysfs directory in place of
 * /sys/class/infiniband (for the unit tests).
 */
COLL_HIDDEN int coll_node_addr_at(const char *ibdir,
				  struct kcoll_rank_addr *self);

/* ------------------------------------------------------------------ */
/* Communicators made from others (comm.c, family.c)                   */
/* ------------------------------------------------------------------ */

/* coll_comm_init_table() with the uid of the communicator it was made
 * from (KCOLL_IOC_COMM_CREATE's parent_uid; 0: none). */
COLL_HIDDEN int coll_comm_create_child(coll_comm **out, int nranks, int rank,
				       const struct kcoll_rank_addr *table,
				       uint64_t uid,
				       const uint8_t key[KCOLL_KEY_LEN],
				       uint64_t parent_uid);
/* coll_comm_init_rank() the same way. */
COLL_HIDDEN int coll_comm_init_rank_child(coll_comm **out, int nranks,
					  const coll_unique_id *id, int rank,
					  uint64_t parent_uid);
/* The rank table and key @c was created with. */
COLL_HIDDEN const struct kcoll_rank_addr *coll_comm_table(const coll_comm *c);
COLL_HIDDEN const uint8_t *coll_comm_key(const coll_comm *c);
/* Each entry's local_index: its index among the entries before it at the
 * same address (bootstrap.c). */
COLL_HIDDEN void coll_table_local_index(struct kcoll_rank_addr *t,
					uint32_t n);
/* The number of the next child derived from @c: 1, 2, ... Every rank
 * counts alike as long as all make the same calls in the same order: a
 * call takes its number once its arguments passed the checks (which
 * answer alike everywhere), before anything that may fail on one rank
 * only. */
COLL_HIDDEN uint32_t coll_comm_derive_next(coll_comm *c);
/* KCOLL_IOC_COMM_ABORT with KCOLL_ABORT_REVOKE where the module has it. */
COLL_HIDDEN int coll_comm_revoke_kernel(coll_comm *comm);
/* Operations of @c submitted and not completed. */
COLL_HIDDEN unsigned int coll_comm_busy(coll_comm *c);
/* SipHash-2-4 of @len bytes at @msg under the 16-byte @key (family.c). */
COLL_HIDDEN uint64_t coll_siphash(const uint8_t key[16], const void *msg,
				  size_t len);

#endif /* COLL_INTERNAL_H */
