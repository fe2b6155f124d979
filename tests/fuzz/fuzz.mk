# SPDX-License-Identifier: MIT
#
# Host fuzzers (libFuzzer, clang-14 from Debian's clang-14 and
# libclang-rt-14-dev), included from the top-level Makefile:
#
#   make fuzz-host        every target for FUZZ_SECONDS each (default 300)
#   make fuzz-host-quick  every target for FUZZ_QUICK_SECONDS (default 20);
#                         make check runs this with the unit tests
#   make fuzz-host-build  build them only
#
#   fuzz_sqe    kmod/kcoll_logic.c: SQE validation against an independent
#               reference, ring sizing/layout, index arithmetic, SETUP and
#               ENTER argument checks
#   fuzz_sched  kmod/kcoll_sched.c and kcoll_cost.c: schedules executed on
#               the in-memory model of tests/unit/test_sched.c
#   fuzz_wire   kmod/kcoll_wire.c: control messages and hellos against the
#               protocol's rules restated (tests/oracle/kcoll-wire-ref.h)
#
# Without clang-14 or its libFuzzer runtime the targets say SKIP and why.
# docs/TESTING.md: repeating a crash or a run.

FUZZ_CC		?= clang-14
FUZZ_BUILD	:= $(TOP)/build/fuzz
FUZZ_CFLAGS	:= -g -O1 -fsanitize=fuzzer,address,undefined \
		   -fno-sanitize-recover=all -fno-omit-frame-pointer \
		   -std=gnu11 -Wall -Wextra -Werror \
		   -I$(TOP)/uapi -I$(TOP)/kmod -I$(TOP)/tests/oracle -I$(TOP)/tests/unit
FUZZ_TARGETS	:= $(FUZZ_BUILD)/fuzz_sqe $(FUZZ_BUILD)/fuzz_sched \
		   $(FUZZ_BUILD)/fuzz_wire
# FUZZ_SECONDS is shared with make fuzz (the VM fuzzer, default 600).
FUZZ_HOST_SECONDS = $(if $(filter command line environment,$(origin FUZZ_SECONDS)),$(FUZZ_SECONDS),300)
FUZZ_QUICK_SECONDS ?= 20

.PHONY: fuzz-host fuzz-host-quick fuzz-host-build

$(FUZZ_BUILD)/fuzz_sqe: $(TOP)/tests/fuzz/fuzz_sqe.c $(TOP)/kmod/kcoll_logic.c \
		$(TOP)/kmod/kcoll_logic.h $(TOP)/kmod/kcoll_plain.h \
		$(TOP)/tests/oracle/kcoll-sqe-ref.h $(TOP)/uapi/linux/kcoll.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(TOP)/tests/fuzz/fuzz_sqe.c \
		$(TOP)/kmod/kcoll_logic.c

$(FUZZ_BUILD)/fuzz_sched: $(TOP)/tests/fuzz/fuzz_sched.c \
		$(TOP)/tests/unit/sched_model.c $(TOP)/tests/unit/sched_model.h \
		$(TOP)/tests/unit/unit.h $(TOP)/kmod/kcoll_shape.h \
		$(TOP)/kmod/kcoll_sched.c $(TOP)/kmod/kcoll_sched.h \
		$(TOP)/kmod/kcoll_sched_log.c $(TOP)/kmod/kcoll_sched_vec.c $(TOP)/kmod/kcoll_sched_int.h \
		$(TOP)/kmod/kcoll_cost.c $(TOP)/kmod/kcoll_cost.h \
		$(TOP)/kmod/kcoll_plain.h $(TOP)/uapi/linux/kcoll.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -I$(TOP)/tests/unit -o $@ \
		$(TOP)/tests/fuzz/fuzz_sched.c $(TOP)/tests/unit/sched_model.c \
		$(TOP)/kmod/kcoll_sched.c $(TOP)/kmod/kcoll_sched_log.c $(TOP)/kmod/kcoll_sched_vec.c \
		$(TOP)/kmod/kcoll_cost.c

$(FUZZ_BUILD)/fuzz_wire: $(TOP)/tests/fuzz/fuzz_wire.c $(TOP)/kmod/kcoll_wire.c \
		$(TOP)/kmod/kcoll_wire.h $(TOP)/kmod/kcoll_plain.h \
		$(TOP)/tests/oracle/kcoll-wire-ref.h $(TOP)/uapi/linux/kcoll.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(TOP)/tests/fuzz/fuzz_wire.c \
		$(TOP)/kmod/kcoll_wire.c

# Every target writes its seeds with it.
$(FUZZ_TARGETS): $(TOP)/tests/fuzz/fuzz_seed.h

fuzz-host-build: $(FUZZ_TARGETS)

# Either the results, or one SKIP line saying why (never silently nothing).
define fuzz_host_run
	@if ! command -v $(FUZZ_CC) >/dev/null 2>&1; then \
		echo "ok 1 fuzz-host # SKIP $(FUZZ_CC) not found (tools/install-deps.sh installs clang-14 and libclang-rt-14-dev)"; \
	elif ! $(TOP)/tests/fuzz/run.sh --probe $(FUZZ_CC); then \
		echo "ok 1 fuzz-host # SKIP $(FUZZ_CC) cannot link libFuzzer targets (libclang-rt-14-dev missing?)"; \
	else \
		$(MAKE) -s --no-print-directory fuzz-host-build || \
			{ echo "not ok 1 fuzz-host: the fuzz targets do not build"; exit 1; }; \
		echo "== host fuzzers, $(1) s each (libFuzzer; $(FUZZ_BUILD))"; \
		$(TOP)/tests/fuzz/run.sh $(1) $(FUZZ_BUILD) $(FUZZ_TARGETS); \
	fi
endef

fuzz-host:
	$(call fuzz_host_run,$(FUZZ_HOST_SECONDS))

fuzz-host-quick:
	$(call fuzz_host_run,$(FUZZ_QUICK_SECONDS))
