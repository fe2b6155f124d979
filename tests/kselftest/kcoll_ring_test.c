// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll rings: round trips, batching, asynchronous completion and wake-up,
 * poll/eventfd, the no-overflow rule, error CQEs for malformed descriptors,
 * corrupted indices, and exit with work in flight.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include "kcoll_test.h"
#include "kselftest_harness.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

FIXTURE(ring) {
	struct tring r;
};

FIXTURE_VARIANT(ring) {
	__u32 sq;
};
FIXTURE_VARIANT_ADD(ring, sq8) { .sq = 8 };
FIXTURE_VARIANT_ADD(ring, sq64) { .sq = 64 };

FIXTURE_SETUP(ring)
{
	int err = kt_ring_init(&self->r, variant->sq, 0, 0);

	/* Debian 12's harness runs the test after a SKIP in its setup
	 * (it crashed on the ring it lacks): 255 says SKIP instead. */
	if (err == -ENOENT)
		SKIP(_exit(255), KCOLL_DEV " missing (module not loaded?)");
	ASSERT_EQ(0, err);
}

FIXTURE_TEARDOWN(ring)
{
	kt_ring_exit(&self->r);
}

TEST_F(ring, nop_round_trip)
{
	struct kcoll_cqe c;

	ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, 0xdeadbeefcafef00dULL));
	ASSERT_EQ(1, kt_submit(&self->r));
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(0xdeadbeefcafef00dULL, c.user_data);
	EXPECT_EQ(0, c.res);
	EXPECT_EQ(0, c.flags);
	EXPECT_EQ(-EAGAIN, kt_pop(&self->r, &c));
	/* The kernel consumed the SQE. */
	EXPECT_EQ(self->r.sq_local_tail, atomic_load(self->r.sq_head));
}

TEST_F(ring, full_batch_in_order)
{
	__u32 n = self->r.p.sq_entries, i;
	struct kcoll_cqe c;

	for (i = 0; i < n; i++)
		ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, 1000 + i));
	EXPECT_EQ(NULL, kt_get_sqe(&self->r));	/* SQ full */
	ASSERT_EQ(n, kt_submit(&self->r));
	EXPECT_EQ(n, kt_cq_ready(&self->r));
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, kt_pop(&self->r, &c));
		EXPECT_EQ(1000 + i, c.user_data);
		EXPECT_EQ(0, c.res);
	}
}

TEST_F(ring, partial_submit)
{
	struct kcoll_cqe c;
	int i;

	for (i = 0; i < 4; i++)
		ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, i));
	/* Publish all four, consume only two. */
	ASSERT_EQ(2, kt_enter(&self->r, 2, 0, 0, 0));
	EXPECT_EQ(2, kt_cq_ready(&self->r));
	ASSERT_EQ(2, kt_enter(&self->r, 4, 0, 0, 0));	/* only 2 left */
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(0, kt_pop(&self->r, &c));
		EXPECT_EQ(i, c.user_data);
	}
}

TEST_F(ring, many_laps)
{
	/* Many times around both rings, so masked indices wrap. */
	__u32 laps = 2000, i, b, batch = self->r.p.sq_entries;
	struct kcoll_cqe c;
	__u64 seq = 0, want = 0;

	for (i = 0; i < laps; i++) {
		for (b = 0; b < batch; b++)
			ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, seq++));
		ASSERT_EQ(batch, kt_submit(&self->r));
		while (!kt_pop(&self->r, &c)) {
			ASSERT_EQ(want, c.user_data);
			want++;
		}
	}
	EXPECT_EQ(seq, want);
}

TEST_F(ring, delay_completes_async)
{
	struct kcoll_sqe *s;
	struct kcoll_cqe c;
	double t0, dt;

	s = kt_prep(&self->r, KCOLL_OP_DELAY, 77);
	ASSERT_NE(NULL, s);
	s->count = 200000;	/* 200 ms */
	t0 = now_s();
	ASSERT_EQ(1, kt_submit(&self->r));
	/* Not complete at submission. */
	EXPECT_EQ(0, kt_cq_ready(&self->r));
	EXPECT_LE(1, kt_sysfs_read("stats/inflight"));
	/* Sleep in the kernel until it completes. */
	ASSERT_EQ(0, kt_enter(&self->r, 0, 1, KCOLL_ENTER_GETEVENTS, 0));
	dt = now_s() - t0;
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(77, c.user_data);
	EXPECT_EQ(0, c.res);
	EXPECT_GE(dt, 0.19);
	TH_LOG("200 ms delay completed after %.0f ms", dt * 1000);
}

