#!/bin/bash
# make bench: first the side-by-side benchmark, one boot of two VMs of the
# first kernel (tests/vm/scenarios/mpi-bench.sh: the link through perftest,
# Open MPI, Gloo and kcoll on the same ranks, BENCH_PPN per VM, default 2),
# printed as tools/bench-table.sh's ratio table (build/bench/side/table.txt),
# and every algorithm forced in turn, ranked beside collsim's ranking
# (tools/collsim-vs-vm.sh);
# then one VM per installed kernel for the ring benchmark, and two VMs of
# the first kernel for the priority benchmark (kcoll-priobench:
# priorities, then FIFO, in one boot).
# Figures are emulated (TCG): only the ratios within one run mean anything.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
rc=0
first=$(basename "$(dirname "$(ls -d /lib/modules/*/build | head -1)")")
echo "== side by side ($first, 2 VMs x ${BENCH_PPN:-2} ranks)"
"$top/tests/vm/vmrun.sh" -k "$first" -n 2 -o "$top/build/bench/side" -t 4500 \
	-a "ppn=${BENCH_PPN:-2} algos rounds=${BENCH_ROUNDS:-3}" "$top/tests/vm/scenarios/mpi-bench.sh" || rc=1
"$top/tools/bench-table.sh" "$top/build/bench/side" || rc=1
echo "== collsim against the same boot (every algorithm forced in turn)"
"$top/tools/collsim-vs-vm.sh" "$top/build/bench/side" || rc=1
[ -n "${BENCH_SIDE_ONLY:-}" ] && exit $rc
for d in /lib/modules/*/build; do
	[ -d "$d" ] || continue
	kver=$(basename "$(dirname "$d")")
	out=$top/build/bench/$kver
	echo "== $kver"
	"$top/tests/vm/vmrun.sh" -k "$kver" -n 1 -o "$out" -t 600 -a "${BENCH_ARGS:--t 2}" \
		"$top/tests/vm/scenarios/bench.sh" || rc=1
	cat "$out/vm0/ringbench.txt" 2>/dev/null
done
echo "== priorities ($first, 2 VMs)"
"$top/tests/vm/vmrun.sh" -k "$first" -n 2 -o "$top/build/bench/prio" -t 1200 \
	-a "2 prio" "$top/tests/vm/scenarios/coll.sh" || rc=1
for m in 1 0; do
	sed "s/^/prio_sched=$m: /" "$top/build/bench/prio/vm0/prio$m-rank0.log" 2>/dev/null
done
exit $rc
