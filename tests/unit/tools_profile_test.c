// SPDX-License-Identifier: GPL-2.0
/*
 * The pprof side of the plabel tool: build profiles through the API, write
 * them, read them back and check every field; feed the reader corrupt,
 * truncated and inconsistent files; and check that `plabel report` prints
 * exactly what `go tool pprof` prints for the same files (skipped when
 * `go` is not installed).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "kselftest/kselftest_harness.h"
#include "proto/profile.pb-c.h"
#include "../../tools/profile.h"

#define NS_PER_MS 1000000LL

static char tmp_dir[64];

/* A file in this test's scratch directory (made on first use). */
static char *tmp_path(const char *name)
{
	char *dir = tmp_dir;
	char *p;

	if (!dir[0]) {
		snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/plabel-prof-test.XXXXXX");
		if (!mkdtemp(dir))
			return NULL;
	}
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

static void tmp_cleanup(void)
{
	char cmd[96];

	if (!tmp_dir[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
	if (system(cmd))
		fprintf(stderr, "# could not remove %s\n", tmp_dir);
	tmp_dir[0] = '\0';
}

/* Whole output of a shell command (stderr discarded); NULL on failure. */
static char *run_cmd(const char *cmd, int *status)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	FILE *f = popen(cmd, "r");
	size_t n;

	if (!buf || !f) {
		free(buf);
		if (f)
			pclose(f);
		return NULL;
	}
	while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 2) {
			char *nb = realloc(buf, cap * 2);

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	buf[len] = '\0';
	*status = pclose(f);
	return buf;
}

/* Output of plabel_cmd_report(args..) run in this process. */
static char *run_report(int *status, int argc, const char **args)
{
	char *path = tmp_path("report.out");
	char *argv[16];
	int fd, saved, i;
	char *buf;
	struct stat st;

	if (!path || argc > 15)
		return NULL;
	argv[0] = "report";
	for (i = 0; i < argc; i++)
		argv[i + 1] = (char *)args[i];
	argv[argc + 1] = NULL;
	fflush(stdout);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return NULL;
	saved = dup(STDOUT_FILENO);
	dup2(fd, STDOUT_FILENO);
	*status = plabel_cmd_report(argc + 1, argv);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	fstat(fd, &st);
	buf = calloc(1, st.st_size + 1);
	if (buf && pread(fd, buf, st.st_size, 0) != st.st_size) {
		free(buf);
		buf = NULL;
	}
	close(fd);
	free(path);
	return buf;
}

static bool have_go(void)
{
	return !system("command -v go >/dev/null 2>&1");
}

static char *pprof(const char *args, const char *file, int *status)
{
	char *cmd, *out;

	if (asprintf(&cmd,
		     "GOFLAGS=-mod=mod GOPROXY=off TZ=UTC go tool pprof %s '%s' 2>/dev/null",
		     args, file) < 0)
		return NULL;
	out = run_cmd(cmd, status);
	free(cmd);
	return out;
}

/* A small profile whose numbers are worked out by hand in the tests. */
static struct plabel_prof *small_profile(void)
{
	struct plabel_prof *p = plabel_prof_new(PLABEL_PROF_CPU, 10 * NS_PER_MS);
	struct plabel_prof_line work[] = {
		{ "inl", "a.c", 3 }, { "work", "a.c", 10 },
	};
	struct plabel_prof_line mainl[] = { { "main", "a.c", 20 } };
	struct plabel_prof_line other[] = { { "other", "b.c", 5 } };
	struct plabel_prof_label users[] = {
		{ "tenant", "acme" }, { "endpoint", "/api/users" },
	};
	struct plabel_prof_label items[] = { { "endpoint", "/api/items" } };
	uint64_t m, a, b, c, d, s1[2], s2[2], s3[2];

	if (!p)
		return NULL;
	m = plabel_prof_mapping(p, 0x400000, 0x500000, 0x1000, "/usr/bin/demo",
				"abcd");
	a = plabel_prof_location(p, m, 0x401000, work, 2);
	b = plabel_prof_location(p, m, 0x402000, mainl, 1);
	c = plabel_prof_location(p, m, 0x403000, other, 1);
	d = plabel_prof_location(p, m, 0x404000, NULL, 0);
	s1[0] = a, s1[1] = b;
	s2[0] = c, s2[1] = b;
	s3[0] = d, s3[1] = b;
	/* users: 600ms in inl (inlined into work), called from main */
	plabel_prof_sample(p, s1, 2, users, 2, 100, 101, 30, 300 * NS_PER_MS);
	plabel_prof_sample(p, s1, 2, users, 2, 100, 101, 30, 300 * NS_PER_MS);
	/* items: 500ms in other */
	plabel_prof_sample(p, s2, 2, items, 1, 100, 102, 50, 500 * NS_PER_MS);
	/* 4ms unsymbolized, no labels: below the 0.5% node cutoff */
	plabel_prof_sample(p, s3, 2, NULL, 0, -1, -1, 1, 4 * NS_PER_MS);
	plabel_prof_set_time(p, 1700000000000000000LL, 2000 * NS_PER_MS);
	plabel_prof_add_comment(p, "recorded by a test");
	return p;
}

static bool encodes_like_small(const struct plabel_prof *p)
{
	struct plabel_prof *p2 = small_profile();
	uint8_t *b1 = NULL, *b2 = NULL;
	size_t l1, l2;
	bool same;

	same = p2 && !plabel_prof_encode(p, &b1, &l1) &&
	       !plabel_prof_encode(p2, &b2, &l2) && l1 == l2 &&
	       !memcmp(b1, b2, l1);
	free(b1);
	free(b2);
	plabel_prof_free(p2);
	return same;
}

TEST(roundtrip_every_field)
{
	struct plabel_prof *p = small_profile(), *q;
	struct plabel_prof_sample_info si;
	struct plabel_prof_location_info li;
	struct plabel_prof_mapping_info mi;
	char *path = tmp_path("small.pb.gz");
	const char *err = NULL;

	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, plabel_prof_write(p, path));
	ASSERT_EQ(0, plabel_prof_read(path, &q, &err));

	ASSERT_EQ(2, plabel_prof_num_values(q));
	EXPECT_STREQ("samples", plabel_prof_sample_type(q, 0).type);
	EXPECT_STREQ("count", plabel_prof_sample_type(q, 0).unit);
	EXPECT_STREQ("cpu", plabel_prof_sample_type(q, 1).type);
	EXPECT_STREQ("nanoseconds", plabel_prof_sample_type(q, 1).unit);
	EXPECT_STREQ("cpu", plabel_prof_period_type(q).type);
	EXPECT_STREQ("nanoseconds", plabel_prof_period_type(q).unit);
	EXPECT_EQ(10 * NS_PER_MS, plabel_prof_period(q));
	EXPECT_EQ(1, plabel_prof_default_index(q));
	EXPECT_EQ(1700000000000000000LL, plabel_prof_time_nanos(q));
	EXPECT_EQ(2000 * NS_PER_MS, plabel_prof_duration_nanos(q));
	ASSERT_EQ(1, plabel_prof_num_comments(q));
	EXPECT_STREQ("recorded by a test", plabel_prof_comment(q, 0));
	EXPECT_STREQ("", plabel_prof_drop_frames(q));

	ASSERT_EQ(1, plabel_prof_num_mappings(q));
	plabel_prof_get_mapping(q, 0, &mi);
	EXPECT_EQ(1, mi.id);
	EXPECT_EQ(0x400000, mi.start);
	EXPECT_EQ(0x500000, mi.limit);
	EXPECT_EQ(0x1000, mi.offset);
	EXPECT_STREQ("/usr/bin/demo", mi.file);
	EXPECT_STREQ("abcd", mi.build_id);

	ASSERT_EQ(4, plabel_prof_num_locations(q));
	ASSERT_EQ(0, plabel_prof_find_location(q, 1, &li));
	EXPECT_EQ(1, li.mapping_id);
	EXPECT_EQ(0x401000, li.address);
	ASSERT_EQ(2, li.nlines);
	EXPECT_STREQ("inl", li.lines[0].function);
	EXPECT_STREQ("a.c", li.lines[0].file);
	EXPECT_EQ(3, li.lines[0].line);
	EXPECT_STREQ("work", li.lines[1].function);
	EXPECT_EQ(10, li.lines[1].line);
	ASSERT_EQ(0, plabel_prof_find_location(q, 4, &li));
	EXPECT_EQ(0, li.nlines);
	EXPECT_EQ(-ENOENT, plabel_prof_find_location(q, 5, &li));

	/* the two identical samples were merged */
	ASSERT_EQ(3, plabel_prof_num_samples(q));
	plabel_prof_get_sample(q, 0, &si);
	ASSERT_EQ(2, si.nlocs);
	EXPECT_EQ(1, si.loc_ids[0]);
	EXPECT_EQ(2, si.loc_ids[1]);
	EXPECT_EQ(60, si.values[0]);
	EXPECT_EQ(600 * NS_PER_MS, si.values[1]);
	ASSERT_EQ(2, si.nlabels);
	/* stored sorted by key */
	EXPECT_STREQ("endpoint", si.labels[0].key);
	EXPECT_STREQ("/api/users", si.labels[0].value);
	EXPECT_STREQ("tenant", si.labels[1].key);
	EXPECT_STREQ("acme", si.labels[1].value);
	ASSERT_EQ(2, si.nnumlabels);
	EXPECT_STREQ("pid", si.numlabels[0].key);
	EXPECT_EQ(100, si.numlabels[0].num);
	EXPECT_STREQ("tid", si.numlabels[1].key);
	EXPECT_EQ(101, si.numlabels[1].num);
	plabel_prof_get_sample(q, 2, &si);
	EXPECT_EQ(0, si.nlabels);
	EXPECT_EQ(0, si.nnumlabels);
	EXPECT_EQ(4 * NS_PER_MS, si.values[1]);

	/* equal profiles encode to equal bytes */
	EXPECT_TRUE(encodes_like_small(p));
	plabel_prof_free(p);
	plabel_prof_free(q);
	free(path);
	tmp_cleanup();
}

TEST(builder_dedup_and_errors)
{
	struct plabel_prof *p = plabel_prof_new(PLABEL_PROF_CPU, 1000);
	struct plabel_prof_line l1 = { "f", "f.c", 1 }, l2 = { "g", "f.c", 2 };
	struct plabel_prof_label dup[] = { { "k", "a" }, { "k", "b" } };
	struct plabel_prof_label nullv[] = { { "k", NULL } };
	uint64_t m1, m2, a, b, bad = 99;

	ASSERT_NE(NULL, p);
	m1 = plabel_prof_mapping(p, 0x1000, 0x2000, 0, "/bin/x", NULL);
	m2 = plabel_prof_mapping(p, 0x1000, 0x2000, 0, "/bin/x", NULL);
	EXPECT_EQ(1, m1);
	EXPECT_EQ(m1, m2);
	EXPECT_EQ(2, plabel_prof_mapping(p, 0x1000, 0x2000, 0, "/bin/y", NULL));
	EXPECT_EQ(3, plabel_prof_mapping(p, 0x1000, 0x2000, 0, "/bin/x", "ff"));

	a = plabel_prof_location(p, m1, 0x1100, &l1, 1);
	/* same (mapping, address): same id, the first lines win */
	b = plabel_prof_location(p, m1, 0x1100, &l2, 1);
	EXPECT_EQ(a, b);
	EXPECT_NE(a, plabel_prof_location(p, 0, 0x1100, &l1, 1));
	/* a mapping that does not exist */
	EXPECT_EQ(0, plabel_prof_location(p, 42, 0x1100, &l1, 1));

	EXPECT_EQ(-EINVAL, plabel_prof_sample(p, &bad, 1, NULL, 0, -1, -1, 1, 1));
	EXPECT_EQ(-EINVAL, plabel_prof_sample(p, &a, 1, dup, 2, -1, -1, 1, 1));
	EXPECT_EQ(-EINVAL, plabel_prof_sample(p, &a, 1, nullv, 1, -1, -1, 1, 1));
	EXPECT_EQ(0, plabel_prof_num_samples(p));
	/* an empty stack is a valid sample */
	EXPECT_EQ(0, plabel_prof_sample(p, NULL, 0, NULL, 0, -1, -1, 1, 1));
	EXPECT_EQ(1, plabel_prof_num_samples(p));
	plabel_prof_free(p);
}

/* Label sets make the same profile as labels passed with every sample. */
TEST(label_sets)
{
	struct plabel_prof *p = plabel_prof_new(PLABEL_PROF_CPU, 10 * NS_PER_MS);
	struct plabel_prof_line work[] = {
		{ "inl", "a.c", 3 }, { "work", "a.c", 10 },
	};
	struct plabel_prof_line mainl[] = { { "main", "a.c", 20 } };
	struct plabel_prof_line other[] = { { "other", "b.c", 5 } };
	struct plabel_prof_label users[] = {
		{ "tenant", "acme" }, { "endpoint", "/api/users" },
	};
	struct plabel_prof_label items[] = { { "endpoint", "/api/items" } };
	struct plabel_prof_label dup[] = { { "k", "a" }, { "k", "b" } };
	struct plabel_prof_label nullv[] = { { "k", NULL } };
	uint64_t m, a, b, c, d, s1[2], s2[2], s3[2], bad = 99;
	struct plabel_prof_sample_info si;
	uint32_t users_set, items_set, again, id = 0;
	struct plabel_prof *q;
	const char *err;
	uint8_t *buf;
	size_t len;

	ASSERT_NE(NULL, p);
	m = plabel_prof_mapping(p, 0x400000, 0x500000, 0x1000, "/usr/bin/demo",
				"abcd");
	a = plabel_prof_location(p, m, 0x401000, work, 2);
	b = plabel_prof_location(p, m, 0x402000, mainl, 1);
	c = plabel_prof_location(p, m, 0x403000, other, 1);
	d = plabel_prof_location(p, m, 0x404000, NULL, 0);
	s1[0] = a, s1[1] = b;
	s2[0] = c, s2[1] = b;
	s3[0] = d, s3[1] = b;
	/* small_profile() with sets: strings interned in the same order */
	ASSERT_EQ(0, plabel_prof_labelset(p, users, 2, &users_set));
	EXPECT_EQ(0, plabel_prof_sample_labelset(p, s1, 2, users_set, 100, 101,
						 30, 300 * NS_PER_MS));
	EXPECT_EQ(0, plabel_prof_sample_labelset(p, s1, 2, users_set, 100, 101,
						 30, 300 * NS_PER_MS));
	ASSERT_EQ(0, plabel_prof_labelset(p, items, 1, &items_set));
	EXPECT_NE(users_set, items_set);
	EXPECT_EQ(0, plabel_prof_sample_labelset(p, s2, 2, items_set, 100, 102,
						 50, 500 * NS_PER_MS));
	EXPECT_EQ(0, plabel_prof_sample_labelset(p, s3, 2, 0, -1, -1, 1,
						 4 * NS_PER_MS));
	plabel_prof_set_time(p, 1700000000000000000LL, 2000 * NS_PER_MS);
	plabel_prof_add_comment(p, "recorded by a test");
	EXPECT_TRUE(encodes_like_small(p));

	/* the rules of plabel_prof_sample() */
	EXPECT_EQ(-EINVAL, plabel_prof_labelset(p, dup, 2, &id));
	EXPECT_EQ(-EINVAL, plabel_prof_labelset(p, nullv, 1, &id));
	EXPECT_EQ(-EINVAL, plabel_prof_labelset(p, NULL, 1, &id));
	EXPECT_EQ(0, id);
	EXPECT_EQ(-EINVAL, plabel_prof_sample_labelset(p, s1, 2, 99, -1, -1, 1,
							1));
	EXPECT_EQ(-EINVAL, plabel_prof_sample_labelset(p, &bad, 1, users_set,
							-1, -1, 1, 1));
	EXPECT_EQ(-EINVAL, plabel_prof_sample_labelset(p, NULL, 1, users_set,
							-1, -1, 1, 1));
	ASSERT_EQ(3, plabel_prof_num_samples(p));

	/* a new set of the same labels, or the labels given again, merge */
	ASSERT_EQ(0, plabel_prof_labelset(p, users, 2, &again));
	EXPECT_NE(users_set, again);
	EXPECT_EQ(0, plabel_prof_sample_labelset(p, s1, 2, again, 100, 101, 1,
						 1));
	EXPECT_EQ(0, plabel_prof_sample(p, s1, 2, users, 2, 100, 101, 1, 1));
	ASSERT_EQ(3, plabel_prof_num_samples(p));
	plabel_prof_get_sample(p, 0, &si);
	EXPECT_EQ(62, si.values[0]);
	EXPECT_EQ(600 * NS_PER_MS + 2, si.values[1]);
	ASSERT_EQ(2, si.nlabels);
	EXPECT_STREQ("endpoint", si.labels[0].key);
	EXPECT_STREQ("tenant", si.labels[1].key);

	/* a profile read back is not built on */
	ASSERT_EQ(0, plabel_prof_encode(p, &buf, &len));
	ASSERT_EQ(0, plabel_prof_decode(buf, len, &q, &err));
	EXPECT_EQ(-EINVAL, plabel_prof_labelset(q, items, 1, &id));
	EXPECT_EQ(-EINVAL, plabel_prof_sample_labelset(q, NULL, 0, 0, -1, -1,
							1, 1));
	free(buf);
	plabel_prof_free(q);
	plabel_prof_free(p);
}

TEST(main_mapping_written_first)
{
	struct plabel_prof *p = plabel_prof_new(PLABEL_PROF_CPU, 1000), *q;
	struct plabel_prof_mapping_info mi;
	struct plabel_prof_location_info li;
	struct plabel_prof_line l = { "main", "app.c", 3 };
	uint64_t kmap, libc, app, loc;
	const char *err;
	uint8_t *buf;
	size_t len;

	ASSERT_NE(NULL, p);
	kmap = plabel_prof_mapping(p, 0xffffffff80000000ULL, UINT64_MAX, 0,
				   "[kernel.kallsyms]", NULL);
	libc = plabel_prof_mapping(p, 0x7f0000000000, 0x7f0000100000, 0,
				   "/usr/lib/libc.so.6", NULL);
	app = plabel_prof_mapping(p, 0x400000, 0x500000, 0, "/usr/bin/app",
				  NULL);
	loc = plabel_prof_location(p, app, 0x401000, &l, 1);
	ASSERT_EQ(0, plabel_prof_sample(p, &loc, 1, NULL, 0, -1, -1, 1, 1000));
	EXPECT_EQ(-ENOENT, plabel_prof_set_main_mapping(p, 99));
	ASSERT_EQ(0, plabel_prof_set_main_mapping(p, app));
	ASSERT_EQ(0, plabel_prof_encode(p, &buf, &len));
	ASSERT_EQ(0, plabel_prof_decode(buf, len, &q, &err));
	/* written first, the others after it in their order; ids unchanged */
	ASSERT_EQ(3, plabel_prof_num_mappings(q));
	plabel_prof_get_mapping(q, 0, &mi);
	EXPECT_EQ(app, mi.id);
	EXPECT_STREQ("/usr/bin/app", mi.file);
	plabel_prof_get_mapping(q, 1, &mi);
	EXPECT_EQ(kmap, mi.id);
	plabel_prof_get_mapping(q, 2, &mi);
	EXPECT_EQ(libc, mi.id);
	ASSERT_EQ(0, plabel_prof_find_location(q, loc, &li));
	EXPECT_EQ(app, li.mapping_id);
	free(buf);
	plabel_prof_free(p);
	plabel_prof_free(q);
}

TEST(threadcreate_kind)
{
	struct plabel_prof *p = plabel_prof_new(PLABEL_PROF_THREADCREATE, 0), *q;
	struct plabel_prof_line l = { "spawn", "s.c", 7 };
	struct plabel_prof_label lab = { "job", "nightly" };
	struct plabel_prof_sample_info si;
	const char *err;
	uint8_t *buf;
	size_t len;
	uint64_t loc;

	ASSERT_NE(NULL, p);
	loc = plabel_prof_location(p, 0, 0x10, &l, 1);
	ASSERT_EQ(0, plabel_prof_sample(p, &loc, 1, &lab, 1, 7, -1, 1, 999));
	ASSERT_EQ(0, plabel_prof_sample(p, &loc, 1, &lab, 1, 7, -1, 1, 999));
	ASSERT_EQ(0, plabel_prof_encode(p, &buf, &len));
	ASSERT_EQ(0, plabel_prof_decode(buf, len, &q, &err));
	ASSERT_EQ(1, plabel_prof_num_values(q));
	EXPECT_STREQ("threadcreate", plabel_prof_sample_type(q, 0).type);
	EXPECT_STREQ("count", plabel_prof_sample_type(q, 0).unit);
	EXPECT_STREQ("threadcreate", plabel_prof_period_type(q).type);
	EXPECT_EQ(1, plabel_prof_period(q));
	ASSERT_EQ(1, plabel_prof_num_samples(q));
	plabel_prof_get_sample(q, 0, &si);
	EXPECT_EQ(2, si.values[0]);
	ASSERT_EQ(1, si.nnumlabels);
	EXPECT_STREQ("pid", si.numlabels[0].key);
	free(buf);
	plabel_prof_free(p);
	plabel_prof_free(q);
}

/*
 * A heap profile with the sample (leaf at addr in mapping map, function
 * fn; label endpoint=ep; pid 7) of values v.
 */
static int heap_sample(struct plabel_prof *p, uint64_t map, uint64_t addr,
		       const char *fn, const char *ep, const int64_t *v)
{
	struct plabel_prof_line l = { fn, "h.c", 3 };
	struct plabel_prof_label lab = { "endpoint", ep };
	uint64_t loc = plabel_prof_location(p, map, addr, &l, 1);

	return loc ? plabel_prof_sample_values(p, &loc, 1, &lab, 1, 7, -1, v) :
		     -ENOMEM;
}

static const struct plabel_prof_sample_info *
find_sample(const struct plabel_prof *p, const char *fn,
	    struct plabel_prof_sample_info *si)
{
	struct plabel_prof_location_info li;
	size_t i;

	for (i = 0; i < plabel_prof_num_samples(p); i++) {
		plabel_prof_get_sample(p, i, si);
		if (si->nlocs == 1 &&
		    !plabel_prof_find_location(p, si->loc_ids[0], &li) &&
		    li.nlines == 1 && !strcmp(fn, li.lines[0].function))
			return si;
	}
	return NULL;
}

TEST(subtract_is_a_delta)
{
	struct plabel_prof *p0 = plabel_prof_new(PLABEL_PROF_HEAP, 0);
	struct plabel_prof *p1 = plabel_prof_new(PLABEL_PROF_HEAP, 0);
	struct plabel_prof *cpu = plabel_prof_new(PLABEL_PROF_CPU, 1);
	const int64_t a0[] = { 2, 200, 1, 100 }, a1[] = { 5, 500, 1, 100 };
	const int64_t same[] = { 1, 10, 1, 10 }, gone[] = { 1, 5, 1, 5 };
	const int64_t fresh[] = { 3, 30, 3, 30 };
	/* a label and a name that are stored escaped */
	const char *odd = "/a\\b\x01";
	struct plabel_prof_sample_info si;
	struct plabel_prof_mapping_info mi;
	uint64_t m0, m1, m2;

	ASSERT_TRUE(p0 && p1 && cpu);
	m0 = plabel_prof_mapping(p0, 0x1000, 0x9000, 0, "/bin/h", "ab");
	m2 = plabel_prof_mapping(p0, 0x10000, 0x19000, 0, "/lib/x\\y.so",
				 NULL);
	m1 = plabel_prof_mapping(p1, 0x1000, 0x9000, 0, "/bin/h", "ab");
	ASSERT_TRUE(m0 && m1 && m2);
	ASSERT_EQ(0, heap_sample(p0, m0, 0x1100, "alloc_a", odd, a0));
	ASSERT_EQ(0, heap_sample(p0, m0, 0x1200, "alloc_b", "/b", same));
	ASSERT_EQ(0, heap_sample(p0, m2, 0x10100, "gone\\fn", odd, gone));
	ASSERT_EQ(0, heap_sample(p1, m1, 0x1200, "alloc_b", "/b", same));
	ASSERT_EQ(0, heap_sample(p1, m1, 0x1300, "alloc_d", "/d", fresh));
	ASSERT_EQ(0, heap_sample(p1, m1, 0x1100, "alloc_a", odd, a1));
	EXPECT_EQ(-EINVAL, plabel_prof_subtract(cpu, p0));
	EXPECT_EQ(-EINVAL, plabel_prof_subtract(p1, cpu));
	ASSERT_EQ(0, plabel_prof_subtract(p1, p0));

	/* the same in both: gone; the rest p1 - p0, negative included */
	ASSERT_EQ(3, plabel_prof_num_samples(p1));
	EXPECT_EQ(NULL, find_sample(p1, "alloc_b", &si));
	ASSERT_NE(NULL, find_sample(p1, "alloc_a", &si));
	EXPECT_EQ(3, si.values[0]);
	EXPECT_EQ(300, si.values[1]);
	EXPECT_EQ(0, si.values[2]);
	EXPECT_EQ(0, si.values[3]);
	ASSERT_EQ(1, si.nlabels);
	/* matched as stored: one sample, its label not escaped twice */
	EXPECT_STREQ("/a\\\\b\\x01", si.labels[0].value);
	ASSERT_NE(NULL, find_sample(p1, "alloc_d", &si));
	EXPECT_EQ(30, si.values[3]);
	ASSERT_NE(NULL, find_sample(p1, "gone\\\\fn", &si));
	EXPECT_EQ(-1, si.values[0]);
	EXPECT_EQ(-5, si.values[1]);
	EXPECT_EQ(-1, si.values[2]);
	EXPECT_EQ(-5, si.values[3]);
	ASSERT_EQ(1, si.nnumlabels);
	EXPECT_STREQ("pid", si.numlabels[0].key);
	EXPECT_EQ(7, si.numlabels[0].num);
	/* base's other mapping came along, its file as stored */
	ASSERT_EQ(2, plabel_prof_num_mappings(p1));
	plabel_prof_get_mapping(p1, 1, &mi);
	EXPECT_STREQ("/lib/x\\\\y.so", mi.file);
	/* adding to it after still merges with what is left */
	ASSERT_EQ(0, heap_sample(p1, m1, 0x1100, "alloc_a", odd, a0));
	EXPECT_EQ(3, plabel_prof_num_samples(p1));
	ASSERT_NE(NULL, find_sample(p1, "alloc_a", &si));
	EXPECT_EQ(5, si.values[0]);
	plabel_prof_free(p0);
	plabel_prof_free(p1);
	plabel_prof_free(cpu);
}

/* ---- corrupt input ---- */

static uint8_t *pack(Perftools__Profiles__Profile *pb, size_t *len)
{
	uint8_t *buf;

	*len = perftools__profiles__profile__get_packed_size(pb);
	buf = malloc(*len + 1);
	perftools__profiles__profile__pack(pb, buf);
	return buf;
}

TEST(truncated_and_flipped_input)
{
	struct plabel_prof *p = small_profile(), *q;
	uint8_t *buf, *copy;
	size_t len, i;
	const char *err;
	int ret;

	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, plabel_prof_encode(p, &buf, &len));
	copy = malloc(len);
	/* every strict prefix of the gzip file is an error, never a crash */
	for (i = 0; i < len; i++) {
		memcpy(copy, buf, i);
		err = NULL;
		q = NULL;
		ret = plabel_prof_decode(copy, i, &q, &err);
		if (!ret) {
			/* the only acceptable prefix: none */
			plabel_prof_free(q);
		}
		ASSERT_NE(0, ret) TH_LOG("prefix of %zu bytes accepted", i);
		ASSERT_NE(NULL, err);
		EXPECT_TRUE(ret == -EBADMSG || ret == -EINVAL)
			TH_LOG("prefix %zu: %d %s", i, ret, err);
	}
	/* single bit flips: either rejected cleanly or a valid profile */
	for (i = 0; i < len * 8; i += 3) {
		memcpy(copy, buf, len);
		copy[i / 8] ^= 1 << (i % 8);
		q = NULL;
		ret = plabel_prof_decode(copy, len, &q, &err);
		if (!ret)
			plabel_prof_free(q);
		else
			EXPECT_TRUE(ret == -EBADMSG || ret == -EINVAL ||
				    ret == -EFBIG);
	}
	free(copy);
	free(buf);
	plabel_prof_free(p);
}

