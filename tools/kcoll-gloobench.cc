// SPDX-License-Identifier: MIT
/*
 * kcoll-gloobench: Gloo's collectives (Debian's libgloo-dev) measured the
 * way kcoll-mpibench measures Open MPI's, with the same table, so that
 * kcoll-perf, Open MPI and Gloo compare line for line (make bench). A
 * peer baseline, not a kcoll test.
 *
 * Usage: KCOLL_RANK=r KCOLL_NRANKS=n kcoll-gloobench -s STOREDIR
 *            [-x tcp|ibverbs] [-i IFACE] [-d DEV] [-g GIDINDEX]
 *            [-b min] [-e max] [-f factor] [-n iters] [-w warmup]
 *            [-T seconds] [-c collective[,...]] [-C 0|1]
 *   -s  a directory every rank sees (Gloo's FileStore rendezvous; the VMs
 *       share the test's output directory); it must be empty of an
 *       earlier run's keys (each run uses its own prefix, -p)
 *   -p  the rendezvous prefix (default "kcoll-gloobench")
 *   -x  the transport: tcp over IFACE (-i, default eth0), or ibverbs on
 *       DEV (-d, default rxe0) port 1, GID index -g (default 1: RoCE v2)
 *   -b/-e/-f/-n/-w/-T/-C as kcoll-mpibench; -c allreduce, allgather,
 *       reduce_scatter, bcast, alltoall or all
 *
 * Algorithms: Gloo's own for each: AllreduceRing, AllgatherRing,
 * ReduceScatterHalvingDoubling, BroadcastOneToAll (the "old" API, built
 * once per size and run repeatedly, which every transport supports) and
 * gloo::alltoall (the new API; only transports with unbound buffers, so
 * not ibverbs). A collective the transport cannot run is reported as such
 * and skipped.
 *
 * Columns as kcoll-mpibench: size(B) count type redop root time(us)
 * algbw busbw #wrong iters cpu(s/GB) cores node(s/GB); time is the
 * slowest rank's mean; CPU as tools/bench-util.h describes.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allgather_ring.h>
#include <gloo/allreduce_ring.h>
#include <gloo/alltoall.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/ibverbs/device.h>
#include <gloo/transport/tcp/device.h>

#include "bench-util.h"

namespace {

enum Coll { C_ALLREDUCE, C_ALLGATHER, C_REDUCE_SCATTER, C_BCAST, C_ALLTOALL, C_LAST };

const char *const coll_name[C_LAST] = {
	"allreduce", "allgather", "reduce_scatter", "bcast", "alltoall",
};

struct Opts {
	size_t minb = 8, maxb = 16 << 20;
	double factor = 2, tbudget = 0;
	int iters = 20, warmup = 1, check = 1;
	bool want[C_LAST] = { true, true, true, true, true };
	std::string store, prefix = "kcoll-gloobench", transport = "tcp";
	std::string iface = "eth0", dev = "rxe0";
	int gid = 1;
};

int rank, nranks, ranks_here = 1;
std::shared_ptr<gloo::rendezvous::Context> ctx;

double now()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

size_t parse_size(const char *s)
{
	size_t v = bench_parse_size(s);

	if (v == (size_t)-1 || v < 1) {
		fprintf(stderr, "kcoll-gloobench: bad size '%s'\n", s);
		exit(2);
	}
	return v;
}

double bus_factor(int c)
{
	double n = nranks;

	if (c == C_ALLREDUCE)
		return 2 * (n - 1) / n;
	if (c == C_BCAST)
		return 1;
	return (n - 1) / n;
}

/* Element-wise sum/max over the ranks of a few doubles (old API). */
void reduce_doubles(std::vector<double> &v, bool max)
{
	std::vector<double *> ptrs{ v.data() };
	gloo::AllreduceRing<double> ar(ctx, ptrs, (int)v.size(),
				       max ? gloo::ReductionFunction<double>::max :
					     gloo::ReductionFunction<double>::sum);
	ar.run();
}

void barrier()
{
	gloo::BarrierAllToAll b(ctx);
	b.run();
}

/* One collective at one size: its buffers and a way to run it. */
struct Case {
	int c;
	size_t count;			/* elements per block */
	std::vector<float> send, recv;
	std::unique_ptr<gloo::Algorithm> algo;
	std::unique_ptr<gloo::AlltoallOptions> a2a;

