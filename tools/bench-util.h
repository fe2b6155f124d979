/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the benchmarks (kcoll-perf, kcoll-mpibench, kcoll-gloobench):
 * their size arguments, and CPU accounting: what a collective costs in CPU
 * time per GB of bus traffic, counted two ways.
 *
 *   ranks  user + system time of the benchmark processes (getrusage). A
 *          library that polls pays here; kcoll's ranks sleep in the
 *          kernel while the module works, so this alone would flatter it.
 *   nodes  every CPU of the node that was not idle (/proc/stat), each
 *          rank counting 1/(ranks on its node) of its node's figure: the
 *          module's workqueues, softirqs and, under Soft-RoCE, the
 *          software NIC itself. This is the honest comparison; it also
 *          counts whatever else runs on the node.
 *
 * Plain C, for C and C++ callers.
 */
#ifndef KCOLL_BENCH_UTIL_H
#define KCOLL_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* User + system seconds of this process (all threads). */
static inline double bench_proc_cpu(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

/* Busy CPU seconds of the node since boot (all CPUs), or -1. */
static inline double bench_node_busy(void)
{
	unsigned long long v[8] = { 0 };
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "r");
	int n;

	if (!f)
		return -1;
	/* user nice system idle iowait irq softirq steal */
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
		   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n < 7 || hz <= 0)
		return -1;
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)hz;
}

/* A hash of the host name: ranks with equal hashes share a node. */
static inline uint64_t bench_host_hash(void)
{
	char host[256] = "";
	uint64_t h = 1469598103934665603ULL;	/* FNV-1a */
	size_t i;

	gethostname(host, sizeof(host) - 1);
	for (i = 0; host[i]; i++)
		h = (h ^ (unsigned char)host[i]) * 1099511628211ULL;
	return h;
}

/* How many of the @n hashes in @all equal @mine (at least 1). */
static inline int bench_ranks_here(const uint64_t *all, int n, uint64_t mine)
{
	int i, k = 0;

	for (i = 0; i < n; i++)
		k += all[i] == mine;
	return k ? k : 1;
}

/*
 * A size argument: bytes, with an optional K, M or G (binary) or B suffix.
 * Returns (size_t)-1 for anything else or a negative number.
 */
static inline size_t bench_parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'G': case 'g': v *= 1024;	/* fall through */
	case 'M': case 'm': v *= 1024;	/* fall through */
	case 'K': case 'k': v *= 1024;	/* fall through */
	case 'B': case 'b': end++; break;
	default: break;
	}
	if (*end || end == s || v < 0 || v >= 18446744073709551615.0)
		return (size_t)-1;
	return (size_t)v;
}

#endif /* KCOLL_BENCH_UTIL_H */
