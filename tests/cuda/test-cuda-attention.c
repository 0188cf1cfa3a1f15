/*
 * test-cuda-attention.c - CUDA attention against the CPU backend (NMSE <= 1e-7).
 *
 * - attention (LM, causal GQA over K/V spans): the K/V rows of every case live in one pool,
 *   uploaded once; the CPU gets span arrays pointing at the host pool, CUDA the same spans
 *   pointing at the device pool (span descriptors are host memory for both). Cases: several runs
 *   with n_past 0 and > 0 and spans of uneven sizes (17, 5, 1, 30, 9 rows, cut anywhere); the
 *   decision path (65 runs of 1..10 rows after one shared 530-key prefix held in two spans);
 *   a 500-row prefill; one decode row after 700 keys, one after 5,000 (per-row rows over 256 keys
 *   split their keys over several blocks, at most 16, merged by a second kernel; the uneven case
 *   mixes one such row, after 1,000 keys, among rows of one split). Runs of ATT_TILE_MIN_ROWS (4) rows or more take the
 *   tiled kernel (cuda-attention-tile.cu), shorter ones the per-row kernel: the cases hold both. In
 *   every case each run alone gives the same bits as among the others (company). Shapes: 8 query heads over 2 K/V heads
 * with head_dim 256 and 64, and 4 over 2 with 96, 3 over 3 with 16 (dims that leave lanes idle).
 * - vision_attention (bidirectional over all rows): n in {4, 64, 1000} with 16 heads of 64, the
 *   benchmark image (1824 patches, 12 heads of 64), a tiny case, and 64 heads of 16 over 2100
 *   rows, whose scores exceed the kernel's scratch bound so that queries go in several blocks.
 * - vision_attention in fast mode (bf16 Q, K, V and P, f32 accumulation, f32 softmax) on the same
 *   shapes: every output within tests/bf16-attn-ref.h's derived bound of the reference that takes the
 *   same bf16 Q, K, V, computes S and the softmax in double and rounds P to bf16 (the bound is derived
 *   there and checked on the CPU by tests/test-cuda-attn-emul.c). V is nudged just under half a bf16
 *   spacing above bf16 values, so that the f32 path (fast mode not taken) falls outside the bound;
 *   fast's output must also differ from exact's. Exact mode on the same inputs, before and after the
 *   fast call: the same bits both times, within NMSE 1e-7 of the CPU. The NMSE of fast against the
 *   exact CPU result is printed: fast's own cost.
 */
#include "cuda-test.h"        // defines: ct_setup, ct_up, ct_check, jev_cpu_ops, ct_ops
#include "../bf16-attn-ref.h" // defines: bf16_vision_attention_ref
#include "../bf16-ref.h"      // defines: bf16_round

#define MAX_RUNS 80
#define MAX_SPANS 64 /* per run */

/* ---- LM attention ---- */

/* A set of runs over a pool of K/V rows; spans are (first pool row, rows). */
struct acase {
    int32_t n_runs;
    int32_t past[MAX_RUNS], len[MAX_RUNS], n_sp[MAX_RUNS];
    int64_t sp_off[MAX_RUNS][MAX_SPANS];
    int32_t sp_n[MAX_RUNS][MAX_SPANS];
    int64_t pool_rows;
};

static void add_span(struct acase *c, int32_t r, int64_t off, int32_t n) {
    assert_true(c->n_sp[r] < MAX_SPANS);
    c->sp_off[r][c->n_sp[r]] = off;
    c->sp_n[r][c->n_sp[r]] = n;
    c->n_sp[r]++;
}

/* A run with its own n_past + len keys, cut into spans of the sizes cuts[0], cuts[1], ... (cycled). */
static void run_fresh(struct acase *c, int32_t past, int32_t len, const int32_t *cuts, int n_cuts) {
    assert_true(c->n_runs < MAX_RUNS);
    int32_t r = c->n_runs++, total = past + len;
    c->past[r] = past;
    c->len[r] = len;
    c->n_sp[r] = 0;
    for (int32_t at = 0, k = 0; at < total; k++) {
        int32_t sz = cuts[k % n_cuts] < total - at ? cuts[k % n_cuts] : total - at;
        add_span(c, r, c->pool_rows + at, sz);
        at += sz;
    }
    c->pool_rows += total;
}

