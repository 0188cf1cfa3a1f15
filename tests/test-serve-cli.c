/*
 * test-serve-cli.c - `jev serve` through the binary ($JEV_JEV_BIN, children on
 * port 0 over the tiny synthetic model, tests/serve-test.h): it answers and
 * stops on SIGTERM with status 0; every option with a value it refuses, an
 * unknown option or one without its value is exit status 2 with a message
 * naming option and value; a host that is not an address and a port in use
 * are 1; --host, --port, --api-key, --http-threads, --max-queue, --max-body,
 * --idle-timeout and -v reach the server (the start line, 401/200, the body
 * limit, a silent connection closed, one log line per request); IPv6;
 * --request-timeout; --no-prefix-reuse; --max-tokens; --precision fast
 * served where the CPU has AVX512-BF16 (GET /v1/models names it) and 1
 * where the CPU backend cannot run it, naming what to use instead. The lost device's exit status 3
 * is tests/test-device-fault.c's. Waits are bounds on a failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu-flags.h"  // defines: cpu_fast_mode
#include "serve-test.h" // defines: struct reply, serve_curl_perform, serve_child_run, serve_line_port
#include "tiny-model.h" // defines: tiny_model_write, tiny_test_dir

static char model_dir[1024];

static const char *so_body = "{\"model\":\"jev-latest\",\"state\":{\"note\":\"a red door\"},\"questions\":{"
                             "\"door\":{\"type\":\"noul\",\"instructions\":\"Is the door red?\"},"
                             "\"color\":{\"type\":\"choice\",\"instructions\":\"Which color?\","
                             "\"criteria\":{\"red\":null,\"blue\":\"like the sky\",\"green\":null}}}}";

static int setup(void **state) {
    (void)state;
    tiny_test_dir("serve-cli", "tiny-hf", model_dir, sizeof model_dir);
    if (tiny_model_write(model_dir, JEV_SYNTH_HF) != 0)
        return -1;
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    curl_global_cleanup();
    return 0;
}

/* ---- one HTTP exchange ---- */

struct call {
    const char *method, *path;
    const char *body; /* NULL = none */
    const char *auth; /* Authorization value; NULL = none */
    const char *host; /* the address in the URL; NULL = 127.0.0.1 ("[::1]" for IPv6) */
};

static struct reply http(int port, const struct call *c) {
    struct reply r = {0};
    CURL *h = curl_easy_init();
    assert_non_null(h);
    char url[256], auth[256];
    snprintf(url, sizeof url, "http://%s:%d%s", c->host ? c->host : "127.0.0.1", port, c->path);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (c->auth) {
        snprintf(auth, sizeof auth, "Authorization: %s", c->auth);
        hdr = curl_slist_append(hdr, auth);
    }
    if (c->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(c->body));
    }
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
    serve_curl_perform(h, url, hdr, &r);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return r;
}

static struct reply get(int port, const char *path) {
    struct call c = {.method = "GET", .path = path};
    return http(port, &c);
}

static struct reply post(int port, const char *path, const char *body) {
    struct call c = {.method = "POST", .path = path, .body = body};
    return http(port, &c);
}

/* ---- answering and stopping ---- */

/* `jev serve` on port 0 as a child: its start line names the port, /health answers, SIGTERM stops it
 * with exit status 0 (under ASan: with nothing leaked). */
static void test_cli_serve_stops_on_sigterm(void **state) {
    (void)state;
    struct serve_child c = serve_child_start(model_dir, NULL, NULL);
    assert_true(c.pid > 0);
    struct reply r = {0};
    if (c.port > 0)
        r = get(c.port, "/health");
    int port = c.port;
    char line[sizeof c.line];
    snprintf(line, sizeof line, "%s", c.line);
    int status = serve_child_stop(&c, SIGTERM);
    if (port <= 0)
        fail_msg("jev serve: no start line naming its port (got '%s')", line);
    assert_int_equal(r.status, 200);
    free(r.body);
    serve_child_expect_clean_exit(status);
}

