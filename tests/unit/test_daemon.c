// SPDX-License-Identifier: MIT
/*
 * Host unit tests of kcollctl/kcolld's plain logic (daemon/): the
 * configuration parser, formatting helpers, text/JSON rendering (the JSON
 * is parsed back with json-c), the Prometheus exposition (every line
 * checked for form, histogram buckets for order and cumulative counts),
 * the HTTP request parser and the event log lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <regex.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include <json-c/json.h>
#include <linux/kcoll.h>

#include "kc_config.h"
#include "kc_fmt.h"
#include "kc_http.h"
#include "kc_prom.h"
#include "kc_render.h"
#include "unit.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* Configuration                                                       */
/* ------------------------------------------------------------------ */

static void test_conf_good(void)
{
	static const char text[] =
		"# kcolld test configuration\n"
		"\n"
		"metrics_port = 9100   # Prometheus\n"
		"  metrics_address=::1\n"
		"devices = rxe0, mlx5_0 mlx5_1\n"
		"chunk_bytes = 131072\n"
		"\t algo/allreduce =   ring\n"
		"op_timeout_ms = 5000#no space before the comment\n";
	struct kc_conf c;
	char err[KC_CONF_ERR_LEN];

	if (!UNIT_EQ_INT(kc_conf_parse_str(text, "t.conf", &c, err,
					   sizeof(err)), 0)) {
		unit_diag("%s", err);
		return;
	}
	UNIT_EQ_STR(err, "");
	UNIT_EQ_UINT(c.metrics_port, 9100);
	UNIT_EQ_UINT(c.metrics_port_line, 3);
	UNIT_EQ_STR(c.metrics_address, "::1");
	UNIT_EQ_UINT(c.n_devices, 3);
	UNIT_EQ_STR(c.devices[0], "rxe0");
	UNIT_EQ_STR(c.devices[1], "mlx5_0");
	UNIT_EQ_STR(c.devices[2], "mlx5_1");
	UNIT_EQ_UINT(c.devices_line, 5);
	UNIT_EQ_STR(c.devices_list, "rxe0,mlx5_0,mlx5_1");
	if (UNIT_EQ_UINT(c.n_tunables, 3)) {
		UNIT_EQ_STR(c.tunables[0].name, "chunk_bytes");
		UNIT_EQ_STR(c.tunables[0].value, "131072");
		UNIT_EQ_UINT(c.tunables[0].line, 6);
		UNIT_EQ_STR(c.tunables[1].name, "algo/allreduce");
		UNIT_EQ_STR(c.tunables[1].value, "ring");
		UNIT_EQ_UINT(c.tunables[1].line, 7);
		UNIT_EQ_STR(c.tunables[2].name, "op_timeout_ms");
		UNIT_EQ_STR(c.tunables[2].value, "5000");
		UNIT_EQ_UINT(c.tunables[2].line, 8);
	}
	kc_conf_free(&c);
	UNIT_CHECK(!c.tunables && !c.n_tunables);
}

static void test_conf_empty(void)
{
	struct kc_conf c;
	char err[KC_CONF_ERR_LEN];

	UNIT_EQ_INT(kc_conf_parse_str("", "e.conf", &c, err, sizeof(err)), 0);
	UNIT_EQ_UINT(c.n_tunables, 0);
	UNIT_EQ_UINT(c.metrics_port, 0);
	kc_conf_free(&c);
	UNIT_EQ_INT(kc_conf_parse_str("# only a comment\n\n   \n", "e.conf",
				      &c, err, sizeof(err)), 0);
	UNIT_EQ_UINT(c.n_tunables, 0);
	UNIT_EQ_UINT(c.n_devices, 0);
	kc_conf_free(&c);
	/* No newline at the end of the last line. */
	UNIT_EQ_INT(kc_conf_parse_str("prio_sched = 0", "e.conf", &c, err,
				      sizeof(err)), 0);
	if (UNIT_EQ_UINT(c.n_tunables, 1))
		UNIT_EQ_STR(c.tunables[0].value, "0");
	kc_conf_free(&c);
}

static void test_conf_errors(void)
{
	static const struct {
		const char *text;
		const char *msg;	/* the whole error message */
	} cases[] = {
		{ "chunk_bytes\n",
		  "t.conf:1: expected 'key = value', got 'chunk_bytes'" },
		{ "\n\n = 5\n", "t.conf:3: missing key before '='" },
		{ "a = 1\nb =\n", "t.conf:2: b: missing value" },
		{ "a = 1\nb = # comment\n", "t.conf:2: b: missing value" },
		{ "metrics_port = 0\n",
		  "t.conf:1: metrics_port: '0' is not a port number (1-65535)" },
		{ "\nmetrics_port = 65536\n",
		  "t.conf:2: metrics_port: '65536' is not a port number "
		  "(1-65535)" },
		{ "metrics_port = 80x\n",
		  "t.conf:1: metrics_port: '80x' is not a port number "
		  "(1-65535)" },
		{ "metrics_port = -1\n",
		  "t.conf:1: metrics_port: '-1' is not a port number "
		  "(1-65535)" },
		{ "metrics_address = localhost\n",
		  "t.conf:1: metrics_address: 'localhost' is not an IPv4 or "
		  "IPv6 address" },
		{ "x = 1\ny = 2\nx = 3\n", "t.conf:3: x: already set on line 1" },
		{ "metrics_port = 1\nmetrics_port = 2\n",
		  "t.conf:2: metrics_port: already set on line 1" },
		{ "[tunables]\n", "t.conf:1: sections are not supported: write "
		  "'key = value' lines only" },
		{ "1abc = 3\n", "t.conf:1: invalid key '1abc' (letters, "
		  "digits, '_', '-', '.', '/')" },
		{ "a b = 3\n", "t.conf:1: invalid key 'a b' (letters, digits, "
		  "'_', '-', '.', '/')" },
		{ "devices = , ,\n", "t.conf:1: devices: no device named" },
		{ "devices = mlx5_0 mlx5_1 mlx5_2 mlx5_3 mlx5_4 mlx5_5 mlx5_6 "
		  "mlx5_7 mlx5_8 mlx5_9\n",
		  "t.conf:1: devices: the list is longer than 63 characters "
		  "with single commas" },
		{ "a = b\x01 c\n", "t.conf:1: a: value has control characters" },
		{ "abcdefghijabcdefghijabcdefghijabcdefghijabcdefgh = 1\n",
		  "t.conf:1: tunable name 'abcdefghijabcdefghijabcdefghijabcdef"
		  "ghijabcdefgh' is longer than 47 characters" },
		{ "k = 0123456789012345678901234567890123456789012345678901234"
		  "567890123\n",
		  "t.conf:1: k: value is longer than 63 characters" },
	};
	char err[KC_CONF_ERR_LEN];
	struct kc_conf c;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		memset(&c, 0x5a, sizeof(c));
		if (!UNIT_EQ_INT(kc_conf_parse_str(cases[i].text, "t.conf", &c,
						   err, sizeof(err)),
				 -EINVAL))
			continue;
		UNIT_EQ_STR(err, cases[i].msg);
		/* Nothing to free after an error. */
		UNIT_CHECK(!c.tunables && !c.n_tunables && !c.n_devices);
	}
}

