#!/bin/bash
# Issue 21, item 5, measured as it stands: DDP issues its gradient buckets
# as many non-blocking allreduces back to back. kcoll-perf (4 ranks on 2
# VMs, 2 per VM) times N non-blocking 1 MiB allreduces issued back to back
# (its iterations are issued first, then waited for) and, in the same
# boot, one allreduce of N MiB, alternately for ROUNDS rounds; rank 0's
# tables go to OUT/vm0/inflight-*.txt and the ratio to inflight.txt.
# Usage: tests/vm/vmrun.sh -k KVER -n 2 -o OUT -t 2400 \
#     -a "[N [ROUNDS]]" tests/vm/scenarios/inflight.sh   (default 25 3)
. "$kcoll_top/tests/vm/guest-lib.sh"

# shellcheck disable=SC2086
set -- $KCOLL_ARG
n=${1:-25}
rounds=${2:-3}
kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
kcoll_peers_up
export KCOLL_NRANKS=4 KCOLL_BOOTSTRAP_TIMEOUT_MS=120000
export KCOLL_SECRET=6b636f6c6c2d696e666c696768742121
port=29700
for r in $(seq 1 "$rounds"); do
	vm_sync "r$r" 600
	port=$((port + 1))
	kcoll_kperf "inflight-small-$r" $port -M -c allreduce -b 1M -e 1M -n "$n" -w 2 -C 0 -R 1
	vm_sync "s$r" 900
	port=$((port + 1))
	kcoll_kperf "inflight-big-$r" $port -M -c allreduce -b "${n}M" -e "${n}M" -n 2 -w 1 -C 0 -R 1
done
vm_sync "end" 900
if [ "$kcoll_vm" = 0 ]; then
	python3 - "$KCOLL_OUT" "$n" "$rounds" >"$KCOLL_OUT/inflight.txt" <<'PY'
import statistics, sys
out, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def t(name):
    for line in open(f"{out}/{name}-rank0.txt"):
        f = line.split()
        if f and f[0].isdigit():
            return float(f[5])
    raise SystemExit(f"no figure in {name}")
rows = []
for r in range(1, rounds + 1):
    small, big = t(f"inflight-small-{r}"), t(f"inflight-big-{r}")
    rows.append((small * n, big, small * n / big))
    print(f"round {r}: {n} x 1 MiB back to back {small * n / 1000:.1f} ms, "
          f"one {n} MiB {big / 1000:.1f} ms, ratio {small * n / big:.2f}")
print(f"median ratio {statistics.median(x[2] for x in rows):.2f} "
      f"({n} non-blocking 1 MiB allreduces / one {n} MiB allreduce)")
PY
	cat "$KCOLL_OUT/inflight.txt"
fi
kcoll_mod_unload
kcoll_finish
