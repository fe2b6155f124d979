#!/bin/bash
# kcoll as a torch.distributed backend: PER_VM ranks per VM (default 2; run
# on 2 VMs: 4 ranks) each run tests/torch/kcoll_torch_test.py with
# init_method env:// through vm0: every collective of the backend against
# the expected values and Gloo, DDP trained with "kcoll" and with "gloo"
# (all ranks, then a 3-rank subgroup), the world group again through
# tcp:// and each VM's ranks through a file store, then the last rank
# dies and the others must raise naming it, shrink the group to themselves
# (kcoll_torch.shrink) and one revokes it. Needs Debian's python3-torch (the guest
# runs the host's root filesystem) and `make torch`.
#
#   tests/vm/vmrun.sh -k KVER -n 2 -m 2048 -o OUT -t 1200 \
#       [-a "PER_VM [rounds=N]"] tests/vm/scenarios/torch.sh
# rounds=N: the DDP timing's interleaved rounds (the test's default, 3,
# for figures; make check runs 1: its timing is informative only).
. "$kcoll_top/tests/vm/guest-lib.sh"

# shellcheck disable=SC2086
set -- $KCOLL_ARG
per=${1:-2}
for a in "${@:2}"; do
	case $a in
	rounds=*) export KCOLL_TORCH_ROUNDS=${a#rounds=} ;;
	*) fail "unknown scenario argument '$a'" ;;
	esac
done
PY=/usr/bin/python3
TEST=$KCOLL_TOP/tests/torch/kcoll_torch_test.py
world=$((per * kcoll_nvms))

kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
kcoll_res_baseline
kcoll_peers_up
[ -f "$KCOLL_TOP/build/python/kcoll_torch/__init__.py" ] || fail "no kcoll_torch (make torch)"

export PYTHONPATH=$KCOLL_TOP/build/python
export MASTER_ADDR=10.9.0.1 MASTER_PORT=29650 WORLD_SIZE=$world
# Ranks are numbered VM by VM; each VM's form a world of their own for
# the file:// init method (its store in the VM's /tmp).
export KCOLL_TORCH_PER_VM=$per
# Gloo's own TCP transport, on the VMs' network.
export GLOO_SOCKET_IFNAME=eth0
export OMP_NUM_THREADS=1
# Freed memory filled with a pattern: a use after free crashes.
export MALLOC_PERTURB_=165
pids=()
for r in $(seq $((per * kcoll_vm)) $((per * kcoll_vm + per - 1))); do
	RANK=$r timeout -k 10 900 "$PY" -u "$TEST" >"$KCOLL_OUT/rank$r.log" 2>&1 &
	pids+=("$!:$r")
done
for pr in "${pids[@]}"; do
	p=${pr%%:*} r=${pr#*:}
	wait "$p" || fail "rank $r failed (rank$r.log): $(grep -E '^not ok|Error' "$KCOLL_OUT/rank$r.log" | head -3 | tr '\n' ' ')"
	sed "s/^/[rank $r] /" "$KCOLL_OUT/rank$r.log" | grep -E "^\[rank [0-9]+\] (ok|not ok|perf|#)"
done
kcoll_res_check
kcoll_mod_unload
kcoll_finish
