// SPDX-License-Identifier: GPL-2.0
/*
 * The reader's side of thread contexts other programs publish (tlsctx.h):
 * where a process keeps its thread-local pointer, its OTel key map, and the
 * labels a record's context stands for.
 *
 * Locating (plabel_tls_locate()): /proc/PID/maps lists the process's
 * files; each ELF file mapped from offset 0 is looked at once (the answer
 * kept by device, inode, size and time) for the symbols in .dynsym and
 * the relocation through which its code reaches the variable. The main
 * executable's TLS block sits right below the thread pointer (x86-64's
 * TLS variant II: module 1 at the offset its size rounded up to its
 * alignment, as the C libraries lay it out); a library's offset is what
 * the dynamic linker wrote into the GOT entry of that relocation, read
 * through /proc/PID/mem.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "table.h"
#include "tlsctx.h"

#ifndef R_X86_64_TLSDESC
#define R_X86_64_TLSDESC	36
#endif

/* A process's files looked at, at most (the rest are not). */
#define TLS_MAPS_MAX		4096
/* The largest file read (libelf reads it whole into memory). */
#define TLS_FILE_MAX		(512ULL << 20)
/* Symbols of one .dynsym read, at most. */
#define TLS_SYMS_MAX		(1U << 22)
/* Files whose answers are kept, at most: past it, they start again. */
#define TLS_ELFS_MAX		4096
/* Entries of one .gnu.hash chain read, at most (real ones hold a few). */
#define TLS_CHAIN_MAX		1024
/* The largest process context payload read. */
#define OTEL_PAYLOAD_MAX	(1U << 20)
/* Tries of the process context's reading protocol in one go. */
#define OTEL_READ_TRIES		8

enum tls_kind {
	TLS_NONE = 0,
	TLS_OTEL = PLABEL_TLSCTX_OTEL_V1,
	TLS_CL = PLABEL_TLSCTX_CUSTOM_LABELS_V1,
};

/* What one ELF file has to say; kept by file identity. */
struct tls_elf {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	int kind;		/* enum tls_kind */
	int libplabel;		/* defines plabel_switch: libplabel itself */
	uint64_t sym_value;	/* the variable's offset in the TLS block */
	uint64_t tls_memsz, tls_align, tls_vaddr;
	uint64_t load_vaddr;	/* the PT_LOAD at file offset 0 */
	uint32_t rel_type;	/* 0: none found */
	uint64_t rel_offset;	/* its GOT entry (vaddr) */
	uint64_t dtpoff_offset;	/* R_X86_64_DTPOFF64's entry, with DTPMOD */
	int have_dtpoff;
};

static pthread_mutex_t tls_elf_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tls_elf *tls_elfs;
static size_t tls_nelfs, tls_elfs_cap;

static int tls_sym_is(Elf *e, size_t strndx, const GElf_Sym *s,
		      const char *name)
{
	const char *n = elf_strptr(e, strndx, s->st_name);

	return n && !strcmp(n, name);
}

/*
 * Read len bytes at addr of fd (a file, or a process's memory): 0, or a
 * negative errno when they are not all there.
 */
static int tls_mem_read(int fd, uint64_t addr, void *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len, (off_t)addr);

	if (n == (ssize_t)len)
		return 0;
	return n < 0 ? -errno : -EIO;
}

/*
 * The sections a symbol is looked up through: .gnu.hash, the .dynsym it
 * indexes and that one's string table, as the file has them.
 */
struct tls_gnu_hash {
	int fd;
	GElf_Shdr hash, sym, str;
};

/*
 * Whether symbol i of the .dynsym is name, defined; its entry in *s.
 */
static int tls_gnu_sym_is(const struct tls_gnu_hash *g, uint32_t i,
			  const char *name, GElf_Sym *s)
{
	size_t len = strlen(name) + 1;
	Elf64_Sym sym;
	char buf[64];

	if (len > sizeof(buf) || (uint64_t)i >= g->sym.sh_size / sizeof(sym) ||
	    tls_mem_read(g->fd, g->sym.sh_offset + (uint64_t)i * sizeof(sym),
			 &sym, sizeof(sym)) ||
	    sym.st_shndx == SHN_UNDEF || sym.st_name >= g->str.sh_size ||
	    g->str.sh_size - sym.st_name < len ||
	    tls_mem_read(g->fd, g->str.sh_offset + sym.st_name, buf, len) ||
	    memcmp(buf, name, len))
		return 0;
	s->st_name = sym.st_name;
	s->st_info = sym.st_info;
	s->st_other = sym.st_other;
	s->st_shndx = sym.st_shndx;
	s->st_value = sym.st_value;
	s->st_size = sym.st_size;
	return 1;
}

/*
 * The .dynsym index of the defined symbol name, through the GNU hash
 * table (its bloom filter turns most names away in one read), with its
 * entry in *s; 0 when the file does not define it. A few small reads
 * instead of reading and comparing every symbol: the C library has some
 * three thousand, and this runs beside the program just started.
 */
static uint32_t tls_gnu_lookup(const struct tls_gnu_hash *g, const char *name,
			       GElf_Sym *s)
{
	uint32_t h = 5381, hdr[4], nbuckets, symoffset, nbloom, shift, i, hv, n;
	uint64_t size = g->hash.sh_size, off = g->hash.sh_offset, word, mask;
	uint64_t buckets, chains, nchains;
	const unsigned char *c;

	for (c = (const unsigned char *)name; *c; c++)
		h = h * 33 + *c;
	if (size < sizeof(hdr) || tls_mem_read(g->fd, off, hdr, sizeof(hdr)))
		return 0;
	nbuckets = hdr[0];
	symoffset = hdr[1];
	nbloom = hdr[2];
	shift = hdr[3];
	buckets = sizeof(hdr) + (uint64_t)nbloom * 8;
	chains = buckets + (uint64_t)nbuckets * 4;
	if (!nbuckets || !nbloom || chains > size)
		return 0;
	nchains = (size - chains) / 4;
	if (tls_mem_read(g->fd, off + sizeof(hdr) +
			 (uint64_t)(h / 64 % nbloom) * 8, &word, 8))
		return 0;
	mask = (1ULL << (h % 64)) | (1ULL << ((h >> (shift % 32)) % 64));
	if ((word & mask) != mask)
		return 0;
	if (tls_mem_read(g->fd, off + buckets + (uint64_t)(h % nbuckets) * 4,
			 &i, 4) || i < symoffset)
		return 0;
	for (n = 0; (uint64_t)(i - symoffset) < nchains && n < TLS_CHAIN_MAX;
	     i++, n++) {
		if (tls_mem_read(g->fd,
				 off + chains + (uint64_t)(i - symoffset) * 4,
				 &hv, 4))
			return 0;
		if ((hv | 1) == (h | 1) && tls_gnu_sym_is(g, i, name, s))
			return i;
		if (hv & 1)
			return 0;
	}
	return 0;
}

/* The 4-byte value of the defined object s, from the file. */
static int tls_sym_u32(Elf *e, const GElf_Sym *s, uint32_t *v)
{
	Elf_Scn *scn = elf_getscn(e, s->st_shndx);
	GElf_Shdr sh;
	Elf_Data *d;

	if (!scn || !gelf_getshdr(scn, &sh) || s->st_size != 4)
		return -1;
	if (sh.sh_type == SHT_NOBITS) {
		*v = 0;
		return 0;
	}
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || s->st_value < sh.sh_addr ||
	    s->st_value - sh.sh_addr > d->d_size ||
	    d->d_size - (s->st_value - sh.sh_addr) < 4)
		return -1;
	memcpy(v, (const char *)d->d_buf + (s->st_value - sh.sh_addr), 4);
	return 0;
}

/*
 * The relocation of .dynsym entry sym (or a local one with sym's value as
 * addend) through which the code reaches the variable.
 */
