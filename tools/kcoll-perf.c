// SPDX-License-Identifier: MIT
/*
 * kcoll-perf: nccl-tests-style bandwidth benchmark of libcoll collectives.
 * One process per rank; rank, size and communicator id come from
 * coll_comm_init_env() (KCOLL_RANK/KCOLL_NRANKS with KCOLL_UNIQUE_ID or
 * KCOLL_ROOT/KCOLL_SECRET, or Open MPI's mpirun -x KCOLL_ROOT -x
 * KCOLL_SECRET). Rank 0 prints the table.
 *
 * Usage: kcoll-perf [-b minbytes] [-e maxbytes] [-f stepfactor] [-d dtype]
 *                   [-o redop] [-c collective] [-r root] [-n iters]
 *                   [-w warmup] [-i 0|1] [-C 0|1] [-R 0|1] [-M] [-u]
 *   -b, -e  sizes (suffixes K, M, G); defaults 8 and 8M
 *   -f      multiply the size by this each step (default 2)
 *   -d      int8 uint8 int32 uint32 int64 uint64 fp16 bf16 fp32 fp64
 *           (default fp32; float, half, double, bfloat16 work too)
 *   -o      sum prod min max avg (default sum)
 *   -c      allreduce reduce broadcast allgather reduce_scatter alltoall
 *           sendrecv gather scatter allgatherv reduce_scatterv alltoallv,
 *           a list of them, or all (the equal-block ones; default
 *           allreduce)
 *   -r      root of reduce, broadcast, gather and scatter (default 0)
 *   -n, -w  timed and warm-up iterations per size (defaults 20 and 5)
 *   -i 1    also measure in place
 *   -C 0    skip the check (default: one checked iteration per size, with
 *           rank-dependent inputs; #wrong = wrong elements on all ranks)
 *   -R 1    register the buffers with coll_mem_register() first
 *   -D E    the buffers are dma-bufs of exporter E (vgem, udmabuf, heap,
 *           testbuf; tools/dmabuf-alloc.h), imported by kcoll with
 *           coll_mem_register_dmabuf() (GPU memory without a GPU)
 *   -G      GPU memory and CUDA streams (libcuda.so.1; in the VMs the
 *           STAND-IN driver, which the header line names): the buffers
 *           are cuMemAlloc'ed, the iterations are the stream-ordered forms
 *           (coll_*_stream) enqueued back to back on one stream, then
 *           cuStreamSynchronize; a KCOLL_DEVMEM=1 communicator; no
 *           sendrecv
 *   -M      bandwidths in MB/s instead of GB/s (slow, emulated links)
 *   -B k    k pairs of buffers, iteration i on pair i mod k (default 1:
 *           every iteration on the same buffers, which therefore run one
 *           after the other, as on one nccl-tests stream); k > 1 is what
 *           DDP's buckets look like, and lets the module run several
 *           collectives at once (sysfs colls_in_flight); host memory
 *   -V s    the v-variants (-c allgatherv, reduce_scatterv, alltoallv):
 *           their largest block s times their smallest (default 1: equal
 *           blocks; collsim's -V); int32; host memory, or GPU memory
 *           and streams with -G
 *   -u      also CPU time per GB of bus traffic of the timed iterations
 *           (out of place): "cpu" of the ranks' processes, "node" of
 *           their nodes' CPUs (tools/bench-util.h); and per collective,
 *           the same over the sizes >= 1 MiB
 *   -P      the module's profile of the timed iterations (out of place),
 *           a line under each row: its node's sysfs stats/time_* read
 *           by rank 0 before and after, per collective in microseconds:
 *           queued, per phase waiting for the first byte to move and
 *           moving (the CPU landing it, within), signatures, settling
 *   -1      one at a time: each iteration waits for its own completion
 *           before the next is issued, as a loop of blocking calls (an
 *           MPI benchmark's); a line under each row gives every rank's
 *           own time per operation (the table's is the slowest rank's)
 *
 * Columns as nccl-tests: size in bytes (for allgather, reduce_scatter,
 * alltoall, gather and scatter the whole n*count buffer), count per rank,
 * time in us (the average per iteration, the largest over the ranks),
 * algbw = size/time, busbw = algbw * factor (allreduce 2(n-1)/n;
 * allgather, reduce_scatter, alltoall, gather, scatter (n-1)/n; the
 * others 1). The iterations are issued back to back
 * (non-blocking) and then waited for, as nccl-tests launches them.
 * Exit status 1 if any element was wrong or an operation failed.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"
#include "dmabuf-alloc.h"
#include "cuda-min.h"
#include "coll.h"
#include "kcoll-check.h"
#include "kcoll-issue.h"
#include "kcoll-stream.h"
#include "kcoll-vcheck.h"

static coll_comm *comm;
static int rank, nranks;

static struct {
	size_t minbytes, maxbytes;
	double factor;
	coll_dtype dt;
	coll_redop op;
	unsigned int colls;	/* bit per enum chk_coll */
	unsigned int vcolls;	/* bit per enum vchk_op */
	double skew;		/* -V */
	int prof;		/* -P */
	int root;
	int iters, warmup;
	int in_place;
	int check;
	int reg;
	const char *dmabuf;
	int cpu;
	int gpu;
	int bufs;		/* -B */
	int blocking;		/* -1: each waited for before the next */
} o = {
	.minbytes = 8, .maxbytes = 8 << 20, .factor = 2,
	.dt = COLL_DTYPE_FP32, .op = COLL_REDOP_SUM, .colls = 1u << CHK_ALLREDUCE,
	.iters = 20, .warmup = 5, .check = 1, .skew = 1, .bufs = 1,
};
/* -B: the distance between two pairs' buffers (the pair i's send buffer
 * is the first's plus i * buf_stride). */
