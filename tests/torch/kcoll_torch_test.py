# SPDX-License-Identifier: MIT
"""One rank of the kcoll_torch test (tests/vm/scenarios/torch.sh runs it
on every rank; RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the
environment, init_method env://).

1. Every collective of the backend on every dtype kcoll has, against the
   answer each rank computes itself from the ranks' known inputs (integer
   values, exact in any order of summation) and, where Gloo has the same
   call, against Gloo on the same tensors. Tensors that are not contiguous,
   asynchronous Work objects, and the calls kcoll refuses (each must raise
   an error naming the call).
2. DDP: the same model, seeds and data trained N steps with "kcoll" and
   with "gloo": the parameters must agree to float32 reordering (see
   TOL_*), on the whole world and on a 3-rank subgroup. Step time and CPU
   time per step of both are printed ("perf" lines).
3. The world group again through tcp://, and each VM's ranks through a
   file store.
4. The last rank dies (exits) after a new 4-rank kcoll group is up: every
   other rank's next allreduce must raise within the group's timeout, with
   kcoll's report naming the dead rank. The survivors then shrink that
   group to themselves (kcoll_torch.shrink), run on it, and one of them
   revokes it (kcoll_torch.revoke): the others' waiting allreduce must
   raise at once, naming it.

Prints "ok - NAME" / "not ok - NAME: why" lines; exit status 0 only if
every check passed. The last rank exits 0 on purpose in part 4.
"""
import datetime
import gc
import os
import resource
import sys
import threading
import time

T0 = time.time()
import torch  # noqa: E402 (the import alone takes ~45 s under TCG)
import torch.distributed as dist  # noqa: E402

import kcoll_torch  # noqa: E402,F401 (registers "kcoll")

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
STEPS = int(os.environ.get("KCOLL_TORCH_STEPS", "20"))
ROUNDS = int(os.environ.get("KCOLL_TORCH_ROUNDS", "3"))
# DDP on float32: the two backends add the same four gradients in
# different orders (kcoll's schedule vs Gloo's ring), so one step's
# averaged gradient may differ by a few ulp; over STEPS plain SGD steps of
# lr 0.05 these stay far below 1e-5 relative. A wrong or missing reduction
# is off by whole units.
TOL_RTOL = 1e-4
TOL_ATOL = 1e-5
# The subgroup of part 2, which is also who survives part 4's death.
SUB = [0, 1, 2] if WORLD > 3 else list(range(WORLD))
failures = []


def report(name, ok, why=""):
    if ok:
        print(f"ok - {name}", flush=True)
    else:
        failures.append(name)
        print(f"not ok - {name}: {why}", flush=True)


def check(name, fn):
    try:
        fn()
        report(name, True)
    except Exception as e:  # report and go on with the other checks
        report(name, False, f"{type(e).__name__}: {e}")


def rank_data(r, n, dtype, salt=0, small=False):
    """Rank r's input: small integers, exact in every dtype and in every
    order of summation (and of product, with small=True: 1 or 2)."""
    v = (torch.arange(n, dtype=torch.int64) * 3 + r * 7 + salt) % 5 + 1
    if small or dtype in (torch.int8, torch.uint8):
        v = v % 2 + 1
    return v.to(dtype)


def expect_reduce(op, n, dtype, ranks=None, salt=0):
    ranks = list(range(WORLD)) if ranks is None else ranks
    xs = [rank_data(r, n, dtype, salt, small=op == "prod").to(torch.float64)
          for r in ranks]
    if op == "sum":
        out = sum(xs)
    elif op == "prod":
        out = xs[0].clone()
        for x in xs[1:]:
            out = out * x
    elif op == "min":
        out = torch.stack(xs).min(0).values
    elif op == "max":
        out = torch.stack(xs).max(0).values
    elif op == "avg":
        out = sum(xs) / len(ranks)
    return out.to(dtype)


def same(a, b, what):
    if not torch.equal(a, b):
        raise AssertionError(f"{what}: {a[:8].tolist()} != {b[:8].tolist()}")


OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}
if hasattr(dist.ReduceOp, "AVG"):
    OPS["avg"] = dist.ReduceOp.AVG
DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def part_collectives(gloo):
    n = 1000

    def allreduce_all():
        for dt in DTYPES:
            for name, op in OPS.items():
                if name == "avg" and dt not in FLOATS:
                    continue
                small = name == "prod"
                t = rank_data(RANK, n, dt, small=small)
                dist.all_reduce(t, op=op)
                same(t, expect_reduce(name, n, dt), f"{dt} {name}")
                if name != "avg" and dt not in (torch.bfloat16, torch.float16):
                    g = rank_data(RANK, n, dt, small=small)
                    dist.all_reduce(g, op=op, group=gloo)
                    same(t, g, f"{dt} {name} against gloo")
    check("all_reduce: every dtype and op, against the expected values and gloo",
          allreduce_all)

    def noncontig():
        base = rank_data(RANK, 64 * 32, torch.float32).view(64, 32)
        t = base.t()           # a view that is not contiguous
        assert not t.is_contiguous()
        dist.all_reduce(t)
        same(base.reshape(-1), expect_reduce("sum", 64 * 32, torch.float32),
             "transposed view")
        s = rank_data(RANK, 200, torch.float64)[::2]   # strided
        dist.all_reduce(s, op=dist.ReduceOp.MAX)
        same(s, expect_reduce("max", 200, torch.float64)[::2], "strided")
    check("all_reduce: tensors that are not contiguous", noncontig)

    def asyncwork():
        ts = [rank_data(RANK, 4096, torch.float32, salt=i) for i in range(8)]
        works = [dist.all_reduce(t, async_op=True) for t in ts]
        # is_completed() answers at once, done or not.
        t0 = time.time()
        for w in works:
            w.is_completed()
        assert time.time() - t0 < 1.0, "is_completed() blocked"
        for i, (w, t) in enumerate(zip(works, ts)):
            w.wait()
            assert w.is_completed()
            same(t, expect_reduce("sum", 4096, torch.float32, salt=i), f"work {i}")
        fut = dist.all_reduce(rank_data(RANK, 10, torch.int64),
                              async_op=True).get_future()
        got = fut.wait()
        same(got[0], expect_reduce("sum", 10, torch.int64), "future value")
    check("async: Work.wait, is_completed, get_future", asyncwork)

    def coalesced():
        ts = [rank_data(RANK, k * 10 + 1, torch.float32, salt=k) for k in range(5)]
        dist.all_reduce_coalesced(ts)
        for k, t in enumerate(ts):
            same(t, expect_reduce("sum", k * 10 + 1, torch.float32, salt=k), f"tensor {k}")
    check("all_reduce_coalesced", coalesced)

    def bcast():
        root = WORLD - 1
        for dt in DTYPES:
            t = rank_data(RANK, 333, dt)
            dist.broadcast(t, src=root)
            same(t, rank_data(root, 333, dt), f"{dt}")
        g = rank_data(RANK, 333, torch.float32)
        dist.broadcast(g, src=root, group=gloo)
        same(g, rank_data(root, 333, torch.float32), "gloo")
    check("broadcast from a non-zero root", bcast)

    def reduce():
        root = 1 % WORLD
        for dt in (torch.int32, torch.float32, torch.bfloat16):
            t = rank_data(RANK, 500, dt)
            dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
            if RANK == root:
                same(t, expect_reduce("sum", 500, dt), f"{dt}")
    check("reduce to rank 1", reduce)

    def allgather():
        for dt in (torch.int8, torch.int64, torch.float16, torch.float32):
            t = rank_data(RANK, 77, dt)
            outs = [torch.zeros(77, dtype=dt) for _ in range(WORLD)]
            dist.all_gather(outs, t)
            for r in range(WORLD):
                same(outs[r], rank_data(r, 77, dt), f"{dt} from rank {r}")
            big = torch.zeros(77 * WORLD, dtype=dt)
            dist._all_gather_base(big, t)
            same(big, torch.cat([rank_data(r, 77, dt) for r in range(WORLD)]),
                 f"{dt} into one tensor")
        g = [torch.zeros(77) for _ in range(WORLD)]
        dist.all_gather(g, rank_data(RANK, 77, torch.float32), group=gloo)
        for r in range(WORLD):
            same(g[r], rank_data(r, 77, torch.float32), "gloo")
    check("all_gather: list and into one tensor", allgather)

    def reducescatter():
        for dt in (torch.int32, torch.float32, torch.float64, torch.bfloat16):
            ins = [rank_data(RANK, 50, dt, salt=j) for j in range(WORLD)]
            out = torch.zeros(50, dtype=dt)
            dist.reduce_scatter(out, ins)
            same(out, expect_reduce("sum", 50, dt, salt=RANK), f"{dt} list")
            flat = torch.cat(ins)
            out2 = torch.zeros(50, dtype=dt)
            dist._reduce_scatter_base(out2, flat)
            same(out2, out, f"{dt} one tensor")
    check("reduce_scatter: list and one tensor", reducescatter)

    def alltoall():
        for dt in (torch.uint8, torch.int32, torch.float32):
            # Block j of rank r holds r*100 + j (mod 5 for uint8).
            ins = torch.cat([torch.full((6,), (RANK * 100 + j) % 250, dtype=dt)
                             for j in range(WORLD)])
            out = torch.zeros_like(ins)
            dist.all_to_all_single(out, ins)
            want = torch.cat([torch.full((6,), (r * 100 + RANK) % 250, dtype=dt)
                              for r in range(WORLD)])
            same(out, want, f"{dt} single")
            outs = [torch.zeros(6, dtype=dt) for _ in range(WORLD)]
            dist.all_to_all(outs, list(ins.chunk(WORLD)))
            same(torch.cat(outs), want, f"{dt} list")
        g = torch.zeros_like(ins)
        dist.all_to_all_single(g, ins, group=gloo)
        same(out, g, "gloo")
    check("all_to_all: single tensor and list", alltoall)

    def alltoallv():
        # Rank s sends rank d rows(s, d) rows of 4 (some none), each
        # saying where it came from: MoE's token routing.
        def rows(s, d):
            return (s * 3 + d * 5) % 4
        ins_n = [rows(RANK, d) for d in range(WORLD)]
        outs_n = [rows(s, RANK) for s in range(WORLD)]
        for dt in (torch.uint8, torch.int32, torch.float32, torch.bfloat16):
            ins = torch.cat([torch.full((ins_n[d], 4), (RANK * 100 + d) % 250,
                                        dtype=dt) for d in range(WORLD)])
            want = torch.cat([torch.full((outs_n[s], 4), (s * 100 + RANK) % 250,
                                         dtype=dt) for s in range(WORLD)])
            out = torch.zeros(sum(outs_n), 4, dtype=dt)
            dist.all_to_all_single(out, ins, outs_n, ins_n)
            same(out, want, f"{dt} single, split sizes {ins_n}")
            outs = [torch.zeros(outs_n[s], 4, dtype=dt) for s in range(WORLD)]
            dist.all_to_all(outs, list(ins.split(ins_n)))
            same(torch.cat(outs), want, f"{dt} list of different sizes")
            if dt == torch.float32:     # gloo has no bf16 alltoall
                g = torch.zeros_like(out)
                dist.all_to_all_single(g, ins, outs_n, ins_n, group=gloo)
                same(out, g, "gloo")
    check("all_to_all with split sizes (alltoallv)", alltoallv)

    def gather_scatter():
        root = WORLD - 1
        for dt in (torch.int8, torch.float32, torch.float64):
            t = rank_data(RANK, 33, dt)
            outs = [torch.zeros(33, dtype=dt) for _ in range(WORLD)] \
                if RANK == root else None
            dist.gather(t, outs, dst=root)
            if RANK == root:
                for r in range(WORLD):
                    same(outs[r], rank_data(r, 33, dt), f"gather {dt} from rank {r}")
            ins = [rank_data(root, 21, dt, salt=j) for j in range(WORLD)] \
                if RANK == root else None
            out = torch.zeros(21, dtype=dt)
            dist.scatter(out, ins, src=root)
            same(out, rank_data(root, 21, dt, salt=RANK), f"scatter {dt}")
        # Not contiguous: every other element of a longer tensor.
        nc = torch.zeros(42)[::2]
        ins = [rank_data(0, 21, torch.float32, salt=j) for j in range(WORLD)] \
            if RANK == 0 else None
        dist.scatter(nc, ins, src=0)
        same(nc, rank_data(0, 21, torch.float32, salt=RANK), "scatter into a strided tensor")
        g = [torch.zeros(33) for _ in range(WORLD)] if RANK == 0 else None
        dist.gather(rank_data(RANK, 33, torch.float32), g, dst=0, group=gloo)
        k = [torch.zeros(33) for _ in range(WORLD)] if RANK == 0 else None
        dist.gather(rank_data(RANK, 33, torch.float32), k, dst=0)
        if RANK == 0:
            for r in range(WORLD):
                same(k[r], g[r], f"gather against gloo, rank {r}")
    check("gather and scatter, against the expected values and gloo", gather_scatter)

    def sendrecv():
        nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
        t = rank_data(RANK, 1000, torch.float64)
        r = torch.zeros(1000, dtype=torch.float64)
        reqs = [dist.isend(t, nxt), dist.irecv(r, prv)]
        for q in reqs:
            q.wait()
        same(r, rank_data(prv, 1000, torch.float64), "ring")
        if RANK == 0:
            dist.send(torch.arange(5, dtype=torch.int32), WORLD - 1)
        elif RANK == WORLD - 1:
            x = torch.zeros(5, dtype=torch.int32)
            dist.recv(x, 0)
            same(x, torch.arange(5, dtype=torch.int32), "blocking")
    check("send/recv", sendrecv)

    check("barrier", lambda: dist.barrier())

    def refused():
        cases = [
            ("dtype", lambda: dist.all_reduce(torch.zeros(4, dtype=torch.bool))),
            ("ReduceOp", lambda: dist.all_reduce(torch.zeros(4, dtype=torch.int32),
                                                 op=dist.ReduceOp.BAND)),
            ("split sizes", lambda: dist.all_to_all_single(
                torch.zeros(WORLD + 1), torch.zeros(WORLD + 1),
                [3] + [1] * (WORLD - 1), [3] + [1] * (WORLD - 1))),
        ]
        if "avg" in OPS:    # torch's AVG is defined on floats only
            cases.append(("avg", lambda: dist.all_reduce(
                torch.zeros(4, dtype=torch.int32), op=dist.ReduceOp.AVG)))
        else:
            print("# SKIP the AVG-on-int32 case: this torch has no ReduceOp.AVG",
                  flush=True)
        for word, fn in cases:
            try:
                fn()
            except RuntimeError as e:
                if "kcoll" not in str(e) or word.lower() not in str(e).lower():
                    raise AssertionError(f"{word}: the error does not say so: {e}")
            else:
                raise AssertionError(f"{word}: no error")
        # Nothing was issued: the communicator is still in step.
        t = rank_data(RANK, 10, torch.int32)
        dist.all_reduce(t)
        same(t, expect_reduce("sum", 10, torch.int32), "after the refusals")
    check("unsupported calls raise an error naming them", refused)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def node_busy():
    """CPU seconds this node (VM) has spent busy, all processes and the
    kernel's threads (kcoll's work in kworkers and softirqs included)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def thread_cpu():
    """(this thread's CPU seconds, the other threads' of this process):
    the backend's own threads (kcoll's completion thread, Gloo's I/O
    threads) are the other ones; the steps run on this one."""
    tick = os.sysconf("SC_CLK_TCK")
    me = str(threading.get_native_id())
    mine = others = 0
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread has exited
            continue
        c = (int(st[11]) + int(st[12])) / tick  # utime + stime
        if t == me:
            mine += c
        else:
            others += c
    return mine, others


class Steps:
    """Per-step samples of one way of training, pooled over rounds."""

    def __init__(self):
        self.walls, self.cpus, self.node, self.main, self.other, self.n = [], [], 0.0, 0.0, 0.0, 0
        self.params = None

    @staticmethod
    def med(v):
        v = sorted(v)
        return v[len(v) // 2]


def train(group, ranks, into, ddp=True):
    """STEPS of SGD, through DDP on group (None: the default group) or,
    with ddp False, on this rank alone (no communication: the floor both
    backends share); samples go into @into (a Steps), the parameters of
    its first round too."""
    torch.manual_seed(1234)
    model = Net()
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(
            model, process_group=group, bucket_cap_mb=0.01)  # several buckets
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    me = ranks.index(RANK)
    gen = torch.Generator().manual_seed(99 + me)
    data = [(torch.randn(16, 32, generator=gen), torch.randn(16, 8, generator=gen))
            for _ in range(STEPS)]
    # The first step builds buckets: not timed.
    nb0, th0 = 0.0, (0.0, 0.0)
    for i, (x, y) in enumerate(data):
        if i == 1:
            nb0, th0 = node_busy(), thread_cpu()
        c0, w0 = time.process_time(), time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if i:
            into.walls.append(time.perf_counter() - w0)
            into.cpus.append(time.process_time() - c0)
    th1 = thread_cpu()
    into.node += node_busy() - nb0
    into.main += th1[0] - th0[0]
    into.other += th1[1] - th0[1]
    into.n += STEPS - 1
    if into.params is None:
        into.params = [p.detach().clone() for p in model.parameters()]


def params_agree(pa, pb):
    """Two trainings' parameters agree within TOL_*, or AssertionError."""
    for i, (a, b) in enumerate(zip(pa, pb)):
        if not torch.allclose(a, b, rtol=TOL_RTOL, atol=TOL_ATOL):
            raise AssertionError(
                f"parameter {i} differs by up to {(a - b).abs().max().item():.3g}")


