/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * kcoll generic netlink family: the control plane of the kcoll module.
 *
 * Family KCOLL_GENL_NAME, version KCOLL_GENL_VERSION, one multicast group
 * KCOLL_GENL_MCGRP_EVENTS. Every request attribute is checked against a
 * strict policy: unknown attributes, wrong types or lengths are -EINVAL with
 * an extended ack naming the attribute. Reading needs no privilege; writing
 * (KCOLL_CMD_TUNABLE_SET) needs CAP_NET_ADMIN (-EPERM otherwise).
 *
 * Integers are in host byte order. Attributes are only ever added; a reader
 * ignores attributes it does not know (the kernel's replies may grow).
 */
#ifndef _UAPI_LINUX_KCOLL_NETLINK_H
#define _UAPI_LINUX_KCOLL_NETLINK_H

#define KCOLL_GENL_NAME		"kcoll"
#define KCOLL_GENL_VERSION	1
#define KCOLL_GENL_MCGRP_EVENTS	"events"

/* Latency histogram: bucket i counts operations that took [2^i, 2^(i+1))
 * microseconds from submission to completion (bucket 0 also counts < 1 us,
 * the last bucket everything longer). */
#define KCOLL_NL_LAT_BUCKETS	32

/**
 * enum kcoll_nl_cmd - commands and events.
 *
 * Requests (NLM_F_REQUEST):
 * @KCOLL_CMD_DEV_GET:	dump: one reply per RDMA device kcoll drives
 *	(DEV_NAME, DEV_INDEX, DEV_NODE_GUID, DEV_PORT_STATE, DEV_COMMS,
 *	DEV_ENABLED, STATS)
 * @KCOLL_CMD_COMM_GET:	dump: one reply per communicator on this node; do:
 *	the one named by COMM_ID. Reply: COMM_ID, COMM_UID, COMM_PID, RANK,
 *	NRANKS, COMM_STATE, DEV_NAME, COMM_INFLIGHT, COMM_MEMBERS, COMM_OPS,
 *	STATS, and COMM_LAST_ERROR when an operation failed.
 * @KCOLL_CMD_STATS_GET: do: node-wide STATS plus one DEV nest per device.
 * @KCOLL_CMD_TUNABLE_GET: dump: every tunable; do: the one named by
 *	TUNABLE_NAME (-ENOENT if none). Reply: TUNABLE_NAME, TUNABLE_VALUE.
 * @KCOLL_CMD_TUNABLE_SET: do, CAP_NET_ADMIN: TUNABLE_NAME, TUNABLE_VALUE
 *	(the same text sysfs accepts). -ENOENT, -EINVAL (out of range), -EPERM.
 *
 * Events (multicast on "events", also logged by the module):
 * @KCOLL_CMD_EV_COMM_CREATED: COMM_ID, COMM_UID, COMM_PID, RANK, NRANKS,
 *	DEV_NAME
 * @KCOLL_CMD_EV_COMM_DESTROYED: COMM_ID, COMM_UID, COMM_PID, RANK, NRANKS
 * @KCOLL_CMD_EV_OP_TIMEOUT: an operation ran past its timeout. COMM_ID,
 *	COMM_UID, RANK, NRANKS, OP_SEQ, OP_OPCODE, OP_TIMEOUT_MS, and
 *	MISSING_RANKS: the ranks this one was still waiting for
 * @KCOLL_CMD_EV_PEER_LOST: the connection to a peer failed. COMM_ID,
 *	COMM_UID, RANK, NRANKS, PEER_RANK, ERRNO
 * @KCOLL_CMD_EV_COMM_ABORTED: KCOLL_IOC_COMM_ABORT, or a peer's revoke.
 *	COMM_ID, COMM_UID, RANK, NRANKS, COMM_INFLIGHT (operations
 *	cancelled); revoked: PEER_RANK, the rank that revoked (this one or
 *	a peer)
 * @KCOLL_CMD_EV_DEV_ADDED: DEV_NAME, DEV_INDEX
 * @KCOLL_CMD_EV_DEV_REMOVED: DEV_NAME, DEV_INDEX
 */
enum kcoll_nl_cmd {
	KCOLL_CMD_UNSPEC,
	KCOLL_CMD_DEV_GET,
	KCOLL_CMD_COMM_GET,
	KCOLL_CMD_STATS_GET,
	KCOLL_CMD_TUNABLE_GET,
	KCOLL_CMD_TUNABLE_SET,
	KCOLL_CMD_EV_COMM_CREATED,
	KCOLL_CMD_EV_COMM_DESTROYED,
	KCOLL_CMD_EV_OP_TIMEOUT,
	KCOLL_CMD_EV_PEER_LOST,
	KCOLL_CMD_EV_COMM_ABORTED,
	KCOLL_CMD_EV_DEV_ADDED,
	KCOLL_CMD_EV_DEV_REMOVED,
	__KCOLL_CMD_MAX,
	KCOLL_CMD_MAX = __KCOLL_CMD_MAX - 1
};

/** enum kcoll_comm_state - KCOLL_A_COMM_STATE values. */
enum kcoll_comm_state {
	KCOLL_COMM_CONNECTING	= 0,	/* COMM_CREATE still connecting */
	KCOLL_COMM_READY	= 1,
	KCOLL_COMM_FAILED	= 2,	/* a peer was lost; destroy it */
	KCOLL_COMM_ABORTED	= 3,	/* KCOLL_IOC_COMM_ABORT; destroy it */
	KCOLL_COMM_REVOKED	= 4,	/* revoked, here or by a peer (and
					 * passed on); destroy it */
};

/**
 * enum kcoll_nl_attr - attributes (one space for requests, replies and
 * events; nests reuse it).
 * @KCOLL_A_DEV_NAME:	string, RDMA device name (e.g. "rxe0", "mlx5_0")
 * @KCOLL_A_DEV_INDEX:	u32, the ib_device index
 * @KCOLL_A_DEV_NODE_GUID: u64
 * @KCOLL_A_DEV_PORT_STATE: u8, port 1's enum ib_port_state (4 = ACTIVE)
 * @KCOLL_A_DEV_COMMS:	u32, communicators using the device
 * @KCOLL_A_DEV:	nest of DEV_* and STATS (in STATS_GET replies)
 * @KCOLL_A_COMM_ID:	u32, node-wide communicator id (not the per-file
 *			comm_id of the ioctls)
 * @KCOLL_A_COMM_UID:	u64, the id every rank of the communicator shares
 * @KCOLL_A_COMM_PID:	u32, thread group id of the process that created it,
 *			in the reader's pid namespace (0: not visible there)
 * @KCOLL_A_RANK:	u32, this rank
 * @KCOLL_A_NRANKS:	u32
 * @KCOLL_A_COMM_STATE:	u8, enum kcoll_comm_state
 * @KCOLL_A_COMM_INFLIGHT: u32, operations submitted and not completed
 * @KCOLL_A_COMM_MEMBERS: nest of KCOLL_A_MEMBER
 * @KCOLL_A_MEMBER:	nest: RANK, MEMBER_ADDR, MEMBER_PORT,
 *			MEMBER_LOCAL_INDEX, MEMBER_CONNECTED
 * @KCOLL_A_MEMBER_ADDR: binary, 16 bytes (IPv4-mapped IPv6)
 * @KCOLL_A_MEMBER_PORT: u16
 * @KCOLL_A_MEMBER_LOCAL_INDEX: u16
 * @KCOLL_A_MEMBER_CONNECTED: u8, 1 while the RC connection is up (always 1
 *			for the rank itself)
 * @KCOLL_A_COMM_OPS:	nest of KCOLL_A_OP (operations in flight, oldest
 *			first, at most 64)
 * @KCOLL_A_OP:		nest: OP_SEQ, OP_OPCODE, OP_ALGO, OP_PRIO, OP_BYTES,
 *			OP_AGE_MS, OP_TIMEOUT_MS, MISSING_RANKS
 * @KCOLL_A_OP_SEQ:	u64, collective sequence number on the communicator
 * @KCOLL_A_OP_OPCODE:	u8, enum kcoll_op
 * @KCOLL_A_OP_ALGO:	string, algorithm name ("ring", ...)
 * @KCOLL_A_OP_PRIO:	u8
 * @KCOLL_A_OP_BYTES:	u64, payload bytes of this rank's buffer
 * @KCOLL_A_OP_AGE_MS:	u64, since submission
 * @KCOLL_A_OP_TIMEOUT_MS: u32, 0 = none
 * @KCOLL_A_MISSING_RANKS: binary, __u32[]: ranks not yet heard from
 * @KCOLL_A_PEER_RANK:	u32
 * @KCOLL_A_ERRNO:	s32, a negative errno
 * @KCOLL_A_COMM_LAST_ERROR: nest: OP_SEQ, OP_OPCODE, ERRNO, MISSING_RANKS
 *			of the last failed operation
 * @KCOLL_A_STATS:	nest of STAT_*
 * @KCOLL_A_STAT_OPS:	u64, operations completed
 * @KCOLL_A_STAT_BYTES:	u64, payload bytes of completed operations
 * @KCOLL_A_STAT_ERRORS: u64, operations completed with an error
 * @KCOLL_A_STAT_TIMEOUTS: u64, of which timed out
 * @KCOLL_A_STAT_LAT_HIST: binary, __u64[KCOLL_NL_LAT_BUCKETS]
 * @KCOLL_A_STAT_INFLIGHT: u64, operations in flight (node-wide STATS only)
 * @KCOLL_A_STAT_CONTEXTS: u64, open /dev/kcoll files (node-wide only)
 * @KCOLL_A_STAT_COMMS:	u64, communicators (node-wide only)
 * @KCOLL_A_STAT_PROFILE: binary, __u64[] indexed by enum kcoll_nl_prof:
 *			where the time of the collectives (of the node, the
 *			device or the communicator) went, summed over those
 *			that completed without error (a newer module may
 *			append entries)
 * @KCOLL_A_TUNABLE:	nest: TUNABLE_NAME, TUNABLE_VALUE (dump replies)
 * @KCOLL_A_TUNABLE_NAME: string, as in /sys/class/misc/kcoll/ ("chunk_bytes";
 *			algorithm knobs as "algo/allreduce")
 * @KCOLL_A_TUNABLE_VALUE: string, the value as sysfs shows/accepts it
 * @KCOLL_A_PAD:	padding for 64-bit attributes
 * @KCOLL_A_COST_ALPHA_NS: u32, cost model: per message step (ns)
 * @KCOLL_A_COST_BETA_PS: u32, cost model: per byte on the wire (ps)
 * @KCOLL_A_COST_GAMMA_PS: u32, cost model: per byte reduced (ps)
 *			In DEV_GET: what this node advertises to a new
 *			communicator on the device (sysfs algo/, with beta
 *			from the port's rate and gamma measured at load
 *			where those are 0); in COMM_GET: the communicator's
 *			model, the largest of each over its ranks
 * @KCOLL_A_DEV_ENABLED: u8, 1 if new communicators may use the device and
 *			it accepts connections (the "devices" tunable lists
 *			it, or is "*"), else 0
 * @KCOLL_A_COMM_PARENT_UID: u64, the uid of the communicator this one was
 *			made from (split, shrink, grow), beside COMM_UID
 *			wherever that is sent, if there is one
 * @KCOLL_A_COMM_PARTIAL: u8, 1 in a dump's message for a communicator
 *			whose members and operations did not fit one (they
 *			are left out; COMM_GET of its COMM_ID has them)
 */
enum kcoll_nl_attr {
	KCOLL_A_UNSPEC,
	KCOLL_A_PAD,
	KCOLL_A_DEV_NAME,
	KCOLL_A_DEV_INDEX,
	KCOLL_A_DEV_NODE_GUID,
	KCOLL_A_DEV_PORT_STATE,
	KCOLL_A_DEV_COMMS,
	KCOLL_A_DEV,
	KCOLL_A_COMM_ID,
	KCOLL_A_COMM_UID,
	KCOLL_A_COMM_PID,
	KCOLL_A_RANK,
	KCOLL_A_NRANKS,
	KCOLL_A_COMM_STATE,
	KCOLL_A_COMM_INFLIGHT,
	KCOLL_A_COMM_MEMBERS,
	KCOLL_A_MEMBER,
	KCOLL_A_MEMBER_ADDR,
	KCOLL_A_MEMBER_PORT,
	KCOLL_A_MEMBER_LOCAL_INDEX,
	KCOLL_A_MEMBER_CONNECTED,
	KCOLL_A_COMM_OPS,
	KCOLL_A_OP,
	KCOLL_A_OP_SEQ,
	KCOLL_A_OP_OPCODE,
	KCOLL_A_OP_ALGO,
	KCOLL_A_OP_PRIO,
	KCOLL_A_OP_BYTES,
	KCOLL_A_OP_AGE_MS,
	KCOLL_A_OP_TIMEOUT_MS,
	KCOLL_A_MISSING_RANKS,
	KCOLL_A_PEER_RANK,
	KCOLL_A_ERRNO,
	KCOLL_A_COMM_LAST_ERROR,
	KCOLL_A_STATS,
	KCOLL_A_STAT_OPS,
	KCOLL_A_STAT_BYTES,
	KCOLL_A_STAT_ERRORS,
	KCOLL_A_STAT_TIMEOUTS,
	KCOLL_A_STAT_LAT_HIST,
	KCOLL_A_STAT_INFLIGHT,
	KCOLL_A_STAT_CONTEXTS,
	KCOLL_A_STAT_COMMS,
	KCOLL_A_TUNABLE,
	KCOLL_A_TUNABLE_NAME,
	KCOLL_A_TUNABLE_VALUE,
	KCOLL_A_COST_ALPHA_NS,
	KCOLL_A_COST_BETA_PS,
	KCOLL_A_COST_GAMMA_PS,
	KCOLL_A_DEV_ENABLED,
	KCOLL_A_COMM_PARENT_UID,
	KCOLL_A_STAT_PROFILE,
	KCOLL_A_COMM_PARTIAL,
	__KCOLL_A_MAX,
	KCOLL_A_MAX = __KCOLL_A_MAX - 1
};

/**
 * enum kcoll_nl_prof - the entries of KCOLL_A_STAT_PROFILE, as sysfs
 * stats/time_*: collectives timed, their phases, nanoseconds from
 * submission to completion, and its parts: queued (submitted to
 * started), per phase waiting (to its first byte moved) and moving (the
 * rest), landing (the CPU copying and reducing received data, within the
 * phases), signatures (last phase to the peers' SIGs), settling
 * (finished to completed). The parts add up to at most the total.
 */
enum kcoll_nl_prof {
	KCOLL_NL_PROF_OPS,
	KCOLL_NL_PROF_PHASES,
	KCOLL_NL_PROF_TOTAL_NS,
	KCOLL_NL_PROF_QUEUED_NS,
	KCOLL_NL_PROF_WAIT_NS,
	KCOLL_NL_PROF_MOVE_NS,
	KCOLL_NL_PROF_LAND_NS,
	KCOLL_NL_PROF_SIGS_NS,
	KCOLL_NL_PROF_SETTLE_NS,
	KCOLL_NL_PROF_NR
};

/* Longest tunable name and value (with the NUL) the kernel accepts. */
#define KCOLL_NL_TUNABLE_NAME_MAX	48
#define KCOLL_NL_TUNABLE_VALUE_MAX	64

#endif /* _UAPI_LINUX_KCOLL_NETLINK_H */
