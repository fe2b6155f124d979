// SPDX-License-Identifier: MIT
/*
 * libcoll communicators against the model of /dev/kcoll in kcoll_model.c
 * (no kernel needed): ranks are threads; every collective x dtype x
 * reduction x count x placement through the rotating API forms (blocking,
 * non-blocking, groups, registered buffers), checked with
 * tests/oracle/kcoll-check.h (the reference of the VM test) and guard bytes; CQ
 * overflow handling with a tiny ring, one ENTER per group, several threads
 * waiting on one communicator, signature mismatch, a wrong key, a lost
 * peer, registrations, argument checks; split, shrink and grow. Runs under ASan/UBSan, which also
 * catches leaked requests.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "coll.h"
#include "coll_internal.h"
#include "kcoll-check.h"
#include "kcoll-issue.h"
#include "kcoll-vcheck.h"
#include "kcoll_model.h"
#include "unit.h"

/* ------------------------------------------------------------------ */
/* Ranks as threads                                                    */
/* ------------------------------------------------------------------ */

struct rank {
	int rank, nranks;
	coll_unique_id id;
	void (*body)(struct rank *r, coll_comm *comm);
	bool no_comm;			/* body creates its own */
	int ret;
	long fails;
	char msg[512];
	pthread_t th;
};

static __attribute__((format(printf, 2, 3)))
void rank_fail(struct rank *r, const char *fmt, ...)
{
	size_t l = strlen(r->msg);
	va_list ap;

	if (r->fails++ || l >= sizeof(r->msg) - 2)
		return;
	va_start(ap, fmt);
	vsnprintf(r->msg + l, sizeof(r->msg) - l, fmt, ap);
	va_end(ap);
}

static void *rank_main(void *arg)
{
	struct rank *r = arg;
	coll_comm *comm = NULL;

	if (!r->no_comm) {
		r->ret = coll_comm_init_rank(&comm, r->nranks, &r->id, r->rank);
		if (r->ret) {
			rank_fail(r, "init: %s", coll_last_error());
			return NULL;
		}
		if (coll_comm_rank(comm) != r->rank ||
		    coll_comm_size(comm) != r->nranks)
			rank_fail(r, "rank/size");
	}
	r->body(r, comm);
	if (comm) {
		int ret = coll_comm_destroy(comm);

		if (ret)
			rank_fail(r, "destroy: %d", ret);
	}
	return NULL;
}

/* Run @body on @n ranks; true if every rank passed. */
static bool run_ranks(int n, void (*body)(struct rank *, coll_comm *),
		      bool no_comm)
{
	struct rank *r = calloc((size_t)n, sizeof(*r));
	coll_unique_id id;
	bool ok = true;
	int i;

	if (!UNIT_EQ_INT(coll_get_unique_id(&id), 0))
		return false;
	for (i = 0; i < n; i++) {
		r[i].rank = i;
		r[i].nranks = n;
		r[i].id = id;
		r[i].body = body;
		r[i].no_comm = no_comm;
		pthread_create(&r[i].th, NULL, rank_main, &r[i]);
	}
	for (i = 0; i < n; i++) {
		pthread_join(r[i].th, NULL);
		if (r[i].fails || r[i].ret) {
			UNIT_FAIL("rank %d of %d: %ld failures: %s", i, n,
				  r[i].fails, r[i].msg);
			ok = false;
		}
	}
	free(r);
	return ok;
}

/* ------------------------------------------------------------------ */
/* Cases                                                               */
/* ------------------------------------------------------------------ */

enum style { ST_BLOCKING, ST_NONBLOCKING, ST_GROUP, ST_REGISTERED, ST_NR };

static int wait_free(int ret, coll_request *req)
{
	if (ret)
		return ret;
	ret = coll_wait(req);
	coll_request_free(req);
	return ret;
}

static int issue(const struct chk_case *c, void *send, void *recv,
		 enum style st, coll_comm *comm)
{
	int next = (c->rank + 1) % c->nranks;
	int prev = (c->rank + c->nranks - 1) % c->nranks;
	bool nb = st == ST_NONBLOCKING;
	coll_request *req = NULL, *req2 = NULL;
	int ret = -EINVAL, r2;

	if (st == ST_GROUP)
		coll_group_start();
	switch (c->coll) {
	case CHK_SENDRECV:
		if (nb) {
			ret = coll_isend(send, c->count, c->dt, next, comm, &req);
			r2 = coll_irecv(recv, c->count, c->dt, prev, comm,
					&req2);
			ret = wait_free(ret, req);
			r2 = wait_free(r2, req2);
			return ret ? ret : r2;
		}
		if (st != ST_GROUP)
			coll_group_start();
		ret = coll_send(send, c->count, c->dt, next, comm);
		r2 = coll_recv(recv, c->count, c->dt, prev, comm);
		ret = ret ? ret : r2;
		if (st != ST_GROUP) {
			r2 = coll_group_end();
			return ret ? ret : r2;
		}
		break;
	default:
		ret = chk_issue(c, send, recv, comm, nb ? &req : NULL);
		break;
	}
	if (st == ST_GROUP) {
		r2 = coll_group_end();
		return ret ? ret : r2;
	}
	return nb ? wait_free(ret, req) : ret;
}

#define GUARD 32