/* Runs the case on both backends and compares the outputs. */
static void attention_case(const char *name, const struct acase *c, int32_t hq, int32_t hkv, int32_t dh) {
    int32_t kv_dim = hkv * dh;
    struct jev_attn_shape s = {hq, hkv, dh, 1.0f / sqrtf((float)dh)};
    int64_t rows = 0;
    for (int32_t r = 0; r < c->n_runs; r++)
        rows += c->len[r];
    int64_t nq = rows * hq * dh, nkv = c->pool_rows * kv_dim;
    float *q = ct_host(nq), *k = ct_host(nkv), *v = ct_host(nkv), *o = ct_host(nq);
    ct_fill(q, nq, 5, 0.5f);
    ct_fill(k, nkv, 50, 0.7f);
    ct_fill(v, nkv, 77, 0.9f);
    float *dq = ct_up(q, nq), *dk = ct_up(k, nkv), *dv = ct_up(v, nkv), *dout = ct_up(NULL, nq);

    static struct jev_kv_span hs[MAX_RUNS][MAX_SPANS], ds[MAX_RUNS][MAX_SPANS];
    struct jev_attn_run hr[MAX_RUNS], dr[MAX_RUNS];
    int64_t row0 = 0;
    for (int32_t r = 0; r < c->n_runs; r++) {
        for (int32_t sp = 0; sp < c->n_sp[r]; sp++) {
            int64_t off = c->sp_off[r][sp] * kv_dim;
            hs[r][sp] = (struct jev_kv_span){k + off, v + off, c->sp_n[r][sp]};
            ds[r][sp] = (struct jev_kv_span){dk + off, dv + off, c->sp_n[r][sp]};
        }
        hr[r] = (struct jev_attn_run){row0, c->len[r], c->past[r], hs[r], c->n_sp[r]};
        dr[r] = (struct jev_attn_run){row0, c->len[r], c->past[r], ds[r], c->n_sp[r]};
        row0 += c->len[r];
    }
    jev_cpu_ops.attention(ct_cpu, &s, q, hr, c->n_runs, o);
    ct_ops->attention(ct_gpu, &s, dq, dr, c->n_runs, dout);

    char what[128];
    snprintf(what, sizeof what, "attention %s Hq %d Hkv %d dh %d (%d runs, %lld rows)", name, hq, hkv, dh, c->n_runs,
             (long long)rows);
    float *got = ct_down(dout, nq);
    printf("  %-72s NMSE %.3g\n", what, mat_nmse(o, got, nq));
    ct_check(what, o, got, nq, CT_NMSE_F32);
    /* company: each run alone gives its rows the same bits as among all the others (the kernel a run
     * takes, tiled or per row, is the run's own choice, and its sums depend on its own keys only) */
    float *dalone = ct_up(NULL, nq);
    for (int32_t r = 0; r < c->n_runs; r++) {
        ct_ops->attention(ct_gpu, &s, dq, &dr[r], 1, dalone);
        float *alone = ct_down(dalone, nq);
        size_t at = (size_t)dr[r].row0 * (size_t)hq * (size_t)dh, count = (size_t)c->len[r] * (size_t)hq * (size_t)dh;
        if (memcmp(alone + at, got + at, count * sizeof(float)) != 0)
            fail_msg("%s: run %d (%d rows) alone differs from the same run among %d", what, r, c->len[r], c->n_runs);
        free(alone);
    }
    ct_free(dalone);
    free(got);
    ct_free(dq);
    ct_free(dk);
    ct_free(dv);
    ct_free(dout);
    free(q);
    free(k);
    free(v);
    free(o);
}

static const int32_t shapes[4][3] = {{8, 2, 256}, {8, 2, 64}, {4, 2, 96}, {3, 3, 16}};

