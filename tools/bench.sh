#!/bin/bash
# make bench: boot one VM per installed kernel and run the ring benchmark,
# then two VMs of the first kernel for the priority benchmark
# (kcoll-priobench: priorities, then FIFO, in one boot).
# Figures are emulated (TCG): only the ratios within one run mean anything.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
rc=0
for d in /lib/modules/*/build; do
	[ -d "$d" ] || continue
	kver=$(basename "$(dirname "$d")")
	out=$top/build/bench/$kver
	echo "== $kver"
	"$top/tests/vm/vmrun.sh" -k "$kver" -n 1 -o "$out" -t 600 -a "${BENCH_ARGS:--t 2}" \
		"$top/tests/vm/scenarios/bench.sh" || rc=1
	cat "$out/vm0/ringbench.txt" 2>/dev/null
done
first=$(basename "$(dirname "$(ls -d /lib/modules/*/build | head -1)")")
echo "== priorities ($first, 2 VMs)"
"$top/tests/vm/vmrun.sh" -k "$first" -n 2 -o "$top/build/bench/prio" -t 1200 \
	-a "2 prio" "$top/tests/vm/scenarios/coll.sh" || rc=1
for m in 1 0; do
	sed "s/^/prio_sched=$m: /" "$top/build/bench/prio/vm0/prio$m-rank0.log" 2>/dev/null
done
exit $rc
