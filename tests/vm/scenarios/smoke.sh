#!/bin/bash
# Boot, bring up Soft-RoCE, load and unload kcoll, check the kernel log.
. "$kcoll_top/tests/vm/guest-lib.sh"
kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
cat /sys/class/misc/kcoll/rdma_devices
grep -q '^rxe0 ' /sys/class/misc/kcoll/rdma_devices || fail "kcoll does not list rxe0"
kcoll_mod_unload
kcoll_finish
