/*
 * test-sdk.c - `jev serve` driven by the official TypeSafe TypeScript SDK
 * (@typesafe-ai/sdk, the version pinned in tests/sdk/package-lock.json): the
 * server runs as a child on port 0 over the tiny synthetic model, with and
 * without an API key, and `node tests/sdk/client.mjs` talks to it through the
 * SDK. The test checks what the SDK returned against jev_decide_json asked
 * directly with the exact body the SDK sent: every answer parsed and equal
 * (noul / choice / score, a JSON and a string state, a context, a null score
 * level, an image as a TypeSafe asset), request ids read from the header, the
 * server's refusals surfacing as the SDK's error classes with the server's
 * status and message (422, 400), a wrong key as AuthenticationError (401), or
 * answered when the server has no key, and the models list through the SDK's
 * own parser.
 *
 * It is not a test of the SDK itself, and it does not skip: without node or
 * the SDK it fails and names scripts/setup.sh. Nothing waits on a clock: the
 * start line of `jev serve` says when it listens, and the client runs with no
 * retries and a long timeout.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jev.h"        // defines: jev_model_load, jev_decide_json
#include "serve-test.h" // defines: serve_child_start, serve_child_stop
#include "tiny-model.h" // defines: tiny_model_write, tiny_test_dir

#define SDK_PKG ".cache/sdk-node/node_modules/@typesafe-ai/sdk/package.json"
#define LOCKFILE "tests/sdk/package-lock.json"

static struct jev_model *model;
static struct jev_engine *engine;
static struct jev_decider *decider;
static char model_dir[1024];

/* ---- fixtures ---- */

/* The direct side computes as `jev serve --threads 1` does: one compute thread, the engine's
 * default sizes, so the numbers can be compared exactly. */
static int setup(void **state) {
    (void)state;
    return tiny_decider_open("sdk", 1, NULL, model_dir, sizeof model_dir, &model, &engine, &decider);
}

static int teardown(void **state) {
    (void)state;
    jev_decider_close(decider);
    jev_engine_free(engine);
    jev_model_free(model);
    return 0;
}

/* ---- helpers ---- */

/* All of a stream, NUL-terminated (malloc'd). */
static char *slurp(FILE *f) {
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap);
    assert_non_null(buf);
    while ((k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    buf[n] = '\0';
    return buf;
}

/* node on PATH and the SDK where scripts/setup.sh installs it; a failure names the fix. */
static void require_node_and_sdk(void) {
    FILE *p = popen("node --version 2>&1", "r");
    char *out = p ? slurp(p) : NULL;
    int rc = p ? pclose(p) : -1;
    if (rc != 0)
        fail_msg("node is not on PATH (%s): run scripts/setup.sh, which installs nodejs and the TypeSafe SDK",
                 out ? out : "popen failed");
    free(out);
    struct stat st;
    if (stat(SDK_PKG, &st) != 0)
        fail_msg("the TypeSafe SDK is not installed (%s is missing): run scripts/setup.sh (npm ci from %s)", SDK_PKG,
                 LOCKFILE);
}

/* The SDK version the lockfile pins. */
static char *pinned_version(void) {
    json_error_t je;
    json_t *lock = json_load_file(LOCKFILE, 0, &je);
    if (!lock)
        fail_msg("%s: %s", LOCKFILE, je.text);
    const char *v = json_string_value(json_object_get(
        json_object_get(json_object_get(lock, "packages"), "node_modules/@typesafe-ai/sdk"), "version"));
    assert_non_null(v);
    char *out = strdup(v);
    json_decref(lock);
    return out;
}

/* Equal as JSON values, numbers by value (JavaScript writes 1 where jev wrote 1.0), object keys
 * in any order. */
static bool json_same(const json_t *a, const json_t *b) {
    if (!a || !b)
        return a == b;
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    if (json_typeof(a) != json_typeof(b))
        return false;
    if (json_is_object(a)) {
        if (json_object_size(a) != json_object_size(b))
            return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)(uintptr_t)a, k, v) {
            if (!json_same(v, json_object_get(b, k)))
                return false;
        }
        return true;
    }
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!json_same(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    }
    return json_equal((json_t *)(uintptr_t)a, (json_t *)(uintptr_t)b);
}

static void assert_same(const char *what, const json_t *got, const json_t *want) {
    if (json_same(got, want))
        return;
    char *g = got ? json_dumps(got, JSON_COMPACT) : NULL, *w = want ? json_dumps(want, JSON_COMPACT) : NULL;
    print_error("%s: the SDK returned\n  %s\nbut jev_decide_json answers\n  %s\n", what, g ? g : "(nothing)",
                w ? w : "(nothing)");
    free(g);
    free(w);
    fail();
}

