/*
 * test-server.c - the HTTP server (src/server/server.h) in-process on an
 * ephemeral port over the tiny synthetic model, driven with libcurl: the
 * decision routes answer exactly what jev_decide_json answers for the same
 * body (both shapes, valid and refused); auth with and without a key; 404,
 * 405 with Allow, 413 by Content-Length and by a chunked body; /health and
 * /v1/models; distinct request ids; every refusal class with its status,
 * type and message (images over the size limits are 413, not 500); 4 client
 * threads at once; a full queue answering 429 with Retry-After while a
 * broken body still gets its own error; start/stop twice. Nothing waits on
 * a clock: the queue test holds the decider's lock and waits until the
 * server has admitted the request. `jev serve` itself, through the binary,
 * is tests/test-serve-cli.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jev.h"           // defines: jev_model_load, jev_decide_json
#include "model/engine.h"  // defines: struct jev_engine (its sequence state, to hold K/V pages)
#include "answer-diff.h"   // defines: answer_same_in_company
#include "server/server.h" // defines: jev_server_start, jev_server_stop, jev_server_lock
#include "serve-test.h"    // defines: struct reply, serve_curl_perform, serve_child_start
#include "tiny-model.h"    // defines: tiny_model_write, tiny_test_dir

static struct jev_model *model;
static struct jev_engine *engine;
static struct jev_decider *decider;
static char model_dir[1024];

static const char *so_body = "{\"model\":\"jev-latest\",\"state\":{\"note\":\"a red door\"},\"questions\":{"
                             "\"door\":{\"type\":\"noul\",\"instructions\":\"Is the door red?\"},"
                             "\"color\":{\"type\":\"choice\",\"instructions\":\"Which color?\","
                             "\"criteria\":{\"red\":null,\"blue\":\"like the sky\",\"green\":null}},"
                             "\"size\":{\"type\":\"score\",\"instructions\":\"How big?\",\"criteria\":[\"small\","
                             "\"large\"]}}}";
static const char *oa_body = "{\"model\":\"gpt-6-luna\",\"input\":\"text\",\"questions\":["
                             "{\"type\":\"predicate\",\"instructions\":\"Refund?\",\"name\":\"refund\"},"
                             "{\"type\":\"score\",\"instructions\":\"Mood?\",\"name\":\"mood\",\"levels\":[{\"label\":"
                             "\"calm\"},{\"label\":\"angry\"}]}]}";
static const char *bad_json = "{not json";
static const char *bad_score = "{\"state\":\"x\",\"questions\":{\"q\":{\"type\":\"score\",\"instructions\":\"How?\","
                               "\"criteria\":[\"only one\"]}}}";

/* ---- fixtures ---- */

static int setup(void **state) {
    (void)state;
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_tokens = 2048;
    ep.max_batch = 8;
    if (tiny_decider_open("server", 2, &ep, model_dir, sizeof model_dir, &model, &engine, &decider) != 0)
        return -1;
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    curl_global_cleanup();
    jev_decider_close(decider);
    jev_engine_free(engine);
    jev_model_free(model);
    return 0;
}

static struct jev_server *start(const struct jev_server_params *p) {
    struct jev_server *s = NULL;
    struct jev_error err = {0};
    enum jev_status st = jev_server_start(model, decider, p, &s, &err);
    if (st != JEV_OK)
        fprintf(stderr, "start: %s\n", err.msg);
    assert_int_equal(st, JEV_OK);
    assert_true(jev_server_port(s) > 0);
    return s;
}

static struct jev_server_params params(void) {
    struct jev_server_params p = jev_server_default_params();
    p.port = 0;
    return p;
}

/* What the decide layer answers for a body, asked directly (under the server's lock when one runs). */
static char *direct(struct jev_server *s, const char *body, enum jev_request_format f, int32_t *http) {
    char *resp = NULL;
    if (s)
        jev_server_lock(s);
    jev_decide_json(decider, body, strlen(body), f, &resp, http);
    if (s)
        jev_server_unlock(s);
    assert_non_null(resp);
    return resp;
}

/* ---- one HTTP exchange ---- */

