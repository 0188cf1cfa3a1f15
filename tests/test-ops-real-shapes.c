/*
 * test-ops-real-shapes.c - one layer of each kind at the real Qwen3.5-0.8B shapes
 * (configs/qwen3.5-0.8b.json, read here): the fast CPU ops of the op table against the scalar
 * reference ops, as tests/test-ops.c does at small shapes.
 *
 * A Gated DeltaNet layer (hidden 1024, 16 key and 16 value heads of 128: a 128x128 state per
 * head, conv over 6144 channels with kernel 4, MLP 3584) and a gated attention layer (8 query
 * heads over 2 K/V heads, head_dim 256, partial rotary 64 dims), with 4-bit group-64 bf16-scaled
 * matrices as in the mlx4 checkpoint. Each op gets the same inputs on both sides (the reference
 * chain's values, so the data flow through the layer is the real one) and its output is
 * compared by NMSE (tests/test-matrices.h), limit 1e-7:
 *   - the projections (in_proj_qkv, z, a, b, out_proj, q/k/v/o, gate/up/down) on one token
 *     (the fused kernels) and on four (the sgemm tiles), the full shapes;
 *   - the causal conv with its windows; the delta rule chunked (70 tokens: a full chunk of 64
 *     and a ragged one, from a non-zero state) and recurrent (1 and 2 tokens), outputs and
 *     updated states; the gated RMSNorm over 128-wide heads against the formula in double;
 *   - attention with GQA over K/V spans of 48 rows: a prefill of 70 tokens and two decode-like
 *     runs after 130 and 40 cached tokens.
 * The token counts are small (the scalar references are slow); the shapes are not shrunk.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h" // defines: jev_cpu_* reference ops, jev_cpu_ops
#include "test-matrices.h"   // defines: struct mat, mat_make, mat_free, mat_nmse

#define NMSE_F32 1e-7
#define T_PREFILL 70 /* tokens of the chunked / prefill run: one chunk of 64 and a ragged one */

static struct jev_pool *g_pool;
static struct jev_backend *g_be;

/* the real sizes, from configs/qwen3.5-0.8b.json */
static struct {
    int32_t hidden, inter, hq, hkv, dh, rot, lhk, lhv, ldk, ldv, kernel;
    float eps;
} S;

static int32_t get_int(json_t *t, const char *k) {
    json_t *v = json_object_get(t, k);
    if (!json_is_integer(v))
        fail_msg("configs/qwen3.5-0.8b.json: text_config.%s: not an integer", k);
    return (int32_t)json_integer_value(v);
}

static int setup(void **state) {
    (void)state;
    json_t *c = json_load_file("configs/qwen3.5-0.8b.json", 0, NULL);
    json_t *t = json_object_get(c, "text_config");
    if (!t)
        return -1;
    S.hidden = get_int(t, "hidden_size");
    S.inter = get_int(t, "intermediate_size");
    S.hq = get_int(t, "num_attention_heads");
    S.hkv = get_int(t, "num_key_value_heads");
    S.dh = get_int(t, "head_dim");
    S.lhk = get_int(t, "linear_num_key_heads");
    S.lhv = get_int(t, "linear_num_value_heads");
    S.ldk = get_int(t, "linear_key_head_dim");
    S.ldv = get_int(t, "linear_value_head_dim");
    S.kernel = get_int(t, "linear_conv_kernel_dim");
    double prf = json_real_value(json_object_get(json_object_get(t, "rope_parameters"), "partial_rotary_factor"));
    S.rot = (int32_t)(prf * S.dh);
    S.eps = (float)json_number_value(json_object_get(t, "rms_norm_eps"));
    json_decref(c);
    /* the shapes this test is about: a config change shows here, not as a silently smaller test */
    assert_int_equal(S.hidden, 1024);
    assert_int_equal(S.dh, 256);
    assert_int_equal(S.ldk, 128);
    assert_int_equal(S.ldv, 128);
    assert_int_equal(S.lhv, 16);
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

static float *fmalloc(int64_t n) {
    float *p = malloc((size_t)n * sizeof(float));
    assert_non_null(p);
    return p;
}

static void fill(float *x, int64_t n, int64_t seed, float scale) {
    for (int64_t i = 0; i < n; i++)
        x[i] = mat_det(i * 7 + seed) * scale;
}

static void check(const char *what, const float *ref, const float *got, int64_t n, double limit) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(got[i]) || !isfinite(ref[i]))
            fail_msg("%s: non-finite value at %lld (ref %g, fast %g)", what, (long long)i, (double)ref[i],
                     (double)got[i]);
    double e = mat_nmse(ref, got, n);
    printf("  %-64s NMSE %.3g\n", what, e);
    if (e > limit)
        fail_msg("%s: NMSE %.3g > %.3g", what, e, limit);
}

