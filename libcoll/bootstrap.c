// SPDX-License-Identifier: MIT
/*
 * libcoll bootstrap: unique ids, the TCP bootstrap root and its clients,
 * the node's RDMA address, and the launcher environment. See coll.h,
 * section 3, for the API and docs/LIBCOLL.md for the protocol.
 *
 * Protocol version 2 (all integers big-endian, fixed-size messages):
 *   root -> rank  CHALLENGE magic "KCBC", version, nonce_r[16] (random),
 *                         as soon as the connection is accepted
 *   rank -> root  HELLO   magic "KCBH", version, nonce_c[16] (random),
 *                         uid, rank, nranks, addr[16], port, 6 zero bytes,
 *                         mac[32] = HMAC-SHA256(secret, "kcoll bootstrap
 *                         hello" NUL, nonce_r, the 64 bytes before mac)
 *   root -> rank  REPLY   magic "KCBR", status (0 or -errno), uid, nranks,
 *                         message[72]; with status 0 it is followed by
 *                         nranks ENTRY records: addr[16], port,
 *                         local_index, 4 zero bytes; then mac[32] =
 *                         HMAC-SHA256(secret, "kcoll bootstrap reply" NUL,
 *                         nonce_c, SHA-256(REPLY and the ENTRYs))
 * The secret never goes on the wire: each side proves it over the other's
 * nonce, so neither a stranger listening at the root's address nor one
 * reading the traffic learns it, and a rank uses nothing of a reply it
 * cannot verify. The root refuses a HELLO at once (REPLY with an error,
 * then close) and answers the accepted ones all together once every rank
 * has joined. Version 1 sent the secret itself.
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "coll_internal.h"
#include "kcoll_hmac.h"

/* ------------------------------------------------------------------ */
/* Errors and small helpers                                            */
/* ------------------------------------------------------------------ */

static __thread char coll_errbuf[256];

/* Formatted aside first: a caller may pass coll_last_error() itself
 * ("...: %s"), which vsnprintf() must not write over while reading. */
int coll_err(int err, const char *fmt, ...)
{
	char msg[sizeof(coll_errbuf)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	memcpy(coll_errbuf, msg, sizeof(msg));
	return err;
}

const char *coll_last_error(void)
{
	return coll_errbuf;
}

uint64_t coll_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int coll_env_uint(const char *name, uint64_t def, uint64_t max, uint64_t *val)
{
	const char *s = getenv(name);
	unsigned long long v;
	char *end;

	if (!s || !*s) {
		*val = def;
		return 0;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || *s == '-' || v > max)
		return coll_err(-EINVAL, "%s=\"%s\" is not a number <= %" PRIu64,
				name, s, max);
	*val = v;
	return 0;
}

static int coll_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int coll_hex_decode(const char *s, uint8_t *out, size_t n)
{
	size_t i;

	if (!s || strlen(s) != 2 * n)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		int hi = coll_hexval(s[2 * i]), lo = coll_hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

void coll_addr_from_ipv4(struct kcoll_rank_addr *a, struct in_addr ip)
{
	memset(a, 0, sizeof(*a));
	a->addr[10] = 0xff;
	a->addr[11] = 0xff;
	memcpy(&a->addr[12], &ip.s_addr, 4);
}

bool coll_addr_to_ipv4(const struct kcoll_rank_addr *a, struct in_addr *ip)
{
	static const uint8_t prefix[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};

	if (memcmp(a->addr, prefix, sizeof(prefix)))
		return false;
	memcpy(&ip->s_addr, &a->addr[12], 4);
	return true;
}

/* Big-endian field access in wire messages and ids. */
static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, (uint16_t)v);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, v >> 32);
	put32(p + 4, (uint32_t)v);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static int coll_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return coll_err(-errno, "getrandom: %s",
					coll_strerror(-errno));
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static uint64_t coll_bootstrap_timeout_ms(void)
{
	uint64_t v;

	/* A malformed value falls back to the default rather than failing
	 * deep inside a root thread; the clients report it. */
	if (coll_env_uint(COLL_ENV_BOOTSTRAP_TIMEOUT,
			  COLL_BOOTSTRAP_TIMEOUT_MS_DEFAULT, UINT32_MAX, &v) ||
	    !v)
		v = COLL_BOOTSTRAP_TIMEOUT_MS_DEFAULT;
	return v;
}

