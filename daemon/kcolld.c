// SPDX-License-Identifier: MIT
/*
 * kcolld: the kcoll node agent (kcolld(8)).
 *
 * Applies the tunables of its configuration file to the module, logs every
 * kcoll event as one line, serves Prometheus metrics on a local TCP port,
 * and follows the module across unload/reload: nlctrl tells it when the
 * generic netlink family goes and comes back (and it retries every second
 * while the family is missing), then it re-subscribes to the events group
 * and applies the configuration again.
 *
 * One thread, one ppoll() loop over the event socket, the listening socket
 * and the HTTP clients. Requests to the module (statistics for a scrape,
 * tunables) are synchronous on their own socket.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "kc_config.h"
#include "kc_http.h"
#include "kc_nl.h"
#include "kc_prom.h"
#include "kc_render.h"

#ifndef KC_VERSION
#define KC_VERSION "unknown"
#endif

#define KD_DEFAULT_CONF		"/etc/kcoll/kcolld.conf"
#define KD_DEFAULT_PORT		9464
#define KD_DEFAULT_ADDR		"127.0.0.1"
#define KD_MAX_CLIENTS		16
#define KD_CLIENT_TIMEOUT_MS	10000
#define KD_REQUEST_TIMEOUT_MS	3000	/* to send the request head */
#define KD_RETRY_MS		1000
#define KD_LISTEN_RETRY_MS	5000
#define KD_EXIT_USAGE		2

struct kd_client {
	int fd;				/* -1: free slot */
	size_t in_len;
	char in[KC_HTTP_MAX];
	char *out;			/* response, once the request is read */
	size_t out_len;
	size_t out_off;
	int64_t start_ms;
	unsigned long long seq;		/* which accept it was */
};

struct kd {
	/* options */
	const char *conf_path;
	bool conf_explicit;
	bool foreground;
	bool once;
	bool check_only;
	int port;			/* -1: not given */
	const char *bind_addr;		/* NULL: not given */

	struct kc_conf conf;
	bool have_conf;
	struct kc_nl nl;
	struct kc_evsock es;
	bool connected;
	bool ever_connected;
	bool missing_logged;		/* "not loaded" said since last change */
	bool scrape_err_logged;
	bool family_event;		/* set by the nlctrl callback */
	bool family_present;
	int64_t next_retry_ms;
	int64_t next_listen_ms;		/* metrics port taken: try again */
	int listen_fd;
	struct kc_evrate evrate;	/* event lines per kind */
	struct kd_client clients[KD_MAX_CLIENTS];
	unsigned long long accepted;	/* connections so far */
};

/* ------------------------------------------------------------------ */
/* Logging                                                             */
/* ------------------------------------------------------------------ */

static bool kd_use_syslog;
static bool kd_use_prefix;

/*
 * To syslog once daemonized; otherwise stderr, with sd-daemon "<N>"
 * priority prefixes unless stderr is a terminal (journald reads them).
 */
