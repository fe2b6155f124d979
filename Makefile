# SPDX-License-Identifier: GPL-2.0
# kcoll top-level build. See README.md.
#
#   make              module (newest Debian kernel, or KDIR=...), libcoll, tools,
#                     kcollctl and kcolld
#   make check        host unit tests + VM tests on every installed kernel
#   make demo         install what is missing, build, boot a VM, show kcoll
#   make bench        kcoll beside the link, Open MPI and Gloo in one boot, then
#                     the ring and priority benchmarks (docs/PERFORMANCE.md)
#   make mpibench     Open MPI baseline (needs mpicc); make gloobench: Gloo's
#   make modules-all  the module for every kernel with headers installed
#   make testbuf      the test dma-buf exporter (tests/kmod) for every kernel
#   make dkms-check   dkms add/build/remove against every installed kernel
#   make deb          Debian packages (kcoll-dkms, libcoll0, libcoll-dev,
#                     kcoll-tools) in build/deb, then lintian on them;
#                     make deb-test: install, run, upgrade, purge them here
#   make fuzz         the in-VM fuzzer on every kernel (FUZZ_SECONDS=600)
#   make fuzz-host    libFuzzer over validation and schedules (FUZZ_SECONDS=300)
#   make kasan        a KASAN + lockdep + kmemleak 6.1 kernel, once, and kcoll
#                     for it; make check-kasan: the VM tests in it (slow)
#   make torch        the torch.distributed backend (build/python/kcoll_torch)
#   make mpi-preload  libkcoll-mpi.so: unmodified MPI programs through kcoll
#   make overlap      compute slowdown beside allreduces, kcoll vs its peers
#
# Kbuild reads ./Kbuild (not this file) when the kernel build descends here.

TOP := $(CURDIR)
BUILD := $(TOP)/build
ifeq ($(origin CC),default)
CC := gcc
endif
CFLAGS_USER := -O2 -g -Wall -Wextra -Werror -std=gnu11 -I$(TOP)/uapi

