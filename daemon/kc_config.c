// SPDX-License-Identifier: MIT
/* kcolld configuration file parser, see kc_config.h. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kc_config.h"

struct kc_conf_ctx {
	const char *path;
	unsigned int line;
	struct kc_conf *conf;
	char *err;
	size_t errlen;
};

static __attribute__((format(printf, 2, 3)))
int kc_conf_err(struct kc_conf_ctx *cx, const char *fmt, ...)
{
	char msg[KC_CONF_ERR_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (cx->errlen)
		snprintf(cx->err, cx->errlen, "%s:%u: %s", cx->path, cx->line,
			 msg);
	return -EINVAL;
}

static char *kc_trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Keys: a letter, then letters, digits, '_', '-', '.' or '/'. */
static bool kc_key_valid(const char *k)
{
	if (!isalpha((unsigned char)*k))
		return false;
	for (; *k; k++)
		if (!isalnum((unsigned char)*k) && !strchr("_-./", *k))
			return false;
	return true;
}

static bool kc_value_printable(const char *v)
{
	for (; *v; v++)
		if (!isprint((unsigned char)*v))
			return false;
	return true;
}

/* Line of an earlier occurrence of @key, or 0. */
static unsigned int kc_conf_seen(const struct kc_conf *conf, const char *key)
{
	size_t i;

	if (!strcmp(key, "metrics_port"))
		return conf->metrics_port_line;
	if (!strcmp(key, "metrics_address"))
		return conf->metrics_address_line;
	if (!strcmp(key, "devices"))
		return conf->devices_line;
	for (i = 0; i < conf->n_tunables; i++)
		if (!strcmp(conf->tunables[i].name, key))
			return conf->tunables[i].line;
	return 0;
}

static int kc_conf_port(struct kc_conf_ctx *cx, const char *v)
{
	unsigned long port;
	char *end;

	errno = 0;
	port = strtoul(v, &end, 10);
	if (!isdigit((unsigned char)*v) || *end || errno || !port ||
	    port > 65535)
		return kc_conf_err(cx, "metrics_port: '%s' is not a port "
				   "number (1-65535)", v);
	cx->conf->metrics_port = port;
	cx->conf->metrics_port_line = cx->line;
	return 0;
}

static int kc_conf_address(struct kc_conf_ctx *cx, const char *v)
{
	unsigned char buf[sizeof(struct in6_addr)];

	if (strlen(v) >= KC_CONF_ADDR_MAX ||
	    (inet_pton(AF_INET, v, buf) != 1 &&
	     inet_pton(AF_INET6, v, buf) != 1))
		return kc_conf_err(cx, "metrics_address: '%s' is not an IPv4 "
				   "or IPv6 address", v);
	strcpy(cx->conf->metrics_address, v);
	cx->conf->metrics_address_line = cx->line;
	return 0;
}

static int kc_conf_devices(struct kc_conf_ctx *cx, char *v)
{
	struct kc_conf *conf = cx->conf;
	char *save = NULL, *name;
	unsigned int i;
	size_t len, n;

	for (name = strtok_r(v, " \t,", &save); name;
	     name = strtok_r(NULL, " \t,", &save)) {
		if (conf->n_devices == KC_CONF_MAX_DEVICES)
			return kc_conf_err(cx, "devices: more than %d names",
					   KC_CONF_MAX_DEVICES);
		if (strlen(name) >= KC_DEV_NAME_MAX)
			return kc_conf_err(cx, "devices: name '%s' is longer "
					   "than %d characters", name,
					   KC_DEV_NAME_MAX - 1);
		strcpy(conf->devices[conf->n_devices++], name);
	}
	if (!conf->n_devices)
		return kc_conf_err(cx, "devices: no device named");
	for (i = 0, len = 0; i < conf->n_devices; i++) {
		n = strlen(conf->devices[i]);
		if (len + !!len + n >= sizeof(conf->devices_list))
			return kc_conf_err(cx, "devices: the list is longer "
					   "than %d characters with single "
					   "commas", KCOLL_NL_TUNABLE_VALUE_MAX
					   - 1);
		if (len)
			conf->devices_list[len++] = ',';
		memcpy(conf->devices_list + len, conf->devices[i], n + 1);
		len += n;
	}
	conf->devices_line = cx->line;
	return 0;
}

