// SPDX-License-Identifier: MIT
/* Prometheus text exposition format of kcoll's statistics. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "kc_fmt.h"
#include "kc_prom.h"

char *kc_prom_escape(const char *s, char *buf, size_t len)
{
	size_t o = 0;

	if (!len)
		return buf;
	for (; *s; s++) {
		const char *rep = NULL;
		size_t n;

		if (*s == '\\')
			rep = "\\\\";
		else if (*s == '"')
			rep = "\\\"";
		else if (*s == '\n')
			rep = "\\n";
		n = rep ? 2 : 1;
		if (o + n >= len)
			break;
		if (rep)
			memcpy(buf + o, rep, 2);
		else
			buf[o] = *s;
		o += n;
	}
	buf[o] = '\0';
	return buf;
}

static void kc_prom_head(FILE *f, const char *name, const char *type,
			 const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One per-device counter family: every device that reported it. */
static void kc_prom_dev_counter(FILE *f, const struct kc_node_stats *ns,
				const char *name, const char *help, int attr,
				size_t off)
{
	char label[2 * KC_DEV_NAME_MAX];
	const struct kc_stats *st;
	size_t i;

	kc_prom_head(f, name, "counter", help);
	for (i = 0; i < ns->n_devs; i++) {
		st = &ns->devs[i].stats;
		if (!KC_HAS(&ns->devs[i], KCOLL_A_STATS) || !KC_HAS(st, attr))
			continue;
		fprintf(f, "%s{device=\"%s\"} %" PRIu64 "\n", name,
			kc_prom_escape(ns->devs[i].name, label, sizeof(label)),
			*(const uint64_t *)((const char *)st + off));
	}
}

static void kc_prom_dev_comms(FILE *f, const struct kc_node_stats *ns)
{
	char label[2 * KC_DEV_NAME_MAX];
	size_t i;

	kc_prom_head(f, "kcoll_device_comms", "gauge",
		     "Communicators using the RDMA device.");
	for (i = 0; i < ns->n_devs; i++)
		if (KC_HAS(&ns->devs[i], KCOLL_A_DEV_COMMS))
			fprintf(f, "kcoll_device_comms{device=\"%s\"} %u\n",
				kc_prom_escape(ns->devs[i].name, label,
					       sizeof(label)),
				ns->devs[i].comms);
}

