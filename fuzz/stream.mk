# SPDX-License-Identifier: GPL-2.0
#
# libFuzzer target for the /dev/plabel record stream (included by
# tools/build.mk): the decoder and the collector behind it, built from the
# tool's own sources with clang's -fsanitize=fuzzer,address,undefined.
# FUZZ_CC and FUZZ_CFLAGS come from fuzz/profile.mk; fuzz/run.sh runs it
# on fuzz/corpus/stream (fuzz/stream_seeds.py writes those seeds).

FUZZ_CC		?= $(shell command -v clang-14 || command -v clang)
STREAM_FUZZ	:= $(B)/fuzz/stream_fuzz
STREAM_FUZZ_SRCS := fuzz/stream_fuzz.c tools/stream.c tools/collect.c \
		    tools/symbolize.c tools/unwind.c tools/profile.c \
		    tools/pprof_codec.c \
		    tools/table.c tools/kind.c tools/spool.c tools/chain.c \
		    tools/lset.c tools/weigh.c tools/proc.c \
		    tools/names.c tools/resolve.c tools/join.c tools/timeline.c \
		    tools/tlsctx.c

$(STREAM_FUZZ): $(STREAM_FUZZ_SRCS) $(wildcard tools/*.h) $(PROTO_C) \
		$(PROTO_HDR) fuzz/profile.mk fuzz/stream.mk
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(STREAM_FUZZ_SRCS) $(PROTO_C) \
		-lprotobuf-c -lz -ldw -lelf -lunwind-x86_64 -lunwind

ifneq ($(FUZZ_CC),)
ALL_TARGETS	+= $(STREAM_FUZZ)
$(FUZZ_SHORT): $(STREAM_FUZZ)
endif
