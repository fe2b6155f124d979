// SPDX-License-Identifier: MIT
/*
 * Links the /dev/kcoll model into an unmodified program (kcoll-colltest,
 * kcoll-perf): started before main(), stopped at exit. For single-rank
 * smoke tests on a host without the module (tests/unit/test_tools_model.sh).
 */
#include <stdlib.h>

#include "kcoll_model.h"

static __attribute__((constructor)) void kcoll_model_auto_start(void)
{
	const char *d = getenv("KCOLL_MODEL_DELAY_US");

	kcoll_model_start(d ? (unsigned int)atoi(d) : 100, 1);
}

static __attribute__((destructor)) void kcoll_model_auto_stop(void)
{
	kcoll_model_stop();
}
