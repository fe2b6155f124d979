// SPDX-License-Identifier: MIT
/*
 * Host checks of libcoll's bootstrap (no /dev/kcoll needed):
 *  - unique ids: string round trip, malformed strings, the secret;
 *  - the real TCP bootstrap on 127.0.0.1 among threads: every rank gets
 *    the same full table with the right local indices and uid;
 *  - the root refuses a wrong secret, a taken rank, a different nranks and
 *    garbage, each with a clear error, and the others still complete;
 *  - timeouts: a root that never gets all ranks, a root that is not there;
 *  - a root whose process may not open a descriptor per rank;
 *  - a rank that never reads its table holds up no other rank;
 *  - the launcher environment (KCOLL_RANK/NRANKS with KCOLL_UNIQUE_ID or
 *    KCOLL_ROOT/KCOLL_SECRET, Open MPI's variables);
 *  - the node address from a fake /sys/class/infiniband and KCOLL_IB_ADDR;
 *  - communicator set-up without a device fails cleanly, argument checks.
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "coll.h"
#include "coll_internal.h"
#include "kcoll_hmac.h"
#include "unit.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

struct rank_arg {
	coll_unique_id id;
	int nranks;
	int rank;
	struct kcoll_rank_addr self;
	struct kcoll_rank_addr table[64];	/* nranks at most */
	uint64_t uid;
	int ret;
	char err[256];
	pthread_t th;
};

static void *rank_main(void *p)
{
	struct rank_arg *a = p;

	int ret = coll_bootstrap(&a->id, a->nranks, a->rank, &a->self,
				 a->table, &a->uid);

	snprintf(a->err, sizeof(a->err), "%s", coll_last_error());
	__atomic_store_n(&a->ret, ret, __ATOMIC_RELEASE);
	return NULL;
}

static void rank_setup(struct rank_arg *a, const coll_unique_id *id,
		       int nranks, int rank, const char *ip, uint16_t port)
{
	struct in_addr in;

	memset(a, 0, sizeof(*a));
	a->id = *id;
	a->nranks = nranks;
	a->rank = rank;
	inet_pton(AF_INET, ip, &in);
	coll_addr_from_ipv4(&a->self, in);
	a->self.port = port;
	a->ret = 1;
}

static bool rank_start(struct rank_arg *a)
{
	return UNIT_EQ_INT(pthread_create(&a->th, NULL, rank_main, a), 0);
}

