// SPDX-License-Identifier: MIT
/* Text and JSON views of the kc_model.h structs, see kc_render.h. */
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <syslog.h>

#include <json-c/json.h>

#include "kc_fmt.h"
#include "kc_render.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* JSON                                                                */
/* ------------------------------------------------------------------ */

static void kc_jadd(struct json_object *o, const char *key,
		    struct json_object *v)
{
	json_object_object_add(o, key, v);
}

static void kc_jadd_u64(struct json_object *o, const char *key, uint64_t v)
{
	kc_jadd(o, key, json_object_new_uint64(v));
}

static void kc_jadd_int(struct json_object *o, const char *key, int64_t v)
{
	kc_jadd(o, key, json_object_new_int64(v));
}

static void kc_jadd_str(struct json_object *o, const char *key,
			const char *s)
{
	kc_jadd(o, key, json_object_new_string(s));
}

static void kc_jadd_uid(struct json_object *o, const char *key, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "0x%016" PRIx64, v);
	kc_jadd_str(o, key, buf);
}

static void kc_jadd_opcode(struct json_object *o, const char *key,
			   unsigned int op)
{
	char buf[16];

	kc_jadd_str(o, key, kc_opcode_str(op, buf, sizeof(buf)));
}

static struct json_object *kc_json_ranks(const struct kc_ranks *r)
{
	struct json_object *a = json_object_new_array();
	uint32_t i;

	for (i = 0; a && i < r->n; i++)
		json_object_array_add(a, json_object_new_int64(r->v[i]));
	return a;
}

/* Non-empty buckets: [{"from_us": 64, "to_us": 128, "count": 12}]. */
static struct json_object *kc_json_hist(const uint64_t *lat)
{
	struct json_object *a = json_object_new_array(), *b;
	unsigned int i;

	for (i = 0; a && i < KCOLL_NL_LAT_BUCKETS; i++) {
		if (!lat[i])
			continue;
		b = json_object_new_object();
		if (!b)
			break;
		kc_jadd_u64(b, "from_us", kc_hist_lower_us(i));
		if (kc_hist_upper_us(i))
			kc_jadd_u64(b, "to_us", kc_hist_upper_us(i));
		else
			kc_jadd(b, "to_us", NULL);
		kc_jadd_u64(b, "count", lat[i]);
		json_object_array_add(a, b);
	}
	return a;
}

/* The cost model's inputs: {"alpha_ns": .., "beta_ps": .., "gamma_ps": ..}. */
static struct json_object *kc_json_cost(const struct kc_cost *c)
{
	struct json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	kc_jadd_int(o, "alpha_ns", c->alpha_ns);
	kc_jadd_int(o, "beta_ps", c->beta_ps);
	kc_jadd_int(o, "gamma_ps", c->gamma_ps);
	return o;
}

/* " cost alpha 5000ns beta 80ps/B gamma 40ps/B" */
static void kc_text_cost(FILE *f, const struct kc_cost *c)
{
	fprintf(f, " cost alpha %uns beta %ups/B gamma %ups/B", c->alpha_ns,
		c->beta_ps, c->gamma_ps);
}

static struct json_object *kc_json_profile(const uint64_t *prof)
{
	struct json_object *o = json_object_new_object();
	size_t i;

	if (!o)
		return NULL;
	for (i = 0; i < KCOLL_NL_PROF_NR; i++)
		kc_jadd_u64(o, kc_prof_names[i], prof[i]);
	return o;
}

struct json_object *kc_json_stats(const struct kc_stats *st)
{
	static const struct {
		int attr;
		const char *key;
		size_t off;
	} fields[] = {
		{ KCOLL_A_STAT_OPS, "ops", offsetof(struct kc_stats, ops) },
		{ KCOLL_A_STAT_BYTES, "bytes",
		  offsetof(struct kc_stats, bytes) },
		{ KCOLL_A_STAT_ERRORS, "errors",
		  offsetof(struct kc_stats, errors) },
		{ KCOLL_A_STAT_TIMEOUTS, "timeouts",
		  offsetof(struct kc_stats, timeouts) },
		{ KCOLL_A_STAT_INFLIGHT, "inflight",
		  offsetof(struct kc_stats, inflight) },
		{ KCOLL_A_STAT_CONTEXTS, "contexts",
		  offsetof(struct kc_stats, contexts) },
		{ KCOLL_A_STAT_COMMS, "comms",
		  offsetof(struct kc_stats, comms) },
	};
	struct json_object *o = json_object_new_object();
	size_t i;

