#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel record on a program whose two threads label themselves through
# libplabel: worker=alpha does three times the work of worker=beta.
# The CPU profile must split by label as the kernel accounted the workers'
# CPU time, attribute each burn function to
# its own label, and the thread-create profile must show spawn_workers()
# creating the threads under phase=spawn.
#
# e2e: every kernel

E2E_NAME=record_labels
. tests/e2e/lib/common.sh
e2e_need_module

# shares DIR [SAMPLE_INDEX]: sets got (alpha's share of the labeled
# samples' SAMPLE_INDEX, by default the CPU time), want (its share of the
# CPU time the kernel accounted to the workers, which the program prints)
# and off (got - want).
shares() {
	a=$(e2e_tag_pct "$1/cpu.pb.gz" worker alpha ${2:+-sample_index=$2})
	b=$(e2e_tag_pct "$1/cpu.pb.gz" worker beta ${2:+-sample_index=$2})
	ca=$(sed -n 's/.*cpu_ns alpha=\([0-9]*\) beta=.*/\1/p' "$1.log")
	cb=$(sed -n 's/.*cpu_ns alpha=[0-9]* beta=\([0-9]*\).*/\1/p' "$1.log")
	want=$(awk -v a="${ca:-0}" -v b="${cb:-0}" \
		'BEGIN { print (a + b > 0 ? 100 * a / (a + b) : -100) }')
	got=$(awk -v a="${a:-0}" -v b="${b:-0}" \
		'BEGIN { print (a + b > 0 ? 100 * a / (a + b) : 0) }')
	off=$(awk -v g="$got" -v w="$want" 'BEGIN { print g - w }')
	echo "# $1: alpha's share $got% of the labeled ${2:-cpu}," \
		"$want% of the workers' CPU time"
}

D=$E2E_OUT/workers
# The split must match the CPU time the kernel accounted to each worker
# (printed by the program); both ways of counting see the same emulated
# clock, which the work done (3:1) need not. The sample counts: the
# session test holds the module to 5 points; through the whole tool, on an
# emulated CPU shared with the host's other work, 7. A host stall longer
# than the sampler makes up for can push one recording past that, so a
# second recording is made before the check fails; a labeling error fails
# both.
for round in 1 2; do
	e2e_record "$D" -F 1000 -- "$E2E_BIN/workers" 400
	rc=$?
	shares "$D" samples
	e2e_between "$off" -7 7 && break
done
t_ok "record exits 0" test "$rc" = 0
t_ok "cpu.pb.gz written" test -s "$D/cpu.pb.gz"
t_ok "threadcreate.pb.gz written" test -s "$D/threadcreate.pb.gz"
t_ok "summary line" grep -q "samples.*label sets.*lost records.*wrote" "$D.log"
e2e_pprof -tags "$D/cpu.pb.gz" | sed 's/^/# /'
t_ok "alpha and beta sampled" e2e_between "${b:-0}" 1 100
t_ok "alpha's sample share matches its CPU time share within 7 points" \
	e2e_between "$off" -7 7
t_ok "alpha, doing 3x the work, got more CPU than beta" \
	e2e_between "$want" 55 100
shares "$D"
t_ok "alpha's share of the CPU time in the profile is its own within 1 point" \
	e2e_between "$off" -1 1

# At 99 Hz there are some 150 samples: as a count, alpha's share would be
# a draw off by 3.5 points (one standard deviation); weighed by the
# workers' CPU time it is their own, whatever the emulator's stalls.
D=$E2E_OUT/workers-99hz
t_ok "record -F 99 exits 0" e2e_record "$D" -F 99 -- "$E2E_BIN/workers" 400
shares "$D"
t_ok "99 Hz: alpha's share of the CPU time within 1.5 points of its own" \
	e2e_between "$off" -1.5 1.5

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
# no frame pointers: creation records carry a stack snapshot in fp mode
# too, so the creating function is there.
e2e_pprof -traces "$D/threadcreate.pb.gz" | sed 's/^/# /'
t_ok "fp: thread creation by spawn_workers under phase=spawn" \
	e2e_trace "$D/threadcreate.pb.gz" "phase: +spawn" \
	"__clone3|clone3|pthread_create.*" spawn_workers main

D=$E2E_OUT/workers-dwarf
t_ok "record -g dwarf exits 0" e2e_record "$D" -F 250 -g dwarf -- "$E2E_BIN/workers" 200
# the kernel copies a thread's stack only up to where the thread started:
# enough to unwind all the way out
t_ok "dwarf: burn_alpha <- worker_main <- start_thread <- clone3" \
	e2e_trace "$D/cpu.pb.gz" "worker: +alpha" burn_alpha worker_main \
	start_thread "__clone3|clone3"
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

# -p of two: the first to end leaves the reader asleep, not polling its
# pidfd over and over, until the second ends
if command -v strace >/dev/null; then
	D=$E2E_OUT/pid2
	# B waits for the go file, then spins 4 s: all of it falls in the
	# recording however long the reader takes to start
	sleep 60 &
	p1=$!
	sh -c 'while [ ! -e "$1" ]; do sleep 0.05; done; exec "$2" 4000' \
		- "$D.go" "$E2E_BIN/spin" &
	p2=$!
	strace -f -qq -c -e trace=poll -o "$D.strace" \
		"$PLABEL" record -o "$D" -p "$p1,$p2" >"$D.log" 2>&1 &
	rec=$!
	# the reader makes its directory once the session is open
	i=0
	while [ ! -d "$D" ] && [ $i -lt 600 ] && kill -0 "$rec" 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
	done
	touch "$D.go"
	sleep 1.5
	kill "$p1"
	wait "$rec"
	rc=$?
	wait "$p2"
	sed 's/^/# /' "$D.log"
	t_ok "record -p A,B exits 0 when both ended" test "$rc" -eq 0
	polls=$(awk '$NF == "poll" { print $4 }' "$D.strace")
	echo "# poll calls: ${polls:-none}"
	t_ok "record -p A,B: the reader sleeps once A ended" \
		test "${polls:-100000}" -lt 100
	# A's end did not end the recording: B's last seconds are in
	s=$(e2e_pprof -unit=s -top "$D/cpu.pb.gz" | sed -n \
		's/.*Total samples = \([0-9.]*\)s.*/\1/p')
	echo "# sampled: ${s:-none} s"
	t_ok "record -p A,B: B sampled to its end" e2e_between "${s:-0}" 2 4.5
else
	t_skip "record -p A,B" "no strace(1)"
fi

t_done
