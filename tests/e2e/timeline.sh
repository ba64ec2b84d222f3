#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel record --timeline on tests/e2e/progs/phases.c: two named threads
# whose labels change as they run and an unlabeled one. The file must be
# gzipped strict JSON (python3's json) in the Trace Event Format with a
# track per thread named after it and its process, on-CPU slices split
# where the labels change, off-CPU slices, symbolized samples (with -g fp
# and -g dwarf) and the creations as flows (tests/e2e/lib/
# timeline_check.py); with --timeline-label only the labeled thread's
# track. --timeline implies --off-cpu. Bad options are refused with
# status 2. The file stays in $PLABEL_TEST_OUT/e2e-timeline/ for the
# browser test on the host (tests/browser/timeline.sh), with the tracks
# it must show.

E2E_NAME=timeline
. tests/e2e/lib/common.sh

# check_file FILE LOG [--only EP]: timeline_check.py's lines as tests
check_file() {
	python3 tests/e2e/lib/timeline_check.py "$@" >"$E2E_OUT/check.out" 2>&1
	rc=$?
	while IFS= read -r line; do
		case $line in
		"ok "*) t_pass "${line#ok }" ;;
		"not ok "*) t_fail "${line#not ok }" ;;
		*) echo "# $line" ;;
		esac
	done <"$E2E_OUT/check.out"
	t_ok "timeline_check.py ran to its end" test "$rc" = 0
}

# Bad input first: status 2 and a message, before the module is needed.
for bad in novalue =v "$(printf 'k=a\tb')"; do
	"$PLABEL" record --timeline --timeline-label "$bad" -- true \
		>"$E2E_OUT/bad.log" 2>&1
	t_ok "--timeline-label '$bad' refused with status 2" test "$?" = 2
	t_ok "... saying why" grep -q "bad --timeline-label" "$E2E_OUT/bad.log"
done
"$PLABEL" record --timeline-label k=v -- true >"$E2E_OUT/bad.log" 2>&1
t_ok "--timeline-label without --timeline refused" test "$?" = 2
t_ok "... saying it needs --timeline" grep -q "needs --timeline" \
	"$E2E_OUT/bad.log"

e2e_need_module
if ! command -v python3 >/dev/null; then
	t_skip "$E2E_NAME" "python3 not installed"
	t_done
	exit 0
fi

D=$E2E_OUT/all
e2e_record "$D" --timeline --off-cpu-min 1ms -F 499 -- "$E2E_BIN/phases" 4
t_ok "record --timeline exits 0" test "$?" = 0
for f in timeline.json.gz offcpu.pb.gz wall.pb.gz cpu.pb.gz; do
	t_ok "wrote $f (--timeline implies --off-cpu)" test -s "$D/$f"
done
t_ok "the summary names the timeline" grep -q "wrote.*timeline.json.gz" \
	"$D.log"
check_file "$D/timeline.json.gz" "$D.log"

# -g dwarf: the snapshots are unwound at the end, the timeline's stacks too
D=$E2E_OUT/dwarf
e2e_record "$D" --timeline -g dwarf -F 499 -- "$E2E_BIN/phases" 2
t_ok "record --timeline -g dwarf exits 0" test "$?" = 0
check_file "$D/timeline.json.gz" "$D.log"

D=$E2E_OUT/only
e2e_record "$D" --timeline --timeline-label endpoint=/api/upload -F 499 \
	-- "$E2E_BIN/phases" 2
t_ok "record --timeline-label exits 0" test "$?" = 0
check_file "$D/timeline.json.gz" "$D.log" --only /api/upload

# for the browser test on the host: the file and the tracks it must show
cp "$E2E_OUT/all/timeline.json.gz" "$E2E_OUT/timeline.json.gz"
sed -n 's/^# *//; s/^thread \([^ ]*\) tid=\([0-9]*\)$/\1 (tid \2)/p' \
	"$E2E_OUT/all.log" | grep -v janitor >"$E2E_OUT/tracks.txt"
t_ok "two labeled threads' tracks listed for the browser test" \
	test "$(wc -l <"$E2E_OUT/tracks.txt")" = 2
t_done
