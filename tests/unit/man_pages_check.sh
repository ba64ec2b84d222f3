#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The manual pages (Documentation/man/*.rst, built into build/man/) agree
# with the program and the library:
#   - every command `plabel --help` lists has a page plabel-COMMAND.1,
#     and plabel(1) names it;
#   - every option a command's --help lists is in its page's OPTIONS
#     section, and the page lists no option --help does not (the same for
#     plabel(1) and `plabel --help`);
#   - plabel(3) documents every function plabel.h exports;
#   - every page renders with man(1) without a groff warning.
# An option in a page is a definition-list term in OPTIONS starting at the
# line's start with "**-" (e.g. "**-o** *DIR*, **--output** *DIR*").
# Installed as build/tests/unit/man_pages_check; runs from the checkout.
here=$(cd "$(dirname "$0")" && pwd)
for d in "$here/../../.." "$here/../.." .; do
	[ -f "$d/Documentation/man/plabel.1.rst" ] && [ -f "$d/tests/lib.sh" ] &&
		cd "$d" && break
done
. tests/lib.sh

B=${B:-build}
PLABEL=$B/bin/plabel
M=Documentation/man
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# help_opts: the option names (-x, --long) of a --help text on stdin: the
# lines that start, after blanks, with a dash; the part before the
# description (two blanks) only
help_opts() {
	sed -n 's/^ \{1,\}\(-.*\)$/\1/p' | sed 's/   *.*//' |
		grep -o -- '--\{0,1\}[A-Za-z][A-Za-z0-9-]*' | grep '^-' | sort -u
}

# page_opts PAGE.rst: the options the page's OPTIONS section lists
page_opts() {
	awk '/^OPTIONS$/ { getline; if ($0 ~ /^=+$/) { on = 1; next } }
		on && /^[A-Z][A-Z ]*$/ { exit }
		on && /^\*\*-/ { print }' "$1" |
		grep -o -- '\*\*--\{0,1\}[A-Za-z][A-Za-z0-9-]*\*\*' |
		tr -d '*' | sort -u
}

# same_opts NAME HELPFILE PAGE
same_opts() {
	help_opts <"$2" >"$tmp/h"
	page_opts "$3" >"$tmp/p"
	if [ ! -s "$tmp/h" ]; then
		t_fail "$1: --help lists options" "none found in its --help"
		return
	fi
	missing=$(comm -23 "$tmp/h" "$tmp/p" | tr '\n' ' ')
	extra=$(comm -13 "$tmp/h" "$tmp/p" | tr '\n' ' ')
	if [ -z "$missing" ]; then
		t_pass "$1: the page lists every option of --help"
	else
		t_fail "$1: the page lists every option of --help" \
			"missing in $3: $missing"
	fi
	if [ -z "$extra" ]; then
		t_pass "$1: the page lists no option --help lacks"
	else
		t_fail "$1: the page lists no option --help lacks" \
			"not in --help: $extra"
	fi
}

# the commands of `plabel --help`: the indented words under "commands:"
"$PLABEL" --help >"$tmp/top"
cmds=$(awk '/^commands:/ { on = 1; next }
	on && /^  [a-z]/ { print $1 }' "$tmp/top" | grep -vx help)
t_ok "plabel --help lists commands" test -n "$cmds"
same_opts plabel "$tmp/top" "$M/plabel.1.rst"

for c in $cmds; do
	page=$M/plabel-$c.1.rst
	if [ ! -f "$page" ]; then
		t_fail "plabel $c has a manual page" "no $page"
		continue
	fi
	t_pass "plabel $c has a manual page"
	t_ok "plabel(1) names plabel-$c(1)" \
		grep -q "\*\*plabel-$c\*\*\\\\ (1)" "$M/plabel.1.rst"
	"$PLABEL" "$c" --help >"$tmp/help.$c" 2>&1
	same_opts "plabel $c" "$tmp/help.$c" "$page"
done

# plabel(3): every exported function in SYNOPSIS and DESCRIPTION
fns=$(sed -n 's/^PLABEL_API .*[ *]\(plabel_[a-z_]*\)(.*/\1/p' libplabel/plabel.h)
t_ok "plabel.h exports functions" test -n "$fns"
for f in $fns; do
	t_ok "plabel(3) describes $f()" grep -q "^\*\*$f\*\*\\\\ ()$" "$M/plabel.3.rst"
done

# every page was built and renders without a warning
for src in "$M"/*.[1-9].rst; do
	p=$B/man/$(basename "$src" .rst)
	if [ ! -s "$p" ]; then
		t_fail "$(basename "$p") built" "no $p (make man)"
		continue
	fi
	LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$p" \
		>"$tmp/out" 2>"$tmp/err"
	if [ -s "$tmp/err" ] || [ ! -s "$tmp/out" ]; then
		sed 's/^/# /' "$tmp/err"
		t_fail "$(basename "$p") renders without warnings"
	else
		t_pass "$(basename "$p") renders without warnings"
	fi
done
t_done
