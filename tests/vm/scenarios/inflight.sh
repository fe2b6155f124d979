#!/bin/bash
# Issue 21, item 5: DDP issues its gradient buckets as many non-blocking
# allreduces back to back. kcoll-perf (4 ranks on 2 VMs, 2 per VM) times
# N non-blocking allreduces of SIZE (default 1M) issued back to back, each on buffers of
# its own (-B N: the buckets; its iterations are issued first, then waited
# for), once per sysfs colls_in_flight value W, and, in the same boot, one
# allreduce of N x SIZE; interleaved for ROUNDS rounds. Buffers are
# registered once (-R 1). Rank 0's tables go to
# OUT/vm0/inflight-*.txt and the ratios to inflight.txt.
# Usage: tests/vm/vmrun.sh -k KVER -n 2 -o OUT -t 2400 \
#     -a "[N [ROUNDS [W/W/.. [SIZE]]]]" tests/vm/scenarios/inflight.sh
#     (default 25 3 4/1 1M; SIZE in bytes, or with K or M)
. "$kcoll_top/tests/vm/guest-lib.sh"

# shellcheck disable=SC2086
set -- $KCOLL_ARG
n=${1:-25}
rounds=${2:-3}
windows=${3:-4/1}
size=${4:-1M}
case $size in
*K) bytes=$((${size%K} * 1024)) ;;
*M) bytes=$((${size%M} * 1048576)) ;;
*) bytes=$size ;;
esac
kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
kcoll_peers_up
export KCOLL_NRANKS=4 KCOLL_BOOTSTRAP_TIMEOUT_MS=120000
export KCOLL_SECRET=6b636f6c6c2d696e666c696768742121
port=29700
for r in $(seq 1 "$rounds"); do
	for w in ${windows//\// }; do
		# Each VM's module decides for its own ranks.
		echo "$w" >/sys/class/misc/kcoll/colls_in_flight ||
			fail "colls_in_flight $w"
		vm_sync "r$r-w$w" 600
		port=$((port + 1))
		kcoll_kperf "inflight-small-$r-w$w" $port -M -c allreduce -b "$bytes" -e "$bytes" \
			-n "$n" -w 2 -C 1 -R 1 -B "$n"
	done
	echo 4 >/sys/class/misc/kcoll/colls_in_flight
	vm_sync "s$r" 900
	port=$((port + 1))
	kcoll_kperf "inflight-big-$r" $port -M -c allreduce -b $((n * bytes)) -e $((n * bytes)) -n 2 -w 1 -C 0 -R 1
done
vm_sync "end" 900
if [ "$kcoll_vm" = 0 ]; then
	python3 - "$KCOLL_OUT" "$n" "$rounds" "$windows" "$size" >"$KCOLL_OUT/inflight.txt" <<'PY'
import statistics, sys
out, n, rounds, windows, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split("/"), sys.argv[5]
def t(name):
    for line in open(f"{out}/{name}-rank0.txt"):
        f = line.split()
        if f and f[0].isdigit():
            if len(f) > 8 and f[8].isdigit() and f[8] != "0":
                raise SystemExit(f"{name}: {f[8]} wrong elements")
            return float(f[5])
    raise SystemExit(f"no figure in {name}")
ratios = {w: [] for w in windows}
for r in range(1, rounds + 1):
    big = t(f"inflight-big-{r}")
    line = [f"round {r}: one {n} x {size} {big / 1000:.1f} ms"]
    for w in windows:
        small = t(f"inflight-small-{r}-w{w}")
        ratios[w].append(small * n / big)
        line.append(f"{n} x {size}, colls_in_flight {w}: {small * n / 1000:.1f} ms, "
                    f"ratio {small * n / big:.2f}")
    print("; ".join(line))
for w in windows:
    print(f"colls_in_flight {w}: median ratio {statistics.median(ratios[w]):.2f} "
          f"({n} non-blocking {size} allreduces on their own buffers / one of {n} x {size})")
PY
	cat "$KCOLL_OUT/inflight.txt"
fi
kcoll_mod_unload
kcoll_finish