/* A chunked upload of `chunked_len` bytes of spaces, fed piece by piece. */
struct feed {
    size_t left;
};

static size_t on_read(char *p, size_t size, size_t n, void *u) {
    struct feed *f = u;
    size_t k = size * n < f->left ? size * n : f->left;
    k = k > 1000 ? 1000 : k;
    memset(p, ' ', k);
    f->left -= k;
    return k;
}

struct call {
    const char *method; /* "GET", "POST", ... */
    const char *path;
    const char *body;     /* POST body; NULL = none */
    size_t body_len;      /* 0 = strlen(body) */
    const char *auth;     /* Authorization header value; NULL = none */
    bool expect_continue; /* send Expect: 100-continue (the client waits for the server's go) */
    size_t chunked_len;   /* > 0: a chunked body of this many bytes instead of body */
};

static struct reply http(int32_t port, const struct call *c) {
    struct reply r = {0};
    CURL *h = curl_easy_init();
    assert_non_null(h);
    char url[256], auth[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, c->path);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (c->auth) {
        snprintf(auth, sizeof auth, "Authorization: %s", c->auth);
        hdr = curl_slist_append(hdr, auth);
    }
    hdr = curl_slist_append(hdr, c->expect_continue ? "Expect: 100-continue" : "Expect:");
    struct feed feed = {c->chunked_len};
    if (c->chunked_len) {
        hdr = curl_slist_append(hdr, "Transfer-Encoding: chunked");
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, &feed);
    } else if (c->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(c->body_len ? c->body_len : strlen(c->body)));
    }
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
    if (!strcmp(c->method, "HEAD"))
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 600000L); /* wait for the server, never guess */
    CURLcode rc = serve_curl_perform(h, url, hdr, &r);
    if (rc != CURLE_OK)
        fprintf(stderr, "curl %s %s: %s\n", c->method, c->path, curl_easy_strerror(rc));
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return r;
}

static struct reply post(int32_t port, const char *path, const char *body) {
    struct call c = {.method = "POST", .path = path, .body = body};
    return http(port, &c);
}

static struct reply get(int32_t port, const char *path) {
    struct call c = {.method = "GET", .path = path};
    return http(port, &c);
}

/* The headers every response carries, and an error body of the decide layer's shape. */
static void check_common(const struct reply *r) {
    assert_true(r->curl_ok);
    assert_string_equal(r->ctype, "application/json");
    assert_true(strlen(r->id) > 4);
}

static void check_error(const struct reply *r, long status, const char *type) {
    check_common(r);
    assert_int_equal(r->status, status);
    json_t *j = json_loads(r->body ? r->body : "", 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_object_size(j), 1);
    json_t *e = json_object_get(j, "error");
    assert_int_equal(json_object_size(e), 3);
    assert_string_equal(json_string_value(json_object_get(e, "type")), type);
    assert_int_equal(json_integer_value(json_object_get(e, "code")), status);
    assert_true(strlen(json_string_value(json_object_get(e, "message"))) > 0);
    json_decref(j);
}

/* ---- tests ---- */

static void same_as_direct(struct jev_server *s, const char *path, const char *body, enum jev_request_format f,
                           int32_t want_http) {
    int32_t http_status = 0;
    char *want = direct(s, body, f, &http_status);
    assert_int_equal(http_status, want_http);
    struct reply r = post(jev_server_port(s), path, body);
    check_common(&r);
    assert_int_equal(r.status, http_status);
    assert_non_null(r.body);
    assert_string_equal(r.body, want);
    jev_free(want);
    free(r.body);
}

