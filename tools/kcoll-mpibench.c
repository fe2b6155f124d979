// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll-mpibench: Open MPI's collectives measured the way nccl-tests
 * measures NCCL's, so that kcoll's own tables (kcoll-perf) compare with
 * them line for line. A peer baseline, not a kcoll test.
 *
 * Usage: mpirun ... kcoll-mpibench [-b minbytes] [-e maxbytes] [-f factor]
 *            [-n iters] [-w warmup] [-T seconds] [-c collective[,...]] [-C 0|1]
 *   -b/-e/-f  sizes from -b to -e, multiplied by -f each step (K, M, G
 *             suffixes accepted), -e itself always last; default 8 B to
 *             16 MiB, factor 2
 *   -n        timed iterations per size (default 20)
 *   -w        untimed warm-up iterations per size (default 1), besides the
 *             checked run
 *   -T        time budget per size in seconds (default 0 = none): the
 *             untimed runs are timed and the iteration count lowered so
 *             that the timed loop takes about this long (at least 1)
 *   -c        allreduce, allgather, reduce_scatter, bcast, alltoall, gather,
 *             scatter, all (those seven) or sendrecv (each rank sends to
 *             the next and receives from the previous: MPI_Sendrecv, as
 *             kcoll-perf's sendrecv posts both at once)
 *   -C        check the results (default 1): one untimed run on fresh
 *             buffers before the others, every element compared,
 *             mismatches in #wrong
 *
 * Columns, per nccl-tests (doc/PERFORMANCE.md): size is the total buffer
 * in bytes (n*count*4 for allgather, reduce_scatter, alltoall, gather and
 * scatter); algbw = size/time; busbw = algbw * factor with the factor
 * 2(n-1)/n for allreduce, (n-1)/n for the others but bcast and sendrecv,
 * 1 for those; count is size/4, as nccl-tests prints it. time is the slowest
 * rank's mean time per operation.
 * The type is always float (fp32), the redop sum, the root (bcast,
 * gather, scatter) 0.
 *
 * Two CPU columns: the CPU time (getrusage user+sys of each process, all
 * its threads, summed over all ranks) spent in the timed loop, as
 *   cpu(s/GB)  CPU seconds per GB of bus traffic (iters*size*factor), and
 *   cores      CPU seconds per wall-clock second (how many CPUs were busy;
 *              MPI libraries busy-poll while they wait),
 * and node(s/GB): every busy CPU of the ranks' nodes (/proc/stat; see
 * tools/bench-util.h), per GB of bus traffic, as kcoll-perf -u prints it.
 * The last line sums CPU and bus bytes over all sizes >= 1 MiB.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>

#include <mpi.h>

#include "bench-util.h"

enum coll {
	C_ALLREDUCE, C_ALLGATHER, C_REDUCE_SCATTER, C_BCAST, C_ALLTOALL,
	C_GATHER, C_SCATTER, C_SENDRECV, C_LAST
};
/* What -c all runs: the collectives. */
#define C_ALL	C_SENDRECV

static const char *const coll_name[C_LAST] = {
	[C_ALLREDUCE] = "allreduce",
	[C_ALLGATHER] = "allgather",
	[C_REDUCE_SCATTER] = "reduce_scatter",
	[C_BCAST] = "bcast",
	[C_ALLTOALL] = "alltoall",
	[C_GATHER] = "gather",
	[C_SCATTER] = "scatter",
	[C_SENDRECV] = "sendrecv",
};

static int rank, nranks;
static int ranks_here = 1;	/* ranks on this rank's node */

