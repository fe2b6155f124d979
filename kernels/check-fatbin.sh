#!/bin/bash
# SPDX-License-Identifier: MIT
# The CUDA kernels as built (make kernels-check): TAP lines, one per check.
#   check-fatbin.sh FATBIN PTXAS_LOG PTX LIBCOLL_SO
#  - ptxas compiled exactly the kernels kcoll_kernels.def lists, for sm_80
#    and for sm_90 (no more, no fewer);
#  - no kernel spills registers (0 bytes spill stores and loads) or uses a
#    stack frame;
#  - the PTX (compute_90, embedded for later GPUs) has every entry, and every
#    kernel's body moves 16 bytes per access (ld.global.v4 / .v2 of 64-bit);
#  - the fatbin has the fatbin magic; libcoll.so embeds it byte for byte
#    and needs no CUDA library at load time.
set -u
here=$(cd "$(dirname "$0")" && pwd)
fatbin=$1 log=$2 ptx=$3 so=$4
n=0 failed=0

ok() {	# rc description
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n $2"
	else
		echo "not ok $n $2"
		failed=1
	fi
}

# The expected names, from the X-macro list.
# The expected names, from the X-macro list (cpp leaves the pieces of
# each name as separate string literals: join them).
want=$(printf '#include "kcoll_kernels.h"\n#define KCOLL_KENTRY(n, d, r) n;\nKCOLL_KERNELS\n' |
	cpp -P -I"$here" - | tr ';' '\n' | tr -d '" \t' | sed '/^$/d' | sort)
nwant=$(echo "$want" | wc -l)
[ "$nwant" -ge 44 ]
ok $? "kernels_list: kcoll_kernels.def names $nwant kernels"

for sm in sm_80 sm_90; do
	got=$(sed -n "s/^ptxas info *: Compiling entry function '\(.*\)' for '$sm'$/\1/p" "$log" | sort)
	diff <(echo "$want") <(echo "$got") >/dev/null
	ok $? "kernels_$sm: ptxas compiled all $nwant kernels for $sm and no others"
done

# "Function properties for X" is followed by "N bytes stack frame, N bytes
# spill stores, N bytes spill loads".
bad=$(awk '/Function properties for/ { f = $NF; next }
	/bytes stack frame/ && f != "" {
		if ($1 != 0 || $5 != 0 || $9 != 0) print f ": " $0; f = "" }' "$log")
nprops=$(grep -c 'bytes spill stores' "$log")
[ -z "$bad" ] && [ "$nprops" -ge $((2 * nwant)) ]
ok $? "kernels_no_spills: $nprops kernel builds, none spills registers or uses a stack frame"
[ -z "$bad" ] || echo "$bad" | sed 's/^/# /'

# PTX: every entry, and each one's 16-byte accesses.
missing=$(for k in $want; do
	awk -v k="$k" '$0 ~ "^.visible .entry " k "\\(" { p = 1 }
		p && /ld\.global\.v(4|2\.(f64|u64|b64|s64))/ { v = 1 }
		p && /^}/ { exit }
		END { if (!v) print k }' "$ptx"
done)
[ -z "$missing" ]
ok $? "kernels_ptx_vector: every kernel in the compute_90 PTX loads 16 bytes at a time${missing:+ (not: $(echo $missing))}"

magic=$(od -An -tx4 -N4 "$fatbin" | tr -d ' ')
[ "$magic" = ba55ed50 ]
ok $? "kernels_fatbin_magic: $(stat -c %s "$fatbin") bytes, magic 0x$magic"

# libcoll embeds it: the section kcoll adds holds exactly these bytes.
tmp=$(mktemp)
objcopy -O binary --only-section=.kcoll_fatbin "$so" "$tmp" 2>/dev/null
cmp -s "$tmp" "$fatbin"
ok $? "kernels_embedded: libcoll.so's .kcoll_fatbin section is the fatbin"
rm -f "$tmp"

needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')
! echo "$needed" | grep -qi cud
ok $? "kernels_no_cuda_link: libcoll.so needs only: $needed"
exit $failed