static void test_decisions_match_the_decide_layer(void **state) {
    (void)state;
    struct jev_server_params p = params();
    struct jev_server *s = start(&p);
    same_as_direct(s, "/v1/systemone", so_body, JEV_REQUEST_SYSTEMONE, 200);
    same_as_direct(s, "/v1/decisions", oa_body, JEV_REQUEST_OPENAI, 200);
    /* refusals: the status and the error body are the decide layer's, byte for byte */
    same_as_direct(s, "/v1/systemone", bad_json, JEV_REQUEST_SYSTEMONE, 400);
    same_as_direct(s, "/v1/systemone", bad_score, JEV_REQUEST_SYSTEMONE, 422);
    same_as_direct(s, "/v1/decisions", so_body, JEV_REQUEST_OPENAI, 422);
    /* an empty body is the decide layer's 400 too */
    struct call c = {.method = "POST", .path = "/v1/systemone", .body = ""};
    struct reply r = http(jev_server_port(s), &c);
    check_error(&r, 400, "invalid_request_error");
    free(r.body);
    jev_server_stop(s);
}

static void test_auth(void **state) {
    (void)state;
    struct jev_server_params p = params();
    p.api_key = "sekrit-key";
    struct jev_server *s = start(&p);
    int32_t port = jev_server_port(s);
    const char *wrong[] = {NULL,         "Bearer wrong",    "Bearer sekrit-ke", "Bearer sekrit-key2",
                           "sekrit-key", "Basic sekrit-key"};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        struct call c = {.method = "POST", .path = "/v1/systemone", .body = so_body, .auth = wrong[i]};
        struct reply r = http(port, &c);
        check_error(&r, 401, "authentication_error");
        free(r.body);
        struct call m = {.method = "GET", .path = "/v1/models", .auth = wrong[i]};
        r = http(port, &m);
        check_error(&r, 401, "authentication_error");
        free(r.body);
    }
    struct call ok = {.method = "POST", .path = "/v1/systemone", .body = so_body, .auth = "Bearer sekrit-key"};
    struct reply r = http(port, &ok);
    check_common(&r);
    assert_int_equal(r.status, 200);
    free(r.body);
    r = get(port, "/health"); /* open, for load balancers */
    assert_int_equal(r.status, 200);
    free(r.body);
    jev_server_stop(s);

    /* no key configured: with or without a header */
    p = params();
    s = start(&p);
    port = jev_server_port(s);
    r = post(port, "/v1/systemone", so_body);
    check_common(&r);
    assert_int_equal(r.status, 200);
    free(r.body);
    struct call any = {.method = "POST", .path = "/v1/systemone", .body = so_body, .auth = "Bearer anything"};
    r = http(port, &any);
    assert_int_equal(r.status, 200);
    free(r.body);
    jev_server_stop(s);
}

static void test_routes(void **state) {
    (void)state;
    struct jev_server_params p = params();
    struct jev_server *s = start(&p);
    int32_t port = jev_server_port(s);
    struct reply r = get(port, "/health");
    check_common(&r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"status\":\"ok\"}");
    free(r.body);

    r = get(port, "/v1/models");
    check_common(&r);
    assert_int_equal(r.status, 200);
    json_t *j = json_loads(r.body, 0, NULL);
    assert_non_null(j);
    json_t *m0 = json_array_get(json_object_get(j, "models"), 0);
    assert_int_equal(json_array_size(json_object_get(j, "models")), 1);
    assert_string_equal(json_string_value(json_object_get(m0, "name")), strrchr(model_dir, '/') + 1);
    assert_true(json_is_string(json_object_get(m0, "description")));
    assert_non_null(json_object_get(m0, "release_date"));
    /* the engine's mode, in both clients' shapes */
    assert_string_equal(json_string_value(json_object_get(m0, "precision")), "exact");
    json_t *d0 = json_array_get(json_object_get(j, "data"), 0);
    assert_string_equal(json_string_value(json_object_get(d0, "precision")), "exact");
    assert_non_null(strstr(json_string_value(json_object_get(m0, "description")), "exact precision"));
    json_decref(j);
    free(r.body);

    r = get(port, "/v1/nope");
    check_error(&r, 404, "not_found_error");
    free(r.body);
    r = post(port, "/", so_body);
    check_error(&r, 404, "not_found_error");
    free(r.body);

    r = get(port, "/v1/systemone");
    check_error(&r, 405, "invalid_request_error");
    assert_string_equal(r.allow, "POST");
    free(r.body);
    struct call put = {.method = "PUT", .path = "/v1/decisions", .body = oa_body};
    r = http(port, &put);
    check_error(&r, 405, "invalid_request_error");
    assert_string_equal(r.allow, "POST");
    free(r.body);
    r = post(port, "/health", "{}");
    check_error(&r, 405, "invalid_request_error");
    assert_string_equal(r.allow, "GET, HEAD");
    free(r.body);
    jev_server_stop(s);
}

