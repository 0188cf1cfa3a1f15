/*
 * cuda-weights.cu - weight matrices on the device in their stored form, and their dequantization.
 *
 * - jev_cuda_matrix_upload (the mirror, ops->matrix_mirror): the host matrix's bytes as they are in
 *   the file (f32, bf16, f16 rows, or MLX affine codes with scales and biases), in one allocation,
 *   so the 0.8B model's 4-bit weights take their file's 0.5 GB on the device instead of 3.4 GB of
 *   f32 rows. It also grows the backend's dequantization scratch (dq) to the matrix's f32 size,
 *   at most JEV_CUDA_DQ_CAP: sized while the engine is made, never in the token loop.
 * - jev_cuda_dequant_rows: rows [r0, r0 + nr) into f32 rows (exact mode: the values of
 *   backend/matrix.c bit for bit, cuda-weights-int.h) or those values rounded to bf16 (fast mode,
 *   base/half.h's rounding), for matmul's cuBLAS call right after. A thread a u32 word of 2-, 4- or
 *   8-bit codes, or 8 bf16 / f16 values; one a value otherwise (3-, 5-, 6-bit codes, odd shapes).
 * - jev_cuda_to_bf16: fast mode's activations rounded to bf16, as the CPU reference rounds them.
 * - jev_cuda_dequant_split, jev_cuda_split_rows: the pieces of exact mode's split products
 *   (cuda-split-int.h): a weight chunk dequantized as above and split in the same pass (the f32
 *   values are at hand there), the activations split from their f32 rows.
 *
 * Kernel -> launcher -> entry: the kernels are file-static; the launchers are the entries
 * (cuda-int.h) that cuda.c (the mirror) and cuda-matmul.cu (the products) call.
 */
extern "C" {
#include "base/error.h" // defines: jev_fail
}
#include "backend/cuda/cuda-int.h"         // defines: struct jev_backend, jev_cuda_malloc, jev_cuda_check
#include "backend/cuda/cuda-split-int.h"   // defines: jev_split_bf16x3, jev_split_tf32x2, enum jev_cuda_split
#include "backend/cuda/cuda-weights-int.h" // defines: jev_cuda_wget
#include "base/half.h"                     // defines: jev_f32_to_bf16 (host and device)

#include <stdint.h>
#include <string.h>

#define DQ_THREADS 256

/* Blocks for a grid-stride loop over count items, capped at 64 per multiprocessor. */
static unsigned dq_blocks(const struct jev_backend *be, int64_t count) {
    int64_t want = (count + DQ_THREADS - 1) / DQ_THREADS;
    int64_t cap = (int64_t)(be->n_sm > 0 ? be->n_sm : 1) * 64;
    return (unsigned)(want < cap ? want : cap);
}

/* ---- kernels ---- */

/* What a dequantization writes: f32 rows (exact mode), bf16 rows (fast mode), or the pieces of exact
 * mode's split products (cuda-split-int.h: [rows][P * cols], largest first). */
enum dq_form { DQ_F32, DQ_BF16, DQ_BF16X3, DQ_TF32X2 };

/* Stores value v of row r, column c of a [rows][cols] chunk in form FORM, one element. */
template <int FORM> static __device__ void store_one(void *out, int64_t r, int64_t c, int64_t cols, float v) {
    if (FORM == DQ_F32) {
        ((float *)out)[r * cols + c] = v;
    } else if (FORM == DQ_BF16) {
        ((uint16_t *)out)[r * cols + c] = jev_f32_to_bf16(v);
    } else if (FORM == DQ_BF16X3) {
        uint16_t p[3];
        jev_split_bf16x3(v, p);
        uint16_t *o = (uint16_t *)out + r * 3 * cols + c;
        o[0] = p[0], o[cols] = p[1], o[2 * cols] = p[2];
    } else {
        float p[2];
        jev_split_tf32x2(v, p);
        float *o = (float *)out + r * 2 * cols + c;
        o[0] = p[0], o[cols] = p[1];
    }
}