TEST_F(ring, delays_complete_in_deadline_order)
{
	static const __u64 us[] = { 300000, 50000, 150000 };
	struct kcoll_cqe c;
	int i;

	for (i = 0; i < 3; i++) {
		struct kcoll_sqe *s = kt_prep(&self->r, KCOLL_OP_DELAY, i);

		ASSERT_NE(NULL, s);
		s->count = us[i];
	}
	/* Submit and wait for all three in one call. */
	ASSERT_EQ(3, kt_enter(&self->r, 3, 3, KCOLL_ENTER_GETEVENTS, 0));
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(1, c.user_data);
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(2, c.user_data);
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(0, c.user_data);
}

TEST_F(ring, wait_timeout)
{
	struct kcoll_sqe *s = kt_prep(&self->r, KCOLL_OP_DELAY, 5);
	struct kcoll_cqe c;
	double t0 = now_s();

	ASSERT_NE(NULL, s);
	s->count = 2000000;	/* 2 s */
	ASSERT_EQ(1, kt_submit(&self->r));
	EXPECT_EQ(-ETIME, kt_enter(&self->r, 0, 1, KCOLL_ENTER_GETEVENTS, 50000000));
	EXPECT_LT(now_s() - t0, 1.5);
	EXPECT_EQ(-EAGAIN, kt_pop(&self->r, &c));
	ASSERT_EQ(0, kt_enter(&self->r, 0, 1, KCOLL_ENTER_GETEVENTS, 10ULL * 1000000000));
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(5, c.user_data);
	/* A timeout past what ktime_t holds waits as long as it can (it
	 * turned negative and returned -ETIME at once until 2026-12-05). */
	s = kt_prep(&self->r, KCOLL_OP_DELAY, 6);
	ASSERT_NE(NULL, s);
	s->count = 100000;	/* 100 ms */
	ASSERT_EQ(1, kt_submit(&self->r));
	EXPECT_EQ(0, kt_enter(&self->r, 0, 1, KCOLL_ENTER_GETEVENTS, ~0ULL));
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(6, c.user_data);
}

static void on_alarm(int sig)
{
	(void)sig;
}

TEST_F(ring, wait_interrupted_by_signal)
{
	struct sigaction sa = { .sa_handler = on_alarm };	/* no SA_RESTART */
	struct kcoll_sqe *s = kt_prep(&self->r, KCOLL_OP_DELAY, 5);

	ASSERT_NE(NULL, s);
	s->count = 3000000;
	ASSERT_EQ(1, kt_submit(&self->r));
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	ualarm(100000, 0);
	EXPECT_EQ(-EINTR, kt_enter(&self->r, 0, 1, KCOLL_ENTER_GETEVENTS, 0));
	/* Even with SA_RESTART the wait is not restarted (a restart would
	 * wait the whole relative timeout again): -EINTR, and the caller
	 * decides. */
	sa.sa_flags = SA_RESTART;
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	ualarm(100000, 0);
	EXPECT_EQ(-EINTR, kt_enter(&self->r, 0, 1, KCOLL_ENTER_GETEVENTS,
				   5ULL * 1000000000));
	/* Closing the ring with the delay pending cancels it (teardown). */
}

TEST_F(ring, poll_and_eventfd)
{
	struct kcoll_eventfd e;
	struct pollfd pfd;
	struct kcoll_sqe *s;
	struct kcoll_cqe c;
	uint64_t cnt = 0;
	int efd;

	pfd.fd = self->r.fd;
	pfd.events = POLLIN | POLLOUT;
	ASSERT_EQ(1, poll(&pfd, 1, 0));
	EXPECT_EQ(POLLOUT, pfd.revents);	/* SQ space, no CQE */

	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ASSERT_GE(efd, 0);
	e.fd = efd;
	e.resv = 0;
	ASSERT_EQ(0, kt_ioctl(self->r.fd, KCOLL_IOC_EVENTFD, &e));

	s = kt_prep(&self->r, KCOLL_OP_DELAY, 9);
	ASSERT_NE(NULL, s);
	s->count = 100000;
	ASSERT_EQ(1, kt_submit(&self->r));
	pfd.events = POLLIN;
	pfd.revents = 0;
	ASSERT_EQ(1, poll(&pfd, 1, 10000));	/* woken by the completion */
	EXPECT_TRUE(pfd.revents & POLLIN);
	/* The CQE is published before the eventfd is signalled (another
	 * CPU may get here in between): wait for the eventfd too. */
	pfd.fd = efd;
	pfd.revents = 0;
	ASSERT_EQ(1, poll(&pfd, 1, 10000));
	ASSERT_EQ(sizeof(cnt), read(efd, &cnt, sizeof(cnt)));
	EXPECT_GE(cnt, 1);
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(9, c.user_data);

	/* Muted eventfd: CQEs arrive, no signal. */
	*self->r.cq_flags |= KCOLL_CQ_F_EVENTFD_DISABLED;
	ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, 10));
	ASSERT_EQ(1, kt_submit(&self->r));
	EXPECT_EQ(-1, read(efd, &cnt, sizeof(cnt)));
	EXPECT_EQ(EAGAIN, errno);
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	*self->r.cq_flags &= ~KCOLL_CQ_F_EVENTFD_DISABLED;
	ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, 11));
	ASSERT_EQ(1, kt_submit(&self->r));
	ASSERT_EQ(sizeof(cnt), read(efd, &cnt, sizeof(cnt)));
	close(efd);
}

