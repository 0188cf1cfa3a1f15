/*
 * test-ops.c - op parity: every op of the CPU table against its reference.
 *
 * - matmul / matmul_rows / embed: the table's fast kernels (cpu-matmul.c:
 *   AVX2 or, on aarch64, NEON fused kernels, OpenBLAS sgemm tiles) against the scalar reference
 *   (cpu-dense.c), for f32, bf16, f16, 4-bit and 8-bit affine (bf16 and f32
 *   scales), 3-bit and odd shapes (generic path), token counts on both
 *   sides of the sgemm threshold; the opt-in AVX-512 kernel (cpu-gemm-avx512.c) the same way, and
 *   its outputs the same bits for a token alone and in company.
 * - attention and the delta rule: cpu-lm-fast.c against cpu-lm.c's scalar
 *   forms (attention: also each query row alone bit for bit as among its run's rows), several runs with K/V spans of
 * uneven sizes, GQA, grouped value heads, chunked and recurrent runs, outputs and updated states.
 * - GELU (both forms) and SwiGLU: against the formulas in double, element by
 *   element (max relative error 1e-6), including the lane tail and extremes;
 *   the pool's row split gives the same bits as one thread.
 * - the causal conv: fast and reference against each other and against the
 *   formula in double; the ops that have one implementation (copy, q/gate
 *   split, rope, sigmoid gate, gates, gated RMSNorm): against the formula
 *   evaluated here in double precision.
 *
 * Data are deterministic: 0.1 + 2*cos(i) (scaled per use). The measure is
 * NMSE = sum((a-b)^2) / sum(a^2). Limits: 1e-7 for f32 paths. Quantized
 * matrices get the same 1e-7: both sides dequantize to bit-identical f32
 * weights (tested exactly via embed), so only the summation order differs,
 * as for f32. Each failure prints the op and its parameters.
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

#include "backend/cpu/cpu-simd.h" // defines: _mm_getcsr (the compiler's, or SIMDe's on aarch64)
#include "backend/cpu/cpu.h"      // defines: jev_cpu_* reference ops, jev_cpu_ops
#include "base/half.h"            // defines: jev_f32_to_bf16, jev_f32_to_f16
#include "test-matrices.h"        // defines: struct mat, mat_make, mat_free

#define NMSE_F32 1e-7

static struct jev_pool *g_pool;
static struct jev_backend *g_be;

static int setup(void **state) {
    (void)state;
    struct jev_error err = {0};
    if (jev_pool_init(&g_pool, 2, &err) != JEV_OK)
        return -1;
    g_be = jev_cpu_backend_new(g_pool);
    return g_be ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    jev_cpu_backend_free(g_be);
    jev_pool_free(g_pool);
    return 0;
}

static float det(int64_t i) { return 0.1f + 2.0f * (float)cos((double)i); }

static void fill(float *x, int64_t n, int64_t seed, float scale) {
    for (int64_t i = 0; i < n; i++)
        x[i] = det(i * 7 + seed) * scale;
}

static void check(const char *what, const float *ref, const float *got, int64_t n, double limit) {
    double e = mat_nmse(ref, got, n);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(got[i]))
            fail_msg("%s: non-finite value at %lld", what, (long long)i);
    printf("  %-60s NMSE %.3g\n", what, e);
    if (e > limit)
        fail_msg("%s: NMSE %.3g > %.3g", what, e, limit);
}

/* ---- matrices (tests/test-matrices.h) ---- */

static const struct mcase mcases[] = {
    MAT_CASES,
};

static const int64_t ntoks[] = {1, 2, 3, 5, 7, 8, 9, 33, 70};

/* The table's matmul and matmul_rows (candidate rows: unsorted, repeated) against the scalar
 * reference for n tokens of x; label names the kernel in the messages. yr, yf: room for n x rows. */
static void check_products(const struct mcase *mc, const struct mat *a, const char *label, const float *x, int64_t n,
                           float *yr, float *yf) {
    char what[128];
    jev_cpu_matmul(g_be, &a->m, x, n, yr);
    for (int64_t i = 0; i < n * mc->rows; i++)
        yf[i] = NAN; /* every element must be written */
    jev_cpu_ops.matmul(g_be, &a->m, x, n, yf);
    snprintf(what, sizeof what, "%s %s rows %d cols %d n %lld", label, mc->name, mc->rows, mc->cols, (long long)n);
    check(what, yr, yf, n * mc->rows, NMSE_F32);
    int32_t ids[5] = {mc->rows - 1, 0, 3 % mc->rows, 3 % mc->rows, mc->rows / 2};
    jev_cpu_matmul_rows(g_be, &a->m, ids, 5, x, n, yr);
    jev_cpu_ops.matmul_rows(g_be, &a->m, ids, 5, x, n, yf);
    snprintf(what, sizeof what, "%s rows %s cols %d n %lld", label, mc->name, mc->cols, (long long)n);
    check(what, yr, yf, n * 5, NMSE_F32);
}

