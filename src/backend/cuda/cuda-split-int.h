/*
 * cuda-split-int.h - exact mode's error-compensated products (JEV_CUDA_EXACT_GEMM): the variants,
 * the split of one f32 value into the pieces a tensor-core product takes, and the launchers that
 * write those pieces (cuda-weights.cu: a weight chunk as it is dequantized; activations).
 *
 * Host and device code, plain C, like cuda-weights-int.h: the kernels split on the device and
 * tests/cuda/test-cuda-matmul.c runs the very same functions on the host to check their pieces bit
 * for bit. The launchers take the opaque struct jev_backend (the tests hold the CPU backend's
 * definition of that struct).
 *
 * The two splits (cuda-gemm-split.cu multiplies the pieces):
 * - BF16X3: v = v1 + v2 + v3 with v1 = bf16_rn(v), v2 = bf16_rn(v - v1), v3 = v - v1 - v2. Exact for
 *   every normal f32 v whose pieces are normal or zero: v - v1 is exact in f32 (v1 is within a
 *   bf16 half-ulp of v: at most 16 significant bits are left, a multiple of v's ulp), v2 takes 8
 *   of them rounded, and what is left (at most 8 bits: |v3| <= 2^-16 |v|, a multiple of v's ulp) is
 *   a bf16. Lost: v3 (and v2) when they fall below bf16's smallest subnormal (2^-133), i.e. for
 *   |v| below about 2^-110, and anything a tensor core flushes; such values keep only v1 + v2 (or
 *   v1), an error below 2^-133 absolute. |v| above bf16's largest finite (about 3.39e38) rounds to
 *   inf and NaN / inf pieces follow: out of range for this product (as for a model's weights).
 * - TF32X2: hi = tf32_rn(v) (f32 with the low 13 mantissa bits zero), lo = tf32_rn(v - hi). v - hi
 *   is exact in f32 (at most 13 bits are left); lo keeps 11 of them, rounded: |v - hi - lo| <=
 *   2^-22 |v|. Both are rounded here to nearest even, so that a tensor core that truncates its f32
 *   inputs to TF32 sees exactly these values.
 *
 * Layout of the pieces, [rows][P * cols] with P = 3 (BF16X3, bf16) or 2 (TF32X2, f32): each row
 * holds its P pieces one after the other, the weights largest first (w1 | w2 | w3, hi | lo), the
 * activations smallest first (x3 | x2 | x1, lo | hi). A product over the first j * cols values of a
 * weight row and the last j * cols values of an activation row is then a sum of j piece products
 * (cuda-gemm-split.cu): j = 3 gives x3 w1 + x2 w2 + x1 w3, j = 2 gives x2 w1 + x1 w2, j = 1 x1 w1.
 */
#ifndef JEV_BACKEND_CUDA_SPLIT_INT_H
#define JEV_BACKEND_CUDA_SPLIT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/matrix.h" // defines: struct jev_matrix
#include "base/half.h"      // defines: jev_f32_to_bf16, jev_bf16_to_f32, JEV_HOST_DEVICE

#ifdef __cplusplus
extern "C" {
#endif

/* Exact mode's product over more than JEV_CUDA_DIRECT_MAX_N tokens (JEV_CUDA_EXACT_GEMM, read when
 * the backend is made): F32, the f32 SIMT product (the default); BF16X6, six bf16 tensor-core
 * products of the BF16X3 pieces; TF32X3, three TF32 tensor-core products of the TF32X2 pieces. */
enum jev_cuda_exact_gemm { JEV_CUDA_EXACT_F32 = 0, JEV_CUDA_EXACT_BF16X6 = 1, JEV_CUDA_EXACT_TF32X3 = 2 };

/* How a value is cut into pieces. */
enum jev_cuda_split { JEV_CUDA_SPLIT_BF16X3, JEV_CUDA_SPLIT_TF32X2 };

/* Pieces per value and bytes per piece. */
#define JEV_CUDA_SPLIT_PIECES(s) ((s) == JEV_CUDA_SPLIT_BF16X3 ? 3 : 2)
#define JEV_CUDA_SPLIT_ELEM(s) ((s) == JEV_CUDA_SPLIT_BF16X3 ? 2 : 4)

/* A split product keeps its pieces in the dequantization scratch: a weight chunk's in at most this
 * share of it, a slice of the tokens' in the rest (cuda-gemm-split.cu). */
#define JEV_CUDA_SPLIT_W_SHARE 0.75

/* v to TF32 (10 mantissa bits, f32's exponent), round to nearest even, as an f32 with the low 13 bits
 * zero; inf and NaN as they are (an f32 that rounds past the largest TF32 becomes inf). */
JEV_HOST_DEVICE static inline float jev_tf32_rn(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) {
        u += 0xfffu + ((u >> 13) & 1u);
        u &= ~0x1fffu;
    }
    float r;
    memcpy(&r, &u, 4);
    return r;
}

/* v's BF16X3 pieces, largest first (p[0] = v1). The subtractions are exact (above), so no
 * contraction or rounding mode can change them. */
JEV_HOST_DEVICE static inline void jev_split_bf16x3(float v, uint16_t p[3]) {
    p[0] = jev_f32_to_bf16(v);
    const float r1 = v - jev_bf16_to_f32(p[0]);
    p[1] = jev_f32_to_bf16(r1);
    p[2] = jev_f32_to_bf16(r1 - jev_bf16_to_f32(p[1]));
}

/* v's TF32X2 pieces, largest first (p[0] = hi). */
JEV_HOST_DEVICE static inline void jev_split_tf32x2(float v, float p[2]) {
    p[0] = jev_tf32_rn(v);
    p[1] = jev_tf32_rn(v - p[0]);
}

struct jev_backend;

/* Rows [r0, r0 + nr) of device matrix w dequantized (the values of jev_cuda_dequant_rows, bit for
 * bit) and split into out ([nr][P * cols], device, 256-byte aligned), weights largest first; queued. */
void jev_cuda_dequant_split(struct jev_backend *be, const struct jev_matrix *w, int64_t r0, int64_t nr, void *out,
                            enum jev_cuda_split split);
/* x ([n][cols] f32, device) split into out ([n][P * cols], device), smallest first (the activations'
 * order) or largest first (an f32 weight chunk's); queued. */
void jev_cuda_split_rows(struct jev_backend *be, const float *x, int64_t n, int64_t cols, void *out,
                         enum jev_cuda_split split, bool smallest_first);
/* Exact mode's product from now on (the tests' switch, as jev_cuda_gemm_set_pin; the engine's comes
 * from JEV_CUDA_EXACT_GEMM); returns the one before. */
enum jev_cuda_exact_gemm jev_cuda_exact_gemm_set(struct jev_backend *be, enum jev_cuda_exact_gemm gemm);

#ifdef __cplusplus
}
#endif

#endif
