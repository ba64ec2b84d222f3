#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tests/browser/timeline.sh FILE TRACKS SCREENSHOT: on the host, after
# the VM's tests/e2e/timeline.sh left FILE (a timeline.json.gz plabel
# record --timeline wrote) and TRACKS (one "THREAD (tid N)" a line, the
# labeled threads' tracks): speedscope's static app, in headless
# Chromium driven by playwright-core, must list each of those tracks
# after importing FILE (tests/browser/speedscope_tracks.js). The
# screenshot of the first one goes to SCREENSHOT.
#
# The npm packages are test-time tools, never plabel's dependencies: they
# are installed, at the versions below, into PLABEL_NPM_DIR (default
# /var/cache/plabel/npm) when missing. Chromium and npm are Debian's
# (scripts/deps.sh); without them the test is a skip.

. tests/lib.sh

file=$1 tracks=$2 shot=$3
npm_dir=${PLABEL_NPM_DIR:-/var/cache/plabel/npm}
pkgs="playwright-core@1.65.1 speedscope@1.25.0"

chromium=$(command -v chromium || true)
if [ -z "$chromium" ] || ! command -v node >/dev/null ||
   ! command -v npm >/dev/null; then
	t_skip timeline_browser "chromium, node or npm not installed (make deps)"
	t_done
	exit 0
fi
if ! [ -s "$file" ] || ! [ -s "$tracks" ]; then
	t_fail "the VM test left $file and $tracks"
	t_done
	exit 1
fi

# installed: each package at its version
have() {
	for p in $pkgs; do
		v=$(node -p "require('$npm_dir/node_modules/${p%@*}/package.json').version" \
			2>/dev/null) || return 1
		[ "$v" = "${p##*@}" ] || return 1
	done
}
if ! have; then
	mkdir -p "$npm_dir"
	# shellcheck disable=SC2086
	npm install --prefix "$npm_dir" --no-audit --no-fund --no-save \
		$pkgs >"$npm_dir/install.log" 2>&1
	sed 's/^/# npm: /' "$npm_dir/install.log" | tail -5
fi
t_ok "$pkgs in $npm_dir" have || { t_done; exit 1; }

set --
while IFS= read -r t; do
	[ -n "$t" ] && set -- "$@" "$t"
done <"$tracks"
t_ok "tracks to look for" test "$#" -gt 0

out=$(mktemp)
timeout 180 node tests/browser/speedscope_tracks.js "$npm_dir" "$chromium" \
	"$file" "$shot" "$@" >"$out" 2>&1
rc=$?
while IFS= read -r line; do
	case $line in
	"ok "*) t_pass "$(echo "$line" | cut -d' ' -f3-)" ;;
	"not ok "*) t_fail "$(echo "$line" | cut -d' ' -f4-)" ;;
	*) echo "# $line" ;;
	esac
done <"$out"
rm -f "$out"
t_ok "the browser check ran to its end" test "$rc" = 0
t_done
