/*
 * test-cpu-fast.c - fast mode on the CPU backend (src/backend/cpu/cpu-matmul-bf16.c).
 *
 * - The decision (jev_cpu_bf16_choose): a CPU without AVX512-BF16 is refused with
 *   JEV_ERR_UNSUPPORTED naming the feature and what to use instead; JEV_CPU_BF16 caps the kernels
 *   (none refuses and names the variable, avx512 keeps AMX out, a cap never adds a kernel the CPU
 *   lacks); a cap outside the names is JEV_ERR_INVALID_ARG. jev_cpu_bf16_hw agrees with the flags in
 *   /proc/cpuinfo. Through the op table: a refused switch leaves the instance exact.
 * - The product (jev_cpu_matmul_bf16), for each kernel this CPU runs (AVX512, and AMX where it is
 *   granted), every matrix type and shape of tests/test-matrices.h, 1, 2, 7, 33 and 300 tokens, on
 *   2 threads and on the caller alone: every output within tests/bf16-ref.h's derived bound of the
 *   reference that takes the same bf16-rounded weights and activations and sums in double, and
 *   NMSE <= 1e-10 against it (leaving either input unrounded is an NMSE near 1e-6: bf16's
 *   relative step is 2^-8).
 * - Rows independent of company: a token's outputs are the same bits among 300 tokens as among 3,
 *   at several places (and alone, for the AVX512 kernel).
 * - Exact stays exact: in exact mode, before and after fast, the table's matmul is
 *   jev_cpu_matmul_fast bit for bit; in fast mode it is that too for 1 and 2 tokens (decode stays
 *   f32, as on CUDA) and jev_cpu_matmul_bf16 from 3.
 * Where the CPU has no AVX512-BF16, the product tests check the refusal instead (they cannot run).
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

#include "backend/cpu/cpu.h" // defines: jev_cpu_bf16_choose, jev_cpu_bf16_hw, jev_cpu_ops, struct jev_backend
#include "bf16-ref.h"        // defines: bf16_gemm_ref
#include "cpu-flags.h"       // defines: cpu_flag, cpu_fast_mode
#include "test-matrices.h"   // defines: MAT_CASES, mat_make, mat_det

#define NMSE_FAST 1e-10

static const struct mcase mcases[] = {
    MAT_CASES,
    {"q4 g64 bf16 (LM-sized)", JEV_MTYPE_QAFFINE, 96, 1024, 4, 64, JEV_STYPE_BF16},
    {"q4 g128 bf16", JEV_MTYPE_QAFFINE, 40, 256, 4, 128, JEV_STYPE_BF16},
    {"q8 g16 f16", JEV_MTYPE_QAFFINE, 21, 48, 8, 16, JEV_STYPE_F16},
};
static const int64_t ntoks[] = {1, 2, 7, 33, 300};

static void fill(float *x, int64_t n, int64_t seed) {
    for (int64_t i = 0; i < n; i++)
        x[i] = mat_det(i * 7 + seed);
}

/* The kernels this CPU runs, best last; returns how many. */
static int kernels(enum jev_cpu_bf16 out[2]) {
    enum jev_cpu_bf16 hw = jev_cpu_bf16_hw();
    int k = 0;
    if (hw >= JEV_CPU_BF16_AVX512)
        out[k++] = JEV_CPU_BF16_AVX512;
    if (hw >= JEV_CPU_BF16_AMX)
        out[k++] = JEV_CPU_BF16_AMX;
    return k;
}

static const char *kname(enum jev_cpu_bf16 k) { return k == JEV_CPU_BF16_AMX ? "amx" : "avx512"; }

/* A backend in fast mode running kernel k. */
static struct jev_backend *fast_backend(struct jev_pool *pool, enum jev_cpu_bf16 k) {
    struct jev_backend *be = jev_cpu_backend_new(pool);
    assert_non_null(be);
    struct jev_error err = {0};
    if (jev_cpu_ops.set_precision(be, JEV_PRECISION_FAST, &err) != JEV_OK)
        fail_msg("set_precision fast: %s", err.msg);
    assert_true(be->bf16 >= k);
    be->bf16 = k;
    return be;
}

