// SPDX-License-Identifier: MIT
/* Netlink messages of the kcoll family into kc_model.h structs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <linux/genetlink.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include "kc_nlparse.h"

typedef struct nlattr *kc_tb[KCOLL_A_MAX + 1];

/* The one policy of the family's attribute space (nests reuse it). Binary
 * attributes are NLA_UNSPEC with a minimum length, checked again below. */
static struct nla_policy kc_policy[KCOLL_A_MAX + 1] = {
	[KCOLL_A_DEV_NAME]		= { .type = NLA_STRING },
	[KCOLL_A_DEV_INDEX]		= { .type = NLA_U32 },
	[KCOLL_A_DEV_NODE_GUID]		= { .type = NLA_U64 },
	[KCOLL_A_DEV_PORT_STATE]	= { .type = NLA_U8 },
	[KCOLL_A_DEV_COMMS]		= { .type = NLA_U32 },
	[KCOLL_A_DEV]			= { .type = NLA_NESTED },
	[KCOLL_A_COMM_ID]		= { .type = NLA_U32 },
	[KCOLL_A_COMM_UID]		= { .type = NLA_U64 },
	[KCOLL_A_COMM_PID]		= { .type = NLA_U32 },
	[KCOLL_A_RANK]			= { .type = NLA_U32 },
	[KCOLL_A_NRANKS]		= { .type = NLA_U32 },
	[KCOLL_A_COMM_STATE]		= { .type = NLA_U8 },
	[KCOLL_A_COMM_INFLIGHT]		= { .type = NLA_U32 },
	[KCOLL_A_COMM_MEMBERS]		= { .type = NLA_NESTED },
	[KCOLL_A_MEMBER]		= { .type = NLA_NESTED },
	[KCOLL_A_MEMBER_ADDR]		= { .type = NLA_UNSPEC, .minlen = 16 },
	[KCOLL_A_MEMBER_PORT]		= { .type = NLA_U16 },
	[KCOLL_A_MEMBER_LOCAL_INDEX]	= { .type = NLA_U16 },
	[KCOLL_A_MEMBER_CONNECTED]	= { .type = NLA_U8 },
	[KCOLL_A_COMM_OPS]		= { .type = NLA_NESTED },
	[KCOLL_A_OP]			= { .type = NLA_NESTED },
	[KCOLL_A_OP_SEQ]		= { .type = NLA_U64 },
	[KCOLL_A_OP_OPCODE]		= { .type = NLA_U8 },
	[KCOLL_A_OP_ALGO]		= { .type = NLA_STRING },
	[KCOLL_A_OP_PRIO]		= { .type = NLA_U8 },
	[KCOLL_A_OP_BYTES]		= { .type = NLA_U64 },
	[KCOLL_A_OP_AGE_MS]		= { .type = NLA_U64 },
	[KCOLL_A_OP_TIMEOUT_MS]		= { .type = NLA_U32 },
	[KCOLL_A_MISSING_RANKS]		= { .type = NLA_UNSPEC },
	[KCOLL_A_PEER_RANK]		= { .type = NLA_U32 },
	[KCOLL_A_ERRNO]			= { .type = NLA_U32 },
	[KCOLL_A_COMM_LAST_ERROR]	= { .type = NLA_NESTED },
	[KCOLL_A_STATS]			= { .type = NLA_NESTED },
	[KCOLL_A_STAT_OPS]		= { .type = NLA_U64 },
	[KCOLL_A_STAT_BYTES]		= { .type = NLA_U64 },
	[KCOLL_A_STAT_ERRORS]		= { .type = NLA_U64 },
	[KCOLL_A_STAT_TIMEOUTS]		= { .type = NLA_U64 },
	[KCOLL_A_STAT_LAT_HIST]		= { .type = NLA_UNSPEC },
	[KCOLL_A_STAT_INFLIGHT]		= { .type = NLA_U64 },
	[KCOLL_A_STAT_CONTEXTS]		= { .type = NLA_U64 },
	[KCOLL_A_STAT_COMMS]		= { .type = NLA_U64 },
	[KCOLL_A_STAT_PROFILE]		= { .type = NLA_UNSPEC },
	[KCOLL_A_TUNABLE]		= { .type = NLA_NESTED },
	[KCOLL_A_TUNABLE_NAME]		= { .type = NLA_STRING },
	[KCOLL_A_TUNABLE_VALUE]		= { .type = NLA_STRING },
	[KCOLL_A_COST_ALPHA_NS]		= { .type = NLA_U32 },
	[KCOLL_A_COST_BETA_PS]		= { .type = NLA_U32 },
	[KCOLL_A_COST_GAMMA_PS]		= { .type = NLA_U32 },
	[KCOLL_A_DEV_ENABLED]		= { .type = NLA_U8 },
	[KCOLL_A_COMM_PARENT_UID]	= { .type = NLA_U64 },
	[KCOLL_A_COMM_PARTIAL]		= { .type = NLA_U8 },
};


