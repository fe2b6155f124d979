#!/bin/bash
# Guest side of a VM that runs into its timeout: started by guest-init.sh
# beside the scenario with vmrun.sh's -t (kcoll_tmo), it sleeps until 90 s
# before the host kills the VM (counted from the guest's boot, which began
# a little after qemu did) and, if the scenario still runs, records where
# it is stuck. Without it a timed-out VM leaves "no status" and a console
# nobody in CI sees (stop 56: both VMs of the family run, 1500 s).
#
# What it records, in the results folder:
#   status    (only if the scenario wrote none yet, and written first)
#             one line naming the stuck tasks and the log's last line;
#             the scenario's own kcoll_finish overwrites it if it ends
#             after all
#   hang.txt  every process (state, kernel wait channel), and the kernel
#             stack of every thread in D state or of kcoll's own
#             processes (a slow run that goes on is not failed by this:
#             nothing goes into the kernel log, which the scenario scans)
#   hang-dmesg.txt  the kernel log as it was
tmo=${1:?usage: hang-report.sh VM_TIMEOUT_SECONDS}
up=$(cut -d. -f1 /proc/uptime)
wait=$((tmo - 90 - up))
[ $wait -gt 0 ] || exit 0
sleep $wait
out=$kcoll_out/vm$kcoll_vm
[ -d "$out" ] || mkdir -p "$out"

# The threads worth naming ("/proc/PID/task/TID STATE"): in D state, or of
# a process named kcoll* (not a kernel thread: the module's workqueue
# rescuer is named kcoll). One awk over every thread's stat: a few
# processes per thread would take minutes on a loaded TCG guest, past
# the host's kill.
tasks() {
	# From BEGIN with getline: a thread gone since the glob would end
	# mawk's reading of its file list there (it stops at the first file
	# it cannot open).
	awk 'BEGIN {
		for (i = 1; i < ARGC; i++) {
			f = ARGV[i]
			if ((getline l < f) > 0) {
				p = 0
				while ((k = index(substr(l, p + 1), ") ")) > 0)
					p += k
				o = index(l, "(")
				comm = substr(l, o + 1, p - o - 1)
				split(substr(l, p + 2), fl, " ")
				if (fl[1] == "D" || (comm ~ /^kcoll/ && fl[2] != 2)) {
					sub(/\/stat$/, "", f)
					print f, fl[1]
				}
			}
			close(f)
		}
	}' /proc/[0-9]*/task/[0-9]*/stat 2>/dev/null
}

# One thread: "tid comm (state) in f1 < f2 < f3" (its kernel stack's top).
where() {
	local t=$1 st=$2 stack
	stack=$(sed -E 's/^\[<[0-9a-f]+>\] //; s/\+0x.*//' "$t/stack" 2>/dev/null |
		grep -vE '^(__schedule|schedule|schedule_timeout|io_schedule)$' |
		head -3 | paste -sd'<' | sed 's/</ < /g')
	echo "${t##*/} $(cat "$t/comm" 2>/dev/null) ($st)${stack:+ in $stack}"
}

stuck=() found=()
while read -r t st; do
	found+=("$t $st")
	stuck+=("$(where "$t" "$st")")
done < <(tasks)
last=$(grep -v '^$' "$out/log" 2>/dev/null | tail -1 | cut -c1-200)
# A VM whose emulated NIC stopped (kcoll_nic_check) hangs its ranks in
# teardown: rxe waits 50 s for each QP's transmitted packets to come
# back. Said first, so that run-vm-tests.sh runs the scenario again.
# shellcheck source=tests/vm/guest-lib.sh
. "$kcoll_top/tests/vm/guest-lib.sh"
kcoll_nic_check
nic=""
[ ${#KCOLL_FAILS[@]} -gt 0 ] && nic="${KCOLL_FAILS[*]}; "
summary="${nic}TIMEOUT: the scenario still ran $((wait + up)) s after boot; stuck: $([ ${#stuck[@]} -gt 0 ] && printf '%s; ' "${stuck[@]}" || echo "no D-state or kcoll task; ")its log's last line: ${last:-none} (see hang.txt)"
echo "$summary"
# Never over a status the scenario wrote meanwhile (noclobber: O_EXCL).
(set -C; printf '%s\n' "${summary:0:1500}" >"$out/status") 2>/dev/null
sync

{
	echo "hang-report: the scenario still runs $((wait + up)) s after boot; the host kills this VM at $tmo s"
	ps -eLo pid,tid,ppid,stat,etimes,wchan:32,args 2>/dev/null || busybox ps
	echo
	for i in "${!found[@]}"; do
		echo "== ${stuck[$i]}"
		cat "${found[$i]% *}/stack" 2>/dev/null
	done
} >"$out/hang.txt" 2>&1
dmesg >"$out/hang-dmesg.txt" 2>/dev/null
sync
