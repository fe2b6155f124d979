// SPDX-License-Identifier: MIT
/*
 * A model of /dev/kcoll for host tests, reached through the linker's
 * --wrap=ioctl,--wrap=mmap,--wrap=munmap: libcoll's calls on the "device"
 * (a temporary file named by KCOLL_DEVICE) come here, everything else goes
 * to the C library. Ranks are threads (or, with one rank, the process), so
 * the model runs every collective directly on the ranks' buffers:
 *  - rings laid out by the kernel's kcoll_ring_layout(), SQEs checked by the
 *    kernel's kcoll_sqe_check(), CQ slots reserved at submission (-EBUSY
 *    when full), GETEVENTS waits with timeouts;
 *  - communicators joined by uid (COMM_CREATE blocks until all ranks came;
 *    a key other than the first creator's is -EACCES, a missing rank
 *    -ETIMEDOUT), collectives matched in order with a signature check
 *    (-EBADMSG), send/recv matched per peer, reductions by the kernel's
 *    scalar kcoll_reduce code;
 *  - completions come from a worker thread after random delays, so they
 *    arrive asynchronously;
 *  - registrations (an SQE's buffer must lie inside the one it names;
 *    DEREG is -EBUSY while in use), peer loss (-ECONNRESET).
 * See kcoll_model.h.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "coll.h"
#include "coll_internal.h"
#include "kcoll_logic.h"
#include "kcoll_shape.h"
#include "kcoll_sched.h"
#include "kcoll_reduce.h"
#include "kcoll_model.h"

#define M_MAX_FD	4096
#define M_MAX_COMMS	16
#define M_MAX_SQ	64
#define M_MAX_CQ	128

struct m_ctx;
struct m_comm;

struct m_op {
	struct m_op *next;
	struct m_ctx *ctx;
	struct m_comm *comm;
	int rank;
	struct kcoll_sqe sqe;
	struct m_mem *mem[2];		/* registrations in use */
	uint64_t *vec;			/* a v-variant's table, copied in */
};

struct kcoll_model_dmabuf kcoll_model_last_dmabuf;

struct m_mem {
	struct m_mem *next;
	uint32_t handle;
	uint32_t comm_id;
	uint64_t addr, len;
	int users;
};

struct m_ctx {
	struct m_ctx *all_next;
	int fd;
	bool dead;
	void *ring;
	size_t ring_sz;
	struct kcoll_ring_layout l;
	uint32_t *sq_head, *sq_tail, *cq_head, *cq_tail;
	struct kcoll_sqe *sqes;
	struct kcoll_cqe *cqes;
	uint32_t k_sq_head, k_cq_tail;
	uint32_t inflight;
	struct {
		uint32_t id;
		struct m_comm *comm;
		int rank;
	} comms[M_MAX_COMMS];
	uint32_t next_comm_id;
	struct m_mem *mems;
	uint32_t next_handle;
	unsigned int submits;		/* ENTERs that consumed SQEs */
	unsigned int mr_sqes;		/* SQEs naming a registration */
};

struct m_comm {
	struct m_comm *all_next;
	uint64_t uid;
	uint32_t nranks;
	uint8_t key[KCOLL_KEY_LEN];
	uint32_t joined;
	int lost;			/* 0, or why the comm failed */
	struct {
		struct m_ctx *ctx;
		bool in;
		struct m_op *head, *tail;	/* collectives, in order */
	} *r;
	struct m_op **sendq;		/* [a * n + b]: a sends to b */
	struct m_op **recvq;		/* [b * n + a]: b receives from a */
};

struct m_job {
	struct m_job *next;
	int nops;
	struct m_op *ops[];
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;		/* CQEs posted, ranks joined */
	pthread_cond_t job_cv;
	dev_t dev;
	ino_t ino;
	char path[64];
	struct m_ctx *fd_ctx[M_MAX_FD];
	struct m_ctx *all_ctx;
	struct m_comm *all_comm;
	struct m_job *jobs, **jobs_tail;
	int busy;			/* jobs being executed */
	bool stop;
	pthread_t worker;
	unsigned int seed;
	unsigned int max_delay_us;
} M = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.job_cv = PTHREAD_COND_INITIALIZER,
};

int __real_ioctl(int fd, unsigned long req, void *arg);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off);
int __real_munmap(void *addr, size_t len);

static bool m_is_dev(int fd)
{
	struct stat st;

	return fd >= 0 && fd < M_MAX_FD && !fstat(fd, &st) &&
	       st.st_dev == M.dev && st.st_ino == M.ino;
}

static void m_complete(struct m_op *op, int res)
{
	struct m_ctx *ctx = op->ctx;
	int i;

	for (i = 0; i < 2; i++)
		if (op->mem[i])
			op->mem[i]->users--;
	if (!ctx->dead) {
		struct kcoll_cqe *cqe = &ctx->cqes[ctx->k_cq_tail &
						   (ctx->l.cq_entries - 1)];

		cqe->user_data = op->sqe.user_data;
		cqe->res = res;
		cqe->flags = 0;
		ctx->k_cq_tail++;
		__atomic_store_n(ctx->cq_tail, ctx->k_cq_tail, __ATOMIC_RELEASE);
		ctx->inflight--;
		pthread_cond_broadcast(&M.cv);
	}
	free(op->vec);
	free(op);
}

