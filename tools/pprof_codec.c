// SPDX-License-Identifier: GPL-2.0
/*
 * The in-memory profile (profile_model.h) as gzipped profile.proto, and
 * back: a writer, and a reader that checks every index and id before
 * anything uses it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "proto/profile.pb-c.h"
#include "profile_model.h"

/* ---- writer ---- */

/* All the protobuf-c structs of one encoding, freed together. */
struct pb_writer {
	Perftools__Profiles__Profile prof;
	Perftools__Profiles__ValueType *vt, **vtp, period_type;
	Perftools__Profiles__Sample *s, **sp;
	Perftools__Profiles__Label *lab, **labp;
	Perftools__Profiles__Mapping *m, **mp;
	Perftools__Profiles__Location *l, **lp;
	Perftools__Profiles__Line *ln, **lnp;
	Perftools__Profiles__Function *f, **fp;
	int64_t *comment;
	char **strtab;
};

static void pb_writer_free(struct pb_writer *e)
{
	free(e->vt);
	free(e->vtp);
	free(e->s);
	free(e->sp);
	free(e->lab);
	free(e->labp);
	free(e->m);
	free(e->mp);
	free(e->l);
	free(e->lp);
	free(e->ln);
	free(e->lnp);
	free(e->f);
	free(e->fp);
	free(e->comment);
	free(e->strtab);
}

#define PLABEL_ALLOC2(a, ap, n) \
	(((a) = calloc((n) ? (n) : 1, sizeof(*(a)))) && \
	 ((ap) = calloc((n) ? (n) : 1, sizeof(*(ap)))))

