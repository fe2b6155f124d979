// SPDX-License-Identifier: MIT
/*
 * A model of the kcoll generic netlink family for host tests (see
 * kcoll_nl_fake.h). Fixed contents:
 *
 *	devices	rxe0 (index 3, ACTIVE, 1 comm, counters and a histogram,
 *		enabled), mlx5_0 (index 4, DOWN, no traffic, disabled)
 *	comms	7: rank 1/4 on rxe0, members (IPv4-mapped and IPv6), two
 *		operations in flight, a last error; 9: connecting, nothing
 *		in flight
 *	tunables chunk_bytes (4096-4194304), op_timeout_ms (0-3600000),
 *		prio_sched (0-1), algo/allreduce (auto, ring, recdoubling,
 *		binomial, rabenseifner), devices ("*", "rxe0",
 *		"rxe0,mlx9")
 *
 * Replies carry an attribute id beyond KCOLL_A_MAX here and there, as a
 * newer kernel's would: readers must ignore it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/genetlink.h>
#include <linux/kcoll.h>
#include <linux/kcoll_netlink.h>
#include <linux/netlink.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include "kcoll_nl_fake.h"

#define FAKE_MAX_FD	1024
#define FAKE_A_FUTURE	(KCOLL_A_MAX + 7)	/* unknown to readers */
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

struct fake_state fake;

struct fake_dgram {
	struct fake_dgram *next;
	size_t len;
	unsigned char data[];
};

static struct fake_dgram *fake_q[FAKE_MAX_FD];
static uint64_t fake_groups[FAKE_MAX_FD];

struct fake_tunable {
	const char *name;
	char value[KCOLL_NL_TUNABLE_VALUE_MAX];
	long min, max;			/* numeric range; min > max: names */
	const char *const *names;
};

static const char *const fake_algos[] = {
	"auto", "ring", "recdoubling", "binomial", "rabenseifner", NULL
};

/* The devices tunable: the lists the tests write. */
static const char *const fake_devlists[] = {
	"*", "rxe0", "rxe0,mlx9", NULL
};

static struct fake_tunable fake_tunables[] = {
	{ "chunk_bytes", "", 4096, 4194304, NULL },
	{ "op_timeout_ms", "", 0, 3600000, NULL },
	{ "prio_sched", "", 0, 1, NULL },
	{ "algo/allreduce", "", 1, 0, fake_algos },
	{ "devices", "", 1, 0, fake_devlists },
};

static const char *const fake_defaults[] = {
	"65536", "0", "1", "auto", "*",
};

static void fake_flush(int fd);

void fake_reset(void)
{
	const char *e;
	size_t i;
	int fd;

	for (fd = 0; fd < FAKE_MAX_FD; fd++) {
		fake_flush(fd);
		fake_groups[fd] = 0;
	}
	memset(&fake, 0, sizeof(fake));
	e = getenv("KC_FAKE_ABSENT");
	fake.absent = e && *e == '1';
	e = getenv("KC_FAKE_UNPRIV");
	fake.unpriv = e && *e == '1';
	for (i = 0; i < ARRAY_SIZE(fake_tunables); i++)
		strcpy(fake_tunables[i].value, fake_defaults[i]);
}

__attribute__((constructor)) static void fake_init(void)
{
	fake_reset();
}

const char *fake_tunable(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(fake_tunables); i++)
		if (!strcmp(fake_tunables[i].name, name))
			return fake_tunables[i].value;
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Datagram queues                                                     */
/* ------------------------------------------------------------------ */

static void fake_queue(int fd, const void *data, size_t len)
{
	struct fake_dgram *d, **pp;

	if (fd < 0 || fd >= FAKE_MAX_FD)
		abort();
	d = malloc(sizeof(*d) + len);
	if (!d)
		abort();
	d->next = NULL;
	d->len = len;
	memcpy(d->data, data, len);
	for (pp = &fake_q[fd]; *pp; pp = &(*pp)->next)
		;
	*pp = d;
}