static size_t run_case(struct rank *r, coll_comm *comm,
		       const struct chk_case *c, enum style st)
{
	size_t es = coll_dtype_size(c->dt), sl, rl, bad, i;
	uint8_t *sb, *rb = NULL;
	void *sp, *rp;
	coll_mem *ms = NULL, *mr = NULL;
	char why[160];
	int ret;

	sl = (c->in_place ? chk_inplace_elems(c) : chk_send_elems(c)) * es;
	rl = c->in_place ? 0 : chk_recv_elems(c) * es;
	sb = malloc(sl + 2 * GUARD);
	memset(sb, 0x5a, sl + 2 * GUARD);
	if (!c->in_place) {
		rb = malloc(rl + 2 * GUARD);
		memset(rb, 0x5a, rl + 2 * GUARD);
	}
	chk_fill(c, sb + GUARD, rb ? rb + GUARD : NULL);
	if (c->in_place) {
		chk_inplace_ptrs(c, sb + GUARD, &sp, &rp);
	} else {
		sp = sb + GUARD;
		rp = rb + GUARD;
	}
	if (st == ST_REGISTERED) {
		if (sl && coll_mem_register(comm, sb + GUARD, sl, &ms))
			rank_fail(r, "register");
		if (rl && coll_mem_register(comm, rb + GUARD, rl, &mr))
			rank_fail(r, "register");
	}
	ret = issue(c, sp, rp, st, comm);
	if (ret) {
		bad = 1;
		rank_fail(r, "%s %s %s count %zu in_place %d style %d: %d",
			  chk_coll_names[c->coll], coll_dtype_name(c->dt),
			  coll_redop_name(c->op), c->count, c->in_place, st,
			  ret);
	} else {
		bad = chk_verify(c, sb + GUARD, rb ? rb + GUARD : NULL, why,
				 sizeof(why));
		if (bad)
			rank_fail(r, "%s %s %s count %zu in_place %d style %d: "
				  "%s", chk_coll_names[c->coll],
				  coll_dtype_name(c->dt), coll_redop_name(c->op),
				  c->count, c->in_place, st, why);
	}
	for (i = 0; i < GUARD; i++) {
		if (sb[i] != 0x5a || sb[GUARD + sl + i] != 0x5a ||
		    (rb && (rb[i] != 0x5a || rb[GUARD + rl + i] != 0x5a))) {
			rank_fail(r, "guard bytes overwritten");
			bad++;
			break;
		}
	}
	if (ms && coll_mem_deregister(comm, ms))
		rank_fail(r, "deregister");
	if (mr && coll_mem_deregister(comm, mr))
		rank_fail(r, "deregister");
	free(sb);
	free(rb);
	return bad;
}

static void body_matrix(struct rank *r, coll_comm *comm)
{
	const size_t counts[] = { 0, 1, 7, 3 * (size_t)r->nranks + 1, 1001 };
	unsigned int seq = 0;
	int coll, dt, op, k, ip;

	for (coll = 0; coll < CHK_NR; coll++) {
		if (coll == CHK_SENDRECV && r->nranks < 2)
			continue;
		for (dt = COLL_DTYPE_FIRST; dt <= COLL_DTYPE_LAST; dt++) {
			for (op = COLL_REDOP_FIRST; op <= COLL_REDOP_LAST;
			     op++) {
				struct chk_case c = {
					.coll = coll, .dt = dt,
					.rank = r->rank, .nranks = r->nranks,
				};

				if (chk_reduces(coll)) {
					if (!coll_redop_valid(dt, op))
						continue;
					c.op = op;
				} else if (op != COLL_REDOP_FIRST) {
					break;
				}
				for (k = 0; k < 5; k++) {
					for (ip = 0; ip < 2; ip++) {
						if (ip && !chk_has_in_place(coll))
							continue;
						c.count = counts[k];
						c.in_place = ip;
						c.root = (int)((counts[k] + (size_t)dt) %
							       (size_t)r->nranks);
						run_case(r, comm, &c,
							 seq++ % ST_NR);
					}
				}
			}
		}
	}
}

static void test_matrix_3(void)
{
	run_ranks(3, body_matrix, false);
}

static void test_matrix_2(void)
{
	run_ranks(2, body_matrix, false);
}

static void test_matrix_1(void)
{
	run_ranks(1, body_matrix, false);
}

/* Many more operations than the CQ holds; groups that split. */
static void body_flood(struct rank *r, coll_comm *comm)
{
	enum { N = 300, C = 8 };
	struct chk_case c = {
		.coll = CHK_ALLREDUCE, .dt = COLL_DTYPE_INT32,
		.op = COLL_REDOP_SUM, .count = C, .in_place = true,
		.rank = r->rank, .nranks = r->nranks,
	};
	coll_request **req = calloc(N, sizeof(*req));
	int32_t *buf = malloc(N * C * sizeof(int32_t));
	int i, ret;

	for (i = 0; i < N; i++) {
		chk_fill(&c, buf + i * C, NULL);
		ret = coll_iallreduce(buf + i * C, buf + i * C, C, c.dt, c.op,
				      comm, &req[i]);
		if (ret)
			rank_fail(r, "iallreduce %d: %d", i, ret);
	}
	for (i = N - 1; i >= 0; i--) {
		if (!req[i])
			continue;
		ret = coll_wait(req[i]);
		coll_request_free(req[i]);
		if (ret || chk_verify(&c, buf + i * C, NULL, NULL, 0))
			rank_fail(r, "allreduce %d: %d or wrong", i, ret);
	}
	/* 100 blocking calls in one group: the SQ (4) fills many times. */
	coll_group_start();
	for (i = 0; i < 100; i++) {
		chk_fill(&c, buf + i * C, NULL);
		ret = coll_allreduce(buf + i * C, buf + i * C, C, c.dt, c.op,
				     comm);
		if (ret)
			rank_fail(r, "queued allreduce %d: %d", i, ret);
	}
	ret = coll_group_end();
	if (ret)
		rank_fail(r, "group_end: %d", ret);
	for (i = 0; i < 100; i++)
		if (chk_verify(&c, buf + i * C, NULL, NULL, 0))
			rank_fail(r, "grouped allreduce %d wrong", i);
	free(req);
	free(buf);
}

