/*
 * cpu.h - the CPU backend's instance and the op functions that fill
 * jev_cpu_ops. Each group of ops lives in its own file (cpu-dense.c,
 * cpu-elementwise.c, ...); cpu.c assembles the table.
 */
#ifndef JEV_BACKEND_CPU_H
#define JEV_BACKEND_CPU_H

#include <math.h>
#include <string.h>

#include "backend/ops.h" // defines: struct jev_ops, struct jev_backend
#include "base/pool.h"   // defines: struct jev_pool, jev_pool_run

#define JEV_CPU_SCRATCH_FLOATS (1 << 18) /* per-thread scratch (floats): weight tiles, attention scores */
#define JEV_CPU_MAX_RUNS 4096            /* sequences in one batched LM op */
#define JEV_CPU_WBUF_FLOATS (1 << 22)    /* per-thread dequantized weight tile for sgemm (16 MiB) */
#define JEV_CPU_GEMM_MIN_N                                                                                             \
    3 /* tokens from which matmul dequantizes tiles for sgemm (measured on/above the fused kernels) */
#define JEV_CPU_XH_VALUES (1 << 23) /* fast mode: bf16 activations of one product pass (16 MiB, made on the switch) */

/* Fast mode's kernels (cpu-matmul-bf16.c), in order of preference; NONE: exact mode. */
enum jev_cpu_bf16 { JEV_CPU_BF16_NONE = 0, JEV_CPU_BF16_AVX512 = 1, JEV_CPU_BF16_AMX = 2 };

/* Exact mode's products of 3+ tokens. OPENBLAS: every product through cpu-matmul.c's sgemm path; AVX512: every one the
 * kernel reads through cpu-gemm-avx512.c; AUTO (the default where the CPU has AVX-512 F): the kernel for the matrices
 * where it measured ahead, by shape alone (jev_cpu_gemm512 says which), OpenBLAS for the others. */
enum jev_cpu_gemm { JEV_CPU_GEMM_OPENBLAS = 0, JEV_CPU_GEMM_AVX512 = 1, JEV_CPU_GEMM_AUTO = 2 };

struct jev_backend {
    struct jev_pool *pool;  /* workers for parallel loops (not owned); NULL = caller only */
    int n_threads;          /* jev_pool_size(pool) */
    float *scratch;         /* [n_threads][JEV_CPU_SCRATCH_FLOATS] per-thread scratch */
    float *wbuf;            /* [n_threads][JEV_CPU_WBUF_FLOATS] per-thread weight tiles (cpu-matmul.c) */
    enum jev_cpu_bf16 bf16; /* the kernels matmul runs: NONE in exact mode (the start), fast mode's otherwise */
    enum jev_cpu_gemm gemm; /* exact mode's kernel for 3+ tokens: JEV_CPU_GEMM's choice (jev_cpu_gemm_choose) */
    uint16_t *xh;           /* fast mode: [JEV_CPU_XH_VALUES] bf16 activations; made by the first switch to fast */
};

/*
 * The fast kernels (cpu-matmul.c, cpu-lm-fast.c, ...) use AVX2, FMA and F16C
 * intrinsics (through cpu-simd.h). On x86-64 their functions carry JEV_AVX2
 * so that the files build with any -march (the sanitizer and fuzz builds pass
 * none); the public entry points check jev_cpu_has_avx2() and fall back to
 * the scalar references. On other CPUs (aarch64) the same kernels compile
 * through SIMDe, which maps each intrinsic to NEON (or to portable C where a
 * CPU has no vector unit SIMDe knows): nothing to ask at run time.
 * This is the one place that tells the two apart (JEV_CPU_X86).
 */
#if defined(__x86_64__) || defined(__i386__)
#define JEV_CPU_X86 1
#define JEV_AVX2 __attribute__((target("avx2,fma,f16c")))
/* F16C is not asked separately: every AVX2 CPU has it (and clang's builtin does not know the name). */
static inline bool jev_cpu_has_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
#else
#define JEV_CPU_X86 0
#define JEV_AVX2
static inline bool jev_cpu_has_avx2(void) { return true; }
#endif

/* Per-thread scratch of JEV_CPU_SCRATCH_FLOATS floats. */
static inline float *jev_cpu_scratch(struct jev_backend *be, int thread) {
    return be->scratch + (size_t)thread * JEV_CPU_SCRATCH_FLOATS;
}

/* Run r's value head h of the delta rule starts from ssm_in when the run names one (a light fork reads
 * its parent's state, ops.h): copied into the head's block of ssm, which the kernels then update. */
static inline void jev_cpu_gdn_state_in(const struct jev_gdn_run *run, int32_t h, int64_t head_floats) {
    if (run->ssm_in && run->ssm_in != run->ssm)
        memcpy(run->ssm + h * head_floats, run->ssm_in + h * head_floats, (size_t)head_floats * sizeof(float));
}

