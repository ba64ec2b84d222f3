// SPDX-License-Identifier: GPL-2.0
/*
 * plabel run -l KEY=VALUE [-l ..] -- CMD ARGS..: merge the labels into the
 * ones this thread has (inherited from whoever started it; a key given
 * replaces it, as plabel_do() merges), intern the result, make it this
 * thread's kernel-stored labels, and exec CMD. The labels survive exec and
 * are inherited by every thread and process CMD creates, so an unmodified
 * program is profiled under them. --replace drops the inherited ones.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "plabel.h"
#include "plabel_uapi.h"
#include "heaplib.h"

void plabel_run_usage(FILE *f)
{
	fputs("usage: plabel run -l KEY=VALUE [-l KEY=VALUE ..] [--replace] [--heap] -- CMD ARGS..\n"
	      "       plabel run --heap -- CMD ARGS..\n"
	      "\n"
	      "Run CMD with the given labels added to the ones plabel run has\n"
	      "(inherited, e.g. from an outer plabel run; a key given replaces\n"
	      "the inherited one). Every CPU sample and thread creation of CMD\n"
	      "and of everything it starts carries them.\n"
	      "\n"
	      "  -l, --label KEY=VALUE   a label (repeatable; keys unique)\n"
	      "      --replace           drop the inherited labels: only these\n"
	      "      --heap              preload libplabel-heap.so into CMD (and\n"
	      "                          what it starts): a plabel record --heap\n"
	      "                          that follows it records its allocations\n"
	      "  -h, --help              show this help\n", f);
}

static const char *run_err(int err)
{
	switch (err) {
	case EINVAL:
		return "invalid label (empty key, NUL byte, or repeated key)";
	case E2BIG:
		return "too many labels, or a key or value too long";
	case EDQUOT:
		return "label set quota of this user used up";
	case EPERM:
	case EACCES:
		return "permission denied";
	default:
		return strerror(err);
	}
}

/*
 * Add this thread's current labels whose keys labels[0..*n) lack, after
 * them. *buf keeps their bytes (free it after SET_NEW). 0, -E2BIG (too
 * many together) or another -errno.
 */
static int run_inherit(int fd, struct plabel_label *labels,
		       unsigned int *n, void **buf)
{
	struct plabel_labels_get_args ga;
	const struct plabel_label *in;
	unsigned int i, j, given = *n;

	memset(&ga, 0, sizeof(ga));
	ga.size = sizeof(ga);
	if (!ioctl(fd, PLABEL_IOC_LABELS_GET, &ga))
		return 0;	/* no labels (no buffer needed) */
	if (errno != ERANGE)
		return -errno;
	*buf = malloc(ga.buf_len ? ga.buf_len : 1);
	if (!*buf)
		return -ENOMEM;
	ga.buf = (uintptr_t)*buf;
	if (ioctl(fd, PLABEL_IOC_LABELS_GET, &ga))
		return -errno;
	in = *buf;
	for (i = 0; i < ga.count; i++) {
		for (j = 0; j < given; j++)
			if (labels[j].key_len == in[i].key_len &&
			    !memcmp((void *)(uintptr_t)labels[j].key,
				    (void *)(uintptr_t)in[i].key,
				    in[i].key_len))
				break;
		if (j < given)
			continue;	/* a key given replaces it */
		if (*n == PLABEL_MAX_LABELS)
			return -E2BIG;
		labels[(*n)++] = in[i];
	}
	return 0;
}

int plabel_cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "label", required_argument, NULL, 'l' },
		{ "replace", no_argument, NULL, 'R' },
		{ "heap", no_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct plabel_label labels[PLABEL_MAX_LABELS];
	struct plabel_set_new_args sn;
	struct plabel_labels_set_args ls;
	unsigned int n = 0, i;
	int c, fd, replace = 0, heap = 0;
	void *inherited = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+l:h", opts, NULL)) != -1) {
		char *eq;

		switch (c) {
		case 'l':
			eq = strchr(optarg, '=');
			if (!eq || eq == optarg) {
				fprintf(stderr, "plabel run: bad label '%s': want KEY=VALUE\n",
					optarg);
				return 2;
			}
			if (n == PLABEL_MAX_LABELS) {
				fprintf(stderr, "plabel run: at most %d labels\n",
					PLABEL_MAX_LABELS);
				return 2;
			}
			labels[n].key = (uintptr_t)optarg;
			labels[n].key_len = eq - optarg;
			labels[n].value = (uintptr_t)(eq + 1);
			labels[n].value_len = strlen(eq + 1);
			for (i = 0; i < n; i++)
				if (labels[i].key_len == labels[n].key_len &&
				    !memcmp((void *)(uintptr_t)labels[i].key,
					    optarg, labels[n].key_len)) {
					fprintf(stderr, "plabel run: label key '%.*s' given twice\n",
						(int)labels[n].key_len, optarg);
					return 2;
				}
			n++;
			break;
		case 'R':
			replace = 1;
			break;
		case 'H':
			heap = 1;
			break;
		case 'h':
			plabel_run_usage(stdout);
			return 0;
		default:
			plabel_run_usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "plabel run: no command given\n");
		plabel_run_usage(stderr);
		return 2;
	}
	if (!n && !heap) {
		fprintf(stderr, "plabel run: no labels given (-l KEY=VALUE)\n");
		plabel_run_usage(stderr);
		return 2;
	}
	if (heap) {
		const char *lib;
		int ret = plabel_heap_preload(&lib);

		if (ret) {
			fprintf(stderr, "plabel run: --heap: %s %s (set PLABEL_HEAP_LIB)\n",
				ret == -ENOENT ? "cannot find" :
				ret == -EINVAL ? "cannot preload" :
				"out of memory for", lib);
			return 1;
		}
		if (!n)
			goto run;
	}

	fd = plabel_open_device();
	if (fd < 0)
		return 1;
	if (!replace) {
		int ret = run_inherit(fd, labels, &n, &inherited);

		if (ret) {
			fprintf(stderr, "plabel run: %s\n",
				ret == -E2BIG ?
				"too many labels with the inherited ones (at most " PLABEL_STR(PLABEL_MAX_LABELS) "; --replace drops those)" :
				ret == -ENOMEM ? "out of memory" :
				run_err(-ret));
			close(fd);
			return 1;
		}
	}
	memset(&sn, 0, sizeof(sn));
	sn.size = sizeof(sn);
	sn.labels = (uintptr_t)labels;
	sn.count = n;
	if (ioctl(fd, PLABEL_IOC_SET_NEW, &sn)) {
		fprintf(stderr, "plabel run: cannot intern the labels: %s\n",
			run_err(errno));
		free(inherited);
		close(fd);
		return 1;
	}
	free(inherited);
	memset(&ls, 0, sizeof(ls));
	ls.size = sizeof(ls);
	ls.id = sn.id;
	if (ioctl(fd, PLABEL_IOC_LABELS_SET, &ls)) {
		fprintf(stderr, "plabel run: cannot set the labels: %s\n",
			run_err(errno));
		close(fd);
		return 1;
	}
	/* the thread's entry holds its own reference to the set */
	close(fd);
run:
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "plabel run: cannot run %s: %s\n", argv[optind],
		strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
