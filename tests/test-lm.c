/*
 * test-lm.c - the language model forward (model/lm.c) on the in-memory
 * fixture model: against the independent double-precision twin
 * (tests/lm-fixture.h), and the self-consistency cases that must hold
 * without any golden: chunked == recurrent, prefill in chunks == one piece,
 * fork + suffix == the full sequence, a batch of sequences == each alone,
 * candidate rows == the same columns of the full vocabulary, image-style
 * M-RoPE positions and embedding overrides, and the argument errors.
 * (The transformers goldens on the synthesized tiny model are in
 * test-lm-golden.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h" // defines: jev_cpu_ops, jev_cpu_backend_new
#include "base/pool.h"   // defines: jev_pool_init
#include "lm-fixture.h"  // defines: struct fx_model, fx_twin_*
#include "model/lm.h"    // defines: jev_lm_*

/* ---- harness ---- */

struct env {
    struct fx_model m;
    struct jev_pool *pool;
    struct jev_backend *be;
    struct jev_state st;
    struct jev_lm lm;
    struct jev_error err;
};

/* An lm whose slices hold at most max_light light forks (8 is more than any test here batches). */
static struct env *env_new_light(int32_t max_batch_tokens, int32_t max_light) {
    struct env *e = calloc(1, sizeof *e);
    assert_non_null(e);
    fx_build(&e->m, 42);
    assert_int_equal(jev_pool_init(&e->pool, 2, &e->err), JEV_OK);
    e->be = jev_cpu_backend_new(e->pool);
    assert_non_null(e->be);
    struct jev_state_params sp = {.max_tokens = 1024, .max_seqs = 8, .max_light = 8, .kv_tokens = 4096};
    assert_int_equal(jev_state_init(&e->st, &e->m.cfg, &sp, &e->err), JEV_OK);
    struct jev_lm_params lp = {.max_batch_tokens = max_batch_tokens,
                               .max_runs = 8,
                               .max_tokens = 1024,
                               .max_spans = jev_seq_max_spans(&e->st),
                               .max_light = max_light};
    assert_int_equal(jev_lm_init(&e->lm, &e->m.cfg, &e->m.w, &jev_cpu_ops, e->be, &lp, &e->err), JEV_OK);
    return e;
}

static struct env *env_new(int32_t max_batch_tokens) { return env_new_light(max_batch_tokens, 8); }

static void env_free(struct env *e) {
    jev_lm_free(&e->lm);
    jev_state_free(&e->st);
    jev_cpu_backend_free(e->be);
    jev_pool_free(e->pool);
    fx_free(&e->m);
    free(e);
}

static int32_t vocab(const struct env *e) { return e->m.cfg.text.vocab_size; }

/* Appends ids[0..n) to seq in one forward; logits of every row (full vocabulary) into out[n][vocab]. */
static enum jev_status run_one(struct env *e, struct jev_seq *seq, const int32_t *ids, int32_t n, float *out) {
    int32_t *pos = malloc((size_t)n * 3 * sizeof(int32_t));
    int32_t *rows = malloc((size_t)n * sizeof(int32_t));
    jev_lm_text_positions(seq, n, pos);
    for (int32_t i = 0; i < n; i++)
        rows[i] = i;
    struct jev_lm_batch b = {.n_tokens = n,
                             .ids = ids,
                             .pos = pos,
                             .n_runs = 1,
                             .seqs = &seq,
                             .seq_len = &n,
                             .n_out = out ? n : 0,
                             .out_idx = rows,
                             .logits = out};
    enum jev_status s = jev_lm_forward(&e->lm, &b, &e->err);
    free(pos);
    free(rows);
    return s;
}

/* max |a - b| / max |b| over n values */
static double rel_err(const float *a, const float *b, int64_t n) {
    double md = 0, mb = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > md)
            md = d;
        if (fabs((double)b[i]) > mb)
            mb = fabs((double)b[i]);
    }
    return md / (mb > 0 ? mb : 1);
}

static double rel_err_d(const float *a, const double *b, int64_t n) {
    double md = 0, mb = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md)
            md = d;
        if (fabs(b[i]) > mb)
            mb = fabs(b[i]);
    }
    return md / (mb > 0 ? mb : 1);
}