static __attribute__((format(printf, 2, 3)))
void kd_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (kd_use_syslog) {
		vsyslog(level, fmt, ap);
	} else {
		if (kd_use_prefix)
			fprintf(stderr, "<%d>", level);
		else if (level <= LOG_ERR)
			fputs("kcolld: error: ", stderr);
		else if (level == LOG_WARNING)
			fputs("kcolld: warning: ", stderr);
		else
			fputs("kcolld: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}

static int64_t kd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ */
/* The module: configuration, connection                               */
/* ------------------------------------------------------------------ */

/* Warns about devices the configuration expects and kcoll does not use. */
static void kd_check_devices(struct kd *d)
{
	struct kc_dev *devs;
	unsigned int i;
	size_t n, j;
	int ret;

	if (!d->have_conf || !d->conf.n_devices)
		return;
	ret = kc_nl_dev_dump(&d->nl, &devs, &n);
	if (ret) {
		kd_log(LOG_ERR, "listing devices: %s", strerror(-ret));
		return;
	}
	for (i = 0; i < d->conf.n_devices; i++) {
		for (j = 0; j < n; j++)
			if (!strcmp(devs[j].name, d->conf.devices[i]))
				break;
		if (j == n)
			kd_log(LOG_WARNING, "%s:%u: device %s is not in use by "
			       "kcoll (absent, or not an RDMA device)",
			       d->conf_path, d->conf.devices_line,
			       d->conf.devices[i]);
	}
	free(devs);
}

/*
 * "devices =": the module's devices tunable, so that new communicators use
 * only those devices and the listener refuses hellos arriving on others.
 * Returns 1 if the module refused it, else 0.
 */
static unsigned int kd_apply_devices(struct kd *d)
{
	int ret;

	if (!d->conf.n_devices)
		return 0;
	ret = kc_nl_tunable_set(&d->nl, "devices", d->conf.devices_list);
	if (ret) {
		kd_log(LOG_ERR, "%s:%u: devices = %s: %s%s%s%s", d->conf_path,
		       d->conf.devices_line, d->conf.devices_list,
		       ret == -ENOENT && !d->nl.errmsg[0] ?
		       "this kcoll module has no devices tunable" :
		       strerror(-ret), d->nl.errmsg[0] ? " (" : "",
		       d->nl.errmsg, d->nl.errmsg[0] ? ")" : "");
		return 1;
	}
	kd_log(LOG_NOTICE, "new communicators use only %s (devices, %s:%u)",
	       d->conf.devices_list, d->conf_path, d->conf.devices_line);
	return 0;
}

/* Sets every tunable of the configuration; returns how many failed. */
static unsigned int kd_apply(struct kd *d)
{
	const struct kc_conf_tunable *t;
	unsigned int failed = 0;
	size_t i;
	int ret;

	if (!d->have_conf)
		return 0;
	for (i = 0; i < d->conf.n_tunables; i++) {
		t = &d->conf.tunables[i];
		ret = kc_nl_tunable_set(&d->nl, t->name, t->value);
		if (!ret)
			continue;
		failed++;
		kd_log(LOG_ERR, "%s:%u: %s = %s: %s%s%s%s", d->conf_path,
		       t->line, t->name, t->value,
		       ret == -ENOENT && !d->nl.errmsg[0] ?
		       "no such tunable" : strerror(-ret),
		       d->nl.errmsg[0] ? " (" : "", d->nl.errmsg,
		       d->nl.errmsg[0] ? ")" : "");
	}
	kd_log(failed ? LOG_WARNING : LOG_NOTICE,
	       "applied %zu of %zu tunables from %s", d->conf.n_tunables -
	       failed, d->conf.n_tunables, d->conf_path);
	failed += kd_apply_devices(d);
	kd_check_devices(d);
	return failed;
}

/* Resolve the family, join its events group, apply the configuration. */
static int kd_connect(struct kd *d)
{
	int ret;

	ret = kc_nl_resolve(&d->nl);
	if (ret) {
		if (!d->missing_logged)
			kd_log(LOG_WARNING, "kcoll module not loaded (generic "
			       "netlink family '%s' not found)%s",
			       KCOLL_GENL_NAME,
			       d->once ? "" : ": retrying every second");
		d->missing_logged = true;
		return ret;
	}
	ret = kc_evsock_join(&d->es, &d->nl);
	if (ret) {
		if (!d->missing_logged)
			kd_log(LOG_ERR, "subscribing to kcoll events: %s%s",
			       strerror(-ret),
			       d->once ? "" : ": retrying every second");
		d->missing_logged = true;
		d->nl.family = 0;
		return ret;
	}
	d->connected = true;
	d->missing_logged = false;
	d->scrape_err_logged = false;
	if (d->ever_connected)
		kd_log(LOG_NOTICE, "kcoll module is back (family id %d): "
		       "re-subscribed to events, re-applying %s",
		       d->nl.family, d->have_conf ? d->conf_path : "nothing");
	else
		kd_log(LOG_NOTICE, "connected to the kcoll module (family id "
		       "%d), subscribed to events", d->nl.family);
	d->ever_connected = true;
	return kd_apply(d) ? -EINVAL : 0;
}

static void kd_disconnect(struct kd *d, const char *why)
{
	if (!d->connected)
		return;
	kc_evsock_leave(&d->es);
	d->nl.family = 0;
	d->connected = false;
	d->missing_logged = true;	/* said here */
	d->next_retry_ms = kd_now_ms() + KD_RETRY_MS;
	kd_log(LOG_WARNING, "kcoll module gone (%s): retrying every second",
	       why);
}

/* After a failed request or lost events: is the family still the one we
 * joined? */
static void kd_verify_family(struct kd *d)
{
	int old = d->nl.family;

	if (!d->connected)
		return;
	if (kc_nl_resolve(&d->nl)) {
		d->nl.family = old;
		kd_disconnect(d, "generic netlink family not found");
	} else if (d->nl.family != old) {
		kd_disconnect(d, "module reloaded");
		kd_connect(d);
	}
}

/* What a kind of event's ended window left out of the log, said once. */
static void kd_event_dropped(unsigned int cmd, unsigned int n)
{
	const char *name = kc_event_name(cmd);

	if (n)
		kd_log(LOG_NOTICE, "%u %s event line%s not logged (more than %d in %d s)",
		       n, name ? name : "unknown", n == 1 ? "" : "s",
		       KC_EV_BURST, KC_EV_WINDOW_MS / 1000);
}

static void kd_on_event(const struct kc_event *ev, void *arg)
{
	struct kd *d = arg;
	unsigned int dropped;
	char line[512];
	bool take;

	take = kc_evrate_take(&d->evrate, ev->cmd, kd_now_ms(), &dropped);
	kd_event_dropped(ev->cmd, dropped);
	if (!take)
		return;
	kc_event_line(ev, line, sizeof(line));
	kd_log(kc_event_level(ev), "%s", line);
}

static void kd_on_family(bool present, void *arg)
{
	struct kd *d = arg;

	d->family_event = true;
	d->family_present = present;
}

static void kd_on_bad(const char *what, int err, void *arg)
{
	(void)arg;
	kd_log(LOG_WARNING, "ignoring a malformed %s: %s", what,
	       strerror(-err));
}

static const struct kc_ev_ops kd_ev_ops = {
	.event = kd_on_event,
	.family = kd_on_family,
	.bad = kd_on_bad,
};

static void kd_events(struct kd *d)
{
	int ret = kc_evsock_process(&d->es);

	if (ret == -ENOBUFS) {
		kd_log(LOG_WARNING, "event socket overflowed: events lost");
		kd_verify_family(d);
	} else if (ret) {
		kd_log(LOG_ERR, "reading events: %s", strerror(-ret));
	}
	if (!d->family_event)
		return;
	d->family_event = false;
	if (!d->family_present) {
		kd_disconnect(d, "generic netlink family unregistered");
		return;
	}
	/* Registered again (possibly after a removal we saw in the same
	 * batch): start over with the new family. */
	kd_disconnect(d, "module reloaded");
	kd_connect(d);
	if (!d->connected)
		d->next_retry_ms = kd_now_ms() + KD_RETRY_MS;
}

/* ------------------------------------------------------------------ */
/* Configuration                                                       */
/* ------------------------------------------------------------------ */

static int kd_load_conf(struct kd *d, struct kc_conf *conf)
{
	char err[KC_CONF_ERR_LEN];
	int ret;

	ret = kc_conf_load(d->conf_path, conf, err, sizeof(err));
	if (ret == -ENOENT && !d->conf_explicit) {
		kd_log(LOG_INFO, "no %s: running with the module's settings",
		       d->conf_path);
		return 1;
	}
	if (ret)
		kd_log(LOG_ERR, "%s", err);
	return ret;
}

/* SIGHUP: read the file again; keep the old settings if it is bad. */
static void kd_reload(struct kd *d)
{
	struct kc_conf conf;
	int ret;

	kd_log(LOG_NOTICE, "SIGHUP: reloading %s", d->conf_path);
	ret = kd_load_conf(d, &conf);
	if (ret < 0) {
		kd_log(LOG_ERR, "keeping the previous configuration");
		return;
	}
	if (d->have_conf)
		kc_conf_free(&d->conf);
	d->have_conf = ret == 0;
	if (d->have_conf)
		d->conf = conf;
	if (d->connected)
		kd_apply(d);
}

/* ------------------------------------------------------------------ */
/* Prometheus over HTTP                                                */
/* ------------------------------------------------------------------ */

/* The metrics text (malloc()ed) from one STATS_GET. */
static char *kd_metrics(struct kd *d, size_t *len)
{
	struct kc_node_stats ns;
	bool have = false;
	char *buf = NULL;
	FILE *f;
	int ret;

	if (d->connected) {
		ret = kc_nl_stats_get(&d->nl, &ns);
		if (!ret) {
			have = true;
			d->scrape_err_logged = false;
		} else {
			if (!d->scrape_err_logged)
				kd_log(LOG_ERR, "reading statistics: %s%s%s%s",
				       strerror(-ret),
				       d->nl.errmsg[0] ? " (" : "",
				       d->nl.errmsg,
				       d->nl.errmsg[0] ? ")" : "");
			d->scrape_err_logged = true;
			kd_verify_family(d);
		}
	}
	f = open_memstream(&buf, len);
	if (f) {
		kc_prom_render(f, have ? &ns : NULL);
		if (fclose(f)) {
			free(buf);
			buf = NULL;
		}
	}
	if (have)
		kc_node_stats_free(&ns);
	return buf;
}

/*
 * The metrics socket, or -1 (logged unless @quiet); -2 for an address
 * that can never work (the configuration's error).
 */
static int kd_listen(const char *addr, int port, bool quiet)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
	};
	struct addrinfo *ai;
	char service[16];
	int fd, one = 1, ret;

	snprintf(service, sizeof(service), "%d", port);
	ret = getaddrinfo(addr, service, &hints, &ai);
	if (ret) {
		kd_log(LOG_ERR, "listen address '%s': %s", addr,
		       gai_strerror(ret));
		return -2;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 16)) {
		if (!quiet)
			kd_log(LOG_ERR, "cannot listen on %s port %d: %s; trying again every %d s",
			       addr, port, strerror(errno),
			       KD_LISTEN_RETRY_MS / 1000);
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

static void kd_client_close(struct kd_client *c)
{
	close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
}

static void kd_accept(struct kd *d)
{
	struct kc_http_slot slots[KD_MAX_CLIENTS];
	struct kd_client *c;
	int fd, i;

	fd = accept4(d->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	for (i = 0; i < KD_MAX_CLIENTS; i++)
		slots[i] = (struct kc_http_slot){
			.used = d->clients[i].fd >= 0,
			.answering = d->clients[i].out != NULL,
			.seq = d->clients[i].seq,
		};
	i = kc_http_pick_slot(slots, KD_MAX_CLIENTS);
	if (i < 0) {		/* all answering: the scraper retries */
		close(fd);
		return;
	}
	c = &d->clients[i];
	if (c->fd >= 0)		/* the longest silent one gives way */
		kd_client_close(c);
	c->fd = fd;
	c->in_len = 0;
	c->out = NULL;
	c->out_len = c->out_off = 0;
	c->start_ms = kd_now_ms();
	c->seq = ++d->accepted;
}

/* The request is complete: prepare the whole response. */
static void kd_respond(struct kd *d, struct kd_client *c, int parsed,
		       const char *method, const char *path)
{
	static const char index_body[] =
		"kcolld: Prometheus metrics at /metrics\n";
	bool head = !strcmp(method, "HEAD");
	const char *text = "text/plain; charset=utf-8";
	char *body = NULL;
	size_t blen = 0;
	int status;

	if (parsed < 0) {
		status = 400;
		head = false;
	} else {
		switch (kc_http_route(method, path)) {
		case KC_HTTP_METRICS:
			body = kd_metrics(d, &blen);
			status = body ? 200 : 500;
			break;
		case KC_HTTP_INDEX:
			status = 200;
			break;
		case KC_HTTP_BAD_METHOD:
			status = 405;
			break;
		default:
			status = 404;
			break;
		}
	}
	if (status == 200 && body)
		c->out = kc_http_response(200, KC_PROM_CONTENT_TYPE, body,
					  blen, head, &c->out_len);
	else if (status == 200)
		c->out = kc_http_response(200, text, index_body,
					  sizeof(index_body) - 1, head,
					  &c->out_len);
	else
		c->out = kc_http_response(status, text, "", 0, head,
					  &c->out_len);
	free(body);
	if (!c->out)
		kd_client_close(c);
}

static void kd_client_io(struct kd *d, struct kd_client *c, short revents)
{
	char method[16] = "", path[256] = "";
	ssize_t n;
	int parsed;

	if (!c->out && (revents & (POLLIN | POLLHUP | POLLERR))) {
		n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len,
			 0);
		if (n <= 0) {
			if (n == 0 || (errno != EAGAIN && errno != EINTR))
				kd_client_close(c);
			return;
		}
		c->in_len += n;
		parsed = kc_http_parse(c->in, c->in_len, method,
				       sizeof(method), path, sizeof(path));
		if (!parsed)
			return;
		kd_respond(d, c, parsed, method, path);
		if (c->fd < 0)
			return;
	}
	if (!c->out)
		return;
	n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
		 MSG_NOSIGNAL);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0)
		c->out_off += n;
	if (n <= 0 || c->out_off == c->out_len)
		kd_client_close(c);
}

