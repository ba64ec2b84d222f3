#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel record --every: one profile pair per interval, back to back,
# named by the interval's start, each splitting the alternating workload
# (worker=alpha 3 parts, worker=beta 1) as the whole run does, though the
# label sets went by once, before all but the first interval; -p ends it
# when the process exits; bad intervals are refused; with --timeline a
# timeline per interval.

E2E_NAME=record_every
. tests/e2e/lib/common.sh
e2e_need_module

t_ok "--every 0: exit 2" sh -c '"$1" record --every 0 -a 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"
t_ok "--every 5x: exit 2" sh -c '"$1" record --every 5x -a 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"
t_ok "--every with CMD: exit 2" sh -c '"$1" record --every 5s -- true 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"

"$E2E_BIN/alternate" 60000 >"$E2E_OUT/alt.log" 2>&1 &
alt=$!
i=0
while ! grep -q ready "$E2E_OUT/alt.log" && [ $i -lt 200 ]; do
	sleep 0.05
	i=$((i + 1))
done

D=$E2E_OUT/every
e2e_record "$D" -a -F 250 --every 2s --duration 7
rc=$?
t_ok "record --every 2s --duration 7 exits 0" test "$rc" = 0
ls "$D" | sed 's/^/# /'
ncpu=$(ls "$D" | grep -c '^cpu-[0-9]\{8\}T[0-9]\{6\}\.pb\.gz$')
ntc=$(ls "$D" | grep -c '^threadcreate-[0-9]\{8\}T[0-9]\{6\}\.pb\.gz$')
t_ok "four cpu-YYYYmmddTHHMMSS.pb.gz (2+2+2+1 s)" test "$ncpu" = 4
t_ok "four threadcreate-YYYYmmddTHHMMSS.pb.gz" test "$ntc" = 4
t_ok "a line for each written" test "$(grep -c 'plabel: wrote' "$D.log")" = 4
# share FILE..: alpha's percentage of the labeled CPU time (of the files
# merged, as go tool pprof merges them)
share() {
	_f1=$1
	shift
	_a=$(e2e_tag_pct "$_f1" worker alpha "$@")
	_b=$(e2e_tag_pct "$_f1" worker beta "$@")
	awk -v a="${_a:-0}" -v b="${_b:-0}" \
		'BEGIN { print (a + b > 0 ? 100 * a / (a + b) : -1) }'
}
# Each interval has both labels, alpha's the larger share; one or two
# host stalls in a second or two of emulated CPU time can move it by more
# than the whole run's 8 points, so the 75% is checked on them all.
# The last interval, cut to 1 s by --duration, is shown, not checked: in
# two runs out of three its second of emulated CPU split off by 20 to 30
# points.
k=0
for f in "$D"/cpu-*.pb.gz; do
	k=$((k + 1))
	s=$(share "$f")
	echo "# $(basename "$f"): alpha's share $s%"
	[ "$k" -lt "$ncpu" ] || continue
	t_ok "interval $k: both labels, alpha's share the larger" e2e_between "$s" 50 95
done
s=$(share "$D"/cpu-*.pb.gz)
echo "# all intervals: alpha's share $s%"
t_ok "all intervals: alpha's share 75% within 8 points" e2e_between "$s" 67 83
kill "$alt" 2>/dev/null
wait "$alt" 2>/dev/null

# -p: ends when the process does
"$E2E_BIN/alternate" 1500 >/dev/null 2>&1 &
pid=$!
D=$E2E_OUT/every-pid
t_ok "record --every 1s -p PID exits 0 when PID ends" \
	e2e_record "$D" -p "$pid" --every 1s --duration 60
wait "$pid"
t_ok "record --every -p: at least one interval written" \
	test "$(ls "$D" | grep -c '^cpu-')" -ge 1

# --timeline: a timeline-STAMP.json.gz beside each interval's cpu file,
# strict JSON, the labeled threads' samples in each, the intervals'
# samples in stamp order and not overlapping
"$E2E_BIN/alternate" 6000 >/dev/null 2>&1 &
pid=$!
D=$E2E_OUT/every-timeline
e2e_record "$D" -p "$pid" -F 250 --every 1s --duration 60 --timeline
t_ok "record --every 1s --timeline exits 0" test "$?" = 0
wait "$pid"
ls "$D" | sed 's/^/# /'
ntl=$(ls "$D" | grep -c '^timeline-[0-9]\{8\}T[0-9]\{6\}\.json\.gz$')
t_ok "a timeline for each cpu file" \
	test "$ntl" -ge 2 -a "$ntl" = "$(ls "$D" | grep -c '^cpu-')"
t_ok "... and --timeline's off-CPU and wall files" \
	test "$(ls "$D" | grep -c '^offcpu-')" = "$ntl" -a \
	"$(ls "$D" | grep -c '^wall-')" = "$ntl"
if command -v python3 >/dev/null; then
	t_ok "intervals' timelines: JSON, labeled samples, in order" \
		python3 - "$D" <<'PY'
import glob, gzip, json, sys
last = -1
files = sorted(glob.glob(sys.argv[1] + "/timeline-*.json.gz"))
seen = []
for f in files:
    ev = json.load(gzip.open(f))["traceEvents"]
    ts = [e["ts"] for e in ev if e.get("name") == "sample"]
    workers = {e.get("args", {}).get("worker") for e in ev
               if e.get("name") == "sample"}
    print("#", f.split("/")[-1], len(ts), "samples", sorted(map(str, workers)))
    seen.append((f, len(ts), workers))
    if ts and min(ts) < last:
        sys.exit("%s: samples before the previous interval's last" % f)
    last = max(ts + [last])
# A whole interval at 250 Hz holds about 250 samples; the last ones, from
# the workers' end to the recording's (the process's exit, on a loaded
# emulated machine, may take more than an interval), may hold next to
# nothing. Every interval up to the last whole one has both labels.
whole = [i for i, (f, n, w) in enumerate(seen) if n >= 100]
if len(whole) < 4:
    sys.exit("%d intervals of 100 samples or more, not 4" % len(whole))
for f, n, w in seen[:whole[-1] + 1]:
    if not {"alpha", "beta"} <= w:
        sys.exit("%s: no samples of both labels" % f)
PY
else
	t_skip "intervals' timelines checked" "python3 not installed"
fi
t_done
