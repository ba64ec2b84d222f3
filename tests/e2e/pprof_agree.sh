#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# `plabel report` and `go tool pprof` on profiles recorded from real
# programs: the text must be identical (totals, every flat/cum column and
# percentage, the order, which functions are dropped or marked inline, the
# label split), for the CPU and the thread-create profile, with frame
# pointers and with -g dwarf stacks through libc, and for a whole-system
# recording full of unsymbolized frames.

# dash ignores arguments to ".": pass the name as $1 too
set -- pprof_agree
. tests/e2e/lib/common.sh pprof_agree
e2e_need_module
export TZ=UTC

# agree FILE "PPROF ARGS" [REPORT ARGS..]: identical output, else a diff
agree() {
	_f=$1
	_g=$2
	shift 2
	# shellcheck disable=SC2086
	go tool pprof $_g "$_f" >"$_f.go.txt" 2>/dev/null || return 1
	"$PLABEL" report "$@" "$_f" >"$_f.plabel.txt" || return 1
	if ! cmp -s "$_f.go.txt" "$_f.plabel.txt"; then
		diff "$_f.go.txt" "$_f.plabel.txt" | head -20 | sed 's/^/# /'
		return 1
	fi
}

# Under TCG each go tool pprof run takes seconds, so the VM compares the
# main views; tests/unit/tools_profile_test.c covers every option on the host.
check_all() {
	_f=$1
	_what=$2
	_key=$3
	_val=$4
	t_ok "$_what: -top" agree "$_f" -top
	t_ok "$_what: -tags" agree "$_f" -tags --all-tags
	if [ -n "$_key" ]; then
		t_ok "$_what: -tagfocus $_key=$_val -nodecount=4" agree "$_f" \
			"-top -nodecount=4 -tagfocus=$_key=$_val" --top 4 \
			--tagfocus "$_key=$_val"
	fi
}

D=$E2E_OUT/workers
t_ok "record workers" e2e_record "$D" -F 1000 -- "$E2E_BIN/workers" 200
check_all "$D/cpu.pb.gz" "workers cpu" worker alpha
check_all "$D/threadcreate.pb.gz" "workers threadcreate"
head -n 20 "$D/cpu.pb.gz.plabel.txt" | sed 's/^/# /'

D=$E2E_OUT/nofp
t_ok "record -g dwarf nofp" e2e_record "$D" -F 1000 -g dwarf -- \
	"$E2E_BIN/nofp" 10
check_all "$D/cpu.pb.gz" "dwarf cpu"

D=$E2E_OUT/all
"$PLABEL" record -o "$D" -F 500 -a >"$D.log" 2>&1 &
pid=$!
sleep 1
"$E2E_BIN/workers" 100
kill -INT "$pid"
wait "$pid"
rc=$?
sed 's/^/# /' "$D.log"
t_ok "record -a until SIGINT" test "$rc" -eq 0
t_ok "system-wide cpu: -top" agree "$D/cpu.pb.gz" -top

t_done
