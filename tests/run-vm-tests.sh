#!/bin/bash
# Run kcoll's VM test matrix: for each kernel given, the kselftest binaries
# in one VM, the 2-VM Soft-RoCE scenario, the collective scenarios
# (tests/vm/scenarios/coll.sh), the control plane (ctl.sh) and, on the
# first kernel, the fuzzer (tests/vm/scenarios/fuzz.sh, FUZZ_CHECK_SECONDS,
# default 40). Prints one result line per test and per scenario, then
# "VM: P passed, F failed, S skipped".
# Usage: tests/run-vm-tests.sh KVER...
#        tests/run-vm-tests.sh --fuzz "SECONDS [SEED]" KVER...
#        (only the fuzzer, on every kernel given: make fuzz)
#        tests/run-vm-tests.sh --faults KVER...
#        (only the death scenarios, the longer ones make check leaves out
#        included, on every kernel given: make check-faults)
#        tests/run-vm-tests.sh --clients KVER...
#        (only the clients, PyTorch and MPI: make check-clients)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/vmtest
pass=0 fail=0 skip=0
fuzz_only="" faults_only=0 clients_only=0
if [ "${1:-}" = --fuzz ]; then
	fuzz_only=${2:?usage: $0 --fuzz "SECONDS [SEED]" KVER...}
	shift 2
elif [ "${1:-}" = --faults ]; then
	faults_only=1
	shift
elif [ "${1:-}" = --clients ]; then
	clients_only=1
	shift
fi
[ $# -gt 0 ] || { echo "usage: $0 KVER..." >&2; exit 2; }

# The first panic of a guest that died while booting, before its scenario
# began (no "kcoll-test: begin" in its console, so no kcoll code had been
# loaded), from the consoles in $1; nothing if none did. Under TCG a 6.12
# guest once took an int3 Oops in run_timer_softirq 1.5 s into boot.
boot_panic() {
	local c
	for c in "$1"/vm*.console; do
		[ -f "$c" ] || continue
		grep -q 'kcoll-test: begin' "$c" && continue
		grep -q 'Kernel panic' "$c" || continue
		echo "$(basename "$c" .console): $(grep -m1 -oE '(Oops|BUG:|Kernel panic).*' "$c" | tr -d '\r')"
		return
	done
}

# The guest clock's jump, if a guest's in $1 jumped by more than a
# minute: the kernel's clocksource watchdog saw the TSC (cs_nsec) move far
# more than its reference (wd_nsec). Under TCG the guest TSC follows the
# host's, which jumps when this machine itself is paused and resumed (a
# snapshot of the machine the tests run in: its kernel says "virtual
# machine fork"); every timeout in the guest then fires at once. Seen
# once, 461006 s in a die run whose ranks both ended with timeout's 124.
clock_jump() {
	local f
	for f in "$1"/vm*/dmesg.txt "$1"/vm*.console; do
		[ -f "$f" ] || continue
		awk '/clocksource: Long readout interval/ {
			for (i = 1; i < NF; i++) {
				if ($i == "cs_nsec:") cs = $(i + 1)
				if ($i == "wd_nsec:") wd = $(i + 1)
			}
			if (cs - wd > 60e9) {
				printf "%s: the clock jumped %d s\n", FILENAME, (cs - wd) / 1e9
				exit
			}
		}' "$f" | sed "s|^$1/||"
	done | head -1
}

# A guest whose emulated NIC stopped sending (kcoll_nic_check() in
# tests/vm/guest-lib.sh), if one of $1's did: below kcoll, in qemu.
nic_stuck() {
	grep -l TESTBED_NIC_STUCK "$1"/vm*/status 2>/dev/null | head -1 |
		sed "s|^$1/||"
}

# Before a retry: the failed run's statuses, said, and its folder kept
# as $1.tryN (the retry's VMs start from empty folders).
keep_try() {
	local s n=1
	while [ -e "$1.try$n" ]; do n=$((n + 1)); done
	for s in "$1"/vm*/status; do
		[ -f "$s" ] && sed "s|^|#   try $n, $(basename "$(dirname "$s")"): |" "$s"
	done
	mv "$1" "$1.try$n"
}

vm_run() {	# dir kver nvms timeout arg mem script
	"$top/tests/vm/vmrun.sh" -k "$2" -n "$3" -o "$1" -t "$4" \
		${5:+-a "$5"} ${6:+-m "$6"} "$7"
}

