/*
 * test-state.c - sequence state and fork rules (model/state.c) and the
 * rotary tables (model/rope.c), without running the model.
 *
 * State: a fork takes no K/V pages and copies exactly the linear state; the
 * child's spans cover the parent's tokens then its own; a parent is frozen
 * while children live and is released only after its last child; pool and
 * slot exhaustion give JEV_ERR_CONTEXT_FULL and change nothing.
 * RoPE: the interleaved axis string of the 0.8B sections (spec section 5.2),
 * the sectioned form, the inverse-frequency values quoted in the spec, text
 * positions with rope_delta.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "lm-fixture.h"  // defines: fx_build (a small config)
#include "model/rope.h"  // defines: jev_rope_*
#include "model/state.h" // defines: jev_state_*, jev_seq_*

static void init_state(struct jev_state *st, struct fx_model *m, int32_t max_tokens, int32_t max_seqs,
                       int32_t kv_tokens) {
    struct jev_error err = {0};
    struct jev_state_params p = {.max_tokens = max_tokens, .max_seqs = max_seqs, .kv_tokens = kv_tokens};
    assert_int_equal(jev_state_init(st, &m->cfg, &p, &err), JEV_OK);
}

static void test_fork_costs_no_pages(void **state) {
    (void)state;
    struct fx_model m;
    fx_build(&m, 1);
    struct jev_state st;
    init_state(&st, &m, 1000, 4, 2000);
    struct jev_error err = {0};
    struct jev_seq *p, *c;
    assert_int_equal(jev_seq_new(&st, &p, &err), JEV_OK);
    assert_int_equal(jev_seq_reserve(p, 900, &err), JEV_OK);
    p->n_tokens = 900; /* as the forward would after writing 900 tokens */
    for (int i = 0; i < 10; i++)
        jev_seq_conv(p, 1)[i] = (float)i, jev_seq_ssm(p, 2)[i] = (float)(100 + i);
    int32_t free_before = st.n_free;
    assert_int_equal(jev_seq_fork(p, &c, &err), JEV_OK);
    assert_int_equal(st.n_free, free_before); /* no K/V copied, no page taken */
    assert_int_equal(c->n_pages, 0);
    assert_int_equal(c->n_tokens, 900);
    assert_int_equal(c->n_prefix, 900);
    size_t lin = (size_t)st.n_linear * ((size_t)st.conv_keep * (size_t)st.conv_dim + (size_t)st.ssm_floats);
    assert_memory_equal(c->conv, p->conv, lin * sizeof(float));
    /* the copy is independent */
    jev_seq_conv(c, 1)[0] = 42.0f;
    assert_true(jev_seq_conv(p, 1)[0] == 0.0f);
    /* the child's spans: the parent's 15 pages (14 full + 4 rows) then its own one */
    assert_int_equal(jev_seq_reserve(c, 10, &err), JEV_OK);
    struct jev_kv_span spans[64];
    int32_t n = jev_seq_spans(c, 1, 910, spans);
    assert_int_equal(n, 16);
    int32_t rows = 0;
    for (int32_t i = 0; i < n; i++)
        rows += spans[i].n;
    assert_int_equal(rows, 910);
    assert_int_equal(spans[14].n, 900 - 14 * JEV_KV_PAGE);
    assert_int_equal(spans[15].n, 10);
    assert_true(spans[15].k == jev_seq_k_row(c, 1, 900));
    assert_true(spans[0].k == jev_seq_k_row(p, 1, 0));
    jev_seq_free(c);
    jev_seq_free(p);
    assert_int_equal(st.n_live, 0);
    assert_int_equal(st.n_free, st.n_pages);
    jev_state_free(&st);
    fx_free(&m);
}