struct bufs {
	float *send, *recv;
	size_t send_n, recv_n;	/* elements */
};

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static size_t parse_size(const char *s)
{
	size_t v = bench_parse_size(s);

	if (v == (size_t)-1) {
		if (rank == 0)
			fprintf(stderr, "bad size '%s'\n", s);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	return v;
}

/* Values are small integers, so every sum of them is exact in fp32. */
static float val(int r, size_t i)
{
	return (float)((r + 1) * (int)(i % 31 + 1));
}

static float sum_val(size_t i)
{
	return (float)(nranks * (nranks + 1) / 2 * (int)(i % 31 + 1));
}

/* Distinct per (source, destination, element): catches misplaced blocks. */
static float a2a_val(int src, int dst, size_t k)
{
	return (float)((src * nranks + dst) * 1000 + (int)(k % 997));
}

/* Element counts for one collective at @count elements per rank-block. */
static void sizes_for(enum coll c, size_t count, size_t *send_n, size_t *recv_n)
{
	size_t n = nranks;

	switch (c) {
	case C_ALLREDUCE: *send_n = count; *recv_n = count; break;
	case C_ALLGATHER: *send_n = count; *recv_n = n * count; break;
	case C_REDUCE_SCATTER: *send_n = n * count; *recv_n = count; break;
	case C_BCAST: *send_n = count; *recv_n = 0; break;
	case C_ALLTOALL: *send_n = n * count; *recv_n = n * count; break;
	/* The root's n blocks; the others' buffers are as large, unused. */
	case C_GATHER: *send_n = count; *recv_n = n * count; break;
	case C_SCATTER: *send_n = n * count; *recv_n = count; break;
	case C_SENDRECV: *send_n = count; *recv_n = count; break;
	default: *send_n = *recv_n = 0;
	}
}

static void fill(enum coll c, struct bufs *b, size_t count)
{
	size_t i;
	int j;

	switch (c) {
	case C_ALLREDUCE:
	case C_REDUCE_SCATTER:
		for (i = 0; i < b->send_n; i++)
			b->send[i] = val(rank, i);
		break;
	case C_ALLGATHER:
	case C_GATHER:
	case C_SENDRECV:
		for (i = 0; i < count; i++)
			b->send[i] = val(rank, i) + 100.0f * rank;
		break;
	case C_SCATTER:
		for (j = 0; j < nranks; j++)
			for (i = 0; i < count; i++)
				b->send[j * count + i] = a2a_val(rank, j, i);
		break;
	case C_BCAST:
		for (i = 0; i < count; i++)
			b->send[i] = rank == 0 ? val(0, i) : -1.0f;
		break;
	case C_ALLTOALL:
		for (j = 0; j < nranks; j++)
			for (i = 0; i < count; i++)
				b->send[j * count + i] = a2a_val(rank, j, i);
		break;
	default:
		break;
	}
	for (i = 0; i < b->recv_n; i++)
		b->recv[i] = -1.0f;
}

static long long check(enum coll c, const struct bufs *b, size_t count)
{
	long long wrong = 0;
	size_t i;
	int j;

	switch (c) {
	case C_ALLREDUCE:
		for (i = 0; i < count; i++)
			wrong += b->recv[i] != sum_val(i);
		break;
	case C_REDUCE_SCATTER:
		for (i = 0; i < count; i++)
			wrong += b->recv[i] != sum_val(rank * count + i);
		break;
	case C_ALLGATHER:
		for (j = 0; j < nranks; j++)
			for (i = 0; i < count; i++)
				wrong += b->recv[j * count + i] != val(j, i) + 100.0f * j;
		break;
	case C_BCAST:
		for (i = 0; i < count; i++)
			wrong += b->send[i] != val(0, i);
		break;
	case C_ALLTOALL:
		for (j = 0; j < nranks; j++)
			for (i = 0; i < count; i++)
				wrong += b->recv[j * count + i] != a2a_val(j, rank, i);
		break;
	case C_GATHER:
		for (j = 0; j < nranks && rank == 0; j++)
			for (i = 0; i < count; i++)
				wrong += b->recv[j * count + i] != val(j, i) + 100.0f * j;
		break;
	case C_SCATTER:
		for (i = 0; i < count; i++)
			wrong += b->recv[i] != a2a_val(0, rank, i);
		break;
	case C_SENDRECV:
		j = (rank + nranks - 1) % nranks;
		for (i = 0; i < count; i++)
			wrong += b->recv[i] != val(j, i) + 100.0f * j;
		break;
	default:
		break;
	}
	return wrong;
}

static void run_once(enum coll c, struct bufs *b, size_t count)
{
	int rc = MPI_SUCCESS;

	switch (c) {
	case C_ALLREDUCE:
		rc = MPI_Allreduce(b->send, b->recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		break;
	case C_ALLGATHER:
		rc = MPI_Allgather(b->send, count, MPI_FLOAT, b->recv, count, MPI_FLOAT,
				   MPI_COMM_WORLD);
		break;
	case C_REDUCE_SCATTER:
		rc = MPI_Reduce_scatter_block(b->send, b->recv, count, MPI_FLOAT, MPI_SUM,
					      MPI_COMM_WORLD);
		break;
	case C_BCAST:
		rc = MPI_Bcast(b->send, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
		break;
	case C_ALLTOALL:
		rc = MPI_Alltoall(b->send, count, MPI_FLOAT, b->recv, count, MPI_FLOAT,
				  MPI_COMM_WORLD);
		break;
	case C_GATHER:
		rc = MPI_Gather(b->send, count, MPI_FLOAT, b->recv, count, MPI_FLOAT, 0,
				MPI_COMM_WORLD);
		break;
	case C_SCATTER:
		rc = MPI_Scatter(b->send, count, MPI_FLOAT, b->recv, count, MPI_FLOAT, 0,
				 MPI_COMM_WORLD);
		break;
	case C_SENDRECV:
		rc = MPI_Sendrecv(b->send, count, MPI_FLOAT, (rank + 1) % nranks, 0,
				  b->recv, count, MPI_FLOAT,
				  (rank + nranks - 1) % nranks, 0, MPI_COMM_WORLD,
				  MPI_STATUS_IGNORE);
		break;
	default:
		break;
	}
	if (rc != MPI_SUCCESS)
		MPI_Abort(MPI_COMM_WORLD, 3);
}

static double bus_factor(enum coll c)
{
	double n = nranks;

	switch (c) {
	case C_ALLREDUCE: return 2 * (n - 1) / n;
	case C_BCAST: return 1;
	case C_SENDRECV: return 1;
	default: return (n - 1) / n;
	}
}

struct opts {
	size_t minb, maxb;
	double factor, tbudget;
	int iters, warmup, check;
};

/* The next size: times the factor, but never past -e without running -e itself. */
static size_t next_size(size_t size, const struct opts *o)
{
	size_t next = (size_t)(size * o->factor);

	if (next <= size)
		next = size + 1;
	if (next > o->maxb && size < o->maxb)
		next = o->maxb;
	return next;
}

/* One collective over the whole size range; returns the number of wrong elements. */
static long long bench(enum coll c, const struct opts *o)
{
	double big_cpu = 0, big_node = 0, big_bus = 0;	/* sizes >= 1 MiB */
	size_t blk = (c == C_ALLREDUCE || c == C_BCAST || c == C_SENDRECV) ?
		     1 : nranks;
	size_t last_count = 0, size;
	long long wrong_total = 0;
	struct bufs b = { 0 };

	if (rank == 0) {
		printf("#\n# %s: %d ranks, fp32%s\n#\n", coll_name[c], nranks,
		       c == C_ALLREDUCE || c == C_REDUCE_SCATTER ? ", sum" : "");
		printf("# %10s %12s %6s %6s %5s %11s %11s %11s %7s %6s %10s %6s %10s\n",
		       "size(B)", "count", "type", "redop", "root", "time(us)",
		       "algbw(GB/s)", "busbw(GB/s)", "#wrong", "iters", "cpu(s/GB)", "cores",
		       "node(s/GB)");
	}
	for (size = o->minb; size <= o->maxb; size = next_size(size, o)) {
		size_t count = size / sizeof(float) / blk, bytes;
		double t0, t, tmax, c0, n0, n1, cpu, cpu_sum, node, node_sum, est, bus;
		long long wrong = 0, wrong_sum = 0;
		int iters = o->iters, i;

		if (count == 0)
			count = 1;
		if (count == last_count)
			continue;
		last_count = count;
		bytes = count * blk * sizeof(float);

		free(b.send);
		free(b.recv);
		sizes_for(c, count, &b.send_n, &b.recv_n);
		b.send = malloc(b.send_n * sizeof(float));
		b.recv = malloc((b.recv_n ? b.recv_n : 1) * sizeof(float));
		if (!b.send || !b.recv) {
			fprintf(stderr, "rank %d: out of memory at %zu bytes\n", rank, bytes);
			MPI_Abort(MPI_COMM_WORLD, 4);
		}
		fill(c, &b, count);
		/* The checked run is also the first warm-up run. */
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		if (o->check) {
			run_once(c, &b, count);
			wrong = check(c, &b, count);
		}
		for (i = 0; i < o->warmup; i++)
			run_once(c, &b, count);
		t = MPI_Wtime() - t0;
		if (o->tbudget > 0 && o->warmup + o->check > 0) {
			/* Every rank must run the same number of iterations. */
			MPI_Allreduce(&t, &est, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
			est /= o->warmup + o->check;
			if (est * iters > o->tbudget)
				iters = est > 0 ? (int)(o->tbudget / est) : iters;
			if (iters < 1)
				iters = 1;
		}
		MPI_Barrier(MPI_COMM_WORLD);
		c0 = cpu_seconds();
		n0 = bench_node_busy();
		t0 = MPI_Wtime();
		for (i = 0; i < iters; i++)
			run_once(c, &b, count);
		t = MPI_Wtime() - t0;
		cpu = cpu_seconds() - c0;
		n1 = bench_node_busy();
		node = n0 >= 0 && n1 >= 0 ? (n1 - n0) / ranks_here : 0;
		MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		MPI_Reduce(&cpu, &cpu_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		MPI_Reduce(&node, &node_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		MPI_Reduce(&wrong, &wrong_sum, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			double us = tmax / iters * 1e6;
			double algbw = bytes / (us * 1e3);	/* GB/s */

			bus = (double)bytes * bus_factor(c) * iters;
			if (bytes >= (1 << 20)) {
				big_cpu += cpu_sum;
				big_node += node_sum;
				big_bus += bus;
			}
			wrong_total += wrong_sum;
			printf("  %10zu %12zu %6s %6s %5d %11.1f %11.6f %11.6f %7lld %6d %10.4g %6.2f %10.4g\n",
			       bytes, bytes / sizeof(float),
			       "float", c == C_ALLREDUCE || c == C_REDUCE_SCATTER ? "sum" : "none",
			       c == C_BCAST || c == C_GATHER || c == C_SCATTER ? 0 : -1, us, algbw, algbw * bus_factor(c),
			       o->check ? wrong_sum : -1LL, iters, cpu_sum / (bus / 1e9),
			       cpu_sum / tmax, node_sum / (bus / 1e9));
			fflush(stdout);
		}
	}
	if (rank == 0 && big_bus > 0)
		printf("# %s: sizes >= 1 MiB: %.3f CPU s (ranks), %.3f CPU s (nodes) per GB of bus traffic\n",
		       coll_name[c], big_cpu / (big_bus / 1e9), big_node / (big_bus / 1e9));
	free(b.send);
	free(b.recv);
	MPI_Bcast(&wrong_total, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
	return wrong_total;
}

int main(int argc, char **argv)
{
	struct opts o = { .minb = 8, .maxb = 16 << 20, .factor = 2, .tbudget = 0,
			  .iters = 20, .warmup = 1, .check = 1 };
	int want[C_LAST] = { 0 }, any = 0, opt, c;
	long long wrong = 0;
	char *list = NULL, *tok, *save;
	char host[MPI_MAX_PROCESSOR_NAME];
	int hlen;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);

	while ((opt = getopt(argc, argv, "b:e:f:n:w:T:c:C:h")) != -1) {
		switch (opt) {
		case 'b': o.minb = parse_size(optarg); break;
		case 'e': o.maxb = parse_size(optarg); break;
		case 'f': o.factor = strtod(optarg, NULL); break;
		case 'n': o.iters = atoi(optarg); break;
		case 'w': o.warmup = atoi(optarg); break;
		case 'T': o.tbudget = strtod(optarg, NULL); break;
		case 'c': list = optarg; break;
		case 'C': o.check = atoi(optarg); break;
		default:
			if (rank == 0)
				fprintf(stderr, "usage: kcoll-mpibench [-b min] [-e max] [-f factor] "
					"[-n iters] [-w warmup] [-T secs] [-c coll,...|all|sendrecv] [-C 0|1]\n");
			MPI_Finalize();
			return opt == 'h' ? 0 : 2;
		}
	}
	if (o.minb < 1 || o.maxb < o.minb || o.factor < 1 || o.iters < 1 || o.warmup < 0) {
		if (rank == 0)
			fprintf(stderr, "kcoll-mpibench: bad -b/-e/-f/-n/-w\n");
		MPI_Finalize();
		return 2;
	}
	if (!list || !strcmp(list, "all")) {
		for (c = 0; c < C_ALL; c++)
			want[c] = 1;
	} else {
		for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			for (c = 0; c < C_LAST; c++)
				if (!strcmp(tok, coll_name[c]))
					break;
			if (c == C_LAST) {
				if (rank == 0)
					fprintf(stderr, "kcoll-mpibench: unknown collective '%s'\n", tok);
				MPI_Finalize();
				return 2;
			}
			want[c] = 1;
		}
	}

	MPI_Get_processor_name(host, &hlen);
	{
		uint64_t mine = bench_host_hash();
		uint64_t *hs = malloc((size_t)nranks * sizeof(*hs));

		if (!hs)
			MPI_Abort(MPI_COMM_WORLD, 4);
		MPI_Allgather(&mine, 1, MPI_UINT64_T, hs, 1, MPI_UINT64_T, MPI_COMM_WORLD);
		ranks_here = bench_ranks_here(hs, nranks, mine);
		free(hs);
	}
	if (rank == 0) {
		char lib[MPI_MAX_LIBRARY_VERSION_STRING];
		int len;

		MPI_Get_library_version(lib, &len);
		printf("# kcoll-mpibench: %d ranks; %s", nranks, lib);
		if (len == 0 || lib[len - 1] != '\n')
			printf("\n");
		printf("# sizes %zu..%zu x%g, iters %d (budget %g s/size), warmup %d, check %d\n",
		       o.minb, o.maxb, o.factor, o.iters, o.tbudget, o.warmup, o.check);
	}
	/* Where each rank runs, printed by rank 0 (output of other ranks is not ordered). */
	{
		char *all = rank == 0 ? malloc((size_t)nranks * MPI_MAX_PROCESSOR_NAME) : NULL;

		if (rank == 0 && !all)
			MPI_Abort(MPI_COMM_WORLD, 4);
		host[hlen < MPI_MAX_PROCESSOR_NAME ? hlen : MPI_MAX_PROCESSOR_NAME - 1] = 0;
		MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME,
			   MPI_CHAR, 0, MPI_COMM_WORLD);
		for (c = 0; rank == 0 && c < nranks; c++)
			printf("#   rank %d on %s\n", c, all + (size_t)c * MPI_MAX_PROCESSOR_NAME);
		free(all);
	}

	for (c = 0; c < C_LAST; c++) {
		if (want[c]) {
			wrong += bench(c, &o);
			any = 1;
		}
	}
	if (rank == 0)
		printf("# Out of bounds values : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
	MPI_Finalize();
	return any && wrong == 0 ? 0 : 1;
}
