/*
 * lm-fixture.h - a small hybrid model built in memory for the LM tests, and
 * an independent double-precision twin of its forward.
 *
 * The fixture model has every feature of Qwen3.5's text model at toy sizes:
 * DeltaNet and attention layers, grouped value heads (Hv = 2 Hk), GQA,
 * partial interleaved M-RoPE, (1 + w) norm multipliers, a tied head. Weights
 * are seeded uniform noise (splitmix64), f32.
 *
 * The twin (fx_twin_*) is written from the spec's per-token math (spec
 * qwen35.md sections 3-5 and 13), not from model/lm.c: double precision,
 * token by token, plain recurrence for every token, attention over a flat
 * K/V array. It shares no code with the library except the config struct,
 * so agreement within f32 rounding is an independent check of the chunked
 * delta rule, the conv window, RoPE and the batching.
 *
 * Header-only (static functions) so each test binary takes what it needs.
 */
#ifndef JEV_TESTS_LM_FIXTURE_H
#define JEV_TESTS_LM_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"  // defines: struct jev_config
#include "model/weights.h" // defines: struct jev_weights

#define FX_MAX_LAYERS 8

struct fx_model {
    struct jev_config cfg;                           /* tiny config */
    struct jev_weights w;                            /* weight tables pointing into mem */
    struct jev_layer_weights layers[FX_MAX_LAYERS];  /* per layer */
    float *mem;                                      /* every float of the model */
    size_t used, cap;                                /* floats of mem handed out / allocated */
    uint64_t rng;                                    /* splitmix64 state */
};

static inline uint64_t fx_next(struct fx_model *m) {
    uint64_t z = (m->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi) */
static inline float fx_unif(struct fx_model *m, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(fx_next(m) >> 11) * (1.0 / 9007199254740992.0));
}

static inline float *fx_take(struct fx_model *m, size_t n) {
    if (m->used + n > m->cap)
        abort();
    float *p = m->mem + m->used;
    m->used += n;
    return p;
}

static inline float *fx_vec(struct fx_model *m, size_t n, float lo, float hi) {
    float *p = fx_take(m, n);
    for (size_t i = 0; i < n; i++)
        p[i] = fx_unif(m, lo, hi);
    return p;
}

static inline struct jev_matrix fx_mat(struct fx_model *m, int32_t rows, int32_t cols, float amp) {
    struct jev_matrix w = {0};
    w.type = JEV_MTYPE_F32;
    w.rows = rows;
    w.cols = cols;
    w.data = fx_vec(m, (size_t)rows * (size_t)cols, -amp, amp);
    w.name = "fixture";
    return w;
}

/*
 * Builds the fixture: D 48, 5 layers (lin, lin, full, lin, full), Hq 4 / Hkv 2
 * of dh 32 (rotary 16 -> 8 pairs, section [3, 3, 2]), DeltaNet Hk 2 / Hv 4 of
 * dk = dv = 16, conv K 4, F 80, vocab 101, tied head.
 */
