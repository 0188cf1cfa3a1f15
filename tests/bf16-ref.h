/*
 * bf16-ref.h - the CPU reference of fast mode's matrix product and the bound it is checked with
 * (tests/cuda/test-cuda-matmul.c on the GPU; tests/test-cuda-emul.c checks the bound itself on the
 * CPU, against f32 sums in several orders and roundings).
 *
 * Fast mode (ops.h, include/jev.h) rounds the activations and the dequantized weights to bf16
 * (round to nearest even, base/half.h) and multiplies them on tensor cores with f32 accumulation.
 * The reference takes the same bf16 inputs, so the only difference left is the accumulation:
 * y_ref = sum_k xb_k * wb_k in double (each product of two bf16 values is exact in f32 already).
 *
 * The bound (derived, not fitted): any order of summing the cols products p_k in a floating-point
 * type of unit roundoff u satisfies |y - y_exact| <= gamma_{cols-1} * sum_k |p_k|, gamma_n = n u / (1 -
 * n u) (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 4.4 / Lemma 3.1). Tensor
 * cores may truncate instead of rounding to nearest (Fasi, Higham, Mikaitis, Pranesh, "Numerical
 * behavior of NVIDIA tensor cores", PeerJ CS 2021), so u = 2^-23 (one ulp of f32) rather than
 * 2^-24; the double-precision reference adds nothing that matters at this scale. A result outside
 * it is not a rounding difference but a wrong product (a wrong row, column or input).
 *
 * Header-only; include after <cmocka.h>.
 */
#ifndef JEV_TESTS_BF16_REF_H
#define JEV_TESTS_BF16_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/matrix.h" // defines: struct jev_matrix, jev_matrix_row
#include "base/half.h"      // defines: jev_f32_to_bf16, jev_bf16_to_f32

/* v rounded to bf16 and back: the value fast mode multiplies. */
static inline float bf16_round(float v) { return jev_bf16_to_f32(jev_f32_to_bf16(v)); }

/* gamma_n for a unit roundoff of 2^-23 (see above). */
static inline double bf16_gamma(int64_t n) {
    const double u = ldexp(1.0, -23);
    return (double)n * u / (1.0 - (double)n * u);
}

/* yref[n][rows] = the bf16-rounded x[n][cols] . (the bf16-rounded W)^T in double, and bound[n][rows]:
 * gamma_{cols-1} * sum_k |xb_k wb_k| (both arrays of n * rows doubles, the caller's). */
static inline void bf16_gemm_ref(const struct jev_matrix *w, const float *x, int64_t n, double *yref, double *bound) {
    const int64_t rows = w->rows, cols = w->cols;
    float *wr = malloc((size_t)(cols > 0 ? cols : 1) * sizeof(float));
    float *xb = malloc((size_t)(n * cols > 0 ? n * cols : 1) * sizeof(float));
    assert_true(wr && xb);
    for (int64_t i = 0; i < n * cols; i++)
        xb[i] = bf16_round(x[i]);
    const double g = bf16_gamma(cols > 1 ? cols - 1 : 1);
    for (int64_t r = 0; r < rows; r++) {
        jev_matrix_row(w, r, wr);
        for (int64_t c = 0; c < cols; c++)
            wr[c] = bf16_round(wr[c]);
        for (int64_t t = 0; t < n; t++) {
            double s = 0.0, a = 0.0;
            for (int64_t c = 0; c < cols; c++) {
                double p = (double)xb[t * cols + c] * (double)wr[c];
                s += p;
                a += fabs(p);
            }
            yref[t * rows + r] = s;
            bound[t * rows + r] = g * a;
        }
    }
    free(wr);
    free(xb);
}

#endif
