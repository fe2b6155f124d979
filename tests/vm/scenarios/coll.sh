#!/bin/bash
# Collectives through libcoll across VMs: every VM brings up Soft-RoCE and
# kcoll, then runs its share of the ranks of kcoll-colltest (the whole
# correctness matrix, then the negative tests: signature mismatch, wrong
# key, a rank dying mid-allreduce), optionally kcoll-perf; at the end no
# kcoll QP may be left and the module must unload with a clean kernel log.
#
# Usage (2 VMs, 4 ranks):
#   tests/vm/vmrun.sh -k KVER -n 2 -o build/vmtest/coll -t 2400 \
#       -a "4" tests/vm/scenarios/coll.sh
# The argument (vmrun.sh -a; its words reach us in $KCOLL_ARG):
#   NRANKS [quick|full] [perf] [noneg]
#   NRANKS  total ranks (default 2 per VM), spread in blocks of
#           ceil(NRANKS / VMs): "4" on 2 VMs is ranks 0,1 on vm0 and 2,3
#           on vm1; "3" is 0,1 on vm0 and 2 on vm1
#   quick   kcoll-colltest -q (small counts and one 1M case per
#           collective); full: -F; default: the default run
#   perf    also run kcoll-perf -c all (rank 0's table in perf.txt)
#   noneg   skip the negative tests (-M, -K, -X); negonly: only those
#   die=N   only the dying-rank test, N times in a row: odd runs the
#           dying rank kills itself with SIGKILL, even runs it _exit()s
#   prio    only kcoll-priobench (64 KiB urgent allreduce alone and behind
#           a 256 MiB one; prio=SIZE for another bulk size), first with
#           sysfs prio_sched=1 (priorities), then 0 (FIFO)
#   algo=C:A force algorithm A for collective C (sysfs algo/C), e.g.
#           algo=allreduce:ring; repeatable
#   demo    only kcoll-perf, small sizes (what make demo shows)
#   benchsmall  only kcoll-perf, make bench's small sizes (8 B to 512 KiB)
#   big     only kcoll-perf, allreduce at 16 MiB; big=C: collective C from
#           2 to 16 MiB (C+D+...: several); small=C: C from 8 B to 8 KiB, 20 iterations;
#           reg (after those): buffers registered first (kcoll-perf -R 1)
#           vskew=S (after those): the v-variants' blocks skewed S times
#           (kcoll-perf -V S)
#   profile only kcoll-perf -P: the five main collectives at 16 B and at
#           16 MiB, 10 iterations each, with the module's own profile of
#           each row (sysfs stats/time_*: queued, waiting, moving,
#           landing, signatures, settling per collective); profile=C:
#           collective C alone at 8 bytes (profile=C@BYTES: at BYTES),
#           30 iterations (with
#           sweep=algo/C:A/B/..: once per forced algorithm, one boot)
#   chunk=N sysfs chunk_bytes for this run; mtu=N eth0's MTU
#   qps=N   sysfs qps_per_peer for this run: N RC QPs to each peer, the
#           chunks spread over them; qpsweep=N/M/..: kcoll-perf (with
#           big's or big=C's arguments) once per value, in this boot
#   intra=0|1  sysfs intra_node for this run (0: ranks on one VM go
#           through rxe too); intrasweep=1/0: kcoll-perf once per value,
#           in this boot, as qpsweep
#   sweep=FILE:V/W/..  the same for any file under /sys/class/misc/kcoll,
#           e.g. sweep=algo/allreduce:ring/rabenseifner (restored after)
#   dmabuf=E  after the main run, kcoll-colltest -q -D E: the matrix (four
#           dtypes) with every buffer a dma-buf of exporter E (vgem,
#           udmabuf, heap, testbuf), imported by kcoll
#   gpu=E   after the main run, kcoll-colltest -q -S: GPU memory and CUDA
#           streams through the STAND-IN CUDA driver (build/unit/fakecuda/
#           libcuda.so.1, found by LD_LIBRARY_PATH exactly as the real
#           one would be), its "device memory" dma-bufs of exporter E, on
#           a KCOLL_DEVMEM communicator; the module, the RDMA traffic and
#           the dma-buf imports are real; gpuonly=E: only that
#   gpuab=E[:N]  only kcoll-perf, allreduce at 16 MiB and at 8 bytes, N
#           rounds (default 3), each first on ordinary memory registered
#           once (-R 1), then on stand-in GPU memory with streams (-G,
#           device memory dma-bufs of exporter E): interleaved in one
#           boot; the module's average time per GPU step (handoff to the
#           stream, kernel, handoff back) from its stats
#   gpuvec=E  only kcoll-perf's v-variants (allgatherv, reduce_scatterv,
#           alltoallv; blocks skewed 4x, 64 B to 4 MiB, checked), first on
#           ordinary memory, then on stand-in GPU memory with streams (-G),
#           and how many GPU steps the module handed over meanwhile
#   dmabufab=E[:N]  only kcoll-perf at 16 MiB (allreduce, allgather,
#           broadcast), N rounds (default 3), each first on ordinary memory
#           registered once (-R 1), then on dma-bufs of exporter E imported
#           once (-D E): the two interleaved in one boot
#           (docs/PERFORMANCE.md)
#   family  after the main run (4 ranks on 2 VMs), kcoll-family: split,
#           revoke, shrink (a member killed as it starts), grow (a new
#           process on vm1), grow again (the new process killed as it
#           would join) and split again (a member killed as it starts),
#           every step bounded in time, and kcollctl's view of parents
#           and children; familyonly: only that
#   netem=SPEC  a lossy network: once every VM is up, eth0 (rxe0's netdev
#           and the bootstrap's) sends through tc's netem with SPEC, its
#           words joined by ':' (netem=loss:1%:duplicate:1%:delay:2ms:
#           1ms:reorder:10%), or netem=lossy: loss 0.5%, duplicate
#           0.5%, delay 1ms, reorder 1% (make check-faults); at the
#           end the qdisc's drops and rxe's retransmissions are logged,
#           and a run whose SPEC drops packets fails if none were
#           dropped or none resent
#   skew    the VMs advertise different cost models (vm0 sysfs
#           algo/beta_ps 9999, vm1 algo/gamma_ps 50000): every
#           communicator must agree on the largest of each (the engine's
#           snapshots show it) and still choose alike on every rank
#
# Ranks find each other through the KCOLL_ROOT/KCOLL_SECRET mode of
# coll_comm_init_env(): rank 0 (on vm0, 10.9.0.1) serves the bootstrap
# root at a fixed port, a new port for each run (the same sequence in
# every VM), with a fixed test secret; each rank learns its node's RDMA
# address from rxe0's netdev (eth0). Each rank's output goes to
# $KCOLL_OUT/<run>-rank<r>.log; rank 0's TAP of the main run to
# colltest.tap (counted by tests/run-vm-tests.sh).
. "$kcoll_top/tests/vm/guest-lib.sh"

