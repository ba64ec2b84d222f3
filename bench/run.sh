#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/run.sh: `make bench`. Runs the host benchmarks (label cost, reader
# throughput), then bench/vm.sh in a VM (label cost, sampling overhead
# beside perf, accuracy beside Go, kernel memory), prints a table and
# writes build/bench/results.json, copied to bench/results.json.
# Figures only: nothing here fails on speed.
#
# BENCH_KERNEL (default 6.1), BENCH_REPS (default 3), BENCH_SPIN_MS
# (default 1500: the unprofiled workload's wall time in the VM).

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
$B/label_cost --ms 100 --go bench/label_cost_go >"$O/label_cost_host.txt" 2>&1

# label_keys FILE WHERE: "labels.WHERE.<op>.ns|allocs" and ratio lines
label_keys() {
	awk -v w="$2" '
		function key(s) {
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
for mode in fp dwarf; do
	log "reader throughput ($mode)"
	mkdir -p "$O/reader_$mode"
	n=1000000
	[ $mode = dwarf ] && n=50000
	$B/reader --mode $mode --samples $n --out "$O/reader_$mode" \
		>"$O/reader_$mode.txt" 2>&1
	awk -v m=$mode 'NF == 2 { print "reader." m "." $1, $2 }' \
		"$O/reader_$mode.txt" >>"$R"
	rm -f "$O/reader_$mode/stream.bin"
done

# --- 2, 3, 5 and label cost again, in the VM --------------------------------
if ! command -v perf >/dev/null 2>&1; then
	log "installing linux-perf for the comparison"
	apt-get install -y linux-perf >/dev/null 2>&1 ||
		log "no perf: the perf columns stay empty"
fi
log "VM (kernel ${BENCH_KERNEL:-6.1}): overhead, accuracy, memory; takes minutes"
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
emit machine.loadavg_after "$(cut -d' ' -f1 /proc/loadavg)"

# --- results ------------------------------------------------------------------
jq -R -n '[inputs | select(length > 0) | capture("^(?<k>[^ ]+) (?<v>.*)$")]
	| reduce .[] as $l ({}; setpath($l.k | split(".");
		($l.v | tonumber? // $l.v)))' <"$R" >"$B/results.json"
cp "$B/results.json" bench/results.json
bench/table.sh "$R"
log "wrote $B/results.json and bench/results.json"
exit 0
