#!/bin/sh
# One out-of-tree kbuild, W=1, that fails on any compiler, kernel-doc or
# modpost warning (what every module of the project must pass).
# Usage: tools/kbuild-w1.sh NAME KDIR OUTDIR  (NAME prefixes the messages)
set -eu
name=$1 kdir=$2 out=$3
log=$out/.build.log
set +e
make -C "$kdir" M="$out" W=1 modules >"$log" 2>&1
rc=$?
set -e
grep -v '^make\[' "$log" | grep -v 'Entering directory\|Leaving directory' || true
if [ $rc -ne 0 ]; then
	echo "$name: kbuild failed against $kdir" >&2
	exit $rc
fi
# Not make's own notes. KCOLL_WERROR=0 (the packaged DKMS tree: another
# compiler may warn where ours did not) reports them and goes on.
if grep -E 'warning:|WARNING:' "$log" | grep -qvE '^make(\[[0-9]+\])?: '; then
	echo "$name: warnings against $kdir (W=1 must be clean)" >&2
	[ "${KCOLL_WERROR:-1}" = 0 ] || exit 1
fi
