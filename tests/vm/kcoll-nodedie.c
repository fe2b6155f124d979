// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll-nodedie: death of a node in the middle of a collective.
 *
 * Every rank (one per VM, launched by tests/vm/scenarios/nodedie.sh with
 * coll_comm_init_env()'s variables) checks a few allreduces, then starts a
 * 64 MiB allreduce with a timeout. The victim rank then stops its whole VM
 * at once (sysrq 'b': no process exit, no disconnect, the NIC just goes
 * silent), after writing "ok" to the status file given with -s, since it
 * cannot report later. The survivors must see the allreduce fail within
 * the timeout (plus slack) with a report that names the victim, then
 * shrink the communicator to the survivors alone (coll_comm_shrink(): no
 * bootstrap, nothing asked of the dead node; ranks renumbered), within the
 * connect timeout, and check an allreduce on it.
 *
 * Usage: kcoll-nodedie -v VICTIM [-T TIMEOUT_MS] [-s STATUS]
 *   -v  rank whose node dies
 *   -T  operation timeout (default 10000 ms)
 *   -s  the victim's status file (written "ok" just before it dies)
 * Prints TAP-like result lines; exit 0 when every check passed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "kcoll-vmtest.h"

static void die_now(const char *status)
{
	int fd;

	if (status) {
		fd = open(status, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			if (write(fd, "ok\n", 3) != 3)
				perror("status");
			fsync(fd);
			close(fd);
		}
	}
	sync();
	printf("# stopping this node now\n");
	fflush(stdout);
	fd = open("/proc/sysrq-trigger", O_WRONLY);
	if (fd < 0 || write(fd, "b", 1) != 1)
		perror("sysrq-trigger");
	pause();
}

int main(int argc, char **argv)
{
	const char *status = NULL;
	int victim = -1, o, nranks, ret;
	unsigned int timeout_ms = 10000;
	size_t big = 16u << 20;		/* 64 MiB of int32 */
	coll_comm *comm, *comm2;
	coll_request *req;
	coll_report rep;
	double t0, dt;
	int32_t *a;

	while ((o = getopt(argc, argv, "v:T:s:")) != -1) {
		switch (o) {
		case 'v': victim = atoi(optarg); break;
		case 'T': timeout_ms = strtoul(optarg, NULL, 0); break;
		case 's': status = optarg; break;
		default:
			fprintf(stderr, "usage: kcoll-nodedie -v VICTIM [-T MS] [-s STATUS]\n");
			return 2;
		}
	}
	if (victim < 0) {
		fprintf(stderr, "kcoll-nodedie: -v is required\n");
		return 2;
	}
	ret = coll_comm_init_env(&comm);
	if (ret) {
		printf("Bail out! coll_comm_init_env: %s\n", coll_last_error());
		return 1;
	}
	rank = coll_comm_rank(comm);
	nranks = coll_comm_size(comm);
	check(allreduce_ok(comm, 100001), "allreduce before the death");
	coll_comm_set_timeout(comm, timeout_ms);

	a = calloc(big, sizeof(*a));
	if (!a || coll_iallreduce(a, a, big, COLL_DTYPE_INT32, COLL_REDOP_SUM,
				  comm, &req)) {
		printf("Bail out! big allreduce not issued: %s\n",
		       coll_last_error());
		return 1;
	}
	if (rank == victim) {
		usleep(500 * 1000);
		if (fails) {
			printf("Bail out! the victim failed before dying\n");
			return 1;
		}
		die_now(status);
		return 1;
	}
	t0 = now_s();
	ret = coll_wait(req);
	dt = now_s() - t0;
	coll_request_free(req);
	printf("# rank %d: big allreduce: %d (%s) after %.1f s: %s\n", rank, ret,
	       coll_strerror(ret), dt, ret ? coll_last_error() : "");
	check(ret == -ECONNRESET || ret == -ETIMEDOUT || ret == -EIO,
	      "the allreduce failed with a connection error or a timeout");
	check(dt < timeout_ms / 1000.0 + 20, "within the timeout (+20 s)");
	ret = coll_comm_get_report(comm, &rep);
	check(!ret && rep.error &&
	      (rep.peer == victim ||
	       (rep.nmissing && rep.missing[0] == (uint32_t)victim)),
	      "the report names the dead node's rank");
	free(a);

	/* The survivors carry on without the victim, from what they have. */
	t0 = now_s();
	ret = coll_comm_shrink(comm, &victim, 1, 0, &comm2);
	dt = now_s() - t0;
	printf("# rank %d: shrink: %d after %.1f s%s%s\n", rank, ret, dt,
	       ret ? ": " : "", ret ? coll_last_error() : "");
	check(!ret && comm2 && coll_comm_size(comm2) == nranks - 1 &&
	      coll_comm_rank(comm2) == (rank < victim ? rank : rank - 1),
	      "shrunk to the survivors, renumbered");
	check(dt < 30, "the shrink took less than the connect timeout");
	coll_comm_abort(comm);
	if (!ret) {
		check(allreduce_ok(comm2, 100001),
		      "allreduce on the shrunk communicator");
		coll_comm_destroy(comm2);
	}
	printf("# kcoll-nodedie: rank %d: %d failure(s)\n", rank, fails);
	return fails ? 1 : 0;
}
