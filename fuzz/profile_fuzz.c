// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for the pprof reader: gunzip, protobuf decoding and
 * the checks of every index and id. An input the reader accepts must also
 * survive everything downstream: every accessor, re-encoding (which must
 * decode again to the same counts) and `plabel report` in both views.
 *
 *   make build/fuzz/profile_fuzz && fuzz/run.sh 60 profile
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "profile.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int plabel_fuzz_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int null = open("/dev/null", O_WRONLY);

	/* report's text goes nowhere; libFuzzer talks on stderr */
	if (null >= 0) {
		dup2(null, STDOUT_FILENO);
		close(null);
	}
	plabel_fuzz_fd = memfd_create("plabel-profile-fuzz", MFD_CLOEXEC);
	return 0;
}

static size_t plabel_fuzz_touch(const char *s)
{
	return s ? strlen(s) : 0;
}

static void plabel_fuzz_walk(const struct plabel_prof *p)
{
	size_t i, j, n = plabel_prof_num_values(p), sum = 0;

	for (i = 0; i < n; i++) {
		sum += plabel_fuzz_touch(plabel_prof_sample_type(p, i).type);
		sum += plabel_fuzz_touch(plabel_prof_sample_type(p, i).unit);
	}
	if (n && plabel_prof_default_index(p) >= n)
		__builtin_trap();
	for (i = 0; i < plabel_prof_num_comments(p); i++)
		sum += plabel_fuzz_touch(plabel_prof_comment(p, i));
	for (i = 0; i < plabel_prof_num_mappings(p); i++) {
		struct plabel_prof_mapping_info m;

		plabel_prof_get_mapping(p, i, &m);
		sum += plabel_fuzz_touch(m.file) + plabel_fuzz_touch(m.build_id);
	}
	for (i = 0; i < plabel_prof_num_locations(p); i++) {
		struct plabel_prof_location_info l;

		plabel_prof_get_location(p, i, &l);
		for (j = 0; j < l.nlines; j++)
			sum += plabel_fuzz_touch(l.lines[j].function) +
			       plabel_fuzz_touch(l.lines[j].file);
	}
	for (i = 0; i < plabel_prof_num_samples(p); i++) {
		struct plabel_prof_sample_info s;
		struct plabel_prof_location_info l;

		plabel_prof_get_sample(p, i, &s);
		for (j = 0; j < s.nlocs; j++)
			if (plabel_prof_find_location(p, s.loc_ids[j], &l))
				__builtin_trap();	/* reader let it through */
		for (j = 0; j < n; j++)
			sum += (size_t)s.values[j];
		for (j = 0; j < s.nlabels; j++)
			sum += plabel_fuzz_touch(s.labels[j].key) +
			       plabel_fuzz_touch(s.labels[j].value);
		for (j = 0; j < s.nnumlabels; j++)
			sum += plabel_fuzz_touch(s.numlabels[j].key) +
			       plabel_fuzz_touch(s.numlabels[j].unit);
	}
	/* keep the reads */
	__asm__ volatile("" : : "r"(sum));
}

static void plabel_fuzz_report(const uint8_t *data, size_t size)
{
	char path[64];
	char *tags[] = { "report", "--tags", path, NULL };
	char *top[] = { "report", "--top=3", path, NULL };

	if (plabel_fuzz_fd < 0 || ftruncate(plabel_fuzz_fd, 0) ||
	    pwrite(plabel_fuzz_fd, data, size, 0) != (ssize_t)size)
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", plabel_fuzz_fd);
	if (plabel_cmd_report(3, top) || plabel_cmd_report(3, tags))
		__builtin_trap();	/* it read the file a moment ago */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct plabel_prof *p, *q;
	const char *err = NULL;
	uint8_t *buf;
	bool has_types;
	size_t len;
	int ret;

	ret = plabel_prof_decode(data, size, &p, &err);
	if (ret) {
		if (!err || ret >= 0)
			__builtin_trap();
		return 0;
	}
	plabel_fuzz_walk(p);
	if (!plabel_prof_encode(p, &buf, &len)) {
		if (plabel_prof_decode(buf, len, &q, &err) ||
		    plabel_prof_num_samples(q) != plabel_prof_num_samples(p) ||
		    plabel_prof_num_locations(q) !=
			    plabel_prof_num_locations(p) ||
		    plabel_prof_num_mappings(q) != plabel_prof_num_mappings(p))
			__builtin_trap();
		plabel_prof_free(q);
		free(buf);
	}
	/* report needs a sample type to show */
	has_types = plabel_prof_num_values(p) > 0;
	plabel_prof_free(p);
	if (has_types)
		plabel_fuzz_report(data, size);
	return 0;
}
