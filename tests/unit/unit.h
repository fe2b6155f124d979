/* SPDX-License-Identifier: MIT */
/*
 * Minimal host unit-test helper for kcoll (one test program per .c file).
 *
 *	static void test_foo(void)
 *	{
 *		UNIT_CHECK(1 + 1 == 2);
 *		UNIT_EQ_INT(f(), -EINVAL);
 *	}
 *
 *	int main(int argc, char **argv)
 *	{
 *		unit_init(argc, argv);
 *		UNIT_RUN(test_foo);
 *		return unit_done();
 *	}
 *
 * Output, one line per test: "ok N name" or "not ok N name", preceded by
 * "# file:line: ..." diagnostics for failed checks; finally
 * "<prog>: P passed, F failed". unit_done() returns the exit status.
 * A failed check does not stop the test; the CHECK macros evaluate to
 * true when the check passed, so loops can bail out early:
 *	if (!UNIT_EQ_INT(a, b)) return;
 * An optional command-line argument runs only the tests whose name contains
 * it. UNIT_SHARD=K/N in the environment runs only every Nth test from the
 * Kth (0-based) on, so that N processes share a long program's tests.
 */
#ifndef KCOLL_UNIT_H
#define KCOLL_UNIT_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Diagnostics printed per test before the rest are only counted. */
#define UNIT_MAX_DIAG	12

struct unit_state {
	const char *prog;
	const char *filter;
	unsigned int shard, nshards;	/* UNIT_SHARD; nshards 0: all */
	unsigned int seen;		/* UNIT_RUN()s so far, run or not */
	unsigned int nr;		/* tests run so far */
	unsigned int passed;
	unsigned int failed;
	unsigned long cur_fails;	/* failed checks in the current test */
};

/* One per program, also when a test is built from several files (a weak
 * definition in each). */
__attribute__((weak)) struct unit_state unit_st = { .prog = "unit" };

static inline void unit_init(int argc, char **argv)
{
	const char *p = argc > 0 && argv[0] ? strrchr(argv[0], '/') : NULL;
	const char *shard = getenv("UNIT_SHARD");

	unit_st.prog = p ? p + 1 : (argc > 0 && argv[0] ? argv[0] : "unit");
	unit_st.filter = argc > 1 ? argv[1] : NULL;
	if (shard && sscanf(shard, "%u/%u", &unit_st.shard,
			    &unit_st.nshards) != 2)
		unit_st.nshards = 0;
	if (unit_st.shard >= unit_st.nshards)
		unit_st.nshards = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* Record a failed check; prints the first few of each test. */
static inline __attribute__((format(printf, 3, 4)))
void unit_failf(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	if (unit_st.cur_fails++ >= UNIT_MAX_DIAG)
		return;
	printf("# %s:%d: ", file, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* Free-form diagnostic line (not a failure). */
static inline __attribute__((format(printf, 1, 2)))
void unit_diag(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static inline bool unit_check(bool ok, const char *file, int line,
			      const char *expr)
{
	if (!ok)
		unit_failf(file, line, "check failed: %s", expr);
	return ok;
}

static inline bool unit_eq_int(intmax_t a, intmax_t b, const char *file,
			       int line, const char *ea, const char *eb)
{
	if (a != b)
		unit_failf(file, line, "%s == %s: %jd != %jd", ea, eb, a, b);
	return a == b;
}

static inline bool unit_eq_uint(uintmax_t a, uintmax_t b, const char *file,
				int line, const char *ea, const char *eb)
{
	if (a != b)
		unit_failf(file, line, "%s == %s: %ju (0x%jx) != %ju (0x%jx)",
			   ea, eb, a, a, b, b);
	return a == b;
}

static inline bool unit_eq_str(const char *a, const char *b, const char *file,
			       int line, const char *ea, const char *eb)
{
	bool ok = a && b ? !strcmp(a, b) : a == b;

	if (!ok)
		unit_failf(file, line, "%s == %s: \"%s\" != \"%s\"", ea, eb,
			   a ? a : "(null)", b ? b : "(null)");
	return ok;
}

#define UNIT_CHECK(cond) \
	unit_check(!!(cond), __FILE__, __LINE__, #cond)
#define UNIT_EQ_INT(a, b) \
	unit_eq_int((intmax_t)(a), (intmax_t)(b), __FILE__, __LINE__, #a, #b)
#define UNIT_EQ_UINT(a, b) \
	unit_eq_uint((uintmax_t)(a), (uintmax_t)(b), __FILE__, __LINE__, \
		     #a, #b)
#define UNIT_EQ_STR(a, b) \
	unit_eq_str((a), (b), __FILE__, __LINE__, #a, #b)
#define UNIT_FAIL(...) \
	unit_failf(__FILE__, __LINE__, __VA_ARGS__)

/* Failed checks so far in the running test (to stop long loops early). */
static inline unsigned long unit_fails(void)
{
	return unit_st.cur_fails;
}

static inline void unit_run(const char *name, void (*fn)(void))
{
	if (unit_st.nshards &&
	    unit_st.seen++ % unit_st.nshards != unit_st.shard)
		return;
	if (unit_st.filter && !strstr(name, unit_st.filter))
		return;
	unit_st.cur_fails = 0;
	unit_st.nr++;
	fn();
	if (unit_st.cur_fails > UNIT_MAX_DIAG)
		printf("# ... %lu failed checks in all\n", unit_st.cur_fails);
	if (unit_st.cur_fails) {
		unit_st.failed++;
		printf("not ok %u %s\n", unit_st.nr, name);
	} else {
		unit_st.passed++;
		printf("ok %u %s\n", unit_st.nr, name);
	}
	fflush(stdout);
}

#define UNIT_RUN(fn)	unit_run(#fn, fn)

/* A test of what the process's earlier tests did together: in every
 * UNIT_SHARD (each checks its own share), still subject to a filter. */
static inline void unit_run_every_shard(const char *name, void (*fn)(void))
{
	unsigned int n = unit_st.nshards;

	unit_st.nshards = 0;
	unit_run(name, fn);
	unit_st.nshards = n;
}

/* Prints the summary; returns the process exit status. */
static inline int unit_done(void)
{
	printf("%s: %u passed, %u failed\n", unit_st.prog, unit_st.passed,
	       unit_st.failed);
	if (!unit_st.nr) {
		printf("%s: no test matched\n", unit_st.prog);
		return 1;
	}
	return unit_st.failed ? 1 : 0;
}

/* Small deterministic PRNG (xorshift64*), for reproducible random tests. */
struct unit_rng {
	uint64_t s;
};

static inline void unit_rng_seed(struct unit_rng *r, uint64_t seed)
{
	r->s = seed ? seed : 0x9e3779b97f4a7c15ULL;
}

static inline uint64_t unit_rng_next(struct unit_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dULL;
}

/* Uniform in [0, n]; n may be UINT32_MAX. */
static inline uint32_t unit_rng_upto(struct unit_rng *r, uint32_t n)
{
	return (uint32_t)((unit_rng_next(r) >> 32) % ((uint64_t)n + 1));
}

/* Seed from $UNIT_SEED if set, else @def; printed so a run can be redone. */
static inline uint64_t unit_seed(uint64_t def)
{
	const char *s = getenv("UNIT_SEED");
	uint64_t seed = s && *s ? strtoull(s, NULL, 0) : def;

	unit_diag("seed 0x%" PRIx64 " (set UNIT_SEED to override)", seed);
	return seed;
}

#endif /* KCOLL_UNIT_H */
