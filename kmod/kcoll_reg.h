/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_reg.c: registrations (REG_MEM / DEREG_MEM) and their uses.
 */
#ifndef KCOLL_REG_H
#define KCOLL_REG_H

#include "kcoll_types.h"

void kcoll_mem_put(struct kcoll_mem *mem);
void kcoll_mem_put_locked(struct kcoll_mem *mem);
int kcoll_mem_recheck(struct kcoll_mem *mem, unsigned int gup_flags);
struct mmu_notifier_range;
bool kcoll_mmu_moves_pages(const struct mmu_notifier_range *range);
int kcoll_reg_mem_ioctl(struct kcoll_ctx *ctx, void __user *uarg);
int kcoll_dereg_mem_ioctl(struct kcoll_ctx *ctx, void __user *uarg);
struct kcoll_mem *kcoll_mem_get(struct kcoll_ctx *ctx, struct kcoll_comm *comm,
				u32 handle, u64 addr, u64 len, int *err);

#endif /* KCOLL_REG_H */