static void test_matmul(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof mcases / sizeof mcases[0]; c++) {
        const struct mcase *mc = &mcases[c];
        struct mat a = mat_make(mc->type, mc->rows, mc->cols, mc->bits, mc->group, mc->stype, (int64_t)c);
        for (size_t t = 0; t < sizeof ntoks / sizeof ntoks[0]; t++) {
            int64_t n = ntoks[t];
            float *x = malloc((size_t)n * (size_t)mc->cols * sizeof(float));
            float *yr = malloc((size_t)n * (size_t)mc->rows * sizeof(float));
            float *yf = malloc((size_t)n * (size_t)mc->rows * sizeof(float));
            fill(x, n * mc->cols, 100 + (int64_t)t, 1.0f);
            check_products(mc, &a, "matmul", x, n, yr, yf);
            free(x);
            free(yr);
            free(yf);
        }
        /* embed: bit-identical dequantization */
        int32_t ids[3] = {mc->rows - 1, 0, 2};
        float *er = malloc(3 * (size_t)mc->cols * sizeof(float));
        float *ef = malloc(3 * (size_t)mc->cols * sizeof(float));
        jev_cpu_embed(g_be, &a.m, ids, 3, er);
        jev_cpu_ops.embed(g_be, &a.m, ids, 3, ef);
        if (memcmp(er, ef, 3 * (size_t)mc->cols * sizeof(float)) != 0)
            fail_msg("embed %s: rows differ from jev_matrix_row", mc->name);
        free(er);
        free(ef);
        mat_free(&a);
    }
}

/* Many threads over few rows (gemm_blocks): blocks of rows and tokens, with ragged last blocks,
 * against the scalar reference; shapes of a 768-wide vision layer over 16 and 12 threads, a
 * 16-row projection split by tokens alone, and a case that stays split by rows. */
static void test_matmul_blocks(void **state) {
    (void)state;
    const struct {
        const char *name;
        enum jev_mtype type;
        int32_t rows, cols, bits, group, threads;
        int64_t n;
    } cases[] = {
        {"bf16 vision-like", JEV_MTYPE_BF16, 768, 64, 0, 0, 16, 456},
        {"bf16 vision-like", JEV_MTYPE_BF16, 768, 64, 0, 0, 12, 457},
        {"f32 16 rows", JEV_MTYPE_F32, 16, 96, 0, 0, 16, 200},
        {"q4 rows only", JEV_MTYPE_QAFFINE, 256, 128, 4, 64, 16, 131},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct jev_error err = {0};
        struct jev_pool *pool = NULL;
        assert_int_equal(jev_pool_init(&pool, cases[c].threads, &err), JEV_OK);
        struct jev_backend *be = jev_cpu_backend_new(pool);
        assert_non_null(be);
        struct mat a = mat_make(cases[c].type, cases[c].rows, cases[c].cols, cases[c].bits, cases[c].group,
                                cases[c].type == JEV_MTYPE_QAFFINE ? JEV_STYPE_BF16 : JEV_STYPE_F32, (int64_t)c);
        int64_t n = cases[c].n, ny = n * cases[c].rows;
        float *x = malloc((size_t)n * (size_t)cases[c].cols * sizeof(float));
        float *yr = malloc((size_t)ny * sizeof(float)), *yf = malloc((size_t)ny * sizeof(float));
        fill(x, n * cases[c].cols, 300 + (int64_t)c, 1.0f);
        jev_cpu_matmul(be, &a.m, x, n, yr);
        for (int64_t i = 0; i < ny; i++)
            yf[i] = NAN; /* every element must be written */
        jev_cpu_ops.matmul(be, &a.m, x, n, yf);
        char what[128];
        snprintf(what, sizeof what, "matmul %s rows %d n %lld, %d threads", cases[c].name, cases[c].rows, (long long)n,
                 cases[c].threads);
        check(what, yr, yf, ny, NMSE_F32);
        free(x);
        free(yr);
        free(yf);
        mat_free(&a);
        jev_cpu_backend_free(be);
        jev_pool_free(pool);
    }
}

/* ---- attention ---- */