static void m_complete_sqe(struct m_ctx *ctx, const struct kcoll_sqe *sqe,
			   int res)
{
	struct m_op *op = calloc(1, sizeof(*op));

	op->ctx = ctx;
	op->sqe = *sqe;
	m_complete(op, res);
}

static void m_job_add(int nops, struct m_op **ops)
{
	struct m_job *j = malloc(sizeof(*j) + (size_t)nops * sizeof(ops[0]));

	j->next = NULL;
	j->nops = nops;
	memcpy(j->ops, ops, (size_t)nops * sizeof(ops[0]));
	*M.jobs_tail = j;
	M.jobs_tail = &j->next;
	pthread_cond_broadcast(&M.job_cv);
}

/* Fail everything pending on @c (a rank left or died). */
static void m_comm_lose(struct m_comm *c, int err)
{
	uint32_t i, n = c->nranks;

	if (!c->lost)
		c->lost = err;
	for (i = 0; i < n; i++) {
		while (c->r[i].head) {
			struct m_op *op = c->r[i].head;

			c->r[i].head = op->next;
			m_complete(op, err);
		}
		c->r[i].tail = NULL;
	}
	for (i = 0; i < n * n; i++) {
		while (c->sendq[i]) {
			struct m_op *op = c->sendq[i];

			c->sendq[i] = op->next;
			m_complete(op, err);
		}
		while (c->recvq[i]) {
			struct m_op *op = c->recvq[i];

			c->recvq[i] = op->next;
			m_complete(op, err);
		}
	}
}

static void m_match(struct m_comm *c)
{
	uint32_t n = c->nranks, i, a, b;
	struct m_op *ops[64];

	for (;;) {
		for (i = 0; i < n; i++)
			if (!c->r[i].head)
				break;
		if (i < n)
			break;
		for (i = 0; i < n; i++) {
			ops[i] = c->r[i].head;
			c->r[i].head = ops[i]->next;
			if (!c->r[i].head)
				c->r[i].tail = NULL;
		}
		m_job_add((int)n, ops);
	}
	for (a = 0; a < n; a++) {
		for (b = 0; b < n; b++) {
			struct m_op **s = &c->sendq[a * n + b];
			struct m_op **r = &c->recvq[b * n + a];

			while (*s && *r) {
				ops[0] = *s;
				ops[1] = *r;
				*s = ops[0]->next;
				*r = ops[1]->next;
				m_job_add(2, ops);
			}
		}
	}
}

static void m_append(struct m_op **q, struct m_op *op)
{
	while (*q)
		q = &(*q)->next;
	*q = op;
}

/* Bytes of the send and receive buffers of @s on @rank. */
static void m_bytes(const struct kcoll_sqe *s, uint64_t n, uint32_t rank,
		    uint64_t *sb, uint64_t *rb)
{
	const struct kcoll_shape *d = kcoll_shape(s->opcode);
	uint64_t es = coll_dtype_size(s->dtype);
	unsigned long long se = 0, re = 0;

	*sb = *rb = 0;
	if (d && d->vec)	/* m_accept() sizes them from the table */
		return;
	if (!d || kcoll_shape_count(d->send, rank, s->peer, (unsigned int)n,
				     s->count, &se) ||
	    kcoll_shape_count(d->recv, rank, s->peer, (unsigned int)n,
			      s->count, &re))
		return;
	*sb = se * es;
	*rb = re * es;
}

static int m_use_mem(struct m_ctx *ctx, struct m_op *op, int which,
		     uint64_t addr, uint32_t handle, uint64_t len)
{
	struct m_mem *m;

	if (!handle)
		return 0;
	for (m = ctx->mems; m && m->handle != handle; m = m->next)
		;
	if (!m || m->comm_id != op->sqe.comm_id)
		return -ENOENT;
	if (addr < m->addr || addr - m->addr > m->len ||
	    len > m->len - (addr - m->addr))
		return -EINVAL;
	m->users++;
	op->mem[which] = m;
	ctx->mr_sqes++;
	return 0;
}

static void *m_buf(uint64_t addr);

/*
 * A v-variant's table, copied from the caller's memory as the kernel does
 * at submission, checked by the kernel's own rules (kcoll_sched_vec.c),
 * and the byte sizes of the buffers it spans.
 */
static int m_vec_in(struct m_op *op, uint64_t n, uint32_t rank, uint64_t *sb,
		    uint64_t *rb)
{
	const struct kcoll_sqe *s = &op->sqe;
	unsigned int w = kcoll_shape(s->opcode)->vec;
	uint64_t es = coll_dtype_size(s->dtype);
	struct kcoll_sched_args a = {
		.opcode = s->opcode, .redop = s->redop, .rank = rank,
		.nranks = (uint32_t)n,
	};
	int err;

	op->vec = malloc(w * n * sizeof(uint64_t));
	if (!op->vec)
		return -ENOMEM;
	memcpy(op->vec, m_buf(s->vec_addr), w * n * sizeof(uint64_t));
	a.vec = op->vec;
	err = kcoll_sched_vec_check(&a);
	if (err)
		return err;
	a.in_place = kcoll_sched_vec_in_place(&a, es, s->send_addr,
					      s->recv_addr);
	*sb = kcoll_sched_send_count(&a) * es;
	*rb = kcoll_sched_recv_count(&a) * es;
	return 0;
}

