#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tests/check.sh: the recipe of `make check` (after `make all kmods`).
#
#   1. every host test program ($HOST_TESTS), logs in build/check/host/
#   2. for each kernel in $KERNELS (default "5.10 6.1 6.12 7.2 debug"), unless
#      HOST_ONLY=1: scripts/plabel-vm runs tests/vm/run-tests.sh in a fresh
#      VM, logs in build/check/vm-<kernel>/; the VM run itself (clean
#      kernel log, no leak, rmmod, exit status) is one more test,
#      build/check/vm-<kernel>.log. Every e2e script runs on the kernels
#      in $E2E_FULL_KERNELS (default "6.1 6.12", the two Debian ships);
#      the others run the kselftests and those e2e scripts whose header
#      has the line "# e2e: every kernel" (the ones whose results rest on
#      kernel paths that differ between versions: sampling, stacks,
#      exec, mappings, names, scheduler waits, thread states). On the
#      debug kernel only the module's kselftests run, unless DEBUG_E2E=1
#      (make check-debug). E2E_TESTS set by the caller runs on every
#      kernel given.
#      After a kernel's VM that ran tests/e2e/timeline.sh, the host opens
#      the timeline it left in speedscope in headless Chromium
#      (tests/browser/timeline.sh), build/check/browser-<kernel>.log.
#   3. for each kernel in $PKG_KERNELS (default none; make check-deb:
#      6.1 and 6.12), unless HOST_ONLY=1: a fresh VM with no plabel
#      module loaded (PLABEL_KMOD=none) runs $PKG_TESTS (default
#      tests/pkg/*.sh: install the packages `make deb` built in
#      build/deb/, DKMS builds the module, ...), logs in
#      build/check/pkg-<kernel>/, the VM run itself one more test,
#      build/check/pkg-<kernel>.log. PLABEL_PKG_TIMEOUT (seconds per
#      test, default 1200) bounds them: a DKMS build under TCG takes
#      minutes.
#   4. tests/summarize over all of them: the last line is
#      "N passed, N failed, N skipped"; exit status 1 on any failure.
#
# PLABEL_TEST_TIMEOUT (seconds per test program, default 300, twice that on
# the debug kernel) and
# PLABEL_VM_TIMEOUT (seconds per VM, default 1500) bound the run;
# CHECK_DIR (default build/check) is where the logs go. HOST_TESTS,
# VM_TESTS (set by make) and E2E_TESTS (default tests/e2e/*.sh) list the
# programs to run.

set -u
cd "$(dirname "$0")/.." || exit 1