static void rank_join(struct rank_arg *a)
{
	pthread_join(a->th, NULL);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A TCP port nobody listens on (right now). */
static uint16_t free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	uint16_t port = 0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
	    !getsockname(fd, (struct sockaddr *)&sa, &sl))
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Count the open file descriptors (a leak check). */
static int count_fds(void)
{
	int fd, n = 0;

	for (fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static bool new_id(coll_unique_id *id)
{
	int ret = coll_get_unique_id(id);

	if (!UNIT_EQ_INT(ret, 0)) {
		unit_diag("coll_get_unique_id: %s", coll_last_error());
		return false;
	}
	return true;
}

/* Run a whole communicator of @n ranks on @id (serves its root). */
static void run_ranks(const coll_unique_id *id, int n)
{
	struct rank_arg *a = calloc((size_t)n, sizeof(*a));
	int i;

	if (!UNIT_CHECK(a))
		return;
	for (i = 0; i < n; i++) {
		rank_setup(&a[i], id, n, i, "127.0.0.1", 0);
		rank_start(&a[i]);
	}
	for (i = 0; i < n; i++) {
		rank_join(&a[i]);
		if (!UNIT_EQ_INT(a[i].ret, 0))
			unit_diag("rank %d: %s", i, a[i].err);
	}
	free(a);
}

/* ------------------------------------------------------------------ */
/* Unique ids                                                          */
/* ------------------------------------------------------------------ */

/* An error that quotes the one before it keeps it whole. */
static void test_err_chains(void)
{
	UNIT_EQ_INT(coll_err(-EIO, "inner %d", 7), -EIO);
	UNIT_EQ_INT(coll_err(-EINVAL, "outer: %s", coll_last_error()),
		    -EINVAL);
	UNIT_EQ_STR(coll_last_error(), "outer: inner 7");
}

static void test_unique_id_string(void)
{
	char s[COLL_UNIQUE_ID_STRLEN], up[COLL_UNIQUE_ID_STRLEN + 1];
	coll_unique_id id, back, other;
	struct coll_id_fields f;
	uint8_t key[KCOLL_KEY_LEN];
	size_t i;

	if (!new_id(&id))
		return;
	UNIT_EQ_INT(coll_unique_id_to_string(&id, s, sizeof(s)), 0);
	UNIT_EQ_UINT(strlen(s), 2 * COLL_UNIQUE_ID_BYTES);
	UNIT_EQ_INT(coll_unique_id_from_string(&back, s), 0);
	UNIT_CHECK(!memcmp(&id, &back, sizeof(id)));

	/* Upper case parses to the same id. */
	for (i = 0; s[i]; i++)
		up[i] = (char)(s[i] >= 'a' && s[i] <= 'f' ? s[i] - 32 : s[i]);
	up[i] = '\0';
	memset(&back, 0, sizeof(back));
	UNIT_EQ_INT(coll_unique_id_from_string(&back, up), 0);
	UNIT_CHECK(!memcmp(&id, &back, sizeof(id)));

	/* What the id holds. */
	if (UNIT_EQ_INT(coll_id_decode(&id, &f), 0)) {
		UNIT_EQ_UINT(ntohl(f.ip.s_addr), INADDR_LOOPBACK);
		UNIT_CHECK(f.port != 0);
		UNIT_CHECK(f.uid != 0);
		UNIT_EQ_INT(coll_unique_id_secret(&id, key), 0);
		UNIT_CHECK(!memcmp(key, f.secret, KCOLL_KEY_LEN));
	}
	/* Two ids differ in secret and uid. */
	if (new_id(&other)) {
		struct coll_id_fields g;

		UNIT_EQ_INT(coll_id_decode(&other, &g), 0);
		UNIT_CHECK(memcmp(f.secret, g.secret, KCOLL_KEY_LEN));
		UNIT_CHECK(f.uid != g.uid);
		run_ranks(&other, 1);
	}

	/* Malformed strings. */
	UNIT_EQ_INT(coll_unique_id_to_string(&id, s, COLL_UNIQUE_ID_STRLEN - 1),
		    -ENOSPC);
	UNIT_EQ_INT(coll_unique_id_to_string(NULL, s, sizeof(s)), -EINVAL);
	UNIT_EQ_INT(coll_unique_id_to_string(&id, s, sizeof(s)), 0);
	UNIT_EQ_INT(coll_unique_id_from_string(&back, ""), -EINVAL);
	UNIT_EQ_INT(coll_unique_id_from_string(&back, NULL), -EINVAL);
	UNIT_EQ_INT(coll_unique_id_from_string(&back, "00"), -EINVAL);
	s[10] = 'g';
	UNIT_EQ_INT(coll_unique_id_from_string(&back, s), -EINVAL);
	UNIT_EQ_INT(coll_unique_id_to_string(&id, s, sizeof(s)), 0);
	s[0] = s[0] == '0' ? '1' : '0';		/* breaks the magic */
	UNIT_EQ_INT(coll_unique_id_from_string(&back, s), -EINVAL);
	UNIT_EQ_INT(coll_unique_id_to_string(&id, s, sizeof(s)), 0);
	s[2 * COLL_UNIQUE_ID_BYTES - 1] = '1';	/* a non-zero spare byte */
	UNIT_EQ_INT(coll_unique_id_from_string(&back, s), -EINVAL);
	strcat(up, "0");			/* one digit too many */
	UNIT_EQ_INT(coll_unique_id_from_string(&back, up), -EINVAL);
	memset(&back, 0, sizeof(back));
	UNIT_EQ_INT(coll_unique_id_secret(&back, key), -EINVAL);

	run_ranks(&id, 1);
}

static void test_unique_id_from_root(void)
{
	static const char secret[] = "00112233445566778899aabbccddeeff";
	uint8_t key[KCOLL_KEY_LEN];
	struct coll_id_fields f;
	coll_unique_id id;

	UNIT_EQ_INT(coll_unique_id_from_root(&id, "10.9.0.1:29500", secret), 0);
	if (UNIT_EQ_INT(coll_id_decode(&id, &f), 0)) {
		UNIT_EQ_UINT(ntohl(f.ip.s_addr), 0x0a090001);
		UNIT_EQ_UINT(f.port, 29500);
		UNIT_EQ_UINT(f.uid, 0);
	}
	UNIT_EQ_INT(coll_unique_id_secret(&id, key), 0);
	UNIT_EQ_UINT(key[0], 0x00);
	UNIT_EQ_UINT(key[15], 0xff);
	UNIT_EQ_INT(coll_unique_id_from_root(&id, "localhost:1", secret), 0);
	UNIT_EQ_INT(coll_unique_id_from_root(&id, "10.9.0.1", secret), -EINVAL);
	UNIT_EQ_INT(coll_unique_id_from_root(&id, "10.9.0.1:0", secret), -EINVAL);
	UNIT_EQ_INT(coll_unique_id_from_root(&id, "10.9.0.1:65536", secret),
		    -EINVAL);
	UNIT_EQ_INT(coll_unique_id_from_root(&id, ":80", secret), -EINVAL);
	UNIT_EQ_INT(coll_unique_id_from_root(&id, "10.9.0.1:80", "0011"),
		    -EINVAL);
	UNIT_EQ_INT(coll_unique_id_from_root(&id, "10.9.0.1:80",
		    "00112233445566778899aabbccddeefg"), -EINVAL);
	UNIT_CHECK(strstr(coll_last_error(), "32 hex digits") != NULL);
}

/* ------------------------------------------------------------------ */
/* The bootstrap                                                       */
/* ------------------------------------------------------------------ */

static void test_bootstrap_table(void)
{
	/* Ranks 0, 2, 4 on one node, 1 and 3 on another. */
	static const char *const ip[] = {
		"10.0.0.1", "10.0.0.2", "10.0.0.1", "10.0.0.2", "10.0.0.1"
	};
	static const uint16_t want_li[] = { 0, 0, 1, 1, 2 };
	struct coll_id_fields f;
	struct rank_arg a[5];
	coll_unique_id id;
	int fds0 = count_fds(), i, j;

	if (!new_id(&id))
		return;
	UNIT_EQ_INT(coll_id_decode(&id, &f), 0);
	for (i = 0; i < 5; i++) {
		rank_setup(&a[i], &id, 5, i, ip[i], (uint16_t)(i == 3 ? 4791 : 0));
		a[i].self.local_index = 77;	/* ignored */
	}
	/* Start them in a scrambled order. */
	for (i = 4; i >= 0; i -= 2)
		rank_start(&a[i]);
	for (i = 1; i < 5; i += 2)
		rank_start(&a[i]);
	for (i = 0; i < 5; i++)
		rank_join(&a[i]);

	for (i = 0; i < 5; i++) {
		if (!UNIT_EQ_INT(a[i].ret, 0)) {
			unit_diag("rank %d: %s", i, a[i].err);
			continue;
		}
		UNIT_EQ_UINT(a[i].uid, f.uid);
		UNIT_CHECK(!memcmp(a[i].table, a[0].table,
				   5 * sizeof(a[0].table[0])));
	}
	for (j = 0; j < 5 && !a[0].ret; j++) {
		const struct kcoll_rank_addr *e = &a[0].table[j];
		struct in_addr in;
		char buf[INET_ADDRSTRLEN];

		UNIT_CHECK(coll_addr_to_ipv4(e, &in));
		inet_ntop(AF_INET, &in, buf, sizeof(buf));
		UNIT_EQ_STR(buf, ip[j]);
		UNIT_EQ_UINT(e->addr[10], 0xff);
		UNIT_EQ_UINT(e->addr[11], 0xff);
		UNIT_EQ_UINT(e->local_index, want_li[j]);
		UNIT_EQ_UINT(e->port, j == 3 ? 4791 : 0);
		UNIT_EQ_UINT(e->resv, 0);
	}
	/* Give the root a moment to close its side, then no fd is left. */
	for (i = 0; i < 100 && count_fds() != fds0; i++)
		usleep(10000);
	UNIT_EQ_INT(count_fds(), fds0);
}

static void test_bootstrap_wrong_secret(void)
{
	struct coll_id_fields f;
	struct rank_arg a[5], bad, bad2;
	coll_unique_id id, wrong;
	int i;

	if (!new_id(&id))
		return;
	UNIT_EQ_INT(coll_id_decode(&id, &f), 0);
	f.secret[7] ^= 0x40;
	coll_id_encode(&wrong, &f);

	/* A wrong secret first, alone: refused at once. */
	rank_setup(&bad, &wrong, 5, 1, "127.0.0.1", 0);
	rank_start(&bad);
	rank_join(&bad);
	/* Its refusal is signed with the root's secret, which it cannot
	 * check: it says so instead of trusting the reason. */
	UNIT_EQ_INT(bad.ret, -EACCES);
	UNIT_CHECK(strstr(bad.err, "did not prove the secret") != NULL);
	unit_diag("refused as expected: %s", bad.err);

	/*
	 * Then the real ranks, with another intruder among them: it claims
	 * the one rank still missing, while the root is certain to be
	 * listening (once every rank is in, the root stops listening and a
	 * late intruder can only time out: that is not what this checks).
	 */
	rank_setup(&bad2, &wrong, 5, 4, "127.0.0.1", 0);
	for (i = 0; i < 5; i++)
		rank_setup(&a[i], &id, 5, i, "127.0.0.1", 0);
	for (i = 0; i < 4; i++)
		rank_start(&a[i]);
	rank_start(&bad2);
	rank_join(&bad2);
	if (!UNIT_EQ_INT(bad2.ret, -EACCES))
		unit_diag("intruder: %s", bad2.err);
	UNIT_CHECK(strstr(bad2.err, "did not prove the secret") != NULL);
	rank_start(&a[4]);
	for (i = 0; i < 5; i++) {
		rank_join(&a[i]);
		if (!UNIT_EQ_INT(a[i].ret, 0))
			unit_diag("rank %d: %s", i, a[i].err);
		else
			UNIT_EQ_UINT(a[i].table[i].local_index, i);
	}
}

static void test_bootstrap_refusals(void)
{
	struct rank_arg r0, dup, mism, r1, *waiting;
	coll_unique_id id;
	int i, a, b;

	if (!new_id(&id))
		return;
	/* Two claim rank 0: whichever comes second is refused at once, the
	 * first joins and waits for rank 1. */
	rank_setup(&r0, &id, 2, 0, "127.0.0.1", 0);
	rank_setup(&dup, &id, 2, 0, "127.0.0.1", 0);
	rank_start(&r0);
	rank_start(&dup);
	for (i = 0; i < 1000; i++) {
		a = __atomic_load_n(&r0.ret, __ATOMIC_ACQUIRE);
		b = __atomic_load_n(&dup.ret, __ATOMIC_ACQUIRE);
		if (a != 1 || b != 1)
			break;
		usleep(10000);
	}
	UNIT_CHECK(a == -EEXIST || b == -EEXIST);
	waiting = a == -EEXIST ? &dup : &r0;
	rank_join(a == -EEXIST ? &r0 : &dup);
	UNIT_CHECK(strstr(a == -EEXIST ? r0.err : dup.err,
			  "rank 0 already joined") != NULL);
	/* A different nranks is refused. */
	rank_setup(&mism, &id, 3, 1, "127.0.0.1", 0);
	rank_main(&mism);
	UNIT_EQ_INT(mism.ret, -EINVAL);
	UNIT_CHECK(strstr(mism.err, "nranks 3 differs from 2") != NULL);
	unit_diag("refused as expected: %s", mism.err);

	/* Garbage and a silent connection that goes away do no harm. */
	{
		struct coll_id_fields f;
		struct sockaddr_in sa = { .sin_family = AF_INET };
		uint8_t junk[96], reply[96 + 32], chal[24];
		int fd;

		UNIT_EQ_INT(coll_id_decode(&id, &f), 0);
		sa.sin_addr = f.ip;
		sa.sin_port = htons(f.port);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (UNIT_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0)) {
			UNIT_EQ_INT(recv(fd, chal, sizeof(chal), MSG_WAITALL), 24);
			memset(junk, 'x', sizeof(junk));
			UNIT_EQ_INT(write(fd, junk, sizeof(junk)), 96);
			/* The refusal comes back: status -EPROTO, unsigned
			 * (the root signs nothing for a HELLO it could not
			 * verify: the mac is zeros). */
			UNIT_EQ_INT(recv(fd, reply, sizeof(reply), MSG_WAITALL),
				    96 + 32);
			UNIT_EQ_INT((int32_t)ntohl(*(uint32_t *)(reply + 4)), -EPROTO);
			for (i = 96; i < 96 + 32; i++)
				UNIT_EQ_UINT(reply[i], 0);
		}
		close(fd);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		UNIT_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		close(fd);
	}

	/* Rank 1 completes the communicator. */
	rank_setup(&r1, &id, 2, 1, "127.0.0.1", 0);
	rank_start(&r1);
	rank_join(&r1);
	rank_join(waiting);
	UNIT_EQ_INT(waiting->ret, 0);
	UNIT_EQ_INT(r1.ret, 0);
	UNIT_CHECK(!memcmp(waiting->table, r1.table, 2 * sizeof(r1.table[0])));
	UNIT_EQ_UINT(r1.table[1].local_index, 1);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

static uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

/*
 * A HELLO as coll_bootstrap() sends it (see the protocol in bootstrap.c),
 * after the root's challenge (24 bytes) on @fd: 0, or -1 if none came.
 */
static int make_hello(int fd, uint8_t *h, const struct coll_id_fields *f,
		      int rank, int nranks)
{
	static const char tag[] = "kcoll bootstrap hello";
	uint8_t chal[24];
	const void *parts[] = { tag, chal + 8, h };
	const size_t lens[] = { sizeof(tag), 16, 64 };

	if (recv(fd, chal, sizeof(chal), MSG_WAITALL) != sizeof(chal))
		return -1;
	memset(h, 0, 96);
	put_be32(h, 0x4b434248);		/* "KCBH" */
	put_be32(h + 4, 2);
	memset(h + 8, 0x5a, 16);		/* nonce_c */
	put_be32(h + 24, (uint32_t)(f->uid >> 32));
	put_be32(h + 28, (uint32_t)f->uid);
	put_be32(h + 32, (uint32_t)rank);
	put_be32(h + 36, (uint32_t)nranks);
	h[50] = h[51] = 0xff;			/* ::ffff:127.0.0.1 */
	h[52] = 127;
	h[55] = 1;
	kh_hmac_sha256(f->secret, KCOLL_KEY_LEN, parts, lens, 3, h + 64);
	return 0;
}

/*
 * A stranger without the secret learns nothing of the job from its
 * refusal (nranks 0, no uid), and strangers knocking make one line on
 * the root's stderr a second, not one each. Until 2026-12-05 the refusal
 * carried the job's nranks and each wrote its own line.
 */
static void test_bootstrap_stranger_learns_nothing(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct coll_id_fields f, bad;
	uint8_t hello[96], reply[96 + 32];
	char log[4096], path[] = "/tmp/kcoll-unit-XXXXXX";
	struct rank_arg a[3];
	coll_unique_id id;
	int i, k, lines = 0, saved, tmp;
	double t0;
	ssize_t n;

	if (!new_id(&id) || !UNIT_EQ_INT(coll_id_decode(&id, &f), 0))
		return;
	bad = f;
	bad.secret[3] ^= 0x10;
	sa.sin_addr = f.ip;
	sa.sin_port = htons(f.port);
	for (i = 0; i < 3; i++)
		rank_setup(&a[i], &id, 3, i, "127.0.0.1", 0);
	rank_start(&a[0]);		/* the root now knows nranks 3 */
	usleep(200000);
	tmp = mkstemp(path);
	if (!UNIT_CHECK(tmp >= 0))
		goto ranks;
	unlink(path);
	fflush(stderr);
	saved = dup(2);
	dup2(tmp, 2);
	t0 = now_s();
	for (k = 0; k < 10; k++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (!UNIT_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0) ||
		    !UNIT_EQ_INT(make_hello(fd, hello, &bad, 1, 3), 0) ||
		    !UNIT_EQ_INT(write(fd, hello, sizeof(hello)), 96)) {
			close(fd);
			break;
		}
		n = recv(fd, reply, sizeof(reply), MSG_WAITALL);
		close(fd);
		if (!UNIT_EQ_INT((int)n, (int)sizeof(reply)))
			break;
		UNIT_EQ_UINT(ntohl(*(uint32_t *)reply), 0x4b434252);	/* "KCBR" */
		UNIT_EQ_INT((int32_t)ntohl(*(uint32_t *)(reply + 4)), -EACCES);
		UNIT_EQ_UINT(ntohl(*(uint32_t *)(reply + 16)), 0);	/* nranks */
		UNIT_EQ_UINT(ntohl(*(uint32_t *)(reply + 8)) |
			     ntohl(*(uint32_t *)(reply + 12)), 0);	/* uid */
	}
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(tmp, log, sizeof(log) - 1, 0);
	close(tmp);
	log[n > 0 ? n : 0] = 0;
	for (i = 0; log[i]; i++)
		lines += log[i] == '\n';
	/* One line a second at most: ten refusals in well under a second
	 * make one or two (more only on a machine slow enough to take
	 * seconds over them). */
	if (!UNIT_CHECK(lines >= 1 && lines <= 2 + (int)(now_s() - t0)))
		unit_diag("root's stderr:\n%s", log);
	UNIT_CHECK(strstr(log, "wrong secret") != NULL);
ranks:
	rank_start(&a[1]);
	rank_start(&a[2]);
	for (i = 0; i < 3; i++) {
		rank_join(&a[i]);
		if (!UNIT_EQ_INT(a[i].ret, 0))
			unit_diag("rank %d: %s", i, a[i].err);
	}
}

/*
 * Regression: a HELLO completing while an older connection still has a
 * partial one pending behind it in the root's table (the root used to
 * parse the moved entry's bytes).
 */
static void test_bootstrap_partial_hellos(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint8_t hello[96], hello_p[96], reply[96];
	struct coll_id_fields f;
	struct rank_arg r1;
	coll_unique_id id;
	int a, p, i;

	if (!new_id(&id) || !UNIT_EQ_INT(coll_id_decode(&id, &f), 0))
		return;
	sa.sin_addr = f.ip;
	sa.sin_port = htons(f.port);
	a = socket(AF_INET, SOCK_STREAM, 0);
	p = socket(AF_INET, SOCK_STREAM, 0);
	if (!UNIT_EQ_INT(connect(a, (struct sockaddr *)&sa, sizeof(sa)), 0) ||
	    !UNIT_EQ_INT(connect(p, (struct sockaddr *)&sa, sizeof(sa)), 0))
		goto out;
	usleep(50000);			/* both accepted: [a, p] */
	if (!UNIT_EQ_INT(make_hello(a, hello, &f, 0, 2), 0) ||
	    !UNIT_EQ_INT(make_hello(p, hello_p, &f, 0, 2), 0))
		goto out;
	UNIT_EQ_INT(write(p, hello_p, 10), 10);	/* p stays partial */
	usleep(50000);
	UNIT_EQ_INT(write(a, hello, sizeof(hello)), 96);
	usleep(50000);
	/* Rank 1 completes the communicator; a (rank 0) gets the table. */
	rank_setup(&r1, &id, 2, 1, "127.0.0.1", 0);
	rank_main(&r1);
	if (!UNIT_EQ_INT(r1.ret, 0))
		unit_diag("%s", r1.err);
	i = (int)recv(a, reply, sizeof(reply), MSG_WAITALL);
	if (UNIT_EQ_INT(i, 96))
		UNIT_EQ_INT((int32_t)ntohl(*(uint32_t *)(reply + 4)), 0);
out:
	close(a);
	close(p);
}

/* ---- the root's flood guard, its proof, its lifetime ---- */

/* The bootstrap's SHA-256 and HMAC: FIPS 180-4 and RFC 4231 vectors. */
static void test_bootstrap_hmac(void)
{
	UNIT_EQ_INT(kcoll_hmac_selftest(), 0);
}

/* A listening socket on 127.0.0.1 (a stand-in root): its fd, *@port. */
static int fake_listen(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(fd, 8) || getsockname(fd, (struct sockaddr *)&sa, &sl)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

struct fake_root {
	int lfd;
	int drop_first;		/* close the first connection unread */
	int vanish;		/* then close the listening socket too */
	uint8_t key[KCOLL_KEY_LEN];	/* what it signs its reply with */
	uint8_t ip[4];		/* the one entry of its table */
	uint8_t hello[96];	/* what the rank sent */
	int accepted;
};

/* A root of one rank, speaking protocol version 2. */
static void *fake_root_main(void *arg)
{
	static const char tag[] = "kcoll bootstrap reply";
	struct fake_root *fr = arg;
	uint8_t chal[24] = { 'K', 'C', 'B', 'C', 0, 0, 0, 2 };
	uint8_t rep[96 + 24], digest[32], mac[32];
	const void *parts[] = { tag, fr->hello + 8, digest };
	const size_t lens[] = { sizeof(tag), 16, 32 };
	struct kh_sha256 h;
	int fd;

	memset(chal + 8, 0x33, 16);
	for (;;) {
		fd = accept(fr->lfd, NULL, NULL);
		if (fd < 0)
			return NULL;
		fr->accepted++;
		if (write(fd, chal, sizeof(chal)) != sizeof(chal) ||
		    fr->drop_first-- > 0) {
			close(fd);
			if (fr->vanish) {
				shutdown(fr->lfd, SHUT_RDWR);
				return NULL;
			}
			continue;
		}
		break;
	}
	if (recv(fd, fr->hello, sizeof(fr->hello), MSG_WAITALL) != 96) {
		close(fd);
		return NULL;
	}
	memset(rep, 0, sizeof(rep));
	put_be32(rep, 0x4b434252);		/* "KCBR", status 0 */
	memcpy(rep + 8, fr->hello + 24, 8);	/* its uid */
	put_be32(rep + 16, 1);
	rep[96 + 10] = rep[96 + 11] = 0xff;
	memcpy(rep + 96 + 12, fr->ip, 4);
	kh_sha256_init(&h);
	kh_sha256_update(&h, rep, sizeof(rep));
	kh_sha256_final(&h, digest);
	kh_hmac_sha256(fr->key, KCOLL_KEY_LEN, parts, lens, 3, mac);
	if (write(fd, rep, sizeof(rep)) == sizeof(rep))
		(void)!write(fd, mac, sizeof(mac));
	usleep(100000);
	close(fd);
	return NULL;
}

/* coll_bootstrap() of rank 0 of 1 against @fr, the id's secret @secret. */
static int fake_bootstrap(struct fake_root *fr, const uint8_t *secret,
			  struct kcoll_rank_addr *table, char *err, size_t elen)
{
	struct coll_id_fields f = { .uid = 0x1234 };
	struct kcoll_rank_addr self;
	coll_unique_id id;
	pthread_t th;
	uint16_t port;
	int ret;

	fr->lfd = fake_listen(&port);
	if (fr->lfd < 0)
		return -999;
	f.ip.s_addr = htonl(INADDR_LOOPBACK);
	f.port = port;
	memcpy(f.secret, secret, KCOLL_KEY_LEN);
	coll_id_encode(&id, &f);
	coll_addr_from_ipv4(&self, f.ip);
	pthread_create(&th, NULL, fake_root_main, fr);
	ret = coll_bootstrap(&id, 1, 0, &self, table, NULL);
	snprintf(err, elen, "%s", coll_last_error());
	shutdown(fr->lfd, SHUT_RDWR);
	pthread_join(th, NULL);
	close(fr->lfd);
	return ret;
}

/*
 * A root that drops a rank's connection before reading its HELLO (as the
 * real one drops its oldest pending connection when strangers flood it)
 * forgot the rank: the rank says it again on a new connection, until its
 * deadline. Until 2026-12-05 it gave up with "closed the connection".
 */
static void test_bootstrap_dropped_pending_retries(void)
{
	struct fake_root fr = { .drop_first = 1, .ip = { 10, 0, 0, 7 } };
	struct kcoll_rank_addr table[1];
	uint8_t secret[KCOLL_KEY_LEN];
	char err[256];
	int ret;

	memset(secret, 0x42, sizeof(secret));
	memcpy(fr.key, secret, sizeof(secret));
	ret = fake_bootstrap(&fr, secret, table, err, sizeof(err));
	if (!UNIT_EQ_INT(ret, 0))
		unit_diag("%s", err);
	UNIT_EQ_INT(fr.accepted, 2);
	UNIT_EQ_UINT(table[0].addr[15], 7);
}

/* A root that dropped us and then went away: the rank fails at once
 * (one reconnection refused), not after its whole deadline. */
static void test_bootstrap_root_gone_after_drop(void)
{
	struct fake_root fr = { .drop_first = 1, .vanish = 1 };
	struct kcoll_rank_addr table[1];
	uint8_t secret[KCOLL_KEY_LEN];
	uint64_t t0 = coll_now_ms();
	char err[256];
	int ret;

	memset(secret, 0x42, sizeof(secret));
	ret = fake_bootstrap(&fr, secret, table, err, sizeof(err));
	UNIT_EQ_INT(ret, -ECONNRESET);
	UNIT_CHECK(coll_now_ms() - t0 < 10000);
	unit_diag("as expected: %s", err);
}

/*
 * Whoever answers at the root's address without the secret (a local user
 * who took the port first, anyone on the path) learns nothing and is not
 * believed: the HELLO carries a proof of the secret, not the secret, and a
 * table whose proof does not verify is refused. Until 2026-12-05 the HELLO
 * carried the secret itself, which is also the kernel communicator's key,
 * and any well-formed table was used.
 */
static void test_bootstrap_root_must_prove_the_secret(void)
{
	struct fake_root fr = { .ip = { 6, 6, 6, 6 } };
	struct kcoll_rank_addr table[1];
	uint8_t secret[KCOLL_KEY_LEN];
	char err[256];
	int ret;

	memset(secret, 0x42, sizeof(secret));
	memset(fr.key, 0x24, sizeof(fr.key));	/* not the secret */
	memset(table, 0, sizeof(table));
	ret = fake_bootstrap(&fr, secret, table, err, sizeof(err));
	UNIT_EQ_INT(ret, -EACCES);
	UNIT_CHECK(strstr(err, "did not prove the secret") != NULL);
	UNIT_CHECK(!memmem(fr.hello, sizeof(fr.hello), secret, sizeof(secret)));
	UNIT_EQ_UINT(table[0].addr[12], 0);
	unit_diag("refused as expected: %s", err);
}

/* Is @fd still open at the root's end (its challenge read, nothing more)? */
static bool still_open(int fd)
{
	uint8_t b[32];
	ssize_t n;

	while ((n = recv(fd, b, sizeof(b), MSG_DONTWAIT)) > 0)
		;
	return n < 0 && errno == EAGAIN;
}

/*
 * The root keeps 64 connections that have not sent their HELLO; the 65th
 * makes the one that came first go, whichever it is. Until 2026-12-05 it
 * dropped whatever sat in the first slot, which after one drop is the
 * newest: a rank's connection went as soon as two more came.
 */
static void test_bootstrap_evicts_oldest(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct coll_id_fields f;
	coll_unique_id id;
	int s[67], i, n = 0;

	if (!new_id(&id) || !UNIT_EQ_INT(coll_id_decode(&id, &f), 0))
		return;
	sa.sin_addr = f.ip;
	sa.sin_port = htons(f.port);
	for (i = 0; i < 67; i++) {
		s[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (connect(s[i], (struct sockaddr *)&sa, sizeof(sa)))
			break;
		n++;
		usleep(i < 64 ? 2000 : 50000);
	}
	if (UNIT_EQ_INT(n, 67)) {
		usleep(100000);
		for (i = 0; i < 3; i++)
			UNIT_CHECK(!still_open(s[i]));
		for (i = 3; i < 67; i++)
			if (!UNIT_CHECK(still_open(s[i])))
				unit_diag("connection %d was dropped", i);
	}
	for (i = 0; i < n; i++)
		close(s[i]);
	/* The root is still there for the real ranks. */
	run_ranks(&id, 2);
}

/*
 * Progress buys the root time, a rank that leaves and joins again does
 * not: one with the secret rejoining rank 0 every 200 ms does not keep a
 * root with a 300 ms timeout alive (until 2026-12-05 every join moved the
 * deadline).
 */
static void test_bootstrap_root_lifetime(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct coll_id_fields f;
	coll_unique_id id;
	uint8_t hello[96];
	int i, fd, joins = 0;

	setenv(COLL_ENV_BOOTSTRAP_TIMEOUT, "300", 1);
	if (!new_id(&id) || !UNIT_EQ_INT(coll_id_decode(&id, &f), 0))
		goto out;
	sa.sin_addr = f.ip;
	sa.sin_port = htons(f.port);
	for (i = 0; i < 20; i++) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			close(fd);
			break;
		}
		if (!make_hello(fd, hello, &f, 0, 2) &&
		    write(fd, hello, sizeof(hello)) == sizeof(hello))
			joins++;
		usleep(200000);
		close(fd);
	}
	unit_diag("root gone after %d joins", joins);
	UNIT_CHECK(i < 20);
out:
	unsetenv(COLL_ENV_BOOTSTRAP_TIMEOUT);
}

/* A rank that gave up (timed out) may come back and join again. */
static void test_bootstrap_rejoin(void)
{
	struct rank_arg r0, r1;
	coll_unique_id id;

	if (!new_id(&id))
		return;
	setenv(COLL_ENV_BOOTSTRAP_TIMEOUT, "300", 1);
	rank_setup(&r0, &id, 2, 0, "127.0.0.1", 0);
	rank_main(&r0);
	UNIT_EQ_INT(r0.ret, -ETIMEDOUT);
	UNIT_CHECK(strstr(r0.err, "no table from root") != NULL);
	unsetenv(COLL_ENV_BOOTSTRAP_TIMEOUT);
	/* The root forgot rank 0 when its connection closed. */
	rank_setup(&r0, &id, 2, 0, "127.0.0.1", 0);
	rank_setup(&r1, &id, 2, 1, "127.0.0.1", 0);
	rank_start(&r0);
	rank_start(&r1);
	rank_join(&r0);
	rank_join(&r1);
	if (!UNIT_EQ_INT(r0.ret, 0))
		unit_diag("%s", r0.err);
	if (!UNIT_EQ_INT(r1.ret, 0))
		unit_diag("%s", r1.err);
}

static void test_bootstrap_timeouts(void)
{
	static const char secret[] = "000102030405060708090a0b0c0d0e0f";
	struct rank_arg r;
	coll_unique_id id;
	char root[32];
	double t0;

	/* Nobody listens: retries, then -ETIMEDOUT. */
	snprintf(root, sizeof(root), "127.0.0.1:%u", free_port());
	UNIT_EQ_INT(coll_unique_id_from_root(&id, root, secret), 0);
	setenv(COLL_ENV_BOOTSTRAP_TIMEOUT, "400", 1);
	rank_setup(&r, &id, 2, 1, "127.0.0.1", 0);
	t0 = now_s();
	rank_main(&r);
	UNIT_EQ_INT(r.ret, -ETIMEDOUT);
	UNIT_CHECK(now_s() - t0 >= 0.35 && now_s() - t0 < 5);
	UNIT_CHECK(strstr(r.err, "unreachable") != NULL);
	unit_diag("as expected: %s", r.err);

	/* A bad timeout value is reported. */
	setenv(COLL_ENV_BOOTSTRAP_TIMEOUT, "soon", 1);
	rank_main(&r);
	UNIT_EQ_INT(r.ret, -EINVAL);
	UNIT_CHECK(strstr(r.err, COLL_ENV_BOOTSTRAP_TIMEOUT) != NULL);
	unsetenv(COLL_ENV_BOOTSTRAP_TIMEOUT);

	/* Argument checks. */
	UNIT_EQ_INT(coll_bootstrap(&id, 0, 0, &r.self, r.table, NULL), -EINVAL);
	UNIT_EQ_INT(coll_bootstrap(&id, 2, 2, &r.self, r.table, NULL), -EINVAL);
	UNIT_EQ_INT(coll_bootstrap(&id, 2, -1, &r.self, r.table, NULL), -EINVAL);
	UNIT_EQ_INT(coll_bootstrap(&id, KCOLL_MAX_RANKS + 1, 0, &r.self, r.table,
				   NULL), -EINVAL);
	UNIT_EQ_INT(coll_bootstrap(NULL, 2, 0, &r.self, r.table, NULL), -EINVAL);
	memset(&id, 0, sizeof(id));
	UNIT_EQ_INT(coll_bootstrap(&id, 2, 0, &r.self, r.table, NULL), -EINVAL);
}

/* The root of coll_get_unique_id() serves many ranks at once. */
static void test_bootstrap_many(void)
{
	coll_unique_id id;
	int round;

	for (round = 0; round < 3; round++) {
		if (!new_id(&id))
			return;
		run_ranks(&id, 16);
	}
}

/* Ranks @from..@to-1 of @n on @id as threads: how many failed. */
static int some_ranks(const coll_unique_id *id, int n, int from, int to)
{
	bool started[64] = { false };
	struct rank_arg *a;
	int i, bad = 0;

	a = to - from <= 64 ? calloc((size_t)(to - from), sizeof(*a)) : NULL;
	if (!a)
		return to - from;
	for (i = 0; i < to - from; i++) {
		rank_setup(&a[i], id, n, from + i, "127.0.0.1", 0);
		started[i] = rank_start(&a[i]);
	}
	for (i = 0; i < to - from; i++) {
		if (started[i])
			rank_join(&a[i]);
		bad += a[i].ret != 0;
	}
	free(a);
	return bad;
}

#define FD_RANKS	40
#define FD_LIMIT	24

/*
 * The root's process as rank 0, its soft limit on open files FD_LIMIT
 * (and the hard one too if @hard): the unique id goes out through @wfd.
 * Exit code 0 if the outcome is the expected one: the job comes up (the
 * root raised the soft limit), or, with the hard limit short, it fails
 * at its deadline with the root's process using less than half a CPU
 * meanwhile (before 2026-12-06 it spun on the listener: accept failed
 * with EMFILE, and poll woke at once for the queued connection).
 */
static int fd_root_child(int wfd, bool hard)
{
	struct rank_arg r0;
	struct rusage ru0, ru1;
	struct rlimit rl;
	coll_unique_id id;
	double t0, cpu;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 10;
	rl.rlim_cur = FD_LIMIT;
	if (hard)
		rl.rlim_max = FD_LIMIT;
	if (setrlimit(RLIMIT_NOFILE, &rl) || coll_get_unique_id(&id) ||
	    write(wfd, &id, sizeof(id)) != sizeof(id))
		return 11;
	close(wfd);
	rank_setup(&r0, &id, FD_RANKS, 0, "127.0.0.1", 0);
	getrusage(RUSAGE_SELF, &ru0);
	t0 = now_s();
	rank_main(&r0);
	getrusage(RUSAGE_SELF, &ru1);
	cpu = ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec +
	      ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec +
	      (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec +
	       ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) * 1e-6;
	fprintf(stderr, "# root process, hard limit %s: rank 0 %d after %.2f s, %.2f s of CPU\n",
		hard ? "short" : "free", r0.ret, now_s() - t0, cpu);
	if (!hard)
		return r0.ret ? 13 : 0;
	if (!r0.ret)
		return 14;
	return cpu < 0.5 * (now_s() - t0) ? 0 : 15;
}

static void test_bootstrap_fd_limit(void)
{
	int hard;

	setenv(COLL_ENV_BOOTSTRAP_TIMEOUT, "3000", 1);
	for (hard = 0; hard < 2; hard++) {
		coll_unique_id id;
		int p[2], st = 0, bad;
		pid_t pid;

		if (!UNIT_EQ_INT(pipe(p), 0))
			break;
		pid = fork();
		if (!pid) {
			close(p[0]);
			_exit(fd_root_child(p[1], hard));
		}
		close(p[1]);
		if (!UNIT_CHECK(pid > 0) ||
		    !UNIT_EQ_INT((int)read(p[0], &id, sizeof(id)),
				 (int)sizeof(id))) {
			close(p[0]);
			if (pid > 0)
				waitpid(pid, &st, 0);
			break;
		}
		close(p[0]);
		bad = some_ranks(&id, FD_RANKS, 1, FD_RANKS);
		UNIT_EQ_INT(waitpid(pid, &st, 0), pid);
		UNIT_CHECK(WIFEXITED(st));
		if (!UNIT_EQ_INT(WEXITSTATUS(st), 0))
			unit_diag("hard limit %s: the root's process failed check %d",
				  hard ? "short" : "free", WEXITSTATUS(st));
		/* The other ranks: all in, or all told. */
		UNIT_EQ_INT(bad, hard ? FD_RANKS - 1 : 0);
	}
	unsetenv(COLL_ENV_BOOTSTRAP_TIMEOUT);
}

#define SLOW_RANKS	1024

static bool write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	bool ok;

	if (!UNIT_CHECK(f))
		return false;
	ok = fputs(text, f) >= 0;
	return UNIT_CHECK(!fclose(f) && ok);
}