static void tls_find_rel(Elf *e, size_t dynsym_ndx, size_t sym,
			 struct tls_elf *x)
{
	Elf_Scn *scn = NULL;
	int best = 0;

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t i, n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA ||
		    sh.sh_link != dynsym_ndx || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		n = d->d_size / sh.sh_entsize;
		for (i = 0; i < n && i < TLS_SYMS_MAX; i++) {
			GElf_Rela r;
			uint32_t type;
			size_t rs;
			int rank;

			if (!gelf_getrela(d, (int)i, &r))
				break;
			type = GELF_R_TYPE(r.r_info);
			rs = GELF_R_SYM(r.r_info);
			if (rs != sym && !(rs == 0 &&
			    (uint64_t)r.r_addend == x->sym_value))
				continue;
			/* the simplest to read first */
			rank = type == R_X86_64_TPOFF64 ? 3 :
			       type == R_X86_64_TLSDESC ? 2 :
			       type == R_X86_64_DTPMOD64 && rs ? 1 : 0;
			if (type == R_X86_64_DTPOFF64 && rs) {
				x->dtpoff_offset = r.r_offset;
				x->have_dtpoff = 1;
			}
			if (rank > best) {
				best = rank;
				x->rel_type = type;
				x->rel_offset = r.r_offset;
			}
		}
	}
}

/* Look at the ELF file open at fd: symbols, TLS segment, relocation. */
static void tls_elf_read(int fd, struct tls_elf *x)
{
	size_t dynsym_ndx = 0, strndx = 0, hash_link = 0, phnum, i, n;
	size_t otel = 0, cl = 0, clver = 0;
	struct tls_gnu_hash g = { 0 };
	int hashed = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	Elf_Data *d = NULL;
	GElf_Ehdr eh;
	Elf *e;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return;
	/*
	 * Read, not mapped: the file may belong to the user of the process
	 * looked at, who could cut it short under a mapping (SIGBUS).
	 */
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return;
	if (elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64 ||
	    !gelf_getehdr(e, &eh) || eh.e_machine != EM_X86_64 ||
	    elf_getphdrnum(e, &phnum))
		goto out;
	for (i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph))
			goto out;
		if (ph.p_type == PT_TLS) {
			x->tls_memsz = ph.p_memsz;
			x->tls_align = ph.p_align ? ph.p_align : 1;
			x->tls_vaddr = ph.p_vaddr;
		} else if (ph.p_type == PT_LOAD && ph.p_offset == 0) {
			x->load_vaddr = ph.p_vaddr;
		}
	}
	if (!x->tls_memsz)
		goto out;	/* no TLS, no variable */
	while ((scn = elf_nextscn(e, scn))) {
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNSYM) {
			dynsym_ndx = elf_ndxscn(scn);
			strndx = sh.sh_link;
			g.sym = sh;
		} else if (gelf_getshdr(scn, &sh) &&
			   sh.sh_type == SHT_GNU_HASH) {
			hash_link = sh.sh_link;
			g.hash = sh;
		}
	}
	if (!dynsym_ndx)
		goto out;
	/* through .gnu.hash where the file has one for its .dynsym */
	scn = elf_getscn(e, strndx);
	if (hash_link == dynsym_ndx && g.sym.sh_entsize == sizeof(Elf64_Sym) &&
	    scn && gelf_getshdr(scn, &g.str) &&
	    g.str.sh_type == SHT_STRTAB) {
		GElf_Sym s = { 0 };

		hashed = 1;
		g.fd = fd;
		otel = tls_gnu_lookup(&g, PLABEL_OTEL_SYMBOL, &s);
		if (otel && GELF_ST_TYPE(s.st_info) != STT_TLS)
			otel = 0;
		cl = tls_gnu_lookup(&g, PLABEL_CL_SYMBOL, &s);
		if (cl && GELF_ST_TYPE(s.st_info) != STT_TLS)
			cl = 0;
		clver = tls_gnu_lookup(&g, PLABEL_CL_VERSION_SYMBOL, &s);
		x->libplabel = tls_gnu_lookup(&g, "plabel_switch", &s) &&
			       GELF_ST_TYPE(s.st_info) == STT_FUNC;
		if (!otel && !cl)
			goto out;
	}
	scn = elf_getscn(e, dynsym_ndx);
	d = scn ? elf_getdata(scn, NULL) : NULL;
	if (!d || !g.sym.sh_entsize)
		goto out;
	n = d->d_size / g.sym.sh_entsize;
	/* without .gnu.hash: every symbol compared */
	for (i = 1; !hashed && i < n && i < TLS_SYMS_MAX; i++) {
		GElf_Sym s;

		if (!gelf_getsym(d, (int)i, &s))
			break;
		if (s.st_shndx == SHN_UNDEF)
			continue;
		if (GELF_ST_TYPE(s.st_info) == STT_TLS) {
			if (tls_sym_is(e, strndx, &s, PLABEL_OTEL_SYMBOL))
				otel = i;
			else if (tls_sym_is(e, strndx, &s, PLABEL_CL_SYMBOL))
				cl = i;
		} else if (GELF_ST_TYPE(s.st_info) == STT_FUNC) {
			if (tls_sym_is(e, strndx, &s, "plabel_switch"))
				x->libplabel = 1;
		} else if (tls_sym_is(e, strndx, &s,
				      PLABEL_CL_VERSION_SYMBOL)) {
			clver = i;
		}
	}
	/* custom-labels: only the ABI version this reads */
	if (!otel && cl) {
		GElf_Sym s;
		uint32_t v;

		if (!clver || !gelf_getsym(d, (int)clver, &s) ||
		    tls_sym_u32(e, &s, &v) || v != 1)
			cl = 0;
	}
	if (otel || cl) {
		GElf_Sym s;

		if (!gelf_getsym(d, (int)(otel ? otel : cl), &s))
			goto out;
		x->kind = otel ? TLS_OTEL : TLS_CL;
		x->sym_value = s.st_value;
		tls_find_rel(e, dynsym_ndx, otel ? otel : cl, x);
	}
out:
	elf_end(e);
}

/*
 * The answer for the regular file at path, st its stat() (kept: a file
 * is opened and read once).
 */
static int tls_elf_get(const char *path, const struct stat *want,
		       struct tls_elf *out)
{
	struct tls_elf x;
	struct stat st = *want;
	size_t i;
	int fd;

	pthread_mutex_lock(&tls_elf_lock);
	for (i = 0; i < tls_nelfs; i++) {
		struct tls_elf *k = &tls_elfs[i];

		if (k->dev == st.st_dev && k->ino == st.st_ino &&
		    k->size == st.st_size &&
		    k->mtime.tv_sec == st.st_mtim.tv_sec &&
		    k->mtime.tv_nsec == st.st_mtim.tv_nsec) {
			*out = *k;
			pthread_mutex_unlock(&tls_elf_lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&tls_elf_lock);

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -ENOENT;
	/* the same file still: else it is for another time */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_dev != want->st_dev || st.st_ino != want->st_ino) {
		close(fd);
		return -ENOENT;
	}
	memset(&x, 0, sizeof(x));
	x.dev = st.st_dev;
	x.ino = st.st_ino;
	x.size = st.st_size;
	x.mtime = st.st_mtim;
	tls_elf_read(fd, &x);
	close(fd);
	*out = x;
	pthread_mutex_lock(&tls_elf_lock);
	if (tls_nelfs >= TLS_ELFS_MAX)
		tls_nelfs = 0;
	if (!plabel_grow(&tls_elfs, &tls_elfs_cap, tls_nelfs, sizeof(x)))
		tls_elfs[tls_nelfs++] = x;
	pthread_mutex_unlock(&tls_elf_lock);
	return 0;
}

/* glibc's (and musl's) offset of module 1's block below the thread pointer */
static uint64_t tls_exe_block(const struct tls_elf *x)
{
	uint64_t a = x->tls_align, first = -x->tls_vaddr & (a - 1);

	if (a & (a - 1))
		return 0;	/* not a power of two: not an ELF we know */
	return ((x->tls_memsz - first + a - 1) & ~(a - 1)) + first;
}

/* Where the library's variable is, from its relocated GOT entry. */
static int tls_lib_loc(int mem, const struct tls_elf *x, uint64_t bias,
		       struct plabel_tls_loc *loc)
{
	uint64_t v[2];
	int ret;