static void test_flood_small_ring(void)
{
	setenv(COLL_ENV_RING_ENTRIES, "4", 1);
	run_ranks(3, body_flood, false);
	unsetenv(COLL_ENV_RING_ENTRIES);
}

/* One ENTER per communicator for a whole group. */
static void body_group_enter(struct rank *r, coll_comm *comm)
{
	int fd = coll_comm_fd(comm);
	coll_request *req[5];
	int32_t buf[5][4];
	unsigned int before;
	int i, ret;

	memset(buf, 0, sizeof(buf));
	before = kcoll_model_submits(fd);
	coll_group_start();
	coll_group_start();		/* nested */
	for (i = 0; i < 5; i++) {
		ret = coll_iallreduce(buf[i], buf[i], 4, COLL_DTYPE_INT32,
				      COLL_REDOP_SUM, comm, &req[i]);
		if (ret)
			rank_fail(r, "iallreduce: %d", ret);
	}
	coll_barrier(comm);
	if (coll_group_end())		/* inner: submits nothing */
		rank_fail(r, "inner group_end");
	if (kcoll_model_submits(fd) != before)
		rank_fail(r, "submitted inside the group");
	ret = coll_group_end();
	if (ret)
		rank_fail(r, "group_end: %d", ret);
	if (kcoll_model_submits(fd) != before + 1)
		rank_fail(r, "%u ENTERs for one group",
			  kcoll_model_submits(fd) - before);
	for (i = 0; i < 5; i++) {
		ret = coll_wait(req[i]);
		coll_request_free(req[i]);
		if (ret)
			rank_fail(r, "request %d: %d", i, ret);
	}
}

static void test_group_one_enter(void)
{
	run_ranks(3, body_group_enter, false);
}

/* Several threads wait on requests of one communicator at once. */
struct waiter {
	coll_request **req;
	int first, step, n;
	int bad;
	bool test_only;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	int i, done, ret;

	for (i = w->first; i < w->n; i += w->step) {
		if (w->test_only) {
			do {
				ret = coll_test(w->req[i], &done);
				if (!done)
					usleep(100);
			} while (!done);
		} else {
			ret = coll_wait(w->req[i]);
		}
		w->bad += ret != 0;
	}
	return NULL;
}

static void body_threads(struct rank *r, coll_comm *comm)
{
	enum { N = 64, W = 5 };
	coll_request *req[N];
	int64_t buf[N];
	struct waiter w[W];
	pthread_t th[W];
	int i, ret;

	for (i = 0; i < N; i++) {
		buf[i] = r->rank + i;
		ret = coll_iallreduce(&buf[i], &buf[i], 1, COLL_DTYPE_INT64,
				      COLL_REDOP_SUM, comm, &req[i]);
		if (ret) {
			rank_fail(r, "iallreduce: %d", ret);
			return;
		}
	}
	for (i = 0; i < W; i++) {
		w[i] = (struct waiter){ .req = req, .first = i, .step = W,
					.n = N, .test_only = i == W - 1 };
		pthread_create(&th[i], NULL, waiter_main, &w[i]);
	}
	for (i = 0; i < W; i++) {
		pthread_join(th[i], NULL);
		if (w[i].bad)
			rank_fail(r, "waiter %d: %d failed", i, w[i].bad);
	}
	for (i = 0; i < N; i++) {
		int64_t want = (int64_t)r->nranks * i +
			       (int64_t)r->nranks * (r->nranks - 1) / 2;

		if (buf[i] != want)
			rank_fail(r, "allreduce %d: %lld != %lld", i,
				  (long long)buf[i], (long long)want);
		coll_request_free(req[i]);
	}
}

static void test_threads_wait(void)
{
	run_ranks(3, body_threads, false);
}

static void body_mismatch(struct rank *r, coll_comm *comm)
{
	int32_t buf[11] = { 0 };
	int ret;

	ret = coll_allreduce(buf, buf, r->rank == 1 ? 11 : 10,
			     COLL_DTYPE_INT32, COLL_REDOP_SUM, comm);
	if (ret != -EBADMSG)
		rank_fail(r, "mismatch returned %d", ret);
	ret = coll_allreduce(buf, buf, 10, COLL_DTYPE_INT32, COLL_REDOP_SUM,
			     comm);
	if (ret)
		rank_fail(r, "the next allreduce returned %d", ret);
}

static void test_mismatch(void)
{
	run_ranks(3, body_mismatch, false);
}

static int wrong_key_refused;