static void kc_prom_gauge(FILE *f, const struct kc_stats *st,
			  const char *name, const char *help, int attr,
			  uint64_t v)
{
	if (!KC_HAS(st, attr))
		return;
	kc_prom_head(f, name, "gauge", help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/*
 * Bucket i holds [2^i, 2^(i+1)) us, so its upper bound is the "le" of the
 * cumulative count through i; the last bucket is open and only in +Inf.
 * The module keeps no sum: _sum adds each bucket's count times its
 * midpoint (the last bucket's lower bound).
 */
static void kc_prom_hist(FILE *f, const struct kc_stats *st)
{
	const char *name = "kcoll_op_latency_seconds";
	uint64_t cum = 0;
	double sum = 0, mid;
	unsigned int i;

	if (!KC_HAS(st, KCOLL_A_STAT_LAT_HIST))
		return;
	kc_prom_head(f, name, "histogram",
		     "Submission to completion time of operations, node-wide."
		     " Buckets are powers of two microseconds; _sum is "
		     "estimated from bucket midpoints.");
	for (i = 0; i < KCOLL_NL_LAT_BUCKETS; i++) {
		cum += st->lat[i];
		if (kc_hist_upper_us(i)) {
			mid = (kc_hist_lower_us(i) + kc_hist_upper_us(i)) / 2.0;
			fprintf(f, "%s_bucket{le=\"%.10g\"} %" PRIu64 "\n",
				name, kc_hist_upper_us(i) / 1e6, cum);
		} else {
			mid = kc_hist_lower_us(i);
		}
		sum += st->lat[i] * mid / 1e6;
	}
	fprintf(f, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, cum);
	fprintf(f, "%s_sum %.9g\n", name, sum);
	fprintf(f, "%s_count %" PRIu64 "\n", name, cum);
}

/*
 * The module's profile of the node's collectives: how many, their phases,
 * and seconds per part, as counters (rate() of a part over rate() of
 * kcoll_collectives_timed_total is the part of one collective).
 */
static void kc_prom_profile(FILE *f, const struct kc_stats *st)
{
	const char *name = "kcoll_collective_seconds_total";
	unsigned int i;

	if (!KC_HAS(st, KCOLL_A_STAT_PROFILE))
		return;
	kc_prom_head(f, "kcoll_collectives_timed_total", "counter",
		     "Collectives that completed without error, whose time "
		     "kcoll_collective_seconds_total splits.");
	fprintf(f, "kcoll_collectives_timed_total %" PRIu64 "\n",
		st->prof[KCOLL_NL_PROF_OPS]);
	kc_prom_head(f, "kcoll_collective_phases_total", "counter",
		     "Phases of those collectives.");
	fprintf(f, "kcoll_collective_phases_total %" PRIu64 "\n",
		st->prof[KCOLL_NL_PROF_PHASES]);
	kc_prom_head(f, name, "counter",
		     "Time of those collectives: part=\"total\" from "
		     "submission to completion; its parts queued, wait (a "
		     "phase to its first byte moving), move (the rest of the "
		     "phase), sigs and settle add up to at most it; land (CPU "
		     "copying and reducing received data) lies within wait "
		     "and move.");
	for (i = KCOLL_NL_PROF_TOTAL_NS; i < KCOLL_NL_PROF_NR; i++) {
		const char *part = kc_prof_names[i];
		size_t len = strlen(part) - 3;	/* without "_ns" */

		fprintf(f, "%s{part=\"%.*s\"} %.9g\n", name, (int)len, part,
			st->prof[i] / 1e9);
	}
}

int kc_prom_render(FILE *f, const struct kc_node_stats *ns)
{
	const struct kc_stats *st;

	kc_prom_head(f, "kcoll_up", "gauge",
		     "1 if kcolld could read the kcoll module's statistics "
		     "(generic netlink family kcoll) for this scrape.");
	fprintf(f, "kcoll_up %d\n", ns ? 1 : 0);
	if (!ns)
		return ferror(f) ? -EIO : 0;
	st = &ns->node;
	kc_prom_dev_counter(f, ns, "kcoll_ops_total",
			    "Operations completed on the RDMA device.",
			    KCOLL_A_STAT_OPS, offsetof(struct kc_stats, ops));
	kc_prom_dev_counter(f, ns, "kcoll_bytes_total",
			    "Payload bytes of the operations completed.",
			    KCOLL_A_STAT_BYTES,
			    offsetof(struct kc_stats, bytes));
	kc_prom_dev_counter(f, ns, "kcoll_errors_total",
			    "Operations completed with an error.",
			    KCOLL_A_STAT_ERRORS,
			    offsetof(struct kc_stats, errors));
	kc_prom_dev_counter(f, ns, "kcoll_timeouts_total",
			    "Operations that ran past their timeout (also "
			    "counted as errors).", KCOLL_A_STAT_TIMEOUTS,
			    offsetof(struct kc_stats, timeouts));
	kc_prom_dev_comms(f, ns);
	kc_prom_gauge(f, st, "kcoll_inflight",
		      "Operations submitted and not yet completed.",
		      KCOLL_A_STAT_INFLIGHT, st->inflight);
	kc_prom_gauge(f, st, "kcoll_contexts", "Open /dev/kcoll files.",
		      KCOLL_A_STAT_CONTEXTS, st->contexts);
	kc_prom_gauge(f, st, "kcoll_comms", "Communicators on this node.",
		      KCOLL_A_STAT_COMMS, st->comms);
	kc_prom_hist(f, st);
	kc_prom_profile(f, st);
	return ferror(f) ? -EIO : 0;
}
