# SPDX-License-Identifier: MIT
#
# Host unit tests (no VM, no /dev/kcoll), included from the top-level
# Makefile. Expects TOP (the repository root) and CC; pulls in
# libcoll/libcoll.mk unless that was included already.
#
#   make unit-test        build and run every unit test
#   make unit-build       build them only
#   make unit-clean
#
# Arguments for the test programs (e.g. a test-name filter) go in
# UNIT_ARGS; UNIT_SEED=<n> in the environment changes the random seeds.

ifndef LIBCOLL_A
include $(TOP)/libcoll/libcoll.mk
endif

UNIT_SRCDIR	:= $(TOP)/tests/unit
UNIT_BUILD	?= $(TOP)/build/unit
UNIT_TIMEOUT	?= 600
UNIT_ARGS	?=

UNIT_SAN	:= -fsanitize=address,undefined -fno-sanitize-recover=all \
		   -fno-omit-frame-pointer
UNIT_CFLAGS	:= -std=gnu11 -Wall -Wextra -Werror -g -O1 $(UNIT_SAN) \
		   -I$(TOP)/uapi -I$(TOP)/kmod -I$(UNIT_SRCDIR)
UNIT_LDFLAGS	:= $(UNIT_SAN)
UNIT_ENV	:= ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		   UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

UNIT_LOGIC	:= $(UNIT_BUILD)/test_logic
UNIT_WIRE	:= $(UNIT_BUILD)/test_wire
UNIT_DMASEG	:= $(UNIT_BUILD)/test_dmaseg
UNIT_SCHED	:= $(UNIT_BUILD)/test_sched
UNIT_ABI	:= $(UNIT_BUILD)/test_libcoll_abi
UNIT_ABI_SO	:= $(UNIT_BUILD)/test_libcoll_abi_so
UNIT_BOOTSTRAP	:= $(UNIT_BUILD)/test_bootstrap
UNIT_COMM	:= $(UNIT_BUILD)/test_libcoll_comm
UNIT_CUDA	:= $(UNIT_BUILD)/test_cuda
UNIT_FAKECUDA	:= $(UNIT_BUILD)/fakecuda/libcuda.so.1
# kcoll-colltest and kcoll-perf linked with the /dev/kcoll model
UNIT_TOOLS_MODEL := $(UNIT_BUILD)/kcoll-colltest-model \
		    $(UNIT_BUILD)/kcoll-perf-model
# kcollctl/kcolld (daemon/): the plain logic, the netlink layer against
# a model of the family, and the two programs linked with that model.
UNIT_DAEMON	:= $(UNIT_BUILD)/test_daemon
UNIT_DAEMON_NL	:= $(UNIT_BUILD)/test_daemon_nl
UNIT_DAEMON_TOOLS := $(UNIT_BUILD)/kcollctl-fake $(UNIT_BUILD)/kcolld-fake
UNIT_BINS	:= $(UNIT_LOGIC) $(UNIT_WIRE) $(UNIT_DMASEG) $(UNIT_SCHED) $(UNIT_ABI) $(UNIT_ABI_SO) \
		   $(UNIT_BOOTSTRAP) $(UNIT_COMM) $(UNIT_CUDA) $(UNIT_DAEMON) \
		   $(UNIT_DAEMON_NL) $(KERNELS_TEST)
# The simulator, optimised and without sanitizers (tests/unit/
# test_collsim.sh runs it at 4096 ranks).
UNIT_COLLSIM	:= $(UNIT_BUILD)/collsim

# Each program is compiled and linked in one step, so the headers are
# listed by hand rather than tracked with -MMD.
UNIT_HDRS	:= $(UNIT_SRCDIR)/unit.h $(TOP)/kmod/kcoll_logic.h \
		   $(TOP)/kmod/kcoll_plain.h $(TOP)/uapi/linux/kcoll.h

.PHONY: unit-build unit-test unit-clean

unit-build: $(UNIT_BINS) $(UNIT_TOOLS_MODEL) $(UNIT_COLLSIM) \
	    $(UNIT_DAEMON_TOOLS)

$(UNIT_BUILD):
	mkdir -p $@