static int pb_writer_build(const struct plabel_prof *p, struct pb_writer *e)
{
	size_t i, j, nlab = 0, nln = 0, li = 0, lni = 0;

	memset(e, 0, sizeof(*e));
	perftools__profiles__profile__init(&e->prof);
	for (i = 0; i < p->nsamples; i++)
		nlab += p->samples[i].nlabels + p->samples[i].nnum;
	for (i = 0; i < p->nlocs; i++)
		nln += p->locs[i].nlines;
	if (!PLABEL_ALLOC2(e->vt, e->vtp, p->nstypes) ||
	    !PLABEL_ALLOC2(e->s, e->sp, p->nsamples) ||
	    !PLABEL_ALLOC2(e->lab, e->labp, nlab) ||
	    !PLABEL_ALLOC2(e->m, e->mp, p->nmaps) ||
	    !PLABEL_ALLOC2(e->l, e->lp, p->nlocs) ||
	    !PLABEL_ALLOC2(e->ln, e->lnp, nln) ||
	    !PLABEL_ALLOC2(e->f, e->fp, p->nfuncs))
		return -ENOMEM;
	e->comment = calloc(p->ncomments ? p->ncomments : 1,
			    sizeof(*e->comment));
	e->strtab = calloc(p->nstrs, sizeof(*e->strtab));
	if (!e->comment || !e->strtab)
		return -ENOMEM;

	for (i = 0; i < p->nstrs; i++)
		e->strtab[i] = p->strs[i]->s;
	e->prof.n_string_table = p->nstrs;
	e->prof.string_table = e->strtab;

	for (i = 0; i < p->nstypes; i++) {
		perftools__profiles__value_type__init(&e->vt[i]);
		e->vt[i].type = plabel_str_idx(p->stypes[i].type);
		e->vt[i].unit = plabel_str_idx(p->stypes[i].unit);
		e->vtp[i] = &e->vt[i];
	}
	e->prof.n_sample_type = p->nstypes;
	e->prof.sample_type = e->vtp;

	for (i = 0; i < p->nsamples; i++) {
		const struct plabel_psample *ps = &p->samples[i];
		Perftools__Profiles__Sample *s = &e->s[i];

		perftools__profiles__sample__init(s);
		s->n_location_id = ps->nlocs;
		s->location_id = ps->locs;
		s->n_value = p->nstypes;
		s->value = ps->values;
		s->n_label = ps->nlabels + ps->nnum;
		s->label = &e->labp[li];
		for (j = 0; j < ps->nlabels; j++, li++) {
			perftools__profiles__label__init(&e->lab[li]);
			e->lab[li].key = plabel_str_idx(ps->labels[j].key);
			e->lab[li].str = plabel_str_idx(ps->labels[j].value);
			e->labp[li] = &e->lab[li];
		}
		for (j = 0; j < ps->nnum; j++, li++) {
			perftools__profiles__label__init(&e->lab[li]);
			e->lab[li].key = plabel_str_idx(ps->num[j].key);
			e->lab[li].num = ps->num[j].num;
			e->lab[li].num_unit = plabel_str_idx(ps->num[j].unit);
			e->labp[li] = &e->lab[li];
		}
		e->sp[i] = s;
	}
	e->prof.n_sample = p->nsamples;
	e->prof.sample = e->sp;

	for (i = 0; i < p->nmaps; i++) {
		/* the main binary first: viewers take mapping[0] for it */
		size_t k = i == 0 ? p->main_map : i <= p->main_map ? i - 1 : i;
		const struct plabel_pmap *pm = &p->maps[k];
		Perftools__Profiles__Mapping *m = &e->m[i];

		perftools__profiles__mapping__init(m);
		m->id = pm->id;
		m->memory_start = pm->start;
		m->memory_limit = pm->limit;
		m->file_offset = pm->offset;
		m->filename = plabel_str_idx(pm->file);
		m->build_id = plabel_str_idx(pm->build_id);
		m->has_functions = pm->has_functions;
		m->has_filenames = pm->has_filenames;
		m->has_line_numbers = pm->has_line_numbers;
		m->has_inline_frames = pm->has_inline_frames;
		e->mp[i] = m;
	}
	e->prof.n_mapping = p->nmaps;
	e->prof.mapping = e->mp;

	for (i = 0; i < p->nlocs; i++) {
		const struct plabel_ploc *pl = &p->locs[i];
		Perftools__Profiles__Location *l = &e->l[i];

		perftools__profiles__location__init(l);
		l->id = pl->id;
		l->mapping_id = pl->mapping_id;
		l->address = pl->address;
		l->is_folded = pl->is_folded;
		l->n_line = pl->nlines;
		l->line = &e->lnp[lni];
		for (j = 0; j < pl->nlines; j++, lni++) {
			perftools__profiles__line__init(&e->ln[lni]);
			e->ln[lni].function_id = p->funcs[pl->func_idx[j]].id;
			e->ln[lni].line = pl->lines[j].line;
			e->lnp[lni] = &e->ln[lni];
		}
		e->lp[i] = l;
	}
	e->prof.n_location = p->nlocs;
	e->prof.location = e->lp;

	for (i = 0; i < p->nfuncs; i++) {
		const struct plabel_pfunc *pf = &p->funcs[i];
		Perftools__Profiles__Function *f = &e->f[i];

		perftools__profiles__function__init(f);
		f->id = pf->id;
		f->name = plabel_str_idx(pf->name);
		f->system_name = plabel_str_idx(pf->system_name);
		f->filename = plabel_str_idx(pf->file);
		f->start_line = pf->start_line;
		e->fp[i] = f;
	}
	e->prof.n_function = p->nfuncs;
	e->prof.function = e->fp;

	for (i = 0; i < p->ncomments; i++)
		e->comment[i] = plabel_str_idx(p->comments[i]);
	e->prof.n_comment = p->ncomments;
	e->prof.comment = e->comment;

	perftools__profiles__value_type__init(&e->period_type);
	e->period_type.type = plabel_str_idx(p->ptype.type);
	e->period_type.unit = plabel_str_idx(p->ptype.unit);
	e->prof.period_type = &e->period_type;
	e->prof.period = p->period;
	e->prof.time_nanos = p->time_nanos;
	e->prof.duration_nanos = p->duration_nanos;
	e->prof.drop_frames = plabel_str_idx(p->drop_frames);
	e->prof.keep_frames = plabel_str_idx(p->keep_frames);
	e->prof.default_sample_type = plabel_str_idx(p->default_type);
	return 0;
}

