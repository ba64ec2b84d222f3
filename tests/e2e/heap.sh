#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# plabel record --heap on heapuse: thread endpoint=alpha allocates three
# times what endpoint=beta does and keeps a smaller part of it, through
# every function of the malloc family, and a forked child allocates under
# endpoint=child. The heap profile, read with the real go tool pprof, must
# have Go's four sample types in Go's order, split each of alloc_space and
# inuse_space between alpha and beta as the program counted (within 6
# points), show the allocating functions as the leaves once the
# allocator's frames are dropped, have the child's allocations, and
# estimate the bytes within 25 % at the default interval.

E2E_NAME=heap
. tests/e2e/lib/common.sh
e2e_need_module

# shares DIR INDEX: got (alpha's share of alpha + beta in sample type
# INDEX), want (the program's own count), off (got - want)
shares() {
	a=$(e2e_tag_pct "$1/heap.pb.gz" endpoint alpha -sample_index=$2)
	b=$(e2e_tag_pct "$1/heap.pb.gz" endpoint beta -sample_index=$2)
	case $2 in
	alloc_space) k=alloc ;;
	*) k=inuse ;;
	esac
	ta=$(sed -n "s/.* $k alpha=\([0-9]*\) beta=.*/\1/p" "$1.log")
	tb=$(sed -n "s/.* $k alpha=[0-9]* beta=\([0-9]*\).*/\1/p" "$1.log")
	want=$(awk -v a="${ta:-0}" -v b="${tb:-0}" \
		'BEGIN { print (a + b > 0 ? 100 * a / (a + b) : -100) }')
	got=$(awk -v a="${a:-0}" -v b="${b:-0}" \
		'BEGIN { print (a + b > 0 ? 100 * a / (a + b) : 0) }')
	off=$(awk -v g="$got" -v w="$want" 'BEGIN { print g - w }')
	echo "# $1: alpha's share of $2 $got%, the program's $want%"
}

D=$E2E_OUT/heap
# A sampled estimate: a second recording before a share fails.
for round in 1 2; do
	e2e_record "$D" --heap=64K -- "$E2E_BIN/heapuse" 96
	rc=$?
	shares "$D" alloc_space
	off_alloc=$off
	shares "$D" inuse_space
	off_inuse=$off
	e2e_between "$off_alloc" -6 6 && e2e_between "$off_inuse" -6 6 && break
done
t_ok "record --heap exits 0" test "$rc" = 0
t_ok "heap.pb.gz written" test -s "$D/heap.pb.gz"
t_ok "cpu.pb.gz written too" test -s "$D/cpu.pb.gz"
t_ok "summary counts allocations" grep -q "sampled allocations.*frees.*lost frees" "$D.log"
e2e_pprof -sample_index=inuse_space -tags "$D/heap.pb.gz" | sed 's/^/# /'
t_ok "go tool pprof -sample_index=inuse_space -tags reads it" \
	sh -c 'go tool pprof -sample_index=inuse_space -tags "$1" 2>/dev/null |
		grep -q "^ *endpoint: Total"' - "$D/heap.pb.gz"
types=$(e2e_pprof -raw "$D/heap.pb.gz" | sed -n '/^Samples:/{n;p;q}')
echo "# sample types: $types"
t_ok "Go's four sample types in Go's order" sh -c \
	'echo "$1" | grep -Eq "^ *alloc_objects/count +alloc_space/bytes +inuse_objects/count +inuse_space/bytes *$"' \
	- "$types"
t_ok "alpha's share of alloc_space within 6 points" \
	e2e_between "$off_alloc" -6 6
t_ok "alpha's share of inuse_space within 6 points" \
	e2e_between "$off_inuse" -6 6
t_ok "beta sampled" e2e_between "${b:-0}" 1 100
child=$(e2e_tag_pct "$D/heap.pb.gz" endpoint child -sample_index=alloc_space)
t_ok "the forked child's allocations, under endpoint=child" \
	e2e_between "$child" 0.01 100
top_a=$(e2e_pprof -sample_index=alloc_space -tagfocus endpoint=alpha -top "$D/heap.pb.gz")
top_b=$(e2e_pprof -sample_index=alloc_space -tagfocus endpoint=beta -top "$D/heap.pb.gz")
echo "$top_a" | sed 's/^/# /'
t_ok "heap_work under alpha, called by alloc_alpha" \
	e2e_trace "$D/heap.pb.gz" "endpoint: *alpha" heap_work alloc_alpha
t_ok "heap_work under beta, called by alloc_beta" \
	e2e_trace "$D/heap.pb.gz" "endpoint: *beta" heap_work alloc_beta