/* A consumed SQE: complete it at once, or queue it for matching. */
static void m_accept(struct m_ctx *ctx, const struct kcoll_sqe *sqe)
{
	struct m_comm *c = NULL;
	struct m_op *op;
	uint64_t sb, rb;
	int err, i, rank = -1;

	err = kcoll_sqe_check(sqe);
	if (err || sqe->opcode == KCOLL_OP_NOP ||
	    sqe->opcode == KCOLL_OP_DELAY) {
		m_complete_sqe(ctx, sqe, err);
		return;
	}
	for (i = 0; i < M_MAX_COMMS; i++) {
		if (ctx->comms[i].id && ctx->comms[i].id == sqe->comm_id) {
			c = ctx->comms[i].comm;
			rank = ctx->comms[i].rank;
		}
	}
	if (!c) {
		m_complete_sqe(ctx, sqe, -ENOENT);
		return;
	}
	if (c->lost) {
		m_complete_sqe(ctx, sqe, c->lost);
		return;
	}
	if (sqe->peer >= c->nranks ||
	    ((sqe->opcode == KCOLL_OP_SEND || sqe->opcode == KCOLL_OP_RECV) &&
	     sqe->peer == (uint32_t)rank)) {
		m_complete_sqe(ctx, sqe, -EINVAL);
		return;
	}
	op = calloc(1, sizeof(*op));
	op->ctx = ctx;
	op->comm = c;
	op->rank = rank;
	op->sqe = *sqe;
	m_bytes(sqe, c->nranks, (uint32_t)rank, &sb, &rb);
	/* Like the kernel: the table is read once, here, and checked. */
	if (kcoll_shape(sqe->opcode)->vec) {
		err = m_vec_in(op, c->nranks, (uint32_t)rank, &sb, &rb);
		if (err) {
			m_complete(op, err);
			return;
		}
	}
	err = m_use_mem(ctx, op, 0, sqe->send_addr, sqe->send_mr, sb);
	if (!err)
		err = m_use_mem(ctx, op, 1, sqe->recv_addr, sqe->recv_mr, rb);
	if (err) {
		m_complete(op, err);
		return;
	}
	if (sqe->opcode == KCOLL_OP_SEND)
		m_append(&c->sendq[(uint32_t)rank * c->nranks + sqe->peer], op);
	else if (sqe->opcode == KCOLL_OP_RECV)
		m_append(&c->recvq[(uint32_t)rank * c->nranks + sqe->peer], op);
	else if (c->r[rank].tail)
		c->r[rank].tail = c->r[rank].tail->next = op;
	else
		c->r[rank].head = c->r[rank].tail = op;
	m_match(c);
}

static void *m_buf(uint64_t addr)
{
	return (void *)(uintptr_t)addr;
}

/* The k-th array of rank @i's table. */
static const uint64_t *m_arr(struct m_op **ops, int n, int i, int k)
{
	return ops[i]->vec + (size_t)k * n;
}

/*
 * The v-variants, checked as the kernel's signatures check them: the
 * counts of ALLGATHERV and REDUCE_SCATTERV alike on every rank,
 * ALLTOALLV's pair by pair. The data moves through @tmp, so that an
 * ALLGATHERV in place reads its own block before anything lands.
 */
/* memcpy of @len bytes, where a buffer of nothing may be NULL. */
static void m_copy(void *dst, const void *src, size_t len)
{
	if (len)
		memcpy(dst, src, len);
}