TEST(garbage_and_empty_files)
{
	static const uint8_t junk[] = "this is not a profile at all\xff\xff\xff";
	static const uint8_t badgz[] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3,
					 0xde, 0xad, 0xbe, 0xef };
	char *path = tmp_path("empty.pb.gz");
	struct plabel_prof *q;
	const char *err = NULL;
	int fd;

	EXPECT_EQ(-EBADMSG, plabel_prof_decode(junk, sizeof(junk) - 1, &q,
					       &err));
	EXPECT_NE(NULL, strstr(err, "protobuf"));
	EXPECT_EQ(-EBADMSG, plabel_prof_decode(badgz, sizeof(badgz), &q,
					       &err));
	EXPECT_NE(NULL, strstr(err, "gzip"));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	close(fd);
	EXPECT_EQ(-EBADMSG, plabel_prof_read(path, &q, &err));
	EXPECT_NE(NULL, strstr(err, "empty"));
	EXPECT_EQ(-ENOENT, plabel_prof_read("/nonexistent/x.pb.gz", &q, &err));
	free(path);
	tmp_cleanup();
}

/* Hand-made inconsistent profiles: each must fail with -EINVAL. */
TEST(inconsistent_profiles)
{
	char *strs[] = { "", "cpu", "nanoseconds", "f" };
	Perftools__Profiles__ValueType vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	Perftools__Profiles__ValueType *vtp[] = { &vt };
	Perftools__Profiles__Function fn = PERFTOOLS__PROFILES__FUNCTION__INIT;
	Perftools__Profiles__Function fn2 = PERFTOOLS__PROFILES__FUNCTION__INIT;
	Perftools__Profiles__Function *fnp[] = { &fn, &fn2 };
	Perftools__Profiles__Line ln = PERFTOOLS__PROFILES__LINE__INIT;
	Perftools__Profiles__Line *lnp[] = { &ln };
	Perftools__Profiles__Location loc = PERFTOOLS__PROFILES__LOCATION__INIT;
	Perftools__Profiles__Location *locp[] = { &loc };
	Perftools__Profiles__Label lab = PERFTOOLS__PROFILES__LABEL__INIT;
	Perftools__Profiles__Label *labp[] = { &lab };
	Perftools__Profiles__Sample s = PERFTOOLS__PROFILES__SAMPLE__INIT;
	Perftools__Profiles__Sample *sp[] = { &s };
	Perftools__Profiles__Profile pb = PERFTOOLS__PROFILES__PROFILE__INIT;
	uint64_t locids[] = { 1 };
	int64_t vals[] = { 5, 6 };
	struct plabel_prof *q;
	const char *err;
	uint8_t *buf;
	size_t len;

	vt.type = 1;
	vt.unit = 2;
	fn.id = 1;
	fn.name = 3;
	ln.function_id = 1;
	loc.id = 1;
	loc.n_line = 1;
	loc.line = lnp;
	lab.key = 3;
	lab.str = 1;
	s.n_location_id = 1;
	s.location_id = locids;
	s.n_value = 1;
	s.value = vals;
	s.n_label = 1;
	s.label = labp;
	pb.n_string_table = 4;
	pb.string_table = strs;
	pb.n_sample_type = 1;
	pb.sample_type = vtp;
	pb.n_function = 1;
	pb.function = fnp;
	pb.n_location = 1;
	pb.location = locp;
	pb.n_sample = 1;
	pb.sample = sp;

#define EXPECT_DECODE(want, what)					\
	do {								\
		buf = pack(&pb, &len);					\
		q = NULL;						\
		err = "";						\
		EXPECT_EQ(want, plabel_prof_decode(buf, len, &q, &err))	\
			TH_LOG("%s: %s", what, err);			\
		plabel_prof_free(q);					\
		free(buf);						\
	} while (0)

	EXPECT_DECODE(0, "the valid base profile");
	lab.str = 9;
	EXPECT_DECODE(-EINVAL, "label value index out of range");
	lab.str = -1;
	EXPECT_DECODE(-EINVAL, "negative string index");
	lab.str = 1;
	fn.name = 4;
	EXPECT_DECODE(-EINVAL, "function name index out of range");
	fn.name = 3;
	ln.function_id = 2;
	EXPECT_DECODE(-EINVAL, "line with a function that does not exist");
	ln.function_id = 1;
	locids[0] = 7;
	EXPECT_DECODE(-EINVAL, "sample with a location that does not exist");
	locids[0] = 1;
	loc.mapping_id = 3;
	EXPECT_DECODE(-EINVAL, "location with a mapping that does not exist");
	loc.mapping_id = 0;
	s.n_value = 2;
	EXPECT_DECODE(-EINVAL, "two values for one sample type");
	s.n_value = 1;
	fn2.id = 1;
	pb.n_function = 2;
	EXPECT_DECODE(-EINVAL, "two functions with one id");
	fn2.id = 0;
	EXPECT_DECODE(-EINVAL, "function id 0");
	pb.n_function = 1;
	loc.id = 0;
	EXPECT_DECODE(-EINVAL, "location id 0");
	loc.id = 1;
	strs[0] = "x";
	EXPECT_DECODE(-EINVAL, "string table not starting with \"\"");
	strs[0] = "";
	pb.n_sample_type = 0;
	EXPECT_DECODE(-EINVAL, "samples without sample types");
	pb.n_sample_type = 1;
	pb.drop_frames = 4;
	EXPECT_DECODE(-EINVAL, "drop_frames index out of range");
	pb.drop_frames = 0;
	EXPECT_DECODE(0, "the valid base profile again");
#undef EXPECT_DECODE
}