static void expect_close(const char *what, double err, double limit) {
    printf("  %-40s rel err %.3g (limit %.3g)\n", what, err, limit);
    if (err > limit)
        fail_msg("%s: relative error %.3g > %.3g", what, err, limit);
}

/* Twin logits for ids[0..n) after a fresh start: out[n][vocab]. */
static void twin_run(const struct env *e, struct fx_twin *tw, const int32_t *ids, int32_t n, double *out) {
    for (int32_t i = 0; i < n; i++) {
        int32_t p = tw->n;
        int32_t pos[3] = {p, p, p};
        fx_twin_step(tw, ids[i], pos, out + (size_t)i * (size_t)vocab(e));
    }
}

/* ---- against the twin ---- */

/* A 150-token prefill (chunks 64 + 64 + 22) and 6 decode steps match the double twin. */
static void test_prefill_decode_vs_twin(void **state) {
    (void)state;
    struct env *e = env_new(512);
    int32_t n = 150, nd = 6, V = vocab(e);
    int32_t ids[156];
    fx_tokens(7, n + nd, V, ids);
    float *got = malloc((size_t)(n + nd) * (size_t)V * sizeof(float));
    double *want = malloc((size_t)(n + nd) * (size_t)V * sizeof(double));
    struct fx_twin tw;
    fx_twin_init(&tw, &e->m, 256);
    twin_run(e, &tw, ids, n + nd, want);

    struct jev_seq *seq;
    assert_int_equal(jev_seq_new(&e->st, &seq, &e->err), JEV_OK);
    assert_int_equal(run_one(e, seq, ids, n, got), JEV_OK);
    for (int32_t i = 0; i < nd; i++)
        assert_int_equal(run_one(e, seq, ids + n + i, 1, got + (size_t)(n + i) * (size_t)V), JEV_OK);
    assert_int_equal(seq->n_tokens, n + nd);
    for (int32_t i = 0; i < n + nd; i++) {
        char what[64];
        snprintf(what, sizeof what, "logits at position %d", i);
        expect_close(what, rel_err_d(got + (size_t)i * (size_t)V, want + (size_t)i * (size_t)V, V), 1e-4);
    }
    assert_int_equal(e->lm.n_forwards, 1 + nd);
    jev_seq_free(seq);
    fx_twin_free(&tw);
    free(got);
    free(want);
    env_free(e);
}

/* Token-by-token (recurrent after the first) == one chunked prefill, within f32 rounding. */
static void test_chunked_equals_recurrent(void **state) {
    (void)state;
    struct env *e = env_new(512);
    int32_t n = 100, V = vocab(e);
    int32_t ids[100];
    fx_tokens(11, n, V, ids);
    float *a = malloc((size_t)n * (size_t)V * sizeof(float));
    float *b = malloc((size_t)n * (size_t)V * sizeof(float));
    struct jev_seq *s1, *s2;
    assert_int_equal(jev_seq_new(&e->st, &s1, &e->err), JEV_OK);
    assert_int_equal(jev_seq_new(&e->st, &s2, &e->err), JEV_OK);
    assert_int_equal(run_one(e, s1, ids, n, a), JEV_OK);
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(run_one(e, s2, ids + i, 1, b + (size_t)i * (size_t)V), JEV_OK);
    expect_close("chunked vs recurrent logits", rel_err(b, a, (int64_t)n * V), 2e-5);
    jev_seq_free(s1);
    jev_seq_free(s2);
    free(a);
    free(b);
    env_free(e);
}

/* Prefill in uneven pieces (7, 64, 100, rest) == one piece; also with a tiny slice size. */
static void test_prefill_pieces(void **state) {
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        struct env *e = env_new(variant == 0 ? 512 : 32);
        int32_t n = 200, V = vocab(e);
        int32_t ids[200];
        fx_tokens(13, n, V, ids);
        float *a = malloc((size_t)n * (size_t)V * sizeof(float));
        float *b = malloc((size_t)n * (size_t)V * sizeof(float));
        struct jev_seq *s1, *s2;
        assert_int_equal(jev_seq_new(&e->st, &s1, &e->err), JEV_OK);
        assert_int_equal(jev_seq_new(&e->st, &s2, &e->err), JEV_OK);
        assert_int_equal(run_one(e, s1, ids, n, a), JEV_OK);
        const int32_t pieces[4] = {7, 64, 100, 29};
        int32_t at = 0;
        for (int p = 0; p < 4; p++) {
            assert_int_equal(run_one(e, s2, ids + at, pieces[p], b + (size_t)at * (size_t)V), JEV_OK);
            at += pieces[p];
        }
        assert_int_equal(at, n);
        expect_close("pieces vs one prefill", rel_err(b, a, (int64_t)n * V), 5e-5);
        jev_seq_free(s1);
        jev_seq_free(s2);
        free(a);
        free(b);
        env_free(e);
    }
}

