// SPDX-License-Identifier: MIT
/*
 * Host unit tests of the daemon's netlink side: kc_nlparse.c on messages
 * built here with libnl (well-formed, malformed, with attributes from the
 * future), extended-ack parsing, and kc_nl.c's requests, dumps, errors and
 * event socket against the model of the family in kcoll_nl_fake.c (which
 * replaces sendmsg()/recvmsg() on netlink sockets).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <linux/genetlink.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include "kc_nl.h"
#include "kc_nlparse.h"
#include "kcoll_nl_fake.h"
#include "unit.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

static struct nl_msg *msg_new(uint8_t cmd)
{
	struct nl_msg *m = nlmsg_alloc();

	genlmsg_put(m, 0, 1, FAKE_FAMILY_ID, 0, 0, cmd, 1);
	return m;
}

/* ------------------------------------------------------------------ */
/* Parsing                                                             */
/* ------------------------------------------------------------------ */

static void test_parse_dev(void)
{
	uint64_t hist[KCOLL_NL_LAT_BUCKETS + 8] = { 0 };
	struct nl_msg *m;
	struct nlattr *st;
	struct kc_dev d;

	hist[0] = 5;
	hist[31] = 6;
	hist[32] = 7;		/* a longer histogram: extra buckets ignored */
	m = msg_new(KCOLL_CMD_DEV_GET);
	nla_put_string(m, KCOLL_A_DEV_NAME, "rxe0");
	nla_put_u32(m, KCOLL_A_DEV_INDEX, 3);
	nla_put_u64(m, KCOLL_A_DEV_NODE_GUID, 0x1234);
	nla_put_u8(m, KCOLL_A_DEV_PORT_STATE, 4);
	nla_put_u32(m, KCOLL_A_MAX + 3, 77);	/* from a newer kernel */
	st = nla_nest_start(m, KCOLL_A_STATS);
	nla_put_u64(m, KCOLL_A_STAT_OPS, 9);
	nla_put(m, KCOLL_A_STAT_LAT_HIST, sizeof(hist), hist);
	nla_nest_end(m, st);
	if (UNIT_EQ_INT(kc_parse_dev_msg(nlmsg_hdr(m), &d), 0)) {
		UNIT_EQ_STR(d.name, "rxe0");
		UNIT_EQ_UINT(d.index, 3);
		UNIT_EQ_UINT(d.node_guid, 0x1234);
		UNIT_EQ_UINT(d.port_state, 4);
		UNIT_CHECK(KC_HAS(&d, KCOLL_A_STATS));
		UNIT_CHECK(!KC_HAS(&d, KCOLL_A_DEV_COMMS));
		UNIT_EQ_UINT(d.stats.ops, 9);
		UNIT_CHECK(!KC_HAS(&d.stats, KCOLL_A_STAT_BYTES));
		UNIT_EQ_UINT(d.stats.lat[0], 5);
		UNIT_EQ_UINT(d.stats.lat[31], 6);
	}
	nlmsg_free(m);

	/* No name: refused. */
	m = msg_new(KCOLL_CMD_DEV_GET);
	nla_put_u32(m, KCOLL_A_DEV_INDEX, 3);
	UNIT_EQ_INT(kc_parse_dev_msg(nlmsg_hdr(m), &d), -EINVAL);
	nlmsg_free(m);

	/* A u32 attribute two bytes long. */
	m = msg_new(KCOLL_CMD_DEV_GET);
	nla_put_string(m, KCOLL_A_DEV_NAME, "rxe0");
	nla_put_u16(m, KCOLL_A_DEV_INDEX, 3);
	UNIT_EQ_INT(kc_parse_dev_msg(nlmsg_hdr(m), &d), -EINVAL);
	nlmsg_free(m);

	/* A histogram that is not a whole number of u64. */
	m = msg_new(KCOLL_CMD_DEV_GET);
	nla_put_string(m, KCOLL_A_DEV_NAME, "rxe0");
	st = nla_nest_start(m, KCOLL_A_STATS);
	nla_put(m, KCOLL_A_STAT_LAT_HIST, 12, hist);
	nla_nest_end(m, st);
	UNIT_EQ_INT(kc_parse_dev_msg(nlmsg_hdr(m), &d), -EINVAL);
	nlmsg_free(m);
}

