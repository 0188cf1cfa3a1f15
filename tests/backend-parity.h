/*
 * backend-parity.h - one op parity check for every backend the registry has
 * (backend/registry.h): tests/test-backends.c runs it in the CPU build,
 * tests/cuda/test-cuda-backends.c in the CUDA build (on the GPU machine,
 * where the registry holds the CPU and CUDA).
 *
 * For each registered backend: an instance made by its registry entry (device
 * 0, over a 2-thread pool), then a small set of ops on inputs uploaded to its
 * memory, each result downloaded and compared with the CPU scalar reference
 * (the jev_cpu_* forms of backend/cpu/cpu.h that tests/test-ops.c checks the
 * CPU table against) by NMSE <= 1e-7: matmul, matmul_rows and embed over the
 * backend's weight mirror (f32 and 4-bit affine), rmsnorm, add, swiglu, rope,
 * causal attention over K/V spans in backend memory, the DeltaNet conv and
 * delta rule with their states (chunked and recurrent runs). Embed is exact.
 *
 * The per-op suites (tests/test-ops.c, tests/cuda/test-cuda-*.c) cover every
 * op and shape; this one proves that whatever the registry hands out runs.
 * Header-only: each test binary is one translation unit. Include after
 * <cmocka.h>.
 */
#ifndef JEV_TESTS_BACKEND_PARITY_H
#define JEV_TESTS_BACKEND_PARITY_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"  // defines: jev_cpu_* scalar references
#include "backend/registry.h" // defines: jev_backend_count, jev_backend_at
#include "base/pool.h"        // defines: jev_pool_init
#include "test-matrices.h"    // defines: struct mat, mat_make, mat_nmse

#define BP_NMSE 1e-7

/* The backend under test, and the reference instance (one thread: the scalar forms need no pool). */
struct bp {
    const struct jev_backend_reg *reg;
    const struct jev_ops *ops;
    struct jev_backend *be;
    struct jev_backend *ref;
    int checks; /* comparisons made */
};

static inline void bp_fill(float *x, int64_t n, int64_t seed, float scale) {
    for (int64_t i = 0; i < n; i++)
        x[i] = mat_det(i * 7 + seed) * scale;
}

static inline float *bp_host(int64_t n) {
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    assert_non_null(p);
    return p;
}