/* Resolve "host" to an IPv4 address. */
static int coll_resolve_ipv4(const char *host, struct in_addr *ip)
{
	struct addrinfo hints, *res = NULL;
	int ret;

	if (inet_pton(AF_INET, host, ip) == 1)
		return 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	ret = getaddrinfo(host, NULL, &hints, &res);
	if (ret || !res)
		return coll_err(-EADDRNOTAVAIL, "cannot resolve \"%s\": %s",
				host, gai_strerror(ret));
	*ip = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
	freeaddrinfo(res);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Unique ids                                                          */
/* ------------------------------------------------------------------ */

/*
 * Encoding: "KCID", version 1, 3 zero bytes, IPv4 address (4 bytes,
 * network order), port (2), 2 zero bytes, secret (16), uid (8); the rest
 * of the 128 bytes zero.
 */
#define COLL_ID_MAGIC	0x4b434944U	/* "KCID" */
#define COLL_ID_VERSION	1

enum {
	ID_OFF_MAGIC	= 0,
	ID_OFF_VERSION	= 4,
	ID_OFF_IP	= 8,
	ID_OFF_PORT	= 12,
	ID_OFF_SECRET	= 16,
	ID_OFF_UID	= 32,
	ID_LEN		= 40,
};

void coll_id_encode(coll_unique_id *id, const struct coll_id_fields *f)
{
	uint8_t *p = id->internal;

	memset(id, 0, sizeof(*id));
	put32(p + ID_OFF_MAGIC, COLL_ID_MAGIC);
	p[ID_OFF_VERSION] = COLL_ID_VERSION;
	memcpy(p + ID_OFF_IP, &f->ip.s_addr, 4);
	put16(p + ID_OFF_PORT, f->port);
	memcpy(p + ID_OFF_SECRET, f->secret, KCOLL_KEY_LEN);
	put64(p + ID_OFF_UID, f->uid);
}

int coll_id_decode(const coll_unique_id *id, struct coll_id_fields *f)
{
	const uint8_t *p = id->internal;
	size_t i;

	if (get32(p + ID_OFF_MAGIC) != COLL_ID_MAGIC ||
	    p[ID_OFF_VERSION] != COLL_ID_VERSION)
		return -EINVAL;
	for (i = ID_OFF_VERSION + 1; i < ID_OFF_IP; i++)
		if (p[i])
			return -EINVAL;
	if (p[ID_OFF_PORT + 2] || p[ID_OFF_PORT + 3])
		return -EINVAL;
	for (i = ID_LEN; i < COLL_UNIQUE_ID_BYTES; i++)
		if (p[i])
			return -EINVAL;
	memset(f, 0, sizeof(*f));
	memcpy(&f->ip.s_addr, p + ID_OFF_IP, 4);
	f->port = get16(p + ID_OFF_PORT);
	memcpy(f->secret, p + ID_OFF_SECRET, KCOLL_KEY_LEN);
	f->uid = get64(p + ID_OFF_UID);
	if (!f->port)
		return -EINVAL;
	return 0;
}

int coll_unique_id_to_string(const coll_unique_id *id, char *buf, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	if (!id || !buf)
		return -EINVAL;
	if (len < COLL_UNIQUE_ID_STRLEN)
		return -ENOSPC;
	for (i = 0; i < COLL_UNIQUE_ID_BYTES; i++) {
		buf[2 * i] = digits[id->internal[i] >> 4];
		buf[2 * i + 1] = digits[id->internal[i] & 15];
	}
	buf[2 * COLL_UNIQUE_ID_BYTES] = '\0';
	return 0;
}

int coll_unique_id_from_string(coll_unique_id *id, const char *s)
{
	struct coll_id_fields f;
	coll_unique_id tmp;

	if (!id || !s)
		return coll_err(-EINVAL, "unique id: NULL argument");
	if (coll_hex_decode(s, tmp.internal, sizeof(tmp.internal)) ||
	    coll_id_decode(&tmp, &f))
		return coll_err(-EINVAL,
				"unique id: not %d hex digits of a kcoll id",
				2 * COLL_UNIQUE_ID_BYTES);
	*id = tmp;
	return 0;
}

int coll_unique_id_secret(const coll_unique_id *id, uint8_t key[KCOLL_KEY_LEN])
{
	struct coll_id_fields f;

	if (!id || !key || coll_id_decode(id, &f))
		return coll_err(-EINVAL, "unique id: invalid");
	memcpy(key, f.secret, KCOLL_KEY_LEN);
	return 0;
}

/* Parse "host:port". */
static int coll_parse_hostport(const char *s, struct in_addr *ip,
			       uint16_t *port)
{
	const char *colon = s ? strrchr(s, ':') : NULL;
	char host[256];
	unsigned long p;
	char *end;
	int ret;

	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host))
		return coll_err(-EINVAL, "\"%s\" is not host:port",
				s ? s : "(null)");
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno || *end || colon[1] == '\0' || colon[1] == '-' || !p ||
	    p > 65535)
		return coll_err(-EINVAL, "\"%s\": bad port", s);
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	ret = coll_resolve_ipv4(host, ip);
	if (ret)
		return ret;
	*port = (uint16_t)p;
	return 0;
}

int coll_unique_id_from_root(coll_unique_id *id, const char *root,
			     const char *secret_hex)
{
	struct coll_id_fields f;
	int ret;

	if (!id || !root || !secret_hex)
		return coll_err(-EINVAL, "unique id: NULL argument");
	memset(&f, 0, sizeof(f));
	ret = coll_parse_hostport(root, &f.ip, &f.port);
	if (ret)
		return ret;
	if (coll_hex_decode(secret_hex, f.secret, KCOLL_KEY_LEN))
		return coll_err(-EINVAL, "the secret must be exactly %d hex digits",
				2 * KCOLL_KEY_LEN);
	coll_id_encode(id, &f);
	return 0;
}

/* The address a root started by coll_get_unique_id() advertises. */
static int coll_root_advertised(struct in_addr *ip)
{
	const char *env = getenv(COLL_ENV_BOOTSTRAP_ADDR);
	struct kcoll_rank_addr a;

	if (env && *env)
		return coll_resolve_ipv4(env, ip);
	if (!coll_node_addr(&a) && coll_addr_to_ipv4(&a, ip))
		return 0;
	/* No network at all: a single-node communicator still works. */
	ip->s_addr = htonl(INADDR_LOOPBACK);
	return 0;
}

int coll_get_unique_id(coll_unique_id *id)
{
	struct coll_id_fields f;
	int ret;

	if (!id)
		return coll_err(-EINVAL, "coll_get_unique_id: NULL id");
	memset(&f, 0, sizeof(f));
	ret = coll_random(f.secret, sizeof(f.secret));
	if (ret)
		return ret;
	do {
		ret = coll_random(&f.uid, sizeof(f.uid));
		if (ret)
			return ret;
	} while (!f.uid);
	ret = coll_root_advertised(&f.ip);
	if (ret)
		return ret;
	ret = coll_root_start(&f);
	if (ret)
		return ret;
	coll_id_encode(id, &f);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Socket I/O with a deadline                                          */
/* ------------------------------------------------------------------ */

#define CHAL_MAGIC	0x4b434243U	/* "KCBC" */
#define HELLO_MAGIC	0x4b434248U	/* "KCBH" */
#define REPLY_MAGIC	0x4b434252U	/* "KCBR" */
#define PROTO_VERSION	2

enum {
	NONCE_LEN	= 16,
	MAC_LEN		= 32,
	CHAL_LEN	= 8 + NONCE_LEN,
	HELLO_MAC_OFF	= 64,
	HELLO_LEN	= HELLO_MAC_OFF + MAC_LEN,
	REPLY_LEN	= 96,
	REPLY_MSG_OFF	= 24,
	REPLY_MSG_LEN	= REPLY_LEN - REPLY_MSG_OFF,
	ENTRY_LEN	= 24,
};

static const char hello_tag[] = "kcoll bootstrap hello";
static const char reply_tag[] = "kcoll bootstrap reply";

/* A HELLO's mac, over the root's nonce and the HELLO up to the mac. */
static void hello_mac(const uint8_t *secret, const uint8_t *nonce_r,
		      const uint8_t *hello, uint8_t out[MAC_LEN])
{
	const void *parts[] = { hello_tag, nonce_r, hello };
	const size_t lens[] = { sizeof(hello_tag), NONCE_LEN, HELLO_MAC_OFF };

	kh_hmac_sha256(secret, KCOLL_KEY_LEN, parts, lens, 3, out);
}

/* A REPLY's mac, over the rank's nonce and the digest of the REPLY and
 * its entries (@digest: SHA-256 of them, computed once for every rank). */
static void reply_mac(const uint8_t *secret, const uint8_t *nonce_c,
		      const uint8_t digest[32], uint8_t out[MAC_LEN])
{
	const void *parts[] = { reply_tag, nonce_c, digest };
	const size_t lens[] = { sizeof(reply_tag), NONCE_LEN, 32 };

	kh_hmac_sha256(secret, KCOLL_KEY_LEN, parts, lens, 3, out);
}

static void reply_digest(const uint8_t *reply, const uint8_t *entries,
			 size_t elen, uint8_t out[32])
{
	struct kh_sha256 h;

	kh_sha256_init(&h);
	kh_sha256_update(&h, reply, REPLY_LEN);
	if (elen)
		kh_sha256_update(&h, entries, elen);
	kh_sha256_final(&h, out);
}

/* Wait for @events on @fd until @deadline (ms, CLOCK_MONOTONIC). */
static int io_wait(int fd, short events, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		uint64_t now = coll_now_ms();
		int n;

		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)(deadline - now > INT_MAX ?
				      INT_MAX : deadline - now));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int io_send_all(int fd, const void *buf, size_t len, uint64_t deadline)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return errno == EPIPE ? -ECONNRESET : -errno;
		n = io_wait(fd, POLLOUT, deadline);
		if (n)
			return (int)n;
	}
	return 0;
}