static void test_body_limit(void **state) {
    (void)state;
    struct jev_server_params p = params();
    p.max_body_bytes = strlen(so_body) + 10;
    struct jev_server *s = start(&p);
    int32_t port = jev_server_port(s);
    /* under the limit: answered */
    struct reply r = post(port, "/v1/systemone", so_body);
    assert_int_equal(r.status, 200);
    free(r.body);
    /* a declared length over the limit: refused before the body is sent */
    size_t n = p.max_body_bytes + 1;
    char *big = malloc(n + 1);
    assert_non_null(big);
    memset(big, ' ', n);
    big[n] = '\0';
    struct call c = {.method = "POST", .path = "/v1/systemone", .body = big, .expect_continue = true};
    r = http(port, &c);
    check_error(&r, 413, "request_too_large_error");
    assert_string_equal(r.retry, ""); /* 413 never invites a retry (spec §1) */
    free(r.body);
    /* a chunked body with no length: dropped past the limit, then refused */
    struct call ch = {.method = "POST", .path = "/v1/decisions", .chunked_len = 8 * n};
    r = http(port, &ch);
    check_error(&r, 413, "request_too_large_error");
    free(r.body);
    /* exactly at the limit: passes the server (the decide layer answers it) */
    memcpy(big, so_body, strlen(so_body));
    c.body_len = p.max_body_bytes;
    c.expect_continue = false;
    r = http(port, &c);
    assert_int_equal(r.status, 200);
    free(r.body);
    free(big);
    jev_server_stop(s);
}

static void test_request_ids_differ(void **state) {
    (void)state;
    struct jev_server_params p = params();
    struct jev_server *s = start(&p);
    int32_t port = jev_server_port(s);
    char ids[6][64];
    for (int i = 0; i < 6; i++) {
        struct reply r = i % 3 == 0   ? get(port, "/health")
                         : i % 3 == 1 ? post(port, "/v1/systemone", so_body)
                                      : get(port, "/missing");
        check_common(&r);
        snprintf(ids[i], sizeof ids[i], "%s", r.id);
        free(r.body);
        for (int k = 0; k < i; k++)
            assert_string_not_equal(ids[i], ids[k]);
    }
    jev_server_stop(s);
}

/* ---- every refusal class ---- */

/* PNG by hand: the CRC of each chunk, and IDAT as zlib's stored blocks (no compression library). */
static uint32_t crc32_of(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    return ~c;
}

static size_t put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
    return 4;
}

static size_t png_chunk(uint8_t *out, const char *type, const uint8_t *data, size_t n) {
    size_t at = put32(out, (uint32_t)n);
    memcpy(out + at, type, 4);
    if (n)
        memcpy(out + at + 4, data, n);
    at += put32(out + at + 4 + n, crc32_of(out + 4, 4 + n)) + 4 + n;
    return at;
}

/* An 8-bit RGB PNG of w x h, grey: the rows in stored deflate blocks when with_pixels, else the
 * header alone (what a decoder reads before it allocates). malloc'd, length in *len. */
