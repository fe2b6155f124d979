#!/bin/bash
# Boot a virtual cluster of N qemu VMs (TCG) running Debian's kernel KVER,
# linked on one virtual Ethernet segment, each running SCENARIO (a bash
# script, executed inside the VM against the host's root filesystem).
#
# Usage: tests/vm/vmrun.sh -k KVER -n NVMS -o OUTDIR [-t SECONDS]
#                          [-m MEM_MB] [-c CPUS] [-a ARG] SCENARIO
#        tests/vm/vmrun.sh -K KDIR -n NVMS -o OUTDIR ... SCENARIO
#
# -K boots a kernel built here instead of Debian's (tools/kasan-kernel.sh:
# KDIR/bzImage, its release in KDIR/kver, its modules under
# KDIR/mods/lib/modules/<kver>, never in the host's /lib/modules). The
# guest bind-mounts that modules folder over /lib/modules (tests/vm/init),
# so modprobe and the kernel's request_module find them; kcoll.ko comes
# from build/<kver>/kmod as for any kernel.
#
# Results: OUTDIR is shared read-write with every VM; VM i writes under
# OUTDIR/vm<i>/ and its console goes to OUTDIR/vm<i>.console. The exit code
# is 0 only if every VM wrote OUTDIR/vm<i>/status containing "ok".
#
# Network: VM i has eth0 = 52:54:00:00:00:<i+1>, address 10.9.0.<i+1>/24.
# One VM gets a private user-mode NIC; several VMs share a multicast
# socket hub on the loopback interface (qemu -netdev socket,mcast=).
# Environment: KCOLL_VM_MTU sets the guests' eth0 MTU (e.g. 9000, which
# gives rxe 4096-byte packets; default 1500: 1024-byte packets),
# KCOLL_VM_CPU the guest CPU model, KCOLL_VM_CMDLINE extra kernel
# arguments, KCOLL_VM_NICOPT extra virtio-net-pci properties (from a
# comma: ",rx_queue_size=1024"), KCOLL_VM_SLOWIO=1 slow links: strace
# stops every thread of every qemu at each of its system calls (their
# sends to the hub among them), which slows what the emulated NICs carry
# several times over; the vCPUs, which make few system calls, less so.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
kver="" kdir="" nvms=1 out="" tmo=600 mem="" cpus="" arg=""
while getopts "k:K:n:o:t:m:c:a:" o; do
	case $o in
	k) kver=$OPTARG ;; K) kdir=$OPTARG ;; n) nvms=$OPTARG ;; o) out=$OPTARG ;;
	t) tmo=$OPTARG ;; m) mem=$OPTARG ;; c) cpus=$OPTARG ;; a) arg=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
scenario=${1:?usage: vmrun.sh -k KVER -n N -o OUT SCENARIO}
scenario=$(realpath "$scenario")
modbase=""
if [ -n "$kdir" ]; then
	kdir=$(realpath "$kdir")
	kver=$(cat "$kdir/kver" 2>/dev/null) || { echo "vmrun: no $kdir/kver (make kasan)" >&2; exit 2; }
	kernel=$kdir/bzImage
	modbase=$kdir/mods
	[ -d "$modbase/lib/modules/$kver" ] || { echo "vmrun: no $modbase/lib/modules/$kver" >&2; exit 2; }
fi
[ -n "$kver" ] && [ -n "$out" ] || { echo "vmrun: -k (or -K) and -o are required" >&2; exit 2; }
[ -n "$kdir" ] || kernel=/boot/vmlinuz-$kver
[ -r "$kernel" ] || { echo "vmrun: cannot read $kernel" >&2; exit 2; }
command -v qemu-system-x86_64 >/dev/null || { echo "vmrun: qemu-system-x86_64 missing" >&2; exit 2; }
[ "${KCOLL_VM_SLOWIO:-0}" != 1 ] || command -v strace >/dev/null ||
	{ echo "vmrun: KCOLL_VM_SLOWIO needs strace (tools/install-deps.sh)" >&2; exit 2; }