/* -ECONNRESET on end of file. */
static int io_recv_all(int fd, void *buf, size_t len, uint64_t deadline)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		n = io_wait(fd, POLLIN, deadline);
		if (n)
			return (int)n;
	}
	return 0;
}

static void fmt_sockaddr(const struct sockaddr_in *sa, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN];

	if (!inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip)))
		snprintf(ip, sizeof(ip), "?");
	snprintf(buf, len, "%s:%u", ip, ntohs(sa->sin_port));
}

/* ------------------------------------------------------------------ */
/* The root                                                            */
/* ------------------------------------------------------------------ */

/* Connections that have not finished their HELLO yet. */
#define ROOT_MAX_PENDING	64
/* Time a connection gets to send its HELLO. */
#define ROOT_HELLO_MS		10000U
/* Time a refusal or the table gets to go out. */
#define ROOT_SEND_MS		5000U
/* Out of descriptors: how long the listener is left alone. */
#define ROOT_EMFILE_MS		20U

struct root_pending {
	int fd;
	uint64_t deadline;
	size_t got;
	uint8_t nonce[NONCE_LEN];	/* the CHALLENGE's */
	uint8_t buf[HELLO_LEN];
	char peer[32];
};

struct coll_root {
	int lfd;
	uint16_t port;
	uint8_t secret[KCOLL_KEY_LEN];
	uint64_t uid;
	uint64_t timeout_ms;
	uint64_t deadline;		/* give up then */
	uint32_t nranks;		/* 0 until the first rank joined */
	uint32_t joined;
	uint32_t most_joined;		/* the deadline moves only past it */
	int *fds;			/* per rank, -1 until it joined */
	uint8_t (*nonces)[NONCE_LEN];	/* per rank: its HELLO's nonce_c */
	struct kcoll_rank_addr *table;
	struct root_pending pend[ROOT_MAX_PENDING];
	unsigned int npend;
	uint64_t quiet_until;		/* strangers' refusals: one line a second */
	uint64_t quieted;		/* not logged since the last line */
	uint64_t lfd_pause;		/* out of descriptors: no accept till then */
	bool emfile;			/* that happened */
};

static void root_free(struct coll_root *r)
{
	uint32_t i;

	for (i = 0; i < r->npend; i++)
		close(r->pend[i].fd);
	for (i = 0; r->fds && i < r->nranks; i++)
		if (r->fds[i] >= 0)
			close(r->fds[i]);
	if (r->lfd >= 0)
		close(r->lfd);
	free(r->fds);
	free(r->table);
	free(r->nonces);
	free(r);
}

static void reply_header(uint8_t *b, int status, uint64_t uid, uint32_t nranks,
			 const char *msg)
{
	memset(b, 0, REPLY_LEN);
	put32(b, REPLY_MAGIC);
	put32(b + 4, (uint32_t)status);
	put64(b + 8, uid);
	put32(b + 16, nranks);
	if (msg)
		snprintf((char *)b + REPLY_MSG_OFF, REPLY_MSG_LEN, "%s", msg);
}

/* Send a REPLY of @len bytes (the header and any entries), its mac for
 * @nonce_c after it. */
static int root_send_reply(struct coll_root *r, int fd, const uint8_t *b,
			   size_t len, const uint8_t *nonce_c,
			   const uint8_t digest[32], uint64_t deadline)
{
	uint8_t mac[MAC_LEN];
	int ret;

	reply_mac(r->secret, nonce_c, digest, mac);
	ret = io_send_all(fd, b, len, deadline);
	return ret ?: io_send_all(fd, mac, sizeof(mac), deadline);
}

/*
 * Send an error REPLY (best effort) and close. Signed over the rank's
 * nonce @nonce_c if its HELLO verified: the rank can trust the reason.
 * Not if it did not (@nonce_c NULL: the mac is zeros): else anyone could
 * have the root sign a refusal for a nonce of its choice, a real rank's
 * relayed, and make that rank believe its secret wrong. Such a refusal
 * tells nothing of the job (its nranks is 0), and its line on stderr
 * comes at most once a second, with a count of those it stands for:
 * strangers knocking must not flood the job's log.
 */
static void root_refuse(struct coll_root *r, int fd, const char *peer,
			const uint8_t *nonce_c, int status, const char *msg)
{
	uint64_t now = coll_now_ms(), deadline = now + ROOT_SEND_MS;
	uint8_t b[REPLY_LEN], digest[32], zeros[MAC_LEN] = { 0 };
	char more[64] = "";

	reply_header(b, status, 0, nonce_c ? r->nranks : 0, msg);
	if (nonce_c) {
		reply_digest(b, NULL, 0, digest);
		root_send_reply(r, fd, b, sizeof(b), nonce_c, digest, deadline);
	} else if (!io_send_all(fd, b, sizeof(b), deadline))
		io_send_all(fd, zeros, sizeof(zeros), deadline);
	close(fd);
	if (!nonce_c && now < r->quiet_until) {
		r->quieted++;
		return;
	}
	if (!nonce_c)
		r->quiet_until = now + 1000;
	if (r->quieted)
		snprintf(more, sizeof(more),
			 " (and %" PRIu64 " more unverified hellos not shown)",
			 r->quieted);
	fprintf(stderr, "kcoll: bootstrap root :%u refused %s: %s%s\n",
		r->port, peer, msg, more);
	r->quieted = 0;
}

static void root_drop_pending(struct coll_root *r, unsigned int i, bool do_close)
{
	if (do_close)
		close(r->pend[i].fd);
	r->pend[i] = r->pend[--r->npend];
}

/* Constant time: the comparison does not tell how much was right. */
static bool mac_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t d = 0;
	int i;

	for (i = 0; i < MAC_LEN; i++)
		d |= a[i] ^ b[i];
	return !d;
}

/* A complete HELLO arrived on pending connection @i. */
/*
 * The root holds a descriptor per joined rank and up to ROOT_MAX_PENDING
 * connections besides what the process has open. With nranks known, if
 * that does not fit under the soft RLIMIT_NOFILE (1024 by default: a job
 * of 1000 ranks), raise it toward the hard limit, by what is missing and
 * 64 more. Only then: a soft limit above 1024 breaks select() in a
 * process that uses it. If even the hard limit is short, accepts fail
 * with EMFILE and root_accept() says so.
 */
