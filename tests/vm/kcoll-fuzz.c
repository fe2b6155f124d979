// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kcoll-fuzz: a multi-threaded fuzzer of /dev/kcoll, run inside a test VM
 * (tests/vm/scenarios/fuzz.sh) for a fixed budget.
 *
 * Several threads pick random actions, biased toward almost-valid input:
 * QUERY/SETUP with mutated arguments and bad pointers, mmap with right and
 * wrong offsets, lengths and flags, munmap/mremap/mprotect/madvise of the
 * rings while other threads submit, ENTER with random counts, flags and
 * (short) timeouts, mutated SQEs (NOP, DELAY, collectives on communicators
 * the fuzzer creates: one rank, bogus multi-rank tables that time out,
 * and, with an RDMA address, two-rank communicators over the local device
 * whose results are checked, some issued in bursts that run side by
 * side), REG_MEM/DEREG_MEM over mapped, unmapped,
 * read-only and vanishing memory, corruption of the shared ring indices,
 * EVENTFD with random descriptors, COMM_ABORT/COMM_REPORT, poll/epoll, and
 * close()/dup2() of descriptors other threads are inside ENTER with;
 * COMM_DESTROY, COMM_ABORT and close (its own, or the peer's) at random
 * moments against a thread submitting collectives that hold a
 * registration while they pin a large unregistered buffer; long-lived
 * two-rank communicators through the NIC that every thread registers on,
 * runs allreduces above the eager size on, deregisters, destroys and
 * aborts, while the RDMA device is deleted and added back.
 *
 * The fuzzing threads run as nobody: uid/gid 65534, no supplementary
 * groups, an 8 MiB RLIMIT_MEMLOCK. Run as root, the fuzzer first forks a
 * helper that keeps root for what needs it: `rdma link delete rxe0` and
 * `rdma link add` every few seconds (sysfs intra_node 0 mostly, so that
 * local ranks use the NIC; the registration cache on, off or tiny),
 * debugfs reads, kernel stacks of stuck threads,
 * and a watch on /dev/kmsg for the reports the scenario's log scan fails
 * on (BUG, WARNING, Oops, slub_debug's "Poison overwritten", ...), each an
 * unexpected result with its time since the start. The VM should boot
 * with slub_debug on the kmalloc caches: a write to a freed object is
 * seen only then. Errors a lost device or a torn-down communicator
 * explain (-ENODEV, -ECONNRESET, -ECANCELED, -ETIMEDOUT, -EIO, -ENOENT,
 * -ENOMEM) are expected where one happened; anything else is not.
 *
 * Each thread owns a private ring on which it checks what is cheap to
 * check (documented -EINVAL cases, SETUP's geometry, every CQE's result
 * against an independent reference of SQE validation, one-rank collective
 * results, no more CQEs than consumed SQEs); the shared rings are for
 * races only. A result that contradicts the ABI, a signal other than the
 * SIGSEGV/SIGBUS of a guarded access to memory another thread unmapped,
 * or a call that never returns is "unexpected": printed, counted, and
 * the exit status is 1. Threads are joined at most 90 s after the budget.
 *
 * Usage: kcoll-fuzz [-t SECONDS] [-s SEED] [-j THREADS] [-a ADDR] [-P] [-U] [-D] [-R] [-v]
 *   -t  budget in seconds (default 10)
 *   -s  seed (default: from the clock); printed, "-s" reproduces the
 *       choices of every thread (timing between threads still varies)
 *   -j  fuzzing threads (default 4)
 *   -a  this node's RDMA address (default $KCOLL_IP): multi-rank tables
 *       name it, and two-rank communicators are formed over it
 *   -P  no two-rank communicators
 *   -U  the fuzzing threads stay root (CAP_IPC_LOCK, CAP_SYS_NICE)
 *   -D  the RDMA device stays (no rdma link delete/add)
 *   -R  no teardown races against registered submissions
 *   -v  log every unexpected result (else the first 50) and progress
 */
#define _GNU_SOURCE
#include <link.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <regex.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "kcoll_logic.h"	/* the module's plain logic: SETUP/ENTER oracles */
#include "kcoll_shape.h"	/* what each opcode reads and writes */
#include "kcoll-sqe-ref.h"	/* independent SQE reference */
#include "../kmod/kcoll_testbuf.h"	/* the test dma-buf exporter */
#include "kcoll_wire.h"		/* KCOLL_EAGER_MAX: an eager send completes
				 * once posted */

#define KCOLL_DEV	"/dev/kcoll"
#define MAX_THREADS	64
#define NSHARED		8
#define MAX_IDS		8
#define PRIV_IDS	64
/* One ring mapping at most: 2^15 SQEs + 2^16 CQEs + the index lines. */
#define RES_SIZE	(4UL << 20)
#define PRIV_DATA	(2UL << 20)
#define PRIV_HOLE	(1UL << 20)
/* Per thread: a registration and an unregistered buffer for the races. */
#define BIG_SIZE	(4UL << 20)
/* The shared zone: data, a hole, read-only pages, a hole, pages that come
 * and go, and a hole up to the end. */
#define Z_DATA		0UL
#define Z_DATA_SZ	(4UL << 20)
#define Z_RO		(5UL << 20)
#define Z_RO_SZ		(256UL << 10)
#define Z_VOL		(6UL << 20)
#define Z_VOL_SZ	(1UL << 20)
#define ZONE_SIZE	(16UL << 20)
#define NERR		134
#define MAX_UNEXPECTED_LOG 50
#define PAGE		4096UL
#define KERNEL_ADDR	0xffff888000000000ULL

#define LD(x)		__atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v)	__atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* ------------------------------------------------------------------ */
/* Randomness                                                          */
/* ------------------------------------------------------------------ */

struct rng {
	uint64_t s;
};

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rnd(struct rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dULL;
}

/* Uniform in [0, n); 0 if n is 0. */
static uint32_t rn(struct rng *r, uint32_t n)
{
	return n ? (uint32_t)((rnd(r) >> 32) % n) : 0;
}

static bool one_in(struct rng *r, uint32_t n)
{
	return rn(r, n) == 0;
}

static const uint64_t interesting[] = {
	0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256,
	511, 512, 1023, 1024, 4095, 4096, 4097, 32767, 32768, 65535, 65536,
	65537, 0x7fffffff, 0x80000000, 0xffffffff, 0x100000000ULL,
	60000000, 60000001, 1ULL << 40, 1ULL << 47, 1ULL << 48,
	(1ULL << 48) + 1, 0x7fffffffffffffffULL, 0x8000000000000000ULL,
	~0ULL - 1, ~0ULL,
};

static uint64_t rinteresting(struct rng *r)
{
	uint64_t v = interesting[rn(r, sizeof(interesting) / sizeof(interesting[0]))];

	switch (rn(r, 4)) {
	case 0:
		return v + 1;
	case 1:
		return v - 1;
	default:
		return v;
	}
}

/* A 32-bit value biased to boundaries. */
static uint32_t rval32(struct rng *r)
{
	switch (rn(r, 4)) {
	case 0:
		return (uint32_t)rnd(r);
	case 1:
		return rn(r, 17);
	default:
		return (uint32_t)rinteresting(r);
	}
}

/* ------------------------------------------------------------------ */
/* Global state                                                        */
/* ------------------------------------------------------------------ */

enum call_kind {
	C_OPEN, C_CLOSE, C_DUP, C_QUERY, C_SETUP, C_ENTER, C_EVENTFD,
	C_COMM_CREATE, C_COMM_DESTROY, C_REG_MEM, C_DEREG_MEM, C_COMM_ABORT,
	C_COMM_REPORT, C_BAD_IOCTL, C_MMAP, C_MUNMAP, C_VMA, C_POLL, C_RW,
	C_SYSFS, C_NR
};

static const char *const call_names[C_NR] = {
	[C_OPEN] = "open", [C_CLOSE] = "close", [C_DUP] = "dup",
	[C_QUERY] = "QUERY", [C_SETUP] = "SETUP", [C_ENTER] = "ENTER",
	[C_EVENTFD] = "EVENTFD", [C_COMM_CREATE] = "COMM_CREATE",
	[C_COMM_DESTROY] = "COMM_DESTROY", [C_REG_MEM] = "REG_MEM",
	[C_DEREG_MEM] = "DEREG_MEM", [C_COMM_ABORT] = "COMM_ABORT",
	[C_COMM_REPORT] = "COMM_REPORT", [C_BAD_IOCTL] = "other_ioctl",
	[C_MMAP] = "mmap", [C_MUNMAP] = "munmap", [C_VMA] = "mremap/mprotect/madvise",
	[C_POLL] = "poll", [C_RW] = "read/write/lseek", [C_SYSFS] = "sysfs",
};

/* A descriptor of /dev/kcoll with its ring, as the fuzzer last set it up.
 * Shared slots are read and written racily by every thread (that is the
 * point); every value read from one is range-checked before use, and the
 * ring always lives inside the slot's own reservation. */
struct slot {
	int fd;
	char *res;			/* RES_SIZE, never given back */
	uint32_t sq_entries, cq_entries;
	struct kcoll_sq_offsets so;
	struct kcoll_cq_offsets co;
	uint64_t size;			/* 0: no ring set up */
	int mapped;
	uint32_t ltail;			/* SQEs written (application tail) */
	uint32_t comms[MAX_IDS];
	uint32_t mems[MAX_IDS];
	uint64_t mem_addr[MAX_IDS], mem_len[MAX_IDS];
	int nranks[MAX_IDS];		/* of comms[i] */
	pthread_mutex_t lock;		/* mapping changes and reopen */
	bool shared;
};

/* What the owner of a private slot knows for sure. */
struct acct {
	bool valid;			/* no index corrupted since open */
	uint64_t consumed, reaped;
	uint32_t known_comms[PRIV_IDS];	/* every comm id alive on the fd */
	bool comms_exact;
	bool setup_known;		/* whether the file has rings is known */
};

struct tstate {
	int id;
	pid_t tid;
	pthread_t th;
	struct rng r;
	uint64_t calls[C_NR];
	uint64_t errs[NERR];
	uint64_t faults, sqes, cqes, intr, checked, pair_sessions, pair_ops,
		 pair_ok, pair_vok, pair_rok;
	uint64_t pair_bursts, pair_bover, pair_bops, pair_bok;
	_Atomic int64_t call_t0;	/* 0: not in a call */
	_Atomic int call_allow_ms;
	_Atomic int call_kind;
	int64_t kicked;			/* watchdog: last SIGUSR1 */
	bool stuck_reported;
	struct slot priv;
	struct acct acct;
	char *data;			/* PRIV_DATA bytes, a hole after */
	char *big;			/* BIG_SIZE bytes */
	uint64_t race_rounds, nic_ops, nic_ok, nic_stale;
	_Atomic uint32_t last_r;	/* the action it chose last (one_action) */
	int evfd[2];
	int epfd;
	uint32_t seq;
	struct kcoll_query q;
	struct kcoll_rank_addr *ranks;	/* KCOLL_MAX_RANKS + 1 entries */
	bool partner;
	bool done;
};

static struct {
	int seconds, nthreads, verbose, pairs;
	bool root;			/* -U: stay root */
	bool device;			/* rxe0 comes and goes (-D: no) */
	bool races;			/* teardown races (-R: no) */
	uint64_t seed;
	uint32_t ip;			/* network order; 0: none */
	char ipstr[64];
} opt = { .seconds = 10, .nthreads = 4, .pairs = 1, .device = true,
	.races = true };

static struct slot g_shared[NSHARED];
static char *g_zone;
static int g_memfd = -1;		/* shared file pages for the volatile zone */
static struct tstate *g_ts[MAX_THREADS + 1];
static int g_nts;
static int64_t g_deadline;
static atomic_bool g_stop;
static atomic_ulong g_unexpected;
static atomic_ulong g_unexpected_sig[65];
static atomic_bool g_abort_notty, g_report_notty;
static atomic_ulong g_abort_ok, g_report_ok;
static char g_seedline[96];

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static bool stopping(void)
{
	return atomic_load_explicit(&g_stop, memory_order_relaxed) ||
	       now_ns() >= g_deadline;
}

static __attribute__((format(printf, 2, 3)))
void unexpected(struct tstate *t, const char *fmt, ...)
{
	unsigned long n = atomic_fetch_add(&g_unexpected, 1);
	char buf[512];
	va_list ap;

	if (n >= MAX_UNEXPECTED_LOG && !opt.verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "kcoll-fuzz: UNEXPECTED (thread %d): %s\n",
		t ? t->id : -1, buf);
}

static __attribute__((format(printf, 1, 2))) void vlog(const char *fmt, ...)
{
	va_list ap;

	if (!opt.verbose)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* Signals: guarded accesses to memory that may vanish                 */
/* ------------------------------------------------------------------ */

static __thread sigjmp_buf t_jb;
static __thread volatile sig_atomic_t t_guard;

static char *g_nicsrc[2];
static char *g_nicsrc_ref[2];	/* what g_nicsrc must hold */
#define NIC_BYTES	(256UL << 10)

/* Which of our regions @p lies in (for a fault's report). */
static void fault_where(const char *p, char *out, size_t len)
{
	const char *z = g_zone;
	int i;

	snprintf(out, len, "none of ours");
	if (z && p >= z && p < z + Z_VOL + Z_VOL_SZ + PAGE) {
		snprintf(out, len, "the shared zone +%#lx", (unsigned long)(p - z));
		return;
	}
	for (i = 0; i < 2; i++)
		if (g_nicsrc[i] && p >= g_nicsrc[i] && p < g_nicsrc[i] + NIC_BYTES) {
			snprintf(out, len, "the NIC pairs' source %d +%#lx", i,
				 (unsigned long)(p - g_nicsrc[i]));
			return;
		}
	for (i = 0; i < 2; i++)
		if (g_nicsrc_ref[i] && p >= g_nicsrc_ref[i] &&
		    p < g_nicsrc_ref[i] + NIC_BYTES) {
			snprintf(out, len, "the NIC pairs' reference copy %d +%#lx",
				 i, (unsigned long)(p - g_nicsrc_ref[i]));
			return;
		}
	for (i = 0; i < NSHARED; i++)
		if (g_shared[i].res && p >= g_shared[i].res &&
		    p < g_shared[i].res + RES_SIZE) {
			snprintf(out, len, "shared slot %d's ring +%#lx", i,
				 (unsigned long)(p - g_shared[i].res));
			return;
		}
	for (i = 0; i < g_nts; i++) {
		const struct tstate *t = g_ts[i];

		if (!t)
			continue;
		if (t->priv.res && p >= t->priv.res && p < t->priv.res + RES_SIZE)
			snprintf(out, len, "thread %d's private ring +%#lx", t->id,
				 (unsigned long)(p - t->priv.res));
		else if (t->data && p >= t->data && p < t->data + PRIV_DATA + PRIV_HOLE)
			snprintf(out, len, "thread %d's data +%#lx", t->id,
				 (unsigned long)(p - t->data));
		else if (t->big && p >= t->big && p < t->big + BIG_SIZE)
			snprintf(out, len, "thread %d's big buffer +%#lx", t->id,
				 (unsigned long)(p - t->big));
		else
			continue;
		return;
	}
}

/* This binary's load bias and text: a fault's pc as addr2line wants it. */
static uintptr_t g_load_bias;
extern char __executable_start[], etext[];

static void on_fault(int sig, siginfo_t *si, void *ucv)
{
	const ucontext_t *uc = ucv;
	char msg[400], where[96], at[64] = "";
	void *bt[32];
	int n;

	if (t_guard) {
		t_guard = 0;
		siglongjmp(t_jb, 1);
	}
#ifdef __x86_64__
	{
		uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];

		if (pc >= (uintptr_t)__executable_start &&
		    pc < (uintptr_t)etext)
			snprintf(at, sizeof(at), ", at kcoll-fuzz+%#lx",
				 (unsigned long)(pc - g_load_bias));
		else
			snprintf(at, sizeof(at), ", at pc %#lx (not kcoll-fuzz's)",
				 (unsigned long)pc);
	}
#else
	(void)uc;
#endif
	fault_where(si->si_addr, where, sizeof(where));
	n = snprintf(msg, sizeof(msg),
		     "kcoll-fuzz: UNEXPECTED signal %d (code %d, addr %p: %s) outside a guarded access%s; %s\n",
		     sig, si->si_code, si->si_addr, where, at, g_seedline);
	if (n > 0 && write(2, msg, (size_t)n) < 0)
		_exit(3);
	/* Where it happened: binary+offset, for addr2line. */
	n = backtrace(bt, 32);
	backtrace_symbols_fd(bt, n, 2);
	_exit(1);
}

static void on_usr1(int sig)
{
	(void)sig;		/* interrupts a wait: the call returns EINTR */
}

static void on_other(int sig)
{
	if (sig > 0 && sig < 65)
		atomic_fetch_add(&g_unexpected_sig[sig], 1);
}

/* The first object dl_iterate_phdr() reports is the program itself. */
static int main_load_bias(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	g_load_bias = (uintptr_t)info->dlpi_addr;
	return 1;
}

static void signals_init(void)
{
	struct sigaction sa;
	void *bt[1];
	int s;

	dl_iterate_phdr(main_load_bias, NULL);
	/* Loads what backtrace() needs now, not in the fault handler. */
	(void)backtrace(bt, 1);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	/* Not blocked in the handler: siglongjmp needs no mask restore. */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;	/* no SA_RESTART */
	sigaction(SIGUSR1, &sa, NULL);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_other;
	for (s = 1; s < 32; s++) {
		if (s == SIGSEGV || s == SIGBUS || s == SIGUSR1 || s == SIGKILL ||
		    s == SIGSTOP || s == SIGINT || s == SIGTERM || s == SIGQUIT ||
		    s == SIGABRT || s == SIGCHLD || s == SIGWINCH || s == SIGCONT ||
		    s == SIGTSTP || s == SIGTTIN || s == SIGTTOU)
			continue;
		sigaction(s, &sa, NULL);
	}
}

/*
 * Run fn(arg) with SIGSEGV/SIGBUS turned into a return of false. @fn may
 * not take locks or allocate: it is abandoned where it faults. All state
 * it produces goes through @arg (nothing local here survives a longjmp).
 */
static __attribute__((noinline)) bool guarded(struct tstate *t,
					      void (*fn)(void *), void *arg)
{
	if (sigsetjmp(t_jb, 0)) {
		t_guard = 0;
		t->faults++;
		return false;
	}
	t_guard = 1;
	fn(arg);
	t_guard = 0;
	return true;
}

/* A 32-bit load from memory that may vanish. */
struct gload {
	volatile uint32_t *p;
	uint32_t v;
};

static void gload_fn(void *arg)
{
	struct gload *g = arg;

	g->v = __atomic_load_n(g->p, __ATOMIC_ACQUIRE);
}

static bool gload(struct tstate *t, volatile uint32_t *p, uint32_t *v)
{
	struct gload g = { .p = p };

	if (!guarded(t, gload_fn, &g))
		return false;
	*v = g.v;
	return true;
}

/* ------------------------------------------------------------------ */
/* System calls, counted and watched                                   */
/* ------------------------------------------------------------------ */

static void call_begin(struct tstate *t, int kind, int allow_ms)
{
	atomic_store_explicit(&t->call_allow_ms, allow_ms, memory_order_relaxed);
	atomic_store_explicit(&t->call_kind, kind, memory_order_relaxed);
	atomic_store_explicit(&t->call_t0, now_ns(), memory_order_release);
}

/* Returns @r, or -errno. */
static long call_end(struct tstate *t, int kind, long r)
{
	int e = r < 0 ? errno : 0;

	atomic_store_explicit(&t->call_t0, 0, memory_order_release);
	t->calls[kind]++;
	if (r < 0) {
		t->errs[e > 0 && e < NERR ? e : 0]++;
		if (e == EINTR)
			t->intr++;
		return -e;
	}
	return r;
}

static int ioctl_kind(unsigned long cmd)
{
	switch (cmd) {
	case KCOLL_IOC_QUERY: return C_QUERY;
	case KCOLL_IOC_SETUP: return C_SETUP;
	case KCOLL_IOC_ENTER: return C_ENTER;
	case KCOLL_IOC_EVENTFD: return C_EVENTFD;
	case KCOLL_IOC_COMM_CREATE: return C_COMM_CREATE;
	case KCOLL_IOC_COMM_DESTROY: return C_COMM_DESTROY;
	case KCOLL_IOC_REG_MEM: return C_REG_MEM;
	case KCOLL_IOC_DEREG_MEM: return C_DEREG_MEM;
	case KCOLL_IOC_COMM_ABORT: return C_COMM_ABORT;
	case KCOLL_IOC_COMM_REPORT: return C_COMM_REPORT;
	default: return C_BAD_IOCTL;
	}
}

static long x_ioctl(struct tstate *t, int fd, unsigned long cmd, void *arg,
		    int allow_ms)
{
	int kind = ioctl_kind(cmd);

	call_begin(t, kind, allow_ms);
	return call_end(t, kind, ioctl(fd, cmd, arg));
}

static int x_open(struct tstate *t, int flags)
{
	call_begin(t, C_OPEN, 1000);
	return (int)call_end(t, C_OPEN, open(KCOLL_DEV, flags));
}

/* close() of the last reference waits for the context's requests. */
static void x_close(struct tstate *t, int fd)
{
	call_begin(t, C_CLOSE, 5000);
	call_end(t, C_CLOSE, close(fd));
}

static void *x_mmap(struct tstate *t, void *addr, size_t len, int prot,
		    int flags, int fd, off_t off, long *err)
{
	void *p;

	call_begin(t, C_MMAP, 1000);
	p = mmap(addr, len, prot, flags, fd, off);
	*err = call_end(t, C_MMAP, p == MAP_FAILED ? -1 : 0);
	return p;
}

/* Make [addr, addr + len) an inaccessible part of a reservation again. */
static void reserve(struct tstate *t, void *addr, size_t len)
{
	long err;

	if (!len)
		return;
	x_mmap(t, addr, len, PROT_NONE,
	       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0,
	       &err);
	if (err) {
		fprintf(stderr, "kcoll-fuzz: cannot re-reserve %p+%zu: %s\n",
			addr, len, strerror((int)-err));
		_exit(2);
	}
}

/*
 * Put a new mapping over [dst, dst + len), part of a reservation, without
 * leaving a hole there even for a moment. A MAP_FIXED mmap over it would:
 * when the file's mmap refuses (a kcoll ring that changed, a number that
 * now names another file), the kernel has already unmapped the range,
 * and until it is reserved again any mmap another thread makes (a
 * private ring, a buffer malloc() maps, a thread's stack) may be placed
 * there. The next reserve() then replaces that mapping under its owner,
 * and descriptors pointing into the reservation make the module write
 * into it. So the mapping is made where the kernel chooses and moved
 * over @dst by one mremap(): it unmaps the target first, but a same-size
 * move of a mapping nothing else knows can fail after that only for want
 * of memory (then the range is reserved again at once).
 * Returns 0 or -errno; on failure @dst's old mapping may be gone.
 */
static long map_over(struct tstate *t, void *dst, size_t len, int prot,
		     int flags, int fd, off_t off)
{
	long err;
	void *p;

	p = x_mmap(t, NULL, len, prot, flags, fd, off, &err);
	if (err)
		return err;
	call_begin(t, C_VMA, 1000);
	err = call_end(t, C_VMA,
		       mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
			      dst) == MAP_FAILED ? -1 : 0);
	if (err) {
		call_begin(t, C_MUNMAP, 1000);
		call_end(t, C_MUNMAP, munmap(p, len));
		reserve(t, dst, len);
	}
	return err;
}

/* ------------------------------------------------------------------ */
/* Memory the descriptors point at                                     */
/* ------------------------------------------------------------------ */

static size_t dtype_size(uint8_t dt)
{
	static const uint8_t sz[KCOLL_DTYPE_LAST] = {
		[KCOLL_DTYPE_INT8] = 1, [KCOLL_DTYPE_UINT8] = 1,
		[KCOLL_DTYPE_INT32] = 4, [KCOLL_DTYPE_UINT32] = 4,
		[KCOLL_DTYPE_INT64] = 8, [KCOLL_DTYPE_UINT64] = 8,
		[KCOLL_DTYPE_FP16] = 2, [KCOLL_DTYPE_BF16] = 2,
		[KCOLL_DTYPE_FP32] = 4, [KCOLL_DTYPE_FP64] = 8,
		[KCOLL_DTYPE_FP8_E4M3] = 1, [KCOLL_DTYPE_FP8_E5M2] = 1,
	};

	return dt < KCOLL_DTYPE_LAST ? sz[dt] : 0;
}

/* A shared slot's ring mapping (maybe gone), as a buffer. Never a private
 * ring: a collective writing its output over a private ring's indices
 * would break what its owner checks. */
static uint64_t ring_addr(struct tstate *t)
{
	struct slot *s = &g_shared[rn(&t->r, NSHARED)];

	return (uint64_t)(uintptr_t)s->res + rn(&t->r, 64) * PAGE;
}

/*
 * An address for a buffer of @len bytes: mostly valid memory of the
 * caller (private: only it touches it), sometimes shared, read-only,
 * vanishing, a ring, straddling into a hole, or no memory at all.
 */
static uint64_t pick_addr(struct tstate *t, uint64_t len, bool priv)
{
	char *z = g_zone;
	uint64_t fit;

	switch (rn(&t->r, 40)) {
	case 0: return 0;
	case 1: return 4096;
	case 2: return KERNEL_ADDR + rn(&t->r, 1 << 20) * PAGE;
	case 3: return 0x0000800000000000ULL - PAGE;	/* top of user space */
	case 4: return 0x0008000000000000ULL;		/* non-canonical */
	case 5: return (uint64_t)(uintptr_t)(z + Z_RO) + rn(&t->r, Z_RO_SZ);
	case 6: return (uint64_t)(uintptr_t)(z + Z_VOL) + rn(&t->r, Z_VOL_SZ);
	case 7: return (uint64_t)(uintptr_t)(z + Z_DATA_SZ) - rn(&t->r, 8192);
	case 11: return (uint64_t)(uintptr_t)(z + Z_DATA) + rn(&t->r, Z_DATA_SZ);
	case 12:	/* read-only file pages: libc's and our own text */
		return ((one_in(&t->r, 2) ? (uint64_t)(uintptr_t)&memcpy :
			 (uint64_t)(uintptr_t)&pick_addr) & ~(PAGE - 1)) -
		       rn(&t->r, 4) * PAGE;
	case 8: return (uint64_t)(uintptr_t)(z + Z_DATA_SZ + PAGE);	/* hole */
	case 9: return ring_addr(t);
	case 10:
		if (priv)
			return (uint64_t)(uintptr_t)(t->data + PRIV_DATA) - len / 2;
		return (uint64_t)(uintptr_t)(z + Z_DATA + Z_DATA_SZ) - len / 2;
	default:
		/* Descriptors of shared rings may be consumed by any thread's
		 * ENTER, at any time: they never point at private memory,
		 * whose contents the owner checks. */
		if (!priv) {
			fit = len < Z_DATA_SZ ? Z_DATA_SZ - len : 0;
			return (uint64_t)(uintptr_t)(z + Z_DATA) +
			       (fit ? rnd(&t->r) % fit : 0);
		}
		fit = len < PRIV_DATA ? PRIV_DATA - len : 0;
		return (uint64_t)(uintptr_t)t->data + (fit ? rnd(&t->r) % fit : 0);
	}
}

/* A length: mostly small, sometimes page-sized, sometimes absurd. */
static uint64_t pick_len(struct tstate *t)
{
	switch (rn(&t->r, 10)) {
	case 0: return rinteresting(&t->r);
	case 1: return (uint64_t)(rn(&t->r, 512) + 1) * PAGE;
	case 2: return 1ULL << (30 + rn(&t->r, 17));	/* 1 GiB .. 64 TiB */
	case 3: return 0;
	default: return rn(&t->r, 65536) + 1;
	}
}

/* An ioctl argument pointer that is not a valid struct. */
static void *bad_ptr(struct tstate *t, size_t size)
{
	switch (rn(&t->r, 7)) {
	case 0: return NULL;
	case 1: return (void *)(uintptr_t)16;
	case 2: return (void *)(uintptr_t)KERNEL_ADDR;
	case 3: return g_zone + Z_DATA_SZ + PAGE;			/* hole */
	case 4: return g_zone + Z_DATA_SZ - size / 2;		/* straddles */
	case 5: return g_zone + Z_VOL + rn(&t->r, Z_VOL_SZ / 64) * 64;
	default: return (void *)(uintptr_t)0x0008000000000000ULL;
	}
}

/* The shared zone: a reservation with data, read-only and vanishing
 * parts. The read-only pages hold ready-made valid arguments, so that
 * copy_from_user succeeds and copy_to_user fails. */
#define RO_SETUP	0
#define RO_QUERY	256
#define RO_ENTER	512
#define RO_CREATE	768
#define RO_RANKS	1024
#define RO_REG		1536
#define RO_REPORT	1792

static void zone_init(void)
{
	struct kcoll_setup su = { .sq_entries = 8 };
	struct kcoll_enter en = { 0 };
	struct kcoll_rank_addr ra = { .addr = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 } };
	struct kcoll_comm_create cc = { .uid = 0x5eed, .nranks = 1,
					.key = { 'r', 'o' } };
	char *z;

	z = mmap(NULL, ZONE_SIZE, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (z == MAP_FAILED) {
		perror("kcoll-fuzz: zone");
		exit(2);
	}
	if (mprotect(z + Z_DATA, Z_DATA_SZ, PROT_READ | PROT_WRITE) ||
	    mprotect(z + Z_RO, Z_RO_SZ, PROT_READ | PROT_WRITE) ||
	    mprotect(z + Z_VOL, Z_VOL_SZ, PROT_READ | PROT_WRITE)) {
		perror("kcoll-fuzz: zone mprotect");
		exit(2);
	}
	memset(z + Z_DATA, 0x11, Z_DATA_SZ);
	memset(z + Z_VOL, 0x22, Z_VOL_SZ);
	memset(z + Z_RO, 0, Z_RO_SZ);
	cc.ranks = (uint64_t)(uintptr_t)(z + Z_RO + RO_RANKS);
	memcpy(z + Z_RO + RO_SETUP, &su, sizeof(su));
	memcpy(z + Z_RO + RO_ENTER, &en, sizeof(en));
	memcpy(z + Z_RO + RO_RANKS, &ra, sizeof(ra));
	memcpy(z + Z_RO + RO_CREATE, &cc, sizeof(cc));
	if (mprotect(z + Z_RO, Z_RO_SZ, PROT_READ)) {
		perror("kcoll-fuzz: zone mprotect");
		exit(2);
	}
	g_zone = z;
	g_memfd = memfd_create("kcoll-fuzz", MFD_CLOEXEC);
	if (g_memfd >= 0 && ftruncate(g_memfd, 32 * PAGE))
		g_memfd = -1;
}

static char *reservation(size_t len)
{
	char *p = mmap(NULL, len, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED) {
		perror("kcoll-fuzz: reservation");
		exit(2);
	}
	return p;
}

/* ------------------------------------------------------------------ */
/* Slots                                                               */
/* ------------------------------------------------------------------ */

static void slot_init(struct slot *s, bool shared)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->res = reservation(RES_SIZE);
	s->shared = shared;
	pthread_mutex_init(&s->lock, NULL);
}