static size_t buf_stride;

static double bw_sum;
/* Bandwidth columns: GB/s as nccl-tests, or MB/s with -M (emulated links). */
static double bw_div = 1e9;
static const char *bw_unit = "(GB/s)";
static int bw_n;
static long long wrong_total;
static int failed;
/* -u: ranks on this node; CPU seconds and bus bytes of sizes >= 1 MiB. */
static int ranks_here = 1;
static double big_cpu, big_node, big_bus;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, int ret)
{
	fprintf(stderr, "kcoll-perf: rank %d: %s: %d (%s) %s\n", rank, what,
		ret, coll_strerror(ret), coll_last_error());
	exit(1);
}

static size_t parse_size(const char *s)
{
	size_t v = bench_parse_size(s);

	if (v == (size_t)-1) {
		fprintf(stderr, "kcoll-perf: bad size \"%s\"\n", s);
		exit(2);
	}
	return v;
}

static coll_dtype parse_dtype(const char *s)
{
	static const struct { const char *name; coll_dtype dt; } alias[] = {
		{ "float", COLL_DTYPE_FP32 }, { "half", COLL_DTYPE_FP16 },
		{ "double", COLL_DTYPE_FP64 }, { "bfloat16", COLL_DTYPE_BF16 },
		{ "float8_e4m3fn", COLL_DTYPE_FP8_E4M3 },
		{ "float8_e5m2", COLL_DTYPE_FP8_E5M2 },
	};
	int d;
	size_t i;

	for (d = COLL_DTYPE_FIRST; d <= COLL_DTYPE_LAST; d++)
		if (!strcasecmp(s, coll_dtype_name(d)))
			return d;
	for (i = 0; i < sizeof(alias) / sizeof(alias[0]); i++)
		if (!strcasecmp(s, alias[i].name))
			return alias[i].dt;
	fprintf(stderr, "kcoll-perf: unknown dtype \"%s\"\n", s);
	exit(2);
}

static coll_redop parse_redop(const char *s)
{
	int op;

	for (op = COLL_REDOP_FIRST; op <= COLL_REDOP_LAST; op++)
		if (!strcasecmp(s, coll_redop_name(op)))
			return op;
	fprintf(stderr, "kcoll-perf: unknown redop \"%s\"\n", s);
	exit(2);
}

/* ------------------------------------------------------------------ */
/* Issuing                                                             */
/* ------------------------------------------------------------------ */

/* Issue one operation non-blocking; sendrecv takes two requests. */
static int issue(const struct chk_case *c, void *send, void *recv,
		 coll_request **req)
{
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	int ret;

	req[1] = NULL;
	switch (c->coll) {
	case CHK_SENDRECV:
		ret = coll_isend(send, c->count, c->dt, next, comm, &req[0]);
		if (ret)
			return ret;
		ret = coll_irecv(recv, c->count, c->dt, prev, comm, &req[1]);
		if (ret) {
			coll_wait(req[0]);
			coll_request_free(req[0]);
		}
		return ret;
	default:
		return chk_issue(c, send, recv, comm, req);
	}
}

static void *stream;		/* -G */
static uint8_t *dev_sbuf, *dev_rbuf;	/* -G: device copies of sbuf, rbuf */
static uint8_t *host_sbuf, *host_rbuf;

static void cm_die(const char *what, cm_result r)
{
	if (r) {
		fprintf(stderr, "kcoll-perf: rank %d: %s: CUresult %d\n", rank,
			what, r);
		exit(1);
	}
}

static size_t dev_cap;

/* -G: the device address behind host shadow pointer @p. */
static void *devp(void *p)
{
	uint8_t *b = p;

	if (b >= host_sbuf && b < host_sbuf + dev_cap)
		return dev_sbuf + (b - host_sbuf);
	return dev_rbuf + (b - host_rbuf);
}

static void to_dev(void)
{
	cm_die("cuMemcpyHtoD", cm.htod((uintptr_t)dev_sbuf, host_sbuf, dev_cap));
	cm_die("cuMemcpyHtoD", cm.htod((uintptr_t)dev_rbuf, host_rbuf, dev_cap));
}

static void from_dev(void)
{
	cm_die("cuMemcpyDtoH", cm.dtoh(host_sbuf, (uintptr_t)dev_sbuf, dev_cap));
	cm_die("cuMemcpyDtoH", cm.dtoh(host_rbuf, (uintptr_t)dev_rbuf, dev_cap));
}


