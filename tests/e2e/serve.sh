#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel serve with the real clients: go tool pprof fetching
# /debug/pprof/profile?seconds=N over HTTP while a program alternates
# worker=alpha (3 parts) and worker=beta (1 part) on one thread, whose
# label sets were made before any window opened; two fetches at once;
# the pid= and label= filters; threadcreate; the bad requests, the 503 of
# --max-requests, a stalled client (curl, python3); SIGTERM ending it with
# exit status 0; another user's connection closed and --allow-user;
# --unix with a 0600 socket.

E2E_NAME=serve
. tests/e2e/lib/common.sh
e2e_need_module
if ! command -v curl >/dev/null; then
	t_skip "$E2E_NAME" "curl not installed"
	t_done
	exit 0
fi

SRV=
ALT=
cleanup() {
	[ -n "$SRV" ] && kill "$SRV" 2>/dev/null
	[ -n "$ALT" ] && kill "$ALT" 2>/dev/null
	wait 2>/dev/null
}
trap cleanup EXIT

# start_serve LOG ARGS..: plabel serve ARGS.. in the background (SRV), its
# "listening" line awaited; PORT from it when it listens on TCP
start_serve() {
	_log=$1
	shift
	"$PLABEL" serve "$@" 2>"$_log" &
	SRV=$!
	_i=0
	while ! grep -q "listening on" "$_log" && [ $_i -lt 600 ] &&
	      kill -0 "$SRV" 2>/dev/null; do
		sleep 0.05
		_i=$((_i + 1))
	done
	sed 's/^/# /' "$_log"
	PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$_log")
	grep -q "listening on" "$_log"
}

# code URL..: the HTTP status curl gets
code() {
	curl -s -o /dev/null -w '%{http_code}' "$@"
}

# alpha_share FILE: alpha's percentage of the labeled CPU time
alpha_share() {
	_a=$(e2e_tag_pct "$1" worker alpha)
	_b=$(e2e_tag_pct "$1" worker beta)
	awk -v a="${_a:-0}" -v b="${_b:-0}" \
		'BEGIN { print (a + b > 0 ? 100 * a / (a + b) : -1) }'
}

# --- options refused before anything starts ---
t_ok "a non-loopback --listen without --allow-remote: exit 2" sh -c \
	'"$1" serve --listen 0.0.0.0:6060 2>"$2"; [ $? -eq 2 ] && grep -q "allow-remote" "$2"' \
	- "$PLABEL" "$E2E_OUT/remote.err"
t_ok "--listen with a bad port: exit 2" sh -c \
	'"$1" serve --listen 127.0.0.1:99999 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"
t_ok "--unix with --listen: exit 2" sh -c \
	'"$1" serve --listen 127.0.0.1:1 --unix /tmp/x 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"
t_ok "--allow-user with no such user: exit 2" sh -c \
	'"$1" serve --allow-user no-such-user-here 2>"$2"; [ $? -eq 2 ] && grep -q "no such user" "$2"' \
	- "$PLABEL" "$E2E_OUT/allow.err"
t_ok "--allow-user with --unix: exit 2" sh -c \
	'"$1" serve --unix /tmp/x --allow-user nobody 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"
t_ok "--allow-user on a wildcard address: exit 2" sh -c \
	'"$1" serve --listen 0.0.0.0:1 --allow-remote --allow-user nobody 2>/dev/null; [ $? -eq 2 ]' - "$PLABEL"

# --- the labeled workload, then the server ---
"$E2E_BIN/alternate" 120000 >"$E2E_OUT/alt.log" 2>&1 &
ALT=$!
start_serve "$E2E_OUT/serve.log" --listen 127.0.0.1:0 -F 250 \
	--max-seconds 60 --max-requests 3
t_ok "serve listens, and says where on one line" test -n "$PORT"
[ -n "$PORT" ] || { t_done; exit 1; }
URL=http://127.0.0.1:$PORT/debug/pprof
i=0
while ! grep -q ready "$E2E_OUT/alt.log" && [ $i -lt 200 ]; do
	sleep 0.05
	i=$((i + 1))
