#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# fuzz/run.sh [SECONDS [NAME..]]: run each libFuzzer target
# $B/fuzz/NAME_fuzz for SECONDS (default $FUZZ_SECONDS, else 10) on its
# seed corpus fuzz/corpus/NAME (and $B/fuzz/corpus/NAME, seeds the build
# makes), one TAP line per target and the usual
# "# Totals:" line. New inputs go to a scratch directory, never into the
# tree; a crashing input is kept and its path printed. `make check` runs
# this as build/tests/unit/fuzz_short. Build the targets with
#   make build/fuzz/profile_fuzz build/fuzz/stream_fuzz build/fuzz/elf_fuzz
here=$(cd "$(dirname "$0")" && pwd)
for d in "$here/.." "$here/../../.." .; do
	[ -f "$d/fuzz/run.sh" ] && [ -f "$d/tests/lib.sh" ] && cd "$d" && break
done
. tests/lib.sh

secs=${1:-${FUZZ_SECONDS:-10}}
[ $# -gt 0 ] && shift
B=${B:-build}
keep=${PLABEL_TEST_OUT:-/tmp}

if [ $# -eq 0 ]; then
	for bin in "$B"/fuzz/*_fuzz; do
		[ -x "$bin" ] || continue
		n=${bin##*/}
		set -- "$@" "${n%_fuzz}"
	done
fi
if [ $# -eq 0 ]; then
	t_skip "fuzz" "no fuzz targets in $B/fuzz (clang with libFuzzer missing?)"
	t_done
	exit 0
fi

for name in "$@"; do
	bin=$B/fuzz/${name}_fuzz
	corpus=fuzz/corpus/$name
	if [ ! -x "$bin" ]; then
		t_fail "fuzz $name" "$bin not built"
		continue
	fi
	work=$(mktemp -d "${TMPDIR:-/tmp}/plabel-fuzz-$name.XXXXXX")
	mkdir "$work/new"
	seeds=
	[ -d "$corpus" ] && seeds=$corpus
	[ -d "$B/$corpus" ] && seeds="$seeds $B/$corpus"
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-max_len=16384 -artifact_prefix="$work/" \
		"$work/new" $seeds >"$work/log" 2>&1
	rc=$?
	runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$work/log")
	if [ $rc -eq 0 ] && [ -n "$runs" ]; then
		t_pass "fuzz $name: $runs inputs in ${secs}s, no crash"
		rm -rf "$work"
		continue
	fi
	sed 's/^/# /' "$work/log" | tail -n 30
	dest=$keep/plabel-fuzz-$name-$$
	rm -rf "$work/new"
	cp -r "$work" "$dest" 2>/dev/null && rm -rf "$work" || dest=$work
	t_fail "fuzz $name" "exit $rc; log and crashing input in $dest"
done
t_done
