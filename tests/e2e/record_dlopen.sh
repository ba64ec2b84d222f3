#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel record of a program that runs a while (its mappings are reported
# then), starts threads, dlopen()s a library and spends most of its time
# there: the library's mappings must be reported again, so that the
# samples name its plugin_spin(), called from main(), in fp and dwarf mode.

E2E_NAME=record_dlopen
. tests/e2e/lib/common.sh
e2e_need_module

for mode in fp dwarf; do
	D=$E2E_OUT/$mode
	t_ok "record -g $mode exits 0" e2e_record "$D" -F 250 -g $mode -- \
		"$E2E_BIN/dlopen" "$E2E_BIN/libplugin.so" 400
	e2e_pprof -top "$D/cpu.pb.gz" | head -12 | sed 's/^/# /'
	t_ok "$mode: before_load <- main" \
		e2e_trace "$D/cpu.pb.gz" "" before_load main
	t_ok "$mode: plugin_spin <- main" \
		e2e_trace "$D/cpu.pb.gz" "" plugin_spin main
	t_ok "$mode: most samples in plugin_spin" e2e_between \
		"$(e2e_pprof -top "$D/cpu.pb.gz" | awk '
			$NF == "plugin_spin" { sub(/%/, "", $2); print $2 }')" \
		50 100
done

t_done
