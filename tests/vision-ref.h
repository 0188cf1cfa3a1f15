/*
 * vision-ref.h - test helpers (header-only, included by the vision tests):
 * a double-precision reference vision tower written from spec/qwen35.md §6
 * independently of src/model/vision.c, a small f32 model built in memory,
 * and deterministic pixel input.
 *
 * The reference deliberately takes other routes than the engine: the patch
 * order comes from nested block loops (not index decoding), the position
 * interpolation from the linspace(0, S-1, g) definition, rotary angles from
 * the per-dimension rule, softmax in two passes in double.
 */
#ifndef JEV_TESTS_VISION_REF_H
#define JEV_TESTS_VISION_REF_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"  // defines: struct jev_vision_config
#include "model/model.h"   // defines: jev_model_open
#include "model/weights.h" // defines: struct jev_vision_weights, jev_matrix_get

/* ---- deterministic numbers ---- */

static inline double vref_uniform(uint64_t *s) { /* in [-1, 1) */
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 4503599627370496.0 - 1.0;
}

static inline void vref_pixels(float *pix, int n, int dim, unsigned seed) {
    uint64_t s = seed * 977u + 3;
    for (size_t i = 0; i < (size_t)n * (size_t)dim; i++)
        pix[i] = (float)vref_uniform(&s);
}

/* ---- an in-memory model ---- */

struct vref_model {
    struct jev_vision_config cfg;            /* sizes */
    struct jev_vision_weights w;             /* weights, every matrix F32 */
    struct jev_vision_block_weights blk[4];  /* blocks (depth <= 4) */
    float *mem[64];                          /* owned arrays */
    int n_mem;                               /* entries of mem */
};

static inline float *vref_array(struct vref_model *m, size_t n, double scale, double offset, uint64_t *s) {
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = (float)(offset + scale * vref_uniform(s));
    m->mem[m->n_mem++] = a;
    return a;
}

static inline struct jev_matrix vref_matrix(struct vref_model *m, int rows, int cols, uint64_t *s, const char *name) {
    struct jev_matrix x = {.type = JEV_MTYPE_F32, .rows = rows, .cols = cols, .name = name};
    x.data = vref_array(m, (size_t)rows * (size_t)cols, 1.5 / sqrt((double)cols), 0.0, s);
    return x;
}

static inline void vref_model_init(struct vref_model *m, unsigned seed) {
    memset(m, 0, sizeof *m);
    struct jev_vision_config *c = &m->cfg;
    c->depth = 2;
    c->hidden = 32;
    c->n_heads = 2;
    c->intermediate = 48;
    c->in_channels = 3;
    c->patch = 4;
    c->temporal_patch = 2;
    c->merge = 2;
    c->out_hidden = 24;
    c->n_pos_embed = 25;
    c->gelu_tanh = true;
    c->eps = 1e-6f;
    c->head_dim = 16;
    c->patch_dim = 3 * 2 * 4 * 4;
    c->pos_side = 5;
    c->merge_in = 4 * 32;
    uint64_t s = seed;
    const int D = c->hidden, I = c->intermediate, M = c->merge_in;
    m->w.patch_w = vref_array(m, (size_t)D * (size_t)c->patch_dim, 1.0 / sqrt((double)c->patch_dim), 0.0, &s);
    m->w.patch_b = vref_array(m, (size_t)D, 0.1, 0.0, &s);
    m->w.pos_embed = (struct jev_matrix){.type = JEV_MTYPE_F32, .rows = 25, .cols = D, .name = "pos_embed"};
    m->w.pos_embed.data = vref_array(m, (size_t)25 * (size_t)D, 0.5, 0.0, &s);
    for (int l = 0; l < c->depth; l++) {
        struct jev_vision_block_weights *b = &m->blk[l];
        b->norm1_w = vref_array(m, (size_t)D, 0.2, 1.0, &s);
        b->norm1_b = vref_array(m, (size_t)D, 0.1, 0.0, &s);
        b->norm2_w = vref_array(m, (size_t)D, 0.2, 1.0, &s);
        b->norm2_b = vref_array(m, (size_t)D, 0.1, 0.0, &s);
        b->qkv = vref_matrix(m, 3 * D, D, &s, "qkv");
        b->qkv_b = vref_array(m, (size_t)(3 * D), 0.1, 0.0, &s);
        b->proj = vref_matrix(m, D, D, &s, "proj");
        b->proj_b = vref_array(m, (size_t)D, 0.1, 0.0, &s);
        b->fc1 = vref_matrix(m, I, D, &s, "fc1");
        b->fc1_b = vref_array(m, (size_t)I, 0.1, 0.0, &s);
        b->fc2 = vref_matrix(m, D, I, &s, "fc2");
        b->fc2_b = vref_array(m, (size_t)D, 0.1, 0.0, &s);
    }
    m->w.blocks = m->blk;
    m->w.merger_norm_w = vref_array(m, (size_t)D, 0.2, 1.0, &s);
    m->w.merger_norm_b = vref_array(m, (size_t)D, 0.1, 0.0, &s);
    m->w.merger_fc1 = vref_matrix(m, M, M, &s, "merger.fc1");
    m->w.merger_fc1_b = vref_array(m, (size_t)M, 0.1, 0.0, &s);
    m->w.merger_fc2 = vref_matrix(m, c->out_hidden, M, &s, "merger.fc2");
    m->w.merger_fc2_b = vref_array(m, (size_t)c->out_hidden, 0.1, 0.0, &s);
}

