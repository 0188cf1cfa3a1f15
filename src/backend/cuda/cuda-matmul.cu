/*
 * cuda-matmul.cu - the CUDA matrix products over the weights in their stored form (cuda-weights.cu).
 *
 * - jev_cuda_matmul: y[n][rows] = x[n][cols] . W^T.
 *   Few tokens (n <= JEV_CUDA_DIRECT_MAX_N: decode steps), any non-f32 matrix, both modes: one warp
 *   per output row reads the row in its stored form, dequantizes each value as the CPU does (s * q + b,
 *   no contraction) and dots it with every token in f32 (rows_dot_kernel). The product is then
 *   memory-bound on the stored bytes (0.46 GB a token for the 0.8B model's 4-bit weights, against
 *   3.4 GB of f32 written and read again through the scratch); its sums are ordered otherwise than
 *   cuBLAS's (NMSE <= 1e-7 against the CPU, tests/cuda/test-cuda-matmul.c).
 *   More tokens, exact mode: an f32 matrix is multiplied where it is; any other type is dequantized into the
 *   backend's scratch (dq) as f32 rows (the CPU's values bit for bit), in row chunks of at most
 *   JEV_CUDA_DQ_CAP (a multiple of 8 rows when there are several), each chunk one f32 product
 *   (cuda-gemm.c; a gemv for one token): plain f32 FMAs (CUBLAS_COMPUTE_32F, no TF32), only the order
 *   of the sums differs from the CPU (tests/cuda/test-cuda-matmul.c: NMSE <= 1e-7). A matrix that fits
 *   the scratch in one chunk (every matrix of the 0.8B model but the 1 GB embedding / LM head) goes
 *   through the very call an f32 matrix of the same values does: the same results.
 *   JEV_CUDA_EXACT_GEMM (read when the backend is made) picks exact mode's product of more than
 *   JEV_CUDA_DIRECT_MAX_N tokens, for A/B measurement: f32 (the default: the f32 product above, its
 *   bits unchanged), bf16x6 (weights and activations split exactly into three bf16 pieces each, the
 *   six products that matter summed on bf16 tensor cores with f32 accumulation, smallest first) or
 *   3xtf32 (two TF32 pieces each, rounded to nearest, three products on TF32 tensor cores). Any
 *   weight type, f32 included; fewer tokens keep the paths above, and so do the batch-invariant
 *   (pinned) products the batcher asks for. cuda-gemm-split.cu has the error analysis;
 *   test-cuda-matmul.c measures each against a double reference and times it. Measured end to end
 *   (H100, run 9): bf16x6 within 5.6e-6 of transformers f32 (f32: 4.3e-6), 3xtf32 7.7e-6; exact shared
 *   1 / 64 decisions 66.7 / 295.3 ms with f32, 61.0 / 266.3 with bf16x6, 63.4 / 288.5 with 3xtf32.
 *   Fast mode: the activations rounded to bf16 (xh), the weights as bf16 rows (a bf16 matrix where
 *   it is, any other type dequantized and rounded into dq), one product per chunk with bf16 inputs,
 *   f32 output and CUBLAS_COMPUTE_32F: tensor cores, f32 accumulation.
 * - jev_cuda_matmul_rows: the LM head over candidate rows, f32 in both modes (scoring stays f32).
 *   Few tokens: one warp per candidate row dequantizes the row as it reads it and dots it with every
 *   token (the weights stream once, no copy). More tokens: the rows are dequantized into the
 *   backend's work scratch in chunks of at most GATHER_BYTES and each chunk is one f32 product.
 *
 * Company (what a row's result depends on): every product of more tokens runs one cuBLASLt
 * algorithm pinned per shape, without split-K, whatever the token count (cuda-gemm.c), so a token's
 * outputs are the same bits alone or batched with any number of others, at any position
 * (test-cuda-matmul.c's company test, memcmp; JEV_CUDA_PIN=0 brings back cuBLAS's own choice by row
 * count, whose bits change with the batch: the test then fails). The few-token boundary stays: a
 * non-f32 matrix's product of at most JEV_CUDA_DIRECT_MAX_N tokens (rows_dot_kernel, f32 in both
 * modes) sums in another order than the same tokens inside a product of more (the pinned algorithm;
 * bf16 in fast mode), so a token whose product alone has <= 4 tokens (a decode step, a scoring pass
 * over a few positions) gets other bits than in company (measured on the H200, the company test's
 * print: 4 tokens against the same among 5, NMSE 3e-14 to 3e-13 in exact mode, 2e-8 to 2e-5 in
 * fast: bf16's rounding). An f32 matrix's single token is a cublasSgemv, also unpinned. Prefills
 * and the vision tower (one image a forward) have the same token counts alone and in company.
 *
 * Row-major through column-major cuBLAS(Lt): a row-major [a][b] array is the column-major b x a
 * matrix (its transpose) with leading dimension b. So W (row-major [rows][cols]) is W^T
 * (cols x rows, ld cols), X ([n][cols]) is X^T (cols x n, ld cols) and Y ([n][rows]) is Y^T
 * (rows x n, ld rows). Y = X W^T  <=>  Y^T = W X^T = op_T(W^T) . X^T, hence
 *   cublasSgemm(OP_T, OP_N, m = rows, n = n, k = cols, A = W, lda = cols, B = X, ldb = cols,
 *               C = Y, ldc = rows)
 * (cublasLtMatmul: the same operations and layouts; the batch's tokens are cuBLAS's n dimension),
 * and for one token y = W x = op_T(W^T) . x: cublasSgemv(OP_T, m = cols, n = rows, A = W, lda = cols).
 * A block of output columns [r0, r0 + nr) of Y is C = Y + r0 with ldc still the full row length.
 */
