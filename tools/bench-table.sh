#!/bin/bash
# The side-by-side table of make bench: reads the output directory of
# tests/vm/scenarios/mpi-bench.sh (one boot) and prints, per collective and
# size, kcoll's busbw next to the link's (ib_write_bw, one way) and every
# peer that ran there (Open MPI per transport, Gloo per transport) as
# ratios kcoll/peer; then the 8-byte latencies, and CPU seconds per GB of
# bus traffic (sizes >= 1 MiB) of the ranks' processes and of the nodes;
# then, where the boot ran interleaved rounds (mpi-bench.sh "rounds=N"),
# each system's median over the rounds at the smallest size and at 16 MiB
# beside the best peer's.
# Usage: tools/bench-table.sh DIR     (DIR/vm0, DIR/vm1 as vmrun.sh left them)
set -u
dir=${1:?usage: $0 DIR}
v0=$dir/vm0
[ -f "$v0/kcoll-perf.txt" ] || { echo "bench-table: no $v0/kcoll-perf.txt" >&2; exit 1; }
sum=$(cat "$dir/vm1/ib_write_bw-summary.txt" 2>/dev/null)
val() { echo "$sum" | sed -n "s/.*\\b$1=\\([0-9.]*\\).*/\\1/p" | head -1; }
link=$(val perftest) bidir=$(val bidir) lat=$(val lat) post=$(val post)
# Two one-way figures (before and after kcoll's runs): the ratios use the
# higher one, the harder peer.
first=$link
if [ -n "$post" ] && [ -n "$link" ] &&
	awk -v a="$post" -v b="$link" 'BEGIN { exit !(a > b) }'; then
	link=$post
fi

files=("kcoll=$v0/kcoll-perf.txt")
for tr in $(cat "$v0/transports-ok.txt" 2>/dev/null); do
	[ -f "$v0/mpi-$tr.txt" ] && files+=("mpi-$tr=$v0/mpi-$tr.txt")
done
for tr in $(cat "$v0/gloo-ok.txt" 2>/dev/null); do
	[ -f "$v0/gloo-$tr.txt" ] && files+=("gloo-$tr=$v0/gloo-$tr.txt")
done

ranks=$(sed -n 's/^# kcoll-perf: \([0-9]*\) ranks.*/\1/p' "$v0/kcoll-perf.txt" | head -1)
echo "# kcoll side by side, one boot: ${ranks:-?} ranks on 2 VMs ($dir)"
echo "# link (perftest between the VMs): ib_write_bw 64 KiB ${first:-?} MB/s one way${post:+ (again after kcoll: $post; /link uses the higher)}," \
	"${bidir:-?} MB/s both ways together; ib_write_lat 8 B ${lat:-?} us"
echo "# peers:$(for f in "${files[@]:1}"; do printf ' %s' "${f%%=*}"; done)"
echo "# ratios are kcoll / peer (busbw: higher is better for kcoll; time: lower)"

# The interleaved rounds: SYSTEM ROUND PATH, both parts (small, big) of
# a round parsed as one.
rounds() {
	local f b r
	for f in "$v0"/kcoll-round*-*.txt "$v0"/mpi-round*-*.txt "$v0"/gloo-round*-*.txt; do
		[ -f "$f" ] || continue
		b=${f##*/}
		case $b in *-rank*) continue ;; esac
		r=${b#*-round}
		r=${r%%-*}
		case $b in
		kcoll-*) printf 'kcoll\t%s\t%s\n' "$r" "$f" ;;
		mpi-*) b=${b#mpi-round"$r"-}; printf 'mpi-%s\t%s\t%s\n' "${b%-*}" "$r" "$f" ;;
		gloo-*) b=${b#gloo-round"$r"-}; printf 'gloo-%s\t%s\t%s\n' "${b%-*}" "$r" "$f" ;;
		esac
	done
}

