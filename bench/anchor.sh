#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/anchor.sh OUT: builds bench/ingest against the collector of commit
# INGEST_ANCHOR (default f983dca: the reader as it was when the ingest
# goal, 13 M samples per CPU-second, was set), taken from the project's
# history into build/bench/anchor-REV, and writes it to OUT. bench/run.sh runs
# it beside bench/ingest built against today's collector, on the same
# streams, in the same run: the goal's same-run anchor.
# Exit 0 when built, 3 when the history is not there (a tarball, a
# shallow clone): the figures are then left out.

set -eu
cd "$(dirname "$0")/.."
out=$1
rev=${INGEST_ANCHOR:-f983dca}
src=build/bench/anchor-$rev

if ! git rev-parse -q --verify "$rev^{commit}" >/dev/null 2>&1; then
	echo "anchor: commit $rev is not in this checkout's history" >&2
	exit 3
fi
full=$(git rev-parse "$rev^{commit}")
if [ -x "$out" ] && [ "$(cat "$src/.commit" 2>/dev/null)" = "$full" ]; then
	exit 0
fi
rm -rf "$src"
mkdir -p "$src"
git archive --format=tar "$full" | tar -x -C "$src"
make -s -C "$src" -j2 build/tools/libplabeltool.a >"$src/build.log" 2>&1 || {
	echo "anchor: building $rev's collector failed, see $src/build.log" >&2
	exit 1
}
cc -std=gnu11 -O2 -g -fno-omit-frame-pointer -Wall -Wextra -D_GNU_SOURCE \
	-I"$src/include/uapi" -I"$src/build" -I"$src/libplabel" -I"$src/tools" \
	-o "$out" bench/ingest.c "$src/build/tools/libplabeltool.a" \
	-lprotobuf-c -lz -ldw -lelf -lunwind-x86_64 -lunwind -lpthread -lm
echo "$full" >"$src/.commit"
