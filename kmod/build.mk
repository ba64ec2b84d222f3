# SPDX-License-Identifier: GPL-2.0
#
# The module is built out of tree, once per kernel, in its own directory:
# $(B)/kmod/<headers dir name>/plabel.ko. Kbuild writes its objects next to
# the sources, so the sources are copied there first.

KMOD_SRCS	:= $(wildcard kmod/*.c kmod/*.h) kmod/Kbuild include/uapi/plabel_uapi.h
kmod_dir	= $(B)/kmod/$(notdir $(1))

# $(call kmod_rule,KDIR)
define kmod_rule
$(call kmod_dir,$(1))/plabel.ko: $(KMOD_SRCS)
	@mkdir -p $(call kmod_dir,$(1))
	cp $(KMOD_SRCS) $(call kmod_dir,$(1))/
	$(MAKE) -C $(1) M=$(abspath $(call kmod_dir,$(1))) modules
endef

KMOD_KDIRS	:= $(sort $(KDIR) $(KDIR_6.1) $(KDIR_6.12))
$(foreach k,$(KMOD_KDIRS),$(eval $(call kmod_rule,$(k))))

# The module for KDIR; kmods builds it for each kernel of KERNELS
# (make kmods KERNELS="5.10 6.1 6.12 7.2").
KMOD		:= $(call kmod_dir,$(KDIR))/plabel.ko
KMOD_6.1	:= $(call kmod_dir,$(KDIR_6.1))/plabel.ko
KMOD_6.12	:= $(call kmod_dir,$(KDIR_6.12))/plabel.ko
kmod: $(KMOD)
kmods: $(addprefix kmod-,$(filter-out debug,$(KERNELS)))
# (a recipe of their own, so that kmod-% below is not theirs)
kmod-6.1: $(KMOD_6.1)
	@:
kmod-6.12: $(KMOD_6.12)
	@:

# Kernels the host cannot install (5.10, 7.2): scripts/debian-kernel
# makes (once, cached) a root of the kernel's own Debian suite with its
# headers and compiler, and builds the module there, into
# build/kmod/linux-headers-<release>/ like the others. An unknown series
# is its error.
.PHONY: kmod-root
kmod-%:
	@d=$$(scripts/debian-kernel $*) && \
		$(MAKE) --no-print-directory kmod-root KROOT=$$d KSERIES=$*

ifneq ($(KROOT),)
KMOD_ROOT	:= $(B)/kmod/linux-headers-$(shell cat $(KROOT)/kernelrelease)/plabel.ko
kmod-root: $(KMOD_ROOT)
	@:
$(KMOD_ROOT): $(KMOD_SRCS) $(KROOT)/done
	@mkdir -p $(@D)
	cp $(KMOD_SRCS) $(@D)/
	scripts/debian-kernel --make $(KSERIES) $(@D)
endif

# The debugging kernel (KASAN, lockdep, kmemleak, failslab) and the module
# for it: scripts/build-debug-kernel builds the kernel once and caches it
# outside the tree (KDIR_DEBUG is where); build/kmod/debug/ holds the module.
KMOD_DEBUG	:= $(B)/kmod/debug/plabel.ko
.PHONY: debug-kernel kmod-debug
debug-kernel:
	scripts/build-debug-kernel

kmod-debug: debug-kernel
	@$(MAKE) --no-print-directory $(KMOD_DEBUG) \
		KDIR_DEBUG=$$(scripts/build-debug-kernel --print-dir)

ifneq ($(KDIR_DEBUG),)
$(KMOD_DEBUG): $(KMOD_SRCS) $(KDIR_DEBUG)/done
	@mkdir -p $(@D)
	cp $(KMOD_SRCS) $(@D)/
	$(MAKE) -C $(KDIR_DEBUG)/linux M=$(abspath $(@D)) modules
endif