static void fake_flush(int fd)
{
	struct fake_dgram *d;

	while ((d = fake_q[fd])) {
		fake_q[fd] = d->next;
		free(d);
	}
}

void fake_queue_msg(int fd, struct nl_msg *msg)
{
	fake_queue(fd, nlmsg_hdr(msg), nlmsg_hdr(msg)->nlmsg_len);
}

bool fake_member(int fd, unsigned int group)
{
	return group < 64 && (fake_groups[fd] & (1ULL << group));
}

size_t fake_pending(int fd)
{
	struct fake_dgram *d;
	size_t n = 0;

	for (d = fake_q[fd]; d; d = d->next)
		n++;
	return n;
}

/* Several messages in one datagram, as a dump sends them. */
static void fake_queue_many(int fd, struct nl_msg **msgs, int n)
{
	unsigned char *buf;
	size_t len = 0, off = 0;
	int i;

	for (i = 0; i < n; i++)
		len += NLMSG_ALIGN(nlmsg_hdr(msgs[i])->nlmsg_len);
	buf = calloc(1, len);
	if (!buf)
		abort();
	for (i = 0; i < n; i++) {
		memcpy(buf + off, nlmsg_hdr(msgs[i]),
		       nlmsg_hdr(msgs[i])->nlmsg_len);
		off += NLMSG_ALIGN(nlmsg_hdr(msgs[i])->nlmsg_len);
		nlmsg_free(msgs[i]);
	}
	fake_queue(fd, buf, len);
	free(buf);
}

static bool fake_is_netlink(int fd)
{
	int domain = 0;
	socklen_t len = sizeof(domain);

	return fd >= 0 && fd < FAKE_MAX_FD &&
	       !getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) &&
	       domain == AF_NETLINK;
}

/* ------------------------------------------------------------------ */
/* Replies                                                             */
/* ------------------------------------------------------------------ */

static struct nl_msg *fake_reply(const struct nlmsghdr *req, int family,
				 uint8_t cmd, int flags)
{
	struct nl_msg *m = nlmsg_alloc();

	if (!m || !genlmsg_put(m, req->nlmsg_pid, req->nlmsg_seq, family, 0,
			       flags, cmd, 1))
		abort();
	return m;
}

static void fake_send(int fd, struct nl_msg *m)
{
	fake_queue_msg(fd, m);
	nlmsg_free(m);
}

/* NLMSG_ERROR, capped (the daemon sets NETLINK_CAP_ACK), with an
 * extended-ack message if @text. */
static void fake_ack(int fd, const struct nlmsghdr *req, int err,
		     const char *text)
{
	unsigned char buf[512] = { 0 };
	struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
	struct nlmsgerr *e = NLMSG_DATA(nlh);
	size_t len = NLMSG_LENGTH(sizeof(*e));
	struct nlattr *a;

	nlh->nlmsg_type = NLMSG_ERROR;
	nlh->nlmsg_flags = NLM_F_CAPPED;
	nlh->nlmsg_seq = req->nlmsg_seq;
	nlh->nlmsg_pid = req->nlmsg_pid;
	e->error = err;
	e->msg = *req;
	if (err && text) {
		nlh->nlmsg_flags |= NLM_F_ACK_TLVS;
		a = (struct nlattr *)(buf + NLMSG_ALIGN(len));
		a->nla_type = NLMSGERR_ATTR_MSG;
		a->nla_len = NLA_HDRLEN + strlen(text) + 1;
		memcpy((char *)a + NLA_HDRLEN, text, strlen(text) + 1);
		len = NLMSG_ALIGN(len) + NLA_ALIGN(a->nla_len);
	}
	nlh->nlmsg_len = len;
	fake_queue(fd, buf, len);
}