static void test_parse_comm(void)
{
	static const uint32_t ranks[] = { 4, 5, 6 };
	uint8_t addr[16] = { [10] = 0xff, [11] = 0xff, 192, 168, 1, 2 };
	struct nlattr *n, *e;
	struct nl_msg *m;
	struct kc_comm c;

	m = msg_new(KCOLL_CMD_COMM_GET);
	nla_put_u32(m, KCOLL_A_COMM_ID, 12);
	n = nla_nest_start(m, KCOLL_A_COMM_MEMBERS);
	e = nla_nest_start(m, KCOLL_A_MEMBER);
	nla_put_u32(m, KCOLL_A_RANK, 3);
	nla_put(m, KCOLL_A_MEMBER_ADDR, 16, addr);
	nla_nest_end(m, e);
	nla_put_u32(m, KCOLL_A_MAX + 1, 0);	/* not a MEMBER: skipped */
	e = nla_nest_start(m, KCOLL_A_MEMBER);
	nla_put_u32(m, KCOLL_A_RANK, 4);
	nla_nest_end(m, e);
	nla_nest_end(m, n);
	n = nla_nest_start(m, KCOLL_A_COMM_OPS);
	e = nla_nest_start(m, KCOLL_A_OP);
	nla_put_u8(m, KCOLL_A_OP_OPCODE, 7);
	nla_put(m, KCOLL_A_MISSING_RANKS, sizeof(ranks), ranks);
	nla_nest_end(m, e);
	nla_nest_end(m, n);
	n = nla_nest_start(m, KCOLL_A_COMM_LAST_ERROR);
	nla_put_u32(m, KCOLL_A_ERRNO, (uint32_t)-EPIPE);
	nla_nest_end(m, n);
	if (UNIT_EQ_INT(kc_parse_comm_msg(nlmsg_hdr(m), &c), 0)) {
		UNIT_EQ_UINT(c.id, 12);
		if (UNIT_EQ_UINT(c.n_members, 2)) {
			UNIT_EQ_UINT(c.members[0].rank, 3);
			UNIT_EQ_UINT(c.members[0].addr[12], 192);
			UNIT_EQ_UINT(c.members[1].rank, 4);
			UNIT_CHECK(!KC_HAS(&c.members[1],
					   KCOLL_A_MEMBER_ADDR));
		}
		if (UNIT_EQ_UINT(c.n_ops, 1)) {
			UNIT_EQ_UINT(c.ops[0].opcode, 7);
			UNIT_EQ_UINT(c.ops[0].missing.n, 3);
			UNIT_EQ_UINT(c.ops[0].missing.v[2], 6);
		}
		UNIT_CHECK(KC_HAS(&c, KCOLL_A_COMM_LAST_ERROR));
		UNIT_EQ_INT(c.last_error.err, -EPIPE);
		kc_comm_free(&c);
	}
	nlmsg_free(m);

	/* Missing ranks not a whole number of u32: refused, nothing leaks
	 * (the sanitizer checks). */
	m = msg_new(KCOLL_CMD_COMM_GET);
	nla_put_u32(m, KCOLL_A_COMM_ID, 12);
	n = nla_nest_start(m, KCOLL_A_COMM_OPS);
	e = nla_nest_start(m, KCOLL_A_OP);
	nla_put(m, KCOLL_A_MISSING_RANKS, 6, ranks);
	nla_nest_end(m, e);
	nla_nest_end(m, n);
	UNIT_EQ_INT(kc_parse_comm_msg(nlmsg_hdr(m), &c), -EINVAL);
	nlmsg_free(m);

	/* A short member address. */
	m = msg_new(KCOLL_CMD_COMM_GET);
	nla_put_u32(m, KCOLL_A_COMM_ID, 12);
	n = nla_nest_start(m, KCOLL_A_COMM_MEMBERS);
	e = nla_nest_start(m, KCOLL_A_MEMBER);
	nla_put(m, KCOLL_A_MEMBER_ADDR, 4, addr);
	nla_nest_end(m, e);
	nla_nest_end(m, n);
	UNIT_EQ_INT(kc_parse_comm_msg(nlmsg_hdr(m), &c), -EINVAL);
	nlmsg_free(m);

	/* No COMM_ID. */
	m = msg_new(KCOLL_CMD_COMM_GET);
	nla_put_u32(m, KCOLL_A_RANK, 1);
	UNIT_EQ_INT(kc_parse_comm_msg(nlmsg_hdr(m), &c), -EINVAL);
	nlmsg_free(m);
}