def part_ddp(gloo, ranks, kc_group, gl_group, tag):
    """Returns Gloo's trained parameters (None if this rank is not in
    ranks or the check failed before training)."""
    if RANK not in ranks:
        return None
    ref = []

    def ddp():
        # Rounds interleave the three ways (A B C, B C A, C A B, ...) so
        # that the emulated machine's drift within the boot hits all alike.
        ways = {"local": Steps(), "kcoll": Steps(), "gloo": Steps()}
        order = list(ways)
        for r in range(ROUNDS):
            for name in order[r % 3:] + order[:r % 3]:
                if name == "local":
                    train(None, ranks, ways[name], ddp=False)
                else:
                    train(kc_group if name == "kcoll" else gl_group, ranks, ways[name])
        pk, pg = ways["kcoll"].params, ways["gloo"].params
        ref.append(pg)
        params_agree(pk, pg)
        for i, (a, b) in enumerate(zip(pk, ways["local"].params)):
            if torch.allclose(a, b, rtol=0, atol=0):
                raise AssertionError(f"parameter {i} equals this rank's local training: "
                                     "the gradients were not averaged")
        torch.manual_seed(1234)
        init = [p.detach() for p in Net().parameters()]
        moved = max((a - b).abs().max().item() for a, b in zip(pk, init))
        assert moved > 1e-3, "training did not move the parameters"
        lo, k, g = ways["local"], ways["kcoll"], ways["gloo"]
        wl, wk, wg = (Steps.med(w.walls) for w in (lo, k, g))
        cl, ck, cg = (Steps.med(w.cpus) for w in (lo, k, g))
        nl, nk, ng = (w.node / max(1, w.n) for w in (lo, k, g))

        def ratio(a, b):
            return a / b if b > 0 else float("nan")
        print(f"perf ddp {tag} rank {RANK}: {ROUNDS} rounds x {STEPS - 1} steps, medians; "
              f"step {wk * 1e3:.2f} ms kcoll, {wg * 1e3:.2f} ms gloo ({wk / wg:.2f}x), "
              f"{wl * 1e3:.2f} ms local; "
              f"cpu/step {ck * 1e3:.2f} ms kcoll, {cg * 1e3:.2f} ms gloo ({ck / cg:.2f}x), "
              f"{cl * 1e3:.2f} ms local; "
              f"above local {(ck - cl) * 1e3:.2f} ms kcoll, {(cg - cl) * 1e3:.2f} ms gloo "
              f"({ratio(ck - cl, cg - cl):.2f}x); "
              f"node cpu/step {nk * 1e3:.1f} ms kcoll, {ng * 1e3:.1f} ms gloo "
              f"({ratio(nk, ng):.2f}x), {nl * 1e3:.1f} ms local; "
              f"backend threads/step {k.other / max(1, k.n) * 1e3:.2f} ms kcoll, "
              f"{g.other / max(1, g.n) * 1e3:.2f} ms gloo", flush=True)
    check(f"DDP {tag}: {ROUNDS} rounds of {STEPS} steps with kcoll and gloo agree", ddp)
    return ref[0] if ref else None


