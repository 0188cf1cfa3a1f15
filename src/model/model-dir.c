/*
 * model-dir.c - config files and the weight mapping of model-dir.h.
 *
 * The mapping walks the model the way the forward pass will use it (text
 * layers, then the vision tower) and, for every tensor it expects, builds
 * the layout's name, finds the tensor and checks its dtype class and exact
 * shape before pointing at it or converting it. Messages name the tensor and
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

/* ---- layouts ---- */

/* The short names jev info prints and synth's --layout mirrors (mlx4 = mlx with 4-bit codes). */
const char *jev_layout_name(enum jev_layout l) { return l == JEV_LAYOUT_MLX ? "mlx" : "hf"; }

/*
 * The renames of mlx-vlm's sanitize (spec section 10.2): the text model moves
 * from model.language_model.* to language_model.model.*, the vision tower
 * from model.visual.* to vision_tower.*, the head to language_model.lm_head.
 */
struct jev_layout_names jev_layout_names(enum jev_layout l) {
    if (l == JEV_LAYOUT_MLX)
        return (struct jev_layout_names){"language_model.model.", "language_model.lm_head", "vision_tower."};
    return (struct jev_layout_names){"model.language_model.", "lm_head", "model.visual."};
}

static bool starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/*
 * Counting both prefixes over all names (instead of testing one tensor)
 * catches a directory that mixes files from two conversions, which would
 * otherwise load half the weights from the wrong convention. mtp.* and any
 * other foreign names do not vote.
 */
