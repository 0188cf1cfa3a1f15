/*
 * cpu.h - the CPU backend's instance and the op functions that fill
 * jev_cpu_ops. Each group of ops lives in its own file (cpu-dense.c,
 * cpu-elementwise.c, ...); cpu.c assembles the table.
 */
#ifndef JEV_BACKEND_CPU_H
#define JEV_BACKEND_CPU_H

#include "backend/ops.h" // defines: struct jev_ops, struct jev_backend
#include "base/pool.h"   // defines: struct jev_pool, jev_pool_run

#define JEV_CPU_SCRATCH_FLOATS (1 << 16) /* per-thread row scratch (floats) */

struct jev_backend {
    struct jev_pool *pool;   /* workers for parallel loops (not owned); NULL = caller only */
    int n_threads;           /* jev_pool_size(pool) */
    float *scratch;          /* [n_threads][JEV_CPU_SCRATCH_FLOATS] per-thread scratch */
};

/* Per-thread scratch of JEV_CPU_SCRATCH_FLOATS floats. */
static inline float *jev_cpu_scratch(struct jev_backend *be, int thread) {
    return be->scratch + (size_t)thread * JEV_CPU_SCRATCH_FLOATS;
}

/* cpu-dense.c */
void jev_cpu_matmul(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y);
void jev_cpu_matmul_rows(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids,
                         int32_t n_rows, const float *x, int64_t n, float *y);
void jev_cpu_embed(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int64_t n, float *out);

/* cpu-elementwise.c */
void jev_cpu_rmsnorm(struct jev_backend *be, const float *x, const float *w, int64_t n, int32_t d, float eps,
                     float *y);
void jev_cpu_layernorm(struct jev_backend *be, const float *x, const float *w, const float *b, int64_t n,
                       int32_t d, float eps, float *y);
void jev_cpu_add(struct jev_backend *be, float *x, const float *y, int64_t n);
void jev_cpu_add_bias(struct jev_backend *be, float *y, const float *b, int64_t n, int32_t d);
void jev_cpu_swiglu(struct jev_backend *be, const float *gate, const float *up, int64_t n, float *out);
void jev_cpu_gelu(struct jev_backend *be, float *x, int64_t n, bool tanh_form);

/* cpu-vision.c */
void jev_cpu_vision_rope(struct jev_backend *be, float *qkv, const float *cos, const float *sin, int64_t n,
                         int32_t n_heads, int32_t head_dim);
void jev_cpu_vision_attention(struct jev_backend *be, const float *qkv, int64_t n, int32_t n_heads, int32_t head_dim,
                              float scale, float *out);
/* The scalar reference of vision_attention (plain two-pass softmax with libm expf); for parity tests. */
void jev_cpu_vision_attention_ref(struct jev_backend *be, const float *qkv, int64_t n, int32_t n_heads,
                                  int32_t head_dim, float scale, float *out);
/* The blocked (table) form; force_scalar uses its scalar kernels even on an AVX2 CPU (parity tests). */
void jev_cpu_vision_attention_blocked(struct jev_backend *be, const float *qkv, int64_t n, int32_t n_heads,
                                      int32_t head_dim, float scale, float *out, bool force_scalar);
void jev_cpu_vision_pos_add(struct jev_backend *be, const struct jev_matrix *table, const int32_t *idx, const float *w,
                            int64_t n, float *x);

#endif
