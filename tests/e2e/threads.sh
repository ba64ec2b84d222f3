#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel threads on a program whose three labeled threads block in
# read() of a pipe, nanosleep() and a contended mutex (tests/e2e/progs/
# blockers.c): the text view shows each blocked thread's labels, state,
# wait kind and the function it blocked in; -o writes a profile that the
# real `go tool pprof` reads with the threads/count sample type, the
# labels (-tags) and the blocking functions on the labeled stacks
# (-traces). Bad arguments are refused.
#
# e2e: every kernel

E2E_NAME=threads
. tests/e2e/lib/common.sh

"$PLABEL" threads >"$E2E_OUT/bad.log" 2>&1
t_ok "threads without -p refused with status 2" test "$?" = 2
"$PLABEL" threads -p 0 >"$E2E_OUT/bad.log" 2>&1
t_ok "threads -p 0 refused with status 2" test "$?" = 2
"$PLABEL" threads -p 1 -g nope >"$E2E_OUT/bad.log" 2>&1
t_ok "threads -g nope refused with status 2" test "$?" = 2

e2e_need_module

"$PLABEL" threads -p 2147483647 >"$E2E_OUT/gone.log" 2>&1
t_ok "threads of a process that does not exist fails" test "$?" = 1
t_ok "... saying so" grep -q "no such process" "$E2E_OUT/gone.log"

"$E2E_BIN/blockers" >"$E2E_OUT/blockers.log" 2>&1 &
PID=$!
for i in $(seq 100); do
	grep -q ready "$E2E_OUT/blockers.log" && break
	sleep 0.1
done
t_ok "the blocking program is ready" grep -q ready "$E2E_OUT/blockers.log"

for g in fp dwarf; do
	T=$E2E_OUT/threads-$g.txt
	"$PLABEL" threads -g $g -p $PID >"$T" 2>"$T.err"
	t_ok "[$g] plabel threads succeeds" test "$?" = 0
	sed 's/^/# /' "$T" | head -60
	t_ok "[$g] four threads in all" grep -q "^threads profile: total 4$" "$T"
	# group GROUP-LABEL-ERE FUNCTION: a group with such labels whose
	# stack has FUNCTION on it
	group() {
		awk -v lab="$1" -v fn="$2" '
			/^[0-9]+ @/ { inl = 0; hasfn = 0; next }
			/^# labels:/ { inl = $0 ~ lab; next }
			/^#\t/ && inl && $3 == fn { found = 1 }
			END { exit !found }' "$T"
	}
	t_ok "[$g] reader: io wait in block_read" \
		group '"job":"reader".*"state":"sleeping".*"wait":"io"' block_read
	t_ok "[$g] sleeper: sleep wait in block_sleep" \
		group '"job":"sleeper".*"state":"sleeping".*"wait":"sleep"' block_sleep
	t_ok "[$g] locker: futex wait in block_lock" \
		group '"job":"locker".*"state":"sleeping".*"wait":"futex"' block_lock
	t_ok "[$g] the process name is a label" \
		grep -q '"process":"blockers"' "$T"
done

P=$E2E_OUT/threads.pb.gz
"$PLABEL" threads -p $PID -o "$P" >"$E2E_OUT/o.log" 2>&1
t_ok "plabel threads -o succeeds" test "$?" = 0
t_ok "... and writes nothing to stdout" test ! -s "$E2E_OUT/o.log"
e2e_pprof -raw "$P" >"$E2E_OUT/raw.txt"
t_ok "go tool pprof reads it: sample type threads/count" \
	grep -q "threads/count" "$E2E_OUT/raw.txt"
e2e_pprof -tags "$P" >"$E2E_OUT/tags.txt"
sed 's/^/# /' "$E2E_OUT/tags.txt"
for j in reader sleeper locker; do
	t_ok "-tags: job $j, one thread" \
		grep -Eq "^ +1(\.0)? \(.*\): $j$" "$E2E_OUT/tags.txt"
done
t_ok "-tags: the wait kinds" grep -Eq ": futex$" "$E2E_OUT/tags.txt"
t_ok "-tags: thread ids" grep -q "tid:" "$E2E_OUT/tags.txt"
t_ok "-traces: reader blocked in block_read" \
	e2e_trace "$P" "job: *reader" "block_read" "blocker_fn"
t_ok "-traces: sleeper blocked in block_sleep" \
	e2e_trace "$P" "job: *sleeper" "block_sleep" "blocker_fn"
t_ok "-traces: locker blocked in block_lock" \
	e2e_trace "$P" "job: *locker" "block_lock" "blocker_fn"

# plabel serve's /debug/pprof/goroutine: the same threads, for its -p
# process (and, with -a, for every process it may read)
if command -v curl >/dev/null; then
	ip link set lo up 2>/dev/null
	for target in "-p $PID" "-a"; do
		# shellcheck disable=SC2086
		"$PLABEL" serve --listen 127.0.0.1:0 $target \
			2>"$E2E_OUT/serve.log" &
		SRV=$!
		i=0
		while ! grep -q "listening on" "$E2E_OUT/serve.log" &&
		      [ $i -lt 600 ] && kill -0 $SRV 2>/dev/null; do
			sleep 0.05
			i=$((i + 1))
		done
		PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' \
			"$E2E_OUT/serve.log")
		URL=http://127.0.0.1:$PORT/debug/pprof/goroutine
		q=
		[ "$target" = -a ] && q="&pid=$PID"
		curl -s -o "$E2E_OUT/g.txt" -w '%{http_code}' "$URL?debug=1$q" \
			>"$E2E_OUT/g.code"
		t_ok "[serve $target] goroutine?debug=1: 200" \
			test "$(cat "$E2E_OUT/g.code")" = 200
		sed 's/^/# /' "$E2E_OUT/g.txt" | head -12
		t_ok "[serve $target] the text view: four threads" \
			grep -q "^threads profile: total 4$" "$E2E_OUT/g.txt"
		t_ok "[serve $target] the locker's labels and wait" grep -q \
			'"job":"locker".*"state":"sleeping".*"wait":"futex"' \
			"$E2E_OUT/g.txt"
		[ -z "$q" ] || q="?pid=$PID"
		e2e_pprof -raw "$URL$q" >"$E2E_OUT/g-raw.txt"
		t_ok "[serve $target] go tool pprof fetches it: threads/count" \
			grep -q "threads/count" "$E2E_OUT/g-raw.txt"
		t_ok "[serve $target] go tool pprof -traces: reader in block_read" \
			e2e_trace "$URL$q" "job: *reader" "block_read" "blocker_fn"
		t_ok "[serve $target] goroutine?seconds=1: 400" test "$(curl -s \
			-o /dev/null -w '%{http_code}' "$URL?seconds=1")" = 400
		if [ "$target" = -a ]; then
			# without pid=: every process it may read, this one too
			curl -s "$URL?debug=1" >"$E2E_OUT/g-all.txt"
			t_ok "[serve -a] every process: the locker among them" \
				grep -q '"job":"locker"' "$E2E_OUT/g-all.txt"
			t_ok "[serve -a] ... and other processes" sh -c \
				"grep -o '\"process\":\"[^\"]*\"' '$E2E_OUT/g-all.txt' |
				 grep -vq '\"process\":\"blockers\"'"
		fi
		kill $SRV
		wait $SRV 2>/dev/null
	done
else
	t_skip "serve goroutine" "curl not installed"
fi

kill $PID
wait $PID 2>/dev/null
t_done