/* Every SQE-level violation gets an error CQE carrying its user_data. */
TEST_F(ring, malformed_sqes_get_error_cqes)
{
	struct {
		const char *what;
		void (*mut)(struct kcoll_sqe *s);
		int res;
	} cases[] = {
#define C(w, body, r) { w, ({ void f(struct kcoll_sqe *s) { body; } f; }), r }
		C("unknown opcode", s->opcode = KCOLL_OP_LAST, -EINVAL),
		C("opcode 255", s->opcode = 255, -EINVAL),
		C("unknown flag", s->flags = 1, -EINVAL),
		C("high flag", s->flags = 1U << 31, -EINVAL),
		C("prio too high", s->prio = KCOLL_PRIO_MAX + 1, -EINVAL),
		C("resv", s->resv = 0x80000000, -EINVAL),
		C("nop timeout", s->timeout_ms = 1, -EINVAL),
		C("delay timeout", (s->opcode = KCOLL_OP_DELAY,
				    s->timeout_ms = KCOLL_TIMEOUT_NONE), -EINVAL),
		C("nop dtype", s->dtype = KCOLL_DTYPE_FP32, -EINVAL),
		C("nop redop", s->redop = KCOLL_REDOP_SUM, -EINVAL),
		C("nop comm", s->comm_id = 1, -EINVAL),
		C("nop peer", s->peer = 1, -EINVAL),
		C("nop count", s->count = 1, -EINVAL),
		C("nop send_addr", s->send_addr = 4096, -EINVAL),
		C("nop recv_addr", s->recv_addr = 4096, -EINVAL),
		C("nop send_mr", s->send_mr = 1, -EINVAL),
		C("nop recv_mr", s->recv_mr = 1, -EINVAL),
		C("delay too long", (s->opcode = KCOLL_OP_DELAY,
				     s->count = KCOLL_DELAY_MAX_US + 1ULL), -ERANGE),
		C("delay huge", (s->opcode = KCOLL_OP_DELAY, s->count = ~0ULL), -ERANGE),
		C("delay send buffer", (s->opcode = KCOLL_OP_DELAY,
					s->send_addr = 1), -EINVAL),
		C("valid prio", s->prio = KCOLL_PRIO_MAX, 0),
#undef C
	};
	long long failed0 = kt_sysfs_read("stats/failed");
	unsigned int i, nbad = 0;
	struct kcoll_cqe c;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kcoll_sqe *s = kt_prep(&self->r, KCOLL_OP_NOP, 500 + i);

		ASSERT_NE(NULL, s);
		cases[i].mut(s);
		s->user_data = 500 + i;
		ASSERT_EQ(1, kt_submit(&self->r)) TH_LOG("%s", cases[i].what);
		ASSERT_EQ(0, kt_enter(&self->r, 0, 1, KCOLL_ENTER_GETEVENTS, 0));
		ASSERT_EQ(0, kt_pop(&self->r, &c));
		EXPECT_EQ(500 + i, c.user_data);
		EXPECT_EQ(cases[i].res, c.res) TH_LOG("%s", cases[i].what);
		nbad += cases[i].res != 0;
	}
	EXPECT_LE(failed0 + nbad, kt_sysfs_read("stats/failed"));
	/* The ring still works. */
	ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, 1));
	ASSERT_EQ(1, kt_submit(&self->r));
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(0, c.res);
}

