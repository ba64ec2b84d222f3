#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# `plabel CMD --help` and `plabel help CMD` print exactly the texts
# Documentation/tools.rst shows (the literal block after ".. help: CMD"),
# and the top-level usage lists every command; on a host without the
# module, record, run and serve fail with the one clear message. Installed as
# build/tests/unit/tools_help_check; runs from the checkout.
here=$(cd "$(dirname "$0")" && pwd)
for d in "$here/../../.." "$here/../.." .; do
	[ -f "$d/Documentation/tools.rst" ] && [ -f "$d/tests/lib.sh" ] &&
		cd "$d" && break
done
. tests/lib.sh

B=${B:-build}
PLABEL=$B/bin/plabel
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# doc_help CMD: the literal block after ".. help: CMD", unindented
doc_help() {
	awk -v cmd="$1" '
		$0 == ".. help: " cmd { want = 1; next }
		want && $0 == "::" { inblk = 1; next }
		inblk && /^[^ ]/ { exit }
		inblk { sub(/^  /, ""); print }' Documentation/tools.rst |
		sed -e '1{/^$/d}' | sed -e ':a' -e '/^\n*$/{$d;N;ba' -e '}'
}

for c in record run serve threads; do
	doc_help "$c" >"$tmp/doc"
	if [ ! -s "$tmp/doc" ]; then
		t_fail "$c: documented" "no '.. help: $c' block in Documentation/tools.rst"
		continue
	fi
	"$PLABEL" "$c" --help >"$tmp/help"
	if diff -u "$tmp/doc" "$tmp/help" >"$tmp/diff"; then
		t_pass "plabel $c --help matches Documentation/tools.rst"
	else
		sed 's/^/# /' "$tmp/diff"
		t_fail "plabel $c --help matches Documentation/tools.rst"
	fi
	"$PLABEL" help "$c" >"$tmp/help2"
	t_ok "plabel help $c is the same text" cmp -s "$tmp/help" "$tmp/help2"
done
"$PLABEL" help report >"$tmp/rep" 2>&1
t_ok "plabel help report" grep -q "^usage: plabel report" "$tmp/rep"
"$PLABEL" --help >"$tmp/top"
for c in record report run serve threads; do
	t_ok "plabel --help lists $c" grep -q "^  $c " "$tmp/top"
done

# no_module CMD..: exit 1 and the message naming the module
no_module() {
	m=$("$PLABEL" "$@" 2>&1 >/dev/null)
	rc=$?
	[ $rc -eq 1 ] && [ "$m" = "plabel: /dev/plabel not found: is the plabel module loaded?" ]
}
if [ -e /dev/plabel ]; then
	t_skip "record without the module" "/dev/plabel exists here"
	t_skip "run without the module" "/dev/plabel exists here"
	t_skip "serve without the module" "/dev/plabel exists here"
else
	t_ok "record without the module" no_module record -o "$tmp/out" -- true
	t_ok "run without the module" no_module run -l k=v -- true
	t_ok "serve without the module" no_module serve --listen 127.0.0.1:0
	t_ok "no output directory made without the module" test ! -e "$tmp/out"
fi

# usage_err WORDS CMD..: exit 2, WORDS in the message, before the device
usage_err() {
	w=$1
	shift
	m=$("$PLABEL" "$@" 2>&1 >/dev/null)
	rc=$?
	echo "# $m"
	[ $rc -eq 2 ] && echo "$m" | grep -q -- "$w"
}
t_ok "serve --heap -g dwarf is refused" \
	usage_err "takes frame-pointer stacks" serve --heap -g dwarf
t_ok "serve --heap=0 is refused" usage_err "bad heap interval" serve --heap=0
t_ok "record --every --heap -g dwarf is refused" \
	usage_err "takes frame-pointer stacks" record --every 5s --heap -g dwarf -a
t_ok "record --every --timeline-label without --timeline is refused" \
	usage_err "needs --timeline" record --every 5s --timeline-label k=v -a
t_done
