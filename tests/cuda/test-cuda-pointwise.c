/*
 * test-cuda-pointwise.c - CUDA parity of the ops in cuda-pointwise.cu, and the memory ops they rely on.
 *
 * Every op runs on the CPU backend (the reference) and on the CUDA backend over the same deterministic
 * inputs; the device result is downloaded and compared with NMSE <= CT_NMSE_F32. Shapes cover one row,
 * sizes that are not a multiple of a warp or a float4, rows wider than one block (d = 4096) and tensors
 * past a million values (the grid-stride loops); ops that may run in place are also run in place. The
 * embedding must match exactly: both sides compute the same dequantized values (the mirror keeps the
 * stored form and the kernel dequantizes as it reads, cuda-weights-int.h), so any difference is a bug,
 * not rounding. vision_pos_add reads its table the same way (f32, bf16 and 4-bit tables). Ops called
 * with n == 0 must queue nothing and leave the stream usable.
 */
#include "cuda-test.h"
#include "../test-matrices.h" // defines: struct mat, mat_make, mat_free

#include "base/half.h" // defines: jev_f32_to_bf16, jev_f32_to_f16

/* ---- helpers ---- */

static float *filled(int64_t n, int64_t seed, float scale) {
    float *p = ct_host(n);
    ct_fill(p, n, seed, scale);
    return p;
}

static float *dup_host(const float *src, int64_t n) {
    float *p = ct_host(n);
    memcpy(p, src, (size_t)n * sizeof(float));
    return p;
}

/* ---- memory ops ---- */

static void test_memory(void **state) {
    (void)state;
    enum { BYTES = 1001 };
    unsigned char src[BYTES], got[BYTES];
    for (int i = 0; i < BYTES; i++)
        src[i] = (unsigned char)(i * 37 + 11);
    unsigned char *dev = ct_ops->alloc(ct_gpu, BYTES);
    assert_non_null(dev);
    assert_int_equal((uintptr_t)dev % 256, 0);
    /* alloc zeroes */
    memset(got, 0xab, BYTES);
    ct_ops->download(ct_gpu, got, dev, BYTES);
    for (int i = 0; i < BYTES; i++)
        if (got[i] != 0)
            fail_msg("alloc: byte %d is %d, not 0", i, got[i]);
    /* upload / download round-trip exactly */
    ct_ops->upload(ct_gpu, dev, src, BYTES);
    memset(got, 0, BYTES);
    ct_ops->download(ct_gpu, got, dev, BYTES);
    assert_memory_equal(got, src, BYTES);
    /* an upload at an odd offset, then zero() over an odd range */
    ct_ops->upload(ct_gpu, dev + 3, src + 500, 101);
    ct_ops->zero(ct_gpu, dev + 301, 333);
    ct_ops->sync(ct_gpu);
    ct_ops->download(ct_gpu, got, dev, BYTES);
    for (int i = 0; i < BYTES; i++) {
        unsigned char want = i >= 301 && i < 634 ? 0 : i >= 3 && i < 104 ? src[500 + i - 3] : src[i];
        if (got[i] != want)
            fail_msg("upload/zero: byte %d is %d, want %d", i, got[i], want);
    }
    /* the source of an upload may be reused at once */
    unsigned char *again = ct_ops->alloc(ct_gpu, BYTES);
    assert_non_null(again);
    ct_ops->upload(ct_gpu, again, src, BYTES);
    memset(src, 0x5a, BYTES);
    ct_ops->download(ct_gpu, got, again, BYTES);
    for (int i = 0; i < BYTES; i++)
        if (got[i] != (unsigned char)(i * 37 + 11))
            fail_msg("upload: byte %d changed after the source was reused", i);
    ct_free(again);
    ct_free(dev);
    ct_ops->free(ct_gpu, NULL);
}

/* ---- norms ---- */

static const int32_t norm_shapes[][2] = {{1, 1}, {1, 7}, {3, 17}, {7, 33}, {5, 1000}, {512, 256}, {300, 4096}};
#define N_NORM_SHAPES (sizeof norm_shapes / sizeof norm_shapes[0])

