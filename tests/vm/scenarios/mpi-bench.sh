#!/bin/bash
# The side-by-side benchmark (make bench), one boot of two VMs: 4 ranks
# (2 per VM; "ppn=1" in the argument: 2 ranks, one per VM) of
#   - perftest on the link itself: ib_write_bw one way and both ways at
#     once (-b), ib_write_lat;
#   - Open MPI's collectives (tools/kcoll-mpibench) over each transport
#     that starts;
#   - Gloo's (tools/kcoll-gloobench) over TCP and, if it runs, ibverbs;
#   - kcoll's (kcoll-perf -u), every collective from 8 B to 16 MiB;
# all as nccl-tests-style tables with CPU time per GB (process and node).
# tools/bench-table.sh turns the output directory into the ratio table.
# Not part of `make check` (it takes 10-13 minutes); run it with
#   tests/vm/vmrun.sh -k KVER -n 2 -o build/vmtest-mpi -t 1800 tests/vm/scenarios/mpi-bench.sh
# and read build/vmtest-mpi/vm0/summary.txt (tables: vm0/mpi-*.txt,
# vm0/gloo-*.txt, vm0/kcoll-perf.txt), or tools/bench-table.sh build/vmtest-mpi.
#
# Launch: the guests have no ssh; tests/vm/mpi-lib.sh says how mpirun
# reaches VM 1.
#
# Transports (kcoll_arg, -a, may name others; default "tcp ucx"):
#   tcp           pml ob1, btl tcp (eth0) + vader (shared memory) + self
#   ucx           pml ucx, UCX_TLS=rc_v,sm,self on rxe0:1 (RC verbs between
#                 the VMs, shared memory inside one), UD's GRH check off
#   ucx-dgidcheck the same with UCX's defaults for the GRH check: hangs
#   openib        pml ob1, btl openib on rxe0: Debian's build lacks rdmacm
. "$kcoll_top/tests/vm/guest-lib.sh"

peer_vm=$((1 - kcoll_vm))
peer=10.9.0.$((peer_vm + 1))
bench=$KCOLL_TOP/build/tools/kcoll-mpibench
rexec_port=2222
# Words of kcoll_arg: transports, ppn=N (ranks per VM, default 2),
# "algos" (every algorithm forced in turn) and rounds=N (the interleaved
# rounds, below; default none).
ppn=2 transports="" algos=0 rounds=0
for a in ${KCOLL_ARG:-}; do
	case $a in
	ppn=*) ppn=${a#ppn=} ;;
	algos) algos=1 ;;
	rounds=*) rounds=${a#rounds=} ;;
	*) transports="$transports $a" ;;
	esac
done
transports=${transports:-tcp ucx}
np=$((2 * ppn))
t_start=$SECONDS

kcoll_net_up
kcoll_rxe_up
[ -x "$bench" ] || fail "no $bench (make mpibench)"

. "$kcoll_top/tests/vm/mpi-lib.sh"

# The allreduce probe: run per transport before kcoll loads (it also finds
# the transports that start at all: the RDMA paths may fail or hang) and
# again, identically, after the tables with kcoll loaded. Comparing the two
# is the interference check; its 16 MiB row (3 timed iterations) is the
# headline figure.
probe_args=(-c allreduce -b 2M -e 16M -f 8 -n 3 -w 0)
if [ "$kcoll_vm" = 0 ]; then
	ucx_info -d >"$KCOLL_OUT/ucx_info.txt" 2>&1
	working=""
	for tr in $transports; do
		if mpi_run "pre-$tr" 150 "$tr" "${probe_args[@]}" &&
			grep -q 'Out of bounds values : 0 OK' "$KCOLL_OUT/mpi-pre-$tr.txt"; then
			working="$working $tr"
		else
			log "transport $tr failed; the last lines of its output:"
			grep -v '^ ' "$KCOLL_OUT/mpi-pre-$tr.txt" | tail -15 | sed 's/^/    /'
		fi
	done
	log "transports that ran:${working:- none}"
	echo "${working# }" >"$KCOLL_OUT/transports-ok.txt"
	case " $working " in *" tcp "*) ;; *) fail "Open MPI over TCP did not run" ;; esac
fi
vm_sync pre-kcoll 600
kcoll_mod_load
vm_sync kcoll-loaded 120