static void root_fit_fds(struct coll_root *r)
{
	rlim_t used = 0, need;
	struct rlimit rl;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	/* Open descriptors: the entries but "." and "..". */
	while (d && (e = readdir(d)))
		used += e->d_name[0] != '.';
	if (d)
		closedir(d);
	need = used + r->nranks + ROOT_MAX_PENDING;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= need || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need + 64 ?
		      need + 64 : rl.rlim_max;
	if (!setrlimit(RLIMIT_NOFILE, &rl))
		fprintf(stderr, "kcoll: bootstrap root :%u: %u ranks: raised the soft limit on open files (ulimit -n) to %llu\n",
			r->port, r->nranks, (unsigned long long)rl.rlim_cur);
}

static void root_hello(struct coll_root *r, unsigned int i)
{
	struct root_pending *p = &r->pend[i];
	uint8_t h[HELLO_LEN], nonce_r[NONCE_LEN], mac[MAC_LEN];
	uint32_t rank, nranks;
	uint64_t uid;
	int fd = p->fd;
	char msg[REPLY_MSG_LEN], who[64];
	bool verified = true;
	int status = 0;

	/* Copy out first: dropping the entry moves another one into it. */
	memcpy(h, p->buf, sizeof(h));
	memcpy(nonce_r, p->nonce, sizeof(nonce_r));
	rank = get32(h + 32);
	nranks = get32(h + 36);
	uid = get64(h + 24);
	if (get32(h) == HELLO_MAGIC)
		snprintf(who, sizeof(who), "%s (rank %u)", p->peer, rank);
	else
		snprintf(who, sizeof(who), "%s", p->peer);
	root_drop_pending(r, i, false);

	if (get32(h) != HELLO_MAGIC || get32(h + 4) != PROTO_VERSION) {
		verified = false;
		status = -EPROTO;
		snprintf(msg, sizeof(msg), "malformed hello (not a kcoll rank)");
	} else if (hello_mac(r->secret, nonce_r, h, mac),
		   !mac_equal(mac, h + HELLO_MAC_OFF)) {
		verified = false;
		status = -EACCES;
		snprintf(msg, sizeof(msg), "wrong secret");
	} else if (uid && uid != r->uid) {
		status = -EINVAL;
		snprintf(msg, sizeof(msg),
			 "communicator uid %016" PRIx64 " is not this root's",
			 uid);
	} else if (!nranks || nranks > KCOLL_MAX_RANKS) {
		status = -EINVAL;
		snprintf(msg, sizeof(msg), "nranks %u out of range", nranks);
	} else if (r->nranks && nranks != r->nranks) {
		status = -EINVAL;
		snprintf(msg, sizeof(msg), "nranks %u differs from %u given "
			 "by the first rank", nranks, r->nranks);
	} else if (rank >= nranks) {
		status = -ERANGE;
		snprintf(msg, sizeof(msg), "rank %u out of range (nranks %u)",
			 rank, nranks);
	} else if (r->nranks && r->fds[rank] >= 0) {
		status = -EEXIST;
		snprintf(msg, sizeof(msg), "rank %u already joined", rank);
	}
	if (!status && !r->nranks) {
		uint32_t k;

		r->fds = malloc(nranks * sizeof(*r->fds));
		r->table = calloc(nranks, sizeof(*r->table));
		r->nonces = calloc(nranks, sizeof(*r->nonces));
		if (!r->fds || !r->table || !r->nonces) {
			free(r->fds);
			free(r->table);
			free(r->nonces);
			r->fds = NULL;
			r->table = NULL;
			r->nonces = NULL;
			status = -ENOMEM;
			snprintf(msg, sizeof(msg), "root out of memory");
		} else {
			for (k = 0; k < nranks; k++)
				r->fds[k] = -1;
			r->nranks = nranks;
			root_fit_fds(r);
		}
	}
	if (status) {
		root_refuse(r, fd, who, verified ? h + 8 : NULL, status, msg);
		return;
	}
	r->fds[rank] = fd;
	memcpy(r->nonces[rank], h + 8, NONCE_LEN);
	memset(&r->table[rank], 0, sizeof(r->table[rank]));
	memcpy(r->table[rank].addr, h + 40, 16);
	r->table[rank].port = get16(h + 56);
	r->joined++;
	/* Progress buys time; a rank leaving and joining again does not
	 * (a peer with the key could keep the root alive for ever). */
	if (r->joined > r->most_joined) {
		r->most_joined = r->joined;
		r->deadline = coll_now_ms() + r->timeout_ms;
	}
}

/* Rank @rank's connection closed (or sent junk) before the table went out:
 * forget it, so that it may join again. */
static void root_leave(struct coll_root *r, uint32_t rank)
{
	close(r->fds[rank]);
	r->fds[rank] = -1;
	r->joined--;
}

/*
 * At most one pass's worth of connections (ROOT_MAX_PENDING): under a
 * flood the loop still gets back to the HELLOs and the deadlines, and a
 * connection accepted in this pass is never the oldest one evicted.
 */
static void root_accept(struct coll_root *r)
{
	unsigned int n;

	for (n = 0; n < ROOT_MAX_PENDING; n++) {
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		struct root_pending *p;
		int fd;

		fd = accept4(r->lfd, (struct sockaddr *)&sa, &sl,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			/* The queued connection would wake poll at once,
			 * for ever: leave the listener alone a while (a
			 * pending one's deadline frees a descriptor). */
			if (!r->emfile)
				fprintf(stderr, "kcoll: bootstrap root :%u: out of file descriptors with %u of %u ranks joined (ulimit -n)\n",
					r->port, r->joined, r->nranks);
			r->emfile = true;
			r->lfd_pause = coll_now_ms() + ROOT_EMFILE_MS;
			return;
		}
		if (fd < 0)
			return;		/* EAGAIN, or a transient error */
		if (r->npend == ROOT_MAX_PENDING) {
			/* Flooded: the oldest silent connection goes (the
			 * one that came first: drops reorder the array). */
			unsigned int o = 0, j;

			for (j = 1; j < r->npend; j++)
				if (r->pend[j].deadline < r->pend[o].deadline)
					o = j;
			root_drop_pending(r, o, true);
		}
		p = &r->pend[r->npend];
		p->fd = fd;
		p->got = 0;
		p->deadline = coll_now_ms() +
			      (r->timeout_ms < ROOT_HELLO_MS ? r->timeout_ms :
			       ROOT_HELLO_MS);
		fmt_sockaddr(&sa, p->peer, sizeof(p->peer));
		/* 24 bytes into a fresh socket's buffer: at once, or the
		 * connection is no good. */
		{
			uint8_t c[CHAL_LEN];

			put32(c, CHAL_MAGIC);
			put32(c + 4, PROTO_VERSION);
			if (coll_random(p->nonce, NONCE_LEN)) {
				close(fd);
				continue;
			}
			memcpy(c + 8, p->nonce, NONCE_LEN);
			if (send(fd, c, sizeof(c), MSG_NOSIGNAL | MSG_DONTWAIT) !=
			    (ssize_t)sizeof(c)) {
				close(fd);
				continue;
			}
		}
		r->npend++;
	}
}