/* The last rank uses a modified key: every rank's creation fails. */
static void body_wrong_key(struct rank *r, coll_comm *comm)
{
	uint8_t key[KCOLL_KEY_LEN];
	struct kcoll_rank_addr self, table[8];
	uint64_t uid;
	int ret;

	(void)comm;
	ret = coll_node_addr(&self);
	if (!ret)
		ret = coll_bootstrap(&r->id, r->nranks, r->rank, &self, table,
				     &uid);
	if (!ret)
		ret = coll_unique_id_secret(&r->id, key);
	if (ret) {
		rank_fail(r, "bootstrap: %s", coll_last_error());
		return;
	}
	if (r->rank == r->nranks - 1)
		key[3] ^= 1;
	ret = coll_comm_init_table(&comm, r->nranks, r->rank, table, uid, key);
	if (!ret) {
		rank_fail(r, "created with a wrong key around");
		coll_comm_destroy(comm);
		return;
	}
	/* The model: whoever comes with a key other than the first
	 * creator's is refused; the others wait for it in vain. */
	if (ret != -EACCES && ret != -ETIMEDOUT)
		rank_fail(r, "creation returned %d", ret);
	if (ret == -EACCES)
		__atomic_add_fetch(&wrong_key_refused, 1, __ATOMIC_RELAXED);
	if (!strstr(coll_last_error(), "KCOLL_IOC_COMM_CREATE"))
		rank_fail(r, "last error: %s", coll_last_error());
}

static void test_wrong_key(void)
{
	setenv(COLL_ENV_CONNECT_TIMEOUT, "300", 1);
	wrong_key_refused = 0;
	run_ranks(3, body_wrong_key, true);
	UNIT_CHECK(wrong_key_refused >= 1);
	unsetenv(COLL_ENV_CONNECT_TIMEOUT);
}

/* The last rank goes away; the others' operations fail, not hang. */
static void body_peer_lost(struct rank *r, coll_comm *comm)
{
	coll_request *req;
	int32_t v = 1;
	int ret;

	ret = coll_barrier(comm);
	if (ret)
		rank_fail(r, "barrier: %d", ret);
	if (r->rank == r->nranks - 1) {
		/* Leave at once: an operation the others wait for never
		 * comes. */
		ret = coll_iallreduce(&v, &v, 1, COLL_DTYPE_INT32,
				      COLL_REDOP_SUM, comm, &req);
		coll_request_free(req);		/* freed while in flight */
		ret = coll_comm_abort(comm);
		if (ret)
			rank_fail(r, "abort: %d", ret);
		return;
	}
	ret = coll_allreduce(&v, &v, 1, COLL_DTYPE_INT32, COLL_REDOP_SUM, comm);
	if (ret) {
		/* The peer left after its allreduce: so did this one. */
		if (ret != -ECONNRESET)
			rank_fail(r, "first allreduce: %d", ret);
	}
	ret = coll_allreduce(&v, &v, 1, COLL_DTYPE_INT32, COLL_REDOP_SUM, comm);
	if (ret != -ECONNRESET)
		rank_fail(r, "second allreduce: %d", ret);
	/* An operation issued now fails at once too. */
	ret = coll_barrier(comm);
	if (ret != -ECONNRESET)
		rank_fail(r, "barrier after the loss: %d", ret);
}

static void *peer_lost_main(void *arg)
{
	struct rank *r = arg;
	coll_comm *comm = NULL;

	r->ret = coll_comm_init_rank(&comm, r->nranks, &r->id, r->rank);
	if (r->ret)
		return NULL;
	body_peer_lost(r, comm);
	if (r->rank != r->nranks - 1)
		coll_comm_destroy(comm);	/* the last one aborted */
	return NULL;
}

static void test_peer_lost(void)
{
	struct rank r[3];
	coll_unique_id id;
	int i;

	if (!UNIT_EQ_INT(coll_get_unique_id(&id), 0))
		return;
	memset(r, 0, sizeof(r));
	for (i = 0; i < 3; i++) {
		r[i].rank = i;
		r[i].nranks = 3;
		r[i].id = id;
		pthread_create(&r[i].th, NULL, peer_lost_main, &r[i]);
	}
	for (i = 0; i < 3; i++) {
		pthread_join(r[i].th, NULL);
		if (!UNIT_EQ_INT(r[i].ret, 0) || !UNIT_EQ_INT(r[i].fails, 0))
			unit_diag("rank %d: %s", i, r[i].msg);
	}
}

static pthread_barrier_t mem_barrier;