# The module's plain logic, compiled straight from kmod/.
$(UNIT_LOGIC): $(UNIT_SRCDIR)/test_logic.c $(TOP)/kmod/kcoll_logic.c \
	       $(UNIT_HDRS) $(UNIT_SRCDIR)/unit.mk | $(UNIT_BUILD)
	$(CC) $(UNIT_CFLAGS) -o $@ $(UNIT_SRCDIR)/test_logic.c \
		$(TOP)/kmod/kcoll_logic.c $(UNIT_LDFLAGS)

# The wire checks (hellos, control messages), against the protocol's rules
# restated in the test.
$(UNIT_WIRE): $(UNIT_SRCDIR)/test_wire.c $(TOP)/kmod/kcoll_wire.c \
	      $(TOP)/kmod/kcoll_wire.h $(TOP)/tests/oracle/kcoll-wire-ref.h \
	      $(UNIT_HDRS) $(UNIT_SRCDIR)/unit.mk \
	      | $(UNIT_BUILD)
	$(CC) $(UNIT_CFLAGS) -I$(TOP)/tests/oracle -o $@ \
		$(UNIT_SRCDIR)/test_wire.c $(TOP)/kmod/kcoll_wire.c \
		$(UNIT_LDFLAGS)

# The dma-buf segmenter (device memory's scatterlists to MR page lists)
# against a byte-by-byte reference on ragged lists.
$(UNIT_DMASEG): $(UNIT_SRCDIR)/test_dmaseg.c $(TOP)/kmod/kcoll_dmaseg.h \
		$(UNIT_HDRS) $(UNIT_SRCDIR)/unit.mk | $(UNIT_BUILD)
	$(CC) $(UNIT_CFLAGS) -o $@ $(UNIT_SRCDIR)/test_dmaseg.c $(UNIT_LDFLAGS)

# The schedules, executed on an in-memory model of every rank.
# The cost model's choice too.
$(UNIT_SCHED): $(UNIT_SRCDIR)/test_sched.c $(UNIT_SRCDIR)/sched_model.c \
	       $(UNIT_SRCDIR)/sched_model.h $(TOP)/kmod/kcoll_sched.c \
	       $(TOP)/kmod/kcoll_sched.h $(TOP)/kmod/kcoll_sched_int.h \
		 $(TOP)/kmod/kcoll_sched_log.c $(TOP)/kmod/kcoll_sched_vec.c $(TOP)/kmod/kcoll_cost.c \
	       $(TOP)/kmod/kcoll_cost.h $(TOP)/kmod/kcoll_shape.h \
	       $(UNIT_HDRS) $(UNIT_SRCDIR)/unit.mk | $(UNIT_BUILD)
	$(CC) $(UNIT_CFLAGS) -o $@ $(UNIT_SRCDIR)/test_sched.c \
		$(UNIT_SRCDIR)/sched_model.c \
		$(TOP)/kmod/kcoll_sched.c $(TOP)/kmod/kcoll_sched_log.c $(TOP)/kmod/kcoll_sched_vec.c \
		$(TOP)/kmod/kcoll_cost.c \
		$(UNIT_LDFLAGS)

$(UNIT_COLLSIM): $(TOP)/tools/collsim.c $(TOP)/kmod/kcoll_sched.c \
		 $(TOP)/kmod/kcoll_sched.h $(TOP)/kmod/kcoll_sched_int.h \
		 $(TOP)/kmod/kcoll_sched_log.c $(TOP)/kmod/kcoll_sched_vec.c $(TOP)/kmod/kcoll_cost.c \
		 $(TOP)/kmod/kcoll_cost.h $(UNIT_HDRS) $(UNIT_SRCDIR)/unit.mk \
		 | $(UNIT_BUILD)
	$(CC) -std=gnu11 -Wall -Wextra -Werror -O2 -I$(TOP)/uapi -I$(TOP)/kmod \
		-DKCOLL_SCHED_MAX_RANKS=16384 -o $@ $(TOP)/tools/collsim.c \
		$(TOP)/kmod/kcoll_sched.c $(TOP)/kmod/kcoll_sched_log.c $(TOP)/kmod/kcoll_sched_vec.c \
		$(TOP)/kmod/kcoll_cost.c -lm

# libcoll against the static library ...
$(UNIT_ABI): $(UNIT_SRCDIR)/test_libcoll_abi.c $(TOP)/kmod/kcoll_logic.c \
	     $(UNIT_HDRS) $(LIBCOLL_SRCDIR)/include/coll.h $(LIBCOLL_A) \
	     $(UNIT_SRCDIR)/unit.mk | $(UNIT_BUILD)
	$(CC) $(UNIT_CFLAGS) $(LIBCOLL_CPPFLAGS) -pthread -o $@ \
		$(UNIT_SRCDIR)/test_libcoll_abi.c $(TOP)/kmod/kcoll_logic.c \
		$(LIBCOLL_A) $(UNIT_LDFLAGS)

