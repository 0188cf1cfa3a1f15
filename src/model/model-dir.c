/*
 * model-dir.c - config files and the weight mapping of model-dir.h.
 *
 * The mapping walks the tensor table (model/tensors.h: text, then the
 * vision tower) and, for every tensor it lists, builds the layout's name,
 * finds the tensor and checks its dtype class and exact shape before
 * pointing at it or converting it. Messages name the tensor and
 * the shape that was expected, so a wrong checkpoint fails at load time with
 * one line instead of producing garbage later.
 *
 * Matrices stay in the mapping (no copy); their data must be aligned to the
 * element size (safetensors writers align; a file that does not is refused,
 * since the kernels read words). Vectors are converted to f32 into the
 * arena, whose size jev_weights_arena_bytes computes from the config alone.
 */
#include "model/model-dir.h" // defines: jev_weights_map, jev_model_dir_read_config

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/half.h"      // defines: jev_bf16_to_f32, jev_f16_to_f32
#include "base/read-file.h" // defines: jev_read_file
#include "model/tensors.h"  // defines: jev_tensor_walk_next, jev_tensor_table_check

/* ---- layouts ---- */

static bool starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/*
 * Counting both prefixes over all names (instead of testing one tensor)
 * catches a directory that mixes files from two conversions, which would
 * otherwise load half the weights from the wrong convention. mtp.* and any
 * other foreign names do not vote.
 */
enum jev_status jev_layout_detect(const struct jev_st_set *s, enum jev_layout *out, struct jev_error *err) {
    const struct jev_layout_names h = jev_layout_names(JEV_LAYOUT_HF), x = jev_layout_names(JEV_LAYOUT_MLX);
    int64_t hf = 0, mlx = 0;
    for (int32_t i = 0; i < s->n_tensors; i++) {
        const char *n = s->by_name[i]->name;
        hf += starts_with(n, h.text) || starts_with(n, h.vision);
        mlx += starts_with(n, x.text) || starts_with(n, x.vision);
    }
    if (hf > 0 && mlx > 0)
        return jev_fail(err, JEV_ERR_FORMAT,
                        "%s: tensor names mix the HF (model.language_model.*: %lld) and MLX "
                        "(language_model.model.*: %lld) layouts",
                        s->dir, (long long)hf, (long long)mlx);
    if (hf == 0 && mlx == 0)
        return jev_fail(err, JEV_ERR_FORMAT,
                        "%s: no tensor named model.language_model.* (HF layout) or language_model.model.* (MLX "
                        "layout)",
                        s->dir);
    *out = hf > 0 ? JEV_LAYOUT_HF : JEV_LAYOUT_MLX;
    return JEV_OK;
}

/* ---- config files ---- */

/*
 * config.json is required; generation_config.json is optional (HF writes it,
 * mlx conversions copy it) and only adds stop tokens. Paths in messages are
 * the full paths, so a user with several model directories sees which one.
 */
enum jev_status jev_model_dir_read_config(const char *dir, struct jev_config *c, struct jev_quant_overrides *q,
                                          struct jev_error *err) {
    char path[4096];
    char *json = NULL;
    size_t n = 0;
    if (q)
        memset(q, 0, sizeof *q);
    snprintf(path, sizeof path, "%s/config.json", dir);
    JEV_TRY(jev_read_file(path, JEV_CONFIG_MAX_BYTES, &json, &n, err));
    enum jev_status st = jev_config_parse(json, n, path, c, q, err);
    free(json);
    if (st != JEV_OK)
        return st;
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return JEV_OK; /* optional */
    JEV_TRY(jev_read_file(path, JEV_CONFIG_MAX_BYTES, &json, &n, err));
    st = jev_config_add_generation(json, n, path, c, err);
    free(json);
    return st;
}

/* ---- arena sizing ---- */

/*
 * Bytes of one arena slice holding n floats.
 * The arena hands out 64-byte aligned slices, so the size is summed slice
 * by slice exactly as jev_weights_map allocates them: the layer and block
 * tables, then every tensor of the table's walk that is not a matrix (the
 * matrices stay in the mapping). jev_weights_map asserts the two agree.
 */
