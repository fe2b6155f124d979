#!/bin/sh
# SPDX-License-Identifier: MIT
# collsim at 4096 ranks, full bisection, default model: the automatic
# choice (kcoll_sched_choose) must be within 2x of the lower bound for an
# 8-byte allreduce and within 1.1x for 64 MiB (docs/PERFORMANCE.md,
# collsim). Usage: test_collsim.sh path/to/collsim. About 3 s.
set -eu
sim=$1
fail=0

# check SIZE MAX_RATIO: the ratio column of the auto line.
check() {
	out=$("$sim" -q -n 4096 -c allreduce -b "$1" -e "$1" -a auto \
		-t fullbisection) || { echo "not ok: collsim failed at $1"; fail=1; return; }
	line=$(echo "$out" | awk '$1 == "allreduce"')
	ratio=$(echo "$line" | awk '{ print $NF }')
	if awk -v r="$ratio" -v m="$2" 'BEGIN { exit !(r > 0 && r <= m) }'; then
		echo "ok: allreduce $1 B at 4096 ranks: $line"
	else
		echo "not ok: allreduce $1 B at 4096 ranks: ratio $ratio > $2: $line"
		fail=1
	fi
}

check 8 2.0
check 64M 1.1
exit $fail