static uint8_t *png(uint32_t w, uint32_t h, bool with_pixels, size_t *len) {
    size_t row = 1 + (size_t)w * 3, raw = with_pixels ? (size_t)h * row : 0;
    size_t blocks = (raw + 65534) / 65535;
    uint8_t *out = calloc(1, 128 + raw + blocks * 5 + 16);
    uint8_t *idat = calloc(1, raw + blocks * 5 + 16);
    uint8_t *pix = malloc(raw + 1);
    assert_true(out && idat && pix);
    memcpy(out, "\x89PNG\r\n\x1a\n", 8);
    uint8_t ihdr[13] = {0, 0, 0, 0, 0, 0, 0, 0, 8, 2, 0, 0, 0};
    put32(ihdr, w);
    put32(ihdr + 4, h);
    size_t at = 8 + png_chunk(out + 8, "IHDR", ihdr, 13);
    if (with_pixels) {
        uint32_t a = 1, b = 0; /* adler32 */
        for (size_t i = 0; i < raw; i++) {
            pix[i] = i % row == 0 ? 0 : 0x80; /* filter type 0, then grey */
            a = (a + pix[i]) % 65521;
            b = (b + a) % 65521;
        }
        size_t n = 0;
        idat[n++] = 0x78, idat[n++] = 0x01;
        for (size_t off = 0; off < raw;) {
            size_t k = raw - off > 65535 ? 65535 : raw - off;
            idat[n++] = off + k == raw; /* BFINAL on the last, BTYPE 00: stored */
            idat[n++] = (uint8_t)k, idat[n++] = (uint8_t)(k >> 8);
            idat[n++] = (uint8_t)~k, idat[n++] = (uint8_t)(~k >> 8);
            memcpy(idat + n, pix + off, k);
            n += k;
            off += k;
        }
        n += put32(idat + n, b << 16 | a);
        at += png_chunk(out + at, "IDAT", idat, n);
    }
    at += png_chunk(out + at, "IEND", NULL, 0);
    free(idat);
    free(pix);
    *len = at;
    return out;
}

