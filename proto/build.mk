# SPDX-License-Identifier: GPL-2.0
#
# profile.proto -> $(B)/proto/profile.pb-c.[ch] with protoc-c, at build
# time (generated sources are never committed). tools/build.mk links
# $(PROTO_OBJ) and depends on $(PROTO_HDR); PROTO_LDLIBS are the libraries
# the pprof code needs.

PROTO_SRC	:= proto/profile.proto
PROTO_HDR	:= $(B)/proto/profile.pb-c.h
PROTO_C		:= $(B)/proto/profile.pb-c.c
PROTO_OBJ	:= $(B)/proto/profile.pb-c.o
PROTO_LDLIBS	:= -lprotobuf-c -lz

# One protoc-c run writes both files: the header is the rule's target and
# the .c depends on it.
$(PROTO_HDR): $(PROTO_SRC)
	@mkdir -p $(B)/proto
	protoc-c --c_out=$(B)/proto --proto_path=proto $(PROTO_SRC)

$(PROTO_C): $(PROTO_HDR)
	@test -f $@

# Generated code is not ours to make -Wmissing-prototypes clean.
$(PROTO_OBJ): $(PROTO_C) $(PROTO_HDR)
	$(CC) $(ALL_CFLAGS) -Wno-missing-prototypes -fPIC -c -o $@ $<

ALL_TARGETS	+= $(PROTO_OBJ)
