#!/bin/sh
# Build kcoll.ko against one kernel tree, W=1, failing on any warning.
# Usage: tools/build-module.sh KDIR [OUTDIR]
#   OUTDIR omitted: build in place (kmod/kcoll.ko; this is what DKMS runs).
#   OUTDIR given:   mirror the module sources there first, so several kernels
#                   can be built side by side (build/<kver>/kmod/kcoll.ko).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
kdir=$1
out=${2:-$top}
[ -d "$kdir" ] || { echo "build-module: no kernel tree at $kdir" >&2; exit 1; }

if [ "$out" != "$top" ]; then
	mkdir -p "$out/kmod" "$out/uapi/linux"
	cp -p "$top/Kbuild" "$out/"
	for f in "$top"/kmod/*.c "$top"/kmod/*.h "$top"/kmod/Kbuild; do
		case $f in */kcoll_config.h) continue ;; esac
		cmp -s "$f" "$out/kmod/${f##*/}" || cp -p "$f" "$out/kmod/"
	done
	for f in "$top"/uapi/linux/*.h; do
		cmp -s "$f" "$out/uapi/linux/${f##*/}" || cp -p "$f" "$out/uapi/linux/"
	done
fi

# Probe once per kernel tree (the stamp remembers which tree it was).
cfg=$out/kmod/kcoll_config.h
stamp=$out/kmod/.kcoll_config.kdir
if [ ! -f "$cfg" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$kdir" ] ||
	[ "$top/tools/conftest.sh" -nt "$cfg" ]; then
	"$top/tools/conftest.sh" "$kdir" "$cfg"
	echo "$kdir" >"$stamp"
fi

"$top/tools/kbuild-w1.sh" build-module "$kdir" "$out"
echo "build-module: $out/kmod/kcoll.ko ($(basename "$(dirname "$kdir")")$( [ "${kdir##*/}" = build ] || echo " ${kdir##*/}"))"
