/*
 * test-device-fault.c - what a device fault does to a decider and a server.
 *
 * A GPU fails in two ways (backend/ops.h, status): a fault that leaves the
 * device usable (an allocation that failed) fails the forward that saw it,
 * and the next request works; a sticky fault (an illegal address) poisons the
 * context for good: JEV_ERR_DEVICE_LOST. Here the CPU's ops run behind a
 * table whose status reports the fault the test plants, so the behaviour is
 * checked without a GPU:
 * - a recoverable fault: that request answers 500 "server_error" naming the
 *   fault, the next answers 200 as before;
 * - a lost device: 503 "unavailable_error" naming it; later requests answer
 *   503 at once, without a forward (the table's call counter stands still),
 *   even once the planted fault is gone; jev_decider_status says so;
 * - the server: GET /health turns from 200 to 503 {"status":"unavailable"}
 *   and a decision answers 503, so that a load balancer retries elsewhere
 *   and takes the replica out (deploy/nginx: proxy_next_upstream http_503);
 *   jev_server_wait, which `jev serve` blocks in, returns with the loss;
 * - every status a run can fail with answers its HTTP status and error type
 *   (map_error, src/wire/route.c): what the request caused is 4xx, so that no
 *   client retries it;
 * - `jev serve` itself (the binary, with its test hook
 *   JEV_SERVE_TEST_LOSE_DEVICE planting the loss): 503 to the request that
 *   met it, then exit status 3 for its supervisor to restart it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/ops.h"   // defines: jev_cpu_ops, jev_cpu_backend_new
#include "base/pool.h"     // defines: jev_pool_init
#include "model/engine.h"  // defines: jev_engine_init_on
#include "serve-test.h"    // defines: struct reply, serve_http, serve_child_run
#include "server/server.h" // defines: jev_server_start, jev_server_stop
#include "tiny-model.h"    // defines: tiny_model_open

/* ---- a backend whose status reports a planted fault ---- */

static struct {
    enum jev_status fault; /* what the next status reports (JEV_OK: none) */
    bool sticky;           /* the fault stays after it is reported */
    int64_t statuses;      /* status calls: one per forward */
} g;

static enum jev_status faulty_status(struct jev_backend *be, struct jev_error *err) {
    (void)be;
    g.statuses++;
    enum jev_status f = g.fault;
    if (!g.sticky)
        g.fault = JEV_OK;
    if (f == JEV_OK)
        return JEV_OK;
    return jev_fail(err, f, "test device: planted fault (%s)", f == JEV_ERR_DEVICE_LOST ? "sticky" : "recoverable");
}

static struct jev_ops faulty_ops;

/* ---- fixture ---- */

static char model_dir[1024];

static struct {
    struct jev_model *model;
    struct jev_pool *pool;
    struct jev_backend *be;
    struct jev_engine *engine;
    struct jev_decider *decider;
} F;

static int setup(void **state) {
    (void)state;
    if (tiny_model_open("device-fault", 2, model_dir, sizeof model_dir, &F.model) != 0)
        return -1;
    faulty_ops = jev_cpu_ops;
    faulty_ops.name = "faulty";
    faulty_ops.status = faulty_status;
    struct jev_error err = {0};
    if (jev_pool_init(&F.pool, 2, &err) != JEV_OK || !(F.be = jev_cpu_backend_new(F.pool)))
        return -1;
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_tokens = 2048;
    ep.max_batch = 8;
    if (jev_engine_init_on(F.model, &ep, &faulty_ops, F.be, &F.engine) != JEV_OK ||
        jev_decider_open(F.model, F.engine, &F.decider) != JEV_OK) {
        fprintf(stderr, "engine: %s\n", jev_engine_last_error(F.engine));
        return -1;
    }
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    curl_global_cleanup();
    jev_decider_close(F.decider);
    jev_engine_free(F.engine);
    jev_cpu_backend_free(F.be);
    jev_pool_free(F.pool);
    jev_model_free(F.model);
    return 0;
}

static const char *BODY = "{\"state\":{\"note\":\"a red door\"},\"questions\":{"
                          "\"door\":{\"type\":\"noul\",\"instructions\":\"Is the door red?\"},"
                          "\"color\":{\"type\":\"choice\",\"instructions\":\"Which color?\","
                          "\"criteria\":{\"red\":null,\"blue\":null}}}}";

/* One request through the public API: its HTTP status; *out gets the body (freed by the caller). */
static int32_t ask(char **out) {
    int32_t http = 0;
    char *resp = NULL;
    jev_decide_json(F.decider, BODY, strlen(BODY), JEV_REQUEST_SYSTEMONE, &resp, &http);
    assert_non_null(resp);
    *out = resp;
    return http;
}