/*
 * In a network namespace of its own with 4 KiB socket buffers, so that
 * the table of SLOW_RANKS ranks (24 KiB) outgrows them as the table of a
 * few thousand ranks does on a real network: all ranks are raw sockets
 * that send a signed HELLO; rank 0 (the first served) never reads. Every
 * other rank must get its whole table well before the bootstrap
 * timeout (20 s). Exit 0 if so, 77 without a namespace, 78 without the
 * descriptors. Until 2026-12-06 rank 1 waited out the timeout behind
 * rank 0.
 */
static int slow_reader_child(void)
{
	const size_t tlen = 96 + SLOW_RANKS * 24 + 32;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct timeval tv = { .tv_sec = 8 };
	struct ifreq ifr = { .ifr_name = "lo" };
	struct coll_id_fields f = { .uid = 0 };
	uint8_t hello[96], *reply = malloc(tlen);
	int *fd = calloc(SLOW_RANKS, sizeof(*fd));
	int i, s, got = 0, one = 1;
	struct rlimit rl;
	double t0, t;

	if (!reply || !fd)
		return 10;
	if (unshare(CLONE_NEWNET))
		return 77;
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr))
		return 11;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr))
		return 11;
	close(s);
	if (!write_file("/proc/sys/net/ipv4/tcp_wmem", "4096 4096 4096") ||
	    !write_file("/proc/sys/net/ipv4/tcp_rmem", "4096 4096 4096"))
		return 12;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_max < 3 * SLOW_RANKS)
		return 78;
	rl.rlim_cur = 3 * SLOW_RANKS;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return 78;
	setenv(COLL_ENV_BOOTSTRAP_TIMEOUT, "20000", 1);
	memset(f.secret, 0x3c, sizeof(f.secret));
	if (coll_root_start(&f))
		return 13;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(f.port);
	for (i = 0; i < SLOW_RANKS; i++) {
		fd[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fd[i] < 0 ||
		    (!i && setsockopt(fd[i], SOL_SOCKET, SO_RCVBUF, &one,
				      sizeof(one))) ||
		    setsockopt(fd[i], SOL_SOCKET, SO_RCVTIMEO, &tv,
			       sizeof(tv)) ||
		    connect(fd[i], (struct sockaddr *)&sa, sizeof(sa)) ||
		    make_hello(fd[i], hello, &f, i, SLOW_RANKS) ||
		    write(fd[i], hello, sizeof(hello)) != sizeof(hello))
			return 14;
	}
	t0 = now_s();
	for (i = 1; i < SLOW_RANKS; i++)
		got += recv(fd[i], reply, tlen, MSG_WAITALL) == (ssize_t)tlen &&
		       !get_be32(reply + 4) &&
		       get_be32(reply + 16) == SLOW_RANKS;
	t = now_s() - t0;
	fprintf(stderr, "# rank 0 never reads: %d of %d other ranks got the whole table in %.2f s\n",
		got, SLOW_RANKS - 1, t);
	return got == SLOW_RANKS - 1 && t < 10 ? 0 : 15;
}