	switch (x->rel_type) {
	case R_X86_64_TPOFF64:
		ret = tls_mem_read(mem, bias + x->rel_offset, v, 8);
		if (ret)
			return ret;
		if (!v[0])
			return -EAGAIN;	/* not relocated yet */
		loc->offset = (int64_t)v[0];
		return 0;
	case R_X86_64_TLSDESC:
		/* {resolver, argument}: a static offset, or {module, offset} */
		ret = tls_mem_read(mem, bias + x->rel_offset, v, 16);
		if (ret)
			return ret;
		if (!v[0])
			return -EAGAIN;
		if ((int64_t)v[1] < 0) {
			loc->offset = (int64_t)v[1];
			return 0;
		}
		ret = tls_mem_read(mem, v[1], v, 16);
		if (ret)
			return ret;
		loc->flags |= PLABEL_TLSCTX_DTV;
		loc->module = v[0];
		loc->offset = (int64_t)v[1];
		return 0;
	case R_X86_64_DTPMOD64:
		ret = tls_mem_read(mem, bias + x->rel_offset, v, 8);
		if (ret)
			return ret;
		if (!v[0])
			return -EAGAIN;
		loc->flags |= PLABEL_TLSCTX_DTV;
		loc->module = v[0];
		loc->offset = (int64_t)x->sym_value;
		if (x->have_dtpoff) {
			ret = tls_mem_read(mem, bias + x->dtpoff_offset, &v[1],
					   8);
			if (ret)
				return ret;
			loc->offset = (int64_t)v[1];
		}
		return 0;
	}
	return -ENOENT;	/* no relocation reaches it: nothing to read */
}

static int tls_loc_sane(const struct plabel_tls_loc *loc)
{
	if (loc->flags & PLABEL_TLSCTX_DTV)
		return loc->module && loc->module <= PLABEL_TLSCTX_MODULE_MAX &&
		       loc->offset >= 0 &&
		       loc->offset < PLABEL_TLSCTX_OFFSET_MAX;
	return loc->offset && loc->offset > -PLABEL_TLSCTX_OFFSET_MAX &&
	       loc->offset < PLABEL_TLSCTX_OFFSET_MAX;
}

/* One line of /proc/PID/maps. */
struct tls_map {
	uint64_t start, offset, ino;
	size_t path_len;
	char path[4096];
};

/*
 * A number of the given base at *p, then end (or, for a space, the line's
 * end): its value, and *p past both; -1 with *p as it was when there is
 * none.
 */
static int tls_map_field(const char **p, unsigned int base, char end,
			 uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;
	unsigned int d;

	for (;; s++) {
		if (*s >= '0' && *s <= '9')
			d = (unsigned int)(*s - '0');
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = (unsigned int)(*s - 'a') + 10;
		else
			break;
		if (__builtin_mul_overflow(x, base, &x) ||
		    __builtin_add_overflow(x, d, &x))
			return -1;
	}
	if (s == *p || (*s != end && !(end == ' ' && *s == '\n')))
		return -1;
	*v = x;
	*p = s + 1;
	return 0;
}

/* *p past the next space; -1 when the line has none. */
static int tls_map_skip(const char **p)
{
	const char *s = strchr(*p, ' ');

	if (!s)
		return -1;
	*p = s + 1;
	return 0;
}

/*
 * One line of /proc/PID/maps: "start-end perms offset major:minor inode
 * path", parsed by hand (sscanf() took most of the instructions of a
 * look), and only as far as it needs to be. 0 for a file mapped from
 * offset 0, the one a look reads; 1 for any other line, whose path is not
 * copied; -1 for one it cannot read.
 */
static int tls_parse_map(const char *line, struct tls_map *m)
{
	const char *p = line;
	size_t len;

	/* start, then past the end and the permissions */
	if (tls_map_field(&p, 16, '-', &m->start) || tls_map_skip(&p) ||
	    tls_map_skip(&p) || tls_map_field(&p, 16, ' ', &m->offset))
		return -1;
	if (m->offset)
		return 1;
	/* past the device */
	if (tls_map_skip(&p) || tls_map_field(&p, 10, ' ', &m->ino))
		return -1;
	if (!m->ino)
		return 1;
	p += strspn(p, " ");
	len = strcspn(p, "\n");
	if (*p != '/' || len >= sizeof(m->path))
		return 1;
	memcpy(m->path, p, len);
	m->path[len] = '\0';
	m->path_len = len;
	return 0;
}

/* FNV-1a of a mapping's path, as plabel_tls_seen holds them. */
uint64_t plabel_tls_path_hash(const char *path, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < len && path[i]; i++)
		h = (h ^ (uint8_t)path[i]) * 0x100000001b3ULL;
	return h;
}

/* The reader's own executable, which a child shows until its exec. */
static pthread_once_t tls_self_once = PTHREAD_ONCE_INIT;
static struct stat tls_self;
static int tls_have_self;

static void tls_self_init(void)
{
	tls_have_self = !stat("/proc/self/exe", &tls_self);
}

/* "/proc/PID/" and rest into buf (of size cap): its length, 0 if too long. */
static size_t tls_proc_path(char *buf, size_t cap, pid_t pid,
			    const char *rest, size_t rest_len)
{
	char num[16];
	size_t n = 0, len;
	unsigned int v = (unsigned int)pid;

	do
		num[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < sizeof(num));
	len = 6 + n + 1 + rest_len;
	if (len >= cap)
		return 0;
	memcpy(buf, "/proc/", 6);
	for (len = 6; n; )
		buf[len++] = num[--n];
	buf[len++] = '/';
	memcpy(buf + len, rest, rest_len);
	len += rest_len;
	buf[len] = '\0';
	return len;
}

/* plabel_tls_locate(); seen, when not NULL, gets the files looked at. */
static int tls_look(pid_t pid, struct plabel_tls_loc *loc,
		    struct plabel_tls_seen *seen)
{
	struct stat exe;
	char path[64], *line = NULL;
	size_t cap = 0, files = 0, len;
	int mem = -1, ret = -ENOENT, have_exe;
	struct tls_map *m;
	FILE *f;

