/*
 * synth.c - the synthetic model writer of synth.h: turns the plan of
 * synth-plan.c into files.
 *
 * Three steps:
 *   1. plan (synth-plan.c): walk the tensor table (model/tensors.h) in HF
 *      terms (embed, layers, norm, head, vision, mtp) and list, for every
 *      logical weight, how it is generated (its HF name is the generator
 *      key, so both layouts share the floats) and which output tensors it
 *      becomes in the chosen layout (one float tensor, or codes + scales +
 *      biases);
 *   2. place: assign tensors to shards in model order, sort each shard by
 *      (element size descending, name) so every tensor is aligned with no
 *      gaps (the safetensors format requires contiguous offsets), and write
 *      each shard's header;
 *   3. stream: per weight, blocks of rows are generated and encoded in
 *      parallel (each row is a pure function of seed, name and index), then
 *      written with pwrite at their offsets. Memory stays at a few MiB
 *      whatever the model size.
 * Everything goes into a temporary sibling directory that is renamed into
 * place at the end, so a reader never sees a partial model directory.
 * The bytes depend only on the plan (no timestamps, no thread-count effects:
 * rows are generated independently and written at fixed offsets).
 */
#include "common/synth/synth.h"      // defines: jev_synth_write
#include "common/synth/synth-plan.h" // defines: struct jev_synth_plan

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"          // defines: struct jev_buf, jev_buf_*
#include "base/half.h"         // defines: jev_f32_to_bf16, jev_bf16_to_f32
#include "base/pool.h"         // defines: jev_pool_run
#include "base/timing.h"       // defines: jev_now_ms
#include "model/config-json.h" // defines: jev_config_parse
#include "base/read-file.h"    // defines: jev_read_file
#include "io/safetensors.h"    // defines: enum jev_dtype, JEV_ST_MAX_HEADER

/* ---- placement and headers ---- */

struct shard {
    char name[64];       /* file name inside the model directory */
    int fd;              /* open for writing, -1 when closed */
    int32_t *order;      /* [n] tensor indices in file order */
    int32_t n;           /* tensors in this shard */
    uint64_t data_start; /* 8 + padded header length */
    uint64_t data_size;  /* bytes of tensor data */
};

static const struct jev_synth_tensor *sort_base; /* qsort context: placement runs on one thread */

/*
 * File order inside a shard: 8-byte elements first, then 4, 2, 1, so every
 * offset is a multiple of its element size without padding (the header is
 * padded to 8). Names break ties, which also makes the order independent of
 * the plan's.
 */
static int cmp_placement(const void *a, const void *b) {
    const struct jev_synth_tensor *x = &sort_base[*(const int32_t *)a], *y = &sort_base[*(const int32_t *)b];
    size_t ex = jev_dtype_size(x->dtype), ey = jev_dtype_size(y->dtype);
    if (ex != ey)
        return ex > ey ? -1 : 1; /* wide elements first: every offset stays aligned */
    return strcmp(x->name, y->name);
}

/*
 * Splits the weights into shards (model order, at most shard_bytes each unless one weight is larger).
 * Greedy sharding in model order: a weight (with its scales and biases)
 * never straddles two shards, and a weight larger than the limit gets a
 * shard of its own.
 */