/* Each rank's index among the ranks before it at the same address (its
 * node): the table's local_index, as the bootstrap sends it and as a
 * child communicator's table (family.c) recomputes it. */
void coll_table_local_index(struct kcoll_rank_addr *t, uint32_t n)
{
	uint32_t i, j;

	for (i = 0; i < n; i++) {
		uint16_t li = 0;

		for (j = 0; j < i; j++)
			li += !memcmp(t[j].addr, t[i].addr, sizeof(t[i].addr));
		t[i].local_index = li;
	}
}

/* What root_send_each() keeps per rank. */
struct root_out {
	size_t off;			/* of the REPLY and its mac, sent */
	uint8_t mac[MAC_LEN];
};

/* Send rank @i what is left of @b (@len bytes) and its mac: true if it
 * is done (all sent, or its connection gone: it finds out itself). */
static bool root_send_some(struct coll_root *r, uint32_t i, const uint8_t *b,
			   size_t len, struct root_out *o)
{
	for (;;) {
		bool head = o->off < len;
		const uint8_t *p = head ? b + o->off : o->mac + (o->off - len);
		size_t want = head ? len - o->off : len + MAC_LEN - o->off;
		ssize_t n;

		if (!want)
			return true;
		n = send(r->fds[i], p, want, MSG_NOSIGNAL);
		if (n > 0) {
			o->off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
	}
}

/*
 * Send every rank the same REPLY @b (@len bytes) and its own mac, to all
 * at once until @deadline. A rank that does not read (stopped, or holding
 * the key and hostile) fills its own socket and holds up no one else.
 * Until 2026-12-06 the ranks were served one after another: once the
 * table outgrew the socket buffers (a few thousand ranks, or small
 * buffers), such a rank held up every rank after it for the whole
 * bootstrap timeout. False if out of memory (nothing was sent).
 */
static bool root_send_each(struct coll_root *r, const uint8_t *b, size_t len,
			   const uint8_t digest[32], uint64_t deadline)
{
	struct root_out *o = calloc(r->nranks, sizeof(*o));
	struct pollfd *p = calloc(r->nranks, sizeof(*p));
	uint32_t *who = calloc(r->nranks, sizeof(*who));
	bool ok = o && p && who;
	uint32_t i, n = 0, k;

	for (i = 0; ok && i < r->nranks; i++) {
		if (r->fds[i] < 0)
			continue;
		reply_mac(r->secret, r->nonces[i], digest, o[i].mac);
		if (!root_send_some(r, i, b, len, &o[i]))
			who[n++] = i;
	}
	while (n) {
		uint64_t now = coll_now_ms();
		int ret;

		if (now >= deadline)
			break;
		for (k = 0; k < n; k++)
			p[k] = (struct pollfd){ .fd = r->fds[who[k]],
						.events = POLLOUT };
		ret = poll(p, n, (int)(deadline - now > INT_MAX ?
				       INT_MAX : deadline - now));
		if (ret < 0 && errno != EINTR)
			break;
		for (i = 0, k = 0; ret > 0 && k < n; k++)
			if (!p[k].revents ||
			    !root_send_some(r, who[k], b, len, &o[who[k]]))
				who[i++] = who[k];
		n = ret > 0 ? i : n;
	}
	free(who);
	free(p);
	free(o);
	return ok;
}

/* Every rank joined: local indices, then the table to everybody. */
static void root_finish(struct coll_root *r)
{
	size_t len = REPLY_LEN + (size_t)r->nranks * ENTRY_LEN;
	uint64_t deadline = coll_now_ms() + r->timeout_ms;
	uint8_t *b = malloc(len), e[REPLY_LEN], digest[32];
	bool sent;
	uint32_t i;

	coll_table_local_index(r->table, r->nranks);
	if (b) {
		reply_header(b, 0, r->uid, r->nranks, "");
		for (i = 0; i < r->nranks; i++) {
			uint8_t *t = b + REPLY_LEN + (size_t)i * ENTRY_LEN;

			memset(t, 0, ENTRY_LEN);
			memcpy(t, r->table[i].addr, 16);
			put16(t + 16, r->table[i].port);
			put16(t + 18, r->table[i].local_index);
		}
		reply_digest(b, b + REPLY_LEN, len - REPLY_LEN, digest);
		/* A rank that died meanwhile sees nothing; the others go on
		 * and find out when the kernel cannot reach it. */
		sent = root_send_each(r, b, len, digest, deadline);
		free(b);
		if (sent)
			return;
	}
	/* Out of memory: a short refusal, which fits any socket buffer. */
	reply_header(e, -ENOMEM, r->uid, r->nranks, "root out of memory");
	reply_digest(e, NULL, 0, digest);
	for (i = 0; i < r->nranks; i++)
		root_send_reply(r, r->fds[i], e, sizeof(e), r->nonces[i],
				digest, deadline);
}

static void root_timeout(struct coll_root *r)
{
	uint8_t b[REPLY_LEN], digest[32];
	char msg[REPLY_MSG_LEN];
	uint32_t i;

	snprintf(msg, sizeof(msg), "only %u of %u ranks joined in %" PRIu64
		 " ms%s", r->joined, r->nranks, r->timeout_ms,
		 r->emfile ? " (the root ran out of file descriptors)" : "");
	reply_header(b, -ETIMEDOUT, r->uid, r->nranks, msg);
	reply_digest(b, NULL, 0, digest);
	for (i = 0; i < r->nranks; i++)
		if (r->fds[i] >= 0)
			root_send_reply(r, r->fds[i], b, sizeof(b),
					r->nonces[i], digest,
					coll_now_ms() + ROOT_SEND_MS);
	if (r->joined)
		fprintf(stderr, "kcoll: bootstrap root :%u gave up: %s\n",
			r->port, msg);
}

static void *root_main(void *arg)
{
	struct coll_root *r = arg;
	struct pollfd *pfd = NULL;
	uint32_t *who = NULL;
	size_t cap = 0;

	for (;;) {
		size_t n = 0, need = 1 + r->npend + r->nranks, k;
		uint64_t now = coll_now_ms(), wake = r->deadline;
		unsigned int i;
		int ret;

		if (r->nranks && r->joined == r->nranks) {
			root_finish(r);
			break;
		}
		if (now >= r->deadline) {
			root_timeout(r);
			break;
		}
		if (need > cap) {
			struct pollfd *np = realloc(pfd, need * sizeof(*pfd));
			uint32_t *nw;

			if (!np)
				goto wait;
			pfd = np;
			nw = realloc(who, need * sizeof(*who));
			if (!nw)
				goto wait;
			who = nw;
			cap = need;
		}
		/* A negative fd is left out of poll: paused. */
		pfd[n++] = (struct pollfd){
			.fd = now < r->lfd_pause ? -1 : r->lfd,
			.events = POLLIN };
		if (now < r->lfd_pause && r->lfd_pause < wake)
			wake = r->lfd_pause;
		for (i = 0; i < r->npend; i++) {
			pfd[n++] = (struct pollfd){ .fd = r->pend[i].fd,
						    .events = POLLIN };
			if (r->pend[i].deadline < wake)
				wake = r->pend[i].deadline;
		}
		for (i = 0; i < r->nranks; i++) {
			if (r->fds[i] < 0)
				continue;
			who[n] = i;
			pfd[n++] = (struct pollfd){ .fd = r->fds[i],
						    .events = POLLIN };
		}
		ret = poll(pfd, n, wake > now ? (int)(wake - now > INT_MAX ?
					INT_MAX : wake - now) : 0);
		if (ret < 0 && errno != EINTR)
			goto wait;
		now = coll_now_ms();

		/* Joined ranks must stay silent: EOF or data means gone. */
		for (k = 1 + r->npend; ret > 0 && k < n; k++) {
			uint8_t c;

			if (!pfd[k].revents)
				continue;
			if (recv(pfd[k].fd, &c, 1, MSG_DONTWAIT) < 0 &&
			    (errno == EAGAIN || errno == EINTR))
				continue;
			root_leave(r, who[k]);
		}
		/* Pending ones, backwards: root_hello() and drops move the
		 * last entry into the freed slot. */
		for (k = r->npend; ret > 0 && k-- > 0;) {
			struct root_pending *p = &r->pend[k];
			ssize_t got;

			if (!pfd[1 + k].revents)
				continue;
			got = recv(p->fd, p->buf + p->got, HELLO_LEN - p->got,
				   MSG_DONTWAIT);
			if (got < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (got <= 0) {
				root_drop_pending(r, (unsigned int)k, true);
				continue;
			}
			p->got += (size_t)got;
			if (p->got == HELLO_LEN)
				root_hello(r, (unsigned int)k);
		}
		for (k = r->npend; k-- > 0;)
			if (r->pend[k].deadline <= now)
				root_drop_pending(r, (unsigned int)k, true);
		if (ret > 0 && pfd[0].revents)
			root_accept(r);
		continue;
wait:
		/* Out of memory or a poll failure: do not spin. */
		usleep(10000);
	}
	free(pfd);
	free(who);
	root_free(r);
	return NULL;
}

int coll_root_start(struct coll_id_fields *f)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	struct coll_root *r;
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t th;
	int one = 1, ret;

	r = calloc(1, sizeof(*r));
	if (!r)
		return coll_err(-ENOMEM, "bootstrap root: out of memory");
	r->lfd = -1;
	if (!f->uid) {
		do {
			ret = coll_random(&f->uid, sizeof(f->uid));
			if (ret)
				goto out_free;
		} while (!f->uid);
	}
	r->uid = f->uid;
	memcpy(r->secret, f->secret, KCOLL_KEY_LEN);
	r->timeout_ms = coll_bootstrap_timeout_ms();
	r->deadline = coll_now_ms() + r->timeout_ms;

	r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->lfd < 0) {
		ret = coll_err(-errno, "bootstrap root: socket: %s",
			       coll_strerror(-errno));
		goto out_free;
	}
	setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	sa.sin_port = htons(f->port);
	if (bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = coll_err(-errno, "bootstrap root: bind to port %u: %s",
			       f->port, coll_strerror(-errno));
		goto out_free;
	}
	if (listen(r->lfd, 1024) < 0 ||
	    getsockname(r->lfd, (struct sockaddr *)&sa, &sl) < 0) {
		ret = coll_err(-errno, "bootstrap root: listen: %s",
			       coll_strerror(-errno));
		goto out_free;
	}
	r->port = ntohs(sa.sin_port);

	/* The thread takes no signals: they belong to the application. */
	ret = pthread_attr_init(&attr);
	if (ret) {
		ret = coll_err(-ret, "bootstrap root: pthread_attr_init failed");
		goto out_free;
	}
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&th, &attr, root_main, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (ret) {
		ret = coll_err(-ret, "bootstrap root: pthread_create: %s",
			       coll_strerror(ret));
		goto out_free;
	}
	f->port = r->port;
	return 0;

out_free:
	root_free(r);
	return ret;
}

