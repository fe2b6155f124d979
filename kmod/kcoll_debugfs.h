/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcoll_debugfs.c: /sys/kernel/debug/kcoll/.
 */
#ifndef KCOLL_DEBUGFS_H
#define KCOLL_DEBUGFS_H


void kcoll_debugfs_init(void);
void kcoll_debugfs_exit(void);

#endif /* KCOLL_DEBUGFS_H */