	if (seen)
		seen->n = 0;
	m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	tls_proc_path(path, sizeof(path), pid, "exe", 3);
	have_exe = !stat(path, &exe);
	/* a child of this reader that has not exec'ed its command yet */
	pthread_once(&tls_self_once, tls_self_init);
	if (have_exe && pid != getpid() && tls_have_self &&
	    tls_self.st_dev == exe.st_dev && tls_self.st_ino == exe.st_ino) {
		ret = -EAGAIN;
		goto out_free;
	}
	tls_proc_path(path, sizeof(path), pid, "maps", 4);
	f = fopen(path, "re");
	if (!f) {
		ret = errno == ENOENT ? -ESRCH : -errno;
		goto out_free;
	}
	/* proc's block size is 1 KiB: a read() for every few lines */
	setvbuf(f, NULL, _IOFBF, 16384);
	while (getline(&line, &cap, f) > 0 && files < TLS_MAPS_MAX) {
		struct tls_elf x;
		char file[4200];
		struct stat st;
		int is_exe;

		if (tls_parse_map(line, m))
			continue;
		files++;
		if (seen && seen->n < PLABEL_TLS_SEEN_MAX)
			seen->hash[seen->n++] =
				plabel_tls_path_hash(m->path, m->path_len);
		/*
		 * The file as the process sees it, if it is the same one; a
		 * regular file only (opening a device may do something).
		 */
		len = tls_proc_path(file, sizeof(file), pid, "root", 4);
		if (!len || len + m->path_len >= sizeof(file))
			continue;
		memcpy(file + len, m->path, m->path_len + 1);
		if (stat(file, &st) || !S_ISREG(st.st_mode) ||
		    st.st_ino != m->ino ||
		    (uint64_t)st.st_size > TLS_FILE_MAX ||
		    tls_elf_get(file, &st, &x))
			continue;
		if (x.kind == TLS_NONE)
			continue;
		is_exe = have_exe && exe.st_dev == st.st_dev &&
			 exe.st_ino == st.st_ino;
		memset(loc, 0, sizeof(*loc));
		loc->format = (uint32_t)x.kind;
		/* libplabel's attributes are its label sets already: the span */
		if (x.libplabel && x.kind == TLS_OTEL)
			loc->flags = PLABEL_TLSCTX_HEAD;
		if (is_exe) {
			uint64_t block = tls_exe_block(&x);

			if (!block || x.sym_value >= block)
				break;
			loc->offset = (int64_t)x.sym_value - (int64_t)block;
		} else {
			if (mem < 0) {
				tls_proc_path(path, sizeof(path), pid, "mem",
					      3);
				mem = open(path, O_RDONLY | O_CLOEXEC);
				if (mem < 0) {
					ret = -errno;
					break;
				}
			}
			ret = tls_lib_loc(mem, &x,
					  m->start - (x.load_vaddr & ~4095ULL),
					  loc);
			if (ret)
				break;
		}
		ret = tls_loc_sane(loc) ? 0 : -ENOENT;
		break;
	}
	free(line);
	fclose(f);
	if (mem >= 0)
		close(mem);
out_free:
	free(m);
	return ret;
}

int plabel_tls_locate(pid_t pid, struct plabel_tls_loc *loc)
{
	return tls_look(pid, loc, NULL);
}

int plabel_tls_locate_seen(pid_t pid, struct plabel_tls_loc *loc,
			   struct plabel_tls_seen *seen)
{
	return tls_look(pid, loc, seen);
}

/* Whether path is a regular file, then read it into the cache. */
static int tls_prewarm_path(const char *path)
{
	struct tls_elf x;
	struct stat st;

	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return 0;
	if ((uint64_t)st.st_size <= TLS_FILE_MAX)
		tls_elf_get(path, &st, &x);
	return 1;
}

int plabel_tls_known_none(pid_t pid, const char *paths, unsigned int n)
{
	char file[4200];
	struct tls_elf x;
	struct stat st;
	size_t len, plen;

	len = tls_proc_path(file, sizeof(file), pid, "root", 4);
	if (!len)
		return 0;
	for (; n; n--, paths += plen + 1) {
		plen = strlen(paths);
		if (paths[0] != '/' || len + plen >= sizeof(file))
			return 0;
		memcpy(file + len, paths, plen + 1);
		if (stat(file, &st) || !S_ISREG(st.st_mode) ||
		    (uint64_t)st.st_size > TLS_FILE_MAX ||
		    tls_elf_get(file, &st, &x) || x.kind != TLS_NONE)
			return 0;
	}
	return 1;
}

void plabel_tls_prewarm_self(void)
{
	unsigned long base = getauxval(AT_BASE);
	Dl_info info;

	/* the C library and the dynamic linker, which every program maps */
	if (dladdr((void *)(uintptr_t)getpid, &info) && info.dli_fname &&
	    info.dli_fname[0] == '/')
		tls_prewarm_path(info.dli_fname);
	if (base && dladdr((void *)base, &info) && info.dli_fname &&
	    info.dli_fname[0] == '/')
		tls_prewarm_path(info.dli_fname);
}

void plabel_tls_prewarm_cmd(const char *name)
{
	const char *dirs = getenv("PATH"), *d, *e;
	char path[4096];
	size_t dl, nl = strlen(name);

	if (strchr(name, '/')) {
		if (!access(name, X_OK))
			tls_prewarm_path(name);
		return;
	}
	/* the search execvp() makes, with its default */
	for (d = dirs ? dirs : "/bin:/usr/bin"; ; d = e + 1) {
		e = strchrnul(d, ':');
		dl = (size_t)(e - d);
		/* an empty entry is the current directory, "." */
		if ((dl ? dl : 1) + 1 + nl < sizeof(path)) {
			memcpy(path, d, dl);
			if (!dl)
				path[dl++] = '.';
			path[dl] = '/';
			memcpy(path + dl + 1, name, nl + 1);
			if (!access(path, X_OK) && tls_prewarm_path(path))
				return;
		}
		if (!*e)
			return;
	}
}

uint64_t plabel_tls_addr(int mem_fd, const struct plabel_tls_loc *loc,
			 uint64_t tp)
{
	uint64_t dtv, n, block;

	if (!(loc->flags & PLABEL_TLSCTX_DTV))
		return tp + (uint64_t)loc->offset;
	if (tls_mem_read(mem_fd, tp + 8, &dtv, 8) || dtv < 16 ||
	    tls_mem_read(mem_fd, dtv - 16, &n, 8) || loc->module > n ||
	    tls_mem_read(mem_fd, dtv + 16 * loc->module, &block, 8) ||
	    !block || block == ~0ULL)
		return 0;
	return block + (uint64_t)loc->offset;
}

/* ---- The OTel process context (OTEP 4719) ---- */

void plabel_otel_keymap_release(struct plabel_otel_keymap *km)
{
	uint32_t i;

	for (i = 0; i < km->nkeys; i++)
		free(km->keys[i]);
	memset(km, 0, sizeof(*km));
}

/* A protobuf reader over [p, end): no read beyond end. */
struct pb {
	const uint8_t *p, *end;
};

static int pb_varint(struct pb *b, uint64_t *v)
{
	unsigned int shift = 0;

	*v = 0;
	while (b->p < b->end && shift < 64) {
		uint8_t c = *b->p++;

		*v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return 0;
		shift += 7;
	}
	return -1;
}

/*
 * The next field: its number, and for a length-delimited one its body in
 * sub. 1 at the end, 0 for a field, -1 for a malformed message.
 */
static int pb_field(struct pb *b, uint32_t *field, struct pb *sub)
{
	uint64_t key, v;

	if (b->p == b->end)
		return 1;
	if (pb_varint(b, &key) || !(key >> 3) || key >> 3 > UINT32_MAX)
		return -1;
	*field = (uint32_t)(key >> 3);
	sub->p = sub->end = NULL;
	switch (key & 7) {
	case 0:
		return pb_varint(b, &v);
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
		if (pb_varint(b, &v) || v > (uint64_t)(b->end - b->p))
			return -1;
		sub->p = b->p;
		sub->end = b->p + v;
		b->p += v;
		return 0;
	}
	return -1;
}

/* A string field's body fits and holds no control bytes. */
static int pb_good_str(const struct pb *s, size_t max)
{
	const uint8_t *q;

	if ((size_t)(s->end - s->p) > max)
		return 0;
	for (q = s->p; q < s->end; q++)
		if (*q < 0x20 || *q == 0x7f)
			return 0;
	return 1;
}

/* AnyValue's string_value (field 1), or -1. */
static int pb_any_string(struct pb v, struct pb *str)
{
	struct pb sub;
	uint32_t f;
	int r, have = 0;

	while (!(r = pb_field(&v, &f, &sub)))
		if (f == 1 && sub.p) {
			*str = sub;
			have = 1;
		}
	return r < 0 || !have ? -1 : 0;
}