static uint64_t kc_have(kc_tb tb)
{
	uint64_t have = 0;
	int i;

	for (i = 1; i <= KCOLL_A_MAX; i++)
		if (tb[i])
			have |= KC_BIT(i);
	return have;
}

static int kc_parse_nest(kc_tb tb, struct nlattr *nest)
{
	return nla_parse_nested(tb, KCOLL_A_MAX, nest, kc_policy) ? -EINVAL
								   : 0;
}

static int kc_parse_top(kc_tb tb, struct nlmsghdr *nlh)
{
	if (!genlmsg_valid_hdr(nlh, 0))
		return -EINVAL;
	return genlmsg_parse(nlh, 0, tb, KCOLL_A_MAX, kc_policy) ? -EINVAL
								 : 0;
}

static void kc_get_str(char *dst, size_t len, struct nlattr *a)
{
	if (a)
		nla_strlcpy(dst, a, len);
}

#define KC_GET(tb, attr, dst, fn) \
	do { if ((tb)[attr]) (dst) = fn((tb)[attr]); } while (0)

static void kc_fill_cost(kc_tb tb, struct kc_cost *c)
{
	KC_GET(tb, KCOLL_A_COST_ALPHA_NS, c->alpha_ns, nla_get_u32);
	KC_GET(tb, KCOLL_A_COST_BETA_PS, c->beta_ps, nla_get_u32);
	KC_GET(tb, KCOLL_A_COST_GAMMA_PS, c->gamma_ps, nla_get_u32);
}

static int kc_get_ranks(struct nlattr *a, struct kc_ranks *r)
{
	int len;

	r->v = NULL;
	r->n = 0;
	if (!a)
		return 0;
	len = nla_len(a);
	if (len % sizeof(uint32_t))
		return -EINVAL;
	if (!len)
		return 0;
	r->v = malloc(len);
	if (!r->v)
		return -ENOMEM;
	memcpy(r->v, nla_data(a), len);
	r->n = len / sizeof(uint32_t);
	return 0;
}

int kc_parse_stats(struct nlattr *nest, struct kc_stats *st)
{
	kc_tb tb;
	int len, ret;

	memset(st, 0, sizeof(*st));
	ret = kc_parse_nest(tb, nest);
	if (ret)
		return ret;
	st->have = kc_have(tb);
	KC_GET(tb, KCOLL_A_STAT_OPS, st->ops, nla_get_u64);
	KC_GET(tb, KCOLL_A_STAT_BYTES, st->bytes, nla_get_u64);
	KC_GET(tb, KCOLL_A_STAT_ERRORS, st->errors, nla_get_u64);
	KC_GET(tb, KCOLL_A_STAT_TIMEOUTS, st->timeouts, nla_get_u64);
	KC_GET(tb, KCOLL_A_STAT_INFLIGHT, st->inflight, nla_get_u64);
	KC_GET(tb, KCOLL_A_STAT_CONTEXTS, st->contexts, nla_get_u64);
	KC_GET(tb, KCOLL_A_STAT_COMMS, st->comms, nla_get_u64);
	if (tb[KCOLL_A_STAT_LAT_HIST]) {
		len = nla_len(tb[KCOLL_A_STAT_LAT_HIST]);
		if (len % sizeof(uint64_t))
			return -EINVAL;
		/* A longer histogram from a newer kernel: its first buckets
		 * mean the same. */
		if ((size_t)len > sizeof(st->lat))
			len = sizeof(st->lat);
		memcpy(st->lat, nla_data(tb[KCOLL_A_STAT_LAT_HIST]), len);
	}
	if (tb[KCOLL_A_STAT_PROFILE]) {
		len = nla_len(tb[KCOLL_A_STAT_PROFILE]);
		if (len % sizeof(uint64_t))
			return -EINVAL;
		/* A newer kernel's appended entries are left out; an
		 * older one's missing ones stay 0. */
		if ((size_t)len > sizeof(st->prof))
			len = sizeof(st->prof);
		memcpy(st->prof, nla_data(tb[KCOLL_A_STAT_PROFILE]), len);
	}
	return 0;
}

