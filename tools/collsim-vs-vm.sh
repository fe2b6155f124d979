#!/bin/bash
# collsim against the VMs: for every collective and size that make bench
# ran with each algorithm forced (tests/vm/scenarios/mpi-bench.sh "algos":
# vm0/algo-<collective>-<algorithm>.txt), the algorithms ranked by their
# measured time and by collsim's, with the simulator fed only figures
# measured in the same boot, none fitted to the collectives themselves:
#   alpha  2 x ib_write_lat (a step is a GRANT one way, then the WRITE)
#   B      ib_write_bw one way (64 KiB writes)
#   gamma  the engine's fp32 sum in the guest (debugfs reduce_bench, 64 KiB)
#   topology  1 rank per VM: fullbisection; P per VM: fattree, leaves of P
#          ranks sharing one VM link (oversubscription P)
#   local  with intra_node on in that boot (vm0/kcoll-paths.txt; on unless
#          it says otherwise), ranks of one VM copy to each other (collsim
#          -L) at the guest's memcpy rate (reduce_bench, 64 KiB)
#   eager  with eager on (the same file; off if it is missing: boots before
#          it), transfers of at most 8 KiB cost 1 x ib_write_lat (-E)
#   o      the per-message CPU cost (-o): what the module's own round trip
#          between the VMs (sysfs rdma_devices alpha_ns of the first
#          device: the shortest of its PINGs) takes beyond perftest's, over
#          the three passes of software a round trip makes (send the PING;
#          take it and send the PONG; take that), as a transfer through a
#          grant makes three (grant; take it and post the write; take the
#          completion): (alpha_ns - 2 x ib_write_lat) / 3
#   CPUs   the ranks of a VM share its vCPUs (-U ranks per CPU, from nproc
#          in the guest), where these costs, reductions and copies queue
# Prints both rankings and whether the fastest algorithm and the whole
# order agree, then the totals, and the totals of the model without the
# last two (the simulator as it was before it had them).
# Usage: tools/collsim-vs-vm.sh DIR [COLLSIM]
set -u
dir=${1:?usage: $0 DIR [COLLSIM]}
top=$(cd "$(dirname "$0")/.." && pwd)
sim=${2:-$top/build/tools/collsim}
v0=$dir/vm0
[ -x "$sim" ] || { echo "collsim-vs-vm: no $sim (make collsim)" >&2; exit 1; }
ls "$v0"/algo-*-*.txt >/dev/null 2>&1 ||
	{ echo "collsim-vs-vm: no $v0/algo-*.txt (make bench, or mpi-bench.sh \"algos\")" >&2; exit 1; }

sum=$(cat "$dir/vm1/ib_write_bw-summary.txt" 2>/dev/null)
val() { echo "$sum" | sed -n "s/.*\\b$1=\\([0-9.]*\\).*/\\1/p" | head -1; }
mbs=$(val perftest) lat=$(val lat)
red=$(awk '$1 == 65536 { print $2 }' "$v0/reduce-bench.txt" 2>/dev/null)
cpy=$(awk '$1 == 65536 { print $3 }' "$v0/reduce-bench.txt" 2>/dev/null)
paths=$(cat "$v0/kcoll-paths.txt" 2>/dev/null)
intra=$(echo "$paths" | sed -n 's/^intra_node=//p')
eager=$(echo "$paths" | sed -n 's/^eager=//p')
ping=$(echo "$paths" | sed -n 's/^rdma_devices=//p' | grep -o 'alpha_ns=[0-9]*' | head -1 | cut -d= -f2)
cpus=$(echo "$paths" | sed -n 's/^cpus=//p')
f=$(ls "$v0"/algo-*-*.txt | head -1)
n=$(sed -n 's/^# kcoll-perf: \([0-9]*\) ranks.*/\1/p' "$f" | head -1)
ppn=$(grep -c "^#  Rank .* on vm0\$" "$f")
for v in mbs lat red cpy n ppn; do
	[ -n "${!v}" ] && [ "${!v}" != 0 ] ||
		{ echo "collsim-vs-vm: could not read $v from $dir" >&2; exit 1; }
done
alpha_ns=$(awk -v l="$lat" 'BEGIN { printf "%d", 2 * l * 1000 }')
# What-if runs only (not a measurement): COLLSIM_ALPHA_NS replaces it.
alpha_ns=${COLLSIM_ALPHA_NS:-$alpha_ns}
gbps=$(awk -v m="$mbs" 'BEGIN { printf "%.6f", m / 1000 }')
rgbps=$(awk -v m="$red" 'BEGIN { printf "%.6f", m / 1000 }')
if [ "$ppn" -le 1 ]; then
	topo=(-t fullbisection)
else
	topo=(-t fattree -k "$ppn" -O "$ppn" -P "$ppn")
	[ "${intra:-1}" = 1 ] &&
		topo+=(-L -Y "$(awk -v m="$cpy" 'BEGIN { printf "%.6f", m / 1000 }')")
fi
[ "${eager:-0}" = 1 ] &&
	topo+=(-E "$(awk -v l="$lat" 'BEGIN { printf "%d", l * 1000 }')")
