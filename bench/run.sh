#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/run.sh: `make bench`. Runs the host benchmarks (label cost, reader
# throughput, aggregation on long recordings), then bench/vm.sh in a VM
# (label cost, sampling overhead beside perf, accuracy beside Go, serve's
# own CPU, kernel memory) and twice more for the overhead in VMs that count instructions
# (1 and 2 vCPUs), prints a table and writes build/bench/results.json,
# copied to bench/results.json.
# Figures only: nothing here fails on speed.
#
# BENCH_KERNEL (default 6.1), BENCH_REPS (default 3), BENCH_SPIN_MS
# (default 1500: the unprofiled workload's wall time in the VM),
# BENCH_ICOUNT (default 1; 0 skips the instruction-counting overhead runs),
# BENCH_ICOUNT_REPS (default 5), BENCH_INGEST_REPS (default 5: the runs of
# each collector in 4d), INGEST_ANCHOR (default f983dca: 4d's anchor, see
# bench/anchor.sh).

set -u
cd "$(dirname "$0")/.."
B=build/bench
O=$B/out
rm -rf "$O"
mkdir -p "$O"
R=$O/host.txt
: >"$R"
emit() { echo "$1 $2" >>"$R"; }
log() { echo "bench: $*" >&2; }

# --- the machine -----------------------------------------------------------
emit machine.date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
emit machine.commit "$(git rev-parse --short HEAD 2>/dev/null || echo none)"
emit machine.host_kernel "$(uname -r)"
emit machine.host_cpus "$(nproc)"
emit machine.cpu_model "$(awk -F': ' '/^model name/ { gsub(/ +/, "_", $2); print $2; exit }' /proc/cpuinfo)"
emit machine.loadavg_before "$(cut -d' ' -f1 /proc/loadavg)"

# --- 1. label cost on the host --------------------------------------------
log "label cost (host)"
$B/label_cost --ms 100 --go bench/label_cost_go --base $B/label_cost_base \
	>"$O/label_cost_host.txt" 2>&1

# label_keys FILE WHERE: "labels.WHERE.<op>.ns|allocs" and ratio lines
label_keys() {
	awk -v w="$2" '
		function key(s) {
			if (s ~ /^plabel_switch \/ base/) return "ratio_switch_vs_base"
			if (s ~ /^plabel_switch - base/) return "switch_minus_base_ns"
			if (s ~ /^base: plabel_switch/) return "plabel_switch_base"
			if (s ~ /^plabel_switch, span/) return "plabel_switch_span"
			if (s ~ /^plabel_switch \//) return "ratio_switch_vs_go"
			if (s ~ /^plabel_do \//) return "ratio_do_vs_go"
			if (s ~ /^plabel_switch/) return "plabel_switch"
			if (s ~ /^plabel_set/) return "plabel_set_cached"
			if (s ~ /^plabel_do/) return "plabel_do_cached"
			if (s ~ /^plabel_labels_new/) return "plabel_new_set"
			if (s ~ /SetGoroutineLabels/) return "go_setgoroutinelabels"
			if (s ~ /pprof.Do/) return "go_pprof_do"
			return ""
		}
		/^  / && $NF ~ /^[0-9.]+$/ {
			if ($(NF-1) ~ /^[0-9.]+$/) {
				name = $0; sub(/^ +/, "", name)
				k = key(name)
				if (k == "") next
				printf "labels.%s.%s.ns %s\n", w, k, $(NF-1)
				printf "labels.%s.%s.allocs %s\n", w, k, $NF
			} else {
				name = $0; sub(/^ +/, "", name)
				k = key(name)
				if (k != "") printf "labels.%s.%s %s\n", w, k, $NF
			}
		}
		/ mode$/ { m = $0; gsub(/[^A-Za-z]+/, "_", m)
				      printf "labels.%s.mode %s\n", w, m }' "$1"
}
label_keys "$O/label_cost_host.txt" host >>"$R"

# --- 4. reader throughput on the host ---------------------------------------
# fp, dwarf: the pipeline's speed; long, long_merged: 8 M fp samples (12.5 s
# at 10 kHz on 64 CPUs) held one by one, and merged as they settle with
# plabel record's 2 s margin: the memory a long recording takes.
for run in fp dwarf long long_merged; do
	log "reader throughput ($run)"
	mkdir -p "$O/reader_$run"
	case $run in
	fp) args="--mode fp --samples 1000000" ;;
	dwarf) args="--mode dwarf --samples 50000" ;;
	long) args="--mode fp --samples 8000000" ;;
	long_merged) args="--mode fp --samples 8000000 --settle-lag-ms 2000" ;;
	esac
	$B/reader $args --out "$O/reader_$run" >"$O/reader_$run.txt" 2>&1
	awk -v m=$run 'NF == 2 { print "reader." m "." $1, $2 }' \
		"$O/reader_$run.txt" >>"$R"
	rm -f "$O/reader_$run/stream.bin"
