# SPDX-License-Identifier: GPL-2.0
#
# Benchmarks (included by the top Makefile):
#   make bench     label cost, sampling overhead beside perf, accuracy beside
#                  Go's profiler, reader throughput, the collector's memory
#                  and ingest on long recordings, serve's CPU, memory;
#                  prints a table
#                  and writes bench/results.json (see
#                  Documentation/performance.rst)
# Not part of make check: it prints figures, it never fails on speed.
# BENCH_KERNEL (default 6.1) is the VM's kernel; BENCH_REPS (default 3)
# the runs per overhead configuration.

BENCH_DIR	:= $(B)/bench
BENCH_CFLAGS	= $(ALL_CFLAGS) -Ilibplabel
BENCH_SPIN	:= $(BENCH_DIR)/spin
BENCH_PINGPONG	:= $(BENCH_DIR)/pingpong
BENCH_SHARES	:= $(BENCH_DIR)/shares
BENCH_SHARES_GO	:= $(BENCH_DIR)/shares_go
BENCH_KMEM	:= $(BENCH_DIR)/kmem
BENCH_READER	:= $(BENCH_DIR)/reader
BENCH_AGGREGATE	:= $(BENCH_DIR)/aggregate
BENCH_INGEST	:= $(BENCH_DIR)/ingest
BENCH_HEAP	:= $(BENCH_DIR)/heap
BENCH_KERNEL	?= 6.1
BENCH_REPS	?= 3

$(BENCH_SPIN): bench/spin.c $(LIB_A) libplabel/plabel.h
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< $(LIB_A) -lpthread

$(BENCH_PINGPONG): bench/pingpong.c
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -lpthread

$(BENCH_HEAP): bench/heap.c
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -lpthread

$(BENCH_SHARES) $(BENCH_KMEM): $(BENCH_DIR)/%: bench/%.c $(LIB_A) libplabel/plabel.h
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< $(LIB_A) -lpthread

$(BENCH_SHARES_GO): bench/shares_go/main.go
	@mkdir -p $(@D)
	cd bench/shares_go && GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local \
		go build -o $(CURDIR)/$@ .

$(BENCH_READER) $(BENCH_AGGREGATE) $(BENCH_INGEST): $(BENCH_DIR)/%: bench/%.c $(TOOLS_LIB) $(TOOLS_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -Itools -o $@ $< $(TOOLS_LIB) $(TOOLS_LDLIBS)

BENCH_BINS	:= $(BENCH_SPIN) $(BENCH_PINGPONG) $(BENCH_SHARES) \
		   $(BENCH_SHARES_GO) \
		   $(BENCH_KMEM) $(BENCH_READER) $(BENCH_AGGREGATE) $(BENCH_HEAP) \
		   $(BENCH_INGEST)

# The C programs build with everything else, so -Werror catches them early.
ALL_TARGETS	+= $(BENCH_SPIN) $(BENCH_PINGPONG) $(BENCH_SHARES) \
		   $(BENCH_KMEM) $(BENCH_READER) \
		   $(BENCH_AGGREGATE) $(BENCH_HEAP) $(BENCH_INGEST)

.PHONY: bench bench-bins
bench-bins: $(BENCH_BINS) $(BENCH_LABEL) $(BENCH_LABEL_BASE) $(PLABEL_BIN) $(LIB_SO) $(HEAP_LIB) kmods

bench: bench-bins
	BENCH_KERNEL=$(BENCH_KERNEL) BENCH_REPS=$(BENCH_REPS) bench/run.sh