static void test_conf_long_line(void)
{
	char text[KC_CONF_LINE_MAX + 64], err[KC_CONF_ERR_LEN];
	struct kc_conf c;

	/* Line 2 has 1024 characters with its newline: accepted. */
	memset(text, ' ', sizeof(text));
	memcpy(text, "a = 1\nb = 2", 11);
	text[6 + KC_CONF_LINE_MAX - 1] = '\n';
	text[6 + KC_CONF_LINE_MAX] = '\0';
	UNIT_EQ_INT(kc_conf_parse_str(text, "l.conf", &c, err, sizeof(err)),
		    0);
	kc_conf_free(&c);
	/* One more: refused, naming the line. */
	text[6 + KC_CONF_LINE_MAX - 1] = ' ';
	text[6 + KC_CONF_LINE_MAX] = '\n';
	text[6 + KC_CONF_LINE_MAX + 1] = '\0';
	UNIT_EQ_INT(kc_conf_parse_str(text, "l.conf", &c, err, sizeof(err)),
		    -EINVAL);
	UNIT_EQ_STR(err, "l.conf:2: line longer than 1024 characters");
}

static void test_conf_load(void)
{
	char path[] = "/tmp/kcolld-test-XXXXXX", err[KC_CONF_ERR_LEN];
	struct kc_conf c;
	FILE *f;
	int fd;

	UNIT_EQ_INT(kc_conf_load("/nonexistent/kcolld.conf", &c, err,
				 sizeof(err)), -ENOENT);
	UNIT_EQ_STR(err, "/nonexistent/kcolld.conf: No such file or "
		    "directory");
	fd = mkstemp(path);
	if (!UNIT_CHECK(fd >= 0))
		return;
	f = fdopen(fd, "w");
	fputs("chunk_bytes = 8192\nbogus\n", f);
	fclose(f);
	UNIT_EQ_INT(kc_conf_load(path, &c, err, sizeof(err)), -EINVAL);
	UNIT_CHECK(!strncmp(err, path, strlen(path)) &&
		   !strcmp(err + strlen(path), ":2: expected 'key = value', "
			   "got 'bogus'"));
	unlink(path);
}

/* ------------------------------------------------------------------ */
/* Formatting                                                          */
/* ------------------------------------------------------------------ */

static void test_fmt_names(void)
{
	static const char *const ops[] = {
		[2] = "allreduce", "reduce", "broadcast", "allgather",
		"reduce_scatter", "alltoall", "send", "recv", "barrier",
		"gather", "scatter",
	};
	char buf[32];
	unsigned int i;

	for (i = 2; i < ARRAY_SIZE(ops); i++)
		UNIT_EQ_STR(kc_opcode_name(i), ops[i]);
	UNIT_CHECK(!kc_opcode_name(200));
	UNIT_EQ_STR(kc_opcode_str(200, buf, sizeof(buf)), "op200");
	UNIT_EQ_STR(kc_opcode_str(8, buf, sizeof(buf)), "send");
	UNIT_EQ_STR(kc_comm_state_str(KCOLL_COMM_READY, buf, sizeof(buf)),
		    "ready");
	UNIT_EQ_STR(kc_comm_state_str(KCOLL_COMM_ABORTED, buf, sizeof(buf)),
		    "aborted");
	UNIT_EQ_STR(kc_comm_state_str(KCOLL_COMM_REVOKED, buf, sizeof(buf)),
		    "revoked");
	UNIT_EQ_STR(kc_comm_state_str(9, buf, sizeof(buf)), "state9");
	UNIT_EQ_STR(kc_port_state_str(4, buf, sizeof(buf)), "ACTIVE");
	UNIT_EQ_STR(kc_port_state_str(1, buf, sizeof(buf)), "DOWN");
	UNIT_EQ_STR(kc_port_state_str(77, buf, sizeof(buf)), "state77");
	/* Truncated, still terminated. */
	UNIT_EQ_STR(kc_opcode_str(6, buf, 7), "reduce");
}

static void test_fmt_addr(void)
{
	static const uint8_t v4[16] = {
		[10] = 0xff, [11] = 0xff, 10, 9, 0, 1 };
	static const uint8_t v6[16] = { 0xfe, 0x80, [15] = 1 };
	static const uint8_t zero[16];
	static const uint8_t almost[16] = {
		[10] = 0xff, [11] = 0xfe, 10, 9, 0, 1 };
	char buf[KC_ADDR_STRLEN];

	UNIT_EQ_STR(kc_fmt_addr(v4, buf, sizeof(buf)), "10.9.0.1");
	UNIT_EQ_STR(kc_fmt_addr(v6, buf, sizeof(buf)), "fe80::1");
	UNIT_EQ_STR(kc_fmt_addr(zero, buf, sizeof(buf)), "::");
	UNIT_EQ_STR(kc_fmt_addr(almost, buf, sizeof(buf)), "::fffe:a09:1");
	UNIT_EQ_STR(kc_fmt_guid(0x505400fffe123456ULL, buf, sizeof(buf)),
		    "5054:00ff:fe12:3456");
	UNIT_EQ_STR(kc_fmt_guid(0, buf, sizeof(buf)), "0000:0000:0000:0000");
}

static void test_fmt_ranks(void)
{
	static const uint32_t a[] = { 2, 3 };
	static const uint32_t b[] = { 1, 2, 3, 5 };
	static const uint32_t c[] = { 0, 1, 2, 3, 4, 9, 10, 11, 20 };
	static const uint32_t d[] = { UINT32_MAX - 1, UINT32_MAX, 0, 1, 2 };
	uint32_t many[40];
	char buf[64], small[20];
	unsigned int i;

	UNIT_EQ_STR(kc_fmt_ranks(NULL, 0, buf, sizeof(buf)), "none");
	UNIT_EQ_STR(kc_fmt_ranks(a, 2, buf, sizeof(buf)), "2,3");
	UNIT_EQ_STR(kc_fmt_ranks(b, 4, buf, sizeof(buf)), "1-3,5");
	UNIT_EQ_STR(kc_fmt_ranks(c, 9, buf, sizeof(buf)), "0-4,9-11,20");
	/* No wrap-around run from UINT32_MAX to 0. */
	UNIT_EQ_STR(kc_fmt_ranks(d, 5, buf, sizeof(buf)),
		    "4294967294,4294967295,0-2");
	for (i = 0; i < ARRAY_SIZE(many); i++)
		many[i] = 2 * i;
	/* Too long: whole items, then "...", within the buffer. */
	UNIT_EQ_STR(kc_fmt_ranks(many, 40, small, sizeof(small)),
		    "0,2,4,6,8,10,12...");
	UNIT_CHECK(strlen(kc_fmt_ranks(many, 40, small, 4)) < 4);
	/* Exactly fitting: no ellipsis. */
	UNIT_EQ_STR(kc_fmt_ranks(a, 2, small, 4), "2,3");
}