def part_subgroup(kc, sub):
    """new_group() over the kcoll world makes its communicator from the
    world's (coll_comm_create_group(): no bootstrap): its parent is the
    world's communicator, and a second group of the same ranks is a
    communicator of its own. Every rank enters new_group(), as torch
    requires."""
    again = dist.new_group(sub, backend="kcoll")
    if RANK not in sub:
        return

    def derived():
        world, mine = kcoll_torch.comm_ids(), kcoll_torch.comm_ids(kc)
        assert world is not None and mine is not None, "not kcoll's groups"
        assert mine[1] == world[0], (
            f"group {mine[0]:#x} has parent {mine[1]:#x}, not the world's {world[0]:#x}")
        other = kcoll_torch.comm_ids(again)
        assert other[1] == world[0] and other[0] != mine[0], (
            f"the second group's ids {other}, the first's {mine}")
        t = rank_data(RANK, 100, torch.float32)
        dist.all_reduce(t, group=again)
        same(t, expect_reduce("sum", 100, torch.float32, ranks=sub),
             "allreduce on the second group")
        dist.destroy_process_group(again)
    check(f"new_group({sub}) is made from the kcoll world, not bootstrapped", derived)


def part_work_outlives_group(sub):
    """A Work the caller keeps past its group's end (w.wait(), then
    destroy_process_group(), the Work released later, as scripts do):
    releasing it touches nothing the group freed. Until 2026-12-06 its
    requests were freed by the Work's destructor, after the communicator
    had freed them; MALLOC_PERTURB_ (torch.sh) makes such a use after
    free crash instead of passing by luck. Every rank enters new_group()."""
    g = dist.new_group(sub, backend="kcoll")
    if RANK not in sub:
        return

    def outlive():
        nonlocal g
        t = rank_data(RANK, 100, torch.float32)
        w = dist.all_reduce(t, group=g, async_op=True)
        w.wait()
        same(t, expect_reduce("sum", 100, torch.float32, ranks=sub),
             "the kept Work's allreduce")
        dist.destroy_process_group(g)
        g = None
        gc.collect()
        del w
        gc.collect()
    check("a Work kept past its group's end is released safely", outlive)