/* Registrations: used automatically, -EBUSY while in use. */
static void body_mem(struct rank *r, coll_comm *comm)
{
	int fd = coll_comm_fd(comm);
	int32_t *big = calloc(8192, sizeof(int32_t));	/* half registered */
	unsigned int before;
	coll_request *req;
	coll_mem *m;
	int ret;

	ret = coll_mem_register(comm, big, 4096 * sizeof(int32_t), &m);
	if (ret) {
		rank_fail(r, "register: %d", ret);
		free(big);
		return;
	}
	before = kcoll_model_mr_sqes(fd);
	/* Inside: both buffers named; straddling the end: not named. */
	ret = coll_allreduce(big + 100, big + 2000, 1000, COLL_DTYPE_INT32,
			     COLL_REDOP_SUM, comm);
	if (ret)
		rank_fail(r, "allreduce: %d", ret);
	if (kcoll_model_mr_sqes(fd) != before + 2)
		rank_fail(r, "%u buffers named a registration, not 2",
			  kcoll_model_mr_sqes(fd) - before);
	if (r->rank == 0) {
		int32_t *odd = malloc(8192 * sizeof(int32_t));

		ret = coll_allreduce(big + 4000, odd, 100, COLL_DTYPE_INT32,
				     COLL_REDOP_SUM, comm);
		free(odd);
	} else {
		ret = coll_allreduce(big, big, 100, COLL_DTYPE_INT32,
				     COLL_REDOP_SUM, comm);
	}
	if (ret)
		rank_fail(r, "allreduce 2: %d", ret);
	if (r->rank == 0 && kcoll_model_mr_sqes(fd) != before + 2)
		rank_fail(r, "a straddling buffer named a registration");

	/* Rank 0 has an operation in flight on it until the others come. */
	if (r->rank == 0) {
		ret = coll_iallreduce(big, big, 10, COLL_DTYPE_INT32,
				      COLL_REDOP_SUM, comm, &req);
		if (!ret && coll_mem_deregister(comm, m) != -EBUSY)
			rank_fail(r, "deregister while in use did not fail");
		pthread_barrier_wait(&mem_barrier);
		ret = ret ? ret : coll_wait(req);
		coll_request_free(req);
	} else {
		pthread_barrier_wait(&mem_barrier);
		ret = coll_allreduce(big, big, 10, COLL_DTYPE_INT32,
				     COLL_REDOP_SUM, comm);
	}
	if (ret)
		rank_fail(r, "allreduce 3: %d", ret);
	if (r->rank == 1) {
		/* Left for coll_comm_destroy() to release. */
	} else if ((ret = coll_mem_deregister(comm, m))) {
		rank_fail(r, "deregister: %d", ret);
	}
	if (coll_mem_deregister(comm, (coll_mem *)&ret) != -EINVAL)
		rank_fail(r, "deregister of a stranger");
	free(big);
}

static void test_mem(void)
{
	pthread_barrier_init(&mem_barrier, NULL, 3);
	run_ranks(3, body_mem, false);
	pthread_barrier_destroy(&mem_barrier);
}

/* Argument checks on a live communicator; requests left to destroy. */
static void body_args(struct rank *r, coll_comm *comm)
{
	coll_request *req = NULL, *keep = NULL;
	int32_t v = 0, done = 0;
	int ret;

	if (coll_allreduce(&v, &v, 1, (coll_dtype)0, COLL_REDOP_SUM, comm) !=
	    -EINVAL ||
	    coll_allreduce(&v, &v, 1, COLL_DTYPE_INT32, COLL_REDOP_AVG, comm) !=
	    -EINVAL ||
	    coll_allreduce(&v, &v, 1, COLL_DTYPE_INT32, (coll_redop)9, comm) !=
	    -EINVAL ||
	    coll_reduce(&v, &v, 1, COLL_DTYPE_INT32, COLL_REDOP_SUM, 3, comm) !=
	    -EINVAL ||
	    coll_broadcast(&v, &v, 1, COLL_DTYPE_INT32, -1, comm) != -EINVAL ||
	    coll_send(&v, 1, COLL_DTYPE_INT32, 7, comm) != -EINVAL ||
	    coll_allreduce(NULL, NULL, 1, COLL_DTYPE_INT32, COLL_REDOP_SUM,
			   comm) != -EINVAL ||
	    coll_iallreduce(&v, &v, 1, COLL_DTYPE_INT32, COLL_REDOP_SUM, comm,
			    NULL) != -EINVAL ||
	    coll_allgather(&v, &v, SIZE_MAX / 2, COLL_DTYPE_INT32, comm) !=
	    -EOVERFLOW)
		rank_fail(r, "an argument check");
	/* The kernel refuses a send to oneself: the CQE says so. */
	ret = coll_send(&v, 1, COLL_DTYPE_INT32, r->rank, comm);
	if (ret != -EINVAL)
		rank_fail(r, "send to self: %d", ret);
	if (coll_comm_fd(comm) < 0)
		rank_fail(r, "fd");
	/* A completed request left unfreed, another one freed early. */
	ret = coll_ibarrier(comm, &keep);
	if (!ret)
		ret = coll_wait(keep);
	if (!ret)
		ret = coll_test(keep, &done);
	if (ret || !done)
		rank_fail(r, "barrier: %d done %d", ret, done);
	ret = coll_ibarrier(comm, &req);
	coll_request_free(req);
	if (ret)
		rank_fail(r, "ibarrier: %d", ret);
}

static void test_args(void)
{
	run_ranks(2, body_args, false);
}

/* ------------------------------------------------------------------ */
/* The v-variants                                                      */
/* ------------------------------------------------------------------ */

/* Every v-variant in every style, random tables, in place too. */
static void body_vec(struct rank *r, coll_comm *comm)
{
	struct vchk v = { .rank = r->rank, .nranks = r->nranks };
	int op, st, k, ret;

	for (op = 0; op < VCHK_NR; op++) {
		for (st = 0; st < VCHK_STYLES; st++) {
			for (k = 0; k < 6; k++) {
				v.op = (enum vchk_op)op;
				v.style = (enum vchk_style)st;
				v.seed = (uint64_t)(r->nranks * 1000 + op * 100 +
						    st * 10 + k);
				v.maxc = k & 1 ? 3 : 40;
				v.in_place = op == VCHK_ALLGATHERV && (k & 2);
				ret = vchk_run(&v, comm);
				if (ret)
					rank_fail(r, "%s style %d seed %llu: "
						  "%d %s; ", vchk_names[op], st,
						  (unsigned long long)v.seed,
						  ret, v.msg);
			}
		}
	}
}

