/*
 * test-cuda-fast.c - the CUDA backend's fast precision mode (include/jev.h, JEV_PRECISION_FAST)
 * against its CPU reference, and switching modes.
 *
 * - jev_cuda_to_bf16 (fast mode's activations): bit for bit base/half.h's jev_f32_to_bf16 (round to
 *   nearest even, NaN kept a NaN) on ties, signed zeros, subnormals, infinities, NaN, the largest
 *   values and a million ordinary ones.
 * - matmul in fast mode (a bf16 tensor-core GEMM with f32 accumulation, cublasGemmEx) for every
 *   matrix type and token count of the exact tests, a matrix over the scratch (two chunks) and the
 *   LM head's shape class: every output within tests/bf16-ref.h's bound of the reference that takes
 *   the same bf16 inputs and sums in double (the bound is derived there, and checked on the CPU by
 *   tests/test-cuda-emul.c). The NMSE against the exact CPU product is printed: fast's own cost.
 *   At most JEV_CUDA_DIRECT_MAX_N tokens over a non-f32 matrix read it in place in f32 in both modes
 *   (decode is memory-bound: bf16 buys nothing there): within the exact product's NMSE instead.
 * - modes: set_precision switches between forwards and leaves no trace (exact products before and
 *   after a fast phase bit-identical); matmul_rows (the candidates' scores) and embed are f32 in
 *   both modes, bit-identical; a value outside the enum is refused.
 */
#include "cuda-test.h"        // defines: ct_setup, ct_mirror, ct_up, ct_down, ct_check, jev_cpu_ops, ct_ops
#include "../bf16-ref.h"      // defines: bf16_gemm_ref, bf16_round
#include "../test-matrices.h" // defines: struct mat, mat_make, mat_free, MAT_CASES

#include "backend/cuda/cuda-weights-int.h" // defines: jev_cuda_to_bf16, JEV_CUDA_DIRECT_MAX_N
#include "base/half.h"                     // defines: jev_f32_to_bf16

static const struct mcase mcases[] = {
    MAT_CASES,
    {"q4 g64 bf16 (LM-sized)", JEV_MTYPE_QAFFINE, 3584, 1024, 4, 64, JEV_STYPE_BF16},
};

static const int64_t ntoks[] = {1, 2, 7, 33, 300};

static void set_mode(enum jev_precision p) {
    struct jev_error err = {0};
    if (ct_ops->set_precision(ct_gpu, p, &err) != JEV_OK)
        fail_msg("set_precision %s: %s", jev_precision_name(p), err.msg);
}

/* ---- activations to bf16 ---- */

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_to_bf16(void **state) {
    (void)state;
    const uint32_t special[] = {
        0x3f808000u,              /* 1 + 2^-8: a tie, to even (1.0) */
        0x3f818000u,              /* 1 + 3 * 2^-8: a tie, to even (up) */
        0x3f808001u,              /* just above a tie: up */
        0x00000000u, 0x80000000u, /* signed zeros */
        0x00000001u, 0x807fffffu, /* subnormals */
        0x7f7fffffu, 0xff7fffffu, /* the largest finite: round to infinity */
        0x7f800000u, 0xff800000u, /* infinities */
        0x7fc00000u, 0x7f800001u, /* a quiet and a signalling NaN: NaN either way */
    };
    const int64_t n_special = (int64_t)(sizeof special / sizeof special[0]), n = n_special + 1000000;
    float *x = ct_host(n);
    for (int64_t i = 0; i < n_special; i++)
        x[i] = from_bits(special[i]);
    ct_fill(x + n_special, n - n_special, 7, 3.0f);
    float *dx = ct_up(x, n);
    uint16_t *dh = ct_ops->alloc(ct_gpu, (size_t)n * sizeof(uint16_t));
    assert_non_null(dh);
    jev_cuda_to_bf16(ct_gpu, dx, n, dh);
    uint16_t *h = malloc((size_t)n * sizeof(uint16_t));
    assert_non_null(h);
    ct_ops->download(ct_gpu, h, dh, (size_t)n * sizeof(uint16_t));
    ct_status_ok("to_bf16");
    for (int64_t i = 0; i < n; i++)
        if (h[i] != jev_f32_to_bf16(x[i])) {
            uint32_t u;
            memcpy(&u, &x[i], sizeof u);
            fail_msg("to_bf16 of 0x%08x: 0x%04x on CUDA, 0x%04x on CPU", (unsigned)u, h[i], jev_f32_to_bf16(x[i]));
        }
    printf("  to_bf16: %lld values bit-identical to jev_f32_to_bf16\n", (long long)n);
    ct_free(dx);
    ct_free(dh);
    free(x);
    free(h);
}

