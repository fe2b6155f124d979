# SPDX-License-Identifier: MIT
"""kcoll as a torch.distributed backend.

    import kcoll_torch                      # registers backend "kcoll"
    torch.distributed.init_process_group("kcoll", init_method="env://", ...)

The communicator's unique id travels through the c10d store of the
process group (env://, tcp://, file://, or a store you pass), so every
init method torch has works. A group made by new_group() while the
default group is kcoll's is made from it by its members alone
(coll_comm_create_group(): no bootstrap; kcollctl shows the default
group's communicator as its parent). When a rank fails, the survivors
go on without it: shrink() makes a group of them alone (torch's own
new_group() would wait for every rank of the world in its store), and
revoke() fails every rank's operations on a group at once. See
docs/LIBCOLL.md, "Use from PyTorch".
"""
import torch.distributed as _dist

from . import _C

__all__ = ["BACKEND", "create_process_group", "comm_ids", "shrink",
           "revoke", "report"]

BACKEND = "kcoll"


def _kcoll_world():
    """The default group if it is kcoll's (a new group is then made from
    it), else None: while the default group itself is being made, or over
    another backend's world."""
    if not _dist.is_initialized():
        return None
    world = _dist.distributed_c10d._get_default_group()
    return world if _C.comm_ids(world) is not None else None


def create_process_group(store, rank, world_size, timeout):
    """The backend's creator: a kcoll communicator of world_size ranks,
    bootstrapped through store, or made from a kcoll world's communicator
    by the group's members; operations time out after timeout."""
    world = _kcoll_world()
    if world is not None:
        return _C.create_group(store, world, rank, world_size, timeout)
    return _C.create_process_group(store, rank, world_size, timeout)


def comm_ids(group=None):
    """(uid, parent uid) of a kcoll group's communicator (the default
    group if None), as kcollctl shows them; parent uid 0: bootstrapped.
    None for another backend's group."""
    if group is None:
        group = _dist.distributed_c10d._get_default_group()
    return _C.comm_ids(group)


def _group_or_world(group):
    return _dist.distributed_c10d._get_default_group() if group is None else group


def shrink(exclude, group=None, abort=True, timeout=None):
    """A new kcoll group of group's ranks less exclude (ranks of group),
    made by the other ranks alone (ncclCommShrink, ULFM's
    MPIX_Comm_shrink): every survivor calls it with the same ranks, in
    any order; the excluded ones take no part and may be dead. No store
    and no message on group, which may be broken; connecting is bounded
    by the module's connect timeout. Survivors keep their order.

    abort=True revokes group first (revoke()), so that what is still in
    flight on it fails on every rank; abort=False needs group idle.
    timeout (a datetime.timedelta) is the new group's operation timeout,
    group's own if None. The new group is torch.distributed's like any
    other (get_rank(), get_process_group_ranks(), collectives with
    group=, DDP's process_group=, destroy_process_group()). Every rank
    must make its shrink calls on a group in the same order."""
    group = _group_or_world(group)
    c10d = _dist.distributed_c10d
    if c10d._rank_not_in_group(group):
        raise RuntimeError("kcoll: shrink: this rank is not in the group")
    ex = [int(r) for r in exclude]
    ms = -1 if timeout is None else int(timeout.total_seconds() * 1000)
    pg = _C.shrink(group, ex, bool(abort), ms)
    # Global ranks of the survivors, in their order in the group.
    old = sorted(c10d._pg_group_ranks[group].items(), key=lambda kv: kv[1])
    members = [g for g, r in old if r not in ex]
    c10d._pg_map[pg] = (_dist.Backend(BACKEND), None)
    c10d._pg_names[pg] = f"kcoll_shrink_{_C.comm_ids(pg)[0]:016x}"
    c10d._pg_group_ranks[pg] = {g: r for r, g in enumerate(members)}
    return pg


def report(group=None):
    """Why the last failed operation of a kcoll group failed, as a dict,
    or None if none failed: "error" (-errno), "reason" ("timeout", "peer
    lost", "mismatch", "aborted", "error", "gpu stream"), "peer" (the
    rank the reason names: lost, mismatched, or the one that aborted or
    revoked; None if none), "seq", "elapsed_ms", "missing" (a timeout's
    ranks never heard from, at most 64 of "nmissing"), "lost" (the ranks
    this rank found gone: what to shrink() away), and "text", the line
    the exception carried."""
    return _C.report(_group_or_world(group))


def revoke(group=None):
    """Revoke a kcoll group (ncclCommRevoke, ULFM's MPIX_Comm_revoke):
    every operation in flight on it, and every later one, fails at once,
    here and on every other rank the module can still reach, whose
    errors name this rank. The group stays registered: shrink() it, or
    destroy_process_group() it."""
    _C.revoke(_group_or_world(group))


if BACKEND.upper() not in getattr(_dist.Backend, "_plugins", {}):
    _dist.Backend.register_backend(BACKEND, create_process_group)