	Case(int c_, size_t count_) : c(c_), count(count_)
	{
		size_t n = (size_t)nranks;

		switch (c) {
		case C_ALLREDUCE:
		case C_BCAST:
			send.resize(count);
			break;
		case C_ALLGATHER:
			send.resize(count);
			recv.resize(count * n);
			break;
		case C_REDUCE_SCATTER:
			send.resize(count * n);	/* reduced in place */
			break;
		case C_ALLTOALL:
			send.resize(count * n);
			recv.resize(count * n);
			break;
		}
		build();
	}

	void build()
	{
		std::vector<float *> ptrs{ send.data() };

		switch (c) {
		case C_ALLREDUCE:
			algo.reset(new gloo::AllreduceRing<float>(ctx, ptrs, (int)count));
			break;
		case C_BCAST:
			algo.reset(new gloo::BroadcastOneToAll<float>(ctx, ptrs, count, 0, 0));
			break;
		case C_ALLGATHER: {
			std::vector<const float *> in{ send.data() };

			algo.reset(new gloo::AllgatherRing<float>(ctx, in, recv.data(),
								  (int)count));
			break;
		}
		case C_REDUCE_SCATTER: {
			std::vector<int> elems((size_t)nranks, (int)count);

			algo.reset(new gloo::ReduceScatterHalvingDoubling<float>(
				ctx, ptrs, (int)(count * nranks), elems));
			break;
		}
		case C_ALLTOALL:
			a2a.reset(new gloo::AlltoallOptions(ctx));
			a2a->setInput(send.data(), send.size());
			a2a->setOutput(recv.data(), recv.size());
			break;
		}
	}

	/* Inputs: rank r's element i is (r + 1) * (i % 97 + 1), exact in fp32. */
	void fill()
	{
		for (size_t i = 0; i < send.size(); i++)
			send[i] = (float)((rank + 1) * (int)(i % 97 + 1));
		std::fill(recv.begin(), recv.end(), -1.0f);
	}

	void run()
	{
		if (a2a)
			gloo::alltoall(*a2a);
		else
			algo->run();
	}

	long long verify() const
	{
		long long bad = 0;
		double tri = (double)nranks * (nranks + 1) / 2;
		size_t n = (size_t)nranks, i, r;

		switch (c) {
		case C_ALLREDUCE:
			for (i = 0; i < count; i++)
				bad += send[i] != (float)(tri * (double)(i % 97 + 1));
			break;
		case C_BCAST:
			for (i = 0; i < count; i++)
				bad += send[i] != (float)(i % 97 + 1);
			break;
		case C_ALLGATHER:
			for (r = 0; r < n; r++)
				for (i = 0; i < count; i++)
					bad += recv[r * count + i] !=
					       (float)((r + 1) * (i % 97 + 1));
			break;
		case C_REDUCE_SCATTER:
			/* Our block of the reduced buffer: Gloo leaves it at
			 * the start of the buffer (its distribution phase). */
			for (i = 0; i < count; i++) {
				size_t j = (size_t)rank * count + i;

				bad += send[i] != (float)(tri * (double)(j % 97 + 1));
			}
			break;
		case C_ALLTOALL:
			/* Block r came from rank r's block @rank. */
			for (r = 0; r < n; r++)
				for (i = 0; i < count; i++) {
					size_t j = (size_t)rank * count + i;

					bad += recv[r * count + i] !=
					       (float)((r + 1) * (j % 97 + 1));
				}
			break;
		}
		return bad;
	}
};

size_t next_size(size_t s, const Opts &o)
{
	size_t n = (size_t)((double)s * o.factor);

	if (s == o.maxb)
		return o.maxb + 1;
	if (n <= s)
		n = s + 1;
	return n > o.maxb ? o.maxb : n;
}

