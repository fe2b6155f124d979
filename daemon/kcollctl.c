// SPDX-License-Identifier: MIT
/*
 * kcollctl: inspect and tune the kcoll module over its generic netlink
 * family (kcollctl(8)).
 *
 *	kcollctl [-j|-p] [-d] dev|comm|stats|get|set|monitor ...
 *
 * Exit status: 0 success, 1 failure (the kernel's reason printed), 2 bad
 * usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "kc_nl.h"
#include "kc_render.h"

#ifndef KC_VERSION
#define KC_VERSION "unknown"
#endif

#define EXIT_USAGE	2

struct ctl {
	bool json;
	bool pretty;
	bool details;
	struct kc_nl nl;
};

struct ctl_cmd {
	const char *name;
	int (*fn)(struct ctl *ctl, int argc, char **argv);
};

static void ctl_usage(FILE *f)
{
	fputs("Usage: kcollctl [OPTIONS] COMMAND [ARGS]\n"
	      "Commands:\n"
	      "  dev [show [NAME]]      RDMA devices kcoll drives\n"
	      "  comm [show [ID]]       communicators on this node\n"
	      "  stats                  node-wide and per-device statistics\n"
	      "  get [KNOB]             tunables (KNOB: just its value)\n"
	      "  set KNOB VALUE         change a tunable (CAP_NET_ADMIN)\n"
	      "  monitor                print events until interrupted\n"
	      "Options:\n"
	      "  -j, --json             JSON output\n"
	      "  -p, --pretty           indented JSON output (implies -j)\n"
	      "  -d, --details          comm: members, operations, last "
	      "error\n"
	      "  -V, --version          print the version\n"
	      "  -h, --help             this help\n"
	      "Knobs are the names under /sys/class/misc/kcoll/ (chunk_bytes, "
	      "algo/allreduce, ...).\n"
	      "Exit status: 0 success, 1 failure, 2 bad usage.\n", f);
}

static __attribute__((format(printf, 1, 2)))
int ctl_usage_err(const char *fmt, ...)
{
	va_list ap;

	fputs("kcollctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'kcollctl -h'.\n", stderr);
	return EXIT_USAGE;
}

/* "kcollctl: what: strerror (kernel's extended ack)". */
static int ctl_fail(struct ctl *ctl, const char *what, int err)
{
	fprintf(stderr, "kcollctl: %s: %s", what, strerror(-err));
	if (ctl->nl.errmsg[0])
		fprintf(stderr, " (%s)", ctl->nl.errmsg);
	else if (err == -EPERM)
		fputs(" (needs CAP_NET_ADMIN)", stderr);
	fputc('\n', stderr);
	return EXIT_FAILURE;
}

static int ctl_connect(struct ctl *ctl)
{
	int ret;

	ret = kc_nl_open(&ctl->nl);
	if (ret) {
		fprintf(stderr, "kcollctl: netlink socket: %s\n",
			strerror(-ret));
		return EXIT_FAILURE;
	}
	ret = kc_nl_resolve(&ctl->nl);
	if (ret == -ENOENT) {
		fputs("kcollctl: kcoll module not loaded (generic netlink "
		      "family '" KCOLL_GENL_NAME "' not found)\n", stderr);
		return EXIT_FAILURE;
	}
	if (ret)
		return ctl_fail(ctl, "resolving family " KCOLL_GENL_NAME, ret);
	return 0;
}

/* Prints @obj (consumed) as JSON; false if it could not be built. */
static bool ctl_print_json(struct ctl *ctl, struct json_object *obj)
{
	int flags = JSON_C_TO_STRING_NOSLASHESCAPE;

	if (!obj) {
		fputs("kcollctl: out of memory\n", stderr);
		return false;
	}
	flags |= ctl->pretty ? JSON_C_TO_STRING_PRETTY |
			       JSON_C_TO_STRING_SPACED
			     : JSON_C_TO_STRING_PLAIN;
	puts(json_object_to_json_string_ext(obj, flags));
	json_object_put(obj);
	return true;
}

/* Accepts an optional "show"/"list" keyword in front of the arguments. */
static void ctl_skip_show(int *argc, char ***argv)
{
	if (*argc > 0 && (!strcmp((*argv)[0], "show") ||
			  !strcmp((*argv)[0], "list"))) {
		(*argc)--;
		(*argv)++;
	}
}

