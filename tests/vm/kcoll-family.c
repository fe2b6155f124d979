// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll-family: communicators that split, revoke, shrink and grow, with
 * ranks dying at the worst moments (tests/vm/scenarios/coll.sh "family").
 *
 * Four ranks (coll_comm_init_env(), two per VM: ranks 0, 1 on VM 0, 2, 3
 * on VM 1), in steps:
 *  1. split by parity (children {0, 2} and {1, 3}, across the VMs), an
 *     allreduce on each child and on the parent; rank 0 runs kcollctl
 *     (-K) and finds its parent and child listed as such;
 *  2. revoke: ranks 0-2 start an allreduce that rank 3 never joins; rank 3
 *     revokes the communicator instead, and stays alive until the three
 *     have seen it (so that its revoke, not its exit, is what they see).
 *     The three fail with -ECANCELED within seconds (the operation
 *     timeout is a minute), their reports naming rank 3 as the one that
 *     aborted, their next operation fails at once, and so does rank 3's
 *     (-ECANCELED); then rank 3 exits at once, the worst moment for a
 *     shrink that excludes it;
 *  3. shrink: ranks 0-2 shrink the revoked communicator to {0, 1, 2};
 *     rank 2 kills itself (SIGKILL) as it would enter the shrink, so the
 *     shrink of 0 and 1 must fail within the connect timeout (-C); they
 *     shrink again without rank 2 and check an allreduce;
 *  4. grow: ranks 0 and 1 grow that communicator to 3 with a new process
 *     (kcoll-family -g, started by the scenario on VM 1) that reads the
 *     fresh id from a file (-f) rank 0 writes; an allreduce on the three;
 *  5. grow again, and the new process kills itself (SIGKILL) as it would
 *     join: the grow of 0 and 1 must fail within the bootstrap and
 *     connect timeouts, and leave their communicator working;
 *  6. split that communicator, and rank 1 kills itself as it would enter
 *     the split: rank 0's must fail within seconds (the operation
 *     timeout is a minute).
 * Every step's time is bounded and checked. Prints TAP-like lines; exit
 * 0 when every check passed.
 *
 * Usage: kcoll-family -f IDFILE [-K KCOLLCTL] [-C CONNECT_MS]   (ranks)
 *        kcoll-family -g -f IDFILE                             (newcomer)
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "kcoll-vmtest.h"

static const char *idfile;

/* A flag file beside the id file: "IDFILE.WHAT" (the VMs share it). */
static void flag_path(char *buf, size_t len, const char *what)
{
	snprintf(buf, len, "%s.%s", idfile, what);
}

static void flag_set(const char *what)
{
	char p[512];
	FILE *f;

	flag_path(p, sizeof(p), what);
	f = fopen(p, "w");
	if (f)
		fclose(f);
}

static bool flag_wait(const char *what, double secs)
{
	double t0 = now_s();
	char p[512];

	flag_path(p, sizeof(p), what);
	while (access(p, F_OK)) {
		if (now_s() - t0 > secs)
			return false;
		usleep(100 * 1000);
	}
	return true;
}

/* The sum of @v over @comm, or INT32_MIN (its error in @err). */
static int32_t sum_over(coll_comm *comm, int32_t v, int *err)
{
	int ret = coll_allreduce(&v, &v, 1, COLL_DTYPE_INT32, COLL_REDOP_SUM,
				 comm);

	if (err)
		*err = ret;
	if (ret)
		printf("# allreduce: %d %s\n", ret, coll_last_error());
	return ret ? INT32_MIN : v;
}

/* kcollctl's listing shows the split's parent and child on this node. */
static void check_kcollctl(const char *ctl)
{
	char cmd[512], line[512];
	bool parent = false, child = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s comm 2>&1", ctl);
	p = popen(cmd, "r");
	if (!p) {
		check(false, "kcollctl runs");
		return;
	}
	while (fgets(line, sizeof(line), p)) {
		printf("# kcollctl: %s", line);
		parent |= !!strstr(line, "children: comm");
		child |= !!strstr(line, "child of comm");
	}
	check(pclose(p) == 0 && parent && child,
	      "kcollctl lists the parent with its children and the child with its parent");
}

static int newcomer(void)
{
	coll_comm *c = NULL;
	coll_unique_id id;
	char p[512];
	int ret;

	rank = 2;
	/* Rank 0 writes the id (whole: renamed into place) once the first
	 * three steps are over. */
	ret = id_file_read(idfile, &id, 300);
	check(!ret, "the new rank read the grown communicator's id");
	if (ret)
		return 1;
	ret = coll_comm_init_rank(&c, 3, &id, 2);
	check(!ret, "the new rank joined the grown communicator");
	if (ret) {
		printf("# %s\n", coll_last_error());
		return 1;
	}
	check(coll_comm_parent_uid(c) == 0, "the new rank's view has no parent");
	check(allreduce_ok(c, 100001), "allreduce on the grown communicator (new rank)");
	coll_comm_destroy(c);

	/* 5. The second grow's id, and death instead of joining it (unless
	 * a check failed: the exit status says so then). */
	flag_path(p, sizeof(p), "grow2");
	ret = id_file_read(p, &id, 300);
	check(!ret, "the new rank read the second grow's id");
	if (fails || ret)
		return 1;
	printf("# the new rank kills itself instead of joining the second grow\n");
	fflush(stdout);
	raise(SIGKILL);
	return 1;
}