static void test_hist_labels(void)
{
	static const struct {
		unsigned int i;
		const char *label;
	} cases[] = {
		{ 0, "0-2us" }, { 1, "2-4us" }, { 6, "64-128us" },
		{ 8, "256-512us" }, { 9, "512us-1.02ms" },
		{ 10, "1.02-2.05ms" }, { 16, "65.5-131ms" },
		{ 19, "524ms-1.05s" }, { 20, "1.05-2.1s" },
		{ 29, "537-1074s" }, { 30, "1074-2147s" },
		{ 31, ">=2147s" },
	};
	char buf[KC_HIST_LABEL_LEN], prev[KC_HIST_LABEL_LEN] = "";
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cases); i++)
		UNIT_EQ_STR(kc_hist_label(cases[i].i, buf, sizeof(buf)),
			    cases[i].label);
	for (i = 0; i < KCOLL_NL_LAT_BUCKETS; i++) {
		kc_hist_label(i, buf, sizeof(buf));
		UNIT_CHECK(strlen(buf) + 1 < sizeof(buf));
		UNIT_CHECK(strcmp(buf, prev));
		strcpy(prev, buf);
		if (i + 1 < KCOLL_NL_LAT_BUCKETS) {
			UNIT_EQ_UINT(kc_hist_upper_us(i), 2ULL << i);
			UNIT_EQ_UINT(kc_hist_upper_us(i),
				     kc_hist_lower_us(i + 1));
		}
	}
	UNIT_EQ_UINT(kc_hist_lower_us(0), 0);
	UNIT_EQ_UINT(kc_hist_upper_us(KCOLL_NL_LAT_BUCKETS - 1), 0);
}

/* ------------------------------------------------------------------ */
/* Sample data                                                         */
/* ------------------------------------------------------------------ */

#define ALL_STATS (KC_BIT(KCOLL_A_STAT_OPS) | KC_BIT(KCOLL_A_STAT_BYTES) | \
		   KC_BIT(KCOLL_A_STAT_ERRORS) | \
		   KC_BIT(KCOLL_A_STAT_TIMEOUTS) | \
		   KC_BIT(KCOLL_A_STAT_LAT_HIST))
#define NODE_STATS (ALL_STATS | KC_BIT(KCOLL_A_STAT_INFLIGHT) | \
		    KC_BIT(KCOLL_A_STAT_CONTEXTS) | KC_BIT(KCOLL_A_STAT_COMMS) | \
		    KC_BIT(KCOLL_A_STAT_PROFILE))

static void sample_stats(struct kc_stats *st, bool node)
{
	memset(st, 0, sizeof(*st));
	st->have = node ? NODE_STATS : ALL_STATS;
	st->ops = 11;
	st->bytes = (1ULL << 63) + 5;	/* past INT64_MAX */
	st->errors = 1;
	st->timeouts = 1;
	st->lat[6] = 7;
	st->lat[7] = 3;
	st->lat[10] = 1;
	st->lat[31] = 2;
	if (node) {
		/* 4 collectives of 1000 us: 100 queued, 300 waiting, 500
		 * moving (75 of it landing), 50 sigs, 25 settling, 25
		 * other. */
		static const uint64_t prof[KCOLL_NL_PROF_NR] = {
			4, 10, 4000000, 400000, 1200000, 2000000, 300000,
			200000, 100000,
		};

		st->inflight = 2;
		st->contexts = 3;
		st->comms = 4;
		memcpy(st->prof, prof, sizeof(prof));
	}
}

static void sample_dev(struct kc_dev *d, const char *name)
{
	memset(d, 0, sizeof(*d));
	d->have = KC_BIT(KCOLL_A_DEV_NAME) | KC_BIT(KCOLL_A_DEV_INDEX) |
		  KC_BIT(KCOLL_A_DEV_NODE_GUID) |
		  KC_BIT(KCOLL_A_DEV_PORT_STATE) | KC_BIT(KCOLL_A_DEV_COMMS) |
		  KC_BIT(KCOLL_A_STATS);
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->index = 3;
	d->node_guid = 0x505400fffe123456ULL;
	d->port_state = 4;
	d->comms = 2;
	sample_stats(&d->stats, false);
}

static uint32_t sample_missing[] = { 2, 3 };
static uint32_t sample_lost[] = { 2 };

static void sample_comm(struct kc_comm *c, struct kc_member *m,
			struct kc_op *op)
{
	static const uint8_t v4[16] = {
		[10] = 0xff, [11] = 0xff, 10, 9, 0, 1 };
	static const uint8_t v6[16] = { 0xfe, 0x80, [15] = 1 };
	const uint64_t mhave = KC_BIT(KCOLL_A_RANK) |
		KC_BIT(KCOLL_A_MEMBER_ADDR) | KC_BIT(KCOLL_A_MEMBER_PORT) |
		KC_BIT(KCOLL_A_MEMBER_LOCAL_INDEX) |
		KC_BIT(KCOLL_A_MEMBER_CONNECTED);

	memset(c, 0, sizeof(*c));
	c->have = KC_BIT(KCOLL_A_COMM_ID) | KC_BIT(KCOLL_A_COMM_UID) |
		  KC_BIT(KCOLL_A_COMM_PID) | KC_BIT(KCOLL_A_RANK) |
		  KC_BIT(KCOLL_A_NRANKS) | KC_BIT(KCOLL_A_COMM_STATE) |
		  KC_BIT(KCOLL_A_DEV_NAME) | KC_BIT(KCOLL_A_COMM_INFLIGHT) |
		  KC_BIT(KCOLL_A_COMM_MEMBERS) | KC_BIT(KCOLL_A_COMM_OPS) |
		  KC_BIT(KCOLL_A_COMM_LAST_ERROR);
	c->id = 7;
	c->uid = 0x1122334455667788ULL;
	c->pid = 4242;
	c->rank = 1;
	c->nranks = 4;
	c->state = KCOLL_COMM_READY;
	strcpy(c->dev, "rxe0");
	c->inflight = 1;
	memset(m, 0, 2 * sizeof(*m));
	m[0] = (struct kc_member){ .have = mhave, .rank = 0, .port = 18515,
				   .local_index = 0, .connected = 1 };
	memcpy(m[0].addr, v4, 16);
	m[1] = (struct kc_member){ .have = mhave, .rank = 2, .port = 18516,
				   .local_index = 1, .connected = 0 };
	memcpy(m[1].addr, v6, 16);
	c->members = m;
	c->n_members = 2;
	memset(op, 0, sizeof(*op));
	op->have = KC_BIT(KCOLL_A_OP_SEQ) | KC_BIT(KCOLL_A_OP_OPCODE) |
		   KC_BIT(KCOLL_A_OP_ALGO) | KC_BIT(KCOLL_A_OP_PRIO) |
		   KC_BIT(KCOLL_A_OP_BYTES) | KC_BIT(KCOLL_A_OP_AGE_MS) |
		   KC_BIT(KCOLL_A_OP_TIMEOUT_MS) |
		   KC_BIT(KCOLL_A_MISSING_RANKS);
	op->seq = 17;
	op->opcode = KCOLL_OP_ALLREDUCE;
	strcpy(op->algo, "ring");
	op->prio = 2;
	op->bytes = 1048576;
	op->age_ms = 1200;
	op->timeout_ms = 5000;
	op->missing = (struct kc_ranks){ sample_missing, 2 };
	c->ops = op;
	c->n_ops = 1;
	c->last_error.have = KC_BIT(KCOLL_A_OP_SEQ) |
		KC_BIT(KCOLL_A_OP_OPCODE) | KC_BIT(KCOLL_A_ERRNO) |
		KC_BIT(KCOLL_A_MISSING_RANKS);
	c->last_error.seq = 12;
	c->last_error.opcode = KCOLL_OP_ALLGATHER;
	c->last_error.err = -ETIMEDOUT;
	c->last_error.missing = (struct kc_ranks){ sample_lost, 1 };
}

