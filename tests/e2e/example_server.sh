#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# What `make run` shows: scripts/plabel-demo records examples/server and
# prints the CPU split by label. The server prints the split its handlers
# measured with their threads' CPU clocks; the profile's must agree with
# it within 5 points for each endpoint and tenant. The endpoints cost 1, 3
# and 6 units per request and are served equally often, so the measured
# split must put them in that order; the workers were created under
# component=pool.

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

# The percentage the server measured for KEY=VALUE.
measured_pct() {
	awk -v kv="$1=$2" '$1 == kv { print $2 + 0; exit }' "$D.txt"
}

check_pct() {
	got=$(printed_pct "$1" "$2")
	want=$(measured_pct "$1" "$2")
	t_ok "$1=$2: the profile's ${got:-nothing}% is the measured ${want:-nothing}% +-5" \
		awk -v g="${got:--100}" -v w="${want:-100}" \
		'BEGIN { d = g - w; exit !(d < 5 && d > -5) }'
}

check_pct endpoint /api/report
check_pct endpoint /api/search
check_pct endpoint /api/users
check_pct tenant acme
check_pct tenant globex
t_ok "measured: /api/report > /api/search > /api/users" \
	awk -v r="$(measured_pct endpoint /api/report)" \
	    -v s="$(measured_pct endpoint /api/search)" \
	    -v u="$(measured_pct endpoint /api/users)" \
	'BEGIN { exit !(r > s && s > u && u > 0) }'
t_ok "the profile names the server as its main file" grep -q "^File: server$" "$D.txt"
t_ok "render_report is the top function" \
	sh -c 'grep -A1 " flat  flat%" "$1" | tail -1 | grep -q " render_report$"' \
	- "$D.txt"
t_ok "workers created under component=pool" \
	grep -q "component: *pool" "$D.txt"
t_done
