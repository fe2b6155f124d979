// SPDX-License-Identifier: MIT
/*
 * kcoll-colltest: correctness of every collective through libcoll, one
 * process per rank (rank, size and id from coll_comm_init_env(): e.g.
 * KCOLL_RANK, KCOLL_NRANKS, KCOLL_ROOT, KCOLL_SECRET).
 *
 * Default run: every collective x every dtype x every valid reduction x
 * counts {0, 1, 7, 3*nranks+1} x in place / out of place, each case
 * checked against a reference computed locally from the known inputs of
 * every rank (tests/oracle/kcoll-check.h), with guard bytes around every buffer;
 * the API forms rotate (blocking, non-blocking + wait, group, poll() on
 * coll_comm_fd() + coll_test(), registered buffers); then a few large
 * cases (1000003 elements, and one >= 16 MiB case per collective), the
 * v-variants (allgatherv, reduce_scatterv, alltoallv) with random tables
 * in every API form (tests/oracle/kcoll-vcheck.h), a group
 * of several operations, more operations in flight than the CQ holds, and
 * barriers. Each rank checks its own results; the failure counts are
 * summed over the ranks with an allreduce, and rank 0 prints one TAP line
 * per case group. Every rank exits 1 if anything failed anywhere.
 *
 * Usage: kcoll-colltest [-q | -F] [-c collective] [-t seconds] [-v]
 *        kcoll-colltest -M | -K | -X | -T
 *   -q  quick: small counts, plus one 1000003-element case per collective
 *       and, on host memory, one >= 16 MiB case (gather and scatter: none)
 *   -F  full: 1000003 elements for every dtype, both placements, and the
 *       >= 16 MiB cases in both placements
 *   -c  only this collective (allreduce, reduce, broadcast, allgather,
 *       reduce_scatter, alltoall, sendrecv, gather, scatter)
 *   -t  watchdog: fail (exit 2) if the run takes longer
 *   -v  a line per case
 *   -M  signature mismatch: rank 1 uses another count for one allreduce;
 *       every rank must get -EBADMSG; then the last rank another count
 *       for a broadcast, a reduce, a gather and a scatter from rank 0:
 *       the root must get -EBADMSG, and the differing rank but as a
 *       reduce's or gather's leaf; the others that or the right result;
 *       then tables that disagree for an allgatherv (every rank fails)
 *       and an alltoallv (the pair fails; kcoll-vcheck.h)
 *   -K  wrong key: the last rank creates the communicator (bootstrap, then
 *       KCOLL_IOC_COMM_CREATE through coll_comm_init_table()) with a
 *       modified key; every rank's creation must fail
 *   -X  a dying rank: the last rank dies in the middle of a large
 *       allreduce, by _exit() or, with KCOLL_TEST_DIE=kill, by SIGKILL
 *       (no exit path of its own runs); every other rank must see an
 *       error within 20 s that names the dead rank
 *   -T  a timeout: every rank but the last runs an allreduce with a 2 s
 *       timeout that the last never joins; each must get -ETIMEDOUT and a
 *       coll_comm_get_report() naming the last rank as the one missing.
 *       Every rank then keeps its communicator while the file named by
 *       $KCOLL_TEST_HOLD exists (at most 120 s), for kcollctl to look at
 *   -G  only the group and flood cases (many operations in flight)
 *   -D exporter  every buffer is a dma-buf of that exporter (vgem, udmabuf,
 *       heap, testbuf; tools/dmabuf-alloc.h), registered with
 *       coll_mem_register_dmabuf() at an offset that is not page-aligned
 *       and its fd closed before use; int32, bf16, fp32 and fp64 only; no
 *       group and flood cases
 *   -S  GPU memory and CUDA streams, through libcuda.so.1 (in the VMs the
 *       STAND-IN driver, tests/unit/fake_libcuda.c, which the output
 *       names): every buffer is cuMemAlloc'ed device memory (filled and
 *       read back with cuMemcpy, guards included); the cases rotate over
 *       the stream-ordered forms (coll_*_stream on a stream of the test's,
 *       then cuStreamSynchronize and coll_comm_async_error()), the
 *       blocking and the non-blocking forms on device pointers; int32,
 *       bf16, fp32 and fp64; no send/recv; then many operations queued on
 *       one stream, two streams interleaved, two communicators each
 *       with its own stream, send/recv on streams (coll_send_stream(),
 *       coll_recv_stream(): around the ring, on one stream and on two), and the v-variants (coll_*v_stream, the
 *       blocking and non-blocking forms on device pointers; the tables
 *       and checks of -V). Needs KCOLL_DEVMEM=1. With -m the odd
 *       ranks keep host memory and the plain forms (their CPUs reduce):
 *       one communicator of GPU and CPU ranks must give one answer.
 *       With -T: every rank but the last enqueues an allreduce with a 2 s
 *       timeout the last never joins: each stream must be released (it
 *       finishes within 15 s), the error -ETIMEDOUT and the report name
 *       the last rank. -A: the same, but the waiting ranks abort their
 *       communicator after 1 s instead (the stream goes on once the
 *       connections are down: within 75 s). -W: rank 0's stream starts
 *       only after 6 s (FAKECUDA_STALL_MS of the stand-in), its timeout
 *       1 s, the others' 6 s: rank 0 must fail with -ETIMEDOUT naming its
 *       own GPU stream, its buffer untouched once the stream ran; the
 *       others fail naming rank 0; every stream finishes. -V: as -T, but
 *       the last rank revokes the communicator after 1 s: each waiting
 *       stream must be released before the (10 s) timeout, with -ECANCELED
 *       and the report naming the last rank. -P: the last rank is
 *       killed (SIGKILL) after 1 s instead: -ECONNRESET naming it,
 *       before the timeout. -R: as -V, but rank 0 removes its node's
 *       rxe0 after 1 s (rdma link delete; the scenario adds it back):
 *       that node's ranks fail before the timeout, -ENODEV (or
 *       -ECONNRESET: the node's other rank, failed first, left), the
 *       others fail; every stream finishes.
 * In -M, -K, -X and -T every rank prints its own result line and exits 0 only
 * if it passed.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "kcoll-check.h"
#include "kcoll-vcheck.h"
#include "kcoll-issue.h"
#include "kcoll-stream.h"
#include "../../tools/dmabuf-alloc.h"
#include "../../tools/cuda-min.h"

#define GUARD		64
#define GUARD_BYTE	0x5a
#define BIG_COUNT	1000003UL
#define MIB		(1024UL * 1024)

static coll_comm *comm;
static int rank, nranks;
static const char *dmabuf;	/* -D: the exporter of every buffer */
static bool gpu;		/* -S: device memory and streams */
static bool mixed;		/* -S -m: odd ranks keep host memory */
static bool devbufs;		/* -S: this rank's buffers are device memory */
static void *stream, *stream2;	/* -S */
static int verbose;
static unsigned int tap_n, tap_fail;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static __attribute__((format(printf, 2, 3)))
void tap(bool ok, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	tap_fail += !ok;
	if (rank != 0)
		return;
	printf("%sok %u - ", ok ? "" : "not ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* A diagnostic of this rank (every rank prints its own). */
static __attribute__((format(printf, 1, 2)))
void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# rank %d: ", rank);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* What the test is doing, for the watchdog's last words. */
static const char *volatile stage = "starting";

static void watchdog(int sig)
{
	static const char msg[] = "Bail out! watchdog: the test took too long in: ";
	const char *st = stage;

	(void)sig;
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0 ||
	    write(STDOUT_FILENO, st, strlen(st)) < 0 ||
	    write(STDOUT_FILENO, "\n", 1) < 0)
		_exit(3);
	_exit(2);
}

/* Sum @local over the ranks (int64 allreduce through kcoll itself). */
static int agree(int64_t local, int64_t *total)
{
	int64_t v = local;
	int ret;

	ret = coll_allreduce(&v, &v, 1, COLL_DTYPE_INT64, COLL_REDOP_SUM, comm);
	*total = v;
	return ret;
}

/* Report a group of cases; bail out if the communicator is gone. */
static void report(int64_t bad, const char *what, double t0)
{
	int64_t total;
	int ret = agree(bad, &total);

	if (ret) {
		printf("Bail out! rank %d: allreduce of the results failed: "
		       "%d (%s)\n", rank, ret, coll_strerror(ret));
		fflush(stdout);
		exit(1);
	}
	tap(total == 0, "%s (%.2f s)%s", what, now() - t0,
	    total ? " - see the ranks' diagnostics" : "");
}

/* ------------------------------------------------------------------ */
/* Buffers with guards                                                 */
/* ------------------------------------------------------------------ */

struct gbuf {
	uint8_t *base;
	size_t len;
	struct kd_buf kd;	/* -D */
	coll_mem *mem;
	cm_ptr dev;		/* -S: the device copy of base, guards too */
};

static void cm_check(cm_result r, const char *what)
{
	if (r) {
		diag("%s failed: CUresult %d", what, r);
		exit(1);
	}
}

/* -S: the device address of host pointer @p into @g, or NULL. */
static void *gbuf_dev(const struct gbuf *g, const void *p)
{
	if (!p || !g->dev)
		return NULL;
	return (void *)(uintptr_t)(g->dev + ((const uint8_t *)p - g->base));
}

/* -S: host -> device (@to_dev) or back, guards included. */
static void gbuf_sync(struct gbuf *g, bool to_dev)
{
	if (!g->dev)
		return;
	if (to_dev)
		cm_check(cm.htod(g->dev, g->base, g->len + 2 * GUARD),
			 "cuMemcpyHtoD");
	else
		cm_check(cm.dtoh(g->base, g->dev, g->len + 2 * GUARD),
			 "cuMemcpyDtoH");
}

/* -D: the buffer and its guards in one dma-buf; the bytes between the
 * guards registered from byte GUARD of it, then its fd closed. */
static void *gbuf_alloc_dmabuf(struct gbuf *g, size_t len)
{
	size_t size = (len + 2 * GUARD + 4095) & ~(size_t)4095;
	int ret = kd_alloc(&g->kd, dmabuf, size);

	if (ret) {
		diag("%s: a dma-buf of %zu bytes: %s", dmabuf, size,
		     strerror(-ret));
		exit(1);
	}
	g->base = g->kd.map;
	memset(g->base, GUARD_BYTE, GUARD);
	memset(g->base + GUARD + len, GUARD_BYTE, GUARD);
	if (len) {
		ret = coll_mem_register_dmabuf(comm, g->kd.fd, GUARD, len,
					       g->base + GUARD, 0, &g->mem);
		if (ret) {
			diag("coll_mem_register_dmabuf: %s", coll_last_error());
			exit(1);
		}
	}
	kd_close_fd(&g->kd);
	return g->base + GUARD;
}

static void *gbuf_alloc(struct gbuf *g, size_t len)
{
	memset(g, 0, sizeof(*g));
	g->kd.fd = -1;
	g->len = len;
	if (dmabuf)
		return gbuf_alloc_dmabuf(g, len);
	g->base = malloc(len + 2 * GUARD);
	if (!g->base) {
		diag("out of memory (%zu bytes)", len);
		exit(1);
	}
	memset(g->base, GUARD_BYTE, GUARD);
	memset(g->base + GUARD + len, GUARD_BYTE, GUARD);
	if (devbufs)
		cm_check(cm.alloc(&g->dev, len + 2 * GUARD), "cuMemAlloc");
	return g->base + GUARD;
}

static size_t gbuf_damage(const struct gbuf *g)
{
	size_t i, bad = 0;

	if (!g->base)
		return 0;
	for (i = 0; i < GUARD; i++) {
		bad += g->base[i] != GUARD_BYTE;
		bad += g->base[GUARD + g->len + i] != GUARD_BYTE;
	}
	return bad;
}

static void gbuf_free(struct gbuf *g)
{
	int ret;

	if (g->mem && (ret = coll_mem_deregister(comm, g->mem))) {
		diag("coll_mem_deregister: %s", coll_strerror(ret));
		tap_fail++;
	}
	g->mem = NULL;
	if (g->kd.map)
		kd_free(&g->kd);
	else
		free(g->base);
	if (g->dev)
		cm.free(g->dev);
	g->dev = 0;
	g->base = NULL;
}

/* ------------------------------------------------------------------ */
/* One case                                                            */
/* ------------------------------------------------------------------ */

enum style {
	ST_BLOCKING,
	ST_NONBLOCKING,
	ST_GROUP,
	ST_POLL,
	ST_REGISTERED,
	ST_NR,
	ST_STREAM = ST_NR,	/* -S only */
};

static const char *const style_names[ST_NR + 1] = {
	"blocking", "non-blocking", "group", "poll", "registered", "stream",
};

/* -S rotates over these. */
static const enum style gpu_styles[] = {
	ST_STREAM, ST_BLOCKING, ST_NONBLOCKING, ST_STREAM,
};

static enum style next_style(void)
{
	static unsigned int seq;

	if (gpu && !devbufs)	/* -m: a host rank among GPU ranks */
		return seq++ % 2 ? ST_NONBLOCKING : ST_BLOCKING;
	if (gpu)
		return gpu_styles[seq++ % (sizeof(gpu_styles) /
					   sizeof(gpu_styles[0]))];
	return (enum style)(seq++ % ST_NR);
}

/* Issue @c on @stream with the stream-ordered forms. */

/* Enqueue, synchronize the stream, then the operation's own result. */
static int issue_stream_sync(const struct chk_case *c, void *send,
			     void *recv)
{
	int ret = chk_issue_stream(c, send, recv, comm, stream);

	if (ret)
		return ret;
	cm_check(cm.stream_sync(stream), "cuStreamSynchronize");
	return coll_comm_async_error(comm);
}

/* Wait with poll() on the comm's fd and coll_test(). */
static int poll_wait(coll_request *req)
{
	struct pollfd p = { .fd = coll_comm_fd(comm), .events = POLLIN };
	int done = 0, ret;

	for (;;) {
		ret = coll_test(req, &done);
		if (done || ret)
			return ret;
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -errno;
	}
}

static int finish(int ret, coll_request *req, enum style st)
{
	if (ret)
		return ret;
	ret = st == ST_POLL ? poll_wait(req) : coll_wait(req);
	coll_request_free(req);
	return ret;
}

/* Issue @c on @send/@recv in style @st; the operation's result. */
static int issue(const struct chk_case *c, void *send, void *recv,
		 enum style st)
{
	bool nb = st == ST_NONBLOCKING || st == ST_POLL;
	coll_request *req = NULL, *req2 = NULL;
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	int ret = 0, r2;

	if (st == ST_GROUP)
		coll_group_start();
	switch (c->coll) {
	case CHK_SENDRECV:
		/* Blocking send and receive only work together in a group. */
		if (!nb) {
			if (st != ST_GROUP)
				coll_group_start();
			ret = coll_send(send, c->count, c->dt, next, comm);
			r2 = coll_recv(recv, c->count, c->dt, prev, comm);
			if (st != ST_GROUP) {
				int r3 = coll_group_end();

				ret = ret ? ret : r2 ? r2 : r3;
				return ret;
			}
			ret = ret ? ret : r2;
			break;
		}
		ret = coll_isend(send, c->count, c->dt, next, comm, &req);
		r2 = coll_irecv(recv, c->count, c->dt, prev, comm, &req2);
		ret = finish(ret, req, st);
		r2 = finish(r2, req2, st);
		return ret ? ret : r2;
	default:
		ret = chk_issue(c, send, recv, comm, nb ? &req : NULL);
		break;
	}
	if (st == ST_GROUP) {
		r2 = coll_group_end();
		return ret ? ret : r2;
	}
	return nb ? finish(ret, req, st) : ret;
}

static void case_name(const struct chk_case *c, char *s, size_t len)
{
	char root[16] = "";

	if (chk_rooted(c->coll))
		snprintf(root, sizeof(root), " root=%d", c->root);
	snprintf(s, len, "%s %s%s%s count=%zu%s %s", chk_coll_names[c->coll],
		 coll_dtype_name(c->dt), chk_reduces(c->coll) ? " " : "",
		 chk_reduces(c->coll) ? coll_redop_name(c->op) : "", c->count,
		 root, c->in_place ? "in-place" : "out-of-place");
}

/* Run one case; the number of problems found on this rank. */
static size_t run_case(const struct chk_case *c, enum style st)
{
	size_t es = coll_dtype_size(c->dt), bad = 0, g;
	struct gbuf gs = { 0 }, gr = { 0 };
	coll_mem *ms = NULL, *mr = NULL;
	void *s, *r = NULL, *sp, *rp;
	char what[128], why[160];
	int ret;

	if (c->in_place) {
		s = gbuf_alloc(&gs, chk_inplace_elems(c) * es);
		chk_fill(c, s, NULL);
		chk_inplace_ptrs(c, s, &sp, &rp);
	} else {
		s = gbuf_alloc(&gs, chk_send_elems(c) * es);
		r = gbuf_alloc(&gr, chk_recv_elems(c) * es);
		chk_fill(c, s, r);
		sp = s;
		rp = r;
	}
	case_name(c, what, sizeof(what));
	if (devbufs) {
		/* The device copies: what the operation sees. */
		gbuf_sync(&gs, true);
		gbuf_sync(&gr, true);
		sp = gbuf_dev(c->in_place ? &gs : &gs, sp);
		rp = gbuf_dev(c->in_place ? &gs : &gr, rp);
	}
	if (st == ST_REGISTERED && !dmabuf) {
		if (gs.len && (ret = coll_mem_register(comm, s, gs.len, &ms)))
			diag("%s: coll_mem_register: %s (%s); unregistered",
			     what, coll_strerror(ret), coll_last_error());
		if (gr.len && (ret = coll_mem_register(comm, r, gr.len, &mr)))
			diag("%s: coll_mem_register: %s (%s); unregistered",
			     what, coll_strerror(ret), coll_last_error());
	}
	ret = st == ST_STREAM ? issue_stream_sync(c, sp, rp) :
				issue(c, sp, rp, st);
	if (devbufs) {
		gbuf_sync(&gs, false);
		gbuf_sync(&gr, false);
	}
	if (ret) {
		diag("%s (%s): returned %d (%s): %s", what, style_names[st], ret,
		     coll_strerror(ret), coll_last_error());
		bad = 1;
	} else {
		bad = chk_verify(c, s, r, why, sizeof(why));
		if (bad)
			diag("%s (%s): %zu wrong: %s", what, style_names[st],
			     bad, why);
	}
	g = gbuf_damage(&gs) + gbuf_damage(&gr);
	if (g) {
		diag("%s (%s): %zu guard bytes overwritten", what,
		     style_names[st], g);
		bad += g;
	}
	if (verbose)
		diag("%s (%s): %s", what, style_names[st],
		     bad ? "FAILED" : "ok");
	if (ms && (ret = coll_mem_deregister(comm, ms))) {
		diag("%s: coll_mem_deregister: %s", what, coll_strerror(ret));
		bad++;
	}
	if (mr && (ret = coll_mem_deregister(comm, mr))) {
		diag("%s: coll_mem_deregister: %s", what, coll_strerror(ret));
		bad++;
	}
	gbuf_free(&gs);
	gbuf_free(&gr);
	return bad;
}

/* ------------------------------------------------------------------ */
/* The matrix                                                          */
/* ------------------------------------------------------------------ */

static const coll_dtype all_dtypes[] = {
	COLL_DTYPE_INT8, COLL_DTYPE_UINT8, COLL_DTYPE_INT32, COLL_DTYPE_UINT32,
	COLL_DTYPE_INT64, COLL_DTYPE_UINT64, COLL_DTYPE_FP16, COLL_DTYPE_BF16,
	COLL_DTYPE_FP32, COLL_DTYPE_FP64, COLL_DTYPE_FP8_E4M3,
	COLL_DTYPE_FP8_E5M2,
};
#define NDTYPES (sizeof(all_dtypes) / sizeof(all_dtypes[0]))

static bool coll_possible(enum chk_coll c)
{
	if (gpu && c == CHK_SENDRECV)
		return false;		/* no stream-ordered send/recv */
	return c != CHK_SENDRECV || nranks >= 2;	/* no send to self */
}


static void small_matrix(int only)
{
	size_t counts[4] = { 0, 1, 7, 3 * (size_t)nranks + 1 };
	int coll, d, op;

	for (coll = 0; coll < CHK_NR; coll++) {
		if ((only >= 0 && coll != only) || !coll_possible(coll))
			continue;
		for (d = 0; d < (int)NDTYPES; d++) {
			coll_dtype dt = all_dtypes[d];

			if ((dmabuf || gpu) && dt != COLL_DTYPE_INT32 &&
			    dt != COLL_DTYPE_BF16 && dt != COLL_DTYPE_FP32 &&
			    dt != COLL_DTYPE_FP64)
				continue;
			/* fp8 moves as int8 does: only its reductions are
			 * new (all of E4M3's ops, SUM and AVG of E5M2's;
			 * the unit tests have every pair of values). */
			if ((dt == COLL_DTYPE_FP8_E4M3 ||
			     dt == COLL_DTYPE_FP8_E5M2) && !chk_reduces(coll))
				continue;
			/* Gather and scatter only move blocks: one type of
			 * each element size (the host model has them all). */
			if ((coll == CHK_GATHER || coll == CHK_SCATTER) &&
			    dt != COLL_DTYPE_INT8 && dt != COLL_DTYPE_BF16 &&
			    dt != COLL_DTYPE_FP32 && dt != COLL_DTYPE_FP64)
				continue;

			for (op = COLL_REDOP_FIRST; op <= COLL_REDOP_LAST; op++) {
				struct chk_case c = {
					.coll = coll, .dt = dt,
					.rank = rank, .nranks = nranks,
				};
				int64_t bad = 0;
				double t0 = now();
				char what[96];
				int k, ip, ncases = 0;

				if (chk_reduces(coll)) {
					if (!coll_redop_valid(dt, op))
						continue;
					if (dt == COLL_DTYPE_FP8_E5M2 &&
					    op != COLL_REDOP_SUM &&
					    op != COLL_REDOP_AVG)
						continue;
					c.op = op;
				} else if (op != COLL_REDOP_FIRST) {
					break;
				}
				for (k = 0; k < 4; k++) {
					for (ip = 0; ip < 2; ip++) {
						if (ip && !chk_has_in_place(coll))
							continue;
						c.count = counts[k];
						c.in_place = ip;
						c.root = (int)((counts[k] + d) %
							       (size_t)nranks);
						bad += run_case(&c,
								next_style());
						ncases++;
					}
				}
				snprintf(what, sizeof(what), "%s %s%s%s: %d cases",
					 chk_coll_names[coll],
					 coll_dtype_name(dt),
					 chk_reduces(coll) ? " " : "",
					 chk_reduces(coll) ?
					 coll_redop_name(op) : "", ncases);
				report(bad, what, t0);
			}
		}
	}
}

/* Elements for a case of about @bytes (nccl-tests' size convention). */
static size_t count_for(enum chk_coll coll, coll_dtype dt, size_t bytes)
{
	size_t es = coll_dtype_size(dt), n = (size_t)nranks;

	switch (coll) {
	case CHK_ALLGATHER:
	case CHK_REDUCE_SCATTER:
	case CHK_ALLTOALL:
	case CHK_GATHER:
	case CHK_SCATTER:
		return (bytes / es + n - 1) / n;
	default:
		return bytes / es;
	}
}

static void big_case(enum chk_coll coll, coll_dtype dt, coll_redop op,
		     size_t count, bool in_place)
{
	struct chk_case c = {
		.coll = coll, .dt = dt, .op = chk_reduces(coll) ? op : 0,
		.rank = rank, .nranks = nranks, .count = count,
		.in_place = in_place, .root = nranks - 1,
	};
	double t0 = now();
	char what[128];
	int64_t bad;

	bad = (int64_t)run_case(&c, next_style());
	case_name(&c, what, sizeof(what));
	report(bad, what, t0);
}

static void big_cases(int level, int only)
{
	int coll, d;

	for (coll = 0; coll < CHK_NR; coll++) {
		bool data = !chk_reduces(coll);

		if ((only >= 0 && coll != only) || !coll_possible(coll))
			continue;
		/* Gather and scatter on dma-bufs or "device" memory: their
		 * small matrix only (-q; make check's time), the large
		 * transfers being the same paths as the other collectives'. */
		if ((dmabuf || gpu) && level == 0 &&
		    (coll == CHK_GATHER || coll == CHK_SCATTER))
			continue;
		/* 1000003 elements; in total for the collectives whose
		 * buffers are n counts long (an odd count per rank), to keep
		 * the traffic within what TCG VMs move in minutes. */
		if (level < 2) {
			size_t big = coll == CHK_ALLGATHER ||
				     coll == CHK_REDUCE_SCATTER ||
				     coll == CHK_ALLTOALL ||
				     coll == CHK_GATHER ||
				     coll == CHK_SCATTER ?
				     (BIG_COUNT / (size_t)nranks) | 1 : BIG_COUNT;

			big_case(coll, COLL_DTYPE_INT32, COLL_REDOP_SUM, big,
				 false);
			if (level == 1)
				big_case(coll, data ? COLL_DTYPE_BF16 :
					 COLL_DTYPE_FP16, COLL_REDOP_SUM, big,
					 chk_has_in_place(coll));
		} else {
			for (d = 0; d < (int)NDTYPES; d++) {
				big_case(coll, all_dtypes[d], COLL_REDOP_SUM,
					 BIG_COUNT, false);
				if (chk_has_in_place(coll))
					big_case(coll, all_dtypes[d],
						 COLL_REDOP_SUM, BIG_COUNT,
						 true);
			}
		}
		/* >= 16 MiB, at every level but -q's on dma-bufs or
		 * "device" memory (the host matrix has them; the
		 * million-element case crosses chunks on those memories
		 * too), and for gather and scatter at -q (the same). Keeps
		 * make check under 30 minutes. */
		if (level > 0 || (!dmabuf && !gpu && coll != CHK_GATHER &&
				  coll != CHK_SCATTER)) {
			size_t n = count_for(coll, COLL_DTYPE_FP32, 16 * MIB);

			big_case(coll, COLL_DTYPE_FP32, COLL_REDOP_SUM, n, false);
			if (level == 2 && chk_has_in_place(coll))
				big_case(coll, COLL_DTYPE_FP32, COLL_REDOP_SUM,
					 n, true);
		}
	}
}

/* Several blocking allreduces in one group: one ENTER, all complete. */
static void group_case(void)
{
	enum { N = 6 };
	struct chk_case c[N];
	struct gbuf g[N];
	void *buf[N];
	int64_t bad = 0;
	double t0 = now();
	int i, ret;

	coll_group_start();
	for (i = 0; i < N; i++) {
		c[i] = (struct chk_case){
			.coll = CHK_ALLREDUCE, .dt = COLL_DTYPE_INT32,
			.op = i % 2 ? COLL_REDOP_MAX : COLL_REDOP_SUM,
			.count = 1000 + (size_t)i, .in_place = true,
			.rank = rank, .nranks = nranks,
		};
		buf[i] = gbuf_alloc(&g[i], c[i].count * 4);
		chk_fill(&c[i], buf[i], NULL);
		ret = coll_allreduce(buf[i], buf[i], c[i].count, c[i].dt,
				     c[i].op, comm);
		if (ret) {
			diag("group: coll_allreduce queued with %d", ret);
			bad++;
		}
	}
	ret = coll_group_end();
	if (ret) {
		diag("group: coll_group_end: %d (%s)", ret, coll_strerror(ret));
		bad++;
	}
	for (i = 0; i < N; i++) {
		char why[160];
		size_t b = chk_verify(&c[i], buf[i], NULL, why, sizeof(why));

		if (b)
			diag("group: allreduce %d: %s", i, why);
		bad += (int64_t)(b + gbuf_damage(&g[i]));
		gbuf_free(&g[i]);
	}
	report(bad, "group of 6 blocking allreduces", t0);
}

/* -S: the v-variants' buffers in device memory (kcoll-vcheck.h). */
static void *vdev_alloc(size_t n)
{
	cm_ptr p = 0;

	cm_check(cm.alloc(&p, n ? n : 1), "cuMemAlloc");
	return (void *)(uintptr_t)p;
}

static void vdev_free(void *p)
{
	cm.free((cm_ptr)(uintptr_t)p);
}

static void vdev_put(void *d, const void *h, size_t n)
{
	if (n)
		cm_check(cm.htod((cm_ptr)(uintptr_t)d, h, n), "cuMemcpyHtoD");
}

static void vdev_get(void *h, const void *d, size_t n)
{
	if (n)
		cm_check(cm.dtoh(h, (cm_ptr)(uintptr_t)d, n), "cuMemcpyDtoH");
}

static int vdev_sync(void *st)
{
	cm_check(cm.stream_sync(st), "cuStreamSynchronize");
	return 0;
}

/*
 * The v-variants (tests/oracle/kcoll-vcheck.h): each in every API form
 * with random tables, small blocks (eager, unregistered), blocks around
 * the 8 KiB line, allgatherv in place, and one case of about 16 MiB per
 * rank through registered buffers. -S: on device memory, stream-ordered,
 * blocking and non-blocking (a host rank of -m: blocking and
 * non-blocking on host memory), reduce_scatterv reducing on the GPU.
 */
static void vec_cases(int level)
{
	static const size_t maxcs[] = { 3, 40, 3000 };
	static const enum vchk_style gpu_vstyles[VCHK_STYLES] = {
		VCHK_STREAM, VCHK_BLOCKING, VCHK_NONBLOCKING,
	}, host_vstyles[VCHK_STYLES] = {
		VCHK_BLOCKING, VCHK_NONBLOCKING, VCHK_BLOCKING,
	};
	struct vchk_dev vd = {
		.alloc = vdev_alloc, .free = vdev_free, .put = vdev_put,
		.get = vdev_get, .sync = vdev_sync, .stream = stream,
	};
	struct vchk v = {
		.rank = rank, .nranks = nranks, .dev = devbufs ? &vd : NULL,
	};
	int op, st, k, ret;

	for (op = 0; op < VCHK_NR; op++) {
		int64_t bad = 0;
		double t0 = now();
		unsigned int cases = 0;

		for (st = 0; st < VCHK_STYLES; st++) {
			for (k = 0; k < 3; k++) {
				v.op = (enum vchk_op)op;
				v.style = devbufs ? gpu_vstyles[st] :
					  gpu ? host_vstyles[st] :
					  (enum vchk_style)st;
				v.seed = (uint64_t)(nranks * 1000 + op * 100 +
						    st * 10 + k);
				v.maxc = maxcs[k];
				v.in_place = op == VCHK_ALLGATHERV && (st & 1);
				stage = vchk_names[op];
				ret = vchk_run(&v, comm);
				cases++;
				if (ret) {
					diag("%s style %d seed %llu: %d (%s) %s",
					     vchk_names[op], st,
					     (unsigned long long)v.seed, ret,
					     coll_strerror(ret), v.msg);
					bad++;
				}
			}
		}
		/* Large: up to ~4 M int32 per block pair. */
		v.style = VCHK_NONBLOCKING;
		v.seed = 77;
		v.maxc = level ? (size_t)(4 << 20) / (size_t)nranks :
				 (size_t)(1 << 20) / (size_t)nranks;
		v.in_place = false;
		ret = vchk_run(&v, comm);
		cases++;
		if (ret) {
			diag("%s large: %d (%s) %s", vchk_names[op], ret,
			     coll_strerror(ret), v.msg);
			bad++;
		}
		report(bad, gpu ? (op == VCHK_ALLGATHERV ?
				   "allgatherv (GPU memory, streams)" :
				   op == VCHK_REDUCE_SCATTERV ?
				   "reduce_scatterv (GPU memory, streams)" :
				   "alltoallv (GPU memory, streams)") :
		       vchk_names[op], t0);
		if (rank == 0 && verbose)
			printf("# %s: %u cases, the large one %.1f MB received "
			       "on rank 0\n", vchk_names[op], cases,
			       v.bytes / 1e6);
	}
}

/*
 * Several collectives in flight (sysfs colls_in_flight): every collective
 * issued non-blocking, of three sizes (eager, one chunk, many), on buffers
 * of their own, which may run side by side; among them a chain on one
 * buffer X: an in-place allreduce of X, then an allgather reading X, in
 * turn. The chain's operations overlap, so each must see the one before
 * it (the allgather gets X as the allreduces before it left it, the next
 * allreduce X as the allgather read it). Waited for in order; every
 * result checked.
 */
static void inflight_case(void)
{
	enum { N = 60, XCOUNT = 20000, GCOUNT = 1000 };
	static const enum chk_coll colls[] = {
		CHK_ALLREDUCE, CHK_ALLGATHER, CHK_REDUCE_SCATTER,
		CHK_BROADCAST, CHK_ALLTOALL, CHK_REDUCE, CHK_GATHER,
		CHK_SCATTER,
	};
	static const size_t counts[] = { 3, 1500, 70000 };
	struct chk_case c[N];
	struct gbuf gs[N], gr[N], gx;
	coll_request *req[N];
	int chain[N];		/* 0: own buffers; k > 0: k-th of the chain */
	int64_t n = nranks, sum = n * (n + 1) / 2, bad = 0, k = 0;
	int32_t *x, *ga[N];
	void *sp[N], *rp[N];
	double t0 = now();
	int i, j, ret;

	x = gbuf_alloc(&gx, XCOUNT * sizeof(int32_t));
	for (j = 0; j < XCOUNT; j++)
		x[j] = rank + 1;
	memset(ga, 0, sizeof(ga));
	for (i = 0; i < N; i++) {
		req[i] = NULL;
		chain[i] = 0;
		memset(&gs[i], 0, sizeof(gs[i]));
		memset(&gr[i], 0, sizeof(gr[i]));
		if (i % 3 == 2) {
			chain[i] = (int)++k;
			if (k % 2) {
				ret = coll_iallreduce(x, x, XCOUNT,
						      COLL_DTYPE_INT32,
						      COLL_REDOP_SUM, comm,
						      &req[i]);
			} else {
				ga[i] = gbuf_alloc(&gr[i], (size_t)nranks *
						   GCOUNT * sizeof(int32_t));
				ret = coll_iallgather(x, ga[i], GCOUNT,
						      COLL_DTYPE_INT32, comm,
						      &req[i]);
			}
		} else {
			c[i] = (struct chk_case){
				.coll = colls[i % 8],
				.dt = i % 2 ? COLL_DTYPE_FP32 :
					      COLL_DTYPE_INT32,
				.op = COLL_REDOP_SUM,
				.count = counts[i % 3],
				.root = i % nranks,
				.rank = rank, .nranks = nranks,
			};
			sp[i] = gbuf_alloc(&gs[i], chk_send_elems(&c[i]) *
					   coll_dtype_size(c[i].dt));
			rp[i] = gbuf_alloc(&gr[i], chk_recv_elems(&c[i]) *
					   coll_dtype_size(c[i].dt));
			chk_fill(&c[i], sp[i], rp[i]);
			ret = chk_issue(&c[i], sp[i], rp[i], comm, &req[i]);
		}
		if (ret) {
			diag("in flight: operation %d not issued: %s (%s)", i,
			     coll_strerror(ret), coll_last_error());
			bad++;
			req[i] = NULL;
		}
	}
	for (i = 0; i < N; i++) {
		char why[160];

		if (!req[i])
			continue;
		ret = coll_wait(req[i]);
		coll_request_free(req[i]);
		if (ret) {
			diag("in flight: operation %d: %s (%s)", i,
			     coll_strerror(ret), coll_last_error());
			bad++;
			continue;
		}
		if (!chain[i]) {
			size_t b = chk_verify(&c[i], sp[i], rp[i], why,
					      sizeof(why));

			if (b)
				diag("in flight: %d (%s count %zu): %s", i,
				     chk_coll_names[c[i].coll], c[i].count,
				     why);
			bad += (int64_t)b;
		} else if (!(chain[i] % 2)) {
			/* After chain[i] / 2 allreduces: sum * n^(k-1). */
			int64_t want = sum;

			for (j = 1; j < chain[i] / 2; j++)
				want *= n;
			for (j = 0; j < nranks * GCOUNT; j++)
				if (ga[i][j] != want) {
					diag("in flight: chain %d (allgather of X) element %d: %d, want %lld",
					     chain[i], j, ga[i][j],
					     (long long)want);
					bad++;
					break;
				}
		}
	}
	{
		int64_t want = sum;

		for (j = 1; j < (k + 1) / 2; j++)
			want *= n;
		for (j = 0; j < XCOUNT; j++)
			if (x[j] != want) {
				diag("in flight: X[%d] %d, want %lld", j, x[j],
				     (long long)want);
				bad++;
				break;
			}
	}
	for (i = 0; i < N; i++) {
		bad += (int64_t)(gbuf_damage(&gs[i]) + gbuf_damage(&gr[i]));
		gbuf_free(&gs[i]);
		gbuf_free(&gr[i]);
	}
	bad += (int64_t)gbuf_damage(&gx);
	gbuf_free(&gx);
	report(bad, "60 collectives of every kind in flight, a chain on one buffer among them",
	       t0);
}

/* More operations in flight than the CQ holds; then barriers. */
static void flood_case(void)
{
	enum { N = 600, COUNT = 16 };
	coll_request **req = calloc(N, sizeof(*req));
	int32_t *buf = malloc(N * COUNT * sizeof(int32_t));
	struct chk_case c = {
		.coll = CHK_ALLREDUCE, .dt = COLL_DTYPE_INT32,
		.op = COLL_REDOP_SUM, .count = COUNT, .in_place = true,
		.rank = rank, .nranks = nranks,
	};
	int64_t bad = 0;
	double t0 = now();
	int i, ret;

	if (!req || !buf) {
		diag("out of memory");
		exit(1);
	}
	for (i = 0; i < N; i++) {
		chk_fill(&c, buf + i * COUNT, NULL);
		ret = coll_iallreduce(buf + i * COUNT, buf + i * COUNT, COUNT,
				      c.dt, c.op, comm, &req[i]);
		if (ret) {
			diag("flood: coll_iallreduce %d: %s", i,
			     coll_strerror(ret));
			bad++;
		}
	}
	/* Wait in reverse order: earlier completions get recorded while
	 * waiting for later ones. */
	for (i = N - 1; i >= 0; i--) {
		if (!req[i])
			continue;
		ret = coll_wait(req[i]);
		coll_request_free(req[i]);
		if (ret) {
			diag("flood: allreduce %d: %s", i, coll_strerror(ret));
			bad++;
			continue;
		}
		bad += chk_verify(&c, buf + i * COUNT, NULL, NULL, 0) != 0;
	}
	for (i = 0; i < 5; i++) {
		ret = coll_barrier(comm);
		if (ret) {
			diag("barrier: %s", coll_strerror(ret));
			bad++;
		}
	}
	free(req);
	free(buf);
	report(bad, "600 allreduces in flight at once, then 5 barriers", t0);
}

/*
 * -S: many operations queued on one stream before it runs any (each waits
 * for the one before), then two streams taking turns on the
 * communicator; every result checked.
 */
static void stream_flood_case(void)
{
	enum { N = 40, COUNT = 1000 };
	struct chk_case c = {
		.coll = CHK_ALLREDUCE, .dt = COLL_DTYPE_FP32,
		.op = COLL_REDOP_SUM, .count = COUNT, .in_place = true,
		.rank = rank, .nranks = nranks,
	};
	struct gbuf g[N];
	void *buf[N];
	int64_t bad = 0;
	double t0 = now();
	int i, ret, pass;

	/* A GPU reduction given host memory CUDA does not know: its
	 * kernels could not reach it, so it is refused before the stream
	 * or the module see it (every rank alike, nothing sent). */
	{
		static int32_t host[COUNT];
		void *hb = gbuf_alloc(&g[0], COUNT * 4);

		ret = coll_allreduce_stream(host, gbuf_dev(&g[0], hb), COUNT,
					    COLL_DTYPE_INT32, COLL_REDOP_SUM,
					    comm, stream);
		if (ret != -EINVAL) {
			diag("stream reduction from host memory: %s (%s), not EINVAL",
			     coll_strerror(ret), coll_last_error());
			bad++;
		}
		gbuf_free(&g[0]);
	}
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < N; i++) {
			c.op = i % 3 ? COLL_REDOP_SUM : COLL_REDOP_MAX;
			buf[i] = gbuf_alloc(&g[i], COUNT * 4);
			chk_fill(&c, buf[i], NULL);
			gbuf_sync(&g[i], true);
		}
		for (i = 0; i < N; i++) {
			void *d = gbuf_dev(&g[i], buf[i]);
			void *st = pass && (i & 1) ? stream2 : stream;

			c.op = i % 3 ? COLL_REDOP_SUM : COLL_REDOP_MAX;
			ret = coll_allreduce_stream(d, d, COUNT, c.dt, c.op,
						    comm, st);
			if (ret) {
				diag("stream flood: %d: %s", i, coll_last_error());
				bad++;
			}
			/* Two streams: the second waits for the first's
			 * operation through the communicator itself. */
		}
		cm_check(cm.stream_sync(stream), "cuStreamSynchronize");
		cm_check(cm.stream_sync(stream2), "cuStreamSynchronize");
		ret = coll_comm_async_error(comm);
		if (ret) {
			diag("stream flood: async error %s", coll_strerror(ret));
			bad++;
		}
		for (i = 0; i < N; i++) {
			char why[160];
			size_t b;

			c.op = i % 3 ? COLL_REDOP_SUM : COLL_REDOP_MAX;
			gbuf_sync(&g[i], false);
			b = chk_verify(&c, buf[i], NULL, why, sizeof(why));
			if (b)
				diag("stream flood: allreduce %d: %s", i, why);
			bad += (int64_t)(b + gbuf_damage(&g[i]));
			gbuf_free(&g[i]);
		}
	}
	report(bad, "40 allreduces queued on one stream, then 40 on two "
	       "streams in turn", t0);
}

