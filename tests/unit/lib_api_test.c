// SPDX-License-Identifier: GPL-2.0
/*
 * libplabel on the host, without the module (in-process mode): every call,
 * validation errors, plabel_do() merges, nesting and restore, plabel_get()
 * ordering and capacity, interned handles.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <plabel.h>
#include "plabel_uapi.h"

#include "kselftest/kselftest_harness.h"

/* The thread's labels as "k=v,k=v" (sorted, as plabel_get returns them). */
static const char *cur(void)
{
	static char buf[8192];
	struct plabel_kv kv[64];
	int n, i;
	size_t off = 0;

	n = plabel_get(kv, 64);
	if (n < 0) {
		snprintf(buf, sizeof(buf), "error %d", n);
		return buf;
	}
	buf[0] = '\0';
	for (i = 0; i < n && i < 64; i++)
		off += snprintf(buf + off, sizeof(buf) - off, "%s%s=%s",
				i ? "," : "", kv[i].key, kv[i].value);
	return buf;
}

TEST(available_without_module)
{
	if (access("/dev/plabel", F_OK) == 0)
		SKIP(return, "/dev/plabel exists: not the in-process case");
	EXPECT_EQ(0, plabel_available());
	/* Everything else works the same. */
	EXPECT_EQ(0, plabel_set((struct plabel_kv[]){ { "a", "1" } }, 1));
	EXPECT_STREQ("a=1", cur());
}

TEST(new_thread_state_is_empty)
{
	struct plabel_kv kv[2];

	EXPECT_EQ(0, plabel_get(NULL, 0));
	EXPECT_EQ(0, plabel_get(kv, 2));
	EXPECT_STREQ("", cur());
}

TEST(set_get_sorted)
{
	struct plabel_kv in[] = {
		{ "tenant", "acme" }, { "endpoint", "/api/users" },
		{ "b", "" }, { "zz", "last" },
	};
	struct plabel_kv out[4];

	ASSERT_EQ(0, plabel_set(in, 4));
	EXPECT_EQ(4, plabel_get(out, 4));
	EXPECT_STREQ("b", out[0].key);
	EXPECT_STREQ("", out[0].value);
	EXPECT_STREQ("endpoint", out[1].key);
	EXPECT_STREQ("/api/users", out[1].value);
	EXPECT_STREQ("tenant", out[2].key);
	EXPECT_STREQ("zz", out[3].key);
	/* A smaller capacity copies less and still returns the count. */
	memset(out, 0, sizeof(out));
	EXPECT_EQ(4, plabel_get(out, 1));
	EXPECT_STREQ("b", out[0].key);
	EXPECT_EQ(NULL, out[1].key);
	EXPECT_EQ(4, plabel_get(NULL, 0));
	EXPECT_EQ(-EINVAL, plabel_get(NULL, 1));
}

TEST(set_copies_strings)
{
	char k[16], v[16];
	struct plabel_kv kv = { k, v };

	strcpy(k, "key");
	strcpy(v, "value");
	ASSERT_EQ(0, plabel_set(&kv, 1));
	strcpy(k, "XXX");
	strcpy(v, "YYYYY");
	EXPECT_STREQ("key=value", cur());
}

TEST(set_replaces_and_clears)
{
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "a", "1" },
						      { "b", "2" } }, 2));
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "c", "3" } }, 1));
	EXPECT_STREQ("c=3", cur());
	EXPECT_EQ(0, plabel_clear());
	EXPECT_STREQ("", cur());
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "c", "3" } }, 1));
	EXPECT_EQ(0, plabel_set(NULL, 0));
	EXPECT_STREQ("", cur());
	EXPECT_EQ(0, plabel_clear());
}

