#!/bin/sh
# Build the tiny initramfs the test VMs boot: busybox plus the drivers needed
# to reach the host's root filesystem over virtio-9p. Everything else (the
# module under test, test binaries, rdma tools) comes from that host root.
# Usage: tests/vm/mkinitrd.sh KVER OUT.cpio.gz [MODBASE]
#   MODBASE: the modules live in MODBASE/lib/modules/KVER instead of
#   /lib/modules/KVER (a kernel built here, e.g. tools/kasan-kernel.sh's).
set -eu
kver=$1 out=$2 base=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
mods="virtio_pci virtio_net 9pnet_virtio 9p"

[ -d "$base/lib/modules/$kver" ] || { echo "mkinitrd: no $base/lib/modules/$kver" >&2; exit 1; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/lib/modules" "$root/proc" "$root/sys" "$root/dev" "$root/mnt"
cp /bin/busybox "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
cp "$here/init" "$root/init"
chmod 755 "$root/init"

# Dependency order from modprobe itself; built-in drivers print "builtin".
: >"$root/lib/modules/order"
for m in $mods; do
	modprobe ${base:+-d "$base"} -S "$kver" --show-depends "$m"
done | awk '$1 == "insmod" { print $2 }' | awk '!seen[$0]++' | while read -r ko; do
	base=$(basename "$ko")
	case $base in
	*.ko.xz) xz -dc "$ko" >"$root/lib/modules/${base%.xz}"; base=${base%.xz} ;;
	*.ko.zst) zstd -qdc "$ko" >"$root/lib/modules/${base%.zst}"; base=${base%.zst} ;;
	*) cp "$ko" "$root/lib/modules/$base" ;;
	esac
	echo "$base" >>"$root/lib/modules/order"
done
(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"
