#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/table.sh FILE: the table `make bench` prints, from the "key value"
# lines bench/run.sh collected.

set -u
awk '
{ v[$1] = $2 }
function g(k) { return (k in v) ? v[k] : "-" }
function pc(k) { return (k in v && v[k] != "") ? sprintf("%.1f", v[k]) : "-" }
function pc2(k) { return (k in v && v[k] != "") ? sprintf("%.2f", v[k]) : "-" }
function r(a, b) { return (a in v && b in v && v[b] + 0 != 0) ? \
	sprintf("%.3f", v[a] / v[b]) : "-" }
function d(a, b) { return (a in v && b in v && v[a] != "" && v[b] != "") ? \
	sprintf("%.2f", v[a] - v[b]) : "-" }
# the ratio of the time two slowdowns add, (a - 1) / (b - 1)
function rs(a, b) { return (a in v && b in v && v[b] - 1 > 0) ? \
	sprintf("%.3f", (v[a] - 1) / (v[b] - 1)) : "-" }
# the ratio of two differences, a - b over c - d
function rd(a, b, c, e) { return (a in v && b in v && c in v && e in v && \
	v[c] - v[e] != 0) ? sprintf("%.3f", (v[a] - v[b]) / (v[c] - v[e])) : "-" }
# a - b, ns, in ms
function dms(a, b) { return (a in v && b in v && v[a] != "" && v[b] != "") ? \
	sprintf("%.2f", (v[a] - v[b]) / 1e6) : "-" }
