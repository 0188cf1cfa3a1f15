/*
 * bf16-attn-ref.h - the CPU reference of fast mode's vision attention on CUDA and the bound it is
 * checked with (tests/cuda/test-cuda-attention.c on the GPU; tests/test-cuda-attn-emul.c checks the
 * bound itself on the CPU against an emulation of the GPU's arithmetic).
 *
 * Fast mode (src/backend/cuda/cuda-attention.cu) rounds Q, K and V to bf16, computes S = Q K^T *
 * scale with f32 accumulation (tensor cores), the softmax in f32 (max-subtracted expf, divided by
 * the row sum), rounds P to bf16 and computes O = P V with f32 accumulation. The reference takes the
 * same bf16 Q, K, V, computes S and the softmax in double and rounds P to bf16 as the GPU does:
 * O_ref = sum_j bf16(P_j) v_j in double.
 *
 * The bound on |O - O_ref| (derived, not fitted; u = 2^-23 for every f32 operation, as bf16-ref.h,
 * gamma_k = k u / (1 - k u), Higham's Lemma 3.1):
 * 1. Scores: the GPU's s_j = fl(scale * acc_j), acc_j an f32 sum in any order of the hd exact products,
 *    so |s_j - scale t_j| <= eps_j = scale (gamma_{hd-1} A_j + 2u (|t_j| + gamma_{hd-1} A_j)), with t_j
 *    the exact dot product and A_j = sum_d |q_d k_jd|.
 * 2. Softmax of perturbed scores: with every score within E = max_j eps_j, the exact softmax of the
 *    GPU's scores is within a factor e^{+-2E} of P_j (numerator e^{+-E}, denominator e^{+-E}).
 * 3. The f32 softmax: s - max rounded (relative u, so exp's argument is off by u (R + 2E), R the row's
 *    range), expf within 2 ulp (CUDA's documented maximum, no fast math), the sum of n positive terms
 *    within gamma_{n-1}, the division within u: p_j / softmax_j within [1 / (1 + rho), 1 + rho],
 *    1 + rho = (1 + phi) / (1 - phi) (1 + u) / (1 - gamma_{n-1}), phi = (1 + 2u) e^{u (R + 2E)} - 1.
 *    So the GPU's f32 p_j lies in [lo_j, hi_j] = P_j [e^{-2E} / (1 + rho), e^{2E} (1 + rho)].
 * 4. bf16 rounding is monotonic: the GPU's bf16(p_j) lies in [bf16(lo_j), bf16(hi_j)], and differs
 *    from the reference's bf16(P_j) by at most flip_j = the larger distance to those ends (0 where
 *    the interval holds no rounding boundary, which is most j).
 * 5. O = P V: an f32 sum in any order of n exact products, within gamma_{n-1} sum_j |pb_j v_j|, with
 *    |pb_j| <= bf16(hi_j).
 * Hence |O - O_ref| <= gamma_{n-1} sum_j bf16(hi_j) |v_j| + sum_j flip_j |v_j| (plus 1e-12 of
 * sum_j bf16(hi_j) |v_j| and a factor 1 +- 1e-12 on the interval for the double reference's own
 * rounding, n 2^-53 and less). A result outside it is not a rounding
 * difference: it is a wrong product (a wrong head, row or stride), P not rounded as described, or
 * the f32 path (the inputs of tests that must tell the two apart make the f32 result fall outside).
 *
 * Header-only; include after <cmocka.h>.
 */
#ifndef JEV_TESTS_BF16_ATTN_REF_H
#define JEV_TESTS_BF16_ATTN_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "bf16-ref.h" // defines: bf16_round, bf16_gamma

/* x rounded to f32 toward -inf (down) or +inf (up): the ends of an interval held in double. */
static inline float bf16_attn_f32_out(double x, bool up) {
    float f = (float)x;
    if (up && (double)f < x)
        f = nextafterf(f, INFINITY);
    if (!up && (double)f > x)
        f = nextafterf(f, -INFINITY);
    return f;
}

