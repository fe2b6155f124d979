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
 * With -S the node dies during a split instead (coll_comm_split(): an
 * allgather on the parent, then the child's connections): every rank
 * splits by one color, the victim stops its node 0-150 ms into its own
 * split (in the allgather or while the child connects, as it falls). A
 * survivor's split must end within the operation timeout plus the connect
 * timeout (plus slack): with an error, or with a child that has the dead
 * rank, whose next allreduce must then fail as bounded; then the
 * survivors shrink the parent and check an allreduce on the result.
 *
 * With -G the node dies during a grow instead (coll_comm_grow(): a fresh
 * bootstrap with a new rank, then the grown communicator's connections):
 * rank 0 writes the new id to the file given with -f, where a newcomer
 * process on its node (kcoll-nodedie -g -f IDFILE, started by the
 * scenario) reads it and joins as the last rank; the victim stops its node
 * 0-80 ms into its own grow (in the bootstrap or while the grown
 * communicator connects: under TCG the whole grow takes about 100 ms).
 * KCOLL_NODEDIE_DELAY_MS fixes the delay of -S and -G. Every survivor's grow, and the newcomer's join,
 * must end within the bootstrap timeout plus the connect timeout (plus
 * slack): with an error, or with a grown communicator whose next
 * allreduce must then fail as bounded; then the survivors shrink the
 * parent and check an allreduce on the result.
 *
 * With -R, rank 0 revokes the communicator 1.5 s into the allreduce, the
 * node already dead: the revoke must return at once (the dead node is
 * not waited for) and end rank 0's allreduce at once; the others take
 * the revoke as their own: their allreduce ends at once too
 * (-ECANCELED, the report naming rank 0), without waiting for its
 * writes to the dead node to drain (the drain timeout, at least 10 s,
 * which ended it before revokes were passed on). Then the survivors
 * shrink.
 *
 * With -X (and -R), nobody dies: rank 0 sends its frames for VICTIM's
 * node nowhere ($KCOLL_NODEDIE_CUT: "IP MAC DEV", a MAC nobody has) just
 * before it revokes, so VICTIM can learn of the revoke only from a
 * rank that passes it on, while its own writes to rank 0 go
 * unacknowledged. Every rank's allreduce must still end at once with
 * -ECANCELED, VICTIM's report naming rank 0 (a rank that merely left
 * would be named itself, with -ECONNRESET).
 *
 * Usage: kcoll-nodedie -v VICTIM [-T TIMEOUT_MS] [-s STATUS] [-S | -R |
 *                      -G -f IDFILE]
 *        kcoll-nodedie -g -f IDFILE -T TIMEOUT_MS   (the grow's newcomer)
 *   -v  rank whose node dies
 *   -T  operation timeout (default 10000 ms)
 *   -s  the victim's status file (written "ok" just before it dies)
 *   -S  the node dies during a split
 *   -G  the node dies during a grow (the new id goes to IDFILE)
 *   -R  rank 0 revokes while the node is dead
 *   -X  with -R: VICTIM's node does not die; rank 0 cuts its link to it
 * Prints TAP-like result lines; exit 0 when every check passed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
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

struct death {
	const char *status;
	unsigned int delay_us;
};

static void *die_later(void *arg)
{
	struct death *d = arg;

	usleep(d->delay_us);
	die_now(d->status);
	return NULL;
}

/*
 * The victim: its node stops a while (below @max_us, or
 * KCOLL_NODEDIE_DELAY_MS) after this returns, by then inside its @what.
 * False if it must not die: a check failed before.
 */
static bool die_in(const char *status, unsigned int max_us, const char *what)
{
	static struct death d;
	const char *e = getenv("KCOLL_NODEDIE_DELAY_MS");
	pthread_t th;

	if (fails) {
		printf("Bail out! the victim failed before dying\n");
		return false;
	}
	d.status = status;
	d.delay_us = e ? (unsigned int)atoi(e) * 1000 :
		     (unsigned int)(now_s() * 1e6) % max_us;
	printf("# rank %d: this node stops %u ms into its %s\n", rank,
	       d.delay_us / 1000, what);
	fflush(stdout);
	pthread_create(&th, NULL, die_later, &d);
	return true;
}

/* The survivors carry on without the victim, from what they have: shrink
 * (no bootstrap, ranks renumbered), an allreduce on the result. */
static int shrink_survivors(coll_comm *comm, int victim, unsigned int flags)
{
	int nranks = coll_comm_size(comm), ret;
	coll_comm *comm2 = NULL;
	double t0 = now_s(), dt;

	ret = coll_comm_shrink(comm, &victim, 1, flags, &comm2);
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

/* A call (@what) that returned @ret after @dt s: said, and checked to
 * have ended within @bound s. */
static void ended(const char *what, int ret, double dt, double bound,
		  const char *line)
{
	printf("# rank %d: %s: %d (%s) after %.1f s%s%s\n", rank, what, ret,
	       coll_strerror(ret), dt, ret ? ": " : "",
	       ret ? coll_last_error() : "");
	check(dt < bound, line);
}

/*
 * A communicator (@what: "child", "grown communicator") made before the
 * node fell holds the dead rank: its next operation must say so, within
 * @bound s. @c is freed (aborted).
 */
static void made_fails(coll_comm *c, const char *what,
		       unsigned int timeout_ms, double bound)
{
	char line[128];
	int32_t v = 1;
	double t0;
	int ret;

	coll_comm_set_timeout(c, timeout_ms);
	t0 = now_s();
	ret = coll_allreduce(&v, &v, 1, COLL_DTYPE_INT32, COLL_REDOP_SUM, c);
	t0 = now_s() - t0;
	printf("# rank %d: allreduce on the %s: %d (%s) after %.1f s\n", rank,
	       what, ret, coll_strerror(ret), t0);
	snprintf(line, sizeof(line), "the %s's allreduce failed, bounded",
		 what);
	check(ret && t0 < bound, line);
	coll_comm_abort(c);
}

/* The node dies during a split; the survivors end it bounded and shrink. */
static int split_death(coll_comm *comm, int victim, const char *status,
		       unsigned int timeout_ms)
{
	coll_comm *child = NULL;
	double t0, dt, bound = timeout_ms / 1000.0 + 5 + 20;
	int ret;

	coll_comm_set_timeout(comm, timeout_ms);
	if (rank == victim) {
		/* Somewhere in the allgather or the child's connections. */
		if (!die_in(status, 150000, "split"))
			return 1;
		coll_comm_split(comm, 0, rank, &child);
		pause();
		return 1;
	}
	t0 = now_s();
	ret = coll_comm_split(comm, 0, rank, &child);
	dt = now_s() - t0;
	ended("split", ret, dt, bound, "the split ended within the operation "
	      "and connect timeouts");
	if (!ret)
		made_fails(child, "child", timeout_ms, bound);
	return shrink_survivors(comm, victim, COLL_SHRINK_ABORT);
}

/* The grow's bootstrap: long enough for every live rank, short enough to
 * be the bound when one never arrives. */
#define GROW_BOOTSTRAP_MS	"15000"
#define GROW_BOUND_S(tmo)	(atof(GROW_BOOTSTRAP_MS) / 1000 + (tmo) / 1000.0 + 20)

/* The grow's new rank: joins with the id rank 0 wrote, while a member's
 * node dies; its join must end bounded too. */
static int grow_newcomer(const char *idfile, int nranks,
			 unsigned int timeout_ms)
{
	double t0, dt, bound = GROW_BOUND_S(timeout_ms);
	coll_comm *g = NULL;
	coll_unique_id id;
	int ret;

	rank = nranks - 1;
	ret = id_file_read(idfile, &id, 600);
	check(!ret, "the newcomer read the grown communicator's id");
	if (ret)
		return 1;
	t0 = now_s();
	ret = coll_comm_init_rank(&g, nranks, &id, nranks - 1);
	dt = now_s() - t0;
	ended("join", ret, dt, bound, "the newcomer's join ended within the "
	      "bootstrap and connect timeouts");
	if (!ret)
		made_fails(g, "grown communicator", timeout_ms, bound);
	printf("# kcoll-nodedie: newcomer: %d failure(s)\n", fails);
	return fails ? 1 : 0;
}

/* The node dies during a grow; the survivors end it bounded and shrink. */
static int grow_death(coll_comm *comm, int victim, const char *status,
		      const char *idfile, unsigned int timeout_ms)
{
	int n = coll_comm_size(comm) + 1, ret;
	double t0, dt, bound = GROW_BOUND_S(timeout_ms);
	coll_comm *g = NULL;
	coll_unique_id id;

	memset(&id, 0, sizeof(id));
	/* Whole or not at all for the newcomer. */
	if (rank == 0)
		check(id_file_write(idfile, &id),
		      "the grown communicator's id written");
	ret = coll_broadcast(&id, &id, sizeof(id), COLL_DTYPE_UINT8, 0, comm);
	check(!ret, "the id broadcast on the parent");
	if (ret)
		return 1;
	setenv(COLL_ENV_BOOTSTRAP_TIMEOUT, GROW_BOOTSTRAP_MS, 1);
	if (rank == victim) {
		/* Somewhere in the bootstrap or the connections. */
		if (!die_in(status, 80000, "grow"))
			return 1;
		coll_comm_grow(comm, n, &id, &g);
		pause();
		return 1;
	}
	t0 = now_s();
	ret = coll_comm_grow(comm, n, &id, &g);
	dt = now_s() - t0;
	ended("grow", ret, dt, bound, "the grow ended within the bootstrap "
	      "and connect timeouts");
	if (!ret)
		made_fails(g, "grown communicator", timeout_ms, bound);
	return shrink_survivors(comm, victim, 0);
}

/* The errors of a peer lost (its node dead). */
static bool kcoll_err_lost(int err)
{
	return err == -ECONNRESET || err == -EIO || err == -ETIMEDOUT;
}

/*
 * Send our frames for an IPv4 address to another MAC from now on: @spec
 * is "IP MAC DEV". SIOCSARP on the neighbour entry, not a shell and ip
 * (seconds under TCG: the revoke must follow the cut at once). 0 or -1.
 */
static int cut_link(const char *spec)
{
	unsigned int m[6];
	char ip[32], dev[IFNAMSIZ];
	struct arpreq req;
	struct sockaddr_in *sin = (struct sockaddr_in *)&req.arp_pa;
	int fd, i, ret;

	memset(&req, 0, sizeof(req));
	if (sscanf(spec, "%31s %x:%x:%x:%x:%x:%x %15s", ip, &m[0], &m[1],
		   &m[2], &m[3], &m[4], &m[5], dev) != 8)
		return -1;
	sin->sin_family = AF_INET;
	if (inet_pton(AF_INET, ip, &sin->sin_addr) != 1)
		return -1;
	req.arp_ha.sa_family = ARPHRD_ETHER;
	for (i = 0; i < 6; i++)
		req.arp_ha.sa_data[i] = (char)m[i];
	req.arp_flags = ATF_PERM | ATF_COM;
	snprintf(req.arp_dev, sizeof(req.arp_dev), "%s", dev);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		return -1;
	ret = ioctl(fd, SIOCSARP, &req);
	close(fd);
	return ret ? -1 : 0;
}

int main(int argc, char **argv)
{
	const char *status = NULL, *idfile = NULL;
	int victim = -1, o, ret, newcomer = 0;
	unsigned int timeout_ms = 10000;
	bool in_split = false, revoke = false, in_grow = false, cut = false;
	size_t big = 16u << 20;		/* 64 MiB of int32 */
	coll_comm *comm;
	coll_request *req;
	coll_report rep;
	double t0, dt;
	int32_t *a;

	while ((o = getopt(argc, argv, "v:T:s:SRXGg:f:")) != -1) {
		switch (o) {
		case 'S': in_split = true; break;
		case 'G': in_grow = true; break;
		case 'g': newcomer = atoi(optarg); break;
		case 'f': idfile = optarg; break;
		case 'R': revoke = true; break;
		case 'X': cut = true; break;
		case 'v': victim = atoi(optarg); break;
		case 'T': timeout_ms = strtoul(optarg, NULL, 0); break;
		case 's': status = optarg; break;
		default:
			fprintf(stderr, "usage: kcoll-nodedie -v VICTIM [-T MS] [-s STATUS] [-S | -R [-X] | -G -f IDFILE]\n"
				"       kcoll-nodedie -g NRANKS -f IDFILE [-T MS]\n");
			return 2;
		}
	}
	if ((in_grow || newcomer) && !idfile) {
		fprintf(stderr, "kcoll-nodedie: -G and -g need -f IDFILE\n");
		return 2;
	}
	if (newcomer) {
		setenv(COLL_ENV_BOOTSTRAP_TIMEOUT, GROW_BOOTSTRAP_MS, 1);
		return grow_newcomer(idfile, newcomer, timeout_ms);
	}
	if (victim < 0) {
		fprintf(stderr, "kcoll-nodedie: -v is required\n");
		return 2;
	}
	if (cut && (!revoke || !getenv("KCOLL_NODEDIE_CUT"))) {
		fprintf(stderr, "kcoll-nodedie: -X needs -R and "
			"$KCOLL_NODEDIE_CUT\n");
		return 2;
	}
	ret = coll_comm_init_env(&comm);
	if (ret) {
		printf("Bail out! coll_comm_init_env: %s\n", coll_last_error());
		return 1;
	}
	rank = coll_comm_rank(comm);
	check(allreduce_ok(comm, 100001), "allreduce before the death");
	if (in_split)
		return split_death(comm, victim, status, timeout_ms);
	if (in_grow)
		return grow_death(comm, victim, status, idfile, timeout_ms);
	coll_comm_set_timeout(comm, timeout_ms);

	a = calloc(big, sizeof(*a));
	if (!a || coll_iallreduce(a, a, big, COLL_DTYPE_INT32, COLL_REDOP_SUM,
				  comm, &req)) {
		printf("Bail out! big allreduce not issued: %s\n",
		       coll_last_error());
		return 1;
	}
	if (rank == victim && !cut) {
		usleep(500 * 1000);
		if (fails) {
			printf("Bail out! the victim failed before dying\n");
			return 1;
		}
		die_now(status);
		return 1;
	}
	t0 = now_s();
	if (revoke && rank == 0) {
		double tr;

		/* The node is gone (or cut off) by now; nobody has timed
		 * out. */
		usleep(1500 * 1000);
		tr = now_s();
		/* From now on VICTIM hears nothing from us. */
		if (cut)
			check(cut_link(getenv("KCOLL_NODEDIE_CUT")) == 0,
			      "the link to the victim's node cut");
		ret = coll_comm_revoke(comm);
		tr = now_s() - tr;
		printf("# rank %d: revoke: %d after %.2f s\n", rank, ret, tr);
		check(!ret && tr < 5, "the revoke returned at once, a peer's "
		      "node dead");
	}
	ret = coll_wait(req);
	dt = now_s() - t0;
	coll_request_free(req);
	printf("# rank %d: big allreduce: %d (%s) after %.1f s: %s\n", rank, ret,
	       coll_strerror(ret), dt, ret ? coll_last_error() : "");
	free(a);
	if (revoke) {
		/*
		 * Ended by the revoke, everywhere at once: the revoker
		 * closes every connection, and so does every rank it
		 * reaches, so nobody waits for its writes to the dead
		 * node to drain (the drain timeout: at least 10 s after
		 * the revoke, 1.5 s in).
		 */
		/*
		 * -ECANCELED, the report naming rank 0. A survivor whose
		 * NIC gave up on the dead node first (RC retries: about
		 * 0.5 s with the test bed's ack_timeout) failed already,
		 * naming that node, and keeps that report: also at once.
		 */
		check(ret == -ECANCELED ||
		      (!cut && rank != 0 && kcoll_err_lost(ret)),
		      "the allreduce ended by the revoke (-ECANCELED) or "
		      "the node's loss");
		if (cut && rank == victim)
			printf("# rank %d: heard of the revoke only through "
			       "another rank\n", rank);
		if (rank == 0) {
			check(dt < 5, "the revoker's allreduce ended at once");
		} else {
			check(dt < 1.5 + 6, "the others' ended at once too, "
			      "not after the drain timeout");
			int err = ret;

			ret = coll_comm_get_report(comm, &rep);
			check(!ret && (err == -ECANCELED ?
				       rep.error == -ECANCELED &&
				       rep.reason == COLL_REPORT_ABORTED &&
				       rep.peer == 0 :
				       rep.peer == victim),
			      "the report names rank 0, which revoked (or "
			      "the dead node's rank, lost first)");
		}
		if (cut) {
			coll_comm_destroy(comm);
			printf("# kcoll-nodedie: rank %d: %d failure(s)\n",
			       rank, fails);
			return fails ? 1 : 0;
		}
		return shrink_survivors(comm, victim, COLL_SHRINK_ABORT);
	}
	check(ret == -ECONNRESET || ret == -ETIMEDOUT || ret == -EIO,
	      "the allreduce failed with a connection error or a timeout");
	check(dt < timeout_ms / 1000.0 + 20, "within the timeout (+20 s)");
	ret = coll_comm_get_report(comm, &rep);
	check(!ret && rep.error &&
	      (rep.peer == victim ||
	       (rep.nmissing && rep.missing[0] == (uint32_t)victim)),
	      "the report names the dead node's rank");

	/* The survivors carry on without the victim, from what they have. */
	return shrink_survivors(comm, victim, 0);
}