/* DEV_* and STATS of a DEV_GET reply or of a DEV nest. */
static int kc_fill_dev(kc_tb tb, struct kc_dev *d)
{
	memset(d, 0, sizeof(*d));
	if (!tb[KCOLL_A_DEV_NAME])
		return -EINVAL;
	d->have = kc_have(tb);
	kc_get_str(d->name, sizeof(d->name), tb[KCOLL_A_DEV_NAME]);
	KC_GET(tb, KCOLL_A_DEV_INDEX, d->index, nla_get_u32);
	KC_GET(tb, KCOLL_A_DEV_NODE_GUID, d->node_guid, nla_get_u64);
	KC_GET(tb, KCOLL_A_DEV_PORT_STATE, d->port_state, nla_get_u8);
	KC_GET(tb, KCOLL_A_DEV_COMMS, d->comms, nla_get_u32);
	KC_GET(tb, KCOLL_A_DEV_ENABLED, d->enabled, nla_get_u8);
	kc_fill_cost(tb, &d->cost);
	if (tb[KCOLL_A_STATS])
		return kc_parse_stats(tb[KCOLL_A_STATS], &d->stats);
	return 0;
}

int kc_parse_dev_msg(struct nlmsghdr *nlh, struct kc_dev *d)
{
	kc_tb tb;
	int ret;

	ret = kc_parse_top(tb, nlh);
	return ret ? ret : kc_fill_dev(tb, d);
}

/* Nested attributes of type @type inside @nest. */
static size_t kc_count_nested(struct nlattr *nest, int type)
{
	struct nlattr *a;
	size_t n = 0;
	int rem;

	nla_for_each_nested(a, nest, rem)
		if (nla_type(a) == type)
			n++;
	return n;
}

static int kc_fill_member(struct nlattr *nest, struct kc_member *m)
{
	kc_tb tb;
	int ret;

	ret = kc_parse_nest(tb, nest);
	if (ret)
		return ret;
	m->have = kc_have(tb);
	KC_GET(tb, KCOLL_A_RANK, m->rank, nla_get_u32);
	if (tb[KCOLL_A_MEMBER_ADDR])
		memcpy(m->addr, nla_data(tb[KCOLL_A_MEMBER_ADDR]),
		       sizeof(m->addr));
	KC_GET(tb, KCOLL_A_MEMBER_PORT, m->port, nla_get_u16);
	KC_GET(tb, KCOLL_A_MEMBER_LOCAL_INDEX, m->local_index, nla_get_u16);
	KC_GET(tb, KCOLL_A_MEMBER_CONNECTED, m->connected, nla_get_u8);
	return 0;
}

static int kc_fill_op(struct nlattr *nest, struct kc_op *op)
{
	kc_tb tb;
	int ret;

	ret = kc_parse_nest(tb, nest);
	if (ret)
		return ret;
	op->have = kc_have(tb);
	KC_GET(tb, KCOLL_A_OP_SEQ, op->seq, nla_get_u64);
	KC_GET(tb, KCOLL_A_OP_OPCODE, op->opcode, nla_get_u8);
	kc_get_str(op->algo, sizeof(op->algo), tb[KCOLL_A_OP_ALGO]);
	KC_GET(tb, KCOLL_A_OP_PRIO, op->prio, nla_get_u8);
	KC_GET(tb, KCOLL_A_OP_BYTES, op->bytes, nla_get_u64);
	KC_GET(tb, KCOLL_A_OP_AGE_MS, op->age_ms, nla_get_u64);
	KC_GET(tb, KCOLL_A_OP_TIMEOUT_MS, op->timeout_ms, nla_get_u32);
	return kc_get_ranks(tb[KCOLL_A_MISSING_RANKS], &op->missing);
}

