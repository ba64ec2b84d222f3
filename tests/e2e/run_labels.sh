#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel run -l k=v labels an unmodified program (no libplabel) and the
# child it forks; recorded through plabel record -- plabel run ...
#
# e2e: every kernel

E2E_NAME=run_labels
. tests/e2e/lib/common.sh
e2e_need_module

D=$E2E_OUT/spin
t_ok "record of plabel run exits 0" \
	e2e_record "$D" -F 1000 -- "$PLABEL" run -l job=nightly -l team=db -- "$E2E_BIN/spin" 300
e2e_pprof -tags "$D/cpu.pb.gz" | sed 's/^/# /'
t_ok "job=nightly on nearly all samples" \
	e2e_between "$(e2e_tag_pct "$D/cpu.pb.gz" job nightly)" 90 100
t_ok "team=db on nearly all samples" \
	e2e_between "$(e2e_tag_pct "$D/cpu.pb.gz" team db)" 90 100
top=$(e2e_pprof -tagfocus job=nightly -top "$D/cpu.pb.gz")
echo "$top" | sed 's/^/# /'
t_ok "parent's function labeled" sh -c 'echo "$1" | grep -q " parent_spin$"' - "$top"
t_ok "forked child's function labeled" sh -c 'echo "$1" | grep -q " child_spin$"' - "$top"

# nested: the inner labels are merged into the inherited ones
out=$("$PLABEL" run -l a=1 -l b=0 -- "$PLABEL" run -l b=2 -- "$E2E_BIN/showlabels" | tr '\n' ' ')
echo "# nested: $out"
t_ok "nested plabel run merges: a=1 b=2" test "$out" = "a=1 b=2 "
out=$("$PLABEL" run -l a=1 -- "$PLABEL" run --replace -l b=2 -- "$E2E_BIN/showlabels" | tr '\n' ' ')
echo "# --replace: $out"
t_ok "plabel run --replace: only b=2" test "$out" = "b=2 "

t_ok "plabel run: exit status of the command" sh -c '"$1" run -l a=b -- sh -c "exit 3"; [ $? -eq 3 ]' - "$PLABEL"

t_done