static void test_attention(void **state) {
    (void)state;
    /* heads: (Hq, Hkv, dh) */
    const int32_t shapes[3][3] = {{4, 2, 32}, {8, 2, 64}, {3, 3, 16}};
    for (int sh = 0; sh < 3; sh++) {
        int32_t hq = shapes[sh][0], hkv = shapes[sh][1], dh = shapes[sh][2], kv_dim = hkv * dh;
        struct jev_attn_shape s = {hq, hkv, dh, 1.0f / sqrtf((float)dh)};
        /* three runs: (n_past, n) = (0, 5), (70, 1), (33, 40); keys in spans of 17 rows */
        const int32_t past[3] = {0, 70, 33}, len[3] = {5, 1, 40};
        int64_t rows = 46;
        float *q = malloc((size_t)rows * (size_t)hq * (size_t)dh * sizeof(float));
        float *or_ = malloc((size_t)rows * (size_t)hq * (size_t)dh * sizeof(float));
        float *of = malloc((size_t)rows * (size_t)hq * (size_t)dh * sizeof(float));
        fill(q, rows * hq * dh, 5, 0.5f);
        struct jev_attn_run runs[3];
        struct jev_kv_span spans[3][8];
        float *kv[3];
        int64_t row = 0;
        for (int r = 0; r < 3; r++) {
            int32_t total = past[r] + len[r];
            kv[r] = malloc((size_t)total * 2 * (size_t)kv_dim * sizeof(float));
            fill(kv[r], (int64_t)total * 2 * kv_dim, 50 + r, 0.7f);
            int32_t ns = 0;
            for (int32_t at = 0; at < total; at += 17, ns++) {
                spans[r][ns].k = kv[r] + (size_t)at * (size_t)kv_dim;
                spans[r][ns].v = kv[r] + ((size_t)total + (size_t)at) * (size_t)kv_dim;
                spans[r][ns].n = total - at < 17 ? total - at : 17;
            }
            runs[r] = (struct jev_attn_run){row, len[r], past[r], spans[r], ns};
            row += len[r];
        }
        jev_cpu_attention(g_be, &s, q, runs, 3, or_);
        jev_cpu_ops.attention(g_be, &s, q, runs, 3, of);
        char what[96];
        snprintf(what, sizeof what, "attention Hq %d Hkv %d dh %d", hq, hkv, dh);
        check(what, or_, of, rows * hq * dh, NMSE_F32);
        /* each row alone (a one-row run after its own past) gives the bits it gave among its run's
         * rows: a task's block of rows shares key loads, never arithmetic */
        float *alone = malloc((size_t)hq * (size_t)dh * sizeof(float));
        for (int r = 0; r < 3; r++)
            for (int32_t i = 0; i < len[r]; i++) {
                struct jev_attn_run one = {0, 1, past[r] + i, runs[r].spans, runs[r].n_spans};
                jev_cpu_ops.attention(g_be, &s, q + (runs[r].row0 + i) * hq * dh, &one, 1, alone);
                if (memcmp(alone, of + (runs[r].row0 + i) * hq * dh, (size_t)(hq * dh) * sizeof(float)) != 0)
                    fail_msg("%s: run %d row %d alone differs from the same row among its run's %d", what, r, i,
                             len[r]);
            }
        free(alone);
        for (int r = 0; r < 3; r++)
            free(kv[r]);
        free(q);
        free(or_);
        free(of);
    }
}

/* ---- delta rule ---- */

