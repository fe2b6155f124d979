/* SPDX-License-Identifier: MIT */
/*
 * Prometheus text exposition format 0.0.4 of kcoll's statistics
 * (kcolld's /metrics).
 */
#ifndef KC_PROM_H
#define KC_PROM_H

#include <stdio.h>

#include "kc_model.h"

#define KC_PROM_CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

/*
 * Writes every metric family to @f. @ns is NULL when the module could not
 * be reached: then only kcoll_up 0. Returns 0, or -EIO if a write failed.
 */
int kc_prom_render(FILE *f, const struct kc_node_stats *ns);
/* Escapes \, " and newline of a label value into @buf. */
char *kc_prom_escape(const char *s, char *buf, size_t len);

#endif /* KC_PROM_H */