TEST(set_validation)
{
	char *longkey = malloc(PLABEL_MAX_KEY_LEN + 2);
	char *longval = malloc(PLABEL_MAX_VALUE_LEN + 2);
	struct plabel_kv many[65];
	char names[65][8];
	int i;

	ASSERT_NE(NULL, longkey);
	ASSERT_NE(NULL, longval);
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "keep", "me" } }, 1));

	EXPECT_EQ(-EINVAL, plabel_set(NULL, 1));
	EXPECT_EQ(-EINVAL, plabel_set((struct plabel_kv[]){ { NULL, "v" } },
				      1));
	EXPECT_EQ(-EINVAL, plabel_set((struct plabel_kv[]){ { "k", NULL } },
				      1));
	EXPECT_EQ(-EINVAL, plabel_set((struct plabel_kv[]){ { "", "v" } }, 1));
	EXPECT_EQ(-EINVAL, plabel_set((struct plabel_kv[]){ { "k", "1" },
							    { "j", "2" },
							    { "k", "1" } },
				      3));
	EXPECT_EQ(-EINVAL, plabel_set((struct plabel_kv[]){ { "k", "1" },
							    { "k", "2" } },
				      2));

	memset(longkey, 'k', PLABEL_MAX_KEY_LEN + 1);
	longkey[PLABEL_MAX_KEY_LEN + 1] = '\0';
	EXPECT_EQ(-E2BIG, plabel_set((struct plabel_kv[]){ { longkey, "v" } },
				     1));
	longkey[PLABEL_MAX_KEY_LEN] = '\0';
	memset(longval, 'v', PLABEL_MAX_VALUE_LEN + 1);
	longval[PLABEL_MAX_VALUE_LEN + 1] = '\0';
	EXPECT_EQ(-E2BIG, plabel_set((struct plabel_kv[]){ { "k", longval } },
				     1));
	longval[PLABEL_MAX_VALUE_LEN] = '\0';

	for (i = 0; i < 65; i++) {
		snprintf(names[i], sizeof(names[i]), "k%02d", i);
		many[i].key = names[i];
		many[i].value = "v";
	}
	EXPECT_EQ(-E2BIG, plabel_set(many, 65));
	/* Nothing changed by the failures. */
	EXPECT_STREQ("keep=me", cur());

	/* The limits themselves are accepted. */
	EXPECT_EQ(0, plabel_set(many, 64));
	EXPECT_EQ(64, plabel_get(NULL, 0));
	EXPECT_EQ(0, plabel_set((struct plabel_kv[]){ { longkey, longval } },
				1));
	EXPECT_EQ(1, plabel_get(NULL, 0));
	free(longkey);
	free(longval);
}

static int ran;
static char seen[8192];

static void record(void *arg)
{
	ran++;
	snprintf(seen, sizeof(seen), "%s", cur());
}

TEST(do_merges_and_restores)
{
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "a", "1" },
						      { "c", "3" } }, 2));
	ran = 0;
	EXPECT_EQ(0, plabel_do((struct plabel_kv[]){ { "b", "2" },
						     { "c", "x" } },
			       2, record, NULL));
	EXPECT_EQ(1, ran);
	EXPECT_STREQ("a=1,b=2,c=x", seen);
	EXPECT_STREQ("a=1,c=3", cur());

	/* Without labels: runs with the current ones. */
	EXPECT_EQ(0, plabel_do(NULL, 0, record, NULL));
	EXPECT_EQ(2, ran);
	EXPECT_STREQ("a=1,c=3", seen);

	/* From no labels at all. */
	ASSERT_EQ(0, plabel_clear());
	EXPECT_EQ(0, plabel_do((struct plabel_kv[]){ { "only", "me" } }, 1,
			       record, NULL));
	EXPECT_STREQ("only=me", seen);
	EXPECT_STREQ("", cur());
}

TEST(do_errors_still_run)
{
	struct plabel_kv many[64];
	char names[64][8];
	int i;

	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "a", "1" } }, 1));
	EXPECT_EQ(-EINVAL, plabel_do(NULL, 1, NULL, NULL));
	ran = 0;
	EXPECT_EQ(-EINVAL, plabel_do(NULL, 1, record, NULL));
	EXPECT_EQ(1, ran);
	EXPECT_STREQ("a=1", seen);
	EXPECT_EQ(-EINVAL, plabel_do((struct plabel_kv[]){ { "", "x" } }, 1,
				     record, NULL));
	EXPECT_EQ(-EINVAL, plabel_do((struct plabel_kv[]){ { "k", "1" },
							   { "k", "1" } },
				     2, record, NULL));
	EXPECT_EQ(-EINVAL, plabel_do((struct plabel_kv[]){ { "k", NULL } }, 1,
				     record, NULL));
	EXPECT_EQ(4, ran);
	EXPECT_STREQ("a=1", seen);

	/* 64 new keys on top of "a" make 65 labels. */
	for (i = 0; i < 64; i++) {
		snprintf(names[i], sizeof(names[i]), "k%02d", i);
		many[i].key = names[i];
		many[i].value = "v";
	}
	EXPECT_EQ(-E2BIG, plabel_do(many, 64, record, NULL));
	EXPECT_EQ(5, ran);
	EXPECT_STREQ("a=1", seen);
	/* Replacing "a" among 64 fits. */
	many[0].key = "a";
	EXPECT_EQ(0, plabel_do(many, 64, record, NULL));
	EXPECT_EQ(6, ran);
	EXPECT_STREQ("a=1", cur());
}