/* The window a run's conv reads before its first row: conv_in when named, else its own (ops.h). */
static inline const float *jev_cpu_conv_in(const struct jev_gdn_run *run) {
    return run->conv_in ? run->conv_in : run->conv;
}

/* Per-thread weight-tile buffer of JEV_CPU_WBUF_FLOATS floats. */
static inline float *jev_cpu_wbuf(struct jev_backend *be, int thread) {
    return be->wbuf + (size_t)thread * JEV_CPU_WBUF_FLOATS;
}

/*
 * Row loops of the pointwise and norm ops: fn(arg, r0, r1, thread) over [0, n) in
 * blocks spread over the pool once the op touches at least
 * JEV_CPU_PAR_MIN_ELEMS values (n * elems_per_row), else on the calling
 * thread (a decode step's ops are a few thousand values: a pool job would
 * cost more than the work). Rows are independent, so the result does not
 * depend on the split.
 */
#define JEV_CPU_PAR_MIN_ELEMS (1 << 15)
typedef void (*jev_cpu_rows_fn)(void *arg, int64_t r0, int64_t r1, int thread); /* thread: for jev_cpu_scratch */
void jev_cpu_for_rows(struct jev_backend *be, int64_t n, int64_t elems_per_row, jev_cpu_rows_fn fn, void *arg);

/* 1 / sqrt(mean(x^2) + eps), the sum in index order (torch's RMSNorm: mean of squares, add eps, rsqrt);
 * shared by rmsnorm and the gated RMSNorm so that both round alike. */
static inline float jev_cpu_rms_inv(const float *x, int32_t d, float eps) {
    float ss = 0.0f;
    for (int32_t i = 0; i < d; i++)
        ss += x[i] * x[i];
    return 1.0f / sqrtf(ss / (float)d + eps);
}

/* cpu-dense.c: the scalar reference products */
void jev_cpu_matmul(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y);
void jev_cpu_matmul_rows(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids, int32_t n_rows,
                         const float *x, int64_t n, float *y);
void jev_cpu_embed(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int64_t n, float *out);

/* cpu-matmul.c: the fast products in the op table (AVX2 fused kernels, OpenBLAS sgemm) */
void jev_cpu_matmul_fast(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y);
void jev_cpu_matmul_rows_fast(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids,
                              int32_t n_rows, const float *x, int64_t n, float *y);
void jev_cpu_embed_fast(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int64_t n, float *out);

/* cpu-gemm-avx512.c: exact mode's products of 3+ tokens on AVX-512 CPUs. jev_cpu_gemm512 computes
 * y[t][o] = x[t] . W[row(o)]^T for o < n_out (row(o) = row_ids[o], or o when NULL) and returns true, or
 * returns false without touching y when the backend's choice leaves the matrix to OpenBLAS or it is a
 * type the kernel does not read (then cpu-matmul.c's sgemm path runs). */
bool jev_cpu_gemm512(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids, int64_t n_out,
                     const float *x, int64_t n, float *y);
/* The kernel from knob (the JEV_CPU_GEMM variable): NULL, empty or auto = AUTO where the CPU has AVX-512 F,
 * else OPENBLAS (the default); openblas = OPENBLAS; avx512 = AVX512 (JEV_ERR_UNSUPPORTED where the CPU
 * lacks AVX-512 F). Another value is JEV_ERR_INVALID_ARG naming it. */
enum jev_status jev_cpu_gemm_choose(const char *knob, enum jev_cpu_gemm *out, struct jev_error *err);

/* cpu-matmul-bf16.c: fast mode (AVX512-BF16 dot products, AMX-BF16 tiles). The table's matmul is
 * jev_cpu_matmul_op: jev_cpu_matmul_bf16 in fast mode from JEV_CPU_GEMM_MIN_N tokens, else (exact mode,
 * and 1-2 tokens in both modes) jev_cpu_matmul_fast. jev_cpu_matmul_bf16 takes any token count. */
void jev_cpu_matmul_op(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y);
void jev_cpu_matmul_bf16(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y);
/* The table's set_precision: exact always; fast with the kernels jev_cpu_bf16_choose picks, else refused. */
enum jev_status jev_cpu_set_precision(struct jev_backend *be, enum jev_precision p, struct jev_error *err);
/* What this CPU can run (detected once): AMX where it has AMX-BF16 and Linux lets the process use the
 * tiles, AVX512 where it has AVX512-BF16 (with AVX512 F, BW, VL, DQ), else NONE. */
