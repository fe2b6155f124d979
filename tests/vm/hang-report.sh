#!/bin/bash
# Guest side of a VM that runs into its timeout: started by guest-init.sh
# beside the scenario, it sleeps $1 seconds (vmrun.sh's -t less a margin)
# and, if the scenario still runs, records where it is stuck before the
# host kills the VM. Without it a timed-out VM leaves "no status" and a
# console nobody in CI sees (stop 56: both VMs of the family run, 1500 s).
#
# What it records, in the results folder:
#   hang.txt        every process (state, kernel wait channel), and the
#                   kernel stack of each one in D state or of kcoll's own
#   hang-dmesg.txt  the kernel log after sysrq-w (blocked tasks' stacks)
#   status          (only if the scenario wrote none yet) one line that
#                   names the stuck processes and the log's last line;
#                   the scenario's own kcoll_finish overwrites it if it
#                   ends after all.
sleep "$1"
out=$kcoll_out/vm$kcoll_vm
[ -d "$out" ] || mkdir -p "$out"

# One process: "pid comm (state) in f1 < f2 < f3" (its kernel stack's top).
where() {
	local p=$1 comm st stack
	comm=$(cat "/proc/$p/comm" 2>/dev/null) || return
	st=$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)
	stack=$(sed -E 's/^\[<[0-9a-f]+>\] //; s/\+0x.*//' "/proc/$p/stack" 2>/dev/null |
		grep -vE '^(__schedule|schedule|schedule_timeout|io_schedule)$' |
		head -3 | paste -sd'<' | sed 's/</ < /g')
	echo "$p $comm ($st)${stack:+ in $stack}"
}

stuck=()
{
	echo "hang-report: the scenario still runs $1 s after it began; the host kills this VM soon"
	ps -eo pid,ppid,stat,etimes,wchan:32,args 2>/dev/null || busybox ps
	echo
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = $$ ] && continue
		st=$(awk '{ print $3 }' "$d/stat" 2>/dev/null)
		comm=$(cat "$d/comm" 2>/dev/null)
		case "$st:$comm" in
		D:* | *:kcoll*) ;;
		*) continue ;;
		esac
		echo "== $(where "$p")"
		cat "$d/stack" 2>/dev/null
	done
} >"$out/hang.txt" 2>&1

for d in /proc/[0-9]*; do
	p=${d#/proc/}
	st=$(awk '{ print $3 }' "$d/stat" 2>/dev/null)
	comm=$(cat "$d/comm" 2>/dev/null)
	case "$st:$comm" in
	D:* | *:kcoll*) stuck+=("$(where "$p")") ;;
	esac
done

echo w >/proc/sysrq-trigger 2>/dev/null
dmesg >"$out/hang-dmesg.txt" 2>/dev/null

last=$(grep -v '^$' "$out/log" 2>/dev/null | tail -1 | cut -c1-200)
# A VM whose emulated NIC stopped (kcoll_nic_check) hangs its ranks in
# teardown: rxe waits 50 s for each QP's transmitted packets to come
# back. Said first, so that run-vm-tests.sh runs the scenario again.
# shellcheck source=tests/vm/guest-lib.sh
. "$kcoll_top/tests/vm/guest-lib.sh"
kcoll_nic_check
nic=""
[ ${#KCOLL_FAILS[@]} -gt 0 ] && nic="${KCOLL_FAILS[*]}; "
summary="${nic}TIMEOUT: the scenario still ran after $1 s; stuck: $( [ ${#stuck[@]} -gt 0 ] && printf '%s; ' "${stuck[@]}" || echo "no D-state or kcoll process; ")its log's last line: ${last:-none} (see hang.txt)"
echo "$summary"
[ -e "$out/status" ] || echo "$summary" | cut -c1-1500 >"$out/status"
sync
