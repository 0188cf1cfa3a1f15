/*
 * test-cuda-attn-emul.c - the bound of fast mode's vision attention (tests/bf16-attn-ref.h), checked
 * on the CPU (CI has no GPU; the kernel itself is checked against the same reference and bound on the
 * GPU machine, tests/cuda/test-cuda-attention.c).
 *
 * An emulation of src/backend/cuda/cuda-attention.cu's fast arithmetic in f32: Q, K, V rounded to
 * bf16; S as f32 sums of the exact bf16 products, scaled; the row softmax as the kernel computes it
 * (max-subtracted expf, an f32 sum, divided by it); P rounded to bf16; O as f32 sums of the products.
 * The sums go in two orders (forward, backward) and two roundings (to nearest, and toward zero, which
 * tensor cores may do). Every output is within the bound of the double reference. And the bound tells
 * apart what it must: with V values just under half a bf16 spacing above a bf16 value (so that
 * rounding moves every one of them the same way), the f32 path (nothing rounded to bf16: exact
 * mode's arithmetic) falls outside it, as does the product with the neighbouring head's V.
 * Emulating the kernel does not prove the kernel; it proves that the bound holds the arithmetic the
 * kernel is documented to do, so that a failure on the GPU points at the kernel.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fenv.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "bf16-attn-ref.h" // defines: bf16_vision_attention_ref
#include "bf16-ref.h"      // defines: bf16_round

/* How the emulation computes. */
struct emul {
    bool bf16;       /* round Q, K, V and P to bf16 (fast); false: the f32 path */
    bool backward;   /* sum the products from the last one */
    int round;       /* FE_TONEAREST or FE_TOWARDZERO for the products' sums */
    int v_head_skew; /* 0, or 1: read V of head h + 1 (mod H): a wrong product */
};

/* f32 sum of a[k] * b[k * stride] for k < len in the emulation's order and rounding. */
static float dot_f32(const float *a, const float *b, int64_t stride, int64_t len, const struct emul *e) {
    fesetround(e->round);
    volatile float acc = 0.0f; /* volatile: each addition rounded in the mode set, in this order */
    for (int64_t t = 0; t < len; t++) {
        int64_t k = e->backward ? len - 1 - t : t;
        acc = acc + a[k] * b[k * stride];
    }
    fesetround(FE_TONEAREST);
    return acc;
}

/* out[n][H*hd] as the emulation computes it. */
static void emulate(const float *qkv, int64_t n, int32_t heads, int32_t hd, float scale, const struct emul *e,
                    float *out) {
    const int64_t dim = (int64_t)heads * hd, ld = 3 * dim;
    float *x = malloc((size_t)(n * ld) * sizeof(float)), *s = malloc((size_t)n * sizeof(float));
    float *kt = malloc((size_t)hd * sizeof(float));
    assert_true(x && s && kt);
    for (int64_t i = 0; i < n * ld; i++)
        x[i] = e->bf16 ? bf16_round(qkv[i]) : qkv[i];
    for (int32_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < n; i++) {
            float mx = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                for (int32_t d = 0; d < hd; d++)
                    kt[d] = x[j * ld + dim + (int64_t)h * hd + d];
                s[j] = scale * dot_f32(x + i * ld + (int64_t)h * hd, kt, 1, hd, e);
                mx = fmaxf(mx, s[j]);
            }
            float sum = 0.0f;
            for (int64_t j = 0; j < n; j++) {
                s[j] = expf(s[j] - mx);
                sum += s[j];
            }
            for (int64_t j = 0; j < n; j++)
                s[j] = e->bf16 ? bf16_round(s[j] / sum) : s[j] / sum;
            const int32_t hv = (h + e->v_head_skew) % heads;
            for (int32_t d = 0; d < hd; d++)
                out[i * dim + (int64_t)h * hd + d] = dot_f32(s, x + 2 * dim + (int64_t)hv * hd + d, ld, n, e);
        }
    free(x);
    free(s);
    free(kt);
}