static void test_rmsnorm(void **state) {
    (void)state;
    for (size_t s = 0; s < N_NORM_SHAPES; s++) {
        int64_t n = norm_shapes[s][0];
        int32_t d = norm_shapes[s][1];
        float *x = filled(n * d, 1, 1.0f), *w = filled(d, 2, 0.5f), *ref = ct_host(n * d);
        jev_cpu_ops.rmsnorm(ct_cpu, x, w, n, d, 1e-6f, ref);
        float *dx = ct_up(x, n * d), *dw = ct_up(w, d), *dy = ct_up(NULL, n * d);
        char what[96];
        snprintf(what, sizeof what, "rmsnorm n %lld d %d", (long long)n, d);
        ct_ops->rmsnorm(ct_gpu, dx, dw, n, d, 1e-6f, dy);
        ct_check_dev(what, ref, dy, n * d, CT_NMSE_F32);
        snprintf(what, sizeof what, "rmsnorm in place n %lld d %d", (long long)n, d);
        ct_ops->rmsnorm(ct_gpu, dx, dw, n, d, 1e-6f, dx);
        ct_check_dev(what, ref, dx, n * d, CT_NMSE_F32);
        ct_free(dx), ct_free(dw), ct_free(dy);
        free(x), free(w), free(ref);
    }
}

static void test_layernorm(void **state) {
    (void)state;
    for (size_t s = 0; s < N_NORM_SHAPES; s++) {
        int64_t n = norm_shapes[s][0];
        int32_t d = norm_shapes[s][1];
        float *x = filled(n * d, 3, 1.5f), *w = filled(d, 4, 0.5f), *b = filled(d, 5, 0.2f);
        float *ref = ct_host(n * d);
        jev_cpu_ops.layernorm(ct_cpu, x, w, b, n, d, 1e-6f, ref);
        float *dx = ct_up(x, n * d), *dw = ct_up(w, d), *db = ct_up(b, d), *dy = ct_up(NULL, n * d);
        char what[96];
        snprintf(what, sizeof what, "layernorm n %lld d %d", (long long)n, d);
        ct_ops->layernorm(ct_gpu, dx, dw, db, n, d, 1e-6f, dy);
        ct_check_dev(what, ref, dy, n * d, CT_NMSE_F32);
        snprintf(what, sizeof what, "layernorm in place n %lld d %d", (long long)n, d);
        ct_ops->layernorm(ct_gpu, dx, dw, db, n, d, 1e-6f, dx);
        ct_check_dev(what, ref, dx, n * d, CT_NMSE_F32);
        ct_free(dx), ct_free(dw), ct_free(db), ct_free(dy);
        free(x), free(w), free(b), free(ref);
    }
}

static void test_gated_rmsnorm(void **state) {
    (void)state;
    const int32_t shapes[][2] = {{1, 128}, {1, 5}, {7, 33}, {1024, 128}, {300, 4096}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t n = shapes[s][0];
        int32_t d = shapes[s][1];
        float *x = filled(n * d, 6, 1.0f), *z = filled(n * d, 7, 2.0f), *w = filled(d, 8, 0.5f);
        float *ref = ct_host(n * d);
        jev_cpu_ops.gated_rmsnorm(ct_cpu, x, z, w, n, d, 1e-6f, ref);
        float *dx = ct_up(x, n * d), *dz = ct_up(z, n * d), *dw = ct_up(w, d), *dy = ct_up(NULL, n * d);
        char what[96];
        snprintf(what, sizeof what, "gated_rmsnorm n %lld d %d", (long long)n, d);
        ct_ops->gated_rmsnorm(ct_gpu, dx, dz, dw, n, d, 1e-6f, dy);
        ct_check_dev(what, ref, dy, n * d, CT_NMSE_F32);
        snprintf(what, sizeof what, "gated_rmsnorm in place n %lld d %d", (long long)n, d);
        ct_ops->gated_rmsnorm(ct_gpu, dx, dz, dw, n, d, 1e-6f, dx);
        ct_check_dev(what, ref, dx, n * d, CT_NMSE_F32);
        ct_free(dx), ct_free(dz), ct_free(dw), ct_free(dy);
        free(x), free(z), free(w), free(ref);
    }
}

/* ---- elementwise ---- */