# ------------------------------------------------------------ perftest
# perftest NAME TOOL ARGS...: TOOL's server on VM 0, its client on VM 1
# (retried until the server listens), output to NAME.txt on each; the
# client's wall time in seconds goes to $pt_wall.
pt_wall=""
perftest() {
	local name=$1 tool=$2 i t0
	shift 2
	if [ "$kcoll_vm" = 0 ]; then
		timeout 180 "$tool" "$@" >"$KCOLL_OUT/$name.txt" 2>&1 ||
			fail "$name: $tool server failed"
		return
	fi
	for i in $(seq 1 100); do
		t0=$(date +%s.%N)
		if timeout 120 "$tool" "$@" 10.9.0.1 >"$KCOLL_OUT/$name.txt" 2>&1; then
			pt_wall=$(echo "$(date +%s.%N) $t0" | awk '{ printf "%.3f", $1 - $2 }')
			return
		fi
		sleep 0.5
	done
	fail "$name: $tool client never completed"
}
# perftest's "MB/sec" is MiB/s: MB/s (10^6) of its @bw_size row, as the
# MPI tables use.
pt_mbs() {
	awk -v s=$bw_size '$1 == s && NF >= 5 { printf "%.2f", $4 * 1.048576 }' "$KCOLL_OUT/$1.txt" | tail -1
}

# ib_write_bw from VM 1 to VM 0, twice with different iteration counts: the
# difference of the client's wall times is a cross-check on perftest's
# figure that does not depend on its cycle-counter calibration.
bw_size=65536
for n in 100 600; do
	bw_args=(-d rxe0 -x 1 -s "$bw_size" -n "$n" -F)
	perftest "ib_write_bw-$n" ib_write_bw "${bw_args[@]}"
	[ "$kcoll_vm" = 1 ] && echo "$n $pt_wall" >>"$KCOLL_OUT/ib_write_bw-wall.txt"
	vm_sync "perftest-$n" 200
done
if [ "$kcoll_vm" = 1 ]; then
	cat "$KCOLL_OUT"/ib_write_bw-600.txt
	pt=$(pt_mbs ib_write_bw-600)
	wall=$(awk -v s=$bw_size '{ t[$1] = $2 } END { d = t[600] - t[100];
		if (d > 0) printf "%.2f", 500 * s / d / 1e6 }' "$KCOLL_OUT/ib_write_bw-wall.txt")
	echo "perftest=${pt:-?} wall=${wall:-?}" >"$KCOLL_OUT/ib_write_bw-summary.txt"
	log "ib_write_bw VM1->VM0 ${bw_size} B: perftest ${pt:-?} MB/s; wall-clock (600 vs 100 writes) ${wall:-?} MB/s"
fi
# The same link with traffic both ways at once (ib_write_bw -b): what
# each direction gets when both are busy, as in a 2-rank ring.
perftest ib_write_bw-bidir ib_write_bw "${bw_args[@]}" -b
if [ "$kcoll_vm" = 1 ]; then
	# Both directions together; per direction is half of it.
	bidir=$(pt_mbs ib_write_bw-bidir)
	echo "bidir=${bidir:-?}" >>"$KCOLL_OUT/ib_write_bw-summary.txt"
	log "ib_write_bw -b ${bw_size} B: ${bidir:-?} MB/s both directions together"
fi
vm_sync perftest-bidir 60
# The link's latency (8-byte RDMA WRITEs, ping-pong).
perftest ib_write_lat ib_write_lat -d rxe0 -x 1 -s 8 -n 1000 -F
if [ "$kcoll_vm" = 1 ]; then
	lat=$(awk '$1 == 8 && NF >= 6 { print $5 }' "$KCOLL_OUT/ib_write_lat.txt" | tail -1)
	echo "lat=${lat:-?}" >>"$KCOLL_OUT/ib_write_bw-summary.txt"
	log "ib_write_lat 8 B: ${lat:-?} us typical"
fi
vm_sync perftest-done 60

# ------------------------------------------------------------ Open MPI
if [ "$kcoll_vm" = 0 ]; then
	# Full tables: 8 B..16 MiB, x4 steps (a subset of nccl-tests' x2 grid),
	# about 0.5 s of timed iterations per size (at least one), kcoll loaded.
	for tr in $working; do
		left=$((900 - (SECONDS - t_start)))
		[ $left -gt 60 ] || { fail "no time left for the $tr table"; break; }
		mpi_run "$tr" "$left" "$tr" -b 8 -e 16M -f 4 -n 20 -w 0 -T 0.5 ||
			fail "kcoll-mpibench over $tr failed"
		cat "$KCOLL_OUT/mpi-$tr.txt"
	done
	for tr in $working; do
		mpi_run "post-$tr" 150 "$tr" "${probe_args[@]}" || fail "post-kcoll probe over $tr failed"
	done