/* On a CPU without the feature: the switch is refused, naming it, and the instance stays exact. */
static void expect_refused_here(void) {
    struct jev_backend *be = jev_cpu_backend_new(NULL);
    struct jev_error err = {0};
    assert_int_equal(jev_cpu_ops.set_precision(be, JEV_PRECISION_FAST, &err), JEV_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "AVX512-BF16"));
    assert_int_equal(be->bf16, JEV_CPU_BF16_NONE);
    jev_cpu_backend_free(be);
}

/* ---- the decision ---- */

static void test_choose(void **state) {
    (void)state;
    struct jev_error err = {0};
    enum jev_cpu_bf16 k = JEV_CPU_BF16_NONE;
    /* no feature: refused, whatever the cap, saying what is missing and what to use */
    const char *caps[] = {NULL, "", "amx", "avx512"};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(jev_cpu_bf16_choose(JEV_CPU_BF16_NONE, caps[i], &k, &err), JEV_ERR_UNSUPPORTED);
        if (!strstr(err.msg, "precision \"fast\"") || !strstr(err.msg, "AVX512-BF16") ||
            !strstr(err.msg, "avx512_bf16") || !strstr(err.msg, "does not have") ||
            !strstr(err.msg, "use precision exact") || !strstr(err.msg, "--backend cuda"))
            fail_msg("the refusal on a CPU without AVX512-BF16: %s", err.msg);
    }
    /* the cap none: refused, naming the variable (errors keep their first message: a fresh one each time) */
    memset(&err, 0, sizeof err);
    assert_int_equal(jev_cpu_bf16_choose(JEV_CPU_BF16_AMX, "none", &k, &err), JEV_ERR_UNSUPPORTED);
    if (!strstr(err.msg, "JEV_CPU_BF16=none") || !strstr(err.msg, "use precision exact"))
        fail_msg("the refusal under JEV_CPU_BF16=none: %s", err.msg);
    /* a name outside the three */
    memset(&err, 0, sizeof err);
    assert_int_equal(jev_cpu_bf16_choose(JEV_CPU_BF16_AMX, "avx", &k, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "JEV_CPU_BF16=\"avx\""));
    /* what runs: the CPU's best, under the cap */
    const struct {
        enum jev_cpu_bf16 have;
        const char *cap;
        enum jev_cpu_bf16 want;
    } ok[] = {{JEV_CPU_BF16_AMX, NULL, JEV_CPU_BF16_AMX},        {JEV_CPU_BF16_AMX, "", JEV_CPU_BF16_AMX},
              {JEV_CPU_BF16_AMX, "avx512", JEV_CPU_BF16_AVX512}, {JEV_CPU_BF16_AMX, "amx", JEV_CPU_BF16_AMX},
              {JEV_CPU_BF16_AVX512, NULL, JEV_CPU_BF16_AVX512},  {JEV_CPU_BF16_AVX512, "amx", JEV_CPU_BF16_AVX512}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        k = JEV_CPU_BF16_NONE;
        assert_int_equal(jev_cpu_bf16_choose(ok[i].have, ok[i].cap, &k, &err), JEV_OK);
        assert_int_equal(k, ok[i].want);
    }
}

static void test_hw_matches_cpuinfo(void **state) {
    (void)state;
    bool avx512 = cpu_fast_mode(), amx = cpu_flag("amx_bf16") && cpu_flag("amx_tile");
    enum jev_cpu_bf16 hw = jev_cpu_bf16_hw();
    printf("  cpuinfo: avx512_bf16 %s, amx_bf16 %s; fast mode runs %s\n", avx512 ? "yes" : "no", amx ? "yes" : "no",
           hw == JEV_CPU_BF16_AMX      ? "amx"
           : hw == JEV_CPU_BF16_AVX512 ? "avx512"
                                       : "nothing (refused)");
    assert_int_equal(hw >= JEV_CPU_BF16_AVX512, avx512);
    if (hw == JEV_CPU_BF16_AMX)
        assert_true(amx);
    if (!avx512)
        expect_refused_here();
}

