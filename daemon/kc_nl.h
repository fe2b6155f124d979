/* SPDX-License-Identifier: MIT */
/*
 * The kcoll generic netlink family over libnl-genl-3: requests (one
 * socket, struct kc_nl) and the "events" multicast group (another socket,
 * struct kc_evsock, which can also watch nlctrl for the family coming and
 * going, i.e. the module being loaded and unloaded).
 *
 * Functions return 0 (or a count/id) or a negative errno: the kernel's
 * answer when it refused a request (kc_nl.errmsg then holds its extended
 * ack message, if it sent one), -ENOENT from kc_nl_resolve() when no
 * family "kcoll" is registered, -EBADMSG for a reply that does not parse,
 * -EIO for other netlink failures.
 */
#ifndef KC_NL_H
#define KC_NL_H

#include <stdbool.h>

#include "kc_model.h"

struct nl_sock;

#define KC_NL_ERRMSG_LEN	256

struct kc_nl {
	struct nl_sock *sk;
	int family;			/* generic netlink id; 0: unresolved */
	char errmsg[KC_NL_ERRMSG_LEN];	/* extack of the last failed request */
};

/* A connected request socket (family not yet resolved). */
int kc_nl_open(struct kc_nl *nl);
void kc_nl_close(struct kc_nl *nl);
/* Look up family "kcoll": 0, -ENOENT if the module is not loaded. */
int kc_nl_resolve(struct kc_nl *nl);
/* Id of multicast group @group of family @family, or -errno. */
int kc_nl_group(struct kc_nl *nl, const char *family, const char *group);

/* KCOLL_CMD_DEV_GET dump; free(*devs) after. */
int kc_nl_dev_dump(struct kc_nl *nl, struct kc_dev **devs, size_t *n);
/* KCOLL_CMD_COMM_GET: dump if @all, else do for @id;
 * kc_comms_free(*comms, *n) after. */
int kc_nl_comm_get(struct kc_nl *nl, bool all, uint32_t id,
		   struct kc_comm **comms, size_t *n);
/* KCOLL_CMD_STATS_GET; kc_node_stats_free() after. */
int kc_nl_stats_get(struct kc_nl *nl, struct kc_node_stats *ns);
/* KCOLL_CMD_TUNABLE_GET: dump if @name is NULL; free(*arr) after. */
int kc_nl_tunable_get(struct kc_nl *nl, const char *name,
		      struct kc_tunable **arr, size_t *n);
/* KCOLL_CMD_TUNABLE_SET (CAP_NET_ADMIN). */
int kc_nl_tunable_set(struct kc_nl *nl, const char *name,
		      const char *value);

struct kc_ev_ops {
	/* A kcoll event; @ev is freed after the call. */
	void (*event)(const struct kc_event *ev, void *arg);
	/* nlctrl: family "kcoll" was registered (true) or removed. */
	void (*family)(bool present, void *arg);
	/* A message that did not parse (which, why). */
	void (*bad)(const char *what, int err, void *arg);
};

struct kc_evsock {
	struct nl_sock *sk;
	int family;		/* kcoll family id while joined, else 0 */
	int group;		/* kcoll "events" group while joined, else 0 */
	int ctrl_group;		/* nlctrl "notify" if watched, else 0 */
	const struct kc_ev_ops *ops;
	void *arg;
};

/* A non-blocking event socket; @watch_family joins nlctrl's "notify"
 * group (looked up through @nl, which need not have resolved kcoll). */
int kc_evsock_open(struct kc_evsock *es, struct kc_nl *nl, bool watch_family,
		   const struct kc_ev_ops *ops, void *arg);
void kc_evsock_close(struct kc_evsock *es);
/* Join kcoll's "events" group (@nl must have resolved the family). */
int kc_evsock_join(struct kc_evsock *es, struct kc_nl *nl);
/* Forget the group (after the family went away). */
void kc_evsock_leave(struct kc_evsock *es);
int kc_evsock_fd(const struct kc_evsock *es);
/*
 * Read and dispatch everything queued. 0, -ENOBUFS if the socket
 * overflowed (events were lost), or another -errno.
 */
int kc_evsock_process(struct kc_evsock *es);

#endif /* KC_NL_H */
