/* SPDX-License-Identifier: GPL-2.0 */
/*
 * main() of every kcoll selftest binary, included last in place of
 * TEST_HARNESS_MAIN: the harness's own main(), after dropping every test
 * that KCOLL_SELFTEST_ONLY does not name, when that is set. Its words
 * (spaces or commas between them) are "fixture.test" names as the TAP
 * lines print them, without a variant: a kept test runs in every variant.
 *
 *   KCOLL_SELFTEST_ONLY=rxe.several_qps_per_peer build/tests/bin/kcoll_comm_test
 *
 * Debian 12's harness has no filter of its own (later ones have -t). A
 * name that matches no test of the binary is an error: a run of nothing
 * would pass.
 */
#ifndef KCOLL_TEST_MAIN_H
#define KCOLL_TEST_MAIN_H

int kt_harness_main(int argc, char **argv);

#define main kt_harness_main
TEST_HARNESS_MAIN
#undef main

/* Whether the @len bytes at @w name test @t of fixture @f. */
static int kt_only_is(const char *w, size_t len,
		      const struct __fixture_metadata *f,
		      const struct __test_metadata *t)
{
	size_t lf = strlen(f->name);

	return len == lf + 1 + strlen(t->name) && !strncmp(w, f->name, lf) &&
	       w[lf] == '.' && !strncmp(w + lf + 1, t->name, len - lf - 1);
}

/* Whether @only names test @t of fixture @f. */
static int kt_only_names(const char *only, const struct __fixture_metadata *f,
			 const struct __test_metadata *t)
{
	const char *w = only + strspn(only, " ,");

	while (*w) {
		size_t len = strcspn(w, " ,");

		if (kt_only_is(w, len, f, t))
			return 1;
		w += len;
		w += strspn(w, " ,");
	}
	return 0;
}

/*
 * Keep only the tests @only names, in their order (the harness walks
 * ->next; ->prev of a list's head is its tail). 0, or -1 when a name
 * matches no test.
 */
static int kt_only_filter(const char *only)
{
	struct __test_metadata *t, *next, *head, *tail;
	struct __fixture_metadata *f;
	const char *w;

	for (f = __fixture_list; f; f = f->next) {
		head = tail = NULL;
		for (t = f->tests; t; t = next) {
			next = t->next;
			if (!kt_only_names(only, f, t))
				continue;
			t->next = NULL;
			if (tail)
				tail->next = t;
			else
				head = t;
			t->prev = tail;
			tail = t;
		}
		if (head)
			head->prev = tail;
		f->tests = head;
	}
	for (w = only + strspn(only, " ,"); *w; w += strspn(w, " ,")) {
		size_t len = strcspn(w, " ,");
		int hit = 0;

		for (f = __fixture_list; f && !hit; f = f->next)
			for (t = f->tests; t && !hit; t = t->next)
				hit = kt_only_is(w, len, f, t);
		if (!hit) {
			fprintf(stderr, "KCOLL_SELFTEST_ONLY: no test '%.*s' in this binary\n",
				(int)len, w);
			return -1;
		}
		w += len;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *only = getenv("KCOLL_SELFTEST_ONLY");

	if (only && only[strspn(only, " ,")] && kt_only_filter(only))
		return 1;
	return kt_harness_main(argc, argv);
}

#endif /* KCOLL_TEST_MAIN_H */
