// SPDX-License-Identifier: MIT
/*
 * A program built against the installed libcoll-dev alone (tools/deb-test.sh
 * compiles it with pkg-config's flags, outside the build tree): one
 * allreduce, one broadcast and one allgather on a communicator from the
 * environment (coll_comm_init_env()), each result checked. Prints one TAP
 * line per rank; exit status 0 only if everything was right.
 */
#include <stdio.h>
#include <stdlib.h>

#include <coll.h>

#define COUNT 100000

int main(void)
{
	int32_t *a = malloc(COUNT * sizeof(*a)), *g;
	coll_comm *comm;
	int rank, n, ret, bad = 0;
	size_t i;

	ret = coll_comm_init_env(&comm);
	if (ret || !a) {
		printf("not ok - communicator: %s\n", coll_last_error());
		return 1;
	}
	rank = coll_comm_rank(comm);
	n = coll_comm_size(comm);
	g = calloc((size_t)n * 16, sizeof(*g));
	for (i = 0; i < COUNT; i++)
		a[i] = (int32_t)(i % 1000) + rank;
	ret = coll_allreduce(a, a, COUNT, COLL_DTYPE_INT32, COLL_REDOP_SUM, comm);
	for (i = 0; i < COUNT && !ret; i++)
		bad += a[i] != (int32_t)(n * (i % 1000) + n * (n - 1) / 2);
	if (!ret) {
		for (i = 0; i < COUNT; i++)
			a[i] = rank == n - 1 ? (int32_t)i : -1;
		ret = coll_broadcast(a, a, COUNT, COLL_DTYPE_INT32, n - 1, comm);
		for (i = 0; i < COUNT && !ret; i++)
			bad += a[i] != (int32_t)i;
	}
	if (!ret && g) {
		int32_t mine[16];

		for (i = 0; i < 16; i++)
			mine[i] = rank * 100 + (int32_t)i;
		ret = coll_allgather(mine, g, 16, COLL_DTYPE_INT32, comm);
		for (i = 0; i < (size_t)n * 16 && !ret; i++)
			bad += g[i] != (int32_t)((i / 16) * 100 + i % 16);
	}
	printf("%sok - rank %d of %d: allreduce, broadcast, allgather through the installed libcoll: %s%s\n",
	       ret || bad ? "not " : "", rank, n,
	       ret ? coll_strerror(ret) : "done",
	       bad ? " (wrong elements)" : "");
	if (ret)
		printf("# %s\n", coll_last_error());
	coll_comm_destroy(comm);
	free(a);
	free(g);
	return ret || bad;
}
