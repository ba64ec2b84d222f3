# SPDX-License-Identifier: GPL-2.0
#
# Shared by tests/e2e/*.sh: run from the checkout directory inside the VM
# (module loaded, plabel installed), as root.
#
#   E2E_NAME=NAME; . tests/e2e/lib/common.sh
#   e2e_need_module              SKIP everything without /dev/plabel
#   e2e_record DIR ARGS..        plabel record -o DIR ARGS.. (log in DIR.log)
#   e2e_tag_pct FILE KEY VALUE [OPT..]  percentage `go tool pprof -tags OPT..`
#                                gives VALUE
#   e2e_trace FILE LABEL_ERE F..  a `-traces` sample with a label line matching
#                                LABEL_ERE (any sample when empty) and frames
#                                matching the EREs F.. in order, leaf first
#                                (others may come between)

. tests/lib.sh

export HOME=/tmp GOCACHE=/tmp/gocache GOFLAGS= GOPROXY=off
# (dash ignores arguments of ".": E2E_NAME may be set before)
E2E_NAME=${E2E_NAME:-${1:-e2e}}
E2E_BIN=build/tests/e2e
E2E_OUT=${PLABEL_TEST_OUT:-/tmp}/e2e-$E2E_NAME
PLABEL=$(command -v plabel || echo build/bin/plabel)
rm -rf "$E2E_OUT"
mkdir -p "$E2E_OUT"

e2e_need_module() {
	if [ ! -e /dev/plabel ]; then
		t_skip "$E2E_NAME" "no /dev/plabel (module not loaded)"
		t_done
		exit 0
	fi
	if ! command -v go >/dev/null; then
		t_skip "$E2E_NAME" "go tool pprof not installed"
		t_done
		exit 0
	fi
}

e2e_record() {
	_d=$1
	shift
	"$PLABEL" record -o "$_d" "$@" >"$_d.log" 2>&1
	_rc=$?
	sed 's/^/# /' "$_d.log"
	return $_rc
}

e2e_pprof() {
	go tool pprof "$@" 2>/dev/null
}

e2e_tag_pct() {
	_f=$1 _k=$2 _v=$3
	shift 3
	e2e_pprof -tags "$@" "$_f" | awk -v key="$_k" -v val="$_v" '
		$1 == key ":" && $2 == "Total" { in_key = 1; next }
		$2 == "Total" { in_key = 0 }
		in_key && $NF == val {
			p = $0
			sub(/^[^(]*\(/, "", p)
			sub(/%.*/, "", p)
			print p + 0
			found = 1
		}
		END { if (!found) print 0 }'
}

e2e_trace() {
	_f=$1
	_lab=$2
	shift 2
	e2e_pprof -traces "$_f" | awk -v lab="$_lab" -v frames="$*" '
		BEGIN { n = split(frames, want, " ") }
		function check() { if (haslab && k > n) found = 1 }
		/^-----------\+/ { check(); haslab = lab == ""; k = 1; started = 1; next }
		!started { next }
		/^ *[A-Za-z0-9_.]+: / {
			if ($0 ~ lab)
				haslab = 1
			next
		}
		{
			line = $0
			sub(/ \(inline\)$/, "", line)
			m = split(line, w, " ")
			if (k <= n && m && w[m] ~ ("^(" want[k] ")$"))
				k++
		}
		END { check(); exit !found }'
}

# e2e_wait_for REGEX FILE PID [SECONDS]: until a line of FILE matches
# REGEX (grep), while PID lives, SECONDS (60) at most; status: matched
e2e_wait_for() {
	_i=0
	_n=$((${4:-60} * 10))
	while ! grep -q -- "$1" "$2" 2>/dev/null && [ $_i -lt $_n ] &&
	      kill -0 "$3" 2>/dev/null; do
		sleep 0.1
		_i=$((_i + 1))
	done
	grep -q -- "$1" "$2" 2>/dev/null
}

# e2e_between VALUE LO HI: LO <= VALUE <= HI (decimals allowed)
e2e_between() {
	awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'
}