enum jev_status jev_layout_detect(const struct jev_st_set *s, enum jev_layout *out, struct jev_error *err) {
    int64_t hf = 0, mlx = 0;
    for (int32_t i = 0; i < s->n_tensors; i++) {
        const char *n = s->by_name[i]->name;
        hf += starts_with(n, "model.language_model.") || starts_with(n, "model.visual.");
        mlx += starts_with(n, "language_model.model.") || starts_with(n, "vision_tower.");
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
 * by slice exactly as jev_weights_map allocates them, in the same order of
 * kinds. jev_weights_map asserts the two agree.
 */
static size_t fl(int64_t n) { return jev_align64((size_t)n * sizeof(float)); }

size_t jev_weights_arena_bytes(const struct jev_config *c) {
    const struct jev_text_config *t = &c->text;
    size_t b = jev_align64((size_t)t->n_layers * sizeof(struct jev_layer_weights)) + fl(t->hidden);
    for (int i = 0; i < t->n_layers; i++) {
        b += 2 * fl(t->hidden);
        if (t->layer_kind[i] == JEV_LAYER_LINEAR)
            b += fl((int64_t)t->conv_dim * t->conv_kernel) + 2 * fl(t->lin_v_heads) + fl(t->lin_v_dim);
        else
            b += 2 * fl(t->head_dim);
    }
    if (c->has_vision) {
        const struct jev_vision_config *v = &c->vision;
        b += jev_align64((size_t)v->depth * sizeof(struct jev_vision_block_weights));
        b += fl((int64_t)v->hidden * v->patch_dim) + fl(v->hidden);
        b += (size_t)v->depth * (6 * fl(v->hidden) + fl(3 * v->hidden) + fl(v->intermediate));
        b += 2 * fl(v->hidden) + fl(v->merge_in) + fl(v->out_hidden);
    }
    return b;
}

/* ---- the mapper ---- */

struct mapper {
    const struct jev_st_set *s;          /* tensors */
    enum jev_layout layout;              /* which names and layouts */
    struct jev_layout_names names;       /* prefixes of the layout */
    const struct jev_config *c;          /* sizes */
    const struct jev_quant_overrides *q; /* per-module quantization, may be NULL */
    struct jev_arena *a;                 /* vector memory */
    struct jev_error *err;               /* failures */
};

/*
 * Formats a tensor or module name into buf (256 bytes).
 * Tensor names are built into a caller's 256-byte buffer: the longest real
 * name ("language_model.model.layers.23.linear_attn.in_proj_qkv.biases") is
 * about 60 bytes, so truncation cannot happen for any config this parser
 * accepts (layer indices are at most 3 digits).
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
 * A float vector [n] converted to f32 into the arena; one_plus forms 1 + w (HF zero-centred norms).
 * Vectors (norms, biases, gates, A_log) are small and read in the token
 * loop, so they are converted once to f32 in model memory. one_plus forms
 * the multiplier 1 + w in f32, never in bf16 (spec pitfall 2: forming it
 * in bf16 rounds small offsets away).
 */
static enum jev_status map_vec(struct mapper *m, const char *name, int32_t n, bool one_plus, float **out) {
    const struct jev_st_tensor *t = jev_st_set_find(m->s, name);
    if (!t)
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s' missing (expected a float vector [%d])", name, n);
    if (!is_float(t->dtype))
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s': dtype %s, expected F32, BF16 or F16", name,
                     jev_dtype_name(t->dtype));
    int64_t want[1] = {n};
    if (!shape_is(t, 1, want))
        return bad_shape(m, t, 1, want);
    float *v = jev_arena_alloc_array(m->a, (size_t)n, sizeof(float), m->err);
    if (!v)
        return m->err->status;
    for (int32_t i = 0; i < n; i++)
        v[i] = one_plus ? 1.0f + elem_f32(t, (uint64_t)i) : elem_f32(t, (uint64_t)i);
    *out = v;
    return JEV_OK;
}

/* An RMSNorm gamma of the (1 + w) kind: shifted here for HF, stored shifted by MLX. */
static enum jev_status map_norm1p(struct mapper *m, const char *name, int32_t n, float **out) {
    return map_vec(m, name, n, m->layout == JEV_LAYOUT_HF, out);
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

/*
 * conv1d taps to [C][K]: HF [C, 1, K] and MLX [C, K, 1] both flatten to c*K + j.
 * The depthwise conv taps. Both layouts flatten to c * K + j (HF's middle
 * dimension is the single input channel per group, MLX's last one), so only
 * the expected shape differs; the taps keep F.conv1d's order, where tap K-1
 * multiplies the current token.
 */
static enum jev_status map_conv(struct mapper *m, const char *name, int32_t ch, int32_t k, float **out) {
    const struct jev_st_tensor *t = jev_st_set_find(m->s, name);
    int64_t hf[3] = {ch, 1, k}, mlx[3] = {ch, k, 1};
    const int64_t *want = m->layout == JEV_LAYOUT_HF ? hf : mlx;
    if (!t)
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s' missing (expected a float [%d, %d, %d])", name, (int)want[0],
                     (int)want[1], (int)want[2]);
    if (!is_float(t->dtype))
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s': dtype %s, expected F32, BF16 or F16", name,
                     jev_dtype_name(t->dtype));
    if (!shape_is(t, 3, want))
        return bad_shape(m, t, 3, want);
    float *v = jev_arena_alloc_array(m->a, (size_t)ch * (size_t)k, sizeof(float), m->err);
    if (!v)
        return m->err->status;
    for (uint64_t i = 0; i < (uint64_t)ch * (uint64_t)k; i++)
        v[i] = elem_f32(t, i);
    *out = v;
    return JEV_OK;
}

/* ---- text ---- */

/*
 * One decoder layer: the two 1 + w norms, the token mixer of its kind
 * (Gated DeltaNet or gated attention), and the SwiGLU MLP. Shapes follow
 * the derived config sizes (conv_dim = 2 * key_dim + value_dim, q_proj =
 * 2 * Hq * dh for the per-head [query | gate] layout).
 */