/* -G: @iters on the stream back to back, then synchronize. */
static double run_stream(const struct chk_case *c, void *send, void *recv,
			 int iters)
{
	double t0 = now();
	int i, ret;

	for (i = 0; i < iters; i++) {
		ret = chk_issue_stream(c, send, recv, comm, stream);
		if (ret)
			die("enqueueing", ret);
	}
	cm_die("cuStreamSynchronize", cm.stream_sync(stream));
	ret = coll_comm_async_error(comm);
	if (ret)
		die(chk_coll_names[c->coll], ret);
	return iters ? (now() - t0) / iters : 0;
}

/* Wait for and free requests @req[0..n-1] (NULL ones skipped, each set
 * to NULL); the first error into *@first. */
static void wait_reqs(coll_request **req, int n, int *first)
{
	for (int k = 0; k < n; k++) {
		int ret;

		if (!req[k])
			continue;
		ret = coll_wait(req[k]);
		coll_request_free(req[k]);
		req[k] = NULL;
		if (ret && !*first)
			*first = ret;
	}
}

/*
 * @iters operations back to back, then wait for all (-1: each waited
 * for before the next is issued, as a loop of blocking calls); seconds
 * per op. @issue_one issues one (into up to two requests) from @ctx.
 */
static double run_iters(int (*issue_one)(const void *ctx, coll_request **req),
			const void *ctx, const char *name, int iters)
{
	coll_request **req = calloc((size_t)iters * 2 + 2, sizeof(*req));
	double t0;
	int i, ret, first = 0;

	if (!req)
		die("calloc", -ENOMEM);
	t0 = now();
	for (i = 0; i < iters; i++) {
		ret = issue_one(ctx, &req[2 * i]);
		if (ret)
			die("issuing", ret);
		if (o.blocking)
			wait_reqs(&req[2 * i], 2, &first);
	}
	wait_reqs(req, 2 * iters, &first);
	free(req);
	if (first)
		die(name, first);
	return iters ? (now() - t0) / iters : 0;
}

struct run_ctx {
	const struct chk_case *c;
	void *send, *recv;
	int *next;		/* -B: the pair the next iteration uses */
};

/* @p moved to pair @k (-B); NULL stays NULL. */
static void *pair_ptr(void *p, int k)
{
	return p ? (char *)p + (size_t)k * buf_stride : NULL;
}

static int run_issue(const void *ctx, coll_request **req)
{
	const struct run_ctx *x = ctx;
	int k = (*x->next)++ % o.bufs;

	return issue(x->c, pair_ptr(x->send, k), pair_ptr(x->recv, k), req);
}

static double run(const struct chk_case *c, void *send, void *recv, int iters)
{
	int next = 0;
	struct run_ctx x = { c, send, recv, &next };

	return run_iters(run_issue, &x, chk_coll_names[c->coll], iters);
}

/* @v reduced over the ranks with @op (the time: max; CPU time: sum). */
static double over_ranks(double v, coll_redop op)
{
	int ret = coll_allreduce(&v, &v, 1, COLL_DTYPE_FP64, op, comm);

	if (ret)
		die("allreduce of a measurement", ret);
	return v;
}

static long long sum_over_ranks(long long v)
{
	int64_t x = v;
	int ret = coll_allreduce(&x, &x, 1, COLL_DTYPE_INT64, COLL_REDOP_SUM,
				 comm);

	if (ret)
		die("allreduce of #wrong", ret);
	return x;
}

static double bus_factor(enum chk_coll c)
{
	double n = nranks;

	switch (c) {
	case CHK_ALLREDUCE:
		return 2 * (n - 1) / n;
	case CHK_ALLGATHER:
	case CHK_REDUCE_SCATTER:
	case CHK_ALLTOALL:
	case CHK_GATHER:
	case CHK_SCATTER:
		return (n - 1) / n;
	default:
		return 1;
	}
}

/*
 * -P: the module's own profile of the timed iterations (sysfs
 * stats/time_*, this node's counters: every rank on the node runs the
 * same iterations at once), read by rank 0 before and after them.
 */
static const char *const prof_names[] = {
	"ops", "phases", "queued_ns", "wait_ns", "move_ns", "land_ns",
	"sigs_ns", "settle_ns", "total_ns",
};
#define PROF_N	(sizeof(prof_names) / sizeof(prof_names[0]))
static char prof_line[256];
/* -1: each rank's own time per operation, for rank 0 to print. */
static char rank_line[512];

static bool prof_read(double *v)
{
	char path[96];
	unsigned long long x;
	size_t i;
	FILE *f;

	for (i = 0; i < PROF_N; i++) {
		snprintf(path, sizeof(path), "/sys/class/misc/kcoll/stats/time_%s",
			 prof_names[i]);
		f = fopen(path, "r");
		if (!f)
			return false;
		if (fscanf(f, "%llu", &x) != 1) {
			fclose(f);
			return false;
		}
		fclose(f);
		v[i] = (double)x;
	}
	return true;
}

