/*
 * synth-plan.c - what jev synth writes, before anything is written: the
 * deterministic random numbers, the MLX-style quantizer, and the plan (every
 * logical weight of the model in HF terms, from the tensor table of
 * model/tensors.h: how its values are drawn, and which tensors it becomes in
 * the chosen layout).
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
 * Adds one output tensor: its name in the plan's layout + suffix, dtype, stored shape.
 * Allocation failures are remembered in pl->oom and reported once after
 * planning, which keeps the planning walk free of error checks.
 */
static int32_t add_out(struct jev_synth_plan *pl, const char *name, const char *suffix, enum jev_dtype dt, int32_t ndim,
                       const int64_t *shape) {
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
    char full[JEV_TENSOR_NAME_MAX + 16];
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
static struct jev_synth_item *add_item(struct jev_synth_plan *pl, const char *key, const struct jev_tensor_kind *k,
                                       enum jev_synth_form f, int64_t rows, int64_t cols) {
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
        .key = strdup(key), .gen = k->gen, .p0 = k->p0, .p1 = k->p1, .form = f, .rows = rows, .cols = cols};
    pl->oom |= it->key == NULL;
    pl->n_params += rows * cols;
    return it;
}

/*
 * One tensor of the table's walk: its generator (keyed by the HF name) and
 * its output tensors in the plan's layout.
 * - A matrix is quantized in mlx4 when its input width is a multiple of the
 *   group size (mlx's quantize predicate; otherwise mlx leaves it in float,
 *   and so does this writer; the loader accepts float matrices in MLX
 *   files): codes + scales + biases.
 * - A (1 + w) norm is drawn as the offset w on a 2^-7 grid and stored as w
 *   in hf and as 1 + w (exact in bf16) in mlx4.
 * - The patch embedding is drawn in HF's (c, t, y, x) order for both
 *   layouts and permuted to channels-last for mlx4 when written, so both
 *   layouts hold the same kernel.
 * - Everything else is stored as drawn, in the entry's dtype of the layout
 *   (hf and mlx4 may differ: linear_attn.norm is f32 vs bf16).
 */
static void plan_tensor(struct jev_synth_plan *pl, const struct jev_config *c, const struct jev_tensor_at *at) {
    const struct jev_tensor_kind *k = at->k;
    bool mlx = pl->layout == JEV_SYNTH_MLX4;
    enum jev_layout layout = mlx ? JEV_LAYOUT_MLX : JEV_LAYOUT_HF;
    char hf[JEV_TENSOR_NAME_MAX], out[JEV_TENSOR_NAME_MAX], key[JEV_TENSOR_NAME_MAX + 16];
    jev_tensor_name(at, JEV_LAYOUT_HF, hf);
    jev_tensor_name(at, layout, out);
    enum jev_dtype dt = mlx ? k->mlx_dtype : k->hf_dtype;
    if (k->form == JEV_TFORM_MATRIX) {
        snprintf(key, sizeof key, "%s.weight", hf);
        bool q = mlx && at->cols % pl->group == 0 && (at->cols * pl->bits) % 32 == 0;
        struct jev_synth_item *it = add_item(pl, key, k, q ? JEV_FORM_QUANT : JEV_FORM_FLOAT, at->rows, at->cols);
        if (!q) {
            int64_t sh[2] = {at->rows, at->cols};
            it->out[it->n_out++] = add_out(pl, out, ".weight", dt, 2, sh);
            return;
        }
        int64_t wsh[2] = {at->rows, at->cols * pl->bits / 32}, ssh[2] = {at->rows, at->cols / pl->group};
        it->out[it->n_out++] = add_out(pl, out, ".weight", JEV_DTYPE_U32, 2, wsh);
        it->out[it->n_out++] = add_out(pl, out, ".scales", JEV_DTYPE_BF16, 2, ssh);
        it->out[it->n_out++] = add_out(pl, out, ".biases", JEV_DTYPE_BF16, 2, ssh);
        return;
    }
    enum jev_synth_form form = JEV_FORM_FLOAT;
    if (mlx && k->form == JEV_TFORM_NORM1P)
        form = JEV_FORM_SHIFTED;
    if (mlx && k->form == JEV_TFORM_PATCH)
        form = JEV_FORM_PATCH_MLX;
    struct jev_synth_item *it = add_item(pl, hf, k, form, at->rows, at->cols);
    int64_t sh[5];
    int32_t nd = jev_tensor_file_shape(at, c, layout, sh);
    it->out[it->n_out++] = add_out(pl, out, "", dt, nd, sh);
}

/*
 * The tensor table's walk is HF's state-dict order (embed, layers, norm,
 * head, vision, mtp), which decides sharding, as HF's save_pretrained
 * shards in state-dict order. The MTP head of the official checkpoint is
 * written in hf only (HF and jev ignore it; mlx-vlm drops it).
 */
void jev_synth_plan_model(struct jev_synth_plan *pl, const struct jev_config *c, int n_mtp) {
    struct jev_tensor_walk w;
    struct jev_tensor_at at;
    jev_tensor_walk_init(&w, c, c->has_vision, pl->layout == JEV_SYNTH_HF ? n_mtp : 0);
    while (jev_tensor_walk_next(&w, &at))
        plan_tensor(pl, c, &at);
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
        case JEV_GEN_COUNT: out[j] = 0.0f; break; /* not a generator: the table check refuses it */
        }
    }
}
