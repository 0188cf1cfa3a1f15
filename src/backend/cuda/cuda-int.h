/*
 * cuda-int.h - the CUDA backend's instance and the kernels' launchers.
 *
 * One backend instance = one device, one stream, one cuBLAS handle. Every op
 * is queued on that stream and returns at once; ops->download and ops->sync
 * wait. Shared by cuda.c (host side, compiled as C) and the kernel files
 * (cuda-*.cu, compiled by nvcc as C++): plain C declarations only.
 *
 * Conventions for the kernel files (ops.h says the rest):
 * - float tensors and the data of weight matrices are device pointers. A
 *   mirrored matrix keeps its stored form on the device (f32, bf16, f16 rows,
 *   or MLX affine codes with their scales and biases: 4-bit weights stay 4-bit,
 *   cuda-weights.cu); kernels that read weights element by element (embed,
 *   vision_pos_add, matmul_rows) dequantize as they read (cuda-weights-int.h),
 *   and matmul dequantizes row chunks into the backend's scratch (dq) right
 *   before the cuBLAS product: f32 in exact mode, bf16 in fast mode.
 * - host arrays an op receives (ids, row_ids, idx, run and span descriptors)
 *   are copied to the device with jev_cuda_stage() inside the op: one
 *   staging area per backend, reset at the start of each op
 *   (jev_cuda_stage_reset), large enough for any op's arrays (JEV_CUDA_STAGE_BYTES).
 *   The stream's order makes reuse safe: an op's copies are queued after the
 *   previous op's kernels.
 * - math is f32 as on the CPU: no TF32, no fast-math intrinsics where the
 *   CPU reference uses the libm function (expf, tanhf, erff, sqrtf); the CPU
 *   scalar op is the reference (tests/cuda/, NMSE 1e-7 as tests/test-ops.c).
 *   Exact mode's product may be an error-compensated one instead of the f32
 *   SIMT GEMM (JEV_CUDA_EXACT_GEMM=bf16x6 | 3xtf32, cuda-gemm-split.cu): f32
 *   values split exactly into bf16 or TF32 pieces, their products on tensor
 *   cores, checked against a double reference (test-cuda-matmul.c).
 *   The exceptions are fast mode's products (be->precision, set_precision):
 *   matmul and the vision attention's two products, bf16 inputs, f32
 *   accumulation, checked against a CPU reference of the same bf16 inputs
 *   within a derived bound (tests/bf16-ref.h, tests/cuda/test-cuda-attention.c).
 * - a launch error is recorded in the backend (jev_cuda_check) and reported by
 *   ops->status (jev_cuda_ops.status), which the model layer asks after each
 *   forward and the parity tests after each op; ops themselves cannot fail
 *   (ops.h).
 */
#ifndef JEV_BACKEND_CUDA_INT_H
#define JEV_BACKEND_CUDA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda-split-int.h"   // defines: enum jev_cuda_exact_gemm, jev_cuda_dequant_split
#include "backend/cuda/cuda-weights-int.h" // defines: JEV_CUDA_DQ_CAP, jev_cuda_dequant_rows, jev_cuda_to_bf16
#include "backend/ops.h"                   // defines: struct jev_ops, the op argument structs

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The engine's slice when it is not told (ops->step_tokens): a 532-token prompt in one slice instead
 * of 512 + 20, whose second slice dequantized every weight and launched every op again for 20 tokens
 * (H100, medians of 3: exact prefill 30.6 -> 25.7 ms, independent 64 decisions 4.18 -> 3.80 s). 2048
 * ran no faster on the benchmark's prompts and took 85 MiB more activations: 1.55 GB peak at 64
 * decisions, over the 1.5 GB the benchmark allows (bench/results/2026-12-07-h100-run9/). */
#define JEV_CUDA_STEP_TOKENS 1024

/* Bytes of the per-backend staging area for host arrays copied in by an op. */
#define JEV_CUDA_STAGE_BYTES ((size_t)16 << 20)