static void test_gdn_rule(void **state) {
    (void)state;
    /* (hk, hv, dk, dv) */
    const int32_t shapes[3][4] = {{2, 4, 16, 16}, {2, 2, 32, 24}, {1, 3, 24, 40}};
    /* decay 0: slow forgetting; 1: fast (log decay down to -3 per token), so that e^cum falls through the
     * subnormal range inside a chunk, where the fast form flushes to zero and the reference does not */
    for (int it = 0; it < 6; it++) {
        int sh = it % 3, fast = it / 3;
        struct jev_gdn_shape s = {shapes[sh][0], shapes[sh][1], shapes[sh][2], shapes[sh][3], 64};
        int32_t conv_dim = 2 * s.hk * s.dk + s.hv * s.dv;
        /* runs: chunked 150 (3 chunks), recurrent 1, chunked 1 (fresh), recurrent 3 */
        const int32_t len[4] = {150, 1, 1, 3};
        const bool rec[4] = {false, true, false, true};
        int64_t rows = 155;
        float *u = malloc((size_t)rows * (size_t)conv_dim * sizeof(float));
        float *g = malloc((size_t)rows * (size_t)s.hv * sizeof(float));
        float *beta = malloc((size_t)rows * (size_t)s.hv * sizeof(float));
        fill(u, rows * conv_dim, 9, 1.0f);
        for (int64_t i = 0; i < rows * s.hv; i++) {
            g[i] = fast ? -1.0f - 0.5f * (det(i) + 2.0f)    /* log decay in (-3, -1) */
                        : -0.05f - 0.04f * (det(i) + 2.0f); /* log decay in (-0.25, -0.05) */
            beta[i] = 0.5f + 0.2f * det(i + 5);
        }
        int64_t ssm = (int64_t)s.hv * s.dk * s.dv;
        float *st_r = malloc(4 * (size_t)ssm * sizeof(float)), *st_f = malloc(4 * (size_t)ssm * sizeof(float));
        fill(st_r, 4 * ssm, 77, 0.1f);
        memcpy(st_f, st_r, 4 * (size_t)ssm * sizeof(float));
        struct jev_gdn_run rr[4], rf[4];
        int64_t row = 0;
        for (int r = 0; r < 4; r++) {
            rr[r] = (struct jev_gdn_run){row, len[r], rec[r], NULL, st_r + r * ssm, NULL, NULL};
            rf[r] = (struct jev_gdn_run){row, len[r], rec[r], NULL, st_f + r * ssm, NULL, NULL};
            row += len[r];
        }
        float *or_ = malloc((size_t)rows * (size_t)s.hv * (size_t)s.dv * sizeof(float));
        float *of = malloc((size_t)rows * (size_t)s.hv * (size_t)s.dv * sizeof(float));
        jev_cpu_gdn_rule(g_be, &s, u, g, beta, rr, 4, or_);
        unsigned int csr = _mm_getcsr();
        jev_cpu_ops.gdn_rule(g_be, &s, u, g, beta, rf, 4, of);
        if (_mm_getcsr() != csr) /* the fast form flushes subnormals inside its tasks only */
            fail_msg("gdn_rule left the caller's MXCSR changed: %#x -> %#x", csr, _mm_getcsr());
        char what[96];
        snprintf(what, sizeof what, "gdn_rule out hk %d hv %d dk %d dv %d%s", s.hk, s.hv, s.dk, s.dv,
                 fast ? " fast decay" : "");
        check(what, or_, of, rows * s.hv * s.dv, NMSE_F32);
        snprintf(what, sizeof what, "gdn_rule state hk %d hv %d dk %d dv %d%s", s.hk, s.hv, s.dk, s.dv,
                 fast ? " fast decay" : "");
        check(what, st_r, st_f, 4 * ssm, NMSE_F32);
        free(u);
        free(g);
        free(beta);
        free(st_r);
        free(st_f);
        free(or_);
        free(of);
    }
}

/* ---- single-implementation ops against the formula in double ---- */

static void test_pointwise_ops(void **state) {
    (void)state;
    /* split_qgate + rope + sigmoid_mul */
    int32_t n = 3, heads = 2, dh = 8, nf = 3;
    float qg[3 * 2 * 16], q[3 * 2 * 8], gate[3 * 2 * 8], cs[9], sn[9];
    fill(qg, 96, 1, 1.0f);
    for (int i = 0; i < 9; i++) {
        cs[i] = (float)cos(0.3 * i);
        sn[i] = (float)sin(0.3 * i);
    }
    jev_cpu_ops.split_qgate(g_be, qg, n, heads, dh, q, gate);
    float want_q[48];
    for (int t = 0; t < n; t++)
        for (int h = 0; h < heads; h++)
            for (int d = 0; d < dh; d++) {
                assert_true(gate[(t * heads + h) * dh + d] == qg[(t * heads + h) * 2 * dh + dh + d]);
                double x = qg[(t * heads + h) * 2 * dh + d];
                double c = d < 2 * nf ? cs[t * nf + d % nf] : 1, s = d < 2 * nf ? sn[t * nf + d % nf] : 0;
                double partner = d < nf       ? -qg[(t * heads + h) * 2 * dh + d + nf]
                                 : d < 2 * nf ? qg[(t * heads + h) * 2 * dh + d - nf]
                                              : 0;
                want_q[(t * heads + h) * dh + d] = (float)(x * c + partner * s);
            }
    jev_cpu_ops.rope(g_be, q, n, heads, dh, nf, cs, sn);
    check("rope", want_q, q, 48, 1e-12);
    float x[48], want_x[48];
    memcpy(x, q, sizeof x);
    for (int i = 0; i < 48; i++)
        want_x[i] = (float)((double)x[i] / (1.0 + exp(-(double)gate[i])));
    jev_cpu_ops.sigmoid_mul(g_be, x, gate, 48);
    check("sigmoid_mul", want_x, x, 48, 1e-12);

    /* gdn_gates */
    float a[6], b[6], alog[2] = {0.3f, 1.2f}, dtb[2] = {0.5f, 25.0f}, g[6], beta[6], wg[6], wb[6];
    fill(a, 6, 3, 2.0f);
    fill(b, 6, 4, 2.0f);
    for (int i = 0; i < 6; i++) {
        double xa = (double)a[i] + (double)dtb[i % 2];
        double sp = xa > 20 ? xa : log1p(exp(xa));
        wg[i] = (float)(-exp((double)alog[i % 2]) * sp);
        wb[i] = (float)(1.0 / (1.0 + exp(-(double)b[i])));
    }
    jev_cpu_ops.gdn_gates(g_be, a, b, alog, dtb, 3, 2, g, beta);
    check("gdn_gates g", wg, g, 6, 1e-12);
    check("gdn_gates beta", wb, beta, 6, 1e-12);

    /* gated_rmsnorm */
    float xr[32], z[32], w[16], y[32], wy[32];
    fill(xr, 32, 6, 1.0f);
    fill(z, 32, 7, 1.0f);
    fill(w, 16, 8, 0.5f);
    for (int r = 0; r < 2; r++) {
        double ss = 0;
        for (int i = 0; i < 16; i++)
            ss += (double)xr[r * 16 + i] * (double)xr[r * 16 + i];
        double inv = 1.0 / sqrt(ss / 16 + 1e-6);
        for (int i = 0; i < 16; i++) {
            double zi = z[r * 16 + i];
            wy[r * 16 + i] = (float)((double)w[i] * (double)xr[r * 16 + i] * inv * zi / (1.0 + exp(-zi)));
        }
    }
    jev_cpu_ops.gated_rmsnorm(g_be, xr, z, w, 2, 16, 1e-6f, y);
    check("gated_rmsnorm", wy, y, 32, 1e-12);
}

