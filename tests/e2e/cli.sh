#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The plabel command line: help for every subcommand, bad flags (exit 2),
# errors with one clear message (exit 1), and SIGINT ending a recording
# that still writes its files.

E2E_NAME=cli
. tests/e2e/lib/common.sh

for c in record report run serve; do
	t_ok "plabel $c --help" sh -c '"$1" "$2" --help | grep -q "^usage: plabel $2"' - "$PLABEL" "$c"
	t_ok "plabel help $c" sh -c '"$1" help "$2" | grep -q "^usage: plabel $2"' - "$PLABEL" "$c"
done
t_ok "no command: exit 2" sh -c '"$1" 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"
t_ok "record -g bad: exit 2" sh -c '"$1" record -g bad -a 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"
t_ok "record -F 0: exit 2" sh -c '"$1" record -F 0 -a 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"
t_ok "record without target: exit 2" sh -c '"$1" record 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"
t_ok "serve -F 0: exit 2" sh -c '"$1" serve -F 0 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"
t_ok "serve --max-requests 0: exit 2" sh -c '"$1" serve --max-requests 0 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"
t_ok "run without labels: exit 2" sh -c '"$1" run -- true 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"
t_ok "run -l novalue: exit 2" sh -c '"$1" run -l novalue -- true 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"

if [ ! -e /dev/plabel ]; then
	t_ok "record without module: exit 1, clear message" sh -c \
		'm=$("$1" record -o "$2" -a 2>&1); rc=$?; [ $rc -eq 1 ] && echo "$m" | grep -q "is the plabel module loaded"' - "$PLABEL" "$E2E_OUT/none"
	t_skip "record -p of a dead process" "no /dev/plabel"
	t_skip "SIGINT ends recording" "no /dev/plabel"
	t_done
	exit
fi
t_ok "record -p of a dead process: exit 1" sh -c '"$1" record -o "$2" -p 999999 2>/dev/null; [ $? -eq 1 ]' - "$PLABEL" "$E2E_OUT/dead"

if command -v setpriv >/dev/null; then
	t_ok "record without CAP_PERFMON: exit 1, clear message" sh -c \
		'm=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$1" record -o /tmp/nobody -a 2>&1); rc=$?;
		 echo "# $m"; [ $rc -eq 1 ] && echo "$m" | grep -q "CAP_PERFMON or root"' - "$PLABEL"
else
	t_skip "record without CAP_PERFMON" "no setpriv(1)"
fi

if command -v script >/dev/null; then
	t_ok "progress line on a terminal" sh -c \
		'script -qec "$1 record -o $2 -- sleep 2.5" /dev/null |
		 grep -q "recording [0-9]*s, [0-9.]* MiB read, [0-9]* samples, [0-9]* lost"' \
		- "$PLABEL" "$E2E_OUT/tty"
else
	t_skip "progress line on a terminal" "no script(1)"
fi

D=$E2E_OUT/sigint
"$PLABEL" record -o "$D" -a >"$D.log" 2>&1 &
pid=$!
"$E2E_BIN/spin" 1000 &
spin=$!
sleep 2
kill -INT "$pid"
wait "$pid"
rc=$?
wait "$spin"
sed 's/^/# /' "$D.log"
t_ok "SIGINT: -a sampled the busy program" grep -q "plabel: [1-9][0-9]* samples" "$D.log"
t_ok "SIGINT: record exits 0" test "$rc" -eq 0
t_ok "SIGINT: cpu.pb.gz written" test -s "$D/cpu.pb.gz"
t_ok "SIGINT: readable by go tool pprof" sh -c 'go tool pprof -top "$1" >/dev/null 2>&1' - "$D/cpu.pb.gz"
t_ok "SIGINT: lost count in the profile" sh -c 'go tool pprof -top "$1" 2>/dev/null | grep -q "lost records: [0-9]"' - "$D/cpu.pb.gz"

t_done