/* out[i] for i < nr * cols: element (r0 + i / cols, i % cols) of w, in form FORM. */
template <int FORM>
static __global__ void dequant_rows_kernel(struct jev_matrix w, int64_t r0, int64_t count, void *out) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        const int64_t r = i / w.cols, c = i - r * w.cols;
        store_one<FORM>(out, r, c, w.cols, jev_cuda_wget(&w, r0 + r, c));
    }
}

/* Four bf16 values as one 8-byte store at (uint16_t *)out + at (at a multiple of 4). */
static __device__ void store_bf16x4(void *out, int64_t at, uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
    uint2 u;
    u.x = (uint32_t)a | (uint32_t)b << 16;
    u.y = (uint32_t)c | (uint32_t)d << 16;
    *(uint2 *)((uint16_t *)out + at) = u;
}

/* Stores PER values (PER a multiple of 4) of row r from column c on, in form FORM: f32 as 16-byte
 * stores, bf16 (each piece of a split) as 8-byte ones. c and cols are multiples of 4 and out 256-byte
 * aligned, so every store is aligned. */
template <int FORM, int PER>
static __device__ void store_values(void *out, int64_t r, int64_t c, int64_t cols, const float *v) {
#pragma unroll
    for (int k = 0; k < PER; k += 4) {
        if (FORM == DQ_F32) {
            *(float4 *)((float *)out + r * cols + c + k) = make_float4(v[k], v[k + 1], v[k + 2], v[k + 3]);
        } else if (FORM == DQ_BF16) {
            store_bf16x4(out, r * cols + c + k, jev_f32_to_bf16(v[k]), jev_f32_to_bf16(v[k + 1]),
                         jev_f32_to_bf16(v[k + 2]), jev_f32_to_bf16(v[k + 3]));
        } else if (FORM == DQ_BF16X3) {
            uint16_t p[4][3];
#pragma unroll
            for (int j = 0; j < 4; j++)
                jev_split_bf16x3(v[k + j], p[j]);
            const int64_t at = r * 3 * cols + c + k;
#pragma unroll
            for (int q = 0; q < 3; q++)
                store_bf16x4(out, at + q * cols, p[0][q], p[1][q], p[2][q], p[3][q]);
        } else {
            float p[4][2];
#pragma unroll
            for (int j = 0; j < 4; j++)
                jev_split_tf32x2(v[k + j], p[j]);
            float *o = (float *)out + r * 2 * cols + c + k;
            *(float4 *)o = make_float4(p[0][0], p[1][0], p[2][0], p[3][0]);
            *(float4 *)(o + cols) = make_float4(p[0][1], p[1][1], p[2][1], p[3][1]);
        }
    }
}

/* The words form of dequant_rows_kernel for affine codes of BITS = 2, 4 or 8 bits whose group holds whole
 * u32 words: one thread per word (32 / BITS codes of one group: one scale and one bias), its values
 * stored together. The same arithmetic as jev_cuda_wget per element, so the same bits; the per-element
 * kernel spent its time on a 64-bit division, a type switch and two scale loads per value (7 ms of a
 * 532-token prefill, issue 13's run 6). Word i of rows r0.. is element i * (32 / BITS) of the rows. */
template <int FORM, int BITS>
static __global__ void dequant_words_kernel(struct jev_matrix w, int64_t r0, int64_t n_words, void *out) {
    constexpr int PER = 32 / BITS;
    const int64_t row_words = w.cols / PER, groups = w.cols / w.group;
    const uint32_t *codes = (const uint32_t *)w.data + r0 * row_words;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_words; i += stride) {
        const int64_t r = i / row_words, c0 = (i - r * row_words) * PER;
        const uint32_t word = codes[i];
        const int64_t g = (r0 + r) * groups + c0 / w.group;
        const float s = jev_cuda_wscale(w.stype, w.scales, g), b = jev_cuda_wscale(w.stype, w.biases, g);
        float v[PER];
#pragma unroll
        for (int k = 0; k < PER; k++)
            v[k] = JEV_CUDA_ADD_RN(JEV_CUDA_MUL_RN(s, (float)((word >> (k * BITS)) & ((1u << BITS) - 1u))), b);
        store_values<FORM, PER>(out, r, c0, w.cols, v);
    }
}