static void test_attention_spans(void **state) {
    (void)state;
    static struct acase c;
    memset(&c, 0, sizeof c);
    const int32_t cuts[5] = {17, 5, 1, 30, 9}, pages[1] = {64};
    const int32_t past[5] = {0, 70, 33, 0, 129}, len[5] = {5, 1, 40, 1, 7};
    for (int r = 0; r < 5; r++)
        run_fresh(&c, past[r], len[r], cuts, 5);
    run_fresh(&c, 1000, 2, pages, 1); /* two rows of 4 splits among rows of one: the launch merges */
    for (int sh = 0; sh < 4; sh++)
        attention_case("uneven spans", &c, shapes[sh][0], shapes[sh][1], shapes[sh][2]);
}

/* The decision path: one 530-key prompt prefix (two spans) shared by 65 runs of 1..10 own rows. */
static void test_attention_shared_prefix(void **state) {
    (void)state;
    static struct acase c;
    memset(&c, 0, sizeof c);
    const int32_t prefix = 530, cut = 512;
    c.pool_rows = prefix;
    for (int32_t r = 0; r < 65; r++) {
        int32_t len = 1 + (r * 3) % 10;
        c.n_runs++;
        c.past[r] = prefix;
        c.len[r] = len;
        add_span(&c, r, 0, cut);
        add_span(&c, r, cut, prefix - cut);
        add_span(&c, r, c.pool_rows, len);
        c.pool_rows += len;
    }
    for (int sh = 0; sh < 2; sh++)
        attention_case("shared prefix", &c, shapes[sh][0], shapes[sh][1], shapes[sh][2]);
}

static void test_attention_prefill_decode(void **state) {
    (void)state;
    static struct acase c;
    memset(&c, 0, sizeof c);
    const int32_t whole[1] = {500};
    run_fresh(&c, 0, 500, whole, 1);
    for (int sh = 0; sh < 2; sh++)
        attention_case("prefill", &c, shapes[sh][0], shapes[sh][1], shapes[sh][2]);
    memset(&c, 0, sizeof c);
    const int32_t pages[3] = {256, 256, 189};
    run_fresh(&c, 700, 1, pages, 3);
    for (int sh = 0; sh < 4; sh++)
        attention_case("decode", &c, shapes[sh][0], shapes[sh][1], shapes[sh][2]);
    memset(&c, 0, sizeof c);
    const int32_t page[1] = {128};
    run_fresh(&c, 5000, 1, page, 1); /* 40 spans of 128 keys; 16 splits of 313 keys, across spans */
    for (int sh = 0; sh < 2; sh++)
        attention_case("long decode", &c, shapes[sh][0], shapes[sh][1], shapes[sh][2]);
}

/* ---- vision attention ---- */

static void vision_case(int64_t n, int32_t heads, int32_t hd) {
    int64_t dim = (int64_t)heads * hd, nqkv = n * 3 * dim, no = n * dim;
    float *qkv = ct_host(nqkv), *o = ct_host(no);
    ct_fill(qkv, nqkv, 3, 0.5f);
    float scale = 1.0f / sqrtf((float)hd);
    jev_cpu_ops.vision_attention(ct_cpu, qkv, n, heads, hd, scale, o);
    float *dqkv = ct_up(qkv, nqkv), *dout = ct_up(NULL, no);
    ct_ops->vision_attention(ct_gpu, dqkv, n, heads, hd, scale, dout);
    char what[96];
    snprintf(what, sizeof what, "vision_attention n %lld H %d hd %d", (long long)n, heads, hd);
    float *got = ct_down(dout, no);
    printf("  %-72s NMSE %.3g\n", what, mat_nmse(o, got, no));
    ct_check(what, o, got, no, CT_NMSE_F32);
    free(got);
    ct_free(dqkv);
    ct_free(dout);
    free(qkv);
    free(o);
}

static void test_vision_attention(void **state) {
    (void)state;
    vision_case(3, 2, 16);
    vision_case(4, 16, 64);
    vision_case(64, 16, 64);
    vision_case(1000, 16, 64);
    vision_case(1824, 12, 64);
    vision_case(2100, 64, 16); /* 1.1 GB of scores: several query blocks */
}

/* ---- vision attention, fast mode ---- */

static void set_mode(enum jev_precision p) {
    struct jev_error err = {0};
    if (ct_ops->set_precision(ct_gpu, p, &err) != JEV_OK)
        fail_msg("set_precision %s: %s", jev_precision_name(p), err.msg);
}