/* What rank @src sends in round @r of stream_p2p_case(), element @i. */
static int32_t p2p_val(int src, int r, size_t i)
{
	return (int32_t)(src * 1000003 + r * 7919 + (int)i);
}

/*
 * -S: point-to-point on streams, around the ring (send to rank + 1,
 * receive from rank - 1). Pass 0: one stream, the even ranks sending
 * first and the odd ones receiving first (one stream each way round would
 * wait for ever). Pass 1: the sends on one stream, the receives on
 * another, all enqueued at once, and an allreduce enqueued on the first
 * stream after the sends: receives may end after it (a later ticket), and
 * must still be waited for by their own stream alone. Pass 2: every rank
 * sending first, on one stream, in a group, with the allreduce in the
 * middle of it: the group is what lets them run together. Pass 3: a group
 * of more operations than a communicator has slots (the first ones must
 * be submitted, and end, while the group is still open).
 */
static void stream_p2p_case(void)
{
	enum { NMAX = 40, COUNT = 3001 };
	struct gbuf gs[NMAX], gr[NMAX], ga;
	int32_t *sb[NMAX], *rb[NMAX], *ab;
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	int64_t bad = 0;
	double t0 = now();
	int r, n, pass, ret;
	size_t i;

	if (nranks < 2)
		return;
	for (pass = 0; pass < 4 && !bad; pass++) {
		bool reduce = pass == 1 || pass == 2;

		n = pass == 3 ? NMAX : 8;
		for (r = 0; r < n; r++) {
			sb[r] = gbuf_alloc(&gs[r], COUNT * 4);
			rb[r] = gbuf_alloc(&gr[r], COUNT * 4);
			for (i = 0; i < COUNT; i++) {
				sb[r][i] = p2p_val(rank, r, i);
				rb[r][i] = -1;
			}
			gbuf_sync(&gs[r], true);
			gbuf_sync(&gr[r], true);
		}
		ab = gbuf_alloc(&ga, COUNT * 4);
		for (i = 0; i < COUNT; i++)
			ab[i] = rank + (int32_t)i;
		gbuf_sync(&ga, true);
		if (pass >= 2)
			coll_group_start();
		for (r = 0; r < n && !bad; r++) {
			void *s = gbuf_dev(&gs[r], sb[r]);
			void *d = gbuf_dev(&gr[r], rb[r]);

			if (pass == 1) {
				ret = coll_send_stream(s, COUNT, COLL_DTYPE_INT32,
						       next, comm, stream) ?:
				      coll_recv_stream(d, COUNT, COLL_DTYPE_INT32,
						       prev, comm, stream2);
			} else if (pass >= 2 || rank % 2 == 0) {
				ret = coll_send_stream(s, COUNT, COLL_DTYPE_INT32,
						       next, comm, stream) ?:
				      coll_recv_stream(d, COUNT, COLL_DTYPE_INT32,
						       prev, comm, stream);
			} else {
				ret = coll_recv_stream(d, COUNT, COLL_DTYPE_INT32,
						       prev, comm, stream) ?:
				      coll_send_stream(s, COUNT, COLL_DTYPE_INT32,
						       next, comm, stream);
			}
			if (ret) {
				diag("stream p2p: pass %d round %d: %s", pass,
				     r, coll_last_error());
				bad++;
			}
			if (pass == 2 && r == n / 2 && !bad &&
			    coll_allreduce_stream(gbuf_dev(&ga, ab),
						  gbuf_dev(&ga, ab), COUNT,
						  COLL_DTYPE_INT32,
						  COLL_REDOP_SUM, comm, stream)) {
				diag("stream p2p: allreduce in a group: %s",
				     coll_last_error());
				bad++;
			}
		}
		if (pass >= 2) {
			ret = coll_group_end();
			if (ret) {
				diag("stream p2p: pass %d: coll_group_end: %s",
				     pass, coll_last_error());
				bad++;
			}
		}
		if (pass == 1 && !bad &&
		    coll_allreduce_stream(gbuf_dev(&ga, ab), gbuf_dev(&ga, ab),
					  COUNT, COLL_DTYPE_INT32,
					  COLL_REDOP_SUM, comm, stream)) {
			diag("stream p2p: allreduce: %s", coll_last_error());
			bad++;
		}
		cm_check(cm.stream_sync(stream), "cuStreamSynchronize");
		cm_check(cm.stream_sync(stream2), "cuStreamSynchronize");
		ret = coll_comm_async_error(comm);
		if (ret) {
			diag("stream p2p: async error %s", coll_strerror(ret));
			bad++;
		}
		for (r = 0; r < n; r++) {
			size_t wrong = 0;

			gbuf_sync(&gr[r], false);
			for (i = 0; i < COUNT; i++)
				wrong += rb[r][i] != p2p_val(prev, r, i);
			if (wrong)
				diag("stream p2p: pass %d round %d: %zu of %d "
				     "elements wrong", pass, r, wrong, COUNT);
			bad += (int64_t)(wrong + gbuf_damage(&gr[r]) +
					 gbuf_damage(&gs[r]));
			gbuf_free(&gs[r]);
			gbuf_free(&gr[r]);
		}
		if (reduce) {
			size_t wrong = 0;

			gbuf_sync(&ga, false);
			/* sum over ranks of (rank + i) */
			for (i = 0; i < COUNT; i++)
				wrong += ab[i] != (int32_t)(nranks * (nranks - 1) /
							    2 + nranks * (int)i);
			if (wrong)
				diag("stream p2p: pass %d: allreduce: %zu wrong",
				     pass, wrong);
			bad += (int64_t)(wrong + gbuf_damage(&ga));
		}
		gbuf_free(&ga);
	}
	report(bad, "point-to-point on streams around the ring: one stream "
	       "(even ranks send first), sends and receives on two streams "
	       "with an allreduce after them, every rank sending first in a "
	       "group with an allreduce inside, a group of 80 (more than the "
	       "64 slots)", t0);
}