long long bench(int c, const Opts &o)
{
	size_t blk = c == C_ALLGATHER || c == C_REDUCE_SCATTER ||
		     c == C_ALLTOALL ? (size_t)nranks : 1;
	double big_cpu = 0, big_node = 0, big_bus = 0;
	long long wrong_total = 0;
	size_t last = 0;

	if (rank == 0) {
		printf("#\n# %s: %d ranks, fp32%s\n#\n", coll_name[c], nranks,
		       c == C_ALLREDUCE || c == C_REDUCE_SCATTER ? ", sum" : "");
		printf("# %10s %12s %6s %6s %5s %11s %11s %11s %7s %6s %10s %6s %10s\n",
		       "size(B)", "count", "type", "redop", "root", "time(us)",
		       "algbw(GB/s)", "busbw(GB/s)", "#wrong", "iters", "cpu(s/GB)",
		       "cores", "node(s/GB)");
	}
	for (size_t size = o.minb; size <= o.maxb; size = next_size(size, o)) {
		size_t count = size / sizeof(float) / blk, bytes;
		int iters = o.iters, i;
		long long wrong = 0;

		if (count == 0)
			count = 1;
		if (count == last)
			continue;
		last = count;
		bytes = count * blk * sizeof(float);

		std::unique_ptr<Case> k;
		try {
			k.reset(new Case(c, count));
		} catch (const std::exception &e) {
			if (rank == 0)
				printf("# %s: not run over %s: %s\n", coll_name[c],
				       o.transport.c_str(), e.what());
			return 0;
		}
		k->fill();
		barrier();
		double t0 = now();
		if (o.check) {
			k->run();
			wrong = k->verify();
		}
		for (i = 0; i < o.warmup; i++)
			k->run();
		std::vector<double> est{ now() - t0 };
		if (o.tbudget > 0 && o.warmup + o.check > 0) {
			/* Every rank must run the same number of iterations. */
			reduce_doubles(est, true);
			est[0] /= o.warmup + o.check;
			if (est[0] * iters > o.tbudget)
				iters = est[0] > 0 ? (int)(o.tbudget / est[0]) : iters;
			if (iters < 1)
				iters = 1;
		}
		barrier();
		double c0 = bench_proc_cpu(), n0 = bench_node_busy();
		t0 = now();
		for (i = 0; i < iters; i++)
			k->run();
		std::vector<double> t{ now() - t0 };
		double n1 = bench_node_busy();
		std::vector<double> sums{ bench_proc_cpu() - c0,
					  n0 >= 0 && n1 >= 0 ? (n1 - n0) / ranks_here : 0,
					  (double)wrong };
		reduce_doubles(t, true);
		reduce_doubles(sums, false);
		if (rank == 0) {
			double us = t[0] / iters * 1e6;
			double algbw = bytes / (us * 1e3);
			double bus = (double)bytes * bus_factor(c) * iters;

			if (bytes >= (1 << 20)) {
				big_cpu += sums[0];
				big_node += sums[1];
				big_bus += bus;
			}
			wrong_total += (long long)sums[2];
			printf("  %10zu %12zu %6s %6s %5d %11.1f %11.6f %11.6f %7lld %6d %10.4g %6.2f %10.4g\n",
			       bytes, bytes / sizeof(float), "float",
			       c == C_ALLREDUCE || c == C_REDUCE_SCATTER ? "sum" : "none",
			       c == C_BCAST ? 0 : -1, us, algbw, algbw * bus_factor(c),
			       o.check ? (long long)sums[2] : -1LL, iters,
			       sums[0] / (bus / 1e9), sums[0] / t[0], sums[1] / (bus / 1e9));
			fflush(stdout);
		}
	}
	if (rank == 0 && big_bus > 0)
		printf("# %s: sizes >= 1 MiB: %.3f CPU s (ranks), %.3f CPU s (nodes) per GB of bus traffic\n",
		       coll_name[c], big_cpu / (big_bus / 1e9), big_node / (big_bus / 1e9));
	return wrong_total;
}

[[noreturn]] void usage()
{
	fprintf(stderr, "usage: KCOLL_RANK=r KCOLL_NRANKS=n kcoll-gloobench -s STOREDIR "
		"[-p prefix] [-x tcp|ibverbs] [-i iface] [-d dev] [-g gid]\n"
		"       [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-T s] "
		"[-c coll[,...]|all] [-C 0|1]\n");
	exit(2);
}

int env_int(const char *name)
{
	const char *v = getenv(name);

	if (!v || !*v) {
		fprintf(stderr, "kcoll-gloobench: %s is not set\n", name);
		exit(2);
	}
	return atoi(v);
}

} // namespace

