# SPDX-License-Identifier: MIT
"""kcoll-overlap: what communication costs the computation running beside
it, measured the way the seeds state it (compute slowdown while a stream
of allreduces runs alongside, against compute alone).

Every rank runs, each phase for SECONDS:
  1. compute alone: a fixed-size dense fp32 matrix multiply (N x N, one
     thread), timed per iteration;
  2. communication alone: back-to-back allreduces of SIZE bytes (fp32 sum);
  3. both at once: the multiply in one thread, the allreduces in another.
It prints, per rank, the compute rate alone and together (slowdown =
1 - together/alone) and the communication throughput alone and together,
as one "overlap" line per backend and round.

Backends (ROUNDS rounds, the backends of one process interleaved):
  --torch              torch.distributed with "kcoll" (the default group)
                       and "gloo" (a group of the same ranks) in one
                       process (env:// rendezvous: RANK, WORLD_SIZE,
                       MASTER_ADDR, MASTER_PORT), the compute a torch.mm
  --mpi                mpi4py's COMM_WORLD (Open MPI over whatever
                       transport mpirun chose; kcoll through it with
                       LD_PRELOAD=libkcoll-mpi.so), the compute numpy's
                       matmul; the allreduces stay in the main thread (an
                       MPI_THREAD_SINGLE/FUNNELED program)

Usage: python3 tools/kcoll-overlap.py (--torch | --mpi) [-s SECONDS]
           [-n N] [-b SIZE_BYTES] [-r ROUNDS]
"""
import argparse
import os
import threading
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--torch", action="store_true")
    g.add_argument("--mpi", action="store_true")
    p.add_argument("-s", "--seconds", type=float, default=10.0)
    p.add_argument("-n", "--matrix", type=int, default=256)
    p.add_argument("-b", "--bytes", type=int, default=16 << 20)
    p.add_argument("-r", "--rounds", type=int, default=3)
    return p.parse_args()


class Backend:
    """mm(): one multiply; allreduce(): one allreduce of the buffer;
    barrier(); rank, size; gather(x) -> list of x from every rank at 0."""