# ... and the same program against the shared one: every public function
# must be exported (COLL_API plus the version script).
$(UNIT_ABI_SO): $(UNIT_SRCDIR)/test_libcoll_abi.c $(TOP)/kmod/kcoll_logic.c \
		$(UNIT_HDRS) $(LIBCOLL_SRCDIR)/include/coll.h $(LIBCOLL_SO) \
		$(LIBCOLL_SO_LINKS) $(UNIT_SRCDIR)/unit.mk | $(UNIT_BUILD)
	$(CC) $(UNIT_CFLAGS) $(LIBCOLL_CPPFLAGS) -pthread -o $@ \
		$(UNIT_SRCDIR)/test_libcoll_abi.c $(TOP)/kmod/kcoll_logic.c \
		-L$(LIBCOLL_BUILD) -lcoll -Wl,-rpath,$(abspath $(LIBCOLL_BUILD)) \
		$(UNIT_LDFLAGS)

# libcoll's TCP bootstrap among threads on 127.0.0.1 (uses libcoll's
# internal header, so it links the static library).
$(UNIT_BOOTSTRAP): $(UNIT_SRCDIR)/test_bootstrap.c $(UNIT_SRCDIR)/unit.h \
		   $(LIBCOLL_SRCDIR)/include/coll.h \
		   $(LIBCOLL_SRCDIR)/coll_internal.h $(LIBCOLL_A) \
		   $(UNIT_SRCDIR)/unit.mk | $(UNIT_BUILD)
	$(CC) $(UNIT_CFLAGS) $(LIBCOLL_CPPFLAGS) -I$(LIBCOLL_SRCDIR) -pthread \
		-o $@ $(UNIT_SRCDIR)/test_bootstrap.c $(LIBCOLL_A) \
		$(UNIT_LDFLAGS) -lpthread

# libcoll's communicators against a model of /dev/kcoll (kcoll_model.c:
# ioctl, mmap and munmap wrapped by the linker), using the module's SQE
# checks and CPU reductions (kmod/reduce.mk's sanitizer objects) and the
# VM test's reference (tests/oracle/kcoll-check.h).
UNIT_MODEL_SRCS	:= $(UNIT_SRCDIR)/kcoll_model.c $(TOP)/kmod/kcoll_logic.c
UNIT_MODEL_DEPS	:= $(UNIT_MODEL_SRCS) $(UNIT_SRCDIR)/kcoll_model.h $(UNIT_HDRS) \
		   $(TOP)/kmod/kcoll_reduce.h $(TOP)/tests/oracle/kcoll-check.h $(TOP)/tests/oracle/kcoll-issue.h $(TOP)/tests/oracle/kcoll-vcheck.h \
		   $(LIBCOLL_SRCDIR)/include/coll.h \
		   $(LIBCOLL_SRCDIR)/coll_internal.h $(LIBCOLL_A) \
		   $(REDUCE_SAN_OBJS) $(UNIT_SRCDIR)/unit.mk
UNIT_MODEL_CFLAGS := $(UNIT_CFLAGS) $(LIBCOLL_CPPFLAGS) -I$(LIBCOLL_SRCDIR) \
		   -I$(TOP)/tests/oracle -pthread
UNIT_MODEL_LIBS	:= $(LIBCOLL_A) $(REDUCE_SAN_OBJS) \
		   -Wl,--wrap=ioctl,--wrap=mmap,--wrap=munmap \
		   $(UNIT_LDFLAGS) -lpthread -lm

$(UNIT_COMM): $(UNIT_SRCDIR)/test_comm.c $(UNIT_MODEL_DEPS) | $(UNIT_BUILD)
	$(CC) $(UNIT_MODEL_CFLAGS) -o $@ $< $(UNIT_MODEL_SRCS) \
		$(UNIT_MODEL_LIBS)