static void test_bootstrap_slow_reader(void)
{
	pid_t pid = fork();
	int st = 0;

	if (!pid)
		_exit(slow_reader_child());
	if (!UNIT_CHECK(pid > 0) || !UNIT_EQ_INT(waitpid(pid, &st, 0), pid) ||
	    !UNIT_CHECK(WIFEXITED(st)))
		return;
	if (WEXITSTATUS(st) == 77 || WEXITSTATUS(st) == 78) {
		unit_diag("SKIP: %s", WEXITSTATUS(st) == 77 ?
			  "no network namespace of its own (needs CAP_SYS_ADMIN)" :
			  "the hard limit on open files is below 3 per rank");
		return;
	}
	if (!UNIT_EQ_INT(WEXITSTATUS(st), 0))
		unit_diag("the child failed check %d", WEXITSTATUS(st));
}

/* ------------------------------------------------------------------ */
/* The launcher environment                                            */
/* ------------------------------------------------------------------ */

static void clear_env(void)
{
	unsetenv(COLL_ENV_RANK);
	unsetenv(COLL_ENV_NRANKS);
	unsetenv(COLL_ENV_UNIQUE_ID);
	unsetenv(COLL_ENV_ROOT);
	unsetenv(COLL_ENV_SECRET);
	unsetenv(COLL_ENV_OMPI_RANK);
	unsetenv(COLL_ENV_OMPI_SIZE);
}