int main(int argc, char **argv)
{
	const char *ctl = NULL;
	coll_comm *comm, *child = NULL, *s1 = NULL, *s2 = NULL, *g = NULL;
	unsigned int connect_ms = 5000;
	int o, ret, err, ex[2];
	bool grow_only = false;
	coll_request *req;
	int32_t v = 1;
	double t0, dt;

	while ((o = getopt(argc, argv, "f:K:C:g")) != -1) {
		switch (o) {
		case 'f': idfile = optarg; break;
		case 'K': ctl = optarg; break;
		case 'C': connect_ms = strtoul(optarg, NULL, 0); break;
		case 'g': grow_only = true; break;
		default:
			fprintf(stderr, "usage: kcoll-family -f IDFILE [-K KCOLLCTL] [-C MS] | -g -f IDFILE\n");
			return 2;
		}
	}
	if (!idfile) {
		fprintf(stderr, "kcoll-family: -f is required\n");
		return 2;
	}
	if (grow_only)
		return newcomer();
	ret = coll_comm_init_env(&comm);
	if (ret) {
		printf("Bail out! coll_comm_init_env: %s\n", coll_last_error());
		return 1;
	}
	rank = coll_comm_rank(comm);
	if (coll_comm_size(comm) != 4) {
		printf("Bail out! kcoll-family needs 4 ranks\n");
		return 1;
	}
	coll_comm_set_timeout(comm, 60000);

	/* 1. split */
	ret = coll_comm_split(comm, rank % 2, rank, &child);
	check(!ret && child && coll_comm_size(child) == 2 &&
	      coll_comm_rank(child) == rank / 2, "split by parity");
	if (child) {
		check(coll_comm_parent_uid(child) == coll_comm_uid(comm),
		      "the child names its parent");
		check(allreduce_ok(child, 100001), "allreduce on the child");
		check(sum_over(comm, rank, NULL) == 6,
		      "allreduce on the parent beside the child");
		if (ctl && rank == 0)
			check_kcollctl(ctl);
		/* Nobody destroys its child before rank 0 has looked. */
		check(sum_over(comm, 0, NULL) == 0, "barrier after kcollctl");
		coll_comm_destroy(child);
	}

	/* 2. revoke: rank 3 never joins the allreduce, and revokes. */
	if (rank == 3) {
		usleep(1500 * 1000);
		t0 = now_s();
		check(!coll_comm_revoke(comm), "revoke");
		check(now_s() - t0 < 5, "revoke returned within 5 s");
		check(sum_over(comm, 1, &err) == INT32_MIN && err == -ECANCELED,
		      "an operation after revoking fails -ECANCELED");
		/* Alive until the others have failed: what they see must be
		 * the revoke, not this process's exit. Then out at once: the
		 * survivors' shrink starts without us. */
		check(flag_wait("revoked-0", 60) && flag_wait("revoked-1", 60) &&
		      flag_wait("revoked-2", 60),
		      "the others saw the revoke while this rank lived");
		printf("# rank 3 exits\n");
		fflush(stdout);
		_exit(fails ? 1 : 0);
	}
	t0 = now_s();
	ret = coll_iallreduce(&v, &v, 1, COLL_DTYPE_INT32, COLL_REDOP_SUM,
			      comm, &req);
	if (!ret) {
		ret = coll_wait(req);
		coll_request_free(req);
	}
	dt = now_s() - t0;
	printf("# revoked allreduce: %d (%s) after %.1f s\n", ret,
	       coll_strerror(ret), dt);
	check(ret == -ECANCELED, "the revoked allreduce fails -ECANCELED");
	check(dt < 20, "within 20 s of its start (the timeout is 60 s)");
	{
		coll_report rep;

		check(!coll_comm_get_report(comm, &rep) &&
		      rep.error == -ECANCELED &&
		      rep.reason == COLL_REPORT_ABORTED && rep.peer == 3,
		      "the report says rank 3 aborted (revoked) it");
	}
	t0 = now_s();
	check(sum_over(comm, 1, &err) == INT32_MIN && err == -ECANCELED &&
	      now_s() - t0 < 2, "the next operation fails at once");
	{
		char what[16];

		snprintf(what, sizeof(what), "revoked-%d", rank);
		flag_set(what);
	}

	/* 3. shrink: rank 2 dies as it would enter it (unless it failed a
	 * check: then it says so by its exit status). */
	if (rank == 2) {
		if (fails)
			_exit(1);
		printf("# rank 2 kills itself instead of shrinking\n");
		fflush(stdout);
		raise(SIGKILL);
	}
	{
		char buf[16];

		snprintf(buf, sizeof(buf), "%u", connect_ms);
		setenv(COLL_ENV_CONNECT_TIMEOUT, buf, 1);
	}
	ex[0] = 3;
	t0 = now_s();
	ret = coll_comm_shrink(comm, ex, 1, 0, &s1);
	dt = now_s() - t0;
	printf("# shrink to {0, 1, 2} with rank 2 dead: %d (%s) after %.1f s: %s\n",
	       ret, coll_strerror(ret), dt, ret ? coll_last_error() : "");
	check(ret && !s1, "a shrink with a dead member fails");
	check(dt < connect_ms / 1000.0 + 10, "within the connect timeout (+10 s)");
	if (s1)
		coll_comm_destroy(s1);
	ex[0] = 2;
	ex[1] = 3;
	t0 = now_s();
	ret = coll_comm_shrink(comm, ex, 2, 0, &s2);
	check(!ret && s2 && coll_comm_size(s2) == 2 &&
	      coll_comm_rank(s2) == rank, "shrink to {0, 1}");
	printf("# shrink to {0, 1}: %.1f s%s%s\n", now_s() - t0,
	       ret ? ": " : "", ret ? coll_last_error() : "");
	coll_comm_destroy(comm);
	if (!s2)
		return 1;
	check(coll_comm_parent_uid(s2) != 0, "the shrunk one names its parent");
	check(allreduce_ok(s2, 100001), "allreduce on the shrunk communicator");

	/* 4. grow {0, 1} to 3 with a new process. */
	{
		coll_unique_id id;

		/* Whole or not at all for the reader on the other VM. */
		if (rank == 0)
			check(id_file_write(idfile, &id),
			      "the grown communicator's id written");
		/* Rank 1 gets it over the shrunk communicator. */
		ret = coll_broadcast(&id, &id, sizeof(id), COLL_DTYPE_UINT8, 0,
				     s2);
		check(!ret, "the id broadcast");
		t0 = now_s();
		ret = coll_comm_grow(s2, 3, &id, &g);
		printf("# grow: %d after %.1f s%s%s\n", ret, now_s() - t0,
		       ret ? ": " : "", ret ? coll_last_error() : "");
		check(!ret && g && coll_comm_size(g) == 3 &&
		      coll_comm_rank(g) == rank, "grow to 3");
		if (g) {
			check(coll_comm_parent_uid(g) == coll_comm_uid(s2),
			      "the grown one names its parent");
			check(allreduce_ok(g, 100001), "allreduce on the grown communicator");
			coll_comm_destroy(g);
		}
	}

	/* 5. grow again: the new process dies as it would join. */
	{
		coll_unique_id id;
		coll_comm *g2 = NULL;
		char p[512];

		setenv(COLL_ENV_BOOTSTRAP_TIMEOUT, "8000", 1);
		flag_path(p, sizeof(p), "grow2");
		if (rank == 0)
			check(id_file_write(p, &id),
			      "the second grow's id written");
		ret = coll_broadcast(&id, &id, sizeof(id), COLL_DTYPE_UINT8, 0,
				     s2);
		check(!ret, "the second id broadcast");
		t0 = now_s();
		ret = coll_comm_grow(s2, 3, &id, &g2);
		dt = now_s() - t0;
		printf("# grow with the new rank dead: %d (%s) after %.1f s: %s\n",
		       ret, coll_strerror(ret), dt, ret ? coll_last_error() : "");
		check(ret && !g2, "a grow whose new rank died fails");
		check(dt < 8 + connect_ms / 1000.0 + 10,
		      "within the bootstrap and connect timeouts (+10 s)");
		if (g2)
			coll_comm_destroy(g2);
		check(allreduce_ok(s2, 100001),
		      "the communicator works after the failed grow");
	}

	/* 6. split: rank 1 dies as it would enter it. */
	if (rank == 1) {
		if (fails)
			_exit(1);
		printf("# rank 1 kills itself instead of splitting\n");
		fflush(stdout);
		raise(SIGKILL);
	}
	{
		coll_comm *c = NULL;

		coll_comm_set_timeout(s2, 60000);
		t0 = now_s();
		ret = coll_comm_split(s2, 0, rank, &c);
		dt = now_s() - t0;
		printf("# split with rank 1 dead: %d (%s) after %.1f s: %s\n",
		       ret, coll_strerror(ret), dt, ret ? coll_last_error() : "");
		check(ret && !c, "a split whose other member died fails");
		check(dt < 20, "within 20 s (the operation timeout is 60 s)");
		check(ret && strstr(coll_last_error(), "rank 1 lost"),
		      "its error names rank 1 as lost");
		if (c)
			coll_comm_destroy(c);
	}
	coll_comm_destroy(s2);
	printf("# kcoll-family: rank %d: %d failure(s)\n", rank, fails);
	return fails ? 1 : 0;
}
