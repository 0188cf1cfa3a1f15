/*
 * test-cuda-emul.c - what of the CUDA backend's weight handling a CPU can check (CI has no GPU; the
 * kernels themselves run in tests/cuda/ on the GPU machine).
 *
 * - jev_cuda_wget (src/backend/cuda/cuda-weights-int.h), the one function every CUDA kernel reads a
 *   stored weight with (embed, vision_pos_add, matmul_rows, matmul's dequantization into its
 *   scratch), compiled here for the host: every element of every matrix type, affine width (2, 3, 4,
 *   5, 6, 8), group (4, 32, 64, 128) and scale type (f32, bf16, f16) equals backend/matrix.c's
 *   jev_matrix_get bit for bit.
 * - matmul's row chunks (jev_cuda_chunk_rows): a sequential emulation of the exact product as
 *   cuda-matmul.cu runs it, chunk by chunk through a scratch of a given size (one chunk, several,
 *   a last partial one, one row each) writing each chunk's columns of y at its offset with the full
 *   row stride: bit-identical to the unchunked product, every output written once; no scratch (or
 *   one smaller than a row) is 0 rows, which the launcher reports instead of dividing by it.
 * - fast mode's bound (tests/bf16-ref.h): f32 sums of the bf16 products in several orders, rounded to
 *   nearest and truncated (what tensor cores may do), all within the bound of the double reference;
 *   and a wrong product (the neighbouring row's) falls outside it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda-weights-int.h" // defines: jev_cuda_wget, jev_cuda_chunk_rows (host build)
#include "bf16-ref.h"                      // defines: bf16_gemm_ref, bf16_round
#include "test-matrices.h"                 // defines: mat_make, MAT_CASES, mat_det

static const struct mcase extra_cases[] = {
    MAT_CASES,
    {"q4 g64 bf16 (LM-sized)", JEV_MTYPE_QAFFINE, 96, 1024, 4, 64, JEV_STYPE_BF16},
};

/* Every element of a through jev_cuda_wget equals jev_matrix_get, bit for bit. */
static void wget_case(const char *name, const struct mat *a) {
    for (int64_t r = 0; r < a->m.rows; r++)
        for (int64_t c = 0; c < a->m.cols; c++) {
            float want = jev_matrix_get(&a->m, r, c), got = jev_cuda_wget(&a->m, r, c);
            if (memcmp(&want, &got, sizeof want) != 0)
                fail_msg("%s: [%lld][%lld] is %.9g through jev_cuda_wget, %.9g through jev_matrix_get", name,
                         (long long)r, (long long)c, (double)got, (double)want);
        }
}

static void test_wget_equals_matrix_get(void **state) {
    (void)state;
    int n = 0;
    for (size_t i = 0; i < sizeof extra_cases / sizeof extra_cases[0]; i++, n++) {
        const struct mcase *mc = &extra_cases[i];
        struct mat a = mat_make(mc->type, mc->rows, mc->cols, mc->bits, mc->group, mc->stype, (int64_t)i);
        wget_case(mc->name, &a);
        mat_free(&a);
    }
    /* every width, group and scale type the loader can hand over, on an odd number of rows */
    static const int bits[] = {2, 3, 4, 5, 6, 8}, groups[] = {4, 32, 64, 128};
    static const enum jev_stype stypes[] = {JEV_STYPE_F32, JEV_STYPE_BF16, JEV_STYPE_F16};
    for (size_t b = 0; b < 6; b++)
        for (size_t g = 0; g < 4; g++)
            for (size_t s = 0; s < 3; s++, n++) {
                struct mat a = mat_make(JEV_MTYPE_QAFFINE, 7, 256, bits[b], groups[g], stypes[s], (int64_t)n);
                char name[64];
                snprintf(name, sizeof name, "q%d g%d stype %d", bits[b], groups[g], (int)stypes[s]);
                wget_case(name, &a);
                mat_free(&a);
            }
    assert_true(n > 80);
}

/* ---- matmul's chunks ---- */

