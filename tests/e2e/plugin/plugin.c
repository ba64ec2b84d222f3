// SPDX-License-Identifier: GPL-2.0
/*
 * A shared library that tests/e2e/progs/dlopen.c loads after it started
 * and spends its time in: samples in plugin_spin() name it only when the
 * kernel's mapping records showed the library and plabel read its
 * symbols.
 */
#include "../progs/burn.h"

void plugin_spin(int64_t ns);

static volatile uint64_t plugin_sink;

__attribute__((noinline)) void plugin_spin(int64_t ns)
{
	int64_t end = plabel_e2e_cpu_ns() + ns;
	uint64_t x = 11;

	while (plabel_e2e_cpu_ns() < end)
		for (int i = 0; i < 100000; i++)
			plugin_sink = x = x * 3935559000370003845ULL + 13;
}