static void slot_forget(struct slot *s)
{
	int i;

	ST(s->size, 0);
	ST(s->sq_entries, 0);
	ST(s->cq_entries, 0);
	ST(s->ltail, 0);
	for (i = 0; i < MAX_IDS; i++) {
		ST(s->comms[i], 0);
		ST(s->mems[i], 0);
	}
}

static void acct_reset(struct tstate *t)
{
	memset(&t->acct, 0, sizeof(t->acct));
	t->acct.valid = true;
	t->acct.comms_exact = true;
	t->acct.setup_known = true;
}

/* Drop the ring mapping (if any). Must hold s->lock. */
static void slot_unmap_locked(struct tstate *t, struct slot *s)
{
	if (!LD(s->mapped))
		return;
	ST(s->mapped, 0);
	reserve(t, s->res, RES_SIZE);
	t->calls[C_MUNMAP]++;
}

/* Close the descriptor and forget the ring. Must hold s->lock. */
static void slot_close_locked(struct tstate *t, struct slot *s)
{
	/* Other threads close shared descriptors without the lock: whoever
	 * takes the number out of the slot closes it, exactly once. */
	int fd = __atomic_exchange_n(&s->fd, -1, __ATOMIC_RELAXED);

	slot_unmap_locked(t, s);
	slot_forget(s);
	if (fd >= 0)
		x_close(t, fd);
}

/* The geometry SETUP reported, range-checked against the reservation. */
struct ringview {
	char *b;
	uint32_t sqn, cqn;
	uint32_t sq_head, sq_tail, sq_mask, sq_entries, sq_flags, sqes;
	uint32_t cq_head, cq_tail, cq_mask, cq_entries, cq_flags, cqes;
};

static bool off_ok(uint32_t off, uint64_t len)
{
	return off % 4 == 0 && (uint64_t)off + len <= RES_SIZE;
}

static bool ring_view(struct slot *s, struct ringview *v)
{
	v->b = s->res;
	v->sqn = LD(s->sq_entries);
	v->cqn = LD(s->cq_entries);
	v->sq_head = LD(s->so.head);
	v->sq_tail = LD(s->so.tail);
	v->sq_mask = LD(s->so.ring_mask);
	v->sq_entries = LD(s->so.ring_entries);
	v->sq_flags = LD(s->so.flags);
	v->sqes = LD(s->so.sqes);
	v->cq_head = LD(s->co.head);
	v->cq_tail = LD(s->co.tail);
	v->cq_mask = LD(s->co.ring_mask);
	v->cq_entries = LD(s->co.ring_entries);
	v->cq_flags = LD(s->co.flags);
	v->cqes = LD(s->co.cqes);
	if (!LD(s->mapped) || !kcoll_is_pow2(v->sqn) || !kcoll_is_pow2(v->cqn) ||
	    v->sqn > KCOLL_SQ_ENTRIES_LIMIT || v->cqn > KCOLL_CQ_ENTRIES_LIMIT)
		return false;
	return off_ok(v->sq_head, 4) && off_ok(v->sq_tail, 4) &&
	       off_ok(v->sq_mask, 4) && off_ok(v->sq_entries, 4) &&
	       off_ok(v->sq_flags, 4) && off_ok(v->cq_head, 4) &&
	       off_ok(v->cq_tail, 4) && off_ok(v->cq_mask, 4) &&
	       off_ok(v->cq_entries, 4) && off_ok(v->cq_flags, 4) &&
	       off_ok(v->sqes, (uint64_t)v->sqn * sizeof(struct kcoll_sqe)) &&
	       off_ok(v->cqes, (uint64_t)v->cqn * sizeof(struct kcoll_cqe));
}

#define RU32(v, f)	((uint32_t *)((v)->b + (v)->f))

/* Record a successful SETUP's geometry in @s. */
static void slot_record(struct slot *s, const struct kcoll_setup *p)
{
	ST(s->so.head, p->sq_off.head);
	ST(s->so.tail, p->sq_off.tail);
	ST(s->so.ring_mask, p->sq_off.ring_mask);
	ST(s->so.ring_entries, p->sq_off.ring_entries);
	ST(s->so.flags, p->sq_off.flags);
	ST(s->so.sqes, p->sq_off.sqes);
	ST(s->co.head, p->cq_off.head);
	ST(s->co.tail, p->cq_off.tail);
	ST(s->co.ring_mask, p->cq_off.ring_mask);
	ST(s->co.ring_entries, p->cq_off.ring_entries);
	ST(s->co.flags, p->cq_off.flags);
	ST(s->co.cqes, p->cq_off.cqes);
	ST(s->sq_entries, p->sq_entries);
	ST(s->cq_entries, p->cq_entries);
	ST(s->size, p->mmap_size);
	ST(s->ltail, 0);
}

/* Map @s's ring at its reservation (map_over()). Must hold s->lock. */
static bool slot_map_locked(struct tstate *t, struct slot *s)
{
	uint64_t size = LD(s->size);
	int prot = PROT_READ | PROT_WRITE;

	if (!size || size > RES_SIZE || LD(s->fd) < 0)
		return false;
	if (one_in(&t->r, 30))
		prot = PROT_READ;	/* writes then fault */
	if (map_over(t, s->res, size, prot, MAP_SHARED, LD(s->fd), 0)) {
		slot_unmap_locked(t, s);
		return false;
	}
	ST(s->mapped, 1);
	return true;
}

static uint32_t pick_sq_entries(struct tstate *t)
{
	switch (rn(&t->r, 12)) {
	case 0: return rval32(&t->r);
	case 1: return t->q.max_sq_entries;
	case 2: return t->q.max_sq_entries + 1;
	case 3: return 0;
	case 4: return 64 << rn(&t->r, 6);
	default: return rn(&t->r, 32) + 1;
	}
}

/*
 * SETUP with random sizes and flags. On the private slot the result is
 * checked against the plain logic the module is built from. Returns 0 or
 * -errno.
 */
static long do_setup(struct tstate *t, struct slot *s, int fd, bool check)
{
	struct kcoll_setup p, in;
	bool clean = true, known_arg = true, had = LD(s->size) != 0;
	void *arg = &p;
	long ret;
	uint32_t sq, cq;
	int want;

	memset(&p, 0, sizeof(p));
	p.sq_entries = pick_sq_entries(t);
	if (one_in(&t->r, 3)) {
		p.flags |= KCOLL_SETUP_CQSIZE;
		p.cq_entries = one_in(&t->r, 4) ? rval32(&t->r) :
			       p.sq_entries * (rn(&t->r, 4) + 1);
	}
	if (one_in(&t->r, 3))
		p.flags |= KCOLL_SETUP_CLAMP;
	if (one_in(&t->r, 8)) {
		clean = false;
		switch (rn(&t->r, 6)) {
		case 0: p.flags |= 1U << (2 + rn(&t->r, 30)); break;
		case 1: p.resv[rn(&t->r, 4)] = rnd(&t->r) | 1; break;
		case 2: p.mmap_size = rnd(&t->r) | 1; break;
		case 3: p.features = rval32(&t->r) | 1; break;
		case 4: ((uint32_t *)&p.sq_off)[rn(&t->r, 8)] = rval32(&t->r) | 1; break;
		default: p.cq_off.resv[rn(&t->r, 2)] = 1; break;
		}
	}
	if (!(p.flags & KCOLL_SETUP_CQSIZE) && one_in(&t->r, 10))
		p.cq_entries = rval32(&t->r);	/* without CQSIZE: EINVAL if != 0 */
	in = p;
	if (one_in(&t->r, 25)) {
		arg = one_in(&t->r, 2) ? (void *)(g_zone + Z_RO + RO_SETUP) :
					 bad_ptr(t, sizeof(p));
		known_arg = false;
	}
	ret = x_ioctl(t, fd, KCOLL_IOC_SETUP, arg, 1000);
	if (ret == 0 && arg == (void *)&p) {
		slot_record(s, &p);
	} else if (arg == (void *)(g_zone + Z_RO + RO_SETUP) && ret == -EFAULT) {
		/* The rings exist but the reply is lost: the geometry of the
		 * read-only request (sq 8), from the plain logic. */
		struct kcoll_setup q = { .sq_entries = 8 };
		struct kcoll_ring_layout l;
		uint32_t a, b;

		if (!kcoll_ring_size(8, 0, 0, t->q.max_sq_entries,
				     t->q.max_cq_entries, &a, &b)) {
			kcoll_ring_layout(a, b, &l);
			q.sq_entries = a;
			q.cq_entries = b;
			q.sq_off = l.sq_off;
			q.cq_off = l.cq_off;
			q.mmap_size = l.size;
			slot_record(s, &q);
		}
	} else if (!known_arg && (ret == 0 || ret == -EFAULT) && check) {
		t->acct.setup_known = false;	/* rings or not: unknown */
	}
	if (!check || !known_arg || !t->acct.setup_known)
		return ret;

	/* The private descriptor's state is known: check the answer. */
	t->checked++;
	if (!clean) {
		if (ret != -EINVAL)
			unexpected(t, "SETUP with a reserved/output/flag field set (flags %#x) returned %ld, not -EINVAL",
				   in.flags, ret);
		return ret;
	}
	want = kcoll_ring_size(in.sq_entries, in.cq_entries, in.flags,
			       t->q.max_sq_entries, t->q.max_cq_entries, &sq, &cq);
	if (want) {
		if (ret != -EINVAL)
			unexpected(t, "SETUP sq %u cq %u flags %#x (max %u/%u) returned %ld, expected -EINVAL",
				   in.sq_entries, in.cq_entries, in.flags,
				   t->q.max_sq_entries, t->q.max_cq_entries, ret);
	} else if (had) {
		if (ret != -EBUSY)
			unexpected(t, "second SETUP (sq %u cq %u flags %#x) returned %ld, expected -EBUSY",
				   in.sq_entries, in.cq_entries, in.flags, ret);
	} else if (ret == 0) {
		struct kcoll_ring_layout l;

		kcoll_ring_layout(sq, cq, &l);
		if (p.sq_entries != sq || p.cq_entries != cq ||
		    memcmp(&p.sq_off, &l.sq_off, sizeof(l.sq_off)) ||
		    memcmp(&p.cq_off, &l.cq_off, sizeof(l.cq_off)) ||
		    p.mmap_size != l.size || p.mmap_offset != KCOLL_OFF_RINGS ||
		    !(p.features & KCOLL_FEAT_SINGLE_MMAP) ||
		    !kcoll_all_zero(p.resv, sizeof(p.resv)))
			unexpected(t, "SETUP sq %u cq %u flags %#x: got sq %u cq %u size %llu, expected sq %u cq %u size %llu",
				   in.sq_entries, in.cq_entries, in.flags,
				   p.sq_entries, p.cq_entries,
				   (unsigned long long)p.mmap_size, sq, cq,
				   (unsigned long long)l.size);
	} else if (ret != -ENOMEM) {
		unexpected(t, "SETUP sq %u cq %u flags %#x (max %u/%u) returned %ld, expected success",
			   in.sq_entries, in.cq_entries, in.flags,
			   t->q.max_sq_entries, t->q.max_cq_entries, ret);
	}
	return ret;
}

/*
 * Every descriptor starts at the lowest free number. Shared slots' numbers
 * are used by other threads long after they read them (a stale number:
 * closed, dup2()ed over), so no shared number may ever become a private
 * descriptor, whose state is checked, not even for the moment between
 * its open() and its move to a number of its own. Shared descriptors
 * therefore live from SHARED_FD_BASE up (a few dozen at most) and private
 * ones from PRIV_FD_BASE up, each moved there at once; the low numbers
 * are only ever a fresh open's for that moment, or a thread's own
 * (eventfds, sockets), and no thread knows another's. Until 2026-12-05
 * shared descriptors kept the low number they were opened at, which a
 * private open could take the moment it was freed, and a stale dup2() or
 * SETUP on it then reached the private file before it moved.
 */
#define SHARED_FD_BASE	256
#define PRIV_FD_BASE	512

/* Move fresh descriptor @fd to the lowest free number from @base (its
 * close-on-exec kept): the new number, or -errno (@fd closed either way). */
static int fd_move(struct tstate *t, int fd, int base)
{
	int fl, hi;

	if (fd < 0)
		return fd;
	fl = fcntl(fd, F_GETFD);
	call_begin(t, C_DUP, 1000);
	hi = (int)call_end(t, C_DUP, fcntl(fd, fl >= 0 && !(fl & FD_CLOEXEC) ?
					   F_DUPFD : F_DUPFD_CLOEXEC, base));
	x_close(t, fd);
	return hi;
}

static int fd_private(struct tstate *t, int fd)
{
	return fd_move(t, fd, PRIV_FD_BASE + 4 * t->id);
}