static inline void fx_build(struct fx_model *m, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->rng = seed;
    struct jev_text_config *t = &m->cfg.text;
    t->vocab_size = 101;
    t->hidden = 48;
    t->intermediate = 80;
    t->n_layers = 5;
    const uint8_t kinds[5] = {JEV_LAYER_LINEAR, JEV_LAYER_LINEAR, JEV_LAYER_FULL, JEV_LAYER_LINEAR, JEV_LAYER_FULL};
    memcpy(t->layer_kind, kinds, sizeof kinds);
    t->n_heads = 4;
    t->n_kv_heads = 2;
    t->head_dim = 32;
    t->rotary_dim = 16;
    t->mrope_section[0] = 3;
    t->mrope_section[1] = 3;
    t->mrope_section[2] = 2;
    t->mrope_interleaved = true;
    t->rope_theta = 10000000.0;
    t->lin_k_heads = 2;
    t->lin_v_heads = 4;
    t->lin_k_dim = 16;
    t->lin_v_dim = 16;
    t->conv_kernel = 4;
    t->rms_eps = 1e-6f;
    t->tie_embeddings = true;
    t->max_positions = 32768;
    struct jev_error err = {0};
    if (jev_config_derive(&m->cfg, &err) != JEV_OK)
        abort();
    m->cap = 1u << 20;
    m->mem = calloc(m->cap, sizeof(float));
    if (!m->mem)
        abort();
    int32_t D = t->hidden, F = t->intermediate;
    m->w.text.embed = fx_mat(m, t->vocab_size, D, 1.0f);
    m->w.text.lm_head = m->w.text.embed;
    m->w.text.final_norm = fx_vec(m, (size_t)D, 0.8f, 1.2f);
    m->w.text.layers = m->layers;
    for (int32_t l = 0; l < t->n_layers; l++) {
        struct jev_layer_weights *L = &m->layers[l];
        L->kind = (enum jev_layer_kind)t->layer_kind[l];
        L->in_norm = fx_vec(m, (size_t)D, 0.8f, 1.2f);
        L->post_norm = fx_vec(m, (size_t)D, 0.8f, 1.2f);
        if (L->kind == JEV_LAYER_LINEAR) {
            L->lin.in_qkv = fx_mat(m, t->conv_dim, D, 0.3f);
            L->lin.in_z = fx_mat(m, t->lin_value_dim, D, 0.3f);
            L->lin.in_b = fx_mat(m, t->lin_v_heads, D, 0.3f);
            L->lin.in_a = fx_mat(m, t->lin_v_heads, D, 0.3f);
            L->lin.out = fx_mat(m, D, t->lin_value_dim, 0.3f);
            L->lin.conv = fx_vec(m, (size_t)t->conv_dim * (size_t)t->conv_kernel, -0.5f, 0.5f);
            L->lin.dt_bias = fx_vec(m, (size_t)t->lin_v_heads, 0.5f, 1.5f);
            L->lin.a_log = fx_take(m, (size_t)t->lin_v_heads);
            for (int32_t h = 0; h < t->lin_v_heads; h++)
                L->lin.a_log[h] = logf(fx_unif(m, 1.0f, 16.0f)) - 2.0f; /* milder decay than HF init */
            L->lin.norm = fx_vec(m, (size_t)t->lin_v_dim, 0.8f, 1.2f);
        } else {
            L->full.q = fx_mat(m, t->q_proj_out, D, 0.3f);
            L->full.k = fx_mat(m, t->kv_dim, D, 0.3f);
            L->full.v = fx_mat(m, t->kv_dim, D, 0.3f);
            L->full.o = fx_mat(m, D, t->attn_out, 0.3f);
            L->full.q_norm = fx_vec(m, (size_t)t->head_dim, 0.8f, 1.2f);
            L->full.k_norm = fx_vec(m, (size_t)t->head_dim, 0.8f, 1.2f);
        }
        L->gate = fx_mat(m, F, D, 0.3f);
        L->up = fx_mat(m, F, D, 0.3f);
        L->down = fx_mat(m, D, F, 0.3f);
    }
}

static inline void fx_free(struct fx_model *m) { free(m->mem); }

/* Seeded token ids in [0, vocab). */
static inline void fx_tokens(uint64_t seed, int32_t n, int32_t vocab, int32_t *ids) {
    uint64_t s = seed;
    for (int32_t i = 0; i < n; i++) {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        ids[i] = (int32_t)((z ^ (z >> 31)) % (uint64_t)vocab);
    }
}

/* ---- the double-precision twin ---- */

struct fx_twin {
    const struct fx_model *m;
    int32_t n;        /* tokens seen */
    int32_t cap;      /* token capacity */
    double *kv;       /* [n_layers][cap][2][kv_dim] (full layers only used) */
    double *conv;     /* [n_layers][K-1][conv_dim] */
    double *ssm;      /* [n_layers][Hv][dk][dv] */
};

static inline void fx_twin_init(struct fx_twin *tw, const struct fx_model *m, int32_t cap) {
    const struct jev_text_config *t = &m->cfg.text;
    tw->m = m;
    tw->n = 0;
    tw->cap = cap;
    tw->kv = calloc((size_t)t->n_layers * (size_t)cap * 2 * (size_t)t->kv_dim, sizeof(double));
    tw->conv = calloc((size_t)t->n_layers * (size_t)(t->conv_kernel - 1) * (size_t)t->conv_dim, sizeof(double));
    tw->ssm = calloc((size_t)t->n_layers * (size_t)t->lin_v_heads * (size_t)t->lin_k_dim * (size_t)t->lin_v_dim,
                     sizeof(double));
    if (!tw->kv || !tw->conv || !tw->ssm)
        abort();
}

static inline void fx_twin_free(struct fx_twin *tw) {
    free(tw->kv);
    free(tw->conv);
    free(tw->ssm);
}

static inline void fx_twin_copy(struct fx_twin *dst, const struct fx_twin *src) {
    const struct jev_text_config *t = &src->m->cfg.text;
    fx_twin_init(dst, src->m, src->cap);
    dst->n = src->n;
    memcpy(dst->kv, src->kv, (size_t)t->n_layers * (size_t)src->cap * 2 * (size_t)t->kv_dim * sizeof(double));
    memcpy(dst->conv, src->conv,
           (size_t)t->n_layers * (size_t)(t->conv_kernel - 1) * (size_t)t->conv_dim * sizeof(double));
    memcpy(dst->ssm, src->ssm,
           (size_t)t->n_layers * (size_t)t->lin_v_heads * (size_t)t->lin_k_dim * (size_t)t->lin_v_dim *
               sizeof(double));
}

