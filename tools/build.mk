# SPDX-License-Identifier: GPL-2.0
#
# The plabel command: $(B)/bin/plabel from tools/*.c and the generated
# profile.proto code. Everything but main.c also goes into
# $(B)/tools/libplabeltool.a, which the host tests link. The e2e test
# programs (tests/e2e/progs/*.c) are built here too, for the VM tests.

TOOLS_SRCS	:= $(sort $(wildcard tools/*.c))
TOOLS_HDRS	:= $(wildcard tools/*.h) include/uapi/plabel_uapi.h
TOOLS_OBJS	:= $(patsubst tools/%.c,$(B)/tools/%.o,$(TOOLS_SRCS))
TOOLS_LIB_OBJS	:= $(filter-out $(B)/tools/main.o,$(TOOLS_OBJS))
TOOLS_LIB	:= $(B)/tools/libplabeltool.a
TOOLS_LDLIBS	:= $(PROTO_LDLIBS) -lprotobuf-c -lz -ldw -lelf \
		   -lunwind-x86_64 -lunwind -lmicrohttpd -lpthread -lm
PLABEL_BIN	:= $(B)/bin/plabel

# The one place the version is kept: VERSION at the top of the tree.
PLABEL_VERSION	:= $(shell cat VERSION)

$(B)/tools/%.o: tools/%.c $(TOOLS_HDRS) $(PROTO_HDR) VERSION
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -DPLABEL_VERSION='"$(PLABEL_VERSION)"' \
		-DPLABEL_LIBDIR='"$(LIBDIR)"' -Itools -c -o $@ $<

$(TOOLS_LIB): $(TOOLS_LIB_OBJS) $(PROTO_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

# Symbols bound at start (-z now): not at their first call, while the
# profiled program runs.
$(PLABEL_BIN): $(B)/tools/main.o $(TOOLS_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -Wl,-z,now -o $@ $< $(TOOLS_LIB) $(TOOLS_LDLIBS)

ALL_TARGETS	+= $(PLABEL_BIN)

# plabel serve's systemd unit goes with the command, its ExecStart naming
# the installed plabel; installing it enables nothing.
SYSTEMD_UNITDIR	?= $(PREFIX)/lib/systemd/system
SERVE_UNIT	:= examples/systemd/plabel-serve.service

install-tools: $(PLABEL_BIN) $(SERVE_UNIT)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(SYSTEMD_UNITDIR)
	install -m 0755 $(PLABEL_BIN) $(DESTDIR)$(PREFIX)/bin/
	sed 's|/usr/local/bin/plabel |$(PREFIX)/bin/plabel |' $(SERVE_UNIT) \
		> $(DESTDIR)$(SYSTEMD_UNITDIR)/plabel-serve.service.tmp
	grep -q '^ExecStart=$(PREFIX)/bin/plabel serve ' \
		$(DESTDIR)$(SYSTEMD_UNITDIR)/plabel-serve.service.tmp
	chmod 0644 $(DESTDIR)$(SYSTEMD_UNITDIR)/plabel-serve.service.tmp
	mv $(DESTDIR)$(SYSTEMD_UNITDIR)/plabel-serve.service.tmp \
		$(DESTDIR)$(SYSTEMD_UNITDIR)/plabel-serve.service
install: install-tools
.PHONY: install-tools

TEST_DEPS	+= $(TOOLS_LIB)
TEST_LDLIBS	+= $(TOOLS_LIB) $(TOOLS_LDLIBS)

# kselftest_harness.h compares its (expected, seen) pairs as they come.
$(B)/tests/unit/tools_%: ALL_CFLAGS += -Wno-sign-compare

# The unwind test's call chain, compiled without frame pointers so only
# .eh_frame can unwind it.
TEST_DEPS_tools_unwind_test	+= $(B)/tests/unit/unwind_chain.o
TEST_LDLIBS_tools_unwind_test	+= $(B)/tests/unit/unwind_chain.o
$(B)/tests/unit/unwind_chain.o: tests/unit/tools/unwind_chain.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fomit-frame-pointer -O1 -c -o $@ $<

# --help texts against Documentation/tools.rst (a shell test, like the
# library's ABI check).
TOOLS_HELP_CHECK := $(B)/tests/unit/tools_help_check
$(TOOLS_HELP_CHECK): tests/unit/tools_help_check.sh $(PLABEL_BIN)
	@mkdir -p $(@D)
	cp $< $@
	chmod +x $@
HOST_TESTS	+= $(TOOLS_HELP_CHECK)
ALL_TARGETS	+= $(TOOLS_HELP_CHECK)

# End-to-end test programs, run inside the VM by tests/e2e/*.sh. The
# -fomit-frame-pointer one exercises `-g dwarf`.
E2E_SRCS	:= $(sort $(wildcard tests/e2e/progs/*.c))
E2E_BINS	:= $(patsubst tests/e2e/progs/%.c,$(B)/tests/e2e/%,$(E2E_SRCS))
E2E_CFLAGS	= $(ALL_CFLAGS) -Ilibplabel -O1
E2E_CFLAGS_nofp	:= -fomit-frame-pointer

$(B)/tests/e2e/%: tests/e2e/progs/%.c $(wildcard tests/e2e/progs/*.h) $(LIB_A) tools/build.mk
	@mkdir -p $(@D)
	$(CC) $(E2E_CFLAGS) $(E2E_CFLAGS_$*) -o $@ $< $(LIB_A) -lpthread

ALL_TARGETS	+= $(E2E_BINS)

# The library tests/e2e/progs/dlopen.c loads.
E2E_PLUGIN	:= $(B)/tests/e2e/libplugin.so
$(E2E_PLUGIN): tests/e2e/plugin/plugin.c tests/e2e/progs/burn.h tools/build.mk
	@mkdir -p $(@D)
	$(CC) $(E2E_CFLAGS) -shared -fPIC -o $@ $<

ALL_TARGETS	+= $(E2E_PLUGIN)

# record_cli's LD_PRELOAD shim: big anonymous mappings fail on cue.
E2E_NOMAP	:= $(B)/tests/e2e/libnomap.so
$(E2E_NOMAP): tests/e2e/shim/nomap.c tools/build.mk
	@mkdir -p $(@D)
	$(CC) $(E2E_CFLAGS) -shared -fPIC -o $@ $< -ldl

ALL_TARGETS	+= $(E2E_NOMAP)

-include fuzz/*.mk
include tests/e2e/tlsctx/build.mk