#include "backend/cuda/cuda-int.h"         // defines: struct jev_backend, jev_cuda_stage, jev_cuda_work
#include "backend/cuda/cuda-weights-int.h" // defines: jev_cuda_wget, jev_cuda_chunk_rows

#include <stdint.h>

#define GATHER_BYTES ((size_t)64 << 20)         /* matmul_rows: gathered rows per product chunk */
#define ROWS_DIRECT_MAX_N JEV_CUDA_DIRECT_MAX_N /* tokens up to which rows are read in place */

/* ---- the products (cuda-gemm.c: one pinned cuBLASLt algorithm per shape) ---- */

/* Y[n][ldy] (columns [0, rows) written) = X[n][cols] . W^T, W device f32 row-major [rows][cols]. */
static void sgemm_rows(struct jev_backend *be, const float *w, int64_t rows, int64_t cols, const float *x, int64_t n,
                       float *y, int64_t ldy, const char *where) {
    jev_cuda_gemm(be, JEV_CUDA_GEMM_F32, w, rows, cols, x, n, y, ldy, where);
}

/* The same product in fast mode: W bf16 rows, X bf16 rows, Y f32, f32 accumulation on tensor cores. */
static void gemm_bf16_rows(struct jev_backend *be, const uint16_t *w, int64_t rows, int64_t cols, const uint16_t *x,
                           int64_t n, float *y, int64_t ldy) {
    jev_cuda_gemm(be, JEV_CUDA_GEMM_BF16, w, rows, cols, x, n, y, ldy, "cuBLAS bf16 product (matmul, fast)");
}

/* Rows of w per dequantized chunk of elem-byte values in the scratch (0: no scratch: not mirrored here). */
static int64_t chunk_rows(const struct jev_backend *be, const struct jev_matrix *w, size_t elem) {
    int64_t c = jev_cuda_chunk_rows(be->dq_bytes, elem, w->rows, w->cols);
    /* a whole number of 16-byte output vectors, so that every chunk's y + r0 keeps the alignment the
     * pinned algorithm was chosen for (cuda-gemm.c); a matrix that fits in one chunk is unchanged */
    return c < w->rows && c >= 8 ? c & ~(int64_t)7 : c;
}

