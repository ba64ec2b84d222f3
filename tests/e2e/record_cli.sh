#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel record as a perf user expects it: -a and -p with a command,
# --duration, the command's exit status, the output directory checked
# before recording (and a previous one kept as DIR.old), one line when
# sampling is live, the rate limit named, --version.

E2E_NAME=record_cli
. tests/e2e/lib/common.sh

# tag_values FILE KEY: the values go tool pprof -tags lists for KEY
tag_values() {
	e2e_pprof -tags "$1" | awk -v key="$2" '
		$1 == key ":" && $2 == "Total" { k = 1; next }
		$2 == "Total" { k = 0 }
		k && NF { print $NF }' | sort -u
}

# elapsed T0 T1: seconds between two /proc/uptime readings
elapsed() {
	awk -v a="$1" -v b="$2" 'BEGIN { print b - a }'
}

# duration FILE: the recording's length in seconds, from the profile
duration() {
	"$PLABEL" report "$1" | awk '/^Duration: / {
		v = $2; sub(/,$/, "", v)
		if (v ~ /ms$/) { sub(/ms$/, "", v); v /= 1000 } else sub(/s$/, "", v)
		print v + 0 }'
}

# status CMD..: the exit status of CMD (stdout and stderr discarded)
status() {
	"$@" >/dev/null 2>&1
	echo $?
}

t_ok "--version" sh -c '"$1" --version | grep -q "^plabel [0-9]"' - "$PLABEL"
t_ok "record --version" sh -c '"$1" record --version | grep -q "^plabel [0-9]"' - "$PLABEL"
t_ok "-F above the limit: exit 2, the limit named" sh -c \
	'm=$("$1" record -F 20001 -a 2>&1); [ $? -eq 2 ] && echo "$m" | grep -q "1\.\.20000 Hz"' - "$PLABEL"
t_ok "-a and -p together: exit 2" test "$(status "$PLABEL" record -a -p 1 -- true)" -eq 2
t_ok "bad --duration: exit 2" test "$(status "$PLABEL" record --duration x -a)" -eq 2

e2e_need_module

D=$E2E_OUT
# the command's status, 126/127 when it cannot run, 128+N for a signal
t_ok "-- true: exit 0" test "$(status "$PLABEL" record -o "$D/st" -- true)" -eq 0
t_ok "-- false: exit 1" test "$(status "$PLABEL" record -o "$D/st" -- false)" -eq 1
t_ok "-- sh -c 'exit 3': exit 3" test "$(status "$PLABEL" record -o "$D/st" -- sh -c 'exit 3')" -eq 3
t_ok "-- /nonexistent: exit 127" test "$(status "$PLABEL" record -o "$D/st" -- /nonexistent)" -eq 127
t_ok "-- a directory: exit 126" test "$(status "$PLABEL" record -o "$D/st" -- /)" -eq 126
t_ok "-- killed by SIGKILL: exit 137" test "$(status "$PLABEL" record -o "$D/st" -- sh -c 'kill -9 $$')" -eq 137
t_ok "profile written when the command fails" test -s "$D/st/cpu.pb.gz"
t_ok "record -- make && ..: chains like the command" sh -c \
	'"$1" record -o "$2" -- false 2>/dev/null && exit 1; "$1" record -o "$2" -- true 2>/dev/null && echo ok | grep -q ok' \
	- "$PLABEL" "$D/st"

# the output directory is checked before the command runs
rm -f "$D/ran"
t_ok "-o a file: exit 1 before recording" sh -c \
	'm=$("$1" record -o /etc/passwd -- touch "$2" 2>&1); rc=$?; echo "# $m";
	 [ $rc -eq 1 ] && [ ! -e "$2" ] && echo "$m" | grep -q "not a directory"' \
	- "$PLABEL" "$D/ran"
rm -rf "$D/keep" "$D/keep.old"
e2e_record "$D/keep" -- "$E2E_BIN/spin" 100
first=$(cksum <"$D/keep/cpu.pb.gz")
e2e_record "$D/keep" -- true
t_ok "second recording keeps the first as DIR.old" sh -c \
	'[ "$(cksum <"$1.old/cpu.pb.gz")" = "$2" ] && grep -q "kept the previous $1 as $1.old" "$1.log"' \
	- "$D/keep" "$first"
e2e_record "$D/keep" -- true
t_ok "third recording replaces DIR.old" test -s "$D/keep.old/cpu.pb.gz"