static void test_parent_frozen_and_deferred_free(void **state) {
    (void)state;
    struct fx_model m;
    fx_build(&m, 1);
    struct jev_state st;
    init_state(&st, &m, 256, 4, 512);
    struct jev_error err = {0};
    struct jev_seq *p, *a, *b, *aa;
    assert_int_equal(jev_seq_new(&st, &p, &err), JEV_OK);
    assert_int_equal(jev_seq_reserve(p, 70, &err), JEV_OK);
    p->n_tokens = 70;
    assert_int_equal(jev_seq_fork(p, &a, &err), JEV_OK);
    assert_int_equal(jev_seq_fork(p, &b, &err), JEV_OK);
    assert_int_equal(jev_seq_reserve(p, 1, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "2 live forks"));
    jev_error_clear(&err);
    /* a fork of a fork: a chain of prefixes */
    assert_int_equal(jev_seq_reserve(a, 5, &err), JEV_OK);
    a->n_tokens = 75;
    assert_int_equal(jev_seq_fork(a, &aa, &err), JEV_OK);
    struct jev_kv_span spans[16];
    assert_int_equal(jev_seq_spans(aa, 0, 75, spans), 3); /* p: 64 + 6, a: 5 */
    /* slots exhausted */
    struct jev_seq *x;
    assert_int_equal(jev_seq_new(&st, &x, &err), JEV_ERR_CONTEXT_FULL);
    assert_null(x);
    jev_error_clear(&err);
    /* releasing the parent keeps it (and its pages) while children live */
    int32_t used = st.n_pages - st.n_free;
    jev_seq_free(p);
    assert_true(p->live);
    assert_int_equal(st.n_pages - st.n_free, used);
    assert_int_equal(jev_seq_fork(p, &x, &err), JEV_ERR_INVALID_ARG); /* a freed sequence is not forked */
    jev_error_clear(&err);
    jev_seq_free(b);
    jev_seq_free(a); /* a stays for aa */
    assert_true(a->live && p->live);
    jev_seq_free(aa); /* the last one: aa, then a, then p go */
    assert_false(a->live);
    assert_false(p->live);
    assert_int_equal(st.n_live, 0);
    assert_int_equal(st.n_free, st.n_pages);
    jev_state_free(&st);
    fx_free(&m);
}

static void test_limits(void **state) {
    (void)state;
    struct fx_model m;
    fx_build(&m, 1);
    struct jev_state st;
    init_state(&st, &m, 300, 2, 128); /* 2 pages + 2 spare */
    struct jev_error err = {0};
    struct jev_seq *a, *b;
    assert_int_equal(jev_seq_new(&st, &a, &err), JEV_OK);
    assert_int_equal(jev_seq_new(&st, &b, &err), JEV_OK);
    assert_int_equal(jev_seq_reserve(a, 301, &err), JEV_ERR_CONTEXT_FULL);
    assert_non_null(strstr(err.msg, "max_tokens 300"));
    jev_error_clear(&err);
    assert_int_equal(jev_seq_reserve(a, 200, &err), JEV_OK); /* 4 pages: the whole pool */
    assert_int_equal(jev_seq_reserve(b, 1, &err), JEV_ERR_CONTEXT_FULL);
    assert_non_null(strstr(err.msg, "K/V pool is full"));
    assert_int_equal(b->n_pages, 0);
    jev_error_clear(&err);
    jev_seq_unreserve(a); /* nothing written yet: every page goes back */
    assert_int_equal(st.n_free, st.n_pages);
    assert_int_equal(jev_seq_reserve(b, 1, &err), JEV_OK);
    jev_seq_free(a);
    jev_seq_free(b);
    jev_state_free(&st);
    struct jev_state_params bad = {.max_tokens = 0, .max_seqs = 4};
    assert_int_equal(jev_state_init(&st, &m.cfg, &bad, &err), JEV_ERR_INVALID_ARG);
    fx_free(&m);
}

/* ---- rope ---- */

static void test_rope_axes(void **state) {
    (void)state;
    const int32_t sec[3] = {11, 11, 10};
    uint8_t axis[32];
    char s[33] = {0};
    jev_rope_axes(sec, true, 32, axis);
    for (int i = 0; i < 32; i++)
        s[i] = "THW"[axis[i]];
    assert_string_equal(s, "THWTHWTHWTHWTHWTHWTHWTHWTHWTHWTH"); /* spec section 5.2 */
    jev_rope_axes(sec, false, 32, axis);
    for (int i = 0; i < 32; i++)
        s[i] = "THW"[axis[i]];
    assert_string_equal(s, "TTTTTTTTTTTHHHHHHHHHHHWWWWWWWWWW");
    const int32_t tiny[3] = {3, 3, 2};
    jev_rope_axes(tiny, true, 8, axis);
    for (int i = 0; i < 8; i++)
        s[i] = "THW"[axis[i]];
    s[8] = 0;
    assert_string_equal(s, "THWTHWTH");
}