static void test_env(void)
{
	static const char secret[] = "f0e1d2c3b4a5968778695a4b3c2d1e0f";
	coll_unique_id id0, id1, id;
	struct rank_arg a[2];
	char root[32], s[COLL_UNIQUE_ID_STRLEN];
	int rank = -1, n = -1, i;

	clear_env();
	UNIT_EQ_INT(coll_env_unique_id(&id, &rank, &n), -EINVAL);
	UNIT_CHECK(strstr(coll_last_error(), COLL_ENV_RANK) != NULL);

	/* KCOLL_ROOT/KCOLL_SECRET: rank 0 serves the root at that port. */
	snprintf(root, sizeof(root), "127.0.0.1:%u", free_port());
	setenv(COLL_ENV_ROOT, root, 1);
	setenv(COLL_ENV_SECRET, secret, 1);
	setenv(COLL_ENV_NRANKS, "2", 1);
	setenv(COLL_ENV_RANK, "1", 1);
	UNIT_EQ_INT(coll_env_unique_id(&id1, &rank, &n), 0);
	UNIT_EQ_INT(rank, 1);
	UNIT_EQ_INT(n, 2);
	setenv(COLL_ENV_RANK, "0", 1);
	if (!UNIT_EQ_INT(coll_env_unique_id(&id0, &rank, &n), 0))
		unit_diag("%s", coll_last_error());
	UNIT_EQ_INT(rank, 0);
	UNIT_CHECK(!memcmp(&id0, &id1, sizeof(id0)));
	/* The port is taken now. */
	UNIT_EQ_INT(coll_env_unique_id(&id, &rank, &n), -EADDRINUSE);
	for (i = 0; i < 2; i++) {
		rank_setup(&a[i], &id0, 2, i, "127.0.0.1", 0);
		rank_start(&a[i]);
	}
	for (i = 0; i < 2; i++) {
		rank_join(&a[i]);
		if (!UNIT_EQ_INT(a[i].ret, 0))
			unit_diag("rank %d: %s", i, a[i].err);
	}
	/* The root drew a uid and gave it to both. */
	UNIT_CHECK(a[0].uid != 0);
	UNIT_EQ_UINT(a[0].uid, a[1].uid);

	/* Range and syntax checks. */
	setenv(COLL_ENV_RANK, "2", 1);
	UNIT_EQ_INT(coll_env_unique_id(&id, &rank, &n), -EINVAL);
	setenv(COLL_ENV_RANK, "1x", 1);
	UNIT_EQ_INT(coll_env_unique_id(&id, &rank, &n), -EINVAL);
	setenv(COLL_ENV_RANK, "1", 1);
	setenv(COLL_ENV_SECRET, "abc", 1);
	UNIT_EQ_INT(coll_env_unique_id(&id, &rank, &n), -EINVAL);
	UNIT_CHECK(strstr(coll_last_error(), COLL_ENV_SECRET) != NULL);
	unsetenv(COLL_ENV_SECRET);
	UNIT_EQ_INT(coll_env_unique_id(&id, &rank, &n), -EINVAL);

	/* Open MPI's variables stand in for KCOLL_RANK/KCOLL_NRANKS. */
	clear_env();
	setenv(COLL_ENV_OMPI_RANK, "3", 1);
	setenv(COLL_ENV_OMPI_SIZE, "4", 1);
	setenv(COLL_ENV_ROOT, "127.0.0.1:9", 1);
	setenv(COLL_ENV_SECRET, secret, 1);
	UNIT_EQ_INT(coll_env_unique_id(&id, &rank, &n), 0);
	UNIT_EQ_INT(rank, 3);
	UNIT_EQ_INT(n, 4);

	/* KCOLL_UNIQUE_ID wins over KCOLL_ROOT. */
	setenv(COLL_ENV_RANK, "1", 1);
	setenv(COLL_ENV_NRANKS, "2", 1);
	UNIT_EQ_INT(coll_unique_id_to_string(&id0, s, sizeof(s)), 0);
	setenv(COLL_ENV_UNIQUE_ID, s, 1);
	UNIT_EQ_INT(coll_env_unique_id(&id, &rank, &n), 0);
	UNIT_CHECK(!memcmp(&id, &id0, sizeof(id)));
	UNIT_EQ_INT(rank, 1);
	UNIT_EQ_INT(n, 2);
	setenv(COLL_ENV_UNIQUE_ID, "nonsense", 1);
	UNIT_EQ_INT(coll_env_unique_id(&id, &rank, &n), -EINVAL);
	clear_env();
}