t_ok "no malloc frames left on the stacks" \
	sh -c '! echo "$1" | grep -Eq " (malloc|calloc|ioctl)$"' - "$top_a"
t_ok "no alloc_alpha under beta" \
	sh -c '! echo "$1" | grep -q " alloc_alpha$"' - "$top_b"
t_ok "no FREE record lost" grep -q " 0 lost frees$" "$D.log"
raw=$(e2e_pprof -raw "$D/heap.pb.gz" | grep '^Comment: heap:')
echo "$raw" | sed 's/^/# /'
# The forked child frees blocks it inherited: its table was dropped, so
# none of those frees is reported (they would match nothing); every free
# of a sampled block was reported (none is implied by address reuse).
t_ok "no FREE without its ALLOC (the fork child's table is empty)" \
	sh -c 'echo "$1" | grep -q "before a fork: 0)"' - "$raw"
t_ok "no block taken as freed by address reuse" \
	sh -c '! echo "$1" | grep -q "address was sampled again"' - "$raw"

# Every output format shows the same numbers: plabel report against
# go tool pprof on the heap profile, in-use and allocated
export TZ=UTC
agree() {
	_f=$1
	_g=$2
	shift 2
	# shellcheck disable=SC2086
	go tool pprof $_g "$_f" >"$_f.go.txt" 2>/dev/null || return 1
	"$PLABEL" report "$@" "$_f" >"$_f.plabel.txt" || return 1
	if ! cmp -s "$_f.go.txt" "$_f.plabel.txt"; then
		diff "$_f.go.txt" "$_f.plabel.txt" | head -20 | sed 's/^/# /'
		return 1
	fi
}
t_ok "plabel report = go tool pprof -top (inuse_space)" \
	agree "$E2E_OUT/heap/heap.pb.gz" -top
t_ok "plabel report = go tool pprof -tags (alloc_space)" \
	agree "$E2E_OUT/heap/heap.pb.gz" "-tags -sample_index=alloc_space" \
	--all-tags --sample-index alloc_space

# The default interval, 512 KiB: the total alloc_space of alpha and beta
# within 25 % of what they allocated.
D=$E2E_OUT/heap-default
t_ok "record --heap (default interval) exits 0" \
	e2e_record "$D" --heap -- "$E2E_BIN/heapuse" 192
tot=$(e2e_pprof -sample_index=alloc_space -tagfocus 'endpoint=alpha|beta' \
	-unit=B -top "$D/heap.pb.gz" |
	sed -n 's/.* of \([0-9.]*\)B total.*/\1/p' | head -1)
ta=$(sed -n 's/.* alloc alpha=\([0-9]*\) beta=.*/\1/p' "$D.log")
tb=$(sed -n 's/.* alloc alpha=[0-9]* beta=\([0-9]*\).*/\1/p' "$D.log")
ratio=$(awk -v t="${tot:-0}" -v a="${ta:-0}" -v b="${tb:-0}" \
	'BEGIN { print (a + b > 0 ? t / (a + b) : 0) }')
echo "# default interval: $tot bytes estimated of $((ta + tb)), ratio $ratio"
t_ok "total alloc_space within 25 % of the true bytes" \
	e2e_between "$ratio" 0.75 1.25

# dwarf stacks: the same leaves from the unwound snapshots
D=$E2E_OUT/heap-dwarf
t_ok "record --heap -g dwarf exits 0" \
	e2e_record "$D" --heap=256K -g dwarf -- "$E2E_BIN/heapuse" 32
t_ok "dwarf: heap_work under alpha, called by alloc_alpha" \
	e2e_trace "$D/heap.pb.gz" "endpoint: *alpha" heap_work alloc_alpha

# plabel run --heap: the library goes to what CMD starts (here through
# a shell), and LD_PRELOAD keeps what it had
D=$E2E_OUT/heap-run
t_ok "record --heap -- plabel run --heap -- sh -c heapuse exits 0" \
	e2e_record "$D" --heap=128K -- env LD_PRELOAD=libm.so.6 "$PLABEL" run \
		--heap -l via=run -- sh -c "echo \$LD_PRELOAD; $E2E_BIN/heapuse 16"
t_ok "LD_PRELOAD kept and extended once" \
	grep -Eq '^libm.so.6:[^: ]*libplabel-heap.so$' "$D.log"
# heapuse's main thread keeps 4 MiB under the labels it inherited
via=$(e2e_tag_pct "$D/heap.pb.gz" via run -sample_index=inuse_space)
t_ok "allocations of the exec'ed program carry plabel run's label" \
	e2e_between "$via" 1 100

