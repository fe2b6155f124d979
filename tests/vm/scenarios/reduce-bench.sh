#!/bin/bash
# The engine's fp32 SUM against memcpy of the same bytes, measured inside
# the kernel of a VM (debugfs kcoll/reduce_bench; docs/PERFORMANCE.md).
. "$kcoll_top/tests/vm/guest-lib.sh"
kcoll_mod_load
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
log "reduce_impl: $(cat /sys/class/misc/kcoll/reduce_impl)"
for i in 1 2 3; do
	cat /sys/kernel/debug/kcoll/reduce_bench >>"$KCOLL_OUT/reduce-bench.txt" ||
		fail "reduce_bench"
done
cat "$KCOLL_OUT/reduce-bench.txt"
kcoll_mod_unload
kcoll_finish
