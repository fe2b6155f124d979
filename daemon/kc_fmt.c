// SPDX-License-Identifier: MIT
/* Formatting helpers, see kc_fmt.h. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <linux/kcoll.h>
#include <linux/kcoll_netlink.h>

#include "kc_fmt.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

static const char *const kc_opcode_names[] = {
	[KCOLL_OP_NOP]			= "nop",
	[KCOLL_OP_DELAY]		= "delay",
	[KCOLL_OP_ALLREDUCE]		= "allreduce",
	[KCOLL_OP_REDUCE]		= "reduce",
	[KCOLL_OP_BROADCAST]		= "broadcast",
	[KCOLL_OP_ALLGATHER]		= "allgather",
	[KCOLL_OP_REDUCE_SCATTER]	= "reduce_scatter",
	[KCOLL_OP_ALLTOALL]		= "alltoall",
	[KCOLL_OP_SEND]			= "send",
	[KCOLL_OP_RECV]			= "recv",
	[KCOLL_OP_BARRIER]		= "barrier",
	[KCOLL_OP_GATHER]		= "gather",
	[KCOLL_OP_SCATTER]		= "scatter",
	[KCOLL_OP_ALLGATHERV]		= "allgatherv",
	[KCOLL_OP_REDUCE_SCATTERV]	= "reduce_scatterv",
	[KCOLL_OP_ALLTOALLV]		= "alltoallv",
};

static const char *const kc_comm_state_names[] = {
	[KCOLL_COMM_CONNECTING]	= "connecting",
	[KCOLL_COMM_READY]	= "ready",
	[KCOLL_COMM_FAILED]	= "failed",
	[KCOLL_COMM_ABORTED]	= "aborted",
	[KCOLL_COMM_REVOKED]	= "revoked",
};

/* enum ib_port_state (rdma/ib_verbs.h; ibv_port_state has the same). */
static const char *const kc_port_state_names[] = {
	"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER",
};

/* Table lookup, or "<prefix><N>" for a value the table does not name. */
static char *kc_enum_str(const char *const *names, size_t n, unsigned int v,
			 const char *prefix, char *buf, size_t len)
{
	if (v < n && names[v])
		snprintf(buf, len, "%s", names[v]);
	else
		snprintf(buf, len, "%s%u", prefix, v);
	return buf;
}

const char *kc_opcode_name(unsigned int op)
{
	return op < ARRAY_SIZE(kc_opcode_names) ? kc_opcode_names[op] : NULL;
}

char *kc_opcode_str(unsigned int op, char *buf, size_t len)
{
	return kc_enum_str(kc_opcode_names, ARRAY_SIZE(kc_opcode_names), op,
			   "op", buf, len);
}

char *kc_comm_state_str(unsigned int state, char *buf, size_t len)
{
	return kc_enum_str(kc_comm_state_names,
			   ARRAY_SIZE(kc_comm_state_names), state, "state",
			   buf, len);
}

char *kc_port_state_str(unsigned int state, char *buf, size_t len)
{
	return kc_enum_str(kc_port_state_names,
			   ARRAY_SIZE(kc_port_state_names), state, "state",
			   buf, len);
}

char *kc_fmt_addr(const uint8_t addr[16], char *buf, size_t len)
{
	static const uint8_t v4mapped[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};
	char tmp[KC_ADDR_STRLEN];

	if (!memcmp(addr, v4mapped, sizeof(v4mapped)))
		inet_ntop(AF_INET, addr + 12, tmp, sizeof(tmp));
	else
		inet_ntop(AF_INET6, addr, tmp, sizeof(tmp));
	snprintf(buf, len, "%s", tmp);
	return buf;
}

char *kc_fmt_guid(uint64_t guid, char *buf, size_t len)
{
	snprintf(buf, len, "%04x:%04x:%04x:%04x",
		 (unsigned int)(guid >> 48) & 0xffff,
		 (unsigned int)(guid >> 32) & 0xffff,
		 (unsigned int)(guid >> 16) & 0xffff,
		 (unsigned int)guid & 0xffff);
	return buf;
}