static int kc_fill_lasterr(struct nlattr *nest, struct kc_lasterr *le)
{
	kc_tb tb;
	int ret;

	ret = kc_parse_nest(tb, nest);
	if (ret)
		return ret;
	le->have = kc_have(tb);
	KC_GET(tb, KCOLL_A_OP_SEQ, le->seq, nla_get_u64);
	KC_GET(tb, KCOLL_A_OP_OPCODE, le->opcode, nla_get_u8);
	KC_GET(tb, KCOLL_A_ERRNO, le->err, (int32_t)nla_get_u32);
	return kc_get_ranks(tb[KCOLL_A_MISSING_RANKS], &le->missing);
}

static int kc_fill_members(struct nlattr *nest, struct kc_comm *c)
{
	size_t n = kc_count_nested(nest, KCOLL_A_MEMBER);
	struct nlattr *a;
	int rem, ret;

	if (!n)
		return 0;
	c->members = calloc(n, sizeof(*c->members));
	if (!c->members)
		return -ENOMEM;
	nla_for_each_nested(a, nest, rem) {
		if (nla_type(a) != KCOLL_A_MEMBER)
			continue;
		ret = kc_fill_member(a, &c->members[c->n_members++]);
		if (ret)
			return ret;
	}
	return 0;
}

static int kc_fill_ops(struct nlattr *nest, struct kc_comm *c)
{
	size_t n = kc_count_nested(nest, KCOLL_A_OP);
	struct nlattr *a;
	int rem, ret;

	if (!n)
		return 0;
	c->ops = calloc(n, sizeof(*c->ops));
	if (!c->ops)
		return -ENOMEM;
	nla_for_each_nested(a, nest, rem) {
		if (nla_type(a) != KCOLL_A_OP)
			continue;
		ret = kc_fill_op(a, &c->ops[c->n_ops++]);
		if (ret)
			return ret;
	}
	return 0;
}

static int kc_fill_comm(kc_tb tb, struct kc_comm *c)
{
	int ret = 0;

	c->have = kc_have(tb);
	KC_GET(tb, KCOLL_A_COMM_ID, c->id, nla_get_u32);
	KC_GET(tb, KCOLL_A_COMM_UID, c->uid, nla_get_u64);
	KC_GET(tb, KCOLL_A_COMM_PARENT_UID, c->parent_uid, nla_get_u64);
	KC_GET(tb, KCOLL_A_COMM_PID, c->pid, nla_get_u32);
	KC_GET(tb, KCOLL_A_RANK, c->rank, nla_get_u32);
	KC_GET(tb, KCOLL_A_NRANKS, c->nranks, nla_get_u32);
	KC_GET(tb, KCOLL_A_COMM_STATE, c->state, nla_get_u8);
	kc_get_str(c->dev, sizeof(c->dev), tb[KCOLL_A_DEV_NAME]);
	KC_GET(tb, KCOLL_A_COMM_INFLIGHT, c->inflight, nla_get_u32);
	kc_fill_cost(tb, &c->cost);
	if (tb[KCOLL_A_COMM_MEMBERS])
		ret = kc_fill_members(tb[KCOLL_A_COMM_MEMBERS], c);
	if (!ret && tb[KCOLL_A_COMM_OPS])
		ret = kc_fill_ops(tb[KCOLL_A_COMM_OPS], c);
	if (!ret && tb[KCOLL_A_COMM_LAST_ERROR])
		ret = kc_fill_lasterr(tb[KCOLL_A_COMM_LAST_ERROR],
				      &c->last_error);
	if (!ret && tb[KCOLL_A_STATS])
		ret = kc_parse_stats(tb[KCOLL_A_STATS], &c->stats);
	return ret;
}

int kc_parse_comm_msg(struct nlmsghdr *nlh, struct kc_comm *c)
{
	kc_tb tb;
	int ret;

	memset(c, 0, sizeof(*c));
	ret = kc_parse_top(tb, nlh);
	if (ret)
		return ret;
	if (!tb[KCOLL_A_COMM_ID])
		return -EINVAL;
	ret = kc_fill_comm(tb, c);
	if (ret)
		kc_comm_free(c);
	return ret;
}