static void prof_report(const double *a, const double *b)
{
	double d[PROF_N], ops;
	size_t i;

	for (i = 0; i < PROF_N; i++)
		d[i] = b[i] - a[i];
	ops = d[0];
	if (ops <= 0) {
		snprintf(prof_line, sizeof(prof_line),
			 "#   profile: no collective completed");
		return;
	}
	/* Per collective on this node, microseconds. */
	snprintf(prof_line, sizeof(prof_line),
		 "#   profile (us per op, %.0f ops, %.1f phases each): total "
		 "%.0f = queued %.0f + wait %.0f + move %.0f (land %.0f) + "
		 "sigs %.0f + settle %.0f + other %.0f",
		 ops, d[1] / ops, d[8] / ops / 1e3, d[2] / ops / 1e3,
		 d[3] / ops / 1e3, d[4] / ops / 1e3, d[5] / ops / 1e3,
		 d[6] / ops / 1e3, d[7] / ops / 1e3,
		 (d[8] - d[2] - d[3] - d[4] - d[6] - d[7]) / ops / 1e3);
}

/*
 * -1: every rank's own time per operation into rank_line (a rooted
 * collective's root returns once its part is done; the table's time is
 * the slowest rank's).
 */
static void rank_times(double t)
{
	double *all = calloc((size_t)nranks, sizeof(double));
	size_t w;
	int ret, i;

	if (!all)
		die("calloc", -ENOMEM);
	ret = coll_allgather(&t, all, 1, COLL_DTYPE_FP64, comm);
	if (ret)
		die("allgather of the ranks' times", ret);
	w = (size_t)snprintf(rank_line, sizeof(rank_line),
			     "#   each rank's own time (us per op):");
	for (i = 0; i < nranks && w < sizeof(rank_line); i++)
		w += (size_t)snprintf(rank_line + w, sizeof(rank_line) - w,
				      " %d: %.0f", i, all[i] * 1e6);
	free(all);
}

/* Time and check one placement; prints its columns on rank 0. */
static void measure(struct chk_case *c, void *sbuf, void *rbuf, size_t size)
{
	void *send = sbuf, *recv = rbuf;
	double t, algbw, busbw, c0 = 0, n0 = 0, cpu = 0, node = 0, bus;
	double p0[PROF_N], p1[PROF_N];
	bool prof;
	long long wrong = -1;
	char ts[16];
	int ret;

	if (c->in_place)
		chk_inplace_ptrs(c, sbuf, &send, &recv);
	chk_fill(c, sbuf, rbuf);
	if (o.gpu) {
		to_dev();
		send = send ? devp(send) : NULL;
		recv = recv ? devp(recv) : NULL;
	}
	if (o.warmup)
		(o.gpu ? run_stream : run)(c, send, recv, o.warmup);
	ret = coll_barrier(comm);
	if (ret)
		die("barrier", ret);
	if (o.cpu && !c->in_place) {
		c0 = bench_proc_cpu();
		n0 = bench_node_busy();
	}
	if (!c->in_place)
		prof_line[0] = '\0';
	prof = o.prof && rank == 0 && !c->in_place;
	if (prof && !prof_read(p0)) {
		snprintf(prof_line, sizeof(prof_line),
			 "#   profile: no stats/time_* (a module before 0.6?)");
		prof = false;
	}
	t = (o.gpu ? run_stream : run)(c, send, recv, o.iters);
	if (prof && prof_read(p1))
		prof_report(p0, p1);
	if (o.blocking && !c->in_place)
		rank_times(t);
	if (o.cpu && !c->in_place) {
		double n1 = bench_node_busy();

		cpu = over_ranks(bench_proc_cpu() - c0, COLL_REDOP_SUM);
		node = over_ranks(n0 >= 0 && n1 >= 0 ?
				  (n1 - n0) / ranks_here : 0, COLL_REDOP_SUM);
	}
	t = over_ranks(t, COLL_REDOP_MAX);
	if (o.check) {
		size_t bad;

		chk_fill(c, sbuf, rbuf);
		if (o.gpu)
			to_dev();
		(o.gpu ? run_stream : run)(c, send, recv, 1);
		if (o.gpu)
			from_dev();
		bad = chk_verify(c, sbuf, rbuf, NULL, 0);
		wrong = sum_over_ranks((long long)bad);
		wrong_total += wrong;
	}
	algbw = t > 0 ? (double)size / t / bw_div : 0;
	busbw = algbw * bus_factor(c->coll);
	bw_sum += busbw;
	bw_n++;
	if (rank)
		return;
	if (t * 1e6 >= 10000)
		snprintf(ts, sizeof(ts), "%7.0f", t * 1e6);
	else
		snprintf(ts, sizeof(ts), "%7.2f", t * 1e6);
	if (wrong < 0)
		printf("  %7s  %6.2f  %6.2f  %6s", ts, algbw, busbw, "N/A");
	else
		printf("  %7s  %6.2f  %6.2f  %6lld", ts, algbw, busbw, wrong);
	if (o.cpu && !c->in_place) {
		/* Bytes on the bus in the timed iterations. */
		bus = (double)size * bus_factor(c->coll) * o.iters;
		if (size >= (1 << 20)) {
			big_cpu += cpu;
			big_node += node;
			big_bus += bus;
		}
		printf("  %8.3g  %8.3g", bus > 0 ? cpu / (bus / 1e9) : 0,
		       bus > 0 ? node / (bus / 1e9) : 0);
	}
}