/* y[t][r] = sum_c x[t][c] * w[r][c] over f32 rows, in index order (the emulation's "sgemm"). */
static void rows_product(const float *w, int64_t nr, int64_t cols, const float *x, int64_t n, float *y, int64_t ldy) {
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < nr; r++) {
            float s = 0.0f;
            for (int64_t c = 0; c < cols; c++)
                s += x[t * cols + c] * w[r * cols + c];
            y[t * ldy + r] = s;
        }
}

/* cuda-matmul.cu's exact loop on the host: dequantize a chunk of rows into the scratch through
 * jev_cuda_wget, multiply it into columns [r0, r0 + nr) of y (row stride: all rows). */
static void chunked_matmul(const struct jev_matrix *w, size_t scratch_bytes, const float *x, int64_t n, float *y,
                           int *writes) {
    int64_t chunk = jev_cuda_chunk_rows(scratch_bytes, sizeof(float), w->rows, w->cols);
    assert_true(chunk > 0);
    float *dq = malloc(scratch_bytes);
    assert_non_null(dq);
    for (int64_t r0 = 0; r0 < w->rows; r0 += chunk) {
        int64_t nr = w->rows - r0 < chunk ? w->rows - r0 : chunk;
        assert_true((size_t)(nr * w->cols) * sizeof(float) <= scratch_bytes);
        for (int64_t i = 0; i < nr * w->cols; i++)
            dq[i] = jev_cuda_wget(w, r0 + i / w->cols, i % w->cols);
        rows_product(dq, nr, w->cols, x, n, y + r0, w->rows);
        for (int64_t t = 0; t < n; t++)
            for (int64_t r = 0; r < nr; r++)
                writes[t * w->rows + r0 + r]++;
    }
    free(dq);
}

static void test_chunks(void **state) {
    (void)state;
    const int64_t rows = 37, cols = 128, n = 3;
    struct mat a = mat_make(JEV_MTYPE_QAFFINE, (int32_t)rows, (int32_t)cols, 4, 64, JEV_STYPE_BF16, 5);
    float *x = malloc((size_t)(n * cols) * sizeof(float)), *w = malloc((size_t)(rows * cols) * sizeof(float));
    float *want = calloc((size_t)(n * rows), sizeof(float)), *got = malloc((size_t)(n * rows) * sizeof(float));
    int *writes = malloc((size_t)(n * rows) * sizeof(int));
    assert_true(x && w && want && got && writes);
    for (int64_t i = 0; i < n * cols; i++)
        x[i] = mat_det(i * 3 + 1);
    for (int64_t r = 0; r < rows; r++)
        jev_matrix_row(&a.m, r, w + r * cols);
    rows_product(w, rows, cols, x, n, want, rows);
    const size_t row = (size_t)cols * sizeof(float);
    /* the whole matrix; 5 rows (a partial last chunk); 37 = one chunk exactly; 1 row; one row plus a bit */
    const size_t sizes[] = {(size_t)rows * row, 5 * row, 37 * row, row, row + 100, 1 << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        memset(got, 0xff, (size_t)(n * rows) * sizeof(float)); /* NaN: an unwritten output shows */
        memset(writes, 0, (size_t)(n * rows) * sizeof(int));
        chunked_matmul(&a.m, sizes[s], x, n, got, writes);
        for (int64_t i = 0; i < n * rows; i++) {
            if (writes[i] != 1)
                fail_msg("scratch %zu bytes: output %lld written %d times", sizes[s], (long long)i, writes[i]);
            if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
                fail_msg("scratch %zu bytes: output %lld is %.9g chunked, %.9g whole", sizes[s], (long long)i,
                         (double)got[i], (double)want[i]);
        }
    }
    /* no scratch, or less than one row: 0 rows (the launcher records an error instead of looping) */
    assert_int_equal(jev_cuda_chunk_rows(0, sizeof(float), rows, cols), 0);
    assert_int_equal(jev_cuda_chunk_rows(row - 1, sizeof(float), rows, cols), 0);
    assert_int_equal(jev_cuda_chunk_rows(row, sizeof(uint16_t), rows, cols), 2); /* bf16 rows: twice as many */
    assert_int_equal(jev_cuda_chunk_rows((size_t)64 << 20, sizeof(float), 248320, 1024), 16384);
    free(x), free(w), free(want), free(got), free(writes);
    mat_free(&a);
}