static int m_run_vec(struct m_op **ops, int n, kcoll_reduce_fn fn)
{
	const struct kcoll_sqe *s0 = &ops[0]->sqe;
	size_t es = coll_dtype_size(s0->dtype), tot = 0, off, at;
	const uint64_t *c0 = m_arr(ops, n, 0, 0);
	uint8_t *tmp;
	int i, j;

	if (s0->opcode == KCOLL_OP_ALLTOALLV) {
		for (i = 0; i < n; i++)
			for (j = 0; j < n; j++)
				if (m_arr(ops, n, i, 0)[j] !=
				    m_arr(ops, n, j, 2)[i])
					return -EBADMSG;
	} else {
		for (i = 1; i < n; i++)
			if (memcmp(m_arr(ops, n, i, 0), c0,
				   (size_t)n * sizeof(*c0)))
				return -EBADMSG;
	}
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
			tot += s0->opcode == KCOLL_OP_ALLTOALLV ?
			       m_arr(ops, n, i, 0)[j] : (i ? 0 : c0[j]);
	tmp = malloc(tot * es + 1);
	if (!tmp)
		return -ENOMEM;
	switch (s0->opcode) {
	case KCOLL_OP_ALLGATHERV:
		for (i = 0, off = 0; i < n; off += c0[i] * es, i++)
			m_copy(tmp + off, m_buf(ops[i]->sqe.send_addr),
			       c0[i] * es);
		for (i = 0; i < n; i++)
			for (j = 0, off = 0; j < n; off += c0[j] * es, j++)
				m_copy((uint8_t *)m_buf(ops[i]->sqe.recv_addr) +
				       m_arr(ops, n, i, 1)[j] * es, tmp + off,
				       c0[j] * es);
		break;
	case KCOLL_OP_REDUCE_SCATTERV:
		m_copy(tmp, m_buf(ops[0]->sqe.send_addr), tot * es);
		for (i = 1; i < n; i++)
			fn(tmp, m_buf(ops[i]->sqe.send_addr), tot);
		if (s0->redop == KCOLL_REDOP_AVG)
			kcoll_reduce_avg_finish(KCOLL_REDUCE_SCALAR, tmp, tot,
						s0->dtype, (u32)n);
		for (i = 0, off = 0; i < n; off += c0[i] * es, i++)
			m_copy(m_buf(ops[i]->sqe.recv_addr), tmp + off,
			       c0[i] * es);
		break;
	case KCOLL_OP_ALLTOALLV:
		/* In tmp, rank i's blocks to everyone, one after another. */
		for (i = 0, at = 0; i < n; i++) {
			for (j = 0; j < n; j++) {
				size_t len = m_arr(ops, n, i, 0)[j] * es;

				m_copy(tmp + at,
				       (uint8_t *)m_buf(ops[i]->sqe.send_addr) +
				       m_arr(ops, n, i, 1)[j] * es, len);
				at += len;
			}
		}
		for (i = 0, at = 0; i < n; i++) {
			for (j = 0; j < n; j++) {
				size_t len = m_arr(ops, n, i, 0)[j] * es;

				m_copy((uint8_t *)m_buf(ops[j]->sqe.recv_addr) +
				       m_arr(ops, n, j, 3)[i] * es,
				       tmp + at, len);
				at += len;
			}
		}
		break;
	}
	free(tmp);
	return 0;
}

/* Run one matched collective (all ranks' ops) on the ranks' buffers. */
static int m_run_coll(struct m_op **ops, int n)
{
	const struct kcoll_sqe *s0 = &ops[0]->sqe;
	size_t es = coll_dtype_size(s0->dtype), c = s0->count, blk = c * es;
	kcoll_reduce_fn fn = NULL;
	uint8_t *tmp;
	int i, j;

	for (i = 1; i < n; i++) {
		const struct kcoll_sqe *s = &ops[i]->sqe;

		if (s->opcode != s0->opcode || s->dtype != s0->dtype ||
		    s->redop != s0->redop ||
		    (!ops[i]->vec && s->count != s0->count) ||
		    s->peer != s0->peer)
			return -EBADMSG;
	}
	if (ops[0]->vec) {
		if (s0->redop) {
			fn = kcoll_reduce_get(KCOLL_REDUCE_SCALAR, s0->dtype,
					      s0->redop);
			if (!fn)
				return -EINVAL;
		}
		return m_run_vec(ops, n, fn);
	}
	if (s0->opcode == KCOLL_OP_BARRIER || !blk)
		return 0;
	if (s0->redop) {
		fn = kcoll_reduce_get(KCOLL_REDUCE_SCALAR, s0->dtype, s0->redop);
		if (!fn)
			return -EINVAL;
	}
	tmp = malloc((size_t)n * blk * (size_t)n + 1);
	switch (s0->opcode) {
	case KCOLL_OP_ALLREDUCE:
	case KCOLL_OP_REDUCE:
		memcpy(tmp, m_buf(ops[0]->sqe.send_addr), blk);
		for (i = 1; i < n; i++)
			fn(tmp, m_buf(ops[i]->sqe.send_addr), c);
		if (s0->redop == KCOLL_REDOP_AVG)
			kcoll_reduce_avg_finish(KCOLL_REDUCE_SCALAR, tmp, c,
						s0->dtype, (u32)n);
		for (i = 0; i < n; i++)
			if (s0->opcode == KCOLL_OP_ALLREDUCE ||
			    (uint32_t)i == s0->peer)
				memcpy(m_buf(ops[i]->sqe.recv_addr), tmp, blk);
		break;
	case KCOLL_OP_BROADCAST:
		memcpy(tmp, m_buf(ops[s0->peer]->sqe.send_addr), blk);
		for (i = 0; i < n; i++)
			memcpy(m_buf(ops[i]->sqe.recv_addr), tmp, blk);
		break;
	case KCOLL_OP_ALLGATHER:
		for (i = 0; i < n; i++)
			memcpy(tmp + (size_t)i * blk,
			       m_buf(ops[i]->sqe.send_addr), blk);
		for (i = 0; i < n; i++)
			memcpy(m_buf(ops[i]->sqe.recv_addr), tmp,
			       (size_t)n * blk);
		break;
	case KCOLL_OP_REDUCE_SCATTER:
		memcpy(tmp, m_buf(ops[0]->sqe.send_addr), (size_t)n * blk);
		for (i = 1; i < n; i++)
			fn(tmp, m_buf(ops[i]->sqe.send_addr), (size_t)n * c);
		if (s0->redop == KCOLL_REDOP_AVG)
			kcoll_reduce_avg_finish(KCOLL_REDUCE_SCALAR, tmp,
						(size_t)n * c, s0->dtype,
						(u32)n);
		for (i = 0; i < n; i++)
			memcpy(m_buf(ops[i]->sqe.recv_addr),
			       tmp + (size_t)i * blk, blk);
		break;
	case KCOLL_OP_ALLTOALL:
		/* tmp block (i, j): what rank i receives from rank j. */
		for (i = 0; i < n; i++)
			for (j = 0; j < n; j++)
				memcpy(tmp + ((size_t)i * n + j) * blk,
				       (uint8_t *)m_buf(ops[j]->sqe.send_addr) +
				       (size_t)i * blk, blk);
		for (i = 0; i < n; i++)
			memcpy(m_buf(ops[i]->sqe.recv_addr),
			       tmp + (size_t)i * n * blk, (size_t)n * blk);
		break;
	case KCOLL_OP_GATHER:
		for (i = 0; i < n; i++)
			memcpy(tmp + (size_t)i * blk,
			       m_buf(ops[i]->sqe.send_addr), blk);
		memcpy(m_buf(ops[s0->peer]->sqe.recv_addr), tmp,
		       (size_t)n * blk);
		break;
	case KCOLL_OP_SCATTER:
		memcpy(tmp, m_buf(ops[s0->peer]->sqe.send_addr),
		       (size_t)n * blk);
		for (i = 0; i < n; i++)
			memcpy(m_buf(ops[i]->sqe.recv_addr),
			       tmp + (size_t)i * blk, blk);
		break;
	}
	free(tmp);
	return 0;
}

