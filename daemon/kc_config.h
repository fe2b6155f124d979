/* SPDX-License-Identifier: MIT */
/*
 * kcolld configuration file (kcolld(8), kcolld.conf.example).
 *
 * One "key = value" per line; blank lines and everything from '#' to the
 * end of a line are ignored; spaces around key and value are trimmed.
 * Keys of the daemon itself:
 *	metrics_port = N		Prometheus port (1-65535)
 *	metrics_address = ADDR	Prometheus address (IPv4 or IPv6 literal)
 *	devices = NAME...	the RDMA devices kcoll may use, separated by
 *				spaces or commas: set as the module's
 *				"devices" tunable (comma-separated, at most
 *				63 characters); absent ones are warned about
 * Any other key is a module tunable, set with KCOLL_CMD_TUNABLE_SET: a
 * /sys/class/misc/kcoll/ name ("chunk_bytes", "algo/allreduce") and the
 * text sysfs accepts. A key may appear once. Errors name the file and line.
 */
#ifndef KC_CONFIG_H
#define KC_CONFIG_H

#include <stdio.h>

#include "kc_model.h"

#define KC_CONF_MAX_DEVICES	32
#define KC_CONF_LINE_MAX	1024
#define KC_CONF_ADDR_MAX	64
#define KC_CONF_ERR_LEN		512

struct kc_conf_tunable {
	char name[KCOLL_NL_TUNABLE_NAME_MAX];
	char value[KCOLL_NL_TUNABLE_VALUE_MAX];
	unsigned int line;
};

struct kc_conf {
	unsigned int metrics_port;		/* 0: not set */
	unsigned int metrics_port_line;
	char metrics_address[KC_CONF_ADDR_MAX];	/* "": not set */
	unsigned int metrics_address_line;
	char devices[KC_CONF_MAX_DEVICES][KC_DEV_NAME_MAX];
	unsigned int n_devices;
	unsigned int devices_line;
	char devices_list[KCOLL_NL_TUNABLE_VALUE_MAX];	/* "a,b": the tunable */
	struct kc_conf_tunable *tunables;	/* in file order */
	size_t n_tunables;
};

/*
 * Parse @f (named @path in messages) into @conf. Returns 0, -EINVAL with
 * "<path>:<line>: <what>" in @err for a bad line, -ENOMEM, or -errno of a
 * read error. @conf is empty (kc_conf_free() not needed) after an error.
 */
int kc_conf_parse(FILE *f, const char *path, struct kc_conf *conf,
		  char *err, size_t errlen);
/* The same on a string (tests). */
int kc_conf_parse_str(const char *text, const char *path,
		      struct kc_conf *conf, char *err, size_t errlen);
/* Open and parse @path; -ENOENT (message in @err) if it does not exist. */
int kc_conf_load(const char *path, struct kc_conf *conf, char *err,
		 size_t errlen);
void kc_conf_free(struct kc_conf *conf);

#endif /* KC_CONFIG_H */