done
sleep 1	# the label sets went by before any window opens

# two go tool pprof fetches at once. A host stall longer than the
# sampler makes up for can push one window's split off; a second pair is
# fetched before the check fails (a labeling error fails both).
# go tool pprof waits only seconds beyond seconds=N by default; under
# emulation symbolizing every process of a window takes longer than on
# hardware, so it is given 60 s (the time taken is printed).
for round in 1 2; do
	t0=$(date +%s.%N)
	go tool pprof -timeout 60 -proto "$URL/profile?seconds=4" \
		>"$E2E_OUT/p1.pb.gz" 2>"$E2E_OUT/p1.err" &
	f1=$!
	go tool pprof -timeout 60 -proto "$URL/profile?seconds=3" \
		>"$E2E_OUT/p2.pb.gz" 2>"$E2E_OUT/p2.err"
	rc2=$?
	t2=$(date +%s.%N)
	wait $f1
	rc1=$?
	t1=$(date +%s.%N)
	echo "# answered after $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s (seconds=4)" \
		"and $(awk -v a="$t0" -v b="$t2" 'BEGIN { print b - a }') s (seconds=3)"
	sed 's/^/# /' "$E2E_OUT/p1.err"
	s1=$(alpha_share "$E2E_OUT/p1.pb.gz")
	s2=$(alpha_share "$E2E_OUT/p2.pb.gz")
	echo "# round $round: alpha's share $s1% and $s2% (75% wanted)"
	e2e_between "$s1" 67 83 && e2e_between "$s2" 67 83 && break
done
t_ok "go tool pprof fetched profile?seconds=4" test "$rc1" = 0 -a -s "$E2E_OUT/p1.pb.gz"
t_ok "a second fetch at the same time" test "$rc2" = 0 -a -s "$E2E_OUT/p2.pb.gz"
e2e_pprof -tags "$E2E_OUT/p1.pb.gz" | sed 's/^/# /'
t_ok "window 1: alpha's share of the labeled CPU time 75% within 8 points" \
	e2e_between "$s1" 67 83
t_ok "window 2: alpha's share 75% within 8 points" e2e_between "$s2" 67 83
top_a=$(e2e_pprof -tagfocus worker=alpha -top "$E2E_OUT/p1.pb.gz")
echo "$top_a" | sed 's/^/# /'
t_ok "burn_alpha under worker=alpha (mappings kept from before the window)" \
	sh -c 'echo "$1" | grep -q " burn_alpha$"' - "$top_a"
t_ok "no burn_beta under worker=alpha" \
	sh -c '! echo "$1" | grep -q " burn_beta$"' - "$top_a"
e2e_pprof -raw "$E2E_OUT/p1.pb.gz" | grep '^Comment' | sed 's/^/# /'
secs=$(e2e_pprof -raw "$E2E_OUT/p1.pb.gz" | sed -n 's/^Duration: *//p')
echo "# duration: $secs"
t_ok "the profile's duration is the window's" \
	sh -c 'case "$1" in 4s|4.0*s) exit 0;; esac; exit 1' - "$secs"

# filters
go tool pprof -timeout 60 -proto "$URL/profile?seconds=2&label=worker:beta" \
	>"$E2E_OUT/beta.pb.gz" 2>/dev/null
b=$(e2e_tag_pct "$E2E_OUT/beta.pb.gz" worker beta)
a=$(e2e_tag_pct "$E2E_OUT/beta.pb.gz" worker alpha)
t_ok "label=worker:beta: all of it beta" e2e_between "$b" 99.9 100
t_ok "label=worker:beta: no alpha" e2e_between "$a" 0 0
go tool pprof -timeout 60 -proto "$URL/profile?seconds=2&pid=$ALT" \
	>"$E2E_OUT/pid.pb.gz" 2>/dev/null
