#!/bin/bash
# make check-kasan: kcoll's VM tests in the KASAN + lockdep + kmemleak
# kernel of make kasan (tools/kasan-kernel.sh, build/kasan): the kselftest
# binaries, the in-VM fuzzer and the wire fuzzer after it (fuzz.sh), and a
# small collective matrix over 2 VMs (coll.sh). Every scenario already
# fails on a bad kernel log since its module load (tests/vm/klog-scan.sh,
# kmemleak's scan after rmmod: tests/vm/guest-lib.sh); here, on top, any
# KASAN or lockdep report from boot on, in the guests' logs or consoles,
# fails the run and is printed (its first 40 lines).
# Not part of make check: under TCG this kernel is several times slower.
#
# Environment: KASAN_FUZZ_SECONDS (default 120; the wire fuzzer gets half),
# KASAN_COLL_ARG (default "2 quick": one rank per VM), KASAN_ONLY (names
# of the scenarios to run, default "selftests fuzz coll").
# Prints one result line per scenario and "KASAN: P passed, F failed";
# the results are under build/vmtest-kasan/.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
kdir=$top/build/kasan
out=$top/build/vmtest-kasan
[ -f "$kdir/kver" ] || { echo "check-kasan: no $kdir/kver: run make kasan" >&2; exit 2; }
kver=$(cat "$kdir/kver")
ko=$top/build/$kver/kmod/kcoll.ko
[ -f "$ko" ] || { echo "check-kasan: no $ko: run make kasan" >&2; exit 2; }
fuzz_secs=${KASAN_FUZZ_SECONDS:-120}
coll_arg=${KASAN_COLL_ARG:-2 quick}
only=${KASAN_ONLY:-selftests fuzz coll}
pass=0 fail=0
mkdir -p "$out"

# Reports that fail the run wherever they are, boot included (KASAN,
# lockdep, DEBUG_ATOMIC_SLEEP's might_sleep checks). (kmemleak's
# own reports count from the module's load on: the baseline scan before
# it reports what boot left, on purpose; klog-scan.sh sees the rest.)
REPORTS='BUG: KASAN|KASAN: |WARNING: possible|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|BUG: sleeping function|BUG: Invalid wait context|BUG: scheduling while atomic|do not call blocking ops|INFO: trying to register non-static key|BUG: MAX_LOCK|kmemleak: unreferenced object'

# Print each report of file $1: its first line and the 39 after it.
reports() {
	grep -nE "$REPORTS" "$1" | head -20 | while IFS=: read -r n _; do
		echo "#   --- $1:$n"
		sed -n "${n},$((n + 39))p" "$1" | sed 's/^/#   /'
	done | awk '!seen[$0]++' | head -200
}

scenario() {	# name nvms timeout mem [arg]
	local name=$1 n=$2 tmo=$3 mem=$4 arg=${5:-}
	local dir=$out/$name${arg:+-${arg// /-}}
	local t0=$SECONDS ok=1 f
	echo "# $name${arg:+ ($arg)}: $n VM, up to ${tmo} s, started $(date +%T)"
	# log_buf_len: lockdep's and KASAN's reports are long; the whole boot
	# must still be in dmesg.txt. kasan_multi_shot: every KASAN report,
	# not only the boot's first. no5lvl: qemu's "max" CPU offers 5-level
	# paging, and with it this kernel reported wild accesses in its own
	# interrupt handling from 2 s into boot, on and on, before any
	# module (a build of 2026-12-04; earlier builds of the same source
	# booted). With 4-level paging it boots and runs clean.
	# kcoll_selftest_tmo: kcoll_comm_test alone ran past the plain
	# runs' 600 s per binary here (2026-12-06: 26 tests, about 10 min).
	KCOLL_VM_CMDLINE="${KCOLL_VM_CMDLINE:-} log_buf_len=8M kasan_multi_shot no5lvl kcoll_selftest_tmo=1500" \
		"$top/tests/vm/vmrun.sh" -K "$kdir" -n "$n" -m "$mem" -o "$dir" -t "$tmo" \
		${arg:+-a "$arg"} "$top/tests/vm/scenarios/$name.sh" || ok=0
	for f in "$dir"/vm*.console "$dir"/vm*/dmesg*.txt; do
		[ -f "$f" ] || continue
		if grep -qE "$REPORTS" "$f"; then
			ok=0
			echo "# report in $f:"
			reports "$f"
		fi
	done
	for f in "$dir"/vm*/*.tap; do
		[ -f "$f" ] || continue
		grep -E '^not ok ' "$f" | sed "s|^|#   $(basename "$f" .tap): |"
	done
	for f in "$dir"/vm*/summary.txt; do
		[ -f "$f" ] && sed 's/^/#   /' "$f"
	done
	if [ $ok = 1 ]; then
		echo "ok - kasan $kver $name $arg ($n VM, $((SECONDS - t0)) s)"
		pass=$((pass + 1))
	else
		echo "not ok - kasan $kver $name $arg ($n VM, $((SECONDS - t0)) s): see $dir"
		for f in "$dir"/vm*/status; do
			[ -f "$f" ] && sed "s|^|#   $(basename "$(dirname "$f")"): |" "$f"
		done
		fail=$((fail + 1))
	fi
}

t_all=$SECONDS
for s in $only; do
	case $s in
	selftests) scenario selftests 1 3000 2048 ;;
	fuzz) scenario fuzz 1 $((fuzz_secs * 3 / 2 + 1200)) 2048 "$fuzz_secs" ;;
	coll) scenario coll 2 3000 1536 "$coll_arg" ;;
	*) echo "check-kasan: unknown scenario '$s'" >&2; exit 2 ;;
	esac
done
echo "KASAN: $pass passed, $fail failed ($kver, $((SECONDS - t_all)) s)"
[ $fail = 0 ]