/*
 * Worst |got - want| / (|want| + 0.1 |x|) over n values: relative where the result is of the input's size,
 * absolute (against the input) where it cancels towards 0. f32's 1 + erf(v) and 1 + tanh(y) round to 0 for
 * v below about -5.9 whatever the implementation (torch's formula too), an absolute error of some
 * 3e-8 |v|, which the 0.1 |x| term (times the 1e-6 limit) admits.
 */
static double max_rel(const double *want, const float *got, const float *x, int64_t n) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (fabs(want[i]) + 0.1 * fabs((double)x[i]) + 1e-30);
        worst = e > worst ? e : worst;
    }
    return worst;
}

/*
 * GELU (both forms) and SwiGLU against the formulas in double, element by element, over a length that the
 * pool splits (above JEV_CPU_PAR_MIN_ELEMS) with a tail shorter than 8 lanes, values up to +-16 and the
 * extremes; then the row split itself: one thread and two give the same bits.
 */
static void test_activations(void **state) {
    (void)state;
    const int64_t n = 100003;
    float *x = malloc((size_t)n * sizeof *x), *up = malloc((size_t)n * sizeof *up), *y = malloc((size_t)n * sizeof *y);
    double *want = malloc((size_t)n * sizeof *want);
    assert_non_null(x);
    assert_non_null(up);
    assert_non_null(y);
    assert_non_null(want);
    fill(x, n, 11, 8.0f);
    fill(up, n, 12, 1.0f);
    const float extremes[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 100.0f, -100.0f, 88.0f, -88.0f, 1e-4f, -1e-4f};
    memcpy(x + n - 10, extremes, sizeof extremes);
    for (int form = 0; form < 2; form++) {
        memcpy(y, x, (size_t)n * sizeof *y);
        for (int64_t i = 0; i < n; i++) {
            double v = x[i];
            want[i] = form ? 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
                           : 0.5 * v * (1.0 + erf(v * 0.7071067811865476));
        }
        jev_cpu_ops.gelu(g_be, y, n, form == 1);
        double e = max_rel(want, y, x, n);
        printf("  %-60s max rel %.3g\n", form ? "gelu tanh form" : "gelu erf form", e);
        if (e > 1e-6)
            fail_msg("gelu %s form: max relative error %.3g > 1e-6", form ? "tanh" : "erf", e);
    }
    for (int64_t i = 0; i < n; i++)
        want[i] = (double)x[i] / (1.0 + exp(-(double)x[i])) * (double)up[i];
    jev_cpu_ops.swiglu(g_be, x, up, n, y);
    double e = max_rel(want, y, x, n);
    printf("  %-60s max rel %.3g\n", "swiglu", e);
    if (e > 1e-6)
        fail_msg("swiglu: max relative error %.3g > 1e-6", e);

    /* rmsnorm of 200 rows of 512 on one thread and on the pool: identical bits */
    float *w = malloc(512 * sizeof *w), *y1 = malloc((size_t)n * sizeof *y1);
    assert_non_null(w);
    assert_non_null(y1);
    fill(w, 512, 13, 1.0f);
    struct jev_backend *one = jev_cpu_backend_new(NULL);
    assert_non_null(one);
    jev_cpu_ops.rmsnorm(one, x, w, 195, 512, 1e-6f, y1);
    jev_cpu_ops.rmsnorm(g_be, x, w, 195, 512, 1e-6f, y);
    if (memcmp(y1, y, 195 * 512 * sizeof *y) != 0)
        fail_msg("rmsnorm: the pool's row split changed the result");
    jev_cpu_backend_free(one);
    free(w);
    free(y1);
    free(x);
    free(up);
    free(y);
    free(want);
}