def part_init_methods():
    """The same backend through the other init methods: tcp:// (the whole
    world), and a file store, which needs a file every rank sees: the
    ranks of each VM form a world of their own around a file in that VM's
    /tmp (the folder the VMs share is 9p, whose locks and caching do not
    serve torch's FileStore across guests). Then the whole world again
    through tcp:// for what follows."""
    host = os.environ["MASTER_ADDR"]
    port = int(os.environ["MASTER_PORT"])
    per = int(os.environ.get("KCOLL_TORCH_PER_VM", "0"))

    def world(url, rank, size):
        dist.destroy_process_group()
        dist.init_process_group("kcoll", init_method=url, rank=rank,
                                world_size=size,
                                timeout=datetime.timedelta(seconds=120))
        t = rank_data(RANK, 100, torch.float32)
        dist.all_reduce(t)
        base = RANK - rank
        same(t, expect_reduce("sum", 100, torch.float32,
                              ranks=list(range(base, base + size))), url)

    check('init_process_group("kcoll", tcp://)',
          lambda: world(f"tcp://{host}:{port + 1}", RANK, WORLD))
    if per > 1:
        check('init_process_group("kcoll", file://) (the ranks of one VM)',
              lambda: world("file:///tmp/kcoll-torch-filestore", RANK % per, per))
    check('init_process_group("kcoll", tcp://) again, for the rest',
          lambda: world(f"tcp://{host}:{port + 2}", RANK, WORLD))


