/* SPDX-License-Identifier: GPL-2.0 */
/*
 * An outside reader of the OpenTelemetry process context (OTEP 4719) and
 * thread-context records (OTEP 4947), written from the OTEPs' text for the
 * tests and independent of libplabel: it finds the OTEL_CTX mapping in
 * /proc/PID/maps, reads through /proc/PID/mem with the reading protocol
 * (signature, version 2, nonzero published_at_ns, payload, header again)
 * and decodes the protobuf payload with its own minimal decoder.
 */
#ifndef PLABEL_TEST_OTEL_DECODE_H
#define PLABEL_TEST_OTEL_DECODE_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define OD_MAX_KEYS	300

struct od_ctx {
	uint64_t map_start, map_end;
	char map_name[64];
	uint32_t version, payload_size;
	uint64_t published_at_ns, payload;
	char schema[64];
	int have_schema, have_map;
	unsigned int nkeys;
	char keys[OD_MAX_KEYS][256];
};

static int od_mem_read(int fd, uint64_t addr, void *buf, size_t len)
{
	return pread(fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

/* Start of the OTEL_CTX mapping of pid; 0 when there is none. */
static int od_find_map(pid_t pid, struct od_ctx *c, int *count)
{
	char path[64], line[512];
	FILE *f;

	*count = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, e;
		char name[256] = "";

		if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %255[^\n]",
			   &s, &e, name) < 2)
			continue;
		if (strncmp(name, "/memfd:OTEL_CTX", 15) &&
		    strncmp(name, "[anon_shmem:OTEL_CTX]", 21) &&
		    strncmp(name, "[anon:OTEL_CTX]", 15))
			continue;
		if (!(*count)++) {
			c->map_start = s;
			c->map_end = e;
			snprintf(c->map_name, sizeof(c->map_name), "%s", name);
		}
	}
	fclose(f);
	return 0;
}

struct od_pb {
	const unsigned char *p, *end;
};

static int od_varint(struct od_pb *b, uint64_t *v)
{
	int shift = 0;

	*v = 0;
	while (b->p < b->end && shift < 64) {
		unsigned char c = *b->p++;

		*v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return 0;
		shift += 7;
	}
	return -1;
}

/* Next field; for wire type 2 sub is its body. 1: end, -1: malformed. */
static int od_field(struct od_pb *b, unsigned int *field, struct od_pb *sub)
{
	uint64_t tag, v;

	if (b->p == b->end)
		return 1;
	if (od_varint(b, &tag))
		return -1;
	*field = (unsigned int)(tag >> 3);
	switch (tag & 7) {
	case 0:
		return od_varint(b, &v);
	case 1:
		if (b->end - b->p < 8)
			return -1;
		b->p += 8;
		return 0;
	case 5:
		if (b->end - b->p < 4)
			return -1;
		b->p += 4;
		return 0;
	case 2:
		if (od_varint(b, &v) || v > (uint64_t)(b->end - b->p))
			return -1;
		sub->p = b->p;
		sub->end = b->p + v;
		b->p += v;
		return 0;
	}
	return -1;
}

static void od_copy(char *dst, size_t cap, const struct od_pb *s)
{
	size_t n = (size_t)(s->end - s->p);

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s->p, n);
	dst[n] = '\0';
}