done

# --- 4b. aggregation on arrival: memory after 1 M and 100 M samples ---------
# The same 10000 stacks, fed as plabel record feeds them (2 s margin), each
# count in a process of its own: at 10 kHz and at 99 Hz on 64 CPUs, all
# busy (what stays held is what the CPUs' watermark has not passed), and
# at 10 kHz with a 65th CPU idle, which sends only the SYNC records the
# kernel writes for an empty ring (without them it would hold the
# watermark back, and what stays held would be record's last 2 s, 1.28 M
# samples: aggregate --no-sync).
for run in 10khz 99hz 10khz_idle; do
	log "aggregation ($run)"
	case $run in
	10khz) args="--hz 10000" ;;
	99hz) args="--hz 99" ;;
	10khz_idle) args="--hz 10000 --idle-cpus 1" ;;
	esac
	$B/aggregate --samples 1000000,100000000 $args >"$O/aggregate_$run.txt" 2>&1
	awk -v m=$run 'NF == 2 { print "aggregate." m "." $1, $2 }' \
		"$O/aggregate_$run.txt" >>"$R"
done

# --- 4d. ingest against the same-run anchor ----------------------------------
# bench/ingest, built against today's collector and against the one the
# reader had when the ingest goal was set (bench/anchor.sh, from the
# history), feeds both the same stream file, as record does (2 s margin),
# one build after the other, BENCH_INGEST_REPS times; the best of
# each counts. Two streams of 4 M samples (6.25 s at 10 kHz on 64 CPUs,
# so that the anchor merges what its 2 s margin passes, as record did):
# aggregate's (the goal's 10000 stacks, each in one thread with one label
# set) and reader's (225 stacks drawn, each run by 16 threads under 8
# label sets: with the threads as labels, 16 x 8 merged samples a stack).
# Each is some 700 MB, on disk and in ingest's memory, one at a time.
log "ingest against the anchor"
bench/anchor.sh $B/ingest_anchor
arc=$?
[ $arc = 3 ] && log "no history: the ingest comparison is left out"
[ $arc = 0 ] || [ $arc = 3 ] || log "the anchor did not build: the ingest comparison is left out"
if [ $arc = 0 ]; then
	emit ingest.reps "${BENCH_INGEST_REPS:-5}"
	for st in aggregate reader; do
		f=$O/ingest_$st.bin
		case $st in
		aggregate) $B/aggregate --samples 4000000 --write "$f" >/dev/null ;;
		reader) mkdir -p "$O/ingest_reader" &&
			$B/reader --mode fp --samples 4000000 \
				--out "$O/ingest_reader" >/dev/null &&
			mv "$O/ingest_reader/stream.bin" "$f" ;;
		esac
		for i in $(seq "${BENCH_INGEST_REPS:-5}"); do
			for b in anchor today; do
				exe=$B/ingest_anchor
				[ $b = today ] && exe=$B/ingest
				$exe "$f" --reps 1 |
					awk -v k="ingest.$st.$b" \
						'$1 == "ingest_samples_per_cpu_sec" { print k, $2 }'
			done
		done >"$O/ingest_$st.txt"
		rm -f "$f"
		awk -v st=$st '
			{ if ($2 > best[$1]) best[$1] = $2 }
			END {
				a = best["ingest." st ".anchor"]; t = best["ingest." st ".today"]
				print "ingest." st ".anchor", a
				print "ingest." st ".today", t
				if (a > 0) printf "ingest.%s.today_vs_anchor %.2f\n", st, t / a
			}' "$O/ingest_$st.txt" >>"$R"
	done
fi

# --- 4c. heap sampling off: ns per malloc/free pair on the host -------------
# bench/heap (4 threads, small blocks) with glibc alone, with
# libplabel-heap.so preloaded and no module (sampling off: the goal is at
# most 2 ns more a pair), and tcmalloc with its heap sampling off and at
# 512 KiB. Sampling on needs the module: the VM's part heap.
log "heap sampling off (host)"
HEAP="$B/heap --threads 4 --pairs 2000000 --reps 5"
TCM=$(ls /usr/lib/x86_64-linux-gnu/libtcmalloc.so.4 2>/dev/null)
heap_ns() { awk '$1 == "ns_per_pair" { print $2 }'; }
emit heap_host.glibc_ns "$($HEAP | heap_ns)"
emit heap_host.shim_off_ns "$(LD_PRELOAD=$PWD/build/lib/plabel/libplabel-heap.so \
	$HEAP | heap_ns)"