# where CPU time went while the workload ran, over the unprofiled runs
function where(o,    m, h, p, q, n, modes, rates) {
	print "   CPU time added while the workload ran (spin --where), ms over the unprofiled"
	print "   runs: in all, in the workload'"'"'s threads (interrupts, handler), the profiler'"'"'s"
	print "   own, other tasks'"'"' (kernel threads); and the CPUs'"'"' idle time added"
	print "                     plabel                                perf                       plabel/"
	print "   mode   Hz      all  threads  profiler  others  idle      all  threads  profiler  others  idle   perf"
	split("fp dwarf", modes, " ")
	split("99 999 4999", rates, " ")
	n = o ".none.where_"
	for (m = 1; m <= 2; m++)
		for (h = 1; h <= 3; h++) {
			p = o ".plabel_" modes[m] "_" rates[h] ".where_"
			q = o ".perf_" modes[m] "_" rates[h] ".where_"
			printf "   %-5s %5s  %7s %8s %9s %7s %5s  %7s %8s %9s %7s %5s  %5s\n", \
				modes[m], rates[h], dms(p "all_ns", n "all_ns"), \
				dms(p "threads_ns", n "threads_ns"), \
				dms(p "profiler_ns", n "profiler_ns"), \
				dms(p "others_ns", n "others_ns"), \
				dms(p "idle_ns", n "idle_ns"), \
				dms(q "all_ns", n "all_ns"), \
				dms(q "threads_ns", n "threads_ns"), \
				dms(q "profiler_ns", n "profiler_ns"), \
				dms(q "others_ns", n "others_ns"), \
				dms(q "idle_ns", n "idle_ns"), \
				rd(p "all_ns", n "all_ns", q "all_ns", n "all_ns")
		}
	print ""
}
function overhead(o,    m, h, p, q, modes, rates) {
	print "   wall: workload wall time / unprofiled; cpu: workload CPU time / unprofiled;"
	print "   prof%: the profiler process'"'"'s own CPU time, % of the workload'"'"'s; run%: the"
	print "   part of it while the workload ran; samples, lost: per run; us/sample: wall"
	print "   time added per recorded sample (the way to compare when the two record"
	print "   different numbers, losing the others); plabel/perf: the wall time each"
	print "   added, plabel'"'"'s over perf'"'"'s"
	print "                     plabel                          perf               plabel/   plabel handler  plabel         perf           us/sample"
	print "   mode   Hz     wall    cpu   prof%   run%      wall    cpu   prof%   run%  perf wall    ns/sample  samples  lost  samples  lost   plabel   perf"
	split("fp dwarf", modes, " ")
	split("99 999 4999", rates, " ")
	for (m = 1; m <= 2; m++)
		for (h = 1; h <= 3; h++) {
			p = o ".plabel_" modes[m] "_" rates[h]
			q = o ".perf_" modes[m] "_" rates[h]
			printf "   %-5s %5s  %6s %6s %6s %6s    %6s %6s %6s %6s  %6s  %11s  %7s %5s  %7s %5s  %7s %6s\n", \
				modes[m], rates[h], g(p ".slowdown"), \
				g(p ".workload_cpu_ratio"), pc(p ".profiler_cpu_pct"), \
				pc2(p ".profiler_run_cpu_pct"), \
				g(q ".slowdown"), g(q ".workload_cpu_ratio"), \
				pc(q ".profiler_cpu_pct"), pc2(q ".profiler_run_cpu_pct"), \
				rs(p ".slowdown", q ".slowdown"), \
				g(p ".handler_ns_per_call"), g(p ".samples_per_run"), \
				g(p ".lost_per_run"), g(q ".samples_per_run"), \
				g(q ".lost_per_run"), g(p ".wall_us_per_sample"), \
				g(q ".wall_us_per_sample")
		}
	print ""
}
END {
	printf "machine: %s cpus %s, kernel %s, load %s -> %s; VM: %s vCPUs, kernel %s\n\n", \
		g("machine.cpu_model"), g("machine.host_cpus"), \
		g("machine.host_kernel"), g("machine.loadavg_before"), \
		g("machine.loadavg_after"), g("vm.ncpus"), g("vm.kernel")

	print "1. label cost, ns/op (allocs/op)            host            vm"
	n = split("plabel_switch plabel_switch_base plabel_switch_span plabel_set_cached plabel_do_cached plabel_new_set go_setgoroutinelabels go_pprof_do", ops, " ")
	for (i = 1; i <= n; i++)
		printf "   %-36s %8s (%s) %8s (%s)\n", ops[i], \
			g("labels.host." ops[i] ".ns"), g("labels.host." ops[i] ".allocs"), \
			g("labels.vm." ops[i] ".ns"), g("labels.vm." ops[i] ".allocs")
	printf "   %-36s %8s        %8s\n", "switch / base switch (no OTel)", \
		g("labels.host.ratio_switch_vs_base"), g("labels.vm.ratio_switch_vs_base")
	printf "   %-36s %8s        %8s     (goal <= 2)\n", "switch - base switch, ns", \
		g("labels.host.switch_minus_base_ns"), g("labels.vm.switch_minus_base_ns")
	printf "   %-36s %8s        %8s     (goal <= 1)\n", "switch / SetGoroutineLabels", \
		g("labels.host.ratio_switch_vs_go"), g("labels.vm.ratio_switch_vs_go")
	printf "   %-36s %8s        %8s     (goal <= 0.5)\n\n", "plabel_do / pprof.Do", \
		g("labels.host.ratio_do_vs_go"), g("labels.vm.ratio_do_vs_go")

	printf "2. sampling overhead on %s vCPU with instruction counting (qemu %s -icount: time is\n", \
		g("icount.vm.ncpus"), g("icount.qemu")
	print "   instructions executed, so runs repeat to within a few 0.1 %; no cache or"
	printf "   memory costs), %s threads, median of runs: slowdown vs no profiler\n", \
		g("overhead.threads")
	overhead("icount.overhead")
	where("icount.overhead")
	printf "2b. the same on %s vCPUs with instruction counting (qemu %s; guest time is\n", \
		g("icount2.vm.ncpus"), g("icount2.qemu")
	print "   the instructions of both vCPUs, which run in turn), median of runs"
	overhead("icount2.overhead")
	where("icount2.overhead")
	printf "2c. the same on the TCG guest'"'"'s %s vCPUs in wall-clock time (spread of several %%),\n", \
		g("vm.ncpus")
	print "   median of runs"
	overhead("overhead")
	where("overhead")

	print "3. accuracy: worst label-share error, percentage points, vs the kernel (goal < 2)"
	for (k in v)
		if (k ~ /^accuracy\..*\.worst_error_points$/) {
			name = k; sub(/^accuracy\./, "", name); sub(/\.worst_error_points$/, "", name)
			printf "   %-22s %6s\n", name, v[k]
		}
	print ""

	print "4. reader (host): stream -> pprof file"
	print "   mode   samples  samples/s (wall)  samples/CPU-s  ingest/CPU-s  pprof bytes  peak RSS KiB"
	split("fp dwarf", modes, " ")
	for (m = 1; m <= 2; m++)
		printf "   %-5s %8s %17s %14s %13s %12s %13s\n", modes[m], \
			g("reader." modes[m] ".samples"), g("reader." modes[m] ".samples_per_sec"), \
			g("reader." modes[m] ".samples_per_cpu_sec"), \
			g("reader." modes[m] ".ingest_samples_per_cpu_sec"), \
			g("reader." modes[m] ".pprof_bytes"), g("reader." modes[m] ".maxrss_kb")
	f = g("reader.fp.samples_per_cpu_sec"); i = g("reader.fp.ingest_samples_per_cpu_sec")
	print "   10 kHz x 64 CPUs = 10000 x 64 = 640000 samples/s reach the reader:"
	printf "   ingest (while recording) / 640000 = %s, / 1000000 = %s (goal >= 1)\n", \
		i != "-" ? sprintf("%.2f", i / 640000) : "-", i != "-" ? sprintf("%.2f", i / 1000000) : "-"
	printf "   whole pipeline incl. final build / 640000 = %s, / 1000000 = %s\n", \
		f != "-" ? sprintf("%.2f", f / 640000) : "-", f != "-" ? sprintf("%.2f", f / 1000000) : "-"
	print "   8 M fp samples (12.5 s at 640000/s)   samples/CPU-s  peak RSS KiB  held at most  merged"
	printf "   %-36s %14s %13s %13s %7s\n", "every sample held", \
		g("reader.long.samples_per_cpu_sec"), g("reader.long.maxrss_kb"), \
		g("reader.long.samples"), "-"
	printf "   %-36s %14s %13s %13s %7s\n", "merged as settled (watermark)", \
		g("reader.long_merged.samples_per_cpu_sec"), g("reader.long_merged.maxrss_kb"), \
		g("reader.long_merged.held_max"), g("reader.long_merged.merged")
	printf "   peak RSS merged / held: %s\n\n", r("reader.long_merged.maxrss_kb", "reader.long.maxrss_kb")

	print "4b. aggregation on arrival (host): 10000 stacks, merged by the CPUs watermark and record 2 s margin,"
	print "   goals: RSS within 10 %, ingest >= 13 M/CPU-s; 1 idle: a 65th CPU sends only SYNC records"
	print "   rate             samples  held at end  merged  peak RSS KiB  ingest/CPU-s"
	split("10khz 99hz 10khz_idle", rates, " ")
	split("10 kHz x 64;99 Hz x 64;10 kHz, 1 idle", rname, ";")
	split("1M 100M", ns, " ")
	for (q = 1; q <= 3; q++)
		for (m = 1; m <= 2; m++)
			printf "   %-14s %9s %12s %7s %13s %13s\n", \
				rname[q], ns[m], \
				g("aggregate." rates[q] "." ns[m] ".held"), \
				g("aggregate." rates[q] "." ns[m] ".merged"), \
				g("aggregate." rates[q] "." ns[m] ".peak_rss_kb"), \
				g("aggregate." rates[q] "." ns[m] ".ingest_samples_per_cpu_sec")
	for (q = 1; q <= 3; q++)
		printf "   %s: peak RSS 100M / 1M %s (goal met: %s), slower ingest / 13 M %s\n", \
			rname[q], g("aggregate." rates[q] ".rss_ratio"), \
			g("aggregate." rates[q] ".rss_goal_met"), g("aggregate." rates[q] ".ingest_vs_goal")
	print ""

	print "4d. ingest: the collector today against the one of the goal (same stream, same run, best of " g("ingest.reps") ")"
	print "   stream (4 M samples)                      anchor/CPU-s  today/CPU-s  today / anchor (goal >= 1)"
	printf "   %-42s %12s %12s %s\n", "aggregate: 10000 stacks, one thread each", \
		g("ingest.aggregate.anchor"), g("ingest.aggregate.today"), g("ingest.aggregate.today_vs_anchor")
	printf "   %-42s %12s %12s %s\n", "reader: 225 stacks x 16 threads x 8 sets", \
		g("ingest.reader.anchor"), g("ingest.reader.today"), g("ingest.reader.today_vs_anchor")
	print ""

	print "4a. the off-CPU hook (VM): context switches per second of pingpong"
	printf "   no session %s, record %s, record --off-cpu %s (/ none: %s), perf sched_switch -g %s (/ none: %s); probe %s ns a call\n", \
		g("offcpu.none_switches_per_s"), g("offcpu.cpu_switches_per_s"), \
		g("offcpu.offcpu_switches_per_s"), \
		r("offcpu.offcpu_switches_per_s", "offcpu.none_switches_per_s"), \
		g("offcpu.perf_switches_per_s"), \
		r("offcpu.perf_switches_per_s", "offcpu.none_switches_per_s"), \
		g("offcpu.probe_ns")
	printf "   instruction counting, 1 vCPU: no session %s, record %s, record --off-cpu %s (/ none: %s), perf %s (/ none: %s); probe %s ns a call\n", \
		g("icount.offcpu.none_switches_per_s"), g("icount.offcpu.cpu_switches_per_s"), \
		g("icount.offcpu.offcpu_switches_per_s"), \
		r("icount.offcpu.offcpu_switches_per_s", "icount.offcpu.none_switches_per_s"), \
		g("icount.offcpu.perf_switches_per_s"), \
		r("icount.offcpu.perf_switches_per_s", "icount.offcpu.none_switches_per_s"), \
		g("icount.offcpu.probe_ns")
	printf "   goal: record --off-cpu / perf >= 1: %s\n", \
		r("icount.offcpu.offcpu_switches_per_s", "icount.offcpu.perf_switches_per_s")
	print ""

	print "4c. heap sampling: ns per malloc/free pair, 4 threads, small blocks"
	print "   goals: sampling off at most 2 ns over glibc (host); sampling on costing at most what tcmalloc\x27s sampling at 512 KiB costs it (VM, one run)"
	printf "   host: glibc %s, shim off %s (+%s ns), tcmalloc %s, tcmalloc sampled %s\n", \
		g("heap_host.glibc_ns"), g("heap_host.shim_off_ns"), \
		d("heap_host.shim_off_ns", "heap_host.glibc_ns"), \
		g("heap_host.tcmalloc_ns"), g("heap_host.tcmalloc_sampled_ns")
	printf "   VM:   glibc %s, shim off %s, shim on %s, tcmalloc %s, tcmalloc sampled %s; on / tcmalloc sampled %s\n", \
		g("heap.glibc_ns"), g("heap.shim_off_ns"), g("heap.shim_on_ns"), \
		g("heap.tcmalloc_ns"), g("heap.tcmalloc_sampled_ns"), \
		r("heap.shim_on_ns", "heap.tcmalloc_sampled_ns")
	printf "   VM, instruction counting, 1 vCPU: glibc %s, shim off %s, shim on %s (+%s over off), tcmalloc %s, tcmalloc sampled %s (+%s); sampling cost, shim / tcmalloc %s\n", \
		g("icount.heap.glibc_ns"), g("icount.heap.shim_off_ns"), g("icount.heap.shim_on_ns"), \
		d("icount.heap.shim_on_ns", "icount.heap.shim_off_ns"), \
		g("icount.heap.tcmalloc_ns"), g("icount.heap.tcmalloc_sampled_ns"), \
		d("icount.heap.tcmalloc_sampled_ns", "icount.heap.tcmalloc_ns"), \
		rd("icount.heap.shim_on_ns", "icount.heap.shim_off_ns", \
		   "icount.heap.tcmalloc_sampled_ns", "icount.heap.tcmalloc_ns")
	print ""

	print "5. memory (VM)"
	printf "   kernel slab bytes per label set        %s\n", g("memory.slab_bytes_per_set")
	printf "   kernel slab bytes per labeled task     %s\n", g("memory.slab_bytes_per_labeled_task")
	printf "   kernel bytes per ring (per CPU)        %s (ring_kb %s)\n", g("memory.bytes_per_ring"), g("memory.ring_kb")
	printf "   session start, 50000 sets / none       %s / %s us (ratio %s)\n", g("memory.session_start_us_sets"), g("memory.session_start_us_nosets"), g("memory.session_start_ratio")
	printf "   plabel record peak RSS KiB, fp/dwarf 999 Hz  %s / %s\n", \
		g("memory.record_fp_999hz_maxrss_kb"), g("memory.record_dwarf_999hz_maxrss_kb")
	print ""

	print "6. plabel serve'"'"'s CPU (VM, 99 Hz on every CPU, one busy thread), % of one CPU"
	printf "   record -a --duration 30, start to files %s\n", g("serve.record_cpu_pct")
	printf "   serve, 30 s without a request          %s   (/ record: %s)\n", \
		g("serve.idle_cpu_pct"), r("serve.idle_cpu_pct", "serve.record_cpu_pct")
	printf "   serve, a 10 s scrape every 10 s        %s   (/ record: %s; %s of 3 answered,\n", \
		g("serve.scrape_cpu_pct"), r("serve.scrape_cpu_pct", "serve.record_cpu_pct"), \
		g("serve.scrapes_ok")
	printf "                                          median %s ms from request to answer)\n", \
		g("serve.scrape_ms")
}' "$1"