struct jev_backend {
    int device;                          /* CUDA device ordinal */
    enum jev_precision precision;        /* exact (f32 sgemm) or fast (bf16 GEMM, f32 accumulation): set_precision */
    enum jev_cuda_exact_gemm exact_gemm; /* exact's many-token product: JEV_CUDA_EXACT_GEMM */
    void *dq;            /* scratch for one weight chunk's dequantized rows (f32, bf16 in fast mode), or a split
                            product's pieces: a weight chunk's, then a slice of the activations' */
    size_t dq_bytes;     /* its size: the largest mirrored matrix in its widest form, at most JEV_CUDA_DQ_CAP */
    uint16_t *xh;        /* fast mode: matmul's activations rounded to bf16 */
    size_t xh_bytes;     /* its size; grown like work (synchronizing) */
    uint16_t *vh;        /* fast mode: the vision attention's Q, K, V rounded to bf16 */
    size_t vh_bytes;     /* its size; grown like xh */
    cudaStream_t stream; /* every op is queued here */
    cublasHandle_t blas; /* bound to stream; CUBLAS_DEFAULT_MATH: sgemm is f32 FMA, never TF32 */
    /* the pinned products (cuda-gemm.c): one cuBLASLt algorithm per shape, whatever the row count */
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t lt_desc;      /* CUBLAS_COMPUTE_32F, f32 scale, W transposed: every kind but TF32 */
    cublasLtMatmulDesc_t lt_desc_tf32; /* the same with CUBLAS_COMPUTE_32F_FAST_TF32: kind TF32 */
    void *lt_ws;                       /* their workspace [lt_ws_bytes] */
    size_t lt_ws_bytes;
    bool pin_forced;           /* JEV_CUDA_PIN is set: it, not set_batch_invariant, decides pin */
    bool pin;                  /* false: every product the cuBLAS call of before (cuda-gemm.c says when) */
    int64_t pin_n;             /* the row count the algorithms are chosen for (JEV_CUDA_PIN=N, default 512) */
    struct jev_cuda_pin *pins; /* the chosen algorithms, one per key */
    int32_t n_pins, cap_pins;
    int64_t unpinned;              /* products of 2+ rows that ran unpinned while pinning was on */
    char *stage;                   /* device staging area [JEV_CUDA_STAGE_BYTES] */
    size_t stage_used;             /* bytes handed out since the op began */
    float *work;                   /* device scratch for ops that need one (gathered rows, chunk matrices) */
    size_t work_bytes;             /* its size; grown by jev_cuda_work (synchronizing) */
    cudaError_t first_error;       /* first CUDA error seen by an op (cudaSuccess if none) */
    const char *first_error_where; /* the op that saw it */
    bool lost;                     /* a sticky fault: the context is unusable (cuda_status) */
    size_t shared_optin;           /* shared memory one block may opt in to (cudaDeviceProp) */
    bool debug_sync;               /* JEV_CUDA_SYNC=1: wait after every launch, so that a fault names its op */
    int n_sm;                      /* multiprocessors, for grid sizing */
    size_t gdn_chunk_shared[3];    /* dynamic shared memory the chunked delta rule's kernels were allowed
                                      (cuda-gdn-chunk.cu) */
    bool attn_per_row;             /* JEV_CUDA_ATTN_TILES=0: no tiled LM attention (A/B timing) */
    size_t attn_tile_shared[3];    /* likewise the tiled attention kernel's, per head size (cuda-attention-tile.cu) */
    /* device bytes held through jev_cuda_malloc (ops->memory): now, peak, and the live blocks */
    int64_t mem_now, mem_peak;
    struct jev_cuda_block *blocks;
    int32_t n_blocks, cap_blocks;
};

struct jev_cuda_block {
    void *p;
    size_t bytes;
};

/* The op table and the instance (cuda.c). Callers outside this folder reach them through the
 * registry (backend/registry.h, entry "cuda"). Creation fails with a message naming the device or
 * the CUDA error. */
extern const struct jev_ops jev_cuda_ops;
enum jev_status jev_cuda_backend_new(int device, struct jev_backend **out, struct jev_error *err);
void jev_cuda_backend_free(struct jev_backend *be);

/* Makes be's device the calling thread's current one (a no-op when it already is). The CUDA runtime
 * keeps the current device per thread and an engine made on one thread may run on another (the
 * server's scheduler); every op a forward or an allocation can begin with calls this first. */
void jev_cuda_bind(struct jev_backend *be);

/* cudaMalloc / cudaFree with the backend's byte count (what the benchmark reports as peak device
 * memory). jev_cuda_malloc returns NULL when the device or the count's table is out of room. */
void *jev_cuda_malloc(struct jev_backend *be, size_t bytes);
void jev_cuda_free(struct jev_backend *be, void *p);

