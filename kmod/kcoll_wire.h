/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * kcoll wire protocol between the modules of two nodes (docs/DESIGN.md,
 * "Wire protocol"). Plain header: also used by host unit tests. All
 * multi-byte fields are little endian on the wire.
 */
#ifndef KCOLL_WIRE_H
#define KCOLL_WIRE_H

#include "kcoll_plain.h"

#define KCOLL_WIRE_MAGIC	0x4c4f434bU	/* "KCOL" */
/*
 * 2: the key never crosses the wire; both sides prove they know it over
 * fresh nonces (HMAC-SHA256, truncated to KCOLL_AUTH_MAC bytes): the
 * hello's MAC, the accept's MAC over the hello, and the connecting
 * side's AUTH message over both nonces (docs/DESIGN.md, "Authentication").
 * 3: each offer of an eager slot registers its MR under a new key, whose
 * key byte a CREDITS carries (docs/DESIGN.md, "Grant MRs").
 * 4: a broadcast's schedule ends with confirmation tokens to its root, and
 * broadcast and reduce send no SIG to lazy peers (kcoll_sched_lazy()).
 * 5: several collectives run at once: grants, SIGs and ABORTs of a younger
 * collective may come between those of an older one (docs/DESIGN.md,
 * "Several collectives in flight"); a version-4 engine would stop there.
 * 6: a hello's nonce begins with its sender's stamp (kcoll_hello_stamp()):
 * a listener refuses a hello no newer than one it saw from that rank and
 * drops an attempt not yet proven for a newer one (docs/DESIGN.md,
 * "Authentication"); version-5 nonces are random, which it would misread.
 */
#define KCOLL_WIRE_VERSION	6
#define KCOLL_AUTH_NONCE	12
#define KCOLL_AUTH_MAC		16

/*
 * rdma_cm REQ private data (at most 56 bytes for rdma_connect()). The first
 * two bytes stay zero: rdma_cm reads them on AF_IB.
 */
struct kcoll_wire_hello {
	u8	cma_resv[2];
	u8	version;
	u8	flags;		/* bits 0-2: this QP's index; 4-6: QPs - 1
				 * (wire version 1 senders: 0, one QP);
				 * bit 3: KCOLL_HELLO_LOCAL;
				 * bit 7: KCOLL_HELLO_EAGER */
	__le32	magic;
	__le64	uid;		/* communicator id */
	__le32	src_rank;	/* the connecting rank */
	__le32	dst_rank;	/* the rank it wants */
	__le32	nranks;
	u8	nonce[KCOLL_AUTH_NONCE];	/* fresh per connection attempt:
						 * the stamp, then random */
	u8	mac[KCOLL_AUTH_MAC];	/* over version .. nonce (bytes 2-39) */
};
#define KCOLL_HELLO_MAC_OFF	2
#define KCOLL_HELLO_MAC_LEN	(offsetof(struct kcoll_wire_hello, mac) - 2)

/*
 * The connecting rank's table puts the accepting rank on its own node: it
 * offers the intra-node path (docs/DESIGN.md, "Ranks on the same node").
 * Only the same module ever sees it: peers on other nodes never get it.
 */
#define KCOLL_HELLO_LOCAL	0x08
/* The connecting rank offers eager transfers (KCOLL_ACCEPT_EAGER). */
#define KCOLL_HELLO_EAGER	0x80

/*
 * The hello's stamp: the first 8 bytes of its nonce, little endian. The
 * sender's CLOCK_REALTIME in ns when it signed the hello, and greater
 * than every stamp its communicator used before (kcoll_auth_hello_sign()),
 * so that a captured hello is older than the next one of its rank. The
 * nonce's other 4 bytes are random.
 */
#define KCOLL_HELLO_STAMP_LEN	8

static inline u64 kcoll_nonce_stamp(const u8 *nonce)
{
	u64 s = 0;
	int i;

	for (i = KCOLL_HELLO_STAMP_LEN - 1; i >= 0; i--)
		s = s << 8 | nonce[i];
	return s;
}

static inline u64 kcoll_hello_stamp(const struct kcoll_wire_hello *h)
{
	return kcoll_nonce_stamp(h->nonce);
}