static void test_parse_tunables_event(void)
{
	struct kc_tunable *t = NULL;
	struct kc_event ev;
	struct nl_msg *m;
	struct nlattr *n;
	size_t cnt = 0;
	int i;

	/* Top-level NAME/VALUE, then a message of two TUNABLE nests. */
	m = msg_new(KCOLL_CMD_TUNABLE_GET);
	nla_put_string(m, KCOLL_A_TUNABLE_NAME, "chunk_bytes");
	nla_put_string(m, KCOLL_A_TUNABLE_VALUE, "65536");
	UNIT_EQ_INT(kc_parse_tunables_msg(nlmsg_hdr(m), &t, &cnt), 0);
	nlmsg_free(m);
	m = msg_new(KCOLL_CMD_TUNABLE_GET);
	for (i = 0; i < 2; i++) {
		n = nla_nest_start(m, KCOLL_A_TUNABLE);
		nla_put_string(m, KCOLL_A_TUNABLE_NAME, i ? "b" : "a");
		nla_put_string(m, KCOLL_A_TUNABLE_VALUE, i ? "2" : "1");
		nla_nest_end(m, n);
	}
	UNIT_EQ_INT(kc_parse_tunables_msg(nlmsg_hdr(m), &t, &cnt), 0);
	nlmsg_free(m);
	if (UNIT_EQ_UINT(cnt, 3)) {
		UNIT_EQ_STR(t[0].name, "chunk_bytes");
		UNIT_EQ_STR(t[0].value, "65536");
		UNIT_EQ_STR(t[2].name, "b");
		UNIT_EQ_STR(t[2].value, "2");
	}
	/* A value without a name. */
	m = msg_new(KCOLL_CMD_TUNABLE_GET);
	nla_put_string(m, KCOLL_A_TUNABLE_VALUE, "1");
	UNIT_EQ_INT(kc_parse_tunables_msg(nlmsg_hdr(m), &t, &cnt), -EINVAL);
	nlmsg_free(m);
	free(t);

	m = msg_new(KCOLL_CMD_EV_PEER_LOST);
	nla_put_u32(m, KCOLL_A_COMM_ID, 5);
	nla_put_u32(m, KCOLL_A_PEER_RANK, 2);
	nla_put_u32(m, KCOLL_A_ERRNO, (uint32_t)-ECONNRESET);
	if (UNIT_EQ_INT(kc_parse_event_msg(nlmsg_hdr(m), &ev), 0)) {
		UNIT_EQ_UINT(ev.cmd, KCOLL_CMD_EV_PEER_LOST);
		UNIT_EQ_UINT(ev.comm_id, 5);
		UNIT_EQ_UINT(ev.peer_rank, 2);
		UNIT_EQ_INT(ev.err, -ECONNRESET);
		UNIT_CHECK(!KC_HAS(&ev, KCOLL_A_RANK));
		kc_event_free(&ev);
	}
	nlmsg_free(m);
	/* A truncated genetlink header. */
	m = nlmsg_alloc_simple(FAKE_FAMILY_ID, 0);
	UNIT_EQ_INT(kc_parse_event_msg(nlmsg_hdr(m), &ev), -EINVAL);
	nlmsg_free(m);
}

/* An NLMSG_ERROR as the kernel builds it (capped or with the request
 * echoed), optionally with a message TLV. */