/*
 * -S: two communicators of the same ranks, each with its own stream,
 * operations enqueued on both in turn: each communicator has its own
 * doorbell page and order, neither waits for the other.
 */
static void stream_two_comms_case(void)
{
	enum { N = 16, COUNT = 777 };
	struct chk_case c = {
		.coll = CHK_ALLREDUCE, .dt = COLL_DTYPE_INT32,
		.op = COLL_REDOP_SUM, .count = COUNT, .in_place = true,
		.rank = rank, .nranks = nranks,
	};
	const char *root = getenv("KCOLL_ROOT");
	char root2[128], *colon;
	struct gbuf g[N];
	coll_comm *comm2 = NULL;
	void *buf[N];
	int64_t bad = 0;
	double t0 = now();
	int i, ret;

	/* The second one bootstraps at the next port of the same root. */
	if (!root || !(colon = strrchr(root, ':'))) {
		tap(true, "two communicators # SKIP needs KCOLL_ROOT host:port");
		return;
	}
	snprintf(root2, sizeof(root2), "%.*s:%d", (int)(colon - root), root,
		 atoi(colon + 1) + 1000);
	setenv("KCOLL_ROOT", root2, 1);
	ret = coll_comm_init_env(&comm2);
	setenv("KCOLL_ROOT", root, 1);
	if (ret) {
		diag("second communicator: %s", coll_last_error());
		report(1, "two communicators, two streams", t0);
		return;
	}
	for (i = 0; i < N; i++) {
		buf[i] = gbuf_alloc(&g[i], COUNT * 4);
		chk_fill(&c, buf[i], NULL);
		gbuf_sync(&g[i], true);
	}
	for (i = 0; i < N; i++) {
		void *d = gbuf_dev(&g[i], buf[i]);

		ret = coll_allreduce_stream(d, d, COUNT, c.dt, c.op,
					    i & 1 ? comm2 : comm,
					    i & 1 ? stream2 : stream);
		if (ret) {
			diag("two communicators: %d: %s", i, coll_last_error());
			bad++;
		}
	}
	cm_check(cm.stream_sync(stream), "cuStreamSynchronize");
	cm_check(cm.stream_sync(stream2), "cuStreamSynchronize");
	if ((ret = coll_comm_async_error(comm)) ||
	    (ret = coll_comm_async_error(comm2))) {
		diag("two communicators: %s", coll_strerror(ret));
		bad++;
	}
	for (i = 0; i < N; i++) {
		gbuf_sync(&g[i], false);
		bad += (int64_t)(chk_verify(&c, buf[i], NULL, NULL, 0) +
				 gbuf_damage(&g[i]));
		gbuf_free(&g[i]);
	}
	ret = coll_comm_destroy(comm2);
	bad += ret != 0;
	report(bad, "16 allreduces on two communicators, each with its "
	       "own stream, in turn", t0);
}