int main(int argc, char **argv)
{
	Opts o;
	int opt, c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "s:p:x:i:d:g:b:e:f:n:w:T:c:C:")) != -1) {
		switch (opt) {
		case 's': o.store = optarg; break;
		case 'p': o.prefix = optarg; break;
		case 'x': o.transport = optarg; break;
		case 'i': o.iface = optarg; break;
		case 'd': o.dev = optarg; break;
		case 'g': o.gid = atoi(optarg); break;
		case 'b': o.minb = parse_size(optarg); break;
		case 'e': o.maxb = parse_size(optarg); break;
		case 'f': o.factor = atof(optarg); break;
		case 'n': o.iters = atoi(optarg); break;
		case 'w': o.warmup = atoi(optarg); break;
		case 'T': o.tbudget = atof(optarg); break;
		case 'C': o.check = atoi(optarg); break;
		case 'c': {
			std::string list = optarg;
			bool all = list == "all";

			for (c = 0; c < C_LAST; c++)
				o.want[c] = all;
			for (size_t p = 0; !all && p <= list.size();) {
				size_t q = list.find(',', p);
				std::string tok = list.substr(p, q == std::string::npos ?
								 std::string::npos : q - p);
				bool known = false;

				for (c = 0; c < C_LAST; c++)
					if (tok == coll_name[c])
						o.want[c] = known = true;
				if (!known) {
					fprintf(stderr, "kcoll-gloobench: unknown collective '%s'\n",
						tok.c_str());
					return 2;
				}
				if (q == std::string::npos)
					break;
				p = q + 1;
			}
			break;
		}
		default:
			usage();
		}
	}
	if (optind != argc || o.store.empty() || o.iters < 1 || o.warmup < 0 ||
	    o.minb > o.maxb || o.factor < 1)
		usage();
	rank = env_int("KCOLL_RANK");
	nranks = env_int("KCOLL_NRANKS");
	if (nranks < 1 || rank < 0 || rank >= nranks)
		usage();

	long long wrong = 0;
	try {
		std::shared_ptr<gloo::transport::Device> dev;

		if (o.transport == "tcp") {
			gloo::transport::tcp::attr a;

			a.iface = o.iface;
			dev = gloo::transport::tcp::CreateDevice(a);
		} else if (o.transport == "ibverbs") {
			gloo::transport::ibverbs::attr a;

			a.name = o.dev;
			a.port = 1;
			a.index = o.gid;
			dev = gloo::transport::ibverbs::CreateDevice(a);
		} else {
			usage();
		}
		gloo::rendezvous::FileStore fs(o.store);
		gloo::rendezvous::PrefixStore store(o.prefix, fs);

		ctx = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
		ctx->setTimeout(std::chrono::seconds(120));
		ctx->connectFullMesh(store, dev);

		/* Ranks that share a node (for the node CPU column): a sum of
		 * one-hot slots gathers 52 bits of each host's hash, exactly. */
		std::vector<double> slots((size_t)nranks, 0.0);
		std::vector<uint64_t> all((size_t)nranks);
		uint64_t h = bench_host_hash() >> 12;

		slots[(size_t)rank] = (double)h;
		reduce_doubles(slots, false);
		for (c = 0; c < nranks; c++)
			all[(size_t)c] = (uint64_t)slots[(size_t)c];
		ranks_here = bench_ranks_here(all.data(), nranks, h);

		if (rank == 0) {
			printf("# kcoll-gloobench: %d ranks; Gloo (libgloo) over %s (%s)\n",
			       nranks, o.transport.c_str(), dev->str().c_str());
			printf("# sizes %zu..%zu x%g, iters %d (budget %g s/size), warmup %d, check %d\n",
			       o.minb, o.maxb, o.factor, o.iters, o.tbudget, o.warmup, o.check);
		}
		for (c = 0; c < C_LAST; c++)
			if (o.want[c])
				wrong += bench(c, o);
	} catch (const std::exception &e) {
		fprintf(stderr, "kcoll-gloobench: rank %d: %s\n", rank, e.what());
		printf("# kcoll-gloobench: rank %d failed: %s\n", rank, e.what());
		return 3;
	}
	if (rank == 0)
		printf("# Out of bounds values : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
	return wrong ? 1 : 0;
}