/* ---- agreement with go tool pprof ---- */

static unsigned int rnd_state;

static unsigned int rnd(unsigned int n)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return (rnd_state >> 8) % n;
}

/*
 * A random profile with the awkward cases: inlined frames, recursion,
 * unsymbolized frames in two libraries with the same base name, a frame
 * with no mapping, C++-looking names, labels on some samples, zero and
 * tiny values (below pprof's node cutoff).
 */
static struct plabel_prof *random_profile(unsigned int seed,
					  enum plabel_prof_kind kind)
{
	static const char *const names[] = {
		"main", "work", "parse_request", "ns::Cls::method(int) const",
		"std::vector<int>::push_back", "(anonymous namespace)::helper",
		"memcpy", "hash_lookup", "compress", "encode_frame",
		"handle_users", "handle_items", "spin", "recurse",
	};
	static const char *const keys[] = { "endpoint", "tenant", "job" };
	static const char *const vals[] = { "/api/users", "/api/items", "acme",
					    "globex", "nightly" };
	struct plabel_prof *p = plabel_prof_new(kind, 10 * NS_PER_MS);
	uint64_t maps[4], locs[40], stack[12];
	size_t nlocs = 0, i, j;

	rnd_state = seed;
	maps[0] = plabel_prof_mapping(p, 0x400000, 0x800000, 0, "/usr/bin/app",
				      "0123abcd");
	maps[1] = plabel_prof_mapping(p, 0x7f0000000000, 0x7f0000100000, 0,
				      "/usr/lib/libfoo.so", NULL);
	maps[2] = plabel_prof_mapping(p, 0x7f0000200000, 0x7f0000300000, 0,
				      "/opt/x/libfoo.so", NULL);
	maps[3] = 0;
	for (i = 0; i < 40; i++) {
		struct plabel_prof_line lines[3];
		size_t nl = rnd(10) < 2 ? 0 : 1 + (rnd(4) == 0) + (rnd(8) == 0);
		uint64_t m = maps[nl ? 0 : rnd(4)];

		for (j = 0; j < nl; j++) {
			lines[j].function = names[rnd(14)];
			lines[j].file = "src/x.c";
			lines[j].line = 1 + rnd(100);
		}
		locs[nlocs++] = plabel_prof_location(p, m, 0x400000 + 16 * i +
						     (m ? 0 : 0x1000000),
						     lines, nl);
	}
	for (i = 0; i < 200; i++) {
		struct plabel_prof_label lab[3];
		size_t depth = 1 + rnd(10), nl = 0, k;
		int64_t count = rnd(20) == 0 ? rnd(2) : 1 + rnd(30);

		for (j = 0; j < depth; j++)
			stack[j] = locs[rnd(rnd(3) ? 12 : 40)];
		for (k = 0; k < 3; k++) {
			if (rnd(3) == 0)
				continue;
			lab[nl].key = keys[k];
			lab[nl++].value = vals[rnd(5)];
		}
		plabel_prof_sample(p, stack, depth, lab, nl, 1000 + rnd(2), -1,
				   count, count * 10 * NS_PER_MS +
				   rnd(1000) * 1000);
	}
	plabel_prof_set_time(p, 1700000000000000000LL + seed * 1000000000LL,
			     3000 * NS_PER_MS);
	return p;
}

