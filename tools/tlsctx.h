/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Thread contexts that other programs publish for outside profilers: the
 * OpenTelemetry thread context (OTEP 4947, with its key map in the OTEP
 * 4719 process context) and the custom-labels v1 ABI.
 *
 * The reader's side of PLABEL_IOC_TLSCTX_SET (plabel_uapi.h): finding
 * where a process keeps its thread-local pointer (plabel_tls_locate()),
 * registering it with the session, reading the OTel key map, and turning
 * the context a record carries into labels (plabel_tctx_labels()).
 *
 * What a process publishes is untrusted: every read of its memory or of
 * its files is bounds-checked, and a context that does not decode labels
 * nothing.
 */
#ifndef PLABEL_TOOLS_TLSCTX_H
#define PLABEL_TOOLS_TLSCTX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plabel_uapi.h"

#define PLABEL_OTEL_SYMBOL	"otel_thread_ctx_v1"
#define PLABEL_CL_SYMBOL	"custom_labels_current_set"
#define PLABEL_CL_VERSION_SYMBOL "custom_labels_abi_version"

/* The most keys an OTel key map has (the record's key index is a byte). */
#define PLABEL_OTEL_MAX_KEYS	256

/* Where a process keeps its thread-local pointer: the ioctl's terms. */
struct plabel_tls_loc {
	uint32_t format;	/* enum plabel_tlsctx_format */
	uint32_t flags;		/* PLABEL_TLSCTX_DTV */
	int64_t offset;		/* from the thread pointer, or in the block */
	uint64_t module;	/* with PLABEL_TLSCTX_DTV */
};

/*
 * Find the thread-local pointer of process pid: the first of its main
 * executable and its loaded libraries (in /proc/PID/maps order) that
 * defines otel_thread_ctx_v1 or custom_labels_current_set in .dynsym
 * (custom-labels only with custom_labels_abi_version 1), libplabel
 * included (its records add the span of plabel_set_trace()). The main
 * executable's variable is at a fixed offset from the thread pointer; a
 * library's is found through the relocation its code uses
 * (R_X86_64_TPOFF64, R_X86_64_TLSDESC or R_X86_64_DTPMOD64), whose GOT
 * entry is read from the process's memory. 0 with *loc filled, -ENOENT
 * when the process publishes neither, -EAGAIN when the dynamic linker has
 * not yet relocated the library (ask again later), or another negative
 * errno (-ESRCH: gone, -EACCES: not readable).
 */
int plabel_tls_locate(pid_t pid, struct plabel_tls_loc *loc);

/*
 * The files a look went through, by path (plabel_tls_path_hash()), for a
 * reader that looks again only when a process maps another one.
 */
#define PLABEL_TLS_SEEN_MAX	64
struct plabel_tls_seen {
	uint64_t hash[PLABEL_TLS_SEEN_MAX];
	unsigned int n;
};

/* plabel_tls_locate(), telling which files it looked at into *seen. */
int plabel_tls_locate_seen(pid_t pid, struct plabel_tls_loc *loc,
			   struct plabel_tls_seen *seen);
/*
 * Whether each of the n NUL-separated paths (absolute, as process pid
 * sees them) is a file that defines none of the symbols: 1, reading into
 * the cache a file not in it; 0 when one does, or cannot be read. For a
 * look at a process whose mapped files are known from the kernel's MMAP
 * records, without /proc/PID/maps.
 */
int plabel_tls_known_none(pid_t pid, const char *paths, unsigned int n);
/* FNV-1a of a mapping's path (up to len bytes or a NUL). */
uint64_t plabel_tls_path_hash(const char *path, size_t len);

/*
 * Read ahead what a look needs of the C library and the dynamic linker
 * (the reader's own), or of the program name (found through PATH as
 * execvp() finds it): a look at a process mapping them later reads none
 * of them. Before a command starts, so that its look is short.
 */
void plabel_tls_prewarm_self(void);
void plabel_tls_prewarm_cmd(const char *name);

/*
 * The address of the pointer in the thread whose thread pointer (FS
 * base) is tp, as the module finds it (reading the DTV through mem_fd, an
 * open /proc/PID/mem). 0 when the thread has no such block allocated.
 */
uint64_t plabel_tls_addr(int mem_fd, const struct plabel_tls_loc *loc,
			 uint64_t tp);