static void test_gdn_conv(void **state) {
    (void)state;
    /* two runs (5 rows and 2 rows: shorter than the window) over 300 channels, K = 4 */
    int32_t C = 300, K = 4, rows = 7;
    float *mixed = malloc((size_t)rows * (size_t)C * sizeof(float));
    float *taps = malloc((size_t)C * (size_t)K * sizeof(float));
    float *u = malloc((size_t)rows * (size_t)C * sizeof(float));
    float *win = malloc(2 * (size_t)(K - 1) * (size_t)C * sizeof(float));
    float *win0 = malloc(2 * (size_t)(K - 1) * (size_t)C * sizeof(float));
    fill(mixed, rows * C, 1, 1.0f);
    fill(taps, C * K, 2, 0.4f);
    fill(win, 2 * (K - 1) * C, 3, 1.0f);
    memcpy(win0, win, 2 * (size_t)(K - 1) * (size_t)C * sizeof(float));
    struct jev_gdn_run runs[2] = {{0, 5, false, win, NULL, NULL, NULL},
                                  {5, 2, true, win + (K - 1) * C, NULL, NULL, NULL}};
    jev_cpu_ops.gdn_conv(g_be, mixed, taps, C, K, runs, 2, u);
    float *want = malloc((size_t)rows * (size_t)C * sizeof(float));
    float want_win[2 * 3 * 300];
    for (int r = 0; r < 2; r++) {
        int32_t row0 = r == 0 ? 0 : 5, n = r == 0 ? 5 : 2;
        const float *w0 = win0 + r * (K - 1) * C;
        for (int32_t c = 0; c < C; c++) {
            /* the full input stream: window rows then the run's rows */
            double in[16];
            for (int32_t k = 0; k < K - 1; k++)
                in[k] = w0[k * C + c];
            for (int32_t t = 0; t < n; t++)
                in[K - 1 + t] = mixed[(row0 + t) * C + c];
            for (int32_t t = 0; t < n; t++) {
                double acc = 0;
                for (int32_t k = 0; k < K; k++)
                    acc += (double)taps[c * K + k] * in[t + k];
                want[(row0 + t) * C + c] = (float)(acc / (1.0 + exp(-acc)));
            }
            for (int32_t k = 0; k < K - 1; k++)
                want_win[(r * (K - 1) + k) * C + c] = (float)in[n + k];
        }
    }
    check("gdn_conv out (fast vs formula)", want, u, rows * C, 1e-12);
    if (memcmp(want_win, win, sizeof want_win) != 0)
        fail_msg("gdn_conv: the updated window is not the last K-1 inputs");
    /* the scalar reference on the same input: same outputs, same window */
    float *u2 = malloc((size_t)rows * (size_t)C * sizeof(float));
    memcpy(win, win0, 2 * (size_t)(K - 1) * (size_t)C * sizeof(float));
    jev_cpu_gdn_conv(g_be, mixed, taps, C, K, runs, 2, u2);
    check("gdn_conv out (reference vs fast)", u2, u, rows * C, NMSE_F32);
    if (memcmp(want_win, win, sizeof want_win) != 0)
        fail_msg("gdn_conv reference: the updated window is not the last K-1 inputs");
    free(u2);
    free(mixed);
    free(taps);
    free(u);
    free(win);
    free(win0);
    free(want);
}

/* ---- the opt-in AVX-512 product kernel (cpu-gemm-avx512.c) ---- */

/* y = x . W^T for n tokens through the table's matmul (rows NULL) or matmul_rows. */
static void product(struct jev_backend *be, const struct jev_matrix *m, const int32_t *rows, int32_t n_rows,
                    const float *x, int64_t n, float *y) {
    if (rows)
        jev_cpu_ops.matmul_rows(be, m, rows, n_rows, x, n, y);
    else
        jev_cpu_ops.matmul(be, m, x, n, y);
}