/* The few-token product that reads rows in place (below, with matmul_rows's). */
static void rows_dot(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int32_t n_rows,
                     const float *x, int64_t n, float *y, const char *where);

/* The fast product: x rounded to bf16 once, then per chunk of weight rows one bf16 GEMM. */
static void matmul_fast(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y) {
    const int64_t rows = w->rows, cols = w->cols;
    size_t xb = (size_t)n * (size_t)cols * sizeof(uint16_t);
    if (xb > be->xh_bytes) { /* grown (synchronizing) only past the largest product so far */
        cudaStreamSynchronize(be->stream);
        jev_cuda_free(be, be->xh);
        size_t want = xb + xb / 4;
        be->xh = (uint16_t *)jev_cuda_malloc(be, want);
        be->xh_bytes = be->xh ? want : 0;
        if (!be->xh) {
            jev_cuda_check(be, cudaErrorMemoryAllocation, "matmul (fast): the bf16 activations");
            return;
        }
    }
    jev_cuda_to_bf16(be, x, n * cols, be->xh);
    if (w->type == JEV_MTYPE_BF16) {
        gemm_bf16_rows(be, (const uint16_t *)w->data, rows, cols, be->xh, n, y, rows);
        return;
    }
    int64_t chunk = chunk_rows(be, w, sizeof(uint16_t));
    if (chunk <= 0) {
        jev_cuda_check(be, cudaErrorInvalidValue, "matmul (fast): no dequantization scratch (matrix not mirrored)");
        return;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
        jev_cuda_dequant_rows(be, w, r0, nr, be->dq, true);
        gemm_bf16_rows(be, (const uint16_t *)be->dq, nr, cols, be->xh, n, y + r0, rows);
    }
}

void jev_cuda_matmul(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y) {
    jev_cuda_bind(be);
    if (n <= 0 || w->rows <= 0)
        return;
    if (n <= ROWS_DIRECT_MAX_N && w->type != JEV_MTYPE_F32) { /* decode: the stored bytes, once */
        rows_dot(be, w, NULL, w->rows, x, n, y, "matmul (few tokens, in place)");
        return;
    }
    if (be->precision == JEV_PRECISION_FAST) {
        matmul_fast(be, w, x, n, y);
        return;
    }
    /* JEV_CUDA_EXACT_GEMM: split pieces, outside the batcher's batch-invariant forwards (be->pin): their
     * invariance is not established (on the H100, 6 of 350 outputs of 5 tokens differed by an ulp between
     * alone and among 65 in test-cuda-matmul's company test), so pinned products stay f32 */
    if (be->exact_gemm != JEV_CUDA_EXACT_F32 && !be->pin && n > ROWS_DIRECT_MAX_N) {
        jev_cuda_matmul_split(be, w, x, n, y);
        return;
    }
    if (w->type == JEV_MTYPE_F32) {
        sgemm_rows(be, (const float *)w->data, w->rows, w->cols, x, n, y, w->rows, "cuBLAS f32 product (matmul)");
        return;
    }
    int64_t chunk = chunk_rows(be, w, sizeof(float));
    if (chunk <= 0) {
        jev_cuda_check(be, cudaErrorInvalidValue, "matmul: no dequantization scratch (matrix not mirrored)");
        return;
    }
    /* the queued order makes the reuse of dq safe: a chunk's dequantization runs after the previous sgemm */
    for (int64_t r0 = 0; r0 < w->rows; r0 += chunk) {
        int64_t nr = w->rows - r0 < chunk ? w->rows - r0 : chunk;
        jev_cuda_dequant_rows(be, w, r0, nr, be->dq, false);
        sgemm_rows(be, (const float *)be->dq, nr, w->cols, x, n, y + r0, w->rows, "cuBLAS f32 product (matmul)");
    }
}

/* ---- rows read in place; matmul_rows ---- */

