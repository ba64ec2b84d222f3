#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/vm.sh: the benchmarks that need the module, run inside the VM by
# bench/run.sh (scripts/plabel-vm --kernel 6.1 -- bench/vm.sh). Writes
# "key value" lines to $PLABEL_TEST_OUT/vm.txt and the raw outputs beside
# it. Prints figures only; a slow run is not a failure.
#
# PLABEL_BENCH_REPS (default 3): runs of every overhead and accuracy
# configuration, interleaved; PLABEL_BENCH_SPIN_MS (default 1500): the
# unprofiled workload's wall time; PLABEL_BENCH_PARTS (default "labels
# overhead accuracy serve offcpu heap memory"): which parts to run.

set -u
OUT=${PLABEL_TEST_OUT:-/tmp/bench-out}
mkdir -p "$OUT"
R=$OUT/vm.txt
: >"$R"
B=build/bench
PLABEL=${PLABEL:-/usr/local/bin/plabel}
DBG=/sys/kernel/debug/plabel
REPS=${PLABEL_BENCH_REPS:-3}
SPIN_MS=${PLABEL_BENCH_SPIN_MS:-1500}
THREADS=4
TMP=/tmp/bench
mkdir -p "$TMP"
export HOME=/root GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local

emit() { echo "$1 $2" >>"$R"; }
log() { echo "bench-vm: $*" >&2; }
dbg() { cat "$DBG/$1" 2>/dev/null || echo 0; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }'; }

PARTS=${PLABEL_BENCH_PARTS:-labels overhead accuracy serve offcpu heap memory}
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

emit vm.kernel "$(uname -r)"
emit vm.ncpus "$(nproc)"

# --- 1. label cost ------------------------------------------------------
want labels && log "label cost" &&
$B/label_cost --ms 100 --go bench/label_cost_go --base $B/label_cost_base \
	>"$OUT/label_cost.txt" 2>&1

# --- 2. sampling overhead ------------------------------------------------
log "calibrating the workload to ${SPIN_MS} ms"
# the workload switches label sets as a labelled server would: plabel
# records them, perf cannot
ITERS=$($B/spin --calibrate "$SPIN_MS" --threads $THREADS --labels)
emit overhead.iters "$ITERS"
emit overhead.threads "$THREADS"
SPIN="$B/spin --iters $ITERS --threads $THREADS --labels"
if want overhead; then
SPIN="$SPIN --where $TMP/where"

# run_one NAME CMD..: one timed run, without address space randomization
# for the profiler and the workload alike (under instruction counting the
# workload's time otherwise varies by up to 0.6 % with where its pages
# land). Appends to $TMP/NAME.wall the workload's wall ns, to NAME.cpu its
# own CPU ns, the CPU ns of the whole command (profiler and workload, from
# /usr/bin/time) and the profiler's CPU ns while the workload ran (spin's
# parent_cpu_ns), and for plabel the module's handler and sample counters;
# to NAME.where the CPU ns, while the workload ran, of its threads, of the
# profiler's and of every other task (kernel threads), and the CPUs' idle
# time (spin --where).
run_one() {
	local name=$1 c0 n0 s0 l0 w c t pc
	shift
	c0=$(dbg handler_calls); n0=$(dbg handler_ns_total)
	s0=$(dbg samples); l0=$(dbg lost)
	/usr/bin/time -f "%U %S" -o "$TMP/time" setarch -R "$@" \
		>"$TMP/run" 2>>"$TMP/$name.err"
	w=$(awk '$1 == "wall_ns" { print $2 }' "$TMP/run")
	c=$(awk '$1 == "cpu_ns" { print $2 }' "$TMP/run")
	pc=$(awk '$1 == "parent_cpu_ns" { print $2 }' "$TMP/run")
	t=$(awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { printf "%.0f", ($1 + $2) * 1e9 }' "$TMP/time")
	echo "${w:-nan}" >>"$TMP/$name.wall"
	echo "${c:-nan} ${t:-nan} ${pc:-nan}" >>"$TMP/$name.cpu"
	awk '$2 == "spin-thread" { t += $3; next }
		$1 == 0 && $2 == "idle" { i += $3; next }
		$2 ~ /^(plabel|perf)/ { p += $3; next }
		{ k += $3 }
		END { printf "%.0f %.0f %.0f %.0f\n", t, p, k, i }' "$TMP/where" \
		>>"$TMP/$name.where" 2>/dev/null
	rm -f "$TMP/where"
	case $name in
	perf_*)
		# the samples perf recorded, and lost (its event's own stats)
		perf report --stats -i "$TMP/perf.data" 2>/dev/null | awk '
			$1 == "SAMPLE" && $2 == "events:" && !s { s = $3 }
			/ stats:$/ { ev = 1 }
			ev && $1 == "LOST_SAMPLES" && $2 == "events:" { l = $3 }
			END { print s + 0, l + 0 }' >>"$TMP/$name.samples"
		;;
	plabel_*)
		echo "$(( $(dbg handler_calls) - c0 )) $(( $(dbg handler_ns_total) - n0 ))" \
			>>"$TMP/$name.handler"
		echo "$(( $(dbg samples) - s0 )) $(( $(dbg lost) - l0 ))" \
			>>"$TMP/$name.samples"
		;;
	esac
}

