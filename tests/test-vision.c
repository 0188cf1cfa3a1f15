/*
 * test-vision.c - the vision tower.
 *
 * C-only (hold without goldens):
 *   - the fast vision attention against the scalar reference (NMSE);
 *   - rotary inverse frequencies against the double formula (within 1 ulp);
 *   - the whole forward against a double-precision reference tower written
 *     here from spec/qwen35.md §6 (Conv3d as a sum over (c, t, y, x),
 *     linspace-based bilinear position interpolation, explicit rotary angles,
 *     two-pass softmax, tanh/erf GELU), on an in-memory f32 model and on the
 *     tiny synthetic model in both layouts (hf bf16, mlx4 quantized: the
 *     reference reads the same dequantized weights through jev_matrix_get).
 * Goldens (tests/golden/vision-*.json from scripts/reference/vision_goldens.py,
 * run with transformers; these tests fail until the files exist):
 *   - see test-vision-golden.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"         // defines: jev_cpu_ops, jev_cpu_vision_attention_ref
#include "base/pool.h"               // defines: jev_pool_init
#include "model/model.h"             // defines: jev_model_open
#include "model/vision-preprocess.h" // defines: jev_vision_patchify
#include "model/vision.h"            // defines: jev_vision_forward
#include "vision-ref.h"              // defines: vref_forward, test model helpers

/* ---- ops ---- */

static void test_attention_fast_vs_reference(void **state) {
    (void)state;
    struct jev_pool *pool = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_pool_init(&pool, 2, &err), JEV_OK);
    struct jev_backend *be = jev_cpu_backend_new(pool);
    /* register-tile sizes, then the sgemm form (>= 256 rows), with several key chunks in the last one */
    const int cases[][3] = {{4, 2, 32}, {37, 2, 16},  {130, 3, 64}, {129, 1, 24},
                            {1, 2, 32}, {300, 2, 64}, {611, 1, 32}, {4500, 1, 16}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int n = cases[k][0], H = cases[k][1], hd = cases[k][2];
        size_t len = (size_t)n * 3 * (size_t)H * (size_t)hd;
        float *qkv = malloc(len * sizeof(float)), *a = malloc((size_t)n * H * hd * sizeof(float)),
              *b = malloc((size_t)n * H * hd * sizeof(float));
        for (size_t i = 0; i < len; i++) /* the ops-test pattern, scaled so that softmaxes are peaked and flat */
            qkv[i] = (0.1f + 2.0f * cosf((float)i)) * (k % 2 ? 1.5f : 0.4f);
        float scale = 1.0f / sqrtf((float)hd);
        jev_cpu_vision_attention_ref(be, qkv, n, H, hd, scale, a);
        for (int scalar = 0; scalar < 2; scalar++) { /* the table's kernels (AVX2 here), then the scalar ones */
            if (scalar)
                jev_cpu_vision_attention_blocked(be, qkv, n, H, hd, scale, b, true);
            else
                jev_cpu_ops.vision_attention(be, qkv, n, H, hd, scale, b);
            double num = 0, den = 0;
            for (size_t i = 0; i < (size_t)n * H * hd; i++) {
                num += ((double)a[i] - (double)b[i]) * ((double)a[i] - (double)b[i]);
                den += (double)a[i] * (double)a[i];
            }
            if (!(num / den <= 1e-10))
                fail_msg("vision_attention%s n=%d heads=%d hd=%d: NMSE %g", scalar ? " (scalar kernels)" : "", n, H, hd,
                         num / den);
        }
        free(qkv);
        free(a);
        free(b);
    }
    jev_cpu_backend_free(be);
    jev_pool_free(pool);
}

static void test_inv_freq(void **state) {
    (void)state;
    float f[64];
    assert_int_equal(jev_vision_inv_freq(64, 10000.0, f), 16);
    for (int i = 0; i < 16; i++) {
        double want = 1.0 / pow(10000.0, 2.0 * i / 32.0);
        assert_true(fabs((double)f[i] - want) <= 1.2e-7 * want); /* f32 of the true value, within 1 ulp */
    }
    assert_true(f[0] == 1.0f);
    assert_int_equal(jev_vision_inv_freq(32, 10000.0, f), 8); /* the tiny model: 8 */
}