enum jev_cpu_bf16 jev_cpu_bf16_hw(void);
/* Fast mode's decision: the kernels to run given what the CPU has and cap (the JEV_CPU_BF16 variable:
 * none, avx512 or amx, the most fast mode may use; NULL or empty: no cap). NONE available is
 * JEV_ERR_UNSUPPORTED naming the missing CPU feature (or the cap) and what to use instead; a cap
 * outside the three names is JEV_ERR_INVALID_ARG. */
enum jev_status jev_cpu_bf16_choose(enum jev_cpu_bf16 have, const char *cap, enum jev_cpu_bf16 *out,
                                    struct jev_error *err);

/* cpu-elementwise.c */
void jev_cpu_rmsnorm(struct jev_backend *be, const float *x, const float *w, int64_t n, int32_t d, float eps, float *y);
void jev_cpu_layernorm(struct jev_backend *be, const float *x, const float *w, const float *b, int64_t n, int32_t d,
                       float eps, float *y);
void jev_cpu_add(struct jev_backend *be, float *x, const float *y, int64_t n);
void jev_cpu_add_rmsnorm(struct jev_backend *be, float *x, const float *y, const float *w, int64_t n, int32_t d,
                         float eps, float *h);
void jev_cpu_add_bias(struct jev_backend *be, float *y, const float *b, int64_t n, int32_t d);
void jev_cpu_swiglu(struct jev_backend *be, const float *gate, const float *up, int64_t n, float *out);
void jev_cpu_gelu(struct jev_backend *be, float *x, int64_t n, bool tanh_form);

/* cpu-lm.c (LM-OPS) */
void jev_cpu_copy(struct jev_backend *be, float *dst, const float *src, int64_t n);
void jev_cpu_split_qgate(struct jev_backend *be, const float *qg, int64_t n, int32_t heads, int32_t dh, float *q,
                         float *gate);
void jev_cpu_rope(struct jev_backend *be, float *x, int64_t n, int32_t heads, int32_t dh, int32_t n_freq,
                  const float *cos, const float *sin);
void jev_cpu_sigmoid_mul(struct jev_backend *be, float *x, const float *gate, int64_t n);
void jev_cpu_attention(struct jev_backend *be, const struct jev_attn_shape *s, const float *q,
                       const struct jev_attn_run *runs, int32_t n_runs, float *o);
void jev_cpu_gdn_conv(struct jev_backend *be, const float *mixed, const float *taps, int32_t conv_dim, int32_t kernel,
                      const struct jev_gdn_run *runs, int32_t n_runs, float *u);
void jev_cpu_gdn_gates(struct jev_backend *be, const float *a, const float *b, const float *a_log, const float *dt_bias,
                       int64_t n, int32_t hv, float *g, float *beta);
void jev_cpu_gdn_rule(struct jev_backend *be, const struct jev_gdn_shape *s, const float *u, const float *g,
                      const float *beta, const struct jev_gdn_run *runs, int32_t n_runs, float *o);
void jev_cpu_gated_rmsnorm(struct jev_backend *be, const float *x, const float *z, const float *w, int64_t n, int32_t d,
                           float eps, float *y);
/* cpu-lm-fast.c: the table's attention, conv and delta rule (AVX2, BLAS); cpu-lm.c's are their references */
void jev_cpu_attention_fast(struct jev_backend *be, const struct jev_attn_shape *s, const float *q,
                            const struct jev_attn_run *runs, int32_t n_runs, float *o);
void jev_cpu_gdn_rule_fast(struct jev_backend *be, const struct jev_gdn_shape *s, const float *u, const float *g,
                           const float *beta, const struct jev_gdn_run *runs, int32_t n_runs, float *o);
void jev_cpu_gdn_conv_fast(struct jev_backend *be, const float *mixed, const float *taps, int32_t conv_dim,
                           int32_t kernel, const struct jev_gdn_run *runs, int32_t n_runs, float *u);
/* cpu-small-gemm.c (AVX2; callers check jev_cpu_has_avx2): products of the small shapes inside one task.
 * C[M][N] = alpha * sum_k a(i,k) B[k][n] + beta * C, a(i,k) = A[i*ai + k*ak] (row-major A: ai = lda, ak = 1;
 * A transposed: ai = 1, ak = lda); B row-major with ldb; beta 0 does not read C. */
void jev_cpu_small_gemm(int M, int N, int K, float alpha, const float *A, int64_t ai, int64_t ak, const float *B,
                        int64_t ldb, float beta, float *C, int64_t ldc);
/* X[L][N] <- T^-1 X for T unit lower triangular (the strict lower part of T[L][L] is read); N % 8 == 0. */
void jev_cpu_small_trsm_lower_unit(int L, int N, const float *T, int64_t ldt, float *X, int64_t ldx);
/* Per-thread scratch floats the delta rule needs for shape s (must fit JEV_CPU_SCRATCH_FLOATS). */
int64_t jev_cpu_gdn_scratch(const struct jev_gdn_shape *s);

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