def part_death(ref=None):
    """The last rank exits once a fresh kcoll group is up; the others'
    next allreduce must fail within the timeout, naming it."""
    tmo = 20
    g = dist.new_group(backend="kcoll", timeout=datetime.timedelta(seconds=tmo))
    victim = WORLD - 1
    t = torch.ones(1 << 16)
    dist.all_reduce(t, group=g)        # the group works before the death
    dist.barrier()                     # on the world group: all are past it
    if RANK == victim:
        print("ok - death: rank exits now", flush=True)
        sys.stdout.flush()
        os._exit(0)
    time.sleep(1)

    def dies():
        t0 = time.time()
        try:
            dist.all_reduce(t, group=g)
        except RuntimeError as e:
            el = time.time() - t0
            msg = str(e)
            print(f"# rank {RANK}: raised after {el:.1f} s: {msg}", flush=True)
            assert el < tmo + 15, f"raised only after {el:.1f} s"
            assert f"rank {victim}" in msg, f"the error does not name rank {victim}"
            r = kcoll_torch.report(g)
            assert r is not None and r["lost"] == [victim] and \
                r["reason"] in ("peer lost", "timeout") and r["text"] in msg, \
                f"kcoll_torch.report(): {r}"
            return
        raise AssertionError("the allreduce with a dead rank succeeded")
    check("death: the others raise within the timeout naming the dead rank", dies)
    part_recover(g, victim, ref)