/* Serialize and parse back: what a JSON consumer would get. */
static struct json_object *roundtrip(struct json_object *o)
{
	struct json_object *back;

	if (!o)
		return NULL;
	back = json_tokener_parse(json_object_to_json_string_ext(o,
					JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return back;
}

static struct json_object *jget(struct json_object *o, const char *path)
{
	char key[64];
	const char *dot;
	size_t len;

	while (o && *path) {
		dot = strchr(path, '.');
		len = dot ? (size_t)(dot - path) : strlen(path);
		snprintf(key, sizeof(key), "%.*s", (int)len, path);
		if (json_object_is_type(o, json_type_array))
			o = json_object_array_get_idx(o, atoi(key));
		else if (!json_object_object_get_ex(o, key, &o))
			return NULL;
		path += len + (dot ? 1 : 0);
	}
	return o;
}

static const char *jstr(struct json_object *o, const char *path)
{
	o = jget(o, path);
	return o && json_object_is_type(o, json_type_string) ?
		json_object_get_string(o) : NULL;
}

static int64_t jint(struct json_object *o, const char *path)
{
	o = jget(o, path);
	return o && json_object_is_type(o, json_type_int) ?
		json_object_get_int64(o) : -12345;
}

/* ------------------------------------------------------------------ */
/* JSON                                                                */
/* ------------------------------------------------------------------ */

static void test_json_dev(void)
{
	struct json_object *o;
	struct kc_dev d;

	sample_dev(&d, "rxe0");
	o = roundtrip(kc_json_dev(&d));
	if (!UNIT_CHECK(o))
		return;
	UNIT_EQ_STR(jstr(o, "name"), "rxe0");
	UNIT_EQ_INT(jint(o, "index"), 3);
	UNIT_EQ_STR(jstr(o, "node_guid"), "5054:00ff:fe12:3456");
	UNIT_EQ_STR(jstr(o, "port_state"), "ACTIVE");
	UNIT_EQ_INT(jint(o, "comms"), 2);
	UNIT_EQ_INT(jint(o, "stats.ops"), 11);
	UNIT_EQ_UINT(json_object_get_uint64(jget(o, "stats.bytes")),
		     (1ULL << 63) + 5);
	UNIT_EQ_INT(json_object_array_length(jget(o, "stats.latency")), 4);
	UNIT_EQ_INT(jint(o, "stats.latency.0.from_us"), 64);
	UNIT_EQ_INT(jint(o, "stats.latency.0.to_us"), 128);
	UNIT_EQ_INT(jint(o, "stats.latency.0.count"), 7);
	UNIT_EQ_INT(jint(o, "stats.latency.2.from_us"), 1024);
	UNIT_EQ_INT(jint(o, "stats.latency.3.from_us"), 1LL << 31);
	/* The open bucket: "to_us": null. */
	UNIT_CHECK(json_object_object_get_ex(jget(o, "stats.latency.3"),
					     "to_us", NULL) &&
		   !jget(o, "stats.latency.3.to_us"));
	/* Node-only counters are absent from a device. */
	UNIT_CHECK(!jget(o, "stats.inflight"));
	json_object_put(o);

	/* Only what the kernel sent. */
	d.have = KC_BIT(KCOLL_A_DEV_NAME);
	o = roundtrip(kc_json_dev(&d));
	UNIT_EQ_INT(json_object_object_length(o), 1);
	json_object_put(o);
}

static void test_json_comm(void)
{
	struct kc_member m[2];
	struct json_object *o;
	struct kc_comm c;
	struct kc_op op;

	sample_comm(&c, m, &op);
	o = roundtrip(kc_json_comm(&c, false));
	if (!UNIT_CHECK(o))
		return;
	UNIT_EQ_INT(jint(o, "id"), 7);
	UNIT_EQ_STR(jstr(o, "uid"), "0x1122334455667788");
	UNIT_EQ_INT(jint(o, "pid"), 4242);
	UNIT_EQ_INT(jint(o, "rank"), 1);
	UNIT_EQ_INT(jint(o, "nranks"), 4);
	UNIT_EQ_STR(jstr(o, "state"), "ready");
	UNIT_EQ_STR(jstr(o, "dev"), "rxe0");
	UNIT_EQ_INT(jint(o, "inflight"), 1);
	UNIT_CHECK(!jget(o, "members") && !jget(o, "last_error"));
	UNIT_CHECK(!jget(o, "partial"));
	json_object_put(o);
	c.have |= KC_BIT(KCOLL_A_COMM_PARTIAL);
	o = roundtrip(kc_json_comm(&c, false));
	if (!UNIT_CHECK(o))
		return;
	UNIT_CHECK(json_object_get_boolean(jget(o, "partial")));
	json_object_put(o);
	c.have &= ~KC_BIT(KCOLL_A_COMM_PARTIAL);

	o = roundtrip(kc_json_comm(&c, true));
	if (!UNIT_CHECK(o))
		return;
	UNIT_EQ_STR(jstr(o, "members.0.addr"), "10.9.0.1");
	UNIT_EQ_INT(jint(o, "members.0.port"), 18515);
	UNIT_CHECK(json_object_get_boolean(jget(o, "members.0.connected")));
	UNIT_EQ_STR(jstr(o, "members.1.addr"), "fe80::1");
	UNIT_EQ_INT(jint(o, "members.1.rank"), 2);
	UNIT_EQ_INT(jint(o, "members.1.local_index"), 1);
	UNIT_CHECK(json_object_is_type(jget(o, "members.1.connected"),
				       json_type_boolean) &&
		   !json_object_get_boolean(jget(o, "members.1.connected")));
	/* The sample lists 2 of its 4 ranks, as a reply too large for one
	 * netlink nest does. */
	UNIT_EQ_INT(jint(o, "members_not_listed"), 2);
	UNIT_EQ_INT(jint(o, "ops.0.seq"), 17);
	UNIT_EQ_STR(jstr(o, "ops.0.op"), "allreduce");
	UNIT_EQ_STR(jstr(o, "ops.0.algo"), "ring");
	UNIT_EQ_INT(jint(o, "ops.0.prio"), 2);
	UNIT_EQ_INT(jint(o, "ops.0.bytes"), 1048576);
	UNIT_EQ_INT(jint(o, "ops.0.age_ms"), 1200);
	UNIT_EQ_INT(jint(o, "ops.0.timeout_ms"), 5000);
	UNIT_EQ_INT(json_object_array_length(jget(o, "ops.0.missing")), 2);
	UNIT_EQ_INT(jint(o, "ops.0.missing.1"), 3);
	UNIT_EQ_INT(jint(o, "last_error.seq"), 12);
	UNIT_EQ_STR(jstr(o, "last_error.op"), "allgather");
	UNIT_EQ_INT(jint(o, "last_error.errno"), -ETIMEDOUT);
	UNIT_EQ_STR(jstr(o, "last_error.error"), "Connection timed out");
	UNIT_EQ_INT(jint(o, "last_error.missing.0"), 2);
	json_object_put(o);
}

static void test_json_node_stats(void)
{
	struct kc_dev devs[2];
	struct kc_node_stats ns = { .devs = devs, .n_devs = 2 };
	struct json_object *o;

	sample_stats(&ns.node, true);
	sample_dev(&devs[0], "rxe0");
	sample_dev(&devs[1], "mlx5_0");
	o = roundtrip(kc_json_node_stats(&ns));
	if (!UNIT_CHECK(o))
		return;
	UNIT_EQ_INT(jint(o, "node.ops"), 11);
	UNIT_EQ_INT(jint(o, "node.inflight"), 2);
	UNIT_EQ_INT(jint(o, "node.contexts"), 3);
	UNIT_EQ_INT(jint(o, "node.comms"), 4);
	UNIT_EQ_INT(jint(o, "node.profile.ops"), 4);
	UNIT_EQ_INT(jint(o, "node.profile.phases"), 10);
	UNIT_EQ_INT(jint(o, "node.profile.wait_ns"), 1200000);
	UNIT_EQ_INT(jint(o, "node.profile.settle_ns"), 100000);
	UNIT_CHECK(!jget(o, "devices.0.stats.profile"));
	UNIT_EQ_INT(json_object_array_length(jget(o, "devices")), 2);
	UNIT_EQ_STR(jstr(o, "devices.1.name"), "mlx5_0");
	UNIT_EQ_INT(jint(o, "devices.1.stats.timeouts"), 1);
	json_object_put(o);
}

static void test_json_tunables_event(void)
{
	struct kc_tunable t[2] = {
		{ "chunk_bytes", "65536" }, { "algo/allreduce", "ring" },
	};
	struct kc_event ev = { 0 };
	struct json_object *o;

	o = roundtrip(kc_json_tunables(t, 2));
	UNIT_EQ_STR(jstr(o, "chunk_bytes"), "65536");
	UNIT_EQ_INT(json_object_object_length(o), 2);
	json_object_put(o);

	ev.cmd = KCOLL_CMD_EV_PEER_LOST;
	ev.have = KC_BIT(KCOLL_A_COMM_ID) | KC_BIT(KCOLL_A_PEER_RANK) |
		  KC_BIT(KCOLL_A_ERRNO) | KC_BIT(KCOLL_A_MISSING_RANKS);
	ev.comm_id = 3;
	ev.peer_rank = 2;
	ev.err = -ECONNRESET;
	ev.missing = (struct kc_ranks){ sample_missing, 2 };
	o = roundtrip(kc_json_event(&ev));
	UNIT_EQ_STR(jstr(o, "event"), "peer_lost");
	UNIT_EQ_INT(jint(o, "comm"), 3);
	UNIT_EQ_INT(jint(o, "peer_rank"), 2);
	UNIT_EQ_STR(jstr(o, "error"), "Connection reset by peer");
	UNIT_EQ_INT(jint(o, "missing.0"), 2);
	UNIT_CHECK(!jget(o, "rank"));
	json_object_put(o);
	ev.cmd = 99;
	ev.have = 0;
	o = roundtrip(kc_json_event(&ev));
	UNIT_EQ_INT(jint(o, "event"), 99);
	json_object_put(o);
}

/* ------------------------------------------------------------------ */
/* Text                                                                */
/* ------------------------------------------------------------------ */

/* Runs @fn into a memory stream; the caller frees the text. */
#define CAPTURE(buf, call)						\
	do {								\
		size_t _len;						\
		FILE *_f = open_memstream(&(buf), &_len);		\
		call;							\
		fclose(_f);						\
	} while (0)
#define OUT _f

static void test_text(void)
{
	struct kc_dev devs[1];
	struct kc_node_stats ns = { .devs = devs, .n_devs = 1 };
	struct kc_member m[2];
	struct kc_comm c;
	struct kc_op op;
	char *s = NULL;

	sample_comm(&c, m, &op);
	CAPTURE(s, kc_text_comm(OUT, &c, false));
	UNIT_EQ_STR(s, "comm 7 uid 0x1122334455667788 pid 4242 rank 1/4 "
		    "state ready dev rxe0 inflight 1\n"
		    "    last error seq 12 allgather: Connection timed out "
		    "(-110), missing ranks 2\n");
	free(s);
	CAPTURE(s, kc_text_comm(OUT, &c, true));
	UNIT_EQ_STR(s, "comm 7 uid 0x1122334455667788 pid 4242 rank 1/4 "
		    "state ready dev rxe0 inflight 1\n"
		    "    member rank 0 10.9.0.1 port 18515 local 0 connected\n"
		    "    member rank 2 fe80::1 port 18516 local 1 "
		    "disconnected\n"
		    "    ... 2 more members not listed\n"
		    "    op seq 17 allreduce algo ring prio 2 bytes 1048576 "
		    "age 1200ms timeout 5000ms missing 2,3\n"
		    "    last error seq 12 allgather: Connection timed out "
		    "(-110), missing ranks 2\n");
	free(s);

	/* A dump's brief form: said where the details would be. */
	c.have |= KC_BIT(KCOLL_A_COMM_PARTIAL);
	CAPTURE(s, kc_text_comm(OUT, &c, true));
	UNIT_CHECK(strstr(s, "inflight 1\n    members and operations left "
			  "out of the listing: kcollctl -d comm show 7\n"));
	free(s);
	CAPTURE(s, kc_text_comm(OUT, &c, false));
	UNIT_CHECK(!strstr(s, "left out"));
	free(s);
	c.have &= ~KC_BIT(KCOLL_A_COMM_PARTIAL);

	/* A communicator's own profile, under its counters; one that
	 * completed nothing yet says so. */
	sample_stats(&c.stats, true);
	c.stats.have = KC_BIT(KCOLL_A_STAT_OPS) | KC_BIT(KCOLL_A_STAT_PROFILE);
	c.n_members = c.n_ops = 0;
	c.have = (c.have & ~KC_BIT(KCOLL_A_COMM_LAST_ERROR)) |
		 KC_BIT(KCOLL_A_STATS);
	CAPTURE(s, kc_text_comm(OUT, &c, true));
	UNIT_CHECK(strstr(s, "\n    stats ops 11\n    profile 4 collectives, "
			  "2.5 phases, per collective (us): total 1000 = "
			  "queued 100 + wait 300 + move 500 (land 75) + sigs "
			  "50 + settle 25 + other 25\n"));
	free(s);
	memset(c.stats.prof, 0, sizeof(c.stats.prof));
	CAPTURE(s, kc_text_comm(OUT, &c, true));
	UNIT_CHECK(strstr(s, "\n    profile: no collective completed yet\n"));
	free(s);

	sample_dev(&devs[0], "rxe0");
	CAPTURE(s, kc_text_dev(OUT, &devs[0]));
	UNIT_EQ_STR(s, "3: rxe0: node_guid 5054:00ff:fe12:3456 port ACTIVE "
		    "comms 2\n    ops 11 bytes 9223372036854775813 errors 1 "
		    "timeouts 1\n");
	free(s);

	sample_stats(&ns.node, true);
	devs[0].stats.lat[31] = 0;
	CAPTURE(s, kc_text_node_stats(OUT, &ns));
	UNIT_EQ_STR(s, "node: ops 11 bytes 9223372036854775813 errors 1 "
		    "timeouts 1 inflight 2 contexts 3 comms 4\n"
		    "    latency 64-128us: 7, 128-256us: 3, 1.02-2.05ms: 1, "
		    ">=2147s: 2\n"
		    "    profile 4 collectives, 2.5 phases, per collective "
		    "(us): total 1000 = queued 100 + wait 300 + move 500 "
		    "(land 75) + sigs 50 + settle 25 + other 25\n"
		    "rxe0: ops 11 bytes 9223372036854775813 errors 1 "
		    "timeouts 1\n"
		    "    latency 64-128us: 7, 128-256us: 3, 1.02-2.05ms: 1\n");
	free(s);

	memset(&ns.node.lat, 0, sizeof(ns.node.lat));
	CAPTURE(s, kc_text_hist(OUT, ns.node.lat));
	UNIT_EQ_STR(s, "no samples");
	free(s);
}

/* ------------------------------------------------------------------ */
/* Events                                                              */
/* ------------------------------------------------------------------ */

static void test_event_lines(void)
{
	struct kc_event ev = { 0 };
	char buf[256], small[16];
	int n;

	ev.cmd = KCOLL_CMD_EV_OP_TIMEOUT;
	ev.have = KC_BIT(KCOLL_A_COMM_ID) | KC_BIT(KCOLL_A_COMM_UID) |
		  KC_BIT(KCOLL_A_RANK) | KC_BIT(KCOLL_A_NRANKS) |
		  KC_BIT(KCOLL_A_OP_SEQ) | KC_BIT(KCOLL_A_OP_OPCODE) |
		  KC_BIT(KCOLL_A_OP_TIMEOUT_MS) |
		  KC_BIT(KCOLL_A_MISSING_RANKS);
	ev.comm_id = 3;
	ev.uid = 0xff;
	ev.rank = 1;
	ev.nranks = 4;
	ev.seq = 17;
	ev.opcode = KCOLL_OP_ALLREDUCE;
	ev.timeout_ms = 5000;
	ev.missing = (struct kc_ranks){ sample_missing, 2 };
	n = kc_event_line(&ev, buf, sizeof(buf));
	UNIT_EQ_STR(buf, "comm 3 uid 0x00000000000000ff rank 1/4: op 17 "
		    "allreduce timed out after 5000 ms, missing ranks 2,3");
	UNIT_EQ_INT(n, strlen(buf));
	UNIT_EQ_INT(kc_event_level(&ev), LOG_WARNING);
	/* Truncated: terminated, and the length it needed. */
	UNIT_EQ_INT(kc_event_line(&ev, small, sizeof(small)), n);
	UNIT_EQ_STR(small, "comm 3 uid 0x00");

	ev.cmd = KCOLL_CMD_EV_COMM_CREATED;
	ev.have = KC_BIT(KCOLL_A_COMM_ID) | KC_BIT(KCOLL_A_COMM_UID) |
		  KC_BIT(KCOLL_A_COMM_PID) | KC_BIT(KCOLL_A_RANK) |
		  KC_BIT(KCOLL_A_NRANKS) | KC_BIT(KCOLL_A_DEV_NAME);
	ev.pid = 99;
	strcpy(ev.dev, "rxe0");
	kc_event_line(&ev, buf, sizeof(buf));
	UNIT_EQ_STR(buf, "comm 3 uid 0x00000000000000ff rank 1/4: created by "
		    "pid 99 on rxe0");
	UNIT_EQ_INT(kc_event_level(&ev), LOG_INFO);

	ev.cmd = KCOLL_CMD_EV_COMM_DESTROYED;
	kc_event_line(&ev, buf, sizeof(buf));
	UNIT_EQ_STR(buf, "comm 3 uid 0x00000000000000ff rank 1/4: destroyed "
		    "(pid 99)");

	ev.cmd = KCOLL_CMD_EV_PEER_LOST;
	ev.have = KC_BIT(KCOLL_A_COMM_ID) | KC_BIT(KCOLL_A_PEER_RANK) |
		  KC_BIT(KCOLL_A_ERRNO);
	ev.peer_rank = 2;
	ev.err = -ECONNRESET;
	kc_event_line(&ev, buf, sizeof(buf));
	UNIT_EQ_STR(buf, "comm 3: lost peer rank 2: Connection reset by peer");

	/* Whatever number the message carried (negating INT_MIN is
	 * undefined: this binary aborts on it). */
	ev.err = INT_MIN;
	kc_event_line(&ev, buf, sizeof(buf));
	UNIT_EQ_STR(buf, "comm 3: lost peer rank 2: error code out of range");
	UNIT_EQ_STR(kc_errno_str(4096), "error code out of range");

	ev.cmd = KCOLL_CMD_EV_COMM_ABORTED;
	ev.have = KC_BIT(KCOLL_A_COMM_INFLIGHT);
	ev.inflight = 1;
	kc_event_line(&ev, buf, sizeof(buf));
	UNIT_EQ_STR(buf, "comm ?: aborted, 1 operation cancelled");
	UNIT_EQ_INT(kc_event_level(&ev), LOG_NOTICE);
	ev.have |= KC_BIT(KCOLL_A_PEER_RANK);
	ev.peer_rank = 3;
	ev.inflight = 2;
	kc_event_line(&ev, buf, sizeof(buf));
	UNIT_EQ_STR(buf, "comm ?: revoked by rank 3, 2 operations cancelled");

	ev.cmd = KCOLL_CMD_EV_DEV_REMOVED;
	ev.have = KC_BIT(KCOLL_A_DEV_NAME) | KC_BIT(KCOLL_A_DEV_INDEX);
	ev.dev_index = 5;
	kc_event_line(&ev, buf, sizeof(buf));
	UNIT_EQ_STR(buf, "device rxe0 (index 5) removed");

	ev.cmd = 200;
	kc_event_line(&ev, buf, sizeof(buf));
	UNIT_EQ_STR(buf, "unknown event 200");
	UNIT_CHECK(!kc_event_name(200));
	UNIT_EQ_STR(kc_event_name(KCOLL_CMD_EV_DEV_ADDED), "dev_added");
}

/* ------------------------------------------------------------------ */
/* Prometheus                                                          */
/* ------------------------------------------------------------------ */

/* The metric family a sample line belongs to (histogram suffixes off). */
static void prom_family(const char *sample, char *fam, size_t len)
{
	static const char *const sfx[] = { "_bucket", "_sum", "_count" };
	size_t n = strcspn(sample, "{ "), i, l;

	snprintf(fam, len, "%.*s", (int)n, sample);
	for (i = 0; i < ARRAY_SIZE(sfx); i++) {
		l = strlen(sfx[i]);
		if (n > l && !strcmp(fam + n - l, sfx[i]) &&
		    !strncmp(fam, "kcoll_op_latency_seconds", n - l))
			fam[n - l] = '\0';
	}
}

/*
 * Checks every line of an exposition: comments are HELP/TYPE of the
 * family that follows; samples "name{labels} value" of a declared family.
 * Returns the number of samples.
 */
static int prom_check_lines(char *text)
{
	regex_t sample_re, type_re;
	char fam[128], typed[128] = "";
	char *line, *save = NULL;
	int samples = 0;

	regcomp(&sample_re, "^[a-zA-Z_:][a-zA-Z0-9_:]*"
		"(\\{([a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\",?)*\\})? "
		"(-?[0-9]+(\\.[0-9]+)?(e[-+][0-9]+)?|\\+Inf)$", REG_EXTENDED);
	regcomp(&type_re, "^# TYPE [a-z_]+ (counter|gauge|histogram)$",
		REG_EXTENDED);
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "# HELP ", 7))
			continue;
		if (!strncmp(line, "# TYPE ", 7)) {
			UNIT_CHECK(!regexec(&type_re, line, 0, NULL, 0));
			sscanf(line + 7, "%127s", typed);
			continue;
		}
		if (!UNIT_CHECK(!regexec(&sample_re, line, 0, NULL, 0)))
			unit_diag("bad line: %s", line);
		prom_family(line, fam, sizeof(fam));
		if (!UNIT_EQ_STR(fam, typed))
			unit_diag("sample without its TYPE: %s", line);
		samples++;
	}
	regfree(&sample_re);
	regfree(&type_re);
	return samples;
}

