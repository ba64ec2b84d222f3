// SPDX-License-Identifier: GPL-2.0
/*
 * plabel: labeled CPU and thread-create profiles for native programs.
 * Dispatches to the subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "plabel.h"
#include "profile.h"

static void plabel_usage(FILE *f)
{
	fputs("usage: plabel COMMAND [ARGS]\n"
	      "\n"
	      "commands:\n"
	      "  record [-F HZ] [-g fp|dwarf] [-o DIR] [--duration S]\n"
	      "         [--no-process-labels] [-a | -p PID[,PID..]] [-- CMD ARGS..]\n"
	      "                 record labeled CPU and thread-create profiles\n"
	      "  report [--top N] [--tags] [--all-tags] [--sample-index TYPE|N]\n"
	      "         [--tagfocus KEY=RE] [--tagignore KEY=RE] FILE.pb.gz\n"
	      "                 text view of a profile\n"
	      "  run -l KEY=VALUE [-l ..] [--replace] -- CMD ARGS..\n"
	      "                 run CMD with those labels added to its own\n"
	      "  serve [--listen HOST:PORT | --unix PATH] [-a | -p PID[,PID..]]\n"
	      "        [-F HZ] [-g fp|dwarf] [--max-seconds N] [--max-requests N]\n"
	      "        [--sanitize-labels] [--allow-user USER[,USER..]]\n"
	      "        [--allow-remote]\n"
	      "                 serve labeled profiles over HTTP (Go's pprof paths)\n"
	      "  threads -p PID [-o FILE] [-g fp|dwarf]\n"
	      "                 each thread's labels, state and stack now\n"
	      "  help COMMAND   show a command's options\n"
	      "\n"
	      "  --version      show plabel's version\n"
	      "  -h, --help     show this help\n", f);
}

static int plabel_help(const char *cmd)
{
	static char help[] = "--help";

	if (!strcmp(cmd, "record")) {
		plabel_record_usage(stdout);
	} else if (!strcmp(cmd, "run")) {
		plabel_run_usage(stdout);
	} else if (!strcmp(cmd, "serve")) {
		plabel_serve_usage(stdout);
	} else if (!strcmp(cmd, "threads")) {
		plabel_threads_usage(stdout);
	} else if (!strcmp(cmd, "report")) {
		static char name[] = "report";
		char *av[] = { name, help, NULL };

		return plabel_cmd_report(2, av);
	} else {
		fprintf(stderr, "plabel: unknown command '%s'\n", cmd);
		plabel_usage(stderr);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2) {
		plabel_usage(stderr);
		return 2;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "record"))
		return plabel_cmd_record(argc - 1, argv + 1);
	if (!strcmp(cmd, "report"))
		return plabel_cmd_report(argc - 1, argv + 1);
	if (!strcmp(cmd, "run"))
		return plabel_cmd_run(argc - 1, argv + 1);
	if (!strcmp(cmd, "serve"))
		return plabel_cmd_serve(argc - 1, argv + 1);
	if (!strcmp(cmd, "threads"))
		return plabel_cmd_threads(argc - 1, argv + 1);
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
		printf("plabel %s\n", PLABEL_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		plabel_usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "help")) {
		if (argc < 3) {
			plabel_usage(stdout);
			return 0;
		}
		return plabel_help(argv[2]);
	}
	fprintf(stderr, "plabel: unknown command '%s'\n", cmd);
	plabel_usage(stderr);
	return 2;
}
