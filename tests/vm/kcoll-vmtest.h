/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the multi-rank VM test programs share (kcoll-nodedie,
 * kcoll-family): a clock, TAP-like check lines, and a checked allreduce.
 * Each program includes it once; its statics are the program's.
 */
#ifndef KCOLL_VMTEST_H
#define KCOLL_VMTEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "coll.h"

/* Failed checks so far, and the rank the lines name (-1: not known). */
static int fails, rank = -1;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void check(bool ok, const char *what)
{
	printf("%sok - rank %d: %s\n", ok ? "" : "not ", rank, what);
	fflush(stdout);
	if (!ok)
		fails++;
}

/* An allreduce of int32 (rank + i), i < @count, over @comm; the sums
 * checked. */
static bool allreduce_ok(coll_comm *comm, size_t count)
{
	int n = coll_comm_size(comm), r = coll_comm_rank(comm);
	int32_t *a = malloc(count * sizeof(*a));
	bool ok = a != NULL;
	size_t i;

	for (i = 0; ok && i < count; i++)
		a[i] = (int32_t)(i + r);
	if (ok && coll_allreduce(a, a, count, COLL_DTYPE_INT32,
				 COLL_REDOP_SUM, comm)) {
		printf("# allreduce: %s\n", coll_last_error());
		ok = false;
	}
	for (i = 0; ok && i < count; i++)
		ok = a[i] == (int32_t)(n * i + n * (n - 1) / 2);
	free(a);
	return ok;
}

#endif /* KCOLL_VMTEST_H */