static size_t build_ack(unsigned char *buf, int err, bool capped,
			size_t req_payload, const char *text)
{
	struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
	struct nlmsgerr *e = NLMSG_DATA(nlh);
	struct nlattr *a;
	size_t len;

	memset(buf, 0, 1024);
	nlh->nlmsg_type = NLMSG_ERROR;
	nlh->nlmsg_flags = capped ? NLM_F_CAPPED : 0;
	e->error = err;
	e->msg.nlmsg_len = NLMSG_HDRLEN + req_payload;
	/* The echoed payload: bytes that look like an attribute, to catch
	 * a parser that starts reading too early. */
	if (!capped)
		memset(e + 1, 0x02, req_payload);
	len = NLMSG_HDRLEN + sizeof(e->error) +
	      (capped ? sizeof(e->msg) : e->msg.nlmsg_len);
	if (text) {
		nlh->nlmsg_flags |= NLM_F_ACK_TLVS;
		len = NLMSG_ALIGN(len);
		a = (struct nlattr *)(buf + len);
		a->nla_type = NLMSGERR_ATTR_OFFS;
		a->nla_len = NLA_HDRLEN + 4;
		len += NLA_ALIGN(a->nla_len);
		a = (struct nlattr *)(buf + len);
		a->nla_type = NLMSGERR_ATTR_MSG;
		a->nla_len = NLA_HDRLEN + strlen(text) + 1;
		strcpy((char *)a + NLA_HDRLEN, text);
		len += NLA_ALIGN(a->nla_len);
	}
	nlh->nlmsg_len = len;
	return len;
}

static void test_parse_ack(void)
{
	unsigned char buf[1024];
	char msg[64];
	int err;

	build_ack(buf, -EINVAL, true, 0, "value out of range");
	UNIT_EQ_INT(kc_parse_ack((struct nlmsghdr *)buf, &err, msg,
				 sizeof(msg)), 0);
	UNIT_EQ_INT(err, -EINVAL);
	UNIT_EQ_STR(msg, "value out of range");

	build_ack(buf, -ERANGE, false, 37, "echoed request first");
	UNIT_EQ_INT(kc_parse_ack((struct nlmsghdr *)buf, &err, msg,
				 sizeof(msg)), 0);
	UNIT_EQ_INT(err, -ERANGE);
	UNIT_EQ_STR(msg, "echoed request first");

	build_ack(buf, -EPERM, false, 20, NULL);
	UNIT_EQ_INT(kc_parse_ack((struct nlmsghdr *)buf, &err, msg,
				 sizeof(msg)), 0);
	UNIT_EQ_INT(err, -EPERM);
	UNIT_EQ_STR(msg, "");

	/* Truncated to the buffer. */
	build_ack(buf, -EINVAL, true, 0, "a rather long explanation");
	UNIT_EQ_INT(kc_parse_ack((struct nlmsghdr *)buf, &err, msg, 8), 0);
	UNIT_EQ_STR(msg, "a rathe");

	/* No errno is below -4095 (nor positive): -EPROTO, whatever came. */
	build_ack(buf, INT_MIN, false, 20, NULL);
	UNIT_EQ_INT(kc_parse_ack((struct nlmsghdr *)buf, &err, msg,
				 sizeof(msg)), 0);
	UNIT_EQ_INT(err, -EPROTO);
	build_ack(buf, 5, false, 20, NULL);
	UNIT_EQ_INT(kc_parse_ack((struct nlmsghdr *)buf, &err, msg,
				 sizeof(msg)), 0);
	UNIT_EQ_INT(err, -EPROTO);

	/* Too short for an nlmsgerr. */
	((struct nlmsghdr *)buf)->nlmsg_len = NLMSG_HDRLEN + 2;
	UNIT_EQ_INT(kc_parse_ack((struct nlmsghdr *)buf, &err, msg,
				 sizeof(msg)), -EINVAL);

	/* NLMSG_DONE of a failed dump, of a good one. */
	memset(buf, 0, sizeof(buf));
	((struct nlmsghdr *)buf)->nlmsg_type = NLMSG_DONE;
	((struct nlmsghdr *)buf)->nlmsg_len = NLMSG_LENGTH(sizeof(int));
	err = -EIO;
	memcpy(NLMSG_DATA((struct nlmsghdr *)buf), &err, sizeof(err));
	err = 0;
	UNIT_EQ_INT(kc_parse_ack((struct nlmsghdr *)buf, &err, msg,
				 sizeof(msg)), 0);
	UNIT_EQ_INT(err, -EIO);
	memset(NLMSG_DATA((struct nlmsghdr *)buf), 0, sizeof(int));
	UNIT_EQ_INT(kc_parse_ack((struct nlmsghdr *)buf, &err, msg,
				 sizeof(msg)), 0);
	UNIT_EQ_INT(err, 0);
}