# libcoll's GPU path against a STAND-IN for the CUDA driver (no GPU here):
# the test links it by its soname, libcoll dlopen()s the same library.
# Its "kernel launches" run the host build of kcoll's CUDA kernels.
$(UNIT_FAKECUDA): $(UNIT_SRCDIR)/fake_libcuda.c $(UNIT_SRCDIR)/unit.mk \
		  $(KERNELS_HOST_OBJ) $(TOP)/tools/dmabuf-alloc.h | $(UNIT_BUILD)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -Wall -Wextra -Werror -g -O1 -fPIC -shared -pthread \
		-I$(TOP)/uapi -Wl,-soname,libcuda.so.1 -Wl,-z,defs -o $@ $< \
		$(KERNELS_HOST_OBJ)

$(UNIT_CUDA): $(UNIT_SRCDIR)/test_cuda.c $(UNIT_FAKECUDA) $(UNIT_MODEL_DEPS) | $(UNIT_BUILD)
	$(CC) $(UNIT_MODEL_CFLAGS) -o $@ $< $(UNIT_MODEL_SRCS) \
		$(UNIT_MODEL_LIBS) $(UNIT_FAKECUDA) \
		-Wl,-rpath,$(dir $(UNIT_FAKECUDA))

# The VM test programs themselves, single rank, on the model
# (tests/unit/test_tools_model.sh runs them).
$(UNIT_BUILD)/kcoll-colltest-model: $(TOP)/tests/vm/kcoll-colltest.c \
		$(UNIT_SRCDIR)/kcoll_model_auto.c $(UNIT_MODEL_DEPS) | $(UNIT_BUILD)
	$(CC) $(UNIT_MODEL_CFLAGS) -o $@ $< $(UNIT_SRCDIR)/kcoll_model_auto.c \
		$(UNIT_MODEL_SRCS) $(UNIT_MODEL_LIBS)

$(UNIT_BUILD)/kcoll-perf-model: $(TOP)/tools/kcoll-perf.c \
		$(UNIT_SRCDIR)/kcoll_model_auto.c $(UNIT_MODEL_DEPS) | $(UNIT_BUILD)
	$(CC) $(UNIT_MODEL_CFLAGS) -o $@ $< $(UNIT_SRCDIR)/kcoll_model_auto.c \
		$(UNIT_MODEL_SRCS) $(UNIT_MODEL_LIBS)

# daemon/ with libnl-genl-3 and json-c. kcoll_nl_fake.c answers the
# netlink requests (it replaces sendmsg/recvmsg on netlink sockets).
UNIT_DSRC	:= $(TOP)/daemon
UNIT_DAEMON_PKGS := libnl-genl-3.0 json-c
UNIT_DAEMON_CFLAGS := $(UNIT_CFLAGS) -I$(UNIT_DSRC) -DKC_VERSION='"unit"' \
		   $(shell pkg-config --cflags $(UNIT_DAEMON_PKGS) 2>/dev/null)
UNIT_DAEMON_LIBS := $(shell pkg-config --libs $(UNIT_DAEMON_PKGS) 2>/dev/null) \
		   $(UNIT_LDFLAGS)
