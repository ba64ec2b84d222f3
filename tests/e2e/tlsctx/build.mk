# SPDX-License-Identifier: GPL-2.0
#
# The thread-context test programs (tests/e2e/tlsctx/app.c with the writer
# ctxlib.c), for tests/unit/tools_tlsctx_test.c and tests/e2e/tlsctx.sh.
# Each puts the thread-local pointer somewhere else (the relocations are
# those readelf -rW shows):
#   tlsctx_otel_exe      OTel, in the executable: local-exec, no dynamic
#                        TLS relocation; exported with
#                        --export-dynamic-symbol
#   tlsctx_otel_desc     OTel, libotelctx_desc.so linked at start:
#                        R_X86_64_TLSDESC (-mtls-dialect=gnu2)
#   tlsctx_otel_gd       OTel, libotelctx_gd.so linked at start:
#                        R_X86_64_DTPMOD64 + R_X86_64_DTPOFF64
#                        (-mtls-dialect=gnu); its process context is an
#                        anonymous mapping named OTEL_CTX where the
#                        kernel names them (5.17 on, with
#                        CONFIG_ANON_VMA_NAME, which Debian's kernels
#                        lack), else a memfd
#   tlsctx_otel_dlopen   OTel, libotelctx_desc.so loaded with dlopen():
#                        dynamic TLS, found through the DTV (its 1 KiB
#                        block is more than glibc's optional static TLS)
#   tlsctx_otel_dlsmall  OTel, libotelctx_small.so (TLSDESC, a block of 72
#                        bytes) loaded with dlopen(): glibc puts it in
#                        its optional static TLS, so its TLSDESC holds a
#                        static offset
#   tlsctx_cl_exe        custom-labels v1, in the executable
#   tlsctx_cl_lib        custom-labels v1, libcustomlabels_t.so linked at
#                        start: R_X86_64_TLSDESC
#   tlsctx_otel_sysv     OTel, libotelctx_sysv.so linked at start, as
#                        libotelctx_desc.so but with only the SysV symbol
#                        hash table (--hash-style=sysv): the reader
#                        compares every symbol instead of asking .gnu.hash
# The libraries lie beside the programs, found through $ORIGIN.

TCTX_DIR	:= tests/e2e/tlsctx
TCTX_OUT	:= $(B)/tests/e2e
TCTX_DEPS	:= $(TCTX_DIR)/ctx.h $(TCTX_DIR)/build.mk
TCTX_CFLAGS	= $(ALL_CFLAGS) -O1
TCTX_CL		:= -DCTXLIB_CUSTOM_LABELS
TCTX_RPATH	:= -Wl,-rpath,'$$ORIGIN'
TCTX_LIBFLAGS	= -shared -fPIC -Wl,-soname,$(@F)

TCTX_LIBS	:= $(addprefix $(TCTX_OUT)/,libotelctx_desc.so \
		   libotelctx_gd.so libotelctx_small.so libcustomlabels_t.so \
		   libotelctx_sysv.so)
TCTX_PROGS	:= $(addprefix $(TCTX_OUT)/,tlsctx_otel_exe tlsctx_otel_desc \
		   tlsctx_otel_gd tlsctx_otel_dlopen tlsctx_otel_dlsmall \
		   tlsctx_cl_exe tlsctx_cl_lib tlsctx_otel_sysv)

$(TCTX_OUT)/libotelctx_desc.so: $(TCTX_DIR)/ctxlib.c $(TCTX_DEPS)
	@mkdir -p $(@D)
	$(CC) $(TCTX_CFLAGS) $(TCTX_LIBFLAGS) -mtls-dialect=gnu2 -o $@ $<

$(TCTX_OUT)/libotelctx_sysv.so: $(TCTX_DIR)/ctxlib.c $(TCTX_DEPS)
	@mkdir -p $(@D)
	$(CC) $(TCTX_CFLAGS) $(TCTX_LIBFLAGS) -mtls-dialect=gnu2 \
		-Wl,--hash-style=sysv -o $@ $<