static void fake_done(int fd, const struct nlmsghdr *req, int err)
{
	unsigned char buf[NLMSG_LENGTH(sizeof(int))] = { 0 };
	struct nlmsghdr *nlh = (struct nlmsghdr *)buf;

	nlh->nlmsg_len = sizeof(buf);
	nlh->nlmsg_type = NLMSG_DONE;
	nlh->nlmsg_flags = NLM_F_MULTI;
	nlh->nlmsg_seq = req->nlmsg_seq;
	nlh->nlmsg_pid = req->nlmsg_pid;
	memcpy(NLMSG_DATA(nlh), &err, sizeof(err));
	fake_queue(fd, buf, sizeof(buf));
}

/* A do request's reply, then the ack it asked for. */
static void fake_do_reply(int fd, const struct nlmsghdr *req,
			  struct nl_msg *m)
{
	fake_send(fd, m);
	if (req->nlmsg_flags & NLM_F_ACK)
		fake_ack(fd, req, 0, NULL);
}

/* A dump: two messages per datagram, then NLMSG_DONE on its own. */
static void fake_dump(int fd, const struct nlmsghdr *req,
		      struct nl_msg **msgs, int n, int err)
{
	int i;

	for (i = 0; i < n; i += 2)
		fake_queue_many(fd, msgs + i, n - i >= 2 ? 2 : 1);
	fake_done(fd, req, err);
}

/* ------------------------------------------------------------------ */
/* nlctrl                                                              */
/* ------------------------------------------------------------------ */

static void fake_put_family(struct nl_msg *m, uint16_t id, const char *name,
			    uint32_t grp, const char *grp_name)
{
	struct nlattr *groups, *g;

	nla_put_u16(m, CTRL_ATTR_FAMILY_ID, id);
	nla_put_string(m, CTRL_ATTR_FAMILY_NAME, name);
	nla_put_u32(m, CTRL_ATTR_VERSION, 1);
	groups = nla_nest_start(m, CTRL_ATTR_MCAST_GROUPS);
	g = nla_nest_start(m, 1);
	nla_put_string(m, CTRL_ATTR_MCAST_GRP_NAME, grp_name);
	nla_put_u32(m, CTRL_ATTR_MCAST_GRP_ID, grp);
	nla_nest_end(m, g);
	nla_nest_end(m, groups);
}

static void fake_ctrl(int fd, struct nlmsghdr *req)
{
	struct nlattr *tb[CTRL_ATTR_MAX + 1];
	struct genlmsghdr *gh = nlmsg_data(req);
	struct nl_msg *m;
	const char *name;

	if (genlmsg_parse(req, 0, tb, CTRL_ATTR_MAX, NULL) ||
	    gh->cmd != CTRL_CMD_GETFAMILY || !tb[CTRL_ATTR_FAMILY_NAME]) {
		fake_ack(fd, req, -EOPNOTSUPP, NULL);
		return;
	}
	name = nla_get_string(tb[CTRL_ATTR_FAMILY_NAME]);
	m = fake_reply(req, GENL_ID_CTRL, CTRL_CMD_NEWFAMILY, 0);
	if (!strcmp(name, "nlctrl")) {
		fake_put_family(m, GENL_ID_CTRL, "nlctrl", FAKE_NOTIFY_GROUP,
				"notify");
	} else if (!strcmp(name, KCOLL_GENL_NAME) && !fake.absent) {
		fake_put_family(m, FAKE_FAMILY_ID, KCOLL_GENL_NAME,
				FAKE_EVENTS_GROUP, KCOLL_GENL_MCGRP_EVENTS);
	} else {
		nlmsg_free(m);
		fake_ack(fd, req, -ENOENT, NULL);
		return;
	}
	fake_do_reply(fd, req, m);
}

void fake_queue_ctrl(int fd, bool added, const char *name)
{
	struct nlmsghdr req = { 0 };
	struct nl_msg *m;

	m = fake_reply(&req, GENL_ID_CTRL, added ? CTRL_CMD_NEWFAMILY :
		       CTRL_CMD_DELFAMILY, 0);
	fake_put_family(m, FAKE_FAMILY_ID, name, FAKE_EVENTS_GROUP,
			KCOLL_GENL_MCGRP_EVENTS);
	fake_send(fd, m);
}

