# SPDX-License-Identifier: GPL-2.0
#
# The label-cost benchmark (included by libplabel/build.mk):
#   make bench-labels   libplabel's label calls beside Go's pprof labels
# Not part of make check: it prints figures, it does not pass or fail.

BENCH_LABEL	:= $(B)/bench/label_cost
BENCH_GO_DIR	:= bench/label_cost_go
BENCH_MS	?= 200

$(BENCH_LABEL): bench/label_cost.c $(LIB_A) libplabel/plabel.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Ilibplabel -Wno-missing-prototypes -o $@ $< \
		$(LIB_A) -lpthread

ALL_TARGETS	+= $(BENCH_LABEL)

bench-labels: $(BENCH_LABEL)
	$(BENCH_LABEL) --ms $(BENCH_MS) --go $(BENCH_GO_DIR)