static int ctl_dev(struct ctl *ctl, int argc, char **argv)
{
	struct json_object *arr = NULL;
	const char *only = NULL;
	struct kc_dev *devs;
	size_t n, i, shown = 0;
	int ret;

	ctl_skip_show(&argc, &argv);
	if (argc > 1)
		return ctl_usage_err("dev: unexpected '%s'", argv[1]);
	if (argc == 1)
		only = argv[0];
	ret = ctl_connect(ctl);
	if (ret)
		return ret;
	ret = kc_nl_dev_dump(&ctl->nl, &devs, &n);
	if (ret)
		return ctl_fail(ctl, "listing devices", ret);
	if (ctl->json)
		arr = json_object_new_array();
	for (i = 0; i < n; i++) {
		if (only && strcmp(only, devs[i].name))
			continue;
		shown++;
		if (ctl->json)
			json_object_array_add(arr, kc_json_dev(&devs[i]));
		else
			kc_text_dev(stdout, &devs[i]);
	}
	free(devs);
	if (ctl->json && !ctl_print_json(ctl, arr))
		return EXIT_FAILURE;
	if (only && !shown) {
		fprintf(stderr, "kcollctl: no device '%s' in use by kcoll\n",
			only);
		return EXIT_FAILURE;
	}
	return 0;
}

static bool ctl_parse_u32(const char *s, uint32_t *v)
{
	unsigned long long x;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	x = strtoull(s, &end, 0);
	if (*end || errno || x > UINT32_MAX)
		return false;
	*v = x;
	return true;
}

/*
 * Parent and children of comms[i] among the communicators listed (split,
 * shrink and grow in libcoll name the one they came from): ids on this
 * node, as the listing shows them. A parent's other ranks, or a parent
 * already destroyed, are not here: its uid still is.
 */
static void ctl_comm_relations(const struct kc_comm *comms, size_t n,
			       size_t i, struct json_object *o)
{
	const struct kc_comm *c = &comms[i];
	struct json_object *kids = NULL;
	bool any = false;
	size_t j;

	for (j = 0; j < n; j++) {
		if (j == i || !KC_HAS(&comms[j], KCOLL_A_COMM_UID))
			continue;
		if (KC_HAS(c, KCOLL_A_COMM_PARENT_UID) &&
		    comms[j].uid == c->parent_uid && comms[j].pid == c->pid) {
			if (o)
				json_object_object_add(o, "parent_comm",
					json_object_new_int64(comms[j].id));
			else
				printf("  child of comm %u\n", comms[j].id);
		}
		if (!KC_HAS(&comms[j], KCOLL_A_COMM_PARENT_UID) ||
		    comms[j].parent_uid != c->uid || comms[j].pid != c->pid)
			continue;
		if (o) {
			if (!kids)
				kids = json_object_new_array();
			if (kids)
				json_object_array_add(kids,
					json_object_new_int64(comms[j].id));
		} else {
			printf("%s comm %u", any ? "," : "  children:",
			       comms[j].id);
		}
		any = true;
	}
	if (kids)
		json_object_object_add(o, "children", kids);
	if (any && !o)
		printf("\n");
}

static int ctl_comm(struct ctl *ctl, int argc, char **argv)
{
	struct json_object *arr = NULL;
	struct kc_comm *comms;
	uint32_t id = 0;
	size_t n, i;
	char what[48];
	int ret;

	ctl_skip_show(&argc, &argv);
	if (argc > 1)
		return ctl_usage_err("comm: unexpected '%s'", argv[1]);
	if (argc == 1 && !ctl_parse_u32(argv[0], &id))
		return ctl_usage_err("comm: '%s' is not a communicator id",
				     argv[0]);
	ret = ctl_connect(ctl);
	if (ret)
		return ret;
	ret = kc_nl_comm_get(&ctl->nl, argc == 0, id, &comms, &n);
	if (ret == -ENOENT && argc == 1 && !ctl->nl.errmsg[0]) {
		fprintf(stderr, "kcollctl: no communicator %u\n", id);
		return EXIT_FAILURE;
	}
	if (ret) {
		snprintf(what, sizeof(what), argc ? "communicator %u" :
			 "listing communicators", id);
		return ctl_fail(ctl, what, ret);
	}
	if (ctl->json)
		arr = json_object_new_array();
	for (i = 0; i < n; i++) {
		if (ctl->json) {
			struct json_object *o = kc_json_comm(&comms[i],
							     ctl->details);

			if (o)
				ctl_comm_relations(comms, n, i, o);
			json_object_array_add(arr, o);
		} else {
			kc_text_comm(stdout, &comms[i], ctl->details);
			ctl_comm_relations(comms, n, i, NULL);
		}
	}
	kc_comms_free(comms, n);
	if (ctl->json && !ctl_print_json(ctl, arr))
		return EXIT_FAILURE;
	return 0;
}