/* qkv[n][3*H*hd]: cosines for Q and K; V either cosines too or, nudged, positive values each just
 * under half a bf16 spacing above a bf16 value (0.99 * 2^-9 relative, under every half spacing). */
static float *make_qkv(int64_t n, int32_t heads, int32_t hd, bool nudged) {
    const int64_t dim = (int64_t)heads * hd, len = n * 3 * dim;
    float *x = malloc((size_t)len * sizeof(float));
    assert_non_null(x);
    for (int64_t i = 0; i < len; i++) {
        x[i] = (0.1f + 2.0f * (float)cos((double)(i * 7 + 3))) * 0.5f;
        if (nudged && i % (3 * dim) >= 2 * dim)
            x[i] = bf16_round(1.0f + 0.4f * (float)cos((double)(i * 3 + 1))) * (1.0f + 0.99f * 0x1p-9f);
    }
    return x;
}

/* The largest |out - oref| / bound over the outputs (> 1: outside). */
static double worst_ratio(const float *out, const double *oref, const double *bound, int64_t len) {
    double w = 0.0;
    for (int64_t i = 0; i < len; i++) {
        assert_true(isfinite(out[i]) && bound[i] > 0.0);
        w = fmax(w, fabs((double)out[i] - oref[i]) / bound[i]);
    }
    return w;
}

static void attn_case(int64_t n, int32_t heads, int32_t hd, bool nudged) {
    const int64_t len = n * heads * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    float *qkv = make_qkv(n, heads, hd, nudged), *out = malloc((size_t)len * sizeof(float));
    double *oref = malloc((size_t)len * sizeof(double)), *bound = malloc((size_t)len * sizeof(double));
    assert_true(out && oref && bound);
    bf16_vision_attention_ref(qkv, n, heads, hd, scale, oref, bound);
    const int rounds[2] = {FE_TONEAREST, FE_TOWARDZERO};
    for (int r = 0; r < 2; r++)
        for (int bw = 0; bw < 2; bw++) {
            struct emul e = {true, bw == 1, rounds[r], 0};
            emulate(qkv, n, heads, hd, scale, &e, out);
            double w = worst_ratio(out, oref, bound, len);
            printf("  n %4lld H %d hd %2d %s, %s, %s: worst error %.3f of the bound\n", (long long)n, heads, hd,
                   nudged ? "nudged V" : "cosines ", r ? "toward zero" : "to nearest ", bw ? "backward" : "forward ",
                   w);
            if (!(w <= 1.0))
                fail_msg("the emulated fast attention is outside the bound (%.3f of it)", w);
        }
    struct emul wrong = {true, false, FE_TONEAREST, 1};
    emulate(qkv, n, heads, hd, scale, &wrong, out);
    double ww = worst_ratio(out, oref, bound, len);
    printf("  n %4lld H %d hd %2d: the neighbouring head's V %.3g of the bound\n", (long long)n, heads, hd, ww);
    assert_true(ww > 1.0);
    if (nudged) {
        struct emul f32 = {false, false, FE_TONEAREST, 0};
        emulate(qkv, n, heads, hd, scale, &f32, out);
        double wf = worst_ratio(out, oref, bound, len);
        printf("  n %4lld H %d hd %2d: the f32 path %.3g of the bound\n", (long long)n, heads, hd, wf);
        assert_true(wf > 1.0);
    }
    free(qkv);
    free(out);
    free(oref);
    free(bound);
}

static void test_bound_holds(void **state) {
    (void)state;
    attn_case(3, 2, 16, false);
    attn_case(64, 2, 64, false);
    attn_case(300, 2, 64, false);
    attn_case(700, 2, 16, false);
}

static void test_bound_tells_f32(void **state) {
    (void)state;
    attn_case(64, 2, 64, true);
    attn_case(300, 2, 64, true);
    attn_case(700, 2, 16, true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound_holds),
        cmocka_unit_test(test_bound_tells_f32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
