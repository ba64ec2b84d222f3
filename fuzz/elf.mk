# SPDX-License-Identifier: GPL-2.0
#
# libFuzzer target for the ELF files the reader opens (included by
# tools/build.mk): the symbolizer and the dwarf unwinder on fuzzed files,
# built from the tool's own sources like the other targets (FUZZ_CC and
# FUZZ_CFLAGS come from fuzz/profile.mk). Its seeds are not kept in the
# tree: $(B)/fuzz/corpus/elf/ gets small builds of fuzz/seeds/elf_seed.c
# (with and without DWARF, frame pointers, PIE, libc), under 16 KiB each,
# which fuzz/run.sh adds to fuzz/corpus/elf when it runs the target.

FUZZ_CC		?= $(shell command -v clang-14 || command -v clang)
ELF_FUZZ	:= $(B)/fuzz/elf_fuzz
ELF_FUZZ_SRCS	:= fuzz/elf_fuzz.c tools/symbolize.c tools/unwind.c
ELF_SEED_DIR	:= $(B)/fuzz/corpus/elf
ELF_SEED_LD	:= -Wl,-z,noseparate-code -Wl,--build-id
ELF_SEEDS	:= $(addprefix $(ELF_SEED_DIR)/,g-pie g-nopie-nofp g-static \
		   stripped-pie stripped-static)

$(ELF_FUZZ): $(ELF_FUZZ_SRCS) tools/symbolize.h tools/unwind.h \
	     include/uapi/plabel_uapi.h fuzz/profile.mk fuzz/elf.mk
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(ELF_FUZZ_SRCS) \
		-ldw -lelf -lunwind-x86_64 -lunwind -lz

# The seeds: one libc program three ways, one without libc or startup
# files (a few hundred bytes stripped), and stripped copies.
$(ELF_SEED_DIR)/g-pie: fuzz/seeds/elf_seed.c fuzz/elf.mk
	@mkdir -p $(@D)
	$(CC) -g -O1 -fpie -pie $(ELF_SEED_LD) -o $@ $<
$(ELF_SEED_DIR)/g-nopie-nofp: fuzz/seeds/elf_seed.c fuzz/elf.mk
	@mkdir -p $(@D)
	$(CC) -g -O1 -fomit-frame-pointer -no-pie $(ELF_SEED_LD) -o $@ $<
$(ELF_SEED_DIR)/g-static: fuzz/seeds/elf_seed.c fuzz/elf.mk
	@mkdir -p $(@D)
	$(CC) -g -O1 -static -nostdlib -e main $(ELF_SEED_LD) -o $@ $<
$(ELF_SEED_DIR)/stripped-%: $(ELF_SEED_DIR)/g-%
	strip -o $@ $<

ifneq ($(FUZZ_CC),)
ALL_TARGETS	+= $(ELF_FUZZ) $(ELF_SEEDS)
$(FUZZ_SHORT): $(ELF_FUZZ) $(ELF_SEEDS)
endif

# Inputs the fuzzer found that plabel had to be fixed for live in
# fuzz/corpus/elf/ (kept small), where the hostile-file unit test finds
# them too.
TEST_DEPS_tools_elf_hostile_test += $(wildcard fuzz/corpus/elf/*)
$(B)/tests/unit/tools_elf_hostile_test: ALL_CFLAGS += \
	-DPLABEL_ELF_CORPUS='"$(CURDIR)/fuzz/corpus/elf"'