def part_recover(g, victim, ref):
    """The survivors of part 4 go on without the dead rank: kcoll_torch's
    shrink() of the failed group by them alone (torch's new_group() would
    wait in the store for the dead rank too), the shrunk group's
    allreduce and DDP (against Gloo's training on the same ranks before
    the death, ref), then a revoke by one of them that fails the others'
    waiting allreduce at once."""
    survivors = [r for r in range(WORLD) if r != victim]
    s = None
    # Whom to leave out, as a job would learn it: the failure's report.
    r = kcoll_torch.report(g)
    dead = r["lost"] if r else [victim]

    def refused():
        # Argument errors are raised before anything else and do not count
        # as one of the group's shrinks (every rank skips them alike).
        for ex, why in (([RANK], "excludes itself"),
                        ([WORLD], "out of range"),
                        ([victim, victim], "listed twice")):
            try:
                kcoll_torch.shrink(ex, group=g)
            except RuntimeError as e:
                assert "coll_comm_shrink" in str(e) and why in str(e), str(e)
                continue
            raise AssertionError(f"shrink({ex}) succeeded")
    check("shrink: bad rank lists raise naming the call", refused)

    def shrink():
        nonlocal s
        t0 = time.time()
        s = kcoll_torch.shrink(dead, group=g,
                               timeout=datetime.timedelta(seconds=60))
        el = time.time() - t0
        print(f"# rank {RANK}: shrink took {el:.1f} s", flush=True)
        assert kcoll_torch.report(s) is None, "a new group reports a failure"
        assert dist.get_world_size(s) == len(survivors), dist.get_world_size(s)
        assert dist.get_rank(s) == survivors.index(RANK), dist.get_rank(s)
        assert dist.get_process_group_ranks(s) == survivors, \
            dist.get_process_group_ranks(s)
        uid, parent = kcoll_torch.comm_ids(s)
        assert parent == kcoll_torch.comm_ids(g)[0], \
            f"the shrunk group's parent is {parent:#x}, not the failed group"
        for salt in range(3):
            t = rank_data(RANK, 1 << 14, torch.float32, salt)
            dist.all_reduce(t, group=s)
            same(t, expect_reduce("sum", 1 << 14, torch.float32,
                                  ranks=survivors, salt=salt),
                 f"allreduce {salt} on the shrunk group")
        b = torch.full((7,), float(RANK)) if RANK == survivors[-1] else torch.zeros(7)
        dist.broadcast(b, src=survivors[-1], group=s)
        same(b, torch.full((7,), float(survivors[-1])), "broadcast on the shrunk group")
    check("shrink: the survivors make a group without the dead rank, and it works",
          shrink)
    if s is None:
        return

    def ddp():
        st = Steps()
        train(s, survivors, st)
        params_agree(st.params, ref)
    name = f"shrink: DDP on the shrunk group trains as Gloo did on ranks {SUB}"
    if ref and survivors == SUB:
        check(name, ddp)
    else:
        print(f"ok - {name} # SKIP " + ("the survivors are not the subgroup Gloo trained"
              if ref else "no Gloo training of the subgroup to compare with"), flush=True)

    def revoked():
        revoker = survivors[0]
        t = torch.ones(1 << 12)
        # Through the world's store (served by rank 0, the revoker): the
        # revoker lives until the others have raised, so that what they
        # see is its revoke, not its exit.
        store = dist.distributed_c10d._get_default_store()
        if RANK == revoker:
            time.sleep(3)
            kcoll_torch.revoke(s)
            t0 = time.time()
            try:
                dist.all_reduce(t, group=s)
            except RuntimeError as e:
                assert "canceled" in str(e).lower(), str(e)
                assert time.time() - t0 < 2, "the next allreduce did not fail at once"
            else:
                raise AssertionError("an allreduce after the revoke succeeded")
            while store.add("kcoll_revoke_seen", 0) < len(survivors) - 1:
                assert time.time() - t0 < 60, "the others did not raise within 60 s"
                time.sleep(0.2)
            return
        t0 = time.time()
        try:
            dist.all_reduce(t, group=s)     # waits for the revoker
        except RuntimeError as e:
            el = time.time() - t0
            msg = str(e)
            store.add("kcoll_revoke_seen", 1)
            print(f"# rank {RANK}: raised after {el:.1f} s: {msg}", flush=True)
            assert "canceled" in msg.lower(), "the error is not a cancellation"
            r = kcoll_torch.report(s)
            assert r and r["reason"] == "aborted" and r["peer"] == revoker and \
                r["lost"] == [], f"kcoll_torch.report(): {r}"
            # The group's timeout is 60 s: only the revoke ends it this soon.
            assert el < 3 + 10, f"raised only after {el:.1f} s"
            assert f"rank {revoker}" in msg, f"the error does not name rank {revoker}"
            return
        raise AssertionError("the allreduce on a revoked group succeeded")
    check("revoke: one survivor's revoke fails the others' waiting allreduce at once",
          revoked)


