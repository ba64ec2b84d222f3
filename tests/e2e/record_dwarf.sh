#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel record -g dwarf on a program built with -fomit-frame-pointer that
# spends its time in a qsort() comparator: the stacks must go from the
# comparator through libc's qsort (Debian's libc has no frame pointers
# either) back to sort_work() and main(), under the program's label.
#
# e2e: every kernel

E2E_NAME=record_dwarf
. tests/e2e/lib/common.sh
e2e_need_module

D=$E2E_OUT/nofp
t_ok "record -g dwarf exits 0" e2e_record "$D" -F 250 -g dwarf -- "$E2E_BIN/nofp" 30
t_ok "cpu.pb.gz written" test -s "$D/cpu.pb.gz"
e2e_pprof -top "$D/cpu.pb.gz" | head -20 | sed 's/^/# /'
e2e_pprof -traces "$D/cpu.pb.gz" | head -60 | sed 's/^/# /'
t_ok "label stage=sorting present" \
	e2e_between "$(e2e_tag_pct "$D/cpu.pb.gz" stage sorting)" 50 100
# glibc 2.36: qsort() tail-calls __qsort_r(), which runs msort_with_tmp()
t_ok "slow_compare <- libc's qsort <- sort_work <- main" \
	e2e_trace "$D/cpu.pb.gz" "stage: +sorting" slow_compare \
	"msort_with_tmp|__qsort_r|qsort_r|qsort" sort_work main
t_ok "through libc to _start" \
	e2e_trace "$D/cpu.pb.gz" "stage: +sorting" slow_compare \
	"msort_with_tmp|__qsort_r|qsort_r|qsort" sort_work main \
	"__libc_start_call_main|__libc_start_main.*" _start

t_done
