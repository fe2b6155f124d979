#!/bin/bash
# make bench: boot one VM per installed kernel and run the ring benchmark.
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
exit $rc