/* An OTel key map: key index -> attribute name. */
struct plabel_otel_keymap {
	uint64_t published_at_ns;	/* of the context it was read from */
	int schema_ok;		/* threadlocal.schema_version is tls_v1 */
	uint32_t nkeys;
	char *keys[PLABEL_OTEL_MAX_KEYS];	/* malloc()ed, NUL-terminated */
};

/*
 * Read the OTEP 4719 process context of pid (the mapping named OTEL_CTX,
 * by the reading protocol: header, payload, header again) and its
 * threadlocal.* attributes into km (released first). 0, -ENOENT (no
 * context published), -EAGAIN (being updated, or changed under the read,
 * too often), -EBADMSG (not a valid context), or another negative errno.
 */
int plabel_otel_keymap_read(pid_t pid, struct plabel_otel_keymap *km);
void plabel_otel_keymap_release(struct plabel_otel_keymap *km);

/* One label of a decoded context; the strings are NUL-terminated. */
struct plabel_tctx_label {
	char key[PLABEL_MAX_KEY_LEN + 1];
	char value[PLABEL_TLSCTX_BYTES + 1];
};

/* What decoding left out, for the profile's comments. */
struct plabel_tctx_stats {
	uint64_t contexts;	/* records that carried a context */
	uint64_t unknown_keys;	/* OTel entries whose key index is not mapped */
	uint64_t bad_labels;	/* control bytes in key or value, empty keys */
	uint64_t partial;	/* contexts the module could not copy whole */
};

/*
 * The labels of a context a record carries (format and len from its
 * struct plabel_rec_tlsctx, data its bytes): for OTEP 4947, trace_id and
 * span_id in lowercase hex when a span is set, then each attribute by its
 * key-map name (km; NULL or a key map without the schema: attributes
 * left out), the last entry of a key index winning; for custom-labels v1,
 * each label, the first of a key winning. Keys and values holding
 * control bytes, and empty keys, are left out. At most cap labels go to
 * out; returns how many, and counts what it left out in st (may be NULL).
 */
size_t plabel_tctx_labels(uint32_t format, uint32_t flags, const uint8_t *data,
			  uint32_t len, const struct plabel_otel_keymap *km,
			  struct plabel_tctx_label *out, size_t cap,
			  struct plabel_tctx_stats *st);

/*
 * The reader's bookkeeping: the processes of a session to look at, their
 * registration and (OTel) key maps. The reading thread marks processes
 * (plabel_tctx_watch(), plabel_tctx_scan()); a thread of its own looks at
 * them (locates and registers their pointers, tries again later those
 * whose libraries are not relocated yet, reads the OTel key maps and reads
 * them again when their publication changed); the collecting thread asks
 * for key maps (plabel_tctx_keymap()). No caller waits for a file.
 */
struct plabel_tctx;

/*
 * fd: the session's file, for PLABEL_IOC_TLSCTX_SET (-1: locate only).
 * NULL: no memory or no thread.
 */
struct plabel_tctx *plabel_tctx_new(int fd);
/* Stops its thread (after the look it may be taking) and frees it all. */
void plabel_tctx_free(struct plabel_tctx *t);

/* Process pid is worth a look now (a target, a command just started). */
void plabel_tctx_watch(struct plabel_tctx *t, uint32_t pid);
/*
 * Process pid, a child of the caller, is about to exec: worth a look once
 * its program is loaded (the first one 20 ms from now).
 */
void plabel_tctx_watch_exec(struct plabel_tctx *t, uint32_t pid);

/*
 * The records of one read(): EXEC records and new processes (THREAD
 * records with PLABEL_THREAD_PROCESS) and MMAP records of processes not
 * registered yet mark their process for a look. Only the record headers
 * and those records are read: a few instructions a record.
 */
void plabel_tctx_scan(struct plabel_tctx *t, const void *buf, size_t len);

/*
 * A copy of pid's key map as last read (into km, released first): 0, or
 * -ENOENT when none was read.
 */
int plabel_tctx_keymap(struct plabel_tctx *t, uint32_t pid,
		       struct plabel_otel_keymap *km);

/* Processes registered with the module, and those that failed. */
void plabel_tctx_counts(struct plabel_tctx *t, uint32_t *registered,
			uint32_t *failed);

#endif /* PLABEL_TOOLS_TLSCTX_H */