static void bench(enum chk_coll coll)
{
	size_t es = coll_dtype_size(o.dt), n = (size_t)nranks;
	size_t size, count, prev = (size_t)-1, cap;
	void *sbuf, *rbuf;
	coll_mem *ms = NULL, *mr = NULL;
	struct kd_buf kds = { .fd = -1 }, kdr = { .fd = -1 };
	int ret;

	/* Both buffers hold maxbytes (plus a block) in every layout. */
	cap = o.maxbytes + n * es;
	if (o.dmabuf) {
		/* Both buffers dma-bufs, imported once. */
		cap = (cap + 4095) & ~(size_t)4095;
		ret = kd_alloc(&kds, o.dmabuf, cap);
		if (!ret)
			ret = kd_alloc(&kdr, o.dmabuf, cap);
		if (ret)
			die("dma-buf allocation", ret);
		sbuf = kds.map;
		rbuf = kdr.map;
		ret = coll_mem_register_dmabuf(comm, kds.fd, 0, cap, sbuf, 0,
					       &ms);
		if (!ret)
			ret = coll_mem_register_dmabuf(comm, kdr.fd, 0, cap,
						       rbuf, 0, &mr);
		if (ret)
			die("coll_mem_register_dmabuf", ret);
	} else {
		/* -B: o.bufs pairs, each page aligned, one allocation. */
		buf_stride = (cap + 4095) & ~(size_t)4095;
		sbuf = aligned_alloc(4096, buf_stride * o.bufs);
		rbuf = aligned_alloc(4096, buf_stride * o.bufs);
		cap = buf_stride * o.bufs;
	}
	if (!sbuf || !rbuf)
		die("malloc", -ENOMEM);
	if (o.gpu) {
		cm_ptr d;

		host_sbuf = sbuf;
		host_rbuf = rbuf;
		dev_cap = cap;
		cm_die("cuMemAlloc", cm.alloc(&d, cap));
		dev_sbuf = (uint8_t *)(uintptr_t)d;
		cm_die("cuMemAlloc", cm.alloc(&d, cap));
		dev_rbuf = (uint8_t *)(uintptr_t)d;
	}
	memset(sbuf, 0, cap);
	memset(rbuf, 0, cap);
	if (o.reg && !o.dmabuf) {
		ret = coll_mem_register(comm, sbuf, cap, &ms);
		if (!ret)
			ret = coll_mem_register(comm, rbuf, cap, &mr);
		if (ret)
			die("coll_mem_register", ret);
	}
	if (rank == 0) {
		printf("#\n# %s\n#\n", chk_coll_names[coll]);
		/* Centred over the 33-column blocks that start at 52. */
		printf("#%51s%-33s%s\n", "", "           out-of-place",
		       o.in_place ? "             in-place" : "");
		printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s",
		       "size", "count", "type", "redop", "root", "time",
		       "algbw", "busbw", "#wrong");
		if (o.cpu)
			printf("  %8s  %8s", "cpu", "node");
		if (o.in_place)
			printf("  %7s  %6s  %6s  %6s", "time", "algbw", "busbw",
			       "#wrong");
		printf("\n# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s",
		       "(B)", "(elements)", "", "", "", "(us)", bw_unit,
		       bw_unit, "");
		if (o.cpu)
			printf("  %8s  %8s", "(s/GB)", "(s/GB)");
		if (o.in_place)
			printf("  %7s  %6s  %6s  %6s", "(us)", bw_unit,
			       bw_unit, "");
		printf("\n");
	}
	for (size = o.minbytes; size <= o.maxbytes;) {
		struct chk_case c = {
			.coll = coll, .dt = o.dt,
			.op = chk_reduces(coll) ? o.op : 0,
			.root = chk_rooted(coll) ? o.root : 0,
			.rank = rank, .nranks = nranks,
		};
		size_t bytes;

		if (coll == CHK_ALLGATHER || coll == CHK_REDUCE_SCATTER ||
		    coll == CHK_ALLTOALL || coll == CHK_GATHER ||
		    coll == CHK_SCATTER) {
			count = size / (n * es);
			bytes = count * n * es;
		} else {
			count = size / es;
			bytes = count * es;
		}
		if (count != prev) {
			prev = count;
			c.count = count;
			if (rank == 0)
				printf("%12zu  %12zu  %8s  %6s  %6d", bytes,
				       count, coll_dtype_name(o.dt),
				       chk_reduces(coll) ?
				       coll_redop_name(o.op) : "none",
				       chk_rooted(coll) ? o.root : -1);
			c.in_place = false;
			measure(&c, sbuf, rbuf, bytes);
			if (o.in_place && chk_has_in_place(coll)) {
				c.in_place = true;
				measure(&c, sbuf, rbuf, bytes);
			}
			if (rank == 0)
				printf("\n%s%s%s%s", prof_line,
				       prof_line[0] ? "\n" : "", rank_line,
				       rank_line[0] ? "\n" : "");
			fflush(stdout);
		}
		if (o.factor <= 1 || size == o.maxbytes)
			break;
		size = (size_t)((double)size * o.factor);
		if (size > o.maxbytes)
			size = o.maxbytes;
	}
	if (o.cpu && rank == 0 && big_bus > 0)
		printf("# %s: sizes >= 1 MiB: %.3f CPU s (ranks), %.3f CPU s "
		       "(nodes) per GB of bus traffic\n", chk_coll_names[coll],
		       big_cpu / (big_bus / 1e9), big_node / (big_bus / 1e9));
	big_cpu = big_node = big_bus = 0;
	if (ms && coll_mem_deregister(comm, ms))
		failed = 1;
	if (mr && coll_mem_deregister(comm, mr))
		failed = 1;
	if (o.dmabuf) {
		kd_free(&kds);
		kd_free(&kdr);
	} else {
		free(sbuf);
		free(rbuf);
	}
	if (o.gpu) {
		cm.free((uintptr_t)dev_sbuf);
		cm.free((uintptr_t)dev_rbuf);
	}
}

