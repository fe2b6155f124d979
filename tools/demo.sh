#!/bin/bash
# make demo: from a fresh Debian 12 machine (root) to kcoll running in a
# virtual cluster. Installs what is missing, builds, then boots
#  1. one VM: loads kcoll, shows a ring round trip and the ring benchmark;
#  2. two VMs on one virtual wire with Soft-RoCE: kcoll on each sees its
#     RDMA device, and RDMA WRITE traffic crosses between them.
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
echo "=== 1 VM ($kver): ring round trip and benchmark"
rc=0
tests/vm/vmrun.sh -k "$kver" -n 1 -o "$out/bench" -t 600 -a "-t 1" \
	tests/vm/scenarios/bench.sh || rc=1
grep -v '^\[' "$out/bench/vm0/ringbench.txt" 2>/dev/null || rc=1

echo
echo "=== 2 VMs ($kver): Soft-RoCE between nodes"
tests/vm/vmrun.sh -k "$kver" -n 2 -o "$out/pair" -t 400 \
	tests/vm/scenarios/rdma-pair.sh || rc=1
grep -h 'rdma_devices\|RDMA WRITE\|ib_write_bw reports\|packets' "$out"/pair/vm*/log
echo
[ $rc = 0 ] && echo "demo: ok (logs in $out)" || echo "demo: FAILED (logs in $out)"
exit $rc