/* A repeated key hidden behind the cache: first a valid call is cached. */
TEST(do_cached_rejects_repeats)
{
	ASSERT_EQ(0, plabel_clear());
	ASSERT_EQ(0, plabel_do((struct plabel_kv[]){ { "k", "1" },
						     { "j", "2" } },
			       2, record, NULL));
	EXPECT_EQ(-EINVAL, plabel_do((struct plabel_kv[]){ { "k", "1" },
							   { "k", "1" } },
				     2, record, NULL));
	EXPECT_EQ(-EINVAL, plabel_set((struct plabel_kv[]){ { "j", "2" },
							    { "j", "2" } },
				      2));
	/* Same pairs count, one pair from outside the cached kvs. */
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "a", "1" } }, 1));
	ASSERT_EQ(0, plabel_do((struct plabel_kv[]){ { "b", "2" } }, 1,
			       record, NULL));
	EXPECT_STREQ("a=1,b=2", seen);
	ASSERT_EQ(0, plabel_do((struct plabel_kv[]){ { "a", "1" } }, 1,
			       record, NULL));
	EXPECT_STREQ("a=1", seen);
}

struct nest {
	int depth;
	int max;
	int bad;
};

static void nest_fn(void *arg)
{
	struct nest *n = arg;
	char key[16], val[16], want[8192];
	struct plabel_kv kv[64];
	int got, i;

	got = plabel_get(kv, 64);
	if (got != n->depth + 1) {
		n->bad++;
		return;
	}
	for (i = 0; i < got; i++) {
		snprintf(key, sizeof(key), "d%02d", i);
		snprintf(val, sizeof(val), "%d", i * 7);
		if (strcmp(kv[i].key, key) || strcmp(kv[i].value, val))
			n->bad++;
	}
	if (n->depth + 1 >= n->max)
		return;
	snprintf(want, sizeof(want), "%s", cur());
	n->depth++;
	snprintf(key, sizeof(key), "d%02d", n->depth);
	snprintf(val, sizeof(val), "%d", n->depth * 7);
	if (plabel_do((struct plabel_kv[]){ { key, val } }, 1, nest_fn, n))
		n->bad++;
	n->depth--;
	if (strcmp(want, cur()))
		n->bad++;
}

TEST(do_nests_deeply)
{
	struct nest n = { .depth = 0, .max = 60 };
	int round;

	for (round = 0; round < 3; round++) {
		ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "d00", "0" } },
					1));
		nest_fn(&n);
		EXPECT_EQ(0, n.bad);
		EXPECT_STREQ("d00=0", cur());
	}
}

static void set_inside(void *arg)
{
	plabel_set((struct plabel_kv[]){ { "inner", "set" } }, 1);
}

TEST(do_restores_after_set_inside)
{
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "outer", "1" } }, 1));
	EXPECT_EQ(0, plabel_do((struct plabel_kv[]){ { "x", "y" } }, 1,
			       set_inside, NULL));
	EXPECT_STREQ("outer=1", cur());
	/* Also without labels to add, and when the labels are invalid. */
	EXPECT_EQ(0, plabel_do(NULL, 0, set_inside, NULL));
	EXPECT_STREQ("outer=1", cur());
	EXPECT_EQ(-EINVAL, plabel_do((struct plabel_kv[]){ { "", "y" } }, 1,
				     set_inside, NULL));
	EXPECT_STREQ("outer=1", cur());
	ASSERT_EQ(0, plabel_clear());
	EXPECT_EQ(-EINVAL, plabel_do(NULL, 1, set_inside, NULL));
	EXPECT_STREQ("", cur());
}

struct vals {
	int i;
	int bad;
};

static void check_val(void *arg)
{
	struct vals *v = arg;
	char want[64];

	snprintf(want, sizeof(want), "base=b,req=%d", v->i % 37);
	if (strcmp(want, cur()))
		v->bad++;
}