# -g dwarf with an unusable TMPDIR says it falls back
env TMPDIR=/nonexistent "$PLABEL" record -o "$D/tmpdir" -g dwarf -- "$E2E_BIN/spin" 100 >"$D/tmpdir.log" 2>&1
rc=$?
sed 's/^/# /' "$D/tmpdir.log"
t_ok "-g dwarf, TMPDIR unusable: exit 0" test "$rc" -eq 0
t_ok "-g dwarf, TMPDIR unusable: says it falls back" grep -q "cannot create a file in /nonexistent.*falling back" "$D/tmpdir.log"

# one line when sampling is live, also when stderr is not a terminal
e2e_record "$D/live" -- true
t_ok "one 'recording started' line" test "$(grep -c '^plabel: recording started' "$D/live.log")" -eq 1

# -a with a command: the whole system while it runs
"$E2E_BIN/spin" 60000 >/dev/null 2>&1 &
spin=$!
sleep 0.3
t0=$(cut -d' ' -f1 /proc/uptime)
e2e_record "$D/all" -a -- sleep 1.5
rc=$?
t1=$(cut -d' ' -f1 /proc/uptime)
t_ok "-a -- sleep: exit 0" test "$rc" -eq 0
# (building a whole-system profile takes a while on a loaded host)
t_ok "-a -- sleep: ended (wall time)" e2e_between "$(elapsed "$t0" "$t1")" 1.4 60
t_ok "-a -- sleep 1.5: recorded as long as the command ran" e2e_between "$(duration "$D/all/cpu.pb.gz")" 1.4 4
t_ok "-a -- sleep: samples of another process" sh -c \
	'go tool pprof -top "$1" 2>/dev/null | grep -q "parent_spin\|child_spin"' - "$D/all/cpu.pb.gz"

"$PLABEL" report --tags "$D/all/cpu.pb.gz" >"$D/all.tags" 2>&1
sed 's/^/# /' "$D/all.tags" | head -20
t_ok "report --tags of -a: string labels first, no tid table" sh -c \
	'head -1 "$1" | grep -q "^ *process: Total" && ! grep -q "^ *tid: Total" "$1" &&
	 tail -1 "$1" | grep -q "^numeric labels not shown (--all-tags shows them): pid tid$"' - "$D/all.tags"

# -p with a command: those processes while it runs
e2e_record "$D/pids" -p "$spin" -- sleep 1
rc=$?
t_ok "-p PID -- sleep: exit 0" test "$rc" -eq 0
t_ok "-p PID -- sleep: the process sampled" sh -c \
	'go tool pprof -top "$1" 2>/dev/null | grep -q "parent_spin"' - "$D/pids/cpu.pb.gz"
pids=$(tag_values "$D/pids/cpu.pb.gz" pid | tr '\n' ' ')
echo "# pids sampled: $pids"
t_ok "-p PID -- sleep: nothing else" test "$pids" = "$spin "

# --duration: alone with -a, and ending a command
t0=$(cut -d' ' -f1 /proc/uptime)
e2e_record "$D/dur" -a --duration 1
rc=$?
t1=$(cut -d' ' -f1 /proc/uptime)
t_ok "-a --duration 1: exit 0" test "$rc" -eq 0
t_ok "-a --duration 1: ended (wall time)" e2e_between "$(elapsed "$t0" "$t1")" 0.9 60
t_ok "-a --duration 1: recorded about a second" e2e_between "$(duration "$D/dur/cpu.pb.gz")" 0.9 2
t_ok "-a --duration 1: profile written" test -s "$D/dur/cpu.pb.gz"
e2e_record "$D/durcmd" --duration 1 -- sleep 30
rc=$?
t_ok "--duration 1 -- sleep 30: CMD ended by SIGTERM (exit 143)" test "$rc" -eq 143
# The collecting thread: recording a command it waits (for 4 full buffers
# or the end), so it is not woken while a short command runs; with -p it
# takes each read at once. Its voluntary context switches count its
# wake-ups; the kernel wakes the reader about once a second. Recording a
# command, the reading thread itself sleeps until the kernel has news, a
# ring is half full or the command ends: no wake-up each second.
thread_switches() {
	for t in /proc/"$1"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = "$2" ] &&
			awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status"
	done
}
# collector_wakes DIR ARGS..: the collector's wake-ups from 1 s to 3.5 s
# into recording in $wakes, the reading thread's in $rwakes (empty if not
# found)
collector_wakes() {
	_d=$1
	shift
	"$PLABEL" record -o "$_d" "$@" >"$_d.log" 2>&1 &
	_rec=$!
	_n=0
	until grep -q "^plabel: recording started" "$_d.log" ||
	      [ $_n -ge 300 ]; do
		sleep 0.1
		_n=$((_n + 1))
	done
	sleep 1
	_a=$(thread_switches $_rec plabel-collect)
	_ra=$(thread_switches $_rec plabel)
	sleep 2.5
	_b=$(thread_switches $_rec plabel-collect)
	_rb=$(thread_switches $_rec plabel)
	# CMD's own children too: record ends only its direct child
	_kids=$(cat /proc/$_rec/task/*/children 2>/dev/null)
	for _k in $_kids; do
		_kids="$_kids $(cat /proc/$_k/task/*/children 2>/dev/null)"
	done
	kill -INT $_rec 2>/dev/null
	wait $_rec
	kill $_kids 2>/dev/null
	sed 's/^/# /' "$_d.log"
	wakes=
	[ -n "$_a" ] && [ -n "$_b" ] && wakes=$((_b - _a))
	rwakes=
	[ -n "$_ra" ] && [ -n "$_rb" ] && rwakes=$((_rb - _ra))
}
collector_wakes "$D/lazy" -- "$E2E_BIN/spin" 60000
echo "# collector wake-ups recording a command: $wakes; the reader's: $rwakes"
t_ok "recording CMD: the collector is not woken while CMD runs" test "$wakes" = 0
t_ok "recording CMD: the reading thread is not woken while CMD runs" \
	test "$rwakes" = 0