/* ------------------------------------------------------------------ */
/* Requests against the model                                          */
/* ------------------------------------------------------------------ */

static bool open_resolved(struct kc_nl *nl)
{
	fake_reset();
	if (!UNIT_EQ_INT(kc_nl_open(nl), 0))
		return false;
	if (!UNIT_EQ_INT(kc_nl_resolve(nl), 0)) {
		kc_nl_close(nl);
		return false;
	}
	UNIT_EQ_INT(nl->family, FAKE_FAMILY_ID);
	return true;
}

static void test_nl_absent(void)
{
	struct kc_tunable *t;
	struct kc_nl nl;
	size_t n;

	fake_reset();
	fake.absent = true;
	if (!UNIT_EQ_INT(kc_nl_open(&nl), 0))
		return;
	UNIT_EQ_INT(kc_nl_resolve(&nl), -ENOENT);
	UNIT_EQ_INT(nl.family, 0);
	/* Nothing is sent without a family. */
	UNIT_EQ_INT(kc_nl_tunable_get(&nl, NULL, &t, &n), -ENOENT);
	UNIT_EQ_UINT(fake.requests, 0);
	/* The family comes, then goes away under a resolved socket. */
	fake.absent = false;
	UNIT_EQ_INT(kc_nl_resolve(&nl), 0);
	fake.absent = true;
	UNIT_EQ_INT(kc_nl_tunable_set(&nl, "chunk_bytes", "8192"), -ENOENT);
	kc_nl_close(&nl);
}

static void test_nl_devs(void)
{
	struct kc_dev *d;
	struct kc_nl nl;
	size_t n;

	if (!open_resolved(&nl))
		return;
	if (UNIT_EQ_INT(kc_nl_dev_dump(&nl, &d, &n), 0) &&
	    UNIT_EQ_UINT(n, 2)) {
		UNIT_EQ_STR(d[0].name, "rxe0");
		UNIT_EQ_UINT(d[0].index, 3);
		UNIT_EQ_UINT(d[0].node_guid, 0x505400fffe123456ULL);
		UNIT_EQ_UINT(d[0].port_state, 4);
		UNIT_EQ_UINT(d[0].comms, 2);
		UNIT_EQ_UINT(d[0].stats.ops, 11);
		UNIT_EQ_UINT(d[0].stats.lat[6], 7);
		UNIT_EQ_UINT(d[0].stats.lat[10], 1);
		UNIT_EQ_STR(d[1].name, "mlx5_0");
		UNIT_EQ_UINT(d[1].port_state, 1);
		UNIT_EQ_UINT(d[1].stats.ops, 0);
		UNIT_CHECK(KC_HAS(&d[1].stats, KCOLL_A_STAT_OPS));
	}
	free(d);
	/* Everything was read: the socket is in step. */
	UNIT_EQ_UINT(fake_pending(nl_socket_get_fd(nl.sk)), 0);
	kc_nl_close(&nl);
}