/* ------------------------------------------------------------------ */
/* Main loop                                                           */
/* ------------------------------------------------------------------ */

static volatile sig_atomic_t kd_stop, kd_hup;

static void kd_on_signal(int sig)
{
	if (sig == SIGHUP)
		kd_hup = 1;
	else
		kd_stop = sig;
}

static int kd_setup_signals(sigset_t *orig)
{
	struct sigaction sa = { .sa_handler = kd_on_signal };
	sigset_t block;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	/* Delivered only inside ppoll(): no flag is missed between the
	 * checks and the wait. */
	if (sigprocmask(SIG_BLOCK, &block, orig))
		return -errno;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

/* Drops clients that took too long: to send their request, or in all. */
static void kd_expire_clients(struct kd *d, int64_t now)
{
	int i;

	for (i = 0; i < KD_MAX_CLIENTS; i++) {
		struct kd_client *c = &d->clients[i];

		if (c->fd >= 0 &&
		    now - c->start_ms > (c->out ? KD_CLIENT_TIMEOUT_MS :
						  KD_REQUEST_TIMEOUT_MS))
			kd_client_close(c);
	}
}

/*
 * Open the metrics socket: 0, or -1 when it can never open (a bad
 * address). A port taken (by any local user: it is unprivileged) or an
 * address not up yet is tried again every KD_LISTEN_RETRY_MS, and only
 * the metrics wait for it: the configuration is applied meanwhile.
 */
static int kd_metrics_listen(struct kd *d, bool retry)
{
	d->listen_fd = kd_listen(d->bind_addr, d->port, retry);
	if (d->listen_fd == -2) {
		d->listen_fd = -1;
		return -1;
	}
	if (d->listen_fd < 0) {
		d->next_listen_ms = kd_now_ms() + KD_LISTEN_RETRY_MS;
		return 0;
	}
	if (retry)
		kd_log(LOG_NOTICE, "metrics on %s port %d", d->bind_addr,
		       d->port);
	return 0;
}

static int kd_loop(struct kd *d, const sigset_t *orig)
{
	struct pollfd pfd[2 + KD_MAX_CLIENTS];
	struct kd_client *who[2 + KD_MAX_CLIENTS];
	struct timespec ts = { .tv_sec = 1 };
	int64_t now;
	int i, n, first;

	while (!kd_stop) {
		if (kd_hup) {
			kd_hup = 0;
			kd_reload(d);
		}
		now = kd_now_ms();
		if (!d->connected && now >= d->next_retry_ms) {
			kd_connect(d);
			d->next_retry_ms = now + KD_RETRY_MS;
		}
		if (d->port > 0 && d->listen_fd < 0 &&
		    now >= d->next_listen_ms)
			kd_metrics_listen(d, true);
		for (i = 0; i <= KCOLL_CMD_MAX; i++)
			kd_event_dropped(i, kc_evrate_expire(&d->evrate, i,
							     now));
		kd_expire_clients(d, now);
		n = 0;
		pfd[n++] = (struct pollfd){ kc_evsock_fd(&d->es), POLLIN, 0 };
		if (d->listen_fd >= 0)
			pfd[n++] = (struct pollfd){ d->listen_fd, POLLIN, 0 };
		first = n;
		for (i = 0; i < KD_MAX_CLIENTS; i++) {
			struct kd_client *c = &d->clients[i];

			if (c->fd < 0)
				continue;
			who[n] = c;
			pfd[n++] = (struct pollfd){ c->fd,
				c->out ? POLLOUT : POLLIN, 0 };
		}
		if (ppoll(pfd, n, &ts, orig) < 0) {
			if (errno == EINTR)
				continue;
			kd_log(LOG_ERR, "ppoll: %s", strerror(errno));
			return 1;
		}
		if (pfd[0].revents)
			kd_events(d);
		/*
		 * Clients before the accept: a scraper's request that came
		 * with its connection is read (and its slot then kept) before
		 * a flood of silent connections can make it give way.
		 */
		for (i = first; i < n; i++)
			if (pfd[i].revents && who[i]->fd == pfd[i].fd)
				kd_client_io(d, who[i], pfd[i].revents);
		if (first == 2 && pfd[1].revents)
			kd_accept(d);
	}
	kd_log(LOG_NOTICE, "%s: stopping", strsignal(kd_stop));
	return 0;
}

/* --once: connect, apply, print the metrics, exit. */
static int kd_once(struct kd *d)
{
	size_t len;
	char *text;
	int ret;

	ret = kd_connect(d);
	text = kd_metrics(d, &len);
	if (text)
		fwrite(text, 1, len, stdout);
	free(text);
	return ret || !text || fflush(stdout) ? 1 : 0;
}

static void kd_usage(FILE *f)
{
	fputs("Usage: kcolld [OPTIONS]\n"
	      "  -c, --config FILE   configuration (default "
	      KD_DEFAULT_CONF ")\n"
	      "  -f, --foreground    stay in the foreground, log to stderr\n"
	      "  -p, --port PORT     Prometheus port (default 9464; 0: no "
	      "HTTP server)\n"
	      "  -b, --bind ADDR     Prometheus address (default "
	      KD_DEFAULT_ADDR ")\n"
	      "  -1, --once          apply the configuration, print the "
	      "metrics once, exit\n"
	      "  -t, --check-config  only parse the configuration\n"
	      "  -V, --version       print the version\n"
	      "  -h, --help          this help\n", f);
}

static int kd_parse_args(struct kd *d, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "port", required_argument, NULL, 'p' },
		{ "bind", required_argument, NULL, 'b' },
		{ "once", no_argument, NULL, '1' },
		{ "check-config", no_argument, NULL, 't' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	long v;
	int opt;

	while ((opt = getopt_long(argc, argv, "c:fp:b:1tVh", opts, NULL)) !=
	       -1) {
		switch (opt) {
		case 'c':
			d->conf_path = optarg;
			d->conf_explicit = true;
			break;
		case 'f':
			d->foreground = true;
			break;
		case 'p':
			v = strtol(optarg, &end, 10);
			if (!*optarg || *end || v < 0 || v > 65535) {
				fprintf(stderr, "kcolld: bad port '%s'\n",
					optarg);
				return KD_EXIT_USAGE;
			}
			d->port = v;
			break;
		case 'b':
			d->bind_addr = optarg;
			break;
		case '1':
			d->once = true;
			break;
		case 't':
			d->check_only = true;
			break;
		case 'V':
			printf("kcolld (kcoll) %s\n", KC_VERSION);
			exit(0);
		case 'h':
			kd_usage(stdout);
			exit(0);
		default:
			kd_usage(stderr);
			return KD_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "kcolld: unexpected argument '%s'\n",
			argv[optind]);
		return KD_EXIT_USAGE;
	}
	return 0;
}

/* Configuration first: its errors end the program before anything. */
static int kd_init_conf(struct kd *d)
{
	static char abs[PATH_MAX];
	int ret;

	/* daemon() changes to /: SIGHUP must find the same file. */
	if (realpath(d->conf_path, abs))
		d->conf_path = abs;
	ret = kd_load_conf(d, &d->conf);
	if (ret < 0)
		return 1;
	d->have_conf = ret == 0;
	if (d->port < 0)
		d->port = d->have_conf && d->conf.metrics_port ?
			(int)d->conf.metrics_port : KD_DEFAULT_PORT;
	if (!d->bind_addr)
		d->bind_addr = d->have_conf && d->conf.metrics_address[0] ?
			d->conf.metrics_address : KD_DEFAULT_ADDR;
	return 0;
}

static int kd_run(struct kd *d)
{
	sigset_t orig;
	int ret, i;

	ret = kc_nl_open(&d->nl);
	if (!ret)
		ret = kc_evsock_open(&d->es, &d->nl, !d->once, &kd_ev_ops, d);
	if (ret) {
		kd_log(LOG_ERR, "netlink: %s", strerror(-ret));
		return 1;
	}
	if (d->once)
		return kd_once(d);
	for (i = 0; i < KD_MAX_CLIENTS; i++)
		d->clients[i].fd = -1;
	d->listen_fd = -1;
	if (d->port > 0 && kd_metrics_listen(d, false))
		return 1;
	if (!d->foreground) {
		if (daemon(0, 0)) {
			kd_log(LOG_ERR, "daemon: %s", strerror(errno));
			return 1;
		}
		openlog("kcolld", LOG_PID, LOG_DAEMON);
		kd_use_syslog = true;
	}
	if (kd_setup_signals(&orig)) {
		kd_log(LOG_ERR, "signals: %s", strerror(errno));
		return 1;
	}
	if (d->port <= 0)
		kd_log(LOG_NOTICE, "kcolld %s starting; metrics disabled",
		       KC_VERSION);
	else if (d->listen_fd < 0)
		kd_log(LOG_NOTICE, "kcolld %s starting; metrics on %s port %d once it is free",
		       KC_VERSION, d->bind_addr, d->port);
	else
		kd_log(LOG_NOTICE, "kcolld %s starting; metrics on %s port %d",
		       KC_VERSION, d->bind_addr, d->port);
	kd_connect(d);
	d->next_retry_ms = kd_now_ms() + KD_RETRY_MS;
	ret = kd_loop(d, &orig);
	for (i = 0; i < KD_MAX_CLIENTS; i++)
		if (d->clients[i].fd >= 0)
			kd_client_close(&d->clients[i]);
	if (d->listen_fd >= 0)
		close(d->listen_fd);
	return ret;
}

int main(int argc, char **argv)
{
	struct kd d = {
		.conf_path = KD_DEFAULT_CONF,
		.port = -1,
		.listen_fd = -1,
	};
	int ret;

	kd_use_prefix = !isatty(STDERR_FILENO);
	ret = kd_parse_args(&d, argc, argv);
	if (ret)
		return ret;
	if (kd_init_conf(&d))
		return 1;
	if (d.check_only) {
		printf("%s: %s (%zu tunables)\n", d.conf_path,
		       d.have_conf ? "OK" : "absent, nothing to apply",
		       d.have_conf ? d.conf.n_tunables : 0);
		ret = 0;
	} else {
		ret = kd_run(&d);
	}
	if (d.es.sk)
		kc_evsock_close(&d.es);
	if (d.nl.sk)
		kc_nl_close(&d.nl);
	if (d.have_conf)
		kc_conf_free(&d.conf);
	return ret;
}