UNIT_DAEMON_DEPS := $(wildcard $(UNIT_DSRC)/*.h) \
		   $(TOP)/uapi/linux/kcoll_netlink.h $(TOP)/uapi/linux/kcoll.h \
		   $(UNIT_SRCDIR)/unit.h $(UNIT_SRCDIR)/unit.mk
UNIT_DAEMON_RENDER := $(addprefix $(UNIT_DSRC)/,kc_model.c kc_fmt.c \
		   kc_render.c)
UNIT_DAEMON_NLSRC := $(addprefix $(UNIT_DSRC)/,kc_nlparse.c kc_nl.c) \
		   $(UNIT_SRCDIR)/kcoll_nl_fake.c
UNIT_DAEMON_D	:= $(addprefix $(UNIT_DSRC)/,kc_config.c kc_prom.c kc_http.c)

$(UNIT_DAEMON): $(UNIT_SRCDIR)/test_daemon.c $(UNIT_DAEMON_RENDER) \
		$(UNIT_DAEMON_D) $(UNIT_DAEMON_DEPS) | $(UNIT_BUILD)
	$(CC) $(UNIT_DAEMON_CFLAGS) -o $@ $< $(UNIT_DAEMON_RENDER) \
		$(UNIT_DAEMON_D) $(UNIT_DAEMON_LIBS)

$(UNIT_DAEMON_NL): $(UNIT_SRCDIR)/test_daemon_nl.c $(UNIT_DAEMON_NLSRC) \
		   $(UNIT_DSRC)/kc_model.c $(UNIT_SRCDIR)/kcoll_nl_fake.h \
		   $(UNIT_DAEMON_DEPS) | $(UNIT_BUILD)
	$(CC) $(UNIT_DAEMON_CFLAGS) -o $@ $< $(UNIT_DAEMON_NLSRC) \
		$(UNIT_DSRC)/kc_model.c $(UNIT_DAEMON_LIBS)

$(UNIT_BUILD)/kcollctl-fake: $(UNIT_DSRC)/kcollctl.c $(UNIT_DAEMON_RENDER) \
		$(UNIT_DAEMON_NLSRC) $(UNIT_SRCDIR)/kcoll_nl_fake.h \
		$(UNIT_DAEMON_DEPS) | $(UNIT_BUILD)
	$(CC) $(UNIT_DAEMON_CFLAGS) -o $@ $< $(UNIT_DAEMON_RENDER) \
		$(UNIT_DAEMON_NLSRC) $(UNIT_DAEMON_LIBS)

$(UNIT_BUILD)/kcolld-fake: $(UNIT_DSRC)/kcolld.c $(UNIT_DAEMON_RENDER) \
		$(UNIT_DAEMON_D) $(UNIT_DAEMON_NLSRC) \
		$(UNIT_SRCDIR)/kcoll_nl_fake.h $(UNIT_DAEMON_DEPS) | $(UNIT_BUILD)
	$(CC) $(UNIT_DAEMON_CFLAGS) -o $@ $< $(UNIT_DAEMON_RENDER) \
		$(UNIT_DAEMON_D) $(UNIT_DAEMON_NLSRC) $(UNIT_DAEMON_LIBS)

# test_sched (a minute under the sanitizers, most of the unit tests' time)
# runs as two processes sharing its tests (UNIT_SHARD) beside the others,
# one when UNIT_ARGS picks tests; their output follows the others'.
UNIT_NSHARDS = $(if $(UNIT_ARGS),1,2)

# Every program runs even if an earlier one failed; the target fails if any
# did. The shell tests check the VM test programs on the /dev/kcoll model,
# kcollctl and kcolld on the netlink model, and the VM runner's kernel-log
# gate.
unit-test: $(UNIT_BINS) $(UNIT_TOOLS_MODEL) $(UNIT_COLLSIM) \
	   $(UNIT_DAEMON_TOOLS)
	@rc=0; pids=; for k in $$(seq 0 $$(($(UNIT_NSHARDS) - 1))); do \
		env UNIT_SHARD=$$k/$(UNIT_NSHARDS) $(UNIT_ENV) \
			timeout $(UNIT_TIMEOUT) $(UNIT_SCHED) $(UNIT_ARGS) \
			>$(UNIT_SCHED).shard$$k.log 2>&1 & pids="$$pids $$!"; \
	done; \
	for t in $(filter-out $(UNIT_SCHED),$(UNIT_BINS)); do \
		echo "== $$t"; \
		env $(UNIT_ENV) timeout $(UNIT_TIMEOUT) $$t $(UNIT_ARGS) || rc=1; \
	done; \
	k=0; for p in $$pids; do \
		wait $$p || rc=1; \
		echo "== $(UNIT_SCHED) (UNIT_SHARD=$$k/$(UNIT_NSHARDS))"; \
		cat $(UNIT_SCHED).shard$$k.log; k=$$((k + 1)); \
	done; \
	echo "== tests/unit/test_collsim.sh"; \
	timeout $(UNIT_TIMEOUT) $(UNIT_SRCDIR)/test_collsim.sh $(UNIT_COLLSIM) || rc=1; \
	echo "== tests/unit/test_tools_model.sh"; \
	env $(UNIT_ENV) $(UNIT_SRCDIR)/test_tools_model.sh $(UNIT_BUILD) || rc=1; \
	echo "== tests/unit/test_daemon_cli.sh"; \
	env $(UNIT_ENV) $(UNIT_SRCDIR)/test_daemon_cli.sh $(UNIT_BUILD) || rc=1; \
	echo "== tests/unit/test_klog_scan.sh"; \
	$(UNIT_SRCDIR)/test_klog_scan.sh || rc=1; \
	exit $$rc

unit-clean:
	rm -rf $(UNIT_BUILD)
