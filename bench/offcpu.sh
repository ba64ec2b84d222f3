#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# bench/offcpu.sh: the cost of the off-CPU hook, in the VM:
#   scripts/plabel-vm --kernel 6.1 -- bench/offcpu.sh
# Context switches per second of bench/pingpong (two threads passing a
# byte over pipes) with no session, under plabel record (CPU samples
# only), under plabel record --off-cpu, and under perf record -e
# sched:sched_switch -g (when perf is there); the median of REPS runs
# each, interleaved. Prints figures only.

B=build/bench
PLABEL=${PLABEL:-$(command -v plabel || echo build/bin/plabel)}
REPS=${REPS:-3}
MS=${MS:-2000}
TMP=/tmp/bench-offcpu
mkdir -p "$TMP"

run() {
	"$@" 2>"$TMP/err" | sed -n 's/^switches_per_s //p'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

: >"$TMP/none"; : >"$TMP/cpu"; : >"$TMP/offcpu"; : >"$TMP/perf"
for r in $(seq "$REPS"); do
	run "$B/pingpong" "$MS" >>"$TMP/none"
	run "$PLABEL" record -o "$TMP/o1" -- "$B/pingpong" "$MS" >>"$TMP/cpu"
	run "$PLABEL" record --off-cpu -o "$TMP/o2" -- "$B/pingpong" "$MS" \
		>>"$TMP/offcpu"
	if command -v perf >/dev/null; then
		run perf record -q -e sched:sched_switch -g -o "$TMP/perf.data" \
			-- "$B/pingpong" "$MS" >>"$TMP/perf"
	fi
done
sed 's/^/# /' "$TMP/err"
for k in none cpu offcpu perf; do
	echo "$k $(median <"$TMP/$k") ($(tr '\n' ' ' <"$TMP/$k"))"
done
grep -h "waits\|lost" "$TMP"/o2.log 2>/dev/null
D=/sys/kernel/debug/plabel
[ -r "$D/switch_calls" ] &&
	awk -v c="$(cat $D/switch_calls)" -v n="$(cat $D/switch_ns_total)" \
		'BEGIN { if (c) printf "switch probe: %d calls, %.0f ns each\n", c, n / c }'
