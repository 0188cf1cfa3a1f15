/*
 * test-api.c - the public header alone: include/jev.h compiles as plain C
 * and its decision route answers a request end to end on the tiny synthetic
 * model (synthesized through the internal synth API, the one thing jev.h
 * does not offer). Checks the response body's envelope, the error body and
 * the HTTP status of a refused request, and the engine's error text.
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
#include <sys/stat.h>

#include "cpu-flags.h"  // defines: cpu_fast_mode
#include "jev.h"        // defines: the public API under test
#include "tiny-model.h" // defines: tiny_model_write, tiny_test_dir

static struct jev_model *model;
static struct jev_engine *engine;
static struct jev_decider *decider;

static int setup(void **state) {
    (void)state;
    char dir[1024];
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_tokens = 2048;
    ep.max_batch = 8;
    return tiny_decider_open("api", 2, &ep, dir, sizeof dir, &model, &engine, &decider);
}

static int teardown(void **state) {
    (void)state;
    jev_decider_close(decider);
    jev_engine_free(engine);
    jev_model_free(model);
    return 0;
}

static void test_systemone_round_trip(void **state) {
    (void)state;
    const char *body =
        "{\"model\":\"jev-latest\",\"state\":{\"note\":\"a red door\"},\"questions\":{"
        "\"door\":{\"type\":\"noul\",\"instructions\":\"Is the door red?\"},"
        "\"color\":{\"type\":\"choice\",\"instructions\":\"Which color?\","
        "\"criteria\":{\"red\":null,\"blue\":\"like the sky\",\"green\":null}},"
        "\"size\":{\"type\":\"score\",\"instructions\":\"How big?\",\"criteria\":[\"small\",\"large\"]}}}";
    char *resp = NULL;
    int32_t http = 0;
    assert_int_equal(jev_decide_json(decider, body, strlen(body), JEV_REQUEST_SYSTEMONE, &resp, &http), JEV_OK);
    assert_int_equal(http, 200);
    json_error_t je;
    json_t *r = json_loads(resp, 0, &je);
    assert_non_null(r);
    json_t *answers = json_object_get(r, "answers");
    assert_int_equal(json_object_size(answers), 3);
    double p = json_number_value(json_object_get(json_object_get(answers, "door"), "noul"));
    assert_true(p > 0.0 && p < 1.0);
    json_t *probs = json_object_get(json_object_get(answers, "color"), "probabilities");
    double sum = 0;
    const char *k;
    json_t *v;
    json_object_foreach(probs, k, v) sum += json_number_value(v);
    assert_true(fabs(sum - 1.0) < 1e-9);
    double s = json_number_value(json_object_get(json_object_get(answers, "size"), "score"));
    assert_true(s >= 0.0 && s <= 1.0);
    assert_true(json_integer_value(json_object_get(json_object_get(r, "usage"), "input_tokens")) > 0);
    json_decref(r);
    jev_free(resp);
}

static void test_refusal_has_status_and_error_body(void **state) {
    (void)state;
    const char *body = "{\"state\":\"x\",\"questions\":{\"q\":{\"type\":\"score\",\"instructions\":\"How?\","
                       "\"criteria\":[\"only one\"]}}}";
    char *resp = NULL;
    int32_t http = 0;
    assert_int_not_equal(jev_decide_json(decider, body, strlen(body), JEV_REQUEST_SYSTEMONE, &resp, &http), JEV_OK);
    assert_int_equal(http, 422);
    json_t *r = json_loads(resp, 0, NULL);
    assert_non_null(r);
    json_t *e = json_object_get(r, "error");
    assert_string_equal(json_string_value(json_object_get(e, "type")), "unprocessable_entity_error");
    assert_int_equal(json_integer_value(json_object_get(e, "code")), 422);
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "criteria"));
    json_decref(r);
    jev_free(resp);
    const char *bad = "{not json";
    assert_int_not_equal(jev_decide_json(decider, bad, strlen(bad), JEV_REQUEST_SYSTEMONE, &resp, &http), JEV_OK);
    assert_int_equal(http, 400);
    jev_free(resp);
}

static void test_load_error_names_the_file(void **state) {
    (void)state;
    struct jev_model_params mp = jev_model_default_params();
    struct jev_model *m = (struct jev_model *)&mp; /* must be overwritten with NULL */
    char msg[512];
    assert_int_equal(jev_model_load("/nonexistent/model", &mp, &m, msg, sizeof msg), JEV_ERR_IO);
    assert_null(m);
    assert_non_null(strstr(msg, "/nonexistent/model"));
    assert_int_equal(JEV_VERSION_NUM, (JEV_VERSION_MAJOR << 16) | (JEV_VERSION_MINOR << 8) | JEV_VERSION_PATCH);
}