/* bf16 or f16 rows (cols a multiple of 8), 8 values a thread: one 16-byte load, widened as base/half.h
 * widens (bit operations), stored together. Element i * 8 of rows r0.. starts group i. */
template <int FORM, bool SRC_BF16>
static __global__ void dequant_halves_kernel(const uint16_t *__restrict__ data, int64_t n8, int64_t cols, void *out) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += stride) {
        const uint4 u = ((const uint4 *)data)[i];
        const uint32_t words[4] = {u.x, u.y, u.z, u.w};
        float v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint16_t h = (uint16_t)(words[k / 2] >> (16 * (k % 2)));
            v[k] = SRC_BF16 ? jev_bf16_to_f32(h) : jev_f16_to_f32(h);
        }
        /* the row and column matter to the split forms' pieces only: the plain forms store at i * 8 */
        const int64_t r = FORM == DQ_F32 || FORM == DQ_BF16 ? 0 : i * 8 / cols;
        store_values<FORM, 8>(out, r, i * 8 - r * cols, cols, v);
    }
}

static __global__ void to_bf16_kernel(const float *__restrict__ x, int64_t count, uint16_t *__restrict__ out) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
        out[i] = jev_f32_to_bf16(x[i]);
}

/* Element i of x ([n][cols] f32) split in form FORM (DQ_BF16X3 or DQ_TF32X2) into its row of out, the
 * pieces largest first or (SMALL_FIRST, the activations) smallest first. */
template <int FORM, bool SMALL_FIRST>
static __global__ void split_rows_kernel(const float *__restrict__ x, int64_t count, int64_t cols, void *out) {
    constexpr int P = FORM == DQ_BF16X3 ? 3 : 2;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        const int64_t r = i / cols, c = i - r * cols, at = r * P * cols + c;
        if (FORM == DQ_BF16X3) {
            uint16_t p[3];
            jev_split_bf16x3(x[i], p);
#pragma unroll
            for (int q = 0; q < 3; q++)
                ((uint16_t *)out)[at + (SMALL_FIRST ? 2 - q : q) * cols] = p[q];
        } else {
            float p[2];
            jev_split_tf32x2(x[i], p);
#pragma unroll
            for (int q = 0; q < 2; q++)
                ((float *)out)[at + (SMALL_FIRST ? 1 - q : q) * cols] = p[q];
        }
    }
}

/* ---- launchers ---- */

/* Rows [r0, r0 + nr) of w in form FORM into out (the three kernels' choice: jev_cuda_dequant_rows). */
template <int FORM>
static void dequant_launch(struct jev_backend *be, const struct jev_matrix *w, int64_t r0, int64_t nr, void *out) {
    const int64_t count = nr * (int64_t)w->cols;
    if (count <= 0)
        return;
    cudaStream_t st = be->stream;
    const int bits = w->bits;
    if (w->type == JEV_MTYPE_QAFFINE && (bits == 2 || bits == 4 || bits == 8) && w->group % (32 / bits) == 0) {
        const int64_t n = count / (32 / bits);
        const unsigned nb = dq_blocks(be, n);
        if (bits == 2)
            dequant_words_kernel<FORM, 2><<<nb, DQ_THREADS, 0, st>>>(*w, r0, n, out);
        else if (bits == 4)
            dequant_words_kernel<FORM, 4><<<nb, DQ_THREADS, 0, st>>>(*w, r0, n, out);
        else
            dequant_words_kernel<FORM, 8><<<nb, DQ_THREADS, 0, st>>>(*w, r0, n, out);
    } else if ((w->type == JEV_MTYPE_BF16 || w->type == JEV_MTYPE_F16) && w->cols % 8 == 0) {
        const uint16_t *src = (const uint16_t *)w->data + r0 * (int64_t)w->cols;
        const int64_t n = count / 8;
        const unsigned nb = dq_blocks(be, n);
        if (w->type == JEV_MTYPE_BF16)
            dequant_halves_kernel<FORM, true><<<nb, DQ_THREADS, 0, st>>>(src, n, w->cols, out);
        else
            dequant_halves_kernel<FORM, false><<<nb, DQ_THREADS, 0, st>>>(src, n, w->cols, out);
    } else {
        dequant_rows_kernel<FORM><<<dq_blocks(be, count), DQ_THREADS, 0, st>>>(*w, r0, count, out);
    }
    jev_cuda_check(be, cudaGetLastError(), "dequantize rows");
}

