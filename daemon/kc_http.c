// SPDX-License-Identifier: MIT
/* Minimal HTTP/1.x request parsing and responses for kcolld. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_http.h"

/* Copies the [s, s + n) token into @dst: false if it does not fit. */
static bool kc_http_tok(const char *s, size_t n, char *dst, size_t len)
{
	if (!n || n >= len)
		return false;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return true;
}

int kc_http_parse(const char *buf, size_t len, char *method, size_t mlen,
		  char *path, size_t plen)
{
	const char *end, *sp1, *sp2, *eol, *q;

	end = memmem(buf, len, "\r\n\r\n", 4);
	if (!end)
		end = memmem(buf, len, "\n\n", 2);
	if (!end)
		return len >= KC_HTTP_MAX ? -1 : 0;
	if (end - buf >= KC_HTTP_MAX)
		return -1;
	/* The terminator is at least 2 bytes: the request line's '\n' is
	 * within end + 1. */
	eol = memchr(buf, '\n', end - buf + 2);
	if (eol > buf && eol[-1] == '\r')
		eol--;
	sp1 = memchr(buf, ' ', eol - buf);
	if (!sp1)
		return -1;
	sp2 = memchr(sp1 + 1, ' ', eol - sp1 - 1);
	if (!sp2 || eol - sp2 < 6 || memcmp(sp2 + 1, "HTTP/", 5))
		return -1;
	q = memchr(sp1 + 1, '?', sp2 - sp1 - 1);
	if (!q)
		q = sp2;
	if (!kc_http_tok(buf, sp1 - buf, method, mlen) ||
	    !kc_http_tok(sp1 + 1, q - sp1 - 1, path, plen) || path[0] != '/')
		return -1;
	return 1;
}

enum kc_http_route kc_http_route(const char *method, const char *path)
{
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return KC_HTTP_BAD_METHOD;
	if (!strcmp(path, "/metrics"))
		return KC_HTTP_METRICS;
	if (!strcmp(path, "/"))
		return KC_HTTP_INDEX;
	return KC_HTTP_NOT_FOUND;
}

static const char *kc_http_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 503: return "Service Unavailable";
	default: return "Internal Server Error";
	}
}

char *kc_http_response(int status, const char *ctype, const char *body,
		       size_t blen, bool head_only, size_t *outlen)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	fprintf(f, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
		"Content-Length: %zu\r\nConnection: close\r\n", status,
		kc_http_reason(status), ctype, blen);
	if (status == 405)
		fputs("Allow: GET, HEAD\r\n", f);
	fputs("\r\n", f);
	if (!head_only && blen)
		fwrite(body, 1, blen, f);
	if (fclose(f)) {
		free(out);
		return NULL;
	}
	*outlen = len;
	return out;
}

int kc_http_pick_slot(const struct kc_http_slot *s, size_t n)
{
	int oldest = -1;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!s[i].used)
			return (int)i;
		if (!s[i].answering &&
		    (oldest < 0 || s[i].seq < s[oldest].seq))
			oldest = (int)i;
	}
	return oldest;
}
