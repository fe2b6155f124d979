#!/bin/bash
# SPDX-License-Identifier: MIT
# Single-rank smoke test of the VM test programs (kcoll-colltest,
# kcoll-perf) on the host, against the /dev/kcoll model linked into them
# (build/unit/*-model, see unit.mk): argument handling, the launcher
# environment, every collective's fill/issue/check path, the output
# format and the exit codes. One "ok N - ..." line per check.
# Usage: test_tools_model.sh BUILD_UNIT_DIR
set -u
bin=${1:?usage: $0 BUILD_UNIT_DIR}
tmp=$(mktemp -d /tmp/kcoll-tools-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
n=0 fail=0
base=$((20000 + RANDOM % 20000))
export KCOLL_RANK=0 KCOLL_NRANKS=1 KCOLL_IB_ADDR=127.0.0.1
export KCOLL_SECRET=000102030405060708090a0b0c0d0e0f

# check NAME WANT_RC GREP_PATTERN COMMAND...
check() {
	local name=$1 want=$2 pat=$3 rc
	shift 3
	n=$((n + 1))
	KCOLL_ROOT=127.0.0.1:$((base + n)) timeout 600 "$@" >"$tmp/out" 2>&1
	rc=$?
	if [ "$rc" = "$want" ] && { [ -z "$pat" ] || grep -qE -- "$pat" "$tmp/out"; }; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name (exit $rc, wanted $want; pattern '$pat')"
		tail -20 "$tmp/out" | sed 's/^/#   /'
		fail=$((fail + 1))
	fi
}

ct=$bin/kcoll-colltest-model
pf=$bin/kcoll-perf-model
check "colltest -q" 0 '^# kcoll-colltest: [0-9]+ passed, 0 failed' "$ct" -q
check "colltest (default: 1M and 16 MiB cases)" 0 \
	'^ok [0-9]+ - alltoall fp32 count=4194304' "$ct"
check "colltest -c reduce -v" 0 '^# rank 0: reduce int8 sum count=0 root=0 in-place' \
	"$ct" -q -c reduce -v
check "colltest -M skips on 1 rank" 0 'SKIP' "$ct" -M
check "colltest -K skips on 1 rank" 0 'SKIP' "$ct" -K
check "colltest -X skips on 1 rank" 0 'SKIP' "$ct" -X
check "colltest bad option" 2 '' "$ct" -Z
check "colltest without environment" 1 'Bail out! coll_comm_init_env' \
	env -u KCOLL_RANK "$ct" -q
check "perf -c all, in place, registered" 0 '^# Out of bounds values : 0 OK' \
	"$pf" -c all -b 8 -e 1M -f 8 -n 3 -w 1 -i 1 -R 1
check "perf table columns" 0 '^ +1048576 +262144 +fp32 +sum +-1 ' \
	"$pf" -b 1M -e 1M -n 2 -w 0
check "perf fp16 avg" 0 '# Avg bus bandwidth' "$pf" -d half -o avg -e 64K -n 2
check "perf bf16 prod reduce root 0" 0 ' bf16 +prod +0 ' \
	"$pf" -c reduce -d bf16 -o prod -e 64K -n 2
check "perf int32 avg is refused" 2 'not valid' "$pf" -d int32 -o avg
check "perf -C 0 prints N/A" 0 ' N/A$' "$pf" -C 0 -e 1K
check "perf the v-variants, skewed, checked" 0 '^# Out of bounds values : 0 OK' \
	"$pf" -c allgatherv,reduce_scatterv,alltoallv -V 4 -b 64 -e 1M -f 16 -n 2 -w 1
check "perf -V below 1 is refused" 2 '' "$pf" -c alltoallv -V 0.5
echo "test_tools_model: $((n - fail)) passed, $fail failed"
[ $fail = 0 ]