CONFIGS="none"
for hz in 99 999 4999; do
	CONFIGS="$CONFIGS plabel_fp_$hz plabel_dwarf_$hz perf_fp_$hz perf_dwarf_$hz"
done
have_perf=1
perf --version >/dev/null 2>&1 || have_perf=0
emit overhead.perf_version "$(perf --version 2>/dev/null | tr ' ' _ || echo none)"

for rep in $(seq "$REPS"); do
	for cfg in $CONFIGS; do
		log "overhead run $rep/$REPS: $cfg"
		hz=${cfg##*_}
		case $cfg in
		none) run_one none $SPIN ;;
		plabel_fp_*) run_one "$cfg" "$PLABEL" record -F "$hz" -g fp \
				-o "$TMP/p" -- $SPIN ;;
		plabel_dwarf_*) run_one "$cfg" "$PLABEL" record -F "$hz" \
				-g dwarf -o "$TMP/p" -- $SPIN ;;
		perf_fp_*) [ $have_perf = 1 ] && run_one "$cfg" perf record -q -B \
				-F "$hz" -g -o "$TMP/perf.data" -- $SPIN ;;
		perf_dwarf_*) [ $have_perf = 1 ] && run_one "$cfg" perf record -q -B \
				-F "$hz" --call-graph dwarf \
				-o "$TMP/perf.data" -- $SPIN ;;
		esac
		rm -f "$TMP/perf.data"
	done
done

base=$(median <"$TMP/none.wall")
basecpu=$(awk '{ print $1 }' "$TMP/none.cpu" | median)
for cfg in $CONFIGS; do
	[ -s "$TMP/$cfg.wall" ] || continue
	m=$(median <"$TMP/$cfg.wall")
	emit "overhead.$cfg.wall_ns" "$m"
	emit "overhead.$cfg.runs" "$(paste -sd, "$TMP/$cfg.wall")"
	# the workload's own CPU time against the unprofiled runs' (what
	# interrupts and the handler add to it), and the profiler process's
	# CPU time as a share of the workload's
	wc=$(awk '{ print $1 }' "$TMP/$cfg.cpu" | median)
	emit "overhead.$cfg.workload_cpu_ns" "$wc"
	emit "overhead.$cfg.profiler_cpu_pct" "$(awk '
		$1 > 0 && $2 >= $1 { print 100 * ($2 - $1) / $1 }' \
		"$TMP/$cfg.cpu" | median)"
	# the part of it spent while the workload ran, which the workload's
	# wall time feels
	emit "overhead.$cfg.profiler_run_cpu_pct" "$(awk '
		$1 > 0 && $3 ~ /^[0-9]+$/ { print 100 * $3 / $1 }' \
		"$TMP/$cfg.cpu" | median)"
	# where the run's CPU went while the workload ran, ns
	for f in 1:threads 2:profiler 3:others 4:idle; do
		emit "overhead.$cfg.where_${f#*:}_ns" \
			"$(awk -v c="${f%%:*}" '{ print $c }' "$TMP/$cfg.where" | median)"
	done
	emit "overhead.$cfg.where_all_ns" \
		"$(awk '{ print $1 + $2 + $3 }' "$TMP/$cfg.where" | median)"
	[ "$cfg" = none ] && continue
	emit "overhead.$cfg.workload_cpu_ratio" \
		"$(awk -v m="$wc" -v b="$basecpu" 'BEGIN { printf "%.4f", m / b }')"
	emit "overhead.$cfg.slowdown" \
		"$(awk -v m="$m" -v b="$base" 'BEGIN { printf "%.4f", m / b }')"
	if [ -s "$TMP/$cfg.handler" ]; then
		emit "overhead.$cfg.handler_ns_per_call" "$(awk '
			{ c += $1; n += $2 }
			END { printf "%.0f", c ? n / c : 0 }' "$TMP/$cfg.handler")"
	fi
	[ -s "$TMP/$cfg.samples" ] || continue
	n=$(awk '{ print $1 }' "$TMP/$cfg.samples" | median)
	emit "overhead.$cfg.samples_per_run" "$n"
	emit "overhead.$cfg.lost_per_run" \
		"$(awk '{ print $2 }' "$TMP/$cfg.samples" | median)"
	# what a recorded sample cost the workload, for profilers that
	# record different numbers of samples (losing others) at one rate
	emit "overhead.$cfg.wall_us_per_sample" "$(awk -v m="$m" -v b="$base" \
		-v n="$n" 'BEGIN { if (n > 0) printf "%.1f", (m - b) / n / 1000 }')"
