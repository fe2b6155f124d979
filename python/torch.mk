# SPDX-License-Identifier: MIT
#
# kcoll_torch, the torch.distributed backend, built against Debian's torch
# (python3-torch, libtorch-dev, pybind11-dev) with a plain g++ line: no
# setuptools, no network. Included from the top-level Makefile.
#
#   make torch        build/python/kcoll_torch/ (PYTHONPATH=build/python)
#
# TORCH_PYTHON is the interpreter torch is installed for (Debian's, not a
# python3 earlier on PATH). Without torch the target says so and fails.

TORCH_PYTHON	?= /usr/bin/python3
TORCH_BUILD	:= $(TOP)/build/python/kcoll_torch
TORCH_PYINC	:= $(shell $(TORCH_PYTHON)-config --includes 2>/dev/null)
TORCH_EXT	:= $(shell $(TORCH_PYTHON)-config --extension-suffix 2>/dev/null)
TORCH_SO	:= $(TORCH_BUILD)/_C$(TORCH_EXT)
TORCH_PY	:= $(TORCH_BUILD)/__init__.py
TORCH_SRC	:= $(TOP)/python/kcoll_torch/ProcessGroupKcoll.cpp
# Debian installs the headers under /usr/include (torch/, ATen/, c10/)
# and the C++ API's under torch/csrc/api/include.
TORCH_CXXFLAGS	:= -std=c++17 -O2 -g -fPIC -Wall -Wextra -Werror \
		   -Wno-unused-parameter -Wno-missing-field-initializers \
		   -D_GLIBCXX_USE_CXX11_ABI=1 -DTORCH_EXTENSION_NAME=_C \
		   -DTORCH_API_INCLUDE_EXTENSION_H \
		   -I/usr/include/torch/csrc/api/include $(TORCH_PYINC) \
		   $(LIBCOLL_CPPFLAGS) -MMD -MP
# Python's own symbols come from the interpreter that imports the module.
TORCH_LDFLAGS	:= -shared -L$(LIBCOLL_BUILD) -lcoll \
		   -Wl,-rpath,'$$ORIGIN/../../libcoll' \
		   -ltorch_python -ltorch -ltorch_cpu -lc10 -pthread

.PHONY: torch torch-clean

torch: $(TORCH_SO) $(TORCH_PY)

$(TORCH_SO): $(TORCH_SRC) $(LIBCOLL_SO_LINKS) | $(TORCH_BUILD)
	@test -f /usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp || \
		{ echo "torch: no torch headers (apt install python3-torch libtorch-dev pybind11-dev, or tools/install-deps.sh)" >&2; exit 1; }
	$(CXX) $(TORCH_CXXFLAGS) -o $@ $< $(TORCH_LDFLAGS)

$(TORCH_PY): $(TOP)/python/kcoll_torch/__init__.py | $(TORCH_BUILD)
	cp $< $@

$(TORCH_BUILD):
	mkdir -p $@

torch-clean:
	rm -rf $(TOP)/build/python

-include $(wildcard $(TORCH_BUILD)/*.d)