/* ---- the fast product ---- */

/* Fast matmul of one case against the bf16 reference's bound; returns the worst |err| / bound. */
static double fast_case(const char *name, const struct mat *a, int64_t n) {
    const int64_t rows = a->m.rows, cols = a->m.cols;
    int64_t len = n * rows;
    struct jev_matrix m = ct_mirror(&a->m);
    float *x = ct_host(n * cols), *exact = ct_host(len);
    ct_fill(x, n * cols, 100 + n, 1.0f);
    double *yref = malloc((size_t)len * sizeof(double)), *bound = malloc((size_t)len * sizeof(double));
    assert_true(yref && bound);
    bf16_gemm_ref(&a->m, x, n, yref, bound);
    jev_cpu_ops.matmul(ct_cpu, &a->m, x, n, exact);
    float *dx = ct_up(x, n * cols), *dy = ct_up(NULL, len);
    set_mode(JEV_PRECISION_FAST);
    ct_ops->matmul(ct_gpu, &m, dx, n, dy);
    set_mode(JEV_PRECISION_EXACT);
    float *y = ct_down(dy, len);
    double worst = 0.0;
    /* a few tokens over a non-f32 matrix read it in place in f32, in both modes (cuda-matmul.cu):
     * then the exact product's tolerance applies, not the bf16 bound */
    bool in_place = n <= JEV_CUDA_DIRECT_MAX_N && a->m.type != JEV_MTYPE_F32;
    if (in_place) {
        ct_check(name, exact, y, len, CT_NMSE_F32);
        printf("  fast %-40s n %4lld: read in place in f32, NMSE against exact %.3g\n", name, (long long)n,
               mat_nmse(exact, y, len));
        len = 0; /* the bound check below has nothing left to do */
    }
    for (int64_t i = 0; i < len; i++) {
        double e = fabs((double)y[i] - yref[i]);
        if (!isfinite(y[i]) || !(e <= bound[i] + 1e-30))
            fail_msg("fast matmul %s n %lld: y[%lld][%lld] = %.9g, reference %.9g: |error| %.3g above the bound %.3g",
                     name, (long long)n, (long long)(i / rows), (long long)(i % rows), (double)y[i], yref[i], e,
                     bound[i]);
        if (bound[i] > 0)
            worst = fmax(worst, e / bound[i]);
    }
    if (!in_place)
        printf("  fast %-40s n %4lld: worst error %.2f of the bound, NMSE against exact %.3g\n", name, (long long)n,
               worst, mat_nmse(exact, y, len));
    ct_free(dx), ct_free(dy);
    free(x), free(exact), free(y), free(yref), free(bound);
    ct_ops->matrix_release(ct_gpu, &m);
    return worst;
}