/* A 4-bit, group 64, bf16-scaled [rows, cols] matrix (the mlx4 checkpoint's format). */
static struct mat q4(int32_t rows, int32_t cols, int64_t seed) {
    return mat_make(JEV_MTYPE_QAFFINE, rows, cols, 4, 64, JEV_STYPE_BF16, seed);
}

/*
 * y[n][rows] = x . W^T by the fast table op on all n rows (the chain goes on with it); the fast
 * kernels against the scalar reference on the first token (fused) and the first four (sgemm).
 */
static void project(const char *name, const struct mat *w, const float *x, int64_t n, float *y) {
    jev_cpu_ops.matmul(g_be, &w->m, x, n, y);
    const int64_t sub[2] = {1, 4};
    for (int k = 0; k < 2; k++) {
        float *yr = fmalloc(sub[k] * w->m.rows), *yf = fmalloc(sub[k] * w->m.rows);
        jev_cpu_matmul(g_be, &w->m, x, sub[k], yr);
        jev_cpu_ops.matmul(g_be, &w->m, x, sub[k], yf);
        char what[128];
        snprintf(what, sizeof what, "matmul %s [%d, %d] q4 g64, %lld token%s", name, w->m.rows, w->m.cols,
                 (long long)sub[k], sub[k] > 1 ? "s" : "");
        check(what, yr, yf, sub[k] * w->m.rows, NMSE_F32);
        free(yr);
        free(yf);
    }
}

/* The layer input after its RMSNorm: x [n][hidden] normalised with a weight near 1. */
static float *layer_input(int64_t n, int64_t seed) {
    float *x = fmalloc(n * S.hidden), *w = fmalloc(S.hidden), *h = fmalloc(n * S.hidden);
    fill(x, n * S.hidden, seed, 1.0f);
    for (int32_t i = 0; i < S.hidden; i++)
        w[i] = 1.0f + 0.1f * mat_det(i + seed);
    jev_cpu_ops.rmsnorm(g_be, x, w, n, S.hidden, S.eps, h);
    free(x);
    free(w);
    return h;
}

/* The SwiGLU MLP of either layer kind: gate, up, down at [3584, 1024] / [1024, 3584]. */
static void mlp(const float *h, int64_t n) {
    struct mat wg = q4(S.inter, S.hidden, 41), wu = q4(S.inter, S.hidden, 42), wd = q4(S.hidden, S.inter, 43);
    float *a = fmalloc(n * S.inter), *b = fmalloc(n * S.inter), *y = fmalloc(n * S.hidden);
    project("mlp.gate_proj", &wg, h, n, a);
    project("mlp.up_proj", &wu, h, n, b);
    jev_cpu_ops.swiglu(g_be, a, b, n * S.inter, a);
    project("mlp.down_proj", &wd, a, n, y);
    free(a);
    free(b);
    free(y);
    mat_free(&wg);
    mat_free(&wu);
    mat_free(&wd);
}

/* ---- the Gated DeltaNet layer ---- */