/* The kernel never accepts a descriptor it has no CQ slot for. */
TEST_F(ring, cq_never_overflows)
{
	__u32 sq = self->r.p.sq_entries, cq = self->r.p.cq_entries, i;
	long long rej0 = kt_sysfs_read("stats/rejected");
	struct kcoll_cqe c;
	long r;

	/* Fill the CQ without reaping: cq/sq full batches. */
	for (i = 0; i < cq / sq; i++) {
		__u32 b;

		for (b = 0; b < sq; b++)
			ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, i * sq + b));
		ASSERT_EQ(sq, kt_submit(&self->r));
	}
	EXPECT_EQ(cq, kt_cq_ready(&self->r));
	/* One more is refused and stays on the SQ. */
	ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, 99999));
	r = kt_submit(&self->r);
	EXPECT_EQ(-EBUSY, r);
	EXPECT_EQ(rej0 + 1, kt_sysfs_read("stats/rejected"));
	EXPECT_EQ(cq, kt_cq_ready(&self->r));
	/* Reap one: now it goes through, and nothing was lost. */
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(0, c.user_data);
	EXPECT_EQ(1, kt_submit(&self->r));
	for (i = 1; i < cq; i++) {
		ASSERT_EQ(0, kt_pop(&self->r, &c));
		EXPECT_EQ(i, c.user_data);
	}
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(99999, c.user_data);
}

/* In-flight asynchronous work also holds CQ slots. */
TEST_F(ring, inflight_reserves_cq)
{
	__u32 sq = self->r.p.sq_entries, cq = self->r.p.cq_entries, i;
	struct kcoll_cqe c;

	for (i = 0; i < cq; i++) {
		struct kcoll_sqe *s = kt_prep(&self->r, KCOLL_OP_DELAY, i);

		ASSERT_NE(NULL, s);
		s->count = 300000;
		if ((i + 1) % sq == 0)
			ASSERT_EQ(sq, kt_submit(&self->r));
	}
	EXPECT_EQ(0, kt_cq_ready(&self->r));
	ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, 1));
	EXPECT_EQ(-EBUSY, kt_submit(&self->r));
	ASSERT_EQ(0, kt_enter(&self->r, 0, cq, KCOLL_ENTER_GETEVENTS, 0));
	for (i = 0; i < cq; i++)
		ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(1, kt_submit(&self->r));
}

TEST_F(ring, corrupt_sq_tail)
{
	struct kcoll_cqe c;

	/* A tail more than sq_entries ahead of head is refused. */
	self->r.sq_local_tail += self->r.p.sq_entries + 1;
	EXPECT_EQ(-EOVERFLOW, kt_enter(&self->r, 1, 0, 0, 0));
	self->r.sq_local_tail = 0xfffffff0;
	EXPECT_EQ(-EOVERFLOW, kt_enter(&self->r, 1, 0, 0, 0));
	/* Restored, the ring works again. */
	self->r.sq_local_tail = atomic_load(self->r.sq_head);
	ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, 3));
	ASSERT_EQ(1, kt_submit(&self->r));
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(3, c.user_data);
}

TEST_F(ring, corrupt_cq_head)
{
	__u32 good = atomic_load(self->r.cq_head);
	struct kcoll_cqe c;

	/* A head that claims more than cq_entries are pending (or is ahead of
	 * the tail) reads as a full CQ: nothing is accepted, nothing lost. */
	atomic_store(self->r.cq_head, good + 5);
	ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, 4));
	EXPECT_EQ(-EBUSY, kt_submit(&self->r));
	atomic_store(self->r.cq_head, good - self->r.p.cq_entries - 1);
	EXPECT_EQ(-EBUSY, kt_submit(&self->r));
	atomic_store(self->r.cq_head, good);
	EXPECT_EQ(1, kt_submit(&self->r));
	ASSERT_EQ(0, kt_pop(&self->r, &c));
	EXPECT_EQ(4, c.user_data);
}

TEST_F(ring, statistics_count)
{
	long long s0 = kt_sysfs_read("stats/submitted");
	long long c0 = kt_sysfs_read("stats/completed");
	struct kcoll_cqe c;
	int i;

	for (i = 0; i < 5; i++)
		ASSERT_NE(NULL, kt_prep(&self->r, KCOLL_OP_NOP, i));
	ASSERT_EQ(5, kt_submit(&self->r));
	while (!kt_pop(&self->r, &c))
		;
	/* Other tests do not run concurrently (the harness forks serially). */
	EXPECT_EQ(s0 + 5, kt_sysfs_read("stats/submitted"));
	EXPECT_EQ(c0 + 5, kt_sysfs_read("stats/completed"));
	EXPECT_LE(1, kt_sysfs_read("stats/contexts"));
}