static void test_nl_comms(void)
{
	struct kc_comm *c;
	struct kc_nl nl;
	size_t n;

	if (!open_resolved(&nl))
		return;
	if (UNIT_EQ_INT(kc_nl_comm_get(&nl, true, 0, &c, &n), 0) &&
	    UNIT_EQ_UINT(n, 2)) {
		UNIT_EQ_UINT(c[0].id, 7);
		UNIT_EQ_UINT(c[0].uid, 0x1122334455667788ULL);
		UNIT_EQ_UINT(c[0].rank, 1);
		UNIT_EQ_UINT(c[0].nranks, 4);
		UNIT_EQ_UINT(c[0].state, KCOLL_COMM_READY);
		UNIT_EQ_STR(c[0].dev, "rxe0");
		UNIT_EQ_UINT(c[0].n_members, 4);
		UNIT_EQ_UINT(c[0].members[2].addr[0], 0xfe);
		UNIT_EQ_UINT(c[0].members[2].connected, 0);
		UNIT_EQ_UINT(c[0].n_ops, 2);
		UNIT_EQ_UINT(c[0].ops[0].seq, 17);
		UNIT_EQ_STR(c[0].ops[1].algo, "dissemination");
		UNIT_EQ_UINT(c[0].ops[1].missing.n, 0);
		UNIT_CHECK(KC_HAS(&c[0].ops[1], KCOLL_A_MISSING_RANKS));
		UNIT_EQ_INT(c[0].last_error.err, -ETIMEDOUT);
		UNIT_EQ_UINT(c[1].id, 9);
		UNIT_EQ_UINT(c[1].n_members, 0);
		UNIT_CHECK(KC_HAS(&c[1], KCOLL_A_COMM_MEMBERS));
		UNIT_CHECK(!KC_HAS(&c[1], KCOLL_A_COMM_LAST_ERROR));
		kc_comms_free(c, n);
	}
	if (UNIT_EQ_INT(kc_nl_comm_get(&nl, false, 9, &c, &n), 0) &&
	    UNIT_EQ_UINT(n, 1)) {
		UNIT_EQ_UINT(c[0].id, 9);
		UNIT_EQ_UINT(c[0].state, KCOLL_COMM_CONNECTING);
		kc_comms_free(c, n);
	}
	UNIT_EQ_INT(kc_nl_comm_get(&nl, false, 5, &c, &n), -ENOENT);
	UNIT_CHECK(!c && !n);
	/* A dump the kernel ends with an error: reported, no partial
	 * result, and the next request still works. */
	fake.dump_error = -EIO;
	UNIT_EQ_INT(kc_nl_comm_get(&nl, true, 0, &c, &n), -EIO);
	UNIT_CHECK(!c && !n);
	fake.dump_error = 0;
	UNIT_EQ_INT(kc_nl_comm_get(&nl, true, 0, &c, &n), 0);
	UNIT_EQ_UINT(n, 2);
	kc_comms_free(c, n);
	kc_nl_close(&nl);
}

static void test_nl_stats(void)
{
	struct kc_node_stats ns;
	struct kc_nl nl;

	if (!open_resolved(&nl))
		return;
	if (UNIT_EQ_INT(kc_nl_stats_get(&nl, &ns), 0)) {
		UNIT_EQ_UINT(ns.node.ops, 11);
		UNIT_EQ_UINT(ns.node.inflight, 2);
		UNIT_EQ_UINT(ns.node.contexts, 3);
		UNIT_EQ_UINT(ns.node.comms, 2);
		UNIT_EQ_UINT(ns.node.lat[7], 3);
		/* The profile, its unknown last entry left out. */
		UNIT_CHECK(KC_HAS(&ns.node, KCOLL_A_STAT_PROFILE));
		UNIT_EQ_UINT(ns.node.prof[KCOLL_NL_PROF_OPS], 10);
		UNIT_EQ_UINT(ns.node.prof[KCOLL_NL_PROF_MOVE_NS], 2500000);
		UNIT_EQ_UINT(ns.node.prof[KCOLL_NL_PROF_SETTLE_NS], 0);
		if (UNIT_EQ_UINT(ns.n_devs, 2)) {
			UNIT_CHECK(!KC_HAS(&ns.devs[0].stats,
					   KCOLL_A_STAT_PROFILE));
			UNIT_EQ_STR(ns.devs[0].name, "rxe0");
			UNIT_EQ_UINT(ns.devs[0].stats.errors, 1);
			UNIT_EQ_STR(ns.devs[1].name, "mlx5_0");
		}
		kc_node_stats_free(&ns);
	}
	/* No answer at all: an error, not a hang. */
	fake.silent = true;
	UNIT_CHECK(kc_nl_stats_get(&nl, &ns) < 0);
	kc_nl_close(&nl);
}

