# SPDX-License-Identifier: MIT
#
# libkcoll-mpi, the MPI interposition library (LD_PRELOAD; see
# mpi/kcoll_mpi.c), built with Open MPI's mpicc. Included from the
# top-level Makefile, after MPICC and libcoll.
#
#   make mpi-preload    build/mpi/libkcoll-mpi.so

KCOLL_MPI_SO	:= $(TOP)/build/mpi/libkcoll-mpi.so

.PHONY: mpi-preload

mpi-preload: $(KCOLL_MPI_SO)

$(KCOLL_MPI_SO): $(TOP)/mpi/kcoll_mpi.c $(LIBCOLL_SO_LINKS)
	@command -v $(MPICC) >/dev/null || { echo "$(MPICC) not found: run 'make deps' (as root)" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(MPICC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -fPIC -shared \
		$(LIBCOLL_CPPFLAGS) -o $@ $< -L$(LIBCOLL_BUILD) -lcoll \
		-Wl,-rpath,'$$ORIGIN/../libcoll' -pthread