/* Closing with asynchronous work in flight cancels it: nothing leaks. */
TEST(close_with_work_in_flight)
{
	long long ctx0 = kt_sysfs_read("stats/contexts");
	long long if0 = kt_sysfs_read("stats/inflight");
	long long f0 = kt_sysfs_read("stats/failed");
	struct tring r;
	int i;

	if (ctx0 < 0)
		SKIP(return, KCOLL_DEV " missing (module not loaded?)");
	ASSERT_EQ(0, kt_ring_init(&r, 32, 0, 0));
	for (i = 0; i < 32; i++) {
		struct kcoll_sqe *s = kt_prep(&r, KCOLL_OP_DELAY, i);

		s->count = 10000000;	/* 10 s */
	}
	ASSERT_EQ(32, kt_submit(&r));
	EXPECT_EQ(if0 + 32, kt_sysfs_read("stats/inflight"));
	EXPECT_EQ(ctx0 + 1, kt_sysfs_read("stats/contexts"));
	double t0 = now_s();

	kt_ring_exit(&r);
	EXPECT_LT(now_s() - t0, 2.0);	/* cancelled, not waited out */
	EXPECT_EQ(if0, kt_sysfs_read("stats/inflight"));
	EXPECT_EQ(ctx0, kt_sysfs_read("stats/contexts"));
	EXPECT_EQ(f0 + 32, kt_sysfs_read("stats/failed"));	/* -ECANCELED */
}

/* A process killed with work in flight and its rings mapped. */
TEST(exit_with_work_in_flight)
{
	long long ctx0 = kt_sysfs_read("stats/contexts");
	long long if0 = kt_sysfs_read("stats/inflight");
	int pipefd[2], status, round;

	if (ctx0 < 0)
		SKIP(return, KCOLL_DEV " missing (module not loaded?)");
	for (round = 0; round < 20; round++) {
		pid_t pid;
		char ok;

		ASSERT_EQ(0, pipe(pipefd));
		pid = fork();
		ASSERT_GE(pid, 0);
		if (pid == 0) {
			struct tring r;
			int i;

			close(pipefd[0]);
			if (kt_ring_init(&r, 16, 0, 0))
				_exit(1);
			for (i = 0; i < 16; i++)
				kt_prep(&r, KCOLL_OP_DELAY, i)->count = 30000000;
			if (kt_submit(&r) != 16)
				_exit(2);
			if (write(pipefd[1], "k", 1) != 1)
				_exit(3);
			if (round & 1)
				pause();	/* killed while mapped */
			_exit(0);		/* or exits without cleanup */
		}
		close(pipefd[1]);
		ASSERT_EQ(1, read(pipefd[0], &ok, 1));
		close(pipefd[0]);
		if (round & 1)
			kill(pid, SIGKILL);
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		if (!(round & 1))
			ASSERT_EQ(0, WEXITSTATUS(status));
	}
	EXPECT_EQ(if0, kt_sysfs_read("stats/inflight"));
	EXPECT_EQ(ctx0, kt_sysfs_read("stats/contexts"));
}

/* Several threads, each with its own ring, and several rings per process. */
struct worker {
	int ok;
	int id;
};

static void *ring_worker(void *arg)
{
	struct worker *w = arg;
	struct tring r;
	struct kcoll_cqe c;
	__u64 seq = 0, want = 0;
	int i;

	if (kt_ring_init(&r, 16, 0, 0))
		return NULL;
	for (i = 0; i < 500; i++) {
		while (kt_get_sqe(&r) ? (r.sqes[(r.sq_local_tail - 1) & r.sq_mask].user_data =
					 ((__u64)w->id << 32) | seq++, 1) : 0)
			;
		if (kt_submit(&r) < 0)
			goto out;
		while (!kt_pop(&r, &c)) {
			if (c.user_data != (((__u64)w->id << 32) | want) || c.res)
				goto out;
			want++;
		}
	}
	w->ok = want == seq;
out:
	kt_ring_exit(&r);
	return NULL;
}

TEST(threads_with_own_rings)
{
	pthread_t t[4];
	struct worker w[4];
	int i;

	if (access(KCOLL_DEV, R_OK | W_OK))
		SKIP(return, KCOLL_DEV " missing (module not loaded?)");
	for (i = 0; i < 4; i++) {
		w[i].ok = 0;
		w[i].id = i;
		ASSERT_EQ(0, pthread_create(&t[i], NULL, ring_worker, &w[i]));
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		EXPECT_EQ(1, w[i].ok) TH_LOG("worker %d", i);
	}
}

#include "kcoll_test_main.h"