	if (!o)
		return NULL;
	for (i = 0; i < ARRAY_SIZE(fields); i++)
		if (KC_HAS(st, fields[i].attr))
			kc_jadd_u64(o, fields[i].key,
				    *(const uint64_t *)((const char *)st +
							fields[i].off));
	if (KC_HAS(st, KCOLL_A_STAT_LAT_HIST))
		kc_jadd(o, "latency", kc_json_hist(st->lat));
	if (KC_HAS(st, KCOLL_A_STAT_PROFILE))
		kc_jadd(o, "profile", kc_json_profile(st->prof));
	return o;
}

struct json_object *kc_json_dev(const struct kc_dev *d)
{
	struct json_object *o = json_object_new_object();
	char buf[KC_GUID_STRLEN];

	if (!o)
		return NULL;
	kc_jadd_str(o, "name", d->name);
	if (KC_HAS(d, KCOLL_A_DEV_INDEX))
		kc_jadd_int(o, "index", d->index);
	if (KC_HAS(d, KCOLL_A_DEV_NODE_GUID))
		kc_jadd_str(o, "node_guid",
			    kc_fmt_guid(d->node_guid, buf, sizeof(buf)));
	if (KC_HAS(d, KCOLL_A_DEV_PORT_STATE))
		kc_jadd_str(o, "port_state",
			    kc_port_state_str(d->port_state, buf,
					      sizeof(buf)));
	if (KC_HAS(d, KCOLL_A_DEV_COMMS))
		kc_jadd_int(o, "comms", d->comms);
	if (KC_HAS(d, KCOLL_A_DEV_ENABLED))
		kc_jadd(o, "enabled", json_object_new_boolean(d->enabled));
	if (KC_HAS(d, KCOLL_A_COST_BETA_PS))
		kc_jadd(o, "cost", kc_json_cost(&d->cost));
	if (KC_HAS(d, KCOLL_A_STATS))
		kc_jadd(o, "stats", kc_json_stats(&d->stats));
	return o;
}

static struct json_object *kc_json_member(const struct kc_member *m)
{
	struct json_object *o = json_object_new_object();
	char buf[KC_ADDR_STRLEN];

	if (!o)
		return NULL;
	if (KC_HAS(m, KCOLL_A_RANK))
		kc_jadd_int(o, "rank", m->rank);
	if (KC_HAS(m, KCOLL_A_MEMBER_ADDR))
		kc_jadd_str(o, "addr", kc_fmt_addr(m->addr, buf, sizeof(buf)));
	if (KC_HAS(m, KCOLL_A_MEMBER_PORT))
		kc_jadd_int(o, "port", m->port);
	if (KC_HAS(m, KCOLL_A_MEMBER_LOCAL_INDEX))
		kc_jadd_int(o, "local_index", m->local_index);
	if (KC_HAS(m, KCOLL_A_MEMBER_CONNECTED))
		kc_jadd(o, "connected", json_object_new_boolean(m->connected));
	return o;
}

static struct json_object *kc_json_op(const struct kc_op *op)
{
	struct json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	if (KC_HAS(op, KCOLL_A_OP_SEQ))
		kc_jadd_u64(o, "seq", op->seq);
	if (KC_HAS(op, KCOLL_A_OP_OPCODE))
		kc_jadd_opcode(o, "op", op->opcode);
	if (KC_HAS(op, KCOLL_A_OP_ALGO))
		kc_jadd_str(o, "algo", op->algo);
	if (KC_HAS(op, KCOLL_A_OP_PRIO))
		kc_jadd_int(o, "prio", op->prio);
	if (KC_HAS(op, KCOLL_A_OP_BYTES))
		kc_jadd_u64(o, "bytes", op->bytes);
	if (KC_HAS(op, KCOLL_A_OP_AGE_MS))
		kc_jadd_u64(o, "age_ms", op->age_ms);
	if (KC_HAS(op, KCOLL_A_OP_TIMEOUT_MS))
		kc_jadd_int(o, "timeout_ms", op->timeout_ms);
	if (KC_HAS(op, KCOLL_A_MISSING_RANKS))
		kc_jadd(o, "missing", kc_json_ranks(&op->missing));
	return o;
}