/* ------------------------------------------------------------------ */
/* Node address                                                        */
/* ------------------------------------------------------------------ */

static void expect_addr(const struct kcoll_rank_addr *a, const char *ip)
{
	struct in_addr in;
	char buf[INET_ADDRSTRLEN];

	if (!UNIT_CHECK(coll_addr_to_ipv4(a, &in)))
		return;
	inet_ntop(AF_INET, &in, buf, sizeof(buf));
	UNIT_EQ_STR(buf, ip);
	UNIT_EQ_UINT(a->port, 0);
	UNIT_EQ_UINT(a->local_index, 0);
}

static void test_node_addr(void)
{
	char dir[] = "/tmp/kcoll-unit-XXXXXX", p[PATH_MAX], cmd[PATH_MAX + 16];
	struct kcoll_rank_addr a;
	struct in_addr in;
	int ret;

	unsetenv(COLL_ENV_IB_ADDR);
	if (!UNIT_CHECK(mkdtemp(dir)))
		return;
	/* ndevs/0 of the first device (by name) names the netdev. */
	snprintf(p, sizeof(p), "%s/rxe0/ports/1/gid_attrs/ndevs", dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", p);
	UNIT_EQ_INT(system(cmd), 0);
	strcat(p, "/0");
	write_file(p, "lo\n");
	snprintf(p, sizeof(p), "%s/zzz0", dir);	/* sorts after rxe0 */
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/zzz0/parent", dir);
	write_file(p, "nonexistent0\n");
	memset(&a, 0xaa, sizeof(a));
	UNIT_EQ_INT(coll_node_addr_at(dir, &a), 0);
	expect_addr(&a, "127.0.0.1");

	/* Without ndevs: the rxe "parent" attribute. */
	snprintf(cmd, sizeof(cmd), "rm -rf %s/rxe0/ports", dir);
	UNIT_EQ_INT(system(cmd), 0);
	snprintf(p, sizeof(p), "%s/rxe0/parent", dir);
	write_file(p, "lo\n");
	memset(&a, 0, sizeof(a));
	UNIT_EQ_INT(coll_node_addr_at(dir, &a), 0);
	expect_addr(&a, "127.0.0.1");

	/* device/net/<netdev> comes before "parent". */
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/rxe0/device/net/lo", dir);
	UNIT_EQ_INT(system(cmd), 0);
	write_file(p, "nonexistent0\n");
	memset(&a, 0, sizeof(a));
	UNIT_EQ_INT(coll_node_addr_at(dir, &a), 0);
	expect_addr(&a, "127.0.0.1");

	/* KCOLL_IB_ADDR overrides everything. */
	setenv(COLL_ENV_IB_ADDR, "10.1.2.3", 1);
	UNIT_EQ_INT(coll_node_addr_at(dir, &a), 0);
	expect_addr(&a, "10.1.2.3");
	UNIT_EQ_INT(coll_node_addr(&a), 0);
	expect_addr(&a, "10.1.2.3");
	setenv(COLL_ENV_IB_ADDR, "10.1.2", 1);
	UNIT_EQ_INT(coll_node_addr(&a), -EINVAL);
	UNIT_CHECK(strstr(coll_last_error(), COLL_ENV_IB_ADDR) != NULL);
	unsetenv(COLL_ENV_IB_ADDR);

	/* No RDMA device: the first non-loopback address, if any. */
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	UNIT_EQ_INT(system(cmd), 0);
	ret = coll_node_addr_at(dir, &a);
	if (ret == 0) {
		UNIT_CHECK(coll_addr_to_ipv4(&a, &in));
		UNIT_CHECK((ntohl(in.s_addr) >> 24) != 127);
	} else {
		UNIT_EQ_INT(ret, -EADDRNOTAVAIL);
	}
}

/* ------------------------------------------------------------------ */
/* Communicator set-up without a device; argument checks               */
/* ------------------------------------------------------------------ */

static void test_comm_no_device(void)
{
	static const uint8_t key[KCOLL_KEY_LEN];
	struct kcoll_rank_addr table[2];
	coll_comm *c = (coll_comm *)1;
	int fds0 = count_fds();

	memset(table, 0, sizeof(table));
	setenv(COLL_DEVICE_ENV, "/nonexistent/kcoll", 1);
	UNIT_EQ_INT(coll_comm_init_table(&c, 2, 0, table, 1, key), -ENOENT);
	UNIT_CHECK(c == NULL);
	UNIT_CHECK(strstr(coll_last_error(), "module loaded") != NULL);
	setenv(COLL_DEVICE_ENV, "/dev/null", 1);
	UNIT_EQ_INT(coll_comm_init_table(&c, 2, 0, table, 1, key), -ENOTTY);
	UNIT_EQ_INT(coll_comm_init_table(&c, 2, 2, table, 1, key), -EINVAL);
	UNIT_EQ_INT(coll_comm_init_table(&c, 2, 0, table, 0, key), -EINVAL);
	UNIT_EQ_INT(coll_comm_init_table(&c, 2, 0, NULL, 1, key), -EINVAL);
	setenv(COLL_ENV_RING_ENTRIES, "lots", 1);
	UNIT_EQ_INT(coll_comm_init_table(&c, 2, 0, table, 1, key), -EINVAL);
	unsetenv(COLL_ENV_RING_ENTRIES);
	UNIT_EQ_INT(count_fds(), fds0);
	unsetenv(COLL_DEVICE_ENV);
}

static void test_api_args(void)
{
	coll_request *req = (coll_request *)1;
	int done = 5;
	char buf[8] = { 0 };

	UNIT_EQ_INT(coll_allreduce(buf, buf, 1, COLL_DTYPE_INT8, COLL_REDOP_SUM,
				   NULL), -EINVAL);
	UNIT_EQ_INT(coll_iallreduce(buf, buf, 1, COLL_DTYPE_INT8,
				    COLL_REDOP_SUM, NULL, &req), -EINVAL);
	UNIT_EQ_INT(coll_barrier(NULL), -EINVAL);
	UNIT_EQ_INT(coll_send(buf, 1, COLL_DTYPE_INT8, 0, NULL), -EINVAL);
	UNIT_EQ_INT(coll_test(NULL, &done), -EINVAL);
	UNIT_EQ_INT(coll_wait(NULL), -EINVAL);
	coll_request_free(NULL);
	UNIT_EQ_INT(coll_comm_destroy(NULL), 0);
	UNIT_EQ_INT(coll_comm_rank(NULL), -EINVAL);
	UNIT_EQ_INT(coll_comm_size(NULL), -EINVAL);
	UNIT_EQ_INT(coll_comm_fd(NULL), -EINVAL);
	UNIT_EQ_INT(coll_mem_register(NULL, buf, 8, NULL), -EINVAL);
	UNIT_EQ_INT(coll_comm_init_rank(NULL, 1, NULL, 0), -EINVAL);

	/* Groups nest per thread; an unmatched end is an error. */
	UNIT_EQ_INT(coll_group_end(), -EINVAL);
	UNIT_EQ_INT(coll_group_start(), 0);
	UNIT_EQ_INT(coll_group_start(), 0);
	UNIT_EQ_INT(coll_group_end(), 0);
	UNIT_EQ_INT(coll_group_end(), 0);
	UNIT_EQ_INT(coll_group_end(), -EINVAL);
}

static void test_types(void)
{
	int d, o;

	UNIT_EQ_INT(COLL_DTYPE_INT8, KCOLL_DTYPE_INT8);
	UNIT_EQ_INT(COLL_DTYPE_BF16, KCOLL_DTYPE_BF16);
	UNIT_EQ_INT(COLL_DTYPE_FP64, KCOLL_DTYPE_FP64);
	UNIT_EQ_INT(COLL_DTYPE_FP8_E4M3, KCOLL_DTYPE_FP8_E4M3);
	UNIT_EQ_INT(COLL_DTYPE_FP8_E5M2, KCOLL_DTYPE_FP8_E5M2);
	UNIT_EQ_UINT(coll_dtype_size(COLL_DTYPE_FP8_E5M2), 1);
	UNIT_EQ_STR(coll_dtype_name(COLL_DTYPE_FP8_E4M3), "fp8e4m3");
	UNIT_EQ_INT(COLL_DTYPE_LAST + 1, KCOLL_DTYPE_LAST);
	UNIT_EQ_INT(COLL_REDOP_SUM, KCOLL_REDOP_SUM);
	UNIT_EQ_INT(COLL_REDOP_AVG, KCOLL_REDOP_AVG);
	UNIT_EQ_INT(COLL_REDOP_LAST + 1, KCOLL_REDOP_LAST);
	UNIT_EQ_UINT(coll_dtype_size(COLL_DTYPE_FP16), 2);
	UNIT_EQ_UINT(coll_dtype_size(COLL_DTYPE_UINT64), 8);
	UNIT_EQ_UINT(coll_dtype_size((coll_dtype)0), 0);
	UNIT_EQ_UINT(coll_dtype_size((coll_dtype)KCOLL_DTYPE_LAST), 0);
	UNIT_EQ_STR(coll_dtype_name(COLL_DTYPE_BF16), "bf16");
	UNIT_EQ_STR(coll_dtype_name((coll_dtype)99), "?");
	UNIT_EQ_STR(coll_redop_name(COLL_REDOP_AVG), "avg");
	for (d = 0; d <= KCOLL_DTYPE_LAST; d++) {
		for (o = 0; o <= KCOLL_REDOP_LAST; o++) {
			bool fl = (d >= KCOLL_DTYPE_FP16 &&
				   d <= KCOLL_DTYPE_FP64) ||
				  d == KCOLL_DTYPE_FP8_E4M3 ||
				  d == KCOLL_DTYPE_FP8_E5M2;
			bool want = d >= 1 && d < KCOLL_DTYPE_LAST && o >= 1 &&
				    o < KCOLL_REDOP_LAST &&
				    (o != KCOLL_REDOP_AVG || fl);

			UNIT_EQ_INT(coll_redop_valid((coll_dtype)d,
						     (coll_redop)o), want);
		}
	}
	/* The kcoll meanings of a few errors. */
	UNIT_CHECK(strstr(coll_strerror(-EBADMSG), "signature mismatch"));
	UNIT_CHECK(strstr(coll_strerror(-ECONNRESET), "Peer connection lost"));
	UNIT_CHECK(strstr(coll_strerror(-EACCES), "communicator key"));
	UNIT_CHECK(strstr(coll_strerror(-ETIMEDOUT), "timed out"));
}

int main(int argc, char **argv)
{
	unit_init(argc, argv);
	/* Roots advertise the loopback address in this test. */
	setenv(COLL_ENV_BOOTSTRAP_ADDR, "127.0.0.1", 1);
	UNIT_RUN(test_types);
	UNIT_RUN(test_err_chains);
	UNIT_RUN(test_unique_id_string);
	UNIT_RUN(test_unique_id_from_root);
	UNIT_RUN(test_bootstrap_table);
	UNIT_RUN(test_bootstrap_wrong_secret);
	UNIT_RUN(test_bootstrap_refusals);
	UNIT_RUN(test_bootstrap_partial_hellos);
	UNIT_RUN(test_bootstrap_stranger_learns_nothing);
	UNIT_RUN(test_bootstrap_rejoin);
	UNIT_RUN(test_bootstrap_hmac);
	UNIT_RUN(test_bootstrap_dropped_pending_retries);
	UNIT_RUN(test_bootstrap_root_gone_after_drop);
	UNIT_RUN(test_bootstrap_root_must_prove_the_secret);
	UNIT_RUN(test_bootstrap_evicts_oldest);
	UNIT_RUN(test_bootstrap_root_lifetime);
	UNIT_RUN(test_bootstrap_timeouts);
	UNIT_RUN(test_bootstrap_many);
	UNIT_RUN(test_bootstrap_fd_limit);
	UNIT_RUN(test_bootstrap_slow_reader);
	UNIT_RUN(test_env);
	UNIT_RUN(test_node_addr);
	UNIT_RUN(test_comm_no_device);
	UNIT_RUN(test_api_args);
	return unit_done();
}