static void test_prom(void)
{
	struct kc_dev devs[2];
	struct kc_node_stats ns = { .devs = devs, .n_devs = 2 };
	uint64_t count = 0, prev_cum = 0, cum, total = 0;
	double le, prev_le = 0;
	char *s = NULL, *copy, *p;
	unsigned int buckets = 0, i;

	sample_stats(&ns.node, true);
	sample_dev(&devs[0], "rxe0");
	sample_dev(&devs[1], "we\"ird\\dev");
	devs[1].have &= ~KC_BIT(KCOLL_A_DEV_COMMS);
	CAPTURE(s, UNIT_EQ_INT(kc_prom_render(OUT, &ns), 0));
	copy = strdup(s);
	UNIT_EQ_INT(prom_check_lines(copy),
		    1 + 4 * 2 + 1 + 3 + 31 + 1 + 2 + 1 + 1 + 7);
	free(copy);

	UNIT_CHECK(strstr(s, "\nkcoll_up 1\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_ops_total{device=\"rxe0\"} 11\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_bytes_total{device=\"rxe0\"} "
			  "9223372036854775813\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_errors_total{device=\"rxe0\"} 1\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_timeouts_total{device="
			  "\"we\\\"ird\\\\dev\"} 1\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_device_comms{device=\"rxe0\"} 2\n"));
	UNIT_CHECK(!strstr(s, "kcoll_device_comms{device=\"we"));
	UNIT_CHECK(strstr(s, "\nkcoll_inflight 2\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_contexts 3\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_comms 4\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_collectives_timed_total 4\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_collective_phases_total 10\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_collective_seconds_total{part=\"total\"} 0.004\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_collective_seconds_total{part=\"wait\"} 0.0012\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_collective_seconds_total{part=\"settle\"} 0.0001\n"));
	UNIT_CHECK(strstr(s, "\n# TYPE kcoll_op_latency_seconds histogram\n"));
	/* Bucket 6 is [64, 128) us: everything through it is <= 128 us. */
	UNIT_CHECK(strstr(s, "\nkcoll_op_latency_seconds_bucket"
			  "{le=\"0.000128\"} 7\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_op_latency_seconds_bucket"
			  "{le=\"6.4e-05\"} 0\n"));
	UNIT_CHECK(strstr(s, "\nkcoll_op_latency_seconds_bucket"
			  "{le=\"0.002048\"} 11\n"));

	/* Buckets: increasing bounds, cumulative counts, +Inf == _count. */
	for (i = 0; i < KCOLL_NL_LAT_BUCKETS; i++)
		total += ns.node.lat[i];
	for (p = strstr(s, "kcoll_op_latency_seconds_bucket{le=\""); p;
	     p = strstr(p + 1, "kcoll_op_latency_seconds_bucket{le=\"")) {
		p += strlen("kcoll_op_latency_seconds_bucket{le=\"");
		buckets++;
		if (!strncmp(p, "+Inf", 4)) {
			UNIT_EQ_INT(sscanf(p, "+Inf\"} %" SCNu64, &cum), 1);
			UNIT_EQ_UINT(cum, total);
			UNIT_CHECK(cum >= prev_cum);
			continue;
		}
		if (!UNIT_EQ_INT(sscanf(p, "%lf\"} %" SCNu64, &le, &cum), 2))
			break;
		UNIT_CHECK(le > prev_le);
		UNIT_CHECK(cum >= prev_cum);
		prev_le = le;
		prev_cum = cum;
	}
	UNIT_EQ_UINT(buckets, KCOLL_NL_LAT_BUCKETS);
	/* 2^31 us: the last finite bound. */
	UNIT_CHECK(prev_le > 2147.48 && prev_le < 2147.49);
	p = strstr(s, "\nkcoll_op_latency_seconds_count ");
	UNIT_CHECK(p && sscanf(p, "\nkcoll_op_latency_seconds_count %" SCNu64,
			       &count) == 1 && count == total);
	free(s);

	/* No module: kcoll_up 0 and nothing else. */
	CAPTURE(s, kc_prom_render(OUT, NULL));
	copy = strdup(s);
	UNIT_EQ_INT(prom_check_lines(copy), 1);
	free(copy);
	UNIT_CHECK(strstr(s, "\nkcoll_up 0\n"));
	free(s);
}