static struct json_object *kc_json_lasterr(const struct kc_lasterr *le)
{
	struct json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	if (KC_HAS(le, KCOLL_A_OP_SEQ))
		kc_jadd_u64(o, "seq", le->seq);
	if (KC_HAS(le, KCOLL_A_OP_OPCODE))
		kc_jadd_opcode(o, "op", le->opcode);
	if (KC_HAS(le, KCOLL_A_ERRNO)) {
		kc_jadd_int(o, "errno", le->err);
		kc_jadd_str(o, "error", kc_errno_str(le->err));
	}
	if (KC_HAS(le, KCOLL_A_MISSING_RANKS))
		kc_jadd(o, "missing", kc_json_ranks(&le->missing));
	return o;
}

static void kc_json_comm_details(struct json_object *o,
				 const struct kc_comm *c)
{
	struct json_object *a;
	size_t i;

	if (KC_HAS(c, KCOLL_A_COMM_MEMBERS)) {
		a = json_object_new_array();
		for (i = 0; a && i < c->n_members; i++)
			json_object_array_add(a,
					      kc_json_member(&c->members[i]));
		kc_jadd(o, "members", a);
		if (KC_HAS(c, KCOLL_A_NRANKS) && c->n_members < c->nranks)
			kc_jadd_int(o, "members_not_listed",
				    c->nranks - c->n_members);
	}
	if (KC_HAS(c, KCOLL_A_COMM_OPS)) {
		a = json_object_new_array();
		for (i = 0; a && i < c->n_ops; i++)
			json_object_array_add(a, kc_json_op(&c->ops[i]));
		kc_jadd(o, "ops", a);
	}
	if (KC_HAS(c, KCOLL_A_COMM_LAST_ERROR))
		kc_jadd(o, "last_error", kc_json_lasterr(&c->last_error));
	if (KC_HAS(c, KCOLL_A_STATS))
		kc_jadd(o, "stats", kc_json_stats(&c->stats));
}

struct json_object *kc_json_comm(const struct kc_comm *c, bool details)
{
	struct json_object *o = json_object_new_object();
	char buf[16];

	if (!o)
		return NULL;
	kc_jadd_int(o, "id", c->id);
	if (KC_HAS(c, KCOLL_A_COMM_UID))
		kc_jadd_uid(o, "uid", c->uid);
	if (KC_HAS(c, KCOLL_A_COMM_PARENT_UID))
		kc_jadd_uid(o, "parent_uid", c->parent_uid);
	if (KC_HAS(c, KCOLL_A_COMM_PID))
		kc_jadd_int(o, "pid", c->pid);
	if (KC_HAS(c, KCOLL_A_RANK))
		kc_jadd_int(o, "rank", c->rank);
	if (KC_HAS(c, KCOLL_A_NRANKS))
		kc_jadd_int(o, "nranks", c->nranks);
	if (KC_HAS(c, KCOLL_A_COMM_STATE))
		kc_jadd_str(o, "state",
			    kc_comm_state_str(c->state, buf, sizeof(buf)));
	if (KC_HAS(c, KCOLL_A_COMM_PARTIAL))
		kc_jadd(o, "partial", json_object_new_boolean(1));
	if (KC_HAS(c, KCOLL_A_DEV_NAME))
		kc_jadd_str(o, "dev", c->dev);
	if (KC_HAS(c, KCOLL_A_COMM_INFLIGHT))
		kc_jadd_int(o, "inflight", c->inflight);
	if (KC_HAS(c, KCOLL_A_COST_BETA_PS))
		kc_jadd(o, "cost", kc_json_cost(&c->cost));
	if (details)
		kc_json_comm_details(o, c);
	return o;
}

struct json_object *kc_json_node_stats(const struct kc_node_stats *ns)
{
	struct json_object *o = json_object_new_object(), *a;
	size_t i;

	if (!o)
		return NULL;
	kc_jadd(o, "node", kc_json_stats(&ns->node));
	a = json_object_new_array();
	for (i = 0; a && i < ns->n_devs; i++)
		json_object_array_add(a, kc_json_dev(&ns->devs[i]));
	kc_jadd(o, "devices", a);
	return o;
}

static const char *const kc_event_names[] = {
	[KCOLL_CMD_EV_COMM_CREATED]	= "comm_created",
	[KCOLL_CMD_EV_COMM_DESTROYED]	= "comm_destroyed",
	[KCOLL_CMD_EV_OP_TIMEOUT]	= "op_timeout",
	[KCOLL_CMD_EV_PEER_LOST]	= "peer_lost",
	[KCOLL_CMD_EV_COMM_ABORTED]	= "comm_aborted",
	[KCOLL_CMD_EV_DEV_ADDED]	= "dev_added",
	[KCOLL_CMD_EV_DEV_REMOVED]	= "dev_removed",
};