static int ctl_stats(struct ctl *ctl, int argc, char **argv)
{
	struct kc_node_stats ns;
	int ret;

	ctl_skip_show(&argc, &argv);
	if (argc > 0)
		return ctl_usage_err("stats: unexpected '%s'", argv[0]);
	ret = ctl_connect(ctl);
	if (ret)
		return ret;
	ret = kc_nl_stats_get(&ctl->nl, &ns);
	if (ret)
		return ctl_fail(ctl, "reading statistics", ret);
	if (ctl->json)
		ret = ctl_print_json(ctl, kc_json_node_stats(&ns)) ? 0 :
			EXIT_FAILURE;
	else
		kc_text_node_stats(stdout, &ns);
	kc_node_stats_free(&ns);
	return ret;
}

static int ctl_get(struct ctl *ctl, int argc, char **argv)
{
	struct kc_tunable *t;
	size_t n, i;
	char what[96];
	int ret;

	if (argc > 1)
		return ctl_usage_err("get: unexpected '%s'", argv[1]);
	ret = ctl_connect(ctl);
	if (ret)
		return ret;
	ret = kc_nl_tunable_get(&ctl->nl, argc ? argv[0] : NULL, &t, &n);
	if (ret == -ENOENT && argc && !ctl->nl.errmsg[0]) {
		fprintf(stderr, "kcollctl: unknown tunable '%s'\n", argv[0]);
		return EXIT_FAILURE;
	}
	if (ret) {
		snprintf(what, sizeof(what), "%s%s", argc ? "get " :
			 "reading tunables", argc ? argv[0] : "");
		return ctl_fail(ctl, what, ret);
	}
	if (ctl->json) {
		ret = ctl_print_json(ctl, kc_json_tunables(t, n)) ? 0 :
			EXIT_FAILURE;
	} else if (argc) {
		/* One knob: only its value, for scripts (as sysctl -n). */
		for (i = 0; i < n; i++)
			puts(t[i].value);
	} else {
		for (i = 0; i < n; i++)
			printf("%s = %s\n", t[i].name, t[i].value);
	}
	free(t);
	return ret;
}