static void m_run(struct m_job *j)
{
	int i, res = 0;

	for (i = 0; i < j->nops; i++)
		if (j->ops[i]->ctx->dead)
			res = -ECONNRESET;
	if (!res && j->nops == 2 && j->ops[0]->sqe.opcode == KCOLL_OP_SEND) {
		if (j->ops[0]->sqe.count != j->ops[1]->sqe.count ||
		    j->ops[0]->sqe.dtype != j->ops[1]->sqe.dtype)
			res = -EBADMSG;
		else if (j->ops[0]->sqe.count)
			memcpy(m_buf(j->ops[1]->sqe.recv_addr),
			       m_buf(j->ops[0]->sqe.send_addr),
			       j->ops[0]->sqe.count *
			       coll_dtype_size(j->ops[0]->sqe.dtype));
	} else if (!res) {
		res = m_run_coll(j->ops, j->nops);
	}
	for (i = 0; i < j->nops; i++)
		m_complete(j->ops[i], res);
}

static void *m_worker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&M.lock);
	for (;;) {
		struct m_job *j;
		unsigned int d;

		while (!M.jobs && !M.stop)
			pthread_cond_wait(&M.job_cv, &M.lock);
		if (!M.jobs)
			break;
		j = M.jobs;
		M.jobs = j->next;
		if (!M.jobs)
			M.jobs_tail = &M.jobs;
		M.busy++;
		d = M.max_delay_us ? (unsigned int)rand_r(&M.seed) %
				     M.max_delay_us : 0;
		pthread_mutex_unlock(&M.lock);
		if (d)
			usleep(d);
		pthread_mutex_lock(&M.lock);
		m_run(j);
		free(j);
		M.busy--;
		pthread_cond_broadcast(&M.job_cv);
	}
	pthread_mutex_unlock(&M.lock);
	return NULL;
}

static int m_setup(int fd, struct kcoll_setup *s)
{
	struct m_ctx *ctx;
	uint32_t sq, cq;
	uint8_t *b;
	int err;

	if (M.fd_ctx[fd])
		return -EBUSY;
	err = kcoll_setup_check(s);
	if (!err)
		err = kcoll_ring_size(s->sq_entries, s->cq_entries, s->flags,
				      M_MAX_SQ, M_MAX_CQ, &sq, &cq);
	if (err)
		return err;
	ctx = calloc(1, sizeof(*ctx));
	kcoll_ring_layout(sq, cq, &ctx->l);
	ctx->ring_sz = ctx->l.size;
	ctx->ring = aligned_alloc(4096, ctx->ring_sz);
	memset(ctx->ring, 0, ctx->ring_sz);
	b = ctx->ring;
	ctx->sq_head = (uint32_t *)(b + ctx->l.sq_off.head);
	ctx->sq_tail = (uint32_t *)(b + ctx->l.sq_off.tail);
	ctx->cq_head = (uint32_t *)(b + ctx->l.cq_off.head);
	ctx->cq_tail = (uint32_t *)(b + ctx->l.cq_off.tail);
	ctx->sqes = (struct kcoll_sqe *)(b + ctx->l.sq_off.sqes);
	ctx->cqes = (struct kcoll_cqe *)(b + ctx->l.cq_off.cqes);
	*(uint32_t *)(b + ctx->l.sq_off.ring_mask) = sq - 1;
	*(uint32_t *)(b + ctx->l.sq_off.ring_entries) = sq;
	*(uint32_t *)(b + ctx->l.cq_off.ring_mask) = cq - 1;
	*(uint32_t *)(b + ctx->l.cq_off.ring_entries) = cq;
	ctx->fd = fd;
	ctx->next_comm_id = 1;
	ctx->next_handle = 1;
	ctx->all_next = M.all_ctx;
	M.all_ctx = ctx;
	M.fd_ctx[fd] = ctx;

	s->sq_entries = sq;
	s->cq_entries = cq;
	s->features = KCOLL_FEAT_SINGLE_MMAP | KCOLL_FEAT_NODROP |
		      KCOLL_FEAT_POLL | KCOLL_FEAT_COMM | KCOLL_FEAT_PARENT;
	s->sq_off = ctx->l.sq_off;
	s->cq_off = ctx->l.cq_off;
	s->mmap_size = ctx->ring_sz;
	s->mmap_offset = KCOLL_OFF_RINGS;
	return 0;
}