$(TCTX_OUT)/libotelctx_gd.so: $(TCTX_DIR)/ctxlib.c $(TCTX_DEPS)
	@mkdir -p $(@D)
	$(CC) $(TCTX_CFLAGS) $(TCTX_LIBFLAGS) -mtls-dialect=gnu \
		-DCTXLIB_ANON_NAME -o $@ $<

$(TCTX_OUT)/libotelctx_small.so: $(TCTX_DIR)/ctxlib.c $(TCTX_DEPS)
	@mkdir -p $(@D)
	$(CC) $(TCTX_CFLAGS) $(TCTX_LIBFLAGS) -mtls-dialect=gnu2 \
		-DCTXLIB_STORAGE=64 -o $@ $<

$(TCTX_OUT)/libcustomlabels_t.so: $(TCTX_DIR)/ctxlib.c $(TCTX_DEPS)
	@mkdir -p $(@D)
	$(CC) $(TCTX_CFLAGS) $(TCTX_LIBFLAGS) -mtls-dialect=gnu2 $(TCTX_CL) \
		-o $@ $<

$(TCTX_OUT)/tlsctx_otel_exe: $(TCTX_DIR)/app.c $(TCTX_DIR)/ctxlib.c $(TCTX_DEPS)
	@mkdir -p $(@D)
	$(CC) $(TCTX_CFLAGS) -o $@ $(filter %.c,$^) \
		-Wl,--export-dynamic-symbol=otel_thread_ctx_v1 -lpthread

$(TCTX_OUT)/tlsctx_cl_exe: $(TCTX_DIR)/app.c $(TCTX_DIR)/ctxlib.c $(TCTX_DEPS)
	@mkdir -p $(@D)
	$(CC) $(TCTX_CFLAGS) $(TCTX_CL) -o $@ $(filter %.c,$^) \
		-Wl,--export-dynamic-symbol=custom_labels_current_set \
		-Wl,--export-dynamic-symbol=custom_labels_abi_version -lpthread

# tlsctx_PROG: app.c linked with library LIB (libLIB.so)
define TCTX_LINKED
$(TCTX_OUT)/$(1): $(TCTX_DIR)/app.c $(TCTX_OUT)/lib$(2).so $(TCTX_DEPS)
	@mkdir -p $$(@D)
	$$(CC) $$(TCTX_CFLAGS) -o $$@ $$< -L$(TCTX_OUT) -l$(2) $$(TCTX_RPATH) \
		-lpthread
endef
$(eval $(call TCTX_LINKED,tlsctx_otel_desc,otelctx_desc))
$(eval $(call TCTX_LINKED,tlsctx_otel_gd,otelctx_gd))
$(eval $(call TCTX_LINKED,tlsctx_cl_lib,customlabels_t))
$(eval $(call TCTX_LINKED,tlsctx_otel_sysv,otelctx_sysv))

# tlsctx_PROG: app.c loading library LIB.so with dlopen()
define TCTX_DLOPENED
$(TCTX_OUT)/$(1): $(TCTX_DIR)/app.c $(TCTX_OUT)/$(2) $(TCTX_DEPS)
	@mkdir -p $$(@D)
	$$(CC) $$(TCTX_CFLAGS) -DCTXLIB_DLOPEN='"$(2)"' -o $$@ $$< \
		$$(TCTX_RPATH) -ldl -lpthread
endef
$(eval $(call TCTX_DLOPENED,tlsctx_otel_dlopen,libotelctx_desc.so))
$(eval $(call TCTX_DLOPENED,tlsctx_otel_dlsmall,libotelctx_small.so))

ALL_TARGETS	+= $(TCTX_LIBS) $(TCTX_PROGS)

# The host test runs them, and processes with libplabel linked statically
# (workers) or preloaded.
TEST_DEPS_tools_tlsctx_test	+= $(TCTX_PROGS) $(B)/tests/e2e/workers \
				   $(LIB_SO)