/* ------------------------------------------------------------------ */
/* HTTP                                                                */
/* ------------------------------------------------------------------ */

static int http_parse(const char *req, char *m, char *p)
{
	return kc_http_parse(req, strlen(req), m, 16, p, 64);
}

static void test_http(void)
{
	char m[16], p[64], big[KC_HTTP_MAX + 16], *resp;
	size_t len;

	UNIT_EQ_INT(http_parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", m,
			       p), 1);
	UNIT_EQ_STR(m, "GET");
	UNIT_EQ_STR(p, "/metrics");
	UNIT_EQ_INT(kc_http_route(m, p), KC_HTTP_METRICS);
	UNIT_EQ_INT(http_parse("GET /metrics?x=1 HTTP/1.0\r\n\r\n", m, p), 1);
	UNIT_EQ_STR(p, "/metrics");
	UNIT_EQ_INT(http_parse("HEAD / HTTP/1.0\n\n", m, p), 1);
	UNIT_EQ_INT(kc_http_route(m, p), KC_HTTP_INDEX);
	UNIT_EQ_INT(http_parse("GET /metrics HTTP/1.1\r\nHost: x\r\n", m, p),
		    0);
	UNIT_EQ_INT(http_parse("GET /metrics HTTP/1.1\r\n", m, p), 0);
	UNIT_EQ_INT(http_parse("BAD\r\n\r\n", m, p), -1);
	UNIT_EQ_INT(http_parse("GET metrics HTTP/1.1\r\n\r\n", m, p), -1);
	UNIT_EQ_INT(http_parse("GET /metrics FTP/1\r\n\r\n", m, p), -1);
	UNIT_EQ_INT(http_parse("VERYLONGMETHODNAME / HTTP/1.1\r\n\r\n", m, p),
		    -1);
	UNIT_EQ_INT(http_parse("POST /metrics HTTP/1.1\r\n\r\n", m, p), 1);
	UNIT_EQ_INT(kc_http_route(m, p), KC_HTTP_BAD_METHOD);
	UNIT_EQ_INT(kc_http_route("GET", "/other"), KC_HTTP_NOT_FOUND);
	memset(big, 'a', sizeof(big));
	UNIT_EQ_INT(kc_http_parse(big, KC_HTTP_MAX, m, 16, p, 64), -1);
	UNIT_EQ_INT(kc_http_parse(big, 100, m, 16, p, 64), 0);

	resp = kc_http_response(200, KC_PROM_CONTENT_TYPE, "abc", 3, false,
				&len);
	UNIT_EQ_STR(resp, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; "
		    "version=0.0.4; charset=utf-8\r\nContent-Length: 3\r\n"
		    "Connection: close\r\n\r\nabc");
	UNIT_EQ_UINT(len, strlen(resp));
	free(resp);
	resp = kc_http_response(405, "text/plain", "", 0, false, &len);
	UNIT_CHECK(strstr(resp, "HTTP/1.1 405 Method Not Allowed\r\n") ==
		   resp && strstr(resp, "\r\nAllow: GET, HEAD\r\n"));
	free(resp);
	/* HEAD: the length of the body it would have had, no body. */
	resp = kc_http_response(200, "text/plain", "abc", 3, true, &len);
	UNIT_CHECK(strstr(resp, "Content-Length: 3\r\n") &&
		   len >= 4 && !strcmp(resp + len - 4, "\r\n\r\n"));
	free(resp);
}