/* Compare `go tool pprof GOARGS FILE` with `plabel report ARGS FILE`. */
static int agree(struct __test_metadata *_metadata, const char *file,
		 const char *goargs, int argc, const char **args)
{
	const char *all[16];
	char *want, *got;
	int gs, rs, i;

	want = pprof(goargs, file, &gs);
	if (!want || gs)
		return -1;
	for (i = 0; i < argc; i++)
		all[i] = args[i];
	all[argc] = file;
	got = run_report(&rs, argc + 1, all);
	EXPECT_EQ(0, rs);
	EXPECT_STREQ(want, got) TH_LOG("go tool pprof %s %s", goargs, file);
	i = want && got && !strcmp(want, got) ? 0 : 1;
	free(want);
	free(got);
	return i;
}

/*
 * A whole-system profile of two processes: File: names the first
 * mapping (the most sampled executable); with --tagfocus (or
 * --tagignore) the main binary of the samples kept, so pid=N's view is
 * headed by process N's executable.
 */
TEST(focus_names_its_process_file)
{
	struct plabel_prof *p = plabel_prof_new(PLABEL_PROF_CPU, 10 * NS_PER_MS);
	struct plabel_prof_line ln = { "main", "src/x.c", 1 };
	char *path = tmp_path("two-procs.pb.gz");
	uint64_t app, other, lib, la, lo, ll, st[2];
	const char *args[3];
	char *out;
	int st_rc, i;

	app = plabel_prof_mapping(p, 0x400000, 0x800000, 0, "/usr/bin/app",
				  "aaaa");
	other = plabel_prof_mapping(p, 0x500000, 0x900000, 0,
				    "/usr/sbin/other", "bbbb");
	lib = plabel_prof_mapping(p, 0x7f0000000000, 0x7f0000100000, 0,
				  "/usr/lib/libc.so.6", "cccc");
	la = plabel_prof_location(p, app, 0x401000, &ln, 1);
	lo = plabel_prof_location(p, other, 0x501000, &ln, 1);
	ll = plabel_prof_location(p, lib, 0x7f0000001000, NULL, 0);
	for (i = 0; i < 3; i++) {
		st[0] = la;
		ASSERT_EQ(0, plabel_prof_sample(p, st, 1, NULL, 0, 1000, -1, 1,
						10 * NS_PER_MS));
	}
	/* process 2000: libc frames outnumber its own, its file still wins */
	st[0] = ll;
	st[1] = lo;
	ASSERT_EQ(0, plabel_prof_sample(p, st, 2, NULL, 0, 2000, -1, 1,
					10 * NS_PER_MS));
	st[1] = ll;
	ASSERT_EQ(0, plabel_prof_sample(p, st, 2, NULL, 0, 2000, -1, 1,
					10 * NS_PER_MS));
	ASSERT_EQ(0, plabel_prof_write(p, path));

#define EXPECT_HEAD(want)						\
	EXPECT_EQ(0, strncmp(out, want, strlen(want))) TH_LOG("%s", out)
	args[0] = path;
	out = run_report(&st_rc, 1, args);
	ASSERT_EQ(0, st_rc);
	EXPECT_HEAD("File: app\nBuild ID: aaaa\n");
	free(out);
	args[0] = "--tagfocus=pid=2000";
	args[1] = path;
	out = run_report(&st_rc, 2, args);
	ASSERT_EQ(0, st_rc);
	EXPECT_HEAD("File: other\nBuild ID: bbbb\n");
	free(out);
	args[0] = "--tagignore=pid=1000";
	out = run_report(&st_rc, 2, args);
	ASSERT_EQ(0, st_rc);
	EXPECT_HEAD("File: other\n");
	free(out);
	args[0] = "--tagfocus=pid=1000";
	out = run_report(&st_rc, 2, args);
	ASSERT_EQ(0, st_rc);
	EXPECT_HEAD("File: app\n");
	free(out);
#undef EXPECT_HEAD
	plabel_prof_free(p);
	free(path);
}

