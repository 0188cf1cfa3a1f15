/*
 * test-decide-answer.c - answers from distributions: softmax helpers, the
 * confidence formulas, expected scores, sums, ties, and the exact bytes of
 * both response shapes and the error body for fixed inputs.
 * Expected numbers are worked by hand in the comments from the formulas of
 * spec/systemone.md §4.3 (inputs are dyadic, so every value is exact).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decide/answer.h"  // defines: jev_softmax, jev_response_*
#include "io/jsonw.h"       // defines: jev_format_double
#include "decide/request.h" // defines: struct jev_request
#include "wire/request.h"   // defines: jev_request_parse_*, struct jev_request_error
#include "wire/response.h"  // defines: jev_response_*

#define NEAR(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

/* ---- math ---- */

static void test_softmax(void **state) {
    (void)state;
    /* softmax(log 1, log 2, log 3) = (1, 2, 3) / 6 */
    double x[3] = {log(1.0), log(2.0), log(3.0)}, p[4], lp[4];
    jev_softmax(x, 3, p);
    NEAR(p[0], 1.0 / 6, 1e-15);
    NEAR(p[1], 2.0 / 6, 1e-15);
    NEAR(p[2], 3.0 / 6, 1e-15);
    jev_log_softmax(x, 3, lp);
    NEAR(lp[0], log(1.0 / 6), 1e-14);
    NEAR(lp[2], log(0.5), 1e-14);
    /* max-subtraction: huge logits do not overflow */
    double big[2] = {1000.0, 1000.0 + log(3.0)};
    jev_softmax(big, 2, p);
    NEAR(p[0], 0.25, 1e-12); /* 1000 + log 3 itself carries a 1e-13 rounding */
    NEAR(p[1], 0.75, 1e-12);
    jev_log_softmax(big, 2, lp);
    NEAR(lp[0], log(0.25), 1e-12);
    /* -inf gets 0, NaN counts as -inf, all -inf is uniform */
    double m[3] = {-(double)INFINITY, 0.0, (double)NAN};
    jev_softmax(m, 3, p);
    assert_true(p[0] == 0.0 && p[1] == 1.0 && p[2] == 0.0);
    jev_log_softmax(m, 3, lp);
    assert_true(lp[0] == -(double)INFINITY && lp[1] == 0.0 && lp[2] == -(double)INFINITY);
    double ninf[4] = {-(double)INFINITY, -(double)INFINITY, -(double)INFINITY, -(double)INFINITY};
    jev_softmax(ninf, 4, p);
    for (int i = 0; i < 4; i++)
        assert_true(p[i] == 0.25);
    jev_log_softmax(ninf, 4, lp);
    NEAR(lp[3], log(0.25), 1e-15);
    /* +inf entries share the mass */
    double pinf[3] = {(double)INFINITY, 5.0, (double)INFINITY};
    jev_softmax(pinf, 3, p);
    assert_true(p[0] == 0.5 && p[1] == 0.0 && p[2] == 0.5);
}

static void test_normalize(void **state) {
    (void)state;
    double p[4];
    jev_normalize((double[]){1, 1, 2}, 3, p);
    assert_true(p[0] == 0.25 && p[1] == 0.25 && p[2] == 0.5);
    jev_normalize((double[]){0, 0, 0, 0}, 4, p);
    assert_true(p[0] == 0.25 && p[3] == 0.25);
    jev_normalize((double[]){-1, (double)NAN, 2}, 3, p);
    assert_true(p[0] == 0.0 && p[1] == 0.0 && p[2] == 1.0);
    jev_normalize((double[]){(double)INFINITY, 1, (double)INFINITY}, 3, p);
    assert_true(p[0] == 0.5 && p[1] == 0.0 && p[2] == 0.5);
    jev_normalize((double[]){1e308, 1e308}, 2, p); /* the sum overflows */
    assert_true(p[0] == 0.5 && p[1] == 0.5);
    /* arbitrary weights over 255 options sum to 1 */
    double w[255], q[255];
    uint32_t s = 12345;
    for (int i = 0; i < 255; i++) {
        s = s * 1664525u + 1013904223u;
        w[i] = (double)(s >> 8) / 16777216.0 * 7.0 + 1e-9;
    }
    jev_normalize(w, 255, q);
    double sum = 0.0;
    for (int i = 0; i < 255; i++)
        sum += q[i];
    NEAR(sum, 1.0, 1e-15);
}

