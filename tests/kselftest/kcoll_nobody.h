/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The unprivileged user of the kcoll selftests (kcoll_harden_test.c,
 * kcoll_dmabuf_test.c, kcoll_comm_test.c, kcoll_wire_test.c): uid/gid
 * 65534 with an 8 MiB RLIMIT_MEMLOCK (or the caller's own), in a child.
 * Include after defining _GNU_SOURCE.
 */
#ifndef KCOLL_NOBODY_H
#define KCOLL_NOBODY_H

#include <errno.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define KT_MEMLOCK	(8u << 20)

/* uid/gid 65534, no supplementary groups (no capabilities left), limits
 * as they were: 0 or -errno. */
static inline int kt_drop_ids(void)
{
	if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
	    setresuid(65534, 65534, 65534))
		return -errno;
	return getuid() == 65534 && geteuid() == 65534 ? 0 : -EPERM;
}

/* uid/gid 65534 with an 8 MiB memlock limit: 0 or -errno. */
static inline int kt_become_nobody(void)
{
	struct rlimit rl = { KT_MEMLOCK, KT_MEMLOCK };

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return -errno;
	return kt_drop_ids();
}

/* Run @fn in a child (it inherits the caller's descriptors), as nobody
 * if @nobody (else @fn drops what it must itself); its exit code (0:
 * passed; 200 + N: killed by signal N). */
static inline int kt_in_child(int (*fn)(void *), void *arg, int nobody)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return 100;
	if (!pid) {
		if (nobody && kt_become_nobody())
			_exit(101);
		_exit(fn(arg));
	}
	if (waitpid(pid, &st, 0) != pid)
		return 102;
	if (WIFSIGNALED(st))
		return 200 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

/* Run @fn as nobody in a child: kt_in_child(). */
static inline int kt_as_nobody(int (*fn)(void *), void *arg)
{
	return kt_in_child(fn, arg, 1);
}

#endif /* KCOLL_NOBODY_H */