/* "#  Rank  0 Pid 1234 on host" for every rank, through an allgather. */
/*
 * The v-variants (-c allgatherv, reduce_scatterv, alltoallv): blocks whose
 * counts grow linearly over the ranks from 1 to the skew (-V, as collsim's
 * -V: for alltoallv block i -> j weighs by (i + j) mod n), their mean the
 * equal-block collective's count at that size; contiguous displacements.
 * Sizes, columns and bus factor as allgather, reduce_scatter and
 * alltoall: the whole buffer, (n-1)/n. int32 data (reduce_scatterv: SUM),
 * checked once per size as -C says. -G: device memory and the
 * stream-ordered forms.
 */
static size_t vec_count(size_t mean, int k)
{
	double w = nranks > 1 ? 1 + (o.skew - 1) * k / (nranks - 1) : 1;

	return (size_t)(mean * w / ((1 + o.skew) / 2) + 0.5);
}

struct vec_ctx {
	enum vchk_op op;
	const void *send;
	void *recv;
	size_t *const *a;
};

static int vec_issue(const void *ctx, coll_request **req)
{
	const struct vec_ctx *x = ctx;

	return vchk_issue_nb(x->op, comm, x->send, x->recv, x->a, req);
}

/* -G: @send and @recv are device memory; the stream-ordered forms. */
static double vec_run(enum vchk_op op, const void *send, void *recv,
		      size_t *const *a, int iters)
{
	struct vec_ctx x = { op, send, recv, a };
	double t0 = now();
	int i, ret;

	if (!o.gpu)
		return run_iters(vec_issue, &x, vchk_names[op], iters);
	for (i = 0; i < iters; i++) {
		ret = vchk_issue_stream(op, comm, send, recv, a, stream);
		if (ret)
			die("enqueueing", ret);
	}
	cm_die("cuStreamSynchronize", cm.stream_sync(stream));
	ret = coll_comm_async_error(comm);
	if (ret)
		die(vchk_names[op], ret);
	return iters ? (now() - t0) / iters : 0;
}