static uint32_t m_cq_ready(struct m_ctx *ctx)
{
	return kcoll_cq_ready(__atomic_load_n(ctx->cq_head, __ATOMIC_ACQUIRE),
			      ctx->k_cq_tail, ctx->l.cq_entries);
}

static int m_enter(struct m_ctx *ctx, const struct kcoll_enter *e)
{
	int n, consumed = 0, err;

	err = kcoll_enter_check(e, ctx->l.sq_entries, ctx->l.cq_entries);
	if (err)
		return err;
	if (e->to_submit) {
		uint32_t tail = __atomic_load_n(ctx->sq_tail, __ATOMIC_ACQUIRE);

		n = kcoll_sq_ready(ctx->k_sq_head, tail, ctx->l.sq_entries,
				   e->to_submit);
		if (n < 0)
			return n;
		while (consumed < n) {
			struct kcoll_sqe sqe;

			if (!kcoll_cq_space(__atomic_load_n(ctx->cq_head,
							    __ATOMIC_ACQUIRE),
					    ctx->k_cq_tail, ctx->l.cq_entries,
					    ctx->inflight))
				break;
			sqe = ctx->sqes[ctx->k_sq_head & (ctx->l.sq_entries - 1)];
			ctx->k_sq_head++;
			ctx->inflight++;
			consumed++;
			m_accept(ctx, &sqe);
		}
		__atomic_store_n(ctx->sq_head, ctx->k_sq_head, __ATOMIC_RELEASE);
		if (n && !consumed)
			return -EBUSY;
		if (consumed)
			ctx->submits++;
	}
	if ((e->flags & KCOLL_ENTER_GETEVENTS) && e->min_complete) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (time_t)(e->timeout_ns / 1000000000ULL);
		ts.tv_nsec += (long)(e->timeout_ns % 1000000000ULL);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (m_cq_ready(ctx) < e->min_complete) {
			if (!e->timeout_ns) {
				pthread_cond_wait(&M.cv, &M.lock);
			} else if (pthread_cond_timedwait(&M.cv, &M.lock, &ts)) {
				if (m_cq_ready(ctx) < e->min_complete &&
				    !consumed)
					return -ETIME;
				break;
			}
		}
	}
	return consumed;
}