static size_t fl(int64_t n) { return jev_align64((size_t)n * sizeof(float)); }

size_t jev_weights_arena_bytes(const struct jev_config *c) {
    size_t b = jev_align64((size_t)c->text.n_layers * sizeof(struct jev_layer_weights));
    if (c->has_vision)
        b += jev_align64((size_t)c->vision.depth * sizeof(struct jev_vision_block_weights));
    struct jev_tensor_walk w;
    struct jev_tensor_at at;
    jev_tensor_walk_init(&w, c, c->has_vision, 0);
    while (jev_tensor_walk_next(&w, &at))
        if (at.k->form != JEV_TFORM_MATRIX)
            b += fl(at.rows * at.cols);
    return b;
}

/* ---- the mapper ---- */

struct mapper {
    const struct jev_st_set *s;          /* tensors */
    enum jev_layout layout;              /* which names and layouts */
    const struct jev_config *c;          /* sizes */
    const struct jev_quant_overrides *q; /* per-module quantization, may be NULL */
    struct jev_arena *a;                 /* vector memory */
    struct jev_error *err;               /* failures */
};

/*
 * Formats a tensor or module name into buf (256 bytes, JEV_TENSOR_NAME_MAX).
 * A module's name from the table is at most about 60 bytes, so its
 * .weight / .scales / .biases never truncate.
 */
static const char *nm(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *nm(char *buf, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, 256, fmt, ap);
    va_end(ap);
    return buf;
}

