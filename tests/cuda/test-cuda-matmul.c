/*
 * test-cuda-matmul.c - CUDA matrix products and the dequantizing upload against the CPU backend.
 *
 * - matrix_mirror (jev_cuda_dequantize_upload): the device f32 rows, downloaded, must equal the
 *   CPU's dequantized rows bit for bit (jev_cpu_ops.embed over every row id) for f32, bf16, f16
 *   and MLX affine matrices of every bit width (2, 3, 4, 5, 6, 8) with f32, bf16 and f16 scales,
 *   odd shapes included; an affine matrix of an unsupported width fails with
 *   JEV_ERR_UNSUPPORTED naming the matrix.
 * - matmul: ct_ops->matmul on the mirror against jev_cpu_ops.matmul on the host matrix,
 *   token counts 1 (sgemv), 2, 7, 33, 300 (sgemm), NMSE <= 1e-7.
 * - matmul_rows: scattered, repeated and unsorted row ids, both regimes (few tokens: rows read in
 *   place; more: gathered), and 40000 candidate rows so that the gathered rows take several
 *   scratch chunks.
 *
 * Matrices are built as tests/test-ops.c's mat_make does: deterministic values, affine codes
 * written into the little-endian bit stream, scales and biases rounded to their stype.
 */
#include "cuda-test.h"        // defines: ct_setup, ct_mirror, ct_up, ct_check, jev_cpu_ops, ct_ops
#include "../test-matrices.h" // defines: struct mat, mat_make, mat_free

#include "base/half.h" // defines: jev_f32_to_bf16, jev_f32_to_f16

/* ---- host matrices (tests/test-matrices.h) ---- */

static const struct mcase mcases[] = {
    MAT_CASES,
    {"q4 g64 bf16 (LM-sized)", JEV_MTYPE_QAFFINE, 3584, 1024, 4, 64, JEV_STYPE_BF16},
};

static const int64_t ntoks[] = {1, 2, 7, 33, 300};

/* Downloads a device result, prints its NMSE against ref and checks it. */
static void check_dev(const char *what, const float *ref, const float *dev, int64_t n) {
    float *got = ct_down(dev, n);
    printf("  %-64s NMSE %.3g\n", what, mat_nmse(ref, got, n));
    ct_check(what, ref, got, n, CT_NMSE_F32);
    free(got);
}

/* ---- the mirror: exact dequantization ---- */

/* The mirror of one case, downloaded, equals the CPU's dequantized rows bit for bit. */
static void mirror_exact(const struct mcase *mc, int64_t seed) {
    struct mat a = mat_make(mc->type, mc->rows, mc->cols, mc->bits, mc->group, mc->stype, seed);
    struct jev_matrix m = ct_mirror(&a.m);
    assert_int_equal(m.type, JEV_MTYPE_F32);
    assert_int_equal(m.rows, mc->rows);
    assert_int_equal(m.cols, mc->cols);
    int64_t n = (int64_t)mc->rows * mc->cols;
    int32_t *ids = malloc((size_t)mc->rows * sizeof(int32_t));
    assert_non_null(ids);
    for (int32_t r = 0; r < mc->rows; r++)
        ids[r] = r;
    float *ref = ct_host(n);
    jev_cpu_ops.embed(ct_cpu, &a.m, ids, mc->rows, ref);
    float *got = ct_down(m.data, n);
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&ref[i], &got[i], sizeof(float)) != 0)
            fail_msg("mirror %s: row %lld col %lld is %.9g on CUDA, %.9g on CPU", mc->name, (long long)(i / mc->cols),
                     (long long)(i % mc->cols), (double)got[i], (double)ref[i]);
    printf("  mirror %-57s exact\n", mc->name);
    free(ref);
    free(got);
    free(ids);
    ct_ops->matrix_release(ct_gpu, &m);
    mat_free(&a);
}

static void test_mirror_exact(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof mcases / sizeof mcases[0]; c++)
        mirror_exact(&mcases[c], (int64_t)c);
    /* above the upload's 256 MiB chunk (the hf layout's bf16 embedding is 508 MB): later chunks too */
    const struct mcase big = {
        "bf16 140000 x 1024 (two upload chunks)", JEV_MTYPE_BF16, 140000, 1024, 0, 0, JEV_STYPE_F32};
    mirror_exact(&big, 99);
}

static void test_mirror_unsupported(void **state) {
    (void)state;
    struct mat a = mat_make(JEV_MTYPE_QAFFINE, 4, 64, 4, 32, JEV_STYPE_BF16, 1);
    a.m.bits = 7; /* no such MLX width */
    a.m.name = "blk.0.bad.weight";
    struct jev_matrix m;
    struct jev_error err = {0};
    enum jev_status st = ct_ops->matrix_mirror(ct_gpu, &a.m, &m, &err);
    assert_int_equal(st, JEV_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "blk.0.bad.weight"));
    mat_free(&a);
}

