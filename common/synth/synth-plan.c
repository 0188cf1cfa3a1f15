/*
 * synth-plan.c - what jev synth writes, before anything is written: the
 * deterministic random numbers, the MLX-style quantizer, and the plan (every
 * logical weight of the model in HF terms, how its values are drawn, and
 * which tensors it becomes in the chosen layout).
 *
 * The HF tensor name is the generator key in both layouts, which is what
 * makes an mlx4 directory the quantization of the hf directory of the same
 * seed. Determinism: splitmix64 keyed by (seed, FNV-1a of the name, element
 * pair), normals from Marsaglia's polar method with a log built from
 * + - * / only (jev_synth_log), IEEE sqrt; no libm transcendental, and
 * floating-point contraction off (gcc in ISO C mode does not contract; clang
 * is told below), so the bytes are the same on every machine.
 */
#include "common/synth/synth-plan.h" // defines: struct jev_synth_plan

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h" // defines: jev_f32_to_bf16, jev_bf16_to_f32

/* ---- deterministic numbers ---- */

#define GOLDEN 0x9e3779b97f4a7c15ull

/*
 * splitmix64's finalizer: a bijection on u64 with good avalanche, so
 * consecutive counters give independent-looking outputs. Integer-only, so
 * it is identical everywhere.
 */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/*
 * A uniform double in [0, 1) with 53 random bits.
 * The top 53 bits as a double in [0, 1): exact (no rounding) on every IEEE machine.
 */
static double unit53(uint64_t x) { return (double)(x >> 11) * 0x1.0p-53; }

/*
 * Each tensor gets its own stream from its HF name, so adding, removing or
 * reordering tensors (or layouts) never changes another tensor's values.
 */
uint64_t jev_synth_key(uint64_t seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return mix64(mix64(seed + GOLDEN) ^ h);
}

/*
 * libm's log is not correctly rounded and differs between libms; this one
 * uses only operations IEEE 754 specifies exactly (+ - * / on doubles and
 * bit manipulation), so its result is the same everywhere. Accuracy is a
 * few ulp (tests/test-synth.c compares with libm), which is far more than
 * random weights need.
 */
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

/*
 * Two independent N(0, 1) draws for element pair `pair` of a tensor (Marsaglia polar).
 * Marsaglia's polar method: rejection of points outside the unit disc, then
 * one log and one sqrt per pair. The stream of a pair is seeded from the
 * pair index, so any element can be computed without the ones before it
 * (rows are generated in parallel, in any order).
 */
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

/* Element i uses the first or the second value of pair i / 2. */
double jev_synth_normal(uint64_t seed, const char *name, uint64_t i) {
    double a, b;
    normal_pair(jev_synth_key(seed, name), i >> 1, &a, &b);
    return (i & 1) ? b : a;
}

/*
 * A uniform draw in [0, 1) for element i (its own counter, independent of the normals).
 * A separate counter stream for uniform tensors (conv taps, A_log).
 */
static double uniform_at(uint64_t key, uint64_t i) { return unit53(mix64(mix64(key + GOLDEN) ^ (i * GOLDEN))); }

/*
 * The value a bf16 file stores. Every underlying value is rounded like
 * this once, so that an f32 tensor in one layout and a bf16 one in the
 * other hold the same number.
 */
static float bf16_round(float f) { return jev_bf16_to_f32(jev_f32_to_bf16(f)); }

/* ---- quantization ---- */

/*
 * As mlx's affine quantization, simplified as specified for jev: per group
 * the range [min, max] is split into 2^bits - 1 steps. The bias and scale
 * are rounded to bf16 FIRST and the codes chosen against the rounded
 * values, so that dequantizing what the file holds is as close as possible
 * to the original (choosing codes against the unrounded scale would add
 * the scale's rounding error times the code). A constant group has scale
 * 0; its codes are 0 and its value is the bias.
 */
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

/*
 * The MLX name of an HF name (mlx-vlm's sanitize renames).
 * Name mapping of mlx-vlm's sanitize (HF name -> MLX name); mtp.* is never asked for.
 */
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

/*
 * Adds one output tensor (name in the plan's layout, dtype, stored shape).
 * Allocation failures are remembered in pl->oom and reported once after
 * planning, which keeps the dozens of planning calls free of error checks.
 */