static enum jev_status place(struct jev_synth_plan *pl, int64_t shard_bytes, struct shard **out, int32_t *n_out,
                             struct jev_error *err) {
    int32_t ns = 1;
    uint64_t cur = 0;
    for (int32_t i = 0; i < pl->ni; i++) {
        uint64_t b = 0;
        for (int32_t k = 0; k < pl->it[i].n_out; k++)
            b += pl->t[pl->it[i].out[k]].nbytes;
        if (shard_bytes > 0 && cur > 0 && cur + b > (uint64_t)shard_bytes) {
            ns++;
            cur = 0;
        }
        cur += b;
        for (int32_t k = 0; k < pl->it[i].n_out; k++)
            pl->t[pl->it[i].out[k]].shard = ns - 1;
    }
    struct shard *s = calloc((size_t)ns, sizeof *s);
    int32_t *order = malloc((size_t)pl->nt * sizeof *order);
    if (!s || !order) {
        free(s);
        free(order);
        return jev_fail(err, JEV_ERR_NOMEM, "synth: out of memory placing %d tensors", pl->nt);
    }
    int32_t at = 0;
    sort_base = pl->t;
    for (int32_t k = 0; k < ns; k++) {
        s[k].fd = -1;
        s[k].order = order + at;
        if (ns == 1)
            snprintf(s[k].name, sizeof s[k].name, "model.safetensors");
        else
            snprintf(s[k].name, sizeof s[k].name, "model-%05d-of-%05d.safetensors", k + 1, ns);
        for (int32_t i = 0; i < pl->nt; i++)
            if (pl->t[i].shard == k)
                s[k].order[s[k].n++] = i;
        at += s[k].n;
        qsort(s[k].order, (size_t)s[k].n, sizeof *s[k].order, cmp_placement);
        uint64_t off = 0;
        for (int32_t i = 0; i < s[k].n; i++) {
            pl->t[s[k].order[i]].offset = off;
            off += pl->t[s[k].order[i]].nbytes;
        }
        s[k].data_size = off;
    }
    *out = s;
    *n_out = ns;
    return JEV_OK;
}

/*
 * The shard's header JSON, padded with spaces so that the data area starts 8-aligned.
 * The header JSON is written by hand rather than by jansson so that its
 * bytes are fixed by this file alone (key order, spacing, integer
 * formatting), whatever the library version: the golden sha256 covers it.
 */
