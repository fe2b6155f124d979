// SPDX-License-Identifier: MIT
/*
 * Host tests of the wire checks (kmod/kcoll_wire.c): the control-message
 * check against the protocol's rules written out again here, case by case
 * and for random messages on every kind of connection; the hello check on
 * every flag byte and short or foreign private data.
 */
#include "unit.h"
#include "../../kmod/kcoll_wire.h"
#include "kcoll-wire-ref.h"

static struct kcoll_wire_msg msg(u8 type, u8 kind)
{
	struct kcoll_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.kind = kind;
	return m;
}

static void test_every_type_and_kind(void)
{
	unsigned int wconn;
	int type, kind;

	for (wconn = 0; wconn <= ALL_WCONN; wconn++)
		for (type = 0; type < 256; type++)
			for (kind = 0; kind < 256; kind++) {
				struct kcoll_wire_msg m = msg(type, kind);

				m.len = htole32(KCOLL_EAGER_SLOT_BYTES);
				m.count = htole64(1);
				if (!UNIT_CHECK(!kcoll_wire_msg_check(&m, wconn) ==
						ref_ok(&m, wconn))) {
					printf("# type %d kind %d wconn %#x\n",
					       type, kind, wconn);
					return;
				}
			}
}

static void test_credit_fields(void)
{
	struct kcoll_wire_msg m = msg(KCOLL_MSG_CREDIT, KCOLL_KIND_COLL);
	u32 need = sizeof(struct kcoll_wire_eager) + KCOLL_EAGER_MAX;

	m.len = htole32(need);
	m.serial = htole32(KCOLL_EAGER_SLOTS - 1);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER), KCOLL_WIRE_OK);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER_OFFERED),
		    KCOLL_WIRE_OK);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_LOCAL),
		    KCOLL_WIRE_NOT_HERE);
	m.serial = htole32(KCOLL_EAGER_SLOTS);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER),
		    KCOLL_WIRE_BAD_SLOT);
	m.serial = htole32(0xffffffffu);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER),
		    KCOLL_WIRE_BAD_SLOT);
	m.serial = 0;
	m.len = htole32(need - 1);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER),
		    KCOLL_WIRE_SHORT_SLOT);
	/* A lazy peer's slots must take the signature too. */
	m.len = htole32(need);
	m.status = htole32(KCOLL_CREDIT_LAZY);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER),
		    KCOLL_WIRE_SHORT_SLOT);
	m.len = htole32(need + sizeof(struct kcoll_wire_eager_sig));
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER), KCOLL_WIRE_OK);
	/* So must the slots of a peer taking eager point-to-point (always
	 * signed), lazy or not. */
	m.status = htole32(KCOLL_CREDIT_P2P);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER), KCOLL_WIRE_OK);
	m.len = htole32(need);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER),
		    KCOLL_WIRE_SHORT_SLOT);
	m.len = htole32(need + sizeof(struct kcoll_wire_eager_sig));
	m.kind = KCOLL_KIND_P2P;
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER),
		    KCOLL_WIRE_BAD_KIND);
}

