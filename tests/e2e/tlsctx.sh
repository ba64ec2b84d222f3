#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel record on programs that publish their threads' contexts for
# outside profilers without libplabel (tests/e2e/tlsctx/): the
# OpenTelemetry thread context (its key map in the process context) and
# custom-labels v1, the thread-local pointer in the executable, in a
# library linked at start (TLSDESC or general dynamic) or in one loaded
# with dlopen() (dynamic TLS through the DTV, or glibc's optional static
# TLS). Thread A (endpoint=/alpha tenant=acme, OTel: with a span) and
# thread B (endpoint=/beta, over an earlier /gamma) take turns on one
# CPU, A burning 30 ms of its CPU time a turn and B 10 ms: A has 75% of
# the time they burn. The CPU profile must split the samples that carry
# an endpoint 75:25 within 3 points, the reader having registered the
# process soon enough for 40% of its samples to carry one (the CPU time
# the kernel accounted to each thread, which the program prints, is
# shown too: it adds what each turn's switch costs, and so comes out a
# little under 75% on an emulated CPU); A's samples carry its trace and
# span ids in hex and tenant=acme, B's none of them; /gamma and the
# custom-labels label with no key never show; neither profile counts
# lost records, unresolved sets or contexts it could not decode; with
# --off-cpu the waits carry the labels too; and plabel serve -p labels a
# running process's samples from its contexts as well. (The module's
# part, which differs between kernels, is tests/kselftest/tlsctx_test.c,
# run on every kernel; this script runs on 6.1 and 6.12.)

E2E_NAME=tlsctx
. tests/e2e/lib/common.sh
e2e_need_module

TRACE=0102030405060708090a0b0c0d0e0f10
SPAN=a1a2a3a4a5a6a7a8

# raw FILE OUT: `go tool pprof -raw` of FILE as OUT.raw, and OUT.samples,
# one line per sample: its first value (a count) and its string labels as
# KEY=VALUE
raw() {
	e2e_pprof -raw "$1" >"$2.raw"
	awk '
		function flush() { if (have) print n lab; have = 0 }
		/^Samples:/ { on = 1; getline; next }
		on && /^[A-Z]/ { flush(); on = 0 }
		on && /^ *[0-9]+( +[0-9]+)*: / {
			flush()
			n = $1
			lab = ""
			have = 1
			next
		}
		on && have {
			for (i = 1; i <= NF; i++) {
				t = $i
				if (t !~ /^[A-Za-z_.]+:\[.*\]$/)
					continue
				sub(/:\[/, "=", t)
				sub(/\]$/, "", t)
				lab = lab " " t
			}
		}
		END { flush() }' "$2.raw" >"$2.samples"
}

# count SAMPLES [KEY=VALUE | KEY=]..: the samples with all these labels
# (KEY=: with any value of KEY)
count() {
	_f=$1
	shift
	awk -v want="$*" '
		BEGIN { n = split(want, w, " ") }
		{
			ok = 1
			for (i = 1; i <= n && ok; i++) {
				hit = 0
				for (j = 2; j <= NF; j++)
					if ($j == w[i] || (w[i] ~ /=$/ &&
					    index($j, w[i]) == 1))
						hit = 1
				ok = hit
			}
			if (ok)
				s += $1
		}
		END { print s + 0 }' "$_f"
}

# comment RAW TEXT: the number of the profile comment "TEXT: N" (0: none)
comment() {
	awk -v t="$2" '
		index($0, "Comment: " t ": ") == 1 { v = $NF }
		END { print v + 0 }' "$1"
}

# no_errors RAW: no lost records, unresolved sets, lost processes or
# contexts that did not decode
no_errors() {
	for _nc in "lost records" \
		  "samples with an unresolved label set" \
		  "processes the kernel could not follow" \
		  "thread-context attributes whose key was not in the key map" \
		  "thread-context labels not fit for a label" \
		  "thread contexts the kernel could not copy whole"; do
		_nv=$(comment "$1" "$_nc")
		if [ "$_nv" != 0 ]; then
			echo "# $1: $_nc: $_nv"
			return 1
		fi
	done
}

# cputime LOG ENDPOINT: the CPU time the program printed for its thread
cputime() {
	sed -n "s|^cpu_ns endpoint=$2 \([0-9]*\)$|\1|p" "$1"
}

# pct PART WHOLE
pct() {
	awk -v p="$1" -v w="$2" 'BEGIN { print (w > 0 ? 100 * p / w : 0) }'
}