static inline void kcoll_hello_set_stamp(struct kcoll_wire_hello *h, u64 s)
{
	int i;

	for (i = 0; i < KCOLL_HELLO_STAMP_LEN; i++, s >>= 8)
		h->nonce[i] = (u8)s;
}

static inline u8 kcoll_hello_lanes(unsigned int idx, unsigned int nlanes)
{
	return (u8)((idx & 0x7) | ((nlanes - 1) & 0x7) << 4);
}

static inline unsigned int kcoll_hello_lane(u8 flags)
{
	return flags & 0x7;
}

static inline unsigned int kcoll_hello_nlanes(u8 flags)
{
	return ((flags >> 4) & 0x7) + 1;
}

/*
 * REP private data: the accepting rank's cost model inputs, and its proof
 * that it knows the key: a MAC over the whole hello it accepts and this
 * accept up to the MAC.
 */
struct kcoll_wire_accept {
	__le32	magic;
	__le32	alpha_ns;
	__le32	beta_ps;
	__le32	gamma_ps;
	u8	flags;		/* KCOLL_ACCEPT_* */
	u8	resv[3];
	u8	nonce[KCOLL_AUTH_NONCE];
	u8	mac[KCOLL_AUTH_MAC];
};

/*
 * The connecting rank's first message on each QP, before any other: its
 * proof over both nonces (a replayed hello cannot produce it), and its
 * cost model inputs. The accepting side takes nothing else on the QP
 * until it has checked it.
 */
struct kcoll_wire_auth {
	u8	type;		/* KCOLL_MSG_AUTH */
	u8	resv0[3];
	__le32	alpha_ns;
	__le32	beta_ps;
	__le32	gamma_ps;
	u8	resv[16];
	u8	mac[KCOLL_AUTH_MAC];	/* over both nonces and bytes 0-31 */
};

/* The accepting rank found the connecting one's communicator in its own
 * module: data between them is copied by the CPU, not written by the NIC. */
#define KCOLL_ACCEPT_LOCAL	0x01
/* The accepting rank answers PING with PONG: the connecting one may ping
 * (older peers leave the bit clear and would take PING for an error). */
#define KCOLL_ACCEPT_PING	0x02
/*
 * Both ranks send small collective transfers eagerly (docs/DESIGN.md,
 * "Eager transfers"): with the hello's KCOLL_HELLO_EAGER, on a connection
 * of one QP to another node.
 */
#define KCOLL_ACCEPT_EAGER	0x04

/* REJ private data: why a hello was refused. */
struct kcoll_wire_reject {
	__le32	magic;
	u8	reason;		/* enum kcoll_rej */
	u8	resv[3];
};

enum kcoll_rej {
	KCOLL_REJ_NOCOMM = 1,	/* no such communicator (yet): retry */
	KCOLL_REJ_VERSION,	/* wire version or magic not understood */
	KCOLL_REJ_KEY,		/* wrong communicator key */
	KCOLL_REJ_RANK,		/* ranks or nranks inconsistent */
	KCOLL_REJ_DUP,		/* an attempt as that rank, not yet proven,
				 * holds its place: retry */
	KCOLL_REJ_NOMEM,	/* the passive side could not set up */
	KCOLL_REJ_DEVICE,	/* the hello came in on a device the passive
				 * side does not use (its devices tunable);
				 * older peers retry on it until they time out */
	KCOLL_REJ_TAKEN,	/* that rank's connection is up (or was):
				 * another attempt as it never gets in (DUP:
				 * one not yet proven holds it; retry); older
				 * peers retry on it until they time out */
	KCOLL_REJ_STALE,	/* the hello is no newer than one the passive
				 * side saw from that rank (a replay of it, or
				 * the sender's clock went back): retry */
};

