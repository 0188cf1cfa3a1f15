/*
 * ops.h - the backend op table. The forward passes (model/lm.c,
 * model/vision.c) are written once against this table; every backend
 * (backend/cpu, backend/cuda) fills one. The CPU scalar op is the reference
 * that SIMD and CUDA ops must match (tests/test-ops.c, NMSE).
 *
 * Pointers passed to an op live in the backend's own memory (host for CPU,
 * device for CUDA). Shapes are row-major; `n` counts rows (tokens).
 */
#ifndef JEV_BACKEND_OPS_H
#define JEV_BACKEND_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "model/weights.h" // defines: struct jev_matrix

/* One backend instance, per engine: CPU holds a thread pool, CUDA a stream. */
struct jev_backend;

struct jev_ops {
    const char *name; /* "cpu", "cuda" */

    /* ---- dense algebra ---- */
    /* y[n][w->rows] = x[n][w->cols] . W^T, any matrix type. */
    void (*matmul)(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y);
    /* y[n][n_rows] = x[n][w->cols] . W[row_ids]^T: the LM head over candidate rows only. */
    void (*matmul_rows)(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids,
                        int32_t n_rows, const float *x, int64_t n, float *y);
    /* out[n][w->cols] = rows ids[0..n) of w, dequantized. */
    void (*embed)(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int64_t n, float *out);

    /* ---- elementwise and norms ---- */
    /* y = x / sqrt(mean(x^2) + eps) * w per row of d (w is the multiplier). y may be x. */
    void (*rmsnorm)(struct jev_backend *be, const float *x, const float *w, int64_t n, int32_t d, float eps, float *y);
    /* y = (x - mean) / sqrt(var + eps) * w + b per row of d. y may be x. */
    void (*layernorm)(struct jev_backend *be, const float *x, const float *w, const float *b, int64_t n,
                      int32_t d, float eps, float *y);
    /* x[i] += y[i] for i < n. */
    void (*add)(struct jev_backend *be, float *x, const float *y, int64_t n);
    /* y[r][c] += b[c], r < n, c < d. */
    void (*add_bias)(struct jev_backend *be, float *y, const float *b, int64_t n, int32_t d);
    /* out[i] = silu(gate[i]) * up[i], i < n. out may be gate. */
    void (*swiglu)(struct jev_backend *be, const float *gate, const float *up, int64_t n, float *out);
    /* x[i] = gelu(x[i]), tanh form (gelu_pytorch_tanh) or exact erf form. */
    void (*gelu)(struct jev_backend *be, float *x, int64_t n, bool tanh_form);

    /* ---- language model ops (model/lm.c) ---- */
    /* LM-OPS: the language-model helper adds its fields below this line. */

    /* ---- vision ops (model/vision.c) ---- */
    /* VISION-OPS: the vision helper adds its fields below this line. */
    /* 2-D rotary in place on q and k of qkv[n][3*H*hd] ([q | k | v], heads of hd inside each part):
     * x' = x * cos + rotate_half(x) * sin with cos/sin[n][hd] (rotate_half pairs d with d + hd/2). */
    void (*vision_rope)(struct jev_backend *be, float *qkv, const float *cos, const float *sin, int64_t n,
                        int32_t n_heads, int32_t head_dim);
    /* out[n][H*hd] = softmax(q k^T * scale) v for every head, bidirectional over all n rows of qkv[n][3*H*hd]. */
    void (*vision_attention)(struct jev_backend *be, const float *qkv, int64_t n, int32_t n_heads, int32_t head_dim,
                             float scale, float *out);
    /* x[r][:] += ((t0*w0 + t1*w1) + t2*w2) + t3*w3, t_k = row idx[r][k] of table (dequantized), w = w[r][k];
     * r < n: the bilinear learned position embedding. */
    void (*vision_pos_add)(struct jev_backend *be, const struct jev_matrix *table, const int32_t *idx, const float *w,
                           int64_t n, float *x);
};

/* The CPU backend: its op table and instance (backend/cpu/cpu.c). */
extern const struct jev_ops jev_cpu_ops;
struct jev_pool;
/* Creates a CPU backend over a thread pool (not owned). */
struct jev_backend *jev_cpu_backend_new(struct jev_pool *pool);
void jev_cpu_backend_free(struct jev_backend *be);
/* The pool of a CPU backend (NULL for other backends). */
struct jev_pool *jev_cpu_backend_pool(struct jev_backend *be);

#endif