/* Token runs [at, at + len) of a call of `total` tokens give the same bits alone as in the call. */
static void check_company(struct jev_backend *be, const struct jev_matrix *m, const int32_t *rows, int32_t n_rows,
                          int64_t total, const int64_t (*runs)[2], int n_runs, const char *name) {
    int64_t cols = m->cols, outs = rows ? n_rows : m->rows;
    float *x = malloc((size_t)(total * cols) * sizeof(float));
    float *all = malloc((size_t)(total * outs) * sizeof(float)), *part = malloc((size_t)(total * outs) * sizeof(float));
    assert_non_null(x);
    assert_non_null(all);
    assert_non_null(part);
    fill(x, total * cols, 900, 1.0f);
    product(be, m, rows, n_rows, x, total, all);
    for (int r = 0; r < n_runs; r++) {
        int64_t at = runs[r][0], len = runs[r][1];
        product(be, m, rows, n_rows, x + at * cols, len, part);
        if (memcmp(part, all + at * outs, (size_t)(len * outs) * sizeof(float)) != 0)
            fail_msg("%s%s: tokens %lld..%lld alone differ from the same tokens among %lld", name,
                     rows ? " (candidate rows)" : "", (long long)at, (long long)(at + len - 1), (long long)total);
    }
    free(x);
    free(all);
    free(part);
}

/* Where the CPU has AVX-512 F: every matrix type through the table with the kernel chosen (the types it
 * reads run it, checked; the others take the sgemm path) against the scalar reference; a
 * token's outputs the same bits alone and in company (whole matrices and candidate rows, 1..40 tokens
 * at several places of a 77-token call); a call larger than the packing buffer (passes of tokens) on
 * one thread, against the reference and in company across the pass boundary. Everywhere: the
 * choice's default and refusals (on a CPU without AVX-512 the kernel is refused by name). */