static void test_confidence(void **state) {
    (void)state;
    /* choice: (k p_max - 1) / (k - 1) */
    assert_true(jev_confidence_choice((double[]){0.5, 0.25, 0.25}, 3) == 0.25);
    assert_true(jev_confidence_choice((double[]){0.25, 0.25, 0.25, 0.25}, 4) == 0.0);
    assert_true(jev_confidence_choice((double[]){0.0, 1.0}, 2) == 1.0);
    assert_true(jev_confidence_choice((double[]){1.0}, 1) == 1.0); /* k = 1 */
    assert_true(jev_confidence_choice((double[]){0.75, 0.25}, 2) == 0.5);
    /* score, llama.cpp's rule. N = 2: 2 p_max - 1 */
    assert_true(jev_confidence_score((double[]){0.75, 0.25}, 2) == 0.5);
    assert_true(jev_confidence_score((double[]){0.25, 0.75}, 2) == 0.5);
    /* N = 3, p = (0.5, 0.5, 0): mode 0, d = 0.5, d_u = (1 + 0 + 1) / 3 = 2/3, 1 - 0.75 = 0.25 */
    NEAR(jev_confidence_score((double[]){0.5, 0.5, 0.0}, 3), 0.25, 1e-15);
    /* N = 3 uniform: mode 0, d = 1, 1 - 1.5 < 0 -> 0 */
    assert_true(jev_confidence_score((double[]){1.0 / 3, 1.0 / 3, 1.0 / 3}, 3) == 0.0);
    /* certainty anywhere is 1 */
    assert_true(jev_confidence_score((double[]){0, 0, 1, 0, 0}, 5) == 1.0);
    /* N = 4, p = (0.125, 0.25, 0.625, 0): mode 2, d = 0.25 + 0.25 = 0.5,
     * d_u = (1.5 + 0.5 + 0.5 + 1.5) / 4 = 1, confidence 0.5 */
    assert_true(jev_confidence_score((double[]){0.125, 0.25, 0.625, 0.0}, 4) == 0.5);
    /* expected level */
    assert_true(jev_score_expected((double[]){0.25, 0.25, 0.5}, 3) == 1.25);
    assert_true(jev_score_expected((double[]){0.0, 0.0, 0.0, 1.0}, 4) == 3.0);
}

static void test_ties_and_answers(void **state) {
    (void)state;
    assert_int_equal(jev_argmax((double[]){0.4, 0.4, 0.2}, 3), 0);
    assert_int_equal(jev_argmax((double[]){0.2, 0.4, 0.4}, 3), 1);
    const char *body =
        "{\"state\":\"s\",\"questions\":{"
        "\"c\":{\"type\":\"choice\",\"instructions\":\"x\",\"criteria\":{\"a\":null,\"b\":null,\"c\":null}},"
        "\"one\":{\"type\":\"choice\",\"instructions\":\"x\",\"criteria\":{\"only\":null}},"
        "\"s\":{\"type\":\"score\",\"instructions\":\"x\",\"criteria\":[\"lo\",\"mid\",\"hi\"]},"
        "\"n\":{\"type\":\"noul\",\"instructions\":\"x\"}}}";
    struct jev_request r;
    struct jev_request_error re;
    struct jev_error err = {0};
    assert_int_equal(jev_request_parse_systemone(body, strlen(body), NULL, &r, &re), JEV_OK);
    struct jev_answers a;
    assert_int_equal(jev_answers_init(&a, &r, &err), JEV_OK);
    assert_int_equal(a.n, 4);
    /* fresh answers are uniform */
    NEAR(a.items[0].probs[1], 1.0 / 3, 1e-15);
    assert_true(a.items[1].probs[0] == 1.0);
    assert_true(a.items[1].confidence == 1.0);
    /* a tie goes to the first in request order */
    jev_answer_set_probs(&a.items[0], (double[]){1, 3, 3});
    assert_int_equal(a.items[0].winner, 1);
    NEAR(a.items[0].probs[1], 3.0 / 7, 1e-15);
    /* from logits: softmax first */
    jev_answer_set_logits(&a.items[2], (double[]){log(1.0), log(1.0), log(2.0)});
    NEAR(a.items[2].score, 0.25 + 2 * 0.5, 1e-15);
    assert_int_equal(a.items[2].winner, 2);
    jev_answer_set_probs(&a.items[3], (double[]){3, 1});
    assert_true(a.items[3].score == 0.75); /* P(yes) */
    jev_answers_free(&a);
    jev_request_free(&r);
}