static void test_credits_and_sig_status(void)
{
	struct kcoll_wire_msg m = msg(KCOLL_MSG_CREDITS, KCOLL_KIND_COLL);

	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER),
		    KCOLL_WIRE_BAD_SLOT);
	m.count = htole64(1ULL << (KCOLL_EAGER_SLOTS - 1));
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER), KCOLL_WIRE_OK);
	/* Only offered, not agreed: a CREDITS cannot come yet. */
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER_OFFERED),
		    KCOLL_WIRE_NOT_HERE);
	m.count = htole64(1ULL << KCOLL_EAGER_SLOTS);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER),
		    KCOLL_WIRE_BAD_SLOT);

	m = msg(KCOLL_MSG_SIG, KCOLL_KIND_COLL);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, 0), KCOLL_WIRE_OK);
	m.status = htole32(KCOLL_SIG_ASK);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, 0), KCOLL_WIRE_BAD_STATUS);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_LAZY), KCOLL_WIRE_OK);
	m.status = htole32(KCOLL_SIG_ASK | 0x100);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_LAZY),
		    KCOLL_WIRE_BAD_STATUS);
	/* Point-to-point: only a send's ask, only on eager connections. */
	m = msg(KCOLL_MSG_SIG, KCOLL_KIND_P2P);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, ALL_WCONN), KCOLL_WIRE_BAD_STATUS);
	m.status = htole32(KCOLL_SIG_ASK);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER), KCOLL_WIRE_OK);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER_OFFERED),
		    KCOLL_WIRE_OK);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_LOCAL | KCOLL_WCONN_LAZY),
		    KCOLL_WIRE_NOT_HERE);
	m.status = htole32(KCOLL_SIG_ASK | KCOLL_SIG_DONE);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, ALL_WCONN), KCOLL_WIRE_BAD_STATUS);
	/* A BYE says "revoked" and nothing else in its status. */
	m = msg(KCOLL_MSG_BYE, KCOLL_KIND_COLL);
	m.status = htole32(KCOLL_BYE_REVOKE);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, 0), KCOLL_WIRE_OK);
	m.status = htole32(KCOLL_BYE_REVOKE | 2);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, ALL_WCONN),
		    KCOLL_WIRE_BAD_STATUS);
	m = msg(KCOLL_MSG_ABORT, KCOLL_KIND_P2P);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, 0), KCOLL_WIRE_OK);
	m = msg(KCOLL_MSG_DATA, KCOLL_KIND_COLL);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, KCOLL_WCONN_EAGER),
		    KCOLL_WIRE_NOT_HERE);
	m = msg(KCOLL_MSG_AUTH, KCOLL_KIND_COLL);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, ALL_WCONN), KCOLL_WIRE_BAD_TYPE);
	m = msg(KCOLL_MSG_EAGER, KCOLL_KIND_COLL);
	UNIT_EQ_INT(kcoll_wire_msg_check(&m, ALL_WCONN), KCOLL_WIRE_BAD_TYPE);
}

static uint64_t rnd_state = 0x77697265;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* Random messages, their fields biased towards the edges. */
static void test_random_messages(void)
{
	/* Around a slot's header + data, with and without the signature. */
	const u32 hd = sizeof(struct kcoll_wire_eager) + KCOLL_EAGER_MAX;
	const u32 sig = sizeof(struct kcoll_wire_eager_sig);
	const u32 lens[] = { 0, hd - 1, hd, hd + sig - 1, hd + sig,
			     hd + sig + 1, KCOLL_EAGER_SLOT_BYTES };
	unsigned long i;

	for (i = 0; i < 2000000; i++) {
		struct kcoll_wire_msg m;
		unsigned int wconn = rnd() & ALL_WCONN;
		uint64_t r = rnd();

		for (size_t b = 0; b < sizeof(m); b += 8) {
			uint64_t v = rnd();

			memcpy((u8 *)&m + b, &v, 8);
		}
		m.type = (u8)(r % 14);
		m.kind = (r >> 8) & 1 ? (u8)(r >> 16) : (u8)((r >> 16) & 1);
		if ((r >> 24) & 1)
			m.len = htole32(lens[(r >> 32) % 7]);
		if ((r >> 25) & 1)
			m.serial = htole32((r >> 40) & 15);
		if ((r >> 26) & 1)
			m.status = htole32((r >> 44) & 3);
		if ((r >> 27) & 1)
			m.count = htole64((r >> 48) & 0x1ff);
		if (!UNIT_CHECK(!kcoll_wire_msg_check(&m, wconn) ==
				ref_ok(&m, wconn))) {
			printf("# type %u kind %u len %u serial %u status %#x count %#llx wconn %#x\n",
			       m.type, m.kind, le32toh(m.len),
			       le32toh(m.serial), le32toh(m.status),
			       (unsigned long long)le64toh(m.count), wconn);
			return;
		}
	}
}