/* ------------------------------------------------------------------ */
/* kcoll contents                                                      */
/* ------------------------------------------------------------------ */

static void fake_put_stats(struct nl_msg *m, bool node, bool traffic)
{
	uint64_t hist[KCOLL_NL_LAT_BUCKETS] = { 0 };
	struct nlattr *st = nla_nest_start(m, KCOLL_A_STATS);

	if (traffic) {
		hist[6] = 7;	/* 64-128 us */
		hist[7] = 3;	/* 128-256 us */
		hist[10] = 1;	/* 1024-2048 us */
	}
	nla_put_u64(m, KCOLL_A_STAT_OPS, traffic ? 11 : 0);
	nla_put_u64(m, KCOLL_A_STAT_BYTES, traffic ? 4096 : 0);
	nla_put_u64(m, KCOLL_A_STAT_ERRORS, traffic ? 1 : 0);
	nla_put_u64(m, KCOLL_A_STAT_TIMEOUTS, traffic ? 1 : 0);
	nla_put(m, KCOLL_A_STAT_LAT_HIST, sizeof(hist), hist);
	if (node) {
		/* One entry more than this build knows: a newer module's. */
		uint64_t prof[KCOLL_NL_PROF_NR + 1] = { 0 };

		if (traffic) {
			prof[KCOLL_NL_PROF_OPS] = 10;
			prof[KCOLL_NL_PROF_PHASES] = 20;
			prof[KCOLL_NL_PROF_TOTAL_NS] = 5000000;
			prof[KCOLL_NL_PROF_WAIT_NS] = 2000000;
			prof[KCOLL_NL_PROF_MOVE_NS] = 2500000;
			prof[KCOLL_NL_PROF_NR] = 77;
		}
		nla_put_u64(m, KCOLL_A_STAT_INFLIGHT, 2);
		nla_put_u64(m, KCOLL_A_STAT_CONTEXTS, 3);
		nla_put_u64(m, KCOLL_A_STAT_COMMS, 2);
		nla_put(m, KCOLL_A_STAT_PROFILE, sizeof(prof), prof);
	}
	nla_put_u32(m, FAKE_A_FUTURE, 0xdead);
	nla_nest_end(m, st);
}

static void fake_put_dev(struct nl_msg *m, int i)
{
	nla_put_string(m, KCOLL_A_DEV_NAME, i ? "mlx5_0" : "rxe0");
	nla_put_u32(m, KCOLL_A_DEV_INDEX, i ? 4 : 3);
	nla_put_u64(m, KCOLL_A_DEV_NODE_GUID, i ? 0x0002c90300a1b2c3ULL :
		    0x505400fffe123456ULL);
	nla_put_u8(m, KCOLL_A_DEV_PORT_STATE, i ? 1 : 4);
	nla_put_u32(m, KCOLL_A_DEV_COMMS, i ? 0 : 2);
	nla_put_u8(m, KCOLL_A_DEV_ENABLED, !i);	/* mlx5_0: not in devices */
	fake_put_stats(m, false, !i);
}

static void fake_put_ranks(struct nl_msg *m, const uint32_t *r, size_t n)
{
	nla_put(m, KCOLL_A_MISSING_RANKS, n * sizeof(*r), r);
}

static void fake_put_member(struct nl_msg *m, uint32_t rank,
			    const uint8_t *addr, uint16_t local, bool up)
{
	struct nlattr *a = nla_nest_start(m, KCOLL_A_MEMBER);

	nla_put_u32(m, KCOLL_A_RANK, rank);
	nla_put(m, KCOLL_A_MEMBER_ADDR, 16, addr);
	nla_put_u16(m, KCOLL_A_MEMBER_PORT, 18515);
	nla_put_u16(m, KCOLL_A_MEMBER_LOCAL_INDEX, local);
	nla_put_u8(m, KCOLL_A_MEMBER_CONNECTED, up);
	nla_nest_end(m, a);
}

