// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll connection authentication (since wire version 2; docs/DESIGN.md,
 * "Authentication"). The communicator key never crosses the wire. Each
 * side proves it knows the key with HMAC-SHA256 (kernel crypto API, one
 * keyed transform per communicator), truncated to KCOLL_AUTH_MAC bytes,
 * over fresh nonces of both sides:
 *   hello  (REQ)  mac over the hello: version, flags, uid, ranks, nonce A
 *                 (its stamp, then random: kcoll_hello_stamp());
 *   accept (REP)  nonce B, mac over the whole hello and the accept;
 *   AUTH   (the connecting side's first message on the QP) mac over
 *                 nonce A, nonce B and the message.
 * A listener that does not know the key cannot produce the accept's MAC
 * (the connecting side gives up and says so); a replayed hello cannot
 * produce the AUTH. Every MAC binds a label, so one cannot stand for
 * another.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <crypto/algapi.h>
#include <crypto/hash.h>
#include <linux/atomic.h>
#include <linux/err.h>
#include <linux/ktime.h>
#include <linux/random.h>

#include "kcoll_types.h"
#include "kcoll_auth.h"

int kcoll_auth_init(struct kcoll_comm *comm)
{
	struct crypto_shash *tfm;
	int err;

	tfm = crypto_alloc_shash("hmac(sha256)", 0, 0);
	if (IS_ERR(tfm))
		return PTR_ERR(tfm);
	err = crypto_shash_setkey(tfm, comm->key, KCOLL_KEY_LEN);
	if (err) {
		crypto_free_shash(tfm);
		return err;
	}
	comm->auth = tfm;
	return 0;
}

void kcoll_auth_free(struct kcoll_comm *comm)
{
	if (comm->auth)
		crypto_free_shash(comm->auth);
	comm->auth = NULL;
}

/* MAC of @label then the @n (pointer, length) pairs of @parts. */
static int kcoll_auth_mac(struct kcoll_comm *comm, const char *label,
			  const void *const *parts, const size_t *lens,
			  unsigned int n, u8 *mac)
{
	SHASH_DESC_ON_STACK(desc, comm->auth);
	u8 full[32];
	unsigned int i;
	int err;

	if (!comm->auth)
		return -ENOKEY;
	desc->tfm = comm->auth;
	err = crypto_shash_init(desc) ?:
	      crypto_shash_update(desc, label, strlen(label) + 1);
	for (i = 0; !err && i < n; i++)
		err = crypto_shash_update(desc, parts[i], lens[i]);
	if (!err)
		err = crypto_shash_final(desc, full);
	shash_desc_zero(desc);
	if (!err)
		memcpy(mac, full, KCOLL_AUTH_MAC);
	memzero_explicit(full, sizeof(full));
	return err;
}

static int kcoll_auth_hello_mac(struct kcoll_comm *comm,
				const struct kcoll_wire_hello *h, u8 *mac)
{
	const void *parts[] = { (const u8 *)h + KCOLL_HELLO_MAC_OFF };
	size_t lens[] = { KCOLL_HELLO_MAC_LEN };

	return kcoll_auth_mac(comm, "kcoll hello v2", parts, lens, 1, mac);
}

/*
 * The stamp of @comm's next hello: the time now, or one more than the
 * last if the clock has not moved past it (or went back), so that every
 * hello of the communicator is newer than the ones before it.
 */
static u64 kcoll_auth_next_stamp(struct kcoll_comm *comm)
{
	u64 now = ktime_get_real_ns(), last, next;

	do {
		last = atomic64_read(&comm->hello_stamp);
		next = max(now, last + 1);
	} while (atomic64_cmpxchg(&comm->hello_stamp, last, next) != last);
	return next;
}

/* A fresh nonce (its stamp, then random bytes) and the MAC of the rest
 * of @h, for @comm's key. */
int kcoll_auth_hello_sign(struct kcoll_comm *comm, struct kcoll_wire_hello *h)
{
	get_random_bytes(h->nonce, sizeof(h->nonce));
	kcoll_hello_set_stamp(h, kcoll_auth_next_stamp(comm));
	return kcoll_auth_hello_mac(comm, h, h->mac);
}

/* Was @h signed with @comm's key? Constant time in the MAC. */
bool kcoll_auth_hello_ok(struct kcoll_comm *comm,
			 const struct kcoll_wire_hello *h)
{
	u8 mac[KCOLL_AUTH_MAC];

	return !kcoll_auth_hello_mac(comm, h, mac) &&
	       !crypto_memneq(mac, h->mac, sizeof(mac));
}

static int kcoll_auth_accept_mac(struct kcoll_comm *comm,
				 const struct kcoll_wire_hello *h,
				 const struct kcoll_wire_accept *acc, u8 *mac)
{
	const void *parts[] = { (const u8 *)h + KCOLL_HELLO_MAC_OFF, acc };
	size_t lens[] = { sizeof(*h) - KCOLL_HELLO_MAC_OFF,
			  offsetof(struct kcoll_wire_accept, mac) };

	return kcoll_auth_mac(comm, "kcoll accept v2", parts, lens, 2, mac);
}

int kcoll_auth_accept_sign(struct kcoll_comm *comm,
			   const struct kcoll_wire_hello *h,
			   struct kcoll_wire_accept *acc)
{
	get_random_bytes(acc->nonce, sizeof(acc->nonce));
	return kcoll_auth_accept_mac(comm, h, acc, acc->mac);
}

bool kcoll_auth_accept_ok(struct kcoll_comm *comm,
			  const struct kcoll_wire_hello *h,
			  const struct kcoll_wire_accept *acc)
{
	u8 mac[KCOLL_AUTH_MAC];

	return !kcoll_auth_accept_mac(comm, h, acc, mac) &&
	       !crypto_memneq(mac, acc->mac, sizeof(mac));
}

static int kcoll_auth_msg_mac(struct kcoll_comm *comm,
			      const struct kcoll_lane *lane,
			      const struct kcoll_wire_auth *a, u8 *mac)
{
	const void *parts[] = { lane->nonce_hello, lane->nonce_accept, a };
	size_t lens[] = { KCOLL_AUTH_NONCE, KCOLL_AUTH_NONCE,
			  offsetof(struct kcoll_wire_auth, mac) };

	return kcoll_auth_mac(comm, "kcoll auth v2", parts, lens, 3, mac);
}

int kcoll_auth_msg_sign(struct kcoll_comm *comm, const struct kcoll_lane *lane,
			struct kcoll_wire_auth *a)
{
	return kcoll_auth_msg_mac(comm, lane, a, a->mac);
}

bool kcoll_auth_msg_ok(struct kcoll_comm *comm, const struct kcoll_lane *lane,
		       const struct kcoll_wire_auth *a)
{
	u8 mac[KCOLL_AUTH_MAC];

	return a->type == KCOLL_MSG_AUTH &&
	       !kcoll_auth_msg_mac(comm, lane, a, mac) &&
	       !crypto_memneq(mac, a->mac, sizeof(mac));
}
