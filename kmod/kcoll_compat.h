/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shims over kernel API differences between the supported kernels, chosen by
 * the feature probes of tools/conftest.sh (kcoll_config.h), never by version.
 */
#ifndef KCOLL_COMPAT_H
#define KCOLL_COMPAT_H

#include <linux/eventfd.h>
#include <linux/mm.h>
#include "kcoll_config.h"

static inline void kcoll_eventfd_signal(struct eventfd_ctx *ctx)
{
#ifdef HAVE_EVENTFD_SIGNAL_1ARG
	eventfd_signal(ctx);
#else
	eventfd_signal(ctx, 1);
#endif
}

static inline void kcoll_vm_flags_set(struct vm_area_struct *vma,
				      unsigned long flags)
{
#ifdef HAVE_VM_FLAGS_SET
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

#endif /* KCOLL_COMPAT_H */
