/*
 * synth.c - the synthetic model writer of synth.h.
 *
 * Three steps:
 *   1. plan: walk the model in HF terms (embed, layers, norm, head, vision,
 *      mtp) and list, for every logical weight, how it is generated (its HF
 *      name is the generator key, so both layouts share the floats) and which
 *      output tensors it becomes in the chosen layout (one float tensor, or
 *      codes + scales + biases);
 *   2. place: assign tensors to shards in model order, sort each shard by
 *      (element size descending, name) so every tensor is aligned with no
 *      gaps (the safetensors format requires contiguous offsets), and write
 *      each shard's header;
 *   3. stream: per weight, blocks of rows are generated and encoded in
 *      parallel (each row is a pure function of seed, name and index), then
 *      written with pwrite at their offsets. Memory stays at a few MiB
 *      whatever the model size.
 * Everything goes into a temporary sibling directory that is renamed into
 * place at the end.
 *
 * Determinism: the generator is splitmix64 keyed by (seed, FNV-1a of the
 * name, element pair), normals come from Marsaglia's polar method with a
 * log built from + - * / only (jev_synth_log), and sqrt is IEEE correctly
 * rounded. No libm transcendental is used. Floating-point contraction must be
 * off (gcc in ISO C mode does not contract; clang is told below).
 */
#include "model/synth.h" // defines: jev_synth_write

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/half.h"      // defines: jev_f32_to_bf16, jev_bf16_to_f32
#include "base/pool.h"      // defines: jev_pool_run
#include "base/timing.h"    // defines: jev_now_ms
#include "io/config-json.h" // defines: jev_config_parse
#include "io/model-dir.h"   // defines: jev_read_file
#include "io/safetensors.h" // defines: enum jev_dtype

/* ---- deterministic numbers ---- */

#define GOLDEN 0x9e3779b97f4a7c15ull

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A uniform double in [0, 1) with 53 random bits. */
static double unit53(uint64_t x) { return (double)(x >> 11) * 0x1.0p-53; }

static uint64_t name_key(uint64_t seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return mix64(mix64(seed + GOLDEN) ^ h);
}