static const char *str(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* ---- the server as a child ---- */

/* `jev serve` on port 0, one compute thread, with the key or none; returns once it listens. */
static struct serve_child serve(const char *key) {
    struct serve_child c = serve_child_start(model_dir, key, NULL);
    if (c.pid <= 0 || c.port <= 0) {
        char line[sizeof c.line];
        snprintf(line, sizeof line, "%s", c.line);
        serve_child_stop(&c, SIGTERM);
        fail_msg("jev serve did not start (first line: \"%s\")", line);
    }
    return c;
}

/* SIGTERM; the server exits 0 (under ASan: with nothing leaked). */
static void stop(struct serve_child *c) { serve_child_expect_clean_exit(serve_child_stop(c, SIGTERM)); }

/* client.mjs against the port; its JSON report. */
static json_t *run_client(int port, const char *key, const char *wrong_key) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "node tests/sdk/client.mjs --base-url http://127.0.0.1:%d --api-key %s --wrong-key %s "
             "--image tests/data/rgb8.png",
             port, key, wrong_key);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *out = slurp(p);
    int rc = pclose(p);
    if (rc != 0)
        fail_msg("`%s` failed (status %d; its stderr is above; scripts/setup.sh installs the SDK); stdout: %.400s", cmd,
                 rc, out);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    if (!j)
        fail_msg("client.mjs printed no JSON (%s): %.400s", je.text, out);
    free(out);
    return j;
}

/* What the decide layer answers for the body the SDK sent; its HTTP status in *http. */
static json_t *direct(const json_t *c, int32_t *http) {
    const json_t *sent = json_object_get(c, "sent");
    assert_non_null(sent);
    assert_string_equal(str(sent, "method"), "POST");
    assert_non_null(strstr(str(sent, "url"), "/v1/systemone"));
    const char *body = str(sent, "body");
    assert_non_null(body);
    char *resp = NULL;
    jev_decide_json(decider, body, strlen(body), JEV_REQUEST_SYSTEMONE, &resp, http);
    assert_non_null(resp);
    json_t *j = json_loads(resp, 0, NULL);
    assert_non_null(j);
    jev_free(resp);
    return j;
}

/* An answered case: status 200, one attempt, a request id, and the parsed body equal to the direct one. */
static void check_answered(const char *name, const json_t *c) {
    if (json_object_get(c, "error")) {
        char *e = json_dumps(json_object_get(c, "error"), JSON_COMPACT);
        print_error("%s: the SDK raised %s\n", name, e);
        free(e);
        fail();
    }
    assert_int_equal(json_integer_value(json_object_get(c, "attempts")), 1);
    assert_int_equal(json_integer_value(json_object_get(c, "status")), 200);
    const char *rid = str(c, "request_id");
    assert_non_null(rid);
    assert_int_equal(strncmp(rid, "req_", 4), 0);
    int32_t http = 0;
    json_t *want = direct(c, &http);
    assert_int_equal(http, 200);
    const json_t *data = json_object_get(c, "data");
    assert_same(name, data, want);
    /* every question the SDK sent has its typed answer */
    json_t *sent = json_loads(str(json_object_get(c, "sent"), "body"), 0, NULL);
    assert_non_null(sent);
    const json_t *answers = json_object_get(data, "answers");
    const char *id;
    json_t *q;
    json_object_foreach(json_object_get(sent, "questions"), id, q) {
        const json_t *a = json_object_get(answers, id);
        assert_non_null(a);
        assert_string_equal(str(a, "type"), str(q, "type"));
    }
    assert_int_equal(json_object_size(answers), json_object_size(json_object_get(sent, "questions")));
    assert_string_equal(str(data, "model"), strrchr(model_dir, '/') + 1);
    json_decref(sent);
    json_decref(want);
}

