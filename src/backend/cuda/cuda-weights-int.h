/*
 * cuda-weights-int.h - one weight element of a device matrix in its stored
 * form, as f32, for the kernels that read weights as they go (embed,
 * vision_pos_add, matmul_rows' in-place dot products, the dequantization
 * into matmul's scratch), and the row chunks matmul cuts a matrix into.
 *
 * Host and device code, plain C: the .cu files of this folder use it on the
 * device, and tests/test-cuda-emul.c runs the very same source on the host
 * (no GPU in CI) against backend/matrix.c, so that the index arithmetic is
 * checked everywhere. It also declares the dequantization's launchers
 * (cuda-weights.cu) without struct jev_backend's definition (cuda-int.h's),
 * so that the parity tests, which hold the CPU backend's definition of that
 * struct, can call them on the opaque pointer.
 *
 * The formula is backend/matrix.c's jev_matrix_get, the reference every
 * kernel must equal bit for bit: f32 as stored; bf16 / f16 widened with the
 * bit operations of base/half.h; MLX affine W = scale * q + bias as a rounded
 * multiply then a rounded add (__fmul_rn / __fadd_rn on the device: nvcc
 * would otherwise contract them into one FMA, and the CPU rounds twice; the
 * host build is -std=c11, which does not contract), q being element c of the
 * row's little-endian stream of `bits`-bit codes (a code may straddle two
 * u32 words).
 *
 * What it is not: the copy to the device or the scratch (cuda-weights.cu).
 */
#ifndef JEV_BACKEND_CUDA_WEIGHTS_INT_H
#define JEV_BACKEND_CUDA_WEIGHTS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/matrix.h" // defines: struct jev_matrix, enum jev_mtype, enum jev_stype
#include "base/half.h"      // defines: jev_bf16_to_f32, jev_f16_to_f32, JEV_HOST_DEVICE

#ifdef __cplusplus
extern "C" {
#endif

/* The dequantization scratch holds at most this many bytes: a larger matrix (the 0.8B model's
 * tied embedding / LM head, 1 GB as f32 rows) is multiplied in row chunks of this size. */
#define JEV_CUDA_DQ_CAP ((size_t)64 << 20)

/* Products of at most this many tokens (decode steps, a few answer rows) read a non-f32 matrix in
 * place, one warp per output row, in f32 in both modes (cuda-matmul.cu): the weights stream once in
 * their stored form; dequantizing them into the scratch first would move 8x the bytes of 4-bit codes. */
#define JEV_CUDA_DIRECT_MAX_N 4

struct jev_backend;

/* Rows [r0, r0 + nr) of device matrix w dequantized into out ([nr][cols], device): f32 values equal to
 * backend/matrix.c's jev_matrix_row bit for bit, or (as_bf16) those values rounded to bf16 as
 * base/half.h's jev_f32_to_bf16 does; queued. */
void jev_cuda_dequant_rows(struct jev_backend *be, const struct jev_matrix *w, int64_t r0, int64_t nr, void *out,
                           bool as_bf16);
/* x[0..count) rounded to bf16 (jev_f32_to_bf16) into out (device); queued. */
void jev_cuda_to_bf16(struct jev_backend *be, const float *x, int64_t count, uint16_t *out);
/* The size of the backend's dequantization scratch now (grown by the mirror, at most JEV_CUDA_DQ_CAP). */
size_t jev_cuda_dq_bytes(const struct jev_backend *be);

#ifdef __cplusplus
}
#endif

#ifdef __CUDA_ARCH__
#define JEV_CUDA_MUL_RN(a, b) __fmul_rn((a), (b))
#define JEV_CUDA_ADD_RN(a, b) __fadd_rn((a), (b))
#else
#define JEV_CUDA_MUL_RN(a, b) ((a) * (b))
#define JEV_CUDA_ADD_RN(a, b) ((a) + (b))
#endif

/* Element i of a scale or bias array of type stype. */
JEV_HOST_DEVICE static inline float jev_cuda_wscale(int stype, const void *p, int64_t i) {
    switch (stype) {
    case JEV_STYPE_F32: return ((const float *)p)[i];
    case JEV_STYPE_BF16: return jev_bf16_to_f32(((const uint16_t *)p)[i]);
    case JEV_STYPE_F16: return jev_f16_to_f32(((const uint16_t *)p)[i]);
    }
    return 0.0f;
}

/* W[r][c] of matrix w (on the device its pointers are device pointers), as f32. */
JEV_HOST_DEVICE static inline float jev_cuda_wget(const struct jev_matrix *w, int64_t r, int64_t c) {
    switch (w->type) {
    case JEV_MTYPE_F32: return ((const float *)w->data)[r * w->cols + c];
    case JEV_MTYPE_BF16: return jev_bf16_to_f32(((const uint16_t *)w->data)[r * w->cols + c]);
    case JEV_MTYPE_F16: return jev_f16_to_f32(((const uint16_t *)w->data)[r * w->cols + c]);
    case JEV_MTYPE_QAFFINE: {
        const int64_t words = (int64_t)w->cols * w->bits / 32, groups = w->cols / w->group;
        const uint32_t *row = (const uint32_t *)w->data + r * words;
        const int64_t bit = c * w->bits, wi = bit >> 5;
        const int off = (int)(bit & 31);
        uint64_t v = row[wi];
        if (off + w->bits > 32)
            v |= (uint64_t)row[wi + 1] << 32;
        const uint32_t q = (uint32_t)(v >> off) & ((1u << w->bits) - 1u);
        const int64_t g = r * groups + c / w->group;
        const float s = jev_cuda_wscale(w->stype, w->scales, g), b = jev_cuda_wscale(w->stype, w->biases, g);
        return JEV_CUDA_ADD_RN(JEV_CUDA_MUL_RN(s, (float)q), b);
    }
    }
    return 0.0f;
}

/* Rows of a rows x cols matrix per chunk of elem-byte values in a scratch of scratch_bytes: all of
 * them when they fit, else as many whole rows as fit; 0 when not one row fits (no scratch). */
JEV_HOST_DEVICE static inline int64_t jev_cuda_chunk_rows(size_t scratch_bytes, size_t elem, int64_t rows,
                                                          int64_t cols) {
    int64_t c = (int64_t)(scratch_bytes / elem) / (cols > 0 ? cols : 1);
    return c < rows ? c : rows;
}

#endif
