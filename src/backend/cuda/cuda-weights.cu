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
 *
 * Kernel -> launcher -> entry: the kernels are file-static; the launchers are the entries
 * (cuda-int.h) that cuda.c (the mirror) and cuda-matmul.cu (the products) call.
 */
extern "C" {
#include "base/error.h" // defines: jev_fail
}
#include "backend/cuda/cuda-int.h"         // defines: struct jev_backend, jev_cuda_malloc, jev_cuda_check
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

/* out[i] for i < nr * cols: element (r0 + i / cols, i % cols) of w, as f32 or rounded to bf16. */
template <bool BF16>
static __global__ void dequant_rows_kernel(struct jev_matrix w, int64_t r0, int64_t count, void *out) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        const int64_t r = i / w.cols, c = i - r * w.cols;
        const float v = jev_cuda_wget(&w, r0 + r, c);
        if (BF16)
            ((uint16_t *)out)[i] = jev_f32_to_bf16(v);
        else
            ((float *)out)[i] = v;
    }
}

/* Stores PER values (PER a multiple of 4) at out + at, as f32 (16-byte stores) or rounded to bf16
 * (8-byte stores); at is a multiple of 4 and out 256-byte aligned, so every store is aligned. */
template <bool BF16, int PER> static __device__ void store_values(void *out, int64_t at, const float *v) {
#pragma unroll
    for (int k = 0; k < PER; k += 4) {
        if (BF16) {
            uint2 u;
            u.x = (uint32_t)jev_f32_to_bf16(v[k]) | (uint32_t)jev_f32_to_bf16(v[k + 1]) << 16;
            u.y = (uint32_t)jev_f32_to_bf16(v[k + 2]) | (uint32_t)jev_f32_to_bf16(v[k + 3]) << 16;
            *(uint2 *)((uint16_t *)out + at + k) = u;
        } else {
            *(float4 *)((float *)out + at + k) = make_float4(v[k], v[k + 1], v[k + 2], v[k + 3]);
        }
    }
}

/* The words form of dequant_rows_kernel for affine codes of BITS = 2, 4 or 8 bits whose group holds whole
 * u32 words: one thread per word (32 / BITS codes of one group: one scale and one bias), its values
 * stored together. The same arithmetic as jev_cuda_wget per element, so the same bits; the per-element
 * kernel spent its time on a 64-bit division, a type switch and two scale loads per value (7 ms of a
 * 532-token prefill, issue 13's run 6). Word i of rows r0.. is element i * (32 / BITS) of the rows. */
template <bool BF16, int BITS>
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
        store_values<BF16, PER>(out, i * PER, v);
    }
}

/* bf16 or f16 rows (cols a multiple of 8), 8 values a thread: one 16-byte load, widened as base/half.h
 * widens (bit operations), stored together. Element i * 8 of rows r0.. starts group i. */
template <bool BF16, bool SRC_BF16>
static __global__ void dequant_halves_kernel(const uint16_t *__restrict__ data, int64_t n8, void *out) {
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
        store_values<BF16, 8>(out, i * 8, v);
    }
}

static __global__ void to_bf16_kernel(const float *__restrict__ x, int64_t count, uint16_t *__restrict__ out) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
        out[i] = jev_f32_to_bf16(x[i]);
}

/* ---- launchers ---- */

void jev_cuda_dequant_rows(struct jev_backend *be, const struct jev_matrix *w, int64_t r0, int64_t nr, void *out,
                           bool as_bf16) {
    const int64_t count = nr * (int64_t)w->cols;
    if (count <= 0)
        return;
    cudaStream_t st = be->stream;
    const int bits = w->bits;
    if (w->type == JEV_MTYPE_QAFFINE && (bits == 2 || bits == 4 || bits == 8) && w->group % (32 / bits) == 0) {
        const int64_t n = count / (32 / bits);
        const unsigned nb = dq_blocks(be, n);
#define WORDS(B)                                                                                                       \
    (as_bf16 ? dequant_words_kernel<true, B><<<nb, DQ_THREADS, 0, st>>>(*w, r0, n, out)                                \
             : dequant_words_kernel<false, B><<<nb, DQ_THREADS, 0, st>>>(*w, r0, n, out))
        if (bits == 2)
            WORDS(2);
        else if (bits == 4)
            WORDS(4);
        else
            WORDS(8);
#undef WORDS
    } else if ((w->type == JEV_MTYPE_BF16 || w->type == JEV_MTYPE_F16) && w->cols % 8 == 0) {
        const uint16_t *src = (const uint16_t *)w->data + r0 * (int64_t)w->cols;
        const int64_t n = count / 8;
        const unsigned nb = dq_blocks(be, n);
        const bool bf = w->type == JEV_MTYPE_BF16;
        if (as_bf16)
            bf ? dequant_halves_kernel<true, true><<<nb, DQ_THREADS, 0, st>>>(src, n, out)
               : dequant_halves_kernel<true, false><<<nb, DQ_THREADS, 0, st>>>(src, n, out);
        else
            bf ? dequant_halves_kernel<false, true><<<nb, DQ_THREADS, 0, st>>>(src, n, out)
               : dequant_halves_kernel<false, false><<<nb, DQ_THREADS, 0, st>>>(src, n, out);
    } else if (as_bf16) {
        dequant_rows_kernel<true><<<dq_blocks(be, count), DQ_THREADS, 0, st>>>(*w, r0, count, out);
    } else {
        dequant_rows_kernel<false><<<dq_blocks(be, count), DQ_THREADS, 0, st>>>(*w, r0, count, out);
    }
    jev_cuda_check(be, cudaGetLastError(), "dequantize rows");
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
     * type but f32 to f32 rows, fast rounds every type but bf16 to bf16 rows */
    size_t elems = (size_t)host->rows * (size_t)host->cols;
    enum jev_status s = dq_reserve(be, elems * (host->type == JEV_MTYPE_F32 ? 2 : 4), name, err);
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
