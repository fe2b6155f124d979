# SPDX-License-Identifier: MIT
"""Requests of non-blocking collectives that outlive their communicator or
that the program tries to free or cancel in flight (mpi4py, any number of
ranks). Rank 0 issues each operation first and the others only after a
barrier on the world that rank 0 enters after the call under test, so the
operation is surely still in flight on rank 0 at that call.

  freed-comm  MPI_Comm_free lets pending operations complete normally
              (MPI 3.1, 6.4.3): a duplicate freed while its in-place
              Ireduce_scatter_block is pending; its result must still come.
              Open MPI 4.1's own non-blocking collectives crash here
              (SIGSEGV in libnbc's progress), so tests/vm/scenarios/
              mpi-preload.sh asks for it with the interposer only.
  refuse      Freeing or cancelling a non-blocking collective's request is
              erroneous (MPI 3.1, 5.12): Open MPI's own answer
              MPI_ERR_REQUEST, and the request must then still complete.

Expected results are computed on every rank from all ranks' known inputs.
Prints "inflight rank R: ok" per rank; exits non-zero on a wrong answer.
"""
import sys

import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
n = 1000
cases = sys.argv[1:] or ["refuse"]
bad = []


def data(r, salt):
    return ((np.arange(n * size, dtype=np.int64) * 3 + r * 7 + salt) % 5 + 1).astype(np.int32)


def refusal(call):
    try:
        call()
    except MPI.Exception as e:
        return e.Get_error_class()
    return MPI.SUCCESS


if "freed-comm" in cases:
    t = world.Dup()
    rs = data(rank, 23)
    if rank == 0:
        q = t.Ireduce_scatter_block(MPI.IN_PLACE, rs, op=MPI.SUM)
        t.Free()
        world.Barrier()
    else:
        world.Barrier()
        q = t.Ireduce_scatter_block(MPI.IN_PLACE, rs, op=MPI.SUM)
        t.Free()
    q.Wait()
    want = sum(data(r, 23) for r in range(size))[rank * n:(rank + 1) * n]
    if not np.array_equal(rs[:n], want):
        bad.append(f"freed-comm: {np.count_nonzero(rs[:n] != want)} of {n} "
                   "elements of the in-place reduce-scatter wrong")

if "refuse" in cases:
    t = world.Dup()
    if rank == 0:
        q = t.Ibarrier()
        said = (refusal(q.Free), refusal(q.Cancel))
        world.Barrier()
        if said != (MPI.ERR_REQUEST, MPI.ERR_REQUEST):
            bad.append(f"refuse: MPI_Request_free and MPI_Cancel of an Ibarrier "
                       f"in flight gave error classes {said}, not "
                       f"MPI_ERR_REQUEST ({MPI.ERR_REQUEST})")
    else:
        world.Barrier()
        q = t.Ibarrier()
    q.Wait()
    t.Barrier()
    t.Free()

for b in bad:
    print(f"FAIL rank {rank}: {b}", flush=True)
print(f"inflight rank {rank}: {'FAILED' if bad else 'ok'} ({' '.join(cases)})", flush=True)
sys.exit(1 if bad else 0)