done
cat "$TMP"/*.err >"$OUT/overhead.err" 2>/dev/null
fi

# --- 3. accuracy ---------------------------------------------------------
# share_errors RUN_OUTPUT PROFILE NAME: each label's share in PROFILE and
# in the cpu_ns lines of RUN_OUTPUT ("key value" lines on stdout), then the
# worst error in percentage points.
share_errors() {
	local run=$1 prof=$2 name=$3
	go tool pprof -tags "$prof" 2>/dev/null >"$OUT/$name.tags"
	awk -v name="$name" '
		FNR == NR && ($1 == "thread" || $1 == "label") { k[$2] = $4; kt += $4; next }
		FNR == NR { next }
		$1 == "share:" { on = 1; next }
		on && $2 == "Total" { on = 0 }
		on && $NF ~ /^t[0-9]+$/ {
			p = $0; sub(/.*\(/, "", p); sub(/%\).*/, "", p)
			s[$NF] = p; st += p
		}
		END {
			worst = kt ? 0 : 100
			for (t in k) {
				kp = 100 * k[t] / kt
				pp = st ? 100 * s[t] / st : 0
				e = pp - kp; if (e < 0) e = -e
				if (e > worst) worst = e
				printf "accuracy.%s.%s.kernel_pct %.2f\n", \
					name, t, kp
				printf "accuracy.%s.%s.profile_pct %.2f\n", \
					name, t, pp
			}
			printf "worst %.2f\n", worst
		}' "$run" "$OUT/$name.tags"
}

# acc NAME CMD..: REPS runs of CMD (which writes $TMP/$NAME.pb.gz); the
# first run's shares and every run's worst error are kept, the median
# worst error is the figure.
acc() {
	local name=$1 rep
	shift
	for rep in $(seq "$REPS"); do
		log "accuracy run $rep/$REPS: $name"
		"$@" >"$OUT/$name.run" 2>"$OUT/$name.err"
		share_errors "$OUT/$name.run" "$TMP/$name.pb.gz" "$name" \
			>"$TMP/$name.acc"
		[ "$rep" = 1 ] && grep -v '^worst ' "$TMP/$name.acc" >>"$R"
		awk '$1 == "worst" { print $2 }' "$TMP/$name.acc" \
			>>"$TMP/$name.worst"
		[ -s "$OUT/$name.run" ] && cp "$OUT/$name.run" "$OUT/$name.run.$rep"
	done
	emit "accuracy.$name.worst_error_points" "$(median <"$TMP/$name.worst")"
	emit "accuracy.$name.worst_error_runs" "$(paste -sd, "$TMP/$name.worst")"
}

# plabel_shares N UNIT_MS HZ NAME [ARGS..]: record bench/shares with plabel
plabel_shares() {
	local n=$1 unit=$2 hz=$3 name=$4
	shift 4
	"$PLABEL" record -F "$hz" -o "$TMP/$name" -- $B/shares --threads "$n" \
		--unit-ms "$unit" "$@" && cp "$TMP/$name/cpu.pb.gz" "$TMP/$name.pb.gz"
}

if want accuracy; then
	acc plabel_4t_99hz plabel_shares 4 400 99 plabel_4t_99hz
	acc plabel_4t_999hz plabel_shares 4 400 999 plabel_4t_999hz
	acc go_4t_100hz $B/shares_go -o "$TMP/go_4t_100hz.pb.gz" \
		-threads 4 -unit-ms 400
	acc plabel_8t_999hz plabel_shares 8 100 999 plabel_8t_999hz
	acc go_8t_100hz $B/shares_go -o "$TMP/go_8t_100hz.pb.gz" \
		-threads 8 -unit-ms 100
	# every thread switching labels for each request (50 to 600 us, random)
	acc plabel_4t_switch_99hz plabel_shares 4 400 99 \
		plabel_4t_switch_99hz --switch-us 100
	acc plabel_4t_switch_999hz plabel_shares 4 400 999 \
		plabel_4t_switch_999hz --switch-us 100
	acc go_4t_switch_100hz $B/shares_go -o "$TMP/go_4t_switch_100hz.pb.gz" \
		-threads 4 -unit-ms 400 -switch-us 100
	# the same requests in a fixed 1 ms round: t0, t1, t2, t3 in turn
	acc plabel_4t_cycle_99hz plabel_shares 4 400 99 \
		plabel_4t_cycle_99hz --switch-us 100 --cycle 1
	acc plabel_4t_cycle_999hz plabel_shares 4 400 999 \
		plabel_4t_cycle_999hz --switch-us 100 --cycle 1
	acc go_4t_cycle_100hz $B/shares_go -o "$TMP/go_4t_cycle_100hz.pb.gz" \
		-threads 4 -unit-ms 400 -switch-us 100 -cycle