static void test_vec(void)
{
	int n;

	for (n = 1; n <= 5; n++)
		if (!run_ranks(n, body_vec, false))
			return;
}

/* Tables that disagree fail, and the communicator goes on. */
static void body_vec_mismatch(struct rank *r, coll_comm *comm)
{
	int32_t v = 1;
	int got, ret;

	if (!vchk_mismatch(VCHK_ALLGATHERV, comm, r->rank, r->nranks, &got))
		rank_fail(r, "allgatherv mismatch: %d; ", got);
	if (!vchk_mismatch(VCHK_ALLTOALLV, comm, r->rank, r->nranks, &got))
		rank_fail(r, "alltoallv mismatch: %d; ", got);
	ret = coll_allreduce(&v, &v, 1, COLL_DTYPE_INT32, COLL_REDOP_SUM,
			     comm);
	if (ret || v != r->nranks)
		rank_fail(r, "the allreduce after: %d, %d", ret, v);
}

static void test_vec_mismatch(void)
{
	run_ranks(3, body_vec_mismatch, false);
}

/* Arguments libcoll refuses before the kernel sees them. */
static void body_vec_args(struct rank *r, coll_comm *comm)
{
	size_t c[2] = { 1, 1 }, d[2] = { 0, 1 }, big[2] = { 1, 1ULL << 49 };
	size_t other[2] = { 2, 2 };
	int32_t buf[8] = { 0 };

	if (coll_allgatherv(buf, buf + 4, NULL, d, COLL_DTYPE_INT32, comm) !=
	    -EINVAL ||
	    coll_allgatherv(buf, buf + 4, c, big, COLL_DTYPE_INT32, comm) !=
	    -ERANGE ||
	    coll_allgatherv(buf, buf + 4, c, d, (coll_dtype)0, comm) !=
	    -EINVAL ||
	    coll_reduce_scatterv(buf, buf + 4, c, COLL_DTYPE_INT32,
				 COLL_REDOP_AVG, comm) != -EINVAL ||
	    /* overlapping buffers, not allgatherv's in place */
	    coll_reduce_scatterv(buf, buf + 1, c, COLL_DTYPE_INT32,
				 COLL_REDOP_SUM, comm) != -EINVAL ||
	    /* sends itself 1, receives 2 from itself */
	    coll_alltoallv(buf, c, d, buf + 4, other, d, COLL_DTYPE_INT32,
			   comm) != -EINVAL ||
	    coll_iallgatherv(buf, buf + 4, c, d, COLL_DTYPE_INT32, comm,
			     NULL) != -EINVAL ||
	    coll_allgatherv(NULL, buf + 4, c, d, COLL_DTYPE_INT32, comm) !=
	    -EINVAL)
		rank_fail(r, "a v-variant's argument check");
}

static void test_vec_args(void)
{
	run_ranks(2, body_vec_args, false);
}

/* ------------------------------------------------------------------ */
/* Split, shrink, grow                                                 */
/* ------------------------------------------------------------------ */

/* SipHash-2-4's published vectors: key 00..0f, messages 00..(len-1). */
static void test_siphash(void)
{
	uint8_t key[16], msg[16];
	int i;

	for (i = 0; i < 16; i++)
		key[i] = msg[i] = (uint8_t)i;
	UNIT_CHECK(coll_siphash(key, msg, 0) == 0x726fdb47dd0e0e31ULL);
	UNIT_CHECK(coll_siphash(key, msg, 1) == 0x74f839c593dc67fdULL);
	UNIT_CHECK(coll_siphash(key, msg, 8) == 0x93f5f5799a932462ULL);
	UNIT_CHECK(coll_siphash(key, msg, 15) == 0xa129ca6149be45e5ULL);
}

static int split_tried;

/* The sum of @v over @comm, or INT32_MIN on an error. */
static int32_t sum_over(coll_comm *comm, int32_t v)
{
	return coll_allreduce(&v, &v, 1, COLL_DTYPE_INT32, COLL_REDOP_SUM,
			      comm) ? INT32_MIN : v;
}

/*
 * 4 ranks: split by parity, keys reversing the order; then {0, 1, 2}
 * with rank 3 passing no color; the parent still works between and after.
 */