def torch_backends():
    """kcoll (the default group) and Gloo (a group over the same ranks),
    in one process: torch's import costs a minute under TCG."""
    import datetime

    import torch
    import torch.distributed as dist
    import kcoll_torch  # noqa: F401 (registers the backend)
    torch.set_num_threads(1)
    dist.init_process_group("kcoll", init_method="env://",
                            timeout=datetime.timedelta(minutes=10))
    groups = {"kcoll": None, "gloo": dist.new_group(backend="gloo")}
    a = torch.randn(ARGS.matrix, ARGS.matrix)
    buf = torch.ones(ARGS.bytes // 4)
    out = []
    for name, g in groups.items():
        b = Backend()
        b.rank, b.size = dist.get_rank(), dist.get_world_size()
        b.name = f"torch/{name}"
        b.mm = lambda: torch.mm(a, a)
        b.allreduce = (lambda g=g: dist.all_reduce(buf, group=g))
        b.barrier = (lambda g=g: dist.barrier(group=g))

        def gather(x, g=g, b=b):
            t = torch.tensor(x, dtype=torch.float64)
            lst = [torch.zeros_like(t) for _ in range(b.size)]
            dist.all_gather(lst, t, group=g)
            return [o.item() for o in lst]
        b.gather = gather
        b.finish = lambda: None
        out.append(b)
    return out


def mpi_backend():
    import mpi4py
    mpi4py.rc.thread_level = "funneled"
    if os.environ.get("KCOLL_OVERLAP_THREAD_SINGLE"):
        # The test VMs' CPUs lack cmpxchg16b, which Open MPI's threaded
        # path needs (tests/mpi/vm-site/sitecustomize.py); the allreduces
        # stay in the main thread either way.
        mpi4py.rc.thread_level = "single"
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    b = Backend()
    b.rank, b.size = comm.Get_rank(), comm.Get_size()
    b.name = "mpi" + ("+kcoll" if "kcoll-mpi" in os.environ.get("LD_PRELOAD", "") else "")
    a = np.random.default_rng(1).standard_normal((ARGS.matrix, ARGS.matrix),
                                                 dtype=np.float32)
    src = np.ones(ARGS.bytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    b.mm = lambda: a @ a
    b.allreduce = lambda: comm.Allreduce(src, dst, op=MPI.SUM)
    b.barrier = comm.Barrier
    b.gather = lambda x: comm.allgather(x)
    b.finish = MPI.Finalize
    return [b]


def compute_loop(b, stop, out):
    n, times = 0, []
    c0 = time.thread_time()
    while not stop.is_set():
        t0 = time.perf_counter()
        b.mm()
        times.append(time.perf_counter() - t0)
        n += 1
    out["iters"] = n
    out["times"] = times
    out["cpu"] = time.thread_time() - c0


def node_cpu():
    """The node's CPU time so far by kind (/proc/stat, clock ticks): user
    (with nice), system, irq + softirq (the NIC's packets, rxe's work),
    idle (with iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return {"user": v[0] + v[1], "system": v[2], "irq": v[5] + v[6],
            "idle": v[3] + v[4], "steal": v[7]}


def cpu_split(a, b):
    """Shares of the node's CPU between two node_cpu() snapshots."""
    d = {k: b[k] - a[k] for k in a}
    tot = sum(d.values()) or 1
    return " ".join(f"{k} {100 * d[k] / tot:.0f}%" for k in
                    ("user", "system", "irq", "idle"))


def agree_count(b, n):
    """Every rank runs the largest count any rank reached: the allreduce
    loop must end on the same iteration everywhere."""
    return int(max(c for c in b.gather(float(n))))


def one_round(b, secs):
    # 1. Compute alone.
    b.barrier()
    stop, alone = threading.Event(), {}
    th = threading.Thread(target=compute_loop, args=(b, stop, alone))
    th.start()
    time.sleep(secs)
    stop.set()
    th.join()
    b.barrier()

    # 2. Communication alone: the count every rank can run in SECONDS
    # (counts must match on every rank).
    b.allreduce()
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < secs:
        b.allreduce()
        n += 1
    n = agree_count(b, n)
    b.barrier()
    s0 = node_cpu()
    t0 = time.perf_counter()
    for _ in range(n):
        b.allreduce()
    comm_alone = n * ARGS.bytes / (time.perf_counter() - t0)
    split_alone = cpu_split(s0, node_cpu())
    b.barrier()

    # 3. Both: the same count of allreduces in the main thread, the
    # multiply beside it until they are done.
    stop, both = threading.Event(), {}
    th = threading.Thread(target=compute_loop, args=(b, stop, both))
    s0 = node_cpu()
    th.start()
    t0 = time.perf_counter()
    for _ in range(n):
        b.allreduce()
    t_comm = time.perf_counter() - t0
    stop.set()
    th.join()
    split_both = cpu_split(s0, node_cpu())
    b.barrier()
    comm_both = n * ARGS.bytes / t_comm
    rate_alone = alone["iters"] / sum(alone["times"]) if alone["times"] else 0
    rate_both = both["iters"] / t_comm
    slow = 1 - rate_both / rate_alone if rate_alone else 0
    # Where the node's CPU went: the multiply's own thread, and the kinds
    # of the node's time (a VM of one vCPU: user is the multiply and the
    # backends' threads, system and irq the kernel's side: the module,
    # TCP, rxe).
    where = (f"cpu: multiply thread {100 * both['cpu'] / t_comm:.0f}% of the "
             f"wall beside (alone {100 * alone['cpu'] / secs:.0f}%); node "
             f"beside: {split_both}; node, allreduces alone: {split_alone}")
    return rate_alone, rate_both, slow, n, comm_alone, comm_both, where


def main():
    global ARGS
    ARGS = parse()
    bs = torch_backends() if ARGS.torch else mpi_backend()
    # Rounds interleave the backends (A, B, A, B ...): the emulated
    # link's drift within a boot hits both alike.
    for rnd in range(ARGS.rounds):
        for b in bs:
            ra, rb, slow, n, ca, cb, where = one_round(b, ARGS.seconds)
            print(f"overlap {b.name} round {rnd} rank {b.rank}/{b.size}: "
                  f"compute {ra:.1f} it/s alone, {rb:.1f} it/s beside the allreduces "
                  f"(slowdown {slow * 100:.1f} %); allreduce {ARGS.bytes >> 20} MiB x {n}: "
                  f"{ca / 1e6:.3f} MB/s alone, {cb / 1e6:.3f} MB/s beside the compute "
                  f"({cb / ca:.2f}x)", flush=True)
            print(f"where {b.name} round {rnd} rank {b.rank}: {where}", flush=True)
    bs[0].finish()
    os._exit(0)


if __name__ == "__main__":
    main()
