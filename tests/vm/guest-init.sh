#!/bin/bash
# PID 1 of a kcoll test VM after switch_root: run the scenario, power off.
# (PID 1 must never exit: that would panic the guest.)
# kcoll_tmo is vmrun.sh's -t: 90 s short of it, hang-report.sh records
# where a scenario that still runs is stuck (the host kills the VM at -t,
# and a killed VM says nothing itself).
if [ "${kcoll_tmo:-0}" -gt 180 ]; then
	bash "$kcoll_top/tests/vm/hang-report.sh" "$kcoll_tmo" &
	hang_pid=$!
fi
bash "$kcoll_run"
echo "guest-init: scenario exited with $?"
[ -n "${hang_pid:-}" ] && kill "$hang_pid" 2>/dev/null
sync
echo o >/proc/sysrq-trigger
sleep 60