/* Starts an op's use of the staging area. */
void jev_cuda_stage_reset(struct jev_backend *be);
/* Copies bytes of host memory to the staging area (queued on the stream); returns the device
 * address, 256-byte aligned. An op whose arrays exceed JEV_CUDA_STAGE_BYTES is a sizing bug
 * (always-on assert). */
void *jev_cuda_stage(struct jev_backend *be, const void *host, size_t bytes);
/* A device scratch of at least bytes, valid until the next call (may synchronize to grow). */
float *jev_cuda_work(struct jev_backend *be, size_t bytes);
/* Allows kernel `bytes` of dynamic shared memory once per backend and size: *allowed is what it was
 * allowed so far (a field of the backend). The attribute is a maximum, so only a larger size sets it
 * again; setting it before every launch would be a driver call in every layer. */
void jev_cuda_allow_shared(struct jev_backend *be, size_t *allowed, const void *kernel, size_t bytes,
                           const char *where);
/* Records the first error of a CUDA call or launch (cudaGetLastError after a launch). */
void jev_cuda_check(struct jev_backend *be, cudaError_t e, const char *where);

/* ---- launchers, one family per kernel file; same arguments as the op they serve ---- */

/* cuda-pointwise.cu: the elementwise, norm and small LM/vision ops */
void jev_cuda_rmsnorm(struct jev_backend *be, const float *x, const float *w, int64_t n, int32_t d, float eps,
                      float *y);
void jev_cuda_layernorm(struct jev_backend *be, const float *x, const float *w, const float *b, int64_t n, int32_t d,
                        float eps, float *y);
void jev_cuda_add(struct jev_backend *be, float *x, const float *y, int64_t n);
void jev_cuda_add_rmsnorm(struct jev_backend *be, float *x, const float *y, const float *w, int64_t n, int32_t d,
                          float eps, float *h);
void jev_cuda_add_bias(struct jev_backend *be, float *y, const float *b, int64_t n, int32_t d);
void jev_cuda_swiglu(struct jev_backend *be, const float *gate, const float *up, int64_t n, float *out);
void jev_cuda_gelu(struct jev_backend *be, float *x, int64_t n, bool tanh_form);
void jev_cuda_copy(struct jev_backend *be, float *dst, const float *src, int64_t n);
void jev_cuda_split_qgate(struct jev_backend *be, const float *qg, int64_t n, int32_t heads, int32_t dh, float *q,
                          float *gate);
void jev_cuda_rope(struct jev_backend *be, float *x, int64_t n, int32_t heads, int32_t dh, int32_t n_freq,
                   const float *cos, const float *sin);
void jev_cuda_sigmoid_mul(struct jev_backend *be, float *x, const float *gate, int64_t n);
void jev_cuda_gdn_gates(struct jev_backend *be, const float *a, const float *b, const float *a_log,
                        const float *dt_bias, int64_t n, int32_t hv, float *g, float *beta);
void jev_cuda_gated_rmsnorm(struct jev_backend *be, const float *x, const float *z, const float *w, int64_t n,
                            int32_t d, float eps, float *y);
void jev_cuda_vision_rope(struct jev_backend *be, float *qkv, const float *cos, const float *sin, int64_t n,
                          int32_t n_heads, int32_t head_dim);
void jev_cuda_vision_pos_add(struct jev_backend *be, const struct jev_matrix *table, const int32_t *idx, const float *w,
                             int64_t n, float *x);
void jev_cuda_embed(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int64_t n, float *out);

/* cuda-weights.cu: the stored form on the device and its dequantization */
/* Copies a host matrix to the device as it is stored (one allocation: data, then scales and biases of
 * an affine matrix) and grows the scratch dq to its f32 size (at most JEV_CUDA_DQ_CAP). Unsupported
 * widths, groups or scale types are JEV_ERR_UNSUPPORTED naming the matrix; no room, JEV_ERR_NOMEM. */
enum jev_status jev_cuda_matrix_upload(struct jev_backend *be, const struct jev_matrix *host, struct jev_matrix *dev,
                                       struct jev_error *err);
/* Frees what jev_cuda_matrix_upload allocated (after the queued ops) and zeroes *dev. */
void jev_cuda_matrix_free(struct jev_backend *be, struct jev_matrix *dev);
/* (jev_cuda_dequant_rows, jev_cuda_to_bf16, jev_cuda_dq_bytes: cuda-weights-int.h) */