fi

# --- 3b. plabel serve's own CPU --------------------------------------------
# At 99 Hz on every CPU, with one thread of spin busy throughout: plabel
# record -a's CPU over 30 s (the anchor), then serve's over 30 s with no
# request, then over three scrapes of profile?seconds=10, one after the
# other (a scrape every 10 s, as Parca's and Alloy's default intervals).
# CPU from /proc/PID/stat (utime + stime), as a percentage of one CPU.
if want serve; then
log "serve's CPU"
proc_cpu_ns() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.0f\n", ($12 + $13) * 1e9 / hz }' \
		"/proc/$1/stat"
}
now_ns() { date +%s%N; }
SERVE_S=30
"$B/spin" --iters $((ITERS * 130000 / SPIN_MS)) --threads 1 \
	>/dev/null 2>&1 &
spin_pid=$!
/usr/bin/time -f "%U %S" -o "$TMP/serve_rec.time" "$PLABEL" record -a -F 99 \
	-o "$TMP/serve_rec" --duration $SERVE_S >/dev/null 2>&1
emit serve.record_cpu_pct "$(awk -v s=$SERVE_S '{ print 100 * ($1 + $2) / s }' \
	"$TMP/serve_rec.time")"
"$PLABEL" serve -a -F 99 --listen 127.0.0.1:0 2>"$TMP/serve.log" &
srv=$!
i=0
while ! grep -q "listening on" "$TMP/serve.log" && [ $i -lt 600 ]; do
	sleep 0.1
	i=$((i + 1))
done
port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$TMP/serve.log")
c0=$(proc_cpu_ns $srv)
t0=$(now_ns)
sleep $SERVE_S
c1=$(proc_cpu_ns $srv)
t1=$(now_ns)
emit serve.idle_cpu_pct "$(awk -v c=$((c1 - c0)) -v t=$((t1 - t0)) \
	'BEGIN { printf "%.3f", 100 * c / t }')"
: >"$TMP/serve_scrape.ms"
ok=0
for i in 1 2 3; do
	s0=$(now_ns)
	code=$(curl -s -o "$TMP/serve_$i.pb.gz" -w '%{http_code}' \
		"http://127.0.0.1:$port/debug/pprof/profile?seconds=10")
	s1=$(now_ns)
	[ "$code" = 200 ] && ok=$((ok + 1))
	echo $(( (s1 - s0) / 1000000 )) >>"$TMP/serve_scrape.ms"
done
c2=$(proc_cpu_ns $srv)
t2=$(now_ns)
kill -TERM $srv
wait $srv
kill $spin_pid 2>/dev/null
wait $spin_pid 2>/dev/null
emit serve.scrape_cpu_pct "$(awk -v c=$((c2 - c1)) -v t=$((t2 - t1)) \
	'BEGIN { printf "%.3f", 100 * c / t }')"
emit serve.scrapes_ok "$ok"
emit serve.scrape_ms "$(median <"$TMP/serve_scrape.ms")"
emit serve.scrape_ms_runs "$(paste -sd, "$TMP/serve_scrape.ms")"
fi

# --- 4a. the off-CPU hook's cost --------------------------------------------
# bench/offcpu.sh: context switches per second of bench/pingpong with no
# session, under plabel record, under plabel record --off-cpu and under
# perf's sched_switch recording, and the switch probe's own ns per call.
if want offcpu; then
log "off-CPU hook"
PLABEL="$PLABEL" bench/offcpu.sh >"$OUT/offcpu.txt" 2>&1
for k in none cpu offcpu perf; do
	emit "offcpu.${k}_switches_per_s" "$(awk -v k=$k '$1 == k { print $2 }' \
		"$OUT/offcpu.txt")"
done
emit offcpu.probe_ns "$(sed -n 's/^switch probe: .* calls, \([0-9]*\) ns each$/\1/p' \
	"$OUT/offcpu.txt")"