static const int64_t elem_sizes[] = {1, 37, 4099, (1 << 21) + 3};
#define N_ELEM_SIZES (sizeof elem_sizes / sizeof elem_sizes[0])

static void test_add(void **state) {
    (void)state;
    for (size_t s = 0; s < N_ELEM_SIZES; s++) {
        int64_t n = elem_sizes[s];
        float *x = filled(n, 9, 1.0f), *y = filled(n, 10, 0.7f), *ref = dup_host(x, n);
        jev_cpu_ops.add(ct_cpu, ref, y, n);
        float *dx = ct_up(x, n), *dy = ct_up(y, n);
        ct_ops->add(ct_gpu, dx, dy, n);
        char what[64];
        snprintf(what, sizeof what, "add n %lld", (long long)n);
        ct_check_dev(what, ref, dx, n, CT_NMSE_F32);
        /* x += x */
        jev_cpu_ops.add(ct_cpu, ref, ref, n);
        ct_ops->add(ct_gpu, dx, dx, n);
        snprintf(what, sizeof what, "add to itself n %lld", (long long)n);
        ct_check_dev(what, ref, dx, n, CT_NMSE_F32);
        ct_free(dx), ct_free(dy);
        free(x), free(y), free(ref);
    }
}

static void test_add_bias(void **state) {
    (void)state;
    const int32_t shapes[][2] = {{1, 1}, {1, 5}, {7, 33}, {300, 4096}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t n = shapes[s][0];
        int32_t d = shapes[s][1];
        float *y = filled(n * d, 11, 1.0f), *b = filled(d, 12, 0.3f), *ref = dup_host(y, n * d);
        jev_cpu_ops.add_bias(ct_cpu, ref, b, n, d);
        float *dy = ct_up(y, n * d), *db = ct_up(b, d);
        ct_ops->add_bias(ct_gpu, dy, db, n, d);
        char what[64];
        snprintf(what, sizeof what, "add_bias n %lld d %d", (long long)n, d);
        ct_check_dev(what, ref, dy, n * d, CT_NMSE_F32);
        ct_free(dy), ct_free(db);
        free(y), free(b), free(ref);
    }
}

static void test_swiglu(void **state) {
    (void)state;
    for (size_t s = 0; s < N_ELEM_SIZES; s++) {
        int64_t n = elem_sizes[s];
        float *g = filled(n, 13, 4.0f), *u = filled(n, 14, 1.0f), *ref = ct_host(n);
        if (n > 4) { /* extremes: e^-g overflows to inf (silu = -0), silu(g) = g */
            g[1] = -90.0f;
            g[2] = 30.0f;
            g[3] = 0.0f;
        }
        jev_cpu_ops.swiglu(ct_cpu, g, u, n, ref);
        float *dg = ct_up(g, n), *du = ct_up(u, n), *dout = ct_up(NULL, n);
        char what[64];
        snprintf(what, sizeof what, "swiglu n %lld", (long long)n);
        ct_ops->swiglu(ct_gpu, dg, du, n, dout);
        ct_check_dev(what, ref, dout, n, CT_NMSE_F32);
        snprintf(what, sizeof what, "swiglu into gate n %lld", (long long)n);
        ct_ops->swiglu(ct_gpu, dg, du, n, dg);
        ct_check_dev(what, ref, dg, n, CT_NMSE_F32);
        ct_free(dg), ct_free(du), ct_free(dout);
        free(g), free(u), free(ref);
    }
}

static void test_gelu(void **state) {
    (void)state;
    for (int form = 0; form < 2; form++)
        for (size_t s = 0; s < N_ELEM_SIZES; s++) {
            int64_t n = elem_sizes[s];
            /* seed 0: the lone value of n = 1 is 6.3, not in the negative tail, where 1 + erf(v/sqrt 2) cancels
             * in both libms (the CPU keeps torch's formula) and one element's NMSE is its relative error; the
             * larger sizes hold tail values, whose few-ulp differences vanish in the NMSE of the tensor */
            float *x = filled(n, 0, 3.0f);
            if (n > 5) { /* saturated tails of both forms (kept small: one huge value would swamp the NMSE) */
                x[1] = -12.0f;
                x[2] = 12.0f;
                x[3] = 0.0f;
                x[4] = -9.0f;
            }
            float *ref = dup_host(x, n);
            jev_cpu_ops.gelu(ct_cpu, ref, n, form == 1);
            float *dx = ct_up(x, n);
            ct_ops->gelu(ct_gpu, dx, n, form == 1);
            char what[64];
            snprintf(what, sizeof what, "gelu %s n %lld", form ? "tanh" : "erf", (long long)n);
            ct_check_dev(what, ref, dx, n, CT_NMSE_F32);
            ct_free(dx);
            free(x), free(ref);
        }
}

