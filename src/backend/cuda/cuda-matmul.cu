/*
 * cuda-matmul.cu - the CUDA matrix products and the dequantizing upload of weights.
 *
 * - jev_cuda_matmul: y[n][rows] = x[n][cols] . W^T over a mirrored (device f32) matrix with
 *   cuBLAS sgemm (sgemv for one token). The handle is bound to the backend's stream with the
 *   default math mode (no TF32), so the products are plain f32 FMAs; only the order of the sums
 *   differs from the CPU (tests/cuda/test-cuda-matmul.c: NMSE <= 1e-7).
 * - jev_cuda_matmul_rows: the LM head over candidate rows. Few tokens: one warp per candidate
 *   row reads the row where it is and dots it with every token (the weights stream once, no
 *   copy). More tokens: the rows are gathered into the backend's scratch in chunks of at most
 *   GATHER_BYTES (the whole vocabulary would be 1 GiB) and each chunk is one sgemm.
 * - jev_cuda_dequantize_upload: any host matrix (f32, bf16, f16, MLX affine of 2..8 bits with
 *   f32/bf16/f16 scales) to device f32 rows. The raw bytes go up in row chunks into a temporary
 *   buffer and a kernel widens them with the formula of model/weights.c: bf16/f16 widened with
 *   the bit operations of base/half.h, affine W = scale * q + bias as a rounded multiply then a
 *   rounded add (__fmul_rn / __fadd_rn: nvcc would otherwise contract them into one FMA, and
 *   the CPU rounds twice), so every value is bit-identical to the CPU's dequantized rows.
 *
 * Row-major through column-major cuBLAS: a row-major [a][b] array is the column-major b x a
 * matrix (its transpose) with leading dimension b. So W (row-major [rows][cols]) is W^T
 * (cols x rows, ld cols), X ([n][cols]) is X^T (cols x n, ld cols) and Y ([n][rows]) is Y^T
 * (rows x n, ld rows). Y = X W^T  <=>  Y^T = W X^T = op_T(W^T) . X^T, hence
 *   cublasSgemm(OP_T, OP_N, m = rows, n = n, k = cols, A = W, lda = cols, B = X, ldb = cols,
 *               C = Y, ldc = rows)
 * and for one token y = W x = op_T(W^T) . x: cublasSgemv(OP_T, m = cols, n = rows, A = W, lda = cols).
 * A block of output columns [r0, r0 + nr) of Y is C = Y + r0 with ldc still the full row length.
 */
extern "C" {
#include "base/error.h" // defines: jev_fail, JEV_ASSERT
}
#include "backend/cuda/cuda-int.h" // defines: struct jev_backend, jev_cuda_stage, jev_cuda_work
#include "base/half.h"             // defines: jev_bf16_to_f32, jev_f16_to_f32 (host and device)

#include <stdint.h>

#define GATHER_BYTES ((size_t)64 << 20)   /* matmul_rows: gathered rows per sgemm chunk */
#define ROWS_DIRECT_MAX_N 4               /* matmul_rows: tokens up to which rows are read in place */
#define UPLOAD_CHUNK_BYTES ((size_t)256 << 20) /* dequantize_upload: raw bytes per chunk (about) */

/* ---- cuBLAS ---- */

/* cuBLAS statuses are recorded like CUDA errors: cudaErrorUnknown with the call in the where-string. */
static void blas_check(struct jev_backend *be, cublasStatus_t st, const char *where) {
    if (st != CUBLAS_STATUS_SUCCESS)
        jev_cuda_check(be, cudaErrorUnknown, where);
}

/* Y[n][ldy] (columns [0, rows) written) = X[n][cols] . W^T, W device f32 row-major [rows][cols]. */
static void sgemm_rows(struct jev_backend *be, const float *w, int64_t rows, int64_t cols, const float *x, int64_t n,
                       float *y, int64_t ldy, const char *where) {
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st;
    if (n == 1 && ldy == rows)
        st = cublasSgemv(be->blas, CUBLAS_OP_T, (int)cols, (int)rows, &one, w, (int)cols, x, 1, &zero, y, 1);
    else
        st = cublasSgemm(be->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)n, (int)cols, &one, w, (int)cols, x,
                         (int)cols, &zero, y, (int)ldy);
    blas_check(be, st, where);
}

void jev_cuda_matmul(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y) {
    if (n <= 0 || w->rows <= 0)
        return;
    JEV_ASSERT(w->type == JEV_MTYPE_F32);
    sgemm_rows(be, (const float *)w->data, w->rows, w->cols, x, n, y, w->rows, "cublasSgemm (matmul)");
}

/* ---- matmul_rows ---- */

/*
 * Few tokens: one warp per candidate row j computes y[t][j] = W[ids[j]] . x[t] for every t < n
 * (n <= ROWS_DIRECT_MAX_N), lanes striding the columns, then a shuffle reduction.
 */
