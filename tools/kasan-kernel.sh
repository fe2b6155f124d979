#!/bin/bash
# Build the KASAN + lockdep + kmemleak guest kernel once, from Debian's
# linux-source-6.1, into build/kasan/ (make kasan; docs/TESTING.md):
#   build/kasan/src/            the built tree: KDIR for kcoll.ko
#   build/kasan/bzImage         what vmrun.sh -K boots
#   build/kasan/mods/lib/modules/<kver>/   its modules (never /lib/modules:
#                               make check would take it for a kernel to test)
#   build/kasan/kver            <kver>, the kernel release
# Config: x86_64 defconfig + tools/kasan.config (merge_config.sh).
# Patches: tools/kasan-patches/*.patch (kernel bugs that would otherwise
# be reported before kcoll's, e.g. in rxe), applied once after extraction.
# With a result matching the fragment already there, it does nothing.
# Usage: tools/kasan-kernel.sh [OUTDIR]      (default build/kasan)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/build/kasan}
frag=$top/tools/kasan.config
tarball=${KSRC_TAR:-/usr/src/linux-source-6.1.tar.xz}
mkdir -p "$out"
out=$(cd "$out" && pwd)
src=$out/src

# What the result was built from: the fragment, this script, the tarball.
patches=$(ls "$top"/tools/kasan-patches/*.patch 2>/dev/null || true)
want=$( { cat "$frag" "$0" $patches; stat -c '%s %Y' "$tarball" 2>/dev/null; } | sha256sum | cut -c1-16)
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$want" ] &&
	[ -f "$out/bzImage" ] && [ -f "$out/kver" ] &&
	[ -d "$out/mods/lib/modules/$(cat "$out/kver")" ]; then
	echo "kasan-kernel: up to date: $out/bzImage ($(cat "$out/kver"))"
	exit 0
fi

# Tools the kernel build needs beyond kcoll's own (flex, bison, libelf for
# objtool, libssl for the certificate tools).
missing=""
command -v flex >/dev/null || missing="$missing flex"
command -v bison >/dev/null || missing="$missing bison"
command -v bc >/dev/null || missing="$missing bc"
[ -f /usr/include/gelf.h ] || missing="$missing libelf-dev"
[ -f /usr/include/openssl/ssl.h ] || missing="$missing libssl-dev"
command -v gcc >/dev/null || missing="$missing build-essential"
command -v cpio >/dev/null || missing="$missing cpio"
command -v xz >/dev/null || missing="$missing xz-utils"
if [ -n "$missing" ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "kasan-kernel: installing:$missing"
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y -qq --no-install-recommends $missing ||
			{ apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing; }
	else
		echo "kasan-kernel: missing packages:$missing (apt-get install as root)" >&2
		exit 1
	fi
fi
if [ ! -r "$tarball" ]; then
	echo "kasan-kernel: no $tarball: install Debian's linux-source-6.1 (tools/install-deps.sh, as root)" >&2
	exit 1
fi

if [ ! -f "$src/Makefile" ]; then
	echo "kasan-kernel: extracting $tarball"
	rm -rf "$out/src.tmp"
	mkdir -p "$out/src.tmp"
	tar -xJf "$tarball" -C "$out/src.tmp" --strip-components=1
	rm -rf "$src"
	mv "$out/src.tmp" "$src"
fi
for p in $patches; do
	grep -qxF "${p##*/}" "$src/.kcoll-patches" 2>/dev/null && continue
	echo "kasan-kernel: applying ${p##*/}"
	patch -s -p1 -d "$src" <"$p" || { echo "kasan-kernel: ${p##*/} does not apply" >&2; exit 1; }
	echo "${p##*/}" >>"$src/.kcoll-patches"
done

jobs=$(nproc)
kmake() { make -C "$src" -j"$jobs" "$@"; }
t0=$(date +%s)
if [ ! -f "$src/.config" ] || [ "$frag" -nt "$src/.config" ]; then
	kmake -s defconfig
	(cd "$src" && scripts/kconfig/merge_config.sh -m .config "$frag") >"$out/merge.log"
	kmake -s olddefconfig
fi
# Every option the fragment asks for must have survived olddefconfig (a
# dependency it lacks would silently drop it).
bad=0
while IFS= read -r l; do
	case $l in
	CONFIG_*=*) grep -qxF "$l" "$src/.config" || { echo "kasan-kernel: .config lacks $l" >&2; bad=1; } ;;
	"# CONFIG_"*" is not set")
		o=${l#\# }; o=${o%% *}
		! grep -q "^$o=" "$src/.config" || { echo "kasan-kernel: .config has $(grep "^$o=" "$src/.config") (fragment: off)" >&2; bad=1; } ;;
	esac
done <"$frag"
[ $bad = 0 ] || { echo "kasan-kernel: the fragment does not apply (see $out/merge.log)" >&2; exit 1; }

echo "kasan-kernel: building $(kmake -s kernelrelease) with $jobs jobs (log: $out/build.log)"
if ! kmake bzImage modules >"$out/build.log" 2>&1; then
	tail -30 "$out/build.log" >&2
	echo "kasan-kernel: the kernel build failed (log: $out/build.log)" >&2
	exit 1
fi
kver=$(kmake -s kernelrelease)
rm -rf "$out/mods"
kmake -s modules_install INSTALL_MOD_PATH="$out/mods" INSTALL_MOD_STRIP=1 >>"$out/build.log" 2>&1
# The guest sees the tree under the same path (the host root over 9p), so
# the build/source links may stay; depmod ran with the right base dir.
cp "$src/arch/x86/boot/bzImage" "$out/bzImage"
echo "$kver" >"$out/kver"
echo "$want" >"$out/stamp"
echo "kasan-kernel: $out/bzImage ($kver) in $(($(date +%s) - t0)) s"
