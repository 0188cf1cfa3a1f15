/*
 * test-trie.c - the candidate trie: shared beginnings, a candidate that is a
 * prefix of another, identical and empty candidates, the query positions,
 * and candidate scores checked against a brute-force walk that scores every
 * candidate on its own from a fake model's full-vocabulary logits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "decide/trie.h" // defines: jev_trie_*

#define VOCAB 64

/* A fake model: the logits after a token path, a deterministic function of the path. */
static void fake_logits(const int32_t *path, int32_t n, float *row) {
    uint32_t h = 2166136261u;
    for (int32_t i = 0; i < n; i++)
        h = (h ^ (uint32_t)path[i]) * 16777619u;
    for (int32_t v = 0; v < VOCAB; v++) {
        uint32_t x = (h ^ (uint32_t)v * 2654435761u) * 2246822519u;
        row[v] = (float)((x >> 8) % 1000) / 100.0f - 5.0f;
    }
}

/* Brute force: one candidate, position by position, full log-softmax each time. */
static double brute_logprob(const int32_t *cand, int32_t len) {
    double total = 0.0;
    float row[VOCAB];
    for (int32_t k = 0; k < len; k++) {
        fake_logits(cand, k, row);
        double mx = -1e300, sum = 0.0;
        for (int v = 0; v < VOCAB; v++)
            mx = (double)row[v] > mx ? (double)row[v] : mx;
        for (int v = 0; v < VOCAB; v++)
            sum += exp((double)row[v] - mx);
        total += (double)row[cand[k]] - mx - log(sum);
    }
    return total;
}

/* "New York", "New Delhi", "New" (a prefix of both), "Paris" as token ids. */
static const int32_t c_ny[] = {10, 20}, c_nd[] = {10, 30}, c_new[] = {10}, c_paris[] = {40, 41, 42};
static const int32_t *const cands[] = {c_ny, c_nd, c_new, c_paris};
static const int32_t lens[] = {2, 2, 1, 3};
static const char *const names[] = {"New York", "New Delhi", "New", "Paris"};

static void test_structure(void **state) {
    (void)state;
    struct jev_trie t;
    struct jev_error err = {0};
    assert_int_equal(jev_trie_build(&t, cands, lens, 4, names, &err), JEV_OK);
    /* root, New, York, Delhi, Pa, ri, s: the shared "New" is one node */
    assert_int_equal(t.n_nodes, 7);
    assert_int_equal(t.nodes[t.cand_node[0]].first_child, -1); /* York is a leaf */
    int32_t new_node = t.cand_node[2];
    assert_int_equal(t.nodes[new_node].token, 10);
    assert_int_equal(t.nodes[new_node].terminal, 2);   /* "New" ends here ... */
    assert_int_equal(t.nodes[new_node].n_children, 2); /* ... and it is interior */
    assert_int_equal(t.nodes[t.cand_node[0]].parent, new_node);
    assert_int_equal(t.nodes[t.cand_node[1]].parent, new_node);
    for (int32_t i = 1; i < t.n_nodes; i++)
        assert_true(t.nodes[i].parent < i); /* parents first */
    /* queries: root, New, Pa, ri; leaves York, Delhi, s are never fed */
    int32_t q[8];
    assert_int_equal(jev_trie_queries(&t, q, 8), 4);
    assert_int_equal(q[0], 0);
    assert_int_equal(q[1], new_node);
    int32_t toks[4], kids[4];
    assert_int_equal(jev_trie_children(&t, 0, toks, kids, 4), 2);
    assert_int_equal(toks[0], 10);
    assert_int_equal(toks[1], 40);
    assert_int_equal(jev_trie_children(&t, new_node, toks, NULL, 4), 2);
    assert_int_equal(toks[0], 20); /* children in insertion order */
    assert_int_equal(toks[1], 30);
    int32_t path[4];
    assert_int_equal(jev_trie_path(&t, t.cand_node[3], path, 4), 3);
    assert_memory_equal(path, c_paris, sizeof c_paris);
    assert_int_equal(jev_trie_path(&t, 0, path, 4), 0);
    jev_trie_free(&t);
}