/* ---- numbers on the wire ---- */

static void test_format_double(void **state) {
    (void)state;
    char b[32];
    const struct {
        double d;
        const char *s;
    } cases[] = {{0.1, "0.1"},     {0.5, "0.5"},   {1.0, "1.0"}, {0.0, "0.0"},
                 {1e-07, "1e-07"}, {0.25, "0.25"}, {3.0, "3.0"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jev_format_double(cases[i].d, b);
        assert_string_equal(b, cases[i].s);
    }
    /* any double: reads back exactly, and one digit fewer would not */
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 20000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        double d = (double)(s >> 11) / 9007199254740992.0; /* [0, 1) like a probability */
        jev_format_double(d, b);
        assert_true(strtod(b, NULL) == d);
        /* significant digits: the mantissa's digits without leading zeros */
        int digits = 0;
        bool lead = true;
        for (const char *c = b; *c && *c != 'e'; c++) {
            if (*c < '0' || *c > '9')
                continue;
            if (lead && *c == '0')
                continue;
            lead = false;
            digits++;
        }
        char fewer[512];
        int prec = digits - 1;
        if (prec >= 1) {
            snprintf(fewer, sizeof fewer, "%.*g", prec, d);
            assert_true(strtod(fewer, NULL) != d);
        }
    }
}

/* ---- response bodies: exact bytes ---- */

static const char *example =
    "{\"state\":{\"message\":\"I was charged twice.\"},\"questions\":{"
    "\"is_refund\":{\"type\":\"noul\",\"instructions\":\"Refund?\",\"criteria\":{\"true\":\"money back\"}},"
    "\"team\":{\"type\":\"choice\",\"instructions\":\"Which "
    "team?\",\"criteria\":{\"shipping\":null,\"billing\":\"pay\","
    "\"technical\":null}},"
    "\"frustration\":{\"type\":\"score\",\"instructions\":\"How frustrated?\",\"criteria\":[\"calm\",\"mildly "
    "annoyed\","
    "\"angry\"]}}}";

static void test_systemone_bytes(void **state) {
    (void)state;
    struct jev_request r;
    struct jev_request_error re;
    struct jev_error err = {0};
    assert_int_equal(jev_request_parse_systemone(example, strlen(example), NULL, &r, &re), JEV_OK);
    struct jev_answers a;
    assert_int_equal(jev_answers_init(&a, &r, &err), JEV_OK);
    jev_answer_set_probs(&a.items[0], (double[]){0.75, 0.25});
    /* team: winner billing, confidence (3 * 0.5 - 1) / 2 = 0.25 */
    jev_answer_set_probs(&a.items[1], (double[]){0.25, 0.5, 0.25});
    /* frustration: score 0.25 + 2 * 0.625 = 1.5; mode 2, d = 0.125 * 2 + 0.25 = 0.5,
     * d_u = 2/3, confidence 1 - 0.75 = 0.25 */
    jev_answer_set_probs(&a.items[2], (double[]){0.125, 0.25, 0.625});
    struct jev_usage u = {.input_tokens = 123, .output_tokens = 0};
    char *s = jev_response_systemone(&r, &a, "jev-test", &u);
    assert_non_null(s);
    assert_string_equal(
        s, "{\"model\":\"jev-test\",\"answers\":{"
           "\"is_refund\":{\"type\":\"noul\",\"noul\":0.75},"
           "\"team\":{\"type\":\"choice\",\"choice\":\"billing\",\"probabilities\":{\"shipping\":0.25,\"billing\":0.5,"
           "\"technical\":0.25},\"confidence\":0.25},"
           "\"frustration\":{\"type\":\"score\",\"score\":1.5,\"legend\":{\"0\":\"calm\",\"1\":\"mildly annoyed\","
           "\"2\":\"angry\"},\"probabilities\":{\"0\":0.125,\"1\":0.25,\"2\":0.625},\"confidence\":0.25}},"
           "\"usage\":{\"input_tokens\":123,\"output_tokens\":0}}");
    /* and it is JSON that reads back with the same key order */
    json_error_t je;
    json_t *v = json_loads(s, 0, &je);
    assert_non_null(v);
    void *it = json_object_iter(json_object_get(v, "answers"));
    assert_string_equal(json_object_iter_key(it), "is_refund");
    it = json_object_iter_next(json_object_get(v, "answers"), it);
    assert_string_equal(json_object_iter_key(it), "team");
    json_decref(v);
    free(s);
    jev_answers_free(&a);
    jev_request_free(&r);
}