/* Through the table: JEV_CPU_BF16=none refuses and leaves the instance exact; a bad cap likewise. */
static void test_cap_through_the_table(void **state) {
    (void)state;
    struct jev_backend *be = jev_cpu_backend_new(NULL);
    struct jev_error e1 = {0}, e2 = {0}, e3 = {0};
    assert_int_equal(setenv("JEV_CPU_BF16", "none", 1), 0);
    enum jev_status s1 = jev_cpu_ops.set_precision(be, JEV_PRECISION_FAST, &e1);
    enum jev_cpu_bf16 k1 = be->bf16;
    assert_int_equal(setenv("JEV_CPU_BF16", "fast", 1), 0);
    enum jev_status s2 = jev_cpu_ops.set_precision(be, JEV_PRECISION_FAST, &e2);
    enum jev_cpu_bf16 k2 = be->bf16;
    assert_int_equal(setenv("JEV_CPU_BF16", "avx512", 1), 0);
    enum jev_status s3 = jev_cpu_ops.set_precision(be, JEV_PRECISION_FAST, &e3);
    enum jev_cpu_bf16 k3 = be->bf16;
    unsetenv("JEV_CPU_BF16"); /* before any assertion: the tests after this one run without it */
    bool have = jev_cpu_bf16_hw() != JEV_CPU_BF16_NONE;
    assert_int_equal(s1, JEV_ERR_UNSUPPORTED);
    assert_non_null(strstr(e1.msg, have ? "JEV_CPU_BF16=none" : "does not have"));
    assert_int_equal(k1, JEV_CPU_BF16_NONE);
    assert_int_equal(s2, JEV_ERR_INVALID_ARG); /* a value that names no kernel set is wrong on any CPU */
    assert_non_null(strstr(e2.msg, "JEV_CPU_BF16=\"fast\" is not a kernel set"));
    assert_int_equal(k2, JEV_CPU_BF16_NONE);
    assert_int_equal(s3, have ? JEV_OK : JEV_ERR_UNSUPPORTED);
    assert_int_equal(k3, have ? JEV_CPU_BF16_AVX512 : JEV_CPU_BF16_NONE);
    struct jev_error e4 = {0};
    assert_int_equal(jev_cpu_ops.set_precision(be, JEV_PRECISION_EXACT, &e4), JEV_OK);
    assert_int_equal(be->bf16, JEV_CPU_BF16_NONE);
    jev_cpu_backend_free(be);
}

/* ---- the product ---- */