if [ -n "$TCM" ]; then
	emit heap_host.tcmalloc_ns "$(LD_PRELOAD=$TCM TCMALLOC_SAMPLE_PARAMETER=0 \
		$HEAP | heap_ns)"
	emit heap_host.tcmalloc_sampled_ns "$(LD_PRELOAD=$TCM \
		TCMALLOC_SAMPLE_PARAMETER=524288 $HEAP | heap_ns)"
fi

# --- 2, 3, 5 and label cost again, in the VM --------------------------------
if ! command -v perf >/dev/null 2>&1; then
	log "installing linux-perf for the comparison"
	apt-get install -y linux-perf >/dev/null 2>&1 ||
		log "no perf: the perf columns stay empty"
fi
log "VM (kernel ${BENCH_KERNEL:-6.1}): overhead, accuracy, serve, heap, memory; takes minutes"
rm -rf "$B/vm"
PLABEL_BENCH_REPS=${BENCH_REPS:-3} PLABEL_BENCH_SPIN_MS=${BENCH_SPIN_MS:-1500} \
PLABEL_VM_QUIET=1 scripts/plabel-vm --kernel "${BENCH_KERNEL:-6.1}" \
	--out "$B/vm" --timeout 1500 -- bench/vm.sh
vmrc=$?
[ $vmrc = 0 ] || log "the VM run ended with status $vmrc; its figures may be missing"
if [ -s "$B/vm/vm.txt" ]; then
	cat "$B/vm/vm.txt" >>"$R"
	[ -s "$B/vm/label_cost.txt" ] && label_keys "$B/vm/label_cost.txt" vm >>"$R"
fi

# --- 2b, 2c. overhead again under instruction counting -----------------------
# Guest time is then instructions executed: runs repeat to within a few
# tenths of a percent whatever the host does, where the runs above vary by
# up to 20 %. 2b: one vCPU, Debian 12's qemu; 2c: the 2 vCPUs of the goal,
# with the qemu 10 of scripts/fetch-qemu (qemu 7.2 does not bring up a
# second vCPU in this mode).
# The 1-vCPU run also measures the off-CPU hook and heap sampling (4a, 4c),
# whose TCG figures above move by a factor of ten with the host's load.
# icount_run SMP PREFIX [QEMU] [PARTS]
icount_run() {
	log "VM with instruction counting ($1 vCPU): ${4:-overhead}; takes minutes"
	rm -rf "$B/vm-$2"
	PLABEL_BENCH_REPS=${BENCH_ICOUNT_REPS:-5} PLABEL_BENCH_PARTS=${4:-overhead} \
	PLABEL_BENCH_SPIN_MS=${BENCH_SPIN_MS:-1500} PLABEL_VM_ACCEL=icount \
	PLABEL_VM_QEMU=${3:-qemu-system-x86_64} \
	PLABEL_VM_SMP=$1 PLABEL_VM_QUIET=1 scripts/plabel-vm \
		--kernel "${BENCH_KERNEL:-6.1}" --out "$B/vm-$2" \
		--timeout 2400 -- bench/vm.sh ||
		log "the instruction-counting VM run ($1 vCPU) failed; its figures may be missing"
	[ -s "$B/vm-$2/vm.txt" ] && sed "s/^/$2./" "$B/vm-$2/vm.txt" >>"$R"
	emit "$2.qemu" "$("${3:-qemu-system-x86_64}" --version | awk 'NR == 1 { print $4 }')"
}
if [ "${BENCH_ICOUNT:-1}" = 1 ]; then
	icount_run 1 icount qemu-system-x86_64 "overhead offcpu heap"
	if q=$(scripts/fetch-qemu build/qemu); then
		icount_run 2 icount2 "$q"
	else
		log "no qemu 10: the 2-vCPU instruction-counting run is left out"
	fi
fi
emit machine.loadavg_after "$(cut -d' ' -f1 /proc/loadavg)"

# --- results ------------------------------------------------------------------
jq -R -n '[inputs | select(length > 0) | capture("^(?<k>[^ ]+) (?<v>.*)$")]
	| reduce .[] as $l ({}; setpath($l.k | split(".");
		($l.v | tonumber? // $l.v)))' <"$R" >"$B/results.json"
cp "$B/results.json" bench/results.json
bench/table.sh "$R"
log "wrote $B/results.json and bench/results.json"
exit 0