static void test_rope_tables(void **state) {
    (void)state;
    float inv[32];
    jev_rope_inv_freq(1e7, 64, inv);
    assert_true(inv[0] == 1.0f);
    assert_float_equal(inv[1], 0.60430f, 1e-5); /* spec section 5.1 */
    assert_float_equal(inv[31] / 1.6548e-7f, 1.0f, 1e-4);
    for (int i = 0; i < 32; i++) /* each within an ulp of the exact value */
        assert_float_equal(inv[i] / (float)pow(1e7, -2.0 * i / 64.0), 1.0f, 2e-7);
    /* cos/sin of a (t, h, w) token follow the axis of each pair */
    struct fx_model m;
    fx_build(&m, 1);
    struct jev_rope r;
    struct jev_error err = {0};
    assert_int_equal(jev_rope_init(&r, &m.cfg.text, &err), JEV_OK);
    int32_t pos[3] = {5, 7, 11};
    float c[8], sn[8];
    jev_rope_cos_sin(&r, pos, 1, c, sn);
    for (int i = 0; i < r.n_freq; i++) {
        float angle = (float)pos[r.axis[i]] * r.inv_freq[i];
        assert_true(c[i] == cosf(angle) && sn[i] == sinf(angle));
    }
    assert_int_equal(r.axis[1], JEV_ROPE_H);
    assert_int_equal(r.axis[2], JEV_ROPE_W);
    int32_t tp[6];
    jev_rope_text_positions(10, -3, 2, tp);
    assert_int_equal(tp[0], 7);
    assert_int_equal(tp[2], 7);
    assert_int_equal(tp[3], 8);
    fx_free(&m);
}

/* Light forks (state.h): light slots of their own (full ones untouched), no linear storage, page tables
 * like any fork; the slots run out with a message naming them; a light parent is refused. */
static void test_light_slots(void **state) {
    (void)state;
    struct fx_model m;
    fx_build(&m, 1);
    struct jev_state st;
    struct jev_error err = {0};
    struct jev_state_params sp = {.max_tokens = 1000, .max_seqs = 1, .max_light = 2, .kv_tokens = 2000};
    assert_int_equal(jev_state_init(&st, &m.cfg, &sp, &err), JEV_OK);
    struct jev_seq *p, *a, *b, *c = NULL;
    assert_int_equal(jev_seq_new(&st, &p, &err), JEV_OK);
    assert_int_equal(jev_seq_reserve(p, 100, &err), JEV_OK);
    p->n_tokens = 100;
    assert_int_equal(jev_seq_fork_light(p, &a, &err), JEV_OK);
    assert_int_equal(jev_seq_fork_light(p, &b, &err), JEV_OK);
    assert_true(a->light && b->light && !p->light);
    assert_null(a->conv);
    assert_null(a->ssm);
    assert_true(a->parent == p && !p->parent); /* its forward reads p's state (lm.c) */
    assert_int_equal(st.n_live, 1);
    assert_int_equal(st.n_light, 2);
    assert_int_equal(jev_seq_fork_light(p, &c, &err), JEV_ERR_CONTEXT_FULL);
    assert_non_null(strstr(err.msg, "light-fork slots"));
    jev_error_clear(&err);
    assert_int_equal(jev_seq_fork(p, &c, &err), JEV_ERR_CONTEXT_FULL); /* the one full slot is the parent's */
    assert_non_null(strstr(err.msg, "max_states"));
    jev_error_clear(&err);
    assert_int_equal(jev_seq_fork_light(a, &c, &err), JEV_ERR_INVALID_ARG);
    jev_error_clear(&err);
    assert_int_equal(jev_seq_reserve(a, 10, &err), JEV_OK); /* its one append */
    assert_int_equal(a->n_pages, 1);
    jev_seq_free(p); /* released, kept for its forks */
    assert_int_equal(st.n_live, 1);
    jev_seq_free(a);
    jev_seq_free(b);
    assert_int_equal(st.n_live, 0);
    assert_int_equal(st.n_light, 0);
    assert_int_equal(st.n_free, st.n_pages);
    jev_state_free(&st);
    fx_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_costs_no_pages),
        cmocka_unit_test(test_parent_frozen_and_deferred_free),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_light_slots),
        cmocka_unit_test(test_rope_axes),
        cmocka_unit_test(test_rope_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
