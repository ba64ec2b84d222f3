#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel record on a program whose two threads label themselves through
# libplabel: worker=alpha does three times the work of worker=beta.
# The CPU profile must split 3:1 by label, attribute each burn function to
# its own label, and the thread-create profile must show spawn_workers()
# creating the threads under phase=spawn.

E2E_NAME=record_labels
. tests/e2e/lib/common.sh
e2e_need_module

D=$E2E_OUT/workers
t_ok "record exits 0" e2e_record "$D" -F 1000 -- "$E2E_BIN/workers" 400
t_ok "cpu.pb.gz written" test -s "$D/cpu.pb.gz"
t_ok "threadcreate.pb.gz written" test -s "$D/threadcreate.pb.gz"
t_ok "summary line" grep -q "samples.*label sets.*lost records.*wrote" "$D.log"

e2e_pprof -tags "$D/cpu.pb.gz" | sed 's/^/# /'
a=$(e2e_tag_pct "$D/cpu.pb.gz" worker alpha)
b=$(e2e_tag_pct "$D/cpu.pb.gz" worker beta)
echo "# worker=alpha $a%, worker=beta $b%"
t_ok "alpha and beta sampled" e2e_between "$b" 1 100
ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { print (b > 0 ? a / b : 0) }')
t_ok "alpha:beta is 3:1 (got $ratio)" e2e_between "$ratio" 2.2 4.0

top_a=$(e2e_pprof -tagfocus worker=alpha -top "$D/cpu.pb.gz")
top_b=$(e2e_pprof -tagfocus worker=beta -top "$D/cpu.pb.gz")
echo "$top_a" | sed 's/^/# /'
t_ok "burn_alpha under worker=alpha" \
	sh -c 'echo "$1" | grep -q " burn_alpha$"' - "$top_a"
t_ok "no burn_beta under worker=alpha" \
	sh -c '! echo "$1" | grep -q " burn_beta$"' - "$top_a"
t_ok "burn_beta under worker=beta" \
	sh -c 'echo "$1" | grep -q " burn_beta$"' - "$top_b"
t_ok "no burn_alpha under worker=beta" \
	sh -c '! echo "$1" | grep -q " burn_alpha$"' - "$top_b"
# gcc gives a leaf without stack use no frame even with frame pointers on,
# so a frame-pointer walk from burn_alpha() skips its caller.
t_ok "stack burn_alpha <- thread start" \
	e2e_trace "$D/cpu.pb.gz" "worker: +alpha" burn_alpha \
	"worker_main|start_thread"

t_ok "plabel's own code before the exec left out" \
	sh -c '! go tool pprof -traces "$1" 2>/dev/null | grep -q plabel_cmd_record' - "$D/cpu.pb.gz"
t_ok "two threads created under phase=spawn" \
	e2e_between "$(e2e_pprof -tags "$D/threadcreate.pb.gz" |
		awk '$1 == "phase:" { p = 1; next } p && $NF == "spawn" { print $1; exit }')" 2 2

# Thread creation goes through libc's pthread_create and clone3, which have
# no frame pointers: -g dwarf gets the creating function.
D=$E2E_OUT/workers-dwarf
t_ok "record -g dwarf exits 0" e2e_record "$D" -F 250 -g dwarf -- "$E2E_BIN/workers" 200
e2e_pprof -traces "$D/threadcreate.pb.gz" | sed 's/^/# /'
t_ok "thread creation by spawn_workers under phase=spawn" \
	e2e_trace "$D/threadcreate.pb.gz" "phase: +spawn" \
	"__clone3|clone3|pthread_create.*" spawn_workers main

# -p: attach to a running process until it exits
"$E2E_BIN/workers" 1000 &
pid=$!
D=$E2E_OUT/pid
t_ok "record -p exits 0 when the process exits" e2e_record "$D" -p "$pid"
wait "$pid"
a=$(e2e_tag_pct "$D/cpu.pb.gz" worker alpha)
t_ok "record -p: worker=alpha sampled" e2e_between "$a" 1 100

t_done