/* Fails with the model directory in front of the message. */
static enum jev_status mfail(struct mapper *m, enum jev_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum jev_status mfail(struct mapper *m, enum jev_status st, const char *fmt, ...) {
    char msg[JEV_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return jev_fail(m->err, st, "%s: %s", m->s->dir, msg);
}

/* Float dtypes a vector may be stored in (converted to f32 on load). */
static bool is_float(enum jev_dtype t) {
    return t == JEV_DTYPE_F32 || t == JEV_DTYPE_BF16 || t == JEV_DTYPE_F16 || t == JEV_DTYPE_F64;
}

/*
 * Element i of a float tensor as f32 (unaligned-safe).
 * memcpy instead of a cast: vector tensors may sit at any offset in a file
 * (the format does not require alignment), and they are read only once.
 */
static float elem_f32(const struct jev_st_tensor *t, uint64_t i) {
    const uint8_t *p = (const uint8_t *)t->data;
    switch (t->dtype) {
    case JEV_DTYPE_F32: {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    case JEV_DTYPE_F64: {
        double d;
        memcpy(&d, p + 8 * i, 8);
        return (float)d;
    }
    case JEV_DTYPE_BF16:
    case JEV_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return t->dtype == JEV_DTYPE_BF16 ? jev_bf16_to_f32(h) : jev_f16_to_f32(h);
    }
    default: return 0.0f;
    }
}

/* Exact shape equality; a [C, 1, K] conv is not a [C, K] one, on purpose. */
static bool shape_is(const struct jev_st_tensor *t, int32_t ndim, const int64_t *want) {
    if (t->ndim != ndim)
        return false;
    for (int32_t i = 0; i < ndim; i++)
        if (t->shape[i] != want[i])
            return false;
    return true;
}

/* "tensor 'x': shape [a, b], expected [c, d]": both shapes, so the fix is obvious. */
static enum jev_status bad_shape(struct mapper *m, const struct jev_st_tensor *t, int32_t ndim, const int64_t *want) {
    char got[160], exp[160];
    return mfail(m, JEV_ERR_FORMAT, "tensor '%s': shape %s, expected %s", t->name,
                 jev_st_shape_str(t->shape, t->ndim, got, sizeof got), jev_st_shape_str(want, ndim, exp, sizeof exp));
}

/*
 * Matrices are used in place by kernels that load words (u32 codes, f32,
 * bf16 pairs); a misaligned pointer would be undefined behaviour in C and
 * slow or faulting on other targets. Writers (safetensors, mlx) align
 * tensors, so a misaligned one is refused rather than copied.
 */
static enum jev_status check_aligned(struct mapper *m, const struct jev_st_tensor *t) {
    size_t al = jev_dtype_size(t->dtype);
    if ((uintptr_t)t->data % al != 0)
        return mfail(m, JEV_ERR_UNSUPPORTED,
                     "tensor '%s': data at file offset %llu is not aligned to its %zu-byte elements", t->name,
                     (unsigned long long)((const uint8_t *)t->data - t->file->bytes), al);
    return JEV_OK;
}

/*
 * A float tensor of the forms that are not matrices, converted to f32 into
 * the arena. They are small and read in the token loop, so they are
 * converted once into model memory:
 * - (1 + w) norms: HF stores w, the multiplier 1 + w is formed here in f32,
 *   never in bf16 (spec pitfall 2: forming it in bf16 rounds small offsets
 *   away); MLX stores it already shifted;
 * - conv taps: both layouts flatten to c * K + j (HF's middle dimension is
 *   the single input channel per group, MLX's last one), so only the
 *   expected shape differs; the taps keep F.conv1d's order, where tap K-1
 *   multiplies the current token;
 * - the patch embedding: rows in the pixel order the preprocessor produces,
 *   (c, t, y, x); MLX's channels-last file order (t, y, x, c) is permuted
 *   back here, once, so the vision code has one layout.
 */
static enum jev_status map_floats(struct mapper *m, const struct jev_tensor_at *at, const char *name, float **out) {
    int64_t want[5];
    int32_t nd = jev_tensor_file_shape(at, m->c, m->layout, want);
    const struct jev_st_tensor *t = jev_st_set_find(m->s, name);
    char exp[160];
    if (!t)
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s' missing (expected a float %s%s)", name, nd == 1 ? "vector " : "",
                     jev_st_shape_str(want, nd, exp, sizeof exp));
    if (!is_float(t->dtype))
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s': dtype %s, expected F32, BF16 or F16", name,
                     jev_dtype_name(t->dtype));
    if (!shape_is(t, nd, want))
        return bad_shape(m, t, nd, want);
    float *v = jev_arena_alloc_array(m->a, (size_t)at->rows * (size_t)at->cols, sizeof(float), m->err);
    if (!v)
        return m->err->status;
    const struct jev_vision_config *vc = &m->c->vision;
    bool one_plus = at->k->form == JEV_TFORM_NORM1P && m->layout == JEV_LAYOUT_HF;
    int64_t *perm = NULL; /* the patch row's permutation, computed once rather than per element */
    if (at->k->form == JEV_TFORM_PATCH && m->layout == JEV_LAYOUT_MLX) {
        perm = malloc((size_t)at->cols * sizeof *perm);
        if (!perm)
            return mfail(m, JEV_ERR_NOMEM, "tensor '%s': no memory for its %lld-element row permutation", name,
                         (long long)at->cols);
        for (int64_t i = 0; i < at->cols; i++)
            perm[i] = jev_tensor_patch_mlx_index(i, vc->in_channels, vc->temporal_patch, vc->patch);
    }
    for (int64_t r = 0; r < at->rows; r++)
        for (int64_t i = 0; i < at->cols; i++) {
            float x = elem_f32(t, (uint64_t)(r * at->cols + (perm ? perm[i] : i)));
            v[r * at->cols + i] = one_plus ? 1.0f + x : x;
        }
    free(perm);
    *out = v;
    return JEV_OK;
}

/*
 * The quantization that config.json expects for `module`: false when it must be float.
 * What config.json says module `module` should be: its per-module entry if
 * any (which may say "not quantized"), else the defaults. Returns false when
 * the module must not be quantized (no quantization at all, or `false`).
 */
static bool expected_quant(struct mapper *m, const char *module, int32_t *bits, int32_t *group) {
    const struct jev_quant_override *o = jev_quant_overrides_find(m->q, module);
    if (o) {
        *bits = o->bits;
        *group = o->group;
        return o->quantized;
    }
    *bits = m->c->quant.bits;
    *group = m->c->quant.group_size;
    return m->c->quant.present;
}