static struct kcoll_wire_hello hello(u8 flags)
{
	struct kcoll_wire_hello h;

	memset(&h, 0, sizeof(h));
	h.version = KCOLL_WIRE_VERSION;
	h.flags = flags;
	h.magic = htole32(KCOLL_WIRE_MAGIC);
	return h;
}

static void test_hellos(void)
{
	struct kcoll_wire_hello h = hello(0);
	unsigned int f;

	UNIT_EQ_INT(kcoll_wire_hello_check(&h, sizeof(h), 4), 0);
	UNIT_EQ_INT(kcoll_wire_hello_check(NULL, sizeof(h), 4),
		    KCOLL_WIRE_HELLO_FOREIGN);
	UNIT_EQ_INT(kcoll_wire_hello_check(&h, sizeof(h) - 1, 4),
		    KCOLL_WIRE_HELLO_FOREIGN);
	h.magic = htole32(KCOLL_WIRE_MAGIC + 1);
	UNIT_EQ_INT(kcoll_wire_hello_check(&h, sizeof(h), 4),
		    KCOLL_WIRE_HELLO_FOREIGN);
	h = hello(0);
	h.version = KCOLL_WIRE_VERSION - 1;
	UNIT_EQ_INT(kcoll_wire_hello_check(&h, sizeof(h), 4),
		    KCOLL_WIRE_HELLO_VERSION);
	h.version = KCOLL_WIRE_VERSION + 1;
	UNIT_EQ_INT(kcoll_wire_hello_check(&h, sizeof(h), 4),
		    KCOLL_WIRE_HELLO_VERSION);
	/* Every flag byte: QP index below the count, count at most 4. */
	for (f = 0; f < 256; f++) {
		unsigned int idx = f & 7, n = ((f >> 4) & 7) + 1;
		int want = idx < n && n <= 4 ? 0 : KCOLL_WIRE_HELLO_LANES;

		h = hello((u8)f);
		if (!UNIT_EQ_INT(kcoll_wire_hello_check(&h, sizeof(h), 4), want))
			printf("# flags %#x\n", f);
	}
	/* Ranks: the connecting rank above ours, within the nranks we
	 * have. */
	h = hello(0);
	h.nranks = htole32(4);
	h.src_rank = htole32(3);
	UNIT_CHECK(kcoll_wire_hello_ranks_ok(&h, 4, 2));
	UNIT_CHECK(!kcoll_wire_hello_ranks_ok(&h, 4, 3));
	UNIT_CHECK(!kcoll_wire_hello_ranks_ok(&h, 5, 0));
	h.src_rank = htole32(4);
	UNIT_CHECK(!kcoll_wire_hello_ranks_ok(&h, 4, 0));
}

/*
 * A grant's immediate on an eager connection never has the eager bit,
 * whatever the serial (they pass 2^30 on a long job), and the same serial
 * always gives the same immediate; elsewhere the serial keeps 31 bits.
 */
static void test_grant_imm(void)
{
	static const u32 serials[] = {
		0, 1, 0x3fffffff, 0x40000000, 0x40000005, 0x7fffffff,
		0x80000000, 0xc0000001, 0xffffffff,
	};
	unsigned int i, kind;

	for (kind = 0; kind < KCOLL_KIND_NR; kind++)
		for (i = 0; i < sizeof(serials) / sizeof(serials[0]); i++) {
			u32 s = serials[i];
			u32 e = kcoll_grant_imm(kind, s, true);
			u32 n = kcoll_grant_imm(kind, s, false);

			UNIT_CHECK(!(e & KCOLL_IMM_EAGER));
			UNIT_EQ_INT(e >> KCOLL_IMM_KIND_SHIFT, kind);
			UNIT_EQ_INT(e & KCOLL_IMM_EAGER_SERIAL,
				    s & KCOLL_IMM_EAGER_SERIAL);
			UNIT_EQ_INT(n & KCOLL_IMM_SERIAL_MASK,
				    s & KCOLL_IMM_SERIAL_MASK);
			UNIT_EQ_INT(n >> KCOLL_IMM_KIND_SHIFT, kind);
		}
}

