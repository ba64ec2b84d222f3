#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel record of a program that runs a while (its mappings are reported
# then), starts threads, dlopen()s a library and spends most of its time
# there: the library's mappings must be reported again, so that the
# samples name its plugin_spin(), called from main(), in fp and dwarf mode.
#
# e2e: every kernel

E2E_NAME=record_dlopen
. tests/e2e/lib/common.sh
e2e_need_module

# flat_ms FILE FUNC: FUNC's own CPU time in ms
flat_ms() {
	e2e_pprof -unit=ms -top "$1" | awk -v f="$2" '$NF == f { print $1 + 0 }'
}

for mode in fp dwarf; do
	D=$E2E_OUT/$mode
	t_ok "record -g $mode exits 0" e2e_record "$D" -F 250 -g $mode -- \
		"$E2E_BIN/dlopen" "$E2E_BIN/libplugin.so" 400
	e2e_pprof -top "$D/cpu.pb.gz" | head -12 | sed 's/^/# /'
	t_ok "$mode: before_load <- main" \
		e2e_trace "$D/cpu.pb.gz" "" before_load main
	t_ok "$mode: plugin_spin <- main" \
		e2e_trace "$D/cpu.pb.gz" "" plugin_spin main
	# plugin_spin burns 4x before_load's CPU time; start-up and exit
	# around them take longer the busier the machine is
	s=$(flat_ms "$D/cpu.pb.gz" plugin_spin)
	b=$(flat_ms "$D/cpu.pb.gz" before_load)
	echo "# plugin_spin ${s:-none} ms, before_load ${b:-none} ms"
	t_ok "$mode: plugin_spin has over twice before_load's CPU time" \
		awk -v s="${s:-0}" -v b="${b:-0}" 'BEGIN { exit !(b > 0 && s > 2 * b) }'
done

t_done