void jev_cuda_dequant_rows(struct jev_backend *be, const struct jev_matrix *w, int64_t r0, int64_t nr, void *out,
                           bool as_bf16) {
    if (as_bf16)
        dequant_launch<DQ_BF16>(be, w, r0, nr, out);
    else
        dequant_launch<DQ_F32>(be, w, r0, nr, out);
}

void jev_cuda_dequant_split(struct jev_backend *be, const struct jev_matrix *w, int64_t r0, int64_t nr, void *out,
                            enum jev_cuda_split split) {
    if (split == JEV_CUDA_SPLIT_BF16X3)
        dequant_launch<DQ_BF16X3>(be, w, r0, nr, out);
    else
        dequant_launch<DQ_TF32X2>(be, w, r0, nr, out);
}

void jev_cuda_split_rows(struct jev_backend *be, const float *x, int64_t n, int64_t cols, void *out,
                         enum jev_cuda_split split, bool smallest_first) {
    const int64_t count = n * cols;
    if (count <= 0)
        return;
    const unsigned nb = dq_blocks(be, count);
    cudaStream_t st = be->stream;
    if (split == JEV_CUDA_SPLIT_BF16X3)
        smallest_first ? split_rows_kernel<DQ_BF16X3, true><<<nb, DQ_THREADS, 0, st>>>(x, count, cols, out)
                       : split_rows_kernel<DQ_BF16X3, false><<<nb, DQ_THREADS, 0, st>>>(x, count, cols, out);
    else
        smallest_first ? split_rows_kernel<DQ_TF32X2, true><<<nb, DQ_THREADS, 0, st>>>(x, count, cols, out)
                       : split_rows_kernel<DQ_TF32X2, false><<<nb, DQ_THREADS, 0, st>>>(x, count, cols, out);
    jev_cuda_check(be, cudaGetLastError(), "split rows (exact mode's split product)");
}

size_t jev_cuda_dq_bytes(const struct jev_backend *be) { return be->dq_bytes; }

void jev_cuda_to_bf16(struct jev_backend *be, const float *x, int64_t count, uint16_t *out) {
    if (count <= 0)
        return;
    to_bf16_kernel<<<dq_blocks(be, count), DQ_THREADS, 0, be->stream>>>(x, count, out);
    jev_cuda_check(be, cudaGetLastError(), "activations to bf16");
}

/* ---- the stored form ---- */

/* Bytes of each part of a matrix (data; scales and biases each); false when this build has no
 * kernel for it (an affine width other than 2..6 and 8, a group that does not divide the row, a
 * row that is not whole u32 words, an unknown scale type). */
