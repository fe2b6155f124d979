#!/bin/bash
# Run every kselftest-harness binary of kcoll inside one VM with the module
# loaded, then unload it and scan the kernel log. TAP output per binary goes
# to <name>.tap; the host's check runner counts the results. The argument
# (vmrun.sh -a), if any, names the binaries to run (e.g. kcoll_harden_test).
# kcoll_bindir=DIR on the kernel command line (KCOLL_VM_CMDLINE) runs the
# binaries of another directory (a build made while other VMs use
# build/tests/bin); kcoll_selftest_tmo=SECONDS gives each binary that long
# (default 600; a KASAN kernel's runs are several times slower).
. "$kcoll_top/tests/vm/guest-lib.sh"
kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
kcoll_exporters_up
# This VM's rxe0 address: the communicator selftests form local ranks on it.
export KCOLL_IP
# Whether slub_debug poisons kmalloc objects (run-vm-tests.sh asks for it:
# a write to a freed object is then reported, and fails the log scan).
log "slub poison on kmalloc-256: $(cat /sys/kernel/slab/kmalloc-256/poison 2>/dev/null || echo n/a)"
# The kernel log as it comes: a run that hangs (and is killed from the
# host) never gets to the dmesg.txt of kcoll_finish.
dmesg -w >"$KCOLL_OUT/dmesg-live.txt" 2>&1 &
# Each test's start goes to the kernel log too, so that a report there
# names the test that was running (the harness flushes before each fork).
kcoll_mark_tests() {
	local l t
	while IFS= read -r l; do
		printf '%s\n' "$l"
		case $l in
		'#  RUN '*)
			read -r t <<<"${l#'#  RUN'}"
			echo "kcoll-selftests: $1: $t" >/dev/kmsg ;;
		esac
	done
}
# The module's knobs as loaded. A binary killed at its timeout skips its
# teardown, and one knob it changed (intra_node, say) would stay changed
# for the binaries after it: each then starts from these values again,
# and the log says what was left changed. Not the knobs that act when
# written (devices, listen_port).
declare -A knobs0
for f in /sys/class/misc/kcoll/* /sys/class/misc/kcoll/algo/*; do
	case ${f##*/} in uevent|devices|listen_port) continue ;; esac
	# By the mode: root may write any file as far as test -w knows.
	[ -f "$f" ] && [[ $(stat -c %A "$f") == ??w* ]] && knobs0[$f]=$(cat "$f")
done
kcoll_knobs_restore() {
	local f v
	for f in "${!knobs0[@]}"; do
		v=$(cat "$f")
		[ "$v" = "${knobs0[$f]}" ] && continue
		log "$1 left ${f#/sys/class/misc/kcoll/} at $v: set back to ${knobs0[$f]}"
		echo "${knobs0[$f]}" >"$f" || fail "setting ${f##*/} back to ${knobs0[$f]}"
	done
}
for t in "${kcoll_bindir:-$KCOLL_TOP/build/tests/bin}"/*_test; do
	name=$(basename "$t")
	if [ -n "$KCOLL_ARG" ] && ! [[ " $KCOLL_ARG " == *" $name "* ]]; then
		continue
	fi
	log "running $name"
	kcoll_res_baseline
	timeout -k 5 "${kcoll_selftest_tmo:-600}" "$t" 2>&1 | kcoll_mark_tests "$name" >"$KCOLL_OUT/$name.tap"
	rc=${PIPESTATUS[0]}
	grep -E '^(not )?ok |^# (PASSED|FAILED|Totals)' "$KCOLL_OUT/$name.tap"
	[ $rc = 0 ] || fail "$name exited with $rc"
	# A leak of contexts or requests shows in the counters at once; one
	# of QPs, MRs or CM ids in the RDMA core's counts (a leaked MR also
	# holds back the device's next removal for ever, in another test).
	[ "$(cat /sys/class/misc/kcoll/stats/contexts)" = 0 ] || fail "$name left contexts open"
	[ "$(cat /sys/class/misc/kcoll/stats/inflight)" = 0 ] || fail "$name left requests in flight"
	kcoll_res_check || true
	kcoll_knobs_restore "$name"
done
kcoll_exporters_down
kcoll_mod_unload
kcoll_finish