/*
 * An affine-quantized [rows, cols] matrix. bits and group size are derived
 * from the shapes (bits = 32 * packed / cols, group = cols / scale_cols) and
 * must then equal what the config says for this module: mixed-precision
 * conversions exist, and a silent mismatch would dequantize garbage.
 * Scales and biases must agree in dtype and shape with each other.
 */
static enum jev_status map_quantized(struct mapper *m, const char *module, const struct jev_st_tensor *w, int32_t rows,
                                     int32_t cols, struct jev_matrix *out) {
    char sn[256], bn[256];
    const struct jev_st_tensor *sc = jev_st_set_find(m->s, nm(sn, "%s.scales", module));
    const struct jev_st_tensor *bi = jev_st_set_find(m->s, nm(bn, "%s.biases", module));
    if (!sc || !bi)
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s' is U32 (quantized) but '%s' is missing", w->name, sc ? bn : sn);
    if (w->ndim != 2 || w->shape[0] != rows || w->shape[1] == 0 || (w->shape[1] * 32) % cols != 0)
        return mfail(m, JEV_ERR_FORMAT,
                     "tensor '%s': quantized shape [%lld, %lld] does not pack [%d, %d] (expected [%d, %d * bits / "
                     "32])",
                     w->name, (long long)w->shape[0], (long long)(w->ndim > 1 ? w->shape[1] : 0), rows, cols, rows,
                     cols);
    int64_t bits = w->shape[1] * 32 / cols;
    if (sc->dtype != JEV_DTYPE_F32 && sc->dtype != JEV_DTYPE_BF16 && sc->dtype != JEV_DTYPE_F16)
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s': dtype %s, expected F32, BF16 or F16", sc->name,
                     jev_dtype_name(sc->dtype));
    if (sc->ndim != 2 || sc->shape[0] != rows || sc->shape[1] == 0 || cols % sc->shape[1] != 0)
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s': shape %s does not give whole groups of [%d, %d]", sc->name,
                     jev_st_shape_str(sc->shape, sc->ndim, sn, sizeof sn), rows, cols);
    if (bi->dtype != sc->dtype || !shape_is(bi, sc->ndim, sc->shape))
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s': dtype and shape must equal those of '%s'", bi->name, sc->name);
    int64_t group = cols / sc->shape[1];
    int32_t ebits, egroup;
    if (!expected_quant(m, module, &ebits, &egroup))
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s' is quantized (%lld bits, group %lld), but config.json %s", w->name,
                     (long long)bits, (long long)group,
                     m->c->quant.present ? "marks this module as not quantized" : "has no \"quantization\"");
    if (bits != ebits || group != egroup)
        return mfail(m, JEV_ERR_FORMAT,
                     "tensor '%s': quantized with %lld bits, group size %lld (from its shapes), but config.json "
                     "says %d bits, group size %d",
                     w->name, (long long)bits, (long long)group, ebits, egroup);
    if (bits != 2 && bits != 3 && bits != 4 && bits != 5 && bits != 6 && bits != 8)
        return mfail(m, JEV_ERR_UNSUPPORTED, "tensor '%s': %lld-bit codes are not supported", w->name, (long long)bits);
    JEV_TRY(check_aligned(m, w));
    JEV_TRY(check_aligned(m, sc));
    JEV_TRY(check_aligned(m, bi));
    *out = (struct jev_matrix){
        .type = JEV_MTYPE_QAFFINE,
        .rows = rows,
        .cols = cols,
        .data = w->data,
        .scales = sc->data,
        .biases = bi->data,
        .stype = sc->dtype == JEV_DTYPE_F32    ? JEV_STYPE_F32
                 : sc->dtype == JEV_DTYPE_BF16 ? JEV_STYPE_BF16
                                               : JEV_STYPE_F16,
        .bits = (int32_t)bits,
        .group = (int32_t)group,
        .name = w->name,
    };
    return JEV_OK;
}

