/* SPDX-License-Identifier: MIT */
/*
 * kcoll_model.c: a model of /dev/kcoll for host tests. Link the program
 * with kcoll_model.c, kmod/kcoll_logic.c, the scalar/SSE2/AVX2/AVX-512
 * reduction objects and -Wl,--wrap=ioctl,--wrap=mmap,--wrap=munmap.
 */
#ifndef KCOLL_MODEL_H
#define KCOLL_MODEL_H

/*
 * Create the fake device file, point KCOLL_DEVICE at it and start the
 * completion worker, which waits up to @max_delay_us (random, from @seed)
 * before each matched operation.
 */
void kcoll_model_start(unsigned int max_delay_us, unsigned int seed);

/* Stop the worker, free every context and communicator, remove the file. */
void kcoll_model_stop(void);

/* ENTER calls of the context behind @fd that consumed SQEs. */
unsigned int kcoll_model_submits(int fd);

/* SQE buffers of the context behind @fd that named a registration. */
unsigned int kcoll_model_mr_sqes(int fd);

/* The last dma-buf REG_MEM (KCOLL_REG_DMABUF) the model accepted, and how
 * many there were: the fd's inode, the offset, length, name and flags. */
struct kcoll_model_dmabuf {
	unsigned long long ino, off, len, addr;
	unsigned int flags, count;
};
extern struct kcoll_model_dmabuf kcoll_model_last_dmabuf;

#endif /* KCOLL_MODEL_H */
