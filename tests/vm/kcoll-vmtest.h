/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the multi-rank VM test programs share (kcoll-nodedie,
 * kcoll-family): a clock, TAP-like check lines, a checked allreduce, and
 * a new communicator's id passed through a file to a process outside it.
 * Each program includes it once; its statics are the program's.
 */
#ifndef KCOLL_VMTEST_H
#define KCOLL_VMTEST_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* A fresh id in *@id, written to @path whole or not at all (through a
 * temporary file renamed into place): true if it was. */
static bool id_file_write(const char *path, coll_unique_id *id)
{
	char s[COLL_UNIQUE_ID_STRLEN], tmp[512];
	int ret;
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	ret = coll_get_unique_id(id);
	if (!ret)
		ret = coll_unique_id_to_string(id, s, sizeof(s));
	f = ret ? NULL : fopen(tmp, "w");
	return f && fprintf(f, "%s\n", s) > 0 && !fclose(f) &&
	       !rename(tmp, path);
}

/* The id in @path once it is there, waiting up to @limit_s: 0 or an
 * error. */
static int id_file_read(const char *path, coll_unique_id *id, double limit_s)
{
	char s[COLL_UNIQUE_ID_STRLEN + 2];
	double t0 = now_s();
	int ret = -ENOENT;
	FILE *f;

	while (ret && now_s() - t0 < limit_s) {
		f = fopen(path, "r");
		if (f) {
			if (fgets(s, sizeof(s), f)) {
				s[strcspn(s, "\n")] = '\0';
				ret = coll_unique_id_from_string(id, s);
			}
			fclose(f);
		}
		if (ret)
			usleep(100 * 1000);
	}
	return ret;
}

#endif /* KCOLL_VMTEST_H */