/*
 * Few tokens: one warp per output row j computes y[t][j] = W[r] . x[t] for every t < n
 * (n <= ROWS_DIRECT_MAX_N), r = ids[j] (the LM head's candidate rows) or j (ids NULL: a whole
 * matrix), then a shuffle reduction. WORDS: an affine matrix whose codes fill whole u32 words and
 * whose groups hold whole words (4- and 8-bit with the usual groups): each lane takes one word at a
 * time, so a warp reads 128 consecutive bytes of codes and one scale and bias per word. HALVES: a
 * bf16 / f16 matrix whose rows are whole 16-byte vectors: each lane takes 8 values a load, a warp 512
 * bytes (one value a lane read 64 bytes a warp, a quarter of the bandwidth: decode on a bf16
 * checkpoint ran at 147 GB/s). Otherwise lanes stride single columns through jev_cuda_wget. The values are the CPU's (s
 * * q + b, each rounded once); only the order of the dot product's sums is the kernel's own.
 */
enum rows_form { ROWS_ANY, ROWS_WORDS, ROWS_HALVES };

template <enum rows_form FORM>
static __global__ void rows_dot_kernel(struct jev_matrix w, const int32_t *__restrict__ ids, int32_t n_rows,
                                       const float *__restrict__ x, int32_t n, float *__restrict__ y) {
    int64_t j = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (j >= n_rows)
        return;
    const int64_t cols = w.cols, r = ids ? ids[j] : j;
    float acc[ROWS_DIRECT_MAX_N] = {0.0f};
    if (FORM == ROWS_WORDS) {
        const int bits = w.bits, per = 32 / bits;
        const uint32_t mask = (1u << bits) - 1u;
        const int64_t words = cols / per, groups = cols / w.group;
        const uint32_t *row = (const uint32_t *)w.data + r * words;
        for (int64_t wi = lane; wi < words; wi += 32) {
            const uint32_t v = row[wi];
            const int64_t c0 = wi * per, g = r * groups + c0 / w.group;
            const float sc = jev_cuda_wscale(w.stype, w.scales, g), bi = jev_cuda_wscale(w.stype, w.biases, g);
            for (int k = 0; k < per; k++) {
                const float wv = JEV_CUDA_ADD_RN(JEV_CUDA_MUL_RN(sc, (float)((v >> (k * bits)) & mask)), bi);
#pragma unroll
                for (int t = 0; t < ROWS_DIRECT_MAX_N; t++)
                    if (t < n)
                        acc[t] += wv * x[t * cols + c0 + k];
            }
        }
    } else if (FORM == ROWS_HALVES) {
        const bool bf16 = w.type == JEV_MTYPE_BF16;
        const uint4 *row = (const uint4 *)((const uint16_t *)w.data + r * cols);
        for (int64_t vi = lane; vi < cols / 8; vi += 32) {
            const uint4 v = row[vi];
            const uint32_t pair[4] = {v.x, v.y, v.z, v.w};
            const int64_t c0 = vi * 8;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const uint16_t h = (uint16_t)(pair[k / 2] >> (16 * (k % 2)));
                const float wv = bf16 ? jev_bf16_to_f32(h) : jev_f16_to_f32(h);
#pragma unroll
                for (int t = 0; t < ROWS_DIRECT_MAX_N; t++)
                    if (t < n)
                        acc[t] += wv * x[t * cols + c0 + k];
            }
        }
    } else {
        for (int64_t c = lane; c < cols; c += 32) {
            float wv = jev_cuda_wget(&w, r, c);
#pragma unroll
            for (int t = 0; t < ROWS_DIRECT_MAX_N; t++)
                if (t < n)
                    acc[t] += wv * x[t * cols + c];
        }
    }
#pragma unroll
    for (int t = 0; t < ROWS_DIRECT_MAX_N; t++) {
        float a = acc[t];
        for (int off = 16; off > 0; off >>= 1)
            a += __shfl_xor_sync(0xffffffffu, a, off);
        if (t < n && lane == 0)
            y[t * (int64_t)n_rows + j] = a;
    }
}