static int otel_keyvalue(struct pb kv, struct plabel_otel_keymap *km)
{
	struct pb sub, key = { 0 }, val = { 0 }, arr, av, s;
	uint32_t f;
	int r, have_key = 0, have_val = 0;

	while (!(r = pb_field(&kv, &f, &sub))) {
		if (f == 1 && sub.p) {
			key = sub;
			have_key = 1;
		} else if (f == 2 && sub.p) {
			val = sub;
			have_val = 1;
		}
	}
	if (r < 0 || !have_key || !have_val)
		return r < 0 ? -1 : 0;
#define KEY_IS(lit) ((size_t)(key.end - key.p) == sizeof(lit) - 1 && \
		     !memcmp(key.p, lit, sizeof(lit) - 1))
	if (KEY_IS("threadlocal.schema_version")) {
		if (pb_any_string(val, &s))
			return 0;
		km->schema_ok = ((size_t)(s.end - s.p) == 6 &&
				 !memcmp(s.p, "tls_v1", 6)) ||
				((size_t)(s.end - s.p) == 14 &&
				 !memcmp(s.p, "tlsdesc_v1_dev", 14));
		return 0;
	}
	if (!KEY_IS("threadlocal.attribute_key_map"))
		return 0;
#undef KEY_IS
	/* AnyValue.array_value (5): ArrayValue.values (1): AnyValue */
	while (!(r = pb_field(&val, &f, &arr))) {
		if (f != 5 || !arr.p)
			continue;
		while (!(r = pb_field(&arr, &f, &av))) {
			char *k = NULL;

			if (f != 1 || !av.p)
				continue;
			if (km->nkeys >= PLABEL_OTEL_MAX_KEYS)
				return 0;	/* no record names more */
			/* a key not fit for a label stays unnamed: NULL */
			if (!pb_any_string(av, &s) && s.end > s.p &&
			    pb_good_str(&s, PLABEL_MAX_KEY_LEN)) {
				k = strndup((const char *)s.p,
					    (size_t)(s.end - s.p));
				if (!k)
					return -1;
			}
			km->keys[km->nkeys++] = k;
		}
		if (r < 0)
			return -1;
	}
	return r < 0 ? -1 : 0;
}

/* ProcessContext: resource = 1 (not needed here), extra_attributes = 2. */
static int otel_decode(const uint8_t *p, size_t len,
		       struct plabel_otel_keymap *km)
{
	struct pb b = { p, p + len }, sub;
	uint32_t f;
	int r;

	while (!(r = pb_field(&b, &f, &sub)))
		if (f == 2 && sub.p && otel_keyvalue(sub, km))
			return -1;
	return r < 0 ? -1 : 0;
}

/* The start of the mapping named OTEL_CTX, or 0 (*gone: no process). */
static uint64_t otel_find_map(pid_t pid, int *gone)
{
	char path[64], *line = NULL;
	uint64_t at = 0;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f) {
		*gone = errno == ENOENT || errno == ESRCH;
		return 0;
	}
	while (!at && getline(&line, &cap, f) > 0) {
		unsigned long long start;
		int n = 0;
		char *name;

		if (sscanf(line, "%llx-%*x %*s %*x %*x:%*x %*u %n", &start,
			   &n) < 1 || !n)
			continue;
		name = line + n;
		if (!strncmp(name, "/memfd:OTEL_CTX", 15) ||
		    !strncmp(name, "[anon:OTEL_CTX]", 15) ||
		    !strncmp(name, "[anon_shmem:OTEL_CTX]", 21))
			at = start;
	}
	free(line);
	fclose(f);
	return at;
}

int plabel_otel_keymap_read(pid_t pid, struct plabel_otel_keymap *km)
{
	uint8_t h[32], h2[32];
	uint8_t *payload = NULL;
	uint64_t at, pub, addr;
	uint32_t ver, size;
	char path[64];
	int fd, ret = -EAGAIN, tries, gone = 0;

	plabel_otel_keymap_release(km);
	at = otel_find_map(pid, &gone);
	if (!at)
		return gone ? -ESRCH : -ENOENT;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	for (tries = 0; tries < OTEL_READ_TRIES; tries++) {
		ret = tls_mem_read(fd, at, h, sizeof(h));
		if (ret)
			break;
		if (memcmp(h, "OTEL_CTX", 8)) {
			ret = -ENOENT;	/* not (yet) published */
			break;
		}
		memcpy(&ver, h + 8, 4);
		memcpy(&size, h + 12, 4);
		memcpy(&pub, h + 16, 8);
		memcpy(&addr, h + 24, 8);
		ret = -EBADMSG;
		if (ver != 2 || size > OTEL_PAYLOAD_MAX)
			break;
		ret = -EAGAIN;
		if (!pub)
			continue;	/* being updated */
		free(payload);
		payload = malloc(size ? size : 1);
		if (!payload) {
			ret = -ENOMEM;
			break;
		}
		ret = tls_mem_read(fd, addr, payload, size);
		if (ret)
			break;
		ret = tls_mem_read(fd, at, h2, sizeof(h2));
		if (ret)
			break;
		ret = -EAGAIN;
		if (memcmp(h, h2, sizeof(h)))
			continue;	/* changed under the read */
		ret = otel_decode(payload, size, km) ? -EBADMSG : 0;
		if (ret)
			plabel_otel_keymap_release(km);
		else
			km->published_at_ns = pub;
		break;
	}
	free(payload);
	close(fd);
	return ret;
}

/* ---- Decoding a record's context ---- */

static int tctx_good(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] == 0x7f)
			return 0;
	return 1;
}

static void tctx_hex(char *out, const uint8_t *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hex[p[i] >> 4];
		out[2 * i + 1] = hex[p[i] & 15];
	}
	out[2 * n] = '\0';
}

/* The label of key in out[0..n), or NULL. */
static struct plabel_tctx_label *tctx_find(struct plabel_tctx_label *out,
					   size_t n, const char *key)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(out[i].key, key))
			return &out[i];
	return NULL;
}

static size_t tctx_otel(const uint8_t *data, uint32_t len,
			const struct plabel_otel_keymap *km,
			struct plabel_tctx_label *out, size_t cap,
			struct plabel_tctx_stats *st)
{
	static const uint8_t zeros[16];
	size_t n = 0, off = 28, end;
	uint16_t size;

	if (len < 28 || data[24] != 1)
		return 0;
	if (memcmp(data, zeros, 16) && n + 2 <= cap) {
		snprintf(out[n].key, sizeof(out[n].key), "trace_id");
		tctx_hex(out[n++].value, data, 16);
		snprintf(out[n].key, sizeof(out[n].key), "span_id");
		tctx_hex(out[n++].value, data + 16, 8);
	}
	memcpy(&size, data + 26, 2);
	end = 28 + (size_t)size < len ? 28 + (size_t)size : len;
	/* whole entries only: a cut one ends the walk */
	while (end - off >= 2 && end - off - 2 >= data[off + 1]) {
		uint8_t key = data[off], vlen = data[off + 1];
		const uint8_t *v = data + off + 2;
		struct plabel_tctx_label *l;
		const char *name;

		off += 2 + (size_t)vlen;
		if (!km || !km->schema_ok || key >= km->nkeys) {
			if (st)
				st->unknown_keys++;
			continue;
		}
		name = km->keys[key];
		if (!name || !tctx_good(v, vlen)) {
			if (st)
				st->bad_labels++;
			continue;
		}
		/* the last entry of a key wins */
		l = tctx_find(out, n, name);
		if (!l) {
			if (n == cap)
				continue;
			l = &out[n++];
			snprintf(l->key, sizeof(l->key), "%s", name);
		}
		memcpy(l->value, v, vlen);
		l->value[vlen] = '\0';
	}
	return n;
}

static size_t tctx_custom(const uint8_t *data, uint32_t len,
			  struct plabel_tctx_label *out, size_t cap,
			  struct plabel_tctx_stats *st)
{
	size_t n = 0, off = 0;

