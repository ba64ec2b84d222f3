# SPDX-License-Identifier: GPL-2.0
#
# The example server, linked with the static library so it runs unchanged
# inside the VM.

EXAMPLES	:= $(B)/examples/server

$(B)/examples/server: examples/server.c $(B)/lib/libplabel.a libplabel/plabel.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Ilibplabel -o $@ $< $(B)/lib/libplabel.a -lpthread

ALL_TARGETS	+= $(EXAMPLES)