/* ------------------------------------------------------------------ */
/* Negative tests                                                      */
/* ------------------------------------------------------------------ */

static int init_comm(void)
{
	int ret;

	stage = "coll_comm_init_env";
	ret = coll_comm_init_env(&comm);
	stage = "after coll_comm_init_env";
	if (ret) {
		printf("Bail out! coll_comm_init_env: %d (%s): %s\n", ret,
		       coll_strerror(ret), coll_last_error());
		return ret;
	}
	rank = coll_comm_rank(comm);
	nranks = coll_comm_size(comm);
	return 0;
}

static int result_line(bool ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int result_line(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%sok 1 - rank %d: ", ok ? "" : "not ", rank);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	return ok ? 0 : 1;
}

/*
 * A rooted collective from rank 0 in which the last rank uses another
 * count. Broadcast, reduce and gather go without SIGs to lazy peers
 * (docs/DESIGN.md, "Lazy signatures"): the root must fail with -EBADMSG,
 * and the differing rank of a broadcast; any other rank either fails
 * likewise or completes with the root's data (broadcast) or without
 * touching its receive buffer (reduce and gather, non-root). A scatter
 * exchanges SIGs: the root and the differing rank must fail, the others
 * fail or hold their block of the root's data. A broadcast may return
 * before its confirmation tokens are in ("Confirmations behind"): a rank
 * whose broadcast returned and then failed gets -EBADMSG from the
 * barrier that follows instead, and the root gets it from one or the
 * other. Any other barrier after the mismatch succeeds. Then one matching
 * broadcast must work everywhere.
 */
enum rooted_kind { RM_BCAST, RM_REDUCE, RM_GATHER, RM_SCATTER };

static bool rooted_mismatch(int32_t *buf, size_t count, enum rooted_kind kind)
{
	static const char *const names[] = { "broadcast", "reduce", "gather",
					     "scatter" };
	const char *what = names[kind];
	size_t cnt = rank == nranks - 1 ? count + 1 : count, i;
	size_t big = (size_t)nranks * (count + 1);
	int32_t *in = calloc(big, sizeof(int32_t));
	int32_t *all = calloc(big, sizeof(int32_t));
	/* Ranks whose own data nobody else uses may complete. */
	bool leaf = kind == RM_REDUCE || kind == RM_GATHER;
	bool ok = true;
	double t0;
	int ret, bar;

	if (!in || !all) {
		free(in);
		free(all);
		return false;
	}
	for (i = 0; i < big; i++) {
		in[i] = (int32_t)(i * 7 + 1) * (kind == RM_SCATTER ? 1 :
						rank + 1);
		all[i] = -1;
	}
	for (i = 0; i <= count; i++)
		buf[i] = rank == 0 || kind == RM_REDUCE ? in[i] : -1;
	t0 = now();
	switch (kind) {
	case RM_REDUCE:
		ret = coll_reduce(in, buf, cnt, COLL_DTYPE_INT32,
				  COLL_REDOP_SUM, 0, comm);
		break;
	case RM_GATHER:
		ret = coll_gather(in, all, cnt, COLL_DTYPE_INT32, 0, comm);
		break;
	case RM_SCATTER:
		ret = coll_scatter(in, buf, cnt, COLL_DTYPE_INT32, 0, comm);
		break;
	default:
		ret = coll_broadcast(buf, buf, cnt, COLL_DTYPE_INT32, 0, comm);
		break;
	}
	if (ret)
		diag("%s mismatch after %.3f s: %s", what, now() - t0,
		     coll_last_error());
	bar = coll_barrier(comm);
	if (bar)
		diag("the barrier after the %s mismatch: %s", what,
		     coll_last_error());
	/* Only a broadcast that returned, and only with its own failure. */
	if (bar && (kind != RM_BCAST || ret || bar != -EBADMSG ||
		    rank == nranks - 1)) {
		diag("%s mismatch: rank %d's barrier after it got %d (%s)",
		     what, rank, bar, coll_strerror(bar));
		ok = false;
	}
	/* The root must fail (a broadcast's maybe only in the barrier);
	 * so must the differing rank, but as a reduce or gather leaf whose
	 * transfer went eager, which may complete before the root's ABORT
	 * comes (it used nobody's data). */
	if (rank == 0 && kind == RM_BCAST && !ret) {
		if (bar != -EBADMSG) {
			diag("%s mismatch: rank 0 returned it and its barrier got %d (%s), not -EBADMSG",
			     what, bar, coll_strerror(bar));
			ok = false;
		}
	} else if (rank == 0 || (rank == nranks - 1 && !leaf)) {
		if (ret != -EBADMSG) {
			diag("%s mismatch: rank %d got %d (%s), not -EBADMSG",
			     what, rank, ret, coll_strerror(ret));
			ok = false;
		}
	} else if (ret && ret != -EBADMSG) {
		diag("%s mismatch: rank %d got %d (%s)", what, rank, ret,
		     coll_strerror(ret));
		ok = false;
	} else if (!ret) {
		/* Completed: the root's data (broadcast, scatter), or its
		 * receive buffer untouched (a reduce's or gather's
		 * non-root does not write it). */
		for (i = 0; i < count && ok; i++) {
			int32_t want, got = buf[i];

			switch (kind) {
			case RM_REDUCE:
				want = in[i];
				break;
			case RM_GATHER:
				want = -1;
				got = all[i];
				break;
			case RM_SCATTER:
				want = (int32_t)(((size_t)rank * count + i) * 7 + 1);
				break;
			default:
				want = (int32_t)(i * 7 + 1);
				break;
			}
			if (got != want) {
				diag("%s mismatch: rank %d completed with "
				     "element %zu = %d", what, rank, i, got);
				ok = false;
			}
		}
	}
	diag("%s mismatch (count %zu, root 0): %d (%s)", what, cnt, ret,
	     coll_strerror(ret));
	/* The communicator goes on: one matching broadcast. */
	for (i = 0; i < count; i++)
		buf[i] = rank == 0 ? (int32_t)i : -1;
	ret = coll_broadcast(buf, buf, count, COLL_DTYPE_INT32, 0, comm);
	if (ret)
		diag("the broadcast after: %s", coll_last_error());
	for (i = 0; i < count && !ret; i++)
		if (buf[i] != (int32_t)i)
			ret = -EIO;
	if (ret) {
		diag("the broadcast after the %s mismatch: %d (%s)", what,
		     ret, coll_strerror(ret));
		ok = false;
	}
	free(in);
	free(all);
	return ok;
}

/* The v-variants' tables disagree (kcoll-vcheck.h says who fails). */
static bool vec_mismatch(enum vchk_op op)
{
	double t0 = now();
	int got;
	bool ok = vchk_mismatch(op, comm, rank, nranks, &got);

	diag("%s mismatch: %d (%s) after %.3f s%s", vchk_names[op], got,
	     coll_strerror(got), now() - t0, ok ? "" : ": WRONG");
	return ok;
}

static bool vec_after(void)
{
	int32_t v = 1;
	int ret = coll_allreduce(&v, &v, 1, COLL_DTYPE_INT32, COLL_REDOP_SUM,
				 comm);

	if (ret || v != nranks)
		diag("the allreduce after the v-variants' mismatches: %d (%s), "
		     "%d", ret, coll_strerror(ret), v);
	return !ret && v == nranks;
}

static int test_mismatch(void)
{
	enum { COUNT = 1000 };
	int32_t *buf = calloc(COUNT + 1, sizeof(int32_t));
	size_t cnt;
	coll_request *req;
	int ret, ret2, done = 0;
	bool ok2;

	if (!buf || init_comm()) {
		free(buf);
		return 1;
	}
	if (nranks < 2) {
		free(buf);
		coll_comm_destroy(comm);
		return result_line(true, "# SKIP a mismatch needs 2 ranks");
	}
	cnt = rank == 1 ? COUNT + 1 : COUNT;
	ret = coll_allreduce(buf, buf, cnt, COLL_DTYPE_INT32, COLL_REDOP_SUM,
			     comm);
	/* Informative only: whether the communicator still works (waited
	 * for 30 s at most; the abort below cancels it). */
	ret2 = coll_iallreduce(buf, buf, COUNT, COLL_DTYPE_INT32,
			       COLL_REDOP_SUM, comm, &req);
	if (!ret2) {
		struct pollfd p = { .fd = coll_comm_fd(comm), .events = POLLIN };
		double t0 = now();

		for (;;) {
			ret2 = coll_test(req, &done);
			if (done || ret2 || now() - t0 > 30)
				break;
			poll(&p, 1, 1000);
		}
		if (!done && !ret2)
			diag("the next, matching allreduce is still in flight "
			     "after 30 s");
		else
			diag("the next, matching allreduce returned %d (%s)",
			     ret2, coll_strerror(ret2));
		if (done)
			coll_request_free(req);
	}
	if (!ret2 && done) {
		ok2 = rooted_mismatch(buf, COUNT, RM_BCAST);
		ok2 &= rooted_mismatch(buf, COUNT, RM_REDUCE);
		ok2 &= rooted_mismatch(buf, COUNT, RM_GATHER);
		ok2 &= rooted_mismatch(buf, COUNT, RM_SCATTER);
		ok2 &= vec_mismatch(VCHK_ALLGATHERV);
		ok2 &= vec_mismatch(VCHK_ALLTOALLV);
		/* The pair of the alltoallv mismatch fails at once; the
		 * others may still wait for their data: nobody leaves
		 * before all are through, and the communicator works. */
		ok2 &= vec_after();
	} else {
		diag("the rooted mismatches need the communicator the "
		     "allreduce mismatch left usable");
		ok2 = false;
	}
	free(buf);
	/* A rank done early must not cut off the others' last broadcast:
	 * destroy says BYE (every collective of ours completed) and waits
	 * for our last sends to be acknowledged; abort does neither. */
	if (ok2)
		coll_comm_destroy(comm);
	else
		coll_comm_abort(comm);
	return result_line(ret == -EBADMSG && ok2,
			   "signature mismatch (count %zu) returned %d (%s)%s",
			   cnt, ret, coll_strerror(ret),
			   ok2 ? "" : "; a rooted mismatch went wrong");
}

static int test_wrong_key(void)
{
	uint8_t key[KCOLL_KEY_LEN];
	struct kcoll_rank_addr self, *table;
	coll_unique_id id;
	uint64_t uid;
	double t0;
	int ret;

	ret = coll_env_unique_id(&id, &rank, &nranks);
	if (!ret)
		ret = coll_node_addr(&self);
	if (ret) {
		printf("Bail out! %s\n", coll_last_error());
		return 1;
	}
	if (nranks < 2)
		return result_line(true, "# SKIP a wrong key needs 2 ranks");
	table = calloc((size_t)nranks, sizeof(*table));
	ret = table ? coll_bootstrap(&id, nranks, rank, &self, table, &uid) :
		      -ENOMEM;
	if (!ret)
		ret = coll_unique_id_secret(&id, key);
	if (ret) {
		printf("Bail out! bootstrap: %s\n", coll_last_error());
		free(table);
		return 1;
	}
	if (rank == nranks - 1)
		key[5] ^= 0x10;
	/* Fail in bounded time if the kernel has no default. */
	setenv(COLL_ENV_CONNECT_TIMEOUT, "20000", 0);
	t0 = now();
	ret = coll_comm_init_table(&comm, nranks, rank, table, uid, key);
	free(table);
	if (!ret) {
		coll_comm_destroy(comm);
		return result_line(false, "communicator created with %s key",
				   rank == nranks - 1 ? "a wrong" : "the right");
	}
	return result_line(true, "%s key: creation failed as it must with %d "
			   "(%s) after %.1f s: %s",
			   rank == nranks - 1 ? "wrong" : "right", ret,
			   coll_strerror(ret), now() - t0, coll_last_error());
}

static bool die_kill;		/* -X with KCOLL_TEST_DIE=kill */
static int die_pipe = -1;	/* to the parent: "this one kills itself" */

/*
 * Start a test that needs two ranks or more: @count floats and the
 * communicator. NULL when it cannot go on, *@ret then being its result
 * (1 on failure; a SKIP line, saying @skip, for a single rank).
 */
static float *pair_test_begin(size_t count, const char *skip, int *ret)
{
	float *buf = calloc(count, sizeof(float));

	if (!buf || init_comm()) {
		free(buf);
		*ret = 1;
		return NULL;
	}
	if (nranks < 2) {
		free(buf);
		coll_comm_destroy(comm);
		*ret = result_line(true, "%s", skip);
		return NULL;
	}
	return buf;
}

static int test_die(void)
{
	size_t count = 8 * MIB / 4;	/* 32 MiB of fp32 */
	coll_request *req;
	int i, ret = 0;
	float *buf = pair_test_begin(count, "# SKIP a dying rank needs 2 ranks",
				     &ret);

	if (!buf)
		return ret;
	if (rank == nranks - 1) {
		stage = "the dying rank's allreduce";
		ret = coll_iallreduce(buf, buf, count, COLL_DTYPE_FP32,
				      COLL_REDOP_SUM, comm, &req);
		diag("dying (%s) in the middle of an allreduce (issued: %d)",
		     die_kill ? "SIGKILL" : "_exit", ret);
		fflush(stdout);
		usleep(300 * 1000);
		/* SIGKILL: no exit path of the process runs, the kernel
		 * alone tears the file and the communicator down. */
		if (die_kill) {
			if (write(die_pipe, "k", 1) != 1)
				_exit(4);
			kill(getpid(), SIGKILL);
		}
		_exit(0);
	}
	/* Were detection ever stuck, the timeout would turn the hang into
	 * a report of whom each rank waits for (and still fail below). */
	coll_comm_set_timeout(comm, 30000);
	/* The first allreduce may still complete; a later one cannot. */
	for (i = 0; i < 3; i++) {
		double t0 = now(), dt;

		stage = i == 0 ? "allreduce 0" : i == 1 ? "allreduce 1" :
			"allreduce 2";
		ret = coll_iallreduce(buf, buf, count, COLL_DTYPE_FP32,
				      COLL_REDOP_SUM, comm, &req);
		if (!ret) {
			ret = coll_wait(req);
			coll_request_free(req);
		}
		dt = now() - t0;
		diag("allreduce %d returned %d (%s) after %.1f s", i, ret,
		     coll_strerror(ret), dt);
		if (ret) {
			coll_report rep;
			bool named;

			/* The report must blame the dead rank, not the
			 * messenger that told us. */
			named = !coll_comm_get_report(comm, &rep) &&
				rep.error && rep.peer == nranks - 1;
			diag("report: %s", coll_last_error());
			free(buf);
			stage = "coll_comm_abort";
			coll_comm_abort(comm);
			return result_line(dt < 20 && named,
					   "peer death reported as %d (%s) "
					   "after %.1f s, rank %d named", ret,
					   coll_strerror(ret), dt,
					   named ? nranks - 1 : rep.peer);
		}
	}
	free(buf);
	coll_comm_abort(comm);
	return result_line(false, "3 allreduces completed without the dead "
			   "rank");
}

/*
 * Run @fn(@arg) in a child whose death by SIGKILL is planned (it says so on
 * the pipe, die_pipe, first), so that this process can still exit 0 when
 * @who died as planned; the child's own exit status otherwise.
 */
static int in_killed_child(int (*fn)(int), int arg, unsigned int timeout,
			   const char *who)
{
	int p[2], st;
	pid_t pid;
	char c;

	if (pipe(p))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (!pid) {
		close(p[0]);
		die_pipe = p[1];
		alarm(timeout);		/* alarms do not survive fork() */
		_exit(fn(arg));
	}
	close(p[1]);
	if (waitpid(pid, &st, 0) != pid)
		return 1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL &&
	    read(p[0], &c, 1) == 1 && c == 'k') {
		printf("ok 1 - %s died of SIGKILL as planned\n", who);
		return 0;
	}
	printf("not ok 1 - the test process died: status %#x\n", st);
	return 1;
}

