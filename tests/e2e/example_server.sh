#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# What `make run` shows: scripts/plabel-demo records examples/server and
# prints the CPU split by label. The endpoints cost 1, 3 and 6 units per
# request and are served equally often, so the printed split must be near
# 10%, 30% and 60%; the tenants alternate, so near 50% each; the workers
# were created under component=pool.

E2E_NAME=example_server
. tests/e2e/lib/common.sh
e2e_need_module

D=$E2E_OUT/demo
scripts/plabel-demo "$D" >"$D.txt" 2>&1
rc=$?
sed 's/^/# /' "$D.txt"
t_ok "plabel-demo exits 0" test "$rc" = 0
t_ok "cpu.svg drawn" test -s "$D/cpu.svg"

# The percentage the printed --tags section gives KEY=VALUE.
printed_pct() {
	awk -v key="$1" -v val="$2" '
		$1 == key ":" && $2 == "Total" { in_key = 1; next }
		$2 == "Total" { in_key = 0 }
		in_key && $NF == val {
			p = $0
			sub(/^[^(]*\(/, "", p)
			sub(/%.*/, "", p)
			print p + 0
			exit
		}' "$D.txt"
}

check_pct() {
	got=$(printed_pct "$1" "$2")
	t_ok "$1=$2 is $3% +-$4 (printed ${got:-nothing})" \
		e2e_between "${got:--1}" $(($3 - $4)) $(($3 + $4))
}

check_pct endpoint /api/report 60 8
check_pct endpoint /api/search 30 8
check_pct endpoint /api/users 10 6
check_pct tenant acme 50 10
check_pct tenant globex 50 10
t_ok "the profile names the server as its main file" grep -q "^File: server$" "$D.txt"
t_ok "render_report is the top function" \
	sh -c 'grep -A1 " flat  flat%" "$1" | tail -1 | grep -q " render_report$"' \
	- "$D.txt"
t_ok "workers created under component=pool" \
	grep -q "component: *pool" "$D.txt"
t_done