fi
vm_sync mpi-done 700

# ------------------------------------------------------------ Gloo
# Every VM starts its ranks; they meet in a FileStore in the shared output
# directory. TCP here; ibverbs on rxe0 (its old-API algorithms; alltoall
# needs the new API, which ibverbs lacks) comes last of all: on rxe it
# aborts and its processes hang until killed, and kcoll then failed and
# stalled in the same boot (it did not in a clean one).
GLOO=$KCOLL_TOP/build/tools/kcoll-gloobench
# gloo_run TRANSPORT TIMEOUT ARGS...: output in gloo-NAME-rank<r>.txt and
# (rank 0's) gloo-NAME.txt, NAME being $GLOO_NAME or the transport.
gloo_run() {
	local tr=$1 tmo=$2 name=${GLOO_NAME:-$1} r p rc=0 t0=$SECONDS
	local pids=()
	shift 2
	# A store left by an earlier run in the same folder has its keys:
	# Gloo refuses to write them again.
	if [ "$kcoll_vm" = 0 ]; then
		rm -rf "$kcoll_out/gloo-store-$name"
		mkdir -p "$kcoll_out/gloo-store-$name"
	fi
	vm_sync "gloo-$name-start" 300 || return 1
	for r in $(seq $((ppn * kcoll_vm)) $((ppn * kcoll_vm + ppn - 1))); do
		KCOLL_RANK=$r KCOLL_NRANKS=$np timeout -k 10 "$tmo" "$GLOO" \
			-s "$kcoll_out/gloo-store-$name" -x "$tr" "$@" \
			>"$KCOLL_OUT/gloo-$name-rank$r.txt" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	[ "$kcoll_vm" = 0 ] && cp "$KCOLL_OUT/gloo-$name-rank0.txt" "$KCOLL_OUT/gloo-$name.txt"
	log "gloo $name ($tr): exit $rc in $((SECONDS - t0)) s"
	vm_sync "gloo-$name-done" $((tmo + 60))
	return $rc
}
gloo_ok=""
if [ -x "$GLOO" ]; then
	if gloo_run tcp 600 -b 8 -e 16M -f 4 -n 20 -w 0 -T 0.5; then
		gloo_ok="tcp"
	else
		fail "Gloo over TCP failed (see gloo-tcp-rank*.txt)"
	fi
else
	fail "no $GLOO (make gloobench)"
fi

# ------------------------------------------------------------ kcoll-perf
# kcoll's own benchmark in the same boot, same ranks (ppn per VM): ranks
# find each other through coll_comm_init_env()'s KCOLL_ROOT/KCOLL_SECRET
# mode, rank 0 (vm0) serving the bootstrap root.
KPERF=$KCOLL_TOP/build/tools/kcoll-perf
# kperf NAME PORT TIMEOUT ARGS...: this VM's ranks of one kcoll-perf run
# (kcoll_kperf), each to NAME-rank<r>.txt; rank 0's also to NAME.txt.
kperf() {
	local name=$1 port=$2 tmo=$3
	shift 3
	KCOLL_KPERF_TIMEOUT=$tmo kcoll_kperf "$name" "$port" "$@"
	[ "$kcoll_vm" = 0 ] && cp "$KCOLL_OUT/$name-rank0.txt" "$KCOLL_OUT/$name.txt"
}
if [ -x "$KPERF" ]; then
	export KCOLL_NRANKS=$np KCOLL_ROOT=10.9.0.1:29900
	export KCOLL_SECRET=6b636f6c6c2d62656e63682d30303031
	export KCOLL_BOOTSTRAP_TIMEOUT_MS=120000
	# Small sizes with more iterations, then the large ones: the sizes
	# of the MPI and Gloo tables (8 B x 4^k, and 16 MiB), with their CPU
	# columns (-u). Open MPI and Gloo time 0.5 s of iterations per size
	# (hundreds at 8 B); kcoll-perf's first sizes in a boot ran slower
	# than the same sizes later (code TCG had not translated yet), so 10
	# warm-up iterations and 50 timed ones.
	for part in small big; do
		case $part in
		small) kargs=(-b 8 -e 512K -f 4 -n 50 -w 10) port=29900 ;;
		*) kargs=(-b 2M -e 16M -f 4 -n 3 -w 1) port=29901 ;;
		esac
		kperf "kcoll-perf-$part" "$port" 900 -M -u -c all "${kargs[@]}"
	done
	[ "$kcoll_vm" = 0 ] && cat "$KCOLL_OUT/kcoll-perf-small.txt" \
		"$KCOLL_OUT/kcoll-perf-big.txt" >"$KCOLL_OUT/kcoll-perf.txt"
	# The engine's reduction against memcpy, measured in this kernel.
	if [ "$kcoll_vm" = 0 ]; then
		mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
		cat /sys/kernel/debug/kcoll/reduce_bench >"$KCOLL_OUT/reduce-bench.txt" 2>&1 ||
			fail "reduce_bench"
	fi
