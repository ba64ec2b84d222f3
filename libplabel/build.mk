# SPDX-License-Identifier: GPL-2.0
#
# libplabel: $(B)/lib/libplabel.so.1.1.0 (+ .so.1, .so links), libplabel.a,
# plabel.pc; the ABI check host test; the label-cost benchmark; install.

PLABEL_LIB_VERSION	:= 1.1.0
PLABEL_LIB_SONAME	:= libplabel.so.1
LIB_DIR			:= $(B)/lib
LIB_SRCS		:= libplabel/labels.c libplabel/otel.c libplabel/thread.c
LIB_HDRS		:= libplabel/plabel.h libplabel/internal.h \
			   include/uapi/plabel_uapi.h
LIB_OBJS		:= $(LIB_SRCS:libplabel/%.c=$(LIB_DIR)/obj/%.o)
# Expanded now: flags that other targets set for themselves (and so for
# their prerequisites) must not change how the library is compiled.
LIB_CFLAGS		:= $(ALL_CFLAGS) -fPIC -fvisibility=hidden -Ilibplabel
LIB_SO			:= $(LIB_DIR)/libplabel.so.$(PLABEL_LIB_VERSION)
LIB_A			:= $(LIB_DIR)/libplabel.a
LIB_PC			:= $(LIB_DIR)/plabel.pc
LIBDIR			?= $(PREFIX)/lib

$(LIB_DIR)/obj/%.o: libplabel/%.c $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -c -o $@ $<

$(LIB_SO): $(LIB_OBJS) libplabel/libplabel.map libplabel/build.mk
	$(CC) -shared -o $@ $(LIB_OBJS) -Wl,-soname,$(PLABEL_LIB_SONAME) \
		-Wl,--version-script=libplabel/libplabel.map \
		-Wl,-z,defs -Wl,-z,relro -Wl,-z,now -Wl,-z,nodelete \
		$(LDFLAGS) -lpthread
	ln -sf $(notdir $@) $(LIB_DIR)/$(PLABEL_LIB_SONAME)
	ln -sf $(PLABEL_LIB_SONAME) $(LIB_DIR)/libplabel.so

$(LIB_A): $(LIB_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(LIB_PC): libplabel/plabel.pc.in libplabel/build.mk
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
		-e 's|@VERSION@|$(PLABEL_LIB_VERSION)|' $< > $@

# The same under pkgconfig/, where the VM runner and PKG_CONFIG_PATH look.
$(LIB_DIR)/pkgconfig/plabel.pc: $(LIB_PC)
	@mkdir -p $(@D)
	cp $< $@

libplabel: $(LIB_SO) $(LIB_A) $(LIB_PC) $(LIB_DIR)/pkgconfig/plabel.pc
.PHONY: libplabel bench-labels

ALL_TARGETS	+= $(LIB_SO) $(LIB_A) $(LIB_PC) $(LIB_DIR)/pkgconfig/plabel.pc

# Tests link the static library (VM tests then need nothing installed).
TEST_DEPS	+= $(LIB_A)
TEST_LDLIBS	+= $(LIB_A) -lpthread
TEST_DEPS_lib_otel_test	+= tests/unit/otel_decode.h
# The outside-reader test's child uses the shared library, as programs do.
TEST_DEPS_lib_otel_reader_test	+= tests/unit/otel_decode.h $(LIB_SO)
TEST_LDLIBS_lib_otel_reader_test += -L$(LIB_DIR) \
	-Wl,-rpath,$(abspath $(LIB_DIR)) -lplabel
# Tests include <plabel.h> as applications do.
$(B)/tests/%: ALL_CFLAGS += -Ilibplabel

# The ABI check is a shell test, installed next to the C host tests.
LIB_ABI_CHECK	:= $(B)/tests/unit/lib_abi_check
$(LIB_ABI_CHECK): tests/unit/lib_abi_check.sh $(LIB_SO)
	@mkdir -p $(@D)
	cp $< $@
	chmod +x $@
HOST_TESTS	+= $(LIB_ABI_CHECK)
ALL_TARGETS	+= $(LIB_ABI_CHECK)

include bench/label.mk

install: $(LIB_SO) $(LIB_A) $(LIB_PC)
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PREFIX)/include/plabel \
		$(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 0755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(LIB_SO)) $(DESTDIR)$(LIBDIR)/$(PLABEL_LIB_SONAME)
	ln -sf $(PLABEL_LIB_SONAME) $(DESTDIR)$(LIBDIR)/libplabel.so
	install -m 0644 $(LIB_A) $(DESTDIR)$(LIBDIR)/
	install -m 0644 libplabel/plabel.h $(DESTDIR)$(PREFIX)/include/
	install -m 0644 include/uapi/plabel_uapi.h \
		$(DESTDIR)$(PREFIX)/include/plabel/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
		-e 's|@VERSION@|$(PLABEL_LIB_VERSION)|' libplabel/plabel.pc.in \
		> $(DESTDIR)$(LIBDIR)/pkgconfig/plabel.pc
	chmod 0644 $(DESTDIR)$(LIBDIR)/pkgconfig/plabel.pc

# libplabel-heap.so, the heap sampler `plabel record --heap` preloads:
# a module for LD_PRELOAD, not a library to link, so under lib/plabel/.
HEAP_LIB_DIR	:= $(LIB_DIR)/plabel
HEAP_LIB	:= $(HEAP_LIB_DIR)/libplabel-heap.so
HEAP_CORE_HDRS	:= libplabel/heap_core.h include/uapi/plabel_uapi.h

$(LIB_DIR)/obj/heap_core.o: libplabel/heap_core.c $(HEAP_CORE_HDRS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -c -o $@ $<

$(LIB_DIR)/obj/heap.o: libplabel/heap.c $(HEAP_CORE_HDRS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -ftls-model=initial-exec -fno-plt -c -o $@ $<

$(HEAP_LIB): $(LIB_DIR)/obj/heap.o $(LIB_DIR)/obj/heap_core.o libplabel/build.mk
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $(LIB_DIR)/obj/heap.o $(LIB_DIR)/obj/heap_core.o \
		-Wl,-z,defs -Wl,-z,relro -Wl,-z,now -Wl,-z,nodelete \
		$(LDFLAGS) -lm -ldl -lpthread

ALL_TARGETS	+= $(HEAP_LIB)

# The host test of the table and the intervals links heap_core.o.
TEST_DEPS_lib_heap_test		+= $(LIB_DIR)/obj/heap_core.o
TEST_LDLIBS_lib_heap_test	+= $(LIB_DIR)/obj/heap_core.o -lm

install-heap: $(HEAP_LIB)
	install -d $(DESTDIR)$(LIBDIR)/plabel
	install -m 0644 $(HEAP_LIB) $(DESTDIR)$(LIBDIR)/plabel/
install: install-heap
.PHONY: install-heap
$(B)/tests/unit/lib_heap_test: ALL_CFLAGS += -Wno-sign-compare

# The preloaded library against glibc's behaviour, on the host.
TEST_DEPS_lib_heap_shim_test	+= $(HEAP_LIB)
TEST_LDLIBS_lib_heap_shim_test	+= -ldl
$(B)/tests/unit/lib_heap_shim_test: ALL_CFLAGS += -Wno-sign-compare
