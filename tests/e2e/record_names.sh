#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The process and thread labels: the executable's name, following exec;
# each thread's name as it was at the sample, renames included (by the
# thread itself and through /proc); threads running before recording
# named from /proc; --no-process-labels leaves both out.
#
# e2e: every kernel

E2E_NAME=record_names
. tests/e2e/lib/common.sh
e2e_need_module

D=$E2E_OUT
P=$D/names/cpu.pb.gz
# sh execs names: the process label follows the exec
e2e_record "$D/names" -- sh -c "exec $E2E_BIN/names 300"
t_ok "record exits 0" test $? -eq 0
# (sh's own start, before its exec, is the rest: up to 30 % of the samples
# on a busy host; without following the exec there would be no names at all)
t_ok "process=names on most samples" e2e_between "$(e2e_tag_pct "$P" process names)" 60 100
# each part burns the same CPU time: about a third each, loosely (a busy
# host skews the sampled split)
t_ok "thread=before (main thread, before its rename)" e2e_between "$(e2e_tag_pct "$P" thread before)" 10 70
t_ok "thread=after (main thread, after its rename)" e2e_between "$(e2e_tag_pct "$P" thread after)" 10 70
t_ok "thread=worker-one (named by its creator)" e2e_between "$(e2e_tag_pct "$P" thread worker-one)" 10 70
t_ok "-tagfocus thread=worker-one shows the worker's function" sh -c \
	'go tool pprof -top -tagfocus=thread=worker-one "$1" 2>/dev/null | grep -q names_burn' - "$P"
t_ok "pid/tid still there" sh -c 'go tool pprof -tags "$1" 2>/dev/null | grep -q "^ *tid: Total"' - "$P"

# a process running before the recording: named from /proc
"$E2E_BIN/spin" 60000 >/dev/null 2>&1 &
spin=$!
sleep 0.3
e2e_record "$D/pid" -p "$spin" --duration 1
t_ok "-p: process=spin from /proc" e2e_between "$(e2e_tag_pct "$D/pid/cpu.pb.gz" process spin)" 99 100
t_ok "-p: thread=spin from /proc" e2e_between "$(e2e_tag_pct "$D/pid/cpu.pb.gz" thread spin)" 99 100
kill $(cat /proc/"$spin"/task/*/children 2>/dev/null) "$spin" 2>/dev/null
wait "$spin" 2>/dev/null

e2e_record "$D/off" --no-process-labels -- "$E2E_BIN/names" 100
t_ok "--no-process-labels: no process label" sh -c \
	'! go tool pprof -tags "$1" 2>/dev/null | grep -q "^ *process: Total"' - "$D/off/cpu.pb.gz"
t_ok "--no-process-labels: no thread label" sh -c \
	'! go tool pprof -tags "$1" 2>/dev/null | grep -q "^ *thread: Total"' - "$D/off/cpu.pb.gz"

t_done