const char *kc_event_name(unsigned int cmd)
{
	return cmd < ARRAY_SIZE(kc_event_names) ? kc_event_names[cmd] : NULL;
}

struct json_object *kc_json_event(const struct kc_event *ev)
{
	struct json_object *o = json_object_new_object();
	const char *name = kc_event_name(ev->cmd);

	if (!o)
		return NULL;
	if (name)
		kc_jadd_str(o, "event", name);
	else
		kc_jadd_int(o, "event", ev->cmd);
	if (KC_HAS(ev, KCOLL_A_COMM_ID))
		kc_jadd_int(o, "comm", ev->comm_id);
	if (KC_HAS(ev, KCOLL_A_COMM_UID))
		kc_jadd_uid(o, "uid", ev->uid);
	if (KC_HAS(ev, KCOLL_A_COMM_PID))
		kc_jadd_int(o, "pid", ev->pid);
	if (KC_HAS(ev, KCOLL_A_RANK))
		kc_jadd_int(o, "rank", ev->rank);
	if (KC_HAS(ev, KCOLL_A_NRANKS))
		kc_jadd_int(o, "nranks", ev->nranks);
	if (KC_HAS(ev, KCOLL_A_DEV_NAME))
		kc_jadd_str(o, "dev", ev->dev);
	if (KC_HAS(ev, KCOLL_A_DEV_INDEX))
		kc_jadd_int(o, "dev_index", ev->dev_index);
	if (KC_HAS(ev, KCOLL_A_OP_SEQ))
		kc_jadd_u64(o, "seq", ev->seq);
	if (KC_HAS(ev, KCOLL_A_OP_OPCODE))
		kc_jadd_opcode(o, "op", ev->opcode);
	if (KC_HAS(ev, KCOLL_A_OP_TIMEOUT_MS))
		kc_jadd_int(o, "timeout_ms", ev->timeout_ms);
	if (KC_HAS(ev, KCOLL_A_PEER_RANK))
		kc_jadd_int(o, "peer_rank", ev->peer_rank);
	if (KC_HAS(ev, KCOLL_A_ERRNO)) {
		kc_jadd_int(o, "errno", ev->err);
		kc_jadd_str(o, "error", kc_errno_str(ev->err));
	}
	if (KC_HAS(ev, KCOLL_A_COMM_INFLIGHT))
		kc_jadd_int(o, "inflight", ev->inflight);
	if (KC_HAS(ev, KCOLL_A_MISSING_RANKS))
		kc_jadd(o, "missing", kc_json_ranks(&ev->missing));
	return o;
}

struct json_object *kc_json_tunables(const struct kc_tunable *t, size_t n)
{
	struct json_object *o = json_object_new_object();
	size_t i;

	for (i = 0; o && i < n; i++)
		kc_jadd_str(o, t[i].name, t[i].value);
	return o;
}

/* ------------------------------------------------------------------ */
/* Text                                                                */
/* ------------------------------------------------------------------ */

static void kc_text_ranks(FILE *f, const char *prefix,
			  const struct kc_ranks *r)
{
	char buf[256];

	fprintf(f, "%s%s", prefix, kc_fmt_ranks(r->v, r->n, buf,
						  sizeof(buf)));
}

void kc_text_hist(FILE *f, const uint64_t lat[KCOLL_NL_LAT_BUCKETS])
{
	char label[KC_HIST_LABEL_LEN];
	const char *sep = "";
	unsigned int i;

	for (i = 0; i < KCOLL_NL_LAT_BUCKETS; i++) {
		if (!lat[i])
			continue;
		fprintf(f, "%s%s: %" PRIu64, sep,
			kc_hist_label(i, label, sizeof(label)), lat[i]);
		sep = ", ";
	}
	if (!*sep)
		fputs("no samples", f);
}

/* "ops 1 bytes 2 errors 0 timeouts 0" and the node-wide gauges. */
static void kc_text_counters(FILE *f, const struct kc_stats *st)
{
	const char *sep = "";

#define KC_TEXT_FIELD(attr, name, field)				\
	do {								\
		if (KC_HAS(st, attr)) {					\
			fprintf(f, "%s" name " %" PRIu64, sep, st->field); \
			sep = " ";					\
		}							\
	} while (0)
	KC_TEXT_FIELD(KCOLL_A_STAT_OPS, "ops", ops);
	KC_TEXT_FIELD(KCOLL_A_STAT_BYTES, "bytes", bytes);
	KC_TEXT_FIELD(KCOLL_A_STAT_ERRORS, "errors", errors);
	KC_TEXT_FIELD(KCOLL_A_STAT_TIMEOUTS, "timeouts", timeouts);
	KC_TEXT_FIELD(KCOLL_A_STAT_INFLIGHT, "inflight", inflight);
	KC_TEXT_FIELD(KCOLL_A_STAT_CONTEXTS, "contexts", contexts);
	KC_TEXT_FIELD(KCOLL_A_STAT_COMMS, "comms", comms);
#undef KC_TEXT_FIELD
	if (!*sep)
		fputs("no counters", f);
}