# plabel serve --heap: heapuse, started with plabel run --heap once the
# server listens, held alive at its end; heap and allocs fetched by the
# real go tool pprof over HTTP, split as the program counted
D=$E2E_OUT/serve-heap
mkdir -p "$D"
"$PLABEL" serve --heap=64K --listen 127.0.0.1:0 -a 2>"$D.srv" &
SRV=$!
e2e_wait_for "listening on" "$D.srv" "$SRV"
PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$D.srv")
t_ok "serve --heap listens" test -n "$PORT"
URL=http://127.0.0.1:$PORT/debug/pprof
HEAPUSE_HOLD=$D.hold "$PLABEL" run --heap -- "$E2E_BIN/heapuse" 48 >"$D.log" &
HU=$!
e2e_wait_for "^heap alloc" "$D.log" "$HU" 240
sleep 1	# every record settled
curl -s -o "$D/heap.pb.gz" -w '%{http_code}\n' "$URL/heap" >"$D.code"
go tool pprof -top "$URL/allocs" >"$D.allocs" 2>&1
go tool pprof -top "$URL/heap" >"$D.heap" 2>&1
go tool pprof -comments "$URL/heap?seconds=2" >"$D.delta" 2>&1
touch "$D.hold"
wait "$HU"
rc=$?
t_ok "heapuse under plabel run --heap exits 0" test "$rc" = 0
t_ok "serve answers heap with 200" grep -qx 200 "$D.code"
sed -n 1,4p "$D.allocs" | sed 's/^/# /'
t_ok "go tool pprof fetches allocs over HTTP: alloc_space first" \
	grep -q "^Type: alloc_space" "$D.allocs"
t_ok "go tool pprof fetches heap over HTTP: inuse_space first" \
	grep -q "^Type: inuse_space" "$D.heap"
shares "$D" alloc_space
t_ok "serve: alpha's share of alloc_space within 6 points" \
	e2e_between "$off" -6 6
shares "$D" inuse_space
t_ok "serve: alpha's share of inuse_space within 6 points" \
	e2e_between "$off" -6 6
t_ok "serve: heap_work under alpha, called by alloc_alpha" \
	e2e_trace "$D/heap.pb.gz" "endpoint: *alpha" heap_work alloc_alpha
t_ok "go tool pprof fetches heap?seconds=2 over HTTP: what changed over them" \
	grep -q "heap: what changed over 2 s" "$D.delta"
t_ok "serve: heap?seconds=0 is refused with 400" \
	sh -c 'test "$(curl -s -o /dev/null -w "%{http_code}" "$1/heap?seconds=0")" = 400' - "$URL"
kill "$SRV"
wait "$SRV"
t_ok "serve --heap stops with status 0 on SIGTERM" test $? = 0

# record --every --heap: a heap-STAMP at each interval's end beside its
# cpu-STAMP, each since the start; one written while heapuse held its
# blocks has alpha's
D=$E2E_OUT/every-heap
"$PLABEL" record --every 2s --duration 60 --heap=64K -a -o "$D" 2>"$D.rec" &
REC=$!
e2e_wait_for "recording started" "$D.rec" "$REC"
HEAPUSE_HOLD=$D.hold "$PLABEL" run --heap -- "$E2E_BIN/heapuse" 16 >"$D.log" &
HU=$!
e2e_wait_for "^heap alloc" "$D.log" "$HU" 240
sleep 5	# two intervals end while it holds them
touch "$D.hold"
wait "$HU"
kill -INT "$REC"
wait "$REC"
t_ok "record --every --heap exits 0 on SIGINT" test $? = 0
best=0
nomatch=0
for f in "$D"/heap-*.pb.gz; do
	[ -f "$f" ] || continue
	[ -f "$D/cpu-${f##*/heap-}" ] || nomatch=$((nomatch + 1))
	a=$(e2e_tag_pct "$f" endpoint alpha -sample_index=alloc_space)
	best=$(awk -v a="${a:-0}" -v b="$best" 'BEGIN { print (a > b ? a : b) }')
done
echo "# every-heap: $(ls "$D" | tr '\n' ' ')"
t_ok "heap-STAMP files written" sh -c 'ls "$1"/heap-*.pb.gz >/dev/null 2>&1' - "$D"
t_ok "each heap-STAMP beside its interval's cpu-STAMP" test "$nomatch" = 0
t_ok "a heap-STAMP has alpha's allocations" e2e_between "$best" 1 100
t_done