/* Whether an affine matrix's codes fill whole words and its groups hold whole words (rows_dot_kernel's
 * WORDS form). */
static bool words_form(const struct jev_matrix *w) {
    if (w->type != JEV_MTYPE_QAFFINE || w->bits <= 0 || 32 % w->bits != 0)
        return false;
    const int per = 32 / w->bits;
    return w->group % per == 0 && w->cols % per == 0;
}

/* Whether a bf16 / f16 matrix's rows are whole 16-byte vectors from an aligned start (HALVES form). */
static bool halves_form(const struct jev_matrix *w) {
    return (w->type == JEV_MTYPE_BF16 || w->type == JEV_MTYPE_F16) && w->cols % 8 == 0 && (uintptr_t)w->data % 16 == 0;
}

/* y[t][j] for t < n <= ROWS_DIRECT_MAX_N, j < n_rows: rows ids[j] of w (ids device memory, or NULL for
 * rows 0 .. n_rows - 1) dotted with x[t], in place. */
static void rows_dot(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int32_t n_rows,
                     const float *x, int64_t n, float *y, const char *where) {
    int64_t threads = (int64_t)n_rows * 32;
    unsigned blocks = (unsigned)((threads + 255) / 256);
    if (words_form(w))
        rows_dot_kernel<ROWS_WORDS><<<blocks, 256, 0, be->stream>>>(*w, ids, n_rows, x, (int32_t)n, y);
    else if (halves_form(w))
        rows_dot_kernel<ROWS_HALVES><<<blocks, 256, 0, be->stream>>>(*w, ids, n_rows, x, (int32_t)n, y);
    else
        rows_dot_kernel<ROWS_ANY><<<blocks, 256, 0, be->stream>>>(*w, ids, n_rows, x, (int32_t)n, y);
    jev_cuda_check(be, cudaGetLastError(), where);
}

/* dst[q][:] = w[ids[q]][:] dequantized to f32, for q < nr: one block per gathered row. */
static __global__ void gather_rows_kernel(struct jev_matrix w, const int32_t *__restrict__ ids,
                                          float *__restrict__ dst) {
    const int64_t r = ids[blockIdx.x], cols = w.cols;
    float *out = dst + (int64_t)blockIdx.x * cols;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        out[c] = jev_cuda_wget(&w, r, c);
}

void jev_cuda_matmul_rows(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids, int32_t n_rows,
                          const float *x, int64_t n, float *y) {
    jev_cuda_bind(be);
    if (n <= 0 || n_rows <= 0)
        return;
    int64_t cols = w->cols;
    jev_cuda_stage_reset(be);
    const int32_t *ids = (const int32_t *)jev_cuda_stage(be, row_ids, (size_t)n_rows * sizeof(int32_t));
    if (n <= ROWS_DIRECT_MAX_N) {
        rows_dot(be, w, ids, n_rows, x, n, y, "matmul_rows (direct)");
        return;
    }
    int64_t chunk = (int64_t)(GATHER_BYTES / sizeof(float)) / (cols > 0 ? cols : 1);
    if (chunk < 1)
        chunk = 1;
    if (chunk > n_rows)
        chunk = n_rows;
    float *buf = jev_cuda_work(be, (size_t)chunk * (size_t)cols * sizeof(float));
    if (!buf) /* jev_cuda_work recorded the failure; writing through NULL would kill the context */
        return;
    for (int64_t r0 = 0; r0 < n_rows; r0 += chunk) {
        int64_t nr = n_rows - r0 < chunk ? n_rows - r0 : chunk;
        gather_rows_kernel<<<(unsigned)nr, 256, 0, be->stream>>>(*w, ids + r0, buf);
        jev_cuda_check(be, cudaGetLastError(), "matmul_rows (gather)");
        jev_cuda_gemm(be, JEV_CUDA_GEMM_ROWS, buf, nr, cols, x, n, y + r0, n_rows, "cuBLAS f32 product (matmul_rows)");
    }
}