static void body_split(struct rank *r, coll_comm *comm)
{
	coll_comm *c = NULL;
	int ret, want;

	ret = coll_comm_split(comm, r->rank % 2, -r->rank, &c);
	if (ret || !c) {
		rank_fail(r, "split by parity: %d %s", ret, coll_last_error());
		return;
	}
	/* Members of a color by descending parent rank: 2, 0 and 3, 1. */
	want = r->rank >= 2 ? 0 : 1;
	if (coll_comm_size(c) != 2 || coll_comm_rank(c) != want)
		rank_fail(r, "child rank %d of %d, expected %d of 2",
			  coll_comm_rank(c), coll_comm_size(c), want);
	if (coll_comm_parent_uid(c) != coll_comm_uid(comm) ||
	    coll_comm_uid(c) == coll_comm_uid(comm) || !coll_comm_uid(c))
		rank_fail(r, "child uid %llx parent %llx (parent's %llx)",
			  (unsigned long long)coll_comm_uid(c),
			  (unsigned long long)coll_comm_parent_uid(c),
			  (unsigned long long)coll_comm_uid(comm));
	/* Parent ranks 0 + 2 and 1 + 3. */
	if (sum_over(c, r->rank) != (r->rank % 2 ? 4 : 2))
		rank_fail(r, "sum over the child");
	if (sum_over(comm, 1) != 4)
		rank_fail(r, "sum over the parent beside the child");
	coll_comm_destroy(c);
	c = NULL;
	ret = coll_comm_split(comm, r->rank == 3 ? COLL_SPLIT_NOCOLOR : 7, 0,
			      &c);
	if (ret || (r->rank == 3) != !c) {
		rank_fail(r, "split with no color: %d, child %p", ret, c);
	} else if (c) {
		if (coll_comm_size(c) != 3 || coll_comm_rank(c) != r->rank ||
		    sum_over(c, r->rank) != 3)
			rank_fail(r, "the 3-rank child");
		coll_comm_destroy(c);
	}
	if (coll_comm_split(comm, -2, 0, &c) != -EINVAL || c)
		rank_fail(r, "color -2 accepted");
	if (sum_over(comm, r->rank) != 6)
		rank_fail(r, "sum over the parent after");
	/* A shrink refuses a parent with an operation in flight: rank 0's
	 * receive, which rank 1 answers only once rank 0 has tried. */
	if (r->rank == 0) {
		coll_request *req = NULL;
		int32_t got = 0, ex = 3;

		ret = coll_irecv(&got, 1, COLL_DTYPE_INT32, 1, comm, &req);
		if (ret)
			rank_fail(r, "irecv: %d", ret);
		ret = coll_comm_shrink(comm, &ex, 1, 0, &c);
		if (ret != -EBUSY || c)
			rank_fail(r, "shrink beside a receive: %d", ret);
		__atomic_store_n(&split_tried, 1, __ATOMIC_RELEASE);
		if (req && ((ret = coll_wait(req)) || got != 42))
			rank_fail(r, "the receive after the refused shrink: %d",
				  ret);
		coll_request_free(req);
	} else if (r->rank == 1) {
		int32_t v = 42;

		while (!__atomic_load_n(&split_tried, __ATOMIC_ACQUIRE))
			usleep(1000);
		ret = coll_send(&v, 1, COLL_DTYPE_INT32, 0, comm);
		if (ret)
			rank_fail(r, "send after the refused shrink: %d", ret);
	}
	if (sum_over(comm, 1) != 4)
		rank_fail(r, "sum after the refused shrink");
}

static void test_split(void)
{
	split_tried = 0;
	run_ranks(4, body_split, false);
}

/*
 * 4 ranks; rank 3 leaves; the survivors' operations fail, they shrink to
 * {0, 1, 2} (not asking rank 3 anything) and go on; a bad exclusion list
 * is refused before anything happens.
 */
static void body_shrink(struct rank *r, coll_comm *comm)
{
	int ex[3] = { 3 }, bad[2], ret;
	coll_comm *c = NULL;

	if (sum_over(comm, 1) != 4)
		rank_fail(r, "first sum");
	if (r->rank == 3)
		return;		/* destroyed by rank_main: gone */
	while (sum_over(comm, 1) != INT32_MIN)
		;		/* until the loss shows */
	bad[0] = r->rank;
	if (coll_comm_shrink(comm, bad, 1, 0, &c) != -EINVAL || c)
		rank_fail(r, "excluding itself accepted");
	bad[0] = 3;
	bad[1] = 3;
	if (coll_comm_shrink(comm, bad, 2, 0, &c) != -EINVAL)
		rank_fail(r, "a rank listed twice accepted");
	bad[0] = 4;
	if (coll_comm_shrink(comm, bad, 1, 0, &c) != -EINVAL)
		rank_fail(r, "rank 4 of 4 accepted");
	if (coll_comm_shrink(comm, ex, 1, 1U << 5, &c) != -EINVAL)
		rank_fail(r, "unknown flags accepted");
	ret = coll_comm_shrink(comm, ex, 1, 0, &c);
	if (ret || !c) {
		rank_fail(r, "shrink: %d %s", ret, coll_last_error());
		return;
	}
	if (coll_comm_size(c) != 3 || coll_comm_rank(c) != r->rank ||
	    coll_comm_parent_uid(c) != coll_comm_uid(comm) ||
	    sum_over(c, r->rank) != 3)
		rank_fail(r, "the shrunk communicator");
	coll_comm_destroy(c);
}

static void test_shrink(void)
{
	run_ranks(4, body_shrink, false);
}

/*
 * 4 ranks, groups from their members alone: {3, 1} and {0, 2} at once
 * (one tag, two lists: two communicators), ranks taking the list's
 * order; then {0, 1, 2} while rank 3 takes no part, made again on rank 0
 * while alive (-EEXIST); bad lists are refused before anything happens.
 */