/* ------------------------------------------------------------------ */
/* The client side                                                     */
/* ------------------------------------------------------------------ */

/* Errors after which connecting again may work (root not up yet). */
static bool connect_retryable(int err)
{
	switch (err) {
	case ECONNREFUSED:
	case ECONNRESET:
	case ETIMEDOUT:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENETDOWN:
	case EAGAIN:
	case EINTR:
		return true;
	default:
		return false;
	}
}

/* One connection attempt; fd or -errno. */
static int connect_once(const struct sockaddr_in *sa, uint64_t deadline)
{
	socklen_t sl = sizeof(int);
	int fd, err = 0, ret;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (!connect(fd, (const struct sockaddr *)sa, sizeof(*sa)))
		return fd;
	if (errno != EINPROGRESS) {
		ret = -errno;
		goto out_close;
	}
	ret = io_wait(fd, POLLOUT, deadline);
	if (ret)
		goto out_close;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0) {
		ret = -errno;
		goto out_close;
	}
	if (err) {
		ret = -err;
		goto out_close;
	}
	return fd;

out_close:
	close(fd);
	return ret;
}

static int connect_root(const struct sockaddr_in *sa, const char *where,
			uint64_t deadline, uint64_t timeout_ms)
{
	unsigned int backoff = 10;
	int ret, last = 0;

	for (;;) {
		uint64_t now;

		ret = connect_once(sa, deadline);
		if (ret >= 0)
			return ret;
		if (ret != -ETIMEDOUT)
			last = ret;
		now = coll_now_ms();
		if (!connect_retryable(-ret) || now >= deadline)
			break;
		if (backoff > deadline - now)
			backoff = (unsigned int)(deadline - now);
		usleep(backoff * 1000U);
		backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
	}
	if (connect_retryable(-ret))
		return coll_err(-ETIMEDOUT,
				"bootstrap: root %s unreachable for %" PRIu64
				" ms (%s)", where, timeout_ms,
				last ? strerror(-last) : "no answer");
	return coll_err(ret, "bootstrap: connecting to root %s: %s", where,
			coll_strerror(ret));
}