COLLTEST=$KCOLL_TOP/build/tests/bin/kcoll-colltest
PERF=$KCOLL_TOP/build/tools/kcoll-perf
PRIOBENCH=$KCOLL_TOP/build/tools/kcoll-priobench
FAMILY=$KCOLL_TOP/build/tests/bin/kcoll-family
ROOT_IP=10.9.0.1
PORT_BASE=29500

kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
kcoll_res_baseline

# shellcheck disable=SC2086
set -- $KCOLL_ARG
nranks=${1:-$((2 * kcoll_nvms))}
[ $# -gt 0 ] && shift
dmabuf="" gpu="" gpu_only="" gpuab="" gpuvec="" dmabufab="" level="" perf=0 neg=1 check=1 dieloop=0 qpsweep="" sweep_knob="" prio=0 prio_args=(-s 64K -b 256M -n 30) skew=0 family=0 netem=""
perf_args=(-M -c all -b 8 -e 4M -f 4 -n 5 -w 2 -i 1)
for a in "$@"; do
	case $a in
	quick) level=-q ;;
	full) level=-F ;;
	perf) perf=1 ;;
	noneg) neg=0 ;;
	negonly) check=0 ;;
	prio) check=0 neg=0 prio=1 ;;
	prio=*) check=0 neg=0 prio=1 prio_args=(-s 64K -b "${a#prio=}" -n 30) ;;
	die=*) check=0 neg=0 dieloop=${a#die=} ;;
	algo=*:*) a=${a#algo=}
		echo "${a#*:}" >"/sys/class/misc/kcoll/algo/${a%%:*}" ||
			fail "force ${a%%:*} to ${a#*:}" ;;
	flood) level=-G neg=0 ;;
	chunk=*) echo "${a#chunk=}" >/sys/class/misc/kcoll/chunk_bytes ||
			fail "chunk_bytes ${a#chunk=}" ;;
	mtu=*) ip link set eth0 mtu "${a#mtu=}" || fail "mtu ${a#mtu=}" ;;
	qpsweep=*) qpsweep=${a#qpsweep=} sweep_knob=qps_per_peer ;;
	intrasweep=*) qpsweep=${a#intrasweep=} sweep_knob=intra_node ;;
	sweep=*:*) a=${a#sweep=}; qpsweep=${a#*:} sweep_knob=${a%%:*} ;;
	intra=*) echo "${a#intra=}" >/sys/class/misc/kcoll/intra_node ||
			fail "intra_node ${a#intra=}" ;;
	qps=*) echo "${a#qps=}" >/sys/class/misc/kcoll/qps_per_peer ||
			fail "qps_per_peer ${a#qps=}" ;;
	skew) skew=1 ;;
	netem=lossy) netem="loss:0.5%:duplicate:0.5%:delay:1ms:reorder:1%" ;;
	netem=*) netem=${a#netem=} ;;
	family) family=1 ;;
	familyonly) family=1 check=0 neg=0 ;;
	dmabuf=*) dmabuf=${a#dmabuf=} ;;
	gpu=*) gpu=${a#gpu=} ;;
	gpuonly=*) gpu=${a#gpuonly=} check=0 neg=0 ;;
	gpuab=*) gpuab=${a#gpuab=} check=0 neg=0 ;;
	gpuvec=*) gpuvec=${a#gpuvec=} check=0 neg=0 ;;
	gputrace) export FAKECUDA_TRACE=1 ;;
	gpuc=*) gpu_only=${a#gpuc=} ;;
	dmabufab=*) dmabufab=${a#dmabufab=} check=0 neg=0 dmabuf=${dmabufab%%:*} ;;
	big) perf=1 neg=0 check=0 perf_args=(-M -c allreduce -b 16M -e 16M -n 3 -w 1) ;;
	big=*) perf=1 neg=0 check=0 perf_args=(-M -c "$(echo "${a#big=}" | tr + ,)" -b 2M -e 16M -f 2 -n 3 -w 1) ;;
	small=*) perf=1 neg=0 check=0 perf_args=(-M -c "${a#small=}" -b 8 -e 8K -f 32 -n 20 -w 3) ;;
	reg) perf_args+=(-R 1) ;;
	vskew=*) perf_args+=(-V "${a#vskew=}") ;;
	demo) perf=1 neg=0 check=0 perf_args=(-M -c all -b 8 -e 1M -f 32 -n 3 -w 1) ;;
	profile) perf=1 neg=0 check=0 perf_args=(-M -P -C 0 -c allreduce,allgather,reduce_scatter,broadcast,alltoall -b 16 -e 16M -f 1048576 -n 10 -w 2) ;;
	profile=*@*) a=${a#profile=}; perf=1 neg=0 check=0 perf_args=(-M -P -C 0 -c "${a%@*}" -b "${a#*@}" -e "${a#*@}" -n 30 -w 3) ;;
	profile=*) perf=1 neg=0 check=0 perf_args=(-M -P -C 0 -c "${a#profile=}" -b 8 -e 8 -n 30 -w 3) ;;
	benchsmall) perf=1 neg=0 check=0 perf_args=(-M -u -c all -b 8 -e 512K -f 4 -n 20 -w 2) ;;
	*) fail "unknown scenario argument '$a'" ;;
	esac
