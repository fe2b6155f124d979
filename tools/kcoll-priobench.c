// SPDX-License-Identifier: MIT
/*
 * kcoll-priobench - does an urgent small allreduce overtake a large one?
 *
 * One process per rank, started like kcoll-perf (KCOLL_RANK, KCOLL_NRANKS
 * and KCOLL_ROOT or KCOLL_UNIQUE_ID: coll_comm_init_env()'s variables).
 * Every rank builds two communicators over the same ranks: "bulk" at
 * priority 0 and "urgent" at priority -p (default COLL_PRIO_MAX). It then
 * measures the latency of a -s byte fp32 sum allreduce on "urgent":
 *   alone	-n times with nothing else running;
 *   behind	-n times while a -b byte allreduce runs on "bulk" (only the
 *		samples that both started and ended while it was in flight
 *		count; the bulk operation is restarted if it ends first).
 * Rank 0 prints one line per figure and "ratio behind/alone". Whether
 * priorities or FIFO apply is the kernel's sysfs prio_sched, which the
 * caller sets on every node (tests/vm/scenarios/coll.sh, mode prio).
 *
 * Usage: kcoll-priobench [-s bytes] [-b bytes] [-n iters] [-p prio]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"

static int rank, nranks;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, int ret)
{
	fprintf(stderr, "kcoll-priobench rank %d: %s: %d (%s): %s\n", rank,
		what, ret, coll_strerror(ret), coll_last_error());
	exit(1);
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'k': case 'K': v *= 1 << 10; break;
	case 'm': case 'M': v *= 1 << 20; break;
	case 'g': case 'G': v *= 1 << 30; break;
	}
	return (size_t)v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Has @req finished? (Does not consume it.) */
static bool done(coll_request *req)
{
	int fin = 0, ret = coll_test(req, &fin);

	if (ret)
		die("bulk allreduce", ret);
	return fin;
}