static bool part_bytes(const struct jev_matrix *m, size_t *data, size_t *sb) {
    const size_t n = (size_t)m->rows * (size_t)m->cols;
    *sb = 0;
    switch (m->type) {
    case JEV_MTYPE_F32: *data = n * 4; return true;
    case JEV_MTYPE_BF16:
    case JEV_MTYPE_F16: *data = n * 2; return true;
    case JEV_MTYPE_QAFFINE: {
        bool bits_ok = m->bits == 2 || m->bits == 3 || m->bits == 4 || m->bits == 5 || m->bits == 6 || m->bits == 8;
        bool stype_ok = m->stype == JEV_STYPE_F32 || m->stype == JEV_STYPE_BF16 || m->stype == JEV_STYPE_F16;
        if (!bits_ok || !stype_ok || m->group <= 0 || m->cols % m->group != 0 || ((int64_t)m->cols * m->bits) % 32)
            return false;
        *data = n * (size_t)m->bits / 8;
        *sb = (size_t)m->rows * (size_t)(m->cols / m->group) * (m->stype == JEV_STYPE_F32 ? 4 : 2);
        return true;
    }
    }
    return false;
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* Grows the scratch to bytes (at init: the mirror calls it). Queued ops may still read the old one. */
static enum jev_status dq_reserve(struct jev_backend *be, size_t bytes, const char *name, struct jev_error *err) {
    if (bytes > JEV_CUDA_DQ_CAP)
        bytes = JEV_CUDA_DQ_CAP;
    if (bytes <= be->dq_bytes)
        return JEV_OK;
    cudaStreamSynchronize(be->stream);
    jev_cuda_free(be, be->dq);
    be->dq = jev_cuda_malloc(be, bytes);
    be->dq_bytes = be->dq ? bytes : 0;
    if (!be->dq)
        return jev_fail(err, JEV_ERR_NOMEM, "cuda: device %d: no room for the %zu-byte dequantization scratch (%s)",
                        be->device, bytes, name);
    return JEV_OK;
}

enum jev_status jev_cuda_matrix_upload(struct jev_backend *be, const struct jev_matrix *host, struct jev_matrix *dev,
                                       struct jev_error *err) {
    memset(dev, 0, sizeof *dev);
    const char *name = host->name ? host->name : "a matrix";
    size_t data = 0, sb = 0;
    if (!part_bytes(host, &data, &sb))
        return jev_fail(err, JEV_ERR_UNSUPPORTED,
                        "%s: matrix type %d (bits %d, group %d, scale type %d) has no CUDA kernels", name,
                        (int)host->type, host->bits, host->group, (int)host->stype);
    const size_t at_s = align256(data), at_b = at_s + align256(sb), total = at_b + sb;
    char *p = (char *)jev_cuda_malloc(be, total);
    if (!p)
        return jev_fail(err, JEV_ERR_NOMEM, "cuda: device %d: no room for %s (%d x %d, %zu bytes as stored)",
                        be->device, name, host->rows, host->cols, total);
    cudaError_t e = cudaMemcpyAsync(p, host->data, data, cudaMemcpyHostToDevice, be->stream);
    if (e == cudaSuccess && sb > 0)
        e = cudaMemcpyAsync(p + at_s, host->scales, sb, cudaMemcpyHostToDevice, be->stream);
    if (e == cudaSuccess && sb > 0)
        e = cudaMemcpyAsync(p + at_b, host->biases, sb, cudaMemcpyHostToDevice, be->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(be->stream); /* the host bytes may be unmapped after the call */
    if (e != cudaSuccess) {
        jev_cuda_free(be, p);
        return jev_fail(err, JEV_ERR_CUDA, "%s: upload: %s", name, cudaGetErrorString(e));
    }
    *dev = *host;
    dev->data = p;
    dev->scales = sb > 0 ? p + at_s : NULL;
    dev->biases = sb > 0 ? p + at_b : NULL;
    /* the scratch serves both modes (the engine may switch between forwards): exact widens every stored
     * type but f32 to f32 rows, fast rounds every type but bf16 to bf16 rows; a split product
     * (JEV_CUDA_EXACT_GEMM) takes every type's pieces, 6 or 8 bytes a value (the cap unchanged: the
     * 0.8B model's scratch is capped by its LM head either way) */
    size_t elems = (size_t)host->rows * (size_t)host->cols, per = host->type == JEV_MTYPE_F32 ? 2 : 4;
    if (be->exact_gemm == JEV_CUDA_EXACT_BF16X6)
        per = 6;
    else if (be->exact_gemm == JEV_CUDA_EXACT_TF32X3)
        per = 8;
    enum jev_status s = dq_reserve(be, elems * per, name, err);
    if (s != JEV_OK)
        jev_cuda_matrix_free(be, dev);
    return s;
}

void jev_cuda_matrix_free(struct jev_backend *be, struct jev_matrix *dev) {
    if (dev->data) {
        /* the data is this backend's own allocation (const only to the ops that read it) */
        void *p;
        memcpy(&p, &dev->data, sizeof p);
        cudaStreamSynchronize(be->stream);
        jev_cuda_free(be, p);
    }
    memset(dev, 0, sizeof *dev);
}