static char *base64(const uint8_t *p, size_t n) {
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    assert_non_null(out);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* A System One request about an image (png bytes, taken over). */
static char *image_request(uint8_t *png_bytes, size_t n) {
    char *b64 = base64(png_bytes, n);
    free(png_bytes);
    size_t size = strlen(b64) + 256;
    char *body = malloc(size);
    assert_non_null(body);
    snprintf(body, size,
             "{\"state\":\"x\",\"images\":[\"data:image/png;base64,%s\"],\"questions\":{\"q\":{\"type\":\"noul\","
             "\"instructions\":\"Is it?\"}}}",
             b64);
    free(b64);
    return body;
}

/* Each way a request is refused, over HTTP: its status, error type and a message naming what was
 * wrong. What the request caused is 4xx, never 5xx: clients retry 5xx (the TypeScript SDK twice).
 * Refusals of the bytes themselves (400/414/431/501/505 of HTTP) are tests/test-http.c's, a full
 * queue (429) is test_full_queue_is_429's, a lost device (503) and the status of every run failure
 * are tests/test-device-fault.c's, the time limit (504) test_time_limit_is_504's. */
static void test_refusal_classes(void **state) {
    (void)state;
    struct jev_server_params p = params();
    p.api_key = "k";
    p.max_body_bytes = 4 << 20;
    struct jev_server *s = start(&p);
    int32_t port = jev_server_port(s);
    size_t n = 0;
    uint8_t *bytes = png(60000, 60000, false, &n); /* a header that claims 60000x60000 */
    char *wide = image_request(bytes, n);
    bytes = png(17000, 8, true, &n); /* a real 17000x8 image */
    char *real = image_request(bytes, n);
    bytes = png(9000, 9000, false, &n); /* 81 Mpx, each side under the limit */
    char *many = image_request(bytes, n);
    char *broken = image_request((uint8_t *)strdup("\x89PNG\r\n\x1a\nnot a png"), 17);
    char *questions = malloc(4200 * 64);
    assert_non_null(questions);
    int k = sprintf(questions, "{\"state\":\"x\",\"questions\":{");
    for (int i = 0; i < 4097; i++)
        k += sprintf(questions + k, "%s\"q%d\":{\"type\":\"noul\",\"instructions\":\"?\"}", i ? "," : "", i);
    sprintf(questions + k, "}}");
    char *context = malloc(40000);
    assert_non_null(context);
    k = sprintf(context, "{\"state\":\"");
    for (int i = 0; i < 3000; i++)
        k += sprintf(context + k, "w%d ", i);
    sprintf(context + k, "\",\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"?\"}}}");
    const char *multipart = "{\"state\":{\"p\":\"a\"},\"assets\":{\"a\":{\"type\":\"image\",\"part\":1}},"
                            "\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"?\"}}}";
    static const char *const key = "Bearer k";
    const struct {
        const char *what, *method, *path, *body, *auth;
        long status;
        const char *type, *names; /* names: what the message must say */
    } cases[] = {
        {"no such path", "GET", "/v1/nope", NULL, key, 404, "not_found_error", "/v1/nope"},
        {"wrong method", "DELETE", "/v1/systemone", NULL, key, 405, "invalid_request_error", "POST"},
        {"no key", "POST", "/v1/systemone", so_body, NULL, 401, "authentication_error", "Bearer"},
        {"not JSON", "POST", "/v1/systemone", bad_json, key, 400, "invalid_request_error", ""},
        {"invalid", "POST", "/v1/systemone", bad_score, key, 422, "unprocessable_entity_error", "criteria"},
        {"too many questions", "POST", "/v1/systemone", questions, key, 413, "request_too_large_error", "4096"},
        {"multipart asset", "POST", "/v1/systemone", multipart, key, 501, "not_supported_error", "multipart"},
        {"image that does not decode", "POST", "/v1/systemone", broken, key, 400, "invalid_request_error", "PNG"},
        {"60000x60000 image", "POST", "/v1/systemone", wide, key, 413, "request_too_large_error", "16384"},
        {"17000x8 image", "POST", "/v1/systemone", real, key, 413, "request_too_large_error", "16384"},
        {"81 Mpx image", "POST", "/v1/systemone", many, key, 413, "request_too_large_error", "67108864"},
        {"context beyond the engine", "POST", "/v1/systemone", context, key, 400, "exceed_context_size_error", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct call c = {
            .method = cases[i].method, .path = cases[i].path, .body = cases[i].body, .auth = cases[i].auth};
        struct reply r = http(port, &c);
        if (r.status != cases[i].status || !r.body || !strstr(r.body, cases[i].type) || !strstr(r.body, cases[i].names))
            fail_msg("%s: HTTP %ld %s, expected %ld %s naming '%s'", cases[i].what, r.status, r.body ? r.body : "",
                     cases[i].status, cases[i].type, cases[i].names);
        check_error(&r, cases[i].status, cases[i].type);
        free(r.body);
    }
    /* the same kind of image, small: answered, so the refusals above are the size limits' */
    bytes = png(64, 8, true, &n);
    char *small = image_request(bytes, n);
    struct call ok = {.method = "POST", .path = "/v1/systemone", .body = small, .auth = key};
    struct reply r = http(port, &ok);
    if (r.status != 200)
        fail_msg("a 64x8 image: HTTP %ld %s", r.status, r.body ? r.body : "");
    free(r.body);
    free(small);
    free(wide);
    free(real);
    free(many);
    free(broken);
    free(questions);
    free(context);
    jev_server_stop(s);
}

/* ---- concurrency ---- */

struct client {
    int32_t port;
    int idx;             /* which client: starts the alternation of shapes */
    const char *want_so; /* expected bodies */
    const char *want_oa;
    int ok;       /* requests answered as expected */
    double worst; /* the largest difference of a probability from the request's answer alone */
};

static void *client_main(void *u) {
    struct client *c = u;
    for (int i = 0; i < 3; i++) {
        bool so = (i + c->idx) % 2 == 0;
        struct reply r = post(c->port, so ? "/v1/systemone" : "/v1/decisions", so ? so_body : oa_body);
        /* in company: the same bytes where the CPU kernels allow it, else within 1e-6 with the same keys,
         * choices and usage (the scheduler's contract, docs/server.md) */
        double d = -1;
        if (r.curl_ok && r.status == 200 && answer_same_in_company(r.body, so ? c->want_so : c->want_oa, &d))
            c->ok++;
        c->worst = d > c->worst ? d : c->worst;
        free(r.body);
    }
    return NULL;
}

static void test_concurrent_clients(void **state) {
    (void)state;
    struct jev_server_params p = params();
    p.http_threads = 4;
    struct jev_server *s = start(&p);
    int32_t http_status = 0;
    char *want_so = direct(s, so_body, JEV_REQUEST_SYSTEMONE, &http_status);
    char *want_oa = direct(s, oa_body, JEV_REQUEST_OPENAI, &http_status);
    struct client cl[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        cl[i] = (struct client){.port = jev_server_port(s), .idx = i, .want_so = want_so, .want_oa = want_oa};
        assert_int_equal(pthread_create(&th[i], NULL, client_main, &cl[i]), 0);
    }
    double worst = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(cl[i].ok, 3);
        worst = fmax(worst, cl[i].worst);
    }
    printf("4 clients at once: max |dp| from the answers alone %.3g\n", worst);
    assert_int_equal(jev_server_queued(s), 0);
    jev_free(want_so);
    jev_free(want_oa);
    jev_server_stop(s);
}

struct held {
    int32_t port;
    struct reply r;
};

static void *held_main(void *u) {
    struct held *h = u;
    h->r = post(h->port, "/v1/systemone", so_body);
    return NULL;
}

static void test_full_queue_is_429(void **state) {
    (void)state;
    struct jev_server_params p = params();
    p.max_queue = 0; /* one decision at a time, nobody waits */
    p.max_running = 1;
    p.http_threads = 2;
    struct jev_server *s = start(&p);
    int32_t port = jev_server_port(s), http_status = 0;
    char *want = direct(s, so_body, JEV_REQUEST_SYSTEMONE, &http_status);
    jev_server_lock(s); /* the decider is busy */
    struct held h = {.port = port};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, held_main, &h), 0);
    while (jev_server_queued(s) < 1) /* the held request is admitted and waits for the lock */
        sched_yield();
    struct reply r = post(port, "/v1/systemone", so_body);
    check_error(&r, 429, "rate_limit_error");
    assert_string_equal(r.retry, "1");
    free(r.body);
    /* validation comes before the gate: a broken body gets its own status even now */
    r = post(port, "/v1/systemone", bad_score);
    check_error(&r, 422, "unprocessable_entity_error");
    free(r.body);
    r = get(port, "/health");
    assert_int_equal(r.status, 200);
    free(r.body);
    jev_server_unlock(s);
    pthread_join(th, NULL);
    assert_int_equal(h.r.status, 200);
    assert_string_equal(h.r.body, want);
    free(h.r.body);
    jev_free(want);
    jev_server_stop(s);
}