static void test_gemm_kernel(void **state) {
    (void)state;
    struct jev_error err = {0};
    bool have = false;
#if JEV_CPU_X86
    have = __builtin_cpu_supports("avx512f");
#endif
    enum jev_cpu_gemm k = JEV_CPU_GEMM_AVX512;
    assert_int_equal(jev_cpu_gemm_choose(NULL, &k, &err), JEV_OK); /* the default: auto where it runs */
    assert_int_equal(k, have ? JEV_CPU_GEMM_AUTO : JEV_CPU_GEMM_OPENBLAS);
    assert_int_equal(jev_cpu_gemm_choose("auto", &k, &err), JEV_OK);
    assert_int_equal(k, have ? JEV_CPU_GEMM_AUTO : JEV_CPU_GEMM_OPENBLAS);
    assert_int_equal(jev_cpu_gemm_choose("openblas", &k, &err), JEV_OK);
    assert_int_equal(k, JEV_CPU_GEMM_OPENBLAS);
    assert_int_equal(jev_cpu_gemm_choose("blis", &k, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "JEV_CPU_GEMM=\"blis\""));
    jev_error_clear(&err);
    enum jev_status st = jev_cpu_gemm_choose("avx512", &k, &err);
    if (!have) {
        assert_int_equal(st, JEV_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "avx512f"));
        printf("  this CPU has no AVX-512: the kernel is refused by name, as it should be\n");
        return;
    }
    assert_int_equal(st, JEV_OK);
    assert_int_equal(k, JEV_CPU_GEMM_AVX512);
    enum jev_cpu_gemm saved = g_be->gemm;
    g_be->gemm = JEV_CPU_GEMM_AVX512;
    static const int64_t counts[] = {3, 14, 15, 33, 70};
    static const int64_t runs[][2] = {{0, 3}, {5, 4}, {13, 14}, {30, 40}, {74, 3}};
    static const int64_t row_runs[][2] = {{0, 1}, {6, 2}, {13, 14}, {30, 40}, {76, 1}};
    for (size_t c = 0; c < sizeof mcases / sizeof mcases[0]; c++) {
        const struct mcase *mc = &mcases[c];
        struct mat a = mat_make(mc->type, mc->rows, mc->cols, mc->bits, mc->group, mc->stype, (int64_t)c);
        int32_t ids[5] = {mc->rows - 1, 0, 3 % mc->rows, 3 % mc->rows, mc->rows / 2};
        for (size_t t = 0; t < sizeof counts / sizeof counts[0]; t++) {
            int64_t n = counts[t];
            float *x = malloc((size_t)(n * mc->cols) * sizeof(float));
            float *yr = malloc((size_t)(n * mc->rows) * sizeof(float)),
                  *yf = malloc((size_t)(n * mc->rows) * sizeof(float));
            assert_non_null(x);
            assert_non_null(yr);
            assert_non_null(yf);
            fill(x, n * mc->cols, 500 + (int64_t)t, 1.0f);
            check_products(mc, &a, "avx512 kernel", x, n, yr, yf);
            /* the table ran the kernel where it reads the type (dense; 4- and 8-bit codes in groups of 16+),
             * cpu-matmul.c's sgemm path otherwise */
            bool reads = mc->type != JEV_MTYPE_QAFFINE || ((mc->bits == 4 || mc->bits == 8) && mc->group % 16 == 0);
            jev_cpu_ops.matmul(g_be, &a.m, x, n, yf);
            assert_int_equal(jev_cpu_gemm512(g_be, &a.m, NULL, mc->rows, x, n, yr), reads);
            if (reads && memcmp(yr, yf, (size_t)(n * mc->rows) * sizeof(float)) != 0)
                fail_msg("%s n %lld: the table's matmul did not run the AVX-512 kernel", mc->name, (long long)n);
            free(x);
            free(yr);
            free(yf);
        }
        check_company(g_be, &a.m, NULL, 0, 77, runs, 5, mc->name);
        check_company(g_be, &a.m, ids, 5, 77, row_runs, 5, mc->name);
        mat_free(&a);
    }
    /* auto: the kernel for quantized matrices of up to 1024 columns, OpenBLAS for wider ones and the
     * dense types, by the matrix alone; each still company-free */
    g_be->gemm = JEV_CPU_GEMM_AUTO;
    static const struct {
        enum jev_mtype type;
        int32_t cols, bits;
        bool kernel;
    } autos[] = {{JEV_MTYPE_QAFFINE, 1024, 4, true},
                 {JEV_MTYPE_QAFFINE, 256, 8, true},
                 {JEV_MTYPE_QAFFINE, 2048, 4, false},
                 {JEV_MTYPE_BF16, 768, 0, false}};
    for (size_t c = 0; c < sizeof autos / sizeof autos[0]; c++) {
        struct mat a = mat_make(autos[c].type, 48, autos[c].cols, autos[c].bits, autos[c].bits ? 64 : 0,
                                autos[c].bits ? JEV_STYPE_BF16 : JEV_STYPE_F32, 90 + (int64_t)c);
        const int64_t n = 20;
        float *x = malloc((size_t)(n * autos[c].cols) * sizeof(float)), *y = malloc((size_t)(n * 48) * sizeof(float));
        assert_non_null(x);
        assert_non_null(y);
        fill(x, n * autos[c].cols, 90 + (int64_t)c, 1.0f);
        if (jev_cpu_gemm512(g_be, &a.m, NULL, 48, x, n, y) != autos[c].kernel)
            fail_msg("auto: matrix %zu (%d columns) %s the kernel", c, (int)autos[c].cols,
                     autos[c].kernel ? "did not run" : "ran");
        check_company(g_be, &a.m, NULL, 0, 77, runs, 5, "auto");
        free(x);
        free(y);
        mat_free(&a);
    }
    g_be->gemm = saved;

    /* passes: one thread's buffer holds 4 Mi floats, 73 tiles of 14 tokens x 4096 columns */
    struct jev_pool *pool = NULL;
    assert_int_equal(jev_pool_init(&pool, 1, &err), JEV_OK);
    struct jev_backend *be = jev_cpu_backend_new(pool);
    assert_non_null(be);
    be->gemm = JEV_CPU_GEMM_AVX512;
    struct mat a = mat_make(JEV_MTYPE_QAFFINE, 40, 4096, 4, 64, JEV_STYPE_BF16, 77);
    int64_t n = 1100;
    float *x = malloc((size_t)(n * 4096) * sizeof(float));
    float *yr = malloc((size_t)(n * 40) * sizeof(float)), *yf = malloc((size_t)(n * 40) * sizeof(float));
    assert_non_null(x);
    assert_non_null(yr);
    assert_non_null(yf);
    fill(x, n * 4096, 77, 1.0f);
    jev_cpu_matmul(be, &a.m, x, n, yr);
    jev_cpu_ops.matmul(be, &a.m, x, n, yf);
    check("avx512 kernel q4 g64 rows 40 cols 4096 n 1100 (two passes, one thread)", yr, yf, n * 40, NMSE_F32);
    static const int64_t across[][2] = {{1015, 12}, {1090, 10}};
    check_company(be, &a.m, NULL, 0, n, across, 2, "q4 g64 cols 4096, across the pass boundary");
    free(x);
    free(yr);
    free(yf);
    mat_free(&a);
    jev_cpu_backend_free(be);
    jev_pool_free(pool);
}

/* The fast forms run here: every check above compares them with the references only when
 * jev_cpu_has_avx2() (x86-64: the CPU has AVX2 + FMA, as the release build's -march requires;
 * aarch64: always, NEON through cpu-matmul-neon-impl.h and SIMDe). A build that fell back to the
 * references would pass them all by comparing the references with themselves. */
static void test_fast_forms_run(void **state) {
    (void)state;
    assert_true(jev_cpu_has_avx2());
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),      cmocka_unit_test(test_matmul_blocks),  cmocka_unit_test(test_attention),
        cmocka_unit_test(test_gdn_rule),    cmocka_unit_test(test_pointwise_ops),  cmocka_unit_test(test_gdn_conv),
        cmocka_unit_test(test_activations), cmocka_unit_test(test_fast_forms_run), cmocka_unit_test(test_gemm_kernel),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