/* ---- the forward against the double reference ---- */

struct fwd_case {
    int gh, gw;
};

static void run_forward_vs_ref(const struct jev_vision_config *c, const struct jev_vision_weights *w,
                               const struct fwd_case *cases, int ncases, double tol) {
    struct jev_pool *pool = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_pool_init(&pool, 2, &err), JEV_OK);
    struct jev_backend *be = jev_cpu_backend_new(pool);
    int maxp = 0;
    for (int k = 0; k < ncases; k++)
        maxp = cases[k].gh * cases[k].gw > maxp ? cases[k].gh * cases[k].gw : maxp;
    struct jev_vision v;
    assert_int_equal(jev_vision_init(&v, c, w, &jev_cpu_ops, be, maxp, &err), JEV_OK);
    for (int k = 0; k < ncases; k++) {
        int gh = cases[k].gh, gw = cases[k].gw, n = gh * gw, nt = n / 4;
        float *pix = malloc((size_t)n * (size_t)c->patch_dim * sizeof(float));
        vref_pixels(pix, n, c->patch_dim, (unsigned)k + 1);
        float *got = malloc((size_t)nt * (size_t)c->out_hidden * sizeof(float));
        double *want = malloc((size_t)nt * (size_t)c->out_hidden * sizeof(double));
        assert_int_equal(jev_vision_forward(&v, pix, gh, gw, got, &err), JEV_OK);
        vref_forward(c, w, pix, gh, gw, want);
        double md = 0, mref = 0;
        for (size_t i = 0; i < (size_t)nt * (size_t)c->out_hidden; i++) {
            md = fmax(md, fabs((double)got[i] - want[i]));
            mref = fmax(mref, fabs(want[i]));
        }
        if (!(md <= tol * mref))
            fail_msg("grid %dx%d: max |jev - ref| = %g, max |ref| = %g (relative %g > %g)", gh, gw, md, mref, md / mref,
                     tol);
        free(pix);
        free(got);
        free(want);
    }
    assert_int_equal(v.n_forwards, ncases);
    /* over capacity, and a grid that does not merge */
    float dummy[1];
    assert_int_equal(jev_vision_forward(&v, dummy, 2, maxp, dummy, &err), JEV_ERR_CONTEXT_FULL);
    jev_error_clear(&err);
    assert_int_equal(jev_vision_forward(&v, dummy, 3, 2, dummy, &err), JEV_ERR_INVALID_ARG);
    assert_string_equal(err.msg, "vision: grid 3x2 is not a multiple of the merge size 2");
    jev_vision_free(&v);
    jev_cpu_backend_free(be);
    jev_pool_free(pool);
}

static void test_forward_in_memory_model(void **state) {
    (void)state;
    struct vref_model m;
    vref_model_init(&m, 7);
    /* a 5x5 learned grid: smaller and larger patch grids, a one-block grid, attention over >128 keys */
    const struct fwd_case cases[] = {{4, 6}, {2, 2}, {6, 2}, {14, 12}, {10, 10}};
    run_forward_vs_ref(&m.cfg, &m.w, cases, 5, 2e-5);
    vref_model_free(&m);
}

static void test_forward_tiny_synth_both_layouts(void **state) {
    (void)state;
    const char *layouts[] = {"hf", "mlx4"};
    const struct fwd_case cases[] = {{6, 8}, {4, 4}};
    for (int k = 0; k < 2; k++) {
        struct jev_model *m = vref_open_tiny(layouts[k]);
        assert_true(m->config.has_vision);
        run_forward_vs_ref(&m->config.vision, &m->weights.vision, cases, 2, 2e-5);
        jev_model_free(m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_fast_vs_reference),
        cmocka_unit_test(test_inv_freq),
        cmocka_unit_test(test_forward_in_memory_model),
        cmocka_unit_test(test_forward_tiny_synth_both_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
