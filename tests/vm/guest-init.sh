#!/bin/bash
# PID 1 of a kcoll test VM after switch_root: run the scenario, power off.
# (PID 1 must never exit: that would panic the guest.)
bash "$kcoll_run"
echo "guest-init: scenario exited with $?"
sync
echo o >/proc/sysrq-trigger
sleep 60