static void test_openai_bytes(void **state) {
    (void)state;
    const char *body =
        "{\"model\":\"gpt-6-luna\",\"input\":\"text\",\"questions\":["
        "{\"type\":\"predicate\",\"instructions\":\"Refund?\",\"name\":\"refund\"},"
        "{\"type\":\"choice\",\"instructions\":\"Urgent?\",\"choices\":[{\"value\":true},{\"value\":"
        "\"later\",\"description\":\"d\"}]},"
        "{\"type\":\"score\",\"instructions\":\"Mood?\",\"name\":\"mood\",\"levels\":[{\"label\":\"calm\"},"
        "{\"label\":\"angry\"}]}]}";
    struct jev_request r;
    struct jev_request_error re;
    struct jev_error err = {0};
    assert_int_equal(jev_request_parse_openai(body, strlen(body), NULL, &r, &re), JEV_OK);
    struct jev_answers a;
    assert_int_equal(jev_answers_init(&a, &r, &err), JEV_OK);
    jev_answer_set_probs(&a.items[0], (double[]){0.125, 0.875});
    /* choice: winner true (typed value), confidence 2 * 0.75 - 1 = 0.5 */
    jev_answer_set_probs(&a.items[1], (double[]){0.75, 0.25});
    /* score: 0.25, confidence 2 * 0.75 - 1 = 0.5 */
    jev_answer_set_probs(&a.items[2], (double[]){0.75, 0.25});
    struct jev_usage u = {.input_tokens = 40, .output_tokens = 2, .cached_tokens = 30};
    char *s = jev_response_openai(&r, &a, "jev-qwen3.5-0.8b", &u);
    assert_string_equal(
        s,
        "{\"model\":\"jev-qwen3.5-0.8b\",\"answers\":["
        "{\"type\":\"predicate\",\"name\":\"refund\",\"probability\":0.125},"
        "{\"type\":\"choice\",\"name\":null,\"choice\":true,\"confidence\":0.5,\"probabilities\":["
        "{\"value\":true,\"probability\":0.75},{\"value\":\"later\",\"probability\":0.25}]},"
        "{\"type\":\"score\",\"name\":\"mood\",\"score\":0.25,\"confidence\":0.5,\"probabilities\":["
        "{\"value\":0,\"label\":\"calm\",\"probability\":0.75},{\"value\":1,\"label\":\"angry\",\"probability\":0.25}"
        "]}],"
        "\"usage\":{\"input_tokens\":40,\"input_tokens_details\":{\"cached_tokens\":30,\"cache_write_tokens\":0},"
        "\"output_tokens\":2,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":42}}");
    free(s);
    /* a refusal keeps only type and name */
    a.items[0].refused = true;
    s = jev_response_openai(&r, &a, "m", &u);
    assert_non_null(strstr(s, "[{\"type\":\"refusal\",\"name\":\"refund\"},{\"type\":\"choice\""));
    free(s);
    jev_answers_free(&a);
    jev_request_free(&r);
}

