// SPDX-License-Identifier: MIT
/*
 * libcoll: communicators made from others (split, shrink, grow) and
 * revoke. A child is an ordinary kernel communicator over the members'
 * addresses, which the parent's rank table already holds: no bootstrap
 * but grow's, whose new ranks know nothing yet. Its id and secret are
 * derived from the parent's secret with SipHash-2-4, over what every
 * member knows alike: the parent's id, how many children the parent has
 * made, and the split's color or the shrink's excluded set.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_internal.h"

/* ------------------------------------------------------------------ */
/* SipHash-2-4 (Aumasson and Bernstein, 2012)                          */
/* ------------------------------------------------------------------ */

static uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

#define SIP_ROUND(v0, v1, v2, v3) do {					\
	v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);	\
	v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;				\
	v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;				\
	v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);	\
} while (0)

uint64_t coll_siphash(const uint8_t key[16], const void *msg, size_t len)
{
	const uint8_t *p = msg;
	uint64_t k0 = le64(key), k1 = le64(key + 8), m, b;
	uint64_t v0 = k0 ^ 0x736f6d6570736575ULL;
	uint64_t v1 = k1 ^ 0x646f72616e646f6dULL;
	uint64_t v2 = k0 ^ 0x6c7967656e657261ULL;
	uint64_t v3 = k1 ^ 0x7465646279746573ULL;
	size_t left = len, i;

	for (; left >= 8; left -= 8, p += 8) {
		m = le64(p);
		v3 ^= m;
		SIP_ROUND(v0, v1, v2, v3);
		SIP_ROUND(v0, v1, v2, v3);
		v0 ^= m;
	}
	b = (uint64_t)len << 56;
	for (i = 0; i < left; i++)
		b |= (uint64_t)p[i] << (8 * i);
	v3 ^= b;
	SIP_ROUND(v0, v1, v2, v3);
	SIP_ROUND(v0, v1, v2, v3);
	v0 ^= b;
	v2 ^= 0xff;
	for (i = 0; i < 4; i++)
		SIP_ROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

/* ------------------------------------------------------------------ */
/* Derivation                                                          */
/* ------------------------------------------------------------------ */

/* What a child's id and secret are derived from (little-endian words). */
struct derive_in {
	uint8_t what;		/* 'i' id, 'k' and 'K' the key's halves */
	uint8_t kind;		/* 's' split, 'h' shrink, 'g' group */
	uint8_t pad[6];
	uint8_t parent[8];
	uint8_t nth[8];		/* the parent's nth child */
	uint8_t which[8];	/* color, or the hash of the excluded set
				 * (of the tag and the members: group) */
};

static void put64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put32(uint8_t *p, uint32_t v)
{
	int i;

	for (i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void derive(coll_comm *parent, uint8_t kind, uint32_t nth,
		   uint64_t which, uint64_t *uid, uint8_t key[KCOLL_KEY_LEN])
{
	const uint8_t *pk = coll_comm_key(parent);
	struct derive_in in;

	memset(&in, 0, sizeof(in));
	in.kind = kind;
	put64(in.parent, coll_comm_uid(parent));
	put64(in.nth, nth);
	put64(in.which, which);
	in.what = 'i';
	*uid = coll_siphash(pk, &in, sizeof(in));
	if (!*uid || *uid == coll_comm_uid(parent))
		*uid = ~*uid;	/* 0 is no id, nor the parent's */
	in.what = 'k';
	put64(key, coll_siphash(pk, &in, sizeof(in)));
	in.what = 'K';
	put64(key + 8, coll_siphash(pk, &in, sizeof(in)));
}

/*
 * The members' rank table: @parent's entries of ranks @ranks[0..n), with
 * each one's index among the members on its node recomputed.
 */
static struct kcoll_rank_addr *child_table(coll_comm *parent,
					   const int *ranks, int n)
{
	const struct kcoll_rank_addr *pt = coll_comm_table(parent);
	struct kcoll_rank_addr *t = calloc((size_t)n, sizeof(*t));
	int i;

	if (!t)
		return NULL;
	for (i = 0; i < n; i++)
		t[i] = pt[ranks[i]];
	coll_table_local_index(t, (uint32_t)n);
	return t;
}

static int child_create(coll_comm *parent, const int *ranks, int n,
			int me, uint8_t kind, uint32_t nth, uint64_t which,
			coll_comm **newcomm)
{
	uint8_t key[KCOLL_KEY_LEN];
	struct kcoll_rank_addr *t;
	uint64_t uid;
	int ret;

	t = child_table(parent, ranks, n);
	if (!t)
		return coll_err(-ENOMEM, "out of memory");
	derive(parent, kind, nth, which, &uid, key);
	ret = coll_comm_create_child(newcomm, n, me, t, uid, key,
				     coll_comm_uid(parent));
	explicit_bzero(key, sizeof(key));
	free(t);
	return ret;
}

/* ------------------------------------------------------------------ */
/* The calls                                                           */
/* ------------------------------------------------------------------ */

int coll_comm_revoke(coll_comm *comm)
{
	return coll_comm_revoke_kernel(comm);
}

struct split_entry {
	int32_t color, key;
};

int coll_comm_split(coll_comm *comm, int color, int key,
		    coll_comm **newcomm)
{
	struct split_entry mine = { color, key }, *all;
	int n, r, i, nm = 0, me = -1, ret;
	uint32_t nth;
	int *ranks;

	if (!newcomm)
		return coll_err(-EINVAL, "coll_comm_split: NULL argument");
	*newcomm = NULL;
	if (!comm)
		return coll_err(-EINVAL, "coll_comm_split: NULL argument");
	if (color < COLL_SPLIT_NOCOLOR)
		return coll_err(-EINVAL, "coll_comm_split: color %d (>= 0, "
				"or COLL_SPLIT_NOCOLOR)", color);
	/* Every rank counts this child, whether it joins one or not, and
	 * before anything that may fail on one rank only. */
	nth = coll_comm_derive_next(comm);
	n = coll_comm_size(comm);
	all = calloc((size_t)n, sizeof(*all));
	ranks = calloc((size_t)n, sizeof(*ranks));
	if (!all || !ranks) {
		ret = coll_err(-ENOMEM, "out of memory");
		goto out;
	}
	ret = coll_allgather(&mine, all, 2, COLL_DTYPE_INT32, comm);
	if (ret)
		goto out;
	if (color == COLL_SPLIT_NOCOLOR)
		goto out;
	/* Members by (key, rank in @comm): insertion, stable. */
	for (r = 0; r < n; r++) {
		if (all[r].color != color)
			continue;
		for (i = nm; i > 0 && all[ranks[i - 1]].key > all[r].key; i--)
			ranks[i] = ranks[i - 1];
		ranks[i] = r;
		nm++;
	}
	/* This rank is among them: its own entry has the color. */
	for (i = 0; i < nm; i++)
		if (ranks[i] == coll_comm_rank(comm))
			me = i;
	ret = child_create(comm, ranks, nm, me, 's', nth, (uint32_t)color,
			   newcomm);
out:
	free(ranks);
	free(all);
	return ret;
}

static int int_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

int coll_comm_shrink(coll_comm *comm, const int *exclude, int nexclude,
		     unsigned int flags, coll_comm **newcomm)
{
	int n, me, i, nm = 0, ret = 0, *ex = NULL, *ranks = NULL;
	uint8_t zero[16] = { 0 };
	uint64_t which;
	uint32_t nth;

	if (!newcomm)
		return coll_err(-EINVAL, "coll_comm_shrink: NULL argument");
	*newcomm = NULL;
	if (!comm || nexclude < 0 || (nexclude && !exclude))
		return coll_err(-EINVAL, "coll_comm_shrink: NULL argument or "
				"a negative count");
	if (flags & ~COLL_SHRINK_ABORT)
		return coll_err(-EINVAL, "coll_comm_shrink: unknown flags %#x",
				flags & ~COLL_SHRINK_ABORT);
	n = coll_comm_size(comm);
	me = coll_comm_rank(comm);
	if (nexclude >= n)
		return coll_err(-EINVAL, "coll_comm_shrink: %d of %d ranks "
				"excluded leaves none", nexclude, n);
	ex = malloc(((size_t)nexclude + 1) * sizeof(*ex));
	ranks = malloc((size_t)n * sizeof(*ranks));
	if (!ex || !ranks) {
		ret = coll_err(-ENOMEM, "out of memory");
		goto out;
	}
	if (nexclude)
		memcpy(ex, exclude, (size_t)nexclude * sizeof(*ex));
	qsort(ex, (size_t)nexclude, sizeof(*ex), int_cmp);
	for (i = 0; i < nexclude; i++) {
		if (ex[i] < 0 || ex[i] >= n || ex[i] == me ||
		    (i && ex[i] == ex[i - 1])) {
			ret = coll_err(-EINVAL, "coll_comm_shrink: rank %d %s",
				       ex[i], ex[i] == me ? "excludes itself" :
				       ex[i] < 0 || ex[i] >= n ?
				       "out of range" : "listed twice");
			goto out;
		}
	}
	/* Counted once the arguments passed (alike on every survivor), before
	 * anything that may fail on one of them only. */
	nth = coll_comm_derive_next(comm);
	if (flags & COLL_SHRINK_ABORT) {
		ret = coll_comm_revoke(comm);
		if (ret)
			goto out;
	} else {
		unsigned int busy = coll_comm_busy(comm);

		if (busy) {
			ret = coll_err(-EBUSY, "coll_comm_shrink: %u "
				       "operation(s) in flight on the parent "
				       "(COLL_SHRINK_ABORT cancels them)", busy);
			goto out;
		}
	}
	for (i = 0; i < n; i++)
		if (!bsearch(&i, ex, (size_t)nexclude, sizeof(*ex), int_cmp))
			ranks[nm++] = i;
	/* The set, not the order it was given in: a hash of the sorted
	 * list (keyed with zeros: it only names the set). */
	{
		uint8_t *b = malloc((size_t)nexclude * 4 + 1);

		if (!b) {
			ret = coll_err(-ENOMEM, "out of memory");
			goto out;
		}
		for (i = 0; i < nexclude; i++)
			put32(b + 4 * i, (uint32_t)ex[i]);
		which = coll_siphash(zero, b, (size_t)nexclude * 4);
		free(b);
	}
	for (i = 0; i < nm && ranks[i] != me; i++)
		;
	ret = child_create(comm, ranks, nm, i, 'h', nth, which, newcomm);
out:
	free(ranks);
	free(ex);
	return ret;
}

int coll_comm_create_group(coll_comm *comm, const int *ranks, int n,
			   uint64_t tag, coll_comm **newcomm)
{
	int size, me = -1, i, ret;
	uint8_t zero[16] = { 0 }, *b;
	uint64_t which;
	char *seen;

	if (!newcomm)
		return coll_err(-EINVAL, "coll_comm_create_group: NULL "
				"argument");
	*newcomm = NULL;
	if (!comm || !ranks)
		return coll_err(-EINVAL, "coll_comm_create_group: NULL "
				"argument");
	size = coll_comm_size(comm);
	if (n < 1 || n > size)
		return coll_err(-EINVAL, "coll_comm_create_group: %d ranks "
				"(1 .. %d)", n, size);
	seen = calloc((size_t)size, 1);
	/* The tag and the members in their order name the child. */
	b = malloc(8 + (size_t)n * 4);
	if (!seen || !b) {
		ret = coll_err(-ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (ranks[i] < 0 || ranks[i] >= size || seen[ranks[i]]) {
			ret = coll_err(-EINVAL, "coll_comm_create_group: rank "
				       "%d %s", ranks[i],
				       ranks[i] < 0 || ranks[i] >= size ?
				       "out of range" : "listed twice");
			goto out;
		}
		seen[ranks[i]] = 1;
		if (ranks[i] == coll_comm_rank(comm))
			me = i;
		put32(b + 8 + 4 * i, (uint32_t)ranks[i]);
	}
	if (me < 0) {
		ret = coll_err(-EINVAL, "coll_comm_create_group: this rank "
			       "(%d) is not among the %d listed",
			       coll_comm_rank(comm), n);
		goto out;
	}
	put64(b, tag);
	which = coll_siphash(zero, b, 8 + (size_t)n * 4);
	ret = child_create(comm, ranks, n, me, 'g', 0, which, newcomm);
	if (ret == -EEXIST)
		coll_err(ret, "coll_comm_create_group: this rank already "
			 "has the communicator of tag %#llx and these "
			 "members (destroy it, or use another tag)",
			 (unsigned long long)tag);
out:
	free(b);
	free(seen);
	return ret;
}

int coll_comm_grow(coll_comm *comm, int nranks, const coll_unique_id *id,
		   coll_comm **newcomm)
{
	if (!newcomm)
		return coll_err(-EINVAL, "coll_comm_grow: NULL argument");
	*newcomm = NULL;
	if (!comm || !id)
		return coll_err(-EINVAL, "coll_comm_grow: NULL argument");
	if (nranks <= coll_comm_size(comm) || nranks > KCOLL_MAX_RANKS)
		return coll_err(-EINVAL, "coll_comm_grow: %d ranks (more than "
				"%d, at most %d)", nranks, coll_comm_size(comm),
				KCOLL_MAX_RANKS);
	return coll_comm_init_rank_child(newcomm, nranks, id,
					 coll_comm_rank(comm),
					 coll_comm_uid(comm));
}
