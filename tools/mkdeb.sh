#!/bin/bash
# Build kcoll's Debian packages from a copy of the working tree, then run
# lintian on them (make deb). Prints TAP-ish lines for tests/check.sh.
# Usage: tools/mkdeb.sh OUTDIR
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: $0 OUTDIR}
for t in dpkg-buildpackage dh lintian; do
	command -v $t >/dev/null || {
		echo "mkdeb: $t missing: run 'make deps' (as root)" >&2; exit 2; }
done
rm -rf "$out"
mkdir -p "$out/src"
# What git tracks and new files it does not ignore (not build/).
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
	xargs -0 cp --parents -t "$out/src")
cd "$out/src"
if ! dpkg-buildpackage -us -uc -b >"$out/build.log" 2>&1; then
	tail -30 "$out/build.log" >&2
	echo "not ok - make deb: dpkg-buildpackage failed (see $out/build.log)"
	exit 1
fi
cd "$out"
ls ./*.deb | sed 's|^\./|# built |'
changes=$(ls ./*.changes)
# Errors fail; warnings are listed (each is fixed or overridden with a
# reason in debian/*.lintian-overrides).
if lintian --fail-on error --info --display-level ">=warning" "$changes" \
	>"$out/lintian.log" 2>&1; then
	echo "ok - lintian: no error on $(ls ./*.deb | wc -l) packages"
else
	echo "not ok - lintian: errors on the packages (see $out/lintian.log)"
	grep -E '^E: ' "$out/lintian.log" | sed 's/^/#   /'
	exit 1
fi
grep -E '^W: ' "$out/lintian.log" | sed 's/^/# lintian /' || true