static void test_error_bytes(void **state) {
    (void)state;
    char *s = jev_response_error(422, "unprocessable_entity_error", "questions.q: bad \"x\"\n\x01");
    assert_string_equal(s, "{\"error\":{\"message\":\"questions.q: bad \\\"x\\\"\\n\\u0001\","
                           "\"type\":\"unprocessable_entity_error\",\"code\":422}}");
    free(s);
    /* bytes that are not UTF-8 (a message quoting a bad body) become U+FFFD; valid UTF-8 stays */
    s = jev_response_error(400, "invalid_request_error", "near '\xce' and \xff\xfe, caf\xc3\xa9 \xe2\x82");
    assert_string_equal(s, "{\"error\":{\"message\":\"near '\xef\xbf\xbd' and \xef\xbf\xbd\xef\xbf\xbd, "
                           "caf\xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd\",\"type\":\"invalid_request_error\",\"code\":400}}");
    free(s);
    struct jev_request r;
    struct jev_request_error re;
    const char *body = "{\"state\":\"s\",\"questions\":{\"q\":{\"type\":\"score\",\"instructions\":\"x\","
                       "\"criteria\":[\"a\"]}}}";
    assert_int_not_equal(jev_request_parse_systemone(body, strlen(body), NULL, &r, &re), JEV_OK);
    s = jev_response_request_error(&re);
    assert_string_equal(s, "{\"error\":{\"message\":\"questions.q.criteria: has 1 level (a score needs 2 to 10)\","
                           "\"type\":\"unprocessable_entity_error\",\"code\":422}}");
    free(s);
    struct jev_request_error internal = {.http_status = 0, .message = "out of memory"};
    s = jev_response_request_error(&internal);
    assert_string_equal(s, "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":500}}");
    free(s);
}

/* Probabilities on the wire read back to a sum of 1 (255 options, random logits). */
static void test_wire_sums(void **state) {
    (void)state;
    char body[16384];
    int n = snprintf(body, sizeof body,
                     "{\"state\":\"s\",\"questions\":{\"q\":{\"type\":\"choice\",\"instructions\":"
                     "\"x\",\"criteria\":{");
    for (int i = 0; i < 255; i++)
        n += snprintf(body + n, sizeof body - (size_t)n, "%s\"o%d\":null", i ? "," : "", i);
    snprintf(body + n, sizeof body - (size_t)n, "}}}}");
    struct jev_request r;
    struct jev_request_error re;
    struct jev_error err = {0};
    assert_int_equal(jev_request_parse_systemone(body, strlen(body), NULL, &r, &re), JEV_OK);
    struct jev_answers a;
    assert_int_equal(jev_answers_init(&a, &r, &err), JEV_OK);
    double logits[255];
    uint32_t s = 7;
    for (int i = 0; i < 255; i++) {
        s = s * 1103515245u + 12345u;
        logits[i] = ((double)(s >> 16) / 65536.0 - 0.5) * 20.0;
    }
    jev_answer_set_logits(&a.items[0], logits);
    char *text = jev_response_systemone(&r, &a, NULL, NULL);
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    assert_non_null(v);
    json_t *probs = json_object_get(json_object_get(json_object_get(v, "answers"), "q"), "probabilities");
    assert_int_equal(json_object_size(probs), 255);
    double sum = 0.0;
    const char *k;
    json_t *p;
    json_object_foreach(probs, k, p) { sum += json_real_value(p); }
    NEAR(sum, 1.0, 1e-12);
    assert_string_equal(json_string_value(json_object_get(v, "model")), "jev");
    json_decref(v);
    free(text);
    jev_answers_free(&a);
    jev_request_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax),       cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_confidence),    cmocka_unit_test(test_ties_and_answers),
        cmocka_unit_test(test_format_double), cmocka_unit_test(test_systemone_bytes),
        cmocka_unit_test(test_openai_bytes),  cmocka_unit_test(test_error_bytes),
        cmocka_unit_test(test_wire_sums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
