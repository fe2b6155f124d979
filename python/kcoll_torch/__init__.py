# SPDX-License-Identifier: MIT
"""kcoll as a torch.distributed backend.

    import kcoll_torch                      # registers backend "kcoll"
    torch.distributed.init_process_group("kcoll", init_method="env://", ...)

The communicator's unique id travels through the c10d store of the
process group (env://, tcp://, file://, or a store you pass), so every
init method torch has works. A group made by new_group() while the
default group is kcoll's is made from it by its members alone
(coll_comm_create_group(): no bootstrap; kcollctl shows the default
group's communicator as its parent). See docs/LIBCOLL.md, "Use from
PyTorch".
"""
import torch.distributed as _dist

from . import _C

__all__ = ["BACKEND", "create_process_group", "comm_ids"]

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


if BACKEND.upper() not in getattr(_dist.Backend, "_plugins", {}):
    _dist.Backend.register_backend(BACKEND, create_process_group)
