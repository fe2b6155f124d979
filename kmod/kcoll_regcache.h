/* SPDX-License-Identifier: GPL-2.0 */
/* kcoll registration cache: plain buffers kept registered (kcoll_regcache.c). */
#ifndef KCOLL_REGCACHE_H
#define KCOLL_REGCACHE_H

struct kcoll_buf;
struct kcoll_comm;
struct kcoll_mem;

bool kcoll_cache_on(size_t len);
int kcoll_cache_pin(struct kcoll_comm *comm, u64 addr, size_t len,
		    bool writable, struct kcoll_mem **out);
struct kcoll_mem *kcoll_cache_take(struct kcoll_comm *comm, u64 addr,
				   size_t len, bool writable);
int kcoll_cache_commit(struct kcoll_comm *comm, struct kcoll_mem *mem);
void kcoll_cache_flush(struct kcoll_comm *comm);
void kcoll_cache_fit(struct kcoll_comm *comm);
int kcoll_cache_pin_user(struct kcoll_buf *b, u64 addr, size_t len,
			 bool writable);
void kcoll_cache_mem_free(struct kcoll_mem *mem);

#endif
