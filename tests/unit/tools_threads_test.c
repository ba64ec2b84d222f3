// SPDX-License-Identifier: GPL-2.0
/*
 * The text view of a threads profile (tools/threads.c): threads with the
 * same stack and labels counted together whatever their tid and thread
 * name, groups with other labels or stacks apart, the most threads first,
 * labels sorted and quoted, frames symbolized.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest/kselftest_harness.h"
#include "../../tools/profile.h"
#include "../../tools/threads.h"

struct tprof {
	struct plabel_prof *p;
	uint64_t loc_read, loc_sleep, loc_main;
};

static void tprof_init(struct tprof *t)
{
	struct plabel_prof_line read_l = { "read", "read.c", 10 };
	struct plabel_prof_line sleep_l = { "nanosleep", NULL, 0 };
	struct plabel_prof_line main_l = { "worker", "prog.c", 42 };
	uint64_t m;

	t->p = plabel_prof_new(PLABEL_PROF_THREADS, 0);
	m = plabel_prof_mapping(t->p, 0x1000, 0x9000, 0, "/bin/prog", NULL);
	t->loc_read = plabel_prof_location(t->p, m, 0x1010, &read_l, 1);
	t->loc_sleep = plabel_prof_location(t->p, m, 0x2020, &sleep_l, 1);
	t->loc_main = plabel_prof_location(t->p, m, 0x3030, &main_l, 1);
}

/* A thread blocked at leaf, called from worker, with job=JOB. */
static int add(struct tprof *t, uint64_t leaf, const char *job,
	       const char *name, int64_t tid)
{
	uint64_t locs[2] = { leaf, t->loc_main };
	struct plabel_prof_label l[3] = {
		{ "thread", name }, { "state", "sleeping" }, { "job", job },
	};

	return plabel_prof_sample(t->p, locs, 2, l, 3, 100, tid, 1, 0);
}

static char *text(struct plabel_prof *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (plabel_threads_text(p, f)) {
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	return buf;
}

TEST(groups)
{
	struct tprof t;
	char *s, *a, *b;

	tprof_init(&t);
	ASSERT_NE(NULL, t.p);
	/* one sleeper; three readers of one job with different names, tids */
	ASSERT_EQ(0, add(&t, t.loc_sleep, "b\"q", "s-1", 7));
	ASSERT_EQ(0, add(&t, t.loc_read, "a", "r-1", 8));
	ASSERT_EQ(0, add(&t, t.loc_read, "a", "r-2", 9));
	ASSERT_EQ(0, add(&t, t.loc_read, "a", "r-3", 10));
	/* a reader of another job: a group of its own */
	ASSERT_EQ(0, add(&t, t.loc_read, "c", "r-4", 11));
	s = text(t.p);
	ASSERT_NE(NULL, s);
	TH_LOG("%s", s);
	EXPECT_EQ(0, strncmp(s, "threads profile: total 5\n", 25));
	/* most threads first */
	a = strstr(s, "\n3 @ 0x1010 0x3030\n# labels: {\"job\":\"a\", "
		   "\"state\":\"sleeping\"}\n#\t0x1010\tread\tread.c:10\n"
		   "#\t0x3030\tworker\tprog.c:42\n\n");
	ASSERT_NE(NULL, a);
	b = strstr(s, "\n1 @ 0x2020 0x3030\n# labels: {\"job\":\"b\\\"q\", "
		   "\"state\":\"sleeping\"}\n#\t0x2020\tnanosleep\n");
	ASSERT_NE(NULL, b);
	EXPECT_LT(a, b);
	/* the other job's reader apart, after the sleeper (it came first) */
	b = strstr(b, "\n1 @ 0x1010 0x3030\n# labels: {\"job\":\"c\"");
	EXPECT_NE(NULL, b);
	/* names and tids are not in the text */
	EXPECT_EQ(NULL, strstr(s, "r-2"));
	free(s);
	plabel_prof_free(t.p);
}

/* Many groups: each found again by its hash, none merged with another. */
TEST(many)
{
	struct tprof t;
	char job[16], name[16], *s, *p;
	int i, groups = 0, threes = 0;

	tprof_init(&t);
	ASSERT_NE(NULL, t.p);
	for (i = 0; i < 3000; i++) {
		snprintf(job, sizeof(job), "j%d", i % 1000);
		snprintf(name, sizeof(name), "t%d", i);
		ASSERT_EQ(0, add(&t, i % 2 ? t.loc_read : t.loc_sleep, job,
				 name, 100 + i));
	}
	s = text(t.p);
	ASSERT_NE(NULL, s);
	EXPECT_EQ(0, strncmp(s, "threads profile: total 3000\n", 28));
	/* job jN: threads N, N + 1000, N + 2000, all at the same leaf */
	for (p = s; (p = strstr(p, "\n")); p++) {
		if (p[1] >= '1' && p[1] <= '9' && strstr(p + 1, " @ ") ==
		    strchr(p + 1, ' ')) {
			groups++;
			threes += p[1] == '3';
		}
	}
	EXPECT_EQ(1000, groups);
	EXPECT_EQ(1000, threes);
	free(s);
	plabel_prof_free(t.p);
}

TEST(empty)
{
	struct plabel_prof *p = plabel_prof_new(PLABEL_PROF_THREADS, 0);
	char *s;

	ASSERT_NE(NULL, p);
	s = text(p);
	ASSERT_NE(NULL, s);
	EXPECT_STREQ("threads profile: total 0\n", s);
	free(s);
	plabel_prof_free(p);
}

TEST_HARNESS_MAIN