static enum jev_status shard_header(const struct jev_synth_plan *pl, struct shard *s, struct jev_buf *h,
                                    struct jev_error *err) {
    jev_buf_reset(h);
    jev_buf_printf(h, NULL, "{\"__metadata__\":{\"format\":\"%s\"}", pl->layout == JEV_SYNTH_MLX4 ? "mlx" : "pt");
    for (int32_t i = 0; i < s->n; i++) {
        const struct jev_synth_tensor *t = &pl->t[s->order[i]];
        jev_buf_printf(h, NULL, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, jev_dtype_name(t->dtype));
        for (int32_t d = 0; d < t->ndim; d++)
            jev_buf_printf(h, NULL, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        jev_buf_printf(h, NULL, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->offset,
                       (unsigned long long)(t->offset + t->nbytes));
    }
    jev_buf_add_str(h, "}", NULL);
    while ((8 + h->len) % 8 != 0)
        jev_buf_add_str(h, " ", NULL);
    struct jev_error inner = {0};
    if (jev_buf_status(h, &inner) != JEV_OK)
        return jev_fail(err, inner.status, "synth: the header of %s: %s", s->name, inner.msg);
    s->data_start = 8 + h->len;
    return JEV_OK;
}

/* ---- streaming the data ---- */

/* pwrite until done: short writes and EINTR are retried, other errors named. */
static enum jev_status pwrite_all(int fd, const void *buf, size_t n, uint64_t off, const char *what,
                                  struct jev_error *err) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = pwrite(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return jev_fail(err, JEV_ERR_IO, "synth: writing %s: %s", what, k < 0 ? strerror(errno) : "short write");
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return JEV_OK;
}

/* One block of rows of one weight, generated and encoded in parallel. */
struct block_job {
    const struct jev_synth_plan *pl; /* sizes and quantization */
    const struct jev_synth_item *it; /* the weight */
    uint64_t key;                    /* its generator key */
    int64_t r0;                      /* first row of the block */
    float *vals;                     /* [rows in block][2 * cols] values + permutation scratch */
    uint8_t *enc[3];                 /* encoded rows per output tensor */
    size_t row_bytes[3];             /* bytes per row per output tensor */
};

/* f32 rows are copied; bf16 rows converted (the values are already bf16-exact, so nothing rounds). */
static void encode_float(const float *v, int64_t n, enum jev_dtype dt, uint8_t *out) {
    if (dt == JEV_DTYPE_F32) {
        memcpy(out, v, (size_t)n * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = jev_f32_to_bf16(v[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}

/*
 * One row of a block, run on the pool: draw the values, apply the layout's
 * storage form, encode into the block's buffers at the row's slot. Rows
 * touch disjoint memory, so no locking is needed.
 */
static void block_row(void *arg, int64_t i, int thread) {
    (void)thread;
    const struct block_job *j = arg;
    const struct jev_synth_item *it = j->it;
    const struct jev_synth_plan *pl = j->pl;
    int64_t r = j->r0 + i, cols = it->cols;
    float *v = j->vals + i * 2 * cols, *tmp = v + cols;
    jev_synth_values(it, j->key, (uint64_t)(r * cols), cols, v);
    uint8_t *e0 = j->enc[0] + (size_t)i * j->row_bytes[0];
    enum jev_dtype dt = pl->t[it->out[0]].dtype;
    switch (it->form) {
    case JEV_FORM_FLOAT: encode_float(v, cols, dt, e0); break;
    case JEV_FORM_SHIFTED:
        for (int64_t k = 0; k < cols; k++)
            tmp[k] = 1.0f + v[k];
        encode_float(tmp, cols, dt, e0);
        break;
    case JEV_FORM_PATCH_MLX: {
        /* (c, t, y, x) -> (t, y, x, c) for one output channel; the file shape is [Dv, t, y, x, c] */
        const struct jev_synth_tensor *o = &pl->t[it->out[0]];
        for (int64_t k = 0; k < cols; k++)
            tmp[jev_tensor_patch_mlx_index(k, o->shape[4], o->shape[1], o->shape[2])] = v[k];
        encode_float(tmp, cols, dt, e0);
        break;
    }
    case JEV_FORM_QUANT: {
        /* staged in the row's scratch half (cols floats): codes need cols*bits/32 <= cols/4 words,
           scales and biases 2*cols/group <= cols/16 halves, placed from float cols/2 on */
        uint32_t *codes = (uint32_t *)(void *)tmp;
        uint16_t *sc = (uint16_t *)(void *)(tmp + cols / 2);
        int64_t ng = cols / pl->group;
        jev_synth_quantize(v, cols, pl->bits, pl->group, codes, sc, sc + ng);
        memcpy(e0, codes, j->row_bytes[0]);
        memcpy(j->enc[1] + (size_t)i * j->row_bytes[1], sc, j->row_bytes[1]);
        memcpy(j->enc[2] + (size_t)i * j->row_bytes[2], sc + ng, j->row_bytes[2]);
        break;
    }
    }
}

/*
 * Generates one weight block by block and writes its output tensors.
 * Streams one weight: blocks of about a million values are generated in
 * parallel and written at their final offsets, so memory stays small (the
 * 0.8B embedding alone is 254 M values) and the file never needs seeking
 * back.
 */
static enum jev_status write_item(const struct jev_synth_plan *pl, const struct jev_synth_item *it,
                                  const struct shard *sh, struct jev_pool *pool, uint64_t seed, struct jev_error *err) {
    int64_t block = it->cols >= (1 << 20) ? 1 : (1 << 20) / it->cols;
    if (block > it->rows)
        block = it->rows;
    struct block_job j = {.pl = pl, .it = it, .key = jev_synth_key(seed, it->key)};
    j.vals = malloc((size_t)(block * 2 * it->cols) * sizeof(float));
    bool oom = j.vals == NULL;
    for (int32_t k = 0; k < it->n_out; k++) {
        const struct jev_synth_tensor *o = &pl->t[it->out[k]];
        j.row_bytes[k] = (size_t)(o->nbytes / (uint64_t)it->rows);
        JEV_ASSERT(j.row_bytes[k] * (uint64_t)it->rows == o->nbytes);
        j.enc[k] = calloc((size_t)block, j.row_bytes[k] ? j.row_bytes[k] : 1);
        oom |= j.enc[k] == NULL;
    }
    enum jev_status st = JEV_OK;
    if (oom)
        st = jev_fail(err, JEV_ERR_NOMEM, "synth: out of memory generating %s", it->key);
    for (int64_t r0 = 0; st == JEV_OK && r0 < it->rows; r0 += block) {
        int64_t n = it->rows - r0 < block ? it->rows - r0 : block;
        j.r0 = r0;
        jev_pool_run(pool, n, block_row, &j);
        for (int32_t k = 0; st == JEV_OK && k < it->n_out; k++) {
            const struct jev_synth_tensor *o = &pl->t[it->out[k]];
            uint64_t off = sh[o->shard].data_start + o->offset + (uint64_t)r0 * j.row_bytes[k];
            st = pwrite_all(sh[o->shard].fd, j.enc[k], (size_t)n * j.row_bytes[k], off, o->name, err);
        }
    }
    free(j.vals);
    for (int32_t k = 0; k < it->n_out; k++)
        free(j.enc[k]);
    return st;
}

/* ---- files around the weights ---- */

/* dir/name into out; false when it does not fit. */
static bool path_join(char *out, size_t size, const char *dir, const char *name) {
    int k = snprintf(out, size, "%s/%s", dir, name);
    return k >= 0 && (size_t)k < size;
}

static enum jev_status too_long(const char *dir, struct jev_error *err) {
    return jev_fail(err, JEV_ERR_INVALID_ARG, "synth: path too long under %s", dir);
}

/* Creates path with the bytes (used for small files: configs, index, copies). */
static enum jev_status write_file(const char *path, const void *data, size_t n, struct jev_error *err) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return jev_fail(err, JEV_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    enum jev_status st = pwrite_all(fd, data, n, 0, path, err);
    if (close(fd) != 0 && st == JEV_OK)
        st = jev_fail(err, JEV_ERR_IO, "%s: close: %s", path, strerror(errno));
    return st;
}

/* Copies DIR/NAME; tokenizer.json is about 11 MiB, well under the 256 MiB limit. */
static enum jev_status copy_file(const char *src_dir, const char *name, const char *dst_dir, struct jev_error *err) {
    char src[4096], dst[4096];
    if (!path_join(src, sizeof src, src_dir, name) || !path_join(dst, sizeof dst, dst_dir, name))
        return too_long(dst_dir, err);
    char *buf = NULL;
    size_t n = 0;
    JEV_TRY(jev_read_file(src, (size_t)256 << 20, &buf, &n, err));
    enum jev_status st = write_file(dst, buf, n, err);
    free(buf);
    return st;
}

/*
 * JSON text of a document with reals in their shortest exact form (16 digits when that reads back equal).
 * jansson prints reals with 17 significant digits by default (1e-6 becomes
 * 9.9999999999999995e-07). 16 digits gives the short form for every value
 * a config holds; the document is re-parsed and compared to make sure the
 * short form reads back to exactly the same doubles, else 17 are used.
 */
static char *dump_json(const json_t *doc) {
    size_t flags = JSON_INDENT(2) | JSON_REAL_PRECISION(16);
    char *s = json_dumps(doc, flags);
    json_t *back = s ? json_loads(s, 0, NULL) : NULL;
    bool same = back && json_equal(back, doc);
    json_decref(back);
    if (!same) {
        free(s);
        s = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    }
    return s;
}

/*
 * config.json: the input document, plus the quantization keys of an MLX conversion.
 * For mlx4 both spellings are added, as mlx-vlm's converter writes them.
 */
static enum jev_status write_config(const struct jev_synth_params *p, json_t *doc, const char *dir,
                                    struct jev_error *err) {
    if (p->layout == JEV_SYNTH_MLX4) {
        for (int k = 0; k < 2; k++) {
            json_t *q = json_pack("{s:i,s:i,s:s}", "group_size", (json_int_t)p->group, "bits", (json_int_t)p->bits,
                                  "mode", "affine");
            if (!q || json_object_set_new(doc, k ? "quantization_config" : "quantization", q) != 0)
                return jev_fail(err, JEV_ERR_NOMEM, "synth: out of memory building config.json");
        }
    }
    char *s = dump_json(doc);
    if (!s)
        return jev_fail(err, JEV_ERR_NOMEM, "synth: out of memory writing config.json");
    char path[4096];
    if (!path_join(path, sizeof path, dir, "config.json")) {
        free(s);
        return too_long(dir, err);
    }
    size_t n = strlen(s);
    s[n] = '\0';
    enum jev_status st = write_file(path, s, n, err);
    if (st == JEV_OK) {
        /* a trailing newline, as HF writes it */
        int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd < 0 || write(fd, "\n", 1) != 1)
            st = jev_fail(err, JEV_ERR_IO, "%s: cannot append: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    free(s);
    return st;
}

/* HF's index format: {"metadata": {"total_size"}, "weight_map": {name: shard}}, keys sorted. */
static enum jev_status write_index(const struct jev_synth_plan *pl, const struct shard *sh, int32_t ns, const char *dir,
                                   struct jev_error *err) {
    json_t *map = json_object(), *meta = json_object();
    uint64_t total = 0;
    for (int32_t k = 0; k < ns; k++)
        total += sh[k].data_size;
    bool ok = map && meta && json_object_set_new(meta, "total_size", json_integer((json_int_t)total)) == 0;
    for (int32_t i = 0; ok && i < pl->nt; i++)
        ok = json_object_set_new(map, pl->t[i].name, json_string(sh[pl->t[i].shard].name)) == 0;
    json_t *doc = ok ? json_pack("{s:o,s:o}", "metadata", meta, "weight_map", map) : NULL;
    char *s = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    if (doc)
        json_decref(doc);
    else {
        json_decref(map);
        json_decref(meta);
    }
    if (!s)
        return jev_fail(err, JEV_ERR_NOMEM, "synth: out of memory writing the shard index");
    char path[4096];
    enum jev_status st = path_join(path, sizeof path, dir, "model.safetensors.index.json")
                             ? write_file(path, s, strlen(s), err)
                             : too_long(dir, err);
    free(s);
    return st;
}

/* nftw callback of remove_tree: files and then their directories (FTW_DEPTH). */
static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes a directory tree (our own temporary directories only). */
static void remove_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* ---- the whole directory ---- */

/* Seed 1, hf layout; everything else 0 / NULL = the documented defaults. */
struct jev_synth_params jev_synth_default_params(void) {
    struct jev_synth_params p = {0};
    p.seed = 1;
    p.layout = JEV_SYNTH_HF;
    return p;
}

/*
 * Writes every file of the model into dir (a fresh temporary directory).
 * Plan, place, then write every shard (header, size via ftruncate so the
 * file has its final length before the data is streamed), the weights, the
 * index, config.json and the copied files; the sha256 is taken last, from
 * the file as written.
 */
static enum jev_status write_all(const struct jev_synth_params *p, const struct jev_config *c, json_t *doc, int n_mtp,
                                 const char *dir, struct jev_synth_report *r, struct jev_error *err) {
    struct jev_synth_plan pl = {.layout = p->layout, .bits = p->bits, .group = p->group};
    struct shard *sh = NULL;
    int32_t ns = 0;
    struct jev_buf hdr; /* a header the reader would refuse (over JEV_ST_MAX_HEADER) is not written */
    jev_buf_init(&hdr, JEV_ST_MAX_HEADER);
    struct jev_pool *pool = NULL;
    enum jev_status st = JEV_OK;
    jev_synth_plan_model(&pl, c, n_mtp);
    if (pl.oom) {
        st = jev_fail(err, JEV_ERR_NOMEM, "synth: out of memory planning the tensors");
        goto done;
    }
    if ((st = place(&pl, p->shard_bytes, &sh, &ns, err)) != JEV_OK)
        goto done;
    if ((st = jev_pool_init(&pool, 0, err)) != JEV_OK)
        goto done;
    for (int32_t k = 0; k < ns; k++) {
        char path[4096];
        if (!path_join(path, sizeof path, dir, sh[k].name)) {
            st = too_long(dir, err);
            goto done;
        }
        if ((st = shard_header(&pl, &sh[k], &hdr, err)) != JEV_OK)
            goto done;
        sh[k].fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (sh[k].fd < 0) {
            st = jev_fail(err, JEV_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
            goto done;
        }
        uint8_t len[8];
        for (int i = 0; i < 8; i++)
            len[i] = (uint8_t)((uint64_t)hdr.len >> (8 * i));
        if ((st = pwrite_all(sh[k].fd, len, 8, 0, sh[k].name, err)) != JEV_OK ||
            (st = pwrite_all(sh[k].fd, hdr.data, hdr.len, 8, sh[k].name, err)) != JEV_OK)
            goto done;
        if (ftruncate(sh[k].fd, (off_t)(sh[k].data_start + sh[k].data_size)) != 0) {
            st = jev_fail(err, JEV_ERR_IO, "%s: cannot size to %llu bytes: %s", path,
                          (unsigned long long)(sh[k].data_start + sh[k].data_size), strerror(errno));
            goto done;
        }
        r->bytes += (int64_t)(sh[k].data_start + sh[k].data_size);
    }
    for (int32_t i = 0; i < pl.ni; i++)
        if ((st = write_item(&pl, &pl.it[i], sh, pool, p->seed, err)) != JEV_OK)
            goto done;
    for (int32_t k = 0; k < ns; k++) {
        int fd = sh[k].fd;
        sh[k].fd = -1;
        if (close(fd) != 0) {
            st = jev_fail(err, JEV_ERR_IO, "%s: close: %s", sh[k].name, strerror(errno));
            goto done;
        }
    }
    if (ns > 1 && (st = write_index(&pl, sh, ns, dir, err)) != JEV_OK)
        goto done;
    if ((st = write_config(p, doc, dir, err)) != JEV_OK)
        goto done;
    if ((st = copy_file(p->tokenizer_dir, "tokenizer.json", dir, err)) != JEV_OK ||
        (st = copy_file(p->tokenizer_dir, "tokenizer_config.json", dir, err)) != JEV_OK ||
        (st = copy_file(p->assets_dir, "preprocessor_config.json", dir, err)) != JEV_OK ||
        (st = copy_file(p->assets_dir, "chat_template.jinja", dir, err)) != JEV_OK)
        goto done;
    char path[4096];
    if (!path_join(path, sizeof path, dir, ns > 1 ? "model.safetensors.index.json" : "model.safetensors")) {
        st = too_long(dir, err);
        goto done;
    }
    if ((st = jev_sha256_file(path, r->sha256, err)) != JEV_OK)
        goto done;
    r->n_tensors = pl.nt;
    r->n_shards = ns;
    r->n_params = pl.n_params;
done:
    for (int32_t k = 0; sh && k < ns; k++)
        if (sh[k].fd >= 0)
            close(sh[k].fd);
    if (sh)
        free(sh[0].order);
    free(sh);
    jev_buf_free(&hdr);
    jev_pool_free(pool);
    jev_synth_plan_free(&pl);
    return st;
}

/*
 * Arguments and the config are checked before anything is created. The
 * directory appears atomically: written as OUT.tmp-XXXXXX, then renamed; an
 * existing OUT (with force) is first renamed aside onto an empty
 * placeholder and removed only after the new one is in place, so a failure
 * at any point leaves either the old directory or nothing, never a mix.
 */
enum jev_status jev_synth_write(const struct jev_synth_params *in, struct jev_synth_report *r, struct jev_error *err) {
    double t0 = jev_now_ms();
    struct jev_synth_params p = *in;
    memset(r, 0, sizeof *r);
    if (!p.config_path || !p.out_dir || !p.out_dir[0])
        return jev_fail(err, JEV_ERR_INVALID_ARG, "synth: a config and an output directory are required");
    if (!p.tokenizer_dir)
        p.tokenizer_dir = ".cache/tokenizer-qwen3";
    if (!p.assets_dir)
        p.assets_dir = "configs";
    if (p.bits == 0)
        p.bits = 4;
    if (p.group == 0)
        p.group = 64;
    if (p.bits != 2 && p.bits != 3 && p.bits != 4 && p.bits != 5 && p.bits != 6 && p.bits != 8)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "synth: --bits %d is not one of 2, 3, 4, 5, 6, 8", p.bits);
    if (p.group < 32 || (p.group & (p.group - 1)) != 0 || p.group > 4096)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "synth: --group %d is not a power of two in 32..4096", p.group);
    if (p.shard_bytes < 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "synth: shard size must be positive");
    struct stat sb;
    bool exists = stat(p.out_dir, &sb) == 0;
    if (exists && !p.force)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "synth: %s exists (pass --force to replace it)", p.out_dir);
    if (exists && !S_ISDIR(sb.st_mode))
        return jev_fail(err, JEV_ERR_INVALID_ARG, "synth: %s exists and is not a directory", p.out_dir);

    /* the config, validated by the same parser the loader uses */
    char *json = NULL;
    size_t n = 0;
    JEV_TRY(jev_read_file(p.config_path, JEV_CONFIG_MAX_BYTES, &json, &n, err));
    struct jev_config c;
    enum jev_status st = jev_config_parse(json, n, p.config_path, &c, NULL, err);
    json_t *doc = st == JEV_OK ? json_loadb(json, n, 0, NULL) : NULL;
    free(json);
    if (st != JEV_OK)
        return st;
    if (!doc)
        return jev_fail(err, JEV_ERR_NOMEM, "synth: out of memory reading %s", p.config_path);
    json_t *tc = json_object_get(doc, "text_config");
    json_t *mtp = json_object_get(tc ? tc : doc, "mtp_num_hidden_layers");
    int n_mtp = json_is_integer(mtp) && json_integer_value(mtp) > 0 && json_integer_value(mtp) < 16
                    ? (int)json_integer_value(mtp)
                    : 0;

    char tmp[4096], old[4096];
    int tl = snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", p.out_dir);
    if (tl < 0 || (size_t)tl >= sizeof tmp - 64) {
        json_decref(doc);
        return jev_fail(err, JEV_ERR_INVALID_ARG, "synth: output path too long");
    }
    if (!mkdtemp(tmp)) {
        json_decref(doc);
        return jev_fail(err, JEV_ERR_IO, "synth: cannot create a directory next to %s: %s", p.out_dir, strerror(errno));
    }
    chmod(tmp, 0755); /* mkdtemp makes it private; a model directory is not */
    st = write_all(&p, &c, doc, n_mtp, tmp, r, err);
    json_decref(doc);
    if (st == JEV_OK && exists) {
        /* move the old directory aside (onto an empty placeholder), then ours into place */
        int ol = snprintf(old, sizeof old, "%s.old-XXXXXX", p.out_dir);
        if (ol < 0 || (size_t)ol >= sizeof old || !mkdtemp(old) || rename(p.out_dir, old) != 0)
            st = jev_fail(err, JEV_ERR_IO, "synth: cannot move the old %s aside: %s", p.out_dir, strerror(errno));
    }
    if (st == JEV_OK && rename(tmp, p.out_dir) != 0)
        st = jev_fail(err, JEV_ERR_IO, "synth: cannot rename %s to %s: %s", tmp, p.out_dir, strerror(errno));
    if (st != JEV_OK) {
        remove_tree(tmp);
        return st;
    }
    if (exists)
        remove_tree(old);
    r->seconds = (jev_now_ms() - t0) / 1e3;
    return JEV_OK;
}