static void test_matmul_fast(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof mcases / sizeof mcases[0]; c++) {
        const struct mcase *mc = &mcases[c];
        struct mat a = mat_make(mc->type, mc->rows, mc->cols, mc->bits, mc->group, mc->stype, (int64_t)c);
        for (size_t t = 0; t < sizeof ntoks / sizeof ntoks[0]; t++)
            fast_case(mc->name, &a, ntoks[t]);
        mat_free(&a);
    }
    /* above the scratch as bf16 too (2 x 64 MiB): 70000 x 1024 4-bit, 143 MB of bf16 rows, three chunks */
    struct mat big = mat_make(JEV_MTYPE_QAFFINE, 70000, 1024, 4, 64, JEV_STYPE_BF16, 78);
    fast_case("q4 70000 x 1024 (three chunks)", &big, 1);
    fast_case("q4 70000 x 1024 (three chunks)", &big, 16);
    mat_free(&big);
}

/* ---- modes ---- */

/* Exact before and after a fast phase: the same bits; matmul_rows and embed identical in both modes. */
static void test_modes(void **state) {
    (void)state;
    struct mat a = mat_make(JEV_MTYPE_QAFFINE, 300, 1024, 4, 64, JEV_STYPE_BF16, 9);
    struct jev_matrix m = ct_mirror(&a.m);
    const int64_t n = 7, cols = 1024, rows = 300;
    float *x = ct_host(n * cols);
    ct_fill(x, n * cols, 11, 1.0f);
    float *dx = ct_up(x, n * cols), *dy = ct_up(NULL, n * rows);
    ct_ops->matmul(ct_gpu, &m, dx, n, dy);
    float *before = ct_down(dy, n * rows);
    set_mode(JEV_PRECISION_FAST);
    ct_ops->matmul(ct_gpu, &m, dx, n, dy);
    float *fast = ct_down(dy, n * rows);
    assert_true(memcmp(before, fast, (size_t)(n * rows) * sizeof(float)) != 0); /* fast really ran */
    /* the candidates' scores stay f32: matmul_rows in fast mode equals exact's, both regimes */
    const int32_t ids[5] = {299, 3, 3, 150, 0};
    for (int64_t nt = 2; nt <= 7; nt += 5) {
        float *dr = ct_up(NULL, nt * 5);
        ct_ops->matmul_rows(ct_gpu, &m, ids, 5, dx, nt, dr);
        float *rf = ct_down(dr, nt * 5);
        set_mode(JEV_PRECISION_EXACT);
        ct_ops->matmul_rows(ct_gpu, &m, ids, 5, dx, nt, dr);
        float *re = ct_down(dr, nt * 5);
        set_mode(JEV_PRECISION_FAST);
        assert_memory_equal(rf, re, (size_t)(nt * 5) * sizeof(float));
        free(rf), free(re);
        ct_free(dr);
    }
    float *de = ct_up(NULL, 5 * cols);
    ct_ops->embed(ct_gpu, &m, ids, 5, de);
    float *ef = ct_down(de, 5 * cols), *ec = ct_host(5 * cols);
    jev_cpu_ops.embed(ct_cpu, &a.m, ids, 5, ec);
    assert_memory_equal(ef, ec, (size_t)(5 * cols) * sizeof(float));
    set_mode(JEV_PRECISION_EXACT);
    ct_ops->matmul(ct_gpu, &m, dx, n, dy);
    float *after = ct_down(dy, n * rows);
    assert_memory_equal(before, after, (size_t)(n * rows) * sizeof(float));
    /* a value outside the enum: refused, the mode unchanged */
    struct jev_error err = {0};
    assert_int_equal(ct_ops->set_precision(ct_gpu, (enum jev_precision)9, &err), JEV_ERR_INVALID_ARG);
    ct_ops->matmul(ct_gpu, &m, dx, n, dy);
    float *still = ct_down(dy, n * rows);
    assert_memory_equal(before, still, (size_t)(n * rows) * sizeof(float));
    free(x), free(before), free(fast), free(after), free(still), free(ef), free(ec);
    ct_free(dx), ct_free(dy), ct_free(de);
    ct_ops->matrix_release(ct_gpu, &m);
    mat_free(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_to_bf16),
        cmocka_unit_test(test_matmul_fast),
        cmocka_unit_test(test_modes),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
