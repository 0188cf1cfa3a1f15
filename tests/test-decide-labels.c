/*
 * test-decide-labels.c - label sets built through a fake encoder: the fixed
 * order, the single-token check alone and after the cue, aliases, shared
 * tokens, and option distributions read from label logits.
 *
 * The fake encoder is a greedy longest-match tokenizer over a small table;
 * a byte no table entry covers becomes two tokens (so "not one token" can
 * be provoked by leaving a string out of the table).
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

#include "decide/labels.h"  // defines: jev_labels_build
#include "decide/request.h" // defines: struct jev_question
#include "wire/request.h"   // defines: jev_request_parse_*, struct jev_request_error

/* ---- the fake encoder ---- */

struct fake_tok {
    const char *text; /* the token's text */
    int32_t id;       /* its id */
};

struct fake_vocab {
    struct fake_tok toks[256]; /* the table */
    int n;                     /* entries */
    int fail;                  /* nonzero: every call fails */
};

static void add(struct fake_vocab *v, const char *text, int32_t id) {
    v->toks[v->n].text = text;
    v->toks[v->n].id = id;
    v->n++;
}

static int fake_encode(void *ctx, const char *text, int32_t *ids, int max) {
    struct fake_vocab *v = ctx;
    if (v->fail)
        return -1;
    int n = 0;
    size_t i = 0, len = strlen(text);
    while (i < len) {
        int best = -1;
        size_t best_len = 0;
        for (int k = 0; k < v->n; k++) {
            size_t l = strlen(v->toks[k].text);
            if (l > best_len && l <= len - i && memcmp(text + i, v->toks[k].text, l) == 0) {
                best = k;
                best_len = l;
            }
        }
        if (best < 0) {
            /* an unknown byte: two tokens */
            if (n < max)
                ids[n] = 5000 + (unsigned char)text[i];
            n++;
            if (n < max)
                ids[n] = 6000 + (unsigned char)text[i];
            n++;
            i++;
            continue;
        }
        if (n < max)
            ids[n] = v->toks[best].id;
        n++;
        i += best_len;
    }
    return n;
}

/* A vocabulary with A..Z, a..z, 0..9, yes/Yes/no/No, "\n\n", a few
 * two-letter codes, "Answer", ":" and the merge ":A". */
static char letters[3][26][2];
static void base_vocab(struct fake_vocab *v, bool with_yes_alias) {
    memset(v, 0, sizeof *v);
    for (int i = 0; i < 26; i++) {
        letters[0][i][0] = (char)('A' + i);
        letters[1][i][0] = (char)('a' + i);
        add(v, letters[0][i], 100 + i);
        add(v, letters[1][i], 200 + i);
    }
    for (int i = 0; i < 10; i++) {
        letters[2][i][0] = (char)('0' + i);
        add(v, letters[2][i], 300 + i);
    }
    add(v, "AA", 400);
    add(v, "AB", 401);
    add(v, "BA", 402);
    add(v, "yes", 500);
    add(v, "no", 501);
    if (with_yes_alias)
        add(v, "Yes", 502);
    add(v, "No", 503);
    add(v, "\n\n", 600);
    add(v, "Answer", 601);
    add(v, ":", 602);
    add(v, ":A", 603);
}

/* ---- building ---- */

static void test_build_order(void **state) {
    (void)state;
    struct fake_vocab v;
    base_vocab(&v, true);
    struct jev_labels *l = malloc(sizeof *l);
    struct jev_error err = {0};
    assert_int_equal(jev_labels_build(l, fake_encode, &v, "\n\n", &err), JEV_OK);
    /* A..Z, then the single-token two-letter codes in order, then a..z, then digits */
    assert_int_equal(l->n_choice, 26 + 3 + 26 + 10);
    assert_string_equal(l->choice[0].text, "A");
    assert_int_equal(l->choice[0].ids[0], 100);
    assert_string_equal(l->choice[25].text, "Z");
    assert_string_equal(l->choice[26].text, "AA");
    assert_string_equal(l->choice[27].text, "AB");
    assert_string_equal(l->choice[28].text, "BA");
    assert_string_equal(l->choice[29].text, "a");
    assert_string_equal(l->choice[55].text, "0");
    assert_string_equal(l->cue, "\n\n");
    /* noul with aliases */
    assert_string_equal(l->noul[0].text, "yes");
    assert_int_equal(l->noul[0].n_ids, 2);
    assert_int_equal(l->noul[0].ids[1], 502);
    assert_int_equal(l->noul[1].n_ids, 2);
    assert_int_equal(l->noul[1].ids[0], 501);
    /* score digits */
    for (int i = 0; i < 10; i++) {
        assert_int_equal(l->score[i].ids[0], 300 + i);
        assert_int_equal(l->score[i].n_ids, 1);
    }
    assert_string_equal(jev_labels_text(l, JEV_QTYPE_SCORE, 7), "7");
    assert_string_equal(jev_labels_text(l, JEV_QTYPE_NOUL, 1), "no");
    assert_null(jev_labels_text(l, JEV_QTYPE_CHOICE, 65));
    /* stable: the same table gives the same labels */
    struct jev_labels *l2 = malloc(sizeof *l2);
    assert_int_equal(jev_labels_build(l2, fake_encode, &v, "\n\n", &err), JEV_OK);
    assert_memory_equal(l, l2, sizeof *l);
    free(l2);
    /* a missing alias is dropped, not an error */
    base_vocab(&v, false);
    assert_int_equal(jev_labels_build(l, fake_encode, &v, "", &err), JEV_OK);
    assert_int_equal(l->noul[0].n_ids, 1);
    free(l);
}

