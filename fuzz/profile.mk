# SPDX-License-Identifier: GPL-2.0
#
# libFuzzer target for the pprof reader (included by tools/build.mk).
# Built with clang's -fsanitize=fuzzer,address,undefined from the same
# sources as the tool; needs clang with libFuzzer (clang-14 and
# libclang-rt-14-dev on Debian 12). Without clang the target is left out
# and the short fuzz run in `make check` reports a skip.

FUZZ_CC		?= $(shell command -v clang-14 || command -v clang)
FUZZ_CFLAGS	:= -std=gnu11 -g -O1 -fno-omit-frame-pointer \
		   -fsanitize=fuzzer,address,undefined \
		   -fno-sanitize-recover=undefined -D_GNU_SOURCE \
		   -Iinclude/uapi -I$(B) -Itools
PROFILE_FUZZ	:= $(B)/fuzz/profile_fuzz

PROFILE_FUZZ_SRCS := fuzz/profile_fuzz.c tools/profile.c tools/pprof_codec.c \
		     tools/report.c tools/table.c tools/kind.c

$(PROFILE_FUZZ): $(PROFILE_FUZZ_SRCS) $(wildcard tools/*.h) $(PROTO_C) \
		 $(PROTO_HDR) fuzz/profile.mk
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(PROFILE_FUZZ_SRCS) $(PROTO_C) \
		-lprotobuf-c -lz

# The short run of every fuzz target (fuzz/run.sh), as a host test.
FUZZ_SHORT	:= $(B)/tests/unit/fuzz_short
$(FUZZ_SHORT): fuzz/run.sh
	@mkdir -p $(@D)
	cp $< $@
	chmod +x $@

ifneq ($(FUZZ_CC),)
ALL_TARGETS	+= $(PROFILE_FUZZ)
$(FUZZ_SHORT): $(PROFILE_FUZZ)
endif
ALL_TARGETS	+= $(FUZZ_SHORT)
HOST_TESTS	+= $(FUZZ_SHORT)