/* Control messages: one SEND, inline, into a pre-posted receive. */
enum kcoll_msg_type {
	KCOLL_MSG_SIG = 1,	/* collective signature, to every peer
				 * (lazily where both agreed: @status) */
	KCOLL_MSG_GRANT,	/* receiver -> sender: write chunk here */
	KCOLL_MSG_ABORT,	/* the operation failed: no more data */
	KCOLL_MSG_NOP,		/* nothing; accepted and ignored (wire
				 * version 1 senders used it as a kick) */
	KCOLL_MSG_BYE,		/* the sender's comm is going away; seq:
				 * collectives it completed (all below);
				 * status KCOLL_BYE_REVOKE: revoked by rank
				 * @root - 1 */
	KCOLL_MSG_DATA,		/* intra-node connections only: the data of
				 * grant @serial (@len bytes) has been copied
				 * in; stands for a WRITE WITH IMM */
	KCOLL_MSG_PING,		/* connecting rank -> accepting rank after
				 * KCOLL_ACCEPT_PING, then also the other
				 * way: @count is the sender's clock,
				 * echoed by ... */
	KCOLL_MSG_PONG,		/* ... the answer: the round trip is the
				 * device's measured alpha */
	KCOLL_MSG_CREDIT,	/* eager connections: our eager slot
				 * @serial is free, at (@addr, @rkey),
				 * @len bytes */
	KCOLL_MSG_CREDITS,	/* eager connections: the slots of bitmap
				 * @count, each offered before by a CREDIT,
				 * are free again (sent once half of them
				 * are); through the NIC byte i of @addr is
				 * slot i's new key byte (its rkey's low 8
				 * bits: each offer registers it anew) */
	KCOLL_MSG_EAGER,	/* intra-node eager connections only: an
				 * eager transfer for slot @serial, its
				 * header and data (@len bytes) carried by
				 * the message; stands for the eager WRITE */
	KCOLL_MSG_AUTH,		/* struct kcoll_wire_auth: the connecting
				 * side's first message on each QP */
};

/*
 * BYE status: the communicator was revoked (by rank root - 1): end ours
 * too, at once, and pass it on. Older peers ignore it (a plain BYE).
 */
#define KCOLL_BYE_REVOKE	(1U << 0)

/* Message kinds: collectives and point-to-point match independently. */
enum kcoll_kind {
	KCOLL_KIND_COLL = 0,
	KCOLL_KIND_P2P = 1,
	KCOLL_KIND_NR
};

struct kcoll_wire_msg {
	u8	type;		/* enum kcoll_msg_type */
	u8	kind;		/* enum kcoll_kind */
	u8	opcode;		/* signature: uapi opcode, dtype, redop */
	u8	dtype;
	u8	redop;
	u8	algo;		/* signature: enum kcoll_algo (collectives) */
	__le16	phase;		/* GRANT: the receiver's schedule phase */
	__le32	seq;		/* collective or p2p sequence number */
	__le32	root;		/* signature: root / peer */
	__le64	count;		/* signature: count */
	__le64	addr;		/* GRANT: remote address (intra-node: the
				 * id of the exposed memory) */
	__le32	rkey;		/* GRANT (intra-node: 0) */
	__le32	len;		/* GRANT, DATA: bytes */
	__le32	serial;		/* GRANT, DATA: per-(connection, kind)
				 * serial */
	__le32	status;		/* ABORT: the error (positive errno);
				 * CREDIT: KCOLL_CREDIT_*; SIG: KCOLL_SIG_* */
};

KCOLL_STATIC_ASSERT(KCOLL_HELLO_STAMP_LEN + 4 <= KCOLL_AUTH_NONCE,
		    "a hello's nonce keeps random bytes after its stamp");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_wire_hello) <= 56,
		    "hello must fit rdma_connect's 56 bytes");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_wire_msg) == 48, "wire msg size");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_wire_auth) == 48, "auth msg size");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_wire_hello) == 56, "hello size");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_wire_accept) == 48, "accept size");

/*
 * RDMA WRITE WITH IMM immediate: bit 31 the kind, bits 0-30 the serial of
 * the grant the data fills (low 31 bits). The receiver checks it against the
 * oldest grant it has outstanding on that connection for that kind.
 */
#define KCOLL_IMM_KIND_SHIFT	31
#define KCOLL_IMM_SERIAL_MASK	0x7fffffffU