/* A new connection's slot: a free one, else the longest silent one's
 * (by order of acceptance: under a flood, milliseconds tie, and the
 * newest connection went first). */
static void test_http_slots(void)
{
	struct kc_http_slot s[4] = {
		{ true, false, 5 }, { true, true, 1 },
		{ false, false, 0 }, { true, false, 3 },
	};

	UNIT_EQ_INT(kc_http_pick_slot(s, 4), 2);
	s[2] = (struct kc_http_slot){ true, false, 7 };
	/* Slot 1 is older but answering: not taken from its scraper. */
	UNIT_EQ_INT(kc_http_pick_slot(s, 4), 3);
	for (int i = 0; i < 4; i++)
		s[i].answering = true;
	UNIT_EQ_INT(kc_http_pick_slot(s, 4), -1);
	UNIT_EQ_INT(kc_http_pick_slot(s, 0), -1);
}

/* Event lines: 50 per kind per 10 s, a flood of one kind hides no other,
 * and what was left out is told once its window ends. */
static void test_evrate(void)
{
	static struct kc_evrate r;
	unsigned int d, i, took = 0;

	for (i = 0; i < 1000; i++)
		took += kc_evrate_take(&r, KCOLL_CMD_EV_COMM_CREATED,
				       1000 + i, &d);
	UNIT_EQ_INT(took, KC_EV_BURST);
	UNIT_EQ_INT(d, 0);
	/* Another kind is not held back by the flood. */
	UNIT_CHECK(kc_evrate_take(&r, KCOLL_CMD_EV_OP_TIMEOUT, 1999, &d));
	UNIT_EQ_INT(d, 0);
	/* Not over before its 10 s. */
	UNIT_EQ_INT(kc_evrate_expire(&r, KCOLL_CMD_EV_COMM_CREATED,
				     1000 + KC_EV_WINDOW_MS - 1), 0);
	/* Over: the count once, then nothing. */
	UNIT_EQ_INT(kc_evrate_expire(&r, KCOLL_CMD_EV_COMM_CREATED,
				     1000 + KC_EV_WINDOW_MS), 1000 - KC_EV_BURST);
	UNIT_EQ_INT(kc_evrate_expire(&r, KCOLL_CMD_EV_COMM_CREATED,
				     1000 + 2 * KC_EV_WINDOW_MS), 0);
	/* A new window logs again. */
	UNIT_CHECK(kc_evrate_take(&r, KCOLL_CMD_EV_COMM_CREATED, 50000, &d));
	UNIT_EQ_INT(d, 0);
	/* Told by the next event when nobody asked in between. */
	for (i = 0; i < 100; i++)
		kc_evrate_take(&r, KCOLL_CMD_EV_COMM_CREATED, 50001, &d);
	UNIT_CHECK(kc_evrate_take(&r, KCOLL_CMD_EV_COMM_CREATED,
				 50000 + KC_EV_WINDOW_MS, &d));
	UNIT_EQ_INT(d, 101 - KC_EV_BURST);
	/* An unknown command counts, it does not index past the table. */
	UNIT_CHECK(kc_evrate_take(&r, 1000, 1, &d));
}

int main(int argc, char **argv)
{
	unit_init(argc, argv);
	UNIT_RUN(test_conf_good);
	UNIT_RUN(test_conf_empty);
	UNIT_RUN(test_conf_errors);
	UNIT_RUN(test_conf_long_line);
	UNIT_RUN(test_conf_load);
	UNIT_RUN(test_fmt_names);
	UNIT_RUN(test_fmt_addr);
	UNIT_RUN(test_fmt_ranks);
	UNIT_RUN(test_hist_labels);
	UNIT_RUN(test_json_dev);
	UNIT_RUN(test_json_comm);
	UNIT_RUN(test_json_node_stats);
	UNIT_RUN(test_json_tunables_event);
	UNIT_RUN(test_text);
	UNIT_RUN(test_event_lines);
	UNIT_RUN(test_prom);
	UNIT_RUN(test_http);
	UNIT_RUN(test_http_slots);
	UNIT_RUN(test_evrate);
	return unit_done();
}
