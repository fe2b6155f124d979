#!/bin/bash
# Unmodified MPI programs through kcoll (libkcoll-mpi.so, LD_PRELOAD): on
# two VMs, PPN ranks each (default 2), Open MPI over TCP launched from VM 0
# (tests/vm/mpi-lib.sh):
#   1. tests/mpi/kcoll_mpi4py_test.py, an mpi4py program, with and without
#      the library: every rank's digest of everything it received must be
#      the same, and with it every interposed function must have taken the
#      kcoll path (KCOLL_MPI_STATS=1 counts at MPI_Finalize), on
#      MPI_COMM_WORLD, a duplicate and a split, blocking and non-blocking
#      (completed by Wait, Waitall, Test and Waitany over a mix with an
#      MPI request);
#   1b. tests/mpi/kcoll_mpi4py_inflight.py: requests of non-blocking
#      collectives freed or cancelled in flight (refused, without and with
#      the library) and outliving their freed communicator (with it);
#   2. the project's MPI benchmark (kcoll-mpibench, every collective from
#      8 B to 16 MiB, results checked) with and without: both must check
#      clean; the time per operation of each at 8 B and 16 MiB is printed
#      side by side ("perf" lines, interposer / Open MPI's own).
#
#   tests/vm/vmrun.sh -k KVER -n 2 -m 1536 -o OUT -t 1200 \
#       [-a "[PPN] [quick] [colls=C+...]"] \
#       tests/vm/scenarios/mpi-preload.sh
. "$kcoll_top/tests/vm/guest-lib.sh"

# Words of the argument: PPN (a number), "quick" (the benchmark at 8 B
# only, with the library only, as make check runs it; the figures need
# the full run), "colls=C+..." (the benchmark's collectives, '+' between
# them: ',' stands for a space on the kernel command line; all).
ppn=2 quick=0 colls=all
for a in $KCOLL_ARG; do
	case $a in
	quick) quick=1 ;;
	colls=*) colls=${a#colls=} colls=${colls//+/,} ;;
	*[!0-9]*) fail "bad argument '$a'" ;;
	*) ppn=$a ;;
	esac
done
np=$((2 * ppn))
peer=10.9.0.$((2 - kcoll_vm))
rexec_port=2222
mpi_procs="kcoll-mpibench python3"
PRE=$KCOLL_TOP/build/mpi/libkcoll-mpi.so
BENCH=$KCOLL_TOP/build/tools/kcoll-mpibench
PROG=$KCOLL_TOP/tests/mpi/kcoll_mpi4py_test.py
INFL=$KCOLL_TOP/tests/mpi/kcoll_mpi4py_inflight.py

kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
kcoll_res_baseline
# shellcheck source=tests/vm/mpi-lib.sh
. "$kcoll_top/tests/vm/mpi-lib.sh"

# run NAME PRELOAD(0|1) TIMEOUT COMMAND...: output in NAME.txt
run() {
	local name=$1 pre=$2 tmo=$3 t0=$SECONDS rc
	shift 3
	local extra=()
	[ "$pre" = 1 ] && extra=(-x "LD_PRELOAD=$PRE" -x KCOLL_MPI_STATS=1 -x KCOLL_MPI_VERBOSE=1)
	# shellcheck disable=SC2046
	# PYTHONPATH: tests/mpi/vm-site/sitecustomize.py says why.
	timeout -k 15 "$tmo" mpirun "${mpi_common[@]}" $(transport_args tcp) \
		-x PYTHONPATH="$KCOLL_TOP/tests/mpi/vm-site" \
		"${extra[@]}" "$@" >"$KCOLL_OUT/$name.txt" 2>&1
	rc=$?
	log "$name: exit $rc in $((SECONDS - t0)) s"
	mpi_cleanup
	return $rc
}

# The bench's rows: "COLL SIZE TIME_US CPU_S_PER_GB WRONG".
rows() {
	awk '/^# [a-z_]+: [0-9]+ ranks/ { c = $2; sub(":", "", c) }
	     /^ +[0-9]+ / && c != "" { print c, $1, $6, $11, $9 }' "$1"
}