else
	fail "no $KPERF (make tools)"
fi
vm_sync kcoll-perf-done 1200

# The link once more, after kcoll (the same 600 writes): from boot to boot
# perftest's one-way figure has ranged from 10.5 to 17.5 MB/s, more than
# kcoll's own figures, so the table shows both of this boot's.
bw_args=(-d rxe0 -x 1 -s "$bw_size" -n 600 -F)
perftest ib_write_bw-post ib_write_bw "${bw_args[@]}"
if [ "$kcoll_vm" = 1 ]; then
	post=$(pt_mbs ib_write_bw-post)
	echo "post=${post:-?}" >>"$KCOLL_OUT/ib_write_bw-summary.txt"
	log "ib_write_bw VM1->VM0 ${bw_size} B after kcoll: ${post:-?} MB/s"
fi
vm_sync perftest-post 200

# ------------------------------------------------------------ algorithms
# "algos": kcoll-perf once per collective and algorithm, forced through
# sysfs on both VMs (the same sequence on each; an algorithm a collective
# cannot run is refused by sysfs everywhere alike), for
# tools/collsim-vs-vm.sh to rank them beside the simulator's ranking.
if [ $algos = 1 ] && [ -x "$KPERF" ]; then
	port=29910
	t0=$SECONDS
	for c in allreduce allgather reduce_scatter broadcast alltoall; do
		for a in ring chain pairwise recdoubling binomial rabenseifner rechalving bruck farfirst; do
			echo "$a" >"/sys/class/misc/kcoll/algo/$c" 2>/dev/null || continue
			port=$((port + 1))
			kperf "algo-$c-$a" "$port" 600 -M -c "$c" -b 8 -e 8M -f 32 -n 3 -w 1 -C 0
		done
		echo auto >"/sys/class/misc/kcoll/algo/$c"
	done
	log "forced algorithms: $((port - 29910)) runs in $((SECONDS - t0)) s"
	# What the data path did, for collsim's model of it.
	# And the module's own round trip per device (alpha_ns: the
	# shortest of its PINGs between the VMs, smoothed), and this VM's
	# CPUs, for collsim's per-message cost.
	{
		for k in intra_node eager; do
			echo "$k=$(cat "/sys/class/misc/kcoll/$k" 2>/dev/null || echo 0)"
		done
		echo "rdma_devices=$(tr '\n' ' ' </sys/class/misc/kcoll/rdma_devices 2>/dev/null)"
		echo "cpus=$(nproc)"
	} >"$KCOLL_OUT/kcoll-paths.txt"
fi