static inline void vref_model_free(struct vref_model *m) {
    for (int i = 0; i < m->n_mem; i++)
        free(m->mem[i]);
    memset(m, 0, sizeof *m);
}

/* ---- the reference forward (double) ---- */

static inline double vref_get(const struct jev_matrix *m, int r, int c) { return (double)jev_matrix_get(m, r, c); }

/* y[n][rows] = x[n][cols] . W^T + b */
static inline void vref_linear(const struct jev_matrix *W, const float *b, const double *x, int n, double *y) {
    for (int t = 0; t < n; t++)
        for (int r = 0; r < W->rows; r++) {
            double acc = b ? (double)b[r] : 0.0;
            for (int k = 0; k < W->cols; k++)
                acc += vref_get(W, r, k) * x[(size_t)t * (size_t)W->cols + (size_t)k];
            y[(size_t)t * (size_t)W->rows + (size_t)r] = acc;
        }
}

static inline void vref_layernorm(const double *x, const float *g, const float *b, int n, int d, double *y) {
    for (int t = 0; t < n; t++) {
        const double *xr = x + (size_t)t * (size_t)d;
        double mean = 0, var = 0;
        for (int i = 0; i < d; i++)
            mean += xr[i];
        mean /= d;
        for (int i = 0; i < d; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        var /= d;
        for (int i = 0; i < d; i++)
            y[(size_t)t * (size_t)d + (size_t)i] = (xr[i] - mean) / sqrt(var + 1e-6) * (double)g[i] + (double)b[i];
    }
}

/* pixels [gh*gw][patch_dim] (processor order) -> out [gh*gw/4][out_hidden] */
static inline void vref_forward(const struct jev_vision_config *c, const struct jev_vision_weights *w,
                                const float *pix, int gh, int gw, double *out) {
    const int N = gh * gw, D = c->hidden, H = c->n_heads, hd = c->head_dim, I = c->intermediate, S = c->pos_side;
    const int mg = c->merge;
    int *prow = malloc((size_t)N * sizeof(int)), *pcol = malloc((size_t)N * sizeof(int));
    int p = 0;
    for (int br = 0; br < gh / mg; br++) /* the processor's order: merge blocks row-major, inside a block row-major */
        for (int bc = 0; bc < gw / mg; bc++)
            for (int ir = 0; ir < mg; ir++)
                for (int ic = 0; ic < mg; ic++, p++) {
                    prow[p] = br * mg + ir;
                    pcol[p] = bc * mg + ic;
                }
    double *x = malloc((size_t)N * D * sizeof(double)), *hn = malloc((size_t)N * D * sizeof(double));
    double *qkv = malloc((size_t)N * 3 * D * sizeof(double)), *att = malloc((size_t)N * D * sizeof(double));
    double *mlp = malloc((size_t)N * (size_t)(I > c->merge_in ? I : c->merge_in) * sizeof(double));
    double *px = malloc((size_t)N * (size_t)c->patch_dim * sizeof(double));
    for (size_t i = 0; i < (size_t)N * (size_t)c->patch_dim; i++)
        px[i] = (double)pix[i];
    /* patch embedding: the Conv3d kernel applied to the (c, t, y, x) cube = a dot product over it */
    struct jev_matrix pe = {.type = JEV_MTYPE_F32, .rows = D, .cols = c->patch_dim, .data = w->patch_w};
    vref_linear(&pe, w->patch_b, px, N, x);
    /* learned positions: F.interpolate(align_corners=True) = sampling at linspace(0, S-1, g) */
    for (int q = 0; q < N; q++) {
        double hs = gh == 1 ? 0.0 : prow[q] * (double)(S - 1) / (gh - 1);
        double ws = gw == 1 ? 0.0 : pcol[q] * (double)(S - 1) / (gw - 1);
        int r0 = (int)floor(hs), c0 = (int)floor(ws);
        int r1 = r0 + 1 < S ? r0 + 1 : S - 1, c1 = c0 + 1 < S ? c0 + 1 : S - 1;
        double fr = hs - r0, fc = ws - c0;
        for (int k = 0; k < D; k++) {
            double v = (1 - fr) * (1 - fc) * vref_get(&w->pos_embed, r0 * S + c0, k) +
                       (1 - fr) * fc * vref_get(&w->pos_embed, r0 * S + c1, k) +
                       fr * (1 - fc) * vref_get(&w->pos_embed, r1 * S + c0, k) +
                       fr * fc * vref_get(&w->pos_embed, r1 * S + c1, k);
            x[(size_t)q * D + (size_t)k] += v;
        }
    }
    double *sc = malloc((size_t)N * sizeof(double));
    for (int l = 0; l < c->depth; l++) {
        const struct jev_vision_block_weights *b = &w->blocks[l];
        vref_layernorm(x, b->norm1_w, b->norm1_b, N, D, hn);
        vref_linear(&b->qkv, b->qkv_b, hn, N, qkv);
        /* rotary: dim d of a head turns by row * f(d mod hd/2) for the first hd/4 of each half, else by col */
        for (int q = 0; q < N; q++)
            for (int part = 0; part < 2; part++)
                for (int h = 0; h < H; h++) {
                    double *v = qkv + (size_t)q * 3 * D + (size_t)part * D + (size_t)h * hd, tmp[512];
                    for (int d = 0; d < hd; d++) {
                        int e = d % (hd / 2);
                        double f = e < hd / 4 ? pow(10000.0, -2.0 * e / (hd / 2)) * prow[q]
                                              : pow(10000.0, -2.0 * (e - hd / 4) / (hd / 2)) * pcol[q];
                        double partner = d < hd / 2 ? -v[d + hd / 2] : v[d - hd / 2];
                        tmp[d] = v[d] * cos(f) + partner * sin(f);
                    }
                    memcpy(v, tmp, (size_t)hd * sizeof(double));
                }
        for (int h = 0; h < H; h++)
            for (int q = 0; q < N; q++) {
                double mx = -1e300, sum = 0;
                for (int k = 0; k < N; k++) {
                    double s = 0;
                    for (int d = 0; d < hd; d++)
                        s += qkv[(size_t)q * 3 * D + (size_t)h * hd + (size_t)d] *
                             qkv[(size_t)k * 3 * D + (size_t)D + (size_t)h * hd + (size_t)d];
                    sc[k] = s / sqrt((double)hd);
                    mx = fmax(mx, sc[k]);
                }
                for (int k = 0; k < N; k++)
                    sum += (sc[k] = exp(sc[k] - mx));
                for (int d = 0; d < hd; d++) {
                    double o = 0;
                    for (int k = 0; k < N; k++)
                        o += sc[k] * qkv[(size_t)k * 3 * D + 2 * (size_t)D + (size_t)h * hd + (size_t)d];
                    att[(size_t)q * D + (size_t)h * hd + (size_t)d] = o / sum;
                }
            }
        vref_linear(&b->proj, b->proj_b, att, N, hn);
        for (size_t i = 0; i < (size_t)N * D; i++)
            x[i] += hn[i];
        vref_layernorm(x, b->norm2_w, b->norm2_b, N, D, hn);
        vref_linear(&b->fc1, b->fc1_b, hn, N, mlp);
        for (size_t i = 0; i < (size_t)N * I; i++) {
            double v = mlp[i];
            mlp[i] = c->gelu_tanh ? 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                                  : 0.5 * v * (1 + erf(v / sqrt(2.0)));
        }
        vref_linear(&b->fc2, b->fc2_b, mlp, N, hn);
        for (size_t i = 0; i < (size_t)N * D; i++)
            x[i] += hn[i];
    }
    /* merger: per-patch LayerNorm, 4 consecutive patches (one 2x2 block) concatenated, erf-GELU MLP */
    vref_layernorm(x, w->merger_norm_w, w->merger_norm_b, N, D, hn);
    vref_linear(&w->merger_fc1, w->merger_fc1_b, hn, N / (mg * mg), mlp);
    for (size_t i = 0; i < (size_t)(N / (mg * mg)) * (size_t)c->merge_in; i++)
        mlp[i] = 0.5 * mlp[i] * (1 + erf(mlp[i] / sqrt(2.0)));
    vref_linear(&w->merger_fc2, w->merger_fc2_b, mlp, N / (mg * mg), out);
    free(prow);
    free(pcol);
    free(x);
    free(hn);
    free(qkv);
    free(att);
    free(mlp);
    free(px);
    free(sc);
}

/* ---- the tiny synthetic model ---- */

/* The tiny synthetic model (configs/tiny.json, seed 1) of a layout, written by `jev synth --force` under
 * $JEV_TEST_DIR once per test process (so a directory left by an older build is never reused). */
static inline struct jev_model *vref_open_tiny(const char *layout) {
    static char made[2][8]; /* layouts synthesized by this process */
    const char *bin = getenv("JEV_JEV_BIN"), *dir = getenv("JEV_TEST_DIR");
    char path[1024], cmd[2048];
    if (!dir)
        dir = "build/test-data";
    snprintf(path, sizeof path, "%s/vision-tiny-%s", dir, layout);
    int slot = strcmp(layout, "hf") == 0 ? 0 : 1;
    if (strcmp(made[slot], layout) != 0) {
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' && %s synth --config configs/tiny.json --seed 1 --layout %s --out %s "
                 "--force > /dev/null", dir, bin ? bin : "build/jev", layout, path);
        if (system(cmd) != 0)
            fail_msg("cannot synthesize the tiny model: %s", cmd);
        snprintf(made[slot], sizeof made[slot], "%s", layout);
    }
    struct jev_model *m = NULL;
    struct jev_error err = {0};
    if (jev_model_open(path, NULL, &m, &err) != JEV_OK)
        fail_msg("%s: %s", path, err.msg);
    return m;
}

#endif