static int ctl_set(struct ctl *ctl, int argc, char **argv)
{
	char what[KCOLL_NL_TUNABLE_NAME_MAX + 16];
	int ret;

	if (argc != 2)
		return ctl_usage_err("set: %s", argc < 2 ?
				     "expected KNOB VALUE" :
				     "too many arguments");
	if (strlen(argv[0]) >= KCOLL_NL_TUNABLE_NAME_MAX)
		return ctl_usage_err("set: knob name '%s' is too long",
				     argv[0]);
	if (strlen(argv[1]) >= KCOLL_NL_TUNABLE_VALUE_MAX)
		return ctl_usage_err("set: value '%s' is too long", argv[1]);
	ret = ctl_connect(ctl);
	if (ret)
		return ret;
	ret = kc_nl_tunable_set(&ctl->nl, argv[0], argv[1]);
	if (ret == -ENOENT && !ctl->nl.errmsg[0]) {
		fprintf(stderr, "kcollctl: unknown tunable '%s'\n", argv[0]);
		return EXIT_FAILURE;
	}
	if (ret) {
		snprintf(what, sizeof(what), "set %s", argv[0]);
		return ctl_fail(ctl, what, ret);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* monitor                                                             */
/* ------------------------------------------------------------------ */

static volatile sig_atomic_t ctl_stop;

static void ctl_on_signal(int sig)
{
	(void)sig;
	ctl_stop = 1;
}

struct ctl_mon {
	struct ctl *ctl;
	struct kc_evsock es;
	bool changed;		/* family came or went: rejoin */
	bool present;
};

static void ctl_mon_note(struct ctl_mon *m, const char *name,
			 const char *text)
{
	struct json_object *o;

	if (!m->ctl->json) {
		puts(text);
		return;
	}
	o = json_object_new_object();
	if (o)
		json_object_object_add(o, "event",
				       json_object_new_string(name));
	ctl_print_json(m->ctl, o);
}

static void ctl_mon_event(const struct kc_event *ev, void *arg)
{
	struct ctl_mon *m = arg;
	char line[512];

	if (m->ctl->json) {
		ctl_print_json(m->ctl, kc_json_event(ev));
		return;
	}
	kc_event_line(ev, line, sizeof(line));
	puts(line);
}

static void ctl_mon_family(bool present, void *arg)
{
	struct ctl_mon *m = arg;

	m->changed = true;
	m->present = present;
}

static void ctl_mon_bad(const char *what, int err, void *arg)
{
	(void)arg;
	fprintf(stderr, "kcollctl: ignoring a malformed %s: %s\n", what,
		strerror(-err));
}

static const struct kc_ev_ops ctl_mon_ops = {
	.event = ctl_mon_event,
	.family = ctl_mon_family,
	.bad = ctl_mon_bad,
};

/* The module went away or came back: follow it. */
static void ctl_mon_follow(struct ctl_mon *m)
{
	int ret;

	m->changed = false;
	kc_evsock_leave(&m->es);
	if (!m->present) {
		ctl_mon_note(m, "module_removed", "kcoll module removed");
		return;
	}
	ret = kc_nl_resolve(&m->ctl->nl);
	if (!ret)
		ret = kc_evsock_join(&m->es, &m->ctl->nl);
	if (ret) {
		fprintf(stderr, "kcollctl: kcoll module loaded, but "
			"subscribing failed: %s\n", strerror(-ret));
		return;
	}
	ctl_mon_note(m, "module_loaded", "kcoll module loaded");
}

static int ctl_monitor(struct ctl *ctl, int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = ctl_on_signal };
	struct ctl_mon m = { .ctl = ctl };
	struct pollfd pfd;
	int ret;

	if (argc > 0)
		return ctl_usage_err("monitor: unexpected '%s'", argv[0]);
	ret = ctl_connect(ctl);
	if (ret)
		return ret;
	ret = kc_evsock_open(&m.es, &ctl->nl, true, &ctl_mon_ops, &m);
	if (!ret)
		ret = kc_evsock_join(&m.es, &ctl->nl);
	if (ret) {
		kc_evsock_close(&m.es);
		return ctl_fail(ctl, "subscribing to events", ret);
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	pfd.fd = kc_evsock_fd(&m.es);
	pfd.events = POLLIN;
	while (!ctl_stop) {
		ret = poll(&pfd, 1, -1);
		if (ret < 0) {
			ret = errno == EINTR ? 0 : -errno;
			if (ret)
				break;
			continue;
		}
		ret = kc_evsock_process(&m.es);
		if (ret == -ENOBUFS) {
			fputs("kcollctl: event socket overflowed: events "
			      "lost\n", stderr);
			ret = 0;
		}
		if (ret)
			break;
		if (m.changed)
			ctl_mon_follow(&m);
	}
	kc_evsock_close(&m.es);
	if (ret)
		return ctl_fail(ctl, "reading events", ret);
	return 0;
}

static const struct ctl_cmd ctl_cmds[] = {
	{ "dev", ctl_dev },
	{ "comm", ctl_comm },
	{ "stats", ctl_stats },
	{ "get", ctl_get },
	{ "set", ctl_set },
	{ "monitor", ctl_monitor },
	{ NULL, NULL },
};

/* A command by its name or an unambiguous prefix of it ("st", "mon"). */
static const struct ctl_cmd *ctl_find(const char *name)
{
	const struct ctl_cmd *c, *found = NULL;
	size_t len = strlen(name);

	for (c = ctl_cmds; c->name; c++) {
		if (!strcmp(c->name, name))
			return c;
		if (len && !strncmp(c->name, name, len)) {
			if (found)
				return NULL;
			found = c;
		}
	}
	return found;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "pretty", no_argument, NULL, 'p' },
		{ "details", no_argument, NULL, 'd' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl ctl = { 0 };
	const struct ctl_cmd *cmd;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "+jpdVh", opts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			ctl.json = true;
			break;
		case 'p':
			ctl.json = ctl.pretty = true;
			break;
		case 'd':
			ctl.details = true;
			break;
		case 'V':
			printf("kcollctl (kcoll) %s, netlink family %s "
			       "version %d\n", KC_VERSION, KCOLL_GENL_NAME,
			       KCOLL_GENL_VERSION);
			return 0;
		case 'h':
			ctl_usage(stdout);
			return 0;
		default:
			ctl_usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		ctl_usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[optind], "help")) {
		ctl_usage(stdout);
		return 0;
	}
	cmd = ctl_find(argv[optind]);
	if (!cmd)
		return ctl_usage_err("unknown or ambiguous command '%s'",
				     argv[optind]);
	ret = cmd->fn(&ctl, argc - optind - 1, argv + optind + 1);
	if (ctl.nl.sk)
		kc_nl_close(&ctl.nl);
	if (fflush(stdout) && !ret) {
		perror("kcollctl: stdout");
		ret = EXIT_FAILURE;
	}
	return ret;
}