double jev_synth_log(double x) {
    /* x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(t), t = (m-1)/(m+1), |t| < 0.172,
       summed to t^29 (the next term is below 1e-23 relative). Only + - * / on doubles. */
    uint64_t b;
    memcpy(&b, &x, 8);
    int e = (int)((b >> 52) & 0x7ff) - 1023;
    b = (b & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double m;
    memcpy(&m, &b, 8);
    if (m > 1.4142135623730951) {
        m = m * 0.5;
        e += 1;
    }
    double t = (m - 1.0) / (m + 1.0);
    double t2 = t * t;
    double poly = 1.0 / 29.0;
    for (int k = 27; k >= 1; k -= 2)
        poly = poly * t2 + 1.0 / (double)k;
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    return (double)e * ln2_hi + ((double)e * ln2_lo + 2.0 * t * poly);
}

/* Two independent N(0, 1) draws for element pair `pair` of a tensor (Marsaglia polar). */
static void normal_pair(uint64_t key, uint64_t pair, double *a, double *b) {
    uint64_t s = mix64(key ^ (pair * 0xd1b54a32d192ed03ull));
    for (;;) {
        s += GOLDEN;
        double u = 2.0 * unit53(mix64(s)) - 1.0;
        s += GOLDEN;
        double v = 2.0 * unit53(mix64(s)) - 1.0;
        double q = u * u + v * v;
        if (q > 0.0 && q < 1.0) {
            double f = sqrt(-2.0 * jev_synth_log(q) / q);
            *a = u * f;
            *b = v * f;
            return;
        }
    }
}

double jev_synth_normal(uint64_t seed, const char *name, uint64_t i) {
    double a, b;
    normal_pair(name_key(seed, name), i >> 1, &a, &b);
    return (i & 1) ? b : a;
}

/* A uniform draw in [0, 1) for element i (its own counter, independent of the normals). */
static double uniform_at(uint64_t key, uint64_t i) { return unit53(mix64(mix64(key + GOLDEN) ^ (i * GOLDEN))); }

static float bf16_round(float f) { return jev_bf16_to_f32(jev_f32_to_bf16(f)); }

/* ---- quantization ---- */

void jev_synth_quantize(const float *w, int64_t n, int32_t bits, int32_t group, uint32_t *codes, uint16_t *scales,
                        uint16_t *biases) {
    const uint32_t qmax = (1u << bits) - 1u;
    memset(codes, 0, (size_t)(n * bits / 32) * sizeof *codes);
    for (int64_t g = 0; g < n / group; g++) {
        const float *x = w + g * group;
        float mn = x[0], mx = x[0];
        for (int32_t k = 1; k < group; k++) {
            mn = x[k] < mn ? x[k] : mn;
            mx = x[k] > mx ? x[k] : mx;
        }
        scales[g] = jev_f32_to_bf16((mx - mn) / (float)qmax);
        biases[g] = jev_f32_to_bf16(mn);
        /* codes are chosen against the rounded scale and bias, the values the loader will see */
        float s = jev_bf16_to_f32(scales[g]), b = jev_bf16_to_f32(biases[g]);
        for (int32_t k = 0; k < group; k++) {
            uint32_t q = 0;
            if (s > 0.0f) {
                float r = nearbyintf((x[k] - b) / s);
                q = r < 0.0f ? 0u : r > (float)qmax ? qmax : (uint32_t)r;
            }
            int64_t bit = (g * group + k) * bits;
            int64_t word = bit >> 5;
            int off = (int)(bit & 31);
            codes[word] |= q << off;
            if (off + bits > 32)
                codes[word + 1] |= q >> (32 - off);
        }
    }
}

/* ---- the plan ---- */

enum gen {
    GEN_NORMAL,      /* bf16(p0 * N(0,1)): matrices, embeddings, biases */
    GEN_NORM_OFFSET, /* zero-centred RMSNorm offsets on a 2^-7 grid, so 1 + w is exact in bf16 */
    GEN_ONE_NOISE,   /* bf16(1 + p0 * N(0,1)): plain-multiplier norms, dt_bias, LayerNorm weights */
    GEN_UNIFORM,     /* bf16(U(p0, p1)): conv taps */
    GEN_A_LOG,       /* f32(log(U(1, 16))) */
};

enum form {
    FORM_FLOAT,     /* the values as they are, in the output dtype */
    FORM_SHIFTED,   /* 1 + w (MLX's pre-shifted norms) */
    FORM_PATCH_MLX, /* rows (c, t, y, x) permuted to channels-last (t, y, x, c) */
    FORM_QUANT,     /* affine codes + scales + biases */
};

struct out_tensor {
    char *name;              /* tensor name in the file (owned) */
    enum jev_dtype dtype;    /* stored dtype */
    int32_t ndim;            /* dimensions */
    int64_t shape[5];        /* stored shape */
    uint64_t nbytes;         /* bytes */
    int32_t shard;           /* shard index */
    uint64_t offset;         /* offset in its shard's data area */
};

struct item {
    char *key;               /* HF tensor name: the generator key (owned) */
    enum gen gen;            /* how values are drawn */
    double p0, p1;           /* generator parameters */
    enum form form;          /* how they are stored */
    int64_t rows, cols;      /* logical [rows][cols] (a vector is one row) */
    int32_t n_out;           /* 1, or 3 for FORM_QUANT */
    int32_t out[3];          /* indices of its output tensors: weight (codes), scales, biases */
};

struct plan {
    struct out_tensor *t;    /* [nt] output tensors, model order */
    int32_t nt, capt;        /* used / allocated */
    struct item *it;         /* [ni] logical weights, model order */
    int32_t ni, capi;        /* used / allocated */
    enum jev_synth_layout layout; /* output layout */
    int32_t bits, group;     /* quantization (mlx4) */
    int64_t n_params;        /* logical elements */
    bool oom;                /* an allocation failed while planning */
};

/* The MLX name of an HF name (mlx-vlm's sanitize renames). */
static void mlx_name(const char *hf, char *out, size_t size) {
    static const char *map[][2] = {
        {"model.language_model.", "language_model.model."},
        {"model.visual.", "vision_tower."},
        {"lm_head", "language_model.lm_head"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t n = strlen(map[i][0]);
        if (strncmp(hf, map[i][0], n) == 0) {
            snprintf(out, size, "%s%s", map[i][1], hf + n);
            return;
        }
    }
    snprintf(out, size, "%s", hf);
}

static int32_t add_out(struct plan *pl, const char *hf_name, const char *suffix, enum jev_dtype dt, int32_t ndim,
                       const int64_t *shape) {
    if (pl->nt == pl->capt) {
        int32_t cap = pl->capt ? pl->capt * 2 : 256;
        struct out_tensor *t = realloc(pl->t, (size_t)cap * sizeof *t);
        if (!t) {
            pl->oom = true;
            return 0;
        }
        pl->t = t;
        pl->capt = cap;
    }
    char name[256], full[300];
    if (pl->layout == JEV_SYNTH_MLX4)
        mlx_name(hf_name, name, sizeof name);
    else
        snprintf(name, sizeof name, "%s", hf_name);
    snprintf(full, sizeof full, "%s%s", name, suffix);
    struct out_tensor *o = &pl->t[pl->nt];
    memset(o, 0, sizeof *o);
    o->name = strdup(full);
    pl->oom |= o->name == NULL;
    o->dtype = dt;
    o->ndim = ndim;
    uint64_t n = 1;
    for (int32_t i = 0; i < ndim; i++) {
        o->shape[i] = shape[i];
        n *= (uint64_t)shape[i];
    }
    o->nbytes = n * jev_dtype_size(dt);
    return pl->nt++;
}

static struct item *add_item(struct plan *pl, const char *key, enum gen g, double p0, double p1, enum form f,
                             int64_t rows, int64_t cols) {
    static struct item dummy; /* absorbs writes after an allocation failure */
    if (pl->ni == pl->capi) {
        int32_t cap = pl->capi ? pl->capi * 2 : 256;
        struct item *it = realloc(pl->it, (size_t)cap * sizeof *it);
        if (!it) {
            pl->oom = true;
            return &dummy;
        }
        pl->it = it;
        pl->capi = cap;
    }
    struct item *it = &pl->it[pl->ni++];
    *it = (struct item){.key = strdup(key), .gen = g, .p0 = p0, .p1 = p1, .form = f, .rows = rows, .cols = cols};
    pl->oom |= it->key == NULL;
    pl->n_params += rows * cols;
    return it;
}

/* A Linear / Embedding `module` [rows, cols]; quantized in mlx4 when cols is a multiple of the group. */
static void plan_matrix(struct plan *pl, const char *module, int64_t rows, int64_t cols) {
    char key[256];
    snprintf(key, sizeof key, "%s.weight", module);
    bool q = pl->layout == JEV_SYNTH_MLX4 && cols % pl->group == 0 && (cols * pl->bits) % 32 == 0;
    struct item *it = add_item(pl, key, GEN_NORMAL, 0.02, 0, q ? FORM_QUANT : FORM_FLOAT, rows, cols);
    if (!q) {
        int64_t sh[2] = {rows, cols};
        it->out[it->n_out++] = add_out(pl, module, ".weight", JEV_DTYPE_BF16, 2, sh);
        return;
    }
    int64_t wsh[2] = {rows, cols * pl->bits / 32}, ssh[2] = {rows, cols / pl->group};
    it->out[it->n_out++] = add_out(pl, module, ".weight", JEV_DTYPE_U32, 2, wsh);
    it->out[it->n_out++] = add_out(pl, module, ".scales", JEV_DTYPE_BF16, 2, ssh);
    it->out[it->n_out++] = add_out(pl, module, ".biases", JEV_DTYPE_BF16, 2, ssh);
}

/* A vector [n]: dtype per layout; shift_mlx stores 1 + w in mlx4 (the zero-centred norms). */
static void plan_vec(struct plan *pl, const char *name, int64_t n, enum gen g, double p0, double p1,
                     enum jev_dtype hf_dt, enum jev_dtype mlx_dt, bool shift_mlx) {
    bool mlx = pl->layout == JEV_SYNTH_MLX4;
    struct item *it = add_item(pl, name, g, p0, p1, mlx && shift_mlx ? FORM_SHIFTED : FORM_FLOAT, 1, n);
    int64_t sh[1] = {n};
    it->out[it->n_out++] = add_out(pl, name, "", mlx ? mlx_dt : hf_dt, 1, sh);
}

static void plan_norm1p(struct plan *pl, const char *name, int64_t n) {
    plan_vec(pl, name, n, GEN_NORM_OFFSET, 0.02, 0, JEV_DTYPE_BF16, JEV_DTYPE_BF16, true);
}

/* A Linear's float bias. */
static void plan_bias(struct plan *pl, const char *name, int64_t n) {
    plan_vec(pl, name, n, GEN_NORMAL, 0.02, 0, JEV_DTYPE_BF16, JEV_DTYPE_BF16, false);
}

/* A LayerNorm weight (plain multiplier near 1) and bias. */
static void plan_layernorm(struct plan *pl, const char *prefix, int64_t n) {
    char b[256];
    snprintf(b, sizeof b, "%s.weight", prefix);
    plan_vec(pl, b, n, GEN_ONE_NOISE, 0.02, 0, JEV_DTYPE_BF16, JEV_DTYPE_BF16, false);
    snprintf(b, sizeof b, "%s.bias", prefix);
    plan_bias(pl, b, n);
}

/* conv1d taps: HF [C, 1, K], MLX [C, K, 1]; the same flat order c*K + j. */
static void plan_conv(struct plan *pl, const char *name, int64_t ch, int64_t k) {
    struct item *it = add_item(pl, name, GEN_UNIFORM, -0.5, 0.5, FORM_FLOAT, ch, k);
    int64_t hf[3] = {ch, 1, k}, mlx[3] = {ch, k, 1};
    it->out[it->n_out++] = add_out(pl, name, "", JEV_DTYPE_BF16, 3, pl->layout == JEV_SYNTH_MLX4 ? mlx : hf);
}

static void plan_full_attn(struct plan *pl, const char *p, const struct jev_text_config *t) {
    char b[256];
    snprintf(b, sizeof b, "%sself_attn.q_proj", p);
    plan_matrix(pl, b, t->q_proj_out, t->hidden);
    snprintf(b, sizeof b, "%sself_attn.k_proj", p);
    plan_matrix(pl, b, t->kv_dim, t->hidden);
    snprintf(b, sizeof b, "%sself_attn.v_proj", p);
    plan_matrix(pl, b, t->kv_dim, t->hidden);
    snprintf(b, sizeof b, "%sself_attn.o_proj", p);
    plan_matrix(pl, b, t->hidden, t->attn_out);
    snprintf(b, sizeof b, "%sself_attn.q_norm.weight", p);
    plan_norm1p(pl, b, t->head_dim);
    snprintf(b, sizeof b, "%sself_attn.k_norm.weight", p);
    plan_norm1p(pl, b, t->head_dim);
}

static void plan_mlp(struct plan *pl, const char *p, const struct jev_text_config *t) {
    char b[256];
    snprintf(b, sizeof b, "%smlp.gate_proj", p);
    plan_matrix(pl, b, t->intermediate, t->hidden);
    snprintf(b, sizeof b, "%smlp.up_proj", p);
    plan_matrix(pl, b, t->intermediate, t->hidden);
    snprintf(b, sizeof b, "%smlp.down_proj", p);
    plan_matrix(pl, b, t->hidden, t->intermediate);
}

static void plan_layer(struct plan *pl, const struct jev_text_config *t, int i) {
    char p[128], b[256];
    snprintf(p, sizeof p, "model.language_model.layers.%d.", i);
    snprintf(b, sizeof b, "%sinput_layernorm.weight", p);
    plan_norm1p(pl, b, t->hidden);
    if (t->layer_kind[i] == JEV_LAYER_LINEAR) {
        snprintf(b, sizeof b, "%slinear_attn.in_proj_qkv", p);
        plan_matrix(pl, b, t->conv_dim, t->hidden);
        snprintf(b, sizeof b, "%slinear_attn.in_proj_z", p);
        plan_matrix(pl, b, t->lin_value_dim, t->hidden);
        snprintf(b, sizeof b, "%slinear_attn.in_proj_b", p);
        plan_matrix(pl, b, t->lin_v_heads, t->hidden);
        snprintf(b, sizeof b, "%slinear_attn.in_proj_a", p);
        plan_matrix(pl, b, t->lin_v_heads, t->hidden);
        snprintf(b, sizeof b, "%slinear_attn.conv1d.weight", p);
        plan_conv(pl, b, t->conv_dim, t->conv_kernel);
        snprintf(b, sizeof b, "%slinear_attn.dt_bias", p);
        plan_vec(pl, b, t->lin_v_heads, GEN_ONE_NOISE, 0.02, 0, JEV_DTYPE_BF16, JEV_DTYPE_BF16, false);
        snprintf(b, sizeof b, "%slinear_attn.A_log", p); /* f32 in both (mlx's cast predicate keeps it) */
        plan_vec(pl, b, t->lin_v_heads, GEN_A_LOG, 0, 0, JEV_DTYPE_F32, JEV_DTYPE_F32, false);
        snprintf(b, sizeof b, "%slinear_attn.norm.weight", p); /* f32 in the official checkpoint, never shifted */
        plan_vec(pl, b, t->lin_v_dim, GEN_ONE_NOISE, 0.02, 0, JEV_DTYPE_F32, JEV_DTYPE_BF16, false);
        snprintf(b, sizeof b, "%slinear_attn.out_proj", p);
        plan_matrix(pl, b, t->hidden, t->lin_value_dim);
    } else {
        plan_full_attn(pl, p, t);
    }
    snprintf(b, sizeof b, "%spost_attention_layernorm.weight", p);
    plan_norm1p(pl, b, t->hidden);
    plan_mlp(pl, p, t);
}

static void plan_vision(struct plan *pl, const struct jev_vision_config *v) {
    const char *vp = "model.visual.";
    char b[256], p[128];
    snprintf(b, sizeof b, "%spatch_embed.proj.weight", vp);
    bool mlx = pl->layout == JEV_SYNTH_MLX4;
    struct item *it = add_item(pl, b, GEN_NORMAL, 0.02, 0, mlx ? FORM_PATCH_MLX : FORM_FLOAT, v->hidden,
                               v->patch_dim);
    int64_t hf[5] = {v->hidden, v->in_channels, v->temporal_patch, v->patch, v->patch};
    int64_t cl[5] = {v->hidden, v->temporal_patch, v->patch, v->patch, v->in_channels};
    it->out[it->n_out++] = add_out(pl, b, "", JEV_DTYPE_BF16, 5, mlx ? cl : hf);
    snprintf(b, sizeof b, "%spatch_embed.proj.bias", vp);
    plan_bias(pl, b, v->hidden);
    snprintf(b, sizeof b, "%spos_embed", vp);
    plan_matrix(pl, b, v->n_pos_embed, v->hidden);
    for (int j = 0; j < v->depth; j++) {
        snprintf(p, sizeof p, "%sblocks.%d.", vp, j);
        snprintf(b, sizeof b, "%snorm1", p);
        plan_layernorm(pl, b, v->hidden);
        snprintf(b, sizeof b, "%snorm2", p);
        plan_layernorm(pl, b, v->hidden);
        snprintf(b, sizeof b, "%sattn.qkv", p);
        plan_matrix(pl, b, 3 * v->hidden, v->hidden);
        snprintf(b, sizeof b, "%sattn.qkv.bias", p);
        plan_bias(pl, b, 3 * v->hidden);
        snprintf(b, sizeof b, "%sattn.proj", p);
        plan_matrix(pl, b, v->hidden, v->hidden);
        snprintf(b, sizeof b, "%sattn.proj.bias", p);
        plan_bias(pl, b, v->hidden);
        snprintf(b, sizeof b, "%smlp.linear_fc1", p);
        plan_matrix(pl, b, v->intermediate, v->hidden);
        snprintf(b, sizeof b, "%smlp.linear_fc1.bias", p);
        plan_bias(pl, b, v->intermediate);
        snprintf(b, sizeof b, "%smlp.linear_fc2", p);
        plan_matrix(pl, b, v->hidden, v->intermediate);
        snprintf(b, sizeof b, "%smlp.linear_fc2.bias", p);
        plan_bias(pl, b, v->hidden);
    }
    snprintf(b, sizeof b, "%smerger.norm", vp);
    plan_layernorm(pl, b, v->hidden);
    snprintf(b, sizeof b, "%smerger.linear_fc1", vp);
    plan_matrix(pl, b, v->merge_in, v->merge_in);
    snprintf(b, sizeof b, "%smerger.linear_fc1.bias", vp);
    plan_bias(pl, b, v->merge_in);
    snprintf(b, sizeof b, "%smerger.linear_fc2", vp);
    plan_matrix(pl, b, v->out_hidden, v->merge_in);
    snprintf(b, sizeof b, "%smerger.linear_fc2.bias", vp);
    plan_bias(pl, b, v->out_hidden);
}

/* The multi-token-prediction head of the official checkpoint (HF and jev ignore it; mlx-vlm drops it). */
static void plan_mtp(struct plan *pl, const struct jev_text_config *t, int n) {
    char p[64];
    plan_matrix(pl, "mtp.fc", t->hidden, 2 * (int64_t)t->hidden);
    plan_norm1p(pl, "mtp.pre_fc_norm_embedding.weight", t->hidden);
    plan_norm1p(pl, "mtp.pre_fc_norm_hidden.weight", t->hidden);
    for (int i = 0; i < n; i++) {
        char b[128];
        snprintf(p, sizeof p, "mtp.layers.%d.", i);
        snprintf(b, sizeof b, "%sinput_layernorm.weight", p);
        plan_norm1p(pl, b, t->hidden);
        plan_full_attn(pl, p, t);
        snprintf(b, sizeof b, "%spost_attention_layernorm.weight", p);
        plan_norm1p(pl, b, t->hidden);
        plan_mlp(pl, p, t);
    }
    plan_norm1p(pl, "mtp.norm.weight", t->hidden);
}

static void plan_model(struct plan *pl, const struct jev_config *c, int n_mtp) {
    const struct jev_text_config *t = &c->text;
    plan_matrix(pl, "model.language_model.embed_tokens", t->vocab_size, t->hidden);
    for (int i = 0; i < t->n_layers; i++)
        plan_layer(pl, t, i);
    plan_norm1p(pl, "model.language_model.norm.weight", t->hidden);
    if (!t->tie_embeddings)
        plan_matrix(pl, "lm_head", t->vocab_size, t->hidden);
    if (c->has_vision)
        plan_vision(pl, &c->vision);
    if (pl->layout == JEV_SYNTH_HF && n_mtp > 0)
        plan_mtp(pl, t, n_mtp);
}

static void plan_free(struct plan *pl) {
    for (int32_t i = 0; i < pl->nt; i++)
        free(pl->t[i].name);
    for (int32_t i = 0; i < pl->ni; i++)
        free(pl->it[i].key);
    free(pl->t);
    free(pl->it);
}

/* ---- placement and headers ---- */

struct shard {
    char name[64];           /* file name inside the model directory */
    int fd;                  /* open for writing, -1 when closed */
    int32_t *order;          /* [n] tensor indices in file order */
    int32_t n;               /* tensors in this shard */
    uint64_t data_start;     /* 8 + padded header length */
    uint64_t data_size;      /* bytes of tensor data */
};

static const struct out_tensor *sort_base; /* qsort context: placement runs on one thread */

static int cmp_placement(const void *a, const void *b) {
    const struct out_tensor *x = &sort_base[*(const int32_t *)a], *y = &sort_base[*(const int32_t *)b];
    size_t ex = jev_dtype_size(x->dtype), ey = jev_dtype_size(y->dtype);
    if (ex != ey)
        return ex > ey ? -1 : 1; /* wide elements first: every offset stays aligned */
    return strcmp(x->name, y->name);
}

/* Splits the weights into shards (model order, at most shard_bytes each unless one weight is larger). */
static enum jev_status place(struct plan *pl, int64_t shard_bytes, struct shard **out, int32_t *n_out,
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

/* A growing text buffer for headers. */
struct text {
    char *s;                 /* NUL-terminated text */
    size_t n, cap;           /* length and allocation */
    bool oom;                /* an append failed */
};

static void text_add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(struct text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            t->oom = true;
            return;
        }
        if (t->s && t->n + (size_t)k < t->cap) {
            t->n += (size_t)k;
            return;
        }
        size_t cap = (t->cap + (size_t)k + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->oom = true;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

/* The shard's header JSON, padded with spaces so that the data area starts 8-aligned. */
static enum jev_status shard_header(const struct plan *pl, struct shard *s, struct text *h, struct jev_error *err) {
    h->n = 0;
    text_add(h, "{\"__metadata__\":{\"format\":\"%s\"}", pl->layout == JEV_SYNTH_MLX4 ? "mlx" : "pt");
    for (int32_t i = 0; i < s->n; i++) {
        const struct out_tensor *t = &pl->t[s->order[i]];
        text_add(h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, jev_dtype_name(t->dtype));
        for (int32_t d = 0; d < t->ndim; d++)
            text_add(h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        text_add(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->offset,
                 (unsigned long long)(t->offset + t->nbytes));
    }
    text_add(h, "}");
    while ((8 + h->n) % 8 != 0)
        text_add(h, " ");
    if (h->oom)
        return jev_fail(err, JEV_ERR_NOMEM, "synth: out of memory writing the header of %s", s->name);
    s->data_start = 8 + h->n;
    return JEV_OK;
}

/* ---- streaming the data ---- */

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
    const struct plan *pl;   /* sizes and quantization */
    const struct item *it;   /* the weight */
    uint64_t key;            /* its generator key */
    int64_t r0;              /* first row of the block */
    float *vals;             /* [rows in block][2 * cols] values + permutation scratch */
    uint8_t *enc[3];         /* encoded rows per output tensor */
    size_t row_bytes[3];     /* bytes per row per output tensor */
};

/* The underlying values of elements [start, start + n) of a weight. */
static void gen_values(const struct item *it, uint64_t key, uint64_t start, int64_t n, float *out) {
    double a = 0.0, b = 0.0;
    uint64_t have = UINT64_MAX;
    for (int64_t j = 0; j < n; j++) {
        uint64_t i = start + (uint64_t)j;
        double z = 0.0;
        if (it->gen == GEN_NORMAL || it->gen == GEN_NORM_OFFSET || it->gen == GEN_ONE_NOISE) {
            if ((i >> 1) != have) {
                have = i >> 1;
                normal_pair(key, have, &a, &b);
            }
            z = (i & 1) ? b : a;
        }
        switch (it->gen) {
        case GEN_NORMAL: out[j] = bf16_round((float)(it->p0 * z)); break;
        case GEN_NORM_OFFSET: out[j] = (float)(nearbyint(it->p0 * z * 128.0) / 128.0); break;
        case GEN_ONE_NOISE: out[j] = bf16_round((float)(1.0 + it->p0 * z)); break;
        case GEN_UNIFORM: out[j] = bf16_round((float)(it->p0 + (it->p1 - it->p0) * uniform_at(key, i))); break;
        case GEN_A_LOG: out[j] = (float)jev_synth_log(1.0 + 15.0 * uniform_at(key, i)); break;
        }
    }
}

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

static void block_row(void *arg, int64_t i, int thread) {
    (void)thread;
    const struct block_job *j = arg;
    const struct item *it = j->it;
    const struct plan *pl = j->pl;
    int64_t r = j->r0 + i, cols = it->cols;
    float *v = j->vals + i * 2 * cols, *tmp = v + cols;
    gen_values(it, j->key, (uint64_t)(r * cols), cols, v);
    uint8_t *e0 = j->enc[0] + (size_t)i * j->row_bytes[0];
    enum jev_dtype dt = pl->t[it->out[0]].dtype;
    switch (it->form) {
    case FORM_FLOAT: encode_float(v, cols, dt, e0); break;
    case FORM_SHIFTED:
        for (int64_t k = 0; k < cols; k++)
            tmp[k] = 1.0f + v[k];
        encode_float(tmp, cols, dt, e0);
        break;
    case FORM_PATCH_MLX: {
        /* (c, t, y, x) -> (t, y, x, c) for one output channel */
        const struct out_tensor *o = &pl->t[it->out[0]];
        int64_t T = o->shape[1], P = o->shape[2], C = o->shape[4];
        for (int64_t c = 0; c < C; c++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t y = 0; y < P; y++)
                    for (int64_t x = 0; x < P; x++)
                        tmp[((t * P + y) * P + x) * C + c] = v[((c * T + t) * P + y) * P + x];
        encode_float(tmp, cols, dt, e0);
        break;
    }
    case FORM_QUANT: {
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

/* Generates one weight block by block and writes its output tensors. */
static enum jev_status write_item(const struct plan *pl, const struct item *it, const struct shard *sh,
                                  struct jev_pool *pool, uint64_t seed, struct jev_error *err) {
    int64_t block = it->cols >= (1 << 20) ? 1 : (1 << 20) / it->cols;
    if (block > it->rows)
        block = it->rows;
    struct block_job j = {.pl = pl, .it = it, .key = name_key(seed, it->key)};
    j.vals = malloc((size_t)(block * 2 * it->cols) * sizeof(float));
    bool oom = j.vals == NULL;
    for (int32_t k = 0; k < it->n_out; k++) {
        const struct out_tensor *o = &pl->t[it->out[k]];
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
            const struct out_tensor *o = &pl->t[it->out[k]];
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

static enum jev_status write_file(const char *path, const void *data, size_t n, struct jev_error *err) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return jev_fail(err, JEV_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    enum jev_status st = pwrite_all(fd, data, n, 0, path, err);
    if (close(fd) != 0 && st == JEV_OK)
        st = jev_fail(err, JEV_ERR_IO, "%s: close: %s", path, strerror(errno));
    return st;
}

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

/* JSON text of a document with reals in their shortest exact form (16 digits when that reads back equal). */
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

/* config.json: the input document, plus the quantization keys of an MLX conversion. */
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

static enum jev_status write_index(const struct plan *pl, const struct shard *sh, int32_t ns, const char *dir,
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

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes a directory tree (our own temporary directories only). */
static void remove_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* ---- the whole directory ---- */

struct jev_synth_params jev_synth_default_params(void) {
    struct jev_synth_params p = {0};
    p.seed = 1;
    p.layout = JEV_SYNTH_HF;
    return p;
}

/* Writes every file of the model into dir (a fresh temporary directory). */
static enum jev_status write_all(const struct jev_synth_params *p, const struct jev_config *c, json_t *doc, int n_mtp,
                                 const char *dir, struct jev_synth_report *r, struct jev_error *err) {
    struct plan pl = {.layout = p->layout, .bits = p->bits, .group = p->group};
    struct shard *sh = NULL;
    int32_t ns = 0;
    struct text hdr = {0};
    struct jev_pool *pool = NULL;
    enum jev_status st = JEV_OK;
    plan_model(&pl, c, n_mtp);
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
            len[i] = (uint8_t)((uint64_t)hdr.n >> (8 * i));
        if ((st = pwrite_all(sh[k].fd, len, 8, 0, sh[k].name, err)) != JEV_OK ||
            (st = pwrite_all(sh[k].fd, hdr.s, hdr.n, 8, sh[k].name, err)) != JEV_OK)
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
    free(hdr.s);
    jev_pool_free(pool);
    plan_free(&pl);
    return st;
}

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
        return jev_fail(err, JEV_ERR_IO, "synth: cannot create a directory next to %s: %s", p.out_dir,
                        strerror(errno));
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
