#!/bin/bash
# SPDX-License-Identifier: MIT
#
# One short session on a machine with a GPU but without kcoll's module
# (a lent accelerator, a CI runner with a GPU): what can be learnt there in
# a few minutes, prepared here so the GPU's time goes to running it.
#
#   tools/gpu-session.sh prepare     here: build kcoll-gpucheck and the
#                                    fatbin into build/gpu-session
#   tools/gpu-session.sh run [OUT]   there, from the repository's root with
#                                    build/gpu-session copied along: the
#                                    results go to OUT (default
#                                    build/gpu-session/out)
#
# run: the GPU's facts; kcoll-gpucheck with the prepared binaries (the
# kernels bit for bit, no write outside a range, bandwidth, the stream
# protocol, dma-buf export of libcoll's ranges); the same under
# compute-sanitizer's memcheck at small sizes; ncu's speed-of-light view
# of one reduction kernel; make gpu-check with the nvcc found there.
# Each step has its own time limit, so the whole stays under 8 minutes.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
B=$here/build/gpu-session

case "${1:-}" in
prepare)
	make -C "$here" -s build/tools/kcoll-gpucheck build/kernels/kcoll_kernels.fatbin ||
		exit 1
	[ -s "$here/build/kernels/kcoll_kernels.fatbin" ] ||
		{ echo "no fatbin: nvcc with sm_90 is needed here" >&2; exit 1; }
	mkdir -p "$B"
	cp "$here/build/tools/kcoll-gpucheck" "$here/build/kernels/kcoll_kernels.fatbin" "$B/"
	echo "prepared $B: copy it along and run 'tools/gpu-session.sh run' there"
	;;
run)
	out=${2:-$B/out}
	mkdir -p "$out"
	exec > >(tee "$out/all.txt") 2>&1
	t0=$(date +%s)
	step() { echo "## +$(( $(date +%s) - t0 ))s $*"; }
	brief() { grep -v '^#     \|^#   ' "$1" | tail -"$2"; }
	step facts
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
	uname -r
	command -v nvcc >/dev/null && nvcc --version | tail -1
	head -1 /proc/driver/nvidia/version 2>/dev/null
	step "kcoll-gpucheck (prepared binary and fatbin)"
	timeout 120 "$B/kcoll-gpucheck" -f "$B/kcoll_kernels.fatbin" >"$out/gpucheck.txt" 2>&1
	echo "rc $?"
	brief "$out/gpucheck.txt" 40
	step "compute-sanitizer memcheck, small sizes"
	timeout 150 compute-sanitizer --tool memcheck --leak-check no \
		"$B/kcoll-gpucheck" -f "$B/kcoll_kernels.fatbin" -s 4 -n 4099 \
		>"$out/memcheck.txt" 2>&1
	echo "rc $?"
	brief "$out/memcheck.txt" 25
	step "ncu, one reduction kernel at 256 MiB"
	timeout 90 ncu --clock-control none -k regex:kcoll_reduce_fp32_sum -s 5 -c 1 \
		--section SpeedOfLight --section MemoryWorkloadAnalysis \
		"$B/kcoll-gpucheck" -f "$B/kcoll_kernels.fatbin" -s 256 -n 1000 \
		>"$out/ncu.txt" 2>&1
	echo "rc $?"
	grep -v '^ok\|^not ok\|^#' "$out/ncu.txt" | tail -45
	step "make gpu-check with the nvcc there"
	timeout 120 make -C "$here" -s gpu-check BUILD=/tmp/kcoll-gpu-build \
		>"$out/makegpucheck.txt" 2>&1
	echo "rc $?"
	brief "$out/makegpucheck.txt" 25
	step done
	;;
*)
	echo "usage: $0 prepare | run [OUT]" >&2
	exit 2
	;;
esac