/* Fast matmul of one case against the bf16 reference: each output within its bound, and the NMSE. */
static void product_case(struct jev_backend *be, const struct mcase *mc, const struct mat *a, int64_t n,
                         const char *what) {
    int64_t len = n * mc->rows;
    float *x = malloc((size_t)(n * mc->cols) * sizeof(float)), *y = malloc((size_t)len * sizeof(float));
    double *yref = malloc((size_t)len * sizeof(double)), *bound = malloc((size_t)len * sizeof(double));
    assert_true(x && y && yref && bound);
    fill(x, n * mc->cols, 17 + n);
    for (int64_t i = 0; i < len; i++)
        y[i] = NAN; /* every output must be written */
    jev_cpu_matmul_bf16(be, &a->m, x, n, y);
    bf16_gemm_ref(&a->m, x, n, yref, bound);
    double num = 0, den = 0, worst = 0;
    for (int64_t i = 0; i < len; i++) {
        double e = fabs((double)y[i] - yref[i]);
        if (!isfinite(y[i]) || !(e <= bound[i] + 1e-30))
            fail_msg("%s %s n %lld: y[%lld][%lld] = %.9g, reference %.9g: |error| %.3g above the bound %.3g", what,
                     mc->name, (long long)n, (long long)(i / mc->rows), (long long)(i % mc->rows), (double)y[i],
                     yref[i], e, bound[i]);
        num += e * e;
        den += yref[i] * yref[i];
        if (bound[i] > 0)
            worst = fmax(worst, e / bound[i]);
    }
    double nmse = den > 0 ? num / den : num;
    if (n == 300 || n == 1)
        printf("  %-8s %-24s n %3lld: NMSE %.3g, worst error %.3f of the bound\n", what, mc->name, (long long)n, nmse,
               worst);
    if (nmse > NMSE_FAST)
        fail_msg("%s %s n %lld: NMSE %.3g > %.3g", what, mc->name, (long long)n, nmse, NMSE_FAST);
    free(x), free(y), free(yref), free(bound);
}

static void test_product(void **state) {
    (void)state;
    enum jev_cpu_bf16 ks[2];
    int nk = kernels(ks);
    if (nk == 0) {
        expect_refused_here();
        return;
    }
    struct jev_error err = {0};
    struct jev_pool *pool = NULL;
    assert_int_equal(jev_pool_init(&pool, 2, &err), JEV_OK);
    for (int ki = 0; ki < nk; ki++)
        for (int threads = 1; threads <= 2; threads++) {
            struct jev_backend *be = fast_backend(threads == 2 ? pool : NULL, ks[ki]);
            char what[32];
            snprintf(what, sizeof what, "%s/%d", kname(ks[ki]), threads);
            for (size_t c = 0; c < sizeof mcases / sizeof mcases[0]; c++) {
                const struct mcase *mc = &mcases[c];
                struct mat a = mat_make(mc->type, mc->rows, mc->cols, mc->bits, mc->group, mc->stype, (int64_t)c);
                for (size_t t = 0; t < sizeof ntoks / sizeof ntoks[0]; t++)
                    product_case(be, mc, &a, ntoks[t], what);
                mat_free(&a);
            }
            jev_cpu_backend_free(be);
        }
    jev_pool_free(pool);
}

/* A token's outputs among 300 tokens equal its outputs among 3 (and alone on the AVX512 kernel). */
static void test_rows_independent(void **state) {
    (void)state;
    enum jev_cpu_bf16 ks[2];
    int nk = kernels(ks);
    if (nk == 0) {
        expect_refused_here();
        return;
    }
    struct jev_error err = {0};
    struct jev_pool *pool = NULL;
    assert_int_equal(jev_pool_init(&pool, 2, &err), JEV_OK);
    const struct mcase cases[] = {
        {"q4 g64 bf16", JEV_MTYPE_QAFFINE, 200, 256, 4, 64, JEV_STYPE_BF16},
        {"bf16 odd", JEV_MTYPE_BF16, 77, 51, 0, 0, JEV_STYPE_F32},
    };
    const int64_t N = 300, at[] = {0, 1, 16, 31, 150, 297};
    for (int ki = 0; ki < nk; ki++) {
        struct jev_backend *be = fast_backend(pool, ks[ki]);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const struct mcase *mc = &cases[c];
            struct mat a = mat_make(mc->type, mc->rows, mc->cols, mc->bits, mc->group, mc->stype, 5);
            float *x = malloc((size_t)(N * mc->cols) * sizeof(float));
            float *all = malloc((size_t)(N * mc->rows) * sizeof(float)), *few = malloc(3 * (size_t)mc->rows * 4);
            assert_true(x && all && few);
            fill(x, N * mc->cols, 3);
            jev_cpu_ops.matmul(be, &a.m, x, N, all);
            for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
                int64_t t = at[i];
                jev_cpu_ops.matmul(be, &a.m, x + t * mc->cols, 3, few);
                if (memcmp(few, all + t * mc->rows, 3 * (size_t)mc->rows * sizeof(float)) != 0)
                    fail_msg("%s %s: tokens %lld..%lld differ between a call of 3 and one of %lld", kname(ks[ki]),
                             mc->name, (long long)t, (long long)t + 2, (long long)N);
                if (ks[ki] == JEV_CPU_BF16_AVX512) { /* the kernel itself (the table runs 1 token in f32) */
                    jev_cpu_matmul_bf16(be, &a.m, x + t * mc->cols, 1, few);
                    if (memcmp(few, all + t * mc->rows, (size_t)mc->rows * sizeof(float)) != 0)
                        fail_msg("avx512 %s: token %lld alone differs from the same among %lld", mc->name, (long long)t,
                                 (long long)N);
                }
            }
            free(x), free(all), free(few);
            mat_free(&a);
        }
        jev_cpu_backend_free(be);
    }
    jev_pool_free(pool);
}