static void test_copy(void **state) {
    (void)state;
    for (size_t s = 0; s < N_ELEM_SIZES; s++) {
        int64_t n = elem_sizes[s];
        float *x = filled(n, 16, 1.0f);
        float *dsrc = ct_up(x, n), *ddst = ct_up(NULL, n);
        ct_ops->copy(ct_gpu, ddst, dsrc, n);
        float *got = ct_down(ddst, n);
        if (memcmp(got, x, (size_t)n * sizeof(float)) != 0)
            fail_msg("copy n %lld: values differ", (long long)n);
        free(got);
        ct_ops->copy(ct_gpu, dsrc, dsrc, n); /* onto itself: no change */
        got = ct_down(dsrc, n);
        if (memcmp(got, x, (size_t)n * sizeof(float)) != 0)
            fail_msg("copy onto itself n %lld: values changed", (long long)n);
        free(got);
        ct_free(dsrc), ct_free(ddst);
        free(x);
    }
}

static void test_sigmoid_mul(void **state) {
    (void)state;
    for (size_t s = 0; s < N_ELEM_SIZES; s++) {
        int64_t n = elem_sizes[s];
        float *x = filled(n, 17, 1.0f), *gate = filled(n, 18, 5.0f);
        if (n > 3) {
            gate[1] = -100.0f;
            gate[2] = 100.0f;
        }
        float *ref = dup_host(x, n);
        jev_cpu_ops.sigmoid_mul(ct_cpu, ref, gate, n);
        float *dx = ct_up(x, n), *dg = ct_up(gate, n);
        ct_ops->sigmoid_mul(ct_gpu, dx, dg, n);
        char what[64];
        snprintf(what, sizeof what, "sigmoid_mul n %lld", (long long)n);
        ct_check_dev(what, ref, dx, n, CT_NMSE_F32);
        ct_free(dx), ct_free(dg);
        free(x), free(gate), free(ref);
    }
}

/* ---- language model ---- */

static void test_split_qgate(void **state) {
    (void)state;
    const int32_t shapes[][3] = {{1, 1, 3}, {3, 3, 17}, {5, 8, 256}, {1024, 8, 256}}; /* n, heads, dh */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t n = shapes[s][0];
        int32_t heads = shapes[s][1], dh = shapes[s][2];
        int64_t half = n * heads * dh;
        float *qg = filled(2 * half, 19, 1.0f), *rq = ct_host(half), *rg = ct_host(half);
        jev_cpu_ops.split_qgate(ct_cpu, qg, n, heads, dh, rq, rg);
        float *dqg = ct_up(qg, 2 * half), *dq = ct_up(NULL, half), *dg = ct_up(NULL, half);
        ct_ops->split_qgate(ct_gpu, dqg, n, heads, dh, dq, dg);
        float *gq = ct_down(dq, half), *gg = ct_down(dg, half);
        if (memcmp(gq, rq, (size_t)half * sizeof(float)) != 0 || memcmp(gg, rg, (size_t)half * sizeof(float)) != 0)
            fail_msg("split_qgate n %lld heads %d dh %d: values differ", (long long)n, heads, dh);
        ct_free(dqg), ct_free(dq), ct_free(dg);
        free(qg), free(rq), free(rg), free(gq), free(gg);
    }
}