static void fake_put_comm7_details(struct nl_msg *m)
{
	static const uint8_t v4a[16] = {
		[10] = 0xff, [11] = 0xff, 10, 9, 0, 1 };
	static const uint8_t v4b[16] = {
		[10] = 0xff, [11] = 0xff, 10, 9, 0, 2 };
	static const uint8_t v6[16] = { 0xfe, 0x80, [15] = 1 };
	static const uint32_t missing[] = { 2, 3 }, lost[] = { 2 };
	struct nlattr *n, *op;

	n = nla_nest_start(m, KCOLL_A_COMM_MEMBERS);
	fake_put_member(m, 0, v4a, 0, true);
	fake_put_member(m, 1, v4a, 1, true);
	fake_put_member(m, 2, v6, 0, false);
	fake_put_member(m, 3, v4b, 0, true);
	nla_nest_end(m, n);

	n = nla_nest_start(m, KCOLL_A_COMM_OPS);
	op = nla_nest_start(m, KCOLL_A_OP);
	nla_put_u64(m, KCOLL_A_OP_SEQ, 17);
	nla_put_u8(m, KCOLL_A_OP_OPCODE, KCOLL_OP_ALLREDUCE);
	nla_put_string(m, KCOLL_A_OP_ALGO, "ring");
	nla_put_u8(m, KCOLL_A_OP_PRIO, 0);
	nla_put_u64(m, KCOLL_A_OP_BYTES, 1048576);
	nla_put_u64(m, KCOLL_A_OP_AGE_MS, 1200);
	nla_put_u32(m, KCOLL_A_OP_TIMEOUT_MS, 5000);
	fake_put_ranks(m, missing, 2);
	nla_nest_end(m, op);
	op = nla_nest_start(m, KCOLL_A_OP);
	nla_put_u64(m, KCOLL_A_OP_SEQ, 18);
	nla_put_u8(m, KCOLL_A_OP_OPCODE, KCOLL_OP_BARRIER);
	nla_put_string(m, KCOLL_A_OP_ALGO, "dissemination");
	nla_put_u8(m, KCOLL_A_OP_PRIO, 3);
	nla_put_u64(m, KCOLL_A_OP_BYTES, 0);
	nla_put_u64(m, KCOLL_A_OP_AGE_MS, 5);
	nla_put_u32(m, KCOLL_A_OP_TIMEOUT_MS, 0);
	fake_put_ranks(m, NULL, 0);
	nla_nest_end(m, op);
	nla_nest_end(m, n);

	n = nla_nest_start(m, KCOLL_A_COMM_LAST_ERROR);
	nla_put_u64(m, KCOLL_A_OP_SEQ, 12);
	nla_put_u8(m, KCOLL_A_OP_OPCODE, KCOLL_OP_ALLGATHER);
	nla_put_u32(m, KCOLL_A_ERRNO, (uint32_t)-ETIMEDOUT);
	fake_put_ranks(m, lost, 1);
	nla_nest_end(m, n);
}

static void fake_put_comm(struct nl_msg *m, uint32_t id)
{
	struct nlattr *n;

	nla_put_u32(m, KCOLL_A_COMM_ID, id);
	nla_put_u64(m, KCOLL_A_COMM_UID, id == 7 ? 0x1122334455667788ULL :
		    0xabcdefULL);
	nla_put_u32(m, KCOLL_A_COMM_PID, id == 7 ? 4242 : 4343);
	nla_put_u32(m, KCOLL_A_RANK, id == 7 ? 1 : 0);
	nla_put_u32(m, KCOLL_A_NRANKS, id == 7 ? 4 : 2);
	nla_put_u8(m, KCOLL_A_COMM_STATE, id == 7 ? KCOLL_COMM_READY :
		   KCOLL_COMM_CONNECTING);
	nla_put_string(m, KCOLL_A_DEV_NAME, "rxe0");
	nla_put_u32(m, KCOLL_A_COMM_INFLIGHT, id == 7 ? 2 : 0);
	nla_put_u32(m, FAKE_A_FUTURE, 1);
	if (id == 7) {
		fake_put_comm7_details(m);
	} else {
		/* Empty nests, kept as the kernel keeps them. */
		n = nla_nest_start(m, KCOLL_A_COMM_MEMBERS);
		nla_nest_end_keep_empty(m, n);
		n = nla_nest_start(m, KCOLL_A_COMM_OPS);
		nla_nest_end_keep_empty(m, n);
	}
	fake_put_stats(m, false, id == 7);
}