for v in tlsctx_otel_exe tlsctx_otel_desc tlsctx_otel_gd tlsctx_otel_dlopen \
	 tlsctx_otel_dlsmall tlsctx_cl_exe tlsctx_cl_lib; do
	D=$E2E_OUT/$v
	# A host stall on the emulated CPUs may push one recording's split
	# off: a second one is made before the check fails (a labeling
	# error fails both).
	for round in 1 2; do
		e2e_record "$D" -F 999 -- "$E2E_BIN/$v" 3
		rc=$?
		raw "$D/cpu.pb.gz" "$D/cpu"
		all=$(count "$D/cpu.samples")
		ep=$(count "$D/cpu.samples" endpoint=)
		a=$(count "$D/cpu.samples" endpoint=/alpha)
		b=$(count "$D/cpu.samples" endpoint=/beta)
		ta=$(cputime "$D.log" /alpha)
		tb=$(cputime "$D.log" /beta)
		got=$(pct "$a" "$((a + b))")
		off=$(awk -v g="$got" 'BEGIN { print g - 75 }')
		acct=$(pct "${ta:-0}" "$((${ta:-0} + ${tb:-0}))")
		echo "# [$v] samples $all, with an endpoint $ep; /alpha $a" \
			"/beta $b: /alpha's share $got% (of the CPU time" \
			"accounted: $acct%)"
		e2e_between "$off" -3 3 && break
	done
	t_ok "[$v] record exits 0" test "$rc" = 0
	t_ok "[$v] the program printed its threads' CPU time" \
		test -n "$ta" -a -n "$tb"
	t_ok "[$v] /alpha and /beta sampled" test "$a" -gt 0 -a "$b" -gt 0
	t_ok "[$v] /alpha's share of the samples within 3 points of 75%" \
		e2e_between "$off" -3 3
	t_ok "[$v] at least 40% of the samples carry an endpoint" \
		e2e_between "$(pct "$ep" "$all")" 40 100
	t_ok "[$v] nothing but /alpha and /beta as endpoint (no /gamma)" \
		test "$ep" = "$((a + b))"
	t_ok "[$v] /alpha's samples carry tenant=acme" \
		test "$(count "$D/cpu.samples" endpoint=/alpha \
			tenant=acme)" = "$a"
	t_ok "[$v] /beta's samples no tenant" \
		test "$(count "$D/cpu.samples" endpoint=/beta tenant=)" = 0
	case $v in
	tlsctx_otel_*)
		t_ok "[$v] /alpha's samples carry its trace and span ids" \
			test "$(count "$D/cpu.samples" endpoint=/alpha \
				trace_id=$TRACE span_id=$SPAN)" = "$a"
		t_ok "[$v] /beta's samples no trace id" \
			test "$(count "$D/cpu.samples" endpoint=/beta \
				trace_id=)" = 0
		;;
	*)
		t_ok "[$v] the label with no key left out" \
			sh -c '! grep -q "=keyless" "$1"' - "$D/cpu.samples"
		;;
	esac
	t_ok "[$v] cpu.pb.gz counts the contexts it decoded" e2e_between \
		"$(comment "$D/cpu.raw" \
		  "records with a thread context (OTel, custom-labels)")" 1 1e12
	t_ok "[$v] cpu.pb.gz: no errors" no_errors "$D/cpu.raw"
	raw "$D/threadcreate.pb.gz" "$D/tc"
	t_ok "[$v] threadcreate.pb.gz: the two threads" \
		test "$(count "$D/tc.samples")" = 2
	t_ok "[$v] threadcreate.pb.gz: no errors" no_errors "$D/tc.raw"
done

# Off CPU: each thread waits for its turn (a futex) and then sleeps 1 s,
# under its labels; the library loaded with dlopen() (the DTV read in the
# switch).
D=$E2E_OUT/offcpu
t_ok "[offcpu] record --off-cpu exits 0" e2e_record "$D" --off-cpu -F 999 \
	-- "$E2E_BIN/tlsctx_otel_dlopen" --sleep 3
raw "$D/offcpu.pb.gz" "$D/off"
S=$D/off.samples
echo "# [offcpu] waits $(count "$S"): /alpha $(count "$S" endpoint=/alpha)," \
	"/beta $(count "$S" endpoint=/beta)"
for ep in /alpha /beta; do
	t_ok "[offcpu] $ep's waits: its sleep among them" \
		e2e_between "$(count "$S" endpoint=$ep wait=sleep)" 1 1e12
	t_ok "[offcpu] $ep's waits: for its turn among them" \
		e2e_between "$(count "$S" endpoint=$ep wait=futex)" 1 1e12
done
t_ok "[offcpu] /alpha's waits carry its trace id" test \
	"$(count "$S" endpoint=/alpha trace_id=$TRACE)" = \
	"$(count "$S" endpoint=/alpha)"
t_ok "[offcpu] offcpu.pb.gz: no errors" no_errors "$D/off.raw"

# plabel serve -p: a process it is told of at its start, whose contexts
# its reader registers before any profile is asked for
if command -v curl >/dev/null; then
	ip link set lo up 2>/dev/null
	D=$E2E_OUT/serve
	mkdir -p "$D"
	"$E2E_BIN/tlsctx_cl_lib" 30 >"$D/app.log" &
	APP=$!
	e2e_wait_for ready "$D/app.log" $APP
	"$PLABEL" serve --listen 127.0.0.1:0 -F 999 -p $APP 2>"$D/serve.log" &
	SRV=$!
	e2e_wait_for "listening on" "$D/serve.log" $SRV
	PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' \
		"$D/serve.log")
	# the reader registers the process within about a second
	sleep 2
	curl -s -o "$D/cpu.pb.gz" \
		"http://127.0.0.1:$PORT/debug/pprof/profile?seconds=3"
	raw "$D/cpu.pb.gz" "$D/cpu"
	a=$(count "$D/cpu.samples" endpoint=/alpha)
	b=$(count "$D/cpu.samples" endpoint=/beta)
	echo "# [serve] samples $(count "$D/cpu.samples"): /alpha $a, /beta $b"
	t_ok "[serve] /alpha and /beta sampled" test "$a" -gt 0 -a "$b" -gt 0
	t_ok "[serve] /alpha's share of the samples within 5 points of 75%" \
		e2e_between "$(pct "$a" "$((a + b))")" 70 80
	t_ok "[serve] no errors" no_errors "$D/cpu.raw"
	kill $SRV $APP
	wait $SRV $APP 2>/dev/null
else
	t_skip "[serve]" "curl not installed"
fi

t_done