/* A decider needs a model and an engine: either missing is refused, never dereferenced. */
static void test_decider_needs_model_and_engine(void **state) {
    (void)state;
    struct jev_decider *d = (struct jev_decider *)&d; /* must be overwritten with NULL */
    assert_int_equal(jev_decider_open(model, NULL, &d), JEV_ERR_INVALID_ARG);
    assert_null(d);
    d = (struct jev_decider *)&d;
    assert_int_equal(jev_decider_open(NULL, engine, &d), JEV_ERR_INVALID_ARG);
    assert_null(d);
}

/* A time limit stops a request between forwards with 504 "timeout"; the decider then answers the
 * same request normally once the limit is lifted (nothing was left behind). */
static void test_time_limit_is_504(void **state) {
    (void)state;
    const char *body = "{\"state\":{\"note\":\"a red door\"},\"questions\":{"
                       "\"door\":{\"type\":\"noul\",\"instructions\":\"Is the door red?\"}}}";
    char *resp = NULL;
    int32_t http = 0;
    jev_decider_set_timeout(decider, 0.001); /* already past by the first forward */
    assert_int_equal(jev_decide_json(decider, body, strlen(body), JEV_REQUEST_SYSTEMONE, &resp, &http),
                     JEV_ERR_ABORTED);
    assert_int_equal(http, 504);
    json_error_t je;
    json_t *r = json_loads(resp, 0, &je);
    assert_non_null(r);
    json_t *e = json_object_get(r, "error");
    assert_string_equal(json_string_value(json_object_get(e, "type")), "timeout");
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "time limit of"));
    json_decref(r);
    jev_free(resp);

    jev_decider_set_timeout(decider, 0);
    assert_int_equal(jev_decide_json(decider, body, strlen(body), JEV_REQUEST_SYSTEMONE, &resp, &http), JEV_OK);
    assert_int_equal(http, 200);
    jev_free(resp);
    /* a generous limit changes nothing */
    jev_decider_set_timeout(decider, 600000);
    assert_int_equal(jev_decide_json(decider, body, strlen(body), JEV_REQUEST_SYSTEMONE, &resp, &http), JEV_OK);
    jev_free(resp);
    jev_decider_set_timeout(decider, 0);
}

/* The precision modes: named, exact by default; fast on the CPU backend made where the CPU has
 * AVX512-BF16 (tests/cpu-flags.h) and refused elsewhere with a message naming the missing feature
 * and what to use instead, never run as exact under fast's name; JEV_CPU_BF16=none refuses it on
 * any CPU; a value outside the enum refused. */
static void expect_fast_refused(struct jev_engine_params ep, const char *names) {
    struct jev_engine *e = NULL;
    assert_int_equal(jev_engine_init(model, &ep, &e), JEV_ERR_UNSUPPORTED);
    assert_non_null(e);
    const char *msg = jev_engine_last_error(e);
    if (!strstr(msg, "\"fast\"") || !strstr(msg, "use precision exact") || !strstr(msg, names))
        fail_msg("the refusal does not say what is missing and what to use instead: %s", msg);
    jev_engine_free(e);
}

static void test_precision(void **state) {
    (void)state;
    assert_string_equal(jev_precision_name(JEV_PRECISION_EXACT), "exact");
    assert_string_equal(jev_precision_name(JEV_PRECISION_FAST), "fast");
    assert_string_equal(jev_precision_name((enum jev_precision)7), "unknown");
    assert_int_equal(jev_engine_default_params().precision, JEV_PRECISION_EXACT);

    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_tokens = 256;
    ep.max_batch = 2;
    ep.precision = JEV_PRECISION_FAST;
    struct jev_engine *e = NULL;
    if (cpu_fast_mode()) {
        assert_int_equal(jev_engine_init(model, &ep, &e), JEV_OK);
        jev_engine_free(e);
        e = NULL;
    } else {
        expect_fast_refused(ep, "AVX512-BF16");
    }
    assert_int_equal(setenv("JEV_CPU_BF16", "none", 1), 0);
    expect_fast_refused(ep, cpu_fast_mode() ? "JEV_CPU_BF16=none" : "AVX512-BF16");
    unsetenv("JEV_CPU_BF16");

    ep.precision = (enum jev_precision)5;
    e = NULL;
    assert_int_equal(jev_engine_init(model, &ep, &e), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(jev_engine_last_error(e), "precision 5"));
    jev_engine_free(e);

    ep.precision = JEV_PRECISION_EXACT;
    e = NULL;
    assert_int_equal(jev_engine_init(model, &ep, &e), JEV_OK);
    jev_engine_free(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precision),
        cmocka_unit_test(test_systemone_round_trip),
        cmocka_unit_test(test_refusal_has_status_and_error_body),
        cmocka_unit_test(test_time_limit_is_504),
        cmocka_unit_test(test_load_error_names_the_file),
        cmocka_unit_test(test_decider_needs_model_and_engine),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