/* ------------------------------------------------------------------ */
/* kcoll commands                                                      */
/* ------------------------------------------------------------------ */

static void fake_dev_get(int fd, struct nlmsghdr *req)
{
	struct nl_msg *msgs[2];
	int i;

	if (!(req->nlmsg_flags & NLM_F_DUMP)) {
		fake_ack(fd, req, -EOPNOTSUPP, NULL);
		return;
	}
	for (i = 0; i < 2; i++) {
		msgs[i] = fake_reply(req, FAKE_FAMILY_ID, KCOLL_CMD_DEV_GET,
				     NLM_F_MULTI);
		fake_put_dev(msgs[i], i);
	}
	fake_dump(fd, req, msgs, 2, 0);
}

static void fake_comm_get(int fd, struct nlmsghdr *req, struct nlattr **tb)
{
	static const uint32_t ids[] = { 7, 9 };
	struct nl_msg *msgs[2], *m;
	uint32_t id;
	int i;

	if (req->nlmsg_flags & NLM_F_DUMP) {
		for (i = 0; i < 2; i++) {
			msgs[i] = fake_reply(req, FAKE_FAMILY_ID,
					     KCOLL_CMD_COMM_GET, NLM_F_MULTI);
			fake_put_comm(msgs[i], ids[i]);
		}
		fake_dump(fd, req, msgs, fake.dump_error ? 1 : 2,
			  fake.dump_error);
		if (fake.dump_error)
			nlmsg_free(msgs[1]);
		return;
	}
	if (!tb[KCOLL_A_COMM_ID]) {
		fake_ack(fd, req, -EINVAL, "missing attribute: COMM_ID");
		return;
	}
	id = nla_get_u32(tb[KCOLL_A_COMM_ID]);
	if (id != 7 && id != 9) {
		fake_ack(fd, req, -ENOENT, NULL);
		return;
	}
	m = fake_reply(req, FAKE_FAMILY_ID, KCOLL_CMD_COMM_GET, 0);
	fake_put_comm(m, id);
	fake_do_reply(fd, req, m);
}

static void fake_stats_get(int fd, struct nlmsghdr *req)
{
	struct nl_msg *m;
	struct nlattr *d;
	int i;

	m = fake_reply(req, FAKE_FAMILY_ID, KCOLL_CMD_STATS_GET, 0);
	fake_put_stats(m, true, true);
	for (i = 0; i < 2; i++) {
		d = nla_nest_start(m, KCOLL_A_DEV);
		fake_put_dev(m, i);
		nla_nest_end(m, d);
	}
	nla_put_u32(m, FAKE_A_FUTURE, 2);
	fake_do_reply(fd, req, m);
}

static struct fake_tunable *fake_find(struct nlattr *name)
{
	size_t i;

	for (i = 0; name && i < ARRAY_SIZE(fake_tunables); i++)
		if (!strcmp(fake_tunables[i].name, nla_get_string(name)))
			return &fake_tunables[i];
	return NULL;
}

/* Dumps: one TUNABLE nest per message (the reader also accepts top-level
 * NAME/VALUE, as in do replies). */