/* Each status a run can fail with, planted for one request: its HTTP status and error type. What
 * the request caused is 4xx (clients do not retry it); 5xx is for what may work the next time (a
 * device fault, the time limit), what the spec calls not supported (501) and a lost device (503,
 * test_recoverable_then_lost). The fault stays for the whole request (a retry inside the decider
 * meets it too) and is lifted after. */
static void test_each_status_maps(void **state) {
    (void)state;
    static const struct {
        enum jev_status st;
        int http;
        const char *type;
    } table[] = {
        {JEV_ERR_IO, 400, "invalid_request_error"},
        {JEV_ERR_FORMAT, 400, "invalid_request_error"},
        {JEV_ERR_CONTEXT_FULL, 400, "exceed_context_size_error"},
        {JEV_ERR_NOMEM, 413, "request_too_large_error"},
        {JEV_ERR_INVALID_ARG, 422, "unprocessable_entity_error"},
        {JEV_ERR_CUDA, 500, "server_error"},
        {JEV_ERR_UNSUPPORTED, 501, "not_supported_error"},
        {JEV_ERR_ABORTED, 504, "timeout"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        g.fault = table[i].st;
        g.sticky = true;
        char *resp = NULL;
        int32_t http = ask(&resp);
        g.fault = JEV_OK;
        char want[128];
        snprintf(want, sizeof want, "\"type\":\"%s\"", table[i].type);
        if (http != table[i].http || !strstr(resp, want) || !strstr(resp, "planted fault"))
            fail_msg("status %s: HTTP %d %s, expected %d %s", jev_status_str(table[i].st), http, resp, table[i].http,
                     table[i].type);
        jev_free(resp);
    }
    assert_int_equal(jev_decider_status(F.decider, NULL, 0), JEV_OK); /* none of them loses the device */
}

/* The order matters: the recoverable case needs a usable decider, the lost one ends it. */
static void test_recoverable_then_lost(void **state) {
    (void)state;
    char *ok = NULL, *resp = NULL;
    assert_int_equal(ask(&ok), 200);
    assert_int_equal(jev_decider_status(F.decider, NULL, 0), JEV_OK);

    /* recoverable: this request fails with the fault named, the next one answers as before */
    g.fault = JEV_ERR_CUDA;
    g.sticky = false;
    assert_int_equal(ask(&resp), 500);
    assert_non_null(strstr(resp, "\"type\":\"server_error\""));
    assert_non_null(strstr(resp, "planted fault (recoverable)"));
    jev_free(resp);
    assert_int_equal(jev_decider_status(F.decider, NULL, 0), JEV_OK);
    assert_int_equal(ask(&resp), 200);
    assert_string_equal(resp, ok);
    jev_free(resp);

    /* lost: 503 now and for every later request, which no longer reaches the device */
    g.fault = JEV_ERR_DEVICE_LOST;
    g.sticky = true;
    assert_int_equal(ask(&resp), 503);
    assert_non_null(strstr(resp, "\"type\":\"unavailable_error\""));
    assert_non_null(strstr(resp, "\"code\":503"));
    assert_non_null(strstr(resp, "planted fault (sticky)"));
    jev_free(resp);
    g.fault = JEV_OK;
    int64_t before = g.statuses;
    assert_int_equal(ask(&resp), 503);
    assert_non_null(strstr(resp, "planted fault (sticky)"));
    assert_non_null(strstr(resp, "restart the engine"));
    jev_free(resp);
    assert_int_equal(g.statuses, before);
    char why[512];
    assert_int_equal(jev_decider_status(F.decider, why, sizeof why), JEV_ERR_DEVICE_LOST);
    assert_non_null(strstr(why, "planted fault (sticky)"));
    assert_string_equal(jev_status_str(JEV_ERR_DEVICE_LOST), "device lost");
    jev_free(ok);
}

/* ---- the server: /health and decisions answer 503 once the device is lost ---- */

static void test_server_unhealthy(void **state) {
    (void)state;
    struct jev_server_params p = jev_server_default_params();
    p.port = 0;
    struct jev_server *s = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_server_start(F.model, F.decider, &p, &s, &err), JEV_OK);
    int port = jev_server_port(s);
    /* the first test left the device lost */
    assert_int_equal(jev_decider_status(F.decider, NULL, 0), JEV_ERR_DEVICE_LOST);
    struct reply h = serve_http(port, "GET", "/health", NULL);
    assert_true(h.curl_ok);
    assert_int_equal(h.status, 503);
    assert_non_null(h.body);
    assert_non_null(strstr(h.body, "\"status\":\"unavailable\""));
    assert_non_null(strstr(h.body, "planted fault (sticky)"));
    free(h.body);
    struct reply d = serve_http(port, "POST", "/v1/systemone", BODY);
    assert_true(d.curl_ok);
    assert_int_equal(d.status, 503);
    assert_non_null(strstr(d.body, "unavailable_error"));
    free(d.body);
    /* what `jev serve` waits on returns at once with the loss, though no stop byte came */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    unsigned char b = 0;
    assert_int_equal(jev_server_wait(s, fds[0], 10, &b, &err), JEV_ERR_DEVICE_LOST);
    assert_non_null(strstr(err.msg, "planted fault (sticky)"));
    close(fds[0]);
    close(fds[1]);
    jev_server_stop(s);
}