/* Forks of one prefix with suffixes of 1, 5 and 70 tokens in one batch == the full sequences (twin). */
static void test_fork_suffix_batch(void **state) {
    (void)state;
    struct env *e = env_new(512);
    int32_t np = 90, V = vocab(e);
    const int32_t lens[3] = {1, 5, 70};
    int32_t prefix[90], suf[3][70];
    fx_tokens(17, np, V, prefix);
    for (int k = 0; k < 3; k++)
        fx_tokens(100 + (uint64_t)k, lens[k], V, suf[k]);
    struct jev_seq *parent, *kids[3];
    assert_int_equal(jev_seq_new(&e->st, &parent, &e->err), JEV_OK);
    assert_int_equal(run_one(e, parent, prefix, np, NULL), JEV_OK);
    for (int k = 0; k < 3; k++)
        assert_int_equal(jev_seq_fork(parent, &kids[k], &e->err), JEV_OK);

    /* one batch: the three suffixes, logits at every suffix row */
    int32_t n = lens[0] + lens[1] + lens[2];
    int32_t ids[76], pos[76 * 3], rows[76];
    int32_t at = 0;
    for (int k = 0; k < 3; k++) {
        memcpy(ids + at, suf[k], (size_t)lens[k] * sizeof(int32_t));
        jev_lm_text_positions(kids[k], lens[k], pos + at * 3);
        at += lens[k];
    }
    for (int32_t i = 0; i < n; i++)
        rows[i] = i;
    float *got = malloc((size_t)n * (size_t)V * sizeof(float));
    struct jev_lm_batch b = {.n_tokens = n,
                             .ids = ids,
                             .pos = pos,
                             .n_runs = 3,
                             .seqs = kids,
                             .seq_len = lens,
                             .n_out = n,
                             .out_idx = rows,
                             .logits = got};
    assert_int_equal(jev_lm_forward(&e->lm, &b, &e->err), JEV_OK);

    /* twin: the prefix once, then a copy per suffix */
    struct fx_twin tw;
    fx_twin_init(&tw, &e->m, 256);
    double *tmp = malloc((size_t)np * (size_t)V * sizeof(double));
    twin_run(e, &tw, prefix, np, tmp);
    double *want = malloc((size_t)70 * (size_t)V * sizeof(double));
    at = 0;
    for (int k = 0; k < 3; k++) {
        struct fx_twin c;
        fx_twin_copy(&c, &tw);
        twin_run(e, &c, suf[k], lens[k], want);
        char what[64];
        snprintf(what, sizeof what, "fork %d (suffix %d tokens)", k, lens[k]);
        expect_close(what, rel_err_d(got + (size_t)at * (size_t)V, want, (int64_t)lens[k] * V), 1e-4);
        assert_int_equal(kids[k]->n_tokens, np + lens[k]);
        at += lens[k];
        fx_twin_free(&c);
    }
    /* the parent is frozen while forks live */
    assert_int_not_equal(run_one(e, parent, prefix, 1, NULL), JEV_OK);
    assert_int_equal(e->err.status, JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(e->err.msg, "live forks"));
    jev_error_clear(&e->err);
    assert_int_equal(parent->n_tokens, np);
    for (int k = 0; k < 3; k++)
        jev_seq_free(kids[k]);
    assert_int_equal(run_one(e, parent, prefix, 1, NULL), JEV_OK);
    jev_seq_free(parent);
    assert_int_equal(e->st.n_live, 0);
    fx_twin_free(&tw);
    free(tmp);
    free(want);
    free(got);
    env_free(e);
}

/* Forks of parent with suffixes sufs[k] of lens[k] tokens (light or full), in one batch: logits of
 * every row into out[rows][vocab]; the forks stay alive in kids. */