static void test_linear_attention_layer(void **state) {
    (void)state;
    const int32_t key_dim = S.lhk * S.ldk, value_dim = S.lhv * S.ldv, conv_dim = 2 * key_dim + value_dim;
    const int32_t K = S.kernel, hv = S.lhv;
    /* runs: chunked 70 tokens from a non-zero state, recurrent 1, recurrent 2 */
    const int32_t len[3] = {T_PREFILL, 1, 2};
    const bool rec[3] = {false, true, true};
    const int64_t T = len[0] + len[1] + len[2];
    float *h = layer_input(T, 1);

    struct mat w_qkv = q4(conv_dim, S.hidden, 11), w_z = q4(value_dim, S.hidden, 12), w_b = q4(hv, S.hidden, 13),
               w_a = q4(hv, S.hidden, 14), w_out = q4(S.hidden, value_dim, 15);
    float *mixed = fmalloc(T * conv_dim), *z = fmalloc(T * value_dim), *pb = fmalloc(T * hv), *pa = fmalloc(T * hv);
    project("linear_attn.in_proj_qkv", &w_qkv, h, T, mixed);
    project("linear_attn.in_proj_z", &w_z, h, T, z);
    project("linear_attn.in_proj_b", &w_b, h, T, pb);
    project("linear_attn.in_proj_a", &w_a, h, T, pa);

    /* the conv, each side with its own copy of the windows */
    int64_t win = (int64_t)(K - 1) * conv_dim, ssm = (int64_t)hv * S.ldk * S.ldv;
    float *taps = fmalloc((int64_t)conv_dim * K), *win_r = fmalloc(3 * win), *win_f = fmalloc(3 * win);
    fill(taps, (int64_t)conv_dim * K, 21, 0.3f);
    fill(win_r, 3 * win, 22, 1.0f);
    memcpy(win_f, win_r, (size_t)(3 * win) * sizeof(float));
    float *st_r = fmalloc(3 * ssm), *st_f = fmalloc(3 * ssm);
    fill(st_r, 3 * ssm, 23, 0.05f); /* a state left by an earlier prefill */
    memcpy(st_f, st_r, (size_t)(3 * ssm) * sizeof(float));
    struct jev_gdn_run rr[3], rf[3];
    int64_t row = 0;
    for (int r = 0; r < 3; r++) {
        rr[r] = (struct jev_gdn_run){row, len[r], rec[r], win_r + r * win, st_r + r * ssm, NULL, NULL};
        rf[r] = (struct jev_gdn_run){row, len[r], rec[r], win_f + r * win, st_f + r * ssm, NULL, NULL};
        row += len[r];
    }
    float *u = fmalloc(T * conv_dim), *uf = fmalloc(T * conv_dim);
    jev_cpu_gdn_conv(g_be, mixed, taps, conv_dim, K, rr, 3, u);
    jev_cpu_ops.gdn_conv(g_be, mixed, taps, conv_dim, K, rf, 3, uf);
    char what[128];
    snprintf(what, sizeof what, "gdn_conv %d channels, kernel %d", conv_dim, K);
    check(what, u, uf, T * conv_dim, NMSE_F32);
    check("gdn_conv windows after the runs", win_r, win_f, 3 * win, NMSE_F32);

    /* the gates (one implementation): A_log and dt_bias of the real model's ranges, decays
     * moderate enough that the chunk's cumulative decay stays representable */
    float a_log[64], dt_bias[64], *g = fmalloc(T * hv), *beta = fmalloc(T * hv);
    for (int32_t i = 0; i < hv; i++) {
        a_log[i] = logf(1.0f + (float)i * 15.0f / (float)hv); /* log U(1, 16) */
        dt_bias[i] = -4.0f + 0.5f * mat_det(i);
    }
    float *pa_small = fmalloc(T * hv);
    for (int64_t i = 0; i < T * hv; i++)
        pa_small[i] = pa[i] * 0.05f; /* the projection's scale in the trained model, about 1 */
    jev_cpu_ops.gdn_gates(g_be, pa_small, pb, a_log, dt_bias, T, hv, g, beta);

    /* the delta rule: 16 value heads of a 128x128 state, chunked and recurrent */
    struct jev_gdn_shape gs = {S.lhk, S.lhv, S.ldk, S.ldv, 64};
    float *o = fmalloc(T * value_dim), *of = fmalloc(T * value_dim);
    jev_cpu_gdn_rule(g_be, &gs, u, g, beta, rr, 3, o);
    jev_cpu_ops.gdn_rule(g_be, &gs, u, g, beta, rf, 3, of);
    snprintf(what, sizeof what, "gdn_rule out hk %d hv %d dk %d dv %d (chunked %d, recurrent 1, 2)", gs.hk, gs.hv,
             gs.dk, gs.dv, T_PREFILL);
    check(what, o, of, T * value_dim, NMSE_F32);
    for (int r = 0; r < 3; r++) {
        snprintf(what, sizeof what, "gdn_rule state %dx%d x %d heads after the %s run of %d", gs.dk, gs.dv, gs.hv,
                 rec[r] ? "recurrent" : "chunked", len[r]);
        check(what, st_r + r * ssm, st_f + r * ssm, ssm, NMSE_F32);
    }

    /* the gated RMSNorm over 128-wide heads (one implementation) against the formula in double */
    float *nw = fmalloc(S.ldv), *y = fmalloc(T * value_dim), *want = fmalloc(T * value_dim);
    for (int32_t i = 0; i < S.ldv; i++)
        nw[i] = 1.0f + 0.1f * mat_det(i + 5);
    jev_cpu_ops.gated_rmsnorm(g_be, o, z, nw, T * hv, S.ldv, S.eps, y);
    for (int64_t r = 0; r < T * hv; r++) {
        const float *xr = o + r * S.ldv, *zr = z + r * S.ldv;
        double ss = 0;
        for (int32_t i = 0; i < S.ldv; i++)
            ss += (double)xr[i] * (double)xr[i];
        double inv = 1.0 / sqrt(ss / S.ldv + (double)S.eps);
        for (int32_t i = 0; i < S.ldv; i++)
            want[r * S.ldv + i] =
                (float)((double)nw[i] * (double)xr[i] * inv * (double)zr[i] / (1.0 + exp(-(double)zr[i])));
    }
    snprintf(what, sizeof what, "gated_rmsnorm %lld rows of %d (formula in double)", (long long)(T * hv), S.ldv);
    check(what, want, y, T * value_dim, 1e-12);

    float *out = fmalloc(T * S.hidden);
    project("linear_attn.out_proj", &w_out, y, T, out);
    mlp(h, T);

    free(out);
    free(nw);
    free(y);
    free(want);
    free(o);
    free(of);
    free(g);
    free(beta);
    free(pa_small);
    free(u);
    free(uf);
    free(st_r);
    free(st_f);
    free(taps);
    free(win_r);
    free(win_f);
    free(mixed);
    free(z);
    free(pb);
    free(pa);
    free(h);
    mat_free(&w_qkv);
    mat_free(&w_z);
    mat_free(&w_b);
    mat_free(&w_a);
    mat_free(&w_out);
}

