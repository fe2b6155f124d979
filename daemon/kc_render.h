/* SPDX-License-Identifier: MIT */
/*
 * Text and JSON views of the kc_model.h structs (kcollctl's output,
 * kcolld's log lines). JSON is built as json-c objects; the caller owns
 * (json_object_put()) what the kc_json_* functions return, NULL only when
 * out of memory. Fields the kernel did not send are left out of both.
 */
#ifndef KC_RENDER_H
#define KC_RENDER_H

#include <stdbool.h>
#include <stdio.h>

#include "kc_model.h"

struct json_object;

struct json_object *kc_json_stats(const struct kc_stats *st);
struct json_object *kc_json_dev(const struct kc_dev *d);
/* @details: members, operations in flight, last error, statistics. */
struct json_object *kc_json_comm(const struct kc_comm *c, bool details);
struct json_object *kc_json_node_stats(const struct kc_node_stats *ns);
struct json_object *kc_json_event(const struct kc_event *ev);
/* An object name -> value, in the kernel's order. */
struct json_object *kc_json_tunables(const struct kc_tunable *t, size_t n);

void kc_text_dev(FILE *f, const struct kc_dev *d);
void kc_text_comm(FILE *f, const struct kc_comm *c, bool details);
void kc_text_node_stats(FILE *f, const struct kc_node_stats *ns);
/* Non-empty latency buckets: "16-32us: 3, 32-64us: 100"; "no samples". */
void kc_text_hist(FILE *f, const uint64_t lat[KCOLL_NL_LAT_BUCKETS]);

/* "comm_created", "op_timeout", ... (NULL for an unknown command). */
const char *kc_event_name(unsigned int cmd);
/*
 * One line, no newline: "comm 3 uid 0x... rank 1/4: op 17 allreduce timed
 * out after 5000 ms, missing ranks 2,3". Returns the length it needed (as
 * snprintf); @buf always ends in NUL.
 */
int kc_event_line(const struct kc_event *ev, char *buf, size_t len);
/* syslog(3) level of an event: LOG_WARNING for failures, ... */
int kc_event_level(const struct kc_event *ev);

/*
 * How many lines of each kind of event kcolld logs: any user makes
 * communicators (and their events) at will, and a flood of one kind must
 * neither fill the log nor hide another kind. At most KC_EV_BURST lines
 * of one command per KC_EV_WINDOW_MS; what is left out is counted.
 */
#define KC_EV_BURST		50
#define KC_EV_WINDOW_MS		10000

struct kc_evrate {
	struct {
		int64_t start_ms;	/* this window's start */
		unsigned int logged;	/* lines in this window */
		unsigned int dropped;	/* lines left out in it */
	} cmd[KCOLL_CMD_MAX + 1];
};

/*
 * May an event of @cmd be logged at @now_ms? Each window starts with
 * the first event after the last one ended; *@dropped_before is then
 * what the ended window left out (to be said once, 0 otherwise).
 */
bool kc_evrate_take(struct kc_evrate *r, unsigned int cmd, int64_t now_ms,
		    unsigned int *dropped_before);
/* @cmd's window has ended by @now_ms: what it left out (and it is reset),
 * else 0. kcolld asks every second, so a flood that stopped is told. */
unsigned int kc_evrate_expire(struct kc_evrate *r, unsigned int cmd,
			      int64_t now_ms);

#endif /* KC_RENDER_H */
