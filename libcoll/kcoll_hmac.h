/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 (FIPS 180-4) and HMAC (RFC 2104) in user space: libcoll's
 * bootstrap proves the job's secret with it instead of sending it, and the
 * selftests that speak kcoll's wire protocol themselves sign hellos and
 * AUTH messages and check the module's accepts with it (kmod/kcoll_auth.c
 * does the same with the kernel crypto API). Small and slow; checked
 * against the FIPS 180-4 and RFC 4231 vectors by kcoll_hmac_selftest().
 */
#ifndef KCOLL_HMAC_H
#define KCOLL_HMAC_H

#include <stdint.h>
#include <string.h>

struct kh_sha256 {
	uint32_t h[8];
	uint64_t len;		/* bytes hashed */
	uint8_t buf[64];
	unsigned int n;		/* bytes in buf */
};

static const uint32_t kh_sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t kh_ror(uint32_t x, int n)
{
	return (x >> n) | (x << (32 - n));
}

static inline void kh_sha256_block(struct kh_sha256 *s, const uint8_t *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, h, t1, t2;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (i = 16; i < 64; i++)
		w[i] = w[i - 16] + w[i - 7] +
		       (kh_ror(w[i - 15], 7) ^ kh_ror(w[i - 15], 18) ^
			(w[i - 15] >> 3)) +
		       (kh_ror(w[i - 2], 17) ^ kh_ror(w[i - 2], 19) ^
			(w[i - 2] >> 10));
	a = s->h[0]; b = s->h[1]; c = s->h[2]; d = s->h[3];
	e = s->h[4]; f = s->h[5]; g = s->h[6]; h = s->h[7];
	for (i = 0; i < 64; i++) {
		t1 = h + (kh_ror(e, 6) ^ kh_ror(e, 11) ^ kh_ror(e, 25)) +
		     ((e & f) ^ (~e & g)) + kh_sha256_k[i] + w[i];
		t2 = (kh_ror(a, 2) ^ kh_ror(a, 13) ^ kh_ror(a, 22)) +
		     ((a & b) ^ (a & c) ^ (b & c));
		h = g; g = f; f = e; e = d + t1;
		d = c; c = b; b = a; a = t1 + t2;
	}
	s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d;
	s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}

static inline void kh_sha256_init(struct kh_sha256 *s)
{
	static const uint32_t iv[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memcpy(s->h, iv, sizeof(iv));
	s->len = 0;
	s->n = 0;
}

static inline void kh_sha256_update(struct kh_sha256 *s, const void *data,
				    size_t len)
{
	const uint8_t *p = data;

	s->len += len;
	while (len) {
		unsigned int k = 64 - s->n;

		if (k > len)
			k = (unsigned int)len;
		memcpy(s->buf + s->n, p, k);
		s->n += k;
		p += k;
		len -= k;
		if (s->n == 64) {
			kh_sha256_block(s, s->buf);
			s->n = 0;
		}
	}
}

static inline void kh_sha256_final(struct kh_sha256 *s, uint8_t out[32])
{
	uint64_t bits = s->len * 8;
	uint8_t pad = 0x80, zero = 0, lenb[8];
	int i;

	kh_sha256_update(s, &pad, 1);
	while (s->n != 56)
		kh_sha256_update(s, &zero, 1);
	for (i = 0; i < 8; i++)
		lenb[i] = (uint8_t)(bits >> (56 - 8 * i));
	kh_sha256_update(s, lenb, 8);
	for (i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(s->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)s->h[i];
	}
}

/* HMAC-SHA256 of the @n (pointer, length) parts under @key (<= 64 B). */
static inline void kh_hmac_sha256(const uint8_t *key, size_t klen,
				  const void *const *parts, const size_t *lens,
				  unsigned int n, uint8_t out[32])
{
	uint8_t k[64] = { 0 }, pad[64], inner[32];
	struct kh_sha256 s;
	unsigned int i;

	memcpy(k, key, klen);
	for (i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x36;
	kh_sha256_init(&s);
	kh_sha256_update(&s, pad, 64);
	for (i = 0; i < n; i++)
		kh_sha256_update(&s, parts[i], lens[i]);
	kh_sha256_final(&s, inner);
	for (i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x5c;
	kh_sha256_init(&s);
	kh_sha256_update(&s, pad, 64);
	kh_sha256_update(&s, inner, 32);
	kh_sha256_final(&s, out);
}

/* 0 if SHA-256("abc") and RFC 4231 test case 2 come out right. */
static inline int kcoll_hmac_selftest(void)
{
	static const uint8_t abc[32] = {
		0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41,
		0x40, 0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3,
		0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00,
		0x15, 0xad,
	};
	static const uint8_t rfc4231_2[32] = {
		0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04,
		0x24, 0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08,
		0x9d, 0x27, 0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec,
		0x38, 0x43,
	};
	const char *msg = "what do ya want for nothing?";
	const void *parts[] = { msg };
	size_t lens[] = { strlen(msg) };
	struct kh_sha256 s;
	uint8_t out[32];

	kh_sha256_init(&s);
	kh_sha256_update(&s, "abc", 3);
	kh_sha256_final(&s, out);
	if (memcmp(out, abc, 32))
		return -1;
	kh_hmac_sha256((const uint8_t *)"Jefe", 4, parts, lens, 1, out);
	return memcmp(out, rfc4231_2, 32) ? -2 : 0;
}

#endif /* KCOLL_HMAC_H */
