// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll-ringbench: NOP descriptors per second through /dev/kcoll's rings,
 * submitted in batches (one KCOLL_IOC_ENTER per batch) versus one ENTER per
 * descriptor. This measures the submission path itself: the cost that a
 * collective pays before any byte moves.
 *
 * A benchmark, not a test: it prints figures and their ratio to batch 1
 * measured in the same run; it fails only if the ring misbehaves (a lost,
 * duplicated or failed completion).
 *
 * Usage: kcoll-ringbench [-t seconds per point] [-b batch,batch,...] [-d]
 *   -d  first show one round trip step by step (NOP, then an asynchronous
 *       DELAY that completes from kernel context while the caller sleeps)
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "coll.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Run batches of @batch NOPs for about @secs; returns descriptors/second. */
static double run(struct coll_ring *r, unsigned int batch, double secs,
		  unsigned long long *ops_out)
{
	unsigned long long seq = 0, want = 0;
	double t0 = now(), t;
	unsigned int i;

	do {
		/* 64 batches between clock reads keep the clock off the path. */
		for (unsigned int rep = 0; rep < 64; rep++) {
			struct kcoll_cqe *cqe;
			uint32_t head;
			int n;

			for (i = 0; i < batch; i++) {
				struct kcoll_sqe *sqe = coll_ring_get_sqe(r);

				if (!sqe) {
					fprintf(stderr, "SQ full at %u of %u\n", i, batch);
					exit(1);
				}
				coll_ring_prep_nop(sqe, seq++);
			}
			n = coll_ring_submit(r);
			if (n != (int)batch) {
				fprintf(stderr, "submit: %d (%s)\n", n,
					n < 0 ? coll_strerror(n) : "short");
				exit(1);
			}
			i = 0;
			coll_ring_for_each_cqe(r, head, cqe) {
				if (cqe->user_data != want || cqe->res != 0) {
					fprintf(stderr, "CQE %llu: user_data %llu res %d\n",
						want, (unsigned long long)cqe->user_data,
						cqe->res);
					exit(1);
				}
				want++;
				i++;
			}
			if (i != batch) {
				fprintf(stderr, "%u CQEs for a batch of %u\n", i, batch);
				exit(1);
			}
			coll_ring_cq_advance(r, batch);
		}
		t = now() - t0;
	} while (t < secs);
	*ops_out = seq;
	return seq / t;
}

#define RUNS 5

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Cost of the cheapest system call, for scale. */
static double syscall_ns(double secs)
{
	unsigned long long n = 0;
	double t0 = now(), t;

	do {
		for (int i = 0; i < 1000; i++)
			syscall(SYS_getppid);
		n += 1000;
		t = now() - t0;
	} while (t < secs);
	return t / n * 1e9;
}

/* The round trip, narrated. */
static int demo(struct coll_ring *r)
{
	struct kcoll_query q = { 0 };
	struct kcoll_sqe *sqe;
	struct kcoll_cqe *cqe;
	double t0;
	int n;

	n = coll_ring_query(r->ring_fd, &q);
	if (n) {
		fprintf(stderr, "query: %s\n", coll_strerror(n));
		return 1;
	}
	printf("kcoll ABI %u: SQ %u entries, CQ %u entries (limits %u/%u), ops 0x%llx\n",
	       q.abi_version, r->sq.ring_entries, r->cq.ring_entries,
	       q.max_sq_entries, q.max_cq_entries, (unsigned long long)q.ops_supported);

	sqe = coll_ring_get_sqe(r);
	coll_ring_prep_nop(sqe, 0x1234);
	t0 = now();
	n = coll_ring_submit(r);
	if (n != 1 || coll_ring_peek_cqe(r, &cqe)) {
		fprintf(stderr, "NOP round trip failed (%d)\n", n);
		return 1;
	}
	printf("NOP   user_data=0x%llx -> CQE user_data=0x%llx res=%d in %.1f us (inline)\n",
	       0x1234ULL, (unsigned long long)cqe->user_data, cqe->res, (now() - t0) * 1e6);
	coll_ring_cqe_seen(r, cqe);

	sqe = coll_ring_get_sqe(r);
	coll_ring_prep_delay(sqe, 250000, 0x5678);
	t0 = now();
	n = coll_ring_submit(r);
	printf("DELAY 250 ms submitted (%d), CQEs ready right after submit: %u\n", n,
	       coll_ring_cq_ready(r));
	n = coll_ring_wait_cqe(r, &cqe, 0);
	if (n) {
		fprintf(stderr, "DELAY wait failed: %s\n", coll_strerror(n));
		return 1;
	}
	printf("DELAY user_data=0x%llx res=%d after %.0f ms (woken from kernel context)\n",
	       (unsigned long long)cqe->user_data, cqe->res, (now() - t0) * 1e3);
	coll_ring_cqe_seen(r, cqe);
	return 0;
}

