/* SPDX-License-Identifier: MIT */
/*
 * Small formatting helpers shared by kcollctl and kcolld: names of the
 * uapi enums, addresses, GUIDs, rank lists and latency-histogram buckets.
 * Every function writes a NUL-terminated string that fits in @len (when
 * @len > 0) and returns @buf.
 */
#ifndef KC_FMT_H
#define KC_FMT_H

#include <stddef.h>
#include <stdint.h>

#include <linux/kcoll_netlink.h>

/* Longest output of each helper, with the NUL. */
#define KC_ADDR_STRLEN	48	/* INET6_ADDRSTRLEN and some */
#define KC_GUID_STRLEN	20	/* "xxxx:xxxx:xxxx:xxxx" */
#define KC_HIST_LABEL_LEN 24	/* "512us-1.02ms", ">=2147s" */

/* enum kcoll_op name ("allreduce", ...), or NULL if unknown. */
const char *kc_opcode_name(unsigned int op);
/* The name, or "op<N>" for an unknown opcode. */
char *kc_opcode_str(unsigned int op, char *buf, size_t len);
/* enum kcoll_comm_state: "connecting", "ready", "failed", "aborted",
 * "revoked". */
char *kc_comm_state_str(unsigned int state, char *buf, size_t len);
/* enum ib_port_state of port 1: "DOWN", "ACTIVE", ... */
char *kc_port_state_str(unsigned int state, char *buf, size_t len);

/* A 16-byte member address: dotted quad when IPv4-mapped, else IPv6. */
char *kc_fmt_addr(const uint8_t addr[16], char *buf, size_t len);
/* "5054:00ff:fe12:3456", as rdma(8) and ibv_devinfo print node GUIDs. */
char *kc_fmt_guid(uint64_t guid, char *buf, size_t len);
/*
 * "1,2,5-9": runs of three or more consecutive ranks collapse to a range;
 * "none" for an empty list. If @buf is too small the list ends in "...".
 */
char *kc_fmt_ranks(const uint32_t *v, uint32_t n, char *buf, size_t len);
/* Text of a negative (or positive) errno: strerror(). */
const char *kc_errno_str(int err);

/*
 * Latency bucket i of KCOLL_NL_LAT_BUCKETS: [2^i, 2^(i+1)) microseconds;
 * bucket 0 also counts < 1 us, the last one everything longer.
 * kc_hist_upper_us() is 0 for the last (open) bucket.
 */
uint64_t kc_hist_lower_us(unsigned int i);
uint64_t kc_hist_upper_us(unsigned int i);
/* "0-2us", "64-128us", "512us-1.02ms", "1.05-2.1s", ">=2147s". */
char *kc_hist_label(unsigned int i, char *buf, size_t len);

/* KCOLL_A_STAT_PROFILE's entries by name ("ops", ..., "settle_ns"). */
extern const char *const kc_prof_names[KCOLL_NL_PROF_NR];

#endif /* KC_FMT_H */
