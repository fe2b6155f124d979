// SPDX-License-Identifier: MIT
/* Releasing what kc_nlparse.c allocated inside the kc_model.h structs. */
#include <stdlib.h>
#include <string.h>

#include "kc_model.h"

void kc_ranks_free(struct kc_ranks *r)
{
	free(r->v);
	r->v = NULL;
	r->n = 0;
}

void kc_comm_free(struct kc_comm *c)
{
	size_t i;

	for (i = 0; i < c->n_ops; i++)
		kc_ranks_free(&c->ops[i].missing);
	free(c->ops);
	free(c->members);
	kc_ranks_free(&c->last_error.missing);
	memset(c, 0, sizeof(*c));
}

void kc_comms_free(struct kc_comm *c, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		kc_comm_free(&c[i]);
	free(c);
}

void kc_node_stats_free(struct kc_node_stats *ns)
{
	free(ns->devs);
	memset(ns, 0, sizeof(*ns));
}

void kc_event_free(struct kc_event *ev)
{
	kc_ranks_free(&ev->missing);
}
