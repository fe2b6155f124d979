#!/bin/sh
# Print the kernel log lines that make a kcoll test run fail: BUG, WARNING,
# Oops, leak and lockup reports, slub_debug's and page_poison's corruption reports, from the last "kcoll-test: begin" marker on
# (or the whole log if there is none). Exit 1 if any, 0 if the log is clean.
# Usage: tests/vm/klog-scan.sh DMESG_FILE
f=${1:?usage: klog-scan.sh DMESG_FILE}
if grep -q 'kcoll-test: begin' "$f"; then
	start=$(grep -n 'kcoll-test: begin' "$f" | tail -1 | cut -d: -f1)
else
	start=1
fi
tail -n "+$start" "$f" | grep -E \
	'BUG:|WARNING:|Oops|pagealloc: |general protection|Call Trace|KASAN|UBSAN|refcount_t|[Ll]eak|lockdep|hung_task|blocked for more than|soft lockup|still has objects|kernel panic|Kernel panic|BUG [^ ]+ \(|[Oo]verwritten|Freepointer corrupt|Object already free|[Ss]lab corruption|kmemleak|possible circular|possible recursive|suspicious RCU' &&
	exit 1
exit 0