/* Exact mode's product is jev_cpu_matmul_fast's, before fast mode and after switching back; in fast
 * mode the table runs 1 and 2 tokens through it too (decode stays f32, as on CUDA) and 3 or more
 * through the bf16 kernels. */
static void test_exact_unchanged(void **state) {
    (void)state;
    struct jev_error err = {0};
    struct jev_pool *pool = NULL;
    assert_int_equal(jev_pool_init(&pool, 2, &err), JEV_OK);
    struct jev_backend *be = jev_cpu_backend_new(pool);
    const struct mcase mc = {"q4 g64 bf16", JEV_MTYPE_QAFFINE, 70, 256, 4, 64, JEV_STYPE_BF16};
    struct mat a = mat_make(mc.type, mc.rows, mc.cols, mc.bits, mc.group, mc.stype, 9);
    const int64_t counts[] = {1, 2, 3, 7};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        int64_t n = counts[i], len = n * mc.rows;
        float *x = malloc((size_t)(n * mc.cols) * sizeof(float)), *want = malloc((size_t)len * sizeof(float));
        float *got = malloc((size_t)len * sizeof(float)), *fast = malloc((size_t)len * sizeof(float));
        fill(x, n * mc.cols, 41);
        jev_cpu_matmul_fast(be, &a.m, x, n, want);
        jev_cpu_ops.matmul(be, &a.m, x, n, got);
        assert_memory_equal(want, got, (size_t)len * sizeof(float));
        if (jev_cpu_bf16_hw()) {
            assert_int_equal(jev_cpu_ops.set_precision(be, JEV_PRECISION_FAST, &err), JEV_OK);
            jev_cpu_ops.matmul(be, &a.m, x, n, fast);
            if (n < JEV_CPU_GEMM_MIN_N) {
                assert_memory_equal(want, fast, (size_t)len * sizeof(float));
            } else {
                assert_true(memcmp(want, fast, (size_t)len * sizeof(float)) != 0); /* fast mode did run */
                jev_cpu_matmul_bf16(be, &a.m, x, n, got);
                assert_memory_equal(got, fast, (size_t)len * sizeof(float));
            }
            assert_int_equal(jev_cpu_ops.set_precision(be, JEV_PRECISION_EXACT, &err), JEV_OK);
            jev_cpu_ops.matmul(be, &a.m, x, n, got);
            assert_memory_equal(want, got, (size_t)len * sizeof(float));
        }
        free(x), free(want), free(got), free(fast);
    }
    mat_free(&a);
    jev_cpu_backend_free(be);
    jev_pool_free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choose),
        cmocka_unit_test(test_hw_matches_cpuinfo),
        cmocka_unit_test(test_cap_through_the_table),
        cmocka_unit_test(test_product),
        cmocka_unit_test(test_rows_independent),
        cmocka_unit_test(test_exact_unchanged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