/*
 * Tokens that cover: a bitmap built by kcoll_cover_add() names exactly the
 * seqs added that lie within KCOLL_COVER_SPAN below the base, across the
 * u32 wrap, and never the base itself or anything younger.
 */
static void test_cover_bits(void)
{
	static const u32 bases[] = { 0, 1, 63, 64, 65, 1000, 0x7fffffff,
				     0x80000000, 0xffffffc0, 0xffffffff };
	unsigned int b, round;
	u32 rng = 12345;

	for (b = 0; b < sizeof(bases) / sizeof(bases[0]); b++)
		for (round = 0; round < 200; round++) {
			u32 base = bases[b], picked[8], i, d;
			u64 bits = 0;

			for (i = 0; i < 8; i++) {
				rng = rng * 1103515245u + 12345u;
				/* Around the span's edges and beyond. */
				picked[i] = base - (rng >> 8) % 70 + 2;
				bits = kcoll_cover_add(bits, base, picked[i]);
			}
			for (d = 0; d < 200; d++) {
				u32 seq = base - d + 3;
				u32 back = base - seq;
				bool want = false;

				for (i = 0; i < 8; i++)
					if (picked[i] == seq)
						want = back >= 1 &&
						       back <= KCOLL_COVER_SPAN;
				UNIT_EQ_INT(kcoll_cover_has(base, bits, seq),
					    want);
			}
			UNIT_CHECK(!kcoll_cover_has(base, ~0ULL, base));
			UNIT_CHECK(!kcoll_cover_has(base, ~0ULL, base + 1));
			UNIT_CHECK(kcoll_cover_has(base, ~0ULL, base - 1));
			UNIT_CHECK(kcoll_cover_has(base, ~0ULL,
						   base - KCOLL_COVER_SPAN));
			UNIT_CHECK(!kcoll_cover_has(base, ~0ULL,
						    base - KCOLL_COVER_SPAN - 1));
		}
}

/* The stamp is the nonce's first 8 bytes, little endian, and leaves the
 * other 4 and the rest of the hello alone. */
static void test_hello_stamp(void)
{
	struct kcoll_wire_hello h = hello(0), was;
	static const u8 want[8] = { 0x08, 0x07, 0x06, 0x05,
				    0x04, 0x03, 0x02, 0x01 };

	memset(h.nonce, 0xa5, sizeof(h.nonce));
	was = h;
	kcoll_hello_set_stamp(&h, 0x0102030405060708ull);
	UNIT_EQ_INT(memcmp(h.nonce, want, sizeof(want)), 0);
	UNIT_CHECK(h.nonce[8] == 0xa5 && h.nonce[11] == 0xa5);
	UNIT_CHECK(kcoll_hello_stamp(&h) == 0x0102030405060708ull);
	memcpy(was.nonce, h.nonce, sizeof(h.nonce));
	UNIT_EQ_INT(memcmp(&was, &h, sizeof(h)), 0);
	kcoll_hello_set_stamp(&h, ~0ull);
	UNIT_CHECK(kcoll_hello_stamp(&h) == ~0ull);
	UNIT_EQ_INT(h.nonce[8], 0xa5);
}

int main(int argc, char **argv)
{
	unit_init(argc, argv);
	UNIT_RUN(test_every_type_and_kind);
	UNIT_RUN(test_credit_fields);
	UNIT_RUN(test_credits_and_sig_status);
	UNIT_RUN(test_random_messages);
	UNIT_RUN(test_hellos);
	UNIT_RUN(test_hello_stamp);
	UNIT_RUN(test_grant_imm);
	UNIT_RUN(test_cover_bits);
	return unit_done();
}