TEST(small_profile_numbers)
{
	struct plabel_prof *p = small_profile();
	char *path = tmp_path("numbers.pb.gz");
	const char *args[2];
	char *out;
	int st;

	setenv("TZ", "UTC", 1);
	tzset();
	ASSERT_EQ(0, plabel_prof_write(p, path));
	args[0] = path;
	out = run_report(&st, 1, args);
	ASSERT_EQ(0, st);
	/* worked out by hand: total 1104ms, the 4ms node is under 0.5% */
	EXPECT_STREQ("File: demo\n"
		     "Build ID: abcd\n"
		     "recorded by a test\n"
		     "Type: cpu\n"
		     "Time: Nov 14, 2023 at 10:13pm (UTC)\n"
		     "Duration: 2s, Total samples = 1104ms (55.20%)\n"
		     "Showing nodes accounting for 1100ms, 99.64% of 1104ms total\n"
		     "Dropped 1 node (cum <= 5.52ms)\n"
		     "      flat  flat%   sum%        cum   cum%\n"
		     "     600ms 54.35% 54.35%      600ms 54.35%  inl (inline)\n"
		     "     500ms 45.29% 99.64%      500ms 45.29%  other\n"
		     "         0     0% 99.64%     1104ms   100%  main\n"
		     "         0     0% 99.64%      600ms 54.35%  work\n", out);
	free(out);
	/* --tags: the string labels, the numeric ones named at the end */
	args[0] = "--tags";
	args[1] = path;
	out = run_report(&st, 2, args);
	ASSERT_EQ(0, st);
	EXPECT_STREQ(" endpoint: Total 1.1s\n"
		     "           600.0ms (54.55%): /api/users\n"
		     "           500.0ms (45.45%): /api/items\n"
		     "\n"
		     " tenant: Total 600.0ms\n"
		     "         600.0ms (  100%): acme\n"
		     "\n"
		     "numeric labels not shown (--all-tags shows them): pid tid\n",
		     out);
	free(out);
	/* --all-tags: every key, as go tool pprof -tags */
	args[0] = "--all-tags";
	out = run_report(&st, 2, args);
	ASSERT_EQ(0, st);
	EXPECT_STREQ(" endpoint: Total 1.1s\n"
		     "           600.0ms (54.55%): /api/users\n"
		     "           500.0ms (45.45%): /api/items\n"
		     "\n"
		     " pid: Total 1.1s\n"
		     "      1.1s (  100%): 100\n"
		     "\n"
		     " tenant: Total 600.0ms\n"
		     "         600.0ms (  100%): acme\n"
		     "\n"
		     " tid: Total 1.1s\n"
		     "      600.0ms (54.55%): 101\n"
		     "      500.0ms (45.45%): 102\n"
		     "\n", out);
	free(out);
	plabel_prof_free(p);
	free(path);
	tmp_cleanup();
}