{
	for f in "${files[@]}"; do
		printf '%s\t%s\n' "${f%%=*}" "${f#*=}"
	done
	rounds
} | awk -v link="${link:-0}" '
BEGIN { FS = "\t" }
NF == 2 { sysname[++nsys] = $1; path[nsys] = $2 }
NF == 3 { rsys[++nr] = $1; rround[nr] = $2; rpath[nr] = $3 }
END {
	for (i = 1; i <= nsys; i++)
		parse(sysname[i], path[i])
	for (i = 1; i <= nr; i++)
		parse(rsys[i] "#" rround[i], rpath[i])
	for (co in nsz)		# sizes in order (insertion sort)
		for (j = 2; j <= nsz[co]; j++)
			for (l = j; l > 1 && sz[co, l - 1] + 0 > sz[co, l] + 0; l--) {
				t = sz[co, l]; sz[co, l] = sz[co, l - 1]; sz[co, l - 1] = t
			}
	ncoll = split("allreduce allgather reduce_scatter broadcast alltoall reduce", colls, " ")
	hdr = sprintf("%-14s %10s %9s %6s", "collective", "size(B)", "kcoll", "/link")
	for (i = 2; i <= nsys; i++)
		hdr = hdr sprintf(" %9s %6s", sysname[i], "k/" i - 1)
	print "#"
	print "# busbw (MB/s); k/N = kcoll / peer N in the order above"
	print hdr
	for (c = 1; c <= ncoll; c++) {
		co = colls[c]
		for (j = 1; j <= nsz[co]; j++) {
			s = sz[co, j]
			k = bw["kcoll", co, s]
			if (k == "")
				continue	# sizes kcoll ran
			line = sprintf("%-14s %10d %9.3f %6s", co, s, k,
				       ratio(k, link))
			for (i = 2; i <= nsys; i++) {
				p = bw[sysname[i], co, s]
				line = line sprintf(" %9s %6s", p == "" ? "-" : sprintf("%.3f", p),
						    ratio(k, p))
			}
			print line
		}
	}
	print "#"
	print "# latency: time per operation (us) at the smallest size kcoll and a peer both ran"
	print "# (8 B where the collective allows it); k/N as above, lower is better for kcoll"
	for (c = 1; c <= ncoll; c++) {
		co = colls[c]
		s = ""		# the smallest size kcoll and a peer both ran
		for (j = 1; j <= nsz[co] && s == ""; j++)
			for (i = 2; i <= nsys; i++)
				if (sz[co, j] + 0 > 0 && tm["kcoll", co, sz[co, j]] != "" &&
				    tm[sysname[i], co, sz[co, j]] != "")
					s = sz[co, j]
		if (s == "")
			continue
		line = sprintf("%-14s %10d %9.1f", co, s, tm["kcoll", co, s])
		for (i = 2; i <= nsys; i++) {
			p = tm[sysname[i], co, s]
			line = line sprintf("  %s %s (%s)", sysname[i], p == "" ? "-" : p,
					    ratio(tm["kcoll", co, s], p))
		}
		print line
	}
	print "#"
	print "# CPU s per GB of bus traffic, sizes >= 1 MiB: ranks (processes) | nodes (all busy CPUs)"
	for (c = 1; c <= ncoll; c++) {
		co = colls[c]
		if (cr["kcoll", co] == "")
			continue
		line = sprintf("%-14s kcoll %s | %s", co, cr["kcoll", co], cn["kcoll", co])
		for (i = 2; i <= nsys; i++) {
			if (cr[sysname[i], co] == "")
				continue
			line = line sprintf(";  %s %s | %s (k/%d %s | %s)", sysname[i],
					    cr[sysname[i], co], cn[sysname[i], co], i - 1,
					    ratio(cr["kcoll", co], cr[sysname[i], co]),
					    ratio(cn["kcoll", co], cn[sysname[i], co]))
		}
		print line
	}
	if (nr > 0)
		rounds_table()
}
# The medians over the interleaved rounds: per collective, the smallest
# size every system ran (time per operation) and 16 MiB (busbw); "best"
# is the best peer, "lead" kcoll against it (>= 1: kcoll ahead).
function rounds_table(    i, s, n, sy, nsy, r, nrd, c, co, j, k, best, bname, v, line, kind) {
	for (i = 1; i <= nr; i++) {
		if (!(rsys[i] in rseen)) {
			rseen[rsys[i]] = 1
			if (rsys[i] != "kcoll")
				peer[++npeer] = rsys[i]
		}
		if (rround[i] + 0 > nrd)
			nrd = rround[i] + 0
	}
	print "#"
	printf "# interleaved rounds: %d, systems in turn within each; medians over the rounds\n", nrd
	print "# small: time per operation (us, lower is better) at the smallest size all ran;"
	print "# 16 MiB: busbw (MB/s, higher is better). lead = kcoll against the best peer (>= 1: ahead)"
	line = sprintf("%-14s %10s %9s", "collective", "size(B)", "kcoll")
	for (j = 1; j <= npeer; j++)
		line = line sprintf(" %9s", peer[j])
	print line sprintf(" %9s %6s  %s", "best", "lead", "kcoll per round")
	ncoll = split("allreduce allgather reduce_scatter broadcast alltoall", colls, " ")
	for (c = 1; c <= ncoll; c++) {
		co = colls[c]
		for (kind = 1; kind <= 2; kind++) {
			s = ""
			if (kind == 2)
				s = 16777216
			else	# the smallest size that kcoll and every peer ran
				for (j = 1; j <= nsz[co] && s == ""; j++) {
					s = sz[co, j]
					for (k = 0; k <= npeer; k++)
						if (med(k ? peer[k] : "kcoll", co, s, kind, nrd) == "")
							s = ""
				}
			if (s == "" || med("kcoll", co, s, kind, nrd) == "")
				continue
			v = med("kcoll", co, s, kind, nrd)
			line = sprintf("%-14s %10d %9s", co, s, v)
			best = ""
			for (j = 1; j <= npeer; j++) {
				p = med(peer[j], co, s, kind, nrd)
				line = line sprintf(" %9s", p == "" ? "-" : p)
				if (p != "" && (best == "" || (kind == 1 ? p + 0 < best + 0 : p + 0 > best + 0))) {
					best = p
					bname = peer[j]
				}
			}
			line = line sprintf(" %9s %6s ", best == "" ? "-" : bname,
					    kind == 1 ? ratio(best, v) : ratio(v, best))
			for (r = 1; r <= nrd; r++)
				line = line " " (kind == 1 ? tm["kcoll#" r, co, s] : bw["kcoll#" r, co, s])
			print line
		}
	}
}
# The median over rounds 1..NRD of one system at one size (KIND 1: time,
# 2: busbw), formatted; "" if no round has it.
function med(sy, co, s, kind, nrd,    r, n, a, i, j, t, m) {
	n = 0
	for (r = 1; r <= nrd; r++) {
		t = kind == 1 ? tm[sy "#" r, co, s] : bw[sy "#" r, co, s]
		if (t != "")
			a[++n] = t + 0
	}
	if (n == 0)
		return ""
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	m = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	return sprintf(kind == 1 ? "%.1f" : "%.3f", m)
}
function ratio(a, b) {
	if (a == "" || b == "" || a + 0 <= 0 || b + 0 <= 0)
		return "-"
	return sprintf("%.2f", a / b)
}
function parse(sys, file,    line, f, n, co, mbs, first) {
	co = ""
	while ((getline line < file) > 0) {
		n = split(line, f, " ")
		if (f[1] == "#" && n >= 2) {
			name = f[2]
			sub(/:$/, "", name)
			if (name == "bcast")
				name = "broadcast"
			if (name ~ /^(allreduce|allgather|reduce_scatter|broadcast|alltoall|reduce|sendrecv)$/) {
				co = name
				# "# coll: sizes >= 1 MiB: A CPU s (ranks), B CPU s (nodes) ..."
				if (line ~ /sizes >= 1 MiB: .* \(ranks\), .* \(nodes\)/) {
					cr[sys, co] = f[7]
					cn[sys, co] = f[11]
				}
			}
			continue
		}
		if (co == "" || f[1] !~ /^[0-9]+$/ || n < 8)
			continue
		# kcoll-perf -M: MB/s; the MPI and Gloo tables: GB/s
		mbs = sys ~ /^kcoll(#|$)/ ? f[8] + 0 : f[8] * 1000
		if (!((co, f[1]) in seen)) {
			seen[co, f[1]] = 1
			sz[co, ++nsz[co]] = f[1]
		}
		bw[sys, co, f[1]] = mbs
		tm[sys, co, f[1]] = f[6]
	}
	close(file)
}'
