#!/bin/bash
# Run libFuzzer targets for a time budget each, one result line per target
# (counted by tests/check.sh like the unit tests' "ok N"/"not ok N"):
#   ok 1 fuzz_sqe: 7719491 execs in 60 s (128658/s), corpus 107, seed 123
#   not ok 2 fuzz_sched: crash, input build/fuzz/crashes/fuzz_sched-crash-...
# The corpus of each target lives in BUILD/corpus/NAME and grows from run to
# run; an empty one is seeded by the target itself (KCOLL_FUZZ_SEEDS).
# Repeat a failure: BUILD/NAME CRASH_FILE; a whole run: add -seed=N
# (FUZZ_ARGS="-seed=N").
#
# Usage: tests/fuzz/run.sh SECONDS BUILD TARGET...
#        tests/fuzz/run.sh --probe CC   (exit 0 if CC builds libFuzzer targets)
set -u
if [ "${1:-}" = --probe ]; then
	tmp=$(mktemp -d) || exit 1
	printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
		'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
		>"$tmp/probe.c"
	"$2" -fsanitize=fuzzer,address,undefined -o "$tmp/probe" "$tmp/probe.c" >"$tmp/log" 2>&1
	rc=$?
	[ $rc = 0 ] || sed 's/^/# /' "$tmp/log" | head -3 >&2
	rm -rf "$tmp"
	exit $rc
fi
secs=${1:?usage: run.sh SECONDS BUILD TARGET...}
dir=${2:?usage: run.sh SECONDS BUILD TARGET...}
shift 2
n=0 rc=0
mkdir -p "$dir/crashes"
for t in "$@"; do
	n=$((n + 1))
	name=$(basename "$t")
	corpus=$dir/corpus/$name
	log=$dir/$name.log
	mkdir -p "$corpus"
	# Seeds: a target writes them and exits; bounded, so that a target
	# that does not know KCOLL_FUZZ_SEEDS cannot hold the run (it would
	# fuzz for ever).
	if [ -z "$(ls -A "$corpus")" ]; then
		KCOLL_FUZZ_SEEDS=$corpus timeout -k 5 60 "$t" >/dev/null 2>&1 ||
			echo "# $name: writing seeds failed; it starts from nothing"
	fi
	# shellcheck disable=SC2086
	timeout -k 10 $((secs * 2 + 120)) "$t" -max_total_time="$secs" \
		-max_len=512 -timeout=10 -print_final_stats=1 \
		-artifact_prefix="$dir/crashes/$name-" ${FUZZ_ARGS:-} \
		"$corpus" >"$log" 2>&1
	r=$?
	execs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 \2/p' "$log" | tail -1)
	seed=$(sed -n 's/^INFO: Seed: \([0-9]*\).*/\1/p' "$log" | head -1)
	if [ $r = 0 ] && [ -n "$execs" ]; then
		set -- $execs
		echo "ok $n $name: $1 execs in $2 s ($(($1 / ($2 > 0 ? $2 : 1)))/s), corpus $(ls "$corpus" | wc -l), seed $seed"
	else
		art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
		echo "not ok $n $name: exit $r${art:+, input $art (repeat: $t $art)}; log $log"
		grep -E '^(fuzz_sched|fuzz_sqe):|^# |ERROR|runtime error' "$log" | head -8 | sed 's/^/#   /'
		rc=1
	fi
done
exit $rc
