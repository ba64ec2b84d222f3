// SPDX-License-Identifier: GPL-2.0
/*
 * Prints the labels this process started with (plabel_get(): inherited,
 * e.g. from plabel run), one KEY=VALUE a line, sorted by key.
 */
#include <plabel.h>
#include <stdio.h>

int main(void)
{
	struct plabel_kv kv[64];
	int n = plabel_get(kv, 64);

	if (n < 0) {
		fprintf(stderr, "plabel_get failed: %d\n", n);
		return 1;
	}
	for (int i = 0; i < n && i < 64; i++)
		printf("%s=%s\n", kv[i].key, kv[i].value);
	return 0;
}
