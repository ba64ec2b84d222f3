#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tests/vm/run-tests.sh [TEST...]: run the VM tests, inside scripts/plabel-vm
# (as root, plabel.ko loaded). TEST is a kselftest program or an e2e script;
# default: every build/tests/kselftest/* program and every tests/e2e/*.sh.
#
# Each test runs with a time limit (PLABEL_TEST_TIMEOUT seconds, default
# 300), stdin from /dev/null, its output in $PLABEL_TEST_OUT/<name>.log.
# One line per test goes to stdout. A test that exits non-zero or times out
# gets a failing "# Totals:" line added to its log, so tests/summarize
# counts it. Exits 1 when any test failed.

cd "$(dirname "$0")/../.." || exit 1
out=${PLABEL_TEST_OUT:-/tmp/plabel-tests}
limit=${PLABEL_TEST_TIMEOUT:-300}
mkdir -p "$out" || exit 1

if [ $# -eq 0 ]; then
	for t in build/tests/kselftest/* tests/e2e/*.sh; do
		[ -f "$t" ] && [ -x "$t" ] || [ "${t%.sh}" != "$t" ] || continue
		[ -f "$t" ] && set -- "$@" "$t"
	done
fi
if [ $# -eq 0 ]; then
	echo "run-tests: no tests found (make builds them)" >&2
	exit 1
fi

now() { cut -d' ' -f1 /proc/uptime; }
failed=0
for t in "$@"; do
	name=$(basename "$t" .sh)
	log=$out/$name.log
	# a script runs through its #! line when executable, else with sh
	run=
	[ -x "$t" ] || run=sh
	t0=$(now)
	timeout -k 10 "$limit" $run "$t" </dev/null >"$log" 2>&1
	rc=$?
	t1=$(now)
	why=
	case $rc in
	0|4) ;;		# 4: kselftest's "skipped"
	124|137) why="timed out after ${limit}s" ;;
	*) why="exit status $rc" ;;
	esac
	if [ -n "$why" ]; then
		{
			echo "# $name: $why"
			echo "# Totals: pass:0 fail:1 xfail:0 xpass:0 skip:0 error:0"
		} >>"$log"
	fi
	counts=$(awk '/^# Totals: / {
			for (i = 3; i <= NF; i++) { split($i, kv, ":"); n[kv[1]] += kv[2] }
			seen = 1
		}
		END {
			if (!seen) { print "no Totals line"; exit 1 }
			printf "pass:%d fail:%d skip:%d", n["pass"] + n["xfail"],
				n["fail"] + n["error"] + n["xpass"], n["skip"]
			exit (n["fail"] + n["error"] + n["xpass"]) > 0
		}' "$log")
	if [ $? -ne 0 ] || [ -n "$why" ]; then
		verdict=FAIL
		failed=1
	else
		verdict=ok
	fi
	printf '%-4s %-36s %s%s (%.1f s)\n' "$verdict" "$name" "$counts" \
		"${why:+, $why}" "$(echo "$t1 $t0" | awk '{ print $1 - $2 }')"
done
exit $failed