/* n floats in the backend's memory: a copy of host, or zeroed when host is NULL. */
static inline float *bp_up(struct bp *b, const float *host, int64_t n) {
    float *d = b->ops->alloc(b->be, (size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(d);
    if (host)
        b->ops->upload(b->be, d, host, (size_t)n * sizeof(float));
    else
        b->ops->zero(b->be, d, (size_t)n * sizeof(float));
    return d;
}

/* Downloads n floats and compares them with ref; frees the backend buffer. */
static inline void bp_check(struct bp *b, const char *what, const float *ref, float *dev, int64_t n) {
    float *got = bp_host(n);
    b->ops->download(b->be, got, dev, (size_t)n * sizeof(float));
    struct jev_error err = {0};
    if (b->ops->status && b->ops->status(b->be, &err) != JEV_OK)
        fail_msg("%s %s: %s", b->reg->name, what, err.msg);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(got[i]))
            fail_msg("%s %s: element %lld is not finite", b->reg->name, what, (long long)i);
    double e = mat_nmse(ref, got, n);
    printf("  %-6s %-40s NMSE %.3g\n", b->reg->name, what, e);
    if (!(e <= BP_NMSE))
        fail_msg("%s %s: NMSE %.3g above %.1g", b->reg->name, what, e, BP_NMSE);
    b->checks++;
    free(got);
    b->ops->free(b->be, dev);
}

/* matmul (one and five tokens), matmul_rows and embed over the backend's mirror of a host matrix. */
static inline void bp_products(struct bp *b, enum jev_mtype type, int bits) {
    const int32_t rows = 32, cols = 128;
    struct mat a = mat_make(type, rows, cols, bits, 64, JEV_STYPE_BF16, 3);
    struct jev_matrix mirror;
    struct jev_error err = {0};
    if (b->ops->matrix_mirror(b->be, &a.m, &mirror, &err) != JEV_OK)
        fail_msg("%s matrix_mirror: %s", b->reg->name, err.msg);
    const char *tname = type == JEV_MTYPE_F32 ? "f32" : "q4";
    char what[64];
    for (int64_t n = 1; n <= 5; n += 4) {
        float *x = bp_host(n * cols), *y = bp_host(n * rows);
        bp_fill(x, n * cols, 11 + n, 1.0f);
        jev_cpu_matmul(b->ref, &a.m, x, n, y);
        float *dx = bp_up(b, x, n * cols), *dy = bp_up(b, NULL, n * rows);
        b->ops->matmul(b->be, &mirror, dx, n, dy);
        snprintf(what, sizeof what, "matmul %s n %lld", tname, (long long)n);
        bp_check(b, what, y, dy, n * rows);
        int32_t ids[4] = {rows - 1, 0, 7, 7};
        jev_cpu_matmul_rows(b->ref, &a.m, ids, 4, x, n, y);
        dy = bp_up(b, NULL, n * 4);
        b->ops->matmul_rows(b->be, &mirror, ids, 4, dx, n, dy);
        snprintf(what, sizeof what, "matmul_rows %s n %lld", tname, (long long)n);
        bp_check(b, what, y, dy, n * 4);
        b->ops->free(b->be, dx);
        free(x);
        free(y);
    }
    int32_t ids[3] = {rows - 1, 0, 5};
    float *want = bp_host(3 * cols), *got = bp_host(3 * cols);
    jev_cpu_embed(b->ref, &a.m, ids, 3, want);
    float *dout = bp_up(b, NULL, 3 * cols);
    b->ops->embed(b->be, &mirror, ids, 3, dout);
    b->ops->download(b->be, got, dout, 3 * (size_t)cols * sizeof(float));
    if (memcmp(want, got, 3 * (size_t)cols * sizeof(float)) != 0)
        fail_msg("%s embed %s: rows differ from the CPU's dequantized rows", b->reg->name, tname);
    b->checks++;
    b->ops->free(b->be, dout);
    free(want);
    free(got);
    b->ops->matrix_release(b->be, &mirror);
    mat_free(&a);
}

/* rmsnorm, add, swiglu, rope. */
static inline void bp_pointwise(struct bp *b) {
    const int64_t n = 3;
    const int32_t d = 64, heads = 2, dh = 32, nf = 12;
    float *x = bp_host(n * d), *w = bp_host(d), *y = bp_host(n * d), *z = bp_host(n * d);
    bp_fill(x, n * d, 1, 1.0f);
    bp_fill(w, d, 2, 0.5f);
    bp_fill(z, n * d, 3, 1.0f);
    jev_cpu_rmsnorm(b->ref, x, w, n, d, 1e-6f, y);
    float *dx = bp_up(b, x, n * d), *dw = bp_up(b, w, d), *dy = bp_up(b, NULL, n * d);
    b->ops->rmsnorm(b->be, dx, dw, n, d, 1e-6f, dy);
    bp_check(b, "rmsnorm", y, dy, n * d);
    float *dz = bp_up(b, z, n * d);
    memcpy(y, x, (size_t)(n * d) * sizeof(float));
    jev_cpu_add(b->ref, y, z, n * d);
    b->ops->add(b->be, dx, dz, n * d); /* dx is x + z from here */
    bp_check(b, "add", y, dx, n * d);
    dx = bp_up(b, x, n * d);
    jev_cpu_swiglu(b->ref, x, z, n * d, y);
    dy = bp_up(b, NULL, n * d);
    b->ops->swiglu(b->be, dx, dz, n * d, dy);
    bp_check(b, "swiglu", y, dy, n * d);
    float *cs = bp_host(n * nf), *sn = bp_host(n * nf);
    for (int64_t i = 0; i < n * nf; i++) {
        cs[i] = (float)cos(0.3 * (double)i);
        sn[i] = (float)sin(0.3 * (double)i);
    }
    memcpy(y, x, (size_t)(n * d) * sizeof(float));
    jev_cpu_rope(b->ref, y, n, heads, dh, nf, cs, sn);
    float *dcs = bp_up(b, cs, n * nf), *dsn = bp_up(b, sn, n * nf);
    b->ops->rope(b->be, dx, n, heads, dh, nf, dcs, dsn);
    bp_check(b, "rope", y, dx, n * d);
    /* add_rmsnorm: the reference's add, then rmsnorm; on the backend, the very bits of its own two ops */
    float *h = bp_host(n * d), *got1 = bp_host(n * d), *got2 = bp_host(n * d);
    memcpy(y, x, (size_t)(n * d) * sizeof(float));
    jev_cpu_add(b->ref, y, z, n * d);
    jev_cpu_rmsnorm(b->ref, y, w, n, d, 1e-6f, h);
    float *fx = bp_up(b, x, n * d), *fh = bp_up(b, NULL, n * d);
    float *sx = bp_up(b, x, n * d), *sh = bp_up(b, NULL, n * d);
    b->ops->add_rmsnorm(b->be, fx, dz, dw, n, d, 1e-6f, fh);
    b->ops->add(b->be, sx, dz, n * d);
    b->ops->rmsnorm(b->be, sx, dw, n, d, 1e-6f, sh);
    const float *pairs[2][2] = {{fx, sx}, {fh, sh}};
    for (int k = 0; k < 2; k++) {
        b->ops->download(b->be, got1, pairs[k][0], (size_t)(n * d) * sizeof(float));
        b->ops->download(b->be, got2, pairs[k][1], (size_t)(n * d) * sizeof(float));
        if (memcmp(got1, got2, (size_t)(n * d) * sizeof(float)) != 0)
            fail_msg("%s add_rmsnorm: its %s differs from add, then rmsnorm", b->reg->name, k ? "norm" : "residual");
    }
    b->ops->free(b->be, sx);
    b->ops->free(b->be, sh);
    bp_check(b, "add_rmsnorm residual", y, fx, n * d);
    bp_check(b, "add_rmsnorm", h, fh, n * d);
    free(h);
    free(got1);
    free(got2);
    b->ops->free(b->be, dw);
    b->ops->free(b->be, dz);
    b->ops->free(b->be, dcs);
    b->ops->free(b->be, dsn);
    free(x);
    free(w);
    free(y);
    free(z);
    free(cs);
    free(sn);
}

/* Causal GQA attention, two runs over K/V in spans of 17 rows: (n_past, n) = (0, 5) and (33, 40). */
static inline void bp_attention(struct bp *b) {
    const int32_t hq = 4, hkv = 2, dh = 32, kv_dim = hkv * dh;
    struct jev_attn_shape s = {hq, hkv, dh, 1.0f / sqrtf((float)dh)};
    const int32_t past[2] = {0, 33}, len[2] = {5, 40};
    const int64_t rows = 45, qn = rows * hq * dh;
    float *q = bp_host(qn), *o = bp_host(qn);
    bp_fill(q, qn, 5, 0.5f);
    struct jev_attn_run hr[2], dr[2];
    struct jev_kv_span hs[2][8], ds[2][8];
    float *kv[2], *dkv[2];
    int64_t row = 0;
    for (int r = 0; r < 2; r++) {
        int32_t total = past[r] + len[r];
        int64_t m = (int64_t)total * 2 * kv_dim;
        kv[r] = bp_host(m);
        bp_fill(kv[r], m, 50 + r, 0.7f);
        dkv[r] = bp_up(b, kv[r], m);
        int32_t ns = 0;
        for (int32_t at = 0; at < total; at += 17, ns++) {
            size_t k0 = (size_t)at * (size_t)kv_dim, v0 = ((size_t)total + (size_t)at) * (size_t)kv_dim;
            int32_t n = total - at < 17 ? total - at : 17;
            hs[r][ns] = (struct jev_kv_span){kv[r] + k0, kv[r] + v0, n};
            ds[r][ns] = (struct jev_kv_span){dkv[r] + k0, dkv[r] + v0, n};
        }
        hr[r] = (struct jev_attn_run){row, len[r], past[r], hs[r], ns};
        dr[r] = (struct jev_attn_run){row, len[r], past[r], ds[r], ns};
        row += len[r];
    }
    jev_cpu_attention(b->ref, &s, q, hr, 2, o);
    float *dq = bp_up(b, q, qn), *dout = bp_up(b, NULL, qn);
    b->ops->attention(b->be, &s, dq, dr, 2, dout);
    bp_check(b, "attention Hq 4 Hkv 2 dh 32", o, dout, qn);
    b->ops->free(b->be, dq);
    for (int r = 0; r < 2; r++) {
        b->ops->free(b->be, dkv[r]);
        free(kv[r]);
    }
    free(q);
    free(o);
}

/* The DeltaNet conv (two runs with their windows) and the delta rule (a chunked run of 70 rows, a
 * recurrent one of 1), outputs and updated states. With separate, the backend's runs read their windows
 * and states from conv_in / ssm_in (a light fork's parent's, ops.h) and write them elsewhere: the
 * written ones must equal the reference's in-place update, and the inputs must stay as they were. */
static inline void bp_deltanet(struct bp *b, bool separate) {
    struct jev_gdn_shape s = {2, 4, 16, 16, 64};
    const int32_t conv_dim = 2 * s.hk * s.dk + s.hv * s.dv, kernel = 4;
    const int32_t len[2] = {70, 1};
    const bool rec[2] = {false, true};
    const int64_t rows = 71, un = rows * conv_dim, win = (int64_t)(kernel - 1) * conv_dim;
    const int64_t ssm = (int64_t)s.hv * s.dk * s.dv;
    float *mixed = bp_host(un), *taps = bp_host((int64_t)conv_dim * kernel), *u = bp_host(un);
    float *cw = bp_host(2 * win), *st = bp_host(2 * ssm);
    bp_fill(mixed, un, 9, 1.0f);
    bp_fill(taps, (int64_t)conv_dim * kernel, 4, 0.3f);
    bp_fill(cw, 2 * win, 6, 0.5f);
    bp_fill(st, 2 * ssm, 77, 0.1f);
    float *dmixed = bp_up(b, mixed, un), *dtaps = bp_up(b, taps, (int64_t)conv_dim * kernel);
    float *dcw = bp_up(b, cw, 2 * win), *dst = bp_up(b, st, 2 * ssm), *du = bp_up(b, NULL, un);
    float *cw0 = bp_host(2 * win), *st0 = bp_host(2 * ssm); /* the inputs as they were */
    memcpy(cw0, cw, (size_t)(2 * win) * sizeof(float));
    memcpy(st0, st, (size_t)(2 * ssm) * sizeof(float));
    /* separate: the backend writes to fresh buffers (garbage first: every element must be written) */
    float *dcw_out = dcw, *dst_out = dst;
    if (separate) {
        float *junk = bp_host(2 * ssm > 2 * win ? 2 * ssm : 2 * win);
        bp_fill(junk, 2 * ssm > 2 * win ? 2 * ssm : 2 * win, 31, 9.0f);
        dcw_out = bp_up(b, junk, 2 * win);
        dst_out = bp_up(b, junk, 2 * ssm);
        free(junk);
    }
    struct jev_gdn_run hr[2], dr[2];
    int64_t row = 0;
    for (int r = 0; r < 2; r++) {
        hr[r] = (struct jev_gdn_run){row, len[r], rec[r], cw + r * win, st + r * ssm, NULL, NULL};
        dr[r] = (struct jev_gdn_run){row,
                                     len[r],
                                     rec[r],
                                     dcw_out + r * win,
                                     dst_out + r * ssm,
                                     separate ? dcw + r * win : NULL,
                                     separate ? dst + r * ssm : NULL};
        row += len[r];
    }
    jev_cpu_gdn_conv(b->ref, mixed, taps, conv_dim, kernel, hr, 2, u);
    b->ops->gdn_conv(b->be, dmixed, dtaps, conv_dim, kernel, dr, 2, du);
    float *got_u = bp_host(un);
    b->ops->download(b->be, got_u, du, (size_t)un * sizeof(float));
    bp_check(b, separate ? "gdn_conv (conv_in)" : "gdn_conv", u, du, un);
    /* the rule reads the conv's output: the backend's own, so that each side continues from itself */
    float *g = bp_host(rows * s.hv), *beta = bp_host(rows * s.hv), *o = bp_host(rows * s.hv * s.dv);
    for (int64_t i = 0; i < rows * s.hv; i++) {
        g[i] = -0.05f - 0.04f * (mat_det(i) + 2.0f);
        beta[i] = 0.5f + 0.2f * mat_det(i + 5);
    }
    jev_cpu_gdn_rule(b->ref, &s, got_u, g, beta, hr, 2, o);
    float *dg = bp_up(b, g, rows * s.hv), *dbeta = bp_up(b, beta, rows * s.hv);
    float *du2 = bp_up(b, got_u, un), *do_ = bp_up(b, NULL, rows * s.hv * s.dv);
    b->ops->gdn_rule(b->be, &s, du2, dg, dbeta, dr, 2, do_);
    bp_check(b, separate ? "gdn_rule out (ssm_in)" : "gdn_rule out (chunked 70, recurrent 1)", o, do_,
             rows * s.hv * s.dv);
    bp_check(b, separate ? "gdn_conv windows written" : "gdn_conv windows", cw, dcw_out, 2 * win);
    bp_check(b, separate ? "gdn_rule states written" : "gdn_rule states", st, dst_out, 2 * ssm);
    if (separate) { /* the parent's window and state: read, never written */
        bp_check(b, "gdn_conv conv_in unchanged", cw0, dcw, 2 * win);
        bp_check(b, "gdn_rule ssm_in unchanged", st0, dst, 2 * ssm);
    }
    b->ops->free(b->be, dmixed);
    b->ops->free(b->be, dtaps);
    b->ops->free(b->be, dg);
    b->ops->free(b->be, dbeta);
    b->ops->free(b->be, du2);
    free(mixed);
    free(taps);
    free(u);
    free(got_u);
    free(cw);
    free(st);
    free(cw0);
    free(st0);
    free(g);
    free(beta);
    free(o);
}

/* Every registered backend through the set above; returns how many backends ran. */
static inline int32_t bp_run_all(void) {
    struct jev_error err = {0};
    struct jev_pool *pool = NULL;
    assert_int_equal(jev_pool_init(&pool, 2, &err), JEV_OK);
    struct jev_backend *ref = jev_cpu_backend_new(NULL);
    assert_non_null(ref);
    int32_t n = jev_backend_count();
    for (int32_t i = 0; i < n; i++) {
        struct bp b = {.reg = jev_backend_at(i), .ref = ref};
        assert_non_null(b.reg);
        b.ops = b.reg->ops;
        if (b.reg->create(0, pool, &b.be, &err) != JEV_OK)
            fail_msg("backend %s: %s", b.reg->name, err.msg);
        printf("backend %s (%s memory)\n", b.reg->name, b.ops->host_memory ? "host" : "device");
        bp_products(&b, JEV_MTYPE_F32, 0);
        bp_products(&b, JEV_MTYPE_QAFFINE, 4);
        bp_pointwise(&b);
        bp_attention(&b);
        bp_deltanet(&b, false);
        bp_deltanet(&b, true);
        assert_int_equal(b.checks, 2 * 5 + 6 + 1 + 4 + 6); /* every comparison above ran */
        b.reg->destroy(b.be);
    }
    jev_cpu_backend_free(ref);
    jev_pool_free(pool);
    return n;
}

#endif
