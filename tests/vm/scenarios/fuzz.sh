#!/bin/bash
# The in-VM fuzzer: Soft-RoCE and kcoll up, then build/tests/bin/kcoll-fuzz for
# a fixed budget (random and mutated ioctls, SQEs, ring corruption, mmap
# races, closes during submission; two-rank communicators over rxe0), then
# kcoll_wire_test's hostile peer on the wire for half of it.
# Its workers run as nobody (uid 65534, 8 MiB RLIMIT_MEMLOCK); a root
# helper deletes rxe0 and adds it back during the run and watches the
# kernel log. The VM should boot with slub_debug on the kmalloc caches
# (tests/run-vm-tests.sh does): a write to a freed object is reported.
# Afterwards nothing may be left: no kcoll context or request, rxe0 back,
# the RDMA core's resources back to what they were before the fuzzer
# started, the test dma-buf exporter holds nothing, the module unloads,
# and the kernel log has no
# BUG/WARNING/Oops/leak/slub report.
#
# Usage (one VM):
#   tests/vm/vmrun.sh -k KVER -n 1 -o build/vmtest/fuzz -t 600 \
#       -a "SECONDS [SEED] [THREADS] [FLAG...]" tests/vm/scenarios/fuzz.sh
# SECONDS defaults to 60, THREADS to 4; SEED reproduces a run's choices
# (the fuzzer prints the seed it used); each FLAG goes to kcoll-fuzz (-D:
# rxe0 stays, -R: no teardown races, -U: the workers stay root). kcoll_ko=PATH in
# KCOLL_VM_CMDLINE loads another build of the module (an old commit's, to
# show the fuzzer finds what that commit fixed). The fuzzer's output is in
# vm0/fuzz.log, its summary also in vm0/summary.txt (printed by
# tests/run-vm-tests.sh).
. "$kcoll_top/tests/vm/guest-lib.sh"

FUZZ=$KCOLL_TOP/build/tests/bin/kcoll-fuzz