/* *buf (gzip, len bytes) replaced by what it holds. 0 or -1. */
static int gunzip(uint8_t **buf, size_t *len)
{
	z_stream z = { 0 };
	size_t cap = 1 << 20;
	uint8_t *out = malloc(cap);
	int ret;

	if (!out || inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		free(out);
		return -1;
	}
	z.next_in = *buf;
	z.avail_in = *len;
	z.next_out = out;
	z.avail_out = cap;
	ret = inflate(&z, Z_FINISH);
	inflateEnd(&z);
	if (ret != Z_STREAM_END) {
		free(out);
		return -1;
	}
	free(*buf);
	*buf = out;
	*len = z.total_out;
	return 0;
}

/* Label values and names that would forge lines or drive a terminal. */
static struct plabel_prof *hostile_profile(void)
{
	struct plabel_prof *p = plabel_prof_new(PLABEL_PROF_CPU, 10 * NS_PER_MS);
	struct plabel_prof_line fn[] = { { "evil\x1b[2J", "a\\b.c", 3 } };
	struct plabel_prof_label forge[] = {
		{ "k", "x\n  key: Total 9.9s" },
	};
	struct plabel_prof_label clear[] = { { "k", "\x1b[2J" } };
	uint64_t m, a;

	if (!p)
		return NULL;
	m = plabel_prof_mapping(p, 0x400000, 0x500000, 0, "/bin/de\x7fmo", NULL);
	a = plabel_prof_location(p, m, 0x401000, fn, 1);
	plabel_prof_sample(p, &a, 1, forge, 1, -1, -1, 1, 600 * NS_PER_MS);
	plabel_prof_sample(p, &a, 1, clear, 1, -1, -1, 1, 400 * NS_PER_MS);
	return p;
}

/* Runs of go tool pprof take a while on a busy machine: longer timeouts. */
FIXTURE(pprof) {
	int unused;
};

FIXTURE_SETUP(pprof)
{
}

FIXTURE_TEARDOWN(pprof)
{
}