/* Fills every query from the fake model, then checks sum and mean against brute force. */
static void test_scores_match_brute_force(void **state) {
    (void)state;
    for (int use_logits = 0; use_logits < 2; use_logits++) {
        struct jev_trie t;
        struct jev_error err = {0};
        assert_int_equal(jev_trie_build(&t, cands, lens, 4, names, &err), JEV_OK);
        int32_t q[8];
        int32_t nq = jev_trie_queries(&t, q, 8);
        for (int32_t i = 0; i < nq; i++) {
            int32_t path[8];
            int32_t d = jev_trie_path(&t, q[i], path, 8);
            float row[VOCAB];
            fake_logits(path, d, row);
            if (use_logits) {
                jev_trie_set_logits_row(&t, q[i], row, VOCAB);
            } else {
                /* the caller's own log-softmax row, in float */
                double mx = -1e300, sum = 0.0;
                for (int v = 0; v < VOCAB; v++)
                    mx = (double)row[v] > mx ? (double)row[v] : mx;
                for (int v = 0; v < VOCAB; v++)
                    sum += exp((double)row[v] - mx);
                float ls[VOCAB];
                for (int v = 0; v < VOCAB; v++)
                    ls[v] = (float)((double)row[v] - mx - log(sum));
                jev_trie_set_logsoftmax_row(&t, q[i], ls, VOCAB);
            }
        }
        double sum_s[4], mean_s[4], probs[4];
        assert_int_equal(jev_trie_score(&t, JEV_TRIE_SUM, sum_s, probs, &err), JEV_OK);
        double tol = use_logits ? 1e-12 : 1e-5;
        double z = 0.0;
        for (int i = 0; i < 4; i++) {
            double b = brute_logprob(cands[i], lens[i]);
            assert_true(fabs(sum_s[i] - b) <= tol);
            z += exp(b);
        }
        double total = 0.0;
        for (int i = 0; i < 4; i++) {
            assert_true(fabs(probs[i] - exp(brute_logprob(cands[i], lens[i])) / z) <= tol);
            total += probs[i];
        }
        assert_true(fabs(total - 1.0) < 1e-12);
        assert_int_equal(jev_trie_score(&t, JEV_TRIE_MEAN, mean_s, NULL, &err), JEV_OK);
        for (int i = 0; i < 4; i++)
            assert_true(fabs(mean_s[i] - brute_logprob(cands[i], lens[i]) / lens[i]) <= tol);
        /* probabilities only, computed in place */
        double only[4];
        assert_int_equal(jev_trie_score(&t, JEV_TRIE_SUM, NULL, only, &err), JEV_OK);
        assert_memory_equal(only, probs, sizeof only);
        jev_trie_free(&t);
    }
}

static void test_errors(void **state) {
    (void)state;
    struct jev_trie t;
    struct jev_error err = {0};
    static const int32_t a[] = {1, 2}, b[] = {3}, c[] = {1, 2};
    const int32_t *const same[] = {a, b, c};
    const int32_t lsame[] = {2, 1, 2};
    const char *const nsame[] = {"New York", "Paris", "New  York"};
    assert_int_equal(jev_trie_build(&t, same, lsame, 3, nsame, &err), JEV_ERR_INVALID_ARG);
    assert_string_equal(err.msg, "trie: candidates 0 (\"New York\") and 2 (\"New  York\") are the same token sequence");
    assert_null(t.nodes);
    jev_error_clear(&err);
    const int32_t lempty[] = {2, 0, 2};
    assert_int_equal(jev_trie_build(&t, same, lempty, 3, NULL, &err), JEV_ERR_INVALID_ARG);
    assert_string_equal(err.msg, "trie: candidate 1 (\"?\") has no tokens");
    jev_error_clear(&err);
    static const int32_t neg[] = {4, -1};
    const int32_t *const cneg[] = {neg};
    const int32_t lneg[] = {2};
    assert_int_equal(jev_trie_build(&t, cneg, lneg, 1, NULL, &err), JEV_ERR_INVALID_ARG);
    assert_string_equal(err.msg, "trie: candidate 0 (\"?\") has a negative token -1");
    jev_error_clear(&err);
    assert_int_equal(jev_trie_build(&t, same, lsame, 0, NULL, &err), JEV_ERR_INVALID_ARG);
    jev_error_clear(&err);
    /* a value never set */
    const int32_t *const two[] = {a, b};
    const int32_t ltwo[] = {2, 1};
    assert_int_equal(jev_trie_build(&t, two, ltwo, 2, NULL, &err), JEV_OK);
    int32_t kids[2];
    jev_trie_children(&t, 0, NULL, kids, 2);
    jev_trie_set(&t, kids[0], -1.0);
    jev_trie_set(&t, kids[1], -2.0);
    double p[2];
    assert_int_equal(jev_trie_score(&t, JEV_TRIE_SUM, NULL, p, &err), JEV_ERR_INVALID_ARG);
    assert_string_equal(err.msg, "trie: candidate 0 needs the value of its token 2 (depth 2), which was not set");
    /* a token outside the row gets no value either */
    jev_error_clear(&err);
    float row[2] = {0.0f, 0.0f};
    jev_trie_set_logits_row(&t, kids[0], row, 2);
    assert_int_equal(jev_trie_score(&t, JEV_TRIE_SUM, NULL, p, &err), JEV_ERR_INVALID_ARG);
    jev_trie_free(&t);
    /* one candidate: probability 1 */
    jev_error_clear(&err);
    assert_int_equal(jev_trie_build(&t, two, ltwo + 1, 1, NULL, &err), JEV_OK);
    jev_trie_set(&t, 1, -3.0);
    assert_int_equal(jev_trie_score(&t, JEV_TRIE_SUM, NULL, p, &err), JEV_OK);
    assert_true(p[0] == 1.0);
    jev_trie_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_structure),
        cmocka_unit_test(test_scores_match_brute_force),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