/* ---- the gated attention layer ---- */

static void test_full_attention_layer(void **state) {
    (void)state;
    const int32_t hq = S.hq, hkv = S.hkv, dh = S.dh, kv_dim = hkv * dh, nf = S.rot / 2;
    /* runs (n_past, n): a prefill of 70, then one token after 130 cached, two after 40 */
    const int32_t past[3] = {0, 130, 40}, len[3] = {T_PREFILL, 1, 2};
    const int64_t T = len[0] + len[1] + len[2];
    float *h = layer_input(T, 2);
    struct mat w_q = q4(2 * hq * dh, S.hidden, 31), w_k = q4(kv_dim, S.hidden, 32), w_v = q4(kv_dim, S.hidden, 33),
               w_o = q4(S.hidden, hq * dh, 34);
    float *qg = fmalloc(T * 2 * hq * dh), *q = fmalloc(T * hq * dh), *gate = fmalloc(T * hq * dh);
    float *k = fmalloc(T * kv_dim), *v = fmalloc(T * kv_dim);
    project("self_attn.q_proj (query | gate)", &w_q, h, T, qg);
    project("self_attn.k_proj", &w_k, h, T, k);
    project("self_attn.v_proj", &w_v, h, T, v);
    jev_cpu_ops.split_qgate(g_be, qg, T, hq, dh, q, gate);
    float *qn = fmalloc(dh), *kn = fmalloc(dh);
    for (int32_t i = 0; i < dh; i++) {
        qn[i] = 1.0f + 0.1f * mat_det(i + 1);
        kn[i] = 1.0f + 0.1f * mat_det(i + 2);
    }
    jev_cpu_ops.rmsnorm(g_be, q, qn, T * hq, dh, S.eps, q);
    jev_cpu_ops.rmsnorm(g_be, k, kn, T * hkv, dh, S.eps, k);
    /* rotary over the first 64 dims of each head, at each token's position */
    float *cs = fmalloc(T * nf), *sn = fmalloc(T * nf);
    int64_t row = 0;
    for (int r = 0; r < 3; r++)
        for (int32_t i = 0; i < len[r]; i++, row++)
            for (int32_t f = 0; f < nf; f++) {
                double ang = (double)(past[r] + i) * pow(1e7, -2.0 * f / S.rot);
                cs[row * nf + f] = (float)cos(ang);
                sn[row * nf + f] = (float)sin(ang);
            }
    jev_cpu_ops.rope(g_be, q, T, hq, dh, nf, cs, sn);
    jev_cpu_ops.rope(g_be, k, T, hkv, dh, nf, cs, sn);

    /* each run's K/V: its cached rows (earlier tokens, data of the same scale) then its own, in
     * spans of 48 rows as the page pool hands them out */
    struct jev_attn_run runs[3];
    struct jev_kv_span spans[3][8];
    float *kv[3];
    row = 0;
    for (int r = 0; r < 3; r++) {
        int32_t total = past[r] + len[r];
        kv[r] = fmalloc((int64_t)total * 2 * kv_dim);
        float *kr = kv[r], *vr = kv[r] + (int64_t)total * kv_dim;
        fill(kr, (int64_t)past[r] * kv_dim, 60 + r, 0.6f); /* about the size of a normed key */
        fill(vr, (int64_t)past[r] * kv_dim, 70 + r, 2.0f); /* and of the projected values */
        memcpy(kr + (int64_t)past[r] * kv_dim, k + row * kv_dim, (size_t)len[r] * kv_dim * sizeof(float));
        memcpy(vr + (int64_t)past[r] * kv_dim, v + row * kv_dim, (size_t)len[r] * kv_dim * sizeof(float));
        int32_t ns = 0;
        for (int32_t at = 0; at < total; at += 48, ns++)
            spans[r][ns] = (struct jev_kv_span){kr + (int64_t)at * kv_dim, vr + (int64_t)at * kv_dim,
                                                total - at < 48 ? total - at : 48};
        runs[r] = (struct jev_attn_run){row, len[r], past[r], spans[r], ns};
        row += len[r];
    }
    struct jev_attn_shape as = {hq, hkv, dh, 1.0f / sqrtf((float)dh)};
    float *o = fmalloc(T * hq * dh), *of = fmalloc(T * hq * dh);
    jev_cpu_attention(g_be, &as, q, runs, 3, o);
    jev_cpu_ops.attention(g_be, &as, q, runs, 3, of);
    char what[128];
    snprintf(what, sizeof what, "attention Hq %d Hkv %d dh %d (prefill %d, after 130 and 40)", hq, hkv, dh, T_PREFILL);
    check(what, o, of, T * hq * dh, NMSE_F32);
    jev_cpu_ops.sigmoid_mul(g_be, o, gate, T * hq * dh);
    float *out = fmalloc(T * S.hidden);
    project("self_attn.o_proj", &w_o, o, T, out);

    for (int r = 0; r < 3; r++)
        free(kv[r]);
    free(out);
    free(o);
    free(of);
    free(cs);
    free(sn);
    free(qn);
    free(kn);
    free(qg);
    free(q);
    free(gate);
    free(k);
    free(v);
    free(h);
    mat_free(&w_q);
    mat_free(&w_k);
    mat_free(&w_v);
    mat_free(&w_o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_attention_layer),
        cmocka_unit_test(test_full_attention_layer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