if [ "$kcoll_vm" = 0 ]; then
	[ -f "$PRE" ] || fail "no $PRE (make mpi-preload)"
	[ -x "$BENCH" ] || fail "no $BENCH (make mpibench)"
	# 1. mpi4py, without and with.
	run mpi4py-mpi 0 300 /usr/bin/python3 "$PROG" || fail "mpi4py without the library failed"
	run mpi4py-kcoll 1 300 /usr/bin/python3 "$PROG" || fail "mpi4py with the library failed"
	grep '^digest' "$KCOLL_OUT/mpi4py-mpi.txt" | sort >"$KCOLL_OUT/digest-mpi.txt"
	grep '^digest' "$KCOLL_OUT/mpi4py-kcoll.txt" | sort >"$KCOLL_OUT/digest-kcoll.txt"
	[ "$(wc -l <"$KCOLL_OUT/digest-mpi.txt")" = "$np" ] ||
		fail "mpi4py without the library: $(wc -l <"$KCOLL_OUT/digest-mpi.txt") of $np digests"
	if ! cmp -s "$KCOLL_OUT/digest-mpi.txt" "$KCOLL_OUT/digest-kcoll.txt"; then
		fail "mpi4py: the results differ with the library (digest-*.txt)"
		# Which calls differ, and whether the registration cache
		# matters: again with a digest per call, the cache on and off.
		run tags-mpi 0 300 -x KCOLL_TEST_TAGS=1 /usr/bin/python3 "$PROG"
		run tags-kcoll 1 300 -x KCOLL_TEST_TAGS=1 /usr/bin/python3 "$PROG"
		echo 0 >/sys/class/misc/kcoll/reg_cache_mb
		/tmp/kcoll-rsh vm1 "echo 0 >/sys/class/misc/kcoll/reg_cache_mb"
		run tags-kcoll-nocache 1 300 -x KCOLL_TEST_TAGS=1 /usr/bin/python3 "$PROG"
		echo 256 >/sys/class/misc/kcoll/reg_cache_mb
		/tmp/kcoll-rsh vm1 "echo 256 >/sys/class/misc/kcoll/reg_cache_mb"
		for t in kcoll kcoll-nocache; do
			grep '^tag' "$KCOLL_OUT/tags-mpi.txt" | sort >"$KCOLL_OUT/tags-mpi.sorted"
			grep '^tag' "$KCOLL_OUT/tags-$t.txt" | sort >"$KCOLL_OUT/tags-$t.sorted"
			log "calls whose results differ ($t): $(diff "$KCOLL_OUT/tags-mpi.sorted" \
				"$KCOLL_OUT/tags-$t.sorted" | grep -c '^>')"
			diff "$KCOLL_OUT/tags-mpi.sorted" "$KCOLL_OUT/tags-$t.sorted" | grep '^>' | head -8
		done
	fi
	grep '^kcoll-mpi: rank' "$KCOLL_OUT/mpi4py-kcoll.txt" | sort >"$KCOLL_OUT/stats.txt"
	sed 's/^/    /' "$KCOLL_OUT/stats.txt"
	[ "$(wc -l <"$KCOLL_OUT/stats.txt")" = "$np" ] || fail "not every rank printed its counts"
	for f in MPI_Allreduce MPI_Reduce MPI_Bcast MPI_Allgather MPI_Reduce_scatter_block \
		MPI_Alltoall MPI_Barrier MPI_Gather MPI_Scatter MPI_Iallreduce MPI_Ireduce \
		MPI_Ibcast MPI_Iallgather MPI_Ireduce_scatter_block MPI_Ialltoall MPI_Ibarrier \
		MPI_Igather MPI_Iscatter MPI_Allgatherv MPI_Reduce_scatter MPI_Alltoallv \
		MPI_Iallgatherv MPI_Ialltoallv; do
		n=$(grep -c " $f [1-9][0-9]* kcoll," "$KCOLL_OUT/stats.txt")
		[ "$n" = "$np" ] || fail "$f took the kcoll path on $n of $np ranks"
	done
	# World, its duplicate, this rank's half of the split (and whatever
	# mpi4py duplicates for itself): at least 3, none refused.
	n=$(grep -cE ": ([3-9]|[1-9][0-9]+) communicator\(s\) mirrored, 0 not" "$KCOLL_OUT/stats.txt")
	[ "$n" = "$np" ] || fail "not every communicator was mirrored"
	# The split's mirror came from coll_comm_split(), not a bootstrap.
	n=$(grep -cE " [1-9][0-9]* by split;" "$KCOLL_OUT/stats.txt")
	[ "$n" = "$np" ] || fail "the split was mirrored by a bootstrap on $((np - n)) rank(s), not by coll_comm_split()"
	# The duplicate's (and the even ranks' group's) by
	# coll_comm_create_group(), not a bootstrap either.
	n=$(grep -cE " [1-9][0-9]* by group;" "$KCOLL_OUT/stats.txt")
	[ "$n" = "$np" ] || fail "the duplicate was mirrored by a bootstrap on $((np - n)) rank(s), not by coll_comm_create_group()"
	# The calls left to MPI are counted as such.
	grep -q "MPI_Allgather [0-9]* kcoll, [1-9][0-9]* mpi (datatype" "$KCOLL_OUT/stats.txt" ||
		fail "the mixed-type allgather was not left to MPI"
	# A gather's and a scatter's root with its own types (bytes, a
	# derived type) still go through kcoll: the others cannot see them.
	grep -q "MPI_Gather [0-9]* kcoll, [1-9][0-9]* mpi" "$KCOLL_OUT/stats.txt" &&
		fail "a gather was left to MPI (a hang, had the ranks differed)"

	# 1b. Requests in flight (tests/mpi/kcoll_mpi4py_inflight.py): freeing
	# or cancelling one is refused as Open MPI's own non-blocking
	# collectives refuse it, without and with the library; a communicator
	# freed under a pending operation, with it only (Open MPI 4.1's own
	# crash there).
	run inflight-mpi 0 120 /usr/bin/python3 "$INFL" refuse ||
		fail "requests in flight, without the library: see inflight-mpi.txt"
	run inflight-kcoll 1 120 /usr/bin/python3 "$INFL" refuse freed-comm ||
		fail "requests in flight, with the library: see inflight-kcoll.txt"
	for s in mpi kcoll; do
		n=$(grep -c '^inflight rank [0-9]*: ok' "$KCOLL_OUT/inflight-$s.txt")
		[ "$n" = "$np" ] || fail "requests in flight ($s): $n of $np ranks ok"
	done
	for f in MPI_Ireduce_scatter_block MPI_Ibarrier; do
		n=$(grep -c "^kcoll-mpi: rank.* $f [1-9][0-9]* kcoll," "$KCOLL_OUT/inflight-kcoll.txt")
		[ "$n" = "$np" ] || fail "requests in flight: $f took the kcoll path on $n of $np ranks"
	done

	# 2. The benchmark, without and with: every collective at 8 B and
	# 16 MiB; "quick" (make check), with the library only, at 8 B (its
	# check still compares every element).
	bargs=(-c "$colls" -b 8 -e 16M -f 2048 -n 10 -w 1 -T 1)
	runs="mpi kcoll"
	if [ $quick = 1 ]; then
		bargs=(-c "$colls" -b 8 -e 8 -n 3 -w 0)
		runs=kcoll
	else
		run bench-mpi 0 600 "$BENCH" "${bargs[@]}" || fail "kcoll-mpibench without the library failed"
	fi
	run bench-kcoll 1 600 "$BENCH" "${bargs[@]}" || fail "kcoll-mpibench with the library failed"
	for s in $runs; do
		grep -q 'Out of bounds values : 0 OK' "$KCOLL_OUT/bench-$s.txt" ||
			fail "kcoll-mpibench ($s): results wrong or incomplete"
	done
	[ "$colls" != all ] || grep -q " MPI_Allreduce [1-9][0-9]* kcoll" "$KCOLL_OUT/bench-kcoll.txt" ||
		fail "the benchmark's allreduce did not go through kcoll"
	[ $quick = 1 ] || rows "$KCOLL_OUT/bench-mpi.txt" >"$KCOLL_OUT/rows-mpi.txt"
	rows "$KCOLL_OUT/bench-kcoll.txt" >"$KCOLL_OUT/rows-kcoll.txt"
	[ $quick = 1 ] || join -j1 <(awk '{ print $1 "@" $2, $3, $4 }' "$KCOLL_OUT/rows-kcoll.txt" | sort) \
		<(awk '{ print $1 "@" $2, $3, $4 }' "$KCOLL_OUT/rows-mpi.txt" | sort) |
		awk '{ split($1, k, "@"); if (k[2] == 8 || k[2] == 16777216)
			printf "perf mpi %s %s B: %.1f us interposed, %.1f us Open MPI (%.2fx time); cpu %s vs %s s/GB\n",
			       k[1], k[2], $2, $4, $2 / $4, $3, $5 }' | tee "$KCOLL_OUT/perf.txt"
	[ $quick = 1 ] || [ -s "$KCOLL_OUT/perf.txt" ] || fail "no rows to compare"
	vm_sync mpi-done 60
else
	vm_sync mpi-done 1500
fi
kcoll_res_check
kcoll_mod_unload
kcoll_finish
