# SPDX-License-Identifier: GPL-2.0
#
# plabel: top-level build. Everything built lands under build/.
#
#   make deps     install the Debian packages the project needs
#   make          module (for KDIR), library, tools, tests
#   make check    every test; ends with "N passed, N failed, N skipped"
#   make run      record the example and show its labeled profile
#   make install  PREFIX=/usr/local DESTDIR= (LIBDIR, MANDIR, SYSTEMD_UNITDIR)
#   make deb      Debian packages into build/deb/; make dkms-install (pkg.mk)
#   make clean

CC		?= cc
B		:= build
PREFIX		?= /usr/local
DESTDIR		?=

# Debian's kernels this tree is tested on (newest installed of each series).
KDIR_6.1	:= $(lastword $(sort $(wildcard /usr/src/linux-headers-6.1.*-amd64)))
KDIR_6.12	:= $(lastword $(sort $(wildcard /usr/src/linux-headers-6.12.*-amd64)))
KDIR		?= $(KDIR_6.1)
# The kernels make kmods builds for and make check tests on: 5.10 and 7.2
# come from their own Debian suites (scripts/debian-kernel), debug from
# scripts/build-debug-kernel.
KERNELS		?= 5.10 6.1 6.12 7.2 debug

WARN		:= -Wall -Wextra -Werror -Wno-unused-parameter \
		   -Wmissing-prototypes -Wstrict-prototypes -Wshadow
BASE_CFLAGS	:= -std=gnu11 -O2 -g -fno-omit-frame-pointer $(WARN) \
		   -D_GNU_SOURCE -Iinclude/uapi -I$(B)
CFLAGS		?=
ALL_CFLAGS	= $(BASE_CFLAGS) $(CFLAGS)

.PHONY: all deps check run install clean kmod kmods kselftest-headers
.DEFAULT_GOAL := all

# Parts add their outputs to these.
ALL_TARGETS	:=
HOST_TESTS	:=
VM_TESTS	:=
CLEAN_FILES	:=

include kmod/build.mk
include proto/build.mk
include libplabel/build.mk
include tools/build.mk
include examples/build.mk
include bench/bench.mk
include Documentation/man/build.mk
include pkg.mk
include tests/build.mk

all: kmod $(ALL_TARGETS)

deps:
	scripts/deps.sh

# The main job: record the example and show its labeled profiles.
run:
	scripts/deps.sh
	$(MAKE) all
	scripts/run.sh

clean:
	rm -rf $(B)
	$(MAKE) -C kmod clean >/dev/null 2>&1 || true