static enum jev_status map_layer(struct mapper *m, int i, struct jev_layer_weights *l) {
    const struct jev_text_config *t = &m->c->text;
    const char *tp = m->names.text;
    char b[256];
    l->kind = (enum jev_layer_kind)t->layer_kind[i];
    JEV_TRY(map_norm1p(m, nm(b, "%slayers.%d.input_layernorm.weight", tp, i), t->hidden, &l->in_norm));
    JEV_TRY(map_norm1p(m, nm(b, "%slayers.%d.post_attention_layernorm.weight", tp, i), t->hidden, &l->post_norm));
    if (l->kind == JEV_LAYER_LINEAR) {
        struct jev_linear_attn_weights *a = &l->lin;
        JEV_TRY(map_matrix(m, nm(b, "%slayers.%d.linear_attn.in_proj_qkv", tp, i), t->conv_dim, t->hidden, &a->in_qkv));
        JEV_TRY(
            map_matrix(m, nm(b, "%slayers.%d.linear_attn.in_proj_z", tp, i), t->lin_value_dim, t->hidden, &a->in_z));
        JEV_TRY(map_matrix(m, nm(b, "%slayers.%d.linear_attn.in_proj_b", tp, i), t->lin_v_heads, t->hidden, &a->in_b));
        JEV_TRY(map_matrix(m, nm(b, "%slayers.%d.linear_attn.in_proj_a", tp, i), t->lin_v_heads, t->hidden, &a->in_a));
        JEV_TRY(map_matrix(m, nm(b, "%slayers.%d.linear_attn.out_proj", tp, i), t->hidden, t->lin_value_dim, &a->out));
        JEV_TRY(
            map_conv(m, nm(b, "%slayers.%d.linear_attn.conv1d.weight", tp, i), t->conv_dim, t->conv_kernel, &a->conv));
        JEV_TRY(map_vec(m, nm(b, "%slayers.%d.linear_attn.dt_bias", tp, i), t->lin_v_heads, false, &a->dt_bias));
        JEV_TRY(map_vec(m, nm(b, "%slayers.%d.linear_attn.A_log", tp, i), t->lin_v_heads, false, &a->a_log));
        /* the gated norm is a plain multiplier in both layouts (never shifted) */
        JEV_TRY(map_vec(m, nm(b, "%slayers.%d.linear_attn.norm.weight", tp, i), t->lin_v_dim, false, &a->norm));
    } else {
        struct jev_full_attn_weights *a = &l->full;
        JEV_TRY(map_matrix(m, nm(b, "%slayers.%d.self_attn.q_proj", tp, i), t->q_proj_out, t->hidden, &a->q));
        JEV_TRY(map_matrix(m, nm(b, "%slayers.%d.self_attn.k_proj", tp, i), t->kv_dim, t->hidden, &a->k));
        JEV_TRY(map_matrix(m, nm(b, "%slayers.%d.self_attn.v_proj", tp, i), t->kv_dim, t->hidden, &a->v));
        JEV_TRY(map_matrix(m, nm(b, "%slayers.%d.self_attn.o_proj", tp, i), t->hidden, t->attn_out, &a->o));
        JEV_TRY(map_norm1p(m, nm(b, "%slayers.%d.self_attn.q_norm.weight", tp, i), t->head_dim, &a->q_norm));
        JEV_TRY(map_norm1p(m, nm(b, "%slayers.%d.self_attn.k_norm.weight", tp, i), t->head_dim, &a->k_norm));
    }
    JEV_TRY(map_matrix(m, nm(b, "%slayers.%d.mlp.gate_proj", tp, i), t->intermediate, t->hidden, &l->gate));
    JEV_TRY(map_matrix(m, nm(b, "%slayers.%d.mlp.up_proj", tp, i), t->intermediate, t->hidden, &l->up));
    JEV_TRY(map_matrix(m, nm(b, "%slayers.%d.mlp.down_proj", tp, i), t->hidden, t->intermediate, &l->down));
    return JEV_OK;
}

/*
 * The text model. A tied model's head is the embedding matrix itself (the
 * same jev_matrix), so the LM head kernels see the quantized embedding in
 * mlx4 exactly as mlx-vlm's embed_tokens.as_linear does.
 */
