# SPDX-License-Identifier: GPL-2.0
#
# TAP helpers for shell tests, printing the same "# Totals:" line as
# kselftest_harness.h so tests/summarize counts both alike.
#
#   . tests/lib.sh
#   t_ok "name" cmd args..      pass when cmd exits 0
#   t_pass name / t_fail name "why" / t_skip name "why"
#   t_done                      prints the totals; exit status 1 on failure

T_N=0 T_PASS=0 T_FAIL=0 T_SKIP=0
echo "TAP version 13"
t_pass() { T_N=$((T_N + 1)); T_PASS=$((T_PASS + 1)); echo "ok $T_N $1"; }
t_fail() { T_N=$((T_N + 1)); T_FAIL=$((T_FAIL + 1)); echo "not ok $T_N $1${2:+ # $2}"; }
t_skip() { T_N=$((T_N + 1)); T_SKIP=$((T_SKIP + 1)); echo "ok $T_N $1 # SKIP ${2:-}"; }
t_ok() {
	_n=$1; shift
	if "$@"; then t_pass "$_n"; else t_fail "$_n" "exit $?: $*"; fi
}
t_done() {
	echo "# Totals: pass:$T_PASS fail:$T_FAIL xfail:0 xpass:0 skip:$T_SKIP error:0"
	[ "$T_FAIL" -eq 0 ]
}