int coll_bootstrap(const coll_unique_id *id, int nranks, int rank,
		   const struct kcoll_rank_addr *self,
		   struct kcoll_rank_addr *table, uint64_t *uid)
{
	uint8_t hello[HELLO_LEN], rep[REPLY_LEN], chal[CHAL_LEN], *entries = NULL;
	uint8_t mac[MAC_LEN], want[MAC_LEN], digest[32];
	uint64_t timeout_ms, deadline, ruid;
	size_t elen = 0;
	bool retried = false;
	struct coll_id_fields f;
	struct sockaddr_in sa;
	char where[32], msg[REPLY_MSG_LEN];
	int fd, ret, status, i;
	uint64_t tmo;

	if (!id || !self || !table)
		return coll_err(-EINVAL, "bootstrap: NULL argument");
	if (nranks < 1 || nranks > KCOLL_MAX_RANKS)
		return coll_err(-EINVAL, "bootstrap: nranks %d not in 1..%d",
				nranks, KCOLL_MAX_RANKS);
	if (rank < 0 || rank >= nranks)
		return coll_err(-EINVAL, "bootstrap: rank %d not in 0..%d",
				rank, nranks - 1);
	if (coll_id_decode(id, &f))
		return coll_err(-EINVAL, "bootstrap: invalid unique id");
	ret = coll_env_uint(COLL_ENV_BOOTSTRAP_TIMEOUT,
			    COLL_BOOTSTRAP_TIMEOUT_MS_DEFAULT, UINT32_MAX, &tmo);
	if (ret)
		return ret;
	timeout_ms = tmo ? tmo : COLL_BOOTSTRAP_TIMEOUT_MS_DEFAULT;
	deadline = coll_now_ms() + timeout_ms;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr = f.ip;
	sa.sin_port = htons(f.port);
	fmt_sockaddr(&sa, where, sizeof(where));

	memset(chal, 0, sizeof(chal));
again:
	/* Once the root has taken us and dropped us, one attempt: a root
	 * that refuses connections now is gone, not yet to come. */
	fd = retried ? connect_once(&sa, deadline) :
		       connect_root(&sa, where, deadline, timeout_ms);
	if (fd < 0 && retried)
		return coll_err(-ECONNRESET, "bootstrap: root %s closed the "
				"connection and takes no new one (%s)", where,
				coll_strerror(fd));
	if (fd < 0)
		return fd;
	ret = io_recv_all(fd, chal, sizeof(chal), deadline);
	if (!ret && (get32(chal) != CHAL_MAGIC ||
		     get32(chal + 4) != PROTO_VERSION)) {
		ret = coll_err(-EPROTO, "bootstrap: %s is not a kcoll root of "
			       "protocol version %d (another libcoll?)", where,
			       PROTO_VERSION);
		goto out_close;
	}
	memset(hello, 0, sizeof(hello));
	put32(hello, HELLO_MAGIC);
	put32(hello + 4, PROTO_VERSION);
	if (!ret)
		ret = coll_random(hello + 8, NONCE_LEN);
	put64(hello + 24, f.uid);
	put32(hello + 32, (uint32_t)rank);
	put32(hello + 36, (uint32_t)nranks);
	memcpy(hello + 40, self->addr, 16);
	put16(hello + 56, self->port);
	hello_mac(f.secret, chal + 8, hello, hello + HELLO_MAC_OFF);
	if (!ret)
		ret = io_send_all(fd, hello, sizeof(hello), deadline);
	if (!ret)
		ret = io_recv_all(fd, rep, sizeof(rep), deadline);
	if (ret == -ECONNRESET && coll_now_ms() < deadline) {
		/* Dropped before the root read our HELLO (a flood of other
		 * connections makes it drop the oldest): say it again. */
		close(fd);
		usleep(10000);
		retried = true;
		goto again;
	}
	if (ret) {
		if (ret == -ETIMEDOUT)
			ret = coll_err(ret, "bootstrap: no table from root %s "
				       "within %" PRIu64 " ms (not every rank "
				       "joined?)", where, timeout_ms);
		else
			ret = coll_err(ret, "bootstrap: root %s: %s", where,
				       ret == -ECONNRESET ?
				       "closed the connection" :
				       coll_strerror(ret));
		goto out_close;
	}
	/* Nothing of it is used before its mac verifies; status and nranks
	 * only say whether the table follows. */
	status = (int32_t)get32(rep + 4);
	elen = !status && get32(rep + 16) == (uint32_t)nranks ?
	       (size_t)nranks * ENTRY_LEN : 0;
	if (elen) {
		entries = malloc(elen);
		if (!entries) {
			ret = coll_err(-ENOMEM, "bootstrap: out of memory");
			goto out_close;
		}
		ret = io_recv_all(fd, entries, elen, deadline);
	}
	if (!ret)
		ret = io_recv_all(fd, mac, sizeof(mac), deadline);
	if (ret) {
		ret = coll_err(ret, "bootstrap: reading the table from %s: %s",
			       where, coll_strerror(ret));
		goto out_free;
	}
	reply_digest(rep, entries, elen, digest);
	reply_mac(f.secret, hello + 8, digest, want);
	if (!mac_equal(mac, want)) {
		ret = coll_err(-EACCES, "bootstrap: root %s did not prove the "
			       "secret (a wrong secret here or there, or not "
			       "our root)", where);
		goto out_free;
	}
	memcpy(msg, rep + REPLY_MSG_OFF, sizeof(msg));
	msg[sizeof(msg) - 1] = '\0';
	ruid = get64(rep + 8);
	if (get32(rep) != REPLY_MAGIC || status > 0 || status < -4095) {
		ret = coll_err(-EPROTO, "bootstrap: %s is not a kcoll root",
			       where);
		goto out_free;
	}
	if (status) {
		ret = coll_err(status, "bootstrap root %s refused rank %d: %s",
			       where, rank, msg[0] ? msg : coll_strerror(status));
		goto out_free;
	}
	if (!elen || !ruid || (f.uid && ruid != f.uid)) {
		ret = coll_err(-EPROTO, "bootstrap: root %s answered for "
			       "another communicator", where);
		goto out_free;
	}
	for (i = 0; i < nranks; i++) {
		const uint8_t *e = entries + (size_t)i * ENTRY_LEN;

		memset(&table[i], 0, sizeof(table[i]));
		memcpy(table[i].addr, e, 16);
		table[i].port = get16(e + 16);
		table[i].local_index = get16(e + 18);
	}
	if (uid)
		*uid = ruid;
	ret = 0;
out_free:
	free(entries);
out_close:
	close(fd);
	return ret;
}

/* ------------------------------------------------------------------ */
/* The node's RDMA address                                             */
/* ------------------------------------------------------------------ */