static int test_die_arg(int unused)
{
	(void)unused;
	return test_die();
}

/* -X with SIGKILL: the dying rank's death is a child's. */
static int test_die_killed(unsigned int timeout)
{
	return in_killed_child(test_die_arg, 0, timeout, "the dying rank");
}

/* Keep the communicator while $KCOLL_TEST_HOLD exists (120 s at most). */
static void hold(void)
{
	const char *f = getenv("KCOLL_TEST_HOLD");
	double t0 = now();

	stage = "holding the communicator";
	if (!f)
		return;
	diag("holding the communicator while %s exists", f);
	while (access(f, F_OK) == 0 && now() - t0 < 120)
		usleep(100 * 1000);
}

static int test_timeout(void)
{
	enum { COUNT = 4096, TMO_MS = 2000 };
	coll_report rep;
	char line[256];
	double t0, dt;
	bool ok;
	int ret;
	float *buf = pair_test_begin(COUNT, "# SKIP a timeout needs 2 ranks",
				     &ret);

	if (!buf)
		return ret;
	if (rank == nranks - 1) {
		/* The straggler never submits. */
		diag("never joining the allreduce");
		fflush(stdout);
		hold();
		free(buf);
		coll_comm_destroy(comm);
		return result_line(true, "the straggler held its communicator");
	}
	coll_comm_set_timeout(comm, TMO_MS);
	stage = "the allreduce that times out";
	t0 = now();
	ret = coll_allreduce(buf, buf, COUNT, COLL_DTYPE_FP32, COLL_REDOP_SUM,
			     comm);
	dt = now() - t0;
	diag("allreduce returned %d (%s) after %.1f s: %s", ret,
	     coll_strerror(ret), dt, coll_last_error());
	memset(&rep, 0, sizeof(rep));
	ok = ret == -ETIMEDOUT && !coll_comm_get_report(comm, &rep) &&
	     rep.error == -ETIMEDOUT && rep.reason == COLL_REPORT_TIMEOUT &&
	     rep.nmissing == 1 && rep.missing[0] == (uint32_t)nranks - 1 &&
	     rep.peer == nranks - 1 && rep.opcode == KCOLL_OP_ALLREDUCE;
	coll_report_format(&rep, line, sizeof(line));
	/* ctl.sh waits for this line before it looks with kcollctl. */
	diag("report: %s", line);
	fflush(stdout);
	hold();
	free(buf);
	coll_comm_destroy(comm);
	return result_line(ok && dt < TMO_MS / 1000.0 + 10,
			   "timeout after %.1f s: error %d reason %d, %u "
			   "missing, first %d, peer %d", dt, rep.error,
			   rep.reason, rep.nmissing,
			   rep.nmissing ? (int)rep.missing[0] : -1, rep.peer);
}