/* --max-tokens sizes the engine: a request longer than it is refused with the context error, not served */
static void test_cli_engine_size(void **state) {
    (void)state;
    const char *const extra[] = {"--max-tokens", "16", NULL};
    struct serve_child c = serve_child_start(model_dir, NULL, extra);
    assert_true(c.pid > 0);
    struct reply r = {0};
    if (c.port > 0)
        r = post(c.port, "/v1/systemone", so_body);
    int port = c.port;
    int status = serve_child_stop(&c, SIGTERM);
    assert_true(port > 0);
    assert_int_equal(r.status, 400);
    assert_non_null(r.body);
    if (!strstr(r.body, "exceed_context_size_error"))
        fail_msg("a 16-token engine answered: %s", r.body);
    free(r.body);
    serve_child_expect_clean_exit(status);
}

/* ---- `jev serve`'s options and exit statuses, through the binary ---- */

/* Runs `jev serve ARGS` to its end (an option it refuses: no model is loaded); returns the exit
 * status (-1 when it did not exit), its stderr and stdout in err and out. */
static int serve_refusal(const char *const *args, char *err, size_t err_size, char *out, size_t out_size) {
    const char *bin = getenv("JEV_JEV_BIN") ? getenv("JEV_JEV_BIN") : "build/jev";
    const char *argv[32] = {bin, "serve"};
    int argc = 2;
    for (int i = 0; args[i] && argc < 31; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    int e[2], o[2];
    assert_int_equal(pipe(e), 0);
    assert_int_equal(pipe(o), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(o[1], 1);
        dup2(e[1], 2);
        close(e[0]), close(e[1]), close(o[0]), close(o[1]);
        unsetenv("JEV_API_KEY");
        execv(bin, (char *const *)(uintptr_t)argv);
        _exit(127);
    }
    close(e[1]);
    close(o[1]);
    /* stderr to its end, then stdout (a few KiB: the pipe holds it meanwhile) */
    size_t ne = 0, no = 0;
    for (ssize_t k; (k = read(e[0], err + ne, err_size - 1 - ne)) > 0;)
        ne += (size_t)k;
    for (ssize_t k; (k = read(o[0], out + no, out_size - 1 - no)) > 0;)
        no += (size_t)k;
    err[ne] = '\0';
    out[no] = '\0';
    close(e[0]);
    close(o[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Every option with a value it refuses, an unknown option and one without its value: exit status 2
 * and a message naming the option and the value, before anything is loaded. */
static void test_cli_bad_options(void **state) {
    (void)state;
    static const struct {
        const char *opt, *value, *says;
    } cases[] = {
        {"--port", "70000", "bad value '70000' for --port"},
        {"--port", "8o", "bad value '8o' for --port"},
        {"--max-body", "0", "bad value '0' for --max-body"},
        {"--max-body", "33554433", "bad value '33554433' for --max-body"},
        {"--max-queue", "-1", "bad value '-1' for --max-queue"},
        {"--request-timeout", "-1", "bad value '-1' for --request-timeout"},
        {"--request-timeout", "2s", "bad value '2s' for --request-timeout"},
        {"--request-timeout", "nan", "bad value 'nan' for --request-timeout"},
        {"--idle-timeout", "86401", "bad value '86401' for --idle-timeout"},
        {"--http-threads", "0", "bad value '0' for --http-threads"},
        {"--threads", "x", "bad value 'x' for --threads"},
        {"--max-tokens", "0", "bad value '0' for --max-tokens"},
        {"--max-batch", "0", "bad value '0' for --max-batch"},
        {"--precision", "sideways", "bad value 'sideways' for --precision"},
        {"--max-batch", "2049", "bad value '2049' for --max-batch"},
        {"--max-running", "0", "bad value '0' for --max-running"},
        {"--read-timeout", "-1", "bad value '-1' for --read-timeout"},
        {"--max-connections", "0", "bad value '0' for --max-connections"},
        {"--step-tokens", "8", "bad value '8' for --step-tokens"},
        {"--prep-threads", "0", "bad value '0' for --prep-threads"},
        {"--nope", "1", "unknown or incomplete option '--nope'"},
        {"--host", NULL, "unknown or incomplete option '--host'"},
        {"--api-key", NULL, "unknown or incomplete option '--api-key'"},
        {"--port", NULL, "unknown or incomplete option '--port'"},
    };
    char err[8192], out[8192];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[] = {"--model", model_dir, cases[i].opt, cases[i].value, NULL};
        int rc = serve_refusal(args, err, sizeof err, out, sizeof out);
        if (rc != 2 || !strstr(err, cases[i].says) || !strstr(err, "usage: jev serve"))
            fail_msg("jev serve %s %s: exit status %d, stderr: %s", cases[i].opt, cases[i].value ? cases[i].value : "",
                     rc, err);
    }
    const char *none[] = {"--port", "0", NULL};
    assert_int_equal(serve_refusal(none, err, sizeof err, out, sizeof out), 2);
    assert_non_null(strstr(err, "--model is required"));
    const char *help[] = {"--help", NULL};
    assert_int_equal(serve_refusal(help, err, sizeof err, out, sizeof out), 0);
    assert_non_null(strstr(out, "--no-prefix-reuse"));
    assert_non_null(strstr(out, "3 when the"));
}

/* A path to a file of this test's own, for a child's stderr. */
static void err_file(const char *name, char *out, size_t size) { snprintf(out, size, "%s.%s.stderr", model_dir, name); }

static char *slurp_file(const char *path) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 16);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The exit status of a child that ends by itself (it could not start): -1 after 60 s. */
static int child_exit(struct serve_child *c) {
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 6000 && got == 0; i++) {
        got = waitpid(c->pid, &status, WNOHANG);
        if (got == 0)
            usleep(10000);
    }
    if (got == c->pid)
        c->pid = 0;
    serve_child_stop(c, SIGKILL);
    return got > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* It cannot start: a host that is not an address, a port in use. Exit status 1, saying why. */
static void test_cli_cannot_start(void **state) {
    (void)state;
    char path[1200];
    err_file("start", path, sizeof path);
    const char *const host[] = {"--host", "not-an-address", NULL};
    struct serve_opts o = {.model_dir = model_dir, .extra = host, .stderr_path = path};
    struct serve_child c = serve_child_run(&o);
    assert_int_equal(c.port, 0);
    assert_int_equal(child_exit(&c), 1);
    char *err = slurp_file(path);
    if (!strstr(err, "host 'not-an-address' is not a numeric"))
        fail_msg("stderr: %s", err);
    free(err);

    int held = socket(AF_INET, SOCK_STREAM, 0); /* holds a port */
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    assert_int_equal(bind(held, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(held, 1), 0);
    assert_int_equal(getsockname(held, (struct sockaddr *)&a, &alen), 0);
    char port[16];
    snprintf(port, sizeof port, "%d", ntohs(a.sin_port));
    const char *const busy[] = {"--port", port, NULL};
    o.extra = busy;
    c = serve_child_run(&o);
    assert_int_equal(c.port, 0);
    assert_int_equal(child_exit(&c), 1);
    close(held);
    err = slurp_file(path);
    if (!strstr(err, "cannot listen on 127.0.0.1 port") || !strstr(err, "in use"))
        fail_msg("stderr: %s", err);
    free(err);

    /* a mode the backend cannot run (fast with the CPU's bf16 kernels off, as on a CPU without
     * AVX512-BF16): refused at the engine, never served as another mode */
    const char *const fast[] = {"--precision", "fast", NULL};
    const char *const no_bf16[] = {"JEV_CPU_BF16=none", NULL};
    o.extra = fast;
    o.env = no_bf16;
    c = serve_child_run(&o);
    assert_int_equal(c.port, 0);
    assert_int_equal(child_exit(&c), 1);
    err = slurp_file(path);
    if (!strstr(err, "cpu backend: precision \"fast\"") || !strstr(err, "use precision exact"))
        fail_msg("stderr: %s", err);
    free(err);
}

/* A free port now (bound and released: nothing else on this machine takes ports from under a test). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* --host, --port, --api-key, --http-threads, --max-queue, --max-body, --idle-timeout and -v reach the
 * server: the start line says them, the key is required, the body limit is the one given, a silent
 * connection is closed after a second, and -v writes one line per request. */
static void test_cli_options_reach_the_server(void **state) {
    (void)state;
    char path[1200], port[16];
    err_file("options", path, sizeof path);
    int want_port = free_port();
    snprintf(port, sizeof port, "%d", want_port);
    const char *const extra[] = {"--host",      "127.0.0.1", "--port",     port,  "--http-threads", "3",
                                 "--max-queue", "5",         "--max-body", "300", "--idle-timeout", "1",
                                 "-v",          NULL};
    struct serve_opts o = {.model_dir = model_dir, .key = "sekrit", .extra = extra, .stderr_path = path};
    struct serve_child c = serve_child_run(&o);
    char line[sizeof c.line];
    snprintf(line, sizeof line, "%s", c.line);
    struct reply no_key = {0}, with_key = {0}, big = {0};
    bool idle_closed = false;
    if (c.port > 0) {
        struct call m = {.method = "GET", .path = "/v1/models"};
        no_key = http(c.port, &m);
        m.auth = "Bearer sekrit";
        with_key = http(c.port, &m);
        char body[400];
        memset(body, ' ', sizeof body - 1);
        body[sizeof body - 1] = '\0';
        struct call b = {.method = "POST", .path = "/v1/systemone", .body = body, .auth = "Bearer sekrit"};
        big = http(c.port, &b);
        /* half a request line, then silence: closed by the server within a few seconds */
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c.port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, "GET /hea", 8) == 8) {
            struct pollfd pf = {.fd = fd, .events = POLLIN};
            char buf[64];
            idle_closed = poll(&pf, 1, 20000) == 1 && read(fd, buf, sizeof buf) <= 0;
        }
        close(fd);
    }
    int status = serve_child_stop(&c, SIGTERM);
    char *err = slurp_file(path);
    if (c.port != 0 && want_port == 0)
        fail_msg("no port");
    if (!strstr(line, "http://127.0.0.1:") || serve_line_port(line) != want_port || !strstr(line, "3 HTTP threads") ||
        !strstr(line, "queue 5") || !strstr(line, "API key required"))
        fail_msg("the start line does not say the options (port %d): %s", want_port, line);
    assert_int_equal(no_key.status, 401);
    assert_int_equal(with_key.status, 200);
    if (big.status != 413 || !big.body || !strstr(big.body, "limit of 300"))
        fail_msg("a 399-byte body with --max-body 300: HTTP %ld %s", big.status, big.body ? big.body : "");
    assert_true(idle_closed);
    if (!strstr(err, "jev: GET /v1/models 401 ") || !strstr(err, "jev: GET /v1/models 200 ") ||
        !strstr(err, "jev: POST /v1/systemone 413 "))
        fail_msg("-v: no line per request in: %s", err);
    free(no_key.body);
    free(with_key.body);
    free(big.body);
    free(err);
    serve_child_expect_clean_exit(status);
}

/* --precision fast where the CPU has AVX512-BF16 (tests/cpu-flags.h): the server starts and names its
 * mode in GET /v1/models (elsewhere it exits 1 naming the missing feature). */
static void test_cli_fast(void **state) {
    (void)state;
    char path[1200];
    err_file("fast", path, sizeof path);
    const char *const fast[] = {"--precision", "fast", NULL};
    struct serve_opts o = {.model_dir = model_dir, .extra = fast, .stderr_path = path};
    struct serve_child c = serve_child_run(&o);
    if (!cpu_fast_mode()) {
        assert_int_equal(c.port, 0);
        assert_int_equal(child_exit(&c), 1);
        char *err = slurp_file(path);
        if (!strstr(err, "AVX512-BF16") || !strstr(err, "use precision exact"))
            fail_msg("stderr: %s", err);
        free(err);
        return;
    }
    struct reply r = {0};
    if (c.port > 0) {
        struct call m = {.method = "GET", .path = "/v1/models"};
        r = http(c.port, &m);
    }
    int status = serve_child_stop(&c, SIGTERM);
    assert_int_equal(r.status, 200);
    if (!r.body || !strstr(r.body, "\"precision\":\"fast\""))
        fail_msg("GET /v1/models in fast mode: %s", r.body ? r.body : "(no body)");
    free(r.body);
    serve_child_expect_clean_exit(status);
}

/* --host ::1: IPv6, the start line in brackets. */
static void test_cli_ipv6(void **state) {
    (void)state;
    const char *const extra[] = {"--host", "::1", NULL};
    struct serve_child c = serve_child_start(model_dir, NULL, extra);
    char line[sizeof c.line];
    snprintf(line, sizeof line, "%s", c.line);
    struct reply r = {0};
    if (c.port > 0) {
        struct call h = {.method = "GET", .path = "/health", .host = "[::1]"};
        r = http(c.port, &h);
    }
    int status = serve_child_stop(&c, SIGTERM);
    if (!strstr(line, "http://[::1]:"))
        fail_msg("start line: %s", line);
    assert_int_equal(r.status, 200);
    free(r.body);
    serve_child_expect_clean_exit(status);
}

/* --request-timeout in seconds, fractions allowed: a microsecond ends every decision with 504. */
static void test_cli_request_timeout(void **state) {
    (void)state;
    const char *const extra[] = {"--request-timeout", "0.000001", NULL};
    struct serve_child c = serve_child_start(model_dir, NULL, extra);
    struct reply r = {0};
    if (c.port > 0)
        r = post(c.port, "/v1/systemone", so_body);
    int status = serve_child_stop(&c, SIGTERM);
    if (r.status != 504 || !r.body || !strstr(r.body, "\"type\":\"timeout\""))
        fail_msg("--request-timeout 0.000001: HTTP %ld %s", r.status, r.body ? r.body : "");
    free(r.body);
    serve_child_expect_clean_exit(status);
}

/* The same request twice: the second forks from the kept prefix by default (-v says "prefix kept"),
 * and never with --no-prefix-reuse; the answers are the same bytes either way. */
static void test_cli_prefix_reuse(void **state) {
    (void)state;
    char *answers[2][2] = {{NULL}};
    char *logs[2];
    for (int off = 0; off < 2; off++) {
        char path[1200];
        err_file(off ? "no-reuse" : "reuse", path, sizeof path);
        const char *const with[] = {"-v", NULL}, *const without[] = {"-v", "--no-prefix-reuse", NULL};
        struct serve_opts o = {.model_dir = model_dir, .extra = off ? without : with, .stderr_path = path};
        struct serve_child c = serve_child_run(&o);
        for (int i = 0; i < 2 && c.port > 0; i++) {
            struct reply r = post(c.port, "/v1/systemone", so_body);
            answers[off][i] = r.status == 200 ? r.body : NULL;
            if (r.status != 200)
                free(r.body);
        }
        serve_child_expect_clean_exit(serve_child_stop(&c, SIGTERM));
        logs[off] = slurp_file(path);
    }
    for (int off = 0; off < 2; off++)
        for (int i = 0; i < 2; i++) {
            assert_non_null(answers[off][i]);
            assert_string_equal(answers[off][i], answers[0][0]);
        }
    for (int off = 0; off < 2; off++)
        for (int i = 0; i < 2; i++)
            free(answers[off][i]);
    const char *first = strstr(logs[0], "prefix computed");
    if (!first || !strstr(first, "prefix kept"))
        fail_msg("with reuse, the second request did not fork from the kept prefix: %s", logs[0]);
    const char *second = strstr(logs[1], "prefix computed");
    if (!second || !strstr(second + 1, "prefix computed") || strstr(logs[1], "prefix kept"))
        fail_msg("--no-prefix-reuse: %s", logs[1]);
    free(logs[0]);
    free(logs[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_serve_stops_on_sigterm),
        cmocka_unit_test(test_cli_engine_size),
        cmocka_unit_test(test_cli_bad_options),
        cmocka_unit_test(test_cli_cannot_start),
        cmocka_unit_test(test_cli_options_reach_the_server),
        cmocka_unit_test(test_cli_ipv6),
        cmocka_unit_test(test_cli_fast),
        cmocka_unit_test(test_cli_request_timeout),
        cmocka_unit_test(test_cli_prefix_reuse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