static void fake_tunable_get(int fd, struct nlmsghdr *req, struct nlattr **tb)
{
	struct nl_msg *msgs[ARRAY_SIZE(fake_tunables)], *m;
	struct fake_tunable *t;
	struct nlattr *n;
	size_t i;

	if (req->nlmsg_flags & NLM_F_DUMP) {
		for (i = 0; i < ARRAY_SIZE(fake_tunables); i++) {
			m = fake_reply(req, FAKE_FAMILY_ID,
				       KCOLL_CMD_TUNABLE_GET, NLM_F_MULTI);
			n = nla_nest_start(m, KCOLL_A_TUNABLE);
			nla_put_string(m, KCOLL_A_TUNABLE_NAME,
				       fake_tunables[i].name);
			nla_put_string(m, KCOLL_A_TUNABLE_VALUE,
				       fake_tunables[i].value);
			nla_nest_end(m, n);
			msgs[i] = m;
		}
		fake_dump(fd, req, msgs, ARRAY_SIZE(fake_tunables), 0);
		return;
	}
	t = fake_find(tb[KCOLL_A_TUNABLE_NAME]);
	if (!t) {
		fake_ack(fd, req, -ENOENT, NULL);
		return;
	}
	m = fake_reply(req, FAKE_FAMILY_ID, KCOLL_CMD_TUNABLE_GET, 0);
	nla_put_string(m, KCOLL_A_TUNABLE_NAME, t->name);
	nla_put_string(m, KCOLL_A_TUNABLE_VALUE, t->value);
	fake_do_reply(fd, req, m);
}

static bool fake_value_ok(const struct fake_tunable *t, const char *v)
{
	const char *const *n;
	char *end;
	long x;

	if (t->names) {
		for (n = t->names; *n; n++)
			if (!strcmp(*n, v))
				return true;
		return false;
	}
	errno = 0;
	x = strtol(v, &end, 10);
	return *v && !*end && !errno && x >= t->min && x <= t->max;
}

static void fake_tunable_set(int fd, struct nlmsghdr *req, struct nlattr **tb)
{
	struct fake_tunable *t;
	const char *v;
	char text[128];

	if (fake.unpriv) {
		fake_ack(fd, req, -EPERM, NULL);
		return;
	}
	if (!tb[KCOLL_A_TUNABLE_NAME] || !tb[KCOLL_A_TUNABLE_VALUE]) {
		fake_ack(fd, req, -EINVAL, "missing attribute");
		return;
	}
	t = fake_find(tb[KCOLL_A_TUNABLE_NAME]);
	if (!t) {
		fake_ack(fd, req, -ENOENT, NULL);
		return;
	}
	v = nla_get_string(tb[KCOLL_A_TUNABLE_VALUE]);
	if (!fake_value_ok(t, v)) {
		if (t->names)
			snprintf(text, sizeof(text), "%s: unknown algorithm",
				 t->name);
		else
			snprintf(text, sizeof(text), "%s: %ld to %ld",
				 t->name, t->min, t->max);
		fake_ack(fd, req, -EINVAL, text);
		return;
	}
	snprintf(t->value, sizeof(t->value), "%s", v);
	fake.sets++;
	fake_ack(fd, req, 0, NULL);
}

static void fake_kcoll(int fd, struct nlmsghdr *req)
{
	struct nlattr *tb[KCOLL_A_MAX + 1];
	struct genlmsghdr *gh = nlmsg_data(req);

	fake.requests++;
	if (fake.silent)
		return;
	if (genlmsg_parse(req, 0, tb, KCOLL_A_MAX, NULL)) {
		fake_ack(fd, req, -EINVAL, "bad attribute");
		return;
	}
	switch (gh->cmd) {
	case KCOLL_CMD_DEV_GET:
		fake_dev_get(fd, req);
		break;
	case KCOLL_CMD_COMM_GET:
		fake_comm_get(fd, req, tb);
		break;
	case KCOLL_CMD_STATS_GET:
		fake_stats_get(fd, req);
		break;
	case KCOLL_CMD_TUNABLE_GET:
		fake_tunable_get(fd, req, tb);
		break;
	case KCOLL_CMD_TUNABLE_SET:
		fake_tunable_set(fd, req, tb);
		break;
	default:
		fake_ack(fd, req, -EOPNOTSUPP, NULL);
		break;
	}
}