static void body_group(struct rank *r, coll_comm *comm)
{
	static const int odd[] = { 3, 1 }, even[] = { 0, 2 };
	static const int three[] = { 0, 1, 2 };
	int bad[2], ret, want;
	coll_comm *c = NULL, *d = NULL;

	ret = coll_comm_create_group(comm, r->rank % 2 ? odd : even, 2, 5,
				     &c);
	if (ret || !c) {
		rank_fail(r, "group of 2: %d %s", ret, coll_last_error());
		return;
	}
	want = r->rank == 3 || r->rank == 0 ? 0 : 1;
	if (coll_comm_size(c) != 2 || coll_comm_rank(c) != want ||
	    coll_comm_parent_uid(c) != coll_comm_uid(comm) ||
	    coll_comm_uid(c) == coll_comm_uid(comm))
		rank_fail(r, "group rank %d of %d, expected %d of 2",
			  coll_comm_rank(c), coll_comm_size(c), want);
	if (sum_over(c, r->rank) != (r->rank % 2 ? 4 : 2))
		rank_fail(r, "sum over the group");
	coll_comm_destroy(c);
	c = NULL;
	if (r->rank < 3) {
		ret = coll_comm_create_group(comm, three, 3, 0xfeed, &c);
		/* Before the sum: the others' groups are alive until it is
		 * done. */
		if (!ret && r->rank == 0 &&
		    ((ret = coll_comm_create_group(comm, three, 3, 0xfeed,
						   &d)) != -EEXIST || d))
			rank_fail(r, "the same group made twice: %d", ret);
		if (!c || coll_comm_rank(c) != r->rank || sum_over(c, 1) != 3)
			rank_fail(r, "group of 3: %s", coll_last_error());
		coll_comm_destroy(c);
	}
	bad[0] = r->rank;
	bad[1] = r->rank;
	if (coll_comm_create_group(comm, bad, 2, 1, &c) != -EINVAL || c)
		rank_fail(r, "a rank listed twice accepted");
	bad[1] = 4;
	if (coll_comm_create_group(comm, bad, 2, 1, &c) != -EINVAL || c)
		rank_fail(r, "rank 4 of 4 accepted");
	bad[0] = (r->rank + 1) % 4;
	if (coll_comm_create_group(comm, bad, 1, 1, &c) != -EINVAL || c)
		rank_fail(r, "a list without this rank accepted");
	if (coll_comm_create_group(comm, bad, 0, 1, &c) != -EINVAL ||
	    coll_comm_create_group(comm, NULL, 1, 1, &c) != -EINVAL ||
	    coll_comm_create_group(comm, bad, 5, 1, &c) != -EINVAL)
		rank_fail(r, "a count of 0 or 5, or no list, accepted");
	if (sum_over(comm, 1) != 4)
		rank_fail(r, "sum over the parent after");
}

static void test_group(void)
{
	run_ranks(4, body_group, false);
}

/* Grow: ranks 0 and 1 of a communicator and a new rank 2 meet through a
 * fresh id. */
static coll_unique_id grow_parent_id, grow_id;

static void body_grow(struct rank *r, coll_comm *unused)
{
	coll_comm *p = NULL, *c = NULL;
	int ret;

	(void)unused;
	if (r->rank < 2) {
		ret = coll_comm_init_rank(&p, 2, &grow_parent_id, r->rank);
		if (ret) {
			rank_fail(r, "parent: %s", coll_last_error());
			return;
		}
		if (coll_comm_grow(p, 2, &grow_id, &c) != -EINVAL || c)
			rank_fail(r, "growing to the same size accepted");
		ret = coll_comm_grow(p, 3, &grow_id, &c);
	} else {
		ret = coll_comm_init_rank(&c, 3, &grow_id, 2);
	}
	if (ret) {
		rank_fail(r, "grow: %s", coll_last_error());
	} else {
		if (coll_comm_size(c) != 3 || coll_comm_rank(c) != r->rank ||
		    sum_over(c, r->rank) != 3)
			rank_fail(r, "the grown communicator");
		if (p && coll_comm_parent_uid(c) != coll_comm_uid(p))
			rank_fail(r, "the grown one's parent");
		if (p && sum_over(p, 1) != 2)
			rank_fail(r, "the parent after growing");
		coll_comm_destroy(c);
	}
	if (p)
		coll_comm_destroy(p);
}

static void test_grow(void)
{
	if (!UNIT_EQ_INT(coll_get_unique_id(&grow_parent_id), 0) ||
	    !UNIT_EQ_INT(coll_get_unique_id(&grow_id), 0))
		return;
	run_ranks(3, body_grow, true);
}

int main(int argc, char **argv)
{
	unit_init(argc, argv);
	setenv(COLL_ENV_BOOTSTRAP_ADDR, "127.0.0.1", 1);
	setenv(COLL_ENV_IB_ADDR, "127.0.0.1", 1);
	kcoll_model_start(300, (unsigned int)unit_seed(12345));
	UNIT_RUN(test_matrix_3);
	UNIT_RUN(test_matrix_2);
	UNIT_RUN(test_matrix_1);
	UNIT_RUN(test_flood_small_ring);
	UNIT_RUN(test_group_one_enter);
	UNIT_RUN(test_threads_wait);
	UNIT_RUN(test_mismatch);
	UNIT_RUN(test_wrong_key);
	UNIT_RUN(test_peer_lost);
	UNIT_RUN(test_mem);
	UNIT_RUN(test_args);
	UNIT_RUN(test_siphash);
	UNIT_RUN(test_split);
	UNIT_RUN(test_shrink);
	UNIT_RUN(test_group);
	UNIT_RUN(test_grow);
	UNIT_RUN(test_vec_args);
	UNIT_RUN(test_vec_mismatch);
	UNIT_RUN(test_vec);
	kcoll_model_stop();
	return unit_done();
}