def main():
    torch.set_num_threads(1)
    t_import = time.time() - T0
    dist.init_process_group("kcoll", init_method="env://", rank=RANK,
                            world_size=WORLD,
                            timeout=datetime.timedelta(seconds=120))
    report("init_process_group(\"kcoll\", env://)",
           dist.get_backend() == "kcoll", dist.get_backend())
    gloo = dist.new_group(backend="gloo")
    print(f"# rank {RANK}: import {t_import:.0f} s, init {time.time() - T0 - t_import:.0f} s",
          flush=True)
    part_collectives(gloo)
    part_ddp(gloo, list(range(WORLD)), None, gloo, f"{WORLD} ranks")
    sub = SUB
    kc3 = dist.new_group(sub, backend="kcoll")
    gl3 = dist.new_group(sub, backend="gloo")
    part_subgroup(kc3, sub)
    part_work_outlives_group(sub)
    ref3 = part_ddp(gloo, sub, kc3, gl3, f"{len(sub)} ranks")
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"# rank {RANK}: {time.time() - T0:.0f} s so far, max rss {ru.ru_maxrss >> 10} MiB",
          flush=True)
    part_init_methods()
    if os.environ.get("KCOLL_TORCH_DEATH", "1") == "1" and WORLD > 2:
        part_death(ref3)
    print(f"# rank {RANK}: {len(failures)} failed: {failures}", flush=True)
    sys.stdout.flush()
    # The world group is failed (a rank is gone): leave without the
    # teardown barrier torch would try.
    os._exit(1 if failures else 0)


if __name__ == "__main__":
    main()
