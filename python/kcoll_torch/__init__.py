# SPDX-License-Identifier: MIT
"""kcoll as a torch.distributed backend.

    import kcoll_torch                      # registers backend "kcoll"
    torch.distributed.init_process_group("kcoll", init_method="env://", ...)

The communicator's unique id travels through the c10d store of the
process group (env://, tcp://, file://, or a store you pass), so every
init method torch has works. See docs/LIBCOLL.md, "Use from PyTorch".
"""
import torch.distributed as _dist

from . import _C

__all__ = ["BACKEND", "create_process_group"]

BACKEND = "kcoll"


def create_process_group(store, rank, world_size, timeout):
    """The backend's creator: a kcoll communicator of world_size ranks,
    bootstrapped through store; operations time out after timeout."""
    return _C.create_process_group(store, rank, world_size, timeout)


if BACKEND.upper() not in getattr(_dist.Backend, "_plugins", {}):
    _dist.Backend.register_backend(BACKEND, create_process_group)
