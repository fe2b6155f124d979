// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over the wire checks (kmod/kcoll_wire.c): what a peer
 * sends, before any state of the engine is looked at. Built with
 * -fsanitize=fuzzer,address,undefined (tests/fuzz/fuzz.mk).
 *
 * Each input is read as (missing bytes are zero):
 *   1   connection facts (KCOLL_WCONN_*, low 4 bits)
 *   48  a control message    kcoll_wire_msg_check() vs the restated rules
 *                            of tests/oracle/kcoll-wire-ref.h
 *   1   private data length (0-255) and its bytes: a hello, checked by
 *       kcoll_wire_hello_check() against the documented layout (magic,
 *       version, QP index below the QP count, at most 4 QPs), then its
 *       ranks by kcoll_wire_hello_ranks_ok() for a few communicators
 * A disagreement aborts with both answers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcoll_wire.h"
#include "kcoll-wire-ref.h"
#include "fuzz_seed.h"

static void fail(const char *what, long got, long want)
{
	fprintf(stderr, "fuzz_wire: %s: got %ld, the rules say %ld\n", what,
		got, want);
	abort();
}

static int ref_hello(const u8 *pd, u32 len, u32 max_lanes)
{
	u32 magic, idx, n;

	if (len < 56)
		return KCOLL_WIRE_HELLO_FOREIGN;
	memcpy(&magic, pd + 4, 4);
	if (le32toh(magic) != KCOLL_WIRE_MAGIC)
		return KCOLL_WIRE_HELLO_FOREIGN;
	if (pd[2] != KCOLL_WIRE_VERSION)
		return KCOLL_WIRE_HELLO_VERSION;
	idx = pd[3] & 7;
	n = ((pd[3] >> 4) & 7) + 1;
	return idx < n && n <= max_lanes ? 0 : KCOLL_WIRE_HELLO_LANES;
}

/*
 * Seeds are generated, not committed: with KCOLL_FUZZ_SEEDS=DIR the target
 * writes one record per message type (a well-formed message on an eager,
 * lazy connection, then a valid hello) there and exits
 * (tests/fuzz/run.sh).
 */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("KCOLL_FUZZ_SEEDS");
	unsigned int type;

	(void)argc;
	(void)argv;
	if (!dir)
		return 0;
	for (type = KCOLL_MSG_SIG; type <= KCOLL_MSG_AUTH; type++) {
		struct {
			u8 wconn;
			struct kcoll_wire_msg m;
			u8 len;
			struct kcoll_wire_hello h;
		} __attribute__((packed)) rec;

		memset(&rec, 0, sizeof(rec));
		rec.wconn = KCOLL_WCONN_EAGER | KCOLL_WCONN_LAZY;
		rec.m.type = (u8)type;
		rec.m.len = htole32(KCOLL_EAGER_SLOT_BYTES);
		rec.m.count = htole64(1);
		rec.len = sizeof(rec.h);
		rec.h.version = KCOLL_WIRE_VERSION;
		rec.h.magic = htole32(KCOLL_WIRE_MAGIC);
		rec.h.nranks = htole32(2);
		rec.h.src_rank = htole32(1);
		fuzz_seed_write(dir, &rec, sizeof(rec), "seed-type%u", type);
	}
	exit(0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kcoll_wire_msg m;
	unsigned int wconn = size ? data[0] & 15 : 0;
	u8 pd[256] __attribute__((aligned(8)));
	size_t off = 1, k;
	u32 len;
	int got;

	memset(&m, 0, sizeof(m));
	k = size > off ? size - off : 0;
	memcpy(&m, data + off, k < sizeof(m) ? k : sizeof(m));
	off += sizeof(m);
	got = kcoll_wire_msg_check(&m, wconn);
	if (!got != ref_ok(&m, wconn))
		fail("message check", got, !ref_ok(&m, wconn));
	if (!got && (m.kind >= KCOLL_KIND_NR || m.type < KCOLL_MSG_SIG ||
		     m.type > KCOLL_MSG_CREDITS))
		fail("a message of no dispatched type or kind passed", m.type,
		     m.kind);

	len = size > off ? data[off++] : 0;
	memset(pd, 0, sizeof(pd));
	k = size > off ? size - off : 0;
	memcpy(pd, data + off, k < len ? k : len);
	for (u32 lanes = 1; lanes <= 8; lanes <<= 1) {
		got = kcoll_wire_hello_check(pd, len, lanes);
		if (got != ref_hello(pd, len, lanes))
			fail("hello check", got, ref_hello(pd, len, lanes));
	}
	if (len >= sizeof(struct kcoll_wire_hello)) {
		const struct kcoll_wire_hello *h = (const void *)pd;
		u32 src = le32toh(h->src_rank), n = le32toh(h->nranks);

		for (u32 nranks = 1; nranks <= 4; nranks++)
			for (u32 rank = 0; rank < nranks; rank++) {
				bool want = n == nranks && src < nranks &&
					    src > rank;

				if (kcoll_wire_hello_ranks_ok(h, nranks, rank) !=
				    want)
					fail("hello ranks", !want, want);
			}
	}
	return 0;
}