t_ok "recording CMD: what it waited for was collected" sh -c \
	'go tool pprof -top "$1" 2>/dev/null | grep -q "parent_spin\|child_spin"' - "$D/lazy/cpu.pb.gz"
collector_wakes "$D/eager" -p "$spin"
echo "# collector wake-ups recording -p: $wakes"
t_ok "-p: the collector takes each read at once" test "${wakes:-0}" -ge 1
t_ok "-p: the process sampled" sh -c \
	'go tool pprof -top "$1" 2>/dev/null | grep -q "parent_spin"' - "$D/eager/cpu.pb.gz"

# Out of memory for another read buffer while the lazy collector holds the
# others: it is woken to give one back, and recording goes on to the end.
# The shim fails every anonymous mapping of 4 MiB or more after the first
# (the first buffer); a 3 s command's dwarf snapshots at 4999 Hz fill
# more than one.
env LD_PRELOAD="$PWD/$E2E_BIN/libnomap.so" NOMAP_MIN=4194304 NOMAP_ALLOW=1 \
	"$PLABEL" record -F 4999 -g dwarf -o "$D/nomap" -- "$E2E_BIN/spin" 3000 \
	>"$D/nomap.log" 2>&1
rc=$?
sed 's/^/# /' "$D/nomap.log"
t_ok "one read buffer only: exit 0" test "$rc" -eq 0
t_ok "one read buffer only: not stopped for want of memory" \
	sh -c '! grep -q "out of memory" "$1"' - "$D/nomap.log"
t_ok "one read buffer only: recorded to the end" \
	e2e_between "$(duration "$D/nomap/cpu.pb.gz")" 2.9 60

# Past the buffers a lazy collector holds, what is read goes to a file
# ($TMPDIR) whole, to be collected at the end. With the shim above the
# reader has one buffer, so each one it fills is set aside at once (the
# collector is woken to give it back), and the last joins them at the
# end. strace sees the collector write each buffer (pwrite64; the dwarf
# spool writes with pwritev), and every second of the command is in the
# profile, collected in the order read.
if command -v strace >/dev/null; then
	strace -f -qq --seccomp-bpf -e trace=pwrite64 -o "$D/raw.strace" \
		env LD_PRELOAD="$PWD/$E2E_BIN/libnomap.so" NOMAP_MIN=4194304 \
		NOMAP_ALLOW=1 \
		"$PLABEL" record -F 4999 -g dwarf -o "$D/raw" -- \
		"$E2E_BIN/spin" 4000 >"$D/raw.log" 2>&1
	rc=$?
	sed 's/^/# /' "$D/raw.log"
	big=$(awk '/pwrite64/ { n = $0; sub(/.*= /, "", n); if (n + 0 >= 2097152) c++ }
		   END { print c + 0 }' "$D/raw.strace")
	echo "# buffers set aside: $big"
	t_ok "records past the buffers: exit 0" test "$rc" -eq 0
	t_ok "records past the buffers: set aside whole in a file" \
		test "$big" -ge 2
	t_ok "records past the buffers: every second in the profile" \
		e2e_between "$(duration "$D/raw/cpu.pb.gz")" 3.9 60
else
	t_skip "records past the buffers: no strace"
fi

kill $(cat /proc/"$spin"/task/*/children 2>/dev/null) "$spin" 2>/dev/null
wait "$spin" 2>/dev/null

t_done
