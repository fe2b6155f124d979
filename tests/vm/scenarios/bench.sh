#!/bin/bash
# Ring benchmark inside one VM: NOPs per second, batched vs one ENTER per
# descriptor (tools/kcoll-ringbench). Also shows the round trip (-d).
. "$kcoll_top/tests/vm/guest-lib.sh"
kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
log "kcoll sees: $(tr '\n' ' ' </sys/class/misc/kcoll/rdma_devices)"
"$KCOLL_TOP/build/tools/kcoll-ringbench" -d ${KCOLL_ARG:--t 1} | tee "$KCOLL_OUT/ringbench.txt"
[ "${PIPESTATUS[0]}" = 0 ] || fail "kcoll-ringbench failed"
log "stats: submitted=$(cat /sys/class/misc/kcoll/stats/submitted) completed=$(cat /sys/class/misc/kcoll/stats/completed) failed=$(cat /sys/class/misc/kcoll/stats/failed)"
kcoll_mod_unload
kcoll_finish