static enum jev_status fork_batch(struct env *e, struct jev_seq *parent, bool light, int32_t n_kids,
                                  const int32_t *lens, int32_t (*sufs)[64], struct jev_seq **kids, float *out) {
    int32_t ids[256], pos[256 * 3], rows[256], n = 0;
    for (int32_t k = 0; k < n_kids; k++) {
        enum jev_status s =
            light ? jev_seq_fork_light(parent, &kids[k], &e->err) : jev_seq_fork(parent, &kids[k], &e->err);
        assert_int_equal(s, JEV_OK);
        memcpy(ids + n, sufs[k], (size_t)lens[k] * sizeof(int32_t));
        jev_lm_text_positions(kids[k], lens[k], pos + n * 3);
        n += lens[k];
    }
    for (int32_t i = 0; i < n; i++)
        rows[i] = i;
    struct jev_lm_batch b = {.n_tokens = n,
                             .ids = ids,
                             .pos = pos,
                             .n_runs = n_kids,
                             .seqs = kids,
                             .seq_len = lens,
                             .n_out = n,
                             .out_idx = rows,
                             .logits = out};
    return jev_lm_forward(&e->lm, &b, &e->err);
}

/*
 * Light forks (model/state.h) answer what full forks answer: the same bits when the batches are cut
 * the same way (suffixes of 1 and 30 tokens in one 64-token slice), the same within rounding when a
 * light run starts the next slice where a full one is split (1 + 30 + 50 tokens); the parent's state
 * is read, never written; a light fork runs once, is not forked, and a run longer than a slice is
 * refused with nothing changed.
 */
static void light_forks(int32_t per_slice) {
    struct env *e = env_new_light(64, per_slice);
    int32_t np = 90, V = vocab(e);
    const int32_t lens[3] = {1, 30, 50};
    int32_t prefix[90], sufs[3][64];
    fx_tokens(17, np, V, prefix);
    for (int k = 0; k < 3; k++)
        fx_tokens(200 + (uint64_t)k, lens[k], V, sufs[k]);
    struct jev_seq *parent;
    assert_int_equal(jev_seq_new(&e->st, &parent, &e->err), JEV_OK);
    assert_int_equal(run_one(e, parent, prefix, np, NULL), JEV_OK);
    size_t lin = (size_t)(jev_seq_ssm(parent, 0) - jev_seq_conv(parent, 0)) * sizeof(float) +
                 (size_t)e->st.n_linear * (size_t)e->st.ssm_floats * sizeof(float);
    float *before = malloc(lin);
    memcpy(before, parent->conv, lin);

    float *full = malloc((size_t)81 * (size_t)V * sizeof(float));
    float *light = malloc((size_t)81 * (size_t)V * sizeof(float));
    struct jev_seq *fk[3], *lk[3];
    for (int cut = 2; cut <= 3; cut++) { /* 2: one slice for both; 3: the 50-token run crosses it */
        int32_t rows = cut == 2 ? 31 : 81;
        assert_int_equal(fork_batch(e, parent, false, cut, lens, sufs, fk, full), JEV_OK);
        int64_t slices = e->lm.n_slices;
        assert_int_equal(fork_batch(e, parent, true, cut, lens, sufs, lk, light), JEV_OK);
        /* 1 + 30 share a slice; 50 more start the next; one light fork a slice: a slice each */
        assert_int_equal(e->lm.n_slices - slices, per_slice == 1 ? cut : cut - 1);
        assert_int_equal(e->st.n_light, cut);
        assert_memory_equal(parent->conv, before, lin); /* read, never written */
        if (cut == 2 && per_slice > 1)
            assert_memory_equal(light, full, (size_t)rows * (size_t)V * sizeof(float));
        else
            expect_close("light vs full forks, other slices", rel_err(light, full, (int64_t)rows * V), 1e-5);
        for (int k = 0; k < cut; k++) {
            assert_int_equal(lk[k]->n_tokens, np + lens[k]);
            jev_seq_free(fk[k]);
        }
        /* spent: no second append, no fork */
        assert_int_not_equal(run_one(e, lk[1], sufs[0], 1, NULL), JEV_OK);
        assert_int_equal(e->err.status, JEV_ERR_INVALID_ARG);
        assert_non_null(strstr(e->err.msg, "light fork that has run"));
        jev_error_clear(&e->err);
        struct jev_seq *grand = NULL;
        assert_int_equal(jev_seq_fork(lk[0], &grand, &e->err), JEV_ERR_INVALID_ARG);
        assert_null(grand);
        jev_error_clear(&e->err);
        for (int k = 0; k < cut; k++)
            jev_seq_free(lk[k]);
        assert_int_equal(e->st.n_light, 0);
    }
    /* a light run must fit one slice (64 tokens): refused before anything moves */
    int32_t long_ids[70];
    fx_tokens(300, 70, V, long_ids);
    struct jev_seq *lf;
    assert_int_equal(jev_seq_fork_light(parent, &lf, &e->err), JEV_OK);
    int32_t pages = e->st.n_free;
    assert_int_equal(run_one(e, lf, long_ids, 70, NULL), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(e->err.msg, "longer than one slice"));
    jev_error_clear(&e->err);
    assert_int_equal(lf->n_tokens, np);
    assert_int_equal(e->st.n_free, pages);
    assert_int_equal(run_one(e, lf, long_ids, 64, NULL), JEV_OK); /* exactly a slice: fine */
    jev_seq_free(lf);
    jev_seq_free(parent);
    assert_int_equal(e->st.n_live, 0);
    assert_int_equal(e->st.n_light, 0);
    assert_int_equal(e->st.n_free, e->st.n_pages);
    free(before);
    free(full);
    free(light);
    env_free(e);
}

