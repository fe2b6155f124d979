#!/bin/sh
# Build the test dma-buf exporter (kcoll_testbuf.ko) against one kernel tree,
# W=1, failing on any warning, in OUTDIR (a copy of tests/kmod, so several
# kernels build side by side: build/<kver>/testbuf/kcoll_testbuf.ko).
# Usage: tests/kmod/build.sh KDIR OUTDIR
set -eu
src=$(cd "$(dirname "$0")" && pwd)
kdir=${1:?usage: build.sh KDIR OUTDIR}
out=${2:?usage: build.sh KDIR OUTDIR}
[ -d "$kdir" ] || { echo "testbuf: no kernel tree at $kdir" >&2; exit 1; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
for f in "$src"/*.c "$src"/*.h "$src"/Kbuild; do
	cmp -s "$f" "$out/${f##*/}" || cp -p "$f" "$out/"
done

"$src/../../tools/kbuild-w1.sh" testbuf "$kdir" "$out"
echo "testbuf: $out/kcoll_testbuf.ko ($(basename "$(dirname "$kdir")"))"