	while (len - off >= 4) {
		uint16_t kl, vl;
		const uint8_t *k, *v;

		memcpy(&kl, data + off, 2);
		memcpy(&vl, data + off + 2, 2);
		if (len - off - 4 < (size_t)kl + vl)
			break;
		k = data + off + 4;
		v = k + kl;
		off += 4 + (size_t)kl + vl;
		if (!kl || kl > PLABEL_MAX_KEY_LEN ||
		    vl > PLABEL_TLSCTX_BYTES || !tctx_good(k, kl) ||
		    !tctx_good(v, vl)) {
			if (st)
				st->bad_labels++;
			continue;
		}
		if (n == cap)
			continue;
		memcpy(out[n].key, k, kl);
		out[n].key[kl] = '\0';
		/* the first of a key wins */
		if (tctx_find(out, n, out[n].key))
			continue;
		memcpy(out[n].value, v, vl);
		out[n].value[vl] = '\0';
		n++;
	}
	return n;
}

size_t plabel_tctx_labels(uint32_t format, uint32_t flags, const uint8_t *data,
			  uint32_t len, const struct plabel_otel_keymap *km,
			  struct plabel_tctx_label *out, size_t cap,
			  struct plabel_tctx_stats *st)
{
	if (st) {
		st->contexts++;
		if (flags & PLABEL_TLSCTX_PARTIAL)
			st->partial++;
	}
	if (!data)
		return 0;
	if (format == PLABEL_TLSCTX_OTEL_V1)
		return tctx_otel(data, len, km, out, cap, st);
	if (format == PLABEL_TLSCTX_CUSTOM_LABELS_V1)
		return tctx_custom(data, len, out, cap, st);
	return 0;
}

/* ---- The reader's bookkeeping ---- */

enum tctx_state {
	TCTX_MARKED = 1,	/* to look at when due */
	TCTX_REGISTERED,	/* the module reads its contexts */
	TCTX_NONE,		/* publishes nothing (yet) */
	TCTX_FAILED,		/* could not be read or registered */
	TCTX_GONE,		/* exited */
};

/* Retries of a library not relocated yet, then of a missing key map. */
#define TCTX_TRIES		12
#define TCTX_RETRY_NS		20000000ULL	/* doubling from 20 ms */
#define TCTX_KEYMAP_NS		1000000000ULL	/* key map rechecked */
#define TCTX_MAPS_SEEN		PLABEL_TLS_SEEN_MAX	/* paths kept */
/*
 * From an exec or a new library to the look: time for the dynamic linker
 * to map and relocate the rest, so that one look sees them all.
 */
#define TCTX_LOAD_NS		20000000ULL
/* Between two looks at one image, at least */
#define TCTX_AGAIN_NS		1000000000ULL
/*
 * From an exec to the look: the libraries loaded, and the kernel's first
 * walk of the mappings (a tick, 50 ms, after a sample) read, so that the
 * look can be the short one.
 */
#define TCTX_EXEC_NS		100000000ULL
/* A walk's files kept for the short look, at most */
#define TCTX_BATCH_MAX		64
#define TCTX_BATCH_BYTES	8192

struct tctx_proc {
	uint32_t pid;		/* first: plabel_itab_u32() */
	int state;		/* enum tctx_state */
	uint32_t gen;		/* bumped by each exec: results of before go */
	int in_kernel;		/* the module may hold a registration */
	uint32_t format;
	unsigned int tries, km_tries;
	uint64_t next_ns;	/* MARKED: when to look */
	uint64_t look_ns;	/* when the last look that settled began */
	uint64_t exec_ns;	/* of the latest EXEC record read */
	uint64_t km_next_ns;	/* OTel: when to read the key map */
	struct plabel_otel_keymap km;
	int have_km;
	/*
	 * Paths of files (hashes) the last look went through or the kernel
	 * reported since, the last TCTX_MAPS_SEEN
	 */
	uint64_t seen[TCTX_MAPS_SEEN];
	unsigned int nseen;
	/*
	 * The files of the kernel's latest walk of its mappings (the MMAP
	 * records of one time_ns), NUL-separated, while a look is to come:
	 * if each is known to publish nothing, the look is a stat() of
	 * each, not /proc/PID/maps. batch_full: more than kept.
	 */
	char *batch;
	size_t batch_len, batch_cap;
	unsigned int batch_n;
	int batch_full;
	uint64_t batch_ns;
};

/*
 * The looking (/proc, ELF files, the ioctl) is done by a thread of its
 * own, without the lock, so that neither the reading thread, which only
 * marks processes, nor the collector, which copies key maps, ever waits
 * for a file.
 */
struct plabel_tctx {
	int fd;
	pthread_mutex_t lock;	/* everything below */
	pthread_cond_t cond;	/* something marked, or stop */
	pthread_t thread;
	int started, stop;
	struct tctx_proc *procs;
	size_t n, cap;
	struct plabel_itab tab;
	size_t marked;		/* procs in TCTX_MARKED */
	uint32_t registered, failed;
	int lossy;		/* records were lost: walks may be partial */
};

static uint64_t tctx_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* pid's entry, added if new; NULL on ENOMEM. Under the lock. */
static struct tctx_proc *tctx_get(struct plabel_tctx *t, uint32_t pid)
{
	size_t i = plabel_itab_u32(&t->tab, &t->procs, &t->n, &t->cap,
				   sizeof(*t->procs), pid, NULL);

	return i == SIZE_MAX ? NULL : &t->procs[i];
}

/* pid's entry if it has one. Under the lock. */
static struct tctx_proc *tctx_proc_find(struct plabel_tctx *t, uint32_t pid)
{
	size_t pos = SIZE_MAX, i;

	while ((i = plabel_itab_next(&t->tab, plabel_hash2(pid, 0), &pos)) !=
	       SIZE_MAX)
		if (t->procs[i].pid == pid)
			return &t->procs[i];
	return NULL;
}

/*
 * When to look again at p, whose image was looked at: the libraries
 * loaded, and not sooner than TCTX_AGAIN_NS after the last look (a
 * process that keeps mapping files it is not told apart by is looked at
 * that often at most).
 */
static uint64_t tctx_again(const struct tctx_proc *p)
{
	uint64_t at = tctx_now() + TCTX_LOAD_NS;

	return at > p->look_ns + TCTX_AGAIN_NS ? at :
	       p->look_ns + TCTX_AGAIN_NS;
}

/* Whether a look at p's image went through the file of path hash h. */
static int tctx_seen(const struct tctx_proc *p, uint64_t h)
{
	unsigned int i;

	for (i = 0; i < p->nseen && i < TCTX_MAPS_SEEN; i++)
		if (p->seen[i] == h)
			return 1;
	return 0;
}

/* Look at p soon: exec (image new) says so, as does a new process. */
static void tctx_mark(struct plabel_tctx *t, struct tctx_proc *p, int image)
{
	if (image) {
		/* an exec: what was registered is gone with the old image */
		plabel_otel_keymap_release(&p->km);
		p->have_km = 0;
		p->km_tries = 0;
		p->nseen = 0;
		p->batch_n = 0;
		p->batch_len = 0;
		p->batch_full = 0;
		p->batch_ns = 0;
		p->gen++;
		if (p->state == TCTX_REGISTERED)
			t->registered--;
		if (p->state == TCTX_MARKED)
			t->marked--;
		p->state = 0;
	}
	if (p->state == TCTX_MARKED || p->state == TCTX_REGISTERED ||
	    p->state == TCTX_FAILED || (p->state == TCTX_GONE && !image))
		return;
	/* a new image, or more of one that published nothing: loaded first */
	p->next_ns = image ? tctx_now() + TCTX_EXEC_NS :
		     p->state == TCTX_NONE ? tctx_again(p) : 0;
	p->state = TCTX_MARKED;
	p->tries = 0;
	t->marked++;
	pthread_cond_signal(&t->cond);
}

/* What the thread does next, found under the lock. */
struct tctx_job {
	uint32_t pid, gen;
	int keymap;		/* 0: locate and register */
};

