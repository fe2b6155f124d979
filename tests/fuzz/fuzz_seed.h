/* SPDX-License-Identifier: MIT */
/*
 * Seeds of the host fuzzers are generated, not committed: started with
 * KCOLL_FUZZ_SEEDS=DIR (tests/fuzz/run.sh), a target writes its records
 * there from LLVMFuzzerInitialize() and exits.
 */
#ifndef KCOLL_FUZZ_SEED_H
#define KCOLL_FUZZ_SEED_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Write @len bytes of @rec to DIR/<printf(@fmt, ...)>; exit(1) if that
 * fails. */
static inline __attribute__((format(printf, 4, 5)))
void fuzz_seed_write(const char *dir, const void *rec, size_t len,
		     const char *fmt, ...)
{
	char name[256], path[4096];
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(rec, len, 1, f) != 1 || fclose(f)) {
		perror(path);
		exit(1);
	}
}

#endif /* KCOLL_FUZZ_SEED_H */
