#!/bin/bash
# Overlap cost (issue 21): every rank runs a dense fp32 matrix multiply,
# timed per iteration, alone and then beside a stream of 16 MiB
# allreduces (tools/kcoll-overlap.py), for kcoll and its peers in one boot
# of two VMs, one rank per VM (the multiply and the communication share
# the VM's one vCPU, as compute and communication kernels share a GPU's
# SMs in the seeds' measurement):
#   - torch.distributed "kcoll" and "gloo", interleaved in one process;
#   - Open MPI over TCP, over UCX (rxe), and over TCP with
#     LD_PRELOAD=libkcoll-mpi.so (kcoll under MPI), interleaved by round.
# Each line: compute rate alone and beside, the slowdown, and the
# allreduce throughput alone and beside, then where the VM's CPU went
# (the multiply's thread; user, system, irq, idle); summary.txt has the
# medians.
# Not in make check (about 15 minutes): make overlap.
#
#   tests/vm/vmrun.sh -k KVER -n 2 -m 1536 -o OUT -t 2400 [-a "ROUNDS SECONDS"] \
#       tests/vm/scenarios/overlap.sh
. "$kcoll_top/tests/vm/guest-lib.sh"

# shellcheck disable=SC2086
set -- $KCOLL_ARG
rounds=${1:-3}
secs=${2:-8}
ppn=1
np=2
peer=10.9.0.$((2 - kcoll_vm))
rexec_port=2222
mpi_procs="python3"
TOOL=$KCOLL_TOP/tools/kcoll-overlap.py
PRE=$KCOLL_TOP/build/mpi/libkcoll-mpi.so

kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
kcoll_res_baseline
# shellcheck source=tests/vm/mpi-lib.sh
. "$kcoll_top/tests/vm/mpi-lib.sh"

# 1. torch: kcoll and gloo in one process per rank.
PYTHONPATH=$KCOLL_TOP/build/python MASTER_ADDR=10.9.0.1 MASTER_PORT=29660 \
	RANK=$kcoll_vm WORLD_SIZE=2 GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 \
	timeout -k 10 1200 /usr/bin/python3 -u "$TOOL" --torch -r "$rounds" -s "$secs" \
	>"$KCOLL_OUT/torch.txt" 2>&1 || fail "kcoll-overlap --torch failed (torch.txt)"
grep -E '^(overlap|where)' "$KCOLL_OUT/torch.txt"

# 2. MPI, from VM 0: the transports interleaved round by round.
if [ "$kcoll_vm" = 0 ]; then
	for r in $(seq 1 "$rounds"); do
		for t in tcp ucx kcoll; do
			tr=$t extra=()
			if [ "$t" = kcoll ]; then
				tr=tcp
				extra=(-x "LD_PRELOAD=$PRE")
			fi
			# shellcheck disable=SC2046
			timeout -k 15 600 mpirun "${mpi_common[@]}" $(transport_args "$tr") \
				-x KCOLL_OVERLAP_THREAD_SINGLE=1 "${extra[@]}" \
				/usr/bin/python3 "$TOOL" --mpi -r 1 -s "$secs" \
				>"$KCOLL_OUT/mpi-$t-$r.txt" 2>&1 ||
				fail "kcoll-overlap --mpi over $t (round $r) failed"
			mpi_cleanup
			sed -n -e "s/^overlap mpi[+a-z]* round 0/overlap mpi-$t round $r/p" \
				-e "s/^where mpi[+a-z]* round 0/where mpi-$t round $r/p" \
				"$KCOLL_OUT/mpi-$t-$r.txt"
		done
	done | tee "$KCOLL_OUT/mpi.txt"
	# Medians per system: slowdown %, throughput beside / alone.
	# And where the VM's CPU went beside the allreduces: the multiply's
	# thread, and the kernel's share (system + irq).
	{ grep -hE '^(overlap|where)' "$KCOLL_OUT/torch.txt" "$kcoll_out/vm1/torch.txt" 2>/dev/null
	  cat "$KCOLL_OUT/mpi.txt"; } | /usr/bin/python3 -c '
import re, statistics, sys
rows, cpu = {}, {}
for line in sys.stdin:
    m = re.match(r"overlap (\S+) .*slowdown (-?[0-9.]+) %.*\(([0-9.]+)x\)$", line)
    if m:
        rows.setdefault(m[1], []).append((float(m[2]), float(m[3])))
    m = re.match(r"where (\S+) .*multiply thread ([0-9]+)% .*node beside: "
                 r"user ([0-9]+)% system ([0-9]+)% irq ([0-9]+)%", line)
    if m:
        cpu.setdefault(m[1], []).append((float(m[2]), float(m[4]) + float(m[5])))
for k in sorted(rows):
    v = rows[k]
    c = cpu.get(k, [])
    where = (f"; beside: multiply thread {statistics.median(x for x, _ in c):.0f} %, "
             f"kernel (system + irq) {statistics.median(y for _, y in c):.0f} % of the VM"
             if c else "")
    print(f"overlap summary {k}: median compute slowdown "
          f"{statistics.median(x for x, _ in v):.1f} %, median throughput beside/alone "
          f"{statistics.median(y for _, y in v):.2f} ({len(v)} samples){where}")
' | tee "$KCOLL_OUT/summary.txt"
	vm_sync overlap-done 60
else
	vm_sync overlap-done 2400
fi
kcoll_res_check
kcoll_mod_unload
kcoll_finish