/* Open a fresh descriptor into @s, usually with a ring, usually mapped. */
static void slot_reopen(struct tstate *t, struct slot *s)
{
	static const int oflags[] = {
		O_RDWR, O_RDWR | O_CLOEXEC, O_RDWR | O_NONBLOCK, O_RDONLY,
		O_WRONLY,
	};
	bool priv = !s->shared;
	int fd;

	int fl = one_in(&t->r, 6) ? oflags[rn(&t->r, 5)] : O_RDWR;

	pthread_mutex_lock(&s->lock);
	slot_close_locked(t, s);
	fd = x_open(t, fl);
	/*
	 * Read-only: QUERY and nothing else (-EBADF). A shared slot keeps
	 * such a descriptor for the others' random calls, which check
	 * nothing; a private one, whose answers are checked as a
	 * read-write descriptor's, is opened again.
	 */
	if (fd >= 0 && (fl & O_ACCMODE) == O_RDONLY) {
		struct kcoll_setup p = { .sq_entries = 8 };
		struct kcoll_query q = { 0 };
		long r;

		r = x_ioctl(t, fd, KCOLL_IOC_QUERY, &q, 1000);
		if (r)
			unexpected(t, "QUERY on a read-only descriptor returned %ld", r);
		r = x_ioctl(t, fd, KCOLL_IOC_SETUP, &p, 1000);
		if (r != -EBADF)
			unexpected(t, "SETUP on a read-only descriptor returned %ld, not -EBADF", r);
		t->checked++;
		if (priv) {
			x_close(t, fd);
			fd = x_open(t, O_RDWR);
		}
	}
	fd = priv ? fd_private(t, fd) : fd_move(t, fd, SHARED_FD_BASE);
	if (fd < 0) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	ST(s->fd, fd);
	if (priv)
		acct_reset(t);
	if (!one_in(&t->r, 10)) {
		int tries = 4;

		while (tries-- && do_setup(t, s, fd, priv) && !LD(s->size))
			;
	}
	if (LD(s->size) && !one_in(&t->r, 10))
		slot_map_locked(t, s);
	pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------------ */
/* Descriptors                                                         */
/* ------------------------------------------------------------------ */

#define TAG_MAGIC	0xc011ULL
enum { EXP_ANY, EXP_ZERO, EXP_REF, EXP_EPERM };

/* Priorities above sysfs prio_max_unpriv need CAP_SYS_NICE (-EPERM);
 * 255: this process has it, or the module has no such limit. */
static unsigned int g_prio_max = 255;

static uint64_t tag(struct tstate *t, int exp, enum kcoll_ref_verdict v)
{
	return TAG_MAGIC << 48 | (uint64_t)exp << 44 | (uint64_t)v << 40 |
	       (t->seq++ & 0xffffffffffULL);
}

static bool is_reducing(uint8_t op)
{
	return kcoll_shape(op) && kcoll_shape(op)->reduces;
}

/* Send and receive bytes of @op for n ranks, count elements of @es (as
 * the root, where it matters). */
static void coll_sizes(uint8_t op, uint32_t n, uint64_t count, size_t es,
		       uint64_t *snd, uint64_t *rcv)
{
	const struct kcoll_shape *d = kcoll_shape(op);
	unsigned long long se = 0, re = 0;

	*snd = *rcv = 0;
	if (!d || kcoll_shape_count(d->send, 0, 0, n, count, &se) ||
	    kcoll_shape_count(d->recv, 0, 0, n, count, &re))
		return;
	*snd = se * es;
	*rcv = re * es;
}

static uint64_t pick_count(struct tstate *t)
{
	switch (rn(&t->r, 20)) {
	case 0: return rinteresting(&t->r);
	case 1: return 0;
	case 2: case 3: return rn(&t->r, 65536);
	default: return rn(&t->r, 1024) + 1;
	}
}

/* A comm id of @s (0 if none), its rank count in *@n. */
static uint32_t pick_comm(struct tstate *t, struct slot *s, int *n)
{
	int i = rn(&t->r, MAX_IDS), k;

	*n = 1;
	for (k = 0; k < MAX_IDS; k++) {
		uint32_t id = LD(s->comms[(i + k) % MAX_IDS]);

		if (id) {
			*n = LD(s->nranks[(i + k) % MAX_IDS]);
			return id;
		}
	}
	return 0;
}

/* A valid-looking collective on one of @s's communicators. */
static void gen_coll(struct tstate *t, struct slot *s, struct kcoll_sqe *q,
		     uint8_t op, bool priv)
{
	uint64_t snd, rcv;
	int n = 1, i;
	size_t es;

	q->opcode = op;
	q->comm_id = pick_comm(t, s, &n);
	if (!q->comm_id || one_in(&t->r, 20))
		q->comm_id = rn(&t->r, 8) + 1;
	if (op == KCOLL_OP_BARRIER)
		goto out;
	q->dtype = rn(&t->r, KCOLL_DTYPE_LAST - 1) + 1;
	if (is_reducing(op)) {
		q->redop = rn(&t->r, KCOLL_REDOP_AVG - 1) + 1;
		if (kcoll_ref_float(q->dtype) && one_in(&t->r, 4))
			q->redop = KCOLL_REDOP_AVG;
	}
	if (op == KCOLL_OP_REDUCE || op == KCOLL_OP_BROADCAST ||
	    op == KCOLL_OP_GATHER || op == KCOLL_OP_SCATTER)
		q->peer = one_in(&t->r, 8) ? rn(&t->r, 3) : 0;
	if (op == KCOLL_OP_SEND || op == KCOLL_OP_RECV)
		q->peer = rn(&t->r, 3);
	q->count = pick_count(t);
	es = dtype_size(q->dtype);
	coll_sizes(op, (uint32_t)(n > 0 ? n : 1), q->count > (1 << 20) ? 1 : q->count,
		   es, &snd, &rcv);
	if (kcoll_shape(op) && kcoll_shape(op)->vec) {
		/* A count table of this thread's, rewritten by the next
		 * v-variant it builds (maybe while the kernel reads it:
		 * it must copy it once), or an address of any kind. */
		static __thread uint64_t vtab[4 * 64 + 8];
		uint32_t j, w = kcoll_shape(op)->vec;

		for (j = 0; j < sizeof(vtab) / sizeof(vtab[0]); j++)
			vtab[j] = one_in(&t->r, 16) ? rinteresting(&t->r) :
				  one_in(&t->r, 4) ? 0 : rn(&t->r, 200);
		q->vec_addr = one_in(&t->r, 6) ?
			      pick_addr(t, (uint64_t)w * (n > 0 ? n : 1) * 8,
					priv) :
			      (uint64_t)(uintptr_t)vtab;
		snd = rcv = (rn(&t->r, 600) + 1) * es;
	}
	if (snd)
		q->send_addr = pick_addr(t, snd, priv);
	if (rcv)
		q->recv_addr = pick_addr(t, rcv, priv);
	if (snd && rcv && one_in(&t->r, 5))
		q->recv_addr = q->send_addr;			/* in place */
	/* A registration that holds the buffer, sometimes. */
	for (i = 0; i < MAX_IDS && one_in(&t->r, 3); i++) {
		int k = rn(&t->r, MAX_IDS);
		uint32_t h = LD(s->mems[k]);
		uint64_t a = LD(s->mem_addr[k]), l = LD(s->mem_len[k]);

		if (!h)
			continue;
		if (snd && one_in(&t->r, 2)) {
			q->send_mr = h;
			if (snd <= l)
				q->send_addr = a + rnd(&t->r) % (l - snd + 1);
		} else if (rcv) {
			q->recv_mr = h;
			if (rcv <= l)
				q->recv_addr = a + rnd(&t->r) % (l - rcv + 1);
		}
		break;
	}
out:
	q->prio = rn(&t->r, KCOLL_PRIO_MAX + 1);
	switch (rn(&t->r, 8)) {
	case 0: q->timeout_ms = rn(&t->r, 200) + 1; break;
	case 1: q->timeout_ms = KCOLL_TIMEOUT_NONE; break;
	default: break;
	}
}

/* 1-3 mutations of a valid descriptor. */
static void mutate_sqe(struct tstate *t, struct kcoll_sqe *q)
{
	uint8_t *b = (uint8_t *)q;
	int k = rn(&t->r, 3) + 1;

	while (k--) {
		switch (rn(&t->r, 12)) {
		case 0: case 1: {
			unsigned int byte = rn(&t->r, sizeof(*q));

			if (byte >= 8 && byte < 16)	/* user_data: the tag */
				byte = 0;
			b[byte] ^= 1U << rn(&t->r, 8);
			break;
		}
		case 2: q->opcode = one_in(&t->r, 2) ? rn(&t->r, KCOLL_OP_LAST + 2) :
						       (uint8_t)rnd(&t->r); break;
		case 3: q->dtype = rn(&t->r, KCOLL_DTYPE_LAST + 2); break;
		case 4: q->redop = rn(&t->r, KCOLL_REDOP_LAST + 2); break;
		case 5: q->prio = rn(&t->r, 3) ? rn(&t->r, KCOLL_PRIO_MAX + 3) : (uint8_t)rnd(&t->r); break;
		case 6: q->flags = 1U << rn(&t->r, 32); break;
		case 7: q->count = rinteresting(&t->r); break;
		case 8: q->peer = rval32(&t->r); break;
		case 9: q->resv = rval32(&t->r); break;
		case 10: q->comm_id = rval32(&t->r); break;
		default:
			switch (rn(&t->r, 5)) {
			case 0: q->send_addr = pick_addr(t, 64, false); break;
			case 1: q->recv_addr = pick_addr(t, 64, false); break;
			case 2: q->send_mr = rval32(&t->r); break;
			case 3: q->recv_mr = rval32(&t->r); break;
			default: q->timeout_ms = rval32(&t->r); break;
			}
		}
	}
}

/* One descriptor for @s; *@v is what the reference expects of it. */
static void gen_sqe(struct tstate *t, struct slot *s, struct kcoll_sqe *q,
		    bool priv)
{
	enum kcoll_ref_verdict v;
	int exp = EXP_ANY;
	uint32_t r = rn(&t->r, 100);

	memset(q, 0, sizeof(*q));
	if (r < 30) {
		q->opcode = KCOLL_OP_NOP;
	} else if (r < 50) {
		q->opcode = KCOLL_OP_DELAY;
		/* Short delays; the CQ fills with long ones otherwise. */
		q->count = one_in(&t->r, 300) ? rn(&t->r, KCOLL_DELAY_MAX_US + 1) :
			   one_in(&t->r, 20) ? rn(&t->r, 20000) : rn(&t->r, 2000);
		if (priv && q->count > 5000)
			q->count = 5000;
	} else if (r < 97) {
		gen_coll(t, s, q, KCOLL_OP_ALLREDUCE + rn(&t->r, KCOLL_OP_LAST -
							   KCOLL_OP_ALLREDUCE), priv);
	} else {
		q->opcode = KCOLL_OP_LAST + rn(&t->r, 245);
	}
	if (one_in(&t->r, 4))
		mutate_sqe(t, q);
	v = kcoll_ref_sqe(q);
	if (v != KCOLL_REF_VALID)
		exp = EXP_REF;
	else if ((q->opcode == KCOLL_OP_NOP || q->opcode == KCOLL_OP_DELAY) &&
		 q->prio > g_prio_max)
		exp = EXP_EPERM;	/* a priority nobody may use */
	else if (q->opcode == KCOLL_OP_NOP || q->opcode == KCOLL_OP_DELAY)
		exp = EXP_ZERO;		/* NOP, and a DELAY not cancelled */
	q->user_data = priv ? tag(t, exp, v) : rnd(&t->r);
}

/* ------------------------------------------------------------------ */
/* Rings                                                               */
/* ------------------------------------------------------------------ */

/* Write @n descriptors at the application tail and publish it. */
static void ring_push(struct slot *s, const struct ringview *v,
		      const struct kcoll_sqe *q, uint32_t n)
{
	uint32_t tail = LD(s->ltail), head, i;

	head = __atomic_load_n(RU32(v, sq_head), __ATOMIC_ACQUIRE);
	if (tail - head > v->sqn)
		tail = head;		/* lost track (corruption, reopen) */
	for (i = 0; i < n; i++) {
		uint32_t idx = (tail + i) & (v->sqn - 1);

		memcpy(v->b + v->sqes + (size_t)idx * sizeof(*q), &q[i],
		       sizeof(*q));
	}
	__atomic_store_n(RU32(v, sq_tail), tail + n, __ATOMIC_RELEASE);
	ST(s->ltail, tail + n);
}

struct gpush {
	struct slot *s;
	const struct ringview *v;
	const struct kcoll_sqe *q;
	uint32_t n;
};

static void gpush_fn(void *arg)
{
	struct gpush *g = arg;

	ring_push(g->s, g->v, g->q, g->n);
}

static bool gpush(struct tstate *t, struct slot *s, const struct ringview *v,
		  const struct kcoll_sqe *q, uint32_t n)
{
	struct gpush g = { s, v, q, n };

	return guarded(t, gpush_fn, &g);
}

#define DRAIN_MAX	256

/* Copy up to DRAIN_MAX ready CQEs out and release them. Returns how many,
 * or -1 if the indices are corrupt (then the head is reset to the tail). */
static int ring_pop(const struct ringview *v, struct kcoll_cqe *out)
{
	uint32_t head = __atomic_load_n(RU32(v, cq_head), __ATOMIC_RELAXED);
	uint32_t tail = __atomic_load_n(RU32(v, cq_tail), __ATOMIC_ACQUIRE);
	uint32_t n = tail - head, i;

	if (n > v->cqn) {
		__atomic_store_n(RU32(v, cq_head), tail, __ATOMIC_RELEASE);
		return -1;
	}
	if (n > DRAIN_MAX)
		n = DRAIN_MAX;
	for (i = 0; i < n; i++)
		memcpy(&out[i], v->b + v->cqes +
		       (size_t)((head + i) & (v->cqn - 1)) * sizeof(*out),
		       sizeof(*out));
	__atomic_store_n(RU32(v, cq_head), head + n, __ATOMIC_RELEASE);
	return (int)n;
}

struct gpop {
	const struct ringview *v;
	struct kcoll_cqe *out;
	int n;
};

static void gpop_fn(void *arg)
{
	struct gpop *g = arg;

	g->n = ring_pop(g->v, g->out);
}

/* ring_pop() of memory that may vanish: false if it faulted. */
static bool gpop(struct tstate *t, const struct ringview *v,
		 struct kcoll_cqe *out, int *n)
{
	struct gpop g = { v, out, 0 };

	if (!guarded(t, gpop_fn, &g))
		return false;
	*n = g.n;
	return true;
}

static void check_cqe(struct tstate *t, const struct kcoll_cqe *c)
{
	uint64_t ud = c->user_data;
	int exp = (ud >> 44) & 0xf;
	enum kcoll_ref_verdict v = (ud >> 40) & 0xf;

	if (ud >> 48 != TAG_MAGIC)
		return;
	t->checked++;
	if (exp == EXP_ZERO && c->res != 0)
		unexpected(t, "valid NOP/DELAY (user_data %#llx) completed with %d",
			   (unsigned long long)ud, c->res);
	if (exp == EXP_EPERM && c->res != -EPERM)
		unexpected(t, "valid NOP/DELAY with priority above prio_max_unpriv %u, without CAP_SYS_NICE (user_data %#llx), completed with %d",
			   g_prio_max, (unsigned long long)ud, c->res);
	if (exp == EXP_REF && !kcoll_ref_res_ok(v, c->res))
		unexpected(t, "invalid SQE (reference: %s, user_data %#llx) completed with %d",
			   v == KCOLL_REF_EINVAL ? "-EINVAL" :
			   v == KCOLL_REF_ERANGE ? "-ERANGE" : "-EINVAL/-ERANGE",
			   (unsigned long long)ud, c->res);
}

/* Reap what is ready on @s; checks CQEs of the private slot. */
static void ring_drain(struct tstate *t, struct slot *s)
{
	struct kcoll_cqe c[DRAIN_MAX];
	struct ringview v;
	int n = 0, i, rounds = 8;
	bool priv = !s->shared;

	if (!ring_view(s, &v))
		return;
	while (rounds--) {
		if (!gpop(t, &v, c, &n))
			return;
		if (n < 0) {
			if (priv)
				t->acct.valid = false;
			return;
		}
		if (!n)
			return;
		t->cqes += n;
		if (!priv)
			continue;
		/* Past a corrupted tail, slots the kernel may be filling
		 * are read too: a torn CQE is no finding. */
		for (i = 0; t->acct.valid && i < n; i++)
			check_cqe(t, &c[i]);
		t->acct.reaped += n;
		if (t->acct.valid && t->acct.reaped > t->acct.consumed)
			unexpected(t, "%llu CQEs reaped but only %llu SQEs consumed",
				   (unsigned long long)t->acct.reaped,
				   (unsigned long long)t->acct.consumed);
	}
}

/* ENTER with random arguments around @n queued SQEs. */
static long do_enter(struct tstate *t, struct slot *s, uint32_t n, bool wait)
{
	struct kcoll_enter e = { .to_submit = n };
	uint32_t sqn = LD(s->sq_entries), cqn = LD(s->cq_entries);
	bool priv = !s->shared;
	int allow = 200, want;
	void *arg = &e;
	long ret;

	if (one_in(&t->r, 8)) {
		switch (rn(&t->r, 4)) {
		case 0: e.to_submit = rval32(&t->r); break;
		case 1: e.to_submit = sqn + rn(&t->r, 2); break;
		case 2: e.to_submit = 0; break;
		default: e.to_submit = rn(&t->r, n + 2); break;
		}
	}
	if (wait || one_in(&t->r, 4)) {
		e.flags = KCOLL_ENTER_GETEVENTS;
		e.min_complete = one_in(&t->r, 6) ? rval32(&t->r) % (cqn + 2) :
				 rn(&t->r, n + 1);
		/* Always a short limit, but for a rare unlimited wait that
		 * the watchdog's SIGUSR1 ends (the EINTR path). */
		e.timeout_ns = rn(&t->r, 10000000) + 1;
		if (one_in(&t->r, 2000)) {
			e.timeout_ns = 0;
			allow = 300;
		} else if (one_in(&t->r, 500)) {
			e.timeout_ns = one_in(&t->r, 2) ? ~0ULL : 1ULL << 63;
			allow = 300;
		}
	} else if (one_in(&t->r, 20)) {
		e.min_complete = rval32(&t->r);		/* EINVAL */
	}
	if (one_in(&t->r, 30)) {
		switch (rn(&t->r, 4)) {
		case 0: e.flags |= 1U << rn(&t->r, 32); break;
		case 1: e.resv0 = rval32(&t->r) | 1; break;
		case 2: e.resv[rn(&t->r, 2)] = rnd(&t->r) | 1; break;
		default: e.timeout_ns = rnd(&t->r); break;
		}
	}
	if (one_in(&t->r, 40)) {
		arg = one_in(&t->r, 3) ? (void *)(g_zone + Z_RO + RO_ENTER) :
			bad_ptr(t, sizeof(e));
	}
	ret = x_ioctl(t, LD(s->fd), KCOLL_IOC_ENTER, arg, allow);
	/* Whatever the argument was (readable garbage can be a valid
	 * ENTER), what it consumed counts. */
	if (priv && ret > 0)
		t->acct.consumed += ret;
	if (!priv || arg != (void *)&e || !LD(s->size) || LD(s->fd) < 0)
		return ret;
	/* Private and set up: kcoll_enter_check() decides -EINVAL. */
	want = kcoll_enter_check(&e, sqn, cqn);
	t->checked++;
	if (want && ret != -EINVAL)
		unexpected(t, "ENTER {%u, %u, %#x, resv0 %u, %llu} on sq %u cq %u returned %ld, expected -EINVAL",
			   e.to_submit, e.min_complete, e.flags, e.resv0,
			   (unsigned long long)e.timeout_ns, sqn, cqn, ret);
	else if (!want && ret == -EINVAL)
		unexpected(t, "ENTER {%u, %u, %#x, %llu} on sq %u cq %u returned -EINVAL",
			   e.to_submit, e.min_complete, e.flags,
			   (unsigned long long)e.timeout_ns, sqn, cqn);
	else if (ret > (long)e.to_submit)
		unexpected(t, "ENTER consumed %ld SQEs of to_submit %u",
			   ret, e.to_submit);
	return ret;
}

/* Write a batch of (mutated) descriptors into @s, ENTER, reap. */
static void act_submit(struct tstate *t, struct slot *s)
{
	struct kcoll_sqe q[32];
	struct ringview v;
	uint32_t n, i;
	bool priv = !s->shared;

	if (!ring_view(s, &v)) {
		if (LD(s->fd) >= 0 && one_in(&t->r, 4))
			do_enter(t, s, rn(&t->r, 4), false);
		return;
	}
	n = rn(&t->r, 8) + 1;
	if (one_in(&t->r, 10))
		n = rn(&t->r, 32) + 1;
	if (n > v.sqn)
		n = v.sqn;
	for (i = 0; i < n; i++)
		gen_sqe(t, s, &q[i], priv);
	if (!gpush(t, s, &v, q, n))
		return;
	t->sqes += n;
	do_enter(t, s, n, one_in(&t->r, 3));
	ring_drain(t, s);
}

/*
 * One single-rank collective on private memory, alone on the private ring:
 * it completes inside ENTER and, on one rank, every collective copies its
 * input to its output, which is checked byte for byte.
 */
static void act_checked_coll(struct tstate *t)
{
	static const uint8_t ops[] = {
		KCOLL_OP_ALLREDUCE, KCOLL_OP_REDUCE, KCOLL_OP_BROADCAST,
		KCOLL_OP_ALLGATHER, KCOLL_OP_REDUCE_SCATTER, KCOLL_OP_ALLTOALL,
	};
	struct slot *s = &t->priv;
	struct kcoll_sqe q;
	struct kcoll_cqe c[DRAIN_MAX];
	struct ringview v;
	uint32_t id = 0;
	uint64_t len;
	int i, n = 0;
	char *src, *dst;

	for (i = 0; i < MAX_IDS && !id; i++)
		if (LD(s->nranks[i]) == 1)
			id = LD(s->comms[i]);
	if (!id || !ring_view(s, &v))
		return;
	ring_drain(t, s);
	memset(&q, 0, sizeof(q));
	q.opcode = ops[rn(&t->r, sizeof(ops))];
	q.comm_id = id;
	q.dtype = rn(&t->r, KCOLL_DTYPE_LAST - 1) + 1;
	if (is_reducing(q.opcode))
		q.redop = rn(&t->r, KCOLL_REDOP_MAX) + 1;	/* not AVG */
	q.count = rn(&t->r, 3) ? rn(&t->r, 4096) + 1 : rn(&t->r, 65536) + 1;
	len = q.count * dtype_size(q.dtype);
	src = t->data + rn(&t->r, (uint32_t)(PRIV_DATA / 2 - len) + 1);
	dst = t->data + PRIV_DATA / 2 + rn(&t->r, (uint32_t)(PRIV_DATA / 2 - len) + 1);
	for (i = 0; i < (int)len; i++)
		src[i] = (char)rnd(&t->r);
	memset(dst, 0xa5, len);
	q.send_addr = (uint64_t)(uintptr_t)src;
	q.recv_addr = (uint64_t)(uintptr_t)dst;
	q.user_data = tag(t, EXP_ANY, KCOLL_REF_VALID);
	if (!gpush(t, s, &v, &q, 1))
		return;
	{
		struct kcoll_enter e = {
			.to_submit = 1, .min_complete = 1,
			.flags = KCOLL_ENTER_GETEVENTS, .timeout_ns = 10000000,
		};
		long ret = x_ioctl(t, LD(s->fd), KCOLL_IOC_ENTER, &e, 200);

		if (ret != 1)
			return;		/* CQ full, ring corrupted, ... */
		t->acct.consumed++;
	}
	if (!gpop(t, &v, c, &n) || n <= 0)
		return;
	t->acct.reaped += n;
	for (i = 0; i < n; i++) {
		check_cqe(t, &c[i]);
		if (c[i].user_data != q.user_data)
			continue;
		t->checked++;
		if (c[i].res == 0 && memcmp(src, dst, len))
			unexpected(t, "one-rank %s of %llu x dtype %u completed but the output differs from the input",
				   kcoll_op_name(q.opcode),
				   (unsigned long long)q.count, q.dtype);
		else if (c[i].res != 0)
			vlog("kcoll-fuzz: one-rank %s: %d\n",
			     kcoll_op_name(q.opcode), c[i].res);
	}
}

/* Scribble over the shared indices and fields, then let the kernel see. */
static uint32_t *corrupt_where(struct tstate *t, const struct ringview *v,
				int what)
{
	uint32_t *p;

	switch (what) {
	case 0: p = RU32(v, sq_tail); break;
	case 1: p = RU32(v, cq_head); break;
	case 2: p = RU32(v, sq_head); break;
	case 3: p = RU32(v, cq_tail); break;
	case 4: p = RU32(v, sq_mask); break;
	case 5: p = RU32(v, cq_mask); break;
	case 6: p = RU32(v, sq_entries); break;
	case 7: p = RU32(v, cq_entries); break;
	case 8: p = RU32(v, sq_flags); break;
	case 9: p = RU32(v, cq_flags); break;
	case 10:
		p = (uint32_t *)(v->b + v->sqes) + rn(&t->r, v->sqn * 16);
		break;
	default:
		p = (uint32_t *)(v->b + v->cqes) + rn(&t->r, v->cqn * 4);
		break;
	}
	return p;
}

struct gstore {
	uint32_t *p;
	uint32_t v;
};

static void gstore_fn(void *arg)
{
	struct gstore *g = arg;

	__atomic_store_n(g->p, g->v, __ATOMIC_RELEASE);
}

static bool gstore(struct tstate *t, uint32_t *p, uint32_t v)
{
	struct gstore g = { p, v };

	return guarded(t, gstore_fn, &g);
}

static void act_corrupt(struct tstate *t, struct slot *s)
{
	struct ringview v;
	uint32_t cur = 0, val, *p;
	int what;

	if (!ring_view(s, &v))
		return;
	/* The private ring keeps its descriptors and completions intact:
	 * their tags are checked. Only its indices and fields change. */
	what = rn(&t->r, s->shared ? 12 : 10);
	switch (rn(&t->r, 6)) {
	case 0: val = rval32(&t->r); break;
	case 1: val = v.sqn + rn(&t->r, 3); break;
	case 2: val = v.cqn + rn(&t->r, 3); break;
	default: val = 0; break;
	}
	p = corrupt_where(t, &v, what);
	if (what <= 3 && !gload(t, p, &cur))
		return;
	if (what <= 3 && rn(&t->r, 3))
		val = cur + (one_in(&t->r, 2) ? val : -val);
	if (what == 9 && one_in(&t->r, 2))
		val = rn(&t->r, 2);
	if (!gstore(t, p, val))
		return;
	if (!s->shared && (what == 1 || what == 3))
		t->acct.valid = false;
	do_enter(t, s, rn(&t->r, v.sqn + 1), one_in(&t->r, 4));
	ring_drain(t, s);
	/* Sometimes repair what the application owns. */
	if (one_in(&t->r, 2) && what <= 1)
		gstore(t, p, cur);
}

/* ------------------------------------------------------------------ */
/* Actions on descriptors and mappings                                 */
/* ------------------------------------------------------------------ */

static void act_query(struct tstate *t, struct slot *s)
{
	struct kcoll_query q;
	bool dirty = false;
	void *arg = &q;
	long ret;
	int fd = LD(s->fd);

	memset(&q, 0, sizeof(q));
	if (one_in(&t->r, 4)) {
		((uint8_t *)&q)[rn(&t->r, sizeof(q))] = (uint8_t)(rnd(&t->r) | 1);
		dirty = true;
	}
	if (one_in(&t->r, 8))
		arg = one_in(&t->r, 2) ? (void *)(g_zone + Z_RO + RO_QUERY) :
		      bad_ptr(t, sizeof(q));
	ret = x_ioctl(t, fd, KCOLL_IOC_QUERY, arg, 200);
	if (s->shared || fd < 0 || arg != (void *)&q)
		return;
	t->checked++;
	if (dirty && ret != -EINVAL)
		unexpected(t, "QUERY with non-zero input returned %ld", ret);
	if (!dirty && ret != 0)
		unexpected(t, "QUERY returned %ld", ret);
	if (!dirty && ret == 0 &&
	    (q.abi_version != KCOLL_ABI_VERSION ||
	     q.sqe_size != sizeof(struct kcoll_sqe) ||
	     q.cqe_size != sizeof(struct kcoll_cqe) ||
	     q.nr_ops != KCOLL_OP_LAST || q.max_sq_entries > q.max_cq_entries ||
	     (q.ops_supported & ~((1ULL << q.nr_ops) - 1)) ||
	     q.delay_max_us != KCOLL_DELAY_MAX_US ||
	     !kcoll_all_zero(q.resv, sizeof(q.resv))))
		unexpected(t, "QUERY: abi %u sqe %u cqe %u ops %u sq %u cq %u",
			   q.abi_version, q.sqe_size, q.cqe_size, q.nr_ops,
			   q.max_sq_entries, q.max_cq_entries);
}

static void act_setup(struct tstate *t, struct slot *s)
{
	if (one_in(&t->r, 2) || LD(s->fd) < 0) {
		slot_reopen(t, s);
		return;
	}
	/* Once per file: a second SETUP is -EBUSY (or -EINVAL for bad
	 * arguments, checked first). */
	pthread_mutex_lock(&s->lock);
	do_setup(t, s, LD(s->fd), !s->shared);
	pthread_mutex_unlock(&s->lock);
}

static void act_mmap(struct tstate *t, struct slot *s)
{
	uint64_t size = LD(s->size), len;
	int fd = LD(s->fd), flags = MAP_SHARED, prot = PROT_READ | PROT_WRITE;
	bool must_fail = false;
	off_t off = 0;
	long err;
	void *p;

	if (fd < 0)
		return;
	if (one_in(&t->r, 2)) {
		pthread_mutex_lock(&s->lock);
		slot_map_locked(t, s);
		pthread_mutex_unlock(&s->lock);
		return;
	}
	/* Somewhere the kernel chooses, with right or wrong arguments. */
	len = size ? size : PAGE;
	switch (rn(&t->r, 8)) {
	case 0: off = (off_t)(rn(&t->r, 16) + 1) * (off_t)PAGE; must_fail = true; break;
	case 1: len = size + PAGE * (rn(&t->r, 4) + 1); must_fail = true; break;
	case 2: if (size > PAGE) { len = size - PAGE; must_fail = true; } break;
	case 3: flags = MAP_PRIVATE; must_fail = true; break;
	case 4: prot = PROT_READ; break;
	case 5: prot = PROT_READ | PROT_WRITE | PROT_EXEC; break;
	case 6: off = (off_t)rnd(&t->r) & ~(off_t)(PAGE - 1) & 0x7fffffffffffLL; must_fail = off != 0; break;
	default: break;
	}
	if (!size)
		must_fail = true;	/* -ENXIO before SETUP */
	p = x_mmap(t, NULL, len, prot, flags, fd, off, &err);
	if (!err) {
		if (must_fail && !s->shared && t->acct.setup_known)
			unexpected(t, "mmap len %llu (ring %llu) off %lld flags %#x succeeded",
				   (unsigned long long)len, (unsigned long long)size,
				   (long long)off, flags);
		uint32_t junk;

		gload(t, p, &junk);
		/* Shrunk first, now and then: what mremap() leaves behind
		 * here is free space of the kernel's, named by nothing of
		 * ours (never so in a reservation: act_unmap()). */
		if (len > PAGE && one_in(&t->r, 4)) {
			call_begin(t, C_VMA, 1000);
			if (!call_end(t, C_VMA, mremap(p, len, len - PAGE, 0) ==
				      MAP_FAILED ? -1 : 0))
				len -= PAGE;
		}
		call_begin(t, C_MUNMAP, 1000);
		call_end(t, C_MUNMAP, munmap(p, len));
	} else if (!must_fail && !s->shared && fd >= 0 && err != -EACCES &&
		   err != -EPERM && err != -ENOMEM && t->acct.setup_known) {
		unexpected(t, "mmap of a %llu-byte ring failed: %ld",
			   (unsigned long long)size, err);
	}
	if (!s->shared)
		t->checked++;
}

/*
 * Take the ring away from under the other threads, in one of many ways.
 * None leaves a hole in the reservation, not even for a moment: an mmap
 * of another thread's could be placed in it (see map_over()).
 * An munmap() of the whole ring or of one page is therefore a mapping
 * put over it in one step (the kernel unmaps the ring's pages the same
 * way), and a shrinking mremap() is done where nothing else lives, on a
 * mapping of the kernel's choosing (act_mmap()).
 */
static void act_unmap(struct tstate *t, struct slot *s)
{
	uint64_t size = LD(s->size);
	char *b = s->res;

	pthread_mutex_lock(&s->lock);
	if (!LD(s->mapped) || !size || size > RES_SIZE) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	switch (rn(&t->r, 8)) {
	case 0: case 1:			/* the whole reservation */
		reserve(t, b, RES_SIZE);
		t->calls[C_MUNMAP]++;
		ST(s->mapped, 0);
		break;
	case 2:				/* the ring's own length */
		reserve(t, b, size);
		t->calls[C_MUNMAP]++;
		ST(s->mapped, 0);
		break;
	case 3: {			/* one page out of the middle */
		uint64_t pg = rn(&t->r, (uint32_t)(size / PAGE)) * PAGE;

		reserve(t, b + pg, PAGE);
		t->calls[C_MUNMAP]++;
		break;
	}
	case 4:				/* read-only: our writes fault */
		call_begin(t, C_VMA, 1000);
		call_end(t, C_VMA, mprotect(b, size, one_in(&t->r, 3) ? PROT_NONE : PROT_READ));
		break;
	case 5:				/* zapped: the next touch is SIGBUS */
		call_begin(t, C_VMA, 1000);
		call_end(t, C_VMA, madvise(b, size, one_in(&t->r, 2) ? MADV_DONTNEED :
					   one_in(&t->r, 2) ? MADV_DONTFORK : MADV_REMOVE));
		break;
	case 6:
		/* Grown in place: refused (a ring is VM_DONTEXPAND, and the
		 * reservation follows it). Not checked: the number may name
		 * another file by now (act_close_dup()), and then only our
		 * reservation stops it. */
		if (size >= RES_SIZE)
			break;
		call_begin(t, C_VMA, 1000);
		call_end(t, C_VMA, mremap(b, size, size + PAGE, 0) ==
			 MAP_FAILED ? -1 : 0);
		break;
	default:			/* the same ring mapped again */
		slot_map_locked(t, s);
		break;
	}
	pthread_mutex_unlock(&s->lock);
}

/* close(), dup2() and friends on a shared descriptor: other threads may be
 * inside ENTER with it. */
static void act_close_dup(struct tstate *t)
{
	struct slot *s = &g_shared[rn(&t->r, NSHARED)];
	struct slot *o = &g_shared[rn(&t->r, NSHARED)];
	int fd = LD(s->fd), nfd;

	switch (rn(&t->r, 5)) {
	case 0:				/* close, ring and all */
		pthread_mutex_lock(&s->lock);
		slot_close_locked(t, s);
		pthread_mutex_unlock(&s->lock);
		break;
	case 1:				/* close, the mapping keeps the file */
		fd = __atomic_exchange_n(&s->fd, -1, __ATOMIC_RELAXED);
		if (fd >= 0)
			x_close(t, fd);
		break;
	case 2:				/* the number moves to another file */
		if (fd < 0 || LD(o->fd) < 0 || o == s)
			return;
		call_begin(t, C_DUP, 5000);
		call_end(t, C_DUP, dup2(LD(o->fd), fd));
		break;
	case 3:				/* the file moves to another number */
		if (fd < 0)
			return;
		call_begin(t, C_DUP, 1000);
		nfd = (int)call_end(t, C_DUP, fcntl(fd, one_in(&t->r, 2) ?
						     F_DUPFD_CLOEXEC : F_DUPFD,
						     SHARED_FD_BASE));
		if (nfd < 0)
			return;
		if (__atomic_compare_exchange_n(&s->fd, &fd, nfd, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			x_close(t, fd);
		else
			x_close(t, nfd);
		break;
	default:
		slot_reopen(t, s);
		break;
	}
}

static void act_eventfd(struct tstate *t, struct slot *s)
{
	struct kcoll_eventfd e = { 0 };
	void *arg = &e;
	long ret;
	int i = rn(&t->r, 2);
	uint64_t junk;

	switch (rn(&t->r, 10)) {
	case 0: e.fd = -1; break;
	case 1: e.fd = LD(g_shared[rn(&t->r, NSHARED)].fd); break;
	case 2: e.fd = t->epfd; break;
	case 3: e.fd = (int)rval32(&t->r); break;
	case 4: e.fd = -2 - (int)rn(&t->r, 1000); break;
	case 5:				/* the eventfd goes while registered */
		call_begin(t, C_CLOSE, 1000);
		call_end(t, C_CLOSE, close(t->evfd[i]));
		t->evfd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		return;
	case 6:
		if (read(t->evfd[i], &junk, sizeof(junk)) < 0)
			t->calls[C_RW]++;
		return;
	default: e.fd = t->evfd[i]; break;
	}
	if (one_in(&t->r, 15))
		e.resv = rval32(&t->r) | 1;
	if (one_in(&t->r, 30))
		arg = bad_ptr(t, sizeof(e));
	ret = x_ioctl(t, LD(s->fd), KCOLL_IOC_EVENTFD, arg, 200);
	if (s->shared || arg != (void *)&e || LD(s->fd) < 0)
		return;
	t->checked++;
	if (e.resv && ret != -EINVAL)
		unexpected(t, "EVENTFD with resv %u returned %ld", e.resv, ret);
	else if (!e.resv && e.fd < -1 && ret != -EBADF)
		unexpected(t, "EVENTFD fd %d returned %ld, expected -EBADF", e.fd, ret);
}

/* ------------------------------------------------------------------ */
/* Communicators and registrations                                     */
/* ------------------------------------------------------------------ */

static void v4(struct kcoll_rank_addr *ra, uint32_t ip_net, uint16_t port)
{
	memset(ra, 0, sizeof(*ra));
	ra->addr[10] = 0xff;
	ra->addr[11] = 0xff;
	memcpy(ra->addr + 12, &ip_net, 4);
	ra->port = port;
}

static uint32_t pick_ip(struct tstate *t)
{
	switch (rn(&t->r, 9)) {
	case 0: return htonl(INADDR_LOOPBACK);
	case 1: return htonl(0x0a090063);		/* 10.9.0.99: nobody */
	case 2: return htonl(0x0a090002);		/* the second VM, if any */
	case 3: return 0;
	case 4: return htonl(0xffffffff);
	case 5: return htonl(0xe0000001);		/* multicast */
	case 6: return (uint32_t)rnd(&t->r);
	default: return opt.ip ? opt.ip : htonl(INADDR_LOOPBACK);
	}
}

static void slot_add_comm(struct slot *s, uint32_t id, int n)
{
	int i, k = 0;

	for (i = 0; i < MAX_IDS; i++)
		if (!LD(s->comms[i])) {
			k = i;
			break;
		}
	if (i == MAX_IDS)
		k = (int)(id % MAX_IDS);
	ST(s->nranks[k], n);
	ST(s->comms[k], id);
}

static void slot_del_comm(struct slot *s, uint32_t id)
{
	int i;

	for (i = 0; i < MAX_IDS; i++)
		if (LD(s->comms[i]) == id)
			ST(s->comms[i], 0);
}

static bool acct_has_comm(struct tstate *t, uint32_t id)
{
	int i;

	for (i = 0; id && i < PRIV_IDS; i++)
		if (t->acct.known_comms[i] == id)
			return true;
	return false;
}

static void acct_set_comm(struct tstate *t, uint32_t id, bool add)
{
	int i;

	for (i = 0; i < PRIV_IDS; i++) {
		if (add && !t->acct.known_comms[i]) {
			t->acct.known_comms[i] = id;
			return;
		}
		if (!add && t->acct.known_comms[i] == id) {
			t->acct.known_comms[i] = 0;
			return;
		}
	}
	if (add)
		t->acct.comms_exact = false;	/* table full: stop checking */
}

static void act_comm_create(struct tstate *t, struct slot *s)
{
	struct kcoll_comm_create c;
	struct kcoll_rank_addr *ra = t->ranks;
	bool must_einval = false, known = true;
	void *arg = &c;
	uint32_t i, n = 1;
	int allow, fd = LD(s->fd);
	long ret;

	memset(&c, 0, sizeof(c));
	c.uid = one_in(&t->r, 2) ? rn(&t->r, 64) + 1 : rnd(&t->r) | 1;
	for (i = 0; i < KCOLL_KEY_LEN; i++)
		c.key[i] = (uint8_t)rn(&t->r, 3);
	switch (rn(&t->r, 20)) {
	case 0: case 1: case 2:		/* several ranks, nobody answers */
		n = rn(&t->r, 7) + 2;
		if (one_in(&t->r, 30))
			n = rn(&t->r, 64) + 2;
		if (one_in(&t->r, 1500))
			n = KCOLL_MAX_RANKS;
		c.rank = one_in(&t->r, 2) ? 0 : rn(&t->r, n);
		for (i = 0; i < n; i++)
			v4(&ra[i], pick_ip(t), one_in(&t->r, 4) ? (uint16_t)rnd(&t->r) : 0);
		c.timeout_ms = rn(&t->r, 200) + 1;
		break;
	case 3:				/* a table with a bad entry */
		n = rn(&t->r, 4) + 1;
		c.rank = rn(&t->r, n);
		for (i = 0; i < n; i++)
			v4(&ra[i], pick_ip(t), 0);
		i = rn(&t->r, n);
		if (one_in(&t->r, 2))
			ra[i].resv = rval32(&t->r) | 1;
		else
			ra[i].addr[rn(&t->r, 12)] ^= 1U << rn(&t->r, 8);
		c.timeout_ms = rn(&t->r, 100) + 1;
		break;
	case 4: case 5:			/* a field that must be zero, or bad sizes */
		must_einval = true;
		v4(&ra[0], htonl(INADDR_LOOPBACK), 0);
		switch (rn(&t->r, 9)) {
		case 0: c.flags = 1U << (1 + rn(&t->r, 31)); break;
		case 1: c.resv0 = rval32(&t->r) | 1; break;
		case 2: c.resv[rn(&t->r, sizeof(c.resv) / sizeof(c.resv[0]))] = rnd(&t->r) | 1; break;
		case 7: c.parent_uid = c.uid; break;	/* its own parent */
		case 3: c.comm_id = rval32(&t->r) | 1; break;
		case 4: c.uid = 0; break;
		case 5: n = 0; break;
		case 6: n = KCOLL_MAX_RANKS + 1 + rn(&t->r, 1000000); break;
		default: c.rank = n + rn(&t->r, 5); break;
		}
		break;
	case 6:				/* the table is not there */
		c.ranks = (uint64_t)(uintptr_t)bad_ptr(t, sizeof(*ra));
		n = rn(&t->r, 3) + 1;
		c.timeout_ms = 50;
		known = false;
		break;
	case 7:
		arg = one_in(&t->r, 2) ? (void *)(g_zone + Z_RO + RO_CREATE) :
		      bad_ptr(t, sizeof(c));
		known = false;
		break;
	default:			/* one rank */
		v4(&ra[0], one_in(&t->r, 2) ? htonl(INADDR_LOOPBACK) :
			   (opt.ip ? opt.ip : htonl(INADDR_LOOPBACK)), 0);
		c.timeout_ms = rn(&t->r, 3) ? 0 : rval32(&t->r);
		break;
	}
	c.nranks = n;
	if (!c.ranks)
		c.ranks = (uint64_t)(uintptr_t)ra;
	/* Multi-rank waits end at timeout_ms (at most 200 ms here) or the
	 * default connect timeout; a signal (the watchdog's SIGUSR1) waits
	 * until then: the wait is killable only. */
	allow = n > 1 ? (int)(c.timeout_ms ? c.timeout_ms : 1000) + 1000 : 1000;
	if (n >= 1000)
		allow += 10000;
	ret = x_ioctl(t, fd, KCOLL_IOC_COMM_CREATE, arg, allow);
	if (ret == 0 && arg == (void *)&c) {
		if (!c.comm_id) {
			char link[128] = "?", path[64];
			ssize_t k;

			snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
			k = readlink(path, link, sizeof(link) - 1);
			if (k > 0)
				link[k] = 0;
			struct kcoll_comm_destroy d0 = { .comm_id = 0 };
			long dr = x_ioctl(t, fd, KCOLL_IOC_COMM_DESTROY, &d0, 5000);

			unexpected(t, "COMM_CREATE (fd %d: %s, %s slot, uid %llu rank %u nranks %u timeout %u) succeeded with comm_id 0 (COMM_DESTROY of id 0: %ld)",
				   fd, link, s->shared ? "shared" : "private",
				   (unsigned long long)c.uid, c.rank, c.nranks,
				   c.timeout_ms, dr);
		}
		slot_add_comm(s, c.comm_id, (int)n);
		if (!s->shared) {
			if (acct_has_comm(t, c.comm_id) && t->acct.comms_exact)
				unexpected(t, "COMM_CREATE returned comm_id %u, which is alive",
					   c.comm_id);
			acct_set_comm(t, c.comm_id, true);
		}
	}
	if (s->shared || fd < 0 || !known)
		return;
	t->checked++;
	if (must_einval && ret != -EINVAL)
		unexpected(t, "COMM_CREATE uid %llu rank %u nranks %u flags %#x comm_id %u returned %ld, not -EINVAL",
			   (unsigned long long)c.uid, c.rank, c.nranks, c.flags,
			   c.comm_id, ret);
}

static void act_comm_destroy(struct tstate *t, struct slot *s)
{
	struct kcoll_comm_destroy d = { 0 };
	int n, fd = LD(s->fd);
	long ret;

	void *arg = &d;

	d.comm_id = one_in(&t->r, 4) ? rval32(&t->r) : pick_comm(t, s, &n);
	if (one_in(&t->r, 20))
		d.resv = rval32(&t->r) | 1;
	if (one_in(&t->r, 40))
		arg = bad_ptr(t, sizeof(d));
	ret = x_ioctl(t, fd, KCOLL_IOC_COMM_DESTROY, arg, 5000);
	/* A bad pointer may still name a live comm, which one is not
	 * known here: the file's table is no longer exact. */
	if (arg != (void *)&d) {
		if (ret == 0 && !s->shared)
			t->acct.comms_exact = false;
		return;
	}
	if (ret == 0)
		slot_del_comm(s, d.comm_id);
	if (s->shared || fd < 0)
		return;
	t->checked++;
	if (d.resv && ret == 0)
		unexpected(t, "COMM_DESTROY with resv %u succeeded", d.resv);
	if (!d.resv && ret == 0 && t->acct.comms_exact &&
	    !acct_has_comm(t, d.comm_id))
		unexpected(t, "COMM_DESTROY of comm_id %u, never created on this file, succeeded",
			   d.comm_id);
	if (ret == 0)
		acct_set_comm(t, d.comm_id, false);
}

static void slot_add_mem(struct slot *s, uint32_t h, uint64_t a, uint64_t l)
{
	int k = (int)(h % MAX_IDS);

	ST(s->mem_addr[k], a);
	ST(s->mem_len[k], l);
	ST(s->mems[k], h);
}

static void act_dereg(struct tstate *t, struct slot *s, uint32_t h)
{
	struct kcoll_dereg_mem d = { .handle = h };
	long ret;
	int i;

	if (one_in(&t->r, 20))
		d.resv = rval32(&t->r) | 1;
	ret = x_ioctl(t, LD(s->fd), KCOLL_IOC_DEREG_MEM,
		      one_in(&t->r, 40) ? bad_ptr(t, sizeof(d)) : &d, 1000);
	if (ret == 0)
		for (i = 0; i < MAX_IDS; i++)
			if (LD(s->mems[i]) == h)
				ST(s->mems[i], 0);
	if (!s->shared && d.resv && ret == 0)
		unexpected(t, "DEREG_MEM with resv %u succeeded", d.resv);
}

static void act_reg_mem(struct tstate *t, struct slot *s)
{
	struct kcoll_reg_mem m = { 0 };
	bool must_einval = false, must_fail = false, priv = !s->shared;
	int n, k = rn(&t->r, MAX_IDS), fd = LD(s->fd);
	void *arg = &m;
	long ret;

	/* Keep the pinned total bounded: replace a live registration. */
	if (LD(s->mems[k]) && one_in(&t->r, 2)) {
		act_dereg(t, s, LD(s->mems[k]));
		return;
	}
	m.comm_id = one_in(&t->r, 8) ? rval32(&t->r) : pick_comm(t, s, &n);
	m.len = pick_len(t);
	if (m.len > (64ULL << 20) && one_in(&t->r, 2))
		m.len = rn(&t->r, 1 << 20) + 1;
	m.addr = pick_addr(t, m.len < PRIV_DATA ? m.len : 4096, priv);
	switch (rn(&t->r, 28)) {
	case 0: m.flags = 1U << (3 + rn(&t->r, 29)); must_einval = true; break;
	case 24: m.flags = KCOLL_REG_READONLY; break;	/* pinned for reading */
	case 1: m.dmabuf_fd = rval32(&t->r) | 1; must_einval = true; break;
	case 2:
		if (one_in(&t->r, 2))
			m.resv = rnd(&t->r) | 1;
		else
			m.dmabuf_off = rnd(&t->r) | 1;
		must_einval = true;
		break;
	case 3: m.handle = rval32(&t->r) | 1; must_einval = true; break;
	case 25:
		m.flags = one_in(&t->r, 2) ? KCOLL_REG_NO_CPU :
			  KCOLL_REG_DMABUF | KCOLL_REG_READONLY;
		must_einval = true;
		break;
	case 26: case 27:
		/* A dma-buf import of an fd that is none: this file, a
		 * negative one or one above any open. Never a success. (A
		 * random small one could be another thread's dma-buf of
		 * the test exporter, open for a moment.) */
		m.flags = KCOLL_REG_DMABUF |
			  (one_in(&t->r, 2) ? KCOLL_REG_NO_CPU : 0);
		m.dmabuf_fd = one_in(&t->r, 3) ? fd : one_in(&t->r, 2) ?
			      -1 - (int)rn(&t->r, 1000) :
			      1000000 + (int)rn(&t->r, 100);
		m.dmabuf_off = one_in(&t->r, 4) ? rnd(&t->r) : 0;
		must_fail = true;
		break;
	case 4: arg = one_in(&t->r, 2) ? (void *)(g_zone + Z_RO + RO_REG) :
		      bad_ptr(t, sizeof(m)); break;
	default: break;
	}
	if (!m.len && arg == (void *)&m)
		must_einval = true;
	ret = x_ioctl(t, fd, KCOLL_IOC_REG_MEM, arg, 2000);
	if (ret == 0 && arg == (void *)&m) {
		if (!m.handle)
			unexpected(t, "REG_MEM succeeded with handle 0");
		slot_add_mem(s, m.handle, m.addr, m.len);
	}
	if (!priv || fd < 0 || arg != (void *)&m)
		return;
	t->checked++;
	if (must_einval && ret != -EINVAL)
		unexpected(t, "REG_MEM flags %#x dmabuf_fd %d handle %u len %llu returned %ld, not -EINVAL",
			   m.flags, m.dmabuf_fd, m.handle, (unsigned long long)m.len, ret);
	else if (must_fail && ret == 0)
		unexpected(t, "REG_MEM of dma-buf fd %d (none) succeeded",
			   m.dmabuf_fd);
	else if (ret == 0 && t->acct.comms_exact && !acct_has_comm(t, m.comm_id))
		unexpected(t, "REG_MEM on comm_id %u, not alive on this file, succeeded",
			   m.comm_id);
}

/* COMM_ABORT / COMM_REPORT: -ENOTTY until the kernel has them. */
static void act_abort_report(struct tstate *t, struct slot *s)
{
	int n, fd = LD(s->fd);
	bool resv = one_in(&t->r, 15);
	long ret;

	if (one_in(&t->r, 2)) {
		struct kcoll_comm_abort a = { 0 };

		a.comm_id = one_in(&t->r, 4) ? rval32(&t->r) : pick_comm(t, s, &n);
		/* Unknown flags, or (valid) a revoke the peers pass on. */
		if (resv)
			a.flags = (rval32(&t->r) & ~KCOLL_ABORT_FLAGS) | 2;
		else if (one_in(&t->r, 2))
			a.flags = KCOLL_ABORT_REVOKE;
		ret = x_ioctl(t, fd, KCOLL_IOC_COMM_ABORT,
			      one_in(&t->r, 30) ? bad_ptr(t, sizeof(a)) : &a, 5000);
		if (ret == -ENOTTY)
			atomic_store(&g_abort_notty, true);
		else if (ret == 0)
			atomic_fetch_add(&g_abort_ok, 1);
		if (!s->shared && fd >= 0 && resv && ret == 0)
			unexpected(t, "COMM_ABORT with flags %#x succeeded",
				   a.flags);
	} else {
		struct kcoll_comm_report p = { 0 };
		char *end = t->data + PRIV_DATA;	/* a hole follows */

		p.comm_id = one_in(&t->r, 4) ? rval32(&t->r) : pick_comm(t, s, &n);
		/* Where the missing ranks go: our scratch with a hole after
		 * it, so an over-long copy faults instead of corrupting us. */
		switch (rn(&t->r, 5)) {
		case 0:
			p.missing_cap = rn(&t->r, 64);
			p.missing = (uint64_t)(uintptr_t)(end - 4 * (uint64_t)p.missing_cap);
			break;
		case 1:
			p.missing_cap = rval32(&t->r);
			p.missing = (uint64_t)(uintptr_t)(end - 4 * rn(&t->r, 64));
			break;
		case 2:
			p.missing_cap = rval32(&t->r);
			p.missing = (uint64_t)(uintptr_t)bad_ptr(t, 64);
			break;
		case 3:
			p.missing = (uint64_t)(uintptr_t)(end - 256);
			break;
		default:
			break;
		}
		if (resv) {
			if (one_in(&t->r, 2))
				p.resv[rn(&t->r, 2)] = rnd(&t->r) | 1;
			else
				p.resv0 = (uint16_t)(rn(&t->r, 65535) + 1);
		}
		ret = x_ioctl(t, fd, KCOLL_IOC_COMM_REPORT,
			      one_in(&t->r, 30) ? bad_ptr(t, sizeof(p)) : &p, 1000);
		if (ret == -ENOTTY)
			atomic_store(&g_report_notty, true);
		else if (ret == 0)
			atomic_fetch_add(&g_report_ok, 1);
		if (!s->shared && fd >= 0 && resv && ret == 0)
			unexpected(t, "COMM_REPORT with a reserved field set succeeded");
	}
}

/* ------------------------------------------------------------------ */
/* Everything else                                                     */
/* ------------------------------------------------------------------ */

static void act_poll(struct tstate *t)
{
	struct pollfd pfd[4];
	struct epoll_event ev;
	int i, n = rn(&t->r, 4) + 1;

	for (i = 0; i < n; i++) {
		pfd[i].fd = i == 0 ? LD(t->priv.fd) : LD(g_shared[rn(&t->r, NSHARED)].fd);
		pfd[i].events = POLLIN | POLLOUT;
	}
	switch (rn(&t->r, 4)) {
	case 0:
		ev.events = EPOLLIN | EPOLLOUT | (one_in(&t->r, 2) ? EPOLLET : 0);
		ev.data.u64 = 0;
		call_begin(t, C_POLL, 500);
		call_end(t, C_POLL, epoll_ctl(t->epfd, one_in(&t->r, 3) ? EPOLL_CTL_DEL :
					      EPOLL_CTL_ADD, pfd[n - 1].fd, &ev));
		break;
	case 1: {
		struct epoll_event out[8];

		call_begin(t, C_POLL, 500);
		call_end(t, C_POLL, epoll_wait(t->epfd, out, 8, (int)rn(&t->r, 3)));
		break;
	}
	default:
		call_begin(t, C_POLL, 500);
		call_end(t, C_POLL, poll(pfd, n, (int)rn(&t->r, 3)));
		break;
	}
}

static void act_misc(struct tstate *t, struct slot *s)
{
	static const char *const files[] = {
		"/sys/class/misc/kcoll/stats/submitted",
		"/sys/class/misc/kcoll/stats/completed",
		"/sys/class/misc/kcoll/stats/failed",
		"/sys/class/misc/kcoll/stats/rejected",
		"/sys/class/misc/kcoll/stats/contexts",
		"/sys/class/misc/kcoll/stats/inflight",
		"/sys/class/misc/kcoll/rdma_devices",
		"/sys/class/misc/kcoll/algo_ops/allreduce",
		"/sys/kernel/debug/kcoll/comms",
	};
	int fd = LD(s->fd);
	char buf[4096];
	long ret;

	switch (rn(&t->r, 6)) {
	case 0: case 1: {		/* a command the driver does not have */
		static const uint32_t sizes[] = { 0, 4, 8, 16, 24, 40, 64, 80, 128, 4095 };
		unsigned long cmd;

		do {
			cmd = _IOC(rn(&t->r, 4), one_in(&t->r, 8) ? rn(&t->r, 256) : 'k',
				   one_in(&t->r, 2) ? rn(&t->r, 12) : rn(&t->r, 256),
				   sizes[rn(&t->r, 10)]);
		} while (ioctl_kind(cmd) != C_BAD_IOCTL ||
			 _IOC_TYPE(cmd) == 'T' || _IOC_TYPE(cmd) == 'f' ||
			 _IOC_TYPE(cmd) == 0x12 || _IOC_TYPE(cmd) == 0x94 ||
			 _IOC_TYPE(cmd) == 'X');
		ret = x_ioctl(t, fd, cmd, one_in(&t->r, 2) ? t->data : bad_ptr(t, 64), 200);
		if (!s->shared && fd >= 0 && _IOC_TYPE(cmd) == 'k' && ret != -ENOTTY)
			unexpected(t, "unknown ioctl %#lx returned %ld, not -ENOTTY",
				   cmd, ret);
		break;
	}
	case 2:
		call_begin(t, C_RW, 200);
		switch (rn(&t->r, 3)) {
		case 0: call_end(t, C_RW, read(fd, buf, rn(&t->r, sizeof(buf)))); break;
		case 1: call_end(t, C_RW, write(fd, buf, rn(&t->r, sizeof(buf)))); break;
		default: call_end(t, C_RW, lseek(fd, rnd(&t->r) & 0xffff, SEEK_SET)); break;
		}
		break;
	default: {			/* statistics and debugfs, while all this runs */
		int f;

		call_begin(t, C_SYSFS, 2000);
		f = open(files[rn(&t->r, sizeof(files) / sizeof(files[0]))], O_RDONLY);
		if (f >= 0) {
			while (read(f, buf, sizeof(buf)) > 0)
				;
			close(f);
		}
		call_end(t, C_SYSFS, f);
		break;
	}
	}
}

/* Interrupt another thread's wait. */
static void act_signal(struct tstate *t)
{
	struct tstate *o = g_ts[rn(&t->r, (uint32_t)g_nts)];

	if (o && o != t && !o->done && !stopping())
		pthread_kill(o->th, SIGUSR1);
}

/* The pages buffers and registrations point at come and go. */
static void act_data(struct tstate *t)
{
	uint64_t off = rn(&t->r, Z_VOL_SZ / PAGE) * PAGE;
	uint64_t len = (uint64_t)(rn(&t->r, 16) + 1) * PAGE;
	char *p = g_zone + Z_VOL + off;

	if (off + len > Z_VOL_SZ)
		len = Z_VOL_SZ - off;
	switch (rn(&t->r, 6)) {
	case 0:			/* gone (never a hole: map_over()) */
		reserve(t, p, len);
		t->calls[C_MUNMAP]++;
		break;
	case 4:			/* shared file pages (shmem) ... */
		if (g_memfd >= 0)
			map_over(t, p, len, PROT_READ | PROT_WRITE, MAP_SHARED,
				 g_memfd, (off_t)(rn(&t->r, 16) * PAGE));
		break;
	case 5:			/* ... truncated under pins and mappings */
		if (g_memfd >= 0) {
			call_begin(t, C_VMA, 1000);
			call_end(t, C_VMA, ftruncate(g_memfd, (off_t)(rn(&t->r, 2) * 32 * PAGE)));
		}
		break;
	case 1:
		map_over(t, p, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		break;
	case 2:
		call_begin(t, C_VMA, 1000);
		call_end(t, C_VMA, mprotect(p, len, one_in(&t->r, 2) ? PROT_READ :
					    PROT_READ | PROT_WRITE));
		break;
	default:
		call_begin(t, C_VMA, 1000);
		call_end(t, C_VMA, madvise(p, len, MADV_DONTNEED));
		break;
	}
}

/* ------------------------------------------------------------------ */
/* The RDMA device comes and goes (a privileged helper process)        */
/* ------------------------------------------------------------------ */

/*
 * The fuzzing threads run as nobody (uid/gid 65534, no supplementary
 * groups, an 8 MiB RLIMIT_MEMLOCK: what any local user has). What needs
 * root runs in a helper process forked before the privileges are
 * dropped: it deletes rxe0 and adds it back at random moments, flips
 * sysfs intra_node (0: even local ranks go through the NIC), reads
 * debugfs, prints the kernel stack of a thread that does not return, and
 * watches the kernel log (/dev/kmsg) for the reports the scenario's log
 * scan fails on, so that a run says when it found one. They share one
 * page: the device's epoch, odd while it is being removed or re-added.
 * An operation that began in an epoch other than the current one, or in
 * an odd one, may fail with the errors of a lost device.
 */
struct devshare {
	_Atomic uint32_t epoch;
	_Atomic uint32_t removals, readds, klog;
	_Atomic int64_t first_klog_ms;		/* since the start; -1: none */
};

static struct devshare *g_dev;
static pid_t g_helper = -1;
static int g_helper_fd = -1;		/* requests to the helper */

static uint32_t dev_epoch(void)
{
	return g_dev ? atomic_load(&g_dev->epoch) : 0;
}

/* Nothing happened to the device since @e0 (an epoch read earlier). */
static bool dev_stable(uint32_t e0)
{
	return !(e0 & 1) && dev_epoch() == e0;
}

/* An error a communicator may end with once its device went away or its
 * peer's connection broke, its peer destroyed or closed it. */
static bool dev_err(long e)
{
	return e == -ENODEV || e == -ECONNRESET || e == -ECANCELED ||
	       e == -ETIMEDOUT || e == -EIO || e == -ENOENT || e == -ENOMEM ||
	       e == -EHOSTUNREACH || e == -ECONNREFUSED;
}

static int64_t h_t0;

static void hlog(const char *fmt, ...)
{
	char buf[600];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "kcoll-fuzz: [helper %.1f s] ",
		     (now_ns() - h_t0) / 1e9);
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(1, buf, (size_t)n) < 0)
		_exit(3);
}

static int h_sh(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static bool h_write(const char *path, const char *v)
{
	int f = open(path, O_WRONLY);
	bool ok;

	if (f < 0)
		return false;
	ok = write(f, v, strlen(v)) == (ssize_t)strlen(v);
	close(f);
	return ok;
}

static bool h_active(void)
{
	char b[64] = "";
	int f = open("/sys/class/infiniband/rxe0/ports/1/state", O_RDONLY);

	if (f < 0)
		return false;
	if (read(f, b, sizeof(b) - 1) < 0)
		b[0] = 0;
	close(f);
	return strstr(b, "ACTIVE") != NULL;
}

/* The kernel log lines tests/vm/klog-scan.sh fails on. */
#define KLOG_BAD "BUG:|WARNING:|Oops|general protection|Call Trace|KASAN|UBSAN|" \
	"refcount_t|[Ll]eak|lockdep|hung_task|blocked for more than|soft lockup|" \
	"still has objects|kernel panic|Kernel panic|BUG [^ ]+ \\(|[Oo]verwritten|" \
	"Freepointer corrupt|Object already free|[Ss]lab corruption|kmemleak|" \
	"possible circular|possible recursive|suspicious RCU"

static regex_t h_re;

static void h_klog(int kfd)
{
	char rec[2048];
	ssize_t n;

	while ((n = read(kfd, rec, sizeof(rec) - 1)) > 0) {
		char *msg = memchr(rec, ';', (size_t)n), *nl;
		unsigned long long ts = 0;

		rec[n] = 0;
		if (!msg)
			continue;
		msg++;
		nl = strchr(msg, '\n');
		if (nl)
			*nl = 0;
		if (regexec(&h_re, msg, 0, NULL, 0))
			continue;
		sscanf(rec, "%*u,%*u,%llu", &ts);
		/* printk's clock is CLOCK_MONOTONIC's (both from boot). */
		if (!atomic_fetch_add(&g_dev->klog, 1))
			atomic_store(&g_dev->first_klog_ms,
				     (int64_t)(ts / 1000) - h_t0 / 1000000);
		if (atomic_load(&g_dev->klog) <= 20)
			hlog("UNEXPECTED kernel log (printk time %.3f s, %.1f s after the start): %s",
			     ts / 1e6, ts / 1e6 - h_t0 / 1e9, msg);
	}
}

/* Until the pipe from the fuzzer closes (it is done, or dead): rxe0 goes
 * and comes back every few seconds until @secs are over, then stays. */
static void helper_main(int cmd_fd, int secs, uint64_t seed, bool remove)
{
	struct rng r = { .s = splitmix(&(uint64_t){ seed ^ 0xde7ULL }) | 1 };
	char netdev[64] = "", intra0[8] = "1", cache0[16] = "256", buf[256];
	int64_t end = h_t0 + (int64_t)secs * 1000000000LL, next;
	bool down = false, done = false;
	int kfd, f;
	FILE *p;

	regcomp(&h_re, KLOG_BAD, REG_EXTENDED | REG_NOSUB);
	kfd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (kfd >= 0)
		lseek(kfd, 0, SEEK_END);
	else
		hlog("cannot read /dev/kmsg: %s", strerror(errno));
	f = open("/sys/class/misc/kcoll/intra_node", O_RDONLY);
	if (f >= 0) {
		ssize_t n = read(f, intra0, sizeof(intra0) - 1);

		intra0[n > 0 ? n : 0] = 0;
		close(f);
	}
	f = open("/sys/class/misc/kcoll/reg_cache_mb", O_RDONLY);
	if (f >= 0) {
		ssize_t n = read(f, cache0, sizeof(cache0) - 1);

		cache0[n > 0 ? n : 0] = 0;
		close(f);
	}
	/* Which netdev rxe0 sits on: "link rxe0/1 ... netdev eth0". */
	p = remove ? popen("rdma link show rxe0/1 2>/dev/null", "r") : NULL;
	if (p) {
		if (fgets(buf, sizeof(buf), p)) {
			char *nd = strstr(buf, " netdev ");

			if (nd)
				sscanf(nd + 8, "%63s", netdev);
		}
		pclose(p);
	}
	if (remove && !netdev[0]) {
		hlog("no rxe0 (rdma link show): the device stays");
		remove = false;
	}
	if (remove) {
		h_write("/sys/class/misc/kcoll/intra_node", "0");
		hlog("rxe0 on %s comes and goes; intra_node 0", netdev);
	}
	next = h_t0 + (3000 + rn(&r, 3000)) * 1000000LL;
	for (;;) {
		struct pollfd pf[2] = { { .fd = cmd_fd, .events = POLLIN },
					{ .fd = kfd, .events = POLLIN } };
		int64_t now = now_ns();

		if (remove && !done && now >= next) {
			if (!down && now + 3000000000LL < end) {
				atomic_fetch_add(&g_dev->epoch, 1);	/* odd */
				snprintf(buf, sizeof(buf), "<6>kcoll-fuzz: deleting rxe0 (%u)\n",
					 atomic_load(&g_dev->removals) + 1);
				h_write("/dev/kmsg", buf);
				if (h_sh("rdma link delete rxe0"))
					hlog("rdma link delete rxe0 failed");
				else
					atomic_fetch_add(&g_dev->removals, 1);
				vlog("kcoll-fuzz: [helper %.1f s] rxe0 deleted\n",
				     (now_ns() - h_t0) / 1e9);
				down = true;
				next = now_ns() + (200 + rn(&r, 2000)) * 1000000LL;
			} else if (down) {
				int i;

				snprintf(buf, sizeof(buf),
					 "rdma link add rxe0 type rxe netdev %s", netdev);
				for (i = 0; i < 20 && h_sh(buf); i++)
					usleep(250000);
				for (i = 0; i < 200 && !h_active(); i++)
					usleep(50000);
				if (!h_active())
					hlog("rxe0 not ACTIVE after it was added back");
				else
					atomic_fetch_add(&g_dev->readds, 1);
				/* Mostly through the NIC; sometimes the local path. */
				h_write("/sys/class/misc/kcoll/intra_node",
					now >= end ? intra0 : one_in(&r, 4) ? "1" : "0");
				/* The registration cache on, off, or too small
				 * to hold a NIC pair's buffers (evicting). */
				h_write("/sys/class/misc/kcoll/reg_cache_mb",
					now >= end ? cache0 : one_in(&r, 3) ? "0" :
					one_in(&r, 2) ? "1" : "256");
				down = false;
				atomic_fetch_add(&g_dev->epoch, 1);	/* even */
				vlog("kcoll-fuzz: [helper %.1f s] rxe0 back\n",
				     (now_ns() - h_t0) / 1e9);
				next = now_ns() + (3000 + rn(&r, 6000)) * 1000000LL;
				if (now >= end)
					done = true;
			} else {
				next = INT64_MAX;	/* no time for another */
			}
			/* The comms' MRs and connections while this goes on. */
			f = open("/sys/kernel/debug/kcoll/comms", O_RDONLY);
			if (f >= 0) {
				char big[4096];

				while (read(f, big, sizeof(big)) > 0)
					;
				close(f);
			}
			continue;
		}
		if (remove && !done && now >= end && !down) {
			h_write("/sys/class/misc/kcoll/intra_node", intra0);
			h_write("/sys/class/misc/kcoll/reg_cache_mb", cache0);
			done = true;
		}
		if (poll(pf, kfd >= 0 ? 2 : 1, 50) < 0 && errno != EINTR)
			break;
		if (kfd >= 0)
			h_klog(kfd);
		if (pf[0].revents) {
			uint32_t tid;
			ssize_t n = read(cmd_fd, &tid, sizeof(tid));

			if (n <= 0)
				break;		/* the fuzzer is done */
			if (n == sizeof(tid)) {
				char path[64], st[2048];
				int sf;

				snprintf(path, sizeof(path), "/proc/%d/task/%u/stack",
					 (int)getppid(), tid);
				sf = open(path, O_RDONLY);
				n = sf >= 0 ? read(sf, st, sizeof(st) - 1) : -1;
				if (sf >= 0)
					close(sf);
				st[n > 0 ? n : 0] = 0;
				hlog("kernel stack of thread %u:\n%s", tid, st);
			}
		}
	}
	/* The fuzzer exited (or died): the device must be back. */
	if (remove && (down || !h_active())) {
		snprintf(buf, sizeof(buf), "rdma link add rxe0 type rxe netdev %s", netdev);
		h_sh(buf);
		for (f = 0; f < 200 && !h_active(); f++)
			usleep(50000);
		atomic_fetch_add(&g_dev->epoch, 1);
	}
	if (remove)
		h_write("/sys/class/misc/kcoll/intra_node", intra0);
	usleep(200000);
	if (kfd >= 0)
		h_klog(kfd);
	printf("kcoll-fuzz: device: rxe0 deleted %u times, added back %u times; kernel log: %u reports%s\n",
	       atomic_load(&g_dev->removals), atomic_load(&g_dev->readds),
	       atomic_load(&g_dev->klog), atomic_load(&g_dev->klog) ? " (UNEXPECTED)" : "");
	if (atomic_load(&g_dev->klog))
		printf("kcoll-fuzz: first kernel report %.1f s after the start\n",
		       atomic_load(&g_dev->first_klog_ms) / 1000.0);
	fflush(stdout);
	_exit(atomic_load(&g_dev->klog) ? 1 : 0);
}

/* Fork the helper (root), then become nobody. */
static void privileges_split(void)
{
	struct rlimit rl = { 8UL << 20, 8UL << 20 };
	int p[2];

	g_dev = mmap(NULL, sizeof(*g_dev), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (g_dev == MAP_FAILED) {
		perror("kcoll-fuzz: mmap");
		exit(2);
	}
	memset(g_dev, 0, sizeof(*g_dev));
	atomic_store(&g_dev->first_klog_ms, -1);
	h_t0 = now_ns();
	if (geteuid() != 0) {
		printf("kcoll-fuzz: not root: running as uid %d, the device stays, no kernel log watch\n",
		       (int)geteuid());
		return;
	}
	if (pipe2(p, O_CLOEXEC)) {
		perror("kcoll-fuzz: pipe");
		exit(2);
	}
	fflush(stdout);
	fflush(stderr);
	g_helper = fork();
	if (g_helper < 0) {
		perror("kcoll-fuzz: fork");
		exit(2);
	}
	if (!g_helper) {
		close(p[1]);
		helper_main(p[0], opt.seconds, opt.seed, opt.device && opt.ip);
	}
	close(p[0]);
	g_helper_fd = p[1];
	if (opt.root)
		return;
	if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
	    setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534) ||
	    getuid() != 65534 || geteuid() != 65534 || getegid() != 65534 ||
	    getgroups(0, NULL) != 0) {
		perror("kcoll-fuzz: cannot become uid 65534");
		exit(2);
	}
	/* setuid made us undumpable: /proc/self/fd readable again. */
	prctl(PR_SET_DUMPABLE, 1);
}

/* The helper ends: its exit status (1 if the kernel log reported). */
static int helper_finish(void)
{
	int64_t until = now_ns() + 60000000000LL;
	int st;
	pid_t w;

	if (g_helper < 0)
		return 0;
	close(g_helper_fd);
	g_helper_fd = -1;
	while ((w = waitpid(g_helper, &st, WNOHANG)) == 0 && now_ns() < until)
		usleep(50000);
	if (w != g_helper) {
		fprintf(stderr, "kcoll-fuzz: UNEXPECTED: the helper did not finish\n");
		return 1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* ------------------------------------------------------------------ */
/* Two ranks over the local RDMA device                                */
/* ------------------------------------------------------------------ */

/*
 * The partner thread runs rank 0 of a two-rank communicator on its own
 * descriptor; the thread that starts a session runs rank 1 on its own.
 * Jobs are handed over one at a time.
 */
enum { PJ_NONE, PJ_OPEN, PJ_CREATE, PJ_RUN, PJ_WAIT, PJ_DESTROY, PJ_CLOSE,
       PJ_REG, PJ_DEREG, PJ_BURST, PJ_BWAIT, PJ_EXIT };

/*
 * A burst (pair_burst()): the collectives one rank issues back to back
 * before it waits for any, so that the module runs them side by side
 * (sysfs colls_in_flight). At most BURST_MAX: each rank submits them one
 * ENTER at a time on its session ring (8 SQEs, 16 CQEs: pr_open()), and
 * all their CQEs fit in the CQ ring with room to spare.
 */
#define BURST_MAX	6
#define BURST_UNSENT	2	/* a res: never submitted */

struct pburst {
	int n;
	struct kcoll_sqe q[BURST_MAX];
	long res[BURST_MAX];	/* the CQE's res or ENTER's error; 1: none
				 * yet; BURST_UNSENT */
	int ord[BURST_MAX];	/* its CQE came as the burst's ord-th; -1 */
	int nord;
	int stop;		/* the op whose refusal stopped the
				 * submissions, BURST_MAX if none: read by
				 * the other rank while it waits (LD/ST) */
};

struct pring {
	int fd;
	struct kcoll_setup p;
	char *map;
	uint32_t tail;
};

static struct {
	pthread_mutex_t m;
	pthread_cond_t cv;
	int job;		/* PJ_* pending, PJ_NONE when done */
	long ret;
	struct kcoll_comm_create cc;
	struct kcoll_rank_addr ranks[2];
	struct kcoll_sqe sqe;
	struct kcoll_reg_mem reg;
	int64_t until;
	struct tstate *t;
	struct pring ring;
	pthread_mutex_t session;
	uint64_t uid_seq;
	uint32_t epoch;		/* the device's, when the session began */
	struct pburst burst[2];	/* each rank's (rank 0's run by PJ_BURST) */
	bool burst_early;	/* rank 0 stops waiting for what rank 1
				 * never issued */
} pair = {
	.m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
	.session = PTHREAD_MUTEX_INITIALIZER,
};

static long pr_open(struct tstate *t, struct pring *r)
{
	long err;
	void *m;

	memset(r, 0, sizeof(*r));
	r->fd = fd_private(t, x_open(t, O_RDWR | O_CLOEXEC));
	if (r->fd < 0)
		return r->fd;
	r->p.sq_entries = 8;
	err = x_ioctl(t, r->fd, KCOLL_IOC_SETUP, &r->p, 1000);
	if (err) {
		x_close(t, r->fd);
		r->fd = -1;
		return err;
	}
	m = x_mmap(t, NULL, r->p.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		   r->fd, 0, &err);
	if (err) {
		x_close(t, r->fd);
		r->fd = -1;
		return err;
	}
	r->map = m;
	return 0;
}

static void pr_close(struct tstate *t, struct pring *r)
{
	if (r->map) {
		call_begin(t, C_MUNMAP, 1000);
		call_end(t, C_MUNMAP, munmap(r->map, r->p.mmap_size));
	}
	if (r->fd >= 0)
		x_close(t, r->fd);
	r->map = NULL;
	r->fd = -1;
}

/* Submit one SQE: 0 or -errno. */
static long pr_submit(struct tstate *t, struct pring *r, const struct kcoll_sqe *q)
{
	uint32_t *sq_tail = (uint32_t *)(r->map + r->p.sq_off.tail);
	struct kcoll_sqe *sqes = (void *)(r->map + r->p.sq_off.sqes);
	struct kcoll_enter e = { .to_submit = 1 };
	long ret;

	sqes[r->tail & (r->p.sq_entries - 1)] = *q;
	__atomic_store_n(sq_tail, ++r->tail, __ATOMIC_RELEASE);
	ret = x_ioctl(t, r->fd, KCOLL_IOC_ENTER, &e, 1000);
	if (ret != 1)
		return ret < 0 ? ret : -EIO;
	return 0;
}

/* Wait (in 10 ms slices) for the CQE of @q until @until: its res, or 1 if
 * none came. */
static long pr_wait(struct tstate *t, struct pring *r, const struct kcoll_sqe *q,
		    int64_t until)
{
	uint32_t *cq_head = (uint32_t *)(r->map + r->p.cq_off.head);
	uint32_t *cq_tail = (uint32_t *)(r->map + r->p.cq_off.tail);
	struct kcoll_cqe *cqes = (void *)(r->map + r->p.cq_off.cqes);
	struct kcoll_enter e;

	while (now_ns() < until) {
		uint32_t h = __atomic_load_n(cq_head, __ATOMIC_RELAXED);

		while (h != __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE)) {
			struct kcoll_cqe c = cqes[h & (r->p.cq_entries - 1)];

			__atomic_store_n(cq_head, ++h, __ATOMIC_RELEASE);
			if (c.user_data == q->user_data)
				return c.res;
		}
		e = (struct kcoll_enter){ .min_complete = 1,
			.flags = KCOLL_ENTER_GETEVENTS, .timeout_ns = 10000000 };
		x_ioctl(t, r->fd, KCOLL_IOC_ENTER, &e, 300);
	}
	return 1;
}

static long pr_run(struct tstate *t, struct pring *r, const struct kcoll_sqe *q,
		   int64_t until)
{
	long ret = pr_submit(t, r, q);

	return ret ? ret : pr_wait(t, r, q, until);
}

/* Take the CQEs there are, without waiting: the burst's into res[] and
 * ord[], any other dropped (as pr_wait() does). */
static void pb_reap(struct pring *r, struct pburst *b)
{
	uint32_t *cq_head = (uint32_t *)(r->map + r->p.cq_off.head);
	uint32_t *cq_tail = (uint32_t *)(r->map + r->p.cq_off.tail);
	struct kcoll_cqe *cqes = (void *)(r->map + r->p.cq_off.cqes);
	uint32_t h = __atomic_load_n(cq_head, __ATOMIC_RELAXED);
	int i;

	while (h != __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE)) {
		struct kcoll_cqe c = cqes[h & (r->p.cq_entries - 1)];

		__atomic_store_n(cq_head, ++h, __ATOMIC_RELEASE);
		for (i = 0; i < b->n; i++)
			if (b->res[i] == 1 && c.user_data == b->q[i].user_data) {
				b->res[i] = c.res;
				b->ord[i] = b->nord++;
				break;
			}
	}
}

/* Before either rank starts (the other one reads stop meanwhile). */
static void pb_init(struct pburst *b, int n)
{
	int i;

	b->n = n;
	for (i = 0; i < BURST_MAX; i++) {
		b->res[i] = BURST_UNSENT;
		b->ord[i] = -1;
	}
	b->nord = 0;
	ST(b->stop, BURST_MAX);
}

/*
 * Submit the burst, one ENTER per SQE, without waiting in between. One
 * refused (ENTER's error, or its error CQE there when ENTER returns: the
 * module refuses a collective in the submitting call, before it takes a
 * seq) stops the rest: it took no place in the sequence, so each later
 * one would meet the peer's previous one (docs/LIBCOLL.md). Those stay
 * BURST_UNSENT, and stop says where for the peer.
 */
static void pb_submit(struct tstate *t, struct pring *r, struct pburst *b)
{
	int i;

	for (i = 0; i < b->n; i++) {
		long e = pr_submit(t, r, &b->q[i]);

		b->res[i] = e ? e : 1;
		if (!e)
			pb_reap(r, b);
		if (b->res[i] < 0) {
			ST(b->stop, i);
			break;
		}
	}
}

/*
 * Wait (in 10 ms slices) for the burst's CQEs until @until. With @peer
 * (the other rank's burst), stop early once every one still pending is at
 * or past the op that stopped the peer's submissions: the peer issued no
 * match for it, so only an abort ends it.
 */
static void pb_wait(struct tstate *t, struct pring *r, struct pburst *b,
		    int64_t until, const struct pburst *peer)
{
	struct kcoll_enter e;

	for (;;) {
		int i, stop = peer ? LD(peer->stop) : BURST_MAX;
		bool more = false;

		pb_reap(r, b);
		for (i = 0; i < b->n; i++)
			more |= b->res[i] == 1 && i < stop;
		if (!more || now_ns() >= until)
			return;
		e = (struct kcoll_enter){ .min_complete = 1,
			.flags = KCOLL_ENTER_GETEVENTS, .timeout_ns = 10000000 };
		x_ioctl(t, r->fd, KCOLL_IOC_ENTER, &e, 300);
	}
}

static void *partner_main(void *arg)
{
	struct tstate *t = arg;

	t->tid = (pid_t)syscall(SYS_gettid);
	pthread_mutex_lock(&pair.m);
	for (;;) {
		int job;
		long ret = 0;

		while (pair.job == PJ_NONE)
			pthread_cond_wait(&pair.cv, &pair.m);
		job = pair.job;
		if (job == PJ_EXIT)
			break;
		pthread_mutex_unlock(&pair.m);
		switch (job) {
		case PJ_OPEN:
			ret = pr_open(t, &pair.ring);
			break;
		case PJ_CREATE:
			pair.cc.ranks = (uint64_t)(uintptr_t)pair.ranks;
			ret = x_ioctl(t, pair.ring.fd, KCOLL_IOC_COMM_CREATE, &pair.cc,
				      (int)pair.cc.timeout_ms + 2000);
			break;
		case PJ_RUN:
			ret = pr_run(t, &pair.ring, &pair.sqe, pair.until);
			break;
		case PJ_WAIT:
			ret = pr_wait(t, &pair.ring, &pair.sqe, pair.until);
			break;
		case PJ_DESTROY: {
			struct kcoll_comm_destroy d = { .comm_id = pair.cc.comm_id };

			ret = x_ioctl(t, pair.ring.fd, KCOLL_IOC_COMM_DESTROY, &d, 10000);
			break;
		}
		case PJ_CLOSE:
			pr_close(t, &pair.ring);
			break;
		case PJ_REG:
			pair.reg.handle = 0;
			ret = x_ioctl(t, pair.ring.fd, KCOLL_IOC_REG_MEM, &pair.reg, 10000);
			break;
		case PJ_DEREG: {
			struct kcoll_dereg_mem d = { .handle = pair.reg.handle };

			ret = x_ioctl(t, pair.ring.fd, KCOLL_IOC_DEREG_MEM, &d, 10000);
			break;
		}
		case PJ_BURST:
			pb_submit(t, &pair.ring, &pair.burst[0]);
			pb_wait(t, &pair.ring, &pair.burst[0], pair.until,
				pair.burst_early ? &pair.burst[1] : NULL);
			break;
		case PJ_BWAIT:
			pb_wait(t, &pair.ring, &pair.burst[0], pair.until, NULL);
			break;
		}
		pthread_mutex_lock(&pair.m);
		pair.ret = ret;
		pair.job = PJ_NONE;
		pthread_cond_broadcast(&pair.cv);
	}
	pthread_mutex_unlock(&pair.m);
	t->done = true;
	return NULL;
}

static void pj_post(int job)
{
	pthread_mutex_lock(&pair.m);
	pair.job = job;
	pthread_cond_broadcast(&pair.cv);
	pthread_mutex_unlock(&pair.m);
}

/* Wait for the partner's job; false (and the session is abandoned) if it
 * does not finish by @until. */
static bool pj_wait(struct tstate *t, int64_t until, long *ret)
{
	struct timespec ts;
	bool ok = true;

	pthread_mutex_lock(&pair.m);
	while (pair.job != PJ_NONE) {
		int64_t left = until - now_ns();

		if (left <= 0) {
			ok = false;
			break;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&pair.cv, &pair.m, &ts);
	}
	if (ok)
		*ret = pair.ret;
	pthread_mutex_unlock(&pair.m);
	if (!ok)
		unexpected(t, "the two-rank partner did not finish its job in time");
	return ok;
}

/* The device went (or is going) away since the session began. */
static bool disturbed(void)
{
	return !dev_stable(pair.epoch);
}

/* An error a submission may be refused with that no test asked for. */
static bool refused(long e)
{
	return e == -ENOMEM || (disturbed() && dev_err(e));
}

static int32_t *i32(char *base, uint64_t off)
{
	return (int32_t *)(base + off);
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* Two blocks of @cnt elements laid out in random order with a random gap
 * (or none) between them: their displacements in @disp; the extent. */
static uint64_t vpair_lay(struct tstate *t, const uint64_t *cnt,
			  uint64_t *disp)
{
	uint64_t gap = rn(&t->r, 3) ? 0 : rn(&t->r, 64) + 1;
	int first = rn(&t->r, 2);

	disp[first] = 0;
	disp[!first] = cnt[first] + gap;
	return disp[!first] + cnt[!first];
}

/*
 * The two ranks' count tables (struct kcoll_vec) of a v-variant, agreed,
 * blocks of at most @c elements (some empty), each rank with its own
 * layout. *@snd, *@rcv: the most bytes either rank's table spans (a
 * mismatch adds one element to rank 1's first count: room for it too).
 */
static void vpair_tables(struct tstate *t, uint8_t op, uint64_t c,
			 uint64_t vt[2][8], uint64_t *snd, uint64_t *rcv)
{
	uint64_t m[2][2], e;
	int k, j;

	for (k = 0; k < 2; k++)
		for (j = 0; j < 2; j++)
			m[k][j] = one_in(&t->r, 5) ? 0 : rn(&t->r, c) + 1;
	memset(vt, 0, 2 * sizeof(vt[0]));
	*snd = *rcv = 0;
	for (k = 0; k < 2; k++) {
		switch (op) {
		case KCOLL_OP_ALLGATHERV:	/* counts, displs */
			vt[k][0] = m[0][0];
			vt[k][1] = m[1][1];
			e = vpair_lay(t, vt[k], vt[k] + 2);
			*snd = max_u64(*snd, (m[k][k] + 1) * 4);
			*rcv = max_u64(*rcv, (e + 1) * 4);
			break;
		case KCOLL_OP_REDUCE_SCATTERV:	/* counts */
			vt[k][0] = m[0][0];
			vt[k][1] = m[1][1];
			*snd = (m[0][0] + m[1][1] + 1) * 4;
			/* Room to see that nothing lands past the block. */
			*rcv = max_u64(*rcv, (max_u64(m[0][0], m[1][1]) + 17) * 4);
			break;
		default:			/* ALLTOALLV */
			for (j = 0; j < 2; j++) {
				vt[k][j] = m[k][j];	/* sendcounts */
				vt[k][4 + j] = m[j][k];	/* recvcounts */
			}
			e = vpair_lay(t, vt[k], vt[k] + 2);
			*snd = max_u64(*snd, (e + 1) * 4);
			e = vpair_lay(t, vt[k] + 4, vt[k] + 6);
			*rcv = max_u64(*rcv, (e + 1) * 4);
			break;
		}
	}
}

/*
 * Rank @k's result of a two-rank v-variant (element x of rank j's input:
 * IN(j, x)), every element of its receive region: a block's element where
 * its table puts one, untouched (0x5a) everywhere else. The first wrong
 * element's index, or -1.
 */
static int64_t vpair_check(uint8_t op, uint64_t vt[2][8], const int32_t *o,
			   uint64_t rcv, int k)
{
	const int32_t untouched = 0x5a5a5a5a;
	uint64_t x, j;

#define IN(r, x) ((int32_t)(((r) + 1) * 1000003 + (x) * 7))
	for (x = 0; x < rcv / 4; x++) {
		int32_t want = untouched;

		for (j = 0; j < 2; j++) {
			uint64_t cnt, d, src;

			switch (op) {
			case KCOLL_OP_ALLGATHERV:
				cnt = vt[k][j], d = vt[k][2 + j], src = 0;
				break;
			case KCOLL_OP_REDUCE_SCATTERV:
				cnt = j ? 0 : vt[k][k], d = 0;
				src = k ? vt[k][0] : 0;
				break;
			default:
				cnt = vt[k][4 + j], d = vt[k][6 + j];
				src = vt[j][2 + k];	/* rank j's sdispls[k] */
				break;
			}
			if (x < d || x >= d + cnt)
				continue;
			if (op == KCOLL_OP_REDUCE_SCATTERV)
				want = (int32_t)((uint32_t)IN(0, src + x) +
						 (uint32_t)IN(1, src + x));
			else
				want = IN(j, src + x - d);
		}
		if (o[x] != want)
			return (int64_t)x;
	}
#undef IN
	return -1;
}

/*
 * Both ranks' session buffers (PRIV_DATA each) registered once (REG_MEM on
 * the device): true, with rank 1's handle in *@h1 and rank 0's in
 * pair.reg.handle; false if either was refused (the other one undone) or
 * the partner is stuck (*@broken).
 */
static bool pair_reg(struct tstate *t, struct pring *mine, uint32_t id0,
		     uint32_t id1, uint32_t *h1, bool *broken)
{
	struct kcoll_reg_mem m = {
		.addr = (uint64_t)(uintptr_t)t->data, .len = PRIV_DATA,
		.comm_id = id1,
	};
	long rr0 = -1, rr1;

	pair.reg = (struct kcoll_reg_mem){
		.addr = (uint64_t)(uintptr_t)pair.t->data, .len = PRIV_DATA,
		.comm_id = id0,
	};
	pj_post(PJ_REG);
	rr1 = x_ioctl(t, mine->fd, KCOLL_IOC_REG_MEM, &m, 10000);
	if (!pj_wait(t, now_ns() + 15000000000LL, &rr0)) {
		*broken = true;
		return false;
	}
	if (rr0 || rr1) {
		/* Over RLIMIT_MEMLOCK with what other threads hold
		 * pinned (-ENOMEM), or the device went away. */
		if (!((!rr0 || rr0 == -ENOMEM || (disturbed() && dev_err(rr0))) &&
		      (!rr1 || rr1 == -ENOMEM || (disturbed() && dev_err(rr1)))))
			unexpected(t, "REG_MEM of 2 MiB on a two-rank communicator: rank 0 %ld, rank 1 %ld",
				   rr0, rr1);
		else
			vlog("kcoll-fuzz: two-rank REG_MEM: %ld/%ld\n", rr0, rr1);
		if (!rr0) {
			pj_post(PJ_DEREG);
			if (!pj_wait(t, now_ns() + 15000000000LL, &rr0))
				*broken = true;
		}
		if (!rr1) {
			struct kcoll_dereg_mem d = { .handle = m.handle };

			x_ioctl(t, mine->fd, KCOLL_IOC_DEREG_MEM, &d, 10000);
		}
		return false;
	}
	*h1 = m.handle;
	return true;
}

/* Both registrations of pair_reg() go after a completed @what: both
 * DEREG_MEMs must succeed. False if the partner is stuck (*@broken). */
static bool pair_dereg(struct tstate *t, struct pring *mine, uint32_t h1,
		       const char *what, bool *broken)
{
	struct kcoll_dereg_mem d = { .handle = h1 };
	long dr0 = -1, dr1;

	pj_post(PJ_DEREG);
	dr1 = x_ioctl(t, mine->fd, KCOLL_IOC_DEREG_MEM, &d, 10000);
	if (!pj_wait(t, now_ns() + 15000000000LL, &dr0)) {
		*broken = true;
		return false;
	}
	if (dr0 || dr1)
		unexpected(t, "DEREG_MEM after a completed two-rank %s: rank 0 %ld, rank 1 %ld",
			   what, dr0, dr1);
	return true;
}

/*
 * COMM_ABORT of rank 1's communicator @id1 while work is in flight; half
 * of them revoke (*@revoke says which: rank 0 then takes it as its own).
 * Its result, which must be 0 unless the device is going away.
 */
static long pair_abort(struct tstate *t, struct pring *mine, uint32_t id1,
		       bool *revoke)
{
	struct kcoll_comm_abort a = { .comm_id = id1 };
	long ar;

	*revoke = one_in(&t->r, 2);
	if (*revoke)
		a.flags = KCOLL_ABORT_REVOKE;
	ar = x_ioctl(t, mine->fd, KCOLL_IOC_COMM_ABORT, &a, 10000);
	if (ar && ar != -ENOTTY && !(disturbed() && dev_err(ar)))
		unexpected(t, "COMM_ABORT of a live two-rank communicator: %ld", ar);
	return ar;
}

/*
 * One matched collective (int32) on both ranks, checked. Rank 0 is the
 * partner (data in its private zone), rank 1 is @t.
 */
static bool pair_op(struct tstate *t, struct pring *mine, uint32_t id0,
		    uint32_t id1, bool *broken, bool *aborted)
{
	static const uint8_t ops[] = {
		KCOLL_OP_ALLREDUCE, KCOLL_OP_BROADCAST, KCOLL_OP_ALLGATHER,
		KCOLL_OP_REDUCE_SCATTER, KCOLL_OP_ALLTOALL, KCOLL_OP_REDUCE,
		KCOLL_OP_BARRIER, KCOLL_OP_SEND, KCOLL_OP_GATHER,
		KCOLL_OP_SCATTER, KCOLL_OP_ALLGATHERV,
		KCOLL_OP_REDUCE_SCATTERV, KCOLL_OP_ALLTOALLV,
	};
	struct tstate *p = pair.t;
	struct kcoll_sqe q0, q1;
	uint8_t op = ops[rn(&t->r, sizeof(ops))];
	uint64_t c = rn(&t->r, 3) ? rn(&t->r, 4096) + 1 : rn(&t->r, 65536) + 1;
	uint64_t snd, rcv, i, half = PRIV_DATA / 2;
	/* A count that differs between the ranks (not for a barrier, whose
	 * count must be 0: rank 1's descriptor would just be invalid). */
	bool mismatch = op != KCOLL_OP_BARRIER && one_in(&t->r, 12), ok = true;
	uint32_t variant = mismatch ? 20 : rn(&t->r, 20);	/* 20: none */
	bool abort_it = variant < 2;		/* COMM_ABORT in flight */
	bool revoke = false;			/* ... KCOLL_ABORT_REVOKE */
	bool lonely = variant == 2;		/* rank 0 never comes: timeout */
	bool close_it = variant == 3;		/* rank 1 closes in flight */
	bool retry = variant == 4;		/* rank 0 refused, then again */
	long rs = 0;
	bool reg = op != KCOLL_OP_BARRIER && one_in(&t->r, 4);
	uint32_t h1 = 0;
	int64_t until = now_ns() + 20000000000LL;
	char *b[2] = { p->data, t->data };
	long r0 = 1, r1;
	int k;
	/* The v-variants: each rank's count table (read at submission). */
	bool vop = kcoll_shape(op) && kcoll_shape(op)->vec;
	uint64_t vt[2][8];

	if (vop)
		vpair_tables(t, op, c, vt, &snd, &rcv);
	else
		coll_sizes(op, 2, c, 4, &snd, &rcv);
	memset(&q0, 0, sizeof(q0));
	q0.opcode = op;
	q0.dtype = KCOLL_DTYPE_INT32;
	q0.count = c;
	q0.redop = is_reducing(op) ? KCOLL_REDOP_SUM : 0;
	q0.peer = (op == KCOLL_OP_BROADCAST || op == KCOLL_OP_REDUCE ||
		   op == KCOLL_OP_GATHER || op == KCOLL_OP_SCATTER) ?
		  rn(&t->r, 2) : 0;
	if (op == KCOLL_OP_BARRIER) {
		q0.dtype = 0;
		q0.count = 0;
		snd = rcv = 0;
	}
	q1 = q0;
	if (op == KCOLL_OP_SEND) {	/* rank 1 sends to rank 0 */
		q0.opcode = KCOLL_OP_RECV;
		q0.peer = 1;
		q1.peer = 0;
	}
	q0.comm_id = id0;
	q1.comm_id = id1;
	for (k = 0; k < 2; k++) {
		struct kcoll_sqe *q = k ? &q1 : &q0;
		int32_t *s = i32(b[k], 0);

		for (i = 0; i < snd / 4; i++)
			s[i] = (int32_t)((k + 1) * 1000003 + i * 7);
		memset(b[k] + half, 0x5a, rcv);
		q->send_addr = snd ? (uint64_t)(uintptr_t)b[k] : 0;
		q->recv_addr = rcv ? (uint64_t)(uintptr_t)(b[k] + half) : 0;
		if (q->opcode == KCOLL_OP_SEND)
			q->recv_addr = 0;
		if (q->opcode == KCOLL_OP_RECV) {
			q->send_addr = 0;
			q->recv_addr = (uint64_t)(uintptr_t)(b[k] + half);
		}
		q->user_data = 0x9a1200000000ULL + t->seq++;
		if (vop)
			q->vec_addr = (uint64_t)(uintptr_t)vt[k];
	}
	/* Both must fail, nothing to check: a count, or for a v-variant
	 * rank 1's count of its block to rank 0 (alltoallv) or of rank 0's
	 * block (the others). */
	if (mismatch && vop)
		vt[1][0]++;
	else if (mismatch)
		q1.count = c + 1;

	/* Buffers registered once (REG_MEM on the device) on both ranks. */
	if (reg) {
		if (!pair_reg(t, mine, id0, id1, &h1, broken))
			return false;
		q0.send_mr = q0.send_addr ? pair.reg.handle : 0;
		q0.recv_mr = q0.recv_addr ? pair.reg.handle : 0;
		q1.send_mr = q1.send_addr ? h1 : 0;
		q1.recv_mr = q1.recv_addr ? h1 : 0;
	}
	if (lonely) {
		/* Only rank 1 submits, with a short operation timeout: it
		 * must end with -ETIMEDOUT, and the report must name rank 0
		 * as the one that never came. The ranks' sequences now
		 * differ: the session ends. */
		struct kcoll_comm_report rep = { .comm_id = id1, .missing_cap = 4 };
		uint32_t miss[4] = { 99, 99, 99, 99 };
		long rr;

		rep.missing = (uint64_t)(uintptr_t)miss;
		q1.timeout_ms = 100 + rn(&t->r, 400);
		r1 = pr_run(t, mine, &q1, now_ns() + 20000000000LL +
			    (int64_t)q1.timeout_ms * 1000000);
		t->pair_ops++;
		if (r1 == 1)
			unexpected(t, "two-rank %s with timeout_ms %u and no peer: no completion",
				   kcoll_op_name(op), q1.timeout_ms);
		/* -ENOMEM: its buffers over RLIMIT_MEMLOCK with what
		 * other threads hold pinned. A reduce's non-root (the root
		 * is rank 0) that sent its data eagerly is done: with lazy
		 * signatures it waits for nobody (docs/DESIGN.md). So is an
		 * eager send (at most 8 KiB: "Eager point-to-point"), and a
		 * broadcast's root whose data went eager: it returns before
		 * its confirmations ("Confirmations behind"), and their
		 * timeout goes with its next collective. */
		else if (r1 != -ETIMEDOUT && r1 != -ENOMEM &&
			 !(r1 == 0 && (op == KCOLL_OP_REDUCE ||
					op == KCOLL_OP_GATHER) && q1.peer == 0) &&
			 !(r1 == 0 && op == KCOLL_OP_BROADCAST &&
			   q1.peer == 1) &&
			 !(r1 == 0 && op == KCOLL_OP_SEND &&
			   q1.count * 4 <= KCOLL_EAGER_MAX) &&
			 !(disturbed() && dev_err(r1)))
			unexpected(t, "two-rank %s with timeout_ms %u and no peer completed with %ld, not -ETIMEDOUT",
				   kcoll_op_name(op), q1.timeout_ms, r1);
		rr = x_ioctl(t, mine->fd, KCOLL_IOC_COMM_REPORT, &rep, 1000);
		if (r1 == -ETIMEDOUT && !disturbed() &&
		    (rr || rep.reason != KCOLL_REPORT_TIMEOUT ||
		     rep.error != -ETIMEDOUT || rep.user_data != q1.user_data ||
		     rep.nmissing != 1 || miss[0] != 0 || miss[1] != 99))
			unexpected(t, "COMM_REPORT after a timeout: ret %ld reason %u error %d nmissing %u missing[0] %u user_data %#llx",
				   rr, rep.reason, rep.error, rep.nmissing, miss[0],
				   (unsigned long long)rep.user_data);
		*aborted = true;	/* the session is over */
		return false;
	}

	if (retry) {
		/*
		 * Rank 1's is in flight when rank 0's is refused at
		 * submission (an unknown dtype): that one never happened
		 * (docs/LIBCOLL.md), so rank 0 issuing it again, right,
		 * must complete both with the right data.
		 */
		long rb = 1;

		rs = pr_submit(t, mine, &q1);
		pair.sqe = q0;
		pair.sqe.dtype = 0xee;
		pair.until = until;
		pj_post(PJ_RUN);
		if (!pj_wait(t, until + 5000000000LL, &rb)) {
			*broken = true;
			return false;
		}
		if (rb != -EINVAL)
			unexpected(t, "two-rank %s with dtype 0xee on rank 0: %ld, not -EINVAL",
				   kcoll_op_name(op), rb);
	}
	pair.sqe = q0;
	pair.until = until;
	pj_post(PJ_RUN);
	if (abort_it) {
		/* COMM_ABORT while the collective is in flight: it ends here
		 * with -ECANCELED (unless it was done already), the peer's
		 * completes too, and the communicator refuses new work. */
		long ar;

		r1 = pr_submit(t, mine, &q1);
		ar = pair_abort(t, mine, id1, &revoke);
		if (!r1)
			r1 = pr_wait(t, mine, &q1, until);
		*aborted = ar == 0;
	} else if (close_it) {
		/* The file goes while its collective is in flight: the
		 * communicator dies with it, the peer's operation must end
		 * (and this one's CQE is gone with the ring). */
		pr_submit(t, mine, &q1);
		pr_close(t, mine);
		r1 = 0;
		*aborted = true;
	} else {
		r1 = retry ? (rs ?: pr_wait(t, mine, &q1, until)) :
			     pr_run(t, mine, &q1, until);
	}
	if (!pj_wait(t, until + 5000000000LL, &r0)) {
		*broken = true;
		return false;
	}
	t->pair_ops++;
	if (close_it) {
		if (r0 == 1)
			unexpected(t, "two-rank %s: rank 1 closed its descriptor, rank 0's operation did not complete in 20 s",
				   kcoll_op_name(op));
		return false;
	}
	if (*aborted && r0 != 1 && r1 != 1) {
		struct kcoll_comm_report rep = { .comm_id = id1 };
		struct kcoll_sqe b = { .opcode = KCOLL_OP_BARRIER, .comm_id = id1,
				       .user_data = 0x9a1300000000ULL + t->seq++ };
		long rr, br;

		if (r1 != 0 && r1 != -ECANCELED && r1 != -ENOMEM &&
		    !(disturbed() && dev_err(r1)))
			unexpected(t, "two-rank %s aborted on rank 1 completed there with %ld, not -ECANCELED",
				   kcoll_op_name(op), r1);
		/* Revoked: rank 0's fails alike (its BYE came before any
		 * ABORT), unless it had completed. */
		if (revoke && r0 != 0 && r0 != -ECANCELED && r0 != -ENOMEM &&
		    !(disturbed() && dev_err(r0)))
			unexpected(t, "two-rank %s revoked by rank 1 completed on rank 0 with %ld, not -ECANCELED",
				   kcoll_op_name(op), r0);
		rr = x_ioctl(t, mine->fd, KCOLL_IOC_COMM_REPORT, &rep, 1000);
		if (r1 == -ECANCELED && !disturbed() && (rr || rep.reason != KCOLL_REPORT_ABORTED ||
					 rep.error != -ECANCELED))
			unexpected(t, "COMM_REPORT after COMM_ABORT: ret %ld, reason %u, error %d",
				   rr, rep.reason, rep.error);
		br = pr_run(t, mine, &b, now_ns() + 10000000000LL);
		if (br != -ECANCELED && !(disturbed() && dev_err(br)))
			unexpected(t, "a barrier on an aborted communicator completed with %ld, not -ECANCELED",
				   br);
		return false;
	}
	if (!*aborted && ((r1 == 1 && refused(r0)) || (r0 == 1 && refused(r1)))) {
		/*
		 * Refused at submission (its buffers over RLIMIT_MEMLOCK
		 * with what other threads hold pinned, or its device gone):
		 * it never entered the sequence, and the other rank's waits
		 * for its timeout (docs/LIBCOLL.md). Giving up is rank 1's
		 * abort, which must end whichever is pending within 10 s.
		 */
		struct kcoll_comm_abort a = { .comm_id = id1 };
		int64_t by = now_ns() + 10000000000LL;
		long ar, rp;

		vlog("kcoll-fuzz: two-rank %s refused with %ld on rank %d only\n",
		     kcoll_op_name(op), r0 == 1 ? r1 : r0, r0 == 1);
		ar = x_ioctl(t, mine->fd, KCOLL_IOC_COMM_ABORT, &a, 10000);
		*aborted = true;
		if (ar && !(disturbed() && dev_err(ar))) {
			unexpected(t, "COMM_ABORT of a live two-rank communicator: %ld", ar);
			return false;
		}
		if (r1 == 1) {
			rp = pr_wait(t, mine, &q1, by);
		} else {
			pair.until = by;
			pj_post(PJ_WAIT);
			if (!pj_wait(t, by + 5000000000LL, &rp)) {
				*broken = true;
				return false;
			}
		}
		/* Rank 1's own: -ECANCELED; rank 0's: rank 1 left
		 * (-ECONNRESET, or whatever its connection's end said). Not
		 * pending, and not a success without its peer. */
		if (rp >= 0)
			unexpected(t, "two-rank %s refused on rank %d: the other's ended with %ld after rank 1's abort",
				   kcoll_op_name(op), r0 == 1, rp);
		return false;
	}
	if (r0 == 1 || r1 == 1) {
		unexpected(t, "two-rank %s count %llu%s: no completion within 20 s (rank 0: %ld, rank 1: %ld)",
			   kcoll_op_name(op), (unsigned long long)c,
			   mismatch ? " (mismatched)" : "", r0, r1);
		return false;
	}
	if (mismatch) {
		if (r0 == 0 && r1 == 0 && op != KCOLL_OP_BARRIER)
			unexpected(t, "two-rank %s with counts %llu/%llu succeeded on both ranks",
				   kcoll_op_name(op), (unsigned long long)c,
				   (unsigned long long)c + 1);
		return r0 == 0 && r1 == 0;
	}
	if (r0 || r1) {
		vlog("kcoll-fuzz: two-rank %s count %llu: %ld/%ld\n",
		     kcoll_op_name(op), (unsigned long long)c, r0, r1);
		return false;
	}
	t->pair_ok++;
	t->pair_vok += vop;
	t->pair_rok += retry;
	for (k = 0; k < 2 && vop && ok; k++) {
		int64_t x = vpair_check(op, vt, i32(b[k], half), rcv, k);

		if (x >= 0) {
			unexpected(t, "two-rank %s (table %llu %llu %llu %llu %llu %llu %llu %llu): rank %d's result is wrong at element %lld",
				   kcoll_op_name(op),
				   (unsigned long long)vt[k][0], (unsigned long long)vt[k][1],
				   (unsigned long long)vt[k][2], (unsigned long long)vt[k][3],
				   (unsigned long long)vt[k][4], (unsigned long long)vt[k][5],
				   (unsigned long long)vt[k][6], (unsigned long long)vt[k][7],
				   k, (long long)x);
			ok = false;
		}
	}
	/* Check the results (element i of rank k's input: (k+1)*1000003 + 7i). */
#define IN(k, j) ((int32_t)(((k) + 1) * 1000003 + (j) * 7))
	for (k = 0; k < 2 && ok && !vop; k++) {
		const int32_t *o = i32(b[k], half);

		for (i = 0; i < c && ok; i++) {
			int32_t want;

			switch (op) {
			case KCOLL_OP_ALLREDUCE:
				want = (int32_t)((uint32_t)IN(0, i) + (uint32_t)IN(1, i));
				break;
			case KCOLL_OP_REDUCE:
				if ((uint32_t)k != q0.peer)
					continue;
				want = (int32_t)((uint32_t)IN(0, i) + (uint32_t)IN(1, i));
				break;
			case KCOLL_OP_BROADCAST:
				want = IN(q0.peer, i);
				break;
			case KCOLL_OP_ALLGATHER:
				want = IN(0, i);
				if (o[c + i] != IN(1, i))
					ok = false;
				break;
			case KCOLL_OP_REDUCE_SCATTER:
				want = (int32_t)((uint32_t)IN(0, k * c + i) +
						 (uint32_t)IN(1, k * c + i));
				break;
			case KCOLL_OP_ALLTOALL:
				want = IN(0, k * c + i);
				if (o[c + i] != IN(1, k * c + i))
					ok = false;
				break;
			case KCOLL_OP_SEND:
				if (k != 0)
					continue;
				want = IN(1, i);
				break;
			case KCOLL_OP_GATHER:
				if ((uint32_t)k != q0.peer)
					continue;
				want = IN(0, i);
				if (o[c + i] != IN(1, i))
					ok = false;
				break;
			case KCOLL_OP_SCATTER:
				want = IN(q0.peer, k * c + i);
				break;
			default:
				continue;
			}
			if (o[i] != want)
				ok = false;
		}
		if (!ok)
			unexpected(t, "two-rank %s count %llu: rank %d's result is wrong at element %llu",
				   kcoll_op_name(op), (unsigned long long)c, k,
				   (unsigned long long)(i - 1));
	}
#undef IN
	if (reg && !pair_dereg(t, mine, h1, kcoll_op_name(op), broken))
		return false;
	return ok;
}

/*
 * Bursts: each rank issues 2 to BURST_MAX collectives back to back, then
 * waits for them all, so that they run side by side (sysfs
 * colls_in_flight, docs/DESIGN.md "Several collectives in flight"). Each
 * has its own regions of the session buffers (the same on both ranks),
 * back to back or a little apart: they share pages, never bytes, and may
 * all run at once. In half the bursts one of them is instead an in-place
 * allreduce over (part of) an earlier one's region: its output, which it
 * must read after that one wrote it, or its input, which it must not
 * write before that one read it. Either way the module must run the two
 * in order, and the results are what applying the collectives one after
 * the other gives (burst_apply()). Reductions are SUM, PROD, MIN or MAX:
 * two in-place SUMs of one region commute, so a SUM after a PROD (or the
 * reverse) also shows which ran first, not only that the second saw the
 * first's result.
 */
struct bop {
	uint8_t op;
	uint8_t redop;		/* reducing ones */
	uint32_t root;		/* broadcast */
	uint64_t c;		/* count */
	uint64_t s, r;		/* send and receive region: first int32
				 * element in each rank's buffer */
	uint64_t slen, rlen;	/* their elements */
	int over;		/* the earlier op whose region it reduces in
				 * place; -1 */
};

/* A count: eager-sized blocks (at most KCOLL_EAGER_MAX bytes) half the
 * time, else up to 64 or 256 KiB. */
static uint64_t burst_count(struct tstate *t)
{
	switch (rn(&t->r, 4)) {
	case 0: case 1: return rn(&t->r, KCOLL_EAGER_MAX / 4) + 1;
	case 2: return rn(&t->r, 16384) + 1;
	default: return rn(&t->r, 65536) + 1;
	}
}

/* A reduction of int32 (AVG is for floating point only): SUM mostly. */
static uint8_t burst_redop(struct tstate *t)
{
	static const uint8_t r[] = {
		KCOLL_REDOP_SUM, KCOLL_REDOP_SUM, KCOLL_REDOP_PROD,
		KCOLL_REDOP_MIN, KCOLL_REDOP_MAX,
	};

	return r[rn(&t->r, sizeof(r))];
}

/* Elements between two regions: none, or a few (sharing a page). */
static uint64_t burst_gap(struct tstate *t)
{
	return one_in(&t->r, 2) ? 0 : rn(&t->r, 256) + 1;
}

/* Lay out a burst in @o: its length (2..BURST_MAX); *@end: the elements
 * of each buffer it spans. */
static int burst_plan(struct tstate *t, struct bop *o, uint64_t *end)
{
	static const uint8_t ops[] = {
		KCOLL_OP_ALLREDUCE, KCOLL_OP_ALLGATHER, KCOLL_OP_BROADCAST,
		KCOLL_OP_REDUCE_SCATTER, KCOLL_OP_ALLTOALL,
	};
	const uint64_t cap = PRIV_DATA / 4;
	int n = 2 + (int)rn(&t->r, BURST_MAX - 1), i, f = -1, j = -1;
	uint64_t at = rn(&t->r, 64);

	if (one_in(&t->r, 2)) {		/* op f reuses op j's region */
		f = 1 + (int)rn(&t->r, (uint32_t)n - 1);
		j = (int)rn(&t->r, (uint32_t)f);
	}
	for (i = 0; i < n; i++) {
		struct bop *b = &o[i];
		bool in_place;

		memset(b, 0, sizeof(*b));
		b->over = -1;
		if (i == f) {
			/* Inside op j's region, which is laid out already:
			 * all of it (the same allreduce twice when j is an
			 * in-place one), or part of it. */
			const struct bop *a = &o[j];
			bool in = a->s != a->r && one_in(&t->r, 3);
			uint64_t base = in ? a->s : a->r;
			uint64_t len = in ? a->slen : a->rlen, off = 0;

			if (one_in(&t->r, 2)) {
				off = rn(&t->r, (uint32_t)len);
				len = 1 + rn(&t->r, (uint32_t)(len - off));
			}
			b->op = KCOLL_OP_ALLREDUCE;
			b->redop = one_in(&t->r, 2) ? KCOLL_REDOP_SUM :
						      KCOLL_REDOP_PROD;
			b->c = b->slen = b->rlen = len;
			b->s = b->r = base + off;
			b->over = j;
			continue;
		}
		if (i == j && one_in(&t->r, 2)) {
			b->op = KCOLL_OP_ALLREDUCE;
			in_place = true;
		} else {
			b->op = ops[rn(&t->r, sizeof(ops))];
			in_place = b->op == KCOLL_OP_ALLREDUCE && one_in(&t->r, 3);
		}
		b->redop = is_reducing(b->op) ? burst_redop(t) : 0;
		b->root = rn(&t->r, 2);
		b->c = burst_count(t);
		for (;;) {
			uint64_t g0 = burst_gap(t), g1 = burst_gap(t);

			coll_sizes(b->op, 2, b->c, 1, &b->slen, &b->rlen);
			if (at + g0 + b->slen + (in_place ? 0 : g1 + b->rlen) <= cap) {
				b->s = at + g0;
				b->r = in_place ? b->s : b->s + b->slen + g1;
				at = b->r + b->rlen;
				break;
			}
			/* No room left for that count: an eager-sized one,
			 * else the burst ends here (never before two: the
			 * largest op, an alltoall of 256 KiB blocks, takes
			 * 1 MiB of the 2, an eager-sized one 32 KiB). */
			if (b->c <= KCOLL_EAGER_MAX / 4) {
				n = i;
				break;
			}
			b->c = rn(&t->r, KCOLL_EAGER_MAX / 4) + 1;
		}
		if (i == n)
			break;
	}
	*end = at;
	return n;
}

/* @redop of two int32: sums and products wrap, as the module's do (its
 * int32 SUM and PROD run on u32: kcoll_reduce_body.h). */
static int32_t red32(uint8_t redop, int32_t a, int32_t b)
{
	switch (redop) {
	case KCOLL_REDOP_PROD:
		return (int32_t)((uint32_t)a * (uint32_t)b);
	case KCOLL_REDOP_MIN:
		return a < b ? a : b;
	case KCOLL_REDOP_MAX:
		return a > b ? a : b;
	default:
		return (int32_t)((uint32_t)a + (uint32_t)b);
	}
}

/*
 * Op @b on the model @m of both ranks' buffers (int32 elements): what its
 * receive regions hold once it completed, from what its send regions held
 * after the ops before it (@tmp: room for both ranks' outputs, so that an
 * in-place one reads its inputs before it writes).
 */
static void burst_apply(const struct bop *b, int32_t *const m[2],
			int32_t *tmp)
{
	uint64_t x, c = b->c;
	int k;

	for (k = 0; k < 2; k++) {
		int32_t *o = tmp + (uint64_t)k * b->rlen;

		for (x = 0; x < b->rlen; x++) {
			uint64_t j = x / c, y = x % c;

			switch (b->op) {
			case KCOLL_OP_ALLREDUCE:
				o[x] = red32(b->redop, m[0][b->s + x],
					     m[1][b->s + x]);
				break;
			case KCOLL_OP_ALLGATHER:	/* block j: rank j's */
				o[x] = m[j][b->s + y];
				break;
			case KCOLL_OP_BROADCAST:
				o[x] = m[b->root][b->s + x];
				break;
			case KCOLL_OP_REDUCE_SCATTER:	/* block k, reduced */
				o[x] = red32(b->redop, m[0][b->s + k * c + x],
					     m[1][b->s + k * c + x]);
				break;
			case KCOLL_OP_ALLTOALL:		/* rank j's block k */
				o[x] = m[j][b->s + k * c + y];
				break;
			}
		}
	}
	for (k = 0; k < 2; k++)
		memcpy(m[k] + b->r, tmp + (uint64_t)k * b->rlen, b->rlen * 4);
}

/* The burst in a line, for the reports: per op, its count, send and
 * receive regions (in elements), and what it reuses. */
static void burst_desc(const struct bop *o, int n, char *buf, size_t len)
{
	size_t w = 0;
	int i;

	buf[0] = 0;
	for (i = 0; i < n && w < len; i++) {
		const struct bop *b = &o[i];
		int r = snprintf(buf + w, len - w, "%s%d %s %llu @%llu>%llu",
				 i ? "; " : "", i, kcoll_op_name(b->op),
				 (unsigned long long)b->c,
				 (unsigned long long)b->s,
				 (unsigned long long)b->r);

		if (r > 0)
			w += (size_t)r;
		if (w < len && b->redop)
			w += (size_t)snprintf(buf + w, len - w, " %s",
					      b->redop == KCOLL_REDOP_SUM ? "sum" :
					      b->redop == KCOLL_REDOP_PROD ? "prod" :
					      b->redop == KCOLL_REDOP_MIN ? "min" : "max");
		if (w < len && b->op == KCOLL_OP_BROADCAST)
			w += (size_t)snprintf(buf + w, len - w, " root %u", b->root);
		if (w < len && b->over >= 0)
			w += (size_t)snprintf(buf + w, len - w, " over %d", b->over);
	}
}

/*
 * Completions in submission order (docs/DESIGN.md: a younger collective
 * that finished waits for the head): one that succeeded had the CQE of
 * every older one of its burst before its own.
 */
static void burst_order(struct tstate *t, const struct bop *o,
			const struct pburst *b, int k, const char *desc)
{
	int i, j;

	for (j = 1; j < b->n; j++) {
		if (b->res[j] != 0)
			continue;
		for (i = 0; i < j; i++)
			if (b->ord[i] < 0 || b->ord[i] > b->ord[j]) {
				unexpected(t, "two-rank burst [%s]: rank %d's op %d (%s) succeeded before op %d (%s) completed (%ld)",
					   desc, k, j, kcoll_op_name(o[j].op), i,
					   kcoll_op_name(o[i].op), b->res[i]);
				return;
			}
	}
}

/*
 * Errors no fault of the session explains: matched, valid collectives on
 * valid private memory, the device there all along, no abort. -EBADMSG
 * (signatures) or -EPROTO (the wire) would be the module mixing up two
 * collectives in flight; -EINVAL or -EFAULT, refusing good ones. Anything
 * else (-ENOMEM over RLIMIT_MEMLOCK, what a failure on the other rank
 * ends this one with) is logged, as pair_op() does.
 */
static void burst_errs(struct tstate *t, const struct bop *o,
		       const struct pburst *pb, const char *desc)
{
	int i, k;

	for (k = 0; k < 2; k++)
		for (i = 0; i < pb[k].n; i++) {
			long e = pb[k].res[i];

			if (e >= 0)
				continue;
			if (!disturbed() && (e == -EBADMSG || e == -EPROTO ||
					     e == -EINVAL || e == -EFAULT))
				unexpected(t, "two-rank burst [%s]: rank %d's op %d (%s) completed with %ld",
					   desc, k, i, kcoll_op_name(o[i].op), e);
			else
				vlog("kcoll-fuzz: two-rank burst [%s]: rank %d's op %d (%s): %ld\n",
				     desc, k, i, kcoll_op_name(o[i].op), e);
		}
}

/*
 * Rank @k's first pending op, @p, waits for a match the other rank never
 * issued: the other one's submissions stopped at or before it, or one of
 * its ops up to it was refused (as in pair_op()).
 */
static bool burst_explained(const struct pburst *pb, int k, int p)
{
	const struct pburst *o = &pb[!k];
	int i;

	if (LD(o->stop) <= p)
		return true;
	for (i = 0; i <= p && i < o->n; i++)
		if (refused(o->res[i]))
			return true;
	return false;
}

/*
 * Both ranks' buffers against the model (@m, the state before the burst)
 * after its first @f ops, those that succeeded on both ranks; the receive
 * regions of the later ones, where either rank submitted them, are not
 * looked at (they may have failed half-way). Every other element of the
 * span, gaps and send regions included, must be as the model says.
 */
static bool burst_check(struct tstate *t, const struct bop *o, int n, int f,
			const struct pburst *pb, char *const b[2],
			int32_t *const m[2], int32_t *tmp, uint64_t end,
			const char *desc)
{
	uint8_t *skip = calloc(end ? end : 1, 1);
	bool ok = true;
	uint64_t x;
	int i, k;

	if (!skip)
		return true;
	for (i = 0; i < f; i++)
		burst_apply(&o[i], m, tmp);
	for (i = f; i < n; i++)
		if (pb[0].res[i] != BURST_UNSENT || pb[1].res[i] != BURST_UNSENT)
			memset(skip + o[i].r, 1, o[i].rlen);
	for (k = 0; k < 2; k++) {
		const int32_t *got = i32(b[k], 0);

		for (x = 0; x < end; x++) {
			char where[64] = "no op's output";

			if (skip[x] || got[x] == m[k][x])
				continue;
			for (i = f - 1; i >= 0; i--)
				if (x >= o[i].r && x < o[i].r + o[i].rlen) {
					snprintf(where, sizeof(where),
						 "op %d's output +%llu", i,
						 (unsigned long long)(x - o[i].r));
					break;
				}
			unexpected(t, "two-rank burst [%s], %d of %d checked: rank %d's element %llu (%s) is %d, want %d",
				   desc, f, n, k, (unsigned long long)x, where,
				   got[x], m[k][x]);
			ok = false;
			break;
		}
	}
	free(skip);
	return ok;
}

/*
 * A burst on both ranks (int32), checked: rank 0 is the partner
 * (PJ_BURST), rank 1 is @t. The outcomes that are not a plain success
 * follow pair_op(): rank 1 aborts (or revokes) in flight now and then;
 * one rank's collective refused at submission leaves the other's pending
 * (and those after it, whose completions wait in order), which rank 1's
 * abort must end. Once one op of the burst failed on either rank, the
 * later ones may fail too; those before it are checked all the same.
 */
static bool pair_burst(struct tstate *t, struct pring *mine, uint32_t id0,
		       uint32_t id1, bool *broken, bool *aborted)
{
	struct pburst *pb = pair.burst;
	struct bop o[BURST_MAX];
	char *b[2] = { pair.t->data, t->data }, desc[400];
	int32_t *m[2] = { NULL, NULL }, *tmp = NULL;
	uint64_t end, tmax = 1, x;
	bool reg = one_in(&t->r, 4), abort_it = one_in(&t->r, 6);
	bool revoke = false, ok = false, over = false;
	uint32_t h1 = 0;
	int64_t until;
	long r0 = 1;
	int n, i, k, f, pend[2];

	n = burst_plan(t, o, &end);
	for (i = 0; i < n; i++) {
		tmax = max_u64(tmax, o[i].rlen);
		over |= o[i].over >= 0;
	}
	burst_desc(o, n, desc, sizeof(desc));
	m[0] = malloc(end * 4);
	m[1] = malloc(end * 4);
	tmp = malloc(2 * tmax * 4);
	if (!m[0] || !m[1] || !tmp)
		goto out;
	/* Inputs as pair_op()'s (element x of rank k: (k+1)*1000003 + 7x,
	 * x counted from the buffer's start, so that no two regions hold
	 * the same), receive regions 0x5a (untouched). The reusing op's
	 * region holds whatever the ops before it leave there. */
	for (k = 0; k < 2; k++)
		for (x = 0; x < end; x++)
			m[k][x] = (int32_t)((k + 1) * 1000003 + x * 7);
	for (i = 0; i < n; i++)
		if (o[i].over < 0 && o[i].s != o[i].r)
			for (k = 0; k < 2; k++)
				memset(m[k] + o[i].r, 0x5a, o[i].rlen * 4);
	for (k = 0; k < 2; k++)
		memcpy(b[k], m[k], end * 4);
	if (reg && !pair_reg(t, mine, id0, id1, &h1, broken))
		goto out;

	pb_init(&pb[0], n);
	pb_init(&pb[1], n);
	for (i = 0; i < n; i++)
		for (k = 0; k < 2; k++) {
			struct kcoll_sqe *q = &pb[k].q[i];

			memset(q, 0, sizeof(*q));
			q->opcode = o[i].op;
			q->dtype = KCOLL_DTYPE_INT32;
			q->redop = o[i].redop;
			q->count = o[i].c;
			q->peer = o[i].op == KCOLL_OP_BROADCAST ? o[i].root : 0;
			q->comm_id = k ? id1 : id0;
			q->send_addr = (uint64_t)(uintptr_t)i32(b[k], o[i].s * 4);
			q->recv_addr = (uint64_t)(uintptr_t)i32(b[k], o[i].r * 4);
			if (reg)
				q->send_mr = q->recv_mr = k ? h1 : pair.reg.handle;
			q->user_data = 0x9a1400000000ULL + t->seq++;
		}
	t->pair_bursts++;
	t->pair_bover += over;
	t->pair_bops += (uint64_t)n;

	until = now_ns() + 20000000000LL;
	pair.until = until;
	/* After an abort every op must end by itself: no early stop. */
	pair.burst_early = !abort_it;
	pj_post(PJ_BURST);
	pb_submit(t, mine, &pb[1]);
	if (abort_it) {
		/* COMM_ABORT while the burst is in flight (some done,
		 * maybe): as pair_op()'s, half of them revoking. */
		long ar;

		if (one_in(&t->r, 2))
			usleep(rn(&t->r, 3000));
		ar = pair_abort(t, mine, id1, &revoke);
		*aborted = ar == 0;
	}
	pb_wait(t, mine, &pb[1], until, abort_it ? NULL : &pb[0]);
	if (!pj_wait(t, until + 5000000000LL, &r0)) {
		*broken = true;
		goto out;
	}
	for (k = 0; k < 2; k++) {
		burst_order(t, o, &pb[k], k, desc);
		for (pend[k] = 0; pend[k] < n && pb[k].res[pend[k]] != 1; pend[k]++)
			;
	}
	for (f = 0; f < n && !pb[0].res[f] && !pb[1].res[f]; f++)
		;
	vlog("kcoll-fuzz: two-rank burst [%s]%s: %d of %d succeeded on both\n",
	     desc, abort_it ? (revoke ? ", revoked" : ", aborted") : "", f, n);

	if (*aborted) {
		struct kcoll_sqe bq = { .opcode = KCOLL_OP_BARRIER, .comm_id = id1,
					.user_data = 0x9a1300000000ULL + t->seq++ };
		long br;

		if (pend[0] < n || pend[1] < n) {
			unexpected(t, "two-rank burst [%s] %s by rank 1: no completion within 20 s (rank 0's op %d, rank 1's op %d pending)",
				   desc, revoke ? "revoked" : "aborted",
				   pend[0], pend[1]);
			goto out;
		}
		/* Rank 1's end -ECANCELED (or had completed); revoked,
		 * rank 0's too (its BYE came before any ABORT). */
		for (k = revoke ? 0 : 1; k < 2; k++)
			for (i = 0; i < n; i++) {
				long e = pb[k].res[i];

				if (e != 0 && e != BURST_UNSENT && e != -ECANCELED &&
				    e != -ENOMEM && !(disturbed() && dev_err(e)))
					unexpected(t, "two-rank burst [%s] %s by rank 1: rank %d's op %d (%s) completed with %ld, not -ECANCELED",
						   desc, revoke ? "revoked" : "aborted",
						   k, i, kcoll_op_name(o[i].op), e);
			}
		br = pr_run(t, mine, &bq, now_ns() + 10000000000LL);
		if (br != -ECANCELED && !(disturbed() && dev_err(br)))
			unexpected(t, "a barrier on an aborted communicator completed with %ld, not -ECANCELED",
				   br);
		t->pair_bok += (uint64_t)f;
		burst_check(t, o, n, f, pb, b, m, tmp, end, desc);
		goto out;
	}
	burst_errs(t, o, pb, desc);
	if (pend[0] < n || pend[1] < n) {
		/*
		 * One rank's submissions stopped at a refusal (its buffers
		 * over RLIMIT_MEMLOCK with what other threads hold pinned,
		 * or its device gone): the other's matching op and those
		 * after it wait for their timeout. Rank 1's abort must end
		 * them within 10 s, none of them a success without its
		 * peer (pair_op()).
		 */
		struct kcoll_comm_abort a = { .comm_id = id1 };
		int64_t by = now_ns() + 10000000000LL;
		long ar;

		for (k = 0; k < 2; k++)
			if (pend[k] < n && !burst_explained(pb, k, pend[k])) {
				unexpected(t, "two-rank burst [%s]: no completion within 20 s (rank 0's op %d, rank 1's op %d pending; stopped at %d and %d)",
					   desc, pend[0], pend[1], LD(pb[0].stop),
					   LD(pb[1].stop));
				goto out;
			}
		ar = x_ioctl(t, mine->fd, KCOLL_IOC_COMM_ABORT, &a, 10000);
		*aborted = true;
		if (ar && !(disturbed() && dev_err(ar))) {
			unexpected(t, "COMM_ABORT of a live two-rank communicator: %ld", ar);
			goto out;
		}
		if (pend[1] < n)
			pb_wait(t, mine, &pb[1], by, NULL);
		if (pend[0] < n) {
			pair.until = by;
			pj_post(PJ_BWAIT);
			if (!pj_wait(t, by + 5000000000LL, &r0)) {
				*broken = true;
				goto out;
			}
		}
		/* Not pending any more, nor a success without its peer;
		 * but the op where the peer's submissions stopped may have
		 * been one the peer's rank failed after it took a seq (not
		 * refused): this rank's may then have completed. */
		for (k = 0; k < 2; k++)
			for (i = pend[k]; i < n; i++)
				if (pb[k].res[i] >= 0 && pb[k].res[i] != BURST_UNSENT &&
				    !(pb[k].res[i] == 0 && i == LD(pb[!k].stop)))
					unexpected(t, "two-rank burst [%s]: rank %d's op %d (%s), pending after a refusal, ended with %ld after rank 1's abort",
						   desc, k, i, kcoll_op_name(o[i].op),
						   pb[k].res[i]);
		t->pair_bok += (uint64_t)f;
		burst_check(t, o, n, f, pb, b, m, tmp, end, desc);
		goto out;
	}
	t->pair_bok += (uint64_t)f;
	ok = burst_check(t, o, n, f, pb, b, m, tmp, end, desc) && f == n;
	if (f == n && reg && !pair_dereg(t, mine, h1, "burst", broken))
		ok = false;
out:
	free(m[0]);
	free(m[1]);
	free(tmp);
	return ok;
}

static void act_pair(struct tstate *t)
{
	static _Atomic int64_t next_session;
	struct pring mine = { .fd = -1 };
	struct kcoll_comm_create c;
	int64_t until;
	uint32_t id0 = 0, id1 = 0;
	bool broken = false, wrong_key, aborted = false, bursts;
	long r0 = -1, r1;
	int i, nops;

	if (!opt.pairs || !opt.ip || now_ns() < atomic_load(&next_session) ||
	    pthread_mutex_trylock(&pair.session))
		return;
	atomic_store(&next_session, now_ns() + 1000000000LL);
	t->pair_sessions++;
	pair.epoch = dev_epoch();
	until = now_ns() + 10000000000LL;
	pj_post(PJ_OPEN);
	/* The partner's open is waited for even if ours failed: a job
	 * posted over it would leave its ring open. */
	r1 = pr_open(t, &mine);
	if (!pj_wait(t, until, &r0)) {
		broken = true;
		goto out_close;
	}
	if (r1 || r0)
		goto out_close;
	wrong_key = one_in(&t->r, 10);
	memset(&pair.cc, 0, sizeof(pair.cc));
	pair.cc.uid = 0xfa1700000000ULL + ++pair.uid_seq;
	for (i = 0; i < KCOLL_KEY_LEN; i++)
		pair.cc.key[i] = (uint8_t)rnd(&t->r);
	pair.cc.nranks = 2;
	pair.cc.rank = 0;
	pair.cc.timeout_ms = wrong_key ? 1000 : 8000;
	v4(&pair.ranks[0], opt.ip, 0);
	v4(&pair.ranks[1], opt.ip, 0);
	c = pair.cc;
	c.rank = 1;
	c.ranks = (uint64_t)(uintptr_t)pair.ranks;
	if (wrong_key)
		c.key[0] ^= 0xff;
	pj_post(PJ_CREATE);
	r1 = x_ioctl(t, mine.fd, KCOLL_IOC_COMM_CREATE, &c, (int)c.timeout_ms + 2000);
	if (!pj_wait(t, now_ns() + 15000000000LL, &r0)) {
		broken = true;
		goto out_close;
	}
	if (wrong_key) {
		if (r0 == 0 || r1 == 0)
			unexpected(t, "two-rank COMM_CREATE with different keys: rank 0 %ld, rank 1 %ld",
				   r0, r1);
	} else if (r0 || r1) {
		vlog("kcoll-fuzz: two-rank COMM_CREATE: %ld/%ld\n", r0, r1);
	}
	if (!r0)
		id0 = pair.cc.comm_id;
	if (!r1)
		id1 = c.comm_id;
	if (!id0 || !id1)
		goto out_destroy;
	/* One session in three issues bursts (pair_burst()), with a
	 * single collective between them now and then. */
	bursts = one_in(&t->r, 3);
	nops = rn(&t->r, 6) + 1;
	for (i = 0; i < nops && !stopping() && !broken; i++)
		if (!(bursts && !one_in(&t->r, 3) ?
		      pair_burst(t, &mine, id0, id1, &broken, &aborted) :
		      pair_op(t, &mine, id0, id1, &broken, &aborted)))
			break;
	/* Sometimes leave the communicators to the file's release. */
	if (one_in(&t->r, 3))
		goto out_close;
out_destroy:
	if (id1) {
		struct kcoll_comm_destroy d = { .comm_id = id1 };

		x_ioctl(t, mine.fd, KCOLL_IOC_COMM_DESTROY, &d, 10000);
	}
	if (id0 && !broken) {
		pj_post(PJ_DESTROY);
		broken = !pj_wait(t, now_ns() + 15000000000LL, &r0);
	}
out_close:
	pr_close(t, &mine);
	if (!broken) {
		pj_post(PJ_CLOSE);
		broken = !pj_wait(t, now_ns() + 15000000000LL, &r0);
	}
	if (broken)
		opt.pairs = 0;		/* the partner is stuck: no more sessions */
	pthread_mutex_unlock(&pair.session);
}

/* ------------------------------------------------------------------ */
/* Teardown against submissions that hold registrations                */
/* ------------------------------------------------------------------ */

/*
 * Two ranks of one communicator on two descriptors of this process:
 * rank 0's COMM_CREATE in a short-lived thread, rank 1's here. Both
 * rings must be open. 0, or the first error.
 */
struct mk2 {
	int fd;
	struct kcoll_comm_create c;
	long ret;
};

static void *mk2_fn(void *arg)
{
	struct mk2 *m = arg;

	m->ret = ioctl(m->fd, KCOLL_IOC_COMM_CREATE, &m->c) ? -errno : 0;
	return NULL;
}

static long make_pair(struct tstate *t, struct pring *r, uint32_t id[2],
		      uint32_t timeout_ms)
{
	static _Atomic uint64_t seq;
	struct kcoll_rank_addr *ra = calloc(2, sizeof(*ra));
	struct mk2 m0 = { .fd = r[0].fd };
	struct kcoll_comm_create c;
	pthread_t th;
	long r1;
	int i;

	if (!ra)
		return -ENOMEM;
	v4(&ra[0], opt.ip, 0);
	v4(&ra[1], opt.ip, 0);
	ra[1].local_index = 1;
	memset(&c, 0, sizeof(c));
	c.uid = 0xfb1600000000ULL + atomic_fetch_add(&seq, 1) * 64 + (uint64_t)t->id;
	for (i = 0; i < KCOLL_KEY_LEN; i++)
		c.key[i] = (uint8_t)rnd(&t->r);
	c.nranks = 2;
	c.timeout_ms = timeout_ms;
	c.ranks = (uint64_t)(uintptr_t)ra;
	m0.c = c;
	c.rank = 1;
	if (pthread_create(&th, NULL, mk2_fn, &m0)) {
		free(ra);
		return -EAGAIN;
	}
	r1 = x_ioctl(t, r[1].fd, KCOLL_IOC_COMM_CREATE, &c, (int)timeout_ms + 2000);
	pthread_join(th, NULL);
	t->calls[C_COMM_CREATE]++;
	free(ra);
	id[0] = m0.ret ? 0 : m0.c.comm_id;
	id[1] = r1 ? 0 : c.comm_id;
	return m0.ret ? m0.ret : r1;
}

/* The submitter of a race: allreduces, one registered buffer and one
 * large unregistered one, back to back until told to stop. */
struct racer {
	struct tstate *t;
	struct pring *r;
	char *map;			/* r->map, which may be unmapped */
	int fd;				/* r->fd, which may become /dev/null */
	uint32_t comm, handle;
	bool send_side, closes;
	char *reg, *buf;
	uint64_t len;
	int64_t until;
	atomic_bool stop;
	long bad;
	uint64_t sub, comp, enters;
	bool gone;			/* ENTER said the descriptor is gone */
};

struct gsqe {
	struct kcoll_sqe *dst;
	const struct kcoll_sqe *src;
	uint32_t *tail;
	uint32_t v;
};

static void gsqe_fn(void *arg)
{
	struct gsqe *g = arg;

	*g->dst = *g->src;
	__atomic_store_n(g->tail, g->v, __ATOMIC_RELEASE);
}

/* Reap and check; the ring may be unmapped under it (guarded). */
static void racer_reap_fn(void *arg)
{
	struct racer *k = arg;
	char *map = k->map;
	struct pring *r = k->r;
	uint32_t *cq_head = (uint32_t *)(map + r->p.cq_off.head);
	uint32_t *cq_tail = (uint32_t *)(map + r->p.cq_off.tail);
	struct kcoll_cqe *cqes = (void *)(map + r->p.cq_off.cqes);
	uint32_t h, tl;

	for (;;) {
		struct kcoll_cqe c;

		h = __atomic_load_n(cq_head, __ATOMIC_RELAXED);
		tl = __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE);
		if (h == tl)
			return;
		c = cqes[h & (r->p.cq_entries - 1)];
		__atomic_store_n(cq_head, h + 1, __ATOMIC_RELEASE);
		k->comp++;
		if (c.res == 0 || c.res == -ECANCELED || c.res == -ENOENT ||
		    c.res == -ENOMEM || dev_err(c.res))
			;
		else if (!k->bad)
			k->bad = c.res;
		if (c.res == -ENOENT)
			atomic_store(&k->stop, true);	/* the comm is gone */
	}
}

static void racer_reap(struct racer *k)
{
	guarded(k->t, racer_reap_fn, k);
}

static void *racer_main(void *arg)
{
	struct racer *k = arg;
	struct pring *r = k->r;
	uint32_t *sq_head = (uint32_t *)(k->map + r->p.sq_off.head);
	uint32_t *sq_tail = (uint32_t *)(k->map + r->p.sq_off.tail);
	struct kcoll_sqe *sqes = (void *)(k->map + r->p.sq_off.sqes);
	uint64_t seq = 0;
	uint32_t head0 = 0;

	/*
	 * What was submitted is what the kernel consumed from this ring
	 * (its published SQ head), not what ENTER calls answered: should
	 * k->fd come to name another kcoll file (until 2026-12-05 another
	 * thread's dup2() of a stale number could do it, see
	 * SHARED_FD_BASE), its ENTER succeeds with nothing consumed here,
	 * while the completions of what this ring did submit still come
	 * here through the mapping.
	 */
	if (!gload(k->t, sq_head, &head0))
		return NULL;
	while (!atomic_load(&k->stop) && now_ns() < k->until) {
		struct kcoll_enter e = { .to_submit = 1 };
		struct kcoll_sqe q;
		uint32_t hd;
		long ret;

		if (!gload(k->t, sq_head, &hd))
			break;			/* the ring was unmapped */
		if (r->tail - hd < r->p.sq_entries) {
			struct gsqe g = { .dst = &sqes[r->tail & (r->p.sq_entries - 1)],
					  .src = &q, .tail = sq_tail, .v = r->tail + 1 };

			memset(&q, 0, sizeof(q));
			q.opcode = KCOLL_OP_ALLREDUCE;
			q.comm_id = k->comm;
			q.dtype = KCOLL_DTYPE_INT32;
			q.redop = KCOLL_REDOP_SUM;
			q.count = k->len / 4;
			q.send_addr = (uint64_t)(uintptr_t)(k->send_side ? k->reg : k->buf);
			q.recv_addr = (uint64_t)(uintptr_t)(k->send_side ? k->buf : k->reg);
			if (k->send_side)
				q.send_mr = k->handle;
			else
				q.recv_mr = k->handle;
			q.timeout_ms = 3000;
			q.user_data = 0x9ace00000000ULL + seq++;
			if (!guarded(k->t, gsqe_fn, &g))
				break;
			r->tail++;
		} else {
			e.to_submit = 0;
			e.flags = KCOLL_ENTER_GETEVENTS;
			e.min_complete = 1;
			e.timeout_ns = 10000000;
		}
		ret = ioctl(k->fd, KCOLL_IOC_ENTER, &e) ? -errno : 0;
		k->enters++;
		if (gload(k->t, sq_head, &hd))
			k->sub = hd - head0;
		if (ret == -EBADF || ret == -ENOTTY) {
			k->gone = true;		/* closed (or the number reused) */
			break;
		}
		racer_reap(k);
	}
	if (k->closes)
		return NULL;
	/* What is in flight completes too (cancelled, timed out). */
	while (k->comp < k->sub && now_ns() < k->until + 25000000000LL) {
		struct kcoll_enter e = { .flags = KCOLL_ENTER_GETEVENTS,
					 .min_complete = 1, .timeout_ns = 20000000 };

		racer_reap(k);
		if (k->comp >= k->sub)
			break;
		if (ioctl(k->fd, KCOLL_IOC_ENTER, &e) && errno == EBADF)
			break;
		k->enters++;
	}
	racer_reap(k);
	return NULL;
}

enum { RV_DESTROY, RV_ABORT, RV_CLOSE, RV_PEER_DESTROY, RV_PEER_CLOSE };

/*
 * COMM_DESTROY, COMM_ABORT, or the file's close, at a random moment,
 * against a thread submitting collectives that hold a registration (send
 * or receive) while they pin an unregistered buffer of up to 2 MiB; on a
 * one-rank communicator or on a two-rank one (then also the peer's
 * destroy or close). Every CQE must say 0 or the comm's end, everything
 * submitted must complete, and the registration must be gone or free.
 */
static void act_mr_race(struct tstate *t)
{
	static const uint64_t lens[] = { 256UL << 10, 1UL << 20, 2UL << 20 };
	struct pring r[2] = { { .fd = -1 }, { .fd = -1 } };
	struct racer *k = calloc(1, sizeof(*k));
	bool two = opt.ip && one_in(&t->r, 3);
	uint32_t id[2] = { 0, 0 }, e0 = dev_epoch();
	int v = rn(&t->r, two ? 8 : 5), li;
	struct kcoll_reg_mem m = { 0 };
	bool destroyed = false, closed = false;
	pthread_t th;
	long ret;

	if (!k)
		return;
	/* 0-2: destroy, 3: abort, 4: close, 5-6: the peer destroys, 7: closes */
	v = v < 3 ? RV_DESTROY : v == 3 ? RV_ABORT : v == 4 ? RV_CLOSE :
	    v < 7 ? RV_PEER_DESTROY : RV_PEER_CLOSE;
	if (pr_open(t, &r[1]) || (two && pr_open(t, &r[0])))
		goto out;
	if (two) {
		if (make_pair(t, r, id, 5000))
			goto out;
	} else {
		struct kcoll_comm_create c = { .nranks = 1, .uid = 0xfb1700000000ULL + t->seq++,
					       .key = { 'r', 'a', 'c', 'e' } };
		struct kcoll_rank_addr ra;

		v4(&ra, htonl(INADDR_LOOPBACK), 0);
		c.ranks = (uint64_t)(uintptr_t)&ra;
		if (x_ioctl(t, r[1].fd, KCOLL_IOC_COMM_CREATE, &c, 2000))
			goto out;
		id[1] = c.comm_id;
	}
	/* As large as the memlock limit lets it be, with what other
	 * threads hold pinned. */
	for (li = (int)rn(&t->r, 3); li >= 0; li--) {
		m = (struct kcoll_reg_mem){ .comm_id = id[1], .len = lens[li] };
		k->send_side = one_in(&t->r, 2);
		k->reg = t->big + (k->send_side ? 0 : BIG_SIZE / 2);
		k->buf = t->big + (k->send_side ? BIG_SIZE / 2 : 0);
		m.addr = (uint64_t)(uintptr_t)k->reg;
		ret = x_ioctl(t, r[1].fd, KCOLL_IOC_REG_MEM, &m, 5000);
		if (!ret)
			break;
		if (ret != -ENOMEM && !(two && !dev_stable(e0) && dev_err(ret)))
			unexpected(t, "REG_MEM of %llu bytes on a fresh %d-rank communicator returned %ld",
				   (unsigned long long)lens[li], two ? 2 : 1, ret);
		if (ret != -ENOMEM)
			goto out;
	}
	if (li < 0)
		goto out;
	k->t = t;
	k->r = &r[1];
	k->map = r[1].map;
	k->fd = r[1].fd;
	k->comm = id[1];
	k->handle = m.handle;
	k->len = lens[li];
	k->closes = v == RV_CLOSE;
	k->until = now_ns() + 5000000000LL;
	if (pthread_create(&th, NULL, racer_main, k))
		goto out;
	usleep(one_in(&t->r, 2) ? rn(&t->r, 500) : rn(&t->r, 4000));
	switch (v) {
	case RV_DESTROY:
	case RV_ABORT: {
		struct kcoll_comm_destroy d = { .comm_id = id[1] };
		struct kcoll_comm_abort a = { .comm_id = id[1] };

		if (v == RV_ABORT) {
			ret = x_ioctl(t, r[1].fd, KCOLL_IOC_COMM_ABORT, &a, 10000);
			if (ret && ret != -ENOTTY)
				unexpected(t, "COMM_ABORT of a live comm under submissions: %ld", ret);
			usleep(rn(&t->r, 2000));
		}
		ret = x_ioctl(t, r[1].fd, KCOLL_IOC_COMM_DESTROY, &d, 10000);
		if (ret)
			unexpected(t, "COMM_DESTROY of a live comm under submissions: %ld", ret);
		destroyed = true;
		atomic_store(&k->stop, true);
		break;
	}
	case RV_CLOSE: {
		/* The ring goes, and the file: it is released when the
		 * submission under way lets go of it. /dev/null takes the
		 * number, so that the submitter never reaches a file another
		 * thread opened meanwhile. The ring goes as a PROT_NONE
		 * mapping put over it (the module sees the same unmap),
		 * unmapped by pr_close() once the submitter is joined: an
		 * munmap() now would free the address while the submitter
		 * still writes there, and another thread's mmap (a ring of
		 * the same size) could be placed at it. */
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		reserve(t, r[1].map, r[1].p.mmap_size);
		t->calls[C_MUNMAP]++;
		if (null >= 0) {
			call_begin(t, C_DUP, 5000);
			call_end(t, C_DUP, dup2(null, r[1].fd));
			close(null);
		}
		atomic_store(&k->stop, true);
		closed = true;
		break;
	}
	case RV_PEER_DESTROY: {
		struct kcoll_comm_destroy d = { .comm_id = id[0] };

		ret = x_ioctl(t, r[0].fd, KCOLL_IOC_COMM_DESTROY, &d, 10000);
		if (ret)
			unexpected(t, "COMM_DESTROY of rank 0 under rank 1's submissions: %ld", ret);
		id[0] = 0;
		break;
	}
	default:
		pr_close(t, &r[0]);
		break;
	}
	/* Rank 1 goes on until its comm fails (the peer's BYE) or 200 ms. */
	if (v >= RV_PEER_DESTROY) {
		usleep(200000);
		atomic_store(&k->stop, true);
	}
	pthread_join(th, NULL);
	t->calls[C_ENTER] += k->enters;
	t->sqes += k->sub;
	t->cqes += k->comp;
	if (k->bad)
		unexpected(t, "a collective holding a registration (%s, %llu bytes, %d ranks, race %d) completed with %ld",
			   k->send_side ? "send_mr" : "recv_mr",
			   (unsigned long long)k->len, two ? 2 : 1, v, k->bad);
	if (!closed && k->comp < k->sub)
		unexpected(t, "%llu of %llu collectives holding a registration never completed (%d ranks, race %d)",
			   (unsigned long long)(k->sub - k->comp),
			   (unsigned long long)k->sub, two ? 2 : 1, v);
	t->checked++;
	if (!closed) {
		struct kcoll_dereg_mem d = { .handle = m.handle };
		int tries = 0;

		/* Gone with its comm (-ENOENT), or free: never a use left. */
		while ((ret = x_ioctl(t, r[1].fd, KCOLL_IOC_DEREG_MEM, &d, 2000)) == -EBUSY &&
		       ++tries < 100)
			usleep(20000);
		if (ret && !(ret == -ENOENT && destroyed) &&
		    !(ret == -ENOENT && v >= RV_PEER_DESTROY))
			unexpected(t, "DEREG_MEM after the race (%d ranks, race %d, %llu/%llu completed): %ld",
				   two ? 2 : 1, v, (unsigned long long)k->comp,
				   (unsigned long long)k->sub, ret);
	}
out:
	if (!destroyed && !closed && id[1] && r[1].fd >= 0) {
		struct kcoll_comm_destroy d = { .comm_id = id[1] };

		x_ioctl(t, r[1].fd, KCOLL_IOC_COMM_DESTROY, &d, 10000);
	}
	pr_close(t, &r[1]);
	pr_close(t, &r[0]);
	t->race_rounds++;
	free(k);
}

/* ------------------------------------------------------------------ */
/* Two-rank communicators through the NIC, while the device goes away  */
/* ------------------------------------------------------------------ */

/*
 * A few long-lived two-rank communicators (both ranks in this process,
 * on two descriptors, through rxe0 when sysfs intra_node is 0), shared by
 * every thread: registrations, matched allreduces above the eager size
 * (registered or not), DEREG_MEM, COMM_DESTROY, COMM_ABORT and close
 * race on them, and the helper deletes rxe0 under them. Results are
 * checked when both ranks succeed; every error must be one a lost device
 * or a torn-down comm explains, and every operation must complete.
 */
#define NNIC		3
#define NIC_KEEP	4

static struct nicpair {
	pthread_rwlock_t rw;		/* write: open/close; read: ioctls */
	pthread_mutex_t ring;		/* submissions on the rings */
	struct pring r[2];
	uint32_t id[2];
	uint32_t epoch;			/* the device's, at creation */
	_Atomic uint32_t keep[2][NIC_KEEP];	/* registrations left for later */
	atomic_bool killed;		/* destroyed or aborted on a rank */
	bool live;
} g_nic[NNIC];

/* What ranks 0 and 1 send (g_nicsrc, declared with the fault handler):
 * written once, only ever read. */

/* g_nicsrc_ref: a copy of what g_nicsrc must hold, to catch the moment
 * it changes. */
static atomic_bool g_nicsrc_changed;

/* Every run of changed bytes in g_nicsrc[@i] (at most 16), with the
 * first word of each, for telling a stray DMA from a stray store. */
static void nic_src_runs(int i)
{
	const uint8_t *now = (const uint8_t *)g_nicsrc[i];
	const uint8_t *was = (const uint8_t *)g_nicsrc_ref[i];
	uint64_t b = 0, e;
	int runs = 0;

	while (b < NIC_BYTES && runs < 16) {
		if (now[b] == was[b]) {
			b++;
			continue;
		}
		for (e = b; e < NIC_BYTES && now[e] != was[e]; e++)
			;
		fprintf(stderr, "kcoll-fuzz:   changed bytes %#llx..%#llx (%llu, page %llu +%#llx): first %02x%02x%02x%02x, was %02x%02x%02x%02x\n",
			(unsigned long long)b, (unsigned long long)e - 1,
			(unsigned long long)(e - b),
			(unsigned long long)(b / PAGE),
			(unsigned long long)(b % PAGE),
			now[b], b + 1 < e ? now[b + 1] : 0,
			b + 2 < e ? now[b + 2] : 0, b + 3 < e ? now[b + 3] : 0,
			was[b], b + 1 < e ? was[b + 1] : 0,
			b + 2 < e ? was[b + 2] : 0, b + 3 < e ? was[b + 3] : 0);
		runs++;
		b = e;
	}
}

/*
 * Has anything written into g_nicsrc (the send buffers nobody may write)?
 * Reported once, with where and what each thread was doing: a fuzzer bug
 * (a stray userspace write) and the module writing into a send buffer
 * look the same in a wrong sum, not here.
 */
static void nic_src_check(struct tstate *t, const char *when)
{
	uint64_t j;
	int i, k;

	for (i = 0; i < 2; i++) {
		if (!memcmp(g_nicsrc[i], g_nicsrc_ref[i], NIC_BYTES))
			continue;
		if (atomic_exchange(&g_nicsrc_changed, true))
			return;
		for (j = 0; j < NIC_BYTES / 4; j++)
			if (((int32_t *)g_nicsrc[i])[j] != ((int32_t *)g_nicsrc_ref[i])[j])
				break;
		unexpected(t, "the NIC pairs' send buffer %d changed (%s, %.1f s in; read-only, so not by a store of ours): element %llu is %d, was %d",
			   i, when, (now_ns() - h_t0) / 1e9, (unsigned long long)j,
			   ((int32_t *)g_nicsrc[i])[j], ((int32_t *)g_nicsrc_ref[i])[j]);
		nic_src_runs(i);
		for (k = 0; k < g_nts; k++)
			if (g_ts[k])
				fprintf(stderr, "kcoll-fuzz:   thread %d's last action %u\n",
					g_ts[k]->id, atomic_load(&g_ts[k]->last_r));
		return;
	}
}

static void nic_init(void)
{
	uint64_t j;
	int i;

	for (i = 0; i < 2; i++) {
		g_nicsrc[i] = aligned_alloc(PAGE, NIC_BYTES);
		if (!g_nicsrc[i]) {
			perror("kcoll-fuzz");
			exit(2);
		}
		for (j = 0; j < NIC_BYTES / 4; j++)
			((int32_t *)g_nicsrc[i])[j] = (int32_t)((i + 1) * 1000003 + j * 7);
		/* Its own mapping, read-only once written: a stray store of
		 * ours into it faults and says where, and the kernel cannot
		 * pin it for writing, so a change of the copy too is a write
		 * to a page the kernel does not hold. */
		g_nicsrc_ref[i] = mmap(NULL, NIC_BYTES, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (g_nicsrc_ref[i] == MAP_FAILED) {
			perror("kcoll-fuzz");
			exit(2);
		}
		memcpy(g_nicsrc_ref[i], g_nicsrc[i], NIC_BYTES);
		if (mprotect(g_nicsrc_ref[i], NIC_BYTES, PROT_READ)) {
			perror("kcoll-fuzz: mprotect");
			exit(2);
		}
		/* Read-only from now on (registered KCOLL_REG_READONLY): a
		 * stray write of ours faults and is reported where it
		 * happened; a change without a fault is the kernel's. */
		if (mprotect(g_nicsrc[i], NIC_BYTES, PROT_READ)) {
			perror("kcoll-fuzz: mprotect");
			exit(2);
		}
	}
	for (i = 0; i < NNIC; i++) {
		pthread_rwlock_init(&g_nic[i].rw, NULL);
		pthread_mutex_init(&g_nic[i].ring, NULL);
		g_nic[i].r[0].fd = g_nic[i].r[1].fd = -1;
	}
}

/* Must hold n->rw for writing. */
static void nic_close_locked(struct tstate *t, struct nicpair *n)
{
	int k, j;

	pr_close(t, &n->r[0]);
	pr_close(t, &n->r[1]);
	for (k = 0; k < 2; k++)
		for (j = 0; j < NIC_KEEP; j++)
			atomic_store(&n->keep[k][j], 0);
	n->live = false;
}

static void nic_open_locked(struct tstate *t, struct nicpair *n)
{
	long ret;

	n->epoch = dev_epoch();
	atomic_store(&n->killed, false);
	if (pr_open(t, &n->r[0]) || pr_open(t, &n->r[1])) {
		nic_close_locked(t, n);
		return;
	}
	ret = make_pair(t, n->r, n->id, 8000);
	if (ret) {
		vlog("kcoll-fuzz: NIC pair COMM_CREATE: %ld\n", ret);
		nic_close_locked(t, n);
		return;
	}
	n->live = true;
}

/* One matched allreduce of more than 8 KiB on both ranks; rank k's send
 * buffer registered (fresh, kept, or none). Must hold n->rw for reading
 * and n->ring. */
static void nic_op(struct tstate *t, struct nicpair *n)
{
	uint64_t c = (8192 + rn(&t->r, (uint32_t)(NIC_BYTES - 8192))) / 4, i;
	struct kcoll_sqe q[2];
	uint32_t h[2] = { 0, 0 };
	int64_t until;
	long res[2], ret;
	bool disturbed;
	int k;

	for (k = 0; k < 2; k++) {
		char *rcv = t->data + (2 + k) * NIC_BYTES;

		memset(rcv, 0x5a, c * 4);
		memset(&q[k], 0, sizeof(q[k]));
		q[k].opcode = KCOLL_OP_ALLREDUCE;
		q[k].comm_id = n->id[k];
		q[k].dtype = KCOLL_DTYPE_INT32;
		q[k].redop = KCOLL_REDOP_SUM;
		q[k].count = c;
		q[k].send_addr = (uint64_t)(uintptr_t)g_nicsrc[k];
		q[k].recv_addr = (uint64_t)(uintptr_t)rcv;
		q[k].timeout_ms = 8000;
		q[k].user_data = 0x91c000000000ULL + t->seq++;
		switch (rn(&t->r, 3)) {
		case 0: {
			struct kcoll_reg_mem m = { .comm_id = n->id[k],
				.addr = (uint64_t)(uintptr_t)g_nicsrc[k], .len = NIC_BYTES,
				.flags = KCOLL_REG_READONLY };

			ret = x_ioctl(t, n->r[k].fd, KCOLL_IOC_REG_MEM, &m, 10000);
			if (!ret)
				h[k] = m.handle;
			else if (!dev_err(ret))
				unexpected(t, "REG_MEM of 256 KiB on a two-rank NIC comm: %ld", ret);
			q[k].send_mr = h[k];
			break;
		}
		case 1:		/* a registration made earlier, maybe before
				 * the device went away */
			q[k].send_mr = atomic_load(&n->keep[k][rn(&t->r, NIC_KEEP)]);
			break;
		default:	/* pinned and registered by the submission */
			break;
		}
	}
	/*
	 * From the submissions on: the 8 s timeout, then at most the
	 * drain of a failed operation's transfers (at least 10 s,
	 * kcoll_drain_jiffies()), and some slack for TCG.
	 */
	until = now_ns() + 30000000000LL;
	res[0] = pr_submit(t, &n->r[0], &q[0]);
	res[1] = pr_submit(t, &n->r[1], &q[1]);
	for (k = 0; k < 2; k++)
		if (!res[k])
			res[k] = pr_wait(t, &n->r[k], &q[k], until);
	t->nic_ops++;
	disturbed = !dev_stable(n->epoch) || atomic_load(&n->killed);
	for (k = 0; k < 2; k++) {
		if (res[k] == 1)
			unexpected(t, "two-rank NIC allreduce of %llu x int32: rank %d's did not complete in 30 s",
				   (unsigned long long)c, k);
		else if (res[k] && !dev_err(res[k]))
			unexpected(t, "two-rank NIC allreduce of %llu x int32: rank %d completed with %ld",
				   (unsigned long long)c, k, res[k]);
	}
	if (!res[0] && !res[1]) {
		t->nic_ok++;
		for (k = 0; k < 2; k++) {
			const int32_t *o = (const int32_t *)(t->data + (2 + k) * NIC_BYTES);

			for (i = 0; i < c; i++)
				if (o[i] != (int32_t)((uint32_t)(1000003 + i * 7) +
						      (uint32_t)(2000006 + i * 7)))
					break;
			if (i < c) {
				/* Which input changed, if one did: a write into
				 * a send buffer, not a wrong sum. */
				const int32_t *s0 = (const int32_t *)g_nicsrc[0];
				const int32_t *s1 = (const int32_t *)g_nicsrc[1];

				unexpected(t, "two-rank NIC allreduce of %llu x int32: rank %d's result is wrong at element %llu: %d, want %d (inputs now %d and %d, set to %d and %d)",
					   (unsigned long long)c, k,
					   (unsigned long long)i, o[i],
					   (int32_t)((uint32_t)(1000003 + i * 7) +
						     (uint32_t)(2000006 + i * 7)),
					   s0[i], s1[i],
					   (int32_t)(1000003 + i * 7),
					   (int32_t)(2000006 + i * 7));
			}
		}
	} else if (!disturbed) {
		vlog("kcoll-fuzz: two-rank NIC allreduce: %ld/%ld\n", res[0], res[1]);
	}
	if (!dev_stable(n->epoch))
		vlog("kcoll-fuzz: two-rank NIC allreduce of %llu bytes, epoch %u -> %u, mr %u/%u: %ld/%ld\n",
		     (unsigned long long)c * 4, n->epoch, dev_epoch(),
		     q[0].send_mr, q[1].send_mr, res[0], res[1]);
	for (k = 0; k < 2; k++) {
		struct kcoll_dereg_mem d = { .handle = h[k] };
		int tries = 0;

		if (!h[k])
			continue;
		while ((ret = x_ioctl(t, n->r[k].fd, KCOLL_IOC_DEREG_MEM, &d, 10000)) == -EBUSY &&
		       ++tries < 100)
			usleep(20000);
		if (ret && !(ret == -ENOENT && atomic_load(&n->killed)))
			unexpected(t, "DEREG_MEM after a two-rank NIC allreduce (%ld/%ld): %ld",
				   res[0], res[1], ret);
	}
}

static void act_nic(struct tstate *t)
{
	struct nicpair *n = &g_nic[rn(&t->r, NNIC)];
	uint32_t s = rn(&t->r, 100);
	int k = (int)rn(&t->r, 2), j = (int)rn(&t->r, NIC_KEEP);
	long ret;

	bool stale;

	if (!opt.ip || !opt.pairs)
		return;
	/* A comm the device went away under: mostly registrations and
	 * operations on it now (they must fail cleanly), rarely its end. */
	stale = LD(n->live) && !dev_stable(LD(n->epoch));
	if (stale && !one_in(&t->r, 6))
		s = 3 + rn(&t->r, 77);
	if (!LD(n->live) ||
	    ((s < 3 || (atomic_load(&n->killed) && one_in(&t->r, 3)) ||
	      (stale && one_in(&t->r, 12))) && !(dev_epoch() & 1))) {
		if (pthread_rwlock_trywrlock(&n->rw))
			return;
		if (n->live)
			nic_close_locked(t, n);
		else if (!(dev_epoch() & 1))
			nic_open_locked(t, n);
		pthread_rwlock_unlock(&n->rw);
		return;
	}
	if (pthread_rwlock_tryrdlock(&n->rw))
		return;
	if (!n->live)
		goto out;
	if (stale && s < 80)
		t->nic_stale++;
	if (s < 55) {
		if (!pthread_mutex_trylock(&n->ring)) {
			nic_src_check(t, "before a NIC allreduce");
			nic_op(t, n);
			nic_src_check(t, "after a NIC allreduce");
			pthread_mutex_unlock(&n->ring);
		}
	} else if (s < 80) {		/* a registration left for later */
		struct kcoll_reg_mem m = { .comm_id = n->id[k], .len = NIC_BYTES,
			.addr = (uint64_t)(uintptr_t)g_nicsrc[k],
			.flags = KCOLL_REG_READONLY };
		uint32_t old = atomic_exchange(&n->keep[k][j], 0);

		if (old) {
			struct kcoll_dereg_mem d = { .handle = old };

			ret = x_ioctl(t, n->r[k].fd, KCOLL_IOC_DEREG_MEM, &d, 10000);
			/* -EBUSY: an allreduce is sending from it. */
			if (ret && ret != -EBUSY && !(ret == -ENOENT && atomic_load(&n->killed)))
				unexpected(t, "DEREG_MEM of a kept registration on a two-rank NIC comm: %ld",
					   ret);
			goto out;
		}
		ret = x_ioctl(t, n->r[k].fd, KCOLL_IOC_REG_MEM, &m, 10000);
		if (stale)
			vlog("kcoll-fuzz: REG_MEM on a two-rank NIC comm, epoch %u -> %u: %ld\n",
			     n->epoch, dev_epoch(), ret);
		if (!ret)
			atomic_store(&n->keep[k][j], m.handle);
		else if (!dev_err(ret))
			unexpected(t, "REG_MEM of 256 KiB on a two-rank NIC comm: %ld", ret);
	} else if (s < 85) {
		struct kcoll_comm_destroy d = { .comm_id = n->id[k] };

		atomic_store(&n->killed, true);
		ret = x_ioctl(t, n->r[k].fd, KCOLL_IOC_COMM_DESTROY, &d, 10000);
		if (ret && ret != -ENOENT)
			unexpected(t, "COMM_DESTROY of a two-rank NIC comm: %ld", ret);
	} else if (s < 89) {
		struct kcoll_comm_abort a = { .comm_id = n->id[k] };

		atomic_store(&n->killed, true);
		ret = x_ioctl(t, n->r[k].fd, KCOLL_IOC_COMM_ABORT, &a, 10000);
		if (ret && ret != -ENOENT && ret != -ENOTTY)
			unexpected(t, "COMM_ABORT of a two-rank NIC comm: %ld", ret);
	} else {
		struct kcoll_comm_report p = { .comm_id = n->id[k] };

		x_ioctl(t, n->r[k].fd, KCOLL_IOC_COMM_REPORT, &p, 1000);
	}
out:
	pthread_rwlock_unlock(&n->rw);
}


/* dma-buf imports (issue 18): how many were tried, how many succeeded. */
static _Atomic uint64_t g_dmabuf_tries, g_dmabuf_ok;

/*
 * REG_MEM of a dma-buf from the test exporter (tests/kmod; its fd closed
 * right after): ordinary pages or "vram", an exporter refusing attach or
 * map, random offsets, lengths and flags, on one of the slot's
 * communicators. What succeeds becomes a registration other actions name
 * in SQEs (under a made-up address: nothing maps it). Never a success for
 * a range outside the buffer, never one for "vram" memory here (rxe, or
 * no device). The exporter's counters must be back to 0 when the run is
 * over (fuzz.sh).
 */
static void act_dmabuf(struct tstate *t, struct slot *s)
{
	static const uint32_t kinds[] = {
		0, 0, 0, KCOLL_TESTBUF_VRAM, KCOLL_TESTBUF_FAIL_ATTACH,
		KCOLL_TESTBUF_FAIL_MAP,
	};
	struct kcoll_testbuf_create c = { 0 };
	struct kcoll_reg_mem m = { 0 };
	int dev, fd = LD(s->fd), n;
	bool bad_range;
	uint64_t size;
	long ret;

	if (fd < 0)
		return;
	dev = open(KCOLL_TESTBUF_DEVICE, O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return;		/* no test exporter in this VM */
	size = (uint64_t)(1 + rn(&t->r, 256)) * PAGE;
	c.size = size;
	c.flags = kinds[rn(&t->r, 6)];
	ret = ioctl(dev, KCOLL_TESTBUF_IOC_CREATE, &c) ? -errno : 0;
	close(dev);
	if (ret)
		return;
	m.comm_id = one_in(&t->r, 8) ? rval32(&t->r) : pick_comm(t, s, &n);
	m.flags = KCOLL_REG_DMABUF | (one_in(&t->r, 2) ? KCOLL_REG_NO_CPU : 0);
	m.dmabuf_fd = one_in(&t->r, 30) ? fd : c.fd;	/* sometimes not one */
	m.dmabuf_off = one_in(&t->r, 3) ? 0 : rn(&t->r, (uint32_t)size + PAGE);
	m.len = one_in(&t->r, 3) ? size - (m.dmabuf_off < size ? m.dmabuf_off : 0) :
		rn(&t->r, (uint32_t)size + PAGE);
	if (one_in(&t->r, 20))
		m.dmabuf_off = rnd(&t->r);
	/* A name no mapping backs: a device pointer's, as it were. */
	m.addr = 0x7e0000000000ULL + (uint64_t)rn(&t->r, 1 << 20) * PAGE;
	bad_range = !m.len || m.dmabuf_off + m.len < m.dmabuf_off ||
		    m.dmabuf_off + m.len > size;
	atomic_fetch_add(&g_dmabuf_tries, 1);
	ret = x_ioctl(t, fd, KCOLL_IOC_REG_MEM, &m, 5000);
	close(c.fd);
	if (!ret) {
		atomic_fetch_add(&g_dmabuf_ok, 1);
		if (m.dmabuf_fd == fd)
			unexpected(t, "REG_MEM of a /dev/kcoll fd as a dma-buf succeeded");
		if (bad_range)
			unexpected(t, "REG_MEM of bytes %llu + %llu of a %llu-byte dma-buf succeeded",
				   (unsigned long long)m.dmabuf_off,
				   (unsigned long long)m.len,
				   (unsigned long long)size);
		if (c.flags == KCOLL_TESTBUF_VRAM)
			unexpected(t, "REG_MEM of device memory (vram) succeeded on rxe");
		slot_add_mem(s, m.handle, m.addr, m.len);
		if (one_in(&t->r, 2))
			act_dereg(t, s, m.handle);
		return;
	}
	/* A length of 0 is refused before anything else is looked at (a
	 * range past the end only once the communicator is found usable). */
	if (s == &t->priv && !m.len && ret != -EINVAL)
		unexpected(t, "REG_MEM of 0 bytes of a dma-buf returned %ld, not -EINVAL",
			   ret);
}

/* ------------------------------------------------------------------ */
/* Threads                                                             */
/* ------------------------------------------------------------------ */

static void one_action(struct tstate *t)
{
	struct slot *s = one_in(&t->r, 5) ? &t->priv : &g_shared[rn(&t->r, NSHARED)];
	uint32_t r = rn(&t->r, 1055);

	atomic_store_explicit(&t->last_r, r, memory_order_relaxed);
	if (LD(s->fd) < 0 && !one_in(&t->r, 20)) {
		slot_reopen(t, s);
		return;
	}
	if (r < 280) act_submit(t, s);
	else if (r < 330) act_checked_coll(t);
	else if (r < 380) act_corrupt(t, s);
	else if (r < 400) act_query(t, s);
	else if (r < 440) act_setup(t, s);
	else if (r < 490) act_mmap(t, s);
	else if (r < 540) act_unmap(t, s);
	else if (r < 580) act_eventfd(t, s);
	else if (r < 650) act_comm_create(t, s);
	else if (r < 680) act_comm_destroy(t, s);
	else if (r < 740) act_reg_mem(t, s);
	else if (r < 760) {
		int k = rn(&t->r, MAX_IDS);

		act_dereg(t, s, one_in(&t->r, 5) ? rval32(&t->r) : LD(s->mems[k]));
	} else if (r < 790) act_abort_report(t, s);
	else if (r < 830) act_close_dup(t);
	else if (r < 860) act_poll(t);
	else if (r < 900) act_misc(t, s);
	else if (r < 910) act_signal(t);
	else if (r < 930) act_data(t);
	else if (r < 960) do_enter(t, s, rn(&t->r, 8), one_in(&t->r, 2));
	else if (r < 965) act_pair(t);
	else if (r < 1000) ring_drain(t, s);
	else if (r < 1010) {
		if (opt.races)
			act_mr_race(t);
	}
	else if (r < 1040) act_nic(t);
	else act_dmabuf(t, s);
}

static void *thread_main(void *arg)
{
	struct tstate *t = arg;
	long ret;
	int fd;

	t->tid = (pid_t)syscall(SYS_gettid);
	/* What this kernel offers: the SETUP oracle needs the limits. */
	fd = x_open(t, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		ret = x_ioctl(t, fd, KCOLL_IOC_QUERY, &t->q, 200);
		if (ret)
			unexpected(t, "QUERY on a fresh descriptor returned %ld", ret);
		x_close(t, fd);
	}
	slot_reopen(t, &t->priv);
	while (!stopping())
		one_action(t);
	pthread_mutex_lock(&t->priv.lock);
	slot_close_locked(t, &t->priv);
	pthread_mutex_unlock(&t->priv.lock);
	t->done = true;
	return NULL;
}

static struct tstate *tstate_new(int id)
{
	struct tstate *t = calloc(1, sizeof(*t));
	char *z;

	if (!t) {
		perror("kcoll-fuzz");
		exit(2);
	}
	t->id = id;
	t->r.s = splitmix(&(uint64_t){ opt.seed + (uint64_t)id * 0x1000193 }) | 1;
	slot_init(&t->priv, false);
	acct_reset(t);
	z = reservation(PRIV_DATA + PRIV_HOLE);
	if (mprotect(z, PRIV_DATA, PROT_READ | PROT_WRITE)) {
		perror("kcoll-fuzz: mprotect");
		exit(2);
	}
	memset(z, 0x33, PRIV_DATA);
	t->data = z;
	t->big = aligned_alloc(PAGE, BIG_SIZE);
	if (!t->big) {
		perror("kcoll-fuzz");
		exit(2);
	}
	memset(t->big, 0x44, BIG_SIZE);
	t->evfd[0] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	t->evfd[1] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	t->epfd = epoll_create1(EPOLL_CLOEXEC);
	t->ranks = calloc(KCOLL_MAX_RANKS + 1, sizeof(*t->ranks));
	if (!t->ranks) {
		perror("kcoll-fuzz");
		exit(2);
	}
	return t;
}

/* A thread inside one call for much longer than it allowed itself: print
 * where the kernel has it. */
static void report_stuck(struct tstate *t, int64_t ms)
{
	char path[64], buf[2048];
	int kind = atomic_load(&t->call_kind), f;
	ssize_t n;

	unexpected(t, "%s has not returned for %lld ms", call_names[kind], (long long)ms);
	if (g_helper_fd >= 0) {		/* root reads it */
		uint32_t tid = (uint32_t)t->tid;

		if (write(g_helper_fd, &tid, sizeof(tid)) == sizeof(tid))
			return;
	}
	snprintf(path, sizeof(path), "/proc/self/task/%d/stack", t->tid);
	f = open(path, O_RDONLY);
	if (f >= 0) {
		n = read(f, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = 0;
			fprintf(stderr, "kcoll-fuzz: thread %d kernel stack:\n%s", t->id, buf);
		}
		close(f);
	}
}

/* Every 20 ms: wake threads stuck in an interruptible wait longer than
 * they meant to (SIGUSR1), and report calls that do not return at all. */
static void watchdog(void)
{
	int64_t now = now_ns();
	int i;

	for (i = 0; i < g_nts; i++) {
		struct tstate *t = g_ts[i];
		int64_t t0 = atomic_load_explicit(&t->call_t0, memory_order_acquire);
		int64_t ms;

		if (!t0 || t->done)
			continue;
		ms = (now - t0) / 1000000;
		if (ms > atomic_load(&t->call_allow_ms) && now - t->kicked > 200000000LL) {
			t->kicked = now;
			pthread_kill(t->th, SIGUSR1);
		}
		if (ms > 60000 && !t->stuck_reported) {
			t->stuck_reported = true;
			report_stuck(t, ms);
		}
	}
}

static const char *errname(int e)
{
	const char *n = e ? strerrorname_np(e) : NULL;

	return n ? n : "E?";
}

static void summary(int nthreads)
{
	uint64_t calls[C_NR] = { 0 }, errs[NERR] = { 0 }, total = 0, etotal = 0;
	uint64_t faults = 0, sqes = 0, cqes = 0, intr = 0, checked = 0;
	uint64_t ps = 0, pops = 0, pok = 0, pvok = 0, prok = 0, races = 0, nops = 0, nok = 0, nstale = 0;
	uint64_t pb = 0, pbover = 0, pbops = 0, pbok = 0;
	char line[4096];
	size_t o = 0;
	unsigned long unexp = atomic_load(&g_unexpected), sigs = 0;
	int i, k;

	for (i = 0; i < g_nts; i++) {
		struct tstate *t = g_ts[i];

		for (k = 0; k < C_NR; k++)
			calls[k] += t->calls[k];
		for (k = 0; k < NERR; k++)
			errs[k] += t->errs[k];
		faults += t->faults;
		sqes += t->sqes;
		cqes += t->cqes;
		intr += t->intr;
		checked += t->checked;
		ps += t->pair_sessions;
		pops += t->pair_ops;
		pok += t->pair_ok;
		pvok += t->pair_vok;
		prok += t->pair_rok;
		pb += t->pair_bursts;
		pbover += t->pair_bover;
		pbops += t->pair_bops;
		pbok += t->pair_bok;
		races += t->race_rounds;
		nops += t->nic_ops;
		nok += t->nic_ok;
		nstale += t->nic_stale;
	}
	for (k = 0; k < 65; k++) {
		unsigned long n = atomic_load(&g_unexpected_sig[k]);

		if (n) {
			fprintf(stderr, "kcoll-fuzz: UNEXPECTED signal %d received %lu time(s)\n",
				k, n);
			sigs += n;
		}
	}
	unexp += sigs;
	for (k = 0; k < C_NR; k++)
		total += calls[k];
	for (k = 0; k < NERR; k++)
		etotal += errs[k];
	printf("kcoll-fuzz: %d threads, %d s: %llu SQEs written, %llu CQEs reaped, %llu results checked, %llu guarded faults, %llu interrupted waits\n",
	       nthreads, opt.seconds, (unsigned long long)sqes,
	       (unsigned long long)cqes, (unsigned long long)checked,
	       (unsigned long long)faults, (unsigned long long)intr);
	if (opt.pairs || ps)
		printf("kcoll-fuzz: two-rank sessions %llu, collectives %llu (%llu succeeded and checked, %llu of them v-variants, %llu issued again after a refusal)\n",
		       (unsigned long long)ps, (unsigned long long)pops,
		       (unsigned long long)pok, (unsigned long long)pvok,
		       (unsigned long long)prok);
	if (opt.pairs || pb)
		printf("kcoll-fuzz: two-rank bursts %llu (%llu with an in-place allreduce over an earlier one's region), collectives in them %llu (%llu succeeded on both ranks and checked)\n",
		       (unsigned long long)pb, (unsigned long long)pbover,
		       (unsigned long long)pbops, (unsigned long long)pbok);
	printf("kcoll-fuzz: teardown races against registered submissions %llu; two-rank NIC allreduces %llu (%llu succeeded and checked); rxe0 deleted %u times, %llu registrations or allreduces on a comm it went away under\n",
	       (unsigned long long)races, (unsigned long long)nops,
	       (unsigned long long)nok, g_dev ? atomic_load(&g_dev->removals) : 0,
	       (unsigned long long)nstale);
	printf("kcoll-fuzz: dma-buf imports tried %llu, succeeded %llu\n",
	       (unsigned long long)atomic_load(&g_dmabuf_tries),
	       (unsigned long long)atomic_load(&g_dmabuf_ok));
	printf("kcoll-fuzz: COMM_ABORT %s, COMM_REPORT %s\n",
	       atomic_load(&g_abort_notty) && !atomic_load(&g_abort_ok) ?
	       "not implemented by this kernel (-ENOTTY)" : "exercised",
	       atomic_load(&g_report_notty) && !atomic_load(&g_report_ok) ?
	       "not implemented by this kernel (-ENOTTY)" : "exercised");
	o += snprintf(line + o, sizeof(line) - o, "kcoll-fuzz: seed %llu, %llu calls (%.0f/s; ",
		      (unsigned long long)opt.seed, (unsigned long long)total,
		      opt.seconds ? (double)total / opt.seconds : 0.0);
	for (k = 0; k < C_NR; k++)
		if (calls[k])
			o += snprintf(line + o, sizeof(line) - o, "%s%s %llu",
				      k ? ", " : "", call_names[k],
				      (unsigned long long)calls[k]);
	o += snprintf(line + o, sizeof(line) - o, "), %llu errors by errno (",
		      (unsigned long long)etotal);
	for (k = 0, i = 0; k < NERR; k++)
		if (errs[k])
			o += snprintf(line + o, sizeof(line) - o, "%s%s %llu",
				      i++ ? ", " : "", errname(k),
				      (unsigned long long)errs[k]);
	snprintf(line + o, sizeof(line) - o, "), %lu unexpected", unexp);
	printf("%s\n", line);
	fflush(stdout);
}

static void usage(void)
{
	fprintf(stderr, "usage: kcoll-fuzz [-t SECONDS] [-s SEED] [-j THREADS] [-a ADDR] [-P] [-U] [-D] [-R] [-v]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct tstate *partner = NULL;
	const char *ip = getenv("KCOLL_IP");
	int c, i, nthreads, fd;
	int64_t t0, last_progress, join_until;
	bool hung = false;

	opt.seed = (uint64_t)time(NULL) * 1000003ULL ^ (uint64_t)getpid() << 16;
	while ((c = getopt(argc, argv, "t:s:j:a:PUDRvh")) != -1) {
		switch (c) {
		case 't': opt.seconds = atoi(optarg); break;
		case 's': opt.seed = strtoull(optarg, NULL, 0); break;
		case 'j': opt.nthreads = atoi(optarg); break;
		case 'a': ip = optarg; break;
		case 'P': opt.pairs = 0; break;
		case 'U': opt.root = true; break;
		case 'D': opt.device = false; break;
		case 'R': opt.races = false; break;
		case 'v': opt.verbose = 1; break;
		default: usage();
		}
	}
	if (optind != argc || opt.seconds < 0 || opt.nthreads < 1 ||
	    opt.nthreads > MAX_THREADS)
		usage();
	if (ip && *ip) {
		struct in_addr a;

		if (inet_pton(AF_INET, ip, &a) != 1) {
			fprintf(stderr, "kcoll-fuzz: bad address '%s'\n", ip);
			return 2;
		}
		opt.ip = a.s_addr;
		snprintf(opt.ipstr, sizeof(opt.ipstr), "%s", ip);
	}
	nthreads = opt.nthreads;
	snprintf(g_seedline, sizeof(g_seedline), "reproduce with -s %llu -j %d",
		 (unsigned long long)opt.seed, nthreads);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("kcoll-fuzz: seed %llu, %d threads, %d s, address %s, two-rank communicators %s\n",
	       (unsigned long long)opt.seed, nthreads, opt.seconds,
	       opt.ip ? opt.ipstr : "none", opt.pairs && opt.ip ? "on" : "off");
	/* The root helper first; from here on this process is nobody. */
	privileges_split();
	/* CLOCK_MONOTONIC: the kernel log's clock, to time an oops by. */
	printf("kcoll-fuzz: started at monotonic %.3f s; workers run as uid %d gid %d, %d supplementary groups, RLIMIT_MEMLOCK %s; rxe0 %s\n",
	       h_t0 / 1e9, (int)geteuid(), (int)getegid(), getgroups(0, NULL),
	       opt.root ? "unchanged" : "8 MiB",
	       g_helper >= 0 && opt.device && opt.ip ? "deleted and added back during the run" : "stays");
	if (geteuid() != 0) {
		char b[16] = "";
		int f = open("/sys/class/misc/kcoll/prio_max_unpriv", O_RDONLY);

		if (f >= 0) {
			if (read(f, b, sizeof(b) - 1) > 0)
				g_prio_max = (unsigned int)atoi(b);
			close(f);
		}
	}
	fd = open(KCOLL_DEV, O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "kcoll-fuzz: %s: %s\n", KCOLL_DEV, strerror(errno));
		return 2;
	}
	close(fd);

	signals_init();
	zone_init();
	nic_init();
	for (i = 0; i < NSHARED; i++)
		slot_init(&g_shared[i], true);
	for (i = 0; i < nthreads; i++)
		g_ts[i] = tstate_new(i);
	if (opt.pairs && opt.ip) {
		partner = tstate_new(nthreads);
		partner->partner = true;
		pair.t = partner;
		g_ts[nthreads] = partner;
		g_nts = nthreads + 1;
	} else {
		opt.pairs = 0;
		g_nts = nthreads;
	}
	t0 = now_ns();
	g_deadline = t0 + (int64_t)opt.seconds * 1000000000LL;
	last_progress = t0;
	for (i = 0; i < g_nts; i++) {
		void *(*fn)(void *) = g_ts[i]->partner ? partner_main : thread_main;

		if (pthread_create(&g_ts[i]->th, NULL, fn, g_ts[i])) {
			perror("kcoll-fuzz: pthread_create");
			return 2;
		}
	}

	/* Budget: the threads check it; the main thread watches them. */
	while (now_ns() < g_deadline) {
		usleep(20000);
		watchdog();
		if (opt.verbose && now_ns() - last_progress > 10000000000LL) {
			uint64_t n = 0;
			int k;

			last_progress = now_ns();
			for (i = 0; i < g_nts; i++)
				for (k = 0; k < C_NR; k++)
					n += g_ts[i]->calls[k];
			fprintf(stderr, "kcoll-fuzz: %lld s, %llu calls, %lu unexpected\n",
				(long long)((last_progress - t0) / 1000000000LL),
				(unsigned long long)n, atomic_load(&g_unexpected));
		}
	}
	atomic_store(&g_stop, true);

	/* Join with a deadline: a thread the kernel never lets go is a hang.
	 * The fuzzing threads first (one may be in a two-rank session with
	 * the partner), then the partner. */
	join_until = now_ns() + 90000000000LL;
	for (i = 0; i < g_nts; i++) {
		struct tstate *t = g_ts[i];

		while (!t->done && now_ns() < join_until) {
			usleep(20000);
			watchdog();
			if (t->partner)
				pj_post(PJ_EXIT);
		}
		if (!t->done) {
			int64_t c0 = atomic_load(&t->call_t0);

			report_stuck(t, c0 ? (now_ns() - c0) / 1000000 : -1);
			hung = true;
		}
	}
	for (i = 0; i < g_nts && !hung; i++)
		pthread_join(g_ts[i]->th, NULL);
	if (!hung) {
		for (i = 0; i < NSHARED; i++) {
			pthread_mutex_lock(&g_shared[i].lock);
			slot_close_locked(g_ts[0], &g_shared[i]);
			pthread_mutex_unlock(&g_shared[i].lock);
		}
		for (i = 0; i < NNIC; i++)
			if (g_nic[i].live)
				nic_close_locked(g_ts[0], &g_nic[i]);
	}
	summary(nthreads);
	/* The helper puts rxe0 back and reports what the kernel logged. */
	if (helper_finish())
		return 1;
	if (hung) {
		fprintf(stderr, "kcoll-fuzz: a thread is stuck in the kernel; %s\n",
			g_seedline);
		_exit(1);
	}
	if (atomic_load(&g_unexpected)) {
		fprintf(stderr, "kcoll-fuzz: %s\n", g_seedline);
		return 1;
	}
	for (i = 0; i < 65; i++)
		if (atomic_load(&g_unexpected_sig[i]))
			return 1;
	return 0;
}
