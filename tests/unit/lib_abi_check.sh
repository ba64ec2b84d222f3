#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# libplabel ABI check: the shared library's soname, that every exported
# symbol carries a version from libplabel.map, and that the exported
# symbols, the map's global names and the header's PLABEL_API functions
# are the same three lists (plus the variables outside formats name, which
# the header does not declare: otel_thread_ctx_v1, the TLS pointer of
# OTEP 4947, checked to be an 8-byte global TLS symbol). Runs from the
# checkout (make check) or from build/tests/unit.
here=$(cd "$(dirname "$0")" && pwd)
for d in . "$here/../../.." "$here/../.."; do
	[ -f "$d/libplabel/plabel.h" ] && cd "$d" && break
done
. tests/lib.sh

SO=${B:-build}/lib/libplabel.so.1
MAP=libplabel/libplabel.map
HDR=libplabel/plabel.h
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [ ! -f "$SO" ]; then
	t_fail "library present" "$SO missing"
	t_done
	exit 1
fi

soname=$(readelf -d "$SO" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" = libplabel.so.1 ]; then
	t_pass "soname is libplabel.so.1"
else
	t_fail "soname is libplabel.so.1" "got '$soname'"
fi

# Defined global/weak dynamic symbols (not the version nodes themselves).
readelf --dyn-syms -W "$SO" |
	awk '$1 ~ /^[0-9]+:$/ && $5 != "LOCAL" && $7 != "UND" && $8 != "" &&
	     $4 != "SECTION" && $4 != "FILE" &&
	     !($7 == "ABS" && $8 ~ /^PLABEL_[0-9.]*$/) { print $8 }' |
	sort > "$TMP/dyn"
unversioned=$(grep -v '@@\?PLABEL_[0-9][0-9.]*$' "$TMP/dyn")
if [ -s "$TMP/dyn" ] && [ -z "$unversioned" ]; then
	t_pass "every exported symbol has a PLABEL_ version"
else
	t_fail "every exported symbol has a PLABEL_ version" \
		"unversioned: $(echo $unversioned)"
fi
sed 's/@.*//' "$TMP/dyn" | sort -u > "$TMP/exported"

# Nodes of the map must be the ones the symbols use.
grep -o '^PLABEL_[0-9][0-9.]*' "$MAP" | sort -u > "$TMP/nodes"
sed -n 's/.*@@\{0,1\}\(PLABEL_[0-9][0-9.]*\)$/\1/p' "$TMP/dyn" | sort -u \
	> "$TMP/usednodes"
if [ -s "$TMP/nodes" ] && cmp -s "$TMP/nodes" "$TMP/usednodes"; then
	t_pass "version nodes of the map are the ones in use"
else
	t_fail "version nodes of the map are the ones in use" \
		"map: $(echo $(cat "$TMP/nodes"))" \
		"used: $(echo $(cat "$TMP/usednodes"))"
fi

# The map's global names: lines "name;" between "global:" and "local:".
sed -e 's,/\*.*\*/,,' "$MAP" | awk '
	/global:/ { g = 1; next }
	/local:/ { g = 0; next }
	g && /^[ \t]*[A-Za-z_][A-Za-z0-9_]*;/ { gsub(/[ \t;]/, ""); print }' |
	sort -u > "$TMP/map"

# The header's API: every PLABEL_API declaration's function name.
awk '/^PLABEL_API/ { decl = 1; s = "" }
     decl { s = s " " $0; if ($0 ~ /;/) { decl = 0; print s } }' "$HDR" |
	sed 's/(.*//; s/.*[ *]\([A-Za-z_][A-Za-z0-9_]*\)$/\1/' |
	sort -u > "$TMP/hdr.fn"
# Exported variables that outside formats name (Documentation/otel.rst).
printf '%s\n' otel_thread_ctx_v1 | sort -u - "$TMP/hdr.fn" > "$TMP/hdr"

tls=$(readelf --dyn-syms -W "$SO" |
	awk '$8 ~ /^otel_thread_ctx_v1@@PLABEL_1\.1$/ { print $3, $4, $5, $6 }')
if [ "$tls" = "8 TLS GLOBAL DEFAULT" ]; then
	t_pass "otel_thread_ctx_v1 is an exported 8-byte TLS symbol"
else
	t_fail "otel_thread_ctx_v1 is an exported 8-byte TLS symbol" \
		"dynsym: '$tls'"
fi

if [ -s "$TMP/map" ] && cmp -s "$TMP/map" "$TMP/exported"; then
	t_pass "exported symbols equal the map's global names"
else
	t_fail "exported symbols equal the map's global names" \
		"$(diff "$TMP/map" "$TMP/exported" | grep '^[<>]' |
		   tr '\n' ' ')"
fi
if [ -s "$TMP/hdr" ] && cmp -s "$TMP/hdr" "$TMP/map"; then
	t_pass "the header's PLABEL_API functions equal the map's names"
else
	t_fail "the header's PLABEL_API functions equal the map's names" \
		"$(diff "$TMP/hdr" "$TMP/map" | grep '^[<>]' | tr '\n' ' ')"
fi

# The header must stand alone, without the UAPI header.
if echo '#include "plabel.h"' |
	${CC:-cc} -x c -fsyntax-only -Wall -Werror -I libplabel -nostdinc \
		-isystem "$(${CC:-cc} -print-file-name=include)" \
		-isystem /usr/include - 2>"$TMP/err" &&
   ! grep -q plabel_uapi "$HDR"; then
	t_pass "plabel.h compiles alone"
else
	t_fail "plabel.h compiles alone" "$(head -3 "$TMP/err")"
fi

t_done
