# SPDX-License-Identifier: MIT
#
# kernels/: kcoll's CUDA reduction kernels. Included from the top-level
# Makefile (after kmod/reduce.mk), which defines TOP, BUILD, CC and CXX.
#
# nvcc is optional: where it is found (PATH, or /usr/local/cuda/bin; or
# NVCC=/path/to/nvcc) and knows sm_90, the kernels are compiled into one
# fatbin (sm_80 and sm_90 code plus compute_90 PTX for later GPUs) that
# libcoll embeds; without it libcoll is built with an empty fatbin and
# refuses stream-ordered GPU reductions with a message saying why.
# Nothing links CUDA: libcoll loads libcuda.so.1 at run time.
#
#   KERNELS_FATBIN      build/kernels/kcoll_kernels.fatbin (or an empty file)
#   KERNELS_HOST_OBJ    the same kernels built for the host by g++ (tests,
#                       the stand-in CUDA driver), and its ASan/UBSan twin
#   make kernels-check  ptxas compiled every kernel for sm_80 and sm_90 with
#                       no register spill, PTX uses 16-byte accesses, the
#                       fatbin is well formed (kernels/check-fatbin.sh)

KERNELS_DIR	:= $(TOP)/kernels
KERNELS_BUILD	:= $(BUILD)/kernels
NVCC		?= $(firstword $(shell command -v nvcc 2>/dev/null) \
			       $(wildcard /usr/local/cuda/bin/nvcc))
# sm_90 needs CUDA 11.8 or later.
HAVE_NVCC	:= $(if $(NVCC),$(shell $(NVCC) --list-gpu-code 2>/dev/null | grep -qx sm_90 && echo y))
KERNELS_SRCS	:= $(KERNELS_DIR)/kcoll_reduce.cu
KERNELS_HDRS	:= $(KERNELS_DIR)/kcoll_reduce_dev.h $(KERNELS_DIR)/kcoll_kernels.def \
		   $(TOP)/kmod/kcoll_redop.h
# -fmad=false: no FMA contraction; IEEE division, no flush to zero: the
# module's arithmetic (kmod/kcoll_redop.h).
NVCC_FLAGS	:= -O3 -std=c++14 -fmad=false -prec-div=true -prec-sqrt=true \
		   -ftz=false -I$(TOP)/kmod -Xptxas -v -Werror all-warnings
NVCC_GENCODE	:= -gencode arch=compute_80,code=sm_80 \
		   -gencode arch=compute_90,code=sm_90 \
		   -gencode arch=compute_90,code=compute_90
KERNELS_FATBIN	:= $(KERNELS_BUILD)/kcoll_kernels.fatbin
KERNELS_PTXAS_LOG := $(KERNELS_BUILD)/ptxas.log
KERNELS_PTX	:= $(KERNELS_BUILD)/kcoll_kernels.ptx
KERNELS_HOST_OBJ := $(KERNELS_BUILD)/kcoll_kernels_host.o
KERNELS_HOST_SAN_OBJ := $(KERNELS_BUILD)/san/kcoll_kernels_host.o
KERNELS_CXXFLAGS := -std=c++14 -O2 -g -Wall -Wextra -Werror -fPIC \
		   -fno-exceptions -fno-rtti -I$(TOP)/kmod
KERNELS_TEST	:= $(BUILD)/unit/test_kernels

.PHONY: kernels kernels-check

kernels: $(KERNELS_FATBIN) $(KERNELS_HOST_OBJ)

ifeq ($(HAVE_NVCC),y)
# One nvcc run gives the fatbin and ptxas's per-kernel report.
$(KERNELS_FATBIN): $(KERNELS_SRCS) $(KERNELS_HDRS) $(KERNELS_DIR)/kernels.mk
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $(NVCC_GENCODE) -fatbin -o $@.tmp $< \
		>$(KERNELS_PTXAS_LOG).tmp 2>&1 || { cat $(KERNELS_PTXAS_LOG).tmp; exit 1; }
	mv $(KERNELS_PTXAS_LOG).tmp $(KERNELS_PTXAS_LOG)
	mv $@.tmp $@

$(KERNELS_PTX): $(KERNELS_SRCS) $(KERNELS_HDRS) $(KERNELS_DIR)/kernels.mk
	@mkdir -p $(dir $@)
	$(NVCC) $(filter-out -Xptxas -v,$(NVCC_FLAGS)) -arch=compute_90 -ptx -o $@ $<

kernels-check: $(KERNELS_FATBIN) $(KERNELS_PTX) $(LIBCOLL_SO)
	$(KERNELS_DIR)/check-fatbin.sh $(KERNELS_FATBIN) $(KERNELS_PTXAS_LOG) \
		$(KERNELS_PTX) $(LIBCOLL_SO)
else
# No usable nvcc: an empty fatbin (libcoll says so at run time).
$(KERNELS_FATBIN): $(KERNELS_DIR)/kernels.mk
	@mkdir -p $(dir $@)
	: >$@

kernels-check:
	@echo "ok 1 kernels_fatbin # SKIP no nvcc with sm_90 (install the CUDA toolkit, or NVCC=/path/to/nvcc)"
endif

$(KERNELS_HOST_OBJ): $(KERNELS_DIR)/kcoll_kernels_host.cc $(KERNELS_DIR)/kcoll_kernels_host.h \
		     $(KERNELS_HDRS) $(KERNELS_DIR)/kernels.mk
	@mkdir -p $(dir $@)
	$(CXX) $(KERNELS_CXXFLAGS) -c -o $@ $<

$(KERNELS_HOST_SAN_OBJ): $(KERNELS_DIR)/kcoll_kernels_host.cc $(KERNELS_DIR)/kcoll_kernels_host.h \
			 $(KERNELS_HDRS) $(KERNELS_DIR)/kernels.mk
	@mkdir -p $(dir $@)
	$(CXX) $(KERNELS_CXXFLAGS) $(REDUCE_SAN) -c -o $@ $<

# Host build of the kernels against the module's CPU reduction, bit for bit.
$(KERNELS_TEST): $(TOP)/tests/unit/test_kernels.c $(TOP)/tests/unit/unit.h \
		 $(KERNELS_HOST_SAN_OBJ) $(REDUCE_SAN_OBJS) $(REDUCE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(REDUCE_CFLAGS) $(REDUCE_SAN) -I$(TOP)/tests/unit -o $@ \
		$< $(KERNELS_HOST_SAN_OBJ) $(REDUCE_SAN_OBJS) -lm