int main(int argc, char **argv)
{
	/* Batch 1 is the reference every ratio is taken against. */
	unsigned int batches[16] = { 1, 8, 16, 32, 64, 128, 256 };
	unsigned int nb = 7, maxb = 0, i;
	double secs = 1.0, base = 0, r64 = 0;
	struct coll_ring ring;
	int c, err, show = 0;

	while ((c = getopt(argc, argv, "t:b:dh")) != -1) {
		switch (c) {
		case 't':
			secs = atof(optarg);
			break;
		case 'b': {
			char *s = strtok(optarg, ",");

			for (nb = 0; s && nb < 16; s = strtok(NULL, ","))
				batches[nb++] = strtoul(s, NULL, 0);
			break;
		}
		case 'd':
			show = 1;
			break;
		default:
			fprintf(stderr, "usage: %s [-t secs] [-b b1,b2,...] [-d]\n", argv[0]);
			return 2;
		}
	}
	for (i = 0; i < nb; i++) {
		if (!batches[i]) {
			fprintf(stderr, "batch sizes must be positive\n");
			return 2;
		}
		if (batches[i] > maxb)
			maxb = batches[i];
	}
	err = coll_ring_init(&ring, maxb, 0);
	if (err) {
		fprintf(stderr, "coll_ring_init: %s\n", coll_strerror(err));
		return 1;
	}
	if (show && demo(&ring))
		return 1;
	printf("# kcoll-ringbench: NOP descriptors through the rings, %.1f s per point,\n"
	       "# median of %d interleaved rounds\n", secs, RUNS);
	printf("# getppid() syscall: %.0f ns\n", syscall_ns(secs / 2));
	printf("# %8s %12s %12s %10s %12s\n", "batch", "descriptors", "desc/s", "ns/desc",
	       "vs batch 1");
	/*
	 * Rounds interleave every batch size, and each figure is the median
	 * of its rounds, so that drift in the emulated machine's speed hits
	 * all sizes alike. Every ratio is against batch 1 of this same run.
	 */
	{
		double rates[16][RUNS], med[16];
		unsigned long long ops[16] = { 0 };
		unsigned int round, b1 = nb;

		for (round = 0; round < RUNS; round++)
			for (i = 0; i < nb; i++) {
				unsigned long long o;

				rates[i][round] = run(&ring, batches[i], secs / RUNS, &o);
				ops[i] += o;
			}
		for (i = 0; i < nb; i++) {
			qsort(rates[i], RUNS, sizeof(double), cmp_double);
			med[i] = rates[i][RUNS / 2];
			if (batches[i] == 1)
				b1 = i;
		}
		base = b1 < nb ? med[b1] : 0;
		for (i = 0; i < nb; i++) {
			printf("  %8u %12llu %12.0f %10.0f", batches[i], ops[i], med[i],
			       1e9 / med[i]);
			if (base > 0)
				printf(" %12.2f", med[i] / base);
			printf("\n");
			if (batches[i] == 64 && base > 0)
				r64 = med[i] / base;
		}
	}
	if (r64 > 0)
		printf("# ratio batch 64 / one ENTER per descriptor: %.1f (target >= 10: %s)\n",
		       r64, r64 >= 10 ? "met" : "NOT met");
	coll_ring_exit(&ring);
	return 0;
}