static enum jev_status map_text(struct mapper *m, struct jev_text_weights *w) {
    const struct jev_text_config *t = &m->c->text;
    char b[256];
    w->layers = jev_arena_alloc_array(m->a, (size_t)t->n_layers, sizeof *w->layers, m->err);
    if (!w->layers)
        return m->err->status;
    JEV_TRY(map_matrix(m, nm(b, "%sembed_tokens", m->names.text), t->vocab_size, t->hidden, &w->embed));
    for (int i = 0; i < t->n_layers; i++)
        JEV_TRY(map_layer(m, i, &w->layers[i]));
    JEV_TRY(map_norm1p(m, nm(b, "%snorm.weight", m->names.text), t->hidden, &w->final_norm));
    if (t->tie_embeddings)
        w->lm_head = w->embed; /* a stored lm_head of a tied model is ignored, as HF does */
    else
        JEV_TRY(map_matrix(m, m->names.lm_head, t->vocab_size, t->hidden, &w->lm_head));
    return JEV_OK;
}

/* ---- vision ---- */

/*
 * Patch embedding to [Dv][c, t, y, x]: HF stores [Dv, c, t, y, x], MLX channels-last [Dv, t, y, x, c].
 * The Conv3d patch embedding as a [Dv][patch_dim] matrix in the pixel
 * order the preprocessor produces, (c, t, y, x); MLX's channels-last file
 * order (t, y, x, c) is permuted back here, once, so the vision code has
 * one layout.
 */
static enum jev_status map_patch(struct mapper *m, const char *name, float **out) {
    const struct jev_vision_config *v = &m->c->vision;
    const int64_t C = v->in_channels, T = v->temporal_patch, P = v->patch;
    int64_t hf[5] = {v->hidden, C, T, P, P}, mlx[5] = {v->hidden, T, P, P, C};
    const int64_t *want = m->layout == JEV_LAYOUT_HF ? hf : mlx;
    const struct jev_st_tensor *t = jev_st_set_find(m->s, name);
    char exp[160];
    if (!t)
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s' missing (expected a float %s)", name,
                     jev_st_shape_str(want, 5, exp, sizeof exp));
    if (!is_float(t->dtype))
        return mfail(m, JEV_ERR_FORMAT, "tensor '%s': dtype %s, expected F32, BF16 or F16", name,
                     jev_dtype_name(t->dtype));
    if (!shape_is(t, 5, want))
        return bad_shape(m, t, 5, want);
    int64_t pd = v->patch_dim;
    float *w = jev_arena_alloc_array(m->a, (size_t)(v->hidden * pd), sizeof(float), m->err);
    if (!w)
        return m->err->status;
    for (int64_t o = 0; o < v->hidden; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t tt = 0; tt < T; tt++)
                for (int64_t y = 0; y < P; y++)
                    for (int64_t x = 0; x < P; x++) {
                        int64_t dst = ((c * T + tt) * P + y) * P + x;
                        int64_t src = m->layout == JEV_LAYOUT_HF ? dst : ((tt * P + y) * P + x) * C + c;
                        w[o * pd + dst] = elem_f32(t, (uint64_t)(o * pd + src));
                    }
    *out = w;
    return JEV_OK;
}

/*
 * The vision tower: patch embedding, learned positions (an nn.Embedding,
 * which mlx may quantize), the blocks, and the merger. LayerNorm weights are
 * plain multipliers in both layouts (only the text RMSNorms are shifted).
 */
