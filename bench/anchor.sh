#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/anchor.sh OUT: builds bench/ingest against the collector of commit
# INGEST_ANCHOR (default f983dca: the reader as it was when the ingest
# goal, 13 M samples per CPU-second, was set), taken from the project's
# history into build/bench/anchor-REV (kept: later runs only link), and
# writes it to OUT. bench/run.sh runs it beside bench/ingest built against
# today's collector, on the same streams, in the same run: the goal's
# same-run anchor.
# Exit 0 when built, 3 when the commit is not in the history (a tarball,
# a shallow clone): the figures are then left out; 1 when building failed.

set -eu
cd "$(dirname "$0")/.."
if [ $# != 1 ]; then
	echo "usage: bench/anchor.sh OUT" >&2
	exit 2
fi
out=$1
rev=${INGEST_ANCHOR:-f983dca}
src=build/bench/anchor-$rev

if ! git rev-parse -q --verify "$rev^{commit}" >/dev/null 2>&1; then
	echo "anchor: commit $rev is not in this checkout's history" >&2
	exit 3
fi
full=$(git rev-parse "$rev^{commit}")
if [ "$(cat "$src/.commit" 2>/dev/null)" != "$full" ]; then
	rm -rf "$src"
	mkdir -p "$src"
	git archive --format=tar "$full" | tar -x -C "$src"
	if ! make -s -C "$src" -j2 build/tools/libplabeltool.a \
		>"$src/build.log" 2>&1; then
		echo "anchor: building $rev's collector failed, see $src/build.log" >&2
		exit 1
	fi
	echo "$full" >"$src/.commit"
fi
# (linked each time: bench/ingest.c is today's)
cc -std=gnu11 -O2 -g -fno-omit-frame-pointer -Wall -Wextra -D_GNU_SOURCE \
	-I"$src/include/uapi" -I"$src/build" -I"$src/libplabel" -I"$src/tools" \
	-o "$out" bench/ingest.c "$src/build/tools/libplabeltool.a" \
	-lprotobuf-c -lz -ldw -lelf -lunwind-x86_64 -lunwind -lpthread -lm || {
	echo "anchor: linking bench/ingest.c against $rev failed" >&2
	exit 1
}