/* Many distinct values: cache hits must never return a wrong set. */
TEST(do_many_values)
{
	struct vals v = { 0 };
	char val[16];

	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "base", "b" } }, 1));
	for (v.i = 0; v.i < 5000; v.i++) {
		snprintf(val, sizeof(val), "%d", v.i % 37);
		ASSERT_EQ(0, plabel_do((struct plabel_kv[]){ { "req", val } },
				       1, check_val, &v));
	}
	EXPECT_EQ(0, v.bad);
	EXPECT_STREQ("base=b", cur());
}

TEST(set_many_distinct)
{
	char val[16], want[32];
	int i, bad = 0;

	for (i = 0; i < 3000; i++) {
		snprintf(val, sizeof(val), "%d", (i * 7919) % 500);
		snprintf(want, sizeof(want), "k=%s", val);
		ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "k", val } },
					1));
		if (strcmp(want, cur()))
			bad++;
	}
	EXPECT_EQ(0, bad);
}

TEST(labels_new_switch_free)
{
	struct plabel_labels *a, *b, *c, *e;

	a = plabel_labels_new((struct plabel_kv[]){ { "x", "1" },
						    { "y", "2" } }, 2);
	ASSERT_NE(NULL, a);
	b = plabel_labels_new((struct plabel_kv[]){ { "y", "2" },
						    { "x", "1" } }, 2);
	ASSERT_NE(NULL, b);
	EXPECT_EQ(a, b);	/* interned: same content, same set */
	c = plabel_labels_new((struct plabel_kv[]){ { "x", "9" } }, 1);
	ASSERT_NE(NULL, c);
	EXPECT_NE(a, c);

	EXPECT_EQ(0, plabel_switch(a));
	EXPECT_STREQ("x=1,y=2", cur());
	EXPECT_EQ(0, plabel_switch(c));
	EXPECT_STREQ("x=9", cur());
	EXPECT_EQ(0, plabel_do((struct plabel_kv[]){ { "z", "3" } }, 1,
			       record, NULL));
	EXPECT_STREQ("x=9,z=3", seen);
	EXPECT_STREQ("x=9", cur());
	EXPECT_EQ(0, plabel_switch(NULL));
	EXPECT_STREQ("", cur());

	e = plabel_labels_new(NULL, 0);
	ASSERT_NE(NULL, e);
	EXPECT_EQ(0, plabel_switch(c));
	EXPECT_EQ(0, plabel_switch(e));
	EXPECT_EQ(0, plabel_get(NULL, 0));
	plabel_labels_free(e);

	plabel_labels_free(b);
	/* a is still referenced once. */
	EXPECT_EQ(0, plabel_switch(a));
	EXPECT_STREQ("x=1,y=2", cur());
	EXPECT_EQ(0, plabel_switch(NULL));
	plabel_labels_free(a);
	plabel_labels_free(c);
	plabel_labels_free(NULL);

	/* A set freed and made again works. */
	a = plabel_labels_new((struct plabel_kv[]){ { "x", "1" } }, 1);
	ASSERT_NE(NULL, a);
	EXPECT_EQ(0, plabel_switch(a));
	EXPECT_STREQ("x=1", cur());
	EXPECT_EQ(0, plabel_clear());
	plabel_labels_free(a);
}

TEST(labels_new_errors)
{
	errno = 0;
	EXPECT_EQ(NULL, plabel_labels_new(NULL, 2));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, plabel_labels_new((struct plabel_kv[]){ { "a", "1" },
								{ "a", "2" } },
					  2));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, plabel_labels_new((struct plabel_kv[]){ { "", "1" } },
					  1));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, plabel_labels_new((struct plabel_kv[]){ { "a", NULL } },
					  1));
	EXPECT_EQ(EINVAL, errno);
}

/* The same labels through set, do and new are one set. */
TEST(set_and_new_share)
{
	struct plabel_labels *l;
	struct plabel_kv a[1], b[1];

	l = plabel_labels_new((struct plabel_kv[]){ { "s", "1" } }, 1);
	ASSERT_NE(NULL, l);
	ASSERT_EQ(0, plabel_set((struct plabel_kv[]){ { "s", "1" } }, 1));
	ASSERT_EQ(1, plabel_get(a, 1));
	ASSERT_EQ(0, plabel_switch(l));
	ASSERT_EQ(1, plabel_get(b, 1));
	EXPECT_EQ(a[0].key, b[0].key);
	plabel_clear();
	plabel_labels_free(l);
}

TEST_HARNESS_MAIN