/* ---- products ---- */

static void test_matmul(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof mcases / sizeof mcases[0]; c++) {
        const struct mcase *mc = &mcases[c];
        struct mat a = mat_make(mc->type, mc->rows, mc->cols, mc->bits, mc->group, mc->stype, (int64_t)c);
        struct jev_matrix m = ct_mirror(&a.m);
        for (size_t t = 0; t < sizeof ntoks / sizeof ntoks[0]; t++) {
            int64_t n = ntoks[t];
            float *x = ct_host(n * mc->cols), *yr = ct_host(n * mc->rows);
            ct_fill(x, n * mc->cols, 100 + (int64_t)t, 1.0f);
            jev_cpu_ops.matmul(ct_cpu, &a.m, x, n, yr);
            float *dx = ct_up(x, n * mc->cols), *dy = ct_up(NULL, n * mc->rows);
            ct_ops->matmul(ct_gpu, &m, dx, n, dy);
            char what[128];
            snprintf(what, sizeof what, "matmul %s rows %d cols %d n %lld", mc->name, mc->rows, mc->cols, (long long)n);
            check_dev(what, yr, dy, n * mc->rows);
            ct_free(dx);
            ct_free(dy);
            free(x);
            free(yr);
        }
        ct_ops->matrix_release(ct_gpu, &m);
        mat_free(&a);
    }
}

/* matmul_rows of n_ids candidate rows: unsorted, with repeats (id k = (k * 7 + 3) mod rows, the last row twice). */
static void rows_case(const char *name, const struct mat *a, const struct jev_matrix *m, int32_t n_ids, int64_t n) {
    int32_t rows = a->m.rows, cols = a->m.cols;
    int32_t *ids = malloc((size_t)n_ids * sizeof(int32_t));
    assert_non_null(ids);
    for (int32_t k = 0; k < n_ids; k++)
        ids[k] = (int32_t)(((int64_t)k * 7 + 3) % rows);
    ids[0] = rows - 1;
    if (n_ids > 2)
        ids[n_ids - 1] = rows - 1;
    float *x = ct_host(n * cols), *yr = ct_host(n * n_ids);
    ct_fill(x, n * cols, 200 + n, 1.0f);
    jev_cpu_ops.matmul_rows(ct_cpu, &a->m, ids, n_ids, x, n, yr);
    float *dx = ct_up(x, n * cols), *dy = ct_up(NULL, n * n_ids);
    ct_ops->matmul_rows(ct_gpu, m, ids, n_ids, dx, n, dy);
    char what[128];
    snprintf(what, sizeof what, "matmul_rows %s ids %d n %lld", name, n_ids, (long long)n);
    check_dev(what, yr, dy, n * n_ids);
    ct_free(dx);
    ct_free(dy);
    free(x);
    free(yr);
    free(ids);
}

static void test_matmul_rows(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof mcases / sizeof mcases[0]; c++) {
        const struct mcase *mc = &mcases[c];
        struct mat a = mat_make(mc->type, mc->rows, mc->cols, mc->bits, mc->group, mc->stype, (int64_t)c);
        struct jev_matrix m = ct_mirror(&a.m);
        for (size_t t = 0; t < sizeof ntoks / sizeof ntoks[0]; t++) {
            rows_case(mc->name, &a, &m, 1, ntoks[t]);
            rows_case(mc->name, &a, &m, 11, ntoks[t]);
        }
        rows_case(mc->name, &a, &m, 5, 4); /* the last token count read in place */
        rows_case(mc->name, &a, &m, 5, 5); /* the first gathered */
        ct_ops->matrix_release(ct_gpu, &m);
        mat_free(&a);
    }
}

/* 40000 candidates of 1024 columns: 160 MB of gathered rows, several scratch chunks. */
static void test_matmul_rows_many(void **state) {
    (void)state;
    struct mat a = mat_make(JEV_MTYPE_QAFFINE, 300, 1024, 4, 64, JEV_STYPE_BF16, 9);
    struct jev_matrix m = ct_mirror(&a.m);
    rows_case("q4 300x1024", &a, &m, 40000, 2);
    rows_case("q4 300x1024", &a, &m, 40000, 9);
    ct_ops->matrix_release(ct_gpu, &m);
    mat_free(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mirror_exact), cmocka_unit_test(test_mirror_unsupported), cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_rows),  cmocka_unit_test(test_matmul_rows_many),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