t_ok "pid=PID: that process's samples" \
	e2e_between "$(alpha_share "$E2E_OUT/pid.pb.gz")" 60 90
go tool pprof -timeout 60 -proto "$URL/profile?seconds=2&pid=1" \
	>"$E2E_OUT/pid1.pb.gz" 2>/dev/null
t_ok "pid=1: none of the workload's" \
	e2e_between "$(alpha_share "$E2E_OUT/pid1.pb.gz")" -1 -1

# thread creations since the start: the workers program's two threads
"$E2E_BIN/workers" 50 >/dev/null 2>&1
go tool pprof -timeout 60 -proto "$URL/threadcreate" >"$E2E_OUT/tc.pb.gz" 2>/dev/null
e2e_pprof -tags "$E2E_OUT/tc.pb.gz" | sed 's/^/# /'
t_ok "threadcreate: two creations under phase=spawn" \
	e2e_between "$(e2e_pprof -tags "$E2E_OUT/tc.pb.gz" |
		awk '$1 == "phase:" { p = 1; next } p && $NF == "spawn" { print $1; exit }')" 2 2

# bad requests; sampling goes on
t_ok "index: 200" test "$(code "$URL/")" = 200
# another user's connection is closed unanswered, and serve says why
t_ok "uid 65534: no answer" test "$(setpriv --reuid=65534 --regid=65534 \
	--clear-groups curl -s -o /dev/null -w '%{http_code}' \
	"$URL/profile?seconds=1")" = 000
t_ok "uid 65534: refused, on stderr" \
	grep -q "refused a connection from uid 65534" "$E2E_OUT/serve.log"
t_ok "root still answered" test "$(code "$URL/")" = 200
t_ok "seconds=abc: 400" test "$(code "$URL/profile?seconds=abc")" = 400
t_ok "seconds=-1: 400" test "$(code "$URL/profile?seconds=-1")" = 400
t_ok "seconds over --max-seconds: 400" test "$(code "$URL/profile?seconds=61")" = 400
t_ok "400 says why" sh -c 'curl -s "$1" | grep -q "maximum"' - "$URL/profile?seconds=61"
t_ok "heap: 404" test "$(code "$URL/heap")" = 404
t_ok "heap without --heap: 404 says why" sh -c 'curl -s "$1" | grep -q "plabel serve --heap"' - "$URL/heap"
for p in allocs block mutex; do
	t_ok "$p: 404" test "$(code "$URL/$p")" = 404
done
t_ok "unknown path: 404" test "$(code "http://127.0.0.1:$PORT/nope")" = 404
t_ok "POST: 405" test "$(code -X POST "$URL/")" = 405

# a stalled client (half a request) and a slow one are cut by the
# connection timeout; meanwhile a profile is served
if command -v python3 >/dev/null; then
	python3 - "$PORT" >"$E2E_OUT/stall.log" 2>&1 <<'EOF' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /debug/pprof/ HTTP/1.1\r\nHo")
t = time.time()
s.settimeout(60)
try:
    d = s.recv(100)
except Exception as e:
    d = repr(e).encode()
print("closed after %.1f s: %r" % (time.time() - t, d))
EOF
	stall=$!
	sleep 0.5
	t_ok "a profile while a client stalls" \
		test "$(code "$URL/profile?seconds=1")" = 200
	wait $stall
	sed 's/^/# /' "$E2E_OUT/stall.log"
	t_ok "the stalled client is cut within 20 s" \
		grep -q "closed after \([0-9]\|1[0-9]\)\.[0-9] s: b''" "$E2E_OUT/stall.log"
else
	t_skip "stalled client" "no python3"
fi
big=$(head -c 40000 /dev/zero | tr '\0' a)
t_ok "oversized headers: 4xx" sh -c \
	'c=$(curl -s -o /dev/null -w "%{http_code}" -H "X-Big: $2" "$1"); [ "$c" -ge 400 ] && [ "$c" -lt 500 ]' \
	- "$URL/" "$big"