static void test_rope(void **state) {
    (void)state;
    const int32_t shapes[][4] = {{1, 1, 4, 2}, {3, 3, 17, 5}, {7, 2, 64, 32}, {5, 8, 256, 32}, {512, 8, 256, 32}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t n = shapes[s][0];
        int32_t heads = shapes[s][1], dh = shapes[s][2], n_freq = shapes[s][3];
        int64_t count = n * heads * dh;
        float *x = filled(count, 20, 1.0f), *c = filled(n * n_freq, 21, 0.45f), *sn = filled(n * n_freq, 22, 0.45f);
        float *ref = dup_host(x, count);
        jev_cpu_ops.rope(ct_cpu, ref, n, heads, dh, n_freq, c, sn);
        float *dx = ct_up(x, count), *dc = ct_up(c, n * n_freq), *ds = ct_up(sn, n * n_freq);
        ct_ops->rope(ct_gpu, dx, n, heads, dh, n_freq, dc, ds);
        char what[96];
        snprintf(what, sizeof what, "rope n %lld heads %d dh %d n_freq %d", (long long)n, heads, dh, n_freq);
        ct_check_dev(what, ref, dx, count, CT_NMSE_F32);
        ct_free(dx), ct_free(dc), ct_free(ds);
        free(x), free(c), free(sn), free(ref);
    }
}

static void test_gdn_gates(void **state) {
    (void)state;
    const int32_t shapes[][2] = {{1, 16}, {7, 5}, {513, 16}, {70000, 16}}; /* n, hv */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t n = shapes[s][0];
        int32_t hv = shapes[s][1];
        int64_t count = n * hv;
        /* a + dt_bias spans about +-25: both sides of softplus's threshold 20 */
        float *a = filled(count, 23, 12.0f), *b = filled(count, 24, 4.0f);
        float *a_log = filled(hv, 25, 0.5f), *dt_bias = filled(hv, 26, 0.5f);
        float *rg = ct_host(count), *rb = ct_host(count);
        jev_cpu_ops.gdn_gates(ct_cpu, a, b, a_log, dt_bias, n, hv, rg, rb);
        float *da = ct_up(a, count), *db = ct_up(b, count), *dal = ct_up(a_log, hv), *ddt = ct_up(dt_bias, hv);
        float *dg = ct_up(NULL, count), *dbeta = ct_up(NULL, count);
        ct_ops->gdn_gates(ct_gpu, da, db, dal, ddt, n, hv, dg, dbeta);
        char what[96];
        snprintf(what, sizeof what, "gdn_gates g n %lld hv %d", (long long)n, hv);
        ct_check_dev(what, rg, dg, count, CT_NMSE_F32);
        snprintf(what, sizeof what, "gdn_gates beta n %lld hv %d", (long long)n, hv);
        ct_check_dev(what, rb, dbeta, count, CT_NMSE_F32);
        ct_free(da), ct_free(db), ct_free(dal), ct_free(ddt), ct_free(dg), ct_free(dbeta);
        free(a), free(b), free(a_log), free(dt_bias), free(rg), free(rb);
    }
}

/* ---- embedding ---- */