static void bench_vec(enum vchk_op op)
{
	size_t n = (size_t)nranks, size, mean, prev = (size_t)-1, i, j;
	size_t *a[4], send_n, recv_n, off, tot;
	int32_t *send, *recv;
	void *ds = NULL, *dr = NULL;	/* -G: the device copies */
	cm_ptr p;
	int k;

	for (k = 0; k < 4; k++) {
		a[k] = calloc(n, sizeof(size_t));
		if (!a[k])
			die("calloc", -ENOMEM);
	}
	if (rank == 0)
		printf("#\n# %s, int32%s, blocks skewed %gx\n"
		       "# %10s  %12s  %7s  %6s  %6s  %6s\n"
		       "# %10s  %12s  %7s  %6s  %6s  %6s\n", vchk_names[op],
		       op == VCHK_REDUCE_SCATTERV ? " sum" : "", o.skew,
		       "size", "count", "time", "algbw", "busbw", "#wrong",
		       "(B)", "(elements)", "(us)", bw_unit, bw_unit, "");
	for (size = o.minbytes; size <= o.maxbytes;
	     size = (size_t)(size * o.factor) > size ?
		    (size_t)(size * o.factor) : size + 1) {
		double t, algbw, busbw;
		long long wrong = -1, bad = 0;

		mean = size / 4 / n;
		if (mean == prev || !mean)
			continue;
		prev = mean;
		send_n = recv_n = 0;
		for (j = 0; j < n; j++) {
			if (op == VCHK_ALLTOALLV) {
				a[0][j] = vec_count(mean, (int)((rank + j) % n));
				a[2][j] = a[0][j];	/* (j + rank) alike */
				a[1][j] = send_n;
				a[3][j] = recv_n;
				send_n += a[0][j];
				recv_n += a[2][j];
			} else {
				a[0][j] = vec_count(mean, (int)j);
				a[1][j] = recv_n;
				recv_n += a[0][j];
			}
		}
		tot = recv_n;
		if (op == VCHK_ALLGATHERV) {
			send_n = a[0][rank];
		} else if (op == VCHK_REDUCE_SCATTERV) {
			send_n = recv_n;
			recv_n = a[0][rank];
		}
		send = malloc((send_n + 1) * sizeof(*send));
		recv = malloc((recv_n + 1) * sizeof(*recv));
		if (!send || !recv)
			die("malloc", -ENOMEM);
		for (i = 0; i < send_n; i++)
			send[i] = op == VCHK_REDUCE_SCATTERV ?
				  vchk_rin(rank, i) : 0;
		if (op == VCHK_ALLGATHERV)
			for (i = 0; i < send_n; i++)
				send[i] = vchk_val(rank, 0, i);
		if (op == VCHK_ALLTOALLV)
			for (j = 0; j < n; j++)
				for (i = 0; i < a[0][j]; i++)
					send[a[1][j] + i] =
						vchk_val(rank, (int)j, i);
		if (o.gpu) {
			cm_die("cuMemAlloc", cm.alloc(&p, (send_n + 1) * 4));
			ds = (void *)(uintptr_t)p;
			cm_die("cuMemAlloc", cm.alloc(&p, (recv_n + 1) * 4));
			dr = (void *)(uintptr_t)p;
			cm_die("cuMemcpyHtoD", cm.htod((uintptr_t)ds, send,
						       (send_n + 1) * 4));
		}
		if (o.warmup)
			vec_run(op, o.gpu ? ds : send, o.gpu ? dr : recv, a,
				o.warmup);
		if (coll_barrier(comm))
			die("barrier", -EIO);
		t = over_ranks(vec_run(op, o.gpu ? ds : send, o.gpu ? dr : recv,
				       a, o.iters), COLL_REDOP_MAX);
		if (o.check) {
			memset(recv, 0xa5, (recv_n + 1) * sizeof(*recv));
			if (o.gpu) {
				cm_die("cuMemcpyHtoD",
				       cm.htod((uintptr_t)dr, recv,
					       (recv_n + 1) * 4));
				vec_run(op, ds, dr, a, 1);
				cm_die("cuMemcpyDtoH",
				       cm.dtoh(recv, (uintptr_t)dr,
					       (recv_n + 1) * 4));
			} else {
				vec_run(op, send, recv, a, 1);
			}
			if (op == VCHK_REDUCE_SCATTERV) {
				for (off = 0, j = 0; j < (size_t)rank; j++)
					off += a[0][j];
				for (i = 0; i < recv_n; i++) {
					int32_t want = 0;

					for (j = 0; j < n; j++)
						want += vchk_rin((int)j,
								 off + i);
					bad += recv[i] != want;
				}
			} else {
				int kk = op == VCHK_ALLTOALLV ? 2 : 0;

				for (j = 0; j < n; j++)
					for (i = 0; i < a[kk][j]; i++)
						bad += recv[a[kk + 1][j] + i] !=
						       vchk_val((int)j,
								op == VCHK_ALLTOALLV ?
								rank : 0, i);
			}
			wrong = sum_over_ranks(bad);
			wrong_total += wrong;
		}
		if (o.gpu) {
			cm.free((uintptr_t)ds);
			cm.free((uintptr_t)dr);
		}
		free(send);
		free(recv);
		algbw = t > 0 ? (double)tot * 4 / t / bw_div : 0;
		busbw = algbw * (n - 1) / n;
		bw_sum += busbw;
		bw_n++;
		if (rank == 0)
			printf("  %10zu  %12zu  %7.2f  %6.2f  %6.2f  %6lld\n",
			       tot * 4, mean, t * 1e6, algbw, busbw, wrong);
	}
	for (k = 0; k < 4; k++)
		free(a[k]);
}

static void show_ranks(void)
{
	struct {
		int32_t rank, pid;
		char host[56];
	} me, *all = calloc((size_t)nranks, sizeof(me));
	int i, ret;

	if (!all)
		die("calloc", -ENOMEM);
	memset(&me, 0, sizeof(me));
	me.rank = rank;
	me.pid = getpid();
	gethostname(me.host, sizeof(me.host) - 1);
	ret = coll_allgather(&me, all, sizeof(me), COLL_DTYPE_UINT8, comm);
	if (ret)
		die("allgather of the rank table", ret);
	ranks_here = 0;
	for (i = 0; i < nranks; i++)
		ranks_here += !strcmp(all[i].host, me.host);
	if (rank == 0) {
		printf("#\n# Using ranks\n");
		for (i = 0; i < nranks; i++)
			printf("#  Rank %3d Pid %7d on %s\n", all[i].rank,
			       all[i].pid, all[i].host);
	}
	free(all);
}

/* "-c allreduce,broadcast": one bit per collective named; "all": every
 * one; 0 if a name is unknown. */
static unsigned int parse_colls(const char *arg, unsigned int *vm)
{
	unsigned int m = 0;
	const char *p = arg;

	*vm = 0;
	if (!strcmp(arg, "all"))
		return (1u << CHK_NR) - 1;
	while (*p) {
		size_t len = strcspn(p, ",");
		int i, k;

		for (i = 0; i < CHK_NR; i++)
			if (strlen(chk_coll_names[i]) == len &&
			    !strncmp(p, chk_coll_names[i], len))
				break;
		for (k = 0; k < VCHK_NR; k++)
			if (strlen(vchk_names[k]) == len &&
			    !strncmp(p, vchk_names[k], len))
				break;
		if (i == CHK_NR && k == VCHK_NR)
			return 0;
		if (i < CHK_NR)
			m |= 1u << i;
		else
			*vm |= 1u << k;
		p += len + (p[len] == ',');
	}
	return m | (*vm ? 1u << 31 : 0);
}