static int m_comm_create(struct m_ctx *ctx, struct kcoll_comm_create *cc)
{
	const struct kcoll_rank_addr *tab = m_buf(cc->ranks);
	struct m_comm *c;
	struct timespec ts;
	uint32_t i, slot;
	int err = 0;

	if (!cc->uid || !cc->nranks || cc->nranks > 64 ||
	    cc->rank >= cc->nranks || (cc->flags & ~KCOLL_COMM_FLAGS) || cc->resv0 || cc->comm_id ||
	    cc->parent_uid == cc->uid || !kcoll_all_zero(cc->resv, sizeof(cc->resv)))
		return -EINVAL;
	for (i = 0; i < cc->nranks; i++) {
		struct in_addr ip;

		if (!coll_addr_to_ipv4(&tab[i], &ip))
			return -EAFNOSUPPORT;
		if (tab[i].resv)
			return -EINVAL;
	}
	for (slot = 0; slot < M_MAX_COMMS && ctx->comms[slot].id; slot++)
		;
	if (slot == M_MAX_COMMS)
		return -ENOSPC;
	for (c = M.all_comm; c && (c->uid != cc->uid || c->lost);
	     c = c->all_next)
		;
	if (!c) {
		c = calloc(1, sizeof(*c));
		c->uid = cc->uid;
		c->nranks = cc->nranks;
		memcpy(c->key, cc->key, KCOLL_KEY_LEN);
		c->r = calloc(cc->nranks, sizeof(*c->r));
		c->sendq = calloc((size_t)cc->nranks * cc->nranks,
				  sizeof(*c->sendq));
		c->recvq = calloc((size_t)cc->nranks * cc->nranks,
				  sizeof(*c->recvq));
		c->all_next = M.all_comm;
		M.all_comm = c;
	}
	if (c->nranks != cc->nranks)
		return -EINVAL;
	/* The peers refuse a rank with another key. */
	if (memcmp(c->key, cc->key, KCOLL_KEY_LEN))
		return -EACCES;
	if (c->r[cc->rank].in)
		return -EEXIST;
	c->r[cc->rank].in = true;
	c->r[cc->rank].ctx = ctx;
	c->joined++;
	pthread_cond_broadcast(&M.cv);

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += cc->timeout_ms ? cc->timeout_ms / 1000 : 5;
	ts.tv_nsec += (long)(cc->timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	while (c->joined < c->nranks && !err)
		err = pthread_cond_timedwait(&M.cv, &M.lock, &ts);
	if (c->joined < c->nranks) {
		c->r[cc->rank].in = false;
		c->r[cc->rank].ctx = NULL;
		c->joined--;
		return -ETIMEDOUT;
	}
	ctx->comms[slot].id = ctx->next_comm_id++;
	ctx->comms[slot].comm = c;
	ctx->comms[slot].rank = (int)cc->rank;
	cc->comm_id = ctx->comms[slot].id;
	return 0;
}

/* This rank leaves @slot's communicator: its ops are cancelled, the
 * others lose a peer. */
static void m_comm_leave(struct m_ctx *ctx, int slot, int err)
{
	struct m_comm *c = ctx->comms[slot].comm;
	int rank = ctx->comms[slot].rank;
	struct m_op *op;
	uint32_t i, n = c->nranks;

	while ((op = c->r[rank].head)) {
		c->r[rank].head = op->next;
		m_complete(op, err);
	}
	c->r[rank].tail = NULL;
	for (i = 0; i < n; i++) {
		struct m_op **q[2] = { &c->sendq[(uint32_t)rank * n + i],
				       &c->recvq[(uint32_t)rank * n + i] };
		int k;

		for (k = 0; k < 2; k++) {
			while ((op = *q[k])) {
				*q[k] = op->next;
				m_complete(op, err);
			}
		}
	}
	c->r[rank].in = false;
	m_comm_lose(c, -ECONNRESET);
	memset(&ctx->comms[slot], 0, sizeof(ctx->comms[slot]));
}

static int m_ioctl(int fd, unsigned long req, void *arg)
{
	struct m_ctx *ctx = M.fd_ctx[fd];
	int i;

	if (req == KCOLL_IOC_SETUP)
		return m_setup(fd, arg);
	if (!ctx)
		return -EBADFD;
	switch (req) {
	case KCOLL_IOC_ENTER:
		return m_enter(ctx, arg);
	case KCOLL_IOC_COMM_CREATE:
		return m_comm_create(ctx, arg);
	case KCOLL_IOC_COMM_DESTROY: {
		struct kcoll_comm_destroy *d = arg;

		for (i = 0; i < M_MAX_COMMS; i++) {
			if (d->comm_id && ctx->comms[i].id == d->comm_id) {
				m_comm_leave(ctx, i, -ECANCELED);
				return 0;
			}
		}
		return -ENOENT;
	}
	case KCOLL_IOC_REG_MEM: {
		struct kcoll_reg_mem *r = arg;
		struct m_mem *m;

		for (i = 0; i < M_MAX_COMMS; i++)
			if (r->comm_id && ctx->comms[i].id == r->comm_id)
				break;
		if (i == M_MAX_COMMS)
			return -ENOENT;
		if (!r->len || r->handle || r->resv ||
		    (r->flags & ~KCOLL_REG_FLAGS) ||
		    ((r->flags & KCOLL_REG_DMABUF) &&
		     (r->flags & KCOLL_REG_READONLY)) ||
		    (!(r->flags & KCOLL_REG_DMABUF) &&
		     (!r->addr || (r->flags & ~KCOLL_REG_READONLY) ||
		      r->dmabuf_fd || r->dmabuf_off)))
			return -EINVAL;
		if (!(r->flags & KCOLL_REG_DMABUF)) {
			/* Pinning fails on what is not mapped. */
			long pg = sysconf(_SC_PAGESIZE);
			uint64_t a = r->addr & ~(uint64_t)(pg - 1);
			unsigned char v;

			for (; a < r->addr + r->len; a += pg)
				if (mincore((void *)(uintptr_t)a, pg, &v) &&
				    errno == ENOMEM)
					return -EFAULT;
		}
		if (r->flags & KCOLL_REG_DMABUF) {
			/* What the kernel would import: recorded for the
			 * test; the data path stays the model's memcpy on
			 * the address (a host mapping in the tests). */
			struct stat st;

			if (fstat(r->dmabuf_fd, &st))
				return -EBADF;
			kcoll_model_last_dmabuf.ino = st.st_ino;
			kcoll_model_last_dmabuf.off = r->dmabuf_off;
			kcoll_model_last_dmabuf.len = r->len;
			kcoll_model_last_dmabuf.addr = r->addr;
			kcoll_model_last_dmabuf.flags = r->flags;
			kcoll_model_last_dmabuf.count++;
		}
		m = calloc(1, sizeof(*m));
		m->handle = ctx->next_handle++;
		m->comm_id = r->comm_id;
		m->addr = r->addr;
		m->len = r->len;
		m->next = ctx->mems;
		ctx->mems = m;
		r->handle = m->handle;
		return 0;
	}
	case KCOLL_IOC_DEREG_MEM: {
		struct kcoll_dereg_mem *d = arg;
		struct m_mem **pp, *m;

		for (pp = &ctx->mems; *pp && (*pp)->handle != d->handle;
		     pp = &(*pp)->next)
			;
		m = *pp;
		if (!m)
			return -ENOENT;
		if (m->users)
			return -EBUSY;
		*pp = m->next;
		free(m);
		return 0;
	}
	default:
		return -ENOTTY;
	}
}

int __wrap_ioctl(int fd, unsigned long req, void *arg)
{
	int ret;

	if (!m_is_dev(fd))
		return __real_ioctl(fd, req, arg);
	pthread_mutex_lock(&M.lock);
	ret = m_ioctl(fd, req, arg);
	pthread_mutex_unlock(&M.lock);
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return ret;
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off)
{
	struct m_ctx *ctx;
	void *p = MAP_FAILED;

	if (!m_is_dev(fd))
		return __real_mmap(addr, len, prot, flags, fd, off);
	pthread_mutex_lock(&M.lock);
	ctx = M.fd_ctx[fd];
	if (ctx && len == ctx->ring_sz && off == 0 && (flags & MAP_SHARED))
		p = ctx->ring;
	pthread_mutex_unlock(&M.lock);
	if (p == MAP_FAILED)
		errno = EINVAL;
	return p;
}

/* coll_ring_exit() unmaps, then closes: the file's release. */
int __wrap_munmap(void *addr, size_t len)
{
	struct m_ctx *ctx;
	int i;

	pthread_mutex_lock(&M.lock);
	for (ctx = M.all_ctx; ctx && (ctx->dead || ctx->ring != addr);
	     ctx = ctx->all_next)
		;
	if (!ctx) {
		pthread_mutex_unlock(&M.lock);
		return __real_munmap(addr, len);
	}
	for (i = 0; i < M_MAX_COMMS; i++)
		if (ctx->comms[i].id)
			m_comm_leave(ctx, i, -ECANCELED);
	ctx->dead = true;
	M.fd_ctx[ctx->fd] = NULL;
	free(ctx->ring);
	ctx->ring = NULL;
	while (ctx->mems) {
		struct m_mem *m = ctx->mems;

		ctx->mems = m->next;
		free(m);
	}
	pthread_mutex_unlock(&M.lock);
	return 0;
}

void kcoll_model_start(unsigned int max_delay_us, unsigned int seed)
{
	pthread_condattr_t ca;
	struct stat st;
	int fd;

	snprintf(M.path, sizeof(M.path), "/tmp/kcoll-model-XXXXXX");
	fd = mkstemp(M.path);
	if (fd < 0 || fstat(fd, &st)) {
		perror("model");
		exit(1);
	}
	close(fd);
	M.dev = st.st_dev;
	M.ino = st.st_ino;
	setenv(COLL_DEVICE_ENV, M.path, 1);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&M.cv, &ca);
	pthread_condattr_destroy(&ca);
	M.jobs_tail = &M.jobs;
	M.seed = seed;
	M.max_delay_us = max_delay_us;
	pthread_create(&M.worker, NULL, m_worker, NULL);
}

