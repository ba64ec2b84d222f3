#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make run`: record the example server with plabel and show the result.
# Uses the running kernel when it can load the module (root, headers for
# it, module support), else a Debian kernel under scripts/plabel-vm.
set -euo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
cd "$ROOT"
out=$ROOT/build/run
rm -rf "$out"
mkdir -p "$out"

host_kdir=/lib/modules/$(uname -r)/build
if [ "$(id -u)" = 0 ] && [ -e /proc/modules ] && [ -d "$host_kdir" ] &&
   make KDIR="$host_kdir" kmod >/dev/null 2>&1; then
	ko=build/kmod/$(basename "$(readlink -f "$host_kdir")")/plabel.ko
	loaded=
	if ! grep -q '^plabel ' /proc/modules; then
		insmod "$ko"
		loaded=1
	fi
	echo "plabel.ko loaded into the running kernel $(uname -r)"
	status=0
	scripts/plabel-demo "$out" || status=$?
	[ -n "$loaded" ] && rmmod plabel
	[ $status = 0 ] || exit $status
else
	echo "The running kernel $(uname -r) cannot load modules here:" \
		"booting Debian's 6.1 kernel under qemu (about a minute)."
	scripts/plabel-vm --kernel 6.1 --out "$out" -- scripts/plabel-demo /out
fi

cat <<MSG

== files
  $out/cpu.pb.gz            CPU profile, every sample labeled
  $out/threadcreate.pb.gz   thread-create profile, with creators' stacks and labels
  $out/cpu.svg              call graph of the CPU profile (open in a browser)

== explore further
  go tool pprof -tags $out/cpu.pb.gz
  go tool pprof -tagfocus endpoint=/api/report -top $out/cpu.pb.gz
  go tool pprof -tagignore tenant=acme -top $out/cpu.pb.gz
  go tool pprof -traces $out/threadcreate.pb.gz
  go tool pprof -http=:8080 $out/cpu.pb.gz
MSG