/*
 * Eager transfers (connections that agreed on KCOLL_ACCEPT_EAGER): a
 * collective transfer of at most KCOLL_EAGER_MAX bytes needs no grant. The
 * sender writes a struct kcoll_wire_eager and the data behind it into one
 * of the receiver's KCOLL_EAGER_SLOTS slots, which the receiver offered
 * with a CREDIT message; the immediate is the kind, KCOLL_IMM_EAGER and
 * the slot. On such connections a grant's serial travels in bits 0-29.
 */
#define KCOLL_IMM_EAGER		0x40000000U
#define KCOLL_IMM_EAGER_SERIAL	0x3fffffffU
#define KCOLL_EAGER_SLOTS	8
#define KCOLL_EAGER_MAX		8192

struct kcoll_wire_eager {
	__le32	seq;		/* the collective */
	__le16	phase;		/* the sender's schedule phase */
	u8	kind;		/* KCOLL_KIND_COLL, or KCOLL_KIND_P2P
				 * (then always signed) */
	u8	flags;		/* KCOLL_EAGER_SIGNED, _COVER (older
				 * senders: 0) */
	__le32	len;		/* data bytes that follow (after the
				 * signature, if any) */
	__le32	resv2;
};

/*
 * The sender's signature follows the header (then the data): sent only to
 * a peer whose CREDITs carried KCOLL_CREDIT_LAZY (docs/DESIGN.md, "Lazy
 * signatures"). The receiver checks it against its own operation before it
 * uses the data.
 */
#define KCOLL_EAGER_SIGNED	0x01
/*
 * A broadcast's confirmation token that confirms older ones too
 * (docs/DESIGN.md, "Tokens that cover"): sent only to a peer whose CREDITs
 * carried KCOLL_CREDIT_COVER, always with KCOLL_EAGER_SIGNED. Its data is
 * 8 bytes, a little-endian bitmap: bit i set says that the sender's token
 * for its collective seq - 1 - i (same peer, a broadcast's) goes with this
 * one. The collective @seq itself, whose token this is, receives no data.
 */
#define KCOLL_EAGER_COVER	0x02
#define KCOLL_COVER_SPAN	64
#define KCOLL_COVER_BYTES	8

/* Does a covering token of @base, with @bits, confirm collective @seq? */
static inline bool kcoll_cover_has(u32 base, u64 bits, u32 seq)
{
	u32 d = base - seq;

	return d >= 1 && d <= KCOLL_COVER_SPAN && ((bits >> (d - 1)) & 1);
}

/* @bits with @seq's bit set, if a covering token of @base can carry it. */
static inline u64 kcoll_cover_add(u64 bits, u32 base, u32 seq)
{
	u32 d = base - seq;

	if (d < 1 || d > KCOLL_COVER_SPAN)
		return bits;
	return bits | (u64)1 << (d - 1);
}

struct kcoll_wire_eager_sig {
	u8	opcode;
	u8	dtype;
	u8	redop;
	u8	algo;
	__le32	root;
	__le64	count;
};

/* A slot: header, signature, data, padded to a cache line. */
#define KCOLL_EAGER_SLOT_BYTES	(KCOLL_EAGER_MAX + 64)

KCOLL_STATIC_ASSERT(sizeof(struct kcoll_wire_eager) == 16, "eager header");
KCOLL_STATIC_ASSERT(sizeof(struct kcoll_wire_eager) +
		    sizeof(struct kcoll_wire_eager_sig) + KCOLL_EAGER_MAX <=
		    KCOLL_EAGER_SLOT_BYTES, "eager slot");

/*
 * CREDIT @status: the sender checks the signature on everything it
 * receives from us (signed eager headers, grants) and goes without our SIG
 * for collectives whose every result depends on every rank, as we may
 * for it once we offer the same: send it signed eager headers
 * (docs/DESIGN.md, "Lazy signatures"). Older senders leave it zero.
 */
#define KCOLL_CREDIT_LAZY	0x01
/*
 * CREDIT @status: point-to-point transfers of at most KCOLL_EAGER_MAX bytes
 * may come eagerly too, always signed (the slot then has room for the
 * signature). Where both ends said so, each side's small sends and
 * receives with the other go without a grant (docs/DESIGN.md, "Eager
 * point-to-point"); older peers ignore the bit and never set it.
 */