# shellcheck disable=SC2086
set -- $KCOLL_ARG
secs=${1:-60}
seed=${2:-}
threads=${3:-4}
shift $(($# < 3 ? $# : 3))
flags=("$@")
case $secs$threads in
*[!0-9]*) fail "bad scenario argument '$KCOLL_ARG' (SECONDS [SEED] [THREADS])"; secs=60 threads=4 ;;
esac

kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
# The test dma-buf exporter: the fuzzer imports its buffers (issue 18).
kcoll_exporters_up
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
# What the RDMA core holds before the fuzzer (kcoll's PD and registration
# QP per device): every count must come back to this.
rdma res show >"$KCOLL_OUT/rdma-res-before.txt" 2>&1
rdma res show qp >"$KCOLL_OUT/rdma-qp-before.txt" 2>&1
[ -x "$FUZZ" ] || fail "no $FUZZ (make tests-bin)"

# The fuzzer forms two-rank communicators on this VM's rxe0 address.
export KCOLL_IP
log "kcoll-fuzz: ${secs} s, $threads threads${seed:+, seed $seed}${flags[*]:+, ${flags[*]}}"
t0=$SECONDS
# Its own watchdog ends every wait and its threads are joined at most 90 s
# after the budget. A process the kernel never lets go survives even
# SIGKILL: then its stacks are saved and the scenario goes on (and fails).
"$FUZZ" -t "$secs" -j "$threads" ${seed:+-s "$seed"} "${flags[@]}" >"$KCOLL_OUT/fuzz.log" 2>&1 &
pid=$!
deadline=$((SECONDS + secs + 180))
while kill -0 $pid 2>/dev/null && [ $SECONDS -lt $deadline ]; do
	sleep 1
done
for sig in TERM KILL; do
	kill -0 $pid 2>/dev/null || break
	log "kcoll-fuzz still running after $((SECONDS - t0)) s: SIG$sig"
	kill -$sig $pid
	sleep 10
done
if kill -0 $pid 2>/dev/null; then
	rc=124
	fail "kcoll-fuzz cannot be killed (stuck in the kernel): see stuck-stacks.txt"
	for task in /proc/"$pid"/task/*; do
		echo "== $task ($(cat "$task/wchan" 2>/dev/null))"
		cat "$task/stack"
	done >"$KCOLL_OUT/stuck-stacks.txt" 2>&1
	echo w >/proc/sysrq-trigger 2>/dev/null	# blocked tasks to the log
else
	wait $pid
	rc=$?
fi
log "kcoll-fuzz exited with $rc after $((SECONDS - t0)) s"
grep -E '^kcoll-fuzz: (seed|started|COMM_|two-rank|teardown|device|first kernel|[0-9]+ threads)|UNEXPECTED' "$KCOLL_OUT/fuzz.log" | head -60
grep -E '^kcoll-fuzz: seed .* calls' "$KCOLL_OUT/fuzz.log" >"$KCOLL_OUT/summary.txt"
grep -E '^kcoll-fuzz: (two-rank|teardown|device|first kernel)' "$KCOLL_OUT/fuzz.log" >>"$KCOLL_OUT/summary.txt"
# The first unexpected results, distinct, so that a failed check (CI
# prints only the summary) says what went wrong, not only how often.
grep -E 'UNEXPECTED' "$KCOLL_OUT/fuzz.log" | sed -E 's/^kcoll-fuzz: UNEXPECTED \(thread [0-9-]+\): //' |
	awk '!seen[$0]++' | head -8 | cut -c1-300 | sed 's/^/kcoll-fuzz: UNEXPECTED: /' >>"$KCOLL_OUT/summary.txt"
[ $rc = 0 ] || fail "kcoll-fuzz exited with $rc ($(grep -m1 -o 'reproduce with .*' "$KCOLL_OUT/fuzz.log" || echo 'see fuzz.log'))"

# The helper adds rxe0 back when the fuzzer ends (or dies): wait for it,
# and put it back here if it did not.
for i in $(seq 1 60); do
	ibv_devinfo -d rxe0 2>/dev/null | grep -q PORT_ACTIVE && break
	sleep 1
done
if ! ibv_devinfo -d rxe0 2>/dev/null | grep -q PORT_ACTIVE; then
	fail "rxe0 not back (ACTIVE) after the fuzzer"
	rdma link add rxe0 type rxe netdev eth0
	sleep 2
fi

# Then the wire: a hostile rank 1 speaking kcoll's protocol through
# userspace verbs (tests/kselftest/kcoll_wire_test.c) for half the budget:
# that test alone (the selftests scenario runs the binary's others; they
# took two minutes here).
# The checks below cover both fuzzers.
WIRE=$KCOLL_TOP/build/tests/bin/kcoll_wire_test
if [ -x "$WIRE" ]; then
	log "kcoll_wire_test: $((secs / 2)) s${seed:+, seed $seed}"
	env KCOLL_SELFTEST_ONLY=wire.hostile_peer_cannot_hang_or_break_the_module \
		KCOLL_WIREFUZZ_SECONDS=$((secs / 2)) ${seed:+KCOLL_WIREFUZZ_SEED=$seed} \
		timeout -k 10 $((secs / 2 + 300)) "$WIRE" >"$KCOLL_OUT/wirefuzz.tap" 2>&1
	rc=$?
	grep -E '^(not )?ok |rounds \(' "$KCOLL_OUT/wirefuzz.tap" | cut -c1-300
	grep -Eo '[0-9]+ rounds \(.*' "$KCOLL_OUT/wirefuzz.tap" | sed 's/^/kcoll_wire_test: /' >>"$KCOLL_OUT/summary.txt"
	[ $rc = 0 ] || fail "kcoll_wire_test exited with $rc (see wirefuzz.tap; its seed is printed there)"
else
	fail "no $WIRE (make tests-bin)"
fi

# Teardown may lag a little behind the exit (completions unwinding on
# the module's workqueue, QPs draining).
for i in $(seq 1 60); do
	c=$(cat /sys/class/misc/kcoll/stats/contexts 2>/dev/null)
	f=$(cat /sys/class/misc/kcoll/stats/inflight 2>/dev/null)
	[ "$c" = 0 ] && [ "$f" = 0 ] && break
	sleep 1
done
for s in contexts inflight; do
	v=$(cat /sys/class/misc/kcoll/stats/$s 2>/dev/null || echo '?')
	[ "$v" = 0 ] || fail "kcoll stats/$s is $v after the fuzzer exited"
done
rc_qps() { grep -c "type RC" "$1"; }
# rxe0 was deleted and added back: its index ("0: rxe0: pd ...") changed.
res_show() { rdma res show 2>&1 | sed -E 's/^[0-9]+: //'; }
sed -Ei 's/^[0-9]+: //' "$KCOLL_OUT/rdma-res-before.txt"
for i in $(seq 1 60); do
	rdma res show qp >"$KCOLL_OUT/rdma-qp.txt" 2>&1
	res_show >"$KCOLL_OUT/rdma-res-after.txt"
	[ "$(rc_qps "$KCOLL_OUT/rdma-qp.txt")" = "$(rc_qps "$KCOLL_OUT/rdma-qp-before.txt")" ] &&
		cmp -s "$KCOLL_OUT/rdma-res-before.txt" "$KCOLL_OUT/rdma-res-after.txt" && break
	sleep 1
done
if [ "$(rc_qps "$KCOLL_OUT/rdma-qp.txt")" != "$(rc_qps "$KCOLL_OUT/rdma-qp-before.txt")" ]; then
	fail "RC QPs left after the fuzzer exited: $(rc_qps "$KCOLL_OUT/rdma-qp.txt"), $(rc_qps "$KCOLL_OUT/rdma-qp-before.txt") before"
	grep "type RC" "$KCOLL_OUT/rdma-qp.txt" | head -5
fi
cmp -s "$KCOLL_OUT/rdma-res-before.txt" "$KCOLL_OUT/rdma-res-after.txt" ||
	fail "rdma res not back to baseline: $(tr '\n' ' ' <"$KCOLL_OUT/rdma-res-before.txt") -> $(tr '\n' ' ' <"$KCOLL_OUT/rdma-res-after.txt")"
# The statistics as the fuzzer left them, for the record.
for f in /sys/class/misc/kcoll/stats/*; do
	printf '%s=%s ' "$(basename "$f")" "$(cat "$f")"
done >"$KCOLL_OUT/stats.txt"
log "stats: $(cat "$KCOLL_OUT/stats.txt")"
# Every import the fuzzer made was given back to the exporter.
kcoll_exporters_down
kcoll_mod_unload
kcoll_finish
