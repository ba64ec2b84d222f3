# SPDX-License-Identifier: GPL-2.0
#
# Tests: host unit tests (tests/unit/<name>.c -> $(B)/tests/unit/<name>) and
# VM tests (tests/kselftest/<name>.c -> $(B)/tests/kselftest/<name>), all
# built against kselftest_harness.h, which is taken from Debian's
# linux-source-6.1 package at build time and never kept in the tree.
#
# Other fragments (included before this one) add to:
#   TEST_DEPS          prerequisites of every test program (e.g. a library)
#   TEST_LDLIBS        link arguments of every test program
#   TEST_DEPS_<name>   prerequisites of test <name> alone
#   TEST_LDLIBS_<name> link arguments of test <name> alone
# with +=. They are read when a test is linked, so order does not matter.

KSFT_TARBALL	?= /usr/src/linux-source-6.1.tar.xz
KSFT_MEMBER	:= linux-source-6.1/tools/testing/selftests
KSFT_HDRS	:= $(B)/kselftest/kselftest_harness.h $(B)/kselftest/kselftest.h

TEST_DEPS	+=
TEST_LDLIBS	+= -lpthread
# kselftest_harness.h defines two global functions without prototypes.
TEST_CFLAGS	:= -Wno-missing-prototypes

UNIT_SRCS	:= $(sort $(wildcard tests/unit/*.c))
KSELFTEST_SRCS	:= $(sort $(wildcard tests/kselftest/*.c))
UNIT_BINS	:= $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(UNIT_SRCS))
KSELFTEST_BINS	:= $(patsubst tests/kselftest/%.c,$(B)/tests/kselftest/%,$(KSELFTEST_SRCS))

HOST_TESTS	+= $(UNIT_BINS)
VM_TESTS	+= $(KSELFTEST_BINS)
ALL_TARGETS	+= $(UNIT_BINS) $(KSELFTEST_BINS)

# Both headers come out of one tar run (about 8 s for the .xz); the
# harness includes kselftest.h from its own directory.
$(B)/kselftest/kselftest_harness.h:
	@mkdir -p $(@D)
	tar -xJf $(KSFT_TARBALL) -C $(@D) --strip-components=4 \
		$(KSFT_MEMBER)/kselftest_harness.h $(KSFT_MEMBER)/kselftest.h
	@touch $@
$(B)/kselftest/kselftest.h: $(B)/kselftest/kselftest_harness.h
	@test -f $@ && touch $@

kselftest-headers: $(KSFT_HDRS)

.SECONDEXPANSION:

$(B)/tests/unit/%: tests/unit/%.c $(KSFT_HDRS) $$(TEST_DEPS) $$(TEST_DEPS_$$*)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(TEST_CFLAGS) -o $@ $< $(TEST_LDLIBS_$*) $(TEST_LDLIBS)

$(B)/tests/kselftest/%: tests/kselftest/%.c $(KSFT_HDRS) $(wildcard tests/kselftest/*.h) $$(TEST_DEPS) $$(TEST_DEPS_$$*)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(TEST_CFLAGS) -o $@ $< $(TEST_LDLIBS_$*) $(TEST_LDLIBS)

# make check [KERNELS="5.10 6.1 6.12 7.2 debug"] [HOST_ONLY=1]: host tests,
# then the VM tests on each kernel (on the debug kernel the module's
# kselftests); see tests/check.sh and Documentation/testing.rst. KERNELS'
# default is in the Makefile.
# The package tests (tests/pkg/, in a VM without the module) run on
# PKG_KERNELS, with the packages make deb builds first: none by default
# (DKMS compiling the module under TCG takes 10 to 15 minutes a kernel),
# 6.1 and 6.12 with make check-deb.
HOST_ONLY	?=
PKG_KERNELS	?=
CHECK_KMODS	:= $(if $(HOST_ONLY),,kmods $(if $(filter debug,$(KERNELS)),kmod-debug))
CHECK_DEBS	:= $(if $(HOST_ONLY),,$(if $(strip $(PKG_KERNELS)),deb))

check: all $(CHECK_KMODS) $(CHECK_DEBS)
	@B=$(B) HOST_TESTS="$(HOST_TESTS)" VM_TESTS="$(VM_TESTS)" \
		KERNELS="$(KERNELS)" PKG_KERNELS="$(PKG_KERNELS)" \
		HOST_ONLY="$(HOST_ONLY)" tests/check.sh

# make check-deb: the host tests and the package tests on 6.1 and 6.12.
.PHONY: check-deb
check-deb:
	@$(MAKE) --no-print-directory check KERNELS= PKG_KERNELS="6.1 6.12"

# make check-debug: every VM test, the e2e scripts too, on the debugging
# kernel alone (built and cached by scripts/build-debug-kernel on first use).
.PHONY: check-debug
check-debug: all kmod-debug
	@B=$(B) HOST_TESTS= VM_TESTS="$(VM_TESTS)" KERNELS=debug \
		DEBUG_E2E=1 tests/check.sh
$(B)/tests/kselftest/heap_test: ALL_CFLAGS += -Wno-sign-compare