/*
 * The next job due by now, or 0 with *due the time of the next one
 * (UINT64_MAX: none).
 */
static int tctx_next_job(struct plabel_tctx *t, uint64_t now,
			 struct tctx_job *j, uint64_t *due)
{
	size_t i;

	*due = UINT64_MAX;
	for (i = 0; i < t->n; i++) {
		struct tctx_proc *p = &t->procs[i];
		uint64_t at;

		if (p->state == TCTX_MARKED)
			at = p->next_ns;
		else if (p->state == TCTX_REGISTERED &&
			 p->format == PLABEL_TLSCTX_OTEL_V1)
			at = p->km_next_ns;
		else
			continue;
		if (at <= now) {
			j->pid = p->pid;
			j->gen = p->gen;
			j->keymap = p->state == TCTX_REGISTERED;
			return 1;
		}
		if (at < *due)
			*due = at;
	}
	return 0;
}

/* Locate and register (no lock held); the result applied under it. */
static void tctx_do_register(struct plabel_tctx *t, const struct tctx_job *j)
{
	struct plabel_tls_loc loc;
	struct tctx_proc *p;
	uint64_t now;
	struct plabel_tls_seen seen;
	int sent = 0, forget = 0, ret, again;
	uint64_t start = tctx_now();
	unsigned int npaths = 0, i;
	char *paths = NULL;
	const char *q;

	/* the files of the kernel's latest walk of this image, if known */
	pthread_mutex_lock(&t->lock);
	p = tctx_proc_find(t, j->pid);
	if (p && p->gen == j->gen && p->batch_n && !p->batch_full &&
	    !t->lossy && p->batch_ns >= p->exec_ns) {
		paths = malloc(p->batch_len);
		if (paths) {
			memcpy(paths, p->batch, p->batch_len);
			npaths = p->batch_n;
		}
	}
	pthread_mutex_unlock(&t->lock);
	if (paths && plabel_tls_known_none((pid_t)j->pid, paths, npaths)) {
		/* each publishes nothing: no /proc/PID/maps to read */
		ret = -ENOENT;
		seen.n = 0;
		for (i = 0, q = paths; i < npaths && seen.n < PLABEL_TLS_SEEN_MAX;
		     i++, q += strlen(q) + 1)
			seen.hash[seen.n++] = plabel_tls_path_hash(q, strlen(q));
	} else {
		ret = plabel_tls_locate_seen((pid_t)j->pid, &loc, &seen);
	}
	free(paths);

	if (!ret && t->fd >= 0) {
		struct plabel_tlsctx_args a = {
			.size = sizeof(a),
			.flags = loc.flags,
			.pid = (int32_t)j->pid,
			.format = loc.format,
			.offset = loc.offset,
			.module = loc.module,
		};

		if (ioctl(t->fd, PLABEL_IOC_TLSCTX_SET, &a))
			ret = errno ? -errno : -EIO;
		else
			sent = 1;
		if (ret == -EAGAIN || ret == -ENOENT)
			ret = -EIO;	/* the module's answer is final */
	}
	now = tctx_now();
	pthread_mutex_lock(&t->lock);
	p = tctx_proc_find(t, j->pid);
	if (p && sent)
		p->in_kernel = 1;
	if (!p || p->gen != j->gen || p->state != TCTX_MARKED) {
		pthread_mutex_unlock(&t->lock);
		return;		/* exec'ed meanwhile: looked at again */
	}
	if (ret == -EAGAIN && ++p->tries < TCTX_TRIES) {
		p->next_ns = now + (TCTX_RETRY_NS << (p->tries - 1));
		pthread_mutex_unlock(&t->lock);
		return;
	}
	/* what this image maps: only another file is worth a look again */
	p->look_ns = start;
	for (p->nseen = 0; p->nseen < seen.n; p->nseen++)
		p->seen[p->nseen] = seen.hash[p->nseen];
	/*
	 * A file the kernel reported that the look did not go through: mapped
	 * since /proc/PID/maps was read, or named otherwise there (a process
	 * in a chroot). Looked at again, by the reported paths then.
	 */
	again = 0;
	for (i = 0, q = p->batch; i < p->batch_n; i++, q += strlen(q) + 1)
		again |= !tctx_seen(p, plabel_tls_path_hash(q, strlen(q)));
	free(p->batch);
	p->batch = NULL;
	p->batch_len = 0;
	p->batch_cap = 0;
	p->batch_n = 0;
	if (ret) {
		t->marked--;
		p->state = ret == -ENOENT || ret == -EAGAIN ? TCTX_NONE :
			   ret == -ESRCH ? TCTX_GONE : TCTX_FAILED;
		t->failed += p->state == TCTX_FAILED;
		/*
		 * What the module holds was for an image since replaced
		 * (exec'ed between a look and its ioctl, or after it): it
		 * must not read this one's memory by it.
		 */
		forget = p->in_kernel && p->state != TCTX_GONE;
		p->in_kernel = 0;
	} else {
		t->marked--;
		p->state = TCTX_REGISTERED;
		p->format = loc.format;
		p->km_next_ns = now;
		t->registered++;
	}
	if (again && p->state == TCTX_NONE)
		tctx_mark(t, p, 0);
	pthread_mutex_unlock(&t->lock);
	if (forget && t->fd >= 0) {
		struct plabel_tlsctx_args a = {
			.size = sizeof(a),
			.pid = (int32_t)j->pid,
			.format = PLABEL_TLSCTX_NONE,
		};

		/* (a process gone meanwhile: its entry goes with it) */
		ioctl(t->fd, PLABEL_IOC_TLSCTX_SET, &a);
	}
}

/* The key map read (again), no lock held. */
static void tctx_do_keymap(struct plabel_tctx *t, const struct tctx_job *j)
{
	struct plabel_otel_keymap km = { 0 };
	struct tctx_proc *p;
	uint64_t now;
	int ret = plabel_otel_keymap_read((pid_t)j->pid, &km);

	now = tctx_now();
	pthread_mutex_lock(&t->lock);
	p = tctx_proc_find(t, j->pid);
	if (!p || p->gen != j->gen || p->state != TCTX_REGISTERED) {
		pthread_mutex_unlock(&t->lock);
		plabel_otel_keymap_release(&km);
		return;
	}
	if (!ret) {
		plabel_otel_keymap_release(&p->km);
		p->km = km;
		p->have_km = 1;
		p->km_next_ns = now + TCTX_KEYMAP_NS;
	} else if (ret == -ESRCH) {
		/* exited: the map read last stays for the collector */
		p->state = TCTX_GONE;
		t->registered--;
	} else {
		/* not published yet: soon again, then once a second */
		p->km_tries++;
		p->km_next_ns = now + (p->km_tries < TCTX_TRIES ?
				       TCTX_RETRY_NS << (p->km_tries / 2) :
				       TCTX_KEYMAP_NS);
	}
	pthread_mutex_unlock(&t->lock);
}

static void *tctx_thread(void *arg)
{
	struct plabel_tctx *t = arg;

	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		struct tctx_job j;
		uint64_t due;

		if (!tctx_next_job(t, tctx_now(), &j, &due)) {
			if (due == UINT64_MAX) {
				pthread_cond_wait(&t->cond, &t->lock);
			} else {
				struct timespec ts = {
					.tv_sec = (time_t)(due / 1000000000ULL),
					.tv_nsec = (long)(due % 1000000000ULL),
				};

				pthread_cond_timedwait(&t->cond, &t->lock, &ts);
			}
			continue;
		}
		pthread_mutex_unlock(&t->lock);
		if (j.keymap)
			tctx_do_keymap(t, &j);
		else
			tctx_do_register(t, &j);
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

struct plabel_tctx *plabel_tctx_new(int fd)
{
	struct plabel_tctx *t = calloc(1, sizeof(*t));
	pthread_condattr_t ca;
	sigset_t all, old;

	if (!t)
		return NULL;
	t->fd = fd;
	/* files that the programs looked at share */
	plabel_tls_prewarm_self();
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cond, &ca);
	pthread_condattr_destroy(&ca);
	/* signals stay with the caller's threads */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	t->started = !pthread_create(&t->thread, NULL, tctx_thread, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!t->started) {
		plabel_tctx_free(t);
		return NULL;
	}
	pthread_setname_np(t->thread, "plabel-tlsctx");
	return t;
}