void kc_text_dev(FILE *f, const struct kc_dev *d)
{
	char buf[KC_GUID_STRLEN];

	if (KC_HAS(d, KCOLL_A_DEV_INDEX))
		fprintf(f, "%u: ", d->index);
	fprintf(f, "%s:", d->name);
	if (KC_HAS(d, KCOLL_A_DEV_NODE_GUID))
		fprintf(f, " node_guid %s",
			kc_fmt_guid(d->node_guid, buf, sizeof(buf)));
	if (KC_HAS(d, KCOLL_A_DEV_PORT_STATE))
		fprintf(f, " port %s",
			kc_port_state_str(d->port_state, buf, sizeof(buf)));
	if (KC_HAS(d, KCOLL_A_DEV_COMMS))
		fprintf(f, " comms %u", d->comms);
	if (KC_HAS(d, KCOLL_A_DEV_ENABLED))
		fputs(d->enabled ? " enabled" : " disabled", f);
	if (KC_HAS(d, KCOLL_A_COST_BETA_PS))
		kc_text_cost(f, &d->cost);
	fputc('\n', f);
	if (KC_HAS(d, KCOLL_A_STATS)) {
		fputs("    ", f);
		kc_text_counters(f, &d->stats);
		fputc('\n', f);
	}
}

static void kc_text_member(FILE *f, const struct kc_member *m)
{
	char buf[KC_ADDR_STRLEN];

	fputs("    member", f);
	if (KC_HAS(m, KCOLL_A_RANK))
		fprintf(f, " rank %u", m->rank);
	if (KC_HAS(m, KCOLL_A_MEMBER_ADDR))
		fprintf(f, " %s", kc_fmt_addr(m->addr, buf, sizeof(buf)));
	if (KC_HAS(m, KCOLL_A_MEMBER_PORT))
		fprintf(f, " port %u", m->port);
	if (KC_HAS(m, KCOLL_A_MEMBER_LOCAL_INDEX))
		fprintf(f, " local %u", m->local_index);
	if (KC_HAS(m, KCOLL_A_MEMBER_CONNECTED))
		fputs(m->connected ? " connected" : " disconnected", f);
	fputc('\n', f);
}

static void kc_text_op(FILE *f, const struct kc_op *op)
{
	char buf[16];

	fputs("    op", f);
	if (KC_HAS(op, KCOLL_A_OP_SEQ))
		fprintf(f, " seq %" PRIu64, op->seq);
	if (KC_HAS(op, KCOLL_A_OP_OPCODE))
		fprintf(f, " %s", kc_opcode_str(op->opcode, buf, sizeof(buf)));
	if (KC_HAS(op, KCOLL_A_OP_ALGO))
		fprintf(f, " algo %s", op->algo);
	if (KC_HAS(op, KCOLL_A_OP_PRIO))
		fprintf(f, " prio %u", op->prio);
	if (KC_HAS(op, KCOLL_A_OP_BYTES))
		fprintf(f, " bytes %" PRIu64, op->bytes);
	if (KC_HAS(op, KCOLL_A_OP_AGE_MS))
		fprintf(f, " age %" PRIu64 "ms", op->age_ms);
	if (KC_HAS(op, KCOLL_A_OP_TIMEOUT_MS)) {
		if (op->timeout_ms)
			fprintf(f, " timeout %ums", op->timeout_ms);
		else
			fputs(" timeout none", f);
	}
	if (KC_HAS(op, KCOLL_A_MISSING_RANKS))
		kc_text_ranks(f, " missing ", &op->missing);
	fputc('\n', f);
}