static int any_reduces(unsigned int colls)
{
	int i;

	for (i = 0; i < CHK_NR; i++)
		if ((colls & (1u << i)) && chk_reduces(i))
			return 1;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: kcoll-perf [-b minbytes] [-e maxbytes] "
		"[-f stepfactor] [-d dtype] [-o redop] [-c collective[,...]|all]\n"
		"                  [-r root] [-n iters] [-w warmup] [-i 0|1] "
		"[-C 0|1] [-R 0|1] [-D exporter | -G] [-M] [-u] [-P] [-V skew]\n"
		"                  [-B buffer pairs] [-1]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int opt, i, ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "b:e:f:d:o:c:r:n:w:i:C:R:D:GMuPV:B:1h")) != -1) {
		switch (opt) {
		case 'b': o.minbytes = parse_size(optarg); break;
		case 'e': o.maxbytes = parse_size(optarg); break;
		case 'f': o.factor = atof(optarg); break;
		case 'd': o.dt = parse_dtype(optarg); break;
		case 'o': o.op = parse_redop(optarg); break;
		case 'c':
			o.colls = parse_colls(optarg, &o.vcolls);
			if (!o.colls)
				usage();
			o.colls &= ~(1u << 31);
			break;
		case 'V': o.skew = atof(optarg); break;
		case 'r': o.root = atoi(optarg); break;
		case 'n': o.iters = atoi(optarg); break;
		case 'w': o.warmup = atoi(optarg); break;
		case 'i': o.in_place = atoi(optarg); break;
		case 'C': o.check = atoi(optarg); break;
		case 'R': o.reg = atoi(optarg); break;
		case 'D': o.dmabuf = optarg; break;
		case 'G': o.gpu = 1; break;
		case 'M': bw_div = 1e6; bw_unit = "(MB/s)"; break;
		case 'u': o.cpu = 1; break;
		case 'P': o.prof = 1; break;
		case 'B': o.bufs = atoi(optarg); break;
		case '1': o.blocking = 1; break;
		default: usage();
		}
	}
	if (optind != argc || o.iters < 1 || o.warmup < 0 ||
	    o.minbytes > o.maxbytes || o.skew < 1 || o.bufs < 1)
		usage();
	if (o.bufs > 1 && (o.dmabuf || o.gpu || o.vcolls)) {
		fprintf(stderr, "kcoll-perf: -B on host memory and the "
			"equal-block collectives only\n");
		return 2;
	}
	if (o.vcolls && o.dmabuf) {
		fprintf(stderr, "kcoll-perf: the v-variants on host or GPU "
			"memory (-G) only\n");
		return 2;
	}
	if (!coll_redop_valid(o.dt, o.op) &&
	    any_reduces(o.colls)) {
		fprintf(stderr, "kcoll-perf: %s is not valid for %s\n",
			coll_redop_name(o.op), coll_dtype_name(o.dt));
		return 2;
	}

	if (o.gpu) {
		char why[160];

		if (o.dmabuf || o.reg || o.cpu) {
			fprintf(stderr, "kcoll-perf: -G goes with none of -D, -R, -u\n");
			return 2;
		}
		if (cm_open(why, sizeof(why))) {
			fprintf(stderr, "kcoll-perf: -G: %s\n", why);
			return 1;
		}
		cm_die("cuStreamCreate", cm.stream_create(&stream, 1));
	}
	ret = coll_comm_init_env(&comm);
	if (ret)
		die("coll_comm_init_env", ret);
	rank = coll_comm_rank(comm);
	nranks = coll_comm_size(comm);
	if (o.root < 0 || o.root >= nranks) {
		fprintf(stderr, "kcoll-perf: root %d out of range\n", o.root);
		return 2;
	}
	if (rank == 0)
		printf("# kcoll-perf: %d ranks, minBytes %zu maxBytes %zu "
		       "step: %g(factor) warmup iters: %d iters: %d "
		       "validation: %d registered: %d%s%s%s\n", nranks, o.minbytes,
		       o.maxbytes, o.factor, o.warmup, o.iters, o.check, o.reg,
		       o.dmabuf ? " dma-buf: " : "", o.dmabuf ? o.dmabuf : "",
		       !o.gpu ? "" : cm.standin ?
		       " GPU memory and streams: the STAND-IN CUDA driver" :
		       " GPU memory and streams: CUDA");
	show_ranks();
	for (i = 0; i < CHK_NR; i++) {
		if (!(o.colls & (1u << i)))
			continue;
		if (i == CHK_SENDRECV && o.gpu)
			continue;	/* no stream-ordered send/recv */
		if (i == CHK_SENDRECV && nranks < 2) {
			if (o.colls == 1u << CHK_SENDRECV && rank == 0)
				printf("# sendrecv needs 2 ranks\n");
			continue;
		}
		bench(i);
	}
	for (i = 0; i < VCHK_NR; i++)
		if (o.vcolls & (1u << i))
			bench_vec((enum vchk_op)i);
	ret = coll_comm_destroy(comm);
	if (ret)
		failed = 1;
	if (rank == 0) {
		printf("# Out of bounds values : %lld %s\n", wrong_total,
		       wrong_total ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %g\n#\n",
		       bw_n ? bw_sum / bw_n : 0.0);
	}
	return wrong_total || failed ? 1 : 0;
}