/* After "Answer:" the text "A" merges into ":A": one token alone, two after the cue. */
static void test_cue_context(void **state) {
    (void)state;
    struct fake_vocab v;
    base_vocab(&v, true);
    struct jev_labels *l = malloc(sizeof *l);
    struct jev_error err = {0};
    assert_int_equal(jev_labels_build(l, fake_encode, &v, "Answer:", &err), JEV_OK);
    assert_string_equal(l->choice[0].text, "B"); /* "A" fails after the cue */
    for (int i = 0; i < l->n_choice; i++)
        assert_string_not_equal(l->choice[i].text, "A");
    /* without the cue, "A" is first again */
    assert_int_equal(jev_labels_build(l, fake_encode, &v, "", &err), JEV_OK);
    assert_string_equal(l->choice[0].text, "A");
    free(l);
}

static void test_build_failures(void **state) {
    (void)state;
    struct fake_vocab v;
    struct jev_labels *l = malloc(sizeof *l);
    struct jev_error err = {0};
    /* "7" not in the table: two tokens */
    base_vocab(&v, true);
    for (int k = 0; k < v.n; k++)
        if (strcmp(v.toks[k].text, "7") == 0)
            v.toks[k].text = "\x01";
    assert_int_equal(jev_labels_build(l, fake_encode, &v, "\n\n", &err), JEV_ERR_FORMAT);
    assert_string_equal(err.msg, "labels: the score label \"7\" is not exactly one token after the cue");
    /* yes and no sharing a token */
    jev_error_clear(&err);
    base_vocab(&v, true);
    for (int k = 0; k < v.n; k++)
        if (strcmp(v.toks[k].text, "no") == 0)
            v.toks[k].id = 500;
    assert_int_equal(jev_labels_build(l, fake_encode, &v, "\n\n", &err), JEV_ERR_FORMAT);
    assert_string_equal(err.msg, "labels: the noul label \"no\" shares its token 500 with another label");
    /* the encoder failing */
    jev_error_clear(&err);
    base_vocab(&v, true);
    v.fail = 1;
    assert_int_equal(jev_labels_build(l, fake_encode, &v, "\n\n", &err), JEV_ERR_FORMAT);
    assert_string_equal(err.msg, "labels: the cue encodes to -1 tokens (1 to 64)");
    /* two choice candidates on one token: the second is skipped */
    jev_error_clear(&err);
    base_vocab(&v, true);
    for (int k = 0; k < v.n; k++)
        if (strcmp(v.toks[k].text, "C") == 0)
            v.toks[k].id = 101; /* = "B" */
    assert_int_equal(jev_labels_build(l, fake_encode, &v, "\n\n", &err), JEV_OK);
    assert_string_equal(l->choice[1].text, "B");
    assert_string_equal(l->choice[2].text, "D");
    free(l);
}

/* ---- reading distributions ---- */

static void test_ids_and_probs(void **state) {
    (void)state;
    struct fake_vocab v;
    base_vocab(&v, true);
    struct jev_labels *l = malloc(sizeof *l);
    struct jev_error err = {0};
    assert_int_equal(jev_labels_build(l, fake_encode, &v, "\n\n", &err), JEV_OK);
    const char *body =
        "{\"state\":\"s\",\"questions\":{"
        "\"c\":{\"type\":\"choice\",\"instructions\":\"x\",\"criteria\":{\"a\":null,\"b\":null,\"c\":null}},"
        "\"n\":{\"type\":\"noul\",\"instructions\":\"x\"}}}";
    struct jev_request r;
    struct jev_request_error re;
    assert_int_equal(jev_request_parse_systemone(body, strlen(body), NULL, &r, &re), JEV_OK);
    int32_t ids[16], owner[16];
    int32_t n = jev_labels_ids(l, &r.questions[0], ids, owner, 16);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 100);
    assert_int_equal(ids[2], 102);
    assert_int_equal(owner[2], 2);
    /* logits log 1, log 2, log 3 -> (1, 2, 3) / 6 */
    float lg[3] = {0.0f, logf(2.0f), logf(3.0f)};
    double p[3];
    jev_labels_probs(3, owner, lg, n, p);
    assert_true(fabs(p[0] - 1.0 / 6) < 1e-7 && fabs(p[2] - 0.5) < 1e-7);
    /* noul: yes, Yes, no, No; masses yes = 1 + 1, no = 2 + 0 -> 0.5 / 0.5 */
    n = jev_labels_ids(l, &r.questions[1], ids, owner, 16);
    assert_int_equal(n, 4);
    assert_int_equal(ids[1], 502);
    assert_int_equal(owner[1], 0);
    assert_int_equal(owner[3], 1);
    float ln[4] = {0.0f, 0.0f, logf(2.0f), -INFINITY};
    jev_labels_probs(2, owner, ln, n, p);
    assert_true(fabs(p[0] - 0.5) < 1e-7);
    /* a choice with more options than labels */
    struct jev_question q = r.questions[0];
    q.n_options = l->n_choice + 1;
    assert_int_equal(jev_labels_ids(l, &q, ids, owner, 0), -1);
    assert_int_equal(jev_labels_check(l, &q, &err), JEV_ERR_INVALID_ARG);
    assert_string_equal(err.msg, "questions.c.criteria: 66 options, but this tokenizer has only 65 single-token "
                                 "labels (the label-mode limit); use text-mode scoring");
    jev_error_clear(&err);
    assert_int_equal(jev_labels_check(l, &r.questions[0], &err), JEV_OK);
    jev_request_free(&r);
    free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_order),
        cmocka_unit_test(test_cue_context),
        cmocka_unit_test(test_build_failures),
        cmocka_unit_test(test_ids_and_probs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
