#!/bin/bash
# Prove the DKMS path: dkms add + dkms build for every kernel given, then
# remove, leaving the system as it was. Needs root and the dkms package.
# Usage: tools/dkms-check.sh KVER...
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$top/dkms.conf")
src=/usr/src/kcoll-$ver
command -v dkms >/dev/null || { echo "dkms-check: dkms is not installed" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "dkms-check: needs root" >&2; exit 1; }

cleanup() {
	dkms remove -m kcoll -v "$ver" --all >/dev/null 2>&1 || true
	rm -rf "$src"
}
cleanup
trap cleanup EXIT
mkdir -p "$src"
# The source DKMS needs: what git tracks (without tests and docs is fine,
# but keeping the tree whole keeps the Makefile's includes valid).
(cd "$top" && git ls-files -z --cached --others --exclude-standard 2>/dev/null | xargs -0 cp --parents -t "$src") ||
	(cd "$top" && cp -r Kbuild Makefile dkms.conf kmod kernels uapi tools libcoll tests "$src/")
dkms add -m kcoll -v "$ver"
rc=0
for k in "$@"; do
	if dkms build -m kcoll -v "$ver" -k "$k" >/tmp/dkms-$k.log 2>&1; then
		ko=$(find /var/lib/dkms/kcoll/"$ver"/"$k" -name 'kcoll.ko*' | head -1)
		echo "ok - dkms build kcoll/$ver -k $k (${ko:-no .ko found})"
		[ -n "$ko" ] || rc=1
	else
		echo "not ok - dkms build kcoll/$ver -k $k"
		sed 's/^/#   /' /tmp/dkms-$k.log | tail -20
		find /var/lib/dkms/kcoll/"$ver"/build -name make.log -exec tail -20 {} \; 2>/dev/null | sed 's/^/#   /'
		rc=1
	fi
done
exit $rc