static void test_embed(void **state) {
    (void)state;
    const struct mcase cases[] = {
        {"f32", JEV_MTYPE_F32, 300, 1000, 0, 0, 0},
        {"bf16", JEV_MTYPE_BF16, 300, 1000, 0, 0, 0},
        {"f16", JEV_MTYPE_F16, 300, 33, 0, 0, 0},
        {"q4 bf16 scales", JEV_MTYPE_QAFFINE, 300, 512, 4, 64, JEV_STYPE_BF16},
        {"q8 f32 scales", JEV_MTYPE_QAFFINE, 300, 256, 8, 64, JEV_STYPE_F32},
        {"q3 f16 scales (codes across words)", JEV_MTYPE_QAFFINE, 300, 128, 3, 64, JEV_STYPE_F16},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const struct mcase *mc = &cases[c];
        struct mat a = mat_make(mc->type, mc->rows, mc->cols, mc->bits, mc->group, mc->stype, (int64_t)c);
        struct jev_matrix m = ct_mirror(&a.m);
        /* the mirror keeps the stored form (4-bit stays 4-bit); embed dequantizes as it reads */
        assert_int_equal(m.type, mc->type);
        assert_int_equal(m.rows, mc->rows);
        assert_int_equal(m.cols, mc->cols);
        if (mc->type == JEV_MTYPE_QAFFINE) {
            assert_int_equal(m.bits, mc->bits);
            assert_int_equal(m.group, mc->group);
        }
        /* unsorted, repeated, first and last row; then one row */
        int32_t ids[6] = {mc->rows - 1, 0, 2, 2, mc->rows / 2, 7};
        const int64_t counts[2] = {6, 1};
        for (int k = 0; k < 2; k++) {
            int64_t n = counts[k], len = n * mc->cols;
            float *ref = ct_host(len), *dout = ct_up(NULL, len);
            jev_cpu_ops.embed(ct_cpu, &a.m, ids, n, ref);
            ct_ops->embed(ct_gpu, &m, ids, n, dout);
            float *got = ct_down(dout, len);
            if (memcmp(got, ref, (size_t)len * sizeof(float)) != 0)
                fail_msg("embed %s n %lld: rows differ from the CPU's", mc->name, (long long)n);
            free(got), free(ref);
            ct_free(dout);
        }
        /* two lookups queued back to back, the ids array rewritten in between: each op owns its staged copy */
        int32_t ids2[2] = {5, 9};
        float *d1 = ct_up(NULL, 2 * (int64_t)mc->cols), *d2 = ct_up(NULL, 2 * (int64_t)mc->cols);
        ct_ops->embed(ct_gpu, &m, ids2, 2, d1);
        ids2[0] = 11, ids2[1] = 4;
        ct_ops->embed(ct_gpu, &m, ids2, 2, d2);
        const int32_t want[2][2] = {{5, 9}, {11, 4}};
        for (int k = 0; k < 2; k++) {
            float *ref = ct_host(2 * (int64_t)mc->cols);
            jev_cpu_ops.embed(ct_cpu, &a.m, want[k], 2, ref);
            float *got = ct_down(k ? d2 : d1, 2 * (int64_t)mc->cols);
            if (memcmp(got, ref, 2 * (size_t)mc->cols * sizeof(float)) != 0)
                fail_msg("embed %s: lookup %d of two queued ones differs", mc->name, k);
            free(got), free(ref);
        }
        ct_free(d1), ct_free(d2);
        ct_ops->matrix_release(ct_gpu, &m);
        mat_free(&a);
    }
}

/* ---- vision ---- */

static void test_vision_rope(void **state) {
    (void)state;
    const int32_t shapes[][3] = {{1, 1, 2}, {5, 3, 18}, {64, 12, 64}, {1024, 12, 64}}; /* n, heads, head_dim */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t n = shapes[s][0];
        int32_t heads = shapes[s][1], hd = shapes[s][2];
        int64_t count = n * 3 * heads * hd;
        float *qkv = filled(count, 27, 1.0f), *c = filled(n * hd, 28, 0.45f), *sn = filled(n * hd, 29, 0.45f);
        float *ref = dup_host(qkv, count);
        jev_cpu_ops.vision_rope(ct_cpu, ref, c, sn, n, heads, hd);
        float *dqkv = ct_up(qkv, count), *dc = ct_up(c, n * hd), *ds = ct_up(sn, n * hd);
        ct_ops->vision_rope(ct_gpu, dqkv, dc, ds, n, heads, hd);
        char what[96];
        snprintf(what, sizeof what, "vision_rope n %lld heads %d head_dim %d", (long long)n, heads, hd);
        ct_check_dev(what, ref, dqkv, count, CT_NMSE_F32); /* v must pass through too */
        ct_free(dqkv), ct_free(dc), ct_free(ds);
        free(qkv), free(c), free(sn), free(ref);
    }
}