int kc_parse_stats_msg(struct nlmsghdr *nlh, struct kc_node_stats *ns)
{
	struct genlmsghdr *gh;
	struct nlattr *a;
	kc_tb tb, dtb;
	size_t n = 0;
	int rem, ret;

	memset(ns, 0, sizeof(*ns));
	ret = kc_parse_top(tb, nlh);
	if (ret)
		return ret;
	if (tb[KCOLL_A_STATS]) {
		ret = kc_parse_stats(tb[KCOLL_A_STATS], &ns->node);
		if (ret)
			return ret;
	}
	gh = nlmsg_data(nlh);
	nla_for_each_attr(a, genlmsg_attrdata(gh, 0), genlmsg_attrlen(gh, 0),
			  rem)
		if (nla_type(a) == KCOLL_A_DEV)
			n++;
	if (!n)
		return 0;
	ns->devs = calloc(n, sizeof(*ns->devs));
	if (!ns->devs)
		return -ENOMEM;
	nla_for_each_attr(a, genlmsg_attrdata(gh, 0), genlmsg_attrlen(gh, 0),
			  rem) {
		if (nla_type(a) != KCOLL_A_DEV)
			continue;
		ret = kc_parse_nest(dtb, a);
		if (!ret)
			ret = kc_fill_dev(dtb, &ns->devs[ns->n_devs++]);
		if (ret) {
			kc_node_stats_free(ns);
			return ret;
		}
	}
	return 0;
}

static int kc_add_tunable(kc_tb tb, struct kc_tunable **arr, size_t *n)
{
	struct kc_tunable *t;

	if (!tb[KCOLL_A_TUNABLE_NAME] || !tb[KCOLL_A_TUNABLE_VALUE])
		return -EINVAL;
	t = realloc(*arr, (*n + 1) * sizeof(**arr));
	if (!t)
		return -ENOMEM;
	*arr = t;
	t += (*n)++;
	kc_get_str(t->name, sizeof(t->name), tb[KCOLL_A_TUNABLE_NAME]);
	kc_get_str(t->value, sizeof(t->value), tb[KCOLL_A_TUNABLE_VALUE]);
	return 0;
}

int kc_parse_tunables_msg(struct nlmsghdr *nlh, struct kc_tunable **arr,
			  size_t *n)
{
	struct genlmsghdr *gh;
	struct nlattr *a;
	kc_tb tb, ttb;
	int rem, ret;

	ret = kc_parse_top(tb, nlh);
	if (ret)
		return ret;
	if (!tb[KCOLL_A_TUNABLE])
		return kc_add_tunable(tb, arr, n);
	gh = nlmsg_data(nlh);
	nla_for_each_attr(a, genlmsg_attrdata(gh, 0), genlmsg_attrlen(gh, 0),
			  rem) {
		if (nla_type(a) != KCOLL_A_TUNABLE)
			continue;
		ret = kc_parse_nest(ttb, a);
		if (!ret)
			ret = kc_add_tunable(ttb, arr, n);
		if (ret)
			return ret;
	}
	return 0;
}

int kc_parse_event_msg(struct nlmsghdr *nlh, struct kc_event *ev)
{
	kc_tb tb;
	int ret;

	memset(ev, 0, sizeof(*ev));
	ret = kc_parse_top(tb, nlh);
	if (ret)
		return ret;
	ev->cmd = ((struct genlmsghdr *)nlmsg_data(nlh))->cmd;
	ev->have = kc_have(tb);
	KC_GET(tb, KCOLL_A_COMM_ID, ev->comm_id, nla_get_u32);
	KC_GET(tb, KCOLL_A_COMM_UID, ev->uid, nla_get_u64);
	KC_GET(tb, KCOLL_A_COMM_PARENT_UID, ev->parent_uid, nla_get_u64);
	KC_GET(tb, KCOLL_A_COMM_PID, ev->pid, nla_get_u32);
	KC_GET(tb, KCOLL_A_RANK, ev->rank, nla_get_u32);
	KC_GET(tb, KCOLL_A_NRANKS, ev->nranks, nla_get_u32);
	kc_get_str(ev->dev, sizeof(ev->dev), tb[KCOLL_A_DEV_NAME]);
	KC_GET(tb, KCOLL_A_DEV_INDEX, ev->dev_index, nla_get_u32);
	KC_GET(tb, KCOLL_A_OP_SEQ, ev->seq, nla_get_u64);
	KC_GET(tb, KCOLL_A_OP_OPCODE, ev->opcode, nla_get_u8);
	KC_GET(tb, KCOLL_A_OP_TIMEOUT_MS, ev->timeout_ms, nla_get_u32);
	KC_GET(tb, KCOLL_A_PEER_RANK, ev->peer_rank, nla_get_u32);
	KC_GET(tb, KCOLL_A_ERRNO, ev->err, (int32_t)nla_get_u32);
	KC_GET(tb, KCOLL_A_COMM_INFLIGHT, ev->inflight, nla_get_u32);
	return kc_get_ranks(tb[KCOLL_A_MISSING_RANKS], &ev->missing);
}