static __global__ void rows_direct_kernel(const float *__restrict__ w, int64_t cols,
                                          const int32_t *__restrict__ ids, int32_t n_rows,
                                          const float *__restrict__ x, int32_t n, float *__restrict__ y) {
    int64_t j = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (j >= n_rows)
        return;
    const float *row = w + (int64_t)ids[j] * cols;
    float acc[ROWS_DIRECT_MAX_N] = {0.0f};
    for (int64_t c = lane; c < cols; c += 32) {
        float wv = row[c];
#pragma unroll
        for (int t = 0; t < ROWS_DIRECT_MAX_N; t++)
            if (t < n)
                acc[t] += wv * x[t * cols + c];
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

/* dst[q][:] = w[ids[q]][:] for q < nr: one block per gathered row. */
static __global__ void gather_rows_kernel(const float *__restrict__ w, int64_t cols,
                                          const int32_t *__restrict__ ids, float *__restrict__ dst) {
    const float *src = w + (int64_t)ids[blockIdx.x] * cols;
    float *out = dst + (int64_t)blockIdx.x * cols;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        out[c] = src[c];
}

void jev_cuda_matmul_rows(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids, int32_t n_rows,
                          const float *x, int64_t n, float *y) {
    if (n <= 0 || n_rows <= 0)
        return;
    JEV_ASSERT(w->type == JEV_MTYPE_F32);
    const float *wd = (const float *)w->data;
    int64_t cols = w->cols;
    jev_cuda_stage_reset(be);
    const int32_t *ids = (const int32_t *)jev_cuda_stage(be, row_ids, (size_t)n_rows * sizeof(int32_t));
    if (n <= ROWS_DIRECT_MAX_N) {
        int64_t threads = (int64_t)n_rows * 32;
        unsigned blocks = (unsigned)((threads + 255) / 256);
        rows_direct_kernel<<<blocks, 256, 0, be->stream>>>(wd, cols, ids, n_rows, x, (int32_t)n, y);
        jev_cuda_check(be, cudaGetLastError(), "matmul_rows (direct)");
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
        gather_rows_kernel<<<(unsigned)nr, 256, 0, be->stream>>>(wd, cols, ids + r0, buf);
        jev_cuda_check(be, cudaGetLastError(), "matmul_rows (gather)");
        sgemm_rows(be, buf, nr, cols, x, n, y + r0, n_rows, "cublasSgemm (matmul_rows)");
    }
}

/* ---- dequantizing upload ---- */

__device__ static inline float load_s(int stype, const void *p, int64_t i) {
    switch (stype) {
    case JEV_STYPE_F32: return ((const float *)p)[i];
    case JEV_STYPE_BF16: return jev_bf16_to_f32(((const uint16_t *)p)[i]);
    case JEV_STYPE_F16: return jev_f16_to_f32(((const uint16_t *)p)[i]);
    }
    return 0.0f;
}

/* bf16 / f16 rows: one element per thread-iteration, rows*cols may exceed 2^31. */
static __global__ void widen16_kernel(const uint16_t *__restrict__ src, int64_t count, int is_bf16,
                                      float *__restrict__ dst) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
        dst[i] = is_bf16 ? jev_bf16_to_f32(src[i]) : jev_f16_to_f32(src[i]);
}

/*
 * Affine rows, one block per row: element k of the row's little-endian bit stream of `bits`-bit
 * codes (model/weights.c's qcode: a code may straddle two u32 words), then scale * q + bias with
 * two roundings, as the CPU.
 */
static __global__ void dequant_affine_kernel(const uint32_t *__restrict__ codes, const void *__restrict__ scales,
                                             const void *__restrict__ biases, int stype, int32_t cols, int32_t bits,
                                             int32_t group, float *__restrict__ dst) {
    int64_t r = blockIdx.x;
    int64_t words = (int64_t)cols * bits / 32, groups = cols / group;
    const uint32_t *row = codes + r * words;
    float *out = dst + r * cols;
    uint32_t mask = (1u << bits) - 1u;
    for (int32_t k = threadIdx.x; k < cols; k += blockDim.x) {
        int64_t bit = (int64_t)k * bits;
        int64_t wi = bit >> 5;
        int off = (int)(bit & 31);
        uint64_t v = row[wi];
        if (off + bits > 32)
            v |= (uint64_t)row[wi + 1] << 32;
        uint32_t q = (uint32_t)(v >> off) & mask;
        float s = load_s(stype, scales, r * groups + k / group);
        float b = load_s(stype, biases, r * groups + k / group);
        out[k] = __fadd_rn(__fmul_rn(s, (float)q), b);
    }
}

/* Bytes per row of each part of a host matrix (codes or elements, scales, biases); 0 when unsupported. */
static size_t row_bytes(const struct jev_matrix *m, size_t *sb) {
    *sb = 0;
    switch (m->type) {
    case JEV_MTYPE_F32: return (size_t)m->cols * 4;
    case JEV_MTYPE_BF16:
    case JEV_MTYPE_F16: return (size_t)m->cols * 2;
    case JEV_MTYPE_QAFFINE: {
        bool bits_ok = m->bits == 2 || m->bits == 3 || m->bits == 4 || m->bits == 5 || m->bits == 6 || m->bits == 8;
        bool stype_ok = m->stype == JEV_STYPE_F32 || m->stype == JEV_STYPE_BF16 || m->stype == JEV_STYPE_F16;
        if (!bits_ok || !stype_ok || m->group <= 0 || m->cols % m->group != 0 || ((int64_t)m->cols * m->bits) % 32)
            return 0;
        *sb = (size_t)(m->cols / m->group) * (m->stype == JEV_STYPE_F32 ? 4 : 2);
        return (size_t)m->cols * (size_t)m->bits / 8;
    }
    }
    return 0;
}

/* Records a CUDA failure of the upload in err (JEV_ERR_CUDA, naming the matrix). */
static enum jev_status upload_fail(struct jev_error *err, const struct jev_matrix *m, cudaError_t e, const char *what) {
    return jev_fail(err, JEV_ERR_CUDA, "%s: %s: %s", m->name ? m->name : "matrix", what, cudaGetErrorString(e));
}

enum jev_status jev_cuda_dequantize_upload(struct jev_backend *be, const struct jev_matrix *host, float *dst,
                                           struct jev_error *err) {
    const char *name = host->name ? host->name : "matrix";
    size_t sb = 0, rb = host->cols > 0 ? row_bytes(host, &sb) : 1;
    if (rb == 0)
        return jev_fail(err, JEV_ERR_UNSUPPORTED,
                        "%s: matrix type %d (bits %d, group %d, scale type %d) has no CUDA upload", name,
                        (int)host->type, host->bits, host->group, (int)host->stype);
    int64_t rows = host->rows, cols = host->cols;
    if (rows <= 0 || cols <= 0)
        return JEV_OK;
    cudaError_t e;
    if (host->type == JEV_MTYPE_F32) { /* already the device type: one copy */
        e = cudaMemcpyAsync(dst, host->data, (size_t)rows * rb, cudaMemcpyHostToDevice, be->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(be->stream);
        return e == cudaSuccess ? JEV_OK : upload_fail(err, host, e, "upload");
    }
    /* row chunks of about UPLOAD_CHUNK_BYTES raw bytes through one temporary buffer */
    int64_t chunk = (int64_t)(UPLOAD_CHUNK_BYTES / (rb + 2 * sb));
    if (chunk < 1)
        chunk = 1;
    if (chunk > rows)
        chunk = rows;
    char *tmp = NULL;
    e = cudaMalloc(&tmp, (size_t)chunk * (rb + 2 * sb));
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* the failed allocation is not sticky: clear it */
        return jev_fail(err, JEV_ERR_NOMEM, "%s: no device memory for the %lld-byte upload buffer", name,
                        (long long)((size_t)chunk * (rb + 2 * sb)));
    }
    char *t_codes = tmp, *t_scales = tmp + (size_t)chunk * rb, *t_biases = t_scales + (size_t)chunk * sb;
    for (int64_t r0 = 0; r0 < rows && e == cudaSuccess; r0 += chunk) {
        int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
        float *out = dst + r0 * cols;
        /* the copies of a chunk are queued after the previous chunk's kernel, so tmp is free again */
        e = cudaMemcpyAsync(t_codes, (const char *)host->data + (size_t)r0 * rb, (size_t)nr * rb,
                            cudaMemcpyHostToDevice, be->stream);
        if (host->type == JEV_MTYPE_QAFFINE) {
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(t_scales, (const char *)host->scales + (size_t)r0 * sb, (size_t)nr * sb,
                                    cudaMemcpyHostToDevice, be->stream);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(t_biases, (const char *)host->biases + (size_t)r0 * sb, (size_t)nr * sb,
                                    cudaMemcpyHostToDevice, be->stream);
            if (e != cudaSuccess)
                break;
            dequant_affine_kernel<<<(unsigned)nr, 256, 0, be->stream>>>((const uint32_t *)t_codes, t_scales, t_biases,
                                                                        (int)host->stype, host->cols, host->bits,
                                                                        host->group, out);
        } else {
            if (e != cudaSuccess)
                break;
            int64_t count = nr * cols;
            int64_t blocks = (count + 255) / 256;
            if (blocks > (int64_t)be->n_sm * 64 && be->n_sm > 0)
                blocks = (int64_t)be->n_sm * 64;
            widen16_kernel<<<(unsigned)blocks, 256, 0, be->stream>>>((const uint16_t *)t_codes, count,
                                                                     host->type == JEV_MTYPE_BF16, out);
        }
        e = cudaGetLastError();
    }
    cudaError_t se = cudaStreamSynchronize(be->stream);
    if (e == cudaSuccess)
        e = se;
    cudaError_t fe = cudaFree(tmp);
    if (e == cudaSuccess)
        e = fe;
    return e == cudaSuccess ? JEV_OK : upload_fail(err, host, e, "dequantizing upload");
}
