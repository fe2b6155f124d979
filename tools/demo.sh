#!/bin/bash
# make demo: from a fresh Debian 12 machine (root) to collectives running in
# a virtual cluster. Installs what is missing, builds, then boots two VMs on
# one virtual wire, each with Soft-RoCE (rxe0) and kcoll loaded, and runs
# kcoll-perf on 4 ranks (2 per VM) for every collective: an nccl-tests-style
# table per collective, each result checked (#wrong). All figures are
# emulated (qemu TCG): only ratios within one boot mean anything
# (docs/PERFORMANCE.md).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
tools/install-deps.sh
make -s all modules-all
# Debian 12's primary kernel line (6.1) unless KVER is given.
kver=${KVER:-$(ls /lib/modules | grep '^6\.1\.' | sort -V | tail -1)}
[ -n "$kver" ] || kver=$(ls /lib/modules | sort -V | tail -1)
out=$top/build/demo

echo
echo "=== 2 VMs ($kver), Soft-RoCE, 4 ranks: kcoll-perf -c all"
rc=0
tests/vm/vmrun.sh -k "$kver" -n 2 -o "$out/cluster" -t 1200 -a "4 demo" \
	tests/vm/scenarios/coll.sh || rc=1
cat "$out/cluster/vm0/perf.txt" 2>/dev/null || rc=1
echo
grep -h 'kcoll sees\|FAIL' "$out"/cluster/vm*/log 2>/dev/null || true
[ $rc = 0 ] && echo "demo: ok (logs in $out)" || echo "demo: FAILED (logs in $out)"
exit $rc