int kc_parse_ctrl_msg(struct nlmsghdr *nlh, uint8_t *cmd, char *name,
		      size_t len, uint16_t *id)
{
	static struct nla_policy pol[CTRL_ATTR_MAX + 1] = {
		[CTRL_ATTR_FAMILY_ID]	= { .type = NLA_U16 },
		[CTRL_ATTR_FAMILY_NAME]	= { .type = NLA_STRING },
	};
	struct nlattr *tb[CTRL_ATTR_MAX + 1];

	if (!genlmsg_valid_hdr(nlh, 0) ||
	    genlmsg_parse(nlh, 0, tb, CTRL_ATTR_MAX, pol))
		return -EINVAL;
	*cmd = ((struct genlmsghdr *)nlmsg_data(nlh))->cmd;
	if (len)
		name[0] = '\0';
	kc_get_str(name, len, tb[CTRL_ATTR_FAMILY_NAME]);
	*id = tb[CTRL_ATTR_FAMILY_ID] ? nla_get_u16(tb[CTRL_ATTR_FAMILY_ID])
				      : 0;
	return 0;
}

/* The extended ack TLVs after the fixed part of an NLMSG_ERROR/DONE. */
static void kc_parse_ack_tlvs(const struct nlmsghdr *nlh, size_t off,
			      char *msg, size_t len)
{
	size_t total = nlh->nlmsg_len - NLMSG_HDRLEN;
	const struct nlattr *a;
	int rem;

	off = NLMSG_ALIGN(off);
	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS) || off >= total)
		return;
	a = (const struct nlattr *)((const char *)NLMSG_DATA(nlh) + off);
	rem = total - off;
	for (; nla_ok(a, rem); a = nla_next(a, &rem)) {
		if (nla_type(a) != NLMSGERR_ATTR_MSG || !len)
			continue;
		/* A string attribute: copy no further than its payload. */
		nla_strlcpy(msg, a, len);
	}
}

int kc_parse_ack(const struct nlmsghdr *nlh, int *error, char *msg,
		 size_t len)
{
	const struct nlmsgerr *e = NLMSG_DATA(nlh);
	size_t total;
	size_t off;

	if (len)
		msg[0] = '\0';
	if (nlh->nlmsg_len < NLMSG_HDRLEN)
		return -EINVAL;
	total = nlh->nlmsg_len - NLMSG_HDRLEN;
	if (nlh->nlmsg_type == NLMSG_DONE) {
		/* A dump's end: an int, negative if the dump failed. */
		*error = 0;
		if (total >= sizeof(int))
			memcpy(error, NLMSG_DATA(nlh), sizeof(int));
		if (*error > 0)
			*error = 0;
		*error = kc_errno_sane(*error);
		kc_parse_ack_tlvs(nlh, sizeof(int), msg, len);
		return 0;
	}
	if (nlh->nlmsg_type != NLMSG_ERROR || total < sizeof(*e))
		return -EINVAL;
	*error = kc_errno_sane(e->error);
	/* The request is echoed after the error unless the ack is capped. */
	off = sizeof(e->error) + ((nlh->nlmsg_flags & NLM_F_CAPPED) ?
				  sizeof(e->msg) : e->msg.nlmsg_len);
	kc_parse_ack_tlvs(nlh, off, msg, len);
	return 0;
}