int plabel_prof_encode(const struct plabel_prof *p, uint8_t **buf,
		       size_t *len)
{
	struct pb_writer e;
	uint8_t *raw = NULL, *gz = NULL;
	size_t rawlen;
	z_stream z;
	int ret;

	ret = pb_writer_build(p, &e);
	if (ret)
		goto err_enc;
	rawlen = perftools__profiles__profile__get_packed_size(&e.prof);
	raw = malloc(rawlen ? rawlen : 1);
	if (!raw) {
		ret = -ENOMEM;
		goto err_enc;
	}
	perftools__profiles__profile__pack(&e.prof, raw);

	memset(&z, 0, sizeof(z));
	/* 15 + 16: zlib writes a gzip header and trailer. */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		ret = -ENOMEM;
		goto err_raw;
	}
	z.avail_out = deflateBound(&z, rawlen);
	gz = malloc(z.avail_out);
	if (!gz) {
		ret = -ENOMEM;
		goto err_z;
	}
	z.next_in = raw;
	z.avail_in = rawlen;
	z.next_out = gz;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		ret = -EIO;
		free(gz);
		goto err_z;
	}
	*buf = gz;
	*len = z.total_out;
	ret = 0;
err_z:
	deflateEnd(&z);
err_raw:
	free(raw);
err_enc:
	pb_writer_free(&e);
	return ret;
}

static int write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

int plabel_prof_write(const struct plabel_prof *p, const char *path)
{
	uint8_t *buf;
	size_t len;
	int fd, ret;

	ret = plabel_prof_encode(p, &buf, &len);
	if (ret)
		return ret;
	if (!strcmp(path, "-")) {
		ret = write_all(STDOUT_FILENO, buf, len);
		free(buf);
		return ret;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		goto err_buf;
	}
	ret = write_all(fd, buf, len);
	if (close(fd) && !ret)
		ret = -errno;
err_buf:
	free(buf);
	return ret;
}

/* ---- reader ---- */

static __thread char pb_errbuf[256];

