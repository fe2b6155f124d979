# SPDX-License-Identifier: MIT
"""An ordinary mpi4py program (it knows nothing of kcoll): collectives on
MPI_COMM_WORLD, a duplicate, a split and a group of it (the even ranks,
MPI_Comm_create_group), over several numpy dtypes,
in place and not, and some calls kcoll's interposer leaves to MPI (a
user-defined reduction, MPI_Gather, different send and receive types).
Each rank prints one digest line of everything it received, so a run
with LD_PRELOAD=libkcoll-mpi.so and one without can be compared line for
line (tests/vm/scenarios/mpi-preload.sh). The data are small integers:
every order of summation gives the same bits.
"""
import hashlib
import os
import sys

import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
h = hashlib.sha256()
n = 1000


def data(r, dt, salt=0, k=n):
    return ((np.arange(k, dtype=np.int64) * 3 + r * 7 + salt) % 5 + 1).astype(dt)


TAGS = os.environ.get("KCOLL_TEST_TAGS") == "1"


def take(tag, arr):
    b = np.ascontiguousarray(arr).tobytes()
    h.update(tag.encode())
    h.update(b)
    if TAGS:
        print(f"tag rank {rank} {tag}: {hashlib.sha256(b).hexdigest()[:16]}", flush=True)


def run(comm, name):
    r, s = comm.Get_rank(), comm.Get_size()
    for dt in (np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64,
               np.float32, np.float64):
        for oname, op in (("sum", MPI.SUM), ("min", MPI.MIN),
                          ("max", MPI.MAX), ("prod", MPI.PROD)):
            src = data(r, dt) % 2 + 1 if op == MPI.PROD else data(r, dt)
            out = np.zeros_like(src)
            comm.Allreduce(src, out, op=op)
            take(f"{name} allreduce {dt.__name__} {oname}", out)
        inpl = data(r, dt)
        comm.Allreduce(MPI.IN_PLACE, inpl, op=MPI.SUM)
        take(f"{name} allreduce in place {dt.__name__}", inpl)
        red = np.zeros(n, dtype=dt)
        comm.Reduce(data(r, dt), red, op=MPI.MAX, root=s - 1)
        if r == s - 1:
            take(f"{name} reduce {dt.__name__}", red)
        b = data(r, dt, 1)
        comm.Bcast(b, root=s // 2)
        take(f"{name} bcast {dt.__name__}", b)
        ag = np.zeros(n * s, dtype=dt)
        comm.Allgather(data(r, dt, 2), ag)
        take(f"{name} allgather {dt.__name__}", ag)
        agi = np.zeros(n * s, dtype=dt)
        agi[r * n:(r + 1) * n] = data(r, dt, 3)
        comm.Allgather(MPI.IN_PLACE, agi)
        take(f"{name} allgather in place {dt.__name__}", agi)
        rs = np.zeros(n, dtype=dt)
        comm.Reduce_scatter_block(data(r, dt, 4, n * s), rs, op=MPI.SUM)
        take(f"{name} reduce_scatter_block {dt.__name__}", rs)
        rsi = data(r, dt, 5, n * s)
        comm.Reduce_scatter_block(MPI.IN_PLACE, rsi, op=MPI.SUM)
        take(f"{name} reduce_scatter_block in place {dt.__name__}", rsi[:n])
        a2a = np.zeros(n * s, dtype=dt)
        comm.Alltoall(data(r, dt, 6, n * s), a2a)
        take(f"{name} alltoall {dt.__name__}", a2a)
        # Gather and scatter move bytes whatever the type: two suffice.
        if dt not in (np.int8, np.float64):
            continue
        root = (s - 1) // 2
        ga = np.zeros(n * s, dtype=dt) if r == root else None
        comm.Gather(data(r, dt, 13), ga, root=root)
        if r == root:
            take(f"{name} gather {dt.__name__}", ga)
            gi = np.zeros(n * s, dtype=dt)
            gi[r * n:(r + 1) * n] = data(r, dt, 14)
            comm.Gather(MPI.IN_PLACE, gi, root=root)
            take(f"{name} gather in place {dt.__name__}", gi)
        else:
            comm.Gather(data(r, dt, 14), None, root=root)
        sc = np.zeros(n, dtype=dt)
        comm.Scatter(data(r, dt, 15, n * s) if r == root else None, sc,
                     root=root)
        take(f"{name} scatter {dt.__name__}", sc)
        if r == root:
            si = data(r, dt, 16, n * s)
            comm.Scatter(si, MPI.IN_PLACE, root=root)
            take(f"{name} scatter in place {dt.__name__}", si)
        else:
            so = np.zeros(n, dtype=dt)
            comm.Scatter(None, so, root=root)
            take(f"{name} scatter in place {dt.__name__}", so)
    # The v-variants: counts per rank (some 0), displacements that put
    # the blocks in reverse order with a gap after each.
    for dt in (np.int32, np.float64):
        cnt = [(q * 3 + 1) % 4 * 50 for q in range(s)]
        disp, at = [0] * s, 0
        for q in reversed(range(s)):
            disp[q], at = at, at + cnt[q] + 7
        agv = np.zeros(at, dtype=dt)
        comm.Allgatherv(data(r, dt, 30, cnt[r]), [agv, (cnt, disp)])
        take(f"{name} allgatherv {dt.__name__}", agv)
        agvi = np.zeros(at, dtype=dt)
        agvi[disp[r]:disp[r] + cnt[r]] = data(r, dt, 31, cnt[r])
        comm.Allgatherv(MPI.IN_PLACE, [agvi, (cnt, disp)])
        take(f"{name} allgatherv in place {dt.__name__}", agvi)
        rsv = np.zeros(cnt[r], dtype=dt)
        comm.Reduce_scatter(data(r, dt, 32, sum(cnt)), rsv, recvcounts=cnt,
                            op=MPI.SUM)
        take(f"{name} reduce_scatter {dt.__name__}", rsv)
        rsvi = data(r, dt, 33, sum(cnt))
        comm.Reduce_scatter(MPI.IN_PLACE, rsvi, recvcounts=cnt, op=MPI.SUM)
        take(f"{name} reduce_scatter in place {dt.__name__}", rsvi[:cnt[r]])
        sc = [(r * 3 + q * 5) % 4 * 37 for q in range(s)]
        rc = [(q * 3 + r * 5) % 4 * 37 for q in range(s)]
        sd = list(np.cumsum([0] + sc[:-1]))
        rd = list(np.cumsum([0] + rc[:-1]))
        a2av = np.zeros(sum(rc), dtype=dt)
        comm.Alltoallv([data(r, dt, 34, sum(sc)), (sc, sd)], [a2av, (rc, rd)])
        take(f"{name} alltoallv {dt.__name__}", a2av)
        ia = np.zeros(sum(rc), dtype=dt)
        ib = np.zeros(at, dtype=dt)
        isnd = [data(r, dt, 35, sum(sc)), data(r, dt, 36, cnt[r])]
        MPI.Request.Waitall([comm.Ialltoallv([isnd[0], (sc, sd)], [ia, (rc, rd)]),
                             comm.Iallgatherv(isnd[1], [ib, (cnt, disp)])])
        take(f"{name} ialltoallv {dt.__name__}", ia)
        take(f"{name} iallgatherv {dt.__name__}", ib)
    comm.Barrier()
    # Non-blocking forms, completed by Wait, Waitall, Test, Waitany over
    # a mix with a request MPI keeps (an Iallgather of mixed types). Every buffer stays
    # referenced until its request completed, as MPI requires (a
    # temporary freed at once would be read by the operation after free:
    # Open MPI copies small sends at the call and hides that, kcoll reads
    # them when the data is needed).
    dt = np.int32
    a = np.zeros(n, dtype=dt)
    sa = data(r, dt)
    q = comm.Iallreduce(sa, a, op=MPI.SUM)
    q.Wait()
    take(f"{name} iallreduce", a)
    b = data(r, dt, 7)
    c = np.zeros(n * s, dtype=dt)
    d = np.zeros(n, dtype=dt)
    e = np.zeros(n * s, dtype=dt)
    f = np.zeros(n, dtype=dt)
    ig = np.zeros(n * s, dtype=dt) if r == s - 1 else None
    isc = np.zeros(n, dtype=dt)
    sends = [data(r, dt, 8), data(r, dt, 9, n * s), data(r, dt, 10, n * s),
             data(r, dt, 11), data(r, dt, 17), data(r, dt, 18, n * s)]
    qs = [comm.Ibcast(b, root=0), comm.Iallgather(sends[0], c),
          comm.Ireduce_scatter_block(sends[1], d, op=MPI.MAX),
          comm.Ialltoall(sends[2], e),
          comm.Ireduce(sends[3], f, op=MPI.MIN, root=0),
          comm.Igather(sends[4], ig, root=s - 1),
          comm.Iscatter(sends[5] if r == s - 1 else None, isc, root=s - 1)]
    MPI.Request.Waitall(qs)
    for tag, arr in (("ibcast", b), ("iallgather", c), ("ireduce_scatter_block", d),
                     ("ialltoall", e), ("iscatter", isc)):
        take(f"{name} {tag}", arr)
    if r == 0:
        take(f"{name} ireduce", f)
    if r == s - 1:
        take(f"{name} igather", ig)
    q = comm.Ibarrier()
    while not q.Test():
        pass
    g = np.zeros(4 * n * s, dtype=np.uint8)
    sg = data(r, dt, 12)
    mixed = [comm.Iallreduce(MPI.IN_PLACE, a, op=MPI.MAX),
             comm.Iallgather([sg, MPI.INT], [g, MPI.BYTE])]
    while True:
        i = MPI.Request.Waitany(mixed)
        if i == MPI.UNDEFINED:
            break
    take(f"{name} waitany", a)
    take(f"{name} iallgather int->byte", g)
    # Left to MPI: a user-defined op, an allgather of mixed types.
    mine = MPI.Op.Create(lambda a, b, t: np.maximum(
        np.frombuffer(a, dtype=np.int32), np.frombuffer(b, dtype=np.int32),
        out=np.frombuffer(b, dtype=np.int32)), commute=True)
    u = np.zeros(n, dtype=np.int32)
    comm.Allreduce(data(r, np.int32), u, op=mine)
    mine.Free()
    take(f"{name} user op", u)
    # A root whose own pair differs: bytes (the same layout), then a
    # derived type (converted by MPI on the root).
    g = np.zeros(4 * n * s, dtype=np.uint8) if r == 0 else None
    comm.Gather([data(r, np.int32), MPI.INT], [g, MPI.BYTE] if r == 0 else None,
                root=0)
    if r == 0:
        take(f"{name} gather int->byte", g)
    blk = MPI.INT.Create_contiguous(n).Commit()
    g = np.zeros(n * s, dtype=np.int32) if r == 0 else None
    comm.Gather([data(r, np.int32, 19), MPI.INT], [g, blk] if r == 0 else None,
                root=0)
    if r == 0:
        take(f"{name} gather into a derived type", g)
    # In place at a root whose type is derived, the others' predefined.
    if r == 0:
        g = np.zeros(n * s, dtype=np.int32)
        g[:n] = data(r, np.int32, 21)
        comm.Gather(MPI.IN_PLACE, [g, blk], root=0)
        take(f"{name} gather in place into a derived type", g)
    else:
        comm.Gather([data(r, np.int32, 21), MPI.INT], None, root=0)
    x = np.zeros(n, dtype=np.int32)
    comm.Scatter([data(r, np.int32, 20, n * s), blk] if r == s - 1 else None,
                 [x, MPI.INT], root=s - 1)
    take(f"{name} scatter from a derived type", x)
    blk.Free()
    mix = np.zeros(4 * n * s, dtype=np.uint8)
    comm.Allgather([data(r, np.int32), MPI.INT], [mix, MPI.BYTE])
    take(f"{name} allgather int->byte", mix)
    # The pickle-based forms ride on the same calls.
    take(f"{name} allreduce object", np.array(comm.allreduce(r + 1)))
    take(f"{name} bcast object", np.frombuffer(
        repr(comm.bcast({"from": 0, "v": list(range(5))}, root=0)).encode(), np.uint8))


run(world, "world")
dup = world.Dup()
run(dup, "dup")
half = world.Split(color=rank % 2, key=-rank)
run(half, "split")
# Collective over the even ranks alone (MPI_Comm_create_group).
evens = world.Get_group().Incl(list(range(0, size, 2)))
if rank % 2 == 0:
    ev = world.Create_group(evens)
    run(ev, "create_group")
    ev.Free()
evens.Free()
half.Free()
dup.Free()
print(f"digest rank {rank}: {h.hexdigest()}", flush=True)
sys.exit(0)