static enum jev_status map_vision(struct mapper *m, struct jev_vision_weights *w) {
    const struct jev_vision_config *v = &m->c->vision;
    const char *vp = m->names.vision;
    const int32_t D = v->hidden;
    char b[256];
    w->blocks = jev_arena_alloc_array(m->a, (size_t)v->depth, sizeof *w->blocks, m->err);
    if (!w->blocks)
        return m->err->status;
    JEV_TRY(map_patch(m, nm(b, "%spatch_embed.proj.weight", vp), &w->patch_w));
    JEV_TRY(map_vec(m, nm(b, "%spatch_embed.proj.bias", vp), D, false, &w->patch_b));
    JEV_TRY(map_matrix(m, nm(b, "%spos_embed", vp), v->n_pos_embed, D, &w->pos_embed));
    for (int j = 0; j < v->depth; j++) {
        struct jev_vision_block_weights *k = &w->blocks[j];
        JEV_TRY(map_vec(m, nm(b, "%sblocks.%d.norm1.weight", vp, j), D, false, &k->norm1_w));
        JEV_TRY(map_vec(m, nm(b, "%sblocks.%d.norm1.bias", vp, j), D, false, &k->norm1_b));
        JEV_TRY(map_vec(m, nm(b, "%sblocks.%d.norm2.weight", vp, j), D, false, &k->norm2_w));
        JEV_TRY(map_vec(m, nm(b, "%sblocks.%d.norm2.bias", vp, j), D, false, &k->norm2_b));
        JEV_TRY(map_matrix(m, nm(b, "%sblocks.%d.attn.qkv", vp, j), 3 * D, D, &k->qkv));
        JEV_TRY(map_vec(m, nm(b, "%sblocks.%d.attn.qkv.bias", vp, j), 3 * D, false, &k->qkv_b));
        JEV_TRY(map_matrix(m, nm(b, "%sblocks.%d.attn.proj", vp, j), D, D, &k->proj));
        JEV_TRY(map_vec(m, nm(b, "%sblocks.%d.attn.proj.bias", vp, j), D, false, &k->proj_b));
        JEV_TRY(map_matrix(m, nm(b, "%sblocks.%d.mlp.linear_fc1", vp, j), v->intermediate, D, &k->fc1));
        JEV_TRY(map_vec(m, nm(b, "%sblocks.%d.mlp.linear_fc1.bias", vp, j), v->intermediate, false, &k->fc1_b));
        JEV_TRY(map_matrix(m, nm(b, "%sblocks.%d.mlp.linear_fc2", vp, j), D, v->intermediate, &k->fc2));
        JEV_TRY(map_vec(m, nm(b, "%sblocks.%d.mlp.linear_fc2.bias", vp, j), D, false, &k->fc2_b));
    }
    JEV_TRY(map_vec(m, nm(b, "%smerger.norm.weight", vp), D, false, &w->merger_norm_w));
    JEV_TRY(map_vec(m, nm(b, "%smerger.norm.bias", vp), D, false, &w->merger_norm_b));
    JEV_TRY(map_matrix(m, nm(b, "%smerger.linear_fc1", vp), v->merge_in, v->merge_in, &w->merger_fc1));
    JEV_TRY(map_vec(m, nm(b, "%smerger.linear_fc1.bias", vp), v->merge_in, false, &w->merger_fc1_b));
    JEV_TRY(map_matrix(m, nm(b, "%smerger.linear_fc2", vp), v->out_hidden, v->merge_in, &w->merger_fc2));
    JEV_TRY(map_vec(m, nm(b, "%smerger.linear_fc2.bias", vp), v->out_hidden, false, &w->merger_fc2_b));
    return JEV_OK;
}

/*
 * The mapping walk: text first, then vision. On failure w holds pointers
 * into a part-filled arena; the caller frees the arena and ignores w.
 */
enum jev_status jev_weights_map(const struct jev_st_set *s, enum jev_layout layout, const struct jev_config *c,
                                const struct jev_quant_overrides *q, struct jev_arena *a, struct jev_weights *w,
                                struct jev_error *err) {
    struct mapper m = {s, layout, jev_layout_names(layout), c, q, a, err};
    memset(w, 0, sizeof *w);
    size_t start = a->used;
    JEV_TRY(map_text(&m, &w->text));
    if (c->has_vision)
        JEV_TRY(map_vision(&m, &w->vision));
    /* the sizing function and the walk must agree; a mismatch is a bug here, not bad input */
    JEV_ASSERT(a->used - start == jev_weights_arena_bytes(c));
    return JEV_OK;
}