# ------------------------------------------------------------ rounds
# "rounds=N": the systems interleaved in one boot, N rounds of Open MPI
# (each transport that ran), Gloo over TCP and kcoll in turn, so that the
# emulated link's drift within the boot hits all alike. Each runs the five
# collectives every peer has, at the smallest sizes (8 and 16 B: an
# alltoall of 4 ranks needs 16; 50 timed iterations after 10) and at
# 16 MiB (3 after 1). tools/bench-table.sh prints the medians over the
# rounds with the best peer of each row.
if [ "$rounds" -gt 0 ]; then
	t0=$SECONDS
	port=29960
	for r in $(seq 1 "$rounds"); do
		for part in small big; do
			case $part in
			small) rargs=(-b 8 -e 16 -f 2 -n 50 -w 10) ;;
			*) rargs=(-b 16M -e 16M -n 3 -w 1) ;;
			esac
			if [ "$kcoll_vm" = 0 ]; then
				for tr in $working; do
					mpi_run "round$r-$tr-$part" 900 "$tr" \
						-c allreduce,allgather,reduce_scatter,bcast,alltoall "${rargs[@]}" ||
						fail "round $r: Open MPI over $tr ($part) failed"
				done
			fi
			vm_sync "round$r-mpi-$part" 1200
			if [ -x "$GLOO" ]; then
				GLOO_NAME=round$r-tcp-$part gloo_run tcp 600 \
					-c allreduce,allgather,reduce_scatter,bcast,alltoall "${rargs[@]}" ||
					fail "round $r: Gloo over TCP ($part) failed"
			fi
			if [ -x "$KPERF" ]; then
				port=$((port + 1))
				kperf "kcoll-round$r-$part" "$port" 900 -M \
					-c allreduce,allgather,reduce_scatter,broadcast,alltoall "${rargs[@]}"
			fi
			vm_sync "round$r-kcoll-$part" 1000
		done
		log "round $r of $rounds done after $((SECONDS - t0)) s"
	done
fi

# Gloo over ibverbs, last (see above): whether it runs on rxe is part of
# the answer.
if [ -x "$GLOO" ]; then
	if gloo_run ibverbs 150 -c allreduce,allgather,reduce_scatter,bcast \
		-b 8 -e 16M -f 4 -n 20 -w 0 -T 0.5; then
		gloo_ok="$gloo_ok ibverbs"
	else
		log "Gloo over ibverbs did not run; its last lines:"
		tail -5 "$KCOLL_OUT/gloo-ibverbs-rank$((ppn * kcoll_vm)).txt" | sed 's/^/    /'
	fi
fi
[ "$kcoll_vm" = 0 ] && echo "$gloo_ok" >"$KCOLL_OUT/gloo-ok.txt"

if [ "$kcoll_vm" = 0 ]; then
	{
		echo "Open MPI baseline, same boot ($(uname -r), $(nproc) vCPU/VM, 2 VMs x $ppn ranks)"
		echo "transports that ran: $(cat "$KCOLL_OUT/transports-ok.txt")"
		bw=$(cat "$kcoll_out/vm1/ib_write_bw-summary.txt" 2>/dev/null)
		echo "ib_write_bw VM1->VM0 64 KiB (MB/s): $bw"
		wall=$(echo "$bw" | sed -n 's/.*wall=\([0-9.]*\).*/\1/p')
		pt=$(echo "$bw" | sed -n 's/.*perftest=\([0-9.]*\).*/\1/p')
		# busbw in MB/s of one allreduce row (SIZE) of FILE.
		ar_mbs() {
			awk -v s="$1" '/^# allreduce:/ { r = 1 } /^# allgather:/ { r = 0 }
				r && $1 == s { printf "%.2f", $8 * 1000 }' "$2" 2>/dev/null
		}
		ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "?" }'; }
		echo "allreduce busbw (MB/s): probe before kcoll | probe with kcoll | table with kcoll"
		for tr in $working; do
			for sz in 2097152 16777216; do
				a=$(ar_mbs $sz "$KCOLL_OUT/mpi-pre-$tr.txt")
				b=$(ar_mbs $sz "$KCOLL_OUT/mpi-post-$tr.txt")
				c=$(ar_mbs $sz "$KCOLL_OUT/mpi-$tr.txt")
				echo "  $tr $sz B: ${a:-?} | ${b:-?} | ${c:-?}"
			done
			m=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", (a + b) / 2 }')
			echo "  $tr 16 MiB, mean of the probes: ${m:-?} MB/s = $(ratio "$m" "$wall") x ib_write_bw (wall)," \
				"$(ratio "$m" "$pt") x ib_write_bw (perftest)"
		done
		for tr in $working; do
			grep -E '^# [a-z_]+: sizes >= 1 MiB' "$KCOLL_OUT/mpi-$tr.txt" | sed "s/^# /$tr: /"
		done
	} >"$KCOLL_OUT/summary.txt"
	cat "$KCOLL_OUT/summary.txt"
	"$KCOLL_TOP/tools/bench-table.sh" "$kcoll_out" >"$KCOLL_OUT/table.txt" 2>&1 ||
		fail "bench-table.sh"
	cat "$KCOLL_OUT/table.txt"
fi

kill "$rexecd_pid" 2>/dev/null
log "scenario took $((SECONDS - t_start)) s"
kcoll_mod_unload
kcoll_finish
