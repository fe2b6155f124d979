# shellcheck shell=bash
# Helpers for scenarios running inside a kcoll test VM (sourced, bash).
# The init script exports kcoll_run, kcoll_out, kcoll_vm, kcoll_nvms,
# kcoll_kver, kcoll_top and optionally kcoll_arg (',' stands for ' ').
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TMPDIR=/tmp LC_ALL=C
KCOLL_OUT=$kcoll_out/vm$kcoll_vm
KCOLL_TOP=$kcoll_top
# kcoll_ko=PATH on the kernel command line (KCOLL_VM_CMDLINE) loads another
# build of the module, e.g. an old commit's from a scratch worktree.
KCOLL_KO=${kcoll_ko:-$KCOLL_TOP/build/$kcoll_kver/kmod/kcoll.ko}
KCOLL_ARG=${kcoll_arg:-}
KCOLL_ARG=${KCOLL_ARG//,/ }
KCOLL_IP=10.9.0.$((kcoll_vm + 1))
KCOLL_FAILS=()
mkdir -p "$KCOLL_OUT"
exec > >(tee -a "$KCOLL_OUT/log") 2>&1

log() { echo "[vm$kcoll_vm] $*"; }
# Record a failure; the scenario goes on so that the log shows everything.
fail() { log "FAIL: $*"; KCOLL_FAILS+=("$*"); }
# The first failed checks of a TAP-like log, on one line: what a failure
# message carries, so that the status (and CI's output) says which check
# failed, not only that one did.
kcoll_why() {
	grep -E '^(not ok|Bail out)' "$1" 2>/dev/null | head -3 | tr '\n' ' ' |
		cut -c1-400
}

# Two-VM scenarios: wait until the other VM reached the same point (flag
# files in the shared results folder); $2 = seconds (default 300).
vm_sync() {
	local i peer=$((1 - kcoll_vm))
	touch "$kcoll_out/vm$kcoll_vm/sync.$1"
	for ((i = 0; i < ${2:-300} * 10; i++)); do
		[ -e "$kcoll_out/vm$peer/sync.$1" ] && return 0
		sleep 0.1
	done
	fail "vm$peer never reached '$1'"
	return 1
}

# Peers' MACs are fixed (vmrun.sh): their neighbour entries are made
# permanent. rxe's traffic is UDP, which never confirms a neighbour, so
# under load the entries went stale every 15-45 s and needed ARP probes
# that the loaded emulated wire could lose; meanwhile rxe's packets
# waited in the ARP queue or were dropped, and 6.1's rxe oopsed
# (rxe_skb_tx_dtor) freeing such a queued packet after its QP was gone.
# A hardware RoCE NIC resolves the MAC once, at connection time.
kcoll_net_up() {
	local j
	ip link set lo up
	if [ -n "${kcoll_mtu:-}" ]; then
		ip link set eth0 mtu "$kcoll_mtu" || fail "eth0 mtu $kcoll_mtu"
	fi
	ip link set eth0 up || { fail "no eth0"; return 1; }
	ip addr add "$KCOLL_IP/24" dev eth0
	for ((j = 0; j < kcoll_nvms; j++)); do
		[ $j = "$kcoll_vm" ] && continue
		ip neigh replace "10.9.0.$((j + 1))" dev eth0 nud permanent \
			lladdr "$(printf '52:54:00:00:00:%02x' $((j + 1)))" ||
			fail "static neighbour 10.9.0.$((j + 1))"
	done
	if [ "$kcoll_nvms" -gt 1 ] && [ -z "${KCOLL_NIC_WATCH:-}" ]; then
		kcoll_nic_watch &
		KCOLL_NIC_WATCH=$!
	fi
}

# eth0's packets handed to the device (its qdisc's "Sent ... pkt"), those
# waiting in the qdisc ("backlog ...p"), and 1 if netem is on: one tc.
kcoll_qdisc_pkts() {
	tc -s qdisc show dev eth0 2>/dev/null |
		awk '/ Sent / && s == "" { s = $4 } / backlog / && b == "" { b = $3 + 0 }
		     / netem / { n = 1 } END { print s + 0, b + 0, n + 0 }'
}

# The guest's side of a stopped transmit queue: the virtio interrupts
# taken per vector (are the device's completions still signalled?), the
# queue's timeouts and bytes the stack counts in flight (BQL).
kcoll_nic_state() {
	local q=/sys/class/net/eth0/queues/tx-0
	echo "$(date +%T) eth0 tx_packets $(cat /sys/class/net/eth0/statistics/tx_packets)" \
		"tx_errors $(cat /sys/class/net/eth0/statistics/tx_errors)" \
		"tx_dropped $(cat /sys/class/net/eth0/statistics/tx_dropped)"
	echo "tx-0: tx_timeout $(cat $q/tx_timeout 2>/dev/null)" \
		"bql inflight $(cat $q/byte_queue_limits/inflight 2>/dev/null)" \
		"limit $(cat $q/byte_queue_limits/limit 2>/dev/null)"
	grep -E 'virtio|CPU' /proc/interrupts
	tc -s qdisc show dev eth0
	# virtio-net's own counters: per queue, the kicks it sent the device.
	ethtool -S eth0 2>&1
}

# The emulated NIC of this test bed can stop for good: once in CI (stop
# 56's second run), and again here 12 s into a 2-VM run, virtio-net's
# transmit queue stopped (NETDEV WATCHDOG) and never came back. Every
# later step of the scenario then waited out its own timeout (a
# bootstrap's 300 s each) until the host killed both VMs at 1500 s, with
# no status. So, beside a multi-VM scenario: if for 20 s the device has
# completed nothing (virtio-net counts tx_packets as it reaps what the
# device handed back, at every transmit) while the stack gave it packets
# or has some waiting, the status says TESTBED_NIC_STUCK (run-vm-tests.sh
# runs the scenario again, up to twice), the file nic-stuck tells vmrun.sh
# to read qemu's side of the queue and end the other VMs, and this one
# powers off once the host says it is done (nic-stuck.seen, 40 s at
# most; kcoll_nic_state() before and after). Not under netem, which
# holds and drops packets on purpose (nor would any other qdisc that
# holds them be told apart: none is used).
kcoll_nic_watch() {
	local f=/sys/class/net/eth0/statistics/tx_packets
	local tx tx0 sent sent0 bl nm stall=0 msg
	read -r tx0 <$f 2>/dev/null || return 0
	read -r sent0 bl nm < <(kcoll_qdisc_pkts)
	while sleep 5; do
		read -r tx <$f 2>/dev/null || return 0
		read -r sent bl nm < <(kcoll_qdisc_pkts)
		if [ "$nm" = 1 ]; then
			stall=0
		elif [ "$tx" = "$tx0" ] && { [ "$sent" != "$sent0" ] || [ "$bl" -gt 0 ]; }; then
			stall=$((stall + 5))
		else
			stall=0
		fi
		tx0=$tx sent0=$sent
		[ $stall -ge 20 ] || continue
		msg="TESTBED_NIC_STUCK: eth0 completed no packet for $stall s while the stack gave it more ($sent sent, $bl waiting; tx_packets stays $tx): the emulated NIC stopped (qemu, below kcoll); this VM powers off"
		# The status first: the log goes through a pipe that may be
		# gone by now.
		echo "$msg" >"$KCOLL_OUT/status"
		kcoll_nic_state >"$KCOLL_OUT/nic-guest.txt" 2>&1
		touch "$KCOLL_OUT/nic-stuck"
		sync
		log "$msg"
		dmesg | grep -m2 'NETDEV WATCHDOG' | sed "s/^/[vm$kcoll_vm] /"
		# vmrun.sh reads qemu's side of the queue through its
		# monitor meanwhile (virtq.txt) and says when it is done.
		local w
		for w in $(seq 1 40); do
			[ -e "$KCOLL_OUT/nic-stuck.seen" ] && break
			sleep 1
		done
		# The host took the link down and up (virtq-dump.py): did
		# the queue move again?
		sleep 1
		{ echo "-- after the host's set_link off/on"; kcoll_nic_state; } \
			>>"$KCOLL_OUT/nic-guest.txt" 2>&1
		read -r tx <$f 2>/dev/null
		log "eth0 tx_packets $tx after the host's link toggle (was $tx0)"
		sync
		echo o >/proc/sysrq-trigger
		sleep 60
	done
}

# Soft-RoCE on eth0; waits until the port is ACTIVE.
kcoll_rxe_up() {
	modprobe rdma_rxe || { fail "modprobe rdma_rxe"; return 1; }
	rdma link add rxe0 type rxe netdev eth0 || { fail "rdma link add"; return 1; }
	local i
	for i in $(seq 1 100); do
		ibv_devinfo -d rxe0 2>/dev/null | grep -q PORT_ACTIVE && return 0
		sleep 0.1
	done
	fail "rxe0 never became ACTIVE"
	return 1
}

kcoll_mod_load() {
	[ -f "$KCOLL_KO" ] || { fail "no module at $KCOLL_KO"; return 1; }
	modprobe ib_core && modprobe rdma_cm || { fail "modprobe ib_core/rdma_cm"; return 1; }
	kcoll_kmemleak_baseline
	echo "kcoll-test: begin $(basename "$kcoll_run")" >/dev/kmsg
	kcoll_marked=1
	# The emulated wire drops packets now and then; rxe resends only after
	# the ACK timeout, so the test bed uses 67 ms (ack_timeout=14, also
	# perftest's default) instead of rdma_cm's 1 s, as for UCX in the
	# Open MPI baseline.
	# kcoll_params=P=V,P=V on the kernel command line (KCOLL_VM_CMDLINE):
	# module parameters for every load (e.g. reg_cache_mb=0).
	local params=${kcoll_params:-}
	# shellcheck disable=SC2086
	insmod "$KCOLL_KO" ack_timeout=14 ${params//,/ } "$@" ||
		{ fail "insmod kcoll"; return 1; }
	[ -c /dev/kcoll ] || { fail "/dev/kcoll missing after insmod"; return 1; }
	log "kcoll loaded: $(cat /sys/class/misc/kcoll/abi_version 2>/dev/null | sed 's/^/ABI /')"
}

# dma-buf exporters for the GPU-memory tests: vgem (both kernels; a DRM
# card), the project's test exporter (tests/kmod: imitates GPU memory),
# and on 6.12 udmabuf and the system dma-heap (built in). A missing one is
# logged; the tests that need it say SKIP and why.
KCOLL_TESTBUF_KO=$KCOLL_TOP/build/$kcoll_kver/testbuf/kcoll_testbuf.ko
kcoll_exporters_up() {
	# Debian's kernels have vgem: failing to load it is a failure. A
	# kernel built without it (the KASAN guest's) has none to load.
	if ! modprobe vgem 2>/dev/null; then
		if modinfo vgem >/dev/null 2>&1; then
			fail "modprobe vgem"
		else
			log "no vgem in this kernel: its dma-buf tests say SKIP"
		fi
	fi
	if [ -f "$KCOLL_TESTBUF_KO" ]; then
		insmod "$KCOLL_TESTBUF_KO" || fail "insmod kcoll_testbuf"
	else
		fail "no $KCOLL_TESTBUF_KO (make testbuf)"
	fi
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	log "exporters: $(ls /sys/module | grep -E '^(vgem|kcoll_testbuf)$' | tr '\n' ' ')$([ -c /dev/udmabuf ] && echo udmabuf) $([ -c /dev/dma_heap/system ] && echo dma-heap)"
}

# Everything the test exporter handed out came back (its live counters are
# 0), and it unloads: nothing of it is still referenced by kcoll.
kcoll_exporters_down() {
	local c=/sys/kernel/debug/kcoll_testbuf/counters
	[ -e /sys/module/kcoll_testbuf ] || return 0
	if [ -r $c ]; then
		awk '$1 ~ /^(buffers|attachments|pins|mappings|vmaps|mmaps)$/ && $2 != 0 { bad = bad " " $1 "=" $2 } END { if (bad) { print bad; exit 1 } }' $c >"$KCOLL_OUT/testbuf-left.txt" ||
			fail "kcoll_testbuf still holds:$(cat "$KCOLL_OUT/testbuf-left.txt")"
		cp $c "$KCOLL_OUT/testbuf-counters.txt"
	fi
	rmmod kcoll_testbuf || fail "rmmod kcoll_testbuf"
}

# Unload, then scan the kernel log written since kcoll_mod_load.
kcoll_mod_unload() {
	local refs i
	# A reference may lag the exits a little: an open file of the module
	# (/dev/kcoll, a debugfs file a snapshot is reading) is released as
	# its process finishes exiting. A reference still held after 15 s is
	# a leak; the processes holding one of the module's files are named.
	for i in $(seq 1 15); do
		refs=$(cat /sys/module/kcoll/refcnt 2>/dev/null)
		[ "$refs" = 0 ] && break
		sleep 1
	done
	if [ "$refs" != 0 ]; then
		fail "module refcount is '$refs' before rmmod (15 s after the ranks exited)"
		for i in /proc/[0-9]*; do
			{ ls -l "$i/fd"; cat "$i/maps"; } 2>/dev/null |
				grep -qE '/dev/kcoll|/debug/kcoll/' &&
				log "holds a kcoll file: ${i#/proc/} $(tr '\0' ' ' <"$i/cmdline")"
		done
	fi
	rmmod kcoll || fail "rmmod kcoll"
	[ -e /sys/module/kcoll ] && fail "kcoll still loaded after rmmod"
	kcoll_kmemleak_scan
	kcoll_klog_check
}

# kmemleak (the KASAN kernel of make check-kasan; Debian's kernels have
# none): what boot and the setup left unreferenced is reported now and
# cleared, so that the scan after rmmod reports only what was lost since.
KCOLL_KMEMLEAK=/sys/kernel/debug/kmemleak
kcoll_kmemleak_baseline() {
	[ -e $KCOLL_KMEMLEAK ] || return 0
	echo scan >$KCOLL_KMEMLEAK && echo clear >$KCOLL_KMEMLEAK ||
		fail "kmemleak baseline scan"
}

# After rmmod: scan (an object counts as lost only after 5 s) and put every
# report into the kernel log, where kcoll_klog_check's scan sees it
# ("kmemleak: unreferenced object ..."); the whole report in kmemleak.txt.
kcoll_kmemleak_scan() {
	[ -e $KCOLL_KMEMLEAK ] || return 0
	sleep 6
	echo scan >$KCOLL_KMEMLEAK || { fail "kmemleak scan"; return 0; }
	cat $KCOLL_KMEMLEAK >"$KCOLL_OUT/kmemleak.txt" 2>&1
	if [ -s "$KCOLL_OUT/kmemleak.txt" ]; then
		log "kmemleak: $(grep -c '^unreferenced object' "$KCOLL_OUT/kmemleak.txt") unreferenced objects (kmemleak.txt)"
		head -400 "$KCOLL_OUT/kmemleak.txt" | while IFS= read -r l; do
			echo "kmemleak: $l" >/dev/kmsg
		done
	else
		log "kmemleak: nothing unreferenced"
	fi
}

# The lines around the first report in dmesg file $1 that tell where it
# came from, joined by " | ".
kcoll_klog_context() {
	awk '
	/kcoll-selftests: |kcoll-test: begin/ && !found { mark = $0 }
	!found && /BUG|WARNING:|Oops|general protection|[Oo]verwritten|KASAN/ {
		found = 1; if (mark != "") out = mark; left = 60
	}
	found && left-- > 0 && n < 14 &&
	    /Allocated in|Freed in|Object 0x|@offset|RIP: |kcoll_|rxe_|ib_|rdma_|cma_/ {
		sub(/^\[ *[0-9.]+\] */, ""); out = out " | " $0; n++
	}
	END { print substr(out, 1, 2000) }' "$1"
}

# Any BUG/WARNING/Oops/leak report since the scenario began fails the run.
kcoll_klog_check() {
	dmesg >"$KCOLL_OUT/dmesg.txt"
	local bad
	# Lockdep (the KASAN kernel) stops at its first report: off means
	# that something, maybe before this scenario began, was reported.
	# The marker gone: the ring buffer wrapped, and what scrolled out of
	# it (a report, maybe) cannot be scanned.
	if [ -n "${kcoll_marked:-}" ] && ! grep -q 'kcoll-test: begin' "$KCOLL_OUT/dmesg.txt"; then
		fail "the kernel log wrapped: 'kcoll-test: begin' is no longer in it, so reports from before may be lost (log_buf_len)"
	fi
	if [ -r /proc/lockdep_stats ] && grep -qE 'debug_locks: +0$' /proc/lockdep_stats; then
		fail "lockdep turned itself off (debug_locks 0): a report in dmesg.txt, maybe before the scenario began"
	fi
	if ! bad=$("$KCOLL_TOP/tests/vm/klog-scan.sh" "$KCOLL_OUT/dmesg.txt"); then
		fail "kernel log reports problems (see dmesg.txt): $(echo "$bad" | head -3)"
		# What the host's log keeps of it: the test that was running,
		# where the object was allocated and freed (slub_debug=U),
		# the frames that name kcoll or RDMA.
		bad=$(kcoll_klog_context "$KCOLL_OUT/dmesg.txt")
		[ -z "$bad" ] || fail "report context: $bad"
	else
		log "kernel log clean"
	fi
}

# Write the status file the host waits for: "ok" or the failures.
kcoll_finish() {
	if [ -n "${KCOLL_NIC_WATCH:-}" ]; then
		kill "$KCOLL_NIC_WATCH" 2>/dev/null
	fi
	if [ ${#KCOLL_FAILS[@]} -eq 0 ]; then
		echo ok >"$KCOLL_OUT/status"
	else
		kcoll_nic_check
		printf '%s\n' "${KCOLL_FAILS[@]}" >"$KCOLL_OUT/status"
	fi
	sync
}

# After a failure: whether eth0 still sends. virtio-net counts a packet
# sent when the device hands it back, so a device that stopped taking
# them counts nothing while ping asks ARP for an address nobody has.
# Seen: a guest whose transmit queue stopped for good under load
# (docs/PERFORMANCE.md, "Open questions"), and once in CI (stop 56) a
# guest whose rxe QPs then held transmitted packets for 50 s at destroy
# (rxe's WARN in __rxe_cleanup). The status says so (TESTBED_NIC_STUCK),
# and run-vm-tests.sh runs the scenario once more. Not under netem, whose
# losses would read the same.
kcoll_nic_check() {
	local f=/sys/class/net/eth0/statistics/tx_packets before i
	[ -r $f ] || return 0
	# Only a NIC that is up with its address can be asked (a scenario
	# that never brought eth0 up, or failed to, sends nothing anyway).
	[ "$(cat /sys/class/net/eth0/operstate 2>/dev/null)" = up ] || return 0
	ip -4 addr show dev eth0 2>/dev/null | grep -qF "inet $KCOLL_IP/" || return 0
	tc qdisc show dev eth0 2>/dev/null | grep -q netem && return 0
	before=$(cat $f)
	for i in 1 2 3; do
		busybox ping -c1 -W1 10.9.0.254 >/dev/null 2>&1
		[ "$(cat $f)" != "$before" ] && return 0
	done
	fail "TESTBED_NIC_STUCK: eth0 sent nothing in 3 s (tx_packets stays $before): the emulated NIC stopped"
}

# Wait until every VM of the run answers on eth0 (the ranks bootstrap
# through vm0).
kcoll_peers_up() {
	local j ip i
	for ((j = 0; j < kcoll_nvms; j++)); do
		[ $j = "$kcoll_vm" ] && continue
		ip=10.9.0.$((j + 1))
		for i in $(seq 1 120); do busybox ping -c1 -W1 "$ip" >/dev/null 2>&1 && break; done
		busybox ping -c1 -W2 "$ip" >/dev/null || fail "peer $ip unreachable over eth0"
	done
}

# A lossy network (coll.sh netem=): eth0, which carries rxe0's packets
# and the bootstrap's, sends through netem with the qdisc arguments $1
# ("loss 1% duplicate 1% delay 2ms 1ms reorder 10%"). rxe recovers as a
# RoCE NIC does: resends after the ACK timeout, or at once on a NAK for a
# packet out of sequence; kcoll must see every collective complete, with
# the right result, or fail it with an error, never corrupt it.
kcoll_netem_on() {
	modprobe sch_netem || { fail "modprobe sch_netem"; return 1; }
	# shellcheck disable=SC2086
	tc qdisc add dev eth0 root netem $1 || { fail "tc netem $1"; return 1; }
	kcoll_rxe_counters >"$KCOLL_OUT/rxe-counters-before.txt"
	log "netem on eth0: $(tc qdisc show dev eth0 | head -1)"
}

# rxe0's port counters, one "name value" per line.
kcoll_rxe_counters() {
	local f
	for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
		[ -f "$f" ] && echo "${f##*/} $(cat "$f")"
	done
}

# The netem qdisc's drops and what rxe did about them; with SPEC $1
# asking for loss, none dropped or none resent fails (the run did not
# test what it says). Then eth0 is plain again.
kcoll_netem_off() {
	local st dropped resent=0 n v
	st=$(tc -s qdisc show dev eth0)
	dropped=$(echo "$st" | awk '/dropped/ { sub(",", "", $7); print $7; exit }')
	kcoll_rxe_counters >"$KCOLL_OUT/rxe-counters-after.txt"
	while read -r n v; do
		case $n in
		completer_retry_err | rcvd_seq_err | out_of_seq_request | duplicate_request)
			v=$((v - $(awk -v n="$n" '$1 == n { print $2 }' "$KCOLL_OUT/rxe-counters-before.txt")))
			resent=$((resent + v))
			log "netem: rxe0 $n +$v" ;;
		esac
	done <"$KCOLL_OUT/rxe-counters-after.txt"
	log "netem: $(echo "$st" | tr '\n' ' ')"
	case $1 in
	*loss*)
		[ "${dropped:-0}" -gt 0 ] || fail "netem dropped nothing"
		[ "$resent" -gt 0 ] || fail "netem: rxe0 saw no resend or duplicate" ;;
	esac
	tc qdisc del dev eth0 root || fail "tc qdisc del"
}

# kcoll_kperf NAME PORT ARGS...: this VM's ranks (${ppn:-2} per VM, ranks
# numbered VM by VM, bootstrapping through vm0 at PORT) of one kcoll-perf
# run with ARGS, each rank's output in NAME-rankR.txt, each given
# ${KCOLL_KPERF_TIMEOUT:-900} s; waits for them. KCOLL_NRANKS and
# KCOLL_SECRET come from the caller's environment.
kcoll_kperf() {
	local name=$1 port=$2 n=${ppn:-2} r p kp=()
	shift 2
	for r in $(seq $((n * kcoll_vm)) $((n * kcoll_vm + n - 1))); do
		KCOLL_ROOT=10.9.0.1:$port KCOLL_RANK=$r \
			timeout -k 10 "${KCOLL_KPERF_TIMEOUT:-900}" \
			"$KCOLL_TOP/build/tools/kcoll-perf" "$@" >"$KCOLL_OUT/$name-rank$r.txt" 2>&1 &
		kp+=($!)
	done
	for p in "${kp[@]}"; do
		wait "$p" || fail "kcoll-perf $name failed (see $name-rank*.txt)"
	done
}

# What the RDMA core holds before any rank runs (kcoll's PD and
# registration QP per device): kcoll_res_check compares with it.
kcoll_res_baseline() {
	rdma res show >"$KCOLL_OUT/rdma-res-before.txt" 2>&1
	rdma res show qp >"$KCOLL_OUT/rdma-qp-before.txt" 2>&1
}

# Every process is gone: so must be every connection's RC QP, every
# resource count, every context and every request. Teardown may lag a
# little behind the exits.
kcoll_res_check() {
	local i v s
	rc_qps() { grep -c "type RC" "$1"; }
	for i in $(seq 1 60); do
		rdma res show qp >"$KCOLL_OUT/rdma-qp.txt" 2>&1
		[ "$(rc_qps "$KCOLL_OUT/rdma-qp.txt")" = "$(rc_qps "$KCOLL_OUT/rdma-qp-before.txt")" ] && break
		sleep 1
	done
	if [ "$(rc_qps "$KCOLL_OUT/rdma-qp.txt")" != "$(rc_qps "$KCOLL_OUT/rdma-qp-before.txt")" ]; then
		fail "RC QPs left after every rank exited: $(rc_qps "$KCOLL_OUT/rdma-qp.txt"), $(rc_qps "$KCOLL_OUT/rdma-qp-before.txt") before"
		grep "type RC" "$KCOLL_OUT/rdma-qp.txt" | head -5
	fi
	# A device deleted and added back (coll.sh gpufault-R) has another
	# index ("0: rxe0: pd ..."): the counts are what must match.
	sed -Ei 's/^[0-9]+: //' "$KCOLL_OUT/rdma-res-before.txt"
	for i in $(seq 1 30); do
		rdma res show 2>&1 | sed -E 's/^[0-9]+: //' >"$KCOLL_OUT/rdma-res-after.txt"
		cmp -s "$KCOLL_OUT/rdma-res-before.txt" "$KCOLL_OUT/rdma-res-after.txt" && break
		sleep 1
	done
	cmp -s "$KCOLL_OUT/rdma-res-before.txt" "$KCOLL_OUT/rdma-res-after.txt" ||
		fail "rdma res not back to baseline: $(tr '\n' ' ' <"$KCOLL_OUT/rdma-res-before.txt") -> $(tr '\n' ' ' <"$KCOLL_OUT/rdma-res-after.txt")"
	for s in contexts inflight; do
		v=$(cat /sys/class/misc/kcoll/stats/$s 2>/dev/null || echo 0)
		[ "$v" = 0 ] || fail "kcoll stats/$s is $v after every rank exited"
	done
}