/*
 * -S -T / -A / -W / -V / -P: stream-ordered operations that fail must not
 * leave a stream waiting. Each rank's stream must finish within @limit s.
 */
/* The ranks of the node whose rxe0 -R removes: KCOLL_VM is 0 there. */
static bool on_vm0(void)
{
	const char *vm = getenv("KCOLL_VM");

	return vm && !strcmp(vm, "0");
}

/* Run shell command @cmd (posix_spawn: no copy of pinned memory). */
static int run_cmd(const char *cmd)
{
	char *argv[] = { "sh", "-c", (char *)cmd, NULL };
	extern char **environ;
	pid_t pid;
	int st;

	if (posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ) ||
	    waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool stream_done_within(double limit)
{
	double t0 = now();

	while (cm.stream_query(stream)) {
		if (now() - t0 > limit)
			return false;
		usleep(10000);
	}
	return true;
}

static int test_stream_fault(int how)
{
	/* -V, -P: what the peer does after 1 s, not this timeout, must end
	 * it. */
	enum { COUNT = 4096, TMO_MS = 2000, PEER_TMO_MS = 10000 };
	struct gbuf g;
	coll_report rep;
	char line[256], why[160];
	float *buf;
	void *d;
	double t0, dt;
	bool ok, released, untouched = true;
	int ret, i;

	if (how == 'W' && getenv("KCOLL_RANK") && !strcmp(getenv("KCOLL_RANK"), "0"))
		setenv("FAKECUDA_STALL_MS", "6000", 1);
	if (cm_open(why, sizeof(why))) {
		printf("Bail out! -S: %s\n", why);
		return 1;
	}
	if (init_comm())
		return 1;
	cm_check(cm.stream_create(&stream, 1), "cuStreamCreate");
	if (nranks < 2) {
		coll_comm_destroy(comm);
		return result_line(true, "# SKIP needs 2 ranks");
	}
	devbufs = true;
	buf = gbuf_alloc(&g, COUNT * sizeof(float));
	for (i = 0; i < COUNT; i++)
		buf[i] = (float)rank;
	gbuf_sync(&g, true);
	d = gbuf_dev(&g, buf);
	if (how != 'W' && rank == nranks - 1) {
		diag("never joining the allreduce");
		if (how == 'R') {
			/* Until well after the others have failed. */
			sleep(8);
			coll_comm_destroy(comm);
			gbuf_free(&g);
			return result_line(true, "the straggler stayed away");
		}
		fflush(stdout);
		if (how == 'V') {
			/* Before the others' timeout: the revoke, passed on,
			 * is what must release their streams. */
			sleep(1);
			ret = coll_comm_revoke(comm);
			sleep(3);
			coll_comm_destroy(comm);
			gbuf_free(&g);
			return result_line(!ret, "the straggler revoked");
		}
		if (how == 'P') {
			/* No exit path runs: the kernel closes the file. */
			sleep(1);
			if (die_pipe >= 0 && write(die_pipe, "k", 1) != 1)
				return 1;
			kill(getpid(), SIGKILL);
		}
		sleep(how == 'A' ? 4 : 6);
		coll_comm_destroy(comm);
		gbuf_free(&g);
		return result_line(true, "the straggler stayed away");
	}
	/* -W: rank 0's timer fires first, so that it is rank 0 that tells
	 * (its own stream did not come), not a peer tired of waiting. */
	coll_comm_set_timeout(comm, how == 'V' || how == 'P' ||
			      how == 'R' ? PEER_TMO_MS :
			      how != 'W' ? TMO_MS :
			      rank == 0 ? TMO_MS / 2 : 3 * TMO_MS);
	t0 = now();
	ret = coll_allreduce_stream(d, d, COUNT, COLL_DTYPE_FP32,
				    COLL_REDOP_SUM, comm, stream);
	if (ret) {
		coll_comm_destroy(comm);
		return result_line(false, "enqueue: %s", coll_last_error());
	}
	if (how == 'R' && rank == 0) {
		/* rxe0 goes away under the waiting streams of this node's
		 * ranks (the scenario adds it back). */
		sleep(1);
		ret = run_cmd("rdma link delete rxe0");
		diag("rdma link delete rxe0: %d", ret);
	}
	if (how == 'A') {
		sleep(1);
		ret = coll_comm_abort(comm);
		comm = NULL;
		/*
		 * Released once the NIC can no longer write into the
		 * buffer: the connections are down. Seconds under TCG; the
		 * bound leaves room for 6.1's rxe stalling a requester until
		 * the send-queue watchdog closes it (30 s; DESIGN.md "Known
		 * limits").
		 */
		released = stream_done_within(75);
		dt = now() - t0;
		gbuf_sync(&g, false);
		for (i = 0; i < COUNT; i++)
			untouched &= buf[i] == (float)rank;
		gbuf_free(&g);
		if (nranks > 2)
			untouched = true;	/* see below */
		return result_line(released && untouched,
				   "aborted after 1 s: stream released after %.1f s, "
				   "buffer %s", dt, untouched ? "untouched" :
				   "CHANGED");
	}
	released = stream_done_within(how == 'W' ? 20 : 15);
	dt = now() - t0;
	ret = coll_comm_async_error(comm);
	memset(&rep, 0, sizeof(rep));
	coll_comm_get_report(comm, &rep);
	coll_report_format(&rep, line, sizeof(line));
	diag("stream finished %s after %.1f s; async error %d (%s); report: %s",
	     released ? "" : "NOT", dt, ret, coll_strerror(ret), line);
	gbuf_sync(&g, false);
	for (i = 0; i < COUNT; i++)
		untouched &= buf[i] == (float)rank;
	if (how == 'T')
		ok = ret == -ETIMEDOUT && rep.reason == COLL_REPORT_TIMEOUT &&
		     rep.peer == nranks - 1;
	else if (how == 'V')	/* the straggler's revoke, passed on */
		ok = ret == -ECANCELED && rep.reason == COLL_REPORT_ABORTED &&
		     rep.peer == nranks - 1 && dt < PEER_TMO_MS / 1000.0;
	else if (how == 'P')	/* the straggler killed */
		ok = ret == -ECONNRESET && rep.peer == nranks - 1 &&
		     dt < PEER_TMO_MS / 1000.0;
	else if (how == 'R')	/* its device gone: here (or first under
				 * the other rank of this node, which then
				 * leaves), or at a peer */
		ok = on_vm0() ? (ret == -ENODEV || ret == -ECONNRESET) &&
				dt < PEER_TMO_MS / 1000.0 :
		     ret < 0;
	else if (rank == 0)
		ok = ret == -ETIMEDOUT && rep.reason == COLL_REPORT_GPU_STREAM;
	else
		ok = ret < 0 && rep.peer == 0;	/* rank 0 abandoned it */
	/*
	 * Untouched where nothing can have arrived: rank 0's stream never
	 * started its part (its kernels see cancel), and with two ranks the
	 * one waiting got nothing. Elsewhere a step may have run before the
	 * failure (an in-place result is then partial, as on the CPU path).
	 */
	if (!((how == 'W' && rank == 0) || (how != 'W' && nranks == 2)))
		untouched = true;
	if (how == 'R' && !on_vm0())	/* peers of the removed device:
						 * what they got is theirs */
		untouched = true;
	gbuf_free(&g);
	coll_comm_destroy(comm);
	return result_line(ok && released && untouched,
			   "%s: stream released after %.1f s, error %d, reason %d, "
			   "peer %d, buffer %s", how == 'T' ? "peer missing" :
			   how == 'V' ? "peer revoked" : how == 'P' ?
			   "peer killed" : how == 'R' ? "device removed" :
			   "stream stalled", dt, ret,
			   rep.reason, rep.peer,
			   untouched ? "untouched" : "CHANGED");
}

/*
 * -S -P: the straggler (the last rank) is killed, in a child (as -X with
 * SIGKILL); the others run test_stream_fault('P') as themselves.
 */
static int test_stream_fault_killed(unsigned int timeout)
{
	const char *r = getenv("KCOLL_RANK"), *n = getenv("KCOLL_NRANKS");

	if (!r || !n || atoi(r) != atoi(n) - 1)
		return test_stream_fault('P');
	return in_killed_child(test_stream_fault, 'P', timeout,
			       "the straggler");
}

/* ------------------------------------------------------------------ */
/* Main                                                                */
/* ------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr, "usage: kcoll-colltest [-q | -F] [-c collective] "
		"[-t seconds] [-v] [-D exporter | -S]\n"
		"       kcoll-colltest -M | -K | -X | -T | -G\n"
		"       kcoll-colltest -S -T | -A | -W | -V | -P | -R\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int level = 1, only = -1, special = 0, opt, i, ret;
	unsigned int timeout = 0;
	double t0 = now();

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "qFc:t:vMKXTGD:SAWVPRm")) != -1) {
		switch (opt) {
		case 'q':
			level = 0;
			break;
		case 'F':
			level = 2;
			break;
		case 'c':
			for (i = 0; i < CHK_NR; i++)
				if (!strcmp(optarg, chk_coll_names[i]))
					only = i;
			if (only < 0)
				usage();
			break;
		case 't':
			timeout = (unsigned int)atoi(optarg);
			break;
		case 'v':
			verbose = 1;
			break;
		case 'D':
			dmabuf = optarg;
			break;
		case 'S':
			gpu = true;
			break;
		case 'm':
			mixed = true;
			break;
		case 'M':
		case 'K':
		case 'X':
		case 'T':
		case 'G':
		case 'A':
		case 'W':
		case 'V':
		case 'P':
		case 'R':
			special = opt;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	signal(SIGALRM, watchdog);
	if ((special == 'X' || special == 'T') && !timeout)
		timeout = special == 'T' ? 200 : 120;
	alarm(timeout);

	if (gpu && special == 'P')
		return test_stream_fault_killed(timeout);
	if (gpu && (special == 'T' || special == 'A' || special == 'W' ||
		    special == 'V' || special == 'R'))
		return test_stream_fault(special);
	if (special == 'M')
		return test_mismatch();
	if (special == 'K')
		return test_wrong_key();
	if (special == 'X') {
		const char *how = getenv("KCOLL_TEST_DIE");

		die_kill = how && !strcmp(how, "kill");
		return die_kill ? test_die_killed(timeout) : test_die();
	}
	if (special == 'T')
		return test_timeout();

	if (gpu) {
		char why[160];

		if (cm_open(why, sizeof(why))) {
			printf("Bail out! -S: %s\n", why);
			return 1;
		}
		cm_check(cm.stream_create(&stream, 1), "cuStreamCreate");
		cm_check(cm.stream_create(&stream2, 1), "cuStreamCreate");
	}
	if (init_comm())
		return 1;
	devbufs = gpu && !(mixed && (rank & 1));
	if (rank == 0)
		printf("# kcoll-colltest: %d ranks, %s run%s%s%s%s\n", nranks,
		       level == 0 ? "quick" : level == 1 ? "default" : "full",
		       dmabuf ? ", every buffer a dma-buf of " : "",
		       dmabuf ? dmabuf : "",
		       !gpu ? "" : cm.standin ?
		       ", GPU memory and streams of the STAND-IN CUDA driver" :
		       ", GPU memory and streams (CUDA)",
		       mixed ? "; odd ranks on host memory" : "");
	if (special != 'G') {
		small_matrix(only);
		big_cases(level, only);
	}
	if (only < 0 && gpu && !mixed) {
		stream_flood_case();
		stream_two_comms_case();
		stream_p2p_case();
	}
	if (only < 0 && gpu)
		vec_cases(0);
	if (only < 0 && !dmabuf && !gpu) {
		vec_cases(level);
		group_case();
		inflight_case();
		flood_case();
	}
	ret = coll_comm_destroy(comm);
	if (ret) {
		diag("coll_comm_destroy: %d (%s)", ret, coll_strerror(ret));
		tap_fail++;
	}
	if (rank == 0) {
		printf("1..%u\n", tap_n);
		printf("# kcoll-colltest: %u passed, %u failed in %.1f s\n",
		       tap_n - tap_fail, tap_fail, now() - t0);
	}
	return tap_fail ? 1 : 0;
}