/* ... and with room for one light fork a slice, each starts a slice of its own (the same within rounding). */
static void test_light_forks(void **state) {
    (void)state;
    light_forks(8);
    light_forks(1);
}

/* Three fresh sequences in one batch == each alone. */
static void test_batch_equals_alone(void **state) {
    (void)state;
    struct env *e = env_new(512);
    int32_t V = vocab(e);
    const int32_t lens[3] = {33, 1, 80};
    int32_t ids[114], pos[114 * 3], rows[3];
    fx_tokens(23, 114, V, ids);
    struct jev_seq *seqs[3], *alone[3];
    int32_t at = 0;
    for (int k = 0; k < 3; k++) {
        assert_int_equal(jev_seq_new(&e->st, &seqs[k], &e->err), JEV_OK);
        jev_lm_text_positions(seqs[k], lens[k], pos + at * 3);
        at += lens[k];
        rows[k] = at - 1; /* the last token of each run */
    }
    float got[3 * 101];
    struct jev_lm_batch b = {.n_tokens = 114,
                             .ids = ids,
                             .pos = pos,
                             .n_runs = 3,
                             .seqs = seqs,
                             .seq_len = lens,
                             .n_out = 3,
                             .out_idx = rows,
                             .logits = got};
    assert_int_equal(jev_lm_forward(&e->lm, &b, &e->err), JEV_OK);
    at = 0;
    for (int k = 0; k < 3; k++) {
        float *all = malloc((size_t)lens[k] * (size_t)V * sizeof(float));
        assert_int_equal(jev_seq_new(&e->st, &alone[k], &e->err), JEV_OK);
        assert_int_equal(run_one(e, alone[k], ids + at, lens[k], all), JEV_OK);
        expect_close("batched vs alone", rel_err(got + k * V, all + (size_t)(lens[k] - 1) * (size_t)V, V), 1e-5);
        at += lens[k];
        free(all);
        jev_seq_free(alone[k]);
        jev_seq_free(seqs[k]);
    }
    env_free(e);
}