void kcoll_model_stop(void)
{
	pthread_mutex_lock(&M.lock);
	M.stop = true;
	pthread_cond_broadcast(&M.job_cv);
	pthread_mutex_unlock(&M.lock);
	pthread_join(M.worker, NULL);
	while (M.all_ctx) {
		struct m_ctx *c = M.all_ctx;

		M.all_ctx = c->all_next;
		free(c->ring);
		while (c->mems) {
			struct m_mem *m = c->mems;

			c->mems = m->next;
			free(m);
		}
		free(c);
	}
	while (M.all_comm) {
		struct m_comm *c = M.all_comm;

		M.all_comm = c->all_next;
		m_comm_lose(c, -ECANCELED);
		free(c->r);
		free(c->sendq);
		free(c->recvq);
		free(c);
	}
	unlink(M.path);
	unsetenv(COLL_DEVICE_ENV);
}

static unsigned int model_counter(int fd, bool mr)
{
	unsigned int v = 0;

	pthread_mutex_lock(&M.lock);
	if (fd >= 0 && fd < M_MAX_FD && M.fd_ctx[fd])
		v = mr ? M.fd_ctx[fd]->mr_sqes : M.fd_ctx[fd]->submits;
	pthread_mutex_unlock(&M.lock);
	return v;
}

unsigned int kcoll_model_submits(int fd)
{
	return model_counter(fd, false);
}

unsigned int kcoll_model_mr_sqes(int fd)
{
	return model_counter(fd, true);
}