/* A refused case: the SDK's error class, with the server's status, message and body. */
static void check_refused(const char *name, const json_t *c, const char *cls, int status) {
    const json_t *e = json_object_get(c, "error");
    if (!e)
        fail_msg("%s: the SDK returned an answer where the server should refuse with %d", name, status);
    assert_string_equal(str(e, "class"), cls);
    assert_true(json_is_true(json_object_get(e, "is_api_error")));
    assert_int_equal(json_integer_value(json_object_get(e, "status")), status);
    assert_int_equal(json_integer_value(json_object_get(c, "attempts")), 1);
    assert_non_null(str(e, "request_id"));
    int32_t http = 0;
    json_t *want = direct(c, &http);
    assert_int_equal(http, status);
    assert_same(name, json_object_get(e, "body"), want);
    char msg[1024];
    snprintf(msg, sizeof msg, "%d %s", status, str(json_object_get(want, "error"), "message"));
    assert_string_equal(str(e, "message"), msg);
    json_decref(want);
}

/* The checks every run shares: the version, the answered cases, the refusals, the models list. */
static void check_report(const json_t *r) {
    char *pinned = pinned_version();
    assert_string_equal(str(r, "installed_version"), pinned);
    assert_string_equal(str(r, "sdk_version"), pinned);
    free(pinned);

    const json_t *cases = json_object_get(r, "cases");
    assert_int_equal(json_object_size(cases), 3);
    const char *name;
    json_t *c;
    json_object_foreach((json_t *)(uintptr_t)cases, name, c) { check_answered(name, c); }
    /* the context went out as the top-level instructions, the image as an asset with the opt-in header */
    json_t *ticket = json_loads(str(json_object_get(json_object_get(cases, "ticket"), "sent"), "body"), 0, NULL);
    assert_string_equal(str(ticket, "instructions"), "You triage customer support tickets.");
    assert_string_equal(str(ticket, "model"), "jev-latest"); /* the SDK's default model, answered all the same */
    json_decref(ticket);
    const json_t *image = json_object_get(cases, "image");
    assert_string_equal(str(json_object_get(json_object_get(image, "sent"), "headers"), "TypeSafe-Danger-Zone-Images"),
                        "true");
    assert_non_null(strstr(str(json_object_get(image, "sent"), "body"), "\"assets\":{\"img-rgb8\""));
    /* the SDK's undescribed score level: answered, the legend echoes null */
    const json_t *legend = json_object_get(
        json_object_get(json_object_get(json_object_get(json_object_get(cases, "plain"), "data"), "answers"), "size"),
        "legend");
    assert_true(json_is_null(json_object_get(legend, "1")));
    assert_string_equal(str(legend, "0"), "small");

    check_refused("invalid", json_object_get(r, "invalid"), "UnprocessableEntityError", 422);
    check_refused("unreferenced", json_object_get(r, "unreferenced"), "BadRequestError", 400);

    const json_t *models = json_object_get(r, "models");
    if (!models)
        fail_msg("models.list() raised %s", json_dumps(json_object_get(r, "models_error"), JSON_COMPACT));
    assert_int_equal(json_array_size(models), 1);
    assert_string_equal(str(json_array_get(models, 0), "name"), strrchr(model_dir, '/') + 1);
}

/* ---- tests ---- */

static void test_sdk_with_key(void **state) {
    (void)state;
    require_node_and_sdk();
    struct serve_child c = serve("sdk-test-key");
    json_t *r = run_client(c.port, "sdk-test-key", "not-the-key");
    stop(&c);
    check_report(r);
    /* the wrong key: the SDK's AuthenticationError with the server's 401 body */
    const json_t *wk = json_object_get(r, "wrong_key");
    const json_t *e = json_object_get(wk, "error");
    assert_non_null(e);
    assert_string_equal(str(e, "class"), "AuthenticationError");
    assert_int_equal(json_integer_value(json_object_get(e, "status")), 401);
    const json_t *err = json_object_get(json_object_get(e, "body"), "error");
    assert_string_equal(str(err, "type"), "authentication_error");
    assert_int_equal(json_integer_value(json_object_get(err, "code")), 401);
    char msg[512];
    snprintf(msg, sizeof msg, "401 %s", str(err, "message"));
    assert_string_equal(str(e, "message"), msg);
    assert_non_null(strstr(msg, "Bearer"));
    assert_non_null(str(e, "request_id"));
    assert_int_equal(json_integer_value(json_object_get(wk, "attempts")), 1);
    json_decref(r);
}

static void test_sdk_without_key(void **state) {
    (void)state;
    require_node_and_sdk();
    struct serve_child c = serve(NULL);
    json_t *r = run_client(c.port, "any-key", "another-key");
    stop(&c);
    check_report(r);
    /* no key configured: any bearer is accepted (spec §1) */
    check_answered("wrong_key", json_object_get(r, "wrong_key"));
    json_decref(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sdk_with_key),
        cmocka_unit_test(test_sdk_without_key),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