/*
 * oref[n][H*hd] and bound[n][H*hd] (the caller's, n * H * hd doubles each) for qkv[n][3*H*hd]
 * ([q | k | v], heads of hd inside each part), as jev_ops.vision_attention lays them out.
 */
static inline void bf16_vision_attention_ref(const float *qkv, int64_t n, int32_t heads, int32_t hd, float scale,
                                             double *oref, double *bound) {
    const int64_t dim = (int64_t)heads * hd, ld = 3 * dim;
    const double u = ldexp(1.0, -23), g_hd = bf16_gamma(hd > 1 ? hd - 1 : 1), g_n = bf16_gamma(n > 1 ? n - 1 : 1);
    float *b = malloc((size_t)(n * ld) * sizeof(float));
    double *s = malloc((size_t)n * sizeof(double)), *p = malloc((size_t)n * sizeof(double));
    double *pb = malloc((size_t)n * sizeof(double)), *hib = malloc((size_t)n * sizeof(double));
    double *flip = malloc((size_t)n * sizeof(double));
    assert_true(b && s && p && pb && hib && flip);
    for (int64_t i = 0; i < n * ld; i++)
        b[i] = bf16_round(qkv[i]);
    for (int32_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < n; i++) {
            const float *q = b + i * ld + (int64_t)h * hd;
            double mx = -INFINITY, e_max = 0.0;
            for (int64_t j = 0; j < n; j++) { /* 1. the scores and their perturbation */
                const float *k = b + j * ld + dim + (int64_t)h * hd;
                double t = 0.0, a = 0.0;
                for (int32_t d = 0; d < hd; d++) {
                    double pr = (double)q[d] * (double)k[d];
                    t += pr;
                    a += fabs(pr);
                }
                s[j] = (double)scale * t;
                double eps = (double)scale * (g_hd * a + 2.0 * u * (fabs(t) + g_hd * a));
                mx = fmax(mx, s[j]);
                e_max = fmax(e_max, eps);
            }
            double sum = 0.0, range = 0.0;
            for (int64_t j = 0; j < n; j++) {
                p[j] = exp(s[j] - mx);
                sum += p[j];
                range = fmax(range, mx - s[j]);
            }
            /* 2. and 3.: the GPU's f32 p_j within [lo_j, hi_j] */
            const double phi = (1.0 + 2.0 * u) * exp(u * (range + 2.0 * e_max)) - 1.0;
            const double rho = (1.0 + phi) / (1.0 - phi) * (1.0 + u) / (1.0 - g_n) - 1.0;
            const double f_lo = exp(-2.0 * e_max) / (1.0 + rho) * (1.0 - 1e-12);
            const double f_hi = exp(2.0 * e_max) * (1.0 + rho) * (1.0 + 1e-12);
            for (int64_t j = 0; j < n; j++) { /* 4. bf16 rounding, the reference's and the interval's */
                p[j] /= sum;
                pb[j] = bf16_round((float)p[j]);
                double lo = bf16_round(bf16_attn_f32_out(p[j] * f_lo, false));
                double hi = bf16_round(bf16_attn_f32_out(p[j] * f_hi, true));
                hib[j] = hi;
                flip[j] = fmax(0.0, fmax(hi - pb[j], pb[j] - lo));
            }
            for (int32_t d = 0; d < hd; d++) { /* 5. O = P V and its bound */
                double o = 0.0, acc = 0.0, fl = 0.0;
                for (int64_t j = 0; j < n; j++) {
                    double v = b[j * ld + 2 * dim + (int64_t)h * hd + d];
                    o += pb[j] * v;
                    acc += hib[j] * fabs(v);
                    fl += flip[j] * fabs(v);
                }
                oref[i * dim + (int64_t)h * hd + d] = o;
                bound[i * dim + (int64_t)h * hd + d] = g_n * acc + fl + 1e-12 * acc;
            }
        }
    free(b);
    free(s);
    free(p);
    free(pb);
    free(hib);
    free(flip);
}

#endif