#define KCOLL_CREDIT_P2P	0x02
/*
 * CREDIT @status, with KCOLL_CREDIT_P2P: a point-to-point send of ours that
 * finds none of the peer's slots free for it may say so at once, with a
 * point-to-point SIG whose @status is KCOLL_SIG_ASK and @seq its own; the
 * peer then grants that receive (and any older one still waiting) when it
 * is posted, instead of after KCOLL_SIG_LAZY_MS (docs/DESIGN.md, "Eager
 * point-to-point"). Older peers ignore the bit and never set it, and are
 * never sent such a SIG.
 */
#define KCOLL_CREDIT_P2P_ASK	0x04
/*
 * CREDIT @status, with KCOLL_CREDIT_LAZY: we take a broadcast's confirmation
 * token that covers older ones (KCOLL_EAGER_COVER). A sender that saw it
 * may hold a token while its last one is on the wire and send the tokens
 * that came meanwhile as one. Older peers ignore the bit and never set it,
 * and are sent one token per broadcast, as before.
 */
#define KCOLL_CREDIT_COVER	0x08

/*
 * SIG @status. ASK: a lazy SIG (the collective has run long enough to
 * want every signature, for its report or because the peer's operation
 * may differ): answer with yours, or DONE if you completed @seq. DONE: the
 * answer of a rank that completed @seq (no signature: completing it
 * proves that its signature matched everyone's).
 */
#define KCOLL_SIG_ASK		0x01
#define KCOLL_SIG_DONE		0x02

static inline u32 kcoll_imm_make(u32 kind, u32 serial)
{
	return (kind << KCOLL_IMM_KIND_SHIFT) | (serial & KCOLL_IMM_SERIAL_MASK);
}

/*
 * The immediate that answers grant @serial of @kind: on an eager
 * connection the serial keeps only bits 0-29, bit 30 telling eager writes
 * apart. Serials run past 2^30 on a long job: both the sender's WRITE (or
 * an intra-node DATA message, which carries the whole serial) and the
 * receiver's match must reduce them the same way.
 */
static inline u32 kcoll_grant_imm(u32 kind, u32 serial, bool eager)
{
	return kcoll_imm_make(kind, eager ? serial & KCOLL_IMM_EAGER_SERIAL :
					    serial);
}

/* kcoll_wire.c: checks of what a peer sends, from its bytes alone. */

/* What a connection is, for kcoll_wire_msg_check(). */
#define KCOLL_WCONN_LOCAL		0x01	/* the intra-node channel */
#define KCOLL_WCONN_EAGER		0x02	/* eager transfers agreed */
#define KCOLL_WCONN_EAGER_OFFERED	0x04	/* ... or offered by us */
#define KCOLL_WCONN_LAZY		0x08	/* both offered lazy SIGs */

enum kcoll_wire_verdict {
	KCOLL_WIRE_OK = 0,
	KCOLL_WIRE_BAD_TYPE,	/* no such type here */
	KCOLL_WIRE_BAD_KIND,	/* kind unknown, or not for this type */
	KCOLL_WIRE_NOT_HERE,	/* not on this kind of connection */
	KCOLL_WIRE_BAD_SLOT,	/* eager slot (bitmap) out of range */
	KCOLL_WIRE_SHORT_SLOT,	/* offered slot too small */
	KCOLL_WIRE_BAD_STATUS,	/* status bits not allowed */
	KCOLL_WIRE_BAD_STATE,	/* (the engine's handler) not now */
};

#define KCOLL_WIRE_HELLO_FOREIGN	1	/* short, or not our magic */
#define KCOLL_WIRE_HELLO_VERSION	2	/* another wire version */
#define KCOLL_WIRE_HELLO_LANES		3	/* QP index/count impossible */

int kcoll_wire_msg_check(const struct kcoll_wire_msg *m, unsigned int wconn);
int kcoll_wire_hello_check(const void *pd, u32 len, u32 max_lanes);
bool kcoll_wire_hello_ranks_ok(const struct kcoll_wire_hello *h, u32 nranks,
			       u32 rank);

#endif /* KCOLL_WIRE_H */