# Kernels: every /lib/modules/<ver> that has headers; newest by version.
KVERS := $(shell for d in /lib/modules/*/build; do [ -d "$$d" ] && \
	basename "$$(dirname "$$d")"; done 2>/dev/null | sort -V)
KVER_NEWEST := $(lastword $(KVERS))
KDIR ?= /lib/modules/$(KVER_NEWEST)/build
# The release a tree builds for: /lib/modules/<ver>/build or
# /usr/src/linux-headers-<ver>.
KVER ?= $(patsubst linux-headers-%,%,$(if $(filter build,$(notdir $(KDIR))),$(notdir $(patsubst %/,%,$(dir $(KDIR)))),$(notdir $(KDIR))))

.PHONY: gpu-check gpucheck-standin kernels-check
.PHONY: all module modules-all libcoll tools tests-bin unit-test check \
	vm-test demo bench p2p-bench deps dkms-check deb deb-test install clean help mpibench gloobench collsim overlap \
	daemon fuzz fuzz-host kasan check-kasan check-faults check-clients testbuf

# The Open MPI baseline builds only where mpicc exists (make deps installs it).
MPICC ?= mpicc
MPIBENCH := $(BUILD)/tools/kcoll-mpibench
HAVE_MPICC := $(shell command -v $(MPICC) 2>/dev/null)
# The Gloo baseline (Debian's libgloo-dev), likewise.
CXX ?= g++
GLOOBENCH := $(BUILD)/tools/kcoll-gloobench
HAVE_GLOO := $(wildcard /usr/include/gloo/rendezvous/file_store.h)
# The torch.distributed backend, likewise (python3-torch, libtorch-dev).
HAVE_TORCH := $(wildcard /usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp)

all: module libcoll tools daemon tests-bin $(if $(HAVE_MPICC),mpibench mpi-preload) \
	$(if $(HAVE_GLOO),gloobench) $(if $(HAVE_TORCH),torch)

help:
	@sed -n '2,24p' Makefile

deps:
	tools/install-deps.sh

# ---------------------------------------------------------------- module
module:
	@[ -n "$(KVER)" ] || { echo "no kernel headers found: run 'make deps' (as root) or set KDIR=" >&2; exit 1; }
	+tools/build-module.sh $(KDIR) $(BUILD)/$(KVER)

modules-all:
	@[ -n "$(KVERS)" ] || { echo "no kernel headers under /lib/modules" >&2; exit 1; }
	+@set -e; for v in $(KVERS); do \
		tools/build-module.sh /lib/modules/$$v/build $(BUILD)/$$v; done

# The test dma-buf exporter that imitates GPU memory, for the dma-buf import
# tests: build/<kver>/testbuf/kcoll_testbuf.ko for every kernel
# (tests/kmod/build.sh; W=1, warnings fail).
testbuf:
	@[ -n "$(KVERS)" ] || { echo "no kernel headers under /lib/modules" >&2; exit 1; }
	+@set -e; for v in $(KVERS); do \
		tests/kmod/build.sh /lib/modules/$$v/build $(BUILD)/$$v/testbuf; done

# A guest kernel with KASAN, lockdep and kmemleak, built once from Debian's
# linux-source-6.1 into build/kasan (tools/kasan-kernel.sh; its modules stay
# out of /lib/modules, so make check never sees it), and kcoll for it.
KASAN_DIR := $(BUILD)/kasan
kasan:
	tools/kasan-kernel.sh $(KASAN_DIR)
	+tools/build-module.sh $(KASAN_DIR)/src $(BUILD)/$$(cat $(KASAN_DIR)/kver)
	+tests/kmod/build.sh $(KASAN_DIR)/src $(BUILD)/$$(cat $(KASAN_DIR)/kver)/testbuf

# The VM tests in that kernel (tests/check-kasan.sh; docs/TESTING.md). Not
# part of make check: too slow.
check-kasan: kasan tests-bin tools
	tests/check-kasan.sh

# What DKMS runs inside its own copy of the tree (see dkms.conf).
dkms-module:
	+tools/build-module.sh $(KDIR)

# ---------------------------------------------------------------- libcoll
include libcoll/libcoll.mk

# ---------------------------------------------------------------- tools
include kmod/reduce.mk
include kernels/kernels.mk
include python/torch.mk
include mpi/mpi.mk

COLLSIM := $(BUILD)/tools/collsim
TOOLS := $(BUILD)/tools/kcoll-ringbench $(BUILD)/tools/kcoll-perf \
	 $(BUILD)/tools/kcoll-gpucheck \
	$(BUILD)/tools/kcoll-priobench $(REDUCE_BENCH) $(COLLSIM)

tools: $(TOOLS)

# Discrete-event simulator running the module's schedules and cost model
# (docs/PERFORMANCE.md, collsim). The schedules accept up to 16384 ranks
# here (the module: KCOLL_MAX_RANKS).
collsim: $(COLLSIM)

$(COLLSIM): tools/collsim.c kmod/kcoll_sched.c kmod/kcoll_sched_log.c kmod/kcoll_sched_vec.c \
	    kmod/kcoll_sched_int.h kmod/kcoll_shape.h kmod/kcoll_sched.h \
	    kmod/kcoll_cost.c kmod/kcoll_cost.h kmod/kcoll_plain.h kmod/kcoll_wire.h \
	    uapi/linux/kcoll.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_USER) -I$(TOP)/kmod -DKCOLL_SCHED_MAX_RANKS=16384 -o $@ \
		tools/collsim.c kmod/kcoll_sched.c kmod/kcoll_sched_log.c kmod/kcoll_sched_vec.c \
		kmod/kcoll_cost.c -lm

$(BUILD)/tools/kcoll-ringbench: tools/kcoll-ringbench.c $(LIBCOLL_A) libcoll/include/coll.h uapi/linux/kcoll.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_USER) -I$(TOP)/libcoll/include -o $@ $< $(LIBCOLL_A)

# What kcoll needs of a GPU (tools/kcoll-gpucheck.c): make gpu-check on a
# machine with one (CUDA driver, no RDMA needed); make check runs the same
# program on the stand-in driver (small sizes, labelled so).
$(BUILD)/tools/kcoll-gpucheck: tools/kcoll-gpucheck.c tools/cuda-min.h $(KERNELS_HOST_OBJ) \
		kernels/kcoll_kernels_host.h uapi/linux/kcoll.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_USER) -o $@ $< $(KERNELS_HOST_OBJ) -lpthread

gpu-check: $(BUILD)/tools/kcoll-gpucheck $(KERNELS_FATBIN)
	@[ -s $(KERNELS_FATBIN) ] || { echo "gpu-check: libcoll's kernels were not built (no nvcc with sm_90)" >&2; exit 1; }
	$(BUILD)/tools/kcoll-gpucheck -f $(KERNELS_FATBIN)


# Collectives through libcoll, nccl-tests style (tests/vm/scenarios/coll.sh).
# Its #wrong column checks results against the tests' oracle.
$(BUILD)/tools/kcoll-perf: tools/kcoll-perf.c tests/oracle/kcoll-check.h tests/oracle/kcoll-vcheck.h tools/bench-util.h tools/dmabuf-alloc.h tools/cuda-min.h tests/oracle/kcoll-stream.h tests/oracle/kcoll-issue.h $(LIBCOLL_A) libcoll/include/coll.h uapi/linux/kcoll.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_USER) -I$(TOP)/libcoll/include -I$(TOP)/tests/oracle -o $@ $< $(LIBCOLL_A) $(LIBCOLL_LIBS) -lm

# An urgent small allreduce alone and behind a large one (coll.sh prio).
$(BUILD)/tools/kcoll-priobench: tools/kcoll-priobench.c $(LIBCOLL_A) libcoll/include/coll.h uapi/linux/kcoll.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_USER) -I$(TOP)/libcoll/include -o $@ $< $(LIBCOLL_A) $(LIBCOLL_LIBS)

# Open MPI's collectives, nccl-tests style (tests/vm/scenarios/mpi-bench.sh).
mpibench: $(MPIBENCH)

$(MPIBENCH): tools/kcoll-mpibench.c tools/bench-util.h
	@command -v $(MPICC) >/dev/null || { echo "$(MPICC) not found: run 'make deps' (as root)" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(MPICC) -O2 -g -Wall -Wextra -Werror -std=gnu11 -o $@ $<

# Gloo's collectives, the same table (tests/vm/scenarios/mpi-bench.sh).
gloobench: $(GLOOBENCH)

$(GLOOBENCH): tools/kcoll-gloobench.cc tools/bench-util.h
	@[ -n "$(HAVE_GLOO)" ] || { echo "no Gloo headers: run 'make deps' (as root)" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(CXX) -std=gnu++17 -O2 -g -Wall -Wextra -Werror -o $@ $< -lgloo -libverbs -pthread

# ---------------------------------------------------------------- daemon
# kcollctl and kcolld: the control plane over generic netlink (daemon/).
include daemon/daemon.mk

# ---------------------------------------------------------------- tests
# The kselftest harness comes from Debian's linux-source-6.1, extracted at
# build time (never committed).
KSFT_TAR ?= $(firstword $(wildcard /usr/src/linux-source-6.1.tar.xz))
KSFT_DIR := $(BUILD)/ksft
$(KSFT_DIR)/kselftest_harness.h:
	@[ -n "$(KSFT_TAR)" ] || { echo "linux-source-6.1 is not installed (make deps)" >&2; exit 1; }
	@mkdir -p $(KSFT_DIR)
	tar -xJf $(KSFT_TAR) -C $(KSFT_DIR) --strip-components=4 \
		linux-source-6.1/tools/testing/selftests/kselftest_harness.h \
		linux-source-6.1/tools/testing/selftests/kselftest.h
	@touch $@

KSFT_SRCS := $(wildcard tests/kselftest/*_test.c)
KSFT_BINS := $(patsubst tests/kselftest/%.c,$(BUILD)/tests/bin/%,$(KSFT_SRCS))

# Multi-rank correctness test of libcoll's collectives (run by
# tests/vm/scenarios/coll.sh, one process per rank).
COLLTEST := $(BUILD)/tests/bin/kcoll-colltest

# A node stopping dead mid-collective (tests/vm/scenarios/nodedie.sh).
NODEDIE := $(BUILD)/tests/bin/kcoll-nodedie

# The in-VM fuzzer of /dev/kcoll (tests/vm/scenarios/fuzz.sh).
VMFUZZ := $(BUILD)/tests/bin/kcoll-fuzz

# Split, revoke, shrink and grow with ranks dying (coll.sh "family").
FAMILY := $(BUILD)/tests/bin/kcoll-family

tests-bin: $(KSFT_BINS) $(COLLTEST) $(NODEDIE) $(VMFUZZ) $(FAMILY)

# It links the module's plain logic as its oracle for SETUP and ENTER.
$(VMFUZZ): tests/vm/kcoll-fuzz.c tests/oracle/kcoll-sqe-ref.h tests/kmod/kcoll_testbuf.h kmod/kcoll_logic.c \
	    kmod/kcoll_logic.h kmod/kcoll_plain.h uapi/linux/kcoll.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_USER) -I$(TOP)/kmod -I$(TOP)/tests/oracle -pthread -o $@ \
		tests/vm/kcoll-fuzz.c kmod/kcoll_logic.c

$(FAMILY): tests/vm/kcoll-family.c tests/vm/kcoll-vmtest.h $(LIBCOLL_A) libcoll/include/coll.h uapi/linux/kcoll.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_USER) -I$(TOP)/libcoll/include -o $@ $< $(LIBCOLL_A) $(LIBCOLL_LIBS)

$(NODEDIE): tests/vm/kcoll-nodedie.c tests/vm/kcoll-vmtest.h $(LIBCOLL_A) libcoll/include/coll.h uapi/linux/kcoll.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_USER) -I$(TOP)/libcoll/include -o $@ $< $(LIBCOLL_A) $(LIBCOLL_LIBS)

$(COLLTEST): tests/vm/kcoll-colltest.c tests/oracle/kcoll-check.h tests/oracle/kcoll-vcheck.h tools/dmabuf-alloc.h tools/cuda-min.h tests/oracle/kcoll-stream.h tests/oracle/kcoll-issue.h $(LIBCOLL_A) libcoll/include/coll.h uapi/linux/kcoll.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_USER) -I$(TOP)/libcoll/include -I$(TOP)/tests/oracle -o $@ $< \
		$(LIBCOLL_A) $(LIBCOLL_LIBS) -lm

$(BUILD)/tests/bin/%: tests/kselftest/%.c tests/kselftest/kcoll_test.h tests/kselftest/kcoll_test_main.h tests/kselftest/kcoll_nobody.h tools/dmabuf-alloc.h tests/kmod/kcoll_testbuf.h uapi/linux/kcoll.h $(KSFT_DIR)/kselftest_harness.h $(LIBCOLL_A)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Werror -I$(TOP)/uapi -I$(KSFT_DIR) -I$(TOP)/libcoll/include \
		-o $@ $< $(LIBCOLL_A) -lpthread

# The hostile-peer selftest speaks the wire protocol itself through
# userspace verbs (rdma-core).
$(BUILD)/tests/bin/kcoll_wire_test: tests/kselftest/kcoll_wire_test.c tests/kselftest/kcoll_test.h tests/kselftest/kcoll_test_main.h libcoll/kcoll_hmac.h kmod/kcoll_wire.h kmod/kcoll_plain.h uapi/linux/kcoll.h $(KSFT_DIR)/kselftest_harness.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Werror -I$(TOP)/uapi -I$(KSFT_DIR) \
		-o $@ $< -lrdmacm -libverbs -lpthread

include tests/unit/unit.mk
include tests/fuzz/fuzz.mk

gpucheck-standin: $(BUILD)/tools/kcoll-gpucheck $(UNIT_FAKECUDA) $(KERNELS_FATBIN)
	@if [ -s $(KERNELS_FATBIN) ]; then \
		env LD_LIBRARY_PATH=$(dir $(UNIT_FAKECUDA)) FAKECUDA_DMABUF= \
		    $(BUILD)/tools/kcoll-gpucheck -f $(KERNELS_FATBIN) -s 4 -n 4099; \
	else echo "ok 1 gpucheck_standin # SKIP no fatbin (no nvcc with sm_90)"; fi

# VM tests: every installed kernel, plus the 2-VM RDMA scenario.
vm-test: modules-all testbuf tests-bin tools daemon
	tests/run-vm-tests.sh $(KVERS)

check:
	tests/check.sh

# Beside make check (CI runs them after it; each kept make check over 30
# minutes), on the first kernel, or on those FAULTS_KVERS / CLIENTS_KVERS
# name: the death scenarios, with those make check leaves out (a node
# stopped during a split and during a grow, 40 process deaths in a row;
# about 6 minutes), and the clients, PyTorch's backend and the MPI
# interposer (about 5 minutes).
FAULTS_KVERS ?= $(firstword $(KVERS))
CLIENTS_KVERS ?= $(firstword $(KVERS))
check-faults: modules-all testbuf all
	tests/run-vm-tests.sh --faults $(FAULTS_KVERS)
check-clients: modules-all testbuf all
	tests/run-vm-tests.sh --clients $(CLIENTS_KVERS)

# The in-VM fuzzer (tests/vm/scenarios/fuzz.sh) for FUZZ_SECONDS on every
# installed kernel; make check runs it for 60 s on the first one.
# FUZZ_SEED=<n> repeats a run's choices (docs/TESTING.md).
FUZZ_VM_SECONDS = $(if $(filter command line environment,$(origin FUZZ_SECONDS)),$(FUZZ_SECONDS),600)
fuzz: modules-all tools tests-bin
	tests/run-vm-tests.sh --fuzz "$(FUZZ_VM_SECONDS)$(if $(FUZZ_SEED), $(FUZZ_SEED))" $(KVERS)

# ---------------------------------------------------------------- demo/bench
demo:
	tools/demo.sh

# Compute slowdown beside 16 MiB allreduces, kcoll against its peers in one
# boot (issue 21; about 15 minutes): build/vmtest-overlap/vm0/summary.txt.
overlap: modules-all tools torch mpi-preload
	tests/vm/vmrun.sh -k $(firstword $(KVERS)) -n 2 -m 1536 -o $(BUILD)/vmtest-overlap \
		-t 2400 tests/vm/scenarios/overlap.sh

bench: modules-all tools mpibench gloobench collsim
	tools/bench.sh

# Small point-to-point messages, kcoll (eager and granted) against Open
# MPI in one boot (issue 21; about 10 minutes):
# build/vmtest-p2p/vm0/p2p-summary.txt.
p2p-bench: modules-all tools mpibench
	tests/vm/vmrun.sh -k $(firstword $(KVERS)) -n 2 -o $(BUILD)/vmtest-p2p \
		-t 1800 tests/vm/scenarios/p2p-bench.sh

# ---------------------------------------------------------------- DKMS
dkms-check:
	tools/dkms-check.sh $(KVERS)

# ---------------------------------------------------------------- packages
# Built from a copy of the working tree (what git tracks, and new files
# it does not ignore), with Debian's tools; lintian must find no error
# (its warnings are either fixed or overridden with a reason in debian/).
deb:
	tools/mkdeb.sh $(BUILD)/deb

# Install, run (2 VMs), upgrade and purge the packages on this machine
# (root; tools/deb-test.sh). Not in make check: it installs packages here.
deb-test:
	tools/deb-test.sh

# libcoll, its headers (coll.h, linux/kcoll.h) and libcoll.pc, kcollctl
# and kcolld with their man pages under PREFIX (default /usr/local); the
# module goes in through DKMS.
install: libcoll-install daemon-install

clean:
	rm -rf $(BUILD)
	rm -f kmod/*.o kmod/*.ko kmod/*.mod kmod/*.mod.c kmod/.*.cmd kmod/modules.order \
		kmod/kcoll_config.h kmod/.kcoll_config.kdir Module.symvers modules.order .*.cmd .build.log
