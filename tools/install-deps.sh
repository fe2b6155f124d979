#!/bin/sh
# Install every Debian 12 package kcoll needs to build and to run its VM tests.
# Idempotent: packages already present are left alone; safe to run repeatedly.
set -eu

PKGS="build-essential make gcc pkg-config kmod cpio xz-utils busybox-static
qemu-system-x86 linux-image-amd64 linux-headers-amd64
linux-image-6.12-amd64 linux-headers-6.12-amd64 linux-source-6.1
rdma-core ibverbs-utils perftest libibverbs-dev librdmacm-dev iproute2
libnl-3-dev libnl-genl-3-dev libjson-c-dev dkms
openmpi-bin libopenmpi-dev ucx-utils clang-14 libclang-rt-14-dev libgloo-dev g++
python3-torch libtorch-dev pybind11-dev python3-dev python3-mpi4py
debhelper dh-dkms lintian dpkg-dev strace ethtool"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && { echo "install-deps: all packages present"; exit 0; }

if [ "$(id -u)" != 0 ]; then
	echo "install-deps: missing packages:$missing (run as root)" >&2
	exit 1
fi
echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# The VMs boot with kcoll's own initramfs; skip Debian's initramfs generation,
# which would otherwise take minutes per kernel.
INITRD=No apt-get install -y -qq --no-install-recommends $missing
