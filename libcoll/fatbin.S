/* SPDX-License-Identifier: MIT */
/*
 * kcoll's CUDA reduction kernels (kernels/, built by nvcc) embedded in
 * libcoll: the fatbin goes into a section of its own, which cuda.c hands to
 * cuModuleLoadData() and kernels/check-fatbin.sh compares with the built
 * file. Empty when libcoll was built without nvcc.
 */
	.section .kcoll_fatbin, "a"
	.balign 64
	.globl	coll_kernels_fatbin
	.hidden	coll_kernels_fatbin
coll_kernels_fatbin:
	.incbin	KCOLL_FATBIN
	.globl	coll_kernels_fatbin_end
	.hidden	coll_kernels_fatbin_end
coll_kernels_fatbin_end:
	.section .note.GNU-stack, "", @progbits