/* cuda-gemm.c: Y[n][ldy] (columns [0, m) written) = X[n][k] . W^T for W row-major [m][k] on the device,
 * with one cuBLASLt algorithm per shape whatever n is (the file says which calls run unpinned).
 * F32: exact (f32 FMA); BF16: W and X bf16, f32 accumulation; ROWS: f32, the candidates of matmul_rows,
 * pinned per inner dim alone (their count changes with the batch); TF32: W and X f32 whose values
 * are TF32 (exact mode's split product, CUBLAS_COMPUTE_32F_FAST_TF32). */
enum jev_cuda_gemm_kind { JEV_CUDA_GEMM_F32, JEV_CUDA_GEMM_BF16, JEV_CUDA_GEMM_ROWS, JEV_CUDA_GEMM_TF32 };
void jev_cuda_gemm(struct jev_backend *be, enum jev_cuda_gemm_kind kind, const void *w, int64_t m, int64_t k,
                   const void *x, int64_t n, float *y, int64_t ldy, const char *where);
/* The same over the first k values of rows ld apart (W's and X's: ld >= k), and Y += (accumulate)
 * instead of Y =: the split products' partial sums (cuda-gemm-split.cu). Pinned per (kind, m, k, ld,
 * ldy, alignment). */
void jev_cuda_gemm_ld(struct jev_backend *be, enum jev_cuda_gemm_kind kind, const void *w, int64_t m, int64_t k,
                      int64_t ld, const void *x, int64_t n, float *y, int64_t ldy, bool accumulate, const char *where);
/* The cuBLASLt handle, descriptors and workspace (creation; JEV_CUDA_PIN and JEV_CUDA_EXACT_GEMM read
 * here: an unknown JEV_CUDA_EXACT_GEMM fails with JEV_ERR_INVALID_ARG naming it), and their release. */
enum jev_status jev_cuda_gemm_init(struct jev_backend *be, struct jev_error *err);
void jev_cuda_gemm_free(struct jev_backend *be);
/* Products of 2+ rows that ran unpinned while pinning was on (tests require 0 for the shapes they use),
 * pinning turned on or off (JEV_CUDA_PIN's switch) and the row count the algorithms are chosen for (the
 * table chosen again), each returning what it was: the tests' A/B timing.
 * Declared again by tests/cuda/test-cuda-matmul.c, which cannot include this header. */
int64_t jev_cuda_gemm_unpinned(const struct jev_backend *be);
bool jev_cuda_gemm_set_pin(struct jev_backend *be, bool on);
/* ops->set_batch_invariant: pinning on or off, unless JEV_CUDA_PIN set it for the process. */
void jev_cuda_gemm_batch_invariant(struct jev_backend *be, bool on);
int64_t jev_cuda_gemm_set_pin_n(struct jev_backend *be, int64_t n);

/* cuda-matmul.cu: cuBLAS products over the stored weights: exact, sgemm (sgemv) on f32 rows; fast, a
 * bf16 tensor-core GEMM with f32 accumulation (matmul_rows, the candidates' scores, is f32 in both) */
void jev_cuda_matmul(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y);
void jev_cuda_matmul_rows(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids, int32_t n_rows,
                          const float *x, int64_t n, float *y);

/* cuda-gemm-split.cu: exact mode's product of more than JEV_CUDA_DIRECT_MAX_N tokens when
 * be->exact_gemm is not F32: the weights and activations split (cuda-split-int.h), the piece products
 * summed on tensor cores, smallest first (jev_cuda_matmul's exact branch calls it) */
void jev_cuda_matmul_split(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y);

/* cuda-attention.cu: LM causal GQA attention over K/V spans, vision bidirectional attention */
void jev_cuda_attention(struct jev_backend *be, const struct jev_attn_shape *s, const float *q,
                        const struct jev_attn_run *runs, int32_t n_runs, float *o);
void jev_cuda_vision_attention(struct jev_backend *be, const float *qkv, int64_t n, int32_t n_heads, int32_t head_dim,
                               float scale, float *out);

/* cuda-gdn.cu: the Gated DeltaNet conv and delta rule */
void jev_cuda_gdn_conv(struct jev_backend *be, const float *mixed, const float *taps, int32_t conv_dim, int32_t kernel,
                       const struct jev_gdn_run *runs, int32_t n_runs, float *u);
void jev_cuda_gdn_rule(struct jev_backend *be, const struct jev_gdn_shape *s, const float *u, const float *g,
                       const float *beta, const struct jev_gdn_run *runs, int32_t n_runs, float *o);

#ifdef __cplusplus
}
#endif

#endif