scenario() {	# kver name nvms timeout [arg [mem_mb]]
	local kver=$1 name=$2 n=$3 tmo=$4 arg=${5:-} mem=${6:-}
	local dir=$out/$1/$2${arg:+-${arg// /-}}
	local t0=$SECONDS ok=0 why
	local script=$top/tests/vm/scenarios/$name.sh

	rm -rf "$dir".try*

	vm_run "$dir" "$kver" "$n" "$tmo" "$arg" "$mem" "$script" && ok=1
	# A guest kernel that died booting ran nothing of kcoll's: said, and
	# run once more. A failure once the scenario began is not retried,
	# but for a guest whose clock jumped or whose emulated NIC stopped:
	# each fault of the test bed once, said; a stopped NIC twice (in
	# the family run's arguments it stopped in 2 of 9 runs here, on
	# 2026-12-07, and kcoll_nic_watch now ends such a run within 45 s).
	local fault
	for fault in boot_panic clock_jump nic_stuck nic_stuck; do
		[ $ok = 0 ] || break
		why=$($fault "$dir")
		[ -n "$why" ] || continue
		case $fault in
		boot_panic) echo "# retry: a guest panicked while booting, before the scenario began: $why" ;;
		clock_jump) echo "# retry: the guest's clock jumped, so its timeouts fired at once (this machine was paused): $why" ;;
		nic_stuck) echo "# retry: a guest's emulated NIC stopped sending (qemu, below kcoll): $why" ;;
		esac
		keep_try "$dir"
		vm_run "$dir" "$kver" "$n" "$tmo" "$arg" "$mem" "$script" && ok=1
	done
	if [ $ok = 1 ]; then
		echo "ok - vm $kver $name $arg ($n VM, $((SECONDS - t0)) s)"
		pass=$((pass + 1))
	else
		echo "not ok - vm $kver $name $arg ($n VM): see $dir"
		for s in "$dir"/vm*/status; do
			[ -f "$s" ] && sed "s|^|#   $(basename "$(dirname "$s")"): |" "$s"
		done
		fail=$((fail + 1))
	fi
	# What a scenario reports about itself (the fuzzer: its calls).
	for sum in "$dir"/vm*/summary.txt; do
		[ -f "$sum" ] && sed "s|^|#   |" "$sum"
	done
	# Every TAP line of every selftest binary counts on its own.
	for tap in "$dir"/vm*/*.tap; do
		[ -f "$tap" ] || continue
		local p f s
		p=$(grep -cE '^ok [0-9]+ ' "$tap" | tr -d ' ')
		s=$(grep -cE '^ok [0-9]+ .*# SKIP' "$tap" | tr -d ' ')
		f=$(grep -cE '^not ok [0-9]+ ' "$tap" | tr -d ' ')
		grep -E '^not ok |# SKIP' "$tap" | sed "s|^|#   $kver $(basename "$tap" .tap): |"
		# What a failed test said (its failed checks, its ranks'
		# codes): the last lines of its block, as CI prints only this.
		awk '/^#  RUN /{ n = 0 } { l[n++ % 12] = $0 }
		     /^not ok / { for (i = (n > 12 ? n - 12 : 0); i < n - 1; i++)
				      if (l[i % 12] ~ /^#/) print l[i % 12] }' "$tap" |
			cut -c1-240 | sed "s|^|#     |"
		pass=$((pass + p - s)) fail=$((fail + f)) skip=$((skip + s))
	done
}

# scenario in the background: its lines and counts go to a file that
# bg_wait prints and adds up once every background scenario ended.
bg_files=()
scenario_bg() {
	local f
	mkdir -p "$out"
	f=$(mktemp "$out/.bg.XXXXXX")
	# shellcheck disable=SC2030	# counted in the subshell on purpose
	(pass=0 fail=0 skip=0
	 scenario "$@"
	 echo "COUNTS $pass $fail $skip") >"$f" 2>&1 &
	bg_files+=("$f")
}

bg_wait() {
	local f p x s
	wait
	for f in "${bg_files[@]}"; do
		grep -v '^COUNTS ' "$f"
		read -r _ p x s <<<"$(grep '^COUNTS ' "$f" || echo "COUNTS 0 1 0")"
		# shellcheck disable=SC2031
		pass=$((pass + p)) fail=$((fail + x)) skip=$((skip + s))
		rm -f "$f"
	done
	bg_files=()
}

# Collectives through libcoll, one matrix per kernel (make check must stay
# under 30 minutes on 2 cores; under TCG one matrix takes 3-4 minutes): 4
# ranks over 2 VMs on the first (Debian 12's primary) kernel, with the
# algorithms the cost model picks; 3 ranks (not a power of two; 2 + 1 per
# VM) on the others, over three RC QPs per peer (sysfs qps_per_peer) and
# with every algorithm the cost model does not pick at these sizes forced
# through sysfs. "quick": the whole type x reduction matrix at small and
# odd counts, one 1M-element and one 16 MiB case per collective, and the
# negative tests. "skew": the two VMs advertise different cost models
# (coll.sh), which each communicator must reconcile into one. "dmabuf=":
# the quick matrix again (four dtypes, its 1M-element cases but not the
# 16 MiB ones) with every buffer a dma-buf that kcoll imports (vgem's), on
# the first kernel. "gpu=": stream-ordered
# collectives on GPU memory through the STAND-IN CUDA driver (its device
# memory dma-bufs of that exporter): the quick matrix and the failures
# while streams wait (coll.sh), on the first kernel. On the others the
# selftests cover dma-buf import (udmabuf, the system heap) and the
# stream-ordered ABI; the matrices there went to keep make check under
# 30 minutes once the PyTorch and MPI scenarios came.
forced="algo=allreduce:rabenseifner algo=reduce_scatter:rechalving"
forced+=" algo=allgather:farfirst algo=broadcast:binomial"
forced+=" algo=reduce:binomial algo=alltoall:bruck"
first=$1
# The last line of every mode, and its exit status.
summary() {
	echo "VM: $pass passed, $fail failed, $skip skipped"
	[ $fail = 0 ]
}
if [ -n "$fuzz_only" ]; then
	# The VM's own limit: the budget, then the wire's hostile peer for
	# half of it (fuzz.sh), the fuzzer's join deadline, boot and the
	# checks after it.
	# slub_debug and page_poison as for make check's fuzzer (below).
	for kver in "$@"; do
		KCOLL_VM_CMDLINE="${KCOLL_VM_CMDLINE:-} slub_debug=FZP,kmalloc-* page_poison=1" \
			scenario "$kver" fuzz 1 $((${fuzz_only%% *} * 3 / 2 + 420)) "$fuzz_only"
	done
	summary
	exit
fi
if [ $faults_only = 1 ]; then
	# Processes killed (40 in a row), a node stopped dead alone and
	# during each of split, grow and revoke, a revoke that reaches a
	# rank only through another, and a network that loses, duplicates
	# and reorders packets (the quick matrix through netem).
	for kver in "$@"; do
		scenario "$kver" coll 2 1500 "2 die=40"
		scenario "$kver" coll 2 1500 "4 quick noneg netem=lossy"
		for m in "" split grow revoke revoke-cut; do
			scenario "$kver" nodedie 3 900 "$m"
		done
	done
	summary
	exit
fi
if [ $clients_only = 1 ]; then
	# The clients users live in: torch.distributed's "kcoll" backend
	# (DDP beside Gloo, 2 x 2 ranks, a 3-rank subgroup, a rank that
	# dies) and unmodified MPI programs through libkcoll-mpi.so (mpi4py
	# and kcoll-mpibench, with and without).
	for kver in "$@"; do
		scenario "$kver" torch 2 1200 "2 rounds=1" 1536
		scenario "$kver" mpi-preload 2 1200 "quick" 1536
	done
	summary
	exit
fi
# The 1-VM scenarios run two at a time (each VM has one vCPU, the
# machine make check is sized for has two cores); the 2- and 3-VM ones
# alone. First the selftests of every kernel.
# slub_debug on the kmalloc caches: a write to a freed object (the races
# of kcoll_harden_test) is reported, and the log scan fails.
for kver in "$@"; do
	KCOLL_VM_CMDLINE="${KCOLL_VM_CMDLINE:-} slub_debug=FZP,kmalloc-*" \
		scenario_bg "$kver" selftests 1 900
	[ ${#bg_files[@]} -lt 2 ] || bg_wait
done
bg_wait
for kver in "$@"; do
	# The test bed's RDMA link itself, on the first kernel (the other's
	# collective run below fails if its rxe does not carry them).
	[ "$kver" = "$first" ] && scenario "$kver" rdma-pair 2 400
	if [ "$kver" = "$first" ]; then
		# ... and communicators that split, revoke, shrink and grow
		# with members dying (kcoll-family).
		scenario "$kver" coll 2 900 "4 quick skew dmabuf=vgem gpu=vgem family"
		# Death of a whole node (3 VMs, one stops dead; the
		# survivors shrink to themselves). A node stopped while a
		# survivor revokes, during a revoke that reaches a rank only
		# through another, during a split and during a grow, and 40
		# deaths of a process in a row (then no leak, and rmmod):
		# make check-faults, which CI runs after make check (they
		# kept make check over 30 minutes; its 6 deaths in a row
		# went there too, a subset of the 40). The selftests kill
		# ranks too (kcoll_fault_test).
		scenario "$kver" nodedie 3 900
		# The clients (PyTorch, MPI): make check-clients, which CI
		# runs after make check (they kept it over 30 minutes).
		# kcollctl and kcolld against the module's netlink family (the
		# selftests check the family itself on every kernel), beside
		# the fuzzer, briefly (make fuzz runs it longer on every
		# kernel), with slub_debug too: its races against teardown
		# (and rxe0 going away) find writes to freed objects only so.
		# page_poison: a write into a freed page (a user page the
		# module, or rxe through an MR, let go of too early) is
		# reported when the page is next allocated.
		scenario_bg "$kver" ctl 1 600
		KCOLL_VM_CMDLINE="${KCOLL_VM_CMDLINE:-} slub_debug=FZP,kmalloc-* page_poison=1" \
			scenario_bg "$kver" fuzz 1 $((${FUZZ_CHECK_SECONDS:-40} * 3 / 2 + 420)) \
			"${FUZZ_CHECK_SECONDS:-40}"
		bg_wait
	else
		scenario "$kver" coll 2 1500 "3 quick qps=3 $forced"
	fi
done
summary