/* Fast vision attention of one shape against the bf16 reference's bound, and exact around it. */
static void vision_fast_case(int64_t n, int32_t heads, int32_t hd) {
    const int64_t dim = (int64_t)heads * hd, ld = 3 * dim, nqkv = n * ld, no = n * dim;
    float *qkv = ct_host(nqkv), *o = ct_host(no);
    ct_fill(qkv, nqkv, 3, 0.5f);
    /* V positive, each value 0.99 * 2^-9 (relative) above a bf16 value: under every half spacing, so bf16
     * rounds every one down to that value and the f32 path's output is larger by ~2^-9 of it */
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 2 * dim; c < ld; c++)
            qkv[i * ld + c] = bf16_round(1.0f + 0.4f * (float)cos((double)(i * ld + c))) * (1.0f + 0.99f * 0x1p-9f);
    const float scale = 1.0f / sqrtf((float)hd);
    jev_cpu_ops.vision_attention(ct_cpu, qkv, n, heads, hd, scale, o);
    double *oref = malloc((size_t)no * sizeof(double)), *bound = malloc((size_t)no * sizeof(double));
    assert_true(oref && bound);
    bf16_vision_attention_ref(qkv, n, heads, hd, scale, oref, bound);
    double worst_f32 = 0.0; /* these inputs tell fast from f32: the exact result is outside the bound */
    for (int64_t i = 0; i < no; i++)
        worst_f32 = fmax(worst_f32, fabs((double)o[i] - oref[i]) / bound[i]);
    assert_true(worst_f32 > 1.0);

    float *dqkv = ct_up(qkv, nqkv), *dout = ct_up(NULL, no);
    ct_ops->vision_attention(ct_gpu, dqkv, n, heads, hd, scale, dout);
    float *before = ct_down(dout, no);
    set_mode(JEV_PRECISION_FAST);
    ct_ops->vision_attention(ct_gpu, dqkv, n, heads, hd, scale, dout);
    float *fast = ct_down(dout, no);
    set_mode(JEV_PRECISION_EXACT);
    ct_ops->vision_attention(ct_gpu, dqkv, n, heads, hd, scale, dout);
    float *after = ct_down(dout, no);

    char what[96];
    snprintf(what, sizeof what, "vision_attention n %lld H %d hd %d", (long long)n, heads, hd);
    ct_check(what, o, before, no, CT_NMSE_F32); /* exact as before fast mode had its own path */
    assert_memory_equal(before, after, (size_t)no * sizeof(float));
    assert_true(memcmp(before, fast, (size_t)no * sizeof(float)) != 0); /* fast really ran */
    double worst = 0.0;
    for (int64_t i = 0; i < no; i++) {
        double e = fabs((double)fast[i] - oref[i]);
        if (!isfinite(fast[i]) || !(e <= bound[i]))
            fail_msg("fast %s: out[%lld][%lld] = %.9g, reference %.9g: |error| %.3g above the bound %.3g", what,
                     (long long)(i / dim), (long long)(i % dim), (double)fast[i], oref[i], e, bound[i]);
        if (bound[i] > 0)
            worst = fmax(worst, e / bound[i]);
    }
    printf("  fast %-52s worst error %.2f of the bound (exact's %.3g), NMSE against exact %.3g\n", what, worst,
           worst_f32, mat_nmse(o, fast, no));
    ct_free(dqkv);
    ct_free(dout);
    free(qkv), free(o), free(oref), free(bound), free(before), free(fast), free(after);
}

static void test_vision_attention_fast(void **state) {
    (void)state;
    vision_fast_case(3, 2, 16);
    vision_fast_case(64, 16, 64);
    vision_fast_case(1000, 16, 64);
    vision_fast_case(1824, 12, 64); /* the benchmark image */
    vision_fast_case(2100, 64, 16); /* several query blocks: P's bf16 rows at each block's offsets */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_spans),          cmocka_unit_test(test_attention_shared_prefix),
        cmocka_unit_test(test_attention_prefill_decode), cmocka_unit_test(test_vision_attention),
        cmocka_unit_test(test_vision_attention_fast),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