mkdir -p "$out"
out=$(realpath "$out")
# A kernel of -K gets its own (its modules folder may differ from
# /lib/modules/<kver>).
initrd=$top/build/vm/initrd-$kver${kdir:+-${kdir##*/}}.gz
if [ ! -f "$initrd" ] || [ "$here/init" -nt "$initrd" ] || [ "$here/mkinitrd.sh" -nt "$initrd" ] ||
	{ [ -n "$kdir" ] && [ "$kernel" -nt "$initrd" ]; }; then
	mkdir -p "$top/build/vm"
	"$here/mkinitrd.sh" "$kver" "$initrd" ${modbase:+"$modbase"} || exit 2
fi

# Share the host's 2 cores: one vCPU each when several VMs run.
[ -n "$cpus" ] || { [ "$nvms" -gt 1 ] && cpus=1 || cpus=2; }
[ -n "$mem" ] || { [ "$nvms" -gt 1 ] && mem=1024 || mem=2048; }
port=$((20000 + ($$ % 20000)))
# Each VM's qemu monitor (HMP) on a socket of its own, kept short of the
# 108-byte limit of a socket's path: read by tests/vm/virtq-dump.py when a
# guest says its NIC stopped.
mondir=$(mktemp -d /tmp/kcoll-mon.XXXXXX) || exit 2
trap 'rm -rf "$mondir"' EXIT
hub="socket,mcast=230.0.$((RANDOM % 250)).$((RANDOM % 250 + 1)):$port,localaddr=127.0.0.1"

# One line per queue of virtq-dump.py's last round, and again after its
# link toggle: qemu's indices and the ring's own, enough to tell a kick
# qemu never took from one it sat on.
virtq_summary() {
	awk '/^-- round/ { sec = "stuck" } /^-- after/ { sec = "after set_link off/on" }
	     /queue_index:/ { q = $2 } /used_idx:/ { u = $2 } /signalled_used:/ { su = $2 }
	     /last_avail_idx:/ { la = $2 } /shadow_avail_idx:/ { sa = $2 } /inuse:/ { iu = $2 }
	     /in guest memory:/ { sub(/^ *in guest memory: */, "")
		line[sec, q] = sprintf("%s, queue %s: inuse %s last_avail %s shadow_avail %s used %s signalled %s; %s",
				       sec, q, iu, la, sa, u, su, $0) }
	     END { split("stuck|after set_link off/on", ss, "|")
		   for (k = 1; k <= 2; k++) for (i = 0; i <= 1; i++)
			if ((ss[k], i) in line) print line[ss[k], i] }' "$1" 2>/dev/null
	grep -m1 '^virtq-dump:' "$1" 2>/dev/null
}

# Boot the VMs and wait for them; 0 only if each reported ok.
run_vms() {
	local i mac net cmdline qrc rc=0 pids=()
	for ((i = 0; i < nvms; i++)); do
		rm -rf "$out/vm$i"
		mkdir -p "$out/vm$i"
		mac=$(printf '52:54:00:00:00:%02x' $((i + 1)))
		if [ "$nvms" -gt 1 ]; then
			net="$hub,id=n0"
		else
			net="user,id=n0,restrict=on"
		fi
		# log_buf_len: the scan at the end (klog-scan.sh) reads dmesg; with
		# the default 128 KiB a selftests run had wrapped it about 390 s in
		# (2026-12-06), so a report from its first half would have gone
		# unseen. guest-lib.sh fails a run whose marker has scrolled out.
		cmdline="console=ttyS0 quiet loglevel=4 panic=-1 oops=panic log_buf_len=16M"
		cmdline+=" kcoll_run=$scenario kcoll_out=$out kcoll_vm=$i kcoll_nvms=$nvms"
		cmdline+=" kcoll_kver=$kver kcoll_top=$top kcoll_tmo=$tmo"
		[ -n "$modbase" ] && cmdline+=" kcoll_moddir=$modbase/lib/modules"
		[ -n "$arg" ] && cmdline+=" kcoll_arg=${arg// /,}"
		# The guests' eth0 MTU (KCOLL_VM_MTU; default the netdev's 1500).
		[ -n "${KCOLL_VM_MTU:-}" ] && cmdline+=" kcoll_mtu=$KCOLL_VM_MTU"
		# Guest CPU: qemu's "max" without CMPXCHG16B (KCOLL_VM_CPU overrides).
		# With it, 6.12 guests under multi-threaded TCG died about one run
		# in three of a corrupted SLUB freelist (double fault in kmalloc from
		# rxe), with this tree and with older ones; 6.12's lockless SLUB fast
		# path is built on this_cpu cmpxchg128. Without it (or with
		# slub_debug, which bypasses that path) 5 runs out of 5 were clean.
		# docs/PERFORMANCE.md, "Open questions".
		# Extra guest kernel arguments for debugging, e.g. slub_debug=FZPU.
		[ -n "${KCOLL_VM_CMDLINE:-}" ] && cmdline+=" $KCOLL_VM_CMDLINE"
		timeout --foreground -k 10 "$tmo" qemu-system-x86_64 \
			-machine q35 -accel tcg,thread=multi -cpu "${KCOLL_VM_CPU:-max,-cx16}" -smp "$cpus" -m "$mem" \
			-nographic -no-reboot -nodefaults -serial stdio \
			-kernel "$kernel" -initrd "$initrd" -append "$cmdline" \
			-virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap \
			-virtfs "local,path=$out,mount_tag=results,security_model=none,multidevs=remap" \
			-netdev "$net" -device "virtio-net-pci,id=nic0,netdev=n0,mac=$mac,romfile=${KCOLL_VM_NICOPT:-}" \
			-monitor "unix:$mondir/vm$i,server=on,wait=off" \
			</dev/null >"$out/vm$i.console" 2>&1 &
		pids+=($!)
	done
	if [ "${KCOLL_VM_SLOWIO:-0}" = 1 ]; then
		local q qs=()
		sleep 1
		for ((i = 0; i < nvms; i++)); do
			q=$(pgrep -P "${pids[$i]}" -f qemu-system-x86_64 | head -1)
			[ -n "$q" ] || { echo "vmrun: vm$i: no qemu to slow" >&2; rc=1; continue; }
			strace -f -qq -e trace=sendto -o /dev/null -p "$q" &
			qs+=("$q")
		done
		# Attached, or the run is not what it says (ptrace refused).
		sleep 1
		for q in "${qs[@]}"; do
			[ "$(awk '/^TracerPid:/ { print $2 }' "/proc/$q/status" 2>/dev/null)" != 0 ] ||
				{ echo "vmrun: strace could not attach to qemu $q" >&2; rc=1; }
		done
	fi

	# A VM whose emulated NIC stopped while its scenario ran says so
	# (guest-lib.sh, kcoll_nic_watch: the file nic-stuck, and its status)
	# and powers off: the others would only wait for it until their
	# timeouts, so they are ended too.
	local alive stuck="" stuck_at=0 p
	while [ "$nvms" -gt 1 ]; do
		alive=0
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null && alive=$((alive + 1))
		done
		[ $alive = 0 ] && break
		if [ -z "$stuck" ]; then
			stuck=$(find "$out" -mindepth 2 -maxdepth 2 -name nic-stuck 2>/dev/null | head -1)
			if [ -n "$stuck" ]; then
				stuck=$(basename "$(dirname "$stuck")")
				echo "vmrun: $stuck's emulated NIC stopped; ending the other VMs" >&2
				# qemu's view of the stopped queue, while the
				# guest waits for nic-stuck.seen to power off.
				timeout 30 /usr/bin/python3 "$here/virtq-dump.py" "$mondir/$stuck" \
					>"$out/$stuck/virtq.txt" 2>&1
				touch "$out/$stuck/nic-stuck.seen"
				virtq_summary "$out/$stuck/virtq.txt" | sed "s/^/vmrun:   $stuck qemu| /" >&2
				# The stuck one notes what the toggle did
				# and powers off by itself.
				for ((i = 0; i < nvms; i++)); do
					[ "vm$i" = "$stuck" ] || kill "${pids[$i]}" 2>/dev/null
				done
				stuck_at=$SECONDS
			fi
		elif [ $((SECONDS - stuck_at)) -gt 60 ]; then
			# It did not power off within a minute.
			kill "${pids[${stuck#vm}]}" 2>/dev/null
		fi
		sleep 2
	done
	for ((i = 0; i < nvms; i++)); do
		wait "${pids[$i]}"
		qrc=$?
		if [ "vm$i" = "$stuck" ]; then
			# qemu's own word on the device, if it said any: a
			# virtio_error() (a ring it found corrupt, say) stops
			# the queue for good, as would a backend that never
			# completes (not seen in qemu 7.2's socket code).
			grep -a '^qemu-system' "$out/vm$i.console" |
				grep -v 'terminating on signal' | head -3 |
				sed "s/^/vmrun:   vm$i qemu| /" >&2
		elif [ -n "$stuck" ]; then
			echo "vmrun: vm$i ended: $stuck's NIC stopped" >&2
		elif [ $qrc -eq 124 ] || [ $qrc -eq 137 ]; then
			echo "vmrun: vm$i timed out after ${tmo}s (console: $out/vm$i.console); its last lines:" >&2
			# What CI prints is all a reader of its run gets: the
			# console's end (the scenario's log, the kernel's
			# reports: a soft lockup, a hung task) goes with it.
			sed 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1b[c=>]//g; s/\r//g' "$out/vm$i.console" |
				grep -av '^[[:space:]]*$' | tail -n 15 |
				cut -c1-240 | sed "s/^/vmrun:   vm$i| /" >&2
			rc=1
		fi
		if ! grep -qx ok "$out/vm$i/status" 2>/dev/null; then
			echo "vmrun: vm$i did not report ok: $(head -c 300 "$out/vm$i/status" 2>/dev/null || echo 'no status')" >&2
			rc=1
		fi
	done
	return $rc
}

# Every VM that failed died in its kernel before the guest's own code ran:
# its results folder is empty (guest-init.sh writes there first thing),
# its console shows a panic, and no kcoll module is in its oops. Seen once
# on 2026-12-07: a 6.12 guest under multi-threaded TCG oopsed on int3 in
# sched_clock_idle_wakeup_event() 2.5 s into its boot (the kernel's own
# text patching), nothing of ours loaded.
died_booting() {
	local i any=false
	for ((i = 0; i < nvms; i++)); do
		grep -qx ok "$out/vm$i/status" 2>/dev/null && continue
		[ -z "$(ls -A "$out/vm$i" 2>/dev/null)" ] || return 1
		grep -q 'Kernel panic' "$out/vm$i.console" 2>/dev/null || return 1
		grep -q "Modules linked in:.*kcoll" "$out/vm$i.console" && return 1
		any=true
	done
	$any
}

run_vms && exit 0
# One more boot for such a death, said and kept: never for a failure of
# anything the tests loaded or ran.
if died_booting; then
	for ((i = 0; i < nvms; i++)); do
		[ -f "$out/vm$i.console" ] && mv "$out/vm$i.console" "$out/vm$i.console.boot1"
	done
	echo "vmrun: a guest kernel died while booting, before anything of kcoll ran (console kept as vm*.console.boot1): booting again, once" >&2
	run_vms && exit 0
fi
exit 1
