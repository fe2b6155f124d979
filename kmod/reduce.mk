# SPDX-License-Identifier: MIT
#
# CPU reductions (kmod/kcoll_reduce*.c) built for userspace: the host unit
# test and the throughput benchmark. Included from the top-level Makefile,
# which defines TOP, CC and BUILD (and includes tests/unit/unit.mk).
#
#   make reduce-test    build and run build/unit/test_reduce
#   make reducebench    build and run build/tools/kcoll-reducebench
#                       (arguments in REDUCEBENCH_ARGS, e.g. -s 1M)

REDUCE_DIR	:= $(TOP)/kmod
REDUCE_BUILD	:= $(BUILD)/reduce
REDUCE_SRCS	:= $(REDUCE_DIR)/kcoll_reduce_scalar.c \
		   $(REDUCE_DIR)/kcoll_reduce_sse2.c \
		   $(REDUCE_DIR)/kcoll_reduce_avx2.c \
		   $(REDUCE_DIR)/kcoll_reduce_avx512.c
REDUCE_HDRS	:= $(REDUCE_DIR)/kcoll_reduce.h $(REDUCE_DIR)/kcoll_reduce_body.h \
		   $(REDUCE_DIR)/kcoll_plain.h $(REDUCE_DIR)/kcoll_redop.h $(TOP)/uapi/linux/kcoll.h
REDUCE_CFLAGS	:= -std=gnu11 -O2 -g -Wall -Wextra -Werror \
		   -I$(TOP)/uapi -I$(TOP)/kmod
# Per-implementation ISA flags (no target pragmas in the sources).
REDUCE_ISA_scalar :=
REDUCE_ISA_sse2	:=
REDUCE_ISA_avx2	:= -mavx2 -mf16c
REDUCE_ISA_avx512 := -mavx512f -mavx512bw -mavx512vl -mf16c
REDUCE_SAN	:= -fsanitize=address,undefined -fno-sanitize-recover=all \
		   -fno-omit-frame-pointer

REDUCE_OBJS	:= $(patsubst $(REDUCE_DIR)/kcoll_reduce_%.c,$(REDUCE_BUILD)/%.o,$(REDUCE_SRCS))
REDUCE_SAN_OBJS	:= $(patsubst $(REDUCE_DIR)/kcoll_reduce_%.c,$(REDUCE_BUILD)/san/%.o,$(REDUCE_SRCS))

REDUCE_TEST	:= $(BUILD)/unit/test_reduce
REDUCE_BENCH	:= $(BUILD)/tools/kcoll-reducebench
REDUCEBENCH_ARGS ?=

.PHONY: reduce-build reduce-test reducebench

reduce-build: $(REDUCE_TEST) $(REDUCE_BENCH)

$(REDUCE_BUILD)/%.o: $(REDUCE_DIR)/kcoll_reduce_%.c $(REDUCE_HDRS) $(REDUCE_DIR)/reduce.mk
	@mkdir -p $(dir $@)
	$(CC) $(REDUCE_CFLAGS) $(REDUCE_ISA_$*) -c -o $@ $<

# The same objects instrumented, for the unit test.
$(REDUCE_BUILD)/san/%.o: $(REDUCE_DIR)/kcoll_reduce_%.c $(REDUCE_HDRS) $(REDUCE_DIR)/reduce.mk
	@mkdir -p $(dir $@)
	$(CC) $(REDUCE_CFLAGS) $(REDUCE_ISA_$*) $(REDUCE_SAN) -c -o $@ $<

$(REDUCE_TEST): $(TOP)/tests/unit/test_reduce.c $(TOP)/tests/unit/unit.h \
		$(REDUCE_SAN_OBJS) $(REDUCE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(REDUCE_CFLAGS) $(REDUCE_SAN) -I$(TOP)/tests/unit -o $@ \
		$< $(REDUCE_SAN_OBJS) -lm

$(REDUCE_BENCH): $(TOP)/tools/kcoll-reducebench.c $(REDUCE_OBJS) $(REDUCE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(REDUCE_CFLAGS) -o $@ $< $(REDUCE_OBJS)

reduce-test: $(REDUCE_TEST)
	env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 $(REDUCE_TEST)

reducebench: $(REDUCE_BENCH)
	$(REDUCE_BENCH) $(REDUCEBENCH_ARGS)