static void kc_text_lasterr(FILE *f, const struct kc_lasterr *le)
{
	char buf[16];

	fputs("    last error", f);
	if (KC_HAS(le, KCOLL_A_OP_SEQ))
		fprintf(f, " seq %" PRIu64, le->seq);
	if (KC_HAS(le, KCOLL_A_OP_OPCODE))
		fprintf(f, " %s", kc_opcode_str(le->opcode, buf, sizeof(buf)));
	if (KC_HAS(le, KCOLL_A_ERRNO))
		fprintf(f, ": %s (%d)", kc_errno_str(le->err), le->err);
	if (KC_HAS(le, KCOLL_A_MISSING_RANKS))
		kc_text_ranks(f, ", missing ranks ", &le->missing);
	fputc('\n', f);
}

/*
 * "    profile 120 collectives, 2.5 phases, per collective (us): total 900
 * = queued 10 + wait 300 + move 500 (land 40) + sigs 20 + settle 5 +
 * other 65"
 */
static void kc_text_profile(FILE *f, const uint64_t *p)
{
	double n = (double)p[KCOLL_NL_PROF_OPS], parts;

	if (!p[KCOLL_NL_PROF_OPS]) {
		fputs("    profile: no collective completed yet\n", f);
		return;
	}
	parts = (double)p[KCOLL_NL_PROF_QUEUED_NS] + p[KCOLL_NL_PROF_WAIT_NS] +
		p[KCOLL_NL_PROF_MOVE_NS] + p[KCOLL_NL_PROF_SIGS_NS] +
		p[KCOLL_NL_PROF_SETTLE_NS];
	fprintf(f, "    profile %" PRIu64 " collectives, %.1f phases, per "
		"collective (us): total %.0f = queued %.0f + wait %.0f + "
		"move %.0f (land %.0f) + sigs %.0f + settle %.0f + other %.0f\n",
		p[KCOLL_NL_PROF_OPS], p[KCOLL_NL_PROF_PHASES] / n,
		p[KCOLL_NL_PROF_TOTAL_NS] / n / 1e3,
		p[KCOLL_NL_PROF_QUEUED_NS] / n / 1e3,
		p[KCOLL_NL_PROF_WAIT_NS] / n / 1e3,
		p[KCOLL_NL_PROF_MOVE_NS] / n / 1e3,
		p[KCOLL_NL_PROF_LAND_NS] / n / 1e3,
		p[KCOLL_NL_PROF_SIGS_NS] / n / 1e3,
		p[KCOLL_NL_PROF_SETTLE_NS] / n / 1e3,
		(p[KCOLL_NL_PROF_TOTAL_NS] - parts) / n / 1e3);
}

void kc_text_comm(FILE *f, const struct kc_comm *c, bool details)
{
	char buf[16];
	size_t i;

	fprintf(f, "comm %u", c->id);
	if (KC_HAS(c, KCOLL_A_COMM_UID))
		fprintf(f, " uid 0x%016" PRIx64, c->uid);
	if (KC_HAS(c, KCOLL_A_COMM_PARENT_UID))
		fprintf(f, " parent 0x%016" PRIx64, c->parent_uid);
	if (KC_HAS(c, KCOLL_A_COMM_PID))
		fprintf(f, " pid %u", c->pid);
	if (KC_HAS(c, KCOLL_A_RANK))
		fprintf(f, " rank %u", c->rank);
	if (KC_HAS(c, KCOLL_A_NRANKS))
		fprintf(f, "%s%u", KC_HAS(c, KCOLL_A_RANK) ? "/" : " nranks ",
			c->nranks);
	if (KC_HAS(c, KCOLL_A_COMM_STATE))
		fprintf(f, " state %s",
			kc_comm_state_str(c->state, buf, sizeof(buf)));
	if (KC_HAS(c, KCOLL_A_DEV_NAME))
		fprintf(f, " dev %s", c->dev);
	if (KC_HAS(c, KCOLL_A_COMM_INFLIGHT))
		fprintf(f, " inflight %u", c->inflight);
	if (KC_HAS(c, KCOLL_A_COST_BETA_PS))
		kc_text_cost(f, &c->cost);
	fputc('\n', f);
	/* A dump's message had no room for them: a request for it alone
	 * has. */
	if (KC_HAS(c, KCOLL_A_COMM_PARTIAL) && details)
		fprintf(f, "    members and operations left out of the listing: "
			"kcollctl -d comm show %u\n", c->id);
	if (!details) {
		/* Who it waited for is the first thing an operator needs. */
		if (KC_HAS(c, KCOLL_A_COMM_LAST_ERROR))
			kc_text_lasterr(f, &c->last_error);
		return;
	}
	if (KC_HAS(c, KCOLL_A_STATS)) {
		fputs("    stats ", f);
		kc_text_counters(f, &c->stats);
		fputc('\n', f);
		if (KC_HAS(&c->stats, KCOLL_A_STAT_PROFILE))
			kc_text_profile(f, c->stats.prof);
	}
	for (i = 0; i < c->n_members; i++)
		kc_text_member(f, &c->members[i]);
	/* One netlink attribute holds about 1170 members. */
	if (KC_HAS(c, KCOLL_A_COMM_MEMBERS) && KC_HAS(c, KCOLL_A_NRANKS) &&
	    c->n_members < c->nranks)
		fprintf(f, "    ... %zu more members not listed\n",
			c->nranks - c->n_members);
	for (i = 0; i < c->n_ops; i++)
		kc_text_op(f, &c->ops[i]);
	if (KC_HAS(c, KCOLL_A_COMM_LAST_ERROR))
		kc_text_lasterr(f, &c->last_error);
}

