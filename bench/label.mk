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

# The same program on a libplabel built without the OpenTelemetry record
# store in plabel_switch (PLABEL_BENCH_NO_OTEL): the switch cost before
# the records, measured in the same run.
BENCH_BASE_DIR	:= $(B)/bench/base
BENCH_BASE_A	:= $(BENCH_BASE_DIR)/libplabel.a
BENCH_LABEL_BASE := $(B)/bench/label_cost_base
BENCH_BASE_OBJS	:= $(LIB_SRCS:libplabel/%.c=$(BENCH_BASE_DIR)/obj/%.o)

$(BENCH_BASE_DIR)/obj/%.o: libplabel/%.c $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -DPLABEL_BENCH_NO_OTEL -c -o $@ $<

$(BENCH_BASE_A): $(BENCH_BASE_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(BENCH_LABEL_BASE): bench/label_cost.c $(BENCH_BASE_A) libplabel/plabel.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Ilibplabel -Wno-missing-prototypes -o $@ $< \
		$(BENCH_BASE_A) -lpthread

ALL_TARGETS	+= $(BENCH_LABEL) $(BENCH_LABEL_BASE)

bench-labels: $(BENCH_LABEL) $(BENCH_LABEL_BASE)
	$(BENCH_LABEL) --ms $(BENCH_MS) --go $(BENCH_GO_DIR) \
		--base $(BENCH_LABEL_BASE)