/* A [rows, cols] matrix `module`.weight: float rows, or affine-quantized (weight U32 + scales + biases). */
static enum jev_status map_matrix(struct mapper *m, const char *module, int32_t rows, int32_t cols,
                                  struct jev_matrix *out) {
    char wn[256], sn[256];
    const struct jev_st_tensor *w = jev_st_set_find(m->s, nm(wn, "%s.weight", module));
    if (!w)
        return mfail(m, JEV_ERR_FORMAT,
                     "tensor '%s' missing (expected [%d, %d] in F32/BF16/F16, or U32 codes with .scales/.biases)", wn,
                     rows, cols);
    if (w->dtype == JEV_DTYPE_U32)
        return map_quantized(m, module, w, rows, cols, out);
    if (jev_st_set_find(m->s, nm(sn, "%s.scales", module)))
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s' has '%s' but is %s, not U32 codes", wn, sn,
                     jev_dtype_name(w->dtype));
    if (w->dtype != JEV_DTYPE_F32 && w->dtype != JEV_DTYPE_BF16 && w->dtype != JEV_DTYPE_F16)
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s': dtype %s, expected F32, BF16, F16 or U32 (quantized)", wn,
                     jev_dtype_name(w->dtype));
    int64_t want[2] = {rows, cols};
    if (!shape_is(w, 2, want))
        return bad_shape(m, w, 2, want);
    JEV_TRY(check_aligned(m, w));
    *out = (struct jev_matrix){
        .type = w->dtype == JEV_DTYPE_F32    ? JEV_MTYPE_F32
                : w->dtype == JEV_DTYPE_BF16 ? JEV_MTYPE_BF16
                                             : JEV_MTYPE_F16,
        .rows = rows,
        .cols = cols,
        .data = w->data,
        .name = w->name,
    };
    return JEV_OK;
}

/* ---- the walk ---- */

/*
 * The mapping walks the tensor table (text, then vision; the MTP head is
 * never asked for): each tensor's name in the layout, then a matrix in
 * place or a float tensor into the arena, at its slot in w. A tied model's
 * head is the embedding matrix itself (the same jev_matrix), so the LM head
 * kernels see the quantized embedding in mlx4 exactly as mlx-vlm's
 * embed_tokens.as_linear does. On failure w holds pointers into a
 * part-filled arena; the caller frees the arena and ignores w.
 */
enum jev_status jev_weights_map(const struct jev_st_set *s, enum jev_layout layout, const struct jev_config *c,
                                const struct jev_quant_overrides *q, struct jev_arena *a, struct jev_weights *w,
                                struct jev_error *err) {
    /* a table that leaves a slot empty or lands two tensors on one is a bug here, not bad input */
    JEV_ASSERT(jev_tensor_table_check(jev_tensor_table, jev_tensor_count, NULL) == JEV_OK);
    struct mapper m = {s, layout, c, q, a, err};
    memset(w, 0, sizeof *w);
    size_t start = a->used;
    w->text.layers = jev_arena_alloc_array(a, (size_t)c->text.n_layers, sizeof *w->text.layers, err);
    if (!w->text.layers)
        return err->status;
    for (int32_t i = 0; i < c->text.n_layers; i++)
        w->text.layers[i].kind = (enum jev_layer_kind)c->text.layer_kind[i];
    if (c->has_vision) {
        w->vision.blocks = jev_arena_alloc_array(a, (size_t)c->vision.depth, sizeof *w->vision.blocks, err);
        if (!w->vision.blocks)
            return err->status;
    }
    struct jev_tensor_walk walk;
    struct jev_tensor_at at;
    jev_tensor_walk_init(&walk, c, c->has_vision, 0);
    while (jev_tensor_walk_next(&walk, &at)) {
        char name[JEV_TENSOR_NAME_MAX];
        jev_tensor_name(&at, layout, name);
        void *slot = jev_tensor_slot(&at, w);
        if (at.k->form == JEV_TFORM_MATRIX)
            JEV_TRY(map_matrix(&m, name, (int32_t)at.rows, (int32_t)at.cols, slot));
        else
            JEV_TRY(map_floats(&m, &at, name, slot));
    }
    if (c->text.tie_embeddings)
        w->text.lm_head = w->text.embed; /* a stored lm_head of a tied model is ignored, as HF does */
    /* the sizing function and the walk must agree; a mismatch is a bug here, not bad input */
    JEV_ASSERT(a->used - start == jev_weights_arena_bytes(c));
    return JEV_OK;
}