/* Length of the run of consecutive values starting at v[i]. */
static uint32_t kc_run_len(const uint32_t *v, uint32_t n, uint32_t i)
{
	uint32_t j = i + 1;

	while (j < n && v[j - 1] != UINT32_MAX && v[j] == v[j - 1] + 1)
		j++;
	return j - i;
}

/*
 * Writes the items into @buf; with @reserve, stops before an item after
 * which "..." would no longer fit. Returns whether every item fitted.
 */
static bool kc_ranks_into(const uint32_t *v, uint32_t n, char *buf,
			  size_t len, bool reserve)
{
	static const char more[] = "...";
	size_t used = 0, room;
	uint32_t i = 0, run;
	char item[32];
	int w;

	buf[0] = '\0';
	while (i < n) {
		run = kc_run_len(v, n, i);
		if (run < 3)	/* two in a row read better as "2,3" */
			run = 1;
		if (run > 1)
			w = snprintf(item, sizeof(item), "%s%u-%u",
				     i ? "," : "", v[i], v[i + run - 1]);
		else
			w = snprintf(item, sizeof(item), "%s%u",
				     i ? "," : "", v[i]);
		room = reserve ? sizeof(more) - 1 : 0;
		if (used + w + room >= len) {
			if (reserve && used + sizeof(more) <= len)
				memcpy(buf + used, more, sizeof(more));
			return false;
		}
		memcpy(buf + used, item, w + 1);
		used += w;
		i += run;
	}
	return true;
}

char *kc_fmt_ranks(const uint32_t *v, uint32_t n, char *buf, size_t len)
{
	if (!len)
		return buf;
	if (!n)
		snprintf(buf, len, "none");
	else if (!kc_ranks_into(v, n, buf, len, false))
		kc_ranks_into(v, n, buf, len, true);
	return buf;
}

const char *kc_errno_str(int err)
{
	/* Whatever a message carried: no errno is beyond 4095. */
	if (err < -4095 || err > 4095)
		return "error code out of range";
	return strerror(err < 0 ? -err : err);
}

uint64_t kc_hist_lower_us(unsigned int i)
{
	return i ? 1ULL << i : 0;
}

uint64_t kc_hist_upper_us(unsigned int i)
{
	return i + 1 < KCOLL_NL_LAT_BUCKETS ? 1ULL << (i + 1) : 0;
}

/* A duration in microseconds as a number and a unit: 3 significant
 * digits in ms and s ("1.02", "ms"); whole microseconds below 1 ms. */
static const char *kc_fmt_us(uint64_t us, char *buf, size_t len)
{
	if (us < 1000) {
		snprintf(buf, len, "%llu", (unsigned long long)us);
		return "us";
	}
	if (us < 1000000) {
		snprintf(buf, len, "%.3g", us / 1e3);
		return "ms";
	}
	if (us < 1000000000)
		snprintf(buf, len, "%.3g", us / 1e6);
	else
		snprintf(buf, len, "%.0f", us / 1e6);
	return "s";
}

char *kc_hist_label(unsigned int i, char *buf, size_t len)
{
	char lo[16], hi[16];
	const char *ulo, *uhi;

	ulo = kc_fmt_us(kc_hist_lower_us(i), lo, sizeof(lo));
	if (!kc_hist_upper_us(i)) {
		snprintf(buf, len, ">=%s%s", lo, ulo);
		return buf;
	}
	uhi = kc_fmt_us(kc_hist_upper_us(i), hi, sizeof(hi));
	if (!strcmp(ulo, uhi))
		snprintf(buf, len, "%s-%s%s", lo, hi, uhi);
	else
		snprintf(buf, len, "%s%s-%s%s", lo, ulo, hi, uhi);
	return buf;
}

/* KCOLL_A_STAT_PROFILE's names, in enum kcoll_nl_prof order. */
const char *const kc_prof_names[KCOLL_NL_PROF_NR] = {
	"ops", "phases", "total_ns", "queued_ns", "wait_ns", "move_ns",
	"land_ns", "sigs_ns", "settle_ns",
};