int main(int argc, char **argv)
{
	size_t small = 64 << 10, big = 256 << 20;
	int iters = 20, prio = COLL_PRIO_MAX, opt, ret, i, got = 0, restarts = 0;
	struct kcoll_rank_addr self, *table;
	coll_comm *bulk, *urgent;
	float *sbuf, *bbuf;
	double *alone, *behind, t0, t1, tb;
	uint8_t key[KCOLL_KEY_LEN];
	coll_request *breq;
	coll_unique_id id;
	uint64_t uid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "s:b:n:p:")) != -1) {
		switch (opt) {
		case 's': small = parse_size(optarg); break;
		case 'b': big = parse_size(optarg); break;
		case 'n': iters = atoi(optarg); break;
		case 'p': prio = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: kcoll-priobench [-s bytes] "
				"[-b bytes] [-n iters] [-p prio]\n");
			return 2;
		}
	}
	if (iters < 1 || small < 4 || big < 4 || prio < 0 ||
	    prio > COLL_PRIO_MAX)
		return 2;

	/* One bootstrap, two kernel communicators (uid, uid + 1). */
	ret = coll_env_unique_id(&id, &rank, &nranks);
	if (!ret)
		ret = coll_node_addr(&self);
	if (ret)
		die("environment", ret);
	table = calloc((size_t)nranks, sizeof(*table));
	if (!table)
		die("calloc", -ENOMEM);
	ret = coll_bootstrap(&id, nranks, rank, &self, table, &uid);
	if (!ret)
		ret = coll_unique_id_secret(&id, key);
	if (ret)
		die("bootstrap", ret);
	ret = coll_comm_init_table(&bulk, nranks, rank, table, uid, key);
	if (ret)
		die("bulk communicator", ret);
	ret = coll_comm_init_table(&urgent, nranks, rank, table, uid + 1, key);
	if (ret)
		die("urgent communicator", ret);
	free(table);
	ret = coll_comm_set_priority(urgent, prio);
	if (ret)
		die("priority", ret);

	sbuf = calloc(small / 4, sizeof(float));
	bbuf = calloc(big / 4, sizeof(float));
	alone = calloc((size_t)iters, sizeof(double));
	behind = calloc((size_t)iters, sizeof(double));
	if (!sbuf || !bbuf || !alone || !behind)
		die("calloc", -ENOMEM);

	/* Warm up both (connections, first registrations). */
	for (i = 0; i < 2; i++) {
		ret = coll_allreduce(sbuf, sbuf, small / 4, COLL_DTYPE_FP32,
				     COLL_REDOP_SUM, urgent);
		if (ret)
			die("urgent allreduce", ret);
	}
	ret = coll_allreduce(sbuf, sbuf, small / 4, COLL_DTYPE_FP32,
			     COLL_REDOP_SUM, bulk);
	if (ret)
		die("bulk allreduce", ret);

	for (i = 0; i < iters; i++) {
		t0 = now();
		ret = coll_allreduce(sbuf, sbuf, small / 4, COLL_DTYPE_FP32,
				     COLL_REDOP_SUM, urgent);
		if (ret)
			die("urgent allreduce", ret);
		alone[i] = now() - t0;
	}

	tb = now();
	ret = coll_iallreduce(bbuf, bbuf, big / 4, COLL_DTYPE_FP32,
			      COLL_REDOP_SUM, bulk, &breq);
	if (ret)
		die("bulk allreduce", ret);
	/* Let it get going on every rank. */
	usleep(200 * 1000);
	while (got < iters) {
		bool before = !done(breq);

		t0 = now();
		ret = coll_allreduce(sbuf, sbuf, small / 4, COLL_DTYPE_FP32,
				     COLL_REDOP_SUM, urgent);
		if (ret)
			die("urgent allreduce", ret);
		t1 = now();
		/* Every rank must keep the same sequence of operations on
		 * "urgent": agree through it whether the sample counts. */
		{
			int32_t flag = before && !done(breq);

			ret = coll_allreduce(&flag, &flag, 1, COLL_DTYPE_INT32,
					     COLL_REDOP_MIN, urgent);
			if (ret)
				die("agreement", ret);
			if (flag)
				behind[got++] = t1 - t0;
		}
		if (got < iters) {
			int32_t over = done(breq);

			ret = coll_allreduce(&over, &over, 1, COLL_DTYPE_INT32,
					     COLL_REDOP_MAX, urgent);
			if (ret)
				die("agreement", ret);
			if (over) {
				/* Ended first: finish it everywhere and start
				 * another. */
				ret = coll_wait(breq);
				coll_request_free(breq);
				if (ret)
					die("bulk allreduce", ret);
				restarts++;
				ret = coll_iallreduce(bbuf, bbuf, big / 4,
						      COLL_DTYPE_FP32,
						      COLL_REDOP_SUM, bulk,
						      &breq);
				if (ret)
					die("bulk allreduce", ret);
				usleep(200 * 1000);
			}
		}
	}
	ret = coll_wait(breq);
	coll_request_free(breq);
	if (ret)
		die("bulk allreduce", ret);
	tb = now() - tb;

	if (rank == 0) {
		double *behind_raw = calloc((size_t)iters, sizeof(double));
		double ma, mb;

		if (!behind_raw)
			die("calloc", -ENOMEM);
		memcpy(behind_raw, behind, (size_t)iters * sizeof(double));
		ma = median(alone, iters);
		mb = median(behind, iters);

		printf("# kcoll-priobench: %d ranks, urgent %zu B at priority "
		       "%d, bulk %zu B at 0\n", nranks, small, prio, big);
		printf("alone_ms %.3f\n", ma * 1e3);
		printf("behind_ms %.3f\n", mb * 1e3);
		printf("ratio %.2f\n", mb / ma);
		printf("bulk_s %.2f (restarted %d times)\n", tb, restarts);
		printf("behind_samples_ms");
		for (i = 0; i < iters; i++)
			printf(" %.1f", behind_raw[i] * 1e3);
		printf("\n");
		free(behind_raw);
	}
	coll_comm_destroy(urgent);
	coll_comm_destroy(bulk);
	return 0;
}