static inline void fx_matvec(const struct jev_matrix *w, const double *x, double *y) {
    const float *d = w->data;
    for (int32_t r = 0; r < w->rows; r++) {
        double acc = 0;
        for (int32_t c = 0; c < w->cols; c++)
            acc += (double)d[(size_t)r * (size_t)w->cols + (size_t)c] * x[c];
        y[r] = acc;
    }
}

static inline void fx_rmsnorm(const double *x, const float *w, int32_t d, double *y) {
    double ss = 0;
    for (int32_t i = 0; i < d; i++)
        ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / d + 1e-6);
    for (int32_t i = 0; i < d; i++)
        y[i] = x[i] * inv * (double)w[i];
}

static inline double fx_silu(double x) { return x / (1.0 + exp(-x)); }

/*
 * One token with 3-axis position pos[3] through the twin; logits[vocab] out.
 * Everything per the spec: RMSNorm multipliers, DeltaNet recurrence with the
 * sum-form L2 norm and the 1/sqrt(dk) query scale, GQA softmax attention with
 * interleaved M-RoPE on the first rotary_dim dims, SwiGLU, tied head.
 */
static inline void fx_twin_step(struct fx_twin *tw, int32_t id, const int32_t pos[3], double *logits) {
    const struct fx_model *m = tw->m;
    const struct jev_text_config *t = &m->cfg.text;
    int32_t D = t->hidden, F = t->intermediate;
    double x[256], h[256], out[256], big[1024], big2[1024], z[256], o[256];
    const float *emb = m->w.text.embed.data;
    for (int32_t i = 0; i < D; i++)
        x[i] = emb[(size_t)id * (size_t)D + (size_t)i];
    int32_t p = tw->n;
    for (int32_t l = 0; l < t->n_layers; l++) {
        const struct jev_layer_weights *L = &m->layers[l];
        fx_rmsnorm(x, L->in_norm, D, h);
        if (L->kind == JEV_LAYER_LINEAR) {
            int32_t C = t->conv_dim, K = t->conv_kernel, dk = t->lin_k_dim, dv = t->lin_v_dim;
            double *win = tw->conv + (size_t)l * (size_t)(K - 1) * (size_t)C;
            double *S0 = tw->ssm + (size_t)l * (size_t)t->lin_v_heads * (size_t)dk * (size_t)dv;
            double mixed[1024], u[1024], a[16], b[16];
            fx_matvec(&L->lin.in_qkv, h, mixed);
            fx_matvec(&L->lin.in_z, h, z);
            fx_matvec(&L->lin.in_b, h, b);
            fx_matvec(&L->lin.in_a, h, a);
            for (int32_t c = 0; c < C; c++) {
                double acc = 0;
                for (int32_t k = 0; k < K - 1; k++)
                    acc += (double)L->lin.conv[c * K + k] * win[k * C + c];
                acc += (double)L->lin.conv[c * K + K - 1] * mixed[c];
                u[c] = fx_silu(acc);
                for (int32_t k = 0; k + 1 < K - 1; k++)
                    win[k * C + c] = win[(k + 1) * C + c];
                win[(K - 2) * C + c] = mixed[c];
            }
            for (int32_t hh = 0; hh < t->lin_v_heads; hh++) {
                int32_t kh = hh / (t->lin_v_heads / t->lin_k_heads);
                double q[64], kk[64];
                double qs = 0, ks = 0;
                for (int32_t i = 0; i < dk; i++) {
                    q[i] = u[kh * dk + i];
                    kk[i] = u[t->lin_key_dim + kh * dk + i];
                    qs += q[i] * q[i];
                    ks += kk[i] * kk[i];
                }
                for (int32_t i = 0; i < dk; i++) {
                    q[i] = q[i] / sqrt(qs + 1e-6) / sqrt((double)dk);
                    kk[i] = kk[i] / sqrt(ks + 1e-6);
                }
                const double *v = u + 2 * t->lin_key_dim + hh * dv;
                double beta = 1.0 / (1.0 + exp(-b[hh]));
                double xa = a[hh] + (double)L->lin.dt_bias[hh];
                double sp = xa > 20 ? xa : log1p(exp(xa));
                double g = -exp((double)L->lin.a_log[hh]) * sp;
                double *S = S0 + (size_t)hh * (size_t)dk * (size_t)dv;
                for (int32_t i = 0; i < dk * dv; i++)
                    S[i] *= exp(g);
                for (int32_t c = 0; c < dv; c++) {
                    double r = 0;
                    for (int32_t i = 0; i < dk; i++)
                        r += S[i * dv + c] * kk[i];
                    double delta = beta * (v[c] - r);
                    for (int32_t i = 0; i < dk; i++)
                        S[i * dv + c] += kk[i] * delta;
                }
                double ss = 0;
                for (int32_t c = 0; c < dv; c++) {
                    double r = 0;
                    for (int32_t i = 0; i < dk; i++)
                        r += S[i * dv + c] * q[i];
                    o[hh * dv + c] = r;
                    ss += r * r;
                }
                double inv = 1.0 / sqrt(ss / dv + 1e-6);
                for (int32_t c = 0; c < dv; c++)
                    o[hh * dv + c] = (double)L->lin.norm[c] * o[hh * dv + c] * inv * fx_silu(z[hh * dv + c]);
            }
            fx_matvec(&L->lin.out, o, out);
        } else {
            int32_t hq = t->n_heads, hkv = t->n_kv_heads, dh = t->head_dim, nf = t->rotary_dim / 2;
            double k[256], v[256], q[512];
            fx_matvec(&L->full.q, h, big);
            fx_matvec(&L->full.k, h, k);
            fx_matvec(&L->full.v, h, v);
            /* axis of each frequency: interleaved THW with H up to 3*s_h, W up to 3*s_w */
            double ang[64];
            for (int32_t i = 0; i < nf; i++) {
                int axis = 0;
                if (i % 3 == 1 && i < 3 * t->mrope_section[1])
                    axis = 1;
                if (i % 3 == 2 && i < 3 * t->mrope_section[2])
                    axis = 2;
                double inv_freq = 1.0 / pow(t->rope_theta, 2.0 * i / t->rotary_dim);
                ang[i] = pos[axis] * inv_freq;
            }
            for (int32_t hh = 0; hh < hq + hkv; hh++) {
                double *vec = hh < hq ? q + hh * dh : k + (hh - hq) * dh;
                if (hh < hq)
                    for (int32_t d = 0; d < dh; d++)
                        vec[d] = big[hh * 2 * dh + d];
                fx_rmsnorm(vec, hh < hq ? L->full.q_norm : L->full.k_norm, dh, vec);
                for (int32_t d = 0; d < nf; d++) {
                    double x1 = vec[d], x2 = vec[d + nf];
                    vec[d] = x1 * cos(ang[d]) - x2 * sin(ang[d]);
                    vec[d + nf] = x2 * cos(ang[d]) + x1 * sin(ang[d]);
                }
            }
            double *cache = tw->kv + (size_t)l * (size_t)tw->cap * 2 * (size_t)t->kv_dim;
            memcpy(cache + (size_t)p * 2 * (size_t)t->kv_dim, k, (size_t)t->kv_dim * sizeof(double));
            memcpy(cache + ((size_t)p * 2 + 1) * (size_t)t->kv_dim, v, (size_t)t->kv_dim * sizeof(double));
            for (int32_t hh = 0; hh < hq; hh++) {
                int32_t kvh = hh / (hq / hkv);
                double sc[4096], mx = -1e300, sum = 0;
                for (int32_t j = 0; j <= p; j++) {
                    const double *kj = cache + (size_t)j * 2 * (size_t)t->kv_dim + kvh * dh;
                    double acc = 0;
                    for (int32_t d = 0; d < dh; d++)
                        acc += q[hh * dh + d] * kj[d];
                    sc[j] = acc / sqrt((double)dh);
                    if (sc[j] > mx)
                        mx = sc[j];
                }
                for (int32_t j = 0; j <= p; j++) {
                    sc[j] = exp(sc[j] - mx);
                    sum += sc[j];
                }
                for (int32_t d = 0; d < dh; d++) {
                    double acc = 0;
                    for (int32_t j = 0; j <= p; j++)
                        acc += sc[j] / sum * cache[((size_t)j * 2 + 1) * (size_t)t->kv_dim + kvh * dh + d];
                    double gate = big[hh * 2 * dh + dh + d];
                    o[hh * dh + d] = acc / (1.0 + exp(-gate));
                }
            }
            fx_matvec(&L->full.o, o, out);
        }
        for (int32_t i = 0; i < D; i++)
            x[i] += out[i];
        fx_rmsnorm(x, L->post_norm, D, h);
        fx_matvec(&L->gate, h, big);
        fx_matvec(&L->up, h, big2);
        for (int32_t i = 0; i < F; i++)
            big[i] = fx_silu(big[i]) * big2[i];
        fx_matvec(&L->down, big, out);
        for (int32_t i = 0; i < D; i++)
            x[i] += out[i];
    }
    fx_rmsnorm(x, m->w.text.final_norm, D, h);
    fx_matvec(&m->w.text.lm_head, h, logits);
    tw->n++;
}

#endif
