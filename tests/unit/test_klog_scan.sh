#!/bin/bash
# Host test of the VM runner's kernel-log gate (tests/vm/klog-scan.sh): it
# must flag each kind of report and pass a clean log, from the marker on.
scan=$(dirname "$0")/../vm/klog-scan.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0
t() {	# name expected-exit log-text
	n=$((n + 1))
	printf '%s\n' "$3" >"$tmp/log"
	"$scan" "$tmp/log" >/dev/null
	if [ $? = "$2" ]; then echo "ok $n klog-scan $1"; else echo "not ok $n klog-scan $1"; bad=$((bad + 1)); fi
}
clean='[    4.1] rdma_rxe: loaded
[    5.6] kcoll-test: begin selftests.sh
[    5.9] kcoll: loading out-of-tree module taints kernel.
[    5.9] kcoll: version 0.2.0, ABI 1
[    9.1] kcoll: unloaded'
t clean 0 "$clean"
t warning 1 "$clean
[   10.0] WARNING: CPU: 0 PID: 77 at kmod/kcoll_ring.c:99 kcoll_submit+0x1/0x2 [kcoll]"
t bug 1 "$clean
[   10.0] BUG: kernel NULL pointer dereference, address: 0000000000000008"
t oops 1 "$clean
[   10.0] Oops: 0000 [#1] PREEMPT SMP NOPTI"
t kcoll-leak 1 "$clean
[   10.0] kcoll: leak: 1 request(s), 0 context(s) still allocated"
t slab-leak 1 "$clean
[   10.0] kmem_cache_destroy kcoll_req: Slab cache still has objects when called from kcoll_ring_exit"
t hung-task 1 "$clean
[  130.0] INFO: task kcoll_ring_test:88 blocked for more than 120 seconds."
t slub-poison 1 "$clean
[   10.0] =============================================================================
[   10.0] BUG kmalloc-cg-256 (Tainted: G           O      ): Poison overwritten"
t slub-redzone 1 "$clean
[   10.0] INFO: 0xffff888004e3a100-0xffff888004e3a103 @offset=256. First byte 0x0 instead of 0xcc
[   10.0] Redzone overwritten"
t page-poison 1 "$clean
[   10.0] pagealloc: memory corruption"
t kmemleak 1 "$clean
[   10.0] kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)"
t lockdep-cycle 1 "$clean
[   10.0] WARNING: possible circular locking dependency detected"
t before-marker-ignored 0 "[    1.0] WARNING: boot-time firmware complaint
$clean"
echo "klog-scan: $((n - bad)) passed, $bad failed"
[ $bad = 0 ]
