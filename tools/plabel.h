/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The plabel command's subcommands. Each takes argv with argv[0] the
 * subcommand's name and returns the process exit status: 0 success,
 * 1 failure (after one message on stderr), 2 bad usage.
 */
#ifndef PLABEL_TOOLS_PLABEL_H
#define PLABEL_TOOLS_PLABEL_H

#include <stdio.h>

/* The tree's version (the VERSION file), from the build. */
#ifndef PLABEL_VERSION
#define PLABEL_VERSION "unknown"
#endif

#define PLABEL_STR_(x)	#x
#define PLABEL_STR(x)	PLABEL_STR_(x)

int plabel_cmd_record(int argc, char **argv);
int plabel_cmd_run(int argc, char **argv);
int plabel_cmd_serve(int argc, char **argv);
int plabel_cmd_threads(int argc, char **argv);

void plabel_record_usage(FILE *f);
void plabel_run_usage(FILE *f);
void plabel_serve_usage(FILE *f);
void plabel_threads_usage(FILE *f);

/* Open /dev/plabel, printing the one clear message on failure: -1. */
int plabel_open_device(void);

#endif /* PLABEL_TOOLS_PLABEL_H */
