// SPDX-License-Identifier: GPL-2.0
/*
 * The program the ELF fuzzer's seeds are built from (fuzz/elf.mk): small,
 * with an inlined call, a leaf and a caller so that its DWARF has
 * subprograms, an inlined subroutine, line rows and call frame info.
 */
static int __attribute__((noinline)) plabel_seed_leaf(int x)
{
	return x * 3 + 1;
}

static inline int plabel_seed_mid(int x)
{
	return plabel_seed_leaf(x) + plabel_seed_leaf(x + 1);
}

int main(int argc, char **argv)
{
	(void)argv;
	return plabel_seed_mid(argc);
}