/* Candidate rows give the same values as the full vocabulary's columns. */
static void test_vocab_rows(void **state) {
    (void)state;
    struct env *e = env_new(512);
    int32_t V = vocab(e), n = 20;
    int32_t ids[20];
    fx_tokens(29, n, V, ids);
    float *full = malloc((size_t)n * (size_t)V * sizeof(float));
    struct jev_seq *s1, *s2;
    assert_int_equal(jev_seq_new(&e->st, &s1, &e->err), JEV_OK);
    assert_int_equal(jev_seq_new(&e->st, &s2, &e->err), JEV_OK);
    assert_int_equal(run_one(e, s1, ids, n, full), JEV_OK);
    const int32_t cand[4] = {100, 3, 57, 3};
    const int32_t out_rows[2] = {4, 19};
    float got[2 * 4];
    int32_t pos[20 * 3];
    jev_lm_text_positions(s2, n, pos);
    struct jev_lm_batch b = {.n_tokens = n,
                             .ids = ids,
                             .pos = pos,
                             .n_runs = 1,
                             .seqs = &s2,
                             .seq_len = &n,
                             .n_out = 2,
                             .out_idx = out_rows,
                             .n_vocab_rows = 4,
                             .vocab_rows = cand,
                             .logits = got};
    assert_int_equal(jev_lm_forward(&e->lm, &b, &e->err), JEV_OK);
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 4; c++)
            assert_float_equal(got[r * 4 + c], full[(size_t)out_rows[r] * (size_t)V + (size_t)cand[c]], 1e-5);
    jev_seq_free(s1);
    jev_seq_free(s2);
    free(full);
    env_free(e);
}

/* Distinct t/h/w positions (an image-like run) and embedding overrides match the twin. */
static void test_mrope_positions_and_overrides(void **state) {
    (void)state;
    struct env *e = env_new(512);
    int32_t V = vocab(e), D = e->m.cfg.text.hidden, n = 20;
    int32_t ids[20], pos[20 * 3];
    fx_tokens(31, n, V, ids);
    /* 4 text tokens, a 3 x 4 "image" grid at cur = 4, then text from 4 + 4 = 8 */
    for (int32_t i = 0; i < n; i++) {
        if (i < 4) {
            pos[i * 3] = pos[i * 3 + 1] = pos[i * 3 + 2] = i;
        } else if (i < 16) {
            int32_t k = i - 4;
            pos[i * 3] = 4;
            pos[i * 3 + 1] = 4 + k / 4;
            pos[i * 3 + 2] = 4 + k % 4;
        } else {
            pos[i * 3] = pos[i * 3 + 1] = pos[i * 3 + 2] = 8 + (i - 16);
        }
    }
    /* tokens 4..15 take the embedding row of token id 5 + k as an override */
    const float *rows_ptr[20] = {0};
    const float *emb = e->m.w.text.embed.data;
    int32_t twin_ids[20];
    for (int32_t i = 0; i < n; i++) {
        twin_ids[i] = ids[i];
        if (i >= 4 && i < 16) {
            rows_ptr[i] = emb + (size_t)(5 + i) * (size_t)D;
            twin_ids[i] = 5 + i;
        }
    }
    struct jev_seq *seq;
    assert_int_equal(jev_seq_new(&e->st, &seq, &e->err), JEV_OK);
    int32_t out_rows[20];
    for (int32_t i = 0; i < n; i++)
        out_rows[i] = i;
    float *got = malloc((size_t)n * (size_t)V * sizeof(float));
    struct jev_lm_batch b = {.n_tokens = n,
                             .ids = ids,
                             .pos = pos,
                             .embd_rows = rows_ptr,
                             .n_runs = 1,
                             .seqs = &seq,
                             .seq_len = &n,
                             .n_out = n,
                             .out_idx = out_rows,
                             .logits = got};
    assert_int_equal(jev_lm_forward(&e->lm, &b, &e->err), JEV_OK);
    struct fx_twin tw;
    fx_twin_init(&tw, &e->m, 64);
    double *want = malloc((size_t)n * (size_t)V * sizeof(double));
    for (int32_t i = 0; i < n; i++)
        fx_twin_step(&tw, twin_ids[i], pos + i * 3, want + (size_t)i * (size_t)V);
    expect_close("M-RoPE + overrides vs twin", rel_err_d(got, want, (int64_t)n * V), 1e-4);
    fx_twin_free(&tw);
    jev_seq_free(seq);
    free(got);
    free(want);
    env_free(e);
}

/* ---- hook and errors ---- */

struct hook_log {
    int embed, layers, norm;
    int64_t rows;
};

static void count_hook(void *user, const char *name, int32_t layer, const float *x, int64_t row0, int64_t rows,
                       int64_t cols) {
    (void)x;
    (void)row0;
    (void)cols;
    struct hook_log *h = user;
    if (!strcmp(name, "embed"))
        h->embed++, h->rows += rows;
    else if (!strcmp(name, "layer"))
        h->layers += layer >= 0;
    else if (!strcmp(name, "norm"))
        h->norm++;
}