/* ---- lifecycle ---- */

static void test_start_stop_twice(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++) {
        struct jev_server_params p = params();
        struct jev_server *s = start(&p);
        struct reply r = get(jev_server_port(s), "/health");
        assert_int_equal(r.status, 200);
        free(r.body);
        jev_server_stop(s);
    }
    jev_server_stop(NULL);
}

static void test_bad_params(void **state) {
    (void)state;
    struct jev_server *s = NULL;
    struct jev_error err = {0};
    struct jev_server_params p = params();
    p.host = "not-an-address";
    assert_int_not_equal(jev_server_start(model, decider, &p, &s, &err), JEV_OK);
    assert_null(s);
    assert_non_null(strstr(err.msg, "not-an-address"));

    /* a port in use: the second server says so */
    p = params();
    struct jev_server *first = start(&p);
    p.port = jev_server_port(first);
    jev_error_clear(&err);
    assert_int_equal(jev_server_start(model, decider, &p, &s, &err), JEV_ERR_IO);
    assert_null(s);
    assert_non_null(strstr(err.msg, "cannot listen"));
    jev_server_stop(first);

    p = params();
    p.max_queue = -1;
    jev_error_clear(&err);
    assert_int_equal(jev_server_start(model, decider, &p, &s, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "max_queue"));
    assert_null(s);

    p = params();
    p.max_body_bytes = JEV_SERVER_MAX_BODY_DEFAULT + 1; /* more than the decide layer would accept */
    jev_error_clear(&err);
    assert_int_equal(jev_server_start(model, decider, &p, &s, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "max_body_bytes"));
    assert_null(s);
}

/* A client that connects and goes silent is disconnected after idle_timeout_s, and a
 * connection that works is not (the server keeps answering). Waits at most 20 s. */