static void test_vision_pos_add(void **state) {
    (void)state;
    const enum jev_mtype types[3] = {JEV_MTYPE_F32, JEV_MTYPE_BF16, JEV_MTYPE_QAFFINE};
    static const char *const names[3] = {"f32", "bf16", "q4 g32"};
    const int32_t rows = 64;
    const int64_t counts[3] = {1, 37, 2304};
    for (int t = 0; t < 3; t++) {
        const int32_t cols = t == 2 ? 96 : 97; /* the affine rows are whole groups and words */
        struct mat table = t == 2 ? mat_make(types[t], rows, cols, 4, 32, JEV_STYPE_BF16, 30 + t)
                                  : mat_make(types[t], rows, cols, 0, 0, 0, 30 + t);
        struct jev_matrix m = ct_mirror(&table.m);
        for (int k = 0; k < 3; k++) {
            int64_t n = counts[k], len = n * cols;
            int32_t *idx = malloc((size_t)n * 4 * sizeof(int32_t));
            assert_non_null(idx);
            for (int64_t i = 0; i < n * 4; i++)
                idx[i] = (int32_t)((i * 13 + i / 4 * 5) % rows);
            float *w = filled(n * 4, 31, 0.4f), *x = filled(len, 32, 1.0f), *ref = dup_host(x, len);
            jev_cpu_ops.vision_pos_add(ct_cpu, &table.m, idx, w, n, ref);
            float *dx = ct_up(x, len);
            ct_ops->vision_pos_add(ct_gpu, &m, idx, w, n, dx);
            memset(idx, 0, (size_t)n * 4 * sizeof(int32_t)); /* staged on the call: reuse must not matter */
            memset(w, 0, (size_t)n * 4 * sizeof(float));
            char what[96];
            snprintf(what, sizeof what, "vision_pos_add %s n %lld", names[t], (long long)n);
            ct_check_dev(what, ref, dx, len, CT_NMSE_F32);
            ct_free(dx);
            free(idx), free(w), free(x), free(ref);
        }
        ct_ops->matrix_release(ct_gpu, &m);
        mat_free(&table);
    }
}

/* ---- empty calls ---- */

/* n == 0 queues nothing (the pointers are never read); the stream stays usable. */
static void test_empty(void **state) {
    (void)state;
    struct jev_matrix f32 = {.type = JEV_MTYPE_F32, .rows = 4, .cols = 8, .name = "empty"};
    ct_ops->rmsnorm(ct_gpu, NULL, NULL, 0, 64, 1e-6f, NULL);
    ct_ops->layernorm(ct_gpu, NULL, NULL, NULL, 0, 64, 1e-6f, NULL);
    ct_ops->gated_rmsnorm(ct_gpu, NULL, NULL, NULL, 0, 64, 1e-6f, NULL);
    ct_ops->add(ct_gpu, NULL, NULL, 0);
    ct_ops->add_bias(ct_gpu, NULL, NULL, 0, 64);
    ct_ops->swiglu(ct_gpu, NULL, NULL, 0, NULL);
    ct_ops->gelu(ct_gpu, NULL, 0, true);
    ct_ops->gelu(ct_gpu, NULL, 0, false);
    ct_ops->copy(ct_gpu, NULL, NULL, 0);
    ct_ops->split_qgate(ct_gpu, NULL, 0, 8, 256, NULL, NULL);
    ct_ops->rope(ct_gpu, NULL, 0, 8, 256, 32, NULL, NULL);
    ct_ops->sigmoid_mul(ct_gpu, NULL, NULL, 0);
    ct_ops->gdn_gates(ct_gpu, NULL, NULL, NULL, NULL, 0, 16, NULL, NULL);
    ct_ops->vision_rope(ct_gpu, NULL, NULL, NULL, 0, 12, 64);
    ct_ops->vision_pos_add(ct_gpu, &f32, NULL, NULL, 0, NULL);
    ct_ops->embed(ct_gpu, &f32, NULL, 0, NULL);
    ct_ops->sync(ct_gpu);
    /* a real op afterwards still runs */
    float x[3] = {1, 2, 3}, y[3] = {10, 20, 30}, want[3] = {11, 22, 33};
    float *dx = ct_up(x, 3), *dy = ct_up(y, 3);
    ct_ops->add(ct_gpu, dx, dy, 3);
    float *got = ct_down(dx, 3);
    assert_memory_equal(got, want, sizeof want);
    free(got);
    ct_free(dx), ct_free(dy);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),         cmocka_unit_test(test_rmsnorm),     cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_gated_rmsnorm),  cmocka_unit_test(test_add),         cmocka_unit_test(test_add_bias),
        cmocka_unit_test(test_swiglu),         cmocka_unit_test(test_gelu),        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_sigmoid_mul),    cmocka_unit_test(test_split_qgate), cmocka_unit_test(test_rope),
        cmocka_unit_test(test_gdn_gates),      cmocka_unit_test(test_embed),       cmocka_unit_test(test_vision_rope),
        cmocka_unit_test(test_vision_pos_add), cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