static void fake_request(int fd, struct nlmsghdr *req)
{
	if (req->nlmsg_len < NLMSG_LENGTH(GENL_HDRLEN)) {
		fake_ack(fd, req, -EINVAL, NULL);
		return;
	}
	if (req->nlmsg_type == GENL_ID_CTRL)
		fake_ctrl(fd, req);
	else if (req->nlmsg_type == FAKE_FAMILY_ID && !fake.absent)
		fake_kcoll(fd, req);
	else
		fake_ack(fd, req, -ENOENT, NULL);
}

/* ------------------------------------------------------------------ */
/* The interposed system calls                                         */
/* ------------------------------------------------------------------ */

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	unsigned char buf[65536];
	struct nlmsghdr *nlh;
	size_t len = 0, i;
	int rem;

	if (!fake_is_netlink(fd))
		return syscall(SYS_sendmsg, fd, msg, flags);
	for (i = 0; i < msg->msg_iovlen; i++) {
		if (len + msg->msg_iov[i].iov_len > sizeof(buf)) {
			errno = EMSGSIZE;
			return -1;
		}
		memcpy(buf + len, msg->msg_iov[i].iov_base,
		       msg->msg_iov[i].iov_len);
		len += msg->msg_iov[i].iov_len;
	}
	rem = len;
	for (nlh = (struct nlmsghdr *)buf; nlmsg_ok(nlh, rem);
	     nlh = nlmsg_next(nlh, &rem))
		fake_request(fd, nlh);
	return len;
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct sockaddr_nl *sa = msg->msg_name;
	struct fake_dgram *d;
	size_t copied = 0, n, i;

	if (!fake_is_netlink(fd))
		return syscall(SYS_recvmsg, fd, msg, flags);
	if (fake.enobufs > 0) {
		fake.enobufs--;
		errno = ENOBUFS;
		return -1;
	}
	d = fake_q[fd];
	if (!d) {
		/* A blocking socket would wait for ever: say so instead. */
		errno = (fcntl(fd, F_GETFL) & O_NONBLOCK) ? EAGAIN : ETIMEDOUT;
		return -1;
	}
	for (i = 0; i < msg->msg_iovlen && copied < d->len; i++) {
		n = d->len - copied;
		if (n > msg->msg_iov[i].iov_len)
			n = msg->msg_iov[i].iov_len;
		memcpy(msg->msg_iov[i].iov_base, d->data + copied, n);
		copied += n;
	}
	msg->msg_flags = copied < d->len ? MSG_TRUNC : 0;
	msg->msg_controllen = 0;
	if (sa && msg->msg_namelen >= sizeof(*sa)) {
		memset(sa, 0, sizeof(*sa));
		sa->nl_family = AF_NETLINK;
		msg->msg_namelen = sizeof(*sa);
	}
	n = (flags & MSG_TRUNC) ? d->len : copied;
	if (!(flags & MSG_PEEK)) {
		fake_q[fd] = d->next;
		free(d);
	}
	return n;
}

/* Group memberships are recorded, not made: the ids are the model's. */
int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	unsigned int group;

	if (level != SOL_NETLINK || (name != NETLINK_ADD_MEMBERSHIP &&
				     name != NETLINK_DROP_MEMBERSHIP) ||
	    !fake_is_netlink(fd))
		return syscall(SYS_setsockopt, fd, level, name, val, len);
	if (len < sizeof(group)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&group, val, sizeof(group));
	if (!group || group >= 64) {
		errno = EINVAL;
		return -1;
	}
	if (name == NETLINK_ADD_MEMBERSHIP)
		fake_groups[fd] |= 1ULL << group;
	else
		fake_groups[fd] &= ~(1ULL << group);
	return 0;
}