/* AnyValue: string_value = 1, array_value = 5 (ArrayValue values = 1). */
static int od_keyvalue(struct od_ctx *c, struct od_pb kv)
{
	struct od_pb sub, key = { 0 }, val = { 0 }, av, arr, s;
	unsigned int f;
	int r, have_key = 0, have_val = 0;
	char name[64];

	while (!(r = od_field(&kv, &f, &sub))) {
		if (f == 1) {
			key = sub;
			have_key = 1;
		} else if (f == 2) {
			val = sub;
			have_val = 1;
		}
	}
	if (r < 0 || !have_key || !have_val)
		return -1;
	od_copy(name, sizeof(name), &key);
	if (!strcmp(name, "threadlocal.schema_version")) {
		while (!(r = od_field(&val, &f, &sub)))
			if (f == 1) {
				od_copy(c->schema, sizeof(c->schema), &sub);
				c->have_schema = 1;
			}
		return r < 0 ? -1 : 0;
	}
	if (strcmp(name, "threadlocal.attribute_key_map"))
		return 0;
	while (!(r = od_field(&val, &f, &arr))) {
		if (f != 5)
			continue;
		c->have_map = 1;
		while (!(r = od_field(&arr, &f, &av))) {
			if (f != 1)
				continue;
			if (c->nkeys >= OD_MAX_KEYS)
				return -1;
			c->keys[c->nkeys][0] = '\0';
			while (!(r = od_field(&av, &f, &s)))
				if (f == 1)
					od_copy(c->keys[c->nkeys], 256, &s);
			if (r < 0)
				return -1;
			c->nkeys++;
		}
		if (r < 0)
			return -1;
	}
	return r < 0 ? -1 : 0;
}

/* ProcessContext: resource = 1 (skipped), extra_attributes = 2. */
static int od_decode(struct od_ctx *c, const unsigned char *p, size_t len)
{
	struct od_pb b = { p, p + len }, sub;
	unsigned int f;
	int r;

	c->have_schema = c->have_map = 0;
	c->nkeys = 0;
	while (!(r = od_field(&b, &f, &sub)))
		if (f == 2 && od_keyvalue(c, sub))
			return -1;
	return r < 0 ? -1 : 0;
}

/* The OTEP 4719 reading protocol. 0, or -1 (no or invalid context). */
static int od_read(pid_t pid, struct od_ctx *c)
{
	static unsigned char payload[1 << 17];
	unsigned char h[32], h2[32];
	char path[64];
	int fd, n, tries;

	memset(c, 0, sizeof(*c));
	if (od_find_map(pid, c, &n) || n != 1)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (tries = 0; tries < 100; tries++) {
		if (od_mem_read(fd, c->map_start, h, 32))
			break;
		if (memcmp(h, "OTEL_CTX", 8))
			break;
		memcpy(&c->version, h + 8, 4);
		memcpy(&c->payload_size, h + 12, 4);
		memcpy(&c->published_at_ns, h + 16, 8);
		memcpy(&c->payload, h + 24, 8);
		if (c->version != 2)
			break;
		if (!c->published_at_ns)
			continue;
		if (c->payload_size > sizeof(payload) ||
		    od_mem_read(fd, c->payload, payload, c->payload_size))
			break;
		if (od_mem_read(fd, c->map_start, h2, 32))
			break;
		if (memcmp(h + 16, h2 + 16, 8))
			continue;
		close(fd);
		return od_decode(c, payload, c->payload_size);
	}
	close(fd);
	return -1;
}

/* OTEP 4947 record fields. */
struct od_rec {
	unsigned char trace_id[16], span_id[8];
	unsigned char valid, flags;
	uint16_t size;
	unsigned int nattrs;
	struct {
		unsigned int key;
		char val[256];
	} attr[128];
};

/* Parse a record of len bytes (at least 28). 0 or -1. */
static __attribute__((unused)) int
od_parse_rec(const unsigned char *r, size_t len, struct od_rec *o)
{
	size_t off = 28, end;

	if (len < 28)
		return -1;
	memcpy(o->trace_id, r, 16);
	memcpy(o->span_id, r + 16, 8);
	o->valid = r[24];
	o->flags = r[25];
	memcpy(&o->size, r + 26, 2);
	o->nattrs = 0;
	end = 28 + (size_t)o->size;
	if (end > len)
		return -1;
	while (end - off >= 2 && o->nattrs < 128) {
		unsigned int l = r[off + 1];

		if (end - off - 2 < l)
			break;
		o->attr[o->nattrs].key = r[off];
		memcpy(o->attr[o->nattrs].val, r + off + 2, l);
		o->attr[o->nattrs].val[l] = '\0';
		o->nattrs++;
		off += 2 + l;
	}
	return 0;
}

#endif /* PLABEL_TEST_OTEL_DECODE_H */