TEST_F_TIMEOUT(pprof, agrees_with_go_tool_pprof, 240)
{
	const char *a[4];
	unsigned int seed;
	int bad = 0;

	if (!have_go())
		SKIP(return, "go (golang-go) is not installed");
	setenv("TZ", "UTC", 1);
	tzset();
	{
		struct plabel_prof *p = small_profile();
		char *path = tmp_path("go-small.pb.gz");

		ASSERT_EQ(0, plabel_prof_write(p, path));
		ASSERT_NE(-1, agree(_metadata, path, "-top", 0, a))
			TH_LOG("go tool pprof failed to run");
		a[0] = "--all-tags";
		bad += agree(_metadata, path, "-tags", 1, a);
		a[0] = "--tagfocus=endpoint=/api/users";
		bad += agree(_metadata, path, "-top -tagfocus=endpoint=/api/users",
			     1, a);
		a[0] = "--tagignore=tenant=acme";
		bad += agree(_metadata, path, "-top -tagignore=tenant=acme", 1, a);
		a[0] = "--sample-index=samples";
		bad += agree(_metadata, path, "-top -sample_index=samples", 1, a);
		/* numeric labels: pprof's range syntax */
		a[0] = "--tagfocus=tid=102";
		bad += agree(_metadata, path, "-top -tagfocus=tid=102", 1, a);
		a[0] = "--tagfocus=tid=101:102";
		bad += agree(_metadata, path, "-top -tagfocus=tid=101:102", 1, a);
		a[0] = "--tagfocus=tid=:101";
		bad += agree(_metadata, path, "-top -tagfocus=tid=:101", 1, a);
		a[0] = "--tagignore=tid=102:";
		bad += agree(_metadata, path, "-top -tagignore=tid=102:", 1, a);
		a[0] = "--tagfocus=endpoint=users,items";
		bad += agree(_metadata, path,
			     "-top -tagfocus=endpoint=users,items", 1, a);
		a[0] = "--tagfocus=endpoint=/api/v1";
		bad += agree(_metadata, path, "-top -tagfocus=endpoint=/api/v1",
			     1, a);
		plabel_prof_free(p);
		free(path);
	}
	{
		/* escaped in the file: go tool pprof shows what report does */
		struct plabel_prof *p = hostile_profile();
		char *path = tmp_path("go-hostile.pb.gz");

		ASSERT_EQ(0, plabel_prof_write(p, path));
		bad += agree(_metadata, path, "-top", 0, a);
		a[0] = "--all-tags";
		bad += agree(_metadata, path, "-tags", 1, a);
		plabel_prof_free(p);
		free(path);
	}
	for (seed = 1; seed <= 6; seed++) {
		struct plabel_prof *p = random_profile(seed, seed == 6 ?
						       PLABEL_PROF_THREADCREATE :
						       PLABEL_PROF_CPU);
		char name[32], *path;

		snprintf(name, sizeof(name), "go-rand-%u.pb.gz", seed);
		path = tmp_path(name);
		if (seed == 3)
			ASSERT_EQ(0, plabel_prof_set_drop_frames(p,
					"compress|ns::Cls::method", "spin"));
		if (seed == 4)
			ASSERT_EQ(0, plabel_prof_set_drop_frames(p,
					"hash_.*", NULL));
		ASSERT_EQ(0, plabel_prof_write(p, path));
		bad += agree(_metadata, path, "-top", 0, a);
		a[0] = "--top=5";
		bad += agree(_metadata, path, "-top -nodecount=5", 1, a);
		a[0] = "--all-tags";
		bad += agree(_metadata, path, "-tags", 1, a);
		a[0] = "--tagfocus=tenant=acme";
		bad += agree(_metadata, path, "-top -tagfocus=tenant=acme", 1, a);
		a[0] = "--tagfocus=pid=1001";
		a[1] = "--all-tags";
		bad += agree(_metadata, path, "-tags -tagfocus=pid=1001", 2, a);
		plabel_prof_free(p);
		free(path);
	}
	tmp_cleanup();
	EXPECT_EQ(0, bad);
}

/*
 * Profiles written by Go's runtime/pprof: other sample types (the heap
 * profile has four, bytes among them, and a default_sample_type), Go's
 * naming, its labels. The program is written out and run with `go run`.
 */
static const char go_program[] =
	"package main\n"
	"import (\n"
	"\t\"context\"\n\t\"os\"\n\t\"runtime/pprof\"\n\t\"time\"\n"
	")\n"
	"type T struct{ n int; keep [][]byte }\n"
	"func (t *T) spin(d time.Duration) {\n"
	"\tend := time.Now().Add(d)\n"
	"\tfor time.Now().Before(end) {\n"
	"\t\tt.n++\n"
	"\t\tif t.n%100000 == 0 {\n"
	"\t\t\tt.keep = append(t.keep, make([]byte, 4096))\n"
	"\t\t}\n"
	"\t}\n"
	"}\n"
	"func write(name, prof string) {\n"
	"\tf, _ := os.Create(name)\n"
	"\tpprof.Lookup(prof).WriteTo(f, 0)\n"
	"\tf.Close()\n"
	"}\n"
	"func main() {\n"
	"\tf, _ := os.Create(\"go-cpu.pb.gz\")\n"
	"\tpprof.StartCPUProfile(f)\n"
	"\tt := &T{}\n"
	"\tpprof.Do(context.Background(), pprof.Labels(\"worker\", \"alpha\"),\n"
	"\t\tfunc(context.Context) { t.spin(300 * time.Millisecond) })\n"
	"\tpprof.Do(context.Background(), pprof.Labels(\"worker\", \"beta\"),\n"
	"\t\tfunc(context.Context) { t.spin(100 * time.Millisecond) })\n"
	"\tpprof.StopCPUProfile()\n"
	"\tf.Close()\n"
	"\twrite(\"go-heap.pb.gz\", \"heap\")\n"
	"\twrite(\"go-goroutine.pb.gz\", \"goroutine\")\n"
	"}\n";

TEST_F_TIMEOUT(pprof, agrees_on_go_written_profiles, 240)
{
	static const char *const files[] = {
		"go-cpu.pb.gz", "go-heap.pb.gz", "go-goroutine.pb.gz",
	};
	char *src = tmp_path("main.go"), *cmd, *out, *path;
	const char *a[2];
	int st, bad = 0;
	size_t i;
	FILE *f;

	if (!have_go())
		SKIP(return, "go (golang-go) is not installed");
	setenv("TZ", "UTC", 1);
	tzset();
	f = fopen(src, "w");
	ASSERT_NE(NULL, f);
	fputs(go_program, f);
	fclose(f);
	ASSERT_LE(0, asprintf(&cmd,
		"cd '%s' && HOME=${HOME:-%s} GOCACHE=${GOCACHE:-%s/gocache} "
		"GOFLAGS=-mod=mod GOPROXY=off go run main.go 2>&1", tmp_dir,
		tmp_dir, tmp_dir));
	out = run_cmd(cmd, &st);
	free(cmd);
	ASSERT_EQ(0, st) TH_LOG("go run: %s", out ? out : "?");
	free(out);
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		path = tmp_path(files[i]);
		bad += agree(_metadata, path, "-top", 0, a);
		a[0] = "--all-tags";
		bad += agree(_metadata, path, "-tags", 1, a);
		a[0] = "--top=3";
		bad += agree(_metadata, path, "-top -nodecount=3", 1, a);
		a[0] = "--sample-index=0";
		bad += agree(_metadata, path, "-top -sample_index=0", 1, a);
		free(path);
	}
	path = tmp_path("go-cpu.pb.gz");
	a[0] = "--tagfocus=worker=beta";
	bad += agree(_metadata, path, "-top -tagfocus=worker=beta", 1, a);
	free(path);
	path = tmp_path("go-heap.pb.gz");
	a[0] = "--sample-index=alloc_space";
	bad += agree(_metadata, path, "-top -sample_index=alloc_space", 1, a);
	free(path);
	free(src);
	tmp_cleanup();
	EXPECT_EQ(0, bad);
}