done
[ -n "$dmabuf$gpu$gpuab$gpuvec" ] && kcoll_exporters_up
if [ $skew = 1 ]; then
	case $kcoll_vm in
	0) echo 9999 >/sys/class/misc/kcoll/algo/beta_ps || fail "skew: beta_ps" ;;
	1) echo 50000 >/sys/class/misc/kcoll/algo/gamma_ps || fail "skew: gamma_ps" ;;
	esac
fi
case $nranks in
'' | *[!0-9]*) fail "NRANKS '$nranks' is not a number"; nranks=$((2 * kcoll_nvms)) ;;
esac
per=$(((nranks + kcoll_nvms - 1) / kcoll_nvms))
first=$((kcoll_vm * per))
last=$((first + per - 1))
[ $last -ge "$nranks" ] && last=$((nranks - 1))
if [ $first -le $last ]; then
	log "ranks $first..$last of $nranks (${per} per VM)"
else
	log "no rank of $nranks here"
fi
[ -x "$COLLTEST" ] || fail "no $COLLTEST (make tests-bin)"

# Every VM must reach vm0 (the root) before the first run.
kcoll_peers_up
[ -n "$netem" ] && kcoll_netem_on "${netem//:/ }"

export KCOLL_NRANKS=$nranks
export KCOLL_SECRET=6b636f6c6c2d766d2d746573742d3031	# "kcoll-vm-test-01"
# VMs boot at their own pace: the ranks wait for the root that long.
export KCOLL_BOOTSTRAP_TIMEOUT_MS=300000
run_no=0

