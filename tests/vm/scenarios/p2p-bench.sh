#!/bin/bash
# Point-to-point against Open MPI, one boot of two VMs (issue 21, item 2):
# 4 ranks (2 per VM), each sending to the next rank and receiving from the
# previous one at once (kcoll-perf's and kcoll-mpibench's sendrecv), 8 B,
# 256 B and 8 KiB. The systems run interleaved, round after round
# (kcoll_arg "rounds=N", default 3), so that the emulated link's drift
# within the boot hits all alike: Open MPI over each transport that runs
# (TCP; UCX on rxe), then kcoll with sysfs eager_p2p 1 (small messages
# eager) and 0 (granted). p2p-summary.txt on VM 0: each system's median
# time per size, and kcoll's lead over the best peer (>= 1: ahead). Not
# part of `make check`; run it with
#   tests/vm/vmrun.sh -k KVER -n 2 -o build/vmtest-p2p -t 1800 tests/vm/scenarios/p2p-bench.sh
. "$kcoll_top/tests/vm/guest-lib.sh"

peer_vm=$((1 - kcoll_vm))
peer=10.9.0.$((peer_vm + 1))
bench=$KCOLL_TOP/build/tools/kcoll-mpibench
KPERF=$KCOLL_TOP/build/tools/kcoll-perf
rexec_port=2222
ppn=2 rounds=3 transports="tcp ucx"
for a in ${KCOLL_ARG:-}; do
	case $a in
	rounds=*) rounds=${a#rounds=} ;;
	*) fail "p2p-bench: unknown argument $a" ;;
	esac
done
np=$((2 * ppn))

kcoll_net_up
kcoll_rxe_up
[ -x "$bench" ] || fail "no $bench (make mpibench)"
[ -x "$KPERF" ] || fail "no $KPERF (make tools)"
. "$kcoll_top/tests/vm/mpi-lib.sh"
kcoll_mod_load
vm_sync kcoll-loaded 120

export KCOLL_NRANKS=$np KCOLL_SECRET=6b636f6c6c2d70327062656e63683031
export KCOLL_BOOTSTRAP_TIMEOUT_MS=120000
sizes=(-b 8 -e 8K -f 32 -n 50 -w 10)
port=29970
for r in $(seq 1 "$rounds"); do
	if [ "$kcoll_vm" = 0 ]; then
		for tr in $transports; do
			mpi_run "round$r-$tr" 600 "$tr" -c sendrecv "${sizes[@]}" ||
				log "round $r: Open MPI over $tr failed"
		done
	fi
	vm_sync "round$r-mpi" 1300
	for p in 1 0; do
		echo "$p" >/sys/class/misc/kcoll/eager_p2p || fail "eager_p2p $p"
		vm_sync "round$r-p$p-set" 60
		port=$((port + 1))
		KCOLL_KPERF_TIMEOUT=600 kcoll_kperf "kcoll-round$r-p$p" "$port" \
			-M -c sendrecv "${sizes[@]}"
		vm_sync "round$r-p$p" 700
	done
	log "round $r of $rounds done"
done
echo 1 >/sys/class/misc/kcoll/eager_p2p

# The table: per system and size the median over the rounds of the time
# per operation (column 6 of both tools' rows); a row with a wrong element
# fails the run.
if [ "$kcoll_vm" = 0 ]; then
	rows() {	# SYSTEM FILE...: "SYSTEM SIZE TIME" per data row
		local sys=$1
		shift
		awk -v s="$sys" '$1 ~ /^[0-9]+$/ && NF >= 9 {
			if ($9 != 0) { print "WRONG", s, $1, $9; next }
			print s, $1, $6 }' "$@"
	}
	{
		for tr in $transports; do
			rows "mpi-$tr" "$KCOLL_OUT"/mpi-round*-"$tr".txt
		done
		for p in 1 0; do
			rows "kcoll-p$p" "$KCOLL_OUT"/kcoll-round*-p"$p"-rank0.txt
		done
	} >"$KCOLL_OUT/p2p-rows.txt" 2>/dev/null
	grep -q '^WRONG' "$KCOLL_OUT/p2p-rows.txt" &&
		fail "wrong elements: $(grep '^WRONG' "$KCOLL_OUT/p2p-rows.txt" | head -3)"
	awk -v tr="$transports" '
	$1 == "WRONG" { next }
	{ n = ++cnt[$1, $2]; t[$1, $2, n] = $3; sz[$2] = 1 }
	function median(s, z,    n, i, j, v, a) {
		n = cnt[s, z]
		if (!n) return -1
		for (i = 1; i <= n; i++) a[i] = t[s, z, i]
		for (i = 2; i <= n; i++) {
			v = a[i]
			for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]
			a[j + 1] = v
		}
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function cell(v) { return v < 0 ? "-" : sprintf("%.0f", v) }
	END {
		m = split(tr, trs, " ")
		printf "| size | kcoll eager | kcoll granted |"
		for (i = 1; i <= m; i++) printf " Open MPI %s |", toupper(trs[i])
		printf " best peer | lead (eager) | lead (granted) |\n|---|---|---|"
		for (i = 1; i <= m; i++) printf "---|"
		printf "---|---|---|\n"
		ns = 0
		for (z in sz) zs[++ns] = z + 0
		for (i = 2; i <= ns; i++) {
			v = zs[i]
			for (j = i - 1; j >= 1 && zs[j] > v; j--) zs[j + 1] = zs[j]
			zs[j + 1] = v
		}
		for (k = 1; k <= ns; k++) {
			z = zs[k]
			e = median("kcoll-p1", z); g = median("kcoll-p0", z)
			best = -1; bn = "-"
			for (i = 1; i <= m; i++) {
				v = median("mpi-" trs[i], z)
				if (v >= 0 && (best < 0 || v < best)) { best = v; bn = toupper(trs[i]) }
			}
			printf "| %d B | %s | %s |", z, cell(e), cell(g)
			for (i = 1; i <= m; i++) printf " %s |", cell(median("mpi-" trs[i], z))
			printf " %s | %s | %s |\n", bn,
				(best > 0 && e > 0) ? sprintf("%.2f", best / e) : "-",
				(best > 0 && g > 0) ? sprintf("%.2f", best / g) : "-"
		}
	}' "$KCOLL_OUT/p2p-rows.txt" >"$KCOLL_OUT/p2p-summary.txt"
	echo "# sendrecv, $np ranks on 2 VMs, median time per operation (us) over $rounds rounds"
	cat "$KCOLL_OUT/p2p-summary.txt"
fi
vm_sync summary 120
kill "$rexecd_pid" 2>/dev/null
kcoll_mod_unload
kcoll_finish