# The per-message cost and the shared CPUs (boots before they were
# recorded: the model without them only).
cost=()
if [ -n "$ping" ] && [ "$ping" -gt 0 ] && [ -n "$cpus" ] && [ "$cpus" -gt 0 ]; then
	o_ns=$(awk -v p="$ping" -v l="$lat" 'BEGIN { o = (p - 2000 * l) / 3; printf "%d", (o > 0 ? o : 0) }')
	# What-if runs only (not a measurement): COLLSIM_O_NS replaces it.
	o_ns=${COLLSIM_O_NS:-$o_ns}
	cost=(-o "$o_ns" -U $(((ppn + cpus - 1) / cpus)))
fi
echo "# collsim vs the VMs ($dir): $n ranks, $ppn per VM; ${topo[*]} ${cost[*]}"
echo "# from the same boot: alpha $alpha_ns ns (2 x ib_write_lat $lat us)," \
	"B $mbs MB/s (ib_write_bw), reduction $red MB/s, memcpy $cpy MB/s" \
	"(reduce_bench, 64 KiB); intra_node ${intra:-1 (assumed)}, eager ${eager:-0 (assumed)};" \
	"the module's round trip ${ping:-?} ns, ${cpus:-?} vCPU per VM"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$v0"/algo-*-*.txt; do
	b=${f##*/algo-}
	b=${b%.txt}
	case $b in *-rank*) continue ;; esac
	c=${b%-*} a=${b##*-}
	# measured: "coll algo size time_us"
	awk -v c="$c" -v a="$a" '$1 ~ /^[0-9]+$/ && NF >= 9 && $1 > 0 { print c, a, $1, $6 }' "$f" >>"$tmp/vm"
	for m in plain cost; do
		[ $m = cost ] && [ ${#cost[@]} = 0 ] && continue
		extra=()
		[ $m = cost ] && extra=("${cost[@]}")
		"$sim" -n "$n" -c "$c" -a "$a" -b 8 -e 8M -f 32 "${topo[@]}" "${extra[@]}" \
			-A "$alpha_ns" -B "$gbps" -G "$rgbps" -C 65536 2>/dev/null |
			awk -v c="$c" -v a="$a" '$1 == c && $2 == a { print c, a, $3, $5 }' >>"$tmp/sim-$m"
	done
done
[ -s "$tmp/vm" ] && [ -s "$tmp/sim-plain" ] || { echo "collsim-vs-vm: nothing to compare" >&2; exit 1; }

# rank MODEL: both rankings per case (R lines) and the totals (a T line).
printf '%-14s %9s  %-44s  %-44s  %s\n' collective 'size(B)' \
	'measured (ms), fastest first' 'collsim (ms), fastest first' agree
rank() {
awk '
FNR == 1 { file++ }
file == 1 { vm[$1, $3, $2] = $4; if (!(($1, $3) in algos)) key[++nk] = $1 " " $3
	    algos[$1, $3] = algos[$1, $3] " " $2 }
file == 2 { sim[$1, $3, $2] = $4 }
END {
	for (i = 1; i <= nk; i++) {
		split(key[i], cs, " ")
		c = cs[1]; s = cs[2]
		m = split(substr(algos[c, s], 2), al, " ")
		k = 0
		for (j = 1; j <= m; j++)
			if ((c, s, al[j]) in sim)
				ok[++k] = al[j]
		if (k < 2)
			continue
		# order by measured time, then by simulated time
		for (j = 1; j <= k; j++) { ov[j] = ok[j]; os[j] = ok[j] }
		for (j = 2; j <= k; j++)
			for (l = j; l > 1 && vm[c, s, ov[l - 1]] + 0 > vm[c, s, ov[l]] + 0; l--) {
				t = ov[l]; ov[l] = ov[l - 1]; ov[l - 1] = t
			}
		for (j = 2; j <= k; j++)
			for (l = j; l > 1 && sim[c, s, os[l - 1]] + 0 > sim[c, s, os[l]] + 0; l--) {
				t = os[l]; os[l] = os[l - 1]; os[l - 1] = t
			}
		lv = ""; ls = ""; same = 1
		for (j = 1; j <= k; j++) {
			lv = lv sprintf("%s %.1f ", ov[j], vm[c, s, ov[j]] / 1000)
			ls = ls sprintf("%s %.1f ", os[j], sim[c, s, os[j]] / 1000)
			if (ov[j] != os[j])
				same = 0
		}
		first = ov[1] == os[1]
		# collsim picked another: how much slower it measured
		tie = !first && vm[c, s, os[1]] <= 1.1 * vm[c, s, ov[1]]
		cases++; firsts += first; orders += same; ties += tie
		printf "R %-14s %9d  %-44s  %-44s  %s\n", c, s, lv, ls,
		       same ? "order" : first ? "fastest" : tie ? "within 10%" : "no"
	}
	printf "T # %d cases: the same fastest algorithm in %d, the same whole order in %d;", cases, firsts, orders
	printf " where the fastest differs, collsim'"'"'s pick measured within 10%% of the best in %d\n", ties
}' "$tmp/vm" "$tmp/sim-$1"
}
final=plain
[ -s "$tmp/sim-cost" ] && final=cost
rank $final >"$tmp/out"
grep '^R ' "$tmp/out" | sort -k2,2 -k3,3n | cut -c3-
grep '^T ' "$tmp/out" | cut -c3-
if [ $final = cost ]; then
	printf '# without the per-message cost and the shared CPUs: '
	rank plain | grep '^T ' | cut -c5-
fi
