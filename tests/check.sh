#!/bin/bash
# make check: everything kcoll tests, ending with "N passed, N failed".
#  1. build: the module against every installed kernel (W=1, no warnings),
#     libcoll, tools and test binaries;
#  2. host unit tests (plain logic, libcoll), no VM, and a short run of the
#     host fuzzers (libFuzzer; make fuzz-host runs them longer);
#  3. DKMS add/build against every installed kernel (root only), and the
#     Debian packages built and checked by lintian (make deb);
#  4. VM tests on every installed kernel: the kselftest binaries in one VM
#     and the 2-VM Soft-RoCE scenario.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
log=$top/build/check
mkdir -p "$log"
pass=0 fail=0 skip=0
t0=$SECONDS

count() {	# name rc: one result line
	if [ "$2" = 0 ]; then
		echo "ok - $1"
		pass=$((pass + 1))
	else
		echo "not ok - $1"
		fail=$((fail + 1))
	fi
}

kvers=$(make -s --no-print-directory -f - <<<'include Makefile
print:
	@echo $(KVERS)' print 2>/dev/null)
if [ -z "$kvers" ]; then
	echo "check: no kernel headers under /lib/modules: run 'make deps' as root" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
echo "# kernels: $kvers"

# 1. Build.
make -s modules-all testbuf >"$log/modules.log" 2>&1
rc=$?
count "module and test exporter build W=1 clean against: $kvers" $rc
[ $rc = 0 ] || tail -30 "$log/modules.log"
make -s all >"$log/build.log" 2>&1
rc=$?
count "libcoll, tools and tests build" $rc
[ $rc = 0 ] || tail -30 "$log/build.log"

# 2. Host unit tests and the host fuzzers' short run: every "ok N"/"not
# ok N" line counts ("# SKIP" ones as skipped).
# Two at a time (the machine has two cores), each target's output kept
# together for the counts below.
make -s -k -j2 -Otarget FUZZ_QUICK_SECONDS=10 unit-test reduce-test kernels-check gpucheck-standin fuzz-host-quick >"$log/unit.log" 2>&1
rc=$?
grep -E '^not ok |# SKIP' "$log/unit.log"
# The fuzzers' executions.
grep -E '^ok [0-9]+ fuzz_' "$log/unit.log" | sed 's/^ok [0-9]* /# /'
p=$(grep -E '^ok ' "$log/unit.log" | grep -cv '# SKIP')
s=$(grep -cE '^ok .*# SKIP' "$log/unit.log")
f=$(grep -cE '^not ok ' "$log/unit.log")
pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
if [ "$s" != 0 ]; then
	echo "# unit: $p passed, $f failed, $s skipped"
else
	echo "# unit: $p passed, $f failed"
fi
if [ $rc != 0 ] && [ "$f" = 0 ]; then
	count "unit tests ran" $rc
	tail -20 "$log/unit.log"
fi

# 3. DKMS, and beside it the Debian packages (below): much of each runs
# on one core.
debpid=
if command -v dpkg-buildpackage >/dev/null && command -v lintian >/dev/null; then
	tools/mkdeb.sh "$top/build/deb" >"$log/deb.log" 2>&1 &
	debpid=$!
fi
if [ "$(id -u)" = 0 ] && command -v dkms >/dev/null; then
	# shellcheck disable=SC2086
	tools/dkms-check.sh $kvers >"$log/dkms.log" 2>&1
	cat "$log/dkms.log" | grep -E '^(not )?ok '
	p=$(grep -cE '^ok ' "$log/dkms.log")
	f=$(grep -cE '^not ok ' "$log/dkms.log")
	pass=$((pass + p)) fail=$((fail + f))
	[ "$p$f" != 00 ] || count "dkms-check ran" 1
else
	echo "ok - dkms # SKIP needs root and the dkms package"
	skip=$((skip + 1))
fi

# The Debian packages (make deb): built, and no lintian error.
if [ -n "$debpid" ]; then
	wait "$debpid"
	rc=$?
	grep -E '^(not )?ok |^# lintian ' "$log/deb.log"
	p=$(grep -cE '^ok ' "$log/deb.log")
	f=$(grep -cE '^not ok ' "$log/deb.log")
	pass=$((pass + p)) fail=$((fail + f))
	[ "$rc" = 0 ] || [ "$f" != 0 ] || count "make deb ran" "$rc"
else
	echo "ok - make deb # SKIP needs dpkg-buildpackage and lintian (make deps)"
	skip=$((skip + 1))
fi

# 4. VM tests.
# shellcheck disable=SC2086
tests/run-vm-tests.sh $kvers | tee "$log/vm.log" | grep -vE '^VM: '
line=$(grep -E '^VM: ' "$log/vm.log")
if [ -n "$line" ]; then
	read -r p f s <<<"$(echo "$line" | awk '{ print $2, $4, $6 }')"
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
else
	count "VM tests ran" 1
fi

echo "# check took $((SECONDS - t0)) s; logs in $log"
[ $skip = 0 ] || echo "# $skip skipped"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