static void test_idle_connection_is_closed(void **state) {
    (void)state;
    struct jev_server_params p = params();
    p.idle_timeout_s = 1;
    struct jev_server *s = start(&p);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)jev_server_port(s))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    /* half a request line, then silence */
    assert_int_equal(write(fd, "GET /hea", 8), 8);
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int ready = poll(&pf, 1, 20000);
    assert_int_equal(ready, 1);
    char buf[64];
    assert_true(read(fd, buf, sizeof buf) <= 0); /* closed by the server, nothing answered */
    close(fd);
    struct reply r = get(jev_server_port(s), "/health");
    assert_int_equal(r.status, 200);
    free(r.body);
    jev_server_stop(s);

    struct jev_error err = {0};
    p = params();
    p.idle_timeout_s = -1;
    assert_int_equal(jev_server_start(model, decider, &p, &s, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "idle_timeout_s"));
}

/* A request past the decider's time limit comes back as 504 with the timeout error body. */
static void test_time_limit_is_504(void **state) {
    (void)state;
    struct jev_server_params p = params();
    struct jev_server *s = start(&p);
    jev_decider_set_timeout(decider, 0.001);
    struct reply r = post(jev_server_port(s), "/v1/systemone", so_body);
    jev_decider_set_timeout(decider, 0);
    assert_int_equal(r.status, 504);
    assert_non_null(strstr(r.body, "\"timeout\""));
    free(r.body);
    r = post(jev_server_port(s), "/v1/systemone", so_body);
    assert_int_equal(r.status, 200);
    free(r.body);
    jev_server_stop(s);
}

/* K/V pages held by someone else (the embedding program, between steps) leave a request less than one
 * question needs: 413 request_too_large_error naming its need and the budget, not a 400 from deep in
 * the state; once they are given back the same request is answered. */
static void test_kv_budget_is_413(void **state) {
    (void)state;
    struct jev_server_params p = params();
    struct jev_server *s = start(&p);
    int32_t port = jev_server_port(s);
    struct jev_error err = {0};
    jev_server_lock(s);
    jev_decider_set_prefix_reuse(decider, false); /* no kept prefix: every page is free or held below */
    jev_decider_set_prefix_reuse(decider, true);
    struct jev_state *st = &engine->state;
    struct jev_seq *held[8] = {0};
    int n_held = 0;
    while (st->n_free > 1 && n_held < 8) { /* all pages but one, a sequence's worth at a time */
        int32_t pages = st->n_free - 1 < st->max_pages ? st->n_free - 1 : st->max_pages;
        assert_int_equal(jev_seq_new(st, &held[n_held], &err), JEV_OK);
        assert_int_equal(jev_seq_reserve(held[n_held], pages * JEV_KV_PAGE, &err), JEV_OK);
        n_held++;
    }
    assert_int_equal(st->n_free, 1);
    jev_server_unlock(s);
    struct reply r = post(port, "/v1/systemone", so_body);
    jev_server_lock(s);
    for (int i = 0; i < n_held; i++)
        jev_seq_free(held[i]);
    jev_server_unlock(s);
    struct reply ok = post(port, "/v1/systemone", so_body);
    jev_server_stop(s);
    printf("%ld %s\n", r.status, r.body ? r.body : "");
    check_error(&r, 413, "request_too_large_error");
    assert_non_null(strstr(r.body, "K/V tokens at once"));
    assert_non_null(strstr(r.body, "beyond the 64 this engine can give it"));
    assert_int_equal(ok.status, 200);
    free(r.body);
    free(ok.body);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decisions_match_the_decide_layer),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_body_limit),
        cmocka_unit_test(test_request_ids_differ),
        cmocka_unit_test(test_refusal_classes),
        cmocka_unit_test(test_concurrent_clients),
        cmocka_unit_test(test_full_queue_is_429),
        cmocka_unit_test(test_start_stop_twice),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_idle_connection_is_closed),
        cmocka_unit_test(test_time_limit_is_504),
        cmocka_unit_test(test_kv_budget_is_413),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
