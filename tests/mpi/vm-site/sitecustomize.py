# SPDX-License-Identifier: MIT
# Loaded by Python at start-up in the test VMs only (PYTHONPATH, set by
# tests/vm/scenarios/mpi-preload.sh for both runs alike): the program itself
# stays unmodified. The VMs' CPU model lacks cmpxchg16b (tests/vm/vmrun.sh
# removes cx16 for a guest-kernel reason), and Debian's Open MPI takes its
# 128-bit atomics as soon as a thread level above MPI_THREAD_SINGLE is asked
# for: mpi4py's default (MPI_THREAD_MULTIPLE) dies with SIGILL in
# MPI_Init_thread. Real hosts have cx16; nothing here is needed there.
try:
    import mpi4py

    mpi4py.rc.thread_level = "single"
except ImportError:
    pass
