#!/bin/bash
# Two builds of the module side by side in one boot of two VMs: A B, B A,
# A B, ... (ROUNDS pairs, default 4), each turn loaded on both VMs at once
# and measured with kcoll-perf (COLLS, separated by "/", default
# allreduce, allgather and broadcast; 8 B to MAX, default 16M; 2 ranks per
# VM), then the medians per (collective, size) and B's time over A's. For
# what a change costs (docs/PERFORMANCE.md): the emulated link drifts
# within a boot, and the second turn of a pair was slower (an A/A run of
# one module, always A first, had B/A up to 1.4), so the order alternates
# and an even ROUNDS gives each build the first turn as often. Not part
# of make check (about 15 minutes). Usage:
#   tests/vm/vmrun.sh -k KVER -n 2 -o OUT -t 3000 \
#       -a "KO_A KO_B [ROUNDS [COLLS [MAX [ARGS]]]]" tests/vm/scenarios/ab-bench.sh
# ARGS: more kcoll-perf options, colons for spaces (e.g. -n:25:-B:25:
# 25 iterations on buffers of their own, which may run side by side).
# then OUT/vm0/ab.txt (with each turn's stats/ counters of vm0). KO_A
# and KO_B are paths to kcoll.ko builds for KVER that speak the same
# wire version.
. "$kcoll_top/tests/vm/guest-lib.sh"

# shellcheck disable=SC2086
set -- $KCOLL_ARG
ko_a=${1:-}
ko_b=${2:-}
rounds=${3:-4}
colls=${4:-allreduce/allgather/broadcast}
max=${5:-16M}
extra=${6:-}
extra=${extra//:/ }
ppn=2
if [ ! -f "$ko_a" ] || [ ! -f "$ko_b" ]; then
	fail "usage: -a \"KO_A KO_B [ROUNDS [COLLS [MAX]]]\" (got '$KCOLL_ARG')"
	kcoll_finish
	exit 0
fi

kcoll_net_up
kcoll_rxe_up
kcoll_peers_up
export KCOLL_NRANKS=$((2 * ppn)) KCOLL_BOOTSTRAP_TIMEOUT_MS=120000
export KCOLL_SECRET=6b636f6c6c2d61622d62656e63682121
port=29950
AB_STATS="eager_sends eager_ahead grants_ahead sends_ahead colls_beside returned_early tokens_covered grants_fenced grants_fenced_held"
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) = 1 ]; then order="a b"; else order="b a"; fi
	for v in $order; do
		if [ $v = a ]; then KCOLL_KO=$ko_a; else KCOLL_KO=$ko_b; fi
		kcoll_mod_load || break 2
		vm_sync "load-$r-$v" 300
		for c in ${colls//\// }; do
			port=$((port + 1))
			# shellcheck disable=SC2086 # $extra: several words
			kcoll_kperf "$v-$r-$c" $port -M -c "$c" -b 8 -e "$max" -f 8 -n 5 -w 1 -i 0 $extra
		done
		# What the mechanisms a change is about did in this turn, on
		# this VM (the module's counters go with it).
		for st in $AB_STATS; do
			echo "$st $(cat /sys/class/misc/kcoll/stats/$st 2>/dev/null || echo -)"
		done >"$KCOLL_OUT/$v-$r-stats.txt"
		vm_sync "done-$r-$v" 1800
		kcoll_mod_unload
		vm_sync "unloaded-$r-$v" 300
	done
done

if [ "$kcoll_vm" = 0 ]; then
	python3 - "$KCOLL_OUT" "$rounds" "$colls" >"$KCOLL_OUT/ab.txt" <<'EOF'
import statistics, sys
out, rounds, colls = sys.argv[1], int(sys.argv[2]), sys.argv[3].split("/")
t, own = {}, {}
for v in "ab":
    for r in range(1, rounds + 1):
        for c in colls:
            last = None
            for line in open(f"{out}/{v}-{r}-{c}-rank0.txt"):
                f = line.split()
                # kcoll-perf -1: rank 0's own time, under its row
                if line.startswith("#   each rank's own time") and last:
                    own.setdefault(last, []).append(float(f[f.index("0:") + 1]))
                    continue
                # A row cut short (the turn's kcoll-perf failed there)
                # is left out; the failure is logged above.
                if not f or f[0].startswith("#") or not f[0].isdigit() or \
                        len(f) < 8:
                    continue
                last = (c, int(f[0]), v)
                t.setdefault(last, []).append(
                    (float(f[5]), float(f[7])))
print("# median of %d interleaved rounds; time in us, busbw in MB/s" % rounds)
print("# %-10s %10s %10s %10s %8s %8s %7s" % (
    "coll", "bytes", "A time", "B time", "A busbw", "B busbw", "B/A t"))
for c, n, v in sorted(k for k in t if k[2] == "a"):
    a = t[(c, n, "a")]
    b = t.get((c, n, "b"), [])
    if not b:
        continue
    ta = statistics.median(x[0] for x in a)
    tb = statistics.median(x[0] for x in b)
    ba = statistics.median(x[1] for x in a)
    bb = statistics.median(x[1] for x in b)
    print("  %-10s %10d %10.1f %10.1f %8.2f %8.2f %7.2f" % (
        c, n, ta, tb, ba, bb, tb / ta if ta else 0))
for c, n, v in sorted(k for k in own if k[2] == "a"):
    a, b = own[(c, n, "a")], own.get((c, n, "b"))
    if b:
        ta, tb = statistics.median(a), statistics.median(b)
        print("# rank 0's own: %-10s %10d %10.1f %10.1f %7.2f" % (
            c, n, ta, tb, tb / ta if ta else 0))
# Each turn's counters on this VM ("-": the build has no such counter).
for v in "ab":
    for r in range(1, rounds + 1):
        try:
            st = " ".join(l.strip() for l in open(f"{out}/{v}-{r}-stats.txt"))
        except OSError:
            continue
        print("# stats %s-%d (vm0): %s" % (v.upper(), r, st))
EOF
	[ "${PIPESTATUS[0]}" = 0 ] || fail "summary failed"
	cat "$KCOLL_OUT/ab.txt"
fi
kcoll_finish
