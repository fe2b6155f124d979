#!/bin/bash
# A quick look at the test bed's link against kcoll's two-way collectives,
# in one boot of two VMs (about 4 minutes; make bench takes 15):
#   - ib_write_bw VM 1 -> VM 0, one way, then both ways at once (-b);
#   - kcoll-perf allgather and allreduce at 16 MiB, 4 ranks (2 per VM);
#   - ib_write_bw one way again;
#   - rxe's counters and the guests' network counters (drops, retries).
# For test-bed experiments (KCOLL_VM_MTU, KCOLL_VM_NICOPT, host settings);
# not part of make check. Usage:
#   tests/vm/vmrun.sh -k KVER -n 2 -o OUT -t 1200 tests/vm/scenarios/link-vs-kcoll.sh
# then OUT/vm1/bw-*.txt (perftest), OUT/vm0/kperf-*-rank0.txt, OUT/vm*/net.txt.
. "$kcoll_top/tests/vm/guest-lib.sh"

ppn=2

# perftest NAME ARGS...: ib_write_bw's server on VM 0, client on VM 1.
perftest() {
	local name=$1 i
	shift
	if [ "$kcoll_vm" = 0 ]; then
		timeout 180 ib_write_bw "$@" >"$KCOLL_OUT/$name.txt" 2>&1 ||
			fail "$name: server failed"
		return
	fi
	for i in $(seq 1 100); do
		timeout 120 ib_write_bw "$@" 10.9.0.1 >"$KCOLL_OUT/$name.txt" 2>&1 && return
		sleep 0.5
	done
	fail "$name: client never completed"
}

kcoll_net_up
kcoll_rxe_up
kcoll_peers_up
kcoll_mod_load
vm_sync loaded 120

bw=(-d rxe0 -x 1 -s 65536 -n 600 -F)
perftest bw-oneway "${bw[@]}"
vm_sync bw-oneway 200
perftest bw-bothways "${bw[@]}" -b
vm_sync bw-bothways 200

export KCOLL_NRANKS=$((2 * ppn)) KCOLL_BOOTSTRAP_TIMEOUT_MS=120000
export KCOLL_SECRET=6b636f6c6c2d6c696e6b2d636865636b
kcoll_kperf kperf-allgather 29901 -M -c allgather -b 16M -e 16M -n 3 -w 1
kcoll_kperf kperf-allreduce 29902 -M -c allreduce -b 16M -e 16M -n 3 -w 1
vm_sync kperf 600

perftest bw-oneway-after "${bw[@]}"
vm_sync bw-after 200

{
	echo "== rxe0"
	(cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep -H . ./* | grep -v ':0$')
	echo "== softnet_stat (processed, dropped, squeezed)"
	cat /proc/net/softnet_stat
	echo "== eth0"
	ip -s link show eth0
} >"$KCOLL_OUT/net.txt" 2>&1
if [ "$kcoll_vm" = 1 ]; then
	for f in bw-oneway bw-bothways bw-oneway-after; do
		log "$f: $(awk '$1 == 65536 && NF >= 5 { printf "%.2f MB/s (perftest MiB/s x 1.048576)\n", $4 * 1.048576 }' "$KCOLL_OUT/$f.txt")"
	done
fi
if [ "$kcoll_vm" = 0 ]; then
	for c in allgather allreduce; do
		log "kcoll $c 16 MiB: $(awk '$1 == 16777216 { print $6 " us, busbw " $8 " MB/s" }' "$KCOLL_OUT/kperf-$c-rank0.txt")"
	done
fi
kcoll_mod_unload
kcoll_finish