# run NAME TIMEOUT_S COMMAND...: this VM's ranks of one run, in parallel.
run() {
	local name=$1 tmo=$2 r rc i=0
	local pids=()
	shift 2
	run_no=$((run_no + 1))
	[ $first -le $last ] || return 0
	log "run $run_no: $name ($*)"
	for r in $(seq $first $last); do
		KCOLL_RANK=$r KCOLL_ROOT=$ROOT_IP:$((PORT_BASE + run_no)) \
			timeout -k 10 "$tmo" "$@" >"$KCOLL_OUT/$name-rank$r.log" 2>&1 &
		pids+=($!)
	done
	# Still running after RUN_SNAP_S (default half the limit): the
	# engine's view, the QPs, the ranks' kernel stacks and the log go to
	# hang-<run>.txt while the hang is still there to see.
	( sleep "${RUN_SNAP_S:-$((tmo / 2))}"
	  kill -0 "${pids[@]}" 2>/dev/null || exit 0
	  { date; cat /sys/kernel/debug/kcoll/comms; rdma -d res show qp
	    for p in $(pgrep -f kcoll-); do
		echo "== $p $(tr '\0' ' ' </proc/$p/cmdline)"; cat /proc/$p/stack
		for t in /proc/$p/task/*; do
			[ "$t" = /proc/$p/task/$p ] || { echo "-- ${t##*/}"; cat "$t/stack"; }
		done
	    done
	    dmesg | tail -80; } >"$KCOLL_OUT/hang-$run_no-$name.txt" 2>&1 ) &
	snap=$!
	for r in $(seq $first $last); do
		wait "${pids[$i]}"
		rc=$?
		i=$((i + 1))
		[ $rc = 0 ] || fail "$name: rank $r exited with $rc (see $name-rank$r.log): $(kcoll_why "$KCOLL_OUT/$name-rank$r.log")"
		grep -E "^not ok|^Bail out|^# kcoll-colltest:|rank $r:" \
			"$KCOLL_OUT/$name-rank$r.log" | head -40 | sed "s/^/[$name rank $r] /"
		# A failed run of a loop keeps its log (the next one overwrites).
		[ $rc = 0 ] || cp "$KCOLL_OUT/$name-rank$r.log" "$KCOLL_OUT/$name-run$run_no-rank$r.log"
	done
	kill "$snap" 2>/dev/null
	wait "$snap" 2>/dev/null
}

# A stuck run leaves the engine's view in comms-<s>.txt.
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
( for s in 60 120 240 480; do sleep $((s / 2)); cat /sys/kernel/debug/kcoll/comms >"$KCOLL_OUT/comms-$s.txt" 2>&1; dmesg >"$KCOLL_OUT/dmesg-$s.txt" 2>&1; rdma -d res show qp >"$KCOLL_OUT/qp-$s.txt" 2>&1; done ) &
bgsnap=$!
t0=$SECONDS
if [ $check = 1 ]; then
	run colltest 2400 "$COLLTEST" $level -t 2350
	[ -f "$KCOLL_OUT/colltest-rank0.log" ] && cp "$KCOLL_OUT/colltest-rank0.log" "$KCOLL_OUT/colltest.tap"
	log "colltest took $((SECONDS - t0)) s"
	# Which algorithms the automatic choice ran (this VM's ranks).
	log "algorithms run: $(cd /sys/class/misc/kcoll/algo_ops && for f in *; do printf '%s=%s ' "$f" "$(cat "$f")"; done)"