static void kc_text_stats_block(FILE *f, const char *name,
				const struct kc_stats *st)
{
	fprintf(f, "%s: ", name);
	kc_text_counters(f, st);
	fputc('\n', f);
	if (KC_HAS(st, KCOLL_A_STAT_LAT_HIST)) {
		fputs("    latency ", f);
		kc_text_hist(f, st->lat);
		fputc('\n', f);
	}
	if (KC_HAS(st, KCOLL_A_STAT_PROFILE))
		kc_text_profile(f, st->prof);
}

void kc_text_node_stats(FILE *f, const struct kc_node_stats *ns)
{
	size_t i;

	kc_text_stats_block(f, "node", &ns->node);
	for (i = 0; i < ns->n_devs; i++)
		kc_text_stats_block(f, ns->devs[i].name, &ns->devs[i].stats);
}

/* ------------------------------------------------------------------ */
/* Event lines                                                         */
/* ------------------------------------------------------------------ */

/* snprintf() that appends and keeps counting past the end of @buf. */
struct kc_sb {
	char *buf;
	size_t len;
	size_t need;
};

static __attribute__((format(printf, 2, 3)))
void kc_sb_printf(struct kc_sb *sb, const char *fmt, ...)
{
	size_t room = sb->need < sb->len ? sb->len - sb->need : 0;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(room ? sb->buf + sb->need : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		sb->need += n;
}

/* "comm 3 uid 0x... rank 1/4: " */
static void kc_event_comm(struct kc_sb *sb, const struct kc_event *ev)
{
	if (KC_HAS(ev, KCOLL_A_COMM_ID))
		kc_sb_printf(sb, "comm %u", ev->comm_id);
	else
		kc_sb_printf(sb, "comm ?");
	if (KC_HAS(ev, KCOLL_A_COMM_UID))
		kc_sb_printf(sb, " uid 0x%016" PRIx64, ev->uid);
	if (KC_HAS(ev, KCOLL_A_COMM_PARENT_UID))
		kc_sb_printf(sb, " parent 0x%016" PRIx64, ev->parent_uid);
	if (KC_HAS(ev, KCOLL_A_RANK) && KC_HAS(ev, KCOLL_A_NRANKS))
		kc_sb_printf(sb, " rank %u/%u", ev->rank, ev->nranks);
	kc_sb_printf(sb, ": ");
}

static void kc_event_timeout(struct kc_sb *sb, const struct kc_event *ev)
{
	char buf[256];

	kc_sb_printf(sb, "op");
	if (KC_HAS(ev, KCOLL_A_OP_SEQ))
		kc_sb_printf(sb, " %" PRIu64, ev->seq);
	if (KC_HAS(ev, KCOLL_A_OP_OPCODE))
		kc_sb_printf(sb, " %s",
			     kc_opcode_str(ev->opcode, buf, sizeof(buf)));
	kc_sb_printf(sb, " timed out");
	if (KC_HAS(ev, KCOLL_A_OP_TIMEOUT_MS))
		kc_sb_printf(sb, " after %u ms", ev->timeout_ms);
	if (KC_HAS(ev, KCOLL_A_MISSING_RANKS))
		kc_sb_printf(sb, ", missing ranks %s",
			     kc_fmt_ranks(ev->missing.v, ev->missing.n, buf,
					  sizeof(buf)));
}

static void kc_event_dev(struct kc_sb *sb, const struct kc_event *ev,
			 const char *what)
{
	kc_sb_printf(sb, "device %s", KC_HAS(ev, KCOLL_A_DEV_NAME) ?
		     ev->dev : "?");
	if (KC_HAS(ev, KCOLL_A_DEV_INDEX))
		kc_sb_printf(sb, " (index %u)", ev->dev_index);
	kc_sb_printf(sb, " %s", what);
}

int kc_event_line(const struct kc_event *ev, char *buf, size_t len)
{
	struct kc_sb sb = { .buf = buf, .len = len };

	if (len)
		buf[0] = '\0';
	switch (ev->cmd) {
	case KCOLL_CMD_EV_COMM_CREATED:
		kc_event_comm(&sb, ev);
		kc_sb_printf(&sb, "created");
		if (KC_HAS(ev, KCOLL_A_COMM_PID))
			kc_sb_printf(&sb, " by pid %u", ev->pid);
		if (KC_HAS(ev, KCOLL_A_DEV_NAME))
			kc_sb_printf(&sb, " on %s", ev->dev);
		break;
	case KCOLL_CMD_EV_COMM_DESTROYED:
		kc_event_comm(&sb, ev);
		kc_sb_printf(&sb, "destroyed");
		if (KC_HAS(ev, KCOLL_A_COMM_PID))
			kc_sb_printf(&sb, " (pid %u)", ev->pid);
		break;
	case KCOLL_CMD_EV_OP_TIMEOUT:
		kc_event_comm(&sb, ev);
		kc_event_timeout(&sb, ev);
		break;
	case KCOLL_CMD_EV_PEER_LOST:
		kc_event_comm(&sb, ev);
		kc_sb_printf(&sb, "lost peer");
		if (KC_HAS(ev, KCOLL_A_PEER_RANK))
			kc_sb_printf(&sb, " rank %u", ev->peer_rank);
		if (KC_HAS(ev, KCOLL_A_ERRNO))
			kc_sb_printf(&sb, ": %s", kc_errno_str(ev->err));
		break;
	case KCOLL_CMD_EV_COMM_ABORTED:
		kc_event_comm(&sb, ev);
		/* A revoke names the rank that revoked (maybe this one). */
		if (KC_HAS(ev, KCOLL_A_PEER_RANK))
			kc_sb_printf(&sb, "revoked by rank %u", ev->peer_rank);
		else
			kc_sb_printf(&sb, "aborted");
		if (KC_HAS(ev, KCOLL_A_COMM_INFLIGHT))
			kc_sb_printf(&sb, ", %u operation%s cancelled",
				     ev->inflight, ev->inflight == 1 ? "" : "s");
		break;
	case KCOLL_CMD_EV_DEV_ADDED:
		kc_event_dev(&sb, ev, "added");
		break;
	case KCOLL_CMD_EV_DEV_REMOVED:
		kc_event_dev(&sb, ev, "removed");
		break;
	default:
		kc_sb_printf(&sb, "unknown event %u", ev->cmd);
		break;
	}
	return sb.need;
}

int kc_event_level(const struct kc_event *ev)
{
	switch (ev->cmd) {
	case KCOLL_CMD_EV_OP_TIMEOUT:
	case KCOLL_CMD_EV_PEER_LOST:
		return LOG_WARNING;
	case KCOLL_CMD_EV_COMM_ABORTED:
	case KCOLL_CMD_EV_DEV_ADDED:
	case KCOLL_CMD_EV_DEV_REMOVED:
		return LOG_NOTICE;
	default:
		return LOG_INFO;
	}
}

unsigned int kc_evrate_expire(struct kc_evrate *r, unsigned int cmd,
			      int64_t now_ms)
{
	unsigned int dropped;

	if (cmd > KCOLL_CMD_MAX ||
	    (!r->cmd[cmd].logged && !r->cmd[cmd].dropped) ||
	    now_ms - r->cmd[cmd].start_ms < KC_EV_WINDOW_MS)
		return 0;
	dropped = r->cmd[cmd].dropped;
	r->cmd[cmd].logged = 0;
	r->cmd[cmd].dropped = 0;
	return dropped;
}

bool kc_evrate_take(struct kc_evrate *r, unsigned int cmd, int64_t now_ms,
		    unsigned int *dropped_before)
{
	if (cmd > KCOLL_CMD_MAX)
		cmd = 0;	/* unknown commands share one count */
	*dropped_before = kc_evrate_expire(r, cmd, now_ms);
	if (!r->cmd[cmd].logged && !r->cmd[cmd].dropped)
		r->cmd[cmd].start_ms = now_ms;
	if (r->cmd[cmd].logged < KC_EV_BURST) {
		r->cmd[cmd].logged++;
		return true;
	}
	r->cmd[cmd].dropped++;
	return false;
}
