/* SPDX-License-Identifier: MIT */
/*
 * The little HTTP/1.x kcolld speaks: one GET (or HEAD) per connection,
 * answered and closed.
 */
#ifndef KC_HTTP_H
#define KC_HTTP_H

#include <stdbool.h>
#include <stddef.h>

/* Longest request head accepted. */
#define KC_HTTP_MAX	4096

enum kc_http_route {
	KC_HTTP_METRICS,	/* GET/HEAD /metrics */
	KC_HTTP_INDEX,		/* GET/HEAD / */
	KC_HTTP_NOT_FOUND,	/* 404 */
	KC_HTTP_BAD_METHOD,	/* 405 */
};

/*
 * A request head in @buf (@len bytes, any content): 1 once it is complete
 * (blank line seen), with the method and path (without "?query") copied;
 * 0 if more bytes are needed; -1 if malformed or longer than KC_HTTP_MAX.
 */
int kc_http_parse(const char *buf, size_t len, char *method, size_t mlen,
		  char *path, size_t plen);
enum kc_http_route kc_http_route(const char *method, const char *path);
/*
 * A whole response (status line, Content-Type, Content-Length,
 * Connection: close, then the body unless @head_only) in a malloc()ed
 * buffer; *@outlen its length. NULL if out of memory.
 */
char *kc_http_response(int status, const char *ctype, const char *body,
		       size_t blen, bool head_only, size_t *outlen);

/* A client connection as the slot choice sees it. */
struct kc_http_slot {
	bool used;
	bool answering;		/* its request is read, its answer going */
	unsigned long long seq;	/* order of acceptance (larger: newer;
				 * milliseconds tie under a flood) */
};

/*
 * The slot of @n for a new connection: a free one; else the one that has
 * been reading its request longest, which the new one replaces (a client
 * that connects and sends nothing must not keep a scraper out for as long
 * as it holds its slots); else -1: every one is being answered.
 */
int kc_http_pick_slot(const struct kc_http_slot *s, size_t n);

#endif /* KC_HTTP_H */