# --max-requests 3: a fourth profile at once is 503 with Retry-After
# (curl takes a while to start under emulation: the three get 5 s to
# open their windows, which stay open 10 s)
for i in 1 2 3; do
	curl -s -o "$E2E_OUT/busy$i.pb.gz" -w '%{http_code}\n' \
		"$URL/profile?seconds=10" >"$E2E_OUT/busy$i.code" &
done
sleep 5
curl -s -D "$E2E_OUT/503.head" -o /dev/null "$URL/profile?seconds=1"
sed 's/^/# /' "$E2E_OUT/503.head"
t_ok "a fourth at once: 503" grep -q "^HTTP/1.1 503" "$E2E_OUT/503.head"
t_ok "503 with Retry-After" grep -qi "^Retry-After: [0-9]" "$E2E_OUT/503.head"
wait_busy() {
	for i in 1 2 3; do
		_j=0
		while [ ! -s "$E2E_OUT/busy$i.code" ] && [ $_j -lt 1200 ]; do
			sleep 0.05
			_j=$((_j + 1))
		done
	done
}
wait_busy
t_ok "the three within the limit: 200" test \
	"$(cat "$E2E_OUT"/busy[123].code | sort -u)" = 200

# plabel record beside serve: both run (the module runs several sessions
# at once), and record's profile has its own samples
"$PLABEL" record -o "$E2E_OUT/rec" --duration 1 -a >"$E2E_OUT/rec.log" 2>&1
rc=$?
sed 's/^/# /' "$E2E_OUT/rec.log"
t_ok "record beside serve: exit 0" test "$rc" -eq 0
t_ok "record beside serve: a profile with samples" sh -c \
	'go tool pprof -raw "$1" 2>/dev/null | grep -Eq "^ +[0-9]+ +[0-9]+: [0-9]"' - "$E2E_OUT/rec/cpu.pb.gz"
t_ok "serve still answers" test "$(code "$URL/profile?seconds=1")" = 200

# SIGTERM with a window open: it gets 503, serve exits 0
curl -s -o /dev/null -w '%{http_code}' "$URL/profile?seconds=20" \
	>"$E2E_OUT/term.code" &
cpid=$!
sleep 3	# curl's start is slow under emulation: its window must be open
kill -TERM "$SRV"
wait "$SRV"
rc=$?
SRV=
wait $cpid
t_ok "SIGTERM: exit status 0" test "$rc" = 0
t_ok "SIGTERM: the open window gets 503" test "$(cat "$E2E_OUT/term.code")" = 503
t_ok "the session is gone: a recording can start" \
	e2e_record "$E2E_OUT/after" --duration 0.5 -a

# --allow-user: that user's connections are taken
start_serve "$E2E_OUT/allow.log" --listen 127.0.0.1:0 -F 100 \
	--allow-user nobody
t_ok "--allow-user nobody: uid 65534 answered" test "$(setpriv \
	--reuid=65534 --regid=65534 --clear-groups \
	curl -s -o /dev/null -w '%{http_code}' \
	"http://127.0.0.1:$PORT/debug/pprof/")" = 200
kill -INT "$SRV"
wait "$SRV"
SRV=

# --unix: mode 0600, served there
sock=/tmp/plabel-serve-e2e.sock
start_serve "$E2E_OUT/unix.log" --unix "$sock" -F 100
t_ok "--unix: the socket is mode 0600" test "$(stat -c %a "$sock")" = 600
t_ok "--unix: index over the socket" test \
	"$(code --unix-socket "$sock" http://localhost/debug/pprof/)" = 200
kill -INT "$SRV"
wait "$SRV"
rc=$?
SRV=
t_ok "SIGINT: exit status 0" test "$rc" = 0
t_ok "--unix: the socket is removed at exit" test ! -e "$sock"

kill "$ALT" 2>/dev/null
wait "$ALT" 2>/dev/null
ALT=
t_done