B=${B:-build}
C=${CHECK_DIR:-$B/check}
KERNELS=${KERNELS-5.10 6.1 6.12 7.2 debug}
HOST_ONLY=${HOST_ONLY:-}
limit=${PLABEL_TEST_TIMEOUT:-300}
vm_limit=${PLABEL_VM_TIMEOUT:-1500}
# Run alone (not from make): every test program built so far.
programs() {
	for f in "$@"; do
		[ -f "$f" ] && [ -x "$f" ] && echo "$f"
	done
}
[ -n "${HOST_TESTS+x}" ] || HOST_TESTS=$(programs "$B"/tests/unit/*)
[ -n "${VM_TESTS+x}" ] || VM_TESTS=$(programs "$B"/tests/kselftest/*)
E2E_GIVEN=${E2E_TESTS+x}
[ -n "$E2E_GIVEN" ] || E2E_TESTS=$(ls tests/e2e/*.sh 2>/dev/null)
E2E_FULL_KERNELS=${E2E_FULL_KERNELS-6.1 6.12}
[ -n "${PKG_TESTS+x}" ] || PKG_TESTS=$(ls tests/pkg/*.sh 2>/dev/null)
PKG_KERNELS=${PKG_KERNELS:-}
pkg_limit=${PLABEL_PKG_TIMEOUT:-1200}

export PLABEL_TEST_TIMEOUT=$limit
rm -rf "$C"
mkdir -p "$C/host"
logs=()
start=$SECONDS

# totals LOG: "pass:N fail:N skip:N" from its Totals lines
totals() {
	awk '/^# Totals: / {
		for (i = 3; i <= NF; i++) { split($i, kv, ":"); n[kv[1]] += kv[2] }
		seen = 1
	}
	END {
		if (!seen) { print "no Totals line"; exit }
		printf "pass:%d fail:%d skip:%d", n["pass"] + n["xfail"],
			n["fail"] + n["error"] + n["xpass"], n["skip"]
	}' "$1"
}

# --- host tests -------------------------------------------------------------

n=$(echo $HOST_TESTS | wc -w)
echo "check: host tests ($n programs)"
for t in $HOST_TESTS; do
	name=$(basename "$t")
	log=$C/host/$name.log
	timeout -k 10 "$limit" "$t" </dev/null >"$log" 2>&1
	rc=$?
	case $rc in
	0|4) ;;
	124|137) printf '# %s: timed out after %ss\n# Totals: pass:0 fail:1 xfail:0 xpass:0 skip:0 error:0\n' \
			"$name" "$limit" >>"$log" ;;
	*) printf '# %s: exit status %s\n# Totals: pass:0 fail:1 xfail:0 xpass:0 skip:0 error:0\n' \
			"$name" "$rc" >>"$log" ;;
	esac
	printf '  %-36s %s\n' "$name" "$(totals "$log")"
	logs+=("$log")
done
echo "check: host tests done in $((SECONDS - start)) s"

# --- VM tests, one fresh VM per kernel ----------------------------------------

# vm_run NAME KERNEL TESTS..: scripts/plabel-vm runs tests/vm/run-tests.sh
# TESTS in a fresh VM on KERNEL (the environment passes PLABEL_* settings
# on), logs in $C/NAME/; the VM's own verdict is the test $C/NAME.log.
vm_run() {
	local name=$1 k=$2 rc t log
	shift 2
	local out=$C/$name vlog=$C/$name.log
	mkdir -p "$out"
	PLABEL_VM_QUIET=0 scripts/plabel-vm --kernel "$k" --out "$out" \
		--timeout "$vm_limit" -- tests/vm/run-tests.sh \
		"$@" 2>"$C/$name.stderr" | sed -u 's/^/  /'
	rc=${PIPESTATUS[0]}
	# The runner's verdict on the VM itself is one test: a kernel
	# WARN or a failed rmmod fails it even when every test passed.
	{
		echo "TAP version 13"
		echo "1..1"
		sed 's/^/# /' "$C/$name.stderr"
		case $rc in
		0|1)
			# 1: run-tests.sh counted failed tests (they
			# are in their own logs); the VM was sound.
			echo "ok 1 $name"
			echo "# Totals: pass:1 fail:0 xfail:0 xpass:0 skip:0 error:0" ;;
		*)
			echo "not ok 1 $name # plabel-vm exit status $rc"
			echo "# Totals: pass:0 fail:1 xfail:0 xpass:0 skip:0 error:0" ;;
		esac
	} >"$vlog"
	sed 's/^/  /' "$C/$name.stderr"
	logs+=("$vlog")
	# Every test the VM should have run has a log; one that has
	# none did not run (the VM died first) and counts as failed.
	for t in "$@"; do
		log=$out/$(basename "$t" .sh).log
		[ -f "$log" ] || echo "# not run: the VM stopped before it" >"$log"
		logs+=("$log")
	done
}

# browser_check KERNEL E2E..: when tests/e2e/timeline.sh ran in the VM
# of KERNEL, the host opens the timeline it left in speedscope, in
# headless Chromium (tests/browser/timeline.sh), log in $C/browser-KERNEL.log
browser_check() {
	local k=$1 t d log
	shift
	for t in "$@"; do
		[ "$(basename "$t")" = timeline.sh ] || continue
		d=$C/vm-$k/e2e-timeline
		log=$C/browser-$k.log
		timeout -k 10 "$limit" sh tests/browser/timeline.sh \
			"$d/timeline.json.gz" "$d/tracks.txt" \
			"$C/browser-$k.png" </dev/null >"$log" 2>&1
		printf '  %-36s %s\n' "browser-$k" "$(totals "$log")"
		logs+=("$log")
	done
}

if [ -z "$HOST_ONLY" ]; then
	for k in $KERNELS; do
		t0=$SECONDS
		e2e=$E2E_TESTS
		# on the other kernels only the scripts marked for every kernel
		# (the debug kernel: none, or all with DEBUG_E2E=1, below)
		case " $E2E_FULL_KERNELS debug " in
		*" $k "*) ;;
		*) [ -n "$E2E_GIVEN" ] || [ -z "$E2E_TESTS" ] ||
			e2e=$(grep -lx '# e2e: every kernel' $E2E_TESTS) ;;
		esac
		[ "$k" != debug ] || [ -n "${DEBUG_E2E:-}" ] || e2e=
		# shellcheck disable=SC2086
		set -- $VM_TESTS $e2e
		# (run-tests.sh without arguments would run every test)
		[ $# -gt 0 ] || continue
		echo "check: VM tests on kernel $k ($# programs)"
		# the debug kernel (KASAN, lockdep) runs each test a few times
		# slower: twice the time per test program there
		tlimit=$limit
		[ "$k" != debug ] || tlimit=$((limit * 2))
		PLABEL_TEST_TIMEOUT=$tlimit vm_run "vm-$k" "$k" "$@"
		browser_check "$k" $e2e
		echo "check: kernel $k done in $((SECONDS - t0)) s"
	done
	# The packages, on a machine without the module: the VM loads none.
	for k in $PKG_KERNELS; do
		# shellcheck disable=SC2086
		set -- $PKG_TESTS
		[ $# -gt 0 ] || break
		t0=$SECONDS
		echo "check: package tests on kernel $k, no module loaded at boot ($# programs)"
		PLABEL_KMOD=none PLABEL_DEB_DIR=$B/deb \
			PLABEL_TEST_TIMEOUT=$pkg_limit vm_run "pkg-$k" "$k" "$@"
		echo "check: packages on kernel $k done in $((SECONDS - t0)) s"
	done
fi

echo "check: all done in $((SECONDS - start)) s; logs in $C/"
if [ ${#logs[@]} -eq 0 ]; then
	echo "check: no tests found"
	exit 1
fi
tests/summarize "${logs[@]}"