static void test_nl_tunables(void)
{
	struct kc_tunable *t;
	struct kc_nl nl;
	size_t n;

	if (!open_resolved(&nl))
		return;
	if (UNIT_EQ_INT(kc_nl_tunable_get(&nl, NULL, &t, &n), 0) &&
	    UNIT_EQ_UINT(n, 5)) {
		UNIT_EQ_STR(t[0].name, "chunk_bytes");
		UNIT_EQ_STR(t[0].value, "65536");
		UNIT_EQ_STR(t[3].name, "algo/allreduce");
		UNIT_EQ_STR(t[3].value, "auto");
		UNIT_EQ_STR(t[4].name, "devices");
		UNIT_EQ_STR(t[4].value, "*");
	}
	free(t);
	if (UNIT_EQ_INT(kc_nl_tunable_get(&nl, "prio_sched", &t, &n), 0) &&
	    UNIT_EQ_UINT(n, 1)) {
		UNIT_EQ_STR(t[0].name, "prio_sched");
		UNIT_EQ_STR(t[0].value, "1");
	}
	free(t);
	UNIT_EQ_INT(kc_nl_tunable_get(&nl, "nope", &t, &n), -ENOENT);

	UNIT_EQ_INT(kc_nl_tunable_set(&nl, "chunk_bytes", "131072"), 0);
	UNIT_EQ_STR(fake_tunable("chunk_bytes"), "131072");
	UNIT_EQ_STR(nl.errmsg, "");
	/* Out of range: the kernel's reason comes along. */
	UNIT_EQ_INT(kc_nl_tunable_set(&nl, "chunk_bytes", "1"), -EINVAL);
	UNIT_EQ_STR(nl.errmsg, "chunk_bytes: 4096 to 4194304");
	UNIT_EQ_STR(fake_tunable("chunk_bytes"), "131072");
	UNIT_EQ_INT(kc_nl_tunable_set(&nl, "algo/allreduce", "ring"), 0);
	UNIT_EQ_STR(nl.errmsg, "");
	UNIT_EQ_STR(fake_tunable("algo/allreduce"), "ring");
	UNIT_EQ_INT(kc_nl_tunable_set(&nl, "nope", "1"), -ENOENT);
	fake.unpriv = true;
	UNIT_EQ_INT(kc_nl_tunable_set(&nl, "prio_sched", "0"), -EPERM);
	UNIT_EQ_STR(fake_tunable("prio_sched"), "1");
	UNIT_EQ_UINT(fake.sets, 2);
	UNIT_EQ_UINT(fake_pending(nl_socket_get_fd(nl.sk)), 0);
	kc_nl_close(&nl);
}

/* ------------------------------------------------------------------ */
/* Events                                                              */
/* ------------------------------------------------------------------ */

struct ev_log {
	char what[16][64];
	int n;
};

static void ev_add(struct ev_log *l, const char *fmt, unsigned int a,
		   unsigned int b)
{
	if (l->n < 16)
		snprintf(l->what[l->n++], sizeof(l->what[0]), fmt, a, b);
}

static void on_event(const struct kc_event *ev, void *arg)
{
	ev_add(arg, "event %u comm %u", ev->cmd, ev->comm_id);
}

static void on_family(bool present, void *arg)
{
	ev_add(arg, "family %u%u", present, 0);
}

static void on_bad(const char *what, int err, void *arg)
{
	(void)what;
	ev_add(arg, "bad %u%u", -err, 0);
}

static const struct kc_ev_ops ev_ops = {
	.event = on_event, .family = on_family, .bad = on_bad,
};