fi

# --- 4b. heap sampling's cost per malloc/free pair ------------------------
# bench/heap (4 threads, small blocks): glibc alone, with libplabel-heap.so
# and no heap session (sampling off), under plabel record --heap (on, every
# 512 KiB), and tcmalloc (Debian's libgoogle-perftools) with its own heap
# sampling off and at the same 512 KiB, all in this one run: under TCG the
# ns are emulated, the ratios between them are the figures.
if want heap; then
log "heap sampling"
HEAP_LIB=${PLABEL_HEAP_LIB:-$PWD/build/lib/plabel/libplabel-heap.so}
TCM=$(ls /usr/lib/x86_64-linux-gnu/libtcmalloc.so.4 2>/dev/null)
HEAP="$B/heap --threads 4 --pairs 500000 --reps 3"
heap_ns() { awk '$1 == "ns_per_pair" { print $2 }'; }
emit heap.glibc_ns "$($HEAP | heap_ns)"
emit heap.shim_off_ns "$(LD_PRELOAD=$HEAP_LIB $HEAP | heap_ns)"
emit heap.shim_on_ns "$(PLABEL_HEAP_LIB=$HEAP_LIB "$PLABEL" record --heap \
	-F 99 -o "$TMP/heap" -- $HEAP 2>"$TMP/heap.err" | heap_ns)"
if [ -n "$TCM" ]; then
	emit heap.tcmalloc_ns "$(LD_PRELOAD=$TCM TCMALLOC_SAMPLE_PARAMETER=0 \
		$HEAP | heap_ns)"
	emit heap.tcmalloc_sampled_ns "$(LD_PRELOAD=$TCM \
		TCMALLOC_SAMPLE_PARAMETER=524288 $HEAP | heap_ns)"
fi
fi

# --- 5. memory -----------------------------------------------------------
want memory || { log "done"; exit 0; }
log "memory"
echo 65536 >/proc/sys/kernel/plabel/max_sets_per_user 2>/dev/null
# Slab moves by some hundred KiB of its own meanwhile: 4000 of each, three
# times, and the median (with 1000 tasks single runs read 0 to 118 bytes)
for i in 1 2 3; do
	$B/kmem sets 4000
	$B/kmem tasks 4000
done >"$TMP/kmem"
for k in slab_bytes_per_set slab_bytes_per_labeled_task; do
	emit "memory.$k" "$(awk -v k=$k '$1 == k { print $2 }' "$TMP/kmem" |
		median)"
	emit "memory.${k}_runs" "$(awk -v k=$k '$1 == k { print $2 }' \
		"$TMP/kmem" | paste -sd,)"
done
# A ring's memory, with 16 MiB rings so that MemFree's own drift (some
# hundred KiB) is small beside it: the rings come from kmalloc or vmalloc
# (kvzalloc_node), so neither Slab nor VmallocUsed shows them all
RING_KB=16384
emit memory.ring_kb "$RING_KB"
for i in 1 2 3; do
	$B/kmem ring $RING_KB
done >"$TMP/kmem_ring"
emit memory.bytes_per_ring "$(awk '$1 == "bytes_per_ring" { print $2 }' \
	"$TMP/kmem_ring" | median)"
emit memory.bytes_per_ring_runs "$(awk '$1 == "bytes_per_ring" { print $2 }' \
	"$TMP/kmem_ring" | paste -sd,)"
# A session start with 50000 sets alive against one with none: a start no
# longer walks the sets, so the ratio stays near 1
refs=$(cat /proc/sys/kernel/plabel/max_refs_per_file)
echo 65536 >/proc/sys/kernel/plabel/max_refs_per_file
$B/kmem start 50000 >"$TMP/kmem_start"
echo "$refs" >/proc/sys/kernel/plabel/max_refs_per_file
for k in session_start_us_sets session_start_us_nosets session_start_ratio; do
	emit "memory.$k" "$(awk -v k=$k '$1 == k { print $2 }' "$TMP/kmem_start")"
done
/usr/bin/time -f "%M" -o "$TMP/rss" "$PLABEL" record -F 999 -g dwarf \
	-o "$TMP/rss_out" -- $SPIN >/dev/null 2>&1
emit memory.record_dwarf_999hz_maxrss_kb "$(tail -n 1 "$TMP/rss")"
/usr/bin/time -f "%M" -o "$TMP/rss" "$PLABEL" record -F 999 -g fp \
	-o "$TMP/rss_out" -- $SPIN >/dev/null 2>&1
emit memory.record_fp_999hz_maxrss_kb "$(tail -n 1 "$TMP/rss")"
log "done"
exit 0