static void test_hook_and_slices(void **state) {
    (void)state;
    struct env *e = env_new(16);
    struct hook_log log = {0};
    e->lm.hook = count_hook;
    e->lm.hook_user = &log;
    int32_t ids[40];
    fx_tokens(37, 40, vocab(e), ids);
    struct jev_seq *seq;
    assert_int_equal(jev_seq_new(&e->st, &seq, &e->err), JEV_OK);
    assert_int_equal(run_one(e, seq, ids, 40, NULL), JEV_OK);
    /* 40 tokens in slices of 16: 3 slices */
    assert_int_equal(log.embed, 3);
    assert_int_equal(log.rows, 40);
    assert_int_equal(log.layers, 3 * e->m.cfg.text.n_layers);
    assert_int_equal(log.norm, 3);
    assert_int_equal(e->lm.n_slices, 3);
    jev_seq_free(seq);
    env_free(e);
}

static void test_errors_change_nothing(void **state) {
    (void)state;
    struct env *e = env_new(512);
    struct jev_seq *a, *b2;
    assert_int_equal(jev_seq_new(&e->st, &a, &e->err), JEV_OK);
    assert_int_equal(jev_seq_new(&e->st, &b2, &e->err), JEV_OK);
    int32_t ids[4] = {1, 2, 3, 4};
    assert_int_equal(run_one(e, a, ids, 4, NULL), JEV_OK);
    /* a bad id */
    int32_t bad[2] = {1, 5000};
    assert_int_equal(run_one(e, a, bad, 2, NULL), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(e->err.msg, "outside the vocabulary"));
    jev_error_clear(&e->err);
    /* the same sequence twice */
    struct jev_seq *two[2] = {a, a};
    int32_t lens[2] = {1, 1}, pos[6] = {0};
    struct jev_lm_batch b = {.n_tokens = 2, .ids = ids, .pos = pos, .n_runs = 2, .seqs = two, .seq_len = lens};
    assert_int_equal(jev_lm_forward(&e->lm, &b, &e->err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(e->err.msg, "same sequence"));
    jev_error_clear(&e->err);
    /* the second run does not fit: the first must not advance either */
    int32_t *many = calloc(1100, sizeof(int32_t));
    int32_t *mpos = calloc(1100 * 3, sizeof(int32_t));
    struct jev_seq *pair[2] = {b2, a};
    int32_t plens[2] = {2, 1030};
    struct jev_lm_batch big = {.n_tokens = 1032, .ids = many, .pos = mpos, .n_runs = 2, .seqs = pair, .seq_len = plens};
    assert_int_equal(jev_lm_forward(&e->lm, &big, &e->err), JEV_ERR_CONTEXT_FULL);
    assert_non_null(strstr(e->err.msg, "max_tokens"));
    jev_error_clear(&e->err);
    assert_int_equal(a->n_tokens, 4);
    assert_int_equal(b2->n_tokens, 0);
    assert_int_equal(b2->n_pages, 0);
    /* logits rows must increase */
    int32_t rows[2] = {1, 0};
    float lg[2 * 101];
    int32_t n2 = 2;
    int32_t p2[6];
    jev_lm_text_positions(a, 2, p2);
    struct jev_lm_batch c = {.n_tokens = 2,
                             .ids = ids,
                             .pos = p2,
                             .n_runs = 1,
                             .seqs = &a,
                             .seq_len = &n2,
                             .n_out = 2,
                             .out_idx = rows,
                             .logits = lg};
    assert_int_equal(jev_lm_forward(&e->lm, &c, &e->err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(e->err.msg, "strictly increasing"));
    assert_int_equal(e->lm.n_forwards, 1);
    free(many);
    free(mpos);
    jev_seq_free(a);
    jev_seq_free(b2);
    env_free(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefill_decode_vs_twin),
        cmocka_unit_test(test_chunked_equals_recurrent),
        cmocka_unit_test(test_prefill_pieces),
        cmocka_unit_test(test_fork_suffix_batch),
        cmocka_unit_test(test_batch_equals_alone),
        cmocka_unit_test(test_light_forks),
        cmocka_unit_test(test_vocab_rows),
        cmocka_unit_test(test_mrope_positions_and_overrides),
        cmocka_unit_test(test_hook_and_slices),
        cmocka_unit_test(test_errors_change_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