/* A healthy decider's /health is 200 {"status":"ok"} (a fresh decider over the same engine). */
static void test_server_healthy(void **state) {
    (void)state;
    struct jev_decider *fresh = NULL;
    assert_int_equal(jev_decider_open(F.model, F.engine, &fresh), JEV_OK);
    struct jev_server_params p = jev_server_default_params();
    p.port = 0;
    struct jev_server *s = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_server_start(F.model, fresh, &p, &s, &err), JEV_OK);
    struct reply h = serve_http(jev_server_port(s), "GET", "/health", NULL);
    assert_int_equal(h.status, 200);
    assert_string_equal(h.body, "{\"status\":\"ok\"}");
    free(h.body);
    /* a healthy server waits for its stop byte (a few checks pass first) */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    unsigned char b = 15;
    assert_int_equal(write(fds[1], &b, 1), 1);
    b = 0;
    assert_int_equal(jev_server_wait(s, fds[0], 10, &b, &err), JEV_OK);
    assert_int_equal(b, 15);
    close(fds[1]); /* a closed pipe is an error, not a stop */
    assert_int_equal(jev_server_wait(s, fds[0], 10, &b, &err), JEV_ERR_IO);
    close(fds[0]);
    jev_server_stop(s);
    jev_decider_close(fresh);
}

/* ---- `jev serve`: exit status 3 ---- */

/* The binary with its test hook: /health answers 200 before any forward, the decision that meets the
 * planted loss answers 503, and the process then exits by itself with status 3, saying why. */
static void test_cli_exits_3_when_the_device_is_lost(void **state) {
    (void)state;
    char err_path[1200];
    snprintf(err_path, sizeof err_path, "%s.stderr", model_dir);
    const char *const env[] = {"JEV_SERVE_TEST_LOSE_DEVICE=1", NULL};
    struct serve_opts o = {.model_dir = model_dir, .env = env, .stderr_path = err_path};
    struct serve_child c = serve_child_run(&o);
    assert_true(c.pid > 0);
    if (c.port <= 0) {
        serve_child_stop(&c, SIGKILL);
        fail_msg("jev serve did not start: '%s'", c.line);
    }
    struct reply h = serve_http(c.port, "GET", "/health", NULL);
    struct reply d = serve_http(c.port, "POST", "/v1/systemone", BODY);
    /* it stops within a second of the loss (jev_server_wait checks every second): no signal is sent;
     * one still running after 30 s is killed and fails the test */
    int status = -1;
    pid_t got = 0;
    for (int i = 0; i < 3000 && got == 0; i++) {
        got = waitpid(c.pid, &status, WNOHANG);
        if (got == 0)
            usleep(10000);
    }
    if (got == c.pid)
        c.pid = 0;
    serve_child_stop(&c, SIGKILL);
    if (got <= 0)
        fail_msg("jev serve is still running 30 s after its device was lost");
    assert_int_equal(h.status, 200);
    free(h.body);
    assert_int_equal(d.status, 503);
    assert_non_null(strstr(d.body, "unavailable_error"));
    free(d.body);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 3)
        fail_msg("jev serve: %s %d, expected exit status 3", WIFEXITED(status) ? "exit status" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    FILE *f = fopen(err_path, "r");
    assert_non_null(f);
    char buf[4096] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (!strstr(buf, "the device is lost") || !strstr(buf, "exit status 3"))
        fail_msg("jev serve's stderr does not say why it stopped: %s", buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_status_maps),
        cmocka_unit_test(test_recoverable_then_lost),
        cmocka_unit_test(test_server_unhealthy),
        cmocka_unit_test(test_server_healthy),
        cmocka_unit_test(test_cli_exits_3_when_the_device_is_lost),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
