/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The names of kcoll's CUDA reduction kernels (kcoll_kernels.def), for C:
 * libcoll looks them up in its embedded fatbin, the build check compares
 * them with what ptxas compiled, the host tests walk them.
 *
 * KCOLL_KERNEL_TABLE(ENTRY) expands ENTRY(name, dtype, redop) once per
 * kernel; a scale kernel (AVG's finish) has redop KCOLL_REDOP_AVG, a
 * reduce kernel the op it computes (AVG's steps use the SUM kernels).
 */
#ifndef KCOLL_KERNELS_H
#define KCOLL_KERNELS_H

#define KCOLL_KRED(dn, op, DT, RO, F)	KCOLL_KENTRY("kcoll_reduce_" #dn "_" #op, DT, RO)
#define KCOLL_KSCALE(dn, DT, F)		KCOLL_KENTRY("kcoll_scale_" #dn, DT, KCOLL_REDOP_AVG)
#include "kcoll_kernels.def"

/* Kernel launch shape: threads per block (the kernels' launch bound). */
#define KCOLL_KERNEL_BLOCK	256

#endif /* KCOLL_KERNELS_H */