TEST(report_errors)
{
	char *path = tmp_path("corrupt.pb.gz");
	const char *a[3];
	char *out;
	int st, fd;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(12, write(fd, "\x1f\x8b\x08garbage!!", 12));
	close(fd);
	a[0] = path;
	out = run_report(&st, 1, a);
	EXPECT_EQ(1, st);
	EXPECT_STREQ("", out);
	free(out);
	a[0] = "/nonexistent/cpu.pb.gz";
	out = run_report(&st, 1, a);
	EXPECT_EQ(1, st);
	free(out);
	a[0] = "--top=x";
	a[1] = path;
	out = run_report(&st, 2, a);
	EXPECT_EQ(2, st);
	free(out);
	out = run_report(&st, 0, a);
	EXPECT_EQ(2, st);
	free(out);
	a[0] = "--tagfocus=novalue";
	out = run_report(&st, 2, a);
	EXPECT_EQ(2, st);
	free(out);
	{
		/* a bad --sample-index names the valid ones */
		struct plabel_prof *p = small_profile();
		char *good = tmp_path("index.pb.gz");
		char *errpath = tmp_path("index.err");
		char msg[512] = "";
		int saved, efd;
		ssize_t n;

		ASSERT_EQ(0, plabel_prof_write(p, good));
		efd = open(errpath, O_RDWR | O_CREAT | O_TRUNC, 0600);
		ASSERT_LE(0, efd);
		saved = dup(STDERR_FILENO);
		dup2(efd, STDERR_FILENO);
		a[0] = "--sample-index=bogus";
		a[1] = good;
		out = run_report(&st, 2, a);
		dup2(saved, STDERR_FILENO);
		close(saved);
		n = pread(efd, msg, sizeof(msg) - 1, 0);
		close(efd);
		EXPECT_EQ(2, st);
		ASSERT_LT(0, n);
		msg[n] = '\0';
		EXPECT_NE(NULL, strstr(msg, "no sample type 'bogus'; it has: samples (0), cpu (1)\n"))
			TH_LOG("%s", msg);
		free(out);
		free(errpath);
		free(good);
		plabel_prof_free(p);
	}
	free(path);
	tmp_cleanup();
}

/* No byte below 0x20 but the line ends, and no 0x7f. */
static bool terminal_safe(const char *s)
{
	for (; *s; s++)
		if (((unsigned char)*s < 0x20 && *s != '\n') || *s == 0x7f)
			return false;
	return true;
}

TEST(hostile_strings_written_escaped)
{
	struct plabel_prof *p = hostile_profile();
	Perftools__Profiles__Profile *pb;
	bool forged = false, cleared = false, func = false, map = false;
	uint8_t *buf;
	size_t len, i;

	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, plabel_prof_encode(p, &buf, &len));
	ASSERT_EQ(0, gunzip(&buf, &len));
	pb = perftools__profiles__profile__unpack(NULL, len, buf);
	ASSERT_NE(NULL, pb);
	for (i = 0; i < pb->n_string_table; i++) {
		const char *s = pb->string_table[i];

		EXPECT_TRUE(terminal_safe(s) && !strchr(s, '\n'));
		forged |= !strcmp("x\\x0a  key: Total 9.9s", s);
		cleared |= !strcmp("\\x1b[2J", s);
		func |= !strcmp("evil\\x1b[2J", s);
		map |= !strcmp("/bin/de\\x7fmo", s);
		/* a backslash is doubled, so escapes are unambiguous */
		EXPECT_NE(0, strcmp("a\\b.c", s));
	}
	EXPECT_TRUE(forged);
	EXPECT_TRUE(cleared);
	EXPECT_TRUE(func);
	EXPECT_TRUE(map);
	perftools__profiles__profile__free_unpacked(pb, NULL);
	free(buf);
	plabel_prof_free(p);
}

TEST(hostile_strings_print_escaped)
{
	struct plabel_prof *p = hostile_profile();
	char *path = tmp_path("hostile.pb.gz");
	const char *args[2];
	char *out;
	int st;

	ASSERT_EQ(0, plabel_prof_write(p, path));
	args[0] = "--tags";
	args[1] = path;
	out = run_report(&st, 2, args);
	ASSERT_EQ(0, st);
	EXPECT_STREQ(" k: Total 1.0s\n"
		     "    600.0ms (60.00%): x\\x0a  key: Total 9.9s\n"
		     "    400.0ms (40.00%): \\x1b[2J\n"
		     "\n", out);
	free(out);
	args[0] = path;
	out = run_report(&st, 1, args);
	ASSERT_EQ(0, st);
	EXPECT_TRUE(terminal_safe(out));
	EXPECT_NE(NULL, strstr(out, "File: de\\x7fmo\n"));
	EXPECT_NE(NULL, strstr(out, "  evil\\x1b[2J\n"));
	free(out);
	plabel_prof_free(p);
	free(path);
	tmp_cleanup();
}

/* A file written elsewhere, with the raw bytes in its string table. */
TEST(foreign_hostile_strings_print_escaped)
{
	char *strs[] = { "", "cpu", "nanoseconds", "f\x1b[2J", "k",
			 "x\n  key: Total 9.9s", "a\\b" };
	Perftools__Profiles__ValueType vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	Perftools__Profiles__ValueType *vtp[] = { &vt };
	Perftools__Profiles__Function fn = PERFTOOLS__PROFILES__FUNCTION__INIT;
	Perftools__Profiles__Function *fnp[] = { &fn };
	Perftools__Profiles__Line ln = PERFTOOLS__PROFILES__LINE__INIT;
	Perftools__Profiles__Line *lnp[] = { &ln };
	Perftools__Profiles__Location loc = PERFTOOLS__PROFILES__LOCATION__INIT;
	Perftools__Profiles__Location *locp[] = { &loc };
	Perftools__Profiles__Label lab = PERFTOOLS__PROFILES__LABEL__INIT;
	Perftools__Profiles__Label lab2 = PERFTOOLS__PROFILES__LABEL__INIT;
	Perftools__Profiles__Label *labp[] = { &lab, &lab2 };
	Perftools__Profiles__Sample s = PERFTOOLS__PROFILES__SAMPLE__INIT;
	Perftools__Profiles__Sample *sp[] = { &s };
	Perftools__Profiles__Profile pb = PERFTOOLS__PROFILES__PROFILE__INIT;
	char *path = tmp_path("foreign.pb");
	uint64_t locids[] = { 1 };
	int64_t vals[] = { 1000000000 };
	const char *args[2];
	uint8_t *buf;
	size_t len;
	char *out;
	int st, fd;

	vt.type = 1;
	vt.unit = 2;
	fn.id = 1;
	fn.name = 3;
	ln.function_id = 1;
	loc.id = 1;
	loc.n_line = 1;
	loc.line = lnp;
	lab.key = 4;
	lab.str = 5;
	lab2.key = 6;
	lab2.str = 6;
	s.n_location_id = 1;
	s.location_id = locids;
	s.n_value = 1;
	s.value = vals;
	s.n_label = 2;
	s.label = labp;
	pb.n_string_table = 7;
	pb.string_table = strs;
	pb.n_sample_type = 1;
	pb.sample_type = vtp;
	pb.n_function = 1;
	pb.function = fnp;
	pb.n_location = 1;
	pb.location = locp;
	pb.n_sample = 1;
	pb.sample = sp;
	len = perftools__profiles__profile__get_packed_size(&pb);
	buf = malloc(len);
	ASSERT_NE(NULL, buf);
	perftools__profiles__profile__pack(&pb, buf);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(len, write(fd, buf, len));
	close(fd);
	free(buf);
	args[0] = "--tags";
	args[1] = path;
	out = run_report(&st, 2, args);
	ASSERT_EQ(0, st);
	/* strings without control bytes are shown as the file has them */
	EXPECT_STREQ(" a\\b: Total 1.0s\n"
		     "      1.0s (  100%): a\\b\n"
		     "\n"
		     " k: Total 1.0s\n"
		     "    1.0s (  100%): x\\x0a  key: Total 9.9s\n"
		     "\n", out);
	free(out);
	args[0] = path;
	out = run_report(&st, 1, args);
	ASSERT_EQ(0, st);
	EXPECT_TRUE(terminal_safe(out));
	EXPECT_NE(NULL, strstr(out, "  f\\x1b[2J\n"));
	free(out);
	free(path);
	tmp_cleanup();
}

TEST(escape_function)
{
	char out[8];

	EXPECT_EQ(15, plabel_prof_escape(NULL, 0, "a\\\n\x7f\x01"));
	EXPECT_EQ(15, plabel_prof_escape(out, sizeof(out), "a\\\n\x7f\x01"));
	EXPECT_STREQ("a\\\\\\x0a", out);
	EXPECT_EQ(0, plabel_prof_escape(out, sizeof(out), ""));
	EXPECT_STREQ("", out);
}

TEST_HARNESS_MAIN
