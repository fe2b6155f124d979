/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll transport seam: what the collective engine asks of a connection,
 * and what a connection tells the engine.
 *
 * The engine (kcoll_engine.h) speaks one protocol to every peer: control
 * messages (struct kcoll_wire_msg), grants that expose part of a receive
 * for the peer to fill, puts that fill a peer's grant, and eager transfers
 * into slots the peer offered. How those move is the transport's business,
 * chosen once per connection when it comes up (conn->xp):
 *
 *  - kcoll_xport_rdma (kcoll_lanes.c): RC QPs through the NIC. A control
 *    message is an inline SEND on lane 0; a grant is a fast-reg MR over
 *    exactly the granted bytes (kcoll_gmr.c); a put is an RDMA WRITE WITH
 *    IMM, whose completion comes later.
 *  - kcoll_xport_local (kcoll_local.c): a peer in this kernel. Control
 *    messages go through an in-memory channel; a grant exposes the bytes
 *    under an id; a put copies into them at once and sends a DATA message.
 *
 * The engine never asks which transport it has: what differs is in the
 * operations below and in the few properties beside them.
 *
 * Upcalls (the transport into the engine, all under comm->lock):
 *  kcoll_engine_msg()        a control message arrived
 *  kcoll_engine_data()       a grant's data landed (a WRITE's immediate,
 *                            or a DATA message standing for one)
 *  kcoll_engine_eager_in()   an eager transfer's payload arrived by value
 *                            (the channel; through the NIC it is written
 *                            into the slot and comes as kcoll_engine_data)
 *  kcoll_engine_put_done()   a put that was in flight completed
 *  kcoll_engine_conn_lost()  the peer is gone (kcoll_conn_kill())
 *
 * Every operation is called with comm->lock held, from process context.
 */
#ifndef KCOLL_XPORT_H
#define KCOLL_XPORT_H

#include "kcoll_types.h"

/* What kcoll_xport.put() did with the grant. */
enum kcoll_put {
	KCOLL_PUT_DONE,		/* the peer has the data (or will, with
				 * nothing more of ours to wait for) */
	KCOLL_PUT_POSTED,	/* in flight: kcoll_engine_put_done() follows,
				 * and the transport owns the grant until then */
};

struct kcoll_xport {
	const char *name;
	/* Wire-check flags this transport adds (KCOLL_WCONN_LOCAL: the
	 * messages only a channel carries are allowed). */
	unsigned int wconn;
	/* A receive into unregistered memory cannot be the peer's target:
	 * it goes through staging. */
	bool stage_unreg;
	/* Round trips are worth timing (PING): they cross the device. */
	bool timed;

	/*
	 * Send control message @m. 0; -ENOBUFS: no room now, retried after
	 * the next completion; -ENOTCONN: the connection is not up; another
	 * error: nothing was sent.
	 */
	int (*send_msg)(struct kcoll_conn *conn, struct kcoll_wire_msg *m);

	/*
	 * Expose g->len bytes of @b at byte @off for the peer to fill
	 * through grant @g of @op (g->slot: the staging slot they are in,
	 * or -1), then send @m, the GRANT, with the address and key that
	 * name them. The transport takes g->slot over in every case: on
	 * success until unexpose(), on failure it is free again (or freed
	 * once the transport may let go of it). 0; -ENOBUFS: nothing
	 * happened, try again later; -ENOTCONN: the connection is down
	 * (its loss fails the op); another error: the op must fail.
	 */
	int (*expose)(struct kcoll_conn *conn, struct kcoll_task *op,
		      struct kcoll_grant *g, const struct kcoll_buf *b,
		      size_t off, struct kcoll_wire_msg *m);
	/*
	 * Grant @g is over (its data landed, or it was dropped): the peer
	 * may not write through it any more. Clears g->slot if the
	 * transport keeps the slot until that is certain; otherwise the
	 * engine frees it.
	 */
	void (*unexpose)(struct kcoll_conn *conn, struct kcoll_grant *g);
	/* Make what retired grants held (staging slots) free again, if
	 * the transport was waiting for something; whether any came
	 * back. NULL: they are free when unexposed. */
	bool (*reclaim)(struct kcoll_conn *conn);
	/* The connection was lost: whatever else still lets the peer write
	 * here (the eager slots) stops now. NULL: nothing. */
	void (*lost)(struct kcoll_conn *conn);

	/*
	 * Fill the peer's grant @g of @op (g->len bytes) from @src at byte
	 * @off; @m is the DATA message that tells the peer where a channel
	 * has no immediate to carry (prepared by the engine). A kcoll_put,
	 * or a negative error: -ENOBUFS, no room now (retried after the
	 * next completion), or the grant is gone while a channel still
	 * holds the peer's messages, its BYE maybe (retried when their
	 * delivery reaps); -ENOENT, the peer dropped the grant (it
	 * failed); -EPROTO, the peer's grant is bad (the connection ends);
	 * another, the op fails. KCOLL_PUT_DONE leaves @g to the caller.
	 */
	int (*put)(struct kcoll_task *op, struct kcoll_conn *conn,
		   struct kcoll_grant *g, struct kcoll_buf *src, size_t off,
		   struct kcoll_wire_msg *m);

	/* Eager slots (docs/DESIGN.md, "Eager transfers"). */
	/* The connection came up: what the slots need before an offer. */
	int (*eager_up)(struct kcoll_conn *conn);
	/*
	 * Slots @slots are about to be offered (@again: offered before,
	 * now in a CREDITS @m; else each in its own CREDIT). Fill in
	 * what names them to the peer; 0, -ENOBUFS (offer later), or an
	 * error that ends the connection.
	 */
	int (*eager_offer)(struct kcoll_conn *conn, unsigned long slots,
			   bool again, struct kcoll_wire_msg *m);
	/* The CREDIT of slot @slot (first offer): its address and key. */
	void (*eager_credit)(struct kcoll_conn *conn, unsigned int slot,
			     struct kcoll_wire_msg *m);
	/* The peer offered @slots again, with CREDITS @m. */
	void (*eager_reoffered)(struct kcoll_conn *conn, unsigned long slots,
				const struct kcoll_wire_msg *m);
	/*
	 * Put @hlen bytes of header @h, then @len bytes of @src, into the
	 * peer's slot @slot; @m is the EAGER message a channel carries
	 * them in (prepared by the engine). 0 (counts as sent), or an
	 * error as put()'s.
	 */
	int (*eager_put)(struct kcoll_conn *conn, u32 slot,
			 struct kcoll_wire_msg *m, const void *h, u32 hlen,
			 const u8 *src, u32 len);
};

extern const struct kcoll_xport kcoll_xport_rdma;
extern const struct kcoll_xport kcoll_xport_local;

/* kcoll_lanes.c: send WRs lane @idx of @conn can still take. */
unsigned int kcoll_conn_sq_room(struct kcoll_conn *conn, unsigned int idx);

/* Upcalls (see above); the rest are in kcoll_coll.h. */
void kcoll_engine_eager_in(struct kcoll_conn *conn,
			   const struct kcoll_wire_msg *m,
			   const void *payload, u32 plen);
void kcoll_engine_put_done(struct kcoll_conn *conn, struct kcoll_task *op,
			   u32 phase, u32 len, int err);

#endif /* KCOLL_XPORT_H */