static int kc_conf_tunable(struct kc_conf_ctx *cx, const char *k,
			   const char *v)
{
	struct kc_conf *conf = cx->conf;
	struct kc_conf_tunable *t;

	if (strlen(k) >= KCOLL_NL_TUNABLE_NAME_MAX)
		return kc_conf_err(cx, "tunable name '%s' is longer than %d "
				   "characters", k,
				   KCOLL_NL_TUNABLE_NAME_MAX - 1);
	if (strlen(v) >= KCOLL_NL_TUNABLE_VALUE_MAX)
		return kc_conf_err(cx, "%s: value is longer than %d "
				   "characters", k,
				   KCOLL_NL_TUNABLE_VALUE_MAX - 1);
	t = realloc(conf->tunables, (conf->n_tunables + 1) * sizeof(*t));
	if (!t)
		return -ENOMEM;
	conf->tunables = t;
	t += conf->n_tunables++;
	memset(t, 0, sizeof(*t));
	strcpy(t->name, k);
	strcpy(t->value, v);
	t->line = cx->line;
	return 0;
}

static int kc_conf_line(struct kc_conf_ctx *cx, char *line)
{
	char *hash, *eq, *key, *val;
	unsigned int prev;

	hash = strchr(line, '#');
	if (hash)
		*hash = '\0';
	line = kc_trim(line);
	if (!*line)
		return 0;
	if (*line == '[')
		return kc_conf_err(cx, "sections are not supported: write "
				   "'key = value' lines only");
	eq = strchr(line, '=');
	if (!eq)
		return kc_conf_err(cx, "expected 'key = value', got '%s'",
				   line);
	*eq = '\0';
	key = kc_trim(line);
	val = kc_trim(eq + 1);
	if (!*key)
		return kc_conf_err(cx, "missing key before '='");
	if (!kc_key_valid(key))
		return kc_conf_err(cx, "invalid key '%s' (letters, digits, "
				   "'_', '-', '.', '/')", key);
	if (!*val)
		return kc_conf_err(cx, "%s: missing value", key);
	if (!kc_value_printable(val))
		return kc_conf_err(cx, "%s: value has control characters",
				   key);
	prev = kc_conf_seen(cx->conf, key);
	if (prev)
		return kc_conf_err(cx, "%s: already set on line %u", key,
				   prev);
	if (!strcmp(key, "metrics_port"))
		return kc_conf_port(cx, val);
	if (!strcmp(key, "metrics_address"))
		return kc_conf_address(cx, val);
	if (!strcmp(key, "devices"))
		return kc_conf_devices(cx, val);
	return kc_conf_tunable(cx, key, val);
}

void kc_conf_free(struct kc_conf *conf)
{
	free(conf->tunables);
	memset(conf, 0, sizeof(*conf));
}

int kc_conf_parse(FILE *f, const char *path, struct kc_conf *conf,
		  char *err, size_t errlen)
{
	struct kc_conf_ctx cx = {
		.path = path, .conf = conf, .err = err, .errlen = errlen,
	};
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int ret = 0;

	memset(conf, 0, sizeof(*conf));
	if (errlen)
		err[0] = '\0';
	while ((n = getline(&line, &cap, f)) >= 0) {
		cx.line++;
		if (n > KC_CONF_LINE_MAX) {
			ret = kc_conf_err(&cx, "line longer than %d "
					  "characters", KC_CONF_LINE_MAX);
			break;
		}
		if (strlen(line) != (size_t)n) {
			ret = kc_conf_err(&cx, "NUL byte in line");
			break;
		}
		ret = kc_conf_line(&cx, line);
		if (ret)
			break;
	}
	if (!ret && ferror(f)) {
		ret = -errno ? -errno : -EIO;
		if (errlen)
			snprintf(err, errlen, "%s: %s", path, strerror(-ret));
	}
	if (ret == -ENOMEM && errlen)
		snprintf(err, errlen, "%s:%u: out of memory", path, cx.line);
	free(line);
	if (ret)
		kc_conf_free(conf);
	return ret;
}

int kc_conf_parse_str(const char *text, const char *path,
		      struct kc_conf *conf, char *err, size_t errlen)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int ret;

	if (!f) {
		ret = -errno;
		if (errlen)
			snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	ret = kc_conf_parse(f, path, conf, err, errlen);
	fclose(f);
	return ret;
}

int kc_conf_load(const char *path, struct kc_conf *conf, char *err,
		 size_t errlen)
{
	FILE *f = fopen(path, "re");
	int ret;

	if (!f) {
		ret = -errno;
		memset(conf, 0, sizeof(*conf));
		if (errlen)
			snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	ret = kc_conf_parse(f, path, conf, err, errlen);
	fclose(f);
	return ret;
}