void plabel_tctx_free(struct plabel_tctx *t)
{
	size_t i;

	if (!t)
		return;
	if (t->started) {
		pthread_mutex_lock(&t->lock);
		t->stop = 1;
		pthread_cond_signal(&t->cond);
		pthread_mutex_unlock(&t->lock);
		pthread_join(t->thread, NULL);
	}
	for (i = 0; i < t->n; i++) {
		plabel_otel_keymap_release(&t->procs[i].km);
		free(t->procs[i].batch);
	}
	free(t->procs);
	plabel_itab_free(&t->tab);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

void plabel_tctx_watch(struct plabel_tctx *t, uint32_t pid)
{
	struct tctx_proc *p;

	pthread_mutex_lock(&t->lock);
	p = tctx_get(t, pid);
	if (p)
		tctx_mark(t, p, 0);
	pthread_mutex_unlock(&t->lock);
}

void plabel_tctx_watch_exec(struct plabel_tctx *t, uint32_t pid)
{
	struct tctx_proc *p;

	pthread_mutex_lock(&t->lock);
	p = tctx_get(t, pid);
	if (p) {
		tctx_mark(t, p, 0);
		if (p->state == TCTX_MARKED && !p->next_ns)
			p->next_ns = tctx_now() + TCTX_LOAD_NS;
	}
	pthread_mutex_unlock(&t->lock);
}

/*
 * Keep the path of the MMAP record at r (size bytes, of time when) in
 * p's batch, which a record of another time starts anew. Under the lock.
 */
static void tctx_batch_add(struct tctx_proc *p, uint64_t when,
			   const uint8_t *r, size_t size)
{
	struct plabel_rec_mmap m;
	size_t len;

	memcpy(&m, r, sizeof(m));
	if (when != p->batch_ns) {
		p->batch_ns = when;
		p->batch_len = 0;
		p->batch_n = 0;
		p->batch_full = 0;
	}
	len = strnlen((const char *)r + sizeof(m),
		      m.path_len < size - sizeof(m) ? m.path_len :
		      size - sizeof(m));
	if (p->batch_full)
		return;
	if (!len || p->batch_n >= TCTX_BATCH_MAX ||
	    len + 1 > TCTX_BATCH_BYTES - p->batch_len) {
		p->batch_full = 1;
		return;
	}
	/* as much as the paths take: many processes may wait for a look */
	if (len + 1 > p->batch_cap - p->batch_len) {
		size_t cap = p->batch_cap ? p->batch_cap : 512;
		char *nb;

		while (cap - p->batch_len < len + 1)
			cap *= 2;
		nb = realloc(p->batch, cap);
		if (!nb) {
			p->batch_full = 1;
			return;
		}
		p->batch = nb;
		p->batch_cap = cap;
	}
	memcpy(p->batch + p->batch_len, r + sizeof(m), len);
	p->batch[p->batch_len + len] = '\0';
	p->batch_len += len + 1;
	p->batch_n++;
}

/*
 * Whether the MMAP record at r (size bytes) names a file p's process was
 * not seen with: the kernel reports a process's mappings again after a
 * while and a file in several mappings, and the program's own files are
 * reported after its exec, often after the look that went through them.
 * Only a file no look went through (a library loaded since) calls for a
 * look again.
 */
static int tctx_new_map(struct tctx_proc *p, const uint8_t *r, size_t size)
{
	struct plabel_rec_mmap m;
	uint64_t h;

	memcpy(&m, r, sizeof(m));
	h = plabel_tls_path_hash((const char *)r + sizeof(m),
				 m.path_len < size - sizeof(m) ?
				 m.path_len : size - sizeof(m));
	if (tctx_seen(p, h))
		return 0;
	p->seen[p->nseen++ % TCTX_MAPS_SEEN] = h;
	return 1;
}

void plabel_tctx_scan(struct plabel_tctx *t, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	size_t pos = 0;

	pthread_mutex_lock(&t->lock);
	while (len - pos >= sizeof(struct plabel_rec_header)) {
		struct plabel_rec_header h;
		struct tctx_proc *p;
		uint64_t when;
		uint32_t pid;

		memcpy(&h, b + pos, sizeof(h));
		if (h.size < sizeof(h) || h.size % 8 || h.size > len - pos)
			break;
		if (h.type == PLABEL_REC_EXEC &&
		    h.size >= sizeof(struct plabel_rec_exec)) {
			struct plabel_rec_exec e;

			memcpy(&e, b + pos, sizeof(e));
			p = tctx_get(t, e.pid);
			if (p && e.time_ns > p->exec_ns)
				p->exec_ns = e.time_ns;
			/* not when a look began after it: that saw this image */
			if (p && (!p->look_ns || e.time_ns >= p->look_ns))
				tctx_mark(t, p, 1);
		} else if (h.type == PLABEL_REC_THREAD &&
			   h.size >= sizeof(struct plabel_rec_sample)) {
			struct plabel_rec_sample s;

			memcpy(&s, b + pos, sizeof(s));
			if (s.flags & PLABEL_THREAD_PROCESS) {
				p = tctx_get(t, s.child_pid);
				if (p)
					tctx_mark(t, p, 1);
			}
		} else if (h.type == PLABEL_REC_MMAP &&
			   h.size >= sizeof(struct plabel_rec_mmap)) {
			memcpy(&pid, b + pos +
			       offsetof(struct plabel_rec_mmap, pid), 4);
			memcpy(&when, b + pos +
			       offsetof(struct plabel_rec_mmap, time_ns), 8);
			p = tctx_get(t, pid);
			/*
			 * new, or a library more: it may be the one; not a
			 * mapping of the image before an exec, reported late
			 */
			if (p && (!p->state || p->state == TCTX_NONE ||
				  p->state == TCTX_MARKED) &&
			    when >= p->exec_ns)
				tctx_batch_add(p, when, b + pos, h.size);
			if (p && (!p->state || p->state == TCTX_NONE) &&
			    when >= p->exec_ns &&
			    tctx_new_map(p, b + pos, h.size))
				tctx_mark(t, p, 0);
		} else if (h.type == PLABEL_REC_LOST) {
			t->lossy = 1;
		}
		pos += h.size;
	}
	pthread_mutex_unlock(&t->lock);
}

static int keymap_copy(struct plabel_otel_keymap *dst,
		       const struct plabel_otel_keymap *src)
{
	uint32_t i;

	*dst = *src;
	for (i = 0; i < src->nkeys; i++) {
		dst->keys[i] = src->keys[i] ? strdup(src->keys[i]) : NULL;
		if (src->keys[i] && !dst->keys[i]) {
			dst->nkeys = i;
			plabel_otel_keymap_release(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

int plabel_tctx_keymap(struct plabel_tctx *t, uint32_t pid,
		       struct plabel_otel_keymap *km)
{
	struct tctx_proc *p;
	int ret = -ENOENT;

	plabel_otel_keymap_release(km);
	pthread_mutex_lock(&t->lock);
	p = tctx_proc_find(t, pid);
	if (p && p->have_km)
		ret = keymap_copy(km, &p->km);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

void plabel_tctx_counts(struct plabel_tctx *t, uint32_t *registered,
			uint32_t *failed)
{
	pthread_mutex_lock(&t->lock);
	*registered = t->registered;
	*failed = t->failed;
	pthread_mutex_unlock(&t->lock);
}