/* First line of a small file, without trailing white space. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *fp = fopen(path, "re");
	size_t n;

	if (!fp)
		return -errno;
	if (!fgets(buf, (int)len, fp)) {
		int err = ferror(fp) ? -EIO : -ENODATA;

		fclose(fp);
		return err;
	}
	fclose(fp);
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ' ||
		     buf[n - 1] == '\t'))
		buf[--n] = '\0';
	return n ? 0 : -ENODATA;
}

/* The IPv4 address of @ifname (first one listed); -ENOENT if none. */
static int ipv4_of_ifname(const struct ifaddrs *all, const char *ifname,
			  struct in_addr *ip)
{
	const struct ifaddrs *i;

	for (i = all; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    strcmp(i->ifa_name, ifname))
			continue;
		*ip = ((const struct sockaddr_in *)i->ifa_addr)->sin_addr;
		return 0;
	}
	return -ENOENT;
}

static int first_non_loopback(const struct ifaddrs *all, struct in_addr *ip)
{
	const struct ifaddrs *i;

	for (i = all; i; i = i->ifa_next) {
		struct in_addr a;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
			continue;
		a = ((const struct sockaddr_in *)i->ifa_addr)->sin_addr;
		if ((ntohl(a.s_addr) >> 24) == 127)
			continue;
		*ip = a;
		return 0;
	}
	return -EADDRNOTAVAIL;
}

static int no_dot(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* The netdev name of RDMA device @dev under @ibdir, in order of trust. */
static int rdma_netdev(const char *ibdir, const char *dev, char *name,
		       size_t len)
{
	char path[PATH_MAX];
	struct dirent **ents;
	int n, i;

	snprintf(path, sizeof(path), "%s/%s/ports/1/gid_attrs/ndevs/0", ibdir,
		 dev);
	if (!read_line(path, name, len))
		return 0;
	snprintf(path, sizeof(path), "%s/%s/device/net", ibdir, dev);
	n = scandir(path, &ents, no_dot, alphasort);
	if (n > 0) {
		size_t l = strlen(ents[0]->d_name);
		int ret = -ENAMETOOLONG;

		if (l < len) {
			memcpy(name, ents[0]->d_name, l + 1);
			ret = 0;
		}
		for (i = 0; i < n; i++)
			free(ents[i]);
		free(ents);
		if (!ret)
			return 0;
	}
	if (n == 0)
		free(ents);
	snprintf(path, sizeof(path), "%s/%s/parent", ibdir, dev);
	return read_line(path, name, len);
}

int coll_node_addr_at(const char *ibdir, struct kcoll_rank_addr *self)
{
	const char *env = getenv(COLL_ENV_IB_ADDR);
	struct ifaddrs *all = NULL;
	struct dirent **devs = NULL;
	char ifname[IF_NAMESIZE + 16];
	struct in_addr ip;
	int ndev, i, ret;

	if (!self)
		return coll_err(-EINVAL, "coll_node_addr: NULL argument");
	if (env && *env) {
		if (inet_pton(AF_INET, env, &ip) != 1)
			return coll_err(-EINVAL, "%s=\"%s\" is not an IPv4 "
					"address", COLL_ENV_IB_ADDR, env);
		coll_addr_from_ipv4(self, ip);
		return 0;
	}
	if (getifaddrs(&all) < 0)
		return coll_err(-errno, "getifaddrs: %s", coll_strerror(-errno));

	ret = -ENOENT;
	ndev = scandir(ibdir, &devs, no_dot, alphasort);
	if (ndev > 0 && !rdma_netdev(ibdir, devs[0]->d_name, ifname,
				     sizeof(ifname)))
		ret = ipv4_of_ifname(all, ifname, &ip);
	for (i = 0; i < ndev; i++)
		free(devs[i]);
	if (ndev >= 0)
		free(devs);
	if (ret)
		ret = first_non_loopback(all, &ip);
	freeifaddrs(all);
	if (ret)
		return coll_err(ret, "no IPv4 address for RDMA found (set %s)",
				COLL_ENV_IB_ADDR);
	coll_addr_from_ipv4(self, ip);
	return 0;
}

int coll_node_addr(struct kcoll_rank_addr *self)
{
	return coll_node_addr_at("/sys/class/infiniband", self);
}

/* ------------------------------------------------------------------ */
/* The launcher environment                                            */
/* ------------------------------------------------------------------ */

static const char *env_first(const char *a, const char *b, const char **name)
{
	const char *v = getenv(a);

	*name = a;
	if (v && *v)
		return v;
	v = getenv(b);
	*name = b;
	return v && *v ? v : NULL;
}

static int env_int(const char *name, const char *s, long min, long max,
		   int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < min || v > max)
		return coll_err(-EINVAL, "%s=\"%s\" is not in %ld..%ld", name, s,
				min, max);
	*out = (int)v;
	return 0;
}

int coll_env_unique_id(coll_unique_id *id, int *rank, int *nranks)
{
	const char *rs, *ns, *rname, *nname, *s, *root, *secret;
	struct coll_id_fields f;
	int ret, r, n;

	if (!id || !rank || !nranks)
		return coll_err(-EINVAL, "coll_env_unique_id: NULL argument");
	rs = env_first(COLL_ENV_RANK, COLL_ENV_OMPI_RANK, &rname);
	ns = env_first(COLL_ENV_NRANKS, COLL_ENV_OMPI_SIZE, &nname);
	if (!rs || !ns)
		return coll_err(-EINVAL, "set %s and %s (or run under Open "
				"MPI's mpirun)", COLL_ENV_RANK,
				COLL_ENV_NRANKS);
	ret = env_int(nname, ns, 1, KCOLL_MAX_RANKS, &n);
	if (ret)
		return ret;
	ret = env_int(rname, rs, 0, n - 1, &r);
	if (ret)
		return ret;

	s = getenv(COLL_ENV_UNIQUE_ID);
	root = getenv(COLL_ENV_ROOT);
	secret = getenv(COLL_ENV_SECRET);
	if (s && *s) {
		ret = coll_unique_id_from_string(id, s);
		if (ret)
			return coll_err(ret, "%s: not a kcoll unique id",
					COLL_ENV_UNIQUE_ID);
	} else if (root && *root && secret && *secret) {
		ret = coll_unique_id_from_root(id, root, secret);
		if (ret)
			return coll_err(ret, "%s/%s: %s", COLL_ENV_ROOT,
					COLL_ENV_SECRET, coll_last_error());
		if (r == 0) {
			ret = coll_id_decode(id, &f);
			if (!ret)
				ret = coll_root_start(&f);
			if (ret)
				return ret;
		}
	} else {
		return coll_err(-EINVAL, "set %s, or %s and %s",
				COLL_ENV_UNIQUE_ID, COLL_ENV_ROOT,
				COLL_ENV_SECRET);
	}
	*rank = r;
	*nranks = n;
	return 0;
}