/* ---- fast mode's bound ---- */

/* sum of p[0..k) in f32 in one of three orders: forward, backward, pairwise blocks of 8. */
static float f32_sum(const float *p, int64_t k, int order) {
    float s = 0.0f;
    if (order == 0) {
        for (int64_t i = 0; i < k; i++)
            s += p[i];
    } else if (order == 1) {
        for (int64_t i = k - 1; i >= 0; i--)
            s += p[i];
    } else {
        for (int64_t b = 0; b < k; b += 8) {
            float part = 0.0f;
            for (int64_t i = b; i < b + 8 && i < k; i++)
                part += p[i];
            s += part;
        }
    }
    return s;
}

static void test_bf16_bound(void **state) {
    (void)state;
    static const struct mcase cases[] = {
        {"q4 g64 bf16 3584 cols", JEV_MTYPE_QAFFINE, 9, 3584, 4, 64, JEV_STYPE_BF16},
        {"bf16 odd", JEV_MTYPE_BF16, 13, 51, 0, 0, JEV_STYPE_F32},
        {"f32", JEV_MTYPE_F32, 17, 1024, 0, 0, JEV_STYPE_F32},
    };
    const int64_t n = 2;
    int caught = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const struct mcase *mc = &cases[ci];
        struct mat a = mat_make(mc->type, mc->rows, mc->cols, mc->bits, mc->group, mc->stype, (int64_t)ci);
        const int64_t rows = mc->rows, cols = mc->cols;
        float *x = malloc((size_t)(n * cols) * sizeof(float)), *w = malloc((size_t)cols * sizeof(float));
        float *p = malloc((size_t)cols * sizeof(float));
        double *yref = malloc((size_t)(n * rows) * sizeof(double)),
               *bound = malloc((size_t)(n * rows) * sizeof(double));
        assert_true(x && w && p && yref && bound);
        for (int64_t i = 0; i < n * cols; i++)
            x[i] = mat_det(i * 5 + 2) * 3.0f;
        bf16_gemm_ref(&a.m, x, n, yref, bound);
        for (int64_t r = 0; r < rows; r++) {
            jev_matrix_row(&a.m, r, w);
            for (int64_t t = 0; t < n; t++) {
                for (int64_t c = 0; c < cols; c++)
                    p[c] = bf16_round(x[t * cols + c]) * bf16_round(w[c]); /* exact in f32 */
                for (int mode = 0; mode < 2; mode++) {
                    fesetround(mode ? FE_TOWARDZERO : FE_TONEAREST);
                    for (int order = 0; order < 3; order++) {
                        double y = (double)f32_sum(p, cols, order);
                        double e = fabs(y - yref[t * rows + r]);
                        if (!(e <= bound[t * rows + r])) {
                            fesetround(FE_TONEAREST);
                            fail_msg("%s [%lld][%lld] order %d%s: |%.9g - %.9g| = %.3g above the bound %.3g", mc->name,
                                     (long long)t, (long long)r, order, mode ? " truncated" : "", y, yref[t * rows + r],
                                     e, bound[t * rows + r]);
                        }
                    }
                    fesetround(FE_TONEAREST);
                }
                /* the product of the next row instead (a wrong row, not a rounding): outside the bound */
                double wrong = yref[t * rows + (r + 1) % rows];
                caught += fabs(wrong - yref[t * rows + r]) > bound[t * rows + r];
            }
        }
        free(x), free(w), free(p), free(yref), free(bound);
        mat_free(&a);
    }
    const int total = (int)(n * (9 + 13 + 17));
    printf("  a neighbouring row's product caught by the bound: %d of %d\n", caught, total);
    assert_true(caught >= total * 9 / 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wget_equals_matrix_get),
        cmocka_unit_test(test_chunks),
        cmocka_unit_test(test_bf16_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