static void test_evsock(void)
{
	struct ev_log log = { .n = 0 };
	struct kc_evsock es;
	struct nl_msg *m;
	struct kc_nl nl;
	int fd;

	if (!open_resolved(&nl))
		return;
	if (!UNIT_EQ_INT(kc_evsock_open(&es, &nl, true, &ev_ops, &log), 0))
		goto out_nl;
	fd = kc_evsock_fd(&es);
	UNIT_CHECK(fake_member(fd, FAKE_NOTIFY_GROUP));
	UNIT_EQ_INT(kc_evsock_join(&es, &nl), 0);
	UNIT_EQ_INT(es.group, FAKE_EVENTS_GROUP);
	UNIT_EQ_INT(es.family, FAKE_FAMILY_ID);
	UNIT_CHECK(fake_member(fd, FAKE_EVENTS_GROUP));
	/* Nothing queued: returns at once (non-blocking). */
	UNIT_EQ_INT(kc_evsock_process(&es), 0);
	UNIT_EQ_INT(log.n, 0);

	m = msg_new(KCOLL_CMD_EV_COMM_CREATED);
	nla_put_u32(m, KCOLL_A_COMM_ID, 4);
	fake_queue_msg(fd, m);
	nlmsg_free(m);
	m = msg_new(KCOLL_CMD_EV_OP_TIMEOUT);	/* malformed: 1-byte u32 */
	nla_put_u8(m, KCOLL_A_RANK, 1);
	fake_queue_msg(fd, m);
	nlmsg_free(m);
	m = nlmsg_alloc();			/* another family: ignored */
	genlmsg_put(m, 0, 0, FAKE_FAMILY_ID + 1, 0, 0, 1, 1);
	fake_queue_msg(fd, m);
	nlmsg_free(m);
	fake_queue_ctrl(fd, true, "other");	/* not ours: ignored */
	fake_queue_ctrl(fd, false, KCOLL_GENL_NAME);
	fake_queue_ctrl(fd, true, KCOLL_GENL_NAME);
	m = msg_new(KCOLL_CMD_EV_COMM_DESTROYED);
	nla_put_u32(m, KCOLL_A_COMM_ID, 4);
	fake_queue_msg(fd, m);
	nlmsg_free(m);
	UNIT_EQ_INT(kc_evsock_process(&es), 0);
	UNIT_EQ_UINT(fake_pending(fd), 0);
	if (UNIT_EQ_INT(log.n, 5)) {
		UNIT_EQ_STR(log.what[0], "event 6 comm 4");
		UNIT_EQ_STR(log.what[1], "bad 220");	/* EINVAL */
		UNIT_EQ_STR(log.what[2], "family 00");
		UNIT_EQ_STR(log.what[3], "family 10");
		UNIT_EQ_STR(log.what[4], "event 7 comm 4");
	}

	/* Overflow: reported as such. */
	fake.enobufs = 1;
	UNIT_EQ_INT(kc_evsock_process(&es), -ENOBUFS);

	/* Leaving: no longer a member, events of the old id ignored. */
	kc_evsock_leave(&es);
	UNIT_CHECK(!fake_member(fd, FAKE_EVENTS_GROUP));
	UNIT_EQ_INT(es.family, 0);
	log.n = 0;
	m = msg_new(KCOLL_CMD_EV_COMM_CREATED);
	fake_queue_msg(fd, m);
	nlmsg_free(m);
	UNIT_EQ_INT(kc_evsock_process(&es), 0);
	UNIT_EQ_INT(log.n, 0);
	kc_evsock_close(&es);
out_nl:
	kc_nl_close(&nl);
}

int main(int argc, char **argv)
{
	unit_init(argc, argv);
	UNIT_RUN(test_parse_dev);
	UNIT_RUN(test_parse_comm);
	UNIT_RUN(test_parse_tunables_event);
	UNIT_RUN(test_parse_ack);
	UNIT_RUN(test_nl_absent);
	UNIT_RUN(test_nl_devs);
	UNIT_RUN(test_nl_comms);
	UNIT_RUN(test_nl_stats);
	UNIT_RUN(test_nl_tunables);
	UNIT_RUN(test_evsock);
	return unit_done();
}