log "registration cache: $(cd /sys/class/misc/kcoll/stats && for f in reg_cache_*; do printf '%s=%s ' "$f" "$(cat "$f")"; done)"
fi
if [ -n "$gpuab" ]; then
	rounds=${gpuab#*:}
	[ "$rounds" = "$gpuab" ] && rounds=3
	exp=${gpuab%%:*}
	for i in $(seq "$rounds"); do
		for size in 16M 8; do
			for mem in host gpu; do
				args=(-M -c allreduce -b $size -e $size -n 5 -w 1)
				[ $size = 8 ] && args=(-c allreduce -b 8 -e 8 -n 50 -w 5)
				if [ $mem = host ]; then
					args+=(-R 1)
					KCOLL_DEVMEM=1 RUN_SNAP_S=300 run "gab-$size-$mem-$i" 900 "$PERF" "${args[@]}"
				else
					s0=$(cat /sys/class/misc/kcoll/stats/gpu_steps)
					n0=$(cat /sys/class/misc/kcoll/stats/gpu_step_ns)
					LD_LIBRARY_PATH=$KCOLL_TOP/build/unit/fakecuda FAKECUDA_DMABUF=$exp \
						KCOLL_DEVMEM=1 RUN_SNAP_S=300 run "gab-$size-$mem-$i" 900 "$PERF" "${args[@]}" -G
					s1=$(cat /sys/class/misc/kcoll/stats/gpu_steps)
					n1=$(cat /sys/class/misc/kcoll/stats/gpu_step_ns)
					[ "$s1" -gt "$s0" ] &&
						log "[gab round $i $size gpu] GPU steps on this VM: $((s1 - s0)), $(((n1 - n0) / (s1 - s0) / 1000)) us each (handoff, kernel, handoff)"
				fi
				[ -f "$KCOLL_OUT/gab-$size-$mem-$i-rank0.log" ] &&
					grep -E '^ +[0-9]' "$KCOLL_OUT/gab-$size-$mem-$i-rank0.log" |
					sed "s|^|[gab round $i $size $mem] |"
			done
		done
	done
elif [ -n "$gpuvec" ]; then
	args=(-c allgatherv,reduce_scatterv,alltoallv -V 4 -b 64 -e 4M -f 4 -n 3 -w 1)
	KCOLL_DEVMEM=1 RUN_SNAP_S=300 run "gvec-host" 900 "$PERF" "${args[@]}"
	s0=$(cat /sys/class/misc/kcoll/stats/gpu_steps)
	LD_LIBRARY_PATH=$KCOLL_TOP/build/unit/fakecuda FAKECUDA_DMABUF=$gpuvec \
		KCOLL_DEVMEM=1 RUN_SNAP_S=300 run "gvec-gpu" 900 "$PERF" "${args[@]}" -G
	s1=$(cat /sys/class/misc/kcoll/stats/gpu_steps)
	log "[gvec gpu] GPU steps on this VM: $((s1 - s0))"
	for mem in host gpu; do
		[ -f "$KCOLL_OUT/gvec-$mem-rank0.log" ] &&
			grep -E '^ +[0-9]|^# (all|red)|Out of bounds' "$KCOLL_OUT/gvec-$mem-rank0.log" |
			sed "s|^|[gvec $mem] |"
	done
elif [ -n "$dmabufab" ]; then
	rounds=${dmabufab#*:}
	[ "$rounds" = "$dmabufab" ] && rounds=3
	for i in $(seq "$rounds"); do
		for c in allreduce allgather broadcast; do
			for mem in host dmabuf; do
				args=(-M -c $c -b 16M -e 16M -n 3 -w 1 -R 1)
				[ $mem = dmabuf ] && args+=(-D "$dmabuf")
				RUN_SNAP_S=300 run "ab-$c-$mem-$i" 900 "$PERF" "${args[@]}"
				[ -f "$KCOLL_OUT/ab-$c-$mem-$i-rank0.log" ] &&
					grep -E '^ +[0-9]' "$KCOLL_OUT/ab-$c-$mem-$i-rank0.log" |
					sed "s|^|[ab round $i $c $mem] |"
			done
		done
	done
elif [ -n "$dmabuf" ]; then
	t1=$SECONDS
	run colltest-dmabuf 1200 "$COLLTEST" -q -D "$dmabuf" -t 1150
	[ -f "$KCOLL_OUT/colltest-dmabuf-rank0.log" ] &&
		cp "$KCOLL_OUT/colltest-dmabuf-rank0.log" "$KCOLL_OUT/colltest-dmabuf.tap"
	log "colltest on $dmabuf dma-bufs took $((SECONDS - t1)) s; imports: $(cat /sys/class/misc/kcoll/stats/dmabuf_imports)"
fi
if [ -n "$gpu" ]; then
	t1=$SECONDS
	steps0=$(cat /sys/class/misc/kcoll/stats/gpu_steps)
	export LD_LIBRARY_PATH=$KCOLL_TOP/build/unit/fakecuda FAKECUDA_DMABUF=$gpu KCOLL_DEVMEM=1
	run colltest-gpu 1200 "$COLLTEST" -q -S -t 1150 ${gpu_only:+-c "$gpu_only"}
	[ -f "$KCOLL_OUT/colltest-gpu-rank0.log" ] &&
		cp "$KCOLL_OUT/colltest-gpu-rank0.log" "$KCOLL_OUT/colltest-gpu.tap"
	# One communicator of GPU ranks (even) and CPU ranks (odd), and the
	# failures while streams wait: a peer missing (timeout), an abort, a
	# stream that gets there too late, a peer that revokes, a peer killed,
	# the RDMA device removed under them (each rank checks its own). With
	# gpuc= (one collective: make check's second kernel) not again.
	[ -z "$gpu_only" ] &&
		run colltest-mixed 900 "$COLLTEST" -q -S -m -c reduce_scatter -t 850
	[ -f "$KCOLL_OUT/colltest-mixed-rank0.log" ] &&
		cp "$KCOLL_OUT/colltest-mixed-rank0.log" "$KCOLL_OUT/colltest-mixed.tap"
	for f in T A W V P R; do
		[ -z "$gpu_only" ] || break
		KCOLL_VM=$kcoll_vm run gpufault-$f 300 "$COLLTEST" -S -$f -t 120
		grep -h '^ok\|^not ok' "$KCOLL_OUT"/gpufault-$f-rank*.log 2>/dev/null |
			sed "s/^/[gpufault-$f] /"
		# -R: rank 0 removed this node's rxe0 under its streams.
		if [ $f = R ] && [ "$kcoll_vm" = 0 ]; then
			rdma link show rxe0 >/dev/null 2>&1 &&
				fail "gpufault-R: rxe0 was not removed"
			kcoll_rxe_up || fail "gpufault-R: rxe0 did not come back"
		fi
	done
	unset LD_LIBRARY_PATH FAKECUDA_DMABUF KCOLL_DEVMEM
	log "colltest on stand-in GPU memory ($gpu) took $((SECONDS - t1)) s; GPU ops $(cat /sys/class/misc/kcoll/stats/gpu_ops), steps $(($(cat /sys/class/misc/kcoll/stats/gpu_steps) - steps0)), polls $(cat /sys/class/misc/kcoll/stats/gpu_polls), CPU touches of GPU memory $(cat /sys/class/misc/kcoll/stats/nocpu_cpu_touches)"
	[ "$(cat /sys/class/misc/kcoll/stats/nocpu_cpu_touches)" = 0 ] ||
		fail "the CPU touched GPU memory"
	[ "$(cat /sys/class/misc/kcoll/stats/gpu_steps)" -gt "$steps0" ] ||
		fail "no reduction step went to the GPU stream"
fi
if [ $neg = 1 ]; then
	run mismatch 300 "$COLLTEST" -M
	# The kernel's connect timeout bounds the refused creation.
	KCOLL_CONNECT_TIMEOUT_MS=20000 run wrongkey 300 "$COLLTEST" -K
	# A hang here leaves the engine's view and the ranks' kernel stacks.
	( sleep 90; snap=$KCOLL_OUT/die-90s.txt
	  { cat /sys/kernel/debug/kcoll/comms; rdma -d res show qp
	    for p in $(pgrep -f kcoll-colltest); do echo "== $p"; cat /proc/$p/stack; done
	    dmesg | tail -50; } >"$snap" 2>&1 ) &
	run die 300 "$COLLTEST" -X
fi
if [ $prio = 1 ]; then
	for mode in 1 0; do
		echo $mode >/sys/class/misc/kcoll/prio_sched ||
			fail "prio_sched $mode"
		run prio$mode 1200 "$PRIOBENCH" "${prio_args[@]}"
		[ -f "$KCOLL_OUT/prio$mode-rank0.log" ] &&
			sed "s/^/[prio_sched=$mode] /" "$KCOLL_OUT/prio$mode-rank0.log"
	done
	echo 1 >/sys/class/misc/kcoll/prio_sched
fi
for i in $(seq 1 $dieloop); do
	# The test's own watchdog ends a hung run after 120 s. The dying rank
	# alternates: SIGKILL (the kernel alone cleans up after it), _exit().
	how="exit"
	[ $((i % 2)) = 1 ] && how="kill"
	KCOLL_TEST_DIE=$how RUN_SNAP_S=90 run die 300 "$COLLTEST" -X
done
if [ $perf = 1 ]; then
	if [ -x "$PERF" ] && [ -n "$qpsweep" ]; then
		sweep_was=$(cat "/sys/class/misc/kcoll/$sweep_knob")
		for q in ${qpsweep//\// }; do
			echo "$q" >"/sys/class/misc/kcoll/$sweep_knob" || fail "$sweep_knob $q"
			RUN_SNAP_S=${RUN_SNAP_S:-300} run perf-q$q 1200 "$PERF" "${perf_args[@]}"
			[ -f "$KCOLL_OUT/perf-q$q-rank0.log" ] &&
				sed "s|^|[$sweep_knob=$q] |" "$KCOLL_OUT/perf-q$q-rank0.log"
		done
		echo "$sweep_was" >"/sys/class/misc/kcoll/$sweep_knob"
	elif [ -x "$PERF" ]; then
		RUN_SNAP_S=${RUN_SNAP_S:-300} run perf 1200 "$PERF" "${perf_args[@]}"
		[ -f "$KCOLL_OUT/perf-rank0.log" ] && cp "$KCOLL_OUT/perf-rank0.log" "$KCOLL_OUT/perf.txt" &&
			cat "$KCOLL_OUT/perf.txt"
	else
		fail "no $PERF (make tools)"
	fi
	# What the engine's shortcuts did for this VM's ranks.
	log "engine: $(cd /sys/class/misc/kcoll/stats && for f in eager_sends eager_beside eager_ahead colls_beside colls_overlap_waits returned_early late_errors; do [ -f "$f" ] && printf '%s=%s ' "$f" "$(cat "$f")"; done)"
fi

# family: kcoll-family's four ranks, and on vm1 the newcomer its grow
# admits, which reads the new communicator's id from a file rank 0
# writes (removed first: an earlier run's would be stale). Ranks 2 and 1
# and the newcomer kill themselves (SIGKILL: 137), and rank 3 leaves
# early, on purpose.
if [ $family = 1 ] && { [ "$nranks" != 4 ] || [ "$kcoll_nvms" != 2 ] || [ ! -x "$FAMILY" ]; }; then
	fail "family needs 4 ranks on 2 VMs and $FAMILY (make tests-bin)"
elif [ $family = 1 ]; then
	idf=$kcoll_out/family-id
	[ "$kcoll_vm" = 0 ] && rm -f "$idf" "$idf".*
	vm_sync family-start 300
	run_no=$((run_no + 1))
	pids=() ranks=()
	for r in $(seq $first $last); do
		KCOLL_RANK=$r KCOLL_ROOT=$ROOT_IP:$((PORT_BASE + run_no)) \
			timeout -k 10 300 "$FAMILY" -f "$idf" -C 5000 \
			-K "$KCOLL_TOP/build/daemon/kcollctl" >"$KCOLL_OUT/family-rank$r.log" 2>&1 &
		pids+=($!) ranks+=("$r")
	done
	if [ "$kcoll_vm" = 1 ]; then
		timeout -k 10 300 "$FAMILY" -g -f "$idf" >"$KCOLL_OUT/family-new.log" 2>&1 &
		pids+=($!) ranks+=(new)
	fi
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}"
		rc=$?
		r=${ranks[$i]}
		want=0
		case $r in 1|2|new) want=137 ;; esac
		f=$KCOLL_OUT/family-rank$r.log
		[ "$r" = new ] && f=$KCOLL_OUT/family-new.log
		[ $rc = $want ] || fail "family: rank $r exited with $rc, not $want (see ${f##*/}): $(kcoll_why "$f")"
		grep -c "^ok" "$f" | sed "s/^/[family rank $r] checks passed: /"
		grep -E "^not ok|^Bail out|^# (revoked|shrink|grow|split)" "$f" | sed "s/^/[family rank $r] /"
		! grep -qE "^not ok|^Bail out" "$f" || fail "family: rank $r failed a check (see $f)"
	done
	vm_sync family-done 300
fi

log "kcoll devices: $(tr '\n' ' ' </sys/class/misc/kcoll/rdma_devices)"
[ $check = 1 ] ||
	log "algorithms run: $(cd /sys/class/misc/kcoll/algo_ops && for f in *; do printf '%s=%s ' "$f" "$(cat "$f")"; done)"
log "registration cache: $(cd /sys/class/misc/kcoll/stats && for f in reg_cache_*; do printf '%s=%s ' "$f" "$(cat "$f")"; done)"
# The snapshots' reader of the module's debugfs file holds a reference
# to the module while it reads.
kill "$bgsnap" 2>/dev/null
wait "$bgsnap" 2>/dev/null
kcoll_res_check
[ -n "$netem" ] && kcoll_netem_off "$netem"
[ -n "$dmabuf$gpu$gpuab$gpuvec" ] && kcoll_exporters_down
kcoll_mod_unload
# skew: the model of every communicator the snapshots saw, "uid a/b/g".
# The model is agreed once every peer has been heard: a snapshot taken
# while a communicator was still connecting ("up" below nranks - 1) shows
# a partial one, and is left out.
if [ $skew = 1 ]; then
	grep -h "^comm " "$KCOLL_OUT"/comms-*.txt 2>/dev/null |
		awk '$(NF - 1) == "model" && $(NF - 3) == "up" {
			split($4, rn, "/")
			if ($(NF - 2) == rn[2] - 1)
				print $2, $NF
		}' | sort -u >"$KCOLL_OUT/models.tmp"
	mv "$KCOLL_OUT/models.tmp" "$KCOLL_OUT/models.txt"
	[ -s "$KCOLL_OUT/models.txt" ] || fail "skew: no communicator in the snapshots"
	while read -r uid m; do
		IFS=/ read -r a b g <<<"$m"
		case $kcoll_vm in
		0) [ "$b" -ge 9999 ] || fail "skew: comm $uid has beta $b < vm0's 9999" ;;
		1) [ "$g" -ge 50000 ] || fail "skew: comm $uid has gamma $g < vm1's 50000" ;;
		esac
		log "skew: comm $uid model $a/$b/$g"
	done <"$KCOLL_OUT/models.txt"
	if [ "$kcoll_vm" = 0 ]; then
		for i in $(seq 1 600); do
			[ -f "$kcoll_out/vm1/models.txt" ] && break
			sleep 0.2
		done
		# The same communicator has the same model on both VMs.
		same=$(join "$KCOLL_OUT/models.txt" "$kcoll_out/vm1/models.txt" 2>/dev/null)
		[ -n "$same" ] || fail "skew: no communicator seen on both VMs"
		echo "$same" | awk '$2 != $3 { bad = 1; print "skew: comm " $1 " model " $2 " on vm0, " $3 " on vm1" }
			END { exit bad }' || fail "skew: the VMs disagree on a model"
		[ -n "$same" ] && log "skew: $(echo "$same" | wc -l) communicator(s) with one model on both VMs"
	fi
fi

kcoll_finish