static int pb_fail(const char **err, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int pb_fail(const char **err, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(pb_errbuf, sizeof(pb_errbuf), fmt, ap);
	va_end(ap);
	if (err)
		*err = pb_errbuf;
	return ret;
}

/* Inflate gzip data (one or more members) into a malloc()ed buffer. */
static int gunzip_all(const uint8_t *in, size_t inlen, uint8_t **out,
		      size_t *outlen, const char **err)
{
	size_t cap = inlen * 4 + 4096, used = 0;
	uint8_t *buf = NULL;
	z_stream z;
	int zr, ret;

	if (cap > PLABEL_PROF_MAX_BYTES)
		cap = PLABEL_PROF_MAX_BYTES;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return pb_fail(err, -ENOMEM, "out of memory");
	buf = malloc(cap);
	if (!buf) {
		ret = pb_fail(err, -ENOMEM, "out of memory");
		goto err_z;
	}
	z.next_in = (uint8_t *)in;
	z.avail_in = inlen;
	for (;;) {
		if (used == cap) {
			uint8_t *nb;

			if (cap >= PLABEL_PROF_MAX_BYTES) {
				ret = pb_fail(err, -EFBIG,
					      "decompressed profile larger than %u MiB",
					      PLABEL_PROF_MAX_BYTES >> 20);
				goto err_buf;
			}
			cap = cap * 2 > PLABEL_PROF_MAX_BYTES ?
				PLABEL_PROF_MAX_BYTES : cap * 2;
			nb = realloc(buf, cap);
			if (!nb) {
				ret = pb_fail(err, -ENOMEM, "out of memory");
				goto err_buf;
			}
			buf = nb;
		}
		z.next_out = buf + used;
		z.avail_out = cap - used;
		zr = inflate(&z, Z_NO_FLUSH);
		used = cap - z.avail_out;
		if (zr == Z_STREAM_END) {
			/* Another gzip member may follow. */
			if (z.avail_in >= 2 && z.next_in[0] == 0x1f &&
			    z.next_in[1] == 0x8b) {
				if (inflateReset(&z) != Z_OK) {
					ret = pb_fail(err, -EBADMSG,
						      "bad gzip data");
					goto err_buf;
				}
				continue;
			}
			if (z.avail_in) {
				ret = pb_fail(err, -EBADMSG,
					      "trailing garbage after gzip data");
				goto err_buf;
			}
			break;
		}
		if (zr == Z_OK)
			continue;
		if (zr == Z_BUF_ERROR && z.avail_out)
			ret = pb_fail(err, -EBADMSG,
				      "truncated gzip data");
		else if (zr == Z_MEM_ERROR)
			ret = pb_fail(err, -ENOMEM, "out of memory");
		else if (zr == Z_BUF_ERROR)
			continue;
		else
			ret = pb_fail(err, -EBADMSG, "bad gzip data: %s",
				      z.msg ? z.msg : "corrupt");
		goto err_buf;
	}
	inflateEnd(&z);
	*out = buf;
	*outlen = used;
	return 0;

err_buf:
	free(buf);
err_z:
	inflateEnd(&z);
	return ret;
}

/* Checked string table access while converting a decoded profile. */
struct pb_reader {
	const Perftools__Profiles__Profile *pb;
	const char **str;	/* interned, by file index */
	const char **err;
	int ret;
};

static const char *pb_str(struct pb_reader *d, int64_t idx,
			  const char *what)
{
	if (idx < 0 || (uint64_t)idx >= d->pb->n_string_table) {
		if (!d->ret)
			d->ret = pb_fail(d->err, -EINVAL,
					 "%s: string index %lld out of range (string table has %zu entries)",
					 what, (long long)idx,
					 d->pb->n_string_table);
		return d->str[0];
	}
	return d->str[idx];
}

static int pb_convert(struct plabel_prof *p, struct pb_reader *d)
{
	const Perftools__Profiles__Profile *pb = d->pb;
	const char **err = d->err;
	size_t i, j;

	if (!pb->n_string_table || pb->string_table[0][0])
		return pb_fail(err, -EINVAL,
			       "string table must start with the empty string");
	d->str = calloc(pb->n_string_table, sizeof(*d->str));
	if (!d->str)
		return pb_fail(err, -ENOMEM, "out of memory");
	for (i = 0; i < pb->n_string_table; i++) {
		d->str[i] = plabel_prof_str_esc(p, pb->string_table[i],
					     false);
		if (!d->str[i])
			return pb_fail(err, -ENOMEM, "out of memory");
	}

	if (!pb->n_sample_type && pb->n_sample)
		return pb_fail(err, -EINVAL, "missing sample types");
	p->stypes = calloc(pb->n_sample_type ? pb->n_sample_type : 1,
			   sizeof(*p->stypes));
	if (!p->stypes)
		return pb_fail(err, -ENOMEM, "out of memory");
	p->nstypes = pb->n_sample_type;
	for (i = 0; i < pb->n_sample_type; i++) {
		p->stypes[i].type = pb_str(d, pb->sample_type[i]->type,
					   "sample type");
		p->stypes[i].unit = pb_str(d, pb->sample_type[i]->unit,
					   "sample type unit");
	}
	if (pb->period_type) {
		p->ptype.type = pb_str(d, pb->period_type->type,
				       "period type");
		p->ptype.unit = pb_str(d, pb->period_type->unit,
				       "period type unit");
	}
	p->period = pb->period;
	p->time_nanos = pb->time_nanos;
	p->duration_nanos = pb->duration_nanos;
	p->drop_frames = pb_str(d, pb->drop_frames, "drop_frames");
	p->keep_frames = pb_str(d, pb->keep_frames, "keep_frames");
	p->default_type = pb_str(d, pb->default_sample_type,
				 "default_sample_type");
	for (i = 0; i < pb->n_comment; i++)
		if (plabel_add_comment_str(p, pb_str(d, pb->comment[i],
						     "comment")))
			return pb_fail(err, -ENOMEM, "out of memory");
	if (d->ret)
		return d->ret;

	for (i = 0; i < pb->n_mapping; i++) {
		const Perftools__Profiles__Mapping *m = pb->mapping[i];
		struct plabel_pmap pm = {
			.id = m->id, .start = m->memory_start,
			.limit = m->memory_limit, .offset = m->file_offset,
			.has_functions = m->has_functions,
			.has_filenames = m->has_filenames,
			.has_line_numbers = m->has_line_numbers,
			.has_inline_frames = m->has_inline_frames,
		};

		if (!m->id)
			return pb_fail(err, -EINVAL, "mapping with id 0");
		if (plabel_find_map(p, m->id) != SIZE_MAX)
			return pb_fail(err, -EINVAL,
				       "two mappings with id %llu",
				       (unsigned long long)m->id);
		pm.file = pb_str(d, m->filename, "mapping file name");
		pm.build_id = pb_str(d, m->build_id, "mapping build id");
		if (d->ret)
			return d->ret;
		if (plabel_add_map(p, &pm, false) == SIZE_MAX)
			return pb_fail(err, -ENOMEM, "out of memory");
	}

	for (i = 0; i < pb->n_function; i++) {
		const Perftools__Profiles__Function *f = pb->function[i];
		struct plabel_pfunc *pf;

		if (!f->id)
			return pb_fail(err, -EINVAL, "function with id 0");
		if (plabel_find_func(p, f->id) != SIZE_MAX)
			return pb_fail(err, -EINVAL,
				       "two functions with id %llu",
				       (unsigned long long)f->id);
		if (plabel_grow(&p->funcs, &p->capfuncs, p->nfuncs,
				sizeof(*p->funcs)) ||
		    plabel_itab_reserve(&p->func_id_h, 1))
			return pb_fail(err, -ENOMEM, "out of memory");
		plabel_itab_put(&p->func_id_h, plabel_id_hash(f->id),
				p->nfuncs);
		pf = &p->funcs[p->nfuncs++];
		pf->id = f->id;
		pf->name = pb_str(d, f->name, "function name");
		pf->system_name = pb_str(d, f->system_name,
					 "function system name");
		pf->file = pb_str(d, f->filename, "function file name");
		pf->start_line = f->start_line;
		if (d->ret)
			return d->ret;
	}

	for (i = 0; i < pb->n_location; i++) {
		const Perftools__Profiles__Location *l = pb->location[i];
		struct plabel_ploc *pl;

		if (!l->id)
			return pb_fail(err, -EINVAL, "location with id 0");
		if (plabel_find_loc(p, l->id) != SIZE_MAX)
			return pb_fail(err, -EINVAL,
				       "two locations with id %llu",
				       (unsigned long long)l->id);
		if (l->mapping_id && plabel_find_map(p, l->mapping_id) ==
				     SIZE_MAX)
			return pb_fail(err, -EINVAL,
				       "location %llu: no mapping with id %llu",
				       (unsigned long long)l->id,
				       (unsigned long long)l->mapping_id);
		if (plabel_grow(&p->locs, &p->caplocs, p->nlocs,
				sizeof(*p->locs)) ||
		    plabel_itab_reserve(&p->loc_id_h, 1))
			return pb_fail(err, -ENOMEM, "out of memory");
		plabel_itab_put(&p->loc_id_h, plabel_id_hash(l->id), p->nlocs);
		pl = &p->locs[p->nlocs++];
		memset(pl, 0, sizeof(*pl));
		pl->id = l->id;
		pl->mapping_id = l->mapping_id;
		pl->address = l->address;
		pl->is_folded = l->is_folded;
		if (!l->n_line)
			continue;
		pl->lines = calloc(l->n_line, sizeof(*pl->lines));
		pl->func_idx = calloc(l->n_line, sizeof(*pl->func_idx));
		if (!pl->lines || !pl->func_idx)
			return pb_fail(err, -ENOMEM, "out of memory");
		pl->nlines = l->n_line;
		for (j = 0; j < l->n_line; j++) {
			size_t fi = plabel_find_func(p, l->line[j]->function_id);

			if (fi == SIZE_MAX)
				return pb_fail(err, -EINVAL,
					       "location %llu: line %zu refers to function %llu, which does not exist",
					       (unsigned long long)l->id, j,
					       (unsigned long long)l->line[j]->function_id);
			pl->func_idx[j] = fi;
			pl->lines[j].function = p->funcs[fi].name;
			pl->lines[j].file = p->funcs[fi].file;
			pl->lines[j].line = l->line[j]->line;
		}
	}

	for (i = 0; i < pb->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pb->sample[i];
		struct plabel_psample *ps;

		if (s->n_value != p->nstypes)
			return pb_fail(err, -EINVAL,
				       "sample %zu has %zu values for %zu sample types",
				       i, s->n_value, p->nstypes);
		for (j = 0; j < s->n_location_id; j++)
			if (plabel_find_loc(p, s->location_id[j]) == SIZE_MAX)
				return pb_fail(err, -EINVAL,
					       "sample %zu refers to location %llu, which does not exist",
					       i, (unsigned long long)s->location_id[j]);
		if (plabel_grow(&p->samples, &p->capsamples, p->nsamples,
				sizeof(*p->samples)))
			return pb_fail(err, -ENOMEM, "out of memory");
		ps = &p->samples[p->nsamples++];
		memset(ps, 0, sizeof(*ps));
		ps->nlocs = s->n_location_id;
		ps->locs = malloc((ps->nlocs ? ps->nlocs : 1) *
				  sizeof(*ps->locs));
		ps->values = malloc((p->nstypes ? p->nstypes : 1) *
				    sizeof(*ps->values));
		ps->labels = calloc(s->n_label ? s->n_label : 1,
				    sizeof(*ps->labels));
		ps->num = calloc(s->n_label ? s->n_label : 1, sizeof(*ps->num));
		if (!ps->locs || !ps->values || !ps->labels || !ps->num)
			return pb_fail(err, -ENOMEM, "out of memory");
		if (ps->nlocs)
			memcpy(ps->locs, s->location_id,
			       ps->nlocs * sizeof(*ps->locs));
		if (p->nstypes)
			memcpy(ps->values, s->value,
			       p->nstypes * sizeof(*ps->values));
		for (j = 0; j < s->n_label; j++) {
			const Perftools__Profiles__Label *l = s->label[j];
			const char *key = pb_str(d, l->key,
						 "label key");

			/* pprof's reading: str set means a string label,
			 * else num or num_unit set means a numeric one,
			 * else the label carries nothing and is dropped. */
			if (l->str) {
				ps->labels[ps->nlabels].key = key;
				ps->labels[ps->nlabels++].value =
					pb_str(d, l->str, "label value");
			} else if (l->num || l->num_unit) {
				ps->num[ps->nnum].key = key;
				ps->num[ps->nnum].num = l->num;
				ps->num[ps->nnum++].unit =
					pb_str(d, l->num_unit,
					       "label unit");
			}
		}
		if (d->ret)
			return d->ret;
	}
	return 0;
}

int plabel_prof_decode(const uint8_t *buf, size_t len,
		       struct plabel_prof **out, const char **err)
{
	Perftools__Profiles__Profile *pb;
	struct pb_reader d = { .err = err };
	uint8_t *raw = NULL;
	struct plabel_prof *p;
	int ret;

	if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {
		ret = gunzip_all(buf, len, &raw, &len, err);
		if (ret)
			return ret;
		buf = raw;
	}
	pb = perftools__profiles__profile__unpack(NULL, len, buf);
	free(raw);
	if (!pb)
		return pb_fail(err, -EBADMSG,
			       "not a pprof profile (protobuf decoding failed)");
	p = plabel_prof_alloc();
	if (!p) {
		ret = pb_fail(err, -ENOMEM, "out of memory");
		goto err_pb;
	}
	d.pb = pb;
	ret = pb_convert(p, &d);
	free(d.str);
	if (ret) {
		plabel_prof_free(p);
		goto err_pb;
	}
	*out = p;
err_pb:
	perftools__profiles__profile__free_unpacked(pb, NULL);
	return ret;
}

int plabel_prof_read(const char *path, struct plabel_prof **out,
		     const char **err)
{
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf;
	int fd, ret;

	fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) :
				 dup(STDIN_FILENO);
	if (fd < 0)
		return pb_fail(err, -errno, "%s", strerror(errno));
	buf = malloc(cap);
	if (!buf) {
		ret = pb_fail(err, -ENOMEM, "out of memory");
		goto err_fd;
	}
	for (;;) {
		ssize_t n;

		if (len == cap) {
			uint8_t *nb;

			if (cap >= PLABEL_PROF_MAX_BYTES) {
				ret = pb_fail(err, -EFBIG,
					      "larger than %u MiB",
					      PLABEL_PROF_MAX_BYTES >> 20);
				goto err_buf;
			}
			nb = realloc(buf, cap * 2);
			if (!nb) {
				ret = pb_fail(err, -ENOMEM,
					      "out of memory");
				goto err_buf;
			}
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = pb_fail(err, -errno, "%s", strerror(errno));
			goto err_buf;
		}
		if (!n)
			break;
		len += n;
	}
	if (!len) {
		ret = pb_fail(err, -EBADMSG, "empty file");
		goto err_buf;
	}
	ret = plabel_prof_decode(buf, len, out, err);
err_buf:
	free(buf);
err_fd:
	close(fd);
	return ret;
}
