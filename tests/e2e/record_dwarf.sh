#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel record -g dwarf on a program built with -fomit-frame-pointer that
# spends its time in a qsort() comparator: the stacks must go from the
# comparator through libc's qsort (Debian's libc has no frame pointers
# either) back to sort_work() and main(), under the program's label.

. tests/e2e/lib/common.sh record_dwarf
e2e_need_module

D=$E2E_OUT/nofp
t_ok "record -g dwarf exits 0" e2e_record "$D" -F 1000 -g dwarf -- "$E2E_BIN/nofp" 30
t_ok "cpu.pb.gz written" test -s "$D/cpu.pb.gz"
e2e_pprof -top "$D/cpu.pb.gz" | head -20 | sed 's/^/# /'
e2e_pprof -traces "$D/cpu.pb.gz" | head -60 | sed 's/^/# /'
t_ok "label stage=sorting present" \
	e2e_between "$(e2e_tag_pct "$D/cpu.pb.gz" stage sorting)" 50 100
t_ok "slow_compare <- qsort <- sort_work <- main" \
	e2e_trace "$D/cpu.pb.gz" "stage: +sorting" slow_compare qsort sort_work main

t_done