static int32_t add_out(struct jev_synth_plan *pl, const char *hf_name, const char *suffix, enum jev_dtype dt,
                       int32_t ndim, const int64_t *shape) {
    if (pl->nt == pl->capt) {
        int32_t cap = pl->capt ? pl->capt * 2 : 256;
        struct jev_synth_tensor *t = realloc(pl->t, (size_t)cap * sizeof *t);
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
    struct jev_synth_tensor *o = &pl->t[pl->nt];
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

/* Adds one logical weight; its HF name is the generator key in every layout. */
static struct jev_synth_item *add_item(struct jev_synth_plan *pl, const char *key, enum jev_synth_gen g, double p0,
                                       double p1, enum jev_synth_form f, int64_t rows, int64_t cols) {
    static struct jev_synth_item dummy; /* absorbs writes after an allocation failure */
    if (pl->ni == pl->capi) {
        int32_t cap = pl->capi ? pl->capi * 2 : 256;
        struct jev_synth_item *it = realloc(pl->it, (size_t)cap * sizeof *it);
        if (!it) {
            pl->oom = true;
            return &dummy;
        }
        pl->it = it;
        pl->capi = cap;
    }
    struct jev_synth_item *it = &pl->it[pl->ni++];
    *it = (struct jev_synth_item){
        .key = strdup(key), .gen = g, .p0 = p0, .p1 = p1, .form = f, .rows = rows, .cols = cols};
    pl->oom |= it->key == NULL;
    pl->n_params += rows * cols;
    return it;
}

/*
 * A Linear / Embedding `module` [rows, cols]; quantized in mlx4 when cols is a multiple of the group.
 * mlx's quantize predicate: a module is quantized when its input width is
 * a multiple of the group size (otherwise mlx leaves it in float, and so
 * does this writer; the loader accepts float matrices in MLX files).
 */
static void plan_matrix(struct jev_synth_plan *pl, const char *module, int64_t rows, int64_t cols) {
    char key[256];
    snprintf(key, sizeof key, "%s.weight", module);
    bool q = pl->layout == JEV_SYNTH_MLX4 && cols % pl->group == 0 && (cols * pl->bits) % 32 == 0;
    enum jev_synth_form form = q ? JEV_FORM_QUANT : JEV_FORM_FLOAT;
    struct jev_synth_item *it = add_item(pl, key, JEV_GEN_NORMAL, 0.02, 0, form, rows, cols);
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

/*
 * A vector [n]: dtype per layout; shift_mlx stores 1 + w in mlx4 (the zero-centred norms).
 * hf and mlx4 may store a vector in different dtypes (linear_attn.norm: f32 vs bf16).
 */
static void plan_vec(struct jev_synth_plan *pl, const char *name, int64_t n, enum jev_synth_gen g, double p0, double p1,
                     enum jev_dtype hf_dt, enum jev_dtype mlx_dt, bool shift_mlx) {
    bool mlx = pl->layout == JEV_SYNTH_MLX4;
    enum jev_synth_form form = mlx && shift_mlx ? JEV_FORM_SHIFTED : JEV_FORM_FLOAT;
    struct jev_synth_item *it = add_item(pl, name, g, p0, p1, form, 1, n);
    int64_t sh[1] = {n};
    it->out[it->n_out++] = add_out(pl, name, "", mlx ? mlx_dt : hf_dt, 1, sh);
}

/* A zero-centred RMSNorm weight: w on a 2^-7 grid in hf, 1 + w (exact in bf16) in mlx4. */
static void plan_norm1p(struct jev_synth_plan *pl, const char *name, int64_t n) {
    plan_vec(pl, name, n, JEV_GEN_NORM_OFFSET, 0.02, 0, JEV_DTYPE_BF16, JEV_DTYPE_BF16, true);
}

/* A Linear's float bias. */
static void plan_bias(struct jev_synth_plan *pl, const char *name, int64_t n) {
    plan_vec(pl, name, n, JEV_GEN_NORMAL, 0.02, 0, JEV_DTYPE_BF16, JEV_DTYPE_BF16, false);
}

/* A LayerNorm weight (plain multiplier near 1) and bias. */
static void plan_layernorm(struct jev_synth_plan *pl, const char *prefix, int64_t n) {
    char b[256];
    snprintf(b, sizeof b, "%s.weight", prefix);
    plan_vec(pl, b, n, JEV_GEN_ONE_NOISE, 0.02, 0, JEV_DTYPE_BF16, JEV_DTYPE_BF16, false);
    snprintf(b, sizeof b, "%s.bias", prefix);
    plan_bias(pl, b, n);
}

/*
 * conv1d taps: HF [C, 1, K], MLX [C, K, 1]; the same flat order c*K + j.
 * U(-0.5, 0.5): the scale of PyTorch's default conv init for fan-in K = 4.
 */
static void plan_conv(struct jev_synth_plan *pl, const char *name, int64_t ch, int64_t k) {
    struct jev_synth_item *it = add_item(pl, name, JEV_GEN_UNIFORM, -0.5, 0.5, JEV_FORM_FLOAT, ch, k);
    int64_t hf[3] = {ch, 1, k}, mlx[3] = {ch, k, 1};
    it->out[it->n_out++] = add_out(pl, name, "", JEV_DTYPE_BF16, 3, pl->layout == JEV_SYNTH_MLX4 ? mlx : hf);
}

/* A gated attention block (also the MTP layer): q_proj holds query and gate per head. */
static void plan_full_attn(struct jev_synth_plan *pl, const char *p, const struct jev_text_config *t) {
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

/* The SwiGLU MLP of a decoder layer. */
static void plan_mlp(struct jev_synth_plan *pl, const char *p, const struct jev_text_config *t) {
    char b[256];
    snprintf(b, sizeof b, "%smlp.gate_proj", p);
    plan_matrix(pl, b, t->intermediate, t->hidden);
    snprintf(b, sizeof b, "%smlp.up_proj", p);
    plan_matrix(pl, b, t->intermediate, t->hidden);
    snprintf(b, sizeof b, "%smlp.down_proj", p);
    plan_matrix(pl, b, t->hidden, t->intermediate);
}

/*
 * One decoder layer in the order the HF module lists its parameters. The
 * DeltaNet's A_log is f32 in both layouts (mlx's cast predicate keeps it)
 * and its gated norm is f32 in the official checkpoint.
 */
static void plan_layer(struct jev_synth_plan *pl, const struct jev_text_config *t, int i) {
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
        plan_vec(pl, b, t->lin_v_heads, JEV_GEN_ONE_NOISE, 0.02, 0, JEV_DTYPE_BF16, JEV_DTYPE_BF16, false);
        snprintf(b, sizeof b, "%slinear_attn.A_log", p); /* f32 in both (mlx's cast predicate keeps it) */
        plan_vec(pl, b, t->lin_v_heads, JEV_GEN_A_LOG, 0, 0, JEV_DTYPE_F32, JEV_DTYPE_F32, false);
        snprintf(b, sizeof b, "%slinear_attn.norm.weight", p); /* f32 in the official checkpoint, never shifted */
        plan_vec(pl, b, t->lin_v_dim, JEV_GEN_ONE_NOISE, 0.02, 0, JEV_DTYPE_F32, JEV_DTYPE_BF16, false);
        snprintf(b, sizeof b, "%slinear_attn.out_proj", p);
        plan_matrix(pl, b, t->hidden, t->lin_value_dim);
    } else {
        plan_full_attn(pl, p, t);
    }
    snprintf(b, sizeof b, "%spost_attention_layernorm.weight", p);
    plan_norm1p(pl, b, t->hidden);
    plan_mlp(pl, p, t);
}

/*
 * The vision tower. The patch embedding is generated in HF's (c, t, y, x)
 * order for both layouts and permuted to channels-last for mlx4 when
 * written, so both layouts hold the same kernel.
 */
static void plan_vision(struct jev_synth_plan *pl, const struct jev_vision_config *v) {
    const char *vp = "model.visual.";
    char b[256], p[128];
    snprintf(b, sizeof b, "%spatch_embed.proj.weight", vp);
    bool mlx = pl->layout == JEV_SYNTH_MLX4;
    enum jev_synth_form form = mlx ? JEV_FORM_PATCH_MLX : JEV_FORM_FLOAT;
    struct jev_synth_item *it = add_item(pl, b, JEV_GEN_NORMAL, 0.02, 0, form, v->hidden, v->patch_dim);
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
static void plan_mtp(struct jev_synth_plan *pl, const struct jev_text_config *t, int n) {
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

/*
 * Model order (embed, layers, norm, head, vision, mtp) decides sharding, as
 * HF's save_pretrained shards in state-dict order.
 */
void jev_synth_plan_model(struct jev_synth_plan *pl, const struct jev_config *c, int n_mtp) {
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

/* Frees names and arrays; safe after an out-of-memory plan. */
void jev_synth_plan_free(struct jev_synth_plan *pl) {
    for (int32_t i = 0; i < pl->nt; i++)
        free(pl->t[i].name);
    for (int32_t i = 0; i < pl->ni; i++)
        free(pl->it[i].key);
    free(pl->t);
    free(pl->it);
}

/* ---- values ---- */

/*
 * The underlying values of elements [start, start + n) of a weight.
 * The values are defined per element index in HF's flat order, so a block
 * of rows can be generated anywhere in the tensor independently. Each kind
 * is rounded to what its file stores (see bf16_round).
 */
void jev_synth_values(const struct jev_synth_item *it, uint64_t key, uint64_t start, int64_t n, float *out) {
    double a = 0.0, b = 0.0;
    uint64_t have = UINT64_MAX;
    for (int64_t j = 0; j < n; j++) {
        uint64_t i = start + (uint64_t)j;
        double z = 0.0;
        if (it->gen == JEV_GEN_NORMAL || it->gen == JEV_GEN_NORM_OFFSET || it->gen == JEV_GEN_ONE_NOISE) {
            if ((i >> 1) != have) {
                have = i >> 1;
                normal_pair(key, have, &a, &b);
            }
            z = (i & 1) ? b : a;
        }
        switch (it->gen) {
        case JEV_GEN_NORMAL: out[j] = bf16_round((float)(it->p0 * z)); break;
        case JEV_GEN_NORM_OFFSET: out[j] = (float)(nearbyint(it->p0 * z * 128.0) / 128.0); break;
        case JEV_GEN_ONE_NOISE: out[j] = bf16_round((float)(1.0 + it->p0 * z)); break;
        case JEV_GEN_UNIFORM: out[j] = bf16_round((float)(it->p0 + (it->p1 - it->p0) * uniform_at(key, i))); break;
        case JEV_GEN_A_LOG: out[j] = (float)jev_synth_log(1.0 + 15.0 * uniform_at(key, i)); break;
        }
    }
}
